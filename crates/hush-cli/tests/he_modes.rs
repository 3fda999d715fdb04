//! The HE modes across two processes on loopback: `hush serve --mode
//! interactive|silent` and `hush infer` of the same mode, over TLS with the
//! server pinned, predict the bundled sample's class (4) with the real
//! 128-bit HE parameters; a client of another mode is refused naming both;
//! `hush run --mode interactive` gives the same prediction in one process.

mod common;
use common::{free_addr, listen, repo, HUSH};
use std::process::Command;
use std::time::Duration;

const LIVENESS: Duration = Duration::from_secs(60);

fn serve(mode: &str, addr: &str) -> (common::Proc, String) {
    let model = repo().join("models/mnist_cnn.hushm");
    listen(&["serve", "--model", model.to_str().unwrap(), "--listen", addr, "--mode", mode], addr, LIVENESS)
}

fn infer(addr: &str, fp: &str, mode: &str) -> (bool, String) {
    let input = repo().join("models/samples/mnist_8000_label4.npy");
    let out = std::env::temp_dir().join(format!("hush-he-test-{}-{}.npy", std::process::id(), addr.replace(':', "_")));
    let o = Command::new(HUSH)
        .args(["infer", "--connect", addr, "--pin", fp, "--mode", mode, "--input", input.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&out);
    (o.status.success(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

#[test]
fn two_processes_in_each_he_mode_give_the_right_prediction() {
    for mode in ["interactive", "silent"] {
        let addr = free_addr();
        let (_srv, fp) = serve(mode, &addr);
        let (ok, out) = infer(&addr, &fp, mode);
        assert!(ok && out.contains("class 4"), "{mode}: {out}");
        let other = if mode == "interactive" { "silent" } else { "tee" };
        let (ok, out) = infer(&addr, &fp, other);
        assert!(!ok && out.contains("mode mismatch") && out.contains(&format!("--mode {mode}")) && out.contains(&format!("--mode {other}")), "{out}");
    }
}

#[test]
fn run_interactive_in_one_process() {
    let model = repo().join("models/mnist_cnn.hushm");
    let input = repo().join("models/samples/mnist_8000_label4.npy");
    let out = std::env::temp_dir().join(format!("hush-he-run-{}.npy", std::process::id()));
    let o = Command::new(HUSH)
        .args(["run", "--mode", "interactive", "--model", model.to_str().unwrap(), "--input", input.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&out);
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success() && text.contains("class 4"), "{text}");
    // a family that does not run in the mode is a clear error
    let o = Command::new(HUSH)
        .args(["run", "--mode", "interactive", "--proto", "tami", "--model", model.to_str().unwrap(), "--input", input.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(!o.status.success() && text.contains("--proto tami does not run in --mode interactive"), "{text}");
}
