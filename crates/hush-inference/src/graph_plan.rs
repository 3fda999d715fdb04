//! `hush plan` for encoder graphs: a backend per step from measured costs
//! (issue 28, items 2–3).
//!
//! **Cost model.** The program is run once per candidate backend, both
//! parties in this process with no network emulation, on inputs of the
//! requested shape (random token ids, a full mask); each step's compute
//! time (the slower party's), bytes per direction and rounds are metered
//! ([`crate::graph_run::StepCost`]). A step's predicted time on a network
//! profile is
//!
//! > compute + rounds · one-way latency + (the busier direction's bytes) · 8 / bandwidth.
//!
//! **Choice.** Only the steps that compute with the server's weights
//! ([`crate::graph_run::touches_weights`]) have a choice: the module-dealt
//! path or dealt matrix/Beaver triples. `auto` takes, per step, the
//! candidate with the smaller predicted time; the other steps are the same
//! under every candidate. In dealer mode the only sound candidate is the
//! triples backend ([`crate::graph_run::GraphOptions::validate`]), so the
//! plan is the preset. `--verify` runs the chosen plan over the emulated
//! profile and puts the measured time beside the predicted one.
//!
//! **The client's device** (`--client-profile`, `--max-mem`): the
//! measured runs put the client's thread (and its dealing thread) under the
//! profile's CPU share, so the client's compute is measured as that device
//! would take it (the shared rayon pool is not limited: an optimistic
//! bound for the largest products); with a memory budget (the smaller of
//! `--max-mem` and the profile's memory) the client's heap peak is metered
//! per step by the `hush` binary's counting allocator, and a step's
//! backend must keep it within the budget — a backend over it is reported
//! and not chosen, and a step no backend fits is refused, naming it.
//! (In tee mode the triples backend holds V = W − B at the client, the
//! module-dealt path only the step's shares: under a tight budget the big
//! weight steps, such as a vocabulary embedding, go to the module.)
//!
//! What the plan cannot see: contention between the two parties for the
//! same cores (both run here), and the dealer's own compute (dealer mode's
//! triples are dealt here by the in-process modules, as in tee mode).

use crate::graph_run::{run_private_measured, touches_weights, GraphOptions, LinearBackend, PlanChoice, StepCost};
use crate::{Error, Result};
use hush_onnx::eval::Tensor;
use hush_onnx::graph::{GraphModel, Program, Step};
use hush_transport::NetProfile;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// What `hush plan` is asked.
#[derive(Clone, Debug)]
pub struct PlanRequest {
    /// `tee` or `dealer`.
    pub mode: String,
    pub batch: usize,
    pub seq: usize,
    pub net: NetProfile,
    pub opts: GraphOptions,
    /// Also run the chosen plan over the emulated profile.
    pub verify: bool,
    /// Also run every fixed choice over the emulated profile (its measured
    /// time beside its prediction).
    pub verify_fixed: bool,
    /// The client device the measured runs emulate (its CPU share on the
    /// client's thread; its memory joins `max_mem`).
    pub client_profile: hush_transport::ClientProfile,
    /// The client's memory budget (bytes): a step's backend must keep the
    /// client's measured heap peak during that step within it.
    pub max_mem: Option<u64>,
}

impl PlanRequest {
    /// The client's budget: `max_mem` and the profile's memory, the smaller.
    pub fn budget(&self) -> Option<u64> {
        match (self.max_mem, self.client_profile.mem) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// A step's predicted cost under one backend.
#[derive(Clone, Copy, Debug, Default)]
pub struct Predicted {
    pub secs: f64,
    pub compute: f64,
    pub bytes: u64,
    pub rounds: u32,
    /// The client's measured heap peak during the step (with a budget).
    pub client_mem: Option<u64>,
}

fn predict(s: &StepCost, c: &StepCost, net: &NetProfile) -> Predicted {
    let compute = s.secs.max(c.secs);
    let rounds = s.rounds.max(c.rounds);
    let busier = s.bytes_sent.max(c.bytes_sent);
    let wire = net.bandwidth_bps.map_or(0.0, |bw| busier as f64 * 8.0 / bw as f64);
    Predicted { secs: compute + rounds as f64 * net.latency.as_secs_f64() + wire, compute, bytes: s.bytes_sent + c.bytes_sent, rounds, client_mem: c.peak_bytes }
}

/// Inputs of the requested shape: random token ids (below the first
/// embedding's vocabulary), a full mask, token type 0.
pub fn dry_inputs(p: &Program) -> HashMap<String, Tensor> {
    let mut out = HashMap::new();
    let mut seed: u64 = 0x9e3779b97f4a7c15;
    for (name, shape, slot) in &p.inputs {
        let n: usize = shape.iter().product();
        let vocab = p.steps.iter().find_map(|s| match s {
            Step::Embed { ids, vocab, .. } if ids == slot => Some(*vocab),
            _ => None,
        });
        let v = match (name.as_str(), vocab) {
            ("attention_mask", _) => vec![1.0; n],
            (_, Some(v)) if name != "token_type_ids" => (0..n)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    (1 + seed % (v.max(2) as u64 - 1)) as f64
                })
                .collect(),
            _ => vec![0.0; n],
        };
        out.insert(name.clone(), Tensor::ints(shape.clone(), v));
    }
    out
}

/// The plan and its report (JSON: per step and totals).
pub fn plan_graph(g: &GraphModel, r: &PlanRequest) -> Result<(GraphOptions, Value)> {
    let mut shapes = HashMap::new();
    for i in &g.inputs {
        shapes.insert(i.name.clone(), vec![r.batch, r.seq]);
    }
    let prog = g.instantiate(&shapes).map_err(|e| Error::Model(e.to_string()))?;
    plan_program(&prog, r)
}

/// [`plan_graph`] for several profiles: measured once, one plan each.
pub fn plan_graph_nets(g: &GraphModel, r: &PlanRequest, nets: &[NetProfile]) -> Result<Vec<(GraphOptions, Value)>> {
    let mut shapes = HashMap::new();
    for i in &g.inputs {
        shapes.insert(i.name.clone(), vec![r.batch, r.seq]);
    }
    let prog = g.instantiate(&shapes).map_err(|e| Error::Model(e.to_string()))?;
    plan_program_nets(&prog, r, nets)
}

/// [`plan_graph`] for a program already lowered (a served session's:
/// `--plan auto`).
pub fn plan_program(prog: &Program, r: &PlanRequest) -> Result<(GraphOptions, Value)> {
    plan_program_nets(prog, r, std::slice::from_ref(&r.net))?.pop().ok_or_else(|| Error::Config("no plan".into()))
}

/// [`plan_program`] for several profiles: each candidate is measured once
/// (no network), then predicted and chosen per profile.
pub fn plan_program_nets(prog: &Program, r: &PlanRequest, nets: &[NetProfile]) -> Result<Vec<(GraphOptions, Value)>> {
    let inputs = dry_inputs(prog);
    let cands: Vec<LinearBackend> = match r.mode.as_str() {
        "tee" => vec![LinearBackend::Module, LinearBackend::Triples],
        "dealer" => vec![LinearBackend::Triples],
        // a fixed choice: the interactive one-sided weight triples (OT) cost 260 B per multiply-add
        "interactive" | "silent" => vec![LinearBackend::He],
        m => return Err(Error::Config(format!("hush plan --mode {m}: encoder graphs are planned in tee, dealer, interactive and silent modes"))),
    };
    let none = NetProfile::none();
    let mut costs = Vec::new();
    for &b in &cands {
        let o = GraphOptions { linear: b, per_step: None, ..r.opts.clone() };
        let (_, _, (ms, mc)) = run_private_measured(prog, &inputs, &o, &none, &r.client_profile, r.budget().is_some())?;
        costs.push((ms, mc));
    }
    let mut out = Vec::new();
    for net in nets {
        let per: Vec<Vec<Predicted>> = costs.iter().map(|(ms, mc)| ms.iter().zip(mc).map(|(s, c)| predict(s, c, net)).collect()).collect();
        let r = PlanRequest { net: net.clone(), ..r.clone() };
        out.push(choose(prog, &r, &cands, &per, &inputs)?);
    }
    Ok(out)
}

/// The candidate a step takes: the fastest of those whose client memory
/// (when measured) is within `budget`; None when none is.
pub fn pick(cands: &[(f64, Option<u64>)], budget: Option<u64>) -> Option<usize> {
    (0..cands.len()).filter(|&j| !matches!((budget, cands[j].1), (Some(b), Some(m)) if m > b)).min_by(|&a, &b| cands[a].0.total_cmp(&cands[b].0))
}

/// The plan and report of one profile from the candidates' predictions.
fn choose(prog: &Program, r: &PlanRequest, cands: &[LinearBackend], per: &[Vec<Predicted>], inputs: &HashMap<String, Tensor>) -> Result<(GraphOptions, Value)> {
    let mut choice: Vec<Option<LinearBackend>> = vec![None; prog.steps.len()];
    let mut rows = Vec::new();
    let mut total = Predicted::default();
    let budget = r.budget();
    let mib = |b: u64| b as f64 / 1048576.0;
    let fits = |j: usize, i: usize| match (budget, per[j][i].client_mem) {
        (Some(b), Some(m)) => m <= b,
        _ => true,
    };
    let mut peak = 0u64;
    for (i, st) in prog.steps.iter().enumerate() {
        let (k, why) = if touches_weights(st) && cands.len() > 1 {
            let Some(k) = pick(&per.iter().map(|c| (c[i].secs, c[i].client_mem)).collect::<Vec<_>>(), budget) else {
                let least = (0..cands.len()).filter_map(|j| per[j][i].client_mem).min().unwrap_or(0);
                return Err(Error::Memory(format!(
                    "step {i} ({} '{}') needs at least {:.1} MiB at the client under every backend, above the budget {:.1} MiB (--max-mem / --client-profile)",
                    st.kind(),
                    prog.slots[st.out()].name,
                    mib(least),
                    mib(budget.unwrap_or(0))
                )));
            };
            let alts: Vec<String> = (0..cands.len())
                .filter(|&j| j != k)
                .map(|j| {
                    let over = match per[j][i].client_mem {
                        Some(m) if !fits(j, i) => format!(", {:.2} MiB at the client: over the budget", mib(m)),
                        Some(m) => format!(", {:.2} MiB at the client", mib(m)),
                        None => String::new(),
                    };
                    format!("{} {:.4} s ({} B, {} rounds{over})", cands[j].name(), per[j][i].secs, per[j][i].bytes, per[j][i].rounds)
                })
                .collect();
            choice[i] = Some(cands[k]);
            let mine = per[k][i].client_mem.map_or(String::new(), |m| format!(" ({:.2} MiB at the client)", mib(m)));
            (k, format!("{} {:.4} s{mine} beats {}", cands[k].name(), per[k][i].secs, alts.join(", ")))
        } else if touches_weights(st) {
            choice[i] = Some(cands[0]);
            (0, if r.mode == "interactive" || r.mode == "silent" { "the interactive and silent presets' backend (Cheetah HE; no module, no dealer in the linear layers)" } else { "the only sound backend with a dealer (it never sees W)" }.to_string())
        } else {
            (0, String::new())
        };
        // a step without a choice is the same computation under every
        // candidate: its time is the mean of their measurements
        let p = if choice[i].is_none() && cands.len() > 1 {
            let n = cands.len() as f64;
            Predicted { secs: per.iter().map(|c| c[i].secs).sum::<f64>() / n, compute: per.iter().map(|c| c[i].compute).sum::<f64>() / n, ..per[k][i] }
        } else {
            per[k][i]
        };
        if let (Some(b), Some(m)) = (budget, p.client_mem) {
            if m > b {
                return Err(Error::Memory(format!(
                    "step {i} ({} '{}') needs {:.1} MiB at the client, above the budget {:.1} MiB (--max-mem / --client-profile); no backend choice changes this step",
                    st.kind(),
                    prog.slots[st.out()].name,
                    mib(m),
                    mib(b)
                )));
            }
        }
        peak = peak.max(p.client_mem.unwrap_or(0));
        total.secs += p.secs;
        total.compute += p.compute;
        total.bytes += p.bytes;
        total.rounds += p.rounds;
        if touches_weights(st) || p.secs > 1e-3 {
            rows.push(json!({
                "step": i, "op": st.kind(), "value": prog.slots[st.out()].name, "choice": choice[i].map(|b| b.name()),
                "predicted_s": p.secs, "bytes": p.bytes, "rounds": p.rounds, "client_mem_bytes": p.client_mem, "why": why,
                "candidates": if choice[i].is_some() { json!(cands.iter().enumerate().map(|(j, b)| json!({"backend": b.name(), "predicted_s": per[j][i].secs, "client_mem_bytes": per[j][i].client_mem, "within_budget": fits(j, i)})).collect::<Vec<_>>()) } else { Value::Null },
            }));
        }
    }
    let mut fixed: Vec<Value> = cands
        .iter()
        .enumerate()
        .map(|(j, b)| {
            let s: f64 = per[j].iter().map(|p| p.secs).sum();
            let pk = per[j].iter().filter_map(|p| p.client_mem).max();
            json!({"preset": b.name(), "predicted_s": s, "bytes": per[j].iter().map(|p| p.bytes).sum::<u64>(), "rounds": per[j].iter().map(|p| p.rounds).sum::<u32>(), "client_peak_bytes": pk, "within_budget": budget.is_none_or(|b| pk.is_none_or(|m| m <= b))})
        })
        .collect();
    let plan = GraphOptions { per_step: Some(Arc::new(choice)), ..r.opts.clone() };
    plan.validate(prog, r.mode == "dealer")?;
    if r.verify_fixed {
        for (f, &b) in fixed.iter_mut().zip(cands) {
            let o = GraphOptions { linear: b, per_step: None, ..r.opts.clone() };
            let (_, st, _) = run_private_measured(prog, inputs, &o, &r.net, &r.client_profile, false)?;
            f["measured_s"] = json!(st.seconds);
        }
    }
    let measured = if r.verify || r.verify_fixed {
        let (_, st, _) = run_private_measured(prog, inputs, &plan, &r.net, &r.client_profile, false)?;
        Some(json!({"seconds": st.seconds, "bytes": st.bytes, "rounds": st.rounds, "predicted_over_measured": total.secs / st.seconds.max(1e-9)}))
    } else {
        None
    };
    let rep = json!({
        "cmd": "plan", "mode": r.mode, "net": r.net.name, "batch": r.batch, "seq": r.seq, "program": prog.fingerprint(),
        "auto": {"predicted_s": total.secs, "compute_s": total.compute, "bytes": total.bytes, "rounds": total.rounds, "client_peak_bytes": budget.map(|_| peak)},
        "client_profile": r.client_profile.name, "max_mem": budget,
        "client_mem_method": budget.map(|_| crate::runtime::mem_probe().map(|p| p.method).unwrap_or("")),
        "fixed": fixed, "steps": rows, "measured": measured,
        "cost_model": "per step: measured compute (both parties in this process, no network) + rounds x one-way latency + busier direction's bytes / bandwidth",
        "cpu": crate::bert::cpu_model(),
        "note": match r.mode.as_str() {
            "tee" => "tee mode: trusted module simulated — gives no hardware protection",
            "interactive" => "interactive mode: no module and no dealer (HE linear layers, cf2 and every correlation on COTs); its plan is the preset",
            "silent" => "silent mode: the interactive plan on SilentFlow COTs (modules simulated — they give no hardware protection); no dealer; its plan is the preset",
            _ => "dealer mode: the dealer never sees W (triples backend)",
        },
    });
    Ok((plan, rep))
}

/// The plan a party runs for program `prog` (`--plan`): the preset, a plan
/// file's choices over `prog`, or the cost model's ([`plan_program`] at the
/// program's own batch and length, on profile `net`; with a dealer as the
/// provider the preset is the only sound plan, so nothing is measured).
/// Returns the cost model's report when it ran.
pub fn resolve(choice: &PlanChoice, preset: &GraphOptions, prog: &Program, net: &NetProfile, dealer: bool) -> Result<(GraphOptions, Option<Value>)> {
    match choice {
        PlanChoice::Preset => Ok((preset.clone(), None)),
        PlanChoice::File { plan, .. } => Ok((preset.with_plan_file(prog, plan, dealer)?, None)),
        // dealer: only triples are sound; interactive: HE is the one backend worth running (the interactive
        // OT weight triples cost 260 B per multiply-add), so `auto` is the preset
        PlanChoice::Auto if dealer || preset.interactive.is_some() => Ok((preset.clone(), None)),
        PlanChoice::Auto => {
            let shape = prog.inputs.first().map(|(_, s, _)| s.as_slice()).unwrap_or(&[]);
            let (batch, seq) = (shape.first().copied().unwrap_or(1), shape.get(1).copied().unwrap_or(1));
            let req = PlanRequest { mode: "tee".into(), batch, seq, net: net.clone(), opts: preset.clone(), verify: false, verify_fixed: false, client_profile: hush_transport::ClientProfile::none(), max_mem: None };
            let (p, rep) = plan_program(prog, &req)?;
            Ok((p, Some(rep)))
        }
    }
}

/// Prints a plan report as a table.
pub fn print_plan(rep: &Value) {
    println!("hush plan: {} mode, net {}, batch {} × seq {} (program {})", rep["mode"].as_str().unwrap_or(""), rep["net"].as_str().unwrap_or(""), rep["batch"], rep["seq"], rep["program"].as_str().unwrap_or(""));
    println!("{:>5}  {:<10} {:<34} {:<8} {:>10} {:>12} {:>6}  why", "step", "op", "value", "backend", "pred. s", "bytes", "rounds");
    for r in rep["steps"].as_array().into_iter().flatten() {
        let name: String = r["value"].as_str().unwrap_or("").chars().take(34).collect();
        println!(
            "{:>5}  {:<10} {:<34} {:<8} {:>10.4} {:>12} {:>6}  {}",
            r["step"], r["op"].as_str().unwrap_or(""), name, r["choice"].as_str().unwrap_or("-"), r["predicted_s"].as_f64().unwrap_or(0.0), r["bytes"], r["rounds"], r["why"].as_str().unwrap_or("")
        );
    }
    for f in rep["fixed"].as_array().into_iter().flatten() {
        println!("preset {:<8} predicted {:.3} s, {} bytes, {} rounds", f["preset"].as_str().unwrap_or(""), f["predicted_s"].as_f64().unwrap_or(0.0), f["bytes"], f["rounds"]);
    }
    let a = &rep["auto"];
    println!("auto            predicted {:.3} s ({:.3} s compute), {} bytes, {} rounds", a["predicted_s"].as_f64().unwrap_or(0.0), a["compute_s"].as_f64().unwrap_or(0.0), a["bytes"], a["rounds"]);
    if let Some(m) = rep["measured"].as_object() {
        println!("measured (auto plan over the emulated link): {:.3} s, {} bytes, {} rounds — predicted/measured {:.2}", m["seconds"].as_f64().unwrap_or(0.0), m["bytes"], m["rounds"], m["predicted_over_measured"].as_f64().unwrap_or(0.0));
    }
    println!("{}", rep["note"].as_str().unwrap_or(""));
}

/// Reads an encoder graph (errors name the node that cannot run).
pub fn load(path: &std::path::Path) -> Result<GraphModel> {
    GraphModel::from_file(path).map_err(|e| Error::Model(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::pick;

    #[test]
    fn a_step_takes_the_fastest_backend_within_the_client_budget() {
        let c = [(1.0, Some(100)), (0.5, Some(300))];
        assert_eq!(pick(&c, None), Some(1));
        assert_eq!(pick(&c, Some(300)), Some(1));
        assert_eq!(pick(&c, Some(299)), Some(0), "the faster backend is over the budget");
        assert_eq!(pick(&c, Some(99)), None, "no backend fits");
        // unmeasured memory is not held against a backend
        assert_eq!(pick(&[(1.0, Some(100)), (0.5, None)], Some(10)), Some(1));
        assert_eq!(pick(&[], Some(10)), None);
    }
}
