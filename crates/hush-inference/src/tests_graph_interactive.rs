//! The graph runtime's `interactive` preset (issue 29): Cheetah HE linear
//! layers and embeddings, every other correlation made by the two parties
//! over COTs, cf2 comparisons — no module and no dealer. Against the f64
//! interpreter and the fixed-point reference on the small graph of
//! `tests_graph.rs`; the HE-to-ring lift on random and edge values; the
//! plan's refusals; a fixed seed gives the same run.

use crate::graph_run::{party_interactive, run_clear, GraphOptions, InteractiveSetup, LinearBackend, ProviderUse, Role};
use crate::tests_graph::{graph, inputs, shapes};
use hush_2pc::share::{ArithShare, FixedPoint};
use hush_2pc::transformer::Ctx;
use hush_onnx::eval::Tensor;
use hush_onnx::graph::{GraphModel, Program};
use hush_primitives::{Block, Prg, Ring};
use hush_transport::{Channel, MemChannel};

use std::collections::HashMap;

fn fx() -> crate::fixed::FixedConfig {
    crate::fixed::FixedConfig { bits: 64, frac: 12 }
}

fn setup(seed: u64) -> InteractiveSetup {
    // IKNP keeps the test fast; the preset's default source is Ferret
    InteractiveSetup { source: "iknp".into(), seed: Some(seed), ..Default::default() }
}

type PartyOut = (Option<Vec<Tensor>>, ProviderUse, u64);

/// Both parties over an in-memory pair: the client's outputs, each side's
/// provider use and bytes sent.
fn run_both(prog: &Program, inp: &HashMap<String, Tensor>, o: &GraphOptions) -> (PartyOut, PartyOut) {
    let public = prog.public();
    let (mut a, mut b) = MemChannel::pair();
    std::thread::scope(|sc| {
        let hs = sc.spawn(|| {
            let (y, _, u) = party_interactive(Role::Server, prog, o, &mut a, &HashMap::new()).unwrap();
            (y, u, a.cost().bytes_sent)
        });
        let hc = sc.spawn(|| {
            let (y, _, u) = party_interactive(Role::Client, &public, o, &mut b, inp).unwrap();
            (y, u, b.cost().bytes_sent)
        });
        (hs.join().unwrap(), hc.join().unwrap())
    })
}

#[test]
fn interactive_graph_runs_with_no_module_and_no_dealer_within_the_bound() {
    let g = GraphModel::from_model(graph(|_, _| {})).unwrap();
    let inp = inputs();
    let prog = g.instantiate(&shapes(&inp)).unwrap();
    let o = GraphOptions::interactive(fx(), setup(7));
    o.validate(&prog, false).unwrap();
    // the Q and K projections (both on the LayerNorm's output) are one
    // stacked HE product: exercised below
    let lin: Vec<usize> = (0..prog.steps.len()).filter(|&i| matches!(prog.steps[i], hush_onnx::graph::Step::Linear { .. })).collect();
    assert_eq!(crate::graph_run::he_linear_group(&prog, &o, fx().frac, lin[0]).unwrap().0, lin[..2].to_vec());
    let ((ys, us, bs), (yc, uc, bc)) = run_both(&prog, &inp, &o);
    assert!(ys.is_none());
    let y = yc.unwrap();
    // no module was constructed and the contexts had no dealer handle: no
    // module or dealer request can have been made
    assert_eq!(us, ProviderUse::default());
    assert_eq!(uc, ProviderUse::default());
    assert!(bs > 0 && bc > 0);
    let f = g.eval_f64(&inp).unwrap();
    let c = run_clear(&prog, &inp, &o).unwrap();
    let err = |a: &Tensor, b: &Tensor| a.v.iter().zip(&b.v).fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
    assert_eq!(y[0].shape, f[0].shape);
    // the bounds of the tee preset's test (graph_runs_privately_within_the_fixed_point_bound_with_pinned_cost)
    assert!(err(&y[0], &f[0]) < 0.02, "interactive vs f64: {}", err(&y[0], &f[0]));
    assert!(err(&y[0], &c[0]) < 0.01, "interactive vs fixed-point reference: {}", err(&y[0], &c[0]));
}

/// The `silent` preset: the interactive plan with SilentFlow COTs (the
/// parties' modules expand them; simulated here). The operators' context
/// still has no module and no dealer handle — the modules live inside the
/// COT source and see only COT seeds — and the result is within the same
/// bounds.
#[test]
fn silent_graph_runs_on_silentflow_cots_with_no_module_in_the_operators() {
    let g = GraphModel::from_model(graph(|_, _| {})).unwrap();
    let inp = inputs();
    let prog = g.instantiate(&shapes(&inp)).unwrap();
    let setup = InteractiveSetup { seed: Some(5), ..InteractiveSetup::silent() };
    assert_eq!((setup.source.as_str(), setup.mode()), ("silent", "silent"));
    assert!(setup.note().contains("no hardware protection"));
    let o = GraphOptions::interactive(fx(), setup);
    o.validate(&prog, false).unwrap();
    let ((ys, us, bs), (yc, uc, bc)) = run_both(&prog, &inp, &o);
    assert!(ys.is_none());
    assert_eq!(us, ProviderUse::default());
    assert_eq!(uc, ProviderUse::default());
    assert!(bs > 0 && bc > 0);
    let y = yc.unwrap();
    let f = g.eval_f64(&inp).unwrap();
    let c = run_clear(&prog, &inp, &o).unwrap();
    let err = |a: &Tensor, b: &Tensor| a.v.iter().zip(&b.v).fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
    assert!(err(&y[0], &f[0]) < 0.02, "silent vs f64: {}", err(&y[0], &f[0]));
    assert!(err(&y[0], &c[0]) < 0.01, "silent vs fixed-point reference: {}", err(&y[0], &c[0]));
}

#[test]
fn interactive_runs_with_the_same_seed_are_identical() {
    let g = GraphModel::from_model(graph(|_, _| {})).unwrap();
    let inp = inputs();
    let prog = g.instantiate(&shapes(&inp)).unwrap();
    let o = GraphOptions::interactive(fx(), setup(11));
    let (_, (y1, _, b1)) = run_both(&prog, &inp, &o);
    let (_, (y2, _, b2)) = run_both(&prog, &inp, &o);
    let (y1, y2) = (y1.unwrap(), y2.unwrap());
    assert_eq!(b1, b2);
    assert!(y1[0].v.iter().zip(&y2[0].v).all(|(a, b)| a.to_bits() == b.to_bits()));
}

#[test]
fn interactive_plans_refuse_module_steps_and_he_outside_the_preset_by_name() {
    let g = GraphModel::from_model(graph(|_, _| {})).unwrap();
    let inp = inputs();
    let prog = g.instantiate(&shapes(&inp)).unwrap();
    let li = prog.steps.iter().position(|s| s.kind() == "linear").unwrap();
    let name = prog.slots[prog.steps[li].out()].name.clone();
    let mut per = vec![None; prog.steps.len()];
    per[li] = Some(LinearBackend::Module);
    let o = GraphOptions { per_step: Some(std::sync::Arc::new(per.clone())), ..GraphOptions::interactive(fx(), setup(1)) };
    let e = o.validate(&prog, false).unwrap_err().to_string();
    assert!(e.contains(&format!("step {li}")) && e.contains(&name) && e.contains("no module"), "{e}");
    // triples (interactive one-sided weight triples) and he mix
    per[li] = Some(LinearBackend::Triples);
    let o = GraphOptions { per_step: Some(std::sync::Arc::new(per.clone())), ..GraphOptions::interactive(fx(), setup(1)) };
    o.validate(&prog, false).unwrap();
    // the HE backend beside a module or a dealer is refused naming the step
    per[li] = Some(LinearBackend::He);
    for base in [GraphOptions::default(), GraphOptions::dealer(fx(), hush_2pc::nonlinear::Proto::Tami)] {
        let o = GraphOptions { per_step: Some(std::sync::Arc::new(per.clone())), ..base };
        let e = o.validate(&prog, false).unwrap_err().to_string();
        assert!(e.contains(&format!("step {li}")) && e.contains(&name) && e.contains("interactive preset"), "{e}");
    }
    // plan files name the backend
    let f = crate::graph_run::PlanFile::from_toml("[ops]\nlinear = \"he\"\n").unwrap();
    assert!(GraphOptions::default().with_plan_file(&prog, &f, false).is_err());
    let o = GraphOptions::interactive(fx(), setup(1)).with_plan_file(&prog, &crate::graph_run::PlanFile::from_toml("[ops]\nlinear = \"triples\"\n").unwrap(), false).unwrap();
    assert_eq!(o.backend(li), LinearBackend::Triples);
    // a weight large enough that X·W could pass 2^45 ulps is refused by the server, naming the value
    let big = g.instantiate(&shapes(&inp)).unwrap();
    let mut big = big;
    if let hush_onnx::graph::Step::Linear { w, .. } = &mut big.steps[li] {
        w.iter_mut().for_each(|v| *v *= 1e6);
    }
    let e = GraphOptions::interactive(fx(), setup(1)).validate(&big, false).unwrap_err().to_string();
    assert!(e.contains(&name) && e.contains("HE backend"), "{e}");
}

fn ctx_pair(seed: u64) -> (Ctx, Ctx, MemChannel, MemChannel) {
    let fp = FixedPoint::new(64, 12).unwrap();
    let (mut a, mut b) = MemChannel::pair();
    let sc = hush_correlations::registry::SourceConfig::named("iknp");
    let (oa, ob) = std::thread::scope(|s| {
        let ha = s.spawn(|| hush_2pc::beaver::OtSession::setup(&mut a, 0, &sc, &mut Prg::new(Block(seed as u128 * 2))).unwrap());
        let hb = s.spawn(|| hush_2pc::beaver::OtSession::setup(&mut b, 1, &sc, &mut Prg::new(Block(seed as u128 * 2 + 1))).unwrap());
        (ha.join().unwrap(), hb.join().unwrap())
    });
    (Ctx::new_interactive(0, oa, fp).unwrap(), Ctx::new_interactive(1, ob, fp).unwrap(), a, b)
}

#[test]
fn the_he_lift_extends_shares_exactly_and_costs_one_ot_per_element() {
    let l = crate::graph_he::HE_BITS;
    let lm = (1u64 << l) - 1;
    let lim = 1i64 << (l - 2);
    let mut rng = Prg::new(Block(5));
    // random values, and the edges ±(2^{ℓ−2} − 1), 0, −1, each with random shares
    let mut v: Vec<i64> = (0..200).map(|_| (rng.next_u64() as i64) % lim).collect();
    v.extend([lim - 1, -(lim - 1), 0, -1, 1]);
    let r: Vec<u64> = v.iter().map(|_| rng.next_u64() & lm).collect();
    // r's top bits at both values, as the server's
    let (y_c, r_s): (Vec<u64>, Vec<u64>) = v.iter().zip(&r).map(|(x, r)| (((*x as u64).wrapping_sub(*r)) & lm, *r)).unzip();
    let (mut c0, mut c1, mut a, mut b) = ctx_pair(3);
    let (s0, s1) = std::thread::scope(|s| {
        let h0 = s.spawn(|| crate::graph_he::lift(&mut c0, &mut a, &r_s, l).unwrap());
        let h1 = s.spawn(|| crate::graph_he::lift(&mut c1, &mut b, &y_c, l).unwrap());
        (h0.join().unwrap(), h1.join().unwrap())
    });
    let ring = Ring::new(64).unwrap();
    for i in 0..v.len() {
        assert_eq!(ring.add(s0[i], s1[i]) as i64, v[i], "element {i}");
    }
    // the shares are not the plain value at either party
    assert!(s0.iter().zip(&v).filter(|(s, x)| **s as i64 == **x).count() < 3);
    // pinned: one COT per element (the client receives) and one bit up, 64 − ℓ = 17 bits down
    // (until 2026-11-29: one COT each way and 2·64 + 1 bits each way, (11530, 11530, 6))
    assert_eq!((a.cost().bytes_sent, b.cost().bytes_sent, a.cost().rounds), LIFT_PIN, "lift bytes and rounds");
}

/// (server bytes, client bytes, rounds) of lifting 205 elements, pinned from a run.
const LIFT_PIN: (u64, u64, u32) = (4564, 8250, 4);

/// The served interactive run over loopback TCP + TLS (`hush serve --mode
/// interactive` / `hush embed --connect --mode interactive`, the server on
/// its own thread) equals the one-process run bit for bit for a fixed seed.
#[test]
fn served_interactive_run_over_tls_equals_the_one_process_run_bit_for_bit() {
    use crate::graph_serve::{graph_fixed, graph_options, run_loopback};
    use crate::runtime::{Mode, Options};
    let g = std::sync::Arc::new(GraphModel::from_model(graph(|_, _| {})).unwrap());
    let inp = inputs();
    let link = hush_transport::LinkConfig::with_identity(std::sync::Arc::new(hush_transport::Identity::generate().unwrap()), Default::default());
    assert!(link.is_tls());
    let mut opts = Options { mode: Mode::Interactive, proto: "auto".into(), cfg: graph_fixed(12).unwrap(), insecure_test_seed: Some([9; 32]), link, ..Default::default() };
    opts.resolve_family().unwrap();
    let (r, _) = run_loopback(g.clone(), &opts, &crate::graph_run::PlanChoice::Preset, &inp).unwrap();
    assert_eq!(r.mode, "interactive");
    assert_eq!(r.plan["linear"], "he");
    // the same session in one process: the server's program for the same outputs, the preset the server sent
    let prog = g.instantiate_outputs(&shapes(&inp), &g.outputs[..1]).unwrap();
    let o = graph_options(&opts, "cf2", graph_fixed(12).unwrap()).unwrap();
    assert_eq!(o.interactive.as_ref().unwrap().source, "ferret");
    let ((_, us, _), (yc, uc, _)) = run_both(&prog, &inp, &o);
    assert_eq!((us, uc), (ProviderUse::default(), ProviderUse::default()));
    let y = yc.unwrap();
    assert_eq!(r.outputs[0].shape, y[0].shape);
    assert!(r.outputs[0].v.iter().zip(&y[0].v).all(|(a, b)| a.to_bits() == b.to_bits()), "served {:?} vs one-process {:?}", r.outputs[0].v, y[0].v);
    // and the result is the fixed-point reference's within its bound
    let c = run_clear(&prog, &inp, &o).unwrap();
    assert!(y[0].v.iter().zip(&c[0].v).all(|(a, b)| (a - b).abs() < 0.01));
}

/// Both parties' HE sessions on an existing pair (the server on `a`).
fn he_pair(a: &mut MemChannel, b: &mut MemChannel, seed: u64) -> (crate::graph_he::GraphHe, crate::graph_he::GraphHe) {
    let p = crate::he_linear::DEFAULT_PARAMS;
    std::thread::scope(|s| {
        let hs = s.spawn(|| crate::graph_he::GraphHe::setup(a, true, p, Prg::new(Block(seed as u128 * 3))).unwrap());
        let hc = s.spawn(|| crate::graph_he::GraphHe::setup(b, false, p, Prg::new(Block(seed as u128 * 3 + 1))).unwrap());
        (hs.join().unwrap(), hc.join().unwrap())
    })
}

/// Random additive shares over Z_2^64 of signed values.
fn share(v: &[i64], rng: &mut Prg) -> (Vec<u64>, Vec<u64>) {
    v.iter().map(|&x| { let r = rng.next_u64(); (r, (x as u64).wrapping_sub(r)) }).unzip()
}

#[test]
fn he_secret_times_secret_matmul_is_the_exact_ring_product_with_pinned_cost() {
    let (count, m, k, n) = (2usize, 3usize, 5usize, 4usize);
    // |A·B| ≤ k·lim² = 5·2^42 < 2^45: the largest the lift takes, reached at the edges below
    let lim = 1i64 << 21;
    assert!(crate::graph_he::shared_fits(k, lim as f64 / 4096.0, lim as f64 / 4096.0, 12));
    assert!(!crate::graph_he::shared_fits(k, 2.0 * lim as f64 / 4096.0, lim as f64 / 4096.0, 12));
    let mut rng = Prg::new(Block(21));
    let mut av: Vec<i64> = (0..count * m * k).map(|_| (rng.next_u64() as i64) % lim).collect();
    let mut bv: Vec<i64> = (0..count * k * n).map(|_| (rng.next_u64() as i64) % lim).collect();
    // edges: a row of A at lim − 1 against a column of B at −(lim − 1) and at lim − 1; a zero row
    for t in 0..k {
        av[t] = lim - 1;
        bv[t * n] = -(lim - 1);
        bv[t * n + 1] = lim - 1;
        av[m * k + k + t] = 0;
    }
    let (a0, a1) = share(&av, &mut rng);
    let (b0, b1) = share(&bv, &mut rng);
    let ring = Ring::new(64).unwrap();
    let (mut c0, mut c1, mut x, mut y) = ctx_pair(13);
    let (mut h0, mut h1) = he_pair(&mut x, &mut y, 13);
    let (x0, y0) = (x.cost(), y.cost());
    let (a0, b0) = (ArithShare::new(ring, a0), ArithShare::new(ring, b0));
    let (a1, b1) = (ArithShare::new(ring, a1), ArithShare::new(ring, b1));
    let (s0, s1) = std::thread::scope(|s| {
        let hs = s.spawn(|| h0.matmul_shared(&mut c0, &mut x, &a0, &b0, count, m, k, n).unwrap());
        let hc = s.spawn(|| h1.matmul_shared(&mut c1, &mut y, &a1, &b1, count, m, k, n).unwrap());
        (hs.join().unwrap(), hc.join().unwrap())
    });
    for q in 0..count {
        for i in 0..m {
            for j in 0..n {
                let want: i64 = (0..k).map(|t| av[q * m * k + i * k + t] * bv[q * k * n + t * n + j]).sum();
                let o = q * m * n + i * n + j;
                assert_eq!(ring.add(s0.v[o], s1.v[o]) as i64, want, "product {q}, entry ({i}, {j})");
            }
        }
    }
    assert_eq!(ring.add(s0.v[0], s1.v[0]) as i64, -(k as i64) * (lim - 1) * (lim - 1));
    // neither share is the plain product
    assert!(s1.v.iter().enumerate().filter(|(o, v)| **v == ring.add(s0.v[*o], s1.v[*o])).count() < 2);
    let cost = (x.cost().bytes_sent - x0.bytes_sent, y.cost().bytes_sent - y0.bytes_sent, x.cost().rounds - x0.rounds);
    assert_eq!(cost, HE_MATMUL_PIN, "HE matmul bytes and rounds");
}

/// (server bytes, client bytes, rounds) of two 3×5·5×4 HE products with their lift, pinned from a run.
const HE_MATMUL_PIN: (u64, u64, u32) = (258479, 821315, 9);

/// The small graph's two secret × secret MatMuls forced onto HE (the plan's
/// per-step entry) and onto OT triples: both within the reference's bound,
/// and an entry the ring cannot hold is refused naming the step.
#[test]
fn interactive_matmul_on_he_and_on_triples_agree_with_the_reference() {
    let g = GraphModel::from_model(graph(|_, _| {})).unwrap();
    let inp = inputs();
    let prog = g.instantiate(&shapes(&inp)).unwrap();
    let mms: Vec<usize> = prog.steps.iter().enumerate().filter(|(_, s)| s.kind() == "matmul").map(|(i, _)| i).collect();
    assert!(!mms.is_empty());
    let c = run_clear(&prog, &inp, &GraphOptions::interactive(fx(), setup(3))).unwrap();
    let err = |a: &Tensor, b: &Tensor| a.v.iter().zip(&b.v).fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
    let mut bytes = Vec::new();
    for be in [LinearBackend::He, LinearBackend::Triples] {
        let mut per = vec![None; prog.steps.len()];
        mms.iter().for_each(|&i| per[i] = Some(be));
        let o = GraphOptions { per_step: Some(std::sync::Arc::new(per)), ..GraphOptions::interactive(fx(), setup(3)) };
        o.validate(&prog, false).unwrap();
        let ((_, us, bs), (yc, uc, bc)) = run_both(&prog, &inp, &o);
        assert_eq!((us, uc), (ProviderUse::default(), ProviderUse::default()));
        let y = yc.unwrap();
        assert!(err(&y[0], &c[0]) < 0.01, "{be:?} vs fixed-point reference: {}", err(&y[0], &c[0]));
        bytes.push(bs + bc);
    }
    // the two backends really differ on the wire
    assert_ne!(bytes[0], bytes[1]);
    // proven bounds beyond the HE ring (still true: only raised, the operands'
    // and the product's): the wide product (graph_he::pre_shift_bounded,
    // GraphHe::matmul_shared_wide) is exact
    let mut wide = prog.clone();
    for &i in &mms {
        if let hush_onnx::graph::Step::MatMul { a, b, k, out, .. } = wide.steps[i].clone() {
            wide.slots[a].bound = wide.slots[a].bound.max(1.0) * 128.0;
            wide.slots[b].bound = wide.slots[b].bound.max(1.0) * 128.0;
            wide.slots[out].bound = k as f64 * wide.slots[a].bound * wide.slots[b].bound;
        }
    }
    let shifted: Vec<(u32, u32)> = mms.iter().map(|&i| match &wide.steps[i] {
        hush_onnx::graph::Step::MatMul { a, b, k, out, .. } => crate::graph_he::pre_shift_bounded(*k, wide.slots[*a].bound, wide.slots[*b].bound, wide.slots[*out].bound, 12).unwrap(),
        _ => unreachable!(),
    }).collect();
    assert!(shifted.iter().any(|(da, db)| da + db > 1), "{shifted:?}");
    let mut per = vec![None; prog.steps.len()];
    mms.iter().for_each(|&i| per[i] = Some(LinearBackend::He));
    let o = GraphOptions { per_step: Some(std::sync::Arc::new(per)), ..GraphOptions::interactive(fx(), setup(3)) };
    let cw = run_clear(&wide, &inp, &o).unwrap();
    let (_, (yw, _, _)) = run_both(&wide, &inp, &o);
    let yw = yw.unwrap();
    // exact: the wide product loses nothing, so the plain reference is the bound
    assert!(cw[0].v.iter().zip(&c[0].v).all(|(a, b)| a.to_bits() == b.to_bits()));
    assert!(err(&yw[0], &c[0]) < 0.01, "wide HE product vs the reference: {}", err(&yw[0], &c[0]));
    // linear layers whose public output bound is beyond the HE ring: the wide HE
    // product (graph_he::linear_shift, GraphHe::apply_wide) is exact too
    let mut wl = prog.clone();
    let mut shifts = Vec::new();
    for st in &prog.steps {
        if let hush_onnx::graph::Step::Linear { x, out, .. } = st {
            wl.slots[*out].bound = wl.slots[*out].bound.max(1.0) * (22f64).exp2();
            shifts.push(crate::graph_he::linear_shift(wl.slots[*x].bound, wl.slots[*out].bound, 12).unwrap());
        }
    }
    assert!(!shifts.is_empty() && shifts.iter().all(|d| *d > 0), "{shifts:?}");
    let o = GraphOptions::interactive(fx(), setup(4));
    o.validate(&wl, false).unwrap();
    let (_, (yl, _, _)) = run_both(&wl, &inp, &o);
    let yl = yl.unwrap();
    assert!(err(&yl[0], &c[0]) < 0.01, "wide HE linear layers vs the reference: {}", err(&yl[0], &c[0]));
    // a bound beyond the HE ring with a forced HE entry is refused by name
    let mut big = prog.clone();
    if let hush_onnx::graph::Step::MatMul { a, out, .. } = &big.steps[mms[0]] {
        let (a, out) = (*a, *out);
        big.slots[a].bound = 1e15;
        big.slots[out].bound = 1e15;
    }
    let mut per = vec![None; prog.steps.len()];
    per[mms[0]] = Some(LinearBackend::He);
    let o = GraphOptions { per_step: Some(std::sync::Arc::new(per)), ..GraphOptions::interactive(fx(), setup(3)) };
    let e = o.validate(&big, false).unwrap_err().to_string();
    assert!(e.contains(&format!("step {}", mms[0])) && e.contains("HE backend"), "{e}");
}

/// A channel that alters one message this end sends (counted among the
/// messages of at least `min_len` bytes): every byte set to 0xFF, or the
/// last byte cut.
struct Deviate<C: Channel> {
    inner: C,
    min_len: usize,
    target: usize,
    seen: usize,
    cut: bool,
}

impl<C: Channel> Channel for Deviate<C> {
    fn send(&mut self, p: &[u8]) -> hush_transport::Result<()> {
        if p.len() >= self.min_len {
            self.seen += 1;
            if self.seen == self.target + 1 {
                return if self.cut { self.inner.send(&p[..p.len() - 1]) } else { self.inner.send(&vec![0xFF; p.len()]) };
            }
        }
        self.inner.send(p)
    }
    fn recv(&mut self) -> hush_transport::Result<Vec<u8>> {
        self.inner.recv()
    }
    fn cost(&self) -> hush_transport::Cost {
        self.inner.cost()
    }
    fn max_frame(&self) -> usize {
        self.inner.max_frame()
    }
    fn set_timeout(&mut self, t: std::time::Duration) {
        self.inner.set_timeout(t)
    }
}

/// A peer that deviates in the HE provider or the lift: a malformed
/// ciphertext (residues beyond the primes), a message one byte short, a
/// closed link and a silent peer each end the honest party's call with a
/// clear error, never a panic or a hang.
#[test]
fn a_deviating_peer_in_the_he_provider_or_the_lift_gets_a_clear_error() {
    let ring = Ring::new(64).unwrap();
    let (k, m, n) = (4usize, 3usize, 2usize);
    let xt = ArithShare::new(ring, (0..(k * m) as u64).map(|i| i * 977).collect());
    let wt: Vec<u64> = (0..k * n).map(|i| i as u64 + 1).collect();
    // (who deviates, cut or 0xFF, which large message): the client's public key,
    // the client's ciphertexts, the server's response
    for (client_deviates, cut, target, want) in [(true, false, 0usize, "HE setup"), (true, false, 1, "HE linear layer"), (true, true, 1, "HE linear layer"), (false, true, 0, "HE linear layer")] {
        let (mut c0, mut c1, a, b) = ctx_pair(17);
        let (xt, wt) = (&xt, &wt);
        let (ra, rb) = std::thread::scope(|s| {
            let ha = s.spawn(move || {
                let mut ch: Box<dyn Channel> = if client_deviates { Box::new(a) } else { Box::new(Deviate { inner: a, min_len: 4096, target, seen: 0, cut }) };
                let mut he = crate::graph_he::GraphHe::setup(&mut *ch, true, crate::he_linear::DEFAULT_PARAMS, Prg::new(Block(1)))?;
                he.apply(&mut c0, &mut *ch, xt, wt, k, m, n).map(|_| ())
            });
            let hb = s.spawn(move || {
                let mut ch: Box<dyn Channel> = if client_deviates { Box::new(Deviate { inner: b, min_len: 4096, target, seen: 0, cut }) } else { Box::new(b) };
                let mut he = crate::graph_he::GraphHe::setup(&mut *ch, false, crate::he_linear::DEFAULT_PARAMS, Prg::new(Block(2)))?;
                he.apply(&mut c1, &mut *ch, &ArithShare::new(ring, vec![5; k * m]), &[], k, m, n).map(|_| ())
            });
            (ha.join().unwrap(), hb.join().unwrap())
        });
        let honest = if client_deviates { ra } else { rb };
        let e = honest.unwrap_err().to_string();
        assert!(e.contains(want), "deviation (client {client_deviates}, cut {cut}, message {target}): {e}");
    }
    // the lift: a correction one byte short
    let (mut c0, mut c1, a, b) = ctx_pair(19);
    let y: Vec<u64> = (0..50).map(|i| i * 12345).collect();
    let (ra, _rb) = std::thread::scope(|s| {
        let ha = s.spawn(|| {
            let mut a = a;
            crate::graph_he::lift(&mut c0, &mut a, &y, crate::graph_he::HE_BITS)
        });
        let hb = s.spawn(|| {
            let mut ch = Deviate { inner: b, min_len: 1, target: 1, seen: 0, cut: true };
            crate::graph_he::lift(&mut c1, &mut ch, &y, crate::graph_he::HE_BITS)
        });
        (ha.join().unwrap(), hb.join().unwrap())
    });
    let e = ra.unwrap_err().to_string();
    assert!(e.contains("HE lift"), "{e}");
    // a silent peer: the receive timeout ends the call with an error naming it
    let (_c0, mut c1, mut a, mut b) = ctx_pair(23);
    let (_h0, mut h1) = he_pair(&mut a, &mut b, 23);
    b.set_timeout(std::time::Duration::from_millis(300));
    let t = std::time::Instant::now();
    let e = h1.apply(&mut c1, &mut b, &ArithShare::new(ring, vec![1; k * m]), &[], k, m, n).unwrap_err().to_string();
    assert!(e.to_lowercase().contains("time"), "{e}");
    assert!(t.elapsed() < std::time::Duration::from_secs(20));
    // a peer that closes the link
    drop(a);
    let e = h1.apply(&mut c1, &mut b, &ArithShare::new(ring, vec![1; k * m]), &[], k, m, n).unwrap_err().to_string();
    assert!(!e.is_empty());
}

/// Prints the proven operand bounds of a model's secret × secret MatMuls
/// and whether each fits the HE ring (`HUSH_BOUNDS_MODEL`, seq 128; a tool,
/// not a check).
#[test]
#[ignore]
fn print_matmul_bounds_of_a_model() {
    let Ok(path) = std::env::var("HUSH_BOUNDS_MODEL") else { return };
    let frac: u32 = std::env::var("HUSH_BOUNDS_FRAC").ok().and_then(|v| v.parse().ok()).unwrap_or(12);
    let g = GraphModel::from_file(std::path::Path::new(&path)).unwrap();
    let shapes: HashMap<String, Vec<usize>> = g.inputs.iter().map(|i| (i.name.clone(), vec![1, 128])).collect();
    let p = g.instantiate(&shapes).unwrap();
    for (i, st) in p.steps.iter().enumerate() {
        if let hush_onnx::graph::Step::MatMul { a, b, count, m, k, n, out } = st {
            let (bx, by, bo) = (p.slots[*a].bound, p.slots[*b].bound, p.slots[*out].bound);
            println!(
                "step {i} {count}×{m}×{k}×{n}: bounds {bx:.3e} {by:.3e} → k·|A|·|B| 2^{:.1} ulps; product bound {bo:.3e} → 2^{:.1} ulps; split {:?}",
                (*k as f64 * bx * by).log2() + 2.0 * frac as f64,
                bo.log2() + 2.0 * frac as f64,
                crate::graph_he::pre_shift_bounded(*k, bx, by, bo, frac)
            );
        }
        if let hush_onnx::graph::Step::Linear { x, n_in, n_out, w, .. } = st {
            let (bx, bo) = (p.slots[*x].bound, p.slots[st.out()].bound);
            let col = (0..*n_out).map(|j| (0..*n_in).map(|t| w[t * n_out + j].abs()).sum::<f64>()).fold(0.0f64, f64::max);
            println!(
                "step {i} linear {n_in}→{n_out} '{}': input bound {bx:.3e}, output bound {bo:.3e} → 2^{:.1} ulps (weights: 2^{:.1}), shift {:?}",
                p.slots[st.out()].name,
                bo.log2() + 2.0 * frac as f64,
                (bx * col).log2() + 2.0 * frac as f64,
                crate::graph_he::linear_shift(bx, bo, frac)
            );
        }
    }
}

/// A served interactive session whose client deviates (one of its large
/// messages — COT set-up, public key, ciphertexts — cut short; an altered
/// message of the right length can pass unnoticed in these semi-honest
/// protocols, see the HE-level test for the malformed ciphertexts that are
/// caught) fails with an error, and the server keeps serving: an honest client's session
/// afterwards runs and matches the reference.
#[test]
fn served_interactive_session_survives_a_deviating_client() {
    use crate::graph_serve::{graph_fixed, run_remote_on, serve_graph};
    use crate::runtime::{Mode, Options};
    let g = std::sync::Arc::new(GraphModel::from_model(graph(|_, _| {})).unwrap());
    let inp = inputs();
    let mut opts = Options { mode: Mode::Interactive, proto: "auto".into(), cfg: graph_fixed(12).unwrap(), insecure_test_seed: Some([5; 32]), ..Default::default() };
    opts.resolve_family().unwrap();
    let h = serve_graph(g.clone(), "127.0.0.1:0", opts.clone(), crate::graph_run::PlanChoice::Preset, std::sync::Arc::new(|_| {})).unwrap();
    let addr = h.addr.to_string();
    let plan = crate::graph_run::PlanChoice::Preset;
    for (target, cut) in [(0usize, true), (2, true), (5, true)] {
        let ch = hush_transport::TcpChannel::connect(addr.as_str(), Default::default()).unwrap();
        let mut d = Deviate { inner: ch, min_len: 4096, target, seen: 0, cut };
        d.set_timeout(std::time::Duration::from_secs(20));
        let r = run_remote_on(&mut d, &opts, &plan, &inp, &[]);
        assert!(r.is_err(), "deviation {target}/{cut} went unnoticed");
    }
    let mut ch = hush_transport::TcpChannel::connect(addr.as_str(), Default::default()).unwrap();
    let r = run_remote_on(&mut ch, &opts, &plan, &inp, &[]).unwrap();
    let prog = g.instantiate_outputs(&shapes(&inp), &g.outputs[..1]).unwrap();
    let o = crate::graph_serve::graph_options(&opts, "cf2", graph_fixed(12).unwrap()).unwrap();
    let c = run_clear(&prog, &inp, &o).unwrap();
    assert!(r.outputs[0].v.iter().zip(&c[0].v).all(|(a, b)| (a - b).abs() < 0.01));
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(h.sessions_failed.load(std::sync::atomic::Ordering::SeqCst) >= 3);
    assert!(h.sessions_ok.load(std::sync::atomic::Ordering::SeqCst) >= 1);
    h.shutdown();
}

/// The P·V bound's premise (`hush_onnx::graph::softmax_row_abs_sum`) on the
/// private Softmax itself, and the private P·V against the bound the
/// lowering gives it, at the edge: rows of 128 at the coarsest fraction
/// the graph runtime runs (f = 8, where each entry's last truncation is
/// largest) and at f = 12, in interactive mode (table exp, per-row
/// reciprocal) and in tee mode (the dealt-correlation path the dealer
/// preset runs too). Rows built to push Σ_j |p̃_j| up: all equal (128
/// truncated entries of 1/128), one dominant entry (the rest near 0,
/// where a truncation could go negative), entries across the clip and
/// across exp's table splits, random. V (k × rows) has column c at ±B
/// with the signs of row c of p̃ — the worst V for that row — so
/// (P·V)_cc = B·Σ_j |p̃_cj|, the largest any V within B allows. A left
/// operand of entries ≤ 1 that is not a Softmax row (all ones) breaks the
/// inequality: the premise is what the bound rests on.
#[test]
fn private_softmax_rows_and_pv_stay_within_the_pv_bound_at_the_edge() {
    use hush_2pc::deal::matrix::MatDims;
    use hush_2pc::nonlinear::Proto;
    use hush_2pc::transformer::{matmul, softmax, Bound};
    use hush_onnx::graph::softmax_row_abs_sum;
    let k = 128;
    let mut x: Vec<f64> = vec![0.0; k];
    x.extend((0..k).map(|j| if j == 5 { 8.0 } else { -8.0 }));
    x.extend((0..k).map(|j| -8.0 + 16.0 * j as f64 / k as f64));
    x.extend((0..k).map(|j| if j % 2 == 0 { 8.0 } else { 8.0 - 16.0 + (j as f64) / 1024.0 }));
    x.extend((0..k).map(|j| ((j * 37 % 101) as f64 / 101.0 - 0.5) * 16.0));
    x.extend((0..k).map(|j| if j < 64 { 8.0 - (j as f64) / 4096.0 } else { 7.9 }));
    let rows = x.len() / k;
    let big = 4096.0; // |V| ≤ B (BERT-base's V bound)
    let bound = (softmax_row_abs_sum(k) * big + 1.0 / 32.0).log2().ceil().exp2();
    // the premise fails for a non-Softmax operand with the same entry bound
    assert!(k as f64 > softmax_row_abs_sum(k) * 4.0);
    for frac in [8u32, 12] {
        let fp = FixedPoint::new(64, frac).unwrap();
        let ring = fp.ring;
        let xs: Vec<u64> = x.iter().map(|v| fp.encode(*v)).collect();
        for tee in [false, true] {
            let mut prg = Prg::new(Block(frac as u128 * 10 + tee as u128));
            let (s0, s1) = hush_2pc::share::share_arith(ring, &xs, &mut prg);
            let (mut a, mut b) = MemChannel::pair();
            let mk = |p: u8, ch: &mut MemChannel| -> Ctx {
                if tee {
                    let mut m = crate::engine::SharedModule::new(Box::new(hush_tee::InProcessModule::new(hush_tee::Module::new().with_kinds(hush_2pc::deal::kinds()))));
                    hush_tee::establish(&mut m, ch, if p == 0 { hush_tee::ModuleRole::Sender } else { hush_tee::ModuleRole::Receiver }).unwrap();
                    Ctx::new(p, Proto::Tami, hush_2pc::tee::Dealer::new(Box::new(m)), fp).unwrap()
                } else {
                    let sc = hush_correlations::registry::SourceConfig::named("iknp");
                    let ot = hush_2pc::beaver::OtSession::setup(ch, p, &sc, &mut Prg::new(Block(40 + p as u128))).unwrap();
                    Ctx::new_interactive(p, ot, fp).unwrap()
                }
            };
            // phase 1: the private softmax (bounded inputs, as the graph runs it)
            let run = |p: u8, ch: &mut MemChannel, s: &ArithShare| {
                let mut c = mk(p, ch);
                let y = softmax::softmax_within(&mut c, ch, s, k, 8.0).unwrap();
                (c, y)
            };
            let ((mut c0, p0), (mut c1, p1)) = std::thread::scope(|sc| {
                let h0 = sc.spawn(|| run(0, &mut a, &s0));
                let h1 = sc.spawn(|| run(1, &mut b, &s1));
                (h0.join().unwrap(), h1.join().unwrap())
            });
            let pt: Vec<f64> = p0.v.iter().zip(&p1.v).map(|(u, v)| fp.decode(ring.add(*u, *v))).collect();
            for (r, row) in pt.chunks(k).enumerate() {
                let s: f64 = row.iter().map(|v| v.abs()).sum();
                assert!(s <= softmax_row_abs_sum(k), "f = {frac}, tee {tee}, row {r}: Σ|p̃| = {s}");
                assert!((s - 1.0).abs() < 0.1, "f = {frac}, row {r}: Σ|p̃| = {s} (the softmax is wrong)");
            }
            // phase 2: P·V privately with the worst V, against the slot bound
            let v: Vec<f64> = (0..k).flat_map(|j| (0..rows).map(|c| if pt[c * k + j] < 0.0 { -big } else { big }).collect::<Vec<_>>()).collect();
            let vs: Vec<u64> = v.iter().map(|t| fp.encode(*t)).collect();
            let (v0, v1) = hush_2pc::share::share_arith(ring, &vs, &mut prg);
            let d = MatDims { m: rows, k, n: rows };
            let bd = Bound::Proven { x: 2.0, y: big };
            let (o0, o1) = std::thread::scope(|sc| {
                let h0 = sc.spawn(|| matmul::matmul(&mut c0, &mut a, &p0, &v0, 1, d, bd).unwrap());
                let h1 = sc.spawn(|| matmul::matmul(&mut c1, &mut b, &p1, &v1, 1, d, bd).unwrap());
                (h0.join().unwrap(), h1.join().unwrap())
            });
            let o: Vec<f64> = o0.v.iter().zip(&o1.v).map(|(u, w)| fp.decode(ring.add(*u, *w))).collect();
            for c in 0..rows {
                let want: f64 = (0..k).map(|j| pt[c * k + j].abs()).sum::<f64>() * big;
                let got = o[c * rows + c];
                assert!((got - want).abs() < 1.0, "f = {frac}, tee {tee}, row {c}: P·V {got} against {want}");
                assert!(o.iter().all(|t| t.abs() <= bound), "f = {frac}, tee {tee}: a P·V entry beyond the bound {bound}");
            }
        }
    }
}

/// Q·Kᵀ's Cauchy–Schwarz bound (`hush_onnx::graph`'s `matmul_bound`) on
/// the private interactive run, with rows built to attain it: embedding
/// rows of full variance (so each LayerNorm row has ‖y‖₂ ≈ √64, the
/// row maximum with γ = 1, β = 0), and the same projection for Q and K,
/// W = 112·(a signed permutation), so σ(W) is attained by every row and
/// q_i = k_i: (Q·Kᵀ)_ii = ‖q_i‖₂² = 112²·‖y_i‖₂², the bound up to its
/// margins. The slot bound is far below k·|Q|·|K| (which would need the
/// wide product), the product runs as one plain HE product
/// (`graph_he::pre_shift_bounded`), its diagonal reaches more than half the
/// (power-of-two) slot bound and stays within it, and the output matches
/// the fixed-point reference and the f64 graph. A bound too small by a
/// factor of two would fail the slot-bound check here; one too small for
/// the HE ring would make the lift wrap and miss the reference by ≥ 2^21.
#[test]
fn private_qk_stays_within_the_cauchy_schwarz_bound_for_aligned_rows() {
    use crate::tests_graph::{attr_i, attr_is, f32s, input, node, rnd};
    use hush_onnx::graph::Step;
    use hush_onnx::proto::*;
    const S: usize = 8;
    const H: usize = 64;
    let scale = 112.0f32;
    // W = scale·P with P a signed permutation (column j takes row 5j+3 mod H)
    let mut w = vec![0.0f32; H * H];
    for j in 0..H {
        w[((5 * j + 3) % H) * H + j] = if j % 3 == 0 { -scale } else { scale };
    }
    // embedding rows of ±1-ish entries (variance ≫ ε)
    let emb: Vec<f32> = rnd(S * H, 31, 1.0).iter().map(|v| if *v >= 0.0 { 0.5 + v } else { v - 0.5 }).collect();
    let inits = vec![f32s("emb", &[S as i64, H as i64], emb), f32s("ln.g", &[H as i64], vec![1.0; H]), f32s("ln.b", &[H as i64], vec![0.0; H]), f32s("w", &[H as i64, H as i64], w)];
    let nodes = vec![
        node("Gather", &["emb", "input_ids"], "e", vec![]),
        node("LayerNormalization", &["e", "ln.g", "ln.b"], "l", vec![attr_i("axis", -1), attr_f_eps()]),
        node("MatMul", &["l", "w"], "q", vec![]),
        node("MatMul", &["l", "w"], "k", vec![]),
        node("Transpose", &["k"], "kt", vec![attr_is("perm", &[0, 2, 1])]),
        node("MatMul", &["q", "kt"], "s", vec![]),
    ];
    let m = ModelProto {
        ir_version: Some(8),
        graph: Some(GraphProto { node: nodes, name: Some("qk".into()), initializer: inits, input: vec![input("input_ids")], output: vec![ValueInfoProto { name: Some("s".into()), r#type: None }] }),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        metadata_props: vec![],
    };
    let g = GraphModel::from_model(m).unwrap();
    let inp = HashMap::from([("input_ids".to_string(), Tensor::ints(vec![1, S], (0..S).map(|t| t as f64).collect()))]);
    let prog = g.instantiate(&shapes(&inp)).unwrap();
    let (mi, (ba, bb, bo, k)) = prog
        .steps
        .iter()
        .enumerate()
        .find_map(|(i, st)| match st {
            Step::MatMul { out, a, b, k, .. } => Some((i, (prog.slots[*a].bound, prog.slots[*b].bound, prog.slots[*out].bound, *k))),
            _ => None,
        })
        .unwrap();
    assert_eq!(k, H);
    let frac = fx().frac;
    // without the row norms this product would be wide; with them it is plain
    assert!(crate::graph_he::pre_shift(k, ba, bb, frac).unwrap() != (0, 0), "k·|Q|·|K| = {}", k as f64 * ba * bb);
    assert_eq!(crate::graph_he::pre_shift_bounded(k, ba, bb, bo, frac), Some((0, 0)), "bound {bo}");
    let mut per = vec![None; prog.steps.len()];
    per[mi] = Some(LinearBackend::He);
    let o = GraphOptions { per_step: Some(std::sync::Arc::new(per)), ..GraphOptions::interactive(fx(), setup(29)) };
    o.validate(&prog, false).unwrap();
    let ((_, us, _), (yc, uc, _)) = run_both(&prog, &inp, &o);
    assert_eq!((us, uc), (ProviderUse::default(), ProviderUse::default()));
    let y = yc.unwrap();
    let c = run_clear(&prog, &inp, &o).unwrap();
    let f = g.eval_f64(&inp).unwrap();
    let diag = (0..S).map(|i| y[0].v[i * S + i]).fold(0.0f64, f64::max);
    let top = y[0].v.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    assert!(top <= bo, "private Q·Kᵀ reaches {top}, beyond its bound {bo}");
    assert!(diag > bo / 2.0, "the aligned rows reach {diag}: not near the bound {bo}");
    let err = |a: &Tensor, b: &Tensor| a.v.iter().zip(&b.v).fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
    assert!(err(&y[0], &c[0]) < 1e-3 * bo, "interactive vs fixed-point reference: {} (bound {bo})", err(&y[0], &c[0]));
    assert!(err(&y[0], &f[0]) < 2e-3 * bo, "interactive vs f64: {} (bound {bo})", err(&y[0], &f[0]));
    println!("Q·Kᵀ: diagonal up to {diag:.1}, bound {bo}, k·|Q|·|K| = {:.3e}; errors {:.3} (reference), {:.3} (f64)", k as f64 * ba * bb, err(&y[0], &c[0]), err(&y[0], &f[0]));
}

fn attr_f_eps() -> hush_onnx::proto::AttributeProto {
    hush_onnx::proto::AttributeProto { name: Some("epsilon".into()), f: Some(1e-5), r#type: Some(hush_onnx::proto::attr_type::FLOAT), ..Default::default() }
}
