//! Reciprocal and reciprocal square root by Newton's iteration from a
//! comparison-based initial guess (the approach of CrypTFlow2/SIRNN-style
//! normalisation, here with hush's own guess: one batched comparison round
//! finds the octave of the input, and the guess is linear in the octave bits).
//!
//! **Initial guess.** For v at scale 2^s, clamped to [2^lo, 2^hi] and with
//! the bits b_j = [v ≥ 2^j] (j = lo+1..=hi; each bit is ReLU(v − 2^j + 1
//! ulp) − ReLU(v − 2^j), exact in ring units), the octave index is
//! k = lo + Σ b_j and any function G of it is
//! G(lo) + Σ_j b_j·(G(j) − G(j − 1)) — linear in the shared bits, so local.
//! The clamp v_c = 2^lo + ReLU(v − 2^lo) − ReLU(v − 2^hi) uses the same
//! batch: one comparison round for 2·(hi − lo) + 2 ReLUs per element.
//! * reciprocal: G(k) = 2^{−(k+½)}, so 1 − v·y₀ ∈ (1 − √2, 1 − 1/√2]:
//!   |e₀| ≤ 0.415, and Newton y ← y·(2 − v·y) squares the error:
//!   e₄ ≤ 0.415^16 < 10⁻⁶.
//! * rsqrt: G(k) = 2^{−(k+½)/2}, so 1 − v·y₀² ∈ (1 − √2, 1 − 1/√2], and
//!   y ← y·(3 − v·y²)/2 maps e to ¾e² + ¼e³: e₃ < 7·10⁻⁵.
//!
//! Four iterations for the reciprocal (Softmax's probabilities need its
//! 10⁻⁶), three for rsqrt (LayerNorm's outputs, |y| ≲ 4, need 3.5·10⁻⁵
//! relative; each iteration is 6 rounds). **Accurate range:** v ∈ [2^lo, 2^hi]; outside it
//! the result is that of the clamped value (1/2^lo or 1/2^hi resp. their
//! square roots) — saturation, documented, never a wrap or a divergence.
//!
//! **Ring sizes** (checked): every product stays below 2^{ℓ−2}, the
//! truncation's range — v·y ≈ 1 and y·(2 − v·y) ≤ 2^{1−lo} (reciprocal:
//! 2s + 2 − lo ≤ ℓ − 3); rsqrt forms v·y² as (v·y)·y — v·y ≈ √v ≤
//! 2^{hi/2} and y·(3 − v·y²) ≤ 3·2^{−lo/2} (⌈hi/2⌉ + 2s + 2 ≤ ℓ − 3 and
//! 2s + 2 − ⌊lo/2⌋ ≤ ℓ − 3), which keeps v·y² at full relative precision
//! for large v (y² at scale 2^s would not); 2^hi at scale 2^s must be
//! representable (hi + s ≤ ℓ − 4).
//!
//! **View.** Only the comparison family's messages and uniform openings
//! (Beaver, powers, truncation); nothing is revealed.

use super::ctx::{concat, split, Ctx};
use crate::share::ArithShare;
use crate::{invalid, Result};
use hush_transport::Channel;

/// Newton iterations of the reciprocal (e₄ < 10⁻⁶).
pub const NEWTON_ITERS: usize = 4;
/// Newton iterations of rsqrt (e₃ < 7·10⁻⁵: relative error of y < 3.5·10⁻⁵).
pub const RSQRT_ITERS: usize = 3;

fn pow2(ctx: &Ctx, e: i32, s: u32) -> Result<u64> {
    let sh = e + s as i32;
    if !(0..ctx.ring().bits() as i32 - 3).contains(&sh) {
        return Err(invalid(format!("2^{e} at scale 2^{s} is not representable")));
    }
    Ok(1u64 << sh)
}

/// Clamp to [2^lo, 2^hi] and the initial guess Σ-linear in the octave bits.
/// `max_ulps` bounds |v| (ring units; infinite: the whole ring): the
/// compared values v − 2^j are then within max_ulps + 2^{hi+s}.
#[allow(clippy::too_many_arguments)]
fn clamp_and_guess(ctx: &mut Ctx, ch: &mut dyn Channel, v: &ArithShare, s: u32, lo: i32, hi: i32, max_ulps: f64, g: impl Fn(i32) -> f64) -> Result<(ArithShare, ArithShare)> {
    if lo >= hi {
        return Err(invalid("empty range"));
    }
    let ring = ctx.ring();
    let n = v.len();
    let mut parts = vec![ctx.add_const(v, ring.neg(pow2(ctx, lo, s)?)), ctx.add_const(v, ring.neg(pow2(ctx, hi, s)?))];
    for j in lo + 1..=hi {
        let t = pow2(ctx, j, s)?;
        parts.push(ctx.add_const(v, ring.sub(1, t)));
        parts.push(ctx.add_const(v, ring.neg(t)));
    }
    let refs: Vec<&ArithShare> = parts.iter().collect();
    let r = ctx.relu_within(ch, &concat(&refs), max_ulps + ((hi + s as i32) as f64).exp2())?;
    let r = if n == 0 { vec![ArithShare::zeros(ring, 0); parts.len()] } else { split(&r, n) };
    let vc = ctx.add_const(&r[0].sub(&r[1]), pow2(ctx, lo, s)?);
    let enc = |c: f64| ring.from_signed((c * (s as f64).exp2()).round() as i64);
    let mut y = ctx.constant(n, enc(g(lo)));
    for (q, j) in (lo + 1..=hi).enumerate() {
        let b = r[2 + 2 * q].sub(&r[3 + 2 * q]);
        y = y.add(&b.scale(ring.sub(enc(g(j)), enc(g(j - 1)))));
    }
    Ok((vc, y))
}

/// 1/v for v at scale 2^s (accurate for v ∈ [2^lo, 2^hi], saturating
/// outside); result at scale 2^s.
pub fn reciprocal(ctx: &mut Ctx, ch: &mut dyn Channel, v: &ArithShare, s: u32, lo: i32, hi: i32) -> Result<ArithShare> {
    reciprocal_within(ctx, ch, v, s, lo, hi, f64::INFINITY)
}

/// [`reciprocal`] for inputs the caller has bounded, |v| ≤ `max_ulps`
/// (ring units): the octave comparisons run on the fewest bits exact inside
/// the bound ([`Ctx::relu_within`]); the clear reference fails above it.
#[allow(clippy::too_many_arguments)]
pub fn reciprocal_within(ctx: &mut Ctx, ch: &mut dyn Channel, v: &ArithShare, s: u32, lo: i32, hi: i32, max_ulps: f64) -> Result<ArithShare> {
    let l = ctx.ring().bits() as i32;
    if 2 * s as i32 + 2 - lo + 3 > l {
        return Err(invalid(format!("reciprocal at scale 2^{s} over [2^{lo}, 2^{hi}] does not fit a {l}-bit ring")));
    }
    let (vc, mut y) = clamp_and_guess(ctx, ch, v, s, lo, hi, max_ulps, |k| (-(k as f64) - 0.5).exp2())?;
    let two = 2u64 << s;
    for _ in 0..NEWTON_ITERS {
        let t = ctx.mul(ch, &vc, &y)?;
        let t = ctx.trunc(ch, &t, s)?;
        let w = ctx.constant(v.len(), two).sub(&t);
        let p = ctx.mul(ch, &y, &w)?;
        y = ctx.trunc(ch, &p, s)?;
    }
    Ok(y)
}

/// 1/√v for v at scale 2^s (accurate for v ∈ [2^lo, 2^hi], saturating
/// outside); result at scale 2^s.
pub fn rsqrt(ctx: &mut Ctx, ch: &mut dyn Channel, v: &ArithShare, s: u32, lo: i32, hi: i32) -> Result<ArithShare> {
    let l = ctx.ring().bits() as i32;
    if hi.div_euclid(2) + 1 + 2 * s as i32 + 1 + 3 > l || 2 * s as i32 + 2 - lo.div_euclid(2) + 3 > l {
        return Err(invalid(format!("rsqrt at scale 2^{s} over [2^{lo}, 2^{hi}] does not fit a {l}-bit ring")));
    }
    let (vc, mut y) = clamp_and_guess(ctx, ch, v, s, lo, hi, f64::INFINITY, |k| (-(k as f64 + 0.5) / 2.0).exp2())?;
    let three = 3u64 << s;
    for _ in 0..RSQRT_ITERS {
        // v·y² as (v·y)·y: y² at scale 2^s would keep only ~2^{2s}/v
        // significant units when v is large; v·y ≈ √v keeps them all.
        let vy = ctx.mul(ch, &vc, &y)?;
        let vy = ctx.trunc(ch, &vy, s)?;
        let t = ctx.mul(ch, &vy, &y)?;
        let t = ctx.trunc(ch, &t, s)?;
        let w = ctx.constant(v.len(), three).sub(&t);
        let p = ctx.mul(ch, &y, &w)?;
        y = ctx.trunc(ch, &p, s + 1)?;
    }
    Ok(y)
}
