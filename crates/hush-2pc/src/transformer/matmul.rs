//! MatMul of two secret operands (attention's Q·Kᵀ and P·V) from dealt
//! matrix Beaver triples ([`crate::deal::matrix`]; SecureML §4.1), then the
//! fixed-point truncation.
//!
//! One opening of E = A − A', F = B − B' (m·k + k·n elements per product,
//! both directions), local Z = C' + E·B' + A'·F (+ E·F at party 0), one
//! truncation opening (m·n elements): 2 rounds.
//!
//! **Range:** every entry of the exact product A·B (scale 2^{2f}) must be
//! below 2^{ℓ−2} in magnitude — |Σ_t a_it·b_tj| < 2^{ℓ−2−2f} in real units
//! (2^{38} at ℓ = 64, f = 12). The caller states a [`Bound`] on the entries
//! of A and B ([`super::range`]); a bound with k·|a|·|b| ≥ 2^{ℓ−2−2f} is
//! refused before anything is sent, a proven bound costs nothing (the clear
//! reference checks it), a saturating bound clips both operands first (one
//! ReLU round): out-of-range entries saturate, never wrap.
//!
//! **View.** E and F are masked by fresh uniform matrices A', B' the party
//! does not know (dealt once, never reused): uniform. The truncation
//! opening is uniform ([`super::ctx`]). The dealer/modules see no online
//! data.

use super::ctx::Ctx;
use super::range::{self, Bound};
use crate::deal::matrix::MatDims;
use crate::share::ArithShare;
use crate::Result;
use hush_transport::Channel;

/// `count` fixed-point products A_q·B_q (A_q m×k, B_q k×n, row-major,
/// concatenated) of operands within `bound`, result at the context's scale.
pub fn matmul(ctx: &mut Ctx, ch: &mut dyn Channel, a: &ArithShare, b: &ArithShare, count: usize, d: MatDims, bound: Bound) -> Result<ArithShare> {
    range::check_product(ctx, d.k, bound, "matmul")?;
    let (a, b) = range::apply(ctx, ch, a, b, bound, "matmul")?;
    let z = ctx.matmul(ch, &a, &b, count, d)?;
    let f = ctx.fx.frac;
    ctx.trunc(ch, &z, f)
}

/// [`matmul`] without the truncation: the exact products at scale 2^{2f}
/// (one flight), for a caller that folds the truncation into a later one
/// (BERT's P·V into the o projection's). The same range check; the caller
/// states why the later values stay below 2^{ℓ−2}.
pub fn matmul_untruncated(ctx: &mut Ctx, ch: &mut dyn Channel, a: &ArithShare, b: &ArithShare, count: usize, d: MatDims, bound: Bound) -> Result<ArithShare> {
    range::check_product(ctx, d.k, bound, "matmul")?;
    let (a, b) = range::apply(ctx, ch, a, b, bound, "matmul")?;
    ctx.matmul(ch, &a, &b, count, d)
}

/// Transposes each of `count` row-major m×n matrices (local, for Kᵀ).
pub fn transpose(x: &ArithShare, count: usize, m: usize, n: usize) -> ArithShare {
    let mut v = vec![0u64; x.len()];
    for q in 0..count {
        for i in 0..m {
            for j in 0..n {
                v[q * m * n + j * m + i] = x.v[q * m * n + i * n + j];
            }
        }
    }
    ArithShare { ring: x.ring, v }
}
