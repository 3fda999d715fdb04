//! `hush plan` for CNNs (issue 28, items 2–3): the comparison family of a
//! mode's preset chosen from costs measured on this machine, layer by layer
//! predicted on a network profile, with why the choice won.
//!
//! **Cost model** (the one [`crate::graph_plan`] uses for encoder graphs):
//! each candidate plan is run once with both parties in this process over
//! an in-memory link with no network emulation ([`runtime::run_local`],
//! random input of the model's shape); every layer's compute time (the
//! slower party's, module or dealer time included), bytes per direction and
//! rounds are metered ([`LayerCost`]). A layer's predicted time on a
//! profile is
//!
//! > compute + rounds · one-way latency + (the busier direction's bytes) · 8 / bandwidth,
//!
//! and the offline phase (pre-dealing before the input exists, the HE and
//! COT set-up) is added as measured, plus its bytes over the bandwidth.
//!
//! **Candidates.** The families of the mode's preset
//! ([`crate::preset::Preset::families`]): `tami` and `fss` in tee and dealer
//! modes; `cf2` alone in the HE modes (nothing to choose: the report still
//! predicts it layer by layer). The linear backend is the preset's.
//!
//! **What auto cannot do for CNNs yet.** The engine runs one comparison
//! family per session ([`crate::engine::Nonlinear`]), so the choice is per
//! model and network, not per layer; the per-layer rows say which family
//! would have won each layer, i.e. how much a per-layer mix could gain.
//! And in dealer mode a CNN's linear layers are module-dealt at the dealer:
//! **the dealer holds W** (said in the report's `dealer_sees_weights`).

use crate::engine::LayerCost;
use crate::model::Model;
use crate::runtime::{self, Options};
use crate::{Error, Result};
use hush_transport::NetProfile;
use serde_json::{json, Value};
use std::sync::Arc;

/// What `hush plan` is asked for a CNN.
#[derive(Clone, Debug)]
pub struct CnnPlanRequest {
    /// The options of the mode to plan (its preset gives the candidates).
    pub opts: Options,
    pub net: NetProfile,
    /// Also run the chosen plan over the emulated profile.
    pub verify: bool,
}

/// A layer's predicted cost under one candidate.
#[derive(Clone, Copy, Debug, Default)]
struct Pred {
    secs: f64,
    bytes: u64,
    rounds: u32,
}

fn predict(s: &LayerCost, c: &LayerCost, net: &NetProfile) -> Pred {
    let busier = s.bytes_sent.max(c.bytes_sent);
    let wire = net.bandwidth_bps.map_or(0.0, |bw| busier as f64 * 8.0 / bw as f64);
    let rounds = s.rounds.max(c.rounds);
    Pred { secs: s.secs.max(c.secs) + rounds as f64 * net.latency.as_secs_f64() + wire, bytes: s.bytes_sent + c.bytes_sent, rounds }
}

struct Measured {
    family: String,
    layers: Vec<Pred>,
    offline: f64,
    offline_bytes: u64,
}

fn input(model: &Model) -> Vec<f64> {
    let mut p = hush_primitives::Prg::new(hush_primitives::Block(99));
    (0..model.input_len()).map(|_| (p.next_u64() % 2000) as f64 / 1000.0 - 1.0).collect()
}

fn run(model: &Arc<Model>, o: &Options, x: &[f64]) -> Result<runtime::LocalRun> {
    let mut o = o.clone();
    let _dealer = runtime::local_dealer(&mut o)?;
    runtime::run_local(model.clone(), &model.input_shape, x, &o, false, |_, _| {})
}

/// The plan of `model` for `req`: the chosen family and the report (JSON).
pub fn plan_cnn(model: Arc<Model>, req: &CnnPlanRequest) -> Result<(String, Value)> {
    let mut v = plan_cnn_nets(model, &req.opts, std::slice::from_ref(&req.net), req.verify)?;
    v.pop().ok_or_else(|| Error::Config("no plan".into()))
}

/// Measured once per family (no network), one plan and report per profile
/// of `nets` (each verified over its emulated profile with `verify`).
pub fn plan_cnn_nets(model: Arc<Model>, opts: &Options, nets: &[NetProfile], verify: bool) -> Result<Vec<(String, Value)>> {
    let preset = opts.mode.preset();
    if preset.engine != crate::preset::Engine::SemiHonest {
        return Err(Error::Config(format!("hush plan --mode {}: CNNs are planned in tee, dealer, interactive and silent modes (malicious-client runs CRISP's one family)", preset.mode)));
    }
    let x = input(&model);
    let none = NetProfile::none();
    let mut runs = Vec::new();
    for fam in preset.families {
        let o = Options { proto: fam.to_string(), profile: none.clone(), ..opts.clone() };
        let r = run(&model, &o, &x)?;
        if r.inference.report.layers.len() != r.server_layers.len() {
            return Err(Error::Protocol("the two parties metered different layer counts".into()));
        }
        runs.push((fam.to_string(), r));
    }
    let mut out = Vec::new();
    for net in nets {
        let mut cands = Vec::new();
        for (fam, r) in &runs {
            let cl = &r.inference.report;
            let layers = r.server_layers.iter().zip(&cl.layers).map(|(s, c)| predict(s, c, net)).collect();
            let offline_bytes = cl.offline_bytes_sent + cl.offline_bytes_recv;
            let offline = cl.offline_secs + net.bandwidth_bps.map_or(0.0, |bw| offline_bytes as f64 * 8.0 / bw as f64);
            cands.push((Measured { family: fam.clone(), layers, offline, offline_bytes }, cl.layers.clone()));
        }
        out.push(report(&model, opts, &preset, net, &cands, verify, &x)?);
    }
    Ok(out)
}

fn report(model: &Arc<Model>, opts: &Options, preset: &crate::preset::Preset, net: &NetProfile, cands: &[(Measured, Vec<LayerCost>)], verify: bool, x: &[f64]) -> Result<(String, Value)> {
    let total = |m: &Measured| m.offline + m.layers.iter().map(|p| p.secs).sum::<f64>();
    let best = (0..cands.len()).min_by(|&a, &b| total(&cands[a].0).total_cmp(&total(&cands[b].0))).ok_or_else(|| Error::Config("no candidate".into()))?;
    let chosen = cands[best].0.family.clone();
    let mut rows = Vec::new();
    let mut mixed = cands[best].0.offline;
    for (i, l) in cands[best].1.iter().enumerate() {
        let p = cands[best].0.layers[i];
        // another family wins the layer only if clearly faster (1 % and 1 µs)
        let win = (0..cands.len()).filter(|&j| cands[j].0.layers[i].secs < p.secs * 0.99 - 1e-6).min_by(|&a, &b| cands[a].0.layers[i].secs.total_cmp(&cands[b].0.layers[i].secs)).unwrap_or(best);
        mixed += cands[win].0.layers[i].secs;
        let alts: Vec<String> = (0..cands.len()).filter(|&j| j != best).map(|j| format!("{} {:.4} s", cands[j].0.family, cands[j].0.layers[i].secs)).collect();
        let why = if alts.is_empty() {
            format!("{} (the only family of --mode {})", chosen, preset.mode)
        } else if win == best {
            format!("{} {:.4} s beats {}", chosen, p.secs, alts.join(", "))
        } else {
            format!("{} {:.4} s alone would win this layer (one family per session: {} wins the model)", cands[win].0.family, cands[win].0.layers[i].secs, chosen)
        };
        rows.push(json!({"layer": i, "name": l.name, "kind": l.kind, "choice": chosen, "predicted_s": p.secs, "bytes": p.bytes, "rounds": p.rounds, "why": why}));
    }
    let fixed: Vec<Value> = cands
        .iter()
        .map(|(m, _)| json!({"family": m.family, "predicted_s": total(m), "offline_s": m.offline, "offline_bytes": m.offline_bytes, "bytes": m.layers.iter().map(|p| p.bytes).sum::<u64>(), "rounds": m.layers.iter().map(|p| p.rounds).sum::<u32>()}))
        .collect();
    let measured = if verify {
        let o = Options { proto: chosen.clone(), profile: net.clone(), ..opts.clone() };
        let r = run(model, &o, x)?;
        let cl = &r.inference.report;
        let secs = cl.offline_secs + cl.online_secs;
        Some(json!({"seconds": secs, "online_s": cl.online_secs, "offline_s": cl.offline_secs, "predicted_over_measured": total(&cands[best].0) / secs.max(1e-9)}))
    } else {
        None
    };
    let rep = json!({
        "cmd": "plan", "model": model.name, "mode": preset.mode, "net": net.name, "linear": format!("{:?}", preset.linear).to_lowercase(),
        "auto": {"family": chosen, "predicted_s": total(&cands[best].0)},
        "per_layer_mix_predicted_s": mixed,
        "fixed": fixed, "layers": rows, "measured": measured,
        "dealer_sees_weights": preset.dealer(),
        "cost_model": "per layer: measured compute (both parties in this process, no network) + rounds x one-way latency + busier direction's bytes / bandwidth; plus the offline phase as measured and its bytes / bandwidth",
        "cpu": crate::bert::cpu_model(),
        "note": note(preset),
    });
    Ok((chosen, rep))
}

fn note(p: &crate::preset::Preset) -> String {
    let mut s = String::from("one comparison family per session for CNNs (per-layer mixing is not implemented for them: `per_layer_mix_predicted_s` is what it could give)");
    match p.provider {
        crate::preset::Provider::OwnModules => s.push_str("; tee mode: trusted modules simulated — gives no hardware protection"),
        crate::preset::Provider::Dealer => s.push_str("; dealer mode: a CNN's linear layers are module-dealt at the dealer, so THE DEALER HOLDS THE WEIGHTS (encoder graphs' dealer preset does not give it W)"),
        crate::preset::Provider::None => {}
    }
    s
}

/// Prints a CNN plan report as a table.
pub fn print_plan(rep: &Value) {
    println!("hush plan: {} ({} mode, net {}, linear {})", rep["model"].as_str().unwrap_or(""), rep["mode"].as_str().unwrap_or(""), rep["net"].as_str().unwrap_or(""), rep["linear"].as_str().unwrap_or(""));
    println!("{:>5}  {:<10} {:<24} {:<6} {:>10} {:>12} {:>6}  why", "layer", "kind", "name", "family", "pred. s", "bytes", "rounds");
    for r in rep["layers"].as_array().into_iter().flatten() {
        let name: String = r["name"].as_str().unwrap_or("").chars().take(24).collect();
        println!(
            "{:>5}  {:<10} {:<24} {:<6} {:>10.4} {:>12} {:>6}  {}",
            r["layer"], r["kind"].as_str().unwrap_or(""), name, r["choice"].as_str().unwrap_or(""), r["predicted_s"].as_f64().unwrap_or(0.0), r["bytes"], r["rounds"], r["why"].as_str().unwrap_or("")
        );
    }
    for f in rep["fixed"].as_array().into_iter().flatten() {
        println!("family {:<6} predicted {:.3} s (offline {:.3} s), {} bytes online, {} rounds", f["family"].as_str().unwrap_or(""), f["predicted_s"].as_f64().unwrap_or(0.0), f["offline_s"].as_f64().unwrap_or(0.0), f["bytes"], f["rounds"]);
    }
    println!("auto: {} predicted {:.3} s (a per-layer mix would be {:.3} s)", rep["auto"]["family"].as_str().unwrap_or(""), rep["auto"]["predicted_s"].as_f64().unwrap_or(0.0), rep["per_layer_mix_predicted_s"].as_f64().unwrap_or(0.0));
    if let Some(m) = rep["measured"].as_object() {
        println!("measured over the emulated link: {:.3} s (online {:.3}, offline {:.3}) — predicted/measured {:.2}", m["seconds"].as_f64().unwrap_or(0.0), m["online_s"].as_f64().unwrap_or(0.0), m["offline_s"].as_f64().unwrap_or(0.0), m["predicted_over_measured"].as_f64().unwrap_or(0.0));
    }
    println!("{}", rep["note"].as_str().unwrap_or(""));
}
