//! Batched DCF evaluation over a structure-of-arrays key layout.
//!
//! [`DcfKeyBatch`] holds many keys of one shape (party, input bits, output
//! bits, lanes) laid out for evaluation, not for transport: keys are grouped
//! by [`GROUP`] = 32 and, inside a group, the seed corrections (and value
//! corrections) of one tree level are contiguous, level after level. One
//! group's whole correction stream (32 keys × n levels × 16 bytes = 16 KiB
//! for n = 32) is therefore read front to back exactly once, and the
//! evaluator's state (32 seeds, control bits, accumulators) never leaves
//! registers. Building a batch ([`DcfKeyBatch::push`]) is the offline step;
//! evaluation ([`DcfKeyBatch::eval`]) parses nothing.
//!
//! **Kernels.** On x86-64 with AVX-512 (F, BW) and VAES the evaluator keeps
//! four 128-bit seeds per zmm register and walks a group of 32 keys (one-bit
//! outputs: eight seed registers, one AES chain each; the tree is n − ν
//! levels deep and ends in the early-termination table of [`crate::dcf`],
//! whose entry is picked per key with variable shifts) or 16 keys (wider
//! outputs: four seed and four value registers) through all its levels:
//! the fixed-key MMO hash of [`crate::ggm`] with VAES (round keys in
//! registers), the direction bit xored into each seed under a lane mask,
//! seed corrections applied with a masked XOR selected by the control bits,
//! control and one-bit value corrections handled as 8-bit lane masks. At
//! SIMD level avx2 (see [`hush_primitives::simd`]) an AES-NI evaluator walks
//! the same layout with eight AES blocks in flight (eight keys per level
//! for one-bit outputs, four keys' seed and value blocks otherwise), control
//! and value bits in scalar registers; at level portable a portable
//! evaluator runs the same layout with AES for a group in flight.
//! Both compute exactly the function of the scalar [`crate::dcf_eval`]
//! (BCGGIKR21 §3 Eval), bit for bit; the tests compare them.
//!
//! **Slot order.** Per-key words (control-bit corrections, one-bit value
//! corrections) are stored in key order; 128-bit-wide items (root seeds,
//! seed corrections, value corrections, leaf corrections) are stored in
//! *slot* order, chosen so that seed register z = 2w + h holds the keys
//! whose per-key words sit in the odd (h = 1) or even (h = 0) lanes of
//! per-key vector w: key q = 8w + 2k + h of a group is slot 4(2w + h) + k.
//! Lane masks then move between the two views with one shift and an AND.
//!
//! **Memory.** For 2×10^5 keys the arrays take ~90 MB (one-bit outputs,
//! 32-bit inputs) to ~200 MB (ReLU); they are requested on transparent huge
//! pages and scrubbed on drop with one `memset` (see `mem`). Evaluation
//! prefetches the next group's correction words one level at a time.
//!
//! Evaluation time depends only on public data (the number of keys, their
//! shape and the inputs' count), never on key contents or inputs: both
//! kernels are branch-free in secret data.

// The kernels walk several per-register arrays in lockstep by index.
#![allow(clippy::needless_range_loop)]

use crate::dcf::DcfKey;
use crate::{ggm, mask, Error};
use hush_primitives::simd::{self, Level};
use hush_primitives::Block;
use zeroize::Zeroize;

/// Keys per group of the batch layout.
pub const GROUP: usize = 32;

/// Slot (position of the key's 128-bit items inside its group) of key `q`.
#[inline(always)]
const fn slot(q: usize) -> usize {
    let (w, l) = (q / 8, q % 8);
    4 * (2 * w + (l & 1)) + l / 2
}

/// Key index (inside the group) of slot `p` — the inverse of [`slot`].
#[inline(always)]
const fn key_of_slot(p: usize) -> usize {
    let (z, k) = (p / 4, p % 4);
    8 * (z / 2) + 2 * k + (z & 1)
}

/// Many DCF keys of one shape in the evaluation layout (see the module
/// docs). Zeroized on drop.
#[derive(Clone, Default)]
pub struct DcfKeyBatch {
    len: usize,
    party: u8,
    bits: u32,
    out_bits: u32,
    lanes: u32,
    /// Tree levels with correction words (n − ν, ν the early-termination
    /// levels of one-bit keys; n otherwise).
    depth: u32,
    /// Root seeds, slot order: `s0[g * GROUP + p]`.
    s0: Vec<u128>,
    /// Seed corrections: `scw[(g * bits + i) * GROUP + p]`.
    scw: Vec<u128>,
    /// Value corrections of keys with out_bits > 32 (unless packed):
    /// `vcw[((g * depth + i) * GROUP + p) * lanes + l]`.
    vcw: Vec<u64>,
    /// The same for out_bits ≤ 32 (narrow: half the memory traffic).
    vcw32: Vec<u32>,
    /// Leaf corrections: `leaf[(g * GROUP + p) * lw + l]`, lw = lanes, or 2
    /// (the 128-bit early-termination table) for one-bit keys.
    leaf: Vec<u64>,
    /// Control-bit corrections, key order, bit n−1−i = level i (the bit of
    /// x consumed at level i).
    tl: Vec<u64>,
    tr: Vec<u64>,
    /// Packed mode: one-bit value corrections, key order, bit n−1−i = level i.
    vbits: Vec<u64>,
}

/// The per-shape constants of a group (see [`GroupMut`]).
#[derive(Clone, Copy)]
pub(crate) struct GroupShape {
    n: usize,
    nl: usize,
    lw: usize,
    packed: bool,
    narrow: bool,
    depth: u32,
    nu: u32,
    om: u64,
    /// Early-termination table bits of one-bit keys.
    tb: u32,
}

/// One group's part of every array of a [`DcfKeyBatch`] (disjoint from
/// every other group's): what a parallel task fills.
pub(crate) struct GroupMut<'a> {
    shape: GroupShape,
    s0: &'a mut [u128],
    scw: &'a mut [u128],
    v32: &'a mut [u32],
    v64: &'a mut [u64],
    leaf: &'a mut [u64],
    tl: &'a mut [u64],
    tr: &'a mut [u64],
    vb: &'a mut [u64],
}

impl GroupMut<'_> {
    /// Writes key `q` of the group from its parts: exactly what decoding
    /// its encoding ([`crate::dcf::KeyParts::write`], read back by
    /// `read_parts_shaped`) writes — the same fields reduced to the same
    /// widths (`tests::extend_with_matches_extend_encoded`).
    #[inline]
    pub(crate) fn set(&mut self, q: usize, k: &crate::dcf::KeyParts<'_>) {
        let GroupShape { n, nl, lw, packed, narrow, depth, nu, om, tb } = self.shape;
        let st = if packed { 2 } else { 2 + nl };
        let p = slot(q);
        self.s0[p] = k.s0;
        let cw = &k.cw[..n * st];
        let scw = &mut self.scw[..n * GROUP];
        for (i, c) in cw.chunks_exact(st).enumerate() {
            scw[i * GROUP + p] = (c[0] as u128) | ((c[1] as u128) << 64);
        }
        if !packed && narrow && nl == 2 {
            // Two-lane keys (ReLU): both lanes of a level side by side.
            let v32 = &mut self.v32[..n * GROUP * 2];
            for (i, c) in cw.chunks_exact(st).enumerate() {
                let at = (i * GROUP + p) * 2;
                v32[at] = (c[2] & om) as u32;
                v32[at + 1] = (c[3] & om) as u32;
            }
        } else if !packed && narrow {
            for (i, row) in self.v32.chunks_exact_mut(GROUP * nl).take(n).enumerate() {
                for l in 0..nl {
                    row[p * nl + l] = (k.cw[i * st + 2 + l] & om) as u32;
                }
            }
        } else if !packed {
            for (i, row) in self.v64.chunks_exact_mut(GROUP * nl).take(n).enumerate() {
                for l in 0..nl {
                    row[p * nl + l] = k.cw[i * st + 2 + l] & om;
                }
            }
        } else {
            self.vb[q] = rev(k.vbits & mask(depth), depth) << nu;
        }
        let leaf = if packed {
            [k.leaf[0] & mask(tb.min(64)), if tb > 64 { k.leaf[1] & mask(tb - 64) } else { 0 }]
        } else {
            let mut v = [0u64; 2];
            for l in 0..nl {
                v[l] = k.leaf[l] & om;
            }
            v
        };
        for l in 0..lw {
            self.leaf[p * lw + l] = leaf[l];
        }
        self.tl[q] = rev(k.tl & mask(depth), depth) << nu;
        self.tr[q] = rev(k.tr & mask(depth), depth) << nu;
    }
}

impl Zeroize for DcfKeyBatch {
    fn zeroize(&mut self) {
        mem::scrub(&mut self.s0);
        mem::scrub(&mut self.scw);
        mem::scrub(&mut self.vcw);
        mem::scrub(&mut self.vcw32);
        mem::scrub(&mut self.leaf);
        mem::scrub(&mut self.tl);
        mem::scrub(&mut self.tr);
        mem::scrub(&mut self.vbits);
        self.len = 0;
    }
}

/// Memory of the (large: ~100 MB for 2×10^5 keys) batch arrays.
mod mem {
    /// Plain integer element types (all-zero bytes is a valid value).
    pub(super) trait Plain: Copy + Default + Send {}
    impl Plain for u32 {}
    impl Plain for u64 {}
    impl Plain for u128 {}

    /// A vector with room for `n` elements whose pages the kernel is asked
    /// to back with transparent huge pages (Linux `MADV_HUGEPAGE` on the
    /// 2 MiB-aligned interior): ~50× fewer page faults when the batch is
    /// built and far cheaper unmapping when it is freed. A hint only.
    pub(super) fn with_capacity<T: Plain>(n: usize) -> Vec<T> {
        let v = Vec::with_capacity(n);
        #[cfg(target_os = "linux")]
        {
            const HUGE: usize = 2 << 20;
            let bytes = v.capacity() * std::mem::size_of::<T>();
            let start = v.as_ptr() as usize;
            let lo = start.next_multiple_of(HUGE);
            let hi = (start + bytes) / HUGE * HUGE;
            if bytes >= 4 * HUGE && hi > lo {
                // SAFETY: [lo, hi) lies inside this vector's own allocation;
                // MADV_HUGEPAGE only changes how the kernel backs the pages,
                // never their contents or validity.
                unsafe {
                    libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE);
                }
            }
        }
        let mut v = v;
        prefault(&mut v);
        v
    }

    /// First-touches a large vector's spare pages on every core (one
    /// element per 4 KiB), so that the kernel's zeroing of fresh (huge)
    /// pages — the largest item of building an FSS batch on hosts where it
    /// is slow — is split across the cores instead of landing on the one
    /// thread that fills the batch. The stored zeros are overwritten when
    /// the batch is filled; the vector's length is unchanged.
    fn prefault<T: Plain>(v: &mut Vec<T>) {
        use rayon::prelude::*;
        const PAGE: usize = 4096;
        let step = (PAGE / std::mem::size_of::<T>().max(1)).max(1);
        let spare = v.spare_capacity_mut();
        if spare.len() * std::mem::size_of::<T>() < (8 << 20) {
            return;
        }
        spare.par_chunks_mut(step * 64).for_each(|c| {
            for p in c.chunks_mut(step) {
                p[0].write(T::default());
            }
        });
    }

    /// Overwrites the whole allocation (capacity) with zeros and empties
    /// the vector. One vectorised `memset` (the element-wise volatile loop
    /// of `zeroize` costs several ms per 100 MB); the pointer then escapes
    /// through `black_box` and a compiler fence, so the stores cannot be
    /// removed as dead before the free.
    pub(super) fn scrub<T: Plain>(v: &mut Vec<T>) {
        let cap = v.capacity();
        // SAFETY: the allocation holds `cap` elements of a plain integer
        // type, for which all-zero bytes is a valid value.
        unsafe { std::ptr::write_bytes(v.as_mut_ptr(), 0, cap) };
        std::hint::black_box(v.as_mut_ptr());
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
        v.clear();
    }
}

impl Drop for DcfKeyBatch {
    fn drop(&mut self) {
        self.zeroize();
    }
}

impl std::fmt::Debug for DcfKeyBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DcfKeyBatch")
            .field("len", &self.len)
            .field("party", &self.party)
            .field("bits", &self.bits)
            .field("out_bits", &self.out_bits)
            .field("lanes", &self.lanes)
            .finish_non_exhaustive()
    }
}

/// Reverses the low `n` bits of `v` (bit i ↦ bit n−1−i).
#[inline]
fn rev(v: u64, n: u32) -> u64 {
    if n == 0 {
        0
    } else {
        v.reverse_bits() >> (64 - n)
    }
}

impl DcfKeyBatch {
    /// An empty batch; the first pushed key fixes the shape.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty batch with room for `n` keys of the given shape.
    pub fn with_capacity(n: usize, bits: u32, out_bits: u32, lanes: u32) -> Self {
        let g = n.div_ceil(GROUP) * GROUP;
        let packed = out_bits == 1 && lanes == 1;
        let nb = crate::dcf::depth(bits, out_bits, lanes) as usize;
        let lw = if packed { 2 } else { lanes as usize };
        DcfKeyBatch {
            s0: mem::with_capacity(g),
            scw: mem::with_capacity(g * nb),
            vcw: mem::with_capacity(if packed || out_bits <= 32 { 0 } else { g * nb * lanes as usize }),
            vcw32: mem::with_capacity(if packed || out_bits > 32 { 0 } else { g * nb * lanes as usize }),
            leaf: mem::with_capacity(g * lw),
            tl: mem::with_capacity(g),
            tr: mem::with_capacity(g),
            vbits: mem::with_capacity(if packed { g } else { 0 }),
            ..Self::default()
        }
    }

    /// Builds a batch from keys of one shape.
    pub fn from_keys<K: AsRef<DcfKey>>(keys: &[K]) -> Result<Self, Error> {
        let mut b = match keys.first() {
            Some(k) => {
                let k = k.as_ref();
                Self::with_capacity(keys.len(), k.bits, k.out_bits, k.lanes)
            }
            None => Self::new(),
        };
        for k in keys {
            b.push(k.as_ref())?;
        }
        Ok(b)
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn party(&self) -> u8 {
        self.party
    }
    pub fn bits(&self) -> u32 {
        self.bits
    }
    pub fn out_bits(&self) -> u32 {
        self.out_bits
    }
    pub fn lanes(&self) -> u32 {
        self.lanes
    }

    fn packed(&self) -> bool {
        self.out_bits == 1 && self.lanes == 1
    }
    /// Value corrections stored as u32 (out_bits ≤ 32, reduced already).
    fn narrow(&self) -> bool {
        self.out_bits <= 32
    }
    /// Value correction at a flat index (portable evaluator).
    #[inline(always)]
    fn vcw_at(&self, at: usize) -> u64 {
        if self.narrow() {
            self.vcw32[at] as u64
        } else {
            self.vcw[at]
        }
    }
    /// u64 words of leaf correction per key.
    fn lw(&self) -> usize {
        if self.packed() {
            2
        } else {
            self.lanes as usize
        }
    }

    /// Appends a key (the offline conversion into the evaluation layout).
    /// Errors if its shape differs from the keys already in the batch.
    pub fn push(&mut self, k: &DcfKey) -> Result<(), Error> {
        if self.len == 0 {
            self.party = k.party;
            self.bits = k.bits;
            self.out_bits = k.out_bits;
            self.lanes = k.lanes;
            self.depth = crate::dcf::depth(k.bits, k.out_bits, k.lanes);
        } else if (k.party, k.bits, k.out_bits, k.lanes) != (self.party, self.bits, self.out_bits, self.lanes) {
            return Err(Error::Header { what: "DcfKeyBatch", reason: "key shape differs from the batch" });
        }
        let n = self.depth as usize;
        let nu = self.bits - self.depth;
        let nl = self.lanes as usize;
        let lw = self.lw();
        let packed = self.packed();
        let (g, q) = (self.len / GROUP, self.len % GROUP);
        if q == 0 {
            let z = GROUP;
            self.s0.resize(self.s0.len() + z, 0);
            self.scw.resize(self.scw.len() + z * n, 0);
            if !packed {
                if self.narrow() {
                    self.vcw32.resize(self.vcw32.len() + z * n * nl, 0);
                } else {
                    self.vcw.resize(self.vcw.len() + z * n * nl, 0);
                }
            }
            self.leaf.resize(self.leaf.len() + z * lw, 0);
            self.tl.resize(self.tl.len() + z, 0);
            self.tr.resize(self.tr.len() + z, 0);
            if packed {
                self.vbits.resize(self.vbits.len() + z, 0);
            }
        }
        let p = slot(q);
        let w = k.cw.len() / n.max(1);
        self.s0[g * GROUP + p] = k.s0;
        for i in 0..n {
            let lv = &k.cw[i * w..(i + 1) * w];
            self.scw[(g * n + i) * GROUP + p] = (lv[0] as u128) | ((lv[1] as u128) << 64);
            if !packed {
                for l in 0..nl {
                    let at = ((g * n + i) * GROUP + p) * nl + l;
                    if self.narrow() {
                        self.vcw32[at] = lv[2 + l] as u32;
                    } else {
                        self.vcw[at] = lv[2 + l];
                    }
                }
            }
        }
        for l in 0..lw {
            self.leaf[(g * GROUP + p) * lw + l] = k.leaf[l];
        }
        // Bit n−1−i of x is consumed at level i (i < depth).
        let kq = g * GROUP + q;
        self.tl[kq] = rev(k.tl, self.depth) << nu;
        self.tr[kq] = rev(k.tr, self.depth) << nu;
        if packed {
            self.vbits[kq] = rev(k.vbits, self.depth) << nu;
        }
        self.len += 1;
        Ok(())
    }

    /// Appends `m` keys decoded straight from their encodings, without a
    /// [`DcfKey`] (two allocations) per key: key j's DCF encoding
    /// ([`DcfKey::to_bytes`]) is `enc[j * stride + off ..]`. When the batch
    /// holds a whole number of groups, the new groups are decoded in
    /// parallel (rayon), each into its own part of the arrays. Errors (as
    /// [`DcfKey::from_bytes`] would, then the batch is emptied) on a
    /// malformed key or one whose shape differs from the batch's or from
    /// `(bits, out_bits, lanes)`. The same batch as `from_bytes` then
    /// [`push`](Self::push) per key (`tests::extend_encoded_matches_push`).
    pub fn extend_encoded(
        &mut self,
        enc: &[u8],
        m: usize,
        stride: usize,
        off: usize,
        shape: (u8, u32, u32, u32),
    ) -> Result<(), Error> {
        use rayon::prelude::*;
        let (party, bits, out_bits, lanes) = shape;
        let kl = DcfKey::size_bytes_lanes(bits, out_bits, lanes);
        if m == 0 {
            return Ok(());
        }
        if off + kl > stride || enc.len() != m * stride {
            return Err(Error::Length {
                what: "DcfKeyBatch",
                expected: m * stride,
                got: enc.len(),
            });
        }
        if self.len == 0 {
            self.party = party;
            self.bits = bits;
            self.out_bits = out_bits;
            self.lanes = lanes;
            self.depth = crate::dcf::depth(bits, out_bits, lanes);
        } else if (party, bits, out_bits, lanes)
            != (self.party, self.bits, self.out_bits, self.lanes)
        {
            return Err(Error::Header {
                what: "DcfKeyBatch",
                reason: "key shape differs from the batch",
            });
        }
        if self.len % GROUP != 0 {
            for j in 0..m {
                self.push(&DcfKey::from_bytes(
                    &enc[j * stride + off..j * stride + off + kl],
                )?)?;
            }
            return Ok(());
        }
        let n = self.depth as usize;
        let nu = self.bits - self.depth;
        let nl = self.lanes as usize;
        let lw = self.lw();
        let packed = self.packed();
        let narrow = self.narrow();
        let depth = self.depth;
        let want = (party, bits, out_bits, lanes);
        let work = self.grow_groups(m);
        let st = if packed { 2 } else { 2 + nl };
        let res: Result<(), Error> = work
            .into_par_iter()
            .enumerate()
            .map(|(g, w)| {
                let mut cw = [0u64; crate::dcf::MAX_CW];
                let lo = g * GROUP;
                let res = (|| {
                    for q in 0..GROUP.min(m - lo) {
                        let at = (lo + q) * stride + off;
                        let k = crate::dcf::read_parts_shaped(&enc[at..at + kl], want, &mut cw)?;
                        let p = slot(q);
                        w.s0[p] = k.s0;
                        for (i, row) in w.scw.chunks_exact_mut(GROUP).take(n).enumerate() {
                            row[p] = (cw[i * st] as u128) | ((cw[i * st + 1] as u128) << 64);
                        }
                        if !packed && narrow {
                            // Level i's row of the group: GROUP · nl words.
                            for (i, row) in w.v32.chunks_exact_mut(GROUP * nl).take(n).enumerate() {
                                let v = &cw[i * st + 2..i * st + 2 + nl];
                                for (d, x) in row[p * nl..p * nl + nl].iter_mut().zip(v) {
                                    *d = *x as u32;
                                }
                            }
                        } else if !packed {
                            for (i, row) in w.v64.chunks_exact_mut(GROUP * nl).take(n).enumerate() {
                                row[p * nl..p * nl + nl].copy_from_slice(&cw[i * st + 2..i * st + 2 + nl]);
                            }
                        } else {
                            w.vb[q] = rev(k.vbits, depth) << nu;
                        }
                        for l in 0..lw {
                            w.leaf[p * lw + l] = k.leaf[l];
                        }
                        w.tl[q] = rev(k.tl, depth) << nu;
                        w.tr[q] = rev(k.tr, depth) << nu;
                    }
                    Ok(())
                })();
                cw.zeroize();
                res
            })
            .collect();
        match res {
            Ok(()) => {
                self.len += m;
                Ok(())
            }
            Err(e) => {
                self.zeroize();
                Err(e)
            }
        }
    }

    /// Whether two batches hold the same keys in the same layout, word for
    /// word (tests of the direct fill against the decoder).
    #[doc(hidden)]
    pub fn same_layout_as(&self, b: &DcfKeyBatch) -> bool {
        (self.len, self.party, self.bits, self.out_bits, self.lanes, self.depth)
            == (b.len, b.party, b.bits, b.out_bits, b.lanes, b.depth)
            && self.s0 == b.s0
            && self.scw == b.scw
            && self.vcw == b.vcw
            && self.vcw32 == b.vcw32
            && self.leaf == b.leaf
            && self.tl == b.tl
            && self.tr == b.tr
            && self.vbits == b.vbits
    }

    /// Sets the batch's shape for new keys (when empty) or checks it.
    fn adopt_shape(&mut self, shape: (u8, u32, u32, u32)) -> Result<(), Error> {
        let (party, bits, out_bits, lanes) = shape;
        if self.len == 0 {
            self.party = party;
            self.bits = bits;
            self.out_bits = out_bits;
            self.lanes = lanes;
            self.depth = crate::dcf::depth(bits, out_bits, lanes);
        } else if shape != (self.party, self.bits, self.out_bits, self.lanes) {
            return Err(Error::Header { what: "DcfKeyBatch", reason: "key shape differs from the batch" });
        }
        Ok(())
    }

    /// Grows every array by the groups of `m` new keys (zeroed) and hands
    /// out each new group's part of every array, disjoint from the others
    /// (so the groups are filled in parallel). The caller fills keys
    /// `0..m` and then adds `m` to `len`. Requires a whole number of groups
    /// in the batch already and its shape set.
    fn grow_groups(&mut self, m: usize) -> Vec<GroupMut<'_>> {
        debug_assert_eq!(self.len % GROUP, 0);
        let n = self.depth as usize;
        let nl = self.lanes as usize;
        let lw = self.lw();
        let packed = self.packed();
        let narrow = self.narrow();
        let g0 = self.len / GROUP;
        let groups = m.div_ceil(GROUP);
        let z = groups * GROUP;
        self.s0.resize(self.s0.len() + z, 0);
        self.scw.resize(self.scw.len() + z * n, 0);
        let vn = if packed { 0 } else { z * n * nl };
        if narrow {
            self.vcw32.resize(self.vcw32.len() + vn, 0);
        } else {
            self.vcw.resize(self.vcw.len() + vn, 0);
        }
        self.leaf.resize(self.leaf.len() + z * lw, 0);
        self.tl.resize(self.tl.len() + z, 0);
        self.tr.resize(self.tr.len() + z, 0);
        if packed {
            self.vbits.resize(self.vbits.len() + z, 0);
        }
        fn parts<'a, T>(
            v: &'a mut [T],
            at: usize,
            each: usize,
            groups: usize,
        ) -> Box<dyn Iterator<Item = &'a mut [T]> + 'a> {
            if each == 0 {
                Box::new((0..groups).map(|_| <&mut [T]>::default()))
            } else {
                Box::new(v[at * each..].chunks_mut(each))
            }
        }
        let vs = if packed { 0 } else { GROUP * n * nl };
        let shape = GroupShape {
            n,
            nl,
            lw,
            packed,
            narrow,
            depth: self.depth,
            nu: self.bits - self.depth,
            om: mask(self.out_bits),
            tb: 1u32 << crate::dcf::et_nu(self.bits, self.out_bits, self.lanes),
        };
        let mut work: Vec<GroupMut<'_>> = Vec::with_capacity(groups);
        let mut s0 = parts(&mut self.s0, g0, GROUP, groups);
        let mut scw = parts(&mut self.scw, g0, GROUP * n, groups);
        let mut v32 = parts(&mut self.vcw32, g0, if narrow { vs } else { 0 }, groups);
        let mut v64 = parts(&mut self.vcw, g0, if narrow { 0 } else { vs }, groups);
        let mut leaf = parts(&mut self.leaf, g0, GROUP * lw, groups);
        let mut tl = parts(&mut self.tl, g0, GROUP, groups);
        let mut tr = parts(&mut self.tr, g0, GROUP, groups);
        let mut vb = parts(&mut self.vbits, g0, if packed { GROUP } else { 0 }, groups);
        for _ in 0..groups {
            let mut next = || -> Option<GroupMut<'_>> {
                Some(GroupMut {
                    shape,
                    s0: s0.next()?,
                    scw: scw.next()?,
                    v32: v32.next()?,
                    v64: v64.next()?,
                    leaf: leaf.next()?,
                    tl: tl.next()?,
                    tr: tr.next()?,
                    vb: vb.next()?,
                })
            };
            work.push(next().expect("the arrays were grown by whole groups"));
        }
        work
    }

    /// Appends `m` keys of `shape` (party, bits, out_bits, lanes) built by
    /// `gen` straight into the evaluation layout, in parallel: `gen` is
    /// called once per run of `chunk` groups (`chunk` ≥ 1) with the run's
    /// first key and its groups, and writes each key with
    /// [`GroupMut::set`] — no encoding, no decoding, no key object (the
    /// dealer's direct path, `crate::deal::deal_batch`). Errors if the shape
    /// differs from the batch's, or if the batch does not hold a whole
    /// number of groups (append by whole groups only).
    pub(crate) fn extend_with(
        &mut self,
        m: usize,
        shape: (u8, u32, u32, u32),
        chunk: usize,
        gen: impl Fn(usize, &mut [GroupMut<'_>]) + Sync,
    ) -> Result<(), Error> {
        use rayon::prelude::*;
        if m == 0 {
            return Ok(());
        }
        if self.len % GROUP != 0 {
            return Err(Error::Header { what: "DcfKeyBatch", reason: "direct fill needs a whole number of groups" });
        }
        self.adopt_shape(shape)?;
        let mut work = self.grow_groups(m);
        work.par_chunks_mut(chunk.max(1)).enumerate().for_each(|(c, gs)| gen(c * chunk.max(1) * GROUP, gs));
        drop(work);
        self.len += m;
        Ok(())
    }

    /// Evaluates key i at `xs[i]` (only the low `bits` bits are used):
    /// `out0[i]` gets this party's share of lane 0, `out1[i]` (if given)
    /// lane 1 — each reduced mod 2^out_bits. `party` should be the keys'
    /// party.
    ///
    /// Panics if `xs`, `out0` (or `out1`) do not have [`len`](Self::len)
    /// elements.
    pub fn eval(&self, party: u8, xs: &[u64], out0: &mut [u64], out1: Option<&mut [u64]>) {
        self.eval_with(kernel(), party, xs, out0, out1)
    }

    pub(crate) fn eval_with(&self, k: Kernel, party: u8, xs: &[u64], out0: &mut [u64], mut out1: Option<&mut [u64]>) {
        assert_eq!(xs.len(), self.len, "DcfKeyBatch::eval: inputs and keys differ in length");
        assert_eq!(out0.len(), self.len, "DcfKeyBatch::eval: outputs and keys differ in length");
        if let Some(o) = out1.as_deref() {
            assert_eq!(o.len(), self.len, "DcfKeyBatch::eval: outputs and keys differ in length");
        }
        match k {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the AVX-512 kernel runs only when the CPU has level
            // avx512 (avx512f, avx512bw, vaes, aes; see `kernel`).
            Kernel::Avx512 if Level::Avx512.supported() => unsafe {
                if self.packed() {
                    avx::eval_packed(self, party, xs, out0)
                } else {
                    let o1 = out1.as_deref_mut();
                    match (self.narrow(), self.lanes) {
                        (true, 1) => avx::eval_wide::<true, 1>(self, party, xs, out0, o1),
                        (true, _) => avx::eval_wide::<true, 2>(self, party, xs, out0, o1),
                        (false, 1) => avx::eval_wide::<false, 1>(self, party, xs, out0, o1),
                        (false, _) => avx::eval_wide::<false, 2>(self, party, xs, out0, o1),
                    }
                }
            },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the AES-NI kernel runs only when the CPU has level
            // avx2 (avx2, aes).
            Kernel::Avx2 if Level::Avx2.supported() => unsafe {
                if self.packed() {
                    aesni::eval_packed(self, party, xs, out0)
                } else {
                    aesni::eval_wide(self, party, xs, out0, out1)
                }
            },
            _ => portable(self, party, xs, out0, out1),
        }
    }
}

/// Which evaluator runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Avx512,
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Avx2,
    Portable,
}

/// The evaluator for the current SIMD level
/// ([`hush_primitives::simd::level`]): avx512 runs the AVX-512/VAES
/// kernels, avx2 the AES-NI kernels (eight keys in flight), portable the
/// portable evaluator (whose AES is `hush_primitives::aes`'s software one).
pub(crate) fn kernel() -> Kernel {
    if !cfg!(target_arch = "x86_64") {
        return Kernel::Portable;
    }
    match simd::level() {
        Level::Avx512 => Kernel::Avx512,
        Level::Avx2 => Kernel::Avx2,
        Level::Portable => Kernel::Portable,
    }
}

/// Portable evaluator: the same layout, AES for one group in flight.
fn portable(b: &DcfKeyBatch, party: u8, xs: &[u64], out0: &mut [u64], mut out1: Option<&mut [u64]>) {
    let n = b.depth as usize;
    let nb = b.bits as usize;
    let nu = b.bits - b.depth;
    let nl = b.lanes as usize;
    let lw = b.lw();
    let packed = b.packed();
    let om = mask(b.out_bits);
    let pi = ggm::pi();
    let t0 = (party & 1) as u64;
    let mut buf = [Block::ZERO; 2 * GROUP];
    for g in 0..b.len.div_ceil(GROUP) {
        let base = g * GROUP;
        let m = GROUP.min(b.len - base);
        // Per slot: x, seed, t, accumulators, selected tcw.
        let mut x = [0u64; GROUP];
        let mut s = [0u128; GROUP];
        let mut t = [t0; GROUP];
        let mut acc = [[0u64; 2]; GROUP];
        let mut tsel = [0u64; GROUP];
        let mut vb = [0u64; GROUP];
        for p in 0..GROUP {
            let q = key_of_slot(p);
            if q < m {
                x[p] = xs[base + q];
                tsel[p] = (b.tl[base + q] & !x[p]) | (b.tr[base + q] & x[p]);
                if packed {
                    vb[p] = b.vbits[base + q];
                }
            }
            s[p] = b.s0[base + p];
        }
        for i in 0..n {
            let sh = nb - 1 - i;
            for p in 0..GROUP {
                let d = ((x[p] >> sh) & 1) as u128;
                buf[2 * p] = Block(s[p] ^ d);
                buf[2 * p + 1] = Block(s[p] ^ ggm::TWEAK_V ^ d);
            }
            if packed {
                for p in 0..GROUP {
                    buf[p] = buf[2 * p];
                }
                pi.encrypt_blocks(&mut buf[..GROUP]);
            } else {
                pi.encrypt_blocks(&mut buf);
            }
            for p in 0..GROUP {
                let d = ((x[p] >> sh) & 1) as u128;
                let (bb, vv) = if packed {
                    (buf[p].0 ^ s[p] ^ d, 0)
                } else {
                    (buf[2 * p].0 ^ s[p] ^ d, buf[2 * p + 1].0 ^ s[p] ^ ggm::TWEAK_V ^ d)
                };
                let c = ggm::split_child(bb, vv, packed);
                let tm = t[p].wrapping_neg();
                let tm128 = ((tm as u128) << 64) | tm as u128;
                s[p] = c.seed ^ (b.scw[(g * n + i) * GROUP + p] & tm128);
                if packed {
                    acc[p][0] ^= c.v[0] ^ ((vb[p] >> sh) & t[p] & 1);
                } else {
                    for l in 0..nl {
                        let cw = b.vcw_at(((g * n + i) * GROUP + p) * nl + l);
                        acc[p][l] = acc[p][l].wrapping_add(c.v[l]).wrapping_add(cw & tm);
                    }
                }
                t[p] = c.t ^ ((tsel[p] >> sh) & t[p] & 1);
            }
        }
        if packed {
            // Early termination: entry x_low of the node's 2^ν-bit table.
            for p in 0..GROUP {
                let q = key_of_slot(p);
                if q >= m {
                    continue;
                }
                let cw = (b.leaf[(base + p) * 2] as u128) | ((b.leaf[(base + p) * 2 + 1] as u128) << 64);
                let tab = crate::dcf::leaf_table(s[p]) ^ (cw & (t[p] as u128).wrapping_neg());
                out0[base + q] = (acc[p][0] ^ (tab >> (x[p] & mask(nu))) as u64) & 1;
            }
            s.zeroize();
            acc.zeroize();
            continue;
        }
        let lv: Vec<[u64; 2]> = if nl == 1 {
            s.iter().map(|&sj| [ggm::leaf_one_lane(sj), 0]).collect()
        } else {
            s.iter().map(|&sj| {
                let h = ggm::mmo1(Block(sj), ggm::TWEAK_LEAF).0;
                [h as u64, (h >> 64) as u64]
            })
            .collect()
        };
        for p in 0..GROUP {
            let q = key_of_slot(p);
            if q >= m {
                continue;
            }
            let tm = t[p].wrapping_neg();
            let mut o = [0u64; 2];
            for l in 0..nl {
                let v = acc[p][l].wrapping_add(lv[p][l]).wrapping_add(b.leaf[(base + p) * lw + l] & tm);
                o[l] = if party & 1 == 1 { v.wrapping_neg() } else { v } & om;
            }
            out0[base + q] = o[0];
            if let Some(o1) = out1.as_deref_mut() {
                o1[base + q] = o[1];
            }
        }
        s.zeroize();
        acc.zeroize();
    }
    buf.zeroize();
}

/// The AES-NI evaluator (SIMD level avx2): the layout of the batch, one
/// group of 32 keys at a time in slot order, each level's fixed-key MMO
/// hashes eight keys (eight AES blocks) in flight, the per-key control and
/// value bits in scalar registers (branch-free, as the AVX-512 kernels).
#[cfg(target_arch = "x86_64")]
mod aesni {
    use super::{key_of_slot, DcfKeyBatch, GROUP};
    use crate::{ggm, mask};
    use std::arch::x86_64::*;

    /// AES-128 round keys of [`ggm::FSS_AES_KEY`].
    #[inline(always)]
    unsafe fn round_keys() -> [__m128i; 11] {
        #[inline(always)]
        unsafe fn step(k: __m128i, a: __m128i) -> __m128i {
            let a = _mm_shuffle_epi32::<0xff>(a);
            let mut k = k;
            k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
            k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
            k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
            _mm_xor_si128(k, a)
        }
        let mut r = [_mm_setzero_si128(); 11];
        r[0] = _mm_loadu_si128(ggm::FSS_AES_KEY.0.to_le_bytes().as_ptr() as *const __m128i);
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
        r
    }

    /// MMO of `Z` blocks: π(x) ⊕ x, rounds interleaved (all in flight).
    #[inline(always)]
    unsafe fn mmo<const Z: usize>(rk: &[__m128i; 11], inp: &[__m128i; Z]) -> [__m128i; Z] {
        let mut x = [_mm_setzero_si128(); Z];
        for z in 0..Z {
            x[z] = _mm_xor_si128(inp[z], rk[0]);
        }
        for r in 1..10 {
            for z in 0..Z {
                x[z] = _mm_aesenc_si128(x[z], rk[r]);
            }
        }
        for z in 0..Z {
            x[z] = _mm_xor_si128(_mm_aesenclast_si128(x[z], rk[10]), inp[z]);
        }
        x
    }

    #[inline(always)]
    fn prefetch<T>(p: *const T) {
        // SAFETY: a hint; never faults whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p as *const i8) }
    }

    #[inline(always)]
    unsafe fn ld(p: *const u128) -> __m128i {
        _mm_loadu_si128(p as *const __m128i)
    }

    /// A 128-bit all-ones mask if `t` (0 or 1) is 1.
    #[inline(always)]
    unsafe fn tmask(t: u64) -> __m128i {
        _mm_set1_epi64x(t.wrapping_neg() as i64)
    }

    /// Per-slot inputs and selected control-bit corrections of group `g`
    /// (`vb`: the packed value-bit corrections).
    #[inline(always)]
    fn slot_words(b: &DcfKeyBatch, xs: &[u64], base: usize, packed: bool) -> ([u64; GROUP], [u64; GROUP], [u64; GROUP]) {
        let m = GROUP.min(b.len - base);
        let mut x = [0u64; GROUP];
        let mut tsel = [0u64; GROUP];
        let mut vb = [0u64; GROUP];
        for p in 0..GROUP {
            let q = key_of_slot(p);
            if q < m {
                x[p] = xs[base + q];
                tsel[p] = (b.tl[base + q] & !x[p]) | (b.tr[base + q] & x[p]);
                if packed {
                    vb[p] = b.vbits[base + q];
                }
            }
        }
        (x, tsel, vb)
    }

    /// One-bit outputs (packed layout): per level one MMO per key.
    #[target_feature(enable = "avx2,aes")]
    pub(super) unsafe fn eval_packed(b: &DcfKeyBatch, party: u8, xs: &[u64], out: &mut [u64]) {
        let n = b.depth as usize;
        let nb = b.bits as usize;
        let numask = mask(b.bits - b.depth);
        let rk = round_keys();
        let smask = _mm_set_epi64x(-1, !3);
        let tweak_leaf = _mm_set_epi64x(0, ggm::TWEAK_LEAF as i64);
        let t0 = (party & 1) as u64;
        let ng = b.len.div_ceil(GROUP);
        for g in 0..ng {
            let base = g * GROUP;
            let (x, tsel, vb) = slot_words(b, xs, base, true);
            let mut s = [_mm_setzero_si128(); GROUP];
            for p in 0..GROUP {
                s[p] = ld(b.s0.as_ptr().add(base + p));
            }
            let mut t = [t0; GROUP];
            let mut acc = [0u64; GROUP];
            let scw = b.scw.as_ptr().add(g * n * GROUP);
            let next = b.scw.as_ptr().add(if g + 1 < ng { (g + 1) * n * GROUP } else { g * n * GROUP });
            for i in 0..n {
                for c in 0..8 {
                    prefetch(next.add(i * GROUP + 4 * c));
                }
                let sh = nb - 1 - i;
                let lvl = scw.add(i * GROUP);
                for c in 0..GROUP / 8 {
                    let mut inp = [_mm_setzero_si128(); 8];
                    for j in 0..8 {
                        let p = 8 * c + j;
                        inp[j] = _mm_xor_si128(s[p], _mm_cvtsi64_si128(((x[p] >> sh) & 1) as i64));
                    }
                    let h = mmo::<8>(&rk, &inp);
                    for j in 0..8 {
                        let p = 8 * c + j;
                        let lo = _mm_cvtsi128_si64(h[j]) as u64;
                        let tp = t[p];
                        s[p] = _mm_xor_si128(_mm_and_si128(h[j], smask), _mm_and_si128(ld(lvl.add(p)), tmask(tp)));
                        acc[p] ^= (lo >> 1) ^ ((vb[p] >> sh) & tp);
                        t[p] = (lo & 1) ^ ((tsel[p] >> sh) & tp & 1);
                    }
                }
            }
            // Early-termination leaf: bit x_low of H_4(s) ⊕ t·CW.
            let lp = b.leaf.as_ptr().add(base * 2) as *const u128;
            let m = GROUP.min(b.len - base);
            for c in 0..GROUP / 8 {
                let mut inp = [_mm_setzero_si128(); 8];
                for j in 0..8 {
                    inp[j] = _mm_xor_si128(s[8 * c + j], tweak_leaf);
                }
                let tab = mmo::<8>(&rk, &inp);
                for j in 0..8 {
                    let p = 8 * c + j;
                    let v = _mm_xor_si128(tab[j], _mm_and_si128(ld(lp.add(p)), tmask(t[p])));
                    let lo = _mm_cvtsi128_si64(v) as u64;
                    let hi = _mm_extract_epi64::<1>(v) as u64;
                    let e = x[p] & numask;
                    let w = lo ^ ((lo ^ hi) & ((e >> 6) & 1).wrapping_neg());
                    let q = key_of_slot(p);
                    if q < m {
                        out[base + q] = (acc[p] ^ (w >> (e & 63))) & 1;
                    }
                }
            }
            for p in 0..GROUP {
                s[p] = _mm_setzero_si128();
            }
            std::hint::black_box(&s);
        }
    }

    /// Wider outputs (one or two lanes): per level two MMOs per key (seed
    /// and value blocks), four keys (eight blocks) in flight.
    #[target_feature(enable = "avx2,aes")]
    pub(super) unsafe fn eval_wide(b: &DcfKeyBatch, party: u8, xs: &[u64], out0: &mut [u64], mut out1: Option<&mut [u64]>) {
        let n = b.bits as usize;
        let nl = b.lanes as usize;
        let lw = b.lw();
        let om = mask(b.out_bits);
        let rk = round_keys();
        let smask = _mm_set_epi64x(-1, !1);
        let tweak_v = _mm_set_epi64x(0, ggm::TWEAK_V as i64);
        let tweak_leaf = _mm_set_epi64x(0, ggm::TWEAK_LEAF as i64);
        let t0 = (party & 1) as u64;
        let narrow = b.out_bits <= 32;
        let es = if narrow { 4 } else { 8 };
        let vbase: *const u8 = if narrow { b.vcw32.as_ptr() as *const u8 } else { b.vcw.as_ptr() as *const u8 };
        let vstride = GROUP * nl;
        let ng = b.len.div_ceil(GROUP);
        for g in 0..ng {
            let base = g * GROUP;
            let (x, tsel, _) = slot_words(b, xs, base, false);
            let mut s = [_mm_setzero_si128(); GROUP];
            for p in 0..GROUP {
                s[p] = ld(b.s0.as_ptr().add(base + p));
            }
            let mut t = [t0; GROUP];
            let mut acc = [_mm_setzero_si128(); GROUP];
            let scw = b.scw.as_ptr().add(g * n * GROUP);
            let gn = if g + 1 < ng { g + 1 } else { g };
            let nscw = b.scw.as_ptr().add(gn * n * GROUP);
            let nvcw = vbase.add(gn * n * vstride * es);
            for i in 0..n {
                for c in 0..8 {
                    prefetch(nscw.add(i * GROUP + 4 * c));
                }
                for c in 0..(GROUP * nl * es).div_ceil(64) {
                    prefetch(nvcw.add(i * vstride * es + 64 * c));
                }
                let sh = n - 1 - i;
                let lvl = scw.add(i * GROUP);
                let vl = vbase.add(((g * n + i) * vstride) * es);
                for c in 0..GROUP / 4 {
                    let mut inp = [_mm_setzero_si128(); 8];
                    for j in 0..4 {
                        let p = 4 * c + j;
                        let a = _mm_xor_si128(s[p], _mm_cvtsi64_si128(((x[p] >> sh) & 1) as i64));
                        inp[2 * j] = a;
                        inp[2 * j + 1] = _mm_xor_si128(a, tweak_v);
                    }
                    let h = mmo::<8>(&rk, &inp);
                    for j in 0..4 {
                        let p = 4 * c + j;
                        let hs = h[2 * j];
                        let tp = t[p];
                        let tm = tmask(tp);
                        let lo = _mm_cvtsi128_si64(hs) as u64;
                        s[p] = _mm_xor_si128(_mm_and_si128(hs, smask), _mm_and_si128(ld(lvl.add(p)), tm));
                        let cw = if narrow {
                            let q = (vl as *const u32).add(p * nl);
                            if nl == 2 {
                                _mm_set_epi64x(*q.add(1) as i64, *q as i64)
                            } else {
                                _mm_cvtsi64_si128(*q as i64)
                            }
                        } else {
                            let q = (vl as *const u64).add(p * nl);
                            if nl == 2 {
                                _mm_loadu_si128(q as *const __m128i)
                            } else {
                                _mm_cvtsi64_si128(*q as i64)
                            }
                        };
                        acc[p] = _mm_add_epi64(_mm_add_epi64(acc[p], h[2 * j + 1]), _mm_and_si128(cw, tm));
                        t[p] = (lo & 1) ^ ((tsel[p] >> sh) & tp & 1);
                    }
                }
            }
            // Leaf: H_4(s) (two lanes) or the seed's high word (one lane).
            let lp = b.leaf.as_ptr().add(base * lw);
            let m = GROUP.min(b.len - base);
            for c in 0..GROUP / 8 {
                let lv = if nl == 2 {
                    let mut inp = [_mm_setzero_si128(); 8];
                    for j in 0..8 {
                        inp[j] = _mm_xor_si128(s[8 * c + j], tweak_leaf);
                    }
                    mmo::<8>(&rk, &inp)
                } else {
                    let mut o = [_mm_setzero_si128(); 8];
                    for j in 0..8 {
                        o[j] = _mm_srli_si128::<8>(s[8 * c + j]);
                    }
                    o
                };
                for j in 0..8 {
                    let p = 8 * c + j;
                    let tm = tmask(t[p]);
                    let cw = if nl == 2 {
                        _mm_loadu_si128(lp.add(p * 2) as *const __m128i)
                    } else {
                        _mm_cvtsi64_si128(*lp.add(p) as i64)
                    };
                    let mut a = _mm_add_epi64(_mm_add_epi64(acc[p], lv[j]), _mm_and_si128(cw, tm));
                    if party & 1 == 1 {
                        a = _mm_sub_epi64(_mm_setzero_si128(), a);
                    }
                    let q = key_of_slot(p);
                    if q < m {
                        out0[base + q] = _mm_cvtsi128_si64(a) as u64 & om;
                        if let Some(o1) = out1.as_deref_mut() {
                            // One lane: lane 1 is 0, as in the portable evaluator.
                            o1[base + q] = if nl == 2 { _mm_extract_epi64::<1>(a) as u64 & om } else { 0 };
                        }
                    }
                }
            }
            for p in 0..GROUP {
                s[p] = _mm_setzero_si128();
                acc[p] = _mm_setzero_si128();
            }
            std::hint::black_box(&s);
            std::hint::black_box(&acc);
        }
    }
}

/// The FSS permutation's round keys broadcast to four lanes (for
/// [`crate::dcf_gen_x86`]).
///
/// # Safety
/// The CPU must have aes and avx512f.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "aes,sse2,avx512f")]
pub(crate) unsafe fn fss_round_keys() -> [std::arch::x86_64::__m512i; 11] {
    avx::round_keys()
}

#[cfg(target_arch = "x86_64")]
mod avx {
    use super::{DcfKeyBatch, GROUP};
    use crate::{ggm, mask};
    use std::arch::x86_64::*;

    /// AES-128 round keys of [`ggm::FSS_AES_KEY`], each broadcast to four
    /// 128-bit lanes (FIPS-197 key expansion with AESKEYGENASSIST).
    #[target_feature(enable = "aes,sse2,avx512f")]
    pub(super) unsafe fn round_keys() -> [__m512i; 11] {
        #[inline(always)]
        unsafe fn step(k: __m128i, a: __m128i) -> __m128i {
            let a = _mm_shuffle_epi32::<0xff>(a);
            let mut k = k;
            k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
            k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
            k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
            _mm_xor_si128(k, a)
        }
        let mut r = [_mm_setzero_si128(); 11];
        r[0] = _mm_loadu_si128(ggm::FSS_AES_KEY.0.to_le_bytes().as_ptr() as *const __m128i);
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
        let mut o = [_mm512_setzero_si512(); 11];
        for i in 0..11 {
            o[i] = _mm512_broadcast_i32x4(r[i]);
        }
        o
    }

    /// MMO of `Z` registers (4 blocks each): π(x) ⊕ x, rounds interleaved.
    #[inline(always)]
    unsafe fn mmo<const Z: usize>(rk: &[__m512i; 11], inp: &[__m512i; Z]) -> [__m512i; Z] {
        let mut x = [_mm512_setzero_si512(); Z];
        for z in 0..Z {
            x[z] = _mm512_xor_si512(inp[z], rk[0]);
        }
        for r in 1..10 {
            for z in 0..Z {
                x[z] = _mm512_aesenc_epi128(x[z], rk[r]);
            }
        }
        for z in 0..Z {
            x[z] = _mm512_xor_si512(_mm512_aesenclast_epi128(x[z], rk[10]), inp[z]);
        }
        x
    }

    /// Lanes 2k+h of a per-key mask → even qword positions 2k (lane mask of
    /// seed register 2w+h).
    #[inline(always)]
    fn to_seed(m: u8, h: usize) -> u8 {
        (m >> h) & 0x55
    }
    /// Even positions doubled to both qwords of each 128-bit lane.
    #[inline(always)]
    fn both(m: u8) -> u8 {
        m | (m << 1)
    }

    #[inline(always)]
    unsafe fn ld(p: *const u64) -> __m512i {
        _mm512_loadu_si512(p as *const _)
    }
    #[inline(always)]
    unsafe fn ld128(p: *const u128) -> __m512i {
        _mm512_loadu_si512(p as *const _)
    }

    #[inline(always)]
    fn prefetch<T>(p: *const T) {
        // SAFETY: a hint; never faults whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p as *const i8) }
    }

    /// Per-group inputs, key order, padded to a whole group.
    #[inline(always)]
    fn group_inputs(xs: &[u64], base: usize, len: usize) -> [u64; GROUP] {
        let mut x = [0u64; GROUP];
        let m = GROUP.min(len - base);
        x[..m].copy_from_slice(&xs[base..base + m]);
        x
    }

    /// One-bit outputs: 32 keys (eight seed registers) per pass.
    #[target_feature(enable = "avx512f,avx512bw,vaes,aes")]
    pub(super) unsafe fn eval_packed(b: &DcfKeyBatch, party: u8, xs: &[u64], out: &mut [u64]) {
        let n = b.depth as usize;
        let nb = b.bits as usize;
        let numask = mask(b.bits - b.depth);
        let rk = round_keys();
        let one_lo = _mm512_set_epi64(0, 1, 0, 1, 0, 1, 0, 1);
        let two_lo = _mm512_set_epi64(0, 2, 0, 2, 0, 2, 0, 2);
        let tweak_leaf = _mm512_set_epi64(0, 4, 0, 4, 0, 4, 0, 4);
        let smask = _mm512_set_epi64(-1, !3, -1, !3, -1, !3, -1, !3);
        let ones = _mm512_set1_epi64(1);
        let t_init: u8 = if party & 1 == 1 { 0xff } else { 0 };
        let ng = b.len.div_ceil(GROUP);
        for g in 0..ng {
            let base = g * GROUP;
            let xg = group_inputs(xs, base, b.len);
            let mut xv = [_mm512_setzero_si512(); 4];
            let mut tsel = [_mm512_setzero_si512(); 4];
            let mut vb = [_mm512_setzero_si512(); 4];
            for w in 0..4 {
                xv[w] = ld(xg.as_ptr().add(8 * w));
                let tl = ld(b.tl.as_ptr().add(base + 8 * w));
                let tr = ld(b.tr.as_ptr().add(base + 8 * w));
                tsel[w] = _mm512_or_si512(_mm512_andnot_si512(xv[w], tl), _mm512_and_si512(tr, xv[w]));
                vb[w] = ld(b.vbits.as_ptr().add(base + 8 * w));
            }
            let mut s = [_mm512_setzero_si512(); 8];
            for z in 0..8 {
                s[z] = ld128(b.s0.as_ptr().add(base + 4 * z));
            }
            let mut t = [t_init; 4];
            let mut acc = [0u8; 4];
            let scw = b.scw.as_ptr().add(g * n * GROUP);
            let next = b.scw.as_ptr().add(if g + 1 < ng { (g + 1) * n * GROUP } else { g * n * GROUP });
            for i in 0..n {
                // Pull the next group's level i in while this one computes.
                for c in 0..8 {
                    prefetch(next.add(i * GROUP + 4 * c));
                }
                let m = _mm512_set1_epi64((1u64 << (nb - 1 - i)) as i64);
                let mut dm = [0u8; 4];
                let mut tc = [0u8; 4];
                let mut vc = [0u8; 4];
                for w in 0..4 {
                    dm[w] = _mm512_test_epi64_mask(xv[w], m);
                    tc[w] = _mm512_test_epi64_mask(tsel[w], m);
                    vc[w] = _mm512_test_epi64_mask(vb[w], m);
                }
                let mut inp = [_mm512_setzero_si512(); 8];
                for z in 0..8 {
                    inp[z] = _mm512_mask_xor_epi64(s[z], to_seed(dm[z / 2], z & 1), s[z], ones);
                }
                let bb = mmo::<8>(&rk, &inp);
                let lvl = scw.add(i * GROUP);
                let mut tb = [0u8; 8];
                let mut vv = [0u8; 8];
                for z in 0..8 {
                    tb[z] = _mm512_test_epi64_mask(bb[z], one_lo);
                    vv[z] = _mm512_test_epi64_mask(bb[z], two_lo);
                    let sc = _mm512_and_si512(bb[z], smask);
                    let k = both(to_seed(t[z / 2], z & 1));
                    s[z] = _mm512_mask_xor_epi64(sc, k, sc, ld128(lvl.add(4 * z)));
                }
                for w in 0..4 {
                    let tw = t[w];
                    t[w] = (tb[2 * w] | (tb[2 * w + 1] << 1)) ^ (tc[w] & tw);
                    acc[w] ^= (vv[2 * w] | (vv[2 * w + 1] << 1)) ^ (vc[w] & tw);
                }
            }
            // Early-termination leaf: table H_4(s) ⊕ t·CW, entry j = x_low,
            // fetched per 128-bit lane with two variable qword shifts (the
            // count ≥ 64 in the other qword yields 0).
            let mut inp = [_mm512_setzero_si512(); 8];
            for z in 0..8 {
                inp[z] = _mm512_xor_si512(s[z], tweak_leaf);
            }
            let tab = mmo::<8>(&rk, &inp);
            let lp = b.leaf.as_ptr().add(base * 2);
            let mut lb = [0u8; 8];
            for z in 0..8 {
                let (w, h) = (z / 2, z & 1);
                let mut cnt = [0u64; 8];
                for k in 0..4 {
                    let j = xg[8 * w + 2 * k + h] & numask;
                    cnt[2 * k] = j;
                    cnt[2 * k + 1] = j.wrapping_sub(64);
                }
                let k = both(to_seed(t[w], h));
                let v = _mm512_mask_xor_epi64(tab[z], k, tab[z], ld(lp.add(8 * z)));
                let r = _mm512_srlv_epi64(v, ld(cnt.as_ptr()));
                let r = _mm512_xor_si512(r, _mm512_bsrli_epi128::<8>(r));
                lb[z] = _mm512_test_epi64_mask(r, one_lo);
            }
            let mut res = [0u8; 4];
            for w in 0..4 {
                res[w] = acc[w] ^ lb[2 * w] ^ (lb[2 * w + 1] << 1);
            }
            let m = GROUP.min(b.len - base);
            for q in 0..m {
                out[base + q] = ((res[q / 8] >> (q % 8)) & 1) as u64;
            }
            for z in 0..8 {
                s[z] = _mm512_setzero_si512();
            }
        }
    }

    /// Wider outputs (unpacked, one or two lanes): 16 keys (four seed and
    /// four value registers) per pass.
    #[target_feature(enable = "avx512f,avx512bw,vaes,aes")]
    pub(super) unsafe fn eval_wide<const NARROW: bool, const LANES: usize>(
        b: &DcfKeyBatch,
        party: u8,
        xs: &[u64],
        out0: &mut [u64],
        mut out1: Option<&mut [u64]>,
    ) {
        let n = b.bits as usize;
        let nl = LANES;
        debug_assert_eq!(LANES, b.lanes as usize);
        let rk = round_keys();
        let one_lo = _mm512_set_epi64(0, 1, 0, 1, 0, 1, 0, 1);
        let tweak_v = _mm512_set_epi64(0, 2, 0, 2, 0, 2, 0, 2);
        let tweak_leaf = _mm512_set_epi64(0, 4, 0, 4, 0, 4, 0, 4);
        let smask = _mm512_set_epi64(-1, !1, -1, !1, -1, !1, -1, !1);
        let ones = _mm512_set1_epi64(1);
        let om = _mm512_set1_epi64(mask(b.out_bits) as i64);
        let t_init: u8 = if party & 1 == 1 { 0xff } else { 0 };
        let ng = b.len.div_ceil(GROUP);
        let vstride = GROUP * nl;
        for g in 0..ng {
            let base = g * GROUP;
            let xg = group_inputs(xs, base, b.len);
            let scw = b.scw.as_ptr().add(g * n * GROUP);
            let es = if NARROW { 4 } else { 8 };
            let vbase: *const u8 = if NARROW { b.vcw32.as_ptr() as *const u8 } else { b.vcw.as_ptr() as *const u8 };
            let vcw = vbase.add(g * n * vstride * es);
            let mut res = [[0u64; 8]; 8];
            for half in 0..2 {
                let mut xv = [_mm512_setzero_si512(); 2];
                let mut tsel = [_mm512_setzero_si512(); 2];
                for w in 0..2 {
                    let o = 16 * half + 8 * w;
                    xv[w] = ld(xg.as_ptr().add(o));
                    let tl = ld(b.tl.as_ptr().add(base + o));
                    let tr = ld(b.tr.as_ptr().add(base + o));
                    tsel[w] = _mm512_or_si512(_mm512_andnot_si512(xv[w], tl), _mm512_and_si512(tr, xv[w]));
                }
                let z0 = 4 * half;
                let mut s = [_mm512_setzero_si512(); 4];
                let mut acc = [_mm512_setzero_si512(); 4];
                for z in 0..4 {
                    s[z] = ld128(b.s0.as_ptr().add(base + 4 * (z0 + z)));
                }
                let mut t = [t_init; 2];
                // The same half of the next group, one level per level.
                let gn = if g + 1 < ng { g + 1 } else { g };
                let nscw = b.scw.as_ptr().add(gn * n * GROUP + 4 * z0);
                let nvcw = vbase.add((gn * n * vstride + 4 * z0 * nl) * es);
                for i in 0..n {
                    for c in 0..4 {
                        prefetch(nscw.add(i * GROUP + 4 * c));
                    }
                    for c in 0..(16 * nl * es).div_ceil(64) {
                        prefetch(nvcw.add(i * vstride * es + 64 * c));
                    }
                    let m = _mm512_set1_epi64((1u64 << (n - 1 - i)) as i64);
                    let mut dm = [0u8; 2];
                    let mut tc = [0u8; 2];
                    for w in 0..2 {
                        dm[w] = _mm512_test_epi64_mask(xv[w], m);
                        tc[w] = _mm512_test_epi64_mask(tsel[w], m);
                    }
                    let mut inp = [_mm512_setzero_si512(); 8];
                    for z in 0..4 {
                        inp[z] = _mm512_mask_xor_epi64(s[z], to_seed(dm[z / 2], z & 1), s[z], ones);
                        inp[4 + z] = _mm512_xor_si512(inp[z], tweak_v);
                    }
                    let h = mmo::<8>(&rk, &inp);
                    let lvl = scw.add(i * GROUP);
                    let vl = vcw.add(i * vstride * es);
                    let mut tb = [0u8; 4];
                    for z in 0..4 {
                        let zz = z0 + z;
                        tb[z] = _mm512_test_epi64_mask(h[z], one_lo);
                        let k = both(to_seed(t[z / 2], z & 1));
                        let sc = _mm512_and_si512(h[z], smask);
                        s[z] = _mm512_mask_xor_epi64(sc, k, sc, ld128(lvl.add(4 * zz)));
                        let v = match (NARROW, nl == 2) {
                            (false, true) => ld((vl as *const u64).add(8 * zz)),
                            (false, false) => _mm512_maskz_expandloadu_epi64(0x55, (vl as *const i64).add(4 * zz)),
                            (true, true) => _mm512_cvtepu32_epi64(_mm256_loadu_si256((vl as *const u32).add(8 * zz) as *const __m256i)),
                            (true, false) => _mm512_maskz_expandloadu_epi32(0x1111, (vl as *const i32).add(4 * zz)),
                        };
                        acc[z] = _mm512_add_epi64(acc[z], h[4 + z]);
                        acc[z] = _mm512_mask_add_epi64(acc[z], k, acc[z], v);
                    }
                    for w in 0..2 {
                        let tw = t[w];
                        t[w] = (tb[2 * w] | (tb[2 * w + 1] << 1)) ^ (tc[w] & tw);
                    }
                }
                // Leaf.
                let mut lv = [_mm512_setzero_si512(); 4];
                if nl == 2 {
                    let mut inp = [_mm512_setzero_si512(); 4];
                    for z in 0..4 {
                        inp[z] = _mm512_xor_si512(s[z], tweak_leaf);
                    }
                    lv = mmo::<4>(&rk, &inp);
                } else {
                    for z in 0..4 {
                        lv[z] = _mm512_bsrli_epi128::<8>(s[z]);
                    }
                }
                let lp = b.leaf.as_ptr().add(base * nl);
                for z in 0..4 {
                    let zz = z0 + z;
                    let k = both(to_seed(t[z / 2], z & 1));
                    let c = if nl == 2 {
                        ld(lp.add(8 * zz))
                    } else {
                        _mm512_maskz_expandloadu_epi64(0x55, lp.add(4 * zz) as *const i64)
                    };
                    let mut a = _mm512_add_epi64(acc[z], lv[z]);
                    a = _mm512_mask_add_epi64(a, k, a, c);
                    if party & 1 == 1 {
                        a = _mm512_sub_epi64(_mm512_setzero_si512(), a);
                    }
                    a = _mm512_and_si512(a, om);
                    _mm512_storeu_si512(res[zz].as_mut_ptr() as *mut _, a);
                    s[z] = _mm512_setzero_si512();
                    acc[z] = _mm512_setzero_si512();
                }
            }
            let m = GROUP.min(b.len - base);
            for p in 0..GROUP {
                let q = super::key_of_slot(p);
                if q < m {
                    let (z, k) = (p / 4, p % 4);
                    out0[base + q] = res[z][2 * k];
                    if let Some(o1) = out1.as_deref_mut() {
                        o1[base + q] = res[z][2 * k + 1];
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dcf::{eval_lanes, gen_lanes};
    use hush_primitives::Prg;

    #[test]
    fn slot_is_a_permutation() {
        let mut seen = [false; GROUP];
        for q in 0..GROUP {
            assert_eq!(key_of_slot(slot(q)), q);
            seen[slot(q)] = true;
        }
        assert!(seen.iter().all(|&b| b));
    }


    #[test]
    fn extend_encoded_matches_push() {
        // Shapes: ReLU's two-lane 31-bit DCF, packed one-bit (early
        // termination), 64-bit outputs, a tiny tree; counts that end
        // mid-group; a first call that leaves the batch mid-group (the
        // sequential path) and one that starts on a group boundary.
        for &(bits, out_bits, lanes) in &[
            (31u32, 32u32, 2u32),
            (31, 1, 1),
            (20, 64, 1),
            (3, 16, 2),
            (0, 8, 1),
        ] {
            for party in 0..2u8 {
                let mut prg = Prg::new(Block(0xe7e0 + bits as u128 * 3 + out_bits as u128));
                let n = 3 * GROUP + 5;
                let keys: Vec<DcfKey> = (0..n)
                    .map(|_| {
                        let a = prg.next_u64() & mask(bits);
                        let beta = [prg.next_u64(), prg.next_u64()];
                        let (k0, k1) = gen_lanes(&mut prg, bits, a, beta, out_bits, lanes);
                        if party == 0 {
                            k0
                        } else {
                            k1
                        }
                    })
                    .collect();
                let kl = DcfKey::size_bytes_lanes(bits, out_bits, lanes);
                // Each key behind 3 bytes of other data (a gate's fields).
                let (stride, off) = (kl + 3, 3);
                let mut enc = Vec::new();
                for k in &keys {
                    enc.extend_from_slice(&[9, 9, 9]);
                    enc.extend_from_slice(&k.to_bytes());
                }
                let want = DcfKeyBatch::from_keys(&keys).unwrap();
                let shape = (party, bits, out_bits, lanes);
                for split in [0, GROUP, 7] {
                    let mut b = DcfKeyBatch::new();
                    b.extend_encoded(&enc[..split * stride], split, stride, off, shape)
                        .unwrap();
                    b.extend_encoded(&enc[split * stride..], n - split, stride, off, shape)
                        .unwrap();
                    assert!(b.same_layout_as(&want), "shape {shape:?} split {split}");
                }
                // Malformed keys are refused (and the batch emptied), as
                // by DcfKey::from_bytes.
                let mut bad_cases: Vec<Vec<u8>> = Vec::new();
                let mut e = enc.clone();
                e[stride * 40 + off + kl - 1] ^= 0x80; // a padding or value bit
                if DcfKey::from_bytes(&e[stride * 40 + off..stride * 41]).is_err() {
                    bad_cases.push(e);
                }
                let mut e = enc.clone();
                e[stride * 33 + off + 5] ^= 1; // root seed: reserved bit
                assert!(DcfKey::from_bytes(&e[stride * 33 + off..stride * 34]).is_err());
                bad_cases.push(e);
                let mut e = enc.clone();
                e[stride * 2 + off + 1] ^= 1; // party byte
                bad_cases.push(e);
                let mut e = enc.clone();
                e[stride * 50 + off] = 0; // tag
                bad_cases.push(e);
                for e in &bad_cases {
                    let mut b = DcfKeyBatch::new();
                    assert!(
                        b.extend_encoded(e, n, stride, off, shape).is_err(),
                        "shape {shape:?}"
                    );
                    assert_eq!(b.len(), 0);
                }
                let mut b = DcfKeyBatch::new();
                assert!(b
                    .extend_encoded(&enc[..enc.len() - 1], n, stride, off, shape)
                    .is_err());
                assert!(b
                    .extend_encoded(&enc, n, stride, off, (party, bits, out_bits, 3 - lanes))
                    .is_err());
            }
        }
    }

    fn check_shape(bits: u32, out_bits: u32, lanes: u32, n: usize, party: u8) {
        let mut prg = Prg::new(Block(0xba7c_4000 + bits as u128 * 131 + out_bits as u128 * 7 + lanes as u128));
        let m = mask(bits);
        let mut keys = Vec::new();
        let mut xs = Vec::new();
        for j in 0..n {
            let a = prg.next_u64() & m;
            let beta = [prg.next_u64(), prg.next_u64()];
            let (k0, k1) = gen_lanes(&mut prg, bits, a, beta, out_bits, lanes);
            keys.push(if party == 0 { k0 } else { k1 });
            // Edge inputs near α, plus high garbage bits (ignored).
            let x = match j % 4 {
                0 => a,
                1 => a.wrapping_sub(1),
                2 => a.wrapping_add(1),
                _ => prg.next_u64(),
            };
            xs.push(x | (prg.next_u64() & !m));
        }
        let b = DcfKeyBatch::from_keys(&keys).unwrap();
        let eval = || {
            let mut o0 = vec![0u64; n];
            let mut o1 = vec![0u64; n];
            b.eval(party, &xs, &mut o0, Some(&mut o1));
            (o0, o1)
        };
        // The portable level is the reference; every level must match it
        // bit for bit (and the scalar evaluator).
        let (p0, p1) = simd::with_level(Level::Portable, eval).unwrap();
        simd::for_each_level("dcf batch", |l| {
            let k = kernel();
            let (o0, o1) = eval();
            assert_eq!(o0, p0, "level {l} ({k:?}) bits {bits} out {out_bits} lanes {lanes}: lane 0 differs from portable");
            if lanes == 2 {
                assert_eq!(o1, p1, "level {l} ({k:?}) bits {bits} out {out_bits} lanes {lanes}: lane 1 differs from portable");
            }
            for j in 0..n {
                let want = eval_lanes(party, &keys[j], xs[j] & m);
                assert_eq!(o0[j], want[0], "{l} {k:?} bits {bits} out {out_bits} lanes {lanes} key {j} lane 0");
                if lanes == 2 {
                    assert_eq!(o1[j], want[1], "{l} {k:?} bits {bits} out {out_bits} lanes {lanes} key {j} lane 1");
                }
            }
        });
    }

    #[test]
    fn batch_kernels_match_scalar_eval() {
        for party in 0..2 {
            for &(bits, out_bits, lanes) in
                &[(0, 1, 1), (1, 1, 1), (5, 1, 1), (31, 1, 1), (32, 1, 1), (64, 1, 1), (0, 7, 1), (3, 32, 1), (32, 32, 1), (12, 32, 1), (64, 64, 1), (31, 32, 2), (8, 8, 2), (64, 64, 2), (1, 5, 2)]
            {
                for n in [1usize, 31, 32, 33, 100] {
                    check_shape(bits, out_bits, lanes, n, party);
                }
            }
        }
    }

    #[test]
    fn mixed_shapes_are_rejected() {
        let mut prg = Prg::new(Block(9));
        let (a, _) = gen_lanes(&mut prg, 8, 3, [1, 0], 1, 1);
        let (b, _) = gen_lanes(&mut prg, 9, 3, [1, 0], 1, 1);
        let mut batch = DcfKeyBatch::new();
        batch.push(&a).unwrap();
        assert!(batch.push(&b).is_err());
        assert_eq!(batch.len(), 1);
    }
}
