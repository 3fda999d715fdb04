//! The graph runtime (`hush_onnx::graph` + `graph_run`) on a small encoder
//! graph built here node by node: embedding Gather, fused LayerNorm,
//! projections, QKᵀ with a transpose, a scale, torch's mask arithmetic,
//! Softmax, PV, an Erf GeLU, the first token and a Tanh. Private (tee,
//! simulated modules) against the f64 interpreter and the fixed-point
//! reference; bytes and rounds pinned; refusals.

use crate::graph_run::{check_program, run_clear, run_private, GraphOptions};
use hush_onnx::eval::Tensor;
use hush_onnx::graph::{GraphModel, Step};
use hush_onnx::proto::*;
use std::collections::HashMap;

const V: usize = 30;
const H: usize = 8;

fn attr_f(name: &str, v: f32) -> AttributeProto {
    AttributeProto { name: Some(name.into()), f: Some(v), r#type: Some(attr_type::FLOAT), ..Default::default() }
}
pub(crate) fn attr_i(name: &str, v: i64) -> AttributeProto {
    AttributeProto { name: Some(name.into()), i: Some(v), r#type: Some(attr_type::INT), ..Default::default() }
}
pub(crate) fn attr_is(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto { name: Some(name.into()), ints: v.to_vec(), r#type: Some(attr_type::INTS), ..Default::default() }
}
pub(crate) fn node(op: &str, ins: &[&str], out: &str, attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto { input: ins.iter().map(|s| s.to_string()).collect(), output: vec![out.into()], name: Some(format!("/{op}_{out}")), op_type: Some(op.into()), attribute: attrs, domain: None }
}
pub(crate) fn f32s(name: &str, dims: &[i64], v: Vec<f32>) -> TensorProto {
    TensorProto { dims: dims.to_vec(), data_type: Some(data_type::FLOAT), float_data: v, name: Some(name.into()), ..Default::default() }
}
fn i64s(name: &str, dims: &[i64], v: Vec<i64>) -> TensorProto {
    TensorProto { dims: dims.to_vec(), data_type: Some(data_type::INT64), int64_data: v, name: Some(name.into()), ..Default::default() }
}
fn constant(out: &str, t: TensorProto) -> NodeProto {
    NodeProto { output: vec![out.into()], name: Some(format!("/Constant_{out}")), op_type: Some("Constant".into()), attribute: vec![AttributeProto { name: Some("value".into()), t: Some(t), r#type: Some(attr_type::TENSOR), ..Default::default() }], ..Default::default() }
}
pub(crate) fn input(name: &str) -> ValueInfoProto {
    let dims = ["batch", "seq"].iter().map(|d| Dimension { value: Some(DimensionValue::DimParam(d.to_string())) }).collect();
    ValueInfoProto { name: Some(name.into()), r#type: Some(TypeProto { tensor_type: Some(TypeProtoTensor { elem_type: Some(data_type::INT64), shape: Some(TensorShapeProto { dim: dims }) }) }) }
}

pub(crate) fn rnd(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e3779b97f4a7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// The test graph; `mutate` may edit its nodes before it is built.
pub(crate) fn graph(mutate: impl FnOnce(&mut Vec<NodeProto>, &mut Vec<TensorProto>)) -> ModelProto {
    let h = H as i64;
    let mut inits = vec![
        f32s("emb", &[V as i64, h], rnd(V * H, 1, 1.0)),
        f32s("ln.g", &[h], rnd(H, 2, 0.2).iter().map(|v| 1.0 + v).collect()),
        f32s("ln.b", &[h], rnd(H, 3, 0.1)),
        f32s("wq", &[h, h], rnd(H * H, 4, 0.5)),
        f32s("wk", &[h, h], rnd(H * H, 5, 0.5)),
    ];
    let mut nodes = vec![
        node("Gather", &["emb", "input_ids"], "e", vec![]),
        node("LayerNormalization", &["e", "ln.g", "ln.b"], "l", vec![attr_i("axis", -1), attr_f("epsilon", 1e-5)]),
        node("MatMul", &["l", "wq"], "q", vec![]),
        node("MatMul", &["l", "wk"], "k", vec![]),
        node("Transpose", &["k"], "kt", vec![attr_is("perm", &[0, 2, 1])]),
        node("MatMul", &["q", "kt"], "s", vec![]),
        constant("c4", f32s("", &[], vec![4.0])),
        node("Div", &["s", "c4"], "s2", vec![]),
        constant("ax1", i64s("", &[1], vec![1])),
        node("Unsqueeze", &["attention_mask", "ax1"], "m1", vec![]),
        node("Cast", &["m1"], "mc", vec![attr_i("to", 1)]),
        constant("one", f32s("", &[], vec![1.0])),
        node("Sub", &["one", "mc"], "inv", vec![]),
        constant("big", f32s("", &[], vec![-3.4e38])),
        node("Mul", &["inv", "big"], "term", vec![]),
        node("Add", &["s2", "term"], "s3", vec![]),
        node("Softmax", &["s3"], "p", vec![attr_i("axis", -1)]),
        node("MatMul", &["p", "l"], "v", vec![]),
        constant("sq2", f32s("", &[], vec![std::f32::consts::SQRT_2])),
        node("Div", &["v", "sq2"], "ga", vec![]),
        node("Erf", &["ga"], "gr", vec![]),
        node("Add", &["gr", "one"], "gq", vec![]),
        node("Mul", &["v", "gq"], "gu", vec![]),
        constant("half", f32s("", &[], vec![0.5])),
        node("Mul", &["gu", "half"], "g", vec![]),
        constant("i0", i64s("", &[], vec![0])),
        node("Gather", &["g", "i0"], "first", vec![attr_i("axis", 1)]),
        node("Tanh", &["first"], "y", vec![]),
    ];
    mutate(&mut nodes, &mut inits);
    let out = ValueInfoProto { name: Some("y".into()), r#type: None };
    ModelProto {
        ir_version: Some(8),
        graph: Some(GraphProto { node: nodes, name: Some("t".into()), initializer: inits, input: vec![input("input_ids"), input("attention_mask")], output: vec![out] }),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        metadata_props: vec![],
    }
}

pub(crate) fn inputs() -> HashMap<String, Tensor> {
    // two sentences of 6 tokens, the second padded after 4
    let ids = vec![3., 7., 1., 29., 11., 5., 2., 8., 13., 21., 0., 0.];
    let mask = vec![1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 0., 0.];
    HashMap::from([("input_ids".to_string(), Tensor::ints(vec![2, 6], ids)), ("attention_mask".to_string(), Tensor::ints(vec![2, 6], mask))])
}

pub(crate) fn shapes(i: &HashMap<String, Tensor>) -> HashMap<String, Vec<usize>> {
    i.iter().map(|(k, v)| (k.clone(), v.shape.clone())).collect()
}

#[test]
fn graph_runs_privately_within_the_fixed_point_bound_with_pinned_cost() {
    let g = GraphModel::from_model(graph(|_, _| {})).unwrap();
    let inp = inputs();
    let prog = g.instantiate(&shapes(&inp)).unwrap();
    let kinds: Vec<&str> = prog.steps.iter().map(|s| s.kind()).collect();
    for k in ["embed", "layernorm", "linear", "matmul", "scale", "mask", "softmax", "gelu", "tanh", "move"] {
        assert!(kinds.contains(&k), "{k} missing from {kinds:?}");
    }
    let o = GraphOptions::default();
    let (y, st) = run_private(&prog, &inp, &o).unwrap();
    let f = g.eval_f64(&inp).unwrap();
    let c = run_clear(&prog, &inp, &o).unwrap();
    assert_eq!(y[0].shape, vec![2, H]);
    assert_eq!(f[0].shape, vec![2, H]);
    let err = |a: &Tensor, b: &Tensor| a.v.iter().zip(&b.v).fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
    assert!(err(&y[0], &f[0]) < 0.02, "private vs f64: {}", err(&y[0], &f[0]));
    assert!(err(&y[0], &c[0]) < 0.01, "private vs fixed-point reference: {}", err(&y[0], &c[0]));
    // pinned from a run: any change in the lowering or an operator shows here
    assert_eq!((st.bytes, st.rounds), GRAPH_PIN, "bytes and rounds of the test graph");
}

#[test]
fn the_mask_hides_padding_from_the_real_tokens() {
    // the padded sentence alone at its true length gives the same first-token output
    let g = GraphModel::from_model(graph(|_, _| {})).unwrap();
    let inp = inputs();
    let prog = g.instantiate(&shapes(&inp)).unwrap();
    let (y, _) = run_private(&prog, &inp, &GraphOptions::default()).unwrap();
    let alone = HashMap::from([
        ("input_ids".to_string(), Tensor::ints(vec![1, 4], vec![2., 8., 13., 21.])),
        ("attention_mask".to_string(), Tensor::ints(vec![1, 4], vec![1.; 4])),
    ]);
    let p1 = g.instantiate(&shapes(&alone)).unwrap();
    let (y1, _) = run_private(&p1, &alone, &GraphOptions::default()).unwrap();
    let d = y[0].v[H..].iter().zip(&y1[0].v).fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    assert!(d < 0.01, "{d}");
}

#[test]
fn public_program_has_no_weights_and_the_same_fingerprint() {
    let g = GraphModel::from_model(graph(|_, _| {})).unwrap();
    let prog = g.instantiate(&shapes(&inputs())).unwrap();
    let pubp = prog.public();
    assert!(!pubp.has_weights);
    for s in &pubp.steps {
        let w = match s {
            Step::Embed { table, .. } => table.len(),
            Step::Linear { w, .. } => w.len(),
            Step::AddConst { c, .. } | Step::ScaleVec { c, .. } => c.len(),
            Step::LayerNorm { gamma, beta, .. } => gamma.len().max(beta.len()).saturating_sub(1),
            _ => 0,
        };
        assert_eq!(w, 0, "{s:?}");
    }
    assert_eq!(prog.fingerprint(), pubp.fingerprint());
    // a different padded length is a different program
    let mut other = inputs();
    for t in other.values_mut() {
        t.shape = vec![3, 4];
    }
    assert_ne!(g.instantiate(&shapes(&other)).unwrap().fingerprint(), prog.fingerprint());
}

#[test]
fn unsupported_nodes_and_unsound_uses_are_refused_by_name() {
    // an operator the runtime does not have
    let e = GraphModel::from_model(graph(|n, _| n[20].op_type = Some("Sin".into()))).unwrap_err().to_string();
    assert!(e.contains("/Erf_gr") && e.contains("Sin") && e.contains("supported"), "{e}");
    // a weight vector in the client's mask arithmetic would reveal it
    let e = GraphModel::from_model(graph(|n, i| {
        i.push(f32s("secret", &[6], rnd(6, 9, 1.0)));
        n[14] = node("Mul", &["inv", "secret"], "term", vec![]);
    }))
    .unwrap()
    .instantiate(&shapes(&inputs()))
    .unwrap_err()
    .to_string();
    assert!(e.contains("weight") && e.contains("/Mul_term"), "{e}");
    // a client value added to a private one anywhere but before a Softmax
    let e = GraphModel::from_model(graph(|n, _| n[16] = node("Relu", &["s3"], "p", vec![])))
        .and_then(|g| g.instantiate(&shapes(&inputs())))
        .unwrap_err()
        .to_string();
    assert!(e.contains("Relu") || e.contains("attention mask"), "{e}");
    // wrong input rank
    let mut bad = inputs();
    bad.get_mut("input_ids").unwrap().shape = vec![12];
    assert!(GraphModel::from_model(graph(|_, _| {})).unwrap().instantiate(&shapes(&bad)).is_err());
}

#[test]
fn values_that_could_wrap_are_refused_before_running() {
    // embeddings of 1e15 cannot be held at 2^12 in a 64-bit ring
    let g = GraphModel::from_model(graph(|_, i| i[0] = f32s("emb", &[V as i64, H as i64], vec![1e15; V * H]))).unwrap();
    let prog = g.instantiate(&shapes(&inputs())).unwrap();
    let e = check_program(&prog, GraphOptions::default().fx).unwrap_err().to_string();
    assert!(e.contains("wrap"), "{e}");
}
// 198,418 before P·V's bound came from the softmax rows (bertix9): the GeLU
// after P·V compares on fewer bits (384 bytes less), the same rounds.
// 198,034 before Q·Kᵀ's bound came from Cauchy–Schwarz (qk10): the scores'
// bound falls (LayerNorm rows through the projections), so the Softmax
// after the mask compares on fewer bits (132 bytes less), the same rounds.
// (197,902, 106) before the LayerNorms took their inputs' proven bounds
// (session 21): the graph's first LayerNorm (bound ≤ 2^11) skips its clip
// (4 rounds and 6,240 bytes less), the others compare on fewer bits
const GRAPH_PIN: (u64, u64) = (191662, 102);

/// Records every request a party makes of its correlation provider.
struct Recorder {
    inner: Box<dyn hush_tee::TrustedModule>,
    log: std::sync::Arc<std::sync::Mutex<Vec<hush_tee::Request>>>,
}

impl hush_tee::TrustedModule for Recorder {
    fn call(&mut self, req: &hush_tee::Request) -> hush_tee::Result<hush_tee::Response> {
        self.log.lock().unwrap().push(req.clone());
        self.inner.call(req)
    }
    fn stats(&self) -> hush_tee::ModuleStats {
        self.inner.stats()
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}

/// Runs the graph with the server's provider recorded; returns the output
/// and the server's requests after seed agreement.
fn run_recorded(m: ModelProto, backend: crate::graph_run::LinearBackend) -> (Vec<Tensor>, Vec<hush_tee::Request>) {
    run_recorded_ahead(m, backend, true)
}

fn run_recorded_ahead(m: ModelProto, backend: crate::graph_run::LinearBackend, ahead: bool) -> (Vec<Tensor>, Vec<hush_tee::Request>) {
    use crate::engine::SharedModule;
    use crate::graph_run::{party_run, Role};
    use hush_tee::{InProcessModule, Module, ModuleRole, Request};
    let g = GraphModel::from_model(m).unwrap();
    let inp = inputs();
    let prog = g.instantiate(&shapes(&inp)).unwrap();
    let public = prog.public();
    let d = GraphOptions::default();
    let o = if backend == crate::graph_run::LinearBackend::Triples { GraphOptions::dealer(d.fx, d.proto) } else { d };
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (mut ca, mut cb) = hush_transport::MemChannel::pair();
    let (rs, rc) = std::thread::scope(|sc| {
        let (prog, public, inp, log, o) = (&prog, &public, &inp, log.clone(), &o);
        let hs = sc.spawn(move || {
            let rec = Recorder { inner: Box::new(InProcessModule::new(Module::new().with_kinds(hush_2pc::deal::kinds()))), log };
            let mut module = SharedModule::new(Box::new(rec));
            hush_tee::establish(&mut module, &mut ca, ModuleRole::Sender).unwrap();
            party_run(Role::Server, prog, o, &mut ca, &HashMap::new(), module, ahead).map(|x| x.0)
        });
        let hc = sc.spawn(move || {
            let mut module = SharedModule::new(Box::new(InProcessModule::new(Module::new().with_kinds(hush_2pc::deal::kinds()))));
            hush_tee::establish(&mut module, &mut cb, ModuleRole::Receiver).unwrap();
            party_run(Role::Client, public, o, &mut cb, inp, module, ahead).map(|x| x.0)
        });
        (hs.join().unwrap(), hc.join().unwrap())
    });
    rs.unwrap();
    let y = rc.unwrap().unwrap();
    let reqs: Vec<Request> = log.lock().unwrap().iter().filter(|r| !matches!(r, Request::Hello { .. } | Request::PeerHello { .. } | Request::PeerConfirm { .. })).cloned().collect();
    (y, reqs)
}

#[test]
fn dealing_ahead_asks_the_provider_for_the_same_correlations_as_lazy_dealing() {
    // the look-ahead thread deals what the operators would deal on demand,
    // in the same order with the same batch numbers (dealer preset: every
    // request comes from the dealing thread), and the outputs agree
    use crate::graph_run::LinearBackend;
    let key = |r: &hush_tee::Request| format!("{r:?}");
    for b in [LinearBackend::Triples, LinearBackend::Module] {
        let (y0, lazy) = run_recorded_ahead(graph(|_, _| {}), b, false);
        let (y1, ahead) = run_recorded_ahead(graph(|_, _| {}), b, true);
        assert!(!lazy.is_empty());
        let (mut l, mut a): (Vec<String>, Vec<String>) = (lazy.iter().map(key).collect(), ahead.iter().map(key).collect());
        if b == LinearBackend::Module {
            // the module-dealt layers' requests come from the online thread,
            // interleaved differently: the same requests, in another order
            l.sort();
            a.sort();
        }
        assert_eq!(l, a, "{b:?}");
        let d = y0[0].v.iter().zip(&y1[0].v).fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
        assert!(d < 0.01, "{b:?}: {d}");
    }
}

#[test]
fn triples_backend_keeps_every_weight_from_the_provider() {
    use crate::graph_run::LinearBackend;
    let other = |_: &mut Vec<NodeProto>, i: &mut Vec<TensorProto>| {
        // other weights of the same shapes: every weight tensor redrawn
        for (k, t) in i.iter_mut().enumerate() {
            let n = t.float_data.len();
            t.float_data = rnd(n, 100 + k as u64, 0.5);
        }
    };
    let (y1, r1) = run_recorded(graph(|_, _| {}), LinearBackend::Triples);
    let (y2, r2) = run_recorded(graph(other), LinearBackend::Triples);
    // the provider (a dealer, in dealer mode) receives the same requests for both weight sets
    assert!(!r1.is_empty());
    assert_eq!(r1, r2, "the provider's view depends on the weights");
    assert!(!r1.iter().any(|r| matches!(r, hush_tee::Request::Linear(_) | hush_tee::Request::LinearSeeded(_))));
    assert_ne!(y1[0].v, y2[0].v);
    // and the result is right
    let g = GraphModel::from_model(graph(|_, _| {})).unwrap();
    let f = g.eval_f64(&inputs()).unwrap();
    let e = y1[0].v.iter().zip(&f[0].v).fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    assert!(e < 0.02, "triples backend vs f64: {e}");
    // the module backend, by contrast, hands the weights to the provider:
    // this test would catch it
    let (_, m1) = run_recorded(graph(|_, _| {}), LinearBackend::Module);
    let (_, m2) = run_recorded(graph(other), LinearBackend::Module);
    assert_ne!(m1, m2);
}

#[test]
fn plans_mix_backends_per_step_and_refuse_unsound_mixes() {
    use crate::graph_run::{touches_weights, LinearBackend};
    let g = GraphModel::from_model(graph(|_, _| {})).unwrap();
    let inp = inputs();
    let prog = g.instantiate(&shapes(&inp)).unwrap();
    // alternate the backends over the weight steps: same result as either preset, within the bound
    let mut k = 0;
    let per: Vec<Option<LinearBackend>> = prog
        .steps
        .iter()
        .map(|s| {
            touches_weights(s).then(|| {
                k += 1;
                if k % 2 == 0 { LinearBackend::Triples } else { LinearBackend::Module }
            })
        })
        .collect();
    assert!(k >= 3, "{k} weight steps");
    let mixed = GraphOptions { per_step: Some(std::sync::Arc::new(per.clone())), ..GraphOptions::default() };
    mixed.validate(&prog, false).unwrap();
    let (y, _) = run_private(&prog, &inp, &mixed).unwrap();
    let f = g.eval_f64(&inp).unwrap();
    let e = y[0].v.iter().zip(&f[0].v).fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    assert!(e < 0.02, "mixed plan vs f64: {e}");
    // the same mix with a dealer as the provider: refused, naming the first module-dealt step
    let err = mixed.validate(&prog, true).unwrap_err().to_string();
    let first = per.iter().position(|b| *b == Some(LinearBackend::Module)).unwrap();
    assert!(err.contains(&format!("step {first} ")) && err.contains("dealer") && err.contains("unsound"), "{err}");
    // a plan of the wrong length
    let short = GraphOptions { per_step: Some(std::sync::Arc::new(vec![None; 3])), ..GraphOptions::default() };
    assert!(short.validate(&prog, false).is_err());
}

#[test]
fn plan_files_apply_per_operator_and_step_and_refuse_bad_entries_by_name() {
    use crate::graph_run::{touches_weights, LinearBackend, PlanFile};
    let g = GraphModel::from_model(graph(|_, _| {})).unwrap();
    let inp = inputs();
    let prog = g.instantiate(&shapes(&inp)).unwrap();
    let tee = GraphOptions::default();
    let dealer = GraphOptions::dealer(tee.fx, tee.proto);
    // a linear step to name
    let (li, lname) = prog.steps.iter().enumerate().find(|(_, s)| s.kind() == "linear").map(|(i, s)| (i, prog.slots[s.out()].name.clone())).unwrap();
    let text = format!("linear = \"module\"\n[ops]\nlinear = \"triples\"\n[steps]\n\"{lname}\" = \"module\"\n");
    let f = PlanFile::from_toml(&text).unwrap();
    let o = tee.with_plan_file(&prog, &f, false).unwrap();
    for (i, st) in prog.steps.iter().enumerate() {
        if !touches_weights(st) {
            continue;
        }
        let want = if i == li { LinearBackend::Module } else if st.kind() == "linear" { LinearBackend::Triples } else { LinearBackend::Module };
        assert_eq!(o.backend(i), want, "step {i} ({})", st.kind());
    }
    // the hello's form round-trips, and the mixed plan runs within the bound
    let back = tee.from_json(&o.to_json(&prog), &prog, false).unwrap();
    assert_eq!(back.to_json(&prog), o.to_json(&prog));
    assert!((0..prog.steps.len()).all(|i| back.backend(i) == o.backend(i)));
    let (y, _) = run_private(&prog, &inp, &o).unwrap();
    let fl = g.eval_f64(&inp).unwrap();
    let e = y[0].v.iter().zip(&fl[0].v).fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    assert!(e < 0.02, "plan-file run vs f64: {e}");
    // refusals name the entry
    let refused = |text: &str, dealer_provider: bool| -> String {
        match PlanFile::from_toml(text) {
            Err(e) => e,
            Ok(f) => (if dealer_provider { &dealer } else { &tee }).with_plan_file(&prog, &f, dealer_provider).unwrap_err().to_string(),
        }
    };
    let e = refused("[ops]\nconvolution = \"module\"\n", false);
    assert!(e.contains("ops.convolution") && e.contains("unknown operator"), "{e}");
    let e = refused("[ops]\nsoftmax = \"triples\"\n", false);
    assert!(e.contains("ops.softmax") && e.contains("no linear backend"), "{e}");
    let e = refused("[steps]\n\"no-such-value\" = \"triples\"\n", false);
    assert!(e.contains("no-such-value") && e.contains("no step"), "{e}");
    let e = refused("[ops]\nlinear = \"cheetah\"\n", false);
    assert!(e.contains("ops.linear") && e.contains("unknown backend 'cheetah'"), "{e}");
    let e = refused("[ops]\nlinear = \"module\"\n", true);
    assert!(e.contains("ops.linear") && e.contains("unsound") && e.contains("dealer"), "{e}");
    let e = refused(&format!("[steps]\n\"{lname}\" = \"module\"\n"), true);
    assert!(e.contains(&lname) && e.contains("unsound"), "{e}");
    let e = refused("speed = \"fast\"\n", false);
    assert!(e.contains("speed") && e.contains("unknown key"), "{e}");
    let e = refused("[ops\n", false);
    assert!(e.contains("TOML"), "{e}");
    // a peer's plan that is unsound for this party's provider is refused too
    let mixed = tee.with_plan_file(&prog, &PlanFile::from_toml("[ops]\nlinear = \"module\"\n").unwrap(), false).unwrap();
    assert!(dealer.from_json(&mixed.to_json(&prog), &prog, true).is_err());
}

#[test]
fn the_dealer_presets_public_comparison_bound_refuses_programs_beyond_it() {
    use crate::graph_run::PUBLIC_CMP_BOUND;
    let inp = inputs();
    let d = GraphOptions::default();
    let dealer = GraphOptions::dealer(d.fx, d.proto);
    // the test graph fits: its GeLU/Softmax inputs are proven far below the bound
    let g = GraphModel::from_model(graph(|_, _| {})).unwrap();
    let prog = g.instantiate(&shapes(&inp)).unwrap();
    dealer.validate(&prog, true).unwrap();
    assert_eq!(dealer.to_json(&prog)["public_bound"]["gelu"], PUBLIC_CMP_BOUND.gelu);
    assert_eq!(dealer.to_json(&prog)["public_bound"]["softmax"], PUBLIC_CMP_BOUND.softmax);
    let back = dealer.from_json(&dealer.to_json(&prog), &prog, true).unwrap();
    assert_eq!(back.public_bound, Some(PUBLIC_CMP_BOUND));
    // weights scaled up until some comparison input's proven bound passes it
    let big = GraphModel::from_model(graph(|_, i| {
        for t in i.iter_mut() {
            t.float_data.iter_mut().for_each(|v| *v *= 400.0);
        }
    }))
    .unwrap();
    let prog = big.instantiate(&shapes(&inp)).unwrap();
    let e = dealer.validate(&prog, true).unwrap_err().to_string();
    assert!(e.contains("public comparison bound") && e.contains("proven bound"), "{e}");
    // the tee preset sizes from the proven bounds and has no such limit
    GraphOptions::default().validate(&prog, false).unwrap();
}

#[test]
fn cnn_plans_choose_the_family_with_the_smallest_prediction_and_say_who_holds_w() {
    use crate::cnn_plan::{plan_cnn, CnnPlanRequest};
    use crate::runtime::{Mode, Options};
    let model = std::sync::Arc::new(crate::zoo::load("minionn-mnist").unwrap());
    for (mode, net) in [(Mode::Tee, "wan"), (Mode::Dealer { addr: String::new(), pin: None }, "mobile")] {
        let mut opts = Options { mode: mode.clone(), proto: "auto".into(), ..Default::default() };
        opts.resolve_family().unwrap();
        let req = CnnPlanRequest { opts, net: hush_transport::NetProfile::by_name(net).unwrap(), verify: false, verify_fixed: false };
        let (choice, rep) = plan_cnn(model.clone(), &req).unwrap();
        let fam = choice.family.clone();
        let fixed = rep["fixed"].as_array().unwrap();
        // every family of the preset is a candidate, and auto is the cheapest
        let fams: Vec<&str> = fixed.iter().map(|f| f["family"].as_str().unwrap()).collect();
        assert_eq!(fams, mode.families().to_vec());
        let min = fixed.iter().map(|f| f["predicted_s"].as_f64().unwrap()).fold(f64::INFINITY, f64::min);
        // auto is the cheapest single family, or the per-layer mix where that
        // is predicted clearly faster
        assert!(fixed.iter().any(|f| f["family"] == fam.as_str() && f["predicted_s"].as_f64().unwrap() == min));
        let auto = rep["auto"]["predicted_s"].as_f64().unwrap();
        match &choice.mix {
            None => assert_eq!(auto, min),
            Some(m) => {
                assert!(auto < min * crate::cnn_plan::MIX_MARGIN, "{auto} vs {min}");
                assert_eq!(m.len(), model.nodes.len());
            }
        }
        // one row per layer, and a per-layer mix can only be as fast or faster
        assert_eq!(rep["layers"].as_array().unwrap().len(), model.nodes.len());
        assert!(rep["per_layer_mix_predicted_s"].as_f64().unwrap() <= min + 1e-9);
        let dealer = matches!(mode, Mode::Dealer { .. });
        assert_eq!(rep["dealer_sees_weights"].as_bool(), Some(dealer));
        assert_eq!(rep["note"].as_str().unwrap().contains("THE DEALER HOLDS THE WEIGHTS"), dealer, "{}", rep["note"]);
    }
    // --max-mem is in the cost model: the runs use the chunk and pre-dealing
    // it fits, and every layer's client estimate stays within it (without a
    // budget the default pre-dealing alone is larger)
    let mut opts = Options { proto: "auto".into(), max_mem: Some(30 << 20), ..Default::default() };
    opts.resolve_family().unwrap();
    let (_, rep) = plan_cnn(model.clone(), &CnnPlanRequest { opts: opts.clone(), net: hush_transport::NetProfile::lan(), verify: false, verify_fixed: false }).unwrap();
    assert_eq!(rep["max_mem"].as_u64(), Some(30 << 20));
    let peak = |rep: &serde_json::Value| rep["layers"].as_array().unwrap().iter().map(|l| l["client_mem_bytes"].as_u64().unwrap()).max().unwrap();
    assert!(peak(&rep) <= 30 << 20, "{}", peak(&rep));
    let (_, free) = plan_cnn(model.clone(), &CnnPlanRequest { opts: Options { max_mem: None, ..opts }, net: hush_transport::NetProfile::lan(), verify: false, verify_fixed: false }).unwrap();
    assert!(peak(&free) > 30 << 20, "{}", peak(&free));
    // CRISP's engine has one family: refused by name
    let o = Options { mode: Mode::MaliciousClient { addr: String::new(), pin: None }, proto: "crisp".into(), ..Default::default() };
    let e = plan_cnn(model, &CnnPlanRequest { opts: o, net: hush_transport::NetProfile::lan(), verify: false, verify_fixed: false }).unwrap_err().to_string();
    assert!(e.contains("malicious-client"), "{e}");
}

/// The test graph with the mask and guard transformers 5's `sdpa` export
/// writes: `Where(bool mask, 0, −∞)` added to the scores, and
/// `Where(IsNaN(p), fill, p)` after the Softmax (`fill` = 0 is the guard).
fn sdpa_graph(fill: f32, guard_on: &'static str) -> ModelProto {
    graph(move |n, _| {
        let at = |n: &Vec<NodeProto>, out: &str| n.iter().position(|x| x.output.first().map(|s| s.as_str()) == Some(out)).unwrap();
        let k = at(n, "mc");
        n[k] = node("Cast", &["m1"], "mc", vec![attr_i("to", 9)]);
        let k = at(n, "term");
        n[k] = node("Where", &["mc", "zero", "neginf"], "term", vec![]);
        n.insert(k, constant("neginf", f32s("", &[], vec![f32::NEG_INFINITY])));
        n.insert(k, constant("zero", f32s("", &[], vec![0.0])));
        n.insert(k, constant("fill", f32s("", &[], vec![fill])));
        let k = at(n, "p");
        n.insert(k + 1, node("IsNaN", &[guard_on], "pn", vec![]));
        n.insert(k + 2, node("Where", &["pn", "fill", guard_on], "pg", vec![]));
        let k = at(n, "v");
        n[k] = node("MatMul", &["pg", "l"], "v", vec![]);
    })
}

#[test]
fn a_nan_guard_is_fused_only_in_its_exact_form() {
    // the guard after a Softmax: lowered to nothing — the same steps, the
    // same private output, the same cost as the graph without it
    let inp = inputs();
    let plain = GraphModel::from_model(graph(|_, _| {})).unwrap().instantiate(&shapes(&inp)).unwrap();
    let g = GraphModel::from_model(sdpa_graph(0.0, "p")).unwrap();
    let prog = g.instantiate(&shapes(&inp)).unwrap();
    let kinds = |p: &hush_onnx::graph::Program| p.steps.iter().map(|s| s.kind()).filter(|k| *k != "client").collect::<Vec<_>>();
    assert_eq!(kinds(&prog), kinds(&plain));
    let o = GraphOptions::default();
    let (y, st) = run_private(&prog, &inp, &o).unwrap();
    let (y0, st0) = run_private(&plain, &inp, &o).unwrap();
    assert_eq!((st.bytes, st.rounds), (st0.bytes, st0.rounds));
    let f = g.eval_f64(&inp).unwrap();
    let err = y[0].v.iter().zip(&f[0].v).fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    assert!(err < 0.02, "private vs f64 with the guard: {err}");
    let d = y[0].v.iter().zip(&y0[0].v).fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    assert!(d < 0.01, "the −∞ mask and the finfo.min mask agree: {d}");
    // the public program carries the −∞ constant through JSON exactly
    let back = hush_onnx::graph::Program::from_json(&prog.to_json()).unwrap();
    assert_eq!(back.fingerprint(), prog.fingerprint());
    // any other fill, or a guard on a value that is not a Softmax's output,
    // is an IsNaN on a private value: refused, naming it
    for (fill, on) in [(1.0, "p"), (0.0, "s2")] {
        let e = GraphModel::from_model(sdpa_graph(fill, on)).and_then(|g| g.instantiate(&shapes(&inp))).unwrap_err().to_string();
        assert!(e.contains("IsNaN"), "fill {fill} on {on}: {e}");
    }
}

/// The proven bound of a secret × secret MatMul (`hush_onnx::graph`'s
/// `matmul_bound`): k·|A|·|B| in general, (1 + ρ + k·α)·|B| + 2^−5 only
/// when A is the Softmax's own output over the contracted axis (P·V). A
/// transposed Softmax output (contracting the other axis: columns of P are
/// not convex combinations) and a non-Softmax left operand with the same
/// entry bound (Tanh: |t| ≤ 1 too, but its rows sum to up to k) keep the
/// general bound.
#[test]
fn matmul_bound_uses_the_softmax_row_sum_only_for_p_times_v() {
    use hush_onnx::graph::{softmax_row_abs_sum, Program};
    let inp = inputs();
    let prog = |m: ModelProto| GraphModel::from_model(m).unwrap().instantiate(&shapes(&inp)).unwrap();
    let pv = |p: &Program| {
        p.steps
            .iter()
            .find_map(|s| match s {
                Step::MatMul { out, a, b, k, .. } if p.slots[*out].name == "v" => Some((p.slots[*a].bound, p.slots[*b].bound, p.slots[*out].bound, *k)),
                _ => None,
            })
            .expect("the P·V MatMul")
    };
    let up = |x: f64| x.log2().ceil().exp2();
    let (ba, bb, bo, k) = pv(&prog(graph(|_, _| {})));
    assert_eq!(k, 6);
    assert_eq!(bo, up(softmax_row_abs_sum(k) * bb + 1.0 / 32.0), "P·V: the softmax row-sum bound");
    assert!(bo < up(k as f64 * ba * bb), "the row-sum bound is the tighter one here");
    // Pᵀ·V: the Softmax's rows are not the contracted axis
    let (ba, bb, bo, k) = pv(&prog(graph(|n, _| {
        let at = n.iter().position(|x| x.output[0] == "v").unwrap();
        n[at] = node("MatMul", &["pt", "l"], "v", vec![]);
        n.insert(at, node("Transpose", &["p"], "pt", vec![attr_is("perm", &[0, 2, 1])]));
    })));
    assert_eq!(bo, up(k as f64 * ba * bb), "Pᵀ·V keeps the general bound");
    // Tanh(scores)·V: entries within 1 like a Softmax's, rows not convex
    let (ba, bb, bo, k) = pv(&prog(graph(|n, _| {
        let at = n.iter().position(|x| x.output[0] == "v").unwrap();
        n[at] = node("MatMul", &["t", "l"], "v", vec![]);
        n.insert(at, node("Tanh", &["s2"], "t", vec![]));
    })));
    assert_eq!(ba, 2.0, "Tanh's entry bound, as the Softmax's");
    assert_eq!(bo, up(k as f64 * ba * bb), "a non-Softmax operand keeps the general bound");
}
