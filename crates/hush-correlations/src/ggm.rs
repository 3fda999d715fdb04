//! Host-side GGM tree expansion (Boyle et al., CRYPTO 2019, §4 puncturable
//! PRF; Ferret CCS 2020, Fig. 3 SPCOT) on the PRG of [`hush_tee::ggm`], so
//! the trusted module and the hosts agree on every node.
//!
//! * [`expand_box`] — SilentFlow's Blocked On-chip eXpansion (BOX, §III-C):
//!   expand the top of a (sub)tree breadth-first until there are
//!   2^(depth−s) sub-roots, then expand each sub-root's depth-s subtree
//!   entirely while it sits in L1 (2^s blocks; s = [`BOX_DEPTH`] = 10 →
//!   16 KiB), writing the leaves in place. Leaves get their lsb cleared at
//!   write-back (the COT convention's "masking at write-back").
//! * Every level runs on the VAES level kernel (`simd::ggm_level_in_place`,
//!   SilentFlow §IV on a SIMD core): 16 parents → 32 children per step,
//!   8 registers of 4 blocks in flight, parents permuted into (x, x⊕1)
//!   pairs in registers — no staging copies (the portable path copied each
//!   chunk of parents twice). ~3× faster than before (≈20 ms for the 2n
//!   PRG calls of a FERRET_MAIN batch). The fused SilentFlow/Ferret stream
//!   expands trees with `simd::GgmJob` instead: the same levels, one
//!   16-parent group per step, interleaved into the LPN reduction.
//! * [`expand_with_sums`] — Ferret sender: full expansion keeping, per
//!   level, the XOR of the left and of the right children.
//! * [`reconstruct_punctured`] — Ferret receiver: rebuilds all leaves but
//!   the punctured one from the per-level off-path sums.
//!
//! View: the host-side trees are either the sender's own (from roots it
//! was given) or a receiver's punctured tree rebuilt from off-path values,
//! which determine every leaf but the punctured one; that leaf depends on
//! the path seeds, which no host but the sender's learns. The protocols'
//! view arguments are in [`crate::silentflow`] and [`crate::ferret`].

use hush_primitives::Block;
#[cfg(test)]
use hush_tee::ggm::expand_in_place;

/// Depth of the L1-resident subtrees of [`expand_box`].
pub const BOX_DEPTH: u32 = 10;

/// Clears the lsb of every block (sender-side leaves have lsb 0).
#[inline]
pub fn clear_lsbs(x: &mut [Block]) {
    for b in x {
        b.0 &= !1;
    }
}

/// Expands `buf[0..w]` breadth-first `levels` levels in place (children of
/// node i at 2i, 2i+1), clearing the lsbs of the last level if `clear`.
fn levels_in_place(buf: &mut [Block], mut w: usize, levels: u32, clear: bool) {
    for l in 0..levels {
        crate::simd::ggm_level_in_place(buf, w, clear && l + 1 == levels);
        w *= 2;
    }
}

/// Expands `buf[0]` into the `2^depth = buf.len()` leaves of its subtree in
/// cache-sized blocks, clearing each leaf's lsb (SilentFlow §IV BOX: the
/// top levels breadth-first, then each 2^[`BOX_DEPTH`]-leaf subtree
/// entirely in L1). Each level is one pass of the VAES level kernel
/// (`simd::ggm_level_in_place`: 32 children in flight, no staging copies),
/// and the lsb clearing is folded into the last level's store.
pub fn expand_box(buf: &mut [Block], depth: u32) {
    assert_eq!(buf.len(), 1usize << depth);
    if depth == 0 {
        clear_lsbs(buf);
        return;
    }
    if depth <= BOX_DEPTH {
        levels_in_place(buf, 1, depth, true);
        return;
    }
    let top = depth - BOX_DEPTH;
    levels_in_place(&mut buf[..1 << top], 1, top, false);
    let s = 1usize << BOX_DEPTH;
    // Back to front: sub-root i sits at buf[i] ≤ i·s, which no later
    // (smaller-i) subtree overwrites.
    for i in (0..1usize << top).rev() {
        let root = buf[i];
        let sub = &mut buf[i * s..(i + 1) * s];
        sub[0] = root;
        levels_in_place(sub, 1, BOX_DEPTH, true);
    }
}

/// Ferret sender: expands `buf[0]` into `buf` (2^depth leaves) level by
/// level; `sums[l] = [XOR of left children, XOR of right children]` at level
/// l+1. Leaves keep their full value (callers clear lsbs).
pub fn expand_with_sums(buf: &mut [Block], depth: u32, sums: &mut [[Block; 2]]) {
    assert_eq!(buf.len(), 1usize << depth);
    assert_eq!(sums.len(), depth as usize);
    let mut width = 1usize;
    for s in sums.iter_mut() {
        crate::simd::ggm_level_in_place(buf, width, false);
        let mut acc = [0u128; 2];
        for pair in buf[..2 * width].chunks_exact(2) {
            acc[0] ^= pair[0].0;
            acc[1] ^= pair[1].0;
        }
        *s = [Block(acc[0]), Block(acc[1])];
        width *= 2;
    }
}

/// Ferret receiver: rebuilds a tree punctured at leaf `alpha` from the
/// off-path sums `off[l]` = XOR of all level-(l+1) nodes on the side
/// opposite to the path. On exit `buf[j]` is the sender's leaf j for
/// j ≠ alpha, and `buf[alpha]` = 0.
pub fn reconstruct_punctured(buf: &mut [Block], depth: u32, alpha: usize, off: &[Block]) {
    assert_eq!(buf.len(), 1usize << depth);
    assert_eq!(off.len(), depth as usize);
    let mut width = 1usize;
    for (l, &k_off) in off.iter().enumerate() {
        let d = depth as usize;
        // Path node index at the parent level and the path bit at this level.
        let p = if l == 0 { 0 } else { alpha >> (d - l) };
        let bit = (alpha >> (d - l - 1)) & 1;
        if l == 0 {
            buf[0] = Block::ZERO;
            buf[1] = Block::ZERO;
        } else {
            crate::simd::ggm_level_in_place(buf, width, false);
        }
        let w2 = 2 * width;
        let sib = 2 * p + (1 - bit);
        // Off-path side has parity 1-bit: its sum minus the known nodes.
        let mut acc = k_off;
        let mut j = 1 - bit;
        while j < w2 {
            if j != sib {
                acc ^= buf[j];
            }
            j += 2;
        }
        buf[sib] = acc;
        buf[2 * p + bit] = Block::ZERO;
        width = w2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(root: Block, depth: u32) -> Vec<Block> {
        let mut b = vec![Block::ZERO; 1 << depth];
        b[0] = root;
        expand_in_place(&mut b, depth);
        b
    }

    #[test]
    fn box_matches_plain_expansion() {
        for depth in [3u32, 10, 12, 13] {
            let root = Block(0x1234_5678 + depth as u128);
            let mut want = plain(root, depth);
            clear_lsbs(&mut want);
            let mut got = vec![Block::ZERO; 1 << depth];
            got[0] = root;
            expand_box(&mut got, depth);
            assert_eq!(got, want, "depth {depth}");
        }
    }

    #[test]
    fn punctured_reconstruction() {
        let depth = 7;
        let root = Block(99);
        let full = plain(root, depth);
        let mut sums = vec![[Block::ZERO; 2]; depth as usize];
        let mut b2 = vec![Block::ZERO; 1 << depth];
        b2[0] = root;
        expand_with_sums(&mut b2, depth, &mut sums);
        assert_eq!(b2, full);
        for alpha in [0usize, 1, 77, 127] {
            let off: Vec<Block> = (0..depth as usize)
                .map(|l| sums[l][1 - ((alpha >> (depth as usize - l - 1)) & 1)])
                .collect();
            let mut r = vec![Block::ZERO; 1 << depth];
            reconstruct_punctured(&mut r, depth, alpha, &off);
            for j in 0..full.len() {
                if j != alpha {
                    assert_eq!(r[j], full[j], "alpha {alpha} leaf {j}");
                }
            }
        }
    }
}
