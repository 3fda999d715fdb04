//! CRISP's linear layers (Fang, Zheng, Gu, *CRISP*, §IV, Fig. 2, App. C):
//! the client's value share and MAC share travel in **one** ciphertext, the
//! value in the real part and the MAC in the imaginary part, and one
//! homomorphic product with the server's plaintext weights yields both
//! W·x and W·(μx) = μ·(Wx). This module is the RLWE side (keys,
//! encodings, the server's evaluation, the client's decryption, the wire);
//! `hush_2pc::crisp_ckks` turns it into InitLin/Lin on authenticated
//! shares.
//!
//! ## The complex slot, and why the packing is in the coefficients
//! CKKS's slots are the values of a plaintext polynomial at the primitive
//! 2N-th roots ζ^(5^j) ([`crate::ckks::Embedding`]). The monomial X^(N/2)
//! takes the value (ζ^(5^j))^(N/2) = e^(iπ·5^j/2) = i at **every** slot
//! (5^j ≡ 1 mod 4), so for any two polynomials v, m the slots of
//! v + X^(N/2)·m are σ(v) + i·σ(m): "value in the real part, MAC in the
//! imaginary part" *is* the polynomial v + X^(N/2)·m, and a product with a
//! real plaintext w multiplies both parts alike (`tests::x_half_is_i_in_every_slot`
//! checks this on [`crate::ckks::Embedding`]). CRISP notes (§IV, last
//! paragraph) that the method carries over to Cheetah's coefficient
//! encoding "over a ring"; this module does exactly that: the value share
//! is laid out by Cheetah's HomConv/HomFC layout ([`crate::cheetah::Layout`])
//! for ring degree N/2 in the low half, the MAC share by the same layout in
//! the high half. In Z\[X\]/(X^N + 1) = Z\[i\]\[X\]/(X^(N/2) − i), a product
//! coefficient at degree d ≥ N/2 lands at d − N/2 times i — exactly where
//! the degree-N/2 negacyclic ring would wrap it — and Cheetah's layout
//! guarantees that no wrapped term reaches a needed coefficient, so the
//! needed coefficient p of the value half is (W·v)_p and coefficient
//! p + N/2 is (W·m)_p, with no cross term.
//!
//! ## Scale: exact, not approximate
//! CRISP's check is exact over the lifted ring Z_2^k (k = ℓ + s, SPDZ2k),
//! and a MAC is a uniform k-bit number (k = 77 by default): an
//! approximate decoding (CKKS's usual Δ = 2^40 and an f64 FFT, good to
//! ~2^−23 here, see [`crate::ckks`]) cannot reproduce it, and one wrong
//! low bit of a MAC makes an honest client fail the check. So the scale is
//! Δ = q/2^k: a message m ∈ Z_2^k is encoded as round(q·m/2^k) (Cheetah's
//! exact encoding, widened to k ≤ 120 bits), the message space wraps
//! exactly modulo 2^k (Δ·2^k = q ≡ 0), and decoding round(2^k·φ/q) mod 2^k
//! is **exact** whenever the noise is below Δ/2. The stated error bound is
//! therefore 0 after rounding, under the budget below (checked per layer,
//! a clear error if it cannot hold). (With this scale the arithmetic is
//! BFV's with plaintext modulus 2^k; the name CKKS is kept for CRISP's
//! complex packing.)
//!
//! ## Parameters (128-bit security, HE standard)
//! N = 8192, q = four primes below 2^50 (log q < 200 ≤ 218, the HE
//! standard's 128-bit bound for N = 8192 with a ternary secret and
//! σ ≈ 3.2; hush's errors are centered binomial with η = 21, σ ≈ 3.24,
//! |e| ≤ 21), [`crate::Params::he128_n8192_p50`]; see [`crate::params`].
//!
//! ## Noise budget (public: from N, ℓ, k and the layout)
//! Before decryption a needed coefficient's phase is Δ·y + E with
//! E = Σ_g ŵ_g·(e_g + ε_C + ε_S) + ε_out + e_zero + f, |e_g| ≤ 21, encoding
//! roundings |ε| ≤ 1/2, e_zero = u·e_pk + e_1 + e_2·s (|·| ≤ 21(2N + 1)),
//! each ŵ_g with at most N/2 nonzero centered weights |w| ≤ 2^(ℓ−1):
//! D = G·(N/2)·2^(ℓ−1)·22 + 21(2N + 1) + 2 bounds all but f. Flooding f is
//! uniform in [−2^F, 2^F) with the **largest** F the scale allows,
//! F = min(⌊log2 q⌋ − k − 3, 126) (so that 2^F + D < Δ/2: exact
//! decoding; the cap only matters for k < 70, small test lifts), and the
//! layer is refused unless F ≥ ⌈log2 D⌉ + κ_min (κ_min = 40 = s by
//! default; at ℓ = 37, k = 77 and one input group F − log2 D ≈ 66).
//! After the switch to 2^K the phase error is at most
//! 2^K/q·(2^F + D) + 1/2 + (N/2)(1 + L·2^−64) < 2^(K−k−3) + 2^12 + 1
//! < 2^(K−k−1) at N = 8192 and K − k = 16, so decoding
//! round(φ′/2^(K−k)) mod 2^k stays exact; the client computes a′·s
//! exactly (|a′·s| ≤ N·2^K < q/4) by the NTT over all primes and Garner's
//! CRT.
//!
//! ## Protocol of one layer (client holds the key; CRISP Fig. 2)
//! Setup (once per session): client → server the hello (parameter id, ℓ,
//! k, κ_min) and its public key (seeded). Per layer, with the client's
//! shares (v_C, m_C) and the server's (v_S, m_S) over Z_2^k:
//! 1. client → server: Enc_s(v_C + X^(N/2)·m_C) per input polynomial,
//!    seeded (16-byte seed of a, and b);
//! 2. server: adds Ecd(v_S + X^(N/2)·m_S), multiplies by ŵ, sums the input
//!    groups; on each needed coefficient adds Ecd(b_o − R_o) to the value
//!    half and Ecd(μb_o − R'_o) to the MAC half (the bias as b + i·μb,
//!    CRISP App. C; R, R' uniform in Z_2^k), adds a fresh Enc_pk(0) and the
//!    flooding f, and switches the modulus to 2^K, K = k + 16 (as
//!    Cheetah does); server → client: a′ (all N coefficients) and b′ of the
//!    needed coefficients of both halves, K bits each;
//! 3. client decrypts y_C = Wx + b − R and t_C = μ(Wx + b) − R'; the
//!    server's shares are (R, R').
//!
//! ## What each party sees
//! * **Server**: the public key and seeded ciphertexts under the client's
//!   key — pseudorandom under RLWE, simulated by random seeds and uniform
//!   b whatever the shares are.
//! * **Honest client** (its ciphertexts well formed): a = Σ a_g·ŵ_g +
//!   u·a_pk + e_2, pseudorandom and independent of W (RLWE with secret u);
//!   the revealed phases Δ·(y_C, t_C) + D_W + f with |D_W| ≤ D and f flat
//!   over 2^(F+1) ≥ 2^κ·D values: statistically 2^−κ-close to a function
//!   of (y_C, t_C), which are uniform (R, R' fresh). Nothing about W or μ.
//! * **Malicious client**: see *Well-formedness* — the exact gap.
//!
//! ## Well-formedness of the client's ciphertexts (checked, and the gap)
//! Checked: the hello (parameter set, ℓ, k, κ), every message's exact
//! length (computed from the public layout before allocating), every
//! residue < its prime, no nonzero padding bits. **Not checked**: that a
//! ciphertext's phase is Δ·P + e with small e for a P the client knows —
//! CRISP assumes a zero-knowledge proof of plaintext knowledge (Fig. 2,
//! footnote a, citing MUSE and Overdrive); none is built. What this
//! allows, exactly: the client may send a ciphertext of phase
//! Δ·P + e + φ for any polynomial φ it likes. The server's response then
//! carries Δ·(y + error) + W·φ + f. (i) If |W·φ + D| ≥ Δ/2 − 2^F anywhere,
//! the decoded shares change by a client-chosen error independent of μ —
//! an additive error on its shares, caught by the final check with
//! probability ≥ 1 − (s + 3)·2^−(s+2) — but the client has already seen
//! W·φ + f mod Δ before the check: up to log2(Δ/2^F) ≈ 3 bits about a
//! linear function of W it chose, per revealed coefficient, in that
//! (aborted) inference. (ii) If |W·φ| stays below Δ/2 − 2^F − D the
//! shares decode correctly, the check passes, and the client has seen
//! W·φ + f with f flat over 2^(F+1): a statistical leak of at most
//! |W·φ|/2^(F+1) < 1 (about one bit of a chosen linear function of W)
//! per revealed coefficient and inference, **undetected**
//! (`tests/ckks_crisp.rs`, `malformed_ciphertext_gap_is_real_and_bounded`,
//! demonstrates (ii)). Closing this needs the ZK proof, or ciphertexts the
//! client does not make: `hush_2pc::crisp_ckks` (the malicious-client
//! `ckks` backend) has a dealer encrypt an authenticated mask
//! ([`encrypt_input`]) and the server answer with [`Server::respond`], so
//! this gap does not arise there; [`Client::linear`] keeps it.

use crate::cheetah::{layout_bytes_per_product, Layout, Shape};
use crate::he::{PublicKey, SecretKey, SeededCt};
use crate::ring::{add_mod, mul_mod, pow_mod, sub_mod, Context};
use crate::wire::packed_len;
use crate::{Error, Params, Result};
use hush_primitives::Prg;
use hush_transport::{Channel, ChannelExt};
use rayon::prelude::*;
use std::sync::Arc;
use zeroize::Zeroize;

/// The minimum statistical flooding margin κ (bits) a layer must keep.
pub const MIN_FLOOD_BITS: u32 = 40;
/// The largest flooding exponent F (small k, as in tests with a small
/// lift, would otherwise ask for F > 126).
pub const MAX_FLOOD_LOG: u32 = 126;

/// The parameter set of CRISP's linear layers (see the module docs).
pub fn params() -> Params {
    Params::he128_n8192_p50()
}

/// Settings both parties must agree on (checked at setup).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// ℓ: weights are ℓ-bit signed ring elements (|w| ≤ 2^(ℓ−1)).
    pub ell: u32,
    /// k = ℓ + s: shares and MACs live in Z_2^k.
    pub k: u32,
    /// κ_min: the layer is refused if the flooding margin is smaller.
    pub min_flood_bits: u32,
    /// CRISP's packing (value + i·MAC in one ciphertext, layouts at degree
    /// N/2); `false`: SIMC's layout for the comparison of CRISP Table I —
    /// the value and the MAC in two ciphertexts, layouts at degree N.
    pub packed: bool,
}

impl Config {
    pub fn new(ell: u32, k: u32) -> Config {
        Config { ell, k, min_flood_bits: MIN_FLOOD_BITS, packed: true }
    }
    /// SIMC's layout: value and MAC in two ciphertexts (comparison only).
    pub fn two_ciphertexts(ell: u32, k: u32) -> Config {
        Config { packed: false, ..Config::new(ell, k) }
    }
    /// Ciphertexts per input (and per output) polynomial position.
    pub fn planes(&self) -> usize {
        if self.packed {
            1
        } else {
            2
        }
    }
    /// (plane, coefficient offset) of the value \[0\] and of the MAC \[1\].
    fn slots(&self, n: usize) -> [(usize, usize); 2] {
        if self.packed {
            [(0, 0), (0, n / 2)]
        } else {
            [(0, 0), (1, 0)]
        }
    }
    /// The layouts' ring degree.
    fn degree(&self, n: usize) -> usize {
        if self.packed {
            n / 2
        } else {
            n
        }
    }
    fn mask(&self) -> u128 {
        if self.k == 128 {
            u128::MAX
        } else {
            (1u128 << self.k) - 1
        }
    }
}

/// Exact encoding round(q·m/2^k) and decoding round(2^k·φ/q) mod 2^k for
/// k ≤ 120 (precomputed for one context).
pub struct Wide {
    k: u32,
    mask: u128,
    /// q mod 2^k.
    qt: u128,
    /// 2^−k mod p_i.
    tinv: Vec<u64>,
    /// ⌊2^k/p_i⌋ and 2^k mod p_i.
    quo: Vec<u128>,
    rem: Vec<u64>,
    /// (q/p_i)^−1 mod p_i.
    qhat_inv: Vec<u64>,
    primes: Vec<u64>,
}

impl Wide {
    pub fn new(ctx: &Context, k: u32) -> Result<Wide> {
        if !(2..=120).contains(&k) {
            return Err(Error::Params(format!("message modulus 2^{k}: k must be in 2..=120")));
        }
        let primes = ctx.primes().to_vec();
        let mask = (1u128 << k) - 1;
        let qt = primes.iter().fold(1u128, |a, &p| a.wrapping_mul(p as u128)) & mask;
        let tinv = primes.iter().map(|&p| pow_mod(pow_mod(2, k as u64, p), p - 2, p)).collect();
        let qhat_inv = primes
            .iter()
            .map(|&p| {
                let qh = primes.iter().filter(|&&o| o != p).fold(1u64, |a, &o| mul_mod(a, o % p, p));
                pow_mod(qh, p - 2, p)
            })
            .collect();
        let rem: Vec<u64> = primes.iter().map(|&p| pow_mod(2, k as u64, p)).collect();
        let quo = primes.iter().zip(&rem).map(|(&p, &r)| ((1u128 << k) - r as u128) / p as u128).collect();
        Ok(Wide { k, mask, qt, tinv, quo, rem, qhat_inv, primes })
    }

    /// The residue mod p_i of round(q·m/2^k), m < 2^k: with
    /// c = q·m mod 2^k, round(q·m/2^k) = (q·m − c)/2^k + [2c ≥ 2^k] and
    /// q ≡ 0 mod p_i.
    #[inline]
    pub fn residue(&self, i: usize, m: u128) -> u64 {
        let p = self.primes[i];
        let c = self.qt.wrapping_mul(m) & self.mask;
        let up = ((c >> (self.k - 1)) & 1) as u64;
        let cr = (c % p as u128) as u64;
        add_mod(mul_mod(if cr == 0 { 0 } else { p - cr }, self.tinv[i], p), up, p)
    }

    /// round(2^k·x/q) mod 2^k of x ∈ [0, q) given by its residues
    /// (x/q ≡ Σ_i y_i/p_i mod 1, y_i = x_i·(q/p_i)^−1 mod p_i, and
    /// y·2^k/p = y·⌊2^k/p⌋ + y·(2^k mod p)/p; 64 guard bits: error
    /// < L·2^−64 before the final rounding). Also the modulus switch of a
    /// ciphertext coefficient to 2^k.
    pub fn decode(&self, res: impl Fn(usize) -> u64) -> u128 {
        let mut int = 0u128;
        let mut frac = 0u128;
        for (i, &p) in self.primes.iter().enumerate() {
            let y = mul_mod(res(i), self.qhat_inv[i], p) as u128;
            let t = y * self.rem[i] as u128; // < 2^124
            int = int.wrapping_add(y.wrapping_mul(self.quo[i])).wrapping_add(t / p as u128);
            frac += ((t % p as u128) << 64) / p as u128;
        }
        int.wrapping_add((frac + (1u128 << 63)) >> 64) & self.mask
    }
}

/// Exact products by the ternary secret modulo 2^K, and Garner's CRT.
struct Crt {
    /// Garner: (p_0·…·p_(i−1))^−1 mod p_i, and the products mod 2^128.
    inv: Vec<u64>,
    prod: Vec<u128>,
    q128: u128,
    primes: Vec<u64>,
}

impl Crt {
    fn new(ctx: &Context) -> Crt {
        let primes = ctx.primes().to_vec();
        let mut inv = vec![1u64];
        let mut prod = vec![1u128];
        for i in 1..primes.len() {
            let p = primes[i];
            let pp = primes[..i].iter().fold(1u64, |a, &o| mul_mod(a, o % p, p));
            inv.push(pow_mod(pp, p - 2, p));
            prod.push(prod[i - 1].wrapping_mul(primes[i - 1] as u128));
        }
        let q128 = primes.iter().fold(1u128, |a, &p| a.wrapping_mul(p as u128));
        Crt { inv, prod, q128, primes }
    }
    /// The centered integer x (|x| < q/4) with residues `r`, modulo 2^128.
    fn centered(&self, r: impl Fn(usize) -> u64) -> u128 {
        let mut digits = Vec::with_capacity(self.primes.len());
        let mut x = 0u128;
        let mut f = 0f64;
        for (i, &p) in self.primes.iter().enumerate() {
            // d_i = (r_i − x mod p_i)·inv_i mod p_i, x as accumulated so far
            let mut acc = 0u64;
            let mut pp = 1u64;
            for (j, &d) in digits.iter().enumerate() {
                acc = add_mod(acc, mul_mod(d, pp, p), p);
                pp = mul_mod(pp, self.primes[j] % p, p);
            }
            let d = mul_mod(sub_mod(r(i) % p, acc, p), self.inv[i], p);
            digits.push(d);
            x = x.wrapping_add((d as u128).wrapping_mul(self.prod[i]));
        }
        // x/q = Σ_i d_i/(p_i·…·p_(L−1)): forward, each step divided by p_i
        for (i, &d) in digits.iter().enumerate() {
            f = (f + d as f64) / self.primes[i] as f64;
        }
        if f > 0.5 {
            x.wrapping_sub(self.q128)
        } else {
            x
        }
    }
}

/// The public noise budget of one layer.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// F: flooding uniform in [−2^F, 2^F).
    pub flood_log: u32,
    /// ⌈log2 D⌉: the honest noise bound.
    pub noise_log: u32,
}

/// The budget of a layer with `groups` accumulated input ciphertexts.
pub fn budget(ctx: &Context, cfg: &Config, groups: usize) -> Result<Budget> {
    if cfg.ell < 2 || cfg.ell > cfg.k || cfg.k + SWITCH_EXTRA_BITS > 120 {
        return Err(Error::Params(format!("ℓ = {}, k = {}: need 2 ≤ ℓ ≤ k ≤ {}", cfg.ell, cfg.k, 120 - SWITCH_EXTRA_BITS)));
    }
    if ctx.primes().iter().any(|&p| (1u64 << (cfg.ell - 1)) >= p) {
        return Err(Error::Params(format!("ℓ = {}: weights reach a prime of {}", cfg.ell, ctx.params.name)));
    }
    let n = ctx.n as f64;
    let d = groups as f64 * (n / 2.0) * 2f64.powi(cfg.ell as i32 - 1) * 22.0 + 21.0 * (2.0 * n + 1.0) + 2.0;
    let noise_log = d.log2().ceil() as u32;
    let log_q = ctx.params.log_q().floor() as u32;
    let need = cfg.k + 3 + noise_log + cfg.min_flood_bits;
    // the largest F the scale allows, capped at MAX_FLOOD_LOG (the flooding
    // sampler draws F + 1 ≤ 127 bits; a smaller F only makes decoding safer)
    let flood_log = log_q.saturating_sub(cfg.k + 3).min(MAX_FLOOD_LOG);
    if log_q < need || flood_log < noise_log + cfg.min_flood_bits {
        return Err(Error::Params(format!(
            "CRISP linear layer: {} (log q = {log_q}) cannot hold k = {} exactly with κ = {} flooding bits over {groups} input groups (needs log q ≥ {need})",
            ctx.params.name, cfg.k, cfg.min_flood_bits
        )));
    }
    Ok(Budget { flood_log, noise_log })
}

/// The layout of `shape` at ring degree N/2 (packed; N for two
/// ciphertexts), both parties derive it.
pub fn layout(ctx: &Context, cfg: &Config, shape: &Shape) -> Result<Layout> {
    shape.validate()?;
    let p = cfg.planes();
    Layout::new_weighted(shape, cfg.degree(ctx.n), p * bytes_up(ctx), p * bytes_down_a(ctx, cfg), p * layout_bytes_per_product(ctx))
}

fn bytes_up(ctx: &Context) -> usize {
    SeededCt::wire_len(ctx)
}
/// Responses are modulus-switched to 2^K, K = k + [`SWITCH_EXTRA_BITS`].
pub const SWITCH_EXTRA_BITS: u32 = 16;

fn switch_bits(cfg: &Config) -> u32 {
    cfg.k + SWITCH_EXTRA_BITS
}
fn bytes_down_a(ctx: &Context, cfg: &Config) -> usize {
    packed_len(ctx.n, switch_bits(cfg))
}
fn bytes_down_b(cfg: &Config, count: usize) -> usize {
    packed_len(count, switch_bits(cfg))
}

/// Appends values of `bits` ≤ 128 bits each, little endian.
fn pack128(vals: impl IntoIterator<Item = u128>, bits: u32, out: &mut Vec<u8>) {
    let lo = bits.min(64);
    let mut lows = Vec::new();
    let mut highs = Vec::new();
    for v in vals {
        lows.push(if lo == 64 { v as u64 } else { (v as u64) & ((1u64 << lo) - 1) });
        highs.push((v >> 64) as u64);
    }
    let n = lows.len();
    let mut tmp = Vec::with_capacity(2 * n);
    // interleave as one stream of (low, high) fields: pack each field width
    for i in 0..n {
        tmp.push((lows[i], lo));
        if bits > 64 {
            tmp.push((highs[i], bits - 64));
        }
    }
    let mut acc: u128 = 0;
    let mut fill = 0u32;
    for (v, w) in tmp {
        acc |= (v as u128) << fill;
        fill += w;
        while fill >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            fill -= 8;
        }
    }
    if fill > 0 {
        out.push(acc as u8);
    }
}

/// Reads `count` values of `bits` bits (the layout of [`pack128`]) from
/// the front of `buf`: length checked, nonzero padding refused.
fn unpack128<'a>(buf: &'a [u8], count: usize, bits: u32, what: &'static str) -> Result<(Vec<u128>, &'a [u8])> {
    let len = packed_len(count, bits);
    if buf.len() < len {
        return Err(Error::Malformed { what, why: format!("{} bytes, need at least {len}", buf.len()) });
    }
    let (head, rest) = buf.split_at(len);
    let mut out = Vec::with_capacity(count);
    let mut acc: u128 = 0;
    let mut fill = 0u32;
    let mut it = head.iter();
    let mut take = |w: u32, acc: &mut u128, fill: &mut u32| -> u64 {
        while *fill < w {
            *acc |= (*it.next().unwrap_or(&0) as u128) << *fill;
            *fill += 8;
        }
        let v = if w == 64 { *acc as u64 } else { (*acc as u64) & ((1u64 << w) - 1) };
        *acc >>= w;
        *fill -= w;
        v
    };
    for _ in 0..count {
        let lo = take(bits.min(64), &mut acc, &mut fill) as u128;
        let hi = if bits > 64 { take(bits - 64, &mut acc, &mut fill) as u128 } else { 0 };
        out.push(lo | (hi << 64));
    }
    if fill > 0 && acc != 0 {
        return Err(Error::Malformed { what, why: "nonzero padding bits".into() });
    }
    Ok((out, rest))
}
/// One output position's response: per plane a, then b of its needed
/// coefficients (value and MAC: 2 per needed output in all).
fn bytes_down(ctx: &Context, cfg: &Config, needed: usize) -> usize {
    let p = cfg.planes();
    p * bytes_down_a(ctx, cfg) + p * bytes_down_b(cfg, needed * 2 / p)
}

/// The bytes of one layer: (client's upload, server's response).
pub fn layer_bytes(ctx: &Context, cfg: &Config, shape: &Shape) -> Result<(usize, usize)> {
    let lay = layout(ctx, cfg, shape)?;
    let mut down = 0;
    for r in 0..lay.rows {
        for t in 0..lay.tiles {
            down += bytes_down(ctx, cfg, lay.needed(r, t).len());
        }
    }
    Ok((lay.in_cts() * cfg.planes() * bytes_up(ctx), down))
}

/// "CRL2": responses modulus-switched to 2^(k+16) (CRL1: full residues).
const HELLO_MAGIC: &[u8; 4] = b"CRL2";

fn hello(ctx: &Context, cfg: &Config) -> Vec<u8> {
    let mut h = HELLO_MAGIC.to_vec();
    h.extend_from_slice(&ctx.params.id());
    h.extend_from_slice(&[cfg.ell as u8, cfg.k as u8, cfg.min_flood_bits as u8, cfg.packed as u8]);
    h
}

fn check_shares(cfg: &Config, what: &str, v: &[u128], m: &[u128], len: usize) -> Result<()> {
    if v.len() != len || m.len() != len {
        return Err(Error::Shape(format!("{what}: {}/{} elements, the layer takes {len}", v.len(), m.len())));
    }
    if v.iter().chain(m).any(|&x| x & !cfg.mask() != 0) {
        return Err(Error::Shape(format!("{what}: a share outside Z_2^{}", cfg.k)));
    }
    Ok(())
}

/// The plaintext polynomial of input ciphertext `idx` (= position ·
/// planes + plane): packed, v + X^(N/2)·m; two ciphertexts, v or m.
fn input_plain(lay: &Layout, cfg: &Config, idx: usize, v: &[u128], m: &[u128], n: usize) -> Vec<u128> {
    let (pos, plane) = (idx / cfg.planes(), idx % cfg.planes());
    // the layout's index map: position → input index + 1 (0: empty)
    let ids: Vec<u64> = (1..=v.len() as u64).collect();
    let map = lay.input_poly(pos / lay.tiles, pos % lay.tiles, &ids);
    let mut p = vec![0u128; n];
    for (q, &(pl, off)) in cfg.slots(n).iter().enumerate() {
        if pl != plane {
            continue;
        }
        let src = if q == 0 { v } else { m };
        for (j, &id) in map.iter().enumerate() {
            if id != 0 {
                p[j + off] = src[id as usize - 1];
            }
        }
    }
    p
}

/// The client: holds the secret key.
pub struct Client {
    pub ctx: Arc<Context>,
    pub cfg: Config,
    sk: SecretKey,
    prg: Prg,
    wide: Wide,
    /// Tests: also decode at k + extra bits (the client's finer view).
    view: Option<u32>,
    crt: Crt,
    last_view: Vec<(u128, u128)>,
}

/// (value, MAC) per revealed output.
type Pairs = Vec<(u128, u128)>;
/// One row group's response bytes and the server's shares (output, R, R′).
type RowOut = (Vec<u8>, Vec<(u32, u128, u128)>);

/// A test hook on the client's outgoing ciphertexts: (index, ciphertext).
pub type CtHook<'a> = &'a mut dyn FnMut(usize, &mut SeededCt);

impl Client {
    /// Generates the key and sends the hello and the public key.
    pub fn setup(ch: &mut dyn Channel, ctx: Arc<Context>, cfg: Config, mut prg: Prg) -> Result<Client> {
        budget(&ctx, &cfg, 1)?;
        let wide = Wide::new(&ctx, cfg.k)?;
        let sk = SecretKey::generate(&ctx, &mut prg);
        let pk = sk.public_key(&ctx, &mut prg);
        let mut msg = hello(&ctx, &cfg);
        pk.write(&ctx, &mut msg);
        ch.send_chunked(&msg)?;
        let crt = Crt::new(&ctx);
        Ok(Client { ctx, cfg, sk, prg, wide, view: None, last_view: Vec::new(), crt })
    }

    /// One layer: sends Enc(v_C + X^(N/2)·m_C), returns this party's
    /// shares (y_C, t_C) of (Wx + b, μ(Wx + b)).
    pub fn linear(&mut self, ch: &mut dyn Channel, shape: &Shape, v: &[u128], m: &[u128]) -> Result<(Vec<u128>, Vec<u128>)> {
        self.linear_with(ch, shape, v, m, None)
    }

    /// As [`Client::linear`], with a hook that may alter each outgoing
    /// ciphertext (a malicious client, in tests).
    pub fn linear_with(&mut self, ch: &mut dyn Channel, shape: &Shape, v: &[u128], m: &[u128], mut hook: Option<CtHook<'_>>) -> Result<(Vec<u128>, Vec<u128>)> {
        let ctx = self.ctx.clone();
        let seed = self.prg.random_block();
        let mut cts = encrypt_cts(&ctx, &self.cfg, &self.sk, &self.wide, shape, v, m, seed)?;
        let mut up = Vec::with_capacity(cts.len() * bytes_up(&ctx));
        for (idx, ct) in cts.iter_mut().enumerate() {
            if let Some(h) = hook.as_mut() {
                h(idx, ct);
            }
            ct.write(&ctx, &mut up);
            ct.b.zeroize();
        }
        ch.send_chunked(&up)?;
        self.receive(ch, shape)
    }

    /// A client whose secret key was made elsewhere (the dealer of
    /// `hush_2pc::crisp_ckks`, which also encrypts the inputs): no hello,
    /// nothing sent; use [`Client::receive`].
    pub fn with_secret_key(ctx: Arc<Context>, cfg: Config, sk: SecretKey, prg: Prg) -> Result<Client> {
        budget(&ctx, &cfg, 1)?;
        let wide = Wide::new(&ctx, cfg.k)?;
        let crt = Crt::new(&ctx);
        Ok(Client { ctx, cfg, sk, prg, wide, view: None, last_view: Vec::new(), crt })
    }

    /// The second half of a layer: receives the server's response to
    /// input ciphertexts under this client's key (its own, sent by
    /// [`Client::linear`], or made by a dealer and given to the server)
    /// and decrypts this party's shares (y_C, t_C).
    pub fn receive(&mut self, ch: &mut dyn Channel, shape: &Shape) -> Result<(Vec<u128>, Vec<u128>)> {
        let ctx = self.ctx.clone();
        let cfg = self.cfg;
        let lay = layout(&ctx, &cfg, shape)?;
        budget(&ctx, &cfg, lay.groups)?;
        let (sk, ctxr) = (&self.sk, &ctx);
        // the response: a length fixed by the public layout
        let needed: Vec<Vec<(u32, u32)>> = (0..lay.rows).flat_map(|r| (0..lay.tiles).map(move |t| (r, t))).map(|(r, t)| lay.needed(r, t)).collect();
        let total: usize = needed.iter().map(|nd| bytes_down(&ctx, &cfg, nd.len())).sum();
        let mut down = vec![0u8; total];
        ch.recv_chunked_into("CRISP linear layer: server response", &mut down)?;
        let mut parts = Vec::with_capacity(needed.len());
        let mut rest = &down[..];
        for nd in &needed {
            let (head, r) = rest.split_at(bytes_down(&ctx, &cfg, nd.len()));
            parts.push((nd, head));
            rest = r;
        }
        let view = self.view;
        let crt = &self.crt;
        let outs: Vec<(Pairs, Pairs)> = parts.into_par_iter().map(|(nd, part)| decrypt(ctxr, &cfg, sk, crt, nd, part, view)).collect::<Result<_>>()?;
        self.last_view = vec![(0, 0); if view.is_some() { shape.out_len() } else { 0 }];
        let n_out = shape.out_len();
        let (mut y, mut t) = (vec![0u128; n_out], vec![0u128; n_out]);
        for (nd, (o, fine)) in needed.iter().zip(outs) {
            for (&(_, idx), (a, b)) in nd.iter().zip(o) {
                y[idx as usize] = a;
                t[idx as usize] = b;
            }
            for (&(_, idx), v) in nd.iter().zip(fine) {
                self.last_view[idx as usize] = v;
            }
        }
        Ok((y, t))
    }

    /// Tests (the curious or malicious client's view): also decode every
    /// revealed coefficient at k + `extra` bits, so that the low `extra`
    /// bits show the residual noise in units of Δ/2^extra.
    #[doc(hidden)]
    pub fn record_fine_view_for_tests(&mut self, extra: u32) -> Result<()> {
        if extra > SWITCH_EXTRA_BITS - 2 {
            return Err(Error::Params(format!("a fine view of at most {} extra bits", SWITCH_EXTRA_BITS - 2)));
        }
        self.view = Some(extra);
        Ok(())
    }
    /// The last layer's fine view (value, MAC) per output.
    #[doc(hidden)]
    pub fn last_fine_view(&self) -> &[(u128, u128)] {
        &self.last_view
    }
}

/// The input ciphertexts of one layer: Enc_sk(v + X^(N/2)·m) per input
/// polynomial of `shape`'s layout (two ciphertexts per position if not
/// packed), seeded from `seed` (one stream per ciphertext).
#[allow(clippy::too_many_arguments)]
fn encrypt_cts(ctx: &Context, cfg: &Config, sk: &SecretKey, wide: &Wide, shape: &Shape, v: &[u128], m: &[u128], seed: hush_primitives::Block) -> Result<Vec<SeededCt>> {
    let lay = layout(ctx, cfg, shape)?;
    budget(ctx, cfg, lay.groups)?;
    check_shares(cfg, "client share", v, m, shape.in_len())?;
    let layr = &lay;
    Ok((0..lay.in_cts() * cfg.planes())
        .into_par_iter()
        .map(|idx| {
            let mut prg = Prg::with_nonce(seed, idx as u64);
            let mut p = input_plain(layr, cfg, idx, v, m, ctx.n);
            let ct = encrypt(ctx, sk, wide, &p, &mut prg);
            p.zeroize();
            ct
        })
        .collect())
}

/// Honest input ciphertexts of one layer under `sk`, as the bytes the
/// server's [`Server::respond`] takes (what a client would upload): for a
/// party that encrypts on the client's behalf — `hush_2pc::crisp_ckks`'s
/// dealer, so that the server only ever multiplies its weights by
/// ciphertexts whose plaintext the client did not choose.
pub fn encrypt_input(ctx: &Context, cfg: &Config, sk: &SecretKey, shape: &Shape, v: &[u128], m: &[u128], seed: hush_primitives::Block) -> Result<Vec<u8>> {
    let wide = Wide::new(ctx, cfg.k)?;
    let mut cts = encrypt_cts(ctx, cfg, sk, &wide, shape, v, m, seed)?;
    let mut up = Vec::with_capacity(cts.len() * bytes_up(ctx));
    for ct in cts.iter_mut() {
        ct.write(ctx, &mut up);
        ct.b.zeroize();
    }
    Ok(up)
}

/// The bytes of one layer's input ciphertexts ([`encrypt_input`]).
pub fn input_bytes(ctx: &Context, cfg: &Config, shape: &Shape) -> Result<usize> {
    Ok(layout(ctx, cfg, shape)?.in_cts() * cfg.planes() * bytes_up(ctx))
}

/// Seeded encryption of the plaintext `p` (N values in Z_2^k).
fn encrypt(ctx: &Context, sk: &SecretKey, wide: &Wide, p: &[u128], prg: &mut Prg) -> SeededCt {
    let seed = prg.random_block();
    let mut a = ctx.uniform_from_seed(seed);
    ctx.ntt(&mut a);
    let mut as_ = ctx.mul(&a, &sk.s_ntt);
    ctx.intt(&mut as_);
    let n = ctx.n;
    let mut b = ctx.zero();
    for i in 0..ctx.levels() {
        for (o, &x) in b[i * n..(i + 1) * n].iter_mut().zip(p) {
            *o = wide.residue(i, x);
        }
    }
    let mut e = ctx.sample_error(prg);
    ctx.add_signed(&mut b, &e);
    e.zeroize();
    ctx.sub_assign(&mut b, &as_);
    as_.zeroize();
    SeededCt { seed, b }
}

/// Decrypts one output position's response (per plane: a′, then b′ of
/// the needed coefficients of the slots on that plane, all switched to
/// 2^K) into (value, MAC) per needed output, and, with `view`, the same
/// decoded at k + view bits (tests).
fn decrypt(ctx: &Context, cfg: &Config, sk: &SecretKey, crt: &Crt, nd: &[(u32, u32)], part: &[u8], view: Option<u32>) -> Result<(Pairs, Pairs)> {
    let n = ctx.n;
    let kk = switch_bits(cfg);
    let kmask = (1u128 << kk) - 1;
    let slots = cfg.slots(n);
    let mut out = vec![(0u128, 0u128); nd.len()];
    let mut fine = vec![(0u128, 0u128); if view.is_some() { nd.len() } else { 0 }];
    let round = |phase: u128, bits: u32| -> u128 {
        let sh = kk - bits;
        ((phase >> sh) + ((phase >> (sh - 1)) & 1)) & ((1u128 << bits) - 1)
    };
    let mut r = part;
    for plane in 0..cfg.planes() {
        let on: Vec<(usize, usize)> = slots.iter().enumerate().filter(|(_, s)| s.0 == plane).map(|(q, s)| (q, s.1)).collect();
        let (a, rr) = unpack128(r, n, kk, "CRISP linear response: a")?;
        let (b, rr) = unpack128(rr, on.len() * nd.len(), kk, "CRISP linear response: b")?;
        r = rr;
        // a′·s exactly (|a′·s| ≤ N·2^K < q/4), in RNS over every prime
        let mut ar = ctx.zero();
        for (i, &p) in ctx.primes().iter().enumerate() {
            for (o, &x) in ar[i * n..(i + 1) * n].iter_mut().zip(&a) {
                *o = (x % p as u128) as u64;
            }
        }
        ctx.ntt(&mut ar);
        let mut as_ = ctx.mul(&ar, &sk.s_ntt);
        ctx.intt(&mut as_);
        for (jj, &(j, _)) in nd.iter().enumerate() {
            for (si, &(q, off)) in on.iter().enumerate() {
                let pos = j as usize + off;
                let prod = crt.centered(|i| as_[i * n + pos]);
                let phase = b[jj * on.len() + si].wrapping_add(prod) & kmask;
                let x = round(phase, cfg.k);
                let dst = if q == 0 { &mut out[jj].0 } else { &mut out[jj].1 };
                *dst = x;
                if let Some(e) = view {
                    let y = round(phase, cfg.k + e);
                    if q == 0 {
                        fine[jj].0 = y;
                    } else {
                        fine[jj].1 = y;
                    }
                }
            }
        }
        as_.zeroize();
        ar.zeroize();
    }
    Ok((out, fine))
}

/// The server: holds the client's public key.
pub struct Server {
    pub ctx: Arc<Context>,
    pub cfg: Config,
    pk: PublicKey,
    prg: Prg,
    wide: Wide,
    flood: bool,
}

impl Server {
    /// Receives the client's hello and public key; a mismatch is an error.
    pub fn setup(ch: &mut dyn Channel, ctx: Arc<Context>, cfg: Config, prg: Prg) -> Result<Server> {
        budget(&ctx, &cfg, 1)?;
        let wide = Wide::new(&ctx, cfg.k)?;
        let h = hello(&ctx, &cfg);
        let mut msg = vec![0u8; h.len() + SeededCt::wire_len(&ctx)];
        ch.recv_chunked_into("CRISP linear setup: hello and public key", &mut msg)?;
        if msg[..4] != h[..4] {
            return Err(Error::Malformed { what: "CRISP linear setup", why: "not a CRISP linear-layer hello".into() });
        }
        if msg[..h.len()] != h[..] {
            return Err(Error::Mismatch(format!(
                "client's parameters (id {:?}, ℓ = {}, k = {}, κ = {}) differ from ours (id {:?}, ℓ = {}, k = {}, κ = {})",
                &msg[4..8],
                msg[8],
                msg[9],
                msg[10],
                &h[4..8],
                cfg.ell,
                cfg.k,
                cfg.min_flood_bits
            )));
        }
        let (pk, _) = SeededCt::read(&ctx, &msg[h.len()..], "CRISP linear setup: public key")?;
        Ok(Server { pk: PublicKey::from_seeded(&ctx, &pk), ctx, cfg, prg, wide, flood: true })
    }

    /// A server given the client's public key by a dealer (the seeded
    /// encryption of zero that [`SecretKey::public_key`] makes): no hello,
    /// nothing received; use [`Server::respond`].
    pub fn with_public_key(ctx: Arc<Context>, cfg: Config, pk: &[u8], prg: Prg) -> Result<Server> {
        budget(&ctx, &cfg, 1)?;
        let wide = Wide::new(&ctx, cfg.k)?;
        let (pk, rest) = SeededCt::read(&ctx, pk, "CRISP linear layer: dealt public key")?;
        if !rest.is_empty() {
            return Err(Error::Malformed { what: "CRISP linear layer: dealt public key", why: "trailing bytes".into() });
        }
        Ok(Server { pk: PublicKey::from_seeded(&ctx, &pk), ctx, cfg, prg, wide, flood: true })
    }

    /// **Insecure, tests only**: no flooding.
    #[doc(hidden)]
    pub fn insecure_disable_flooding_for_tests(&mut self) {
        self.flood = false;
    }

    /// One layer: `w` the ℓ-bit weights (ring elements, signed), `bias`
    /// and `bias_mac` = b and μ·b in Z_2^k per output, (v, m) the server's
    /// shares. Returns its output shares (R, R').
    #[allow(clippy::too_many_arguments)]
    pub fn linear(&mut self, ch: &mut dyn Channel, shape: &Shape, w: &[u64], bias: &[u128], bias_mac: &[u128], v: &[u128], m: &[u128]) -> Result<(Vec<u128>, Vec<u128>)> {
        let ctx = self.ctx.clone();
        let cfg = self.cfg;
        let lay = layout(&ctx, &cfg, shape)?;
        budget(&ctx, &cfg, lay.groups)?;
        check_shares(&cfg, "server share", v, m, shape.in_len())?;
        check_shares(&cfg, "bias", bias, bias_mac, shape.out_len())?;
        let wm = if cfg.ell == 64 { u64::MAX } else { (1u64 << cfg.ell) - 1 };
        if w.len() != shape.weight_len() || w.iter().any(|&x| x & !wm != 0) {
            return Err(Error::Shape(format!("{} weights for a layer of {}, or one outside Z_2^{}", w.len(), shape.weight_len(), cfg.ell)));
        }
        let mut up = vec![0u8; lay.in_cts() * cfg.planes() * bytes_up(&ctx)];
        ch.recv_chunked_into("CRISP linear layer: client ciphertexts", &mut up)?;
        self.respond(ch, shape, w, bias, bias_mac, v, m, &up)
    }

    /// The server's half of a layer on given input ciphertexts `up` (the
    /// client's upload, or honest ones from a dealer: [`encrypt_input`]);
    /// sends the response and returns its output shares (R, R′). `up` is
    /// checked (exact length, every residue below its prime).
    #[allow(clippy::too_many_arguments)]
    pub fn respond(&mut self, ch: &mut dyn Channel, shape: &Shape, w: &[u64], bias: &[u128], bias_mac: &[u128], v: &[u128], m: &[u128], up: &[u8]) -> Result<(Vec<u128>, Vec<u128>)> {
        let ctx = self.ctx.clone();
        let cfg = self.cfg;
        let lay = layout(&ctx, &cfg, shape)?;
        let bud = budget(&ctx, &cfg, lay.groups)?;
        check_shares(&cfg, "server share", v, m, shape.in_len())?;
        check_shares(&cfg, "bias", bias, bias_mac, shape.out_len())?;
        let wm = if cfg.ell == 64 { u64::MAX } else { (1u64 << cfg.ell) - 1 };
        if w.len() != shape.weight_len() || w.iter().any(|&x| x & !wm != 0) {
            return Err(Error::Shape(format!("{} weights for a layer of {}, or one outside Z_2^{}", w.len(), shape.weight_len(), cfg.ell)));
        }
        let bu = bytes_up(&ctx);
        let planes = cfg.planes();
        if up.len() != lay.in_cts() * planes * bu {
            return Err(Error::Malformed { what: "CRISP linear layer: input ciphertexts", why: format!("{} bytes, the layout needs {}", up.len(), lay.in_cts() * planes * bu) });
        }
        let (ctxr, layr, wide) = (&ctx, &lay, &self.wide);
        let cts: Vec<(Vec<u64>, Vec<u64>)> = up
            .par_chunks(bu)
            .enumerate()
            .map(|(idx, buf)| {
                let (ct, _) = SeededCt::read(ctxr, buf, "CRISP linear layer: client ciphertext")?;
                let mut a = ctxr.uniform_from_seed(ct.seed);
                let mut b = ct.b;
                let mut p = input_plain(layr, &cfg, idx, v, m, ctxr.n);
                let n = ctxr.n;
                for (i, &pr) in ctxr.primes().iter().enumerate() {
                    for (o, &x) in b[i * n..(i + 1) * n].iter_mut().zip(&p) {
                        *o = add_mod(*o, wide.residue(i, x), pr);
                    }
                }
                p.zeroize();
                ctxr.ntt(&mut a);
                ctxr.ntt(&mut b);
                Ok((b, a))
            })
            .collect::<Result<_>>()?;
        let slots = cfg.slots(ctx.n);
        let kmask = cfg.mask();
        let kk = switch_bits(&cfg);
        let sw = Wide::new(&ctx, kk)?;
        let sw = &sw;
        let fb = bud.flood_log + 1; // ≤ 128 (budget)
        let fmask = if fb >= 128 { u128::MAX } else { (1u128 << fb) - 1 };
        let two_f: Vec<u64> = ctx.primes().iter().map(|&p| ((1u128 << bud.flood_log) % p as u128) as u64).collect();
        let flood = self.flood;
        let seed = self.prg.random_block();
        let pk = &self.pk;
        let cts = &cts;
        let rows: Vec<RowOut> = (0..lay.rows)
            .into_par_iter()
            .map(|r| {
                let mut prg = Prg::with_nonce(seed, r as u64);
                let mut down = Vec::new();
                let mut shares = Vec::new();
                let mut acc: Vec<(Vec<u64>, Vec<u64>)> = (0..layr.tiles * planes).map(|_| (ctxr.zero(), ctxr.zero())).collect();
                let mut wp = ctxr.zero();
                let mut wc = vec![0i64; ctxr.n];
                for g in 0..layr.groups {
                    wc.iter_mut().for_each(|x| *x = 0);
                    layr.weight_terms(r, g, w, cfg.ell, |pos, val| wc[pos] = val);
                    ctxr.ntt_small(&wc, &mut wp);
                    for (tp, (ab, aa)) in acc.iter_mut().enumerate() {
                        // tp = tile · planes + plane, as the input ciphertexts
                        let (cb, ca) = &cts[g * layr.tiles * planes + tp];
                        ctxr.mul_acc(ab, cb, &wp);
                        ctxr.mul_acc(aa, ca, &wp);
                    }
                }
                wp.zeroize();
                wc.zeroize();
                let u128r = |prg: &mut Prg| (prg.next_u64() as u128) | ((prg.next_u64() as u128) << 64);
                let mut rs: Vec<(u128, u128)> = Vec::new();
                for (tp, (mut b, mut a)) in acc.into_iter().enumerate() {
                    let (t, plane) = (tp / planes, tp % planes);
                    let (e1, e2) = pk.add_zero_ntt(ctxr, &mut prg, &mut b, &mut a);
                    ctxr.intt(&mut b);
                    ctxr.intt(&mut a);
                    ctxr.add_signed(&mut b, &e1);
                    ctxr.add_signed(&mut a, &e2);
                    let nd = layr.needed(r, t);
                    if plane == 0 {
                        // the server's output shares (R, R′) of this position
                        rs = nd.iter().map(|_| (u128r(&mut prg) & kmask, u128r(&mut prg) & kmask)).collect();
                        shares.extend(nd.iter().zip(&rs).map(|(&(_, o), &(rv, rm))| (o, rv, rm)));
                    }
                    let on: Vec<(usize, usize)> = slots.iter().enumerate().filter(|(_, s)| s.0 == plane).map(|(q, s)| (q, s.1)).collect();
                    for (&(j, o), &(rv, rm)) in nd.iter().zip(&rs) {
                        for &(q, off) in &on {
                            let val = if q == 0 { bias[o as usize].wrapping_sub(rv) & kmask } else { bias_mac[o as usize].wrapping_sub(rm) & kmask };
                            let pos = j as usize + off;
                            let f = if flood { u128r(&mut prg) & fmask } else { 0 };
                            for (i, &p) in ctxr.primes().iter().enumerate() {
                                let x = &mut b[i * ctxr.n + pos];
                                *x = add_mod(*x, wide.residue(i, val), p);
                                if flood {
                                    let fr = sub_mod((f % p as u128) as u64, two_f[i], p);
                                    *x = add_mod(*x, fr, p);
                                }
                            }
                        }
                    }
                    // modulus switch to 2^K: a′ in full, b′ at the needed coefficients
                    let n = ctxr.n;
                    pack128((0..n).map(|j| sw.decode(|i| a[i * n + j])), kk, &mut down);
                    pack128(nd.iter().flat_map(|&(j, _)| on.iter().map(move |&(_, off)| j as usize + off)).map(|pos| sw.decode(|i| b[i * n + pos])), kk, &mut down);
                    b.zeroize();
                }
                (down, shares)
            })
            .collect();
        let n_out = shape.out_len();
        let (mut y, mut tt) = (vec![0u128; n_out], vec![0u128; n_out]);
        let mut down = Vec::with_capacity(rows.iter().map(|r| r.0.len()).sum());
        for (bytes, shares) in rows {
            down.extend_from_slice(&bytes);
            for (o, rv, rm) in shares {
                y[o as usize] = rv;
                tt[o as usize] = rm;
            }
        }
        ch.send_chunked(&down)?;
        Ok((y, tt))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ckks::{Embedding, C64};
    use hush_primitives::Block;

    #[test]
    fn x_half_is_i_in_every_slot() {
        let n = 64;
        let e = Embedding::new(n).unwrap();
        let mut p = Prg::new(Block(7));
        let v: Vec<f64> = (0..n).map(|_| (p.next_u64() % 100) as f64 - 50.0).collect();
        let m: Vec<f64> = (0..n).map(|_| (p.next_u64() % 100) as f64 - 50.0).collect();
        // v + X^(N/2)·m in Z[X]/(X^N + 1)
        let mut poly = v.clone();
        for (j, &x) in m.iter().enumerate() {
            if j + n / 2 < n {
                poly[j + n / 2] += x;
            } else {
                poly[j + n / 2 - n] -= x;
            }
        }
        let (sv, sm, sp) = (e.embed(&v), e.embed(&m), e.embed(&poly));
        for j in 0..n / 2 {
            let want = C64::new(sv[j].re - sm[j].im, sv[j].im + sm[j].re); // σ(v) + i·σ(m)
            assert!((sp[j].re - want.re).abs() < 1e-6 && (sp[j].im - want.im).abs() < 1e-6, "slot {j}");
        }
    }

    #[test]
    fn wide_encoding_round_trips_exactly() {
        let ctx = Context::new(params()).unwrap();
        let mut p = Prg::new(Block(8));
        for k in [2u32, 37, 64, 77, 100] {
            let w = Wide::new(&ctx, k).unwrap();
            let mask = (1u128 << k) - 1;
            for _ in 0..200 {
                let m = ((p.next_u64() as u128) | ((p.next_u64() as u128) << 64)) & mask;
                assert_eq!(w.decode(|i| w.residue(i, m)), m, "k {k}");
            }
            assert_eq!(w.decode(|i| w.residue(i, mask)), mask);
            assert_eq!(w.decode(|i| w.residue(i, 0)), 0);
        }
        assert!(Wide::new(&ctx, 121).is_err());
    }

    #[test]
    fn crt_centers_signed_values_and_pack128_round_trips() {
        let ctx = Context::new(params()).unwrap();
        let crt = Crt::new(&ctx);
        for v in [0i128, 1, -1, 1 << 106, -(1 << 106) + 3, 123_456_789_012_345_678_901] {
            let r = |i: usize| v.rem_euclid(ctx.primes()[i] as i128) as u64;
            assert_eq!(crt.centered(r), v as u128, "{v}");
        }
        let vals: Vec<u128> = (0..37u128).map(|i| (i * 0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c834) & ((1 << 93) - 1)).collect();
        for bits in [93u32, 64, 40, 120] {
            let m = (1u128 << bits) - 1;
            let v: Vec<u128> = vals.iter().map(|x| x & m).collect();
            let mut b = Vec::new();
            pack128(v.iter().copied(), bits, &mut b);
            assert_eq!(b.len(), packed_len(v.len(), bits));
            let (w, rest) = unpack128(&b, v.len(), bits, "t").unwrap();
            assert_eq!((w, rest.len()), (v, 0));
            assert!(unpack128(&b[..b.len() - 1], 37, bits, "t").is_err());
        }
    }

    #[test]
    fn budget_holds_for_the_default_lift_and_refuses_too_much() {
        let ctx = Context::new(params()).unwrap();
        let b = budget(&ctx, &Config::new(37, 77), 1).unwrap();
        assert!(b.flood_log >= b.noise_log + MIN_FLOOD_BITS, "{b:?}");
        assert!(budget(&ctx, &Config::new(37, 117), 1).is_err());
        assert!(budget(&ctx, &Config::new(37, 77), 1 << 30).is_err());
    }
}
