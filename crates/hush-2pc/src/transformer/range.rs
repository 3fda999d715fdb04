//! Operand ranges of the fixed-point products of two secrets (Mul, MatMul):
//! how these operators keep their promise of **never wrapping silently**.
//!
//! A fixed-point product x·y (or a row·column sum of k of them) is computed
//! exactly in Z_2^ℓ at scale 2^{2f} and then truncated; the truncation
//! ([`super::ctx`]) is faithful for |value| < 2^{ℓ−2}. A product that
//! leaves that range would come out wrong by a multiple of 2^{ℓ−f} — a
//! silent wrap — and the parties cannot see it (the values are secret). So
//! every caller of [`super::elementwise::mul`] and [`super::matmul::matmul`]
//! states a [`Bound`] on the operands (real units), and the operator
//! **refuses** (an `Error::Invalid` naming the operator and the bound)
//! any bound whose worst case k·|x|·|y|·2^{2f} does not fit 2^{ℓ−2}
//! ([`check_product`]), before anything is sent. The bound is then made true
//! in one of two ways:
//!
//! * [`Bound::Proven`]: the caller has proved it from public facts — e.g.
//!   `hush_inference::encoder` derives every product's operand bound from
//!   the model's weights and scales when the model is loaded (LayerNorm
//!   outputs are at most √H·max|γ| + max|β|, a linear layer's outputs at
//!   most Σ|W|·bound + |b|, softmax outputs at most 1 + its error), and
//!   refuses a model for which the ring is too small. Nothing is computed
//!   at run time. The plaintext reference ([`super::Ctx::clear`]) checks
//!   the claim on its values and fails with an error if one exceeds it, so
//!   a wrong proof shows up in the reference tests instead of as a wrap.
//! * [`Bound::Saturate`]: the operator clips each operand to ±bound first
//!   (x_c = x − ReLU(x − B) + ReLU(−x − B), one batched ReLU round for both
//!   operands): values outside the bound **saturate** (documented error:
//!   the product of the clipped operands), never wrap. Valid for every
//!   operand with |x| < 2^{ℓ−1} ulps − B (the ReLU's differences must not
//!   themselves wrap).
//!
//! The ring-level primitives ([`super::Ctx::mul`], [`super::Ctx::matmul`],
//! [`super::Ctx::powers`]) stay exact ring arithmetic with no fixed-point
//! meaning; the operators built on them state their ranges in their docs.

use super::ctx::{concat, split, Ctx};
use crate::share::ArithShare;
use crate::{invalid, Result};
use hush_transport::Channel;

/// What the caller guarantees about the magnitudes of a product's two
/// operands, in real (decoded) units.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bound {
    /// |x| ≤ x and |y| ≤ y hold (proved by the caller from public facts);
    /// no run-time cost. The clear reference checks it.
    Proven { x: f64, y: f64 },
    /// Clip the operands to ±x and ±y first (one ReLU round): saturation
    /// outside the bound.
    Saturate { x: f64, y: f64 },
}

impl Bound {
    pub fn xy(&self) -> (f64, f64) {
        match *self {
            Bound::Proven { x, y } | Bound::Saturate { x, y } => (x, y),
        }
    }
}

/// Refuses a bound whose worst-case sum of `k` products, at scale 2^{2f},
/// does not stay below 2^{ℓ−2} (the truncation's range); `what` names the
/// operator in the error.
pub fn check_product(ctx: &Ctx, k: usize, b: Bound, what: &str) -> Result<()> {
    let (bx, by) = b.xy();
    let (l, f) = (ctx.ring().bits(), ctx.fx.frac);
    if !(bx.is_finite() && by.is_finite() && bx >= 0.0 && by >= 0.0) {
        return Err(invalid(format!("{what}: operand bounds {bx}, {by} must be finite and non-negative")));
    }
    let worst = k as f64 * bx * by * (2.0 * f as f64).exp2();
    let limit = ((l - 2) as f64).exp2();
    if worst >= limit {
        return Err(invalid(format!(
            "{what}: operands bounded by {bx} and {by} (sums of {k}) reach 2^{:.1} at scale 2^{}, beyond the ring's 2^{} — the product could wrap; use a larger ring, fewer fraction bits or tighter bounds",
            worst.log2(),
            2 * f,
            l - 2
        )));
    }
    if let Bound::Saturate { .. } = b {
        for v in [bx, by] {
            if v * (f as f64).exp2() >= ((l - 2) as f64).exp2() {
                return Err(invalid(format!("{what}: saturation bound {v} is not representable at {f} fraction bits in a {l}-bit ring")));
            }
        }
    }
    Ok(())
}

/// Applies `b` to the operands: checks a proven bound in the clear
/// reference, clips for a saturating one (one batched ReLU round).
pub fn apply(ctx: &mut Ctx, ch: &mut dyn Channel, x: &ArithShare, y: &ArithShare, b: Bound, what: &str) -> Result<(ArithShare, ArithShare)> {
    let ring = ctx.ring();
    let f = ctx.fx.frac;
    let (bx, by) = b.xy();
    match b {
        Bound::Proven { .. } => {
            if ctx.is_clear() {
                for (v, lim, name) in [(x, bx, "first"), (y, by, "second")] {
                    let lim_u = lim * (f as f64).exp2();
                    if let Some(a) = v.v.iter().map(|&a| ring.to_signed(a) as f64).find(|a| a.abs() > lim_u) {
                        return Err(invalid(format!(
                            "{what}: {name} operand {} exceeds its proven bound {lim} (the bound's proof is wrong)",
                            a / (f as f64).exp2()
                        )));
                    }
                }
            }
            Ok((x.clone(), y.clone()))
        }
        Bound::Saturate { .. } => {
            let (n, m) = (x.len(), y.len());
            let enc = |v: f64| (v * (f as f64).exp2()).floor() as i64;
            let (cx, cy) = (ring.from_signed(enc(bx)), ring.from_signed(enc(by)));
            let parts = [
                ctx.add_const(x, ring.neg(cx)),
                ctx.add_const(&x.neg(), ring.neg(cx)),
                ctx.add_const(y, ring.neg(cy)),
                ctx.add_const(&y.neg(), ring.neg(cy)),
            ];
            let refs: Vec<&ArithShare> = parts.iter().collect();
            let r = ctx.relu(ch, &concat(&refs))?;
            let (rx, ry) = r.v.split_at(2 * n);
            let rx = split(&ArithShare { ring, v: rx.to_vec() }, n.max(1));
            let ry = split(&ArithShare { ring, v: ry.to_vec() }, m.max(1));
            let xc = if n == 0 { x.clone() } else { x.sub(&rx[0]).add(&rx[1]) };
            let yc = if m == 0 { y.clone() } else { y.sub(&ry[0]).add(&ry[1]) };
            Ok((xc, yc))
        }
    }
}
