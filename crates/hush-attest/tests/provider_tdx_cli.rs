//! The configfs-tsm provider against a fake tree, TDX with the dcap-qvl
//! sample quote, and `hush attest verify`.

mod common;
use common::*;
use hush_attest::cli::{run, VerifyOptions};
use hush_attest::evidence::{encode_cert_table, EvidenceKind};
use hush_attest::policy::Policy;
use hush_attest::provider::ConfigfsTsm;
use hush_attest::verify::{verify, Leg, Outcome, VerifyInput};
use sev::firmware::host::CertType;
use std::path::{Path, PathBuf};

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hush-attest-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A fake `/sys/kernel/config/tsm/report/<name>` as the kernel lays it out
/// after mkdir, with the blobs a guest would get for `report_data`.
fn fake_entry(root: &Path, name: &str, provider: &str, outblob: &[u8], auxblob: &[u8]) {
    let d = root.join(name);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("provider"), format!("{provider}\n")).unwrap();
    std::fs::write(d.join("generation"), "1\n").unwrap();
    std::fs::write(d.join("inblob"), b"").unwrap();
    std::fs::write(d.join("outblob"), outblob).unwrap();
    std::fs::write(d.join("auxblob"), auxblob).unwrap();
    std::fs::write(d.join("privlevel"), "0\n").unwrap();
    std::fs::write(d.join("privlevel_floor"), "0\n").unwrap();
}

const SPKI: &[u8] = b"\x30\x0a spki of the dealer's TLS certificate";
const NONCE: [u8; 32] = [0x42; 32];

#[test]
fn provider_reads_a_fake_configfs_tsm_tree_end_to_end() {
    let root = tmpdir("tsm");
    // The "guest" signs with a test-generated chain (no AMD hardware here).
    let mut r = milan_report();
    let tcb = [r[REPORTED_TCB], r[REPORTED_TCB + 1], r[REPORTED_TCB + 6], r[REPORTED_TCB + 7]];
    let chain = TestChain::generate(tcb, &r[CHIP_ID..CHIP_ID + 64]);
    r[REPORT_DATA..REPORT_DATA + 64].copy_from_slice(&hush_attest::report_data(SPKI, &NONCE));
    chain.sign(&mut r);
    let table = encode_cert_table(&[(CertType::VCEK, &chain.vcek_der), (CertType::ASK, &chain.ask_der), (CertType::ARK, &chain.ark_der)]);
    fake_entry(&root, "hush-test", "sev_guest", &r, &table);

    let p = ConfigfsTsm::new(&root, "hush-test");
    let e = p.get(EvidenceKind::SevSnp, SPKI, &NONCE, None).unwrap();
    // The provider wrote REPORT_DATA = SHA-512(spki || nonce) to inblob.
    assert_eq!(std::fs::read(root.join("hush-test/inblob")).unwrap(), hush_attest::report_data(SPKI, &NONCE));
    assert_eq!(e.report, r);
    assert_eq!(e.aux, table);
    assert_eq!(e.nonce, NONCE);

    let mut policy = Policy::default();
    policy.snp.measurements = vec![r[MEASUREMENT..MEASUREMENT + 48].try_into().unwrap()];
    let input = VerifyInput { tls_spki: Some(SPKI), nonce: Some(&NONCE), now: MILAN_NOW, vek_der: None, test_roots: vec![chain.root()] };
    let wire = hush_attest::Evidence::decode(&e.encode()).unwrap();
    assert!(verify(&wire, &policy, &input).accepted());
    // The same evidence under the default trust (no test root) is refused on the root leg.
    let input = VerifyInput { test_roots: vec![], ..input };
    let v = verify(&wire, &policy, &input);
    assert_eq!(v.failed().map(|f| f.0), Some(Leg::Root), "{v:#?}");

    // A different key: the outblob does not carry what was just written.
    let e = p.get(EvidenceKind::SevSnp, b"\x30\x01 other", &NONCE, None);
    assert!(e.unwrap_err().to_string().contains("does not carry the REPORT_DATA"));
    // Wrong provider for the kind.
    let e = p.get(EvidenceKind::Tdx, SPKI, &NONCE, Some(b"{}".to_vec()));
    assert!(e.unwrap_err().to_string().contains("tdx_guest"));
    // Truncated outblob.
    std::fs::write(root.join("hush-test/outblob"), &r[..100]).unwrap();
    assert!(p.get(EvidenceKind::SevSnp, SPKI, &NONCE, None).is_err());
    // Oversized outblob: refused on the size cap.
    std::fs::write(root.join("hush-test/outblob"), vec![0u8; 5000]).unwrap();
    assert!(p.get(EvidenceKind::SevSnp, SPKI, &NONCE, None).unwrap_err().to_string().contains("allowed"));
    // Unreadable generation.
    std::fs::write(root.join("hush-test/generation"), "x\n").unwrap();
    assert!(p.get(EvidenceKind::SevSnp, SPKI, &NONCE, None).unwrap_err().to_string().contains("generation"));
    // No configfs-tsm at all.
    let e = ConfigfsTsm::new(root.join("absent"), "x").get(EvidenceKind::SevSnp, SPKI, &NONCE, None);
    assert!(e.unwrap_err().to_string().contains("no configfs-tsm"));
    let _ = std::fs::remove_dir_all(&root);
}

/// 2025-06-25: inside the sample collateral's validity (issued 2025-06-19, next update 2025-07-19).
const TDX_NOW: u64 = 1_750_809_600;

fn tdx_evidence(quote: &[u8]) -> hush_attest::Evidence {
    hush_attest::Evidence::new(EvidenceKind::Tdx, vec![], quote.to_vec(), TDX_COLLATERAL.to_vec()).unwrap()
}

#[test]
fn real_tdx_quote_verifies_with_dcap_qvl() {
    let e = tdx_evidence(TDX_QUOTE);
    let input = VerifyInput { now: TDX_NOW, ..Default::default() };
    let v = verify(&e, &Policy::default(), &input);
    // The default policy lists no MRTD: refused on the measurement leg only.
    assert!(matches!(v.outcome(Leg::Signature), Outcome::Pass(_)), "{v:#?}");
    assert_eq!(v.failed().map(|f| f.0), Some(Leg::Measurement), "{v:#?}");
    let mrtd = hush_attest::unhex("mrtd", v.measurement.as_deref().unwrap()).unwrap();
    let mut p = Policy::default();
    p.tdx.mrtd = vec![mrtd.try_into().unwrap()];
    let v = verify(&e, &p, &input);
    for leg in [Leg::Signature, Leg::Chain, Leg::Root, Leg::Tcb, Leg::Measurement, Leg::Debug] {
        assert!(matches!(v.outcome(leg), Outcome::Pass(_)), "{leg:?}\n{v:#?}");
    }
    assert!(v.failed().is_none(), "{v:#?}");
    // A TCB status the policy does not list (the quote's is UpToDate).
    let mut strict = p.clone();
    strict.tdx.tcb_statuses = vec!["NoSuchStatus".into()];
    assert_eq!(verify(&e, &strict, &input).failed().map(|f| f.0), Some(Leg::Tcb));
    // An RTMR the policy pins to another value.
    let mut rt = p.clone();
    rt.tdx.rtmr[0] = Some(vec![[0x11; 48]]);
    assert_eq!(verify(&e, &rt, &input).failed().map(|f| f.0), Some(Leg::Measurement));
    // Binding: a presented key the quote does not bind.
    let other = VerifyInput { tls_spki: Some(b"\x30\x00"), ..input.clone() };
    assert_eq!(verify(&e, &p, &other).failed().map(|f| f.0), Some(Leg::ReportDataBinding));
    // A flipped bit in the quote body: signature leg.
    let mut q = TDX_QUOTE.to_vec();
    q[48 + 136] ^= 1; // inside MRTD
    let v = verify(&tdx_evidence(&q), &p, &input);
    assert_eq!(v.failed().map(|f| f.0), Some(Leg::Signature), "{v:#?}");
    // Collateral older than the policy allows: freshness leg.
    let mut old = p.clone();
    old.tdx.collateral_max_age_days = 1;
    let v = verify(&e, &old, &VerifyInput { now: TDX_NOW + 3 * 86_400, ..Default::default() });
    assert!(matches!(v.outcome(Leg::Freshness), Outcome::Fail(_)), "{v:#?}");
    // Collateral that is not JSON.
    let bad = hush_attest::Evidence::new(EvidenceKind::Tdx, vec![], TDX_QUOTE.to_vec(), b"not json".to_vec()).unwrap();
    assert_eq!(verify(&bad, &p, &input).failed().map(|f| f.0), Some(Leg::Chain));
}

#[test]
fn hush_attest_verify_prints_each_leg_of_the_real_snp_report() {
    let dir = tmpdir("cli");
    let report = milan_report();
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        format!("[sev_snp]\nproducts = [\"Milan\"]\nmeasurements = [\"{}\"]\n", hush_attest::hex(&report[MEASUREMENT..MEASUREMENT + 48])),
    )
    .unwrap();
    let testdata = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let args: Vec<String> = [
        "--evidence",
        testdata.join("report_milan.hex").to_str().unwrap(),
        "--vcek",
        testdata.join("vcek_milan.der").to_str().unwrap(),
        "--policy",
        policy.to_str().unwrap(),
        "--at",
        &MILAN_NOW.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let o = VerifyOptions::parse(&args).unwrap();
    let mut out = Vec::new();
    let v = run(&o, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    for leg in ["signature", "chain", "root", "tcb", "measurement", "debug"] {
        assert!(text.lines().any(|l| l.trim_start().starts_with("pass") && l.contains(leg)), "{leg}\n{text}");
    }
    assert!(text.contains(&format!("measurement: {}", hush_attest::hex(&report[MEASUREMENT..MEASUREMENT + 48]))), "{text}");
    assert!(text.contains("verdict:     incomplete"), "{text}");
    assert!(v.failed().is_none());
    // JSON.
    let mut args = args.clone();
    args.push("--json".into());
    let mut out = Vec::new();
    run(&VerifyOptions::parse(&args).unwrap(), &mut out).unwrap();
    let j: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(j["legs"][0]["leg"], "signature");
    assert_eq!(j["legs"][0]["status"], "pass");
    assert_eq!(j["verdict"], "incomplete");
    // Usage errors.
    assert!(VerifyOptions::parse(&["--vcek".to_string()]).is_err());
    assert!(VerifyOptions::parse(&["--bogus".to_string()]).is_err());
    assert_eq!(hush_attest::cli::attest_main(&["nope".to_string()]), 64);
    let _ = std::fs::remove_dir_all(&dir);
}
