//! [`Ctx`]: the few two-party primitives every transformer operator is
//! written against, and where their correlations come from.
//!
//! Primitives (each one communication round unless noted):
//! * [`Ctx::relu`] — ReLU in the session's comparison family (`tami`:
//!   [`crate::tami`], re-share plus its flights; `fss`: one round);
//! * [`Ctx::relu_chain`] — ReLUs whose inputs depend on the previous
//!   outputs (a max tree): in `tami`, each re-share rides on the previous
//!   comparison's last flight, the hosts alternating roles;
//! * [`Ctx::trunc`] — faithful truncation of **bounded** values from a
//!   dealt truncation pair ([`crate::deal::trunc`]): one opening;
//! * [`Ctx::mul`] — Beaver's element-wise product ([`crate::beaver::mul`]);
//! * [`Ctx::powers`] — x, x², …, x^K in one opening (TAMI's one-round
//!   product, [`crate::deal::powers`]) or, with `one_round = false`, by
//!   ⌈log2 K⌉ rounds of Beaver products (the same values, exact in the ring);
//! * [`Ctx::product`] — x_1·…·x_d (d ≤ 4 distinct factors) in one opening
//!   from dealt subset products ([`crate::deal::subset`], TAMI eqs. 1-3);
//! * [`Ctx::matmul`] — products of secret matrices from dealt matrix triples
//!   ([`crate::deal::matrix`]): one opening.
//!
//! **Modes.** The same operator code runs four ways (swanky's
//! "one circuit description, many backends"):
//! * *lazy*: each primitive deals its correlation when called (a module
//!   crossing or a dealer request; no communication with the peer);
//! * *plan*: nothing is computed or sent; each primitive records what it
//!   would consume ([`Need`]) and returns zeros — the offline plan of an
//!   operator is derived from the operator itself, so it cannot drift;
//! * *prefilled*: [`Ctx::prefill`] dealt the plan beforehand (the offline
//!   phase); each primitive takes the next dealt item and checks it is what
//!   it needs (a mismatch is an error, never a silent reuse);
//! * *clear*: the plaintext fixed-point reference — one party holding the
//!   whole value, each primitive computed in the clear with exact floor
//!   truncation. Tests compare the secure run against it.
//!
//! Correlations come through [`crate::tee::Dealer`], so the same code runs
//! on an in-process trusted module (`tee`), the module process, or the
//! dealer service (`dealer`), and never knows which — or, in a context made
//! by [`Ctx::new_interactive`], from the **interactive provider**
//! ([`crate::interactive`]: the parties make each correlation over COTs,
//! comparisons by CrypTFlow2's `cf2`; no module and no dealer exist in such
//! a context). Dealing then talks to the peer, so [`Ctx::prefill_on`] and
//! [`Ctx::deal_plan_on`] take the channel ([`Ctx::prefill`] and
//! [`Ctx::deal_plan`] refuse with [`NEEDS_CHANNEL`]). [`Ctx::new`] still
//! refuses `cf2` ([`NOT_INTERACTIVE`]): a dealt context has no OT session.
//!
//! **Truncation and its range (deviation from the repo's full-range
//! truncation, argued here).** `crate::nonlinear::Session::trunc` truncates
//! any ℓ-bit value faithfully with a comparison (a DCF pair or a TAMI
//! millionaires'), about 4 KB (fss) or 0.4 KB (tami) of dealt key material
//! per element at ℓ = 64. The operators truncate millions of intermediate
//! values whose magnitude they bound by construction (inputs clipped by
//! comparisons, polynomials on [0, 1], exp ≤ 1, …), so they use the
//! cheaper truncation pair: with x' = x + 2^{ℓ−2} ∈ [0, 2^{ℓ−1}) (valid
//! when |x| < 2^{ℓ−2}) and a dealt uniform r, the parties open
//! c = x' + r mod 2^ℓ; the wrap bit is w = r_msb·(1 − c_msb) (x' < 2^{ℓ−1}),
//! linear in the dealt share of r_msb, so
//! ⌊x'/2^f⌋ = ⌊c/2^f⌋ − r_hi + w·2^{ℓ−f} − [c mod 2^f < r mod 2^f]
//! and dropping the last (borrow) term gives ⌊x/2^f⌋ or ⌊x/2^f⌋ + 1
//! (error ≤ 1 ulp, faithful). **View:** c is x' plus a fresh uniform ring
//! element, hence uniform and independent of x; the dealt shares are
//! uniform on their own ([`crate::deal::trunc`]); nothing else is sent.
//! Outside |x| < 2^{ℓ−2} the result is wrong by a multiple of 2^{ℓ−f}:
//! every call site states why its values are in range (`tests/transformer.rs`
//! checks the ranges at their extremes), and [`Ctx::trunc_full`] is there
//! for values that have no bound.
//!
//! **Truncation in interactive mode (since 2026-11-29).** An interactive
//! context answers a truncation need with no pair: the same x' = x +
//! 2^{ℓ−2} ∈ [0, 2^{ℓ−1}) has a known MSB, so the wrap of the parties' own
//! shares is msb(x'₀) ∨ msb(x'₁) and each party truncates its share
//! locally, corrected by that wrap (Cheetah's truncation with one-bit error
//! and known MSB, Huang et al., USENIX Security 2022): one random bit
//! product per element offline (1 COT and f bits, against the pair's ℓ
//! COTs and ≈ 2.6 kbit) and one bit each way online (against the pair's ℓ).
//! The result set is the same, ⌊x/2^f⌋ or ⌊x/2^f⌋ + 1, on the same range;
//! [`crate::interactive::wrap_ole`] has the derivation and the security
//! argument. Truncate-and-square and truncate-and-multiply are then this
//! truncation followed by an interactive square or Beaver product (one
//! flight more each, about half the COTs of the fused tuples). Dealt modes
//! are unchanged.
//!
//! **Peer bytes.** Every opening goes through `wire::exchange` (length
//! fixed by the public shape, checked before use) and `unpack_ring`
//! (values above the ring are an error naming the step).

use crate::beaver::{self, OtSession};
use crate::{cf2, interactive};
use crate::deal::matrix::{MatDims, MatrixShare, MatrixTriples, WeightShare, WeightTriples, MAX_WORDS};
use zeroize::Zeroize;
use crate::deal::powers::{PowerShare, PowerTuples, MAX_POWER};
use crate::deal::subset::{SubsetProducts, SubsetShare, MAX_FACTORS};
use crate::deal::triples::TripleShare;
use crate::deal::trunc::{TruncArrays, TruncMulShare, TruncMuls, TruncPairs, TruncShare, TruncSink, TruncSqShare, TruncSquares};
use crate::nonlinear::{tami_general_online, Proto};
use crate::share::{ArithShare, BoolShare, FixedPoint};
use crate::tee::Dealer;
use crate::wire::{self, pack_ring, unpack_ring};
use crate::{fss, invalid, tami, Party, Result};
use hush_deal::MAX_DEAL_N;
use hush_primitives::Ring;
use hush_transport::Channel;
use std::collections::VecDeque;

/// The refusal of `cf2` in a dealt context ([`Ctx::new`]), and of the
/// `silent` preset, which is not wired for these operators yet.
pub const NOT_INTERACTIVE: &str = "transformer operators in a dealt context need the tami or fss family; for cf2 with no trusted party build the context with Ctx::new_interactive (interactive mode); the silent preset is the interactive context on SilentFlow COTs";

/// The refusal of the channel-less dealing calls in interactive mode.
pub const NEEDS_CHANNEL: &str = "interactive correlations are produced with the peer: use prefill_on / deal_plan_on with the channel";

/// What one primitive call consumes (the offline plan of an operator).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Need {
    /// `w`: compared width (0 = the whole ring), see [`Ctx::relu_within`];
    /// `swap`: the hosts' TAMI roles exchanged ([`Ctx::relu_chain`]).
    Relu { n: usize, w: u32, swap: bool },
    Trunc { n: usize, f: u32 },
    TruncSq { n: usize, f: u32 },
    TruncMul { n: usize, f: u32 },
    Triples { n: usize },
    Powers { n: usize, k: u32 },
    Product { n: usize, d: u32 },
    Matrix { count: usize, d: MatDims },
    /// One-sided triples for X·W with W party 0's ([`Ctx::weight_matmul`]).
    Weight { count: usize, d: MatDims },
}

enum Gate {
    Tami(tami::TamiBatch),
    Fss(fss::FssBatch),
    /// The offline part of a CrypTFlow2 ReLU comparing `w` bits
    /// (interactive: leaf ROTs, merge triples and multiplexer OTs).
    Cf2(Box<cf2::Cf2Pre>, u32),
}

enum Pre {
    Relu(Vec<Gate>),
    Trunc(TruncShare),
    /// Interactive mode's answer to a truncation need: the wrap-bit
    /// truncation's bit products ([`interactive::wrap_ole`]).
    Wrap(interactive::WrapShare),
    TruncSq(TruncSqShare),
    TruncMul(TruncMulShare),
    Triples(TripleShare),
    Powers(PowerShare),
    Product(SubsetShare),
    Matrix(MatrixShare),
    Weight(WeightShare),
}

enum Mode {
    Lazy,
    Plan(Vec<Need>),
    Prefilled(VecDeque<(Need, Pre)>),
    Clear,
}

/// Correlations dealt ahead for one plan ([`Ctx::deal_plan`]), to be
/// [`Ctx::install`]ed in a context of the same party.
pub struct Prefilled(VecDeque<(Need, Pre)>);

impl Prefilled {
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A comparison bit kept XOR-shared with its unused multiplexer OTs
/// ([`Ctx::relu_and_bit`], interactive mode).
pub struct Selector {
    pre: Box<cf2::Cf2Pre>,
    b: BoolShare,
}

/// A party's context for the transformer operators.
pub struct Ctx {
    pub party: Party,
    /// Ring and fraction bits of the operators' inputs and outputs.
    pub fx: FixedPoint,
    /// Use TAMI's one-round product for powers (default); `false` computes
    /// them with Beaver products, ⌈log2 K⌉ rounds (for comparison).
    pub one_round: bool,
    proto: Proto,
    /// TAMI chunk width and merge arity.
    pub k: u32,
    pub arity: u32,
    dealer: Option<Dealer>,
    /// The interactive provider's COT session (no module, no dealer).
    ot: Option<OtSession>,
    mode: Mode,
    /// Prefilled mode fed by a dealing thread ([`Ctx::install_feed`]).
    feed: Option<std::sync::mpsc::Receiver<Result<Prefilled>>>,
    /// Seconds and elements dealt per kind of need ([`Ctx::deal_meter`]).
    dealt: DealMeter,
}

/// Seconds spent dealing, and elements dealt, per kind of [`Need`] (the
/// kind's name: "relu", "trunc", "matrix", …): a context's own dealing
/// calls only (lazy or [`Ctx::deal_plan`] / [`Ctx::prefill`]).
pub type DealMeter = std::collections::BTreeMap<&'static str, (f64, u64)>;

impl Need {
    /// The kind's name, and the elements one item deals (for the matrix
    /// kinds: the ring words of all its matrices).
    pub fn kind_and_size(&self) -> (&'static str, u64) {
        match *self {
            Need::Relu { n, .. } => ("relu", n as u64),
            Need::Trunc { n, .. } => ("trunc", n as u64),
            Need::TruncSq { n, .. } => ("trunc_square", n as u64),
            Need::TruncMul { n, .. } => ("trunc_mul", n as u64),
            Need::Triples { n } => ("triples", n as u64),
            Need::Powers { n, .. } => ("powers", n as u64),
            Need::Product { n, .. } => ("product", n as u64),
            Need::Matrix { count, d } => ("matrix", count as u64 * d.words()),
            Need::Weight { count, d } => ("weight", count as u64 * d.words()),
        }
    }
}

impl Ctx {
    /// A context on a dealt-correlation provider (`tee` or `dealer` mode);
    /// `proto` is the comparison family (`tami` or `fss`).
    pub fn new(party: Party, proto: Proto, dealer: Dealer, fx: FixedPoint) -> Result<Self> {
        if proto == Proto::Cf2 {
            return Err(invalid(NOT_INTERACTIVE));
        }
        if fx.ring.bits() < 8 {
            return Err(invalid("transformer operators need a ring of at least 8 bits"));
        }
        Ok(Ctx { party, fx, one_round: true, proto, k: tami::DEFAULT_K, arity: tami::DEFAULT_ARITY, dealer: Some(dealer), ot: None, mode: Mode::Lazy, feed: None, dealt: DealMeter::new() })
    }

    /// A context with **no trusted party** (`interactive` mode): every
    /// correlation is produced with the peer over `ot`'s COTs by
    /// [`crate::interactive`] (Gilboa OLEs for triples, matrix, weight,
    /// truncation, power and subset tuples) and comparisons run CrypTFlow2's
    /// millionaires' ([`crate::cf2`], family [`Proto::Cf2`]). There is no
    /// module and no dealer handle at all, so no request can reach one.
    /// Dealing needs the channel: lazy mode deals on the operator's channel;
    /// use [`Ctx::prefill_on`] / [`Ctx::deal_plan_on`] for the offline phase.
    pub fn new_interactive(party: Party, ot: OtSession, fx: FixedPoint) -> Result<Self> {
        if fx.ring.bits() < 8 {
            return Err(invalid("transformer operators need a ring of at least 8 bits"));
        }
        if ot.party != party {
            return Err(invalid("new_interactive: the COT session belongs to the other party"));
        }
        Ok(Ctx { party, fx, one_round: true, proto: Proto::Cf2, k: cf2::DEFAULT_K, arity: 0, dealer: None, ot: Some(ot), mode: Mode::Lazy, feed: None, dealt: DealMeter::new() })
    }

    /// Whether correlations come from the interactive provider.
    pub fn is_interactive(&self) -> bool {
        self.ot.is_some()
    }

    /// Whether the context is recording a plan: the on-demand interactive
    /// protocols (small products, table lookups) then send nothing and
    /// return zeros.
    pub fn is_planning(&self) -> bool {
        matches!(self.mode, Mode::Plan(_))
    }

    /// The COT session (interactive mode), for protocols run beside the
    /// operators on the same COTs (the graph runtime's HE-to-ring lift).
    pub fn ot_mut(&mut self) -> Option<&mut OtSession> {
        self.ot.as_mut()
    }

    /// Gives the COT session back (interactive mode).
    pub fn into_ot(self) -> Option<OtSession> {
        self.ot
    }

    /// The plaintext fixed-point reference (party 0 holds the values).
    pub fn clear(fx: FixedPoint) -> Self {
        Ctx { party: 0, fx, one_round: true, proto: Proto::Fss, k: tami::DEFAULT_K, arity: tami::DEFAULT_ARITY, dealer: None, ot: None, mode: Mode::Clear, feed: None, dealt: DealMeter::new() }
    }

    pub fn ring(&self) -> Ring {
        self.fx.ring
    }
    pub fn proto(&self) -> Proto {
        self.proto
    }
    pub fn is_clear(&self) -> bool {
        matches!(self.mode, Mode::Clear)
    }
    /// Gives the provider handle back (e.g. to read its counters).
    pub fn dealer(&self) -> Option<&Dealer> {
        self.dealer.as_ref()
    }
    pub fn into_dealer(self) -> Option<Dealer> {
        self.dealer
    }

    /// The offline plan of `op`: runs it in plan mode (nothing computed,
    /// nothing sent) and returns what it consumes, in order.
    pub fn plan<T>(&mut self, op: impl FnOnce(&mut Ctx, &mut dyn Channel) -> Result<T>) -> Result<Vec<Need>> {
        if self.is_clear() {
            return Err(invalid("the clear reference has no offline plan"));
        }
        let saved = std::mem::replace(&mut self.mode, Mode::Plan(Vec::new()));
        // A channel that is never used: plan mode sends nothing.
        let (mut unused, _peer) = hush_transport::MemChannel::pair();
        let r = op(self, &mut unused);
        let plan = std::mem::replace(&mut self.mode, saved);
        r?;
        match plan {
            Mode::Plan(v) => Ok(v),
            _ => unreachable!("plan mode was set above"),
        }
    }

    /// Plan mode without a closure (for several contexts planned together,
    /// e.g. the lanes of one layer): nothing is computed or sent until
    /// [`Ctx::end_plan`], which returns what was recorded and restores
    /// lazy dealing.
    pub fn begin_plan(&mut self) -> Result<()> {
        if self.is_clear() || self.pending() != 0 {
            return Err(invalid("begin_plan: the clear reference, or unconsumed correlations"));
        }
        self.mode = Mode::Plan(Vec::new());
        Ok(())
    }

    /// Ends [`Ctx::begin_plan`]'s plan mode and returns the plan.
    pub fn end_plan(&mut self) -> Result<Vec<Need>> {
        match std::mem::replace(&mut self.mode, Mode::Lazy) {
            Mode::Plan(v) => Ok(v),
            other => {
                self.mode = other;
                Err(invalid("end_plan without begin_plan"))
            }
        }
    }

    /// The offline phase: deals every item of `plan` now (both parties must
    /// prefill the same plan); the following calls consume them in order.
    pub fn prefill(&mut self, plan: &[Need]) -> Result<()> {
        if self.is_interactive() {
            return Err(invalid(NEEDS_CHANNEL));
        }
        let mut q = VecDeque::with_capacity(plan.len());
        for need in plan {
            let pre = self.deal(None, need)?;
            q.push_back((need.clone(), pre));
        }
        self.mode = Mode::Prefilled(q);
        Ok(())
    }

    /// The offline phase apart from the online one: deals every item of
    /// `plan` now and returns them, leaving this context as it was. Another
    /// context of the same party (on another thread) runs on them after
    /// [`Ctx::install`] — e.g. a dealing thread prepares layer l + 1 while
    /// layer l runs online. The dealing order (hence the batch numbers) is
    /// this context's, so both parties must deal the same plans in the same
    /// order here and nowhere else.
    pub fn deal_plan(&mut self, plan: &[Need]) -> Result<Prefilled> {
        if self.is_interactive() {
            return Err(invalid(NEEDS_CHANNEL));
        }
        let mut q = VecDeque::with_capacity(plan.len());
        for need in plan {
            let pre = self.deal(None, need)?;
            q.push_back((need.clone(), pre));
        }
        Ok(Prefilled(q))
    }

    /// [`Ctx::prefill`] on any provider, the channel given for providers
    /// that talk to the peer (interactive); a module or dealer ignores it.
    /// Both parties must run the same plan at the same point of the
    /// conversation.
    pub fn prefill_on(&mut self, ch: &mut dyn Channel, plan: &[Need]) -> Result<()> {
        let p = self.deal_plan_on(ch, plan)?;
        self.mode = Mode::Prefilled(p.0);
        Ok(())
    }

    /// [`Ctx::deal_plan`] on any provider (see [`Ctx::prefill_on`]). In
    /// interactive mode the offline traffic goes over `ch`: a dealing
    /// thread needs its own channel to the peer's dealing thread.
    pub fn deal_plan_on(&mut self, ch: &mut dyn Channel, plan: &[Need]) -> Result<Prefilled> {
        if self.is_clear() {
            return Err(invalid("the clear reference deals nothing"));
        }
        let mut q = VecDeque::with_capacity(plan.len());
        for need in plan {
            let pre = self.deal(Some(&mut *ch), need)?;
            q.push_back((need.clone(), pre));
        }
        Ok(Prefilled(q))
    }

    /// Runs the following primitives on correlations dealt by
    /// [`Ctx::deal_plan`] (checked item by item as in prefilled mode).
    pub fn install(&mut self, p: Prefilled) -> Result<()> {
        if self.is_clear() || self.pending() != 0 {
            return Err(invalid("install: the clear reference, or unconsumed correlations"));
        }
        self.mode = Mode::Prefilled(p.0);
        self.feed = None;
        Ok(())
    }

    /// Runs the following primitives on correlations another context of the
    /// same party deals **while they run** (tee and dealer modes): the
    /// items of the [`Prefilled`]s received on `feed` are taken in order,
    /// waiting for the next one when those received are used up, and
    /// checked item by item as in prefilled mode. The dealing context (on
    /// another thread, sharing this party's provider) deals the plan with
    /// [`Ctx::deal_plan`] a piece at a time; a dealing error it sends is
    /// returned by the primitive that waits for it. Nothing about the
    /// correlations changes — the same items in the same order with the
    /// same batch numbers as a prefill of the whole plan — only when they
    /// are dealt (dealing is input-independent and sends nothing to the
    /// peer: the reasoning of `hush_inference`'s look-ahead dealing).
    pub fn install_feed(&mut self, feed: std::sync::mpsc::Receiver<Result<Prefilled>>) -> Result<()> {
        if self.is_clear() || self.pending() != 0 || self.is_interactive() {
            return Err(invalid("install_feed: the clear reference, interactive mode, or unconsumed correlations"));
        }
        self.mode = Mode::Prefilled(VecDeque::new());
        self.feed = Some(feed);
        Ok(())
    }

    /// Waits for the feed's next piece while the prefilled queue is empty.
    fn refill(&mut self) -> Result<()> {
        while let (Mode::Prefilled(q), Some(f)) = (&mut self.mode, &self.feed) {
            if !q.is_empty() {
                break;
            }
            match f.recv() {
                Ok(p) => q.extend(p?.0),
                Err(_) => self.feed = None, // the dealing thread is done
            }
        }
        Ok(())
    }

    /// Items dealt and not yet consumed (prefilled mode).
    pub fn pending(&self) -> usize {
        match &self.mode {
            Mode::Prefilled(q) => q.len(),
            _ => 0,
        }
    }

    /// Back to dealing on demand (e.g. after a prefilled operator ran).
    pub fn lazy(&mut self) -> Result<()> {
        // pieces a feed delivered but the operators never asked for count
        // as unconsumed
        if let (Mode::Prefilled(q), Some(f)) = (&mut self.mode, &self.feed) {
            while let Ok(p) = f.try_recv() {
                q.extend(p?.0);
            }
        }
        if self.pending() != 0 {
            return Err(invalid(format!("{} prefilled correlations were not consumed", self.pending())));
        }
        if !self.is_clear() {
            self.mode = Mode::Lazy;
        }
        self.feed = None;
        Ok(())
    }

    fn dealer_mut(&mut self) -> Result<&mut Dealer> {
        self.dealer.as_mut().ok_or_else(|| invalid(NOT_INTERACTIVE))
    }

    /// This context's dealing time and elements per kind so far.
    pub fn deal_meter(&self) -> &DealMeter {
        &self.dealt
    }

    fn deal(&mut self, ch: Option<&mut dyn Channel>, need: &Need) -> Result<Pre> {
        let t = std::time::Instant::now();
        let r = self.deal_one(ch, need);
        let (kind, size) = need.kind_and_size();
        let e = self.dealt.entry(kind).or_default();
        e.0 += t.elapsed().as_secs_f64();
        e.1 += size;
        r
    }

    fn deal_one(&mut self, ch: Option<&mut dyn Channel>, need: &Need) -> Result<Pre> {
        if self.ot.is_some() {
            let ch = ch.ok_or_else(|| invalid(NEEDS_CHANNEL))?;
            return self.deal_interactive(ch, need);
        }
        let (party, bits, proto, k, arity) = (self.party, self.fx.ring.bits(), self.proto, self.k, self.arity);
        let chunk = MAX_DEAL_N as usize;
        let d = self.dealer_mut()?;
        Ok(match *need {
            Need::Relu { n, w, swap: true } => {
                // a linked step of a chain: one batch (n ≤ one dealing)
                let shape = Self::relu_shape(bits, k, arity, w);
                Pre::Relu(vec![Gate::Tami(tami::deal_swapped(d, party, n, shape)?)])
            }
            Need::Relu { n, w, swap: false } => {
                let mut gates = Vec::new();
                let mut done = 0;
                let shape = Self::relu_shape(bits, k, arity, w);
                while done < n {
                    let m = (n - done).min(chunk);
                    gates.push(match proto {
                        Proto::Tami => Gate::Tami(tami::deal(d, party, m, shape)?),
                        _ => Gate::Fss(fss::deal(d, party, m, fss::FssShape { bits, gate: fss::FssGate::Relu })?),
                    });
                    done += m;
                }
                Pre::Relu(gates)
            }
            // Truncation kinds: one sink per need, reserved once; the
            // in-process module appends this party's share straight into
            // its arrays, another backend's bytes are decoded into them.
            Need::Trunc { n, f } => Pre::Trunc(deal_trunc_kind(d, n, chunk, bits, f, TruncPairs::request)?),
            Need::TruncSq { n, f } => Pre::TruncSq(deal_trunc_kind(d, n, chunk, bits, f, TruncSquares::request)?),
            Need::TruncMul { n, f } => Pre::TruncMul(deal_trunc_kind(d, n, chunk, bits, f, TruncMuls::request)?),
            Need::Triples { n } => {
                let mut unused = hush_transport::MemChannel::pair().0;
                Pre::Triples(beaver::TripleSource::arith_triples(d, &mut unused, party, bits, n)?)
            }
            Need::Powers { n, k } => Pre::Powers(in_dealings(
                n,
                chunk,
                PowerShare { pows: vec![Vec::with_capacity(n); k as usize] },
                |m| {
                    let batch = d.next_batch();
                    Ok(PowerShare::from_bytes(&d.deal(PowerTuples::request(batch, m as u32, bits, k))?, m, bits, k)?)
                },
                |t, p| append_columns(&mut t.pows, &p.pows),
            )?),
            Need::Product { n, d: nf } => Pre::Product(in_dealings(
                n,
                chunk,
                SubsetShare { sets: vec![Vec::with_capacity(n); (1 << nf) - 1] },
                |m| {
                    let batch = d.next_batch();
                    Ok(SubsetShare::from_bytes(&d.deal(SubsetProducts::request(batch, m as u32, bits, nf))?, m, bits, nf)?)
                },
                |t, p| append_columns(&mut t.sets, &p.sets),
            )?),
            Need::Matrix { count, d: dims } => {
                let per = ((MAX_WORDS / dims.words().max(1)) as usize).min(chunk);
                if per == 0 {
                    return Err(invalid(format!("a {}×{}·{}×{} product exceeds one dealing ({MAX_WORDS} words)", dims.m, dims.k, dims.k, dims.n)));
                }
                Pre::Matrix(in_dealings(
                    count,
                    per,
                    MatrixShare::default(),
                    |m| {
                    let batch = d.next_batch();
                    Ok(MatrixShare::from_bytes(&d.deal(MatrixTriples::request(batch, m as u32, bits, dims))?, m, dims, bits)?)
                },
                    |t, p| {
                        t.a.extend_from_slice(&p.a);
                        t.b.extend_from_slice(&p.b);
                        t.c.extend_from_slice(&p.c);
                    },
                )?)
            }
            Need::Weight { count, d: dims } => {
                let per = ((MAX_WORDS / dims.words().max(1)) as usize).min(chunk);
                if per == 0 {
                    return Err(invalid(format!("a {}×{}·{}×{} product exceeds one dealing ({MAX_WORDS} words)", dims.m, dims.k, dims.k, dims.n)));
                }
                Pre::Weight(in_dealings(
                    count,
                    per,
                    WeightShare::default(),
                    |m| {
                        let batch = d.next_batch();
                        Ok(WeightShare::from_bytes(&d.deal(WeightTriples::request(batch, m as u32, bits, dims))?, party, m, dims, bits)?)
                    },
                    |t, p| {
                        t.ab.extend_from_slice(&p.ab);
                        t.c.extend_from_slice(&p.c);
                    },
                )?)
            }
        })
    }

    /// The interactive provider's answer to `need` ([`crate::interactive`],
    /// and [`crate::cf2::prepare`] for comparisons): produced with the peer
    /// over `ch`, in one piece per need (the OLEs batch internally).
    fn deal_interactive(&mut self, ch: &mut dyn Channel, need: &Need) -> Result<Pre> {
        let (party, bits, k) = (self.party, self.fx.ring.bits(), self.k);
        let ot = self.ot.as_mut().ok_or_else(|| invalid(NOT_INTERACTIVE))?;
        Ok(match *need {
            Need::Relu { swap: true, .. } => return Err(invalid("interactive mode: TAMI's swapped comparisons do not apply to cf2")),
            Need::Relu { n, w, swap: false } => {
                let w = if w == 0 { bits } else { w };
                if !(2..=bits).contains(&w) {
                    return Err(invalid(format!("interactive ReLU: width {w} in a {bits}-bit ring")));
                }
                Pre::Relu(vec![Gate::Cf2(Box::new(cf2::prepare(ot, ch, party, n, w - 1, k, n)?), w)])
            }
            // not a truncation pair: the wrap-bit truncation's offline
            // part (Cheetah's known-MSB truncation, see `Ctx::trunc`)
            Need::Trunc { n, f } => Pre::Wrap(interactive::wrap_ole(ot, ch, party, f, n)?),
            Need::TruncSq { n, f } => Pre::TruncSq(interactive::trunc_square(ot, ch, party, bits, f, n)?),
            Need::TruncMul { n, f } => Pre::TruncMul(interactive::trunc_mul(ot, ch, party, bits, f, n)?),
            Need::Triples { n } => Pre::Triples(interactive::triples(ot, ch, party, bits, n)?),
            Need::Powers { n, k } => Pre::Powers(interactive::powers(ot, ch, party, bits, k, n)?),
            Need::Product { n, d } => Pre::Product(interactive::subsets(ot, ch, party, bits, d, n)?),
            Need::Matrix { count, d } => Pre::Matrix(interactive::matrix(ot, ch, party, bits, count, d)?),
            Need::Weight { count, d } => Pre::Weight(interactive::weight(ot, ch, party, bits, count, d)?),
        })
    }

    /// The correlation for `need`: `None` in plan mode (recorded), dealt now
    /// (lazy) or the next prefilled item (checked).
    fn take(&mut self, ch: &mut dyn Channel, need: Need) -> Result<Option<Pre>> {
        if self.feed.is_some() {
            self.refill()?;
        }
        match &mut self.mode {
            Mode::Plan(v) => {
                v.push(need);
                Ok(None)
            }
            Mode::Lazy => self.deal(Some(ch), &need).map(Some),
            Mode::Prefilled(q) => match q.pop_front() {
                Some((n, pre)) if n == need => Ok(Some(pre)),
                Some((n, _)) => Err(invalid(format!("preprocessing plan mismatch: dealt {n:?}, the operator needs {need:?}"))),
                None => Err(invalid(format!("preprocessing plan exhausted: the operator needs {need:?}"))),
            },
            Mode::Clear => Err(invalid("the clear reference deals nothing")),
        }
    }

    fn zeros(&self, n: usize) -> ArithShare {
        ArithShare::zeros(self.fx.ring, n)
    }

    /// A public constant (integer ring value) as a sharing: party 0 holds it.
    pub fn constant(&self, n: usize, v: u64) -> ArithShare {
        let v = v & self.fx.ring.mask();
        ArithShare { ring: self.fx.ring, v: vec![if self.party == 0 { v } else { 0 }; n] }
    }

    /// Adds a public integer ring value to every element.
    pub fn add_const(&self, x: &ArithShare, v: u64) -> ArithShare {
        let r = x.ring;
        if self.party != 0 {
            return x.clone();
        }
        ArithShare { ring: r, v: x.v.iter().map(|a| r.add(*a, v)).collect() }
    }

    /// ReLU(x) (signed), element-wise. Valid for every ℓ-bit x.
    pub fn relu(&mut self, ch: &mut dyn Channel, x: &ArithShare) -> Result<ArithShare> {
        self.relu_w(ch, x, 0)
    }

    /// The TAMI shape of a ReLU batch comparing `w` bits (0: the ring):
    /// with a reduced width the merge arity grows to the chunk count (up to
    /// 8) so that the merge is one level — one flight fewer.
    fn relu_shape(bits: u32, k: u32, arity: u32, w: u32) -> tami::TamiShape {
        let s = tami::TamiShape::new(bits, k, arity, tami::Flavor::Relu).with_width(if w == 0 { bits } else { w });
        let chunks = s.chunks().len() as u32;
        if s.low != 0 && chunks > arity && chunks <= 8 {
            tami::TamiShape { arity: chunks.max(2), ..s }
        } else {
            s
        }
    }

    /// The compared width that makes ReLU exact for every |x| ≤ `max_ulps`
    /// (ring units): the smallest w with max_ulps < 2^{w−1}, at least 8 and
    /// at most ℓ (0 = the whole ring).
    pub fn width_for(&self, max_ulps: f64) -> u32 {
        let l = self.ring().bits();
        if !(max_ulps.is_finite() && max_ulps >= 0.0) {
            return 0;
        }
        let w = (max_ulps + 1.0).log2().ceil() as u32 + 1;
        if w >= l {
            0
        } else {
            w.max(8)
        }
    }

    /// ReLU(x) for inputs the caller has **bounded**: |x| ≤ `max_ulps` (ring
    /// units). The comparison reads the sign of x mod 2^w with
    /// w = [`Ctx::width_for`]`(max_ulps)` — exact inside the bound (the
    /// reduction of shares mod 2^w is local and a ring homomorphism; see
    /// [`tami::TamiShape::low`]); the output b·x is in the full ring. TAMI
    /// compares w − 1 bits instead of ℓ − 1: at ℓ = 64 and w ≤ 41 one merge
    /// level (4 flights instead of 5) and about a third fewer bytes. The
    /// `fss` family ignores the width (its cost does not depend on it).
    /// **Outside the bound** the sign can be wrong (ReLU returns 0 or x, never
    /// a value larger than |x|); the clear reference fails on a value above
    /// the bound, so a wrong proof shows up in the reference tests.
    /// **View:** as [`Ctx::relu`]: the comparison of fewer bits sends fewer
    /// masked bits; y − s is still a full-ring one-time pad.
    pub fn relu_within(&mut self, ch: &mut dyn Channel, x: &ArithShare, max_ulps: f64) -> Result<ArithShare> {
        self.check_bound(x, max_ulps, "relu")?;
        let w = self.width_for(max_ulps);
        self.relu_w(ch, x, w)
    }

    /// The clear reference's check of a proven input bound (no-op in the
    /// secure modes): an input above `max_ulps` (ring units) is an error
    /// naming `what` — a wrong proof shows up in the reference tests.
    pub fn check_bound(&self, x: &ArithShare, max_ulps: f64, what: &str) -> Result<()> {
        if self.is_clear() {
            let r = x.ring;
            if let Some(a) = x.v.iter().map(|&a| r.to_signed(a) as f64).find(|a| a.abs() > max_ulps) {
                return Err(invalid(format!("{what}: input {a} (ring units) exceeds its proven bound {max_ulps} (the bound's proof is wrong)")));
            }
        }
        Ok(())
    }

    fn relu_w(&mut self, ch: &mut dyn Channel, x: &ArithShare, w: u32) -> Result<ArithShare> {
        let n = x.len();
        if n == 0 {
            return Ok(self.zeros(0));
        }
        if self.is_clear() {
            let r = x.ring;
            return Ok(ArithShare { ring: r, v: x.v.iter().map(|&a| crate::share::reference::relu(r, a)).collect() });
        }
        let party = self.party;
        let w = if self.proto == Proto::Fss { 0 } else { w };
        let Some(pre) = self.take(ch, Need::Relu { n, w, swap: false })? else { return Ok(self.zeros(n)) };
        let Pre::Relu(mut gates) = pre else { return Err(invalid("preprocessing: not a ReLU batch")) };
        let mut out = Vec::with_capacity(n);
        let mut at = 0;
        for g in gates.iter_mut() {
            let (m, res) = match g {
                Gate::Tami(b) => (b.n, tami_general_online(ch, party, b, &ArithShare { ring: x.ring, v: x.v[at..at + b.n].to_vec() })?.arith()?),
                Gate::Fss(b) => (b.n, fss::online(ch, b, Some(&x.v[at..at + b.n]), true)?.arith()?),
                Gate::Cf2(pre, w) => {
                    // the sign of x mod 2^w (exact for |x| < 2^{w−1}: the
                    // reduction of shares is a ring homomorphism), then
                    // the multiplexer on the full-ring x
                    let m = pre.n;
                    let rw = Ring::new(*w).ok_or_else(|| invalid("cf2 width"))?;
                    let xs = ArithShare { ring: x.ring, v: x.v[at..at + m].to_vec() };
                    let xw: Vec<u64> = xs.v.iter().map(|v| v & rw.mask()).collect();
                    let inp = cf2::drelu_input(party, rw, &xw);
                    let carry = cf2::millionaire_online(ch, party, pre, &inp)?;
                    let b = cf2::drelu_finish(party, rw, &xw, carry);
                    (m, cf2::mux_online(ch, party, pre, &b, &xs)?)
                }
            };
            out.extend_from_slice(&res.v);
            at += m;
        }
        if at != n {
            return Err(invalid("preprocessing: ReLU batch size mismatch"));
        }
        Ok(ArithShare { ring: x.ring, v: out })
    }

    /// Interactive mode only: ReLU of `x` and the comparison bit
    /// [`y ≥ 0`] of `y` from **one** CrypTFlow2 batch (one millionaires'
    /// run over both, |x|, |y| ≤ `max_ulps` ring units), the ReLU's
    /// multiplexer applied now, the bit kept XOR-shared with its unused
    /// multiplexer OTs for a later [`Ctx::select`] (b·z for a z computed
    /// after it). Against a ReLU pair ReLU(y + 1) − ReLU(y) for the bit
    /// and a Beaver product b·z: one comparison and a 2-COT multiplexer
    /// instead of two comparisons and a triple's 2ℓ COTs. **View:** cf2's
    /// (the millionaires' and multiplexer messages, simulatable: Rathee et
    /// al., CCS 2020, §3–4); each multiplexer ROT is used once
    /// ([`cf2::mux_online`] consumes them in order).
    pub fn relu_and_bit(&mut self, ch: &mut dyn Channel, x: &ArithShare, y: &ArithShare, max_ulps: f64) -> Result<(ArithShare, Option<Selector>)> {
        if !self.is_interactive() {
            return Err(invalid("relu_and_bit: interactive mode only (cf2 comparisons)"));
        }
        let (n, q) = (x.len(), y.len());
        if n == 0 || q == 0 {
            return Err(invalid("relu_and_bit: empty input"));
        }
        self.check_bound(x, max_ulps, "relu")?;
        self.check_bound(y, max_ulps, "relu")?;
        let w = self.width_for(max_ulps);
        let party = self.party;
        let Some(pre) = self.take(ch, Need::Relu { n: n + q, w, swap: false })? else { return Ok((self.zeros(n), None)) };
        let Pre::Relu(mut gates) = pre else { return Err(invalid("preprocessing: not a ReLU batch")) };
        let Some(Gate::Cf2(mut pre, w)) = gates.pop().filter(|_| gates.is_empty()) else { return Err(invalid("preprocessing: not one cf2 batch")) };
        let rw = Ring::new(w).ok_or_else(|| invalid("cf2 width"))?;
        let all = concat(&[x, y]);
        let xw: Vec<u64> = all.v.iter().map(|v| v & rw.mask()).collect();
        let inp = cf2::drelu_input(party, rw, &xw);
        let carry = cf2::millionaire_online(ch, party, &mut pre, &inp)?;
        let b = cf2::drelu_finish(party, rw, &xw, carry);
        let bx = BoolShare::from_bools(&(0..n).map(|i| b.get(i)).collect::<Vec<_>>());
        let by = BoolShare::from_bools(&(n..n + q).map(|i| b.get(i)).collect::<Vec<_>>());
        let r = cf2::mux_online(ch, party, &mut pre, &bx, x)?;
        Ok((r, Some(Selector { pre, b: by })))
    }

    /// b·z for the bit kept by [`Ctx::relu_and_bit`] (exact in the ring;
    /// two flights, one OT each way per element). `None` (plan mode) gives
    /// zeros.
    pub fn select(&mut self, ch: &mut dyn Channel, sel: Option<Selector>, z: &ArithShare) -> Result<ArithShare> {
        let Some(mut s) = sel else { return Ok(self.zeros(z.len())) };
        if s.b.n != z.len() {
            return Err(invalid(format!("select: {} bits for {} values", s.b.n, z.len())));
        }
        cf2::mux_online(ch, self.party, &mut s.pre, &s.b, z)
    }

    /// x·y for x **proven to lie in [0, 2^{k−1})** and any y. Interactive
    /// mode: [`interactive::mul_small`] on the live COT session (2k OTs per
    /// element instead of a Beaver triple's 2ℓ; three flights instead of
    /// one opening; made on demand, not planned). Dealt modes: [`Ctx::mul`];
    /// the clear reference fails on an x outside the range.
    pub fn mul_small(&mut self, ch: &mut dyn Channel, x: &ArithShare, k: u32, y: &ArithShare) -> Result<ArithShare> {
        let r = x.ring;
        if !(2..r.bits()).contains(&k) || x.len() != y.len() {
            return Err(invalid(format!("mul_small: {k}-bit operand in a {}-bit ring, {} and {} elements", r.bits(), x.len(), y.len())));
        }
        if self.is_clear() {
            if let Some(v) = x.v.iter().find(|v| **v >= 1u64 << (k - 1)) {
                return Err(invalid(format!("mul_small: input {} (ring units) outside [0, 2^{}) (the bound's proof is wrong)", r.to_signed(*v), k - 1)));
            }
        }
        if !self.is_interactive() || x.is_empty() {
            return self.mul(ch, x, y);
        }
        if let Mode::Plan(_) = self.mode {
            return Ok(self.zeros(x.len()));
        }
        let party = self.party;
        let ot = self.ot.as_mut().ok_or_else(|| invalid(NOT_INTERACTIVE))?;
        Ok(ArithShare { ring: r, v: interactive::mul_small(ot, ch, party, r, k, &x.v, &y.v)? })
    }

    /// x_g·y for each row g of `m` elements of y, x proven in [0, 2^{k−1})
    /// (one value per row: a row's reciprocal or rsqrt). Interactive mode:
    /// [`interactive::mul_small_rows`] on the live COT session (2k OTs per
    /// **row**; made on demand, not planned). Other modes: [`Ctx::mul`] on
    /// x broadcast to its row (the clear reference checks the range).
    pub fn mul_small_rows(&mut self, ch: &mut dyn Channel, x: &ArithShare, k: u32, y: &ArithShare, m: usize) -> Result<ArithShare> {
        self.mul_small_rows_within(ch, x, k, y, m, None)
    }

    /// [`Ctx::mul_small_rows`] for products **proven** |x_g·y| < 2^`out_bits`
    /// (`None`: no bound). Interactive mode, when w = out_bits + 2 < ℓ: the
    /// vector OLEs run in Z_2^w (the operands' shares reduced mod 2^w, a
    /// ring homomorphism: the product mod 2^w is exact) and the result is
    /// extended to the ring ([`Ctx::extend_signed`]) — every OT correction
    /// carries w − i bits instead of ℓ − i, for one OT and 1 + ℓ − w bits
    /// per element of extension (since 2026-11-29). **View:** the OLE's and
    /// the extension's. The clear reference fails on a product beyond the
    /// bound (its proof is wrong).
    #[allow(clippy::too_many_arguments)]
    pub fn mul_small_rows_within(&mut self, ch: &mut dyn Channel, x: &ArithShare, k: u32, y: &ArithShare, m: usize, out_bits: Option<u32>) -> Result<ArithShare> {
        let r = x.ring;
        if m == 0 || x.len() * m != y.len() {
            return Err(invalid(format!("mul_small_rows: {} rows of {m} for {} elements", x.len(), y.len())));
        }
        if !self.is_interactive() || x.is_empty() {
            let xb = ArithShare { ring: r, v: (0..y.len()).map(|i| x.v[i / m]).collect() };
            let p = self.mul_small(ch, &xb, k, y)?;
            if let (true, Some(b)) = (self.is_clear(), out_bits) {
                if let Some(v) = p.v.iter().find(|v| r.to_signed(**v).unsigned_abs() >= 1u64 << b.min(63)) {
                    return Err(invalid(format!("mul_small_rows: product {} (ring units) beyond 2^{b} (the bound's proof is wrong)", r.to_signed(*v))));
                }
            }
            return Ok(p);
        }
        if self.is_planning() {
            return Ok(self.zeros(y.len()));
        }
        let party = self.party;
        let narrow = out_bits.map(|b| b + 2).filter(|&w| w < r.bits() && k < w);
        let rw = narrow.and_then(Ring::new).unwrap_or(r);
        let low = |v: &[u64]| -> Vec<u64> { v.iter().map(|a| a & rw.mask()).collect() };
        let ot = self.ot.as_mut().ok_or_else(|| invalid(NOT_INTERACTIVE))?;
        let p = interactive::mul_small_rows(ot, ch, party, rw, k, &low(&x.v), &low(&y.v), m)?;
        match narrow {
            Some(w) => Ok(ArithShare { ring: r, v: self.extend_signed(ch, &p, w)? }),
            None => Ok(ArithShare { ring: r, v: p }),
        }
    }

    /// Shares mod 2^w (< ℓ) of v with |v| < 2^{w−2} → shares of v over the
    /// context's ring, **interactive mode**: party 0 adds 2^{w−2} (so the
    /// value lies in [0, 2^{w−1}), its top bit known to be zero), then
    /// [`interactive::extend_known_msb`], then party 0 takes the offset off.
    /// One OT, one bit one way and ℓ − w bits the other per element.
    /// **View:** the extension's (`bit_times_private`'s).
    pub fn extend_signed(&mut self, ch: &mut dyn Channel, y: &[u64], w: u32) -> Result<Vec<u64>> {
        let ring = self.ring();
        if !(3..ring.bits()).contains(&w) {
            return Err(invalid(format!("extension from Z_2^{w} to Z_2^{}", ring.bits())));
        }
        let (off, mw) = (1u64 << (w - 2), (1u64 << w) - 1);
        if y.iter().any(|v| *v > mw) {
            return Err(invalid(format!("extension: a share beyond 2^{w}")));
        }
        let party = self.party;
        let x: Vec<u64> = if party == 0 { y.iter().map(|v| (v + off) & mw).collect() } else { y.to_vec() };
        let ot = self.ot.as_mut().ok_or_else(|| invalid(NOT_INTERACTIVE))?;
        let v = interactive::extend_known_msb(ot, ch, party, ring, &[(&x, w)])?.pop().expect("one part");
        Ok(if party == 0 { v.iter().map(|a| ring.sub(*a, off)).collect() } else { v })
    }

    /// x² for x **proven to lie in [0, 2^{k−1})**. Interactive mode:
    /// [`interactive::square_small`] on the live COT session (k + 1 OTs per
    /// element instead of a power tuple's ℓ; three flights instead of one
    /// opening; nothing planned or prefilled — like [`Ctx::trunc_full`] it
    /// is made on demand). Dealt modes: [`Ctx::powers`]; the clear
    /// reference squares exactly and fails on an input outside the range
    /// (the bound's proof is wrong).
    pub fn square_small(&mut self, ch: &mut dyn Channel, x: &ArithShare, k: u32) -> Result<ArithShare> {
        Ok(self.powers_small(ch, x, 2, k)?.pop().expect("two powers"))
    }

    /// x, x², …, x^k for x **proven to lie in [0, 2^{xbits−1})**, exactly
    /// in the ring (x^j < 2^{j·(xbits−1)}, checked to fit below 2^{ℓ−1}).
    /// Interactive mode: level by level, x^j = x^h·x^{j−h} by
    /// [`interactive::mul_small`] (the small operand x^{j−h}) or, for
    /// j = 2h, [`interactive::square_small`] — per element (K = 4,
    /// xbits = 16) 17 + 32 + 32 OTs against a power tuple's 256; 3 flights
    /// per call instead of one opening. **Narrow rings** (since
    /// 2026-11-29): x^j is computed in Z_2^{w_j}, w_j = j·(xbits − 1) + 1,
    /// from its operands' shares reduced mod 2^{w_j} (a ring homomorphism,
    /// so the product mod 2^{w_j} is exact), and each level's results are
    /// extended to the ring together ([`interactive::extend_known_msb`]:
    /// x^j ∈ [0, 2^{w_j − 1}), so its top bit is known to be zero; one OT and
    /// 1 + ℓ − w_j bits per element). Every OT correction of the products
    /// then carries w_j − i bits instead of ℓ − i: GeLU's powers (xbits = 16,
    /// ℓ = 64) take ~3,060 bits per element instead of ~4,440, one extension
    /// (two flights) more per level. **View:** the products' and the
    /// extension's ([`interactive::vole`]'s, uniform corrections and bits), fresh output
    /// shares. Dealt modes: [`Ctx::powers`]; the
    /// clear reference computes exactly and fails outside the range.
    pub fn powers_small(&mut self, ch: &mut dyn Channel, x: &ArithShare, k: u32, xbits: u32) -> Result<Vec<ArithShare>> {
        let r = x.ring;
        let l = r.bits();
        if !(1..=MAX_POWER).contains(&k) || xbits < 2 || (k as u64) * (xbits as u64 - 1) + 1 >= l as u64 {
            return Err(invalid(format!("powers up to {k} of {xbits}-bit values in a {l}-bit ring")));
        }
        if self.is_clear() {
            if let Some(v) = x.v.iter().find(|v| **v >= 1u64 << (xbits - 1)) {
                return Err(invalid(format!("powers_small: input {} (ring units) outside [0, 2^{}) (the bound's proof is wrong)", r.to_signed(*v), xbits - 1)));
            }
        }
        if !self.is_interactive() || x.is_empty() {
            return self.powers(ch, x, k);
        }
        if let Mode::Plan(_) = self.mode {
            return Ok((0..k).map(|_| self.zeros(x.len())).collect());
        }
        let party = self.party;
        let ot = self.ot.as_mut().ok_or_else(|| invalid(NOT_INTERACTIVE))?;
        let mut out: Vec<ArithShare> = vec![x.clone()];
        let bits_of = |j: usize| j as u32 * (xbits - 1) + 1;
        while out.len() < k as usize {
            let have = out.len();
            let hi = (2 * have).min(k as usize);
            // each product of the level in its own narrow ring Z_2^{w_j},
            // w_j = bits_of(j) < ℓ (x^j < 2^{w_j − 1}), then all extended to
            // the ring at once
            let mut level: Vec<(Vec<u64>, u32)> = Vec::with_capacity(hi - have);
            for j in have + 1..=hi {
                let w = bits_of(j);
                let rw = Ring::new(w).ok_or_else(|| invalid("powers: ring width"))?;
                let low = |v: &[u64]| -> Vec<u64> { v.iter().map(|a| a & rw.mask()).collect() };
                let v = if j == 2 * have {
                    interactive::square_small(ot, ch, party, rw, bits_of(have), &low(&out[have - 1].v))?
                } else {
                    interactive::mul_small(ot, ch, party, rw, bits_of(j - have), &low(&out[j - have - 1].v), &low(&out[have - 1].v))?
                };
                level.push((v, w));
            }
            let parts: Vec<(&[u64], u32)> = level.iter().map(|(v, w)| (&v[..], *w)).collect();
            let ext = interactive::extend_known_msb(ot, ch, party, r, &parts)?;
            out.extend(ext.into_iter().map(|v| ArithShare { ring: r, v }));
        }
        Ok(out)
    }

    /// A chain of ReLUs, each input a function of the previous output:
    /// r_0 = ReLU(x_0), x_{i+1} = `step`(i, r_i), r_{i+1} = ReLU(x_{i+1}), …
    /// for `sizes.len()` steps (x_i has `sizes[i]` elements, |x_i| ≤
    /// `max_ulps[i]` ring units as in [`Ctx::relu_within`]); returns the
    /// last r. `step` is called once per link, in order, on every party.
    ///
    /// **One flight fewer per link** (TAMI, single-level batches of at most
    /// one dealing): a ReLU is re-share (B → A: x_B − m onto B's dealt
    /// mask), leaf (A → B), merge opening (B → A) and e (A → B). A learns e,
    /// hence its output share, one flight before B — so A computes its share
    /// of the next input and sends its re-share in the same flight as e,
    /// playing B in the next comparison, whose batch is dealt with the
    /// hosts' roles exchanged ([`crate::deal::tami::TamiTablesSwapped`]);
    /// roles alternate along the chain. k linked ReLUs take 3k + 1 flights
    /// instead of 4k. Steps that cannot be linked (the `fss` family, a
    /// multi-level merge, a batch above one dealing) run as plain
    /// [`Ctx::relu_within`] calls; the linking is decided from public
    /// shapes only, so plan and run agree.
    ///
    /// **View.** Each comparison's messages are exactly TAMI's for the
    /// role the host plays in it (the swapped kind's shares are the plain
    /// kind's under renamed hosts), and the re-share x_B − m is uniform
    /// (m is the fresh dealt input of that comparison, never used
    /// elsewhere). Appending it to the e flight changes when it is sent, not
    /// what: the joint view is the concatenation of the single ReLUs'
    /// simulatable views, as for separate calls (`tests/tami_view.rs`
    /// plays a curious host on a swapped batch).
    pub fn relu_chain(&mut self, ch: &mut dyn Channel, x0: &ArithShare, sizes: &[usize], max_ulps: &[f64], step: &mut dyn FnMut(usize, &ArithShare) -> Result<ArithShare>) -> Result<ArithShare> {
        let k = sizes.len();
        if k == 0 || max_ulps.len() != k || x0.len() != sizes[0] {
            return Err(invalid(format!("relu_chain: {k} steps, {} bounds, first input {} for {:?}", max_ulps.len(), x0.len(), sizes.first())));
        }
        let ring = x0.ring;
        let bits = ring.bits();
        let widths: Vec<u32> = max_ulps.iter().map(|&m| if self.proto != Proto::Fss { self.width_for(m) } else { 0 }).collect();
        let chunk = MAX_DEAL_N as usize;
        let single = |w: u32| Self::relu_shape(bits, self.k, self.arity, w).plan().levels.len() == 1;
        // linked[i]: step i's re-share rides on step i − 1's e flight
        let linked: Vec<bool> = (0..k)
            .map(|i| i > 0 && self.proto == Proto::Tami && !self.is_clear() && sizes[i - 1] <= chunk && sizes[i] <= chunk && sizes[i - 1] > 0 && sizes[i] > 0 && single(widths[i - 1]))
            .collect();
        let mut swap = vec![false; k];
        for i in 1..k {
            swap[i] = linked[i] && !swap[i - 1];
        }
        let plain = !linked.iter().any(|&b| b) || matches!(self.mode, Mode::Plan(_));
        if plain {
            // plan mode records the same items the linked run takes
            let mut x = x0.clone();
            for i in 0..k {
                if x.len() != sizes[i] {
                    return Err(invalid(format!("relu_chain: step {i} has {} elements, declared {}", x.len(), sizes[i])));
                }
                let r = if matches!(self.mode, Mode::Plan(_)) && self.proto == Proto::Tami && !x.is_empty() {
                    self.check_bound(&x, max_ulps[i], "relu")?;
                    self.take(ch, Need::Relu { n: x.len(), w: widths[i], swap: swap[i] })?;
                    self.zeros(x.len())
                } else {
                    self.relu_within(ch, &x, max_ulps[i])?
                };
                if i + 1 == k {
                    return Ok(r);
                }
                x = step(i, &r)?;
            }
            unreachable!("k ≥ 1");
        }
        let mut x = x0.clone();
        // the re-share received on the previous e flight (this host is A)
        let mut incoming: Option<Vec<u8>> = None;
        // step i's batch, taken during step i − 1 (linked)
        let mut pending: Option<tami::TamiBatch> = None;
        for i in 0..k {
            if x.len() != sizes[i] {
                return Err(invalid(format!("relu_chain: step {i} has {} elements, declared {}", x.len(), sizes[i])));
            }
            let link = i + 1 < k && linked[i + 1];
            if !linked[i] && !link {
                let r = self.relu_within(ch, &x, max_ulps[i])?;
                if i + 1 == k {
                    return Ok(r);
                }
                x = step(i, &r)?;
                continue;
            }
            let b = match pending.take() {
                Some(b) => b,
                None => self.take_gate(ch, sizes[i], widths[i], swap[i])?.ok_or_else(|| invalid("relu_chain: missing batch"))?,
            };
            // y: A's masked value x + (x_B − m)
            let y: Option<Vec<u64>> = match (linked[i], incoming.take()) {
                // linked, role A: the re-share came with the last flight
                (true, Some(p)) => {
                    if b.party != 0 {
                        return Err(invalid("relu_chain: a re-share reached role B"));
                    }
                    let mut d = vec![0u64; x.len()];
                    unpack_ring("TAMI re-share (chained) onto the dealt mask", &p, bits, &mut d)?;
                    Some(x.v.iter().zip(&d).map(|(a, c)| ring.add(*a, *c)).collect())
                }
                // linked, role B: its re-share went with its last flight
                (true, None) => {
                    if b.party != 1 {
                        return Err(invalid("relu_chain: role A without the re-share"));
                    }
                    None
                }
                (false, Some(_)) => return Err(invalid("relu_chain: a re-share for an unlinked step")),
                (false, None) => {
                    let step_name = "TAMI re-share onto the dealt mask";
                    if b.party == 1 {
                        let d: Vec<u64> = x.v.iter().zip(b.dealt_input()).map(|(a, m)| ring.sub(*a, *m)).collect();
                        let mut msg = Vec::new();
                        pack_ring(&d, bits, &mut msg);
                        wire::send(ch, &msg)?;
                        None
                    } else {
                        let bytes = wire::recv(ch, step_name, x.len() * wire::ring_bytes(bits))?;
                        let mut d = vec![0u64; x.len()];
                        unpack_ring(step_name, &bytes, bits, &mut d)?;
                        Some(x.v.iter().zip(&d).map(|(a, c)| ring.add(*a, *c)).collect())
                    }
                }
            };
            if !link {
                let (o, _) = tami::online_next(ch, &b, y.as_deref(), tami::Next::None)?;
                let o = o.arith()?;
                if i + 1 == k {
                    return Ok(o);
                }
                x = step(i, &o)?;
                continue;
            }
            let nb = self.take_gate(ch, sizes[i + 1], widths[i + 1], swap[i + 1])?.ok_or_else(|| invalid("relu_chain: missing batch"))?;
            if nb.party == b.party {
                return Err(invalid("relu_chain: roles do not alternate"));
            }
            if b.party == 0 {
                // A: the next input from its output share, re-shared onto
                // the next batch's dealt mask (it plays B there)
                let mut nx: Option<ArithShare> = None;
                let mut hook = |o: &ArithShare| -> Result<Vec<u8>> {
                    let v = step(i, o)?;
                    if v.len() != sizes[i + 1] {
                        return Err(invalid(format!("relu_chain: step {} has {} elements, declared {}", i + 1, v.len(), sizes[i + 1])));
                    }
                    let d: Vec<u64> = v.v.iter().zip(nb.dealt_input()).map(|(a, m)| ring.sub(*a, *m)).collect();
                    let mut msg = Vec::new();
                    pack_ring(&d, bits, &mut msg);
                    nx = Some(v);
                    Ok(msg)
                };
                tami::online_next(ch, &b, y.as_deref(), tami::Next::Send(&mut hook))?;
                x = nx.ok_or_else(|| invalid("relu_chain: the next input was not formed"))?;
            } else {
                let len = sizes[i + 1] * wire::ring_bytes(bits);
                let (o, p) = tami::online_next(ch, &b, None, tami::Next::Recv(len))?;
                x = step(i, &o.arith()?)?;
                incoming = Some(p);
            }
            pending = Some(nb);
        }
        unreachable!("the last step returns")
    }

    /// The single TAMI batch of a chained ReLU step.
    fn take_gate(&mut self, ch: &mut dyn Channel, n: usize, w: u32, swap: bool) -> Result<Option<tami::TamiBatch>> {
        match self.take(ch, Need::Relu { n, w, swap })? {
            None => Ok(None),
            Some(Pre::Relu(mut g)) if g.len() == 1 => match g.pop() {
                Some(Gate::Tami(b)) => Ok(Some(b)),
                _ => Err(invalid("preprocessing: not a TAMI batch")),
            },
            Some(_) => Err(invalid("preprocessing: not a single ReLU batch")),
        }
    }

    /// ⌊x / 2^f⌋ (signed) for |x| < 2^{ℓ−2}, result ⌊x/2^f⌋ or ⌊x/2^f⌋ + 1
    /// (one opening; see the module docs for the derivation and the view).
    pub fn trunc(&mut self, ch: &mut dyn Channel, x: &ArithShare, f: u32) -> Result<ArithShare> {
        let r = x.ring;
        let l = r.bits();
        if f == 0 || f + 2 > l {
            return Err(invalid(format!("truncation by {f} bits in a {l}-bit ring")));
        }
        let n = x.len();
        if n == 0 {
            return Ok(self.zeros(0));
        }
        if self.is_clear() {
            return Ok(ArithShare { ring: r, v: x.v.iter().map(|&a| FixedPoint::trunc_ref(r, a, f)).collect() });
        }
        let party = self.party;
        let Some(pre) = self.take(ch, Need::Trunc { n, f })? else { return Ok(self.zeros(n)) };
        if let Pre::Wrap(w) = &pre {
            // interactive mode: the wrap-bit truncation (one bit each way)
            let step = "wrap-bit truncation: the peer's masked MSB bits";
            let mine = interactive::wrap_trunc_bits(r, party, &x.v, w)?;
            let peer = wire::exchange(ch, step, &mine)?;
            let peer = interactive::unpack_bits(step, &peer, n)?;
            return Ok(ArithShare { ring: r, v: interactive::wrap_trunc_finish(r, party, &x.v, f, w, &peer) });
        }
        let Pre::Trunc(t) = pre else { return Err(invalid("preprocessing: not a truncation batch")) };
        let bias = 1u64 << (l - 2);
        let mine: Vec<u64> = (0..n).map(|i| r.add(r.add(x.v[i], t.r[i]), if party == 0 { bias } else { 0 })).collect();
        let step = "truncation: opening x + 2^(ℓ−2) + r";
        let mut msg = Vec::new();
        pack_ring(&mine, l, &mut msg);
        let peer = wire::exchange(ch, step, &msg)?;
        let mut c = vec![0u64; n];
        unpack_ring(step, &peer, l, &mut c)?;
        let top = 1u64 << (l - f); // 2^{ℓ−f} (ℓ − f ≤ 63)
        let off = 1u64 << (l - 2 - f);
        let v = (0..n)
            .map(|i| {
                let ci = r.add(c[i], mine[i]);
                let not_msb = 1 - (ci >> (l - 1));
                let mut z = r.sub(r.mul(r.mul(t.msb[i], not_msb), top), t.hi[i]);
                if party == 0 {
                    z = r.add(z, r.sub(ci >> f, off));
                }
                z
            })
            .collect();
        Ok(ArithShare { ring: r, v })
    }

    /// T² where T = ⌊x/2^f⌋ or ⌊x/2^f⌋ + 1 (the truncation of
    /// [`Ctx::trunc`], same range |x| < 2^{ℓ−2}), exactly in the ring, in
    /// **one** opening: the truncation's opening c is public, T = P − R
    /// with P public and R linear in dealt shares, and the dealt
    /// truncate-and-square tuple ([`crate::deal::trunc::TruncSquares`])
    /// carries shares of r_hi² and r_hi·r_msb, so T² is linear in dealt
    /// shares too. Instead of a truncation then a one-round square (two
    /// openings). **View:** the truncation's (c uniform); nothing else is
    /// sent. The caller bounds T² (exp's squarings: T ≤ 2^{s+1}).
    pub fn trunc_square(&mut self, ch: &mut dyn Channel, x: &ArithShare, f: u32) -> Result<ArithShare> {
        let r = x.ring;
        let l = r.bits();
        if f == 0 || f + 2 > l {
            return Err(invalid(format!("truncation by {f} bits in a {l}-bit ring")));
        }
        let n = x.len();
        if n == 0 {
            return Ok(self.zeros(0));
        }
        if self.is_clear() {
            return Ok(ArithShare { ring: r, v: x.v.iter().map(|&a| { let t = FixedPoint::trunc_ref(r, a, f); r.mul(t, t) }).collect() });
        }
        if self.is_interactive() {
            // interactive mode: the wrap-bit truncation then a square
            // (an interactive square pair, one opening): two flights
            // instead of one, a truncation's 1 COT + a square's ℓ one-way
            // COTs instead of the pair's ℓ, the square's ℓ and 2 more
            let t = self.trunc(ch, x, f)?;
            return Ok(self.powers(ch, &t, 2)?.pop().expect("two powers"));
        }
        let party = self.party;
        let Some(pre) = self.take(ch, Need::TruncSq { n, f })? else { return Ok(self.zeros(n)) };
        let Pre::TruncSq(t) = pre else { return Err(invalid("preprocessing: not a truncate-and-square batch")) };
        let bias = 1u64 << (l - 2);
        let mine: Vec<u64> = (0..n).map(|i| r.add(r.add(x.v[i], t.t.r[i]), if party == 0 { bias } else { 0 })).collect();
        let step = "truncate-and-square: opening x + 2^(ℓ−2) + r";
        let mut msg = Vec::new();
        pack_ring(&mine, l, &mut msg);
        let peer = wire::exchange(ch, step, &msg)?;
        let mut c = vec![0u64; n];
        unpack_ring(step, &peer, l, &mut c)?;
        let top = 1u64 << (l - f); // 2^{ℓ−f}
        let top2 = if 2 * (l - f) >= 64 { 0 } else { 1u64 << (2 * (l - f)) }; // 2^{2(ℓ−f)} mod 2^64
        let off = 1u64 << (l - 2 - f);
        let v = (0..n)
            .map(|i| {
                let ci = r.add(c[i], mine[i]);
                let alpha = 1 - (ci >> (l - 1));
                let p = r.sub(ci >> f, off);
                // R_p = hi_p − α·msb_p·2^{ℓ−f};  R²_p = sq_p − 2α·2^{ℓ−f}·hm_p + α·2^{2(ℓ−f)}·msb_p
                let rp = r.sub(t.t.hi[i], r.mul(alpha * t.t.msb[i], top));
                let r2 = r.add(r.sub(t.sq[i], r.mul(r.mul(2 * alpha, top), t.hm[i])), r.mul(alpha * t.t.msb[i], top2));
                let mut z = r.sub(r2, r.mul(r.mul(2, p), rp));
                if party == 0 {
                    z = r.add(z, r.mul(p, p));
                }
                z
            })
            .collect();
        Ok(ArithShare { ring: r, v })
    }

    /// (T, T·y) where T = ⌊x/2^f⌋ or ⌊x/2^f⌋ + 1 (the truncation of
    /// [`Ctx::trunc`], same range |x| < 2^{ℓ−2}) and T·y exactly in the
    /// ring, in **one** flight: the truncation's opening c and e = y − s
    /// for a dealt mask s are exchanged together, and the dealt
    /// truncate-and-multiply tuple ([`crate::deal::trunc::TruncMuls`]) makes
    /// T·y linear in dealt shares. Instead of a truncation then a Beaver
    /// product (two flights, three openings). **View:** c and e, each
    /// masked by a fresh uniform value the party does not know: uniform.
    pub fn trunc_mul(&mut self, ch: &mut dyn Channel, x: &ArithShare, f: u32, y: &ArithShare) -> Result<(ArithShare, ArithShare)> {
        let r = x.ring;
        let l = r.bits();
        if f == 0 || f + 2 > l {
            return Err(invalid(format!("truncation by {f} bits in a {l}-bit ring")));
        }
        let n = x.len();
        if y.len() != n {
            return Err(invalid(format!("trunc_mul: {n} and {} elements", y.len())));
        }
        if n == 0 {
            return Ok((self.zeros(0), self.zeros(0)));
        }
        if self.is_clear() {
            let t: Vec<u64> = x.v.iter().map(|&a| FixedPoint::trunc_ref(r, a, f)).collect();
            let ty = t.iter().zip(&y.v).map(|(a, b)| r.mul(*a, *b)).collect();
            return Ok((ArithShare { ring: r, v: t }, ArithShare { ring: r, v: ty }));
        }
        if self.is_interactive() {
            // interactive mode: the wrap-bit truncation then a Beaver
            // product (two flights instead of one; 1 + 2ℓ COTs per
            // element instead of the tuple's 3ℓ + 2)
            let t = self.trunc(ch, x, f)?;
            let p = self.mul(ch, &t, y)?;
            return Ok((t, p));
        }
        let party = self.party;
        let Some(pre) = self.take(ch, Need::TruncMul { n, f })? else { return Ok((self.zeros(n), self.zeros(n))) };
        let Pre::TruncMul(t) = pre else { return Err(invalid("preprocessing: not a truncate-and-multiply batch")) };
        let bias = 1u64 << (l - 2);
        let mut mine: Vec<u64> = (0..n).map(|i| r.add(r.add(x.v[i], t.t.r[i]), if party == 0 { bias } else { 0 })).collect();
        mine.extend((0..n).map(|i| r.sub(y.v[i], t.s[i])));
        let step = "truncate-and-multiply: opening x + 2^(ℓ−2) + r and y − s";
        let mut msg = Vec::new();
        pack_ring(&mine, l, &mut msg);
        let peer = wire::exchange(ch, step, &msg)?;
        let mut ce = vec![0u64; 2 * n];
        unpack_ring(step, &peer, l, &mut ce)?;
        let top = 1u64 << (l - f); // 2^{ℓ−f}
        let off = 1u64 << (l - 2 - f);
        let mut tv = Vec::with_capacity(n);
        let mut pv = Vec::with_capacity(n);
        for i in 0..n {
            let ci = r.add(ce[i], mine[i]);
            let e = r.add(ce[n + i], mine[n + i]);
            let alpha = 1 - (ci >> (l - 1));
            let p = r.sub(ci >> f, off);
            // R_p = hi_p − α·msb_p·2^{ℓ−f};  (R·s)_p = hs_p − α·2^{ℓ−f}·ms_p
            let rp = r.sub(t.t.hi[i], r.mul(alpha * t.t.msb[i], top));
            let rs = r.sub(t.hs[i], r.mul(alpha * t.ms[i], top));
            let mut tz = r.neg(rp);
            let mut z = r.sub(r.sub(r.mul(p, t.s[i]), r.mul(rp, e)), rs);
            if party == 0 {
                tz = r.add(tz, p);
                z = r.add(z, r.mul(p, e));
            }
            tv.push(tz);
            pv.push(z);
        }
        Ok((ArithShare { ring: r, v: tv }, ArithShare { ring: r, v: pv }))
    }

    /// (⌊x₁/2^f⌋, ⌊x₂/2^f⌋·y₂) — a [`Ctx::trunc`] of x₁ and a
    /// [`Ctx::trunc_mul`] of (x₂, y₂), independent of each other, in **one**
    /// exchange: the three openings (c₁, c₂, y₂ − s) travel together. The
    /// same correlations (a truncation pair, then a truncate-and-multiply
    /// tuple, in that order), the same bytes and the same view as the two
    /// calls (each opening masked by its own fresh uniform value), one
    /// flight fewer. Each truncation faithful as in [`Ctx::trunc`].
    pub fn trunc_and_trunc_mul(&mut self, ch: &mut dyn Channel, x1: &ArithShare, x2: &ArithShare, f: u32, y2: &ArithShare) -> Result<(ArithShare, ArithShare)> {
        let r = x1.ring;
        let l = r.bits();
        if f == 0 || f + 2 > l {
            return Err(invalid(format!("truncation by {f} bits in a {l}-bit ring")));
        }
        let (n1, n2) = (x1.len(), x2.len());
        if y2.len() != n2 {
            return Err(invalid(format!("trunc_and_trunc_mul: {n2} and {} elements", y2.len())));
        }
        if self.is_clear() || n1 == 0 || n2 == 0 {
            let t1 = self.trunc(ch, x1, f)?;
            let (_, p) = self.trunc_mul(ch, x2, f, y2)?;
            return Ok((t1, p));
        }
        if self.is_interactive() {
            // interactive mode: both wrap-bit truncations in one batch
            // (one flight), then the Beaver product (one flight)
            let t = self.trunc(ch, &concat(&[x1, x2]), f)?;
            let t2 = ArithShare { ring: r, v: t.v[n1..].to_vec() };
            let p = self.mul(ch, &t2, y2)?;
            return Ok((ArithShare { ring: r, v: t.v[..n1].to_vec() }, p));
        }
        let party = self.party;
        let pre1 = self.take(ch, Need::Trunc { n: n1, f })?;
        let pre2 = self.take(ch, Need::TruncMul { n: n2, f })?;
        let (Some(pre1), Some(pre2)) = (pre1, pre2) else { return Ok((self.zeros(n1), self.zeros(n2))) };
        let Pre::Trunc(t1) = pre1 else { return Err(invalid("preprocessing: not a truncation batch")) };
        let Pre::TruncMul(t2) = pre2 else { return Err(invalid("preprocessing: not a truncate-and-multiply batch")) };
        let bias = 1u64 << (l - 2);
        let b0 = if party == 0 { bias } else { 0 };
        let mut mine: Vec<u64> = (0..n1).map(|i| r.add(r.add(x1.v[i], t1.r[i]), b0)).collect();
        mine.extend((0..n2).map(|i| r.add(r.add(x2.v[i], t2.t.r[i]), b0)));
        mine.extend((0..n2).map(|i| r.sub(y2.v[i], t2.s[i])));
        let step = "truncation and truncate-and-multiply: openings";
        let mut msg = Vec::new();
        pack_ring(&mine, l, &mut msg);
        let peer = wire::exchange(ch, step, &msg)?;
        let mut c = vec![0u64; n1 + 2 * n2];
        unpack_ring(step, &peer, l, &mut c)?;
        let top = 1u64 << (l - f);
        let off = 1u64 << (l - 2 - f);
        let out1 = (0..n1)
            .map(|i| {
                let ci = r.add(c[i], mine[i]);
                let not_msb = 1 - (ci >> (l - 1));
                let mut z = r.sub(r.mul(r.mul(t1.msb[i], not_msb), top), t1.hi[i]);
                if party == 0 {
                    z = r.add(z, r.sub(ci >> f, off));
                }
                z
            })
            .collect();
        let out2 = (0..n2)
            .map(|i| {
                let ci = r.add(c[n1 + i], mine[n1 + i]);
                let e = r.add(c[n1 + n2 + i], mine[n1 + n2 + i]);
                let alpha = 1 - (ci >> (l - 1));
                let p = r.sub(ci >> f, off);
                let rp = r.sub(t2.t.hi[i], r.mul(alpha * t2.t.msb[i], top));
                let rs = r.sub(t2.hs[i], r.mul(alpha * t2.ms[i], top));
                let mut z = r.sub(r.sub(r.mul(p, t2.s[i]), r.mul(rp, e)), rs);
                if party == 0 {
                    z = r.add(z, r.mul(p, e));
                }
                z
            })
            .collect();
        Ok((ArithShare { ring: r, v: out1 }, ArithShare { ring: r, v: out2 }))
    }

    /// Full-range faithful truncation through the comparison family
    /// (`crate::nonlinear::Session::trunc`), for values with no bound.
    /// Deals on demand (not part of a plan).
    pub fn trunc_full(&mut self, ch: &mut dyn Channel, x: &ArithShare, f: u32) -> Result<ArithShare> {
        if self.is_clear() {
            return self.trunc(ch, x, f);
        }
        if let Mode::Plan(_) = self.mode {
            return Err(invalid("trunc_full deals on demand and cannot be planned"));
        }
        if let Some(ot) = self.ot.take() {
            let mut s = crate::nonlinear::Session::interactive(self.party, ot);
            s.k = self.k;
            let r = s.trunc(ch, x, f);
            self.ot = s.ot.take();
            return r;
        }
        let d = self.dealer.take().ok_or_else(|| invalid(NOT_INTERACTIVE))?;
        let mut s = crate::nonlinear::Session::tee(self.party, self.proto, d);
        s.k = self.k;
        s.arity = self.arity;
        let r = s.trunc(ch, x, f);
        self.dealer = s.dealer.take();
        r
    }

    /// x·y element-wise over the ring (no truncation): Beaver, one opening.
    pub fn mul(&mut self, ch: &mut dyn Channel, x: &ArithShare, y: &ArithShare) -> Result<ArithShare> {
        let n = x.len();
        if y.len() != n {
            return Err(invalid(format!("mul: {n} and {} elements", y.len())));
        }
        if n == 0 {
            return Ok(self.zeros(0));
        }
        if self.is_clear() {
            return Ok(x.mul_public(&y.v));
        }
        let party = self.party;
        let Some(pre) = self.take(ch, Need::Triples { n })? else { return Ok(self.zeros(n)) };
        let Pre::Triples(t) = pre else { return Err(invalid("preprocessing: not a triple batch")) };
        beaver::mul(ch, party, x, y, &t)
    }

    /// [x, x², …, x^k] over the ring (exact, no truncation). One opening of
    /// x − r with dealt shares of r, …, r^k (TAMI's one-round product), or
    /// ⌈log2 k⌉ rounds of Beaver products when `one_round` is off.
    pub fn powers(&mut self, ch: &mut dyn Channel, x: &ArithShare, k: u32) -> Result<Vec<ArithShare>> {
        if !(1..=MAX_POWER).contains(&k) {
            return Err(invalid(format!("powers up to {k}: supported 1..={MAX_POWER}")));
        }
        let n = x.len();
        let r = x.ring;
        if k == 1 || n == 0 {
            return Ok((0..k).map(|_| x.clone()).collect());
        }
        if self.is_clear() {
            let mut out = vec![x.clone()];
            for j in 1..k as usize {
                out.push(out[j - 1].mul_public(&x.v));
            }
            return Ok(out);
        }
        if !self.one_round {
            // x^j for j ≤ 2^level from products of the powers so far.
            let mut out: Vec<ArithShare> = vec![x.clone()];
            while out.len() < k as usize {
                let have = out.len();
                let hi = (2 * have).min(k as usize);
                let (mut xs, mut ys) = (Vec::new(), Vec::new());
                for j in have + 1..=hi {
                    // x^j = x^have · x^{j − have}
                    xs.extend_from_slice(&out[have - 1].v);
                    ys.extend_from_slice(&out[j - have - 1].v);
                }
                let p = self.mul(ch, &ArithShare { ring: r, v: xs }, &ArithShare { ring: r, v: ys })?;
                for c in p.v.chunks(n) {
                    out.push(ArithShare { ring: r, v: c.to_vec() });
                }
            }
            return Ok(out);
        }
        let party = self.party;
        let Some(pre) = self.take(ch, Need::Powers { n, k })? else { return Ok((0..k).map(|_| self.zeros(n)).collect()) };
        let Pre::Powers(t) = pre else { return Err(invalid("preprocessing: not a power-tuple batch")) };
        let l = r.bits();
        let mine: Vec<u64> = (0..n).map(|i| r.sub(x.v[i], t.pows[0][i])).collect();
        let step = "one-round powers: opening x − r";
        let mut msg = Vec::new();
        pack_ring(&mine, l, &mut msg);
        let peer = wire::exchange(ch, step, &msg)?;
        let mut d = vec![0u64; n];
        unpack_ring(step, &peer, l, &mut d)?;
        d.iter_mut().zip(&mine).for_each(|(a, b)| *a = r.add(*a, *b));
        // binomials C(j, i), j ≤ k ≤ 8
        let mut binom = [[0u64; 9]; 9];
        for j in 0..9 {
            binom[j][0] = 1;
            for i in 1..=j {
                binom[j][i] = binom[j - 1][i - 1] + if i < j { binom[j - 1][i] } else { 0 };
            }
        }
        let mut out: Vec<ArithShare> = (0..k).map(|_| self.zeros(n)).collect();
        let mut dp = vec![0u64; k as usize + 1];
        for i in 0..n {
            dp[0] = 1;
            for j in 1..=k as usize {
                dp[j] = r.mul(dp[j - 1], d[i]);
            }
            for j in 1..=k as usize {
                // x^j = Σ_i C(j, i) d^{j−i} r^i, with ⟨r^0⟩ = [party 0]
                let mut acc = if party == 0 { dp[j] } else { 0 };
                for q in 1..=j {
                    acc = r.add(acc, r.mul(r.mul(binom[j][q], dp[j - q]), t.pows[q - 1][i]));
                }
                out[j - 1].v[i] = acc;
            }
        }
        Ok(out)
    }

    /// ∏_j x_j element-wise for 2..=4 distinct factors, over the ring (no
    /// truncation). One opening of all x_j − r_j with dealt subset
    /// products of the masks (TAMI-MPC §3.2 eqs. 1-3 over Z_2^ℓ,
    /// [`crate::deal::subset`]), or ⌈log2 d⌉ rounds of Beaver products when
    /// `one_round` is off. **View:** the openings are masked by fresh
    /// uniform r_j the party does not know: uniform.
    pub fn product(&mut self, ch: &mut dyn Channel, xs: &[&ArithShare]) -> Result<ArithShare> {
        let d = xs.len();
        if !(2..=MAX_FACTORS as usize).contains(&d) {
            return Err(invalid(format!("product of {d} factors: supported 2..={MAX_FACTORS}")));
        }
        let n = xs[0].len();
        if xs.iter().any(|x| x.len() != n) {
            return Err(invalid("product: factors of different lengths"));
        }
        let r = xs[0].ring;
        if n == 0 {
            return Ok(self.zeros(0));
        }
        if self.is_clear() {
            return Ok(xs[1..].iter().fold(xs[0].clone(), |a, x| a.mul_public(&x.v)));
        }
        if !self.one_round {
            let mut cur: Vec<ArithShare> = xs.iter().map(|x| (*x).clone()).collect();
            while cur.len() > 1 {
                let half = cur.len() / 2;
                let (mut a, mut b) = (Vec::new(), Vec::new());
                for p in 0..half {
                    a.extend_from_slice(&cur[2 * p].v);
                    b.extend_from_slice(&cur[2 * p + 1].v);
                }
                let z = self.mul(ch, &ArithShare { ring: r, v: a }, &ArithShare { ring: r, v: b })?;
                let mut next = split(&z, n);
                if cur.len() % 2 == 1 {
                    next.push(cur[cur.len() - 1].clone());
                }
                cur = next;
            }
            return Ok(cur.pop().expect("one factor left"));
        }
        let party = self.party;
        let Some(pre) = self.take(ch, Need::Product { n, d: d as u32 })? else { return Ok(self.zeros(n)) };
        let Pre::Product(t) = pre else { return Err(invalid("preprocessing: not a subset-product batch")) };
        let l = r.bits();
        let mut mine = Vec::with_capacity(d * n);
        for (j, x) in xs.iter().enumerate() {
            mine.extend(x.v.iter().zip(&t.sets[(1 << j) - 1]).map(|(a, m)| r.sub(*a, *m)));
        }
        let step = "one-round product: opening x_j − r_j";
        let mut msg = Vec::new();
        pack_ring(&mine, l, &mut msg);
        let peer = wire::exchange(ch, step, &msg)?;
        let mut e = vec![0u64; d * n];
        unpack_ring(step, &peer, l, &mut e)?;
        e.iter_mut().zip(&mine).for_each(|(a, b)| *a = r.add(*a, *b));
        let full = (1usize << d) - 1;
        let v = (0..n)
            .map(|i| {
                // Σ_S (∏_{j∉S} e_j)·⟨r_S⟩, with ⟨r_∅⟩ = [party 0]
                let mut acc = 0u64;
                for s in 0..=full {
                    let ep = (0..d).filter(|j| s >> j & 1 == 0).fold(1u64, |a, j| r.mul(a, e[j * n + i]));
                    let rs = if s == 0 { u64::from(party == 0) } else { t.sets[s - 1][i] };
                    acc = r.add(acc, r.mul(ep, rs));
                }
                acc
            })
            .collect();
        Ok(ArithShare { ring: r, v })
    }

    /// `count` products A_q·B_q of secret matrices (A_q m×k, B_q k×n,
    /// row-major, concatenated) over the ring, no truncation: one opening of
    /// A − A', B − B' with a dealt matrix triple (A', B', C' = A'B'), then
    /// Z = C' + E·B' + A'·F (+ E·F at party 0).
    pub fn matmul(&mut self, ch: &mut dyn Channel, a: &ArithShare, b: &ArithShare, count: usize, d: MatDims) -> Result<ArithShare> {
        let r = a.ring;
        let (ma, mb, mc) = (d.m * d.k, d.k * d.n, d.m * d.n);
        if d.m == 0 || d.k == 0 || d.n == 0 || a.len() != count * ma || b.len() != count * mb {
            return Err(invalid(format!("matmul: {count} products of {}×{}·{}×{} do not match {} and {} elements", d.m, d.k, d.k, d.n, a.len(), b.len())));
        }
        if count == 0 {
            return Ok(self.zeros(0));
        }
        let mut out = vec![0u64; count * mc];
        if self.is_clear() {
            for q in 0..count {
                crate::deal::matrix::matmul_ring(&a.v[q * ma..(q + 1) * ma], &b.v[q * mb..(q + 1) * mb], d, &mut out[q * mc..(q + 1) * mc]);
            }
            return Ok(ArithShare::new(r, out));
        }
        let party = self.party;
        let Some(pre) = self.take(ch, Need::Matrix { count, d })? else { return Ok(self.zeros(count * mc)) };
        let Pre::Matrix(t) = pre else { return Err(invalid("preprocessing: not a matrix-triple batch")) };
        let l = r.bits();
        let mut mine: Vec<u64> = a.v.iter().zip(&t.a).map(|(x, y)| r.sub(*x, *y)).collect();
        mine.extend(b.v.iter().zip(&t.b).map(|(x, y)| r.sub(*x, *y)));
        let step = "matrix Beaver product: openings";
        let mut msg = Vec::new();
        pack_ring(&mine, l, &mut msg);
        let peer = wire::exchange(ch, step, &msg)?;
        let mut ef = vec![0u64; mine.len()];
        unpack_ring(step, &peer, l, &mut ef)?;
        ef.iter_mut().zip(&mine).for_each(|(p, q)| *p = p.wrapping_add(*q));
        let (e, f) = ef.split_at(count * ma);
        let mut tmp = vec![0u64; mc];
        for q in 0..count {
            let o = &mut out[q * mc..(q + 1) * mc];
            o.copy_from_slice(&t.c[q * mc..(q + 1) * mc]);
            let (eq, fq) = (&e[q * ma..(q + 1) * ma], &f[q * mb..(q + 1) * mb]);
            let (aq, bq) = (&t.a[q * ma..(q + 1) * ma], &t.b[q * mb..(q + 1) * mb]);
            let mut acc = |x: &[u64], y: &[u64]| {
                crate::deal::matrix::matmul_ring(x, y, d, &mut tmp);
                o.iter_mut().zip(&tmp).for_each(|(p, q)| *p = p.wrapping_add(*q));
            };
            if party == 0 {
                // E·B' + A'·F + E·F = E·(B' + F) + A'·F
                let bf: Vec<u64> = bq.iter().zip(fq).map(|(x, y)| x.wrapping_add(*y)).collect();
                acc(eq, &bf);
            } else {
                acc(eq, bq);
            }
            acc(aq, fq);
        }
        Ok(ArithShare::new(r, out))
    }
    /// `count` products X_q·W_q where X_q (m×k) is shared and W_q (k×n) is
    /// **party 0's own** matrix (`w`, ignored at party 1), over the ring, no
    /// truncation: one exchange with a one-sided triple
    /// ([`crate::deal::matrix::WeightTriples`]). Party 1 sends U = X₁ − A
    /// (m·k words per product), party 0 sends V = W − B (k·n words); party 0
    /// computes (X₀ + U)·W + C₀ and party 1 A·V + C₁.
    pub fn weight_matmul(&mut self, ch: &mut dyn Channel, x: &ArithShare, w: &[u64], count: usize, d: MatDims) -> Result<ArithShare> {
        self.weight_matmul_impl(ch, x, w, count, d, false)
    }

    /// [`Ctx::weight_matmul`] where X is **party 1's own input** (party 0's
    /// share is zero; e.g. the one-hot rows of the client's token ids times
    /// an embedding table): the same triple and the same two messages (U =
    /// X₁ − A, V = W − B), so both views are exactly those of
    /// `weight_matmul`; only the local products differ. Party 0 computes
    /// U·B + C₀ (it holds B) and party 1 X₁·V + C₁, which sum to
    ///
    /// > (X₁ − A)·B + A·B + X₁·(W − B) = X₁·W,
    ///
    /// and party 1's product skips X₁'s zero entries: for one-hot rows it is
    /// a row lookup of V instead of the dense A·V (m·k·n multiply-adds; for
    /// BERT-base's embedding, 3·10⁹). Party 0 refuses a non-zero share.
    pub fn weight_matmul_client_input(&mut self, ch: &mut dyn Channel, x: &ArithShare, w: &[u64], count: usize, d: MatDims) -> Result<ArithShare> {
        if self.party == 0 && x.v.iter().any(|&v| v != 0) {
            return Err(invalid("weight matmul of the client's input: party 0's share must be zero"));
        }
        self.weight_matmul_impl(ch, x, w, count, d, true)
    }

    fn weight_matmul_impl(&mut self, ch: &mut dyn Channel, x: &ArithShare, w: &[u64], count: usize, d: MatDims, client_input: bool) -> Result<ArithShare> {
        let r = x.ring;
        let (ma, mb, mc) = (d.m * d.k, d.k * d.n, d.m * d.n);
        if d.m == 0 || d.k == 0 || d.n == 0 || x.len() != count * ma || (self.party == 0 && w.len() != count * mb) {
            return Err(invalid(format!("weight matmul: {count} products of {}×{}·{}×{} do not match {} and {} elements", d.m, d.k, d.k, d.n, x.len(), w.len())));
        }
        if count == 0 {
            return Ok(self.zeros(0));
        }
        let mut out = vec![0u64; count * mc];
        if self.is_clear() {
            for q in 0..count {
                crate::deal::matrix::matmul_ring(&x.v[q * ma..(q + 1) * ma], &w[q * mb..(q + 1) * mb], d, &mut out[q * mc..(q + 1) * mc]);
            }
            out.iter_mut().for_each(|v| *v = r.reduce(*v));
            return Ok(ArithShare::new(r, out));
        }
        let party = self.party;
        let Some(pre) = self.take(ch, Need::Weight { count, d })? else { return Ok(self.zeros(count * mc)) };
        let Pre::Weight(t) = pre else { return Err(invalid("preprocessing: not a weight-triple batch")) };
        let l = r.bits();
        let step = "weight product: openings";
        let mut msg = Vec::new();
        // V = W − B goes in blocks of rows (one message each, the same
        // bytes in the same flight), so that the client multiplies one
        // block while the next is on the wire. The views are unchanged: the
        // client receives the same uniform V (B is uniform and fresh),
        // framed by a public function of the shape; the server the same U.
        let rows = weight_block_rows(d);
        if party == 0 {
            let mut v: Vec<u64> = w.iter().zip(&t.ab).map(|(a, b)| r.sub(*a, *b)).collect();
            for q in 0..count {
                for t0 in (0..d.k).step_by(rows) {
                    let t1 = (t0 + rows).min(d.k);
                    msg.clear();
                    pack_ring(&v[q * mb + t0 * d.n..q * mb + t1 * d.n], l, &mut msg);
                    wire::send(ch, &msg)?;
                }
            }
            v.zeroize();
            let mut u = vec![0u64; count * ma];
            let peer = wire::recv(ch, step, u.len() * wire::ring_bytes(l))?;
            unpack_ring(step, &peer, l, &mut u)?;
            // standard: (X₀ + U)·W; the client's input (X₀ = 0): U·B
            let right = if client_input { &t.ab } else { w };
            if !client_input {
                u.iter_mut().zip(&x.v).for_each(|(p, q)| *p = p.wrapping_add(*q));
            }
            for q in 0..count {
                let o = &mut out[q * mc..(q + 1) * mc];
                crate::deal::matrix::matmul_ring(&u[q * ma..(q + 1) * ma], &right[q * mb..(q + 1) * mb], d, o);
            }
        } else {
            let u: Vec<u64> = x.v.iter().zip(&t.ab).map(|(a, b)| r.sub(*a, *b)).collect();
            pack_ring(&u, l, &mut msg);
            wire::send(ch, &msg)?;
            let mut v = vec![0u64; rows * d.n];
            let mut ablk = Vec::new();
            let mut part = Vec::new();
            for q in 0..count {
                let o = &mut out[q * mc..(q + 1) * mc];
                let xq = &x.v[q * ma..(q + 1) * ma];
                let aq = &t.ab[q * ma..(q + 1) * ma];
                for t0 in (0..d.k).step_by(rows) {
                    let t1 = (t0 + rows).min(d.k);
                    let kb = t1 - t0;
                    let vb = &mut v[..kb * d.n];
                    let peer = wire::recv(ch, step, vb.len() * wire::ring_bytes(l))?;
                    unpack_ring(step, &peer, l, vb)?;
                    if client_input {
                        // X₁·V over X₁'s non-zero entries (a row lookup for one-hot rows)
                        for i in 0..d.m {
                            let row = &mut o[i * d.n..(i + 1) * d.n];
                            for (kk, &xv) in xq[i * d.k + t0..i * d.k + t1].iter().enumerate().filter(|(_, &xv)| xv != 0) {
                                for (acc, &vv) in row.iter_mut().zip(&vb[kk * d.n..(kk + 1) * d.n]) {
                                    *acc = acc.wrapping_add(xv.wrapping_mul(vv));
                                }
                            }
                        }
                    } else {
                        // A[:, t0..t1] · V[t0..t1, :], added to the output
                        ablk.clear();
                        for i in 0..d.m {
                            ablk.extend_from_slice(&aq[i * d.k + t0..i * d.k + t1]);
                        }
                        if kb == d.k {
                            crate::deal::matrix::matmul_ring(&ablk, vb, d, o);
                        } else {
                            part.clear();
                            part.resize(mc, 0u64);
                            crate::deal::matrix::matmul_ring(&ablk, vb, MatDims { m: d.m, k: kb, n: d.n }, &mut part);
                            o.iter_mut().zip(&part).for_each(|(a, b)| *a = a.wrapping_add(*b));
                        }
                    }
                }
            }
        }
        out.iter_mut().zip(&t.c).for_each(|(o, c)| *o = r.add(r.reduce(*o), *c));
        Ok(ArithShare::new(r, out))
    }
}


/// Rows of V = W − B per message in a weight product: about 1 MiB of
/// ring words (at least one row), so the client multiplies a block while
/// the next is in flight. Public (a function of the shape).
fn weight_block_rows(d: MatDims) -> usize {
    ((1usize << 17) / d.n.max(1)).clamp(1, d.k.max(1))
}

/// Concatenates share vectors (one batched call for several operands).
pub fn concat(parts: &[&ArithShare]) -> ArithShare {
    let ring = parts.first().map(|p| p.ring).unwrap_or_else(|| Ring::new(64).expect("64"));
    ArithShare { ring, v: parts.iter().flat_map(|p| p.v.iter().copied()).collect() }
}

/// Splits a batched result back into `k` parts of `n` elements.
pub fn split(x: &ArithShare, n: usize) -> Vec<ArithShare> {
    x.v.chunks(n.max(1)).map(|c| ArithShare { ring: x.ring, v: c.to_vec() }).collect()
}

/// `n` items dealt in dealings of at most `per` (each one request, parsed
/// by `one(m)`), appended in order into `acc` by `append`.
fn in_dealings<S>(n: usize, per: usize, mut acc: S, mut one: impl FnMut(usize) -> Result<S>, append: impl Fn(&mut S, &S)) -> Result<S> {
    let mut done = 0;
    while done < n {
        let m = (n - done).min(per);
        let p = one(m)?;
        append(&mut acc, &p);
        done += m;
    }
    Ok(acc)
}

/// This party's share of `n` items of a truncation kind (`S`: its share
/// type, `request`: its request), in crossings of at most `per` items,
/// collected in one [`TruncSink`] whose arrays are reserved once for all
/// `n`. Each crossing takes the direct path when the module offers it (the
/// in-process module: values appended into the arrays, no wire bytes,
/// `hush_tee::TrustedModule::deal_into`) and the bytes path otherwise (the
/// module process, the dealer service: decoded into the same arrays). Both
/// give the same share for the same batch (`deal::trunc`'s
/// `direct_path_equals_decoded_bytes`) and count the same dealt bytes.
fn deal_trunc_kind<S: TruncArrays>(d: &mut Dealer, n: usize, per: usize, bits: u32, f: u32, request: fn(u64, u32, u32, u32) -> hush_deal::DealRequest) -> Result<S> {
    let mut sink = TruncSink::<S>::new(n, bits, f);
    let mut done = 0;
    while done < n {
        let m = (n - done).min(per);
        let req = request(d.next_batch(), m as u32, bits, f);
        if !d.deal_into(&req, &mut sink)? {
            let mut bytes = d.deal(req)?;
            let r = sink.extend_bytes(&bytes, m);
            hush_primitives::wipe::wipe_vec(&mut bytes);
            r?;
        }
        done += m;
    }
    Ok(sink.into_share())
}

/// Appends column-wise (one vector per power or subset).
fn append_columns(t: &mut [Vec<u64>], p: &[Vec<u64>]) {
    for (a, b) in t.iter_mut().zip(p) {
        a.extend_from_slice(b);
    }
}

#[cfg(test)]
mod direct_tests {
    use super::*;
    use crate::share::share_arith;
    use hush_primitives::{Block, Prg};
    use hush_tee::{InProcessModule, Module, ModuleRole, Request, Response, TrustedModule};
    use hush_transport::MemChannel;

    /// An in-process module that only ever releases bytes (as a module
    /// process or a dealer service does): `deal_into` is the default.
    struct BytesOnly(InProcessModule);
    impl TrustedModule for BytesOnly {
        fn call(&mut self, req: &Request) -> hush_tee::Result<Response> {
            self.0.call(req)
        }
        fn stats(&self) -> hush_tee::ModuleStats {
            self.0.stats()
        }
        fn describe(&self) -> String {
            self.0.describe()
        }
    }

    /// Party `party`'s dealer on a module with session seed `seed`: the
    /// in-process module (direct path) or the same module bytes-only.
    fn dealer(party: Party, seed: u8, direct: bool) -> Dealer {
        let role = if party == 0 { ModuleRole::Sender } else { ModuleRole::Receiver };
        let m = InProcessModule::new(Module::with_session_seed(role, &[seed; 32]).with_kinds(crate::deal::kinds()));
        if direct {
            Dealer::new(Box::new(m))
        } else {
            Dealer::new(Box::new(BytesOnly(m)))
        }
    }

    fn cols(p: &Pre) -> Vec<Vec<u64>> {
        match p {
            Pre::Trunc(t) => t.clone().arrays_mut().into_iter().map(|a| a.clone()).collect::<Vec<_>>(),
            Pre::TruncSq(t) => t.clone().arrays_mut().into_iter().map(|a| a.clone()).collect(),
            Pre::TruncMul(t) => t.clone().arrays_mut().into_iter().map(|a| a.clone()).collect(),
            _ => panic!("not a truncation kind"),
        }
    }

    /// Truncation, truncate-and-square and truncate-and-multiply over the
    /// in-process module's direct path and over a bytes-only module with
    /// the same session seed: the same dealt values (whole needs, and a
    /// need dealt in several crossings), the same dealt bytes and module
    /// crossings, and the same output shares at random inputs — which
    /// open to ⌊x/2^f⌋ or ⌊x/2^f⌋ + 1 (and its square / product).
    #[test]
    fn truncation_direct_path_equals_byte_path() {
        for (bits, frac) in [(64u32, 12u32), (32, 8)] {
            let fx = FixedPoint::new(bits, frac).unwrap();
            let ring = fx.ring;
            let n = 5000; // more than one part of the in-place builders
            let f = frac;
            let plan = [Need::Trunc { n, f }, Need::TruncSq { n, f }, Need::TruncMul { n, f }, Need::Trunc { n: 3, f: f + 1 }];
            for party in 0..2u8 {
                let what = format!("ring {bits} party {party}");
                let mut ca = Ctx::new(party, Proto::Tami, dealer(party, 7, true), fx).unwrap();
                let mut cb = Ctx::new(party, Proto::Tami, dealer(party, 7, false), fx).unwrap();
                let (pa, pb) = (ca.deal_plan(&plan).unwrap(), cb.deal_plan(&plan).unwrap());
                for ((na, xa), (nb, xb)) in pa.0.iter().zip(&pb.0) {
                    assert_eq!(na, nb);
                    let (va, vb) = (cols(xa), cols(xb));
                    assert_eq!(va, vb, "{what}: {na:?}");
                    assert!(va[0].len() == na.kind_and_size().1 as usize, "{what}: {na:?}");
                }
                let (da, db) = (ca.dealer().unwrap(), cb.dealer().unwrap());
                assert_eq!(da.dealt_bytes, db.dealt_bytes, "{what}");
                assert_eq!(da.stats().crossings, db.stats().crossings, "{what}");
                assert_eq!(da.stats().bytes_from_module, db.stats().bytes_from_module, "{what}");
                // several crossings into one sink
                let (mut a, mut b) = (ca.into_dealer().unwrap(), cb.into_dealer().unwrap());
                let sa: TruncMulShare = deal_trunc_kind(&mut a, 7000, 3000, bits, f, TruncMuls::request).unwrap();
                let sb: TruncMulShare = deal_trunc_kind(&mut b, 7000, 3000, bits, f, TruncMuls::request).unwrap();
                assert_eq!(sa, sb, "{what}: three crossings");
                assert_eq!(sa.t.r.len(), 7000);
                assert_eq!((a.dealt_bytes, a.stats().crossings), (b.dealt_bytes, b.stats().crossings), "{what}");
                // a different session seed deals other values
                let mut c = dealer(party, 8, true);
                let sc: TruncMulShare = deal_trunc_kind(&mut c, 10, 10, bits, f, TruncMuls::request).unwrap();
                let sd: TruncMulShare = deal_trunc_kind(&mut dealer(party, 7, true), 10, 10, bits, f, TruncMuls::request).unwrap();
                assert_ne!(sc, sd, "{what}");
            }

            // online: both parties, direct against bytes, lazy dealing
            let lim = 1u64 << (bits - 3); // |x| < 2^{ℓ−3}: inside the truncation's range
            let mut prg = Prg::new(Block(0x7e57 + bits as u128));
            let xs: Vec<u64> = (0..n).map(|i| if i % 2 == 0 { prg.next_u64() % lim } else { ring.neg(prg.next_u64() % lim) }).collect();
            let small = 1u64 << (bits / 2 - f / 2 - 2); // |x / 2^f| · |y| stays in range
            let ys: Vec<u64> = (0..n).map(|_| prg.next_u64() % small).collect();
            let (x0, x1) = share_arith(ring, &xs, &mut prg);
            let (y0, y1) = share_arith(ring, &ys, &mut prg);
            type Outs = [Vec<u64>; 4];
            let run = |direct: bool| -> (Outs, Outs) {
                let (mut c0, mut c1) = MemChannel::pair();
                let (x0, x1, y0, y1) = (x0.clone(), x1.clone(), y0.clone(), y1.clone());
                let go = move |party: Party, ch: &mut MemChannel, x: ArithShare, y: ArithShare| -> Outs {
                    let mut c = Ctx::new(party, Proto::Tami, dealer(party, 9, direct), fx).unwrap();
                    let t = c.trunc(ch, &x, f).unwrap();
                    let s = c.trunc_square(ch, &x, f).unwrap();
                    let (tm, p) = c.trunc_mul(ch, &x, f, &y).unwrap();
                    [t.v.clone(), s.v.clone(), tm.v.clone(), p.v.clone()]
                };
                let h = std::thread::spawn(move || go(1, &mut c1, x1, y1));
                let o0 = go(0, &mut c0, x0, y0);
                (o0, h.join().unwrap())
            };
            let (d, b) = (run(true), run(false));
            assert_eq!(d, b, "ring {bits}: output shares");
            // the outputs are right (so the equality above is not of garbage)
            let open = |k: usize, i: usize| ring.add(d.0[k][i], d.1[k][i]);
            for i in 0..n {
                let fl = FixedPoint::trunc_ref(ring, xs[i], f);
                let near = |t: u64| t == fl || t == ring.add(fl, 1);
                assert!(near(open(0, i)), "ring {bits}: trunc of {} at {i}", xs[i]);
                let sq = open(1, i);
                assert!(sq == ring.mul(fl, fl) || sq == ring.mul(ring.add(fl, 1), ring.add(fl, 1)), "ring {bits}: square at {i}");
                let tm = open(2, i);
                assert!(near(tm), "ring {bits}: trunc_mul's truncation at {i}");
                assert_eq!(open(3, i), ring.mul(tm, ys[i]), "ring {bits}: product at {i}");
            }
        }
    }
}
