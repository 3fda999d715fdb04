//! CRISP at the protocol layer: authenticated ReLU/MaxPool against a
//! plaintext reference, cost pins, and a malicious client (tampered,
//! replayed, dropped messages; tampered shares) that must be caught before
//! it learns anything. The server is always the honest code; the client is
//! the honest code behind a tampering channel, or with its shares altered
//! between the honest steps.
//!
//! `tamper_trials` (ignored by default) runs CRISP_TRIALS (default 10^4)
//! mixed trials at s = 40: `scripts/crisp_tamper_trials.sh`.
mod common;
use hush_2pc::crisp::{self, AuthShare, Lift, Session};
use hush_2pc::tee::Dealer;
use hush_2pc::Error;
use hush_primitives::{Block, Prg, Ring};
use hush_transport::{Channel, Cost, MemChannel};
use std::time::Duration;

// ------------------------------------------------------------ plaintext model

/// The test pipeline: input (8) → W1 (6×8) → ReLU → W2 (6×6) + c → ReLU →
/// MaxPool over pairs (3) → truncation by 1 bit → output. Public small
/// weights.
struct Model {
    w1: Vec<i64>,
    w2: Vec<i64>,
    c: Vec<i64>,
}

const WINDOWS: [[usize; 2]; 3] = [[0, 1], [2, 3], [4, 5]];

impl Model {
    fn new(seed: u64) -> Self {
        let mut p = Prg::new(Block(seed as u128 + 1000));
        let mut w = |n| (0..n).map(|_| (p.next_u64() % 7) as i64 - 3).collect::<Vec<i64>>();
        Model { w1: w(48), w2: w(36), c: w(6) }
    }
    fn plain(&self, ring: Ring, x: &[u64]) -> Vec<u64> {
        let sx: Vec<i64> = x.iter().map(|&v| ring.to_signed(v)).collect();
        let mv = |w: &[i64], v: &[i64], rows: usize| -> Vec<i64> {
            (0..rows).map(|r| (0..v.len()).map(|c| w[r * v.len() + c].wrapping_mul(v[c])).fold(0i64, i64::wrapping_add)).collect()
        };
        let relu = |v: Vec<i64>| -> Vec<i64> { v.into_iter().map(|a| ring.to_signed(ring.from_signed(a)).max(0)).collect() };
        let h = relu(mv(&self.w1, &sx, 6));
        let h2: Vec<i64> = mv(&self.w2, &h, 6).iter().zip(&self.c).map(|(a, b)| a + b).collect();
        let h2 = relu(h2);
        WINDOWS.iter().map(|w| ring.from_signed(h2[w[0]].max(h2[w[1]]) >> 1)).collect()
    }
}

fn lift_mat(l: &Lift, w: &[i64]) -> Vec<u128> {
    w.iter().map(|&v| l.lift_signed(v)).collect()
}

/// Everything a party deals before the online phase, in one fixed order.
struct Offline {
    sess: Session,
    inm: crisp::MaskBatch,
    r1: crisp::ReluBatch,
    r2: crisp::ReluBatch,
    mp: Vec<crisp::ReluBatch>,
    tr: crisp::TruncBatch,
    outm: crisp::MaskBatch,
    /// Private-weight linear triples for W1 and W2 (empty: the public,
    /// local linear maps).
    lin: Vec<crisp::LinBatch>,
}

fn offline(d: &mut Dealer, party: u8, l: Lift) -> Offline {
    offline_with(d, party, l, false)
}

const SHAPE1: crisp::LinShape = crisp::LinShape::Dense { n_in: 8, n_out: 6 };
const SHAPE2: crisp::LinShape = crisp::LinShape::Dense { n_in: 6, n_out: 6 };

fn offline_with(d: &mut Dealer, party: u8, l: Lift, private: bool) -> Offline {
    let sess = Session::start(d, party, l).unwrap();
    let lin = if private { vec![crisp::deal_linear(d, &sess, SHAPE1).unwrap(), crisp::deal_linear(d, &sess, SHAPE2).unwrap()] } else { Vec::new() };
    let inm = crisp::deal_masks(d, &sess, 8).unwrap();
    let r1 = crisp::deal_relu(d, &sess, 6).unwrap();
    let r2 = crisp::deal_relu(d, &sess, 6).unwrap();
    let windows: Vec<Vec<usize>> = WINDOWS.iter().map(|w| w.to_vec()).collect();
    let mp = crisp::maxpool_levels(&windows).into_iter().map(|n| crisp::deal_relu(d, &sess, n).unwrap()).collect();
    let tr = crisp::deal_trunc(d, &sess, 3, 1).unwrap();
    let outm = crisp::deal_masks(d, &sess, 3).unwrap();
    Offline { sess, inm, r1, r2, mp, tr, outm, lin }
}

/// A client-side local tamper between the honest steps.
#[derive(Clone, Copy, Debug)]
enum Local {
    None,
    /// Add `e` to the value share of element 0 before the second ReLU.
    ValueShare(u128),
    /// Add `e` to the MAC share of element 0 before the second ReLU.
    MacShare(u128),
}

/// The online phase of the pipeline for one party. Returns the client's
/// output (server: None).
fn online(ch: &mut dyn Channel, o: &mut Offline, m: &Model, x: Option<&[u64]>, local: Local, log: &mut dyn FnMut(&str)) -> hush_2pc::Result<Option<Vec<u64>>> {
    let l = o.sess.lift;
    let server = o.sess.party == 0;
    let (w1, w2) = (lift_mat(&l, &m.w1), lift_mat(&l, &m.w2));
    // Private weights: the server sends E = W − A for both layers first
    // (input-independent; the client only receives); the client never
    // touches W.
    let mut lin = std::mem::take(&mut o.lin);
    if !lin.is_empty() {
        crisp::linear_prepare(ch, &o.sess, &mut lin[0], server.then_some(&w1[..]))?;
        crisp::linear_prepare(ch, &o.sess, &mut lin[1], server.then_some(&w2[..]))?;
    }
    let mut lin = lin.into_iter();
    let xa = crisp::input(ch, &mut o.sess, &o.inm, x)?;
    let h = match lin.next() {
        Some(t) => crisp::linear(ch, &mut o.sess, t, server.then_some(&w1[..]), &xa)?,
        None => xa.matvec_public(&l, &w1, 6, 8)?,
    };
    let h = crisp::relu(ch, &mut o.sess, &o.r1, &h)?;
    let h = match lin.next() {
        Some(t) => crisp::linear(ch, &mut o.sess, t, server.then_some(&w2[..]), &h)?,
        None => h.matvec_public(&l, &w2, 6, 6)?,
    };
    let mut h = h.add_public(&o.sess, &lift_mat(&l, &m.c))?;
    match local {
        Local::ValueShare(e) if o.sess.party == 1 => h.v[0] = l.add(h.v[0], e),
        Local::MacShare(e) if o.sess.party == 1 => h.m[0] = l.add(h.m[0], e),
        _ => {}
    }
    let h = crisp::relu(ch, &mut o.sess, &o.r2, &h)?;
    let windows: Vec<Vec<usize>> = WINDOWS.iter().map(|w| w.to_vec()).collect();
    let y = crisp::maxpool(ch, &mut o.sess, &o.mp, &h, &windows)?;
    let y = crisp::trunc(ch, &mut o.sess, &o.tr, &y)?;
    crisp::reveal_to_client(ch, &mut o.sess, &o.outm, &y, log)
}

// ------------------------------------------------------------ tampering channel

/// What the client's channel does to its `target`-th message (0 = δ,
/// 1 = first ReLU opening, 2 = second, 3 = MaxPool's, 4 = the
/// truncation's, 5 = z, 6 = ⟨q⟩).
#[derive(Clone, Copy, Debug)]
enum Wire {
    None,
    FlipBit { target: usize, bit: usize },
    /// Add `e` to value `elem` (values are ⌈k/8⌉ bytes, little-endian).
    Add { target: usize, elem: usize, e: u128 },
    /// Send message `from` again in place of message `target`.
    Replay { target: usize, from: usize },
    /// Stop at message `target`: send nothing more, close the link.
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
        match self.action {
            Wire::FlipBit { target, bit } if target == i => {
                let at = (bit / 8) % p.len();
                p[at] ^= 1 << (bit % 8);
            }
            Wire::Add { target, elem, e } if target == i => {
                let vb = self.k.div_ceil(8) as usize;
                let at = (elem * vb) % p.len();
                let mut a = [0u8; 16];
                a[..vb].copy_from_slice(&p[at..at + vb]);
                let v = u128::from_le_bytes(a).wrapping_add(e) & hush_fss::wide::mask128(self.k);
                p[at..at + vb].copy_from_slice(&v.to_le_bytes()[..vb]);
            }
            Wire::Replay { target, from } if target == i => p = self.sent[from].clone(),
            Wire::Drop { target } if target == i => {
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

/// One run: honest server, client with `wire`/`local` tampering.
/// Returns (server result, client result, server log lines).
fn run(l: Lift, m: Model, x: Vec<u64>, wire: Wire, local: Local) -> (hush_2pc::Result<Option<Vec<u64>>>, hush_2pc::Result<Option<Vec<u64>>>, Vec<String>) {
    run_with(l, m, x, wire, local, false)
}

/// [`run`] with the private-weight linear layers when `private` (client
/// messages then: 0 = δ, 1 = F of W1 (the masked opening x − B, 8
/// values), 2 = first ReLU opening, 3 = F of W2 (6 values), 4 = second
/// ReLU, 5 = MaxPool, 6 = truncation, 7 = z, 8 = ⟨q⟩).
fn run_with(l: Lift, m: Model, x: Vec<u64>, wire: Wire, local: Local, private: bool) -> (hush_2pc::Result<Option<Vec<u64>>>, hush_2pc::Result<Option<Vec<u64>>>, Vec<String>) {
    let (mut ca, cb) = MemChannel::pair();
    ca.set_timeout(Duration::from_secs(20));
    let m = std::sync::Arc::new(m);
    let m2 = m.clone();
    let ts = std::thread::spawn(move || {
        let mut d = Dealer::in_process(&mut ca, 0).expect("seed agreement");
        let mut o = offline_with(&mut d, 0, l, private);
        let mut lines = Vec::new();
        let r = online(&mut ca, &mut o, &m2, None, Local::None, &mut |s| lines.push(s.to_string()));
        (r, lines)
    });
    let mut ch = Tamper { inner: Some(cb), action: Wire::None, k: l.k(), sent: Vec::new() };
    let mut d = Dealer::in_process(ch.inner.as_mut().unwrap(), 1).expect("seed agreement");
    let mut o = offline_with(&mut d, 1, l, private);
    ch.action = wire;
    let rc = online(&mut ch, &mut o, &m, Some(&x), local, &mut |_| {});
    drop(ch);
    let (rs, lines) = ts.join().expect("server");
    (rs, rc, lines)
}

fn inputs(ring: Ring, seed: u64) -> Vec<u64> {
    // small signed values so that no layer overflows the ℓ-bit range
    let mut p = Prg::new(Block(seed as u128));
    (0..8).map(|_| ring.from_signed((p.next_u64() % 41) as i64 - 20)).collect()
}

// ------------------------------------------------------------ honest runs

#[test]
fn honest_pipeline_matches_plaintext() {
    for (ell, s) in [(16u32, 40u32), (37, 40), (64, 40), (64, 64), (8, 4)] {
        let l = Lift::new(ell, s).unwrap();
        let ring = Ring::new(ell).unwrap();
        for t in 0..3u64 {
            let m = Model::new(t);
            let x = inputs(ring, 77 + t);
            let want = m.plain(ring, &x);
            let (rs, rc, lines) = run(l, m, x, Wire::None, Local::None);
            assert!(rs.unwrap().is_none());
            assert_eq!(rc.unwrap().unwrap(), want, "ℓ {ell} s {s}");
            assert!(lines.is_empty());
        }
    }
}

/// Public multiples of 2^ℓ: adding them gives other lifts of the same values.
fn garbage(l: Lift, n: usize) -> Vec<u128> {
    let mut p = Prg::new(Block(99));
    (0..n).map(|_| (p.random_block().0 << l.ell) & l.mask()).collect()
}

/// ReLU over random values and edge cases (wrap-around of x + r, the sign
/// boundary, the extremes), with random upper bits in the lift.
#[test]
fn relu_gate_random_and_edges() {
    for (ell, s) in [(16u32, 40u32), (37, 40), (64, 64)] {
        let l = Lift::new(ell, s).unwrap();
        let ring = Ring::new(ell).unwrap();
        let xs = common::edge_values(ell, 600, ell as u64);
        let n = xs.len();
        let xs2 = xs.clone();
        let (srv, cli) = common::run_tee(
            move |ch, d| {
                let mut sess = Session::start(d, 0, l).unwrap();
                let im = crisp::deal_masks(d, &sess, n).unwrap();
                let b = crisp::deal_relu(d, &sess, n).unwrap();
                let om = crisp::deal_masks(d, &sess, n).unwrap();
                let x = crisp::input(ch, &mut sess, &im, None).unwrap();
                let x = x.add_public(&sess, &garbage(l, n)).unwrap();
                let y = crisp::relu(ch, &mut sess, &b, &x).unwrap();
                crisp::reveal_to_client(ch, &mut sess, &om, &y, &mut |_| {}).unwrap()
            },
            move |ch, d| {
                let mut sess = Session::start(d, 1, l).unwrap();
                let im = crisp::deal_masks(d, &sess, n).unwrap();
                let b = crisp::deal_relu(d, &sess, n).unwrap();
                let om = crisp::deal_masks(d, &sess, n).unwrap();
                let x = crisp::input(ch, &mut sess, &im, Some(&xs2)).unwrap();
                let x = x.add_public(&sess, &garbage(l, n)).unwrap();
                let y = crisp::relu(ch, &mut sess, &b, &x).unwrap();
                crisp::reveal_to_client(ch, &mut sess, &om, &y, &mut |_| {}).unwrap()
            },
        );
        assert!(srv.is_none());
        let y = cli.unwrap();
        for i in 0..n {
            let want = if ring.msb(xs[i]) { 0 } else { xs[i] };
            assert_eq!(y[i], want, "ℓ {ell} x {}", xs[i]);
        }
    }
}

/// The gate's cost: one round, n·⌈k/8⌉ bytes each way; the check and
/// release: three flights after the last gate.
#[test]
fn relu_is_one_round_and_costs_are_pinned() {
    let l = Lift::new(37, 40).unwrap();
    let n = 100;
    let vb = 10u64; // ⌈77/8⌉
    let xs: Vec<u64> = common::edge_values(37, n, 5);
    let (srv, cli) = common::run_tee(
        move |ch, d| {
            let mut sess = Session::start(d, 0, l).unwrap();
            let im = crisp::deal_masks(d, &sess, n).unwrap();
            let b = crisp::deal_relu(d, &sess, n).unwrap();
            let om = crisp::deal_masks(d, &sess, n).unwrap();
            let x = crisp::input(ch, &mut sess, &im, None).unwrap();
            let c0 = ch.cost();
            let y = crisp::relu(ch, &mut sess, &b, &x).unwrap();
            let c1 = ch.cost();
            crisp::reveal_to_client(ch, &mut sess, &om, &y, &mut |_| {}).unwrap();
            (c1 - c0, ch.cost() - c1)
        },
        move |ch, d| {
            let mut sess = Session::start(d, 1, l).unwrap();
            let im = crisp::deal_masks(d, &sess, n).unwrap();
            let b = crisp::deal_relu(d, &sess, n).unwrap();
            let om = crisp::deal_masks(d, &sess, n).unwrap();
            let x = crisp::input(ch, &mut sess, &im, Some(&xs)).unwrap();
            let c0 = ch.cost();
            let y = crisp::relu(ch, &mut sess, &b, &x).unwrap();
            let c1 = ch.cost();
            crisp::reveal_to_client(ch, &mut sess, &om, &y, &mut |_| {}).unwrap();
            (c1 - c0, ch.cost() - c1)
        },
    );
    let ((g0, k0), (g1, _k1)) = (srv, cli);
    assert_eq!(g0.rounds, 1, "the gate is one round");
    assert_eq!(g1.rounds, 1);
    assert_eq!((g0.bytes_sent, g0.bytes_recv), (n as u64 * vb, n as u64 * vb));
    // check + release at the server: receives z (n·vb) and ⟨q⟩ (vb); sends
    // the seed (16), the verdict (1) and z mod 2^ℓ (n·5).
    assert_eq!(k0.bytes_recv, n as u64 * vb + vb);
    assert_eq!(k0.bytes_sent, 16 + 1 + n as u64 * 5);
    assert_eq!(k0.rounds, 4, "z, seed, q, verdict + output: four flights counted from the server's side");
}

// ------------------------------------------------------------ malicious client

fn caught(rs: &hush_2pc::Result<Option<Vec<u64>>>, rc: &hush_2pc::Result<Option<Vec<u64>>>) -> bool {
    matches!(rs, Err(Error::MacCheckFailed(_))) && rc.is_err()
}

#[test]
fn wrong_openings_are_caught() {
    let l = Lift::new(37, 40).unwrap();
    let ring = Ring::new(37).unwrap();
    let mut p = Prg::new(Block(1));
    for t in 0..12usize {
        let target = 1 + t % 5; // the four gate openings and z
        let e = match t % 3 {
            0 => 1u128,
            1 => 1u128 << 36,
            _ => (p.random_block().0 | 1) & l.mask(),
        };
        let (rs, rc, lines) = run(l, Model::new(t as u64), inputs(ring, t as u64), Wire::Add { target, elem: t % 3, e }, Local::None);
        assert!(caught(&rs, &rc), "trial {t}: target {target} e {e:#x}: {rs:?} / {rc:?}");
        assert!(matches!(rc, Err(Error::Aborted(_))), "the client learns only the abort: {rc:?}");
        assert_eq!(lines.len(), 1, "the server logs the failure once");
        assert!(lines[0].contains("consistency check failed"));
    }
}

#[test]
fn tampered_shares_bit_flips_replays_and_skips_are_caught() {
    let l = Lift::new(37, 40).unwrap();
    let ring = Ring::new(37).unwrap();
    let m = || Model::new(9);
    let x = || inputs(ring, 9);
    // a value-share error before a gate
    let (rs, rc, _) = run(l, m(), x(), Wire::None, Local::ValueShare(5));
    assert!(caught(&rs, &rc));
    // a flipped low bit in an opening (bit 3 of element 0)
    let (rs, rc, _) = run(l, m(), x(), Wire::FlipBit { target: 2, bit: 3 }, Local::None);
    assert!(caught(&rs, &rc));
    // a replayed opening (the first ReLU's in place of the second's)
    let (rs, rc, _) = run(l, m(), x(), Wire::Replay { target: 2, from: 1 }, Local::None);
    assert!(caught(&rs, &rc));
    // a wrong ⟨q⟩ with no other deviation: always caught
    let (rs, rc, _) = run(l, m(), x(), Wire::Add { target: 6, elem: 0, e: 1 }, Local::None);
    assert!(caught(&rs, &rc));
    // skipping the check: the client sends z and then nothing
    let (rs, rc, _) = run(l, m(), x(), Wire::Drop { target: 6 }, Local::None);
    assert!(matches!(rs, Err(Error::MacCheckFailed(_))), "{rs:?}");
    assert!(rc.is_err());
    // skipping before the output opening
    let (rs, rc, _) = run(l, m(), x(), Wire::Drop { target: 5 }, Local::None);
    assert!(matches!(rs, Err(Error::MacCheckFailed(_))), "{rs:?}");
    assert!(rc.is_err());
    // a replayed opening of the same length into the truncation gate
    let (rs, rc, _) = run(l, m(), x(), Wire::Replay { target: 4, from: 3 }, Local::None);
    assert!(caught(&rs, &rc));
    // a truncated opening (a message of the wrong length) — the server's
    // gate fails before the check; it never reaches the release
    let (rs, rc, _) = run(l, m(), x(), Wire::Replay { target: 3, from: 1 }, Local::None);
    assert!(rs.is_err() && rc.is_err());
}

/// Errors confined to the lift's upper bits or to a MAC share change no
/// value: whether or not the check catches them, a released output is the
/// correct one.
#[test]
fn harmless_deviations_never_change_the_output() {
    let l = Lift::new(16, 8).unwrap();
    let ring = Ring::new(16).unwrap();
    let (mut pass, mut fail) = (0, 0);
    for t in 0..40u64 {
        let m = Model::new(t);
        let x = inputs(ring, t);
        let want = m.plain(ring, &x);
        let (wire, local) = match t % 3 {
            0 => (Wire::FlipBit { target: 1 + (t as usize % 4), bit: 16 + (t as usize % 8) }, Local::None),
            1 => (Wire::None, Local::MacShare(1 << (16 + t % 8))),
            _ => (Wire::None, Local::ValueShare(1 << (16 + t % 8))),
        };
        let (rs, rc, _) = run(l, m, x, wire, local);
        match rc {
            Ok(Some(y)) => {
                assert!(rs.is_ok());
                assert_eq!(y, want, "a released output must be correct");
                pass += 1;
            }
            _ => {
                assert!(caught(&rs, &rc));
                fail += 1;
            }
        }
    }
    // upper-bit errors pass with probability ≥ 1/2 for the top bits: both outcomes occur
    assert!(pass > 0 && fail > 0, "pass {pass} fail {fail}");
}

/// With a small statistical parameter the soundness bound is observable:
/// an error of 2^(ℓ−1) in one opening passes with probability exactly
/// (s + 3)/2^(s+2) for the best ⟨q⟩ (the honest one), = 7/64 for s = 4.
#[test]
fn small_s_passes_at_the_stated_rate() {
    let (ell, s) = (8u32, 4u32);
    let l = Lift::new(ell, s).unwrap();
    let ring = Ring::new(ell).unwrap();
    let trials = 1200usize;
    let mut passed = 0usize;
    let mut wrong_released = 0usize;
    for t in 0..trials {
        // tiny weights so the 8-bit pipeline does not overflow
        let m = Model { w1: vec![0; 48].into_iter().enumerate().map(|(i, _)| (i % 3) as i64 - 1).collect(), w2: (0..36).map(|i| (i % 2) as i64).collect(), c: vec![1; 6] };
        let x: Vec<u64> = (0..8).map(|i| ring.from_signed(((t + i) % 5) as i64 - 2)).collect();
        let want = m.plain(ring, &x);
        let (rs, rc, _) = run(l, m, x, Wire::Add { target: 5, elem: t % 3, e: 1 << (ell - 1) }, Local::None);
        if let Ok(Some(y)) = rc {
            assert!(rs.is_ok());
            passed += 1;
            if y != want {
                wrong_released += 1;
            }
        } else {
            assert!(caught(&rs, &rc));
        }
    }
    let rate = passed as f64 / trials as f64;
    let bound = (s + 3) as f64 / (1u64 << (s + 2)) as f64;
    // binomial sd at p = 0.109, n = 1200 is ≈ 0.009: ± 4 sd
    assert!((rate - bound).abs() < 0.036, "pass rate {rate} vs (s+3)/2^(s+2) = {bound}");
    assert_eq!(wrong_released, passed, "an error of 2^(ℓ−1) on z flips the top bit of an output: every pass released a wrong value");
}

// ------------------------------------------------------------ trial campaign

#[derive(Default, Debug)]
struct Tally {
    trials: usize,
    value_changing: usize,
    caught: usize,
    harmless_passed: usize,
    undetected_wrong: usize,
    undetected_value_change: usize,
}

/// Whether adding `e` to element `elem` of a private layer's F changes a
/// value: f(W, e·1_elem) ≢ 0 (mod 2^ℓ).
fn f_error_changes(w: &[i64], cols: usize, elem: usize, e: u128, ell: u32) -> bool {
    let m = (1u128 << ell) - 1;
    (0..w.len() / cols).any(|r| (w[r * cols + elem] as i128 as u128).wrapping_mul(e) & m != 0)
}

fn campaign(trials: usize, seed: u64, private: bool) -> Tally {
    let l = Lift::new(37, 40).unwrap();
    let ring = Ring::new(37).unwrap();
    let mut p = Prg::new(Block(seed as u128));
    let mut t = Tally::default();
    // client message indices (see run_with)
    let (q_idx, n_targets, replay, fg) = if private { (8usize, 8u64, (4usize, 2usize), vec![(1usize, 8usize), (3, 6)]) } else { (6, 6, (2, 1), vec![]) };
    for i in 0..trials {
        let m = Model::new(i as u64 ^ seed);
        let x = inputs(ring, i as u64 ^ (seed << 20));
        let want = m.plain(ring, &x);
        let target = 1 + (p.next_u64() % n_targets) as usize; // openings, F‖G, z, q
        let vb = 10usize;
        let kind = p.next_u64() % if private { 8 } else { 7 };
        // an error in element `elem` of the message `target`: does it change a value?
        let changes_at = |elem: usize, e: u128| -> bool {
            if target == q_idx {
                return true;
            }
            match fg.iter().find(|(ix, _)| *ix == target) {
                Some(&(ix, n_in)) => {
                    let (w, cols) = if ix == 1 { (&m.w1, 8) } else { (&m.w2, 6) };
                    elem < n_in && f_error_changes(w, cols, elem, e, 37)
                }
                None => e & ((1 << 37) - 1) != 0,
            }
        };
        // (wire, local, changes a value?)
        let (wire, local, changes) = match kind {
            0 => {
                let bit = (p.next_u64() as usize) % (vb * 8);
                // flips in bits ≥ 37 of a value (or in q) change no value
                (Wire::FlipBit { target, bit }, Local::None, changes_at(0, 1u128 << bit))
            }
            1 => {
                let e = (p.random_block().0 & l.mask()).max(1);
                let elem = (p.next_u64() % 3) as usize;
                (Wire::Add { target, elem, e }, Local::None, changes_at(elem, e))
            }
            2 => (Wire::Replay { target: replay.0, from: replay.1 }, Local::None, true),
            3 => (Wire::Drop { target: q_idx - 1 + (p.next_u64() % 2) as usize }, Local::None, true),
            4 => {
                let e = (p.random_block().0 & l.mask()).max(1);
                (Wire::None, Local::ValueShare(e), e & ((1 << 37) - 1) != 0)
            }
            5 => (Wire::None, Local::MacShare((p.random_block().0 & l.mask()).max(1)), false),
            6 => (Wire::Add { target: q_idx, elem: 0, e: (p.random_block().0 & l.mask()).max(1) }, Local::None, true),
            _ => {
                // private layers only: a lift-bit error (a multiple of 2^ℓ:
                // no value changes) in F
                let (ix, n_in) = fg[(p.next_u64() % 2) as usize];
                let e = ((p.random_block().0 << 37) & l.mask()).max(1 << 37);
                (Wire::Add { target: ix, elem: p.next_u64() as usize % n_in, e }, Local::None, false)
            }
        };
        let (rs, rc, _) = run_with(l, m, x, wire, local, private);
        t.trials += 1;
        if changes {
            t.value_changing += 1;
        }
        match rc {
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
                assert!(rs.is_err(), "client failed but the server did not: {rs:?}");
                t.caught += 1;
            }
        }
    }
    t
}

#[test]
fn tamper_campaign_small() {
    let t = campaign(150, 0xc215, false);
    eprintln!("CRISP tamper campaign: {t:?}");
    assert_eq!(t.undetected_wrong, 0, "{t:?}");
    assert_eq!(t.undetected_value_change, 0, "every value-changing deviation is caught: {t:?}");
}

#[test]
fn tamper_campaign_small_private_weights() {
    let t = campaign(150, 0xc216, true);
    eprintln!("CRISP tamper campaign (private-weight linear layers): {t:?}");
    assert!(t.value_changing > 100, "{t:?}");
    assert_eq!(t.undetected_wrong, 0, "{t:?}");
    assert_eq!(t.undetected_value_change, 0, "every value-changing deviation is caught: {t:?}");
}

#[test]
#[ignore = "10^4 trials: run with scripts/crisp_tamper_trials.sh"]
fn tamper_trials() {
    let n: usize = std::env::var("CRISP_TRIALS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let private = std::env::var("CRISP_PRIVATE").map(|v| v == "1").unwrap_or(false);
    let t = campaign(n, if private { 0x5eee } else { 0x5eed }, private);
    println!(
        "{{\"bench\":\"crisp_tamper_trials\",\"private_weights\":{private},\"ell\":37,\"s\":40,\"trials\":{},\"value_changing\":{},\"caught\":{},\"harmless_passed\":{},\"undetected_wrong\":{},\"undetected_value_change\":{}}}",
        t.trials, t.value_changing, t.caught, t.harmless_passed, t.undetected_wrong, t.undetected_value_change
    );
    assert_eq!(t.undetected_wrong, 0);
    assert_eq!(t.undetected_value_change, 0);
}

#[test]
fn untrusted_messages_and_misuse_are_errors() {
    assert!(Lift::new(1, 40).is_err());
    assert!(Lift::new(64, 65).is_err());
    assert!(Lift::new(37, 0).is_err());
    let l = Lift::new(37, 40).unwrap();
    // a session is closed after its check: no further gates
    let (srv, cli) = common::run_tee(
        move |ch, d| {
            let mut sess = Session::start(d, 0, l).unwrap();
            let b = crisp::deal_relu(d, &sess, 2).unwrap();
            let om = crisp::deal_masks(d, &sess, 2).unwrap();
            let z = AuthShare { v: vec![0; 2], m: vec![0; 2] };
            crisp::reveal_to_client(ch, &mut sess, &om, &z, &mut |_| {}).unwrap();
            crisp::relu(ch, &mut sess, &b, &z).is_err()
        },
        move |ch, d| {
            let mut sess = Session::start(d, 1, l).unwrap();
            let b = crisp::deal_relu(d, &sess, 2).unwrap();
            let om = crisp::deal_masks(d, &sess, 2).unwrap();
            let z = AuthShare { v: vec![0; 2], m: vec![0; 2] };
            let y = crisp::reveal_to_client(ch, &mut sess, &om, &z, &mut |_| {}).unwrap();
            (y, crisp::relu(ch, &mut sess, &b, &z).is_err(), crisp::relu(ch, &mut sess, &b, &AuthShare { v: vec![0; 3], m: vec![0; 3] }).is_err())
        },
    );
    assert!(srv);
    assert_eq!(cli.0, Some(vec![0, 0]));
    assert!(cli.1 && cli.2);
    // a value wider than the lifted ring in an opening is refused by the server
    let (rs, rc, _) = run(l, Model::new(1), inputs(Ring::new(37).unwrap(), 1), Wire::FlipBit { target: 1, bit: 79 }, Local::None);
    assert!(rs.is_err() && rc.is_err(), "bit 79 of a 77-bit value: malformed");
}

/// The same protocol with the correlations from the dealer service (dealer
/// mode: a third host deals both roles over TLS): honest run correct, a
/// tampered opening caught.
#[test]
fn dealer_mode_runs_the_same_protocol() {
    use hush_tee::dealer::{self, DealerConfig};
    use hush_tee::{DealerModule, ModuleRole};
    use hush_transport::{Identity, LinkSecurity, PeerCheck, TlsSettings};
    use std::sync::Arc;
    let di = Arc::new(Identity::generate().unwrap());
    let pi = Arc::new(Identity::generate().unwrap());
    let fp = di.fingerprint();
    let dsec = LinkSecurity::Tls(TlsSettings { identity: di, peer: PeerCheck::AnyPeer, require_client_cert: false });
    let psec = LinkSecurity::Tls(TlsSettings { identity: pi, peer: PeerCheck::Pinned(vec![fp]), require_client_cert: false });
    let h = dealer::serve("127.0.0.1:0", DealerConfig::new(dsec, hush_2pc::deal::kinds()), Arc::new(|_| {})).unwrap();
    let l = Lift::new(37, 40).unwrap();
    let ring = Ring::new(37).unwrap();
    for (t, wire) in [Wire::None, Wire::Add { target: 2, elem: 1, e: 3 }].into_iter().enumerate() {
        let sid = dealer::new_session_id();
        let srv_mod = DealerModule::connect(&h.addr.to_string(), &psec, &sid, ModuleRole::Sender).unwrap();
        let cli_mod = DealerModule::connect(&h.addr.to_string(), &psec, &sid, ModuleRole::Receiver).unwrap();
        let (mut ca, cb) = MemChannel::pair();
        let m = std::sync::Arc::new(Model::new(t as u64));
        let m2 = m.clone();
        let x = inputs(ring, 5 + t as u64);
        let want = m.plain(ring, &x);
        let ts = std::thread::spawn(move || {
            let mut d = Dealer::new(Box::new(srv_mod));
            let mut o = offline(&mut d, 0, l);
            online(&mut ca, &mut o, &m2, None, Local::None, &mut |_| {})
        });
        let mut d = Dealer::new(Box::new(cli_mod));
        let mut o = offline(&mut d, 1, l);
        let mut ch = Tamper { inner: Some(cb), action: wire, k: l.k(), sent: Vec::new() };
        let rc = online(&mut ch, &mut o, &m, Some(&x), Local::None, &mut |_| {});
        drop(ch);
        let rs = ts.join().unwrap();
        match wire {
            Wire::None => {
                assert!(rs.unwrap().is_none());
                assert_eq!(rc.unwrap().unwrap(), want);
            }
            _ => assert!(caught(&rs, &rc), "{rs:?} / {rc:?}"),
        }
    }
}

/// Fixed point (ℓ = 37, 12 fraction bits): W·x, exact truncation, ReLU,
/// against the plaintext (floor) reference; a tampered truncation opening
/// is caught like any other.
#[test]
fn fixed_point_truncation_matches_plaintext_and_is_checked() {
    let (ell, s, f) = (37u32, 40u32, 12u32);
    let l = Lift::new(ell, s).unwrap();
    let ring = Ring::new(ell).unwrap();
    let mut p = Prg::new(Block(4242));
    let w: Vec<i64> = (0..48).map(|_| (p.next_u64() % 8192) as i64 - 4096).collect(); // |w| < 1.0
    let x: Vec<i64> = (0..8).map(|_| (p.next_u64() % 65536) as i64 - 32768).collect(); // |x| < 8.0
    let want: Vec<u64> = (0..6)
        .map(|r| {
            let acc: i64 = (0..8).map(|c| w[r * 8 + c] * x[c]).sum();
            ring.from_signed((acc >> f).max(0))
        })
        .collect();
    let xs: Vec<u64> = x.iter().map(|&v| ring.from_signed(v)).collect();
    for tamper in [None, Some(1u128 << 20)] {
        let (w0, w1, xs) = (w.clone(), w.clone(), xs.clone());
        let (srv, cli) = common::run_tee(
            move |ch, d| {
                let mut sess = Session::start(d, 0, l).unwrap();
                let im = crisp::deal_masks(d, &sess, 8).unwrap();
                let tb = crisp::deal_trunc(d, &sess, 6, f).unwrap();
                let rb = crisp::deal_relu(d, &sess, 6).unwrap();
                let om = crisp::deal_masks(d, &sess, 6).unwrap();
                let xa = crisp::input(ch, &mut sess, &im, None).unwrap();
                let h = xa.matvec_public(&l, &lift_mat(&l, &w0), 6, 8).unwrap();
                let h = crisp::trunc(ch, &mut sess, &tb, &h).unwrap();
                let y = crisp::relu(ch, &mut sess, &rb, &h).unwrap();
                crisp::reveal_to_client(ch, &mut sess, &om, &y, &mut |_| {})
            },
            move |ch, d| {
                let mut sess = Session::start(d, 1, l).unwrap();
                let im = crisp::deal_masks(d, &sess, 8).unwrap();
                let tb = crisp::deal_trunc(d, &sess, 6, f).unwrap();
                let rb = crisp::deal_relu(d, &sess, 6).unwrap();
                let om = crisp::deal_masks(d, &sess, 6).unwrap();
                let xa = crisp::input(ch, &mut sess, &im, Some(&xs)).unwrap();
                let mut h = xa.matvec_public(&l, &lift_mat(&l, &w1), 6, 8).unwrap();
                if let Some(e) = tamper {
                    h.v[2] = l.add(h.v[2], e);
                }
                let h = crisp::trunc(ch, &mut sess, &tb, &h).unwrap();
                let y = crisp::relu(ch, &mut sess, &rb, &h).unwrap();
                crisp::reveal_to_client(ch, &mut sess, &om, &y, &mut |_| {})
            },
        );
        match tamper {
            None => {
                assert!(srv.unwrap().is_none());
                assert_eq!(cli.unwrap().unwrap(), want);
            }
            Some(_) => assert!(caught(&srv, &cli), "{srv:?} / {cli:?}"),
        }
    }
    // out-of-range truncation refused at dealing
    let (a, b) = common::run_tee(
        move |_, d| {
            let sess = Session::start(d, 0, l).unwrap();
            crisp::deal_trunc(d, &sess, 1, 0).is_err() && crisp::deal_trunc(d, &sess, 1, 37).is_err()
        },
        move |_, d| {
            let sess = Session::start(d, 1, l).unwrap();
            crisp::deal_trunc(d, &sess, 1, 40).is_err()
        },
    );
    assert!(a && b);
}

/// The curious party's view: what each side receives in a gate (the
/// peer's part of x̂) and the opened x̂ itself are uniform whatever the input — each bit is set half
/// the time for a constant positive and a constant negative input alike.
/// Fails if r were fixed or reused.
#[test]
fn gate_openings_are_uniform_whatever_the_input() {
    let l = Lift::new(37, 40).unwrap();
    let ring = Ring::new(37).unwrap();
    let n = 4000;
    for c in [ring.from_signed(3), ring.from_signed(-123456)] {
        let xs = vec![c; n];
        let (srv_seen, cli_seen) = common::run_tee(
            move |ch, d| {
                let mut sess = Session::start(d, 0, l).unwrap();
                let im = crisp::deal_masks(d, &sess, n).unwrap();
                let b = crisp::deal_relu(d, &sess, n).unwrap();
                let x = crisp::input(ch, &mut sess, &im, None).unwrap();
                let mine = b.open_share(&sess, &x).unwrap();
                let bytes = {
                    let mut v = Vec::new();
                    for m in &mine {
                        v.extend_from_slice(&m.to_le_bytes()[..10]);
                    }
                    v
                };
                ch.send(&bytes).unwrap();
                (bytes, ch.recv().unwrap())
            },
            move |ch, d| {
                let mut sess = Session::start(d, 1, l).unwrap();
                let im = crisp::deal_masks(d, &sess, n).unwrap();
                let b = crisp::deal_relu(d, &sess, n).unwrap();
                let x = crisp::input(ch, &mut sess, &im, Some(&xs)).unwrap();
                let mine = b.open_share(&sess, &x).unwrap();
                let mut v = Vec::new();
                for m in &mine {
                    v.extend_from_slice(&m.to_le_bytes()[..10]);
                }
                ch.send(&v).unwrap();
                (v, ch.recv().unwrap())
            },
        );
        // x̂ = own part + received part: what either party learns
        let sum = |(own, peer): &(Vec<u8>, Vec<u8>)| -> Vec<u8> {
            own.chunks_exact(10)
                .zip(peer.chunks_exact(10))
                .flat_map(|(a, b)| {
                    let mut x = [0u8; 16];
                    let mut y = [0u8; 16];
                    x[..10].copy_from_slice(a);
                    y[..10].copy_from_slice(b);
                    let v = u128::from_le_bytes(x).wrapping_add(u128::from_le_bytes(y)) & l.mask();
                    v.to_le_bytes()[..10].to_vec()
                })
                .collect()
        };
        let (xs0, xs1) = (sum(&srv_seen), sum(&cli_seen));
        assert_eq!(xs0, xs1, "both parties open the same x̂");
        for seen in [&srv_seen.1, &cli_seen.1, &xs0] {
            assert_eq!(seen.len(), n * 10);
            for bit in [0usize, 11, 36, 50, 76] {
                let ones = seen.chunks_exact(10).filter(|e| (e[bit / 8] >> (bit % 8)) & 1 == 1).count();
                let frac = ones as f64 / n as f64;
                assert!((frac - 0.5).abs() < 0.04, "bit {bit}: {frac} of {n} set (input {c})");
            }
        }
    }
}

/// Two inferences on one provider session: each CRISP session opens a new
/// epoch (a fresh μ), both run correctly, and keys dealt in one session are
/// refused in the other.
#[test]
fn consecutive_sessions_use_fresh_epochs() {
    let l = Lift::new(37, 40).unwrap();
    let ring = Ring::new(37).unwrap();
    let xs: Vec<u64> = common::edge_values(37, 40, 8);
    let want: Vec<u64> = xs.iter().map(|&x| if ring.msb(x) { 0 } else { x }).collect();
    let one = move |ch: &mut dyn Channel, d: &mut Dealer, p: u8, x: Option<&[u64]>| -> (u64, Option<Vec<u64>>, bool) {
        let mut s1 = Session::start(d, p, l).unwrap();
        let im = crisp::deal_masks(d, &s1, 40).unwrap();
        let b1 = crisp::deal_relu(d, &s1, 40).unwrap();
        let om = crisp::deal_masks(d, &s1, 40).unwrap();
        let xa = crisp::input(ch, &mut s1, &im, x).unwrap();
        let y = crisp::relu(ch, &mut s1, &b1, &xa).unwrap();
        let r1 = crisp::reveal_to_client(ch, &mut s1, &om, &y, &mut |_| {}).unwrap();
        let s2 = Session::start(d, p, l).unwrap();
        assert!(s2.epoch > s1.epoch);
        let stale = b1.open_share(&s2, &xa).is_err();
        (s2.epoch, r1, stale)
    };
    let (a, b) = common::run_tee(move |ch, d| one(ch, d, 0, None), move |ch, d| one(ch, d, 1, Some(&xs)));
    assert_eq!(a.0, b.0, "both parties are in the same epoch");
    assert!(a.1.is_none());
    assert_eq!(b.1.unwrap(), want);
    assert!(a.2 && b.2, "keys of a closed session are refused in the next");
}

/// The `hush-tee-module` process serves the CRISP kind too (tee mode with
/// the module behind a process boundary): an honest pipeline is correct.
#[test]
fn out_of_process_modules_serve_the_crisp_kind() {
    use hush_tee::{establish, ModuleRole, OutOfProcessModule};
    let path = std::path::PathBuf::from(env!("CARGO_BIN_EXE_hush-tee-module"));
    let l = Lift::new(37, 40).unwrap();
    let ring = Ring::new(37).unwrap();
    let m = std::sync::Arc::new(Model::new(3));
    let x = inputs(ring, 3);
    let want = m.plain(ring, &x);
    let (mut ca, mut cb) = MemChannel::pair();
    let (p2, m2) = (path.clone(), m.clone());
    let ts = std::thread::spawn(move || {
        let mut module = OutOfProcessModule::spawn_path(&p2).unwrap();
        establish(&mut module, &mut ca, ModuleRole::Sender).unwrap();
        let mut d = Dealer::new(Box::new(module));
        let mut o = offline(&mut d, 0, l);
        online(&mut ca, &mut o, &m2, None, Local::None, &mut |_| {})
    });
    let mut module = OutOfProcessModule::spawn_path(&path).unwrap();
    establish(&mut module, &mut cb, ModuleRole::Receiver).unwrap();
    let mut d = Dealer::new(Box::new(module));
    let mut o = offline(&mut d, 1, l);
    let rc = online(&mut cb, &mut o, &m, Some(&x), Local::None, &mut |_| {});
    assert!(ts.join().unwrap().unwrap().is_none());
    assert_eq!(rc.unwrap().unwrap(), want);
}

/// MaxPool over windows of odd and unequal sizes (1, 3, 4, 5 elements,
/// overlapping) against the plaintext maximum.
#[test]
fn maxpool_odd_and_unequal_windows() {
    let l = Lift::new(37, 40).unwrap();
    let ring = Ring::new(37).unwrap();
    let vals: Vec<i64> = vec![5, -3, 17, 17, -200, 0, 9, -1, 4, 33, -33, 2];
    let xs: Vec<u64> = vals.iter().map(|&v| ring.from_signed(v)).collect();
    let windows: Vec<Vec<usize>> = vec![vec![3], vec![0, 1, 2], vec![4, 5, 6, 7], vec![7, 8, 9, 10, 11], vec![1, 4, 10]];
    let want: Vec<u64> = windows.iter().map(|w| ring.from_signed(w.iter().map(|&i| vals[i]).max().unwrap())).collect();
    let levels = crisp::maxpool_levels(&windows);
    assert_eq!(levels, vec![1 + 2 + 2 + 1, 1 + 1 + 1 + 1, 1]);
    let n = xs.len();
    let nw = windows.len();
    let (w0, w1) = (windows.clone(), windows);
    let (lv0, lv1) = (levels.clone(), levels);
    let (srv, cli) = common::run_tee(
        move |ch, d| {
            let mut sess = Session::start(d, 0, l).unwrap();
            let im = crisp::deal_masks(d, &sess, n).unwrap();
            let bs: Vec<_> = lv0.iter().map(|&k| crisp::deal_relu(d, &sess, k).unwrap()).collect();
            let om = crisp::deal_masks(d, &sess, nw).unwrap();
            let x = crisp::input(ch, &mut sess, &im, None).unwrap();
            let y = crisp::maxpool(ch, &mut sess, &bs, &x, &w0).unwrap();
            crisp::reveal_to_client(ch, &mut sess, &om, &y, &mut |_| {}).unwrap()
        },
        move |ch, d| {
            let mut sess = Session::start(d, 1, l).unwrap();
            let im = crisp::deal_masks(d, &sess, n).unwrap();
            let bs: Vec<_> = lv1.iter().map(|&k| crisp::deal_relu(d, &sess, k).unwrap()).collect();
            let om = crisp::deal_masks(d, &sess, nw).unwrap();
            let x = crisp::input(ch, &mut sess, &im, Some(&xs)).unwrap();
            let y = crisp::maxpool(ch, &mut sess, &bs, &x, &w1).unwrap();
            crisp::reveal_to_client(ch, &mut sess, &om, &y, &mut |_| {}).unwrap()
        },
    );
    assert!(srv.is_none());
    assert_eq!(cli.unwrap(), want);
}

// ------------------------------------------------------------ private-weight linear layers

/// Runs `srv` (party 0) and `cli` (party 1) over a fresh in-process
/// dealer pair and memory channel.
fn two_party<A: Send + 'static, B>(
    srv: impl FnOnce(&mut dyn Channel, &mut Dealer) -> A + Send + 'static,
    cli: impl FnOnce(&mut dyn Channel, &mut Dealer) -> B,
) -> (A, B) {
    let (mut ca, mut cb) = MemChannel::pair();
    ca.set_timeout(Duration::from_secs(20));
    cb.set_timeout(Duration::from_secs(20));
    let ts = std::thread::spawn(move || {
        let mut d = Dealer::in_process(&mut ca, 0).expect("seed agreement");
        srv(&mut ca, &mut d)
    });
    let mut d = Dealer::in_process(&mut cb, 1).expect("seed agreement");
    let b = cli(&mut cb, &mut d);
    drop(cb);
    (ts.join().expect("server"), b)
}

fn small_signed(p: &mut Prg, n: usize, r: u64) -> Vec<i64> {
    (0..n).map(|_| (p.next_u64() % (2 * r + 1)) as i64 - r as i64).collect()
}

/// The bilinear map of every shape the engine uses, over Z_2^k, against
/// the engine's own (independent) u64 implementation mod 2^ℓ.
#[test]
fn linear_shapes_match_the_engine_ops() {
    use hush_tee::linear_deal::LinearOp;
    let l = Lift::new(37, 40).unwrap();
    let ring = Ring::new(37).unwrap();
    let mut p = Prg::new(Block(31));
    let conv = |c_in, h, w, c_out, kh, kw, stride, pads, weight| LinearOp::Conv { c_in, h, w, c_out, kh, kw, stride, pads, weight };
    let shapes: Vec<(u32, u32, u32, u32, u32, u32, [u32; 2], [u32; 4])> =
        vec![(1, 28, 28, 4, 5, 5, [1, 1], [0; 4]), (3, 9, 7, 2, 3, 3, [2, 1], [1, 0, 2, 1]), (2, 6, 6, 3, 3, 2, [1, 2], [1, 1, 1, 1]), (2, 5, 5, 2, 1, 1, [1, 1], [0; 4])];
    for (ci, h, w, co, kh, kw, st, pd) in shapes {
        let wl = (ci * co * kh * kw) as usize;
        let ws = small_signed(&mut p, wl, 40);
        let op = conv(ci, h, w, co, kh, kw, st, pd, ws.iter().map(|&v| ring.from_signed(v)).collect());
        let xs = small_signed(&mut p, op.in_len(), 1 << 20);
        let xu: Vec<u64> = xs.iter().map(|&v| ring.from_signed(v)).collect();
        let mut want = vec![0u64; op.out_len()];
        op.apply(37, &xu, &mut want);
        let sh = crisp::LinShape::of(&op);
        let got = sh.apply(&lift_mat(&l, &ws), &lift_mat(&l, &xs), l.mask()).unwrap();
        assert_eq!(got.iter().map(|v| l.value(*v)).collect::<Vec<_>>(), want, "{op:?}");
    }
    for op in [LinearOp::Dense { n_in: 7, n_out: 5, weight: vec![0; 35] }, LinearOp::Scale { channels: 3, inner: 4, weight: vec![0; 3] }] {
        let sh = crisp::LinShape::of(&op);
        let (wl, il, _) = sh.lens().unwrap();
        let ws = small_signed(&mut p, wl, 40);
        let xs = small_signed(&mut p, il, 1 << 20);
        let op = match op {
            LinearOp::Dense { n_in, n_out, .. } => LinearOp::Dense { n_in, n_out, weight: ws.iter().map(|&v| ring.from_signed(v)).collect() },
            LinearOp::Scale { channels, inner, .. } => LinearOp::Scale { channels, inner, weight: ws.iter().map(|&v| ring.from_signed(v)).collect() },
            _ => unreachable!(),
        };
        let mut want = vec![0u64; op.out_len()];
        op.apply(37, &xs.iter().map(|&v| ring.from_signed(v)).collect::<Vec<_>>(), &mut want);
        let got = sh.apply(&lift_mat(&l, &ws), &lift_mat(&l, &xs), l.mask()).unwrap();
        assert_eq!(got.iter().map(|v| l.value(*v)).collect::<Vec<_>>(), want, "{op:?}");
    }
    assert!(crisp::LinShape::Dense { n_in: 0, n_out: 3 }.lens().is_none());
    assert!(crisp::LinShape::Conv { c_in: 1, h: 2, w: 2, c_out: 1, kh: 3, kw: 3, stride: [1, 1], pads: [0; 4] }.lens().is_none());
    assert!(crisp::LinShape::Dense { n_in: 1 << 12, n_out: 1 << 11 }.lens().is_none(), "over MAX_LIN_ELEMS");
    let big = crisp::LinShape::Conv { c_in: 512, h: 64, w: 64, c_out: 256, kh: 3, kw: 3, stride: [1, 1], pads: [1; 4] };
    assert!(big.lens().is_none(), "over MAX_LIN_MACS (a request that would make the dealer work for hours)");
    // a request with such a shape is refused by the dealing kind before any allocation
    let p = hush_2pc::deal::crisp::CrispParams { op: crisp::CrispOp::Lin(big), ell: 37, s: 40, batch: 2, epoch: 1 };
    use hush_deal::Description;
    assert!(hush_2pc::deal::crisp::CRISP_MAC.label(2, 1, &p.encode()).is_err());
}

/// input → private conv (stride 2, padding) + bias → checked release:
/// the released value is W·x + b mod 2^ℓ (the engine's op as reference),
/// so both the values and the MACs through the layer are right (a wrong
/// MAC would abort the release).
#[test]
fn private_conv_layer_matches_plaintext_and_passes_the_check() {
    use hush_tee::linear_deal::LinearOp;
    for (ell, s) in [(37u32, 40u32), (64, 64), (16, 8)] {
        let l = Lift::new(ell, s).unwrap();
        let ring = Ring::new(ell).unwrap();
        let mut p = Prg::new(Block(ell as u128));
        let ws = small_signed(&mut p, 3 * 2 * 3 * 3, 5);
        let op = LinearOp::Conv { c_in: 2, h: 7, w: 6, c_out: 3, kh: 3, kw: 3, stride: [2, 2], pads: [1, 1, 0, 1], weight: ws.iter().map(|&v| ring.from_signed(v)).collect() };
        let sh = crisp::LinShape::of(&op);
        let bias = small_signed(&mut p, op.out_len(), 50);
        let xs = small_signed(&mut p, op.in_len(), 100);
        let xu: Vec<u64> = xs.iter().map(|&v| ring.from_signed(v)).collect();
        let mut want = vec![0u64; op.out_len()];
        op.apply(ell, &xu, &mut want);
        let want: Vec<u64> = want.iter().zip(&bias).map(|(y, b)| ring.add(*y, ring.from_signed(*b))).collect();
        let (n_in, n_out) = (op.in_len(), op.out_len());
        let (w, b) = (lift_mat(&l, &ws), lift_mat(&l, &bias));
        let (rs, rc) = two_party(
            move |ch, d| -> hush_2pc::Result<Option<Vec<u64>>> {
                let mut sess = Session::start(d, 0, l)?;
                let mut t = crisp::deal_linear(d, &sess, sh)?;
                let inm = crisp::deal_masks(d, &sess, n_in)?;
                let outm = crisp::deal_masks(d, &sess, n_out)?;
                crisp::linear_prepare(ch, &sess, &mut t, Some(&w))?;
                let x = crisp::input(ch, &mut sess, &inm, None)?;
                let y = crisp::linear(ch, &mut sess, t, Some(&w), &x)?.add_public(&sess, &b)?;
                crisp::reveal_to_client(ch, &mut sess, &outm, &y, &mut |_| {})
            },
            |ch, d| -> hush_2pc::Result<Option<Vec<u64>>> {
                let mut sess = Session::start(d, 1, l)?;
                let mut t = crisp::deal_linear(d, &sess, sh)?;
                let inm = crisp::deal_masks(d, &sess, n_in)?;
                let outm = crisp::deal_masks(d, &sess, n_out)?;
                crisp::linear_prepare(ch, &sess, &mut t, None)?;
                let x = crisp::input(ch, &mut sess, &inm, Some(&xu))?;
                let y = crisp::linear(ch, &mut sess, t, None, &x)?;
                crisp::reveal_to_client(ch, &mut sess, &outm, &y, &mut |_| {})
            },
        );
        assert!(rs.unwrap().is_none());
        assert_eq!(rc.unwrap().unwrap(), want, "ℓ {ell} s {s}");
    }
}

/// The test pipeline with private W1, W2 (no local public maps) against
/// the plaintext model.
#[test]
fn private_weight_pipeline_matches_plaintext() {
    for (ell, s) in [(16u32, 40u32), (37, 40), (64, 64), (8, 4)] {
        let l = Lift::new(ell, s).unwrap();
        let ring = Ring::new(ell).unwrap();
        for t in 0..2u64 {
            let m = Model::new(t + 10);
            let x = inputs(ring, 91 + t);
            let want = m.plain(ring, &x);
            let (rs, rc, lines) = run_with(l, m, x, Wire::None, Local::None, true);
            assert!(rs.unwrap().is_none());
            assert_eq!(rc.unwrap().unwrap(), want, "ℓ {ell} s {s}");
            assert!(lines.is_empty());
        }
    }
}

/// Deviations inside the private layer: errors in F (the masked opening)
/// of either layer, lift-bit errors, a bit flip, a replayed F — all end
/// without output.
#[test]
fn private_layer_tampering_is_caught() {
    let l = Lift::new(37, 40).unwrap();
    let ring = Ring::new(37).unwrap();
    let cases = [
        Wire::Add { target: 1, elem: 0, e: 1 },
        Wire::Add { target: 1, elem: 5, e: 1 << 36 },
        Wire::Add { target: 3, elem: 2, e: 12345 },
        Wire::Add { target: 1, elem: 3, e: 1 << 37 }, // a lift-bit error: no value changes, still caught
        Wire::Add { target: 3, elem: 1, e: 1 << 50 },
        Wire::FlipBit { target: 3, bit: 7 },
        Wire::Replay { target: 3, from: 1 }, // F of W1 (8 values) where 6 are due: a wrong length
    ];
    for (i, wire) in cases.into_iter().enumerate() {
        let (rs, rc, _) = run_with(l, Model::new(i as u64), inputs(ring, i as u64), wire, Local::None, true);
        assert!(rs.is_err() && rc.is_err(), "case {i} {wire:?}: {rs:?} / {rc:?}");
        assert!(!matches!(rc, Ok(Some(_))));
    }
    // the client's own output share of a private layer (added before the second ReLU)
    for e in [1u128, 1 << 20] {
        let (rs, rc, _) = run_with(l, Model::new(3), inputs(ring, 3), Wire::None, Local::ValueShare(e), true);
        assert!(caught(&rs, &rc), "{rs:?} / {rc:?}");
        let (rs, rc, _) = run_with(l, Model::new(3), inputs(ring, 3), Wire::None, Local::MacShare(e), true);
        assert!(caught(&rs, &rc), "{rs:?} / {rc:?}");
    }
}

/// The client's view of the weights: E = W − A is uniform whatever W is.
/// With W constant (every weight 5), the low byte of E over 2^14 weights
/// passes a χ² test (255 degrees of freedom, threshold at p ≈ 10^−6);
/// without the dealt A (E = W) it would be a single value.
#[test]
fn masked_weights_are_uniform() {
    let l = Lift::new(37, 40).unwrap();
    let sh = crisp::LinShape::Dense { n_in: 128, n_out: 128 };
    let w = vec![5u128; 128 * 128];
    let (_, e) = two_party(
        move |ch, d| {
            let sess = Session::start(d, 0, l).unwrap();
            let mut t = crisp::deal_linear(d, &sess, sh).unwrap();
            crisp::linear_prepare(ch, &sess, &mut t, Some(&w)).unwrap();
        },
        |ch, d| {
            let _sess = Session::start(d, 1, l).unwrap();
            let _ = crisp::deal_linear(d, &_sess, sh).unwrap();
            // read E off the wire as the client host would
            let b = ch.recv().unwrap();
            b.chunks_exact(10).map(|c| c[0]).collect::<Vec<u8>>()
        },
    );
    assert_eq!(e.len(), 128 * 128);
    let mut h = [0f64; 256];
    e.iter().for_each(|&b| h[b as usize] += 1.0);
    let exp = e.len() as f64 / 256.0;
    let chi2: f64 = h.iter().map(|o| (o - exp) * (o - exp) / exp).sum();
    assert!(chi2 < 385.0, "χ² = {chi2}");
}

/// Misuse of the private layer is an error, not a wrong result: an
/// unprepared triple, weights of the wrong length, weights at the client,
/// a second preparation.
#[test]
fn private_layer_misuse_is_refused() {
    let l = Lift::new(37, 40).unwrap();
    let sh = crisp::LinShape::Dense { n_in: 4, n_out: 2 };
    let (rs, _) = two_party(
        move |ch, d| {
            let mut sess = Session::start(d, 0, l).unwrap();
            let mut t = crisp::deal_linear(d, &sess, sh).unwrap();
            let x = AuthShare { v: vec![0; 4], m: vec![0; 4] };
            let w = vec![1u128; 8];
            let t2 = crisp::deal_linear(d, &sess, sh).unwrap();
            let unprepared = crisp::linear(ch, &mut sess, t2, Some(&w), &x).is_err();
            let short = crisp::linear_prepare(ch, &sess, &mut t, Some(&w[..7])).is_err();
            let wide = crisp::linear_prepare(ch, &sess, &mut t, Some(&vec![1u128 << 90; 8])).is_err();
            crisp::linear_prepare(ch, &sess, &mut t, Some(&w)).unwrap();
            let twice = crisp::linear_prepare(ch, &sess, &mut t, Some(&w)).is_err();
            (unprepared, short, wide, twice)
        },
        |ch, d| {
            let sess = Session::start(d, 1, l).unwrap();
            let mut t = crisp::deal_linear(d, &sess, sh).unwrap();
            let _ = crisp::deal_linear(d, &sess, sh).unwrap();
            assert!(crisp::linear_prepare(ch, &sess, &mut t, Some(&[1u128; 8])).is_err(), "the client has no weights");
            crisp::linear_prepare(ch, &sess, &mut t, None).unwrap();
        },
    );
    assert_eq!(rs, (true, true, true, true));
}
