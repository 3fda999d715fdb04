//! Paillier encryption in the DJN variant, made fast on a CPU, and the
//! hybrid secret-sharing ↔ Paillier protocols of SHAPER (App. C).
//!
//! # Scheme
//!
//! n = pq of exactly the requested size (2048 or 3072 bits; 1024 only for
//! tests), g = n + 1, so g^m = 1 + mn (mod n²). The public key is (n, h_s)
//! and encryption is
//!
//! ```text
//! c = (1 + m·n) · h_s^a  mod n²,   a a random short exponent of 2κ bits
//! ```
//!
//! (κ = 112 for 2048-bit keys, 128 for 3072: |a| = 224 / 256 bits; the best
//! generic attack on a short exponent, Pollard's λ, costs 2^{|a|/2} = 2^κ).
//!
//! # Key generation
//!
//! **Small-subgroup keys** ([`KeyKind::Subgroup`], the default of
//! [`KeyPair::generate`]) follow Paillier's "Scheme 3" (Eurocrypt 1999,
//! "reaching almost-quadratic decryption complexity": a base of small
//! order α, so that decryption raises to α instead of λ) in the DJN form
//! of Ma, Han and Lei, "Optimized Paillier's Cryptosystem with Fast
//! Encryption and Decryption" (ACSAC 2021):
//!
//! * p = 2·α_p·β_p + 1 and q = 2·α_q·β_q + 1 with α_p ≠ α_q primes of
//!   |α| = [`subgroup_bits`] = 2κ + 32 bits (256 for 2048-bit n, 288 for
//!   3072) and β_p ≠ β_q primes filling the rest (so gcd(p−1, q−1) = 2 and
//!   Z_p^* has no subgroup of small order but 2);
//! * h ∈ Z_n^* of order exactly α_p·α_q (x^{2β_p} ≠ 1 mod p, likewise mod
//!   q, joined by CRT) and h_s = h^n mod n², of the same order in Z_{n²}^*;
//! * decryption: since h^{α_p} ≡ 1 (mod p), h^{α_p} = 1 + kp (mod p²) and
//!   h_s^{α_p} = (1 + kp)^n ≡ 1 (mod p²) (p divides n), so for an honest
//!   c = (1 + n)^m·h_s^a, c^{α_p} ≡ 1 + m·α_p·n (mod p²) and
//!   m ≡ L_p(c^{α_p} mod p²)·(α_p·q)^{-1} (mod p), L_p(x) = (x − 1)/p;
//!   likewise mod q, joined by CRT. The exponent has |α_p| = 256 bits
//!   instead of the 1023 of p − 1, which makes decryption 3.4–4× faster
//!   (4.6–5× at 3072 bits, 288 exponent bits against 1535; README,
//!   Paillier table). Encryption is unchanged.
//!
//! *Assumption.* IND-CPA rests on DCR (as DJN) plus the decisional
//! small-subgroup assumption of Ma et al.: given (n, h_s), a uniform
//! element of ⟨h_s⟩ is indistinguishable from a uniform 2n-th power
//! x^{2n} mod n²; and, as in DJN, h_s^a with a short a is
//! indistinguishable from a uniform element of ⟨h_s⟩ (⟨h_s⟩ has order
//! ≥ 2^{2|α|−2} ≫ 2^{2κ}, so a ↦ h_s^a is injective on the short
//! exponents; Ma et al. draw a of |α_p·α_q| bits, we keep DJN's 2κ, whose
//! λ-method bound 2^κ does not depend on the group order). The chain:
//! (1 + n)^m·h_s^a ≈ (1 + n)^m·u, u uniform in ⟨h_s⟩ ≈ (1 + n)^m·x^{2n}
//! ≈ (by DCR, squared) (1 + n)^m·y² for a uniform unit y mod n², which is
//! a uniform square whatever m ((1 + n)^m has odd order n).
//!
//! *What bounds |α|.* h_s mod n is public and has order α_p·α_q: exactly
//! the "RSA subgroup pair" of Groth (TCC 2005). Coron, Joux, Mandal,
//! Naccache and Tibouchi ("Cryptanalysis of the RSA Subgroup Assumption
//! from TCC 2005", PKC 2011) factor n from such a pair in roughly
//! 2^{|α|/2} operations (a baby-step giant-step search for the order α_p
//! of h_s mod the unknown p, run modulo n with fast multipoint polynomial
//! evaluation, the hit revealed by a gcd with n); this is the best known
//! attack, so |α| ≥ 2κ is needed (Ma et al. use |α_p| = 2κ = 224 at 2048
//! bits) and we add 32 bits: 2^{128} at 2048, 2^{144} at 3072. Generic order finding
//! on ⟨h_s⟩ costs 2^{|α|}; Pollard's p − 1 fails because p − 1 has the
//! prime factor α_p (and β_p); factoring n directly (NFS) is unchanged
//! since p and q keep their full size. Tests check that generated keys have
//! this structure (`check_subgroup_structure` in `tests.rs`).
//!
//! *Malformed ciphertexts.* Peer ciphertexts are validated exactly as
//! before (size, 0 < c < n², unit). A unit outside (1 + n)^Z·⟨h_s⟩ — no
//! party that follows the protocol produces one: the peer only sends
//! results of public-key operations on h_s-randomised ciphertexts — is
//! noticed at decryption by c^{α_p} ≢ 1 (mod p) (one division) and
//! decrypted with the full exponent p − 1 instead. For *every* unit the
//! result equals standard Paillier decryption: write c ≡ ω·(1 + p)^t
//! (mod p²) with ω^{p−1} = 1; if c passes, ω^{α_p} = 1 and both exponents
//! give m_p = t·q^{-1} mod p. So decryption is the same function of c as
//! with a DJN key and the protocols' arguments (masks, packing) carry over
//! unchanged; a malformed ciphertext only costs one more, full-size
//! exponentiation (tested: `ciphertexts_outside_the_subgroup_…`). Whether
//! the fallback ran is visible in the timing, which, like the rest of this
//! crate, is not constant time; in the semi-honest model the peer learns
//! nothing from it (it built the ciphertext), and an active peer would
//! only learn whether ord_p(c) divides α_p.
//!
//! Small-subgroup key generation takes 0.3–1.1 s at 2048 bits and
//! 0.4–1.4 s at 3072 (standard ones 0.1–0.3 s): β is drawn once and the
//! short α redrawn until 2·α·β + 1 is prime. The public key format is
//! unchanged (n, h_s), so a peer needs nothing new and cannot tell the
//! kinds apart.
//!
//! **DJN keys** ([`KeyKind::Djn`], [`KeyPair::generate_kind`]): random
//! p ≡ q ≡ 3 (mod 4) with gcd(p−1, q−1) = 2 and h_s = −x^{2n} mod n² for a
//! random unit x (Damgård, Jurik, Nielsen); decryption exponents p − 1 and
//! q − 1. Kept as the reference and for the benchmark's comparison;
//! [`KeyPair::decrypt_full_exponent`] and [`KeyPair::decrypt_no_crt`] are
//! the full-exponent decryptions of either kind.
//!
//! # Performance
//!
//! * **Fixed-base precomputation** ([`FixedBase`]): h_s^a is a product of
//!   |a|/w table entries (window w = 8 by default), so an encryption is
//!   ≈ 28 modular multiplications instead of an exponentiation.
//! * **CRT at the key owner** ([`KeyPair::encrypt`]): h_s^a mod p² and mod q²
//!   from two half-size tables, recombined with p^{-2} mod q²; decryption
//!   computes c^{α_p} mod p² and c^{α_q} mod q² (c^{p−1}, c^{q−1} for DJN
//!   keys) and recombines m mod n.
//! * **Packing** ([`Packing`]): several masked values per plaintext in
//!   overflow-free slots, so one decryption serves many conversions.
//! * **Validation**: ciphertexts from the peer must be exactly the encoded
//!   size (checked before any allocation), in 0 < c < n², and units mod n²
//!   (gcd(c, n) = 1); anything else is [`Error::BadCiphertext`].
//!
//! # Big integers
//!
//! GMP through `rug` (system GMP: see the crate README section in the
//! workspace README). Where the CPU has AVX-512 IFMA, the batched paths —
//! encryption and decryption ([`KeyPair::encrypt_batch`],
//! [`KeyPair::decrypt_batch`]), h2s packing ([`Packing::pack_many`]), the
//! triple helper's products and sparse row products
//! ([`sparse::Csr::rows_enc`]) — run eight ciphertexts at a time on a
//! hand-written 52-bit-limb Montgomery arithmetic ([`ifma`]), each tested
//! equal to GMP; the evaluator's batched ct·pt ([`PublicKey::mul_u64_batch`])
//! runs on a two-digit form of Z/n² (x₀ + x₁·n, Montgomery reductions mod
//! n only: [`ifma::n2`]). `HUSH_PAILLIER=gmp` forces GMP everywhere, as does
//! `HUSH_SIMD=avx2` or `portable` (no AVX2 kernel here: GMP is the portable
//! path). [`backend`] says which path ran.
//!
//! # Secrets
//!
//! p, q, the decryption exponents α_p, α_q and the constants derived from
//! them (hp, hq, p^{-1} mod q, p^{-2} mod q²) and the
//! secret fixed-base tables are wiped (their GMP limbs overwritten with
//! zeros) on drop. GMP cannot be made to wipe what it frees internally:
//! temporaries of `mpz_powm`, buffers released when an integer is
//! reallocated, and the prime-generation candidates; those are left to the
//! allocator. The short exponents a are not wiped after use.

mod fixedbase;
pub mod ifma;
mod key;
mod pack;
pub mod packed;
pub mod proto;
pub mod sparse;
mod wipe;

pub use fixedbase::FixedBase;
pub use key::{Ciphertext, KeyKind, KeyPair, PublicKey};
pub use pack::Packing;
pub use rug::Integer;

/// Which big-integer path runs the arithmetic (reported in benchmark
/// records): `"gmp"`, or `"gmp+ifma"` where batched encryption and
/// decryption ([`KeyPair::encrypt_batch`], [`KeyPair::decrypt_batch`]), h2s
/// packing ([`Packing::pack_many`]) and sparse row products
/// ([`sparse::Csr::rows_enc`]) run on AVX-512 IFMA (single operations stay
/// on GMP).
pub fn backend() -> &'static str {
    if ifma::available() {
        "gmp+ifma"
    } else {
        "gmp"
    }
}

/// The path of [`KeyPair::decrypt_batch`] and [`KeyPair::encrypt_batch`]: `"ifma"` (eight lanes of
/// AVX-512 IFMA Montgomery) or `"gmp"` (the CPU lacks IFMA, or
/// `HUSH_PAILLIER=gmp`).
pub fn dec_batch_path() -> &'static str {
    if ifma::available() {
        "ifma"
    } else {
        "gmp"
    }
}

/// The GMP version linked.
pub fn gmp_version() -> String {
    // SAFETY: gmp_version is a static NUL-terminated C string.
    unsafe { std::ffi::CStr::from_ptr(gmp_mpfr_sys::gmp::version) }.to_string_lossy().into_owned()
}

/// Errors of this crate. A misbehaving peer maps to one of these; none panics.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("unsupported Paillier key size {0} bits (use 2048 or 3072; 1024 is for tests only)")]
    KeySize(u32),
    #[error("invalid ciphertext from the peer in {what}: {reason}")]
    BadCiphertext { what: &'static str, reason: &'static str },
    #[error("malformed message from the peer in {what}: {reason}")]
    Malformed { what: &'static str, reason: String },
    #[error("plaintext out of range: {0}")]
    PlaintextRange(String),
    #[error("packing: {0}")]
    Packing(String),
    #[error(transparent)]
    Transport(#[from] hush_transport::Error),
}

pub type Result<T> = std::result::Result<T, Error>;

/// Statistical security parameter σ of the masks (bits).
pub const SIGMA: u32 = 40;

/// Length in bits of the short DJN exponent for a modulus of `n_bits`.
pub fn short_exponent_bits(n_bits: u32) -> u32 {
    match n_bits {
        0..=1024 => 160,
        1025..=2048 => 224,
        _ => 256,
    }
}

/// Bits of the prime α_p (and α_q) of a small-subgroup key
/// ([`KeyKind::Subgroup`]) for a modulus of `n_bits`: 2κ + 32, i.e. 256 for
/// 2048-bit n (κ = 112) and 288 for 3072-bit n (κ = 128); 192 for the
/// 1024-bit test keys. Coron et al.'s attack on the hidden subgroup costs
/// about 2^{|α_p|/2} (crate docs, "Key generation"), so 2κ is the bound
/// and the 32 extra bits are margin (16 bits of security) for an attack
/// whose polynomial factors are small.
pub fn subgroup_bits(n_bits: u32) -> u32 {
    match n_bits {
        0..=1024 => 192,
        1025..=2048 => 256,
        _ => 288,
    }
}

#[cfg(test)]
mod tests;
