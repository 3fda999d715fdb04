//! The three-node service with roles: data owners store inputs, a
//! submitter runs jobs on them, an output party fetches the result; access
//! control by fingerprint; concurrent jobs; node loss with a persistent store.

use hush_replicated::service::{
    fetch_result, job_control, open_lane_link, regrant_input, share_input, submit_job, submit_job_with_id, Acl, CircuitSpec, InputSource, Inputs, JobSpec,
};
use hush_replicated::Circuit;
use hush_transport::{Channel, ChannelOptions, Fingerprint, Identity, LinkConfig, Pins};
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
        Cluster::with_stores(tag, |_, _| {})
    }
    /// A cluster whose store folders `prepare(i, dir)` fills before the nodes start.
    fn with_stores(tag: &str, prepare: impl Fn(usize, &std::path::Path)) -> Cluster {
        let dir = std::env::temp_dir().join(format!("hush-test-svc-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let fps = std::array::from_fn(|i| hush_transport::peering::keygen(&dir.join(format!("node{i}"))).unwrap());
        let ls: Vec<_> = (0..3).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
        let addrs = std::array::from_fn(|i| format!("127.0.0.1:{}", ls[i].local_addr().unwrap().port()));
        drop(ls);
        let mut c = Cluster { dir, addrs, fps, nodes: Vec::new() };
        for i in 0..3 {
            prepare(i, &c.dir.join(format!("store{i}")));
        }
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
    let acl = Acl { users: vec![sub_fp.to_string()], recipients: vec![out_fp.to_string()], circuits: vec!["adder64@1".into(), "adder64@2".into()] };
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
    let acl = Acl { users: vec!["any".into()], recipients: vec!["any".into()], circuits: vec!["any".into()] };
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

fn aes_hex(key: &[u8; 16], pt: &[u8; 16]) -> String {
    use aes::cipher::{BlockEncrypt, KeyInit};
    let a = aes::Aes128::new_from_slice(key).unwrap();
    let mut b = aes::Block::clone_from_slice(pt);
    a.encrypt_block(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}
fn hexs(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
fn bits_of(b: &[u8]) -> Vec<bool> {
    hush_replicated::bristol::value_bits_from_hex(&hexs(b), 8 * b.len()).unwrap()
}
/// A Bristol circuit that copies its 128-bit input to its output.
fn identity128() -> String {
    let mut t = String::from("128 256\n1 128\n1 128\n\n");
    for i in 0..128 {
        t.push_str(&format!("1 1 {i} {} EQW\n", 128 + i));
    }
    t
}
fn sha256_hex(t: &str) -> String {
    hexs(ring::digest::digest(&ring::digest::SHA256, t.as_bytes()).as_ref())
}
fn job(c: CircuitSpec, sources: Vec<InputSource>, output_to: Option<Fingerprint>) -> JobSpec {
    JobSpec { circuit: c, instances: 1, words: 1, streams: 1, lanes: 1, sources, output_to }
}

/// Issue 33 item 2: the owner grants AES-128 with its key as the key
/// (`aes128@1`). The identity-circuit attack (a user submits a circuit that
/// copies the key to the output party) is refused by every node with a
/// message naming the input and the circuit; so is AES with the key in the
/// plaintext position; AES with the granted key works. No grant: nothing.
/// A re-grant to `any` restores the old meaning (the identity then leaks
/// the key, as `any` warns).
#[test]
fn function_grants_refuse_the_identity_attack() {
    let cl = Cluster::new("grants");
    let (owner, _) = cl.client();
    let (sub, sub_fp) = cl.client();
    let (out, out_fp) = cl.client();
    let key = *b"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f";
    let pt = *b"\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\xff";
    let acl = Acl { users: vec![sub_fp.to_string()], recipients: vec![out_fp.to_string()], circuits: vec!["aes128@1".into()] };
    let st = share_input(&cl.addrs, "k", &bits_of(&key), &acl, &opts(), &owner).unwrap();
    assert_eq!(st.version, 1);
    // the identity circuit, as text, reading the stored key: refused
    let ident = identity128();
    let e = submit_job(&cl.addrs, &job(CircuitSpec::Text(ident.clone()), vec![InputSource::Stored("k".into())], Some(out_fp)), &Inputs::Fixed(vec![]), &opts(), &sub)
        .err()
        .expect("the identity circuit must be refused")
        .to_string();
    assert!(e.contains("access control") && e.contains("input \"k\"") && e.contains(&format!("sha256:{}", sha256_hex(&ident))), "{e}");
    assert!(e.contains("aes128@1"), "names what was granted: {e}");
    // AES with the key fed as the plaintext (under a key of the attacker's): refused
    let aes = CircuitSpec::Builtin("aes128".into());
    let e = submit_job(&cl.addrs, &job(aes.clone(), vec![InputSource::Inline, InputSource::Stored("k".into())], Some(out_fp)), &Inputs::Fixed(bits_of(&[7u8; 16])), &opts(), &sub)
        .err()
        .expect("the key in the plaintext position must be refused")
        .to_string();
    assert!(e.contains("input \"k\"") && e.contains("aes128") && e.contains("input value 2"), "{e}");
    // AES with the granted key: works, the output party gets AES_k(pt)
    let r = submit_job(&cl.addrs, &job(aes.clone(), vec![InputSource::Stored("k".into()), InputSource::Inline], Some(out_fp)), &Inputs::Fixed(bits_of(&pt)), &opts(), &sub).unwrap();
    let f = fetch_result(&cl.addrs, r.job_id, &opts(), &out).unwrap();
    let c = Circuit::builtin("aes128").unwrap();
    assert_eq!(c.outputs_to_hex(&f.result.output_bits(0)), vec![aes_hex(&key, &pt)]);
    assert_eq!(aes_hex(&key, &pt), "69c4e0d86a7b0430d8cdb78070b4c55a", "FIPS-197 C.1");
    // the same function granted by the digest of its Bristol file also works
    let digest = sha256_hex(Circuit::builtin_text("aes128").unwrap());
    let acl2 = Acl { circuits: vec![format!("sha256:{digest}@1")], ..acl.clone() };
    let st = regrant_input(&cl.addrs, "k", &acl2, &opts(), &owner).unwrap();
    assert_eq!(st.version, 2);
    submit_job(&cl.addrs, &job(aes.clone(), vec![InputSource::Stored("k".into()), InputSource::Inline], Some(out_fp)), &Inputs::Fixed(bits_of(&pt)), &opts(), &sub).unwrap();
    // no function granted (the default): refused, saying so
    let none = Acl { circuits: vec![], ..acl.clone() };
    share_input(&cl.addrs, "k0", &bits_of(&key), &none, &opts(), &owner).unwrap();
    let e = submit_job(&cl.addrs, &job(aes.clone(), vec![InputSource::Stored("k0".into()), InputSource::Inline], Some(out_fp)), &Inputs::Fixed(bits_of(&pt)), &opts(), &sub)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("input \"k0\"") && e.contains("granted no function"), "{e}");
    // only the owner may re-grant
    let e = regrant_input(&cl.addrs, "k", &Acl { circuits: vec!["any".into()], ..acl.clone() }, &opts(), &sub).err().unwrap().to_string();
    assert!(e.contains("only its owner"), "{e}");
    // `any`, explicitly: the identity now runs and the output party holds the key
    regrant_input(&cl.addrs, "k", &Acl { circuits: vec!["any".into()], ..acl.clone() }, &opts(), &owner).unwrap();
    let r = submit_job(&cl.addrs, &job(CircuitSpec::Text(ident), vec![InputSource::Stored("k".into())], Some(out_fp)), &Inputs::Fixed(vec![]), &opts(), &sub).unwrap();
    let f = fetch_result(&cl.addrs, r.job_id, &opts(), &out).unwrap();
    assert_eq!(hush_replicated::bristol::value_bits_to_hex(&f.result.output_bits(0)), hexs(&key));
}

/// Inputs stored before function grants (first-format stores) are adopted
/// at start and allow no function to others until the owner re-grants
/// them; the owner's own jobs keep working; after `--regrant` they work
/// under the granted meaning.
#[test]
fn inputs_stored_before_grants_need_a_regrant() {
    let owner_id = Identity::generate().unwrap();
    let owner_fp = owner_id.fingerprint();
    let (sub_id, out_id) = (Identity::generate().unwrap(), Identity::generate().unwrap());
    let (sub_fp, out_fp) = (sub_id.fingerprint(), out_id.fingerprint());
    let key = [0x2bu8, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6, 0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf, 0x4f, 0x3c];
    let kb = bits_of(&key);
    // replicated shares as the old `hush share` made them
    let x0: Vec<bool> = (0..128).map(|k| (k * 7 + 3) % 5 < 2).collect();
    let x1: Vec<bool> = (0..128).map(|k| (k * 11 + 1) % 3 == 0).collect();
    let x: [Vec<bool>; 3] = [x0.clone(), x1.clone(), x0.iter().zip(&x1).map(|(a, b)| a ^ b).collect()];
    let packed = |b: &[bool]| {
        let mut v = vec![0u8; b.len().div_ceil(8)];
        for (i, &t) in b.iter().enumerate() {
            v[i / 8] |= (t as u8) << (i % 8);
        }
        hexs(&v)
    };
    let cl = Cluster::with_stores("legacy", |i, dir| {
        let a: Vec<bool> = (0..128).map(|k| x[(i + 2) % 3][k] ^ kb[k]).collect();
        let rec = serde_json::json!({
            "name": "k", "owner": owner_fp.to_string(), "users": [sub_fp.to_string()], "recipients": [out_fp.to_string()],
            "width": 128, "upload": "00112233", "x": packed(&x[i]), "a": packed(&a),
        });
        hush_replicated::store::write_legacy_record(dir, "inputs", "k", rec.to_string().as_bytes()).unwrap();
    });
    let link = |id: Identity| {
        let pins: Vec<String> = (0..3).map(|j| format!("{}={}", cl.addrs[j], cl.fps[j])).collect();
        LinkConfig::with_identity(Arc::new(id), Pins::parse(&pins).unwrap())
    };
    let (owner, sub, out) = (link(owner_id), link(sub_id), link(out_id));
    let pt = [0x32u8, 0x43, 0xf6, 0xa8, 0x88, 0x5a, 0x30, 0x8d, 0x31, 0x31, 0x98, 0xa2, 0xe0, 0x37, 0x07, 0x34];
    let aes = CircuitSpec::Builtin("aes128".into());
    let spec = job(aes.clone(), vec![InputSource::Stored("k".into()), InputSource::Inline], Some(out_fp));
    let mut first = None;
    for _ in 0..50 {
        match submit_job(&cl.addrs, &spec, &Inputs::Fixed(bits_of(&pt)), &opts(), &sub) {
            Err(e) if e.to_string().contains("connect") => std::thread::sleep(Duration::from_millis(100)),
            r => {
                first = Some(r);
                break;
            }
        }
    }
    let e = first.unwrap().err().expect("an old input allows no function to others").to_string();
    assert!(e.contains("input \"k\"") && e.contains("before grants named functions") && e.contains("--regrant"), "{e}");
    // the owner itself: not bound by grants
    let mine = job(aes.clone(), vec![InputSource::Stored("k".into()), InputSource::Inline], None);
    let r = submit_job(&cl.addrs, &mine, &Inputs::Fixed(bits_of(&pt)), &opts(), &owner).unwrap();
    let c = Circuit::builtin("aes128").unwrap();
    assert_eq!(c.outputs_to_hex(&r.output_bits(0)), vec![aes_hex(&key, &pt)]);
    // the owner re-grants AES with the key: the submitter's job now runs
    let acl = Acl { users: vec![sub_fp.to_string()], recipients: vec![out_fp.to_string()], circuits: vec!["aes128@1".into()] };
    let st = regrant_input(&cl.addrs, "k", &acl, &opts(), &owner).unwrap();
    assert_eq!(st.version, 2, "adopted records are version 1");
    let r = submit_job(&cl.addrs, &spec, &Inputs::Fixed(bits_of(&pt)), &opts(), &sub).unwrap();
    let f = fetch_result(&cl.addrs, r.job_id, &opts(), &out).unwrap();
    assert_eq!(c.outputs_to_hex(&f.result.output_bits(0)), vec![aes_hex(&key, &pt)]);
}

/// Issue 33 item 3: lane links (`HLAN`) parked by another identity for a
/// job's id and lane — before the job is admitted, and while it runs —
/// are never taken and do not fail the job; once the job is known, a lane
/// link from anyone else is refused at once.
#[test]
fn lane_links_from_others_are_refused_without_affecting_the_job() {
    let cl = Cluster::new("lanes");
    let (sub, _) = cl.client();
    let (eve, _) = cl.client();
    let id = u64::from_le_bytes(*b"laneJob1");
    // squatting before the job exists: parked, kept apart from the submitter's
    let mut parked = Vec::new();
    for i in 0..3 {
        for lane in 1..3u32 {
            parked.push(open_lane_link(&cl.addrs, i, id, lane, &opts(), &eve).unwrap());
        }
    }
    // and while the submitter connects its lanes
    let stop = std::sync::atomic::AtomicBool::new(false);
    let c = Circuit::builtin("adder64").unwrap();
    let r = std::thread::scope(|sc| {
        sc.spawn(|| {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && n < 60 {
                if let Ok(ch) = open_lane_link(&cl.addrs, n % 3, id, 1 + (n / 3 % 2) as u32, &opts(), &eve) {
                    drop(ch);
                }
                n += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let spec = JobSpec { circuit: CircuitSpec::Builtin("adder64".into()), instances: 4 * 64, words: 1, streams: 1, lanes: 3, sources: vec![], output_to: None };
        let r = submit_job_with_id(&cl.addrs, &spec, &Inputs::Fixed([bits64(40), bits64(2)].concat()), &opts(), &sub, Some(id));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        r
    });
    let r = r.expect("the submitter's job is not affected by squatted lane links");
    for k in [0, 100, 255] {
        assert_eq!(c.outputs_to_hex(&r.output_bits(k)), vec![format!("{:016x}", 42u64)]);
    }
    // the job is known now: a lane link for it from another identity is refused with a reason
    for i in 0..3 {
        let mut ch = open_lane_link(&cl.addrs, i, id, 1, &opts(), &eve).unwrap();
        let f = ch.recv().expect("a refusal frame");
        let msg = String::from_utf8_lossy(&f[1..]).to_string();
        assert!(f[0] == 1 && msg.contains("lane link") && msg.contains("another identity"), "{msg}");
    }
    drop(parked);
}

/// Issue 36 item 2: a node whose whole store (records and manifest) is
/// restored from an older backup is consistent on its own; the nodes'
/// cross-check at admission refuses the job, naming the node and the
/// record. A re-share brings the three back to one version.
#[test]
fn a_node_restored_from_a_backup_fails_jobs_naming_node_and_record() {
    let mut cl = Cluster::new("restore");
    let (owner, _) = cl.client();
    let (sub, sub_fp) = cl.client();
    let acl = Acl { users: vec![sub_fp.to_string()], recipients: vec![sub_fp.to_string()], circuits: vec!["adder64@1".into()] };
    share_input(&cl.addrs, "x", &bits64(1), &acl, &opts(), &owner).unwrap();
    let store2 = cl.dir.join("store2");
    let backup: Vec<(PathBuf, Vec<u8>)> = ["manifest", "inputs/x.share"].iter().map(|f| (store2.join(f), std::fs::read(store2.join(f)).unwrap())).collect();
    let st = share_input(&cl.addrs, "x", &bits64(1000), &acl, &opts(), &owner).unwrap();
    assert_eq!(st.version, 2);
    let spec = job(CircuitSpec::Builtin("adder64".into()), vec![InputSource::Stored("x".into()), InputSource::Inline], None);
    let c = Circuit::builtin("adder64").unwrap();
    let r = submit_job(&cl.addrs, &spec, &Inputs::Fixed(bits64(5)), &opts(), &sub).unwrap();
    assert_eq!(c.outputs_to_hex(&r.output_bits(0)), vec![format!("{:016x}", 1005u64)]);
    // party 2 is stopped, its store restored from the backup, restarted
    drop(cl.nodes[2].take());
    for (p, b) in &backup {
        std::fs::write(p, b).unwrap();
    }
    cl.nodes[2] = Some(cl.spawn(2));
    let mut got = None;
    for _ in 0..50 {
        match submit_job(&cl.addrs, &spec, &Inputs::Fixed(bits64(5)), &opts(), &sub) {
            Err(e) if e.to_string().contains("connect") => std::thread::sleep(Duration::from_millis(100)),
            r => {
                got = Some(r);
                break;
            }
        }
    }
    let e = got.unwrap().err().expect("a job with one node rolled back must fail").to_string();
    assert!(e.contains("stored input \"x\"") && e.contains("party 2 holds version 1") && e.contains("store of party 2 is behind"), "{e}");
    // the owner re-shares: one version again (3 everywhere), jobs run
    let st = share_input(&cl.addrs, "x", &bits64(7), &acl, &opts(), &owner).unwrap();
    assert_eq!(st.version, 3);
    let r = submit_job(&cl.addrs, &spec, &Inputs::Fixed(bits64(5)), &opts(), &sub).unwrap();
    assert_eq!(c.outputs_to_hex(&r.output_bits(0)), vec![format!("{:016x}", 12u64)]);
}

/// A single record rolled back under a running node (its manifest intact)
/// is refused by that node with an error naming the record.
#[test]
fn a_rolled_back_record_is_refused_by_its_node() {
    let cl = Cluster::new("rec-rollback");
    let (owner, _) = cl.client();
    share_input(&cl.addrs, "x", &bits64(1), &Acl::default(), &opts(), &owner).unwrap();
    let p = cl.dir.join("store1/inputs/x.share");
    let old = std::fs::read(&p).unwrap();
    share_input(&cl.addrs, "x", &bits64(2), &Acl::default(), &opts(), &owner).unwrap();
    std::fs::write(&p, old).unwrap();
    let spec = job(CircuitSpec::Builtin("adder64".into()), vec![InputSource::Stored("x".into()), InputSource::Inline], None);
    // (the other two nodes wait for party 1 until their timeout: a short client timeout)
    let short = ChannelOptions { timeout: Duration::from_secs(3), ..Default::default() };
    let e = submit_job(&cl.addrs, &spec, &Inputs::Fixed(bits64(5)), &short, &owner).err().expect("refused").to_string();
    assert!(e.contains("party 1") && e.contains("inputs/x") && e.contains("rolled back"), "{e}");
}
