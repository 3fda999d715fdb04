//! Model-level inference against a **malicious client** (CRISP, issue 14)
//! in dealer mode. Two linear backends ([`LinearBackend`]): `dealt`, the
//! default, this module's, and `ckks`, CRISP's CKKS-packed linear layers
//! on dealer-made ciphertexts ([`crate::crisp_ckks`]; opt-in). This
//! module: a [`Plan`] run on authenticated shares
//! ([`hush_2pc::crisp`]) — private-weight linear layers
//! ([`hush_2pc::crisp::linear`], dealer-dealt bilinear triples; the dealer
//! never sees W), the server adds the bias, an exact MAC-carrying
//! truncation after each weighted layer, MAC-carrying ReLU and MaxPool
//! gates — ending in the consistency check, after which (only) the server
//! releases the logits to the client.
//!
//! **What this module computes** is bit for bit the plaintext fixed-point
//! reference ([`crate::reference`]): every gate is exact (ReLU, floor
//! truncation, max), like the semi-honest `fss` family's. The tests check
//! both (`tests_crisp.rs`).
//!
//! **Trust.** Correlations come from a [`hush_2pc::tee::Dealer`]: the
//! dealer service (`dealer` underneath; trusted not to collude with either
//! party; it never receives the weights here, unlike the semi-honest
//! module-dealt layers). A trusted module (`tee`) is **not** offered
//! underneath, by design rather than by omission: the whole guarantee of
//! this mode is that the client cannot learn μ (nor bias r, ⟨μr⟩, the
//! masks), and in tee mode the client's correlations come from a module on
//! the *client's own host*. hush's module is a software simulation
//! (attestation simulated, no hardware protection), so a malicious client
//! — exactly the adversary this mode exists for — reads μ from its
//! module's memory and then forges MACs at will: the check would pass on
//! any deviation. Unlike the semi-honest modes, where "tee, simulated" is
//! at least the honest description of a semi-honest run, here a simulated
//! module would turn a security claim into a false one, so even a warning
//! banner is not enough: `--mode malicious-client` runs over a dealer only
//! (see [`crate::runtime::Mode::MaliciousClient`]). With real hardware
//! (a module whose memory the host cannot read) tee underneath would be
//! sound; hush has none. Interactive preprocessing (without a third party)
//! does not exist for this mode in hush and is refused.
//!
//! **Linear backend** ([`CrispOptions::linear`], [`LinearBackend`]):
//! `dealt` (dealer-dealt bilinear triples, above; the default) or `ckks`
//! (CRISP's InitLin/Lin, §IV, [`crate::crisp_ckks`]; opt-in). The option is
//! carried through the hello; both parties must agree.
//!
//! **Phases.** *Offline* (input-independent): the MAC key request (a
//! fresh μ per inference), every dealt correlation of the plan in plan
//! order, and the masked weights E = W − A of each linear layer (server →
//! client). *Online*: the client's authenticated input, the layers, the
//! check and the release.
//!
//! Supported steps: Conv/Dense/Scale (+ bias, truncation), ReLU, MaxPool,
//! AvgPool (window sums times public constants, local on values and MACs,
//! then truncation), Reshape, AddConst, Add, Concat (a copy of value and
//! MAC shares into place: local, no message, and the MAC relation
//! m = μ·x holds element-wise, so it survives any permutation).

use crate::model::{Model, Op};
use crate::plan::{Plan, StepKind};
use crate::{Error, Result};
use hush_2pc::crisp::{self, AuthShare, LinBatch, LinShape, Lift, ReluBatch, Session, TruncBatch};
use hush_2pc::crisp_ckks;
use hush_2pc::tee::Dealer;
use hush_transport::Channel;
use std::time::Instant;
use zeroize::Zeroize;

/// The names of the linear-layer backends of a malicious-client run
/// ([`LinearBackend`]); the first is the default.
pub const LINEAR_BACKENDS: &[&str] = &["dealt", "ckks"];

/// The settings of a malicious-client run both parties must share (agreed
/// at the hello of a served session; see [`crate::runtime`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrispOptions {
    /// Statistical security parameter of the lift Z_2^(ℓ+s) (default
    /// [`hush_2pc::crisp::DEFAULT_S`] = 40): a deviation that changes a
    /// value passes the check with probability ≤ (s + 3)·2^−(s+2).
    pub s: u32,
    /// The linear-layer backend, one of [`LINEAR_BACKENDS`].
    pub linear: String,
}

impl Default for CrispOptions {
    fn default() -> Self {
        CrispOptions { s: hush_2pc::crisp::DEFAULT_S, linear: "dealt".into() }
    }
}

/// Smallest s accepted from a flag or a peer: below it the check's
/// soundness error ((s + 3)·2^−(s+2)) is no longer negligible. Smaller s
/// exist only inside tests of the protocol layer.
pub const MIN_S: u32 = 32;

impl CrispOptions {
    /// Checks s (≥ [`MIN_S`], ℓ + s ≤ 128 is checked with ℓ later) and the
    /// backend name.
    pub fn check(&self) -> Result<()> {
        if self.s < MIN_S || self.s > 64 {
            return Err(Error::Config(format!("--mac-s {}: choose {MIN_S} ≤ s ≤ 64 (soundness error (s+3)·2^-(s+2); default {})", self.s, hush_2pc::crisp::DEFAULT_S)));
        }
        if !LINEAR_BACKENDS.contains(&self.linear.as_str()) {
            return Err(Error::Config(format!(
                "--crisp-linear {}: unknown (available: {})",
                self.linear,
                LINEAR_BACKENDS.join(", ")
            )));
        }
        Ok(())
    }
}

/// One party's costs of a malicious-client inference.
#[derive(Clone, Debug, Default)]
pub struct CrispCost {
    pub offline_s: f64,
    pub online_s: f64,
    /// Party-to-party payload bytes (both directions) of each phase.
    pub offline_bytes: u64,
    pub online_bytes: u64,
    /// The offline party-link bytes by direction (this party's view).
    pub offline_bytes_sent: u64,
    pub offline_bytes_recv: u64,
    pub online_rounds: u32,
    /// Elements whose MAC relation the final check covered.
    pub checked_openings: usize,
    /// This party's dealer link: payload bytes (both directions) and
    /// requests (all offline).
    pub dealer_bytes: u64,
    pub dealer_requests: u64,
    /// Online costs per plan step, then one entry for the check and release.
    pub layers: Vec<crate::engine::LayerCost>,
}

fn tpc(e: hush_2pc::Error) -> Error {
    match e {
        hush_2pc::Error::MacCheckFailed(m) => Error::Protocol(format!("malicious-client check failed: {m}")),
        hush_2pc::Error::Aborted(m) => Error::Peer(format!("the server aborted: {m}")),
        hush_2pc::Error::Transport(t) => Error::Transport(t),
        e => Error::Nonlinear(e.to_string()),
    }
}

/// The public shape of every step's weighted linear map (from the
/// architecture, which both parties have), `None` for other steps.
pub fn linear_shapes(model: &Model, plan: &Plan) -> Result<Vec<Option<LinShape>>> {
    if model.nodes.len() != plan.steps.len() {
        return Err(Error::Config("plan and model disagree".into()));
    }
    let u = |v: usize| u32::try_from(v).map_err(|_| Error::Model("dimension out of range".into()));
    model
        .nodes
        .iter()
        .zip(&plan.steps)
        .map(|(n, st)| {
            let in_shape = model.shape(n.inputs[0]);
            let in_len: usize = in_shape.iter().product();
            let sh = match &n.op {
                Op::Conv { weight, stride, pads, .. } => {
                    let s = &weight.shape;
                    if s.len() != 4 || in_shape.len() != 3 {
                        return Err(Error::Model(format!("node '{}': convolution shape", n.name)));
                    }
                    Some(LinShape::Conv {
                        c_in: u(s[1])?,
                        h: u(in_shape[1])?,
                        w: u(in_shape[2])?,
                        c_out: u(s[0])?,
                        kh: u(s[2])?,
                        kw: u(s[3])?,
                        stride: [u(stride[0])?, u(stride[1])?],
                        pads: [u(pads[0])?, u(pads[1])?, u(pads[2])?, u(pads[3])?],
                    })
                }
                Op::Dense { .. } => Some(LinShape::Dense { n_in: u(in_len)?, n_out: u(st.out_len)? }),
                Op::Scale { .. } => {
                    let c = *in_shape.first().ok_or_else(|| Error::Model(format!("node '{}': scale shape", n.name)))?;
                    Some(LinShape::Scale { channels: u(c)?, inner: u(in_len / c.max(1))? })
                }
                _ => None,
            };
            if let (Some(sh), StepKind::Linear { op: Some(op), .. }) = (&sh, &st.kind) {
                if LinShape::of(op) != *sh {
                    return Err(Error::Model(format!("node '{}': weights and architecture disagree", n.name)));
                }
            }
            if let Some(sh) = &sh {
                let (_, i, o) = sh.lens().ok_or_else(|| Error::Model(format!("node '{}': layer too large for this mode", n.name)))?;
                if i != in_len || o != st.out_len {
                    return Err(Error::Model(format!("node '{}': layer shape", n.name)));
                }
            }
            Ok(sh)
        })
        .collect()
}

/// MaxPool windows as index lists.
fn windows(offs: &[u32], idx: &[u32]) -> Vec<Vec<usize>> {
    offs.windows(2).map(|w| idx[w[0] as usize..w[1] as usize].iter().map(|&i| i as usize).collect()).collect()
}

fn get(vals: &[Option<AuthShare>], i: usize) -> Result<&AuthShare> {
    vals.get(i).and_then(|v| v.as_ref()).ok_or_else(|| Error::Protocol(format!("value {i} freed too early")))
}

/// What one step consumes from the offline phase.
#[allow(clippy::large_enum_variant)] // one per plan step
enum Dealt {
    None,
    Linear { lin: Lin, trunc: TruncBatch },
    Relu(ReluBatch),
    /// The truncation after the window sums times public constants.
    AvgPool(TruncBatch),
    MaxPool(Vec<ReluBatch>, Vec<Vec<usize>>),
}

/// A linear layer's offline material, by backend ([`LinearBackend`]); the
/// server's weights and bias (empty or zero at the client), wiped on drop.
enum Lin {
    /// `dealt`: the dealer's bilinear triple; weights and bias lifted to
    /// Z_2^(ℓ+s).
    Triple { t: Option<LinBatch>, w: Vec<u128>, bias: Vec<u128> },
    /// `ckks`, before the offline HE product: the dealer's mask and
    /// ciphertexts ([`hush_2pc::crisp_ckks::deal_lin`]) and the ℓ-bit
    /// weights; [`hush_2pc::crisp_ckks::prepare`] turns it into a
    /// [`Lin::Triple`] (the online step is the same checked opening).
    Ckks { mask: Option<crisp_ckks::CkksMask>, w: Vec<u64>, wl: Vec<u128>, bias: Vec<u128> },
}

impl Drop for Lin {
    fn drop(&mut self) {
        match self {
            Lin::Triple { w, bias, .. } => {
                w.zeroize();
                bias.zeroize();
            }
            Lin::Ckks { w, wl, bias, .. } => {
                w.zeroize();
                wl.zeroize();
                bias.zeroize();
            }
        }
    }
}

/// Everything a party holds after the offline phase.
pub struct Offline {
    sess: Session,
    input_masks: crisp::MaskBatch,
    output_masks: crisp::MaskBatch,
    steps: Vec<Dealt>,
}

/// Offline phase of one party (server = party 0 with a weighted plan,
/// client = party 1): deals every correlation of `plan` from `dealer` in
/// plan order and exchanges the masked weights. `s` is the statistical
/// security parameter of the lift.
pub fn offline(model: &Model, plan: &Plan, party: u8, ch: &mut dyn Channel, dealer: &mut Dealer, s: u32) -> Result<Offline> {
    offline_with(LinearBackend::Dealt, model, plan, party, ch, dealer, s)
}

/// [`offline`] with the linear layers of `backend`: with `ckks`, the
/// epoch's RLWE key from the dealer right after the MAC key request, per
/// linear layer the dealer's mask and ciphertexts instead of a triple, and
/// the server's HE response (server → client) instead of the masked
/// weights.
#[allow(clippy::too_many_arguments)]
pub fn offline_with(backend: LinearBackend, model: &Model, plan: &Plan, party: u8, ch: &mut dyn Channel, dealer: &mut Dealer, s: u32) -> Result<Offline> {
    let server = party == 0;
    if server && !plan.has_weights {
        return Err(Error::Config("the server needs the model weights".into()));
    }
    let cfg = plan.cfg;
    let lift = Lift::new(cfg.bits, s).map_err(tpc)?;
    let shapes = linear_shapes(model, plan)?;
    let sess = Session::start(dealer, party, lift).map_err(tpc)?;
    let he = match backend {
        LinearBackend::Ckks => Some(crisp_ckks::setup(dealer, &sess, crisp_ckks::context().map_err(tpc)?).map_err(tpc)?),
        LinearBackend::Dealt => None,
    };
    let mut he = he;
    let input_masks = crisp::deal_masks(dealer, &sess, plan.input_len).map_err(tpc)?;
    let mut steps = Vec::with_capacity(plan.steps.len());
    for (st, sh) in plan.steps.iter().zip(&shapes) {
        let d = match &st.kind {
            StepKind::Linear { op, bias, out_len, .. } => {
                let sh = sh.ok_or_else(|| Error::Model(format!("node '{}': no linear shape", st.name)))?;
                let (t, mask) = match backend {
                    LinearBackend::Dealt => (Some(crisp::deal_linear(dealer, &sess, sh).map_err(tpc)?), None),
                    LinearBackend::Ckks => (None, Some(crisp_ckks::deal_lin(dealer, &sess, &*crisp_ckks::context().map_err(tpc)?, sh).map_err(tpc)?)),
                };
                let trunc = crisp::deal_trunc(dealer, &sess, *out_len, cfg.frac).map_err(tpc)?;
                let weight = match (server, op) {
                    (true, Some(op)) => match op {
                        hush_tee::linear_deal::LinearOp::Conv { weight, .. }
                        | hush_tee::linear_deal::LinearOp::Dense { weight, .. }
                        | hush_tee::linear_deal::LinearOp::Scale { weight, .. } => Some(weight),
                    },
                    (true, None) => return Err(Error::Config("server plan without weights".into())),
                    (false, _) => None,
                };
                let lin = match (t, weight) {
                    (Some(t), Some(w)) => Lin::Triple { t: Some(t), w: w.iter().map(|&v| lift.lift(v)).collect(), bias: bias.iter().map(|&v| lift.lift(v)).collect() },
                    (Some(t), None) => Lin::Triple { t: Some(t), w: Vec::new(), bias: vec![0u128; *out_len] },
                    (None, Some(w)) => Lin::Ckks { mask, w: w.clone(), wl: w.iter().map(|&v| lift.lift(v)).collect(), bias: bias.iter().map(|&v| lift.lift(v)).collect() },
                    (None, None) => Lin::Ckks { mask, w: Vec::new(), wl: Vec::new(), bias: vec![0u128; *out_len] },
                };
                Dealt::Linear { lin, trunc }
            }
            StepKind::Relu => Dealt::Relu(crisp::deal_relu(dealer, &sess, st.out_len).map_err(tpc)?),
            StepKind::MaxPool { offs, idx } => {
                let win = windows(offs, idx);
                let b = crisp::maxpool_levels(&win).into_iter().map(|n| crisp::deal_relu(dealer, &sess, n)).collect::<hush_2pc::Result<Vec<_>>>().map_err(tpc)?;
                Dealt::MaxPool(b, win)
            }
            StepKind::Reshape | StepKind::Add | StepKind::AddConst { .. } | StepKind::Concat { .. } => Dealt::None,
            StepKind::AvgPool { .. } => Dealt::AvgPool(crisp::deal_trunc(dealer, &sess, st.out_len, cfg.frac).map_err(tpc)?),
        };
        steps.push(d);
    }
    let output_masks = crisp::deal_masks(dealer, &sess, plan.steps.get(plan.output.wrapping_sub(1)).map(|s| s.out_len).unwrap_or(plan.input_len)).map_err(tpc)?;
    // dealt: the masked weights E = W − A, server → client, layer by layer;
    // ckks: the HE product on the dealer's ciphertexts, server → client
    for d in steps.iter_mut() {
        if let Dealt::Linear { lin, .. } = d {
            match lin {
                Lin::Triple { t: Some(t), w, .. } => crisp::linear_prepare(ch, &sess, t, server.then_some(&w[..])).map_err(tpc)?,
                Lin::Ckks { mask, w, wl, bias } => {
                    let he = he.as_mut().ok_or_else(|| Error::Protocol("CKKS layer without a CKKS session".into()))?;
                    let m = mask.take().ok_or_else(|| Error::Protocol("CKKS layer mask used twice".into()))?;
                    let t = crisp_ckks::prepare(ch, &sess, he, m, server.then_some(&w[..])).map_err(tpc)?;
                    *lin = Lin::Triple { t: Some(t), w: std::mem::take(wl), bias: std::mem::take(bias) };
                }
                _ => {}
            }
        }
    }
    drop(he); // the CKKS keys are used offline only
    Ok(Offline { sess, input_masks, output_masks, steps })
}

/// Online phase: the client passes `Some(x)` (its encoded input), the
/// server `None`. Client: `Ok(Some(logits))` after a passed check, an
/// error if the server aborted; server: `Ok(None)` after releasing, or an
/// error after a failed check (which it reports through `log`).
pub fn online(plan: &Plan, ch: &mut dyn Channel, off: &mut Offline, x: Option<&[u64]>, log: &mut dyn FnMut(&str)) -> Result<Option<Vec<u64>>> {
    online_metered(plan, ch, off, x, log, &mut Vec::new())
}

/// Concatenation of authenticated shares along `axis` (CRISP has no such
/// layer; it is a copy): the value and MAC components are placed by the
/// same index map, so m_i = μ·x_i still holds for every output element.
/// Local, nothing sent. Sizes are checked against the public shapes.
fn concat_auth(shapes: &[Vec<usize>], axis: usize, parts: &[&AuthShare], out_len: usize) -> Result<AuthShare> {
    let bad = || Error::Protocol("concat: shapes and inputs disagree".into());
    if shapes.len() != parts.len() || shapes.is_empty() || shapes.iter().any(|s| s.len() <= axis || s.len() != shapes[0].len()) {
        return Err(bad());
    }
    let mut total = 0usize;
    for (s, p) in shapes.iter().zip(parts) {
        let n: usize = s.iter().product();
        if p.len() != n || p.m.len() != n {
            return Err(bad());
        }
        total += n;
    }
    if total != out_len {
        return Err(bad());
    }
    let sh: Vec<&[usize]> = shapes.iter().map(|s| s.as_slice()).collect();
    let (mut v, mut m) = (vec![0u128; out_len], vec![0u128; out_len]);
    let pv: Vec<&[u128]> = parts.iter().map(|p| p.v.as_slice()).collect();
    let pm: Vec<&[u128]> = parts.iter().map(|p| p.m.as_slice()).collect();
    crate::fixed::concat_into(&sh, axis, &pv, &mut v);
    crate::fixed::concat_into(&sh, axis, &pm, &mut m);
    Ok(AuthShare { v, m })
}

/// [`online`], appending this party's online cost of every plan step (and
/// one last entry, `check`, for the consistency check and the release) to
/// `layers`.
pub fn online_metered(plan: &Plan, ch: &mut dyn Channel, off: &mut Offline, x: Option<&[u64]>, log: &mut dyn FnMut(&str), layers: &mut Vec<crate::engine::LayerCost>) -> Result<Option<Vec<u64>>> {
    let meter = |name: &str, kind: &'static str, elems: usize, t: Instant, c0: hush_transport::Cost, c1: hush_transport::Cost| crate::engine::LayerCost {
        name: name.to_string(),
        kind,
        elems,
        secs: t.elapsed().as_secs_f64(),
        bytes_sent: c1.bytes_sent - c0.bytes_sent,
        bytes_recv: c1.bytes_recv - c0.bytes_recv,
        rounds: c1.rounds.saturating_sub(c0.rounds),
        ..Default::default()
    };
    let (t_in, c_in) = (Instant::now(), ch.cost());
    let sess = &mut off.sess;
    if let Some(x) = x {
        if x.len() != plan.input_len {
            return Err(Error::Input(format!("input of {} elements, the model expects {}", x.len(), plan.input_len)));
        }
    }
    let xa = crisp::input(ch, sess, &off.input_masks, x).map_err(tpc)?;
    layers.push(meter("input", "input", plan.input_len, t_in, c_in, ch.cost()));
    let mut vals: Vec<Option<AuthShare>> = Vec::with_capacity(plan.steps.len() + 1);
    vals.push(Some(xa));
    let lift = sess.lift;
    for (si, (st, d)) in plan.steps.iter().zip(off.steps.iter_mut()).enumerate() {
        let (t0, c0) = (Instant::now(), ch.cost());
        let a = get(&vals, st.inputs[0])?;
        let y = match (&st.kind, d) {
            (StepKind::Linear { .. }, Dealt::Linear { lin, trunc }) => {
                let server = sess.party == 0;
                let y = match lin {
                    Lin::Triple { t, w, bias } => {
                        let t = t.take().ok_or_else(|| Error::Protocol("linear triple used twice".into()))?;
                        let y = crisp::linear(ch, sess, t, server.then_some(&w[..]), a).map_err(tpc)?;
                        y.add_public(sess, bias).map_err(tpc)?
                    }
                    Lin::Ckks { .. } => return Err(Error::Protocol("CKKS layer not prepared in the offline phase".into())),
                };
                crisp::trunc(ch, sess, trunc, &y).map_err(tpc)?
            }
            (StepKind::Relu, Dealt::Relu(b)) => crisp::relu(ch, sess, b, a).map_err(tpc)?,
            (StepKind::AvgPool { offs, idx, consts }, Dealt::AvgPool(trunc)) => {
                // window sums times public constants: local on values and MACs
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
                let c: Vec<u128> = if sess.party == 0 { c.iter().map(|&v| lift.lift(v)).collect() } else { vec![0; a.len()] };
                a.add_public(sess, &c).map_err(tpc)?
            }
            (StepKind::Add, _) => a.add(&lift, get(&vals, st.inputs[1])?).map_err(tpc)?,
            (StepKind::Concat { axis, shapes }, _) => {
                let parts = st.inputs.iter().map(|&i| get(&vals, i)).collect::<Result<Vec<_>>>()?;
                concat_auth(shapes, *axis, &parts, st.out_len)?
            }
            _ => return Err(Error::Protocol(format!("node '{}': offline and online phases disagree", st.name))),
        };
        if y.len() != st.out_len {
            return Err(Error::Protocol(format!("layer '{}' produced {} elements, expected {}", st.name, y.len(), st.out_len)));
        }
        vals.push(Some(y));
        for (v, slot) in vals.iter_mut().enumerate().take(si + 1) {
            if plan.last_use[v] == si {
                slot.take(); // zeroized on drop
            }
        }
        layers.push(meter(&st.name, st.kind_name(), st.out_len, t0, c0, ch.cost()));
    }
    let out = vals.get_mut(plan.output).and_then(|v| v.take()).ok_or_else(|| Error::Protocol("output freed".into()))?;
    let (t0, c0) = (Instant::now(), ch.cost());
    let r = crisp::reveal_to_client(ch, sess, &off.output_masks, &out, log).map_err(tpc);
    layers.push(meter("check+release", "check", out.len(), t0, c0, ch.cost()));
    r
}

/// One party end to end, with its costs: [`offline`] then [`online`].
#[allow(clippy::too_many_arguments)]
pub fn party(model: &Model, plan: &Plan, party: u8, ch: &mut dyn Channel, dealer: &mut Dealer, s: u32, x: Option<&[u64]>, log: &mut dyn FnMut(&str)) -> Result<(Option<Vec<u64>>, CrispCost)> {
    party_with(LinearBackend::Dealt, model, plan, party, ch, dealer, s, x, log)
}

/// [`party`] with the linear layers of `backend` ([`offline_with`]).
#[allow(clippy::too_many_arguments)]
pub fn party_with(backend: LinearBackend, model: &Model, plan: &Plan, party: u8, ch: &mut dyn Channel, dealer: &mut Dealer, s: u32, x: Option<&[u64]>, log: &mut dyn FnMut(&str)) -> Result<(Option<Vec<u64>>, CrispCost)> {
    let c0 = ch.cost();
    let m0 = dealer.stats();
    let t0 = Instant::now();
    let mut off = offline_with(backend, model, plan, party, ch, dealer, s)?;
    let offline_s = t0.elapsed().as_secs_f64();
    let c1 = ch.cost();
    let t1 = Instant::now();
    let mut layers = Vec::with_capacity(plan.steps.len() + 2);
    let y = online_metered(plan, ch, &mut off, x, log, &mut layers)?;
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
            layers,
        },
    ))
}

/// The linear layers of `--mode malicious-client` (`--crisp-linear`):
/// * `dealt` (the default): this module's dealer-dealt bilinear triples
///   ([`hush_2pc::crisp::linear`]); the dealer never sees W. The client's
///   only input to a product with W is an opening x − B under a MAC that
///   the final check verifies, and the server authenticates the product
///   itself, so the check's verdict is independent of W (no selective
///   failure; `hush_2pc::crisp`, "No selective failure", and the test
///   `crisp_selective.rs`).
/// * `ckks`: CRISP's CKKS packing (§IV; [`crate::crisp_ckks`]): the product
///   with W is one homomorphic product giving value and MAC, run
///   **offline on ciphertexts the dealer makes** of an authenticated mask
///   (issue 36); online the client sends the same MAC-checked opening as
///   with `dealt`. The client sends no ciphertext, so neither CRISP's
///   missing zero-knowledge proof (the well-formedness gap of
///   `hush_rlwe::ckks_crisp`) nor the selective failure through W applies
///   (`hush_2pc::crisp_ckks`, "No selective failure"; the test
///   `crisp_selective.rs`). Opt-in: it costs more offline (the dealer's
///   ciphertexts, the server's HE product and its response); announced by
///   [`CKKS_GAP_WARNING`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LinearBackend {
    #[default]
    Dealt,
    Ckks,
}

/// What hush prints when `--crisp-linear ckks` is chosen (a note on its
/// construction and cost; the name is kept from when it announced gaps,
/// closed since issue 36).
pub const CKKS_GAP_WARNING: &str = "--crisp-linear ckks: CRISP's CKKS-packed linear layers with the input ciphertexts made by the dealer (the client sends none, so no zero-knowledge proof of plaintext knowledge is needed and the verdict does not depend on the weights); the HE product runs offline and costs more than the default, dealt. Both rest on a dealer that colludes with neither party.";

impl LinearBackend {
    pub fn name(&self) -> &'static str {
        match self {
            LinearBackend::Ckks => "ckks",
            LinearBackend::Dealt => "dealt",
        }
    }
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "ckks" => Ok(LinearBackend::Ckks),
            "dealt" => Ok(LinearBackend::Dealt),
            o => Err(Error::Config(format!("malicious-client linear layers: '{o}' (expected ckks or dealt)"))),
        }
    }
}

/// A local malicious-client run (both parties in this process).
pub struct LocalRun {
    /// The client's decoded logits.
    pub logits: Vec<f64>,
    /// The client's logits as ring elements.
    pub raw: Vec<u64>,
    pub server: CrispCost,
    pub client: CrispCost,
}

/// Runs one malicious-client inference of `x` with both parties in this
/// process over an in-memory link with `opts.profile`'s network emulation,
/// the correlations from the dealer service of `opts.mode` (`malicious-client`
/// or `dealer` with an address: only the dealer is taken from it; see
/// [`crate::runtime::local_dealer`] to start one here).
pub fn run_local(model: std::sync::Arc<Model>, x: &[f64], opts: &crate::runtime::Options, s: u32) -> Result<LocalRun> {
    run_local_with(model, x, opts, s, LinearBackend::default())
}

/// [`run_local`] with the linear layers of `backend`.
pub fn run_local_with(model: std::sync::Arc<Model>, x: &[f64], opts: &crate::runtime::Options, s: u32, backend: LinearBackend) -> Result<LocalRun> {
    use hush_tee::{DealerModule, ModuleRole};
    let (addr, pin) = match opts.mode.dealer() {
        Some((addr, pin)) if !addr.is_empty() => (addr.to_string(), pin),
        _ => return Err(Error::Config(format!("--mode malicious-client runs over a dealer only (got {}); a simulated trusted module would give the client host μ", opts.mode.name()))),
    };
    let plan = std::sync::Arc::new(Plan::new(&model, opts.cfg)?);
    let client_model = std::sync::Arc::new(Model::from_architecture(&model.header_json)?);
    let client_plan = Plan::new(&client_model, opts.cfg)?;
    let xq = client_plan.encode_input(x)?;
    let sec = crate::runtime::dealer_link(opts, &addr, pin)?;
    let sid = hush_tee::dealer::new_session_id();
    let smod = DealerModule::connect_timed(&addr, &sec, &opts.profile, opts.link.connect_timeout_flag(), &sid, ModuleRole::Sender)?.with_kinds(hush_2pc::deal::kinds());
    let cmod = DealerModule::connect_timed(&addr, &sec, &opts.profile, opts.link.connect_timeout_flag(), &sid, ModuleRole::Receiver)?.with_kinds(hush_2pc::deal::kinds());
    let copts = hush_transport::ChannelOptions { profile: opts.profile.clone(), ..Default::default() };
    let (mut a, mut b) = hush_transport::MemChannel::pair_with(copts);
    let (m2, p2) = (model.clone(), plan.clone());
    let srv = std::thread::spawn(move || -> Result<CrispCost> {
        let mut d = Dealer::new(Box::new(smod));
        let (_, c) = party_with(backend, &m2, &p2, 0, &mut a, &mut d, s, None, &mut |l| eprintln!("hush (server): {l}"))?;
        Ok(c)
    });
    let mut d = Dealer::new(Box::new(cmod));
    let cli = party_with(backend, &client_model, &client_plan, 1, &mut b, &mut d, s, Some(&xq), &mut |_| {});
    drop(b);
    let server = srv.join().map_err(|_| Error::Protocol("server thread panicked".into()))?;
    let (y, client) = cli?;
    let server = server?;
    let raw = y.ok_or_else(|| Error::Protocol("the client received no output".into()))?;
    Ok(LocalRun { logits: client_plan.decode(&raw), raw, server, client })
}
