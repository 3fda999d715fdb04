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
    let o = Options { mode: Mode::MaliciousClient { addr: h.addr.to_string(), pin: None }, ..Default::default() };
    let x = input(model.input_len(), 7);
    let run = crisp_run::run_local(model.clone(), &x, &o, 40).unwrap();
    let plan = Plan::new(&model, o.cfg).unwrap();
    let want = reference::run(&plan, &plan.encode_input(&x).unwrap()).unwrap();
    assert_eq!(run.raw, want, "malicious-client logits vs the fixed-point reference");
    let so = Options { mode: Mode::Dealer { addr: h.addr.to_string(), pin: None }, proto: "fss".into(), ..Default::default() };
    let semi = runtime::run_local(model.clone(), &model.input_shape.clone(), &x, &so, false, |_, _| {}).unwrap();
    assert_eq!(run.logits, semi.inference.logits, "vs the semi-honest dealer path (fss)");
    let fl = crate::float_ref::run(&model, &x).unwrap();
    let err = fl.iter().zip(&run.logits).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    assert!(err < 0.05, "fixed-point error vs float {err}");
    assert!(run.client.online_bytes > 0 && run.client.offline_bytes > 0 && run.server.checked_openings > 10_000);
    h.shutdown();
}

fn co() -> crisp_run::CrispOptions {
    crisp_run::CrispOptions::default()
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
/// alters one of its online messages (input, a linear layer's masked opening F, a gate
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
    // client online messages: δ, F (conv), trunc, ReLU, 2 MaxPool levels, F (dense), trunc, z, q
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

/// tee underneath is refused (a
/// simulated module would hand the client host μ), as are an unbuilt
/// linear backend and an s too small to be sound.
#[test]
fn tee_underneath_and_unbuilt_backends_are_refused() {
    let model = Arc::new(zoo::load("minionn-mnist").unwrap());
    let e = crisp_run::run_local(model.clone(), &input(784, 1), &Options::default(), 40).err().unwrap().to_string();
    assert!(e.contains("dealer only"), "{e}");
    let bad = crisp_run::CrispOptions { linear: "bfv".into(), ..co() };
    assert!(bad.check().unwrap_err().to_string().contains("unknown"));
    assert!(crisp_run::CrispOptions { s: 8, ..co() }.check().is_err());
    crisp_run::CrispOptions { s: 40, ..co() }.check().unwrap();
}

/// Concat (a SqueezeNet-style fire module: two expand convolutions
/// concatenated along channels, then AvgPool and a dense layer) in
/// malicious-client mode: the value and MAC shares are placed by the same
/// map, so the logits equal the fixed-point reference bit for bit and the
/// check passes; a client that tampers with a message after the Concat is
/// still caught.
#[test]
fn concat_net_matches_reference() {
    let model = Arc::new(crate::model::Model::from_bytes(&crate::tests::concat_net()).unwrap());
    assert!(model.nodes.iter().any(|n| n.op.kind() == "concat"));
    let h = start_dealer();
    let o = Options { mode: Mode::MaliciousClient { addr: h.addr.to_string(), pin: None }, ..Default::default() };
    let plan = Plan::new(&model, o.cfg).unwrap();
    // both linear backends take the same model loop (Concat is a local copy)
    for backend in [crisp_run::LinearBackend::Dealt, crisp_run::LinearBackend::Ckks] {
        for seed in [1u64, 2] {
            let x = input(model.input_len(), seed);
            let run = crisp_run::run_local_with(model.clone(), &x, &o, 40, backend).unwrap();
            assert_eq!(run.raw, reference::run(&plan, &plan.encode_input(&x).unwrap()).unwrap(), "{backend:?} seed {seed}");
            assert!(run.server.checked_openings > 0);
            // metered per step: input, every plan step, check+release
            assert_eq!(run.client.layers.len(), plan.steps.len() + 2, "{backend:?}");
        }
    }
    h.shutdown();
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
    let o = Options { mode: Mode::MaliciousClient { addr: h.addr.to_string(), pin: None }, ..Default::default() };
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
    let mut online = Vec::new();
    for backend in [crisp_run::LinearBackend::Ckks, crisp_run::LinearBackend::Dealt] {
        let run = crisp_run::run_local_with(model.clone(), &x, &o, 40, backend).unwrap();
        assert_eq!(run.raw, want, "{backend:?}");
        // CKKS: the client sends nothing offline (its key and the input
        // ciphertexts come from the dealer); it receives the HE responses
        if backend == crisp_run::LinearBackend::Ckks {
            assert_eq!(run.client.offline_bytes_sent, 0);
            assert!(run.client.offline_bytes_recv > 100_000, "{}", run.client.offline_bytes_recv);
        }
        online.push((run.client.online_bytes, run.client.online_rounds));
    }
    // online, both backends run the same checked openings
    assert_eq!(online[0], online[1]);
    // the default is the backend without the well-formedness gap
    assert_eq!(crisp_run::LinearBackend::parse("dealt").unwrap(), crisp_run::LinearBackend::default());
    assert_eq!(crisp_run::CrispOptions::default().linear, crisp_run::LinearBackend::default().name());
    assert_eq!(crisp_run::LINEAR_BACKENDS[0], crisp_run::LinearBackend::default().name());
    crisp_run::CrispOptions { linear: "ckks".into(), ..Default::default() }.check().unwrap();
    assert!(crisp_run::LinearBackend::parse("bfv").is_err());
    h.shutdown();
}

// ------------------------------------------------ served sessions over TCP + TLS

/// The tiny CNN of [`tampering_client_is_caught_at_model_level`].
fn tiny_cnn() -> Arc<crate::model::Model> {
    use crate::model::{Builder, Model};
    let mut p = Prg::new(Block(5));
    let mut r = |n: usize, s: f32| (0..n).map(|_| ((p.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32 * s).collect::<Vec<f32>>();
    let (mut b, x) = Builder::new("tiny", &[1, 6, 6]);
    let c = b.conv(x, 2, [3, 3], [1, 1], [0; 4], &r(18, 0.5), &r(2, 0.1));
    let c = b.relu(c);
    let m = b.maxpool(c, [2, 2], [2, 2], [0; 4]);
    let f = b.flatten(m);
    let y = b.dense(f, 3, &r(24, 0.5), &r(3, 0.1));
    Arc::new(Model::from_bytes(&b.finish(y)).unwrap())
}

/// A malicious-client server on loopback with TLS (ephemeral identity) and
/// a TLS dealer service (pinned), plus the options of an honest client
/// pinning both; `lines` collects the server's log.
struct Served {
    _dealer: runtime::LocalDealer,
    server: Option<runtime::ServerHandle>,
    client: Options,
    lines: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(h) = self.server.take() {
            h.shutdown();
        }
    }
}

fn serve_mc(model: Arc<crate::model::Model>) -> Served {
    serve_mc_with(model, "dealt")
}

fn serve_mc_with(model: Arc<crate::model::Model>, linear: &str) -> Served {
    let link = hush_transport::LinkConfig::from_flags(&hush_transport::LinkFlags::default()).unwrap();
    let crisp = crisp_run::CrispOptions { linear: linear.into(), ..co() };
    let mut o = Options { mode: Mode::MaliciousClient { addr: String::new(), pin: None }, proto: "auto".into(), link: link.clone(), crisp, ..Default::default() };
    o.resolve_family().unwrap();
    let dealer = runtime::local_dealer(&mut o).unwrap();
    assert!(matches!(&o.mode, Mode::MaliciousClient { pin: Some(_), .. }), "a TLS dealer, pinned");
    let lines = Arc::new(std::sync::Mutex::new(Vec::new()));
    let l2 = lines.clone();
    let h = runtime::serve(model, "127.0.0.1:0", o.clone(), Arc::new(move |l: String| l2.lock().unwrap().push(l))).unwrap();
    let pins = vec![link.fingerprint().unwrap().to_string()];
    let client_link = hush_transport::LinkConfig::from_flags(&hush_transport::LinkFlags { pins, ..Default::default() }).unwrap();
    Served { _dealer: dealer, server: Some(h), client: Options { link: client_link, ..o }, lines }
}

impl Served {
    fn addr(&self) -> String {
        self.server.as_ref().unwrap().addr.to_string()
    }
    fn counts(&self) -> (u64, u64) {
        let h = self.server.as_ref().unwrap();
        (h.sessions_ok.load(std::sync::atomic::Ordering::SeqCst), h.sessions_failed.load(std::sync::atomic::Ordering::SeqCst))
    }
    /// Waits until the server has ended `n` sessions (its log).
    fn wait_sessions(&self, n: usize) {
        let t = std::time::Instant::now();
        while self.lines.lock().unwrap().iter().filter(|l| l.contains("session")).count() < n {
            assert!(t.elapsed() < std::time::Duration::from_secs(60), "server log: {:?}", self.lines.lock().unwrap());
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// How a client deviates: counting its sends from the hello (0), "I" (1),
/// then its online messages.
#[derive(Clone, Copy, Debug)]
enum Deviate {
    /// Flip bit `bit` of byte `byte` (mod the length) of send `at`.
    Flip { at: usize, byte: usize, bit: u8 },
    /// Add `add` to the 8-byte word at `byte` of send `at`.
    Add { at: usize, byte: usize, add: u64 },
    /// Send, at send `to`, the payload of its earlier send `from`.
    Replay { from: usize, to: usize },
}

struct Deviant<C: Channel> {
    inner: C,
    how: Deviate,
    sent: Vec<Vec<u8>>,
}

impl<C: Channel> Channel for Deviant<C> {
    fn send(&mut self, payload: &[u8]) -> hush_transport::Result<()> {
        let n = self.sent.len();
        let mut p = payload.to_vec();
        match self.how {
            Deviate::Flip { at, byte, bit } if at == n && !p.is_empty() => {
                let i = byte % p.len();
                p[i] ^= 1 << (bit % 8);
            }
            Deviate::Add { at, byte, add } if at == n && p.len() >= 8 => {
                let i = byte % (p.len() - 7);
                let w = u64::from_le_bytes(p[i..i + 8].try_into().unwrap()).wrapping_add(add);
                p[i..i + 8].copy_from_slice(&w.to_le_bytes());
            }
            Deviate::Replay { from, to } if to == n => p = self.sent[from].clone(),
            _ => {}
        }
        self.sent.push(payload.to_vec());
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

/// A client session over TCP + TLS whose channel deviates as `how` says.
fn deviant_session(addr: &str, o: &Options, how: Deviate) -> crate::Result<runtime::ClientSession<Deviant<hush_transport::TcpChannel>>> {
    let sec = o.link.to_peer(addr)?;
    let ch = hush_transport::TcpChannel::connect_with(addr, hush_transport::ChannelOptions::default(), &sec)?;
    runtime::ClientSession::start(Deviant { inner: ch, how, sent: Vec::new() }, o)
}

/// Online sends of the tiny CNN's client per inference: δ, F (conv),
/// trunc, ReLU, 2 MaxPool levels, F (dense), trunc, z, q.
const TINY_ONLINE_SENDS: usize = 10;

/// Served malicious-client sessions over TCP with TLS and a TLS dealer
/// service: an honest client's two inferences in one session (a fresh μ
/// each) equal the fixed-point reference; clients that deviate at a random
/// point in a random way (a flipped bit or an added value in any of their
/// online messages, or a replay of the previous inference's message in
/// the second inference) get an abort and no output, the server logs the
/// failed check and ends only that session, and an honest client served
/// right after each deviant one gets the right output. 8 deviant sessions
/// by default; `CRISP_SERVED_TRIALS=N` runs N (`scripts/crisp_served_trials.sh`)
/// and prints the counts as one JSON line.
/// The CKKS linear backend over the served path (TCP + TLS, the dealer
/// service): two inferences in one session equal the reference, a client
/// of the other backend is refused at the hello, and a client that flips
/// a bit in a message is aborted without output.
#[test]
fn served_ckks_backend_equals_reference_and_refuses_a_mismatch() {
    let model = tiny_cnn();
    let plan = Plan::new(&model, Default::default()).unwrap();
    let srv = serve_mc_with(model.clone(), "ckks");
    let addr = srv.addr();
    let mut s = runtime::connect(&addr, &srv.client).unwrap();
    for k in 0..2 {
        let x = input(36, 300 + k);
        let r = s.infer(&model.input_shape.clone(), &x, |_, _| {}).unwrap();
        let want = plan.decode(&reference::run(&plan, &plan.encode_input(&x).unwrap()).unwrap());
        assert_eq!(r.logits, want, "ckks, inference {k}");
        let c = r.report.crisp.as_ref().unwrap();
        assert!(c.checked_openings > 0 && c.online_bytes > 0 && c.online_rounds > 0);
    }
    s.close().unwrap();
    let other = Options { crisp: co(), ..srv.client.clone() };
    let e = runtime::connect(&addr, &other).err().unwrap().to_string();
    assert!(e.contains("linear backend mismatch"), "{e}");
    let mut d = deviant_session(&addr, &srv.client, Deviate::Flip { at: 3, byte: 17, bit: 3 }).unwrap();
    let r = d.infer(&model.input_shape.clone(), &input(36, 9), |_, _| {});
    assert!(r.is_err(), "a tampering client got an output");
}

#[test]
fn served_over_tls_honest_equals_reference_and_deviants_are_aborted() {
    let model = tiny_cnn();
    let plan = Plan::new(&model, Default::default()).unwrap();
    let srv = serve_mc(model.clone());
    let addr = srv.addr();
    let honest = |seed: u64| {
        let mut s = runtime::connect(&addr, &srv.client).unwrap();
        assert_eq!(s.proto, "crisp");
        for k in 0..2 {
            let x = input(36, seed + k);
            let r = s.infer(&model.input_shape.clone(), &x, |_, _| {}).unwrap();
            let want = plan.decode(&reference::run(&plan, &plan.encode_input(&x).unwrap()).unwrap());
            assert_eq!(r.logits, want, "honest client, inference {k}");
            let c = r.report.crisp.as_ref().unwrap();
            assert!(c.checked_openings > 0 && c.online_bytes > 0 && c.dealer_bytes > 0);
        }
        s.close().unwrap();
    };
    honest(100);
    srv.wait_sessions(1);
    let mut p = Prg::new(Block(0xc415));
    let mut ended = 1;
    let mut aborted = 0u64;
    let mut harmless = 0u64;
    let trials: u64 = std::env::var("CRISP_SERVED_TRIALS").ok().and_then(|v| v.parse().ok()).unwrap_or(8);
    let mut kinds = [0u64; 3];
    for t in 0..trials {
        let first = 2; // hello, "I"
        kinds[[0, 0, 1, 2][(t % 4) as usize]] += 1;
        let how = match t % 4 {
            0 | 1 => Deviate::Flip { at: first + (p.next_u64() as usize % TINY_ONLINE_SENDS), byte: p.next_u64() as usize, bit: p.next_u64() as u8 },
            2 => Deviate::Add { at: first + (p.next_u64() as usize % TINY_ONLINE_SENDS), byte: p.next_u64() as usize, add: p.next_u64() | 1 },
            // second inference: "I" at 12, its online sends from 13
            _ => {
                let j = p.next_u64() as usize % TINY_ONLINE_SENDS;
                Deviate::Replay { from: first + j, to: first + TINY_ONLINE_SENDS + 1 + j }
            }
        };
        let mut s = deviant_session(&addr, &srv.client, how).unwrap();
        let x = input(36, 7 + t);
        let want_of = |x: &[f64]| plan.decode(&reference::run(&plan, &plan.encode_input(x).unwrap()).unwrap());
        let r1 = s.infer(&model.input_shape.clone(), &x, |_, _| {});
        let (r, want) = match how {
            Deviate::Replay { .. } => {
                assert_eq!(r1.unwrap().logits, want_of(&x), "{how:?}: the first inference is honest");
                let x2 = input(36, 1000 + t);
                (s.infer(&model.input_shape.clone(), &x2, |_, _| {}), want_of(&x2))
            }
            _ => (r1, want_of(&x)),
        };
        let e = match r {
            // A deviation confined to the lift's upper bits (an error that is
            // a multiple of 2^ℓ, e.g. a flipped bit ≥ ℓ of an opening)
            // changes no value and may pass (crisp.rs, "Soundness"): the
            // output must then be exactly the honest one.
            Ok(out) => {
                assert_eq!(out.logits, want, "{how:?}: a deviant client got a WRONG output");
                harmless += 1;
                s.close().unwrap();
                ended += 1;
                srv.wait_sessions(ended);
                honest(200 + t);
                ended += 1;
                srv.wait_sessions(ended);
                continue;
            }
            Err(e) => e.to_string(),
        };
        // a failed check: the server's abort; a message the server cannot
        // even parse (a value pushed past 2^(ℓ+s)): the session ends at once
        assert!(e.contains("aborted") || e.contains("ended the session before the consistency check passed"), "{how:?}: {e}");
        ended += 1;
        srv.wait_sessions(ended);
        let last = srv.lines.lock().unwrap().last().cloned().unwrap();
        assert!((last.contains("check failed") && last.contains("aborting without output")) || last.contains("malformed"), "{how:?}: server log {last}");
        if e.contains("aborted") {
            aborted += 1;
        }
        // the server goes on serving
        honest(200 + t);
        ended += 1;
        srv.wait_sessions(ended);
    }
    assert_eq!(srv.counts(), (1 + trials + harmless, trials - harmless), "log: {:?}", srv.lines.lock().unwrap());
    assert!(aborted > 0);
    println!(
        "{{\"bench\":\"crisp-served-trials\",\"link\":\"TCP + TLS, TLS dealer\",\"deviant_sessions\":{trials},\"flip\":{},\"add\":{},\"replay\":{},\"aborted_at_check\":{aborted},\"ended_on_malformed\":{},\"harmless_passed_with_the_honest_output\":{harmless},\"wrong_outputs\":0,\"honest_sessions\":{},\"honest_correct\":{}}}",
        kinds[0],
        kinds[1],
        kinds[2],
        trials - aborted - harmless,
        trials + 1,
        trials + 1
    );
}

/// The hello agrees on the mode, s and the linear backend: a client with
/// another s, a semi-honest dealer-mode client and a malicious-client
/// client against a dealer-mode server are refused, naming both settings.
#[test]
fn served_hello_agrees_on_mode_and_mac_parameter() {
    let model = tiny_cnn();
    let srv = serve_mc(model.clone());
    let addr = srv.addr();
    let other_s = Options { crisp: crisp_run::CrispOptions { s: 48, ..co() }, ..srv.client.clone() };
    let e = runtime::connect(&addr, &other_s).err().unwrap().to_string();
    assert!(e.contains("MAC parameter mismatch") && e.contains("--mac-s 48") && e.contains("--mac-s 40"), "{e}");
    let (addr_d, pin_d) = match &srv.client.mode {
        Mode::MaliciousClient { addr, pin } => (addr.clone(), *pin),
        _ => unreachable!(),
    };
    let semi = Options { mode: Mode::Dealer { addr: addr_d.clone(), pin: pin_d }, proto: "fss".into(), ..srv.client.clone() };
    let e = runtime::connect(&addr, &semi).err().unwrap().to_string();
    assert!(e.contains("trust mode mismatch") && e.contains("--mode dealer") && e.contains("--mode malicious-client"), "{e}");
    // the reverse: a semi-honest dealer-mode server refuses a malicious-client client
    // (a plaintext server needs a plaintext dealer: a server checks its dealer at start)
    let _ = (addr_d, pin_d);
    let plain_dealer = hush_tee::dealer::serve("127.0.0.1:0", hush_tee::dealer::DealerConfig::new(hush_transport::LinkSecurity::Insecure, hush_2pc::deal::kinds()), Arc::new(|_| {})).unwrap();
    let so = Options { mode: Mode::Dealer { addr: plain_dealer.addr.to_string(), pin: None }, proto: "fss".into(), link: hush_transport::LinkConfig::insecure(), ..Default::default() };
    let h = runtime::serve(model, "127.0.0.1:0", so, Arc::new(|_| {})).unwrap();
    let co_ins = Options { link: hush_transport::LinkConfig::insecure(), ..srv.client.clone() };
    let e = runtime::connect(&h.addr.to_string(), &co_ins).err().unwrap().to_string();
    assert!(e.contains("trust mode mismatch") && e.contains("--mode malicious-client") && e.contains("--mode dealer"), "{e}");
    h.shutdown();
    // a per-session memory cap below the model's estimate: refused by name
    let (addr_d, pin_d) = match &srv.client.mode {
        Mode::MaliciousClient { addr, pin } => (addr.clone(), *pin),
        _ => unreachable!(),
    };
    let _ = (addr_d, pin_d);
    let so = Options {
        mode: Mode::MaliciousClient { addr: plain_dealer.addr.to_string(), pin: None },
        proto: "crisp".into(),
        link: hush_transport::LinkConfig::insecure(),
        limits: crate::limits::ServerLimits::new(Some(64 << 10), None, 16),
        ..Default::default()
    };
    let h = runtime::serve(tiny_cnn(), "127.0.0.1:0", so, Arc::new(|_| {})).unwrap();
    let e = runtime::connect(&h.addr.to_string(), &co_ins).err().unwrap().to_string();
    assert!(e.contains("per-session memory cap") && e.contains("malicious-client"), "{e}");
    h.shutdown();
    plain_dealer.shutdown();
    // the server's side of the hello check, directly
    let hello = serde_json::json!({"mac_s": 40, "crisp_linear": "ckks"});
    assert!(crate::crisp_serve::check_client_hello(&hello, &co()).unwrap_err().contains("--crisp-linear ckks"));
    assert!(crate::crisp_serve::check_client_hello(&serde_json::json!({}), &co()).unwrap_err().contains("--mac-s none"));
}
