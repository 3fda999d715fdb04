//! `--mode malicious-client` (CRISP) across three processes on loopback:
//! `hush dealer`, `hush serve --mode malicious-client` and `hush infer
//! --mode malicious-client`, all over TLS with pinned identities. An honest
//! client's logits equal the plaintext fixed-point reference (`hush run
//! --exec reference`) exactly, over two inputs of one session; a client
//! with another MAC parameter s and a semi-honest client are refused,
//! naming both settings, and the server goes on serving. (Clients that
//! deviate inside the protocol are played by the library's tests over TCP
//! with TLS: `tests_crisp::served_over_tls_…`.)

mod common;
use common::{free_addr, repo, HUSH};
use std::process::Command;
use std::time::Duration;

const LIVENESS: Duration = Duration::from_secs(30);

fn run(args: &[&str]) -> (bool, String) {
    let o = Command::new(HUSH).args(args).output().unwrap();
    (o.status.success(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

#[test]
fn three_processes_honest_client_equals_reference_and_mismatches_are_refused() {
    let (daddr, saddr) = (free_addr(), free_addr());
    let (_dealer, dfp) = common::listen(&["dealer", "--listen", &daddr], &daddr, LIVENESS);
    let model = repo().join("models/mnist_cnn.hushm");
    let model = model.to_str().unwrap();
    let (_srv, sfp) = common::listen(
        &["serve", "--model", model, "--listen", &saddr, "--mode", "malicious-client", "--dealer", &daddr, "--dealer-pin", &dfp],
        &saddr,
        LIVENESS,
    );
    let tmp = std::env::temp_dir().join(format!("hush-mc-test-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    // a stack of two inputs: one session, two inferences (a fresh MAC key each)
    let a = repo().join("models/samples/mnist_8000_label4.npy");
    let input = a.to_str().unwrap();
    let batch = tmp.join("two.npy");
    let (shape, x) = hush_inference::npy::read(&a).unwrap();
    let mut two = x.clone();
    two.extend(x.iter().map(|v| 1.0 - v));
    let mut bshape = vec![2];
    bshape.extend(shape.iter().skip_while(|&&d| d == 1).copied());
    hush_inference::npy::write(&batch, &bshape, &two).unwrap();
    let out = tmp.join("out.npy");
    let refo = tmp.join("ref.npy");
    let mc = ["--mode", "malicious-client", "--dealer", daddr.as_str(), "--dealer-pin", dfp.as_str(), "--pin", sfp.as_str()];

    let mut args = vec!["infer", "--connect", &saddr, "--input", batch.to_str().unwrap(), "--out", out.to_str().unwrap(), "--batch"];
    args.extend_from_slice(&mc);
    let (ok, log) = run(&args);
    assert!(ok, "{log}");
    assert!(log.contains("class 4"), "{log}");
    let (ok, log) = run(&["run", "--model", model, "--input", batch.to_str().unwrap(), "--out", refo.to_str().unwrap(), "--batch", "--exec", "reference"]);
    assert!(ok, "{log}");
    let (_, got) = hush_inference::npy::read(&out).unwrap();
    let (_, want) = hush_inference::npy::read(&refo).unwrap();
    assert_eq!(got.len(), 20);
    assert_eq!(got, want, "malicious-client logits vs the fixed-point reference");

    // another s: refused by the server, naming both
    let mut args = vec!["infer", "--connect", &saddr, "--input", input, "--out", out.to_str().unwrap(), "--mac-s", "48"];
    args.extend_from_slice(&mc);
    let (ok, log) = run(&args);
    assert!(!ok && log.contains("MAC parameter mismatch") && log.contains("--mac-s 48") && log.contains("--mac-s 40"), "{log}");
    // a semi-honest dealer-mode client: refused, both modes named
    let (ok, log) = run(&["infer", "--connect", &saddr, "--input", input, "--out", out.to_str().unwrap(), "--mode", "dealer", "--dealer", &daddr, "--dealer-pin", &dfp, "--pin", &sfp]);
    assert!(!ok && log.contains("trust mode mismatch") && log.contains("--mode dealer") && log.contains("--mode malicious-client"), "{log}");
    // without a dealer: refused before connecting, saying why a module is not offered
    let (ok, log) = run(&["infer", "--connect", &saddr, "--input", input, "--out", out.to_str().unwrap(), "--mode", "malicious-client", "--pin", &sfp]);
    assert!(!ok && log.contains("--dealer ADDR") && log.contains("simulated"), "{log}");
    // --mac-s outside the mode, and an unsound s: refused
    let (ok, log) = run(&["run", "--model", model, "--input", input, "--out", out.to_str().unwrap(), "--mac-s", "48"]);
    assert!(!ok && log.contains("apply to --mode malicious-client"), "{log}");
    let (ok, log) = run(&["run", "--model", model, "--input", input, "--out", out.to_str().unwrap(), "--mode", "malicious-client", "--mac-s", "8"]);
    assert!(!ok && log.contains("--mac-s 8"), "{log}");

    // the server still serves
    let mut args = vec!["infer", "--connect", &saddr, "--input", input, "--out", out.to_str().unwrap()];
    args.extend_from_slice(&mc);
    let (ok, log) = run(&args);
    assert!(ok && log.contains("class 4"), "{log}");

    // hush run in this mode (both parties and a dealer in one process, TCP + TLS)
    let (ok, log) = run(&["run", "--model", model, "--input", input, "--out", out.to_str().unwrap(), "--mode", "malicious-client", "--json"]);
    assert!(ok, "{log}");
    let (_, got) = hush_inference::npy::read(&out).unwrap();
    assert_eq!(got[..], want[..10], "hush run --mode malicious-client vs the reference");
    let _ = std::fs::remove_dir_all(&tmp);
}
