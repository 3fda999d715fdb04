//! Keys and ciphertexts: BFV-style RLWE over Z_q\[X\]/(X^N+1) with
//! plaintext modulus t = 2^ℓ and Cheetah's exact encoding round(q·m/t).
//!
//! * secret key s: uniform ternary; public key pk = (−a_pk·s + e_pk, a_pk)
//!   with a_pk from a seed (sent as the seed);
//! * [`SeededCt`]: a secret-key encryption (b = −a·s + round(q·m/t) + e, a)
//!   whose a comes from a 128-bit seed: only the seed and b travel;
//! * responses are modulus-switched to 2^k (k = ℓ + ⌈log2(N+1)⌉ + 2) and
//!   decrypted by rounding (φ = b' + a'·s mod 2^k, m = round(φ/2^{k−ℓ})).

use crate::ring::{add_mod, sub_mod, Context};
use crate::wire::{pack_into, packed_len, unpack};
use crate::{Error, Result};
use hush_primitives::{Block, Prg};
use zeroize::Zeroize;

/// The client's secret key (wiped on drop, never printed).
pub struct SecretKey {
    pub(crate) s: Vec<i64>,
    /// s in NTT form over every prime.
    pub(crate) s_ntt: Vec<u64>,
}
impl Drop for SecretKey {
    fn drop(&mut self) {
        self.s.zeroize();
        self.s_ntt.zeroize();
    }
}
impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(..)")
    }
}

impl SecretKey {
    pub fn generate(ctx: &Context, prg: &mut Prg) -> SecretKey {
        let s = ctx.sample_ternary(prg);
        let mut s_ntt = ctx.from_signed(&s);
        ctx.ntt(&mut s_ntt);
        SecretKey { s, s_ntt }
    }

    /// Seeded secret-key encryption of `m` (N values mod 2^bits).
    pub fn encrypt(&self, ctx: &Context, bits: u32, m: &[u64], prg: &mut Prg) -> SeededCt {
        let seed = prg.random_block();
        let mut a = ctx.uniform_from_seed(seed);
        ctx.ntt(&mut a);
        let mut as_ = ctx.mul(&a, &self.s_ntt);
        ctx.intt(&mut as_);
        let mut b = ctx.encode(bits, m);
        let e = ctx.from_signed(&ctx.sample_error(prg));
        ctx.add_assign(&mut b, &e);
        ctx.sub_assign(&mut b, &as_);
        SeededCt { seed, b }
    }

    /// The public key: an encryption of zero (seeded).
    pub fn public_key(&self, ctx: &Context, prg: &mut Prg) -> SeededCt {
        self.encrypt(ctx, 1, &vec![0; ctx.n], prg)
    }

    /// Decrypts a modulus-switched response: for each needed coefficient
    /// j (with b'_j), m_j = round((b'_j + (a'·s)_j mod 2^k) / 2^{k−ℓ}).
    pub fn decrypt_switched(&self, ctx: &Context, bits: u32, k: u32, a: &[u64], needed: &[u32], b: &[u64]) -> Vec<u64> {
        let as_ = ctx.mul_pow2_by_secret(a, &self.s_ntt, k);
        let km = if k == 64 { u64::MAX } else { (1u64 << k) - 1 };
        let tm = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
        let sh = k - bits;
        needed
            .iter()
            .zip(b)
            .map(|(&j, &bj)| {
                let phi = bj.wrapping_add(as_[j as usize]) & km;
                let r = if sh == 0 { phi } else { (phi >> sh) + ((phi >> (sh - 1)) & 1) };
                r & tm
            })
            .collect()
    }

    /// The phase b + a·s mod q of the needed coefficients of an unswitched
    /// response (residues per prime, coefficient-major: \[j\]\[i\]).
    pub fn phase_full(&self, ctx: &Context, a: &[u64], needed: &[u32], b: &[u64]) -> Vec<Vec<u64>> {
        let mut a_ntt = a.to_vec();
        ctx.ntt(&mut a_ntt);
        let mut as_ = ctx.mul(&a_ntt, &self.s_ntt);
        ctx.intt(&mut as_);
        let n = ctx.n;
        let l = ctx.levels();
        needed
            .iter()
            .enumerate()
            .map(|(idx, &j)| (0..l).map(|i| add_mod(b[idx * l + i], as_[i * n + j as usize], ctx.primes()[i])).collect())
            .collect()
    }
}

/// A seeded ciphertext: a = Uniform(seed), b in coefficient form.
#[derive(Clone)]
pub struct SeededCt {
    pub seed: Block,
    pub b: Vec<u64>,
}

/// Bits of each prime's residues on the wire.
pub fn residue_bits(ctx: &Context) -> Vec<u32> {
    ctx.primes().iter().map(|p| 64 - p.leading_zeros()).collect()
}

impl SeededCt {
    /// Wire size: 16-byte seed + b's residues bit-packed per prime.
    pub fn wire_len(ctx: &Context) -> usize {
        16 + residue_bits(ctx).iter().map(|&w| packed_len(ctx.n, w)).sum::<usize>()
    }
    pub fn write(&self, ctx: &Context, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.seed.to_bytes());
        for (i, w) in residue_bits(ctx).into_iter().enumerate() {
            pack_into(self.b[i * ctx.n..(i + 1) * ctx.n].iter().copied(), w, out);
        }
    }
    /// Parses one ciphertext from the front of `buf` (length and every
    /// residue < p_i checked); returns it and the rest.
    pub fn read<'a>(ctx: &Context, buf: &'a [u8], what: &'static str) -> Result<(SeededCt, &'a [u8])> {
        if buf.len() < 16 {
            return Err(Error::Malformed { what, why: format!("{} bytes, too short for a ciphertext seed", buf.len()) });
        }
        let seed = Block::from_bytes(buf[..16].try_into().expect("16 bytes"));
        let mut rest = &buf[16..];
        let mut b = Vec::with_capacity(ctx.poly_len());
        for (i, w) in residue_bits(ctx).into_iter().enumerate() {
            let (v, r) = unpack(rest, ctx.n, w, ctx.primes()[i], what)?;
            b.extend_from_slice(&v);
            rest = r;
        }
        Ok((SeededCt { seed, b }, rest))
    }
}

/// The server's copy of the client's public key, in NTT form.
pub struct PublicKey {
    pub(crate) b_ntt: Vec<u64>,
    pub(crate) a_ntt: Vec<u64>,
}

impl PublicKey {
    pub fn from_seeded(ctx: &Context, ct: &SeededCt) -> PublicKey {
        let mut a_ntt = ctx.uniform_from_seed(ct.seed);
        ctx.ntt(&mut a_ntt);
        let mut b_ntt = ct.b.clone();
        ctx.ntt(&mut b_ntt);
        PublicKey { b_ntt, a_ntt }
    }
    /// A fresh public-key encryption of zero, coefficient form:
    /// (u·b_pk + e_1, u·a_pk + e_2), u ternary, e_1, e_2 binomial. Its
    /// noise u·e_pk + e_1 + e_2·s is at most 21·(2N + 1).
    /// Adds a fresh public-key encryption of zero to an accumulator pair
    /// (b, a) that is still in NTT form: acc += u·(b_pk, a_pk) there (one
    /// NTT of u instead of [`PublicKey::encrypt_zero`]'s NTT and two
    /// inverse NTTs); returns the errors (e_1, e_2) for the caller to add
    /// after its inverse NTT ([`Context::add_signed`]). Same distribution
    /// as `encrypt_zero` added after the transform.
    pub fn add_zero_ntt(&self, ctx: &Context, prg: &mut Prg, acc_b: &mut [u64], acc_a: &mut [u64]) -> (Vec<i64>, Vec<i64>) {
        let mut ut = ctx.sample_ternary(prg);
        let mut u = ctx.from_signed(&ut);
        ut.zeroize();
        ctx.ntt(&mut u);
        ctx.mul_acc(acc_b, &u, &self.b_ntt);
        ctx.mul_acc(acc_a, &u, &self.a_ntt);
        u.zeroize();
        (ctx.sample_error(prg), ctx.sample_error(prg))
    }

    pub fn encrypt_zero(&self, ctx: &Context, prg: &mut Prg) -> (Vec<u64>, Vec<u64>) {
        let mut ut = ctx.sample_ternary(prg);
        let mut u = ctx.from_signed(&ut);
        ut.zeroize();
        ctx.ntt(&mut u);
        let mut zb = ctx.mul(&u, &self.b_ntt);
        let mut za = ctx.mul(&u, &self.a_ntt);
        u.zeroize();
        ctx.intt(&mut zb);
        ctx.intt(&mut za);
        ctx.add_assign(&mut zb, &ctx.from_signed(&ctx.sample_error(prg)));
        ctx.add_assign(&mut za, &ctx.from_signed(&ctx.sample_error(prg)));
        (zb, za)
    }
}

/// x − y for residues (used by tests and the noise view).
pub fn sub_residues(ctx: &Context, x: &[u64], y: &[u64]) -> Vec<u64> {
    x.iter().zip(y).zip(ctx.primes()).map(|((&a, &b), &p)| sub_mod(a, b, p)).collect()
}
