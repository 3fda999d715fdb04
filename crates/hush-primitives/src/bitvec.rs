//! Bit-packed Boolean vectors: 64 bits per word, bit i in word i/64 at
//! position i%64. Bits past `len` in the last word are kept zero.

use crate::prg::Prg;
use zeroize::Zeroize;

#[derive(Clone, PartialEq, Eq, Default, Debug)]
pub struct BitVec {
    words: Vec<u64>,
    len: usize,
}

impl BitVec {
    pub fn zeros(len: usize) -> Self {
        BitVec { words: vec![0; len.div_ceil(64)], len }
    }
    pub fn random(len: usize, prg: &mut Prg) -> Self {
        let mut v = Self::zeros(len);
        let bytes = v.words.len() * 8;
        let mut buf = vec![0u8; bytes];
        prg.fill_bytes(&mut buf);
        for (w, c) in v.words.iter_mut().zip(buf.chunks_exact(8)) {
            *w = u64::from_le_bytes(c.try_into().unwrap());
        }
        buf.zeroize();
        v.clear_tail();
        v
    }
    pub fn from_bools(b: &[bool]) -> Self {
        let mut v = Self::zeros(b.len());
        for (i, &x) in b.iter().enumerate() {
            v.set(i, x);
        }
        v
    }
    pub fn to_bools(&self) -> Vec<bool> {
        (0..self.len).map(|i| self.get(i)).collect()
    }
    /// From little-endian packed bytes (bit i = byte i/8, bit i%8).
    /// Returns None if `bytes` is not exactly ceil(len/8) long.
    pub fn from_bytes(bytes: &[u8], len: usize) -> Option<Self> {
        if bytes.len() != len.div_ceil(8) {
            return None;
        }
        let mut v = Self::zeros(len);
        for (i, &b) in bytes.iter().enumerate() {
            v.words[i / 8] |= (b as u64) << (8 * (i % 8));
        }
        v.clear_tail();
        Some(v)
    }
    pub fn to_bytes(&self) -> Vec<u8> {
        let n = self.len.div_ceil(8);
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            out.push((self.words[i / 8] >> (8 * (i % 8))) as u8);
        }
        out
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    #[inline]
    pub fn get(&self, i: usize) -> bool {
        assert!(i < self.len);
        (self.words[i / 64] >> (i % 64)) & 1 == 1
    }
    #[inline]
    pub fn set(&mut self, i: usize, b: bool) {
        assert!(i < self.len);
        let m = 1u64 << (i % 64);
        if b {
            self.words[i / 64] |= m
        } else {
            self.words[i / 64] &= !m
        }
    }
    pub fn words(&self) -> &[u64] {
        &self.words
    }
    /// Mutable words; callers must keep bits past `len` zero (see
    /// [`BitVec::clear_tail`]).
    pub fn words_mut(&mut self) -> &mut [u64] {
        &mut self.words
    }
    pub fn clear_tail(&mut self) {
        let r = self.len % 64;
        if r != 0 {
            if let Some(w) = self.words.last_mut() {
                *w &= (1u64 << r) - 1;
            }
        }
    }
    pub fn xor_assign(&mut self, o: &BitVec) {
        assert_eq!(self.len, o.len);
        for (a, b) in self.words.iter_mut().zip(&o.words) {
            *a ^= b;
        }
    }
    pub fn and_assign(&mut self, o: &BitVec) {
        assert_eq!(self.len, o.len);
        for (a, b) in self.words.iter_mut().zip(&o.words) {
            *a &= b;
        }
    }
    pub fn count_ones(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }
    /// Bits [start, start+len) as a new vector.
    pub fn slice(&self, start: usize, len: usize) -> BitVec {
        let mut v = BitVec::zeros(len);
        for i in 0..len {
            v.set(i, self.get(start + i));
        }
        v
    }
}

impl Zeroize for BitVec {
    fn zeroize(&mut self) {
        self.words.zeroize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Block;
    #[test]
    fn roundtrips() {
        let mut p = Prg::new(Block(9));
        for n in [0, 1, 63, 64, 65, 1000] {
            let v = BitVec::random(n, &mut p);
            assert_eq!(BitVec::from_bytes(&v.to_bytes(), n).unwrap(), v);
            assert_eq!(BitVec::from_bools(&v.to_bools()), v);
        }
        assert!(BitVec::from_bytes(&[0u8; 3], 30).is_none());
    }
}
