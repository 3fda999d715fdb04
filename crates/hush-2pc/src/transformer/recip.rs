//! Reciprocal and reciprocal square root by Newton's iteration from a
//! comparison-based initial guess (the approach of CrypTFlow2/SIRNN-style
//! normalisation, here with hush's own guess: one batched comparison round
//! finds the octave of the input, and the guess is linear in the octave bits).
//!
//! **Initial guess.** For v at scale 2^s, clamped to [2^lo, 2^hi], the
//! range is cut into segments of 1/S octave (S = [`RECIP_SUB`] or
//! [`RSQRT_SUB`] per octave) at the points t_q = lo + q/S, and the bits
//! b_q = [v ≥ 2^{t_q}] (q = 1..=S·(hi − lo); each bit is
//! ReLU(v − ⌊2^{t_q+s}⌉ + 1 ulp) − ReLU(v − ⌊2^{t_q+s}⌉), exact in ring
//! units) give the segment, and any function G of it is
//! G(t_0) + Σ_q b_q·(G(t_q) − G(t_{q−1})) — linear in the shared bits, so
//! local. The clamp v_c = 2^lo + ReLU(v − 2^lo) − ReLU(v − 2^hi) uses the
//! same batch: one comparison round for 2·S·(hi − lo) + 2 ReLUs per element.
//! With c = 2/(2^{1/(2S)} + 2^{−1/(2S)}) and h = 1/(2S):
//! * reciprocal: G(t) = c·2^{−(t+h)}, so 1 − v·y₀ ∈ [1 − c·2^h, 1 − c·2^{−h}]:
//!   |e₀| ≤ tanh(h·ln 2) (0.172 at S = 2), and Newton y ← y·(2 − v·y)
//!   squares the error: e₃ ≤ 0.172^8 < 7.6·10⁻⁷.
//! * rsqrt: G(t) = √c·2^{−(t+h)/2}, so 1 − v·y₀² has the same bound
//!   (0.0865 at S = 4), and y ← y·(3 − v·y²)/2 maps e to ¾e² + ¼e³:
//!   e₁ < 5.8·10⁻³, e₂ < 2.5·10⁻⁵ (relative error of y < 1.3·10⁻⁵).
//!
//! Three iterations for the reciprocal (Softmax's probabilities need its
//! 10⁻⁶), two for rsqrt (LayerNorm's outputs, |y| ≲ 4, need 3.5·10⁻⁵
//! relative). Each truncation is fused with the product that follows it
//! ([`Ctx::trunc_mul`], one flight), and the first product v·y₀ is linear
//! in the guess's ReLU outputs (no flight, see `clamp_and_guess`; since
//! 2026-11-25): 2N flights for the reciprocal (6; 4N + 1 = 13 unfused) and
//! 3N for rsqrt (6; 6N + 1 = 13 unfused), after the guess's comparison
//! round. Until 2026-11-25 the guess had one
//! segment per octave (|e₀| ≤ 0.415) and took 4 and 3 iterations: the finer
//! guess costs more comparisons in the same single round (34 instead of 18
//! ReLUs per reciprocal over [2^−1, 2^7], 274 instead of 70 per rsqrt over
//! [2^−12, 2^22]) — per row of Softmax/LayerNorm, a few percent of their
//! bytes — and saves 4 rounds per Softmax and 6 per LayerNorm.
//! **Accurate range:** v ∈ [2^lo, 2^hi]; outside it
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

/// Newton iterations of the reciprocal (e₃ < 7.6·10⁻⁷ from S = 2).
pub const NEWTON_ITERS: usize = 3;
/// Guess segments per octave of the reciprocal.
pub const RECIP_SUB: u32 = 2;
/// Guess segments per octave of rsqrt.
pub const RSQRT_SUB: u32 = 4;
/// Newton iterations of rsqrt (e₂ < 2.5·10⁻⁵ from S = 4: relative error
/// of y < 1.3·10⁻⁵).
pub const RSQRT_ITERS: usize = 2;

fn pow2(ctx: &Ctx, e: i32, s: u32) -> Result<u64> {
    let sh = e + s as i32;
    if !(0..ctx.ring().bits() as i32 - 3).contains(&sh) {
        return Err(invalid(format!("2^{e} at scale 2^{s} is not representable")));
    }
    Ok(1u64 << sh)
}

/// ⌊2^{t+s}⌉ for a fractional exponent t.
fn pow2f(ctx: &Ctx, t: f64, s: u32) -> Result<u64> {
    let e = t + s as f64;
    if !(0.0..(ctx.ring().bits() as f64 - 3.0)).contains(&e) {
        return Err(invalid(format!("2^{t} at scale 2^{s} is not representable")));
    }
    Ok(e.exp2().round() as u64)
}

/// Clamp to [2^lo, 2^hi] and the initial guess, linear in the segment bits
/// (`sub` segments per octave; `g(t)` is the guess on the segment from 2^t).
/// `max_ulps` bounds |v| (ring units; infinite: the whole ring): the
/// compared values v − 2^t are then within max_ulps + 2^{hi+s}.
///
/// Also returns a = v_c·y₀ **without a product** (since 2026-11-25; it was
/// one Beaver flight): y₀ = G(t_0) + Σ_q Δ_q·b_q is linear in the bits,
/// and each v_c·b_q is linear in the same batch's ReLU outputs:
/// v_c·b_q = ReLU(v − 2^{t_q}) + 2^{t_q}·b_q − ReLU(v − 2^hi) (for v in
/// range v·b_q = (v − 2^{t_q})·b_q + 2^{t_q}·b_q; above 2^hi, where b_q = 1,
/// v_c = v − ReLU(v − 2^hi); below 2^lo every b_q = 0) — exactly the
/// ring value the product gave.
#[allow(clippy::too_many_arguments)]
fn clamp_and_guess(ctx: &mut Ctx, ch: &mut dyn Channel, v: &ArithShare, s: u32, lo: i32, hi: i32, max_ulps: f64, sub: u32, g: impl Fn(f64) -> f64) -> Result<(ArithShare, ArithShare, ArithShare)> {
    if lo >= hi || sub == 0 || sub > 64 {
        return Err(invalid("empty range"));
    }
    let ring = ctx.ring();
    let n = v.len();
    let segs = (hi - lo) as u32 * sub;
    let t = |q: u32| lo as f64 + q as f64 / sub as f64;
    let mut parts = vec![ctx.add_const(v, ring.neg(pow2(ctx, lo, s)?)), ctx.add_const(v, ring.neg(pow2(ctx, hi, s)?))];
    for q in 1..=segs {
        let th = pow2f(ctx, t(q), s)?;
        parts.push(ctx.add_const(v, ring.sub(1, th)));
        parts.push(ctx.add_const(v, ring.neg(th)));
    }
    let refs: Vec<&ArithShare> = parts.iter().collect();
    let r = ctx.relu_within(ch, &concat(&refs), max_ulps + ((hi + s as i32) as f64).exp2())?;
    let r = if n == 0 { vec![ArithShare::zeros(ring, 0); parts.len()] } else { split(&r, n) };
    let vc = ctx.add_const(&r[0].sub(&r[1]), pow2(ctx, lo, s)?);
    let enc = |c: f64| ring.from_signed((c * (s as f64).exp2()).round() as i64);
    let mut y = ctx.constant(n, enc(g(t(0))));
    let mut a = vc.scale(enc(g(t(0))));
    for q in 1..=segs {
        let i = 2 * (q as usize - 1);
        let b = r[2 + i].sub(&r[3 + i]);
        let delta = ring.sub(enc(g(t(q))), enc(g(t(q - 1))));
        y = y.add(&b.scale(delta));
        // v_c·b_q = ReLU(v − 2^{t_q}) + 2^{t_q}·b_q − ReLU(v − 2^hi)
        let vb = r[3 + i].add(&b.scale(pow2f(ctx, t(q), s)?)).sub(&r[1]);
        a = a.add(&vb.scale(delta));
    }
    Ok((vc, y, a))
}

/// The guess constant c = 2/(2^h + 2^−h), h = 1/(2·sub): minimises the
/// largest |1 − v·y₀| over a segment.
fn guess_c(sub: u32) -> f64 {
    let h = 0.5 / sub as f64;
    2.0 / (h.exp2() + (-h).exp2())
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
    let (p, sh) = reciprocal_untruncated(ctx, ch, v, s, lo, hi, max_ulps)?;
    ctx.trunc(ch, &p, sh)
}

/// [`reciprocal_within`] without its last truncation: (p, k) with the
/// reciprocal = ⌊p/2^k⌋ (k = s, |p| < 2^{ℓ−3} by the ring checks), for a
/// caller that fuses that truncation with the product it feeds
/// ([`Ctx::trunc_mul`]: one flight fewer). One flight fewer here.
#[allow(clippy::too_many_arguments)]
pub fn reciprocal_untruncated(ctx: &mut Ctx, ch: &mut dyn Channel, v: &ArithShare, s: u32, lo: i32, hi: i32, max_ulps: f64) -> Result<(ArithShare, u32)> {
    let l = ctx.ring().bits() as i32;
    if 2 * s as i32 + 2 - lo + 3 > l {
        return Err(invalid(format!("reciprocal at scale 2^{s} over [2^{lo}, 2^{hi}] does not fit a {l}-bit ring")));
    }
    let (c, h) = (guess_c(RECIP_SUB), 0.5 / RECIP_SUB as f64);
    let (vc, mut y, mut a) = clamp_and_guess(ctx, ch, v, s, lo, hi, max_ulps, RECIP_SUB, |t| c * (-(t + h)).exp2())?;
    // y ← ⌊y·(2 − ⌊v·y⌋)⌋ with every truncation fused with the product
    // after it ([`Ctx::trunc_mul`]): v·y (linear, from the guess), then per iteration
    // (⌊v·y⌋, ⌊v·y⌋·y) in one flight, p = 2y − ⌊v·y⌋·y (local), and
    // (y', v·y') = (⌊p⌋, ⌊p⌋·v) in one flight — the same values as a
    // truncation then a product, 2N flights instead of 4N + 1.
    let two = 2u64 << s;
    for it in 0..NEWTON_ITERS {
        let (_, ty) = ctx.trunc_mul(ch, &a, s, &y)?;
        let p = y.scale(two).sub(&ty);
        if it + 1 == NEWTON_ITERS {
            return Ok((p, s));
        }
        (y, a) = ctx.trunc_mul(ch, &p, s, &vc)?;
    }
    unreachable!("NEWTON_ITERS ≥ 1")
}

/// 1/√v for v at scale 2^s (accurate for v ∈ [2^lo, 2^hi], saturating
/// outside); result at scale 2^s.
pub fn rsqrt(ctx: &mut Ctx, ch: &mut dyn Channel, v: &ArithShare, s: u32, lo: i32, hi: i32) -> Result<ArithShare> {
    let (p, sh) = rsqrt_untruncated(ctx, ch, v, s, lo, hi)?;
    ctx.trunc(ch, &p, sh)
}

/// [`rsqrt`] without its last truncation: (p, k) with 1/√v = ⌊p/2^k⌋
/// (k = s + 1, |p| < 2^{ℓ−3} by the ring checks), for a caller that fuses
/// that truncation with the product it feeds ([`Ctx::trunc_mul`]).
pub fn rsqrt_untruncated(ctx: &mut Ctx, ch: &mut dyn Channel, v: &ArithShare, s: u32, lo: i32, hi: i32) -> Result<(ArithShare, u32)> {
    let l = ctx.ring().bits() as i32;
    if hi.div_euclid(2) + 1 + 2 * s as i32 + 1 + 3 > l || 2 * s as i32 + 2 - lo.div_euclid(2) + 3 > l {
        return Err(invalid(format!("rsqrt at scale 2^{s} over [2^{lo}, 2^{hi}] does not fit a {l}-bit ring")));
    }
    let (c, h) = (guess_c(RSQRT_SUB), 0.5 / RSQRT_SUB as f64);
    let (vc, mut y, mut a) = clamp_and_guess(ctx, ch, v, s, lo, hi, f64::INFINITY, RSQRT_SUB, |t| c.sqrt() * (-(t + h) / 2.0).exp2())?;
    // v·y² as (v·y)·y: y² at scale 2^s would keep only ~2^{2s}/v
    // significant units when v is large; v·y ≈ √v keeps them all. Every
    // truncation is fused with the product after it ([`Ctx::trunc_mul`]):
    // 3N flights instead of 6N + 1 (v·y is linear, from the guess), the
    // same values.
    let three = 3u64 << s;
    for it in 0..RSQRT_ITERS {
        let (_, vyy) = ctx.trunc_mul(ch, &a, s, &y)?; // ⌊v·y⌋·y
        let (_, ty) = ctx.trunc_mul(ch, &vyy, s, &y)?; // ⌊v·y·y⌋·y
        let p = y.scale(three).sub(&ty);
        if it + 1 == RSQRT_ITERS {
            return Ok((p, s + 1));
        }
        (y, a) = ctx.trunc_mul(ch, &p, s + 1, &vc)?;
    }
    unreachable!("RSQRT_ITERS ≥ 1")
}
