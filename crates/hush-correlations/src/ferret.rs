//! Ferret (Yang–Weng–Lan–Zhang–Wang, "Ferret: Fast Extension for coRRElated
//! OT with small communication", CCS 2020): the interactive silent-OT
//! baseline. **Semi-honest** (the paper's Fig. 7 without the malicious
//! consistency check).
//!
//! One iteration with regular-noise parameters (n, k, t, h), n = t·2^h,
//! consumes k + t·h base COTs (the *reserve* of the previous iteration) and
//! outputs n COTs (Ferret Fig. 7 "primal, regular noise"):
//! * MPCOT as t SPCOTs (Fig. 5/6), one GGM tree of 2^h leaves per noisy
//!   block: the sender expands a tree from a random root, keeping per level
//!   the XORs K_0, K_1 of left and right children, and sends for each level
//!   one OT from one COT (q; b, t = q ⊕ b·Δ):
//!   (K_0 ⊕ H(τ, q), K_1 ⊕ H(τ, q ⊕ Δ)); the receiver's path takes the side
//!   ¬b at every level (so the random COT's choice bit fixes the punctured
//!   position α, no derandomisation message), it learns the off-path sums,
//!   rebuilds every leaf but α, and with c = Δ ⊕ ⊕_j s_j gets s_α ⊕ Δ.
//!   H is the TCCR hash with a unique tweak τ per base COT.
//! * LPN (crate::lpn): y = s ⊕ A·v, z = r ⊕ A·w, fused with the GGM work
//!   (crate::fused, one thread per party, rows streamed into the caller's
//!   buffer). When an iteration starts the sender expands every tree once
//!   for its level sums and sends the SPCOT messages frame by frame (about
//!   64 Ki rows of trees per frame), so an iteration is one flight (1 round)
//!   of t·(2h+1) blocks; it keeps only the roots and expands each tree again
//!   when its rows are produced. The receiver reads the flight frame by
//!   frame as it needs the trees (overlapping the sender's expansion), the
//!   rest before the request returns, and rebuilds each punctured tree when
//!   its rows are produced.
//! * Bootstrapping (Ferret §5 "bootstrapping"): the last k + t·h outputs
//!   become the next iteration's base. Setup runs IKNP for the base of the
//!   smallest parameter set and climbs the ladder IKNP → LPN_B10 → the
//!   chosen set (crate::lpn; LPN_B10 is emp-ot v1's `ferret_b10`), the
//!   LPN_B10 iteration's output covering the next set's base.
//!
//! Parameters: crate::lpn::FERRET_MAIN (n = 10,608,640, k = 589,824,
//! t = 1,295, h = 13, ≥128-bit LPN security per Ferret's analysis) yields
//! 10,001,981 COTs per iteration. The receiver's choice bit is the lsb of its
//! block (Δ has lsb 1).
//!
//! **What each host sees.** No module; the view is the base COTs and the
//! messages.
//! * Receiver: per tree and level, (K_0 ⊕ H(τ, q), K_1 ⊕ H(τ, q ⊕ Δ)) and
//!   c = Δ ⊕ ⊕_j s_j. It holds t = q ⊕ b·Δ, i.e. H(τ, q ⊕ b·Δ) only: the
//!   other pad is H(τ, q ⊕ ¬b·Δ), pseudorandom without Δ (tweakable
//!   correlation robustness), so it learns the off-path sum of its side
//!   and nothing of the other; c is masked by the punctured leaf s_α, which
//!   it cannot compute (GGM puncturing). Hence neither s_α nor Δ: its view
//!   is simulated from its own COT outputs. A Δ shared across trees and
//!   iterations is fine because every hash has a unique tweak (iteration,
//!   index).
//! * Sender: receives nothing in an iteration (one flight S → R); the
//!   punctured positions α are fixed by the receiver's base COT choice
//!   bits, hidden from it by the base COTs (IKNP, then earlier iterations).
//! * The base COTs of each iteration are the previous iteration's reserved
//!   outputs, never reused. The view arguments of the base COTs are in
//!   [`crate::iknp`]; `tests/views.rs` checks IKNP's.
//!
//! A corrupted message (wrong length, bad frame) is an error; the erroring
//! side refuses all further work, and once the caller drops its channel the
//! peer's next operation fails too.
//!
//! **Integrity in transit.** This protocol is semi-honest and has no
//! integrity check of its own: a message altered in transit to another
//! message of the right length (a flipped bit, a duplicated or reordered
//! message) is accepted and yields a wrong output (COTs that break the relation). Corruption in transit
//! is caught by the transport (CRC32 on every frame, AEAD under TLS), not
//! by the protocol; a wrong length, a truncation, a closed link or a silent
//! peer is an error on both sides. Measured under fault injection in
//! `crates/hush-correlations/tests/faults.rs` (see `hush_transport::faulty`).

use crate::fused::{whole_batch, Batches, Plan, SparseTrees};
use crate::ggm::{clear_lsbs, expand_with_sums};
use crate::simd::Punctured;
use crate::iknp::{IknpReceiver, IknpSender};
use crate::lpn::{LpnParams, FERRET_MAIN, LPN_B10, LPN_B11, LPN_B12, LPN_B13};
use crate::source::{CorrelationSource, CotReceiver, CotSender, Role};
use crate::Result;
use hush_primitives::hash::tccr_hash_tweaks;
use hush_primitives::{BitVec, Block, Prg};
use hush_transport::{Channel, ChannelExt};
use zeroize::Zeroize;

/// The bootstrapping ladder ending in `main` (smallest first): every
/// published set is reached from IKNP through [`LPN_B10`], whose n covers
/// the base (k + t·h) of each of them (checked by a test in `crate::lpn`).
pub fn ladder(main: LpnParams) -> Vec<LpnParams> {
    match main.name {
        "ferret-main" => vec![LPN_B10, FERRET_MAIN],
        "lpn-b13" => vec![LPN_B10, LPN_B13],
        "lpn-b12" => vec![LPN_B10, LPN_B12],
        "lpn-b11" => vec![LPN_B10, LPN_B11],
        "test-insecure" => vec![crate::lpn::TEST_INSECURE_PRE, main],
        _ => vec![main],
    }
}

/// Base COTs one iteration consumes.
pub fn reserve(p: &LpnParams) -> usize {
    p.k + p.t * p.h as usize
}

/// LPN matrix nonces of Ferret live apart from SilentFlow's.
const NONCE: u64 = 0xfe77_0000_0000_0000;

fn tweak(iter: u64, j: usize) -> Block {
    Block((1u128 << 127) | ((iter as u128) << 64) | j as u128)
}

/// Trees per SPCOT message frame: about 64 Ki rows.
fn chunk_trees(p: &LpnParams) -> usize {
    p.leaves().max(1 << 16) / p.leaves()
}

/// The sender's side of an iteration's MPCOT: at the start of the
/// iteration every tree is expanded once with its per-level sums (Ferret
/// Fig. 5/6) and the SPCOT messages go out frame by frame (one flight);
/// only the t roots are kept, and each tree is expanded again
/// (`crate::ggm::expand_box` or the interleaved `simd::GgmJob`) when
/// its rows are produced — twice the GGM work (a few
/// ms at VAES speed) instead of an n-block buffer of leaves.
struct SendTrees {
    delta: Block,
    rng: Prg,
    iter: u64,
    roots: Vec<Block>,
    scratch: Vec<Block>,
}

impl SparseTrees for SendTrees {
    fn begin(&mut self, ch: &mut dyn Channel, p: &LpnParams, cots: &[Block]) -> Result<u64> {
        let (h, l) = (p.h as usize, p.leaves());
        let iter = self.iter;
        self.iter += 1;
        let delta = self.delta;
        self.roots.clear();
        self.scratch.resize(l, Block::ZERO);
        let mut sums = vec![[Block::ZERO; 2]; h];
        let (mut msg, mut xs, mut tw, mut hs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let per_frame = chunk_trees(p);
        let mut first = 0;
        while first < p.t {
            let trees = per_frame.min(p.t - first);
            msg.clear();
            xs.clear();
            tw.clear();
            for i in first..first + trees {
                let root = self.rng.random_block();
                self.roots.push(root);
                let tree = &mut self.scratch[..];
                tree[0] = root;
                expand_with_sums(tree, p.h, &mut sums);
                clear_lsbs(tree);
                let c = Block(tree.iter().fold(delta.0, |a, x| a ^ x.0));
                for (lv, s) in sums.iter().enumerate() {
                    let q = cots[i * h + lv];
                    msg.extend_from_slice(s);
                    xs.push(q);
                    xs.push(q ^ delta);
                    let t = tweak(iter, i * h + lv);
                    tw.push(t);
                    tw.push(t);
                }
                msg.push(c);
            }
            hs.resize(xs.len(), Block::ZERO);
            tccr_hash_tweaks(&tw, &xs, &mut hs);
            // msg per tree: [K0, K1] × h then c; pad the K's with the hashes.
            let per = 2 * h + 1;
            for (j, m) in msg.chunks_mut(per).enumerate() {
                for x in 0..2 * h {
                    m[x] ^= hs[j * 2 * h + x];
                }
            }
            ch.send_chunked(Block::as_bytes(&msg))?;
            first += trees;
        }
        sums.zeroize();
        xs.zeroize();
        hs.zeroize();
        self.scratch.zeroize();
        Ok(NONCE + iter)
    }
    fn plant(
        &mut self,
        _ch: &mut dyn Channel,
        p: &LpnParams,
        _cots: &[Block],
        i: usize,
        out: &mut [Block],
        plan: &mut Plan,
    ) -> Result<()> {
        out[0] = self.roots[i];
        plan.subs.push((0, p.h));
        Ok(())
    }
    fn end(&mut self) {
        self.roots.zeroize();
        self.roots.clear();
    }
}

/// The receiver's side: the SPCOT frames (one flight; 16·t·(2h+1) bytes)
/// are read as the trees are needed and all of them before the request that
/// started the iteration returns; each punctured tree is rebuilt when its
/// rows are produced.
struct RecvTrees {
    iter: u64,
    cur: u64,
    raw: Vec<u8>,
    hs: Vec<Block>,
    /// Trees of the current iteration whose SPCOT frames have been read.
    got: usize,
}

impl RecvTrees {
    /// Reads frames until the first `upto` trees' messages are in.
    fn read_until(&mut self, ch: &mut dyn Channel, p: &LpnParams, upto: usize) -> Result<()> {
        let per = (2 * p.h as usize + 1) * 16;
        while self.got < upto {
            let trees = chunk_trees(p).min(p.t - self.got);
            let r = self.got * per..(self.got + trees) * per;
            ch.recv_chunked_into("Ferret: SPCOT messages", &mut self.raw[r])?;
            self.got += trees;
        }
        Ok(())
    }
}

impl SparseTrees for RecvTrees {
    fn begin(&mut self, _ch: &mut dyn Channel, p: &LpnParams, cots: &[Block]) -> Result<u64> {
        let h = p.h as usize;
        let per = 2 * h + 1;
        self.cur = self.iter;
        self.iter += 1;
        self.raw.resize(p.t * per * 16, 0);
        self.got = 0;
        let tw: Vec<Block> = (0..p.t * h).map(|x| tweak(self.cur, x)).collect();
        self.hs.resize(p.t * h, Block::ZERO);
        tccr_hash_tweaks(&tw, &cots[..p.t * h], &mut self.hs);
        Ok(NONCE + self.cur)
    }
    /// The flight is read frame by frame as trees are needed (so the first
    /// rows overlap the sender's expansion), and completely before a
    /// request returns: a request that starts an iteration has received
    /// the iteration's whole flight when it returns.
    fn settle(&mut self, ch: &mut dyn Channel, p: &LpnParams) -> Result<()> {
        self.read_until(ch, p, p.t)
    }
    fn plant(
        &mut self,
        ch: &mut dyn Channel,
        p: &LpnParams,
        cots: &[Block],
        j: usize,
        tree: &mut [Block],
        plan: &mut Plan,
    ) -> Result<()> {
        self.read_until(ch, p, j + 1)?;
        let h = p.h as usize;
        let per = 2 * h + 1;
        let m = &self.raw[j * per * 16..(j + 1) * per * 16];
        let blk = |x: usize| Block::from_slice(&m[16 * x..16 * x + 16]);
        let _ = tree;
        let mut pc = Punctured { depth: p.h, alpha: 0, off: [Block::ZERO; 32], c: blk(2 * h), known: false };
        for lv in 0..h {
            let b = cots[j * h + lv].lsb() as usize;
            pc.alpha |= (1 - b) << (h - 1 - lv);
            pc.off[lv] = blk(2 * lv + b) ^ self.hs[j * h + lv];
        }
        // Rebuilt by the caller (interleaved with the LPN reduction):
        // `ggm::reconstruct_punctured`, lsbs cleared, then the punctured
        // leaf c ⊕ all other leaves.
        plan.punct = Some(pc);
        Ok(())
    }
    fn end(&mut self) {
        self.raw.zeroize();
        self.hs.zeroize();
    }
}

impl Drop for SendTrees {
    fn drop(&mut self) {
        self.delta.zeroize();
        self.end();
    }
}

impl Drop for RecvTrees {
    fn drop(&mut self) {
        self.end();
    }
}

/// Ferret sender (holds Δ, lsb 1).
pub struct FerretSender {
    delta: Block,
    b: Batches,
    trees: SendTrees,
}

/// Ferret receiver.
pub struct FerretReceiver {
    b: Batches,
    trees: RecvTrees,
}

impl Drop for FerretSender {
    fn drop(&mut self) {
        self.delta.zeroize();
    }
}

impl FerretSender {
    /// IKNP base COTs, then the bootstrapping ladder up to `main`.
    pub fn setup(ch: &mut dyn Channel, rng: &mut Prg, main: LpnParams, fused: bool) -> Result<Self> {
        main.validate()?;
        let steps = ladder(main);
        let mut delta = rng.random_block();
        delta.0 |= 1;
        let mut iknp = IknpSender::setup_with_delta(ch, delta, rng)?;
        let mut base = vec![Block::ZERO; reserve(&steps[0])];
        iknp.send_cots(ch, &mut base)?;
        // Normalise to the lsb convention: q' = q with lsb 0.
        clear_lsbs(&mut base);
        let mut trees =
            SendTrees { delta, rng: Prg::new(rng.random_block()), iter: 0, roots: Vec::new(), scratch: Vec::new() };
        for w in steps.windows(2) {
            let mut out = vec![Block::ZERO; w[0].n];
            whole_batch(ch, &w[0], &base, &mut out, &mut trees)?;
            base.zeroize();
            base = out[..reserve(&w[1])].to_vec();
            out.zeroize();
        }
        Ok(FerretSender { delta, b: Batches::new(main, reserve(&main), base, fused), trees })
    }

    pub fn params(&self) -> LpnParams {
        self.b.params
    }
}

impl FerretReceiver {
    /// See [`FerretSender::setup`].
    pub fn setup(ch: &mut dyn Channel, rng: &mut Prg, main: LpnParams, fused: bool) -> Result<Self> {
        main.validate()?;
        let steps = ladder(main);
        let mut iknp = IknpReceiver::setup(ch, rng)?;
        let mut base = vec![Block::ZERO; reserve(&steps[0])];
        let mut bits = BitVec::zeros(0);
        iknp.recv_cots(ch, &mut bits, &mut base)?;
        // t' = t with lsb = choice bit (Δ has lsb 1, so t' ⊕ q' = b·Δ).
        for (i, t) in base.iter_mut().enumerate() {
            t.0 = (t.0 & !1) | bits.get(i) as u128;
        }
        bits.zeroize();
        let mut trees = RecvTrees { iter: 0, cur: 0, raw: Vec::new(), hs: Vec::new(), got: 0 };
        for w in steps.windows(2) {
            let mut out = vec![Block::ZERO; w[0].n];
            whole_batch(ch, &w[0], &base, &mut out, &mut trees)?;
            base.zeroize();
            base = out[..reserve(&w[1])].to_vec();
            out.zeroize();
        }
        Ok(FerretReceiver { b: Batches::new(main, reserve(&main), base, fused), trees })
    }

    pub fn params(&self) -> LpnParams {
        self.b.params
    }
}

impl CorrelationSource for FerretSender {
    fn name(&self) -> &'static str {
        "ferret"
    }
    fn role(&self) -> Role {
        Role::Sender
    }
    fn produced(&self) -> u64 {
        self.b.produced
    }
}

impl CorrelationSource for FerretReceiver {
    fn name(&self) -> &'static str {
        "ferret"
    }
    fn role(&self) -> Role {
        Role::Receiver
    }
    fn produced(&self) -> u64 {
        self.b.produced
    }
}

impl CotSender for FerretSender {
    fn delta(&self) -> Block {
        self.delta
    }
    fn send_cots(&mut self, ch: &mut dyn Channel, q: &mut [Block]) -> Result<()> {
        self.b.fill(ch, q, &mut self.trees, None)
    }
}

impl CotReceiver for FerretReceiver {
    fn recv_cots(&mut self, ch: &mut dyn Channel, choices: &mut BitVec, t: &mut [Block]) -> Result<()> {
        *choices = BitVec::zeros(t.len());
        self.b.fill(ch, t, &mut self.trees, Some(choices.words_mut()))
    }
}
