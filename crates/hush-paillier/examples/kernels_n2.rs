//! Kernel timings (tuning aid): eight-lane squaring and multiplication mod
//! n² (2048-bit n) in Montgomery mod n² and in two digits (`ifma::n2`), ns.
use hush_paillier::{ifma, Integer, KeyPair};
use rand::{rngs::StdRng, SeedableRng};

fn main() {
    let reps: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(20000);
    let mut rng = StdRng::seed_from_u64(7);
    let kp = KeyPair::generate(2048, &mut rng).unwrap();
    let n = kp.public().n().clone();
    let n2 = Integer::from(&n * &n);
    for _ in 0..3 {
        let [s, m, r] = ifma::kernel_timings(&n2, reps).expect("IFMA");
        let [s2, m2, r2] = ifma::n2::kernel_timings_with(&n, reps, false).expect("IFMA");
        let [s3, m3, r3] = ifma::n2::kernel_timings_with(&n, reps, true).expect("IFMA");
        println!("mod n²: sqr {s:.0} mul {m:.0} redc {r:.0} ns | two-digit, Intel schedule: sqr {s2:.0} mul {m2:.0} ns, k-limb redc {r2:.0} ns | Zen 4 schedule: sqr {s3:.0} mul {m3:.0} redc {r3:.0} ns");
    }
}
