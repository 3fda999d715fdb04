//! `hush bench aes`: fixed-key AES-128 throughput on one core.

use crate::Record;
use hush_primitives::{aes, Block};
use std::time::Instant;

/// Encrypts a buffer of `batch` blocks in place, repeatedly, for about
/// `seconds`, on the calling thread (one core).
pub fn bench_aes(batch: usize, seconds: f64) -> Record {
    let a = aes::fixed_key();
    let mut buf: Vec<Block> = (0..batch as u128).map(Block).collect();
    // Warm up.
    a.encrypt_blocks(&mut buf);
    let t = Instant::now();
    let mut blocks = 0u64;
    while t.elapsed().as_secs_f64() < seconds {
        for _ in 0..16 {
            a.encrypt_blocks(&mut buf);
        }
        blocks += 16 * batch as u64;
    }
    let wall = t.elapsed().as_secs_f64();
    std::hint::black_box(&buf);
    let mut r = Record::new("aes");
    r.set("backend", aes::backend().name())
        .set("wall_s", wall)
        .set("setup_s", 0.0)
        .set("bytes", 0)
        .set("rounds", 0)
        .set("blocks", blocks)
        .set("batch", batch as u64)
        .set("blocks_per_s", blocks as f64 / wall)
        .set("cores", 1)
        .set("machine", "one thread on this machine");
    r
}
