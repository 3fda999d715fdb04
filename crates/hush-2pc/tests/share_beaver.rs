mod common;
use common::*;
use hush_2pc::beaver::{self, OtSession, TripleSource};
use hush_2pc::share::{open_arith, open_bool, share_arith, share_bool, ArithShare, BoolShare, FixedPoint};
use hush_2pc::tee::Dealer;
use hush_correlations::registry::SourceConfig;
use hush_primitives::{Block, Prg, Ring};
use hush_2pc::deal::tami::TamiTables;
use hush_2pc::deal::triples::ArithTriples;
use hush_transport::Channel;

fn exercise(ch: &mut dyn Channel, p: u8, src: &mut dyn TripleSource, x: ArithShare, y: ArithShare, a: BoolShare, b: BoolShare) -> (Vec<u64>, BoolShare, Vec<u64>) {
    let ring = x.ring;
    let n = x.len();
    let t = src.arith_triples(ch, p, ring.bits(), n).unwrap();
    let z = beaver::mul(ch, p, &x, &y, &t).unwrap();
    let bt = src.bit_triples(ch, p, a.n).unwrap();
    let c = beaver::and(ch, p, &a, &b, &bt).unwrap();
    let t2 = src.arith_triples(ch, p, ring.bits(), a.n).unwrap();
    let ca = beaver::b2a(ch, p, &c, ring, &t2).unwrap();
    (open_arith(ch, &z).unwrap(), open_bool(ch, &c).unwrap(), open_arith(ch, &ca).unwrap())
}

#[test]
fn beaver_dealt_and_ot() {
    for bits in [16u32, 37, 64] {
        let ring = Ring::new(bits).unwrap();
        let mut p = Prg::new(Block(bits as u128));
        let xs = edge_values(bits, 300, 1);
        let ys = edge_values(bits, 300, 2);
        let bits_a: Vec<bool> = (0..300).map(|_| p.random_bool()).collect();
        let bits_b: Vec<bool> = (0..300).map(|_| p.random_bool()).collect();
        let (x0, x1) = share_arith(ring, &xs, &mut p);
        let (y0, y1) = share_arith(ring, &ys, &mut p);
        let (a0, a1) = share_bool(&BoolShare::from_bools(&bits_a), &mut p);
        let (b0, b1) = share_bool(&BoolShare::from_bools(&bits_b), &mut p);
        for interactive in [false, true] {
            let (x0, x1, y0, y1, a0, a1, b0, b1) = (x0.clone(), x1.clone(), y0.clone(), y1.clone(), a0.clone(), a1.clone(), b0.clone(), b1.clone());
            let go = move |ch: &mut dyn Channel, pp: u8, x: ArithShare, y: ArithShare, a: BoolShare, b: BoolShare| {
                if interactive {
                    let mut s = OtSession::setup(ch, pp, &SourceConfig::named("iknp"), &mut Prg::new(Block(pp as u128))).unwrap();
                    exercise(ch, pp, &mut s, x, y, a, b)
                } else {
                    let mut d = Dealer::in_process(ch, pp).unwrap();
                    exercise(ch, pp, &mut d, x, y, a, b)
                }
            };
            let (ra, rb) = run(move |ch| go(ch, 0, x0, y0, a0, b0), move |ch| go(ch, 1, x1, y1, a1, b1));
            assert_eq!(ra.0, rb.0);
            for i in 0..300 {
                assert_eq!(ra.0[i], ring.mul(xs[i], ys[i]), "mul {bits} interactive {interactive}");
                assert_eq!(ra.1.get(i), bits_a[i] & bits_b[i]);
                assert_eq!(ra.2[i], (bits_a[i] & bits_b[i]) as u64);
            }
        }
    }
}

#[test]
fn fixed_point_roundtrip() {
    let fp = FixedPoint::new(32, 12).unwrap();
    for v in [0.0, 1.5, -1.5, -0.000244140625, 1000.25, -100000.0] {
        assert_eq!(fp.decode(fp.encode(v)), v);
    }
    let r = fp.ring;
    assert_eq!(r.to_signed(FixedPoint::trunc_ref(r, fp.encode(-1.5), 12)), -2);
}

/// A module releases only its own host's share: party 0's release of a
/// TAMI batch holds no tables, no dealt input and no party-1 values.
#[test]
fn module_releases_only_own_share() {
    let req = TamiTables::request(0, 100, &hush_2pc::tami::TamiShape::new(32, 4, 8, hush_2pc::tami::Flavor::Relu));
    let r2 = req.clone();
    let (a, b) = run_tee(move |_ch, d| d.deal(req).unwrap(), move |_ch, d| d.deal(r2).unwrap());
    assert_ne!(a, b);
    let shape = hush_2pc::tami::TamiShape::new(32, 4, 8, hush_2pc::tami::Flavor::Relu);
    let plan = shape.plan();
    let sa = hush_2pc::deal::tami::TamiShare::from_bytes(&a, 0, 100, &shape, &plan).unwrap();
    let sb = hush_2pc::deal::tami::TamiShare::from_bytes(&b, 1, 100, &shape, &plan).unwrap();
    assert!(sa.tables.is_empty() && sa.input.is_empty());
    assert!(sb.tau.is_empty() && sb.pad.is_empty(), "party 1 never gets τ or the table pads");
    // Shares differ from the peer's (no value released twice).
    assert_ne!(sa.subsets, sb.subsets);
    assert_ne!(sa.rho, sb.rho);
    // Triples: party 0 and party 1 get different, consistent shares.
    let (ta, tb) = run_tee(
        |_ch, d| d.deal(ArithTriples::request(0, 10, 64)).unwrap(),
        |_ch, d| d.deal(ArithTriples::request(0, 10, 64)).unwrap(),
    );
    let ta = hush_2pc::deal::triples::TripleShare::from_bytes(&ta, 10).unwrap();
    let tb = hush_2pc::deal::triples::TripleShare::from_bytes(&tb, 10).unwrap();
    for i in 0..10 {
        assert_ne!(ta.a[i], tb.a[i]);
        assert_eq!(ta.c[i].wrapping_add(tb.c[i]), ta.a[i].wrapping_add(tb.a[i]).wrapping_mul(ta.b[i].wrapping_add(tb.b[i])));
    }
}
