mod common;
use common::*;
use hush_2pc::beaver::OtSession;
use hush_2pc::cf2;
use hush_2pc::share::{ArithShare, BoolShare};
use hush_correlations::registry::SourceConfig;
use hush_primitives::{Block, Prg, Ring};

fn session(ch: &mut dyn hush_transport::Channel, p: u8) -> OtSession {
    OtSession::setup(ch, p, &SourceConfig::named("iknp"), &mut Prg::new(Block(p as u128 + 5))).unwrap()
}

#[test]
fn cf2_millionaire_edges() {
    for bits in [16u32, 32, 37, 64] {
        let ys = edge_values(bits, 700, 1 + bits as u64);
        let mut xs = edge_values(bits, 700, 2 + bits as u64);
        xs.rotate_left(3);
        let (y2, x2) = (ys.clone(), xs.clone());
        let (a, b) = run(
            move |ch| {
                let mut s = session(ch, 0);
                let mut pre = cf2::prepare(&mut s, ch, 0, y2.len(), bits, 4, 0).unwrap();
                cf2::millionaire_online(ch, 0, &mut pre, &y2).unwrap()
            },
            move |ch| {
                let mut s = session(ch, 1);
                let mut pre = cf2::prepare(&mut s, ch, 1, x2.len(), bits, 4, 0).unwrap();
                cf2::millionaire_online(ch, 1, &mut pre, &x2).unwrap()
            },
        );
        for i in 0..ys.len() {
            assert_eq!(a.get(i) ^ b.get(i), ys[i] > xs[i], "bits {bits} y {} x {}", ys[i], xs[i]);
        }
    }
}

#[test]
fn cf2_mux() {
    let ring = Ring::new(32).unwrap();
    let n = 300;
    let mut p = Prg::new(Block(77));
    let bits: Vec<bool> = (0..n).map(|_| p.random_bool()).collect();
    let xs: Vec<u64> = (0..n).map(|_| p.next_u64() & ring.mask()).collect();
    let (b0, b1) = hush_2pc::share::share_bool(&BoolShare::from_bools(&bits), &mut p);
    let (x0, x1) = hush_2pc::share::share_arith(ring, &xs, &mut p);
    let (a, b) = run(
        move |ch| {
            let mut s = session(ch, 0);
            let mut pre = cf2::prepare(&mut s, ch, 0, 1, 2, 1, n).unwrap();
            cf2::mux_online(ch, 0, &mut pre, &b0, &x0).unwrap()
        },
        move |ch| {
            let mut s = session(ch, 1);
            let mut pre = cf2::prepare(&mut s, ch, 1, 1, 2, 1, n).unwrap();
            cf2::mux_online(ch, 1, &mut pre, &b1, &x1).unwrap()
        },
    );
    for i in 0..n {
        assert_eq!(ring.add(a.v[i], b.v[i]), if bits[i] { xs[i] } else { 0 });
    }
    let _ = ArithShare::zeros(ring, 0);
}

/// The known-sign truncation: for every non-negative x (edges: 0, 1,
/// 2^f − 1, 2^f, 2^{ℓ−1} − 1, and random) and every split into shares, the
/// result is ⌊x/2^f⌋ or one less (faithful), for ℓ = 16, 37, 64; and its
/// cost is one flight each way of 1 and 2·⌈ℓ/8⌉ bytes per element.
#[test]
fn cf2_trunc_nonneg() {
    for (bits, f) in [(16u32, 4u32), (37, 12), (64, 16)] {
        let ring = Ring::new(bits).unwrap();
        let top = 1u64 << (bits - 1);
        let mut p = Prg::new(Block(bits as u128));
        let mut xs: Vec<u64> = vec![0, 1, (1 << f) - 1, 1 << f, (1 << f) + 1, top - 1, top - 2, top / 2, top / 2 - 1];
        xs.extend((0..600).map(|_| p.next_u64() & (top - 1)));
        let (x0, x1) = hush_2pc::share::share_arith(ring, &xs, &mut p);
        let n = xs.len();
        let ((a, ca), (b, cb)) = run(
            move |ch| {
                let mut s = session(ch, 0);
                let c0 = ch.cost();
                let r = cf2::trunc_nonneg(&mut s, ch, 0, &x0, f).unwrap();
                (r, ch.cost() - c0)
            },
            move |ch| {
                let mut s = session(ch, 1);
                let c0 = ch.cost();
                let r = cf2::trunc_nonneg(&mut s, ch, 1, &x1, f).unwrap();
                (r, ch.cost() - c0)
            },
        );
        for i in 0..n {
            let got = ring.add(a.v[i], b.v[i]);
            let want = xs[i] >> f;
            assert!(got == want || got == want.wrapping_sub(1) & ring.mask(), "ℓ {bits} f {f}: x {} → {got}, want {want} (or one less)", xs[i]);
        }
        // party 0 (the IKNP sender, which sends nothing to extend) sends
        // exactly one ring word per element (a correlated OT); party 1 its n choice
        // corrections on top of the IKNP extension matrix
        let w = (bits as u64).div_ceil(8);
        assert_eq!(ca.bytes_sent, w * n as u64, "{ca:?}");
        assert!(cb.bytes_sent >= (n as u64).div_ceil(8), "{cb:?}");
    }
}

/// Party 1's share of the wrap term is masked by party 0's fresh r: over
/// the same inputs, it takes (nearly) all distinct values — with a fixed r
/// it would take only the two values 0 and −2^{ℓ−f}.
#[test]
fn cf2_trunc_nonneg_receiver_share_is_masked() {
    let ring = Ring::new(32).unwrap();
    let n = 2000;
    let xs = vec![(1u64 << 30) + 5; n];
    let mut p = Prg::new(Block(3));
    let (x0, x1) = hush_2pc::share::share_arith(ring, &xs, &mut p);
    let x1c = x1.clone();
    let (_, b) = run(
        move |ch| {
            let mut s = session(ch, 0);
            cf2::trunc_nonneg(&mut s, ch, 0, &x0, 8).unwrap()
        },
        move |ch| {
            let mut s = session(ch, 1);
            cf2::trunc_nonneg(&mut s, ch, 1, &x1, 8).unwrap()
        },
    );
    // z1 = party 1's output minus its local part
    let z: std::collections::HashSet<u64> = (0..n).map(|i| ring.sub(b.v[i], x1c.v[i] >> 8)).collect();
    assert!(z.len() > n * 9 / 10, "party 1's wrap shares take only {} distinct values", z.len());
}
