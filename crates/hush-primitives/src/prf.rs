//! PRF: F_k(x) = AES_k(x) on 128-bit inputs (AES as a pseudorandom
//! permutation is a PRF up to the birthday bound, 2^64 queries).

use crate::aes::Aes128;
use crate::block::Block;

pub struct Prf {
    aes: Aes128,
}

impl Prf {
    pub fn new(key: Block) -> Self {
        Prf { aes: Aes128::new(key) }
    }
    pub fn eval(&self, x: Block) -> Block {
        self.aes.encrypt_block(x)
    }
    /// Evaluates on `xs` in place.
    pub fn eval_many(&self, xs: &mut [Block]) {
        self.aes.encrypt_blocks(xs)
    }
}
