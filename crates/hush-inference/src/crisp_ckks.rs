//! Model-level inference against a **malicious client** with CRISP's own
//! linear layers (issue 14; CRISP §IV–V): the client's authenticated
//! shares go through [`hush_2pc::crisp_ckks`] — one ciphertext per input
//! polynomial carrying the value (real part) and its MAC (imaginary part),
//! one homomorphic product with the server's plaintext weights, the bias
//! as b + i·μb — and the nonlinear layers, truncations and the final
//! consistency check are those of [`crate::crisp_run`] (MAC-carrying FSS
//! gates dealt by the dealer). It is the opt-in linear backend of
//! `--mode malicious-client` (`--crisp-linear ckks`,
//! [`crate::crisp_run::LinearBackend::Ckks`]); the default is the
//! dealer-dealt bilinear triples (`dealt`), which have no well-formedness
//! gap (see below and [`hush_rlwe::ckks_crisp`]).
//!
//! **What it computes** is bit for bit the plaintext fixed-point
//! reference ([`crate::reference`]): the linear layers are exact on the
//! lifted ring (the scale is q/2^k: the CKKS error bound is 0 after
//! rounding, see [`hush_rlwe::ckks_crisp`]), the gates exact. Tests:
//! `tests_crisp.rs`.
//!
//! **Trust and views.** μ and every gate correlation come from the dealer
//! (independent party); the linear layers need no dealer at all — the
//! dealer never touches W. The server sees ciphertexts under the client's
//! fresh key (generated per inference, in the offline phase) and uniform
//! openings; the client sees flooded responses and uniform shares. The
//! client's ciphertexts are checked for syntax only; the exact gap (about
//! one bit of a chosen linear function of W per revealed coefficient and
//! inference for a client that sends malformed ciphertexts, with no ZK
//! proof of plaintext knowledge) is stated in [`hush_2pc::crisp_ckks`].
//!
//! **Phases.** *Offline*: the MAC key request (fresh μ), the client's key
//! pair and public key (client → server), every dealt gate. *Online*: the
//! client's input (InitLin = authenticated input + the first Lin), the
//! layers, the check and the release.

use crate::crisp_run::{linear_shapes, CrispCost};
use crate::model::Model;
use crate::plan::{Plan, StepKind};
use crate::{Error, Result};
use hush_2pc::crisp::{self, AuthShare, LinShape, Lift, ReluBatch, Session, TruncBatch};
use hush_2pc::crisp_ckks::{self, CkksLin};
use hush_2pc::tee::Dealer;
use hush_transport::Channel;
use std::time::Instant;
use zeroize::Zeroize;

fn tpc(e: hush_2pc::Error) -> Error {
    match e {
        hush_2pc::Error::MacCheckFailed(m) => Error::Protocol(format!("malicious-client check failed: {m}")),
        hush_2pc::Error::Aborted(m) => Error::Peer(format!("the server aborted: {m}")),
        e => Error::Nonlinear(e.to_string()),
    }
}

fn windows(offs: &[u32], idx: &[u32]) -> Vec<Vec<usize>> {
    offs.windows(2).map(|w| idx[w[0] as usize..w[1] as usize].iter().map(|&i| i as usize).collect()).collect()
}

fn get(vals: &[Option<AuthShare>], i: usize) -> Result<&AuthShare> {
    vals.get(i).and_then(|v| v.as_ref()).ok_or_else(|| Error::Protocol(format!("value {i} freed too early")))
}

#[allow(clippy::large_enum_variant)]
enum Dealt {
    None,
    /// The server's ℓ-bit weights and bias (empty at the client).
    Linear { sh: LinShape, trunc: TruncBatch, w: Vec<u64>, bias: Vec<u64> },
    Relu(ReluBatch),
    AvgPool(TruncBatch),
    MaxPool(Vec<ReluBatch>, Vec<Vec<usize>>),
}

impl Drop for Dealt {
    fn drop(&mut self) {
        if let Dealt::Linear { w, bias, .. } = self {
            w.zeroize();
            bias.zeroize();
        }
    }
}

/// Everything a party holds after the offline phase.
pub struct Offline {
    sess: Session,
    he: CkksLin,
    input_masks: crisp::MaskBatch,
    output_masks: crisp::MaskBatch,
    steps: Vec<Dealt>,
}

/// Offline phase of one party (server = 0 with a weighted plan, client = 1).
pub fn offline(model: &Model, plan: &Plan, party: u8, ch: &mut dyn Channel, dealer: &mut Dealer, s: u32) -> Result<Offline> {
    let server = party == 0;
    if server && !plan.has_weights {
        return Err(Error::Config("the server needs the model weights".into()));
    }
    if let Some(st) = plan.steps.iter().find(|st| matches!(st.kind, StepKind::Concat { .. })) {
        return Err(Error::Config(format!(
            "--mode malicious-client: node '{}' ({}) is not supported yet (supported: conv, dense, scale, relu, maxpool, avgpool, reshape, add, add-const)",
            st.name,
            st.kind_name()
        )));
    }
    let cfg = plan.cfg;
    let lift = Lift::new(cfg.bits, s).map_err(tpc)?;
    let shapes = linear_shapes(model, plan)?;
    let sess = Session::start(dealer, party, lift).map_err(tpc)?;
    let he = crisp_ckks::setup(ch, &sess, crisp_ckks::context().map_err(tpc)?, None).map_err(tpc)?;
    let input_masks = crisp::deal_masks(dealer, &sess, plan.input_len).map_err(tpc)?;
    let mut steps = Vec::with_capacity(plan.steps.len());
    for (st, sh) in plan.steps.iter().zip(&shapes) {
        let d = match &st.kind {
            StepKind::Linear { op, bias, out_len, .. } => {
                let sh = sh.ok_or_else(|| Error::Model(format!("node '{}': no linear shape", st.name)))?;
                let trunc = crisp::deal_trunc(dealer, &sess, *out_len, cfg.frac).map_err(tpc)?;
                let (w, bias) = match (server, op) {
                    (true, Some(op)) => {
                        let w = match op {
                            hush_tee::linear_deal::LinearOp::Conv { weight, .. }
                            | hush_tee::linear_deal::LinearOp::Dense { weight, .. }
                            | hush_tee::linear_deal::LinearOp::Scale { weight, .. } => weight.clone(),
                        };
                        (w, bias.clone())
                    }
                    (true, None) => return Err(Error::Config("server plan without weights".into())),
                    (false, _) => (Vec::new(), Vec::new()),
                };
                Dealt::Linear { sh, trunc, w, bias }
            }
            StepKind::Relu => Dealt::Relu(crisp::deal_relu(dealer, &sess, st.out_len).map_err(tpc)?),
            StepKind::MaxPool { offs, idx } => {
                let win = windows(offs, idx);
                let b = crisp::maxpool_levels(&win).into_iter().map(|n| crisp::deal_relu(dealer, &sess, n)).collect::<hush_2pc::Result<Vec<_>>>().map_err(tpc)?;
                Dealt::MaxPool(b, win)
            }
            StepKind::Reshape | StepKind::Add | StepKind::AddConst { .. } => Dealt::None,
            StepKind::AvgPool { .. } => Dealt::AvgPool(crisp::deal_trunc(dealer, &sess, st.out_len, cfg.frac).map_err(tpc)?),
            StepKind::Concat { .. } => return Err(Error::Config(format!("node '{}': unsupported", st.name))),
        };
        steps.push(d);
    }
    let output_masks = crisp::deal_masks(dealer, &sess, plan.steps.get(plan.output.wrapping_sub(1)).map(|s| s.out_len).unwrap_or(plan.input_len)).map_err(tpc)?;
    Ok(Offline { sess, he, input_masks, output_masks, steps })
}

/// Online phase: the client passes `Some(x)`, the server `None`.
pub fn online(plan: &Plan, ch: &mut dyn Channel, off: &mut Offline, x: Option<&[u64]>, log: &mut dyn FnMut(&str)) -> Result<Option<Vec<u64>>> {
    let sess = &mut off.sess;
    if let Some(x) = x {
        if x.len() != plan.input_len {
            return Err(Error::Input(format!("input of {} elements, the model expects {}", x.len(), plan.input_len)));
        }
    }
    // InitLin's first half: the authenticated input (CRISP: shares of μx)
    let xa = crisp::input(ch, sess, &off.input_masks, x).map_err(tpc)?;
    let mut vals: Vec<Option<AuthShare>> = Vec::with_capacity(plan.steps.len() + 1);
    vals.push(Some(xa));
    let lift = sess.lift;
    let server = sess.party == 0;
    for (si, (st, d)) in plan.steps.iter().zip(off.steps.iter_mut()).enumerate() {
        let a = get(&vals, st.inputs[0])?;
        let y = match (&st.kind, d) {
            (StepKind::Linear { .. }, Dealt::Linear { sh, trunc, w, bias }) => {
                let y = crisp_ckks::lin(ch, sess, &mut off.he, sh, server.then_some(&w[..]), server.then_some(&bias[..]), a).map_err(tpc)?;
                crisp::trunc(ch, sess, trunc, &y).map_err(tpc)?
            }
            (StepKind::Relu, Dealt::Relu(b)) => crisp::relu(ch, sess, b, a).map_err(tpc)?,
            (StepKind::AvgPool { offs, idx, consts }, Dealt::AvgPool(trunc)) => {
                let (mut v, mut mm) = (Vec::with_capacity(consts.len()), Vec::with_capacity(consts.len()));
                for (w, c) in offs.windows(2).zip(consts) {
                    let c = lift.lift(*c);
                    let win = idx.get(w[0] as usize..w[1] as usize).ok_or_else(|| Error::Protocol("pool window".into()))?;
                    let (sv, sm) = win.iter().try_fold((0u128, 0u128), |(sv, sm), &i| {
                        let i = i as usize;
                        match (a.v.get(i), a.m.get(i)) {
                            (Some(x), Some(y)) => Ok((lift.add(sv, *x), lift.add(sm, *y))),
                            _ => Err(Error::Protocol("pool index".into())),
                        }
                    })?;
                    v.push(lift.mul(sv, c));
                    mm.push(lift.mul(sm, c));
                }
                crisp::trunc(ch, sess, trunc, &AuthShare { v, m: mm }).map_err(tpc)?
            }
            (StepKind::MaxPool { .. }, Dealt::MaxPool(b, win)) => crisp::maxpool(ch, sess, b, a, win).map_err(tpc)?,
            (StepKind::Reshape, _) => a.clone(),
            (StepKind::AddConst { c }, _) => {
                let c: Vec<u128> = if server { c.iter().map(|&v| lift.lift(v)).collect() } else { vec![0; a.len()] };
                a.add_public(sess, &c).map_err(tpc)?
            }
            (StepKind::Add, _) => a.add(&lift, get(&vals, st.inputs[1])?).map_err(tpc)?,
            _ => return Err(Error::Protocol(format!("node '{}': offline and online phases disagree", st.name))),
        };
        if y.len() != st.out_len {
            return Err(Error::Protocol(format!("layer '{}' produced {} elements, expected {}", st.name, y.len(), st.out_len)));
        }
        vals.push(Some(y));
        for (v, slot) in vals.iter_mut().enumerate().take(si + 1) {
            if plan.last_use[v] == si {
                slot.take();
            }
        }
    }
    let out = vals.get_mut(plan.output).and_then(|v| v.take()).ok_or_else(|| Error::Protocol("output freed".into()))?;
    crisp::reveal_to_client(ch, sess, &off.output_masks, &out, log).map_err(tpc)
}

/// One party end to end, with its costs: [`offline`] then [`online`].
#[allow(clippy::too_many_arguments)]
pub fn party(model: &Model, plan: &Plan, party: u8, ch: &mut dyn Channel, dealer: &mut Dealer, s: u32, x: Option<&[u64]>, log: &mut dyn FnMut(&str)) -> Result<(Option<Vec<u64>>, CrispCost)> {
    let c0 = ch.cost();
    let m0 = dealer.stats();
    let t0 = Instant::now();
    let mut off = offline(model, plan, party, ch, dealer, s)?;
    let offline_s = t0.elapsed().as_secs_f64();
    let c1 = ch.cost();
    let t1 = Instant::now();
    let y = online(plan, ch, &mut off, x, log)?;
    let online_s = t1.elapsed().as_secs_f64();
    let c2 = ch.cost();
    let dm = dealer.stats() - m0;
    let (d0, d1) = (c1 - c0, c2 - c1);
    Ok((
        y,
        CrispCost {
            offline_s,
            online_s,
            offline_bytes: d0.bytes_sent + d0.bytes_recv,
            offline_bytes_sent: d0.bytes_sent,
            offline_bytes_recv: d0.bytes_recv,
            online_bytes: d1.bytes_sent + d1.bytes_recv,
            online_rounds: c2.rounds.saturating_sub(c1.rounds),
            checked_openings: off.sess.pending(),
            dealer_bytes: dm.bytes_to_module + dm.bytes_from_module,
            dealer_requests: dm.crossings,
            // not metered per step on this path: one entry with the
            // online totals (so served reports sum to the right bytes and
            // rounds)
            layers: vec![crate::engine::LayerCost {
                name: "online (ckks path, all steps)".into(),
                kind: "crisp-ckks",
                elems: plan.input_len,
                secs: online_s,
                module_secs: 0.0,
                bytes_sent: d1.bytes_sent,
                bytes_recv: d1.bytes_recv,
                rounds: c2.rounds.saturating_sub(c1.rounds),
                module_crossings: 0,
                module_bytes: 0,
                macs: 0,
            }],
        },
    ))
}
