//! Keys, encryption, decryption and homomorphic operations.

use crate::fixedbase::FixedBase;
use crate::wipe::wipe_all;
use crate::{short_exponent_bits, Error, Result};
use rand::{CryptoRng, RngCore};
use rug::integer::{IsPrime, Order};
use rug::Integer;
use std::cmp::Ordering;
use std::sync::Arc;

/// Default fixed-base window (bits).
pub const DEFAULT_WINDOW: u32 = 8;

/// A Paillier ciphertext (an element of Z*_{n²}).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ciphertext(pub(crate) Integer);

impl Ciphertext {
    /// The underlying integer.
    pub fn as_integer(&self) -> &Integer {
        &self.0
    }
}

/// A uniformly random integer in [0, 2^bits).
pub(crate) fn random_bits<R: RngCore + ?Sized>(rng: &mut R, bits: u32) -> Integer {
    let bytes = bits.div_ceil(8) as usize;
    let mut buf = vec![0u8; bytes];
    rng.fill_bytes(&mut buf);
    let mut x = Integer::from_digits(&buf, Order::Lsf);
    x.keep_bits_mut(bits);
    buf.iter_mut().for_each(|b| *b = 0);
    x
}

/// A uniformly random integer in [0, bound) (rejection sampling).
pub(crate) fn random_below<R: RngCore + ?Sized>(rng: &mut R, bound: &Integer) -> Integer {
    let bits = bound.significant_bits();
    loop {
        let x = random_bits(rng, bits);
        if x < *bound {
            return x;
        }
    }
}

struct PublicInner {
    n: Integer,
    n2: Integer,
    hs: Integer,
    n_bits: u32,
    a_bits: u32,
    ct_bytes: usize,
    table: FixedBase,
    /// The IFMA Montgomery context mod n², made on first use (None where
    /// the CPU has no IFMA).
    mont: std::sync::OnceLock<Option<crate::ifma::MontCtx>>,
    /// the two-digit IFMA context mod n² of batched ct·pt
    n2ctx: std::sync::OnceLock<Option<crate::ifma::n2::N2Ctx>>,
    /// The fixed-base table of h_s in that context's Montgomery domain
    /// (public), made on first batched use.
    fixed: std::sync::OnceLock<Option<crate::ifma::FixedTable>>,
}

/// A public key: n, h_s and the fixed-base table of h_s mod n².
#[derive(Clone)]
pub struct PublicKey(Arc<PublicInner>);

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey({} bits)", self.0.n_bits)
    }
}

fn check_bits(bits: u32) -> Result<()> {
    if bits == 2048 || bits == 3072 || bits == 1024 {
        Ok(())
    } else {
        Err(Error::KeySize(bits))
    }
}

impl PublicKey {
    /// Builds a public key from n and h_s (validated) with a fixed-base
    /// table of window `w`.
    pub fn new(n: Integer, hs: Integer, w: u32) -> Result<PublicKey> {
        let n_bits = n.significant_bits();
        check_bits(n_bits).map_err(|_| Error::Malformed {
            what: "public key",
            reason: format!("modulus of {n_bits} bits (2048 or 3072 expected)"),
        })?;
        if n.is_even() {
            return Err(Error::Malformed { what: "public key", reason: "even modulus".into() });
        }
        let n2 = Integer::from(n.square_ref());
        if hs.cmp0() != Ordering::Greater || hs >= n2 || Integer::from(hs.gcd_ref(&n)) != 1 {
            return Err(Error::Malformed { what: "public key", reason: "h_s is not a unit mod n²".into() });
        }
        let a_bits = short_exponent_bits(n_bits);
        let table = FixedBase::new(&hs, &n2, a_bits, w, false);
        let ct_bytes = (2 * n_bits).div_ceil(8) as usize;
        Ok(PublicKey(Arc::new(PublicInner { n, n2, hs, n_bits, a_bits, ct_bytes, table, mont: std::sync::OnceLock::new(), n2ctx: std::sync::OnceLock::new(), fixed: std::sync::OnceLock::new() })))
    }

    /// The modulus n.
    pub fn n(&self) -> &Integer {
        &self.0.n
    }
    /// h_s, the base of the randomisers.
    pub fn hs(&self) -> &Integer {
        &self.0.hs
    }
    /// n².
    pub fn n2(&self) -> &Integer {
        &self.0.n2
    }
    /// Size of n in bits.
    pub fn bits(&self) -> u32 {
        self.0.n_bits
    }
    /// Encoded size of one ciphertext in bytes.
    pub fn ct_bytes(&self) -> usize {
        self.0.ct_bytes
    }
    /// Bits of the short DJN exponent.
    pub fn short_exponent_bits(&self) -> u32 {
        self.0.a_bits
    }
    /// Bytes of the public fixed-base table.
    pub fn table_bytes(&self) -> usize {
        self.0.table.table_bytes()
    }

    /// Serialises (n, h_s): 4-byte bit length, then n and h_s big-endian at
    /// fixed widths.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + 3 * self.0.ct_bytes / 2);
        out.extend_from_slice(&self.0.n_bits.to_le_bytes());
        push_fixed(&mut out, &self.0.n, self.0.ct_bytes / 2);
        push_fixed(&mut out, &self.0.hs, self.0.ct_bytes);
        out
    }

    /// Parses and validates a public key sent by the peer.
    pub fn from_bytes(b: &[u8], w: u32) -> Result<PublicKey> {
        let bad = |r: &str| Error::Malformed { what: "public key", reason: r.to_string() };
        if b.len() < 4 {
            return Err(bad("too short"));
        }
        let bits = u32::from_le_bytes(b[..4].try_into().unwrap());
        check_bits(bits).map_err(|_| bad(&format!("unsupported key size {bits}")))?;
        let nb = (bits as usize).div_ceil(8);
        if b.len() != 4 + 3 * nb {
            return Err(bad(&format!("length {} (expected {})", b.len(), 4 + 3 * nb)));
        }
        let n = Integer::from_digits(&b[4..4 + nb], Order::Msf);
        let hs = Integer::from_digits(&b[4 + nb..], Order::Msf);
        if n.significant_bits() != bits {
            return Err(bad("modulus size does not match its header"));
        }
        PublicKey::new(n, hs, w)
    }

    /// Encodes a signed integer as a plaintext (negative values as n − |m|).
    pub fn encode(&self, m: &Integer) -> Result<Integer> {
        let half = Integer::from(&self.0.n >> 1);
        if Integer::from(m.abs_ref()) >= half {
            return Err(Error::PlaintextRange(format!("|m| must be below n/2 ({} bits)", self.0.n_bits - 1)));
        }
        Ok(if m.cmp0() == Ordering::Less { Integer::from(m + &self.0.n) } else { m.clone() })
    }

    /// Decodes a plaintext in [0, n) to the centred signed integer.
    pub fn decode_signed(&self, m: &Integer) -> Integer {
        let half = Integer::from(&self.0.n >> 1);
        if *m > half {
            Integer::from(m - &self.0.n)
        } else {
            m.clone()
        }
    }

    fn check_plain(&self, m: &Integer) -> Result<()> {
        if m.cmp0() == Ordering::Less || *m >= self.0.n {
            return Err(Error::PlaintextRange("plaintext must be in [0, n)".into()));
        }
        Ok(())
    }

    /// h_s^a mod n² for a fresh short exponent a (the randomiser of an
    /// encryption, fixed-base table).
    pub fn random_factor<R: RngCore + CryptoRng + ?Sized>(&self, rng: &mut R) -> Integer {
        let a = random_bits(rng, self.0.a_bits);
        self.0.table.pow(&a)
    }

    /// `count` random factors h_s^a (fresh short exponents): eight at a
    /// time on the IFMA lanes where the CPU has them (the public fixed-base
    /// table in the Montgomery domain mod n², made once per key), else
    /// [`PublicKey::random_factor`] one by one. Same distribution either way.
    pub fn random_factors<R: RngCore + CryptoRng + ?Sized>(&self, count: usize, rng: &mut R) -> Vec<Integer> {
        let table = if count > 1 { self.fixed_n2() } else { None };
        let (Some(table), Some(ctx)) = (table, self.mont_n2()) else {
            return (0..count).map(|_| self.random_factor(rng)).collect();
        };
        let mut out = Vec::with_capacity(count);
        while out.len() < count {
            let k = crate::ifma::LANES.min(count - out.len());
            let a: Vec<Integer> = (0..k).map(|_| random_bits(rng, self.0.a_bits)).collect();
            out.extend(table.pow8(ctx, &a));
        }
        out
    }

    /// [`PublicKey::rerandomize`] of many ciphertexts, with
    /// [`PublicKey::random_factors`].
    pub fn rerandomize_batch<R: RngCore + CryptoRng + ?Sized>(&self, cs: &[Ciphertext], rng: &mut R) -> Vec<Ciphertext> {
        self.random_factors(cs.len(), rng)
            .into_iter()
            .zip(cs)
            .map(|(mut r, c)| {
                r *= &c.0;
                r %= &self.0.n2;
                Ciphertext(r)
            })
            .collect()
    }

    fn fixed_n2(&self) -> Option<&crate::ifma::FixedTable> {
        self.0.fixed.get_or_init(|| self.mont_n2().and_then(|ctx| crate::ifma::FixedTable::new(ctx, &self.0.table))).as_ref()
    }

    /// Encrypts m ∈ [0, n) with the public key only (fixed base mod n²).
    pub fn encrypt<R: RngCore + CryptoRng + ?Sized>(&self, m: &Integer, rng: &mut R) -> Result<Ciphertext> {
        self.check_plain(m)?;
        let mut c = self.random_factor(rng);
        let mut g = Integer::from(m * &self.0.n);
        g += 1;
        c *= &g;
        c %= &self.0.n2;
        Ok(Ciphertext(c))
    }

    /// Encrypts a signed 64-bit value.
    pub fn encrypt_i64<R: RngCore + CryptoRng + ?Sized>(&self, m: i64, rng: &mut R) -> Ciphertext {
        self.encrypt(&self.encode(&Integer::from(m)).unwrap(), rng).unwrap()
    }

    /// Multiplies by a fresh encryption of zero.
    pub fn rerandomize<R: RngCore + CryptoRng + ?Sized>(&self, c: &Ciphertext, rng: &mut R) -> Ciphertext {
        let mut r = self.random_factor(rng);
        r *= &c.0;
        r %= &self.0.n2;
        Ciphertext(r)
    }

    /// Enc(m1 + m2).
    pub fn add(&self, a: &Ciphertext, b: &Ciphertext) -> Ciphertext {
        let mut c = Integer::from(&a.0 * &b.0);
        c %= &self.0.n2;
        Ciphertext(c)
    }

    /// In place: a ← Enc(m_a + m_b).
    pub fn add_assign(&self, a: &mut Ciphertext, b: &Ciphertext) {
        a.0 *= &b.0;
        a.0 %= &self.0.n2;
    }

    /// Enc(m + k) for a signed plaintext k (no rerandomisation).
    pub fn add_plain(&self, a: &Ciphertext, k: &Integer) -> Ciphertext {
        let mut g = Integer::from(k * &self.0.n);
        g += 1;
        g %= &self.0.n2; // handles negative k (rug's % keeps the sign)
        if g.cmp0() == Ordering::Less {
            g += &self.0.n2;
        }
        g *= &a.0;
        g %= &self.0.n2;
        Ciphertext(g)
    }

    /// Enc(−m).
    pub fn neg(&self, a: &Ciphertext) -> Ciphertext {
        Ciphertext(Integer::from(a.0.invert_ref(&self.0.n2).expect("ciphertexts are units")))
    }

    /// Enc(k·m) for a signed plaintext k (short k: cost ∝ |k| bits).
    pub fn mul_plain(&self, a: &Ciphertext, k: &Integer) -> Ciphertext {
        match k.cmp0() {
            Ordering::Equal => Ciphertext(Integer::from(1)),
            Ordering::Greater => Ciphertext(Integer::from(a.0.pow_mod_ref(k, &self.0.n2).unwrap())),
            Ordering::Less => {
                let inv = self.neg(a);
                let e = Integer::from(k.abs_ref());
                Ciphertext(Integer::from(inv.0.pow_mod_ref(&e, &self.0.n2).unwrap()))
            }
        }
    }

    /// The IFMA context mod n² (kept with the key), if the CPU has IFMA.
    pub(crate) fn mont_n2(&self) -> Option<&crate::ifma::MontCtx> {
        self.0.mont.get_or_init(|| if crate::ifma::available() { crate::ifma::MontCtx::new(&self.0.n2) } else { None }).as_ref()
    }

    /// Enc(k_i·m_i) for many (ciphertext, unsigned 64-bit k_i) pairs: eight
    /// at a time, one per lane, with the IFMA kernels where the CPU has them
    /// ([`crate::ifma::n2::N2Ctx::pow_u64_8`]), else [`PublicKey::mul_plain`]
    /// one by one. Same results either way.
    pub fn mul_u64_batch(&self, pairs: &[(&Ciphertext, u64)]) -> Vec<Ciphertext> {
        let ctx = if pairs.len() > 1 { self.n2_ctx() } else { None };
        let Some(ctx) = ctx else {
            return pairs.iter().map(|(c, k)| self.mul_plain(c, &Integer::from(*k))).collect();
        };
        let mut out = Vec::with_capacity(pairs.len());
        for chunk in pairs.chunks(crate::ifma::LANES) {
            let bases: Vec<&Integer> = chunk.iter().map(|(c, _)| &c.0).collect();
            let exps: Vec<u64> = chunk.iter().map(|(_, k)| *k).collect();
            out.extend(ctx.pow_u64_8(&bases, &exps).into_iter().map(Ciphertext));
        }
        out
    }

    /// The two-digit IFMA context mod n² ([`crate::ifma::n2`]), if the CPU
    /// has IFMA.
    pub(crate) fn n2_ctx(&self) -> Option<&crate::ifma::n2::N2Ctx> {
        self.0.n2ctx.get_or_init(|| crate::ifma::n2::N2Ctx::new(&self.0.n)).as_ref()
    }

    /// Enc(k·m) for a signed 64-bit k.
    pub fn mul_i64(&self, a: &Ciphertext, k: i64) -> Ciphertext {
        self.mul_plain(a, &Integer::from(k))
    }

    /// Checks a ciphertext received from the peer: 0 < c < n² and a unit.
    pub fn validate(&self, c: &Integer, what: &'static str) -> Result<()> {
        if c.cmp0() != Ordering::Greater {
            return Err(Error::BadCiphertext { what, reason: "zero (not in Z*_{n²})" });
        }
        if *c >= self.0.n2 {
            return Err(Error::BadCiphertext { what, reason: "not below n² (out of range)" });
        }
        if Integer::from(c.gcd_ref(&self.0.n)) != 1 {
            return Err(Error::BadCiphertext { what, reason: "not a unit mod n² (shares a factor with n)" });
        }
        Ok(())
    }

    /// Appends the fixed-width big-endian encoding of `c`.
    pub fn write_ct(&self, c: &Ciphertext, out: &mut Vec<u8>) {
        push_fixed(out, &c.0, self.0.ct_bytes);
    }

    /// Encodes ciphertexts back to back.
    pub fn encode_cts(&self, cts: &[Ciphertext]) -> Vec<u8> {
        let mut out = Vec::with_capacity(cts.len() * self.0.ct_bytes);
        for c in cts {
            self.write_ct(c, &mut out);
        }
        out
    }

    /// Parses and validates `count` ciphertexts; `b` must be exactly
    /// `count · ct_bytes` long.
    pub fn decode_cts(&self, b: &[u8], count: usize, what: &'static str) -> Result<Vec<Ciphertext>> {
        let l = self.0.ct_bytes;
        if Some(b.len()) != count.checked_mul(l) {
            return Err(Error::Malformed {
                what,
                reason: format!("{} bytes for {count} ciphertexts of {l} bytes", b.len()),
            });
        }
        // Range checks per ciphertext; the unit check (gcd with n) once for
        // the whole batch: n = p·q, so Π c mod n shares a factor with n iff
        // some c does — exact, one gcd instead of one per ciphertext. Only a
        // batch that fails is checked one by one, to name the reason.
        let mut prod = Integer::from(1);
        let mut out = Vec::with_capacity(count);
        for ch in b.chunks_exact(l) {
            let c = Integer::from_digits(ch, Order::Msf);
            if c.cmp0() != Ordering::Greater {
                return Err(Error::BadCiphertext { what, reason: "zero (not in Z*_{n²})" });
            }
            if c >= self.0.n2 {
                return Err(Error::BadCiphertext { what, reason: "not below n² (out of range)" });
            }
            prod *= &c;
            prod %= &self.0.n;
            out.push(Ciphertext(c));
        }
        if Integer::from(prod.gcd_ref(&self.0.n)) != 1 {
            for c in &out {
                self.validate(&c.0, what)?;
            }
            return Err(Error::BadCiphertext { what, reason: "not a unit mod n² (shares a factor with n)" });
        }
        Ok(out)
    }
}

/// Which CRT half of the key.
#[derive(Clone, Copy)]
enum Half {
    P,
    Q,
}

fn modulo(t: &mut Integer, m: &Integer) {
    *t %= m;
    if t.cmp0() == Ordering::Less {
        *t += m;
    }
}

fn push_fixed(out: &mut Vec<u8>, x: &Integer, len: usize) {
    let d = x.to_digits::<u8>(Order::Msf);
    assert!(d.len() <= len);
    out.resize(out.len() + len - d.len(), 0);
    out.extend_from_slice(&d);
}

/// How [`KeyPair`] chooses its primes and h_s (see the crate docs, "Key
/// generation").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// Small-subgroup keys (Paillier 1999, Scheme 3; Ma, Han, Lei, ACSAC
    /// 2021):
    /// p = 2·α_p·β_p + 1 with α_p, β_p prime and |α_p| =
    /// [`crate::subgroup_bits`]`(|n|)`, h_s of order α_p·α_q; decryption
    /// exponents α_p and α_q. The default.
    Subgroup,
    /// Standard DJN keys: random p ≡ q ≡ 3 (mod 4), h_s = −x^{2n};
    /// decryption exponents p − 1 and q − 1 (the previous key generation,
    /// kept for comparison and as a reference).
    Djn,
}

/// A key pair: the public key plus the CRT secrets and secret tables.
pub struct KeyPair {
    pk: PublicKey,
    kind: KeyKind,
    p: Integer,
    q: Integer,
    p2: Integer,
    q2: Integer,
    /// (p²)^{-1} mod q²
    p2_inv: Integer,
    /// p^{-1} mod q
    p_inv: Integer,
    /// Decryption exponents: α_p, α_q (small-subgroup keys) or p − 1, q − 1.
    ep: Integer,
    eq: Integer,
    /// (e_p·q)^{-1} mod p and (e_q·p)^{-1} mod q: L_p(c^{e_p} mod p²) =
    /// m·e_p·q mod p for c = (1 + n)^m·h_s^a.
    hp: Integer,
    hq: Integer,
    /// (−q)^{-1} mod p and (−p)^{-1} mod q, for the full exponents p − 1,
    /// q − 1 (the fallback for ciphertexts outside (1 + n)^Z·⟨h_s⟩).
    hp_full: Integer,
    hq_full: Integer,
    pm1: Integer,
    qm1: Integer,
    tp: FixedBase,
    tq: FixedBase,
    /// IFMA Montgomery contexts for p² and q² (where the CPU has IFMA).
    mp2: Option<crate::ifma::MontCtx>,
    mq2: Option<crate::ifma::MontCtx>,
    /// The secret fixed-base tables in those contexts' Montgomery domains.
    fp: Option<crate::ifma::FixedTable>,
    fq: Option<crate::ifma::FixedTable>,
}

impl Drop for KeyPair {
    fn drop(&mut self) {
        wipe_all([
            &mut self.p,
            &mut self.q,
            &mut self.p2,
            &mut self.q2,
            &mut self.p2_inv,
            &mut self.p_inv,
            &mut self.ep,
            &mut self.eq,
            &mut self.hp,
            &mut self.hq,
            &mut self.hp_full,
            &mut self.hq_full,
            &mut self.pm1,
            &mut self.qm1,
        ]);
    }
}

fn gen_prime<R: RngCore + ?Sized>(bits: u32, rng: &mut R) -> Integer {
    loop {
        let mut c = random_bits(rng, bits);
        c.set_bit(bits - 1, true);
        c.set_bit(bits - 2, true);
        c.set_bit(0, true);
        c.set_bit(1, true); // ≡ 3 mod 4
        if c.is_probably_prime(32) != IsPrime::No {
            return c;
        }
    }
}

/// A uniformly random integer in [lo, hi) (lo < hi).
fn random_range<R: RngCore + ?Sized>(rng: &mut R, lo: &Integer, hi: &Integer) -> Integer {
    random_below(rng, &Integer::from(hi - lo)) + lo
}

/// A random prime in [lo, hi) (an odd candidate drawn uniformly, kept if
/// prime).
fn random_prime_in<R: RngCore + ?Sized>(rng: &mut R, lo: &Integer, hi: &Integer) -> Integer {
    loop {
        let mut c = random_range(rng, lo, hi);
        c.set_bit(0, true);
        if c < *hi && c.is_probably_prime(32) != IsPrime::No {
            return c;
        }
    }
}

/// A small-subgroup prime p = 2·α·β + 1 of exactly `bits` bits with
/// p > √2·2^(bits−1) (so the product of two has exactly 2·bits bits), α
/// a prime of exactly `a_bits` bits (top two bits set) and β a prime.
/// Returns (p, α, β).
///
/// β is drawn first and α re-drawn until p is prime: α is the short one,
/// so each try costs a cheap prime search plus one test of p. Ranges:
/// α ∈ [3·2^(a−2), 2^a), β ∈ [⌊√(2^(2·bits−1))⌋ / (3·2^(a−1)) + 1,
/// 2^(bits−a−1)), whence √2·2^(bits−1) < p < 2^bits.
fn gen_subgroup_prime<R: RngCore + ?Sized>(bits: u32, a_bits: u32, rng: &mut R) -> (Integer, Integer, Integer) {
    let a_lo = Integer::from(3) << (a_bits - 2);
    let a_hi = Integer::from(1) << a_bits;
    let root = (Integer::from(1) << (2 * bits - 1)).sqrt();
    let b_lo = root / (Integer::from(3) << (a_bits - 1)) + 1u32;
    let b_hi = Integer::from(1) << (bits - a_bits - 1);
    loop {
        let beta = random_prime_in(rng, &b_lo, &b_hi);
        let two_beta = Integer::from(&beta << 1u32);
        // a fresh β now and then, in case this one is unlucky
        for _ in 0..20 * bits {
            let alpha = random_prime_in(rng, &a_lo, &a_hi);
            let p = Integer::from(&two_beta * &alpha) + 1u32;
            if p.is_probably_prime(32) != IsPrime::No {
                debug_assert_eq!(p.significant_bits(), bits);
                return (p, alpha, beta);
            }
        }
    }
}

/// An element of order exactly α in Z_p^* for p = 2αβ + 1 (α prime):
/// x^{2β} for a random x, retried while it is 1.
fn order_alpha_element<R: RngCore + ?Sized>(p: &Integer, beta: &Integer, rng: &mut R) -> Integer {
    let e = Integer::from(beta << 1u32);
    loop {
        let x = random_below(rng, p);
        if x < 2 {
            continue;
        }
        let h = Integer::from(x.pow_mod_ref(&e, p).unwrap());
        if h != 1 {
            return h;
        }
    }
}

impl KeyPair {
    /// Generates a small-subgroup key ([`KeyKind::Subgroup`]) of `bits`
    /// (2048 or 3072; 1024 for tests) with the default window.
    pub fn generate<R: RngCore + CryptoRng + ?Sized>(bits: u32, rng: &mut R) -> Result<KeyPair> {
        Self::generate_with_window(bits, DEFAULT_WINDOW, rng)
    }

    /// Generates a small-subgroup key with fixed-base tables of window `w`.
    pub fn generate_with_window<R: RngCore + CryptoRng + ?Sized>(bits: u32, w: u32, rng: &mut R) -> Result<KeyPair> {
        Self::generate_kind(bits, w, KeyKind::Subgroup, rng)
    }

    /// Generates a key of the given kind with fixed-base tables of window `w`.
    pub fn generate_kind<R: RngCore + CryptoRng + ?Sized>(bits: u32, w: u32, kind: KeyKind, rng: &mut R) -> Result<KeyPair> {
        check_bits(bits)?;
        match kind {
            KeyKind::Djn => Ok(Self::generate_djn(bits, w, rng)),
            KeyKind::Subgroup => Ok(Self::generate_subgroup(bits, w, rng)),
        }
    }

    fn generate_djn<R: RngCore + CryptoRng + ?Sized>(bits: u32, w: u32, rng: &mut R) -> KeyPair {
        loop {
            let p = gen_prime(bits / 2, rng);
            let q = gen_prime(bits / 2, rng);
            if p == q {
                continue;
            }
            let n = Integer::from(&p * &q);
            if n.significant_bits() != bits {
                continue;
            }
            let pm1 = Integer::from(&p - 1);
            let qm1 = Integer::from(&q - 1);
            if Integer::from(pm1.gcd_ref(&qm1)) != 2 {
                continue;
            }
            // h_s = −x^{2n} mod n² for a random unit x
            let x = loop {
                let x = random_below(rng, &n);
                if x > 1 && Integer::from(x.gcd_ref(&n)) == 1 {
                    break x;
                }
            };
            let n2 = Integer::from(n.square_ref());
            let e = Integer::from(&n * 2);
            let xe = Integer::from(x.pow_mod_ref(&e, &n2).unwrap());
            let hs = Integer::from(&n2 - &xe);
            return Self::from_primes(KeyKind::Djn, p, q, pm1, qm1, hs, w);
        }
    }

    fn generate_subgroup<R: RngCore + CryptoRng + ?Sized>(bits: u32, w: u32, rng: &mut R) -> KeyPair {
        let a_bits = crate::subgroup_bits(bits);
        let (p, ap, mut bp) = gen_subgroup_prime(bits / 2, a_bits, rng);
        let (q, aq, mut bq) = loop {
            let (q, aq, bq) = gen_subgroup_prime(bits / 2, a_bits, rng);
            // distinct α's and β's make gcd(p − 1, q − 1) = 2 (all four
            // are odd primes, α's of one size and β's of another)
            if aq != ap && bq != bp && q != p {
                break (q, aq, bq);
            }
        };
        let n = Integer::from(&p * &q);
        debug_assert_eq!(n.significant_bits(), bits);
        // h of order α_p·α_q in Z_n^*: order α_p mod p and α_q mod q, CRT
        let mut h_p = order_alpha_element(&p, &bp, rng);
        let mut h_q = order_alpha_element(&q, &bq, rng);
        let mut p_inv = Integer::from(p.invert_ref(&q).unwrap());
        let mut h = Integer::from(&h_q - &h_p);
        h *= &p_inv;
        modulo(&mut h, &q);
        h *= &p;
        h += &h_p;
        // h_s = h^n mod n²: the n-th power keeps the order (gcd(n, α_pα_q) = 1)
        let n2 = Integer::from(n.square_ref());
        let hs = Integer::from(h.pow_mod_ref(&n, &n2).unwrap());
        // h mod p (or β) would reveal p: clear what this function holds
        wipe_all([&mut h, &mut h_p, &mut h_q, &mut bp, &mut bq, &mut p_inv]);
        Self::from_primes(KeyKind::Subgroup, p, q, ap, aq, hs, w)
    }

    /// Assembles a key pair; `ep`, `eq` are the decryption exponents
    /// (α_p, α_q, or p − 1, q − 1).
    fn from_primes(kind: KeyKind, p: Integer, q: Integer, ep: Integer, eq: Integer, hs: Integer, w: u32) -> KeyPair {
        let n = Integer::from(&p * &q);
        let pk = PublicKey::new(n, hs.clone(), w).expect("generated key is valid");
        let p2 = Integer::from(p.square_ref());
        let q2 = Integer::from(q.square_ref());
        let p2_inv = Integer::from(p2.invert_ref(&q2).unwrap());
        let p_inv = Integer::from(p.invert_ref(&q).unwrap());
        let inv = |e: &Integer, other: &Integer, modulus: &Integer| {
            let t = Integer::from(e * other) % modulus;
            Integer::from(t.invert_ref(modulus).expect("e·q is a unit mod p"))
        };
        let hp = inv(&ep, &q, &p);
        let hq = inv(&eq, &p, &q);
        let pm1 = Integer::from(&p - 1);
        let qm1 = Integer::from(&q - 1);
        let hp_full = inv(&pm1, &q, &p);
        let hq_full = inv(&qm1, &p, &q);
        let a_bits = pk.short_exponent_bits();
        let tp = FixedBase::new(&hs, &p2, a_bits, w, true);
        let tq = FixedBase::new(&hs, &q2, a_bits, w, true);
        let (mp2, mq2) = if crate::ifma::available() {
            (crate::ifma::MontCtx::new(&p2), crate::ifma::MontCtx::new(&q2))
        } else {
            (None, None)
        };
        let fp = mp2.as_ref().and_then(|c| crate::ifma::FixedTable::new(c, &tp));
        let fq = mq2.as_ref().and_then(|c| crate::ifma::FixedTable::new(c, &tq));
        KeyPair {
            pk,
            kind,
            p,
            q,
            p2,
            q2,
            p2_inv,
            p_inv,
            ep,
            eq,
            hp,
            hq,
            hp_full,
            hq_full,
            pm1,
            qm1,
            tp,
            tq,
            mp2,
            mq2,
            fp,
            fq,
        }
    }

    /// How this key was generated.
    pub fn kind(&self) -> KeyKind {
        self.kind
    }

    /// Bits of the larger CRT decryption exponent (|α_p| for small-subgroup
    /// keys, |p − 1| for DJN keys).
    pub fn decryption_exponent_bits(&self) -> u32 {
        self.ep.significant_bits().max(self.eq.significant_bits())
    }

    /// (p, q, e_p, e_q) for the structure tests.
    #[cfg(test)]
    pub(crate) fn test_secrets(&self) -> (&Integer, &Integer, &Integer, &Integer) {
        (&self.p, &self.q, &self.ep, &self.eq)
    }

    #[cfg(test)]
    pub(crate) fn test_p2_table(&self) -> (&Integer, &FixedBase) {
        (&self.p2, &self.tp)
    }

    /// The public key.
    pub fn public(&self) -> &PublicKey {
        &self.pk
    }

    /// Bytes of the two secret fixed-base tables.
    pub fn table_bytes(&self) -> usize {
        self.tp.table_bytes() + self.tq.table_bytes()
    }

    /// Encrypts m ∈ [0, n) with CRT (two half-size fixed-base products).
    pub fn encrypt<R: RngCore + CryptoRng + ?Sized>(&self, m: &Integer, rng: &mut R) -> Result<Ciphertext> {
        self.pk.check_plain(m)?;
        let a = random_bits(rng, self.pk.short_exponent_bits());
        let mn = Integer::from(m * self.pk.n());
        let mut cp = self.tp.pow(&a);
        let mut gp = Integer::from(&mn % &self.p2);
        gp += 1;
        cp *= &gp;
        cp %= &self.p2;
        let mut cq = self.tq.pow(&a);
        let mut gq = Integer::from(&mn % &self.q2);
        gq += 1;
        cq *= &gq;
        cq %= &self.q2;
        Ok(Ciphertext(self.crt_n2(cp, cq)))
    }

    /// Encrypts many plaintexts (CRT): eight at a time with the fixed-base
    /// products on the IFMA lanes ([`crate::ifma::FixedTable::pow8`]) where
    /// the CPU has IFMA, else one by one. Same distribution as
    /// [`KeyPair::encrypt`].
    pub fn encrypt_batch<R: RngCore + CryptoRng + ?Sized>(&self, ms: &[Integer], rng: &mut R) -> Result<Vec<Ciphertext>> {
        let (Some(mp2), Some(mq2), Some(fp), Some(fq)) = (&self.mp2, &self.mq2, &self.fp, &self.fq) else {
            return ms.iter().map(|m| self.encrypt(m, rng)).collect();
        };
        let mut out = Vec::with_capacity(ms.len());
        for chunk in ms.chunks(crate::ifma::LANES) {
            for m in chunk {
                self.pk.check_plain(m)?;
            }
            let a: Vec<Integer> = chunk.iter().map(|_| random_bits(rng, self.pk.short_exponent_bits())).collect();
            let hp = fp.pow8(mp2, &a);
            let hq = fq.pow8(mq2, &a);
            for ((m, mut cp), mut cq) in chunk.iter().zip(hp).zip(hq) {
                let mn = Integer::from(m * self.pk.n());
                let mut gp = Integer::from(&mn % &self.p2);
                gp += 1;
                cp *= &gp;
                cp %= &self.p2;
                let mut gq = Integer::from(&mn % &self.q2);
                gq += 1;
                cq *= &gq;
                cq %= &self.q2;
                out.push(Ciphertext(self.crt_n2(cp, cq)));
            }
        }
        Ok(out)
    }

    /// Encrypts a signed 64-bit value (CRT).
    pub fn encrypt_i64<R: RngCore + CryptoRng + ?Sized>(&self, m: i64, rng: &mut R) -> Ciphertext {
        self.encrypt(&self.pk.encode(&Integer::from(m)).unwrap(), rng).unwrap()
    }

    /// Encrypts an unsigned 64-bit value (CRT).
    pub fn encrypt_u64<R: RngCore + CryptoRng + ?Sized>(&self, m: u64, rng: &mut R) -> Ciphertext {
        self.encrypt(&Integer::from(m), rng).unwrap()
    }

    fn crt_n2(&self, cp: Integer, cq: Integer) -> Integer {
        // c = cp + p²·((cq − cp)·p^{-2} mod q²)
        let mut t = cq - &cp;
        t *= &self.p2_inv;
        modulo(&mut t, &self.q2);
        t *= &self.p2;
        t += cp;
        t
    }

    /// Decrypts (CRT): m_p = L_p(c^{e_p} mod p²)·(e_p·q)^{-1} mod p,
    /// likewise mod q, recombined mod n, with e_p = α_p for small-subgroup
    /// keys (p − 1 for DJN keys). A ciphertext outside (1 + n)^Z·⟨h_s⟩ —
    /// which no honest party produces — is seen by c^{e_p} ≢ 1 (mod p) and
    /// decrypted with the full exponent p − 1 instead, so the result is the
    /// standard Paillier decryption of c for every unit c (see the crate
    /// docs). The ciphertext must have been validated.
    pub fn decrypt(&self, c: &Ciphertext) -> Integer {
        let mp = self.half_dec(&c.0, Half::P);
        let mq = self.half_dec(&c.0, Half::Q);
        self.crt_n(mp, mq)
    }

    /// The standard CRT decryption with the full exponents p − 1, q − 1
    /// whatever the key kind (the reference the fast path is tested against,
    /// and the figure it is benchmarked against).
    pub fn decrypt_full_exponent(&self, c: &Ciphertext) -> Integer {
        let mp = self.half_full(&Integer::from(&c.0 % &self.p2), Half::P);
        let mq = self.half_full(&Integer::from(&c.0 % &self.q2), Half::Q);
        self.crt_n(mp, mq)
    }

    fn crt_n(&self, mp: Integer, mq: Integer) -> Integer {
        // m = mp + p·((mq − mp)·p^{-1} mod q)
        let mut t = mq - &mp;
        t *= &self.p_inv;
        modulo(&mut t, &self.q);
        t *= &self.p;
        t += mp;
        t
    }

    /// Decrypts many ciphertexts: eight at a time on the IFMA path (the two
    /// CRT exponentiations c^{e_p} mod p², c^{e_q} mod q² of eight
    /// ciphertexts in the lanes of [`crate::ifma::MontCtx::pow8`]), else one
    /// by one with GMP. Equal to [`KeyPair::decrypt`] on each (including its
    /// full-exponent fallback, taken per ciphertext and half).
    pub fn decrypt_batch(&self, cs: &[Ciphertext]) -> Vec<Integer> {
        let (Some(mp2), Some(mq2)) = (&self.mp2, &self.mq2) else {
            return cs.iter().map(|c| self.decrypt(c)).collect();
        };
        let mut out = Vec::with_capacity(cs.len());
        for chunk in cs.chunks(crate::ifma::LANES) {
            if chunk.len() == 1 {
                out.push(self.decrypt(&chunk[0]));
                continue;
            }
            let bases: Vec<&Integer> = chunk.iter().map(|c| &c.0).collect();
            let xp = mp2.pow8(&bases, &self.ep);
            let xq = mq2.pow8(&bases, &self.eq);
            for ((c, xp), xq) in chunk.iter().zip(xp).zip(xq) {
                let mp = self.half_finish(xp, Half::P).unwrap_or_else(|| self.half_full(&Integer::from(&c.0 % &self.p2), Half::P));
                let mq = self.half_finish(xq, Half::Q).unwrap_or_else(|| self.half_full(&Integer::from(&c.0 % &self.q2), Half::Q));
                out.push(self.crt_n(mp, mq));
            }
        }
        out
    }

    fn half(&self, h: Half) -> (&Integer, &Integer, &Integer, &Integer, &Integer, &Integer) {
        match h {
            Half::P => (&self.p, &self.p2, &self.ep, &self.hp, &self.pm1, &self.hp_full),
            Half::Q => (&self.q, &self.q2, &self.eq, &self.hq, &self.qm1, &self.hq_full),
        }
    }

    /// m mod p from x = c^{e_p} mod p²: (x − 1)/p·(e_p·q)^{-1} mod p, or
    /// `None` when x ≢ 1 (mod p) (c is outside (1 + n)^Z·⟨h_s⟩ mod p²).
    fn half_finish(&self, mut x: Integer, h: Half) -> Option<Integer> {
        let (p, _, _, hp, _, _) = self.half(h);
        x -= 1;
        if !x.is_divisible(p) {
            return None;
        }
        x.div_exact_mut(p);
        x *= hp;
        x %= p;
        Some(x)
    }

    /// The standard half decryption: L_p(c^{p−1} mod p²)·(−q)^{-1} mod p,
    /// for c already reduced mod p². (For a validated c, x ≡ 1 mod p; for
    /// a non-unit, which validation rejects, the floor quotient keeps this
    /// from panicking and the result is meaningless.)
    fn half_full(&self, cp: &Integer, h: Half) -> Integer {
        let (p, p2, _, _, pm1, hp_full) = self.half(h);
        let mut x = Integer::from(cp.pow_mod_ref(pm1, p2).expect("non-negative exponent"));
        x -= 1;
        x /= p;
        x *= hp_full;
        modulo(&mut x, p);
        x
    }

    fn half_dec(&self, c: &Integer, h: Half) -> Integer {
        let (_, p2, e, _, _, _) = self.half(h);
        let cp = Integer::from(c % p2);
        let x = Integer::from(cp.pow_mod_ref(e, p2).expect("non-negative exponent"));
        self.half_finish(x, h).unwrap_or_else(|| self.half_full(&cp, h))
    }

    /// Decrypts to the centred signed value.
    pub fn decrypt_signed(&self, c: &Ciphertext) -> Integer {
        self.pk.decode_signed(&self.decrypt(c))
    }

    /// Reference decryption without CRT (m = L(c^λ mod n²)·λ^{-1} mod n),
    /// for tests.
    pub fn decrypt_no_crt(&self, c: &Ciphertext) -> Integer {
        let lambda = Integer::from(&self.pm1 * &self.qm1) >> 1u32;
        let n = self.pk.n();
        let mut x = Integer::from(c.0.pow_mod_ref(&lambda, self.pk.n2()).unwrap());
        x -= 1;
        x.div_exact_mut(n);
        let mu = Integer::from(lambda.invert_ref(n).unwrap());
        x *= mu;
        x %= n;
        x
    }
}
