//! Dealer mode across three processes on loopback: `hush dealer`, `hush
//! serve --mode dealer` and `hush infer --mode dealer`, all over TLS with
//! pinned identities, give the right prediction; a client of the other
//! mode is refused naming both modes; once the dealer is gone, a new
//! session fails with a clear error naming the dealer.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const HUSH: &str = env!("CARGO_BIN_EXE_hush");
const LIVENESS: Duration = Duration::from_secs(20);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// Starts a listening `hush` command; returns it with the fingerprint it printed.
fn listen(args: &[&str], addr: &str) -> (Proc, String) {
    let mut child = Command::new(HUSH).args(args).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let fp = line.trim().strip_prefix("fingerprint ").unwrap_or_else(|| panic!("{args:?}: first line {line:?}")).to_string();
    assert!(fp.starts_with("sha256:") && fp.len() == 7 + 64, "{fp}");
    let t = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(t.elapsed() < LIVENESS, "{args:?} did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    (Proc(child), fp)
}

fn infer(addr: &str, extra: &[&str]) -> (bool, String, Duration) {
    let input = repo().join("models/samples/mnist_8000_label4.npy");
    let out = std::env::temp_dir().join(format!("hush-dealer-test-{}-{}.npy", std::process::id(), addr.replace(':', "_")));
    let t = Instant::now();
    let o = Command::new(HUSH)
        .args(["infer", "--connect", addr, "--input", input.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap();
    let el = t.elapsed();
    let _ = std::fs::remove_file(&out);
    (o.status.success(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)), el)
}

#[test]
fn three_processes_dealer_server_client_give_the_right_prediction() {
    let (daddr, saddr) = (free_addr(), free_addr());
    let (dealer, dfp) = listen(&["dealer", "--listen", &daddr], &daddr);
    let model = repo().join("models/mnist_cnn.hushm");
    let (_srv, sfp) = listen(
        &["serve", "--model", model.to_str().unwrap(), "--listen", &saddr, "--mode", "dealer", "--dealer", &daddr, "--dealer-pin", &dfp],
        &saddr,
    );
    let dealer_flags = ["--mode", "dealer", "--dealer", daddr.as_str(), "--dealer-pin", dfp.as_str()];
    let mut args = vec!["--pin", sfp.as_str()];
    args.extend_from_slice(&dealer_flags);
    let (ok, out, el) = infer(&saddr, &args);
    assert!(ok, "{out}");
    assert!(out.contains("class 4"), "{out}");
    assert!(el < LIVENESS, "{el:?}");

    // a tee-mode client against the dealer-mode server: refused, both modes named
    let (ok, out, _) = infer(&saddr, &["--pin", &sfp]);
    assert!(!ok && out.contains("mode mismatch") && out.contains("--mode tee") && out.contains("--mode dealer"), "{out}");

    // a client pinning another dealer: refused before it joins, naming both
    let other = format!("sha256:{}", "ab".repeat(32));
    let (ok, out, _) = infer(&saddr, &["--pin", &sfp, "--mode", "dealer", "--dealer", &daddr, "--dealer-pin", &other]);
    assert!(!ok && out.contains("dealer mismatch") && out.contains(&dfp) && out.contains(&other), "{out}");

    // the dealer disappears: the next session fails promptly, naming the dealer
    drop(dealer);
    let (ok, out, el) = infer(&saddr, &args);
    assert!(!ok && out.contains("dealer"), "{out}");
    assert!(el < LIVENESS, "{el:?}");
}
