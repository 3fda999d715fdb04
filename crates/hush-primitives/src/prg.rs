//! PRG: AES-128 in counter mode keyed by a seed.

use crate::aes::Aes128;
use crate::block::Block;

/// Blocks produced per internal refill for the scalar helpers.
const BUF: usize = 64;

/// A seeded pseudorandom generator: block i of the stream is
/// AES_seed(nonce‖i). Deterministic, so all randomness in hush is
/// injectable from a seed (tests, transcripts).
pub struct Prg {
    aes: Aes128,
    nonce: u64,
    ctr: u64,
    buf: [Block; BUF],
    pos: usize,
}

impl Prg {
    pub fn new(seed: Block) -> Self {
        Self::with_nonce(seed, 0)
    }
    /// Independent streams from one seed, distinguished by `nonce`.
    pub fn with_nonce(seed: Block, nonce: u64) -> Self {
        Prg { aes: Aes128::new(seed), nonce, ctr: 0, buf: [Block::ZERO; BUF], pos: BUF }
    }
    /// The stream `nonce` of `seed` from block `block` on: the same blocks
    /// as [`Prg::with_nonce`]'s stream after `block` blocks, without
    /// computing them (counter mode), so that parts of one stream can be
    /// produced independently (in parallel).
    pub fn with_nonce_at(seed: Block, nonce: u64, block: u64) -> Self {
        Prg { aes: Aes128::new(seed), nonce, ctr: block, buf: [Block::ZERO; BUF], pos: BUF }
    }
    /// A PRG seeded from the operating system.
    pub fn from_os() -> Self {
        Self::new(crate::rand::os_seed())
    }

    /// Fills `out` with the next stream blocks.
    pub fn fill_blocks(&mut self, out: &mut [Block]) {
        self.aes.ctr_blocks(self.nonce, self.ctr, out);
        self.ctr += out.len() as u64;
    }

    /// Fills `out` with stream bytes: the whole blocks straight from the
    /// counter-mode kernel (into the caller's memory, aligned or not; no
    /// staging copy), a partial tail from the next buffered block.
    pub fn fill_bytes(&mut self, out: &mut [u8]) {
        let full = out.len() / 16;
        // SAFETY: every byte pattern is a valid Block (repr(transparent) u128).
        let (pre, mid, _) = unsafe { out[..full * 16].align_to_mut::<Block>() };
        if pre.is_empty() {
            self.fill_blocks(mid);
        } else {
            // Misaligned: through a stack buffer, 64 blocks at a time.
            let mut tmp = [Block::ZERO; BUF];
            let mut done = 0;
            while done < full {
                let m = (full - done).min(BUF);
                self.fill_blocks(&mut tmp[..m]);
                out[done * 16..(done + m) * 16].copy_from_slice(Block::as_bytes(&tmp[..m]));
                done += m;
            }
            use zeroize::Zeroize;
            tmp.zeroize();
        }
        let rest = out.len() - full * 16;
        if rest > 0 {
            let b = self.random_block().to_bytes();
            out[full * 16..].copy_from_slice(&b[..rest]);
        }
    }

    pub fn random_block(&mut self) -> Block {
        if self.pos == BUF {
            let mut b = [Block::ZERO; BUF];
            self.fill_blocks(&mut b);
            self.buf = b;
            self.pos = 0;
        }
        let b = self.buf[self.pos];
        self.buf[self.pos] = Block::ZERO;
        self.pos += 1;
        b
    }
    pub fn next_u64(&mut self) -> u64 {
        self.random_block().lo()
    }
    pub fn random_bool(&mut self) -> bool {
        self.random_block().lsb()
    }
    /// Uniform in [0, bound) by rejection (bound > 0).
    pub fn gen_below(&mut self, bound: u64) -> u64 {
        assert!(bound > 0);
        let zone = u64::MAX - (u64::MAX % bound);
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % bound;
            }
        }
    }
}

impl Drop for Prg {
    fn drop(&mut self) {
        use zeroize::Zeroize;
        self.buf.zeroize();
    }
}

impl rand_core::RngCore for Prg {
    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
    fn next_u64(&mut self) -> u64 {
        Prg::next_u64(self)
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        Prg::fill_bytes(self, dest)
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        Prg::fill_bytes(self, dest);
        Ok(())
    }
}

/// A PRG keyed from a secret seed is a cryptographic RNG.
impl rand_core::CryptoRng for Prg {}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn deterministic_and_consistent() {
        let mut a = Prg::new(Block(42));
        let mut b = Prg::new(Block(42));
        let mut x = vec![Block::ZERO; 100];
        a.fill_blocks(&mut x);
        let mut y = vec![0u8; 1600];
        b.fill_bytes(&mut y);
        assert_eq!(Block::as_bytes(&x), &y[..]);
        let mut c = Prg::with_nonce(Block(42), 1);
        assert_ne!(c.random_block(), x[0]);
        assert!(Prg::new(Block(1)).gen_below(7) < 7);
    }
}
