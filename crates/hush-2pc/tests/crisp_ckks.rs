//! CRISP's CKKS linear layers (InitLin, Lin) inside the malicious-client
//! pipeline, with dealer-made input ciphertexts (issue 36): honest runs
//! against plaintext with their online bytes pinned, the client's
//! openings and its HE output shares altered or replayed from a previous
//! inference, and the tamper campaign across every kind (with the
//! layer-output oracle). The W-independence of the verdict is tested in
//! `crisp_selective.rs`, beside the dealt backend's.

use hush_2pc::crisp::{self, AuthShare, LinShape, Lift, Session};
use hush_2pc::crisp_ckks;
use hush_2pc::tee::Dealer;
use hush_primitives::{Block, Prg, Ring};
use hush_transport::{Channel, Cost, MemChannel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// input (8) → InitLin W1 (6×8) → ReLU → Lin W2 (6×6) + bias c → ReLU →
/// MaxPool over pairs (3) → truncation by 1 bit → checked release.
struct Model {
    w1: Vec<i64>,
    w2: Vec<i64>,
    c: Vec<i64>,
}

const WINDOWS: [[usize; 2]; 3] = [[0, 1], [2, 3], [4, 5]];
const SHAPE1: LinShape = LinShape::Dense { n_in: 8, n_out: 6 };
const SHAPE2: LinShape = LinShape::Dense { n_in: 6, n_out: 6 };

fn mv(w: &[i64], v: &[i64], rows: usize) -> Vec<i64> {
    (0..rows).map(|r| (0..v.len()).map(|c| w[r * v.len() + c].wrapping_mul(v[c])).fold(0i64, i64::wrapping_add)).collect()
}

impl Model {
    fn new(seed: u64) -> Self {
        let mut p = Prg::new(Block(seed as u128 + 1000));
        let mut w = |n| (0..n).map(|_| (p.next_u64() % 7) as i64 - 3).collect::<Vec<i64>>();
        Model { w1: w(48), w2: w(36), c: w(6) }
    }
    /// (h1 = W1·x, h2 = W2·ReLU(h1) + c, output), as ring elements.
    fn plain(&self, ring: Ring, x: &[u64]) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
        let sx: Vec<i64> = x.iter().map(|&v| ring.to_signed(v)).collect();
        let relu = |v: &[i64]| -> Vec<i64> { v.iter().map(|&a| ring.to_signed(ring.from_signed(a)).max(0)).collect() };
        let h1 = mv(&self.w1, &sx, 6);
        let h2: Vec<i64> = mv(&self.w2, &relu(&h1), 6).iter().zip(&self.c).map(|(a, b)| a + b).collect();
        let r2 = relu(&h2);
        let out = WINDOWS.iter().map(|w| ring.from_signed(r2[w[0]].max(r2[w[1]]) >> 1)).collect();
        let f = |v: &[i64]| v.iter().map(|&a| ring.from_signed(a)).collect();
        (f(&h1), f(&h2), out)
    }
    fn ring_w(&self, ring: Ring, w: &[i64]) -> Vec<u64> {
        w.iter().map(|&v| ring.from_signed(v)).collect()
    }
}

struct Offline {
    sess: Session,
    t1: Option<crisp::LinBatch>,
    t2: Option<crisp::LinBatch>,
    inm: crisp::MaskBatch,
    r1: crisp::ReluBatch,
    r2: crisp::ReluBatch,
    mp: Vec<crisp::ReluBatch>,
    tr: crisp::TruncBatch,
    outm: crisp::MaskBatch,
}

fn offline(ch: &mut dyn Channel, d: &mut Dealer, party: u8, l: Lift, m: &Model) -> Offline {
    let ring = Ring::new(l.ell).unwrap();
    let sess = Session::start(d, party, l).unwrap();
    let ctx = crisp_ckks::context().unwrap();
    let mut he = crisp_ckks::setup(d, &sess, ctx.clone()).unwrap();
    let k1 = crisp_ckks::deal_lin(d, &sess, &ctx, SHAPE1).unwrap();
    let k2 = crisp_ckks::deal_lin(d, &sess, &ctx, SHAPE2).unwrap();
    let inm = crisp::deal_masks(d, &sess, 8).unwrap();
    let r1 = crisp::deal_relu(d, &sess, 6).unwrap();
    let r2 = crisp::deal_relu(d, &sess, 6).unwrap();
    let windows: Vec<Vec<usize>> = WINDOWS.iter().map(|w| w.to_vec()).collect();
    let mp = crisp::maxpool_levels(&windows).into_iter().map(|n| crisp::deal_relu(d, &sess, n).unwrap()).collect();
    let tr = crisp::deal_trunc(d, &sess, 3, 1).unwrap();
    let outm = crisp::deal_masks(d, &sess, 3).unwrap();
    let (w1, w2) = (m.ring_w(ring, &m.w1), m.ring_w(ring, &m.w2));
    let server = party == 0;
    let t1 = crisp_ckks::prepare(ch, &sess, &mut he, k1, server.then_some(&w1[..])).unwrap();
    let t2 = crisp_ckks::prepare(ch, &sess, &mut he, k2, server.then_some(&w2[..])).unwrap();
    Offline { sess, t1: Some(t1), t2: Some(t2), inm, r1, r2, mp, tr, outm }
}

/// An error the client adds to its value or MAC share of output 0 of
/// linear layer `.0` (0 or 1) — its shares of the HE product it decrypted
/// offline plus the online part.
#[derive(Clone, Copy, Debug)]
enum Local {
    None,
    ValueShare(usize, u128),
    MacShare(usize, u128),
}

/// The layer outputs each party holds (for the value-change oracle).
type Captured = Arc<Mutex<Vec<AuthShare>>>;

#[allow(clippy::too_many_arguments)]
fn online(ch: &mut dyn Channel, o: &mut Offline, m: &Model, x: Option<&[u64]>, local: Local, cap: &Captured, log: &mut dyn FnMut(&str)) -> hush_2pc::Result<Option<Vec<u64>>> {
    let l = o.sess.lift;
    let ring = Ring::new(l.ell).unwrap();
    let server = o.sess.party == 0;
    let (w1, w2, c) = (m.ring_w(ring, &m.w1), m.ring_w(ring, &m.w2), m.ring_w(ring, &m.c));
    let tamper = |layer: usize, h: &mut AuthShare| match local {
        Local::ValueShare(ly, e) if !server && ly == layer => h.v[0] = l.add(h.v[0], e),
        Local::MacShare(ly, e) if !server && ly == layer => h.m[0] = l.add(h.m[0], e),
        _ => {}
    };
    let xa = crisp::input(ch, &mut o.sess, &o.inm, x)?;
    let mut h = crisp_ckks::lin(ch, &mut o.sess, o.t1.take().unwrap(), server.then_some(&w1[..]), None, &xa)?;
    cap.lock().unwrap().push(h.clone());
    tamper(0, &mut h);
    let h = crisp::relu(ch, &mut o.sess, &o.r1, &h)?;
    let mut h = crisp_ckks::lin(ch, &mut o.sess, o.t2.take().unwrap(), server.then_some(&w2[..]), server.then_some(&c[..]), &h)?;
    cap.lock().unwrap().push(h.clone());
    tamper(1, &mut h);
    let h = crisp::relu(ch, &mut o.sess, &o.r2, &h)?;
    let windows: Vec<Vec<usize>> = WINDOWS.iter().map(|w| w.to_vec()).collect();
    let y = crisp::maxpool(ch, &mut o.sess, &o.mp, &h, &windows)?;
    let y = crisp::trunc(ch, &mut o.sess, &o.tr, &y)?;
    crisp::reveal_to_client(ch, &mut o.sess, &o.outm, &y, log)
}

/// Client messages of the online phase: 0 = δ, 1 = W1's opening x − B,
/// 2 = first ReLU opening, 3 = W2's opening, 4 = second ReLU,
/// 5 = MaxPool, 6 = truncation, 7 = z, 8 = ⟨q⟩.
#[derive(Clone, Debug)]
enum Wire {
    None,
    FlipBit { target: usize, bit: usize },
    Add { target: usize, elem: usize, e: u128 },
    Replay { target: usize, from: usize },
    /// Send these bytes (a previous inference's message) in place of `target`.
    ReplayOld { target: usize, bytes: Vec<u8> },
    Drop { target: usize },
}

struct Tamper {
    inner: Option<MemChannel>,
    action: Wire,
    k: u32,
    sent: Vec<Vec<u8>>,
}

impl Channel for Tamper {
    fn send(&mut self, payload: &[u8]) -> hush_transport::Result<()> {
        let i = self.sent.len();
        self.sent.push(payload.to_vec());
        let mut p = payload.to_vec();
        match &self.action {
            Wire::FlipBit { target, bit } if *target == i => {
                let at = (bit / 8) % p.len();
                p[at] ^= 1 << (bit % 8);
            }
            Wire::Add { target, elem, e } if *target == i => {
                let vb = self.k.div_ceil(8) as usize;
                let at = (elem * vb) % p.len();
                let mut a = [0u8; 16];
                a[..vb].copy_from_slice(&p[at..at + vb]);
                let v = u128::from_le_bytes(a).wrapping_add(*e) & ((1u128 << self.k) - 1);
                p[at..at + vb].copy_from_slice(&v.to_le_bytes()[..vb]);
            }
            Wire::Replay { target, from } if *target == i => p = self.sent[*from].clone(),
            Wire::ReplayOld { target, bytes } if *target == i => p = bytes.clone(),
            Wire::Drop { target } if *target == i => {
                self.inner = None;
                return Err(hush_transport::Error::Closed);
            }
            _ => {}
        }
        self.inner.as_mut().ok_or(hush_transport::Error::Closed)?.send(&p)
    }
    fn recv(&mut self) -> hush_transport::Result<Vec<u8>> {
        self.inner.as_mut().ok_or(hush_transport::Error::Closed)?.recv()
    }
    fn cost(&self) -> Cost {
        self.inner.as_ref().map(|c| c.cost()).unwrap_or_default()
    }
    fn max_frame(&self) -> usize {
        self.inner.as_ref().map(|c| c.max_frame()).unwrap_or(1 << 20)
    }
    fn set_timeout(&mut self, t: Duration) {
        if let Some(c) = self.inner.as_mut() {
            c.set_timeout(t)
        }
    }
}

struct Res {
    rs: hush_2pc::Result<Option<Vec<u64>>>,
    rc: hush_2pc::Result<Option<Vec<u64>>>,
    lines: Vec<String>,
    /// The reconstructed outputs of the two linear layers (values mod 2^ℓ),
    /// when both parties got that far.
    lin_values: Vec<Vec<u64>>,
    /// The client's online messages (for cross-inference replays).
    sent: Vec<Vec<u8>>,
}

fn run(l: Lift, m: Model, x: Vec<u64>, wire: Wire, local: Local) -> Res {
    let (mut ca, cb) = MemChannel::pair();
    ca.set_timeout(Duration::from_secs(30));
    let m = Arc::new(m);
    let m2 = m.clone();
    let (caps, capc): (Captured, Captured) = Default::default();
    let caps2 = caps.clone();
    let ts = std::thread::spawn(move || {
        let mut d = Dealer::in_process(&mut ca, 0).expect("seed agreement");
        let mut o = offline(&mut ca, &mut d, 0, l, &m2);
        let mut lines = Vec::new();
        let r = online(&mut ca, &mut o, &m2, None, Local::None, &caps2, &mut |s| lines.push(s.to_string()));
        (r, lines)
    });
    let mut ch = Tamper { inner: Some(cb), action: Wire::None, k: l.k(), sent: Vec::new() };
    let mut d = Dealer::in_process(ch.inner.as_mut().unwrap(), 1).expect("seed agreement");
    let mut o = offline(ch.inner.as_mut().unwrap(), &mut d, 1, l, &m);
    ch.action = wire;
    let rc = online(&mut ch, &mut o, &m, Some(&x), local, &capc, &mut |_| {});
    let sent = std::mem::take(&mut ch.sent);
    drop(ch);
    let (rs, lines) = ts.join().expect("server");
    let (s, c) = (caps.lock().unwrap(), capc.lock().unwrap());
    let lin_values = s.iter().zip(c.iter()).map(|(a, b)| a.v.iter().zip(&b.v).map(|(x, y)| l.value(l.add(*x, *y))).collect()).collect();
    Res { rs, rc, lines, lin_values, sent }
}

fn inputs(ring: Ring, seed: u64) -> Vec<u64> {
    let mut p = Prg::new(Block(seed as u128));
    (0..8).map(|_| ring.from_signed((p.next_u64() % 41) as i64 - 20)).collect()
}

fn lift() -> Lift {
    Lift::new(37, 40).unwrap()
}

#[test]
fn honest_ckks_pipeline_matches_plaintext_exactly() {
    let ring = Ring::new(37).unwrap();
    for seed in 0..4u64 {
        let m = Model::new(seed);
        let x = inputs(ring, seed + 77);
        let (h1, h2, want) = m.plain(ring, &x);
        let r = run(lift(), m, x, Wire::None, Local::None);
        assert!(r.rs.as_ref().unwrap().is_none(), "{:?}", r.rs.err());
        assert_eq!(r.rc.unwrap().unwrap(), want);
        assert_eq!(r.lin_values, vec![h1, h2]);
        assert!(r.lines.is_empty());
        // online, the client sends openings only (no ciphertext): δ 8,
        // x − B 8, ReLU 6, x − B 6, ReLU 6, MaxPool 3, truncation 3, z 3,
        // ⟨q⟩ 1 — 44 values of ⌈77/8⌉ = 10 bytes in 9 messages
        assert_eq!(r.sent.iter().map(|m| m.len()).collect::<Vec<_>>(), vec![80, 80, 60, 60, 60, 30, 30, 30, 10]);
    }
}

/// An InitLin through the public entry point, and the conv/Scale mapping.
#[test]
fn init_lin_conv_and_scale_against_plaintext() {
    let l = lift();
    let ring = Ring::new(37).unwrap();
    let conv = LinShape::Conv { c_in: 2, h: 5, w: 5, c_out: 3, kh: 3, kw: 3, stride: [1, 1], pads: [1; 4] };
    let scale = LinShape::Scale { channels: 3, inner: 25 };
    let mut p = Prg::new(Block(5));
    let x: Vec<u64> = (0..50).map(|_| ring.from_signed((p.next_u64() % 21) as i64 - 10)).collect();
    let w: Vec<u64> = (0..54).map(|_| ring.from_signed((p.next_u64() % 9) as i64 - 4)).collect();
    let sw: Vec<u64> = (0..3).map(|_| ring.from_signed((p.next_u64() % 9) as i64 - 4)).collect();
    let b: Vec<u64> = (0..75).map(|_| ring.from_signed((p.next_u64() % 9) as i64 - 4)).collect();
    let (mut ca, mut cb) = MemChannel::pair();
    let (w2, sw2, b2) = (w.clone(), sw.clone(), b.clone());
    let ts = std::thread::spawn(move || {
        let mut d = Dealer::in_process(&mut ca, 0).unwrap();
        let mut sess = Session::start(&mut d, 0, l).unwrap();
        let ctx = crisp_ckks::context().unwrap();
        let mut he = crisp_ckks::setup(&mut d, &sess, ctx.clone()).unwrap();
        let masks = crisp::deal_masks(&mut d, &sess, 50).unwrap();
        let k1 = crisp_ckks::deal_lin(&mut d, &sess, &ctx, conv).unwrap();
        let k2 = crisp_ckks::deal_lin(&mut d, &sess, &ctx, scale).unwrap();
        let t1 = crisp_ckks::prepare(&mut ca, &sess, &mut he, k1, Some(&w2)).unwrap();
        let t2 = crisp_ckks::prepare(&mut ca, &sess, &mut he, k2, Some(&sw2)).unwrap();
        let y = crisp_ckks::init_lin(&mut ca, &mut sess, &masks, None, t1, Some(&w2), Some(&b2)).unwrap();
        let z = crisp_ckks::lin(&mut ca, &mut sess, t2, Some(&sw2), None, &y).unwrap();
        (y, z)
    });
    let mut d = Dealer::in_process(&mut cb, 1).unwrap();
    let mut sess = Session::start(&mut d, 1, l).unwrap();
    let ctx = crisp_ckks::context().unwrap();
    let mut he = crisp_ckks::setup(&mut d, &sess, ctx.clone()).unwrap();
    let masks = crisp::deal_masks(&mut d, &sess, 50).unwrap();
    let k1 = crisp_ckks::deal_lin(&mut d, &sess, &ctx, conv).unwrap();
    let k2 = crisp_ckks::deal_lin(&mut d, &sess, &ctx, scale).unwrap();
    let t1 = crisp_ckks::prepare(&mut cb, &sess, &mut he, k1, None).unwrap();
    let t2 = crisp_ckks::prepare(&mut cb, &sess, &mut he, k2, None).unwrap();
    let yc = crisp_ckks::init_lin(&mut cb, &mut sess, &masks, Some(&x), t1, None, None).unwrap();
    let zc = crisp_ckks::lin(&mut cb, &mut sess, t2, None, None, &yc).unwrap();
    let (ys, zs) = ts.join().unwrap();
    // plaintext conv (pad 1) + bias, then the per-channel scale
    let sx: Vec<i64> = x.iter().map(|&v| ring.to_signed(v)).collect();
    let mut want = vec![0i64; 75];
    for o in 0..3 {
        for i in 0..5i64 {
            for j in 0..5i64 {
                let mut acc = ring.to_signed(b[(o * 5 + i as usize) * 5 + j as usize]);
                for c in 0..2 {
                    for a in 0..3i64 {
                        for bb in 0..3i64 {
                            let (yi, xj) = (i + a - 1, j + bb - 1);
                            if (0..5).contains(&yi) && (0..5).contains(&xj) {
                                acc += ring.to_signed(w[((o * 2 + c) * 3 + a as usize) * 3 + bb as usize]) * sx[(c * 5 + yi as usize) * 5 + xj as usize];
                            }
                        }
                    }
                }
                want[(o * 5 + i as usize) * 5 + j as usize] = acc;
            }
        }
    }
    let got: Vec<i64> = (0..75).map(|i| ring.to_signed(l.value(l.add(ys.v[i], yc.v[i])))).collect();
    assert_eq!(got, want);
    let got2: Vec<i64> = (0..75).map(|i| ring.to_signed(l.value(l.add(zs.v[i], zc.v[i])))).collect();
    let want2: Vec<i64> = (0..75).map(|i| want[i] * ring.to_signed(sw[i / 25])).collect();
    assert_eq!(got2, want2);
    // the check would pass: shares of MACs are consistent (reconstructed with μ by a test-only dealer-free argument is not available, so the
    // pipeline test above covers the check); here the MAC component must at least differ from the value
    assert_ne!(l.add(zs.m[0], zc.m[0]), l.add(zs.v[0], zc.v[0]));
}

/// Changing or replaying the openings x − B (bits, a previous inference's
/// opening), or the client's shares of a layer's output (its decryption of
/// the HE product, value or MAC part): every change of a value is caught,
/// nothing is released; a MAC-only change is caught too.
#[test]
fn changed_or_replayed_openings_and_output_shares_are_caught() {
    let l = lift();
    let ring = Ring::new(37).unwrap();
    let m = Model::new(3);
    let x = inputs(ring, 5);
    let prev = run(l, Model::new(3), inputs(ring, 6), Wire::None, Local::None);
    assert!(prev.rc.is_ok());
    let changes = [
        (Wire::ReplayOld { target: 1, bytes: prev.sent[1].clone() }, Local::None),
        (Wire::ReplayOld { target: 3, bytes: prev.sent[3].clone() }, Local::None),
        (Wire::FlipBit { target: 1, bit: 8 * 20 + 3 }, Local::None),
        (Wire::FlipBit { target: 3, bit: 8 * 10 + 36 }, Local::None),
        (Wire::None, Local::ValueShare(0, 1)),
        (Wire::None, Local::ValueShare(1, 1 << 40)),
        (Wire::None, Local::MacShare(0, 99)),
    ];
    for (wire, local) in changes {
        let r = run(l, Model::new(3), x.clone(), wire.clone(), local);
        assert!(r.rc.is_err() && r.rs.is_err(), "{wire:?} {local:?}: {:?} / {:?}", r.rc, r.rs);
    }
    // a MAC-share error alone changes no value: the check still fails
    let r = run(l, m, x, Wire::None, Local::MacShare(1, 1 << 37));
    assert!(r.rc.is_err() && r.rs.is_err());
    assert!(r.lines.iter().any(|s| s.contains("consistency check failed")), "{:?}", r.lines);
}

#[derive(Default, Debug)]
struct Tally {
    trials: usize,
    by_kind: [usize; 10],
    value_changing: usize,
    caught: usize,
    harmless_passed: usize,
    undetected_wrong: usize,
    undetected_value_change: usize,
}

/// Random trials across every kind: flip a bit / add a value in a share it
/// sends (openings, δ, z, q, its ciphertext messages), a wrong x + r, a
/// replayed opening, a replay of a previous inference's ciphertexts,
/// skipping the check, altering its value or MAC shares (after either
/// layer: its decrypted HE shares), and changing or replaying the linear
/// layers' openings. A run "changes a value" if a layer's reconstructed
/// value differs from the plaintext one (the oracle for the openings) or
/// the message error reaches a value (as in `tests/crisp.rs`).
fn campaign(trials: usize, seed: u64) -> Tally {
    let l = lift();
    let ring = Ring::new(37).unwrap();
    let mut p = Prg::new(Block(seed as u128));
    let mut t = Tally::default();
    let mut prev_open: Option<(Vec<u8>, Vec<u8>)> = None;
    for i in 0..trials {
        let m = Model::new(i as u64 ^ seed);
        let x = inputs(ring, i as u64 ^ (seed << 20));
        let (h1, h2, want) = m.plain(ring, &x);
        let kind = (p.next_u64() % 10) as usize;
        let opening = [0usize, 1, 2, 3, 4, 5, 6, 7][(p.next_u64() % 8) as usize];
        let e = (p.random_block().0 & l.mask()).max(1);
        // (wire, local, ct, changes a value — None: ask the layer oracle)
        let (wire, local, changes): (Wire, Local, Option<bool>) = match kind {
            0 => {
                let bit = (p.next_u64() as usize) % 80;
                (Wire::FlipBit { target: opening, bit }, Local::None, Some(bit < 37))
            }
            1 => {
                let elem = (p.next_u64() % 3) as usize;
                (Wire::Add { target: opening, elem, e }, Local::None, Some(e & ((1 << 37) - 1) != 0))
            }
            2 => (Wire::Replay { target: 4, from: 2 }, Local::None, Some(true)),
            3 => (Wire::Drop { target: 7 + (p.next_u64() % 2) as usize }, Local::None, Some(true)),
            4 => (Wire::None, Local::ValueShare(1, e), Some(e & ((1 << 37) - 1) != 0)),
            5 => (Wire::None, Local::MacShare(1, e), Some(false)),
            6 => (Wire::Add { target: 8, elem: 0, e }, Local::None, Some(true)),
            7 => {
                // an error in its share of layer 1's output (the HE product)
                let local = if p.next_u64().is_multiple_of(2) { Local::ValueShare(0, e) } else { Local::MacShare(0, e) };
                let changes = matches!(local, Local::ValueShare(..)) && e & ((1 << 37) - 1) != 0;
                (Wire::None, local, Some(changes))
            }
            8 => {
                let target = if p.next_u64().is_multiple_of(2) { 1 } else { 3 };
                (Wire::FlipBit { target, bit: (p.next_u64() as usize) % (8 * 80) }, Local::None, None)
            }
            _ => match &prev_open {
                // replay a previous inference's opening of a linear layer
                Some((a, b)) => {
                    let target = if p.next_u64().is_multiple_of(2) { 1 } else { 3 };
                    (Wire::ReplayOld { target, bytes: if target == 1 { a.clone() } else { b.clone() } }, Local::None, None)
                }
                None => (Wire::None, Local::None, Some(false)),
            },
        };
        let r = run(l, m, x, wire, local);
        if r.sent.len() > 3 {
            prev_open = Some((r.sent[1].clone(), r.sent[3].clone()));
        }
        let changes = changes.unwrap_or_else(|| {
            // the oracle: a layer the parties finished has another value; a
            // layer they could not finish (a malformed message) is a caught run
            r.lin_values.first().is_some_and(|v| *v != h1) || r.lin_values.get(1).is_some_and(|v| *v != h2) || r.lin_values.len() < 2
        });
        t.trials += 1;
        t.by_kind[kind] += 1;
        if changes {
            t.value_changing += 1;
        }
        match r.rc {
            Ok(ref y) => {
                if changes {
                    t.undetected_value_change += 1;
                }
                if y.as_ref() == Some(&want) {
                    t.harmless_passed += 1;
                } else {
                    t.undetected_wrong += 1;
                }
            }
            Err(_) => {
                assert!(r.rs.is_err(), "client failed but the server did not: {:?}", r.rs);
                t.caught += 1;
            }
        }
    }
    t
}

#[test]
fn tamper_campaign_small_ckks() {
    let t = campaign(120, 0xc217);
    eprintln!("CRISP tamper campaign (CKKS linear layers): {t:?}");
    assert!(t.by_kind[7] > 0 && t.by_kind[8] > 0 && t.by_kind[9] > 0, "{t:?}");
    assert!(t.value_changing > 60, "{t:?}");
    assert_eq!(t.undetected_wrong, 0, "{t:?}");
    assert_eq!(t.undetected_value_change, 0, "every value-changing deviation is caught: {t:?}");
}

#[test]
#[ignore = "10^4 trials: run with CRISP_LINEAR=ckks scripts/crisp_tamper_trials.sh"]
fn tamper_trials_ckks() {
    let n: usize = std::env::var("CRISP_TRIALS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let t = campaign(n, 0x5eef);
    println!(
        "{{\"bench\":\"crisp_tamper_trials\",\"linear\":\"ckks\",\"ell\":37,\"s\":40,\"trials\":{},\"by_kind\":{:?},\"value_changing\":{},\"caught\":{},\"harmless_passed\":{},\"undetected_wrong\":{},\"undetected_value_change\":{}}}",
        t.trials, t.by_kind, t.value_changing, t.caught, t.harmless_passed, t.undetected_wrong, t.undetected_value_change
    );
    assert_eq!(t.undetected_wrong, 0);
    assert_eq!(t.undetected_value_change, 0);
}
