//! # Transformer operators on secret-shared fixed point
//!
//! GeLU, Softmax, LayerNorm, secret×secret MatMul, Mul and Pow — the
//! nonlinear half of TAMI-MPC (Li et al., §5.4–5.5: BERT-base), in `tee`
//! and `dealer` modes. Every operator is written once against [`Ctx`]'s
//! primitives (ReLU in the session's comparison family, truncation,
//! Beaver and matrix-Beaver products, one-round powers), whose correlations
//! come through the provider abstraction (`hush_deal::Description` served
//! by a trusted module or the dealer service), or from the interactive
//! provider ([`crate::interactive`], [`Ctx::new_interactive`]: no trusted
//! party, correlations over COTs, `cf2` comparisons). Operators never know
//! which provider answers; the `silent` preset is not wired for them yet
//! ([`ctx::NOT_INTERACTIVE`]).
//!
//! | operator | file | rounds (fss) |
//! |---|---|---|
//! | MatMul of two secrets | [`matmul`] | 2 (3 saturating) |
//! | Mul, Pow | [`elementwise`] | 2 (Mul saturating: 3) |
//! | GeLU | [`gelu`] | 5 |
//! | exp (x ≤ 0), Softmax | [`softmax`] | 25 at L = 128 |
//! | LayerNorm | [`layernorm`] | 13 |
//! | reciprocal, rsqrt | [`recip`] | 7 / 7 (6 / 6 untruncated) |
//! | polynomials (one-round powers) | [`poly`] | 3 |
//! | product of 2–4 secrets, one opening ([`Ctx::product`]) | [`ctx`] | 1 (Beaver: ⌈log2 d⌉) |
//!
//! Each operator's doc comment states its construction, error bound,
//! accurate input range (and what happens outside it: saturation or a
//! refusal, never a wrap), round count and each party's view. Products of
//! two secrets take an operand [`Bound`] ([`range`]): refused if its worst
//! case does not fit the ring, proved by the caller or enforced by
//! saturation.
//!
//! **Offline/online.** [`Ctx::plan`] runs an operator without computing to
//! list the correlations it consumes; [`Ctx::prefill`] deals them (the
//! offline phase: module crossings or dealer requests, no communication
//! with the peer); the operator then runs on them. Without a plan the
//! context deals on demand.
//!
//! **Trust.** Semi-honest parties; in `tee` mode the (simulated — gives no
//! hardware protection) modules, in `dealer` mode a non-colluding dealer,
//! in interactive mode cryptography only (OT extension).
//! What the dealer or module sees: only the public parameters of each
//! request (kind, sizes, ring width) — never online data.

pub mod ctx;
pub mod elementwise;
pub mod gelu;
pub mod layernorm;
pub mod matmul;
pub mod poly;
pub mod range;
pub mod recip;
pub mod softmax;
pub mod tanh;

pub use ctx::{Ctx, Need};
pub use range::Bound;
