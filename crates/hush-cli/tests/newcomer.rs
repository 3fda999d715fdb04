//! The rough edges a newcomer hit in the first hour (issue 32), each
//! pinned: `hush keygen --show`, the grouped and wrapped `hush --help`, the
//! closed-port line naming the wait and `--connect-timeout`, an address
//! without a port, and a bad `.npy` named once, without a doubled prefix.

use std::path::PathBuf;
use std::process::{Command, Output};

const HUSH: &str = env!("CARGO_BIN_EXE_hush");

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hush-newcomer-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn hush(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(HUSH);
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn pin() -> String {
    format!("sha256:{}", "ab".repeat(32))
}

#[test]
fn keygen_show_prints_the_fingerprint_keygen_printed() {
    let d = tmp("keygen");
    let id = d.join("server");
    let made = hush(&["keygen", "--out", id.to_str().unwrap()], &[]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let shown = hush(&["keygen", "--show", id.to_str().unwrap()], &[]);
    assert!(shown.status.success(), "{}", text(&shown.stderr));
    let fp = |o: &Output| text(&o.stdout).split_whitespace().find(|w| w.starts_with("sha256:")).map(str::to_string);
    assert!(fp(&made).is_some(), "{}", text(&made.stdout));
    assert_eq!(fp(&made), fp(&shown));
    // --show never writes: the files are unchanged, and a second identity differs
    let other = hush(&["keygen", "--out", d.join("other").to_str().unwrap()], &[]);
    assert_ne!(fp(&other), fp(&made));
    // a folder without an identity: an error naming the file, no new identity made
    let missing = d.join("missing");
    let o = hush(&["keygen", "--show", missing.to_str().unwrap()], &[]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("identity.key"), "{}", text(&o.stderr));
    assert!(!missing.exists(), "--show created {}", missing.display());
    // neither flag, or both: usage errors
    assert_eq!(hush(&["keygen"], &[]).status.code(), Some(2));
    let both = hush(&["keygen", "--out", d.join("x").to_str().unwrap(), "--show", id.to_str().unwrap()], &[]);
    assert_eq!(both.status.code(), Some(2), "{}", text(&both.stderr));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn help_groups_every_subcommand_and_wraps_at_the_width() {
    let o = hush(&["--help"], &[("COLUMNS", "80")]);
    assert!(o.status.success());
    let h = text(&o.stdout);
    for title in ["Private inference", "Three-party circuit service", "Training", "Tools"] {
        assert!(h.lines().any(|l| l.starts_with(title) && l.ends_with(':')), "no group {title}:\n{h}");
    }
    // every subcommand clap knows is listed exactly once, under some group
    let names = [
        "demo", "demo-cot", "serve", "infer", "run", "dealer", "bench", "embed", "import", "report", "config", "node", "job",
        "share", "fetch", "keygen", "circuit", "train", "predict", "attest",
    ];
    for n in names {
        let count = h.lines().filter(|l| l.split_whitespace().next() == Some(n) && l.starts_with("  ")).count();
        assert_eq!(count, 1, "{n} listed {count} times:\n{h}");
    }
    // the groups come before the options, and no flat "Commands:" list is left
    assert!(!h.contains("\nCommands:"), "{h}");
    for (cmd, width) in [(vec!["--help"], 80usize), (vec!["infer", "--help"], 80), (vec!["serve", "--help"], 60), (vec!["--help"], 60)] {
        let o = hush(&cmd, &[("COLUMNS", &width.to_string())]);
        for l in text(&o.stdout).lines() {
            assert!(l.chars().count() <= width, "`hush {}` at COLUMNS={width}: a line of {} columns:\n{l}", cmd.join(" "), l.chars().count());
        }
    }
    // a subcommand's own help is clap's usual layout, wrapped too
    let o = hush(&["keygen", "--help"], &[("COLUMNS", "80")]);
    assert!(text(&o.stdout).contains("--show <DIR>"), "{}", text(&o.stdout));
}

#[test]
fn closed_port_names_the_wait_and_the_flag() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    drop(l);
    let x = repo().join("models/samples/mnist_8000_label4.npy");
    let out = tmp("closed").join("y.npy");
    let o = hush(
        &["infer", "--connect", &addr, "--connect-timeout", "1", "--pin", &pin(), "--input", x.to_str().unwrap(), "--out", out.to_str().unwrap()],
        &[],
    );
    let err = text(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains(&format!("waiting for {addr}: connection refused, retrying… (for up to 1 s)")), "{err}");
    assert!(err.contains("--connect-timeout"), "{err}");
    assert!(err.contains(&format!("could not connect to {addr}: connection refused")), "{err}");
}

#[test]
fn an_address_without_a_port_says_host_port() {
    let x = repo().join("models/samples/mnist_8000_label4.npy");
    for bad in ["127.0.0.1", "localhost", "::1"] {
        let o = hush(&["infer", "--connect", bad, "--pin", &pin(), "--input", x.to_str().unwrap(), "--out", "unused.npy"], &[]);
        let err = text(&o.stderr);
        assert!(!o.status.success());
        assert!(err.contains("expected HOST:PORT"), "{bad}: {err}");
    }
    // a port that is a port is not mistaken for a missing one
    let o = hush(&["infer", "--connect", "no-such-host.invalid:7000", "--connect-timeout", "1", "--pin", &pin(), "--input", x.to_str().unwrap(), "--out", "unused.npy"], &[]);
    assert!(!text(&o.stderr).contains("expected HOST:PORT"), "{}", text(&o.stderr));
}

#[test]
fn a_bad_npy_is_named_once_without_a_doubled_prefix() {
    let d = tmp("npy");
    let x = d.join("x.npy");
    std::fs::write(&x, b"not numpy at all").unwrap();
    let model = repo().join("models/mnist_cnn.hushm");
    let o = hush(&["run", "--model", model.to_str().unwrap(), "--input", x.to_str().unwrap(), "--out", d.join("y.npy").to_str().unwrap()], &[]);
    let err = text(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains(&format!("input: {}: not a .npy file", x.display())), "{err}");
    assert_eq!(err.matches("input:").count(), 1, "{err}");
    assert!(!err.contains("input: npy:"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// An RFC 3339 UTC timestamp with milliseconds at the start of `line`, then a space.
fn stamped(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() > 25
        && line.is_char_boundary(24)
        && line[..24].chars().enumerate().all(|(i, c)| match i {
            4 | 7 => c == '-',
            10 => c == 'T',
            13 | 16 => c == ':',
            19 => c == '.',
            23 => c == 'Z',
            _ => c.is_ascii_digit(),
        })
        && b[24] == b' '
}

#[test]
fn server_log_lines_carry_timestamps() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    assert!(stamped("2026-11-28T13:52:56.892Z hush serve: session 1: x"));
    assert!(!stamped("hush serve: session 1: 1 inference(s) served"));
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    drop(l);
    let model = repo().join("models/mnist_cnn.hushm");
    let mut srv = Command::new(HUSH)
        .args(["serve", "--model", model.to_str().unwrap(), "--listen", &addr])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut fp = String::new();
    BufReader::new(srv.stdout.take().unwrap()).read_line(&mut fp).unwrap();
    let fp = fp.trim().strip_prefix("fingerprint ").unwrap().to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    let err = srv.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let x = repo().join("models/samples/mnist_8000_label4.npy");
    let out = tmp("log").join("y.npy");
    let o = hush(&["infer", "--connect", &addr, "--pin", &fp, "--input", x.to_str().unwrap(), "--out", out.to_str().unwrap()], &[]);
    let mut lines = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !lines.iter().any(|l: &String| l.contains("session 1:")) && std::time::Instant::now() < deadline {
        if let Ok(l) = rx.recv_timeout(std::time::Duration::from_millis(200)) {
            lines.push(l);
        }
    }
    let _ = srv.kill();
    let _ = srv.wait();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(lines.iter().any(|l| l.contains("session 1: 1 inference(s) served")), "{lines:#?}");
    for l in lines.iter().filter(|l| l.contains("hush serve:")) {
        assert!(stamped(l), "a server log line without an RFC 3339 timestamp: {l}");
    }
}

#[test]
fn a_dealer_mode_server_checks_its_dealer_at_start() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dealer = l.local_addr().unwrap().to_string();
    drop(l);
    let model = repo().join("models/mnist_cnn.hushm");
    for mode in ["dealer", "malicious-client"] {
        let t = std::time::Instant::now();
        let o = hush(
            &["serve", "--model", model.to_str().unwrap(), "--listen", "127.0.0.1:0", "--mode", mode, "--dealer", &dealer, "--dealer-pin", &pin(), "--connect-timeout", "1"],
            &[],
        );
        let err = text(&o.stderr);
        assert!(!o.status.success(), "{mode}: served without a dealer:\n{err}");
        assert!(err.contains(&format!("the dealer at {dealer} cannot be reached at start")), "{mode}: {err}");
        assert!(t.elapsed() < std::time::Duration::from_secs(60), "{mode}: took {:?}", t.elapsed());
    }
}

#[test]
fn raw_integer_pixels_get_a_note() {
    // the bundled image scaled to 0..255 and stored as uint8, as a camera would give it
    let d = tmp("raw");
    let x = d.join("raw.npy");
    let header = "{'descr': '|u1', 'fortran_order': False, 'shape': (1, 28, 28), }";
    let mut h = header.to_string();
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(h.len() as u16).to_le_bytes());
    bytes.extend_from_slice(h.as_bytes());
    bytes.extend((0..784).map(|i| ((i * 37) % 256) as u8));
    std::fs::write(&x, &bytes).unwrap();
    let model = repo().join("models/mnist_cnn.hushm");
    let o = hush(&["run", "--model", model.to_str().unwrap(), "--input", x.to_str().unwrap(), "--out", d.join("y.npy").to_str().unwrap()], &[]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("hush: note:") && err.contains("whole numbers up to 255") && err.contains("normalise"), "{err}");
    // a normalised input gets no note
    let ok = repo().join("models/samples/mnist_8000_label4.npy");
    let o = hush(&["run", "--model", model.to_str().unwrap(), "--input", ok.to_str().unwrap(), "--out", d.join("y2.npy").to_str().unwrap()], &[]);
    assert!(o.status.success() && !text(&o.stderr).contains("note:"), "{}", text(&o.stderr));
    let _ = std::fs::remove_dir_all(&d);
}

/// A refused session's reason lands in the server's log, each line
/// stamped: a wrong pin (the client rejects the server's certificate), a
/// client of another mode, a client that refuses the server's settings
/// (it leaves right after the hello), a client whose input does not fit
/// (it leaves before its first inference), and a peer that does not speak
/// the hush protocol.
#[test]
fn a_refused_sessions_reason_is_in_the_server_log() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    drop(l);
    let model = repo().join("models/mnist_cnn.hushm");
    let mut srv = Command::new(HUSH)
        .args(["serve", "--model", model.to_str().unwrap(), "--listen", &addr])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut fp = String::new();
    BufReader::new(srv.stdout.take().unwrap()).read_line(&mut fp).unwrap();
    let fp = fp.trim().strip_prefix("fingerprint ").unwrap().to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    let err = srv.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let d = tmp("refusals");
    let x = repo().join("models/samples/mnist_8000_label4.npy");
    let (x, out) = (x.to_str().unwrap(), d.join("y.npy"));
    let out = out.to_str().unwrap();
    // a 2-D input the model does not take (float64 .npy, written here)
    let bad = d.join("bad.npy");
    let mut h = "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 5), }".to_string();
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(h.len() as u16).to_le_bytes());
    bytes.extend_from_slice(h.as_bytes());
    bytes.extend(std::iter::repeat(0u8).take(15 * 8));
    std::fs::write(&bad, &bytes).unwrap();
    let dealer_pin = pin();
    let clients: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--pin", &dealer_pin, "--input", x], "the peer rejected our certificate"),
        (vec!["--pin", &fp, "--mode", "dealer", "--dealer", "127.0.0.1:9", "--dealer-pin", &dealer_pin, "--input", x], "trust mode mismatch: the client runs --mode dealer, this server runs --mode tee"),
        (vec!["--pin", &fp, "--bits", "40", "--input", x], "the client left right after the server's hello: it refused the server's settings"),
        (vec!["--pin", &fp, "--input", bad.to_str().unwrap()], "the client left before its first inference"),
    ];
    let mut lines: Vec<String> = Vec::new();
    let wait_for = |lines: &mut Vec<String>, session: usize| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let key = format!("session {session}:");
        while !lines.iter().any(|l| l.contains(&key)) && std::time::Instant::now() < deadline {
            if let Ok(l) = rx.recv_timeout(std::time::Duration::from_millis(200)) {
                lines.push(l);
            }
        }
        lines.iter().find(|l| l.contains(&key)).cloned().unwrap_or_default()
    };
    for (k, (flags, reason)) in clients.iter().enumerate() {
        let mut args = vec!["infer", "--connect", &addr, "--out", out, "--connect-timeout", "5"];
        args.extend(flags.iter().copied());
        let o = hush(&args, &[]);
        assert!(!o.status.success(), "client {k} was served: {}", text(&o.stderr));
        let line = wait_for(&mut lines, k + 1);
        assert!(line.contains(reason), "client {k}: the server logged {line:?}, not {reason:?}; client said {}", text(&o.stderr));
        assert!(stamped(&line), "{line}");
    }
    // a peer that does not speak the hush protocol
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let line = wait_for(&mut lines, clients.len() + 1);
    drop(s);
    let _ = srv.kill();
    let _ = srv.wait();
    assert!(line.contains("does not speak the hush protocol") && stamped(&line), "{line}");
    // the server kept serving: one line per session, every line stamped
    for l in lines.iter().filter(|l| l.contains("hush serve:")) {
        assert!(stamped(l), "{l}");
    }
    let _ = std::fs::remove_dir_all(&d);
}
