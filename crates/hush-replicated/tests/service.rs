//! The three-node service with roles: data owners store inputs, a
//! submitter runs jobs on them, an output party fetches the result; access
//! control by fingerprint; concurrent jobs; node loss with a persistent store.

use hush_replicated::service::{fetch_result, job_control, share_input, submit_job, Acl, CircuitSpec, InputSource, Inputs, JobSpec};
use hush_replicated::Circuit;
use hush_transport::{ChannelOptions, Fingerprint, Identity, LinkConfig, Pins};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

struct Node(Child);
impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Cluster {
    dir: PathBuf,
    addrs: [String; 3],
    fps: [Fingerprint; 3],
    nodes: Vec<Option<Node>>,
}

impl Cluster {
    fn new(tag: &str) -> Cluster {
        let dir = std::env::temp_dir().join(format!("hush-test-svc-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let fps = std::array::from_fn(|i| hush_transport::peering::keygen(&dir.join(format!("node{i}"))).unwrap());
        let ls: Vec<_> = (0..3).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
        let addrs = std::array::from_fn(|i| format!("127.0.0.1:{}", ls[i].local_addr().unwrap().port()));
        drop(ls);
        let mut c = Cluster { dir, addrs, fps, nodes: Vec::new() };
        for i in 0..3 {
            let n = c.spawn(i);
            c.nodes.push(Some(n));
        }
        c
    }
    fn spawn(&self, i: usize) -> Node {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hush3"));
        cmd.args(["node", "--party", &i.to_string(), "--peers", &self.addrs.join(","), "--timeout", "10", "--threads", "4"]);
        cmd.args(["--identity", self.dir.join(format!("node{i}")).to_str().unwrap()]);
        cmd.args(["--store", self.dir.join(format!("store{i}")).to_str().unwrap()]);
        for j in (0..3).filter(|&j| j != i) {
            cmd.args(["--pin", &format!("{}={}", self.addrs[j], self.fps[j])]);
        }
        Node(cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap())
    }
    /// A client identity pinning the three nodes.
    fn client(&self) -> (LinkConfig, Fingerprint) {
        let id = Identity::generate().unwrap();
        let fp = id.fingerprint();
        let pins: Vec<String> = (0..3).map(|j| format!("{}={}", self.addrs[j], self.fps[j])).collect();
        (LinkConfig::with_identity(Arc::new(id), Pins::parse(&pins).unwrap()), fp)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.nodes.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn opts() -> ChannelOptions {
    ChannelOptions { timeout: Duration::from_secs(10), ..Default::default() }
}

fn bits64(v: u64) -> Vec<bool> {
    hush_replicated::bristol::value_bits_from_hex(&format!("{v:016x}"), 64).unwrap()
}

fn stored_job(c: &str, names: &[&str], output_to: Option<Fingerprint>, instances: u64) -> JobSpec {
    JobSpec {
        circuit: CircuitSpec::Builtin(c.into()),
        instances,
        words: 1,
        streams: 1,
        lanes: 1,
        sources: names.iter().map(|n| InputSource::Stored(n.to_string())).collect(),
        output_to,
    }
}

/// Two data owners store a and b; a submitter allowed by both runs
/// adder64 with the result going to a third party; only that party can
/// fetch it, and it equals the plaintext sum. Refusals are clear errors.
#[test]
fn owners_submitter_and_output_party() {
    let cl = Cluster::new("roles");
    let (alice, alice_fp) = cl.client();
    let (bob, bob_fp) = cl.client();
    let (sub, sub_fp) = cl.client();
    let (out, out_fp) = cl.client();
    let (eve, eve_fp) = cl.client();
    let _ = (alice_fp, bob_fp, eve_fp);
    let (a, b) = (0x0123_4567_89ab_cdefu64, 0xfedc_ba98_7654_3210u64 ^ 0x1111);
    let acl = Acl { users: vec![sub_fp.to_string()], recipients: vec![out_fp.to_string()] };
    share_input(&cl.addrs, "a", &bits64(a), &acl, &opts(), &alice).unwrap();
    share_input(&cl.addrs, "b", &bits64(b), &acl, &opts(), &bob).unwrap();
    // Only the owner may replace a name.
    let e = share_input(&cl.addrs, "a", &bits64(0), &acl, &opts(), &eve).err().unwrap().to_string();
    assert!(e.contains("only its owner"), "{e}");

    let r = submit_job(&cl.addrs, &stored_job("adder64", &["a", "b"], Some(out_fp), 1), &Inputs::Fixed(vec![]), &opts(), &sub).unwrap();
    assert!(r.outputs.is_empty(), "the submitter gets no outputs");
    let f = fetch_result(&cl.addrs, r.job_id, &opts(), &out).unwrap();
    let c = Circuit::builtin("adder64").unwrap();
    let want = c.eval_plain(&[bits64(a), bits64(b)].concat()).unwrap();
    assert_eq!(f.result.output_bits(0), want);
    assert_eq!(c.outputs_to_hex(&f.result.output_bits(0)), vec![format!("{:016x}", a.wrapping_add(b))]);
    // Nobody else may fetch it, the submitter included.
    for who in [&sub, &eve, &alice] {
        let e = fetch_result(&cl.addrs, r.job_id, &opts(), who).err().expect("refused").to_string();
        assert!(e.contains("access control") && e.contains(&out_fp.to_string()), "{e}");
    }
    // A submitter not allowed by the owners: every node refuses.
    let e = submit_job(&cl.addrs, &stored_job("adder64", &["a", "b"], Some(out_fp), 1), &Inputs::Fixed(vec![]), &opts(), &eve).err().unwrap().to_string();
    assert!(e.contains("access control") && e.contains("does not allow jobs from") && e.contains(&eve_fp.to_string()), "{e}");
    // An allowed submitter sending the result to someone not allowed (itself): refused.
    let e = submit_job(&cl.addrs, &stored_job("adder64", &["a", "b"], None, 1), &Inputs::Fixed(vec![]), &opts(), &sub).err().unwrap().to_string();
    assert!(e.contains("does not allow results to go to"), "{e}");
    // The owner itself may use its own input, mixed with inline data.
    let js = JobSpec { sources: vec![InputSource::Stored("a".into()), InputSource::Inline], ..stored_job("adder64", &[], None, 100) };
    let r = submit_job(&cl.addrs, &js, &Inputs::Fixed(bits64(5)), &opts(), &alice).unwrap();
    for k in [0, 99] {
        assert_eq!(c.outputs_to_hex(&r.output_bits(k)), vec![format!("{:016x}", a.wrapping_add(5))]);
    }
    // Status: visible to the submitter and the output party only.
    let st = job_control(&cl.addrs, r.job_id, false, &opts(), &alice);
    assert!(st.iter().all(|s| s.as_ref().unwrap()["jobs"][0]["state"] == "done"), "{st:?}");
    assert!(job_control(&cl.addrs, r.job_id, false, &opts(), &eve).iter().all(|s| s.is_err()));
}

/// 16 jobs from 4 submitters at once (different circuits, stored and
/// inline inputs, 1 or 2 lanes): all correct.
#[test]
fn sixteen_concurrent_jobs_from_four_submitters() {
    let cl = Cluster::new("conc");
    let (owner, _) = cl.client();
    let subs: Vec<(LinkConfig, Fingerprint)> = (0..4).map(|_| cl.client()).collect();
    let acl = Acl { users: vec!["any".into()], recipients: vec!["any".into()] };
    let x = 0x0f0f_0000_1234_5678u64;
    share_input(&cl.addrs, "x", &bits64(x), &acl, &opts(), &owner).unwrap();
    let results: Vec<std::result::Result<(), String>> = std::thread::scope(|sc| {
        let mut hs = Vec::new();
        for j in 0..16usize {
            let (link, _) = &subs[j % 4];
            let addrs = &cl.addrs;
            hs.push(sc.spawn(move || -> std::result::Result<(), String> {
                let y = 1000 + j as u64;
                let (name, f): (&str, fn(u64, u64) -> String) = match j % 4 {
                    0 => ("adder64", |a, b| format!("{:016x}", a.wrapping_add(b))),
                    1 => ("mult64", |a, b| format!("{:016x}", a.wrapping_mul(b))),
                    2 => ("lt64", |a, b| format!("{:02x}", (a < b) as u8)),
                    _ => ("sub64", |a, b| format!("{:016x}", a.wrapping_sub(b))),
                };
                let js = JobSpec {
                    circuit: CircuitSpec::Builtin(name.into()),
                    instances: 300,
                    words: 1,
                    streams: 2,
                    lanes: 1 + j % 2,
                    sources: vec![InputSource::Stored("x".into()), InputSource::Inline],
                    output_to: None,
                };
                let r = submit_job(addrs, &js, &Inputs::Fixed(bits64(y)), &opts(), link).map_err(|e| format!("job {j}: {e}"))?;
                let c = Circuit::builtin(name).unwrap();
                for k in [0, 150, 299] {
                    let got = c.outputs_to_hex(&r.output_bits(k));
                    if got != vec![f(x, y)] {
                        return Err(format!("job {j} ({name}) instance {k}: {got:?} != {}", f(x, y)));
                    }
                }
                Ok(())
            }));
        }
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in results {
        r.unwrap();
    }
}

/// Killing a node mid-job fails the job with a clear error; stored inputs
/// survive at the other nodes and at the restarted node (same --store).
#[test]
fn node_loss_mid_job_keeps_stored_inputs() {
    let mut cl = Cluster::new("kill");
    let (owner, _) = cl.client();
    let key: [u8; 16] = *b"0123456789abcdef";
    let kbits = hush_replicated::bristol::value_bits_from_hex(&hush_replicated::gen::aes128_expanded_key_hex(&key), 1408).unwrap();
    share_input(&cl.addrs, "k", &kbits, &Acl::default(), &opts(), &owner).unwrap();
    let pt = "00112233445566778899aabbccddeeff";
    let pbits = hush_replicated::bristol::value_bits_from_hex(pt, 128).unwrap();
    let js = |n: u64| JobSpec {
        circuit: CircuitSpec::Builtin("aes128-expanded".into()),
        instances: n,
        words: 4,
        streams: 2,
        lanes: 1,
        sources: vec![InputSource::Stored("k".into()), InputSource::Inline],
        output_to: None,
    };
    let c = Circuit::builtin("aes128-expanded").unwrap();
    let want = {
        use aes::cipher::{BlockEncrypt, KeyInit};
        let a = aes::Aes128::new_from_slice(&key).unwrap();
        let mut b = aes::Block::clone_from_slice(&(0..16).map(|i| u8::from_str_radix(&pt[2 * i..2 * i + 2], 16).unwrap()).collect::<Vec<_>>());
        a.encrypt_block(&mut b);
        b.iter().map(|x| format!("{x:02x}")).collect::<String>()
    };
    let r = submit_job(&cl.addrs, &js(256), &Inputs::Fixed(pbits.clone()), &opts(), &owner).unwrap();
    assert_eq!(c.outputs_to_hex(&r.output_bits(255)), vec![want.clone()]);
    // A long job; kill party 2 while it runs.
    let (big, link) = (js(1 << 21), owner.clone());
    let addrs = cl.addrs.clone();
    let pb = pbits.clone();
    let h = std::thread::spawn(move || submit_job(&addrs, &big, &Inputs::Fixed(pb), &opts(), &link));
    std::thread::sleep(Duration::from_millis(700));
    drop(cl.nodes[2].take());
    let e = h.join().unwrap().err().expect("the job fails without party 2").to_string();
    assert!(e.contains("party") && (e.contains("connection") || e.contains("disconnected") || e.contains("closed") || e.contains("lost")), "{e}");
    // Restart party 2 on the same store: the stored input is still there.
    cl.nodes[2] = Some(cl.spawn(2));
    let mut ok = None;
    for _ in 0..30 {
        match submit_job(&cl.addrs, &js(128), &Inputs::Fixed(pbits.clone()), &opts(), &owner) {
            Ok(r) => {
                ok = Some(r);
                break;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(300)),
        }
    }
    let r = ok.expect("service recovers with the stored input");
    assert_eq!(c.outputs_to_hex(&r.output_bits(0)), vec![want]);
}
