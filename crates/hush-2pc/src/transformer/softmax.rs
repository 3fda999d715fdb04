//! Softmax along the last axis, and exp of non-positive inputs, on
//! secret-shared fixed point (the Bumblebee/TAMI-MPC §5.4 recipe: max by a
//! comparison tree, exp of x − max ≤ 0 by a range-reduced approximation,
//! one reciprocal per row).
//!
//! **Steps** (rows of length L, input and output at the context's scale
//! 2^f; internally 2^24 — [`EXP_SCALE`]):
//! 1. m = max of each row by a comparison tree: max(a, b) = b + ReLU(a − b),
//!    ⌈log2 L⌉ ReLU rounds, all rows of a level in one batch (ties give
//!    ReLU(0) = 0: either operand, the same value).
//! 2. d = x − m ≤ 0, clipped below at −T = −16: d_c = −T + ReLU(d + T)
//!    (one ReLU round). exp(−16) = 1.1·10⁻⁷, below 2^{−f} for f ≤ 22.
//!    The tree's levels and the clip run as one chain of ReLUs
//!    ([`Ctx::relu_chain`], since 2026-11-25): with the `tami` family and
//!    single-level batches (bounded inputs, [`softmax_within`]) each
//!    comparison's re-share rides on the previous one's last flight — at
//!    L = 128, 8 ReLUs in 25 flights instead of 32.
//! 3. exp(d_c) = exp(d_c/2^N)^{2^N}, N = 6 (range reduction by the argument:
//!    v = d_c/64 ∈ [−¼, 0] is d_c's own integer read at scale 2^{f+6},
//!    no operation); exp(v) by a degree-3 polynomial (least squares on
//!    [−¼, 0], max error 1.14·10⁻⁶, coefficients in [`EXP_POLY`]) with
//!    one-round powers ([`super::poly`]), then N squarings: the first a
//!    one-round square, each further one fused with the truncation before
//!    it ([`Ctx::trunc_square`], one opening), and a last truncation —
//!    N + 1 openings instead of 2N (since 2026-11-25).
//!    **Interactive mode** (since 2026-11-29) computes exp(d) instead by
//!    one OT table lookup and one 24-bit product ([`exp_lut`]: exact
//!    split of the shares' bits, no polynomial and no squarings; error
//!    ≤ 7.6·10⁻⁷), and skips the clip when the proven bound gives
//!    x − max ∈ [−16, 0] already (|x| ≤ 8).
//! 4. s = Σ_row exp (local), 1/s by [`super::recip::reciprocal`] over
//!    [2^−1, 2^⌈log2 L⌉] (s ≥ exp(0) ≈ 1 and s ≤ L by construction), then
//!    out = exp·(1/s) truncated to 2^f. The reciprocal's last truncation
//!    is fused with the product by exp ([`Ctx::trunc_mul`] on the row's
//!    untruncated value broadcast to its elements, one flight instead of
//!    two, the same bytes as the Beaver product it replaces; each element
//!    truncates it faithfully itself — since 2026-11-25).
//!
//! **Error bound:** exp relative error ≤ 2^6·(1.2·10⁻⁶ + 2^{−24}·4) ≈
//! 1.0·10⁻⁴ (the squarings double the relative error each), the
//! reciprocal's relative error < 2·10⁻⁶, the last truncation 2^{−f}: each
//! probability within 2·10⁻⁴·p + 2^{−f+1} of the true softmax, plus the
//! clip (entries with x − max < −16 count as exp(−16)): at f = 12, at most
//! 6·10⁻⁴ absolute per entry ([`SOFTMAX_ERR_F12`]).
//!
//! **Accurate input range:** every x with |x| < 2^{ℓ−3} ulps (so that
//! differences x − m do not wrap; the same range as MaxPool), any row
//! length 1 ≤ L ≤ 2^{12}. Large negative inputs saturate at exp(−16);
//! there is no other input range restriction. Parameters: 3·(f + 6) ≤ ℓ − 3
//! (f ≤ 13 at ℓ = 64), refused otherwise.
//!
//! **Rounds** (fss family, L = 128): max tree 7, clip 1, exp polynomial 2
//! (powers, truncation of u³), squarings 7 (the first fused with the
//! polynomial's truncation), reciprocal 1 + 5, product 2 (the
//! reciprocal's last truncation fused into it) — 25. In the `tami`
//! family each ReLU round is 4 flights (re-share, leaf, merge opening, e;
//! 5 with two merge levels), the chained tree and clip 3·8 + 1.
//!
//! **View.** Comparison-family messages (simulatable) and uniform openings
//! (Beaver, powers, truncations) only; the max, the sums and the outputs
//! stay shared. The dealer/modules see no online data.

use super::ctx::{concat, split, Ctx};
use super::{poly, recip};
use crate::interactive;
use crate::share::ArithShare;
use crate::{invalid, Result};
use hush_primitives::Ring;
use hush_transport::Channel;

/// Internal scale of exp, sums and reciprocals.
pub const EXP_SCALE: u32 = 24;
/// The clip point: exp of inputs below −16 is exp(−16).
pub const EXP_CLIP: f64 = 16.0;
/// Range reduction: exp(d) = exp(d/2^6)^(2^6).
pub const EXP_HALVINGS: u32 = 6;
/// exp(v) on v ∈ [−¼, 0], degree 3 (least squares), from degree 0.
pub const EXP_POLY: [f64; 4] = [0.9999988627867469, 0.9998534023609497, 0.4970332150140026, 0.14722650894083578];
/// Scale of the per-row reciprocal in interactive mode (see [`softmax_within`]).
pub const RECIP_ROW_SCALE: u32 = 16;
/// The documented error bound of softmax at f = 12.
pub const SOFTMAX_ERR_F12: f64 = 6e-4;
/// Longest row.
pub const MAX_ROW: usize = 1 << 12;

/// Row maxima of `x` (rows of `len`) by a comparison tree.
pub fn row_max(ctx: &mut Ctx, ch: &mut dyn Channel, x: &ArithShare, len: usize) -> Result<ArithShare> {
    row_max_within(ctx, ch, x, len, f64::INFINITY)
}

/// [`row_max`] for entries bounded by |x| ≤ `max_ulps` (ring units): every
/// compared difference is within 2·`max_ulps` ([`Ctx::relu_within`]).
pub fn row_max_within(ctx: &mut Ctx, ch: &mut dyn Channel, x: &ArithShare, len: usize, max_ulps: f64) -> Result<ArithShare> {
    if len == 0 || !x.len().is_multiple_of(len) {
        return Err(invalid(format!("{} elements are not rows of {len}", x.len())));
    }
    let rows = x.len() / len;
    let ring = x.ring;
    let mut cur: Vec<Vec<u64>> = x.v.chunks(len).map(|c| c.to_vec()).collect();
    let mut width = len;
    while width > 1 {
        let half = width / 2;
        let mut diffs = Vec::with_capacity(rows * half);
        for c in &cur {
            for p in 0..half {
                diffs.push(ring.sub(c[2 * p], c[2 * p + 1]));
            }
        }
        let rl = ctx.relu_within(ch, &ArithShare { ring, v: diffs }, 2.0 * max_ulps)?;
        tree_level(&mut cur, &mut width, &rl);
    }
    Ok(ArithShare { ring, v: cur.into_iter().map(|c| c[0]).collect() })
}

/// One level of the comparison tree: each row's pairs (a, b) become
/// max(a, b) = b + ReLU(a − b) from the level's ReLU outputs `rl` (rows ×
/// ⌊width/2⌋, row-major); an odd last entry moves up unchanged. Local.
fn tree_level(cur: &mut [Vec<u64>], width: &mut usize, rl: &ArithShare) {
    let (ring, half) = (rl.ring, *width / 2);
    for (r, c) in cur.iter_mut().enumerate() {
        let mut next = Vec::with_capacity(width.div_ceil(2));
        for p in 0..half {
            next.push(ring.add(c[2 * p + 1], rl.v[r * half + p]));
        }
        if *width % 2 == 1 {
            next.push(c[*width - 1]);
        }
        *c = next;
    }
    *width = width.div_ceil(2);
}

/// Steps 1–2 as one chain of ReLUs ([`Ctx::relu_chain`]: the tree's
/// levels, then the clip ReLU(x − m + T), each re-share riding on the
/// previous comparison's last flight): returns ReLU(x − m + T) for the row
/// maxima m. Entries bounded by `bu` ring units, T = 16 encoded as `t`.
fn max_and_clip(ctx: &mut Ctx, ch: &mut dyn Channel, x: &ArithShare, len: usize, bu: f64, t: u64) -> Result<ArithShare> {
    let rows = x.len() / len;
    let ring = x.ring;
    let unit = (ctx.fx.frac as f64).exp2();
    let (mut sizes, mut bounds) = (Vec::new(), Vec::new());
    let mut w = len;
    while w > 1 {
        sizes.push(rows * (w / 2));
        bounds.push(2.0 * bu);
        w = w.div_ceil(2);
    }
    sizes.push(x.len());
    bounds.push(2.0 * bu + (EXP_CLIP * unit).ceil());
    let mut cur: Vec<Vec<u64>> = x.v.chunks(len).map(|c| c.to_vec()).collect();
    let mut width = len;
    let diffs = |cur: &[Vec<u64>], width: usize| -> ArithShare {
        let half = width / 2;
        ArithShare { ring, v: cur.iter().flat_map(|c| (0..half).map(move |p| ring.sub(c[2 * p], c[2 * p + 1]))).collect() }
    };
    // the clip's input x − m + T from the maxima
    let party0 = ctx.party == 0;
    let shifted = |cur: &[Vec<u64>]| -> ArithShare {
        let v = (0..x.len()).map(|i| ring.add(ring.sub(x.v[i], cur[i / len][0]), if party0 { t } else { 0 })).collect();
        ArithShare { ring, v }
    };
    let first = if len > 1 { diffs(&cur, width) } else { shifted(&cur) };
    let mut step = |_: usize, rl: &ArithShare| -> Result<ArithShare> {
        tree_level(&mut cur, &mut width, rl);
        Ok(if width > 1 { diffs(&cur, width) } else { shifted(&cur) })
    };
    ctx.relu_chain(ch, &first, &sizes, &bounds, &mut step)
}

fn check_params(ctx: &Ctx) -> Result<()> {
    let (l, f) = (ctx.ring().bits(), ctx.fx.frac);
    if 3 * (f + EXP_HALVINGS) + 3 > l || f > EXP_SCALE || 2 * EXP_SCALE + 16 > l {
        return Err(invalid(format!("exp/softmax: {f} fraction bits in a {l}-bit ring: need 3·(f + 6) ≤ ℓ − 3 and 2·24 + 16 ≤ ℓ")));
    }
    Ok(())
}

/// exp(d) at scale 2^24 for d ≤ 0 already clipped to [−16, 0].
fn exp_clipped(ctx: &mut Ctx, ch: &mut dyn Channel, dc: &ArithShare) -> Result<ArithShare> {
    let f = ctx.fx.frac;
    let s_in = f + EXP_HALVINGS;
    // the polynomial untruncated at scale 2^{s_p + 22} (powers at
    // s_p = 2·s_in: u and u² need no truncation), then N squarings, each
    // fused with the truncation before it (one opening each,
    // [`Ctx::trunc_square`]; the first truncates the polynomial to 2^24,
    // the others y^{2^j} ≤ 1 + 10⁻⁴ from 2^48, all far inside the
    // truncation's range), then the last truncation back to 2^24.
    let s_p = (2 * s_in).clamp(30, 3 * s_in);
    let s_c = 22;
    if ctx.is_interactive() {
        return exp_lut(ctx, ch, dc);
    }
    let raw = poly::eval_raw(ctx, ch, dc, s_in, &[&EXP_POLY], s_p, s_c)?.pop().expect("one polynomial");
    let mut sq = ctx.trunc_square(ch, &raw, s_p + s_c - EXP_SCALE)?;
    for _ in 1..EXP_HALVINGS {
        sq = ctx.trunc_square(ch, &sq, EXP_SCALE)?;
    }
    let y = ctx.trunc(ch, &sq, EXP_SCALE)?;
    Ok(y)
}

/// Index bits of [`exp_lut`]'s table: exp(−2a) for a ∈ [−1, 8].
pub const EXP_LUT_BITS: u32 = 4;
/// Scale of [`exp_lut`]'s table entries (E ≤ e² < 2^3 at scale 2^20).
pub const EXP_LUT_SCALE: u32 = 20;
/// Entry width of [`exp_lut`]'s table: entries below 2^23, shared mod
/// 2^24 with a known MSB.
pub const EXP_LUT_WIDTH: u32 = EXP_LUT_SCALE + 4;
/// Ring of [`exp_lut`]'s product E·g < (1 + 2^−19)·2^44 < 2^45: Z_2^46,
/// extended to the context's ring after.
pub const EXP_LUT_PRODUCT_BITS: u32 = EXP_LUT_SCALE + EXP_SCALE + 2;

/// exp(d) at scale 2^24 for d ∈ [−16, 0] (scale 2^f), **interactive mode**:
/// a table lookup and one small product instead of the polynomial and six
/// squarings (since 2026-11-29).
///
/// **Derivation.** With u = −d ∈ [0, 16·2^f] shared as u₀ + u₁ mod 2^ℓ and
/// β = f + 1, each party splits its own share: b_P = u_P mod 2^β and
/// a_P = ⌊u_P/2^β⌋. Then u − b₀ − b₁ is a multiple of 2^β in
/// [−2^{β+1} + 2, 16·2^f], so a = (u − b₀ − b₁)/2^β is an integer in
/// [−1, 8] with a ≡ a₀ + a₁ (mod 2^{ℓ−β}), hence a = signed4((a₀ + a₁)
/// mod 16) (15 reads as −1) — **exactly**, no comparison, and
/// exp(−u/2^f) = exp(−2a)·exp(−b₀/2^f)·exp(−b₁/2^f). For each element
/// one party S (party 0 for the first half, party 1 for the second: both
/// cores work) is the table sender of [`interactive::lut`]: its row holds
/// E(x) = round(exp(−2·signed4(a_S + x) − b_S/2^f)·2^20) for the other
/// party R's index x = a_R mod 16 (4 COTs, 16 entries of 24 bits);
/// E ≤ e²·2^20 < 2^23. Then E·g with g = round(exp(−b_R/2^f)·2^24), R's
/// own value: with E's shares x'_P mod 2^24 (top bit t_P; E's MSB at width
/// 24 is known to be 0), E = s_S + s_R + 2^24·t_S·t_R (s_P the signed
/// readings, as [`interactive::mul_small`]), so
/// E·g = s_R·g (R's, local) + Σ_{j<23} 2^j·x'_{S,j}·g + 2^23·t_S·(2t_R − 1)·g:
/// one [`interactive::vole`] with S's 24-bit chosen multiplier x'_S and
/// R's per-bit vectors (24 OTs). E·g ≤ (1 + 2^−19)·2^44; last, one
/// truncation by 20 bits to scale 2^24.
///
/// **Error:** the table's rounding (½ ulp of 2^−20, weighed by g ≤ 1),
/// g's (½ ulp of 2^−24, weighed by E ≤ e²) and the truncation (one ulp of
/// 2^−24): |e − exp(d)| ≤ 2^−21 + 3.7·2^−24 + 2^−24 ≈ 7.6·10⁻⁷ — far
/// within the polynomial path's 1.0·10⁻⁴ relative bound, so
/// [`SOFTMAX_ERR_F12`] holds with more room.
///
/// **Security:** [`interactive::lut`]'s and [`interactive::vole`]'s views
/// (uniform index corrections and derandomisation bits; table entries and
/// corrections masked by pads the receiver did not choose); nothing is
/// opened. **Range:** d ∈ [−16, 0] (the clip, or a proven bound) — outside
/// it a wraps modulo 16 and the value is wrong, not leaked.
///
/// Per element: 29 COTs and about 160 bytes (48 for the table, ~110 for the
/// product in Z_2^46 and ~3 for its extension), against the polynomial's
/// 55 and six squarings' 162 COTs and about 1.45 KB; 8 flights instead of
/// 29 (until 2026-11-29 the product ran in the full ring: 28 COTs, about
/// 210 bytes, 6 flights).
pub fn exp_lut(ctx: &mut Ctx, ch: &mut dyn Channel, dc: &ArithShare) -> Result<ArithShare> {
    let (ring, f, party) = (ctx.ring(), ctx.fx.frac, ctx.party);
    if f < 1 || f + 1 + EXP_LUT_BITS > ring.bits() || ring.bits() < 2 * EXP_SCALE + 3 {
        return Err(invalid(format!("exp by table: {f} fraction bits in a {}-bit ring (need f ≥ 1, ℓ ≥ 51)", ring.bits())));
    }
    let n = dc.len();
    let raw = if n == 0 || !ctx.is_interactive() || ctx.is_planning() {
        ArithShare::zeros(ring, n)
    } else {
        let beta = f + 1;
        let (kb, w) = (EXP_LUT_BITS, EXP_LUT_WIDTH);
        let nn = 1usize << kb;
        let u: Vec<u64> = dc.v.iter().map(|v| ring.neg(*v)).collect();
        let h = n / 2;
        let (sr, rr) = if party == 0 { (0..h, h..n) } else { (h..n, 0..h) };
        let (st, sg) = ((EXP_LUT_SCALE as f64).exp2(), (EXP_SCALE as f64).exp2());
        let unit = (f as f64).exp2();
        let step = (beta as f64).exp2() / unit;
        let bmask = (1u64 << beta) - 1;
        let ea: Vec<f64> = (0..nn).map(|v| (-(if v == nn - 1 { -1.0 } else { v as f64 }) * step).exp()).collect();
        let us = &u[sr.clone()];
        let mut fill = |i: usize, row: &mut [u64]| {
            let v = us[i];
            let a = ((v >> beta) as usize) & (nn - 1);
            let eb = (-((v & bmask) as f64) / unit).exp() * st;
            for (x, o) in row.iter_mut().enumerate() {
                *o = (ea[(a + x) & (nn - 1)] * eb).round() as u64;
            }
        };
        let idx: Vec<u64> = u[rr.clone()].iter().map(|v| (v >> beta) & (nn as u64 - 1)).collect();
        let g: Vec<u64> = u[rr.clone()].iter().map(|v| ((-((v & bmask) as f64) / unit).exp() * sg).round() as u64).collect();
        let ot = ctx.ot_mut().ok_or_else(|| invalid("exp by table: interactive mode only"))?;
        let (es, er) = interactive::lut(ot, ch, party, kb, w, Some((sr.len(), &mut fill)), Some(&idx))?;
        // E·g: S's w-bit multiplier against R's per-bit vectors
        let top = |x: u64| (x >> (w - 1)) & 1;
        let mut vecs = Vec::with_capacity(rr.len() * w as usize);
        for (x, gv) in er.iter().zip(&g) {
            vecs.extend(std::iter::repeat_n(*gv, w as usize - 1));
            vecs.push(ring.mul(ring.sub(2 * top(*x), 1), *gv));
        }
        // E·g < 2^{45}: the product runs in Z_2^{46} (the vectors and R's
        // local term reduced mod 2^{46}; a ring homomorphism, so exact) and
        // is extended to the ring with its top bit known to be zero
        // ([`interactive::extend_known_msb`]: one OT, one bit and 18 bits
        // per element instead of 18 more bits in each of the 24 OTs'
        // corrections — since 2026-11-29)
        let nw = EXP_LUT_PRODUCT_BITS;
        let rn = Ring::new(nw).ok_or_else(|| invalid("exp by table: product ring"))?;
        vecs.iter_mut().for_each(|v| *v &= rn.mask());
        let wf = move |_| nw;
        let sdir = interactive::Dir { groups: rr.len(), m: 1, ybits: w, width: &wf, chosen: true, per_bit: true };
        let rdir = interactive::Dir { groups: sr.len(), m: 1, ybits: w, width: &wf, chosen: true, per_bit: false };
        let v = interactive::vole(ot, ch, party, Some((sdir, &vecs)), Some((rdir, Some(&es))))?;
        let mut narrow = vec![0u64; n];
        for (j, i) in rr.clone().enumerate() {
            let s = rn.sub(er[j], rn.mul(top(er[j]), 1u64 << w));
            narrow[i] = rn.add(rn.mul(s, g[j]), v.send[j]);
        }
        for (j, i) in sr.clone().enumerate() {
            narrow[i] = v.recv[j] & rn.mask();
        }
        let out = interactive::extend_known_msb(ot, ch, party, ring, &[(&narrow, nw)])?.pop().expect("one part");
        ArithShare { ring, v: out }
    };
    ctx.trunc(ch, &raw, EXP_LUT_SCALE)
}

/// exp(x) element-wise for x ≤ 0, output at the context's scale. Inputs
/// below −16 give exp(−16); positive inputs are clipped to 0 (exp = 1) —
/// one batched ReLU round clips both sides.
pub fn exp_nonpos(ctx: &mut Ctx, ch: &mut dyn Channel, x: &ArithShare) -> Result<ArithShare> {
    check_params(ctx)?;
    let (ring, f) = (ctx.ring(), ctx.fx.frac);
    let n = x.len();
    let t = poly::enc(ctx, EXP_CLIP, f);
    let r = ctx.relu(ch, &concat(&[&ctx.add_const(x, t), x]))?;
    let r = if n == 0 { vec![ArithShare::zeros(ring, 0); 2] } else { split(&r, n) };
    let dc = ctx.add_const(&r[0].sub(&r[1]), ring.neg(t));
    let y = exp_clipped(ctx, ch, &dc)?;
    ctx.trunc(ch, &y, EXP_SCALE - f)
}

/// Softmax of each row of `len` elements; input and output at the
/// context's fixed point. Valid for every input in the documented range.
pub fn softmax(ctx: &mut Ctx, ch: &mut dyn Channel, x: &ArithShare, len: usize) -> Result<ArithShare> {
    softmax_within(ctx, ch, x, len, f64::INFINITY)
}

/// Softmax for inputs the caller has proved bounded, |x| ≤ `max_abs` (real
/// units): the same steps and error bound, with the comparisons on the
/// fewest bits exact inside the bound ([`Ctx::relu_within`]): the max
/// tree's differences are within 2·max_abs, the clip's d + 16 within
/// 2·max_abs + 16, and the reciprocal's octave comparisons (sums in
/// [2^−1, L] at scale 2^24, by construction: every exp ≤ 1 + its error)
/// within 2^{⌈log2 L⌉ + 26}. At f = 12 and |x| ≤ 2^14 the max and clip
/// compare 28 bits (six chunks, one merge level; 63 bits and two levels on
/// the whole ring), the reciprocal 34 bits at L = 128. An infinite bound
/// is [`softmax`] except for the reciprocal's internal bound. The clear
/// reference fails on an input above the bound.
pub fn softmax_within(ctx: &mut Ctx, ch: &mut dyn Channel, x: &ArithShare, len: usize, max_abs: f64) -> Result<ArithShare> {
    check_params(ctx)?;
    if max_abs.is_nan() || max_abs < 0.0 {
        return Err(invalid(format!("softmax: input bound {max_abs} must be non-negative")));
    }
    if len == 0 || len > MAX_ROW || !x.len().is_multiple_of(len) {
        return Err(invalid(format!("softmax: rows of {len} (1..={MAX_ROW}) over {} elements", x.len())));
    }
    let (ring, f) = (ctx.ring(), ctx.fx.frac);
    let rows = x.len() / len;
    let unit = (f as f64).exp2();
    let bu = (max_abs * unit).ceil();
    ctx.check_bound(x, bu, "softmax")?;
    let t = poly::enc(ctx, EXP_CLIP, f);
    let dc = if ctx.is_interactive() && 2.0 * bu <= t as f64 {
        // interactive mode, |x| ≤ 8: x − max ∈ [−16, 0] already, so the
        // clip is the identity (ReLU(d + 16) − 16 = d) and is skipped —
        // one comparison per element fewer, the same values
        let m = row_max_within(ctx, ch, x, len, bu)?;
        ArithShare { ring, v: (0..x.len()).map(|i| ring.sub(x.v[i], m.v[i / len])).collect() }
    } else {
        let rl = max_and_clip(ctx, ch, x, len, bu, t)?;
        ctx.add_const(&rl, ring.neg(t))
    };
    let e = exp_clipped(ctx, ch, &dc)?;
    let sums = ArithShare { ring, v: e.v.chunks(len).map(|c| c.iter().fold(0u64, |a, b| ring.add(a, *b))).collect() };
    let hi = (len.max(2) as f64).log2().ceil() as i32;
    // the sums are at most L·(1 + 10⁻³) at scale 2^24: below 2^{hi + 25}
    let (ip, ik) = recip::reciprocal_untruncated(ctx, ch, &sums, EXP_SCALE, -1, hi, ((hi + EXP_SCALE as i32 + 1) as f64).exp2())?;
    // the reciprocal's last truncation fused with the product by exp (per
    // element, one flight: [`Ctx::trunc_mul`])
    if ctx.is_interactive() {
        // interactive mode: the reciprocal truncated per row to scale
        // 2^16 ([`RECIP_ROW_SCALE`]: R = 1/Σe ≤ 1 + 10⁻³, non-negative,
        // so R ∈ [0, 2^17); the coarser R adds at most e·2^−16 ≤ 1.6·10⁻⁵
        // to an output, which the table exp's error, 10⁻⁴·p smaller than
        // the polynomial's, more than pays for), then e·R with R as the
        // row's small operand of one vector OLE per row
        // ([`Ctx::mul_small_rows`]: 36 OTs per row instead of 52 per
        // element)
        let r = ctx.trunc(ch, &ip, ik + EXP_SCALE - RECIP_ROW_SCALE)?;
        // 0 ≤ e < 2^{25} (exp ≤ 1 + 2^−19 at scale 2^24) and R < 2^{17}: the
        // product is below 2^{42}, so the OLEs run in Z_2^{44} and extend
        // ([`Ctx::mul_small_rows_within`])
        let p = ctx.mul_small_rows_within(ch, &r, RECIP_ROW_SCALE + 2, &e, len, Some(EXP_SCALE + RECIP_ROW_SCALE + 2))?;
        return ctx.trunc(ch, &p, EXP_SCALE + RECIP_ROW_SCALE - f);
    }
    let ib: Vec<u64> = (0..rows * len).map(|i| ip.v[i / len]).collect();
    let p = ctx.trunc_mul(ch, &ArithShare { ring, v: ib }, ik, &e)?.1;
    ctx.trunc(ch, &p, 2 * EXP_SCALE - f)
}

/// Softmax of each row in f64 (the float reference).
pub fn softmax_f64(x: &[f64], len: usize) -> Vec<f64> {
    x.chunks(len)
        .flat_map(|r| {
            let m = r.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = r.iter().map(|v| (v - m).exp()).collect();
            let s: f64 = e.iter().sum();
            e.into_iter().map(move |v| v / s)
        })
        .collect()
}
