//! Profiling loop: batched 64-bit ct·pt (`PublicKey::mul_u64_batch`) on a
//! 2048-bit key, N batches of eight; prints µs/op.
use hush_paillier::{Integer, KeyPair};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::time::Instant;

fn main() {
    let reps: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let mut rng = StdRng::seed_from_u64(7);
    let kp = KeyPair::generate(2048, &mut rng).unwrap();
    let pk = kp.public().clone();
    let cts: Vec<_> = (0..8)
        .map(|_| {
            kp.encrypt(&Integer::from(rng.gen::<u64>()), &mut rng)
                .unwrap()
        })
        .collect();
    let ks: Vec<u64> = (0..8).map(|_| rng.gen::<u64>() | 1 << 63).collect();
    let pairs: Vec<_> = cts.iter().zip(&ks).map(|(c, &k)| (c, k)).collect();
    let t = Instant::now();
    for _ in 0..reps {
        std::hint::black_box(pk.mul_u64_batch(&pairs));
    }
    println!(
        "{:.2} us/op",
        t.elapsed().as_secs_f64() * 1e6 / (8 * reps) as f64
    );
}
