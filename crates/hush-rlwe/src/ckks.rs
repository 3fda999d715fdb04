//! CKKS encoding with complex slots (Cheon, Kim, Kim, Song, ASIACRYPT 2017)
//! on [`crate::ring`]'s RNS arithmetic — the first building block of CRISP's
//! linear layers (§IV, Fig. 2; Appendix C), which place a wire's value in
//! the real part of a slot and its MAC in the imaginary part, so one
//! ct × pt product carries both (CRISP's "complex domain verification").
//!
//! **Encoding.** The canonical embedding σ maps a real polynomial
//! m ∈ R\[X\]/(X^N + 1) to its values at the primitive 2N-th roots of unity;
//! real coefficients make the values at conjugate roots conjugate, so N/2
//! complex slots z_j = m(ζ^(5^j)), j < N/2, ζ = e^(πi/N), determine m
//! (5 generates the residues ≡ 1 mod 4 of (Z/2N)^*; the rest are their
//! negatives). Encode(z) = round(Δ·σ^(−1)(z)), Decode(m) = σ(m)/Δ. Because
//! σ is a ring homomorphism onto C^(N/2) with slot-wise operations,
//! Decode(Encode(z)·Encode(w) mod X^N + 1) ≈ z ⊙ w at scale Δ².
//!
//! *How it is computed* (derived here, not taken from a library): the
//! values at all N odd powers ζ^(2i+1) are one length-N DFT,
//! m(ζ^(2i+1)) = Σ_k (m_k ζ^k)·ω^(ik) with ω = ζ² — so decoding is "twist
//! by ζ^k, one complex FFT, pick the slots at (5^j − 1)/2", and encoding is
//! the inverse: place z_j at (5^j − 1)/2 and z̄_j at (2N − 5^j − 1)/2,
//! inverse FFT, untwist, take real parts. O(N log N) in f64; about twice
//! the work of the specialised half-size transform, which is an
//! optimisation for later.
//!
//! **Complex-slot MACs** ([`value_mac_slots`], [`split_value_mac`]): slot
//! j = v_j + i·(μ v_j). A plaintext weight w (real slots) multiplies both
//! parts alike; a bias b must be added as b + i·μb (CRISP App. C).
//!
//! **Parameters** (128-bit security, HE standard table for ternary
//! secrets, σ ≈ 3.2 — see [`crate::params`]): N = 8192, q = three 60-bit
//! primes (log q < 180 ≤ 218), [`crate::Params::he128_n8192`]; scale
//! Δ = 2^40 for fresh plaintexts, so one ct × pt product is at Δ² = 2^80
//! and decryption is exact (two-prime CRT) while |Δ²·z| < 2^118, i.e.
//! |z| < 2^38 after one product. Error: a fresh encode/decode loses
//! < 2^−30 per slot (|z| ≤ 2^10); after encrypt → ct × pt → + bias →
//! decrypt → decode at Δ² the error is dominated by rounding the weight
//! polynomial at Δ, about |z|·√N/(2Δ) per slot (the ciphertext noise
//! contributes ≈ σ·√N·|w|/Δ, far less): measured 1.1·10^−7 ≈ 2^−23 for
//! values ≤ 500, MACs ≤ 1,625, |w| ≤ 1 at N = 8192 (the test asserts
//! < 2^−20). No rescaling or rotations yet: one multiplicative level,
//! slot-wise products only.
//!
//! **Why CRISP's linear layers do not use this scale.** CRISP checks
//! MACs *exactly* mod 2^(ℓ+s), and a MAC is a uniform (ℓ+s)-bit number;
//! the approximate decoding here (f64 FFT, error ≈ 2^−23) cannot carry it.
//! [`crate::ckks_crisp`] keeps CRISP's packing — value + i·MAC is the
//! polynomial v + X^(N/2)·m, since X^(N/2) is i in every slot of this
//! embedding — but in Cheetah's coefficient encoding at the exact scale
//! q/2^(ℓ+s), with flooding, modulus switching and the well-formedness
//! gap stated; this module stays the slot encoding and its tested
//! arithmetic.

use crate::he::SecretKey;
use crate::ring::{reduce_i128, Context};
use crate::{Error, Result};
use hush_primitives::Prg;

/// A complex number in f64.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct C64 {
    pub re: f64,
    pub im: f64,
}

impl C64 {
    pub const fn new(re: f64, im: f64) -> Self {
        C64 { re, im }
    }
    #[inline]
    fn add(self, o: C64) -> C64 {
        C64::new(self.re + o.re, self.im + o.im)
    }
    #[inline]
    fn sub(self, o: C64) -> C64 {
        C64::new(self.re - o.re, self.im - o.im)
    }
    #[inline]
    fn mul(self, o: C64) -> C64 {
        C64::new(self.re * o.re - self.im * o.im, self.re * o.im + self.im * o.re)
    }
    #[inline]
    fn conj(self) -> C64 {
        C64::new(self.re, -self.im)
    }
    fn scale(self, s: f64) -> C64 {
        C64::new(self.re * s, self.im * s)
    }
}

/// The canonical embedding for one ring degree N (precomputed roots).
pub struct Embedding {
    n: usize,
    /// ζ^k for k < 2N.
    zeta: Vec<C64>,
    /// Position (5^j − 1)/2 of slot j among the odd powers.
    slot_pos: Vec<usize>,
}

fn bit_reverse(v: &mut [C64]) {
    let n = v.len();
    let mut j = 0usize;
    for i in 1..n {
        let mut bit = n >> 1;
        while j & bit != 0 {
            j ^= bit;
            bit >>= 1;
        }
        j |= bit;
        if i < j {
            v.swap(i, j);
        }
    }
}

impl Embedding {
    /// N a power of two, 4 ≤ N ≤ 2^16.
    pub fn new(n: usize) -> Result<Self> {
        if !(4..=1 << 16).contains(&n) || !n.is_power_of_two() {
            return Err(Error::Params(format!("CKKS ring degree N = {n} must be a power of two in [4, 65536]")));
        }
        let m = 2 * n;
        let zeta = (0..m)
            .map(|k| {
                let t = std::f64::consts::PI * k as f64 / n as f64;
                C64::new(t.cos(), t.sin())
            })
            .collect();
        let mut slot_pos = Vec::with_capacity(n / 2);
        let mut g = 1usize;
        for _ in 0..n / 2 {
            slot_pos.push((g - 1) / 2);
            g = g * 5 % m;
        }
        Ok(Embedding { n, zeta, slot_pos })
    }

    pub fn n(&self) -> usize {
        self.n
    }
    pub fn slots(&self) -> usize {
        self.n / 2
    }

    /// In-place DFT y_i = Σ_k x_k ω^(±ik), ω = ζ² (iterative radix 2).
    fn fft(&self, v: &mut [C64], inverse: bool) {
        let n = self.n;
        bit_reverse(v);
        let mut len = 2;
        while len <= n {
            // ω_len = ζ^(2N/len) (or its conjugate)
            let step = 2 * n / len;
            for start in (0..n).step_by(len) {
                for j in 0..len / 2 {
                    let w = self.zeta[(j * step) % (2 * n)];
                    let w = if inverse { w.conj() } else { w };
                    let u = v[start + j];
                    let t = v[start + j + len / 2].mul(w);
                    v[start + j] = u.add(t);
                    v[start + j + len / 2] = u.sub(t);
                }
            }
            len <<= 1;
        }
    }

    /// σ(m): the N/2 slot values of real coefficients `m` (length N).
    pub fn embed(&self, m: &[f64]) -> Vec<C64> {
        assert_eq!(m.len(), self.n, "embed: N coefficients");
        let mut v: Vec<C64> = m.iter().enumerate().map(|(k, &c)| self.zeta[k].scale(c)).collect();
        self.fft(&mut v, false);
        self.slot_pos.iter().map(|&p| v[p]).collect()
    }

    /// σ^(−1)(z): the real coefficients (length N) whose slots are `z`
    /// (length N/2).
    pub fn unembed(&self, z: &[C64]) -> Vec<f64> {
        assert_eq!(z.len(), self.slots(), "unembed: N/2 slots");
        let n = self.n;
        let mut v = vec![C64::default(); n];
        for (j, &p) in self.slot_pos.iter().enumerate() {
            v[p] = z[j];
            // the conjugate root ζ^(−(2p+1)) = ζ^(2(N−1−p)+1)
            v[n - 1 - p] = z[j].conj();
        }
        self.fft(&mut v, true);
        let inv_n = 1.0 / n as f64;
        v.iter().enumerate().map(|(k, c)| c.mul(self.zeta[(2 * n - k) % (2 * n)]).re * inv_n).collect()
    }

    /// Encode: round(Δ·σ^(−1)(z)) as integers. Errors if a coefficient
    /// does not fit in an i128 (|Δ·coefficient| ≥ 2^126).
    pub fn encode(&self, z: &[C64], delta: f64) -> Result<Vec<i128>> {
        self.unembed(z)
            .into_iter()
            .map(|c| {
                let x = (c * delta).round();
                if !x.is_finite() || x.abs() >= 2f64.powi(126) {
                    return Err(Error::Params(format!("CKKS encoding: coefficient {x:e} out of range (scale too large)")));
                }
                Ok(x as i128)
            })
            .collect()
    }

    /// Decode: σ(m)/Δ.
    pub fn decode(&self, m: &[i128], delta: f64) -> Vec<C64> {
        let f: Vec<f64> = m.iter().map(|&c| c as f64 / delta).collect();
        self.embed(&f)
    }
}

/// CRISP's complex-slot packing: slot j = values_j + i·macs_j.
pub fn value_mac_slots(values: &[f64], macs: &[f64]) -> Vec<C64> {
    values.iter().zip(macs).map(|(&v, &m)| C64::new(v, m)).collect()
}

/// The inverse of [`value_mac_slots`].
pub fn split_value_mac(z: &[C64]) -> (Vec<f64>, Vec<f64>) {
    (z.iter().map(|c| c.re).collect(), z.iter().map(|c| c.im).collect())
}

/// Integer coefficients in RNS form (coefficient domain).
pub fn to_rns(ctx: &Context, m: &[i128]) -> Vec<u64> {
    let n = ctx.n;
    let mut out = ctx.zero();
    for (i, &p) in ctx.primes().iter().enumerate() {
        for (o, &c) in out[i * n..(i + 1) * n].iter_mut().zip(m) {
            *o = reduce_i128(c, p);
        }
    }
    out
}

/// A CKKS ciphertext (b, a), both in the NTT domain: b + a·s = m + e.
#[derive(Clone)]
pub struct CkksCt {
    pub b: Vec<u64>,
    pub a: Vec<u64>,
}

impl SecretKey {
    /// Secret-key encryption of the integer polynomial `m` (already
    /// scaled by Δ): b = −a·s + m + e.
    pub fn encrypt_ckks(&self, ctx: &Context, m: &[i128], prg: &mut Prg) -> Result<CkksCt> {
        if m.len() != ctx.n {
            return Err(Error::Params(format!("CKKS plaintext of {} coefficients for N = {}", m.len(), ctx.n)));
        }
        let mut a = ctx.uniform(prg);
        ctx.ntt(&mut a);
        let mut b = to_rns(ctx, m);
        let e = ctx.from_signed(&ctx.sample_error(prg));
        ctx.add_assign(&mut b, &e);
        ctx.ntt(&mut b);
        let as_ = ctx.mul(&a, &self.s_ntt);
        ctx.sub_assign(&mut b, &as_);
        Ok(CkksCt { b, a })
    }

    /// Decryption to integer coefficients: b + a·s, centered from the
    /// first two primes — exact while every |coefficient| < p_0·p_1/2
    /// (≈ 2^119 for the 60-bit primes), the caller's scale budget.
    pub fn decrypt_ckks(&self, ctx: &Context, ct: &CkksCt) -> Vec<i128> {
        let mut phi = ctx.mul(&ct.a, &self.s_ntt);
        ctx.add_assign(&mut phi, &ct.b);
        ctx.intt(&mut phi);
        let n = ctx.n;
        (0..n).map(|j| ctx.crt2_centered(phi[j], phi[n + j])).collect()
    }
}

/// ct × pt: multiplies by the integer polynomial `w` (the scale of the
/// result is the product of the scales).
pub fn mul_plain(ctx: &Context, ct: &CkksCt, w: &[i128]) -> CkksCt {
    let mut wp = to_rns(ctx, w);
    ctx.ntt(&mut wp);
    CkksCt { b: ctx.mul(&ct.b, &wp), a: ctx.mul(&ct.a, &wp) }
}

/// ct + pt (same scale).
pub fn add_plain(ctx: &Context, ct: &CkksCt, p: &[i128]) -> CkksCt {
    let mut pp = to_rns(ctx, p);
    ctx.ntt(&mut pp);
    let mut b = ct.b.clone();
    ctx.add_assign(&mut b, &pp);
    CkksCt { b, a: ct.a.clone() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Params;
    use hush_primitives::Block;

    fn naive_embed(n: usize, m: &[f64]) -> Vec<C64> {
        let mut g = 1usize;
        let mut out = Vec::new();
        for _ in 0..n / 2 {
            let mut acc = C64::default();
            for (k, &c) in m.iter().enumerate() {
                let t = std::f64::consts::PI * ((k * g) % (2 * n)) as f64 / n as f64;
                acc = acc.add(C64::new(t.cos(), t.sin()).scale(c));
            }
            out.push(acc);
            g = g * 5 % (2 * n);
        }
        out
    }

    fn rand_slots(p: &mut Prg, n: usize, mag: f64) -> Vec<C64> {
        (0..n).map(|_| C64::new(((p.next_u64() % 2001) as f64 / 1000.0 - 1.0) * mag, ((p.next_u64() % 2001) as f64 / 1000.0 - 1.0) * mag)).collect()
    }

    fn max_err(a: &[C64], b: &[C64]) -> f64 {
        a.iter().zip(b).map(|(x, y)| (x.re - y.re).abs().max((x.im - y.im).abs())).fold(0.0, f64::max)
    }

    #[test]
    fn embedding_matches_its_definition_and_inverts() {
        let mut p = Prg::new(Block(1));
        for n in [4usize, 16, 64, 256] {
            let e = Embedding::new(n).unwrap();
            let m: Vec<f64> = (0..n).map(|_| (p.next_u64() % 1000) as f64 - 500.0).collect();
            let fast = e.embed(&m);
            assert!(max_err(&fast, &naive_embed(n, &m)) < 1e-7 * n as f64, "N {n}");
            let back = e.unembed(&fast);
            let err = back.iter().zip(&m).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
            assert!(err < 1e-8, "N {n}: σ^(−1)(σ(m)) error {err}");
        }
        assert!(Embedding::new(12).is_err());
    }

    #[test]
    fn encode_decode_and_slotwise_products() {
        let ctx = Context::new(Params::he128_n8192()).unwrap();
        let e = Embedding::new(ctx.n).unwrap();
        let mut p = Prg::new(Block(2));
        let delta = 2f64.powi(40);
        let z = rand_slots(&mut p, e.slots(), 1024.0);
        let w = rand_slots(&mut p, e.slots(), 1024.0);
        let (mz, mw) = (e.encode(&z, delta).unwrap(), e.encode(&w, delta).unwrap());
        assert!(max_err(&e.decode(&mz, delta), &z) < 2f64.powi(-30));
        // the polynomial product mod X^N + 1 (in the RNS ring) is the slot-wise product
        let (mut a, mut b) = (to_rns(&ctx, &mz), to_rns(&ctx, &mw));
        ctx.ntt(&mut a);
        ctx.ntt(&mut b);
        let mut prod = ctx.mul(&a, &b);
        ctx.intt(&mut prod);
        let n = ctx.n;
        let coeffs: Vec<i128> = (0..n).map(|j| ctx.crt2_centered(prod[j], prod[n + j])).collect();
        let got = e.decode(&coeffs, delta * delta);
        let want: Vec<C64> = z.iter().zip(&w).map(|(x, y)| x.mul(*y)).collect();
        assert!(max_err(&got, &want) < 2f64.powi(-20), "slot-wise product error {}", max_err(&got, &want));
    }

    /// CRISP's complex-slot MAC through one encrypted linear step:
    /// Enc(x + i·μx) ⊗ w ⊕ (b + i·μb) decrypts to (wx + b) + i·μ(wx + b).
    #[test]
    fn value_and_mac_travel_together_through_ct_times_pt() {
        let ctx = Context::new(Params::he128_n8192()).unwrap();
        let e = Embedding::new(ctx.n).unwrap();
        let mut p = Prg::new(Block(3));
        let sk = SecretKey::generate(&ctx, &mut p);
        let delta = 2f64.powi(40);
        let s = e.slots();
        let mu = 3.25;
        let x: Vec<f64> = (0..s).map(|_| (p.next_u64() % 2001) as f64 / 2.0 - 500.0).collect();
        let w: Vec<f64> = (0..s).map(|_| (p.next_u64() % 2001) as f64 / 1000.0 - 1.0).collect();
        let bias: Vec<f64> = (0..s).map(|_| (p.next_u64() % 101) as f64 - 50.0).collect();
        let mx: Vec<f64> = x.iter().map(|v| mu * v).collect();
        let ct = sk.encrypt_ckks(&ctx, &e.encode(&value_mac_slots(&x, &mx), delta).unwrap(), &mut p).unwrap();
        let wz: Vec<C64> = w.iter().map(|&v| C64::new(v, 0.0)).collect();
        let ct = mul_plain(&ctx, &ct, &e.encode(&wz, delta).unwrap());
        let mb: Vec<f64> = bias.iter().map(|v| mu * v).collect();
        let ct = add_plain(&ctx, &ct, &e.encode(&value_mac_slots(&bias, &mb), delta * delta).unwrap());
        let out = e.decode(&sk.decrypt_ckks(&ctx, &ct), delta * delta);
        let (vals, macs) = split_value_mac(&out);
        let mut worst: f64 = 0.0;
        for j in 0..s {
            let want = w[j] * x[j] + bias[j];
            worst = worst.max((vals[j] - want).abs()).max((macs[j] - mu * want).abs());
        }
        assert!(worst < 2f64.powi(-20), "ct × pt error {worst}");
        // and a wrong key decrypts to noise
        let other = SecretKey::generate(&ctx, &mut p);
        let junk = e.decode(&other.decrypt_ckks(&ctx, &ct), delta * delta);
        assert!((junk[0].re - (w[0] * x[0] + bias[0])).abs() > 1.0);
    }
}
