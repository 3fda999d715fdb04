//! Correctness and cost tests for base OT, IKNP and the derived OTs, over
//! the in-memory channel (and TCP where the test is about TCP).

use hush_correlations::iknp::{IknpReceiver, IknpSender};
use hush_correlations::{base_ot, ot, CorrelationSource, CotReceiver, CotSender};
use hush_primitives::{BitVec, Block, Prg};
use hush_transport::{Channel, ChannelOptions, MemChannel};
use std::thread;
use std::time::Duration;

fn setup() -> (IknpSender, IknpReceiver, MemChannel, MemChannel) {
    let (mut a, mut b) = MemChannel::pair();
    let h = thread::spawn(move || {
        let s = IknpSender::setup(&mut a, &mut Prg::new(Block(11))).unwrap();
        (s, a)
    });
    let r = IknpReceiver::setup(&mut b, &mut Prg::new(Block(22))).unwrap();
    let (s, a) = h.join().unwrap();
    (s, r, a, b)
}

#[test]
fn base_ot_gives_chosen_key_only() {
    let (mut a, mut b) = MemChannel::pair();
    let choices: Vec<bool> = (0..128).map(|i| (i * 7) % 3 == 0).collect();
    let c2 = choices.clone();
    let h = thread::spawn(move || base_ot::send(&mut a, 128, &mut Prg::new(Block(1))).unwrap());
    let got = base_ot::recv(&mut b, &c2, &mut Prg::new(Block(2))).unwrap();
    let keys = h.join().unwrap();
    for i in 0..128 {
        let c = choices[i] as usize;
        assert_eq!(got[i], keys[i][c]);
        assert_ne!(got[i], keys[i][1 - c], "receiver must not get the other key");
    }
    // Cost: 32 bytes S->R, 32*128 R->S, two rounds.
    let cb = b.cost();
    assert_eq!(cb.bytes_recv, 32);
    assert_eq!(cb.bytes_sent, 32 * 128);
    assert_eq!(cb.rounds, 2);
}

#[test]
fn base_ot_rejects_invalid_point() {
    let (mut a, mut b) = MemChannel::pair();
    let h = thread::spawn(move || base_ot::send(&mut a, 4, &mut Prg::new(Block(1))));
    let _ = b.recv().unwrap();
    b.send(&[0xffu8; 128]).unwrap(); // not valid Ristretto encodings
    let e = h.join().unwrap().unwrap_err();
    assert!(e.to_string().contains("invalid Ristretto255 point"), "{e}");
}

#[test]
fn cot_relation_for_all_sizes() {
    let (mut s, mut r, a, b) = setup();
    let delta = s.delta();
    let mut a = Some(a);
    let mut b = b;
    for n in [1usize, 127, 128, 100_000] {
        let mut ca = a.take().unwrap();
        let h = thread::spawn(move || {
            let mut q = vec![Block::ZERO; n];
            s.send_cots(&mut ca, &mut q).unwrap();
            (s, ca, q)
        });
        let mut choices = BitVec::zeros(0);
        let mut t = vec![Block::ZERO; n];
        r.recv_cots(&mut b, &mut choices, &mut t).unwrap();
        let (s2, ca, q) = h.join().unwrap();
        s = s2;
        a = Some(ca);
        assert_eq!(choices.len(), n);
        for i in 0..n {
            assert_eq!(t[i], q[i] ^ delta.and_bit(choices.get(i)), "n={n} i={i}");
        }
        // Δ is the same for the whole session.
        assert_eq!(s.delta(), delta);
        if n == 100_000 {
            let ones = choices.count_ones();
            assert!((49_000..51_000).contains(&ones), "{ones}");
        }
    }
    assert_eq!(s.produced(), 1 + 127 + 128 + 100_000);
}

#[test]
fn iknp_cost_is_pinned() {
    let (mut s, mut r, mut a, mut b) = setup();
    let before = b.cost();
    let n = 1000;
    let h = thread::spawn(move || {
        let mut q = vec![Block::ZERO; n];
        s.send_cots(&mut a, &mut q).unwrap();
        a.cost()
    });
    let mut c = BitVec::zeros(0);
    let mut t = vec![Block::ZERO; n];
    r.recv_cots(&mut b, &mut c, &mut t).unwrap();
    let ca = h.join().unwrap();
    let d = b.cost() - before;
    // 128 rows of ceil(1000/128)*128 bits, one flight.
    assert_eq!(d.bytes_sent, 128 * 1024 / 8);
    assert_eq!(d.bytes_recv, 0);
    assert_eq!(d.rounds, 1);
    assert_eq!(ca.rounds, 3); // 2 base-OT rounds + 1
}

#[test]
fn rot_and_chosen_ot() {
    let (mut s, mut r, mut a, mut b) = setup();
    let n = 1000;
    let m0: Vec<Block> = (0..n as u128).map(|i| Block(i * 3 + 1)).collect();
    let m1: Vec<Block> = (0..n as u128).map(|i| Block(i * 5 + 2)).collect();
    let (m0c, m1c) = (m0.clone(), m1.clone());
    let h = thread::spawn(move || {
        let mut r0 = vec![Block::ZERO; n];
        let mut r1 = vec![Block::ZERO; n];
        ot::rot_send(&mut s, &mut a, &mut r0, &mut r1).unwrap();
        ot::ot_send(&mut s, &mut a, &m0c, &m1c).unwrap();
        (r0, r1)
    });
    let mut cb = BitVec::zeros(0);
    let mut mb = vec![Block::ZERO; n];
    ot::rot_recv(&mut r, &mut b, &mut cb, &mut mb).unwrap();
    let mut prg = Prg::new(Block(5));
    let choices = BitVec::random(n, &mut prg);
    let mut out = vec![Block::ZERO; n];
    ot::ot_recv(&mut r, &mut b, &choices, &mut out).unwrap();
    let (r0, r1) = h.join().unwrap();
    for i in 0..n {
        let (mine, other) = if cb.get(i) { (r1[i], r0[i]) } else { (r0[i], r1[i]) };
        assert_eq!(mb[i], mine);
        assert_ne!(mb[i], other);
        let want = if choices.get(i) { m1[i] } else { m0[i] };
        let not = if choices.get(i) { m0[i] } else { m1[i] };
        assert_eq!(out[i], want);
        assert_ne!(out[i], not);
    }
}

#[test]
fn receiver_cannot_compute_other_message_from_its_view() {
    // With the receiver's t_i and the sender's values we check that the
    // receiver's natural guesses for the other ROT message are wrong: the
    // other message is H(i, t_i ⊕ Δ), which needs Δ.
    let (mut s, mut r, mut a, mut b) = setup();
    let n = 256;
    let h = thread::spawn(move || {
        let mut r0 = vec![Block::ZERO; n];
        let mut r1 = vec![Block::ZERO; n];
        ot::rot_send(&mut s, &mut a, &mut r0, &mut r1).unwrap();
        (r0, r1)
    });
    let mut cb = BitVec::zeros(0);
    let mut mb = vec![Block::ZERO; n];
    ot::rot_recv(&mut r, &mut b, &mut cb, &mut mb).unwrap();
    let (r0, r1) = h.join().unwrap();
    for i in 0..n {
        let other = if cb.get(i) { r0[i] } else { r1[i] };
        assert_ne!(other, mb[i]);
        assert_ne!(other, mb[i] ^ Block::ONES);
        for j in 0..n {
            assert_ne!(other, mb[j]);
        }
    }
}

#[test]
fn one_of_n_rot_and_ot() {
    for k in [1usize, 2, 4, 8] {
        let (mut s, mut r, mut a, mut b) = setup();
        let n = 300;
        let nn = 1 << k;
        let msgs: Vec<u64> = (0..(n * nn) as u64).map(|i| i.wrapping_mul(0x9e3779b97f4a7c15) & 0xfff).collect();
        let mc = msgs.clone();
        let h = thread::spawn(move || {
            let mut pads = vec![Block::ZERO; n * nn];
            ot::rot1n_send(&mut s, &mut a, k, n, &mut pads).unwrap();
            ot::ot1n_send(&mut s, &mut a, k, 12, &mc).unwrap();
            pads
        });
        let mut c = vec![0u8; n];
        let mut out = vec![Block::ZERO; n];
        ot::rot1n_recv(&mut r, &mut b, k, &mut c, &mut out).unwrap();
        let mut prg = Prg::new(Block(k as u128));
        let choices: Vec<u8> = (0..n).map(|_| (prg.next_u64() % nn as u64) as u8).collect();
        let mut got = vec![0u64; n];
        ot::ot1n_recv(&mut r, &mut b, k, 12, &choices, &mut got).unwrap();
        let pads = h.join().unwrap();
        for i in 0..n {
            assert_eq!(out[i], pads[i * nn + c[i] as usize]);
            for x in 0..nn {
                if x != c[i] as usize {
                    assert_ne!(out[i], pads[i * nn + x], "k={k} i={i} x={x}");
                }
            }
            assert_eq!(got[i], msgs[i * nn + choices[i] as usize]);
        }
    }
}

#[test]
fn invalid_arguments_are_errors() {
    let (mut s, _r, mut a, _b) = setup();
    let mut pads = vec![Block::ZERO; 3];
    assert!(ot::rot1n_send(&mut s, &mut a, 9, 1, &mut pads).is_err());
    assert!(ot::rot1n_send(&mut s, &mut a, 2, 1, &mut pads).is_err());
}

#[test]
fn garbled_iknp_message_is_error_on_both_sides() {
    let (mut s, _r, mut a, mut b) = setup();
    let h = thread::spawn(move || {
        let mut q = vec![Block::ZERO; 1000];
        s.send_cots(&mut a, &mut q)
    });
    b.send(&[0u8; 100]).unwrap(); // wrong length for the matrix
    let e = h.join().unwrap().unwrap_err();
    assert!(e.to_string().contains("IKNP"), "{e}");
    // The sender's side errored and dropped its channel: we see it.
    assert!(b.recv().is_err());
}

#[test]
fn peer_disconnect_mid_iknp_over_tcp_times_out_or_errors() {
    let o = ChannelOptions { timeout: Duration::from_millis(1500), ..Default::default() };
    let (mut a, mut b) = hush_transport::tcp_pair_loopback(o).unwrap();
    let h = thread::spawn(move || {
        let mut s = IknpSender::setup(&mut a, &mut Prg::new(Block(1)))?;
        let mut q = vec![Block::ZERO; 1000];
        s.send_cots(&mut a, &mut q)
    });
    // The IKNP receiver (base-OT sender) sends its first message, then dies.
    let mut p = Prg::new(Block(3));
    let pt = curve25519_dalek::ristretto::RistrettoPoint::random(&mut p).compress();
    b.send(pt.as_bytes()).unwrap();
    let _ = b.recv(); // the points of the other side
    drop(b);
    let e = h.join().unwrap().unwrap_err();
    let s = e.to_string();
    assert!(s.contains("disconnected") || s.contains("timeout"), "{s}");
}

/// Deterministic transcript: with every seed fixed, base OT + IKNP put the
/// same bytes on the wire in every run, and a different seed changes them.
#[test]
fn iknp_transcript_is_deterministic() {
    fn run(seed: u128) -> (u32, u32) {
        let (a, b) = MemChannel::pair();
        let mut a = hush_transport::Transcript::new(a);
        let mut b = hush_transport::Transcript::new(b);
        let h = thread::spawn(move || {
            let mut s = IknpSender::setup(&mut a, &mut Prg::new(Block(seed))).unwrap();
            let mut q = vec![Block::ZERO; 1000];
            s.send_cots(&mut a, &mut q).unwrap();
            a.digest()
        });
        let mut r = IknpReceiver::setup(&mut b, &mut Prg::new(Block(seed + 1))).unwrap();
        let mut c = BitVec::zeros(0);
        let mut t = vec![Block::ZERO; 1000];
        r.recv_cots(&mut b, &mut c, &mut t).unwrap();
        let da = h.join().unwrap();
        let db = b.digest();
        // What one side sent is what the other received.
        assert_eq!(da.0, db.1);
        assert_eq!(da.1, db.0);
        da
    }
    assert_eq!(run(100), run(100));
    assert_ne!(run(100), run(200));
}

/// ROTs and 1-of-2^k ROTs over several COT requests (`ot::ROT_CHUNK`; the
/// 1-of-2^k ROTs request about ROT_CHUNK / k instances' COTs at a time):
/// both sides must request the same sizes (else IKNP reports a wrong
/// length) and the pads must still match at every index, for every k
/// (k = 3, 5, 6, 7 once had different request sizes on the two sides).
#[test]
fn streamed_rots_span_requests() {
    let (mut s, mut r, mut a, mut b) = setup();
    let n = 2 * ot::ROT_CHUNK + 77;
    let h = thread::spawn(move || {
        let (mut m0, mut m1) = (vec![Block::ZERO; n], vec![Block::ZERO; n]);
        ot::rot_send(&mut s, &mut a, &mut m0, &mut m1).unwrap();
        let mut lsb = Vec::new();
        for k in 1..=8usize {
            let n1 = 3 * ot::ROT_CHUNK / k + 5;
            let mut out = vec![0u8; n1 << k];
            ot::rot1n_send_lsb(&mut s, &mut a, k, n1, 8, &mut out).unwrap();
            lsb.push(out);
        }
        (m0, m1, lsb)
    });
    let (mut c, mut mb) = (BitVec::zeros(0), vec![Block::ZERO; n]);
    ot::rot_recv(&mut r, &mut b, &mut c, &mut mb).unwrap();
    let mut got = Vec::new();
    for k in 1..=8usize {
        let n1 = 3 * ot::ROT_CHUNK / k + 5;
        let (mut ch, mut out) = (vec![0u8; n1], vec![0u8; n1]);
        ot::rot1n_recv_lsb(&mut r, &mut b, k, 8, &mut ch, &mut out).unwrap();
        got.push((ch, out));
    }
    let (m0, m1, lsb) = h.join().unwrap();
    assert_eq!(c.len(), n);
    for i in 0..n {
        let (mine, other) = if c.get(i) { (m1[i], m0[i]) } else { (m0[i], m1[i]) };
        assert_eq!(mb[i], mine, "ROT {i}");
        assert_ne!(mb[i], other, "ROT {i}");
    }
    for (k, ((ch, out), pads)) in (1..=8usize).zip(got.iter().zip(&lsb)) {
        let nn = 1 << k;
        let mut same_other = 0usize;
        for i in 0..ch.len() {
            assert!((ch[i] as usize) < nn);
            assert_eq!(out[i], pads[i * nn + ch[i] as usize], "k = {k}, instance {i}");
            same_other += (0..nn).filter(|&x| x != ch[i] as usize && pads[i * nn + x] == out[i]).count();
        }
        // 8-bit pads: other entries coincide with probability 1/256
        let others = ch.len() * (nn - 1);
        assert!(same_other * 50 < others, "k = {k}: {same_other} of {others} other pads equal the chosen one");
    }
}

/// The IKNP kernels (counter-mode PRG, the 128-row transpose, the
/// correction XORs) at every SIMD level this CPU has give the same COTs as
/// the portable path, bit for bit, for one fixed-seed session over odd
/// request sizes (partial tiles, several tiles, sizes not a multiple of
/// 128 or 64), with chosen choice bits, and the relation holds.
#[test]
fn iknp_output_is_the_same_at_every_simd_level() {
    use hush_correlations::iknp::TILE;
    use hush_primitives::simd::{self, Level};
    let sizes = [1usize, 63, 200, TILE - 1, TILE + 129, 2 * TILE + 4000];
    fn run(l: Level, sizes: &[usize]) -> (Block, Vec<Vec<Block>>, Vec<Vec<Block>>, Vec<BitVec>) {
        let (mut a, mut b) = MemChannel::pair();
        let sz = sizes.to_vec();
        let h = thread::spawn(move || {
            simd::with_level(l, || {
                let mut s = IknpSender::setup(&mut a, &mut Prg::new(Block(31))).unwrap();
                let qs: Vec<Vec<Block>> = sz
                    .iter()
                    .map(|&n| {
                        let mut q = vec![Block::ZERO; n];
                        s.send_cots(&mut a, &mut q).unwrap();
                        q
                    })
                    .collect();
                (s.delta(), qs)
            })
            .unwrap()
        });
        let mut cp = Prg::new(Block(77));
        let (ts, cs) = simd::with_level(l, || {
            let mut r = IknpReceiver::setup(&mut b, &mut Prg::new(Block(32))).unwrap();
            let mut ts = Vec::new();
            let mut cs = Vec::new();
            for &n in sizes {
                let c = BitVec::random(n, &mut cp);
                let mut t = vec![Block::ZERO; n];
                r.recv_cots_chosen(&mut b, &c, &mut t).unwrap();
                ts.push(t);
                cs.push(c);
            }
            (ts, cs)
        })
        .unwrap();
        let (delta, qs) = h.join().unwrap();
        (delta, qs, ts, cs)
    }
    let (d0, q0, t0, c0) = run(Level::Portable, &sizes);
    for (k, &n) in sizes.iter().enumerate() {
        for i in 0..n {
            assert_eq!(t0[k][i], q0[k][i] ^ d0.and_bit(c0[k].get(i)), "portable n={n} i={i}");
        }
    }
    simd::for_each_level("iknp", |l| {
        let (d, q, t, c) = run(l, &sizes);
        assert_eq!(d, d0);
        assert_eq!(c, c0);
        assert!(q == q0, "level {l}: sender's q differs from the portable path");
        assert!(t == t0, "level {l}: receiver's t differs from the portable path");
    });
}
