//! Per-party CPU-time breakdown of one FERRET_MAIN batch (diagnostics for
//! the COT benchmarks; thread CPU time, so other load on the machine
//! inflates it less than wall time).
//!
//! `cargo run --release -p hush-correlations --example cot_parts [threads]`
//! runs the kernels on `threads` threads at once (2 = both parties).
use hush_correlations::ggm::expand_box;
use hush_correlations::lpn::{huge_blocks, LpnMatrix, FERRET_MAIN, LPN_B10};
use hush_primitives::{Block, Prg};
use std::time::Instant;

fn cpu() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

fn timed(name: &str, id: usize, f: impl FnOnce()) {
    let (c, w) = (cpu(), Instant::now());
    f();
    println!("[{id}] {name:<28} cpu {:.4}s wall {:.4}s", cpu() - c, w.elapsed().as_secs_f64());
}

fn party(id: usize) {
    let p = if std::env::var("SET").as_deref() == Ok("b10") { LPN_B10 } else { FERRET_MAIN };
    // Rows per timed pass: 10^7 (rounded to whole trees).
    let reps = 10_000_000usize.div_ceil(p.n);
    let mut base = huge_blocks(p.k);
    Prg::new(Block(1 + id as u128)).fill_blocks(&mut base);
    let m = LpnMatrix::new(id as u64, p.k);
    let mut out = huge_blocks(p.n);
    for rep in 0..2 {
        println!("[{id}] rep {rep}");
        timed("lpn mul (10^7 rows)", id, || {
            for _ in 0..reps {
                for (i, c) in out.chunks_mut(1 << 16).enumerate() {
                    m.mul(&base, i << 16, c);
                }
            }
        });
        timed("ggm expand_box (10^7 leaves)", id, || {
            for _ in 0..reps {
                for (i, tree) in out.chunks_mut(p.leaves()).enumerate() {
                    tree[0] = Block(i as u128);
                    expand_box(tree, p.h);
                }
            }
        });
        timed("per tree ggm then lpn", id, || {
            for _ in 0..reps {
                for (i, tree) in out.chunks_mut(p.leaves()).enumerate() {
                    tree[0] = Block(i as u128);
                    expand_box(tree, p.h);
                    m.mul_xor(&base, i * p.leaves(), tree);
                }
            }
        });
        for kk in [1024usize, 16_384, 65_536, 262_144, 1 << 20] {
            let mb = huge_blocks(kk);
            let mm = LpnMatrix::new(id as u64, kk);
            timed(&format!("lpn mul k={kk}"), id, || {
                for (i, c) in out.chunks_mut(1 << 16).enumerate() {
                    mm.mul(&mb, i << 16, c);
                }
            });
        }
        for kk in [1024usize, p.k] {
            let mb = huge_blocks(kk);
            let mm = LpnMatrix::new(id as u64, kk);
            let mut tree = vec![Block::ZERO; p.leaves()];
            timed(&format!("lpn mul k={kk} into 1 tree buf"), id, || {
                for i in 0..p.t {
                    mm.mul(&mb, i * p.leaves(), &mut tree);
                }
            });
            std::hint::black_box(&tree);
        }
        let mut offs = vec![0u32; 10 * hush_correlations::lpn::SUB];
        timed("lpn index generation only", id, || {
            let mut acc = 0u32;
            let mut r = 0;
            while r < p.n {
                m.offsets_for_bench(r, &mut offs);
                acc ^= offs[7];
                r += hush_correlations::lpn::SUB;
            }
            std::hint::black_box(acc);
        });
    }
}

fn main() {
    let threads: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1);
    std::thread::scope(|s| {
        for id in 0..threads {
            s.spawn(move || party(id));
        }
    });
}
