//! Exhaustive ℓ = 8 millionaires' in each family, cost pins, cheating peers.
mod common;
use common::*;
use hush_2pc::beaver::OtSession;
use hush_2pc::share::BoolShare;
use hush_2pc::{cf2, fss, tami};
use hush_correlations::registry::SourceConfig;
use hush_primitives::{Block, Prg};
use hush_transport::{Channel, Cost, MemChannel};
use std::sync::mpsc;

/// For dealt x (one per element) choose y so that every (x, y) pair of
/// 8-bit values occurs: the c-th occurrence of x = v gets y = c mod 256.
fn cover(xs: &[u64]) -> (Vec<u64>, bool) {
    let mut cnt = [0usize; 256];
    let ys = xs.iter().map(|&x| {
        let c = cnt[x as usize];
        cnt[x as usize] += 1;
        (c % 256) as u64
    }).collect();
    (ys, cnt.iter().all(|&c| c >= 256))
}

fn tee_mill(use_fss: bool) -> (BoolShare, BoolShare, Vec<u64>, Vec<u64>, Cost) {
    // 2^18 dealt comparisons make every x value occur ≥ 256 times (w.h.p.).
    let n = 1 << 18;
    let (tx, rx) = mpsc::channel::<Vec<u64>>();
    let ((a, ys, cost), (b, xs)) = run_tee(
        move |ch, d| {
            let (out, ys) = if use_fss {
                let bt = fss::deal(d, 0, n, fss::FssShape { bits: 8, gate: fss::FssGate::Millionaire }).unwrap();
                let (ys, _) = cover(&rx.recv().unwrap());
                (fss::online(ch, &bt, Some(&ys), false).unwrap().bits().unwrap(), ys)
            } else {
                let bt = tami::deal(d, 0, n, tami::TamiShape::new(8, 4, 8, tami::Flavor::Millionaire)).unwrap();
                let (ys, _) = cover(&rx.recv().unwrap());
                (tami::online(ch, &bt, Some(&ys)).unwrap().bits().unwrap(), ys)
            };
            (out, ys, ch.cost())
        },
        move |ch, d| {
            if use_fss {
                let bt = fss::deal(d, 1, n, fss::FssShape { bits: 8, gate: fss::FssGate::Millionaire }).unwrap();
                tx.send(bt.dealt_input().to_vec()).unwrap();
                (fss::online(ch, &bt, None, false).unwrap().bits().unwrap(), bt.dealt_input().to_vec())
            } else {
                let bt = tami::deal(d, 1, n, tami::TamiShape::new(8, 4, 8, tami::Flavor::Millionaire)).unwrap();
                tx.send(bt.dealt_input().to_vec()).unwrap();
                (tami::online(ch, &bt, None).unwrap().bits().unwrap(), bt.dealt_input().to_vec())
            }
        },
    );
    (a, b, xs, ys, cost)
}

fn check_all_pairs(a: &BoolShare, b: &BoolShare, xs: &[u64], ys: &[u64]) {
    let mut seen = vec![false; 65536];
    for i in 0..xs.len() {
        assert_eq!(a.get(i) ^ b.get(i), ys[i] > xs[i], "y {} x {}", ys[i], xs[i]);
        seen[(xs[i] * 256 + ys[i]) as usize] = true;
    }
    assert!(seen.iter().all(|&s| s), "not every pair was covered");
}

#[test]
fn exhaustive_8bit_tami() {
    let (a, b, xs, ys, _) = tee_mill(false);
    assert!(cover(&xs).1);
    check_all_pairs(&a, &b, &xs, &ys);
}

#[test]
fn exhaustive_8bit_fss() {
    let (a, b, xs, ys, _) = tee_mill(true);
    check_all_pairs(&a, &b, &xs, &ys);
}

fn ot(ch: &mut dyn Channel, p: u8) -> OtSession {
    OtSession::setup(ch, p, &SourceConfig::named("iknp"), &mut Prg::new(Block(p as u128 + 21))).unwrap()
}

#[test]
fn exhaustive_8bit_cf2() {
    let ys: Vec<u64> = (0..65536u64).map(|i| i & 255).collect();
    let xs: Vec<u64> = (0..65536u64).map(|i| i >> 8).collect();
    let (y2, x2) = (ys.clone(), xs.clone());
    let (a, b) = run(
        move |ch| {
            let mut s = ot(ch, 0);
            let mut pre = cf2::prepare(&mut s, ch, 0, y2.len(), 8, 4, 0).unwrap();
            cf2::millionaire_online(ch, 0, &mut pre, &y2).unwrap()
        },
        move |ch| {
            let mut s = ot(ch, 1);
            let mut pre = cf2::prepare(&mut s, ch, 1, x2.len(), 8, 4, 0).unwrap();
            cf2::millionaire_online(ch, 1, &mut pre, &x2).unwrap()
        },
    );
    check_all_pairs(&a, &b, &xs, &ys);
}

/// Short top chunks (a chunk of w < k bits runs a 1-of-2^w OT with 2^w
/// messages): every pair of inputs for chunkings 3 + 3 + 2 (8 bits, k = 3),
/// 4 + 3 (7, k = 4), one short chunk (3, k = 4), 5 + 3 (8, k = 5) and
/// 2 + 2 + 1 (5, k = 2). A wrong offset or a message for a value the
/// receiver cannot hold would give wrong bits or a length error here.
#[test]
fn exhaustive_short_top_chunks_cf2() {
    for (bits, k) in [(8u32, 3u32), (7, 4), (3, 4), (8, 5), (5, 2)] {
        let m = 1u64 << bits;
        let ys: Vec<u64> = (0..m * m).map(|i| i % m).collect();
        let xs: Vec<u64> = (0..m * m).map(|i| i / m).collect();
        let (y2, x2) = (ys.clone(), xs.clone());
        let (a, b) = run(
            move |ch| {
                let mut s = ot(ch, 0);
                let mut pre = cf2::prepare(&mut s, ch, 0, y2.len(), bits, k, 0).unwrap();
                cf2::millionaire_online(ch, 0, &mut pre, &y2).unwrap()
            },
            move |ch| {
                let mut s = ot(ch, 1);
                let mut pre = cf2::prepare(&mut s, ch, 1, x2.len(), bits, k, 0).unwrap();
                cf2::millionaire_online(ch, 1, &mut pre, &x2).unwrap()
            },
        );
        for i in 0..xs.len() {
            assert_eq!(a.get(i) ^ b.get(i), ys[i] > xs[i], "bits {bits} k {k}: y {} x {}", ys[i], xs[i]);
        }
    }
}

/// Online cost of one TAMI/FSS batch: (party 0's cost, party 1's cost).
fn tee_cost(n: usize, bits: u32, which: &'static str) -> (Cost, Cost) {
    let f = move |ch: &mut dyn Channel, d: &mut hush_2pc::tee::Dealer, p: u8| -> Cost {
        let y: Vec<u64> = (0..n as u64).collect();
        let inp = (p == 0).then_some(&y[..]);
        match which {
            "tami-mill" | "tami-relu" => {
                let fl = if which == "tami-mill" { tami::Flavor::Millionaire } else { tami::Flavor::Relu };
                let b = tami::deal(d, p, n, tami::TamiShape::new(bits, 4, 8, fl)).unwrap();
                let c0 = ch.cost();
                tami::online(ch, &b, inp).unwrap();
                ch.cost() - c0
            }
            _ => {
                let b = fss::deal(d, p, n, fss::FssShape { bits, gate: fss::FssGate::Relu }).unwrap();
                let c0 = ch.cost();
                fss::online(ch, &b, inp, false).unwrap();
                ch.cost() - c0
            }
        }
    };
    run_tee(move |ch, d| f(ch, d, 0), move |ch, d| f(ch, d, 1))
}

#[test]
fn cost_pins() {
    let n = 1024;
    for bits in [16u32, 32] {
        // TAMI millionaires': leaf + merge in two one-way flights. A sends ŷ
        // and its pad bit of every opened leaf bit (2·chunks − 1 per
        // comparison); B sends the opening (one bit per merge input).
        let (a, b) = tee_cost(n, bits, "tami-mill");
        let chunks = (bits as usize).div_ceil(4);
        assert_eq!(a.rounds.max(b.rounds), 2);
        assert_eq!(a.bytes_sent, (n * (bits as usize).div_ceil(8) + 8 * (n / 64) * (2 * chunks - 1)) as u64, "leaf: ŷ + pad bits");
        assert_eq!(b.bytes_sent, (8 * (n / 64) * (2 * chunks - 1)) as u64, "merge: one opened bit per input");
        assert_eq!((a.msgs_sent, b.msgs_sent), (1, 1));
    }
    // TAMI ReLU at ℓ = 32: three one-way flights. A's leaf flight: ŷ (31
    // compared bits), its pad bits, and y − s (32 bits); then e.
    let (a, b) = tee_cost(n, 32, "tami-relu");
    assert_eq!(a.rounds.max(b.rounds), 3);
    assert_eq!(a.bytes_sent, (n * 4 + 8 * (n / 64) * 15 + n * 4 + 8 * (n / 64)) as u64);
    assert_eq!(b.bytes_sent, (8 * (n / 64) * 15 + 8 * (n / 64)) as u64);
    // FSS ReLU: one one-way flight of ℓ bits per element.
    let (a, b) = tee_cost(n, 32, "fss-relu");
    assert_eq!((a.rounds.max(b.rounds), a.bytes_sent, b.bytes_sent, a.msgs_sent), (1, (n * 4) as u64, 0, 1));
    // ℓ = 64: one more merge level (simultaneous opening).
    let (a, b) = tee_cost(n, 64, "tami-mill");
    assert_eq!(a.rounds.max(b.rounds), 3);
}

#[test]
fn cf2_cost_pin() {
    let n = 1024;
    let f = move |ch: &mut dyn Channel, p: u8| -> Cost {
        let mut s = ot(ch, p);
        let mut pre = cf2::prepare(&mut s, ch, p, n, 32, 4, 0).unwrap();
        let c0 = ch.cost();
        cf2::millionaire_online(ch, p, &mut pre, &vec![7u64; n]).unwrap();
        ch.cost() - c0
    };
    let (a, b) = run(move |ch| f(ch, 0), move |ch| f(ch, 1));
    // 2 leaf rounds + log2(8) = 3 AND rounds.
    assert_eq!(a.rounds.max(b.rounds), 5);
    // Leaf: k = 4 bits of shift per chunk; 16 two-bit messages per chunk,
    // one-bit (gt only) for the lowest chunk. Merge (8 → 4 → 2 → 1 nodes):
    // per pair the openings eq_hi ⊕ a and gt_lo ⊕ b_0 of its correlated
    // triples, plus eq_lo ⊕ b_1 except for each level's lowest pair (its
    // eq is never read): 2 + 3·(pairs − 1) words of n/64 bits per level.
    let merge = 8 * (n / 64) * ((2 + 3 * 3) + (2 + 3 * 1) + 2);
    assert_eq!(b.bytes_sent, (n * 8 * 4 / 8 + merge) as u64);
    assert_eq!(a.bytes_sent, (n * 16 / 8 + n * 7 * 16 * 2 / 8 + merge) as u64);
}

/// The ReLU's millionaires' (ℓ − 1 = 31 bits, k = 4: seven 4-bit chunks
/// and a 3-bit top chunk): the top chunk's shift is 3 bits and its leaf
/// message 8 two-bit entries (a 1-of-8 OT), not 4 and 16.
#[test]
fn cf2_cost_pin_short_top_chunk() {
    let n = 1024;
    let f = move |ch: &mut dyn Channel, p: u8| -> Cost {
        let mut s = ot(ch, p);
        let mut pre = cf2::prepare(&mut s, ch, p, n, 31, 4, 0).unwrap();
        let c0 = ch.cost();
        cf2::millionaire_online(ch, p, &mut pre, &vec![7u64; n]).unwrap();
        ch.cost() - c0
    };
    let (a, b) = run(move |ch| f(ch, 0), move |ch| f(ch, 1));
    assert_eq!(a.rounds.max(b.rounds), 5);
    let merge = 8 * (n / 64) * ((2 + 3 * 3) + (2 + 3 * 1) + 2);
    assert_eq!(b.bytes_sent, (n * 31 / 8 + merge) as u64);
    assert_eq!(a.bytes_sent, (n * 16 / 8 + n * (6 * 16 + 8) * 2 / 8 + merge) as u64);
}

/// A cheating peer sends a wrong-length or garbled message: the honest
/// side gets a typed error naming the step, the cheater's next receive fails.
#[test]
fn cheating_peers() {
    let n = 200;
    for garble in [false, true] {
        // TAMI: a cheating party 0 sends a short / out-of-range leaf message.
        let (ra, rb) = run_tee(
            move |ch, d| {
                let _b = tami::deal(d, 0, n, tami::TamiShape::new(32, 4, 8, tami::Flavor::Millionaire)).unwrap();
                let msg = if garble { vec![0xffu8; n * 5] } else { vec![1u8; n * 4 - 1] };
                ch.send(&msg).unwrap();
                ch.recv().map(|_| ())
            },
            move |ch, d| {
                let b = tami::deal(d, 1, n, tami::TamiShape::new(32, 4, 8, tami::Flavor::Millionaire)).unwrap();
                tami::online(ch, &b, None).map(|_| ())
            },
        );
        assert!(rb.is_err(), "honest TAMI party must fail");
        let e = rb.unwrap_err().to_string();
        assert!(e.contains("TAMI leaf"), "{e}");
        assert!(ra.is_err(), "cheater's next receive must fail");
        // FSS: the opening with bits above the ring.
        let (ra, rb) = run_tee(
            move |ch, d| {
                let _b = fss::deal(d, 0, n, fss::FssShape { bits: 37, gate: fss::FssGate::Relu }).unwrap();
                let msg = if garble { vec![0xffu8; n * 5] } else { vec![0u8; n * 5 + 1] };
                ch.send(&msg).unwrap();
                ch.recv().map(|_| ())
            },
            move |ch, d| {
                let b = fss::deal(d, 1, n, fss::FssShape { bits: 37, gate: fss::FssGate::Relu }).unwrap();
                fss::online(ch, &b, None, false).map(|_| ())
            },
        );
        assert!(rb.unwrap_err().to_string().contains("FSS"));
        assert!(ra.is_err());
    }
    // CF2: garbled leaf messages from party 0 (padding bits set).
    let (ra, rb) = run(
        move |ch| {
            let mut s = ot(ch, 0);
            let _pre = cf2::prepare(&mut s, ch, 0, 10, 6, 4, 0).unwrap();
            let _ = ch.recv();
            ch.send(&vec![0xffu8; (10 * 2 * 16 * 2usize).div_ceil(8) + 3]).unwrap();
            ch.recv().map(|_| ())
        },
        move |ch| {
            let mut s = ot(ch, 1);
            let mut pre = cf2::prepare(&mut s, ch, 1, 10, 6, 4, 0).unwrap();
            cf2::millionaire_online(ch, 1, &mut pre, &vec![3u64; 10]).map(|_| ())
        },
    );
    assert!(rb.unwrap_err().to_string().contains("CF2 leaf"));
    assert!(ra.is_err());
    let _ = MemChannel::pair();
}
