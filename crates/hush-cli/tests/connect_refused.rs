//! Connecting where nothing listens: every connecting command prints one
//! "waiting for ADDR: connection refused, retrying…" line, keeps retrying
//! for `--connect-timeout` seconds, then fails with "could not connect to
//! ADDR: connection refused" — never "peer silent", which is reserved for a
//! peer that connected and then stopped talking.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

const HUSH: &str = env!("CARGO_BIN_EXE_hush");

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// An address on loopback where nothing listens (bound, then released).
fn closed_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

fn pin() -> String {
    format!("sha256:{}", "ab".repeat(32))
}

/// Runs `hush args`; returns (success, stderr, elapsed).
fn hush(args: &[&str]) -> (bool, String, Duration) {
    let t = Instant::now();
    let out = Command::new(HUSH).args(args).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned(), t.elapsed())
}

fn check(ok: bool, err: &str, el: Duration, addr: &str, secs: u64) {
    assert!(!ok, "connected to a closed port?\n{err}");
    let waiting = format!("waiting for {addr}: connection refused, retrying…");
    assert_eq!(err.matches(&waiting).count(), 1, "one retry line expected:\n{err}");
    assert!(err.contains(&format!("could not connect to {addr}: connection refused")), "{err}");
    assert!(!err.contains("silent"), "{err}");
    assert!(el >= Duration::from_secs(secs), "gave up after {el:?}, before --connect-timeout {secs}");
    // gives up rather than hangs (a generous bound: CI machines are loaded)
    assert!(el < Duration::from_secs(secs + 120), "still retrying after {el:?} with --connect-timeout {secs}");
}

#[test]
fn infer_against_a_closed_port() {
    let addr = closed_addr();
    let x = repo().join("models/samples/mnist_8000_label4.npy");
    let out = std::env::temp_dir().join(format!("hush-connect-{}.npy", std::process::id()));
    let (ok, err, el) = hush(&[
        "infer", "--connect", &addr, "--connect-timeout", "2", "--pin", &pin(),
        "--input", x.to_str().unwrap(), "--out", out.to_str().unwrap(),
    ]);
    check(ok, &err, el, &addr, 2);
}

#[test]
fn job_against_closed_nodes() {
    let (a, b, c) = (closed_addr(), closed_addr(), closed_addr());
    let nodes = format!("{a},{b},{c}");
    let p = pin();
    let (pa, pb, pc) = (format!("{a}={p}"), format!("{b}={p}"), format!("{c}={p}"));
    let (ok, err, el) = hush(&[
        "job", "--nodes", &nodes, "--pin", &pa, "--pin", &pb, "--pin", &pc, "--connect-timeout", "1",
        "--circuit", "aes128", "--input", "000102030405060708090a0b0c0d0e0f", "--input", "00112233445566778899aabbccddeeff",
    ]);
    assert!(!ok, "{err}");
    assert!(err.contains("connection refused"), "{err}");
    assert!(err.contains("could not connect to"), "{err}");
    assert!(!err.contains("silent"), "{err}");
    assert!(el < Duration::from_secs(150), "still retrying after {el:?} with --connect-timeout 1");
}

#[test]
fn connect_timeout_zero_is_refused() {
    let (ok, err, _) = hush(&["infer", "--connect", &closed_addr(), "--connect-timeout", "0", "--pin", &pin(), "--input", "x.npy", "--out", "y.npy"]);
    assert!(!ok);
    assert!(err.contains("--connect-timeout"), "{err}");
}
