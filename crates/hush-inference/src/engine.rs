//! The secure engine: runs a [`Plan`] layer by layer over additive shares
//! in Z_2^ℓ, one instance per party, in lockstep over a [`Channel`].
//!
//! * weighted linear layers (Conv, Gemm/MatMul, unfolded BatchNorm): the
//!   module-dealt protocol of [`crate::linear`] (tee, dealer) or Cheetah's
//!   HE protocol ([`crate::he_linear`], interactive, silent — when
//!   [`Party::he`] is set), then truncation (in the `cf2` family, after
//!   the ReLU that alone reads the layer: [`Nonlinear::fuses_relu_trunc`],
//!   also across a residual Add or a MaxPool in between: `Pending`);
//! * AveragePool: local window sums times a public constant, then truncation;
//! * Add, AddConst (server adds), Reshape, Concat: local;
//! * ReLU, truncation, and MaxPool (a pairwise tree of
//!   max(a, b) = b + ReLU(a − b), log2(window) ReLU rounds): through the
//!   [`Nonlinear`] trait, implemented by the comparison families of
//!   `hush-2pc` — [`FssNonlinear`] (`fss`, the default) and
//!   [`TamiNonlinear`] (`tami`).
//!
//! **Pre-dealing.** All module dealing is input-independent: the linear
//! layers' masks and every nonlinear chunk's keys form a deterministic
//! [`schedule`] per inference. [`predeal`] deals the longest prefix of it
//! that fits a memory budget *before* the input exists (the sessions in
//! [`crate::runtime`] call it after setup and after each inference, for
//! the next one); [`run`] consumes the pre-dealt items in order and deals
//! the rest on the fly, so with everything pre-dealt the online phase
//! makes no module crossing.
//!
//! Each value is freed after its last reader, so a party holds at most
//! [`crate::model::Model::peak_live_elems`] activation elements plus one
//! layer's temporaries; nonlinear layers are processed in chunks of at
//! most `chunk` elements (keys for a chunk are dealt, used and dropped), so
//! dealt key material is bounded too. Every layer is metered: wall time,
//! time inside module calls, bytes each way, rounds, module crossings and
//! bytes, and multiply-accumulates.
//!
//! **Parties and modules.** The server (model owner) is party 0 and its
//! module has the `Sender` role; the client is party 1 (`Receiver`). One
//! module per party serves both the linear-layer kind and the comparison
//! kinds ([`SharedModule`]). Security: semi-honest, `tee` mode; the
//! modules' attestation is simulated — gives no hardware protection.

use crate::fixed::FixedConfig;
use crate::plan::{Plan, StepKind};
use crate::{linear, Error, Result};
use hush_tee::{ModuleStats, Request, Response, TrustedModule};
use hush_transport::Channel;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Party numbers (as in hush-2pc: party 0 takes the module's Sender role).
pub const SERVER: u8 = 0;
pub const CLIENT: u8 = 1;

/// Default largest number of elements per nonlinear chunk.
pub const DEFAULT_CHUNK: usize = 1 << 16;

/// One module shared by several users in one party (the linear layers,
/// the comparison dealer and the look-ahead worker); counts time spent
/// inside calls. Its statistics are cached after every call, so reading
/// them never waits for a call in progress on another thread (the
/// look-ahead worker's).
#[derive(Clone)]
pub struct SharedModule {
    inner: Arc<Mutex<Box<dyn TrustedModule>>>,
    stats: Arc<Mutex<ModuleStats>>,
    busy_ns: Arc<std::sync::atomic::AtomicU64>,
    ahead_ns: Arc<std::sync::atomic::AtomicU64>,
}

thread_local! {
    /// Set on a look-ahead worker thread: its module time is counted apart
    /// (it overlaps the online phase instead of adding to it).
    static AHEAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl SharedModule {
    pub fn new(m: Box<dyn TrustedModule>) -> Self {
        let st = m.stats();
        SharedModule { inner: Arc::new(Mutex::new(m)), stats: Arc::new(Mutex::new(st)), busy_ns: Arc::new(Default::default()), ahead_ns: Arc::new(Default::default()) }
    }
    /// Seconds the party's own thread spent inside module calls, or
    /// waiting for the look-ahead worker's, so far.
    pub fn busy_secs(&self) -> f64 {
        self.busy_ns.load(std::sync::atomic::Ordering::Relaxed) as f64 * 1e-9
    }
    /// Seconds the look-ahead worker spent inside module calls so far.
    pub fn ahead_secs(&self) -> f64 {
        self.ahead_ns.load(std::sync::atomic::Ordering::Relaxed) as f64 * 1e-9
    }
    fn add_busy(&self, ns: u64) {
        self.busy_ns.fetch_add(ns, std::sync::atomic::Ordering::Relaxed);
    }
}

impl TrustedModule for SharedModule {
    fn call(&mut self, req: &Request) -> hush_tee::Result<Response> {
        let t = Instant::now();
        let r = {
            let mut m = self.inner.lock().map_err(|_| hush_tee::Error::Process("module lock poisoned".into()))?;
            let r = m.call(req);
            if let Ok(mut s) = self.stats.lock() {
                *s = m.stats();
            }
            r
        };
        let ns = t.elapsed().as_nanos() as u64;
        if AHEAD.with(|a| a.get()) {
            self.ahead_ns.fetch_add(ns, std::sync::atomic::Ordering::Relaxed);
        } else {
            self.busy_ns.fetch_add(ns, std::sync::atomic::Ordering::Relaxed);
        }
        r
    }
    fn stats(&self) -> ModuleStats {
        self.stats.lock().map(|s| *s).unwrap_or_default()
    }
    /// Forwarded to the inner module, timed and counted like
    /// [`TrustedModule::call`] (issue 35: without it every context over a
    /// shared module — BERT, the graph runtime — took the byte path even
    /// with an in-process module, because the trait's default says
    /// "cannot"). A module process or a dealer still answers `None`, and
    /// the caller sends the request as bytes.
    ///
    /// **What crosses** is what the inner module's direct path writes:
    /// exactly this party's share, the values it would otherwise release as
    /// bytes, in the host's layout (`hush_tee::deal::handle_into`, with the
    /// same admission checks and one release per batch). This wrapper only
    /// holds the lock around the call; it sees nothing the host would not.
    fn deal_into(&mut self, req: &hush_tee::deal::DealRequest, sink: &mut dyn std::any::Any) -> hush_tee::Result<Option<usize>> {
        let t = Instant::now();
        let r = {
            let mut m = self.inner.lock().map_err(|_| hush_tee::Error::Process("module lock poisoned".into()))?;
            let r = m.deal_into(req, sink);
            if let Ok(mut s) = self.stats.lock() {
                *s = m.stats();
            }
            r
        };
        let ns = t.elapsed().as_nanos() as u64;
        if AHEAD.with(|a| a.get()) {
            self.ahead_ns.fetch_add(ns, std::sync::atomic::Ordering::Relaxed);
        } else {
            self.busy_ns.fetch_add(ns, std::sync::atomic::Ordering::Relaxed);
        }
        r
    }
    fn describe(&self) -> String {
        self.inner.lock().map(|m| m.describe()).unwrap_or_else(|_| "module (poisoned)".into())
    }
}

/// Which nonlinear gate a dealt batch serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    Relu,
    /// Signed truncation by this many bits.
    Trunc(u32),
}

/// Pre-dealt batches of one family, in the order the online run consumes
/// them: `(gate, elements, batch)`.
struct Queue<B> {
    q: std::collections::VecDeque<(Gate, usize, B)>,
}

impl<B> Queue<B> {
    fn new() -> Self {
        Queue { q: Default::default() }
    }
    /// The front batch if it serves exactly (gate, n); on a mismatch the
    /// queue is dropped (both parties see the same mismatch, so they stay in
    /// lock-step and deal the rest on the fly).
    fn take(&mut self, g: Gate, n: usize) -> Option<B> {
        match self.q.front() {
            Some((gg, nn, _)) if *gg == g && *nn == n => self.q.pop_front().map(|e| e.2),
            Some(_) => {
                self.q.clear();
                None
            }
            None => None,
        }
    }
}

/// The nonlinear layer of one party: both parties call the same methods in
/// the same order with their shares.
pub trait Nonlinear: Send {
    /// Family name (`fss`, `tami`).
    fn family(&self) -> &'static str;
    /// One gate in place on additive shares, in chunks; each chunk uses the
    /// next pre-dealt batch if it matches, else deals on the fly.
    fn gate(&mut self, ch: &mut dyn Channel, x: &mut [u64], g: Gate) -> Result<()>;
    /// ReLU in place on additive shares.
    fn relu(&mut self, ch: &mut dyn Channel, x: &mut [u64]) -> Result<()> {
        self.gate(ch, x, Gate::Relu)
    }
    /// Signed truncation ⌊x / 2^shift⌋ in place on additive shares.
    fn truncate(&mut self, ch: &mut dyn Channel, x: &mut [u64], shift: u32) -> Result<()> {
        self.gate(ch, x, Gate::Trunc(shift))
    }
    /// Whether [`Nonlinear::truncate`] is exact (else faithful, error ≤ 1 ulp).
    fn exact_truncation(&self) -> bool;
    /// Whether the engine should run a linear layer's truncation after the
    /// ReLU that alone reads it ([`Nonlinear::relu_trunc`]): ReLU(⌊x/2^f⌋)
    /// = ⌊ReLU(x)/2^f⌋ exactly, and a truncation of a known non-negative
    /// value is cheaper in some families. Off by default (the dealing
    /// schedule of the dealt families assumes truncation first).
    fn fuses_relu_trunc(&self) -> bool {
        false
    }
    /// ReLU then signed truncation by `shift`, in place (see
    /// [`Nonlinear::fuses_relu_trunc`]).
    fn relu_trunc(&mut self, ch: &mut dyn Channel, x: &mut [u64], shift: u32) -> Result<()> {
        self.relu(ch, x)?;
        self.truncate(ch, x, shift)
    }
    /// Largest number of elements per chunk.
    fn chunk(&self) -> usize;
    /// Offline: deals one batch of `n ≤ chunk` elements for `g` and queues it.
    fn predeal(&mut self, g: Gate, n: usize) -> Result<()>;
    /// Drops every queued batch.
    fn clear_predealt(&mut self);
    /// Queued batches.
    fn predealt_len(&self) -> usize;
    /// Estimated bytes one party holds for a batch of `n` elements of `g`:
    /// a function of public parameters only, identical at both parties
    /// (the larger of the two parties' shares), so both decide alike what
    /// fits a pre-dealing budget.
    fn est_bytes(&self, g: Gate, n: usize) -> u64;
    /// A handle that deals this family's batches on another thread (the
    /// look-ahead worker): it shares this family's dealer, so batch
    /// numbers continue one sequence whichever thread deals.
    fn batch_dealer(&self) -> BatchDealer;
    /// Installs (or, with `None`, removes) the look-ahead feed the chunks
    /// not pre-dealt are taken from, in schedule order.
    fn set_feed(&mut self, feed: Option<Feed>);
    /// The dealing requests that dealing `items` (gate, elements) in order
    /// would send from this family's next batch on, without dealing: a
    /// dealer's plan ([`plan_dealer`]). Families without per-batch dealing
    /// requests plan nothing.
    fn plan_requests(&self, _items: &[(Gate, usize)]) -> Result<Vec<hush_tee::deal::DealRequest>> {
        Ok(Vec::new())
    }
}

/// Deals one batch of a family off the party's thread, type-erased (see
/// [`Nonlinear::batch_dealer`]).
pub type BatchDealer = Box<dyn FnMut(Gate, usize) -> Result<Box<dyn std::any::Any + Send>> + Send>;

fn lock_dealer(d: &Mutex<hush_2pc::tee::Dealer>) -> Result<std::sync::MutexGuard<'_, hush_2pc::tee::Dealer>> {
    d.lock().map_err(|_| Error::Nonlinear("dealer lock poisoned (a look-ahead worker panicked)".into()))
}

fn tpc(e: hush_2pc::Error) -> Error {
    Error::Nonlinear(e.to_string())
}

/// The `fss` family: hush-2pc's FSS gates (BCGGIKR21) with module-dealt
/// keys — ReLU spline gate and exact two-DCF truncation; general shares,
/// one simultaneous exchange per chunk.
pub struct FssNonlinear {
    dealer: Arc<Mutex<hush_2pc::tee::Dealer>>,
    feed: Option<Feed>,
    party: u8,
    bits: u32,
    chunk: usize,
    pre: Queue<hush_2pc::fss::FssBatch>,
}

impl FssNonlinear {
    pub fn new(module: SharedModule, party: u8, bits: u32, chunk: usize) -> Self {
        FssNonlinear { dealer: Arc::new(Mutex::new(hush_2pc::tee::Dealer::new(Box::new(module)))), feed: None, party, bits, chunk: chunk.max(1), pre: Queue::new() }
    }
    fn shape(&self, g: Gate) -> hush_2pc::fss::FssShape {
        fss_shape(self.bits, g)
    }
}

impl Nonlinear for FssNonlinear {
    fn family(&self) -> &'static str {
        "fss"
    }
    fn gate(&mut self, ch: &mut dyn Channel, x: &mut [u64], g: Gate) -> Result<()> {
        let shape = self.shape(g);
        for c in x.chunks_mut(self.chunk) {
            let b = match self.pre.take(g, c.len()) {
                Some(b) => b,
                None => match &self.feed {
                    Some(f) => f.take_batch::<hush_2pc::fss::FssBatch>(g, c.len())?,
                    None => hush_2pc::fss::deal(&mut *lock_dealer(&self.dealer)?, self.party, c.len(), shape).map_err(tpc)?,
                },
            };
            let out = hush_2pc::fss::online(ch, &b, Some(c), true).map_err(tpc)?.arith().map_err(tpc)?;
            c.copy_from_slice(&out.v);
        }
        Ok(())
    }
    fn exact_truncation(&self) -> bool {
        true
    }
    fn chunk(&self) -> usize {
        self.chunk
    }
    fn predeal(&mut self, g: Gate, n: usize) -> Result<()> {
        let shape = self.shape(g);
        let b = hush_2pc::fss::deal(&mut *lock_dealer(&self.dealer)?, self.party, n, shape).map_err(tpc)?;
        self.pre.q.push_back((g, n, b));
        Ok(())
    }
    fn clear_predealt(&mut self) {
        self.pre.q.clear();
    }
    fn predealt_len(&self) -> usize {
        self.pre.q.len()
    }
    fn est_bytes(&self, g: Gate, n: usize) -> u64 {
        fss_est_bytes(self.bits, g, n)
    }
    fn plan_requests(&self, items: &[(Gate, usize)]) -> Result<Vec<hush_tee::deal::DealRequest>> {
        let mut b = lock_dealer(&self.dealer)?.peek_batch();
        let mut out = Vec::new();
        for &(g, n) in items {
            let r = hush_2pc::fss::requests(b, n, self.shape(g));
            b += r.len() as u64;
            out.extend(r);
        }
        Ok(out)
    }
    fn batch_dealer(&self) -> BatchDealer {
        let (d, party, bits) = (self.dealer.clone(), self.party, self.bits);
        Box::new(move |g, n| {
            let b = hush_2pc::fss::deal(&mut *lock_dealer(&d)?, party, n, fss_shape(bits, g)).map_err(tpc)?;
            Ok(Box::new(b) as Box<dyn std::any::Any + Send>)
        })
    }
    fn set_feed(&mut self, feed: Option<Feed>) {
        self.feed = feed;
    }
}

/// The `tami` family: hush-2pc's TAMI-MPC one-round millionaires' with
/// module-dealt tables. TAMI works on the masked form x = y + m (m dealt to
/// party 1): party 1 first sends x_1 − m (one message), then the TAMI
/// flights run. Truncation is faithful (error ≤ 1 ulp), not exact.
pub struct TamiNonlinear {
    dealer: Arc<Mutex<hush_2pc::tee::Dealer>>,
    feed: Option<Feed>,
    party: u8,
    bits: u32,
    chunk: usize,
    pre: Queue<hush_2pc::tami::TamiBatch>,
}

impl TamiNonlinear {
    pub fn new(module: SharedModule, party: u8, bits: u32, chunk: usize) -> Self {
        TamiNonlinear { dealer: Arc::new(Mutex::new(hush_2pc::tee::Dealer::new(Box::new(module)))), feed: None, party, bits, chunk: chunk.max(1), pre: Queue::new() }
    }
    fn shape(&self, g: Gate) -> hush_2pc::tami::TamiShape {
        tami_shape(self.bits, g)
    }
}

impl Nonlinear for TamiNonlinear {
    fn family(&self) -> &'static str {
        "tami"
    }
    fn gate(&mut self, ch: &mut dyn Channel, x: &mut [u64], g: Gate) -> Result<()> {
        use hush_transport::ChannelExt;
        let shape = self.shape(g);
        let cfg = FixedConfig { bits: self.bits, frac: 1 };
        let m = cfg.mask();
        for c in x.chunks_mut(self.chunk) {
            let b = match self.pre.take(g, c.len()) {
                Some(b) => b,
                None => match &self.feed {
                    Some(f) => f.take_batch::<hush_2pc::tami::TamiBatch>(g, c.len())?,
                    None => hush_2pc::tami::deal(&mut *lock_dealer(&self.dealer)?, self.party, c.len(), shape).map_err(tpc)?,
                },
            };
            let out = if self.party == 0 {
                let d = linear::recv_ring(ch, &cfg, c.len(), "tami: re-masked share x_1 − m")?;
                let y: Vec<u64> = c.iter().zip(&d).map(|(a, b)| a.wrapping_add(*b) & m).collect();
                hush_2pc::tami::online(ch, &b, Some(&y)).map_err(tpc)?
            } else {
                let mm = b.dealt_input();
                let d: Vec<u64> = c.iter().zip(mm).map(|(a, b)| a.wrapping_sub(*b) & m).collect();
                ch.send_chunked(&linear::pack(&cfg, &d))?;
                hush_2pc::tami::online(ch, &b, None).map_err(tpc)?
            };
            c.copy_from_slice(&out.arith().map_err(tpc)?.v);
        }
        Ok(())
    }
    fn exact_truncation(&self) -> bool {
        false
    }
    fn chunk(&self) -> usize {
        self.chunk
    }
    fn predeal(&mut self, g: Gate, n: usize) -> Result<()> {
        let shape = self.shape(g);
        let b = hush_2pc::tami::deal(&mut *lock_dealer(&self.dealer)?, self.party, n, shape).map_err(tpc)?;
        self.pre.q.push_back((g, n, b));
        Ok(())
    }
    fn clear_predealt(&mut self) {
        self.pre.q.clear();
    }
    fn predealt_len(&self) -> usize {
        self.pre.q.len()
    }
    fn est_bytes(&self, g: Gate, n: usize) -> u64 {
        tami_est_bytes(self.bits, g, n)
    }
    fn plan_requests(&self, items: &[(Gate, usize)]) -> Result<Vec<hush_tee::deal::DealRequest>> {
        let b = lock_dealer(&self.dealer)?.peek_batch();
        Ok(items.iter().enumerate().map(|(i, &(g, n))| hush_2pc::tami::request(b + i as u64, n, &tami_shape(self.bits, g))).collect())
    }
    fn batch_dealer(&self) -> BatchDealer {
        let (d, party, bits) = (self.dealer.clone(), self.party, self.bits);
        Box::new(move |g, n| {
            let b = hush_2pc::tami::deal(&mut *lock_dealer(&d)?, party, n, tami_shape(bits, g)).map_err(tpc)?;
            Ok(Box::new(b) as Box<dyn std::any::Any + Send>)
        })
    }
    fn set_feed(&mut self, feed: Option<Feed>) {
        self.feed = feed;
    }
}

/// The `cf2` family: CrypTFlow2's millionaires' and the DReLU / ReLU /
/// truncation built on it ([`hush_2pc::nonlinear::Session`]) on a COT
/// session — Ferret in `interactive` mode (cryptography only), SilentFlow
/// COTs from the parties' modules in `silent` mode. Nothing is dealt: each
/// chunk's ROTs and AND triples are made from fresh COTs over the channel
/// when the chunk runs (so they count in the online phase), and there is
/// nothing to pre-deal or look ahead. Truncation is faithful (error ≤ 1
/// ulp, SCI's wrap-bit construction, valid on the whole signed ring), not
/// exact. What each party sees: see [`hush_2pc::cf2`] (every leaf, AND and
/// mux consumes its own fresh correlations).
pub struct Cf2Nonlinear {
    session: hush_2pc::nonlinear::Session,
    bits: u32,
    chunk: usize,
}

impl Cf2Nonlinear {
    pub fn new(ot: hush_2pc::beaver::OtSession, party: u8, bits: u32, chunk: usize) -> Self {
        Cf2Nonlinear { session: hush_2pc::nonlinear::Session::interactive(party, ot), bits, chunk: chunk.max(1) }
    }
    fn ring(&self) -> Result<hush_primitives::Ring> {
        hush_primitives::Ring::new(self.bits).ok_or_else(|| Error::Config(format!("cf2: ring width {} outside 1..=64", self.bits)))
    }
}

impl Nonlinear for Cf2Nonlinear {
    fn family(&self) -> &'static str {
        "cf2"
    }
    fn gate(&mut self, ch: &mut dyn Channel, x: &mut [u64], g: Gate) -> Result<()> {
        let r = self.ring()?;
        for c in x.chunks_mut(self.chunk) {
            let a = hush_2pc::share::ArithShare::new(r, c.to_vec());
            let out = match g {
                Gate::Relu => self.session.relu(ch, &a),
                Gate::Trunc(f) => self.session.trunc(ch, &a, f),
            }
            .map_err(tpc)?;
            c.copy_from_slice(&out.v);
        }
        Ok(())
    }
    fn exact_truncation(&self) -> bool {
        false
    }
    fn fuses_relu_trunc(&self) -> bool {
        true
    }
    /// ReLU (a millionaires' and a multiplexer), then the known-sign
    /// truncation of its non-negative output ([`hush_2pc::cf2::trunc_nonneg`],
    /// one random OT per element) instead of a second millionaires'.
    fn relu_trunc(&mut self, ch: &mut dyn Channel, x: &mut [u64], shift: u32) -> Result<()> {
        let r = self.ring()?;
        for c in x.chunks_mut(self.chunk) {
            let a = hush_2pc::share::ArithShare::new(r, c.to_vec());
            let y = self.session.relu(ch, &a).map_err(tpc)?;
            let t = self.session.trunc_nonneg(ch, &y, shift).map_err(tpc)?;
            c.copy_from_slice(&t.v);
        }
        Ok(())
    }
    fn chunk(&self) -> usize {
        self.chunk
    }
    fn predeal(&mut self, _g: Gate, _n: usize) -> Result<()> {
        Err(Error::Config("the cf2 family makes its correlations over the channel when a chunk runs; there is nothing to pre-deal".into()))
    }
    fn clear_predealt(&mut self) {}
    fn predealt_len(&self) -> usize {
        0
    }
    fn est_bytes(&self, g: Gate, n: usize) -> u64 {
        cf2_est_bytes(self.bits, g, n)
    }
    fn batch_dealer(&self) -> BatchDealer {
        Box::new(|_, _| Err(Error::Config("the cf2 family has no dealer (nothing to look ahead)".into())))
    }
    fn set_feed(&mut self, _feed: Option<Feed>) {}
}

/// [`Nonlinear::est_bytes`] of the `cf2` family: what one chunk's
/// correlations take at the larger party while they are made: the leaf
/// OTs' k COTs per chunk (16-byte blocks; their hashes are made a small
/// group at a time) with slack for the COT source's output buffer, the
/// kept pads (one byte each; party 0 keeps 2^k per leaf), the merge's AND
/// triples, the multiplexer's ROTs (3 blocks per direction), the chunk's
/// vectors.
pub fn cf2_est_bytes(bits: u32, g: Gate, n: usize) -> u64 {
    let k = hush_2pc::cf2::DEFAULT_K as u64;
    let width = match g {
        Gate::Relu => bits.saturating_sub(1),
        Gate::Trunc(_) => bits,
    } as u64;
    let nc = width.div_ceil(k).max(1);
    n as u64 * (2 * 16 * k * nc + nc * (1 << k) + 2 * nc + 6 * 16 + 64)
}

/// Default nonlinear chunk of the `cf2` family (HE modes): larger than the
/// dealt families' ([`DEFAULT_CHUNK`]) — each chunk costs cf2 about ten
/// sequential flights, and its correlations take ~1.5 KB per element
/// ([`cf2_est_bytes`]) while they are made.
pub const CF2_DEFAULT_CHUNK: usize = 1 << 18;

fn fss_shape(bits: u32, g: Gate) -> hush_2pc::fss::FssShape {
    let gate = match g {
        Gate::Relu => hush_2pc::fss::FssGate::Relu,
        Gate::Trunc(f) => hush_2pc::fss::FssGate::Trunc { f },
    };
    hush_2pc::fss::FssShape { bits, gate }
}

/// [`Nonlinear::est_bytes`] of the `fss` family: key bytes plus the dealt
/// value and offset words (both parties hold keys of the same size).
pub fn fss_est_bytes(bits: u32, g: Gate, n: usize) -> u64 {
    n as u64 * (fss_shape(bits, g).key_bytes() as u64 + 16)
}

fn tami_shape(bits: u32, g: Gate) -> hush_2pc::tami::TamiShape {
    let flavor = match g {
        Gate::Relu => hush_2pc::tami::Flavor::Relu,
        Gate::Trunc(f) => hush_2pc::tami::Flavor::Trunc { f },
    };
    hush_2pc::tami::TamiShape::new(bits, hush_2pc::tami::DEFAULT_K, hush_2pc::tami::DEFAULT_ARITY, flavor)
}

/// [`Nonlinear::est_bytes`] of the `tami` family.
pub fn tami_est_bytes(bits: u32, g: Gate, n: usize) -> u64 {
    // the larger party's share (hush_2pc::deal::tami's layout): party 1
    // holds its input and the leaf tables, both hold the merge subsets
    // and masks (one bit per element each) and the post-processing words
    let shape = tami_shape(bits, g);
    let plan = shape.plan();
    let w = n.div_ceil(64) as u64;
    let n = n as u64;
    let mut words = n * (1 + plan.leaves as u64);
    words += w * plan.levels.iter().map(|l| l.subsets.len() as u64).sum::<u64>();
    words += w * plan.levels.iter().skip(1).map(|l| l.inputs.len() as u64).sum::<u64>();
    if shape.has_post() {
        words += w + n;
    }
    if matches!(g, Gate::Relu) {
        words += n * (1 + bits as u64);
    }
    8 * words
}

/// [`Nonlinear::est_bytes`] of a family by name, without a module.
pub fn family_est_bytes(proto: &str, bits: u32, g: Gate, n: usize) -> Result<u64> {
    match proto {
        "fss" => Ok(fss_est_bytes(bits, g, n)),
        "tami" => Ok(tami_est_bytes(bits, g, n)),
        "cf2" => Ok(cf2_est_bytes(bits, g, n)),
        other => Err(Error::Config(format!("unknown protocol family '{other}' (choose one of {})", FAMILIES.join(", ")))),
    }
}

/// The families `--proto` accepts with module-dealt correlations (`tee`
/// and `dealer` modes).
pub const FAMILIES: &[&str] = &["fss", "tami"];

/// The families of the modes with HE linear layers (`interactive`,
/// `silent`): the comparisons run on COTs.
pub const HE_FAMILIES: &[&str] = &["cf2"];

/// Builds a party's nonlinear family by name.
pub fn make_family(name: &str, module: SharedModule, party: u8, bits: u32, chunk: usize) -> Result<Box<dyn Nonlinear>> {
    match name {
        "fss" => Ok(Box::new(FssNonlinear::new(module, party, bits, chunk))),
        "tami" => Ok(Box::new(TamiNonlinear::new(module, party, bits, chunk))),
        other => Err(Error::Config(format!("unknown protocol family '{other}' (choose one of {})", FAMILIES.join(", ")))),
    }
}

/// Builds a party's nonlinear layer: one family by name, or with
/// `family_plan` (one family index per plan step, into [`MIX_FAMILIES`]) a
/// [`MixedNonlinear`] that runs each step's gates in its own family.
pub fn make_nonlinear(name: &str, family_plan: Option<&[u8]>, plan: &Plan, module: SharedModule, party: u8, bits: u32, chunk: usize) -> Result<Box<dyn Nonlinear>> {
    match family_plan {
        None => make_family(name, module, party, bits, chunk),
        Some(choice) => {
            let fams = MIX_FAMILIES.iter().map(|f| make_family(f, module.clone(), party, bits, chunk)).collect::<Result<Vec<_>>>()?;
            Ok(Box::new(MixedNonlinear::new(plan, choice, fams, chunk)?))
        }
    }
}

/// The families a per-layer plan mixes (index = the plan's entry).
pub const MIX_FAMILIES: &[&str] = &["fss", "tami"];

/// A comparison family per plan step (issue 28: "a plan per operator"):
/// each step's ReLU, MaxPool rounds and truncations run in the family the
/// plan names for it, all on the same provider.
///
/// **How both parties stay in step.** The dealing schedule
/// ([`schedule_steps`]) is a deterministic function of the public plan,
/// the chunk and the public per-step choice, so the k-th nonlinear item of
/// an inference has the same family at both parties; pre-dealing, the
/// look-ahead worker and the online gates each walk that sequence with
/// their own cursor (every gate call consumes one item per chunk of its
/// input, exactly as the schedule counts them). Each family deals through
/// its own dealer handle (its own dealing kinds and batch counter), so the
/// two families' correlations never share a batch.
///
/// **Why mixing is sound.** Each family's gate takes fresh additive
/// sharings and returns fresh additive sharings of its output, with a view
/// simulatable from its own output (`hush-2pc`'s fss and tami arguments);
/// the steps compose sequentially, so which family ran the previous step
/// changes nothing of the next step's view. Both families draw on the same
/// provider, so a mix asks for no trust a single-family run does not.
pub struct MixedNonlinear {
    fams: Vec<Box<dyn Nonlinear>>,
    /// Family of each nonlinear schedule item, in schedule order.
    seq: Arc<Vec<u8>>,
    /// Next item to pre-deal, next item the online gates consume.
    pk: usize,
    ok: usize,
    chunk: usize,
}

impl MixedNonlinear {
    pub fn new(plan: &Plan, choice: &[u8], fams: Vec<Box<dyn Nonlinear>>, chunk: usize) -> Result<Self> {
        if choice.len() != plan.steps.len() {
            return Err(Error::Config(format!("family plan: {} entries for a model of {} layers", choice.len(), plan.steps.len())));
        }
        if let Some(&c) = choice.iter().find(|&&c| c as usize >= fams.len()) {
            return Err(Error::Config(format!("family plan: family index {c} (the mix has {})", fams.len())));
        }
        let chunk = chunk.max(1);
        let seq = schedule_steps(plan, chunk).into_iter().filter_map(|(it, si)| matches!(it, DealItem::Nonlinear { .. }).then_some(choice[si])).collect();
        Ok(MixedNonlinear { fams, seq: Arc::new(seq), pk: 0, ok: 0, chunk })
    }

    fn fam_at(&self, k: usize) -> Result<usize> {
        self.seq.get(k).map(|&f| f as usize).ok_or_else(|| Error::Protocol(format!("mixed families: nonlinear item {k} beyond the schedule's {}", self.seq.len())))
    }
}

impl Nonlinear for MixedNonlinear {
    fn family(&self) -> &'static str {
        "mixed"
    }
    fn gate(&mut self, ch: &mut dyn Channel, x: &mut [u64], g: Gate) -> Result<()> {
        let items = x.len().div_ceil(self.chunk);
        if items == 0 {
            return Ok(());
        }
        let f = self.fam_at(self.ok)?;
        self.ok += items;
        self.fams[f].gate(ch, x, g)
    }
    fn exact_truncation(&self) -> bool {
        self.fams.iter().all(|f| f.exact_truncation())
    }
    fn chunk(&self) -> usize {
        self.chunk
    }
    fn predeal(&mut self, g: Gate, n: usize) -> Result<()> {
        let f = self.fam_at(self.pk)?;
        self.pk += 1;
        self.fams[f].predeal(g, n)
    }
    fn clear_predealt(&mut self) {
        for f in &mut self.fams {
            f.clear_predealt();
        }
        // a new inference's schedule starts (pre-dealing, or the end of a run)
        self.pk = 0;
        self.ok = 0;
    }
    fn predealt_len(&self) -> usize {
        self.fams.iter().map(|f| f.predealt_len()).sum()
    }
    fn est_bytes(&self, g: Gate, n: usize) -> u64 {
        self.fams.iter().map(|f| f.est_bytes(g, n)).max().unwrap_or(0)
    }
    fn batch_dealer(&self) -> BatchDealer {
        // the look-ahead deals the items after the pre-dealt prefix
        let mut ds: Vec<BatchDealer> = self.fams.iter().map(|f| f.batch_dealer()).collect();
        let (seq, mut k) = (self.seq.clone(), self.pk);
        Box::new(move |g, n| {
            let f = *seq.get(k).ok_or_else(|| Error::Protocol("mixed families: look-ahead beyond the schedule".into()))? as usize;
            k += 1;
            ds[f](g, n)
        })
    }
    fn set_feed(&mut self, feed: Option<Feed>) {
        for f in &mut self.fams {
            f.set_feed(feed.clone());
        }
    }
    fn plan_requests(&self, items: &[(Gate, usize)]) -> Result<Vec<hush_tee::deal::DealRequest>> {
        let mut out = Vec::new();
        for (fi, f) in self.fams.iter().enumerate() {
            let mine: Vec<(Gate, usize)> = items.iter().enumerate().filter(|(j, _)| self.seq.get(self.pk + j).map(|&x| x as usize) == Some(fi)).map(|(_, it)| *it).collect();
            out.extend(f.plan_requests(&mine)?);
        }
        Ok(out)
    }
}

/// Costs of one layer, as seen by one party.
#[derive(Clone, Debug, Default)]
pub struct LayerCost {
    pub name: String,
    pub kind: &'static str,
    pub elems: usize,
    pub secs: f64,
    /// Time inside this party's module calls (dealing; included in `secs`).
    pub module_secs: f64,
    pub bytes_sent: u64,
    pub bytes_recv: u64,
    pub rounds: u32,
    pub module_crossings: u64,
    pub module_bytes: u64,
    /// Multiply-accumulates of W·x this party (server) or its module did.
    pub macs: u64,
}

impl LayerCost {
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name, "kind": self.kind, "elems": self.elems, "secs": self.secs,
            "module_secs": self.module_secs, "bytes_sent": self.bytes_sent, "bytes_recv": self.bytes_recv,
            "rounds": self.rounds, "module_crossings": self.module_crossings, "module_bytes": self.module_bytes,
            "macs": self.macs,
        })
    }
}

/// What one party needs for a secure run.
pub struct Party<'a> {
    pub party: u8,
    pub ch: &'a mut dyn Channel,
    pub module: SharedModule,
    pub nl: &'a mut dyn Nonlinear,
    /// Inference number within the session (fresh module masks per run).
    pub batch: u64,
    /// Linear-layer correlations pre-dealt for this run (see [`predeal`]);
    /// the pre-dealt nonlinear batches are queued in `nl`.
    pub pre: &'a mut Predealt,
    /// The client's measured memory budget, checked after every layer.
    pub guard: Option<MemGuard>,
    /// Deal what is not pre-dealt on a look-ahead worker (see [`run`]).
    pub lookahead: bool,
    /// The HE linear layers (`interactive` and `silent` modes): when set,
    /// every weighted linear layer runs Cheetah's protocol
    /// ([`crate::he_linear`]) instead of the module-dealt one, and nothing
    /// of the linear layers is dealt.
    pub he: Option<&'a mut crate::he_linear::HeLinear>,
}

/// A party's memory budget enforced as *measured* peak: after every layer
/// (and every pre-dealt item) the party's high-water mark, read from a
/// per-party heap meter, is compared with the budget, and the run stops
/// with [`Error::Memory`] if it was exceeded — the estimate that chose the
/// chunk size and pre-dealing budget was wrong — instead of going on.
#[derive(Clone, Copy)]
pub struct MemGuard {
    /// Reads the party's high-water mark (bytes) since the session began.
    pub peak: fn(usize) -> i64,
    pub tag: usize,
    pub budget: u64,
    /// What the estimate said the peak would be.
    pub estimate: u64,
}

impl MemGuard {
    pub fn check(&self, at: &str) -> Result<()> {
        let p = (self.peak)(self.tag).max(0) as u64;
        if p > self.budget {
            return Err(Error::Memory(format!(
                "the client's measured peak heap reached {:.1} MiB at {at}, above --max-mem {:.1} MiB (estimated {:.1} MiB): stopped rather than exceed the budget; \
                 try a smaller --chunk or --predeal-mem, or a larger --max-mem",
                p as f64 / 1048576.0,
                self.budget as f64 / 1048576.0,
                self.estimate as f64 / 1048576.0
            )));
        }
        Ok(())
    }
}

/// One input-independent correlation of an inference, in the order the
/// online run consumes them (a deterministic function of the plan and
/// the chunk size, identical at both parties).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DealItem {
    Linear { layer: u32, in_len: usize, out_len: usize },
    Nonlinear { gate: Gate, n: usize },
}

/// The dealing schedule of one inference: every linear layer's masks and
/// every nonlinear chunk, in online order.
pub fn schedule(plan: &Plan, chunk: usize) -> Vec<DealItem> {
    schedule_steps(plan, chunk).into_iter().map(|(it, _)| it).collect()
}

/// [`schedule`], each item with the index of the plan step it serves.
pub fn schedule_steps(plan: &Plan, chunk: usize) -> Vec<(DealItem, usize)> {
    let chunk = chunk.max(1);
    let frac = plan.cfg.frac;
    let mut out = Vec::new();
    let nl = |out: &mut Vec<(DealItem, usize)>, si: usize, gate: Gate, n: usize| {
        let mut left = n;
        while left > 0 {
            let m = left.min(chunk);
            out.push((DealItem::Nonlinear { gate, n: m }, si));
            left -= m;
        }
    };
    for (si, st) in plan.steps.iter().enumerate() {
        match &st.kind {
            StepKind::Linear { layer, in_len, out_len, op, .. } => {
                let (i, o) = op.as_ref().map(|op| (op.in_len(), op.out_len())).unwrap_or((*in_len, *out_len));
                out.push((DealItem::Linear { layer: *layer, in_len: i, out_len: o }, si));
                nl(&mut out, si, Gate::Trunc(frac), o);
            }
            StepKind::AvgPool { .. } => nl(&mut out, si, Gate::Trunc(frac), st.out_len),
            StepKind::Relu => nl(&mut out, si, Gate::Relu, st.out_len),
            StepKind::MaxPool { offs, .. } => {
                // window sizes halve (rounding up) each round of pairs
                let mut sizes: Vec<usize> = offs.windows(2).map(|w| (w[1] - w[0]) as usize).collect();
                loop {
                    let pairs: usize = sizes.iter().map(|s| s / 2).sum();
                    if pairs == 0 {
                        break;
                    }
                    nl(&mut out, si, Gate::Relu, pairs);
                    for s in sizes.iter_mut() {
                        *s = s.div_ceil(2);
                    }
                }
            }
            StepKind::AddConst { .. } | StepKind::Add | StepKind::Reshape | StepKind::Concat { .. } => {}
        }
    }
    out
}

/// A party's pre-dealt correlations for one inference (linear-layer masks
/// here, nonlinear batches queued in its [`Nonlinear`]) and what
/// pre-dealing them cost.
#[derive(Default)]
pub struct Predealt {
    linear: std::collections::VecDeque<(u32, u64, hush_tee::linear_deal::LinearResponse)>,
    /// The inference these correlations are for.
    pub batch: Option<u64>,
    /// Items of the schedule pre-dealt (a prefix) and in all.
    pub items: usize,
    pub total_items: usize,
    /// Estimated bytes held (see [`Nonlinear::est_bytes`]).
    pub est_bytes: u64,
    /// Wall time of pre-dealing, module crossings it made.
    pub secs: f64,
    pub crossings: u64,
}

impl Predealt {
    /// The pre-dealt masks of (`layer`, `batch`) if they are next.
    fn take_linear(&mut self, layer: u32, batch: u64) -> Option<hush_tee::linear_deal::LinearResponse> {
        match self.linear.front() {
            Some((l, b, _)) if *l == layer && *b == batch => self.linear.pop_front().map(|e| e.2),
            Some(_) => {
                self.linear.clear();
                None
            }
            None => None,
        }
    }
    /// Drops everything held (responses zeroize on drop).
    pub fn clear(&mut self) {
        self.linear.clear();
        self.batch = None;
        self.items = 0;
        self.est_bytes = 0;
    }
}

/// Offline: deals the longest prefix of inference `batch`'s [`schedule`]
/// whose estimated size fits `budget` bytes (0 disables) and stores it in
/// `pre` and `nl`; the rest is dealt on the fly during the run. Both
/// parties must call this with the same plan, chunk, batch and budget at
/// the same point of the session (the module's comparison batch numbers
/// are a per-session counter). Anything still held is dropped first.
pub fn predeal(plan: &Plan, module: &mut SharedModule, nl: &mut dyn Nonlinear, pre: &mut Predealt, batch: u64, budget: u64) -> Result<()> {
    predeal_guarded(plan, module, nl, pre, batch, budget, None)
}

/// [`predeal`], checking `guard` after every item dealt.
pub fn predeal_guarded(plan: &Plan, module: &mut SharedModule, nl: &mut dyn Nonlinear, pre: &mut Predealt, batch: u64, budget: u64, guard: Option<&MemGuard>) -> Result<()> {
    let t0 = Instant::now();
    let m0 = module.stats();
    pre.clear();
    nl.clear_predealt();
    let sched = schedule(plan, nl.chunk());
    pre.total_items = sched.len();
    pre.batch = Some(batch);
    let mut used = 0u64;
    for it in &sched {
        let est = match it {
            DealItem::Linear { in_len, out_len, .. } => 8 * (*in_len + *out_len) as u64,
            DealItem::Nonlinear { gate, n } => nl.est_bytes(*gate, *n),
        };
        if used + est > budget {
            break;
        }
        match it {
            DealItem::Linear { layer, in_len, out_len } => {
                let d = linear::deal(module, &plan.cfg, *layer, batch, *in_len, *out_len)?;
                pre.linear.push_back((*layer, batch, d));
            }
            DealItem::Nonlinear { gate, n } => nl.predeal(*gate, *n)?,
        }
        used += est;
        pre.items += 1;
        if let Some(g) = guard {
            g.check(&format!("pre-dealing item {} of {}", pre.items, pre.total_items))?;
        }
    }
    pre.est_bytes = used;
    pre.secs = t0.elapsed().as_secs_f64();
    pre.crossings = (module.stats() - m0).crossings;
    Ok(())
}

/// **Dealer mode, server only: the dealing plan.** After pre-dealing, the
/// rest of the schedule's nonlinear batches (what the look-ahead will deal
/// during the online phase) as the exact dealing requests they will send
/// ([`Nonlinear::plan_requests`]: the same batch numbers and shapes), sent
/// to the dealer as one [`hush_tee::Request::Plan`]. The dealer computes
/// them ahead into its own memory and answers when done or at its budget
/// (see `hush_tee::dealer`, "Dealing plans"), so the caller's offline phase
/// includes that work. Returns (requests planned, computed by the dealer,
/// bytes it holds). Nothing is released by the plan: each share still
/// crosses only on its own role's request.
pub fn plan_dealer(plan: &Plan, module: &mut SharedModule, nl: &dyn Nonlinear, pre: &Predealt) -> Result<(usize, u32, u64)> {
    let sched = schedule(plan, nl.chunk());
    let items: Vec<(Gate, usize)> = sched
        .iter()
        .skip(pre.items)
        .filter_map(|it| match it {
            DealItem::Nonlinear { gate, n } => Some((*gate, *n)),
            DealItem::Linear { .. } => None,
        })
        .collect();
    let reqs = nl.plan_requests(&items)?;
    if reqs.is_empty() {
        return Ok((0, 0, 0));
    }
    let n = reqs.len();
    match module.call(&hush_tee::Request::Plan(reqs))? {
        hush_tee::Response::Planned { computed, bytes } => Ok((n, computed, bytes)),
        _ => Err(Error::Protocol("dealer: unexpected answer to a dealing plan".into())),
    }
}

/// Server only: binds every linear layer's weights to its module.
pub fn load_weights(plan: &Plan, module: &mut SharedModule) -> Result<()> {
    for st in &plan.steps {
        if let StepKind::Linear { layer, op, .. } = &st.kind {
            let op = op.as_ref().ok_or_else(|| Error::Config("server plan without weights".into()))?;
            linear::load(module, *layer, op)?;
        }
    }
    Ok(())
}

/// **Look-ahead.** What is not pre-dealt is dealt during the online phase.
/// Rather than deal an item and then evaluate it, one after the other,
/// [`run`] starts a worker thread that deals the rest of the [`schedule`]
/// in order — the same order as without it, so both parties' modules see
/// the same requests item by item — into a queue of at most
/// [`lookahead_cap`] bytes, while the party's thread evaluates: online ≈
/// max(evaluation, dealing) instead of their sum. The worker takes the
/// party's heap-meter tag (its allocations count towards `--max-mem`, see
/// [`crate::budget`]); an error it meets is handed to the party's thread
/// at the item it failed on, which returns it (the worker stops; nothing
/// waits for it). [`Party::lookahead`] turns it off (so does
/// `HUSH_LOOKAHEAD=0` in the environment, read here).
pub fn lookahead_env() -> bool {
    std::env::var("HUSH_LOOKAHEAD").map(|v| v != "0").unwrap_or(true)
}

/// Items of the largest size the look-ahead queue holds (1: double
/// buffering — the worker deals item k+1 while the party uses item k).
pub const LOOKAHEAD_ITEMS: u64 = 1;

/// Estimated bytes one party holds for a dealt item (as [`predeal`] counts).
pub fn item_est_bytes(proto: &str, bits: u32, it: &DealItem) -> Result<u64> {
    match it {
        DealItem::Linear { in_len, out_len, .. } => Ok(8 * (*in_len + *out_len) as u64),
        DealItem::Nonlinear { gate, n } => family_est_bytes(proto, bits, *gate, *n),
    }
}

/// Byte cap of the look-ahead queue for a schedule whose largest item is
/// `max_item` bytes: [`LOOKAHEAD_ITEMS`] such items (a single larger item
/// is let through when the queue is empty).
pub fn lookahead_cap(max_item: u64) -> u64 {
    LOOKAHEAD_ITEMS * max_item
}

/// A dealt item handed from the look-ahead worker.
pub enum Dealt {
    Linear(hush_tee::linear_deal::LinearResponse),
    Batch(Box<dyn std::any::Any + Send>),
}

type Ahead = Result<(DealItem, u64, Dealt)>;

/// Bytes reserved by the worker (from the start of dealing an item until
/// the party's thread takes it) and the stop flag.
struct Credit {
    st: Mutex<(u64, bool)>,
    cv: std::sync::Condvar,
}

impl Credit {
    /// Waits until `est` more bytes fit `cap` (or nothing is reserved);
    /// false once stopped.
    fn acquire(&self, est: u64, cap: u64) -> bool {
        let Ok(mut g) = self.st.lock() else { return false };
        loop {
            if g.1 {
                return false;
            }
            if g.0 == 0 || g.0 + est <= cap {
                g.0 += est;
                return true;
            }
            g = match self.cv.wait(g) {
                Ok(g) => g,
                Err(_) => return false,
            };
        }
    }
    fn release(&self, est: u64) {
        if let Ok(mut g) = self.st.lock() {
            g.0 = g.0.saturating_sub(est);
        }
        self.cv.notify_all();
    }
    fn stop(&self) {
        if let Ok(mut g) = self.st.lock() {
            g.1 = true;
        }
        self.cv.notify_all();
    }
}

/// The party's end of a look-ahead worker (see [`run`]).
pub struct Lookahead {
    rx: Mutex<std::sync::mpsc::Receiver<Ahead>>,
    credit: Arc<Credit>,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
    module: SharedModule,
    /// Byte cap of the queue.
    pub cap: u64,
    /// Items the worker deals.
    pub items: usize,
}

/// A shared handle on a [`Lookahead`].
pub type Feed = Arc<Lookahead>;

impl Lookahead {
    /// Starts a worker dealing `items` (with their estimated sizes) in
    /// order, for inference `batch`.
    fn start(cfg: FixedConfig, batch: u64, module: SharedModule, mut deal_nl: BatchDealer, items: Vec<(DealItem, u64)>, cap: u64) -> Option<Lookahead> {
        let (tx, rx) = std::sync::mpsc::channel::<Ahead>();
        let credit = Arc::new(Credit { st: Mutex::new((0, false)), cv: Default::default() });
        let cr = credit.clone();
        let mut m = module.clone();
        let n = items.len();
        let ctx = hush_transport::helper_thread_context();
        let h = std::thread::Builder::new()
            .name("hush-lookahead".into())
            .spawn(move || {
                if let Some((c, set)) = ctx {
                    set(c);
                }
                AHEAD.with(|a| a.set(true));
                for (it, est) in items {
                    if !cr.acquire(est, cap) {
                        return;
                    }
                    let r = match &it {
                        DealItem::Linear { layer, in_len, out_len } => linear::deal(&mut m, &cfg, *layer, batch, *in_len, *out_len).map(Dealt::Linear),
                        DealItem::Nonlinear { gate, n } => deal_nl(*gate, *n).map(Dealt::Batch),
                    };
                    match r {
                        Ok(d) => {
                            if tx.send(Ok((it, est, d))).is_err() {
                                return;
                            }
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e));
                            return;
                        }
                    }
                }
            })
            .ok()?;
        Some(Lookahead { rx: Mutex::new(rx), credit, worker: Mutex::new(Some(h)), module, cap, items: n })
    }

    /// The next dealt item, which must be `want`; waiting for it counts as
    /// module time of the party (dealing the online phase waited for).
    fn take(&self, want: &DealItem) -> Result<Dealt> {
        let t = Instant::now();
        let r = match self.rx.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return Err(Error::Protocol("look-ahead queue poisoned".into())),
        };
        self.module.add_busy(t.elapsed().as_nanos() as u64);
        match r {
            Ok(Ok((it, est, d))) => {
                self.credit.release(est);
                if &it != want {
                    return Err(Error::Protocol(format!("look-ahead out of step: the run needs {want:?}, the worker dealt {it:?}")));
                }
                Ok(d)
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::Protocol("the look-ahead dealing worker ended before dealing the next item".into())),
        }
    }

    /// The next nonlinear batch, of type `B`, for (`g`, `n`).
    pub fn take_batch<B: 'static>(&self, g: Gate, n: usize) -> Result<B> {
        match self.take(&DealItem::Nonlinear { gate: g, n })? {
            Dealt::Batch(b) => b.downcast::<B>().map(|b| *b).map_err(|_| Error::Protocol("look-ahead: batch of another family".into())),
            Dealt::Linear(_) => Err(Error::Protocol("look-ahead: linear masks where a nonlinear batch was due".into())),
        }
    }

    fn take_linear(&self, want: &DealItem) -> Result<hush_tee::linear_deal::LinearResponse> {
        match self.take(want)? {
            Dealt::Linear(d) => Ok(d),
            Dealt::Batch(_) => Err(Error::Protocol("look-ahead: a nonlinear batch where linear masks were due".into())),
        }
    }

    /// Stops the worker: joined if `join` (it has dealt everything, so it
    /// ends at once) or if it already ended, else left to end by itself
    /// (an error path must not wait on a module call in progress).
    fn stop(&self, join: bool) {
        self.credit.stop();
        let h = self.worker.lock().ok().and_then(|mut w| w.take());
        if let Some(h) = h {
            if join || h.is_finished() {
                let _ = h.join();
            }
        }
    }
}

impl Drop for Lookahead {
    fn drop(&mut self) {
        self.stop(false);
    }
}

/// Whether step `si + 1` is a ReLU and the only reader of step `si`'s
/// output (value `si + 1`).
fn relu_reads_only(plan: &Plan, si: usize) -> bool {
    let v = si + 1;
    match plan.steps.get(si + 1) {
        Some(next) => matches!(next.kind, StepKind::Relu) && next.inputs == [v] && plan.last_use.get(v) == Some(&(si + 1)),
        None => false,
    }
}

/// The step that alone reads value `v` (it occurs once among all steps'
/// inputs and is not the model's output), if any.
fn sole_reader(plan: &Plan, v: usize) -> Option<usize> {
    if v == plan.output {
        return None;
    }
    let mut found = None;
    for (i, st) in plan.steps.iter().enumerate() {
        for &u in &st.inputs {
            if u == v {
                if found.is_some() {
                    return None;
                }
                found = Some(i);
            }
        }
    }
    found
}

/// **Where the fusing families truncate** ([`Nonlinear::fuses_relu_trunc`],
/// the `cf2` family of the HE modes). A linear layer's output is at scale
/// 2^(2f); the reference truncates it at once. Besides handing the
/// truncation to a ReLU that alone reads the layer ([`relu_reads_only`]),
/// the engine moves it past two more local steps, so that it rides on a
/// ReLU's known-sign truncation instead of costing a full (signed)
/// truncation of its own:
/// * **across a residual Add** — a linear layer whose only reader is an
///   Add whose only reader is a ReLU (ResNet's y = ReLU(conv(x) + s)): the
///   layer stays at scale 2^(2f), the Add lifts its other input s (scale
///   2^f) by 2^f locally (s·2^f, a multiplication by a public constant) and
///   the ReLU truncates the sum. Exact in the reference's terms:
///   ⌊(a + s·2^f)/2^f⌋ = ⌊a/2^f⌋ + s, so the result is the reference's up to
///   the one faithful truncation (≤ 1 ulp), as before. When both Add inputs
///   are such layers (a downsampling block), the Add truncates one of them
///   first (a + ⌊c/2^f⌋·2^f), which keeps that identity exact.
/// * **across a MaxPool** — a ReLU that would truncate (fused) and whose
///   only reader is a MaxPool passes its input through; the MaxPool takes
///   the maximum of the untruncated values and applies the ReLU and the
///   truncation to its (fewer) outputs: max and ReLU commute, and
///   ⌊max x_i / 2^f⌋ = max ⌊x_i/2^f⌋ (both monotone), exactly.
///
/// What changes for the parties: nothing in what they see (the same
/// sub-protocols on shares, fewer of them); public: which steps truncate,
/// from the public architecture. Range: the sum a + s·2^f must fit the
/// signed ring at scale 2^(2f), the range every linear layer's output
/// already needs before its truncation (|value| < 2^(ℓ−1−2f), 4,096 at
/// ℓ = 37, f = 12). Both parties derive the same placement from the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pending {
    /// At scale 2^f, as the reference.
    None,
    /// At scale 2^(2f): its (sole) reader truncates it.
    Trunc,
    /// At scale 2^(2f), ReLU not yet applied (a ReLU passed it through to a
    /// MaxPool): the MaxPool applies ReLU and truncation to its outputs.
    ReluTrunc,
}

/// Whether linear step `si`'s truncation moves across the residual Add that
/// alone reads it (see [`Pending`]).
fn defer_across_add(plan: &Plan, si: usize) -> bool {
    let Some(a) = sole_reader(plan, si + 1) else { return false };
    if !matches!(plan.steps[a].kind, StepKind::Add) {
        return false;
    }
    matches!(sole_reader(plan, a + 1).map(|r| &plan.steps[r].kind), Some(StepKind::Relu))
}

/// Whether ReLU step `si`, given an untruncated input, passes it through to
/// the MaxPool that alone reads it (see [`Pending`]).
fn relu_through_maxpool(plan: &Plan, si: usize) -> bool {
    matches!(sole_reader(plan, si + 1).map(|r| &plan.steps[r].kind), Some(StepKind::MaxPool { .. }))
}

/// The steps that truncate under a fusing family, as [`run`] places them
/// (public, from the architecture): `(linear steps that truncate at once,
/// ReLUs that truncate, Adds that truncate one input, MaxPools that apply
/// ReLU and truncation)`; a non-fusing family truncates every linear step.
pub fn truncation_placement(plan: &Plan, fuse: bool) -> (usize, usize, usize, usize) {
    let (mut lin, mut relu, mut add, mut pool) = (0, 0, 0, 0);
    let mut pend = vec![Pending::None; plan.steps.len() + 1];
    for (si, st) in plan.steps.iter().enumerate() {
        match &st.kind {
            StepKind::Linear { .. } => {
                if fuse && (relu_reads_only(plan, si) || defer_across_add(plan, si)) {
                    pend[si + 1] = Pending::Trunc;
                } else {
                    lin += 1;
                }
            }
            StepKind::Add => {
                let (a, b) = (pend[st.inputs[0]], pend[st.inputs[1]]);
                if a == Pending::Trunc && b == Pending::Trunc {
                    add += 1;
                }
                if a == Pending::Trunc || b == Pending::Trunc {
                    pend[si + 1] = Pending::Trunc;
                }
            }
            StepKind::Relu if pend[st.inputs[0]] == Pending::Trunc => {
                if relu_through_maxpool(plan, si) {
                    pend[si + 1] = Pending::ReluTrunc;
                } else {
                    relu += 1;
                }
            }
            StepKind::MaxPool { .. } if pend[st.inputs[0]] == Pending::ReluTrunc => pool += 1,
            _ => {}
        }
    }
    (lin, relu, add, pool)
}

/// Starts the look-ahead for the items of this run not pre-dealt, if any.
fn start_lookahead(plan: &Plan, p: &mut Party<'_>) -> Option<Feed> {
    if !p.lookahead || !lookahead_env() {
        return None;
    }
    let sched = schedule(plan, p.nl.chunk());
    let skip = if p.pre.batch == Some(p.batch) {
        p.pre.items
    } else if p.pre.linear.is_empty() && p.nl.predealt_len() == 0 {
        0
    } else {
        return None;
    };
    let est = |it: &DealItem| match it {
        DealItem::Linear { in_len, out_len, .. } => 8 * (*in_len + *out_len) as u64,
        DealItem::Nonlinear { gate, n } => p.nl.est_bytes(*gate, *n),
    };
    let max_item = sched.iter().map(est).max().unwrap_or(0);
    let rest: Vec<(DealItem, u64)> = sched.iter().skip(skip).map(|it| (it.clone(), est(it))).collect();
    if rest.is_empty() {
        return None;
    }
    Lookahead::start(plan.cfg, p.batch, p.module.clone(), p.nl.batch_dealer(), rest, lookahead_cap(max_item)).map(Arc::new)
}

/// Runs the plan on this party's input share; returns its share of the
/// logits and the per-layer costs. `progress(done, total)` is called after
/// each layer. What is not pre-dealt is dealt by a look-ahead worker
/// overlapping evaluation (see [`Party::lookahead`]).
pub fn run(plan: &Plan, p: &mut Party<'_>, input_share: Vec<u64>, progress: impl FnMut(usize, usize)) -> Result<(Vec<u64>, Vec<LayerCost>)> {
    // module statistics from before the worker starts: what it deals
    // before the first layer begins is charged to the first layer
    let start = (p.module.stats(), p.module.busy_secs());
    let feed = start_lookahead(plan, p);
    if let Some(f) = &feed {
        p.nl.set_feed(Some(f.clone()));
    }
    let r = run_inner(plan, p, input_share, progress, feed.as_ref(), start);
    p.nl.set_feed(None);
    if let Some(f) = feed {
        f.stop(r.is_ok());
    }
    if r.is_err() {
        p.pre.clear();
        p.nl.clear_predealt();
    }
    r
}

fn run_inner(plan: &Plan, p: &mut Party<'_>, input_share: Vec<u64>, mut progress: impl FnMut(usize, usize), feed: Option<&Feed>, start: (ModuleStats, f64)) -> Result<(Vec<u64>, Vec<LayerCost>)> {
    let cfg = plan.cfg;
    let m = cfg.mask();
    if input_share.len() != plan.input_len {
        return Err(Error::Input(format!("input share of {} elements, the model expects {}", input_share.len(), plan.input_len)));
    }
    let server = p.party == SERVER;
    if server && !plan.has_weights {
        return Err(Error::Config("the server needs the model weights".into()));
    }
    let mut vals: Vec<Option<Vec<u64>>> = Vec::with_capacity(plan.steps.len() + 1);
    vals.push(Some(input_share));
    let mut costs = Vec::with_capacity(plan.steps.len());
    let total = plan.steps.len();
    // a linear step whose only reader is the next step, a ReLU, leaves its
    // truncation to that ReLU when the family fuses them (value id)
    let fuse = p.nl.fuses_relu_trunc();
    // per value: a truncation (and ReLU) left to its reader ([`Pending`])
    let mut pend = vec![Pending::None; plan.steps.len() + 1];
    let f = cfg.frac;
    for (si, st) in plan.steps.iter().enumerate() {
        // a step that does not handle a pending truncation must never see one
        let handles = match &st.kind {
            StepKind::Add => st.inputs.iter().all(|&v| pend[v] != Pending::ReluTrunc),
            StepKind::Relu => pend[st.inputs[0]] != Pending::ReluTrunc,
            StepKind::MaxPool { .. } => pend[st.inputs[0]] != Pending::Trunc,
            _ => false,
        };
        if !handles && st.inputs.iter().any(|&v| pend[v] != Pending::None) {
            return Err(Error::Protocol(format!("layer '{}': an input's truncation was deferred to a step that cannot apply it", st.name)));
        }
        let t0 = Instant::now();
        let c0 = p.ch.cost();
        let (m0, b0) = if si == 0 { start } else { (p.module.stats(), p.module.busy_secs()) };
        let get = |vals: &Vec<Option<Vec<u64>>>, i: usize| -> Result<Vec<u64>> {
            vals[i].clone().ok_or_else(|| Error::Protocol(format!("value {i} freed too early")))
        };
        let mut macs = 0u64;
        let y: Vec<u64> = match &st.kind {
            StepKind::Linear { layer, in_len, out_len, op, bias, macs: mc } => {
                let x = vals[st.inputs[0]].as_deref().ok_or_else(|| Error::Protocol("value freed too early".into()))?;
                if let Some(he) = p.he.as_deref_mut() {
                    if server {
                        macs = *mc;
                    }
                    let mut y = he.linear(p.ch, si, op.as_ref(), bias, cfg.bits, x)?;
                    if fuse && (relu_reads_only(plan, si) || defer_across_add(plan, si)) {
                        pend[si + 1] = Pending::Trunc;
                    } else {
                        p.nl.truncate(p.ch, &mut y, cfg.frac)?;
                    }
                    y
                } else {
                let dealt = match p.pre.take_linear(*layer, p.batch) {
                    Some(d) => Some(d),
                    None => match feed {
                        Some(f) => {
                            let (i, o) = op.as_ref().map(|op| (op.in_len(), op.out_len())).unwrap_or((*in_len, *out_len));
                            Some(f.take_linear(&DealItem::Linear { layer: *layer, in_len: i, out_len: o })?)
                        }
                        None => None,
                    },
                };
                let mut y = if server {
                    let op = op.as_ref().expect("server plan has weights");
                    macs = *mc;
                    let mut y = match dealt {
                        Some(d) => linear::server_with(p.ch, &cfg, d, op, x)?,
                        None => linear::server(p.ch, &mut p.module, &cfg, *layer, p.batch, op, x)?,
                    };
                    for (v, b) in y.iter_mut().zip(bias.iter()) {
                        *v = v.wrapping_add(*b) & m;
                    }
                    y
                } else {
                    match dealt {
                        Some(d) => linear::client_with(p.ch, &cfg, d, x, *out_len)?,
                        None => linear::client(p.ch, &mut p.module, &cfg, *layer, p.batch, x, *out_len)?,
                    }
                };
                p.nl.truncate(p.ch, &mut y, cfg.frac)?;
                y
                }
            }
            StepKind::AvgPool { offs, idx, consts } => {
                let x = vals[st.inputs[0]].as_deref().ok_or_else(|| Error::Protocol("value freed too early".into()))?;
                let mut y: Vec<u64> = offs
                    .windows(2)
                    .zip(consts)
                    .map(|(w, c)| {
                        let s = idx[w[0] as usize..w[1] as usize].iter().fold(0u64, |s, &i| s.wrapping_add(x[i as usize]));
                        s.wrapping_mul(*c) & m
                    })
                    .collect();
                p.nl.truncate(p.ch, &mut y, cfg.frac)?;
                y
            }
            StepKind::AddConst { c } => {
                let mut y = get(&vals, st.inputs[0])?;
                if server {
                    for (v, k) in y.iter_mut().zip(c) {
                        *v = v.wrapping_add(*k) & m;
                    }
                }
                y
            }
            StepKind::Add => {
                let (pa, pb) = (pend[st.inputs[0]], pend[st.inputs[1]]);
                let mut y = get(&vals, st.inputs[0])?;
                let mut b = get(&vals, st.inputs[1])?;
                if pa == Pending::Trunc && pb == Pending::Trunc {
                    // both at 2^(2f): truncate one, so ⌊(a + ⌊c/2^f⌋·2^f)/2^f⌋ = ⌊a/2^f⌋ + ⌊c/2^f⌋
                    p.nl.truncate(p.ch, &mut b, f)?;
                }
                if pa == Pending::Trunc || pb == Pending::Trunc {
                    // lift the input at scale 2^f to 2^(2f) (public constant, local)
                    let lift = if pa == Pending::Trunc { &mut b } else { &mut y };
                    for v in lift.iter_mut() {
                        *v = (*v << f) & m;
                    }
                    pend[si + 1] = Pending::Trunc;
                }
                for (v, k) in y.iter_mut().zip(&b) {
                    *v = v.wrapping_add(*k) & m;
                }
                zeroize::Zeroize::zeroize(&mut b);
                y
            }
            StepKind::Relu => {
                let mut y = get(&vals, st.inputs[0])?;
                if pend[st.inputs[0]] == Pending::Trunc {
                    if relu_through_maxpool(plan, si) {
                        pend[si + 1] = Pending::ReluTrunc;
                    } else {
                        p.nl.relu_trunc(p.ch, &mut y, f)?;
                    }
                } else {
                    p.nl.relu(p.ch, &mut y)?;
                }
                y
            }
            StepKind::MaxPool { offs, idx } => {
                let relu_trunc_after = pend[st.inputs[0]] == Pending::ReluTrunc;
                let x = vals[st.inputs[0]].as_deref().ok_or_else(|| Error::Protocol("value freed too early".into()))?;
                let mut cand: Vec<u64> = idx.iter().map(|&i| x[i as usize]).collect();
                let mut co: Vec<u32> = offs.clone();
                loop {
                    // pairs of every window, in window order
                    let mut diffs = Vec::new();
                    let mut any = false;
                    for w in co.windows(2) {
                        let win = &cand[w[0] as usize..w[1] as usize];
                        for pr in win.chunks(2) {
                            if pr.len() == 2 {
                                diffs.push(pr[0].wrapping_sub(pr[1]) & m);
                                any = true;
                            }
                        }
                    }
                    if !any {
                        break;
                    }
                    p.nl.relu(p.ch, &mut diffs)?;
                    let mut next = Vec::with_capacity(cand.len() / 2 + co.len());
                    let mut noffs = Vec::with_capacity(co.len());
                    noffs.push(0u32);
                    let mut di = 0;
                    for w in co.windows(2) {
                        let win = &cand[w[0] as usize..w[1] as usize];
                        for pr in win.chunks(2) {
                            if pr.len() == 2 {
                                next.push(pr[1].wrapping_add(diffs[di]) & m);
                                di += 1;
                            } else {
                                next.push(pr[0]);
                            }
                        }
                        noffs.push(next.len() as u32);
                    }
                    cand = next;
                    co = noffs;
                }
                if relu_trunc_after {
                    p.nl.relu_trunc(p.ch, &mut cand, f)?;
                }
                cand
            }
            StepKind::Reshape => get(&vals, st.inputs[0])?,
            StepKind::Concat { axis, shapes } => {
                let mut out = vec![0u64; st.out_len];
                let mut parts = Vec::new();
                for &i in &st.inputs {
                    parts.push(vals[i].as_deref().ok_or_else(|| Error::Protocol("value freed too early".into()))?);
                }
                let sh: Vec<&[usize]> = shapes.iter().map(|s| s.as_slice()).collect();
                crate::fixed::concat_into(&sh, *axis, &parts, &mut out);
                out
            }
        };
        if y.len() != st.out_len {
            return Err(Error::Protocol(format!("layer '{}' produced {} elements, expected {}", st.name, y.len(), st.out_len)));
        }
        vals.push(Some(y));
        // free values whose last reader was this step
        for (v, slot) in vals.iter_mut().enumerate().take(si + 1) {
            if plan.last_use[v] == si {
                if let Some(mut s) = slot.take() {
                    zeroize::Zeroize::zeroize(&mut s);
                }
            }
        }
        let c1 = p.ch.cost();
        let m1 = p.module.stats();
        let dc = c1 - c0;
        let dm = m1 - m0;
        costs.push(LayerCost {
            name: st.name.clone(),
            kind: st.kind_name(),
            elems: st.out_len,
            secs: t0.elapsed().as_secs_f64(),
            module_secs: p.module.busy_secs() - b0,
            bytes_sent: dc.bytes_sent,
            bytes_recv: dc.bytes_recv,
            rounds: dc.rounds,
            module_crossings: dm.crossings,
            module_bytes: dm.bytes_to_module + dm.bytes_from_module,
            macs,
        });
        if let Some(g) = &p.guard {
            g.check(&format!("layer '{}' ({} of {total})", st.name, si + 1))?;
        }
        progress(si + 1, total);
    }
    // whatever was pre-dealt for this run and not used is dropped
    p.pre.clear();
    p.nl.clear_predealt();
    let out = vals[plan.output].take().ok_or_else(|| Error::Protocol("output freed".into()))?;
    Ok((out, costs))
}
