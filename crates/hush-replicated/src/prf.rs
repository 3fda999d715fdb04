//! The PRF `F_k` used for correlated randomness and the PRG used by data
//! holders: AES-128 in counter mode, block `i` of the stream under `nonce`
//! being `AES_k(i as u64 || nonce as u64)` (little endian). This is the one
//! place that touches a block cipher: it uses `hush_primitives::aes`
//! (VAES / AES-NI chosen at run time, portable fallback).
//!
//! Streams are addressed in 64-bit words: word `2i` is the low half of block
//! `i`, word `2i+1` the high half.

use hush_primitives::aes::Aes128;
use hush_primitives::Block;

/// `F_k(nonce, ·)` as a stream of 64-bit words.
#[derive(Clone)]
pub struct Prf {
    cipher: Aes128,
}

impl Prf {
    pub fn new(key: [u8; 16]) -> Self {
        Prf { cipher: Aes128::new(Block(u128::from_le_bytes(key))) }
    }

    /// Writes words `[word_off, word_off + out.len())` of `self`'s stream
    /// XOR `other`'s stream, both under `nonce`, into `out`: exactly
    /// `fill_words(self) ⊕ fill_words(other)`, in one pass. The counter
    /// blocks are encrypted under both keys in a small stack buffer (L1),
    /// so `out` is written once and no second stream buffer exists (the
    /// Araki et al. `α` of every AND layer, [`crate::araki::PartyKeys::alpha`]).
    pub fn fill_words_xor(&self, other: &Prf, nonce: u64, word_off: u64, out: &mut [u64]) {
        const STEP: usize = 64;
        let mut out = out;
        let mut off = word_off;
        if out.is_empty() {
            return;
        }
        if off % 2 == 1 {
            let (a, b) = (self.block(nonce, off / 2), other.block(nonce, off / 2));
            out[0] = a[1] ^ b[1];
            out = &mut out[1..];
            off = off.wrapping_add(1);
        }
        let first = off / 2;
        let pairs = out.len() / 2;
        let (body, tail) = out.split_at_mut(pairs * 2);
        let mut t1 = [Block(0); STEP];
        let mut t2 = [Block(0); STEP];
        for (ci, words) in body.chunks_mut(2 * STEP).enumerate() {
            let n = words.len() / 2;
            let base = first.wrapping_add((ci * STEP) as u64);
            for i in 0..n {
                let c = Block(((nonce as u128) << 64) | base.wrapping_add(i as u64) as u128);
                t1[i] = c;
                t2[i] = c;
            }
            self.cipher.encrypt_blocks(&mut t1[..n]);
            other.cipher.encrypt_blocks(&mut t2[..n]);
            for ((w, x), y) in words.chunks_exact_mut(2).zip(&t1[..n]).zip(&t2[..n]) {
                let v = x.0 ^ y.0;
                w[0] = v as u64;
                w[1] = (v >> 64) as u64;
            }
        }
        if let Some(t) = tail.first_mut() {
            let blk = first.wrapping_add(pairs as u64);
            *t = self.block(nonce, blk)[0] ^ other.block(nonce, blk)[0];
        }
    }

    /// Writes words `[word_off, word_off + out.len())` of the stream under
    /// `nonce` into `out`.
    pub fn fill_words(&self, nonce: u64, word_off: u64, out: &mut [u64]) {
        if out.is_empty() {
            return;
        }
        let mut out = out;
        let mut off = word_off;
        // An odd start: take the high half of one block.
        if off % 2 == 1 {
            let b = self.block(nonce, off / 2);
            out[0] = b[1];
            out = &mut out[1..];
            off += 1;
        }
        let pairs = out.len() / 2;
        let (body, tail) = out.split_at_mut(pairs * 2);
        let first = off / 2;
        let ctr = |i: usize| Block(((nonce as u128) << 64) | first.wrapping_add(i as u64) as u128);
        if cfg!(target_endian = "little") && (body.as_ptr() as usize) % std::mem::align_of::<Block>() == 0 {
            // SAFETY: `body` holds `pairs` runs of two u64s, is aligned for
            // `Block` (checked) and `Block` is a transparent u128, for which
            // every bit pattern is valid; on a little-endian target the low
            // u64 of each u128 is the first word. The u64 borrow is not used
            // while the view lives.
            let blocks: &mut [Block] = unsafe { std::slice::from_raw_parts_mut(body.as_mut_ptr() as *mut Block, pairs) };
            for (i, b) in blocks.iter_mut().enumerate() {
                *b = ctr(i);
            }
            self.cipher.encrypt_blocks(blocks);
        } else {
            const STEP: usize = 256;
            let mut tmp = [Block(0); STEP];
            for (ci, words) in body.chunks_mut(2 * STEP).enumerate() {
                let n = words.len() / 2;
                for (i, b) in tmp[..n].iter_mut().enumerate() {
                    *b = ctr(ci * STEP + i);
                }
                self.cipher.encrypt_blocks(&mut tmp[..n]);
                for (w, b) in words.chunks_exact_mut(2).zip(&tmp[..n]) {
                    w[0] = b.0 as u64;
                    w[1] = (b.0 >> 64) as u64;
                }
            }
        }
        if let Some(t) = tail.first_mut() {
            *t = self.block(nonce, first + pairs as u64)[0];
        }
    }

    fn block(&self, nonce: u64, i: u64) -> [u64; 2] {
        let b = self.cipher.encrypt_block(Block(((nonce as u128) << 64) | i as u128));
        [b.0 as u64, (b.0 >> 64) as u64]
    }
}

/// A sequential PRG (AES-CTR under a random key).
pub struct Prg {
    prf: Prf,
    nonce: u64,
    pos: u64,
}

impl Prg {
    pub fn from_seed(seed: [u8; 16]) -> Self {
        Prg { prf: Prf::new(seed), nonce: 0, pos: 0 }
    }
    /// A PRG seeded from the operating system.
    pub fn from_os() -> crate::Result<Self> {
        Ok(Self::from_seed(os_seed()?))
    }
    pub fn fill_words(&mut self, out: &mut [u64]) {
        self.prf.fill_words(self.nonce, self.pos, out);
        self.pos += out.len() as u64;
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut w = [0u64; 1];
        self.fill_words(&mut w);
        w[0]
    }
    pub fn seed16(&mut self) -> [u8; 16] {
        let mut w = [0u64; 2];
        self.fill_words(&mut w);
        let mut s = [0u8; 16];
        s[..8].copy_from_slice(&w[0].to_le_bytes());
        s[8..].copy_from_slice(&w[1].to_le_bytes());
        s
    }
}

/// 16 bytes of OS randomness.
pub fn os_seed() -> crate::Result<[u8; 16]> {
    let mut s = [0u8; 16];
    getrandom::getrandom(&mut s).map_err(|e| crate::Error::Local(format!("OS randomness unavailable: {e}")))?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `fill_words_xor` is exactly the XOR of the two streams, at every
    /// offset parity and length (so the `α` of every AND, and hence every
    /// byte a party sends, is unchanged by the fused pass).
    #[test]
    fn fused_xor_matches_two_streams() {
        let (p, q) = (Prf::new([7; 16]), Prf::new([8; 16]));
        for nonce in [0u64, 3, u64::MAX] {
            for start in [0u64, 1, 2, 5, 127, 128, 129, 1 << 40] {
                for len in [0usize, 1, 2, 3, 127, 128, 129, 130, 255, 257, 300] {
                    let (mut a, mut b, mut f) = (vec![0u64; len], vec![0u64; len], vec![1u64; len]);
                    p.fill_words(nonce, start, &mut a);
                    q.fill_words(nonce, start, &mut b);
                    p.fill_words_xor(&q, nonce, start, &mut f);
                    let want: Vec<u64> = a.iter().zip(&b).map(|(x, y)| x ^ y).collect();
                    assert_eq!(f, want, "nonce {nonce} start {start} len {len}");
                }
            }
        }
    }

    #[test]
    fn offsets_agree() {
        let p = Prf::new([7; 16]);
        let mut all = vec![0u64; 41];
        p.fill_words(3, 0, &mut all);
        for start in 0..10 {
            for len in 0..20 {
                let mut part = vec![0u64; len];
                p.fill_words(3, start as u64, &mut part);
                assert_eq!(&part[..], &all[start..start + len]);
            }
        }
        let mut other = vec![0u64; 41];
        p.fill_words(4, 0, &mut other);
        assert_ne!(all, other);
    }
}
