//! Fixed-point encoding and the ring-level building blocks shared by the
//! plaintext reference and the secure engine.
//!
//! Values are signed fixed point in Z_2^ℓ (two's complement) with `frac`
//! fraction bits: x ↦ round(x·2^frac) mod 2^ℓ.
//!
//! **Defaults: ℓ = 37, frac = 12** (the setting CrypTFlow2 and Cheetah use
//! for their CNN benchmarks). A product of two encoded values carries 2·12 =
//! 24 fraction bits, leaving 12 integer bits plus the sign before the
//! accumulator wraps: |Σ w·x| < 2^12 = 4096 in real units, ample for
//! normalized CNNs. 37 bits travel as 5 bytes per element (vs 8 at ℓ = 64),
//! and comparison cost grows with ℓ. Any 2·frac + 2 ≤ ℓ ≤ 64 may be chosen
//! (`--bits`, `--frac`); ℓ ≤ 64 is the comparison layer's limit.
//!
//! Where rounding happens (this is the specification the secure run must
//! meet bit for bit; see [`crate::reference`]):
//! * weights and constants: round to nearest (ties away from zero) at
//!   scale 2^frac; biases of Conv/Gemm/BatchNorm at scale 2^(2·frac), added
//!   before truncation;
//! * after every layer that multiplies (Conv, Gemm/MatMul, unfolded
//!   BatchNorm, AveragePool) the 2·frac-bit result is truncated by
//!   arithmetic shift right by frac, i.e. floor(x / 2^frac) of the signed
//!   value ([`trunc`]);
//! * AveragePool multiplies the window sum by the public constant
//!   round(2^frac / count), so its divisor is exact up to
//!   2^−(frac+1) absolute error in 1/count.

use crate::{Error, Result};

/// Ring size and fraction bits of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedConfig {
    pub bits: u32,
    pub frac: u32,
}

impl Default for FixedConfig {
    fn default() -> Self {
        FixedConfig { bits: 37, frac: 12 }
    }
}

impl FixedConfig {
    pub fn new(bits: u32, frac: u32) -> Result<Self> {
        let c = FixedConfig { bits, frac };
        c.validate()?;
        Ok(c)
    }
    pub fn validate(&self) -> Result<()> {
        // u64: 2·frac + 2 must not wrap (frac may come from a peer's hello)
        if self.bits > 64 || self.frac == 0 || 2 * self.frac as u64 + 2 > self.bits as u64 {
            return Err(Error::Config(format!(
                "fixed point ℓ = {} bits with {} fraction bits: need 1 ≤ frac and 2·frac + 2 ≤ ℓ ≤ 64",
                self.bits, self.frac
            )));
        }
        Ok(())
    }
    #[inline]
    pub fn mask(&self) -> u64 {
        if self.bits == 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        }
    }
    /// Bytes per ring element on the wire.
    pub fn elem_bytes(&self) -> usize {
        (self.bits as usize).div_ceil(8)
    }
    #[inline]
    pub fn to_signed(&self, x: u64) -> i64 {
        let s = 64 - self.bits;
        ((x << s) as i64) >> s
    }
    #[inline]
    pub fn from_signed(&self, x: i64) -> u64 {
        (x as u64) & self.mask()
    }
    /// round(x · 2^scale_bits), checked to fit the signed ring.
    pub fn encode_scaled(&self, x: f64, scale_bits: u32, what: &str) -> Result<u64> {
        let v = (x * (scale_bits as f64).exp2()).round();
        let lim = ((self.bits - 1) as f64).exp2();
        if !v.is_finite() || v.abs() >= lim {
            return Err(Error::Config(format!(
                "{what}: value {x} does not fit ℓ = {} bits at 2^{scale_bits} (raise --bits or lower --frac)",
                self.bits
            )));
        }
        Ok(self.from_signed(v as i64))
    }
    pub fn encode(&self, x: f64, what: &str) -> Result<u64> {
        self.encode_scaled(x, self.frac, what)
    }
    pub fn decode(&self, x: u64) -> f64 {
        self.to_signed(x) as f64 / (self.frac as f64).exp2()
    }
    /// Arithmetic shift right by `frac`: floor(x / 2^frac) of the signed value.
    #[inline]
    pub fn trunc(&self, x: u64) -> u64 {
        trunc(self, x, self.frac)
    }
}

/// floor(signed(x) / 2^shift) mod 2^ℓ — the truncation every secure family
/// must reproduce exactly.
#[inline]
pub fn trunc(cfg: &FixedConfig, x: u64, shift: u32) -> u64 {
    cfg.from_signed(cfg.to_signed(x) >> shift)
}

/// ReLU on a ring element: x if its sign bit is clear, else 0.
#[inline]
pub fn relu(cfg: &FixedConfig, x: u64) -> u64 {
    if (x >> (cfg.bits - 1)) & 1 == 1 {
        0
    } else {
        x
    }
}

/// For a pooling layer over c×h×w, the in-bounds input indices of each
/// output (row-major window order), as (offsets, indices).
pub fn pool_windows(in_shape: &[usize], kernel: [usize; 2], stride: [usize; 2], pads: [usize; 4], out_shape: &[usize]) -> (Vec<u32>, Vec<u32>) {
    let (c, h, w) = (in_shape[0], in_shape[1], in_shape[2]);
    let (oh, ow) = (out_shape[1], out_shape[2]);
    let mut offs = Vec::with_capacity(c * oh * ow + 1);
    let mut idx = Vec::with_capacity(c * oh * ow * kernel[0] * kernel[1]);
    offs.push(0u32);
    for ch in 0..c {
        for oy in 0..oh {
            for ox in 0..ow {
                for ky in 0..kernel[0] {
                    let iy = (oy * stride[0] + ky) as isize - pads[0] as isize;
                    if iy < 0 || iy >= h as isize {
                        continue;
                    }
                    for kx in 0..kernel[1] {
                        let ix = (ox * stride[1] + kx) as isize - pads[1] as isize;
                        if ix < 0 || ix >= w as isize {
                            continue;
                        }
                        idx.push(((ch * h + iy as usize) * w + ix as usize) as u32);
                    }
                }
                offs.push(idx.len() as u32);
            }
        }
    }
    (offs, idx)
}

/// The public AveragePool multipliers round(2^frac / count) per output.
pub fn avgpool_consts(cfg: &FixedConfig, offs: &[u32], kernel: [usize; 2], count_include_pad: bool) -> Vec<u64> {
    offs.windows(2)
        .map(|w| {
            let cnt = if count_include_pad { kernel[0] * kernel[1] } else { (w[1] - w[0]) as usize };
            ((cfg.frac as f64).exp2() / cnt.max(1) as f64).round() as u64 & cfg.mask()
        })
        .collect()
}

/// Concatenation along `axis` of row-major tensors: copies `parts` into `out`.
pub fn concat_into<T: Copy>(shapes: &[&[usize]], axis: usize, parts: &[&[T]], out: &mut [T]) {
    let outer: usize = shapes[0][..axis].iter().product();
    let inner: usize = shapes[0][axis + 1..].iter().product();
    let total_axis: usize = shapes.iter().map(|s| s[axis]).sum();
    let mut base = 0;
    for (s, p) in shapes.iter().zip(parts) {
        let blk = s[axis] * inner;
        for o in 0..outer {
            let dst = o * total_axis * inner + base * inner;
            out[dst..dst + blk].copy_from_slice(&p[o * blk..(o + 1) * blk]);
        }
        base += s[axis];
    }
}

/// The pairwise tree MaxPool is computed by (reference and secure alike):
/// each round pairs up the remaining candidates of every window as
/// max(a, b) = b + ReLU(a − b) over the ring (an odd candidate moves on
/// unchanged), until one remains. Returns per round the list of
/// (a, b) candidate-slot pairs; slots are indices into the window's list.
pub fn maxpool_rounds(max_window: usize) -> usize {
    let mut n = max_window;
    let mut r = 0;
    while n > 1 {
        n = n.div_ceil(2);
        r += 1;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn encoding_truncation_and_limits() {
        let c = FixedConfig::default();
        assert_eq!(c.decode(c.encode(1.5, "x").unwrap()), 1.5);
        assert_eq!(c.decode(c.encode(-0.25, "x").unwrap()), -0.25);
        assert!(c.encode(1e9, "x").is_err());
        // floor semantics for negative values
        let m = c.encode(-1.0, "x").unwrap().wrapping_mul(3) & c.mask(); // -3 at scale f
        assert_eq!(c.to_signed(trunc(&c, m, 1)), -(3 << 11));
        let odd = c.from_signed(-3);
        assert_eq!(c.to_signed(trunc(&c, odd, 1)), -2);
        assert_eq!(relu(&c, odd), 0);
        assert!(FixedConfig::new(20, 12).is_err());
        assert!(FixedConfig::new(64, 16).is_ok());
        assert_eq!(FixedConfig::new(64, 16).unwrap().decode(u64::MAX), -1.0 / 65536.0);
    }
}
