mod common;
use common::*;
use hush_2pc::tami::{self, Flavor, TamiShape};
use hush_primitives::Ring;
use std::sync::mpsc;

fn mask(bits: u32) -> u64 {
    if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 }
}

/// Runs one TAMI batch: `x_of(dealt)` gives the plaintext (millionaires':
/// y values chosen by the test from x; others: x values → y = x − m).
fn run_flavor(shape: TamiShape, xs: Vec<u64>) -> (Vec<u64>, Vec<u64>, Vec<u64>, Vec<u64>) {
    let n = xs.len();
    let (tx, rx) = mpsc::channel::<Vec<u64>>();
    let (tx2, rx2) = mpsc::channel::<Vec<u64>>();
    let xs2 = xs.clone();
    let (a, b) = run_tee(
        move |ch, d| {
            let batch = tami::deal(d, 0, n, shape).unwrap();
            let dealt = rx.recv().unwrap();
            let ring = Ring::new(shape.bits).unwrap();
            // Millionaires': dealt = x, input list = y; else y = x − m.
            let y: Vec<u64> = if shape.flavor == Flavor::Millionaire {
                xs2.clone()
            } else {
                xs2.iter().zip(&dealt).map(|(x, m)| ring.sub(*x, *m)).collect()
            };
            let out = tami::online(ch, &batch, Some(&y)).unwrap();
            (out, dealt)
        },
        move |ch, d| {
            let batch = tami::deal(d, 1, n, shape).unwrap();
            tx.send(batch.dealt_input().to_vec()).unwrap();
            let out = tami::online(ch, &batch, None).unwrap();
            let _ = tx2.send(vec![]);
            out
        },
    );
    let _ = rx2;
    let (oa, dealt) = a;
    let to_vec = |o: tami::TamiOut| -> Vec<u64> {
        match o {
            tami::TamiOut::Bits(b) => (0..b.n).map(|i| b.get(i) as u64).collect(),
            tami::TamiOut::Arith(a) => a.v.clone(),
        }
    };
    (to_vec(oa), to_vec(b), dealt, xs)
}

#[test]
fn millionaire_random_and_edges() {
    for bits in [16u32, 32, 37, 64] {
        for k in [2u32, 3, 4, 5] {
            let shape = TamiShape::new(bits, k, 8, Flavor::Millionaire);
            let ys = edge_values(bits, 3000, bits as u64);
            let (a, b, x, y) = run_flavor(shape, ys);
            for i in 0..y.len() {
                assert_eq!((a[i] ^ b[i]) == 1, y[i] > x[i], "bits {bits} k {k} i {i} y {} x {}", y[i], x[i]);
            }
        }
    }
}

#[test]
fn drelu_relu_trunc() {
    for bits in [16u32, 32, 37, 64] {
        let ring = Ring::new(bits).unwrap();
        let xs = edge_values(bits, 2000, 7 + bits as u64);
        let (a, b, _, x) = run_flavor(TamiShape::new(bits, 4, 8, Flavor::Drelu), xs.clone());
        for i in 0..x.len() {
            assert_eq!((a[i] ^ b[i]) == 1, !ring.msb(x[i]), "drelu bits {bits} x {}", x[i]);
        }
        for k in [4u32, 5] {
            let (a, b, _, x) = run_flavor(TamiShape::new(bits, k, 8, Flavor::Relu), xs.clone());
            for i in 0..x.len() {
                let want = if ring.msb(x[i]) { 0 } else { x[i] };
                assert_eq!(ring.add(a[i], b[i]), want, "relu bits {bits} k {k} x {}", x[i]);
            }
        }
        for f in [1u32, 12.min(bits - 1)] {
            let (a, b, _, x) = run_flavor(TamiShape::new(bits, 4, 8, Flavor::Trunc { f }), xs.clone());
            for i in 0..x.len() {
                let got = ring.to_signed(ring.add(a[i], b[i]));
                let want = ring.to_signed(x[i]) >> f;
                assert!(got == want || got == want - 1, "trunc bits {bits} f {f} x {} got {got} want {want}", x[i]);
            }
        }
        let _ = mask(bits);
    }
}
