//! GeLU(x) = x·Φ(x) on secret-shared fixed point: a piecewise polynomial
//! with one comparison per segment boundary, in the style of TAMI-MPC §5.4
//! / Bumblebee (Lu et al., NDSS 2025, §5) / BOLT (Pang et al., S&P 2024,
//! §5.2). The segments and coefficients below are hush's own fit.
//!
//! **Construction.** GeLU(x) = ReLU(x) − g(|x|) with g(t) = t·Φ(−t) ≥ 0
//! (an identity: for x ≥ 0, xΦ(x) = x − xΦ(−x); for x < 0, xΦ(x) = −|x|Φ(−|x|)).
//! With t = min(|x|, 4) and u = t/4 ∈ [0, 1]:
//!
//! | segment of |x| | value of g used |
//! |---|---|
//! | [0, 1.6)   | P₁(u), degree 4 |
//! | [1.6, 4)   | P₂(u), degree 4 |
//! | [4, ∞)     | P₂(1) ≈ g(4) = 1.3·10⁻⁴ |
//!
//! Boundaries and their comparisons: the sign (one ReLU: r = ReLU(x),
//! |x| = 2r − x), the clip at 4 (ReLU(|x| − 4), t = |x| − ReLU(|x| − 4)) and
//! the split at 1.6 (the bit [|x| ≥ 1.6] = ReLU(|x| − 1.6 + 1 ulp) −
//! ReLU(|x| − 1.6), exact in ring units). The two last ReLU sets run in one
//! batch. Then g = P₁ + b·(P₂ − P₁) (one Beaver product of a 0/1 integer on
//! the untruncated polynomials at scale 2^{2s}, exact in the ring, then one
//! truncation of g to 2^f — since 2026-11-25; before, both polynomials
//! were truncated first: 2n truncation openings instead of n) and
//! GeLU = r − g. Since the same day the product and the truncation are one
//! flight: g = ⌊P₁⌋ + ⌊P₂ − P₁⌋·b from one truncation and one
//! truncate-and-multiply opened together ([`Ctx::trunc_and_trunc_mul`]),
//! the same bytes, one more faithful truncation (+2^{−f} below).
//!
//! Coefficients (least squares on 2000 Chebyshev-distributed points of each
//! segment, in u): P₁ on u ∈ [0, 0.4], P₂ on u ∈ [0.4, 1]. Approximation
//! error max |P − g| ≤ 4.4·10⁻⁴ on both segments (checked on a 10⁵-point
//! grid, and by `tests/transformer.rs` end to end).
//!
//! **Error bound** (f fraction bits), against GeLU of the encoded input:
//! |GeLU_secure(x) − GeLU(x)| ≤ 4.4·10⁻⁴ (fit) + 1.3·10⁻⁴ (clip,
//! |x| ≥ 4) + 2·2^{−f} (the last two truncations, faithful) +
//! 2^{−f}·2^{−8}·Σ|c| (power truncations, 10 guard bits) — 1.07·10⁻³ at
//! f = 12; documented
//! with margin as [`GELU_ERR_F12`] = 1.2·10⁻³ (measured max 6.5·10⁻⁴, before the last fusion, on
//! 98 304 uniform inputs in [−6, 6]), for
//! **every** input with |x| < 2^{ℓ−2} ulps (the ReLU range); no input
//! range beyond that, since the polynomial only ever sees u ∈ [0, 1].
//!
//! **Parameters.** Needs 4·(f + 2) ≤ ℓ − 3 (the powers of u at scale
//! 2^{f+2}): f ≤ 12 at ℓ = 64; refused otherwise.
//!
//! **Rounds** (fss family): ReLU 1, ReLU batch 1, powers 1, power
//! truncation 1, selection product and truncation 1 — 5 (6 without the
//! one-round powers). In the `tami` family the two ReLU batches are one
//! chain ([`Ctx::relu_chain`]): with bounded inputs 4 + 3 flights instead
//! of 8 (since 2026-11-25), then the same 3 — 10.
//!
//! **View.** Each party sees only: the comparison family's messages
//! (simulatable, see [`crate::tami`] / [`crate::fss`]), the opening of
//! u − r for a fresh dealt r (uniform), the truncation openings (uniform,
//! [`super::ctx`]) and the Beaver openings (uniform). No value is revealed;
//! the dealer/modules see no online data.

use super::ctx::{concat, split, Ctx};
use super::poly;
use crate::share::ArithShare;
use crate::{invalid, Result};
use hush_transport::Channel;

/// The clip point of |x| (g(4) = 1.27·10⁻⁴).
pub const GELU_CLIP: f64 = 4.0;
/// The boundary between the two polynomial segments.
pub const GELU_SPLIT: f64 = 1.6;
/// P₁ (u = |x|/4 ∈ [0, 0.4]), coefficients from degree 0.
pub const GELU_P1: [f64; 5] = [-0.0004086082403726268, 2.051252669093015, -7.40187058157502, 6.868341571584761, 0.4952877699606005];
/// P₂ (u ∈ [0.4, 1]).
pub const GELU_P2: [f64; 5] = [0.5487209678228886, -1.9487667439310228, 2.468821892270765, -1.2694986636738812, 0.2006333572984791];
/// The documented error bound at f = 12 (see the module docs).
pub const GELU_ERR_F12: f64 = 1.2e-3;

/// GeLU element-wise; input and output at the context's fixed point.
/// Valid for every input (comparisons on the whole ring).
pub fn gelu(ctx: &mut Ctx, ch: &mut dyn Channel, x: &ArithShare) -> Result<ArithShare> {
    gelu_within(ctx, ch, x, f64::INFINITY)
}

/// GeLU for inputs the caller has proved bounded, |x| ≤ `max_abs` (real
/// units): the same construction and error bound, with every comparison on
/// the fewest bits exact inside the bound ([`Ctx::relu_within`]): the sign
/// of x needs |x|·2^f < 2^{w−1}, the clip and split comparisons on |x| − c
/// (c ∈ {4, 1.6}) need (|x| + 4)·2^f + 1 < 2^{w−1}. At f = 12 and
/// |x| ≤ 64 that is w = 19 (18 compared bits instead of 63: four 5-bit
/// chunks, one merge level). An infinite bound is [`gelu`]. The clear
/// reference fails on an input above the bound.
pub fn gelu_within(ctx: &mut Ctx, ch: &mut dyn Channel, x: &ArithShare, max_abs: f64) -> Result<ArithShare> {
    let (ring, f) = (ctx.ring(), ctx.fx.frac);
    let l = ring.bits();
    if 4 * (f + 2) + 3 > l {
        return Err(invalid(format!("gelu: {f} fraction bits need 4·(f + 2) ≤ ℓ − 3 (ℓ = {l})")));
    }
    if max_abs.is_nan() || max_abs < 0.0 {
        return Err(invalid(format!("gelu: input bound {max_abs} must be non-negative")));
    }
    let unit = (f as f64).exp2();
    let n = x.len();
    let clip = poly::enc(ctx, GELU_CLIP, f);
    let at = poly::enc(ctx, GELU_SPLIT, f);
    if ctx.is_interactive() && n > 0 {
        return gelu_interactive(ctx, ch, x, max_abs, clip, at);
    }
    // the two ReLU batches as one chain ([`Ctx::relu_chain`]): the second
    // batch's re-share rides on the first's last flight
    let mut rx = ArithShare::zeros(ring, 0);
    let mut a = ArithShare::zeros(ring, 0);
    let rz = {
        let (rx, a) = (&mut rx, &mut a);
        let party0 = ctx.party == 0;
        let add = move |v: &ArithShare, c: u64| if party0 { ArithShare { ring, v: v.v.iter().map(|q| ring.add(*q, c)).collect() } } else { v.clone() };
        let mut step = |_: usize, r: &ArithShare| -> Result<ArithShare> {
            *rx = r.clone();
            *a = r.scale(2).sub(x); // |x|
            Ok(concat(&[&add(a, ring.neg(clip)), &add(a, ring.sub(1, at)), &add(a, ring.neg(at))]))
        };
        ctx.relu_chain(ch, x, &[n, 3 * n], &[(max_abs * unit).ceil(), ((max_abs + GELU_CLIP) * unit).ceil() + 1.0], &mut step)?
    };
    let rz = split(&rz, n.max(1));
    let (over, p, q) = if n == 0 { (a.clone(), a.clone(), a.clone()) } else { (rz[0].clone(), rz[1].clone(), rz[2].clone()) };
    let b = p.sub(&q); // [|x| ≥ 1.6] as a ring integer
    let t = a.sub(&over); // min(|x|, 4) at scale f, read as u = t/4 at scale f + 2
    let s = f + 2 + 10; // powers and coefficients carry 10 guard bits over u
    // both polynomials at scale 2^{2s} (untruncated), the 0/1 selection
    // exactly in the ring, then one truncation to 2^f
    // powers at scale 2^{2(f+2)}: u and u² need no truncation (scaled up
    // locally), u³ and u⁴ are truncated to it
    let s_p = 2 * (f + 2);
    let ps = poly::eval_raw(ctx, ch, &t, f + 2, &[&GELU_P1, &GELU_P2], s_p, s)?;
    // g = ⌊P₁⌋ + ⌊P₂ − P₁⌋·b: the truncation of P₁ and the truncate-and-
    // multiply of (P₂ − P₁, b) in one exchange ([`Ctx::trunc_and_trunc_mul`];
    // two faithful truncations, ≤ 2 ulps, instead of a product then one
    // truncation: one flight fewer, the same bytes — since 2026-11-25)
    let diff = ps[1].sub(&ps[0]);
    let (g1, sel) = ctx.trunc_and_trunc_mul(ch, &ps[0], &diff, s_p + s - f, &b)?;
    Ok(rx.sub(&g1.add(&sel)))
}

/// [`gelu_within`] in interactive mode (cf2 comparisons, no trusted
/// party): the same segments, polynomials and clip, with the selection
/// done by a multiplexer on a comparison **bit** instead of a 0/1 ring
/// integer from two ReLUs and a product:
/// 1. r = ReLU(x), |x| = 2r − x (one cf2 batch, as in the dealt modes);
/// 2. one cf2 batch of 2n: ReLU(|x| − 4) (the clip, multiplexed now) and
///    the bit b = [|x| − 1.6 ≥ 0] (DReLU, kept XOR-shared with its
///    multiplexer OTs, [`Ctx::relu_and_bit`]) — the dealt path's
///    ReLU(|x| − 1.6 + 1 ulp) − ReLU(|x| − 1.6) is the same bit from two
///    comparisons;
/// 3. the powers of t ∈ [0, 2^{f+2}] by products with a small known-MSB
///    operand ([`Ctx::powers_small`], f + 4 bits: 81 OTs per element
///    instead of a power tuple's 256, three flights per product call
///    instead of one opening), both polynomials untruncated as in the
///    dealt path;
/// 4. g = ⌊(P₁ + b·(P₂ − P₁)) / 2^{s_p+s−f}⌋: b·(P₂ − P₁) by the
///    multiplexer, exact in the ring ([`Ctx::select`]), then **one**
///    faithful truncation (the dealt path truncates P₁ and P₂ − P₁
///    separately: two).
///
/// Offline, per element: three cf2 comparisons instead of four and a
/// multiplexer (2 COTs) instead of a truncate-and-multiply tuple or a
/// Beaver triple (2ℓ COTs and more). Online: one flight more than the
/// dealt path's fused last step (the multiplexer's two flights, then the
/// truncation's). The result is the same function of x up to the
/// truncations' one-bit errors: the **error bound** of the module docs
/// holds with one truncation error fewer (≤ 2^{−f} instead of 2·2^{−f}).
/// **Range:** P₁ + b·(P₂ − P₁) is P₁(u) or P₂(u) for u ∈ [0, 1], below
/// 7·2^{s_p+s} < 2^{ℓ−2} (|P₂| ≤ Σ|c| < 7), inside the truncation's range.
/// **View:** cf2's comparison and multiplexer messages and the
/// truncations' (all simulatable, see [`Ctx::relu_and_bit`],
/// [`crate::interactive::wrap_ole`]).
fn gelu_interactive(ctx: &mut Ctx, ch: &mut dyn Channel, x: &ArithShare, max_abs: f64, clip: u64, at: u64) -> Result<ArithShare> {
    let (ring, f) = (ctx.ring(), ctx.fx.frac);
    let unit = (f as f64).exp2();
    let rx = ctx.relu_within(ch, x, (max_abs * unit).ceil())?;
    let a = rx.scale(2).sub(x); // |x|
    // the clip one ulp below 4 (see below)
    let clip = ring.sub(clip, 1);
    let (over, sel) = ctx.relu_and_bit(ch, &ctx.add_const(&a, ring.neg(clip)), &ctx.add_const(&a, ring.neg(at)), ((max_abs + GELU_CLIP) * unit).ceil() + 1.0)?;
    let t = a.sub(&over);
    let s = f + 2 + 10;
    let s_p = 2 * (f + 2);
    // t = min(|x|, 4 − 2^{−f}) ∈ [0, 2^{f+2} − 1] exactly (a ReLU output
    // subtracted from |x|, both exact): below 2^{f+2}, so f + 3 bits with a
    // known MSB — one bit fewer than a clip at 4 exactly (t = 2^{f+2} needs
    // f + 4), which narrows every power's ring and OT count. The clip one
    // ulp lower changes g only for |x| ≥ 4 − 2^{−f}, by
    // |P₂(1) − P₂(1 − 2^{−f−2})| ≤ max|P₂'|·2^{−f−2} < 2·10⁻⁶ (|P₂'| ≤ 0.02
    // on [0.99, 1]), inside the error bound's margin (1.07·10⁻³ computed,
    // 1.2·10⁻³ documented; since 2026-11-29)
    let ps = gelu_polys_interactive(ctx, ch, &t, s_p, s)?;
    let diff = ps[1].sub(&ps[0]);
    let bd = ctx.select(ch, sel, &diff)?;
    let g = ctx.trunc(ch, &ps[0].add(&bd), s_p + s - f)?;
    Ok(rx.sub(&g))
}

/// P₁(u) and P₂(u) at scale 2^{s_p + s} for u = t/2^{f+2}, t ∈ [0, 2^{f+2}),
/// **interactive mode**, with u⁴ from a truncated u² (since 2026-11-29):
/// t, t², t³ exactly ([`Ctx::powers_small`], narrow rings), then t² and t³
/// truncated to scale 2^{s_p} in one exchange, and u⁴ ≈ t₂² with
/// t₂ = ⌊t²/2^{f+2}⌋ (+1) ∈ [0, 2^{f+2}) a small (f + 3)-bit operand
/// ([`Ctx::square_small`]: f + 3 OTs in a ring of 2f + 5 bits, instead of
/// squaring the exact t² on 2f + 5 OTs in a ring of 4f + 9 bits — 57 at
/// f = 12).
///
/// **Error.** t₂ = t²/2^{f+2} + ε with |ε| < 1, so t₂² differs from
/// t⁴/2^{2(f+2)} by < 2·t₂ + 1 ≤ 2^{f+3} + 1 ulps of 2^{−s_p}: u⁴ is off by
/// less than 2^{−f−1}·(1 + 2^{−f−3}) ≤ 2^{−13}, weighed by |c₄| ≤ 0.4953:
/// ≤ 6.1·10⁻⁵ more than the exact power (whose own truncation by 2^{s_p},
/// ≤ 2^{−s_p}·|c₄|, it replaces). The module's bound, 1.07·10⁻³ computed
/// and [`GELU_ERR_F12`] = 1.2·10⁻³ documented, becomes ≤ 1.14·10⁻³:
/// still inside the documented bound. **Range:** t₂ ≤ (2^{f+2} − 1)²/2^{f+2}
/// + 1 < 2^{f+2} and t₂ ≥ 0 (the truncation is ⌊·⌋ or ⌊·⌋ + 1 of a
/// non-negative value), the square's operand range. **View:** the products',
/// the extensions' and the truncations' (uniform bits and corrections).
fn gelu_polys_interactive(ctx: &mut Ctx, ch: &mut dyn Channel, t: &ArithShare, s_p: u32, s: u32) -> Result<Vec<ArithShare>> {
    let f = ctx.fx.frac;
    let s_in = f + 2;
    if s_p != 2 * s_in {
        return Err(invalid("gelu: the powers' scale must be 2·(f + 2)"));
    }
    let n = t.len();
    let p3 = ctx.powers_small(ch, t, 3, f + 3)?;
    // t² (scale 2s_in) and t³ (3s_in) down by s_in: t₂ (scale s_in, for the
    // square) and u³ at s_p
    let tr = split(&ctx.trunc(ch, &concat(&[&p3[1], &p3[2]]), s_in)?, n);
    let t4 = ctx.square_small(ch, &tr[0], f + 3)?;
    let pw = [t.scale(1u64 << s_in), p3[1].clone(), tr[1].clone(), t4];
    let mut sums = Vec::with_capacity(2);
    for p in [&GELU_P1, &GELU_P2] {
        let mut acc = ctx.constant(n, poly::enc(ctx, p[0], s_p + s));
        for (j, c) in p.iter().enumerate().skip(1) {
            acc = acc.add(&pw[j - 1].scale(poly::enc(ctx, *c, s)));
        }
        sums.push(acc);
    }
    Ok(sums)
}

/// GeLU in f64 (erf from Abramowitz–Stegun 7.1.26, |error| ≤ 1.5·10⁻⁷):
/// the float reference of tests and benchmarks.
pub fn gelu_f64(x: f64) -> f64 {
    0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))
}

/// erf(x), |error| ≤ 1.5·10⁻⁷ (Abramowitz and Stegun 7.1.26).
pub fn erf(x: f64) -> f64 {
    let s = x.signum();
    let x = x.abs();
    let t = 1.0 / (1.0 + 0.3275911 * x);
    let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * (-x * x).exp();
    s * y
}
