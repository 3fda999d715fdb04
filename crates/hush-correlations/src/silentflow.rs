//! SilentFlow (Li et al., "SilentFlow: Leveraging Trusted Execution for
//! Resource-Limited MPC via Hardware-Algorithm Co-design", §III): COT
//! generation with **no communication after setup**, the `tee` mode's COT
//! source. Security: the parties' trusted modules keep the synchronized seed,
//! Δ-on-the-receiver-side and the secret paths from their hosts; here the
//! module's attestation is simulated — gives no hardware protection (see
//! `hush-tee`). The hosts are semi-honest towards each other.
//!
//! * Setup (once): the modules agree a seed ([`hush_tee::establish`], 2
//!   rounds on the host channel) and deal the initial correlation
//!   w = v ⊕ u·Δ of length k (sender host: Δ, v; receiver host: w).
//! * Each batch (no bytes on the channel):
//!   - sparse correlation by GGM without OT (§III-B, Fig. 4): the sender's
//!     module releases the t tree roots (1 crossing) and the sender's host
//!     expands the trees; the receiver's module walks the t secret paths and
//!     releases the off-path seeds level by level, all trees together —
//!     **h−1 crossings per batch whatever t is** — with the masked punctured
//!     leaves s_α ⊕ Δ in the last crossing; the receiver's host rebuilds
//!     each tree level by level from the off-path seeds (the values of the
//!     h off-path subtrees, with whole-level VAES groups);
//!   - local LPN expansion y = s ⊕ A·v / z = r ⊕ A·w ([`crate::lpn`]), fused
//!     with the GGM expansion (§III-C eq. 2, §IV) on the party's one thread
//!     ([`crate::fused`]: tree j+1's GGM levels run inside tree j's LPN
//!     reduction, leaves in L2, outputs streamed into the caller's buffer;
//!     no n-block batch buffer), VAES GGM levels and batched index
//!     generation with a vectorized D-term XOR reduction (PXR);
//!   - k outputs of each batch are kept as the next batch's initial
//!     correlation (Ferret-style bootstrapping), so the module is asked for
//!     the k-vector only once.
//! * Parameters: [`crate::lpn::LPN_B10`] (n = 870,400, k = 2^16, t = 850,
//!   h = 10; 128-bit) unless the caller names another set — small batches
//!   cost nothing here, and its 1 MiB k-vector keeps the LPN gathers in L2
//!   (see there).
//!
//! **What each host sees, and why it reveals nothing of the peer's side.**
//! Nothing crosses the channel after setup, so a host's view is its
//! module's releases (and the setup's handshake, which carries no
//! correlation).
//! * Sender host: Δ and v (its own COT share), and per batch the t GGM
//!   roots. The roots are fresh seed-derived values independent of the
//!   punctured positions α; α (the receiver's noise positions, hence its
//!   choice bits) is derived and used inside the modules and released only
//!   to the receiver. So the sender's view is a function of its own output
//!   and is simulatable from it.
//! * Receiver host: w = v ⊕ u·Δ (uniform, as v is), α, for each tree the h
//!   off-path seeds (siblings of the path) and the masked punctured leaf
//!   s_α ⊕ Δ. The off-path seeds give every leaf but s_α (GGM puncturing:
//!   s_α depends on the path seeds, which are not released, and is
//!   pseudorandom given the siblings); s_α ⊕ Δ is one-time-padded by the
//!   pseudorandom s_α, so neither s_α nor Δ follows. Δ is otherwise only
//!   in the sender's module and host. The view is the receiver's own COT
//!   output (z, choice bits) before LPN, so it is simulatable from it.
//! * Freshness: each batch's trees come from a per-batch key (the batch
//!   number is part of the label) and each batch's base k-vector is the
//!   previous batch's reserved outputs, never an earlier one.
//! * Test: `tests/views.rs` (`silentflow_views_hide_delta_and_the_punctured_leaves`)
//!   computes the sender's true s_α from the released roots and checks that
//!   neither s_α nor Δ is in the receiver's real view, that w and the
//!   masked leaves are unbiased in every bit but the public lsb, and that
//!   the sender's module never released α; it fails if the masked leaf is
//!   released unmasked or v = 0.
//!
//! The receiver's choice bit of each COT is the lsb of its block (Δ has lsb
//! 1, the sender's blocks lsb 0).
//!
//! **Integrity in transit.** This protocol is semi-honest and has no
//! integrity check of its own: a message altered in transit to another
//! message of the right length (a flipped bit, a duplicated or reordered
//! message) is accepted and yields a wrong output (COTs that break the relation). Corruption in transit
//! is caught by the transport (CRC32 on every frame, AEAD under TLS), not
//! by the protocol; a wrong length, a truncation, a closed link or a silent
//! peer is an error on both sides. Measured under fault injection in
//! `crates/hush-correlations/tests/faults.rs` (see `hush_transport::faulty`).

use crate::fused::{Batches, Plan, SparseTrees};
use crate::lpn::LpnParams;
use crate::source::{CorrelationSource, CotReceiver, CotSender, Role};
use crate::{Error, Result};
use hush_primitives::{BitVec, Block};
use hush_tee::{establish, ModuleRole, ModuleStats, Request, Response, TrustedModule};
use hush_transport::Channel;
use std::sync::{Arc, Mutex};
use zeroize::Zeroize;

/// A module handle shared between a source and whoever meters it.
pub type SharedModule = Arc<Mutex<Box<dyn TrustedModule>>>;

/// Wraps a module for [`SilentSender::setup`] / [`SilentReceiver::setup`].
pub fn share(m: Box<dyn TrustedModule>) -> SharedModule {
    Arc::new(Mutex::new(m))
}

fn call(m: &SharedModule, req: &Request) -> Result<Response> {
    let mut g = m.lock().map_err(|_| Error::Invalid("module lock poisoned".into()))?;
    Ok(g.call(req)?)
}

/// Crossing/byte counters of a shared module.
pub fn stats(m: &SharedModule) -> ModuleStats {
    m.lock().map(|g| g.stats()).unwrap_or_default()
}

/// SilentFlow sender (holds Δ).
pub struct SilentSender {
    module: SharedModule,
    delta: Block,
    b: Batches,
    trees: SenderTrees,
}

/// SilentFlow receiver (holds the choice bits).
pub struct SilentReceiver {
    module: SharedModule,
    b: Batches,
    trees: ReceiverTrees,
}

impl Drop for SilentSender {
    fn drop(&mut self) {
        self.delta.zeroize();
    }
}

/// The sender's sparse vector: the t tree roots the module releases per
/// batch (1 crossing), each tree expanded by [`expand_box`].
struct SenderTrees {
    module: SharedModule,
    batch: u64,
    roots: Vec<Block>,
}

impl SparseTrees for SenderTrees {
    fn begin(&mut self, _ch: &mut dyn Channel, p: &LpnParams, _cots: &[Block]) -> Result<u64> {
        let batch = self.batch;
        self.batch += 1;
        let mut r = call(&self.module, &Request::GgmRoots { batch, trees: p.t as u32, height: p.h })?;
        self.roots = match &mut r {
            Response::GgmRoots(v) if v.len() == p.t => std::mem::take(v),
            _ => return Err(crate::malformed("silentflow batch", "bad GGM roots from the module")),
        };
        Ok(batch)
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

/// The receiver's punctured sparse vector: h−1 crossings per batch release
/// the off-path seeds of all t trees level by level (crossing 1 also the
/// punctured positions α, crossing h−1 also the leaf level and the masked
/// punctured leaves); each tree is rebuilt level by level in place by the
/// caller (`crate::fused`, a known-siblings [`crate::simd::Punctured`]).
struct ReceiverTrees {
    module: SharedModule,
    batch: u64,
    alphas: Vec<u32>,
    /// Level-major: red[(level−1)·t + tree].
    red: Vec<Block>,
    masked: Vec<Block>,
}

impl SparseTrees for ReceiverTrees {
    fn begin(&mut self, _ch: &mut dyn Channel, p: &LpnParams, _cots: &[Block]) -> Result<u64> {
        let batch = self.batch;
        self.batch += 1;
        let (t, h) = (p.t, p.h as usize);
        self.red.clear();
        self.red.resize(h * t, Block::ZERO);
        for level in 1..p.h {
            let mut r = call(&self.module, &Request::GgmLevel { batch, trees: t as u32, height: p.h, level })?;
            let Response::GgmLevel { alphas: a, red: rd, leaf_red, masked: m } = &mut r else {
                return Err(crate::malformed("silentflow batch", "unexpected module response"));
            };
            if rd.len() != t || (level == 1 && a.len() != t) {
                return Err(crate::malformed("silentflow batch", "GGM level of the wrong size"));
            }
            if level == 1 {
                self.alphas = std::mem::take(a);
                if self.alphas.iter().any(|&x| (x as usize) >= p.leaves()) {
                    return Err(crate::malformed("silentflow batch", "punctured position out of range"));
                }
            }
            let lv = level as usize;
            self.red[(lv - 1) * t..lv * t].copy_from_slice(rd);
            if level == p.h - 1 {
                if leaf_red.len() != t || m.len() != t {
                    return Err(crate::malformed("silentflow batch", "last GGM level of the wrong size"));
                }
                self.red[(h - 1) * t..].copy_from_slice(leaf_red);
                self.masked = std::mem::take(m);
            }
        }
        Ok(batch)
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
        let (t, h) = (p.t, p.h as usize);
        let _ = out;
        // The tree is rebuilt whole level by level (the path node's
        // children replaced by the released sibling and zero), so that
        // every level of ≥ 16 nodes runs through the VAES group kernel —
        // expanding the h off-path subtrees separately spent most of its
        // time on small levels. The punctured leaf is the masked one.
        let mut pc = crate::simd::Punctured {
            depth: p.h,
            alpha: self.alphas[i] as usize,
            off: [Block::ZERO; 32],
            c: self.masked[i],
            known: true,
        };
        for lv in 0..h {
            pc.off[lv] = self.red[lv * t + i];
        }
        plan.punct = Some(pc);
        Ok(())
    }
    fn end(&mut self) {
        self.red.zeroize();
        self.masked.zeroize();
        self.alphas.zeroize();
        self.red.clear();
        self.masked.clear();
        self.alphas.clear();
    }
}

impl Drop for ReceiverTrees {
    fn drop(&mut self) {
        self.end();
    }
}

impl Drop for SenderTrees {
    fn drop(&mut self) {
        self.end();
    }
}

impl SilentSender {
    /// Seed agreement with the peer's module over `ch`, then the initial
    /// correlation. `fused`: interleave GGM and LPN tree by tree on this
    /// thread ([`crate::fused`]); else all trees of a request, then the LPN
    /// pass.
    pub fn setup(ch: &mut dyn Channel, module: SharedModule, params: LpnParams, fused: bool) -> Result<Self> {
        params.validate()?;
        {
            let mut g = module.lock().map_err(|_| Error::Invalid("module lock poisoned".into()))?;
            establish(&mut **g, ch, ModuleRole::Sender)?;
        }
        let mut r = call(&module, &Request::CotInit { k: params.k as u32 })?;
        let (delta, v) = match &mut r {
            Response::CotSenderInit { delta, v } => (*delta, std::mem::take(v)),
            _ => return Err(crate::malformed("silentflow setup", "unexpected module response")),
        };
        if v.len() != params.k || !delta.lsb() {
            return Err(crate::malformed("silentflow setup", "initial correlation of the wrong shape"));
        }
        let trees = SenderTrees { module: module.clone(), batch: 0, roots: Vec::new() };
        Ok(SilentSender { module, delta, b: Batches::new(params, params.k, v, fused), trees })
    }

    pub fn module(&self) -> &SharedModule {
        &self.module
    }

    pub fn params(&self) -> LpnParams {
        self.b.params
    }
}

impl SilentReceiver {
    /// See [`SilentSender::setup`].
    pub fn setup(ch: &mut dyn Channel, module: SharedModule, params: LpnParams, fused: bool) -> Result<Self> {
        params.validate()?;
        {
            let mut g = module.lock().map_err(|_| Error::Invalid("module lock poisoned".into()))?;
            establish(&mut **g, ch, ModuleRole::Receiver)?;
        }
        let mut r = call(&module, &Request::CotInit { k: params.k as u32 })?;
        let w = match &mut r {
            Response::CotReceiverInit { w } if w.len() == params.k => std::mem::take(w),
            _ => return Err(crate::malformed("silentflow setup", "unexpected module response")),
        };
        let trees = ReceiverTrees { module: module.clone(), batch: 0, alphas: Vec::new(), red: Vec::new(), masked: Vec::new() };
        Ok(SilentReceiver { module, b: Batches::new(params, params.k, w, fused), trees })
    }

    pub fn module(&self) -> &SharedModule {
        &self.module
    }

    pub fn params(&self) -> LpnParams {
        self.b.params
    }
}

impl CorrelationSource for SilentSender {
    fn name(&self) -> &'static str {
        "silent"
    }
    fn role(&self) -> Role {
        Role::Sender
    }
    fn produced(&self) -> u64 {
        self.b.produced
    }
}

impl CorrelationSource for SilentReceiver {
    fn name(&self) -> &'static str {
        "silent"
    }
    fn role(&self) -> Role {
        Role::Receiver
    }
    fn produced(&self) -> u64 {
        self.b.produced
    }
}

impl CotSender for SilentSender {
    fn delta(&self) -> Block {
        self.delta
    }
    /// No communication: `ch` is not used after setup.
    fn send_cots(&mut self, ch: &mut dyn Channel, q: &mut [Block]) -> Result<()> {
        self.b.fill(ch, q, &mut self.trees, None)
    }
}

impl CotReceiver for SilentReceiver {
    /// No communication: `ch` is not used after setup.
    fn recv_cots(&mut self, ch: &mut dyn Channel, choices: &mut BitVec, t: &mut [Block]) -> Result<()> {
        *choices = BitVec::zeros(t.len());
        self.b.fill(ch, t, &mut self.trees, Some(choices.words_mut()))
    }
}
