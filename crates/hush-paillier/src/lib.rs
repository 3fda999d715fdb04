//! Paillier encryption in the DJN variant, made fast on a CPU, and the
//! hybrid secret-sharing ↔ Paillier protocols of SHAPER (App. C).
//!
//! # Scheme
//!
//! Key generation picks primes p ≡ q ≡ 3 (mod 4) with gcd(p−1, q−1) = 2 and
//! n = pq of exactly the requested size (2048 or 3072 bits; 1024 only for
//! tests). With g = n + 1, g^m = 1 + mn (mod n²). The public key carries
//! h_s = −x^{2n} mod n² for a random unit x, and encryption is
//!
//! ```text
//! c = (1 + m·n) · h_s^a  mod n²,   a a random short exponent of 2κ bits
//! ```
//!
//! (κ = 112 for 2048-bit keys, 128 for 3072: |a| = 224 / 256 bits; the best
//! generic attack on a short exponent, Pollard's λ, costs 2^{|a|/2} = 2^κ).
//!
//! * **Fixed-base precomputation** ([`FixedBase`]): h_s^a is a product of
//!   |a|/w table entries (window w = 8 by default), so an encryption is
//!   ≈ 28 modular multiplications instead of an exponentiation.
//! * **CRT at the key owner** ([`KeyPair::encrypt`]): h_s^a mod p² and mod q²
//!   from two half-size tables, recombined with p^{-2} mod q²; decryption
//!   computes c^{p−1} mod p² and c^{q−1} mod q² and recombines m mod n.
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
//! equal to GMP; `HUSH_PAILLIER=gmp` forces GMP everywhere. [`backend`] says
//! which path ran.
//!
//! # Secrets
//!
//! p, q, λ-related constants (hp, hq, p^{-1} mod q, p^{-2} mod q²) and the
//! secret fixed-base tables are wiped (their GMP limbs overwritten with
//! zeros) on drop. GMP cannot be made to wipe what it frees internally:
//! temporaries of `mpz_powm`, buffers released when an integer is
//! reallocated, and the prime-generation candidates; those are left to the
//! allocator. The short exponents a are not wiped after use.

mod fixedbase;
pub mod ifma;
mod key;
mod pack;
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
