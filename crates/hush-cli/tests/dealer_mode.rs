//! Dealer mode across three processes on loopback: `hush dealer`, `hush
//! serve --mode dealer` and `hush infer --mode dealer`, all over TLS with
//! pinned identities, give the right prediction; a client of the other
//! mode is refused naming both modes; once the dealer is gone, a new
//! session fails with a clear error naming the dealer.

mod common;
use common::{free_addr, repo, HUSH};
use std::process::Command;
use std::time::{Duration, Instant};

const LIVENESS: Duration = Duration::from_secs(20);

fn listen(args: &[&str], addr: &str) -> (common::Proc, String) {
    common::listen(args, addr, LIVENESS)
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
