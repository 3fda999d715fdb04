//! DReLU, ReLU, MaxPool and faithful truncation over additive shares, in
//! each comparison family ([`Proto`]): one interface, three protocols.
//!
//! Inputs are general additive shares x = x_0 + x_1 over Z_2^ℓ.
//! * `cf2`: CrypTFlow2 reductions on an [`OtSession`] (DReLU = 1 ⊕ msb(x_0) ⊕
//!   msb(x_1) ⊕ carry, carry from the millionaires'; ReLU = OT multiplexer;
//!   truncation from the wrap bit, error ≤ 1 ulp).
//! * `tami`: party 1 first re-shares onto a dealt mask (sends x_1 − m, one
//!   flight), then the masked-form protocols of [`crate::tami`] run
//!   (error ≤ 1 ulp for truncation).
//! * `fss`: the general-form opening of [`crate::fss`] (one simultaneous
//!   round); truncation is exact.
//!
//! In the `tee` families the operation deals its correlations first (a
//! local module crossing, no communication). MaxPool reduces each window
//! with max(a, b) = b + ReLU(a − b), ⌈log2 (window)⌉ ReLU levels, all
//! windows of a level in one batch. **Input range of MaxPool**: the
//! differences a − b must not wrap, so inputs must satisfy |x| < 2^{ℓ−2}
//! (fixed-point activations are far inside this range).
//!
//! Truncation is valid for the whole signed ℓ-bit range (no input-range
//! assumption): see [`crate::tami`] and [`crate::fss`] for the derivation.

use crate::beaver::OtSession;
use crate::share::{ArithShare, BoolShare};
use crate::tee::Dealer;
use crate::wire::{self, mask, pack_ring, unpack_ring};
use crate::{cf2, fss, invalid, tami, Party, Result};
use hush_primitives::Ring;
use hush_transport::Channel;

/// The comparison family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    Cf2,
    Tami,
    Fss,
}

impl Proto {
    pub fn by_name(s: &str) -> Option<Self> {
        match s {
            "cf2" => Some(Proto::Cf2),
            "tami" => Some(Proto::Tami),
            "fss" => Some(Proto::Fss),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Proto::Cf2 => "cf2",
            Proto::Tami => "tami",
            Proto::Fss => "fss",
        }
    }
}

/// A party's nonlinear-layer session.
pub struct Session {
    pub party: Party,
    pub proto: Proto,
    pub dealer: Option<Dealer>,
    pub ot: Option<OtSession>,
    /// Chunk width (TAMI k ≤ 5, CF2 k ≤ 8).
    pub k: u32,
    /// TAMI merge arity.
    pub arity: u32,
}

impl Session {
    pub fn tee(party: Party, proto: Proto, dealer: Dealer) -> Self {
        Session { party, proto, dealer: Some(dealer), ot: None, k: tami::DEFAULT_K, arity: tami::DEFAULT_ARITY }
    }
    pub fn interactive(party: Party, ot: OtSession) -> Self {
        Session { party, proto: Proto::Cf2, dealer: None, ot: Some(ot), k: cf2::DEFAULT_K, arity: 0 }
    }

    fn dealer(&mut self) -> Result<&mut Dealer> {
        self.dealer.as_mut().ok_or_else(|| invalid("this family needs a trusted module (tee mode)"))
    }
    fn ot(&mut self) -> Result<&mut OtSession> {
        self.ot.as_mut().ok_or_else(|| invalid("the cf2 family needs a COT session"))
    }

    /// TAMI on general shares: deal, re-share onto the dealt mask, run.
    fn tami_general(&mut self, ch: &mut dyn Channel, x: &ArithShare, flavor: tami::Flavor) -> Result<tami::TamiOut> {
        let (party, k, arity) = (self.party, self.k, self.arity);
        let shape = tami::TamiShape::new(x.ring.bits(), k, arity, flavor);
        let b = tami::deal(self.dealer()?, party, x.len(), shape)?;
        tami_general_online(ch, party, &b, x)
    }

    fn fss_general(&mut self, ch: &mut dyn Channel, x: &ArithShare, gate: fss::FssGate) -> Result<fss::FssOut> {
        let party = self.party;
        let shape = fss::FssShape { bits: x.ring.bits(), gate };
        let b = fss::deal(self.dealer()?, party, x.len(), shape)?;
        fss::online(ch, &b, Some(&x.v), true)
    }

    /// DReLU(x) = 1{x ≥ 0} (signed), XOR shares.
    pub fn drelu(&mut self, ch: &mut dyn Channel, x: &ArithShare) -> Result<BoolShare> {
        match self.proto {
            Proto::Tami => self.tami_general(ch, x, tami::Flavor::Drelu)?.bits(),
            Proto::Fss => self.fss_general(ch, x, fss::FssGate::Drelu)?.bits(),
            Proto::Cf2 => {
                let (party, k) = (self.party, self.k);
                let r = x.ring;
                let inp = cf2::drelu_input(party, r, &x.v);
                let mut pre = cf2::prepare(self.ot()?, ch, party, x.len(), r.bits() - 1, k, 0)?;
                let carry = cf2::millionaire_online(ch, party, &mut pre, &inp)?;
                Ok(cf2::drelu_finish(party, r, &x.v, carry))
            }
        }
    }

    /// ReLU(x), additive shares.
    pub fn relu(&mut self, ch: &mut dyn Channel, x: &ArithShare) -> Result<ArithShare> {
        match self.proto {
            Proto::Tami => self.tami_general(ch, x, tami::Flavor::Relu)?.arith(),
            Proto::Fss => self.fss_general(ch, x, fss::FssGate::Relu)?.arith(),
            Proto::Cf2 => {
                let (party, k) = (self.party, self.k);
                let r = x.ring;
                let inp = cf2::drelu_input(party, r, &x.v);
                let mut pre = cf2::prepare(self.ot()?, ch, party, x.len(), r.bits() - 1, k, x.len())?;
                let carry = cf2::millionaire_online(ch, party, &mut pre, &inp)?;
                let b = cf2::drelu_finish(party, r, &x.v, carry);
                cf2::mux_online(ch, party, &mut pre, &b, x)
            }
        }
    }

    /// ⌊x / 2^f⌋ on signed fixed point (error ≤ 1 ulp; exact for `fss`).
    pub fn trunc(&mut self, ch: &mut dyn Channel, x: &ArithShare, f: u32) -> Result<ArithShare> {
        if f == 0 || f >= x.ring.bits() {
            return Err(invalid(format!("truncation by {f} bits")));
        }
        match self.proto {
            Proto::Tami => self.tami_general(ch, x, tami::Flavor::Trunc { f })?.arith(),
            Proto::Fss => self.fss_general(ch, x, fss::FssGate::Trunc { f })?.arith(),
            Proto::Cf2 => {
                let (party, k) = (self.party, self.k);
                let r = x.ring;
                let l = r.bits();
                let inp = cf2::trunc_input(party, r, &x.v);
                let mut pre = cf2::prepare(self.ot()?, ch, party, x.len(), l, k, x.len())?;
                let w = cf2::millionaire_online(ch, party, &mut pre, &inp)?;
                let c = r.neg(1u64 << (l - f));
                let cx = ArithShare::new(r, vec![if party == 0 { c } else { 0 }; x.len()]);
                let z = cf2::mux_online(ch, party, &mut pre, &w, &cx)?;
                Ok(cf2::trunc_finish(party, r, &x.v, f, &z))
            }
        }
    }

    /// ⌊x / 2^f⌋ of an x known to be non-negative (a ReLU's output), error
    /// ≤ 1 ulp: `cf2` only ([`cf2::trunc_nonneg`]: one random OT per
    /// element instead of a millionaires').
    pub fn trunc_nonneg(&mut self, ch: &mut dyn Channel, x: &ArithShare, f: u32) -> Result<ArithShare> {
        match self.proto {
            Proto::Cf2 => {
                let party = self.party;
                cf2::trunc_nonneg(self.ot()?, ch, party, x, f)
            }
            _ => self.trunc(ch, x, f),
        }
    }

    /// Max pooling over `shape` (layout \[channel\]\[row\]\[column\]).
    pub fn maxpool(&mut self, ch: &mut dyn Channel, x: &ArithShare, shape: &PoolShape) -> Result<ArithShare> {
        let windows = shape.windows()?;
        if x.len() != shape.c * shape.h * shape.w {
            return Err(invalid("maxpool: input size does not match the shape"));
        }
        let r = x.ring;
        let mut cur: Vec<Vec<u64>> = windows.iter().map(|w| w.iter().map(|&i| x.v[i]).collect()).collect();
        while cur.iter().any(|c| c.len() > 1) {
            let mut diffs = Vec::new();
            for c in &cur {
                for p in 0..c.len() / 2 {
                    diffs.push(r.sub(c[2 * p], c[2 * p + 1]));
                }
            }
            let rl = self.relu(ch, &ArithShare::new(r, diffs))?;
            let mut q = 0;
            for c in cur.iter_mut() {
                let mut next = Vec::with_capacity(c.len().div_ceil(2));
                for p in 0..c.len() / 2 {
                    next.push(r.add(c[2 * p + 1], rl.v[q]));
                    q += 1;
                }
                if c.len() % 2 == 1 {
                    next.push(c[c.len() - 1]);
                }
                *c = next;
            }
        }
        Ok(ArithShare::new(r, cur.into_iter().map(|c| c[0]).collect()))
    }
}

/// The online phase of a TAMI batch on general additive shares x = x_0 +
/// x_1 (dealt beforehand with [`tami::deal`]): party 1 re-shares onto the
/// dealt mask (sends x_1 − m, one flight), then [`tami::online`] runs.
pub fn tami_general_online(ch: &mut dyn Channel, party: Party, b: &tami::TamiBatch, x: &ArithShare) -> Result<tami::TamiOut> {
    let r = x.ring;
    let bits = r.bits();
    if b.n != x.len() || b.shape.bits != bits {
        return Err(invalid("TAMI batch does not match the input"));
    }
    let step = "TAMI re-share onto the dealt mask";
    if party == 1 {
        let d: Vec<u64> = x.v.iter().zip(b.dealt_input()).map(|(a, m)| r.sub(*a, *m)).collect();
        let mut msg = Vec::new();
        pack_ring(&d, bits, &mut msg);
        wire::send(ch, &msg)?;
        tami::online(ch, b, None)
    } else {
        let bytes = wire::recv(ch, step, x.len() * wire::ring_bytes(bits))?;
        let mut d = vec![0u64; x.len()];
        unpack_ring(step, &bytes, bits, &mut d)?;
        let y: Vec<u64> = x.v.iter().zip(&d).map(|(a, b)| r.add(*a, *b)).collect();
        tami::online(ch, b, Some(&y))
    }
}

/// A MaxPool layer: k×k windows with stride and zero-free padding (padded
/// positions are excluded from the window, i.e. act as −∞).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolShape {
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub k: usize,
    pub stride: usize,
    pub pad: usize,
}

impl PoolShape {
    pub fn out_dims(&self) -> Result<(usize, usize)> {
        if self.k == 0 || self.stride == 0 || self.h + 2 * self.pad < self.k || self.w + 2 * self.pad < self.k || self.pad >= self.k {
            return Err(invalid(format!("bad pooling shape {self:?}")));
        }
        Ok(((self.h + 2 * self.pad - self.k) / self.stride + 1, (self.w + 2 * self.pad - self.k) / self.stride + 1))
    }
    /// Input indices of each output's window, outputs in \[c\]\[oh\]\[ow\] order.
    pub fn windows(&self) -> Result<Vec<Vec<usize>>> {
        let (oh, ow) = self.out_dims()?;
        let mut res = Vec::with_capacity(self.c * oh * ow);
        for c in 0..self.c {
            for i in 0..oh {
                for j in 0..ow {
                    let mut win = Vec::new();
                    for di in 0..self.k {
                        for dj in 0..self.k {
                            let (r, s) = ((i * self.stride + di) as isize - self.pad as isize, (j * self.stride + dj) as isize - self.pad as isize);
                            if r >= 0 && s >= 0 && (r as usize) < self.h && (s as usize) < self.w {
                                win.push(c * self.h * self.w + r as usize * self.w + s as usize);
                            }
                        }
                    }
                    res.push(win);
                }
            }
        }
        Ok(res)
    }
    /// Plaintext reference (signed max).
    pub fn reference(&self, ring: Ring, x: &[u64]) -> Result<Vec<u64>> {
        Ok(self
            .windows()?
            .iter()
            .map(|w| w.iter().map(|&i| x[i]).reduce(|a, b| crate::share::reference::smax(ring, a, b)).expect("nonempty window"))
            .collect())
    }
}

#[allow(dead_code)]
fn _mask(bits: u32) -> u64 {
    mask(bits)
}
