//! Element-wise products of secret values on fixed point: Mul (Beaver, then
//! truncation) and Pow by 2 (one opening of x − r with a dealt (r, r²):
//! half the bytes of x·x by Beaver), and Pow by a small constant through
//! the one-round powers.
//!
//! **Range (Mul):** the caller states a [`Bound`] on |x| and |y|
//! ([`super::range`]): a bound whose worst case |x·y| reaches 2^{ℓ−2−2f} in
//! real units (2^{38} at ℓ = 64, f = 12) is refused before anything is
//! sent; a [`Bound::Proven`] bound is the caller's proof (checked by the
//! clear reference), a [`Bound::Saturate`] bound clips the operands first
//! (one more ReLU round) — out-of-range inputs saturate, never wrap.
//! **Range (Pow):** likewise a [`Bound`] on |x|: refused unless
//! |x|^e·2^{e·f} < 2^{ℓ−2}.
//!
//! **Rounds:** 2 each (product, truncation; +1 with a saturating bound).
//! **View:** uniform openings only (Beaver, powers, truncation) and the
//! comparison family's messages for a saturating bound.

use super::ctx::Ctx;
use super::range::{self, Bound};
use crate::share::ArithShare;
use crate::{invalid, Result};
use hush_transport::Channel;

/// x·y at the context's scale, for operands within `bound` (refused if the
/// bound's worst case does not fit the ring; see [`super::range`]).
pub fn mul(ctx: &mut Ctx, ch: &mut dyn Channel, x: &ArithShare, y: &ArithShare, bound: Bound) -> Result<ArithShare> {
    range::check_product(ctx, 1, bound, "mul")?;
    let (x, y) = range::apply(ctx, ch, x, y, bound, "mul")?;
    let p = ctx.mul(ch, &x, &y)?;
    let f = ctx.fx.frac;
    ctx.trunc(ch, &p, f)
}

/// x^e for e in 1..=8 at the context's scale: one opening for all powers,
/// one truncation by (e − 1)·f. `bound` bounds |x| (its `x`; `y` is not
/// used): refused unless |x|^e at scale 2^{e·f} stays below 2^{ℓ−2}, proved
/// by the caller or enforced by saturation ([`super::range`]).
pub fn pow(ctx: &mut Ctx, ch: &mut dyn Channel, x: &ArithShare, e: u32, bound: Bound) -> Result<ArithShare> {
    let f = ctx.fx.frac;
    if e == 0 || e * f + 3 > ctx.ring().bits() {
        return Err(invalid(format!("pow by {e} at {f} fraction bits does not fit the ring")));
    }
    if e == 1 {
        return Ok(x.clone());
    }
    let (bx, _) = bound.xy();
    let l = ctx.ring().bits();
    let worst = e as f64 * (bx.log2() + f as f64);
    if !(bx.is_finite() && bx >= 0.0) || worst >= (l - 2) as f64 {
        return Err(invalid(format!("pow by {e}: operand bound {bx} reaches 2^{worst:.1} at scale 2^{}, beyond the ring's 2^{} — the power could wrap", e * f, l - 2)));
    }
    let empty = ArithShare::zeros(ctx.ring(), 0);
    let (x, _) = range::apply(ctx, ch, x, &empty, bound, "pow")?;
    let p = ctx.powers(ch, &x, e)?.pop().expect("e powers");
    ctx.trunc(ch, &p, (e - 1) * f)
}
