//! # hush-2pc — two-party shares and secure comparison
//!
//! The share layer and the nonlinear layer of hush's two-party engine
//! (semi-honest security throughout, except [`crisp`], which is secure
//! against a malicious client).
//!
//! * [`share`] — arithmetic shares over Z_2^ℓ (ℓ ≤ 64), bit-packed XOR
//!   shares, local linear operations, opening, signed fixed point.
//! * [`beaver`] — vectorised Beaver multiplication (arithmetic and AND) and
//!   bit-to-arithmetic conversion, with triples from a [`beaver::TripleSource`]:
//!   `beaver::DealtTriples` (tee mode: each party's module derives its
//!   share from the synchronized seed, no communication) or
//!   `beaver::OtTriples` (interactive: Gilboa OT multiplication for
//!   arithmetic triples, two ROTs per AND triple, on any COT source).
//! * [`tami`] — TAMI-MPC's one-round millionaires' (Li et al.; eqs. 1-7)
//!   and its DReLU/ReLU/truncation in `tee` mode.
//! * [`cf2`] — the CrypTFlow2 millionaires' (Rathee et al., CCS 2020, §3.1:
//!   1-out-of-2^k OT leaves, AND-tree merge, log n rounds) on IKNP, Ferret or
//!   SilentFlow COTs, and its DReLU/ReLU/truncation (§3.2-3.4 style).
//! * [`fss`] — FSS gates (Boyle et al., Eurocrypt 2021) with module-dealt
//!   keys (needs the `hush-fss` crate; see its docs).
//! * [`crisp`] — CRISP (malicious clients): authenticated shares over the
//!   lifted ring Z_2^(ℓ+s), the MAC-carrying ReLU and MaxPool gates, the
//!   final consistency check with the server's abort path (protocol layer
//!   only; see its docs for what is still missing).
//! * [`crisp_ckks`] — CRISP's linear layers InitLin/Lin with CKKS packing
//!   (value and MAC in one ciphertext, `hush_rlwe::ckks_crisp`): the dealer
//!   encrypts an authenticated mask under a key it deals, the server's HE
//!   product runs offline, online a MAC-checked opening ([`crisp::linear`])
//!   — authenticated shares for [`crisp`]'s gates and check.
//! * [`nonlinear`] — one interface over the families: DReLU, ReLU, MaxPool,
//!   faithful truncation.
//! * [`deal`] — the dealing kinds this layer consumes, described once
//!   (triples, TAMI tables; FSS keys are described in `hush_fss::deal`),
//!   and [`deal::kinds`], what every provider (module, module process —
//!   the `hush-tee-module` binary built here — and dealer service) serves.
//! * [`transformer`] — GeLU, Softmax, LayerNorm, secret×secret MatMul and
//!   Mul/Pow on fixed point (tee and dealer modes), with one-round powers.
//!
//! (`hush bench nonlinear` lives in `hush-bench`'s `nonlinear` module: harnesses sit above the protocols.)
//!
//! **Parties.** Party 0 ("A") is the holder of online inputs in TAMI's
//! setting (the client, the y-holder); party 1 ("B") is the holder of
//! input-independent values (the x-holder: masks the modules deal). In `tee`
//! mode party 0's module has [`hush_tee::ModuleRole::Sender`], party 1's
//! [`hush_tee::ModuleRole::Receiver`].
//!
//! **Trust.** `tee` mode relies on each party's trusted module keeping the
//! peer's correlation shares from its host. hush's module is **simulated —
//! gives no hardware protection**; the online phase never gives online data
//! to a module.

pub use hush_deal::retain_freed_memory;
pub mod beaver;
pub mod cf2;
pub mod crisp;
pub mod crisp_ckks;
pub mod deal;
pub mod fss;
pub mod interactive;
pub mod module_process;
pub mod nonlinear;
pub mod share;
pub mod tami;
pub mod tee;
pub mod transformer;
pub(crate) mod wire;

/// Party index (0 = A, the online-input holder; 1 = B, the dealt-input holder).
pub type Party = u8;

/// Errors of the two-party layer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("transport: {0}")]
    Transport(#[from] hush_transport::Error),
    #[error("correlations: {0}")]
    Correlations(#[from] hush_correlations::Error),
    #[error("trusted module: {0}")]
    Tee(#[from] hush_tee::Error),
    #[error("dealt share: {0}")]
    Deal(#[from] hush_deal::Error),
    #[error("malformed message in {step}: {why}")]
    Malformed { step: &'static str, why: String },
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("{0}")]
    Bench(String),
    /// The server's CRISP consistency check failed (the client deviated);
    /// the server released nothing but an abort.
    #[error("consistency check failed: {0}")]
    MacCheckFailed(String),
    /// The client's side of a CRISP run the server aborted.
    #[error("aborted by the server: {0}")]
    Aborted(String),
}

pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn malformed(step: &'static str, why: impl Into<String>) -> Error {
    Error::Malformed { step, why: why.into() }
}

pub(crate) fn invalid(why: impl Into<String>) -> Error {
    Error::Invalid(why.into())
}
