//! The built-in ONNX importer through the `hush` command: `hush serve
//! --model x.onnx` works with no Python on the PATH (and no virtual
//! environment), a client gets the right prediction from it, and `hush
//! import` writes the committed `.hushm` byte for byte; an unsupported
//! operator is refused naming the node and the operator.

mod common;
use common::{free_addr, repo, HUSH};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A PATH with the system's basic tools but no Python: an empty folder.
fn no_python_env(c: &mut Command) -> &mut Command {
    let empty = std::env::temp_dir().join(format!("hush-nopython-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    c.env_clear()
        .env("PATH", &empty)
        .env("HOME", std::env::temp_dir())
}

#[test]
fn serve_onnx_without_python_on_the_path() {
    let addr = free_addr();
    let model = repo().join("models/mnist_cnn.onnx");
    let mut cmd = Command::new(HUSH);
    no_python_env(&mut cmd)
        .args([
            "serve",
            "--model",
            model.to_str().unwrap(),
            "--listen",
            &addr,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = common::Proc(cmd.spawn().unwrap());
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    if !line.starts_with("fingerprint ") {
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(child.0.stderr.as_mut().unwrap(), &mut err);
        panic!("serve did not start: {line:?} {err}");
    }
    let fp = line
        .trim()
        .strip_prefix("fingerprint ")
        .unwrap()
        .to_string();
    let t = Instant::now();
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "serve did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let input = repo().join("models/samples/mnist_8000_label4.npy");
    let out = std::env::temp_dir().join(format!("hush-onnx-test-{}.npy", std::process::id()));
    let mut c = Command::new(HUSH);
    let o = no_python_env(&mut c)
        .args([
            "infer",
            "--connect",
            &addr,
            "--pin",
            &fp,
            "--input",
            input.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&out);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{text}");
    assert!(text.contains("class 4"), "{text}");
}

#[test]
fn import_writes_the_committed_model_file() {
    let out = std::env::temp_dir().join(format!("hush-import-test-{}.hushm", std::process::id()));
    let mut c = Command::new(HUSH);
    let o = no_python_env(&mut c)
        .args(["import"])
        .arg(repo().join("models/mnist_cnn.onnx"))
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("6 layers"));
    let got = std::fs::read(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    assert!(got == std::fs::read(repo().join("models/mnist_cnn.hushm")).unwrap());
}

#[test]
fn unsupported_operator_is_named() {
    // the bundled model with its first node's operator renamed in place: Conv -> Cosh
    let mut b = std::fs::read(repo().join("models/mnist_cnn.onnx")).unwrap();
    let at = b
        .windows(6)
        .position(|w| w == b"\x22\x04Conv")
        .expect("an op_type field 'Conv'");
    b[at + 2..at + 6].copy_from_slice(b"Cosh");
    let dir = std::env::temp_dir().join(format!("hush-import-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("bad.onnx");
    std::fs::write(&p, &b).unwrap();
    let o = Command::new(HUSH)
        .arg("import")
        .arg(&p)
        .arg(dir.join("bad.hushm"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("(operator Cosh): operator not supported"),
        "{err}"
    );
    assert!(err.contains("node '"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
