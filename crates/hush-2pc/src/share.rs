//! Two-party shares.
//!
//! * [`ArithShare`]: x = x_0 + x_1 mod 2^ℓ, one u64 per element (reduced).
//! * [`BoolShare`]: b = b_0 ⊕ b_1, 64 elements per word, lanes past `n`
//!   kept zero.
//!
//! Local operations need no communication; opening is one simultaneous
//! exchange (one round). [`FixedPoint`] is the signed fixed-point encoding
//! (two's complement in Z_2^ℓ with `frac` fraction bits).
//!
//! **View.** Local operations send nothing; opening reveals the value
//! being opened (the protocol's output) and nothing else: the peer's share
//! is determined by the value and one's own share. Fresh sharings use a
//! uniform mask per element.

use crate::wire::{self, mask, pack_ring, pack_words, tail, unpack_ring, unpack_words};
use crate::{invalid, Party, Result};
use hush_primitives::{Prg, Ring};
use hush_transport::Channel;
use zeroize::Zeroize;

/// One party's arithmetic share vector over Z_2^ℓ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArithShare {
    pub ring: Ring,
    pub v: Vec<u64>,
}

impl Drop for ArithShare {
    fn drop(&mut self) {
        self.v.zeroize();
    }
}

impl ArithShare {
    pub fn new(ring: Ring, mut v: Vec<u64>) -> Self {
        let m = ring.mask();
        v.iter_mut().for_each(|x| *x &= m);
        ArithShare { ring, v }
    }
    pub fn zeros(ring: Ring, n: usize) -> Self {
        ArithShare { ring, v: vec![0; n] }
    }
    pub fn len(&self) -> usize {
        self.v.len()
    }
    pub fn is_empty(&self) -> bool {
        self.v.is_empty()
    }
    pub fn add(&self, o: &ArithShare) -> ArithShare {
        let r = self.ring;
        ArithShare { ring: r, v: self.v.iter().zip(&o.v).map(|(a, b)| r.add(*a, *b)).collect() }
    }
    pub fn sub(&self, o: &ArithShare) -> ArithShare {
        let r = self.ring;
        ArithShare { ring: r, v: self.v.iter().zip(&o.v).map(|(a, b)| r.sub(*a, *b)).collect() }
    }
    pub fn neg(&self) -> ArithShare {
        let r = self.ring;
        ArithShare { ring: r, v: self.v.iter().map(|a| r.neg(*a)).collect() }
    }
    /// Multiplies by a public constant.
    pub fn scale(&self, c: u64) -> ArithShare {
        let r = self.ring;
        ArithShare { ring: r, v: self.v.iter().map(|a| r.mul(*a, c)).collect() }
    }
    /// Adds a public vector (party 0 only adds; party 1 keeps its share).
    pub fn add_public(&self, party: Party, c: &[u64]) -> ArithShare {
        let r = self.ring;
        if party != 0 {
            return self.clone();
        }
        ArithShare { ring: r, v: self.v.iter().zip(c).map(|(a, b)| r.add(*a, *b)).collect() }
    }
    /// Element-wise product with a public vector.
    pub fn mul_public(&self, c: &[u64]) -> ArithShare {
        let r = self.ring;
        ArithShare { ring: r, v: self.v.iter().zip(c).map(|(a, b)| r.mul(*a, *b)).collect() }
    }
}

/// One party's bit-packed XOR share vector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoolShare {
    pub n: usize,
    pub words: Vec<u64>,
}

impl Drop for BoolShare {
    fn drop(&mut self) {
        self.words.zeroize();
    }
}

impl BoolShare {
    pub fn new(n: usize, mut words: Vec<u64>) -> Self {
        words.resize(n.div_ceil(64), 0);
        if let Some(l) = words.last_mut() {
            *l &= tail(n);
        }
        BoolShare { n, words }
    }
    pub fn zeros(n: usize) -> Self {
        BoolShare { n, words: vec![0; n.div_ceil(64)] }
    }
    pub fn from_bools(b: &[bool]) -> Self {
        let mut s = Self::zeros(b.len());
        for (i, &x) in b.iter().enumerate() {
            s.words[i / 64] |= (x as u64) << (i % 64);
        }
        s
    }
    #[inline]
    pub fn get(&self, i: usize) -> bool {
        (self.words[i / 64] >> (i % 64)) & 1 == 1
    }
    pub fn to_bools(&self) -> Vec<bool> {
        (0..self.n).map(|i| self.get(i)).collect()
    }
    pub fn xor(&self, o: &BoolShare) -> BoolShare {
        BoolShare { n: self.n, words: self.words.iter().zip(&o.words).map(|(a, b)| a ^ b).collect() }
    }
    /// XOR with a public bit vector (party 0 only).
    pub fn xor_public(&self, party: Party, c: &BoolShare) -> BoolShare {
        if party == 0 {
            self.xor(c)
        } else {
            self.clone()
        }
    }
    /// NOT (party 0 flips).
    pub fn not(&self, party: Party) -> BoolShare {
        let mut s = self.clone();
        if party == 0 {
            s.words.iter_mut().for_each(|w| *w = !*w);
            if let Some(l) = s.words.last_mut() {
                *l &= tail(self.n);
            }
        }
        s
    }
}

/// Opens arithmetic shares (one simultaneous exchange).
pub fn open_arith(ch: &mut dyn Channel, x: &ArithShare) -> Result<Vec<u64>> {
    let mut b = Vec::new();
    pack_ring(&x.v, x.ring.bits(), &mut b);
    let peer = wire::exchange(ch, "open arithmetic shares", &b)?;
    let mut o = vec![0u64; x.len()];
    unpack_ring("open arithmetic shares", &peer, x.ring.bits(), &mut o)?;
    let r = x.ring;
    Ok(x.v.iter().zip(&o).map(|(a, b)| r.add(*a, *b)).collect())
}

/// Opens XOR shares (one simultaneous exchange).
pub fn open_bool(ch: &mut dyn Channel, x: &BoolShare) -> Result<BoolShare> {
    let mut b = Vec::new();
    pack_words(&x.words, &mut b);
    let peer = wire::exchange(ch, "open Boolean shares", &b)?;
    let mut o = vec![0u64; x.words.len()];
    unpack_words("open Boolean shares", &peer, &mut o)?;
    wire::check_tail("open Boolean shares", &o, x.n, 1)?;
    Ok(BoolShare { n: x.n, words: x.words.iter().zip(&o).map(|(a, b)| a ^ b).collect() })
}

/// Splits plaintext values into two random shares (tests, input sharing by a
/// party that knows the value).
pub fn share_arith(ring: Ring, x: &[u64], prg: &mut Prg) -> (ArithShare, ArithShare) {
    let m = ring.mask();
    let s0: Vec<u64> = x.iter().map(|_| prg.next_u64() & m).collect();
    let s1 = x.iter().zip(&s0).map(|(a, b)| ring.sub(*a, *b)).collect();
    (ArithShare { ring, v: s0 }, ArithShare { ring, v: s1 })
}

pub fn share_bool(b: &BoolShare, prg: &mut Prg) -> (BoolShare, BoolShare) {
    let r: Vec<u64> = b.words.iter().map(|_| prg.next_u64()).collect();
    let s0 = BoolShare::new(b.n, r);
    let s1 = b.xor(&s0);
    (s0, s1)
}

/// Signed fixed point in Z_2^ℓ: value v ↦ round(v · 2^frac) mod 2^ℓ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedPoint {
    pub ring: Ring,
    pub frac: u32,
}

impl FixedPoint {
    pub fn new(bits: u32, frac: u32) -> Result<Self> {
        let ring = Ring::new(bits).ok_or_else(|| invalid(format!("ring width {bits} not in 1..=64")))?;
        if frac >= bits {
            return Err(invalid(format!("{frac} fraction bits do not fit a {bits}-bit ring")));
        }
        Ok(FixedPoint { ring, frac })
    }
    /// Encodes (saturating at the ring's signed range).
    pub fn encode(&self, v: f64) -> u64 {
        let bits = self.ring.bits();
        let lim = if bits == 64 { i64::MAX as f64 } else { ((1i64 << (bits - 1)) - 1) as f64 };
        let s = (v * (1u64 << self.frac) as f64).round().clamp(-lim - 1.0, lim);
        self.ring.from_signed(s as i64)
    }
    pub fn decode(&self, x: u64) -> f64 {
        self.ring.to_signed(x) as f64 / (1u64 << self.frac) as f64
    }
    /// The plaintext reference of truncation: ⌊x / 2^f⌋ on the signed value.
    pub fn trunc_ref(ring: Ring, x: u64, f: u32) -> u64 {
        ring.from_signed(ring.to_signed(x) >> f)
    }
}

/// Plaintext references used by tests and benchmarks.
pub mod reference {
    use hush_primitives::Ring;
    pub fn drelu(r: Ring, x: u64) -> bool {
        !r.msb(x)
    }
    pub fn relu(r: Ring, x: u64) -> u64 {
        if r.msb(x) {
            0
        } else {
            x
        }
    }
    pub fn smax(r: Ring, a: u64, b: u64) -> u64 {
        if r.to_signed(a) >= r.to_signed(b) {
            a
        } else {
            b
        }
    }
    pub fn mask(bits: u32) -> u64 {
        super::mask(bits)
    }
}
