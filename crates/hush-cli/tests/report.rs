//! `hush report` on a real `hush bench infer --json` record writes a
//! self-contained HTML file with one SVG per figure (time, bytes and rounds
//! per layer), and `hush bench infer --report` writes the same directly.
//! Where a headless browser is installed it must load the file without a
//! console message and show every SVG; elsewhere that part is skipped (and
//! says so). ResNet-50: a recorded `hush bench infer --model resnet50
//! --json` record (`tests/data/resnet50_infer_tami_tee.json`; a run takes
//! about a minute and 0.5 GB, too much for every test run), whose fields
//! must stay those of a live record.

mod common;
use common::{repo, HUSH};
use std::path::{Path, PathBuf};
use std::process::Command;

fn tmp(name: &str) -> PathBuf {
    tmp_in("live", name)
}

/// A file in this test process's folder `tag` (one per test: they run in parallel).
fn tmp_in(tag: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hush-report-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn check_html(p: &Path) -> String {
    let h = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert!(h.starts_with("<!DOCTYPE html>"));
    assert_eq!(h.matches("<svg").count(), 3, "one SVG per figure");
    assert_eq!(h.matches("</svg>").count(), 3);
    for t in ["Online time per layer", "Bytes per layer", "Rounds per layer", "conv_1"] {
        assert!(h.contains(t), "no {t}");
    }
    // the summary box, human units (bytes in kB/MB, times in ms/s) and axis ticks
    assert!(h.contains(r#"class="summary""#) && h.contains("<h3>Summary</h3>"), "no summary box");
    assert!(h.contains(" MB<") || h.contains(" kB<"), "no bytes in kB/MB");
    assert!(h.contains(" ms<") || h.contains(" s<"), "no times in ms/s");
    assert!(h.matches(r#"class="tick""#).count() >= 3 * 3, "axes without ticks");
    assert!(!h.contains("<script"), "no scripts");
    assert_eq!(h.matches("http").count(), h.matches("http://www.w3.org/2000/svg").count(), "nothing to fetch (only the SVG namespace)");
    h
}

#[test]
fn report_of_a_bench_infer_record() {
    let o = Command::new(HUSH).args(["bench", "infer", "--model", "minionn-mnist", "--json"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let json = tmp("run.json");
    std::fs::write(&json, &o.stdout).unwrap();
    // the recorded ResNet-50 record has the fields of a live one
    let live: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let fixture: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(resnet50_record()).unwrap()).unwrap();
    let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<std::collections::BTreeSet<_>>();
    assert_eq!(keys(&live), keys(&fixture), "the record's fields changed: regenerate {} (see its test)", resnet50_record().display());
    assert_eq!(keys(&live["per_layer"][0]), keys(&fixture["per_layer"][0]), "per-layer fields changed: regenerate the ResNet-50 record");
    let html = tmp("run.html");
    let r = Command::new(HUSH).args(["report"]).arg(&json).arg("--html").arg(&html).output().unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    check_html(&html);
    if let Some(b) = browser() {
        headless_browser_loads(b, &html, 3);
    }

    // directly from the benchmark; its JSON still goes to stdout
    let html2 = tmp("direct.html");
    let o = Command::new(HUSH).args(["bench", "infer", "--model", "minionn-mnist", "--report"]).arg(&html2).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("\"per_layer\""));
    check_html(&html2);

    // a file that is not --json output: an error naming the line
    let bad = tmp("bad.json");
    std::fs::write(&bad, "{\"bench\":\"cot\"}\nhush bench: text table\n").unwrap();
    let r = Command::new(HUSH).args(["report"]).arg(&bad).output().unwrap();
    assert!(!r.status.success() && String::from_utf8_lossy(&r.stderr).contains("line 2"));
    let _ = std::fs::remove_dir_all(json.parent().unwrap());
}

fn resnet50_record() -> PathBuf {
    repo().join("crates/hush-cli/tests/data/resnet50_infer_tami_tee.json")
}

/// `hush report` on a `hush bench infer --json` record of ResNet-50
/// (regenerate with `hush bench infer --model resnet50 --json >
/// crates/hush-cli/tests/data/resnet50_infer_tami_tee.json`): one SVG per
/// figure, a bar per layer in each, and it opens in a headless browser
/// without console messages where one is installed.
#[test]
fn report_of_a_resnet50_record_opens_in_a_headless_browser() {
    let rec: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(resnet50_record()).unwrap()).unwrap();
    assert_eq!(rec["bench"], "infer");
    assert_eq!(rec["model"], "resnet50");
    let layers = rec["per_layer"].as_array().expect("per_layer").len();
    assert!(layers > 100, "ResNet-50 has 122 layers here, the record {layers}");
    let html = tmp_in("resnet50", "resnet50.html");
    let r = Command::new(HUSH).args(["report"]).arg(resnet50_record()).arg("--html").arg(&html).output().unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let h = check_html(&html);
    assert!(h.contains("resnet50"));
    assert_eq!(h.matches(r#"class="bar""#).count(), 3 * layers, "one bar per layer in each of the three figures");
    if let Some(b) = browser() {
        headless_browser_loads(b, &html, 3);
    }
    let _ = std::fs::remove_dir_all(html.parent().unwrap());
}

const BROWSERS: [&str; 5] = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "firefox"];

/// The first headless-capable browser on PATH.
fn browser() -> Option<&'static str> {
    let found = BROWSERS.iter().find(|b| Command::new("sh").args(["-c", &format!("command -v {b}")]).output().map(|o| o.status.success()).unwrap_or(false));
    if found.is_none() {
        eprintln!("skipped: no headless browser installed ({})", BROWSERS.join(", "));
    }
    found.copied()
}

/// Runs `cmd` with a deadline (a browser that hangs fails the test, it does
/// not stall it).
fn run_with_deadline(mut cmd: Command, secs: u64) -> std::process::Output {
    use std::process::Stdio;
    let child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start the browser");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(secs)) {
        Ok(o) => o.expect("browser output"),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("the browser did not finish within {secs} s");
        }
    }
}

/// Chromium-family: the page's console messages (script errors, blocked
/// loads, parse errors) appear on stderr as `…:CONSOLE…` lines with
/// `--enable-logging=stderr`.
fn console_lines(stderr: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stderr).lines().filter(|l| l.contains(":CONSOLE")).map(str::to_string).collect()
}

fn chromium(b: &str, profile: &Path, extra: &[&str], url: &str) -> std::process::Output {
    let mut c = Command::new(b);
    c.args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars", "--enable-logging=stderr", "--v=0"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url);
    run_with_deadline(c, 180)
}

/// Loads the page in headless browser `b`: it must exit cleanly, log no
/// console message, keep all `svgs` SVG elements in its DOM and take a
/// screenshot. The console check is first shown to catch an error on a
/// page with one, so a browser that stopped reporting them fails here.
fn headless_browser_loads(b: &str, html: &Path, svgs: usize) {
    let url = format!("file://{}", html.canonicalize().unwrap().display());
    let shot = html.with_extension("png");
    if b == "firefox" {
        let mut c = Command::new(b);
        c.args(["--headless", "--screenshot"]).arg(&shot).arg(&url);
        let o = run_with_deadline(c, 180);
        assert!(o.status.success(), "{b}: {}", String::from_utf8_lossy(&o.stderr));
    } else {
        let profile = html.with_extension("profile");
        // the detector works: a page with a script error is reported
        let bad = html.with_extension("bad.html");
        std::fs::write(&bad, "<!DOCTYPE html><html><body><script>no_such_function();</script></body></html>").unwrap();
        let o = chromium(b, &profile, &["--dump-dom"], &format!("file://{}", bad.canonicalize().unwrap().display()));
        assert!(
            console_lines(&o.stderr).iter().any(|l| l.contains("no_such_function")),
            "{b} did not report the control page's script error on stderr, so it cannot vouch for the report:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        // the report: its DOM as the browser built it
        let o = chromium(b, &profile, &["--dump-dom"], &url);
        assert!(o.status.success(), "{b}: {}", String::from_utf8_lossy(&o.stderr));
        let errs = console_lines(&o.stderr);
        assert!(errs.is_empty(), "{b} logged console messages loading the report:\n{}", errs.join("\n"));
        let dom = String::from_utf8_lossy(&o.stdout);
        assert_eq!(dom.matches("<svg").count(), svgs, "{b} did not keep the SVGs in its DOM");
        for t in ["Online time per layer", "Bytes per layer", "Rounds per layer", "Summary", r#"class="summary""#, r#"class="tick""#] {
            assert!(dom.contains(t), "{b}'s DOM has no {t}");
        }
        assert!(dom.contains(" MB<") || dom.contains(" kB<"), "{b}'s DOM has no bytes in kB/MB");
        // and a rendering
        let size = format!("--screenshot={}", shot.display());
        let o = chromium(b, &profile, &[&size, "--window-size=1000,2600"], &url);
        assert!(o.status.success(), "{b}: {}", String::from_utf8_lossy(&o.stderr));
        let errs = console_lines(&o.stderr);
        assert!(errs.is_empty(), "{b} logged console messages rendering the report:\n{}", errs.join("\n"));
    }
    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("{b} wrote no screenshot {}: {e}", shot.display()));
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000, "{b}: not a PNG of a rendered page ({} bytes)", png.len());
}
