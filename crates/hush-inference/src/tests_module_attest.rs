//! Module attestation end to end (issue 30): tee-mode sessions whose
//! parties check each other's trusted module with `--module-attest POLICY`
//! (see `hush_tee::handshake`, "Hardware attestation").
//!
//! The modules here are in-process with an evidence source
//! ([`Options::module_evidence`]): TEST evidence signed by a test root
//! generated in the test (**no hardware protection**; the default policy
//! refuses it, naming it as a test root), or SEV-SNP evidence from a fake
//! configfs-tsm tree that a test thread serves dynamically, signed by an
//! AMD-style chain generated in the test. The module-process path
//! (`hush-tee-module --attest test:DIR`) is tested across processes in
//! hush-cli's `tests/module_attest.rs`.

use crate::model::Model;
use crate::runtime::{self, ModuleEvidence, Options};
use crate::tests::{input_for, residual_net};
use crate::{reference, FixedConfig, Plan};
use hush_attest::test_evidence::{TestProvider, TestRootKey};
use hush_tee::attest::EvidenceSource;
use hush_transport::{Identity, LinkConfig, MemChannel, Pins};
use std::path::PathBuf;
use std::sync::Arc;

const MEASUREMENT: [u8; 48] = [0x6d; 48];

fn test_root_dir(tag: &str) -> (PathBuf, [u8; 32]) {
    let dir = std::env::temp_dir().join(format!("hush-modattest-{tag}-{}-{:?}", std::process::id(), std::thread::current().id()));
    let _ = std::fs::remove_dir_all(&dir);
    let k = TestRootKey::generate();
    k.write_dir(&dir, &MEASUREMENT).unwrap();
    (dir, k.public())
}

/// The module's evidence source as `hush-tee-module --attest test:DIR` builds it.
fn test_source(dir: &std::path::Path) -> EvidenceSource {
    hush_2pc::module_process::evidence_source(hush_attest::provider::Source::from_flag(&format!("test:{}", dir.display()), None, None).unwrap())
}

fn policy(root: &[u8; 32], measurement: &[u8; 48]) -> hush_attest::Policy {
    hush_attest::Policy::from_toml(&format!("[test]\nroots = [\"{}\"]\nmeasurements = [\"{}\"]\n", hush_attest::hex(root), hush_attest::hex(measurement))).unwrap()
}

/// A tee-mode party: its module gives `evidence`, it checks its peer's
/// module against `check`.
fn party(evidence: Option<EvidenceSource>, check: Option<hush_attest::Policy>) -> Options {
    Options { proto: "fss".into(), chunk: 1000, module_evidence: evidence.map(ModuleEvidence), module_attest: check.map(Arc::new), ..Default::default() }
}

fn model() -> Arc<Model> {
    Arc::new(Model::from_bytes(&residual_net()).unwrap())
}

fn want(m: &Model) -> Vec<f64> {
    reference::run_f64(&Plan::new(m, FixedConfig::default()).unwrap(), &input_for(m, 3)).unwrap()
}

/// One session over an in-memory link; the client's result and the server's.
fn session(m: &Arc<Model>, so: &Options, co: &Options) -> (Result<Vec<f64>, String>, Result<usize, String>) {
    let (mut a, b) = MemChannel::pair();
    let (m2, o2) = (m.clone(), so.clone());
    let srv = std::thread::spawn(move || {
        let p = Plan::new(&m2, FixedConfig::default()).unwrap();
        runtime::serve_session(&mut a, &m2, &p, &o2).map_err(|e| e.to_string())
    });
    let x = input_for(m, 3);
    let c = (|| {
        let mut s = runtime::ClientSession::start(b, co)?;
        let y = s.infer(&m.input_shape.clone(), &x, |_, _| {})?;
        s.close()?;
        Ok::<_, crate::Error>(y.logits)
    })()
    .map_err(|e| e.to_string());
    (c, srv.join().unwrap())
}

#[test]
fn attested_modules_serve_an_inference_over_tls_equal_to_the_reference() {
    // both parties check each other's module, over loopback TCP + TLS
    let (dir, root) = test_root_dir("ok");
    let m = model();
    let sid = Arc::new(Identity::generate().unwrap());
    let mut so = party(Some(test_source(&dir)), Some(policy(&root, &MEASUREMENT)));
    so.link = LinkConfig::with_identity(sid.clone(), Default::default());
    let h = runtime::serve(m.clone(), "127.0.0.1:0", so, Arc::new(|_s: String| {})).unwrap();
    let addr = h.addr.to_string();
    let mut co = party(Some(test_source(&dir)), Some(policy(&root, &MEASUREMENT)));
    co.link = LinkConfig::with_identity(Arc::new(Identity::generate().unwrap()), Pins::parse(&[format!("{addr}={}", sid.fingerprint())]).unwrap());
    let mut s = runtime::connect(&addr, &co).unwrap();
    let y = s.infer(&m.input_shape.clone(), &input_for(&m, 3), |_, _| {}).unwrap();
    s.close().unwrap();
    assert_eq!(y.logits, want(&m));
    // a client that does not check the server's module is served by the
    // same server (the exchange is bytes the checking party adds)
    let mut co2 = party(Some(test_source(&dir)), None);
    co2.link = co.link.clone();
    let mut s = runtime::connect(&addr, &co2).unwrap();
    assert_eq!(s.infer(&m.input_shape.clone(), &input_for(&m, 3), |_, _| {}).unwrap().logits, want(&m));
    s.close().unwrap();
    // a client whose module is simulated is refused by the server, which
    // goes on serving
    let mut co3 = party(None, Some(policy(&root, &MEASUREMENT)));
    co3.link = co.link.clone();
    assert!(runtime::connect(&addr, &co3).and_then(|mut s| s.infer(&m.input_shape.clone(), &input_for(&m, 3), |_, _| {})).is_err());
    let mut s = runtime::connect(&addr, &co).unwrap();
    assert_eq!(s.infer(&m.input_shape.clone(), &input_for(&m, 3), |_, _| {}).unwrap().logits, want(&m));
    s.close().unwrap();
    h.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

/// The client refuses the server's module: the refusal names the leg and
/// comes before any correlation (seed agreement never completes).
fn refused_by_client(so: &Options, p: hush_attest::Policy, want: &[&str]) {
    let m = model();
    let (c, s) = session(&m, so, &party(None, Some(p)));
    let ce = c.expect_err("the client must refuse the server's module");
    assert!(ce.contains("the peer's trusted module was refused before any correlation was used"), "{ce}");
    for w in want {
        assert!(ce.contains(w), "client error lacks {w:?}: {ce}");
    }
    assert!(s.is_err(), "the server cannot finish without the client");
}

#[test]
fn default_policy_refuses_a_test_root_naming_it() {
    let (dir, _root) = test_root_dir("default");
    refused_by_client(&party(Some(test_source(&dir)), None), hush_attest::Policy::default(), &["root leg", "test root", "no hardware protection"]);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn another_root_and_another_measurement_are_refused() {
    let (dir, root) = test_root_dir("rootmeas");
    let so = party(Some(test_source(&dir)), None);
    let stranger = TestRootKey::generate().public();
    refused_by_client(&so, policy(&stranger, &MEASUREMENT), &["root leg", "not one of the policy's [test] roots"]);
    refused_by_client(&so, policy(&root, &[0x11; 48]), &["measurement leg", &hush_attest::hex(&MEASUREMENT)]);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn evidence_bound_to_another_key_or_a_stale_nonce_is_refused() {
    // a host relaying a genuine module's evidence to a handshake keyed by
    // another X25519 key: genuine signature, root and measurement, wrong binding
    let (dir, root) = test_root_dir("bind");
    let src = TestProvider::from_dir(&dir).unwrap();
    let other = hush_tee::attest::x25519_spki(&[0x42; 32]);
    let relayed: EvidenceSource = Arc::new(move |_own: &[u8], nonce: &[u8]| Ok(src.get(&other, nonce).unwrap().encode()));
    refused_by_client(&party(Some(relayed), None), policy(&root, &MEASUREMENT), &["report-data-binding leg"]);
    // evidence for the right key, made for an old nonce
    let src = TestProvider::from_dir(&dir).unwrap();
    let stale: EvidenceSource = Arc::new(move |own: &[u8], _nonce: &[u8]| Ok(src.get(own, &[7u8; 32]).unwrap().encode()));
    refused_by_client(&party(Some(stale), None), policy(&root, &MEASUREMENT), &["freshness leg"]);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn garbled_oversized_and_missing_evidence_are_refused_without_panic() {
    let (dir, root) = test_root_dir("bad");
    let p = || policy(&root, &MEASUREMENT);
    let garbage: EvidenceSource = Arc::new(|_k: &[u8], _n: &[u8]| Ok(b"HATT\x01\x00\x03\x00\x20".to_vec()));
    refused_by_client(&party(Some(garbage), None), p(), &["unreadable"]);
    // one flipped bit in the signed report
    let src = TestProvider::from_dir(&dir).unwrap();
    let flipped: EvidenceSource = Arc::new(move |k: &[u8], n: &[u8]| {
        let mut e = src.get(k, n).unwrap();
        e.report[20] ^= 1;
        Ok(e.encode())
    });
    refused_by_client(&party(Some(flipped), None), p(), &["signature leg"]);
    let huge: EvidenceSource = Arc::new(|_k: &[u8], _n: &[u8]| Ok(vec![0u8; hush_attest::evidence::MAX_EVIDENCE + 100]));
    refused_by_client(&party(Some(huge), None), p(), &["more than the"]);
    // a module beyond the module-response cap: refused by its own module
    let giant: EvidenceSource = Arc::new(|_k: &[u8], _n: &[u8]| Ok(vec![0u8; hush_tee::module::MAX_EVIDENCE_RESPONSE + 1]));
    refused_by_client(&party(Some(giant), None), p(), &["gave no evidence"]);
    let failing: EvidenceSource = Arc::new(|_k: &[u8], _n: &[u8]| Err("configfs-tsm: no provider".into()));
    refused_by_client(&party(Some(failing), None), p(), &["gave no evidence", "configfs-tsm: no provider"]);
    // the simulated module has no evidence, and says why
    refused_by_client(&party(None, None), p(), &["gave no evidence", "simulated — gives no hardware protection"]);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_server_checks_the_clients_module() {
    let (dir, root) = test_root_dir("server");
    let m = model();
    let so = party(None, Some(policy(&root, &[0x33; 48])));
    let (c, s) = session(&m, &so, &party(Some(test_source(&dir)), None));
    let se = s.expect_err("the server must refuse the client's module");
    assert!(se.contains("the peer's trusted module was refused") && se.contains("measurement leg"), "{se}");
    assert!(c.is_err());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn module_attest_flag_applies_to_tee_mode_only() {
    use crate::commands::{options, CommonOptions};
    let dir = std::env::temp_dir().join(format!("hush-modattest-flag-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("policy.toml");
    std::fs::write(&p, "[test]\nroots = []\n").unwrap();
    let o = options(&CommonOptions { module_attest: Some(p.clone()), ..Default::default() }, None, None).unwrap();
    assert!(o.module_attest.is_some());
    let e = options(&CommonOptions { mode: "silent".into(), module_attest: Some(p.clone()), ..Default::default() }, None, None).unwrap_err().to_string();
    assert!(e.contains("not implemented for --mode silent"), "{e}");
    let e = options(&CommonOptions { mode: "interactive".into(), module_attest: Some(p.clone()), ..Default::default() }, None, None).unwrap_err().to_string();
    assert!(e.contains("applies to --mode tee"), "{e}");
    std::fs::write(&p, "[test]\nrootz = []\n").unwrap();
    let e = options(&CommonOptions { module_attest: Some(p), ..Default::default() }, None, None).unwrap_err().to_string();
    assert!(e.contains("--module-attest"), "{e}");
    let _ = std::fs::remove_dir_all(dir);
}

/// The AMD-style chain generated in tests, shared with hush-attest's tests.
#[path = "../../hush-attest/tests/common/mod.rs"]
mod chain;

/// A fake configfs-tsm tree (see [`fake_tsm`]).
struct FakeTsm {
    root: PathBuf,
    test_root: hush_attest::verify::TestRoot,
    measurement: [u8; 48],
}

/// SEV-SNP evidence from a **fake configfs-tsm tree served dynamically**:
/// the entry's `outblob` is a FIFO, so the provider's read blocks until a
/// test thread (standing in for the kernel) has read the `inblob` the
/// provider just wrote and written a report carrying it as REPORT_DATA,
/// signed by an AMD-style chain generated in the test. `provider`,
/// `generation` and `auxblob` (the certificate table) are files as the
/// kernel lays them out; `generation` stays fixed (the kernel bumps it on
/// each inblob write, which a FIFO reader cannot observe before the
/// provider reads it). The entry is `hush-<pid>`, the one the provider of
/// this process uses.
fn fake_tsm(tag: &str) -> FakeTsm {
    use chain::{milan_report, TestChain, CHIP_ID, MEASUREMENT as M_OFF, REPORTED_TCB, REPORT_DATA};
    use hush_attest::evidence::{encode_cert_table, CertType};
    let root = std::env::temp_dir().join(format!("hush-faketsm-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let entry = root.join(format!("hush-{}", std::process::id()));
    std::fs::create_dir_all(&entry).unwrap();
    std::fs::write(entry.join("provider"), "sev_guest\n").unwrap();
    std::fs::write(entry.join("generation"), "1\n").unwrap();
    let template = milan_report();
    let tcb = [template[REPORTED_TCB], template[REPORTED_TCB + 1], template[REPORTED_TCB + 6], template[REPORTED_TCB + 7]];
    let chain = TestChain::generate(tcb, &template[CHIP_ID..CHIP_ID + 64]);
    std::fs::write(entry.join("auxblob"), encode_cert_table(&[(CertType::VCEK, &chain.vcek_der), (CertType::ASK, &chain.ask_der), (CertType::ARK, &chain.ark_der)])).unwrap();
    let out = entry.join("outblob");
    assert!(std::process::Command::new("mkfifo").arg(&out).status().unwrap().success(), "mkfifo");
    let measurement: [u8; 48] = template[M_OFF..M_OFF + 48].try_into().unwrap();
    let test_root = chain.root();
    std::thread::spawn(move || {
        // The kernel answers each read of outblob for the inblob written
        // last. A reader of the FIFO is a request; the one just answered
        // may still hold it open, so a request is answered once per new
        // inblob (the provider writes a fresh one, with a fresh nonce,
        // before each read). Linux: O_NONBLOCK = 0o4000, open fails with
        // ENXIO while no one reads.
        use std::os::unix::fs::OpenOptionsExt;
        let mut last: Option<Vec<u8>> = None;
        loop {
            let w = std::fs::OpenOptions::new().write(true).custom_flags(0o4000).open(&out);
            let mut w = match w {
                Ok(w) => w,
                Err(e) if e.raw_os_error() == Some(6) => {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    continue;
                }
                Err(_) => return, // the tree was removed
            };
            let Ok(rd) = std::fs::read(entry.join("inblob")) else { return };
            if last.as_ref() == Some(&rd) {
                drop(w);
                std::thread::sleep(std::time::Duration::from_millis(2));
                continue;
            }
            let mut r = template.clone();
            let n = rd.len().min(64);
            r[REPORT_DATA..REPORT_DATA + 64].fill(0);
            r[REPORT_DATA..REPORT_DATA + n].copy_from_slice(&rd[..n]);
            chain.sign(&mut r);
            let _ = std::io::Write::write_all(&mut w, &r);
            last = Some(rd);
        }
    });
    FakeTsm { root, test_root, measurement }
}

#[test]
fn snp_module_from_a_dynamic_fake_configfs_tree_end_to_end() {
    let t = fake_tsm("module");
    let src = hush_2pc::module_process::evidence_source(hush_attest::provider::Source::from_flag("snp", Some(&t.root), None).unwrap());
    let mut p = hush_attest::Policy::from_toml(&format!("[sev_snp]\nproducts = [\"Milan\"]\nmeasurements = [\"{}\"]\n", hush_attest::hex(&t.measurement))).unwrap();
    let m = model();
    let so = party(Some(src), None);
    // the chain generated here is not AMD's: refused until the check names it
    refused_by_client(&so, p.clone(), &["root leg"]);
    p.test_roots.push(t.test_root.clone());
    let (c, s) = session(&m, &so, &party(None, Some(p.clone())));
    assert_eq!(c.unwrap(), want(&m));
    s.unwrap();
    // the same genuine-looking report, a policy naming another measurement
    let mut other = p.clone();
    other.snp.measurements = vec![[0x44; 48]];
    refused_by_client(&so, other, &["measurement leg"]);
    let _ = std::fs::remove_dir_all(&t.root);
}
