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

/// `tami::streamed` (dealing and the flights interleaved per chunk, the
/// last chunk partial), sequential and with the dealing one chunk ahead on
/// a second thread, against plaintext: party 0's inputs y are fixed up
/// front; the value each comparison sees is y + m (m: party 1's dealt
/// mask), or for the millionaires' y against party 1's dealt x.
#[test]
fn tami_streamed_matches_plaintext() {
    for (bits, k, arity) in [(16u32, 4u32, 8u32), (32, 4, 8), (37, 5, 4)] {
        let ring = Ring::new(bits).unwrap();
        for flavor in [Flavor::Relu, Flavor::Drelu, Flavor::Millionaire, Flavor::Trunc { f: 5 }] {
            for overlap in [false, true] {
                let shape = TamiShape::new(bits, k, arity, flavor);
                let ys = edge_values(bits, 500, 7 + bits as u64);
                let n = ys.len();
                let y2 = ys.clone();
                let (a, b) = run_tee(
                    move |ch, d| tami::streamed(ch, d, 0, n, shape, Some(&y2), 200, overlap).unwrap(),
                    move |ch, d| tami::streamed(ch, d, 1, n, shape, None, 200, overlap).unwrap(),
                );
                assert!(a.dealt_input.is_empty());
                assert_eq!(b.dealt_input.len(), n);
                assert!(a.dealt > 0 && b.dealt > 0);
                let v = |o: tami::TamiOut| match o {
                    tami::TamiOut::Bits(b) => (0..b.n).map(|i| b.get(i) as u64).collect::<Vec<_>>(),
                    tami::TamiOut::Arith(a) => a.v.clone(),
                };
                let m = b.dealt_input.clone();
                let (oa, ob) = (v(a.out), v(b.out));
                assert_eq!((oa.len(), ob.len()), (n, n));
                for i in 0..n {
                    let x = ring.add(ys[i] & mask(bits), m[i]);
                    let w = format!("{bits} {flavor:?} overlap {overlap} i {i}");
                    match flavor {
                        Flavor::Relu => assert_eq!(ring.add(oa[i], ob[i]), if ring.msb(x) { 0 } else { x }, "{w}"),
                        Flavor::Drelu => assert_eq!((oa[i] ^ ob[i]) == 1, !ring.msb(x), "{w}"),
                        Flavor::Millionaire => assert_eq!((oa[i] ^ ob[i]) == 1, (ys[i] & mask(bits)) > m[i], "{w}"),
                        Flavor::Trunc { f } => {
                            let (got, want) = (ring.to_signed(ring.add(oa[i], ob[i])), ring.to_signed(x) >> f);
                            assert!(got == want || got == want - 1, "{w}");
                        }
                    }
                }
            }
        }
    }
}

/// A zero chunk and an input of the wrong length are refused with clear
/// errors, before any dealing.
#[test]
fn tami_streamed_refuses_bad_sizes() {
    let shape = TamiShape::new(16, 4, 8, Flavor::Relu);
    let (a, _) = run_tee(
        move |ch, d| tami::streamed(ch, d, 0, 10, shape, Some(&[0u64; 10]), 0, false).err().map(|e| e.to_string()),
        move |_ch, _d| (),
    );
    assert!(a.unwrap().contains("empty batch or chunk"));
    let (a, _) = run_tee(
        move |ch, d| tami::streamed(ch, d, 0, 10, shape, Some(&[0u64; 9]), 4, true).err().map(|e| e.to_string()),
        move |_ch, _d| (),
    );
    assert!(a.unwrap().contains("input of 9 elements"));
}
