//! Matrix products over Z_2^64: the one kernel behind every ring matrix
//! product (dealt matrix triples, the module-dealt linear layers, the
//! one-sided weight products of dealer mode).
//!
//! `out = a · b` with `a` m×k and `b` k×n, row-major, arithmetic wrapping
//! mod 2^64 (a caller working in Z_2^ℓ reduces the result; the product
//! mod 2^64 reduces correctly to any ℓ ≤ 64).
//!
//! **Kernel.** The classic register-blocked scheme (Goto and van de Geijn,
//! "Anatomy of high-performance matrix multiplication", TOMS 2008): `b`
//! is packed in panels of [`NR`] columns, and an [`MR`]×[`NR`] block of
//! `out` is accumulated in registers over the whole inner dimension, so
//! that each step is [`MR`] broadcasts, [`NR`]/8 panel loads and
//! [`MR`]·[`NR`] multiply-adds. The same Rust code is compiled three
//! times: with AVX-512 F+DQ (64-bit `vpmullq`), with AVX2 (the compiler's
//! three-`vpmuludq` 64-bit product) and portable; [`crate::simd::level`]
//! picks one at the call. All three compute the same wrapping sums, so
//! their outputs are identical bit for bit (tested).
//!
//! **Threads.** Products of at least [`PAR_MACS`] multiply-adds split
//! their rows over rayon's pool (each worker packs the panels it needs);
//! smaller ones run on the calling thread.

use crate::simd::{level, Level};
use rayon::prelude::*;

/// Rows of `out` per register block.
pub const MR: usize = 4;
/// Columns of `out` per register block (two 8-lane vectors).
pub const NR: usize = 16;
/// Products smaller than this many multiply-adds stay on one thread.
pub const PAR_MACS: usize = 1 << 22;

/// `out = a · b` over Z_2^64 (`a` m×k, `b` k×n, `out` m×n, row-major).
///
/// # Panics
/// If a buffer's length is not its dimensions' product (a caller bug).
pub fn gemm(a: &[u64], b: &[u64], m: usize, k: usize, n: usize, out: &mut [u64]) {
    assert_eq!(a.len(), m * k, "gemm: a is not m×k");
    assert_eq!(b.len(), k * n, "gemm: b is not k×n");
    assert_eq!(out.len(), m * n, "gemm: out is not m×n");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        out.fill(0);
        return;
    }
    let lv = level();
    if m * k * n >= PAR_MACS && m >= 2 * MR {
        let threads = rayon::current_num_threads().max(1);
        let rows = m.div_ceil(threads).div_ceil(MR) * MR;
        out.par_chunks_mut(rows * n).enumerate().for_each(|(c, o)| {
            let r0 = c * rows;
            let mr = o.len() / n;
            dispatch(lv, &a[r0 * k..(r0 + mr) * k], b, mr, k, n, o);
        });
    } else {
        dispatch(lv, a, b, m, k, n, out);
    }
}

/// The product at a given SIMD level (tests compare the levels).
pub fn gemm_at(lv: Level, a: &[u64], b: &[u64], m: usize, k: usize, n: usize, out: &mut [u64]) {
    assert!(lv.supported(), "gemm_at: level not supported here");
    assert_eq!((a.len(), b.len(), out.len()), (m * k, k * n, m * n), "gemm_at: buffer lengths");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        out.fill(0);
        return;
    }
    dispatch(lv, a, b, m, k, n, out);
}

fn dispatch(lv: Level, a: &[u64], b: &[u64], m: usize, k: usize, n: usize, out: &mut [u64]) {
    #[cfg(target_arch = "x86_64")]
    {
        if lv >= Level::Avx512 && std::arch::is_x86_feature_detected!("avx512dq") {
            // SAFETY: the level and the detected features say the CPU has AVX-512 F and DQ.
            unsafe { gemm_avx512(a, b, m, k, n, out) };
            return;
        }
        if lv >= Level::Avx2 {
            // SAFETY: level() ≥ Avx2 only when the CPU has AVX2.
            unsafe { gemm_avx2(a, b, m, k, n, out) };
            return;
        }
    }
    let _ = lv;
    gemm_generic(a, b, m, k, n, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx2")]
unsafe fn gemm_avx512(a: &[u64], b: &[u64], m: usize, k: usize, n: usize, out: &mut [u64]) {
    gemm_generic(a, b, m, k, n, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn gemm_avx2(a: &[u64], b: &[u64], m: usize, k: usize, n: usize, out: &mut [u64]) {
    gemm_generic(a, b, m, k, n, out)
}

#[inline(always)]
fn gemm_generic(a: &[u64], b: &[u64], m: usize, k: usize, n: usize, out: &mut [u64]) {
    let mut panel = vec![0u64; k * NR];
    for j0 in (0..n).step_by(NR) {
        let w = NR.min(n - j0);
        // pack columns j0..j0+w of b, zero-padded to NR
        for t in 0..k {
            let dst = &mut panel[t * NR..(t + 1) * NR];
            dst[..w].copy_from_slice(&b[t * n + j0..t * n + j0 + w]);
            dst[w..].fill(0);
        }
        let mut i = 0;
        while i + MR <= m {
            block::<MR>(a, &panel, k, i, &mut |r, acc| out[(i + r) * n + j0..(i + r) * n + j0 + w].copy_from_slice(&acc[..w]));
            i += MR;
        }
        while i < m {
            block::<1>(a, &panel, k, i, &mut |_, acc| out[i * n + j0..i * n + j0 + w].copy_from_slice(&acc[..w]));
            i += 1;
        }
    }
}

/// R rows starting at `i` against one packed panel; `store(r, row)` takes
/// the accumulated row r.
#[inline(always)]
fn block<const R: usize>(a: &[u64], panel: &[u64], k: usize, i: usize, store: &mut impl FnMut(usize, &[u64; NR])) {
    let mut acc = [[0u64; NR]; R];
    let rows: [&[u64]; R] = std::array::from_fn(|r| &a[(i + r) * k..(i + r + 1) * k]);
    for (t, p) in panel.chunks_exact(NR).enumerate() {
        let p: &[u64; NR] = p.try_into().expect("NR");
        for r in 0..R {
            let av = rows[r][t];
            for c in 0..NR {
                acc[r][c] = acc[r][c].wrapping_add(av.wrapping_mul(p[c]));
            }
        }
    }
    for (r, row) in acc.iter().enumerate() {
        store(r, row);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[u64], b: &[u64], m: usize, k: usize, n: usize) -> Vec<u64> {
        let mut o = vec![0u64; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut s = 0u64;
                for t in 0..k {
                    s = s.wrapping_add(a[i * k + t].wrapping_mul(b[t * n + j]));
                }
                o[i * n + j] = s;
            }
        }
        o
    }

    fn rnd(n: usize, seed: &mut u64) -> Vec<u64> {
        (0..n)
            .map(|_| {
                *seed ^= *seed << 13;
                *seed ^= *seed >> 7;
                *seed ^= *seed << 17;
                *seed
            })
            .collect()
    }

    #[test]
    fn every_level_matches_the_naive_product_on_ragged_shapes() {
        let mut s = 0x1234_5678_9abc_def1u64;
        for &(m, k, n) in &[(1, 1, 1), (3, 5, 7), (4, 16, 16), (5, 17, 33), (9, 64, 15), (13, 3, 40), (2, 0, 3), (0, 4, 4)] {
            let a = rnd(m * k, &mut s);
            let b = rnd(k * n, &mut s);
            let want = naive(&a, &b, m, k, n);
            for lv in Level::ALL.into_iter().filter(|l| l.supported()) {
                let mut o = vec![7u64; m * n];
                gemm_at(lv, &a, &b, m, k, n, &mut o);
                assert_eq!(o, want, "level {} at {m}×{k}×{n}", lv.name());
            }
            let mut o = vec![7u64; m * n];
            gemm(&a, &b, m, k, n, &mut o);
            assert_eq!(o, want);
        }
    }

    #[test]
    fn the_threaded_split_matches_the_naive_product() {
        let mut s = 99u64;
        let (m, k, n) = (70, 300, 211); // ≥ PAR_MACS, rows not a multiple of the split
        assert!(m * k * n >= PAR_MACS);
        let a = rnd(m * k, &mut s);
        let b = rnd(k * n, &mut s);
        let mut o = vec![0u64; m * n];
        gemm(&a, &b, m, k, n, &mut o);
        assert_eq!(o, naive(&a, &b, m, k, n));
    }
}
