//! Module attestation across processes (issue 30): `hush serve` and `hush
//! infer` in tee mode with their modules out of process, each module
//! started as `hush-tee-module --attest test:DIR` (TEST evidence: a test
//! root generated here, no hardware protection) through `HUSH_TEE_MODULE`
//! naming a launcher, the way a deployment names the program that reaches
//! its module in a confidential VM. Both parties check the other's module
//! with `--module-attest POLICY` over TLS. The prediction is right when the
//! policy names the test root and the measurement; a client with the
//! default policy refuses the server's module naming the root leg and the
//! test root; a client whose module is simulated is refused by the server,
//! which goes on serving; a module that cannot attest fails at start.

mod common;
use common::{free_addr, repo, Proc, HUSH};
use hush_attest::test_evidence::TestRootKey;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn tmp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hush-cli-modattest-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The module binary next to `hush` (built with the workspace).
fn module_binary() -> PathBuf {
    let p = Path::new(HUSH).parent().unwrap().join("hush-tee-module");
    assert!(p.is_file(), "{} not built (cargo build --release -p hush-2pc --bin hush-tee-module)", p.display());
    p
}

/// A launcher script running the module with `args` (what
/// `HUSH_TEE_MODULE` names).
fn launcher(dir: &Path, name: &str, args: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\nexec '{}' {args} \"$@\"\n", module_binary().display())).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[test]
fn attested_module_processes_across_two_parties() {
    let dir = tmp("ok");
    let measurement = [0x3c; 48];
    let key = TestRootKey::generate();
    key.write_dir(&dir.join("root"), &measurement).unwrap();
    let policy = dir.join("policy.toml");
    std::fs::write(&policy, format!("[test]\nroots = [\"{}\"]\nmeasurements = [\"{}\"]\n", hush_attest::hex(&key.public()), hush_attest::hex(&measurement))).unwrap();
    let attested = launcher(&dir, "attested.sh", &format!("--attest 'test:{}'", dir.join("root").display()));
    let p = policy.to_str().unwrap();
    let model = repo().join("models/mnist_cnn.hushm");
    let saddr = free_addr();
    let mut child = Command::new(HUSH)
        .args(["serve", "--model", model.to_str().unwrap(), "--listen", &saddr, "--tee", "out-of-process", "--module-attest", p])
        .env("HUSH_TEE_MODULE", &attested)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let _srv = Proc(child);
    let sfp = line.trim().strip_prefix("fingerprint ").unwrap().to_string();
    let t = Instant::now();
    while std::net::TcpStream::connect(&saddr).is_err() {
        assert!(t.elapsed() < Duration::from_secs(20), "hush serve did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let input = repo().join("models/samples/mnist_8000_label4.npy");
    let infer = |policy: &Path, module: Option<&Path>, tee: &str| {
        let mut c = Command::new(HUSH);
        let out = dir.join("out.npy");
        c.args(["infer", "--connect", &saddr, "--pin", &sfp, "--input", input.to_str().unwrap(), "--out", out.to_str().unwrap()]);
        c.args(["--tee", tee, "--module-attest", policy.to_str().unwrap()]);
        if let Some(m) = module {
            c.env("HUSH_TEE_MODULE", m);
        }
        let o = c.output().unwrap();
        (o.status.success(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
    };
    let (ok, text) = infer(&policy, Some(&attested), "out-of-process");
    assert!(ok && text.contains("class 4"), "{text}");

    // the default policy refuses the server's module: a test root
    let default = dir.join("default.toml");
    std::fs::write(&default, "").unwrap();
    let (ok, text) = infer(&default, Some(&attested), "out-of-process");
    assert!(!ok && text.contains("the peer's trusted module was refused") && text.contains("root leg") && text.contains("test root"), "{text}");

    // a client whose module is simulated is refused by the server ...
    let (ok, text) = infer(&policy, None, "in-process");
    assert!(!ok, "{text}");
    // ... which goes on serving
    let (ok, text) = infer(&policy, Some(&attested), "out-of-process");
    assert!(ok && text.contains("class 4"), "{text}");

    // a module that cannot attest fails at start, saying why
    let o = Command::new(module_binary()).args(["--attest", "snp", "--attest-tsm", dir.join("no-such-tree").to_str().unwrap()]).stdin(Stdio::null()).output().unwrap();
    let text = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.code() == Some(2) && text.contains("no evidence at start") && text.contains("no configfs-tsm here"), "{text}");
    let o = Command::new(module_binary()).args(["--attest"]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(o.status.code(), Some(64), "{}", String::from_utf8_lossy(&o.stderr));
    let _ = std::fs::remove_dir_all(dir);
}
