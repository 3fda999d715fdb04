//! Polynomials on secret-shared fixed point, with every power from one
//! opening ([`Ctx::powers`], TAMI-MPC §3.2's one-round product): the
//! building block of GeLU and exp.
//!
//! For u at scale 2^{s_in} with |u| ≤ 1 and polynomials p_1, …, p_m of
//! degree ≤ K sharing u:
//! 1. u, u², …, u^K exactly in the ring (one opening; scale 2^{j·s_in});
//! 2. each u^j with j·s_in ≤ s_p scaled up to 2^{s_p} locally (exact);
//!    the others brought to the common scale 2^{K·s_in} (a public shift)
//!    and truncated in **one** batched call to scale 2^{s_p};
//! 3. p_i(u) = Σ_j round(c_{ij}·2^{s_c})·u^j (+ c_{i0} at scale 2^{s_p+s_c}),
//!    local, then one batched truncation to 2^{s_out}.
//!
//! Rounds: 3 (one with `one_round = false` replaced by ⌈log2 K⌉ Beaver
//! rounds). Error: coefficient rounding ≤ Σ_j 2^{−s_c−1}, power truncation
//! ≤ Σ_j |c_j|·2^{−s_p}, final truncation ≤ 2^{−s_out} — callers choose
//! s_p, s_c ≥ s_out + 8 so the last term dominates.
//!
//! **Ranges (checked here, refused with `Error::Invalid` otherwise).**
//! K·s_in ≤ ℓ − 3 (the powers stay below 2^{ℓ−3} for |u| ≤ 1, inside the
//! truncation's |x| < 2^{ℓ−2}), and ⌈log2(1 + Σ|c_j|)⌉ + s_p + s_c ≤ ℓ − 3.
//! The caller guarantees |u| ≤ 1 (each caller clips u by comparisons).

use super::ctx::{concat, split, Ctx};
use crate::share::ArithShare;
use crate::{invalid, Result};
use hush_transport::Channel;

/// Encodes c·2^s as a ring element (round to nearest).
pub fn enc(ctx: &Ctx, c: f64, s: u32) -> u64 {
    ctx.ring().from_signed((c * (s as f64).exp2()).round() as i64)
}

/// Evaluates each polynomial of `polys` (coefficients from degree 0) at u
/// (scale 2^{s_in}, |u| ≤ 1): results at scale 2^{s_out}.
#[allow(clippy::too_many_arguments)]
pub fn eval(ctx: &mut Ctx, ch: &mut dyn Channel, u: &ArithShare, s_in: u32, polys: &[&[f64]], s_p: u32, s_c: u32, s_out: u32) -> Result<Vec<ArithShare>> {
    let l = ctx.ring().bits();
    let k = polys.iter().map(|p| p.len().saturating_sub(1)).max().unwrap_or(0) as u32;
    if k == 0 {
        return Err(invalid("polynomial of degree 0"));
    }
    if k * s_in + 3 > l || s_p > k * s_in {
        return Err(invalid(format!("degree-{k} powers at scale 2^{s_in} do not fit a {l}-bit ring (need K·s_in ≤ ℓ − 3)")));
    }
    for p in polys {
        let mag: f64 = 1.0 + p.iter().map(|c| c.abs()).sum::<f64>();
        if mag.log2().ceil() as u32 + s_p + s_c + 3 > l || s_p + s_c <= s_out {
            return Err(invalid(format!("polynomial sum at scale 2^{} does not fit a {l}-bit ring", s_p + s_c)));
        }
    }
    let n = u.len();
    if n == 0 {
        return Ok(polys.iter().map(|_| ArithShare::zeros(ctx.ring(), 0)).collect());
    }
    let pw = at_scale(ctx, ch, u, s_in, k, s_p, None)?;
    let mut sums = Vec::with_capacity(polys.len());
    for p in polys {
        let mut acc = ctx.constant(n, enc(ctx, p[0], s_p + s_c));
        for (j, c) in p.iter().enumerate().skip(1) {
            acc = acc.add(&pw[j - 1].scale(enc(ctx, *c, s_c)));
        }
        sums.push(acc);
    }
    let refs: Vec<&ArithShare> = sums.iter().collect();
    let out = ctx.trunc(ch, &concat(&refs), s_p + s_c - s_out)?;
    Ok(split(&out, n).into_iter().take(polys.len()).collect())
}

/// [`eval`] without the last truncation: each p_i(u) at scale 2^{s_p + s_c}
/// (|p_i| ≤ 1 + Σ|c| there, below 2^{ℓ−3} by the same checks), for callers
/// that combine the polynomials exactly in the ring (a 0/1 selection
/// product) and truncate once — one truncation of n values instead of one
/// per polynomial. Rounds: 2.
#[allow(clippy::too_many_arguments)]
pub fn eval_raw(ctx: &mut Ctx, ch: &mut dyn Channel, u: &ArithShare, s_in: u32, polys: &[&[f64]], s_p: u32, s_c: u32) -> Result<Vec<ArithShare>> {
    eval_raw_small(ctx, ch, u, s_in, polys, s_p, s_c, None)
}

/// [`eval_raw`] for u **proven to lie in [0, 2^{ubits−1})** ring units
/// (`Some(ubits)`): the powers by [`Ctx::powers_small`] (interactive mode:
/// products with a small operand instead of a power tuple; dealt modes
/// unchanged). `None` is [`eval_raw`].
#[allow(clippy::too_many_arguments)]
pub fn eval_raw_small(ctx: &mut Ctx, ch: &mut dyn Channel, u: &ArithShare, s_in: u32, polys: &[&[f64]], s_p: u32, s_c: u32, ubits: Option<u32>) -> Result<Vec<ArithShare>> {
    let l = ctx.ring().bits();
    let k = polys.iter().map(|p| p.len().saturating_sub(1)).max().unwrap_or(0) as u32;
    if k == 0 {
        return Err(invalid("polynomial of degree 0"));
    }
    if k * s_in + 3 > l || s_p > k * s_in {
        return Err(invalid(format!("degree-{k} powers at scale 2^{s_in} do not fit a {l}-bit ring (need K·s_in ≤ ℓ − 3)")));
    }
    for p in polys {
        let mag: f64 = 1.0 + p.iter().map(|c| c.abs()).sum::<f64>();
        if mag.log2().ceil() as u32 + s_p + s_c + 3 > l {
            return Err(invalid(format!("polynomial sum at scale 2^{} does not fit a {l}-bit ring", s_p + s_c)));
        }
    }
    let n = u.len();
    if n == 0 {
        return Ok(polys.iter().map(|_| ArithShare::zeros(ctx.ring(), 0)).collect());
    }
    let pw = at_scale(ctx, ch, u, s_in, k, s_p, ubits)?;
    let mut sums = Vec::with_capacity(polys.len());
    for p in polys {
        let mut acc = ctx.constant(n, enc(ctx, p[0], s_p + s_c));
        for (j, c) in p.iter().enumerate().skip(1) {
            acc = acc.add(&pw[j - 1].scale(enc(ctx, *c, s_c)));
        }
        sums.push(acc);
    }
    Ok(sums)
}

/// u, …, u^k (u at scale 2^{s_in}) all at scale 2^{s_p}: the powers whose
/// own scale j·s_in is at most s_p are scaled up locally (exact, no
/// opening); the others are brought to the common scale k·s_in and
/// truncated in one batch (one opening of those only).
fn at_scale(ctx: &mut Ctx, ch: &mut dyn Channel, u: &ArithShare, s_in: u32, k: u32, s_p: u32, ubits: Option<u32>) -> Result<Vec<ArithShare>> {
    let n = u.len();
    let pw = match ubits {
        Some(b) => ctx.powers_small(ch, u, k, b)?,
        None => ctx.powers(ch, u, k)?,
    };
    let common = k * s_in;
    let low = (s_p / s_in).min(k) as usize; // powers j ≤ low: j·s_in ≤ s_p
    let mut out: Vec<ArithShare> = pw[..low].iter().enumerate().map(|(j, p)| p.scale(1u64 << (s_p - (j as u32 + 1) * s_in))).collect();
    if low < k as usize {
        let scaled: Vec<ArithShare> = pw[low..].iter().enumerate().map(|(q, p)| p.scale(1u64 << (common - (low + q + 1) as u32 * s_in))).collect();
        let refs: Vec<&ArithShare> = scaled.iter().collect();
        out.extend(split(&ctx.trunc(ch, &concat(&refs), common - s_p)?, n));
    }
    Ok(out)
}
