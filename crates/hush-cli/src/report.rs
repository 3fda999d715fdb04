//! `hush report RUN.json [--html OUT.html]`: renders `--json` benchmark
//! output as one self-contained HTML file — inline SVG charts and tables,
//! inline CSS, no JavaScript, nothing fetched from the network.
//!
//! * Every record with per-layer data (`hush bench infer --json`: the
//!   `per_layer` array) gets three bar charts — time (ms), bytes (both
//!   directions) and rounds per layer — one SVG per figure.
//! * Records are tabulated by benchmark (`bench`), one row per record and
//!   one column per scalar field, under the name of the paper table whose
//!   shape that benchmark reproduces (the numbers are this machine's).
//!
//! The input is untrusted: at most [`MAX_INPUT_BYTES`], one JSON object per
//! line (or one JSON array of objects), at most [`MAX_RECORDS`] records and
//! [`MAX_LAYERS`] layers per record; a line that is not a JSON object is an
//! error naming the line; every string is HTML-escaped.

use serde_json::Value;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::records_md::{human_bytes, human_secs};

/// Largest input read.
pub const MAX_INPUT_BYTES: u64 = 64 << 20;
/// Most records rendered.
pub const MAX_RECORDS: usize = 10_000;
/// Most layers charted per record.
pub const MAX_LAYERS: usize = 10_000;

/// The paper tables whose shapes `hush bench` reproduces, by benchmark.
const PAPER: &[(&str, &str)] = &[
    ("cot", "COT generation — the shape of SilentFlow, Table III"),
    ("nonlinear", "Nonlinear operators — the shape of TAMI-MPC, Tables 2 and 3"),
    ("infer", "Private inference by model, mode and network — the shape of TAMI-MPC, Table 4 and SilentFlow, Table IV"),
    ("aes3", "Three-party AES — the shape of Araki et al., Table I"),
    ("3pc", "Three-party circuits — the shape of Araki et al., Table I"),
    ("he-linear", "HE linear layers (Cheetah)"),
    ("paillier", "Paillier operations"),
    ("lr", "Vertical logistic regression (CAESAR)"),
];

/// Reads `--json` output: JSON objects one per line (blank lines skipped), or one array.
pub fn read_records(text: &str) -> Result<Vec<Value>, String> {
    let t = text.trim_start();
    if t.starts_with('[') {
        let v: Value = serde_json::from_str(t).map_err(|e| format!("not a JSON array of records: {e}"))?;
        let arr = v.as_array().cloned().unwrap_or_default();
        if arr.len() > MAX_RECORDS {
            return Err(format!("more than {MAX_RECORDS} records"));
        }
        for (i, r) in arr.iter().enumerate() {
            if !r.is_object() {
                return Err(format!("record {} is not a JSON object", i + 1));
            }
        }
        return Ok(arr);
    }
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line).map_err(|e| format!("line {}: not a JSON record ({e})", i + 1))?;
        if !v.is_object() {
            return Err(format!("line {}: not a JSON object", i + 1));
        }
        if out.len() == MAX_RECORDS {
            return Err(format!("more than {MAX_RECORDS} records"));
        }
        out.push(v);
    }
    if out.is_empty() {
        return Err("no records (expected the output of a `--json` run)".into());
    }
    Ok(out)
}

/// HTML/XML text escaping.
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

fn num(v: &Value, k: &str) -> f64 {
    v.get(k).and_then(Value::as_f64).filter(|x| x.is_finite()).unwrap_or(0.0)
}

fn fmt_num(x: f64) -> String {
    if x == x.trunc() && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else if x.abs() >= 100.0 {
        format!("{x:.1}")
    } else if x.abs() >= 1.0 {
        format!("{x:.3}")
    } else {
        format!("{x:.4}")
    }
}

/// Tick positions for an axis from 0 to at least `max`: steps of 1, 2 or 5
/// × 10^k, about five of them; the last tick is the axis end (≥ `max`).
/// Steps are at least `min_step` (1 for counts such as rounds).
fn ticks_min_step(max: f64, min_step: f64) -> Vec<f64> {
    if !(max > 0.0) || !max.is_finite() {
        return vec![0.0, 1.0];
    }
    let raw = (max / 5.0).max(min_step);
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let n = (max / step - 1e-9).ceil().max(1.0) as usize;
    (0..=n).map(|i| i as f64 * step).collect()
}

/// A horizontal bar chart, one bar per label, as an inline SVG; values
/// shown by `fmt` (on the bars and the axis ticks).
pub fn bar_chart_with(title: &str, unit: &str, labels: &[String], values: &[f64], fmt: &dyn Fn(f64) -> String, min_step: f64) -> String {
    let n = labels.len().min(values.len());
    let (left, right, top, bar, gap) = (170.0, 90.0, 34.0, 14.0, 4.0);
    let width = 820.0;
    let plot_w = width - left - right;
    let height = top + n as f64 * (bar + gap) + 30.0;
    let max = values.iter().take(n).cloned().filter(|v| v.is_finite()).fold(0.0f64, f64::max);
    let ticks = ticks_min_step(max, min_step);
    let axis_end = *ticks.last().unwrap_or(&1.0);
    let scale = if axis_end > 0.0 { plot_w / axis_end } else { 0.0 };
    let axis_y = top + n as f64 * (bar + gap);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{t}">"#,
        t = esc(title)
    );
    let _ = write!(s, r#"<text x="{left}" y="20" class="title">{} ({})</text>"#, esc(title), esc(unit));
    for t in &ticks {
        let x = left + t * scale;
        let _ = write!(s, r#"<line x1="{x:.2}" y1="{top}" x2="{x:.2}" y2="{:.2}" class="grid"/>"#, axis_y + 4.0);
        let _ = write!(s, r#"<text x="{x:.2}" y="{:.2}" class="tick" text-anchor="middle">{}</text>"#, axis_y + 16.0, esc(&fmt(*t)));
    }
    let _ = write!(s, r##"<line x1="{left}" y1="{top}" x2="{left}" y2="{axis_y}" stroke="#888"/>"##);
    let _ = write!(s, r##"<line x1="{left}" y1="{axis_y}" x2="{:.2}" y2="{axis_y}" stroke="#888"/>"##, left + plot_w);
    for i in 0..n {
        let y = top + i as f64 * (bar + gap);
        let v = if values[i].is_finite() && values[i] > 0.0 { values[i] } else { 0.0 };
        let w = (v * scale).max(if v > 0.0 { 1.0 } else { 0.0 });
        let mut label: String = labels[i].chars().take(26).collect();
        if labels[i].chars().count() > 26 {
            label.push('…');
        }
        let _ = write!(s, r#"<text x="{}" y="{}" class="lab" text-anchor="end">{}</text>"#, left - 6.0, y + bar - 3.0, esc(&label));
        let _ = write!(s, r#"<rect x="{left}" y="{y}" width="{w:.2}" height="{bar}" class="bar"><title>{}: {}</title></rect>"#, esc(&labels[i]), esc(&fmt(v)));
        let _ = write!(s, r#"<text x="{:.2}" y="{}" class="val">{}</text>"#, left + w + 4.0, y + bar - 3.0, esc(&fmt(v)));
    }
    s.push_str("</svg>");
    s
}

/// A record's heading: its benchmark and the settings that tell runs apart.
fn record_title(r: &Value) -> String {
    let mut parts = Vec::new();
    for k in ["bench", "model", "mode", "proto", "source", "op", "net", "circuit"] {
        if let Some(v) = r.get(k) {
            let s = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => continue,
            };
            parts.push(format!("{k} {s}"));
        }
    }
    if parts.is_empty() {
        "record".into()
    } else {
        parts.join(", ")
    }
}

/// The three per-layer figures of a record with a `per_layer` array (else none).
fn layer_figures(r: &Value) -> Vec<String> {
    let Some(layers) = r.get("per_layer").and_then(Value::as_array) else { return vec![] };
    let layers: Vec<&Value> = layers.iter().filter(|l| l.is_object()).take(MAX_LAYERS).collect();
    if layers.is_empty() {
        return vec![];
    }
    let labels: Vec<String> = layers
        .iter()
        .map(|l| {
            let name = l.get("name").and_then(Value::as_str).unwrap_or("?");
            let kind = l.get("kind").and_then(Value::as_str).unwrap_or("");
            if kind.is_empty() {
                name.to_string()
            } else {
                format!("{name} ({kind})")
            }
        })
        .collect();
    let t: Vec<f64> = layers.iter().map(|l| num(l, "secs") * 1e3).collect();
    let b: Vec<f64> = layers.iter().map(|l| num(l, "bytes_sent") + num(l, "bytes_recv")).collect();
    let rd: Vec<f64> = layers.iter().map(|l| num(l, "rounds")).collect();
    vec![
        bar_chart_with("Online time per layer", "ms, s", &labels, &t, &|ms| if ms == 0.0 { "0".into() } else { human_secs(ms / 1e3) }, 0.0),
        bar_chart_with("Bytes per layer, both directions", "B, kB, MB, GB", &labels, &b, &|x| if x == 0.0 { "0".into() } else { human_bytes(x) }, 0.0),
        bar_chart_with("Rounds per layer", "rounds", &labels, &rd, &fmt_num, 1.0),
    ]
}

fn cell(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(esc(s)),
        Value::Number(n) => Some(n.as_f64().map(fmt_num).unwrap_or_else(|| n.to_string())),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null => Some(String::new()),
        _ => None,
    }
}

/// The columns of the per-benchmark comparison tables (those a record has):
/// the settings that tell runs apart, then the headline costs. Every other
/// field is in the record's key–value table.
const KEY_COLS: &[&str] = &[
    "model", "mode", "proto", "source", "op", "circuit", "n", "bits", "net", "client_profile", "wall_s", "online_s", "offline_s", "predicted_s",
    "setup_s", "bytes", "rounds", "cots_per_s", "blocks_per_s", "aes_per_s", "enc_batch_us", "dec_batch_us", "ct_pt_batch_us", "cpu", "date",
    "load",
];

/// A field's value for a table cell: seconds (`*_s`) in ms/s and byte
/// counts (`*bytes*`) in kB/MB/GB, the exact number kept as a tooltip.
fn human_cell(key: &str, v: &Value) -> Option<String> {
    let x = v.as_f64().filter(|x| x.is_finite());
    match x {
        Some(x) if key.ends_with("_s") && x > 0.0 => Some(format!("<span title=\"{}\">{}</span>", fmt_num(x), esc(&human_secs(x)))),
        Some(x) if key.contains("bytes") && !key.contains("per_") && x >= 1000.0 => {
            Some(format!("<span title=\"{}\">{}</span>", fmt_num(x), esc(&human_bytes(x))))
        }
        _ => cell(v),
    }
}

fn fnum(r: &Value, k: &str) -> Option<f64> {
    r.get(k).and_then(Value::as_f64).filter(|x| x.is_finite())
}

/// The summary box of a record: online and offline time, bytes, rounds,
/// and where and when it ran, in human units.
fn summary(r: &Value) -> String {
    let mut items: Vec<(&str, String)> = Vec::new();
    if let Some(x) = fnum(r, "online_s").or(fnum(r, "wall_s")) {
        items.push(("online", human_secs(x)));
    }
    if let Some(x) = fnum(r, "offline_s").or(fnum(r, "setup_s")) {
        items.push(("offline", human_secs(x)));
    }
    // a run with --plan auto: the cost model's prediction beside it
    if let Some(p) = fnum(r, "predicted_s") {
        let measured = fnum(r, "online_s").unwrap_or(0.0) + fnum(r, "offline_s").unwrap_or(0.0);
        items.push(("predicted (plan)", human_secs(p)));
        if measured > 0.0 {
            items.push(("predicted ÷ measured", format!("{:.2}", p / measured)));
        }
    }
    if let Some(x) = fnum(r, "bytes") {
        items.push(("bytes", if x >= 1000.0 { human_bytes(x) } else { format!("{} B", x as i64) }));
    }
    if let Some(x) = fnum(r, "rounds") {
        items.push(("rounds", fmt_num(x)));
    }
    if let Some(x) = fnum(r, "client_peak_mem_bytes").or(fnum(r, "peak_mem_bytes")) {
        items.push(("client peak memory", human_bytes(x)));
    }
    for (k, label) in [("cpu", "CPU"), ("date", "date"), ("load", "load")] {
        if let Some(v) = r.get(k).and_then(cell).filter(|v| !v.is_empty()) {
            items.push((label, v));
        }
    }
    let mut s = String::from("<div class=\"summary\"><h3>Summary</h3><dl>");
    for (k, v) in items {
        // values are escaped already (cell) or built from numbers
        let _ = write!(s, "<div><dt>{}</dt><dd>{}</dd></div>", esc(k), if k == "CPU" || k == "date" || k == "load" { v } else { esc(&v) });
    }
    s.push_str("</dl></div>");
    s
}

/// A record's fields as a key–value table (scalars; arrays and objects by size).
fn kv_table(r: &Value) -> String {
    let Some(o) = r.as_object() else { return String::new() };
    let mut s = format!("<details><summary>All {} fields</summary><table class=\"kv\"><tbody>", o.len());
    for (k, v) in o {
        let shown = match v {
            Value::Array(a) => format!("({} entries)", a.len()),
            Value::Object(m) => format!("({} fields)", m.len()),
            v => human_cell(k, v).unwrap_or_default(),
        };
        let _ = write!(s, "<tr><th>{}</th><td>{shown}</td></tr>", esc(k));
    }
    s.push_str("</tbody></table></details>");
    s
}

/// One table per benchmark: a row per record, the [`KEY_COLS`] it has.
fn tables(records: &[Value]) -> String {
    let mut groups: Vec<(String, Vec<&Value>)> = Vec::new();
    for r in records {
        let b = r.get("bench").and_then(Value::as_str).unwrap_or("other").to_string();
        match groups.iter_mut().find(|(k, _)| *k == b) {
            Some((_, v)) => v.push(r),
            None => groups.push((b, vec![r])),
        }
    }
    let mut s = String::new();
    for (bench, rows) in groups {
        let cols: Vec<&str> = KEY_COLS.iter().copied().filter(|k| rows.iter().any(|r| r.get(*k).and_then(cell).is_some())).collect();
        let caption = PAPER.iter().find(|(k, _)| *k == bench).map(|(_, c)| c.to_string()).unwrap_or_else(|| format!("Benchmark {bench}"));
        let _ = write!(
            s,
            "<h2>{}</h2><p class=\"note\">{} record(s); this machine's numbers. Each record's other fields are under \"All fields\" above.</p><div class=\"scroll\"><table><thead><tr>",
            esc(&caption),
            rows.len()
        );
        for c in &cols {
            let _ = write!(s, "<th>{}</th>", esc(c));
        }
        s.push_str("</tr></thead><tbody>");
        for r in &rows {
            s.push_str("<tr>");
            for c in &cols {
                let v = r.get(*c).and_then(|v| human_cell(c, v)).unwrap_or_default();
                let _ = write!(s, "<td>{v}</td>");
            }
            s.push_str("</tr>");
        }
        s.push_str("</tbody></table></div>");
    }
    s
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222}h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}\
.note{color:#666;font-size:.9em}.scroll{overflow-x:auto}table{border-collapse:collapse;font-size:.8em}\
th,td{border:1px solid #ccc;padding:2px 6px;text-align:right;white-space:nowrap}th{background:#f3f3f3}\
svg{display:block;margin:.6em 0}svg .title{font-size:13px;font-weight:600}svg .lab,svg .val{font-size:10px;fill:#333}\
svg .bar{fill:#3b6ea8}svg .grid{stroke:#e4e4e4}svg .tick{font-size:10px;fill:#555}figure{margin:0 0 1em 0}\
.summary{border:1px solid #b9c9dd;background:#f4f8fc;border-radius:6px;padding:.4em 1em;margin:.6em 0;display:inline-block}\
.summary h3{font-size:1em;margin:.2em 0 .4em}.summary dl{display:flex;flex-wrap:wrap;gap:.3em 1.6em;margin:0}\
.summary dt{font-size:.75em;color:#555}.summary dd{margin:0;font-size:1.1em;font-weight:600}\
table.kv th{text-align:left}table.kv td{text-align:left;white-space:normal}details{margin:.4em 0 1em}";

/// The whole HTML page for `records` read from `source`.
pub fn render(records: &[Value], source: &str) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>hush report: {src}</title><style>{STYLE}</style></head><body><h1>hush report: {src}</h1><p class=\"note\">{n} record(s). Generated by <code>hush report</code>; self-contained (inline SVG, no scripts).</p>",
        src = esc(source),
        n = records.len()
    );
    for (i, r) in records.iter().enumerate() {
        let _ = write!(s, "<h2>Record {}: {}</h2>", i + 1, esc(&record_title(r)));
        s.push_str(&summary(r));
        for f in layer_figures(r) {
            let _ = write!(s, "<figure>{f}</figure>");
        }
        s.push_str(&kv_table(r));
    }
    s.push_str(&tables(records));
    s.push_str("</body></html>\n");
    s
}

/// `hush report`: reads `input`, writes the HTML to `html` (default: the input with `.html`).
pub fn report_main(input: &Path, html: Option<&Path>) -> Result<PathBuf, String> {
    let show = input.display();
    let meta = std::fs::metadata(input).map_err(|e| format!("{show}: {e}"))?;
    if meta.len() > MAX_INPUT_BYTES {
        return Err(format!("{show}: {} bytes is larger than the {MAX_INPUT_BYTES}-byte limit", meta.len()));
    }
    let text = std::fs::read_to_string(input).map_err(|e| format!("{show}: {e}"))?;
    let records = read_records(&text).map_err(|e| format!("{show}: {e}"))?;
    let out = html.map(Path::to_path_buf).unwrap_or_else(|| input.with_extension("html"));
    let name = input.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    std::fs::write(&out, render(&records, &name)).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_svg_per_figure_and_escaped_names() {
        let r = json!({"bench": "infer", "model": "m<1>", "per_layer": [
            {"name": "conv<script>", "kind": "linear", "secs": 0.002, "bytes_sent": 10, "bytes_recv": 5, "rounds": 1},
            {"name": "relu", "kind": "relu", "secs": 0.001, "bytes_sent": 3, "bytes_recv": 3, "rounds": 4}]});
        let h = render(&[r.clone(), json!({"bench": "cot", "n": 5})], "x.json");
        assert_eq!(h.matches("<svg").count(), 3);
        assert!(!h.contains("<script"), "unescaped name");
        assert!(h.contains("conv&lt;script&gt;") && h.contains("m&lt;1&gt;"));
        assert!(h.contains("SilentFlow, Table III") && h.contains("TAMI-MPC, Table 4"));
        let h = render(&[r.clone(), r], "x.json");
        assert_eq!(h.matches("<svg").count(), 6);
        assert_eq!(h.matches("</svg>").count(), 6);
    }

    #[test]
    fn summary_box_human_units_and_ticks() {
        let r = json!({"bench": "infer", "model": "m", "online_s": 50.02, "offline_s": 0.0123, "bytes": 443935760u64, "rounds": 1636,
            "cpu": "CPU<x>", "date": "2026-11-28T13:00:00Z", "load": "1.0",
            "per_layer": [{"name": "a", "secs": 0.5, "bytes_sent": 2_000_000, "bytes_recv": 0, "rounds": 3}]});
        let h = render(&[r], "x");
        assert_eq!(h.matches("class=\"summary\"").count(), 1);
        for want in ["50.0 s", "12.3 ms", "444 MB", "1636", "CPU&lt;x&gt;", "2026-11-28T13:00:00Z", "2.00 MB", "500 ms", "All 10 fields"] {
            assert!(h.contains(want), "no {want}");
        }
        assert!(!h.contains("CPU<x>"));
        let ticks = |m| ticks_min_step(m, 0.0);
        assert_eq!(ticks(7.3), vec![0.0, 2.0, 4.0, 6.0, 8.0]);
        assert_eq!(ticks(100.0), vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        assert_eq!(ticks(0.0), vec![0.0, 1.0]);
        assert_eq!(ticks_min_step(2.0, 1.0), vec![0.0, 1.0, 2.0]);
        assert!(ticks(2.0e6).len() >= 3 && *ticks(2.0e6).last().unwrap() >= 2.0e6);
        // the comparison table keeps to the key columns
        let wide = json!({"bench": "cot", "a1": 1, "a2": 2, "a3": 3, "wall_s": 0.5});
        let t = tables(&[wide]);
        assert!(t.contains("<th>wall_s</th>") && !t.contains("<th>a1</th>"));
    }

    #[test]
    fn a_planned_run_shows_predicted_beside_measured() {
        let r = json!({"bench": "infer", "model": "m", "online_s": 1.5, "offline_s": 0.5, "predicted_s": 2.5});
        let s = summary(&r);
        assert!(s.contains("predicted (plan)") && s.contains("2.5") && s.contains("predicted ÷ measured") && s.contains("1.25"), "{s}");
        assert!(!summary(&json!({"bench": "infer", "online_s": 1.0})).contains("predicted"));
    }

    #[test]
    fn bad_input_is_named() {
        assert!(read_records("{\"a\":1}\nnot json\n").unwrap_err().starts_with("line 2"));
        assert!(read_records("[1, 2]").unwrap_err().contains("record 1"));
        assert!(read_records("\n\n").unwrap_err().contains("no records"));
        assert!(read_records("5\n").unwrap_err().contains("not a JSON object"));
        // odd values render without panicking
        let h = render(&[json!({"bench": "infer", "per_layer": [{"name": 5, "secs": "x", "rounds": -3}, 7]})], "y");
        assert_eq!(h.matches("<svg").count(), 3);
    }
}
