//! `hush bench aes3`: secure AES-128 throughput with three node processes
//! over loopback — the benchmark of Araki et al. (CCS 2016, Table/§5) and
//! of the datacenter paper (Table I: 1.32 M AES/s on 20 cores).
//!
//! The bench starts three `node` processes of an executable (the current
//! one by default, `--exe` or `HUSH_EXE` to override), runs a one-chunk
//! warm-up job (ring set-up and key agreement happen there: `setup_s`),
//! then one timed job of `n` AES evaluations on random keys and plaintexts
//! (`wall_s`: from sending the job to the last reconstructed output,
//! including input sharing and reconstruction), and checks a sample of
//! instances against software AES.

use crate::error::{Error, Result};
use crate::service::{random_input_bits, run_job, CircuitSpec, Inputs, DEFAULT_CHUNK_WORDS};
use aes::cipher::{BlockEncrypt, KeyInit};
use hush_transport::{ChannelOptions, Fingerprint, Identity, LinkConfig, Pins};
use std::sync::Arc;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug, Clone)]
pub struct BenchAes3Args {
    /// Number of AES-128 evaluations.
    #[arg(long, default_value_t = 1 << 20)]
    pub n: u64,
    /// Emulated network on the ring links: none, lan, wan, mobile.
    #[arg(long, default_value = "none")]
    pub net: String,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Instances per chunk = 64 × this.
    #[arg(long, default_value_t = DEFAULT_CHUNK_WORDS)]
    pub chunk_words: usize,
    /// Chunks in flight per party (1..=8): hides the ring latency.
    #[arg(long, default_value_t = 1)]
    pub streams: usize,
    /// Executable that provides the `node` subcommand (default: this one,
    /// or $HUSH_EXE).
    #[arg(long)]
    pub exe: Option<PathBuf>,
    /// Instances checked against software AES.
    #[arg(long, default_value_t = 64)]
    pub verify: u64,
    /// Plaintext links (default: TLS 1.3 between all parties, with an
    /// identity per node made for the run and every peer pinned).
    #[arg(long)]
    pub insecure: bool,
    /// Run twice, plaintext then TLS, and report TLS's overhead (time and
    /// socket bytes) beside the plaintext figures.
    #[arg(long)]
    pub tls_overhead: bool,
}

/// Identities of a benchmark's three nodes (in a temporary folder that is
/// removed afterwards) and the job submitter's link pinning all three.
struct RunIdentities {
    dir: PathBuf,
    dirs: [PathBuf; 3],
    fps: [Fingerprint; 3],
}

impl RunIdentities {
    fn new() -> Result<Self> {
        let dir = std::env::temp_dir().join(format!("hush-aes3-{}-{}", std::process::id(), crate::prf::os_seed().map(|s| s[0]).unwrap_or(0)));
        let dirs: [PathBuf; 3] = std::array::from_fn(|i| dir.join(format!("node{i}")));
        let mut fps = [Fingerprint([0; 32]); 3];
        for i in 0..3 {
            fps[i] = hush_transport::peering::keygen(&dirs[i]).map_err(|e| Error::Local(format!("identity for node {i}: {e}")))?;
        }
        Ok(RunIdentities { dir, dirs, fps })
    }
    fn pins(&self, addrs: &[String; 3], except: Option<usize>) -> Vec<String> {
        (0..3).filter(|&j| Some(j) != except).map(|j| format!("{}={}", addrs[j], self.fps[j])).collect()
    }
}

impl Drop for RunIdentities {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

struct Nodes(Vec<Child>);
impl Drop for Nodes {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let deadline = Instant::now() + Duration::from_secs(3);
            loop {
                match c.try_wait() {
                    Ok(Some(_)) => break,
                    Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                    _ => {
                        let _ = c.kill();
                        let _ = c.wait();
                        break;
                    }
                }
            }
        }
    }
}

fn free_ports() -> Result<[u16; 3]> {
    let ls: Vec<std::net::TcpListener> = (0..3)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<_>>()
        .map_err(|e| Error::Local(format!("no free loopback port: {e}")))?;
    let mut p = [0u16; 3];
    for (i, l) in ls.iter().enumerate() {
        p[i] = l.local_addr().map_err(|e| Error::Local(e.to_string()))?.port();
    }
    Ok(p)
}

/// Starts three node processes of `exe` on loopback; they exit after
/// `jobs` jobs (and are killed when the handle drops).
fn spawn_nodes(exe: &PathBuf, net: &str, jobs: u64, ids: Option<&RunIdentities>) -> Result<(Nodes, [String; 3])> {
    let ports = free_ports()?;
    let addrs: [String; 3] = ports.map(|p| format!("127.0.0.1:{p}"));
    let peers = addrs.join(",");
    let mut nodes = Nodes(Vec::new());
    for (i, addr) in addrs.iter().enumerate() {
        let mut link_args: Vec<String> = Vec::new();
        match ids {
            Some(ids) => {
                link_args.push("--identity".into());
                link_args.push(ids.dirs[i].display().to_string());
                for p in ids.pins(&addrs, Some(i)) {
                    link_args.push("--pin".into());
                    link_args.push(p);
                }
            }
            None => link_args.push("--insecure".into()),
        }
        let child = Command::new(exe)
            .args(["node", "--party", &i.to_string(), "--peers", &peers, "--listen", addr, "--net", net])
            .args(["--max-jobs", &jobs.to_string()])
            .args(&link_args)
            .stderr(Stdio::null())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| Error::Local(format!("cannot start node {i} ({}): {e}", exe.display())))?;
        nodes.0.push(child);
    }
    Ok((nodes, addrs))
}

fn aes_ref(key: &[u8], pt: &[u8]) -> Vec<u8> {
    let c = aes::Aes128::new_from_slice(key).expect("16-byte key");
    let mut b = aes::Block::clone_from_slice(pt);
    c.encrypt_block(&mut b);
    b.to_vec()
}

fn hex_to_bytes(s: &str) -> Vec<u8> {
    (0..s.len() / 2).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap_or(0)).collect()
}

/// Runs the benchmark and prints the result.
pub fn bench_aes3_main(a: BenchAes3Args) -> Result<()> {
    if a.n == 0 {
        return Err(Error::Input("--n must be positive".into()));
    }
    let exe = match (&a.exe, std::env::var_os("HUSH_EXE")) {
        (Some(p), _) => p.clone(),
        (None, Some(p)) => PathBuf::from(p),
        (None, None) => std::env::current_exe().map_err(|e| Error::Local(e.to_string()))?,
    };
    let c = crate::Circuit::builtin("aes128").expect("built in");
    let and_per_aes = c.and_count();
    let depth = c.and_depth();
    let spec = CircuitSpec::Builtin("aes128".into());
    let words = a.chunk_words.clamp(1, crate::service::MAX_CHUNK_WORDS);

    let modes: Vec<bool> = if a.tls_overhead { vec![false, true] } else { vec![!a.insecure] };
    let mut recs = Vec::new();
    for tls in modes {
        let rec = measure(&a, &exe, tls, &spec, words, and_per_aes, depth)?;
        print_record(&a, &rec);
        recs.push(rec);
    }
    if recs.len() == 2 {
        let (p, t) = (&recs[0], &recs[1]);
        let f = |r: &serde_json::Value, k: &str| r.get(k).and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
        let o = serde_json::json!({
            "bench": "aes3-tls-overhead", "n": a.n, "net": a.net,
            "wall_s": f(t, "wall_s"), "plaintext_wall_s": f(p, "wall_s"),
            "tls_time_overhead": f(t, "wall_s") / f(p, "wall_s") - 1.0,
            "aes_per_s_tls": f(t, "aes_per_s"), "aes_per_s_plaintext": f(p, "aes_per_s"),
            "bytes": f(t, "bytes"), "socket_bytes_tls": f(t, "socket_bytes"), "socket_bytes_plaintext": f(p, "socket_bytes"),
            "tls_byte_overhead": f(t, "socket_bytes") / f(p, "socket_bytes") - 1.0,
            "setup_s": f(t, "setup_s"), "rounds": f(t, "rounds"),
        });
        if a.json {
            println!("{o}");
        } else {
            println!(
                "TLS overhead: time {:+.1} % ({:.0} vs {:.0} AES/s), socket bytes {:+.2} %",
                100.0 * f(&o, "tls_time_overhead"),
                f(&o, "aes_per_s_tls"),
                f(&o, "aes_per_s_plaintext"),
                100.0 * f(&o, "tls_byte_overhead")
            );
        }
    }
    Ok(())
}

/// One measured run (three fresh node processes): the record.
fn measure(a: &BenchAes3Args, exe: &PathBuf, tls: bool, spec: &CircuitSpec, words: usize, and_per_aes: usize, depth: usize) -> Result<serde_json::Value> {
    let opts = ChannelOptions { timeout: Duration::from_secs(120), ..Default::default() };
    let t_setup = Instant::now();
    let ids = if tls { Some(RunIdentities::new()?) } else { None };
    let (_nodes, addrs) = spawn_nodes(exe, &a.net, 2, ids.as_ref())?;
    let link = match &ids {
        Some(ids) => {
            let pins = Pins::parse(&ids.pins(&addrs, None)).map_err(|e| Error::Local(e.to_string()))?;
            LinkConfig::with_identity(Arc::new(Identity::generate().map_err(|e| Error::Local(e.to_string()))?), pins)
        }
        None => LinkConfig::insecure(),
    };
    let warm = run_job(&addrs, spec, 64 * words as u64, words, 1, &Inputs::Random(crate::prf::os_seed()?), &opts, &link)?;
    let _ = warm;
    let setup_s = t_setup.elapsed().as_secs_f64();

    let seed = crate::prf::os_seed()?;
    let r = run_job(&addrs, spec, a.n, words, a.streams, &Inputs::Random(seed), &opts, &link)?;
    // Check a sample against software AES.
    let mut checked = 0u64;
    let step = (a.n / a.verify.max(1)).max(1);
    let mut k = 0u64;
    while k < a.n && checked < a.verify {
        let inp = random_input_bits(seed, 256, words, k);
        let hex = crate::bristol::value_bits_to_hex(&inp[..128]);
        let key = hex_to_bytes(&hex);
        let pt = hex_to_bytes(&crate::bristol::value_bits_to_hex(&inp[128..]));
        let want = aes_ref(&key, &pt);
        let got = hex_to_bytes(&crate::bristol::value_bits_to_hex(&r.output_bits(k)));
        if got != want {
            return Err(Error::Protocol { step: "bench verification", msg: format!("instance {k}: secure AES disagrees with software AES") });
        }
        checked += 1;
        k = if k + step >= a.n && k != a.n - 1 { a.n - 1 } else { k + step };
    }

    let ring_sent: u64 = r.stats.iter().map(|s| s.ring_bytes_sent).sum();
    let ring_recv: u64 = r.stats.iter().map(|s| s.ring_bytes_recv).sum();
    let client_bytes: u64 = r.stats.iter().map(|s| s.client_bytes_recv + s.client_bytes_sent).sum();
    let bytes = ring_sent + ring_recv + client_bytes;
    let bytes_per_party = ring_sent / 3;
    let rounds = r.stats.iter().map(|s| s.rounds).max().unwrap_or(0);
    let aes_per_s = a.n as f64 / r.wall_s;
    let eval_s = r.stats.iter().map(|s| s.eval_s).fold(0.0, f64::max);
    let socket_bytes: u64 = r.stats.iter().map(|s| s.socket_bytes).sum();
    Ok(serde_json::json!({
                "bench": "aes3", "n": a.n, "net": a.net, "parties": 3, "processes": 3,
                "tls": tls, "link": if tls { "TLS 1.3, every node pinned" } else { "plaintext (--insecure)" },
                "socket_bytes": socket_bytes,
                "wall_s": r.wall_s, "setup_s": setup_s, "node_eval_s": eval_s,
                "aes_per_s": aes_per_s, "and_gates_per_s": aes_per_s * and_per_aes as f64,
                "and_per_aes": and_per_aes, "and_depth": depth, "chunk_instances": 64 * words, "streams": a.streams,
                "bytes": bytes, "bytes_per_party": bytes_per_party,
                "bytes_per_aes_per_party": bytes_per_party as f64 / a.n as f64,
                "input_output_bytes": client_bytes, "rounds": rounds, "verified": checked,
                "circuit": "Bristol aes_128.txt (key expansion included)",
    }))
}

fn print_record(a: &BenchAes3Args, rec: &serde_json::Value) {
    let f = |k: &str| rec.get(k).and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
    let (aes_per_s, and_per_aes) = (f("aes_per_s"), f("and_per_aes"));
    if a.json {
        println!("{rec}");
    } else {
        println!("hush bench aes3: {} AES-128 evaluations, three processes over loopback (net {}, {})", a.n, a.net, rec["link"].as_str().unwrap_or(""));
        println!("  {:<26}{:>14.0}", "AES / s", aes_per_s);
        println!("  {:<26}{:>14.3e}", "AND gates / s", aes_per_s * and_per_aes);
        println!("  {:<26}{:>14.3}", "wall s (setup excluded)", f("wall_s"));
        println!("  {:<26}{:>14.3}", "setup s", f("setup_s"));
        println!("  {:<26}{:>14}", "AND gates per AES", and_per_aes);
        println!("  {:<26}{:>14}", "AND depth", f("and_depth"));
        println!("  {:<26}{:>14.1}", "bytes / AES / party", f("bytes_per_aes_per_party"));
        println!("  {:<26}{:>14}", "bytes (all, both ways)", f("bytes"));
        println!("  {:<26}{:>14}", "socket bytes (incl. TLS)", f("socket_bytes"));
        println!("  {:<26}{:>14}", "rounds", f("rounds"));
        println!("  {:<26}{:>14}", "verified vs software AES", f("verified"));
    }
}
