//! Tuning aid: batched 64-bit ct·pt mod n² (2048-bit n), the two-digit
//! kernel (`ifma::n2`) in both schedules beside Montgomery mod n²
//! (`MontCtx::multi_exp8`), interleaved; CPU µs per operation, min of the rounds.
use hush_paillier::{ifma, Integer, KeyPair};
use rand::{rngs::StdRng, Rng, SeedableRng};

/// CPU time of this thread (ns on the CPU from /proc/thread-self/schedstat):
/// the figures stay meaningful while other processes load the machine.
struct Instant(u64);
impl Instant {
    fn now() -> Instant {
        let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
        Instant(s.split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(0))
    }
    fn elapsed(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(Instant::now().0 - self.0)
    }
}

fn main() {
    let reps: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(100);
    // `only`: the two-digit kernel in the Zen 4 schedule alone (for perf)
    let only = std::env::args().nth(2).is_some_and(|s| s == "only");
    let mut rng = StdRng::seed_from_u64(7);
    let kp = KeyPair::generate(2048, &mut rng).unwrap();
    let n = kp.public().n().clone();
    let n2 = Integer::from(&n * &n);
    let cts: Vec<Integer> = (0..8).map(|_| kp.encrypt(&Integer::from(rng.gen::<u64>()), &mut rng).unwrap().as_integer().clone()).collect();
    let ks: Vec<u64> = (0..8).map(|_| rng.gen::<u64>() | 1 << 63).collect();
    let (Some(mont), Some(two)) = (ifma::MontCtx::new(&n2), ifma::n2::N2Ctx::new(&n)) else {
        eprintln!("no IFMA");
        return;
    };
    let bases: Vec<&Integer> = cts.iter().collect();
    let lanes: Vec<Vec<(&Integer, u64)>> = cts.iter().zip(&ks).map(|(c, &k)| vec![(c, k)]).collect();
    let (mut a, mut b, mut c) = (f64::MAX, f64::MAX, f64::MAX);
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..if only { 0 } else { reps } {
            std::hint::black_box(mont.multi_exp8(&lanes));
        }
        a = a.min(t.elapsed().as_secs_f64() * 1e6 / (8 * reps) as f64);
        let t = Instant::now();
        for _ in 0..if only { 0 } else { reps } {
            std::hint::black_box(two.pow_u64_8_with(&bases, &ks, false));
        }
        b = b.min(t.elapsed().as_secs_f64() * 1e6 / (8 * reps) as f64);
        let t = Instant::now();
        for _ in 0..reps {
            std::hint::black_box(two.pow_u64_8_with(&bases, &ks, true));
        }
        c = c.min(t.elapsed().as_secs_f64() * 1e6 / (8 * reps) as f64);
    }
    println!("mod n² Montgomery {a:.2} us/op   two-digit, Intel schedule {b:.2} us/op   Zen 4 schedule {c:.2} us/op (this CPU: {})", if ifma::n2::zen_schedule() { "zen" } else { "intel" });
}
