//! Bit-matrix transposition (the IKNP matrix flip).
//!
//! `input` holds `nrows` rows of `ncols` bits, row-major, each row
//! `ncols/8` bytes with bit c of a row in byte c/8 at position c%8; the
//! output holds `ncols` rows of `nrows` bits in the same layout. On x86-64
//! the kernel gathers one byte from each of 16 rows into a vector and peels
//! off one output row-fragment per bit with `pmovmskb` (8 per gather).
//!
//! Per [`crate::simd::level`]: avx512 — 16 rows × 64 bytes per tile
//! (AVX-512BW), then 16 × 16 (SSE2) and 16 × 1 tails; avx2 — 16 × 32 tiles
//! (AVX2), same tails; portable — 8 × 8 bit blocks transposed in a `u64`
//! with three delta swaps (no intrinsics).

use crate::simd::{self, Level};

/// Transposes a `nrows × ncols` bit matrix. Requires `nrows % 16 == 0` and
/// `ncols % 8 == 0`.
pub fn transpose(input: &[u8], nrows: usize, ncols: usize, out: &mut [u8]) {
    assert!(nrows % 16 == 0 && ncols % 8 == 0, "transpose needs nrows%16==0 and ncols%8==0");
    assert_eq!(input.len(), nrows * ncols / 8);
    assert_eq!(out.len(), nrows * ncols / 8);
    let l = simd::level();
    #[cfg(target_arch = "x86_64")]
    if l >= Level::Avx2 {
        // SAFETY: level ≥ avx2 was detected (avx512 includes avx512f/bw);
        // every index stays within the asserted sizes.
        unsafe { transpose_x86(input, nrows, ncols, out, l == Level::Avx512) };
        return;
    }
    let _ = l;
    transpose_scalar(input, nrows, ncols, out)
}

/// The portable kernel: 8 × 8 bit blocks, each gathered into a `u64` (byte
/// i = row i), transposed with three delta swaps (bit 8i + b ↔ bit 8b + i)
/// and scattered (byte b = output row b).
pub fn transpose_scalar(input: &[u8], nrows: usize, ncols: usize, out: &mut [u8]) {
    assert!(nrows % 8 == 0 && ncols % 8 == 0);
    assert_eq!(input.len(), nrows * ncols / 8);
    assert_eq!(out.len(), nrows * ncols / 8);
    let ib = ncols / 8;
    let ob = nrows / 8;
    for j in 0..ib {
        for rb in 0..ob {
            let mut x = 0u64;
            for i in 0..8 {
                x |= (input[(8 * rb + i) * ib + j] as u64) << (8 * i);
            }
            let t = (x ^ (x >> 7)) & 0x00aa_00aa_00aa_00aa;
            x ^= t ^ (t << 7);
            let t = (x ^ (x >> 14)) & 0x0000_cccc_0000_cccc;
            x ^= t ^ (t << 14);
            let t = (x ^ (x >> 28)) & 0x0000_0000_f0f0_f0f0;
            x ^= t ^ (t << 28);
            for b in 0..8 {
                out[(8 * j + b) * ob + rb] = (x >> (8 * b)) as u8;
            }
        }
    }
}

/// Bit-by-bit reference.
pub fn transpose_portable(input: &[u8], nrows: usize, ncols: usize, out: &mut [u8]) {
    let ib = ncols / 8;
    let ob = nrows / 8;
    out.fill(0);
    for r in 0..nrows {
        for c in 0..ncols {
            let bit = (input[r * ib + c / 8] >> (c % 8)) & 1;
            out[c * ob + r / 8] |= bit << (r % 8);
        }
    }
}

/// # Safety
/// The CPU has AVX2, and AVX-512 F + BW when `wide`.
#[cfg(target_arch = "x86_64")]
unsafe fn transpose_x86(input: &[u8], nrows: usize, ncols: usize, out: &mut [u8], wide: bool) {
    let ib = ncols / 8;
    let ip = input.as_ptr();
    let op = out.as_mut_ptr();
    // Column blocks outermost: a block's input (nrows × 64 bytes) and its
    // output (512 rows × nrows/8 bytes) stay in L1 while all row groups pass.
    let mut j = 0;
    while j < ib {
        let w = if wide && j + 64 <= ib {
            64
        } else if j + 32 <= ib {
            32
        } else if j + 16 <= ib {
            16
        } else {
            1
        };
        let mut r = 0;
        while r < nrows {
            match w {
                64 => x86::tile_16x64(ip, ib, nrows, r, j, op),
                32 => x86::tile_16x32(ip, ib, nrows, r, j, op),
                16 => x86::tile_16x16(ip, ib, nrows, r, j, op),
                _ => x86::tile_16x1(ip, ib, nrows, r, j, op),
            }
            r += 16;
        }
        j += w;
    }
}

/// Kernels for 16 input rows × w bytes. The 16×16 byte transpose inside
/// each 128-bit lane is four rounds of the same `punpck{l,h}bw` network
/// (each round rotates the 8-bit (register, byte) index left by one, so four
/// rounds swap row and column); then `pmovmskb` peels off one bit of every
/// byte per step: output row 8c+b receives 16 bits (rows r..r+16).
#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    #[inline(always)]
    unsafe fn store16(op: *mut u8, nrows: usize, col: usize, r: usize, m: u16) {
        let dst = op.add(col * (nrows / 8) + r / 8) as *mut [u8; 2];
        *dst = m.to_le_bytes();
    }

    #[target_feature(enable = "sse2")]
    pub(super) unsafe fn tile_16x1(ip: *const u8, ib: usize, nrows: usize, r: usize, j: usize, op: *mut u8) {
        let v = _mm_set_epi8(
            *ip.add((r + 15) * ib + j) as i8, *ip.add((r + 14) * ib + j) as i8,
            *ip.add((r + 13) * ib + j) as i8, *ip.add((r + 12) * ib + j) as i8,
            *ip.add((r + 11) * ib + j) as i8, *ip.add((r + 10) * ib + j) as i8,
            *ip.add((r + 9) * ib + j) as i8, *ip.add((r + 8) * ib + j) as i8,
            *ip.add((r + 7) * ib + j) as i8, *ip.add((r + 6) * ib + j) as i8,
            *ip.add((r + 5) * ib + j) as i8, *ip.add((r + 4) * ib + j) as i8,
            *ip.add((r + 3) * ib + j) as i8, *ip.add((r + 2) * ib + j) as i8,
            *ip.add((r + 1) * ib + j) as i8, *ip.add(r * ib + j) as i8,
        );
        let mut v = v;
        for b in (0..8).rev() {
            store16(op, nrows, 8 * j + b, r, _mm_movemask_epi8(v) as u16);
            v = _mm_slli_epi64(v, 1);
        }
    }

    #[target_feature(enable = "sse2")]
    pub(super) unsafe fn tile_16x16(ip: *const u8, ib: usize, nrows: usize, r: usize, j: usize, op: *mut u8) {
        let mut x = [_mm_setzero_si128(); 16];
        for k in 0..16 {
            x[k] = _mm_loadu_si128(ip.add((r + k) * ib + j) as *const __m128i);
        }
        for _ in 0..4 {
            let mut y = [_mm_setzero_si128(); 16];
            for i in 0..8 {
                y[2 * i] = _mm_unpacklo_epi8(x[i], x[i + 8]);
                y[2 * i + 1] = _mm_unpackhi_epi8(x[i], x[i + 8]);
            }
            x = y;
        }
        for c in 0..16 {
            let mut v = x[c];
            for b in (0..8).rev() {
                store16(op, nrows, 8 * (j + c) + b, r, _mm_movemask_epi8(v) as u16);
                v = _mm_slli_epi64(v, 1);
            }
        }
    }

    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn tile_16x32(ip: *const u8, ib: usize, nrows: usize, r: usize, j: usize, op: *mut u8) {
        let mut x = [_mm256_setzero_si256(); 16];
        for k in 0..16 {
            x[k] = _mm256_loadu_si256(ip.add((r + k) * ib + j) as *const __m256i);
        }
        for _ in 0..4 {
            let mut y = [_mm256_setzero_si256(); 16];
            for i in 0..8 {
                y[2 * i] = _mm256_unpacklo_epi8(x[i], x[i + 8]);
                y[2 * i + 1] = _mm256_unpackhi_epi8(x[i], x[i + 8]);
            }
            x = y;
        }
        // Register c now holds, in 128-bit lane L, byte j+16L+c of the 16 rows.
        for c in 0..16 {
            let mut v = x[c];
            for b in (0..8).rev() {
                let m = _mm256_movemask_epi8(v) as u32;
                store16(op, nrows, 8 * (j + c) + b, r, m as u16);
                store16(op, nrows, 8 * (j + 16 + c) + b, r, (m >> 16) as u16);
                v = _mm256_slli_epi64(v, 1);
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn tile_16x64(ip: *const u8, ib: usize, nrows: usize, r: usize, j: usize, op: *mut u8) {
        let mut x = [_mm512_setzero_si512(); 16];
        for k in 0..16 {
            x[k] = _mm512_loadu_si512(ip.add((r + k) * ib + j) as *const _);
        }
        for _ in 0..4 {
            let mut y = [_mm512_setzero_si512(); 16];
            for i in 0..8 {
                y[2 * i] = _mm512_unpacklo_epi8(x[i], x[i + 8]);
                y[2 * i + 1] = _mm512_unpackhi_epi8(x[i], x[i + 8]);
            }
            x = y;
        }
        // Register c now holds, in 128-bit lane L, byte j+16L+c of the 16 rows.
        for c in 0..16 {
            let mut v = x[c];
            for b in (0..8).rev() {
                let m = _mm512_movepi8_mask(v);
                for l in 0..4 {
                    store16(op, nrows, 8 * (j + 16 * l + c) + b, r, (m >> (16 * l)) as u16);
                }
                v = _mm512_slli_epi64(v, 1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Block, Prg};
    #[test]
    fn matches_portable() {
        crate::simd::for_each_level("transpose", |l| {
            let mut p = Prg::new(Block(3));
            for (nr, nc) in [(16, 8), (128, 128), (128, 1024), (32, 40), (128, 8 * 83), (48, 8 * 200), (16, 8 * 48), (32, 8 * 113)] {
                let mut a = vec![0u8; nr * nc / 8];
                p.fill_bytes(&mut a);
                let mut x = vec![0u8; a.len()];
                let mut y = vec![0u8; a.len()];
                transpose(&a, nr, nc, &mut x);
                transpose_portable(&a, nr, nc, &mut y);
                assert_eq!(x, y, "level {l} {nr}x{nc}");
                let mut z = vec![0u8; a.len()];
                transpose_scalar(&a, nr, nc, &mut z);
                assert_eq!(z, y, "scalar {nr}x{nc}");
                if nc % 16 == 0 {
                    let mut back = vec![0u8; a.len()];
                    transpose(&x, nc, nr, &mut back);
                    assert_eq!(back, a, "level {l} {nr}x{nc} back");
                }
            }
        });
    }
}
