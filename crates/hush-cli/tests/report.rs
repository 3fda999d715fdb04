//! `hush report` on a real `hush bench infer --json` record writes a
//! self-contained HTML file with one SVG per figure (time, bytes and rounds
//! per layer), and `hush bench infer --report` writes the same directly.
//! Where a headless browser is installed it must load the file; elsewhere
//! that part is skipped (and says so).

mod common;
use common::HUSH;
use std::path::{Path, PathBuf};
use std::process::Command;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hush-report-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn check_html(p: &Path) -> String {
    let h = std::fs::read_to_string(p).unwrap();
    assert!(h.starts_with("<!DOCTYPE html>"));
    assert_eq!(h.matches("<svg").count(), 3, "one SVG per figure");
    assert_eq!(h.matches("</svg>").count(), 3);
    for t in ["Online time per layer", "Bytes per layer", "Rounds per layer", "conv_1"] {
        assert!(h.contains(t), "no {t}");
    }
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
    let html = tmp("run.html");
    let r = Command::new(HUSH).args(["report"]).arg(&json).arg("--html").arg(&html).output().unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    check_html(&html);
    headless_browser_loads(&html);

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

/// Loads the page in a headless browser where one is installed.
fn headless_browser_loads(html: &Path) {
    let browsers = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "firefox"];
    let found = browsers.iter().find(|b| Command::new("sh").args(["-c", &format!("command -v {b}")]).output().map(|o| o.status.success()).unwrap_or(false));
    let Some(b) = found else {
        eprintln!("skipped: no headless browser installed ({})", browsers.join(", "));
        return;
    };
    let url = format!("file://{}", html.canonicalize().unwrap().display());
    let o = if *b == "firefox" {
        Command::new(b).args(["--headless", "--screenshot", tmp("shot.png").to_str().unwrap(), &url]).output().unwrap()
    } else {
        Command::new(b).args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", &url]).output().unwrap()
    };
    assert!(o.status.success(), "{b}: {}", String::from_utf8_lossy(&o.stderr));
    if *b != "firefox" {
        assert!(String::from_utf8_lossy(&o.stdout).contains("<svg"), "{b} did not render the SVGs");
    }
}
