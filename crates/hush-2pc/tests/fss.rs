mod common;
use common::*;
use hush_2pc::fss::{self, FssGate, FssShape};
use hush_primitives::Ring;
use std::sync::mpsc;

fn run_gate(shape: FssShape, xs: Vec<u64>) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
    let n = xs.len();
    let (tx, rx) = mpsc::channel::<Vec<u64>>();
    let xs2 = xs.clone();
    let (a, b) = run_tee(
        move |ch, d| {
            let batch = fss::deal(d, 0, n, shape).unwrap();
            let dealt = rx.recv().unwrap();
            let ring = Ring::new(shape.bits).unwrap();
            let y: Vec<u64> = if shape.gate == FssGate::Millionaire {
                xs2.clone()
            } else {
                xs2.iter().zip(&dealt).map(|(x, m)| ring.sub(*x, *m)).collect()
            };
            (fss::online(ch, &batch, Some(&y), false).unwrap(), dealt)
        },
        move |ch, d| {
            let batch = fss::deal(d, 1, n, shape).unwrap();
            tx.send(batch.dealt_input().to_vec()).unwrap();
            fss::online(ch, &batch, None, false).unwrap()
        },
    );
    let v = |o: fss::FssOut| match o {
        fss::FssOut::Bits(b) => (0..b.n).map(|i| b.get(i) as u64).collect::<Vec<_>>(),
        fss::FssOut::Arith(a) => a.v.clone(),
    };
    let (oa, dealt) = a;
    (v(oa), v(b), dealt)
}

#[test]
fn fss_gates_random_and_edges() {
    for bits in [16u32, 32, 37, 64] {
        let ring = Ring::new(bits).unwrap();
        let xs = edge_values(bits, 1500, 3 + bits as u64);
        let (a, b, x) = run_gate(FssShape { bits, gate: FssGate::Millionaire }, xs.clone());
        for i in 0..xs.len() {
            assert_eq!((a[i] ^ b[i]) == 1, xs[i] > x[i], "mill bits {bits} y {} x {}", xs[i], x[i]);
        }
        let (a, b, _) = run_gate(FssShape { bits, gate: FssGate::Drelu }, xs.clone());
        for i in 0..xs.len() {
            assert_eq!((a[i] ^ b[i]) == 1, !ring.msb(xs[i]), "drelu bits {bits} x {}", xs[i]);
        }
        let (a, b, _) = run_gate(FssShape { bits, gate: FssGate::Relu }, xs.clone());
        for i in 0..xs.len() {
            let want = if ring.msb(xs[i]) { 0 } else { xs[i] };
            assert_eq!(ring.add(a[i], b[i]), want, "relu bits {bits} x {}", xs[i]);
        }
        for f in [1u32, 12.min(bits - 1)] {
            let (a, b, _) = run_gate(FssShape { bits, gate: FssGate::Trunc { f } }, xs.clone());
            for i in 0..xs.len() {
                let got = ring.to_signed(ring.add(a[i], b[i]));
                let want = ring.to_signed(xs[i]) >> f;
                assert_eq!(got, want, "trunc bits {bits} f {f} x {}", xs[i]);
            }
        }
    }
}

/// `fss::streamed` (dealing and evaluation interleaved per chunk, the last
/// chunk partial) against plaintext: party 0's inputs y are fixed up
/// front; the value each gate sees is y + m (m: party 1's dealt mask), or
/// for the millionaires' the comparison of y with party 1's dealt x.
#[test]
fn fss_streamed_matches_plaintext() {
    for bits in [16u32, 32] {
        let ring = Ring::new(bits).unwrap();
        for gate in [FssGate::Relu, FssGate::Drelu, FssGate::Millionaire, FssGate::Trunc { f: 5 }] {
            let shape = FssShape { bits, gate };
            let ys = edge_values(bits, 700, 11 + bits as u64);
            let n = ys.len();
            let y2 = ys.clone();
            let (a, b) = run_tee(
                move |ch, d| fss::streamed(ch, d, 0, n, shape, Some(&y2), 300).unwrap(),
                move |ch, d| fss::streamed(ch, d, 1, n, shape, None, 300).unwrap(),
            );
            assert!(a.dealt_input.is_empty());
            assert_eq!(b.dealt_input.len(), n);
            let v = |o: fss::FssOut| match o {
                fss::FssOut::Bits(b) => (0..b.n).map(|i| b.get(i) as u64).collect::<Vec<_>>(),
                fss::FssOut::Arith(a) => a.v.clone(),
            };
            let m = b.dealt_input.clone();
            let (oa, ob) = (v(a.out), v(b.out));
            assert_eq!((oa.len(), ob.len()), (n, n));
            for i in 0..n {
                let x = ring.add(ys[i], m[i]);
                match gate {
                    FssGate::Relu => assert_eq!(ring.add(oa[i], ob[i]), if ring.msb(x) { 0 } else { x }, "relu {bits} {i}"),
                    FssGate::Drelu => assert_eq!((oa[i] ^ ob[i]) == 1, !ring.msb(x), "drelu {bits} {i}"),
                    FssGate::Millionaire => assert_eq!((oa[i] ^ ob[i]) == 1, ys[i] > m[i], "mill {bits} {i}"),
                    FssGate::Trunc { f } => assert_eq!(ring.to_signed(ring.add(oa[i], ob[i])), ring.to_signed(x) >> f, "trunc {bits} {i}"),
                }
            }
        }
    }
}
