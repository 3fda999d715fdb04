//! Progress bars are drawn only on a terminal: piped, `hush run` and `hush
//! bench infer --table` print their summaries and no bar (no "layers,"
//! counters, no terminal escape codes). Where the `script` utility exists,
//! the same run on a pseudo-terminal does draw the layer bar.

mod common;
use common::{repo, HUSH};
use std::process::Command;

fn run_args(out: &std::path::Path) -> Vec<String> {
    let m = repo().join("models/mnist_cnn.onnx");
    let x = repo().join("models/samples/mnist_8000_label4.npy");
    ["run", "--model", m.to_str().unwrap(), "--input", x.to_str().unwrap(), "--out", out.to_str().unwrap()].iter().map(|s| s.to_string()).collect()
}

#[test]
fn quiet_when_not_a_terminal() {
    let out = std::env::temp_dir().join(format!("hush-progress-{}.npy", std::process::id()));
    let o = Command::new(HUSH).args(run_args(&out)).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("prediction: class 4"));
    assert!(!err.contains("layers,") && !err.contains('\u{1b}'), "a bar on a pipe: {err:?}");
    let o = Command::new(HUSH).args(["bench", "infer", "--table", "--models", "minionn-mnist", "--modes", "tee", "--nets", "lan"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains("minionn-mnist"), "{err}");
    assert!(!err.contains("cells,") && !err.contains('\u{1b}'), "a bar on a pipe: {err:?}");

    // on a pseudo-terminal (where `script` exists): the layer bar is drawn
    let has_script = Command::new("sh").args(["-c", "command -v script"]).output().map(|o| o.status.success()).unwrap_or(false);
    if !has_script {
        eprintln!("skipped the terminal half: no `script` utility");
        return;
    }
    // an emulated WAN makes the run last long enough for the bar to be drawn between layers
    let cmd = std::iter::once(HUSH.to_string()).chain(run_args(&out)).chain(["--net".into(), "wan".into()]).map(|a| format!("'{a}'")).collect::<Vec<_>>().join(" ");
    let o = Command::new("script").args(["-qec", &cmd, "/dev/null"]).env_remove("HUSH_PROGRESS").output().unwrap();
    let all = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{all}");
    assert!(all.contains("layers,") && all.contains("ETA"), "no bar on a terminal: {all:?}");
    let _ = std::fs::remove_file(&out);
}
