//! The secure engine: runs a [`Plan`] layer by layer over additive shares
//! in Z_2^ℓ, one instance per party, in lockstep over a [`Channel`].
//!
//! * weighted linear layers (Conv, Gemm/MatMul, unfolded BatchNorm): the
//!   module-dealt protocol of [`crate::linear`], then truncation;
//! * AveragePool: local window sums times a public constant, then truncation;
//! * Add, AddConst (server adds), Reshape, Concat: local;
//! * ReLU, truncation, and MaxPool (a pairwise tree of
//!   max(a, b) = b + ReLU(a − b), log2(window) ReLU rounds): through the
//!   [`Nonlinear`] trait, implemented by the comparison families of
//!   `hush-2pc` — [`FssNonlinear`] (`fss`, the default) and
//!   [`TamiNonlinear`] (`tami`).
//!
//! Each value is freed after its last reader, so a party holds at most
//! [`crate::model::Model::peak_live_elems`] activation elements plus one
//! layer's temporaries; nonlinear layers are processed in chunks of at
//! most `chunk` elements (keys for a chunk are dealt, used and dropped), so
//! dealt key material is bounded too. Every layer is metered: wall time,
//! time inside module calls, bytes each way, rounds, module crossings and
//! bytes, and multiply-accumulates.
//!
//! **Parties and modules.** The server (model owner) is party 0 and its
//! module has the `Sender` role; the client is party 1 (`Receiver`). One
//! module per party serves both the linear-layer kind and the comparison
//! kinds ([`SharedModule`]). Security: semi-honest, `tee` mode; the
//! modules' attestation is simulated — gives no hardware protection.

use crate::fixed::FixedConfig;
use crate::plan::{Plan, StepKind};
use crate::{linear, Error, Result};
use hush_tee::{ModuleStats, Request, Response, TrustedModule};
use hush_transport::Channel;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Party numbers (as in hush-2pc: party 0 takes the module's Sender role).
pub const SERVER: u8 = 0;
pub const CLIENT: u8 = 1;

/// Default largest number of elements per nonlinear chunk.
pub const DEFAULT_CHUNK: usize = 1 << 16;

/// One module shared by several users in one party (the linear layers and
/// the comparison dealer); counts time spent inside calls.
#[derive(Clone)]
pub struct SharedModule {
    inner: Arc<Mutex<Box<dyn TrustedModule>>>,
    busy_ns: Arc<std::sync::atomic::AtomicU64>,
}

impl SharedModule {
    pub fn new(m: Box<dyn TrustedModule>) -> Self {
        SharedModule { inner: Arc::new(Mutex::new(m)), busy_ns: Arc::new(Default::default()) }
    }
    /// Seconds spent inside module calls so far.
    pub fn busy_secs(&self) -> f64 {
        self.busy_ns.load(std::sync::atomic::Ordering::Relaxed) as f64 * 1e-9
    }
}

impl TrustedModule for SharedModule {
    fn call(&mut self, req: &Request) -> hush_tee::Result<Response> {
        let t = Instant::now();
        let r = self.inner.lock().map_err(|_| hush_tee::Error::Process("module lock poisoned".into()))?.call(req);
        self.busy_ns.fetch_add(t.elapsed().as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
        r
    }
    fn stats(&self) -> ModuleStats {
        self.inner.lock().map(|m| m.stats()).unwrap_or_default()
    }
    fn describe(&self) -> String {
        self.inner.lock().map(|m| m.describe()).unwrap_or_else(|_| "module (poisoned)".into())
    }
}

/// The nonlinear layer of one party: both parties call the same methods in
/// the same order with their shares.
pub trait Nonlinear: Send {
    /// Family name (`fss`, `tami`).
    fn family(&self) -> &'static str;
    /// ReLU in place on additive shares.
    fn relu(&mut self, ch: &mut dyn Channel, x: &mut [u64]) -> Result<()>;
    /// Signed truncation ⌊x / 2^shift⌋ in place on additive shares.
    fn truncate(&mut self, ch: &mut dyn Channel, x: &mut [u64], shift: u32) -> Result<()>;
    /// Whether [`Nonlinear::truncate`] is exact (else faithful, error ≤ 1 ulp).
    fn exact_truncation(&self) -> bool;
}

fn tpc(e: hush_2pc::Error) -> Error {
    Error::Nonlinear(e.to_string())
}

/// The `fss` family: hush-2pc's FSS gates (BCGGIKR21) with module-dealt
/// keys — ReLU spline gate and exact two-DCF truncation; general shares,
/// one simultaneous exchange per chunk.
pub struct FssNonlinear {
    dealer: hush_2pc::tee::Dealer,
    party: u8,
    bits: u32,
    chunk: usize,
}

impl FssNonlinear {
    pub fn new(module: SharedModule, party: u8, bits: u32, chunk: usize) -> Self {
        FssNonlinear { dealer: hush_2pc::tee::Dealer::new(Box::new(module)), party, bits, chunk: chunk.max(1) }
    }
    fn gate(&mut self, ch: &mut dyn Channel, x: &mut [u64], gate: hush_2pc::fss::FssGate) -> Result<()> {
        let shape = hush_2pc::fss::FssShape { bits: self.bits, gate };
        for c in x.chunks_mut(self.chunk) {
            let b = hush_2pc::fss::deal(&mut self.dealer, self.party, c.len(), shape).map_err(tpc)?;
            let out = hush_2pc::fss::online(ch, &b, Some(c), true).map_err(tpc)?.arith().map_err(tpc)?;
            c.copy_from_slice(&out.v);
        }
        Ok(())
    }
}

impl Nonlinear for FssNonlinear {
    fn family(&self) -> &'static str {
        "fss"
    }
    fn relu(&mut self, ch: &mut dyn Channel, x: &mut [u64]) -> Result<()> {
        self.gate(ch, x, hush_2pc::fss::FssGate::Relu)
    }
    fn truncate(&mut self, ch: &mut dyn Channel, x: &mut [u64], shift: u32) -> Result<()> {
        self.gate(ch, x, hush_2pc::fss::FssGate::Trunc { f: shift })
    }
    fn exact_truncation(&self) -> bool {
        true
    }
}

/// The `tami` family: hush-2pc's TAMI-MPC one-round millionaires' with
/// module-dealt tables. TAMI works on the masked form x = y + m (m dealt to
/// party 1): party 1 first sends x_1 − m (one message), then the TAMI
/// flights run. Truncation is faithful (error ≤ 1 ulp), not exact.
pub struct TamiNonlinear {
    dealer: hush_2pc::tee::Dealer,
    party: u8,
    bits: u32,
    chunk: usize,
}

impl TamiNonlinear {
    pub fn new(module: SharedModule, party: u8, bits: u32, chunk: usize) -> Self {
        TamiNonlinear { dealer: hush_2pc::tee::Dealer::new(Box::new(module)), party, bits, chunk: chunk.max(1) }
    }
    fn gate(&mut self, ch: &mut dyn Channel, x: &mut [u64], flavor: hush_2pc::tami::Flavor) -> Result<()> {
        use hush_transport::ChannelExt;
        let shape = hush_2pc::tami::TamiShape::new(self.bits, hush_2pc::tami::DEFAULT_K, hush_2pc::tami::DEFAULT_ARITY, flavor);
        let cfg = FixedConfig { bits: self.bits, frac: 1 };
        let m = cfg.mask();
        for c in x.chunks_mut(self.chunk) {
            let b = hush_2pc::tami::deal(&mut self.dealer, self.party, c.len(), shape).map_err(tpc)?;
            let out = if self.party == 0 {
                let d = linear::recv_ring(ch, &cfg, c.len(), "tami: re-masked share x_1 − m")?;
                let y: Vec<u64> = c.iter().zip(&d).map(|(a, b)| a.wrapping_add(*b) & m).collect();
                hush_2pc::tami::online(ch, &b, Some(&y)).map_err(tpc)?
            } else {
                let mm = b.dealt_input();
                let d: Vec<u64> = c.iter().zip(mm).map(|(a, b)| a.wrapping_sub(*b) & m).collect();
                ch.send_chunked(&linear::pack(&cfg, &d))?;
                hush_2pc::tami::online(ch, &b, None).map_err(tpc)?
            };
            c.copy_from_slice(&out.arith().map_err(tpc)?.v);
        }
        Ok(())
    }
}

impl Nonlinear for TamiNonlinear {
    fn family(&self) -> &'static str {
        "tami"
    }
    fn relu(&mut self, ch: &mut dyn Channel, x: &mut [u64]) -> Result<()> {
        self.gate(ch, x, hush_2pc::tami::Flavor::Relu)
    }
    fn truncate(&mut self, ch: &mut dyn Channel, x: &mut [u64], shift: u32) -> Result<()> {
        self.gate(ch, x, hush_2pc::tami::Flavor::Trunc { f: shift })
    }
    fn exact_truncation(&self) -> bool {
        false
    }
}

/// The families `--proto` accepts.
pub const FAMILIES: &[&str] = &["fss", "tami"];

/// Builds a party's nonlinear family by name.
pub fn make_family(name: &str, module: SharedModule, party: u8, bits: u32, chunk: usize) -> Result<Box<dyn Nonlinear>> {
    match name {
        "fss" => Ok(Box::new(FssNonlinear::new(module, party, bits, chunk))),
        "tami" => Ok(Box::new(TamiNonlinear::new(module, party, bits, chunk))),
        other => Err(Error::Config(format!("unknown protocol family '{other}' (choose one of {})", FAMILIES.join(", ")))),
    }
}

/// Costs of one layer, as seen by one party.
#[derive(Clone, Debug, Default)]
pub struct LayerCost {
    pub name: String,
    pub kind: &'static str,
    pub elems: usize,
    pub secs: f64,
    /// Time inside this party's module calls (dealing; included in `secs`).
    pub module_secs: f64,
    pub bytes_sent: u64,
    pub bytes_recv: u64,
    pub rounds: u32,
    pub module_crossings: u64,
    pub module_bytes: u64,
    /// Multiply-accumulates of W·x this party (server) or its module did.
    pub macs: u64,
}

impl LayerCost {
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name, "kind": self.kind, "elems": self.elems, "secs": self.secs,
            "module_secs": self.module_secs, "bytes_sent": self.bytes_sent, "bytes_recv": self.bytes_recv,
            "rounds": self.rounds, "module_crossings": self.module_crossings, "module_bytes": self.module_bytes,
            "macs": self.macs,
        })
    }
}

/// What one party needs for a secure run.
pub struct Party<'a> {
    pub party: u8,
    pub ch: &'a mut dyn Channel,
    pub module: SharedModule,
    pub nl: &'a mut dyn Nonlinear,
    /// Inference number within the session (fresh module masks per run).
    pub batch: u64,
}

/// Server only: binds every linear layer's weights to its module.
pub fn load_weights(plan: &Plan, module: &mut SharedModule) -> Result<()> {
    for st in &plan.steps {
        if let StepKind::Linear { layer, op, .. } = &st.kind {
            let op = op.as_ref().ok_or_else(|| Error::Config("server plan without weights".into()))?;
            linear::load(module, *layer, op)?;
        }
    }
    Ok(())
}

/// Runs the plan on this party's input share; returns its share of the
/// logits and the per-layer costs. `progress(done, total)` is called after
/// each layer.
pub fn run(plan: &Plan, p: &mut Party<'_>, input_share: Vec<u64>, mut progress: impl FnMut(usize, usize)) -> Result<(Vec<u64>, Vec<LayerCost>)> {
    let cfg = plan.cfg;
    let m = cfg.mask();
    if input_share.len() != plan.input_len {
        return Err(Error::Input(format!("input share of {} elements, the model expects {}", input_share.len(), plan.input_len)));
    }
    let server = p.party == SERVER;
    if server && !plan.has_weights {
        return Err(Error::Config("the server needs the model weights".into()));
    }
    let mut vals: Vec<Option<Vec<u64>>> = Vec::with_capacity(plan.steps.len() + 1);
    vals.push(Some(input_share));
    let mut costs = Vec::with_capacity(plan.steps.len());
    let total = plan.steps.len();
    for (si, st) in plan.steps.iter().enumerate() {
        let t0 = Instant::now();
        let c0 = p.ch.cost();
        let m0 = p.module.stats();
        let b0 = p.module.busy_secs();
        let get = |vals: &Vec<Option<Vec<u64>>>, i: usize| -> Result<Vec<u64>> {
            vals[i].clone().ok_or_else(|| Error::Protocol(format!("value {i} freed too early")))
        };
        let mut macs = 0u64;
        let y: Vec<u64> = match &st.kind {
            StepKind::Linear { layer, in_len: _, out_len, op, bias, macs: mc } => {
                let x = vals[st.inputs[0]].as_deref().ok_or_else(|| Error::Protocol("value freed too early".into()))?;
                let mut y = if server {
                    let op = op.as_ref().expect("server plan has weights");
                    macs = *mc;
                    let mut y = linear::server(p.ch, &mut p.module, &cfg, *layer, p.batch, op, x)?;
                    for (v, b) in y.iter_mut().zip(bias.iter()) {
                        *v = v.wrapping_add(*b) & m;
                    }
                    y
                } else {
                    linear::client(p.ch, &mut p.module, &cfg, *layer, p.batch, x, *out_len)?
                };
                p.nl.truncate(p.ch, &mut y, cfg.frac)?;
                y
            }
            StepKind::AvgPool { offs, idx, consts } => {
                let x = vals[st.inputs[0]].as_deref().ok_or_else(|| Error::Protocol("value freed too early".into()))?;
                let mut y: Vec<u64> = offs
                    .windows(2)
                    .zip(consts)
                    .map(|(w, c)| {
                        let s = idx[w[0] as usize..w[1] as usize].iter().fold(0u64, |s, &i| s.wrapping_add(x[i as usize]));
                        s.wrapping_mul(*c) & m
                    })
                    .collect();
                p.nl.truncate(p.ch, &mut y, cfg.frac)?;
                y
            }
            StepKind::AddConst { c } => {
                let mut y = get(&vals, st.inputs[0])?;
                if server {
                    for (v, k) in y.iter_mut().zip(c) {
                        *v = v.wrapping_add(*k) & m;
                    }
                }
                y
            }
            StepKind::Add => {
                let mut y = get(&vals, st.inputs[0])?;
                let b = vals[st.inputs[1]].as_deref().ok_or_else(|| Error::Protocol("value freed too early".into()))?;
                for (v, k) in y.iter_mut().zip(b) {
                    *v = v.wrapping_add(*k) & m;
                }
                y
            }
            StepKind::Relu => {
                let mut y = get(&vals, st.inputs[0])?;
                p.nl.relu(p.ch, &mut y)?;
                y
            }
            StepKind::MaxPool { offs, idx } => {
                let x = vals[st.inputs[0]].as_deref().ok_or_else(|| Error::Protocol("value freed too early".into()))?;
                let mut cand: Vec<u64> = idx.iter().map(|&i| x[i as usize]).collect();
                let mut co: Vec<u32> = offs.clone();
                loop {
                    // pairs of every window, in window order
                    let mut diffs = Vec::new();
                    let mut any = false;
                    for w in co.windows(2) {
                        let win = &cand[w[0] as usize..w[1] as usize];
                        for pr in win.chunks(2) {
                            if pr.len() == 2 {
                                diffs.push(pr[0].wrapping_sub(pr[1]) & m);
                                any = true;
                            }
                        }
                    }
                    if !any {
                        break;
                    }
                    p.nl.relu(p.ch, &mut diffs)?;
                    let mut next = Vec::with_capacity(cand.len() / 2 + co.len());
                    let mut noffs = Vec::with_capacity(co.len());
                    noffs.push(0u32);
                    let mut di = 0;
                    for w in co.windows(2) {
                        let win = &cand[w[0] as usize..w[1] as usize];
                        for pr in win.chunks(2) {
                            if pr.len() == 2 {
                                next.push(pr[1].wrapping_add(diffs[di]) & m);
                                di += 1;
                            } else {
                                next.push(pr[0]);
                            }
                        }
                        noffs.push(next.len() as u32);
                    }
                    cand = next;
                    co = noffs;
                }
                cand
            }
            StepKind::Reshape => get(&vals, st.inputs[0])?,
            StepKind::Concat { axis, shapes } => {
                let mut out = vec![0u64; st.out_len];
                let mut parts = Vec::new();
                for &i in &st.inputs {
                    parts.push(vals[i].as_deref().ok_or_else(|| Error::Protocol("value freed too early".into()))?);
                }
                let sh: Vec<&[usize]> = shapes.iter().map(|s| s.as_slice()).collect();
                crate::fixed::concat_into(&sh, *axis, &parts, &mut out);
                out
            }
        };
        if y.len() != st.out_len {
            return Err(Error::Protocol(format!("layer '{}' produced {} elements, expected {}", st.name, y.len(), st.out_len)));
        }
        vals.push(Some(y));
        // free values whose last reader was this step
        for (v, slot) in vals.iter_mut().enumerate().take(si + 1) {
            if plan.last_use[v] == si {
                if let Some(mut s) = slot.take() {
                    zeroize::Zeroize::zeroize(&mut s);
                }
            }
        }
        let c1 = p.ch.cost();
        let m1 = p.module.stats();
        let dc = c1 - c0;
        let dm = m1 - m0;
        costs.push(LayerCost {
            name: st.name.clone(),
            kind: st.kind_name(),
            elems: st.out_len,
            secs: t0.elapsed().as_secs_f64(),
            module_secs: p.module.busy_secs() - b0,
            bytes_sent: dc.bytes_sent,
            bytes_recv: dc.bytes_recv,
            rounds: dc.rounds,
            module_crossings: dm.crossings,
            module_bytes: dm.bytes_to_module + dm.bytes_from_module,
            macs,
        });
        progress(si + 1, total);
    }
    let out = vals[plan.output].take().ok_or_else(|| Error::Protocol("output freed".into()))?;
    Ok((out, costs))
}
