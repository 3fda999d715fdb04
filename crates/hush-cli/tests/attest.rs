//! `hush attest verify` through the binary: the real SEV-SNP report the
//! `sev` crate ships (crates/hush-attest/testdata) prints every hardware leg
//! as passed and the measurement; exit status 2 offline (binding and
//! freshness skipped), 1 when a leg fails, naming it.

use std::path::PathBuf;
use std::process::Command;

const HUSH: &str = env!("CARGO_BIN_EXE_hush");

fn testdata(f: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../hush-attest/testdata").join(f).to_str().unwrap().to_string()
}

#[test]
fn attest_verify_prints_each_leg_of_the_real_snp_report() {
    let hex = std::fs::read_to_string(testdata("report_milan.hex")).unwrap();
    let report = hush_attest::unhex("report", &hex).unwrap();
    let measurement = hush_attest::hex(&report[0x90..0xc0]);
    let dir = std::env::temp_dir().join(format!("hush-cli-attest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("policy.toml");
    std::fs::write(&policy, format!("[sev_snp]\nmeasurements = [\"{measurement}\"]\n")).unwrap();
    let base = ["attest", "verify", "--evidence", &testdata("report_milan.hex"), "--vcek", &testdata("vcek_milan.der"), "--at", "1750000000"];
    let o = Command::new(HUSH).args(base).args(["--policy", policy.to_str().unwrap()]).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    for leg in ["signature", "chain", "root", "tcb", "measurement", "debug"] {
        assert!(out.lines().any(|l| l.trim_start().starts_with("pass") && l.split_whitespace().nth(1) == Some(leg)), "{leg}:\n{out}");
    }
    assert!(out.contains(&format!("measurement: {measurement}")), "{out}");
    assert_eq!(o.status.code(), Some(2), "{out}\n{}", String::from_utf8_lossy(&o.stderr));
    // The default policy lists no measurement: refused, naming the leg.
    let o = Command::new(HUSH).args(base).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("refused on the measurement leg"), "{}", String::from_utf8_lossy(&o.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}
