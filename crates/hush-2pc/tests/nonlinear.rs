mod common;
use common::*;
use hush_2pc::beaver::OtSession;
use hush_2pc::nonlinear::{PoolShape, Proto, Session};
use hush_2pc::share::{share_arith, ArithShare};
use hush_2pc::tee::Dealer;
use hush_correlations::registry::SourceConfig;
use hush_primitives::{Block, Prg, Ring};
use hush_transport::{Channel, MemChannel};

fn session(ch: &mut dyn Channel, p: u8, proto: Proto) -> Session {
    match proto {
        Proto::Cf2 => Session::interactive(p, OtSession::setup(ch, p, &SourceConfig::named("iknp"), &mut Prg::new(Block(p as u128 + 9))).unwrap()),
        _ => Session::tee(p, proto, Dealer::in_process(ch, p).unwrap()),
    }
}

#[derive(Clone, Copy)]
enum Op {
    Drelu,
    Relu,
    Trunc(u32),
    Pool(PoolShape),
}

fn run_op(proto: Proto, ring: Ring, xs: &[u64], op: Op) -> Vec<u64> {
    let mut p = Prg::new(Block(99));
    let (s0, s1) = share_arith(ring, xs, &mut p);
    let (mut ca, mut cb) = MemChannel::pair();
    let go = move |ch: &mut dyn Channel, party: u8, s: ArithShare| -> Vec<u64> {
        let mut ses = session(ch, party, proto);
        match op {
            Op::Drelu => {
                let b = ses.drelu(ch, &s).unwrap();
                (0..b.n).map(|i| b.get(i) as u64).collect()
            }
            Op::Relu => ses.relu(ch, &s).unwrap().v.clone(),
            Op::Trunc(f) => ses.trunc(ch, &s, f).unwrap().v.clone(),
            Op::Pool(sh) => ses.maxpool(ch, &s, &sh).unwrap().v.clone(),
        }
    };
    let ta = std::thread::spawn(move || go(&mut ca, 0, s0));
    let tb = std::thread::spawn(move || go(&mut cb, 1, s1));
    let (a, b) = (ta.join().unwrap(), tb.join().unwrap());
    match op {
        Op::Drelu => a.iter().zip(&b).map(|(x, y)| x ^ y).collect(),
        _ => a.iter().zip(&b).map(|(x, y)| ring.add(*x, *y)).collect(),
    }
}

#[test]
fn all_families_all_ops() {
    for proto in [Proto::Cf2, Proto::Tami, Proto::Fss] {
        for bits in [16u32, 32, 37, 64] {
            let ring = Ring::new(bits).unwrap();
            let xs = edge_values(bits, 400, 11 + bits as u64);
            let d = run_op(proto, ring, &xs, Op::Drelu);
            let r = run_op(proto, ring, &xs, Op::Relu);
            for i in 0..xs.len() {
                assert_eq!(d[i] == 1, !ring.msb(xs[i]), "{proto:?} drelu {bits}");
                assert_eq!(r[i], if ring.msb(xs[i]) { 0 } else { xs[i] }, "{proto:?} relu {bits}");
            }
            for f in [1u32, 13.min(bits - 1)] {
                let t = run_op(proto, ring, &xs, Op::Trunc(f));
                for i in 0..xs.len() {
                    let got = ring.to_signed(t[i]);
                    let want = ring.to_signed(xs[i]) >> f;
                    assert!(got == want || got == want - 1, "{proto:?} trunc {bits} f {f} x {} got {got} want {want}", xs[i]);
                }
            }
            let sh = PoolShape { c: 2, h: 5, w: 5, k: 3, stride: 2, pad: 1 };
            // MaxPool's valid range: |x| < 2^(ℓ-2) (differences must not wrap).
            let q = 1u64 << (bits - 2);
            let mut px: Vec<u64> = edge_values(bits, 50, 5 + bits as u64)
                .iter()
                .map(|v| ring.from_signed(ring.to_signed(*v) % (q as i64)))
                .collect();
            px[0] = q - 1;
            px[1] = ring.from_signed(-(q as i64) + 1);
            let got = run_op(proto, ring, &px, Op::Pool(sh));
            assert_eq!(got, sh.reference(ring, &px).unwrap(), "{proto:?} maxpool {bits}");
        }
    }
}
