//! Element-wise products of secret values on fixed point: Mul (Beaver, then
//! truncation) and Pow by 2 (one opening of x − r with a dealt (r, r²):
//! half the bytes of x·x by Beaver), and Pow by a small constant through
//! the one-round powers.
//!
//! **Range:** |x·y| < 2^{ℓ−2−2f} in real units (2^{38} at ℓ = 64, f = 12),
//! the truncation's bound; larger products are outside the operators'
//! documented range (the caller clips).
//!
//! **Rounds:** 2 each (product, truncation). **View:** uniform openings
//! only (Beaver, powers, truncation).

use super::ctx::Ctx;
use crate::share::ArithShare;
use crate::{invalid, Result};
use hush_transport::Channel;

/// x·y at the context's scale.
pub fn mul(ctx: &mut Ctx, ch: &mut dyn Channel, x: &ArithShare, y: &ArithShare) -> Result<ArithShare> {
    let p = ctx.mul(ch, x, y)?;
    let f = ctx.fx.frac;
    ctx.trunc(ch, &p, f)
}

/// x^e for e in 1..=8 at the context's scale: one opening for all powers,
/// one truncation by (e − 1)·f (needs e·f + bits of |x|^e ≤ ℓ − 3).
pub fn pow(ctx: &mut Ctx, ch: &mut dyn Channel, x: &ArithShare, e: u32) -> Result<ArithShare> {
    let f = ctx.fx.frac;
    if e == 0 || e * f + 3 > ctx.ring().bits() {
        return Err(invalid(format!("pow by {e} at {f} fraction bits does not fit the ring")));
    }
    if e == 1 {
        return Ok(x.clone());
    }
    let p = ctx.powers(ch, x, e)?.pop().expect("e powers");
    ctx.trunc(ch, &p, (e - 1) * f)
}
