//! Tests: model loading (hostile files), reference vs float, the linear
//! protocol's correctness and cost, secure == reference for every operator
//! and for small residual and Concat networks, and the runtime's failure
//! isolation.

use crate::engine::{SharedModule, SERVER};
use crate::model::{Builder, Model, Post, V};
use crate::runtime::{self, Options};
use crate::{linear, reference, FixedConfig, Plan};
use hush_primitives::{Block, Prg};
use hush_tee::{InProcessModule, Module, ModuleRole};
use hush_transport::{Channel, MemChannel};
use std::sync::Arc;

fn rnd(p: &mut Prg, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| ((p.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32 * scale).collect()
}

fn conv(b: &mut Builder, p: &mut Prg, x: V, co: usize, k: usize, s: usize, pad: usize) -> V {
    let ci = b.shape(x)[0];
    let sc = 1.0 / ((ci * k * k) as f32).sqrt();
    let w = rnd(p, co * ci * k * k, sc);
    let bias = rnd(p, co, 0.1);
    b.conv(x, co, [k, k], [s, s], [pad; 4], &w, &bias)
}

/// One model per operator (plus the layers needed around it).
pub(crate) fn operator_models() -> Vec<(&'static str, Vec<u8>)> {
    let mut p = Prg::new(Block(77));
    let mut out = Vec::new();
    {
        let (mut b, x) = Builder::new("conv", &[2, 7, 7]);
        let y = conv(&mut b, &mut p, x, 3, 3, 2, 1);
        out.push(("conv", b.finish(y)));
    }
    {
        let (mut b, x) = Builder::new("dense", &[12]);
        let (w, bb) = (rnd(&mut p, 60, 0.3), rnd(&mut p, 5, 0.1));
        let y = b.dense(x, 5, &w, &bb);
        out.push(("dense", b.finish(y)));
    }
    {
        let (mut b, x) = Builder::new("scale", &[3, 4, 4]);
        let (s, t) = (rnd(&mut p, 3, 2.0), rnd(&mut p, 3, 0.5));
        let y = b.scale(x, &s, &t);
        out.push(("scale", b.finish(y)));
    }
    {
        let (mut b, x) = Builder::new("add_const", &[2, 3, 3]);
        let c = rnd(&mut p, 18, 1.0);
        let y = b.add_const(x, &c);
        out.push(("add_const", b.finish(y)));
    }
    {
        let (mut b, x) = Builder::new("relu", &[40]);
        let y = b.relu(x);
        out.push(("relu", b.finish(y)));
    }
    {
        let (mut b, x) = Builder::new("maxpool", &[2, 7, 7]);
        let y = b.maxpool(x, [3, 3], [2, 2], [1, 1, 1, 1]);
        out.push(("maxpool", b.finish(y)));
    }
    {
        let (mut b, x) = Builder::new("avgpool", &[2, 6, 6]);
        let y = b.avgpool(x, [3, 3], [2, 2], [1, 1, 1, 1], false);
        let z = b.avgpool(y, [2, 2], [1, 1], [0; 4], true);
        out.push(("avgpool", b.finish(z)));
    }
    {
        let (mut b, x) = Builder::new("global_avgpool", &[3, 5, 5]);
        let y = b.global_avgpool(x);
        out.push(("global_avgpool", b.finish(y)));
    }
    {
        let (mut b, x) = Builder::new("reshape_add", &[2, 3, 3]);
        let f = b.flatten(x);
        let r = b.reshape(f, &[3, 6]);
        let r2 = b.reshape(x, &[3, 6]);
        let y = b.add(r, r2);
        out.push(("reshape+add", b.finish(y)));
    }
    {
        let (mut b, x) = Builder::new("concat", &[2, 4, 4]);
        let a = b.relu(x);
        let y = b.concat(&[x, a, x], 0);
        let z = b.concat(&[y, y], 2);
        out.push(("concat", b.finish(z)));
    }
    out
}

/// A small residual network (conv-relu-conv + skip, maxpool, GAP, dense).
pub(crate) fn residual_net() -> Vec<u8> {
    let mut p = Prg::new(Block(5));
    let (mut b, x) = Builder::new("resnet-mini", &[3, 8, 8]);
    let c0 = conv(&mut b, &mut p, x, 4, 3, 1, 1);
    let r0 = b.relu(c0);
    let c1 = conv(&mut b, &mut p, r0, 4, 3, 1, 1);
    let r1 = b.relu(c1);
    let c2 = conv(&mut b, &mut p, r1, 4, 3, 1, 1);
    let s = b.add(c2, r0);
    let r2 = b.relu(s);
    let m = b.maxpool(r2, [2, 2], [2, 2], [0; 4]);
    let g = b.global_avgpool(m);
    let f = b.flatten(g);
    let (w, bb) = (rnd(&mut p, 40, 0.5), rnd(&mut p, 10, 0.1));
    let y = b.dense(f, 10, &w, &bb);
    b.postprocess(Post::Argmax);
    b.finish(y)
}

/// A small Concat network (SqueezeNet-style fire module).
pub(crate) fn concat_net() -> Vec<u8> {
    let mut p = Prg::new(Block(6));
    let (mut b, x) = Builder::new("fire-mini", &[3, 9, 9]);
    let c0 = conv(&mut b, &mut p, x, 6, 3, 2, 0);
    let r0 = b.relu(c0);
    let sq = conv(&mut b, &mut p, r0, 3, 1, 1, 0);
    let sr = b.relu(sq);
    let e1 = conv(&mut b, &mut p, sr, 4, 1, 1, 0);
    let e3 = conv(&mut b, &mut p, sr, 4, 3, 1, 1);
    let r1 = b.relu(e1);
    let r3 = b.relu(e3);
    let cat = b.concat(&[r1, r3], 0);
    let ap = b.avgpool(cat, [2, 2], [2, 2], [0; 4], true);
    let f = b.flatten(ap);
    let n = b.shape(f)[0];
    let (w, bb) = (rnd(&mut p, n * 4, 0.3), rnd(&mut p, 4, 0.1));
    let y = b.dense(f, 4, &w, &bb);
    b.finish(y)
}

pub(crate) fn input_for(m: &Model, seed: u128) -> Vec<f64> {
    let mut p = Prg::new(Block(seed));
    rnd(&mut p, m.input_len(), 2.0).into_iter().map(|v| v as f64).collect()
}

fn opts(proto: &str) -> Options {
    Options { proto: proto.into(), chunk: 1000, ..Default::default() }
}

fn secure(m: &Arc<Model>, x: &[f64], o: &Options) -> Vec<f64> {
    let shape = m.input_shape.clone();
    runtime::run_local(m.clone(), &shape, x, o, false, |_, _| {}).unwrap().inference.logits
}

#[test]
fn secure_fss_equals_reference_for_every_operator() {
    for (name, bytes) in operator_models() {
        let m = Arc::new(Model::from_bytes(&bytes).unwrap_or_else(|e| panic!("{name}: {e}")));
        let plan = Plan::new(&m, FixedConfig::default()).unwrap();
        for seed in [1u128, 2] {
            let x = input_for(&m, seed);
            let r = reference::run_f64(&plan, &x).unwrap();
            let s = secure(&m, &x, &opts("fss"));
            assert_eq!(s, r, "{name}: secure (fss) differs from the fixed-point reference");
            // fixed point vs float: errors of a few ulps per truncation
            let f = crate::float_ref::run(&m, &x).unwrap();
            for (a, b) in r.iter().zip(&f) {
                assert!((a - b).abs() < 4e-3, "{name}: fixed {a} vs float {b}");
            }
        }
    }
}

#[test]
fn secure_fss_equals_reference_residual_and_concat_nets() {
    for bytes in [residual_net(), concat_net()] {
        let m = Arc::new(Model::from_bytes(&bytes).unwrap());
        let plan = Plan::new(&m, FixedConfig::default()).unwrap();
        let x = input_for(&m, 3);
        let r = reference::run_f64(&plan, &x).unwrap();
        assert_eq!(secure(&m, &x, &opts("fss")), r, "{}", m.name);
        let f = crate::float_ref::run(&m, &x).unwrap();
        for (a, b) in r.iter().zip(&f) {
            assert!((a - b).abs() < 1e-2, "{}: fixed {a} vs float {b}", m.name);
        }
        // other ring sizes: ℓ = 64 with 16 fraction bits
        let cfg = FixedConfig::new(64, 16).unwrap();
        let plan64 = Plan::new(&m, cfg).unwrap();
        let o = Options { cfg, ..opts("fss") };
        assert_eq!(secure(&m, &x, &o), reference::run_f64(&plan64, &x).unwrap());
    }
}

/// TAMI's truncation is faithful (error ≤ 1 ulp per truncation), not exact:
/// the secure result stays within a few ulps of the reference.
#[test]
fn secure_tami_within_truncation_bound() {
    let m = Arc::new(Model::from_bytes(&residual_net()).unwrap());
    let plan = Plan::new(&m, FixedConfig::default()).unwrap();
    let x = input_for(&m, 4);
    let r = reference::run_f64(&plan, &x).unwrap();
    let s = secure(&m, &x, &opts("tami"));
    let ulp = 1.0 / 4096.0;
    for (a, b) in s.iter().zip(&r) {
        assert!((a - b).abs() <= 16.0 * ulp, "tami {a} vs reference {b}");
    }
}

fn module_pair() -> (SharedModule, SharedModule) {
    let mut s = SharedModule::new(Box::new(InProcessModule::new(Module::with_rng(Prg::new(Block(11))))));
    let mut c = SharedModule::new(Box::new(InProcessModule::new(Module::with_rng(Prg::new(Block(12))))));
    let (mut a, mut b) = MemChannel::pair();
    let t = std::thread::spawn(move || {
        hush_tee::establish(&mut c, &mut b, ModuleRole::Receiver).unwrap();
        c
    });
    hush_tee::establish(&mut s, &mut a, ModuleRole::Sender).unwrap();
    (s, t.join().unwrap())
}

/// Module-dealt linear layer: the shares reconstruct to W·x exactly (the
/// reference's pre-truncation value), and it costs exactly one one-way
/// client→server message of the activation's size.
#[test]
fn linear_layer_exact_and_one_message() {
    let mut p = Prg::new(Block(3));
    let (mut b, x) = Builder::new("lin", &[3, 6, 6]);
    let y = conv(&mut b, &mut p, x, 5, 3, 1, 1);
    let m = Model::from_bytes(&b.finish(y)).unwrap();
    for cfg in [FixedConfig::default(), FixedConfig::new(64, 16).unwrap(), FixedConfig::new(32, 8).unwrap()] {
        let plan = Plan::new(&m, cfg).unwrap();
        let crate::plan::StepKind::Linear { op: Some(op), .. } = &plan.steps[0].kind else { panic!() };
        let op = op.clone();
        let (mut sm, mut cm) = module_pair();
        crate::engine::load_weights(&plan, &mut sm).unwrap();
        let mask = cfg.mask();
        let xv: Vec<u64> = (0..op.in_len()).map(|_| p.next_u64() & mask).collect();
        let xs: Vec<u64> = (0..op.in_len()).map(|_| p.next_u64() & mask).collect();
        let xc: Vec<u64> = xv.iter().zip(&xs).map(|(a, b)| a.wrapping_sub(*b) & mask).collect();
        let (mut a, mut bch) = MemChannel::pair();
        let out_len = op.out_len();
        let t = std::thread::spawn(move || {
            let r = linear::client(&mut bch, &mut cm, &cfg, 0, 0, &xc, out_len).unwrap();
            (r, bch.cost())
        });
        let ys = linear::server(&mut a, &mut sm, &cfg, 0, 0, &op, &xs).unwrap();
        let (yc, ccost) = t.join().unwrap();
        let mut want = vec![0u64; out_len];
        op.apply(cfg.bits, &xv, &mut want);
        let got: Vec<u64> = ys.iter().zip(&yc).map(|(a, b)| a.wrapping_add(*b) & mask).collect();
        assert_eq!(got, want);
        assert_eq!(ccost.bytes_sent, (op.in_len() * cfg.elem_bytes()) as u64);
        assert_eq!(ccost.bytes_recv, 0);
        assert_eq!(a.cost().rounds, 1);
        assert_eq!(a.cost().bytes_sent, 0);
        // a second batch of the same layer uses fresh masks; the same batch is refused
        let _ = SERVER;
    }
}

/// Per-layer metering of a full run: each linear step's client→server
/// bytes are the activation's size plus the truncation's bytes, which the
/// truncation-only step (AveragePool) isolates.
#[test]
fn per_layer_costs_pin_linear_message() {
    let (mut b, x) = Builder::new("two", &[4, 4, 4]);
    let mut p = Prg::new(Block(8));
    let c = conv(&mut b, &mut p, x, 4, 3, 1, 1);
    let a = b.avgpool(c, [1, 1], [1, 1], [0; 4], true); // truncation only, same size
    let m = Arc::new(Model::from_bytes(&b.finish(a)).unwrap());
    let x = input_for(&m, 1);
    let run = runtime::run_local(m.clone(), &[4, 4, 4], &x, &opts("fss"), false, |_, _| {}).unwrap();
    let l = &run.inference.report.layers;
    assert_eq!(l.len(), 2);
    let act = 64 * FixedConfig::default().elem_bytes() as u64;
    assert_eq!(l[0].bytes_sent - l[1].bytes_sent, act, "linear layer: exactly one activation-size message client→server");
    assert_eq!(l[0].bytes_recv, l[1].bytes_recv, "linear layer: nothing server→client");
    // the client's F rides in the same flight as its truncation message: no extra round
    assert_eq!(l[0].rounds, l[1].rounds);
}

#[test]
fn loader_rejects_hostile_files_naming_the_node() {
    let good = residual_net();
    assert!(Model::from_bytes(&good).is_ok());
    for cut in [0, 5, 11, 40, good.len() - 3] {
        assert!(Model::from_bytes(&good[..cut]).is_err(), "truncated at {cut}");
    }
    let mut bad = good.clone();
    bad[0] = b'X';
    assert!(Model::from_bytes(&bad).unwrap_err().to_string().contains("magic"));
    let hlen = u32::from_le_bytes(good[8..12].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&good[12..12 + hlen]).unwrap().to_string();
    let with = |h: String| {
        let mut b = crate::model::MAGIC.to_vec();
        b.extend_from_slice(&(h.len() as u32).to_le_bytes());
        b.extend_from_slice(h.as_bytes());
        b.extend_from_slice(&good[12 + hlen..]);
        Model::from_bytes(&b)
    };
    let e = with(header.replacen("\"op\":\"relu\"", "\"op\":\"gelu\"", 1)).unwrap_err().to_string();
    assert!(e.contains("relu_") && e.contains("gelu"), "{e}");
    let e = with(header.replacen("\"shape\":[4,8,8]", "\"shape\":[4,8,9]", 1)).unwrap_err().to_string();
    assert!(e.contains("conv_1") && e.contains("shape"), "{e}");
    let e = with(header.replacen("\"offset\":0", "\"offset\":999999999", 1)).unwrap_err().to_string();
    assert!(e.contains("outside the data"), "{e}");
    let e = with(header.replacen("\"shape\":[4,3,3,3]", "\"shape\":[4000000,3000,3,3]", 1)).unwrap_err().to_string();
    assert!(e.contains("out of range") || e.contains("outside"), "{e}");
    assert!(with(header.replacen("\"inputs\":[\"v1\"]", "\"inputs\":[\"v99\"]", 1)).is_err());
    assert!(with("{not json".into()).is_err());
    // big ring values: weights that do not fit are refused with the node's name
    let (mut b, x) = Builder::new("big", &[2]);
    let y = b.dense(x, 1, &[1e9, 1.0], &[0.0]);
    let m = Model::from_bytes(&b.finish(y)).unwrap();
    let e = Plan::new(&m, FixedConfig::default()).err().unwrap().to_string();
    assert!(e.contains("dense_1"), "{e}");
}

fn log_sink() -> Arc<dyn Fn(String) + Send + Sync> {
    Arc::new(|_s: String| {})
}

/// The server keeps serving other clients when one disconnects
/// mid-inference, one sends garbage, and one has an input of the wrong shape.
#[test]
fn server_isolates_failing_sessions() {
    let m = Arc::new(Model::from_bytes(&residual_net()).unwrap());
    let plan = Plan::new(&m, FixedConfig::default()).unwrap();
    let o = opts("fss");
    let h = runtime::serve(m.clone(), "127.0.0.1:0", o.clone(), log_sink()).unwrap();
    let addr = h.addr.to_string();
    let x = input_for(&m, 9);
    let want = reference::run_f64(&plan, &x).unwrap();
    // concurrent good clients
    let good: Vec<_> = (0..3)
        .map(|_| {
            let (addr, o, x) = (addr.clone(), o.clone(), x.clone());
            std::thread::spawn(move || {
                let mut s = runtime::connect(&addr, &o).unwrap();
                let r = s.infer(&[1, 3, 8, 8], &x, |_, _| {}).unwrap();
                let r2 = s.infer(&[3, 8, 8], &x, |_, _| {}).unwrap();
                s.close().unwrap();
                (r.logits, r2.logits)
            })
        })
        .collect();
    // a client that disconnects mid-inference
    {
        let s = runtime::connect(&addr, &o).unwrap();
        let xc = x.clone();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let mut s = s;
            let _ = s.infer(&[3, 8, 8], &xc, |done, _| {
                if done == 3 {
                    panic!("simulated client crash mid-inference")
                }
            });
        }));
        assert!(r.is_err());
    }
    // a client that sends garbage instead of a hello
    {
        let mut ch = hush_transport::TcpChannel::connect(addr.as_str(), Default::default()).unwrap();
        ch.send(b"\x00garbage").unwrap();
        let _ = ch.recv();
    }
    // a client with the wrong input shape gets a clear error before anything is sent
    {
        let mut s = runtime::connect(&addr, &o).unwrap();
        let e = s.infer(&[3, 9, 9], &vec![0.0; 243], |_, _| {}).err().unwrap().to_string();
        assert!(e.contains("shape") && e.contains("[3, 8, 8]"), "{e}");
        let r = s.infer(&[3, 8, 8], &x, |_, _| {}).unwrap();
        assert_eq!(r.logits, want);
        s.close().unwrap();
    }
    for g in good {
        let (a, b) = g.join().unwrap();
        assert_eq!(a, want);
        assert_eq!(b, want);
    }
    let mut s = runtime::connect(&addr, &o).unwrap();
    assert_eq!(s.infer(&[3, 8, 8], &x, |_, _| {}).unwrap().logits, want);
    s.close().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(h.sessions_failed.load(std::sync::atomic::Ordering::SeqCst) >= 2);
    assert!(h.sessions_ok.load(std::sync::atomic::Ordering::SeqCst) >= 4);
    h.shutdown();
}

/// One session of `n` inferences (server of `serve_session` on a thread):
/// per inference the ring output, the client's online module crossings,
/// and what had been pre-dealt for it (items, of how many).
fn session_runs(m: &Arc<Model>, xs: &[Vec<f64>], server_opts: &Options, client_opts: &Options) -> Vec<(Vec<u64>, u64, usize, usize)> {
    let (mut a, b) = MemChannel::pair();
    let (m2, p2, o2) = (m.clone(), Plan::new(m, server_opts.cfg).unwrap(), server_opts.clone());
    let srv = std::thread::spawn(move || runtime::serve_session(&mut a, &m2, &p2, &o2).unwrap());
    let mut s = runtime::ClientSession::start(b, client_opts).unwrap();
    let mut out = Vec::new();
    for x in xs {
        let (items, total) = (s.predealt().items, s.predealt().total_items);
        let xq = s.plan.encode_input(x).unwrap();
        let (y, layers) = s.infer_ring_costs(&xq).unwrap();
        out.push((y, layers.iter().map(|l| l.module_crossings).sum(), items, total));
    }
    s.close().unwrap();
    assert_eq!(srv.join().unwrap(), xs.len());
    out
}

/// Pre-dealing: with everything within the budget the secure output still
/// equals the fixed-point reference and the online phase makes no module
/// crossing, inference after inference (both parties pre-deal the next
/// one in lock-step); with a small budget the rest is dealt online, and
/// with 0 nothing is pre-dealt — the output is the same either way.
#[test]
fn predealing_keeps_reference_output_and_empties_the_online_module_crossings() {
    for bytes in [residual_net(), concat_net()] {
        let m = Arc::new(Model::from_bytes(&bytes).unwrap());
        let plan = Plan::new(&m, FixedConfig::default()).unwrap();
        let xs: Vec<Vec<f64>> = (0..3).map(|i| input_for(&m, 20 + i)).collect();
        let refs: Vec<Vec<u64>> = xs.iter().map(|x| reference::run(&plan, &plan.encode_input(x).unwrap()).unwrap()).collect();
        let o = opts("fss");
        // everything fits the default budget
        for (i, (y, cross, items, total)) in session_runs(&m, &xs, &o, &o).into_iter().enumerate() {
            assert_eq!(y, refs[i], "{}: inference {i} differs from the reference", m.name);
            assert_eq!(cross, 0, "{}: inference {i} crossed the module online", m.name);
            assert!(total > 0 && items == total, "{}: {items} of {total} pre-dealt", m.name);
        }
        // a budget for part of the schedule (the client's smaller budget wins)
        let small = Options { predeal_mem: 300 << 10, ..o.clone() };
        for (i, (y, cross, items, total)) in session_runs(&m, &xs, &o, &small).into_iter().enumerate() {
            assert_eq!(y, refs[i], "{}: partial pre-dealing, inference {i}", m.name);
            assert!(items > 0 && items < total, "{}: {items} of {total} pre-dealt with a small budget", m.name);
            assert!(cross > 0);
        }
        // disabled (the server's 0 wins)
        let off = Options { predeal_mem: 0, ..o.clone() };
        for (i, (y, cross, items, _)) in session_runs(&m, &xs, &off, &o).into_iter().enumerate() {
            assert_eq!(y, refs[i], "{}: without pre-dealing, inference {i}", m.name);
            assert_eq!(items, 0);
            assert!(cross > 0);
        }
    }
    // TAMI, and the server's side of a local run: no online crossings either
    let m = Arc::new(Model::from_bytes(&residual_net()).unwrap());
    let plan = Plan::new(&m, FixedConfig::default()).unwrap();
    let x = input_for(&m, 30);
    let r = reference::run_f64(&plan, &x).unwrap();
    for proto in ["fss", "tami"] {
        let run = runtime::run_local(m.clone(), &m.input_shape.clone(), &x, &opts(proto), false, |_, _| {}).unwrap();
        let c: u64 = run.inference.report.layers.iter().map(|l| l.module_crossings).sum();
        let s: u64 = run.server_layers.iter().map(|l| l.module_crossings).sum();
        assert_eq!((c, s), (0, 0), "{proto}: online module crossings");
        assert!(run.inference.report.predeal_crossings > 0);
        let v = runtime::run_json(&m, &run, &opts(proto));
        assert_eq!(v["dealing_s"].as_f64(), Some(0.0));
        assert!(v["offline_s"].as_f64().unwrap() >= v["predeal_s"].as_f64().unwrap());
        if proto == "fss" {
            assert_eq!(run.inference.logits, r);
        } else {
            for (a, b) in run.inference.logits.iter().zip(&r) {
                assert!((a - b).abs() <= 16.0 / 4096.0, "tami {a} vs reference {b}");
            }
        }
    }
}

/// A server at its session limit refuses new clients without ever blocking
/// its accept loop on one of them: a connection that stays silent (and so
/// would wait for its refusal) does not delay the refusal of the next
/// client, nor the service of a client after a slot frees up.
#[test]
fn refused_silent_client_does_not_block_the_accept_loop() {
    let m = Arc::new(Model::from_bytes(&residual_net()).unwrap());
    let plan = Plan::new(&m, FixedConfig::default()).unwrap();
    let mut o = opts("fss");
    o.max_sessions = 1;
    let h = runtime::serve(m.clone(), "127.0.0.1:0", o.clone(), log_sink()).unwrap();
    let addr = h.addr.to_string();
    let x = input_for(&m, 3);
    let want = reference::run_f64(&plan, &x).unwrap();
    // A holds the only session slot.
    let mut a = runtime::connect(&addr, &o).unwrap();
    // B connects and says nothing.
    let _b = std::net::TcpStream::connect(&addr).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    // C must be refused promptly (the old accept loop waited 60 s on B).
    let (tx, rx) = std::sync::mpsc::channel();
    {
        let (addr, o) = (addr.clone(), o.clone());
        std::thread::spawn(move || {
            let r = runtime::connect(&addr, &o).map(|_| ());
            let _ = tx.send(r.err().map(|e| e.to_string()));
        });
    }
    let refused = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("refusal of C blocked behind a silent client");
    let e = refused.expect("C must be refused while A holds the only slot");
    assert!(e.contains("busy"), "{e}");
    // A still works, then frees the slot; D is served.
    assert_eq!(a.infer(&[3, 8, 8], &x, |_, _| {}).unwrap().logits, want);
    a.close().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let mut d = runtime::connect(&addr, &o).unwrap();
    assert_eq!(d.infer(&[3, 8, 8], &x, |_, _| {}).unwrap().logits, want);
    d.close().unwrap();
    h.shutdown();
}

// ---------------------------------------------------------------------
// Providers: the same operator suite on the in-process module, the module
// process and the dealer service, equal bit for bit for the same seed.

const TEST_SEED: [u8; 32] = [0x5e; 32];

fn start_dealer(seed: Option<[u8; 32]>) -> hush_tee::dealer::DealerHandle {
    let mut cfg = hush_tee::dealer::DealerConfig::new(hush_transport::LinkSecurity::Insecure, hush_2pc::deal::kinds());
    cfg.insecure_test_seed = seed;
    hush_tee::dealer::serve("127.0.0.1:0", cfg, log_sink()).unwrap()
}

fn dealer_mode(h: &hush_tee::dealer::DealerHandle) -> runtime::Mode {
    runtime::Mode::Dealer { addr: h.addr.to_string(), pin: None }
}

/// The three providers, all with the session seed `seed` (insecure, tests only).
fn provider_opts(proto: &str, seed: [u8; 32], dealer: &hush_tee::dealer::DealerHandle) -> Vec<(&'static str, Options)> {
    let base = Options { insecure_test_seed: Some(seed), ..opts(proto) };
    vec![
        ("in-process module", base.clone()),
        ("module process", Options { tee: "out-of-process".into(), ..base.clone() }),
        ("dealer service", Options { mode: dealer_mode(dealer), insecure_test_seed: None, ..base }),
    ]
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn operator_suite_is_bit_identical_on_all_three_providers() {
    let dealer = start_dealer(Some(TEST_SEED));
    let other_seed = start_dealer(Some([0x77; 32]));
    let mut models: Vec<(String, Vec<u8>)> = operator_models().into_iter().map(|(n, b)| (n.to_string(), b)).collect();
    models.push(("residual".into(), residual_net()));
    models.push(("concat".into(), concat_net()));
    let mut seed_matters = false;
    for (name, bytes) in &models {
        let m = Arc::new(Model::from_bytes(bytes).unwrap());
        let plan = Plan::new(&m, FixedConfig::default()).unwrap();
        let x = input_for(&m, 5);
        for proto in ["fss", "tami"] {
            let mut outs = Vec::new();
            for (prov, o) in provider_opts(proto, TEST_SEED, &dealer) {
                let run = runtime::run_local(m.clone(), &m.input_shape.clone(), &x, &o, false, |_, _| {}).unwrap_or_else(|e| panic!("{name}/{proto} on {prov}: {e}"));
                if prov == "dealer service" {
                    assert!(run.inference.report.module.contains("dealer service"), "{}", run.inference.report.module);
                }
                outs.push((prov, bits(&run.inference.logits)));
            }
            for (prov, o) in &outs[1..] {
                assert_eq!(o, &outs[0].1, "{name}/{proto}: {prov} differs from {}", outs[0].0);
            }
            if proto == "fss" {
                assert_eq!(outs[0].1, bits(&reference::run_f64(&plan, &x).unwrap()), "{name}: fss must equal the reference");
            } else {
                // TAMI's truncation is faithful, not exact: its output depends
                // on the dealt randomness, so the comparison above has power.
                let o = Options { mode: dealer_mode(&other_seed), ..opts(proto) };
                let r = runtime::run_local(m.clone(), &m.input_shape.clone(), &x, &o, false, |_, _| {}).unwrap();
                seed_matters |= bits(&r.inference.logits) != outs[0].1;
            }
        }
    }
    assert!(seed_matters, "no model's TAMI output depends on the seed: the provider comparison would be vacuous");
    let t = std::time::Instant::now();
    while dealer.live_sessions() + other_seed.live_sessions() > 0 {
        assert!(t.elapsed() < std::time::Duration::from_secs(10), "dealer kept sessions after they ended");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    dealer.shutdown();
    other_seed.shutdown();
}

#[test]
fn mode_mismatch_is_refused_naming_both_modes() {
    let dealer = start_dealer(None);
    let m = Arc::new(Model::from_bytes(&residual_net()).unwrap());
    let _plan = Plan::new(&m, FixedConfig::default()).unwrap();
    for (server, client) in [(opts("fss"), Options { mode: dealer_mode(&dealer), ..opts("fss") }), (Options { mode: dealer_mode(&dealer), ..opts("fss") }, opts("fss"))] {
        let (mut a, b) = MemChannel::pair();
        let (m2, p2, o2) = (m.clone(), Plan::new(&m, FixedConfig::default()).unwrap(), server.clone());
        let srv = std::thread::spawn(move || runtime::serve_session(&mut a, &m2, &p2, &o2));
        let e = runtime::ClientSession::start(b, &client).err().expect("mismatch must be refused").to_string();
        assert!(e.contains("mode mismatch") && e.contains("--mode tee") && e.contains("--mode dealer"), "{e}");
        let se = srv.join().unwrap().unwrap_err().to_string();
        assert!(se.contains("mode mismatch"), "{se}");
    }
    let t = std::time::Instant::now();
    while dealer.live_sessions() > 0 {
        assert!(t.elapsed() < std::time::Duration::from_secs(10), "dealer kept the refused session");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    dealer.shutdown();
}

#[test]
fn dealer_that_disappears_mid_session_ends_both_parties_with_a_clear_error() {
    let dealer = start_dealer(None);
    let m = Arc::new(Model::from_bytes(&residual_net()).unwrap());
    let plan = Plan::new(&m, FixedConfig::default()).unwrap();
    let o = Options { mode: dealer_mode(&dealer), ..opts("fss") };
    let (mut a, b) = MemChannel::pair();
    let (m2, p2, o2) = (m.clone(), Plan::new(&m, FixedConfig::default()).unwrap(), o.clone());
    let srv = std::thread::spawn(move || runtime::serve_session(&mut a, &m2, &p2, &o2));
    let mut s = runtime::ClientSession::start(b, &o).unwrap();
    let x = input_for(&m, 6);
    let y = s.infer(&m.input_shape.clone(), &x, |_, _| {}).unwrap();
    assert_eq!(y.logits, reference::run_f64(&plan, &x).unwrap());
    assert_eq!(dealer.live_sessions(), 1);
    dealer.kill();
    let t = std::time::Instant::now();
    let e = s.infer(&m.input_shape.clone(), &x, |_, _| {}).expect_err("the dealer is gone").to_string();
    assert!(e.contains("dealer at") && e.contains("lost"), "client: {e}");
    drop(s);
    let se = srv.join().unwrap().expect_err("the server's session must fail too").to_string();
    assert!(se.contains("dealer"), "server: {se}");
    assert!(t.elapsed() < std::time::Duration::from_secs(15), "{:?}", t.elapsed());
}

/// One dealer serves several concurrent sessions of a TCP server in dealer
/// mode; every client gets the reference output and the dealer keeps
/// nothing afterwards.
#[test]
fn dealer_serves_concurrent_sessions_and_keeps_nothing() {
    let dealer = start_dealer(None);
    let m = Arc::new(Model::from_bytes(&residual_net()).unwrap());
    let plan = Plan::new(&m, FixedConfig::default()).unwrap();
    let o = Options { mode: dealer_mode(&dealer), ..opts("fss") };
    let srv = runtime::serve(m.clone(), "127.0.0.1:0", o.clone(), log_sink()).unwrap();
    let addr = srv.addr.to_string();
    let clients: Vec<_> = (0..4u128)
        .map(|i| {
            let (m, o, addr) = (m.clone(), o.clone(), addr.clone());
            std::thread::spawn(move || {
                let x = input_for(&m, 100 + i);
                let mut s = runtime::connect(&addr, &o).unwrap();
                let y = s.infer(&m.input_shape.clone(), &x, |_, _| {}).unwrap().logits;
                s.close().unwrap();
                (x, y)
            })
        })
        .collect();
    for c in clients {
        let (x, y) = c.join().unwrap();
        assert_eq!(y, reference::run_f64(&plan, &x).unwrap());
    }
    let t = std::time::Instant::now();
    while dealer.live_sessions() > 0 {
        assert!(t.elapsed() < std::time::Duration::from_secs(10), "dealer kept sessions after they ended");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    srv.shutdown();
    dealer.shutdown();
}

// ---------------------------------------------------------------------
// Look-ahead: what is not pre-dealt is dealt by a worker overlapping the
// online evaluation, in the same order as without it.

/// With the look-ahead on or off, with nothing or part of the schedule
/// pre-dealt, on the in-process module and on the dealer service (same
/// seed), with small chunks (many items, a queue that fills up): the
/// outputs are equal bit for bit, and the runs did deal online.
#[test]
fn lookahead_keeps_outputs_bit_identical() {
    let dealer = start_dealer(Some(TEST_SEED));
    for bytes in [residual_net(), concat_net()] {
        let m = Arc::new(Model::from_bytes(&bytes).unwrap());
        let x = input_for(&m, 41);
        for proto in ["fss", "tami"] {
            let mut outs: Vec<(String, Vec<u64>)> = Vec::new();
            for (prov, base) in provider_opts(proto, TEST_SEED, &dealer).into_iter().filter(|(p, _)| *p != "module process") {
                for predeal in [0u64, 20 << 10] {
                    for ahead in [false, true] {
                        let o = Options { chunk: 40, predeal_mem: predeal, lookahead: ahead, ..base.clone() };
                        let run = runtime::run_local(m.clone(), &m.input_shape.clone(), &x, &o, false, |_, _| {}).unwrap_or_else(|e| panic!("{}/{proto}/{prov}: {e}", m.name));
                        let c: u64 = run.inference.report.layers.iter().map(|l| l.module_crossings).sum();
                        let s: u64 = run.server_layers.iter().map(|l| l.module_crossings).sum();
                        assert!(c > 0 && s > 0, "{}/{proto}/{prov}: nothing dealt online ({c}, {s})", m.name);
                        outs.push((format!("{prov}, predeal {predeal}, look-ahead {ahead}"), bits(&run.inference.logits)));
                    }
                }
            }
            for (what, o) in &outs[1..] {
                assert_eq!(o, &outs[0].1, "{}/{proto}: {what} differs from {}", m.name, outs[0].0);
            }
        }
    }
    dealer.shutdown();
}

/// Dealing plans: the server's plan predicts exactly the requests both
/// parties then send (every batch computed from it is served to both
/// roles, nothing is computed in vain), the outputs are bit for bit those
/// without a plan, and the plan's work happens before "ready" (offline).
#[test]
fn dealer_plan_predicts_every_request_and_keeps_outputs_bit_identical() {
    let lines: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let sink = lines.clone();
    let mut cfg = hush_tee::dealer::DealerConfig::new(hush_transport::LinkSecurity::Insecure, hush_2pc::deal::kinds());
    cfg.insecure_test_seed = Some(TEST_SEED);
    let dealer = hush_tee::dealer::serve("127.0.0.1:0", cfg, Arc::new(move |l: String| sink.lock().unwrap().push(l))).unwrap();
    // "… N computed from the dealing plan, M requests served from them)"
    let plan_counts = |l: &str| -> (u64, u64) {
        let num = |key: &str| -> u64 {
            let i = l.find(key).unwrap_or_else(|| panic!("no '{key}' in {l}"));
            l[..i].trim_end().rsplit(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
        };
        (num(" computed from the dealing plan"), num(" requests served from them"))
    };
    for bytes in [residual_net(), concat_net()] {
        let m = Arc::new(Model::from_bytes(&bytes).unwrap());
        let x = input_for(&m, 43);
        for proto in ["fss", "tami"] {
            let mut outs = Vec::new();
            for planned in [false, true] {
                lines.lock().unwrap().clear();
                let o = Options { mode: dealer_mode(&dealer), chunk: 40, predeal_mem: 20 << 10, dealer_plan: planned, ..opts(proto) };
                let run = runtime::run_local(m.clone(), &m.input_shape.clone(), &x, &o, false, |_, _| {}).unwrap_or_else(|e| panic!("{}/{proto}: {e}", m.name));
                outs.push(bits(&run.inference.logits));
                // the session's last connection to end logs the final counts
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                let (computed, served) = loop {
                    let l = lines.lock().unwrap().clone();
                    if l.len() >= 2 {
                        break l.iter().map(|l| plan_counts(l)).max().unwrap();
                    }
                    assert!(std::time::Instant::now() < deadline, "dealer log: {l:?}");
                    std::thread::sleep(std::time::Duration::from_millis(20));
                };
                if planned {
                    assert!(computed > 0, "{}/{proto}: nothing planned", m.name);
                    assert_eq!(served, 2 * computed, "{}/{proto}: every planned batch is asked for by both roles", m.name);
                    assert!(run.inference.report.ready_wait_secs >= 0.0);
                } else {
                    assert_eq!((computed, served), (0, 0), "{}/{proto}: a plan without one", m.name);
                }
            }
            assert_eq!(outs[0], outs[1], "{}/{proto}: the plan changed the output", m.name);
        }
    }
    dealer.shutdown();
}

/// The dealer dies while the client's look-ahead worker is dealing ahead
/// (killed after the first layer, with nothing pre-dealt and many small
/// items left): both parties end with a clear error naming the dealer,
/// promptly — no hang, no panic.
#[test]
fn dealer_dying_during_lookahead_ends_both_parties_with_a_clear_error() {
    for proto in ["fss", "tami"] {
        let dealer = Arc::new(std::sync::Mutex::new(Some(start_dealer(None))));
        let mode = dealer_mode(dealer.lock().unwrap().as_ref().unwrap());
        let m = Arc::new(Model::from_bytes(&residual_net()).unwrap());
        let o = Options { mode, predeal_mem: 0, chunk: 16, ..opts(proto) };
        let (mut a, b) = MemChannel::pair();
        let (m2, p2, o2) = (m.clone(), Plan::new(&m, FixedConfig::default()).unwrap(), o.clone());
        let srv = std::thread::spawn(move || runtime::serve_session(&mut a, &m2, &p2, &o2));
        let mut s = runtime::ClientSession::start(b, &o).unwrap();
        let x = input_for(&m, 7);
        let t = std::time::Instant::now();
        let d2 = dealer.clone();
        let e = s
            .infer(&m.input_shape.clone(), &x, move |done, _| {
                if done == 1 {
                    if let Some(d) = d2.lock().unwrap().take() {
                        d.kill();
                    }
                }
            })
            .expect_err("the dealer is gone")
            .to_string();
        assert!(dealer.lock().unwrap().is_none(), "{proto}: the dealer was not killed during the run");
        assert!(e.contains("dealer"), "{proto}: client: {e}");
        drop(s);
        let se = srv.join().unwrap().expect_err("the server's session must fail too").to_string();
        assert!(se.contains("dealer"), "{proto}: server: {se}");
        assert!(t.elapsed() < std::time::Duration::from_secs(15), "{proto}: {:?}", t.elapsed());
    }
}

/// The ONNX importer refuses exactly what the loader would: same limits.
#[test]
fn onnx_importer_limits_match_the_loader() {
    assert_eq!(hush_onnx::MAX_ELEMS, crate::model::MAX_ELEMS);
    assert_eq!(hush_onnx::MAX_NODES, crate::model::MAX_NODES);
    assert_eq!(hush_onnx::MAX_WEIGHTS, crate::model::MAX_WEIGHTS);
    assert_eq!(hush_onnx::MAGIC, crate::model::MAGIC);
    assert_eq!(hush_onnx::FORMAT_VERSION, crate::model::FORMAT_VERSION);
}

/// `.onnx` files load directly (in process, no Python): the bundled model
/// loads to the same model as its committed `.hushm`.
#[test]
fn onnx_file_loads_like_its_hushm() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models");
    let a = crate::model::Model::load(&root.join("mnist_cnn.onnx")).unwrap();
    let b = crate::model::Model::load(&root.join("mnist_cnn.hushm")).unwrap();
    assert_eq!(a, b);
}

#[test]
fn a_declared_input_range_normalises_raw_inputs_or_refuses_with_a_hint() {
    let (mut b, x) = Builder::new("ranged", &[4]);
    let y = b.relu(x);
    let plain = b.finish(y);
    // no declaration: inputs pass as given
    let m = Model::from_bytes(&plain).unwrap();
    assert_eq!(m.input_range, None);
    assert_eq!(m.prepare_input(&[0.0, 255.0, 3.0, 7.0]).unwrap(), (vec![0.0, 255.0, 3.0, 7.0], None));
    // [0, 1] with the 8-bit raw scale: kept in the file, inside values unchanged
    let s = 1.0 / 255.0;
    let ranged = Model::declare_input_range(&plain, (0.0, 1.0), Some(s)).unwrap();
    let m = Model::from_bytes(&ranged).unwrap();
    assert_eq!((m.input_range, m.input_raw_scale), (Some((0.0, 1.0)), Some(s)));
    assert!(m.header_json.contains("\"range\"") && m.header_json.contains("raw_scale"));
    assert_eq!(m.prepare_input(&[0.0, 0.5, 1.0, 0.25]).unwrap().0, vec![0.0, 0.5, 1.0, 0.25]);
    // raw 8-bit pixels: normalised, with a note saying so
    let (v, note) = m.prepare_input(&[0.0, 255.0, 51.0, 102.0]).unwrap();
    assert!(v.iter().zip([0.0, 1.0, 0.2, 0.4]).all(|(a, b)| (a - b).abs() < 1e-12), "{v:?}");
    assert!(note.unwrap().contains("raw scale"));
    // not raw data and outside: refused naming the value and its index
    let e = m.prepare_input(&[0.0, 0.5, 1.5, 0.25]).unwrap_err().to_string();
    assert!(e.contains("1.5") && e.contains("index 2") && e.contains("[0, 1]"), "{e}");
    // whole numbers beyond what the raw scale brings into range: refused
    let e = m.prepare_input(&[0.0, 300.0, 1.0, 2.0]).unwrap_err().to_string();
    assert!(e.contains("300") && e.contains("still outside"), "{e}");
    // a range without a raw scale: raw pixels refused with the hint
    let strict = Model::from_bytes(&Model::declare_input_range(&plain, (0.0, 1.0), None).unwrap()).unwrap();
    let e = strict.prepare_input(&[0.0, 255.0, 3.0, 7.0]).unwrap_err().to_string();
    assert!(e.contains("divide by 255") && e.contains("255"), "{e}");
    // bad declarations are refused when the file is read
    for (r, sc) in [((1.0, 0.0), None), ((0.0, f64::NAN), None), ((0.0, 1.0), Some(-1.0)), ((0.0, 1.0), Some(f64::INFINITY))] {
        assert!(Model::declare_input_range(&plain, r, sc).is_err(), "{r:?} {sc:?}");
    }
}

/// A comparison family per layer (`Options::family_plan`): an all-fss plan
/// through the mixed layer is exact (so every gate ran fss), a mixed plan
/// stays within tami's truncation bound, over several inferences of one
/// session with part of the schedule pre-dealt and the rest dealt by the
/// look-ahead; a client with another plan is refused at the hello.
#[test]
fn per_layer_family_plans_run_each_layer_in_its_family() {
    let m = Arc::new(Model::from_bytes(&residual_net()).unwrap());
    let plan = Plan::new(&m, FixedConfig::default()).unwrap();
    let steps = plan.steps.len();
    let x = input_for(&m, 7);
    let r = reference::run_f64(&plan, &x).unwrap();
    let with = |mix: Vec<u8>| Options { family_plan: Some(Arc::new(mix)), ..opts("fss") };
    assert_eq!(secure(&m, &x, &with(vec![0; steps])), r, "all fss through the mixed layer is exact");
    let ulp = 1.0 / 4096.0;
    for mix in [(0..steps).map(|i| (i % 2) as u8).collect::<Vec<_>>(), (0..steps).map(|i| 1 - (i % 2) as u8).collect(), vec![1; steps]] {
        for (a, b) in secure(&m, &x, &with(mix.clone())).iter().zip(&r) {
            assert!((a - b).abs() <= 16.0 * ulp, "{mix:?}: {a} vs reference {b}");
        }
    }
    // one session, several inferences, partial pre-dealing + look-ahead
    let mix: Vec<u8> = (0..steps).map(|i| (i % 2) as u8).collect();
    let o = Options { predeal_mem: 40_000, ..with(mix.clone()) };
    let xs: Vec<Vec<f64>> = (0..3).map(|k| input_for(&m, 20 + k)).collect();
    for (i, (y, _, _, _)) in session_runs(&m, &xs, &o, &o).into_iter().enumerate() {
        let want = reference::run_f64(&plan, &xs[i]).unwrap();
        let got = plan.decode(&y);
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() <= 16.0 * ulp, "inference {i}: {a} vs {b}");
        }
    }
    // plans must agree at the hello, the refusal names both
    let (mut a, b) = MemChannel::pair();
    let (m2, p2, so) = (m.clone(), Plan::new(&m, FixedConfig::default()).unwrap(), o.clone());
    let srv = std::thread::spawn(move || runtime::serve_session(&mut a, &m2, &p2, &so));
    let e = runtime::ClientSession::start(b, &opts("fss")).err().expect("refused").to_string();
    assert!(e.contains("family plan mismatch"), "{e}");
    assert!(srv.join().unwrap().is_err());
    // a plan of the wrong length is refused
    let e = runtime::run_local(m.clone(), &m.input_shape.clone(), &x, &with(vec![0; steps + 1]), false, |_, _| {}).err().expect("refused").to_string();
    assert!(e.contains("family plan"), "{e}");
}

/// A served session's per-layer plan (`hush serve --plan auto`): a client
/// with `--plan auto` (`Expect::any_family_plan`) runs the server's mix
/// and gets the reference within tami's bound, inference after inference;
/// an all-fss mix taken from the server is exact. A server's plan that is
/// not a list of family indices is refused by the client, naming it.
#[test]
fn a_client_with_plan_auto_runs_the_servers_per_layer_plan() {
    let m = Arc::new(Model::from_bytes(&residual_net()).unwrap());
    let plan = Plan::new(&m, FixedConfig::default()).unwrap();
    let steps = plan.steps.len();
    let mut client = opts("fss");
    client.expect.any_family_plan = true;
    let xs: Vec<Vec<f64>> = (0..2).map(|k| input_for(&m, 40 + k)).collect();
    let ulp = 1.0 / 4096.0;
    for mix in [(0..steps).map(|i| 1 - (i % 2) as u8).collect::<Vec<_>>(), vec![0; steps]] {
        let server = Options { family_plan: Some(Arc::new(mix.clone())), ..opts("fss") };
        for (i, (y, _, _, _)) in session_runs(&m, &xs, &server, &client).into_iter().enumerate() {
            let want = reference::run_f64(&plan, &xs[i]).unwrap();
            if mix.iter().all(|&f| f == 0) {
                assert_eq!(y, reference::run(&plan, &plan.encode_input(&xs[i]).unwrap()).unwrap(), "all fss from the server is exact");
            }
            for (a, b) in plan.decode(&y).iter().zip(&want) {
                assert!((a - b).abs() <= 16.0 * ulp, "{mix:?}, inference {i}: {a} vs {b}");
            }
        }
    }
    // the server's plan is untrusted input at the client
    let fp = |v: serde_json::Value| runtime::server_family_plan(&client, &serde_json::json!({ "family_plan": v }));
    assert_eq!(fp(serde_json::json!([0, 1, 1])).unwrap().as_deref(), Some(&vec![0u8, 1, 1]));
    assert_eq!(fp(serde_json::Value::Null).unwrap(), None);
    for bad in [serde_json::json!([0, 7]), serde_json::json!([-1]), serde_json::json!("fss"), serde_json::json!(vec![0; crate::model::MAX_NODES + 1])] {
        let e = fp(bad.clone()).err().unwrap_or_else(|| panic!("{bad} accepted")).to_string();
        assert!(e.contains("family plan"), "{e}");
    }
    // without --plan auto the client refuses a server's mix, naming both
    let e = runtime::server_family_plan(&opts("fss"), &serde_json::json!({ "family_plan": [0, 1] })).unwrap_err().to_string();
    assert!(e.contains("mismatch") && e.contains("[0,1]") && e.contains("null"), "{e}");
}

/// The curious party of a per-layer family mix ([`crate::engine::MixedNonlinear`]),
/// with its REAL view: every byte it receives over a whole session (hello,
/// seed agreement, each layer's gates in fss or tami, the output shares).
/// The client's view with the server's weights all zero must be distributed
/// as with the real weights, and the server's view with the client's input
/// all zero as with a random input: byte histograms (256 bins) over several
/// fresh sessions (16 each), two-sample χ² with 255 degrees of freedom, threshold 340
/// (P < 10^-3 under independence). A gate of either family whose message
/// were not masked (W·x or x sent in the clear, a mask reused across
/// layers of different families) would put the zero secret's bytes in the
/// view and fail it. The mix's argument is sequential composition of the
/// two families' gates on one provider (`MixedNonlinear`'s doc comment).
#[test]
fn a_mixed_plans_views_do_not_depend_on_the_peers_secret() {
    use hush_transport::Recording;
    let m = Arc::new(Model::from_bytes(&residual_net()).unwrap());
    let mut zero_w = (*m).clone();
    for n in &mut zero_w.nodes {
        if let crate::model::Op::Conv { weight, bias, .. } | crate::model::Op::Dense { weight, bias } = &mut n.op {
            weight.data.iter_mut().for_each(|w| *w = 0.0);
            bias.data.iter_mut().for_each(|w| *w = 0.0);
        }
    }
    let zero_w = Arc::new(zero_w);
    let steps = Plan::new(&m, FixedConfig::default()).unwrap().steps.len();
    let o = Options { family_plan: Some(Arc::new((0..steps).map(|i| (i % 2) as u8).collect())), ..opts("fss") };
    // one session's view of `client` (true) or the server, as a histogram
    let view = |model: &Arc<Model>, x: &[f64], client: bool, hist: &mut [u64; 256]| {
        let (a, b) = MemChannel::pair();
        let log = hush_transport::ViewLog::default();
        let (m2, p2, o2) = (model.clone(), Plan::new(model, o.cfg).unwrap(), o.clone());
        let slog = log.clone();
        let srv = std::thread::spawn(move || {
            if client {
                runtime::serve_session(&mut { a }, &m2, &p2, &o2).unwrap()
            } else {
                runtime::serve_session(&mut Recording::with_log(a, slog), &m2, &p2, &o2).unwrap()
            }
        });
        let run = |mut s: runtime::ClientSession<_>| {
            let xq = s.plan.encode_input(x).unwrap();
            s.infer_ring_costs(&xq).unwrap();
            s.close().unwrap();
        };
        if client {
            run(runtime::ClientSession::start(Recording::with_log(b, log.clone()), &o).unwrap());
        } else {
            run(runtime::ClientSession::start(Recording::with_log(b, hush_transport::ViewLog::default()), &o).unwrap());
        }
        srv.join().unwrap();
        // control messages (JSON: hello, reply, timings) are public
        // metadata, not shares
        for msg in log.lock().unwrap().iter().filter(|m| serde_json::from_slice::<serde_json::Value>(m).is_err()) {
            for &byte in msg {
                hist[byte as usize] += 1;
            }
        }
    };
    let chi2 = |a: &[u64; 256], b: &[u64; 256]| -> f64 {
        let (na, nb) = (a.iter().sum::<u64>() as f64, b.iter().sum::<u64>() as f64);
        assert!(na > 150_000.0 && (na - nb).abs() < 0.01 * na, "views of {na} and {nb} bytes");
        let (ka, kb) = ((nb / na).sqrt(), (na / nb).sqrt());
        a.iter().zip(b).filter(|(x, y)| **x + **y > 0).map(|(x, y)| (ka * *x as f64 - kb * *y as f64).powi(2) / (*x + *y) as f64).sum()
    };
    let x = input_for(&m, 3);
    let zero_x = vec![0.0; x.len()];
    let (mut real, mut zero) = ([0u64; 256], [0u64; 256]);
    for _ in 0..16 {
        view(&m, &x, true, &mut real);
        view(&zero_w, &x, true, &mut zero);
    }
    let c = chi2(&real, &zero);
    assert!(c < 340.0, "the client's view depends on the server's weights: chi2 {c}");
    let (mut real, mut zero) = ([0u64; 256], [0u64; 256]);
    for _ in 0..16 {
        view(&m, &x, false, &mut real);
        view(&m, &zero_x, false, &mut zero);
    }
    let c = chi2(&real, &zero);
    assert!(c < 340.0, "the server's view depends on the client's input: chi2 {c}");
}
