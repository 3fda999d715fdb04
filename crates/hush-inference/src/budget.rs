//! The client's memory budget (`--max-mem`): estimate, floor and fit.
//!
//! The client runs the model layer by layer (each value freed after its
//! last reader), each nonlinear gate in chunks of at most `chunk` elements
//! whose correlations are dealt, used and dropped one chunk at a time, each
//! linear layer's masks dealt for that layer only, and pre-deals the next
//! inference's correlations up to a budget. Its peak heap is therefore
//!
//! ```text
//! plan + live activations + the largest one-step transient + pre-dealt
//! ```
//!
//! where a step's transient is, for a linear layer, its masks and message
//! (and, while the module deals them, the module's copies), and for a
//! nonlinear chunk, its dealt key material (×3: the module's copy, its
//! encoded response and the decoded batch) and online messages.
//! What is not pre-dealt is dealt during the run by a look-ahead worker
//! ([`crate::engine`] "Look-ahead") while the party evaluates; it needs
//! [`lookahead_bytes`] more: one reserved item (queued or being dealt, at
//! most [`crate::engine::lookahead_cap`]) and the transient of the item it
//! deals (the module's copy and the encoded response beyond the decoded
//! item). [`fit`] grants it out of what the chunk leaves, before
//! pre-dealing, and turns it off when the budget cannot hold it.
//! [`client_estimate`] computes this from public parameters; [`fit`]
//! picks the largest chunk (halving from the configured one) and the
//! largest pre-dealing budget that fit `--max-mem`, and refuses a budget
//! below the model's [`floor`] (the estimate at [`MIN_CHUNK`] without
//! pre-dealing). The estimate only chooses parameters: the budget is
//! *enforced* as measured peak by [`crate::engine::MemGuard`].
//!
//! **HE modes** (family `cf2`: `interactive`, `silent`): nothing is dealt
//! or pre-dealt; a linear layer's transient is its HE messages (all input
//! ciphertexts up, all responses down, [`hush_rlwe::cheetah::layer_bytes`]
//! at the default N = 8192 set), a nonlinear chunk's is its COT-derived
//! ROTs and triples; on top the two COT sources (one per direction) hold
//! their LPN batches: the server picks the set so that they take at most a
//! quarter of the budget ([`crate::runtime::cot_set_for`]), and the floor
//! counts the smallest set's.

use crate::engine::{family_est_bytes, Gate};
use crate::model::Model;
use crate::plan::{Plan, StepKind};
use crate::{Error, Result};

/// Smallest nonlinear chunk the fit goes down to.
pub const MIN_CHUNK: usize = 1024;

/// Fixed allowance: the session's own structures, channel buffers, the
/// module's state (in-process module) and allocator slack.
const BASE: u64 = 8 << 20;

/// What the budget fit chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemFit {
    pub budget: u64,
    pub chunk: usize,
    pub predeal_mem: u64,
    /// Bytes granted to the online look-ahead ([`lookahead_bytes`]); 0:
    /// the budget cannot hold it, the client deals each item just before
    /// its use.
    pub lookahead: u64,
    /// Estimated client peak with these parameters.
    pub estimate: u64,
    /// The model's floor (see [`floor`]).
    pub floor: u64,
}

/// The HE session's context and keys at the client (NTT tables, secret
/// key, public key, the decryption temporaries), with slack.
const HE_BASE: u64 = 8 << 20;

/// The LPN set of `sets` (largest first) for a client budget: the largest
/// whose two sources' batches (one per direction) take at most a quarter
/// of it and leave the session's `reserved` bytes ([`cot_reserve`]: the
/// model's estimate at [`MIN_CHUNK`]), else the smallest; without a budget
/// the largest. The server's choice ([`crate::runtime::cot_set_for`]) and
/// the estimates use this one rule. (With the quarter alone, a budget just
/// above the floor got a set the floor had not counted: estimate above the
/// budget.) The pick only grows with the budget, so every budget from the
/// floor up fits.
pub fn cot_set_within(sets: &'static [hush_correlations::lpn::LpnParams], budget: Option<u64>, reserved: u64) -> &'static hush_correlations::lpn::LpnParams {
    match budget {
        Some(b) => sets
            .iter()
            .find(|p| 2 * p.batch_bytes() as u64 <= b / 4 && reserved.saturating_add(cot_of(p)) <= b)
            .unwrap_or(&sets[sets.len() - 1]),
        None => &sets[0],
    }
}

/// Bytes the client's two COT sources hold with LPN set `p`.
fn cot_of(p: &hush_correlations::lpn::LpnParams) -> u64 {
    2 * p.batch_bytes() as u64 + 2 * hush_correlations::registry::MEM_OVERHEAD as u64 / 8
}

/// Bytes the client's two COT sources hold for the LPN set the server
/// picks for a client budget of `budget` (HE modes; `reserved` as for
/// [`cot_set_within`]).
pub fn cot_bytes(budget: Option<u64>, reserved: u64) -> u64 {
    cot_of(cot_set_within(&hush_correlations::lpn::FERRET_SETS, budget, reserved))
}

/// What an HE session reserves besides its COT sources when the server
/// picks their LPN set: the client's estimate at [`MIN_CHUNK`] without
/// pre-dealing (public parameters only, so both parties agree).
pub fn cot_reserve(model: &Model, plan: &Plan) -> Result<u64> {
    client_estimate(model, plan, "cf2", MIN_CHUNK, 0)
}

/// A linear layer's HE messages at the client (upload + response, and
/// the response's decoded words), at the default parameter set.
fn he_layer_bytes(model: &Model, plan: &Plan, step: usize) -> Result<u64> {
    static CTX: std::sync::OnceLock<Option<hush_rlwe::Context>> = std::sync::OnceLock::new();
    let ctx = CTX
        .get_or_init(|| crate::he_linear::params_by_name(crate::he_linear::DEFAULT_PARAMS).ok().and_then(|p| hush_rlwe::Context::new(p).ok()))
        .as_ref()
        .ok_or_else(|| Error::Config("HE parameters unavailable".into()))?;
    let shape = crate::he_linear::shape_of_node(model, step)?;
    let (up, down) = hush_rlwe::cheetah::layer_bytes(ctx, &hush_rlwe::cheetah::Config::new(plan.cfg.bits), &shape).map_err(|e| Error::Config(e.to_string()))?;
    Ok((up + 2 * down) as u64 + 3 * 8 * ctx.n as u64 * ctx.params.primes.len() as u64)
}

fn nl_bytes(proto: &str, bits: u32, g: Gate, n: usize, chunk: usize) -> Result<u64> {
    let c = n.min(chunk.max(1));
    if c == 0 {
        return Ok(0);
    }
    // dealt material ×3 (module copy, encoded response, decoded batch) and
    // the chunk's online vectors and messages; cf2 makes its correlations
    // in place (its estimate already counts their transient)
    let copies = if proto == "cf2" { 1 } else { 3 };
    Ok(copies * family_est_bytes(proto, bits, g, c)? + 64 * c as u64)
}

/// The look-ahead worker's share of the client's peak: its queue cap plus
/// two more copies of the largest item (dealing transient), from public
/// parameters only (so both parties' fits agree).
pub fn lookahead_bytes(plan: &Plan, proto: &str, chunk: usize) -> Result<u64> {
    let mut max_item = 0u64;
    for it in crate::engine::schedule(plan, chunk) {
        max_item = max_item.max(crate::engine::item_est_bytes(proto, plan.cfg.bits, &it)?);
    }
    Ok(crate::engine::lookahead_cap(max_item) + 2 * max_item)
}

/// Estimated peak heap (bytes) of the client for `plan` (the client's
/// plan: no weights) with nonlinear chunks of `chunk` elements and a
/// pre-dealing budget of `predeal` bytes.
pub fn client_estimate(model: &Model, plan: &Plan, proto: &str, chunk: usize, predeal: u64) -> Result<u64> {
    Ok(client_step_estimates(model, plan, proto, chunk, predeal)?.into_iter().max().unwrap_or(0))
}

/// [`client_estimate`] step by step: the client's estimated heap while
/// each plan step runs (what the session holds, plus that step's
/// transient). `hush plan` reports it per layer; the largest is the
/// client's peak.
pub fn client_step_estimates(model: &Model, plan: &Plan, proto: &str, chunk: usize, predeal: u64) -> Result<Vec<u64>> {
    let bits = plan.cfg.bits;
    let frac = plan.cfg.frac;
    let mut plan_bytes = 0u64;
    let mut transients = Vec::with_capacity(plan.steps.len());
    let he = proto == "cf2";
    for (si, st) in plan.steps.iter().enumerate() {
        let out = st.out_len as u64;
        let t = match &st.kind {
            StepKind::Linear { in_len, out_len, .. } => {
                let (i, o) = (*in_len as u64, *out_len as u64);
                // dealing: masks B, R_C (module copy, encoded, decoded);
                // online: masks, F, its packed message and frame, output;
                // HE modes: the layer's ciphertexts instead
                let lin = if he { 8 * (i + o) + he_layer_bytes(model, plan, si)? } else { (24 * (i + o)).max(8 * (i + o) + 8 * i + 16 * i + 8 * o) };
                lin + nl_bytes(proto, bits, Gate::Trunc(frac), *out_len, chunk)?
            }
            StepKind::AvgPool { offs, idx, consts } => {
                plan_bytes += 4 * (offs.len() + idx.len()) as u64 + 8 * consts.len() as u64;
                8 * out + nl_bytes(proto, bits, Gate::Trunc(frac), st.out_len, chunk)?
            }
            StepKind::MaxPool { offs, idx } => {
                plan_bytes += 4 * (offs.len() + idx.len()) as u64;
                // candidates, window offsets, pair differences, next round
                let cand = idx.len() as u64;
                8 * (2 * cand + cand / 2) + 8 * offs.len() as u64 + nl_bytes(proto, bits, Gate::Relu, idx.len() / 2, chunk)?
            }
            StepKind::Relu => 8 * out + nl_bytes(proto, bits, Gate::Relu, st.out_len, chunk)?,
            StepKind::AddConst { .. } | StepKind::Add | StepKind::Reshape | StepKind::Concat { .. } => 8 * out,
        };
        transients.push(t);
    }
    let live = 8 * model.peak_live_elems() as u64;
    // the encoded input and the architecture text, held for the session
    let held = 8 * plan.input_len as u64 + 2 * model.header_json.len() as u64;
    let he_fixed = if he { HE_BASE } else { 0 };
    let fixed = BASE + he_fixed + plan_bytes + held + live + predeal;
    if transients.is_empty() {
        return Ok(vec![fixed]);
    }
    Ok(transients.into_iter().map(|t| fixed + t).collect())
}

/// [`client_estimate`] plus, in the HE modes, the COT sources' batches for
/// a client budget of `budget`.
pub fn client_estimate_total(model: &Model, plan: &Plan, proto: &str, chunk: usize, predeal: u64, budget: Option<u64>) -> Result<u64> {
    let e = client_estimate(model, plan, proto, chunk, predeal)?;
    Ok(if proto == "cf2" { e + cot_bytes(budget, cot_reserve(model, plan)?) } else { e })
}

/// The smallest budget this model can run in: the estimate at
/// [`MIN_CHUNK`] without pre-dealing.
pub fn floor(model: &Model, plan: &Plan, proto: &str) -> Result<u64> {
    let e = client_estimate(model, plan, proto, MIN_CHUNK, 0)?;
    // HE modes: the smallest LPN set's batches at both sources
    Ok(if proto == "cf2" { e + cot_bytes(Some(0), 0) } else { e })
}

/// Picks the chunk and pre-dealing budget for a client budget of `budget`
/// bytes, starting from the configured `chunk` and `predeal`: the largest
/// chunk (halving, not below [`MIN_CHUNK`]) whose estimate without
/// pre-dealing takes at most half the budget (else the largest that fits
/// at all; in the HE modes, which pre-deal nothing, the largest that fits
/// at all), then the look-ahead if it fits ([`lookahead_bytes`]), then as
/// much pre-dealing as the rest allows. A budget below
/// the floor is an error naming the floor.
pub fn fit(model: &Model, plan: &Plan, proto: &str, chunk: usize, predeal: u64, budget: u64) -> Result<MemFit> {
    let fl = floor(model, plan, proto)?;
    if budget < fl {
        return Err(Error::Memory(format!(
            "--max-mem {:.1} MiB is below the floor of model '{}' for the client ({:.1} MiB: live activations, one layer's masks and one {}-element chunk of {} correlations, no pre-dealing); nothing was sent",
            budget as f64 / 1048576.0,
            model.name,
            fl as f64 / 1048576.0,
            MIN_CHUNK,
            proto
        )));
    }
    // HE modes: the COT sources take their share first (see cot_bytes)
    let full = budget;
    let reserve = if proto == "cf2" { cot_reserve(model, plan)? } else { 0 };
    let budget = if proto == "cf2" { budget.saturating_sub(cot_bytes(Some(budget), reserve)) } else { budget };
    let mut cands = Vec::new();
    let mut c = chunk.max(1);
    loop {
        cands.push(c);
        if c <= MIN_CHUNK {
            break;
        }
        c = (c / 2).max(MIN_CHUNK);
    }
    let mut pick = None;
    // half the budget is kept for pre-dealing; the HE modes deal nothing,
    // so there the largest chunk that fits at all is taken (fewer chunks,
    // fewer flights: ResNet-50 interactive at --max-mem 512MiB went from
    // 32,768-element chunks to 131,072)
    let share = if proto == "cf2" { budget } else { budget / 2 };
    for &c in &cands {
        let e = client_estimate(model, plan, proto, c, 0)?;
        if e <= share {
            pick = Some((c, e));
            break;
        }
    }
    if pick.is_none() {
        for &c in &cands {
            let e = client_estimate(model, plan, proto, c, 0)?;
            if e <= budget {
                pick = Some((c, e));
                break;
            }
        }
    }
    let (chunk, e0) = pick.unwrap_or((MIN_CHUNK.min(chunk.max(1)), fl));
    if proto == "cf2" {
        // nothing is dealt: no look-ahead, no pre-dealing
        return Ok(MemFit { budget: full, chunk, predeal_mem: 0, lookahead: 0, estimate: e0 + cot_bytes(Some(full), reserve), floor: fl });
    }
    let la = lookahead_bytes(plan, proto, chunk)?;
    let lookahead = if e0 + la <= budget { la } else { 0 };
    let predeal_mem = predeal.min(budget.saturating_sub(e0 + lookahead));
    Ok(MemFit { budget, chunk, predeal_mem, lookahead, estimate: e0 + lookahead + predeal_mem, floor: fl })
}
