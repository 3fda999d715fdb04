//! Dealer attestation end to end (issue 30): a `hush dealer --attest
//! test:DIR` (test-only evidence, no hardware protection) over loopback
//! TCP + TLS, parties with `--dealer-attest POLICY`. The inference passes
//! with a policy naming the test root and the measurement, and the dealer is
//! refused — before any correlation, with the failing leg named — by the
//! default policy, a wrong measurement, evidence bound to another TLS key,
//! oversized evidence and a dealer without evidence.

use crate::model::Model;
use crate::runtime::{self, Options};
use crate::tests::{input_for, residual_net};
use crate::{reference, FixedConfig, Plan};
use hush_attest::test_evidence::{TestProvider, TestRootKey};
use hush_tee::dealer::{DealerConfig, DealerHandle, EvidenceFn};
use hush_transport::{Identity, LinkConfig, LinkSecurity, MemChannel};
use std::path::PathBuf;
use std::sync::Arc;

const MEASUREMENT: [u8; 48] = [0x4d; 48];

/// A test root in a fresh directory (as `--attest test:DIR` reads it).
fn test_root_dir(tag: &str) -> (PathBuf, [u8; 32]) {
    let dir = std::env::temp_dir().join(format!("hush-attest-{tag}-{}-{:?}", std::process::id(), std::thread::current().id()));
    let _ = std::fs::remove_dir_all(&dir);
    let k = TestRootKey::generate();
    k.write_dir(&dir, &MEASUREMENT).unwrap();
    (dir, k.public())
}

fn start_dealer(attest: Option<EvidenceFn>) -> DealerHandle {
    let mut cfg = DealerConfig::new(LinkSecurity::ephemeral_any().unwrap(), hush_2pc::deal::kinds());
    cfg.attest = attest;
    hush_tee::dealer::serve("127.0.0.1:0", cfg, Arc::new(|_s: String| {})).unwrap()
}

fn test_hook(dir: &std::path::Path) -> EvidenceFn {
    runtime::evidence_hook(hush_attest::provider::Source::from_flag(&format!("test:{}", dir.display()), None, None).unwrap())
}

fn policy(root: &[u8; 32], measurement: &[u8; 48]) -> hush_attest::Policy {
    hush_attest::Policy::from_toml(&format!(
        "[test]\nroots = [\"{}\"]\nmeasurements = [\"{}\"]\n",
        hush_attest::hex(root),
        hush_attest::hex(measurement)
    ))
    .unwrap()
}

/// A party in dealer mode: TLS with its own ephemeral identity, the dealer
/// unpinned (attestation in place of the pin).
fn party(h: &DealerHandle, p: Option<hush_attest::Policy>) -> Options {
    Options {
        mode: runtime::Mode::Dealer { addr: h.addr.to_string(), pin: None },
        proto: "fss".into(),
        chunk: 1000,
        link: LinkConfig::with_identity(Arc::new(Identity::generate().unwrap()), Default::default()),
        dealer_attest: p.map(Arc::new),
        ..Default::default()
    }
}

/// Runs one session over an in-memory link between the parties; returns
/// the client's result and the server's.
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

fn model() -> Arc<Model> {
    Arc::new(Model::from_bytes(&residual_net()).unwrap())
}

fn no_sessions_left(h: &DealerHandle) {
    let t = std::time::Instant::now();
    while h.live_sessions() > 0 {
        assert!(t.elapsed() < std::time::Duration::from_secs(10), "the dealer kept a session");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn attested_dealer_serves_an_inference_equal_to_the_reference() {
    let (dir, root) = test_root_dir("ok");
    let h = start_dealer(Some(test_hook(&dir)));
    let m = model();
    let o = party(&h, Some(policy(&root, &MEASUREMENT)));
    let (c, s) = session(&m, &o, &o);
    let want = reference::run_f64(&Plan::new(&m, FixedConfig::default()).unwrap(), &input_for(&m, 3)).unwrap();
    assert_eq!(c.unwrap(), want);
    s.unwrap();
    // the module says it was attested, and that the evidence is a test's
    let (addr, pin) = o.mode.dealer().unwrap();
    let sec = crate::provider::dealer_link(&o, addr, pin).unwrap();
    let p = hush_tee::dealer::probe_checked(addr, &sec, None, crate::provider::dealer_check(&o).as_ref()).unwrap().unwrap();
    assert!(p.starts_with("test evidence, measurement 4d4d") && p.contains("no hardware protection"), "{p}");
    no_sessions_left(&h);
    h.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

/// The server's refusal (it opens the dealer session first): the dealer
/// holds no session afterwards, so nothing was dealt to anyone.
fn refused_by_server(h: &DealerHandle, p: hush_attest::Policy, want: &[&str]) {
    let m = model();
    let o = party(h, Some(p));
    let (c, s) = session(&m, &o, &o);
    let se = s.expect_err("the server must refuse the dealer");
    assert!(se.contains("dealer refused before any correlation was used"), "{se}");
    for w in want {
        assert!(se.contains(w), "server error lacks {w:?}: {se}");
    }
    assert!(c.is_err(), "the client cannot run without the server");
    assert_eq!(h.live_sessions(), 0, "the dealer opened a session for a refused party");
}

#[test]
fn default_policy_refuses_a_test_root_naming_it() {
    let (dir, _root) = test_root_dir("default");
    let h = start_dealer(Some(test_hook(&dir)));
    refused_by_server(&h, hush_attest::Policy::default(), &["root leg", "test root", "no hardware protection"]);
    h.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn another_test_root_is_refused() {
    let (dir, _root) = test_root_dir("other");
    let h = start_dealer(Some(test_hook(&dir)));
    let stranger = TestRootKey::generate().public();
    refused_by_server(&h, policy(&stranger, &MEASUREMENT), &["root leg", "not one of the policy's [test] roots"]);
    h.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn wrong_measurement_is_refused() {
    let (dir, root) = test_root_dir("meas");
    let h = start_dealer(Some(test_hook(&dir)));
    refused_by_server(&h, policy(&root, &[0x11; 48]), &["measurement leg", &hush_attest::hex(&MEASUREMENT)]);
    h.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn evidence_bound_to_another_tls_key_is_refused() {
    // the dealer answers with evidence made for another certificate's key
    // (as an attacker relaying a genuine dealer's evidence would): genuine
    // signature, root and measurement, wrong binding
    let (dir, root) = test_root_dir("bind");
    let src = TestProvider::from_dir(&dir).unwrap();
    let other = Identity::generate().unwrap();
    let other_spki = hush_attest::spki_of_certificate(other.cert_der()).unwrap();
    let hook: EvidenceFn = Arc::new(move |_own_cert: &[u8], nonce: &[u8; 32]| Ok(src.get(&other_spki, nonce).unwrap().encode()));
    let h = start_dealer(Some(hook));
    refused_by_server(&h, policy(&root, &MEASUREMENT), &["report-data-binding leg"]);
    h.shutdown();
    // and evidence for the right key but a stale nonce fails freshness
    let src = TestProvider::from_dir(&dir).unwrap();
    let hook: EvidenceFn = Arc::new(move |cert: &[u8], _nonce: &[u8; 32]| {
        let spki = hush_attest::spki_of_certificate(cert).unwrap();
        Ok(src.get(&spki, &[7u8; 32]).unwrap().encode())
    });
    let h = start_dealer(Some(hook));
    refused_by_server(&h, policy(&root, &MEASUREMENT), &["freshness leg"]);
    h.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn client_checks_the_dealer_itself() {
    // the server's policy accepts, the client's names another measurement:
    // the client refuses before it joins (so before any share reaches it)
    let (dir, root) = test_root_dir("client");
    let h = start_dealer(Some(test_hook(&dir)));
    let m = model();
    let so = party(&h, Some(policy(&root, &MEASUREMENT)));
    let co = party(&h, Some(policy(&root, &[0x22; 48])));
    let (c, _s) = session(&m, &so, &co);
    let ce = c.expect_err("the client must refuse the dealer");
    assert!(ce.contains("dealer refused before any correlation was used") && ce.contains("measurement leg"), "{ce}");
    no_sessions_left(&h);
    h.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn dealer_without_evidence_and_oversized_evidence_are_refused() {
    let (dir, root) = test_root_dir("none");
    let h = start_dealer(None);
    refused_by_server(&h, policy(&root, &MEASUREMENT), &["gave no evidence", "without --attest"]);
    h.shutdown();
    let huge: EvidenceFn = Arc::new(|_c: &[u8], _n: &[u8; 32]| Ok(vec![0u8; hush_attest::evidence::MAX_EVIDENCE + 100]));
    let h = start_dealer(Some(huge));
    refused_by_server(&h, policy(&root, &MEASUREMENT), &["more than the"]);
    h.shutdown();
    let garbage: EvidenceFn = Arc::new(|_c: &[u8], _n: &[u8; 32]| Ok(b"HATT\x01\x00\x03\x00\x20".to_vec()));
    let h = start_dealer(Some(garbage));
    refused_by_server(&h, policy(&root, &MEASUREMENT), &["unreadable"]);
    h.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn without_a_policy_nothing_changes() {
    // an attesting dealer serves parties that do not ask, as before
    let (dir, _root) = test_root_dir("plain");
    let h = start_dealer(Some(test_hook(&dir)));
    let m = model();
    let mut o = party(&h, None);
    o.mode = runtime::Mode::Dealer { addr: h.addr.to_string(), pin: h_fingerprint(&h) };
    let (c, s) = session(&m, &o, &o);
    c.unwrap();
    s.unwrap();
    h.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

fn h_fingerprint(h: &DealerHandle) -> Option<hush_transport::Fingerprint> {
    // the dealer's certificate as a party sees it (any-peer connection)
    let sec = LinkConfig::with_identity(Arc::new(Identity::generate().unwrap()), Default::default()).to_any_peer();
    let ch = hush_transport::TcpChannel::connect_with(h.addr.to_string(), hush_tee::dealer::channel_options(), &sec).unwrap();
    ch.peer_fingerprint()
}

#[test]
fn dealer_attest_policy_needs_a_remote_dealer() {
    let c = crate::commands::CommonOptions { mode: "dealer".into(), dealer_attest: Some("p.toml".into()), ..Default::default() };
    let e = crate::commands::options(&c, None, None).unwrap_err().to_string();
    assert!(e.contains("--dealer-attest needs --dealer ADDR"), "{e}");
    let c = crate::commands::CommonOptions { dealer_attest: Some("p.toml".into()), ..Default::default() };
    let e = crate::commands::options(&c, None, None).unwrap_err().to_string();
    assert!(e.contains("--mode dealer"), "{e}");
}
