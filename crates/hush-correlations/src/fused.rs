//! Kernel fusion (SilentFlow §III-C eq. 2 and §IV) as a streaming,
//! one-thread-per-party engine shared by SilentFlow and Ferret.
//!
//! The output rows of a batch are y = s ⊕ A·base: s the GGM leaves (the
//! sparse correlation, one tree per 2^h rows), A the public LPN matrix. The
//! two kernels have no data dependency except the final XOR, so instead of
//! running them on two threads over an n-block batch buffer (the earlier
//! design: 4 threads on 2 cores when both parties run, 170 MB buffers that
//! page-fault on first touch, and a copy into the caller's buffer), each
//! party interleaves them tree by tree on its own thread:
//!
//! * one thread per party: when both parties run on a 2-core machine
//!   nothing is oversubscribed, and the CPU analogue of the paper's
//!   concurrent GGM and LPN engines is instruction-level: the LPN reduction
//!   of tree j spends most of its time waiting on L3, so tree j+1's GGM
//!   levels (`simd::GgmJob`, one 16-parent VAES group per step)
//!   and the next rows' index AES are interleaved into it every few rows
//!   (`LpnMatrix::mul_xor_bg`) and run in the shadow of the misses;
//! * the leaves live in two L2-resident scratch trees (2 × 128 KiB at
//!   h = 13: the one being reduced and the one being expanded); the
//!   reduction reads the leaf, XORs the D gathered entries and writes
//!   leaf ⊕ A·v **straight into the caller's buffer**, so the outputs do
//!   not pass through a batch buffer — with non-temporal stores when the
//!   k-vector leaves little room in L2, so that they do not evict it, and
//!   with ordinary stores otherwise, which leave the line-fill buffers to
//!   the gathers ([`crate::lpn::stream_outputs`]) (the receiver's choice
//!   bits, its outputs' lsbs, are taken from the registers on the way);
//! * rows are produced only when the caller asks for them (the batch is a
//!   stream), so there is no n-block buffer at all: a party holds the
//!   k-vector, the next batch's k-vector (filled from the batch's last
//!   rows, allocated at setup) and three trees of scratch — ~20 MB at
//!   FERRET_MAIN instead of ~180 MB, ~2.2 MB at SilentFlow's LPN_B10, and
//!   no page faults after setup;
//! * the batch's secrets from the module / peer (tree roots, red seeds,
//!   SPCOT messages) are taken when the batch starts (`SparseTrees::begin`)
//!   and erased when it ends.
//!
//! Measured (10^7 COTs, both parties running on this 2-core machine,
//! profiled with `perf`): at FERRET_MAIN ~0.12–0.15 s per party, about two
//! thirds of it the L3-bound D-term reduction; at SilentFlow's LPN_B10
//! ~0.07–0.10 s, of which the (now L2-bound) reduction is ~70 %, the GGM
//! levels ~8 % and the index AES ~7 %.
//!
//! `fused = false` keeps the unfused order as a baseline: all trees of a
//! request first, then one LPN pass over the same rows.

use crate::lpn::{LpnMatrix, LpnParams};
pub(crate) use crate::simd::Plan;
use crate::{Error, Result};
use hush_primitives::Block;
use hush_transport::Channel;
use zeroize::Zeroize;

/// The sparse correlation of a batch, tree by tree.
pub(crate) trait SparseTrees {
    /// Starts a batch: module crossings or the peer's SPCOT messages.
    /// `cots` = the base COTs beyond the k-vector (Ferret). Returns the
    /// batch's LPN nonce.
    fn begin(&mut self, ch: &mut dyn Channel, p: &LpnParams, cots: &[Block]) -> Result<u64>;
    /// Tree `i` (2^h rows of `out`): either writes all its leaves (lsb
    /// convention applied, the punctured leaf included), or writes the
    /// seeds of GGM subtrees and pushes their `(start, depth)` onto
    /// `plan.subs`, or describes a punctured tree in `plan.punct`, for the
    /// caller to expand ([`crate::simd::GgmJob`], interleaved with the LPN
    /// reduction). Trees are asked for in increasing order, each at
    /// most once per batch.
    fn plant(
        &mut self,
        ch: &mut dyn Channel,
        p: &LpnParams,
        cots: &[Block],
        i: usize,
        out: &mut [Block],
        plan: &mut Plan,
    ) -> Result<()>;
    /// Called before every request returns while a batch is open (Ferret's
    /// receiver finishes reading the iteration's flight here).
    fn settle(&mut self, _ch: &mut dyn Channel, _p: &LpnParams) -> Result<()> {
        Ok(())
    }
    /// Erases the batch's secrets.
    fn end(&mut self);
}

/// The row stream of one party: the first n − reserve rows of each batch
/// go to the caller, the last `reserve` become the next batch's base.
pub(crate) struct Batches {
    pub(crate) params: LpnParams,
    /// Rows of each batch kept as the next batch's base (k, plus t·h for Ferret).
    pub(crate) reserve: usize,
    pub(crate) base: Vec<Block>,
    next: Vec<Block>,
    /// One tree, for requests that start or end inside a tree.
    scratch: Vec<Block>,
    scratch_tree: Option<usize>,
    lpn: Option<LpnMatrix>,
    plan: Plan,
    /// Two trees of GGM leaves (the current one and the next, expanded
    /// while the current one's LPN rows are reduced).
    pair: Vec<Block>,
    /// One tree's output lsbs (the receiver's choice bits).
    lsb_tree: Vec<u64>,
    /// Next row of the current batch (None: no batch started).
    pos: Option<usize>,
    pub(crate) batch: u64,
    pub(crate) produced: u64,
    pub(crate) fused: bool,
    /// Set when a batch failed: the source refuses to produce more.
    failed: bool,
}

impl Drop for Batches {
    fn drop(&mut self) {
        self.base.zeroize();
        self.next.zeroize();
        self.scratch.zeroize();
        self.pair.zeroize();
        self.lsb_tree.zeroize();
        self.plan.wipe();
    }
}

impl Batches {
    pub(crate) fn new(params: LpnParams, reserve: usize, base: Vec<Block>, fused: bool) -> Self {
        assert_eq!(base.len(), reserve);
        let mut b = crate::lpn::huge_blocks(reserve);
        b.copy_from_slice(&base);
        let mut base = base;
        base.zeroize();
        Batches {
            params,
            reserve,
            base: b,
            // Allocated (and faulted in) here, at setup, not in the first batch.
            next: crate::lpn::huge_blocks(reserve),
            scratch: Vec::new(),
            scratch_tree: None,
            lpn: None,
            plan: Plan::default(),
            pair: Vec::new(),
            lsb_tree: Vec::new(),
            pos: None,
            batch: 0,
            produced: 0,
            fused,
            failed: false,
        }
    }

    /// Fills `out` with the next rows of the stream, starting batches as
    /// needed; `lsbs`: words (zeroed, ⌈len/64⌉) that receive the lsb of
    /// every output (the receiver's choice bits), taken per tree while the
    /// tree is in L2.
    pub(crate) fn fill(
        &mut self,
        ch: &mut dyn Channel,
        out: &mut [Block],
        trees: &mut impl SparseTrees,
        lsbs: Option<&mut [u64]>,
    ) -> Result<()> {
        let r = self.fill_inner(ch, out, trees, lsbs);
        if r.is_err() {
            self.failed = true;
            self.next.zeroize();
            self.scratch.zeroize();
            self.pair.zeroize();
            self.lsb_tree.zeroize();
            self.plan.wipe();
            self.scratch_tree = None;
            trees.end();
        }
        r
    }

    fn fill_inner(
        &mut self,
        ch: &mut dyn Channel,
        out: &mut [Block],
        trees: &mut impl SparseTrees,
        mut lsbs: Option<&mut [u64]>,
    ) -> Result<()> {
        let p = self.params;
        let usable = p.n - self.reserve;
        let mut done = 0;
        while done < out.len() {
            if self.failed {
                return Err(Error::Invalid("an earlier batch of this COT source failed".into()));
            }
            let pos = match self.pos {
                Some(x) => x,
                None => {
                    let nonce = trees.begin(ch, &p, &self.base[p.k..])?;
                    self.lpn = Some(LpnMatrix::new(nonce, p.k));
                    self.scratch_tree = None;
                    self.pos = Some(0);
                    0
                }
            };
            let m = (usable - pos).min(out.len() - done);
            let bits = lsbs.as_deref_mut().map(|w| (w, done));
            self.rows(ch, trees, pos, Dst::Out(&mut out[done..done + m]), bits)?;
            done += m;
            self.pos = Some(pos + m);
            if pos + m == usable {
                // The batch's last rows become the next base.
                if self.next.len() != self.reserve {
                    self.next = crate::lpn::huge_blocks(self.reserve);
                }
                self.rows(ch, trees, usable, Dst::Next, None)?;
                std::mem::swap(&mut self.base, &mut self.next);
                trees.end();
                self.scratch.zeroize();
                self.pair.zeroize();
                self.lsb_tree.zeroize();
                self.plan.wipe();
                self.scratch_tree = None;
                self.pos = None;
                self.batch += 1;
            }
        }
        if self.pos.is_some() {
            trees.settle(ch, &p)?;
        }
        self.produced += out.len() as u64;
        Ok(())
    }

    /// Rows `r0..r0 + dst.len()` of the current batch into `dst`; `bits`:
    /// (words, bit of dst[0]) for the outputs' lsbs.
    fn rows(
        &mut self,
        ch: &mut dyn Channel,
        trees: &mut impl SparseTrees,
        r0: usize,
        dst: Dst<'_>,
        mut bits: Option<(&mut [u64], usize)>,
    ) -> Result<()> {
        let p = self.params;
        let l = p.leaves();
        let Batches { base, next, scratch, scratch_tree, lpn, fused, plan, pair, lsb_tree, .. } = self;
        let lpn = lpn.as_ref().expect("batch started");
        let (v, cots) = base.split_at(p.k);
        let dst: &mut [Block] = match dst {
            Dst::Out(o) => o,
            Dst::Next => &mut next[..],
        };
        let len = dst.len();
        let (mut r, mut d) = (r0, 0);
        while d < len {
            let (tree, off) = (r / l, r % l);
            if off == 0 && len - d >= l {
                // Whole trees straight into the destination.
                let whole = (len - d) / l;
                let span = &mut dst[d..d + whole * l];
                if *fused {
                    // Tree j's LPN reduction with tree j+1's GGM expansion
                    // interleaved (SilentFlow §IV fusion on one core).
                    // GGM leaves go to two L2-resident scratch trees; the
                    // reduction reads them and writes leaf ⊕ A·v to the
                    // destination.
                    pair.resize(2 * l, Block::ZERO);
                    lsb_tree.resize(l.div_ceil(64), 0);
                    // Non-temporal stores only when the k-vector leaves
                    // little room in L2 (`lpn::stream_outputs`).
                    let nt = crate::lpn::stream_outputs(p.k);
                    plan.wipe();
                    trees.plant(ch, &p, cots, tree, &mut pair[..l], plan)?;
                    expand_plan(&mut pair[..l], plan);
                    for (j, t) in span.chunks_mut(l).enumerate() {
                        let (a, b) = pair.split_at_mut(l);
                        let (cur, nxt) = if j % 2 == 0 { (a, b) } else { (b, a) };
                        plan.wipe();
                        if j + 1 < whole {
                            trees.plant(ch, &p, cots, tree + j + 1, nxt, plan)?;
                        }
                        let mut job = crate::simd::GgmJob::new(nxt, plan);
                        // The receiver's choice bits are taken from
                        // registers on the way.
                        let lw = bits.as_ref().map(|_| &mut lsb_tree[..]);
                        lpn.mul_add_bg(v, (tree + j) * l, Some(cur), t, nt, lw, &mut || job.step());
                        if let Some((w, at)) = bits.as_mut() {
                            crate::simd::or_bits(w, *at + d + j * l, lsb_tree, l);
                        }
                    }
                } else {
                    for (j, t) in span.chunks_mut(l).enumerate() {
                        plan.wipe();
                        trees.plant(ch, &p, cots, tree + j, t, plan)?;
                        expand_plan(t, plan);
                    }
                    lpn.mul_xor(v, r, span);
                    if let Some((w, at)) = bits.as_mut() {
                        crate::simd::or_lsbs(span, w, *at + d);
                    }
                }
                r += whole * l;
                d += whole * l;
                continue;
            }
            // Part of a tree: through the scratch tree.
            if *scratch_tree != Some(tree) {
                scratch.resize(l, Block::ZERO);
                plan.wipe();
                trees.plant(ch, &p, cots, tree, scratch, plan)?;
                expand_plan(scratch, plan);
                lpn.mul_xor(v, tree * l, scratch);
                *scratch_tree = Some(tree);
            }
            let take = (l - off).min(len - d);
            dst[d..d + take].copy_from_slice(&scratch[off..off + take]);
            if let Some((w, at)) = bits.as_mut() {
                crate::simd::or_lsbs(&dst[d..d + take], w, *at + d);
            }
            r += take;
            d += take;
        }
        Ok(())
    }
}

/// Carries out a plan at once: subtrees with [`crate::ggm::expand_box`]
/// (BOX order, SilentFlow §IV), a punctured tree with the level job.
fn expand_plan(t: &mut [Block], plan: &Plan) {
    if plan.punct.is_some() {
        let mut j = crate::simd::GgmJob::new(t, plan);
        while j.step() {}
        return;
    }
    for &(start, d) in &plan.subs {
        crate::ggm::expand_box(&mut t[start..start + (1usize << d)], d);
    }
}

enum Dst<'a> {
    Out(&'a mut [Block]),
    Next,
}

/// Runs one whole batch of `p` into `out` (n rows, e.g. a bootstrapping
/// iteration): the same fused order as [`Batches`], without the stream.
pub(crate) fn whole_batch(
    ch: &mut dyn Channel,
    p: &LpnParams,
    base: &[Block],
    out: &mut [Block],
    trees: &mut impl SparseTrees,
) -> Result<()> {
    assert_eq!(out.len(), p.n);
    let (v, cots) = base.split_at(p.k);
    let nonce = trees.begin(ch, p, cots);
    let r = nonce.and_then(|nonce| {
        let lpn = LpnMatrix::new(nonce, p.k);
        let mut plan = Plan::default();
        for (i, t) in out.chunks_mut(p.leaves()).enumerate() {
            plan.wipe();
            trees.plant(ch, p, cots, i, t, &mut plan)?;
            expand_plan(t, &plan);
            lpn.mul_xor(v, i * p.leaves(), t);
        }
        plan.wipe();
        Ok(())
    });
    trees.end();
    r
}
