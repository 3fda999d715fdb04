use hush_paillier::*;
use rand::{Rng, SeedableRng};
use rug::Integer;
use std::time::Instant;
fn main() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let kp = KeyPair::generate(2048, &mut rng).unwrap();
    let pk = kp.public();
    let cts: Vec<_> = (0..8).map(|i| pk.encrypt_i64(i as i64, &mut rng)).collect();
    let ctx = ifma::MontCtx::new(pk.n2()).unwrap();
    let b: Vec<&Integer> = cts.iter().map(|c| c.as_integer()).collect();
    let k = 1000u32;
    let (mut sq, mut ce) = (f64::MAX, f64::MAX);
    let lanes: Vec<Vec<(&Integer, u64)>> = (0..8).map(|i| vec![(b[i], rng.gen::<u64>() >> 1 | 1 << 62)]).collect();
    for _ in 0..40 {
        let t = Instant::now();
        std::hint::black_box(ctx.pow8(&b, &(Integer::from(1) << k)));
        sq = sq.min(t.elapsed().as_secs_f64() / k as f64);
        let t3 = Instant::now();
        for _ in 0..10 { std::hint::black_box(ctx.multi_exp8(&lanes)); }
        ce = ce.min(t3.elapsed().as_secs_f64() / 80.0);
    }
    println!("min: montsqr x8 {:.3} us, ct*pt 63-bit {:.2} us/op", sq * 1e6, ce * 1e6);
}
