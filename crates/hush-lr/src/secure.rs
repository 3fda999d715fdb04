//! The two-party training protocol (see the crate docs for the steps).
//!
//! Messages per mini-batch of b samples, d_L + d_F features (both flights
//! of a step go at once, so each step is one round):
//! * forward: Enc(share of the peer's weights) (d_peer ciphertexts each
//!   way), then ⌈b / slots⌉ packed ciphertexts each way;
//! * sigmoid (cubic): two Beaver openings of 2·b words each;
//! * backward: Enc(share of e) (b ciphertexts each way), then
//!   ⌈d / slots⌉ packed ciphertexts each way;
//! * triples: generated per epoch (2·n of them in flights of [`TRIPLE_CHUNK`], the labels party holds the
//!   key), 2 rounds per flight.
//!
//! With `low_bandwidth` the forward pass sends ⌈d_peer / K⌉ slot-packed
//! ciphertexts each way and gets one product per row back
//! (`hush_paillier::packed`, whose docs give the construction and what
//! each host sees), and the backward pass sends c·b shifted copies and gets
//! ⌈d / c⌉ packed gradients back with the caps c of `balanced_caps`.

use crate::{batches, Error, Result, Sigmoid, TrainConfig, FRAC, XBITS};
use hush_paillier::packed::{self, PackedVec};
use hush_paillier::proto::{self, Triples};
use hush_paillier::sparse::Csr;
use hush_paillier::{KeyPair, PublicKey};
use hush_transport::{Channel, ChannelExt};
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::time::Instant;

/// Which data a party holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Holds labels (and some features); party 0 of the sharing.
    Labels,
    /// Holds features only; party 1.
    Features,
}

impl Role {
    pub fn parse(s: &str) -> Result<Role> {
        match s {
            "labels" => Ok(Role::Labels),
            "features" => Ok(Role::Features),
            _ => Err(Error::Config(format!("--role {s:?} (labels or features)"))),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Role::Labels => "labels",
            Role::Features => "features",
        }
    }
}

/// A party's shares of the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelShares {
    pub role: Role,
    /// Share of the weights of this party's own features.
    pub own: Vec<u64>,
    /// Share of the weights of the peer's features.
    pub peer: Vec<u64>,
    /// The last of `own` is the intercept (a constant-1 column the labels
    /// party appends to its rows); recorded so `hush predict` adds it too.
    pub intercept: bool,
}

impl Drop for ModelShares {
    fn drop(&mut self) {
        // shares are secrets: wipe them (volatile writes, not elided)
        for v in self.own.iter_mut().chain(self.peer.iter_mut()) {
            unsafe { std::ptr::write_volatile(v, 0) };
        }
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    }
}

/// Costs and timings of a run.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub wall_s: f64,
    pub setup_s: f64,
    pub triple_s: f64,
    pub epoch_s: Vec<f64>,
    pub bytes: u64,
    pub rounds: u32,
    /// Payload bytes the labels party sent (labels → features) and
    /// received (features → labels) in training; set by the in-process
    /// runners of `hush bench lr`.
    pub bytes_from_labels: u64,
    pub bytes_to_labels: u64,
}

fn fx(v: f64) -> u64 {
    (v * (1u64 << FRAC) as f64).round() as i64 as u64
}

/// Decodes a fixed-point ring element.
pub fn unfx(v: u64) -> f64 {
    v as i64 as f64 / (1u64 << FRAC) as f64
}

/// SecureML local truncation by `f` bits.
fn trunc(x: u64, p0: bool, f: u32) -> u64 {
    if p0 {
        ((x as i64) >> f) as u64
    } else {
        (((x.wrapping_neg()) as i64) >> f).wrapping_neg() as u64
    }
}

fn bits_of(d: usize) -> u32 {
    64 - (d.max(1) as u64).leading_zeros()
}

/// Backward passes send the error share pre-shifted into every h2s slot
/// when the evaluator's features number at least this many times the
/// batch (see `Session::backward`; break-even ≈ 3.4 at 2,048 bits).
const SHIFT_RATIO: usize = 4;

/// Whether a backward pass whose evaluator has `d_eval` features in a
/// batch of `b` rows uses the shifted copies (public sizes only).
pub(crate) fn shifted(d_eval: usize, b: usize) -> bool {
    d_eval >= SHIFT_RATIO * b
}

/// Shares per packed ciphertext in the low-bandwidth forward pass (at most;
/// [`PackedVec::new`] lowers it for small keys). At 2,048 bits a key fits
/// 10 for SHAPER's shapes; 6 keeps the evaluator's added squarings
/// ((K−1)·S per eight rows) near the bytes they save on a 40 Mbps link.
pub(crate) const PACK_K: usize = 6;

/// The low-bandwidth backward pass's caps (c_L, c_F): slots per packed
/// gradient ciphertext for the labels party's d_l features and for the
/// features party's d_f, from public sizes only, so both parties compute
/// the same. The backward pass's ciphertexts per direction (b rows):
/// labels → features c_F·b shifted error copies + ⌈d_l/c_L⌉ packed
/// gradients, features → labels c_L·b + ⌈d_f/c_F⌉; the caps minimise the
/// larger of the two (then the sum, then the caps). The forward pass and
/// the triples have their own flights and do not enter.
pub(crate) fn balanced_caps(d_l: usize, d_f: usize, b: usize, slots_max: usize) -> (usize, usize) {
    let mut best = (usize::MAX, usize::MAX, 1, 1);
    for c_l in 1..=slots_max.min(d_l).max(1) {
        for c_f in 1..=slots_max.min(d_f).max(1) {
            let lf = c_f * b + d_l.div_ceil(c_l);
            let fl = c_l * b + d_f.div_ceil(c_f);
            let cand = (lf.max(fl), lf + fl, c_l, c_f);
            if cand < best {
                best = cand;
            }
        }
    }
    (best.2, best.3)
}

/// Public bound on |row · share| for rows of at most `nnz` entries.
fn value_bits(nnz: usize) -> u32 {
    64 + XBITS + bits_of(nnz)
}

fn words(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn exchange<C: Channel + ?Sized>(ch: &mut C, v: &[u64], what: &'static str) -> Result<Vec<u64>> {
    ch.send_chunked(&words(v))?;
    let mut b = vec![0u8; v.len() * 8];
    ch.recv_chunked_into(what, &mut b)?;
    Ok(b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect())
}

/// One session: keys, the peer's key, the party's data.
pub struct Session<'a, C: Channel + ?Sized> {
    ch: &'a mut C,
    role: Role,
    kp: KeyPair,
    peer: PublicKey,
    d_peer: usize,
    n: usize,
    cfg: TrainConfig,
    rng: StdRng,
    randomness: Randomness,
    pub setup_s: f64,
}

/// Where a session's random values (Paillier keys, h2s masks, triples,
/// encryption randomness) come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Randomness {
    /// The operating system's generator: the only choice for real use.
    Os,
    /// **Insecure, for reproducibility tests only**: every random value is
    /// derived from `seed` (a 64-bit value anyone can search), this party's
    /// role and `worker`, and reseeded at the start of every epoch from
    /// (seed, role, worker, epoch). Two runs with the same seeds, data and
    /// model shares at an epoch's start produce bit-identical shares for
    /// that epoch, which is what the tests of checkpoint/resume and of
    /// sharding rely on. A peer that learns or guesses the seed learns this
    /// party's masks and with them the shares it holds: never exposed on
    /// the command line.
    InsecureTestSeed { seed: u64, worker: u32 },
}

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Randomness {
    /// The generator for `tag` (0: keys, 1 + e: epoch e).
    fn rng(self, role: Role, tag: u64) -> StdRng {
        match self {
            Randomness::Os => StdRng::from_entropy(),
            Randomness::InsecureTestSeed { seed, worker } => {
                let mut st = seed ^ ((role as u64) << 62) ^ ((worker as u64) << 40) ^ tag.wrapping_mul(0xd6e8_feb8_6659_fd93);
                let mut k = [0u8; 32];
                for c in k.chunks_exact_mut(8) {
                    c.copy_from_slice(&splitmix(&mut st).to_le_bytes());
                }
                StdRng::from_seed(k)
            }
        }
    }
}

/// Beaver triples per flight of an epoch's up-front generation (2^15:
/// about a second of the owner's encryptions per flight).
pub const TRIPLE_CHUNK: usize = 1 << 15;

/// What an epoch of batches shares: the Beaver triples of the cubic
/// sigmoid made up front (default mode) and where the next batch's start.
#[derive(Default)]
pub struct EpochState {
    epoch: u32,
    triples: Triples,
    off: usize,
}

/// θ ← θ − η·(g/b + λθ) on one party's shares of one block, with
/// SecureML's local truncation: what [`Session::train`] applies after each
/// batch, and what the driver of a sharded training ([`crate::shard`])
/// applies to the gradient shares its workers summed. `g` is the raw
/// gradient share Σ_rows x·e (scale 2^(2·FRAC)), `b` the batch's size.
pub fn apply_gradient(role: Role, cfg: &TrainConfig, theta: &mut [u64], g: &[u64], b: usize, epoch: u32) {
    let p0 = role == Role::Labels;
    let eta = cfg.lr_at(epoch);
    let k = fx(eta / b as f64);
    let k2 = fx(eta * cfg.l2);
    for (t, &g) in theta.iter_mut().zip(g) {
        let g = trunc(g, p0, FRAC);
        let mut step = trunc(g.wrapping_mul(k), p0, FRAC);
        if k2 != 0 {
            step = step.wrapping_add(trunc(t.wrapping_mul(k2), p0, FRAC));
        }
        *t = t.wrapping_sub(step);
    }
}

const MAGIC: &[u8; 8] = b"hushLR04";

impl<'a, C: Channel + ?Sized> Session<'a, C> {
    /// Handshake: checks roles, sample counts and hyper-parameters agree,
    /// exchanges feature counts and Paillier public keys.
    pub fn start(ch: &'a mut C, role: Role, n: usize, d_own: usize, cfg: &TrainConfig) -> Result<Self> {
        Self::start_with(ch, role, n, d_own, cfg, Randomness::Os)
    }

    /// [`Self::start`] with the randomness given (see [`Randomness`]).
    pub fn start_with(ch: &'a mut C, role: Role, n: usize, d_own: usize, cfg: &TrainConfig, randomness: Randomness) -> Result<Self> {
        let t0 = Instant::now();
        let mut rng = randomness.rng(role, 0);
        let mut hello = Vec::new();
        hello.extend_from_slice(MAGIC);
        hello.push(role as u8);
        for v in [n as u64, d_own as u64, cfg.epochs as u64, cfg.batch as u64, cfg.key_bits as u64, cfg.order_seed] {
            hello.extend_from_slice(&v.to_le_bytes());
        }
        hello.extend_from_slice(&cfg.lr.to_bits().to_le_bytes());
        hello.extend_from_slice(&cfg.l2.to_bits().to_le_bytes());
        hello.extend_from_slice(&cfg.lr_decay.to_bits().to_le_bytes());
        hello.push(cfg.low_bandwidth as u8);
        hello.push(cfg.reveal as u8);
        hello.push(cfg.sigmoid as u8);
        ch.send(&hello)?;
        let peer_hello = ch.recv()?;
        if peer_hello.len() != hello.len() || &peer_hello[..8] != MAGIC {
            return Err(Error::Peer("the peer does not run `hush train` of this version (unexpected greeting)".into()));
        }
        let u = |i: usize| u64::from_le_bytes(peer_hello[9 + 8 * i..17 + 8 * i].try_into().unwrap());
        if peer_hello[8] == role as u8 {
            return Err(Error::Peer(format!("both parties have --role {}", role.name())));
        }
        if u(0) != n as u64 {
            return Err(Error::Peer(format!("sample counts differ: {n} here, {} at the peer", u(0))));
        }
        let d_peer = u(1) as usize;
        if d_peer > crate::data::MAX_COLS {
            return Err(Error::Peer(format!("peer claims {d_peer} features")));
        }
        let mine: Vec<u64> = (2..9).map(|i| u64::from_le_bytes(hello[9 + 8 * i..17 + 8 * i].try_into().unwrap())).collect();
        let theirs: Vec<u64> = (2..9).map(u).collect();
        if peer_hello[hello.len() - 2] != hello[hello.len() - 2] {
            return Err(Error::Peer(format!(
                "{} asked to reveal the model at the end and the other did not (--reveal must be given to both or neither)",
                if cfg.reveal { "this party" } else { "the peer" }
            )));
        }
        if peer_hello[hello.len() - 3] != hello[hello.len() - 3] {
            return Err(Error::Peer("--low-bandwidth is set at one party only (both or neither)".into()));
        }
        if mine != theirs || peer_hello[hello.len() - 1] != hello[hello.len() - 1] {
            return Err(Error::Peer(
                "hyper-parameters differ between the parties (epochs, batch, bits, seed, lr, lr-decay, l2 and sigmoid must agree)"
                    .into(),
            ));
        }
        let kp = KeyPair::generate(cfg.key_bits, &mut rng)?;
        let peer = proto::exchange_keys(ch, &kp, 8)?;
        if peer.bits() != cfg.key_bits {
            return Err(Error::Peer(format!("peer key has {} bits, expected {}", peer.bits(), cfg.key_bits)));
        }
        Ok(Session { ch, role, kp, peer, d_peer, n, cfg: cfg.clone(), rng, randomness, setup_s: t0.elapsed().as_secs_f64() })
    }

    /// The peer's feature count (from the handshake).
    pub fn peer_features(&self) -> usize {
        self.d_peer
    }

    /// Bytes and rounds on the channel so far.
    pub fn cost(&self) -> hush_transport::Cost {
        self.ch.cost()
    }

    fn p0(&self) -> bool {
        self.role == Role::Labels
    }

    /// Triples for `count` multiplications (the labels party owns the key).
    fn triples(&mut self, count: usize) -> Result<Triples> {
        Ok(match self.role {
            Role::Labels => proto::triples_owner(self.ch, &self.kp, count, &mut self.rng)?,
            Role::Features => proto::triples_helper(self.ch, &self.peer, count, &mut self.rng)?,
        })
    }

    /// Shares of X_batch·θ (scale 2^FRAC) for both blocks.
    fn forward(&mut self, xb: &Csr, m: &ModelShares) -> Result<Vec<u64>> {
        Ok(self.forward_with_triples(xb, m, 0)?.0)
    }

    /// [`Self::forward`], and in the low-bandwidth mode also `triples`
    /// Beaver triples made in the same flights, with the features party as
    /// the triples' key owner (its triple ciphertexts go with its packed
    /// shares, the labels party's answers with its products: the triples'
    /// bytes go the forward pass's lighter way instead of taking a phase
    /// of their own).
    fn forward_with_triples(&mut self, xb: &Csr, m: &ModelShares, triples: usize) -> Result<(Vec<u64>, Triples)> {
        let b = xb.rows;
        let local = xb.matvec_ring(&m.own);
        if self.cfg.low_bandwidth {
            // each party's share of the peer's weights goes K to a
            // ciphertext (hush_paillier::packed: the peer shifts each slot
            // into place and both extract the sum from integer shares)
            let mine = PackedVec::new(self.d_peer, XBITS, self.kp.public().bits(), PACK_K)?;
            let theirs = PackedVec::new(xb.cols, XBITS, self.peer.bits(), PACK_K)?;
            packed::send_packed(self.ch, &self.kp, &m.peer, mine, &mut self.rng)?;
            // the features party owns these triples' key: its direction
            // carries less in the forward pass (the labels party's packed
            // shares of the wider block go the other way)
            let pending = if triples > 0 && !self.p0() {
                Some(proto::triples_owner_send(self.ch, &self.kp, triples, &mut self.rng)?)
            } else {
                None
            };
            let peer = self.peer.clone();
            let ev = packed::matvec_packed_eval(self.ch, &peer, xb, theirs, &mut self.rng)?;
            let mut t = if triples > 0 && self.p0() {
                proto::triples_helper(self.ch, &peer, triples, &mut self.rng)?
            } else {
                Triples::default()
            };
            let ow = packed::recv_products(self.ch, &self.kp, b, mine)?;
            if let Some(p) = pending {
                t = proto::triples_owner_finish(self.ch, &self.kp, p)?;
            }
            let p0 = self.p0();
            let z = (0..b).map(|i| trunc(local[i].wrapping_add(ev[i]).wrapping_add(ow[i]), p0, FRAC)).collect();
            return Ok((z, t));
        }
        if triples > 0 {
            return Err(Error::Config("triples within the forward pass are the low-bandwidth mode's".into()));
        }
        proto::s2h_owner(self.ch, &self.kp, &m.peer, &mut self.rng)?;
        let cts = proto::recv_cts(self.ch, &self.peer, xb.cols, "encrypted model share")?;
        let peer = self.peer.clone();
        let mut f = hush_paillier::sparse::row_enc_stream(xb, &peer, &cts);
        let ev = proto::h2s_eval_with(self.ch, &peer, b, value_bits(xb.cols), &mut self.rng, |r| Ok(f(r)))?;
        let ow = proto::h2s_owner(self.ch, &self.kp, b, value_bits(self.d_peer))?;
        let p0 = self.p0();
        Ok(((0..b).map(|i| trunc(local[i].wrapping_add(ev[i]).wrapping_add(ow[i]), p0, FRAC)).collect(), Triples::default()))
    }

    fn beaver(&mut self, x: &[u64], y: &[u64], t: &Triples, off: usize) -> Result<Vec<u64>> {
        let k = x.len();
        let mut de = Vec::with_capacity(2 * k);
        for i in 0..k {
            de.push(x[i].wrapping_sub(t.a[off + i]));
            de.push(y[i].wrapping_sub(t.b[off + i]));
        }
        let pe = exchange(self.ch, &de, "beaver openings")?;
        let p0 = self.p0();
        Ok((0..k)
            .map(|i| {
                let d = de[2 * i].wrapping_add(pe[2 * i]);
                let e = de[2 * i + 1].wrapping_add(pe[2 * i + 1]);
                let mut z = t.c[off + i].wrapping_add(d.wrapping_mul(t.b[off + i])).wrapping_add(e.wrapping_mul(t.a[off + i]));
                if p0 {
                    z = z.wrapping_add(d.wrapping_mul(e));
                }
                trunc(z, p0, FRAC)
            })
            .collect())
    }

    fn sigmoid(&mut self, z: &[u64], t: &Triples, off: usize) -> Result<Vec<u64>> {
        let p0 = self.p0();
        let half = if p0 { fx(0.5) } else { 0 };
        match self.cfg.sigmoid {
            Sigmoid::Linear => Ok(z.iter().map(|&v| trunc(v, p0, 2).wrapping_add(half)).collect()),
            Sigmoid::Cubic => {
                let w = self.beaver(z, z, t, off)?;
                let c1 = if p0 { fx(0.197) } else { 0 };
                let c3 = fx(0.004);
                let u: Vec<u64> = w.iter().map(|&v| c1.wrapping_sub(trunc(v.wrapping_mul(c3), p0, FRAC))).collect();
                let y = self.beaver(z, &u, t, off + z.len())?;
                Ok(y.into_iter().map(|v| v.wrapping_add(half)).collect())
            }
        }
    }

    /// Shares of Xᵀe for both blocks: (own-feature gradient, peer-feature gradient).
    ///
    /// Each party's d gradients come back through h2s packed `slots` to a
    /// ciphertext. Where d is large next to the batch (d ≥ [`SHIFT_RATIO`]·b,
    /// the wide-data case), the owner of the error share sends it already
    /// shifted into every slot ([`proto::s2h_owner_shifted`]) and the
    /// evaluator computes each packed ciphertext as one product over the
    /// grouped rows ([`Csr::grouped`]): (slots − 1)·b more encryptions at
    /// the owner instead of (slots − 1)·slot_bits squarings per packed
    /// ciphertext at the evaluator (SHAPER's 1M × 100k case: 57k
    /// encryptions instead of 8.8M 4,096-bit squarings per batch). Same
    /// h2s messages and masks; the decision uses public sizes only.
    fn backward(&mut self, xb: &Csr, e: &[u64]) -> Result<(Vec<u64>, Vec<u64>)> {
        let xt = xb.transpose();
        let b = xb.rows;
        let local = xt.matvec_ring(e);
        if self.cfg.low_bandwidth {
            return self.backward_balanced(&xt, e, local);
        }
        // my ciphertexts, evaluated by the peer on its d_peer features
        let wide = !self.cfg.low_bandwidth;
        let mine_shifted = wide && shifted(self.d_peer, b);
        let copies = proto::h2s_packing(self.kp.public(), value_bits(b))?.slots.min(self.d_peer).max(1);
        if mine_shifted {
            let sb = proto::h2s_packing(self.kp.public(), value_bits(b))?.slot_bits;
            proto::s2h_owner_shifted(self.ch, &self.kp, e, copies, sb, &mut self.rng)?;
        } else {
            proto::s2h_owner(self.ch, &self.kp, e, &mut self.rng)?;
        }
        // the peer's ciphertexts, evaluated here on my features
        let peer = self.peer.clone();
        let ev = if wide && shifted(xt.rows, b) {
            let pack = proto::h2s_packing(&peer, value_bits(b))?;
            let slots = pack.slots.min(xt.rows).max(1);
            let cts = proto::recv_cts(self.ch, &peer, b * slots, "encrypted error share (shifted copies)")?;
            let grouped = xt.grouped(slots);
            let mut f = hush_paillier::sparse::row_enc_stream(&grouped, &peer, &cts);
            proto::h2s_eval_packed_with(self.ch, &peer, xt.rows, value_bits(b), &mut self.rng, |g| Ok(f(g)))?
        } else {
            let cts = proto::recv_cts(self.ch, &peer, b, "encrypted error share")?;
            let mut f = hush_paillier::sparse::row_enc_stream(&xt, &peer, &cts);
            proto::h2s_eval_with(self.ch, &peer, xt.rows, value_bits(b), &mut self.rng, |r| Ok(f(r)))?
        };
        let ow = proto::h2s_owner(self.ch, &self.kp, self.d_peer, value_bits(b))?;
        let g_own = (0..xt.rows).map(|j| local[j].wrapping_add(ev[j])).collect();
        Ok((g_own, ow))
    }

    /// The low-bandwidth backward pass: the error shares go as shifted
    /// copies (no squarings, as in the wide case above), but with the
    /// number of slots per packed gradient ciphertext capped on each side
    /// ([`balanced_caps`]) so that neither direction carries much more than
    /// the other: c copies of the error share one way (c·b ciphertexts),
    /// ⌈d/c⌉ packed gradients back. Same h2s masks and views as the wide
    /// case (the caps are public, computed from public sizes).
    fn backward_balanced(&mut self, xt: &Csr, e: &[u64], local: Vec<u64>) -> Result<(Vec<u64>, Vec<u64>)> {
        let b = e.len();
        let (d_own, d_peer) = (xt.rows, self.d_peer);
        let (d_l, d_f) = if self.p0() { (d_own, d_peer) } else { (d_peer, d_own) };
        let slots_max = proto::h2s_packing(self.kp.public(), value_bits(b))?.slots.min(proto::h2s_packing(&self.peer, value_bits(b))?.slots);
        let (c_l, c_f) = balanced_caps(d_l, d_f, b, slots_max);
        let (c_mine, c_peer) = if self.p0() { (c_f, c_l) } else { (c_l, c_f) };
        // mine: the peer evaluates its d_peer features on my copies
        let my_pack = proto::h2s_packing(self.kp.public(), value_bits(b))?.capped(c_mine);
        proto::s2h_owner_shifted(self.ch, &self.kp, e, my_pack.slots, my_pack.slot_bits, &mut self.rng)?;
        // the peer's copies, evaluated here on my features
        let peer = self.peer.clone();
        let pack = proto::h2s_packing(&peer, value_bits(b))?.capped(c_peer);
        let cts = proto::recv_cts(self.ch, &peer, b * pack.slots, "encrypted error share (shifted copies)")?;
        let grouped = xt.grouped(pack.slots);
        let mut f = hush_paillier::sparse::row_enc_stream(&grouped, &peer, &cts);
        let ev = proto::h2s_eval_packed_pack(self.ch, &peer, d_own, pack, 0, &mut self.rng, |g| Ok(f(g)))?;
        let ow = proto::h2s_owner_pack(self.ch, &self.kp, d_peer, my_pack, 0)?;
        let g_own = (0..d_own).map(|j| local[j].wrapping_add(ev[j])).collect();
        Ok((g_own, ow))
    }

    /// The session's role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The session's sample count (from the handshake).
    pub fn samples(&self) -> usize {
        self.n
    }

    /// Starts epoch `epoch` of which this session will process `rows`
    /// rows: reseeds a seeded session ([`Randomness::InsecureTestSeed`])
    /// and, for the cubic sigmoid in the default mode, makes the epoch's
    /// 2·rows Beaver triples up front (the low-bandwidth mode makes each
    /// batch's within its forward pass).
    pub fn begin_epoch(&mut self, epoch: u32, rows: usize) -> Result<EpochState> {
        if self.randomness != Randomness::Os {
            self.rng = self.randomness.rng(self.role, 1 + epoch as u64);
        }
        let cubic = self.cfg.sigmoid == Sigmoid::Cubic;
        let mut triples = Triples::default();
        if cubic && !self.cfg.low_bandwidth {
            // in chunks, so that the helper hears from the owner every few
            // seconds however large the epoch (one flight of 2·10^6 triples
            // kept a 1M-sample epoch's peer silent past the link's timeout)
            let mut left = 2 * rows;
            while left > 0 {
                let n = left.min(TRIPLE_CHUNK);
                let t = self.triples(n)?;
                triples.a.extend_from_slice(&t.a);
                triples.b.extend_from_slice(&t.b);
                triples.c.extend_from_slice(&t.c);
                left -= n;
            }
        }
        Ok(EpochState { epoch, triples, off: 0 })
    }

    /// One batch's gradient shares (own block, peer block), untruncated
    /// (scale 2^(2·FRAC)): forward, sigmoid, error, backward. `xb` holds
    /// the batch's rows of this party's fixed-point data, `y` their labels
    /// at the labels party. [`apply_gradient`] turns them into the update.
    pub fn batch_gradient(&mut self, xb: &Csr, y: Option<&[f64]>, m: &ModelShares, st: &mut EpochState) -> Result<(Vec<u64>, Vec<u64>)> {
        if (self.role == Role::Labels) != y.is_some() || y.is_some_and(|y| y.len() != xb.rows) {
            return Err(Error::Config("labels must be given to the labels party only, one per batch row".into()));
        }
        if m.own.len() != xb.cols || m.peer.len() != self.d_peer {
            return Err(Error::Config(format!(
                "model shares cover {} + {} features, the data {} and the peer {}",
                m.own.len(),
                m.peer.len(),
                xb.cols,
                self.d_peer
            )));
        }
        let b = xb.rows;
        let per_batch = self.cfg.sigmoid == Sigmoid::Cubic && self.cfg.low_bandwidth;
        let (z, t_batch) = self.forward_with_triples(xb, m, if per_batch { 2 * b } else { 0 })?;
        if !per_batch && self.cfg.sigmoid == Sigmoid::Cubic && st.triples.a.len() < st.off + 2 * b {
            return Err(Error::Config("the epoch's triples are used up (more rows than begin_epoch was told)".into()));
        }
        let (t, o) = if per_batch { (&t_batch, 0) } else { (&st.triples, st.off) };
        let mut e = self.sigmoid(&z, t, o)?;
        st.off += 2 * b;
        if let Some(y) = y {
            for (k, &yk) in y.iter().enumerate() {
                e[k] = e[k].wrapping_sub(fx(yk));
            }
        }
        self.backward(xb, &e)
    }

    /// Trains from zero shares; `x` is this party's fixed-point data,
    /// `labels` (0/1) only at the labels party.
    pub fn train(&mut self, x: &Csr, labels: Option<&[f64]>, report: &mut Report) -> Result<ModelShares> {
        if x.rows != self.n {
            return Err(Error::Data(format!("{} rows, handshake said {}", x.rows, self.n)));
        }
        if (self.role == Role::Labels) != labels.is_some() {
            return Err(Error::Config("labels must be given to the labels party only".into()));
        }
        let mut m = ModelShares { role: self.role, own: vec![0; x.cols], peer: vec![0; self.d_peer], intercept: false };
        for ep in 0..self.cfg.epochs {
            let te = Instant::now();
            let mut st = self.begin_epoch(ep, self.n)?;
            report.triple_s += te.elapsed().as_secs_f64();
            for batch in batches(self.n, self.cfg.batch as usize, ep, self.cfg.order_seed) {
                let xb = x.select_rows(&batch);
                let yb: Option<Vec<f64>> = labels.map(|y| batch.iter().map(|&i| y[i]).collect());
                let (g_own, g_peer) = self.batch_gradient(&xb, yb.as_deref(), &m, &mut st)?;
                apply_gradient(self.role, &self.cfg, &mut m.own, &g_own, batch.len(), ep);
                apply_gradient(self.role, &self.cfg, &mut m.peer, &g_peer, batch.len(), ep);
            }
            debug_assert_eq!(st.epoch, ep);
            report.epoch_s.push(te.elapsed().as_secs_f64());
        }
        Ok(m)
    }

    /// Opens the model with the peer ([`reveal`] on this session's link).
    pub fn reveal(&mut self, m: &ModelShares) -> Result<Opened> {
        reveal(self.ch, m)
    }

    /// Shares of z = X·θ for prediction rows, opened to the labels party
    /// (which gets Some(z)); the model stays shared.
    pub fn predict(&mut self, x: &Csr, m: &ModelShares) -> Result<Option<Vec<f64>>> {
        let z = self.forward(x, m)?;
        match self.role {
            Role::Features => {
                self.ch.send_chunked(&words(&z))?;
                Ok(None)
            }
            Role::Labels => {
                let mut b = vec![0u8; z.len() * 8];
                self.ch.recv_chunked_into("prediction shares", &mut b)?;
                Ok(Some(
                    b.chunks_exact(8)
                        .zip(&z)
                        .map(|(c, &s)| unfx(u64::from_le_bytes(c.try_into().unwrap()).wrapping_add(s)))
                        .collect(),
                ))
            }
        }
    }
}

/// The opened model.
#[derive(Clone, Debug, PartialEq)]
pub struct Opened {
    /// Weights of the labels party's columns (its intercept last, if any).
    pub labels: Vec<f64>,
    /// Weights of the features party's columns.
    pub features: Vec<f64>,
    /// Whether the labels party's last weight is an intercept.
    pub intercept: bool,
}

/// Opens the model to both parties (with the labels party's intercept
/// flag, so either can score whole rows alone).
pub fn reveal<C: Channel + ?Sized>(ch: &mut C, m: &ModelShares) -> Result<Opened> {
    let mut mine = m.own.clone();
    mine.extend_from_slice(&m.peer);
    mine.push(u64::from(m.intercept));
    let theirs = exchange(ch, &mine, "model shares")?;
    for v in mine.iter_mut() {
        unsafe { std::ptr::write_volatile(v, 0) };
    }
    let (d_own, d_peer) = (m.own.len(), m.peer.len());
    let flag = theirs[d_own + d_peer];
    if flag > 1 || (flag == 1 && m.role == Role::Labels) || (m.intercept && m.role != Role::Labels) {
        return Err(Error::Peer("the peer's intercept flag does not fit the roles".into()));
    }
    let own: Vec<f64> = (0..d_own).map(|j| unfx(m.own[j].wrapping_add(theirs[d_peer + j]))).collect();
    let peer: Vec<f64> = (0..d_peer).map(|j| unfx(m.peer[j].wrapping_add(theirs[j]))).collect();
    let intercept = m.intercept || flag == 1;
    Ok(match m.role {
        Role::Labels => Opened { labels: own, features: peer, intercept },
        Role::Features => Opened { labels: peer, features: own, intercept },
    })
}

/// Writes the model shares (and the opened model, if any) as JSON,
/// atomically (temporary file in the same folder, fsync, rename).
pub fn save_model(path: &std::path::Path, m: &ModelShares, opened: Option<&Opened>) -> Result<()> {
    let mut o = serde_json::Map::new();
    o.insert("format".into(), "hush-lr-shares-v1".into());
    o.insert("role".into(), m.role.name().into());
    o.insert("frac_bits".into(), FRAC.into());
    o.insert("intercept".into(), m.intercept.into());
    o.insert("own_share".into(), m.own.iter().map(|v| v.to_string()).collect::<Vec<_>>().into());
    o.insert("peer_share".into(), m.peer.iter().map(|v| v.to_string()).collect::<Vec<_>>().into());
    if let Some(op) = opened {
        o.insert("weights_labels_party".into(), op.labels.clone().into());
        o.insert("weights_features_party".into(), op.features.clone().into());
        o.insert("intercept_labels_party".into(), op.intercept.into());
    }
    let text = serde_json::Value::Object(o).to_string();
    write_atomic(path, text.as_bytes())
}

/// Writes a file atomically: a temporary file in the same folder, fsync,
/// rename (a reader sees the old file or the whole new one).
pub fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    let tmp = dir.join(format!(".{}.tmp{}", path.file_name().and_then(|s| s.to_str()).unwrap_or("out"), std::process::id()));
    let res = (|| -> Result<()> {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

/// Largest model file accepted (bytes).
pub const MAX_MODEL_FILE: u64 = 1 << 32;

fn read_model_json(path: &std::path::Path) -> Result<serde_json::Value> {
    let bad = |m: &str| Error::Data(format!("{}: {m}", path.display()));
    let meta = std::fs::metadata(path).map_err(|e| bad(&e.to_string()))?;
    if meta.len() > MAX_MODEL_FILE {
        return Err(bad(&format!("{} bytes exceeds the limit", meta.len())));
    }
    let text = std::fs::read_to_string(path).map_err(|e| bad(&e.to_string()))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(&e.to_string()))?;
    if v["format"] != "hush-lr-shares-v1" {
        return Err(bad("not a hush-lr model file"));
    }
    if v["frac_bits"].as_u64() != Some(FRAC as u64) {
        return Err(bad(&format!("frac_bits is not {FRAC}")));
    }
    Ok(v)
}

/// Reads model shares written by [`save_model`].
pub fn load_model(path: &std::path::Path) -> Result<ModelShares> {
    let bad = |m: &str| Error::Data(format!("{}: {m}", path.display()));
    let v = read_model_json(path)?;
    let role = Role::parse(v["role"].as_str().unwrap_or("")).map_err(|_| bad("role is not labels or features"))?;
    let arr = |k: &str| -> Result<Vec<u64>> {
        v[k].as_array()
            .ok_or_else(|| bad(&format!("missing {k}")))?
            .iter()
            .map(|x| x.as_str().and_then(|s| s.parse().ok()).ok_or_else(|| bad(&format!("bad entry in {k}"))))
            .collect()
    };
    let intercept = v["intercept"].as_bool().unwrap_or(false);
    let m = ModelShares { role, own: arr("own_share")?, peer: arr("peer_share")?, intercept };
    if intercept && (role != Role::Labels || m.own.is_empty()) {
        return Err(bad("intercept recorded at a party without one"));
    }
    Ok(m)
}

/// The opened model stored by [`save_model`] when both parties chose to
/// reveal; `None` if the file holds shares only.
pub fn load_opened(path: &std::path::Path) -> Result<Option<Opened>> {
    let v = read_model_json(path)?;
    let arr = |k: &str| -> Option<Option<Vec<f64>>> {
        v.get(k).map(|a| a.as_array().and_then(|a| a.iter().map(|x| x.as_f64()).collect()))
    };
    match (arr("weights_labels_party"), arr("weights_features_party")) {
        (None, None) => Ok(None),
        (Some(Some(labels)), Some(Some(features))) => {
            let intercept = v["intercept_labels_party"].as_bool().unwrap_or(false);
            if intercept && labels.is_empty() {
                return Err(Error::Data(format!("{}: intercept without a weight", path.display())));
            }
            Ok(Some(Opened { labels, features, intercept }))
        }
        _ => Err(Error::Data(format!("{}: malformed opened weights", path.display()))),
    }
}
