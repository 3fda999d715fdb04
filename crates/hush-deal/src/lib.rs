//! # hush-deal — one description per correlation, many providers
//!
//! VISION.md "Trust modes": every correlation (Beaver/AND triples, TAMI
//! tables, FSS keys, ...) is described **once**, next to the protocol that
//! consumes it, as a pure function from a key derived from the session
//! seed and public parameters to the two parties' shares: a
//! [`Description`]. Providers serve the descriptions they are given
//! ([`Kinds`]): the trusted module (`hush-tee`, in process or as its own
//! process) and the dealer service of dealer mode host the same
//! descriptions, so the same request gives the same share whoever serves
//! it. Protocol code asks for a [`DealRequest`] through its provider handle
//! and never knows which provider answers.
//!
//! This crate owns what descriptions and providers share: the trait, the
//! request and its codec ([`wire`]), the kind registry, and the byte form of
//! dealt shares ([`Blob`]). It depends on nothing protocol-specific, so the
//! providers do not depend on the protocols either.
//!
//! **Rules for a description** (checked by review, stated in each kind's
//! doc comment): `deal` takes only input-independent parameters (sizes,
//! ring widths, gate shapes); it returns exactly one party's share; the
//! share reveals nothing beyond itself; every parameter that changes the
//! output is part of the key label, so different parameters give
//! independent values. Providers add the rest: one release per (kind,
//! batch), the seed never leaves them.
//!
//! **Seeded shares** (the "PRG-compressed" dealing of trusted dealers such
//! as CrypTen's and SPU's: one party's share is expanded from a short seed,
//! only the other party's share carries corrections). A kind may make one
//! party's share — for hush's kinds the client's (party 1) — a pure function
//! of that party's sub-key `sub_key(key, p)` ([`Description::seeded_party`],
//! [`Description::expand`]); the other party's share is then computed from
//! the whole key, which includes that sub-key. A provider that talks over a
//! network (the dealer service) may then release the 16-byte sub-key
//! instead of the share, and the party expands it with the same
//! description, bit for bit what the share would have been.
//!
//! *Why releasing the sub-key is safe.* The sub-key is a PRG output under
//! the batch key with its own nonce; the other party's share and every
//! dealer-only value (masks that neither party holds) are derived under
//! other nonces, or from the seeded share itself. By PRG security the
//! sub-key is a uniform key independent of those other streams, so the
//! view "sub-key" is simulated by "a uniform key, expanded": it tells the
//! party exactly its own share (which it can compute from the sub-key) and
//! nothing else. The correlation's distribution is unchanged: the seeded
//! share is pseudorandom where a fresh uniform share was before, and each
//! seeded kind's docs say why every field of it may be uniform.

pub mod wire;

use hush_primitives::{Block, Prg};
use wire::{Reader, Writer};

/// Errors of descriptions and of the request codec.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("malformed dealing message: {0}")]
    Malformed(String),
    #[error("dealing request refused: {0}")]
    Refused(String),
}

pub type Result<T> = std::result::Result<T, Error>;

/// Largest batch (elements, or bits for AND triples) one request may deal.
pub const MAX_DEAL_N: u32 = 1 << 20;
/// Largest parameter block of a request.
pub const MAX_PARAMS: usize = 4096;

/// A dealing kind: how both parties' shares of one batch follow from a key.
pub trait Description: Send + Sync {
    /// The kind's name, e.g. `"2pc/tami"`: how requests name it and the
    /// first part of its key labels.
    fn kind(&self) -> &'static str;
    /// The key label of a batch: kind, batch and every parameter.
    /// Malformed or out-of-range parameters are refused here.
    fn label(&self, batch: u64, n: u32, params: &[u8]) -> Result<String>;
    /// `party`'s share (0 = the module role `Sender`, 1 = `Receiver`) of
    /// `n` elements, as bytes: a pure function of `key` and the parameters.
    fn deal(&self, key: Block, party: u8, n: u32, params: &[u8]) -> Result<Vec<u8>>;
    /// Both parties' shares at once (what a dealer that serves both parties
    /// computes): equal to `(deal(key, 0, ..), deal(key, 1, ..))`. Kinds
    /// whose dealing computes both anyway (FSS key generation, TAMI) override
    /// it to do that work once.
    fn deal_pair(&self, key: Block, n: u32, params: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
        Ok((self.deal(key, 0, n, params)?, self.deal(key, 1, n, params)?))
    }
    /// The party whose share is **seeded**: a pure function of its own
    /// sub-key [`sub_key`]`(key, party)` and the parameters, computed by
    /// [`Description::expand`] — `deal(key, p, ..)` must equal
    /// `expand(sub_key(key, p), ..)` for that party. `None` (the default)
    /// when both shares need the whole key (e.g. FSS keys, whose correction
    /// words are common to both). See "Seeded shares" in the crate docs.
    fn seeded_party(&self) -> Option<u8> {
        None
    }
    /// The seeded party's share from its sub-key alone (see
    /// [`Description::seeded_party`]).
    fn expand(&self, sub: Block, n: u32, params: &[u8]) -> Result<Vec<u8>> {
        let _ = (sub, n, params);
        Err(Error::Refused(format!("dealing kind '{}' has no seeded share", self.kind())))
    }
    /// `party`'s share written straight into a host-side structure `sink`
    /// (a type the kind knows, e.g. FSS keys in their evaluation layout)
    /// instead of bytes: for a provider in the host's own process, which
    /// would otherwise encode a share the host decodes at once. `Some(b)`
    /// when done (`b`: the bytes [`Description::deal`] would have
    /// released, for accounting); `None` (the default, or a sink of a type
    /// the kind does not fill) when the caller must take the bytes. It
    /// must write exactly `party`'s share — the values `deal` encodes —
    /// and nothing of the other party's.
    fn deal_into(&self, key: Block, party: u8, n: u32, params: &[u8], sink: &mut dyn std::any::Any) -> Result<Option<usize>> {
        let _ = (key, party, n, params, sink);
        Ok(None)
    }
}

/// Stream nonce of the parties' sub-keys (far above every kind's nonces).
const SUB_KEY_NONCE: u64 = 1 << 48;

/// Party `party`'s sub-key of a batch key: the key of everything that
/// party's share of a seeded kind is expanded from (see "Seeded shares").
pub fn sub_key(key: Block, party: u8) -> Block {
    let mut v = stream(key, SUB_KEY_NONCE + party as u64, 2);
    let b = Block::from_u64s(v[0], v[1]);
    zeroize::Zeroize::zeroize(&mut v);
    b
}

/// A request for one batch of a dealing kind.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DealRequest {
    pub kind: String,
    pub batch: u64,
    pub n: u32,
    /// The kind's encoded parameters (see its description).
    pub params: Vec<u8>,
}

impl DealRequest {
    pub fn new(kind: &str, batch: u64, n: u32, params: Vec<u8>) -> Self {
        DealRequest { kind: kind.to_string(), batch, n, params }
    }

    pub fn encode(&self, w: &mut Writer) {
        w.bytes(self.kind.as_bytes()).u64(self.batch).u32(self.n).bytes(&self.params);
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<Self> {
        let kind = String::from_utf8(r.bytes(64)?).map_err(|_| Error::Malformed("dealing kind is not UTF-8".into()))?;
        Ok(DealRequest { kind, batch: r.u64()?, n: r.u32()?, params: r.bytes(MAX_PARAMS)? })
    }
}

/// The descriptions a provider serves, by kind name.
#[derive(Clone, Default)]
pub struct Kinds(Vec<&'static dyn Description>);

impl Kinds {
    pub fn new(kinds: &[&'static dyn Description]) -> Self {
        Kinds(kinds.to_vec())
    }
    pub fn find(&self, kind: &str) -> Option<&'static dyn Description> {
        self.0.iter().copied().find(|d| d.kind() == kind)
    }
    pub fn names(&self) -> Vec<&'static str> {
        self.0.iter().map(|d| d.kind()).collect()
    }
}

impl std::fmt::Debug for Kinds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Kinds({:?})", self.names())
    }
}

/// `n` words of the PRG stream `nonce` under `key`.
pub fn stream(key: Block, nonce: u64, n: usize) -> Vec<u64> {
    let mut v = vec![0u64; n];
    stream_into(key, nonce, &mut v);
    v
}

/// [`stream`] produced in parallel parts (the same words).
pub fn stream_par(key: Block, nonce: u64, n: usize) -> Vec<u64> {
    use rayon::prelude::*;
    let mut v = vec![0u64; n];
    populate(&mut v);
    if n < 2 * PART {
        stream_into(key, nonce, &mut v);
    } else {
        v.par_chunks_mut(PART).enumerate().for_each(|(i, c)| stream_at(key, nonce, i * PART, c));
    }
    v
}

/// [`stream`] written into `out` (its length is the word count): the same
/// words, no temporary buffer.
pub fn stream_into(key: Block, nonce: u64, out: &mut [u64]) {
    let mut prg = Prg::with_nonce(key, nonce);
    // The stream's bytes read as little-endian words: on a little-endian
    // target the words' own bytes; elsewhere, fill then swap.
    // SAFETY: u64 has no invalid bit patterns and the byte view covers
    // exactly `out`'s initialised memory.
    let bytes = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut u8, out.len() * 8) };
    prg.fill_bytes(bytes);
    if cfg!(target_endian = "big") {
        out.iter_mut().for_each(|x| *x = u64::from_le(*x));
    }
}

/// Words `at .. at + out.len()` of [`stream`]`(key, nonce, ·)`, without
/// the words before them (counter mode: word 2i and 2i + 1 are block i's
/// halves), so that a long stream can be produced in independent parts.
pub fn stream_at(key: Block, nonce: u64, at: usize, out: &mut [u64]) {
    if out.is_empty() {
        return;
    }
    // SAFETY: u64 has no invalid bit patterns and the byte view covers
    // exactly `out`'s initialised memory.
    let bytes = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut u8, out.len() * 8) };
    stream_bytes_at(key, nonce, at, bytes);
    if cfg!(target_endian = "big") {
        out.iter_mut().for_each(|x| *x = u64::from_le(*x));
    }
}

/// [`stream_at`] under a key already expanded (`aes` = `Aes128::new(key)`):
/// the same words, without expanding the key (and building a PRG) for
/// every part — an elementwise kind draws a few streams per part of
/// [`PART`] items under the same two keys (issue 35: the expansions were
/// ~5 % of such a dealing). Counter mode straight into `out` when it is
/// 16-byte aligned (a `Vec<u64>` from the system allocator is), through a
/// small stack buffer otherwise.
pub fn stream_at_with(aes: &hush_primitives::aes::Aes128, nonce: u64, mut at: usize, mut out: &mut [u64]) {
    const TMP: usize = 64;
    if out.is_empty() {
        return;
    }
    if at % 2 == 1 {
        // Odd start: the high half of block at / 2 first.
        let mut b = [Block::ZERO];
        aes.ctr_blocks(nonce, (at / 2) as u64, &mut b);
        out[0] = b[0].hi();
        out = &mut out[1..];
        at += 1;
    }
    let full = out.len() / 2;
    let ctr = (at / 2) as u64;
    if cfg!(target_endian = "little") && (out.as_ptr() as usize) % std::mem::align_of::<Block>() == 0 {
        // SAFETY: `out` is 16-byte aligned and its first 2·full words are
        // `full` blocks of initialised memory; any bit pattern is a valid
        // u128, and on a little-endian target block i's halves are words
        // 2i (low) and 2i + 1 (high), as the stream orders them.
        let blocks = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut Block, full) };
        aes.ctr_blocks(nonce, ctr, blocks);
    } else {
        let mut tmp = [Block::ZERO; TMP];
        let mut done = 0;
        while done < full {
            let m = (full - done).min(TMP);
            aes.ctr_blocks(nonce, ctr + done as u64, &mut tmp[..m]);
            for (w, b) in out[2 * done..2 * (done + m)].chunks_exact_mut(2).zip(&tmp[..m]) {
                w[0] = b.lo();
                w[1] = b.hi();
            }
            done += m;
        }
        hush_primitives::wipe::wipe_bytes(Block::as_bytes_mut(&mut tmp));
    }
    if out.len() % 2 == 1 {
        let mut b = [Block::ZERO];
        aes.ctr_blocks(nonce, ctr + full as u64, &mut b);
        out[2 * full] = b[0].lo();
    }
}

/// [`stream_bytes_at`] under a key already expanded (see
/// [`stream_at_with`]): the same bytes.
pub fn stream_bytes_at_with(aes: &hush_primitives::aes::Aes128, nonce: u64, at: usize, out: &mut [u8]) {
    debug_assert_eq!(out.len() % 8, 0);
    if cfg!(target_endian = "little") && (out.as_ptr() as usize) % 8 == 0 {
        // SAFETY: `out` is 8-byte aligned and holds out.len() / 8 whole
        // words of initialised memory; any bit pattern is a valid u64, and a
        // word's little-endian bytes are its memory here.
        let words = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut u64, out.len() / 8) };
        stream_at_with(aes, nonce, at, words);
        return;
    }
    let mut tmp = [0u64; 128];
    for (i, c) in out.chunks_mut(8 * 128).enumerate() {
        let w = &mut tmp[..c.len() / 8];
        stream_at_with(aes, nonce, at + i * 128, w);
        for (o, x) in c.chunks_exact_mut(8).zip(w.iter()) {
            o.copy_from_slice(&x.to_le_bytes());
        }
    }
    hush_primitives::wipe::wipe_u64s(&mut tmp);
}

/// The little-endian bytes of words `at .. at + out.len() / 8` of
/// [`stream`]`(key, nonce, ·)` (`out.len()` a multiple of 8): a share's
/// stream-valued array written straight into its wire bytes.
pub fn stream_bytes_at(key: Block, nonce: u64, at: usize, out: &mut [u8]) {
    debug_assert_eq!(out.len() % 8, 0);
    if out.is_empty() {
        return;
    }
    let mut prg = Prg::with_nonce_at(key, nonce, (at / 2) as u64);
    if at % 2 == 1 {
        // Odd start: the high half of block at / 2 first.
        let b = prg.random_block().to_bytes();
        out[..8].copy_from_slice(&b[8..]);
        let mut rest = Prg::with_nonce_at(key, nonce, (at / 2 + 1) as u64);
        rest.fill_bytes(&mut out[8..]);
        return;
    }
    prg.fill_bytes(out);
}

/// Items per part of [`elementwise_bytes`]: a multiple of 128, so that a
/// part starts on a whole AES block of every per-item (or per-64-item)
/// stream, and small enough that a part's scratch stays in cache.
pub const PART: usize = 4096;

/// Maps in the pages of a large buffer in bulk, split across the cores,
/// before it is first written (issue 35: fresh pages faulted in one at a
/// time on first touch were about half of the tee-mode transformer
/// dealing's CPU on this VM; one `MADV_POPULATE_WRITE` per part maps the
/// same pages with one kernel entry instead of one fault each — ≈ 40 % less
/// kernel time per page measured here). Only the pages wholly inside
/// `buf` are touched; a buffer under 4 MiB, another OS, or a kernel
/// without the advice (before Linux 5.14: the call fails and is ignored)
/// leaves the pages to fault on first touch as before. Contents are never
/// changed.
pub fn populate<T>(buf: &mut [T]) {
    #[cfg(target_os = "linux")]
    {
        use rayon::prelude::*;
        const PAGE: usize = 4096;
        const MIN: usize = 4 << 20;
        let bytes = std::mem::size_of_val(buf);
        if bytes < MIN {
            return;
        }
        let start = buf.as_mut_ptr() as usize;
        let lo = start.next_multiple_of(PAGE);
        let hi = (start + bytes) & !(PAGE - 1);
        if hi <= lo {
            return;
        }
        if mapped(lo, hi) {
            return;
        }
        let parts = rayon::current_num_threads().clamp(1, 64);
        let step = (hi - lo).div_ceil(parts).next_multiple_of(PAGE);
        (0..parts).into_par_iter().for_each(|i| {
            let a = lo + i * step;
            if a < hi {
                let len = step.min(hi - a);
                // SAFETY: [a, a + len) is whole pages inside `buf`, which
                // this function borrows mutably; MADV_POPULATE_WRITE only
                // maps those pages writable (their contents are unchanged),
                // and its failure is harmless (pages fault on first touch).
                unsafe {
                    libc::madvise(a as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE);
                }
            }
        });
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = buf;
    }
}

/// Whether the pages [lo, hi) (page-aligned, non-empty) look mapped
/// already: its first, middle and last pages are resident (`mincore`).
/// A buffer the allocator recycled from a freed one (a dealing loop, with
/// [`retain_freed_memory`]) is mapped throughout, and populating it again
/// only walks its page tables — for a share of a few MB about as long as
/// generating it (issue 35, `perf`: `follow_page_pte` under `madvise`); a
/// buffer grown from fresh memory has its last page unmapped. Only a
/// heuristic for [`populate`]: a wrong answer costs page faults, never
/// contents.
#[cfg(target_os = "linux")]
fn mapped(lo: usize, hi: usize) -> bool {
    const PAGE: usize = 4096;
    let mid = lo + ((hi - lo) / PAGE / 2) * PAGE;
    [lo, mid, hi - PAGE].iter().all(|&a| {
        let mut v = 0u8;
        // SAFETY: [a, a + PAGE) is one page of a buffer the caller
        // borrows; mincore only reports residency into the one byte `v`.
        let r = unsafe { libc::mincore(a as *mut libc::c_void, PAGE, &mut v) };
        r == 0 && v & 1 == 1
    })
}

/// `len` zero bytes, zeroed on every core for a large buffer (issue 35: a
/// share's buffer zeroed by the allocator is one `memset` on the thread
/// that allocates it — for a TAMI share a sixth of its dealing — while the
/// parts that fill it run on every core). The same value as
/// `vec![0u8; len]`. Used by the TAMI tables (`hush-2pc`); the elementwise
/// kinds keep `vec!` (shares of a few MB, where a run under load could not
/// tell the two apart and may have been slower with this).
pub fn zeroed_bytes_par(len: usize) -> Vec<u8> {
    use rayon::prelude::*;
    const SERIAL: usize = 1 << 20;
    if len < 2 * SERIAL || rayon::current_num_threads() < 2 {
        return vec![0u8; len];
    }
    let mut v: Vec<u8> = Vec::with_capacity(len);
    populate(&mut v.spare_capacity_mut()[..len]);
    v.spare_capacity_mut()[..len].par_chunks_mut(SERIAL).for_each(|c| {
        // SAFETY: `c` is spare capacity of `v`, borrowed mutably by this
        // task alone; writing zero bytes to it is sound.
        unsafe { std::ptr::write_bytes(c.as_mut_ptr(), 0, c.len()) };
    });
    // SAFETY: the first `len` bytes of the capacity were all zeroed above
    // (the chunks cover them), so they are initialised u8s.
    unsafe { v.set_len(len) };
    v
}

/// An elementwise share built in place in its wire layout, in parallel
/// parts (issue 35): `arrays` arrays of `n` ring values, each as
/// [`Blob::put_ring`]`(·, bits)` writes it (`bits` = 64: as [`Blob::put`]),
/// one after the other. `f(start, vals)` computes the values of items
/// `start .. start + m` (m = `vals[0].len()` ≤ [`PART`]): `vals` holds
/// `arrays + extra` scratch vectors of m words (the first `arrays` are
/// written, at most `bits` bits each; the `extra` ones are the part's
/// working space). Parts run on every core (rayon); the scratch is erased
/// when a worker is done. The bytes are those of encoding the whole arrays
/// with [`Blob`]: a kind that switches to this keeps its description.
pub fn elementwise_bytes<F>(n: usize, arrays: usize, extra: usize, bits: u32, f: F) -> Vec<u8>
where
    F: Fn(usize, &mut [Vec<u64>]) + Sync,
{
    use rayon::prelude::*;
    use std::mem::MaybeUninit;
    let rb = bits.div_ceil(8) as usize;
    let len = arrays * (8 + n * rb);
    // Not zeroed first (issue 35): every byte is written below exactly once
    // (each array's length header, and its n values of rb bytes, which tile
    // the rest), so a zeroing pass — a single-threaded `memset` of the
    // whole share when the allocator recycles freed memory, as a dealing
    // loop does — bought nothing. The bytes are those of `vec![0; len]`
    // then filled, as before.
    let mut buf: Vec<u8> = Vec::with_capacity(len);
    let spare = &mut buf.spare_capacity_mut()[..len];
    populate(spare);
    let parts = n.div_ceil(PART);
    let mut outs: Vec<Vec<&mut [MaybeUninit<u8>]>> = (0..parts).map(|_| Vec::with_capacity(arrays)).collect();
    let mut rest: &mut [MaybeUninit<u8>] = spare;
    for _ in 0..arrays {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(8 + n * rb);
        for (o, b) in head[..8].iter_mut().zip((n as u64).to_le_bytes()) {
            o.write(b);
        }
        rest = tail;
        if n > 0 {
            for (o, p) in outs.iter_mut().zip(head[8..].chunks_mut(PART * rb)) {
                o.push(p);
            }
        }
    }
    struct Scratch(Vec<Vec<u64>>);
    impl Drop for Scratch {
        fn drop(&mut self) {
            self.0.iter_mut().for_each(hush_primitives::wipe::wipe_vec_u64);
        }
    }
    outs.into_par_iter().enumerate().for_each_init(
        || Scratch(vec![Vec::new(); arrays + extra]),
        |s, (t, o)| {
            let start = t * PART;
            let m = PART.min(n - start);
            for v in s.0.iter_mut() {
                if v.len() != m {
                    v.clear();
                    v.resize(m, 0);
                }
            }
            f(start, &mut s.0);
            for (vals, out) in s.0.iter().zip(o) {
                put_ring_into(vals, bits, out);
            }
        },
    );
    // SAFETY: the loop above wrote the 8 header bytes of every array, and
    // `put_ring_into` wrote each part's whole slice (m·rb bytes); the
    // parts' slices tile each array's value bytes, so all `len` bytes of
    // the capacity are initialised.
    unsafe { buf.set_len(len) };
    buf
}

/// [`elementwise_bytes`]'s values appended straight to the host's arrays
/// (issue 35, the in-process module's direct path): each of `dests` (the
/// `arrays` = `dests.len()` arrays of the share, in wire order) gets `n`
/// more values, those `f` computes for the parts — the same closure, the
/// same parts and scratch layout as [`elementwise_bytes`], so the values
/// are word for word what decoding that function's bytes gives. No wire
/// bytes exist: each part's values go from its (cache-resident) scratch
/// into the arrays' reserved tails, on every core. An array with less
/// spare capacity than `n` is grown first (one reallocation); a caller
/// that reserved the whole batch once never reallocates.
pub fn elementwise_into<F>(dests: &mut [&mut Vec<u64>], n: usize, extra: usize, f: F)
where
    F: Fn(usize, &mut [Vec<u64>]) + Sync,
{
    use rayon::prelude::*;
    use std::mem::MaybeUninit;
    let arrays = dests.len();
    if n == 0 {
        return;
    }
    let parts = n.div_ceil(PART);
    let mut outs: Vec<Vec<&mut [MaybeUninit<u64>]>> = (0..parts).map(|_| Vec::with_capacity(arrays)).collect();
    for d in dests.iter_mut() {
        d.reserve(n);
        let spare = &mut d.spare_capacity_mut()[..n];
        populate(spare);
        for (o, p) in outs.iter_mut().zip(spare.chunks_mut(PART)) {
            o.push(p);
        }
    }
    struct Scratch(Vec<Vec<u64>>);
    impl Drop for Scratch {
        fn drop(&mut self) {
            self.0.iter_mut().for_each(hush_primitives::wipe::wipe_vec_u64);
        }
    }
    outs.into_par_iter().enumerate().for_each_init(
        || Scratch(vec![Vec::new(); arrays + extra]),
        |s, (t, o)| {
            let start = t * PART;
            let m = PART.min(n - start);
            for v in s.0.iter_mut() {
                if v.len() != m {
                    v.clear();
                    v.resize(m, 0);
                }
            }
            f(start, &mut s.0);
            for (vals, out) in s.0.iter().zip(o) {
                assert_eq!(out.len(), vals.len(), "elementwise part size");
                // SAFETY: `out` is this part's own slice of the array's spare
                // capacity (m words, disjoint from every other part's and
                // from the scratch), and `vals` holds exactly m words.
                unsafe { std::ptr::copy_nonoverlapping(vals.as_ptr(), out.as_mut_ptr() as *mut u64, m) };
            }
        },
    );
    for d in dests.iter_mut() {
        let len = d.len() + n;
        // SAFETY: the parts above wrote every one of the n words after the
        // old length (their slices tile `spare_capacity_mut()[..n]`, each
        // written whole by the copy), and `reserve(n)` made room for them.
        unsafe { d.set_len(len) };
    }
}

/// `vals` (each at most `bits` bits) as [`Blob::put_ring`] lays out the
/// values (rb = ⌈bits/8⌉ little-endian bytes each, no header) into `out`,
/// which is exactly `vals.len()·rb` bytes; every byte of `out` is written.
fn put_ring_into(vals: &[u64], bits: u32, out: &mut [std::mem::MaybeUninit<u8>]) {
    let rb = bits.div_ceil(8) as usize;
    assert_eq!(out.len(), vals.len() * rb, "ring output slice size");
    debug_assert!(bits >= 64 || vals.iter().all(|&x| x >> bits == 0), "ring value wider than {bits} bits");
    let p = out.as_mut_ptr() as *mut u8;
    match rb {
        8 if cfg!(target_endian = "little") => {
            // SAFETY: `out` holds exactly 8·len bytes and does not overlap
            // `vals` (a distinct borrow); a u64's bytes are its LE bytes here.
            unsafe { std::ptr::copy_nonoverlapping(vals.as_ptr() as *const u8, p, vals.len() * 8) };
        }
        4 => {
            for (i, &x) in vals.iter().enumerate() {
                // SAFETY: i < len, so bytes 4i..4i+4 are inside `out`.
                unsafe { std::ptr::write_unaligned(p.add(4 * i) as *mut [u8; 4], (x as u32).to_le_bytes()) };
            }
        }
        _ => {
            for (i, &x) in vals.iter().enumerate() {
                // SAFETY: i < len, so bytes rb·i..rb·i+rb are inside `out`,
                // and rb ≤ 8 bytes are read from the 8-byte array.
                unsafe { std::ptr::copy_nonoverlapping(x.to_le_bytes().as_ptr(), p.add(rb * i), rb) };
            }
        }
    }
}

/// Decodes `out.len()` values of `width` bytes each from `bytes` with
/// `one`, in parallel parts of [`PART`] values for a large array (a share's
/// decode is the host's half of a dealing's cost; its fresh pages are
/// first touched on every core).
pub fn par_decode(bytes: &[u8], width: usize, out: &mut [u64], one: impl Fn(&[u8]) -> u64 + Sync) {
    use rayon::prelude::*;
    debug_assert_eq!(bytes.len(), out.len() * width);
    let run = |(o, b): (&mut [u64], &[u8])| {
        for (x, c) in o.iter_mut().zip(b.chunks_exact(width)) {
            *x = one(c);
        }
    };
    if out.len() < 2 * PART {
        run((out, bytes));
    } else {
        out.par_chunks_mut(PART).zip(bytes.par_chunks(PART * width)).for_each(run);
    }
}

/// Erases a dealt share (contents and spare capacity) and clears it, like
/// [`hush_primitives::wipe::wipe_vec`], with a large share's contents
/// erased in parallel parts on every core (rayon): the consumer's erasure
/// of a share it has decoded is part of every dealing's cost, and one
/// `memset` of a 14–80 MB TAMI share on one thread was ≈ 10 % of a dealing
/// that is built on both cores (issue 35, tenth pass); below 8 MiB one
/// `memset` on this thread (the split did not pay for the 5 MB shares of
/// the elementwise kinds). The same memory is erased, each part by one
/// `memset` kept by `black_box` and a fence.
pub fn wipe_vec_par(v: &mut Vec<u8>) {
    use rayon::prelude::*;
    const MIN: usize = 8 << 20;
    if v.len() >= MIN {
        v.par_chunks_mut(1 << 18).for_each(hush_primitives::wipe::wipe_bytes);
        // SAFETY: the bytes are initialised (just zeroed), any pattern is a
        // valid u8; the spare capacity is then erased by `wipe_vec` below
        // (which sees an empty vector: contents are not erased twice).
        unsafe { v.set_len(0) };
    }
    hush_primitives::wipe::wipe_vec(v);
}

/// Ring mask for `bits` (1..=64).
#[inline]
pub fn ring_mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Length-prefixed u64 arrays: the byte form of every dealt share.
pub struct Blob(pub Vec<u8>);

impl Blob {
    pub fn new() -> Self {
        Blob(Vec::new())
    }
    /// An empty blob with room for `bytes` (a share written without
    /// reallocating: each regrowth copies and touches fresh pages).
    pub fn with_capacity(bytes: usize) -> Self {
        Blob(Vec::with_capacity(bytes))
    }
    pub fn put(&mut self, v: &[u64]) -> &mut Self {
        self.0.extend_from_slice(&(v.len() as u64).to_le_bytes());
        for x in v {
            self.0.extend_from_slice(&x.to_le_bytes());
        }
        self
    }
    /// An array of `bits`-bit ring values (1..=64), ⌈bits/8⌉ bytes each:
    /// what a dealt ring element costs on a dealer link.
    pub fn put_ring(&mut self, v: &[u64], bits: u32) -> &mut Self {
        let rb = bits.div_ceil(8) as usize;
        self.0.extend_from_slice(&(v.len() as u64).to_le_bytes());
        self.0.reserve(v.len() * rb);
        for x in v {
            debug_assert!(bits >= 64 || x >> bits == 0, "ring value wider than {bits} bits");
            self.0.extend_from_slice(&x.to_le_bytes()[..rb]);
        }
        self
    }
}

impl Default for Blob {
    fn default() -> Self {
        Self::new()
    }
}

/// Reads the arrays written by [`Blob`], checking every length.
pub struct BlobReader<'a> {
    buf: &'a [u8],
}

impl<'a> BlobReader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        BlobReader { buf }
    }
    /// The next array, which must have exactly `expect` words.
    pub fn take(&mut self, expect: usize) -> Result<Vec<u64>> {
        if self.buf.len() < 8 {
            return Err(Error::Malformed("dealt share: truncated".into()));
        }
        let n = u64::from_le_bytes(self.buf[..8].try_into().expect("8 bytes")) as usize;
        if n != expect {
            return Err(Error::Malformed(format!("dealt share: array of {n} words, expected {expect}")));
        }
        let need = n.checked_mul(8).and_then(|b| b.checked_add(8)).ok_or_else(|| Error::Malformed("dealt share: size".into()))?;
        if self.buf.len() < need {
            return Err(Error::Malformed("dealt share: truncated".into()));
        }
        let mut v = vec![0u64; n];
        populate(&mut v);
        par_decode(&self.buf[8..need], 8, &mut v, |c| u64::from_le_bytes(c.try_into().expect("8 bytes")));
        self.buf = &self.buf[need..];
        Ok(v)
    }
    /// The next array's raw bytes: a count word that must equal `expect`,
    /// then exactly `len` bytes (for a kind's own packed layouts).
    pub fn take_bytes(&mut self, expect: usize, len: usize) -> Result<&'a [u8]> {
        if self.buf.len() < 8 {
            return Err(Error::Malformed("dealt share: truncated".into()));
        }
        let n = u64::from_le_bytes(self.buf[..8].try_into().expect("8 bytes")) as usize;
        if n != expect {
            return Err(Error::Malformed(format!("dealt share: array of {n} values, expected {expect}")));
        }
        let need = len.checked_add(8).ok_or_else(|| Error::Malformed("dealt share: size".into()))?;
        if self.buf.len() < need {
            return Err(Error::Malformed("dealt share: truncated".into()));
        }
        let b = &self.buf[8..need];
        self.buf = &self.buf[need..];
        Ok(b)
    }
    /// The next array written by [`Blob::put_ring`], which must have
    /// exactly `expect` values of at most `bits` bits.
    pub fn take_ring(&mut self, expect: usize, bits: u32) -> Result<Vec<u64>> {
        let rb = bits.div_ceil(8) as usize;
        if self.buf.len() < 8 {
            return Err(Error::Malformed("dealt share: truncated".into()));
        }
        let n = u64::from_le_bytes(self.buf[..8].try_into().expect("8 bytes")) as usize;
        if n != expect {
            return Err(Error::Malformed(format!("dealt share: array of {n} values, expected {expect}")));
        }
        let need = n.checked_mul(rb).and_then(|b| b.checked_add(8)).ok_or_else(|| Error::Malformed("dealt share: size".into()))?;
        if self.buf.len() < need {
            return Err(Error::Malformed("dealt share: truncated".into()));
        }
        let mut v = vec![0u64; n];
        populate(&mut v);
        // Fixed-width loads for the common widths (the generic copy per
        // element showed in profiles of TAMI decoding); same values.
        let src = &self.buf[8..need];
        match rb {
            8 => par_decode(src, 8, &mut v, |c| u64::from_le_bytes(c.try_into().expect("8 bytes"))),
            4 => par_decode(src, 4, &mut v, |c| u32::from_le_bytes(c.try_into().expect("4 bytes")) as u64),
            _ => par_decode(src, rb, &mut v, |c| {
                let mut a = [0u8; 8];
                a[..c.len()].copy_from_slice(c);
                u64::from_le_bytes(a)
            }),
        }
        if bits < 64 && v.iter().fold(0u64, |acc, x| acc | x >> bits) != 0 {
            return Err(Error::Malformed(format!("dealt share: a value wider than {bits} bits")));
        }
        self.buf = &self.buf[need..];
        Ok(v)
    }
    /// [`BlobReader::take_ring`] appended to `out` instead of returned: the
    /// next array of exactly `expect` values of at most `bits` bits, decoded
    /// into `out`'s tail (a host collecting a share crossing after crossing
    /// in one array reserved once). On an error `out` is as it was (the
    /// tail written so far is erased and dropped) and the reader has not
    /// moved.
    pub fn take_ring_into(&mut self, expect: usize, bits: u32, out: &mut Vec<u64>) -> Result<()> {
        let rb = bits.div_ceil(8) as usize;
        if self.buf.len() < 8 {
            return Err(Error::Malformed("dealt share: truncated".into()));
        }
        let n = u64::from_le_bytes(self.buf[..8].try_into().expect("8 bytes")) as usize;
        if n != expect {
            return Err(Error::Malformed(format!("dealt share: array of {n} values, expected {expect}")));
        }
        let need = n.checked_mul(rb).and_then(|b| b.checked_add(8)).ok_or_else(|| Error::Malformed("dealt share: size".into()))?;
        if self.buf.len() < need {
            return Err(Error::Malformed("dealt share: truncated".into()));
        }
        let old = out.len();
        out.resize(old + n, 0);
        let (src, tail) = (&self.buf[8..need], &mut out[old..]);
        match rb {
            8 => par_decode(src, 8, tail, |c| u64::from_le_bytes(c.try_into().expect("8 bytes"))),
            4 => par_decode(src, 4, tail, |c| u32::from_le_bytes(c.try_into().expect("4 bytes")) as u64),
            _ => par_decode(src, rb, tail, |c| {
                let mut a = [0u8; 8];
                a[..c.len()].copy_from_slice(c);
                u64::from_le_bytes(a)
            }),
        }
        if bits < 64 && tail.iter().fold(0u64, |acc, x| acc | x >> bits) != 0 {
            hush_primitives::wipe::wipe_u64s(tail);
            out.truncate(old);
            return Err(Error::Malformed(format!("dealt share: a value wider than {bits} bits")));
        }
        self.buf = &self.buf[need..];
        Ok(())
    }
    pub fn finish(self) -> Result<()> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(Error::Malformed(format!("dealt share: {} trailing bytes", self.buf.len())))
        }
    }
}

/// Parses a whole parameter block with `f` (trailing bytes are an error).
pub fn parse_params<T>(params: &[u8], what: &'static str, f: impl FnOnce(&mut Reader<'_>) -> Result<T>) -> Result<T> {
    let mut r = Reader::new(params, what);
    let v = f(&mut r)?;
    r.finish()?;
    Ok(v)
}

#[cfg(test)]
mod stream_tests {
    use super::*;

    /// Populating a buffer's pages never changes its contents (a buffer
    /// above the 4 MiB floor, an unaligned slice of one, a small one, and
    /// spare capacity that is then written).
    #[test]
    fn populate_keeps_contents() {
        let mut v: Vec<u64> = (0..(1u64 << 20) + 3).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
        let want = v.clone();
        populate(&mut v);
        assert_eq!(v, want);
        populate(&mut v[1..]);
        assert_eq!(v, want);
        let mut small = vec![7u8; 100];
        populate(&mut small);
        assert_eq!(small, vec![7u8; 100]);
        let z = zeroed_bytes_par(9 << 20);
        assert!(z.len() == 9 << 20 && z.iter().all(|&b| b == 0));
    }

    /// The in-place elementwise builder writes what encoding whole arrays
    /// with `Blob` writes, for every width and around the part size.
    #[test]
    fn elementwise_matches_blob() {
        for bits in [1u32, 8, 12, 32, 37, 64] {
            for n in [0usize, 1, PART - 1, PART, PART + 1, 2 * PART + 77] {
                let key = Block(bits as u128 * 1000 + n as u128);
                let whole: Vec<Vec<u64>> = (0..3).map(|a| stream(key, a, n).into_iter().map(|x| x & ring_mask(bits)).collect()).collect();
                let mut b = Blob::new();
                for v in &whole {
                    b.put_ring(v, bits);
                }
                let fast = elementwise_bytes(n, 3, 1, bits, |start, vals| {
                    let m = vals[0].len();
                    for a in 0..3 {
                        stream_at(key, a as u64, start, &mut vals[3][..m]);
                        let (outs, tmp) = vals.split_at_mut(3);
                        for (o, x) in outs[a].iter_mut().zip(&tmp[0]) {
                            *o = x & ring_mask(bits);
                        }
                    }
                });
                assert_eq!(fast, b.0, "bits {bits} n {n}");
            }
        }
    }

    /// The parallel wipe erases every byte of a large share and of its
    /// spare capacity (and a small one's), and clears it.
    #[test]
    fn wipe_vec_par_erases_everything() {
        for (len, cap) in [(0usize, 0usize), (100, 300), (5 << 20, 5 << 20), ((8 << 20) + 77, (9 << 20) + 5), (11 << 20, 11 << 20)] {
            let mut v: Vec<u8> = Vec::with_capacity(cap);
            v.resize(cap, 0xC3);
            v.truncate(len);
            let p = v.as_ptr();
            wipe_vec_par(&mut v);
            assert!(v.is_empty() && v.capacity() >= cap && v.as_ptr() == p);
            // SAFETY: all `cap` bytes of the allocation were initialised
            // (resize, then the wipe); reading them back as u8 is sound.
            let all = unsafe { std::slice::from_raw_parts(p, cap) };
            assert!(all.iter().all(|&x| x == 0), "len {len} cap {cap}");
        }
    }

    /// The direct builder appends to the host's arrays exactly the values
    /// decoding the in-place bytes gives, for every width, around the part
    /// size, after existing contents, with and without room reserved; and
    /// appending arrays from bytes (`take_ring_into`) gives them too.
    #[test]
    fn elementwise_into_matches_decoded_bytes() {
        for bits in [1u32, 8, 12, 32, 37, 64] {
            for n in [0usize, 1, PART - 1, PART, PART + 1, 2 * PART + 77] {
                let key = Block(bits as u128 * 77 + n as u128);
                let fill = |start: usize, vals: &mut [Vec<u64>]| {
                    let m = vals[0].len();
                    for a in 0..2 {
                        stream_at(key, a as u64, start, &mut vals[2][..m]);
                        let (outs, tmp) = vals.split_at_mut(2);
                        for (o, x) in outs[a].iter_mut().zip(&tmp[0]) {
                            *o = (x ^ start as u64) & ring_mask(bits);
                        }
                    }
                };
                let bytes = elementwise_bytes(n, 2, 1, bits, fill);
                let prefix: Vec<u64> = (0..5).map(|i| i & ring_mask(bits)).collect();
                for reserve in [0usize, n] {
                    let (mut a, mut b) = (prefix.clone(), prefix.clone());
                    a.reserve_exact(reserve);
                    b.reserve_exact(reserve);
                    elementwise_into(&mut [&mut a, &mut b], n, 1, fill);
                    let (mut da, mut db) = (prefix.clone(), prefix.clone());
                    let mut rd = BlobReader::new(&bytes);
                    rd.take_ring_into(n, bits, &mut da).unwrap();
                    rd.take_ring_into(n, bits, &mut db).unwrap();
                    rd.finish().unwrap();
                    assert_eq!((&a, &b), (&da, &db), "bits {bits} n {n} reserve {reserve}");
                    let mut rd = BlobReader::new(&bytes);
                    assert_eq!(a[5..], rd.take_ring(n, bits).unwrap()[..], "bits {bits} n {n}");
                }
            }
        }
    }

    /// A malformed array leaves the host's array and the reader unchanged.
    #[test]
    fn take_ring_into_refuses_and_keeps_the_array() {
        let mut b = Blob::new();
        b.put_ring(&[1, 2, 3, 0xff], 8);
        let prefix = vec![9u64, 9];
        for (expect, bits) in [(3usize, 8u32), (5, 8), (4, 7)] {
            let mut out = prefix.clone();
            let mut rd = BlobReader::new(&b.0);
            assert!(rd.take_ring_into(expect, bits, &mut out).is_err(), "expect {expect} bits {bits}");
            assert_eq!(out, prefix);
            // the reader did not move: the right request still reads it
            rd.take_ring_into(4, 8, &mut out).unwrap();
            assert_eq!(out, [9, 9, 1, 2, 3, 0xff]);
        }
        let mut out = prefix.clone();
        assert!(BlobReader::new(&b.0[..11]).take_ring_into(4, 8, &mut out).is_err());
        assert!(BlobReader::new(&b.0[..5]).take_ring_into(4, 8, &mut out).is_err());
        assert_eq!(out, prefix);
    }

    /// Any part of a stream, from any word (odd or even), of any length,
    /// equals the same words of the whole stream.
    #[test]
    fn stream_parts_equal_the_whole() {
        let key = Block(0x1234_5678_9abc);
        let whole = stream(key, 7, 300);
        for at in [0usize, 1, 2, 3, 63, 64, 127, 128, 129, 200] {
            for len in [1usize, 2, 3, 17, 64, 100] {
                if at + len > whole.len() {
                    continue;
                }
                let mut part = vec![0u64; len];
                stream_at(key, 7, at, &mut part);
                assert_eq!(part, whole[at..at + len], "at {at} len {len}");
                // bytes into an unaligned slice
                let mut buf = vec![0u8; len * 8 + 3];
                stream_bytes_at(key, 7, at, &mut buf[3..]);
                let words: Vec<u64> = buf[3..].chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
                assert_eq!(words, whole[at..at + len], "bytes at {at} len {len}");
            }
        }
        assert_eq!(stream_par(key, 7, 300), whole);
        // under an expanded key: every start and length, aligned or not
        let aes = hush_primitives::aes::Aes128::new(key);
        for at in [0usize, 1, 2, 3, 64, 127, 128, 129] {
            for len in [0usize, 1, 2, 3, 127, 128, 129, 200] {
                if at + len > whole.len() {
                    continue;
                }
                let mut buf = vec![0u64; len + 1];
                stream_at_with(&aes, 7, at, &mut buf[..len]);
                assert_eq!(buf[..len], whole[at..at + len], "with at {at} len {len}");
                stream_at_with(&aes, 7, at, &mut buf[1..]);
                assert_eq!(buf[1..], whole[at..at + len], "with, unaligned, at {at} len {len}");
                let mut bytes = vec![0u8; len * 8 + 3];
                for off in [0usize, 3] {
                    stream_bytes_at_with(&aes, 7, at, &mut bytes[off..off + len * 8]);
                    let got: Vec<u64> = bytes[off..off + len * 8].chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
                    assert_eq!(got, whole[at..at + len], "bytes with at {at} len {len} offset {off}");
                }
            }
        }
        assert_eq!(stream_par(key, 7, 3 * PART + 5), stream(key, 7, 3 * PART + 5));
        // another nonce is another stream (checked below)
        let mut other = vec![0u64; 4];
        stream_at(key, 8, 0, &mut other);
        assert_ne!(other, whole[..4]);
    }
}

/// Asks the C allocator (glibc) to keep freed buffers of up to 32 MiB in
/// the process instead of returning them to the kernel, so that a dealing
/// loop (one crossing's share, its batch, freed, the next crossing's)
/// reuses warm memory instead of page-faulting fresh, zeroed pages for
/// every crossing: on a VM a first touch of a fresh page costs a few µs,
/// more than generating the keys it holds (issue 35). Process-wide and
/// idempotent; call it once at start-up (the `hush` and `hush-tee-module`
/// binaries do). A no-op off Linux/glibc. Freed memory is scrubbed by its
/// owner before it is freed (the dealt shares and batches zeroize on
/// drop), so keeping it mapped keeps no secret readable.
pub fn retain_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning parameters; called with
    // documented parameters and in-range values it has no other effect.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}
