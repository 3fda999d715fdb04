//! # hush-correlations — where correlated randomness comes from
//!
//! Above the primitives and below every protocol. Protocols obtain
//! correlated OTs only through the traits of [`source`] ([`CorrelationSource`],
//! [`CotSender`], [`CotReceiver`]), never from a concrete generator, so the
//! same protocol runs on IKNP, Ferret or (in `tee` mode) SilentFlow.
//!
//! **COT convention** (VISION.md): the sender holds Δ and q_i; the receiver
//! holds b_i and t_i = q_i ⊕ b_i·Δ (128-bit blocks). Δ is fixed for the
//! lifetime of a source.
//!
//! * [`base_ot`] — Chou–Orlandi base OT over Ristretto255.
//! * [`iknp`] — IKNP OT extension, the first [`CorrelationSource`].
//! * [`ot`] — random OT, chosen-message OT and 1-out-of-N OT derived from any
//!   COT source with the tweakable correlation-robust hash.
//! * [`lpn`] — regular-noise primal LPN parameters (Ferret's ≥128-bit sets)
//!   and the public local linear code A with its batched product.
//! * [`ggm`] — host-side GGM tree expansion (BOX blocking, Ferret's
//!   per-level sums and punctured reconstruction).
//! * [`fused`] — kernel fusion of GGM and LPN (SilentFlow eq. 2).
//! * [`silentflow`] — SilentFlow, the `tee`-mode COT source: no
//!   communication after setup; trusted module from `hush-tee`.
//! * [`ferret`] — Ferret, the interactive silent-OT baseline.

pub mod base_ot;
pub mod ferret;
pub mod fused;
pub mod ggm;
pub mod iknp;
pub mod lpn;
pub mod ot;
pub mod registry;
pub mod silentflow;
mod simd;
pub mod source;

pub use source::{CorrelationSource, CotReceiver, CotSender, Role};

/// Errors of correlation generation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("transport: {0}")]
    Transport(#[from] hush_transport::Error),
    #[error("malformed message in {step}: {why}")]
    Malformed { step: &'static str, why: String },
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("trusted module: {0}")]
    Tee(#[from] hush_tee::Error),
}

pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn malformed(step: &'static str, why: impl Into<String>) -> Error {
    Error::Malformed { step, why: why.into() }
}
