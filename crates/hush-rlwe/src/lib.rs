//! # hush-rlwe — RLWE for linear layers, and Cheetah's HE linear layers
//!
//! The lattice-HE layer of hush's `interactive` (and `silent`) modes: the
//! linear layers of private inference without any trusted party.
//!
//! * [`params`] — the parameter sets, from the Homomorphic Encryption
//!   Security Standard at 128 bits (N = 4096, log q ≤ 109; N = 8192,
//!   log q ≤ 218), and one **insecure test-only** set (N = 256).
//! * [`ring`] — R_q = Z_q\[X\]/(X^N+1) in RNS on `tfhe-ntt`'s negacyclic NTT
//!   (no NTT of our own), ternary secrets, centered-binomial errors
//!   (η = 21, σ ≈ 3.24), Cheetah's exact encoding round(q·m/2^ℓ) for the
//!   plaintext ring Z_2^ℓ — the ring of hush's shares — and modulus
//!   switching to 2^k.
//! * [`he`] — keys, seeded ciphertexts (the seed of a travels, not a),
//!   public-key re-randomisation, decryption of switched responses.
//! * [`cheetah`] — Cheetah's HomConv/HomFC coefficient encodings and the
//!   two-party linear-layer protocol over a [`hush_transport::Channel`],
//!   with noise flooding for circuit privacy; its doc comment states each
//!   party's view.
//! * [`ckks`] — CKKS encoding with complex slots (canonical embedding by
//!   one FFT), secret-key encryption, ct × pt and ct + pt, and CRISP's
//!   value + i·MAC slot packing; the building block of CRISP's linear
//!   layers (its docs state the parameters, the measured error and what is
//!   still missing for exact MAC checks).
//! * [`ckks_crisp`] — CRISP's linear layers: value + X^(N/2)·MAC (the
//!   imaginary unit of every CKKS slot) in one ciphertext, exact scale
//!   q/2^k on the lifted ring, flooding, the well-formedness gap stated.
//! * [`wire`] — bit-packed residues with range checks.
//!
//! The crate sits at the protocol layer and depends only on transport and
//! primitives, so a CKKS layer (malicious-client inference) can reuse
//! [`ring`] and [`params`].

pub mod cheetah;
pub mod ckks;
pub mod ckks_crisp;
pub mod he;
pub mod params;
pub mod ring;
pub mod wire;

pub use cheetah::{Config, HeClient, HeServer, Layout, Shape};

/// The NTT kernels `tfhe-ntt` dispatches to on this CPU in this build:
/// `"avx512"` (built with the default feature `ntt-avx512` on a CPU with
/// AVX-512 F/BW/CD/DQ/VL), `"avx2"` (AVX2 and FMA), or `"scalar"`. The
/// crate picks at run time and offers no switch, so hush's `HUSH_SIMD`
/// does not steer it; the AVX2 kernels are tested on an AVX-512 machine
/// by building this crate without `ntt-avx512` (`scripts/test.sh`), and
/// the scalar kernels only where the CPU lacks AVX2. Benchmark records
/// carry it as `ntt_path`.
pub fn ntt_path() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        let v4 = ["avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"];
        let has = |f: &str| match f {
            "avx512f" => std::arch::is_x86_feature_detected!("avx512f"),
            "avx512bw" => std::arch::is_x86_feature_detected!("avx512bw"),
            "avx512cd" => std::arch::is_x86_feature_detected!("avx512cd"),
            "avx512dq" => std::arch::is_x86_feature_detected!("avx512dq"),
            "avx512vl" => std::arch::is_x86_feature_detected!("avx512vl"),
            _ => false,
        };
        let v3 = std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma");
        if cfg!(feature = "ntt-avx512") && v3 && v4.iter().all(|f| has(f)) {
            return "avx512";
        }
        if v3 {
            return "avx2";
        }
    }
    "scalar"
}
pub use params::Params;
pub use ring::Context;

/// Errors of the RLWE layer. A peer's malformed bytes are [`Error::Malformed`]
/// (or a transport error for a wrong length), never a panic.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("transport: {0}")]
    Transport(#[from] hush_transport::Error),
    #[error("RLWE parameters: {0}")]
    Params(String),
    #[error("linear layer shape: {0}")]
    Shape(String),
    #[error("malformed {what}: {why}")]
    Malformed { what: &'static str, why: String },
    #[error("parameter mismatch with the peer: {0}")]
    Mismatch(String),
}

pub type Result<T> = std::result::Result<T, Error>;
