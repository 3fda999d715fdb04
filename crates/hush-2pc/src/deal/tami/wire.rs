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
//! are erased when the worker is done, and written once into the share
//! (no zeroing pass: every writer fills its slice); subset products are one
//! AND each (the product of a subset is its product without its highest
//! input, which is a listed subset: the list is closed under taking
//! nonempty subsets, see [`Plan::new`]).
//!
//! `wire_matches_the_share_encoding` (below) compares both paths for every
//! flavor, several shapes and batch sizes around the part boundaries, both
//! parties and both role assignments.

use super::*;
use hush_deal::stream_at_with;
use hush_primitives::aes::Aes128;
use rayon::prelude::*;
use std::mem::MaybeUninit;

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
fn region<'a>(rest: &mut &'a mut [MaybeUninit<u8>], count: usize, bytes: usize) -> &'a mut [MaybeUninit<u8>] {
    let (head, tail) = std::mem::take(rest).split_at_mut(8 + bytes);
    put_le(&mut head[..8], count as u64);
    *rest = tail;
    &mut head[8..]
}

/// `v`'s 8 little-endian bytes into `out` (8 bytes long).
fn put_le(out: &mut [MaybeUninit<u8>], v: u64) {
    for (o, b) in out.iter_mut().zip(v.to_le_bytes()) {
        o.write(b);
    }
}

/// A region cut into one part per task (`unit` bytes per task; an empty
/// region gives empty parts).
fn parts<T>(region: &mut [T], unit: usize, tasks: usize) -> Vec<&mut [T]> {
    let mut v: Vec<&mut [T]> = if region.is_empty() { Vec::new() } else { region.chunks_mut(unit).collect() };
    // Every byte of the region must go to a task (each task initialises
    // its slices before `roles_bytes_with` declares the buffer initialised).
    assert!(v.len() <= tasks, "tami wire: region cut into more parts than tasks");
    v.resize_with(tasks, Default::default);
    v
}

/// One part's slices of the output (empty where the role writes nothing):
/// as cut from the fresh buffer, each written whole by the part's own task
/// (no zeroing pass first, see `roles_bytes_with`).
struct Out<'a, T = U> {
    input: &'a mut [T],
    tables: &'a mut [T],
    subsets: Vec<&'a mut [T]>,
    masks: Vec<&'a mut [T]>,
    rho_bits: &'a mut [T],
    rho: &'a mut [T],
    rho_x: &'a mut [T],
}

impl<T> Default for Out<'_, T> {
    fn default() -> Self {
        Out {
            input: Default::default(),
            tables: Default::default(),
            subsets: Vec::new(),
            masks: Vec::new(),
            rho_bits: Default::default(),
            rho: Default::default(),
            rho_x: Default::default(),
        }
    }
}



/// A byte of the share's buffer before it is written.
type U = MaybeUninit<u8>;

/// Ring values at `rb` bytes each (8-byte stores, the last ones exact);
/// every byte of `out` is written (asserted: the share's buffer is declared
/// initialised on that ground).
#[inline]
fn put_ring(out: &mut [U], vals: impl Iterator<Item = u64>, rb: usize) {
    let len = out.len();
    let p = out.as_mut_ptr() as *mut u8;
    let mut pos = 0;
    for x in vals {
        if pos + 8 <= len {
            // SAFETY: bytes pos..pos + 8 are inside `out`.
            unsafe { std::ptr::write_unaligned(p.add(pos) as *mut [u8; 8], x.to_le_bytes()) };
        } else {
            assert!(pos + rb <= len, "tami wire: ring values overflow their slice");
            // SAFETY: bytes pos..pos + rb are inside `out` (asserted), rb ≤ 8.
            unsafe { std::ptr::copy_nonoverlapping(x.to_le_bytes().as_ptr(), p.add(pos), rb) };
        }
        pos += rb;
    }
    assert_eq!(pos, len, "tami wire: ring values do not fill their slice");
}

/// Words as little-endian bytes; every byte of `out` is written (asserted).
#[inline]
fn put_words(out: &mut [U], vals: impl Iterator<Item = u64>) {
    let mut k = 0;
    for (c, x) in out.chunks_exact_mut(8).zip(vals) {
        // SAFETY: `c` is 8 bytes of `out`.
        unsafe { std::ptr::write_unaligned(c.as_mut_ptr() as *mut [u8; 8], x.to_le_bytes()) };
        k += 1;
    }
    assert_eq!(8 * k, out.len(), "tami wire: words do not fill their slice");
}

/// One table half (`b` = 0, 1, 2 or 4 bytes) at `pos`.
#[inline(always)]
fn put_half(out: &mut [U], pos: usize, v: u32, b: usize) {
    for (o, x) in out[pos..pos + b].iter_mut().zip(v.to_le_bytes()) {
        o.write(x);
    }
}

/// Table words (whole comparisons, `halves.len()` words each) in
/// [`put_tables`]' row layout: each half as a whole little-endian u64 at
/// its position, the position advanced by the half's width (the excess
/// bytes are zero — the words carry only their table positions — and are
/// overwritten by the next halves); the last row exactly.
fn pack_rows(out: &mut [U], words: &[u64], halves: &[(usize, usize)], per: usize) {
    let nc = halves.len().max(1);
    let rows = words.len() / nc;
    if rows == 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        if vbmi2() && halves.iter().all(|&(g, e)| g <= 4 && e <= 4) {
            assert_eq!(out.len(), rows * per, "pack_rows: output length");
            // SAFETY: the CPU has avx512f/bw/vbmi2 (checked above); rows
            // · nc words and rows · per bytes (asserted).
            unsafe { pack_rows_vbmi2(out, &words[..rows * nc], halves, per) };
            return;
        }
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
    // Every byte written: the rows' halves tile `out` (the share's buffer
    // is declared initialised on that ground).
    assert_eq!(pos, out.len(), "tami wire: table rows do not fill their slice");
}

/// Whether this CPU runs the VBMI2 row packers ([`pack_rows`],
/// [`unpack_rows`]).
fn vbmi2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        hush_primitives::simd::level() == hush_primitives::simd::Level::Avx512
            && std::arch::is_x86_feature_detected!("avx512vbmi2")
            && std::arch::is_x86_feature_detected!("avx512bw")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A row's chunk words in groups of eight (one 512-bit register each):
/// the group's first word, its word mask, the byte mask of its used bytes
/// within the register (word j's gt bytes 8j.., eq bytes 8j + 4..), and the
/// offset of its first byte in the packed row.
fn row_groups(halves: &[(usize, usize)]) -> Vec<(usize, u8, u64, usize)> {
    let mut off = 0usize;
    halves
        .chunks(8)
        .enumerate()
        .map(|(i, hs)| {
            let mut bm = 0u64;
            for (j, &(gb, eb)) in hs.iter().enumerate() {
                debug_assert!(gb <= 4 && eb <= 4);
                bm |= ((1u64 << gb) - 1) << (8 * j);
                bm |= ((1u64 << eb) - 1) << (8 * j + 4);
            }
            let g = (8 * i, ((1u32 << hs.len()) - 1) as u8, bm, off);
            off += bm.count_ones() as usize;
            g
        })
        .collect()
}

/// [`pack_rows`] with AVX-512 VBMI2: a row's chunk words in registers of
/// eight, the used bytes of each (each word's gt half, then its eq half)
/// one compressing store.
///
/// # Safety
/// The CPU must have avx512f, avx512bw and avx512vbmi2; every half ≤ 4
/// bytes, `words.len()` = rows · halves.len() and `out.len()` = rows · per.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi2")]
unsafe fn pack_rows_vbmi2(out: &mut [U], words: &[u64], halves: &[(usize, usize)], per: usize) {
    use std::arch::x86_64::*;
    let nc = halves.len();
    debug_assert!(nc > 0 && words.len() % nc == 0 && out.len() == words.len() / nc * per);
    let groups = row_groups(halves);
    debug_assert_eq!(groups.iter().map(|g| g.2.count_ones() as usize).sum::<usize>(), per);
    // The store masks: the low popcount(bm) bytes of a register.
    let sm: Vec<u64> = groups.iter().map(|g| low_bytes(g.2.count_ones())).collect();
    let mut pos = 0usize;
    for row in words.chunks_exact(nc) {
        for (&(w, km, bm, off), &sm) in groups.iter().zip(&sm) {
            // SAFETY: the masked load reads the group's words of this row
            // only; the compress is in registers and the masked store
            // writes exactly popcount(bm) bytes at pos + off, inside this
            // row's `per` bytes of `out`. (A compressing store straight to
            // memory, `vpcompressb m512{k}`, is microcoded on AMD Zen 4 —
            // it was half of a TAMI dealing there — and several µops on
            // Intel; compress-then-store writes the same bytes.)
            let v = _mm512_maskz_loadu_epi64(km, row.as_ptr().add(w) as *const i64);
            let c = _mm512_maskz_compress_epi8(bm, v);
            _mm512_mask_storeu_epi8(out.as_mut_ptr().add(pos + off) as *mut i8, sm, c);
        }
        pos += per;
    }
}

/// A byte mask of the low `n` bytes (0..=64) of a 512-bit register.
#[cfg(target_arch = "x86_64")]
fn low_bytes(n: u32) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// The host's side of [`pack_rows`]: `bytes` (whole rows of `per` bytes)
/// back into chunk words (gt half at bit 0, eq half at bit 32), with the
/// OR of every bit outside `allowed` (one mask per chunk word) returned —
/// nonzero means a malformed table. `None` where this CPU has no VBMI2 (or
/// a half is wider than 4 bytes): the caller decodes with its scalar loop.
pub(super) fn unpack_rows(out: &mut [u64], bytes: &[u8], halves: &[(usize, usize)], allowed: &[u64], per: usize) -> Option<u64> {
    let nc = halves.len();
    if nc == 0 || per == 0 || allowed.len() != nc || out.len() / nc != bytes.len() / per || out.len() % nc != 0 || bytes.len() % per != 0 {
        return None;
    }
    if halves.iter().map(|&(g, e)| g + e).sum::<usize>() != per || !halves.iter().all(|&(g, e)| g <= 4 && e <= 4) || !vbmi2() {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the CPU has avx512f/bw/vbmi2 (vbmi2()); halves ≤ 4 bytes
        // summing to `per`; out.len() / nc = bytes.len() / per rows (checked).
        Some(unsafe { unpack_rows_vbmi2(out, bytes, halves, allowed, per) })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// [`unpack_rows`]: per row and group of eight words, one expanding load
/// of the group's packed bytes into their word positions (the inverse of
/// [`pack_rows_vbmi2`]'s compressing store), the bits outside `allowed`
/// OR-ed into the result.
///
/// # Safety
/// As [`unpack_rows`] checks: avx512f/bw/vbmi2, halves ≤ 4 bytes summing
/// to `per`, `out` and `bytes` the same number of whole rows.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi2")]
unsafe fn unpack_rows_vbmi2(out: &mut [u64], bytes: &[u8], halves: &[(usize, usize)], allowed: &[u64], per: usize) -> u64 {
    use std::arch::x86_64::*;
    let nc = halves.len();
    let groups = row_groups(halves);
    let allow: Vec<__m512i> = groups.iter().map(|&(w, km, _, _)| _mm512_maskz_loadu_epi64(km, allowed.as_ptr().add(w) as *const i64)).collect();
    let mut bad = _mm512_setzero_si512();
    let lm: Vec<u64> = groups.iter().map(|g| low_bytes(g.2.count_ones())).collect();
    for (orow, row) in out.chunks_exact_mut(nc).zip(bytes.chunks_exact(per)) {
        for ((&(w, km, bm, off), &a), &lm) in groups.iter().zip(&allow).zip(&lm) {
            // SAFETY: the masked load reads exactly popcount(bm) bytes from
            // off, inside this row's `per` bytes (the expand is in
            // registers: the memory form is microcoded on AMD Zen 4, see
            // `pack_rows_vbmi2`); the masked store writes the group's words
            // of this row only.
            let v = _mm512_maskz_expand_epi8(bm, _mm512_maskz_loadu_epi8(lm, row.as_ptr().add(off) as *const _));
            bad = _mm512_or_si512(bad, _mm512_andnot_si512(a, v));
            _mm512_mask_storeu_epi64(orow.as_mut_ptr().add(w) as *mut i64, km, v);
        }
    }
    _mm512_reduce_or_epi64(bad) as u64
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
fn fill<'v>(v: &'v mut Vec<u64>, key: &Aes128, nonce: u64, at: usize, len: usize) -> &'v mut [u64] {
    // Every word is overwritten: no clearing when the length is the last part's.
    if v.len() != len {
        v.clear();
        v.resize(len, 0);
    }
    stream_at_with(key, nonce, at, v);
    v
}

/// Party 1's (B's) share in its wire bytes: `deal_party1(sub, n, shape).to_bytes(shape)`.
pub(super) fn party1_bytes(sub: Block, n: usize, shape: &TamiShape) -> Vec<u8> {
    roles_bytes(Block::ZERO, 1, Block::ZERO, sub, n, shape)
}

/// Role `role`'s share in its wire bytes:
/// `deal_roles(key, role, sub_a, sub_b, n, shape).to_bytes(shape)`.
pub(super) fn roles_bytes(key: Block, role: u8, sub_a: Block, sub_b: Block, n: usize, shape: &TamiShape) -> Vec<u8> {
    roles_bytes_with(key, role, sub_a, sub_b, n, shape, false)
}

/// [`roles_bytes`]; `scalar_rows` forces the portable row builder (tests).
fn roles_bytes_with(key: Block, role: u8, sub_a: Block, sub_b: Block, n: usize, shape: &TamiShape, scalar_rows: bool) -> Vec<u8> {
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
    // Not zeroed: every byte is either a region's count word (written by
    // `region`) or inside one task's slice, which the task writes whole —
    // ring values, words and table rows by writers that assert they filled
    // their slice. One memset of the share on this thread was a sixth of the
    // dealing, a parallel one still a pass through memory, and zeroing each
    // part before writing it (the eighth pass) still ≈ 15 % of A's dealing
    // (issue 35, tenth pass).
    let mut buf: Vec<u8> = Vec::with_capacity(total);
    let spare = &mut buf.spare_capacity_mut()[..total];
    hush_deal::populate(spare);
    if cfg!(test) {
        // A byte that no writer covered would show as 0xA5 in the wire
        // tests (outside tests it would be stale memory).
        spare.iter_mut().for_each(|b| {
            b.write(0xA5);
        });
    }
    let mut rest: &mut [MaybeUninit<u8>] = spare;
    let mut outs: Vec<Out<'_, MaybeUninit<u8>>> = (0..tasks).map(|_| Out::default()).collect();
    macro_rules! assign {
        ($region:expr, $unit:expr, |$o:ident, $p:ident| $body:expr) => {
            for ($o, $p) in outs.iter_mut().zip(parts($region, $unit, tasks)) {
                $body;
            }
        };
    }
    if a {
        let head = region(&mut rest, 2, 16);
        put_le(&mut head[..8], sub_a.0 as u64);
        put_le(&mut head[8..], (sub_a.0 >> 64) as u64);
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
    assert!(rest.is_empty(), "tami wire: regions do not cover the share");

    // Role A's per-width table of unmasked leaf words (as in `deal_roles`).
    let luts = if a { leaf_luts(&g.chunks) } else { Default::default() };
    // The three stream keys expanded once for the whole share, not per part
    // and stream (issue 35).
    let (key, sub_a, sub_b) = (&Aes128::new(key), &Aes128::new(sub_a), &Aes128::new(sub_b));
    outs.into_par_iter().enumerate().for_each_init(Scratch::default, |s, (t, o)| {
        if a {
            part_a(&g, shape, key, sub_a, sub_b, &luts, t, o, s, scalar_rows);
        } else {
            part_b(&g, sub_b, t, o, s);
        }
    });
    // SAFETY: `rest` is empty (asserted), so the regions tile the first
    // `total` bytes of the capacity; each region's count word was written
    // by `region` (and A's key head by `put_le`), and every other byte lies
    // in exactly one task's slice (`parts` hands all of a region out), which
    // that task wrote whole (see the writers' assertions above) — every
    // task ran, the loop above has returned. So all `total` bytes are
    // initialised.
    unsafe { buf.set_len(total) };
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
fn part_b(g: &Geo, sub: &Aes128, t: usize, o: Out<'_>, s: &mut Scratch) {
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
    // The stream-valued arrays: counter mode into the (aligned) scratch,
    // then one copy into the share. (Straight into the share's bytes, which
    // sit 8 bytes off a block boundary, went through a stack buffer erased
    // every 64 blocks, after zeroing the slice: three passes for one.)
    let mw = m.div_ceil(64);
    for (li, (p, &(ns, _, _))) in o.subsets.into_iter().zip(&g.levels).enumerate() {
        put_words(p, fill(&mut s.sub_b, sub, S_SUB_B + li as u64, w0 * ns, mw * ns).iter().copied());
    }
    for (li, (p, &(_, ti, _))) in o.masks.into_iter().zip(g.levels.iter().skip(1)).enumerate() {
        put_words(p, fill(&mut s.mask_b, sub, S_MASK_B + 1 + li as u64, w0 * ti, mw * ti).iter().copied());
    }
    if g.post {
        let v = fill(&mut s.rho_b, sub, S_RHO_B, w0, mw);
        if (g.n - c0) <= TASK {
            // The part holding the last word clips it to the batch.
            v[mw - 1] &= g.tail;
        }
        put_words(o.rho_bits, v.iter().copied());
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
fn part_a(
    g: &Geo,
    shape: &TamiShape,
    key: &Aes128,
    sub_a: &Aes128,
    sub_b: &Aes128,
    luts: &[Vec<u64>; 6],
    t: usize,
    o: Out<'_>,
    s: &mut Scratch,
    scalar_rows: bool,
) {
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
    // A's chunk words (pads S = U ⊕ T before packing), row by row.
    let rows = Rows { xc, tau, tb, r1, t0, m, nc };
    #[cfg(target_arch = "x86_64")]
    {
        let vector = hush_primitives::simd::level() == hush_primitives::simd::Level::Avx512 && !scalar_rows;
        if vector && nc <= 8 && vbmi2() && g.halves.iter().all(|&(gb, eb)| gb <= 4 && eb <= 4) {
            // SAFETY: avx512f/bw/vbmi2 (level avx512 and vbmi2()); a row is
            // one group of ≤ 8 words with halves ≤ 4 bytes (checked).
            unsafe { rows_packed_vbmi2(g, luts, &rows, o.tables) };
        } else {
            if vector {
                // SAFETY: level avx512 includes avx512f.
                unsafe { rows_avx512(g, luts, &rows, xs) };
            } else {
                rows_scalar(g, luts, &rows, xs);
            }
            pack_rows(o.tables, xs, &g.halves, g.per);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = scalar_rows;
        rows_scalar(g, luts, &rows, xs);
        pack_rows(o.tables, xs, &g.halves, g.per);
    }
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

/// What A's chunk words of a part are computed from: the thresholds
/// x'_i (from B's inputs), A's τ_i, B's masked-to-be tables U (row i =
/// words i·nc..), and the level-0 merge masks r (t0 words per 64
/// comparisons).
struct Rows<'a> {
    xc: &'a [u64],
    tau: &'a [u64],
    tb: &'a [u64],
    r1: &'a [u64],
    t0: usize,
    m: usize,
    nc: usize,
}

/// Per chunk, the constants of its words.
struct Ck {
    lo: u32,
    width: u32,
    cm: u64,
    full: u64,
    keep: u64,
    eqm: u64,
    ig: usize,
    ie: usize,
    pm: u64,
}

fn chunk_consts(g: &Geo) -> Vec<Ck> {
    g.chunks
        .iter()
        .enumerate()
        .map(|(j, &(lo, width))| {
            let full = if width == 5 { u32::MAX as u64 } else { (1u64 << (1u32 << width)) - 1 };
            let (ig, ie) = (g.in_idx[j][0], g.in_idx[j][1]);
            // Without an eq leaf the eq half is dropped; with one it carries r_eq.
            let (keep, eqm, ie) = if ie == usize::MAX { (full, 0, ig) } else { (u64::MAX, full << 32, ie) };
            Ck { lo, width, cm: (1u64 << width) - 1, full, keep, eqm, ig, ie, pm: g.posmask[j] }
        })
        .collect()
}

/// A's chunk words, comparison by comparison: word (i, j) = T_j[·] for
/// (x'_j, τ_j) from the leaf table, ⊕ r_gt (and r_eq) of the chunk's leaf
/// inputs, ⊕ B's table U masked to its positions (`deal_roles`' pad loop).
fn rows_scalar(g: &Geo, luts: &[Vec<u64>; 6], r: &Rows<'_>, xs: &mut [u64]) {
    let cks = chunk_consts(g);
    for (i, (row, brow)) in xs.chunks_exact_mut(r.nc).zip(r.tb.chunks_exact(r.nc)).enumerate().take(r.m) {
        let bi = i % 64;
        let rw = &r.r1[(i / 64) * r.t0..(i / 64 + 1) * r.t0];
        let (x, ta) = (r.xc[i], r.tau[i]);
        for ((o, &b), c) in row.iter_mut().zip(brow).zip(&cks) {
            let xj = (x >> c.lo) & c.cm;
            let tj = (ta >> c.lo) & c.cm;
            let mut v = luts[c.width as usize][((xj << c.width) | tj) as usize];
            v ^= c.full & 0u64.wrapping_sub((rw[c.ig] >> bi) & 1);
            v ^= c.eqm & 0u64.wrapping_sub((rw[c.ie] >> bi) & 1);
            *o = (v & c.keep) ^ (b & c.pm);
        }
    }
}

/// [`rows_scalar`] with AVX-512: one comparison's row (up to eight chunk
/// words) per register — the chunks' digits by variable shifts, the leaf
/// words by one gather from the concatenated tables, the r bits as mask
/// registers from the r words gathered once per 64 comparisons.
///
/// # Safety
/// The CPU must have avx512f.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn rows_avx512(g: &Geo, luts: &[Vec<u64>; 6], r: &Rows<'_>, xs: &mut [u64]) {
    use std::arch::x86_64::*;
    let cks = chunk_consts(g);
    let nc = r.nc;
    // The leaf tables of every width, one after the other.
    let mut off = [0usize; 6];
    let mut cat: Vec<u64> = Vec::new();
    for (w, l) in luts.iter().enumerate() {
        off[w] = cat.len();
        cat.extend_from_slice(l);
    }
    assert!(xs.len() >= r.m * nc && r.tb.len() >= r.m * nc && r.xc.len() >= r.m && r.tau.len() >= r.m);
    assert!(r.r1.len() >= r.m.div_ceil(64) * r.t0);
    for g0 in (0..nc).step_by(8) {
        let nv = 8.min(nc - g0);
        let km: __mmask8 = ((1u32 << nv) - 1) as u8;
        let lane = |f: &dyn Fn(&Ck) -> u64| {
            let mut a = [0u64; 8];
            for (x, c) in a.iter_mut().zip(&cks[g0..g0 + nv]) {
                *x = f(c);
            }
            _mm512_loadu_si512(a.as_ptr() as *const _)
        };
        let lo = lane(&|c| c.lo as u64);
        let width = lane(&|c| c.width as u64);
        let cm = lane(&|c| c.cm);
        let base = lane(&|c| off[c.width as usize] as u64);
        let full = lane(&|c| c.full);
        let keep = lane(&|c| c.keep);
        let eqm = lane(&|c| c.eqm);
        let pm = lane(&|c| c.pm);
        let ig = lane(&|c| c.ig as u64);
        let ie = lane(&|c| c.ie as u64);
        let zero = _mm512_setzero_si512();
        for wi in 0..r.m.div_ceil(64) {
            let rw = r.r1[wi * r.t0..].as_ptr();
            // SAFETY: ig, ie < t0 for the active lanes (leaf input indices),
            // and r1 holds t0 words for word wi (asserted above).
            let rg = _mm512_mask_i64gather_epi64::<8>(zero, km, ig, rw as *const i64);
            let re = _mm512_mask_i64gather_epi64::<8>(zero, km, ie, rw as *const i64);
            for i in wi * 64..r.m.min(wi * 64 + 64) {
                let bit = _mm512_set1_epi64(1i64 << (i % 64));
                let x = _mm512_set1_epi64(r.xc[i] as i64);
                let t = _mm512_set1_epi64(r.tau[i] as i64);
                let xj = _mm512_and_si512(_mm512_srlv_epi64(x, lo), cm);
                let tj = _mm512_and_si512(_mm512_srlv_epi64(t, lo), cm);
                let idx = _mm512_add_epi64(_mm512_or_si512(_mm512_sllv_epi64(xj, width), tj), base);
                // SAFETY: xj, tj ≤ cm, so idx < off[width] + 2^(2·width),
                // inside `cat` (that width's table has 2^(2·width) words).
                let mut v = _mm512_mask_i64gather_epi64::<8>(zero, km, idx, cat.as_ptr() as *const i64);
                let mg = _mm512_mask_test_epi64_mask(km, rg, bit);
                let me = _mm512_mask_test_epi64_mask(km, re, bit);
                v = _mm512_xor_si512(v, _mm512_maskz_mov_epi64(mg, full));
                v = _mm512_xor_si512(v, _mm512_maskz_mov_epi64(me, eqm));
                let at = i * nc + g0;
                // SAFETY: lanes g0..g0 + nv of row i are inside tb and xs
                // (m·nc words each, asserted above); the other lanes are
                // masked off.
                let b = _mm512_maskz_loadu_epi64(km, r.tb.as_ptr().add(at) as *const i64);
                let o = _mm512_xor_si512(_mm512_and_si512(v, keep), _mm512_and_si512(b, pm));
                _mm512_mask_storeu_epi64(xs.as_mut_ptr().add(at) as *mut i64, km, o);
            }
        }
    }
}

/// [`rows_avx512`] and [`pack_rows_vbmi2`] fused, for rows of at most
/// eight chunk words (ℓ ≤ 40 at k = 5, the ReLU and comparison shapes of
/// the benchmarks and of most operators): each comparison's row is built
/// in one register and its used bytes compressed (in the register) and
/// stored straight into the share — no `xs` array written and read back
/// (issue 35, tenth pass). The same bytes as building the rows and then
/// packing them (`wire_matches_the_share_encoding` runs this path on a
/// CPU with VBMI2 and the separate builders with `scalar_rows`).
///
/// # Safety
/// The CPU must have avx512f, avx512bw and avx512vbmi2; `r.nc` ≤ 8, every
/// half ≤ 4 bytes, and `out` exactly `r.m · g.per` bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi2")]
unsafe fn rows_packed_vbmi2(g: &Geo, luts: &[Vec<u64>; 6], r: &Rows<'_>, out: &mut [U]) {
    use std::arch::x86_64::*;
    let cks = chunk_consts(g);
    let nc = r.nc;
    let per = g.per;
    assert!(nc >= 1 && nc <= 8 && out.len() == r.m * per, "tami wire: fused rows shape");
    let groups = row_groups(&g.halves);
    debug_assert_eq!(groups.len(), 1);
    let (_, km, bm, _) = groups[0];
    assert_eq!(bm.count_ones() as usize, per, "tami wire: fused rows cover a row");
    let sm = low_bytes(per as u32);
    let mut off = [0usize; 6];
    let mut cat: Vec<u64> = Vec::new();
    for (w, l) in luts.iter().enumerate() {
        off[w] = cat.len();
        cat.extend_from_slice(l);
    }
    assert!(r.tb.len() >= r.m * nc && r.xc.len() >= r.m && r.tau.len() >= r.m);
    assert!(r.r1.len() >= r.m.div_ceil(64) * r.t0);
    let lane = |f: &dyn Fn(&Ck) -> u64| {
        let mut a = [0u64; 8];
        for (x, c) in a.iter_mut().zip(&cks) {
            *x = f(c);
        }
        _mm512_loadu_si512(a.as_ptr() as *const _)
    };
    let lo = lane(&|c| c.lo as u64);
    let width = lane(&|c| c.width as u64);
    let cm = lane(&|c| c.cm);
    let base = lane(&|c| off[c.width as usize] as u64);
    let full = lane(&|c| c.full);
    let keep = lane(&|c| c.keep);
    let eqm = lane(&|c| c.eqm);
    let pm = lane(&|c| c.pm);
    let ig = lane(&|c| c.ig as u64);
    let ie = lane(&|c| c.ie as u64);
    let zero = _mm512_setzero_si512();
    let dst = out.as_mut_ptr() as *mut i8;
    for wi in 0..r.m.div_ceil(64) {
        let rw = r.r1[wi * r.t0..].as_ptr();
        // SAFETY: ig, ie < t0 for the active lanes (leaf input indices),
        // and r1 holds t0 words for word wi (asserted above).
        let rg = _mm512_mask_i64gather_epi64::<8>(zero, km, ig, rw as *const i64);
        let re = _mm512_mask_i64gather_epi64::<8>(zero, km, ie, rw as *const i64);
        for i in wi * 64..r.m.min(wi * 64 + 64) {
            let bit = _mm512_set1_epi64(1i64 << (i % 64));
            let x = _mm512_set1_epi64(r.xc[i] as i64);
            let t = _mm512_set1_epi64(r.tau[i] as i64);
            let xj = _mm512_and_si512(_mm512_srlv_epi64(x, lo), cm);
            let tj = _mm512_and_si512(_mm512_srlv_epi64(t, lo), cm);
            let idx = _mm512_add_epi64(_mm512_or_si512(_mm512_sllv_epi64(xj, width), tj), base);
            // SAFETY: xj, tj ≤ cm, so idx < off[width] + 2^(2·width),
            // inside `cat` (that width's table has 2^(2·width) words).
            let mut v = _mm512_mask_i64gather_epi64::<8>(zero, km, idx, cat.as_ptr() as *const i64);
            let mg = _mm512_mask_test_epi64_mask(km, rg, bit);
            let me = _mm512_mask_test_epi64_mask(km, re, bit);
            v = _mm512_xor_si512(v, _mm512_maskz_mov_epi64(mg, full));
            v = _mm512_xor_si512(v, _mm512_maskz_mov_epi64(me, eqm));
            // SAFETY: words i·nc .. i·nc + nc of tb (m·nc words, asserted);
            // the other lanes are masked off.
            let b = _mm512_maskz_loadu_epi64(km, r.tb.as_ptr().add(i * nc) as *const i64);
            let o = _mm512_xor_si512(_mm512_and_si512(v, keep), _mm512_and_si512(b, pm));
            // SAFETY: the masked store writes bytes i·per .. (i + 1)·per of
            // `out` (m·per bytes, asserted): this row's, all of them.
            _mm512_mask_storeu_epi8(dst.add(i * per), sm, _mm512_maskz_compress_epi8(bm, o));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host's row unpacker (VBMI2, where the CPU has it) against a
    /// byte-by-byte reference: random rows of every half layout of the
    /// table segments (1–4-byte halves, absent eq halves, rows of 1–21
    /// words), and its bad-bit OR against the reference's (random bytes put
    /// bits outside narrow tables' positions).
    #[test]
    fn unpack_rows_matches_the_reference() {
        let mut prg = hush_primitives::Prg::new(Block(0x7ab1e5));
        let layouts: Vec<Vec<(u32, u32)>> = vec![
            vec![(16, 16); 16],
            [vec![(16, 0)], vec![(16, 16); 15]].concat(),
            vec![(8, 8), (4, 0), (2, 2), (32, 32), (16, 16)],
            vec![(8, 0); 21],
            vec![(32, 32); 9],
            vec![(2, 2)],
        ];
        for seg in layouts {
            let halves: Vec<(usize, usize)> = seg.iter().map(|&(g, e)| ((g as usize).div_ceil(8), (e as usize).div_ceil(8))).collect();
            let low = |b: u32| if b >= 32 { 0xffff_ffffu64 } else { (1u64 << b) - 1 };
            let allowed: Vec<u64> = seg.iter().map(|&(g, e)| low(g) | (low(e) << 32)).collect();
            let per: usize = halves.iter().map(|h| h.0 + h.1).sum();
            for rows in [1usize, 2, 7, 33] {
                for clean in [true, false] {
                    let mut bytes = vec![0u8; rows * per];
                    prg.fill_bytes(&mut bytes);
                    let mut want = vec![0u64; rows * seg.len()];
                    let mut want_bad = 0u64;
                    for (r, orow) in want.chunks_exact_mut(seg.len()).enumerate() {
                        let mut p = r * per;
                        for (x, (&(gb, eb), &a)) in orow.iter_mut().zip(halves.iter().zip(&allowed)) {
                            let rd = |at: usize, n: usize| (0..n).fold(0u64, |v, i| v | (bytes[at + i] as u64) << (8 * i));
                            let v = rd(p, gb) | (rd(p + gb, eb) << 32);
                            p += gb + eb;
                            *x = if clean { v & a } else { v };
                            want_bad |= *x & !a;
                        }
                    }
                    if clean {
                        // re-encode the clean words (no stray bits)
                        let mut clean_bytes = vec![0u8; rows * per];
                        let mut p = 0;
                        for orow in want.chunks_exact(seg.len()) {
                            for (&t, &(gb, eb)) in orow.iter().zip(&halves) {
                                clean_bytes[p..p + gb].copy_from_slice(&(t as u32).to_le_bytes()[..gb]);
                                clean_bytes[p + gb..p + gb + eb].copy_from_slice(&((t >> 32) as u32).to_le_bytes()[..eb]);
                                p += gb + eb;
                            }
                        }
                        bytes = clean_bytes;
                        assert_eq!(want_bad, 0);
                    }
                    let mut got = vec![0u64; rows * seg.len()];
                    match unpack_rows(&mut got, &bytes, &halves, &allowed, per) {
                        Some(bad) => {
                            assert_eq!(got, want, "{seg:?} rows {rows}");
                            assert_eq!(bad != 0, want_bad != 0, "{seg:?} rows {rows} clean {clean}");
                        }
                        None => assert!(!vbmi2(), "VBMI2 present but the unpacker declined {seg:?}"),
                    }
                }
            }
        }
    }

    /// Both row builders (AVX-512 where the CPU has it, and the scalar
    /// one) against the share encoding.
    #[test]
    fn wire_matches_the_share_encoding() {
        wire_matches(false);
        wire_matches(true);
    }

    fn wire_matches(scalar: bool) {
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
        // the transformer operators' full-width comparisons (16 chunk words)
        shapes.push(TamiShape::new(64, 4, 8, Flavor::Relu));
        for shape in &shapes {
            for n in [1usize, 63, 64, 65, 1023, 1024, 1025, 2100] {
                for role in 0..2u8 {
                    let slow = deal_roles(key, role, ka, kb, n, shape).to_bytes(shape);
                    assert_eq!(roles_bytes_with(key, role, ka, kb, n, shape, scalar), slow, "{shape:?} n {n} role {role} scalar {scalar}");
                    // roles exchanged (the swapped kind's sub-keys)
                    let slow = deal_roles(key, role, kb, ka, n, shape).to_bytes(shape);
                    assert_eq!(roles_bytes_with(key, role, kb, ka, n, shape, scalar), slow, "swapped {shape:?} n {n} role {role}");
                }
                assert_eq!(party1_bytes(kb, n, shape), deal_party1(kb, n, shape).to_bytes(shape), "{shape:?} n {n}");
            }
        }
    }
}
