//! TAMI shares built in place in their wire layout (issue 35).
//!
//! The same shares, byte for byte, as [`deal_roles`]`(…).to_bytes(…)` and
//! [`deal_party1`]`(…).to_bytes(…)` — the dealing description is unchanged,
//! so the security argument of the parent module holds as written — but
//! produced without the intermediate [`TamiShare`]: the output buffer is
//! allocated once at its exact wire length, split into its arrays, and each
//! array into parts of [`TASK`] comparisons; every part is computed on its
//! own (rayon, both cores) from the streams' words at its offset
//! ([`hush_deal::stream_at`]: counter mode, no word before the part is
//! generated) in scratch buffers of a few tens of KiB that stay in cache and
//! are erased when the worker is done. Stream-valued arrays of B's share are
//! written by the PRG straight into their bytes; subset products are one
//! AND each (the product of a subset is its product without its highest
//! input, which is a listed subset: the list is closed under taking
//! nonempty subsets, see [`Plan::new`]).
//!
//! `wire_matches_the_share_encoding` (below) compares both paths for every
//! flavor, several shapes and batch sizes around the part boundaries, both
//! parties and both role assignments.

use super::*;
use hush_deal::{stream_at, stream_bytes_at};
use rayon::prelude::*;

/// Comparisons per part: a multiple of 128, so that every part starts on an
/// even word of every stream (a whole AES block) — per comparison, per
/// chunk, per 64-comparison word times any count.
const TASK: usize = 1024;
const TASK_WORDS: usize = TASK / 64;

/// Per level: (parent subset index or `NONE`, highest input) per subset.
fn subset_parents(lv: &Level) -> Vec<(u32, u32)> {
    let pos: BTreeMap<u128, u32> = lv.subsets.iter().enumerate().map(|(i, &s)| (s, i as u32)).collect();
    lv.subsets
        .iter()
        .map(|&s| {
            let top = 127 - s.leading_zeros();
            let rest = s & !(1u128 << top);
            // The list holds every nonempty subset of a listed subset.
            (if rest == 0 { NONE } else { pos[&rest] }, top)
        })
        .collect()
}

/// What both roles' parts need: the shape's geometry, computed once.
struct Geo {
    n: usize,
    w: usize,
    nc: usize,
    rb: usize,
    lm: u64,
    tail: u64,
    chunks: Vec<(u32, u32)>,
    in_idx: Vec<[usize; 2]>,
    /// Per chunk: bytes of its (gt, eq) halves on the wire.
    halves: Vec<(usize, usize)>,
    /// Bytes of one comparison's tables on the wire.
    per: usize,
    /// Per chunk: B's table position mask.
    posmask: Vec<u64>,
    /// Per level: (subsets, inputs, parents).
    levels: Vec<(usize, usize, Vec<(u32, u32)>)>,
    post: bool,
    relu: bool,
}

impl Geo {
    fn new(n: usize, shape: &TamiShape) -> Self {
        let plan = shape.plan();
        let chunks = shape.chunks();
        let in_idx = leaf_inputs(&plan);
        let seg = table_segments(shape, &plan);
        let halves: Vec<(usize, usize)> = seg.iter().map(|&(g, e)| (seg_bytes(g), seg_bytes(e))).collect();
        let per = halves.iter().map(|h| h.0 + h.1).sum();
        let posmask = chunks.iter().enumerate().map(|(j, &(_, w))| position_mask(w, in_idx[j][1] != usize::MAX)).collect();
        let levels = plan.levels.iter().map(|lv| (lv.subsets.len(), lv.inputs.len(), subset_parents(lv))).collect();
        Geo {
            n,
            w: n.div_ceil(64),
            nc: chunks.len(),
            rb: shape.bits.div_ceil(8) as usize,
            lm: ring_mask(shape.bits),
            tail: tail_mask(n),
            chunks,
            in_idx,
            halves,
            per,
            posmask,
            levels,
            post: shape.has_post(),
            relu: shape.flavor == Flavor::Relu,
        }
    }
    fn tasks(&self) -> usize {
        self.n.div_ceil(TASK)
    }
}

/// Splits the next region of `bytes` bytes off `rest` after its 8-byte
/// count word `count`.
fn region<'a>(rest: &mut &'a mut [u8], count: usize, bytes: usize) -> &'a mut [u8] {
    let (head, tail) = std::mem::take(rest).split_at_mut(8 + bytes);
    head[..8].copy_from_slice(&(count as u64).to_le_bytes());
    *rest = tail;
    &mut head[8..]
}

/// A region cut into one part per task (`unit` bytes per task; an empty
/// region gives empty parts).
fn parts(region: &mut [u8], unit: usize, tasks: usize) -> Vec<&mut [u8]> {
    let mut v: Vec<&mut [u8]> = if region.is_empty() { Vec::new() } else { region.chunks_mut(unit).collect() };
    debug_assert!(v.len() <= tasks);
    v.resize_with(tasks, Default::default);
    v
}

/// One part's slices of the output (empty where the role writes nothing).
#[derive(Default)]
struct Out<'a> {
    input: &'a mut [u8],
    tables: &'a mut [u8],
    subsets: Vec<&'a mut [u8]>,
    masks: Vec<&'a mut [u8]>,
    rho_bits: &'a mut [u8],
    rho: &'a mut [u8],
    rho_x: &'a mut [u8],
}

/// Ring values at `rb` bytes each (8-byte stores, the last ones exact).
#[inline]
fn put_ring(out: &mut [u8], vals: impl Iterator<Item = u64>, rb: usize) {
    let len = out.len();
    let mut pos = 0;
    for x in vals {
        if pos + 8 <= len {
            out[pos..pos + 8].copy_from_slice(&x.to_le_bytes());
        } else {
            out[pos..pos + rb].copy_from_slice(&x.to_le_bytes()[..rb]);
        }
        pos += rb;
    }
    debug_assert_eq!(pos, len);
}

#[inline]
fn put_words(out: &mut [u8], vals: impl Iterator<Item = u64>) {
    for (c, x) in out.chunks_exact_mut(8).zip(vals) {
        c.copy_from_slice(&x.to_le_bytes());
    }
}

/// One table half (`b` = 0, 1, 2 or 4 bytes) at `pos`.
#[inline(always)]
fn put_half(out: &mut [u8], pos: usize, v: u32, b: usize) {
    match b {
        0 => {}
        1 => out[pos] = v as u8,
        2 => out[pos..pos + 2].copy_from_slice(&(v as u16).to_le_bytes()),
        _ => out[pos..pos + 4].copy_from_slice(&v.to_le_bytes()),
    }
}

/// Table words (whole comparisons, `halves.len()` words each) in
/// [`put_tables`]' row layout: each half as a whole little-endian u64 at
/// its position, the position advanced by the half's width (the excess
/// bytes are zero — the words carry only their table positions — and are
/// overwritten by the next halves); the last row exactly.
fn pack_rows(out: &mut [u8], words: &[u64], halves: &[(usize, usize)], per: usize) {
    let nc = halves.len().max(1);
    let rows = words.len() / nc;
    if rows == 0 {
        return;
    }
    // Rows whose 8-byte stores stay inside `out`: all but the last (a half
    // is at most 4 bytes, a row at least 1 byte... the last row may end
    // less than 8 bytes before the end).
    let fast = if per >= 8 { rows - 1 } else { rows.saturating_sub(8usize.div_ceil(per) + 1) };
    let mut pos = 0usize;
    for row in words[..fast * nc].chunks_exact(nc) {
        // One bounds check per row: every 8-byte store of the row starts at
        // most `per` bytes in (issue 35: a check per store was most of
        // this loop).
        let r = &mut out[pos..pos + per + 8];
        let mut p = 0usize;
        for (&t, &(gb, eb)) in row.iter().zip(halves) {
            debug_assert!(p + eb + gb <= per);
            // SAFETY: p + gb ≤ per (the halves of a row sum to `per`), so
            // both 8-byte stores end inside `r` (per + 8 bytes long).
            unsafe {
                std::ptr::write_unaligned(r.as_mut_ptr().add(p) as *mut u64, (t & 0xffff_ffff).to_le());
                std::ptr::write_unaligned(r.as_mut_ptr().add(p + gb) as *mut u64, (t >> 32).to_le());
            }
            p += gb + eb;
        }
        pos += per;
    }
    for row in words[fast * nc..rows * nc].chunks_exact(nc) {
        for (&t, &(gb, eb)) in row.iter().zip(halves) {
            put_half(out, pos, t as u32, gb);
            put_half(out, pos + gb, (t >> 32) as u32, eb);
            pos += gb + eb;
        }
    }
    debug_assert_eq!(pos, out.len());
}

/// Per-worker scratch (secret values: erased on drop).
#[derive(Default)]
struct Scratch {
    input: Vec<u64>,
    tables: Vec<u64>,
    sub_b: Vec<u64>,
    mask_b: Vec<u64>,
    mask_a: Vec<u64>,
    r: Vec<u64>,
    rho_b: Vec<u64>,
    rhosh_b: Vec<u64>,
    rhox_b: Vec<u64>,
    rho_a: Vec<u64>,
    tau: Vec<u64>,
    smask: Vec<u64>,
    r1: Vec<u64>,
    pad: Vec<u64>,
    prod8: Vec<[u64; 8]>,
    r8: Vec<[u64; 8]>,
    xs: Vec<u64>,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        use hush_primitives::wipe::wipe_vec_u64 as wipe;
        for v in [
            &mut self.input,
            &mut self.tables,
            &mut self.sub_b,
            &mut self.mask_b,
            &mut self.mask_a,
            &mut self.r,
            &mut self.rho_b,
            &mut self.rhosh_b,
            &mut self.rhox_b,
            &mut self.rho_a,
            &mut self.tau,
            &mut self.smask,
            &mut self.r1,
            &mut self.pad,
            &mut self.xs,
        ] {
            wipe(v);
        }
        self.prod8.zeroize();
        self.r8.zeroize();
    }
}

/// `v` resized to `len` words of stream `nonce` under `key` from word `at`.
fn fill(v: &mut Vec<u64>, key: Block, nonce: u64, at: usize, len: usize) -> &mut [u64] {
    // Every word is overwritten: no clearing when the length is the last part's.
    if v.len() != len {
        v.clear();
        v.resize(len, 0);
    }
    stream_at(key, nonce, at, v);
    v
}

/// Party 1's (B's) share in its wire bytes: `deal_party1(sub, n, shape).to_bytes(shape)`.
pub(super) fn party1_bytes(sub: Block, n: usize, shape: &TamiShape) -> Vec<u8> {
    roles_bytes(Block::ZERO, 1, Block::ZERO, sub, n, shape)
}

/// Role `role`'s share in its wire bytes:
/// `deal_roles(key, role, sub_a, sub_b, n, shape).to_bytes(shape)`.
pub(super) fn roles_bytes(key: Block, role: u8, sub_a: Block, sub_b: Block, n: usize, shape: &TamiShape) -> Vec<u8> {
    let g = Geo::new(n, shape);
    let tasks = g.tasks();
    let a = role == 0;
    let ring = |len: usize| 8 + len * g.rb;
    let words = |len: usize| 8 + 8 * len;
    let sub_words: usize = g.levels.iter().map(|l| words(g.w * l.0)).sum();
    let total = if a {
        words(2) + 8 + n * g.per + sub_words + ring(if g.post { n } else { 0 }) + ring(if g.relu { n } else { 0 })
    } else {
        let masks: usize = g.levels.iter().skip(1).map(|l| words(g.w * l.1)).sum();
        ring(n)
            + 8
            + n * g.per
            + sub_words
            + masks
            + words(if g.post { g.w } else { 0 })
            + ring(if g.post { n } else { 0 })
            + ring(if g.relu { n } else { 0 })
    };
    // Zeroed on every core (one memset on this thread was a sixth of the
    // dealing, issue 35).
    let mut buf = hush_deal::zeroed_bytes_par(total);
    let mut rest: &mut [u8] = &mut buf;
    let mut outs: Vec<Out> = (0..tasks).map(|_| Out::default()).collect();
    macro_rules! assign {
        ($region:expr, $unit:expr, |$o:ident, $p:ident| $body:expr) => {
            for ($o, $p) in outs.iter_mut().zip(parts($region, $unit, tasks)) {
                $body;
            }
        };
    }
    if a {
        let head = region(&mut rest, 2, 16);
        head[..8].copy_from_slice(&(sub_a.0 as u64).to_le_bytes());
        head[8..].copy_from_slice(&((sub_a.0 >> 64) as u64).to_le_bytes());
    } else {
        assign!(region(&mut rest, n, n * g.rb), TASK * g.rb, |o, p| o.input = p);
    }
    assign!(region(&mut rest, n * g.nc, n * g.per), TASK * g.per, |o, p| o.tables = p);
    for &(ns, _, _) in &g.levels {
        assign!(region(&mut rest, g.w * ns, 8 * g.w * ns), 8 * TASK_WORDS * ns, |o, p| o.subsets.push(p));
    }
    if !a {
        for &(_, ti, _) in g.levels.iter().skip(1) {
            assign!(region(&mut rest, g.w * ti, 8 * g.w * ti), 8 * TASK_WORDS * ti, |o, p| o.masks.push(p));
        }
        let wb = if g.post { g.w } else { 0 };
        assign!(region(&mut rest, wb, 8 * wb), 8 * TASK_WORDS, |o, p| o.rho_bits = p);
    }
    let np = if g.post { n } else { 0 };
    assign!(region(&mut rest, np, np * g.rb), TASK * g.rb, |o, p| o.rho = p);
    let nr = if g.relu { n } else { 0 };
    assign!(region(&mut rest, nr, nr * g.rb), TASK * g.rb, |o, p| o.rho_x = p);
    debug_assert!(rest.is_empty());

    // Role A's per-width table of unmasked leaf words (as in `deal_roles`).
    let luts = if a { leaf_luts(&g.chunks) } else { Default::default() };
    outs.into_par_iter().enumerate().for_each_init(Scratch::default, |s, (t, o)| {
        if a {
            part_a(&g, shape, key, sub_a, sub_b, &luts, t, o, s);
        } else {
            part_b(&g, sub_b, t, o, s);
        }
    });
    buf
}

/// Per chunk width, the unmasked leaf word for every (x'_j, τ_j).
fn leaf_luts(chunks: &[(u32, u32)]) -> [Vec<u64>; 6] {
    let mut luts: [Vec<u64>; 6] = Default::default();
    for &(_, width) in chunks {
        let wi = width as usize;
        if luts[wi].is_empty() {
            let (cm, full) = ((1u64 << width) - 1, if width == 5 { u32::MAX as u64 } else { (1u64 << (1u32 << width)) - 1 });
            luts[wi] = (0..=cm)
                .flat_map(|xj| (0..=cm).map(move |tj| (xj, tj)))
                .map(|(xj, tj)| {
                    let gt = xor_permute(full & !((2u64 << xj) - 1), tj as u32, width);
                    let eq = xor_permute(1u64 << xj, tj as u32, width);
                    gt | (eq << 32)
                })
                .collect();
        }
    }
    luts
}

/// Part `t` of B's share: its streams, written (masked where they are ring
/// values or tables) into the part's bytes.
fn part_b(g: &Geo, sub: Block, t: usize, o: Out<'_>, s: &mut Scratch) {
    let c0 = t * TASK;
    let m = TASK.min(g.n - c0);
    let w0 = t * TASK_WORDS;
    let lm = g.lm;
    let v = fill(&mut s.input, sub, S_INPUT, c0, m);
    put_ring(o.input, v.iter().map(|x| x & lm), g.rb);
    let v = fill(&mut s.tables, sub, S_TABLE, c0 * g.nc, m * g.nc);
    for row in v.chunks_exact_mut(g.nc) {
        for (x, &pm) in row.iter_mut().zip(&g.posmask) {
            *x &= pm;
        }
    }
    pack_rows(o.tables, v, &g.halves, g.per);
    for (li, (p, &(ns, _, _))) in o.subsets.into_iter().zip(&g.levels).enumerate() {
        stream_bytes_at(sub, S_SUB_B + li as u64, w0 * ns, p);
    }
    for (li, (p, &(_, ti, _))) in o.masks.into_iter().zip(g.levels.iter().skip(1)).enumerate() {
        stream_bytes_at(sub, S_MASK_B + 1 + li as u64, w0 * ti, p);
    }
    if g.post {
        stream_bytes_at(sub, S_RHO_B, w0, o.rho_bits);
        if (g.n - c0) <= TASK {
            // The part holding the last word clips it to the batch.
            let l = o.rho_bits.len();
            let last = u64::from_le_bytes(o.rho_bits[l - 8..].try_into().expect("8 bytes")) & g.tail;
            o.rho_bits[l - 8..].copy_from_slice(&last.to_le_bytes());
        }
        let v = fill(&mut s.rhosh_b, sub, S_RHOSH_B, c0, m);
        put_ring(o.rho, v.iter().map(|x| x & lm), g.rb);
        if g.relu {
            let v = fill(&mut s.rhox_b, sub, S_RHOX_B, c0, m);
            put_ring(o.rho_x, v.iter().map(|x| x & lm), g.rb);
        }
    }
}

/// Part `t` of A's share: B's streams of the part, A's own, the level-0
/// masks r, then A's corrections (pads, subset-product shares, ρ and
/// ρ(s + m) shares) written into the part's bytes — `deal_roles`' loops
/// restricted to the part's comparisons.
#[allow(clippy::too_many_arguments)]
fn part_a(g: &Geo, shape: &TamiShape, key: Block, sub_a: Block, sub_b: Block, luts: &[Vec<u64>; 6], t: usize, o: Out<'_>, s: &mut Scratch) {
    let c0 = t * TASK;
    let m = TASK.min(g.n - c0);
    let w0 = t * TASK_WORDS;
    let mw = m.div_ceil(64);
    let last = (g.n - c0) <= TASK;
    let lm = g.lm;
    let nc = g.nc;
    // B's input and tables, A's τ.
    fill(&mut s.input, sub_b, S_INPUT, c0, m).iter_mut().for_each(|x| *x &= lm);
    fill(&mut s.tables, sub_b, S_TABLE, c0 * nc, m * nc);
    let sm = ring_mask(shape.sent_bits());
    fill(&mut s.tau, sub_a, S_TAU, c0, m).iter_mut().for_each(|x| *x &= sm);
    // Level-0 merge masks r (the dealer's), the last word clipped.
    let t0 = g.levels[0].1;
    let r1 = fill(&mut s.r1, key, S_R1, w0 * t0, mw * t0);
    if last {
        for x in &mut r1[(mw - 1) * t0..] {
            *x &= g.tail;
        }
    }
    // Pads S = U ⊕ T, chunk by chunk (its constants hoisted), then packed
    // row by row.
    s.pad.clear();
    s.pad.extend(s.input.iter().map(|&x| threshold(shape, x)));
    if s.xs.len() != m * nc {
        s.xs.clear();
        s.xs.resize(m * nc, 0);
    }
    let (xc, tau, tb, r1, xs) = (&s.pad, &s.tau, &s.tables, &s.r1, &mut s.xs);
    // Per chunk, its constants (hoisted); then comparison by comparison,
    // its row of chunk words (contiguous in `xs` and in B's tables).
    struct Ck<'l> {
        lo: u32,
        width: u32,
        cm: u64,
        full: u64,
        keep: u64,
        eqm: u64,
        ig: usize,
        ie: usize,
        pm: u64,
        lut: &'l [u64],
    }
    let cks: Vec<Ck<'_>> = g
        .chunks
        .iter()
        .enumerate()
        .map(|(j, &(lo, width))| {
            let full = if width == 5 { u32::MAX as u64 } else { (1u64 << (1u32 << width)) - 1 };
            let (ig, ie) = (g.in_idx[j][0], g.in_idx[j][1]);
            // Without an eq leaf the eq half is dropped; with one it carries r_eq.
            let (keep, eqm, ie) = if ie == usize::MAX { (full, 0, ig) } else { (u64::MAX, full << 32, ie) };
            Ck { lo, width, cm: (1u64 << width) - 1, full, keep, eqm, ig, ie, pm: g.posmask[j], lut: &luts[width as usize][..] }
        })
        .collect();
    for (i, (row, brow)) in xs.chunks_exact_mut(nc).zip(tb.chunks_exact(nc)).enumerate().take(m) {
        let bi = i % 64;
        let rw = &r1[(i / 64) * t0..(i / 64 + 1) * t0];
        let (x, ta) = (xc[i], tau[i]);
        for ((o, &b), c) in row.iter_mut().zip(brow).zip(&cks) {
            let xj = (x >> c.lo) & c.cm;
            let tj = (ta >> c.lo) & c.cm;
            let mut v = c.lut[((xj << c.width) | tj) as usize];
            v ^= c.full & 0u64.wrapping_sub((rw[c.ig] >> bi) & 1);
            v ^= c.eqm & 0u64.wrapping_sub((rw[c.ie] >> bi) & 1);
            *o = (v & c.keep) ^ (b & c.pm);
        }
    }
    pack_rows(o.tables, xs, &g.halves, g.per);
    // Subset products ∏_U r ⊕ B's shares, level by level; level ≥ 1 masks
    // r' = A's stream ⊕ B's stream.
    for (li, (p, (ns, ti, parents))) in o.subsets.into_iter().zip(&g.levels).enumerate() {
        let (ns, ti) = (*ns, *ti);
        if li == 0 {
            s.r.clear();
            s.r.extend_from_slice(&s.r1);
        } else {
            fill(&mut s.mask_a, sub_a, S_MASK_A + li as u64, w0 * ti, mw * ti);
            fill(&mut s.mask_b, sub_b, S_MASK_B + li as u64, w0 * ti, mw * ti);
            s.r.clear();
            s.r.extend(s.mask_a.iter().zip(&s.mask_b).map(|(a, b)| a ^ b));
        }
        fill(&mut s.sub_b, sub_b, S_SUB_B + li as u64, w0 * ns, mw * ns);
        // Eight words at a time: every subset's product is one 8-lane AND
        // of its parent's and its highest input's (vector registers).
        s.prod8.clear();
        s.prod8.resize(ns, [0; 8]);
        s.r8.clear();
        s.r8.resize(ti, [0; 8]);
        for wg in (0..mw).step_by(8) {
            let lanes = 8.min(mw - wg);
            for (t, rt) in s.r8.iter_mut().enumerate() {
                for l in 0..lanes {
                    rt[l] = s.r[(wg + l) * ti + t];
                }
            }
            for si in 0..ns {
                let (parent, top) = parents[si];
                let up = if parent == NONE { [u64::MAX; 8] } else { s.prod8[parent as usize] };
                let rt = &s.r8[top as usize];
                let mut v = [0u64; 8];
                for l in 0..8 {
                    v[l] = up[l] & rt[l];
                }
                s.prod8[si] = v;
            }
            for l in 0..lanes {
                let wi = wg + l;
                let bsub = &s.sub_b[wi * ns..(wi + 1) * ns];
                put_words(&mut p[wi * ns * 8..(wi + 1) * ns * 8], s.prod8.iter().zip(bsub).map(|(x, y)| x[l] ^ y));
            }
        }
    }
    if g.post {
        fill(&mut s.rho_a, sub_a, S_RHO_A, w0, mw);
        fill(&mut s.rho_b, sub_b, S_RHO_B, w0, mw);
        let rhosh = fill(&mut s.rhosh_b, sub_b, S_RHOSH_B, c0, m);
        rhosh.iter_mut().for_each(|x| *x &= lm);
        let (ra, rb) = (&s.rho_a, &s.rho_b);
        let bit = |i: usize| ((ra[i / 64] ^ rb[i / 64]) >> (i % 64)) & 1;
        put_ring(o.rho, (0..m).map(|i| bit(i).wrapping_sub(s.rhosh_b[i]) & lm), g.rb);
        if g.relu {
            fill(&mut s.smask, sub_a, S_SMASK, c0, m).iter_mut().for_each(|x| *x &= lm);
            fill(&mut s.rhox_b, sub_b, S_RHOX_B, c0, m).iter_mut().for_each(|x| *x &= lm);
            let (sm, inp, rx) = (&s.smask, &s.input, &s.rhox_b);
            put_ring(o.rho_x, (0..m).map(|i| bit(i).wrapping_mul(sm[i].wrapping_add(inp[i])).wrapping_sub(rx[i]) & lm), g.rb);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_matches_the_share_encoding() {
        let key = Block(0x0bad_cafe_f00d);
        let (ka, kb) = (hush_deal::sub_key(key, 0), hush_deal::sub_key(key, 1));
        let mut shapes = Vec::new();
        for flavor in [Flavor::Millionaire, Flavor::Drelu, Flavor::Relu, Flavor::Trunc { f: 5 }] {
            for (bits, k, arity) in [(32, 4, 8), (16, 5, 4), (37, 4, 2), (64, 3, 8)] {
                shapes.push(TamiShape::new(bits, k, arity, flavor));
            }
        }
        shapes.push(TamiShape::new(64, 5, 4, Flavor::Relu).with_width(28));
        shapes.push(TamiShape::new(32, 4, 8, Flavor::Drelu).with_width(20));
        for shape in &shapes {
            for n in [1usize, 63, 64, 65, 1023, 1024, 1025, 2100] {
                for role in 0..2u8 {
                    let slow = deal_roles(key, role, ka, kb, n, shape).to_bytes(shape);
                    assert_eq!(roles_bytes(key, role, ka, kb, n, shape), slow, "{shape:?} n {n} role {role}");
                    // roles exchanged (the swapped kind's sub-keys)
                    let slow = deal_roles(key, role, kb, ka, n, shape).to_bytes(shape);
                    assert_eq!(roles_bytes(key, role, kb, ka, n, shape), slow, "swapped {shape:?} n {n} role {role}");
                }
                assert_eq!(party1_bytes(kb, n, shape), deal_party1(kb, n, shape).to_bytes(shape), "{shape:?} n {n}");
            }
        }
    }
}
