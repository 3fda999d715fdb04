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
