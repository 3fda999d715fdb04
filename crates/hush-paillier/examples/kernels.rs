//! Kernel timings (tuning aid): eight-lane 4096-bit squaring,
//! multiplication and reduction, ns each.
use hush_paillier::{Integer, KeyPair};
use rand::{rngs::StdRng, SeedableRng};

fn main() {
    let reps: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20000);
    let mut rng = StdRng::seed_from_u64(7);
    let kp = KeyPair::generate(2048, &mut rng).unwrap();
    let n = kp.public().n().clone();
    let n2 = Integer::from(&n * &n);
    for _ in 0..3 {
        let [s, m, r] = hush_paillier::ifma::kernel_timings(&n2, reps).expect("IFMA");
        println!("sqr {s:.0} ns  mul {m:.0} ns  redc {r:.0} ns  (ideal at 7.45 G/s: sqr {:.0} mul {:.0} redc {:.0})", 19280.0 / 7.45, 25600.0 / 7.45, 12800.0 / 7.45);
    }
}
