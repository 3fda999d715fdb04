//! Two `hush train` processes over loopback (TLS, pinned) train from files;
//! a peer that disconnects ends the other with a clear error and no model file.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

const HUSH: &str = env!("CARGO_BIN_EXE_hush");

fn write_data(dir: &std::path::Path) {
    // planted model w = (1.5, -1.2, 1.1 | -1.8, 1.3, -1.4); deterministic LCG data
    let w = [1.5, -1.2, 1.1, -1.8, 1.3, -1.4];
    let mut s: u64 = 12345;
    let mut next = || {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    };
    let mut l = std::fs::File::create(dir.join("lab.svm")).unwrap();
    let mut f = std::fs::File::create(dir.join("feat.svm")).unwrap();
    for _ in 0..160 {
        let x: Vec<f64> = (0..6).map(|_| next()).collect();
        let y = (x.iter().zip(&w).map(|(a, b)| a * b).sum::<f64>() > 0.0) as u8;
        writeln!(l, "{y} 1:{:.4} 2:{:.4} 3:{:.4}", x[0], x[1], x[2]).unwrap();
        writeln!(f, "0 1:{:.4} 2:{:.4} 3:{:.4}", x[3], x[4], x[5]).unwrap();
    }
}

fn start_labels(dir: &std::path::Path, port: u16, epochs: &str) -> (std::process::Child, String) {
    let mut c = Command::new(HUSH)
        .args(["train", "--role", "labels", "--data"])
        .arg(dir.join("lab.svm"))
        .args(["--listen", &format!("127.0.0.1:{port}"), "--out"])
        .arg(dir.join("lab.model.json"))
        .args(["--bits", "2048", "--epochs", epochs, "--batch", "32", "--lr", "1.0", "--reveal"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(c.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    let fp = line.trim().strip_prefix("fingerprint ").expect("fingerprint line").to_string();
    (c, fp)
}

fn features(dir: &std::path::Path, port: u16, fp: &str, epochs: &str) -> Command {
    let mut c = Command::new(HUSH);
    c.args(["train", "--role", "features", "--data"])
        .arg(dir.join("feat.svm"))
        .args(["--peer", &format!("127.0.0.1:{port}"), "--pin", fp, "--out"])
        .arg(dir.join("feat.model.json"))
        .args(["--bits", "2048", "--epochs", epochs, "--batch", "32", "--lr", "1.0", "--reveal"]);
    c
}

#[test]
fn two_processes_train_and_disconnect() {
    let dir = std::env::temp_dir().join(format!("hush-train-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    write_data(&dir);
    let port = 17000 + (std::process::id() % 2000) as u16;
    let (lab, fp) = start_labels(&dir, port, "2");
    let out = features(&dir, port, &fp, "2").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lo = lab.wait_with_output().unwrap();
    assert!(lo.status.success(), "{}", String::from_utf8_lossy(&lo.stderr));
    let m = std::fs::read_to_string(dir.join("lab.model.json")).unwrap();
    let arr = |k: &str| -> Vec<f64> {
        let i = m.find(&format!("\"{k}\":[")).expect(k) + k.len() + 4;
        let j = i + m[i..].find(']').unwrap();
        m[i..j].split(',').map(|x| x.parse().unwrap()).collect()
    };
    let (wl, wf) = (arr("weights_labels_party"), arr("weights_features_party"));
    let planted = [1.5, -1.2, 1.1, -1.8, 1.3, -1.4];
    for (j, w) in wl.iter().take(3).chain(wf.iter()).enumerate() {
        assert_eq!(*w > 0.0, planted[j] > 0.0, "weight {j}: {m}");
    }

    // predict with the shared model, and a features party that disconnects
    // mid-run: the labels party ends with a clear error, no scores file
    let mut pl = std::fs::File::create(dir.join("lab_big.svm")).unwrap();
    let mut pf = std::fs::File::create(dir.join("feat_big.svm")).unwrap();
    for i in 0..40000u32 {
        let v = |k: u32| ((i.wrapping_mul(2654435761).wrapping_add(k * 40503)) % 2000) as f64 / 1000.0 - 1.0;
        writeln!(pl, "0 1:{:.3} 2:{:.3} 3:{:.3}", v(1), v(2), v(3)).unwrap();
        writeln!(pf, "0 1:{:.3} 2:{:.3} 3:{:.3}", v(4), v(5), v(6)).unwrap();
    }
    drop((pl, pf));
    let mut lp = Command::new(HUSH)
        .args(["predict", "--model"])
        .arg(dir.join("lab.model.json"))
        .arg("--data")
        .arg(dir.join("lab_big.svm"))
        .args(["--listen", &format!("127.0.0.1:{}", port + 2), "--out"])
        .arg(dir.join("scores.csv"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(lp.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    let pfp = line.trim().strip_prefix("fingerprint ").expect("fingerprint line").to_string();
    let mut fp_proc = Command::new(HUSH)
        .args(["predict", "--model"])
        .arg(dir.join("feat.model.json"))
        .arg("--data")
        .arg(dir.join("feat_big.svm"))
        .args(["--peer", &format!("127.0.0.1:{}", port + 2), "--pin", &pfp])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let finished_early = fp_proc.try_wait().unwrap().is_some();
    fp_proc.kill().ok();
    fp_proc.wait().unwrap();
    let lo = lp.wait_with_output().unwrap();
    assert!(!finished_early, "the features party finished before it was killed: make the data larger");
    assert!(!lo.status.success());
    let err = String::from_utf8_lossy(&lo.stderr);
    assert!(err.contains("peer disconnected"), "{err}");
    assert!(!dir.join("scores.csv").exists(), "no scores written half-way");

    // disconnect: kill the features party mid-run
    std::fs::remove_file(dir.join("lab.model.json")).unwrap();
    let (lab, fp) = start_labels(&dir, port + 1, "50");
    let mut f = features(&dir, port + 1, &fp, "50").stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    f.kill().unwrap();
    f.wait().unwrap();
    let lo = lab.wait_with_output().unwrap();
    assert!(!lo.status.success());
    let err = String::from_utf8_lossy(&lo.stderr);
    assert!(err.contains("peer disconnected"), "{err}");
    assert!(!dir.join("lab.model.json").exists(), "no model written half-way");
    std::fs::remove_dir_all(&dir).ok();
}
