//! Vectors over the ring Z_2^ℓ (1 ≤ ℓ ≤ 64), stored one u64 per element,
//! always reduced (bits at and above ℓ are zero).

use crate::prg::Prg;
use zeroize::Zeroize;

/// The ring Z_2^ℓ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ring {
    bits: u32,
}

impl Ring {
    /// `None` unless 1 ≤ bits ≤ 64.
    pub fn new(bits: u32) -> Option<Self> {
        (1..=64).contains(&bits).then_some(Ring { bits })
    }
    pub fn bits(self) -> u32 {
        self.bits
    }
    #[inline]
    pub fn mask(self) -> u64 {
        if self.bits == 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        }
    }
    #[inline]
    pub fn reduce(self, x: u64) -> u64 {
        x & self.mask()
    }
    #[inline]
    pub fn add(self, a: u64, b: u64) -> u64 {
        a.wrapping_add(b) & self.mask()
    }
    #[inline]
    pub fn sub(self, a: u64, b: u64) -> u64 {
        a.wrapping_sub(b) & self.mask()
    }
    #[inline]
    pub fn neg(self, a: u64) -> u64 {
        0u64.wrapping_sub(a) & self.mask()
    }
    #[inline]
    pub fn mul(self, a: u64, b: u64) -> u64 {
        a.wrapping_mul(b) & self.mask()
    }
    /// Two's-complement signed value of a ring element.
    #[inline]
    pub fn to_signed(self, x: u64) -> i64 {
        let s = 64 - self.bits;
        ((x << s) as i64) >> s
    }
    #[inline]
    pub fn from_signed(self, x: i64) -> u64 {
        (x as u64) & self.mask()
    }
    /// Most significant bit (the sign).
    #[inline]
    pub fn msb(self, x: u64) -> bool {
        (x >> (self.bits - 1)) & 1 == 1
    }
}

/// A vector of ring elements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingVec {
    pub ring: Ring,
    pub data: Vec<u64>,
}

impl RingVec {
    pub fn zeros(ring: Ring, n: usize) -> Self {
        RingVec { ring, data: vec![0; n] }
    }
    pub fn from_vec(ring: Ring, mut data: Vec<u64>) -> Self {
        for x in &mut data {
            *x = ring.reduce(*x);
        }
        RingVec { ring, data }
    }
    pub fn random(ring: Ring, n: usize, prg: &mut Prg) -> Self {
        let data = (0..n).map(|_| ring.reduce(prg.next_u64())).collect();
        RingVec { ring, data }
    }
    pub fn len(&self) -> usize {
        self.data.len()
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub fn add_assign(&mut self, o: &RingVec) {
        assert_eq!(self.len(), o.len());
        let r = self.ring;
        for (a, b) in self.data.iter_mut().zip(&o.data) {
            *a = r.add(*a, *b);
        }
    }
    pub fn sub_assign(&mut self, o: &RingVec) {
        assert_eq!(self.len(), o.len());
        let r = self.ring;
        for (a, b) in self.data.iter_mut().zip(&o.data) {
            *a = r.sub(*a, *b);
        }
    }
    pub fn neg_assign(&mut self) {
        let r = self.ring;
        for a in &mut self.data {
            *a = r.neg(*a);
        }
    }
    pub fn scale(&mut self, c: u64) {
        let r = self.ring;
        for a in &mut self.data {
            *a = r.mul(*a, c);
        }
    }
    /// Element-wise product.
    pub fn mul_assign(&mut self, o: &RingVec) {
        assert_eq!(self.len(), o.len());
        let r = self.ring;
        for (a, b) in self.data.iter_mut().zip(&o.data) {
            *a = r.mul(*a, *b);
        }
    }
    /// Serialises with ceil(ℓ/8) bytes per element (little endian).
    pub fn to_bytes(&self) -> Vec<u8> {
        let w = (self.ring.bits as usize).div_ceil(8);
        let mut out = Vec::with_capacity(w * self.len());
        for &x in &self.data {
            out.extend_from_slice(&x.to_le_bytes()[..w]);
        }
        out
    }
    /// Parses `n` elements; `None` on a wrong length or unreduced element.
    pub fn from_bytes(ring: Ring, n: usize, b: &[u8]) -> Option<Self> {
        let w = (ring.bits as usize).div_ceil(8);
        if b.len() != w.checked_mul(n)? {
            return None;
        }
        let mut data = Vec::with_capacity(n);
        for c in b.chunks_exact(w) {
            let mut a = [0u8; 8];
            a[..w].copy_from_slice(c);
            let x = u64::from_le_bytes(a);
            if x != ring.reduce(x) {
                return None;
            }
            data.push(x);
        }
        Some(RingVec { ring, data })
    }
}

impl Zeroize for RingVec {
    fn zeroize(&mut self) {
        self.data.zeroize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Block;
    #[test]
    fn ring_ops_and_encoding() {
        for bits in [1u32, 8, 16, 32, 37, 63, 64] {
            let r = Ring::new(bits).unwrap();
            let mut p = Prg::new(Block(bits as u128));
            let a = RingVec::random(r, 100, &mut p);
            let b = RingVec::random(r, 100, &mut p);
            let mut c = a.clone();
            c.add_assign(&b);
            c.sub_assign(&b);
            assert_eq!(c, a);
            assert_eq!(RingVec::from_bytes(r, 100, &a.to_bytes()).unwrap(), a);
            assert_eq!(r.to_signed(r.from_signed(-1)), -1);
            assert_eq!(r.add(r.mask(), 1), 0);
        }
        assert!(Ring::new(0).is_none() && Ring::new(65).is_none());
        let r = Ring::new(8).unwrap();
        assert!(RingVec::from_bytes(r, 2, &[1, 2, 3]).is_none());
        let r = Ring::new(4).unwrap();
        assert!(RingVec::from_bytes(r, 1, &[0x10]).is_none());
    }
}
