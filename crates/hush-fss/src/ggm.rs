//! The PRG behind every FSS tree: fixed-key AES in Matyas–Meyer–Oseas mode.
//!
//! Let π = AES-128 under the public key [`FSS_AES_KEY`] (a fixed-key
//! permutation, separate from `hush_primitives::aes::FIXED_KEY` for domain
//! separation). The hash with tweak c is
//!
//! ```text
//!   H_c(s) = π(s ⊕ c) ⊕ s ⊕ c          (MMO with a fixed key)
//! ```
//!
//! and the length-expanding PRG G of the DCF (BCGGIKR21 §3) is, for a seed s
//! and a direction d ∈ {0 = left, 1 = right},
//!
//! * **unpacked** (output group wider than one bit): the child block is
//!   B = H_d(s); the control bit t = lsb(B); the child seed is B with its lsb
//!   cleared (127 bits); the value block is W = H_{2+d}(s), and
//!   Convert(W) (BCGGIKR21's map from {0,1}^λ to the output group) takes
//!   lane 0 from the low 64 bits of W and lane 1 from the high 64 bits, each
//!   reduced mod 2^m — one AES call for the seed and one for the value;
//! * **packed** (the output group is Z_2, one lane): B = H_d(s) gives t =
//!   bit 0, the one-bit value v = bit 1, and the child seed is B with both
//!   bits cleared (126 bits) — one AES call per level.
//!
//! Evaluation needs only the child on the input's path, so an n-level
//! unpacked DCF costs 2n AES blocks per evaluation, plus one for the leaf of
//! a two-lane key; a packed DCF with early termination (see [`crate::dcf`])
//! costs n − ν + 1.
//!
//! The leaf value of an unpacked one-lane key is Convert'(s) = bits 64..127
//! of the final seed (uniform: those bits are untouched by the bit
//! clearing); a two-lane key (m up to 64 per lane) needs 128 bits, so its
//! leaf is Convert(H_4(s)). A packed key's leaf is the 2^ν-entry one-bit
//! table H_4(s) (entry j = bit j, ν ≤ 7).
//!
//! The tweaks 0..4 are distinct and the seeds have their low two bits clear
//! in packed mode, so no two hash inputs derived from one seed coincide.

use hush_primitives::aes::Aes128;
use hush_primitives::Block;
use std::sync::OnceLock;

/// The public key of the FSS fixed-key permutation: the ASCII bytes
/// "hush-fss-ggm-v1\0" read as a little-endian u128 (nothing up the sleeve).
pub const FSS_AES_KEY: Block = Block(u128::from_le_bytes(*b"hush-fss-ggm-v1\0"));

/// Tweak of the value block: H_{TWEAK_V + d}.
pub(crate) const TWEAK_V: u128 = 2;
/// Tweak of the leaf value block of two-lane keys.
pub(crate) const TWEAK_LEAF: u128 = 4;

/// π, the FSS fixed-key permutation.
pub fn pi() -> &'static Aes128 {
    static PI: OnceLock<Aes128> = OnceLock::new();
    PI.get_or_init(|| Aes128::new(FSS_AES_KEY))
}

/// Mask of the seed bits: lsb cleared (unpacked) or two low bits (packed).
#[inline]
pub(crate) fn seed_mask(packed: bool) -> u128 {
    if packed {
        !3u128
    } else {
        !1u128
    }
}

/// MMO in place: `inp[i]` holds s ⊕ c on entry and H_c(s) on exit.
#[inline]
pub(crate) fn mmo_inplace(blocks: &mut [Block], scratch: &mut [Block]) {
    debug_assert!(scratch.len() >= blocks.len());
    let scratch = &mut scratch[..blocks.len()];
    scratch.copy_from_slice(blocks);
    pi().encrypt_blocks(blocks);
    for (b, s) in blocks.iter_mut().zip(scratch.iter()) {
        b.0 ^= s.0;
    }
}

/// H_c(s) for one block (key generation and scalar evaluation).
#[inline]
pub(crate) fn mmo1(s: Block, tweak: u128) -> Block {
    let x = Block(s.0 ^ tweak);
    Block(pi().encrypt_block(x).0 ^ x.0)
}

/// One child of a seed: (seed, control bit, Convert lanes (unreduced)).
#[derive(Clone, Copy)]
pub(crate) struct Child {
    pub seed: u128,
    pub t: u64,
    pub v: [u64; 2],
}

/// Splits the child block B = H_d(s) (and, unpacked, W = H_{2+d}(s)).
#[inline(always)]
pub(crate) fn split_child(b: u128, w: u128, packed: bool) -> Child {
    if packed {
        Child { seed: b & !3, t: (b & 1) as u64, v: [((b >> 1) & 1) as u64, 0] }
    } else {
        Child { seed: b & !1, t: (b & 1) as u64, v: [w as u64, (w >> 64) as u64] }
    }
}

/// Leaf lanes of a one-lane key from the final seed (unreduced).
#[inline(always)]
pub(crate) fn leaf_one_lane(seed: u128) -> u64 {
    (seed >> 64) as u64
}

/// Expands both children of `seeds` (key generation: all four of two
/// parties at once, one AES call).
pub(crate) fn expand_both(seeds: [u128; 2], packed: bool) -> [[Child; 2]; 2] {
    let mut blk = [Block::ZERO; 8];
    let per = if packed { 2 } else { 4 };
    for b in 0..2 {
        for d in 0..2u128 {
            blk[b * per + d as usize] = Block(seeds[b] ^ d);
            if !packed {
                blk[b * per + 2 + d as usize] = Block(seeds[b] ^ (TWEAK_V + d));
            }
        }
    }
    let inp = blk;
    pi().encrypt_blocks(&mut blk[..2 * per]);
    for (b, i) in blk.iter_mut().zip(inp.iter()) {
        b.0 ^= i.0;
    }
    let mut out = [[Child { seed: 0, t: 0, v: [0; 2] }; 2]; 2];
    for b in 0..2 {
        for d in 0..2 {
            let w = if packed { 0 } else { blk[b * per + 2 + d].0 };
            out[b][d] = split_child(blk[b * per + d].0, w, packed);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mmo_batch_matches_single() {
        let mut v: Vec<Block> = (0..100u128).map(|i| Block(i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))).collect();
        let orig = v.clone();
        let mut scratch = vec![Block::ZERO; 100];
        mmo_inplace(&mut v, &mut scratch);
        for (o, x) in orig.iter().zip(v.iter()) {
            assert_eq!(mmo1(*o, 0), *x);
        }
        assert_ne!(mmo1(Block(5), 0), mmo1(Block(5), 1));
    }
}
