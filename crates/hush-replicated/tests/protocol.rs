//! Privacy of a single party's view, disconnects over TCP, and the
//! three-node service end to end (node processes of the `hush3` binary).

use hush_replicated::araki::PartyKeys;
use hush_replicated::local::eval_local;
use hush_replicated::service::{run_job, CircuitSpec, Inputs};
use hush_replicated::{Circuit, Error, Evaluator, Program};
use hush_transport::{tcp_pair_loopback, ChannelOptions, Fingerprint, Identity, LinkConfig, Pins};
use std::path::PathBuf;
use std::sync::Arc;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// For a fixed input, each party's view (its input pairs and every r_{i-1}
/// it receives) is uniformly distributed over the randomness of the
/// sharing and the PRF keys: every view bit is 1 with frequency ≈ 1/2, and
/// two different inputs give indistinguishable views.
#[test]
fn single_party_view_is_uniform() {
    let c = Circuit::builtin("aes128").unwrap();
    let prog = Program::compile(&c);
    let runs = 400usize;
    let fixed = |hexes: [&str; 2]| -> Vec<u64> {
        c.inputs_from_hex(&[hexes[0].to_string(), hexes[1].to_string()]).unwrap().iter().map(|&b| b as u64).collect()
    };
    let inputs = [
        fixed(["000102030405060708090a0b0c0d0e0f", "00112233445566778899aabbccddeeff"]),
        fixed(["00000000000000000000000000000000", "00000000000000000000000000000000"]),
    ];
    for (ii, input) in inputs.iter().enumerate() {
        let mut ones: Vec<Vec<u32>> = vec![Vec::new(); 3];
        for run in 0..runs {
            let mut seed = [0u8; 16];
            seed[..8].copy_from_slice(&(run as u64).to_le_bytes());
            seed[8] = ii as u8;
            let r = eval_local(&prog, 1, input, Some(seed), true).unwrap();
            let views = r.views.unwrap();
            for p in 0..3 {
                // One instance per word: bit 0 of every 8-byte word.
                let bits: Vec<u32> = views[p].chunks_exact(8).map(|w| (w[0] & 1) as u32).collect();
                if ones[p].is_empty() {
                    ones[p] = vec![0; bits.len()];
                }
                assert_eq!(ones[p].len(), bits.len(), "view length is fixed");
                for (o, b) in ones[p].iter_mut().zip(bits) {
                    *o += b;
                }
            }
        }
        // Binomial(400, 1/2): sd = 10. Per position, 6 sd; overall mean
        // close to 1/2; and a chi-square-like check on the spread.
        for p in 0..3 {
            let n = ones[p].len();
            assert!(n > 6400, "view holds the ring messages");
            let mut sq = 0.0;
            for (pos, &o) in ones[p].iter().enumerate() {
                let z = (o as f64 - runs as f64 / 2.0) / 10.0;
                assert!(z.abs() < 6.0, "input {ii}, party {p}, view bit {pos}: {o} ones in {runs} runs");
                sq += z * z;
            }
            let mean_sq = sq / n as f64;
            assert!((mean_sq - 1.0).abs() < 0.1, "input {ii}, party {p}: mean z^2 {mean_sq}");
            let total: u64 = ones[p].iter().map(|&o| o as u64).sum();
            let frac = total as f64 / (n * runs) as f64;
            assert!((frac - 0.5).abs() < 0.002, "input {ii}, party {p}: fraction of ones {frac}");
        }
    }
}

/// A party that disconnects mid-evaluation gives the others a transport
/// error naming the protocol step, not a panic or a hang.
#[test]
fn peer_disconnect_over_tcp_is_a_clear_error() {
    let c = Circuit::builtin("aes128").unwrap();
    let prog = Program::compile(&c);
    let opts = ChannelOptions { timeout: Duration::from_secs(10), ..Default::default() };
    let (n0, p1) = tcp_pair_loopback(opts.clone()).unwrap();
    let (n1, p2) = tcp_pair_loopback(opts.clone()).unwrap();
    let (n2, p0) = tcp_pair_loopback(opts).unwrap();
    let ends = vec![(n0, p0), (n1, p1), (n2, p2)];
    let prog = &prog;
    let results: Vec<Result<(), Error>> = std::thread::scope(|sc| {
        let hs: Vec<_> = ends
            .into_iter()
            .enumerate()
            .map(|(i, (mut to_next, mut from_prev))| {
                sc.spawn(move || {
                    let keys = PartyKeys::setup(i, [i as u8; 16], &mut to_next, &mut from_prev)?;
                    if i == 2 {
                        // Party 2 goes away after key set-up.
                        drop(to_next);
                        drop(from_prev);
                        return Ok(());
                    }
                    let mut ev = Evaluator::new(prog, 1)?;
                    let input = vec![0u64; prog.n_in * 2];
                    let mut out = vec![0u64; prog.n_out];
                    ev.eval_chunk(&keys, 0, 0, &input, &mut out, &mut to_next, &mut from_prev)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(results[2].is_ok());
    for r in &results[..2] {
        match r {
            Err(Error::Transport { step, err }) => {
                assert!(step.contains("AND layer"), "step {step}");
                let msg = format!("{err}");
                assert!(msg.contains("disconnected") || msg.contains("closed") || msg.contains("i/o"), "{msg}");
            }
            other => panic!("expected a transport error, got {other:?}"),
        }
    }
}

struct Node(Child);
impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_ports() -> Vec<u16> {
    let ls: Vec<_> = (0..3).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    ls.iter().map(|l| l.local_addr().unwrap().port()).collect()
}

/// Identities of three nodes, in a temporary folder.
struct Ids {
    dir: PathBuf,
    fps: [Fingerprint; 3],
}

impl Ids {
    fn new(tag: &str) -> Ids {
        let dir = std::env::temp_dir().join(format!("hush-test-3pc-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let fps = std::array::from_fn(|i| hush_transport::peering::keygen(&dir.join(format!("node{i}"))).unwrap());
        Ids { dir, fps }
    }
    fn pin(&self, addrs: &[String; 3], j: usize) -> String {
        format!("{}={}", addrs[j], self.fps[j])
    }
    /// The job submitter's link: an ephemeral identity pinning all three.
    fn job_link(&self, addrs: &[String; 3]) -> LinkConfig {
        let pins: Vec<String> = (0..3).map(|j| self.pin(addrs, j)).collect();
        LinkConfig::with_identity(Arc::new(Identity::generate().unwrap()), Pins::parse(&pins).unwrap())
    }
}

impl Drop for Ids {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Node `i` over TLS with identity folder `id_dir`, pinning the others.
fn spawn_node_as(i: usize, addrs: &[String; 3], ids: &Ids, id_dir: &std::path::Path, stderr: Stdio) -> Node {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hush3"));
    cmd.args(["node", "--party", &i.to_string(), "--peers", &addrs.join(","), "--timeout", "10"]);
    cmd.args(["--identity", id_dir.to_str().unwrap()]);
    for j in (0..3).filter(|&j| j != i) {
        cmd.args(["--pin", &ids.pin(addrs, j)]);
    }
    Node(cmd.stdout(Stdio::null()).stderr(stderr).spawn().unwrap())
}

fn spawn_node(i: usize, addrs: &[String; 3], ids: &Ids) -> Node {
    spawn_node_as(i, addrs, ids, &ids.dir.join(format!("node{i}")), Stdio::null())
}

/// Three node processes: a job gives FIPS-197; killing a node makes the
/// next job fail with a clear error while the other nodes keep running;
/// after the node restarts, jobs succeed again.
#[test]
fn three_node_service_and_node_loss() {
    let ports = free_ports();
    let addrs: [String; 3] = std::array::from_fn(|i| format!("127.0.0.1:{}", ports[i]));
    let ids = Ids::new("loss");
    let mut nodes: Vec<Option<Node>> = (0..3).map(|i| Some(spawn_node(i, &addrs, &ids))).collect();
    let link = ids.job_link(&addrs);
    let c = Circuit::builtin("aes128").unwrap();
    let bits = c.inputs_from_hex(&["000102030405060708090a0b0c0d0e0f".into(), "00112233445566778899aabbccddeeff".into()]).unwrap();
    let spec = CircuitSpec::Builtin("aes128".into());
    let opts = ChannelOptions { timeout: Duration::from_secs(10), ..Default::default() };
    let job = |n: u64, streams: usize| run_job(&addrs, &spec, n, 2, streams, &Inputs::Fixed(bits.clone()), &opts, &link);
    let r = job(300, 2).unwrap();
    for k in [0, 150, 299] {
        assert_eq!(c.outputs_to_hex(&r.output_bits(k)), vec!["69c4e0d86a7b0430d8cdb78070b4c55a"]);
    }
    // Bytes and rounds as pinned: 3 chunks of 128 instances.
    for s in &r.stats {
        assert_eq!(s.ring_bytes_sent, 6400 * 3 * 128 / 8, "one bit per AND per instance");
        assert_eq!(s.rounds, 3 * 60 + 1);
    }

    // Lose party 2.
    drop(nodes[2].take());
    std::thread::sleep(Duration::from_millis(200));
    let e = job(128, 1).err().expect("a job without party 2 fails");
    let msg = e.to_string();
    assert!(msg.contains("party 2") || msg.contains("disconnected") || msg.contains("connect"), "{msg}");

    // Parties 0 and 1 kept running: restart 2 and run again.
    nodes[2] = Some(spawn_node(2, &addrs, &ids));
    let mut ok = None;
    for _ in 0..20 {
        match job(64, 1) {
            Ok(r) => {
                ok = Some(r);
                break;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(300)),
        }
    }
    let r = ok.expect("service recovers after the node restarts");
    assert_eq!(c.outputs_to_hex(&r.output_bits(0)), vec!["69c4e0d86a7b0430d8cdb78070b4c55a"]);
}

/// Over TLS with pinned peers: a node started with another identity than
/// the one its peers pin is refused by them (they log the refusal naming
/// both fingerprints) and jobs fail with a clear error; a job submitter
/// with a wrong pin for a node, or running plaintext, is refused too.
#[test]
fn three_node_service_refuses_wrong_identities() {
    let ports = free_ports();
    let addrs: [String; 3] = std::array::from_fn(|i| format!("127.0.0.1:{}", ports[i]));
    let ids = Ids::new("wrong");
    let c = Circuit::builtin("aes128").unwrap();
    let bits = c.inputs_from_hex(&["000102030405060708090a0b0c0d0e0f".into(), "00112233445566778899aabbccddeeff".into()]).unwrap();
    let spec = CircuitSpec::Builtin("aes128".into());
    let opts = ChannelOptions { timeout: Duration::from_secs(5), ..Default::default() };

    // Party 2 runs with an identity nobody pinned.
    let rogue = ids.dir.join("rogue");
    hush_transport::peering::keygen(&rogue).unwrap();
    // Party 1 connects to party 2 (its next) for a job's ring link and
    // refuses the rogue certificate (party 2 never gets a ring link from
    // it, so it never reaches party 0).
    let n0 = spawn_node(0, &addrs, &ids);
    let n1 = spawn_node_as(1, &addrs, &ids, &ids.dir.join("node1"), Stdio::piped());
    let n2 = spawn_node_as(2, &addrs, &ids, &rogue, Stdio::null());
    let link = ids.job_link(&addrs);
    // The submitter pins party 2's real identity: its connection to the rogue node is refused.
    let e = run_job(&addrs, &spec, 64, 1, 1, &Inputs::Fixed(bits.clone()), &opts, &link).err().expect("rogue node refused").to_string();
    assert!(e.contains("party 2") && e.contains(&ids.fps[2].to_string()), "{e}");
    // A submitter that pins the rogue identity gets through to the node, but the
    // ring never forms: party 1 refuses the rogue party 2 (pinned to another key).
    let mut pins: Vec<String> = (0..2).map(|j| ids.pin(&addrs, j)).collect();
    pins.push(format!("{}={}", addrs[2], Identity::load(&rogue).unwrap().fingerprint()));
    let rogue_link = LinkConfig::with_identity(Arc::new(Identity::generate().unwrap()), Pins::parse(&pins).unwrap());
    let r = run_job(&addrs, &spec, 64, 1, 1, &Inputs::Fixed(bits.clone()), &opts, &rogue_link);
    assert!(r.is_err(), "a ring with a rogue node must not run jobs");
    drop(n0);
    drop(n2);
    let mut n1 = n1;
    let _ = n1.0.kill();
    let out = n1.0.wait_with_output_stderr();
    assert!(out.contains("connect to the next party") && out.contains(&ids.fps[2].to_string()), "node 1 log: {out}");
    // Plaintext submitter against TLS nodes: refused naming the mode.
    let n: Vec<Node> = (0..3).map(|i| spawn_node(i, &addrs, &ids)).collect();
    let e = run_job(&addrs, &spec, 64, 1, 1, &Inputs::Fixed(bits.clone()), &opts, &LinkConfig::insecure()).err().expect("plaintext refused").to_string();
    assert!(e.contains("TLS"), "{e}");
    // And the honest, pinned submitter works.
    let r = run_job(&addrs, &spec, 64, 1, 1, &Inputs::Fixed(bits), &opts, &link).unwrap();
    assert_eq!(c.outputs_to_hex(&r.output_bits(0)), vec!["69c4e0d86a7b0430d8cdb78070b4c55a"]);
    drop(n);
}

trait StderrOf {
    fn wait_with_output_stderr(&mut self) -> String;
}

impl StderrOf for Child {
    fn wait_with_output_stderr(&mut self) -> String {
        use std::io::Read;
        let _ = self.wait();
        let mut s = String::new();
        if let Some(mut e) = self.stderr.take() {
            let _ = e.read_to_string(&mut s);
        }
        s
    }
}
