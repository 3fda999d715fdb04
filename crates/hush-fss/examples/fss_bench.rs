//! One-core throughput of batched FSS evaluation (one party).
//!
//! `cargo run --release -p hush-fss --example fss_bench -- [n] [bits] [gate] [reps]`
//! (defaults n = 200000, bits = 32, every gate, best of 5).

use hush_fss::bench::{bench_kind, BenchKind};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let bits: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(32);
    let only = args.next();
    let reps: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    println!("aes backend: {}", hush_primitives::aes::backend().name());
    // Reference point on this (possibly shared) core: fixed-key AES rate.
    let mut blocks = vec![hush_primitives::Block(7); 1 << 14];
    let mut best = f64::INFINITY;
    for _ in 0..200 {
        let t = std::time::Instant::now();
        hush_fss::ggm::pi().encrypt_blocks(&mut blocks);
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!("fixed-key AES: {:.2} G blocks/s", blocks.len() as f64 / best / 1e9);
    println!("{:<16} {:>10} {:>12} {:>14} {:>10}", "gate", "key bytes", "eval ms", "keys/s", "gen ms");
    for kind in BenchKind::ALL {
        if only.as_deref().is_some_and(|o| o != "all" && !kind.name().starts_with(o)) {
            continue;
        }
        let r = bench_kind(kind, n, bits, reps);
        println!(
            "{:<16} {:>10} {:>12.2} {:>14.3e} {:>10.1}",
            kind.name(),
            r.key_bytes,
            r.eval_secs * 1e3,
            r.keys_per_sec(),
            r.gen_secs * 1e3
        );
    }
}
