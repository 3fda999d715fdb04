//! # hush-inference — private two-party inference
//!
//! A client with a private input and a server with a private model obtain
//! the prediction — the client learns the logits, the server learns
//! nothing. In `tee` and `dealer` mode the linear layers use
//! **module-dealt masks** (VISION.md "Module-dealt linear layers") and the
//! nonlinear layers the dealt comparison families of `hush-2pc` (`fss` by
//! default, `tami`); in `interactive` and `silent` mode the linear layers
//! are Cheetah's HE protocol ([`he_linear`]) and the nonlinear layers
//! CrypTFlow2's `cf2` on COTs (Ferret, or SilentFlow from the modules) —
//! see [`runtime::Mode`].
//!
//! * [`model`] — the model description and its file format (`.hushm`,
//!   written from ONNX by the `hush-onnx` importer, `hush import`); an untrusted-input
//!   loader; [`model::Builder`] to make models in Rust.
//! * [`fixed`] — fixed-point encoding (defaults ℓ = 37, 12 fraction bits,
//!   and why), truncation and rounding rules.
//! * [`plan`] — a model compiled for a ring: one step per layer.
//! * [`reference`](mod@reference) — the plaintext fixed-point executor: the bit-exact
//!   specification of the secure run.
//! * [`float_ref`] — an f64 executor (for comparison with onnxruntime).
//! * [`linear`] — the module-dealt linear-layer protocol (one one-way
//!   client→server message of the activation's size per linear layer).
//! * [`budget`] — the client's memory budget: estimate, floor, and the
//!   chunk and pre-dealing sizes that fit `--max-mem`.
//! * [`engine`] — layer-by-layer secure execution with per-layer metering;
//!   the [`engine::Nonlinear`] trait and the `fss`/`tami`/`cf2` families.
//! * [`runtime`] — sessions: `serve` (many concurrent, isolated client
//!   sessions over TCP), `infer`, and a local two-party run.
//! * [`crisp_run`], [`crisp_serve`] — `malicious-client` mode (CRISP): a
//!   model on authenticated shares with the final consistency check, and
//!   its served sessions (dealer underneath).
//! * [`tokenize`] — `hush embed --text`: the model's Hugging Face
//!   `tokenizer.json`, read with the `tokenizers` crate.
//! * [`commands`] — the entry points of the `hush` inference commands
//!   (`serve_main`, `infer_main`, `run_main`, `dealer_main`, `demo_main`,
//!   `bench_infer_main`; `hush embed` is [`encoder::embed_main`]) on plain
//!   option structs ([`commands::CommonOptions`], [`commands::ServeOptions`],
//!   ...); their flags (clap) are in `hush-cli`, which converts them; [`zoo`]
//!   — benchmark architectures with random weights.
//!
//! **What is revealed.** The architecture (layer kinds and shapes) is public;
//! the weights stay with the server; the input stays with the client; the
//! client learns the output logits, to which it applies the model's final
//! Softmax/ArgMax in the clear. **Security:** semi-honest parties; `tee`
//! mode trusts each party's module to keep correlation shares (and, for the
//! server's module, the mask B) from its own host — the module's
//! attestation is **simulated — gives no hardware protection**. The
//! server's module holds the server's own weights W to compute W·B − R_C;
//! no online value of the client ever enters a module. `dealer` mode moves
//! the modules to a third host trusted not to collude; `interactive` mode
//! trusts no one (RLWE, LPN); `silent` mode trusts the modules for the
//! comparisons' COTs only (see [`he_linear`] for the HE modes' views).
//! `malicious-client` mode keeps the server semi-honest but lets the client
//! deviate arbitrarily: every value carries a MAC under a key the client
//! never sees and the output is released only after one consistency check
//! (see [`crisp_run`] and [`crisp_serve`]).

pub mod bert;
pub mod budget;
pub mod cnn_plan;
pub mod crisp_ckks;
pub mod crisp_run;
pub mod crisp_serve;
pub mod commands;
pub mod encoder;
pub mod engine;
pub mod fixed;
pub mod graph_he;
pub mod graph_plan;
pub mod graph_run;
pub mod graph_serve;
pub mod float_ref;
pub mod he_linear;
pub mod hello;
pub mod limits;
pub mod linear;
pub mod model;
pub mod npy;
pub mod plan;
pub mod preset;
pub mod provider;
pub mod progress;
pub mod reference;
pub mod runtime;
pub mod tokenize;
pub mod zoo;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_he;
#[cfg(test)]
mod tests_mem;
#[cfg(test)]
mod tests_crisp;
#[cfg(test)]
mod tests_graph;
#[cfg(test)]
mod tests_graph_interactive;
#[cfg(test)]
mod tests_attest;
#[cfg(test)]
mod tests_module_attest;

pub use fixed::FixedConfig;
pub use model::Model;
pub use plan::Plan;

/// Errors of private inference. Every malformed file, hostile message or
/// failed peer maps to one of these.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The model file or architecture is malformed or unsupported (names the node).
    #[error("model: {0}")]
    Model(String),
    /// The input does not fit the model (shape, values).
    #[error("input: {0}")]
    Input(String),
    /// A bad configuration (ring, fraction bits, family, memory budget).
    #[error("configuration: {0}")]
    Config(String),
    /// The peer sent something the protocol does not allow.
    #[error("protocol: {0}")]
    Protocol(String),
    /// The peer reported an error.
    #[error("peer: {0}")]
    Peer(String),
    #[error("transport: {0}")]
    Transport(#[from] hush_transport::Error),
    #[error("trusted module: {0}")]
    Tee(#[from] hush_tee::Error),
    /// An error of the comparison layer (hush-2pc).
    #[error("nonlinear layer: {0}")]
    Nonlinear(String),
    /// A memory budget (`--max-mem`) that cannot be met: below the model's
    /// floor (refused before anything is sent), or exceeded as measured.
    #[error("memory budget: {0}")]
    Memory(String),
    #[error("i/o: {0}")]
    Io(String),
}

pub type Result<T> = std::result::Result<T, Error>;
