//! Host side of `tee` mode: asks this party's trusted module for its share
//! of a dealing kind (described in `hush_2pc::deal`, served by any provider), in batches of at most
//! [`hush_deal::MAX_DEAL_N`] elements per crossing, and counts the
//! bytes the module dealt.
//!
//! Both parties must request the same kinds in the same order: the batch
//! number is a per-session counter, part of the key label.

use crate::Result;
use hush_deal::DealRequest;
use hush_tee::{Request, Response, TrustedModule};
use hush_transport::Channel;

/// A party's module plus its batch counter.
pub struct Dealer {
    module: Box<dyn TrustedModule>,
    next_batch: u64,
    /// Bytes of shares the module released to this host so far.
    pub dealt_bytes: u64,
}

impl Dealer {
    /// Wraps a module whose seed agreement is already complete.
    pub fn new(module: Box<dyn TrustedModule>) -> Self {
        Dealer { module, next_batch: 0, dealt_bytes: 0 }
    }

    /// Runs seed agreement with the peer's module over `ch` (party 0 takes
    /// the module's Sender role, party 1 the Receiver role).
    pub fn establish(mut module: Box<dyn TrustedModule>, ch: &mut dyn Channel, party: crate::Party) -> Result<Self> {
        let role = if party == 0 { hush_tee::ModuleRole::Sender } else { hush_tee::ModuleRole::Receiver };
        hush_tee::establish(&mut *module, ch, role)?;
        Ok(Self::new(module))
    }

    /// An in-process module with OS randomness (simulated attestation —
    /// gives no hardware protection), seed agreement included.
    pub fn in_process(ch: &mut dyn Channel, party: crate::Party) -> Result<Self> {
        let m = hush_tee::InProcessModule::new(hush_tee::Module::new().with_kinds(crate::deal::kinds()));
        Self::establish(Box::new(m), ch, party)
    }

    /// The batch number the next dealing request will carry.
    pub fn peek_batch(&self) -> u64 {
        self.next_batch
    }

    pub fn next_batch(&mut self) -> u64 {
        let b = self.next_batch;
        self.next_batch += 1;
        b
    }

    /// One crossing: this host's share of `req`, as bytes.
    pub fn deal(&mut self, req: DealRequest) -> Result<Vec<u8>> {
        match &mut self.module.call(&Request::Deal(req))? {
            Response::Dealt(b) => {
                self.dealt_bytes += b.len() as u64;
                Ok(std::mem::take(b))
            }
            _ => Err(hush_tee::Error::Malformed("unexpected response to a dealing request".into()).into()),
        }
    }

    /// One crossing whose share the module writes straight into `sink`
    /// (see [`hush_tee::TrustedModule::deal_into`]): `true` when done
    /// (counted in [`Dealer::dealt_bytes`] at the share's byte size),
    /// `false` when the backend or kind cannot — then call [`Dealer::deal`]
    /// with the same request.
    pub fn deal_into(&mut self, req: &DealRequest, sink: &mut dyn std::any::Any) -> Result<bool> {
        match self.module.deal_into(req, sink)? {
            Some(b) => {
                self.dealt_bytes += b as u64;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    pub fn stats(&self) -> hush_tee::ModuleStats {
        self.module.stats()
    }

    pub fn describe(&self) -> String {
        self.module.describe()
    }
}
