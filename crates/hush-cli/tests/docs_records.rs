//! The docs' "Figures from records" (docs/performance.md) are exactly what
//! `hush report --markdown bench/records/*.jsonl` prints: a figure there
//! that no committed record backs, or a record not shown, fails here.
//! Regenerate with `python3 scripts/record.py --page`.

use std::path::PathBuf;
use std::process::Command;

const HUSH: &str = env!("CARGO_BIN_EXE_hush");

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

#[test]
fn performance_page_is_generated_from_the_records() {
    let root = repo();
    let mut files: Vec<String> = std::fs::read_dir(root.join("bench/records"))
        .expect("bench/records")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no records in bench/records");
    let o = Command::new(HUSH).current_dir(&root).arg("report").arg("--markdown").args(&files).output().unwrap();
    assert!(o.status.success(), "hush report --markdown: {}", String::from_utf8_lossy(&o.stderr));
    let generated = String::from_utf8(o.stdout).unwrap();
    let page = std::fs::read_to_string(root.join("docs/performance.md")).unwrap();
    let begin = page.find("<!-- records:begin").expect("records:begin marker");
    let begin = begin + page[begin..].find('\n').unwrap() + 1;
    let end = page.find("<!-- records:end -->").expect("records:end marker");
    assert!(
        page[begin..end] == generated,
        "docs/performance.md's records section differs from `hush report --markdown {}`: run `python3 scripts/record.py --page`",
        files.join(" ")
    );
    // every record file is named on the page, and each of its records is one table row
    for f in &files {
        let n = std::fs::read_to_string(root.join(f)).unwrap().lines().filter(|l| !l.trim().is_empty()).count();
        assert!(generated.contains(f.as_str()), "{f} not on the page");
        assert!(n > 0, "{f} is empty");
    }
    let rows = generated.lines().filter(|l| l.starts_with("| 2")).count();
    let records: usize = files
        .iter()
        .map(|f| std::fs::read_to_string(root.join(f)).unwrap().lines().filter(|l| !l.trim().is_empty()).count())
        .sum();
    assert_eq!(rows, records, "one row per record");
}

/// The pages of figures measured before records were kept say so at the top.
#[test]
fn quoted_figures_are_marked_as_quoted() {
    let docs = repo().join("docs");
    for page in ["perf-primitives.md", "perf-comparison.md", "perf-he.md", "perf-inference.md", "perf-3pc.md", "lr.md", "embeddings.md", "crisp.md", "transformer-operators.md", "reliability.md"] {
        let t = std::fs::read_to_string(docs.join(page)).unwrap();
        let head: String = t.lines().take(12).collect::<Vec<_>>().join("\n");
        assert!(head.contains("quoted from earlier sessions' notes"), "docs/{page} does not say its figures are quoted");
    }
}
