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
//!
//! **The IKNP shape, 128 rows** (every output row one 16-byte block), has
//! its own kernels that write each output block with one 16-byte store
//! instead of eight 2-byte ones. A tile is all 128 rows × 64 column bytes
//! (avx512) or × 32 (avx2), 8 KiB or 4 KiB, kept in L1:
//! 1. per 16-row group, the 16 × 16 byte transpose above puts, in each
//!    128-bit lane, one column byte of the 16 rows; each of its two 64-bit
//!    halves is then an 8 × 8 bit matrix (byte i = row i), transposed in
//!    place at avx512 by one `vgf2p8affineqb` per 8 matrices (GFNI: the
//!    data is the affine matrix, the constant operand picks one bit per
//!    output byte). At avx2 the 8 × 8 bit transposes come first, across the
//!    row registers of each octet (three rounds of four register-pair
//!    swaps, distances 4, 2, 1 bits), so that the byte transpose leaves
//!    the halves already transposed: a swap between two registers costs
//!    what a delta swap inside one costs, so this is half the bit work of
//!    three in-register delta swaps per register (IKNP at avx2 on a Zen 4:
//!    ~5–10 ms less CPU per party per 10^7 COTs). A byte shuffle then pairs
//!    the halves, leaving for each output block the two bytes this row
//!    group contributes, as one 16-bit word;
//! 2. an 8 × 8 transpose of those words across the eight row groups
//!    (three rounds of `punpck{l,h}{wd,dq,qdq}`) assembles whole blocks,
//!    each stored once.
//! Both are pinned against [`transpose_portable`] at every level the CPU
//! has (tests below). Without GFNI (no AVX-512 CPU with VAES lacks it, but
//! the level does not promise it) level avx512 runs the avx2 kernel.

use crate::simd::{self, Level};

/// Transposes a `nrows × ncols` bit matrix. Requires `nrows % 16 == 0` and
/// `ncols % 8 == 0`.
pub fn transpose(input: &[u8], nrows: usize, ncols: usize, out: &mut [u8]) {
    transpose_with(input, nrows, ncols, out, false)
}

/// [`transpose`] for an output far larger than the cache that is not read
/// back at once (IKNP's COTs into a caller's buffer of many MiB): the
/// 128-row kernels write whole aligned lines with non-temporal stores,
/// which skip the read-for-ownership of every output line (when `out` is
/// not line-aligned they prefetch each tile's output lines for writing
/// instead). Same result.
pub fn transpose_streaming(input: &[u8], nrows: usize, ncols: usize, out: &mut [u8]) {
    transpose_with(input, nrows, ncols, out, true)
}

fn transpose_with(input: &[u8], nrows: usize, ncols: usize, out: &mut [u8], nt: bool) {
    assert!(nrows % 16 == 0 && ncols % 8 == 0, "transpose needs nrows%16==0 and ncols%8==0");
    assert_eq!(input.len(), nrows * ncols / 8);
    assert_eq!(out.len(), nrows * ncols / 8);
    let l = simd::level();
    #[cfg(target_arch = "x86_64")]
    if l >= Level::Avx2 {
        // SAFETY: level ≥ avx2 was detected (avx512 includes avx512f/bw);
        // every index stays within the asserted sizes.
        unsafe { transpose_x86(input, nrows, ncols, out, l == Level::Avx512, nt) };
        return;
    }
    let _ = (l, nt);
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

/// Whether the CPU has GFNI (checked once).
#[cfg(target_arch = "x86_64")]
fn has_gfni() -> bool {
    use std::sync::OnceLock;
    static G: OnceLock<bool> = OnceLock::new();
    *G.get_or_init(|| std::arch::is_x86_feature_detected!("gfni"))
}

/// # Safety
/// The CPU has AVX2, and AVX-512 F + BW when `wide`.
#[cfg(target_arch = "x86_64")]
unsafe fn transpose_x86(input: &[u8], nrows: usize, ncols: usize, out: &mut [u8], wide: bool, nt: bool) {
    let ib = ncols / 8;
    let ip = input.as_ptr();
    let op = out.as_mut_ptr();
    let mut j = 0;
    if nrows == 128 {
        // Whole-block kernels over the widest tiles, then the generic
        // tiles below for the remaining (< 64 or < 32) column bytes.
        // SAFETY (both kernels): the caller guarantees AVX2, and AVX-512
        // F + BW when `wide`; GFNI is checked here. A tile reads rows
        // 0..128 × bytes j..j+64 (or +32) of `input` (128 × ib bytes) and
        // writes blocks 8j..8j+512 (or +256) of `out` (8·ib blocks), both
        // in bounds as j + 64 ≤ ib (j + 32 ≤ ib).
        if wide && has_gfni() {
            while j + 64 <= ib {
                if nt {
                    x86::tile128_gfni::<true>(ip, ib, j, op)
                } else {
                    x86::tile128_gfni::<false>(ip, ib, j, op)
                }
                j += 64;
            }
        }
        while j + 32 <= ib {
            if nt {
                x86::tile128_avx2::<true>(ip, ib, j, op)
            } else {
                x86::tile128_avx2::<false>(ip, ib, j, op)
            }
            j += 32;
        }
        if nt {
            // Order the non-temporal stores before anything that follows.
            std::arch::x86_64::_mm_sfence();
        }
    }
    // Column blocks outermost: a block's input (nrows × 64 bytes) and its
    // output (512 rows × nrows/8 bytes) stay in L1 while all row groups pass.
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

    /// One round of the 16-register byte-interleave network (four rounds
    /// transpose 16 × 16 bytes within each 128-bit lane), written out so
    /// the registers never leave the register file.
    macro_rules! unpack16 {
        ($x:ident, $lo:ident, $hi:ident) => {
            $x = [
                $lo($x[0], $x[8]), $hi($x[0], $x[8]), $lo($x[1], $x[9]), $hi($x[1], $x[9]),
                $lo($x[2], $x[10]), $hi($x[2], $x[10]), $lo($x[3], $x[11]), $hi($x[3], $x[11]),
                $lo($x[4], $x[12]), $hi($x[4], $x[12]), $lo($x[5], $x[13]), $hi($x[5], $x[13]),
                $lo($x[6], $x[14]), $hi($x[6], $x[14]), $lo($x[7], $x[15]), $hi($x[7], $x[15]),
            ];
        };
    }

    /// Sixteen loads, `$load(row)` for rows `$r + perm(k)`, k = 0..16.
    macro_rules! load16 {
        ($load:expr, $perm:expr) => {{
            let f = $perm;
            [
                $load(f(0)), $load(f(1)), $load(f(2)), $load(f(3)), $load(f(4)), $load(f(5)), $load(f(6)), $load(f(7)),
                $load(f(8)), $load(f(9)), $load(f(10)), $load(f(11)), $load(f(12)), $load(f(13)), $load(f(14)), $load(f(15)),
            ]
        }};
    }

    /// 8 × 8 transpose of 16-bit words within each 128-bit lane across
    /// eight registers: out[b] lane L word h = q[h] lane L word b.
    macro_rules! words8x8 {
        ($q:expr, $lo16:ident, $hi16:ident, $lo32:ident, $hi32:ident, $lo64:ident, $hi64:ident) => {{
            let q = $q;
            let a = [
                $lo16(q[0], q[1]), $hi16(q[0], q[1]), $lo16(q[2], q[3]), $hi16(q[2], q[3]),
                $lo16(q[4], q[5]), $hi16(q[4], q[5]), $lo16(q[6], q[7]), $hi16(q[6], q[7]),
            ];
            let b = [
                $lo32(a[0], a[2]), $hi32(a[0], a[2]), $lo32(a[1], a[3]), $hi32(a[1], a[3]),
                $lo32(a[4], a[6]), $hi32(a[4], a[6]), $lo32(a[5], a[7]), $hi32(a[5], a[7]),
            ];
            [
                $lo64(b[0], b[4]), $hi64(b[0], b[4]), $lo64(b[1], b[5]), $hi64(b[1], b[5]),
                $lo64(b[2], b[6]), $hi64(b[2], b[6]), $lo64(b[3], b[7]), $hi64(b[3], b[7]),
            ]
        }};
    }

    /// 128 rows × 32 column bytes from byte `j` (256 output blocks from
    /// block 8j) with AVX2; see the module comment.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn tile128_avx2<const NT: bool>(ip: *const u8, ib: usize, j: usize, op: *mut u8) {
        // Phase 1 output: group h, register c at scratch[16h + c]; every
        // slot is written before it is read.
        let mut scratch = std::mem::MaybeUninit::<[__m256i; 128]>::uninit();
        let sp = scratch.as_mut_ptr() as *mut __m256i;
        let pair = _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15));
        // Per-byte masks of the three swap distances (bits 0, 2, 4, 6;
        // bits 0–1, 4–5; bits 0–3).
        let m1 = _mm256_set1_epi8(0x55);
        let m2 = _mm256_set1_epi8(0x33);
        let m4 = _mm256_set1_epi8(0x0f);
        let stream = NT && op as usize % 32 == 0;
        if NT && !stream {
            for line in 0..64 {
                _mm_prefetch::<_MM_HINT_ET0>(op.add(16 * 8 * j + 64 * line) as *const i8);
            }
        }
        for h in 0..8 {
            let base = ip.add(16 * h * ib + j);
            let ld = |k: usize| _mm256_loadu_si256(base.add(k * ib) as *const __m256i);
            let mut x: [__m256i; 16] = load16!(ld, |k: usize| k);
            // The 8 × 8 bit transposes first, across the registers of each
            // octet of rows (register 8q + i = row 16h + 8q + i): after them
            // register 8q + b holds, in byte c, bit i = bit b of row
            // 16h + 8q + i's byte c. A swap between two registers costs the
            // six operations a delta swap inside one register costs, so this
            // is half the work of transposing after the byte network.
            for q in 0..2 {
                let r = &mut x[8 * q..8 * q + 8];
                for (a, b) in [(0, 4), (1, 5), (2, 6), (3, 7)] {
                    let t = _mm256_and_si256(_mm256_xor_si256(_mm256_srli_epi64::<4>(r[a]), r[b]), m4);
                    r[b] = _mm256_xor_si256(r[b], t);
                    r[a] = _mm256_xor_si256(r[a], _mm256_slli_epi64::<4>(t));
                }
                for (a, b) in [(0, 2), (1, 3), (4, 6), (5, 7)] {
                    let t = _mm256_and_si256(_mm256_xor_si256(_mm256_srli_epi64::<2>(r[a]), r[b]), m2);
                    r[b] = _mm256_xor_si256(r[b], t);
                    r[a] = _mm256_xor_si256(r[a], _mm256_slli_epi64::<2>(t));
                }
                for (a, b) in [(0, 1), (2, 3), (4, 5), (6, 7)] {
                    let t = _mm256_and_si256(_mm256_xor_si256(_mm256_srli_epi64::<1>(r[a]), r[b]), m1);
                    r[b] = _mm256_xor_si256(r[b], t);
                    r[a] = _mm256_xor_si256(r[a], _mm256_slli_epi64::<1>(t));
                }
            }
            unpack16!(x, _mm256_unpacklo_epi8, _mm256_unpackhi_epi8);
            unpack16!(x, _mm256_unpacklo_epi8, _mm256_unpackhi_epi8);
            unpack16!(x, _mm256_unpacklo_epi8, _mm256_unpackhi_epi8);
            unpack16!(x, _mm256_unpacklo_epi8, _mm256_unpackhi_epi8);
            // x[c] lane L: byte 8q + b = bit b of column byte j+16L+c of
            // rows 16h+8q .. +8 (bit i from row 16h+8q+i): each 64-bit half
            // is the transposed 8 × 8 bit matrix the bit swaps left.
            for c in 0..16 {
                _mm256_store_si256(sp.add(16 * h + c), _mm256_shuffle_epi8(x[c], pair));
            }
        }
        // Phase 2: lane L, word b of scratch[16h + c] = bytes (2h, 2h+1) of
        // block 8(j+16L+c)+b. After the word transpose o[b] lane L is that
        // whole block; pairs of registers are regrouped by lane so that
        // each store writes two adjacent blocks (32 bytes).
        for c in 0..16 {
            let q = [
                *sp.add(c), *sp.add(16 + c), *sp.add(32 + c), *sp.add(48 + c),
                *sp.add(64 + c), *sp.add(80 + c), *sp.add(96 + c), *sp.add(112 + c),
            ];
            let o = words8x8!(
                q, _mm256_unpacklo_epi16, _mm256_unpackhi_epi16, _mm256_unpacklo_epi32, _mm256_unpackhi_epi32,
                _mm256_unpacklo_epi64, _mm256_unpackhi_epi64
            );
            let d0 = op.add(16 * 8 * (j + c));
            let d1 = op.add(16 * 8 * (j + 16 + c));
            for p in 0..4 {
                let lo = _mm256_permute2x128_si256::<0x20>(o[2 * p], o[2 * p + 1]);
                let hi = _mm256_permute2x128_si256::<0x31>(o[2 * p], o[2 * p + 1]);
                let (a, b) = (d0.add(32 * p) as *mut __m256i, d1.add(32 * p) as *mut __m256i);
                if stream {
                    // d1 − d0 = 256 bytes: both aligned or neither.
                    _mm256_stream_si256(a, lo);
                    _mm256_stream_si256(b, hi);
                } else {
                    _mm256_storeu_si256(a, lo);
                    _mm256_storeu_si256(b, hi);
                }
            }
        }
    }

    /// 128 rows × 64 column bytes from byte `j` (512 output blocks from
    /// block 8j) with AVX-512BW and GFNI; see the module comment.
    #[target_feature(enable = "avx512f,avx512bw,gfni")]
    pub(super) unsafe fn tile128_gfni<const NT: bool>(ip: *const u8, ib: usize, j: usize, op: *mut u8) {
        let mut scratch = std::mem::MaybeUninit::<[__m512i; 128]>::uninit();
        let sp = scratch.as_mut_ptr() as *mut __m512i;
        let pair = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15));
        // Byte t of every 64-bit lane = 1 << t: output byte t of
        // gf2p8affine(sel, A) has bit i = bit t of A's byte 7 − i.
        let sel = _mm512_set1_epi64(0x8040_2010_0804_0201u64 as i64);
        // A cold output that is not line-aligned cannot be streamed: ask
        // for its 128 lines (for writing) now, so that they arrive while
        // phase 1 computes instead of stalling phase 2's stores.
        let stream = NT && op as usize % 64 == 0;
        if NT && !stream {
            for line in 0..128 {
                _mm_prefetch::<_MM_HINT_ET0>(op.add(16 * 8 * j + 64 * line) as *const i8);
            }
        }
        for h in 0..8 {
            let base = ip.add(16 * h * ib + j);
            let ld = |k: usize| _mm512_loadu_si512(base.add(k * ib) as *const _);
            // Rows loaded in reverse within each 8 (k ^ 7), so that byte
            // 7 − i of a 64-bit half is row i of its 8 — the order the
            // affine instruction reads its matrix in.
            let mut x: [__m512i; 16] = load16!(ld, |k: usize| k ^ 7);
            unpack16!(x, _mm512_unpacklo_epi8, _mm512_unpackhi_epi8);
            unpack16!(x, _mm512_unpacklo_epi8, _mm512_unpackhi_epi8);
            unpack16!(x, _mm512_unpacklo_epi8, _mm512_unpackhi_epi8);
            unpack16!(x, _mm512_unpacklo_epi8, _mm512_unpackhi_epi8);
            for c in 0..16 {
                let v = _mm512_gf2p8affine_epi64_epi8::<0>(sel, x[c]);
                _mm512_store_si512(sp.add(16 * h + c) as *mut _, _mm512_shuffle_epi8(v, pair));
            }
        }
        // Phase 2 as in the AVX2 kernel; a 4 × 4 regrouping of 128-bit
        // lanes makes each store one whole 64-byte line (four blocks).
        for c in 0..16 {
            let q = [
                *sp.add(c), *sp.add(16 + c), *sp.add(32 + c), *sp.add(48 + c),
                *sp.add(64 + c), *sp.add(80 + c), *sp.add(96 + c), *sp.add(112 + c),
            ];
            let o = words8x8!(
                q, _mm512_unpacklo_epi16, _mm512_unpackhi_epi16, _mm512_unpacklo_epi32, _mm512_unpackhi_epi32,
                _mm512_unpacklo_epi64, _mm512_unpackhi_epi64
            );
            for s in 0..2 {
                let (o0, o1, o2, o3) = (o[4 * s], o[4 * s + 1], o[4 * s + 2], o[4 * s + 3]);
                let t0 = _mm512_shuffle_i64x2::<0b01_00_01_00>(o0, o1);
                let t1 = _mm512_shuffle_i64x2::<0b11_10_11_10>(o0, o1);
                let t2 = _mm512_shuffle_i64x2::<0b01_00_01_00>(o2, o3);
                let t3 = _mm512_shuffle_i64x2::<0b11_10_11_10>(o2, o3);
                // r_L = [o0, o1, o2, o3] lane L = blocks 8(j+16L+c)+4s..+4.
                let r = [
                    _mm512_shuffle_i64x2::<0b10_00_10_00>(t0, t2),
                    _mm512_shuffle_i64x2::<0b11_01_11_01>(t0, t2),
                    _mm512_shuffle_i64x2::<0b10_00_10_00>(t1, t3),
                    _mm512_shuffle_i64x2::<0b11_01_11_01>(t1, t3),
                ];
                for (l, v) in r.into_iter().enumerate() {
                    let d = op.add(16 * (8 * (j + 16 * l + c) + 4 * s));
                    if stream {
                        _mm512_stream_si512(d as *mut _, v)
                    } else {
                        _mm512_storeu_si512(d as *mut _, v)
                    }
                }
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
            for (nr, nc) in [
                (16, 8), (128, 128), (128, 1024), (32, 40), (128, 8 * 83), (48, 8 * 200), (16, 8 * 48), (32, 8 * 113),
                // The 128-row whole-block kernels: exact tiles, tiles plus
                // every kind of tail (32-, 16- and 1-byte), wide matrices.
                (128, 8 * 32), (128, 8 * 64), (128, 8 * 96), (128, 8 * 97), (128, 8 * 113), (128, 8 * 127),
                (128, 8 * 1024), (128, 8 * 1000 + 8 * 17), (128, 8), (128, 24),
            ] {
                let mut a = vec![0u8; nr * nc / 8];
                p.fill_bytes(&mut a);
                let mut x = vec![0u8; a.len()];
                let mut y = vec![0u8; a.len()];
                transpose(&a, nr, nc, &mut x);
                transpose_portable(&a, nr, nc, &mut y);
                assert_eq!(x, y, "level {l} {nr}x{nc}");
                // Non-temporal stores, at the allocation's alignment and
                // one block off it (the kernels fall back to plain stores).
                for skip in [0usize, 16] {
                    let mut s = vec![0u8; a.len() + 64];
                    let o = (64 - s.as_ptr() as usize % 64) % 64 + skip;
                    transpose_streaming(&a, nr, nc, &mut s[o..o + a.len()]);
                    assert_eq!(s[o..o + a.len()], y[..], "level {l} {nr}x{nc} streaming +{skip}");
                }
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
