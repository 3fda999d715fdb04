//! Ferret: the COT relation for every output at several sizes (including
//! sizes that are not multiples of the tree or batch size), one Δ per
//! session, choice-bit statistics, cost per iteration, and corrupted
//! messages as errors on both sides.

use hush_correlations::ferret::{reserve, FerretReceiver, FerretSender};
use hush_correlations::lpn::{LpnParams, FERRET_MAIN, LPN_B11, TEST_INSECURE};
use hush_correlations::{CorrelationSource, CotReceiver, CotSender};
use hush_primitives::{BitVec, Block, Prg};
use hush_transport::{Channel, MemChannel};
use std::thread;

fn setup(p: LpnParams, fused: bool) -> (FerretSender, FerretReceiver, MemChannel, MemChannel) {
    let (mut a, mut b) = MemChannel::pair();
    let h = thread::spawn(move || {
        let s = FerretSender::setup(&mut a, &mut Prg::new(Block(5)), p, fused).unwrap();
        (s, a)
    });
    let r = FerretReceiver::setup(&mut b, &mut Prg::new(Block(6)), p, fused).unwrap();
    let (s, a) = h.join().unwrap();
    (s, r, a, b)
}

fn runs_ok(bits: &BitVec) {
    let n = bits.len() as f64;
    let ones = bits.count_ones() as f64;
    assert!((2.0 * ones - n).abs() / n.sqrt() < 2.576, "frequency test");
    let pi = ones / n;
    let mut runs = 1u64;
    for i in 1..bits.len() {
        runs += (bits.get(i) != bits.get(i - 1)) as u64;
    }
    let z = (runs as f64 - 2.0 * n * pi * (1.0 - pi)).abs() / (2.0 * (2.0 * n).sqrt() * pi * (1.0 - pi));
    assert!(z < 2.576, "runs test z = {z}");
}

fn check(p: LpnParams, fused: bool, sizes: &[usize]) -> (FerretSender, FerretReceiver, MemChannel, MemChannel) {
    let (mut s, mut r, a, mut b) = setup(p, fused);
    let delta = s.delta();
    assert!(delta.lsb());
    let mut a = Some(a);
    for &n in sizes {
        let mut ca = a.take().unwrap();
        let h = thread::spawn(move || {
            let mut q = vec![Block::ZERO; n];
            s.send_cots(&mut ca, &mut q).unwrap();
            (s, ca, q)
        });
        let mut ch = BitVec::zeros(0);
        let mut t = vec![Block::ZERO; n];
        r.recv_cots(&mut b, &mut ch, &mut t).unwrap();
        let (s2, ca, q) = h.join().unwrap();
        s = s2;
        a = Some(ca);
        for i in 0..n {
            assert_eq!(t[i], q[i] ^ delta.and_bit(ch.get(i)), "{} n={n} i={i}", p.name);
        }
        assert_eq!(s.delta(), delta);
        if n >= 10_000 {
            runs_ok(&ch);
        }
    }
    assert_eq!(s.produced(), r.produced());
    (s, r, a.unwrap(), b)
}

#[test]
fn ferret_cot_relation_small_params() {
    let usable = TEST_INSECURE.n - reserve(&TEST_INSECURE);
    check(TEST_INSECURE, true, &[1, 100, usable, usable + 1, 7777, 3]);
    check(TEST_INSECURE, false, &[5000]);
}

#[test]
fn ferret_cot_relation_real_params() {
    check(LPN_B11, true, &[100_001, 1_000_003, 2_300_000]);
}

#[test]
fn ferret_full_parameter_set_and_cost() {
    let usable = FERRET_MAIN.n - reserve(&FERRET_MAIN);
    assert_eq!(usable, 10_001_981);
    let (_s, _r, _a, b) = check(FERRET_MAIN, true, &[]);
    let c0 = b.cost();
    let (s, r, a, b) = (_s, _r, _a, b);
    let (_, _, _, b) = {
        let (mut s, mut r, mut a, mut b) = (s, r, a, b);
        let h = thread::spawn(move || {
            let mut q = vec![Block::ZERO; 1_000_000];
            s.send_cots(&mut a, &mut q).unwrap();
            (s, a, q)
        });
        let mut ch = BitVec::zeros(0);
        let mut t = vec![Block::ZERO; 1_000_000];
        r.recv_cots(&mut b, &mut ch, &mut t).unwrap();
        let (s, a, q) = h.join().unwrap();
        let d = s.delta();
        assert!((0..t.len()).all(|i| t[i] == q[i] ^ d.and_bit(ch.get(i))));
        (s, r, a, b)
    };
    // One main iteration: t·(2h+1) blocks from sender to receiver, one flight.
    let c = b.cost() - c0;
    let h = FERRET_MAIN.h as u64;
    assert_eq!(c.bytes_recv, FERRET_MAIN.t as u64 * (2 * h + 1) * 16);
    assert_eq!(c.bytes_sent, 0);
    // (Rounds are a session-wide critical path: a one-way flight that follows
    // the setup's last message adds none.)
    assert!(c.rounds <= 1);
}

#[test]
fn corrupted_ferret_message_is_error_on_both_sides() {
    // Wrong length.
    let (mut s, mut r, mut a, mut b) = setup(TEST_INSECURE, true);
    a.send(&[7u8; 33]).unwrap();
    let mut ch = BitVec::zeros(0);
    let mut t = vec![Block::ZERO; 10];
    let e = r.recv_cots(&mut b, &mut ch, &mut t).unwrap_err();
    assert!(e.to_string().contains("Ferret"), "{e}");
    // The receiver refuses further work, and once its channel is gone the
    // sender errors too.
    assert!(r.recv_cots(&mut b, &mut ch, &mut t).is_err());
    drop(b);
    let mut q = vec![Block::ZERO; 10];
    assert!(s.send_cots(&mut a, &mut q).is_err());

    // A garbled frame (bad checksum).
    let (mut s, mut r, mut a, mut b) = setup(TEST_INSECURE, true);
    let mut frame = hush_transport::encode_frame(&[1u8; 64], 1, 0);
    let last = frame.len() - 1;
    frame[last] ^= 0xff;
    a.send_raw(frame).unwrap();
    let e = r.recv_cots(&mut b, &mut ch, &mut t).unwrap_err();
    assert!(e.to_string().contains("garbled") || e.to_string().contains("length"), "{e}");
    drop(b);
    assert!(s.send_cots(&mut a, &mut q).is_err());
}
