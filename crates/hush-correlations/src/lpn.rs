//! Primal LPN with regular noise, as used by Ferret (Yang–Weng–Lan–Zhang–Wang,
//! "Ferret: Fast Extension for coRRElated OT with small communication",
//! CCS 2020, §4 and §6) and SilentFlow (§III-A, step 3): given a
//! k-correlation (v; u, w = v ⊕ u·Δ) and an n-vector sparse correlation
//! (s; e, r = s ⊕ e·Δ) with e regular (exactly one 1 in each of t blocks of
//! 2^h positions), the outputs
//!   sender y = s ⊕ A·v,   receiver z = r ⊕ A·w (choice bits e ⊕ A·u)
//! are n fresh COTs. A is a public k → n local linear code with
//! [`D`] = 10 ones per output row, indices from fixed-key AES in counter
//! mode (Ferret §6.1's local linear code; SilentFlow Fig. 9 batches the
//! index generation).
//!
//! The matrix-vector product is the memory-bound kernel of both protocols:
//! every output gathers D random entries of the k-vector, 10^8 random
//! 16-byte reads per party per 10^7 COTs — L3 misses at FERRET_MAIN (a
//! 9.4 MB k-vector), L2 hits at SilentFlow's [`LPN_B10`] (1 MiB).
//! [`LpnMatrix`] (SilentFlow §IV, on a SIMD core):
//! * batched index generation: the indices of [`SUB`] rows at a time come
//!   from one fused AES-CTR kernel (`simd::lpn_offsets`, 32 VAES blocks in
//!   flight, counters never in memory), written as byte offsets into the
//!   k-vector;
//! * vectorized XOR reduction: each row's D loads are independent 128-bit
//!   loads folded into XORs, with software prefetch 12 rows (120 lines)
//!   ahead for k-vectors beyond the L2 detected at run time — measured
//!   2× faster than relying on
//!   out-of-order execution alone (the reduction is then bound by L1 miss
//!   slots × L3 latency);
//! * instruction-level fusion: the reduction waits on memory most of the
//!   time, so the next SUB rows' index AES and any caller-supplied AES work
//!   (the next GGM tree, [`crate::fused`]) are interleaved into it every few
//!   rows (`mul_xor_bg`). At level avx2 (AES-NI) the index AES is instead
//!   inlined into the gather loop itself and the next product's first
//!   chunk is computed by this one's last (`ready`), while the GGM levels
//!   run between chunks — interleaving AES-NI steps the VAES way was
//!   measured slower (see `simd::AVX2_IX_ROWS`).
//!
//! The matrix: row j's D indices are words D·j .. D·j + D of the stream
//! AES_{LPN key}(nonce ‖ 0), AES_{LPN key}(nonce ‖ 1), …, read as 32-bit
//! words w with index ⌊w·k/2^32⌋, or — when k is a power of two ≤ 2^16
//! (SilentFlow's k = 2^16) — as 16-bit words w with index w mod k, exactly
//! uniform and half the AES; i.e. D uniformly random indices per output
//! from a fixed-key PRG, as in Ferret §6.1. The optimisations change only
//! the order in which they are generated and consumed.

use hush_primitives::aes::Aes128;
use hush_primitives::Block;
use std::cell::RefCell;

/// Nonzeros per row of A (Ferret §6.1).
pub const D: usize = 10;
/// Rows whose indices are generated per AES batch (their 10·SUB 32-bit
/// offsets, 20 KiB, stay in L1).
pub const SUB: usize = 512;

/// A regular-noise primal LPN parameter set: n outputs, k-vector secret, t
/// noisy positions (one per block of 2^h outputs, n = t·2^h).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LpnParams {
    pub name: &'static str,
    pub n: usize,
    pub k: usize,
    pub t: usize,
    pub h: u32,
    /// Bits of LPN security claimed for this set (0 = test only, insecure).
    pub security_bits: u32,
}

/// Ferret's main regular-noise set: n = 10,608,640 = 1,295 · 2^13,
/// k = 589,824, t = 1,295 (one iteration yields 10,001,981 COTs).
///
/// Source, transcribed exactly: emp-ot `emp-ot/ferret/constants.h`,
/// `N_REG`/`K_REG`/`T_REG`/`BIN_SZ_REG`, introduced in commit
/// 9f374d4e54039c26fd6c3eb15fc5720cbb74b21b (2020-09-28, "new parameter")
/// and shipped unchanged in the releases 0.1.0 … 0.2.3 (e.g. tag 0.2.3 =
/// fd98de43c81014671fa4b956be669054ad6cc210); Ferret (CCS 2020) §6 is the
/// analysis it was chosen by (Pooled Gauss, SD/ISD, BKW, low-weight parity
/// checks on regular noise). emp-ot replaced it on its main line in
/// d37a4484deb929728ea2a2e8604379603644dd35 (2022) and, in v1, by
/// [`LPN_B13`]-style sets chosen with a newer estimator that also covers
/// the hybrid and algebraic attacks on regular noise, which take larger t at
/// comparable n and k; the 128-bit claim here is the 2020 analysis's.
///
/// Bootstrapping: emp-ot 0.2.x fed this set from one setup iteration
/// (`N_PRE_REG` …, n = 649,728, k = 36,288, t = 1,269, h = 9); hush climbs
/// IKNP → [`LPN_B10`] → FERRET_MAIN instead ([`crate::ferret::ladder`]),
/// every step a published set: LPN_B10's n = 870,400 covers this set's
/// k + t·h = 606,659 base COTs (hush's Ferret is semi-honest: no 128 COTs
/// for the malicious check).
pub const FERRET_MAIN: LpnParams =
    LpnParams { name: "ferret-main", n: 10_608_640, k: 589_824, t: 1_295, h: 13, security_bits: 128 };

/// emp-ot v1's ladder, transcribed exactly from `emp-ot/tuning.h` at tag
/// v1.0.0-alpha.1 (commit 03acb042b98e82fd5fd0da33babd44801f8ec082;
/// `PrimalLPNParameter(t, log k, tree depth h)`, n = t·2^h, k = 2^log k):
/// `ferret_b13 = (1900, 19, 13)`, `ferret_b12 = (1520, 18, 12)`,
/// `ferret_b11 = (1170, 17, 11)`, `ferret_b10 = (850, 16, 10)` ([`LPN_B10`]),
/// "selected to give ~128-bit security against the published regular-LPN
/// attacks (Gauss / SD-ISD / BJMM / hybrid / esser / agb2) per the
/// lpnestimator", the hybrid attack binding. (b10–b12 entered in
/// 1d0339738f81 and dcbafffc3510, b13's t = 1900 in 7a7e8c7f9c5d.)
///
/// Each set's base is k + t·h COTs, which [`LPN_B10`]'s n = 870,400 covers
/// for every set up to b13 (548,988), so every ladder is IKNP → LPN_B10 →
/// the set.
pub const LPN_B13: LpnParams =
    LpnParams { name: "lpn-b13", n: 1_900 << 13, k: 1 << 19, t: 1_900, h: 13, security_bits: 128 };
/// See [`LPN_B13`]: emp-ot v1 `ferret_b12`, n = 6,225,920.
pub const LPN_B12: LpnParams =
    LpnParams { name: "lpn-b12", n: 1_520 << 12, k: 1 << 18, t: 1_520, h: 12, security_bits: 128 };
/// See [`LPN_B13`]: emp-ot v1 `ferret_b11`, n = 2,396,160.
pub const LPN_B11: LpnParams =
    LpnParams { name: "lpn-b11", n: 1_170 << 11, k: 1 << 17, t: 1_170, h: 11, security_bits: 128 };

/// Ferret's sets, largest batch first (the `--max-mem` selection takes the
/// first whose working set fits). Earlier versions of hush had two
/// bootstrapping sets here, (n, k, t, h) = (607,232, 69,454, 593, 10) and
/// (75,520, 8,911, 590, 7), cited as the Ferret paper / emp-ot
/// `constants.h`. They occur only in emp-ot commit
/// 4c87334dcf58ae7f298fe645357abf8b2a5156ed (2021-09-15, "dual lpn") on the
/// unmerged branch `ferret-setup`, with no security analysis stated, in no
/// release and not in the paper; they were replaced by the published sets
/// above.
pub const FERRET_SETS: [LpnParams; 5] = [FERRET_MAIN, LPN_B13, LPN_B12, LPN_B11, LPN_B10];

/// SilentFlow's set: n = 870,400 = 850 · 2^10, k = 2^16, t = 850, h = 10 —
/// the `ferret_b10 = PrimalLPNParameter(850, 16, 10)` set of emp-ot v1
/// (`emp-ot/tuning.h` at tag v1.0.0-alpha.1, commit
/// 03acb042b98e82fd5fd0da33babd44801f8ec082; see [`LPN_B13`]) — also the
/// first step of every Ferret ladder. (t, log k, h) chosen
/// for ~128-bit security against the attacks it lists — Gauss, SD/ISD,
/// BJMM, the hybrid attack, Esser et al.'s and the AGB-style algebraic
/// attacks on regular noise — per an LPN estimator, the hybrid attack
/// binding; a superset of the Ferret paper's §6 analysis). Why SilentFlow
/// uses it rather than [`FERRET_MAIN`]:
/// * its batches cost no communication (the trusted modules supply each
///   batch's sparse vector), so Ferret's reason for huge batches — amortising
///   the k + t·h base COTs over n — is gone;
/// * its k-vector is 1 MiB, the size of one core's L2 here, where
///   FERRET_MAIN's is 9.4 MB: the D = 10 gathers per output, the dominant
///   cost, become L2 hits instead of L3 misses (and the two co-located
///   parties stop competing for the one L3);
/// * k = 2^16: each index is a 16-bit word of the AES stream, exactly
///   uniform, half the index-generation AES of 32-bit multiply-shift
///   (`simd::words_per_block`).
///
/// Each batch keeps k outputs as the next batch's k-vector (7.5 %).
pub const LPN_B10: LpnParams = LpnParams { name: "lpn-b10", n: 870_400, k: 65_536, t: 850, h: 10, security_bits: 128 };

/// SilentFlow's sets, largest first.
pub const SILENT_SETS: [LpnParams; 1] = [LPN_B10];

impl LpnParams {
    /// log2 of the cost of the pooled Gauss attack (Esser–Kübler–May,
    /// CRYPTO 2017) on this set: draw k of the n samples until none of them
    /// is noisy (probability C(n−t, k)/C(n, k) for regular noise, which has
    /// exactly t noisy samples), then solve a k × k system (k^2.8). A sanity
    /// floor only — the sets' 128-bit claims rest on the analyses cited at
    /// each set, which include stronger attacks.
    pub fn pooled_gauss_bits(&self) -> f64 {
        let (n, k, t) = (self.n as f64, self.k as f64, self.t as f64);
        // log2 C(n−t, k)/C(n, k) = Σ_{i<k} log2((n−t−i)/(n−i)), summed exactly.
        let mut lp = 0.0;
        for i in 0..self.k {
            let i = i as f64;
            lp += ((n - t - i) / (n - i)).log2();
        }
        2.8 * k.log2() - lp
    }
}

/// A tiny **insecure** set for fast tests (n not a multiple of common
/// request sizes on purpose).
pub const TEST_INSECURE: LpnParams =
    LpnParams { name: "test-insecure", n: 40 * 64, k: 300, t: 40, h: 6, security_bits: 0 };
/// A second insecure test set whose n covers [`TEST_INSECURE`]'s base.
pub const TEST_INSECURE_PRE: LpnParams =
    LpnParams { name: "test-insecure-pre", n: 30 * 32, k: 200, t: 30, h: 5, security_bits: 0 };

impl LpnParams {
    /// Leaves per GGM tree.
    pub fn leaves(&self) -> usize {
        1 << self.h
    }
    /// Checks n = t·2^h, 2 ≤ h ≤ 30 and 0 < k < n.
    pub fn validate(&self) -> crate::Result<()> {
        if self.h < 2 || self.h > 30 || self.n != self.t << self.h || self.k >= self.n || self.k == 0 {
            return Err(crate::Error::Invalid(format!("inconsistent LPN parameters {self:?}")));
        }
        Ok(())
    }
    /// Bytes of the per-party working set of the streaming generator
    /// ([`crate::fused`]): the base and the next batch's base (k + t·h
    /// blocks each, enough for Ferret's reserve), three trees of scratch,
    /// Ferret's SPCOT flight and hashes (t·(3h+1) blocks) and two chunks of
    /// LPN offsets. There is no n-block batch buffer: outputs go straight
    /// into the caller's buffer.
    pub fn batch_bytes(&self) -> usize {
        let h = self.h as usize;
        16 * (2 * (self.k + self.t * h) + 3 * self.leaves() + self.t * (3 * h + 1)) + 2 * 4 * SUB * D
    }
}

/// The public matrix A of one batch: row j's D column indices are
/// ⌊w·k / 2^32⌋ for the 32-bit words w of AES_key(nonce ‖ ctr).
pub struct LpnMatrix {
    aes: Aes128,
    keys: crate::simd::RoundKeys,
    nonce: u64,
    k: usize,
    /// Index words per AES block ([`crate::simd::words_per_block`]).
    wpb: usize,
    /// Double-buffered offsets of SUB rows, allocated once per matrix (a
    /// zeroed 40 KiB stack array per call cost ~10% of a small tree's
    /// product).
    bufs: RefCell<Box<[[u32; SUB * D]; 2]>>,
    /// `(row, i)`: `bufs[i]` already holds the offsets of rows
    /// row .. row + SUB, computed in the background of the previous
    /// product (the next tree's first chunk, fused into this tree's last).
    ready: std::cell::Cell<Option<(usize, usize)>>,
}

/// The public key of the index generator (any fixed public value works:
/// A must be independent of the secrets, not secret).
const LPN_KEY: Block = Block(0x4c50_4e5f_6875_7368_5f41_5f6d_6174_7278);

impl LpnMatrix {
    /// The matrix of batch `nonce` (both parties use the same nonce).
    pub fn new(nonce: u64, k: usize) -> Self {
        assert!(k > 0 && k < (1 << 28), "k must be below 2^28 (byte offsets are 32-bit)");
        LpnMatrix {
            aes: Aes128::new(LPN_KEY),
            keys: crate::simd::RoundKeys::new(LPN_KEY),
            nonce,
            k,
            wpb: crate::simd::words_per_block(k as u32),
            bufs: RefCell::new(Box::new([[0u32; SUB * D]; 2])),
            ready: std::cell::Cell::new(None),
        }
    }

    /// The D indices of row `row` (reference path, used by tests): words
    /// D·row .. D·row + D of the index stream.
    pub fn row(&self, row: usize) -> [usize; D] {
        std::array::from_fn(|l| {
            let i = D * row + l;
            let mut b = [self.ctr(i / self.wpb)];
            self.aes.encrypt_blocks(&mut b);
            self.index(b[0], i % self.wpb)
        })
    }

    /// First AES block of row `row`'s index words (`row`·D a multiple of
    /// the words per block).
    fn first_block(&self, row: usize) -> u64 {
        debug_assert!((row * D).is_multiple_of(self.wpb));
        (row * D / self.wpb) as u64
    }

    /// AES blocks that hold the index words of `rows` rows, rounded up to
    /// the kernel's step.
    fn blocks_for(&self, rows: usize) -> usize {
        let step = crate::simd::OFFSET_STEP_BLOCKS;
        (rows * D).div_ceil(self.wpb).div_ceil(step) * step
    }

    #[inline]
    fn ctr(&self, c: usize) -> Block {
        Block(((self.nonce as u128) << 64) | c as u128)
    }

    /// The index of word `q` of block `b` (see [`crate::simd::words_per_block`]).
    fn index(&self, b: Block, q: usize) -> usize {
        if self.wpb == 8 {
            (((b.0 >> (16 * q)) as usize) & 0xffff) & (self.k - 1)
        } else {
            ((((b.0 >> (32 * q)) as u32) as u64 * self.k as u64) >> 32) as usize
        }
    }

    /// out\[j\] ^= (A·base)\[row0 + j\]. `row0` must be even.
    pub fn mul_xor(&self, base: &[Block], row0: usize, out: &mut [Block]) {
        self.apply(base, row0, out, true)
    }

    /// out\[j\] = (A·base)\[row0 + j\]. `row0` must be even.
    pub fn mul(&self, base: &[Block], row0: usize, out: &mut [Block]) {
        self.apply(base, row0, out, false)
    }

    fn apply(&self, base: &[Block], row0: usize, out: &mut [Block], xor: bool) {
        if !xor {
            out.fill(Block::ZERO);
        }
        self.mul_xor_bg(base, row0, out, &mut || false);
    }

    /// out[j] ^= (A·base)[row0 + j] (`row0` even), with `bg` — one step of
    /// independent AES work per call, false once it has none — interleaved
    /// into the D-term reduction (SilentFlow §IV kernel fusion on one core:
    /// the reduction waits on L3 for most of its time, the AES units are
    /// idle meanwhile). The next SUB rows' index generation is interleaved
    /// the same way (double-buffered offsets), and `bg` is drained before
    /// returning.
    pub(crate) fn mul_xor_bg(&self, base: &[Block], row0: usize, out: &mut [Block], bg: &mut dyn FnMut() -> bool) {
        self.mul_add_bg(base, row0, None, out, false, None, bg)
    }

    /// out[j] = src[j] ⊕ (A·base)[row0 + j] (`src` None: out itself), as
    /// [`Self::mul_xor_bg`]; with a `src` and `nt` the output is written
    /// with non-temporal stores so that it does not evict the k-vector.
    /// `lsbs`: receives the lsb of every output (bit j of word j/64; at
    /// least ⌈out.len()/64⌉ words), taken from registers, so that the
    /// receiver can store non-temporally too.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn mul_add_bg(
        &self,
        base: &[Block],
        row0: usize,
        src: Option<&[Block]>,
        out: &mut [Block],
        nt: bool,
        mut lsbs: Option<&mut [u64]>,
        bg: &mut dyn FnMut() -> bool,
    ) {
        if let Some(s) = src {
            assert_eq!(s.len(), out.len());
        }
        assert_eq!(base.len(), self.k);
        assert!((row0 * D).is_multiple_of(self.wpb), "row0 must be a multiple of 4 (of 2 for 32-bit indices)");
        let pf = self.k * 16 > prefetch_above();
        let n = out.len();
        let lvl = hush_primitives::simd::level();
        let mut guard = self.bufs.borrow_mut();
        let bufs = &mut **guard;
        let mut cur = 0;
        let carried = self.ready.take();
        if n > 0 {
            match carried {
                Some((r, i)) if r == row0 => cur = i,
                _ => self.offsets(row0, SUB.min(n), &mut bufs[0]),
            }
            if pf {
                // SAFETY: 10·SUB ≥ 10·PREFETCH_ROWS offsets (hints only).
                unsafe { crate::simd::prefetch_first(base, &bufs[cur]) };
            }
        }
        // The last chunk also computes the first chunk of the rows that
        // follow (the next tree's, in `crate::fused`), for the next call.
        let end = row0 + n;
        let avx2 = lvl == hush_primitives::simd::Level::Avx2;
        let carry = avx2 && n > 0 && (end * D).is_multiple_of(self.wpb);
        let chunks = n.div_ceil(SUB);
        for (sb, o) in out.chunks_mut(SUB).enumerate() {
            let so = src.map(|s| &s[sb * SUB..sb * SUB + o.len()]);
            let (a, b) = bufs.split_at_mut(1);
            let (now, next) = if cur == 0 { (&a[0], &mut b[0]) } else { (&b[0], &mut a[0]) };
            // One raw pointer for the job's writes and the reduction's
            // prefetch hints (the last rows prefetch the next chunk's first
            // rows, whose offsets the job computes in its first step).
            let next_ptr = next.as_mut_ptr();
            let nr0 = (sb + 1) * SUB;
            let last = sb + 1 == chunks;
            let (nr0, next_rows) = if last && carry { (n, SUB) } else { (nr0, n.saturating_sub(nr0).min(SUB)) };
            let mut job = crate::simd::OffsetJob {
                keys: &self.keys,
                aes: &self.aes,
                nonce: self.nonce,
                c0: self.first_block(row0 + nr0),
                blocks: if next_rows == 0 { 0 } else { self.blocks_for(next_rows) },
                done: 0,
                k: self.k as u32,
                out: next_ptr,
                len: SUB * D,
            };
            // Level avx2: the next offsets' AES inside the gather loop.
            let inline = avx2;
            let ix = crate::simd::InlineIdx {
                keys: &self.keys,
                aes: &self.aes,
                nonce: self.nonce,
                c0: job.c0,
                blocks: job.blocks,
                k: self.k as u32,
                out: next_ptr,
            };
            if inline {
                job.blocks = 0;
            }
            {
                let mut f = || job.step() || bg();
                // SAFETY: the offsets come from `offsets`/`OffsetJob` with
                // k = base.len() (asserted above): each is 16·(an index < k).
                // `next_ptr` has 10·SUB ≥ 10·PREFETCH_ROWS words.
                let lw = lsbs.as_deref_mut().map(|w| &mut w[sb * SUB / 64..]);
                unsafe { crate::simd::gather_rows_bg(base, now, next_ptr, so, o, nt, pf, lw, &mut f, inline.then_some(&ix)) };
            }
            while job.step() {}
            cur ^= 1;
        }
        if carry {
            self.ready.set(Some((end, cur)));
        }
        while bg() {}
    }

    /// [`Self::offsets`] for the diagnostics example (`offs.len() ≥ 10·SUB`).
    #[doc(hidden)]
    pub fn offsets_for_bench(&self, r0: usize, offs: &mut [u32]) {
        let o: &mut [u32; SUB * D] = (&mut offs[..SUB * D]).try_into().expect("10·SUB offsets");
        self.offsets(r0, SUB, o);
    }

    pub(crate) fn offsets(&self, r0: usize, rows: usize, offs: &mut [u32; SUB * D]) {
        debug_assert!(rows <= SUB);
        let blocks = self.blocks_for(rows);
        let c0 = self.first_block(r0);
        crate::simd::lpn_offsets(&self.keys, &self.aes, self.nonce, c0, blocks, self.k as u32, offs);
    }
}

/// Prefetch only when the k-vector is larger than this: one core's L2 as
/// detected at run time ([`hush_primitives::cache::l2_bytes`]), 2 MiB when
/// unknown. An L2-resident vector gains nothing from software prefetch
/// (measured: [`LPN_B10`]'s 1 MiB vector in a 1 MiB L2 runs ~10 % slower
/// with it), one that spills to L3 — the same vector in a 512 KiB L2 (Zen 2),
/// or FERRET_MAIN's 9.4 MB anywhere — is bound by L3 latency without it.
fn prefetch_above() -> usize {
    hush_primitives::cache::l2_bytes().map_or(2 << 20, |b| b as usize)
}

/// Whether the fused generator ([`crate::fused`]) writes its outputs with
/// non-temporal stores for a k-vector of `k` blocks: yes when the k-vector
/// takes more than half of one core's L2 as detected at run time
/// ([`hush_primitives::cache::l2_bytes`]), or when the L2 is unknown.
///
/// Non-temporal stores keep the output stream (the caller's buffer, 16 MiB
/// per 2^20 COTs) from evicting the k-vector, which matters when the two
/// barely fit: [`LPN_B10`]'s 1 MiB vector in a 1 MiB L2 (Zen 5), or
/// FERRET_MAIN's 9.4 MB anywhere. But each streamed line holds a line-fill
/// buffer until it reaches memory, and the D-term gathers are bound by those
/// same buffers. With room to spare in L2 the ordinary stores win: the 1 MiB
/// vector in the 2 MiB L2 of issue 34's Xeon took 7–9 % less CPU per party
/// with them (10^7 SilentFlow COTs, medians of 5 interleaved rounds beside
/// the build before, session 2026-11-29T07:29:20Z in
/// `bench/records/cot.jsonl`; docs/perf-primitives.md).
pub(crate) fn stream_outputs(k: usize) -> bool {
    hush_primitives::cache::l2_bytes().is_none_or(|l2| 2 * 16 * k as u64 > l2)
}

/// A zeroed vector of `n` blocks whose pages the kernel is asked to back
/// with transparent huge pages (random gathers into the k-vector otherwise
/// miss the TLB on most accesses). The allocation is over-sized by 2 MiB and
/// the advice given from the first page boundary (`madvise` rejects an
/// unaligned start, and a heap block starts 16 bytes into its first page),
/// so every 2 MiB-aligned stretch of the vector can be a huge page.
pub fn huge_blocks(n: usize) -> Vec<Block> {
    const HUGE: usize = 2 << 20;
    #[cfg(target_os = "linux")]
    if n * 16 >= HUGE {
        let mut v: Vec<Block> = Vec::with_capacity(n + HUGE / 16);
        let p = v.as_mut_ptr() as usize;
        let start = (p + 4095) & !4095;
        let end = p + v.capacity() * 16;
        // SAFETY: advice on a page-aligned range inside the allocation we
        // own; it changes no contents and failure is harmless.
        unsafe {
            libc::madvise(start as *mut libc::c_void, (end - start) & !4095, libc::MADV_HUGEPAGE);
        }
        v.resize(n, Block::ZERO);
        return v;
    }
    vec![Block::ZERO; n]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_sets_are_consistent_and_chain() {
        for p in FERRET_SETS.iter().chain([&TEST_INSECURE, &TEST_INSECURE_PRE]) {
            p.validate().unwrap();
        }
        // The published values, exactly (see the sets' doc comments).
        let v = |p: &LpnParams| (p.n, p.k, p.t, p.h);
        assert_eq!(v(&FERRET_MAIN), (10_608_640, 589_824, 1_295, 13));
        assert_eq!(v(&LPN_B13), (15_564_800, 524_288, 1_900, 13));
        assert_eq!(v(&LPN_B12), (6_225_920, 262_144, 1_520, 12));
        assert_eq!(v(&LPN_B11), (2_396_160, 131_072, 1_170, 11));
        assert_eq!(v(&LPN_B10), (870_400, 65_536, 850, 10));
        // Every Ferret ladder is IKNP → LPN_B10 → the set: LPN_B10's output
        // covers each set's base COTs (k + t·h), with LPN_B10's own reserve
        // kept back.
        let reserve = |p: &LpnParams| p.k + p.t * p.h as usize;
        for p in FERRET_SETS {
            let steps = crate::ferret::ladder(p);
            assert_eq!(steps.last(), Some(&p), "{}", p.name);
            assert_eq!(steps[0], LPN_B10, "{}", p.name);
            for w in steps.windows(2) {
                assert!(w[0].n >= reserve(&w[1]), "{} → {}", w[0].name, w[1].name);
            }
        }
        assert!(LPN_B10.n - reserve(&LPN_B10) >= reserve(&LPN_B13));
        // Largest working set first (the --max-mem selection takes the first that fits).
        for w in FERRET_SETS.windows(2) {
            assert!(w[0].batch_bytes() > w[1].batch_bytes(), "{} {}", w[0].name, w[1].name);
        }
        assert!(TEST_INSECURE_PRE.n >= TEST_INSECURE.k + TEST_INSECURE.t * TEST_INSECURE.h as usize);
        assert!(FERRET_MAIN.n - FERRET_MAIN.k - FERRET_MAIN.t * 13 >= 10_000_000);
        for p in SILENT_SETS {
            p.validate().unwrap();
        }
        assert_eq!(LPN_B10.n, 850 << 10);
        assert_eq!(crate::simd::words_per_block(LPN_B10.k as u32), 8);
    }

    #[test]
    fn secure_sets_resist_pooled_gauss() {
        for p in FERRET_SETS.iter().chain(SILENT_SETS.iter()) {
            assert_eq!(p.security_bits, 128);
            let b = p.pooled_gauss_bits();
            assert!(b >= 128.0, "{}: pooled Gauss 2^{b:.1}", p.name);
        }
        // The insecure test sets are far below.
        assert!(TEST_INSECURE.pooled_gauss_bits() < 64.0);
    }

    #[test]
    fn batched_product_matches_reference_rows() {
        // 32-bit multiply-shift indices (k not a power of two, or > 2^16)
        // and 16-bit masked indices (k = 2^m ≤ 2^16).
        for k in [1000usize, 1024, 1 << 16, (1 << 17) + 3] {
            let base: Vec<Block> =
                (0..k as u128).map(|i| Block(i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))).collect();
            let m = LpnMatrix::new(3, k);
            let mut out = vec![Block::ZERO; 1777];
            m.mul(&base, 12, &mut out);
            for j in [0usize, 1, 2, 3, 255, 256, 511, 512, 1023, 1776] {
                let r = m.row(12 + j);
                let want = r.iter().fold(Block::ZERO, |a, &i| a ^ base[i]);
                assert_eq!(out[j], want, "k {k} row {j}");
                assert!(r.iter().all(|&i| i < k));
            }
            let mut out2 = out.clone();
            m.mul_xor(&base, 12, &mut out2);
            assert!(out2.iter().all(|b| *b == Block::ZERO), "k {k}");
        }
    }

    #[test]
    fn consecutive_products_match_reference_rows_at_every_level() {
        // Consecutive products reuse the offsets the previous one computed
        // for their first chunk (level avx2); a product at other rows, or
        // one after it, must not.
        for k in [1usize << 16, 1000] {
            let base: Vec<Block> = (0..k as u128).map(|i| Block(i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835) ^ 7)).collect();
            hush_primitives::simd::for_each_level("consecutive LPN products", |l| {
                let m = LpnMatrix::new(9, k);
                let spans = [(0usize, 1024usize), (1024, 1024), (2048, 300), (2348, 700), (0, 100), (4000, 1), (4001 + 3, 513)];
                for (r0, len) in spans {
                    let mut out = vec![Block::ZERO; len];
                    m.mul(&base, r0, &mut out);
                    for (j, y) in out.iter().enumerate() {
                        let want = m.row(r0 + j).iter().fold(Block::ZERO, |a, &i| a ^ base[i]);
                        assert_eq!(*y, want, "level {l} k {k} rows {r0}+{j}");
                    }
                }
            });
        }
    }

    /// The fused generator's two store paths (non-temporal or ordinary,
    /// see [`stream_outputs`]) give the same rows and the same lsbs, equal
    /// to the reference rows, at every SIMD level, for both index kinds
    /// (16-bit words at k = 2^10, 32-bit at k = 1000), over several chunks
    /// and a ragged tail.
    #[test]
    fn streamed_and_cached_stores_agree_at_every_level() {
        use hush_primitives::Prg;
        for k in [1024usize, 1000] {
            let mut prg = Prg::new(Block(k as u128));
            let mut base = vec![Block::ZERO; k];
            prg.fill_blocks(&mut base);
            let n = 2 * SUB + 37;
            let mut src = vec![Block::ZERO; n];
            prg.fill_blocks(&mut src);
            let m = LpnMatrix::new(9, k);
            let want: Vec<Block> =
                (0..n).map(|j| m.row(j + 64).iter().fold(src[j], |a, &i| a ^ base[i])).collect();
            hush_primitives::simd::for_each_level("lpn stores", |l| {
                let mut got = Vec::new();
                for nt in [true, false] {
                    let m = LpnMatrix::new(9, k);
                    let mut out = vec![Block::ONES; n];
                    let mut lsbs = vec![0u64; n.div_ceil(64)];
                    m.mul_add_bg(&base, 64, Some(&src), &mut out, nt, Some(&mut lsbs), &mut || false);
                    assert_eq!(out, want, "level {l} k={k} nt={nt}");
                    for (j, y) in out.iter().enumerate() {
                        assert_eq!((lsbs[j / 64] >> (j % 64)) & 1, (y.0 & 1) as u64, "level {l} k={k} nt={nt} lsb {j}");
                    }
                    got.push((out, lsbs));
                }
                assert_eq!(got[0], got[1], "level {l} k={k}");
            });
        }
    }

    #[test]
    fn power_of_two_indices_cover_the_range_evenly() {
        // 16-bit masked indices: each of 1024 columns hit ~D·rows/k times.
        let k = 1024;
        let m = LpnMatrix::new(1, k);
        let mut hits = vec![0u32; k];
        for r in 0..4096 {
            for i in m.row(r) {
                hits[i] += 1;
            }
        }
        let mean = (D * 4096 / k) as f64;
        let chi2: f64 = hits.iter().map(|&h| (h as f64 - mean).powi(2) / mean).sum();
        // 1023 degrees of freedom: mean 1023, sd ≈ 45; a fixed seed, so deterministic.
        assert!((800.0..1250.0).contains(&chi2), "chi2 {chi2}");
    }
}
