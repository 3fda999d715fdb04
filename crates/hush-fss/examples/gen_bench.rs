//! Key generation throughput: one-at-a-time vs batched in chunks of 64
//! gates (as the dealer does), one core, keys dropped as they go.
//! `cargo run --release -p hush-fss --example gen_bench -- [n] [bits]`
#![allow(clippy::needless_range_loop)]

use hush_fss::{drelu_gen, drelu_gen_batch, lt_gen, lt_gen_batch, relu_gen, relu_gen_batch};
use hush_primitives::{Block, Prg};
use std::time::Instant;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let n: usize = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let bits: u32 = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(33);
    let mut vp = Prg::with_nonce(Block(1), 1);
    let r: Vec<u64> = (0..n).map(|_| vp.next_u64()).collect();
    let c: Vec<u64> = (0..n).map(|_| vp.next_u64() >> (64 - bits)).collect();
    let z = vec![0u64; n];
    let per = |t: f64| t / n as f64 * 1e9;
    if a.get(3).map(|s| s == "batch-only").unwrap_or(false) {
        // For profiling: batched DReLU only.
        let mut p = Prg::with_nonce(Block(2), 2);
        let t = Instant::now();
        let ch: usize = a.get(4).and_then(|s| s.parse().ok()).unwrap_or(1024);
        for (rc, zc) in r.chunks(ch).zip(z.chunks(ch)) {
            let (k0, k1) = drelu_gen_batch(&mut p, bits, rc, zc, 1);
            std::hint::black_box((k0, k1));
        }
        println!("drelu batch (chunks of {ch}) {:.0} ns/key-pair", per(t.elapsed().as_secs_f64()));
        return;
    }

    let mut p = Prg::with_nonce(Block(2), 2);
    let t = Instant::now();
    let mut acc = 0usize;
    for j in 0..n {
        let (k0, k1) = drelu_gen(&mut p, bits, r[j], 0, 1);
        acc += k0.party() as usize + k1.party() as usize;
    }
    let single = t.elapsed().as_secs_f64();
    let mut p = Prg::with_nonce(Block(2), 2);
    let t = Instant::now();
    for (rc, zc) in r.chunks(64).zip(z.chunks(64)) {
        let (k0, k1) = drelu_gen_batch(&mut p, bits, rc, zc, 1);
        acc += k0.len() + k1.len();
    }
    let batch = t.elapsed().as_secs_f64();
    println!("drelu(bits={bits}, out=1) n={n}: single {:.0} ns/key-pair, batch {:.0} ns/key-pair ({:.2}x)", per(single), per(batch), single / batch);

    let mut p = Prg::with_nonce(Block(2), 2);
    let t = Instant::now();
    for j in 0..n {
        let (k0, _k1) = lt_gen(&mut p, bits, r[j], c[j], 1, 1);
        acc += k0.party() as usize;
    }
    let single = t.elapsed().as_secs_f64();
    let mut p = Prg::with_nonce(Block(2), 2);
    let t = Instant::now();
    let o = vec![1u64; n];
    for ((rc, cc), oc) in r.chunks(64).zip(c.chunks(64)).zip(o.chunks(64)) {
        let (k0, _k1) = lt_gen_batch(&mut p, bits, rc, cc, oc, 1);
        acc += k0.len();
    }
    let batch = t.elapsed().as_secs_f64();
    println!("lt(bits={bits}, out=1) n={n}: single {:.0} ns/key-pair, batch {:.0} ns/key-pair ({:.2}x)", per(single), per(batch), single / batch);

    let mut p = Prg::with_nonce(Block(2), 2);
    let t = Instant::now();
    for j in 0..n {
        let (k0, _k1) = relu_gen(&mut p, bits.min(64), r[j], 0);
        acc += k0.party() as usize;
    }
    let single = t.elapsed().as_secs_f64();
    let mut p = Prg::with_nonce(Block(2), 2);
    let t = Instant::now();
    for (rc, zc) in r.chunks(64).zip(z.chunks(64)) {
        let (k0, _k1) = relu_gen_batch(&mut p, bits.min(64), rc, zc);
        acc += k0.len();
    }
    let batch = t.elapsed().as_secs_f64();
    println!("relu(bits={bits}) n={n}: single {:.0} ns/key-pair, batch {:.0} ns/key-pair ({:.2}x)", per(single), per(batch), single / batch);
    std::hint::black_box(acc);
}
