//! # hush-tee — the trusted module of hush's `tee` mode
//!
//! VISION.md "Trust modes": each party's trusted module agrees a
//! synchronized seed with the peer's module once, then releases to its host,
//! batch by batch, exactly that host's share of each correlation — never the
//! peer's share, never the seed. The module only ever handles
//! input-independent values: no request carries online inputs, activations
//! or model weights.
//!
//! **Attestation is simulated — gives no hardware protection.** hush cannot
//! use real SGX/TDX here. The module runs behind an explicit boundary (the
//! [`TrustedModule`] trait) with two backends: [`InProcessModule`] (tests)
//! and [`OutOfProcessModule`] (the `hush-tee-module` binary as a child
//! process over a pipe, so the boundary is real and every crossing and byte
//! is counted). The [`attest`] module's [`attest::SimulatedAttester`] /
//! [`attest::SimulatedVerifier`] stand in for a hardware quote. The real
//! path is a confidential VM: `hush-tee-module --attest snp|tdx` answers a
//! peer's [`Request::Evidence`] with a configfs-tsm report binding its own
//! handshake key and the peer's nonce, and a party with `--module-attest`
//! checks it before seed agreement completes ([`handshake`], "Hardware
//! attestation"). The module `hush` starts by default has no evidence.
//!
//! * [`attest`] — `Attester` / `Verifier` traits and the simulated backend;
//!   the hardware evidence hook ([`attest::EvidenceSource`]).
//! * [`handshake`] — seed agreement: X25519 key exchange bound to a
//!   transcript and to the attestation reports, both modules contribute
//!   randomness, key confirmation (SilentFlow §III-B "Shared Seed
//!   Generation").
//! * [`module`] — the module itself: the [`Request`] kinds and their
//!   dispatch; the stateful kinds (SilentFlow, [`linear_deal`]).
//! * [`deal`] — the module as a provider of the stateless dealing kinds,
//!   which are described once next to their protocols
//!   (`hush_deal::Description`: triples and TAMI tables in `hush-2pc`, FSS
//!   keys in `hush-fss`) and handed to the module ([`Module::with_kinds`]);
//!   this crate depends on no protocol crate. The module binary
//!   (`hush-tee-module`) is built in `hush-2pc`, where all kinds are linked.
//! * [`ggm`] — the GGM length-doubling PRG shared by the module and the hosts.
//! * [`backend`] — in-process and out-of-process backends, crossing counts.
//! * [`wire`] — the length-checked codec for requests and responses
//!   (from `hush-deal`).
//! * [`dealer`] — dealer mode: the same module code as a service on a third
//!   host (`hush dealer`), one module per (session, role), and the parties'
//!   [`DealerModule`] backend over TLS. Trusted not to collude with either
//!   party; real protection on ordinary machines, no hardware needed.

pub mod attest;
pub mod backend;
pub mod deal;
pub mod dealer;
pub mod ggm;
pub mod handshake;
pub mod linear_deal;
pub mod module;
pub use hush_deal::wire;

pub use backend::{InProcessModule, ModuleStats, OutOfProcessModule, TrustedModule};
pub use dealer::DealerModule;
pub use handshake::{establish, establish_checked, ModuleCheck};
pub use module::{Module, ModuleRole, Request, Response};

/// Shown wherever the attestation backend appears (Debug, Display, docs, logs).
pub const SIMULATED_NOTE: &str = "simulated — gives no hardware protection";

/// Errors of the trusted module and its host-side drivers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("transport: {0}")]
    Transport(#[from] hush_transport::Error),
    #[error("attestation failed (simulated — gives no hardware protection): {0}")]
    Attestation(String),
    #[error("seed agreement failed: {0}")]
    KeyExchange(String),
    #[error("module refused the request: {0}")]
    Refused(String),
    #[error("malformed module message: {0}")]
    Malformed(String),
    #[error("{0}")]
    Deal(#[from] hush_deal::Error),
    #[error("module process: {0}")]
    Process(String),
    /// The dealer service (dealer mode) is unreachable or went away.
    #[error("{0} (dealer mode: the dealer service is needed for the whole session)")]
    Dealer(String),
    /// The dealer's hardware attestation failed the party's policy (or the
    /// dealer gave none): the dealer is refused before any correlation.
    #[error("dealer refused before any correlation was used: {0}")]
    DealerAttestation(String),
    /// The peer's module failed this party's `--module-attest` policy (or
    /// gave no evidence): refused before seed agreement completed, so
    /// before any correlation exists.
    #[error("the peer's trusted module was refused before any correlation was used: {0}")]
    ModuleAttestation(String),
}

pub type Result<T> = std::result::Result<T, Error>;
