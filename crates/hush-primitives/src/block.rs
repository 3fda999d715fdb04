//! 128-bit blocks: the unit of AES, OT keys and COT correlations.

use std::ops::{BitAnd, BitAndAssign, BitXor, BitXorAssign};
use zeroize::Zeroize;

/// A 128-bit block. Byte order is little endian: `Block(x).to_bytes()` is
/// `x.to_le_bytes()`, which is also the byte string AES sees.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(transparent)]
pub struct Block(pub u128);

impl Block {
    pub const ZERO: Block = Block(0);
    pub const ONES: Block = Block(u128::MAX);

    pub fn from_bytes(b: [u8; 16]) -> Self {
        Block(u128::from_le_bytes(b))
    }
    pub fn to_bytes(self) -> [u8; 16] {
        self.0.to_le_bytes()
    }
    /// Reads a block from the first 16 bytes of `b` (panics if shorter;
    /// callers check lengths first).
    pub fn from_slice(b: &[u8]) -> Self {
        let mut a = [0u8; 16];
        a.copy_from_slice(&b[..16]);
        Self::from_bytes(a)
    }
    /// Least significant bit.
    pub fn lsb(self) -> bool {
        self.0 & 1 == 1
    }
    /// `self` if `bit` else zero, without a branch.
    pub fn and_bit(self, bit: bool) -> Self {
        Block(self.0 & (0u128.wrapping_sub(bit as u128)))
    }
    pub fn from_u64s(lo: u64, hi: u64) -> Self {
        Block((hi as u128) << 64 | lo as u128)
    }
    pub fn lo(self) -> u64 {
        self.0 as u64
    }
    pub fn hi(self) -> u64 {
        (self.0 >> 64) as u64
    }

    /// Serialises a slice of blocks (little endian, 16 bytes each).
    pub fn slice_to_bytes(bs: &[Block]) -> Vec<u8> {
        let mut v = Vec::with_capacity(bs.len() * 16);
        for b in bs {
            v.extend_from_slice(&b.to_bytes());
        }
        v
    }
    /// Views a slice of blocks as bytes (no copy).
    pub fn as_bytes(bs: &[Block]) -> &[u8] {
        // SAFETY: Block is repr(transparent) over u128 (no padding, any bit
        // pattern valid); the byte view covers exactly the same memory.
        unsafe { std::slice::from_raw_parts(bs.as_ptr() as *const u8, std::mem::size_of_val(bs)) }
    }
    /// Views a mutable slice of blocks as bytes (no copy).
    pub fn as_bytes_mut(bs: &mut [Block]) -> &mut [u8] {
        // SAFETY: as above; every byte pattern is a valid u128.
        unsafe { std::slice::from_raw_parts_mut(bs.as_mut_ptr() as *mut u8, std::mem::size_of_val(bs)) }
    }
    /// Parses bytes into blocks; `None` unless the length is a multiple of 16.
    pub fn vec_from_bytes(b: &[u8]) -> Option<Vec<Block>> {
        if b.len() % 16 != 0 {
            return None;
        }
        Some(b.chunks_exact(16).map(Block::from_slice).collect())
    }
}

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Block({:032x})", self.0)
    }
}

impl BitXor for Block {
    type Output = Block;
    #[inline(always)]
    fn bitxor(self, o: Block) -> Block {
        Block(self.0 ^ o.0)
    }
}
impl BitXorAssign for Block {
    #[inline(always)]
    fn bitxor_assign(&mut self, o: Block) {
        self.0 ^= o.0
    }
}
impl BitAnd for Block {
    type Output = Block;
    #[inline(always)]
    fn bitand(self, o: Block) -> Block {
        Block(self.0 & o.0)
    }
}
impl BitAndAssign for Block {
    #[inline(always)]
    fn bitand_assign(&mut self, o: Block) {
        self.0 &= o.0
    }
}
impl From<u128> for Block {
    fn from(x: u128) -> Self {
        Block(x)
    }
}
impl Zeroize for Block {
    fn zeroize(&mut self) {
        self.0.zeroize()
    }
}

/// XORs `src` into `dst` element-wise (lengths must match).
#[inline]
pub fn xor_blocks_inplace(dst: &mut [Block], src: &[Block]) {
    assert_eq!(dst.len(), src.len());
    for (d, s) in dst.iter_mut().zip(src) {
        d.0 ^= s.0;
    }
}
