//! `hush report --markdown FILE.jsonl...`: benchmark records as Markdown
//! tables, the "Figures from records" section of `docs/performance.md`.
//!
//! Every record must say where and when it was measured — `cpu`, `date`
//! and `load` (what `scripts/record.py` adds to a `--json` line) — or the
//! command fails naming the file and line: a figure in the docs is never
//! printed without its machine and date. One table per benchmark (`bench`),
//! rows in file order; times in ms or s, bytes in kB/MB/GB (decimal:
//! 1 kB = 1,000 bytes), the rest as recorded.

use serde_json::Value;
use std::path::Path;

/// The fields that tell a benchmark's runs apart, shown in the settings column.
const SETTINGS: &[&str] =
    &["model", "mode", "proto", "source", "op", "circuit", "shape", "seq", "layers", "deal_kind", "n", "bits", "net", "threads", "client_profile", "max_mem", "auto_choice", "workers"];

/// Per benchmark, the headline figures beyond time, bytes and rounds: (field, label, unit).
const HEADLINES: &[(&str, &[(&str, &str, &str)])] = &[
    ("aes", &[("blocks_per_s", "AES blocks/s", "")]),
    ("cot", &[("cots_per_s", "COTs/s", ""), ("bits_per_cot", "bits/COT", "")]),
    ("nonlinear", &[("offline_s", "offline", "s")]),
    ("infer", &[("online_s", "online", "s"), ("offline_s", "offline", "s"), ("client_peak_mem_bytes", "client peak", "B")]),
    ("paillier", &[("enc_batch_us", "enc batched", "µs"), ("dec_batch_us", "dec batched", "µs"), ("ct_pt_batch_us", "ct·pt batched", "µs"), ("ct_pt_batch_min_us", "ct·pt batched, fastest of 5 passes", "µs")]),
    ("aes3", &[("aes_per_s", "AES/s", "")]),
    ("lr", &[("epoch_s", "per epoch", "s")]),
    ("lr-ray", &[("batches_measured", "batches measured", ""), ("per_batch_s", "per batch", "s"), ("epoch_s", "whole epoch", "s")]),
    ("deal", &[("items_per_s", "items/s", ""), ("dealt_bytes_per_s", "dealt B/s", ""), ("bound_s", "AES bound", "s"), ("bound_ratio", "÷ bound", "")]),
    ("plan", &[("predicted_s", "auto predicted", "s"), ("best_fixed_s", "best fixed predicted", "s"), ("auto_over_best_fixed", "auto ÷ best fixed", ""), ("measured_s", "auto measured", "s"), ("predicted_over_measured", "predicted ÷ measured", ""), ("best_fixed_measured_s", "best fixed measured", "s"), ("auto_over_best_fixed_measured", "auto ÷ best fixed, measured", "")]),
];

/// Bytes in decimal units: 950 B, 12.3 kB, 4.56 MB, 1.23 GB.
pub fn human_bytes(b: f64) -> String {
    let units = [("GB", 1e9), ("MB", 1e6), ("kB", 1e3)];
    for (u, s) in units {
        if b >= s {
            return format!("{} {u}", sig3(b / s));
        }
    }
    format!("{} B", b.round() as i64)
}

/// Seconds as ms below one second, else s: 0.42 ms, 12.3 ms, 4.56 s, 123 s.
pub fn human_secs(s: f64) -> String {
    if s < 1.0 {
        format!("{} ms", sig3(s * 1e3))
    } else {
        format!("{} s", sig3(s))
    }
}

/// Three significant digits (at least the integer part).
fn sig3(x: f64) -> String {
    if x >= 100.0 {
        format!("{}", x.round() as i64)
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// A count with thousands separators, or a rate in scientific form when large.
fn human_count(x: f64) -> String {
    if x >= 1e6 {
        let e = x.log10().floor() as i32;
        format!("{:.2}×10^{e}", x / 10f64.powi(e))
    } else if x == x.trunc() || x >= 1000.0 {
        let s = (x.round() as i64).to_string();
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        out
    } else {
        sig3(x)
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Markdown table cells must not contain `|` or line breaks.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

fn f(r: &Value, k: &str) -> Option<f64> {
    r.get(k).and_then(Value::as_f64).filter(|x| x.is_finite())
}

/// One value in the unit it is recorded in.
fn show(x: f64, unit: &str) -> String {
    match unit {
        "s" => human_secs(x),
        "B" => human_bytes(x),
        "µs" => format!("{} µs", sig3(x)),
        _ => human_count(x),
    }
}

/// The Markdown for `files` (name, records): one table per benchmark.
pub fn markdown(files: &[(String, Vec<Value>)]) -> Result<String, String> {
    let mut by_bench: Vec<(String, Vec<(&str, usize, &Value)>)> = Vec::new();
    for (name, recs) in files {
        for (i, r) in recs.iter().enumerate() {
            for k in ["cpu", "date", "load"] {
                if r.get(k).and_then(text).is_none_or(|s| s.is_empty()) {
                    return Err(format!(
                        "{name}: record {}: no `{k}` — a figure in the docs must name its CPU, date and load (scripts/record.py adds them)",
                        i + 1
                    ));
                }
            }
            let bench = r.get("bench").and_then(text).unwrap_or_else(|| "record".into());
            match by_bench.iter_mut().find(|(b, _)| *b == bench) {
                Some((_, v)) => v.push((name, i + 1, r)),
                None => by_bench.push((bench, vec![(name, i + 1, r)])),
            }
        }
    }
    by_bench.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = String::new();
    for (bench, rows) in &by_bench {
        let heads: &[(&str, &str, &str)] = HEADLINES.iter().find(|(b, _)| b == bench).map(|(_, h)| *h).unwrap_or(&[]);
        let files: Vec<&str> = {
            let mut v: Vec<&str> = rows.iter().map(|(n, _, _)| *n).collect();
            v.dedup();
            v
        };
        out.push_str(&format!("### `hush bench {bench}` ({})\n\n", files.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ")));
        out.push_str("| date (UTC) | CPU | load | settings | time | bytes | rounds |");
        for (_, label, _) in heads {
            out.push_str(&format!(" {label} |"));
        }
        out.push_str(" command |\n|---|---|---|---|---|---|---|");
        out.push_str(&"---|".repeat(heads.len()));
        out.push_str("---|\n");
        for (_, _, r) in rows {
            let date = r.get("date").and_then(text).unwrap_or_default();
            let settings: Vec<String> =
                SETTINGS.iter().filter_map(|k| r.get(*k).and_then(text).map(|v| format!("{k} {v}"))).collect();
            let time = f(r, "wall_s").map(human_secs).unwrap_or_else(|| "—".into());
            let bytes = f(r, "bytes").map(human_bytes).unwrap_or_else(|| "—".into());
            let rounds = f(r, "rounds").map(human_count).unwrap_or_else(|| "—".into());
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |",
                cell(date.get(..16).unwrap_or(&date)).replace('T', " "),
                cell(&r.get("cpu").and_then(text).unwrap_or_default()),
                cell(&r.get("load").and_then(text).unwrap_or_default()),
                cell(&settings.join(", ")),
                time,
                bytes,
                rounds
            ));
            for (k, _, unit) in heads {
                out.push_str(&format!(" {} |", f(r, k).map(|x| show(x, unit)).unwrap_or_else(|| "—".into())));
            }
            let cmd = r.get("command").and_then(text).map(|c| format!("`{}`", cell(&c))).unwrap_or_else(|| "—".into());
            out.push_str(&format!(" {cmd} |\n"));
        }
        out.push('\n');
    }
    out.push_str("Times: `wall_s` (all parties, one-time set-up excluded; for `infer` the online phase). Bytes: payload, all directions, decimal units.\n");
    Ok(out)
}

/// `hush report --markdown FILE...`: reads each file (untrusted, size-capped
/// as `hush report`), returns the Markdown.
pub fn markdown_main(inputs: &[std::path::PathBuf]) -> Result<String, String> {
    let mut files = Vec::new();
    for p in inputs {
        let show = p.display();
        let meta = std::fs::metadata(p).map_err(|e| format!("{show}: {e}"))?;
        if meta.len() > super::report::MAX_INPUT_BYTES {
            return Err(format!("{show}: larger than the {}-byte limit", super::report::MAX_INPUT_BYTES));
        }
        let t = std::fs::read_to_string(p).map_err(|e| format!("{show}: {e}"))?;
        let recs = super::report::read_records(&t).map_err(|e| format!("{show}: {e}"))?;
        files.push((display_name(p), recs));
    }
    markdown(&files)
}

/// A records file's name as the docs show it: relative to the current folder when inside it.
fn display_name(p: &Path) -> String {
    let cwd = std::env::current_dir().ok();
    let abs = if p.is_absolute() { p.to_path_buf() } else { cwd.clone().unwrap_or_default().join(p) };
    match cwd.and_then(|c| abs.strip_prefix(c).ok().map(Path::to_path_buf)) {
        Some(rel) => rel.display().to_string(),
        None => p.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn units() {
        assert_eq!(human_bytes(950.0), "950 B");
        assert_eq!(human_bytes(12_345.0), "12.3 kB");
        assert_eq!(human_bytes(443_935_760.0), "444 MB");
        assert_eq!(human_bytes(5.26e9), "5.26 GB");
        assert_eq!(human_secs(0.000_42), "0.42 ms");
        assert_eq!(human_secs(0.0123), "12.3 ms");
        assert_eq!(human_secs(4.561), "4.56 s");
        assert_eq!(human_secs(123.4), "123 s");
        assert_eq!(human_count(1636.0), "1,636");
        assert_eq!(human_count(234_594.4), "234,594");
        assert_eq!(human_count(12.34), "12.3");
        assert_eq!(human_count(2.84e9), "2.84×10^9");
    }

    #[test]
    fn a_record_without_cpu_date_or_load_is_refused() {
        let ok = json!({"bench": "aes", "cpu": "X", "date": "2026-11-28T13:00:00Z", "load": "0.5", "wall_s": 1.0});
        assert!(markdown(&[("a.jsonl".into(), vec![ok.clone()])]).is_ok());
        for k in ["cpu", "date", "load"] {
            let mut r = ok.clone();
            r.as_object_mut().unwrap().remove(k);
            let e = markdown(&[("a.jsonl".into(), vec![ok.clone(), r])]).unwrap_err();
            assert!(e.contains("a.jsonl: record 2") && e.contains(k), "{e}");
        }
    }

    #[test]
    fn one_table_per_bench_with_units_and_no_broken_cells() {
        let r = |b: &str, w: f64| json!({"bench": b, "cpu": "CPU | with bar", "date": "2026-11-28T13:00:00Z", "load": "1.0", "wall_s": w, "bytes": 2.0e6, "rounds": 3, "command": "hush bench x"});
        let md = markdown(&[("b.jsonl".into(), vec![r("cot", 0.5), r("aes", 2.0), r("cot", 1.5)])]).unwrap();
        assert_eq!(md.matches("### `hush bench").count(), 2);
        assert!(md.find("bench aes").unwrap() < md.find("bench cot").unwrap());
        assert!(md.contains("500 ms") && md.contains("1.50 s") && md.contains("2.00 MB"));
        assert!(md.contains("CPU \\| with bar"));
        // every table row has the header's number of cells
        for table in md.split("### ").skip(1) {
            let rows: Vec<&str> = table.lines().filter(|l| l.starts_with('|')).collect();
            let cells = |l: &str| l.replace("\\|", "").matches('|').count();
            assert!(rows.iter().all(|l| cells(l) == cells(rows[0])), "{table}");
        }
    }
}
