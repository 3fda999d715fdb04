//! AVX-512/VAES kernels of the silent-OT hot loops (SilentFlow §IV on a
//! SIMD core instead of an FPGA), each with a portable fallback that
//! computes the same values:
//!
//! * [`lpn_offsets`] — the LPN index generator: fixed-key AES in counter
//!   mode over 32 blocks in flight, and the multiply-shift ⌊w·k/2^32⌋ of
//!   every 32-bit word done 16 lanes at a time, written as byte offsets
//!   into the k-vector (SilentFlow §IV "batched index generation"). The
//!   counters never touch memory.
//! * [`gather_rows`] — the D-term XOR reduction of each output row: ten
//!   independent 128-bit loads folded into XORs, with software prefetch a
//!   few rows ahead so that many L3 misses are in flight (SilentFlow §IV
//!   "vectorized XOR reduction", PXR).
//! * [`ggm_level_in_place`] — one GGM level, G(x) = (π(x) ⊕ x, π(x⊕1) ⊕ x ⊕ 1)
//!   with π = fixed-key AES: 16 parents → 32 children per step, all in
//!   registers (8 VAES registers in flight), no staging copies; the
//!   last level may clear the leaves' lsbs on the way out.
//!
//! Which variant runs is decided per call by [`hush_primitives::simd::level`]
//! (`HUSH_SIMD=avx512|avx2|portable`):
//!
//! | kernel | avx512 | avx2 | portable |
//! |---|---|---|---|
//! | [`lpn_offsets`] | fused VAES CTR (32 blocks in flight) + 16-lane index math | fused AES-NI CTR (8 blocks in flight) + 8-lane AVX2 index math | soft AES + scalar index math |
//! | [`gather_rows_bg`] | AVX2-compiled (VEX) 128-bit loads, prefetch, NT stores | the same, with the next chunk's index AES-NI fused into the row loop ([`InlineIdx`]) | plain Rust loop, no prefetch |
//! | [`ggm_level_in_place`], [`GgmJob`] | VAES, 32 children per step | AES-NI, 4 parents (8 blocks) in flight, a whole level per job step (not interleaved: see [`AVX2_IX_ROWS`]) | soft AES, 16-parent batches |
//! | [`or_lsbs`] | AVX-512 test-mask + `pext` | scalar | scalar |
//!
//! The fused kernels never put counters or (x, x ⊕ 1) pairs in memory.

use hush_primitives::aes::{fixed_key, Aes128, FIXED_KEY};
use hush_primitives::simd::{self, Level};
use hush_primitives::Block;
use std::sync::OnceLock;

/// Whether the AVX-512 + VAES kernels run now (level avx512: avx512f +
/// avx512bw + vaes + aes + bmi2).
#[inline]
pub(crate) fn fast() -> bool {
    cfg!(target_arch = "x86_64") && simd::level() == Level::Avx512
}

/// Whether the AVX2 + AES-NI kernels run now (level avx2 exactly).
#[inline]
pub(crate) fn avx2() -> bool {
    cfg!(target_arch = "x86_64") && simd::level() == Level::Avx2
}

/// Expanded round keys of an AES-128 key (public keys only: the LPN key and
/// the fixed GGM key).
#[derive(Clone)]
pub(crate) struct RoundKeys {
    rk: [Block; 11],
}

impl RoundKeys {
    pub(crate) fn new(key: Block) -> Self {
        let mut rk = [Block::ZERO; 11];
        // On what the CPU has, not on the (overridable) current level: the
        // fixed keys are cached for the process.
        #[cfg(target_arch = "x86_64")]
        if simd::detected() >= Level::Avx2 {
            // SAFETY: level avx2 includes aes.
            rk = unsafe { x86::expand_key(key) };
        }
        RoundKeys { rk }
    }
    pub(crate) fn fixed() -> &'static Self {
        static K: OnceLock<RoundKeys> = OnceLock::new();
        K.get_or_init(|| RoundKeys::new(FIXED_KEY))
    }
}

/// Words of counter blocks per kernel step.
pub(crate) const OFFSET_STEP_BLOCKS: usize = 32;

/// Index words per AES block for a k-vector of `k` entries: 8 (16-bit
/// words, index = w mod k, exactly uniform) when k is a power of two no
/// larger than 2^16, else 4 (32-bit words, index = ⌊w·k/2^32⌋).
#[inline]
pub(crate) fn words_per_block(k: u32) -> usize {
    if k.is_power_of_two() && k <= 1 << 16 {
        8
    } else {
        4
    }
}

/// The byte offsets of the index words of AES_key((nonce ‖ c0 + m)),
/// m < `blocks` (a multiple of [`OFFSET_STEP_BLOCKS`]): with
/// w = [`words_per_block`]`(k)` words per block, `out[w·m + q]` = 16·index
/// of word q (see [`words_per_block`]); `out.len() ≥ w·blocks`. Requires
/// k < 2^28.
pub(crate) fn lpn_offsets(keys: &RoundKeys, aes: &Aes128, nonce: u64, c0: u64, blocks: usize, k: u32, out: &mut [u32]) {
    let wpb = words_per_block(k);
    assert!(blocks.is_multiple_of(OFFSET_STEP_BLOCKS) && out.len() >= wpb * blocks && k < (1 << 28) && k > 0);
    #[cfg(target_arch = "x86_64")]
    if fast() {
        // SAFETY: features detected; lengths asserted above.
        unsafe {
            if wpb == 8 {
                x86::lpn_offsets16(&keys.rk, nonce, c0, blocks, k - 1, out)
            } else {
                x86::lpn_offsets(&keys.rk, nonce, c0, blocks, k, out)
            }
        };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        // SAFETY: level avx2 = avx2 + aes detected; lengths asserted above.
        unsafe {
            if wpb == 8 {
                x86::lpn_offsets16_avx2(&keys.rk, nonce, c0, blocks, k - 1, out)
            } else {
                x86::lpn_offsets_avx2(&keys.rk, nonce, c0, blocks, k, out)
            }
        };
        return;
    }
    let _ = keys;
    let mut c = [Block::ZERO; OFFSET_STEP_BLOCKS];
    for s in (0..blocks).step_by(OFFSET_STEP_BLOCKS) {
        for (m, b) in c.iter_mut().enumerate() {
            *b = Block(((nonce as u128) << 64) | (c0 + (s + m) as u64) as u128);
        }
        aes.encrypt_blocks(&mut c);
        for (i, x) in c.iter().enumerate() {
            let m = s + i;
            if wpb == 8 {
                for q in 0..8 {
                    let w = (x.0 >> (16 * q)) as u32 & 0xffff;
                    out[8 * m + q] = (w & (k - 1)) << 4;
                }
            } else {
                for q in 0..4 {
                    let w = (x.0 >> (32 * q)) as u32;
                    out[4 * m + q] = (((w as u64 * k as u64) >> 32) as u32) << 4;
                }
            }
        }
    }
}

/// Rows fetched ahead of the XOR reduction in [`gather_rows_bg`] (measured
/// flat between 8 and 24 here).
pub(crate) const PREFETCH_ROWS: usize = 12;

/// For each row j: `out[j] (^)= XOR_l base[offs[10j + l] / 16]`.
///
/// The portable kernel (no intrinsics, no prefetch). Every offset is a
/// multiple of 16 below `16·base.len()` by construction ([`lpn_offsets`]
/// with k = base.len(): 16·⌊w·k/2^32⌋ < 16k); the x86 kernels rely on that
/// and carry no bounds checks (a checking pass cost ~10% of the product),
/// this one still checks (cheap next to its scalar loop).
pub(crate) fn gather_rows(base: &[Block], offs: &[u32], out: &mut [Block], xor: bool) {
    debug_assert!(offs.len() >= 10 * out.len());
    for (j, y) in out.iter_mut().enumerate() {
        let a = offs[10 * j..10 * j + 10].iter().fold(Block::ZERO, |a, &o| a ^ base[(o >> 4) as usize]);
        if xor {
            *y ^= a;
        } else {
            *y = a;
        }
    }
}

/// Prefetches the rows of a chunk's first [`PREFETCH_ROWS`] rows (before
/// the first chunk of a product; later chunks are prefetched by the
/// previous chunk's last rows).
///
/// # Safety
/// `offs` holds at least `10·PREFETCH_ROWS` offsets (only used as hints).
pub(crate) unsafe fn prefetch_first(base: &[Block], offs: &[u32]) {
    debug_assert!(offs.len() >= 10 * PREFETCH_ROWS);
    #[cfg(target_arch = "x86_64")]
    if simd::level() >= Level::Avx2 {
        x86::prefetch_first(base, offs.as_ptr());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (base, offs);
}

/// Rows of the D-term reduction between two steps of background AES work
/// in [`gather_rows_bg`]: a step (32 blocks, ~110 instructions) and this
/// many rows (~22 instructions and ~10 cache misses each) fit in the
/// out-of-order window together, so the AES units work while the loads
/// wait on L3 (SilentFlow §IV kernel fusion, at instruction level).
///
/// It must also give the background enough slots: per h = 13 tree (8192
/// rows, 16 chunks of SUB) the next chunks' index AES takes 16 × 40 steps
/// and the next tree's GGM ~515–560 steps, ~1200 in all. At 8 rows
/// (1024 slots) ~170 GGM steps per tree were left over and ran after the
/// reduction, outside the shadow of its misses (counted: ~2·10^5 steps per
/// party per 10^7 COTs, ~7–10 ms); at 6 (1365 slots) none are. Even, so
/// that the two-row loop keeps rows paired.
pub(crate) const BG_EVERY: usize = 6;
const _: () = assert!(BG_EVERY.is_multiple_of(2));

/// Level avx2 (AES-NI: one 128-bit block per instruction, so a 32-block
/// step is ~450 instructions, the whole out-of-order window): the VAES
/// schedule above does not carry over. Measured at `HUSH_SIMD=avx2`
/// (10^7 SilentFlow COTs, per-party CPU time), interleaving background
/// steps every 2–32 rows was 3–15 % *slower* than none, whatever the step
/// size (8, 16 or 32 blocks; 4–16 GGM parents). So at avx2:
/// * the next chunk's index AES is fused into the gather loop itself
///   ([`InlineIdx`]: 8 AES-NI CTR blocks every [`AVX2_IX_ROWS`] rows,
///   inline, no call), and the last chunk of a product computes the next
///   product's first chunk (`LpnMatrix`'s carried offsets) — all of the
///   index AES then runs in the shadow of the L2 gathers;
/// * the GGM levels are not interleaved: `bg` runs once per chunk, each
///   call a whole level ([`ggm_level_in_place`]), the rest after the
///   product.
pub(crate) const AVX2_IX_ROWS: usize = 4;

/// `out[j] = src[j] ⊕ XOR_l base[offs[10j + l] / 16]` (`src` None: `out`
/// itself), interleaving `bg()` (one step of independent AES work; returns
/// false once it has none) every [`BG_EVERY`] rows. With a separate `src`
/// and `nt` the stores are non-temporal (16-byte aligned `out`, as every
/// `Vec<Block>` is). `prefetch`: software prefetch [`PREFETCH_ROWS`] rows
/// ahead; the last rows prefetch the first rows of `next` (the following
/// chunk's offsets).
///
/// # Safety
/// The offsets as in [`gather_rows`] (not bounds-checked here); `next`
/// points to `10·PREFETCH_ROWS` readable offsets (used only as prefetch
/// hints: any values are harmless, and `bg` may be writing them through
/// the same raw pointer); `src`, if given, has `out.len()` blocks.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gather_rows_bg(
    base: &[Block],
    offs: &[u32],
    next: *const u32,
    src: Option<&[Block]>,
    out: &mut [Block],
    nt: bool,
    prefetch: bool,
    lsbs: Option<&mut [u64]>,
    bg: &mut dyn FnMut() -> bool,
    ix: Option<&InlineIdx<'_>>,
) {
    debug_assert!(src.is_none_or(|s| s.len() == out.len()));
    if let Some(ix) = ix {
        assert!(ix.blocks.is_multiple_of(OFFSET_STEP_BLOCKS) && ix.k > 0 && ix.k < (1 << 28));
    }
    debug_assert!(offs.len() >= 10 * out.len());
    assert!(lsbs.as_ref().is_none_or(|w| w.len() >= out.len().div_ceil(64)));
    #[cfg(target_arch = "x86_64")]
    if simd::level() >= Level::Avx2 {
        let n = out.len();
        let nt = nt && src.is_some() && (out.as_ptr() as usize).is_multiple_of(16);
        let sp = src.map_or(out.as_ptr(), |s| s.as_ptr());
        let (o, nx, y) = (offs.as_ptr(), next, out.as_mut_ptr());
        let lp = lsbs.map_or(std::ptr::null_mut(), |w| w.as_mut_ptr());
        let ev = if simd::level() == Level::Avx2 { usize::MAX } else { BG_EVERY };
        if let Some(ix) = ix {
            let r = AVX2_IX_ROWS;
            // SAFETY: as below; level ≥ avx2 includes aes; `ix.out` as
            // documented at InlineIdx.
            match (nt, prefetch) {
                (true, true) => x86::gather_rows_ix::<true, true>(base, o, nx, sp, y, n, lp, ev, bg, ix, r),
                (true, false) => x86::gather_rows_ix::<true, false>(base, o, nx, sp, y, n, lp, ev, bg, ix, r),
                (false, true) => x86::gather_rows_ix::<false, true>(base, o, nx, sp, y, n, lp, ev, bg, ix, r),
                (false, false) => x86::gather_rows_ix::<false, false>(base, o, nx, sp, y, n, lp, ev, bg, ix, r),
            }
            return;
        }
        // SAFETY: level ≥ avx2 (the kernel is compiled for avx2); the
        // caller's contract covers the offsets, `next` and `src`.
        match (nt, prefetch) {
            (true, true) => x86::gather_rows_bg::<true, true>(base, o, nx, sp, y, n, lp, ev, bg),
            (true, false) => x86::gather_rows_bg::<true, false>(base, o, nx, sp, y, n, lp, ev, bg),
            (false, true) => x86::gather_rows_bg::<false, true>(base, o, nx, sp, y, n, lp, ev, bg),
            (false, false) => x86::gather_rows_bg::<false, false>(base, o, nx, sp, y, n, lp, ev, bg),
        }
        return;
    }
    // Portable: the same rows, `bg` every BG_EVERY rows.
    let _ = (next, nt, prefetch);
    if let Some(s) = src {
        out.copy_from_slice(s);
    }
    let n = out.len();
    let mut j = 0;
    while j < n {
        let end = (j + BG_EVERY).min(n);
        gather_rows(base, &offs[10 * j..], &mut out[j..end], true);
        j = end;
        bg();
    }
    if let Some(w) = lsbs {
        w[..n.div_ceil(64)].fill(0);
        or_lsbs(out, w, 0);
    }
    if let Some(ix) = ix {
        let wpb = words_per_block(ix.k);
        // SAFETY: the caller's contract on `ix.out`.
        let o = std::slice::from_raw_parts_mut(ix.out, wpb * ix.blocks);
        lpn_offsets(ix.keys, ix.aes, ix.nonce, ix.c0, ix.blocks, ix.k, o);
    }
}

/// The next chunk's LPN index generation, to be fused into
/// [`gather_rows_bg`] (level avx2): the offsets of AES blocks
/// c0 .. c0 + `blocks` (a multiple of [`OFFSET_STEP_BLOCKS`]) as
/// [`lpn_offsets`] writes them, into `out` (≥ w·blocks words, w =
/// [`words_per_block`]`(k)`, written through this pointer only).
pub(crate) struct InlineIdx<'a> {
    pub(crate) keys: &'a RoundKeys,
    pub(crate) aes: &'a Aes128,
    pub(crate) nonce: u64,
    pub(crate) c0: u64,
    pub(crate) blocks: usize,
    pub(crate) k: u32,
    pub(crate) out: *mut u32,
}

/// ORs bits `0..nbits` of `src` into `dst` at bit offset `at`.
pub(crate) fn or_bits(dst: &mut [u64], at: usize, src: &[u64], nbits: usize) {
    let (w0, sh) = (at / 64, at % 64);
    for (i, &v) in src[..nbits.div_ceil(64)].iter().enumerate() {
        let v = if (i + 1) * 64 > nbits { v & (u64::MAX >> ((i + 1) * 64 - nbits)) } else { v };
        dst[w0 + i] |= v << sh;
        if sh != 0 && v >> (64 - sh) != 0 {
            dst[w0 + i + 1] |= v >> (64 - sh);
        }
    }
}

/// ORs bit `at + i` of `words` with the lsb of `x[i]` (the receiver's
/// choice bits, taken while the output is still in L2; 64 blocks per
/// AVX-512 step).
pub(crate) fn or_lsbs(x: &[Block], words: &mut [u64], at: usize) {
    let mut i = 0;
    while i < x.len() {
        let m = 64.min(x.len() - i);
        let c = &x[i..i + m];
        #[cfg(target_arch = "x86_64")]
        let v = if m == 64 && fast() {
            // SAFETY: features detected; 64 blocks readable.
            unsafe { x86::lsbs64(c.as_ptr()) }
        } else {
            c.iter().enumerate().fold(0u64, |a, (j, b)| a | ((b.0 as u64 & 1) << j))
        };
        #[cfg(not(target_arch = "x86_64"))]
        let v = c.iter().enumerate().fold(0u64, |a, (j, b)| a | ((b.0 as u64 & 1) << j));
        let pos = at + i;
        let (w, sh) = (pos / 64, pos % 64);
        words[w] |= v << sh;
        if sh != 0 && sh + m > 64 {
            words[w + 1] |= v >> (64 - sh);
        }
        i += m;
    }
}

/// Background job: the index offsets of a range of LPN rows, 32 AES blocks
/// per step (see [`lpn_offsets`]).
pub(crate) struct OffsetJob<'a> {
    pub(crate) keys: &'a RoundKeys,
    pub(crate) aes: &'a Aes128,
    pub(crate) nonce: u64,
    pub(crate) c0: u64,
    pub(crate) blocks: usize,
    pub(crate) done: usize,
    pub(crate) k: u32,
    /// `len` ≥ 4·blocks writable words (a raw pointer: the reduction reads
    /// the first ones as prefetch hints through the same pointer).
    pub(crate) out: *mut u32,
    pub(crate) len: usize,
}

impl OffsetJob<'_> {
    pub(crate) fn step(&mut self) -> bool {
        if self.done >= self.blocks {
            return false;
        }
        let w = words_per_block(self.k);
        let s = OFFSET_STEP_BLOCKS;
        assert!(w * (self.done + s) <= self.len);
        // SAFETY: in bounds (asserted); `out` is valid for `len` words for
        // the job's lifetime and not otherwise borrowed meanwhile.
        let o = unsafe { std::slice::from_raw_parts_mut(self.out.add(w * self.done), w * s) };
        lpn_offsets(self.keys, self.aes, self.nonce, self.c0 + self.done as u64, s, self.k, o);
        self.done += s;
        true
    }
}

/// What planting a tree leaves to expand: GGM subtrees `(start, depth)`
/// whose seeds are in place, or (Ferret's receiver) a whole punctured tree
/// to rebuild from its off-path sums.
#[derive(Default)]
pub(crate) struct Plan {
    pub(crate) subs: Vec<(usize, u32)>,
    pub(crate) punct: Option<Punctured>,
}

/// A punctured tree to rebuild level by level (whole levels, so every
/// level of 16 parents or more runs through the VAES group kernel).
/// * `known == false` (Ferret's receiver): `off[l]` is the XOR of all
///   nodes on the off-path side of level l + 1 (as
///   [`crate::ggm::reconstruct_punctured`]); lsbs are cleared and the
///   punctured leaf is set to c ⊕ all other leaves.
/// * `known == true` (SilentFlow's receiver, whose module releases the
///   off-path seeds themselves): `off[l]` is the off-path sibling at level
///   l + 1; lsbs are cleared and the punctured leaf is set to `c`.
pub(crate) struct Punctured {
    pub(crate) depth: u32,
    pub(crate) alpha: usize,
    /// Off-path sums or seeds, level by level (depth ≤ 32).
    pub(crate) off: [Block; 32],
    pub(crate) c: Block,
    pub(crate) known: bool,
}

impl Plan {
    /// Empties the plan, overwriting what revealed the punctured positions.
    pub(crate) fn wipe(&mut self) {
        for x in self.subs.iter_mut() {
            *x = (0, 0);
        }
        std::hint::black_box(&self.subs);
        self.subs.clear();
        if let Some(pc) = self.punct.as_mut() {
            pc.alpha = 0;
            pc.off = [Block::ZERO; 32];
            pc.c = Block::ZERO;
            std::hint::black_box(&*pc);
        }
        self.punct = None;
    }
}

/// Background job: carries out a [`Plan`] in place — GGM subtrees level by
/// level with the leaves' lsbs cleared (the same leaves as
/// [`crate::ggm::expand_box`]), or a punctured tree level by level with the
/// off-path fix-up after each level — one 16-parent group (32 AES blocks)
/// or one fix-up pass per step.
pub(crate) struct GgmJob<'a> {
    buf: &'a mut [Block],
    plan: &'a Plan,
    s: usize,
    level: u32,
    /// Groups of the current level still to do (None: level not started).
    g: Option<usize>,
    /// Punctured mode: the level just expanded still needs its fix-up.
    fix: bool,
    done: bool,
    /// The SIMD level, read once per job.
    lvl: Level,
}

impl<'a> GgmJob<'a> {
    pub(crate) fn new(buf: &'a mut [Block], plan: &'a Plan) -> Self {
        GgmJob { buf, plan, s: 0, level: 0, g: None, fix: false, done: false, lvl: simd::level() }
    }

    /// One group of level `self.level` of `sub` (parents 2^level); returns
    /// true when the level is complete.
    fn group(sub: &mut [Block], level: u32, last: bool, g: &mut Option<usize>, lvl: Level) -> bool {
        let w = 1usize << level;
        // Level avx2 runs whole levels (see [`AVX2_IX_ROWS`]: interleaving
        // AES-NI steps into the gather only slowed it down).
        if !cfg!(target_arch = "x86_64") || lvl != Level::Avx512 || w < 16 {
            ggm_level_in_place(sub, w, last);
            return true;
        }
        let gi = g.unwrap_or(w / 16) - 1;
        #[cfg(target_arch = "x86_64")]
        // SAFETY: level avx512 checked; the sub-slice holds 2w ≥ 32·gi + 32
        // blocks.
        unsafe {
            x86::ggm_group(&RoundKeys::fixed().rk, sub, gi, last)
        };
        if gi == 0 {
            *g = None;
            true
        } else {
            *g = Some(gi);
            false
        }
    }

    pub(crate) fn step(&mut self) -> bool {
        if let Some(pc) = &self.plan.punct {
            return self.step_punctured(pc);
        }
        loop {
            let Some(&(start, d)) = self.plan.subs.get(self.s) else { return false };
            let sub = &mut self.buf[start..start + (1usize << d)];
            if self.level == d {
                if d == 0 {
                    sub[0].0 &= !1;
                }
                self.s += 1;
                self.level = 0;
                self.g = None;
                continue;
            }
            if Self::group(sub, self.level, self.level + 1 == d, &mut self.g, self.lvl) {
                self.level += 1;
            }
            return true;
        }
    }

    fn step_punctured(&mut self, pc: &Punctured) -> bool {
        if self.done {
            return false;
        }
        let d = pc.depth;
        let buf = &mut self.buf[..1usize << d];
        let l = self.level;
        if l == d {
            if pc.known {
                buf[pc.alpha] = pc.c;
            } else {
                // The punctured leaf: c ⊕ every other (lsb-cleared) leaf.
                let acc = buf.iter().fold(pc.c.0, |a, x| a ^ x.0);
                buf[pc.alpha] = Block(acc);
            }
            self.done = true;
            return true;
        }
        if !self.fix {
            if l == 0 {
                buf[0] = Block::ZERO;
                buf[1] = Block::ZERO;
                self.fix = true;
            } else if Self::group(buf, l, l + 1 == d, &mut self.g, self.lvl) {
                self.fix = true;
            }
            return true;
        }
        // Fix-up of level l (children 0..2^(l+1)): the off-path sibling is
        // its side's sum minus the known nodes, the path node is 0.
        let (d, l) = (d as usize, l as usize);
        let p = if l == 0 { 0 } else { pc.alpha >> (d - l) };
        let bit = (pc.alpha >> (d - l - 1)) & 1;
        let sib = 2 * p + (1 - bit);
        if pc.known {
            // The path node's children are garbage: one is replaced by the
            // released sibling, the other (the next path node) zeroed.
            buf[sib] = Block(if l + 1 == d { pc.off[l].0 & !1 } else { pc.off[l].0 });
            buf[2 * p + bit] = Block::ZERO;
            self.fix = false;
            self.level += 1;
            return true;
        }
        let mut acc = pc.off[l].0 ^ buf[sib].0;
        for pair in buf[..2 << l].chunks_exact(2) {
            acc ^= pair[1 - bit].0;
        }
        // Last level: the stored children are lsb-cleared, so is the sum.
        buf[sib] = Block(if l + 1 == d { acc & !1 } else { acc });
        buf[2 * p + bit] = Block::ZERO;
        self.fix = false;
        self.level += 1;
        true
    }
}

/// In place, parents `buf[..w]` → children `buf[..2w]` (`buf.len() ≥ 2w`),
/// child 2i / 2i+1 = left / right child of parent i; `clear_lsb`: children
/// get lsb 0.
pub(crate) fn ggm_level_in_place(buf: &mut [Block], w: usize, clear_lsb: bool) {
    assert!(buf.len() >= 2 * w);
    let mut hi = w;
    #[cfg(target_arch = "x86_64")]
    if fast() && w >= 16 {
        // SAFETY: features detected; the kernel handles parents
        // [w mod 16, w) from the back (reads each group before writing its
        // children at ≥ 2·lo ≥ lo + 16 or, for lo = 0, after the loads).
        hi = unsafe { x86::ggm_level(&RoundKeys::fixed().rk, buf, w, clear_lsb) };
    }
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        // SAFETY: level avx2 = avx2 + aes detected; the kernel does every
        // parent, back to front in groups of four (each group's parents are
        // loaded before its children are stored).
        unsafe { x86::ggm_level_aesni(&RoundKeys::fixed().rk, buf, w, clear_lsb) };
        hi = 0;
    }
    // Remaining parents [0, hi), back to front.
    let m = if clear_lsb { !1u128 } else { !0 };
    let mut i = hi;
    while i > 0 {
        let lo = i.saturating_sub(16);
        let mut t = [Block::ZERO; 32];
        for (j, p) in (lo..i).enumerate() {
            let x = buf[p];
            t[2 * j] = x;
            t[2 * j + 1] = x ^ hush_tee::ggm::RIGHT;
        }
        let n = 2 * (i - lo);
        let mut e = t;
        fixed_key().encrypt_blocks(&mut e[..n]);
        for j in 0..n {
            buf[2 * lo + j] = Block((e[j].0 ^ t[j].0) & m);
        }
        i = lo;
    }
}

#[cfg(target_arch = "x86_64")]
#[allow(clippy::needless_range_loop)] // register arrays read best indexed
mod x86 {
    use super::Block;
    use std::arch::x86_64::*;

    #[inline(always)]
    unsafe fn ld(b: &Block) -> __m128i {
        _mm_loadu_si128(b as *const Block as *const __m128i)
    }

    /// FIPS-197 AES-128 key expansion with AESKEYGENASSIST.
    #[target_feature(enable = "aes,sse2")]
    pub(super) unsafe fn expand_key(key: Block) -> [Block; 11] {
        #[inline(always)]
        unsafe fn step(k: __m128i, t: __m128i) -> __m128i {
            let t = _mm_shuffle_epi32::<0xff>(t);
            let mut k = k;
            k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
            k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
            k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
            _mm_xor_si128(k, t)
        }
        let mut r = [_mm_setzero_si128(); 11];
        r[0] = ld(&key);
        r[1] = step(r[0], _mm_aeskeygenassist_si128::<0x01>(r[0]));
        r[2] = step(r[1], _mm_aeskeygenassist_si128::<0x02>(r[1]));
        r[3] = step(r[2], _mm_aeskeygenassist_si128::<0x04>(r[2]));
        r[4] = step(r[3], _mm_aeskeygenassist_si128::<0x08>(r[3]));
        r[5] = step(r[4], _mm_aeskeygenassist_si128::<0x10>(r[4]));
        r[6] = step(r[5], _mm_aeskeygenassist_si128::<0x20>(r[5]));
        r[7] = step(r[6], _mm_aeskeygenassist_si128::<0x40>(r[6]));
        r[8] = step(r[7], _mm_aeskeygenassist_si128::<0x80>(r[7]));
        r[9] = step(r[8], _mm_aeskeygenassist_si128::<0x1b>(r[8]));
        r[10] = step(r[9], _mm_aeskeygenassist_si128::<0x36>(r[9]));
        let mut out = [Block::ZERO; 11];
        for i in 0..11 {
            _mm_storeu_si128(&mut out[i] as *mut Block as *mut __m128i, r[i]);
        }
        out
    }

    #[inline(always)]
    unsafe fn keys512(rk: &[Block; 11]) -> [__m512i; 11] {
        let mut k = [_mm512_setzero_si512(); 11];
        for i in 0..11 {
            k[i] = _mm512_broadcast_i32x4(ld(&rk[i]));
        }
        k
    }

    #[inline(always)]
    unsafe fn aes8(k: &[__m512i; 11], x: &mut [__m512i; 8]) {
        for j in 0..8 {
            x[j] = _mm512_xor_si512(x[j], k[0]);
        }
        for r in 1..10 {
            for j in 0..8 {
                x[j] = _mm512_aesenc_epi128(x[j], k[r]);
            }
        }
        for j in 0..8 {
            x[j] = _mm512_aesenclast_epi128(x[j], k[10]);
        }
    }

    #[inline(always)]
    unsafe fn keys128(rk: &[Block; 11]) -> [__m128i; 11] {
        let mut k = [_mm_setzero_si128(); 11];
        for i in 0..11 {
            k[i] = ld(&rk[i]);
        }
        k
    }

    /// AES-128 of eight independent blocks (AES-NI, all eight in flight).
    #[inline(always)]
    unsafe fn aes8x(k: &[__m128i; 11], x: &mut [__m128i; 8]) {
        for j in 0..8 {
            x[j] = _mm_xor_si128(x[j], k[0]);
        }
        for r in 1..10 {
            for j in 0..8 {
                x[j] = _mm_aesenc_si128(x[j], k[r]);
            }
        }
        for j in 0..8 {
            x[j] = _mm_aesenclast_si128(x[j], k[10]);
        }
    }

    /// AES of the next 8 counter blocks (nonce ‖ c), advancing `ctr`
    /// (qwords (c, nonce)).
    #[inline(always)]
    unsafe fn ctr_aes8(keys: &[__m128i; 11], ctr: &mut __m128i) -> [__m128i; 8] {
        let one = _mm_set_epi64x(0, 1);
        let mut x = [_mm_setzero_si128(); 8];
        for r in x.iter_mut() {
            *r = *ctr;
            *ctr = _mm_add_epi64(*ctr, one);
        }
        aes8x(keys, &mut x);
        x
    }

    /// [`super::lpn_offsets`] at level avx2, 32-bit words: AES-NI CTR with
    /// eight blocks in flight, ⌊w·k/2^32⌋·16 of eight words per AVX2 step.
    #[target_feature(enable = "aes,avx2")]
    pub(super) unsafe fn lpn_offsets_avx2(rk: &[Block; 11], nonce: u64, c0: u64, blocks: usize, k: u32, out: &mut [u32]) {
        let keys = keys128(rk);
        let mut ctr = _mm_set_epi64x(nonce as i64, c0 as i64);
        let k16 = _mm256_set1_epi64x((k as i64) << 4);
        let hi_mask = _mm256_set1_epi32(!15);
        let p = out.as_mut_ptr();
        debug_assert!(out.len() >= 4 * blocks && blocks.is_multiple_of(8));
        let mut m = 0;
        while m < blocks {
            let x = ctr_aes8(&keys, &mut ctr);
            for j in 0..4 {
                // Blocks 2j, 2j+1: words in order.
                let v = _mm256_set_m128i(x[2 * j + 1], x[2 * j]);
                let even = _mm256_srli_epi64::<32>(_mm256_mul_epu32(v, k16));
                let odd = _mm256_mul_epu32(_mm256_srli_epi64::<32>(v), k16);
                let w = _mm256_blend_epi32::<0xAA>(even, odd);
                _mm256_storeu_si256(p.add(4 * (m + 2 * j)) as *mut __m256i, _mm256_and_si256(w, hi_mask));
            }
            m += 8;
        }
    }

    /// [`super::lpn_offsets`] at level avx2, k = mask + 1 a power of two
    /// ≤ 2^16: the eight 16-bit words of each block, widened, scaled and
    /// masked in one AVX2 step.
    #[target_feature(enable = "aes,avx2")]
    pub(super) unsafe fn lpn_offsets16_avx2(rk: &[Block; 11], nonce: u64, c0: u64, blocks: usize, mask: u32, out: &mut [u32]) {
        let keys = keys128(rk);
        let mut ctr = _mm_set_epi64x(nonce as i64, c0 as i64);
        let m16 = _mm256_set1_epi32((mask << 4) as i32);
        let p = out.as_mut_ptr();
        debug_assert!(out.len() >= 8 * blocks && blocks.is_multiple_of(8));
        let mut m = 0;
        while m < blocks {
            let x = ctr_aes8(&keys, &mut ctr);
            for j in 0..8 {
                let w = _mm256_slli_epi32::<4>(_mm256_cvtepu16_epi32(x[j]));
                _mm256_storeu_si256(p.add(8 * (m + j)) as *mut __m256i, _mm256_and_si256(w, m16));
            }
            m += 8;
        }
    }

    /// Children of the four parents at `src` (in registers before any
    /// store) into `dst[0..8]`: G(x) = (π(x) ⊕ x, π(x⊕1) ⊕ x ⊕ 1).
    #[inline(always)]
    unsafe fn ggm4(keys: &[__m128i; 11], src: *const Block, dst: *mut Block, mask: __m128i) {
        let right = _mm_set_epi64x(0, 1);
        let mut x = [_mm_setzero_si128(); 8];
        for i in 0..4 {
            let p = _mm_loadu_si128(src.add(i) as *const __m128i);
            x[2 * i] = p;
            x[2 * i + 1] = _mm_xor_si128(p, right);
        }
        let inp = x;
        aes8x(keys, &mut x);
        let d = dst as *mut __m128i;
        for j in 0..8 {
            _mm_storeu_si128(d.add(j), _mm_and_si128(_mm_xor_si128(x[j], inp[j]), mask));
        }
    }

    /// Parents 16g..16g+16 → children 32g..32g+32 with AES-NI, four
    /// parents (eight blocks) in flight, back to front (each four's
    /// children overwrite only parents already consumed).
    #[target_feature(enable = "aes,avx2")]
    pub(super) unsafe fn ggm_level_aesni(rk: &[Block; 11], buf: &mut [Block], w: usize, clear_lsb: bool) {
        assert!(buf.len() >= 2 * w);
        let keys = keys128(rk);
        let mask = if clear_lsb { _mm_set_epi64x(-1, -2) } else { _mm_set1_epi64x(-1) };
        let right = _mm_set_epi64x(0, 1);
        let b = buf.as_mut_ptr();
        let rem = w % 4;
        let mut p0 = w;
        while p0 >= rem + 4 {
            p0 -= 4;
            ggm4(&keys, b.add(p0), b.add(2 * p0), mask);
        }
        // Parents rem-1 .. 0 (children 2i, 2i+1 overwrite only parents ≥ i).
        for i in (0..rem).rev() {
            let p = _mm_loadu_si128(b.add(i) as *const __m128i);
            let mut x = [p, _mm_xor_si128(p, right)];
            for v in x.iter_mut() {
                *v = _mm_xor_si128(*v, keys[0]);
            }
            for r in 1..10 {
                for v in x.iter_mut() {
                    *v = _mm_aesenc_si128(*v, keys[r]);
                }
            }
            let d = b.add(2 * i) as *mut __m128i;
            _mm_storeu_si128(d, _mm_and_si128(_mm_xor_si128(_mm_aesenclast_si128(x[0], keys[10]), p), mask));
            let q = _mm_xor_si128(p, right);
            _mm_storeu_si128(d.add(1), _mm_and_si128(_mm_xor_si128(_mm_aesenclast_si128(x[1], keys[10]), q), mask));
        }
    }

    /// Counter blocks (nonce ‖ c0 + i), four per register: qwords (c, nonce) × 4.
    #[inline(always)]
    unsafe fn ctr_start(nonce: u64, c0: u64) -> __m512i {
        let ctr = _mm512_set_epi64(nonce as i64, 3, nonce as i64, 2, nonce as i64, 1, nonce as i64, 0);
        _mm512_add_epi64(ctr, _mm512_set_epi64(0, c0 as i64, 0, c0 as i64, 0, c0 as i64, 0, c0 as i64))
    }

    /// AES of the next 32 counter blocks (8 registers in flight); advances `ctr`.
    #[inline(always)]
    unsafe fn ctr_aes32(keys: &[__m512i; 11], ctr: &mut __m512i) -> [__m512i; 8] {
        let four = _mm512_set_epi64(0, 4, 0, 4, 0, 4, 0, 4);
        let mut x = [_mm512_setzero_si512(); 8];
        for r in x.iter_mut() {
            *r = *ctr;
            *ctr = _mm512_add_epi64(*ctr, four);
        }
        aes8(keys, &mut x);
        x
    }

    #[target_feature(enable = "aes,avx512f,avx512bw,vaes")]
    pub(super) unsafe fn lpn_offsets(rk: &[Block; 11], nonce: u64, c0: u64, blocks: usize, k: u32, out: &mut [u32]) {
        let keys = keys512(rk);
        let mut ctr = ctr_start(nonce, c0);
        let k16 = _mm512_set1_epi64((k as i64) << 4);
        let hi_mask = _mm512_set1_epi32(!15);
        let p = out.as_mut_ptr();
        let mut m = 0;
        while m < blocks {
            let x = ctr_aes32(&keys, &mut ctr);
            for j in 0..8 {
                // ⌊w·16k / 2^32⌋ with the low 4 bits cleared = 16·⌊w·k/2^32⌋.
                let even = _mm512_srli_epi64::<32>(_mm512_mul_epu32(x[j], k16));
                let odd = _mm512_mul_epu32(_mm512_srli_epi64::<32>(x[j]), k16);
                let w = _mm512_mask_blend_epi32(0xAAAA, even, odd);
                _mm512_storeu_si512(p.add(4 * (m + 4 * j)) as *mut _, _mm512_and_si512(w, hi_mask));
            }
            m += 32;
        }
    }

    /// [`super::lpn_offsets`] for k = mask + 1 a power of two ≤ 2^16: the
    /// 32 16-bit words of each register of four AES blocks, masked and
    /// scaled to byte offsets (16 at a time).
    #[target_feature(enable = "aes,avx512f,avx512bw,vaes")]
    pub(super) unsafe fn lpn_offsets16(rk: &[Block; 11], nonce: u64, c0: u64, blocks: usize, mask: u32, out: &mut [u32]) {
        let keys = keys512(rk);
        let mut ctr = ctr_start(nonce, c0);
        let m16 = _mm512_set1_epi32((mask << 4) as i32);
        let p = out.as_mut_ptr();
        let mut m = 0;
        while m < blocks {
            let x = ctr_aes32(&keys, &mut ctr);
            for j in 0..8 {
                // Words 0..16 (blocks 0, 1) and 16..32 (blocks 2, 3) in order.
                let lo = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(x[j]));
                let hi = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64::<1>(x[j]));
                let q = p.add(8 * (m + 4 * j));
                _mm512_storeu_si512(q as *mut _, _mm512_and_si512(_mm512_slli_epi32::<4>(lo), m16));
                _mm512_storeu_si512(q.add(16) as *mut _, _mm512_and_si512(_mm512_slli_epi32::<4>(hi), m16));
            }
            m += 32;
        }
    }

    #[inline(always)]
    unsafe fn row(b: *const u8, o: *const u32) -> __m128i {
        let g = |l: usize| _mm_load_si128(b.add(*o.add(l) as usize) as *const __m128i);
        let a = _mm_xor_si128(g(0), g(1));
        let c = _mm_xor_si128(g(2), g(3));
        let d = _mm_xor_si128(g(4), g(5));
        let e = _mm_xor_si128(g(6), g(7));
        let f = _mm_xor_si128(g(8), g(9));
        _mm_xor_si128(_mm_xor_si128(a, c), _mm_xor_si128(_mm_xor_si128(d, e), f))
    }

    #[inline(always)]
    unsafe fn pf(b: *const u8, o: *const u32) {
        for l in 0..10 {
            _mm_prefetch::<_MM_HINT_T0>(b.add(*o.add(l) as usize) as *const i8);
        }
    }

    /// The lsbs of 64 blocks.
    #[target_feature(enable = "avx512f,bmi2")]
    pub(super) unsafe fn lsbs64(p: *const Block) -> u64 {
        let one = _mm512_set_epi64(0, 1, 0, 1, 0, 1, 0, 1);
        let q = p as *const __m512i;
        let mut r = 0u64;
        for g in 0..8 {
            let a = _mm512_test_epi64_mask(_mm512_loadu_si512(q.add(2 * g) as *const _), one) as u32;
            let b = _mm512_test_epi64_mask(_mm512_loadu_si512(q.add(2 * g + 1) as *const _), one) as u32;
            r |= (_pext_u32(a | (b << 8), 0x5555) as u64) << (8 * g);
        }
        r
    }

    /// Parents 16g..16g+16 → children 32g..32g+32 (one step of a level
    /// run back to front).
    #[target_feature(enable = "aes,avx512f,avx512bw,vaes")]
    pub(super) unsafe fn ggm_group(rk: &[Block; 11], buf: &mut [Block], g: usize, clear_lsb: bool) {
        debug_assert!(buf.len() >= 32 * g + 32);
        let keys = keys512(rk);
        let lo_idx = _mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0);
        let hi_idx = _mm512_set_epi64(7, 6, 7, 6, 5, 4, 5, 4);
        let right = _mm512_set_epi64(0, 1, 0, 0, 0, 1, 0, 0);
        let mask = if clear_lsb { _mm512_set_epi64(-1, -2, -1, -2, -1, -2, -1, -2) } else { _mm512_set1_epi64(-1) };
        let pp = buf.as_ptr().add(16 * g) as *const __m512i;
        let mut x = [_mm512_setzero_si512(); 8];
        for q in 0..4 {
            let par = _mm512_loadu_si512(pp.add(q) as *const _);
            x[2 * q] = _mm512_xor_si512(_mm512_permutexvar_epi64(lo_idx, par), right);
            x[2 * q + 1] = _mm512_xor_si512(_mm512_permutexvar_epi64(hi_idx, par), right);
        }
        let inp = x;
        aes8(&keys, &mut x);
        let cp = buf.as_mut_ptr().add(32 * g) as *mut __m512i;
        for j in 0..8 {
            _mm512_storeu_si512(cp.add(j) as *mut _, _mm512_and_si512(_mm512_xor_si512(x[j], inp[j]), mask));
        }
    }

    /// `out[j] = src[j] ⊕ row j` (`src` = `out` for an in-place XOR); `bg`
    /// after every BG_EVERY rows; `NT`: non-temporal stores (the output is
    /// not read again soon and should not evict the k-vector); `PF`:
    /// prefetch PREFETCH_ROWS rows ahead, into `next` for the last rows.
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn gather_rows_bg<const NT: bool, const PF: bool>(
        base: &[Block],
        o: *const u32,
        next: *const u32,
        src: *const Block,
        out: *mut Block,
        n: usize,
        lsb: *mut u64,
        every: usize,
        bg: &mut dyn FnMut() -> bool,
    ) {
        gather_body::<NT, PF>(base, o, next, src, out, n, lsb, every, bg, usize::MAX, &mut || {})
    }

    /// [`gather_rows_bg`] with the next chunk's index generation fused into
    /// the row loop (level avx2): 8 AES-NI CTR blocks of index words every
    /// `ix_rows` rows, straight from registers into `ixo`, no call — the
    /// AES of the next rows' indices runs in the shadow of this chunk's L2
    /// gathers. Whatever is left is finished before returning. `wide`:
    /// 16-bit words (index = w & mask, `k` = mask), else 32-bit
    /// multiply-shift (`k` = k).
    #[target_feature(enable = "aes,avx2")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn gather_rows_ix<const NT: bool, const PF: bool>(
        base: &[Block],
        o: *const u32,
        next: *const u32,
        src: *const Block,
        out: *mut Block,
        n: usize,
        lsb: *mut u64,
        every: usize,
        bg: &mut dyn FnMut() -> bool,
        ix: &super::InlineIdx<'_>,
        ix_rows: usize,
    ) {
        let keys = keys128(&ix.keys.rk);
        let mut ctr = _mm_set_epi64x(ix.nonce as i64, ix.c0 as i64);
        let wide = super::words_per_block(ix.k) == 8;
        let mut left = ix.blocks / 8;
        let mut op = ix.out;
        let m16 = _mm256_set1_epi32(((ix.k.wrapping_sub(1)) << 4) as i32);
        let k16 = _mm256_set1_epi64x((ix.k as i64) << 4);
        let hi_mask = _mm256_set1_epi32(!15);
        let mut hook = || {
            if left == 0 {
                return;
            }
            left -= 1;
            let x = ctr_aes8(&keys, &mut ctr);
            if wide {
                for j in 0..8 {
                    let w = _mm256_slli_epi32::<4>(_mm256_cvtepu16_epi32(x[j]));
                    _mm256_storeu_si256(op.add(8 * j) as *mut __m256i, _mm256_and_si256(w, m16));
                }
                op = op.add(64);
            } else {
                for j in 0..4 {
                    let v = _mm256_set_m128i(x[2 * j + 1], x[2 * j]);
                    let even = _mm256_srli_epi64::<32>(_mm256_mul_epu32(v, k16));
                    let odd = _mm256_mul_epu32(_mm256_srli_epi64::<32>(v), k16);
                    let w = _mm256_blend_epi32::<0xAA>(even, odd);
                    _mm256_storeu_si256(op.add(8 * j) as *mut __m256i, _mm256_and_si256(w, hi_mask));
                }
                op = op.add(32);
            }
        };
        gather_body::<NT, PF>(base, o, next, src, out, n, lsb, every, bg, ix_rows.max(1), &mut hook);
        // The rest (the hook does nothing once all blocks are done).
        for _ in 0..ix.blocks / 8 {
            hook();
        }
    }

    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn gather_body<const NT: bool, const PF: bool>(
        base: &[Block],
        o: *const u32,
        next: *const u32,
        src: *const Block,
        out: *mut Block,
        n: usize,
        lsb: *mut u64,
        every: usize,
        bg: &mut dyn FnMut() -> bool,
        ix_rows: usize,
        ix: &mut impl FnMut(),
    ) {
        let mut ix_cnt = ix_rows;
        const AHEAD: usize = super::PREFETCH_ROWS;
        // The outputs' lsbs (the receiver's choice bits), 64 rows per word,
        // taken from the registers before the (non-temporal) stores.
        // Shifted into a vector register (3 vector ops a row, off the
        // scalar ports the gather's address loads use): row j of a word
        // lands at bit 63 − (j mod 64), reversed when the word is stored.
        let want = !lsb.is_null();
        let one = _mm_set_epi64x(0, 1);
        let mut acc = _mm_setzero_si128();
        macro_rules! take {
            ($j:expr, $a:expr) => {
                if want {
                    let j = $j;
                    acc = _mm_or_si128(_mm_slli_epi64::<1>(acc), _mm_and_si128($a, one));
                    if (j + 1) & 63 == 0 {
                        *lsb.add(j >> 6) = (_mm_cvtsi128_si64(acc) as u64).reverse_bits();
                        acc = _mm_setzero_si128();
                    }
                }
            };
        }
        let b = base.as_ptr() as *const u8;
        let x = src as *const __m128i;
        let y = out as *mut __m128i;
        let mut j = 0;
        while j < n {
            let end = j.saturating_add(every).min(n);
            if PF && end + AHEAD <= n {
                // Steady state (the prefetch rows are in this chunk), two
                // rows per iteration: ~5% less CPU than one.
                while j + 2 <= end {
                    pf(b, o.add(10 * (j + AHEAD)));
                    pf(b, o.add(10 * (j + 1 + AHEAD)));
                    let a0 = _mm_xor_si128(row(b, o.add(10 * j)), _mm_loadu_si128(x.add(j)));
                    let a1 = _mm_xor_si128(row(b, o.add(10 * j + 10)), _mm_loadu_si128(x.add(j + 1)));
                    take!(j, a0);
                    take!(j + 1, a1);
                    if NT {
                        _mm_stream_si128(y.add(j), a0);
                        _mm_stream_si128(y.add(j + 1), a1);
                    } else {
                        _mm_storeu_si128(y.add(j), a0);
                        _mm_storeu_si128(y.add(j + 1), a1);
                    }
                    j += 2;
                    ix_cnt = ix_cnt.saturating_sub(2);
                    if ix_cnt == 0 {
                        ix_cnt = ix_rows;
                        ix();
                    }
                }
            }
            while j < end {
                if PF {
                    let ahead = j + AHEAD;
                    pf(b, if ahead < n { o.add(10 * ahead) } else { next.add(10 * (ahead - n)) });
                }
                let a = _mm_xor_si128(row(b, o.add(10 * j)), _mm_loadu_si128(x.add(j)));
                take!(j, a);
                if NT {
                    _mm_stream_si128(y.add(j), a);
                } else {
                    _mm_storeu_si128(y.add(j), a);
                }
                j += 1;
                ix_cnt -= 1;
                if ix_cnt == 0 {
                    ix_cnt = ix_rows;
                    ix();
                }
            }
            bg();
        }
        if want && n & 63 != 0 {
            // r = n mod 64 rows: row i at bit r − 1 − i before reversal.
            *lsb.add(n >> 6) = (_mm_cvtsi128_si64(acc) as u64).reverse_bits() >> (64 - (n & 63));
        }
        if NT {
            _mm_sfence();
        }
    }

    /// Prefetches the first PREFETCH_ROWS rows of a chunk.
    pub(super) unsafe fn prefetch_first(base: &[Block], o: *const u32) {
        for j in 0..super::PREFETCH_ROWS {
            pf(base.as_ptr() as *const u8, o.add(10 * j));
        }
    }

    /// Parents [lo, w) with lo = w mod 16, in groups of 16 from the back;
    /// returns lo.
    #[target_feature(enable = "aes,avx512f,avx512bw,vaes")]
    pub(super) unsafe fn ggm_level(rk: &[Block; 11], buf: &mut [Block], w: usize, clear_lsb: bool) -> usize {
        let keys = keys512(rk);
        let lo_idx = _mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0);
        let hi_idx = _mm512_set_epi64(7, 6, 7, 6, 5, 4, 5, 4);
        let right = _mm512_set_epi64(0, 1, 0, 0, 0, 1, 0, 0);
        let mask = if clear_lsb { _mm512_set_epi64(-1, -2, -1, -2, -1, -2, -1, -2) } else { _mm512_set1_epi64(-1) };
        let rem = w % 16;
        let mut g = w / 16;
        while g > 0 {
            g -= 1;
            // Parents 16g..16g+16 = registers 4g..4g+4 (blocks of 4).
            let pp = (buf.as_ptr().add(rem + 16 * g)) as *const __m512i;
            let mut par = [_mm512_setzero_si512(); 4];
            for q in 0..4 {
                par[q] = _mm512_loadu_si512(pp.add(q) as *const _);
            }
            let mut x = [_mm512_setzero_si512(); 8];
            for q in 0..4 {
                x[2 * q] = _mm512_xor_si512(_mm512_permutexvar_epi64(lo_idx, par[q]), right);
                x[2 * q + 1] = _mm512_xor_si512(_mm512_permutexvar_epi64(hi_idx, par[q]), right);
            }
            let inp = x;
            aes8(&keys, &mut x);
            let cp = (buf.as_mut_ptr().add(2 * (rem + 16 * g))) as *mut __m512i;
            for j in 0..8 {
                let v = _mm512_and_si512(_mm512_xor_si512(x[j], inp[j]), mask);
                _mm512_storeu_si512(cp.add(j) as *mut _, v);
            }
        }
        rem
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hush_primitives::aes::fixed_key;

    /// Everything the kernels of this module compute, at the current level.
    fn all_outputs() -> Vec<Vec<u8>> {
        fn bytes<T: Copy>(v: &[T]) -> Vec<u8> {
            // SAFETY: plain integers / blocks, fully initialised.
            unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }.to_vec()
        }
        let mut outs = Vec::new();
        // LPN index generation, 32-bit and 16-bit words.
        let key = Block(0x1357_9bdf);
        let aes = Aes128::new(key);
        let keys = RoundKeys::new(key);
        for k in [589_824u32, 1 << 10, 3] {
            let mut o = vec![0u32; 8 * 96];
            lpn_offsets(&keys, &aes, 11, 1 << 40, 96, k, &mut o);
            outs.push(bytes(&o));
        }
        // The D-term gather with src, lsbs, NT stores; small (L2) and
        // large (prefetching) k-vectors.
        for (k, n) in [(4096usize, 700usize), (1 << 18, 2100)] {
            let base: Vec<Block> = (0..k as u128).map(|i| Block(i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835) ^ (i << 64))).collect();
            let m = crate::lpn::LpnMatrix::new(7, k);
            let src: Vec<Block> = (0..n as u128).map(|i| Block(i * 0x1234_5678_9abc_def1 + 3)).collect();
            let mut got = vec![Block::ZERO; n];
            let mut bits = vec![u64::MAX; n.div_ceil(64)];
            let mut bgs = 0;
            m.mul_add_bg(&base, 4, Some(&src), &mut got, true, Some(&mut bits), &mut || {
                bgs += 1;
                bgs < 50
            });
            outs.push(bytes(&got));
            outs.push(bytes(&bits));
            let mut x = src.clone();
            m.mul_xor(&base, 0, &mut x);
            outs.push(bytes(&x));
        }
        // GGM levels of every width class, with and without lsb clearing.
        for w in [1usize, 3, 15, 16, 17, 32, 33, 100, 256] {
            for clear in [false, true] {
                let mut buf = vec![Block::ZERO; 2 * w];
                for i in 0..w {
                    buf[i] = Block((i as u128 + 1) * 0x9e37_79b9_7f4a_7c15 ^ ((w as u128) << 90));
                }
                ggm_level_in_place(&mut buf, w, clear);
                outs.push(bytes(&buf));
            }
        }
        // Whole trees: interleaved job, known-siblings and punctured plans.
        let mut t = vec![Block::ZERO; 1 << 11];
        t[0] = Block(0xfeed);
        t[1 << 10] = Block(0xbeef);
        let plan = Plan { subs: vec![(0usize, 10u32), (1 << 10, 10)], punct: None };
        let mut j = GgmJob::new(&mut t, &plan);
        while j.step() {}
        outs.push(bytes(&t));
        let mut e = vec![Block::ZERO; 1 << 9];
        e[0] = Block(0xabc);
        crate::ggm::expand_box(&mut e, 9);
        outs.push(bytes(&e));
        for known in [false, true] {
            let mut off = [Block::ZERO; 32];
            for (l, o) in off.iter_mut().enumerate().take(9) {
                *o = Block(0x5555_0000 + l as u128);
            }
            let plan = Plan { subs: Vec::new(), punct: Some(Punctured { depth: 9, alpha: 300, off, c: Block(9), known }) };
            let mut g = vec![Block(1); 1 << 9];
            let mut j = GgmJob::new(&mut g, &plan);
            while j.step() {}
            outs.push(bytes(&g));
        }
        // Choice-bit extraction.
        let x: Vec<Block> = (0..300u128).map(|i| Block(i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835) >> 3)).collect();
        let mut w = vec![0u64; 6];
        or_lsbs(&x, &mut w, 5);
        outs.push(bytes(&w));
        outs
    }

    /// Every SIMD level this CPU supports computes exactly what the
    /// portable level does, kernel by kernel.
    #[test]
    fn every_level_matches_portable() {
        let want = simd::with_level(Level::Portable, all_outputs).unwrap();
        simd::for_each_level("hush-correlations simd", |l| {
            let got = all_outputs();
            assert_eq!(got.len(), want.len());
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(g == w, "level {l}: output {i} differs from the portable level");
            }
        });
    }

    #[test]
    fn round_keys_match_primitive_aes() {
        if !fast() {
            return;
        }
        let k = RoundKeys::fixed();
        let _ = k;
        // AES with these round keys = hush_primitives' AES: via a GGM level.
        let mut buf = vec![Block::ZERO; 64];
        for i in 0..32 {
            buf[i] = Block(0x1234_5678_9abc_def0_u128.wrapping_mul(i as u128 + 7));
        }
        let parents: Vec<Block> = buf[..32].to_vec();
        ggm_level_in_place(&mut buf, 32, false);
        for (i, &p) in parents.iter().enumerate() {
            assert_eq!([buf[2 * i], buf[2 * i + 1]], hush_tee::ggm::children(p), "parent {i}");
        }
        let _ = fixed_key();
    }

    #[test]
    fn ggm_level_all_widths() {
        for w in [1usize, 3, 15, 16, 17, 33, 100] {
            let mut buf = vec![Block::ZERO; 2 * w];
            for i in 0..w {
                buf[i] = Block((i as u128 + 1) * 0x9e37_79b9_7f4a_7c15);
            }
            let parents: Vec<Block> = buf[..w].to_vec();
            ggm_level_in_place(&mut buf, w, true);
            for (i, &p) in parents.iter().enumerate() {
                let c = hush_tee::ggm::children(p);
                assert_eq!([buf[2 * i], buf[2 * i + 1]], [Block(c[0].0 & !1), Block(c[1].0 & !1)], "w {w} parent {i}");
            }
        }
    }

    #[test]
    fn ggm_job_matches_expand_box() {
        let mut want = vec![Block::ZERO; 1 << 12];
        want[0] = Block(5);
        crate::ggm::expand_box(&mut want, 12);
        let mut got = vec![Block::ZERO; 1 << 12];
        got[0] = Block(5);
        let plan = Plan { subs: vec![(0usize, 12u32)], punct: None };
        let mut j = GgmJob::new(&mut got, &plan);
        while j.step() {}
        assert_eq!(got, want);
    }

    #[test]
    fn gather_lsbs_and_or_bits() {
        let k = 1024usize;
        let base: Vec<Block> = (0..k as u128).map(|i| Block(i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835) ^ i)).collect();
        let m = crate::lpn::LpnMatrix::new(4, k);
        for n in [1usize, 63, 64, 65, 512, 700, 1024] {
            let src: Vec<Block> = (0..n as u128).map(|i| Block(i * 0x1234_5678_9abc_def1 + 7)).collect();
            let mut want = src.clone();
            m.mul_xor(&base, 0, &mut want);
            let mut got = vec![Block::ZERO; n];
            let mut bits = vec![u64::MAX; n.div_ceil(64)];
            m.mul_add_bg(&base, 0, Some(&src), &mut got, true, Some(&mut bits), &mut || false);
            assert_eq!(got, want, "n {n}");
            for at in [0usize, 5, 64, 100] {
                let mut w = vec![0u64; (at + n).div_ceil(64) + 1];
                or_bits(&mut w, at, &bits, n);
                for i in 0..w.len() * 64 {
                    let b = (w[i / 64] >> (i % 64)) & 1 == 1;
                    let e = i >= at && i < at + n && want[i - at].lsb();
                    assert_eq!(b, e, "n {n} at {at} bit {i}");
                }
            }
        }
    }

    #[test]
    fn known_siblings_job_matches_full_tree() {
        for depth in [2u32, 5, 10] {
            let n = 1usize << depth;
            let mut want = vec![Block::ZERO; n];
            want[0] = Block(0x1234_5678);
            crate::ggm::expand_box(&mut want, depth);
            for alpha in [0usize, 1, n / 2 - 1, n / 2, n - 1] {
                // The off-path siblings, level by level, from a plain expansion.
                let mut lv = vec![Block::ZERO; n];
                lv[0] = Block(0x1234_5678);
                let mut off = [Block::ZERO; 32];
                for l in 0..depth as usize {
                    ggm_level_in_place(&mut lv, 1 << l, false);
                    let path = alpha >> (depth as usize - l - 1);
                    off[l] = lv[path ^ 1];
                }
                let c = Block(0xdead_beef);
                let plan = Plan { subs: Vec::new(), punct: Some(Punctured { depth, alpha, off, c, known: true }) };
                let mut got = vec![Block(3); n];
                let mut j = GgmJob::new(&mut got, &plan);
                while j.step() {}
                let mut w = want.clone();
                w[alpha] = c;
                assert_eq!(got, w, "depth {depth} alpha {alpha}");
            }
        }
    }

    #[test]
    fn punctured_job_matches_reconstruction() {
        let depth = 9u32;
        let mut full = vec![Block::ZERO; 1 << depth];
        full[0] = Block(0xabcdef);
        let mut sums = vec![[Block::ZERO; 2]; depth as usize];
        crate::ggm::expand_with_sums(&mut full, depth, &mut sums);
        for alpha in [0usize, 1, 200, 511] {
            let mut off = [Block::ZERO; 32];
            for l in 0..depth as usize {
                off[l] = sums[l][1 - ((alpha >> (depth as usize - l - 1)) & 1)];
            }
            let mut want = vec![Block::ZERO; 1 << depth];
            crate::ggm::reconstruct_punctured(&mut want, depth, alpha, &off[..depth as usize]);
            crate::ggm::clear_lsbs(&mut want);
            let c = Block(77);
            want[alpha] = Block(want.iter().fold(c.0, |a, x| a ^ x.0));
            let plan = Plan { subs: Vec::new(), punct: Some(Punctured { depth, alpha, off, c, known: false }) };
            let mut got = vec![Block(5); 1 << depth];
            let mut j = GgmJob::new(&mut got, &plan);
            while j.step() {}
            assert_eq!(got, want, "alpha {alpha}");
        }
    }

    #[test]
    fn lsbs_at_any_offset() {
        let x: Vec<Block> = (0..300u128).map(|i| Block(i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835) >> 3)).collect();
        for at in [0usize, 1, 63, 64, 70] {
            let mut w = vec![0u64; (at + 300).div_ceil(64)];
            or_lsbs(&x, &mut w, at);
            for i in 0..(at + 300) {
                let want = i >= at && x[i - at].lsb();
                assert_eq!((w[i / 64] >> (i % 64)) & 1 == 1, want, "at {at} bit {i}");
            }
        }
    }

    #[test]
    fn offsets_match_scalar() {
        let key = Block(77);
        let aes = Aes128::new(key);
        let keys = RoundKeys::new(key);
        let k = 589_824u32;
        let mut got = vec![0u32; 4 * 64];
        lpn_offsets(&keys, &aes, 5, 1000, 64, k, &mut got);
        let mut c: Vec<Block> = (0..64u128).map(|m| Block((5u128 << 64) | (1000 + m))).collect();
        aes.encrypt_blocks(&mut c);
        for (m, x) in c.iter().enumerate() {
            for q in 0..4 {
                let w = (x.0 >> (32 * q)) as u32;
                assert_eq!(got[4 * m + q], (((w as u64 * k as u64) >> 32) as u32) * 16);
            }
        }
    }

    #[test]
    fn offsets16_match_scalar() {
        let key = Block(78);
        let aes = Aes128::new(key);
        let keys = RoundKeys::new(key);
        for k in [1u32 << 16, 1 << 10, 2] {
            assert_eq!(words_per_block(k), 8);
            let mut got = vec![0u32; 8 * 64];
            lpn_offsets(&keys, &aes, 9, 77, 64, k, &mut got);
            let mut c: Vec<Block> = (0..64u128).map(|m| Block((9u128 << 64) | (77 + m))).collect();
            aes.encrypt_blocks(&mut c);
            for (m, x) in c.iter().enumerate() {
                for q in 0..8 {
                    let w = (x.0 >> (16 * q)) as u32 & 0xffff;
                    assert_eq!(got[8 * m + q], (w % k) * 16, "k {k} block {m} word {q}");
                }
            }
        }
        assert_eq!(words_per_block(1 << 17), 4);
        assert_eq!(words_per_block(65_535), 4);
    }
}
