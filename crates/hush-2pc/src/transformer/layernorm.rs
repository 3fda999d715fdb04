//! LayerNorm along the last axis on secret-shared fixed point:
//! y = (x − μ)/√(σ² + ε)·γ + β, with μ and σ² over each row, and 1/√· by
//! Newton's iteration from a comparison-based initial guess
//! ([`super::recip::rsqrt`]). As in Bumblebee / TAMI-MPC's BERT runs, with
//! hush's own ranges below.
//!
//! **Steps** (rows of H, scale 2^f in and out):
//! 1. clip x to ±2^10 ([`LN_CLIP_LOG2`]): x_c = x − ReLU(x − R) + ReLU(−x − R)
//!    (one batched ReLU round) — the documented input range; larger
//!    magnitudes saturate instead of wrapping the variance. Skipped for
//!    inputs proven within ±2^11 ([`layernorm_within`]: the steps are then
//!    sized for 2^11).
//! 2. μ = ⌊Σx_c·⌊2^{s_μ}/H⌉ / 2^{s_μ}⌋ (one truncation per row, s_μ as
//!    large as the ring allows: relative error of 1/H ≤ H·2^{−s_μ−1}).
//! 3. z = x_c − μ; z² in one opening ([`Ctx::powers`]); Σz² per row,
//!    truncated by f, times ⌊2^{s_v}/H⌉, truncated to scale 2^24: σ².
//! 4. r = rsqrt(σ² + ε) over [2^{−f}, 2^22]: variances below 2^{−f} are
//!    treated as 2^{−f} (rows whose spread is under ~2^{f/2} fixed-point
//!    steps are scaled by at most 2^{f/2} instead of amplifying rounding
//!    noise — near-constant rows give outputs near β, not noise).
//! 5. y = z·r truncated to 2^f; then, if given, ·γ (public, truncated) + β.
//!    The rsqrt's last truncation is fused with the product by z
//!    ([`Ctx::trunc_mul`] on the row's untruncated value broadcast to its
//!    elements: one flight instead of two, the bytes of the Beaver product
//!    it replaces; each element truncates faithfully itself — since
//!    2026-11-25). Interactive mode truncates the rsqrt once per row and
//!    multiplies by one vector OLE per row ([`Ctx::mul_small_rows`]).
//!
//! **Error bound** (f = 12, |x| ≤ 2^10, σ² ≥ 2^{−f}): |y − y_true| ≤
//! |y|·3·10⁻⁴ + (|μ error| + 2^{−f})·r + 2^{−f} where the mean's error is
//! ≤ 2^{−f} and r ≤ 2^{f/2}: ≤ 0.02 absolute for the smallest admissible
//! variance, ≤ 3·10⁻³ for σ ≥ 0.5 ([`LN_ERR_F12`] is the bound tests use
//! for σ ≥ 0.5).
//!
//! **Parameters.** 2·(f + 11) + 3 + log2 H ≤ ℓ (checked; f ≤ 12 at ℓ = 64
//! and H ≤ 2^12), γ/β are public (the operator's owner folds private ones
//! into the next linear layer; secret γ would add one Beaver product).
//!
//! **Rounds** (fss family): clip 1, mean 1, square 1, variance 2,
//! rsqrt 1 + 5, output 2 (the rsqrt's last truncation fused into it) —
//! 13 (+1 with γ; 12 without the clip, inputs proven within ±2^11).
//!
//! **View.** Comparison-family messages (simulatable) and uniform openings
//! only; μ, σ² and the outputs stay shared.

use super::ctx::{concat, split, Ctx};
use super::{poly, recip};
use crate::share::ArithShare;
use crate::{invalid, Result};
use hush_transport::Channel;

/// Inputs are clipped to ±2^10.
pub const LN_CLIP_LOG2: u32 = 10;
/// Inputs proven within ±2^11 skip the clip (see [`layernorm_within`]).
pub const LN_NOCLIP_MAX: f64 = 2048.0;
/// Internal scale of the variance and the rsqrt.
pub const LN_SCALE: u32 = 24;
/// Largest admissible variance (2^22 = (2·2^10)²).
pub const LN_VAR_HI: i32 = 22;
/// Error bound at f = 12 for rows with σ ≥ 0.5.
pub const LN_ERR_F12: f64 = 3e-3;
/// Longest row.
pub const MAX_ROW: usize = 1 << 12;

/// **Why LayerNorm's product z·r is below 2^{⌈log2(2H)/2⌉ + f + 25}** (the
/// interactive row product's ring, since 2026-11-29). Let S = Σ_i z_i² be
/// the row's sum of squares of the **computed** z_i = x_c,i − μ̃ (integers at
/// scale 2^f; μ̃ the truncated mean) — the value the variance is computed
/// from. Trivially z_i² ≤ S, so |z_i|/2^f ≤ √(H·V) with V = S/(H·2^{2f}).
/// The computed variance V_c (scale 2^24) differs from V by the relative
/// error of ⌊2^{s_v}/H⌉ (≤ H·2^{−s_v−1}) and two truncations (≤ 2^{−f}/H
/// and 2^{−24} absolute), so V_c ≥ 0.99·V whenever V ≥ 2^{−11}. The rsqrt
/// returns r ≤ (1 + δ)/√max(V_c + ε, 2^{−f}) with δ < 1.3·10⁻⁵ + 2^{−13}
/// (Newton's relative error and r's truncation to scale 2^24, r ≥ 2^13 ulps).
/// Hence |y_i| = |z_i|·r/2^f ≤ √(H·V)·(1 + δ)/√max(0.99·V, 2^{−f}) ≤
/// √(2H)·(1 + δ) if V ≥ 2^{−11}, and ≤ √(H·2^{−f+1})·2^{f/2}·(1 + δ) =
/// √(2H)·(1 + δ) otherwise. In ring units z_i·r = y_i·2^{f+24} <
/// 2^{⌈log2(2H)/2⌉ + f + 25} with a factor-2 margin, for **every** row
/// (a one-hot row reaches |y| = √(H − 1)). The clear reference checks the
/// bound on every product (`tests/interactive.rs` runs one-hot and
/// near-constant rows through it).
pub const LN_PRODUCT_ARGUMENT: () = ();

/// LayerNorm of each row of `len` elements, with optional public γ and β
/// (length `len`).
pub fn layernorm(ctx: &mut Ctx, ch: &mut dyn Channel, x: &ArithShare, len: usize, eps: f64, gamma: Option<&[f64]>, beta: Option<&[f64]>) -> Result<ArithShare> {
    layernorm_within(ctx, ch, x, len, eps, gamma, beta, f64::INFINITY)
}

/// [`layernorm`] for inputs the caller has proved bounded, |x| ≤ `max_abs`
/// (real units; it may exceed the clip 2^10 — the clip still saturates):
/// the clip's comparisons on ±x − 2^10 run on the fewest bits exact for
/// (max_abs + 2^10)·2^f ([`Ctx::relu_within`]; 25 bits instead of 64 for
/// |x| ≤ 2^12 at f = 12). Same steps and error bound; the clear reference
/// fails on an input above the bound.
///
/// **No clip for |x| ≤ 2^11** ([`LN_NOCLIP_MAX`], since 2026-11-25) when
/// the ring allows 2·(f + 12) + 3 + log2 H ≤ ℓ (f ≤ 12 at ℓ = 64, H ≤
/// 2^10): the clip only exists to bound the ring values below, and a
/// proven bound does that itself — every step is sized for R = 2^11
/// instead of 2^10 (the mean's Σx·⌊2^{s_μ}/H⌉ and the variance's products
/// stay below 2^{ℓ−3} with s_μ, s_v one bit smaller), and the variance of
/// values in [−R, R] is at most R² = 2^22, the rsqrt's range as before.
/// One comparison round fewer (4 TAMI flights) and no clip bytes; the
/// result is the unclipped LayerNorm, equal to the clipped one for
/// |x| ≤ 2^10 and more accurate between 2^10 and 2^11 (BERT's first
/// LayerNorm, proven ≤ 1 640).
#[allow(clippy::too_many_arguments)]
pub fn layernorm_within(ctx: &mut Ctx, ch: &mut dyn Channel, x: &ArithShare, len: usize, eps: f64, gamma: Option<&[f64]>, beta: Option<&[f64]>, max_abs: f64) -> Result<ArithShare> {
    let (ring, f) = (ctx.ring(), ctx.fx.frac);
    let l = ring.bits();
    if len == 0 || len > MAX_ROW || !x.len().is_multiple_of(len) {
        return Err(invalid(format!("layernorm: rows of {len} (1..={MAX_ROW}) over {} elements", x.len())));
    }
    let hb = (len as f64).log2().ceil() as u32;
    if 2 * (f + LN_CLIP_LOG2 + 1) + 3 + hb > l || l < 3 + 2 * (LN_CLIP_LOG2 + 1) + LN_SCALE || f < 2 || !(0.0..1.0).contains(&eps) {
        return Err(invalid(format!("layernorm: f = {f}, rows of {len} in a {l}-bit ring (need 2·(f + 11) + 3 + log2 H ≤ ℓ, eps in [0, 1))")));
    }
    for (name, v) in [("gamma", gamma), ("beta", beta)] {
        if v.is_some_and(|v| v.len() != len) {
            return Err(invalid(format!("layernorm: {name} has {} values for rows of {len}", v.map_or(0, |v| v.len()))));
        }
    }
    let n = x.len();
    if n == 0 {
        return Ok(ArithShare::zeros(ring, 0));
    }
    let rows = n / len;
    // 1. clip
    let cl = 1u64 << (LN_CLIP_LOG2 + f);
    if max_abs.is_nan() || max_abs < 0.0 {
        return Err(invalid(format!("layernorm: input bound {max_abs} must be non-negative")));
    }
    let bound = ((max_abs * (f as f64).exp2()).ceil() + cl as f64).max(0.0);
    ctx.check_bound(x, (max_abs * (f as f64).exp2()).ceil(), "layernorm")?;
    // c: log2 of the magnitude the steps below are sized for
    let unclipped = max_abs <= LN_NOCLIP_MAX && 2 * (f + LN_CLIP_LOG2 + 2) + 3 + hb <= l;
    let (xc, c) = if unclipped {
        (x.clone(), LN_CLIP_LOG2 + 1)
    } else {
        let r = ctx.relu_within(ch, &concat(&[&ctx.add_const(x, ring.neg(cl)), &ctx.add_const(&x.neg(), ring.neg(cl))]), bound)?;
        let r = split(&r, n);
        (x.sub(&r[0]).add(&r[1]), LN_CLIP_LOG2)
    };
    // 2. mean
    let s_mu = l - 3 - (c + f + 1);
    let row_sum = |v: &ArithShare| ArithShare { ring, v: v.v.chunks(len).map(|c| c.iter().fold(0u64, |a, b| ring.add(a, *b))).collect() };
    let c_mu = ((s_mu as f64).exp2() / len as f64).round() as u64;
    let mu = ctx.trunc(ch, &row_sum(&xc).scale(c_mu), s_mu)?;
    let bcast = |v: &ArithShare| ArithShare { ring, v: (0..rows * len).map(|i| v.v[i / len]).collect() };
    let z = xc.sub(&bcast(&mu));
    // 3. variance
    let sq = if ctx.is_interactive() {
        // interactive mode: z² = (z + B)² − 2B·z − B² with B = 2^{c+f+2}
        // public and |z| ≤ 2^{c+f+1} + 1 (|x_c| ≤ 2^{c+f}, |μ| ≤ 2^{c+f} + 1
        // with the mean's truncation): z + B in (0, 2^{c+f+3}) is a small
        // non-negative operand of c + f + 5 bits ([`Ctx::square_small`]:
        // c + f + 6 OTs per element instead of a square's ℓ), exact in the
        // ring
        let b = 1u64 << (c + f + 2);
        let shifted = ctx.add_const(&z, b);
        let s2 = ctx.square_small(ch, &shifted, c + f + 5)?;
        let lin = z.scale(ring.mul(2, b));
        ctx.add_const(&s2.sub(&lin), ring.neg(ring.mul(b, b)))
    } else {
        ctx.powers(ch, &z, 2)?.pop().expect("two powers")
    };
    let q = ctx.trunc(ch, &row_sum(&sq), f)?;
    let s_v = l - 3 - (2 * (c + 1) + f);
    let c_v = ((s_v as f64).exp2() / len as f64).round() as u64;
    let var = ctx.trunc(ch, &q.scale(c_v), s_v + f - LN_SCALE)?;
    // 4. rsqrt
    let v = ctx.add_const(&var, poly::enc(ctx, eps, LN_SCALE));
    let (rp, rk) = recip::rsqrt_untruncated(ctx, ch, &v, LN_SCALE, -(f as i32), LN_VAR_HI)?;
    // 5. output: rsqrt's last truncation fused with the product by z
    // (per element: each element truncates its row's value itself, one
    // flight; the same faithful rounding per element)
    let p = if ctx.is_interactive() {
        // interactive mode: the rsqrt truncated per row (r ∈ [2^−11, 2^6]
        // at scale 2^24 with Newton's small error: non-negative, below
        // 2^31), then z·r with r as the row's small operand of one vector
        // OLE per row ([`Ctx::mul_small_rows`]: 64 OTs per row instead of
        // a Beaver triple's 128 per element); the same values as the
        // truncation then the product
        let r = ctx.trunc(ch, &rp, rk)?;
        // the product is the output before its truncation, y·2^{f+24}, and
        // |y| < 2·√(2H) for every row ([`LN_PRODUCT_ARGUMENT`]), so the
        // row OLEs run in a ring of ⌈log2(2H)/2⌉ + f + 27 bits and extend
        // ([`Ctx::mul_small_rows_within`]; 57 bits from |z|·r alone)
        let yb = ((2.0 * len as f64).log2() / 2.0).ceil() as u32 + f + LN_SCALE + 1;
        ctx.mul_small_rows_within(ch, &r, LN_SCALE + 8, &z, len, Some(yb))?
    } else {
        ctx.trunc_mul(ch, &bcast(&rp), rk, &z)?.1
    };
    let mut y = ctx.trunc(ch, &p, LN_SCALE)?;
    if let Some(g) = gamma {
        let gv: Vec<u64> = (0..n).map(|i| poly::enc(ctx, g[i % len], f)).collect();
        y = ctx.trunc(ch, &y.mul_public(&gv), f)?;
    }
    if let Some(b) = beta {
        let bv: Vec<u64> = (0..n).map(|i| if ctx.party == 0 { poly::enc(ctx, b[i % len], f) } else { 0 }).collect();
        y = y.add(&ArithShare { ring, v: bv });
    }
    Ok(y)
}

/// LayerNorm of each row in f64 (the float reference; γ = 1, β = 0).
pub fn layernorm_f64(x: &[f64], len: usize, eps: f64) -> Vec<f64> {
    x.chunks(len)
        .flat_map(|r| {
            let m = r.iter().sum::<f64>() / len as f64;
            let v = r.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / len as f64;
            let s = (v + eps).sqrt();
            r.iter().map(move |a| (a - m) / s)
        })
        .collect()
}
