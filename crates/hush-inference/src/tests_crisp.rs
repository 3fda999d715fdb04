//! Malicious-client inference (CRISP, dealer mode) at model level: MiniONN
//! MNIST against the plaintext fixed-point reference and against the
//! semi-honest dealer path; a tampering client caught at model level.

use crate::crisp_run;
use crate::plan::Plan;
use crate::runtime::{self, Mode, Options};
use crate::{reference, zoo};
use hush_2pc::tee::Dealer;
use hush_primitives::{Block, Prg};
use hush_transport::{Channel, Cost, MemChannel};
use std::sync::Arc;

fn start_dealer() -> hush_tee::dealer::DealerHandle {
    let cfg = hush_tee::dealer::DealerConfig::new(hush_transport::LinkSecurity::Insecure, hush_2pc::deal::kinds());
    hush_tee::dealer::serve("127.0.0.1:0", cfg, Arc::new(|_| {})).unwrap()
}

fn input(n: usize, seed: u64) -> Vec<f64> {
    let mut p = Prg::new(Block(seed as u128));
    (0..n).map(|_| (p.next_u64() % 2000) as f64 / 1000.0 - 1.0).collect()
}

/// MiniONN MNIST (conv, ReLU, MaxPool, dense) with private weights and
/// the default linear layers (CRISP's CKKS packing): the released logits equal the fixed-point reference bit for bit (every
/// CRISP gate is exact), and the semi-honest dealer path's (`fss`, also
/// exact) — so the documented error between the two paths is zero, and
/// both are within the fixed-point error of the float model.
#[test]
fn minionn_mnist_matches_reference_and_semi_honest_dealer_path() {
    let h = start_dealer();
    let model = Arc::new(zoo::load("minionn-mnist").unwrap());
    let o = Options { mode: Mode::Dealer { addr: h.addr.to_string(), pin: None }, proto: "fss".into(), ..Default::default() };
    let x = input(model.input_len(), 7);
    let run = crisp_run::run_local(model.clone(), &x, &o, crisp_run_s()).unwrap();
    let plan = Plan::new(&model, o.cfg).unwrap();
    let want = reference::run(&plan, &plan.encode_input(&x).unwrap()).unwrap();
    assert_eq!(run.raw, want, "malicious-client logits vs the fixed-point reference");
    let semi = runtime::run_local(model.clone(), &model.input_shape.clone(), &x, &o, false, |_, _| {}).unwrap();
    assert_eq!(run.logits, semi.inference.logits, "vs the semi-honest dealer path (fss)");
    let fl = crate::float_ref::run(&model, &x).unwrap();
    let err = fl.iter().zip(&run.logits).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    assert!(err < 0.05, "fixed-point error vs float {err}");
    assert!(run.client.online_bytes > 0 && run.client.offline_bytes > 0 && run.server.checked_openings > 10_000);
    h.shutdown();
}

fn crisp_run_s() -> u32 {
    hush_2pc::crisp::DEFAULT_S
}

/// A client channel that adds 1 to the first byte of its `target`-th message.
struct Tamper {
    inner: MemChannel,
    target: usize,
    n: usize,
}

impl Channel for Tamper {
    fn send(&mut self, payload: &[u8]) -> hush_transport::Result<()> {
        let mut p = payload.to_vec();
        if self.n == self.target && !p.is_empty() {
            p[0] = p[0].wrapping_add(1);
        }
        self.n += 1;
        self.inner.send(&p)
    }
    fn recv(&mut self) -> hush_transport::Result<Vec<u8>> {
        self.inner.recv()
    }
    fn cost(&self) -> Cost {
        self.inner.cost()
    }
    fn max_frame(&self) -> usize {
        self.inner.max_frame()
    }
    fn set_timeout(&mut self, t: std::time::Duration) {
        self.inner.set_timeout(t)
    }
}

/// A small CNN (conv → ReLU → MaxPool → dense) run with a client that
/// alters one of its online messages (input, a linear layer's F‖G, a gate
/// opening, the output share or its check share): the server aborts with
/// the check's error, the client gets no output. Honest runs pass.
#[test]
fn tampering_client_is_caught_at_model_level() {
    tampering_at_model_level(crisp_run::LinearBackend::Dealt);
}

/// The same with CRISP's CKKS linear layers: the client's messages are δ,
/// the conv's ciphertexts ("change its ciphertext": its seed altered),
/// trunc, ReLU, 2 MaxPool levels, the dense layer's ciphertexts, trunc, z
/// and q; every alteration is caught before any output.
#[test]
fn tampering_client_is_caught_at_model_level_ckks() {
    tampering_at_model_level(crisp_run::LinearBackend::Ckks);
}

fn tampering_at_model_level(backend: crisp_run::LinearBackend) {
    use crate::model::{Builder, Model};
    let mut p = Prg::new(Block(5));
    let mut r = |n: usize, s: f32| (0..n).map(|_| ((p.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32 * s).collect::<Vec<f32>>();
    let (mut b, x) = Builder::new("tiny", &[1, 6, 6]);
    let c = b.conv(x, 2, [3, 3], [1, 1], [0; 4], &r(18, 0.5), &r(2, 0.1));
    let c = b.relu(c);
    let m = b.maxpool(c, [2, 2], [2, 2], [0; 4]);
    let f = b.flatten(m);
    let y = b.dense(f, 3, &r(24, 0.5), &r(3, 0.1));
    let model = Arc::new(Model::from_bytes(&b.finish(y)).unwrap());
    let cfg = crate::fixed::FixedConfig::default();
    let plan = Arc::new(Plan::new(&model, cfg).unwrap());
    let cmodel = Model::from_architecture(&model.header_json).unwrap();
    let cplan = Plan::new(&cmodel, cfg).unwrap();
    let xf = input(36, 3);
    let xq = cplan.encode_input(&xf).unwrap();
    let want = reference::run(&plan, &plan.encode_input(&xf).unwrap()).unwrap();
    // client online messages: δ, F‖G (conv), trunc, ReLU, 2 MaxPool levels, F‖G (dense), trunc, z, q
    for target in [usize::MAX, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9] {
        let (mut a, cb) = MemChannel::pair();
        a.set_timeout(std::time::Duration::from_secs(20));
        let (m2, p2) = (model.clone(), plan.clone());
        let ts = std::thread::spawn(move || {
            let mut d = Dealer::in_process(&mut a, 0).unwrap();
            let mut lines = Vec::new();
            let r = crisp_run::party_with(backend, &m2, &p2, 0, &mut a, &mut d, 40, None, &mut |l| lines.push(l.to_string()));
            (r.map(|x| x.0), lines)
        });
        let mut ch = Tamper { inner: cb, target: usize::MAX, n: 0 };
        let mut d = Dealer::in_process(&mut ch.inner, 1).unwrap();
        let rc = if backend == crisp_run::LinearBackend::Dealt {
            let mut off = crisp_run::offline(&cmodel, &cplan, 1, &mut ch, &mut d, 40).unwrap();
            ch.target = target;
            ch.n = 0;
            crisp_run::online(&cplan, &mut ch, &mut off, Some(&xq), &mut |_| {})
        } else {
            let mut off = crate::crisp_ckks::offline(&cmodel, &cplan, 1, &mut ch, &mut d, 40).unwrap();
            ch.target = target;
            ch.n = 0;
            crate::crisp_ckks::online(&cplan, &mut ch, &mut off, Some(&xq), &mut |_| {})
        };
        drop(ch);
        let (rs, lines) = ts.join().unwrap();
        if target == usize::MAX {
            assert_eq!(rc.unwrap().unwrap(), want);
            assert!(rs.unwrap().is_none());
        } else {
            assert!(rc.is_err(), "target {target}: the client got an output");
            let e = rs.unwrap_err().to_string();
            assert!(e.contains("check failed"), "target {target}: {e}");
            assert_eq!(lines.len(), 1, "target {target}");
        }
    }
}

/// tee underneath is refused (a simulated module would hand the client
/// host μ), as is a model with an unsupported layer.
#[test]
fn tee_underneath_and_unsupported_layers_are_refused() {
    let model = Arc::new(zoo::load("minionn-mnist").unwrap());
    let e = crisp_run::run_local(model, &input(784, 1), &Options::default(), 40).err().unwrap().to_string();
    assert!(e.contains("dealer only"), "{e}");
    use crate::model::{Builder, Model};
    let (mut b, x) = Builder::new("cat", &[1, 4, 4]);
    let r = b.relu(x);
    let y = b.concat(&[x, r], 0);
    let model = Model::from_bytes(&b.finish(y)).unwrap();
    let plan = Plan::new(&model, Default::default()).unwrap();
    let (mut a, _b) = MemChannel::pair();
    let mut d = Dealer::new(Box::new(hush_tee::InProcessModule::new(hush_tee::Module::new())));
    let e = crisp_run::offline(&model, &plan, 0, &mut a, &mut d, 40).err().unwrap().to_string();
    assert!(e.contains("not supported"), "{e}");
}

/// AvgPool (public constants, then the MAC-carrying truncation) and
/// AddConst/Add through a small model: bit-exact against the reference.
#[test]
fn avgpool_add_and_constants_match_reference() {
    use crate::model::{Builder, Model};
    let mut p = Prg::new(Block(8));
    let mut r = |n: usize, s: f32| (0..n).map(|_| ((p.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32 * s).collect::<Vec<f32>>();
    let (mut b, x) = Builder::new("avg", &[2, 6, 6]);
    let c = b.conv(x, 3, [3, 3], [1, 1], [1; 4], &r(54, 0.4), &r(3, 0.1));
    let c = b.relu(c);
    let a = b.avgpool(c, [2, 2], [2, 2], [0; 4], true);
    let k = b.add_const(a, &r(27, 0.5));
    let s = b.add(k, a);
    let f = b.flatten(s);
    let y = b.dense(f, 4, &r(108, 0.3), &r(4, 0.1));
    let model = Arc::new(Model::from_bytes(&b.finish(y)).unwrap());
    let h = start_dealer();
    let o = Options { mode: Mode::Dealer { addr: h.addr.to_string(), pin: None }, ..Default::default() };
    let x = input(72, 11);
    let run = crisp_run::run_local(model.clone(), &x, &o, 40).unwrap();
    let plan = Plan::new(&model, o.cfg).unwrap();
    assert_eq!(run.raw, reference::run(&plan, &plan.encode_input(&x).unwrap()).unwrap());
    h.shutdown();
}

/// Both linear backends (CKKS as in CRISP, and the dealt triples) on a
/// model with conv, dense, AvgPool, AddConst and Add: bit-exact against
/// the fixed-point reference, so the CKKS error after rounding is zero.
#[test]
fn both_linear_backends_match_reference() {
    use crate::model::{Builder, Model};
    let mut p = Prg::new(Block(18));
    let mut r = |n: usize, s: f32| (0..n).map(|_| ((p.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32 * s).collect::<Vec<f32>>();
    let (mut b, x) = Builder::new("both", &[2, 6, 6]);
    let c = b.conv(x, 3, [3, 3], [1, 1], [1; 4], &r(54, 0.4), &r(3, 0.1));
    let c = b.relu(c);
    let a = b.avgpool(c, [2, 2], [2, 2], [0; 4], true);
    let f = b.flatten(a);
    let y = b.dense(f, 5, &r(135, 0.3), &r(5, 0.1));
    let model = Arc::new(Model::from_bytes(&b.finish(y)).unwrap());
    let h = start_dealer();
    let o = Options { mode: Mode::Dealer { addr: h.addr.to_string(), pin: None }, ..Default::default() };
    let x = input(72, 12);
    let plan = Plan::new(&model, o.cfg).unwrap();
    let want = reference::run(&plan, &plan.encode_input(&x).unwrap()).unwrap();
    for backend in [crisp_run::LinearBackend::Ckks, crisp_run::LinearBackend::Dealt] {
        let run = crisp_run::run_local_with(model.clone(), &x, &o, 40, backend).unwrap();
        assert_eq!(run.raw, want, "{backend:?}");
        // CKKS: the offline phase carries only the client's public key, not masked weights
        if backend == crisp_run::LinearBackend::Ckks {
            assert!(run.client.offline_bytes < 300_000, "{}", run.client.offline_bytes);
        }
    }
    assert_eq!(crisp_run::LinearBackend::parse("ckks").unwrap(), crisp_run::LinearBackend::default());
    assert!(crisp_run::LinearBackend::parse("bfv").is_err());
    h.shutdown();
}
