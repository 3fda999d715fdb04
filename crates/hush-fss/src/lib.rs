//! # hush-fss — function secret sharing for the comparison layer
//!
//! Pure, IO-free key generation and evaluation of the FSS schemes of
//! Boyle, Chandran, Gilboa, Gupta, Ishai, Kumar and Rathee, *Function Secret
//! Sharing for Mixed-Mode and Fixed-Point Secure Computation*, Eurocrypt 2021
//! (ePrint 2020/1392; "BCGGIKR21" below), instantiated with a fixed-key-AES
//! PRG ([`ggm`]).
//!
//! * [`dcf`] — the distributed comparison function f_{α,β}(x) = β·\[x < α\]
//!   (BCGGIKR21 §3, the DCF Gen/Eval figure), single and batched evaluation.
//! * [`batch`] — [`DcfKeyBatch`]: many keys in a structure-of-arrays
//!   layout built offline, evaluated with AVX-512 + VAES (four seeds per
//!   register, lane masks for the control bits) or a portable fallback;
//!   the gates' batch types ([`DreluBatch`], [`ReluBatch`], [`LtBatch`])
//!   wrap it.
//! * [`gates`] — FSS gates on *masked* inputs x̂ = x + r_in (the offset-family
//!   view of Boyle–Gilboa–Ishai TCC'19 / BCGGIKR21 §2): DReLU (sign),
//!   ReLU as a two-piece spline with output coefficients (BCGGIKR21 splines;
//!   CRISP Alg. 1-2, made exact), and less-than against a dealer-chosen
//!   threshold (interval containment from two DCFs).
//! * Batched key generation — [`dcf_gen_batch`], [`dcf_gen_batch_multi`],
//!   [`drelu_gen_batch`], [`relu_gen_batch`], [`lt_gen_batch`]: many keys
//!   built level by level, one AES call per tree level over the seeds of a
//!   chunk of keys and branch-free per-key corrections. Same PRG draws in
//!   the same order as repeated one-at-a-time generation, hence the same
//!   keys byte for byte (tested). Callers that serialize and drop keys
//!   should batch in modest chunks (e.g. 64 gates) to keep the key memory
//!   hot.
//! * [`wide`] — DCFs whose output group is (Z_2^m)^L with m ≤ 128, L ≤ 4
//!   (the lifted ring of the malicious-client gates); [`mac`] — CRISP's
//!   MAC-carrying ReLU gate on it (shares of ReLU(x), μ·ReLU(x) and μ·x from
//!   one opening of x + r).
//! * [`bench`](mod@bench) — throughput measurement the CLI can call.
//!
//! ## Exactness
//! Every gate is exact over the whole ring Z_2^bits, including wrap-around of
//! x + r_in: there is no "holds with high probability" shortcut (CRISP eq. 2
//! is such a shortcut; hush does not use it). The tests check every input
//! for 8-bit rings and edge cases for 16, 32, 37 and 64 bits.
//!
//! ## Security
//! Semi-honest two-party FSS in the preprocessing model: a dealer (in hush the
//! trusted module, `hush-tee`, from a seed-derived [`Prg`]) runs `*_gen`; each
//! party gets one key. One key alone is computationally indistinguishable
//! from a key for any other function of the same shape, given that the PRG
//! (fixed-key AES in Matyas–Meyer–Oseas mode, modelled as a random
//! permutation) is secure. The gates additionally require that the input
//! mask r_in is uniformly random and used for exactly one opening: x̂ =
//! x + r_in is public to both parties, so reusing r_in leaks differences of
//! inputs. Evaluation time depends only on public data (x̂ and the
//! parameters), never on key contents.
//!
//! Key bytes are hostile: [`DcfKey::from_bytes`] and the gate keys'
//! `from_bytes` check the header, the exact length and canonical encoding,
//! return [`Error`] and never panic. All keys zeroize on drop.
//!
//! [`Prg`]: hush_primitives::Prg

pub mod batch;
pub mod bench;
mod codec;
pub mod dcf;
#[cfg(target_arch = "x86_64")]
mod dcf_gen_x86;
pub mod deal;
pub mod gates;
pub mod ggm;
pub mod mac;
pub mod wide;

pub use batch::DcfKeyBatch;
pub use dcf::{
    dcf_eval, dcf_eval_batch, dcf_gen, dcf_gen_batch, dcf_gen_batch_multi, try_dcf_gen, try_dcf_gen_batch, DcfBatchSpec, DcfKey,
    DcfKeyVecs,
};
pub use gates::{
    drelu_eval, drelu_eval_batch, drelu_gen, drelu_gen_batch, lt_eval, lt_eval_batch, lt_gen, lt_gen_batch, relu_eval,
    relu_eval_batch, relu_gen, relu_gen_batch, try_drelu_gen_batch, try_lt_gen_batch, try_relu_gen_batch, DreluBatch, DreluKey, LtBatch, LtKey, ReluBatch, ReluKey,
};

/// Errors of hush-fss: malformed key bytes and bad parameters.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// The byte string has the wrong length for the parameters in its header.
    #[error("{what}: expected {expected} bytes, got {got}")]
    Length { what: &'static str, expected: usize, got: usize },
    /// The header does not describe a key of this type.
    #[error("{what}: bad header: {reason}")]
    Header { what: &'static str, reason: &'static str },
    /// A field is outside its range (non-canonical encoding).
    #[error("{what}: non-canonical encoding: {reason}")]
    NonCanonical { what: &'static str, reason: &'static str },
    /// A parameter passed to key generation is out of range.
    #[error("bad parameter {name} = {value}: {reason}")]
    Param { name: &'static str, value: u64, reason: &'static str },
}

/// Low `bits` ones (bits ≤ 64).
#[inline]
pub(crate) fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}
