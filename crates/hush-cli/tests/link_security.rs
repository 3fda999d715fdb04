//! The `hush` command over TLS: `hush serve` prints its fingerprint, `hush
//! infer --pin` with it gets the right prediction, and a wrong pin, a
//! plaintext client against a TLS server, and a TLS client against a
//! plaintext server are each refused with a clear error, promptly (the
//! bound below is a liveness bound, far above the 5 s handshake deadline
//! and far below the 60 s silence timeout a hang would hit).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const HUSH: &str = env!("CARGO_BIN_EXE_hush");
const LIVENESS: Duration = Duration::from_secs(15);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Server(Child);
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// Starts `hush serve` and returns it with the fingerprint it printed (None if --insecure).
fn serve(addr: &str, extra: &[&str]) -> (Server, Option<String>) {
    let model = repo().join("models/mnist_cnn.hushm");
    let mut child = Command::new(HUSH)
        .args(["serve", "--model", model.to_str().unwrap(), "--listen", addr])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let insecure = extra.contains(&"--insecure");
    let fp = if insecure {
        None
    } else {
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let fp = line.trim().strip_prefix("fingerprint ").unwrap_or_else(|| panic!("first line {line:?}")).to_string();
        assert!(fp.starts_with("sha256:") && fp.len() == 7 + 64, "{fp}");
        Some(fp)
    };
    // wait until it listens
    let t = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(t.elapsed() < LIVENESS, "server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    (Server(child), fp)
}

/// Runs `hush infer`; returns (success, stdout+stderr, elapsed).
fn infer(addr: &str, extra: &[&str]) -> (bool, String, Duration) {
    let input = repo().join("models/samples/mnist_8000_label4.npy");
    let out = std::env::temp_dir().join(format!("hush-link-test-{}-{}.npy", std::process::id(), addr.replace(':', "_")));
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
fn serve_and_infer_over_tls_with_pins() {
    let addr = free_addr();
    let (_srv, fp) = serve(&addr, &[]);
    let fp = fp.unwrap();
    // the right pin: the right prediction
    let (ok, text, _) = infer(&addr, &["--pin", &fp]);
    assert!(ok, "{text}");
    assert!(text.contains("class 4"), "{text}");
    // ADDR=fingerprint form
    let (ok, text, _) = infer(&addr, &["--pin", &format!("{addr}={fp}")]);
    assert!(ok && text.contains("class 4"), "{text}");
    // no pin: refused before connecting
    let (ok, text, _) = infer(&addr, &[]);
    assert!(!ok && text.contains("no pin"), "{text}");
    // a wrong pin: refused, naming both fingerprints
    let wrong = format!("sha256:{}", "ab".repeat(32));
    let (ok, text, el) = infer(&addr, &["--pin", &wrong]);
    assert!(!ok && text.contains(&wrong) && text.contains(&fp), "{text}");
    assert!(el < LIVENESS, "wrong pin took {el:?}");
    // plaintext client against the TLS server
    let (ok, text, el) = infer(&addr, &["--insecure"]);
    assert!(!ok && text.contains("TLS"), "{text}");
    assert!(el < LIVENESS, "--insecure client took {el:?}");
    // the server kept serving
    let (ok, text, _) = infer(&addr, &["--pin", &fp]);
    assert!(ok && text.contains("class 4"), "{text}");
}

#[test]
fn tls_client_against_plaintext_server_is_refused() {
    let addr = free_addr();
    let (_srv, fp) = serve(&addr, &["--insecure"]);
    assert!(fp.is_none());
    let any = format!("sha256:{}", "cd".repeat(32));
    let (ok, text, el) = infer(&addr, &["--pin", &any]);
    assert!(!ok && text.contains("insecure"), "{text}");
    assert!(el < LIVENESS, "took {el:?}");
    let (ok, text, _) = infer(&addr, &["--insecure"]);
    assert!(ok && text.contains("class 4"), "{text}");
}

#[test]
fn keygen_identity_is_used_by_serve() {
    let dir = std::env::temp_dir().join(format!("hush-keygen-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let o = Command::new(HUSH).args(["keygen", "--out", dir.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success());
    let line = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let fp = line.strip_prefix("fingerprint ").unwrap().to_string();
    assert!(dir.join("identity.key").exists() && dir.join("identity.crt").exists());
    // keygen refuses to overwrite
    let o2 = Command::new(HUSH).args(["keygen", "--out", dir.to_str().unwrap()]).output().unwrap();
    assert!(!o2.status.success());
    let addr = free_addr();
    let (_srv, served) = serve(&addr, &["--identity", dir.to_str().unwrap()]);
    assert_eq!(served.unwrap(), fp);
    let (ok, text, _) = infer(&addr, &["--pin", &fp]);
    assert!(ok && text.contains("class 4"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server given `--pin` requires client certificates and serves only
/// the pinned clients.
#[test]
fn server_with_client_pins_requires_a_pinned_client() {
    let base = std::env::temp_dir().join(format!("hush-clientpin-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let (srv_dir, cli_dir) = (base.join("server"), base.join("client"));
    let keygen = |d: &PathBuf| {
        let o = Command::new(HUSH).args(["keygen", "--out", d.to_str().unwrap()]).output().unwrap();
        assert!(o.status.success());
        String::from_utf8_lossy(&o.stdout).trim().strip_prefix("fingerprint ").unwrap().to_string()
    };
    let (srv_fp, cli_fp) = (keygen(&srv_dir), keygen(&cli_dir));
    let addr = free_addr();
    let (_srv, served) = serve(&addr, &["--identity", srv_dir.to_str().unwrap(), "--pin", &cli_fp]);
    assert_eq!(served.unwrap(), srv_fp);
    // the pinned client is served
    let (ok, text, _) = infer(&addr, &["--pin", &srv_fp, "--identity", cli_dir.to_str().unwrap()]);
    assert!(ok && text.contains("class 4"), "{text}");
    // a client with another (ephemeral) identity is refused, promptly
    let (ok, text, el) = infer(&addr, &["--pin", &srv_fp]);
    assert!(!ok, "{text}");
    assert!(el < LIVENESS, "took {el:?}");
    let _ = std::fs::remove_dir_all(&base);
}
