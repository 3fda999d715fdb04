//! Eight-lane Montgomery exponentiation with AVX-512 IFMA (52-bit limbs),
//! for the key owner's CRT decryption: eight ciphertexts raised to the same
//! exponent (α_p, or p−1 for DJN keys) modulo the same modulus (p²) at
//! once, one per 64-bit lane.
//!
//! Montgomery multiplication (Montgomery 1985) in radix 2^52 with
//! `vpmadd52luq`/`vpmadd52huq`, in the multi-buffer layout of Drucker and
//! Gueron ("Fast modular squaring with AVX512IFMA", 2019): limb j of the
//! eight operands sits in one 512-bit register. The product (or the square,
//! cross products once and doubled) is formed by product scanning, then
//! reduced separately (Koç, Acar, Kaliski 1996 call this the separated
//! scanning order); both phases handle four rows (four quotient limbs) per
//! pass over the running sum, with the other operand read through a window
//! of registers, so each limb of the sum is loaded and stored once per
//! eight IFMA operations (`accumulate_rows`). Limbs of the running sum are
//! left unnormalised (each 64-bit lane absorbs the < 4N additions of 52-bit
//! values one multiplication makes) and normalised once at the end; with
//! R = 2^(52N) > 4M, inputs and outputs stay below 2M, and the last
//! conditional subtraction is done when converting back. N is rounded up
//! to a multiple of four. Exponentiation is left-to-right with a fixed
//! 5-bit window; the window values depend on the exponent only, the same
//! in every lane. Like the GMP path, this is not constant time (see the
//! crate docs).
//!
//! Measured on one Golden Cove core (Xeon under KVM, TSC 2.6 GHz;
//! `examples/kernels.rs`, min of 8 runs): a 4096-bit squaring of eight
//! lanes 3.05 µs, a multiplication 3.87 µs, the reduction alone 2.13 µs
//! (the passes at 7.0–7.2 G IFMA/s, near the 7.45–7.7 G/s measured with
//! independent register operands); before the quotient chain was
//! shortened (session 9) 3.33 / 4.18 / 2.42 µs, and the earlier
//! two-rows-per-pass, operand-scanning kernels took 4.6 and 5.4 µs.
//!
//! [`MontCtx::pow8`] is tested against GMP's `pow_mod` (`tests.rs`); GMP is
//! the fallback where the CPU lacks IFMA or `HUSH_PAILLIER=gmp` (or
//! `HUSH_SIMD=avx2|portable`) is set.
//!
//! Modulo a public n² the evaluator's ct·pt uses [`n2`] instead: the same
//! k-limb products and reductions (`redc_with` runs another product's
//! passes between its own, to fill the ports while each quotient chain
//! runs), on two base-n digits with reductions mod n only — 5k² IFMA pairs
//! per product and 3.5k² per square instead of 8k² and 6k² here.

use rug::integer::Order;
use rug::Integer;

pub const LANES: usize = 8;
const W: u32 = 5;
const MASK52: u64 = (1 << 52) - 1;

/// Whether the IFMA path runs: the CPU has AVX-512F + IFMA, `HUSH_PAILLIER`
/// is not `gmp` and `HUSH_SIMD` does not lower the level below AVX-512
/// (`avx2` or `portable`: this crate has no AVX2 kernel, so both run GMP,
/// the portable path).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *ON.get_or_init(|| {
            std::env::var("HUSH_PAILLIER").map(|v| v != "gmp").unwrap_or(true)
                && std::env::var("HUSH_SIMD").map(|v| !matches!(v.to_ascii_lowercase().as_str(), "avx2" | "portable")).unwrap_or(true)
                && std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512ifma")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A Montgomery context for one odd modulus M (a secret at the key owner:
/// its limbs are wiped on drop).
pub struct MontCtx {
    /// Limbs (52-bit) per number: R = 2^(52·n) > 4M.
    n: usize,
    m: Vec<u64>,
    /// −M^{-1} mod 2^52
    mprime: u64,
    /// R² mod M and R mod M (52-bit limbs)
    r2: Vec<u64>,
    r1: Vec<u64>,
    modulus: Integer,
}

impl Drop for MontCtx {
    fn drop(&mut self) {
        for v in self.m.iter_mut().chain(self.r2.iter_mut()).chain(self.r1.iter_mut()) {
            // SAFETY: a valid &mut u64.
            unsafe { std::ptr::write_volatile(v, 0) };
        }
        crate::wipe::wipe(&mut self.modulus);
    }
}

fn to_limbs(x: &Integer, n: usize) -> Vec<u64> {
    let d = x.to_digits::<u64>(Order::Lsf);
    let mut out = vec![0u64; n];
    for (i, o) in out.iter_mut().enumerate() {
        let bit = 52 * i;
        let (w, s) = (bit / 64, bit % 64);
        let lo = d.get(w).copied().unwrap_or(0) >> s;
        let hi = if s > 12 { d.get(w + 1).copied().unwrap_or(0) << (64 - s) } else { 0 };
        *o = (lo | hi) & MASK52;
    }
    out
}

fn from_limbs(l: &[u64]) -> Integer {
    let mut words = vec![0u64; (52 * l.len()).div_ceil(64) + 1];
    for (i, &v) in l.iter().enumerate() {
        let bit = 52 * i;
        let (w, s) = (bit / 64, bit % 64);
        words[w] |= v << s;
        if s > 12 {
            words[w + 1] |= v >> (64 - s);
        }
    }
    Integer::from_digits(&words, Order::Lsf)
}

impl MontCtx {
    /// For an odd modulus M of at least 52 bits on a CPU where [`available`]
    /// holds; `None` otherwise.
    pub fn new(modulus: &Integer) -> Option<MontCtx> {
        if !available() || modulus.is_even() || modulus.significant_bits() < 52 {
            return None;
        }
        let bits = modulus.significant_bits() as usize;
        // a whole number of ROWS-limb passes in the kernels (no one-limb
        // tail passes; R only grows)
        let n = (bits + 2).div_ceil(52).next_multiple_of(ROWS);
        let m = to_limbs(modulus, n);
        // −M^{-1} mod 2^52 by Newton iteration on the low limb
        let m0 = m[0];
        let mut inv: u64 = 1;
        for _ in 0..6 {
            inv = inv.wrapping_mul(2u64.wrapping_sub(m0.wrapping_mul(inv)));
        }
        let mprime = inv.wrapping_neg() & MASK52;
        let r1 = to_limbs(&((Integer::from(1) << (52 * n) as u32) % modulus), n);
        let r2 = to_limbs(&((Integer::from(1) << (104 * n) as u32) % modulus), n);
        Some(MontCtx { n, m, mprime, r2, r1, modulus: modulus.clone() })
    }

    /// bases\[k\]^e mod M for eight bases (each reduced mod M first; missing
    /// lanes are filled with 1 and dropped). `e` ≥ 0.
    pub fn pow8(&self, bases: &[&Integer], e: &Integer) -> Vec<Integer> {
        assert!(bases.len() <= LANES && available() && *e >= 0);
        let n = self.n;
        let shift = (52 * n) as u32;
        // to Montgomery form: x·R mod M (GMP), lane-interleaved limbs
        let mut x = vec![0u64; n * LANES];
        let mut one = vec![0u64; n * LANES];
        let r_mod = (Integer::from(1) << shift) % &self.modulus;
        let r_limbs = to_limbs(&r_mod, n);
        for k in 0..LANES {
            let b = bases.get(k).map(|b| Integer::from(*b % &self.modulus)).unwrap_or_else(|| Integer::from(1));
            let bm = (b << shift) % &self.modulus;
            for (j, v) in to_limbs(&bm, n).into_iter().enumerate() {
                x[j * LANES + k] = v;
            }
            for (j, &v) in r_limbs.iter().enumerate() {
                one[j * LANES + k] = v;
            }
        }
        let bits = e.significant_bits();
        let win = |i: u32| -> usize { (0..W).fold(0, |a, b| a | (usize::from(i + b < bits && e.get_bit(i + b)) << b)) };
        // e = 2^k (h2s packing): k squarings, no table
        let squarings = (bits > 0 && e.is_power_of_two()).then(|| bits - 1);
        // SAFETY: available() checked the CPU features.
        let out = unsafe { pow_ifma(n, &self.m, self.mprime, &x, &one, bits, &win, squarings) };
        (0..bases.len())
            .map(|k| {
                let limbs: Vec<u64> = (0..n).map(|j| out[j * LANES + k]).collect();
                let mut r = from_limbs(&limbs);
                if r >= self.modulus {
                    r -= &self.modulus;
                }
                r
            })
            .collect()
    }
}

impl MontCtx {
    /// Π_t b_{k,t}^{e_{k,t}} mod M for up to eight lanes k of terms
    /// (base, exponent), bases reduced mod M first, by Straus' method
    /// (Straus 1964) with w-bit windows: w squarings per window, then per
    /// term one multiplication by the table entry b_{k,t}^{digit} its lane
    /// selects (entries picked lane by lane with masked blends), kept only
    /// in the lanes whose digit is non-zero. Each term's table holds
    /// b, b², …, b^{2^w − 1}; w minimises the work ([`straus_window`]). A
    /// lane without terms gives 1.
    pub fn multi_exp8(&self, lanes: &[Vec<(&Integer, u64)>]) -> Vec<Integer> {
        assert!(lanes.len() <= LANES && available());
        let n = self.n;
        let terms = lanes.iter().map(Vec::len).max().unwrap_or(0);
        let top = lanes.iter().flatten().map(|t| 64 - t.1.leading_zeros()).max().unwrap_or(0);
        let w = straus_window(top, terms, n);
        let windows = top.div_ceil(w) as usize;
        let dmask = (1u64 << w) - 1;
        let mut bases = vec![vec![0u64; n * LANES]; terms];
        let mut digits = vec![vec![[0u8; LANES]; windows]; terms];
        for (k, lane) in lanes.iter().enumerate() {
            for (t, (b, e)) in lane.iter().enumerate() {
                let reduced;
                let b = if **b >= self.modulus || **b < 0 {
                    reduced = <(Integer, Integer)>::from(b.div_rem_euc_ref(&self.modulus)).1;
                    &reduced
                } else {
                    *b
                };
                for (j, v) in to_limbs(b, n).into_iter().enumerate() {
                    bases[t][j * LANES + k] = v;
                }
                for (i, d) in digits[t].iter_mut().enumerate() {
                    d[k] = ((e >> (i as u32 * w)) & dmask) as u8;
                }
            }
        }
        // SAFETY: available() checked the CPU features.
        let out = unsafe { multi_ifma(n, &self.m, self.mprime, &self.r2, &self.r1, &bases, &digits, w) };
        (0..lanes.len())
            .map(|k| {
                let limbs: Vec<u64> = (0..n).map(|j| out[j * LANES + k]).collect();
                let mut r = from_limbs(&limbs);
                if r >= self.modulus {
                    r -= &self.modulus;
                }
                r
            })
            .collect()
    }
}

/// The Straus window for exponents of `top` bits: the w ∈ 1..=4 with the
/// least work for `terms` terms, counted in quarter multiplications (a
/// squaring costs about three quarters of a multiplication in these
/// kernels): per term, the table's 2^(w−1) − 1 even entries by squaring and
/// 2^(w−1) − 1 odd ones by multiplication plus one multiplication per
/// window ⌈top/w⌉; once for all terms, w squarings per window but the
/// first. Ties go to the smaller w. Narrowed while the tables of `terms`
/// terms of `n` limbs would exceed 16 MB.
pub fn straus_window(top: u32, terms: usize, n: usize) -> u32 {
    let cost = |w: u32| {
        let half = (1u64 << (w - 1)) - 1;
        let windows = u64::from(top.div_ceil(w));
        terms as u64 * (half * 3 + half * 4 + windows * 4) + windows.saturating_sub(1) * u64::from(w) * 3
    };
    let mut w = (1..=4).min_by_key(|&w| (cost(w), w)).unwrap_or(1);
    while w > 1 && terms.saturating_mul(((1usize << w) - 1) * n * 64) > 16 << 20 {
        w -= 1;
    }
    w
}

impl MontCtx {
    /// Horner packing of up to eight groups of equal length L (one group
    /// per lane): Π_i c_i^(2^(k·i)) mod M = ((c_{L−1})^(2^k)·c_{L−2})^(2^k)…·c_0,
    /// all in the Montgomery domain (no GMP division per step).
    pub fn horner8(&self, groups: &[&[Integer]], k: u32) -> Vec<Integer> {
        assert!(groups.len() <= LANES && available());
        let len = groups.first().map_or(0, |g| g.len());
        assert!(len > 0 && groups.iter().all(|g| g.len() == len), "horner8: groups of equal, non-zero length");
        let n = self.n;
        let mut cs = vec![vec![0u64; n * LANES]; len];
        for (lane, g) in groups.iter().enumerate() {
            for (i, c) in g.iter().enumerate() {
                let reduced;
                let c = if *c >= self.modulus || *c < 0 {
                    reduced = <(Integer, Integer)>::from(c.div_rem_euc_ref(&self.modulus)).1;
                    &reduced
                } else {
                    c
                };
                for (j, v) in to_limbs(c, n).into_iter().enumerate() {
                    cs[i][j * LANES + lane] = v;
                }
            }
        }
        // SAFETY: available() checked the CPU features.
        let out = unsafe { horner_ifma(n, &self.m, self.mprime, &self.r2, &cs, k) };
        (0..groups.len())
            .map(|lane| {
                let limbs: Vec<u64> = (0..n).map(|j| out[j * LANES + lane]).collect();
                let mut r = from_limbs(&limbs);
                if r >= self.modulus {
                    r -= &self.modulus;
                }
                r
            })
            .collect()
    }
}

/// A fixed-base table ([`crate::FixedBase`]) in the Montgomery domain of a
/// [`MontCtx`], 52-bit limbs, digit 0 = one: eight exponents' products of
/// table entries per call, the entries gathered lane by lane. A secret
/// table (mod p², q²): wiped on drop.
pub struct FixedTable {
    n: usize,
    w: u32,
    rows: usize,
    exp_bits: u32,
    limbs: Vec<u64>,
}

impl Drop for FixedTable {
    fn drop(&mut self) {
        for v in self.limbs.iter_mut() {
            // SAFETY: a valid &mut u64.
            unsafe { std::ptr::write_volatile(v, 0) };
        }
    }
}

impl FixedTable {
    /// From a GMP table of window ≤ 10 bits over the context's modulus.
    pub fn new(ctx: &MontCtx, fb: &crate::FixedBase) -> Option<FixedTable> {
        let (rows, modulus) = fb.rows();
        let w = fb.window();
        if w > 10 || *modulus != ctx.modulus {
            return None;
        }
        let n = ctx.n;
        let per = 1usize << w;
        let mut limbs = vec![0u64; rows.len() * per * n];
        let shift = (52 * n) as u32;
        for (i, row) in rows.iter().enumerate() {
            let base = i * per * n;
            limbs[base..base + n].copy_from_slice(&ctx.r1);
            for (d, e) in row.iter().enumerate() {
                let mut x = Integer::from(e << shift) % &ctx.modulus;
                let l = to_limbs(&x, n);
                limbs[base + (d + 1) * n..base + (d + 2) * n].copy_from_slice(&l);
                crate::wipe::wipe(&mut x);
            }
        }
        Some(FixedTable { n, w, rows: rows.len(), exp_bits: fb.exp_bits(), limbs })
    }

    /// base^{e_k} mod M for up to eight exponents below 2^exp_bits.
    pub fn pow8(&self, ctx: &MontCtx, exps: &[Integer]) -> Vec<Integer> {
        assert!(exps.len() <= LANES && available() && ctx.n == self.n);
        let mask = (1u64 << self.w) - 1;
        // digits[i][k]: the window-i digit of lane k's exponent
        let mut digits = vec![[0u32; LANES]; self.rows];
        for (k, e) in exps.iter().enumerate() {
            assert!(*e >= 0 && e.significant_bits() <= self.exp_bits, "exponent out of range");
            let words = e.to_digits::<u64>(Order::Lsf);
            for (i, d) in digits.iter_mut().enumerate() {
                let bit = i as u32 * self.w;
                let (limb, off) = ((bit / 64) as usize, bit % 64);
                let mut v = words.get(limb).copied().unwrap_or(0) >> off;
                if off + self.w > 64 {
                    v |= words.get(limb + 1).copied().unwrap_or(0) << (64 - off);
                }
                d[k] = (v & mask) as u32;
            }
        }
        // SAFETY: available() checked the CPU features; indices stay inside `limbs`.
        let out = unsafe { fixed_ifma(self.n, &ctx.m, ctx.mprime, self.w, &self.limbs, &digits) };
        (0..exps.len())
            .map(|k| {
                let limbs: Vec<u64> = (0..self.n).map(|j| out[j * LANES + k]).collect();
                let mut r = from_limbs(&limbs);
                if r >= ctx.modulus {
                    r -= &ctx.modulus;
                }
                r
            })
            .collect()
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
unsafe fn fixed_ifma(n: usize, m: &[u64], mprime: u64, w: u32, limbs: &[u64], digits: &[[u32; LANES]]) -> Vec<u64> {
    use std::arch::x86_64::*;
    let mv = mod_limbs(m, n);
    let mp = _mm512_set1_epi64(mprime as i64);
    let mut t = vec![_mm512_setzero_si512(); scratch_len(n)];
    let mut tmp = vec![_mm512_setzero_si512(); n];
    let mut e = vec![_mm512_setzero_si512(); n];
    let gather = |i: usize, d: &[u32; LANES], out: &mut [__m512i]| {
        let mut off = [0i64; LANES];
        for k in 0..LANES {
            off[k] = ((((i << w) + d[k] as usize) * n) as i64).min((limbs.len() - n) as i64);
        }
        let base = _mm512_loadu_si512(off.as_ptr() as *const _);
        for (j, o) in out.iter_mut().enumerate().take(n) {
            let idx = _mm512_add_epi64(base, _mm512_set1_epi64(j as i64));
            *o = _mm512_i64gather_epi64::<8>(idx, limbs.as_ptr() as *const _);
        }
    };
    let mut acc = vec![_mm512_setzero_si512(); n];
    gather(0, &digits[0], &mut acc);
    for (i, d) in digits.iter().enumerate().skip(1) {
        if d.iter().all(|&x| x == 0) {
            continue;
        }
        gather(i, d, &mut e);
        montmul(&acc, &e, &mv, mp, &mut t, &mut tmp);
        std::mem::swap(&mut acc, &mut tmp);
    }
    from_mont(n, &acc, &mv, mp, &mut t, &mut tmp)
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn fixed_ifma(_: usize, _: &[u64], _: u64, _: u32, _: &[u64], _: &[[u32; LANES]]) -> Vec<u64> {
    unreachable!("available() is false off x86-64")
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
unsafe fn horner_ifma(n: usize, m: &[u64], mprime: u64, r2: &[u64], cs: &[Vec<u64>], k: u32) -> Vec<u64> {
    use std::arch::x86_64::*;
    let mv = mod_limbs(m, n);
    let r2v: Vec<__m512i> = (0..n).map(|j| _mm512_set1_epi64(r2[j] as i64)).collect();
    let mp = _mm512_set1_epi64(mprime as i64);
    let mut t = vec![_mm512_setzero_si512(); scratch_len(n)];
    let mut tmp = vec![_mm512_setzero_si512(); n];
    let to_mont = |c: &[u64], t: &mut [__m512i], out: &mut Vec<__m512i>| {
        let v: Vec<__m512i> = (0..n).map(|j| _mm512_loadu_si512(c[j * LANES..].as_ptr() as *const _)).collect();
        montmul(&v, &r2v, &mv, mp, t, out);
    };
    let len = cs.len();
    let mut acc = vec![_mm512_setzero_si512(); n];
    to_mont(&cs[len - 1], &mut t, &mut acc);
    let mut ci = vec![_mm512_setzero_si512(); n];
    for i in (0..len - 1).rev() {
        for _ in 0..k {
            montsqr(&acc, &mv, mp, &mut t, &mut tmp);
            std::mem::swap(&mut acc, &mut tmp);
        }
        to_mont(&cs[i], &mut t, &mut ci);
        montmul(&acc, &ci, &mv, mp, &mut t, &mut tmp);
        std::mem::swap(&mut acc, &mut tmp);
    }
    from_mont(n, &acc, &mv, mp, &mut t, &mut tmp)
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn horner_ifma(_: usize, _: &[u64], _: u64, _: &[u64], _: &[Vec<u64>], _: u32) -> Vec<u64> {
    unreachable!("available() is false off x86-64")
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[allow(clippy::too_many_arguments)]
unsafe fn multi_ifma(
    n: usize,
    m: &[u64],
    mprime: u64,
    r2: &[u64],
    r1: &[u64],
    bases: &[Vec<u64>],
    digits: &[Vec<[u8; LANES]>],
    w: u32,
) -> Vec<u64> {
    use std::arch::x86_64::*;
    let mv = mod_limbs(m, n);
    let r2v: Vec<__m512i> = (0..n).map(|j| _mm512_set1_epi64(r2[j] as i64)).collect();
    let mp = _mm512_set1_epi64(mprime as i64);
    let mut t = vec![_mm512_setzero_si512(); scratch_len(n)];
    let mut tmp = vec![_mm512_setzero_si512(); n];
    // per term, table[e − 1] = b^e in Montgomery form for e = 1 … 2^w − 1
    // (b·R²·R^{-1} first; even powers by squaring)
    let per = (1usize << w) - 1;
    let mut tables: Vec<Vec<Vec<__m512i>>> = Vec::with_capacity(bases.len());
    for b in bases {
        let v: Vec<__m512i> = (0..n).map(|j| _mm512_loadu_si512(b[j * LANES..].as_ptr() as *const _)).collect();
        let mut tab: Vec<Vec<__m512i>> = Vec::with_capacity(per);
        let mut o = vec![_mm512_setzero_si512(); n];
        montmul(&v, &r2v, &mv, mp, &mut t, &mut o);
        tab.push(o);
        for e in 2..=per {
            let mut o = vec![_mm512_setzero_si512(); n];
            if e % 2 == 0 {
                montsqr(&tab[e / 2 - 1], &mv, mp, &mut t, &mut o);
            } else {
                montmul(&tab[e - 2], &tab[0], &mv, mp, &mut t, &mut o);
            }
            tab.push(o);
        }
        tables.push(tab);
    }
    let mut acc: Vec<__m512i> = (0..n).map(|j| _mm512_set1_epi64(r1[j] as i64)).collect();
    // the selected entries (lanes whose digit is 0 keep stale, still
    // reduced, values, and their products are blended away)
    let mut sel: Vec<__m512i> = (0..n).map(|j| _mm512_set1_epi64(r1[j] as i64)).collect();
    let windows = digits.first().map_or(0, Vec::len);
    // acc is still one (R) in every lane: the first product is a blend
    let mut fresh = true;
    for i in (0..windows).rev() {
        if i + 1 < windows {
            for _ in 0..w {
                montsqr(&acc, &mv, mp, &mut t, &mut tmp);
                std::mem::swap(&mut acc, &mut tmp);
            }
        }
        for (tab, dg) in tables.iter().zip(digits) {
            let d = &dg[i];
            // lane masks per digit value
            let mut by_digit = [0u8; 16];
            for (k, &dk) in d.iter().enumerate() {
                by_digit[dk as usize] |= 1 << k;
            }
            let nz = !by_digit[0];
            if nz == 0 {
                continue;
            }
            let b: &[__m512i] = match (1..=per).find(|&e| by_digit[e] == nz) {
                // every multiplying lane wants the same entry
                Some(e) => &tab[e - 1],
                None => {
                    for e in 1..=per {
                        let k = by_digit[e];
                        if k != 0 {
                            for j in 0..n {
                                sel[j] = _mm512_mask_blend_epi64(k, sel[j], tab[e - 1][j]);
                            }
                        }
                    }
                    &sel
                }
            };
            if fresh {
                // one · b = b in the multiplying lanes, one elsewhere
                for j in 0..n {
                    acc[j] = _mm512_mask_blend_epi64(nz, acc[j], b[j]);
                }
                fresh = false;
                continue;
            }
            montmul(&acc, b, &mv, mp, &mut t, &mut tmp);
            if nz == 0xff {
                std::mem::swap(&mut acc, &mut tmp);
            } else {
                for j in 0..n {
                    acc[j] = _mm512_mask_blend_epi64(nz, acc[j], tmp[j]);
                }
            }
        }
    }
    from_mont(n, &acc, &mv, mp, &mut t, &mut tmp)
}

#[cfg(not(target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments)]
unsafe fn multi_ifma(_: usize, _: &[u64], _: u64, _: &[u64], _: &[u64], _: &[Vec<u64>], _: &[Vec<[u8; LANES]>], _: u32) -> Vec<u64> {
    unreachable!("available() is false off x86-64")
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[allow(clippy::too_many_arguments)]
unsafe fn pow_ifma(n: usize, m: &[u64], mprime: u64, x: &[u64], one: &[u64], bits: u32, win: &dyn Fn(u32) -> usize, squarings: Option<u32>) -> Vec<u64> {
    use std::arch::x86_64::*;
    let mut xv = Vec::with_capacity(n);
    let mut onev = Vec::with_capacity(n);
    let mv = mod_limbs(m, n);
    for j in 0..n {
        xv.push(_mm512_loadu_si512(x[j * LANES..].as_ptr() as *const _));
        onev.push(_mm512_loadu_si512(one[j * LANES..].as_ptr() as *const _));
    }
    let mp = _mm512_set1_epi64(mprime as i64);
    let mut t = vec![_mm512_setzero_si512(); scratch_len(n)];
    let mut tmp = vec![_mm512_setzero_si512(); n];
    if let Some(k) = squarings {
        let mut acc = xv;
        for _ in 0..k {
            montsqr(&acc, &mv, mp, &mut t, &mut tmp);
            std::mem::swap(&mut acc, &mut tmp);
        }
        return from_mont(n, &acc, &mv, mp, &mut t, &mut tmp);
    }
    // table[k] = x^k (Montgomery form), k < 2^W
    let mut table: Vec<Vec<__m512i>> = Vec::with_capacity(1 << W);
    table.push(onev);
    table.push(xv);
    for k in 2..(1usize << W) {
        let mut o = vec![_mm512_setzero_si512(); n];
        montmul(&table[k - 1], &table[1], &mv, mp, &mut t, &mut o);
        table.push(o);
    }
    let mut acc = table[0].clone();
    let top = bits.div_ceil(W) * W;
    let mut i = top;
    let mut first = true;
    while i > 0 {
        i -= W;
        if !first {
            for _ in 0..W {
                montsqr(&acc, &mv, mp, &mut t, &mut tmp);
                std::mem::swap(&mut acc, &mut tmp);
            }
        }
        let w = win(i);
        if first {
            acc = table[w].clone();
            first = false;
        } else if w != 0 {
            montmul(&acc, &table[w], &mv, mp, &mut t, &mut tmp);
            std::mem::swap(&mut acc, &mut tmp);
        }
    }
    // wipe the table (powers of ciphertexts under a secret modulus: not
    // secret themselves, but cheap to clear)
    for v in table.iter_mut().flatten() {
        std::ptr::write_volatile(v, _mm512_setzero_si512());
    }
    from_mont(n, &acc, &mv, mp, &mut t, &mut tmp)
}

/// Out of Montgomery form (acc·R^{-1}, one reduction), lane-interleaved limbs.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
unsafe fn from_mont(
    n: usize,
    acc: &[std::arch::x86_64::__m512i],
    mv: &[std::arch::x86_64::__m512i],
    mp: std::arch::x86_64::__m512i,
    t: &mut [std::arch::x86_64::__m512i],
    tmp: &mut [std::arch::x86_64::__m512i],
) -> Vec<u64> {
    use std::arch::x86_64::*;
    // acc·1 is acc itself: the reduction alone, no product
    assert!(t.len() >= 2 * n + 2 * ROWS && acc.len() >= n && tmp.len() >= n);
    for (j, v) in t.iter_mut().enumerate().take(2 * n + 2 * ROWS) {
        *v = if j < n { acc[j] } else { _mm512_setzero_si512() };
    }
    redc::<false>(n, t.as_mut_ptr(), mv, mp, tmp, std::ptr::null_mut());
    let mut out = vec![0u64; n * LANES];
    for j in 0..n {
        _mm512_storeu_si512(out[j * LANES..].as_mut_ptr() as *mut _, tmp[j]);
    }
    for v in t.iter_mut() {
        std::ptr::write_volatile(v, _mm512_setzero_si512());
    }
    out
}

#[cfg(not(target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments)]
unsafe fn pow_ifma(_: usize, _: &[u64], _: u64, _: &[u64], _: &[u64], _: u32, _: &dyn Fn(u32) -> usize, _: Option<u32>) -> Vec<u64> {
    unreachable!("available() is false off x86-64")
}

/// v + lo52(x·y) and v + hi52(x·y), lane by lane (inlined in the callers'
/// target-feature context).
macro_rules! madd_lo {
    ($v:expr, $x:expr, $y:expr) => {
        std::arch::x86_64::_mm512_madd52lo_epu64($v, $x, $y)
    };
}
macro_rules! madd_hi {
    ($v:expr, $x:expr, $y:expr) => {
        std::arch::x86_64::_mm512_madd52hi_epu64($v, $x, $y)
    };
}

pub mod n2;

/// Rows (or quotient limbs) handled per pass of the kernels below: each
/// limb of the running sum is loaded and stored once per pass and takes
/// 2·[`ROWS`] IFMA operations in between, so the loop is bound by the two
/// IFMA ports rather than by loads, stores and loop overhead (with two rows
/// per pass it ran at about half the ports' rate on a Golden Cove core).
const ROWS: usize = 4;

/// Scratch limbs [`montsqr`]/[`montmul`] need for n-limb operands: the
/// running sum (2n + 2·ROWS) and a zero-padded copy of one operand
/// (ROWS in front, 2·ROWS behind).
pub(crate) const fn scratch_len(n: usize) -> usize {
    3 * n + 5 * ROWS
}

/// The modulus limbs broadcast to all lanes, zero-padded by 2·ROWS limbs
/// (the kernels read past the top limb instead of special-casing the edge).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn mod_limbs(m: &[u64], n: usize) -> Vec<std::arch::x86_64::__m512i> {
    use std::arch::x86_64::*;
    (0..n + 2 * ROWS).map(|j| _mm512_set1_epi64(if j < n { m[j] as i64 } else { 0 })).collect()
}

/// t\[r\] += Σ_k lo(y\[r−k\]·x_k) + hi(y\[r−k−1\]·x_k) for r in from..to: the
/// inner loop of every kernel. y is read through a window of ROWS + 1
/// registers shifted by one limb per position (one load per position
/// instead of 2·ROWS: with the loads folded into the IFMA operands, the
/// load ports, not the IFMA ports, bounded the loop). `y` may point into
/// the middle of an allocation; only y\[from−ROWS−1 … to−1\] is read.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
unsafe fn accumulate_rows<const INIT: bool, const Z: bool, const HEAD: bool, const TAIL: bool, const FRESH: bool>(
    t: *mut std::arch::x86_64::__m512i,
    y: *const std::arch::x86_64::__m512i,
    x: &[std::arch::x86_64::__m512i; ROWS],
    from: usize,
    to: usize,
) {
    // named registers (an array here was kept on the stack and shifted
    // through memory)
    const _: () = assert!(ROWS == 4, "accumulate_rows is written out for four rows");
    // Z: the edges whose operand limbs are known zero take only their
    // non-zero terms (module docs of `n2`, Zen 4 schedule)
    let edges = ROWS * (usize::from(HEAD) + usize::from(TAIL));
    let head = Z && HEAD && to >= from + edges;
    let tail = Z && TAIL && to >= from + edges;
    let (from, to) = (from + if head { ROWS } else { 0 }, to - if tail { ROWS } else { 0 });
    if head {
        edge_rows::<INIT, true>(t, y, x, from - ROWS);
    }
    if tail {
        // FRESH: the tail positions hold nothing yet (a product's pass
        // reaches ROWS positions past the previous pass's): written, not
        // added to, so the caller zeroes nothing there
        if INIT || FRESH {
            edge_rows::<true, false>(t, y, x, to);
        } else {
            edge_rows::<false, false>(t, y, x, to);
        }
    }
    let at = |j: isize| *y.wrapping_offset(j);
    let f = from as isize;
    let (mut w1, mut w2, mut w3, mut w4) = (at(f - 1), at(f - 2), at(f - 3), at(f - 4));
    let [x0, x1, x2, x3] = *x;
    // one position: y[r] in w0, y[r−1] … y[r−4] in w1 … w4
    macro_rules! step {
        ($r:expr, $w0:ident, $w1:ident, $w2:ident, $w3:ident, $w4:ident) => {{
            $w0 = *y.wrapping_add($r);
            let p = t.add($r);
            // INIT: the first pass over fresh scratch writes, not adds
            let mut v = if INIT { std::arch::x86_64::_mm512_setzero_si512() } else { *p };
            if Z {
                // two chains (lo and hi terms): half the latency per
                // position, so fewer positions need to be in flight
                let mut h = std::arch::x86_64::_mm512_setzero_si512();
                v = madd_lo!(v, $w0, x0);
                h = madd_hi!(h, $w1, x0);
                v = madd_lo!(v, $w1, x1);
                h = madd_hi!(h, $w2, x1);
                v = madd_lo!(v, $w2, x2);
                h = madd_hi!(h, $w3, x2);
                v = madd_lo!(v, $w3, x3);
                h = madd_hi!(h, $w4, x3);
                v = std::arch::x86_64::_mm512_add_epi64(v, h);
            } else {
                v = madd_lo!(v, $w0, x0);
                v = madd_hi!(v, $w1, x0);
                v = madd_lo!(v, $w1, x1);
                v = madd_hi!(v, $w2, x1);
                v = madd_lo!(v, $w2, x2);
                v = madd_hi!(v, $w3, x2);
                v = madd_lo!(v, $w3, x3);
                v = madd_hi!(v, $w4, x3);
            }
            *p = v;
        }};
    }
    // five positions per round, the register names rotating instead of
    // the values (no moves)
    let mut w0;
    let mut r = from;
    while r + 5 <= to {
        step!(r, w0, w1, w2, w3, w4);
        step!(r + 1, w4, w0, w1, w2, w3);
        step!(r + 2, w3, w4, w0, w1, w2);
        step!(r + 3, w2, w3, w4, w0, w1);
        step!(r + 4, w1, w2, w3, w4, w0);
        r += 5;
    }
    while r < to {
        step!(r, w0, w1, w2, w3, w4);
        (w4, w3, w2, w1) = (w3, w2, w1, w0);
        r += 1;
    }
}

/// The ROWS edge positions r0 … r0+3 of [`accumulate_rows`] with their
/// zero terms left out: HEAD, the first ones, where y\[j\] = 0 for j < r0
/// (term y\[r−j\] kept when j ≤ r − r0); else the last ones, where
/// y\[j\] = 0 for j ≥ r0 (kept when r − j < r0). 16 of the 32 IFMA
/// operations are left out.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
unsafe fn edge_rows<const INIT: bool, const HEAD: bool>(
    t: *mut std::arch::x86_64::__m512i,
    y: *const std::arch::x86_64::__m512i,
    x: &[std::arch::x86_64::__m512i; ROWS],
    r0: usize,
) {
    use std::arch::x86_64::*;
    for d in 0..ROWS {
        let r = r0 + d;
        // term y[r − j] is non-zero
        let live = |j: usize| if HEAD { j <= d } else { j > d };
        let w = |j: usize| *y.wrapping_add(r).wrapping_sub(j);
        let p = t.add(r);
        let mut v = if INIT { _mm512_setzero_si512() } else { *p };
        let mut h = _mm512_setzero_si512();
        for (k, &xk) in x.iter().enumerate() {
            if live(k) {
                v = madd_lo!(v, w(k), xk);
            }
            if live(k + 1) {
                h = madd_hi!(h, w(k + 1), xk);
            }
        }
        *p = _mm512_add_epi64(v, h);
    }
}

/// A carry out of a 52-bit limb: v >> 52, arithmetic with Z (the Zen 4
/// schedule's sums may hold negative limbs, `n2`'s Karatsuba middle
/// terms), logical otherwise; the same for limbs below 2^63.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn shr52<const Z: bool>(v: std::arch::x86_64::__m512i) -> std::arch::x86_64::__m512i {
    use std::arch::x86_64::*;
    if Z {
        _mm512_srai_epi64(v, 52)
    } else {
        _mm512_srli_epi64(v, 52)
    }
}

/// Montgomery reduction of the 2n-limb sum at `t` (unnormalised limbs,
/// each below 2^62), ROWS quotient limbs per pass: the quotient limbs
/// q_i … q_{i+3} are found one after another from the low limbs, then one
/// pass adds q_i·M … q_{i+3}·M to every higher limb. Passes left over when
/// n is not a multiple of ROWS take one quotient limb each. Writes the
/// normalised result (t[n..2n], < 2M) to `out`, and, when `qout` is not
/// null, the quotient limbs q_0 … q_{n−1} to `qout[0..n]` (so that
/// T + Q·M = R·out exactly, Q = Σ q_i·2^{52i}: [`n2`] needs Q).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
unsafe fn redc<const Z: bool>(
    n: usize,
    t: *mut std::arch::x86_64::__m512i,
    m: &[std::arch::x86_64::__m512i],
    mp: std::arch::x86_64::__m512i,
    out: &mut [std::arch::x86_64::__m512i],
    qout: *mut std::arch::x86_64::__m512i,
) {
    redc_with::<Z, _>(n, t, m, mp, out, qout, |_| {});
}

/// [`redc`], calling `extra(p)` once per pass p = 0 … ⌈n/ROWS⌉ − 1, after
/// the next pass's quotient chain is issued and before this pass's rows
/// are added: independent work placed there (a pass of another product,
/// [`product_pass`]) fills the IFMA ports while the chain's latency runs.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn redc_with<const Z: bool, F: FnMut(usize)>(
    n: usize,
    t: *mut std::arch::x86_64::__m512i,
    m: &[std::arch::x86_64::__m512i],
    mp: std::arch::x86_64::__m512i,
    out: &mut [std::arch::x86_64::__m512i],
    qout: *mut std::arch::x86_64::__m512i,
    mut extra: F,
) {
    use std::arch::x86_64::*;
    let mut pass = 0;
    debug_assert!(m.len() >= n + 2 * ROWS);
    let zero = _mm512_setzero_si512();
    let mask = _mm512_set1_epi64(MASK52 as i64);
    let m = m.as_ptr();
    // Quotient limbs q_i … q_{i+3} from the four low limbs `pre` of the
    // pass (position i+d, unnormalised) and the carry into position i: q_d
    // is found from position i+d, then its products with the modulus's low
    // limbs go to the higher positions of the four at once, into two
    // accumulators per position (hi terms and lo terms, two independent
    // IFMAs: the serial path per quotient limb is one IFMA for q_d, one
    // for its products and two additions). Returns the quotient limbs and
    // the carry into position i+ROWS.
    let quotients = |mut pre: [__m512i; ROWS], carry_in: __m512i| -> ([__m512i; ROWS], __m512i) {
        let mut lo = [zero; ROWS];
        let mut q = [zero; ROWS];
        let mut carry = carry_in;
        for d in 0..ROWS {
            let x = _mm512_add_epi64(_mm512_add_epi64(pre[d], lo[d]), carry);
            q[d] = madd_lo!(zero, x, mp);
            carry = if Z {
                // x + lo(m₀·q) ≡ 0 (mod 2^52), so its carry is x's plus one
                // when x's low limb is non-zero: no IFMA on the chain
                let nz = _mm512_test_epi64_mask(x, mask);
                let c = _mm512_srai_epi64(x, 52);
                _mm512_mask_add_epi64(c, nz, c, _mm512_set1_epi64(1))
            } else {
                shr52::<Z>(madd_lo!(x, *m, q[d]))
            };
            for j in d + 1..ROWS {
                pre[j] = madd_hi!(pre[j], *m.add(j - d - 1), q[d]);
                lo[j] = madd_lo!(lo[j], *m.add(j - d), q[d]);
            }
        }
        (q, carry)
    };
    // positions i+ROWS … i+2·ROWS−1 with the pass's quotient rows, not
    // stored (only the next pass's quotients read them): two chains per
    // position (lo terms from the stored value, hi terms from zero) halve
    // the latency the next quotient chain waits for
    let first = |i: usize, q: &[__m512i; ROWS]| -> [__m512i; ROWS] {
        let mut out = [zero; ROWS];
        for (d, o) in out.iter_mut().enumerate() {
            let r = ROWS + d;
            let mut a = *t.add(i + r);
            let mut b = zero;
            for (k, &qk) in q.iter().enumerate() {
                a = madd_lo!(a, *m.add(r - k), qk);
                b = madd_hi!(b, *m.add(r - k - 1), qk);
            }
            *o = _mm512_add_epi64(a, b);
        }
        out
    };
    let mut i = 0;
    let (mut q, mut carry) = if ROWS <= n {
        let mut pre = [zero; ROWS];
        for (d, p) in pre.iter_mut().enumerate() {
            *p = *t.add(d);
        }
        quotients(pre, zero)
    } else {
        ([zero; ROWS], zero)
    };
    while i + ROWS <= n {
        if !qout.is_null() {
            for (d, &qd) in q.iter().enumerate() {
                *qout.add(i + d) = qd;
            }
        }
        // the next pass's low limbs first, so its quotient chain (serial
        // IFMA latency) is issued here and overlaps the rest of this pass
        let (next, next_carry) = if i + 2 * ROWS <= n {
            quotients(first(i, &q), carry)
        } else {
            // the last pass: its positions i+ROWS… are the result's low
            // limbs; the carry goes to position i+ROWS
            *t.add(i + ROWS) = _mm512_add_epi64(*t.add(i + ROWS), carry);
            accumulate_rows::<false, Z, false, false, false>(t.add(i), m, &q, ROWS, 2 * ROWS);
            ([zero; ROWS], zero)
        };
        extra(pass);
        pass += 1;
        accumulate_rows::<false, Z, false, true, false>(t.add(i), m, &q, 2 * ROWS, n + ROWS);
        q = next;
        carry = next_carry;
        i += ROWS;
    }
    while pass < n.div_ceil(ROWS) {
        extra(pass);
        pass += 1;
    }
    if i < n {
        // a tail of single quotient limbs: the carry into position i first
        *t.add(i) = _mm512_add_epi64(*t.add(i), carry);
    }
    for i in i..n {
        let x = *t.add(i);
        let q = madd_lo!(zero, x, mp);
        if !qout.is_null() {
            *qout.add(i) = q;
        }
        let x = madd_lo!(x, *m, q);
        *t.add(i + 1) = _mm512_add_epi64(*t.add(i + 1), shr52::<Z>(x));
        for r in 1..=n {
            let p = t.add(i + r);
            let mut v = *p;
            v = madd_lo!(v, *m.add(r), q);
            v = madd_hi!(v, *m.add(r - 1), q);
            *p = v;
        }
    }
    let mut c = zero;
    for (j, o) in out.iter_mut().enumerate().take(n) {
        let v = _mm512_add_epi64(*t.add(n + j), c);
        *o = _mm512_and_si512(v, mask);
        c = shr52::<Z>(v);
    }
}

/// out = a²·R^{-1} mod M (< 2M) for a < 2M (n = a.len() normalised 52-bit
/// limbs): the cross products a_i·a_j (i < j) once, [`ROWS`] rows per pass
/// by product scanning, doubled, plus the squares (n² + n IFMA operations
/// instead of 2n²), then [`redc`]. `m` comes from [`mod_limbs`]; `t` has
/// [`scratch_len`] limbs.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
unsafe fn montsqr(
    a: &[std::arch::x86_64::__m512i],
    m: &[std::arch::x86_64::__m512i],
    mp: std::arch::x86_64::__m512i,
    t: &mut [std::arch::x86_64::__m512i],
    out: &mut [std::arch::x86_64::__m512i],
) {
    let n = a.len();
    assert!(t.len() >= scratch_len(n) && m.len() >= n + 2 * ROWS && out.len() >= n);
    sqr_product::<false>(a, t);
    redc::<false>(n, t.as_mut_ptr(), m, mp, out, std::ptr::null_mut());
}

/// The square a² (unnormalised limbs) into t\[0 .. 2n + 2·ROWS\], t's
/// rest as scratch (t has [`scratch_len`] limbs): the product phase of
/// [`montsqr`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
unsafe fn sqr_product<const Z: bool>(a: &[std::arch::x86_64::__m512i], t: &mut [std::arch::x86_64::__m512i]) {
    let n = a.len();
    assert!(t.len() >= scratch_len(n));
    sqr_setup(a, t);
    for p in 0..n.div_ceil(ROWS) {
        sqr_pass::<Z>(n, t.as_mut_ptr(), p);
    }
    sqr_finish(n, t.as_mut_ptr());
}

/// The set-up of [`sqr_product`]: a copied into t's pad (2·ROWS zero limbs
/// behind), the sum's positions the first pass does not write set to zero.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
unsafe fn sqr_setup(a: &[std::arch::x86_64::__m512i], t: &mut [std::arch::x86_64::__m512i]) {
    use std::arch::x86_64::*;
    let n = a.len();
    assert!(t.len() >= scratch_len(n));
    let zero = _mm512_setzero_si512();
    let (sum, pad) = t.split_at_mut(2 * n + 2 * ROWS);
    // pad[j] = a_j, zero for j ≥ n (slice copies: a loop with a test per
    // limb took a sixth of a small product's time)
    pad[..n].copy_from_slice(a);
    pad[n..n + 2 * ROWS].fill(zero);
    // the first pass writes positions 1 … n+ROWS−1; the rest starts at zero
    sum[0] = zero;
    for v in sum.iter_mut().skip(n + ROWS) {
        *v = zero;
    }
}

/// Pass p of [`sqr_product`] (rows a_{4p} … a_{4p+3}, cross products
/// only), after [`sqr_setup`] on the same t of [`scratch_len`]`(n)` limbs;
/// passes with 4p + 1 ≥ n do nothing.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
unsafe fn sqr_pass<const Z: bool>(n: usize, t: *mut std::arch::x86_64::__m512i, p: usize) {
    use std::arch::x86_64::*;
    let zero = _mm512_setzero_si512();
    let ap = t.add(2 * n + 2 * ROWS) as *const __m512i;
    let tp = t;
    let i = p * ROWS;
    if i + 1 >= n {
        return;
    }
    let mut x = [zero; ROWS];
    for (k, xk) in x.iter_mut().enumerate() {
        *xk = *ap.add(i + k);
    }
    // position 2i + d: row i+k contributes lo(x_k·a_j) with j = i+d−k
    // when j > i+k (d ≥ 2k+1), and hi(x_k·a_{j−1}) when j−1 > i+k
    // (d ≥ 2k+2); from d = 2·ROWS on, every row contributes both
    for d in 1..2 * ROWS {
        let p = tp.add(2 * i + d);
        let mut v = if i == 0 { zero } else { *p };
        for (k, &xk) in x.iter().enumerate() {
            if d > 2 * k {
                v = madd_lo!(v, xk, *ap.add(i + d - k));
            }
            if d > 2 * k + 1 {
                v = madd_hi!(v, xk, *ap.add(i + d - k - 1));
            }
        }
        *p = v;
    }
    if 2 * i + 2 * ROWS < i + n + ROWS {
        // positions q ≥ 2i + 2·ROWS: y[q] = a_{q−i}
        if i == 0 {
            accumulate_rows::<true, Z, false, true, false>(tp, ap, &x, 2 * ROWS, n + ROWS);
        } else {
            accumulate_rows::<false, Z, false, true, false>(tp, ap.wrapping_sub(i), &x, 2 * i + 2 * ROWS, i + n + ROWS);
        }
    }
}

/// The end of [`sqr_product`]: the cross products doubled, plus the
/// squares, in one sweep.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
unsafe fn sqr_finish(n: usize, t: *mut std::arch::x86_64::__m512i) {
    use std::arch::x86_64::*;
    let ap = t.add(2 * n + 2 * ROWS) as *const __m512i;
    for j in 0..n {
        let aj = *ap.add(j);
        let (p0, p1) = (t.add(2 * j), t.add(2 * j + 1));
        *p0 = madd_lo!(_mm512_add_epi64(*p0, *p0), aj, aj);
        *p1 = madd_hi!(_mm512_add_epi64(*p1, *p1), aj, aj);
    }
}

/// out = a·b·R^{-1} mod M (< 2M) for a, b < 2M, all limbs normalised to 52
/// bits: the full product by product scanning, [`ROWS`] limbs of b per
/// pass (a read from a copy padded with ROWS zero limbs in front and
/// 2·ROWS behind, so every position takes the same 2·ROWS operations), then
/// [`redc`]. `m` comes from [`mod_limbs`]; `t` has [`scratch_len`] limbs.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
unsafe fn montmul(
    a: &[std::arch::x86_64::__m512i],
    b: &[std::arch::x86_64::__m512i],
    m: &[std::arch::x86_64::__m512i],
    mp: std::arch::x86_64::__m512i,
    t: &mut [std::arch::x86_64::__m512i],
    out: &mut [std::arch::x86_64::__m512i],
) {
    let n = a.len();
    assert!(b.len() >= n && t.len() >= scratch_len(n) && m.len() >= n + 2 * ROWS && out.len() >= n);
    mul_product::<true, false>(a, b, t);
    redc::<false>(n, t.as_mut_ptr(), m, mp, out, std::ptr::null_mut());
}

/// The product a·b (unnormalised limbs) written (INIT) or added (not INIT)
/// to t\[0 .. 2n + 2·ROWS\], t's rest as scratch (t has [`scratch_len`]
/// limbs): the product phase of [`montmul`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
unsafe fn mul_product<const INIT: bool, const Z: bool>(a: &[std::arch::x86_64::__m512i], b: &[std::arch::x86_64::__m512i], t: &mut [std::arch::x86_64::__m512i]) {
    let n = a.len();
    assert!(b.len() >= n && t.len() >= scratch_len(n));
    product_setup::<INIT>(a, t);
    for p in 0..n.div_ceil(ROWS) {
        product_pass::<INIT, Z>(n, b, t.as_mut_ptr(), p);
    }
}

/// The set-up of [`mul_product`]: a copied into t's pad (ROWS zero limbs in
/// front, 2·ROWS behind), and with INIT the sum's positions the first
/// pass does not write set to zero.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
unsafe fn product_setup<const INIT: bool>(a: &[std::arch::x86_64::__m512i], t: &mut [std::arch::x86_64::__m512i]) {
    use std::arch::x86_64::*;
    let n = a.len();
    assert!(t.len() >= scratch_len(n));
    let zero = _mm512_setzero_si512();
    let (sum, pad) = t.split_at_mut(2 * n + 2 * ROWS);
    // pad[ROWS + j] = a_j, zero outside 0 ≤ j < n
    pad[..ROWS].fill(zero);
    pad[ROWS..n + ROWS].copy_from_slice(a);
    pad[n + ROWS..n + 3 * ROWS].fill(zero);
    // the first pass writes positions 0 … n+ROWS−1; the rest starts at zero
    if INIT {
        for v in sum.iter_mut().skip(n + ROWS) {
            *v = zero;
        }
    }
}

/// a·b for n = a.len() limbs (n a non-zero multiple of ROWS, normalised)
/// written (INIT) or added (not INIT) to t\[0 .. 2n\], unnormalised: the
/// Zen 4 schedule's product ([`accumulate_rows`] with trimmed edges reads
/// no limb outside a, so a is read in place, not copied into a pad).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
unsafe fn zmul<const INIT: bool>(a: &[std::arch::x86_64::__m512i], b: &[std::arch::x86_64::__m512i], t: &mut [std::arch::x86_64::__m512i]) {
    let n = a.len();
    assert!(n >= ROWS && n.is_multiple_of(ROWS) && b.len() >= n && t.len() >= 2 * n);
    for i in (0..n).step_by(ROWS) {
        zmul_pass::<INIT>(a, b, t.as_mut_ptr(), i);
    }
}

/// The pass of [`zmul`] for rows b_i … b_{i+3} (i a multiple of ROWS below
/// n = a.len()), t with 2n limbs; the passes in order i = 0, ROWS, …, or
/// interleaved with other work.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
unsafe fn zmul_pass<const INIT: bool>(a: &[std::arch::x86_64::__m512i], b: &[std::arch::x86_64::__m512i], t: *mut std::arch::x86_64::__m512i, i: usize) {
    let n = a.len();
    debug_assert!(n >= ROWS && n.is_multiple_of(ROWS) && i.is_multiple_of(ROWS) && i < n && b.len() >= n);
    let x = [b[i], b[i + 1], b[i + 2], b[i + 3]];
    if INIT && i == 0 {
        // the first pass writes positions 0 … n+ROWS−1
        accumulate_rows::<true, true, true, true, false>(t, a.as_ptr(), &x, 0, n + ROWS);
    } else if INIT {
        // and each later one its last ROWS positions (i+n … i+n+ROWS−1)
        // first: nothing to zero beforehand
        accumulate_rows::<false, true, true, true, true>(t.add(i), a.as_ptr(), &x, 0, n + ROWS);
    } else {
        accumulate_rows::<false, true, true, true, false>(t.add(i), a.as_ptr(), &x, 0, n + ROWS);
    }
}

/// a² for n = a.len() limbs (n a non-zero multiple of ROWS, normalised)
/// written to t\[0 .. 2n\], unnormalised: [`sqr_product`] for the Zen 4
/// schedule, reading a in place (no padded copy: the trimmed edges of
/// [`accumulate_rows`] and the guarded triangle read no limb past a).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
unsafe fn zsqr(a: &[std::arch::x86_64::__m512i], t: &mut [std::arch::x86_64::__m512i]) {
    use std::arch::x86_64::*;
    let n = a.len();
    assert!(n >= ROWS && n.is_multiple_of(ROWS) && t.len() >= 2 * n);
    let zero = _mm512_setzero_si512();
    // the first pass writes positions 1 … n+ROWS−1 and each later one its
    // last ROWS positions first (FRESH), but for the last pass's triangle
    // past them
    t[0] = zero;
    t[2 * n - ROWS..2 * n].fill(zero);
    let (ap, tp) = (a.as_ptr(), t.as_mut_ptr());
    for i in (0..n).step_by(ROWS) {
        let x = [a[i], a[i + 1], a[i + 2], a[i + 3]];
        // positions 2i + d as in [`sqr_pass`], terms past a left out
        for d in 1..2 * ROWS {
            let p = tp.add(2 * i + d);
            let mut v = if i == 0 { zero } else { *p };
            for (k, &xk) in x.iter().enumerate() {
                // a_j with j = i + d − k (lo) and a_{j−1} (hi)
                if d > 2 * k && i + d - k < n {
                    v = madd_lo!(v, xk, *ap.add(i + d - k));
                }
                if d > 2 * k + 1 && i + d - k - 1 < n {
                    v = madd_hi!(v, xk, *ap.add(i + d - k - 1));
                }
            }
            *p = v;
        }
        if 2 * i + 2 * ROWS < i + n + ROWS {
            // at least ROWS positions, the last ROWS of them the trimmed
            // tail: no read past a
            debug_assert!(i + n + ROWS >= 2 * i + 3 * ROWS);
            if i == 0 {
                accumulate_rows::<true, true, false, true, false>(tp, ap, &x, 2 * ROWS, n + ROWS);
            } else {
                accumulate_rows::<false, true, false, true, true>(tp, ap.wrapping_sub(i), &x, 2 * i + 2 * ROWS, i + n + ROWS);
            }
        }
    }
    for (j, &aj) in a.iter().enumerate() {
        let (p0, p1) = (tp.add(2 * j), tp.add(2 * j + 1));
        *p0 = madd_lo!(_mm512_add_epi64(*p0, *p0), aj, aj);
        *p1 = madd_hi!(_mm512_add_epi64(*p1, *p1), aj, aj);
    }
}

/// Pass p of [`mul_product`] (after [`product_setup`] on the same t, of
/// [`scratch_len`]`(n)` limbs): rows b_{4p} … b_{4p+3}.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
unsafe fn product_pass<const INIT: bool, const Z: bool>(n: usize, b: &[std::arch::x86_64::__m512i], t: *mut std::arch::x86_64::__m512i, p: usize) {
    product_pass_with::<INIT, Z>(n, b, t, t.add(2 * n + 2 * ROWS) as *const _, p);
}

/// a copied into `pad` (n + 3·ROWS limbs) as [`product_setup`] lays it out,
/// for [`product_pass_with`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn pad_operand(a: &[std::arch::x86_64::__m512i], pad: &mut [std::arch::x86_64::__m512i]) {
    use std::arch::x86_64::*;
    let n = a.len();
    let zero = _mm512_setzero_si512();
    pad[..ROWS].fill(zero);
    pad[ROWS..n + ROWS].copy_from_slice(a);
    pad[n + ROWS..n + 3 * ROWS].fill(zero);
}

/// [`product_pass`] with the padded operand at `pad` ([`pad_operand`])
/// instead of in t: two products into one sum, pass by pass.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512ifma")]
#[inline]
unsafe fn product_pass_with<const INIT: bool, const Z: bool>(n: usize, b: &[std::arch::x86_64::__m512i], t: *mut std::arch::x86_64::__m512i, pad: *const std::arch::x86_64::__m512i, p: usize) {
    use std::arch::x86_64::*;
    let zero = _mm512_setzero_si512();
    let ap = pad.add(ROWS);
    let i = p * ROWS;
    let mut x = [zero; ROWS];
    for (k, xk) in x.iter_mut().enumerate() {
        if i + k < n {
            *xk = b[i + k];
        }
    }
    // position i + d collects lo(b_{i+k}·a_{d−k}) and hi(b_{i+k}·a_{d−k−1})
    if INIT && i == 0 {
        accumulate_rows::<true, Z, true, true, false>(t, ap, &x, 0, n + ROWS);
    } else {
        accumulate_rows::<false, Z, true, true, false>(t.add(i), ap, &x, 0, n + ROWS);
    }
}


/// Kernel timing for tuning (not API): ns per eight-lane squaring,
/// multiplication and reduction alone, over `reps` repetitions.
#[doc(hidden)]
pub fn kernel_timings(modulus: &Integer, reps: usize) -> Option<[f64; 3]> {
    let ctx = MontCtx::new(modulus)?;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: MontCtx::new checked available().
    unsafe {
        use std::arch::x86_64::*;
        let n = ctx.n;
        let mv = mod_limbs(&ctx.m, n);
        let mp = _mm512_set1_epi64(ctx.mprime as i64);
        let mut t = vec![_mm512_setzero_si512(); scratch_len(n)];
        let mut a: Vec<__m512i> = (0..n).map(|j| _mm512_set1_epi64(ctx.r2[j] as i64)).collect();
        let mut o = a.clone();
        let time = |f: &mut dyn FnMut()| {
            let s = std::time::Instant::now();
            for _ in 0..reps {
                f();
            }
            s.elapsed().as_secs_f64() * 1e9 / reps as f64
        };
        let sq = time(&mut || {
            montsqr(&a, &mv, mp, &mut t, &mut o);
            std::mem::swap(&mut a, &mut o);
        });
        let b = a.clone();
        let mul = time(&mut || {
            montmul(&a, &b, &mv, mp, &mut t, &mut o);
            std::mem::swap(&mut a, &mut o);
        });
        let red = time(&mut || {
            for (j, v) in t.iter_mut().enumerate().take(2 * n) {
                *v = if j < n { a[j] } else { _mm512_setzero_si512() };
            }
            redc::<false>(n, t.as_mut_ptr(), &mv, mp, &mut o, std::ptr::null_mut());
            std::mem::swap(&mut a, &mut o);
        });
        std::hint::black_box(&a);
        Some([sq, mul, red])
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}
