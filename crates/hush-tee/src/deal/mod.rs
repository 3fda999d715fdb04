//! Dealing kinds for hush's two-party nonlinear layer (`hush-2pc`).
//!
//! Every kind here follows the module's rules (see [`crate::module`]):
//! the dealer output is a deterministic function of a PRG keyed by
//! `derive_key("<kind>/<batch>/<all parameters>")`, so both parties' modules
//! compute the same correlation without talking; each module releases only
//! its own host's share (party 0 = [`ModuleRole::Sender`], party 1 =
//! [`ModuleRole::Receiver`]), in one crossing per batch; requests carry only
//! sizes and batch numbers, never online data.
//!
//! Party 0's shares are always pure PRG streams (its module expands a few
//! streams); party 1's module recomputes party 0's streams and derives its
//! own share from the full dealer output. Every parameter is part of the
//! key label, so asking with other parameters gives independent values.
//!
//! **Fresh batches, enforced by the module.** The batch number is chosen by
//! the host (both parties' hosts count their requests in the same order, so
//! both modules derive the same correlation), but the module itself keeps,
//! per dealing kind, the last batch it dealt ([`DealState`]) and refuses any
//! request whose batch is not strictly greater ([`Error::Refused`], "already
//! dealt or out of order"). A replay — a buggy or malicious host, or two
//! dealers sharing one module — can therefore never obtain the same r, τ,
//! pads, triples or keys twice: the same values released twice would let a
//! host combine two protocol runs under one mask (for TAMI: two ŷ under one
//! τ, or two unlocked entries of one padded table). Gaps are allowed (one
//! host counter serves all kinds), and a refused or malformed request does
//! not consume a batch number.
//!
//! * [`triples`] — Beaver triples over Z_2^ℓ and bit-packed AND triples.
//! * [`fss`] — FSS gate keys (DCF, BCGGIKR21) via `hush-fss`, with the
//!   masked-opening helper values.
//! * [`tami`] — TAMI-MPC's one-round millionaires' (Li et al., §3, eqs. 1-7):
//!   one-time-padded leaf tables, merge-subset products with Opt#1/Opt#2, and the
//!   bit-to-arithmetic / multiplexer correlations for ReLU and truncation.
//!
//! Security: semi-honest; the module is **simulated — gives no hardware
//! protection** (see the crate docs).

pub mod fss;
pub mod tami;
pub mod triples;

use crate::module::{Module, ModuleRole};
use crate::wire::{Reader, Writer};
use crate::{Error, Result};
use hush_primitives::{Block, Prg};

/// Largest batch (elements, or bits for AND triples) one crossing may deal.
pub const MAX_DEAL_N: u32 = 1 << 20;

/// A dealing request (carried by `Request::Deal`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DealRequest {
    /// `n` Beaver triples over Z_2^bits.
    ArithTriples { batch: u64, n: u32, bits: u32 },
    /// `n` AND triples, bit-packed.
    BitTriples { batch: u64, n: u32 },
    /// One TAMI-MPC comparison batch of `n` elements.
    Tami { batch: u64, n: u32, shape: tami::TamiShape },
    /// `n` FSS gate keys plus masks.
    Fss { batch: u64, n: u32, shape: fss::FssShape },
}

impl DealRequest {
    pub fn encode(&self, w: &mut Writer) {
        match self {
            DealRequest::ArithTriples { batch, n, bits } => {
                w.u8(1).u64(*batch).u32(*n).u32(*bits);
            }
            DealRequest::BitTriples { batch, n } => {
                w.u8(2).u64(*batch).u32(*n);
            }
            DealRequest::Tami { batch, n, shape } => {
                w.u8(3).u64(*batch).u32(*n);
                shape.encode(w);
            }
            DealRequest::Fss { batch, n, shape } => {
                w.u8(4).u64(*batch).u32(*n);
                shape.encode(w);
            }
        }
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<Self> {
        Ok(match r.u8()? {
            1 => DealRequest::ArithTriples { batch: r.u64()?, n: r.u32()?, bits: r.u32()? },
            2 => DealRequest::BitTriples { batch: r.u64()?, n: r.u32()? },
            3 => DealRequest::Tami { batch: r.u64()?, n: r.u32()?, shape: tami::TamiShape::decode(r)? },
            4 => DealRequest::Fss { batch: r.u64()?, n: r.u32()?, shape: fss::FssShape::decode(r)? },
            t => return Err(Error::Malformed(format!("unknown dealing kind {t}"))),
        })
    }

    /// The key label: kind, batch and every parameter.
    pub fn label(&self) -> String {
        match self {
            DealRequest::ArithTriples { batch, n, bits } => format!("2pc/arith-triples/{batch}/{n}/{bits}"),
            DealRequest::BitTriples { batch, n } => format!("2pc/bit-triples/{batch}/{n}"),
            DealRequest::Tami { batch, n, shape } => format!("2pc/tami/{batch}/{n}/{}", shape.label()),
            DealRequest::Fss { batch, n, shape } => format!("2pc/fss/{batch}/{n}/{}", shape.label()),
        }
    }

    /// The dealing kind's name (error messages).
    pub fn kind(&self) -> &'static str {
        ["arith-triples", "bit-triples", "tami", "fss"][self.kind_index()]
    }

    fn kind_index(&self) -> usize {
        match self {
            DealRequest::ArithTriples { .. } => 0,
            DealRequest::BitTriples { .. } => 1,
            DealRequest::Tami { .. } => 2,
            DealRequest::Fss { .. } => 3,
        }
    }

    /// The batch number the host asked for.
    pub fn batch(&self) -> u64 {
        match self {
            DealRequest::ArithTriples { batch, .. }
            | DealRequest::BitTriples { batch, .. }
            | DealRequest::Tami { batch, .. }
            | DealRequest::Fss { batch, .. } => *batch,
        }
    }

    fn n(&self) -> u32 {
        match self {
            DealRequest::ArithTriples { n, .. } | DealRequest::BitTriples { n, .. } | DealRequest::Tami { n, .. } | DealRequest::Fss { n, .. } => *n,
        }
    }
}

/// The module's per-kind freshness state: the last batch dealt of each
/// dealing kind in this session.
#[derive(Debug, Default)]
pub struct DealState {
    last: [Option<u64>; 4],
}

impl DealState {
    /// The last batch dealt of `req`'s kind, if any.
    pub fn last(&self, req: &DealRequest) -> Option<u64> {
        self.last[req.kind_index()]
    }
}

/// Party index of a module role (0 = sender = "A", 1 = receiver = "B").
pub fn party_of(role: ModuleRole) -> u8 {
    role.byte()
}

/// The dispatch target of `Request::Deal`: this host's share, encoded.
/// Refuses a batch number that is not strictly greater than the last one
/// dealt of the same kind; records the batch once the share is released.
pub fn handle(m: &Module, st: &mut DealState, req: &DealRequest) -> Result<Vec<u8>> {
    let party = party_of(m.deal_role()?);
    let batch = req.batch();
    if let Some(last) = st.last(req) {
        if batch <= last {
            return Err(Error::Refused(format!(
                "{} batch {batch} already dealt or out of order (last was {last}); a batch is dealt once",
                req.kind()
            )));
        }
    }
    let out = deal_share(m, party, req)?;
    st.last[req.kind_index()] = Some(batch);
    Ok(out)
}

fn deal_share(m: &Module, party: u8, req: &DealRequest) -> Result<Vec<u8>> {
    let n = req.n();
    if n == 0 || n > MAX_DEAL_N {
        return Err(Error::Refused(format!("dealing batch of {n} out of range 1..={MAX_DEAL_N}")));
    }
    let key = m.derive_key(&req.label())?;
    match req {
        DealRequest::ArithTriples { n, bits, .. } => {
            if !(1..=64).contains(bits) {
                return Err(Error::Refused(format!("ring width {bits} out of range 1..=64")));
            }
            Ok(triples::deal_arith(key, party, *n as usize, *bits).to_bytes())
        }
        DealRequest::BitTriples { n, .. } => Ok(triples::deal_bits(key, party, *n as usize).to_bytes()),
        DealRequest::Tami { n, shape, .. } => {
            shape.validate().map_err(Error::Refused)?;
            Ok(tami::deal(key, party, *n as usize, shape).to_bytes())
        }
        DealRequest::Fss { n, shape, .. } => {
            shape.validate().map_err(Error::Refused)?;
            Ok(fss::deal(key, party, *n as usize, shape).to_bytes())
        }
    }
}

/// `n` words of the PRG stream `nonce` under `key`.
pub(crate) fn stream(key: Block, nonce: u64, n: usize) -> Vec<u64> {
    let mut prg = Prg::with_nonce(key, nonce);
    let mut bytes = vec![0u8; n * 8];
    prg.fill_bytes(&mut bytes);
    let v = bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
    zeroize::Zeroize::zeroize(&mut bytes);
    v
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
    pub fn put(&mut self, v: &[u64]) -> &mut Self {
        self.0.extend_from_slice(&(v.len() as u64).to_le_bytes());
        for x in v {
            self.0.extend_from_slice(&x.to_le_bytes());
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
        let v = self.buf[8..need].chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
        self.buf = &self.buf[need..];
        Ok(v)
    }
    pub fn finish(self) -> Result<()> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(Error::Malformed(format!("dealt share: {} trailing bytes", self.buf.len())))
        }
    }
}
