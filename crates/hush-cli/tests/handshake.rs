//! Settings the two parties of an inference session must share are checked
//! at the hello: a mismatch is refused with a message naming both settings
//! (family, ring bits, fraction bits, chunk, model digest; the mode is
//! covered by dealer_mode.rs), and a party with `--proto auto` visibly takes
//! its peer's family.

mod common;
use common::{free_addr, repo, HUSH};
use std::process::Command;
use std::time::Duration;

fn infer(addr: &str, pin: &str, extra: &[&str]) -> (bool, String) {
    let input = repo().join("models/samples/mnist_8000_label4.npy");
    let out = std::env::temp_dir().join(format!("hush-handshake-{}-{}.npy", std::process::id(), addr.replace(':', "_")));
    let o = Command::new(HUSH)
        .args(["infer", "--connect", addr, "--pin", pin, "--input", input.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&out);
    (o.status.success(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

fn serve(extra: &[&str]) -> (common::Proc, String, String) {
    let addr = free_addr();
    let model = repo().join("models/mnist_cnn.hushm");
    let mut args = vec!["serve", "--model", model.to_str().unwrap(), "--listen", &addr];
    args.extend_from_slice(extra);
    let (p, fp) = common::listen(&args, &addr, Duration::from_secs(20));
    (p, addr, fp)
}

#[test]
fn mismatches_are_refused_naming_both_settings() {
    let (_srv, addr, fp) = serve(&["--proto", "fss", "--bits", "37", "--frac", "12", "--chunk", "4096"]);
    let cases: &[(&[&str], &[&str])] = &[
        (&["--proto", "tami"], &["protocol family mismatch", "--proto tami", "--proto fss"]),
        (&["--bits", "40"], &["ring bits mismatch", "--bits 40", "--bits 37"]),
        (&["--frac", "16"], &["fraction bits mismatch", "--frac 16", "--frac 12"]),
        (&["--chunk", "1000"], &["chunk mismatch", "--chunk 1000", "--chunk 4096"]),
    ];
    for (flags, want) in cases {
        let (ok, out) = infer(&addr, &fp, flags);
        assert!(!ok, "{flags:?} was accepted: {out}");
        for w in *want {
            assert!(out.contains(w), "{flags:?}: no {w:?} in {out}");
        }
    }
    let model = hush_inference::model::Model::load(&repo().join("models/mnist_cnn.hushm")).unwrap();
    let digest = hush_inference::hello::architecture_digest(&model.header_json);
    let other = format!("sha256:{}", "00".repeat(32));
    let (ok, out) = infer(&addr, &fp, &["--model-digest", &other]);
    assert!(!ok && out.contains("model digest mismatch") && out.contains(&other) && out.contains(&digest), "{out}");
    // every setting as the server has it: accepted
    let (ok, out) = infer(&addr, &fp, &["--proto", "fss", "--bits", "37", "--frac", "12", "--chunk", "4096", "--model-digest", &digest]);
    assert!(ok && out.contains("class 4"), "{out}");
}

#[test]
fn a_party_with_proto_auto_takes_its_peers_family_visibly() {
    // the server names fss (not the default), the client leaves it to the server
    let (_srv, addr, fp) = serve(&["--proto", "fss"]);
    let (ok, out) = infer(&addr, &fp, &[]);
    assert!(ok && out.contains("class 4") && out.contains("protocol family fss (the server's"), "{out}");
    // the server leaves it to the client
    let (_srv2, addr2, fp2) = serve(&[]);
    let (ok, out) = infer(&addr2, &fp2, &["--proto", "fss", "--json"]);
    assert!(ok && out.contains("\"fss\""), "{out}");
}

/// `hush serve --plan auto` (a CNN): the server measures the families at
/// start and serves the cost model's choice, per layer when a mix wins; a
/// client with `--plan auto` runs whatever it chose, a client without it
/// runs it only when it is the preset's one family (a mix is refused at the
/// hello, naming both plans), and `hush infer` takes no plan file.
#[test]
fn a_served_plan_auto_is_run_by_clients_with_plan_auto() {
    let (_srv, addr, fp) = serve(&["--plan", "auto"]);
    let (ok, out) = infer(&addr, &fp, &["--plan", "auto"]);
    assert!(ok && out.contains("class 4"), "{out}");
    let (ok, out) = infer(&addr, &fp, &[]);
    assert!((ok && out.contains("class 4")) || (!ok && out.contains("family plan mismatch") && out.contains("null")), "{out}");
    let (ok, out) = infer(&addr, &fp, &["--plan", "plan.toml"]);
    assert!(!ok && out.contains("--plan plan.toml") && out.contains("plan files are for encoder graphs"), "{out}");
}
