//! Tests of the HE modes (`interactive`: Cheetah HE linear layers + cf2 on
//! Ferret COTs; `silent`: the same with SilentFlow COTs from the modules):
//! every operator, the residual and Concat nets and the bundled MNIST
//! model against the plaintext fixed-point reference (within the faithful
//! truncation's bound), with the insecure N = 256 test set for speed and
//! the real 128-bit set (N = 8192) on the bundled model; refusals of
//! mismatched modes, families and parameter sets; costs.

use crate::model::Model;
use crate::runtime::{self, Mode, Options};
use crate::tests::{concat_net, input_for, operator_models, residual_net};
use crate::{reference, FixedConfig, Plan};
use hush_transport::MemChannel;
use std::sync::Arc;

/// One ulp at the default 12 fraction bits.
const ULP: f64 = 1.0 / 4096.0;

fn he_opts(mode: Mode) -> Options {
    Options {
        proto: "cf2".into(),
        mode,
        chunk: 1000,
        he_params: "INSECURE-test-n256".into(),
        cot_set: Some("lpn-b10".into()),
        ..Default::default()
    }
}

fn secure(m: &Arc<Model>, x: &[f64], o: &Options) -> runtime::LocalRun {
    let shape = m.input_shape.clone();
    runtime::run_local(m.clone(), &shape, x, o, false, |_, _| {}).unwrap_or_else(|e| panic!("{} in {} mode: {e}", m.name, o.mode.name()))
}

/// Secure logits within `ulps` of the reference's, element by element.
fn within(name: &str, s: &[f64], r: &[f64], ulps: f64) {
    assert_eq!(s.len(), r.len(), "{name}: output length");
    for (i, (a, b)) in s.iter().zip(r).enumerate() {
        assert!((a - b).abs() <= ulps * ULP, "{name}: output {i}: secure {a} vs reference {b} (bound {ulps} ulps)");
    }
}

/// cf2's truncation is faithful (SCI's wrap-bit construction: error ≤ 1
/// ulp per truncation), the HE linear layers are exact: every operator's
/// output is within a few ulps of the reference, in both HE modes. Fails
/// if a linear layer is wrong (errors of whole units) or a ReLU/MaxPool
/// picks the wrong branch.
#[test]
fn he_modes_within_truncation_bound_for_every_operator() {
    for mode in [Mode::Interactive, Mode::Silent] {
        let o = he_opts(mode.clone());
        for (name, bytes) in operator_models() {
            let m = Arc::new(Model::from_bytes(&bytes).unwrap());
            let plan = Plan::new(&m, FixedConfig::default()).unwrap();
            let x = input_for(&m, 11);
            let r = reference::run_f64(&plan, &x).unwrap();
            let run = secure(&m, &x, &o);
            within(&format!("{name} ({})", mode.name()), &run.inference.logits, &r, 4.0);
            // nothing is dealt in the HE modes: no module crossing anywhere
            assert!(run.inference.report.layers.iter().all(|l| l.module_crossings == 0), "{name}");
        }
    }
}

#[test]
fn he_modes_within_truncation_bound_residual_and_concat_nets() {
    for mode in [Mode::Interactive, Mode::Silent] {
        for bytes in [residual_net(), concat_net()] {
            let m = Arc::new(Model::from_bytes(&bytes).unwrap());
            let plan = Plan::new(&m, FixedConfig::default()).unwrap();
            let x = input_for(&m, 12);
            let r = reference::run_f64(&plan, &x).unwrap();
            let run = secure(&m, &x, &he_opts(mode.clone()));
            within(&format!("{} ({})", m.name, mode.name()), &run.inference.logits, &r, 16.0);
        }
    }
}

/// The bundled MNIST model with the real 128-bit parameter set (N = 8192,
/// log q ≈ 180) in interactive mode, over TLS on loopback: logits within
/// the bound and the same prediction as the reference.
#[test]
fn bundled_mnist_model_interactive_with_the_real_parameter_set() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/mnist_cnn.hushm");
    let m = Arc::new(Model::load(&root).unwrap());
    let plan = Plan::new(&m, FixedConfig::default()).unwrap();
    let mut p = hush_primitives::Prg::new(hush_primitives::Block(9));
    let x: Vec<f64> = (0..m.input_len()).map(|_| (p.next_u64() % 1001) as f64 / 1000.0).collect();
    let r = reference::run_f64(&plan, &x).unwrap();
    let o = Options { he_params: crate::he_linear::DEFAULT_PARAMS.into(), cot_set: None, chunk: crate::engine::DEFAULT_CHUNK, ..he_opts(Mode::Interactive) };
    let shape = m.input_shape.clone();
    let run = runtime::run_local(m.clone(), &shape, &x, &o, true, |_, _| {}).unwrap();
    within("mnist_cnn (interactive, he128-n8192-p50)", &run.inference.logits, &r, 16.0);
    assert_eq!(runtime::argmax(&run.inference.logits), runtime::argmax(&r));
    let v = runtime::run_json(&m, &run, &o);
    assert_eq!(v["mode"], "interactive");
    assert_eq!(v["proto"], "cf2");
    assert_eq!(v["he_params"], "he128-n8192-p50");
    assert_eq!(v["cot_set"], "ferret-main");
}

/// Two inferences in one session (the COT sessions and HE keys are reused,
/// the correlations are not): both within the bound.
#[test]
fn he_session_serves_several_inferences() {
    let m = Arc::new(Model::from_bytes(&residual_net()).unwrap());
    let plan = Plan::new(&m, FixedConfig::default()).unwrap();
    let o = he_opts(Mode::Interactive);
    let (mut a, b) = MemChannel::pair();
    let (m2, p2, o2) = (m.clone(), Plan::new(&m, FixedConfig::default()).unwrap(), o.clone());
    let srv = std::thread::spawn(move || runtime::serve_session(&mut a, &m2, &p2, &o2));
    let mut c = runtime::ClientSession::start(b, &o).unwrap();
    assert_eq!(c.cot_set.as_deref(), Some("lpn-b10"));
    for seed in [21u128, 22, 23] {
        let x = input_for(&m, seed);
        let r = reference::run_f64(&plan, &x).unwrap();
        let got = c.infer(&m.input_shape.clone(), &x, |_, _| {}).unwrap();
        within("resnet-mini, repeated", &got.logits, &r, 16.0);
    }
    c.close().unwrap();
    assert_eq!(srv.join().unwrap().unwrap(), 3);
}

#[test]
fn he_mode_mismatches_are_refused_naming_both() {
    let m = Arc::new(Model::from_bytes(&residual_net()).unwrap());
    let tee = Options { proto: "fss".into(), chunk: 1000, ..Default::default() };
    let pairs = [
        (he_opts(Mode::Interactive), tee.clone(), "--mode interactive", "--mode tee"),
        (tee.clone(), he_opts(Mode::Silent), "--mode tee", "--mode silent"),
        (he_opts(Mode::Silent), he_opts(Mode::Interactive), "--mode silent", "--mode interactive"),
    ];
    for (server, client, a, b) in pairs {
        let (mut ca, cb) = MemChannel::pair();
        let (m2, p2, o2) = (m.clone(), Plan::new(&m, FixedConfig::default()).unwrap(), server.clone());
        let srv = std::thread::spawn(move || runtime::serve_session(&mut ca, &m2, &p2, &o2));
        let e = runtime::ClientSession::start(cb, &client).err().expect("mismatch must be refused").to_string();
        assert!(e.contains("mode mismatch") && e.contains(a) && e.contains(b), "{e}");
        assert!(srv.join().unwrap().is_err());
    }
}

/// A server that asks for the insecure test parameters is refused by a
/// client that did not choose them itself; families and modes that do not
/// go together are configuration errors.
#[test]
fn insecure_he_parameters_and_wrong_families_are_refused() {
    let m = Arc::new(Model::from_bytes(&residual_net()).unwrap());
    let server = he_opts(Mode::Interactive);
    let client = Options { he_params: crate::he_linear::DEFAULT_PARAMS.into(), ..he_opts(Mode::Interactive) };
    let (mut ca, cb) = MemChannel::pair();
    let (m2, p2, o2) = (m.clone(), Plan::new(&m, FixedConfig::default()).unwrap(), server.clone());
    let srv = std::thread::spawn(move || runtime::serve_session(&mut ca, &m2, &p2, &o2));
    let e = runtime::ClientSession::start(cb, &client).err().expect("insecure parameters must be refused").to_string();
    assert!(e.contains("insecure HE parameter set 'INSECURE-test-n256'"), "{e}");
    assert!(srv.join().unwrap().is_err());

    for (mode, proto) in [(Mode::Interactive, "fss"), (Mode::Silent, "tami"), (Mode::Tee, "cf2")] {
        let mut o = Options { mode: mode.clone(), proto: proto.into(), ..Default::default() };
        let e = o.resolve_family().unwrap_err().to_string();
        assert!(e.contains(&format!("--proto {proto} does not run in --mode {}", mode.name())), "{e}");
    }
    for (mode, want) in [(Mode::Interactive, "cf2"), (Mode::Silent, "cf2"), (Mode::Tee, "tami")] {
        let mut o = Options { mode, proto: "auto".into(), ..Default::default() };
        o.resolve_family().unwrap();
        assert_eq!(o.proto, want);
    }
    assert!(crate::he_linear::params_by_name("he128-n1024").is_err());
    let bad = Options { cot_set: Some("ferret-main".into()), ..he_opts(Mode::Silent) };
    assert!(runtime::cot_set_for(&bad, None, 0).unwrap_err().to_string().contains("not one of --mode silent's"));
}

/// Per-layer costs of the HE modes: a dense layer's client → server bytes
/// are its seeded ciphertexts (seed + b per input polynomial) plus the cf2
/// truncation's traffic (COT extension included), which depends only on
/// the 4 outputs: so two layers of 16 and 600 inputs (1 and 3 input
/// polynomials at N = 256) differ by exactly two seeded ciphertexts.
#[test]
fn he_linear_layer_costs() {
    let mut p = hush_primitives::Prg::new(hush_primitives::Block(3));
    let mk = |n_in: usize, p: &mut hush_primitives::Prg| {
        let (mut b, x) = crate::model::Builder::new("dense", &[n_in]);
        let w: Vec<f32> = (0..n_in * 4).map(|_| ((p.next_u64() % 200) as f32 - 100.0) / 400.0).collect();
        let y = b.dense(x, 4, &w, &[0.0; 4]);
        Arc::new(Model::from_bytes(&b.finish(y)).unwrap())
    };
    let o = he_opts(Mode::Interactive);
    let ctx = hush_rlwe::Context::new(hush_rlwe::Params::insecure_test_n256()).unwrap();
    let ct = hush_rlwe::he::SeededCt::wire_len(&ctx) as u64;
    let mut sent = Vec::new();
    for n_in in [16usize, 600] {
        let m = mk(n_in, &mut p);
        let x = input_for(&m, 5);
        let run = secure(&m, &x, &o);
        let r = reference::run_f64(&Plan::new(&m, FixedConfig::default()).unwrap(), &x).unwrap();
        within("dense", &run.inference.logits, &r, 2.0);
        let l = &run.inference.report.layers[0];
        assert_eq!(l.kind, "linear");
        assert!(l.bytes_sent >= ct, "n_in {n_in}: {} bytes sent, one upload alone is {ct}", l.bytes_sent);
        sent.push(l.bytes_sent);
    }
    assert_eq!(sent[1] - sent[0], 2 * ct, "client → server bytes of 16- and 600-input layers: {sent:?}, seeded ciphertext {ct} bytes");
}

/// A linear layer read only by a ReLU leaves its truncation to the ReLU
/// (cf2's known-sign truncation after ReLU): the linear step then sends
/// exactly its seeded ciphertexts and nothing else, and the output stays
/// within the bound.
#[test]
fn linear_then_relu_truncates_after_the_relu() {
    let mut p = hush_primitives::Prg::new(hush_primitives::Block(4));
    let (mut b, x) = crate::model::Builder::new("dense-relu", &[40]);
    let w: Vec<f32> = (0..40 * 6).map(|_| ((p.next_u64() % 200) as f32 - 100.0) / 300.0).collect();
    let y = b.dense(x, 6, &w, &[0.1, -0.1, 0.0, 0.2, -0.3, 0.05]);
    let r = b.relu(y);
    let m = Arc::new(Model::from_bytes(&b.finish(r)).unwrap());
    let ctx = hush_rlwe::Context::new(hush_rlwe::Params::insecure_test_n256()).unwrap();
    let ct = hush_rlwe::he::SeededCt::wire_len(&ctx) as u64;
    for seed in [1u128, 2, 3] {
        let x = input_for(&m, seed);
        let run = secure(&m, &x, &he_opts(Mode::Interactive));
        let rf = reference::run_f64(&Plan::new(&m, FixedConfig::default()).unwrap(), &x).unwrap();
        within("dense→relu", &run.inference.logits, &rf, 2.0);
        let l = &run.inference.report.layers;
        assert_eq!((l[0].kind, l[1].kind), ("linear", "relu"));
        assert_eq!(l[0].bytes_sent, ct, "the linear step sends its one seeded ciphertext only");
    }
}

fn rnd_w(p: &mut hush_primitives::Prg, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| ((p.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32 * scale).collect()
}

fn conv_w(b: &mut crate::model::Builder, p: &mut hush_primitives::Prg, x: crate::model::V, co: usize, k: usize, s: usize, pad: usize) -> crate::model::V {
    let ci = b.shape(x)[0];
    let w = rnd_w(p, co * ci * k * k, 1.0 / ((ci * k * k) as f32).sqrt());
    let bias = rnd_w(p, co, 0.1);
    b.conv(x, co, [k, k], [s, s], [pad; 4], &w, &bias)
}

/// A ResNet-shaped net exercising every truncation placement of the HE
/// modes (`engine::Pending`): conv → ReLU → MaxPool (the MaxPool applies
/// ReLU and truncation), an identity block (conv → Add ← x → ReLU), a
/// downsampling block (conv → Add ← conv → ReLU: one input truncated at
/// the Add), an Add whose output has two readers (no deferral), and a
/// conv read by two steps (truncated at once).
fn placement_net() -> Vec<u8> {
    let mut p = hush_primitives::Prg::new(hush_primitives::Block(41));
    let (mut b, x) = crate::model::Builder::new("placement", &[3, 10, 10]);
    let c0 = conv_w(&mut b, &mut p, x, 4, 3, 1, 1);
    let r0 = b.relu(c0);
    let m0 = b.maxpool(r0, [3, 3], [2, 2], [1, 1, 1, 1]);
    // identity block
    let c1 = conv_w(&mut b, &mut p, m0, 4, 3, 1, 1);
    let r1 = b.relu(c1);
    let c2 = conv_w(&mut b, &mut p, r1, 4, 1, 1, 0);
    let s1 = b.add(c2, m0);
    let r2 = b.relu(s1);
    // downsampling block
    let c3 = conv_w(&mut b, &mut p, r2, 6, 3, 2, 1);
    let r3 = b.relu(c3);
    let c4 = conv_w(&mut b, &mut p, r3, 6, 1, 1, 0);
    let d4 = conv_w(&mut b, &mut p, r2, 6, 1, 2, 0);
    let s2 = b.add(c4, d4);
    let r4 = b.relu(s2);
    // an Add with two readers: truncated where the reference truncates
    let c5 = conv_w(&mut b, &mut p, r4, 6, 1, 1, 0);
    let s3 = b.add(c5, r4);
    let r5 = b.relu(s3);
    let s4 = b.add(s3, r5);
    // a conv read by two steps
    let c6 = conv_w(&mut b, &mut p, s4, 6, 1, 1, 0);
    let r6 = b.relu(c6);
    let s5 = b.add(c6, r6);
    let g = b.global_avgpool(s5);
    let f = b.flatten(g);
    let (w, bb) = (rnd_w(&mut p, 60, 0.5), rnd_w(&mut p, 10, 0.1));
    let y = b.dense(f, 10, &w, &bb);
    b.finish(y)
}

/// Where the HE modes truncate (public, from the architecture): with the
/// fusing family, c0 → ReLU → MaxPool truncates in the MaxPool, c1 in its
/// ReLU, c2 across the identity Add in r2's ReLU, c3 in its ReLU, the
/// downsampling block once at the Add (d4) and once in r4, c5 not (its Add
/// has two readers), c6 not (two readers), the dense layer at once; a
/// non-fusing family truncates all nine linear layers.
#[test]
fn truncation_placement_of_the_fusing_family() {
    let m = Model::from_bytes(&placement_net()).unwrap();
    let plan = Plan::new(&m, FixedConfig::default()).unwrap();
    let (lin, relu, add, pool) = crate::engine::truncation_placement(&plan, true);
    assert_eq!((lin, relu, add, pool), (3, 4, 1, 1), "linear steps truncating at once, ReLUs, Adds, MaxPools");
    assert_eq!(crate::engine::truncation_placement(&plan, false), (9, 0, 0, 0));
}

/// The moved truncations keep the reference's results (⌊(a + s·2^f)/2^f⌋
/// = ⌊a/2^f⌋ + s; max and ReLU commute with ⌊·/2^f⌋), within the faithful
/// truncation's bound, in both HE modes and over several inputs; a wrong
/// lift or a missing truncation would be off by factors of 2^12. The
/// per-layer costs show where the truncations went: the ReLU that feeds
/// the MaxPool and the linear steps that defer send only their HE
/// messages, the downsampling Add runs one truncation.
#[test]
fn he_modes_moved_truncations_match_the_reference() {
    let m = Arc::new(Model::from_bytes(&placement_net()).unwrap());
    let plan = Plan::new(&m, FixedConfig::default()).unwrap();
    for mode in [Mode::Interactive, Mode::Silent] {
        for seed in [31u128, 32] {
            let x = input_for(&m, seed);
            let r = reference::run_f64(&plan, &x).unwrap();
            let run = secure(&m, &x, &he_opts(mode.clone()));
            within(&format!("placement ({}, seed {seed})", mode.name()), &run.inference.logits, &r, 16.0);
            let l = &run.inference.report.layers;
            let relu_into_pool = &l[1];
            assert_eq!((relu_into_pool.kind, relu_into_pool.rounds, relu_into_pool.bytes_sent), ("relu", 0, 0), "the ReLU before the MaxPool passes its input through");
            assert!(l[0].kind == "linear" && l[0].rounds <= 2, "conv → ReLU: the HE flights only ({} rounds)", l[0].rounds);
            let adds: Vec<_> = l.iter().filter(|c| c.kind == "add").map(|c| c.rounds).collect();
            assert_eq!(adds.iter().filter(|&&r| r > 0).count(), 1, "one Add (the downsampling block's) truncates: {adds:?}");
        }
    }
}
