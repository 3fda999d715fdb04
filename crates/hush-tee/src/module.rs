//! The trusted module: a state machine driven by [`Request`]s.
//!
//! **Adding a dealing kind.** A stateless two-party kind (triples, tables,
//! keys) is a [`hush_deal::Description`] written next to the protocol that
//! consumes it and registered with the providers ([`Module::with_kinds`],
//! the dealer service); it travels as [`Request::Deal`] and is dispatched
//! by [`crate::deal`]. A kind with module state (the SilentFlow walk, the
//! linear layers' loaded weights) is a [`Request`] variant with its own
//! dispatch arm in [`Module::handle`]. Each kind must
//! (1) release only the calling host's share, (2) take only
//! input-independent parameters (sizes, batch numbers) — never online
//! inputs, (3) erase its per-batch state once released, and (4) never
//! release the same values twice: batch numbers are checked by the module
//! (strictly increasing per kind, see [`crate::deal`] and
//! [`crate::linear_deal`]; the SilentFlow kinds require the next batch).
//!
//! ## Dealing kinds so far (SilentFlow, §III-B)
//! * [`Request::CotInit`] — the initial correlation w = v ⊕ u·Δ of length k
//!   (sender host gets Δ and v, receiver host gets w; u = lsb(w), see below).
//! * [`Request::GgmRoots`] — the sender host gets the roots of the batch's t
//!   GGM trees (one crossing per batch).
//! * [`Request::GgmLevel`] — the receiver's module walks the secret paths of
//!   all t trees of a batch and releases the off-path ("red") seeds level by
//!   level: crossing j ∈ 1..h−1 releases level j (crossing 1 also the
//!   punctured positions α, crossing h−1 also level h and the masked
//!   punctured leaves s_α ⊕ Δ), so a batch costs exactly h−1 crossings
//!   whatever the number of trees.
//!
//! Conventions: Δ has its least significant bit set, the sender's blocks
//! (v, GGM leaves) have theirs cleared, so the receiver's choice bit of a
//! COT is the lsb of its block (as in emp-ot's Ferret).

use crate::attest::{Attester, EvidenceSource, SimulatedAttester, SimulatedVerifier, Verifier};
use crate::handshake::{Handshake, SessionKeys};
use crate::wire::{Reader, Writer};
use crate::{ggm, Error, Result};
use hush_primitives::aes::Aes128;
use hush_primitives::{Block, Prg};
use zeroize::Zeroize;

/// Which side of the correlations this module's host holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModuleRole {
    /// COT sender (holds Δ).
    Sender,
    /// COT receiver (holds the choice bits).
    Receiver,
}

impl ModuleRole {
    pub fn byte(self) -> u8 {
        match self {
            ModuleRole::Sender => 0,
            ModuleRole::Receiver => 1,
        }
    }
    pub fn from_byte(b: u8) -> Result<Self> {
        match b {
            0 => Ok(ModuleRole::Sender),
            1 => Ok(ModuleRole::Receiver),
            _ => Err(Error::Malformed(format!("role byte {b}"))),
        }
    }
}

/// Largest GGM tree height and tree count a request may ask for.
pub const MAX_HEIGHT: u32 = 24;
pub const MAX_TREES: u32 = 1 << 16;
/// Largest initial correlation.
pub const MAX_K: u32 = 1 << 22;

/// Everything a host may ask its module. Add new dealing kinds here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Start seed agreement in the given role; returns this module's hello.
    Hello { role: ModuleRole },
    /// The peer module's hello (relayed by the host); returns the key-confirmation tag.
    PeerHello { hello: Vec<u8> },
    /// The peer module's key-confirmation tag; completes seed agreement.
    PeerConfirm { tag: [u8; 32] },
    /// Hardware evidence for this module's handshake key and the peer
    /// party's `nonce` (at most 64 bytes), between [`Request::Hello`] and
    /// [`Request::PeerConfirm`]; refused by a module without an evidence
    /// source (the simulated module). See [`crate::handshake`].
    Evidence { nonce: Vec<u8> },
    /// SilentFlow initial correlation of length `k` (once per session).
    CotInit { k: u32 },
    /// SilentFlow sender: roots of the `trees` GGM trees of `batch`.
    GgmRoots { batch: u64, trees: u32, height: u32 },
    /// SilentFlow receiver: crossing `level` (1..=height−1) of `batch`.
    GgmLevel { batch: u64, trees: u32, height: u32, level: u32 },
    /// Module-dealt linear layers (load the server's weights; deal B, R_C
    /// or W·B − R_C): see [`crate::linear_deal`].
    Linear(crate::linear_deal::LinearRequest),
    /// As [`Request::Linear`], from a host that expands its masks itself:
    /// the client's deal is answered with [`Response::Seed`] (see
    /// [`crate::linear_deal::handle_seeded`]). What the dealer service's
    /// parties send.
    LinearSeeded(crate::linear_deal::LinearRequest),
    /// A two-party dealing kind (Beaver/AND triples, TAMI comparison
    /// batches, ...): see [`crate::deal`].
    Deal(crate::deal::DealRequest),
    /// As [`Request::Deal`], from a host that can expand a seeded share
    /// itself: where the kind's seeded party is this module's, the answer
    /// is [`Response::Seed`] (the 16-byte sub-key) instead of the share.
    /// What the dealer service's parties send; see [`crate::deal`].
    DealSeeded(crate::deal::DealRequest),
    /// **A dealing plan** (dealer service, server role only): the dealing
    /// requests this host will send next, in order. The dealer computes
    /// both roles' shares of them ahead, into its own memory (up to its
    /// per-session budget), and answers [`Response::Planned`] once it has
    /// computed as far as the budget allows — so that work is done before
    /// the client's input exists. Nothing is released by a plan: each
    /// share still goes out only on its own role's request (see
    /// `crate::dealer`, "Dealing plans"). A module has nothing to plan and
    /// answers `Planned` with zeros.
    Plan(Vec<crate::deal::DealRequest>),
    /// **INSECURE, tests only.** Installs a host-chosen session seed instead
    /// of running seed agreement, so that the same protocol run on
    /// different providers (in-process module, module process, dealer
    /// service) can be compared bit for bit. A module refuses it unless it
    /// was created with [`Module::insecure_test_mode`] (the module binary:
    /// only when started with `--insecure-test-seed`, which no `hush`
    /// command passes). A host that picks its modules' seed knows the peer's
    /// shares: never use it outside tests.
    InsecureTestSeed { role: ModuleRole, seed: [u8; 32] },
}

/// What the module releases.
#[derive(Debug, PartialEq, Eq)]
pub enum Response {
    Hello(Vec<u8>),
    Confirm([u8; 32]),
    Established,
    /// Encoded hardware evidence (`hush-attest` format) for a [`Request::Evidence`].
    Evidence(Vec<u8>),
    /// Sender's share of the initial correlation.
    CotSenderInit { delta: Block, v: Vec<Block> },
    /// Receiver's share: w = v ⊕ u·Δ with u = lsb(w).
    CotReceiverInit { w: Vec<Block> },
    GgmRoots(Vec<Block>),
    /// `alphas` only in crossing 1; `leaf_red` and `masked` only in the last.
    GgmLevel { alphas: Vec<u32>, red: Vec<Block>, leaf_red: Vec<Block>, masked: Vec<Block> },
    /// This host's share of a [`Request::Linear`] (see [`crate::linear_deal`]).
    Linear(crate::linear_deal::LinearResponse),
    /// This host's share of a [`Request::Deal`] batch (see [`crate::deal`]).
    Dealt(Vec<u8>),
    /// This host's sub-key of a seeded [`Request::DealSeeded`] batch: its
    /// share is the kind's `expand` of it (see [`crate::deal`]).
    Seed(Block),
    /// A [`Request::Plan`] taken: requests computed ahead, and the bytes
    /// of shares they hold at the dealer.
    Planned { computed: u32, bytes: u64 },
    /// The module refused or failed (carried across the process boundary).
    Error(String),
}

impl Drop for Response {
    fn drop(&mut self) {
        match self {
            Response::CotSenderInit { delta, v } => {
                delta.zeroize();
                v.zeroize();
            }
            Response::CotReceiverInit { w } => w.zeroize(),
            Response::GgmRoots(r) => r.zeroize(),
            Response::GgmLevel { alphas, red, leaf_red, masked } => {
                alphas.zeroize();
                red.zeroize();
                leaf_red.zeroize();
                masked.zeroize();
            }
            Response::Dealt(b) => hush_primitives::wipe::wipe_vec(b),
            Response::Seed(k) => k.zeroize(),
            _ => {}
        }
    }
}

/// Largest evidence a module response may carry (checked before allocating;
/// `hush-attest`'s own cap, ~280 KB, is below it).
pub const MAX_EVIDENCE_RESPONSE: usize = 1 << 20;
/// Largest nonce an evidence request may carry (REPORT_DATA hashes it in).
pub const MAX_EVIDENCE_NONCE: usize = 64;

/// Most requests in one [`Request::Plan`] (a ResNet-50 inference's FSS
/// dealing is ~3,000 crossings).
pub const MAX_PLAN: usize = 1 << 16;

impl Request {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        match self {
            Request::Hello { role } => w.u8(1).u8(role.byte()),
            Request::PeerHello { hello } => w.u8(2).bytes(hello),
            Request::PeerConfirm { tag } => {
                w.u8(3);
                w.0.extend_from_slice(tag);
                &mut w
            }
            Request::Evidence { nonce } => w.u8(4).bytes(nonce),
            Request::CotInit { k } => w.u8(10).u32(*k),
            Request::GgmRoots { batch, trees, height } => w.u8(11).u64(*batch).u32(*trees).u32(*height),
            Request::GgmLevel { batch, trees, height, level } => {
                w.u8(12).u64(*batch).u32(*trees).u32(*height).u32(*level)
            }
            Request::Linear(l) => w.u8(30).bytes(&l.encode()),
            Request::LinearSeeded(l) => w.u8(31).bytes(&l.encode()),
            Request::Deal(d) => {
                w.u8(20);
                d.encode(&mut w);
                &mut w
            }
            Request::DealSeeded(d) => {
                w.u8(21);
                d.encode(&mut w);
                &mut w
            }
            Request::Plan(reqs) => {
                w.u8(22).u32(reqs.len() as u32);
                for d in reqs {
                    d.encode(&mut w);
                }
                &mut w
            }
            Request::InsecureTestSeed { role, seed } => {
                w.u8(250).u8(role.byte());
                w.0.extend_from_slice(seed);
                &mut w
            }
        };
        w.0
    }

    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut r = Reader::new(b, "module request");
        let req = match r.u8()? {
            1 => Request::Hello { role: ModuleRole::from_byte(r.u8()?)? },
            2 => Request::PeerHello { hello: r.bytes(4096)? },
            3 => Request::PeerConfirm { tag: r.array32()? },
            4 => Request::Evidence { nonce: r.bytes(MAX_EVIDENCE_NONCE)? },
            10 => Request::CotInit { k: r.u32()? },
            11 => Request::GgmRoots { batch: r.u64()?, trees: r.u32()?, height: r.u32()? },
            12 => Request::GgmLevel { batch: r.u64()?, trees: r.u32()?, height: r.u32()?, level: r.u32()? },
            30 => Request::Linear(crate::linear_deal::LinearRequest::decode(&r.bytes(crate::backend::MAX_MODULE_FRAME)?)?),
            31 => Request::LinearSeeded(crate::linear_deal::LinearRequest::decode(&r.bytes(crate::backend::MAX_MODULE_FRAME)?)?),
            20 => Request::Deal(crate::deal::DealRequest::decode(&mut r)?),
            21 => Request::DealSeeded(crate::deal::DealRequest::decode(&mut r)?),
            22 => {
                let n = r.u32()? as usize;
                if n > MAX_PLAN {
                    return Err(Error::Malformed(format!("module request: a plan of {n} requests exceeds {MAX_PLAN}")));
                }
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push(crate::deal::DealRequest::decode(&mut r)?);
                }
                Request::Plan(v)
            }
            250 => Request::InsecureTestSeed { role: ModuleRole::from_byte(r.u8()?)?, seed: r.array32()? },
            t => return Err(Error::Malformed(format!("unknown request kind {t}"))),
        };
        r.finish()?;
        Ok(req)
    }
}

impl Response {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        match self {
            Response::Hello(h) => w.u8(1).bytes(h),
            Response::Confirm(t) => {
                w.u8(2);
                w.0.extend_from_slice(t);
                &mut w
            }
            Response::Established => w.u8(3),
            Response::Evidence(e) => w.u8(4).bytes(e),
            Response::CotSenderInit { delta, v } => w.u8(10).block(*delta).blocks(v),
            Response::CotReceiverInit { w: ww } => w.u8(11).blocks(ww),
            Response::GgmRoots(r) => w.u8(12).blocks(r),
            Response::GgmLevel { alphas, red, leaf_red, masked } => {
                w.u8(13).u32s(alphas).blocks(red).blocks(leaf_red).blocks(masked)
            }
            Response::Linear(l) => w.u8(30).bytes(&l.encode()),
            Response::Dealt(b) => w.u8(20).bytes(b),
            Response::Seed(k) => w.u8(21).block(*k),
            Response::Planned { computed, bytes } => w.u8(22).u32(*computed).u64(*bytes),
            Response::Error(e) => w.u8(255).bytes(e.as_bytes()),
        };
        w.0
    }

    /// Sends the encoded response on `ch`: a dealt share goes out behind
    /// its 5-byte head without being copied into a new buffer
    /// ([`hush_transport::Channel::send2`]); any other response is encoded
    /// and the encoding erased once sent (it may carry a sub-key).
    pub fn send_on<C: hush_transport::Channel + ?Sized>(&self, ch: &mut C) -> hush_transport::Result<()> {
        match self {
            Response::Dealt(b) => {
                let mut h = [20u8; 5];
                h[1..5].copy_from_slice(&(b.len() as u32).to_le_bytes());
                ch.send2(&h, b)
            }
            _ => {
                let mut e = self.encode();
                let r = ch.send(&e);
                e.zeroize();
                r
            }
        }
    }

    /// [`Response::decode`] taking the received buffer: a dealt share is
    /// kept in place (no copy), and the buffer of any other response is
    /// erased after decoding (it may carry shares).
    pub fn decode_owned(mut b: Vec<u8>) -> Result<Self> {
        if b.first() == Some(&20) && b.len() >= 5 {
            let n = u32::from_le_bytes(b[1..5].try_into().expect("4 bytes")) as usize;
            if n != b.len() - 5 {
                b.zeroize();
                return Err(Error::Malformed("module response: dealt share length".into()));
            }
            if n > crate::backend::MAX_MODULE_FRAME {
                b.zeroize();
                return Err(Error::Malformed(format!("module response: field of {n} bytes exceeds {}", crate::backend::MAX_MODULE_FRAME)));
            }
            b.drain(..5);
            return Ok(Response::Dealt(b));
        }
        let r = Self::decode(&b);
        b.zeroize();
        r
    }

    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut r = Reader::new(b, "module response");
        let resp = match r.u8()? {
            1 => Response::Hello(r.bytes(4096)?),
            2 => Response::Confirm(r.array32()?),
            3 => Response::Established,
            4 => Response::Evidence(r.bytes(MAX_EVIDENCE_RESPONSE)?),
            10 => Response::CotSenderInit { delta: r.block()?, v: r.blocks()? },
            11 => Response::CotReceiverInit { w: r.blocks()? },
            12 => Response::GgmRoots(r.blocks()?),
            13 => Response::GgmLevel { alphas: r.u32s()?, red: r.blocks()?, leaf_red: r.blocks()?, masked: r.blocks()? },
            30 => Response::Linear(crate::linear_deal::LinearResponse::decode(&r.bytes(crate::backend::MAX_MODULE_FRAME)?)?),
            20 => Response::Dealt(r.bytes(crate::backend::MAX_MODULE_FRAME)?),
            21 => Response::Seed(r.block()?),
            22 => Response::Planned { computed: r.u32()?, bytes: r.u64()? },
            255 => Response::Error(String::from_utf8_lossy(&r.bytes(4096)?).into_owned()),
            t => return Err(Error::Malformed(format!("unknown response kind {t}"))),
        };
        r.finish()?;
        Ok(resp)
    }
}

/// Per-batch secret state of the receiver's GGM walk; erased on drop and
/// as soon as the last crossing of the batch has been released.
struct PendingWalk {
    batch: u64,
    trees: u32,
    height: u32,
    next_level: u32,
    /// red[level-1][tree], levels 1..=height.
    red: Vec<Block>,
    masked: Vec<Block>,
}

impl Drop for PendingWalk {
    fn drop(&mut self) {
        self.red.zeroize();
        self.masked.zeroize();
    }
}

/// The trusted module. See the module docs for the request kinds.
pub struct Module {
    rng: Prg,
    attester: Box<dyn Attester>,
    verifier: Box<dyn Verifier>,
    /// Hardware evidence for the handshake key (`--attest`); `None`: the
    /// simulated module, which has none.
    evidence: Option<EvidenceSource>,
    /// This module's handshake public key while seed agreement is under
    /// way (what [`Request::Evidence`] binds).
    handshake_public: Option<[u8; 32]>,
    role: Option<ModuleRole>,
    handshake: Option<Handshake>,
    keys: Option<SessionKeys>,
    cot_init_done: bool,
    next_batch: u64,
    walk: Option<PendingWalk>,
    linear: crate::linear_deal::LinearState,
    deal: crate::deal::DealState,
    /// The stateless dealing kinds this module serves.
    kinds: crate::deal::Kinds,
    /// Whether [`Request::InsecureTestSeed`] is honoured (tests only).
    insecure_test_seed: bool,
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Module {{ role: {:?}, established: {}, attester: {}, verifier: {} }}",
            self.role,
            self.keys.is_some(),
            self.attester.describe(),
            self.verifier.describe()
        )
    }
}

impl Module {
    /// A module with OS randomness and the simulated attestation backend
    /// (simulated — gives no hardware protection).
    pub fn new() -> Self {
        Self::with_rng(Prg::from_os())
    }

    /// Deterministic module randomness (tests, transcripts).
    pub fn with_rng(rng: Prg) -> Self {
        Self::with_backend(rng, Box::new(SimulatedAttester), Box::new(SimulatedVerifier::default()))
    }

    pub fn with_backend(rng: Prg, attester: Box<dyn Attester>, verifier: Box<dyn Verifier>) -> Self {
        Module {
            rng,
            attester,
            verifier,
            evidence: None,
            handshake_public: None,
            role: None,
            handshake: None,
            keys: None,
            cot_init_done: false,
            next_batch: 0,
            walk: None,
            linear: Default::default(),
            deal: Default::default(),
            kinds: Default::default(),
            insecure_test_seed: false,
        }
    }

    /// This module serving `kinds` (e.g. `hush_2pc::deal::kinds()`).
    pub fn with_kinds(mut self, kinds: crate::deal::Kinds) -> Self {
        self.kinds = kinds;
        self
    }

    /// A module whose session seed was made by someone it trusts rather
    /// than agreed with a peer module: the dealer service (dealer mode,
    /// [`crate::dealer`]) makes one seed per session and hosts one module
    /// per role with it. Seed agreement requests are refused by such a
    /// module (it is already established); everything else — which role's
    /// share it releases, freshness of batches, erasure — is as in tee mode.
    pub fn with_session_seed(role: ModuleRole, seed: &[u8; 32]) -> Self {
        let mut m = Self::new();
        m.role = Some(role);
        m.keys = Some(SessionKeys::from_seed(seed));
        m
    }

    /// A module that answers [`Request::Evidence`] from `source` (hardware
    /// evidence from configfs-tsm in a confidential VM; in tests, a test
    /// root's). The evidence binds this module's handshake key, which the
    /// module computes itself: the host cannot have any other key bound.
    pub fn with_evidence(mut self, source: EvidenceSource) -> Self {
        self.evidence = Some(source);
        self
    }

    /// **INSECURE, tests only**: a module that honours
    /// [`Request::InsecureTestSeed`] (see there).
    pub fn insecure_test_mode(mut self) -> Self {
        self.insecure_test_seed = true;
        self
    }

    /// Names the attestation backend (always says when it is simulated).
    pub fn attestation(&self) -> &'static str {
        self.verifier.describe()
    }

    /// Handles one encoded request, returning the encoded response. Errors
    /// become [`Response::Error`]; nothing here panics on bad input.
    pub fn handle_bytes(&mut self, req: &[u8]) -> Vec<u8> {
        let resp = match Request::decode(req) {
            Ok(r) => self.handle(&r).unwrap_or_else(|e| Response::Error(e.to_string())),
            Err(e) => Response::Error(e.to_string()),
        };
        resp.encode()
    }

    /// The dispatch: one arm per request kind.
    pub fn handle(&mut self, req: &Request) -> Result<Response> {
        match req {
            Request::Hello { role } => self.hello(*role),
            Request::PeerHello { hello } => self.peer_hello(hello),
            Request::PeerConfirm { tag } => self.peer_confirm(tag),
            Request::Evidence { nonce } => self.evidence(nonce),
            Request::CotInit { k } => self.cot_init(*k),
            Request::GgmRoots { batch, trees, height } => self.ggm_roots(*batch, *trees, *height),
            Request::GgmLevel { batch, trees, height, level } => self.ggm_level(*batch, *trees, *height, *level),
            Request::Linear(l) => {
                let role = self.established()?.1;
                let mut st = std::mem::take(&mut self.linear);
                let r = crate::linear_deal::handle(self, role, &mut st, l);
                self.linear = st;
                Ok(Response::Linear(r?))
            }
            Request::LinearSeeded(l) => {
                let role = self.established()?.1;
                let mut st = std::mem::take(&mut self.linear);
                let r = crate::linear_deal::handle_seeded(self, role, &mut st, l);
                self.linear = st;
                r
            }
            Request::InsecureTestSeed { role, seed } => {
                if !self.insecure_test_seed {
                    return Err(Error::Refused("fixed test seeds are refused: this module was not started in insecure test mode".into()));
                }
                if self.role.is_some() {
                    return Err(Error::Refused("seed agreement already started".into()));
                }
                self.role = Some(*role);
                self.keys = Some(SessionKeys::from_seed(seed));
                Ok(Response::Established)
            }
            Request::Deal(d) => {
                let mut st = std::mem::take(&mut self.deal);
                let kinds = self.kinds.clone();
                let r = crate::deal::handle(self, &kinds, &mut st, d);
                self.deal = st;
                Ok(Response::Dealt(r?))
            }
            Request::DealSeeded(d) => {
                let mut st = std::mem::take(&mut self.deal);
                let kinds = self.kinds.clone();
                let r = crate::deal::handle_seeded(self, &kinds, &mut st, d);
                self.deal = st;
                r
            }
            Request::Plan(_) => Ok(Response::Planned { computed: 0, bytes: 0 }),
        }
    }

    /// [`Request::Deal`] without the bytes: this host's share written
    /// into `sink` (see [`crate::deal::handle_into`]); `None` when the kind
    /// does not fill this sink (then send the request).
    pub fn deal_into(&mut self, req: &crate::deal::DealRequest, sink: &mut dyn std::any::Any) -> Result<Option<usize>> {
        let mut st = std::mem::take(&mut self.deal);
        let kinds = self.kinds.clone();
        let r = crate::deal::handle_into(self, &kinds, &mut st, req, sink);
        self.deal = st;
        r
    }

    fn hello(&mut self, role: ModuleRole) -> Result<Response> {
        if self.role.is_some() {
            return Err(Error::Refused("seed agreement already started".into()));
        }
        let (hs, msg) = Handshake::start(role, &mut self.rng, &*self.attester);
        let mut pk = [0u8; 32];
        pk.copy_from_slice(&msg[1..33]);
        self.handshake_public = Some(pk);
        self.role = Some(role);
        self.handshake = Some(hs);
        Ok(Response::Hello(msg))
    }

    fn peer_hello(&mut self, hello: &[u8]) -> Result<Response> {
        let hs = self.handshake.as_mut().ok_or_else(|| Error::Refused("no seed agreement in progress".into()))?;
        let tag = hs.on_peer_hello(hello, &*self.verifier)?;
        Ok(Response::Confirm(tag))
    }

    fn peer_confirm(&mut self, tag: &[u8; 32]) -> Result<Response> {
        let hs = self.handshake.take().ok_or_else(|| Error::Refused("no seed agreement in progress".into()))?;
        self.handshake_public = None;
        self.keys = Some(hs.finish(tag)?);
        Ok(Response::Established)
    }

    /// Hardware evidence binding this module's handshake key and `nonce`.
    fn evidence(&mut self, nonce: &[u8]) -> Result<Response> {
        let src = self.evidence.as_ref().ok_or_else(|| {
            Error::Refused(format!("this module has no hardware evidence: its attestation is {} (run hush-tee-module --attest snp|tdx in a confidential VM)", crate::SIMULATED_NOTE))
        })?;
        let (Some(pk), Some(_)) = (self.handshake_public, self.handshake.as_ref()) else {
            return Err(Error::Refused("evidence is given only while seed agreement is under way (after Hello, before PeerConfirm)".into()));
        };
        if nonce.len() > MAX_EVIDENCE_NONCE {
            return Err(Error::Malformed(format!("evidence nonce of {} bytes, more than {MAX_EVIDENCE_NONCE}", nonce.len())));
        }
        let ev = src(&crate::attest::x25519_spki(&pk), nonce).map_err(|e| Error::Refused(format!("no hardware evidence: {e}")))?;
        if ev.len() > MAX_EVIDENCE_RESPONSE {
            return Err(Error::Refused(format!("the evidence source gave {} bytes, more than {MAX_EVIDENCE_RESPONSE}", ev.len())));
        }
        Ok(Response::Evidence(ev))
    }

    /// Whether this module has a hardware evidence source.
    pub fn has_evidence(&self) -> bool {
        self.evidence.is_some()
    }

    fn established(&self) -> Result<(&SessionKeys, ModuleRole)> {
        match (&self.keys, self.role) {
            (Some(k), Some(r)) => Ok((k, r)),
            _ => Err(Error::Refused("seed agreement not completed".into())),
        }
    }

    /// This module's role once seed agreement is complete (dealing kinds
    /// release the share of this role only).
    pub fn deal_role(&self) -> Result<ModuleRole> {
        Ok(self.established()?.1)
    }

    /// Admits a dealing request ahead of time (see [`crate::deal::prepare`]).
    pub fn prepare_deal(&self, req: &crate::deal::DealRequest) -> Result<crate::deal::Prepared> {
        crate::deal::prepare(self, &self.kinds, &self.deal, req)
    }

    /// Records the release of a prepared batch (see [`crate::deal::commit`]).
    pub fn commit_deal(&mut self, req: &crate::deal::DealRequest) -> Result<()> {
        crate::deal::commit(&mut self.deal, &self.kinds, req)
    }

    /// A 128-bit key derived from the synchronized seed under `label`.
    pub fn derive_key(&self, label: &str) -> Result<Block> {
        Ok(self.established()?.0.derive(label))
    }

    fn delta(&self) -> Result<Block> {
        let mut d = Aes128::new(self.derive_key("silentflow/delta")?).encrypt_block(Block::ZERO);
        d.0 |= 1;
        Ok(d)
    }

    fn cot_init(&mut self, k: u32) -> Result<Response> {
        let (_, role) = self.established()?;
        if self.cot_init_done {
            return Err(Error::Refused("initial correlation already released".into()));
        }
        if k == 0 || k > MAX_K {
            return Err(Error::Refused(format!("k = {k} out of range 1..={MAX_K}")));
        }
        let delta = self.delta()?;
        let kv = Aes128::new(self.derive_key("silentflow/v")?);
        let mut v: Vec<Block> = (0..k as u128).map(Block).collect();
        kv.encrypt_blocks(&mut v);
        for x in v.iter_mut() {
            x.0 &= !1;
        }
        self.cot_init_done = true;
        match role {
            ModuleRole::Sender => Ok(Response::CotSenderInit { delta, v }),
            ModuleRole::Receiver => {
                let ku = Aes128::new(self.derive_key("silentflow/u")?);
                let mut u: Vec<Block> = (0..k as u128).map(Block).collect();
                ku.encrypt_blocks(&mut u);
                for (x, ub) in v.iter_mut().zip(u.iter_mut()) {
                    *x ^= delta.and_bit(ub.lsb());
                    ub.zeroize();
                }
                Ok(Response::CotReceiverInit { w: v })
            }
        }
    }

    fn check_shape(trees: u32, height: u32) -> Result<()> {
        if trees == 0 || trees > MAX_TREES || !(2..=MAX_HEIGHT).contains(&height) {
            return Err(Error::Refused(format!("GGM shape {trees} trees of height {height} out of range")));
        }
        Ok(())
    }

    fn roots(&self, batch: u64, trees: u32) -> Result<Vec<Block>> {
        let kr = Aes128::new(self.derive_key("silentflow/ggm-roots")?);
        let mut r: Vec<Block> = (0..trees as u128).map(|i| Block(((batch as u128) << 32) | i)).collect();
        kr.encrypt_blocks(&mut r);
        Ok(r)
    }

    fn ggm_roots(&mut self, batch: u64, trees: u32, height: u32) -> Result<Response> {
        let (_, role) = self.established()?;
        if role != ModuleRole::Sender {
            return Err(Error::Refused("GGM roots are the sender's share; this is the receiver's module".into()));
        }
        Self::check_shape(trees, height)?;
        if batch != self.next_batch {
            return Err(Error::Refused(format!("batch {batch} requested, next is {}", self.next_batch)));
        }
        let r = self.roots(batch, trees)?;
        self.next_batch += 1;
        Ok(Response::GgmRoots(r))
    }

    fn ggm_level(&mut self, batch: u64, trees: u32, height: u32, level: u32) -> Result<Response> {
        let (_, role) = self.established()?;
        if role != ModuleRole::Receiver {
            return Err(Error::Refused("the secret paths are the receiver's share; this is the sender's module".into()));
        }
        Self::check_shape(trees, height)?;
        if level == 1 {
            if self.walk.is_some() {
                return Err(Error::Refused("previous batch not finished".into()));
            }
            if batch != self.next_batch {
                return Err(Error::Refused(format!("batch {batch} requested, next is {}", self.next_batch)));
            }
            self.walk = Some(self.walk_paths(batch, trees, height)?);
        }
        let w = self.walk.as_mut().ok_or_else(|| Error::Refused("no batch in progress".into()))?;
        if w.batch != batch || w.trees != trees || w.height != height || w.next_level != level {
            return Err(Error::Refused(format!(
                "crossing (batch {batch}, level {level}) out of order; expected (batch {}, level {})",
                w.batch, w.next_level
            )));
        }
        let t = trees as usize;
        let lv = level as usize;
        let red = w.red[(lv - 1) * t..lv * t].to_vec();
        let mut alphas = Vec::new();
        if level == 1 {
            alphas = self.alphas(batch, trees, height)?;
        }
        let w = self.walk.as_mut().expect("checked above");
        w.next_level += 1;
        if level == height - 1 {
            let leaf_red = w.red[(height as usize - 1) * t..height as usize * t].to_vec();
            let masked = std::mem::take(&mut w.masked);
            self.walk = None; // erases the batch's secret state
            self.next_batch += 1;
            return Ok(Response::GgmLevel { alphas, red, leaf_red, masked });
        }
        Ok(Response::GgmLevel { alphas, red, leaf_red: Vec::new(), masked: Vec::new() })
    }

    fn alphas(&self, batch: u64, trees: u32, height: u32) -> Result<Vec<u32>> {
        let ka = Aes128::new(self.derive_key("silentflow/alpha")?);
        let mut a: Vec<Block> = (0..trees as u128).map(|i| Block(((batch as u128) << 32) | i)).collect();
        ka.encrypt_blocks(&mut a);
        Ok(a.iter().map(|b| (b.lo() & ((1u64 << height) - 1)) as u32).collect())
    }

    fn walk_paths(&self, batch: u64, trees: u32, height: u32) -> Result<PendingWalk> {
        let mut nodes = self.roots(batch, trees)?;
        let mut alphas = self.alphas(batch, trees, height)?;
        let delta = self.delta()?;
        let t = trees as usize;
        let h = height as usize;
        let mut red = vec![Block::ZERO; h * t];
        // All t paths advance one level per pass, the 2t children of a level
        // in one batched AES call.
        let mut kids = vec![Block::ZERO; 2 * t];
        for lvl in 1..=h {
            ggm::expand_into(&nodes, &mut kids);
            for (i, node) in nodes.iter_mut().enumerate() {
                let bit = ((alphas[i] >> (h - lvl)) & 1) as usize;
                red[(lvl - 1) * t + i] = kids[2 * i + 1 - bit];
                *node = kids[2 * i + bit];
            }
        }
        kids.zeroize();
        let masked = nodes.iter().map(|&leaf| Block(leaf.0 & !1) ^ delta).collect();
        nodes.zeroize();
        alphas.zeroize();
        Ok(PendingWalk { batch, trees, height, next_level: 1, red, masked })
    }
}

impl Default for Module {
    fn default() -> Self {
        Self::new()
    }
}
