//! Test-only evidence (no hardware protection): every leg on a good report,
//! each one-field change refused naming its leg, policy rules for test
//! roots, and malformed reports refused without panics.

use hush_attest::evidence::{Evidence, EvidenceKind};
use hush_attest::test_evidence::{TestProvider, TestRootKey, TEST_REPORT_LEN};
use hush_attest::verify::{verify, Leg, Outcome, VerifyInput};
use hush_attest::Policy;

const SPKI: &[u8] = b"\x30\x03\x02\x01\x01 (a stand-in SPKI)";
const NONCE: [u8; 32] = [9; 32];
const M: [u8; 48] = [0x33; 48];

fn policy(root: &[u8; 32]) -> Policy {
    Policy::from_toml(&format!("[test]\nroots = [\"{}\"]\nmeasurements = [\"{}\"]\nmin_tcb = 3\n", hush_attest::hex(root), hush_attest::hex(&M))).unwrap()
}

fn input() -> VerifyInput<'static> {
    VerifyInput { tls_spki: Some(SPKI), nonce: Some(&NONCE), now: 0, ..Default::default() }
}

fn provider() -> TestProvider {
    TestProvider { key: TestRootKey::generate(), measurement: M, tcb: 5, debug: false }
}

fn failed(e: &Evidence, p: &Policy) -> (Leg, String) {
    let v = verify(e, p, &input());
    assert!(!v.accepted());
    let (l, w) = v.failed().expect("a leg must fail");
    (l, w.to_string())
}

#[test]
fn good_test_evidence_passes_every_leg_and_says_it_is_a_test() {
    let p = provider();
    let e = p.get(SPKI, &NONCE).unwrap();
    let e = Evidence::decode(&e.encode()).unwrap();
    let v = verify(&e, &policy(&p.key.public()), &input());
    assert!(v.accepted(), "{v:?}");
    assert!(matches!(v.outcome(Leg::Root), Outcome::Pass(s) if s.contains("NO hardware protection")));
    assert!(v.product.as_deref().unwrap().contains("no hardware protection"));
}

#[test]
fn each_change_is_refused_naming_its_leg() {
    let p = provider();
    let pol = policy(&p.key.public());
    let good = p.get(SPKI, &NONCE).unwrap();
    // default policy: refused on the root leg as a test root
    let (l, w) = failed(&good, &Policy::default());
    assert_eq!(l, Leg::Root);
    assert!(w.contains("test root") && w.contains("no hardware protection"), "{w}");
    // a flipped bit in the measurement, in report data, in the signature: signature
    for at in [16, 16 + 48, TEST_REPORT_LEN - 1] {
        let mut e = good.clone();
        e.report[at] ^= 1;
        assert_eq!(failed(&e, &pol).0, Leg::Signature, "bit at {at}");
    }
    // a wrong measurement, a low TCB, debug: signed honestly, refused by policy
    let other = TestProvider { measurement: [0x44; 48], key: TestRootKey::read_dir_for_test(&p.key), ..provider() };
    assert_eq!(failed(&other.get(SPKI, &NONCE).unwrap(), &pol).0, Leg::Measurement);
    let low = TestProvider { tcb: 2, key: TestRootKey::read_dir_for_test(&p.key), ..provider() };
    assert_eq!(failed(&low.get(SPKI, &NONCE).unwrap(), &pol).0, Leg::Tcb);
    let dbg = TestProvider { debug: true, key: TestRootKey::read_dir_for_test(&p.key), ..provider() };
    assert_eq!(failed(&dbg.get(SPKI, &NONCE).unwrap(), &pol).0, Leg::Debug);
    // another key or another nonce
    assert_eq!(failed(&p.get(b"\x30\x00", &NONCE).unwrap(), &pol).0, Leg::ReportDataBinding);
    assert_eq!(failed(&p.get(SPKI, &[1; 32]).unwrap(), &pol).0, Leg::Freshness);
    let e = p.get(SPKI, &[1; 32]).unwrap();
    let v = verify(&e, &pol, &VerifyInput { tls_spki: None, ..input() });
    assert!(matches!(v.outcome(Leg::Freshness), Outcome::Fail(_)));
    // a root the policy does not name
    let (l, w) = failed(&provider().get(SPKI, &NONCE).unwrap(), &pol);
    assert_eq!(l, Leg::Root);
    assert!(w.contains("not one of the policy's [test] roots"), "{w}");
}

#[test]
fn test_policy_rules_and_malformed_reports() {
    assert!(Policy::from_toml("kinds = [\"test\"]").unwrap_err().to_string().contains("names no test root"));
    let r = format!("kinds = [\"tdx\"]\n[test]\nroots = [\"{}\"]", "00".repeat(32));
    assert!(Policy::from_toml(&r).unwrap_err().to_string().contains("does not list"));
    assert!(Policy::from_toml("[test]\nroots = [\"0011\"]").unwrap_err().to_string().contains("must be 32"));
    assert!(!Policy::default().kinds.contains(&EvidenceKind::Test));
    // wrong length is refused by the format; a bad magic or debug byte by the parser
    assert!(Evidence::new(EvidenceKind::Test, vec![], vec![0; TEST_REPORT_LEN - 1], vec![]).is_err());
    let p = provider();
    let pol = policy(&p.key.public());
    let mut e = p.get(SPKI, &NONCE).unwrap();
    e.report[0] ^= 1;
    assert_eq!(failed(&e, &pol).0, Leg::Signature);
    let mut e = p.get(SPKI, &NONCE).unwrap();
    e.report[16 + 48 + 64 + 8] = 2;
    assert!(failed(&e, &pol).1.contains("debug byte"));
}

#[test]
fn test_root_directory_round_trips() {
    let dir = std::env::temp_dir().join(format!("hush-attest-testroot-{}", std::process::id()));
    let k = TestRootKey::generate();
    k.write_dir(&dir, &M).unwrap();
    let p = TestProvider::from_dir(&dir).unwrap();
    assert_eq!(p.key.public(), k.public());
    assert_eq!(p.measurement, M);
    let src = hush_attest::provider::Source::from_flag(&format!("test:{}", dir.display()), None, None).unwrap();
    assert!(src.describe().contains("no hardware protection"));
    let v = verify(&src.get(SPKI, &NONCE).unwrap(), &policy(&k.public()), &VerifyInput { tls_spki: Some(SPKI), nonce: Some(&NONCE), ..Default::default() });
    assert_eq!(v.failed(), Some((Leg::Tcb, "test TCB 0 below the policy's minimum 3")));
    assert!(hush_attest::provider::Source::from_flag("sgx", None, None).is_err());
    assert!(hush_attest::provider::Source::from_flag("tdx", None, None).unwrap_err().to_string().contains("collateral"));
    let _ = std::fs::remove_dir_all(dir);
}
