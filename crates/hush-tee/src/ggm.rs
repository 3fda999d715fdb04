//! The GGM length-doubling PRG (Goldreich–Goldwasser–Micali; as used for
//! puncturable PRFs in Boyle et al., "Efficient Pseudorandom Correlation
//! Generators", CRYPTO 2019, and in Ferret, CCS 2020, §3), from fixed-key AES:
//!
//! G(x) = (π(x) ⊕ x, π(x ⊕ 1) ⊕ x ⊕ 1)
//!
//! (Matyas–Meyer–Oseas with the public permutation π; correlation robust in
//! the ideal-permutation model, Guo–Katz–Wang–Yu S&P 2020). This one
//! definition is used by the module (walking secret paths) and by the hosts
//! (expanding trees), so both always agree.

use hush_primitives::aes::fixed_key;
use hush_primitives::Block;

/// Distinguishes the right child's input.
pub const RIGHT: Block = Block(1);

/// Parents expanded per AES call.
const CHUNK: usize = 32;

/// Both children of `x`.
#[inline]
pub fn children(x: Block) -> [Block; 2] {
    let mut c = [x, x ^ RIGHT];
    fixed_key().encrypt_blocks(&mut c);
    [c[0] ^ x, c[1] ^ x ^ RIGHT]
}

/// `out[2i], out[2i+1]` = children of `parents[i]` (`out.len() == 2·parents.len()`).
pub fn expand_into(parents: &[Block], out: &mut [Block]) {
    assert_eq!(out.len(), 2 * parents.len());
    for (p, o) in parents.chunks(CHUNK).zip(out.chunks_mut(2 * CHUNK)) {
        for (i, &x) in p.iter().enumerate() {
            o[2 * i] = x;
            o[2 * i + 1] = x ^ RIGHT;
        }
        fixed_key().encrypt_blocks(o);
        // Feed-forward from the parents (no staging copy of the secrets).
        for (i, &x) in p.iter().enumerate() {
            o[2 * i] ^= x;
            o[2 * i + 1] ^= x ^ RIGHT;
        }
    }
}

/// Expands level by level, in place: on entry `buf[0]` holds the root; on
/// exit `buf` (length `2^depth`) holds the root's leaves in order.
/// Works from the back of each level so no parent is overwritten before it
/// is read.
pub fn expand_in_place(buf: &mut [Block], depth: u32) {
    assert_eq!(buf.len(), 1usize << depth);
    let mut width = 1usize;
    for _ in 0..depth {
        // parents buf[..width] → children buf[..2·width], back to front.
        let mut hi = width;
        while hi > 0 {
            let lo = hi.saturating_sub(CHUNK);
            let mut par = [Block::ZERO; CHUNK];
            let p = &mut par[..hi - lo];
            p.copy_from_slice(&buf[lo..hi]);
            expand_into(p, &mut buf[2 * lo..2 * hi]);
            hi = lo;
        }
        width *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_matches_single() {
        let parents: Vec<Block> = (0..77u128).map(|i| Block(i * 0x9e37_79b9_7f4a_7c15)).collect();
        let mut out = vec![Block::ZERO; 154];
        expand_into(&parents, &mut out);
        for (i, &p) in parents.iter().enumerate() {
            assert_eq!([out[2 * i], out[2 * i + 1]], children(p));
        }
        assert_ne!(out[0], out[1]);
    }

    #[test]
    fn in_place_matches_walk() {
        let root = Block(0xdead_beef);
        let mut buf = vec![Block::ZERO; 1 << 7];
        buf[0] = root;
        expand_in_place(&mut buf, 7);
        for leaf in [0usize, 1, 63, 64, 127] {
            let mut x = root;
            for lvl in (0..7).rev() {
                x = children(x)[(leaf >> lvl) & 1];
            }
            assert_eq!(buf[leaf], x, "leaf {leaf}");
        }
    }
}
