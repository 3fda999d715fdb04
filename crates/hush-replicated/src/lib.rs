//! # hush-replicated — three-party replicated secret sharing (Araki et al.)
//!
//! The protocol of Araki, Furukawa, Lindell, Nof and Ohara, *High-Throughput
//! Semi-Honest Secure Three-Party Computation with an Honest Majority*
//! (ACM CCS 2016), as accelerated in the datacenter paper (*Secret Sharing
//! MPC on FPGAs in the Datacenter*, §II-C, Figs. 1–3): three compute parties
//! in a ring, Boolean replicated shares, XOR free, one bit to the next party
//! per AND gate.
//!
//! **Security model: semi-honest, honest majority.** At most one of the
//! three compute parties is corrupted, and it follows the protocol; it
//! learns nothing about the inputs beyond the outputs it is given. Two
//! colluding parties learn everything; a deviating party can change the
//! result undetected. Links are assumed private and authenticated (run the
//! TCP service inside a trusted network or under TLS).
//!
//! Layout:
//! * [`bristol`] — Bristol Fashion parser with validation, plaintext
//!   evaluator, hex ↔ wire-order mapping, built-in circuits (AES-128, ...).
//! * [`share`] — replicated shares: sharing by a data holder, local XOR /
//!   NOT / constants, reconstruction (Fig. 1, Fig. 2).
//! * [`araki`] — pairwise PRF keys, correlated randomness and the AND
//!   protocol (Fig. 3).
//! * [`engine`] — the bit-sliced, layer-by-layer secure evaluator (one
//!   message per AND layer).
//! * [`local`] — all three parties in one process.
//! * [`service`] — `hush node` / `hush job` over TCP.
//! * [`node`] — one compute party from plain settings ([`node::NodeOptions`]).
//! * [`bench`](mod@bench) — `hush bench aes3` and `hush bench 3pc` from plain
//!   options. The commands' flags (clap) and output glue are in `hush-cli`.

pub mod araki;
pub mod bench;
pub mod bristol;
pub mod engine;
mod error;
pub mod gen;
pub mod grant;
pub mod local;
pub mod node;
pub mod prf;
pub mod service;
pub mod share;
pub mod store;

pub use bristol::Circuit;
pub use engine::{Evaluator, Program};
pub use error::{Error, Result};
