//! Helpers shared by the process-level tests: the `hush` binary, the
//! repository root, a child process killed when dropped, a free loopback
//! address, and starting a listening `hush` command that prints its
//! fingerprint first.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const HUSH: &str = env!("CARGO_BIN_EXE_hush");

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A child process, killed and reaped when dropped.
pub struct Proc(pub Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// Starts a listening `hush` command (`args`) on `addr`; returns it with the
/// fingerprint it printed on its first line, once `addr` accepts, within
/// `liveness`.
pub fn listen(args: &[&str], addr: &str, liveness: Duration) -> (Proc, String) {
    let mut child = Command::new(HUSH).args(args).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let fp = line.trim().strip_prefix("fingerprint ").unwrap_or_else(|| panic!("{args:?}: first line {line:?}")).to_string();
    assert!(fp.starts_with("sha256:") && fp.len() == 7 + 64, "{fp}");
    let t = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(t.elapsed() < liveness, "{args:?} did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    (Proc(child), fp)
}
