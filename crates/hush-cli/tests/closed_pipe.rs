//! `hush circuit list | head -1`: output into a closed pipe ends the
//! command quietly with status 141 (as SIGPIPE would), not a panic.

use std::process::{Command, Stdio};

#[test]
fn output_into_a_closed_pipe_is_quiet() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader); // every write now fails with EPIPE
    let out = Command::new(env!("CARGO_BIN_EXE_hush"))
        .args(["circuit", "list"])
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "stderr: {err}");
    assert!(!err.contains("panicked") && !err.contains("backtrace"), "stderr: {err}");
}
