//! The module as a provider of dealing kinds.
//!
//! The kinds themselves are described once, next to the protocols that
//! consume them ([`hush_deal::Description`]: triples and TAMI tables in
//! `hush-2pc`, FSS keys in `hush-fss`); a module serves the [`Kinds`] it
//! was created with ([`crate::Module::with_kinds`]), as does the dealer
//! service. What the module adds to a description:
//!
//! * **the key**: `derive_key(label)` from the synchronized seed, where the
//!   label (from the description) names the kind, the batch and every
//!   parameter, so both parties' modules compute the same correlation
//!   without talking and different parameters give independent values;
//! * **its own host's share only**: party 0 = [`ModuleRole::Sender`],
//!   party 1 = [`ModuleRole::Receiver`], one crossing per batch; requests
//!   carry only sizes, batch numbers and shapes, never online data;
//! * **fresh batches, enforced**: the batch number is chosen by the host
//!   (both hosts count their requests in the same order), but the module
//!   keeps, per dealing kind, the last batch it dealt ([`DealState`]) and
//!   refuses any request whose batch is not strictly greater ("already
//!   dealt or out of order"). A replay — a buggy or malicious host, or two
//!   users sharing one module — can therefore never obtain the same r, τ,
//!   pads, triples or keys twice: the same values released twice would let
//!   a host combine two protocol runs under one mask (for TAMI: two ŷ under
//!   one τ, or two unlocked entries of one padded table). Gaps are allowed
//!   (one host counter serves all kinds), and a refused or malformed
//!   request does not consume a batch number.
//!
//! Security: semi-honest; the module is **simulated — gives no hardware
//! protection** (see the crate docs).

use crate::module::{Module, ModuleRole};
use crate::{Error, Result};
pub use hush_deal::{Blob, BlobReader, DealRequest, Description, Kinds, MAX_DEAL_N};
use std::collections::HashMap;

/// The module's per-kind freshness state: the last batch dealt of each
/// dealing kind in this session.
#[derive(Debug, Default)]
pub struct DealState {
    last: HashMap<&'static str, u64>,
}

impl DealState {
    /// The last batch dealt of `kind`, if any.
    pub fn last(&self, kind: &str) -> Option<u64> {
        self.last.get(kind).copied()
    }
}

/// Party index of a module role (0 = sender = "A", 1 = receiver = "B").
pub fn party_of(role: ModuleRole) -> u8 {
    role.byte()
}

/// The dispatch target of `Request::Deal`: this host's share, encoded.
/// Refuses an unknown kind, a batch size out of range, and a batch number
/// that is not strictly greater than the last one dealt of the same kind;
/// records the batch once the share is released.
pub fn handle(m: &Module, kinds: &Kinds, st: &mut DealState, req: &DealRequest) -> Result<Vec<u8>> {
    let (d, party, key) = admit(m, kinds, st, req)?;
    let out = d.deal(key, party, req.n, &req.params)?;
    st.last.insert(d.kind(), req.batch);
    Ok(out)
}

/// The in-process direct path of `Request::Deal`: this host's share
/// written into `sink` ([`Description::deal_into`]) instead of bytes, with
/// the checks and the one-release-per-batch rule of [`handle`]. `Some(b)`
/// (b: the bytes the share would have taken) once released — the batch is
/// recorded; `None` when the kind does not fill this sink — nothing is
/// released or recorded, and the host asks for the bytes instead.
///
/// Why this releases no more than [`handle`]: the kind writes exactly the
/// values of this party's share (the same key, the same draws) into a
/// structure of the host's, in the layout the host would have decoded the
/// bytes into; the other party's share never leaves the call.
pub fn handle_into(
    m: &Module,
    kinds: &Kinds,
    st: &mut DealState,
    req: &DealRequest,
    sink: &mut dyn std::any::Any,
) -> Result<Option<usize>> {
    let (d, party, key) = admit(m, kinds, st, req)?;
    let out = d.deal_into(key, party, req.n, &req.params, sink)?;
    if out.is_some() {
        st.last.insert(d.kind(), req.batch);
    }
    Ok(out)
}

/// The dispatch target of `Request::DealSeeded`: where the kind's seeded
/// party ([`Description::seeded_party`]) is this module's, the host's
/// sub-key ([`hush_deal::sub_key`]) — 16 bytes instead of the share, which
/// the host expands with the same description; otherwise the share, as
/// [`handle`]. The same checks and the same one-release-per-batch rule.
///
/// Why this releases no more than the share: see "Seeded shares" in
/// `hush-deal` — the sub-key is a PRG output under the batch key that
/// determines exactly this party's share, independent of every value the
/// other party's share or the dealer alone derives.
pub fn handle_seeded(m: &Module, kinds: &Kinds, st: &mut DealState, req: &DealRequest) -> Result<crate::Response> {
    let (d, party, key) = admit(m, kinds, st, req)?;
    let out = if d.seeded_party() == Some(party) {
        crate::Response::Seed(hush_deal::sub_key(key, party))
    } else {
        crate::Response::Dealt(d.deal(key, party, req.n, &req.params)?)
    };
    st.last.insert(d.kind(), req.batch);
    Ok(out)
}

/// Checks a request (known kind, batch size, fresh batch number, valid
/// parameters) and derives its batch key.
fn admit(m: &Module, kinds: &Kinds, st: &DealState, req: &DealRequest) -> Result<(&'static dyn Description, u8, hush_primitives::Block)> {
    let party = party_of(m.deal_role()?);
    let d = kinds.find(&req.kind).ok_or_else(|| {
        Error::Refused(format!("unknown dealing kind '{}' (this provider serves {})", req.kind, kinds.names().join(", ")))
    })?;
    let kind = d.kind();
    if let Some(last) = st.last(kind) {
        if req.batch <= last {
            return Err(Error::Refused(format!(
                "{kind} batch {} already dealt or out of order (last was {last}); a batch is dealt once",
                req.batch
            )));
        }
    }
    if req.n == 0 || req.n > MAX_DEAL_N {
        return Err(Error::Refused(format!("dealing batch of {} out of range 1..={MAX_DEAL_N}", req.n)));
    }
    let key = m.derive_key(&d.label(req.batch, req.n, &req.params)?)?;
    Ok((d, party, key))
}

/// A batch admitted ahead of its request (the dealer service's
/// speculation, see `crate::dealer`): the checks are done and the batch key
/// derived, nothing is recorded or released. Computing it gives exactly the
/// share a request for it would get; the key is erased on drop.
pub struct Prepared {
    pub req: DealRequest,
    d: &'static dyn Description,
    party: u8,
    key: hush_primitives::Block,
}

impl Prepared {
    /// The share, as [`handle`] would deal it.
    pub fn compute(&self) -> Result<Vec<u8>> {
        Ok(self.d.deal(self.key, self.party, self.req.n, &self.req.params)?)
    }
    /// Whether a [`crate::Request::DealSeeded`] for it would be answered
    /// with a sub-key rather than the share.
    pub fn seeded(&self) -> bool {
        self.d.seeded_party() == Some(self.party)
    }
    /// Whether the other party's share would be a sub-key.
    pub fn other_seeded(&self) -> bool {
        self.d.seeded_party() == Some(1 - self.party)
    }
    /// The party whose module admitted it.
    pub fn party(&self) -> u8 {
        self.party
    }
    /// This party's sub-key.
    pub fn sub_key(&self) -> hush_primitives::Block {
        hush_deal::sub_key(self.key, self.party)
    }
    /// Party `p`'s share (a dealer serving both roles computes the other's).
    pub fn compute_party(&self, p: u8) -> Result<Vec<u8>> {
        Ok(self.d.deal(self.key, p, self.req.n, &self.req.params)?)
    }
    /// Both shares: (this party's, the other's).
    pub fn compute_pair(&self) -> Result<(Vec<u8>, Vec<u8>)> {
        let (a, b) = self.d.deal_pair(self.key, self.req.n, &self.req.params)?;
        Ok(if self.party == 0 { (a, b) } else { (b, a) })
    }
}

impl Drop for Prepared {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.key.0);
    }
}

/// Admits `req` now (as [`handle`] would) without dealing or recording it.
pub fn prepare(m: &Module, kinds: &Kinds, st: &DealState, req: &DealRequest) -> Result<Prepared> {
    let (d, party, key) = admit(m, kinds, st, req)?;
    Ok(Prepared { req: req.clone(), d, party, key })
}

/// Records that `req`'s batch was released (after a [`Prepared`] share
/// was sent); refuses, as [`handle`] does, a batch not above the last.
pub fn commit(st: &mut DealState, kinds: &Kinds, req: &DealRequest) -> Result<()> {
    let d = kinds.find(&req.kind).ok_or_else(|| Error::Refused(format!("unknown dealing kind '{}'", req.kind)))?;
    if st.last(d.kind()).is_some_and(|last| req.batch <= last) {
        return Err(Error::Refused(format!("{} batch {} already dealt or out of order", d.kind(), req.batch)));
    }
    st.last.insert(d.kind(), req.batch);
    Ok(())
}

/// A host's side of a seeded release: its share from the sub-key, with the
/// description the provider used (`kinds` must be the provider's).
pub fn expand(kinds: &Kinds, req: &DealRequest, sub: hush_primitives::Block) -> Result<Vec<u8>> {
    let d = kinds.find(&req.kind).ok_or_else(|| Error::Malformed(format!("a seed for unknown dealing kind '{}'", req.kind)))?;
    if req.n == 0 || req.n > MAX_DEAL_N {
        return Err(Error::Malformed(format!("dealing batch of {} out of range", req.n)));
    }
    Ok(d.expand(sub, req.n, &req.params)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{InProcessModule, Request, Response, TrustedModule};
    use hush_primitives::Block;

    /// A toy kind: party p gets n words of the key's stream p.
    struct Toy;
    static TOY: Toy = Toy;
    impl Description for Toy {
        fn kind(&self) -> &'static str {
            "test/toy"
        }
        fn label(&self, batch: u64, n: u32, params: &[u8]) -> hush_deal::Result<String> {
            if !params.is_empty() {
                return Err(hush_deal::Error::Refused("toy takes no parameters".into()));
            }
            Ok(format!("test/toy/{batch}/{n}"))
        }
        fn deal(&self, key: Block, party: u8, n: u32, _: &[u8]) -> hush_deal::Result<Vec<u8>> {
            let mut b = Blob::new();
            b.put(&hush_deal::stream(key, party as u64, n as usize));
            Ok(b.0)
        }
    }

    fn module(role: crate::ModuleRole, kinds: Kinds) -> InProcessModule {
        InProcessModule::new(Module::with_session_seed(role, &[3; 32]).with_kinds(kinds))
    }

    fn deal(m: &mut InProcessModule, kind: &str, batch: u64, params: Vec<u8>) -> crate::Result<Vec<u8>> {
        match m.call(&Request::Deal(DealRequest::new(kind, batch, 4, params)))? {
            Response::Dealt(ref b) => Ok(b.clone()),
            r => panic!("unexpected {r:?}"),
        }
    }

    #[test]
    fn module_serves_registered_kinds_once_per_batch_and_only_its_role() {
        let mut s = module(ModuleRole::Sender, Kinds::new(&[&TOY]));
        let mut r = module(ModuleRole::Receiver, Kinds::new(&[&TOY]));
        let (a, b) = (deal(&mut s, "test/toy", 1, vec![]).unwrap(), deal(&mut r, "test/toy", 1, vec![]).unwrap());
        assert_ne!(a, b, "each role gets its own share");
        let e = deal(&mut s, "test/toy", 1, vec![]).unwrap_err().to_string();
        assert!(e.contains("test/toy batch 1 already dealt"), "{e}");
        // refused parameters do not consume the batch number
        assert!(deal(&mut s, "test/toy", 2, vec![1]).is_err());
        assert!(deal(&mut s, "test/toy", 2, vec![]).is_ok());
        // a provider serves only what it was given
        let e = deal(&mut module(ModuleRole::Sender, Kinds::default()), "test/toy", 1, vec![]).unwrap_err().to_string();
        assert!(e.contains("unknown dealing kind 'test/toy'"), "{e}");
    }
}
