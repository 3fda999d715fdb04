//! Dealer attestation across three processes (issue 30): `hush dealer
//! --attest test:DIR` (TEST evidence: a test root generated here, no
//! hardware protection), `hush serve` and `hush infer` with
//! `--dealer-attest POLICY` in place of `--dealer-pin`. The prediction is
//! right when the policy names the test root and the measurement; a server
//! whose policy is the default one refuses the dealer at start, naming the
//! root leg and the test root; `--attest` refuses `--identity`.

mod common;
use common::{free_addr, repo, HUSH};
use hush_attest::test_evidence::TestRootKey;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const LIVENESS: Duration = Duration::from_secs(20);

fn tmp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hush-cli-attest-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write_policy(path: &Path, root: &[u8; 32], measurement: &[u8; 48]) {
    std::fs::write(
        path,
        format!("[test]\nroots = [\"{}\"]\nmeasurements = [\"{}\"]\n", hush_attest::hex(root), hush_attest::hex(measurement)),
    )
    .unwrap();
}

#[test]
fn attested_dealer_across_three_processes() {
    let dir = tmp("ok");
    let measurement = [0x5a; 48];
    let key = TestRootKey::generate();
    key.write_dir(&dir.join("root"), &measurement).unwrap();
    let policy = dir.join("policy.toml");
    write_policy(&policy, &key.public(), &measurement);
    let (daddr, saddr) = (free_addr(), free_addr());
    let attest = format!("test:{}", dir.join("root").display());
    let (_dealer, _dfp) = common::listen(&["dealer", "--listen", &daddr, "--attest", &attest], &daddr, LIVENESS);
    let model = repo().join("models/mnist_cnn.hushm");
    let p = policy.to_str().unwrap();
    let (_srv, sfp) = common::listen(
        &["serve", "--model", model.to_str().unwrap(), "--listen", &saddr, "--mode", "dealer", "--dealer", &daddr, "--dealer-attest", p],
        &saddr,
        LIVENESS,
    );
    let input = repo().join("models/samples/mnist_8000_label4.npy");
    let out = dir.join("out.npy");
    let o = Command::new(HUSH)
        .args(["infer", "--connect", &saddr, "--input", input.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .args(["--pin", &sfp, "--mode", "dealer", "--dealer", &daddr, "--dealer-attest", p])
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success() && text.contains("class 4"), "{text}");

    // a server with the default policy refuses the dealer at start
    let default = dir.join("default.toml");
    std::fs::write(&default, "").unwrap();
    let o = Command::new(HUSH)
        .args(["serve", "--model", model.to_str().unwrap(), "--listen", &free_addr(), "--mode", "dealer", "--dealer", &daddr])
        .args(["--dealer-attest", default.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && text.contains("root leg") && text.contains("test root"), "{text}");

    // a dealer that loads its key from disk cannot attest it
    let o = Command::new(HUSH).args(["dealer", "--listen", &free_addr(), "--attest", &attest, "--identity", dir.to_str().unwrap()]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && text.contains("--attest refuses --identity"), "{text}");
    let _ = std::fs::remove_dir_all(dir);
}
