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
//!   real);
//! * GeLU on the FFN's inner activation, LayerNorm after each residual
//!   (γ = 1, β = 0: random-weight runs carry no trained γ, β).
//!
//! **Timing.** For each layer the offline phase (the layer's plan dealt
//! through [`Ctx::prefill`], and the six linear correlations) runs first,
//! then the online phase; `total_s` is the sum of both over all layers (the
//! figure the targets are stated in), `online_s` the online part.
//! Per-layer and per-operator time, bytes and rounds are reported.
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
use hush_2pc::transformer::{ctx::concat, ctx::split, gelu, layernorm, matmul, softmax, Bound, Ctx, Need};
use hush_primitives::{Block, Prg};
use hush_tee::linear_deal::LinearOp;
use hush_tee::{InProcessModule, Module, ModuleRole};
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
    /// (n_out, n_in, weight row-major, bias at scale 2f) per projection: q, k, v, o, ff1, ff2.
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
    let proj = dims.iter().map(|&(o, i)| (o, i, gen(o * i), gen(o).iter().map(|b| b << fx.frac & fx.mask()).collect())).collect();
    Weights { proj }
}

fn conv1x1(n_out: usize, n_in: usize, seq: usize, w: &[u64]) -> LinearOp {
    LinearOp::Conv { c_in: n_in as u32, h: 1, w: seq as u32, c_out: n_out as u32, kh: 1, kw: 1, stride: [1, 1], pads: [0; 4], weight: w.to_vec() }
}

/// Transposes a rows×cols row-major share.
fn transpose(x: &ArithShare, rows: usize, cols: usize) -> ArithShare {
    hush_2pc::transformer::matmul::transpose(x, 1, rows, cols)
}

/// One party's encoder layer, in three modes: `plan` (Ctx records, linear
/// layers return zeros), and the online run.
struct Layer<'a> {
    s: BertShape,
    fx: FixedConfig,
    party: u8,
    weights: &'a Weights,
    /// dealt linear correlations of this layer (q, k, v, o, ff1, ff2)
    lin: Vec<Option<hush_tee::linear_deal::LinearResponse>>,
    meter: Meter,
}

impl Layer<'_> {
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

    /// The layer on x (token-major seq × hidden, scale f).
    fn run(&mut self, c: &mut Ctx, ch: &mut dyn Channel, x: &ArithShare, plan: bool) -> Result<ArithShare> {
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
        let p = self.timed(ch, "softmax", plan, |ch| softmax::softmax(c, ch, &scores, seq).map_err(tpc))?;
        // Operand bounds of P·V (proved here, refused by the operator if the
        // ring could wrap): softmax outputs ≤ 1 + its error; V's entries ≤
        // Σ|W|·|x| + |b| with |x| ≤ √H (a LayerNorm output with γ = 1, β = 0,
        // or the first layer's input in ±1) and |W|, |b| ≤ 0.05.
        let bound_v = 0.05 * h as f64 * (h as f64).sqrt() + 0.05;
        let pv = Bound::Proven { x: 1.0 + softmax::SOFTMAX_ERR_F12, y: bound_v };
        let ctx_h = self.timed(ch, "matmul", plan, |ch| matmul::matmul(c, ch, &p, &vh, nh, MatDims { m: seq, k: seq, n: dh }, pv).map_err(tpc))?;
        // back to hidden-major (h × seq)
        let mut cm = vec![0u64; h * seq];
        for hd in 0..nh {
            for t in 0..seq {
                for d in 0..dh {
                    cm[(hd * dh + d) * seq + t] = ctx_h.v[(hd * seq + t) * dh + d];
                }
            }
        }
        let o = self.linear(ch, 3, &ArithShare { ring, v: cm }, plan)?;
        let o = self.timed(ch, "truncation", plan, |ch| c.trunc(ch, &o, f).map_err(tpc))?;
        let h1 = x.add(&transpose(&o, h, seq));
        let h1 = self.timed(ch, "layernorm", plan, |ch| layernorm::layernorm(c, ch, &h1, h, 1e-12, None, None).map_err(tpc))?;
        let u = self.linear(ch, 4, &transpose(&h1, seq, h), plan)?;
        let u = self.timed(ch, "truncation", plan, |ch| c.trunc(ch, &u, f).map_err(tpc))?;
        let g = self.timed(ch, "gelu", plan, |ch| gelu::gelu(c, ch, &u).map_err(tpc))?;
        let d = self.linear(ch, 5, &g, plan)?;
        let d = self.timed(ch, "truncation", plan, |ch| c.trunc(ch, &d, f).map_err(tpc))?;
        let h2 = h1.add(&transpose(&d, h, seq));
        self.timed(ch, "layernorm", plan, |ch| layernorm::layernorm(c, ch, &h2, h, 1e-12, None, None).map_err(tpc))
    }
}

/// One party's result.
pub struct PartyRun {
    pub offline_s: Vec<f64>,
    pub online_s: Vec<f64>,
    pub online: Vec<Cost>,
    pub meter: Meter,
    pub setup_s: f64,
    pub out: Vec<u64>,
    pub module_busy_s: f64,
}

fn party(s: BertShape, fx: FixedConfig, ch: &mut dyn Channel, p: u8, x: Vec<u64>, barrier: Arc<Barrier>) -> Result<PartyRun> {
    let t0 = Instant::now();
    let mut module = SharedModule::new(Box::new(InProcessModule::new(Module::new().with_kinds(hush_2pc::deal::kinds()))));
    hush_tee::establish(&mut module, ch, if p == SERVER { ModuleRole::Sender } else { ModuleRole::Receiver })?;
    let weights = random_weights(&s, &fx, p == SERVER);
    let fp = FixedPoint::new(fx.bits, fx.frac).map_err(tpc)?;
    let mut c = Ctx::new(p, Proto::Tami, Dealer::new(Box::new(module.clone())), fp).map_err(tpc)?;
    if p == SERVER {
        for l in 0..s.layers {
            for (j, (o, i, w, _)) in weights.proj.iter().enumerate() {
                linear::load(&mut module, (6 * l + j) as u32, &conv1x1(*o, *i, s.seq, w))?;
            }
        }
    }
    let setup_s = t0.elapsed().as_secs_f64();
    let ring = fp.ring;
    let mut x = ArithShare::new(ring, x);
    let mut run = PartyRun { offline_s: vec![], online_s: vec![], online: vec![], meter: Meter::default(), setup_s, out: vec![], module_busy_s: 0.0 };
    for l in 0..s.layers {
        let mut layer = Layer { s, fx, party: p, weights: &weights, lin: vec![], meter: Meter::default() };
        // offline: the layer's plan, and its six linear correlations
        let t = Instant::now();
        let zeros = ArithShare::zeros(ring, x.len());
        let plan: Vec<Need> = c.plan(|c, ch| layer.run(c, ch, &zeros, true).map_err(|e| hush_2pc::Error::Bench(e.to_string()))).map_err(tpc)?;
        c.prefill(&plan).map_err(tpc)?;
        for (j, (o, i, _, _)) in weights.proj.iter().enumerate() {
            layer.lin.push(Some(linear::deal(&mut module, &fx, (6 * l + j) as u32, 0, i * s.seq, o * s.seq)?));
        }
        run.offline_s.push(t.elapsed().as_secs_f64());
        barrier.wait();
        let t = Instant::now();
        let c0 = ch.cost();
        x = layer.run(&mut c, ch, &x, false)?;
        run.online_s.push(t.elapsed().as_secs_f64());
        run.online.push(ch.cost() - c0);
        c.lazy().map_err(tpc)?;
        for (k, v) in layer.meter.by_op {
            let e = run.meter.by_op.entry(k).or_default();
            e.0 += v.0;
            e.1 += v.1;
            e.2 += v.2;
        }
    }
    run.module_busy_s = module.busy_secs();
    run.out = x.v.clone();
    Ok(run)
}

/// Runs BERT-base on a random embedded sequence; returns one JSON record.
pub fn bench_bert(seq: usize, layers: Option<usize>, net: &str, fx: FixedConfig) -> Result<serde_json::Value> {
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
    let (mut ca, mut cb) = MemChannel::pair_with(ChannelOptions { profile, ..Default::default() });
    let n = seq * s.hidden;
    let mut p = Prg::new(Block(0x5e9));
    let ring = hush_primitives::Ring::new(64).expect("64");
    let xs: Vec<u64> = (0..n).map(|_| fx.from_signed((p.next_u64() % 8193) as i64 - 4096)).collect(); // uniform in ±1
    let s1: Vec<u64> = (0..n).map(|_| p.next_u64()).collect();
    let s0: Vec<u64> = xs.iter().zip(&s1).map(|(a, b)| ring.sub(*a, *b)).collect();
    let barrier = Arc::new(Barrier::new(2));
    let (b0, b1) = (barrier.clone(), barrier);
    let t = Instant::now();
    let h0 = std::thread::spawn(move || party(s, fx, &mut ca, 0, s0, b0));
    let h1 = std::thread::spawn(move || party(s, fx, &mut cb, 1, s1, b1));
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
    let bytes: u64 = (0..s.layers).map(|l| r0.online[l].bytes_sent + r1.online[l].bytes_sent).sum();
    let rounds: u64 = (0..s.layers).map(|l| r0.online[l].rounds.max(r1.online[l].rounds) as u64).sum();
    let by_op: serde_json::Map<String, serde_json::Value> = r0
        .meter
        .by_op
        .iter()
        .map(|(k, v)| {
            let c = r1.meter.by_op.get(k).cloned().unwrap_or_default();
            (k.to_string(), serde_json::json!({ "server_s": v.0, "bytes": v.1 + c.1, "rounds": v.2 }))
        })
        .collect();
    Ok(serde_json::json!({
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
        "total_s": online + offline,
        "process_wall_s": wall,
        "bytes": bytes,
        "online_bytes": bytes,
        "rounds": rounds,
        "setup_s": r0.setup_s.max(r1.setup_s),
        "module_busy_s_server": r0.module_busy_s,
        "module_busy_s_client": r1.module_busy_s,
        "per_layer": per_layer,
        "by_op": by_op,
        "output_check": format!("rows normalised within {worst:.4}"),
        "cpu": cpu_model(),
        "tee_note": "tee mode: trusted module simulated — gives no hardware protection; both parties on this machine",
    }))
}

/// `hush bench infer --model bert-base`: tee mode only for now.
pub fn bench_bert_main(a: &crate::cli::BenchInferArgs) -> Result<()> {
    if a.common.mode != "tee" {
        return Err(Error::Config(format!("bert-base: --mode {} is not implemented yet (tee only; the operators run in dealer mode, the linear path's dealer wiring is not done)", a.common.mode)));
    }
    // ℓ = 64 is needed by the transformer operators: the default 37 is raised.
    let bits = if a.fixed.bits == 37 { 64 } else { a.fixed.bits };
    let fx = FixedConfig::new(bits, a.fixed.frac)?;
    let r = bench_bert(a.seq, a.layers, &a.common.net, fx)?;
    if a.json {
        println!("{r}");
    } else {
        println!("hush bench infer (bert-base, seq {}, random weights; tee module simulated — gives no hardware protection)", a.seq);
        println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
    }
    Ok(())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split_once(':')).map(|(_, v)| v.trim().to_string()))
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One layer on a short sequence: runs end to end, rows come out
    /// LayerNorm-normalised (checked inside), the record carries its keys.
    #[test]
    fn one_bert_layer_runs_and_is_metered() {
        let r = bench_bert(8, Some(1), "none", FixedConfig::new(64, 12).unwrap()).unwrap();
        for k in ["wall_s", "bytes", "rounds", "setup_s", "total_s", "cpu"] {
            assert!(r.get(k).is_some(), "{k}: {r}");
        }
        assert_eq!(r["per_layer"].as_array().unwrap().len(), 1);
        assert!(r["by_op"]["softmax"]["bytes"].as_u64().unwrap() > 0);
        let e = bench_bert(8, Some(1), "none", FixedConfig::new(37, 12).unwrap()).unwrap_err();
        assert!(e.to_string().contains("64"), "{e}");
    }
}
