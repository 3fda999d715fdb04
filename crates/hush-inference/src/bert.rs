//! `hush bench infer --model bert-base --seq N`: a BERT-base encoder
//! (12 layers, hidden 768, 12 heads, FFN 3072) with **random weights**, in
//! `tee` mode, both parties in this process — the shape of TAMI-MPC's
//! Table 4 BERT-base row (272 s LAN / 380 s mobile there).
//!
//! The input is the embedded sequence (seq × 768), shared between the
//! parties: token embeddings are a lookup the client does locally, so the
//! server learns the sequence length only. Per layer:
//! * Q, K, V, attention output and both FFN projections: the module-dealt
//!   linear path ([`crate::linear`], one client→server message of the
//!   input's size each) as 1×1 convolutions over the tokens, plus bias,
//!   then one batched truncation;
//! * attention: Q·Kᵀ and P·V per head as products of two secret matrices
//!   from dealt matrix triples ([`hush_2pc::transformer::matmul`]), the
//!   1/√64 folded into the truncation (3 more bits), Softmax along the keys
//!   ([`hush_2pc::transformer::softmax`]; no attention mask: all tokens are
//!   real); P·V stays untruncated (scale 2^{2f}) into the o projection,
//!   whose output (scale 2^{3f}, bias encoded there; |o| ≤ 1 613 by the
//!   bounds below, 2^{46.7} ring units, exact in the ring) is truncated
//!   once by 2f — one truncation flight fewer per layer (since
//!   2026-11-25);
//! * GeLU on the FFN's inner activation, LayerNorm after each residual
//!   (γ = 1, β = 0: random-weight runs carry no trained γ, β).
//!
//! **Timing.** The shape-only planning is timed apart (`plan_s`). By
//! default a dealing thread per party deals layer after layer, item by item,
//! beside the online phase ([`deal_layer`], [`schedule`]); `total_s` is the
//! wall time from the start of the dealing to the last output and
//! `online_s` the layers' own times, which then include the operators'
//! waits for undealt items (the record says so). Sequential
//! (`BertOpts::overlap = false`): each layer wholly dealt, then run online;
//! `total_s` is the sum of both. Per-layer and per-operator time, bytes and
//! rounds, and dealing time per kind (`deal_by_kind`) are reported.
//!
//! **Weights.** Uniform in ±0.05 (BERT's initialiser scale), one random
//! set shared by all layers (loaded into the server's module once per layer
//! id: the module work is that of twelve distinct layers). The output is
//! checked for sanity only (finite, LayerNorm-normalised rows); accuracy is
//! the operators' tests' job and the MiniLM check's ([`crate::encoder`],
//! `scripts/minilm.py`).

use crate::engine::SharedModule;
use crate::fixed::FixedConfig;
use crate::{linear, Error, Result};
use hush_2pc::deal::matrix::MatDims;
use hush_2pc::nonlinear::Proto;
use hush_2pc::share::{ArithShare, FixedPoint};
use hush_2pc::tee::Dealer;
use hush_2pc::transformer::{ctx::concat, ctx::split, ctx::DealMeter, gelu, layernorm, matmul, softmax, Bound, Ctx, Need};
use hush_primitives::{Block, Prg};
use hush_tee::linear_deal::LinearOp;
use hush_tee::{InProcessModule, Module, ModuleRole, TrustedModule};
use hush_transport::{Channel, ChannelOptions, Cost, MemChannel, NetProfile};
use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};
use std::time::Instant;

/// BERT-base dimensions.
#[derive(Clone, Copy, Debug)]
pub struct BertShape {
    pub layers: usize,
    pub hidden: usize,
    pub heads: usize,
    pub ffn: usize,
    pub seq: usize,
}

impl BertShape {
    pub fn base(seq: usize) -> Self {
        BertShape { layers: 12, hidden: 768, heads: 12, ffn: 3072, seq }
    }
}

const SERVER: u8 = 0;

/// How the benchmark runs (both default to on in `hush bench infer`).
#[derive(Clone, Copy, Debug)]
pub struct BertOpts {
    /// Deal layer l + 1 on a separate thread while layer l runs online.
    pub overlap: bool,
    /// Comparisons on the widths the public weight bound proves
    /// ([`Bounds`]); off: every comparison on the whole ring.
    pub bounded: bool,
    /// Lanes for the row-wise operators (Softmax, LayerNorm, GeLU): each
    /// runs on this many blocks of rows at once, on lanes of the one
    /// emulated link (`Layer::par`); 1 = no overlap.
    pub lanes: usize,
    /// Run the token-wise tail of each layer (o projection through the
    /// second LayerNorm) per lane without operator barriers
    /// (`Layer::tail_pipelined`); off: operator by operator.
    pub pipeline: bool,
    /// Both parties' modules on this fixed session seed (byte repeated),
    /// no seed agreement: runs that must deal the same correlations (the
    /// overlap test). None: a fresh agreed seed.
    pub module_seed: Option<u8>,
    /// Test hook: every module call after the set-up from the n-th on
    /// fails (a dealing error), at both parties.
    pub fail_deal_after: Option<u64>,
}

impl Default for BertOpts {
    fn default() -> Self {
        BertOpts { overlap: true, bounded: true, lanes: DEFAULT_LANES, pipeline: true, module_seed: None, fail_deal_after: None }
    }
}

/// Lanes of the benchmark (measured: see the README's BERT rows; 16 since
/// 2026-11-25, with the pipelined layer tail: 13.0 s instead of 13.2 s per
/// mobile layer, lan within noise).
pub const DEFAULT_LANES: usize = 16;

/// Public magnitude bounds (real units) of every compared tensor of a layer,
/// proved from public facts only: the architecture, the public weight range
/// |W|, |b| ≤ [`W_MAX`] (both parties know it; the weights stay the
/// server's), and the layer input being a LayerNorm output (γ = 1, β = 0)
/// or the first layer's input in ±1 — in both cases ‖x_t‖₂ ≤ 1.01·√H per
/// token (LayerNorm: Σ((x − μ)·r)² = H·σ²/(σ² + ε)·(1 + rsqrt error)² plus
/// 1-ulp truncations; the ±1 input: ≤ √H). A linear output entry is
/// |w·x + b| ≤ ‖w‖₂‖x‖₂ + |b| ≤ W_MAX·√n_in·‖x‖₂ + W_MAX (Cauchy–Schwarz).
/// Then:
/// * q, k, v: b₁ = W_MAX·√H·1.01·√H + W_MAX (+ 1 ulp);
/// * scores q_h·k_h/8 over 64 dims: ≤ 64·b₁²/8;
/// * attention context (P·V; P ≥ 0, rows sum to ≤ 1 + L·6·10⁻⁴): ≤ 1.08·b₁,
///   so o ≤ W_MAX·√H·√H·1.08·b₁ + W_MAX; h1 = x + o ≤ 1.01·√H + o;
/// * FFN input u (from LayerNorm(h1)): b₁; GeLU(u) ≤ |u| + 10⁻³, so the
///   FFN output ≤ W_MAX·√F·√F·(b₁ + 10⁻³) + W_MAX, h2 ≤ 1.01·√H + that.
///
/// With H = 768, F = 3072: q/k/v ≤ 38.9, scores ≤ 12 100, h1 ≤ 1 640,
/// GeLU input ≤ 38.9, h2 ≤ 6 010. The comparisons then run on 19 (GeLU),
/// 28 (Softmax) and 26 (the second LayerNorm's clip) bits instead of 64;
/// ([`hush_2pc::transformer::Ctx::relu_within`]): exact for every input
/// within the bound, so accuracy is unchanged. The first LayerNorm
/// (h1 ≤ 2^11) needs no clip at all ([`layernorm::layernorm_within`]). The operators' plaintext
/// reference checks the bounds (tests in `hush-2pc/tests/transformer.rs`).
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    pub qkv: f64,
    pub scores: f64,
    pub h1: f64,
    pub ffn_in: f64,
    pub h2: f64,
}

/// The public weight range of the random-weight benchmark.
pub const W_MAX: f64 = 0.05;

impl Bounds {
    pub fn derive(s: &BertShape, frac: u32) -> Self {
        let ulp = (-(frac as f64)).exp2();
        let (h, f) = (s.hidden as f64, s.ffn as f64);
        let xn = 1.01 * h.sqrt();
        let lin = |n_in: f64, norm: f64| W_MAX * n_in.sqrt() * norm + W_MAX + ulp;
        let qkv = lin(h, xn);
        let dh = (s.hidden / s.heads) as f64;
        let scores = dh * qkv * qkv / dh.sqrt() + ulp;
        let ctx = 1.08 * qkv;
        let h1 = xn + lin(h, h.sqrt() * ctx) + ulp;
        let ffn_in = qkv;
        let h2 = xn + lin(f, f.sqrt() * (ffn_in + 1e-3)) + ulp;
        Bounds { qkv, scores, h1, ffn_in, h2 }
    }
}

fn tpc(e: hush_2pc::Error) -> Error {
    Error::Nonlinear(e.to_string())
}

/// Per-operator meter of one party: seconds, bytes sent, rounds.
#[derive(Default, Clone, Debug)]
pub struct Meter {
    pub by_op: BTreeMap<&'static str, (f64, u64, u64)>,
}

impl Meter {
    fn add(&mut self, op: &'static str, t: f64, c: Cost) {
        let e = self.by_op.entry(op).or_default();
        e.0 += t;
        e.1 += c.bytes_sent;
        e.2 += c.rounds as u64;
    }
}

/// The linear layers' weights (server) or shapes (client).
struct Weights {
    /// (n_out, n_in, weight row-major, bias at the output's scale) per
    /// projection: q, k, v, o, ff1, ff2. The output's scale is 2f, except
    /// o's: 3f (its input, P·V, is untruncated at scale 2f).
    proj: Vec<(usize, usize, Vec<u64>, Vec<u64>)>,
}

fn random_weights(s: &BertShape, fx: &FixedConfig, server: bool) -> Weights {
    let mut p = Prg::new(Block(0xbe27));
    let h = s.hidden;
    let dims = [(h, h), (h, h), (h, h), (h, h), (s.ffn, h), (h, s.ffn)];
    let lim = (0.05 * (1u64 << fx.frac) as f64) as i64;
    let mut gen = |n: usize| -> Vec<u64> {
        if !server {
            return Vec::new();
        }
        (0..n).map(|_| fx.from_signed((p.next_u64() % (2 * lim as u64 + 1)) as i64 - lim)).collect()
    };
    let proj = dims.iter().enumerate().map(|(j, &(o, i))| (o, i, gen(o * i), gen(o).iter().map(|b| b << (if j == 3 { 2 } else { 1 } * fx.frac) & fx.mask()).collect())).collect();
    Weights { proj }
}

fn conv1x1(n_out: usize, n_in: usize, seq: usize, w: &[u64]) -> LinearOp {
    LinearOp::Conv { c_in: n_in as u32, h: 1, w: seq as u32, c_out: n_out as u32, kh: 1, kw: 1, stride: [1, 1], pads: [0; 4], weight: w.to_vec() }
}

/// Transposes a rows×cols row-major share.
fn transpose(x: &ArithShare, rows: usize, cols: usize) -> ArithShare {
    hush_2pc::transformer::matmul::transpose(x, 1, rows, cols)
}

/// One lane of a party: an operator context and its channel on the shared
/// emulated link ([`MemChannel::lanes_with`]).
pub struct Lane {
    c: Ctx,
    ch: MemChannel,
}

type LaneOp<'f> = &'f (dyn Fn(&mut Ctx, &mut dyn Channel, &ArithShare) -> hush_2pc::Result<ArithShare> + Sync);

/// One party's encoder layer, in three modes: `plan` (Ctx records, linear
/// layers return zeros), and the online run.
struct Layer<'a> {
    s: BertShape,
    /// Proven bounds for the comparisons (None: whole-ring comparisons).
    bounds: Option<Bounds>,
    fx: FixedConfig,
    party: u8,
    weights: &'a Weights,
    /// dealt linear correlations of this layer (q, k, v, o, ff1, ff2)
    lin: Vec<Option<hush_tee::linear_deal::LinearResponse>>,
    meter: Meter,
    /// Run the token-wise tail of the layer per lane ([`Layer::tail_pipelined`]).
    pipeline: bool,
}

/// One lane's per-operator seconds and costs.
type LaneMeter = BTreeMap<&'static str, (f64, Cost)>;

fn lane_timed<T>(m: &mut LaneMeter, ch: &mut dyn Channel, op: &'static str, f: impl FnOnce(&mut dyn Channel) -> Result<T>) -> Result<T> {
    let t = Instant::now();
    let c0 = ch.cost();
    let r = f(ch)?;
    let d = ch.cost() - c0;
    let e = m.entry(op).or_insert((0.0, Cost::default()));
    e.0 += t.elapsed().as_secs_f64();
    e.1.bytes_sent += d.bytes_sent;
    e.1.rounds += d.rounds;
    Ok(r)
}

/// What one lane of [`Layer::tail_pipelined`] needs (shared read-only).
struct TailEnv<'a> {
    s: BertShape,
    fx: FixedConfig,
    party: u8,
    bounds: Option<Bounds>,
    weights: &'a Weights,
    /// the dealt linear correlations of o, ff1, ff2 (None in plan mode)
    lin: [Option<&'a hush_tee::linear_deal::LinearResponse>; 3],
    plan: bool,
}

impl TailEnv<'_> {
    /// Projection `j` (3 = o, 4 = ff1, 5 = ff2) of the tokens [a, b) only:
    /// x is n_in × (b − a) hidden-major; the result n_out × (b − a) at scale
    /// 2f. A 1×1 convolution is token-wise, so the layer's one dealt
    /// correlation (B, R_C; W·B − R_C) serves every block of tokens through
    /// its own columns: the client sends F = x_C − B on the block's columns
    /// only, the server returns W·(x_S + F) + (W·B − R_C) on them. The
    /// blocks of the lanes are disjoint, so every column of B masks exactly
    /// one message, as in the whole-layer call ([`linear::client_with`]).
    fn lin_block(&self, ch: &mut dyn Channel, j: usize, x: &ArithShare, a: usize, b: usize) -> Result<ArithShare> {
        let (n_out, n_in, ref w, ref bias) = self.weights.proj[j];
        let (seq, bt) = (self.s.seq, b - a);
        let ring = x.ring;
        if self.plan {
            return Ok(ArithShare::zeros(ring, n_out * bt));
        }
        let d = self.lin[j - 3].ok_or_else(|| Error::Config("linear correlation not dealt".into()))?;
        let m = self.fx.mask();
        if x.len() != n_in * bt || b > seq {
            return Err(Error::Config("linear block of the wrong size".into()));
        }
        let y = if self.party == SERVER {
            if d.first.len() != n_out * seq {
                return Err(Error::Protocol("module: linear correlation of the wrong size".into()));
            }
            let f = linear::recv_ring(ch, &self.fx, n_in * bt, "linear layer (token block): masked client share F")?;
            let xv: Vec<u64> = x.v.iter().zip(&f).map(|(p, q)| p.wrapping_add(*q) & m).collect();
            let mut y = vec![0u64; n_out * bt];
            for (o, yo) in y.chunks_exact_mut(bt).enumerate() {
                for (i, xi) in xv.chunks_exact(bt).enumerate() {
                    let wv = w[o * n_in + i];
                    if wv != 0 {
                        yo.iter_mut().zip(xi).for_each(|(p, q)| *p = p.wrapping_add(wv.wrapping_mul(*q)));
                    }
                }
                for (t, v) in yo.iter_mut().enumerate() {
                    *v = v.wrapping_add(d.first[o * seq + a + t]).wrapping_add(bias[o]) & m;
                }
            }
            y
        } else {
            if d.first.len() != n_in * seq || d.second.len() != n_out * seq {
                return Err(Error::Protocol("module: linear masks of the wrong size".into()));
            }
            let f: Vec<u64> = (0..n_in).flat_map(|i| (0..bt).map(move |t| (i, t))).map(|(i, t)| x.v[i * bt + t].wrapping_sub(d.first[i * seq + a + t]) & m).collect();
            linear::send_ring(ch, &self.fx, &f)?;
            (0..n_out).flat_map(|o| d.second[o * seq + a..o * seq + b].iter().copied()).collect()
        };
        Ok(ArithShare::new(ring, y))
    }

    /// The layer's tail on the tokens [a, b): cm (h × seq hidden-major, the
    /// attention context) and x (seq × h token-major, the layer input) are
    /// whole; the result is rows a..b of the layer output (token-major).
    #[allow(clippy::too_many_arguments)]
    fn run(&self, c: &mut Ctx, ch: &mut dyn Channel, cm: &ArithShare, x: &ArithShare, a: usize, b: usize, m: &mut LaneMeter) -> Result<ArithShare> {
        let (h, seq, f) = (self.s.hidden, self.s.seq, self.fx.frac);
        let bt = b - a;
        let ring = x.ring;
        let inf = f64::INFINITY;
        let cb = ArithShare { ring, v: (0..h).flat_map(|i| cm.v[i * seq + a..i * seq + b].iter().copied()).collect() };
        let o = lane_timed(m, ch, "linear", |ch| self.lin_block(ch, 3, &cb, a, b))?;
        let o = lane_timed(m, ch, "truncation", |ch| c.trunc(ch, &o, 2 * f).map_err(tpc))?;
        let xb = ArithShare { ring, v: x.v[a * h..b * h].to_vec() };
        let h1 = xb.add(&transpose(&o, h, bt));
        let b1 = self.bounds.map_or(inf, |b| b.h1);
        let h1 = lane_timed(m, ch, "layernorm", |ch| layernorm::layernorm_within(c, ch, &h1, h, 1e-12, None, None, b1).map_err(tpc))?;
        let u = lane_timed(m, ch, "linear", |ch| self.lin_block(ch, 4, &transpose(&h1, bt, h), a, b))?;
        let u = lane_timed(m, ch, "truncation", |ch| c.trunc(ch, &u, f).map_err(tpc))?;
        let bu = self.bounds.map_or(inf, |b| b.ffn_in);
        let g = lane_timed(m, ch, "gelu", |ch| gelu::gelu_within(c, ch, &u, bu).map_err(tpc))?;
        let d = lane_timed(m, ch, "linear", |ch| self.lin_block(ch, 5, &g, a, b))?;
        let d = lane_timed(m, ch, "truncation", |ch| c.trunc(ch, &d, f).map_err(tpc))?;
        let h2 = h1.add(&transpose(&d, h, bt));
        let b2 = self.bounds.map_or(inf, |b| b.h2);
        lane_timed(m, ch, "layernorm", |ch| layernorm::layernorm_within(c, ch, &h2, h, 1e-12, None, None, b2).map_err(tpc))
    }
}

impl Layer<'_> {
    /// Everything after P·V is token-wise (the o projection, residual,
    /// LayerNorm, the FFN, residual, LayerNorm): each lane runs that whole
    /// chain on its own block of tokens, with no barrier between the
    /// operators. The lanes then drift apart on the shared link — one
    /// lane's bandwidth-bound GeLU flights overlap another's latency-bound
    /// LayerNorm round trips — instead of every lane waiting for the
    /// slowest at each operator. The same operators on the same values as
    /// the operator-by-operator order (each row's computation is
    /// unchanged); the linear layers run per token block on columns of the
    /// one dealt correlation ([`TailEnv::lin_block`]). Metered per
    /// operator: bytes of every lane, rounds and seconds of the lane where
    /// they are largest.
    fn tail_pipelined(&mut self, lanes: &mut [Lane], cm: &ArithShare, x: &ArithShare, plan: bool) -> Result<ArithShare> {
        let seq = self.s.seq;
        let k = lanes.len().min(seq).max(1);
        let blocks: Vec<(usize, usize)> = (0..k).map(|i| (seq * i / k, seq * (i + 1) / k)).collect();
        let lin = |j: usize| self.lin.get(j).and_then(|o| o.as_ref());
        let env = TailEnv { s: self.s, fx: self.fx, party: self.party, bounds: self.bounds, weights: self.weights, lin: [lin(3), lin(4), lin(5)], plan };
        let outs: Vec<Result<(ArithShare, LaneMeter)>> = if plan {
            let (mut unused, _peer) = MemChannel::pair();
            lanes
                .iter_mut()
                .zip(&blocks)
                .map(|(l, &(a, b))| {
                    let mut m = LaneMeter::new();
                    env.run(&mut l.c, &mut unused, cm, x, a, b, &mut m).map(|y| (y, m))
                })
                .collect()
        } else {
            let env = &env;
            std::thread::scope(|sc| {
                let hs: Vec<_> = lanes
                    .iter_mut()
                    .zip(&blocks)
                    .map(|(l, &(a, b))| {
                        sc.spawn(move || {
                            let mut m = LaneMeter::new();
                            env.run(&mut l.c, &mut l.ch, cm, x, a, b, &mut m).map(|y| (y, m))
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(Error::Config("lane thread panicked".into())))).collect()
            })
        };
        let mut v = Vec::with_capacity(x.len());
        let mut agg: BTreeMap<&'static str, (f64, Cost)> = BTreeMap::new();
        for o in outs {
            let (y, m) = o?;
            v.extend_from_slice(&y.v);
            for (op, (t, c)) in m {
                let e = agg.entry(op).or_insert((0.0, Cost::default()));
                e.0 = e.0.max(t);
                e.1.bytes_sent += c.bytes_sent;
                e.1.rounds = e.1.rounds.max(c.rounds);
            }
        }
        if !plan {
            for (op, (t, c)) in agg {
                self.meter.add(op, t, c);
            }
        }
        Ok(ArithShare { ring: x.ring, v })
    }


    /// y = W·x + b for x hidden-major (n_in × seq), at scale 2f (no truncation).
    fn linear(&mut self, ch: &mut dyn Channel, j: usize, x: &ArithShare, plan: bool) -> Result<ArithShare> {
        let (n_out, n_in, ref w, ref b) = self.weights.proj[j];
        let ring = hush_primitives::Ring::new(self.fx.bits).expect("ring");
        let seq = self.s.seq;
        if plan {
            return Ok(ArithShare::zeros(ring, n_out * seq));
        }
        let d = self.lin[j].take().ok_or_else(|| Error::Config("linear correlation not dealt".into()))?;
        let t = Instant::now();
        let c0 = ch.cost();
        let y = if self.party == SERVER {
            let op = conv1x1(n_out, n_in, seq, w);
            let mut y = linear::server_with(ch, &self.fx, d, &op, &x.v)?;
            for (o, row) in y.chunks_mut(seq).enumerate() {
                row.iter_mut().for_each(|v| *v = v.wrapping_add(b[o]) & self.fx.mask());
            }
            y
        } else {
            linear::client_with(ch, &self.fx, d, &x.v, n_out * seq)?
        };
        self.meter.add("linear", t.elapsed().as_secs_f64(), ch.cost() - c0);
        Ok(ArithShare::new(ring, y))
    }

    fn timed<T>(&mut self, ch: &mut dyn Channel, op: &'static str, plan: bool, f: impl FnOnce(&mut dyn Channel) -> Result<T>) -> Result<T> {
        let t = Instant::now();
        let c0 = ch.cost();
        let r = f(ch)?;
        if !plan {
            self.meter.add(op, t.elapsed().as_secs_f64(), ch.cost() - c0);
        }
        Ok(r)
    }

    /// A row-wise operator on `lanes`: x (rows of `unit` elements) cut into
    /// one contiguous block of rows per lane, each block on its lane's
    /// context and channel on its own thread (sequentially in plan mode),
    /// results concatenated in order. The blocks are independent (GeLU is
    /// element-wise, Softmax and LayerNorm row-wise), so the result is the
    /// operator's on x; running them at once lets one block's transmission
    /// overlap another's round trips on the shared link. Metered: bytes of
    /// every lane, rounds of the deepest lane.
    fn par(&mut self, lanes: &mut [Lane], op: &'static str, plan: bool, x: &ArithShare, unit: usize, f: LaneOp<'_>) -> Result<ArithShare> {
        let rows = x.len() / unit.max(1);
        let k = lanes.len().min(rows).max(1);
        let bounds: Vec<(usize, usize)> = (0..k).map(|i| (rows * i / k * unit, rows * (i + 1) / k * unit)).collect();
        let ring = x.ring;
        let t = Instant::now();
        let before: Vec<Cost> = lanes.iter().map(|l| l.ch.cost()).collect();
        let outs: Vec<hush_2pc::Result<ArithShare>> = if plan {
            let (mut unused, _peer) = MemChannel::pair();
            lanes.iter_mut().zip(&bounds).map(|(l, &(a, b))| f(&mut l.c, &mut unused, &ArithShare { ring, v: x.v[a..b].to_vec() })).collect()
        } else {
            std::thread::scope(|sc| {
                let hs: Vec<_> = lanes
                    .iter_mut()
                    .zip(&bounds)
                    .map(|(l, &(a, b))| {
                        let part = ArithShare { ring, v: x.v[a..b].to_vec() };
                        sc.spawn(move || f(&mut l.c, &mut l.ch, &part))
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(hush_2pc::Error::Bench("lane thread panicked".into())))).collect()
            })
        };
        let mut v = Vec::with_capacity(x.len());
        for o in outs {
            v.extend_from_slice(&o.map_err(tpc)?.v);
        }
        if !plan {
            let mut c = Cost::default();
            for (l, b) in lanes.iter().zip(&before) {
                let d = l.ch.cost() - *b;
                c.bytes_sent += d.bytes_sent;
                c.rounds = c.rounds.max(d.rounds);
            }
            self.meter.add(op, t.elapsed().as_secs_f64(), c);
        }
        Ok(ArithShare { ring, v })
    }

    /// The layer on x (token-major seq × hidden, scale f).
    fn run(&mut self, c: &mut Ctx, ch: &mut dyn Channel, lanes: &mut [Lane], x: &ArithShare, plan: bool) -> Result<ArithShare> {
        let s = self.s;
        let (h, seq, nh) = (s.hidden, s.seq, s.heads);
        let dh = h / nh;
        let f = self.fx.frac;
        let xt = transpose(x, seq, h); // hidden-major
        let q = self.linear(ch, 0, &xt, plan)?;
        let k = self.linear(ch, 1, &xt, plan)?;
        let v = self.linear(ch, 2, &xt, plan)?;
        let qkv = self.timed(ch, "truncation", plan, |ch| c.trunc(ch, &concat(&[&q, &k, &v]), f).map_err(tpc))?;
        let parts = split(&qkv, h * seq);
        let (q, k, v) = (&parts[0], &parts[1], &parts[2]);
        let ring = q.ring;
        // per head: Q_h (seq×dh) token-major, K_hᵀ (dh×seq) = rows of K, V_h (seq×dh)
        let mut qh = Vec::with_capacity(h * seq);
        let mut kt = Vec::with_capacity(h * seq);
        let mut vh = Vec::with_capacity(h * seq);
        for hd in 0..nh {
            for t in 0..seq {
                for d in 0..dh {
                    qh.push(q.v[(hd * dh + d) * seq + t]);
                }
            }
            kt.extend_from_slice(&k.v[hd * dh * seq..(hd + 1) * dh * seq]);
            for t in 0..seq {
                for d in 0..dh {
                    vh.push(v.v[(hd * dh + d) * seq + t]);
                }
            }
        }
        let (qh, kt, vh) = (ArithShare { ring, v: qh }, ArithShare { ring, v: kt }, ArithShare { ring, v: vh });
        let scores = self.timed(ch, "matmul", plan, |ch| {
            let z = c.matmul(ch, &qh, &kt, nh, MatDims { m: seq, k: dh, n: seq }).map_err(tpc)?;
            // 1/√64 = 2^−3 folded into the truncation
            c.trunc(ch, &z, f + (dh as f64).log2().round() as u32 / 2).map_err(tpc)
        })?;
        let inf = f64::INFINITY;
        let b = self.bounds;
        let bs = b.map_or(inf, |b| b.scores);
        let p = self.par(lanes, "softmax", plan, &scores, seq, &|c, ch, x| softmax::softmax_within(c, ch, x, seq, bs))?;
        // Operand bounds of P·V (proved here, refused by the operator if the
        // ring could wrap): softmax outputs ≤ 1 + its error; V's entries ≤
        // Σ|W|·|x| + |b| with |x| ≤ √H (a LayerNorm output with γ = 1, β = 0,
        // or the first layer's input in ±1) and |W|, |b| ≤ 0.05.
        let bound_v = 0.05 * h as f64 * (h as f64).sqrt() + 0.05;
        let pv = Bound::Proven { x: 1.0 + softmax::SOFTMAX_ERR_F12, y: bound_v };
        // untruncated (scale 2f): its truncation is the o projection's
        // (by 2f after it), one flight and one opening fewer
        let ctx_h = self.timed(ch, "matmul", plan, |ch| matmul::matmul_untruncated(c, ch, &p, &vh, nh, MatDims { m: seq, k: seq, n: dh }, pv).map_err(tpc))?;
        // back to hidden-major (h × seq)
        let mut cm = vec![0u64; h * seq];
        for hd in 0..nh {
            for t in 0..seq {
                for d in 0..dh {
                    cm[(hd * dh + d) * seq + t] = ctx_h.v[(hd * seq + t) * dh + d];
                }
            }
        }
        let cm = ArithShare { ring, v: cm };
        if self.pipeline {
            return self.tail_pipelined(lanes, &cm, x, plan);
        }
        let o = self.linear(ch, 3, &cm, plan)?;
        let o = self.timed(ch, "truncation", plan, |ch| c.trunc(ch, &o, 2 * f).map_err(tpc))?;
        let h1 = x.add(&transpose(&o, h, seq));
        let b1 = b.map_or(inf, |b| b.h1);
        let h1 = self.par(lanes, "layernorm", plan, &h1, h, &|c, ch, x| layernorm::layernorm_within(c, ch, x, h, 1e-12, None, None, b1))?;
        let u = self.linear(ch, 4, &transpose(&h1, seq, h), plan)?;
        let u = self.timed(ch, "truncation", plan, |ch| c.trunc(ch, &u, f).map_err(tpc))?;
        let bu = b.map_or(inf, |b| b.ffn_in);
        let g = self.par(lanes, "gelu", plan, &u, seq, &|c, ch, x| gelu::gelu_within(c, ch, x, bu))?;
        let d = self.linear(ch, 5, &g, plan)?;
        let d = self.timed(ch, "truncation", plan, |ch| c.trunc(ch, &d, f).map_err(tpc))?;
        let h2 = h1.add(&transpose(&d, h, seq));
        let b2 = b.map_or(inf, |b| b.h2);
        self.par(lanes, "layernorm", plan, &h2, h, &|c, ch, x| layernorm::layernorm_within(c, ch, x, h, 1e-12, None, None, b2))
    }
}

/// One party's result.
pub struct PartyRun {
    /// Wall time from the first dealing to the last layer's output.
    pub wall_s: f64,
    pub offline_s: Vec<f64>,
    pub online_s: Vec<f64>,
    pub online: Vec<Cost>,
    pub meter: Meter,
    pub setup_s: f64,
    pub out: Vec<u64>,
    pub module_busy_s: f64,
    /// Seconds of the shape-only planning (before the dealing starts).
    pub plan_s: f64,
    /// Dealing seconds and elements per kind, over all layers.
    pub deal_kinds: DealMeter,
}

/// A module whose calls fail from the `n`-th on (counted after the
/// session's set-up): the test hook [`BertOpts::fail_deal_after`].
struct FailingModule {
    inner: Box<dyn TrustedModule>,
    /// calls left before the failure (None: never fails)
    left: Option<u64>,
}

impl TrustedModule for FailingModule {
    fn call(&mut self, req: &hush_tee::Request) -> hush_tee::Result<hush_tee::Response> {
        if let Some(n) = self.left.as_mut() {
            if *n == 0 {
                return Err(hush_tee::Error::Refused("injected dealing failure (BertOpts::fail_deal_after)".into()));
            }
            *n -= 1;
        }
        self.inner.call(req)
    }
    fn stats(&self) -> hush_tee::ModuleStats {
        self.inner.stats()
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}

/// The order in which one layer's items are dealt: item i of every context
/// (the main one, then each lane) before item i + 1 of any — roughly the
/// order the online phase consumes them, since the lanes run side by side.
/// One fixed order for the overlapped and the sequential runs, so both use
/// the same correlations (same batch numbers) and give the same output.
fn schedule(plans: &[Vec<Need>]) -> Vec<(usize, usize)> {
    let depth = plans.iter().map(|p| p.len()).max().unwrap_or(0);
    (0..depth).flat_map(|i| plans.iter().enumerate().filter(move |(_, p)| i < p.len()).map(move |(c, _)| (c, i))).collect()
}

type Feed = std::sync::mpsc::Receiver<hush_2pc::Result<hush_2pc::transformer::ctx::Prefilled>>;

/// One layer's correlations as the dealing delivers them: the six linear
/// correlations at once (needed first), then one feed per context (main,
/// lanes) that the items arrive on one by one ([`Ctx::install_feed`]).
struct LayerFeed {
    lin: Vec<Option<hush_tee::linear_deal::LinearResponse>>,
    feeds: Vec<Feed>,
}

/// Deals layer `l`: the linear correlations (returned in the feed), then
/// every item of `plans` in [`schedule`] order, each sent on its context's
/// feed as soon as it is dealt. `deliver` hands the feed over before the
/// items are dealt (overlapped: the online phase starts on the first item;
/// sequential: it is kept until all are dealt). A dealing error is sent to
/// every context's feed (the operators waiting for an item return it) and
/// returned. Returns the layer's dealing seconds and kinds.
fn deal_layer(dctx: &mut Ctx, module: &mut SharedModule, fx: &FixedConfig, s: &BertShape, l: usize, plans: &[Vec<Need>], w: &Weights, deliver: &mut dyn FnMut(Result<LayerFeed>) -> bool) -> Result<(f64, DealMeter)> {
    let t = Instant::now();
    let mut kinds = DealMeter::new();
    let mut lin = Vec::with_capacity(6);
    let mut words = 0u64;
    for (j, (o, i, _, _)) in w.proj.iter().enumerate() {
        match linear::deal(module, fx, (6 * l + j) as u32, 0, i * s.seq, o * s.seq) {
            Ok(d) => lin.push(Some(d)),
            Err(e) => {
                let msg = format!("dealing layer {l}: {e}");
                deliver(Err(Error::Protocol(msg.clone())));
                return Err(Error::Protocol(msg));
            }
        }
        words += ((i + o) * s.seq) as u64;
    }
    kinds.insert("linear", (t.elapsed().as_secs_f64(), words));
    // every item of the layer fits in its feed: the dealing never waits
    // within a layer (at most one layer is held ahead, by `deliver`)
    let (txs, feeds): (Vec<_>, Vec<_>) = plans.iter().map(|p| std::sync::mpsc::sync_channel(p.len() + 1)).unzip();
    if !deliver(Ok(LayerFeed { lin, feeds })) {
        return Err(Error::Config("the online phase stopped".into()));
    }
    let before = dctx.deal_meter().clone();
    for (c, i) in schedule(plans) {
        let r = dctx.deal_plan(std::slice::from_ref(&plans[c][i]));
        if let Err(e) = r {
            let msg = format!("dealing layer {l}: {e}");
            // never blocks: a context whose feed is full has all its
            // items and will not wait for this one (sequential mode: the
            // receiver is this thread)
            for tx in &txs {
                let _ = tx.try_send(Err(hush_2pc::Error::Bench(msg.clone())));
            }
            return Err(Error::Nonlinear(msg));
        }
        // the receiver gone: the online phase stopped (its error is the one reported)
        if txs[c].send(r).is_err() {
            return Err(Error::Config("the online phase stopped".into()));
        }
    }
    for (k, (t1, n1)) in dctx.deal_meter() {
        let (t0, n0) = before.get(k).copied().unwrap_or_default();
        kinds.insert(k, (t1 - t0, n1 - n0));
    }
    Ok((t.elapsed().as_secs_f64(), kinds))
}

#[allow(clippy::too_many_arguments)]
fn party(s: BertShape, fx: FixedConfig, ch: &mut dyn Channel, lane_chs: Vec<MemChannel>, p: u8, x: Vec<u64>, barrier: Arc<Barrier>, opts: BertOpts) -> Result<PartyRun> {
    let t0 = Instant::now();
    let overlap = opts.overlap;
    let bounds = opts.bounded.then(|| Bounds::derive(&s, fx.frac));
    let role = if p == SERVER { ModuleRole::Sender } else { ModuleRole::Receiver };
    let inner: Box<dyn TrustedModule> = match opts.module_seed {
        Some(b) => Box::new(InProcessModule::new(Module::with_session_seed(role, &[b; 32]).with_kinds(hush_2pc::deal::kinds()))),
        None => {
            let mut m = InProcessModule::new(Module::new().with_kinds(hush_2pc::deal::kinds()));
            hush_tee::establish(&mut m, ch, role)?;
            Box::new(m)
        }
    };
    let mut setup_module = SharedModule::new(inner);
    let weights = Arc::new(random_weights(&s, &fx, p == SERVER));
    if p == SERVER {
        for l in 0..s.layers {
            for (j, (o, i, w, _)) in weights.proj.iter().enumerate() {
                linear::load(&mut setup_module, (6 * l + j) as u32, &conv1x1(*o, *i, s.seq, w))?;
            }
        }
    }
    // the failure hook counts the calls after the set-up (the dealing's)
    let module = match opts.fail_deal_after {
        Some(n) => SharedModule::new(Box::new(FailingModule { inner: Box::new(setup_module), left: Some(n) })),
        None => setup_module,
    };
    let fp = FixedPoint::new(fx.bits, fx.frac).map_err(tpc)?;
    // The online contexts never deal: their correlations come from the
    // dealing context's feeds (a stray lazy dealing would replay batch
    // numbers and be refused by the module).
    let mut c = Ctx::new(p, Proto::Tami, Dealer::new(Box::new(module.clone())), fp).map_err(tpc)?;
    let setup_s = t0.elapsed().as_secs_f64();
    let ring = fp.ring;
    let mut lanes: Vec<Lane> = Vec::with_capacity(lane_chs.len());
    for lch in lane_chs {
        lanes.push(Lane { c: Ctx::new(p, Proto::Tami, Dealer::new(Box::new(module.clone())), fp).map_err(tpc)?, ch: lch });
    }
    // Every layer has the same plans (same shapes and bounds): the main
    // context's, then one per lane. Shape-only: timed apart (`plan_s`).
    let tp = Instant::now();
    let plans: Vec<Vec<Need>> = {
        let mut probe = Layer { s, bounds, fx, party: p, weights: &weights, lin: vec![], meter: Meter::default(), pipeline: opts.pipeline };
        let zeros = ArithShare::zeros(ring, x.len());
        for l in lanes.iter_mut() {
            l.c.begin_plan().map_err(tpc)?;
        }
        let main = c.plan(|c, ch| probe.run(c, ch, &mut lanes, &zeros, true).map_err(|e| hush_2pc::Error::Bench(e.to_string()))).map_err(tpc)?;
        let mut all = vec![main];
        for l in lanes.iter_mut() {
            all.push(l.c.end_plan().map_err(tpc)?);
        }
        all
    };
    let plan_s = tp.elapsed().as_secs_f64();
    // The dealing context: the only one that deals (batch numbers in one
    // order at both parties).
    let mut dctx = Ctx::new(p, Proto::Tami, Dealer::new(Box::new(module.clone())), fp).map_err(tpc)?;
    let t_start = Instant::now();
    // Overlap: a dealing thread deals layer after layer, item by item, while
    // the online phase runs (dealing is input-independent and sends nothing
    // to the peer); the online phase takes each layer's feed as soon as its
    // linear correlations are dealt, and each operator waits only for its
    // own items. At most one layer's feed is held ahead.
    let (ftx, frx) = std::sync::mpsc::sync_channel::<Result<LayerFeed>>(1);
    let stats = Arc::new(std::sync::Mutex::new(Vec::<(f64, DealMeter)>::new()));
    let mut seq_dealer = None;
    let dealer_thread = if overlap {
        let (mut m2, plans2, w2, stats2) = (module.clone(), plans.clone(), weights.clone(), stats.clone());
        Some(std::thread::spawn(move || {
            for l in 0..s.layers {
                let r = deal_layer(&mut dctx, &mut m2, &fx, &s, l, &plans2, &w2, &mut |f| ftx.send(f).is_ok());
                match r {
                    Ok(v) => stats2.lock().map(|mut st| st.push(v)).unwrap_or(()),
                    Err(_) => break,
                }
            }
        }))
    } else {
        seq_dealer = Some((dctx, module.clone()));
        None
    };
    let mut x = ArithShare::new(ring, x);
    let mut run = PartyRun { offline_s: vec![], online_s: vec![], online: vec![], meter: Meter::default(), setup_s, plan_s, out: vec![], module_busy_s: 0.0, wall_s: 0.0, deal_kinds: DealMeter::new() };
    for l in 0..s.layers {
        let feed = if let Some((d, m)) = seq_dealer.as_mut() {
            // sequential: the whole layer dealt before its online phase
            let mut got = None;
            let (off, kinds) = deal_layer(d, m, &fx, &s, l, &plans, &weights, &mut |f| {
                got = Some(f);
                true
            })?;
            stats.lock().map_err(|_| Error::Config("dealing statistics lock".into()))?.push((off, kinds));
            got.ok_or_else(|| Error::Config("the dealing delivered nothing".into()))??
        } else {
            frx.recv().map_err(|_| Error::Config("the dealing thread stopped".into()))??
        };
        let mut layer = Layer { s, bounds, fx, party: p, weights: &weights, lin: feed.lin, meter: Meter::default(), pipeline: opts.pipeline };
        let mut feeds = feed.feeds.into_iter();
        c.install_feed(feeds.next().ok_or_else(|| Error::Config("no feed for the main context".into()))?).map_err(tpc)?;
        for lane in lanes.iter_mut() {
            lane.c.install_feed(feeds.next().ok_or_else(|| Error::Config("no feed for a lane".into()))?).map_err(tpc)?;
        }
        barrier.wait();
        let t = Instant::now();
        x = layer.run(&mut c, ch, &mut lanes, &x, false)?;
        run.online_s.push(t.elapsed().as_secs_f64());
        // this party's bytes and the layer's critical path: every operator
        // is metered (the lanes' as their deepest lane)
        let mut lc = Cost::default();
        for (_, (_, b, r)) in layer.meter.by_op.iter() {
            lc.bytes_sent += b;
            lc.rounds += *r as u32;
        }
        run.online.push(lc);
        c.lazy().map_err(tpc)?;
        for lane in lanes.iter_mut() {
            lane.c.lazy().map_err(tpc)?;
        }
        for (k, v) in layer.meter.by_op {
            let e = run.meter.by_op.entry(k).or_default();
            e.0 += v.0;
            e.1 += v.1;
            e.2 += v.2;
        }
    }
    run.wall_s = t_start.elapsed().as_secs_f64();
    drop(frx);
    if let Some(h) = dealer_thread {
        h.join().map_err(|_| Error::Config("dealing thread panicked".into()))?;
    }
    for (off, kinds) in stats.lock().map_err(|_| Error::Config("dealing statistics lock".into()))?.drain(..) {
        run.offline_s.push(off);
        for (k, (t, n)) in kinds {
            let e = run.deal_kinds.entry(k).or_default();
            e.0 += t;
            e.1 += n;
        }
    }
    run.module_busy_s = module.busy_secs();
    run.out = x.v.clone();
    Ok(run)
}

/// Runs BERT-base on a random embedded sequence; returns one JSON record.
pub fn bench_bert(seq: usize, layers: Option<usize>, net: &str, fx: FixedConfig, opts: BertOpts) -> Result<serde_json::Value> {
    bench_bert_out(seq, layers, net, fx, opts).map(|r| r.0)
}

/// [`bench_bert`] and the revealed output (token-major, real units).
/// The output shares are returned too (server's, client's).
fn bench_bert_out(seq: usize, layers: Option<usize>, net: &str, fx: FixedConfig, opts: BertOpts) -> Result<(serde_json::Value, Vec<f64>, [Vec<u64>; 2])> {
    if !(1..=512).contains(&seq) {
        return Err(Error::Config(format!("--seq {seq}: 1..=512")));
    }
    if fx.bits != 64 || fx.frac > 12 {
        return Err(Error::Config("bert-base runs at ℓ = 64 with at most 12 fraction bits (--bits 64 --frac 12)".into()));
    }
    let mut s = BertShape::base(seq);
    if let Some(l) = layers {
        s.layers = l.clamp(1, 12);
    }
    let profile = NetProfile::by_name(net).ok_or_else(|| Error::Config(format!("unknown network profile '{net}'")))?;
    // the main channel and `opts.lanes` lanes, all on one emulated link
    let mut all = MemChannel::lanes_with(ChannelOptions { profile, ..Default::default() }, 1 + opts.lanes.max(1));
    let (mut ca, mut cb) = all.remove(0);
    let (la, lb): (Vec<MemChannel>, Vec<MemChannel>) = all.into_iter().unzip();
    let n = seq * s.hidden;
    let mut p = Prg::new(Block(0x5e9));
    let ring = hush_primitives::Ring::new(64).expect("64");
    let xs: Vec<u64> = (0..n).map(|_| fx.from_signed((p.next_u64() % 8193) as i64 - 4096)).collect(); // uniform in ±1
    let s1: Vec<u64> = (0..n).map(|_| p.next_u64()).collect();
    let s0: Vec<u64> = xs.iter().zip(&s1).map(|(a, b)| ring.sub(*a, *b)).collect();
    let barrier = Arc::new(Barrier::new(2));
    let (b0, b1) = (barrier.clone(), barrier);
    let t = Instant::now();
    let h0 = std::thread::spawn(move || party(s, fx, &mut ca, la, 0, s0, b0, opts));
    let h1 = std::thread::spawn(move || party(s, fx, &mut cb, lb, 1, s1, b1, opts));
    let r0 = h0.join().map_err(|_| Error::Config("server thread panicked".into()))??;
    let r1 = h1.join().map_err(|_| Error::Config("client thread panicked".into()))??;
    let wall = t.elapsed().as_secs_f64();
    // sanity: LayerNorm'd rows have mean ≈ 0, variance ≈ 1
    let y: Vec<f64> = r0.out.iter().zip(&r1.out).map(|(a, b)| ring.to_signed(ring.add(*a, *b)) as f64 / (1u64 << fx.frac) as f64).collect();
    let mut worst = 0.0f64;
    for row in y.chunks(s.hidden) {
        let m = row.iter().sum::<f64>() / s.hidden as f64;
        let v = row.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / s.hidden as f64;
        worst = worst.max(m.abs()).max((v - 1.0).abs());
    }
    if !(worst < 0.05) {
        return Err(Error::Config(format!("bert-base output rows are not normalised (deviation {worst})")));
    }
    let per_layer: Vec<serde_json::Value> = (0..s.layers)
        .map(|l| {
            serde_json::json!({
                "layer": l,
                "offline_s": r0.offline_s[l].max(r1.offline_s[l]),
                "online_s": r0.online_s[l].max(r1.online_s[l]),
                "bytes": r0.online[l].bytes_sent + r1.online[l].bytes_sent,
                "rounds": r0.online[l].rounds.max(r1.online[l].rounds),
            })
        })
        .collect();
    let online: f64 = (0..s.layers).map(|l| r0.online_s[l].max(r1.online_s[l])).sum();
    let offline: f64 = (0..s.layers).map(|l| r0.offline_s[l].max(r1.offline_s[l])).sum();
    // Sequential: offline then online, layer by layer (the sum). Overlapped:
    // the wall time from the first dealing to the last output.
    let total = if opts.overlap { r0.wall_s.max(r1.wall_s) } else { online + offline };
    let bytes: u64 = (0..s.layers).map(|l| r0.online[l].bytes_sent + r1.online[l].bytes_sent).sum();
    let rounds: u64 = (0..s.layers).map(|l| r0.online[l].rounds.max(r1.online[l].rounds) as u64).sum();
    let by_op: serde_json::Map<String, serde_json::Value> = r0
        .meter
        .by_op
        .iter()
        .map(|(k, v)| {
            let c = r1.meter.by_op.get(k).cloned().unwrap_or_default();
            (k.to_string(), serde_json::json!({ "server_s": v.0, "bytes": v.1 + c.1, "server_bytes": v.1, "rounds": v.2 }))
        })
        .collect();
    Ok((serde_json::json!({
        "bench": "infer",
        "model": "bert-base",
        "weights": "random (uniform ±0.05), shared by all layers",
        "seq": seq,
        "layers": s.layers,
        "hidden": s.hidden,
        "mode": "tee",
        "proto": "tami",
        "net": net,
        "bits": fx.bits,
        "frac": fx.frac,
        "wall_s": online,
        "online_s": online,
        "offline_s": offline,
        "total_s": total,
        "offline_overlapped": opts.overlap,
        "online_includes_dealing_waits": opts.overlap,
        "online_note": if opts.overlap { "overlapped: online_s is from each layer's start to its output and includes the operators' waits for items the dealing thread has not dealt yet (dealing absorbed); the prefilled online time is that of a sequential run (HUSH_BERT_SEQUENTIAL=1)" } else { "sequential: each layer's items all dealt before its online phase; online_s excludes dealing" },
        "plan_s": r0.plan_s.max(r1.plan_s),
        "offline_exposed_s": (total - online).max(0.0),
        "bounded_comparisons": opts.bounded,
        "lanes": opts.lanes.max(1),
        "bounds": bounds_json(&s, fx.frac, opts.bounded),
        "process_wall_s": wall,
        "bytes": bytes,
        "online_bytes": bytes,
        "rounds": rounds,
        "setup_s": r0.setup_s.max(r1.setup_s),
        "module_busy_s_server": r0.module_busy_s,
        "module_busy_s_client": r1.module_busy_s,
        "per_layer": per_layer,
        "by_op": by_op,
        "deal_by_kind": deal_kinds_json(&r0.deal_kinds, &r1.deal_kinds),
        "output_check": format!("rows normalised within {worst:.4}"),
        "cpu": cpu_model(),
        "tee_note": "tee mode: trusted module simulated — gives no hardware protection; both parties on this machine",
    }), y, [r0.out, r1.out]))
}

/// A transformer benchmark's record: one JSON line with `--json`, else a
/// header naming the run (and the simulated module) and the record pretty.
pub fn print_record(json: bool, what: &str, r: &serde_json::Value) {
    if json {
        println!("{r}");
    } else {
        println!("hush bench infer ({what}; tee module simulated — gives no hardware protection)");
        println!("{}", serde_json::to_string_pretty(r).unwrap_or_default());
    }
}

/// Dealing per kind: each party's seconds (its dealing thread's wall time
/// in that kind, contended by the online phase when overlapped) and the
/// elements dealt (ring words for the matrix and linear kinds).
fn deal_kinds_json(a: &DealMeter, b: &DealMeter) -> serde_json::Value {
    let m: serde_json::Map<String, serde_json::Value> = a
        .iter()
        .map(|(k, (t, n))| {
            let t1 = b.get(k).map_or(0.0, |e| e.0);
            (k.to_string(), serde_json::json!({ "server_s": t, "client_s": t1, "items": n }))
        })
        .collect();
    serde_json::Value::Object(m)
}

fn bounds_json(s: &BertShape, frac: u32, on: bool) -> serde_json::Value {
    if !on {
        return serde_json::Value::Null;
    }
    let b = Bounds::derive(s, frac);
    serde_json::json!({ "qkv": b.qkv, "scores": b.scores, "h1": b.h1, "ffn_in": b.ffn_in, "h2": b.h2, "weight_max": W_MAX })
}

/// The CPU model name (`/proc/cpuinfo`), for benchmark records.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split_once(':')).map(|(_, v)| v.trim().to_string()))
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The public bounds of BERT-base (H = 768, F = 3072, f = 12), as the
    /// docs state them, and the comparison widths they give.
    #[test]
    fn bert_base_bounds_and_widths() {
        let b = Bounds::derive(&BertShape::base(128), 12);
        for (v, lo, hi) in [(b.qkv, 38.8, 39.0), (b.scores, 12_000.0, 12_200.0), (b.h1, 1_600.0, 1_700.0), (b.ffn_in, 38.8, 39.0), (b.h2, 5_950.0, 6_050.0)] {
            assert!((lo..hi).contains(&v), "{b:?}");
        }
        let c = Ctx::clear(FixedPoint::new(64, 12).unwrap());
        let u = 4096.0;
        assert_eq!(c.width_for(((b.ffn_in + 4.0) * u).ceil() + 1.0), 19);
        assert_eq!(c.width_for(2.0 * (b.scores * u).ceil() + 16.0 * u), 28);
        assert_eq!(c.width_for((b.h1 * u).ceil() + 1024.0 * u), 25);
        assert_eq!(c.width_for((b.h2 * u).ceil() + 1024.0 * u), 26);
    }

    /// One layer on a short sequence: runs end to end, rows come out
    /// LayerNorm-normalised (checked inside), the record carries its keys.
    #[test]
    fn one_bert_layer_runs_and_is_metered() {
        let r = bench_bert(8, Some(2), "none", FixedConfig::new(64, 12).unwrap(), BertOpts::default()).unwrap();
        assert_eq!(r["offline_overlapped"], true);
        assert_eq!(r["bounded_comparisons"], true);
        let plain = bench_bert(8, Some(1), "none", FixedConfig::new(64, 12).unwrap(), BertOpts { overlap: false, bounded: false, lanes: 1, pipeline: false, ..BertOpts::default() }).unwrap();
        // the bounded comparisons send fewer bytes (same operators otherwise)
        let per = |r: &serde_json::Value| r["per_layer"][0]["bytes"].as_u64().unwrap();
        assert!(per(&r) < per(&plain), "{} vs {}", per(&r), per(&plain));
        assert_eq!(r["per_layer"][0]["bytes"], r["per_layer"][1]["bytes"]);
        let r = bench_bert(8, Some(1), "none", FixedConfig::new(64, 12).unwrap(), BertOpts::default()).unwrap();
        // lanes change where blocks of rows run, not the result: 1 lane
        // against 3 (uneven blocks), same input and weights, agree up to the
        // faithful truncations' ±1 ulp noise
        let fx = FixedConfig::new(64, 12).unwrap();
        let (_, y1, _) = bench_bert_out(8, Some(2), "none", fx, BertOpts { lanes: 1, ..BertOpts::default() }).unwrap();
        let (r3, y3, _) = bench_bert_out(8, Some(2), "none", fx, BertOpts { lanes: 3, ..BertOpts::default() }).unwrap();
        assert_eq!(r3["lanes"], 3);
        let d = y1.iter().zip(&y3).fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
        assert!(d < 0.05, "lanes changed the output by {d}");
        for k in ["wall_s", "bytes", "rounds", "setup_s", "total_s", "cpu"] {
            assert!(r.get(k).is_some(), "{k}: {r}");
        }
        assert_eq!(r["per_layer"].as_array().unwrap().len(), 1);
        assert!(r["by_op"]["softmax"]["bytes"].as_u64().unwrap() > 0);
        let e = bench_bert(8, Some(1), "none", FixedConfig::new(37, 12).unwrap(), BertOpts::default()).unwrap_err();
        assert!(e.to_string().contains("64"), "{e}");
    }

    /// The overlapped run (a dealing thread deals layer after layer, item by
    /// item, while the online phase consumes them) gives bit for bit the
    /// output shares of the sequential run (each layer wholly dealt before
    /// its online phase) on the same module seed: the same correlations in
    /// the same order. Another seed gives other shares (the comparison can
    /// fail), and the same revealed output up to truncation noise.
    #[test]
    fn overlapped_dealing_matches_the_sequential_run_bit_for_bit() {
        let fx = FixedConfig::new(64, 12).unwrap();
        let seeded = BertOpts { module_seed: Some(7), lanes: 3, ..BertOpts::default() };
        let (ro, yo, so) = bench_bert_out(8, Some(2), "none", fx, seeded).unwrap();
        let (rs, ys, ss) = bench_bert_out(8, Some(2), "none", fx, BertOpts { overlap: false, ..seeded }).unwrap();
        assert_eq!(ro["offline_overlapped"], true);
        assert_eq!(rs["offline_overlapped"], false);
        assert_eq!(so, ss, "overlapped and sequential shares differ");
        assert_eq!(yo, ys);
        let (_, yx, sx) = bench_bert_out(8, Some(2), "none", fx, BertOpts { module_seed: Some(8), ..seeded }).unwrap();
        assert_ne!(sx, so, "another module seed dealt the same correlations");
        let d = yx.iter().zip(&yo).fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
        assert!(d < 0.05, "{d}");
        // the dealing is metered per kind, and the record says what online_s holds
        for k in ["linear", "relu", "trunc", "matrix"] {
            assert!(ro["deal_by_kind"][k]["items"].as_u64().unwrap() > 0, "{k}: {}", ro["deal_by_kind"]);
        }
        assert_eq!(ro["online_includes_dealing_waits"], true);
        assert!(ro["plan_s"].as_f64().unwrap() >= 0.0);
    }

    /// A dealing error — in a linear correlation (the 3rd module call) or
    /// in an item the operators wait for (the 40th) — stops the run with an
    /// error naming it, overlapped or not, with no hang.
    #[test]
    fn a_dealing_error_reaches_the_runtime() {
        let fx = FixedConfig::new(64, 12).unwrap();
        for overlap in [true, false] {
            for n in [2, 40] {
                let o = BertOpts { module_seed: Some(7), lanes: 2, overlap, fail_deal_after: Some(n), ..BertOpts::default() };
                let e = bench_bert(8, Some(2), "none", fx, o).unwrap_err().to_string();
                assert!(e.contains("injected dealing failure"), "overlap {overlap}, call {n}: {e}");
            }
        }
    }
}
