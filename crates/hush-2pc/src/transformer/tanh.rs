//! tanh on secret-shared fixed point (the pooler of BERT-style
//! classifiers), composed from the context's operators:
//!
//! tanh(x) = sign(x) · (1 − e)/(1 + e), e = exp(−2|x|).
//!
//! One ReLU batch on [x, x + 1 ulp] gives ReLU(x) and the sign bit
//! s = ReLU(x + 1) − ReLU(x) ∈ {0, 1} (x is an integer in ulps), and with
//! them |x| = 2·ReLU(x) − x; e from [`super::softmax::exp_nonpos`] (inputs
//! below −16 give exp(−16), tanh's tail is then 1 − 2.3·10⁻⁷ from 1); 1/(1 + e)
//! for 1 + e ∈ [1, 2] by [`super::recip::reciprocal`] on [2^0, 2^2]; the
//! product (1 − e)·(1/(1 + e)) truncated once; then (2s − 1)·t with s an
//! integer share (one Beaver product, no truncation).
//!
//! **Error** at f = 12: the exp's and the reciprocal's documented bounds
//! and two truncations, ≤ [`TANH_ERR_F12`] (checked by the tests against
//! f64 on random and edge inputs). **Range:** every ℓ-bit input (the ReLU
//! is on the whole ring). **View:** each party sees only openings of
//! values masked by dealt randomness (the ReLU, exp, reciprocal and Beaver
//! steps' own arguments); nothing is revealed.

use super::ctx::{concat, split};
use super::{elementwise, recip, softmax, Bound, Ctx};
use crate::share::ArithShare;
use crate::Result;
use hush_transport::Channel;

/// The documented error bound at f = 12 (real units).
pub const TANH_ERR_F12: f64 = 2e-3;

/// tanh element-wise; input and output at the context's fixed point.
pub fn tanh(ctx: &mut Ctx, ch: &mut dyn Channel, x: &ArithShare) -> Result<ArithShare> {
    let (ring, f) = (ctx.ring(), ctx.fx.frac);
    let n = x.len();
    if n == 0 {
        return Ok(ArithShare::zeros(ring, 0));
    }
    let r = ctx.relu(ch, &concat(&[x, &ctx.add_const(x, 1)]))?;
    let r = split(&r, n);
    let s = r[1].sub(&r[0]);
    let a = r[0].scale(2).sub(x);
    let e = softmax::exp_nonpos(ctx, ch, &a.scale(2).neg())?;
    let one = 1u64 << f;
    let den = ctx.add_const(&e, one);
    let inv = recip::reciprocal(ctx, ch, &den, f, 0, 2)?;
    let num = ctx.constant(n, one).sub(&e);
    let t = elementwise::mul(ctx, ch, &num, &inv, Bound::Proven { x: 1.0, y: 1.0 })?;
    let st = ctx.mul(ch, &s, &t)?;
    Ok(st.scale(2).sub(&t))
}
