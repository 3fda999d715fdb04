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
use crate::service::{random_input_bits, share_input, submit_job, Acl, CircuitSpec, InputSource, Inputs, JobSpec, DEFAULT_CHUNK_WORDS};
use aes::cipher::{BlockEncrypt, KeyInit};
use hush_transport::{ChannelOptions, Fingerprint, Identity, LinkConfig, Pins};
use std::sync::Arc;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
/// The options of [`bench_aes3_main`] (`hush bench aes3`; its flags and
/// defaults are in `hush-cli`).
pub struct Aes3Options {
    /// Number of AES-128 evaluations.
    pub n: u64,
    /// Emulated network on the ring links: none, lan, wan, mobile.
    pub net: String,
    /// One JSON object per line instead of a table.
    pub json: bool,
    /// Instances per chunk = 64 × this.
    pub chunk_words: usize,
    /// Chunks in flight per party (1..=8): hides the ring latency.
    pub streams: usize,
    /// Executable that provides the `node` subcommand (default: this one,
    /// or $HUSH_EXE).
    pub exe: Option<PathBuf>,
    /// Instances checked against software AES.
    pub verify: u64,
    /// Plaintext links (default: TLS 1.3 between all parties, with an
    /// identity per node made for the run and every peer pinned).
    pub insecure: bool,
    /// Run twice, plaintext then TLS, and report TLS's overhead (time and
    /// socket bytes) beside the plaintext figures.
    pub tls_overhead: bool,
    /// aes128 (Bristol aes_128.txt, key expansion in the circuit, 6,400
    /// ANDs) or aes128-expanded (pre-expanded key, 5,120 ANDs).
    pub circuit: String,
    /// Threads per node (job lanes); nodes run with --threads this.
    pub threads: usize,
    /// Key handling: `stored` (one secret key, uploaded once with `hush
    /// share` semantics, used by every instance — the datacenter case; needs
    /// TLS) or `inline` (a fresh random key per instance, shared with the
    /// plaintext); `auto` (default) = `stored` over TLS, `inline` with
    /// `--insecure` or `--tls-overhead` (so that both runs compare the same
    /// work).
    pub key: String,
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
fn spawn_nodes(exe: &PathBuf, net: &str, jobs: u64, ids: Option<&RunIdentities>, threads: usize) -> Result<(Nodes, [String; 3])> {
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
                link_args.push("--store".into());
                link_args.push(ids.dir.join(format!("store{i}")).display().to_string());
                for p in ids.pins(&addrs, Some(i)) {
                    link_args.push("--pin".into());
                    link_args.push(p);
                }
            }
            None => link_args.push("--insecure".into()),
        }
        let child = Command::new(exe)
            .args(["node", "--party", &i.to_string(), "--peers", &peers, "--listen", addr, "--net", net])
            .args(["--max-jobs", &jobs.to_string(), "--threads", &threads.to_string()])
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
pub fn bench_aes3_main(mut a: Aes3Options) -> Result<()> {
    if a.n == 0 {
        return Err(Error::Input("--n must be positive".into()));
    }
    let exe = match (&a.exe, std::env::var_os("HUSH_EXE")) {
        (Some(p), _) => p.clone(),
        (None, Some(p)) => PathBuf::from(p),
        (None, None) => std::env::current_exe().map_err(|e| Error::Local(e.to_string()))?,
    };
    let cname = match a.circuit.as_str() {
        "aes128" | "aes_128" | "aes-128" => "aes128",
        "aes128-expanded" | "aes128_expanded" => "aes128-expanded",
        o => return Err(Error::Input(format!("--circuit {o:?}: aes128 or aes128-expanded"))),
    };
    if a.key == "auto" {
        a.key = if a.insecure || a.tls_overhead { "inline" } else { "stored" }.into();
    }
    if a.key != "stored" && a.key != "inline" {
        return Err(Error::Input("--key: stored, inline or auto".into()));
    }
    if a.key == "stored" && (a.insecure || a.tls_overhead) {
        return Err(Error::Input("--key stored needs TLS identities: use --key inline with --insecure/--tls-overhead".into()));
    }
    let c = crate::Circuit::builtin(cname).expect("built in");
    let and_per_aes = c.and_count();
    let depth = c.and_depth();
    let spec = CircuitSpec::Builtin(cname.into());
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
fn measure(a: &Aes3Options, exe: &PathBuf, tls: bool, spec: &CircuitSpec, words: usize, and_per_aes: usize, depth: usize) -> Result<serde_json::Value> {
    let opts = ChannelOptions { timeout: Duration::from_secs(120), ..Default::default() };
    let t_setup = Instant::now();
    let ids = if tls { Some(RunIdentities::new()?) } else { None };
    let threads = a.threads.clamp(1, crate::service::MAX_LANES);
    let (_nodes, addrs) = spawn_nodes(exe, &a.net, 2, ids.as_ref(), threads)?;
    let link = match &ids {
        Some(ids) => {
            let pins = Pins::parse(&ids.pins(&addrs, None)).map_err(|e| Error::Local(e.to_string()))?;
            LinkConfig::with_identity(Arc::new(Identity::generate().map_err(|e| Error::Local(e.to_string()))?), pins)
        }
        None => LinkConfig::insecure(),
    };
    let expanded = matches!(spec, CircuitSpec::Builtin(n) if n == "aes128-expanded");
    let stored = a.key == "stored";
    // One secret key for the whole run (stored mode): uploaded once.
    let key = crate::prf::os_seed()?;
    let mut sources = Vec::new();
    if stored {
        let kbits = if expanded {
            crate::bristol::value_bits_from_hex(&crate::gen::aes128_expanded_key_hex(&key), 1408)
        } else {
            crate::bristol::value_bits_from_hex(&key.iter().map(|b| format!("{b:02x}")).collect::<String>(), 128)
        }
        .map_err(Error::Input)?;
        share_input(&addrs, "bench-key", &kbits, &Acl::default(), &opts, &link)?;
        sources = vec![InputSource::Stored("bench-key".into()), InputSource::Inline];
    }
    let key_bits = if expanded { 1408 } else { 128 };
    let inline_bits = if stored { 128 } else { key_bits + 128 };
    let job = |n: u64, streams: usize, lanes: usize, seed: [u8; 16]| {
        let js = JobSpec { circuit: spec.clone(), instances: n, words, streams, lanes, sources: sources.clone(), output_to: None };
        submit_job(&addrs, &js, &Inputs::Random(seed), &opts, &link)
    };
    let warm = job(64 * words as u64 * threads as u64, 1, threads, crate::prf::os_seed()?)?;
    let _ = warm;
    let setup_s = t_setup.elapsed().as_secs_f64();

    let seed = crate::prf::os_seed()?;
    let r = job(a.n, a.streams, threads, seed)?;
    // Check a sample against software AES.
    let mut checked = 0u64;
    let step = (a.n / a.verify.max(1)).max(1);
    let mut k = 0u64;
    while k < a.n && checked < a.verify {
        let inp = random_input_bits(seed, inline_bits, words, k);
        let pt_bits = &inp[inline_bits - 128..];
        let pt = hex_to_bytes(&crate::bristol::value_bits_to_hex(pt_bits));
        let want = if stored {
            aes_ref(&key, &pt)
        } else if expanded {
            // Independent random round keys: the reference is the circuit in plaintext.
            let c = crate::Circuit::builtin("aes128-expanded").expect("built in");
            hex_to_bytes(&crate::bristol::value_bits_to_hex(&c.eval_plain(&inp)?))
        } else {
            aes_ref(&hex_to_bytes(&crate::bristol::value_bits_to_hex(&inp[..128])), &pt)
        };
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
    let gbps_per_link = bytes_per_party as f64 * 8.0 / r.wall_s / 1e9;
    Ok(serde_json::json!({
                "circuit_name": spec_name(spec), "threads": threads, "key": a.key,
                "gbps_per_link": gbps_per_link,
                "bench": "aes3", "n": a.n, "net": a.net, "parties": 3, "processes": 3,
                "tls": tls, "link": if tls { "TLS 1.3, every node pinned" } else { "plaintext (--insecure)" },
                "socket_bytes": socket_bytes,
                "wall_s": r.wall_s, "setup_s": setup_s, "node_eval_s": eval_s,
                "aes_per_s": aes_per_s, "and_gates_per_s": aes_per_s * and_per_aes as f64,
                "and_per_aes": and_per_aes, "and_depth": depth, "chunk_instances": 64 * words, "streams": a.streams,
                "bytes": bytes, "bytes_per_party": bytes_per_party,
                "bytes_per_aes_per_party": bytes_per_party as f64 / a.n as f64,
                "input_output_bytes": client_bytes, "rounds": rounds, "verified": checked,
                "circuit": if expanded { "aes128-expanded (aes_128.txt with the key schedule removed; key input = 11 round keys)" } else { "Bristol aes_128.txt (key expansion included)" },
    }))
}

fn print_record(a: &Aes3Options, rec: &serde_json::Value) {
    let f = |k: &str| rec.get(k).and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
    let (aes_per_s, and_per_aes) = (f("aes_per_s"), f("and_per_aes"));
    if a.json {
        println!("{rec}");
    } else {
        println!("hush bench aes3: {} AES-128 evaluations, three processes over loopback (net {}, {})", a.n, a.net, rec["link"].as_str().unwrap_or(""));
        println!("  {:<26}{:>14.0}", "AES / s", aes_per_s);
        println!("  {:<26}{:>14}", "circuit", rec["circuit_name"].as_str().unwrap_or(""));
        println!("  {:<26}{:>14}", "threads per node", f("threads"));
        println!("  {:<26}{:>14}", "key", rec["key"].as_str().unwrap_or(""));
        println!("  {:<26}{:>14.3e}", "AND gates / s", aes_per_s * and_per_aes);
        println!("  {:<26}{:>14.3}", "Gbps per ring link", f("gbps_per_link"));
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

fn spec_name(s: &CircuitSpec) -> String {
    match s {
        CircuitSpec::Builtin(n) => n.clone(),
        CircuitSpec::Text(_) => "file".into(),
    }
}

/// Araki et al. (CCS 2016) as re-analysed in the datacenter paper, Table
/// I: cores per server, AES/s, Gbps per server (key-expanded AES, 5,440
/// ANDs; 20-core Xeon servers, 10 Gbps).
pub const ARAKI_TABLE_I: &[(usize, f64, f64)] =
    &[(1, 100_103.0, 0.572), (5, 530_408.0, 2.99), (10, 975_237.0, 5.47), (16, 1_242_310.0, 6.95), (20, 1_324_117.0, 7.38)];

/// `hush bench 3pc`: AES/s by threads per node, beside Araki Table I (the
/// options; its flags and defaults are in `hush-cli`).
#[derive(Debug, Clone)]
pub struct ThreePcOptions {
    /// Print the table (Araki Table I's shape).
    pub table: bool,
    /// Threads per node to measure (default: 1 .. all cores).
    pub threads: Vec<usize>,
    /// AES evaluations per measurement.
    pub n: u64,
    /// Repetitions per cell (the table shows min–max and median).
    pub repeat: usize,
    /// aes128-expanded (default, as in the paper) or aes128.
    pub circuit: String,
    pub streams: usize,
    pub exe: Option<PathBuf>,
    pub json: bool,
}

pub fn bench_3pc_main(a: ThreePcOptions) -> Result<()> {
    let cores = crate::service::all_cores();
    let threads = if a.threads.is_empty() { (1..=cores).collect() } else { a.threads.clone() };
    let mut rows = Vec::new();
    for &t in &threads {
        let mut rates = Vec::new();
        let mut gbps = Vec::new();
        for _ in 0..a.repeat.max(1) {
            let b = Aes3Options {
                n: a.n, net: "none".into(), json: true, chunk_words: DEFAULT_CHUNK_WORDS, streams: a.streams, exe: a.exe.clone(), verify: 16,
                insecure: false, tls_overhead: false, circuit: a.circuit.clone(), threads: t, key: "stored".into(),
            };
            let exe = match (&b.exe, std::env::var_os("HUSH_EXE")) {
                (Some(p), _) => p.clone(),
                (None, Some(p)) => PathBuf::from(p),
                (None, None) => std::env::current_exe().map_err(|e| Error::Local(e.to_string()))?,
            };
            let c = crate::Circuit::builtin(&a.circuit).ok_or_else(|| Error::Input(format!("no circuit {}", a.circuit)))?;
            let rec = measure(&b, &exe, true, &CircuitSpec::Builtin(a.circuit.clone()), DEFAULT_CHUNK_WORDS, c.and_count(), c.and_depth())?;
            if a.json {
                println!("{rec}");
            }
            rates.push(rec["aes_per_s"].as_f64().unwrap_or(0.0));
            gbps.push(rec["gbps_per_link"].as_f64().unwrap_or(0.0));
        }
        rates.sort_by(|x, y| x.total_cmp(y));
        gbps.sort_by(|x, y| x.total_cmp(y));
        rows.push((t, rates, gbps));
    }
    if a.table || !a.json {
        println!("hush bench 3pc: {} , three node processes on one machine ({} cores shared by all three), TLS 1.3, key stored", a.circuit, cores);
        println!("{:>7} | {:>26} | {:>10} || {:>7} {:>12} {:>10}", "threads", "hush AES/s  median [min-max]", "Gbps/link", "cores", "Araki AES/s", "Gbps/serv");
        let n = rows.len().max(ARAKI_TABLE_I.len());
        for k in 0..n {
            let left = rows.get(k).map(|(t, r, g)| {
                format!("{:>7} | {:>10.0} [{:>6.0}-{:>6.0}] | {:>10.3}", t, r[r.len() / 2], r[0], r[r.len() - 1], g[g.len() / 2])
            });
            let right = ARAKI_TABLE_I.get(k).map(|(c, r, g)| format!("{:>7} {:>12.0} {:>10.3}", c, r, g));
            println!("{:<56} || {}", left.unwrap_or_default(), right.unwrap_or_default());
        }
        if let Some((t1, r1, _)) = rows.first() {
            let per = r1[r1.len() / 2] / *t1 as f64;
            println!(
                "projection: {:.0} AES/s per node thread here -> x20 threads per node (3 x 20 cores, one node per machine) ~ {:.2e} AES/s if it scaled linearly (Araki: 1.32e6 on 20 cores)",
                per,
                per * 20.0
            );
        }
    }
    Ok(())
}
