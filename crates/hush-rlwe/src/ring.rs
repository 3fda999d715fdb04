//! The ring R_q = Z_q\[X\]/(X^N + 1) in RNS form on tfhe-ntt's negacyclic
//! NTT (no NTT code here), samplers, the exact 2^ℓ encoding and modulus
//! switching to a power of two.
//!
//! A polynomial is a `Vec<u64>` of length L·N, prime-major: the residues
//! mod p_i of its N coefficients at `[i·N, (i+1)·N)`, each in [0, p_i).

use crate::params::Params;
use crate::{Error, Result};
use hush_primitives::{Block, Prg};
use tfhe_ntt::prime64::Plan;

/// Errors are centered binomial with η = 21: e = Σ_{21} b_j − Σ_{21} b'_j,
/// σ = √(21/2) ≈ 3.24 (the HE standard's σ ≈ 3.2), |e| ≤ 21 always.
pub const ERR_ETA: u32 = 21;

#[inline]
pub fn add_mod(a: u64, b: u64, p: u64) -> u64 {
    let s = a + b; // p < 2^62: no overflow
    if s >= p {
        s - p
    } else {
        s
    }
}
#[inline]
pub fn sub_mod(a: u64, b: u64, p: u64) -> u64 {
    if a >= b {
        a - b
    } else {
        a + p - b
    }
}
#[inline]
pub fn mul_mod(a: u64, b: u64, p: u64) -> u64 {
    ((a as u128 * b as u128) % p as u128) as u64
}
pub fn pow_mod(mut b: u64, mut e: u64, p: u64) -> u64 {
    let mut r = 1u64;
    b %= p;
    while e > 0 {
        if e & 1 == 1 {
            r = mul_mod(r, b, p);
        }
        b = mul_mod(b, b, p);
        e >>= 1;
    }
    r
}
#[inline]
fn inv_mod(a: u64, p: u64) -> u64 {
    pow_mod(a, p - 2, p)
}
/// Multiplication by a fixed w mod p (Shoup: w' = ⌊w·2^64/p⌋), p < 2^63.
#[derive(Clone, Copy)]
pub struct ShoupMul {
    w: u64,
    w_shoup: u64,
    p: u64,
}
impl ShoupMul {
    pub fn new(w: u64, p: u64) -> ShoupMul {
        let w = w % p;
        ShoupMul { w, w_shoup: (((w as u128) << 64) / p as u128) as u64, p }
    }
    #[inline]
    pub fn mul(&self, x: u64) -> u64 {
        let q = ((x as u128 * self.w_shoup as u128) >> 64) as u64;
        let r = x.wrapping_mul(self.w).wrapping_sub(q.wrapping_mul(self.p));
        if r >= self.p {
            r - self.p
        } else {
            r
        }
    }
}

/// Exact ⌊y·2^k/p⌋ and a 32-bit fraction of (y·2^k mod p)/p for y < p,
/// from precomputed reciprocals (no division on the hot path).
#[derive(Clone, Copy)]
struct ScaleDiv {
    p: u64,
    k: u32,
    /// ⌊2^{k+64}/p⌋ split in 64-bit halves.
    m_hi: u64,
    m_lo: u64,
    /// ⌊2^96/p⌋.
    f: u64,
}
impl ScaleDiv {
    fn new(p: u64, k: u32) -> ScaleDiv {
        // 2^{k+64}/p with k ≤ 63 and p ≥ 2^32: < 2^96, computed as (2^{k+64} − 1)/p (p odd: same floor)
        let num = if k + 64 == 128 { u128::MAX } else { (1u128 << (k + 64)) - 1 };
        let m = num / p as u128;
        ScaleDiv { p, k, m_hi: (m >> 64) as u64, m_lo: m as u64, f: ((1u128 << 96) / p as u128) as u64 }
    }
    /// (quotient mod 2^128, fraction·2^32)
    #[inline]
    fn apply(&self, y: u64) -> (u128, u64) {
        let y128 = y as u128;
        let mut q = y128 * self.m_hi as u128 + ((y128 * self.m_lo as u128) >> 64);
        let full = y128 << self.k; // y < 2^62, k ≤ 63: < 2^125
        let mut r = full - q * self.p as u128;
        while r >= self.p as u128 {
            r -= self.p as u128;
            q += 1;
        }
        (q, ((r * self.f as u128) >> 64) as u64)
    }
}

/// A signed value (|v| < 2^127) reduced into [0, p).
#[inline]
pub fn reduce_i128(v: i128, p: u64) -> u64 {
    v.rem_euclid(p as i128) as u64
}

/// Precomputed ring arithmetic for one [`Params`].
pub struct Context {
    pub params: Params,
    pub n: usize,
    plans: Vec<Plan>,
    /// q mod 2^64 (for the 2^ℓ encoding).
    q_mod_2_64: u64,
    /// (q / p_i)^{-1} mod p_i (modulus switching).
    q_hat_inv: Vec<u64>,
    /// p_0^{-1} mod p_1 (two-prime CRT of decryption).
    p0_inv_mod_p1: u64,
    q_hat_inv_shoup: Vec<ShoupMul>,
}

/// Encodes single values (see [`Context::encode_into`]).
pub struct Encoder {
    qt: u64,
    tmask: u64,
    bits: u32,
    tinv: Vec<ShoupMul>,
    primes: Vec<u64>,
}
impl Encoder {
    /// The residue mod p_i of round(q·x/2^ℓ).
    #[inline]
    pub fn residue(&self, i: usize, x: u64) -> u64 {
        Context::encode_one(self.qt, self.tmask, self.bits, x, &self.tinv[i], self.primes[i])
    }
}

/// Modulus switching of many coefficients to one 2^k (precomputed).
pub struct Switcher {
    k: u32,
    divs: Vec<ScaleDiv>,
}

impl Context {
    /// Checks the parameters (N a power of two ≥ 16, each prime accepted by
    /// tfhe-ntt's plan, distinct primes below 2^62, at least two of them).
    pub fn new(params: Params) -> Result<Context> {
        let n = params.n;
        if !(16..=1 << 15).contains(&n) || !n.is_power_of_two() {
            return Err(Error::Params(format!("ring degree N = {n} must be a power of two in [16, 32768]")));
        }
        if params.primes.len() < 2 {
            return Err(Error::Params("need at least two RNS primes".into()));
        }
        let mut plans = Vec::with_capacity(params.primes.len());
        for (i, &p) in params.primes.iter().enumerate() {
            if !(1 << 40..1 << 62).contains(&p) || params.primes[..i].contains(&p) {
                return Err(Error::Params(format!("prime {p:#x}: must be distinct and in [2^40, 2^62)")));
            }
            plans.push(Plan::try_new(n, p).ok_or_else(|| Error::Params(format!("{p:#x} is not an NTT-friendly prime for N = {n}")))?);
        }
        if params.secure {
            let max = Params::standard_max_log_q(n).ok_or_else(|| Error::Params(format!("no HE-standard row for N = {n}")))?;
            if params.log_q() > max as f64 {
                return Err(Error::Params(format!("log q = {:.1} exceeds the HE standard's {max} bits for N = {n}", params.log_q())));
            }
        }
        let q_mod_2_64 = params.primes.iter().fold(1u64, |a, &p| a.wrapping_mul(p));
        let q_hat_inv = params
            .primes
            .iter()
            .map(|&p| {
                let qh = params.primes.iter().filter(|&&o| o != p).fold(1u64, |a, &o| mul_mod(a, o % p, p));
                inv_mod(qh, p)
            })
            .collect();
        let p0_inv_mod_p1 = inv_mod(params.primes[0] % params.primes[1], params.primes[1]);
        let q_hat_inv_shoup = params.primes.iter().zip(&q_hat_inv).map(|(&p, &w)| ShoupMul::new(w, p)).collect();
        Ok(Context { n, plans, q_mod_2_64, q_hat_inv, p0_inv_mod_p1, q_hat_inv_shoup, params })
    }

    pub fn primes(&self) -> &[u64] {
        &self.params.primes
    }
    pub fn levels(&self) -> usize {
        self.plans.len()
    }
    /// Length of a polynomial buffer (L·N).
    pub fn poly_len(&self) -> usize {
        self.n * self.plans.len()
    }
    pub fn zero(&self) -> Vec<u64> {
        vec![0; self.poly_len()]
    }

    pub fn ntt(&self, a: &mut [u64]) {
        for (c, pl) in a.chunks_exact_mut(self.n).zip(&self.plans) {
            pl.fwd(c);
        }
    }
    pub fn intt(&self, a: &mut [u64]) {
        for (c, pl) in a.chunks_exact_mut(self.n).zip(&self.plans) {
            pl.inv(c);
            pl.normalize(c);
        }
    }
    /// `out` ← NTT of the small signed polynomial `v` (length N, every
    /// |v_j| < min p_i, checked in debug builds): one branch-free dense pass
    /// per prime (x + p·\[x < 0\]) feeding that prime's transform, instead of
    /// zeroing all L·N words and scattering every coefficient L times.
    pub fn ntt_small(&self, v: &[i64], out: &mut [u64]) {
        debug_assert!(v.iter().all(|&x| x.unsigned_abs() < self.primes().iter().copied().min().unwrap_or(0)));
        for ((c, pl), &p) in out.chunks_exact_mut(self.n).zip(&self.plans).zip(self.primes()) {
            for (o, &x) in c.iter_mut().zip(v) {
                *o = (x as u64).wrapping_add(((x >> 63) as u64) & p);
            }
            pl.fwd(c);
        }
    }
    /// acc += a ⊙ b (NTT domain).
    pub fn mul_acc(&self, acc: &mut [u64], a: &[u64], b: &[u64]) {
        let n = self.n;
        for (i, pl) in self.plans.iter().enumerate() {
            let r = i * n..(i + 1) * n;
            pl.mul_accumulate(&mut acc[r.clone()], &a[r.clone()], &b[r]);
        }
    }
    /// a ⊙ b (NTT domain).
    pub fn mul(&self, a: &[u64], b: &[u64]) -> Vec<u64> {
        let mut out = self.zero();
        self.mul_acc(&mut out, a, b);
        out
    }
    pub fn add_assign(&self, a: &mut [u64], b: &[u64]) {
        for (i, &p) in self.primes().iter().enumerate() {
            let r = i * self.n..(i + 1) * self.n;
            for (x, y) in a[r.clone()].iter_mut().zip(&b[r]) {
                *x = add_mod(*x, *y, p);
            }
        }
    }
    pub fn sub_assign(&self, a: &mut [u64], b: &[u64]) {
        for (i, &p) in self.primes().iter().enumerate() {
            let r = i * self.n..(i + 1) * self.n;
            for (x, y) in a[r.clone()].iter_mut().zip(&b[r]) {
                *x = sub_mod(*x, *y, p);
            }
        }
    }
    /// A polynomial with small signed coefficients (length N) in RNS form.
    pub fn from_signed(&self, v: &[i64]) -> Vec<u64> {
        let mut out = self.zero();
        for (i, &p) in self.primes().iter().enumerate() {
            for (o, &x) in out[i * self.n..(i + 1) * self.n].iter_mut().zip(v) {
                *o = signed_residue(x, p);
            }
        }
        out
    }

    /// acc += v (small signed coefficients) in coefficient form.
    pub fn add_signed(&self, acc: &mut [u64], v: &[i64]) {
        for (i, &p) in self.primes().iter().enumerate() {
            for (o, &x) in acc[i * self.n..(i + 1) * self.n].iter_mut().zip(v) {
                *o = add_mod(*o, signed_residue(x, p), p);
            }
        }
    }

    /// Uniform polynomial mod q from a seed (rejection sampling per prime;
    /// the a-part of a seeded ciphertext).
    pub fn uniform_from_seed(&self, seed: Block) -> Vec<u64> {
        let mut prg = Prg::with_nonce(seed, 0x0005_eeda);
        let mut out = self.zero();
        for (i, &p) in self.primes().iter().enumerate() {
            let mask = u64::MAX >> p.leading_zeros();
            for o in &mut out[i * self.n..(i + 1) * self.n] {
                *o = loop {
                    let x = prg.next_u64() & mask;
                    if x < p {
                        break x;
                    }
                };
            }
        }
        out
    }
    /// A fresh uniform polynomial (no seed kept).
    pub fn uniform(&self, prg: &mut Prg) -> Vec<u64> {
        self.uniform_from_seed(prg.random_block())
    }
    /// Uniform ternary coefficients in {−1, 0, 1}.
    pub fn sample_ternary(&self, prg: &mut Prg) -> Vec<i64> {
        // two random bits per draw, 3 rejected: exactly uniform on {−1, 0, 1}
        let mut out = Vec::with_capacity(self.n);
        let (mut word, mut left) = (0u64, 0u32);
        while out.len() < self.n {
            if left == 0 {
                word = prg.next_u64();
                left = 32;
            }
            let d = word & 3;
            word >>= 2;
            left -= 1;
            if d < 3 {
                out.push(d as i64 - 1);
            }
        }
        out
    }
    /// Centered binomial (η = [`ERR_ETA`]) coefficients.
    pub fn sample_error(&self, prg: &mut Prg) -> Vec<i64> {
        let m = (1u64 << ERR_ETA) - 1;
        (0..self.n)
            .map(|_| {
                let r = prg.next_u64();
                (r & m).count_ones() as i64 - ((r >> ERR_ETA) & m).count_ones() as i64
            })
            .collect()
    }

    /// Cheetah's exact encoding of m ∈ Z_2^ℓ: round(q·m / 2^ℓ) mod q, as
    /// residues. With k = q·m mod 2^ℓ, round(q·m/2^ℓ) = (q·m − k)/2^ℓ +
    /// [2k ≥ 2^ℓ], and q ≡ 0 mod p_i, so the residue is −k·2^{−ℓ} + [2k ≥ 2^ℓ].
    /// Multiplying the encoding by an integer polynomial w gives
    /// q·(w·m mod 2^ℓ)/2^ℓ + w·ε with |ε| ≤ 1/2 — no wrap-around term.
    pub fn encode_into(&self, bits: u32, m: &[u64], out: &mut [u64]) {
        let tmask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
        let qt = self.q_mod_2_64 & tmask;
        for (i, &p) in self.primes().iter().enumerate() {
            let tinv = ShoupMul::new(inv_mod(pow_mod(2, bits as u64, p), p), p);
            for (o, &x) in out[i * self.n..(i + 1) * self.n].iter_mut().zip(m) {
                *o = Self::encode_one(qt, tmask, bits, x, &tinv, p);
            }
        }
    }
    #[inline]
    fn encode_one(qt: u64, tmask: u64, bits: u32, x: u64, tinv: &ShoupMul, p: u64) -> u64 {
        let k = qt.wrapping_mul(x) & tmask;
        let up = (k >> (bits - 1)) & 1;
        let kr = if k >= p { k % p } else { k };
        add_mod(tinv.mul(if kr == 0 { 0 } else { p - kr }), up, p)
    }

    /// A precomputed encoder of single values for plaintext modulus 2^bits.
    pub fn encoder(&self, bits: u32) -> Encoder {
        let tmask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
        Encoder {
            qt: self.q_mod_2_64 & tmask,
            tmask,
            bits,
            tinv: self.primes().iter().map(|&p| ShoupMul::new(inv_mod(pow_mod(2, bits as u64, p), p), p)).collect(),
            primes: self.primes().to_vec(),
        }
    }

    pub fn encode(&self, bits: u32, m: &[u64]) -> Vec<u64> {
        let mut out = self.zero();
        self.encode_into(bits, m, &mut out);
        out
    }

    /// Modulus switching of coefficient j (coefficient domain) to 2^k:
    /// round(2^k·x/q) mod 2^k, computed from the residues by x/q ≡ Σ_i
    /// y_i/p_i (mod 1), y_i = x_i·(q/p_i)^{−1} mod p_i, with 64 guard bits
    /// (error below L·2^−64 before the final rounding).
    pub fn mod_switch_coeff(&self, a: &[u64], j: usize, k: u32) -> u64 {
        debug_assert!(k <= 64);
        let mut int = 0u128;
        let mut frac = 0u128;
        for (i, &p) in self.primes().iter().enumerate() {
            let y = mul_mod(a[i * self.n + j], self.q_hat_inv[i], p) as u128;
            let num = y << k; // y < 2^62, k ≤ 64
            let (qt, r) = (num / p as u128, num % p as u128);
            int = int.wrapping_add(qt);
            frac += (r << 64) / p as u128;
        }
        let v = int.wrapping_add((frac + (1u128 << 63)) >> 64);
        let m = if k == 128 { u128::MAX } else { (1u128 << k) - 1 };
        (v & m) as u64
    }

    /// A modulus switcher to 2^k (k ≤ 63), for [`Context::switch`].
    pub fn switcher(&self, k: u32) -> Switcher {
        assert!(k <= 63);
        Switcher { k, divs: self.primes().iter().map(|&p| ScaleDiv::new(p, k)).collect() }
    }

    /// round(2^k·x/q) mod 2^k of coefficient j, as [`Context::mod_switch_coeff`]
    /// but with precomputed reciprocals (32 guard bits: error < L·2^−32).
    #[inline]
    pub fn switch(&self, sw: &Switcher, a: &[u64], j: usize) -> u64 {
        let mut int = 0u128;
        let mut frac = 0u64 as u128;
        for (i, d) in sw.divs.iter().enumerate() {
            let y = self.q_hat_inv_shoup[i].mul(a[i * self.n + j]);
            let (q, f) = d.apply(y);
            int = int.wrapping_add(q);
            frac += f as u128;
        }
        let v = int.wrapping_add((frac + (1u128 << 31)) >> 32);
        (v as u64) & ((1u64 << sw.k) - 1)
    }

    /// The first two residues of a value, CRT-combined and centered:
    /// exact for |x| < p_0·p_1/2.
    pub fn crt2_centered(&self, x0: u64, x1: u64) -> i128 {
        let (p0, p1) = (self.primes()[0], self.primes()[1]);
        let d = mul_mod(sub_mod(x1 % p1, x0 % p1, p1), self.p0_inv_mod_p1, p1);
        let v = x0 as u128 + p0 as u128 * d as u128;
        let m = p0 as u128 * p1 as u128;
        if v > m / 2 {
            v as i128 - m as i128
        } else {
            v as i128
        }
    }

    /// Negacyclic product of `a` (values mod 2^k, length N) with a ternary
    /// secret given in NTT form over the first two primes, centered and
    /// reduced mod 2^k (|a·s| ≤ N·2^k < p_0·p_1/2 is checked by the caller's
    /// parameter choice).
    pub fn mul_pow2_by_secret(&self, a: &[u64], s_ntt: &[u64], k: u32) -> Vec<u64> {
        let n = self.n;
        let mut t0: Vec<u64> = a.iter().map(|&x| x % self.primes()[0]).collect();
        let mut t1: Vec<u64> = a.iter().map(|&x| x % self.primes()[1]).collect();
        self.plans[0].fwd(&mut t0);
        self.plans[1].fwd(&mut t1);
        self.plans[0].mul_assign_normalize(&mut t0, &s_ntt[..n]);
        self.plans[1].mul_assign_normalize(&mut t1, &s_ntt[n..2 * n]);
        self.plans[0].inv(&mut t0);
        self.plans[1].inv(&mut t1);
        let m = if k == 64 { u64::MAX } else { (1u64 << k) - 1 };
        t0.iter().zip(&t1).map(|(&x, &y)| (self.crt2_centered(x, y) as u64) & m).collect()
    }
}

/// x mod p for a signed x: no division when |x| < p (every caller's
/// values: ternary, binomial errors, centered ℓ-bit weights), else `%`.
#[inline]
pub fn signed_residue(x: i64, p: u64) -> u64 {
    let m = x.unsigned_abs();
    if m < p {
        if x >= 0 {
            m
        } else if m == 0 {
            0
        } else {
            p - m
        }
    } else if x >= 0 {
        m % p
    } else {
        (p - m % p) % p
    }
}
