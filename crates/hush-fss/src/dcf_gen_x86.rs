//! DCF key generation across keys with AVX-512 + VAES (issue 35): the level
//! loop of [`crate::dcf`]'s batched generator, four keys per 512-bit
//! register, every level of a group of keys computed with the group's whole
//! state (both parties' seeds, control bits, the running value sums V_α and
//! the α bits) kept in registers.
//!
//! Per level and group, the MMO hashes of both parties' seeds — both
//! children, and (unpacked) both value blocks — are 8 registers (32 AES
//! blocks) in flight; packed keys (4 registers per group of four) run two
//! groups at once so that 8 registers are in flight there too. The
//! correction words then follow from branch-free selects on α's bit
//! (mask blends), 64-bit lane arithmetic for the value corrections (both
//! lanes of a two-lane key in one 128-bit lane) and mask registers for the
//! control bits. The arithmetic is exactly [`crate::dcf`]'s
//! `gen_core_shaped` scalar level loop (which stays the portable path and
//! handles the keys of a chunk beyond a multiple of the group size), so the
//! keys are byte for byte the same (`dcf::tests::vector_gen_matches_scalar`).
//!
//! The fixed-key permutation is [`crate::ggm::FSS_AES_KEY`]'s; its round
//! keys come from [`crate::batch`]'s key schedule. The AES blocks are
//! counted on the thread's meter ([`hush_primitives::aes::count_blocks`]) as
//! if they went through `Aes128::encrypt_blocks`.

use std::arch::x86_64::*;

/// The state and outputs of one chunk of keys (the arrays of
/// `dcf::gen_core_shaped`; key k's correction words at `cwf[k·dst..]`).
pub(crate) struct Chunk<'a> {
    pub s: &'a mut [[u128; 2]],
    pub t: &'a mut [[u64; 2]],
    pub va: &'a mut [[u64; 2]],
    pub cwf: &'a mut [u64],
    pub tl: &'a mut [u64],
    pub tr: &'a mut [u64],
    pub vb: &'a mut [u64],
    pub alphas: &'a [u64],
    pub betas: &'a [[u64; 2]],
}

/// Builds levels 0..d of the first 4·W·⌊m / 4W⌋ keys of the chunk (m =
/// `c.alphas.len()`), W = 2 groups of four when packed, else 1; returns how
/// many keys it built (the caller builds the rest with the scalar loop).
/// `n` is the input width (α's bit i is bit n − 1 − i), `om` the output
/// mask, `st` the words per level in `cwf`, `dst` = d·st.
///
/// # Safety
/// The CPU must have avx512f, vaes and aes (`simd::level()` = avx512).
#[target_feature(enable = "aes,avx2,avx512f,vaes")]
pub(crate) unsafe fn levels<const NL: usize, const PACKED: bool>(n: usize, d: usize, om: u64, c: &mut Chunk<'_>) -> usize {
    if PACKED {
        levels_w::<NL, PACKED, 2>(n, d, om, c)
    } else {
        levels_w::<NL, PACKED, 1>(n, d, om, c)
    }
}

#[inline(always)]
unsafe fn load4_seeds(s: &[[u128; 2]], b: usize) -> [__m512i; 2] {
    let a = [s[0][b], s[1][b], s[2][b], s[3][b]];
    [_mm512_loadu_si512(a.as_ptr() as *const _), _mm512_setzero_si512()]
}

/// Even bits (one per key: bit 2j) of a test mask.
#[inline(always)]
fn even(m: u8) -> u8 {
    m & 0x55
}
/// Even bits doubled to both qwords of each key's 128-bit lane.
#[inline(always)]
fn both(m: u8) -> u8 {
    let e = m & 0x55;
    e | (e << 1)
}

#[inline(always)]
#[allow(clippy::needless_range_loop)]
unsafe fn levels_w<const NL: usize, const PACKED: bool, const W: usize>(n: usize, d: usize, om: u64, c: &mut Chunk<'_>) -> usize {
    let m = c.alphas.len();
    let gk = 4 * W;
    let done = m / gk * gk;
    if done == 0 || d == 0 {
        return 0;
    }
    let st = if PACKED { 2 } else { 2 + NL };
    let dst = d * st;
    let rk = crate::batch::fss_round_keys();
    let one_lo = _mm512_maskz_set1_epi64(0x55, 1);
    let c1 = one_lo;
    let c2 = _mm512_maskz_set1_epi64(0x55, crate::ggm::TWEAK_V as i64);
    let c3 = _mm512_maskz_set1_epi64(0x55, (crate::ggm::TWEAK_V + 1) as i64);
    let smask_lo = crate::ggm::seed_mask(PACKED) as u64;
    let smask = _mm512_mask_set1_epi64(_mm512_set1_epi64(-1), 0x55, smask_lo as i64);
    let omv = _mm512_set1_epi64(om as i64);
    let ones = _mm512_set1_epi64(1);
    let zero = _mm512_setzero_si512();
    // Per-key words extracted per level (for W groups: 4W keys).
    let mut scw_buf = [[0u64; 8]; W];
    let mut v_buf = [[0u64; 8]; W];
    let mut k0 = 0;
    while k0 < done {
        // Load the group state.
        let mut s0 = [zero; W];
        let mut s1 = [zero; W];
        let mut va = [zero; W];
        let mut beta = [zero; W];
        let mut alpha = [zero; W];
        let mut t0 = [0u8; W];
        let mut t1 = [0u8; W];
        let mut tlw = [[0u64; 4]; W];
        let mut trw = [[0u64; 4]; W];
        let mut vbw = [[0u64; 4]; W];
        for g in 0..W {
            let k = k0 + 4 * g;
            s0[g] = load4_seeds(&c.s[k..k + 4], 0)[0];
            s1[g] = load4_seeds(&c.s[k..k + 4], 1)[0];
            va[g] = _mm512_loadu_si512(c.va[k..k + 4].as_ptr() as *const _);
            beta[g] = _mm512_loadu_si512(c.betas[k..k + 4].as_ptr() as *const _);
            let a = &c.alphas[k..k + 4];
            alpha[g] = _mm512_set_epi64(
                a[3] as i64, a[3] as i64, a[2] as i64, a[2] as i64, a[1] as i64, a[1] as i64, a[0] as i64, a[0] as i64,
            );
            for j in 0..4 {
                t0[g] |= ((c.t[k + j][0] & 1) as u8) << (2 * j);
                t1[g] |= ((c.t[k + j][1] & 1) as u8) << (2 * j);
                tlw[g][j] = c.tl[k + j];
                trw[g][j] = c.tr[k + j];
                vbw[g][j] = c.vb[k + j];
            }
        }
        for i in 0..d {
            let sh = _mm_cvtsi64_si128((n - 1 - i) as i64);
            // Inputs s ⊕ c of both parties: unpacked [s0, s0^1, s0^2, s0^3,
            // s1, …] per group, packed [s0, s0^1, s1, s1^1].
            const Z: usize = 8;
            let mut x = [zero; Z];
            let per = if PACKED { 2 } else { 4 };
            for g in 0..W {
                let o = g * 2 * per;
                x[o] = s0[g];
                x[o + 1] = _mm512_xor_si512(s0[g], c1);
                x[o + per] = s1[g];
                x[o + per + 1] = _mm512_xor_si512(s1[g], c1);
                if !PACKED {
                    x[o + 2] = _mm512_xor_si512(s0[g], c2);
                    x[o + 3] = _mm512_xor_si512(s0[g], c3);
                    x[o + per + 2] = _mm512_xor_si512(s1[g], c2);
                    x[o + per + 3] = _mm512_xor_si512(s1[g], c3);
                }
            }
            // MMO: π(x) ⊕ x, 8 registers (32 blocks) in flight.
            let mut y = [zero; Z];
            for z in 0..Z {
                y[z] = _mm512_xor_si512(x[z], rk[0]);
            }
            for r in 1..10 {
                for z in 0..Z {
                    y[z] = _mm512_aesenc_epi128(y[z], rk[r]);
                }
            }
            for z in 0..Z {
                y[z] = _mm512_xor_si512(_mm512_aesenclast_epi128(y[z], rk[10]), x[z]);
            }
            for g in 0..W {
                let o = g * 2 * per;
                let (b00, b01, b10, b11) = (y[o], y[o + 1], y[o + per], y[o + per + 1]);
                // α's bit per key, in both qwords of its lane.
                let am: u8 = _mm512_test_epi64_mask(_mm512_srl_epi64(alpha[g], sh), ones);
                let ae = even(am);
                // keep = α_i, lose = 1 − α_i.
                let kb0 = _mm512_mask_blend_epi64(am, b00, b01);
                let lb0 = _mm512_mask_blend_epi64(am, b01, b00);
                let kb1 = _mm512_mask_blend_epi64(am, b10, b11);
                let lb1 = _mm512_mask_blend_epi64(am, b11, b10);
                let scw = _mm512_and_si512(_mm512_xor_si512(lb0, lb1), smask);
                let t1b = both(t1[g]);
                if PACKED {
                    let vl = _mm512_and_si512(_mm512_srli_epi64::<1>(_mm512_xor_si512(lb0, lb1)), one_lo);
                    let ba = _mm512_and_si512(_mm512_maskz_mov_epi64(am, beta[g]), one_lo);
                    let v = _mm512_and_si512(_mm512_xor_si512(_mm512_xor_si512(vl, va[g]), ba), one_lo);
                    let vk = _mm512_and_si512(_mm512_srli_epi64::<1>(_mm512_xor_si512(kb0, kb1)), one_lo);
                    va[g] = _mm512_and_si512(_mm512_xor_si512(_mm512_xor_si512(va[g], vk), v), one_lo);
                    let vm = _mm512_test_epi64_mask(v, v);
                    for j in 0..4 {
                        vbw[g][j] |= (((vm >> (2 * j)) & 1) as u64) << i;
                    }
                } else {
                    let (w00, w01, w10, w11) = (y[o + 2], y[o + 3], y[o + per + 2], y[o + per + 3]);
                    let wk0 = _mm512_mask_blend_epi64(am, w00, w01);
                    let wl0 = _mm512_mask_blend_epi64(am, w01, w00);
                    let wk1 = _mm512_mask_blend_epi64(am, w10, w11);
                    let wl1 = _mm512_mask_blend_epi64(am, w11, w10);
                    let xv = _mm512_add_epi64(
                        _mm512_sub_epi64(_mm512_sub_epi64(wl1, wl0), va[g]),
                        _mm512_maskz_mov_epi64(am, beta[g]),
                    );
                    // sg: negate where t_1 = 1.
                    let v = _mm512_and_si512(_mm512_mask_sub_epi64(xv, t1b, zero, xv), omv);
                    let sv = _mm512_mask_sub_epi64(v, t1b, zero, v);
                    va[g] = _mm512_add_epi64(_mm512_add_epi64(_mm512_sub_epi64(va[g], wk1), wk0), sv);
                    _mm512_storeu_si512(v_buf[g].as_mut_ptr() as *mut _, v);
                }
                _mm512_storeu_si512(scw_buf[g].as_mut_ptr() as *mut _, scw);
                // Control-bit corrections (even bits, one per key).
                let tlm = even(_mm512_test_epi64_mask(_mm512_xor_si512(b00, b10), one_lo)) ^ ae ^ 0x55;
                let trm = even(_mm512_test_epi64_mask(_mm512_xor_si512(b01, b11), one_lo)) ^ ae;
                let tkeep = ((tlm & !ae) | (trm & ae)) & 0x55;
                for j in 0..4 {
                    tlw[g][j] |= (((tlm >> (2 * j)) & 1) as u64) << i;
                    trw[g][j] |= (((trm >> (2 * j)) & 1) as u64) << i;
                }
                let km0 = _mm512_and_si512(kb0, smask);
                let km1 = _mm512_and_si512(kb1, smask);
                s0[g] = _mm512_mask_xor_epi64(km0, both(t0[g]), km0, scw);
                s1[g] = _mm512_mask_xor_epi64(km1, t1b, km1, scw);
                t0[g] = even(_mm512_test_epi64_mask(kb0, one_lo)) ^ (t0[g] & tkeep);
                t1[g] = even(_mm512_test_epi64_mask(kb1, one_lo)) ^ (t1[g] & tkeep);
                // This level's correction words of the group's keys.
                let k = k0 + 4 * g;
                for j in 0..4 {
                    let at = (k + j) * dst + i * st;
                    let cw = &mut c.cwf[at..at + st];
                    cw[0] = scw_buf[g][2 * j];
                    cw[1] = scw_buf[g][2 * j + 1];
                    if !PACKED {
                        for l in 0..NL {
                            cw[2 + l] = v_buf[g][2 * j + l];
                        }
                    }
                }
            }
        }
        // Store the group state back for the leaves.
        for g in 0..W {
            let k = k0 + 4 * g;
            let mut a0 = [0u128; 4];
            let mut a1 = [0u128; 4];
            _mm512_storeu_si512(a0.as_mut_ptr() as *mut _, s0[g]);
            _mm512_storeu_si512(a1.as_mut_ptr() as *mut _, s1[g]);
            _mm512_storeu_si512(c.va[k..k + 4].as_mut_ptr() as *mut _, va[g]);
            for j in 0..4 {
                c.s[k + j] = [a0[j], a1[j]];
                c.t[k + j] = [((t0[g] >> (2 * j)) & 1) as u64, ((t1[g] >> (2 * j)) & 1) as u64];
                c.tl[k + j] = tlw[g][j];
                c.tr[k + j] = trw[g][j];
                c.vb[k + j] = vbw[g][j];
            }
            hush_primitives::wipe::wipe_u64s(unsafe_u128_words(&mut a0));
            hush_primitives::wipe::wipe_u64s(unsafe_u128_words(&mut a1));
        }
        k0 += gk;
    }
    for g in 0..W {
        hush_primitives::wipe::wipe_u64s(&mut scw_buf[g]);
        hush_primitives::wipe::wipe_u64s(&mut v_buf[g]);
    }
    let per = if PACKED { 2 } else { 4 };
    hush_primitives::aes::count_blocks((done * 2 * per * d) as u64);
    done
}

/// The words of a u128 array (for erasing it).
fn unsafe_u128_words(a: &mut [u128; 4]) -> &mut [u64] {
    // SAFETY: [u128; 4] is 64 initialised bytes, aligned for u64; any bit
    // pattern is a valid u64.
    unsafe { std::slice::from_raw_parts_mut(a.as_mut_ptr() as *mut u64, 8) }
}
