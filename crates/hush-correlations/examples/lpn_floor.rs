//! The memory floor of SilentFlow's LPN step on this CPU (issue 34's
//! "SilentFlow ≤ 0.5× emp-ot IKNP"): how long 10^7 rows of D = 10 random
//! 16-byte reads take when nothing else is done — no index AES, no GGM, no
//! output stores beyond an L1-resident buffer — against the size of the
//! k-vector they are read from. Offsets are precomputed for SUB rows and
//! reused (L1-resident, as the real kernel's are), so only the reads of the
//! k-vector differ between sizes.
//!
//! Beside it: the index generation alone (the AES-CTR offsets of 10^7
//! rows), the real product (`LpnMatrix::mul`, index AES included, one
//! tree's 2^h rows at a time as the fused generator runs it) at
//! k = 2^16 ([`LPN_B10`]) and the GGM expansion of 10^7 leaves
//! (`expand_box`), each the best of `passes` passes of 10^6 rows, scaled to
//! 10^7. One JSON line per measurement on stdout (`scripts/record_iknp_emp.py
//! --floor` stamps and records them).
//!
//! `cargo run --release -p hush-correlations --example lpn_floor [threads] [passes]`
//! (`threads` = 2 runs the same on both cores at once, as the two parties of
//! `hush bench cot` do; thread 0's figures are printed).
use hush_correlations::ggm::expand_box;
use hush_correlations::lpn::{huge_blocks, LpnMatrix, D, LPN_B10, SUB};
use hush_primitives::{Block, Prg};
use std::sync::{Arc, Barrier};
use std::time::Instant;

const ROWS: usize = 1_000_000;

/// Best wall time of `passes` runs of `f`, seconds.
fn best(passes: usize, mut f: impl FnMut()) -> f64 {
    (0..passes)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// out[j] = XOR_l base[idx[10j + l]] for ROWS rows, cycling through the
/// SUB rows of `idx`.
fn gather(base: &[Block], idx: &[u32], out: &mut [Block]) {
    let mask = base.len() - 1;
    let mut r = 0;
    while r < ROWS {
        for (j, y) in out.iter_mut().enumerate() {
            let row = &idx[D * j..D * j + D];
            let mut a = Block::ZERO;
            for &o in row {
                // SAFETY: base.len() is a power of two and the index is
                // masked by base.len() − 1.
                a ^= unsafe { *base.get_unchecked(o as usize & mask) };
            }
            *y = a;
        }
        r += out.len();
    }
}

fn party(id: usize, passes: usize, bar: &Barrier) -> Vec<String> {
    let mut lines = Vec::new();
    let mut out = vec![Block::ZERO; SUB];
    let mut prg = Prg::new(Block(7 + id as u128));
    for logk in [10u32, 12, 14, 15, 16, 17, 18] {
        let k = 1usize << logk;
        let mut base = huge_blocks(k);
        prg.fill_blocks(&mut base);
        let mut words = vec![Block::ZERO; SUB * D / 4];
        prg.fill_blocks(&mut words);
        let idx: Vec<u32> = words.iter().flat_map(|b| (0..4).map(move |q| (b.0 >> (32 * q)) as u32)).collect();
        bar.wait();
        let s = best(passes, || gather(&base, &idx, &mut out)) * (10_000_000 / ROWS) as f64;
        std::hint::black_box(&out);
        lines.push(format!(
            "{{\"part\":\"gather-only\",\"k\":{k},\"k_bytes\":{},\"rows\":10000000,\"d\":{D},\"s_per_1e7\":{s:.6}}}",
            16 * k
        ));
    }
    // The real product at LPN_B10's k, index AES included.
    let p = LPN_B10;
    let mut base = huge_blocks(p.k);
    prg.fill_blocks(&mut base);
    let m = LpnMatrix::new(id as u64, p.k);
    // Into one tree's buffer, as the fused generator does.
    let mut rows = vec![Block::ZERO; p.leaves()];
    let trees = ROWS / p.leaves();
    bar.wait();
    let s = best(passes, || {
        for i in 0..trees {
            m.mul(&base, i * p.leaves(), &mut rows);
        }
    }) * 10_000_000.0
        / (trees * p.leaves()) as f64;
    lines.push(format!(
        "{{\"part\":\"lpn-mul\",\"k\":{},\"k_bytes\":{},\"rows\":10000000,\"d\":{D},\"s_per_1e7\":{s:.6}}}",
        p.k,
        16 * p.k
    ));
    // The index generation alone (SUB rows of offsets per call, as the
    // product's first chunk is made).
    let mut offs = vec![0u32; SUB * D];
    bar.wait();
    let s = best(passes, || {
        let mut r = 0;
        while r < ROWS {
            m.offsets_for_bench(r, &mut offs);
            r += SUB;
        }
    }) * 10_000_000.0
        / ROWS.next_multiple_of(SUB) as f64;
    std::hint::black_box(&offs);
    lines.push(format!("{{\"part\":\"index-aes\",\"k\":{},\"k_bytes\":{},\"rows\":10000000,\"d\":{D},\"s_per_1e7\":{s:.6}}}", p.k, 16 * p.k));
    // GGM expansion (the sender's share of AES work per leaf).
    let mut tree = vec![Block::ZERO; p.leaves()];
    bar.wait();
    let s = best(passes, || {
        for i in 0..trees {
            tree[0] = Block(i as u128);
            expand_box(&mut tree, p.h);
        }
    }) * 10_000_000.0
        / (trees * p.leaves()) as f64;
    std::hint::black_box(&tree);
    lines.push(format!("{{\"part\":\"ggm-expand\",\"h\":{},\"leaves\":10000000,\"s_per_1e7\":{s:.6}}}", p.h));
    lines
}

fn main() {
    let threads: usize = std::env::args().nth(1).and_then(|x| x.parse().ok()).unwrap_or(1).clamp(1, 2);
    let passes: usize = std::env::args().nth(2).and_then(|x| x.parse().ok()).unwrap_or(15).max(1);
    let bar = Arc::new(Barrier::new(threads));
    let hs: Vec<_> = (0..threads)
        .map(|id| {
            let bar = bar.clone();
            std::thread::spawn(move || {
                // Pin thread i to cpu i (as the bench pins its parties).
                // SAFETY: a zeroed cpu_set_t is valid; CPU_SET on an index < CPU_SETSIZE.
                unsafe {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(id, &mut set);
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                }
                party(id, passes, &bar)
            })
        })
        .collect();
    let mut all: Vec<Vec<String>> = hs.into_iter().map(|h| h.join().expect("party thread")).collect();
    let level = hush_primitives::simd::level();
    for l in all.swap_remove(0) {
        println!("{},\"threads\":{threads},\"passes\":{passes},\"simd\":\"{}\"}}", &l[..l.len() - 1], level.name());
    }
}
