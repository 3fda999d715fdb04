//! Correlation-robust hashes from fixed-key AES.
//!
//! * [`cr_hash`]: H(x) = π(x) ⊕ x (Matyas–Meyer–Oseas with a fixed key;
//!   correlation robust in the ideal-permutation model, GKWY20 §5).
//! * [`tccr_hash`]: the tweakable circular correlation-robust hash of
//!   Guo–Katz–Wang–Yu, "Efficient and Secure Multiparty Computation from
//!   Fixed-Key Block Ciphers" (S&P 2020), §7.4:
//!   H(i, x) = π(π(x) ⊕ i) ⊕ π(x). hush derives random OTs from COTs with
//!   it (m_0 = H(i, q_i), m_1 = H(i, q_i ⊕ Δ)); each (i) must be used once per Δ.

use crate::aes::fixed_key;
use crate::block::Block;

/// H(x) = π(x) ⊕ x.
pub fn cr_hash(x: Block) -> Block {
    fixed_key().encrypt_block(x) ^ x
}

/// H(i, x) = π(π(x) ⊕ i) ⊕ π(x).
pub fn tccr_hash(tweak: Block, x: Block) -> Block {
    let p = fixed_key();
    let a = p.encrypt_block(x);
    p.encrypt_block(a ^ tweak) ^ a
}

/// Batch TCCR with consecutive tweaks: out\[j\] = H(tweak0 + j, xs\[j\]).
pub fn tccr_hash_many(tweak0: u128, xs: &[Block], out: &mut [Block]) {
    assert_eq!(xs.len(), out.len());
    let p = fixed_key();
    let mut a = xs.to_vec();
    p.encrypt_blocks(&mut a);
    for (j, (o, &ai)) in out.iter_mut().zip(&a).enumerate() {
        *o = ai ^ Block(tweak0.wrapping_add(j as u128));
    }
    p.encrypt_blocks(out);
    for (o, ai) in out.iter_mut().zip(&a) {
        *o ^= *ai;
    }
}

/// Batch TCCR with explicit tweaks.
pub fn tccr_hash_tweaks(tweaks: &[Block], xs: &[Block], out: &mut [Block]) {
    assert_eq!(xs.len(), out.len());
    assert_eq!(tweaks.len(), out.len());
    let p = fixed_key();
    let mut a = xs.to_vec();
    p.encrypt_blocks(&mut a);
    for ((o, &ai), &t) in out.iter_mut().zip(&a).zip(tweaks) {
        *o = ai ^ t;
    }
    p.encrypt_blocks(out);
    for (o, ai) in out.iter_mut().zip(&a) {
        *o ^= *ai;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn batch_matches_single() {
        let xs: Vec<Block> = (0..50u128).map(|i| Block(i * 0x1234567)).collect();
        let mut out = vec![Block::ZERO; 50];
        tccr_hash_many(1000, &xs, &mut out);
        for j in 0..50 {
            assert_eq!(out[j], tccr_hash(Block(1000 + j as u128), xs[j]));
        }
        assert_ne!(tccr_hash(Block(1), xs[3]), tccr_hash(Block(2), xs[3]));
        assert_ne!(cr_hash(Block(5)), Block(5));
    }
}
