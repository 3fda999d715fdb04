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
//!   (crate::fused) — the sender sends each chunk's SPCOT messages as soon as
//!   its trees are done, so an iteration is one flight (1 round) of
//!   t·(2h+1) blocks.
//! * Bootstrapping (Ferret §5 "bootstrapping"): the last k + t·h outputs
//!   become the next iteration's base. Setup runs IKNP for the base of the
//!   smallest parameter set and climbs the ladder
//!   FERRET_SMALL → FERRET_MID → FERRET_MAIN (crate::lpn), each iteration's
//!   output covering the next set's base.
//!
//! Parameters: crate::lpn::FERRET_MAIN (n = 10,608,640, k = 589,824,
//! t = 1,295, h = 13, ≥128-bit LPN security per Ferret's analysis) yields
//! 10,001,981 COTs per iteration. The receiver's choice bit is the lsb of its
//! block (Δ has lsb 1).
//!
//! A corrupted message (wrong length, bad frame) is an error; the erroring
//! side refuses all further work, and once the caller drops its channel the
//! peer's next operation fails too.

use crate::fused::{self, Batches};
use crate::ggm::{clear_lsbs, expand_with_sums, reconstruct_punctured};
use crate::iknp::{IknpReceiver, IknpSender};
use crate::lpn::{LpnMatrix, LpnParams, FERRET_MAIN, FERRET_MID, FERRET_SMALL};
use crate::silentflow::lsb_bits;
use crate::source::{CorrelationSource, CotReceiver, CotSender, Role};
use crate::Result;
use hush_primitives::hash::tccr_hash_tweaks;
use hush_primitives::{BitVec, Block, Prg};
use hush_transport::{Channel, ChannelExt};
use zeroize::Zeroize;

/// The bootstrapping ladder ending in `main` (smallest first).
pub fn ladder(main: LpnParams) -> Vec<LpnParams> {
    match main.name {
        "ferret-main" => vec![FERRET_SMALL, FERRET_MID, FERRET_MAIN],
        "ferret-mid" => vec![FERRET_SMALL, FERRET_MID],
        "ferret-small" => vec![FERRET_SMALL],
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

fn chunk_rows(p: &LpnParams) -> usize {
    p.leaves().max(1 << 16) / p.leaves() * p.leaves()
}

/// One sender iteration: `base` = k + t·h sender COT blocks, `out` = n.
fn send_iteration(
    ch: &mut dyn Channel,
    p: &LpnParams,
    delta: Block,
    base: &[Block],
    out: &mut [Block],
    iter: u64,
    rng: &mut Prg,
    parallel: bool,
) -> Result<()> {
    let (k, h, l) = (p.k, p.h as usize, p.leaves());
    let (v, cots) = base.split_at(k);
    let lpn = LpnMatrix::new(NONCE + iter, k);
    let mut sums = vec![[Block::ZERO; 2]; h];
    let mut msg: Vec<Block> = Vec::new();
    let mut xs: Vec<Block> = Vec::new();
    let mut tw: Vec<Block> = Vec::new();
    let mut hs: Vec<Block> = Vec::new();
    fused::run(out, chunk_rows(p), v, &lpn, parallel, |row0, oc| {
        msg.clear();
        xs.clear();
        tw.clear();
        let first = row0 / l;
        for (j, tree) in oc.chunks_mut(l).enumerate() {
            let i = first + j;
            tree[0] = rng.random_block();
            expand_with_sums(tree, p.h, &mut sums);
            clear_lsbs(tree);
            let c = tree.iter().fold(delta, |a, &x| a ^ x);
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
        Ok(())
    })?;
    sums.zeroize();
    xs.zeroize();
    Ok(())
}

/// One receiver iteration: `base` = k + t·h receiver COT blocks (choice bit
/// = lsb), `out` = n.
fn recv_iteration(
    ch: &mut dyn Channel,
    p: &LpnParams,
    base: &[Block],
    out: &mut [Block],
    iter: u64,
    parallel: bool,
) -> Result<()> {
    let (k, h, l) = (p.k, p.h as usize, p.leaves());
    let (w, cots) = base.split_at(k);
    let lpn = LpnMatrix::new(NONCE + iter, k);
    let per = 2 * h + 1;
    let mut raw = Vec::new();
    let mut off = vec![Block::ZERO; h];
    let mut hs: Vec<Block> = Vec::new();
    let mut tw: Vec<Block> = Vec::new();
    fused::run(out, chunk_rows(p), w, &lpn, parallel, |row0, oc| {
        let trees = oc.len() / l;
        let first = row0 / l;
        raw.resize(trees * per * 16, 0);
        ch.recv_chunked_into("Ferret: SPCOT messages", &mut raw)?;
        let xs = &cots[first * h..(first + trees) * h];
        tw.clear();
        tw.extend((0..trees * h).map(|x| tweak(iter, first * h + x)));
        hs.resize(xs.len(), Block::ZERO);
        tccr_hash_tweaks(&tw, xs, &mut hs);
        for (j, tree) in oc.chunks_mut(l).enumerate() {
            let m = &raw[j * per * 16..(j + 1) * per * 16];
            let blk = |x: usize| Block::from_slice(&m[16 * x..16 * x + 16]);
            let mut alpha = 0usize;
            for lv in 0..h {
                let b = xs[j * h + lv].lsb() as usize;
                alpha |= (1 - b) << (h - 1 - lv);
                off[lv] = blk(2 * lv + b) ^ hs[j * h + lv];
            }
            reconstruct_punctured(tree, p.h, alpha, &off);
            clear_lsbs(tree);
            tree[alpha] = tree.iter().fold(blk(2 * h), |a, &x| a ^ x);
        }
        Ok(())
    })?;
    off.zeroize();
    hs.zeroize();
    Ok(())
}

/// Ferret sender (holds Δ, lsb 1).
pub struct FerretSender {
    delta: Block,
    rng: Prg,
    b: Batches,
    iter: u64,
}

/// Ferret receiver.
pub struct FerretReceiver {
    b: Batches,
    iter: u64,
}

impl Drop for FerretSender {
    fn drop(&mut self) {
        self.delta.zeroize();
    }
}

impl FerretSender {
    /// IKNP base COTs, then the bootstrapping ladder up to `main`.
    pub fn setup(ch: &mut dyn Channel, rng: &mut Prg, main: LpnParams, parallel: bool) -> Result<Self> {
        main.validate()?;
        let steps = ladder(main);
        let mut delta = rng.random_block();
        delta.0 |= 1;
        let mut iknp = IknpSender::setup_with_delta(ch, delta, rng)?;
        let mut base = vec![Block::ZERO; reserve(&steps[0])];
        iknp.send_cots(ch, &mut base)?;
        // Normalise to the lsb convention: q' = q with lsb 0.
        clear_lsbs(&mut base);
        let mut own = Prg::new(rng.random_block());
        let mut iter = 0;
        for w in steps.windows(2) {
            let mut out = vec![Block::ZERO; w[0].n];
            send_iteration(ch, &w[0], delta, &base, &mut out, iter, &mut own, parallel)?;
            iter += 1;
            base.zeroize();
            base = out[..reserve(&w[1])].to_vec();
            out.zeroize();
        }
        Ok(FerretSender { delta, rng: own, b: Batches::new(main, reserve(&main), base, parallel), iter })
    }

    pub fn params(&self) -> LpnParams {
        self.b.params
    }
}

impl FerretReceiver {
    /// See [`FerretSender::setup`].
    pub fn setup(ch: &mut dyn Channel, rng: &mut Prg, main: LpnParams, parallel: bool) -> Result<Self> {
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
        let mut iter = 0;
        for w in steps.windows(2) {
            let mut out = vec![Block::ZERO; w[0].n];
            recv_iteration(ch, &w[0], &base, &mut out, iter, parallel)?;
            iter += 1;
            base.zeroize();
            base = out[..reserve(&w[1])].to_vec();
            out.zeroize();
        }
        Ok(FerretReceiver { b: Batches::new(main, reserve(&main), base, parallel), iter })
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
        let (delta, iter, rng) = (self.delta, &mut self.iter, &mut self.rng);
        self.b.fill(q, |b| {
            let base = std::mem::take(&mut b.base);
            b.ensure_buf();
            let r = send_iteration(ch, &b.params, delta, &base, &mut b.buf, *iter, rng, b.fused);
            b.base = base;
            *iter += 1;
            r
        })
    }
}

impl CotReceiver for FerretReceiver {
    fn recv_cots(&mut self, ch: &mut dyn Channel, choices: &mut BitVec, t: &mut [Block]) -> Result<()> {
        let iter = &mut self.iter;
        self.b.fill(t, |b| {
            let base = std::mem::take(&mut b.base);
            b.ensure_buf();
            let r = recv_iteration(ch, &b.params, &base, &mut b.buf, *iter, b.fused);
            b.base = base;
            *iter += 1;
            r
        })?;
        lsb_bits(t, choices);
        Ok(())
    }
}
