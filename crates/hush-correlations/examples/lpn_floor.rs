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
//! The floor of the dual-LPN codes with local structure, expand-accumulate
//! (Boyle, Couteau, Gilboa, Ishai, Kohl, Resch, Scholl, CRYPTO 2022) and
//! expand-convolute (Raghuraman, Rindal, Tanguy, CRYPTO 2023), on the same
//! CPU: their compression x = B·(C·e) of a GGM noise vector e of N = 2n
//! leaves per n outputs (rate 1/2) runs the accumulator (EA; EC's
//! convolution does at least this much) over all N leaves (`accumulate`,
//! an in-place prefix XOR over tree-sized chunks, as a fused generator
//! would run it) and then w = 7 random 16-byte reads per output from the
//! accumulated N-vector (`expander-gather-fresh`, vectors of 2 to 32 MiB: N
//! of a small batch up to a tenth of 10^7 outputs' 320 MB), with fresh
//! positions for every output; `primal-gather-fresh` is the primal set's
//! D = 10 reads from 1 MiB by the same method. With the GGM of the
//! 2n leaves (twice `ggm-expand`), this is what a party of such a code would
//! spend, to compare with the primal set's gathers + index AES + GGM
//! (docs/perf-primitives.md, "Codes with local structure on this CPU").
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

/// out[j] = XOR of W reads of `base` at indices from a cheap counter hash
/// (every output reads fresh positions: a precomputed, recycled offset table
/// would revisit the same few thousand lines, which then stay cached), for
/// ROWS outputs; `ctr` continues across calls.
fn gather_hashed<const W: usize>(base: &[Block], out: &mut [Block], ctr: &mut u64) {
    let mask = (base.len() - 1) as u64;
    let mut r = 0;
    let mut c = *ctr;
    while r < ROWS {
        for y in out.iter_mut() {
            let mut a = Block::ZERO;
            for l in 0..W as u64 {
                let x = (c + l).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                let i = (x ^ (x >> 29)) & mask;
                // SAFETY: base.len() is a power of two and i ≤ base.len() − 1.
                a ^= unsafe { *base.get_unchecked(i as usize) };
            }
            c += W as u64;
            *y = a;
        }
        r += out.len();
    }
    *ctr = c;
}

/// `L` lanes sharing one matrix: `base` holds L k-vectors interleaved
/// (lane l of column i at base[L·i + l], one 16·L-byte read per column), so
/// each of a row's D reads serves L outputs. Fresh hashed positions per row,
/// as [`gather_hashed`]; `out` receives L outputs per row.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn gather_lanes<const L: usize>(base: &[Block], out: &mut [Block], ctr: &mut u64) {
    use std::arch::x86_64::*;
    let cols = (base.len() / L) as u64;
    let mask = cols - 1;
    let mut r = 0;
    let mut c = *ctr;
    let bp = base.as_ptr() as *const u8;
    // SAFETY (loads and stores below): `cols` = base.len() / L is a power of
    // two and i ≤ cols − 1, so each read of 16·L bytes at 16·L·i lies inside
    // `base`; each store writes the L blocks of one chunk of `out`.
    while r < ROWS {
        for y in out.chunks_exact_mut(L) {
            if L == 4 {
                let mut a = _mm512_setzero_si512();
                for l in 0..D as u64 {
                    let x = (c + l).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                    let i = (x ^ (x >> 29)) & mask;
                    a = _mm512_xor_si512(a, _mm512_loadu_si512(bp.add(64 * i as usize) as *const _));
                }
                _mm512_storeu_si512(y.as_mut_ptr() as *mut _, a);
            } else {
                let mut a = _mm256_setzero_si256();
                for l in 0..D as u64 {
                    let x = (c + l).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                    let i = (x ^ (x >> 29)) & mask;
                    a = _mm256_xor_si256(a, _mm256_loadu_si256(bp.add(32 * i as usize) as *const _));
                }
                _mm256_storeu_si256(y.as_mut_ptr() as *mut _, a);
            }
            c += D as u64;
        }
        r += out.len();
    }
    *ctr = c;
}

/// Expand-accumulate's accumulator over `leaves` leaves: an in-place prefix
/// XOR of a tree-sized chunk, the running value carried from chunk to chunk.
fn accumulate(chunk: &mut [Block], leaves: usize) -> Block {
    let mut acc = Block::ZERO;
    let mut done = 0;
    while done < leaves {
        for x in chunk.iter_mut() {
            acc ^= *x;
            *x = acc;
        }
        done += chunk.len();
    }
    acc
}

/// Leaves per tree in the whole-party floor ([`LPN_B10`]'s h = 10).
const TREE: usize = 1 << 10;

/// One tree group of the whole-party floor: for each of the TREE rows, D
/// reads of 16·L bytes from the L interleaved k-vectors (the row's indices
/// from `idx`, 16-bit words), XORed with each lane's GGM leaf and stored
/// into lane l's tree at `at + l·TREE` of `out`. `nt` (L = 4 only): rows in
/// fours, regrouped per lane so that each store is one whole 64-byte line,
/// non-temporal.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2")]
unsafe fn lanes_group<const L: usize>(base: &[Block], idx: &[u16], leaves: &[Block], out: &mut [Block], at: usize, nt: bool) {
    use std::arch::x86_64::*;
    let bp = base.as_ptr() as *const u8;
    let op = out.as_mut_ptr();
    // SAFETY (all loads and stores below): every index is < 2^16 and
    // `base` holds L·2^16 blocks; `leaves` holds L·TREE blocks; the caller
    // gives `out` room for L trees at `at`, 64-byte aligned when `nt`.
    if L == 4 && nt {
        for j in (0..TREE).step_by(4) {
            let mut acc = [_mm512_setzero_si512(); 4];
            for (r, a) in acc.iter_mut().enumerate() {
                for &i in &idx[D * (j + r)..D * (j + r) + D] {
                    *a = _mm512_xor_si512(*a, _mm512_loadu_si512(bp.add(64 * i as usize) as *const _));
                }
            }
            // acc[r] lane l = row j + r of lane l; regroup to lane-major.
            let t0 = _mm512_shuffle_i64x2::<0b01_00_01_00>(acc[0], acc[1]);
            let t1 = _mm512_shuffle_i64x2::<0b11_10_11_10>(acc[0], acc[1]);
            let t2 = _mm512_shuffle_i64x2::<0b01_00_01_00>(acc[2], acc[3]);
            let t3 = _mm512_shuffle_i64x2::<0b11_10_11_10>(acc[2], acc[3]);
            let per_lane = [
                _mm512_shuffle_i64x2::<0b10_00_10_00>(t0, t2),
                _mm512_shuffle_i64x2::<0b11_01_11_01>(t0, t2),
                _mm512_shuffle_i64x2::<0b10_00_10_00>(t1, t3),
                _mm512_shuffle_i64x2::<0b11_01_11_01>(t1, t3),
            ];
            for (l, v) in per_lane.into_iter().enumerate() {
                let lf = _mm512_loadu_si512(leaves.as_ptr().add(l * TREE + j) as *const _);
                _mm512_stream_si512(op.add(at + l * TREE + j) as *mut _, _mm512_xor_si512(v, lf));
            }
        }
        return;
    }
    for j in 0..TREE {
        let o = &idx[D * j..D * j + D];
        if L == 4 {
            let mut a = _mm512_setzero_si512();
            for &i in o {
                a = _mm512_xor_si512(a, _mm512_loadu_si512(bp.add(64 * i as usize) as *const _));
            }
            let lanes: [__m128i; 4] = std::mem::transmute(a);
            for (l, v) in lanes.iter().enumerate() {
                let lf = _mm_loadu_si128(leaves.as_ptr().add(l * TREE + j) as *const __m128i);
                _mm_storeu_si128(op.add(at + l * TREE + j) as *mut __m128i, _mm_xor_si128(*v, lf));
            }
        } else {
            let mut a = _mm_setzero_si128();
            for &i in o {
                a = _mm_xor_si128(a, _mm_loadu_si128(bp.add(16 * i as usize) as *const _));
            }
            let lf = _mm_loadu_si128(leaves.as_ptr().add(j) as *const __m128i);
            _mm_storeu_si128(op.add(at + j) as *mut __m128i, _mm_xor_si128(a, lf));
        }
    }
}

/// The whole-party floor of SilentFlow per 10^7 outputs when L batches
/// share one LPN matrix (L = 1 is today's generator): for every group of L
/// trees, the GGM expansion of the L trees (`expand_box`, skipped when
/// `!ggm`), the index AES of TREE rows (AES-CTR, 16-bit words, 1.25 blocks
/// per row whatever L is), then [`lanes_group`] into a 10^7-block output.
/// L = 4 is the "one matrix for several batches" variant (the k-vectors
/// leave L2 and each 64-byte read serves four outputs). Nothing of the
/// module, no lsbs: a lower bound on what the real generator spends.
#[cfg(target_arch = "x86_64")]
fn lanes_party<const L: usize>(passes: usize, bar: &Barrier, prg: &mut Prg, nt: bool, ggm: bool) -> f64 {
    use hush_primitives::aes::Aes128;
    const OUT: usize = 10_000_000;
    let mut base = huge_blocks(L << 16);
    prg.fill_blocks(&mut base);
    let mut out = huge_blocks(OUT + (L + 4) * TREE);
    let sh = ((64 - out.as_ptr() as usize % 64) % 64) / 16;
    let mut leaves = vec![Block::ZERO; L * TREE];
    let aes = Aes128::new(prg.random_block());
    let mut ixb = vec![Block::ZERO; TREE * D / 8];
    let mut ctr = 0u64;
    bar.wait();
    best(passes, || {
        let mut at = sh;
        while at < OUT + sh {
            if ggm {
                for (l, t) in leaves.chunks_exact_mut(TREE).enumerate() {
                    t[0] = Block((at + l) as u128 * 0x9e37_79b9);
                    expand_box(t, 10);
                }
            }
            aes.ctr_blocks(5, ctr, &mut ixb);
            ctr += ixb.len() as u64;
            // The AES output read as little-endian 16-bit words, in place.
            // SAFETY: a Block is 16 plain bytes (align 16 ≥ 2); x86-64 is
            // little-endian, so word q of a block is bits 16q.. of its u128.
            let idx = unsafe { std::slice::from_raw_parts(ixb.as_ptr() as *const u16, ixb.len() * 8) };
            // SAFETY: the level is avx512 (checked by the caller); indices
            // are 16-bit (< 2^16); `out` has room for L trees past `at`,
            // and `at` − sh is a multiple of TREE, so out[at] is 64-byte
            // aligned.
            unsafe { lanes_group::<L>(&base, idx, &leaves, &mut out, at, nt) };
            at += L * TREE;
        }
        std::hint::black_box(&out);
    })
}

/// 10^7 output blocks written with 16-byte vector stores (no reads): the
/// output stream alone.
fn stores_only(passes: usize, bar: &Barrier) -> f64 {
    let mut out = huge_blocks(10_000_000);
    bar.wait();
    best(passes, || {
        for (i, y) in out.iter_mut().enumerate() {
            *y = Block(i as u128);
        }
        std::hint::black_box(&out);
    })
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
    // Expand-accumulate / expand-convolute at rate 1/2: the accumulator
    // over 2·10^6 leaves (per 10^6 outputs) and w = 7 reads per output.
    const W: usize = 7;
    let mut chunk = vec![Block::ZERO; 1 << 13];
    prg.fill_blocks(&mut chunk);
    bar.wait();
    let s = best(passes, || {
        std::hint::black_box(accumulate(&mut chunk, 2 * ROWS));
    }) * (10_000_000 / ROWS) as f64;
    lines.push(format!("{{\"part\":\"accumulate\",\"leaves\":20000000,\"chunk\":{},\"s_per_1e7\":{s:.6}}}", chunk.len()));
    // Fresh positions per output (hashed counters), for the expander at
    // N = 2^17 … 2^21 and, for comparison by the same method, the primal
    // set's D = 10 reads from its 1 MiB k-vector; each also from a 16 KiB
    // vector (L1-resident: the cost of the hash and the XORs alone).
    let mut ctr = 0u64;
    for (logn, w) in [(10u32, D), (16, D), (10, W), (17, W), (19, W), (21, W)] {
        let nn = 1usize << logn;
        let mut base = huge_blocks(nn);
        prg.fill_blocks(&mut base);
        bar.wait();
        let s = if w == D {
            best(passes, || gather_hashed::<D>(&base, &mut out, &mut ctr))
        } else {
            best(passes, || gather_hashed::<W>(&base, &mut out, &mut ctr))
        } * (10_000_000 / ROWS) as f64;
        std::hint::black_box(&out);
        let part = if w == D { "primal-gather-fresh" } else { "expander-gather-fresh" };
        lines.push(format!(
            "{{\"part\":\"{part}\",\"k\":{nn},\"k_bytes\":{},\"rows\":10000000,\"d\":{w},\"s_per_1e7\":{s:.6}}}",
            16 * nn
        ));
    }
    // One matrix for L = 2 or 4 batches at once (interleaved k-vectors of
    // 2^16 blocks each): D reads of 32 or 64 bytes per row serve L outputs.
    // Figures per 10^7 outputs.
    #[cfg(target_arch = "x86_64")]
    if hush_primitives::simd::level() == hush_primitives::simd::Level::Avx512 {
        for lanes in [2usize, 4] {
            let mut base = huge_blocks(lanes << 16);
            prg.fill_blocks(&mut base);
            let mut o = vec![Block::ZERO; SUB * lanes];
            bar.wait();
            // SAFETY: the level is avx512, so AVX-512F is present; `base`
            // holds lanes·2^16 blocks and `o` a multiple of `lanes` blocks.
            let s = best(passes, || unsafe {
                if lanes == 4 { gather_lanes::<4>(&base, &mut o, &mut ctr) } else { gather_lanes::<2>(&base, &mut o, &mut ctr) }
            }) * (10_000_000 / ROWS) as f64;
            std::hint::black_box(&o);
            lines.push(format!(
                "{{\"part\":\"lanes{lanes}-gather-fresh\",\"k\":{},\"k_bytes\":{},\"rows\":10000000,\"d\":{D},\"s_per_1e7\":{s:.6}}}",
                lanes << 16,
                16 * (lanes << 16)
            ));
        }
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
    let s = stores_only(passes, bar);
    lines.push(format!("{{\"part\":\"stores-only\",\"k\":0,\"k_bytes\":0,\"rows\":10000000,\"d\":0,\"s_per_1e7\":{s:.6}}}"));
    // The whole party, one matrix for L = 1 or 4 batches (see lanes_party).
    #[cfg(target_arch = "x86_64")]
    if hush_primitives::simd::level() == hush_primitives::simd::Level::Avx512 {
        for (l, nt, ggm, part) in [
            (1usize, false, true, "party-lanes1"),
            (4, false, true, "party-lanes4"),
            (4, true, true, "party-lanes4-nt"),
            (4, false, false, "party-lanes4-no-ggm"),
        ] {
            let s = if l == 4 {
                lanes_party::<4>(passes, bar, &mut prg, nt, ggm)
            } else {
                lanes_party::<1>(passes, bar, &mut prg, nt, ggm)
            };
            lines.push(format!(
                "{{\"part\":\"{part}\",\"k\":{},\"k_bytes\":{},\"rows\":10000000,\"d\":{D},\"s_per_1e7\":{s:.6}}}",
                l << 16,
                16 * (l << 16)
            ));
        }
    }
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
