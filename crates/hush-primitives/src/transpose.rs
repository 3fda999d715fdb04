//! Bit-matrix transposition (the IKNP matrix flip).
//!
//! `input` holds `nrows` rows of `ncols` bits, row-major, each row
//! `ncols/8` bytes with bit c of a row in byte c/8 at position c%8; the
//! output holds `ncols` rows of `nrows` bits in the same layout. On x86-64
//! the kernel gathers one byte from each of 16 rows into a vector and peels
//! off one output row-fragment per bit with `pmovmskb` (8 per gather).

/// Transposes a `nrows × ncols` bit matrix. Requires `nrows % 16 == 0` and
/// `ncols % 8 == 0`.
pub fn transpose(input: &[u8], nrows: usize, ncols: usize, out: &mut [u8]) {
    assert!(nrows % 16 == 0 && ncols % 8 == 0, "transpose needs nrows%16==0 and ncols%8==0");
    assert_eq!(input.len(), nrows * ncols / 8);
    assert_eq!(out.len(), nrows * ncols / 8);
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse2") {
            // SAFETY: sse2 detected; the kernel indexes within the asserted sizes.
            unsafe { transpose_sse2(input, nrows, ncols, out) };
            return;
        }
    }
    transpose_portable(input, nrows, ncols, out)
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

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
unsafe fn transpose_sse2(input: &[u8], nrows: usize, ncols: usize, out: &mut [u8]) {
    use std::arch::x86_64::*;
    let ib = ncols / 8; // input bytes per row
    let ob = nrows / 8; // output bytes per row
    let ip = input.as_ptr();
    let op = out.as_mut_ptr();
    let mut r = 0;
    while r < nrows {
        for j in 0..ib {
            let mut g = [0u8; 16];
            for k in 0..16 {
                g[k] = *ip.add((r + k) * ib + j);
            }
            let mut v = _mm_loadu_si128(g.as_ptr() as *const __m128i);
            // Bit 7 of each byte first (column 8j+7), then shift up.
            for b in (0..8).rev() {
                let m = _mm_movemask_epi8(v) as u16;
                let dst = op.add((8 * j + b) * ob + r / 8) as *mut [u8; 2];
                *dst = m.to_le_bytes();
                v = _mm_slli_epi64(v, 1);
            }
        }
        r += 16;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Block, Prg};
    #[test]
    fn matches_portable() {
        let mut p = Prg::new(Block(3));
        for (nr, nc) in [(16, 8), (128, 128), (128, 1024), (32, 40)] {
            let mut a = vec![0u8; nr * nc / 8];
            p.fill_bytes(&mut a);
            let mut x = vec![0u8; a.len()];
            let mut y = vec![0u8; a.len()];
            transpose(&a, nr, nc, &mut x);
            transpose_portable(&a, nr, nc, &mut y);
            assert_eq!(x, y);
            if nc % 16 == 0 {
                let mut back = vec![0u8; a.len()];
                transpose(&x, nc, nr, &mut back);
                assert_eq!(back, a);
            }
        }
    }
}
