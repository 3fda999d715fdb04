//! Every weighted linear layer of the bundled MNIST model and of the
//! MiniONN MNIST / CIFAR benchmark nets, through Cheetah's HE protocol
//! (`hush-rlwe`, real 128-bit parameters N = 8192) on shares of the
//! layer's real input (from the fixed-point reference trace): the shares
//! plus bias, truncated, must equal the reference's output bit for bit.
//! Also checks that the client's shape (from the public architecture)
//! equals the server's (from its compiled op).

use hush_inference::fixed::trunc;
use hush_inference::he_linear;
use hush_inference::plan::StepKind;
use hush_inference::{reference, zoo, FixedConfig, Model, Plan};
use hush_primitives::{Block, Prg};
use hush_rlwe::cheetah::{Config, HeClient, HeServer};
use hush_rlwe::{Context, Params};
use hush_transport::MemChannel;
use std::sync::Arc;

fn check_model(model: &Model, seed: u128) -> usize {
    let cfg = FixedConfig::default();
    let plan = Plan::new(model, cfg).unwrap();
    let mut prg = Prg::new(Block(seed));
    let x: Vec<f64> = (0..plan.input_len).map(|_| (prg.next_u64() % 2001) as f64 / 1000.0 - 1.0).collect();
    let xq = plan.encode_input(&x).unwrap();
    let vals = reference::run_traced(&plan, &xq).unwrap();
    let m = cfg.mask();
    // the linear steps: (step index, client's shape, x_C, x_S)
    let mut jobs = Vec::new();
    for (i, st) in plan.steps.iter().enumerate() {
        if let StepKind::Linear { op: Some(op), .. } = &st.kind {
            let shape = he_linear::shape_of_node(model, i).unwrap();
            assert_eq!(shape, he_linear::shape_of_op(op).unwrap(), "step {i}: client and server shapes");
            let a = &vals[st.inputs[0]];
            let x_s: Vec<u64> = a.iter().map(|_| prg.next_u64() & m).collect();
            let x_c: Vec<u64> = a.iter().zip(&x_s).map(|(v, s)| v.wrapping_sub(*s) & m).collect();
            jobs.push((i, shape, x_c, x_s));
        }
    }
    let ctx = Arc::new(Context::new(Params::he128_n8192()).unwrap());
    let hcfg = Config::new(cfg.bits);
    let (mut ca, mut cb) = MemChannel::pair();
    let server_jobs: Vec<(usize, Vec<u64>)> = jobs.iter().map(|(i, _, _, s)| (*i, s.clone())).collect();
    let (ctx2, plan2) = (ctx.clone(), Plan::new(model, cfg).unwrap());
    let srv = std::thread::spawn(move || {
        let mut s = HeServer::setup(&mut cb, ctx2, hcfg, Prg::new(Block(seed + 1))).unwrap();
        server_jobs
            .into_iter()
            .map(|(i, x_s)| match &plan2.steps[i].kind {
                StepKind::Linear { op: Some(op), bias, .. } => he_linear::server(&mut s, &mut cb, op, bias, cfg.bits, &x_s).unwrap(),
                _ => unreachable!(),
            })
            .collect::<Vec<_>>()
    });
    let mut c = HeClient::setup(&mut ca, ctx, hcfg, Prg::new(Block(seed + 2))).unwrap();
    let ys_c: Vec<Vec<u64>> = jobs.iter().map(|(_, sh, x_c, _)| he_linear::client(&mut c, &mut ca, sh, x_c).unwrap()).collect();
    let ys_s = srv.join().unwrap();
    for (((i, _, _, _), y_c), y_s) in jobs.iter().zip(&ys_c).zip(&ys_s) {
        let got: Vec<u64> = y_c.iter().zip(y_s).map(|(a, b)| trunc(&cfg, a.wrapping_add(*b) & m, cfg.frac)).collect();
        assert_eq!(got, vals[i + 1], "step {i} ({})", plan.steps[*i].name);
    }
    jobs.len()
}

#[test]
fn bundled_mnist_model_linear_layers_through_he() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/mnist_cnn.hushm");
    let model = Model::load(&root).unwrap();
    assert!(check_model(&model, 1) >= 3);
}

#[test]
fn minionn_linear_layers_through_he() {
    assert_eq!(check_model(&zoo::load("minionn-mnist").unwrap(), 2), 4);
    assert_eq!(check_model(&zoo::load("minionn-cifar").unwrap(), 3), 8);
}
