//! The interface through which every protocol obtains COT/ROT batches.

use crate::Result;
use hush_primitives::{BitVec, Block};
use hush_transport::Channel;

/// Which side of the correlation a party holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Holds Δ and q_i.
    Sender,
    /// Holds b_i and t_i = q_i ⊕ b_i·Δ.
    Receiver,
}

/// Common to every correlation source (IKNP, Ferret, SilentFlow, ...).
pub trait CorrelationSource: Send {
    /// Short name for reports (`iknp`, `ferret`, `silent`).
    fn name(&self) -> &'static str;
    fn role(&self) -> Role;
    /// COTs handed out so far. Each COT has a unique index in the session;
    /// hashes derived from COTs use it as their tweak.
    fn produced(&self) -> u64;
}

/// Sender side of a COT source.
pub trait CotSender: CorrelationSource {
    /// The global correlation Δ (same for the whole session).
    fn delta(&self) -> Block;
    /// Fills `q` with `q.len()` fresh COTs (caller-owned buffer). The peer
    /// must call [`CotReceiver::recv_cots`] with the same length.
    fn send_cots(&mut self, ch: &mut dyn Channel, q: &mut [Block]) -> Result<()>;
}

/// Receiver side of a COT source.
pub trait CotReceiver: CorrelationSource {
    /// Fills `choices` (resized to `t.len()`) with random choice bits and
    /// `t` with t_i = q_i ⊕ b_i·Δ.
    fn recv_cots(&mut self, ch: &mut dyn Channel, choices: &mut BitVec, t: &mut [Block]) -> Result<()>;
}

impl<T: CorrelationSource + ?Sized> CorrelationSource for Box<T> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn role(&self) -> Role {
        (**self).role()
    }
    fn produced(&self) -> u64 {
        (**self).produced()
    }
}
impl<T: CotSender + ?Sized> CotSender for Box<T> {
    fn delta(&self) -> Block {
        (**self).delta()
    }
    fn send_cots(&mut self, ch: &mut dyn Channel, q: &mut [Block]) -> Result<()> {
        (**self).send_cots(ch, q)
    }
}
impl<T: CotReceiver + ?Sized> CotReceiver for Box<T> {
    fn recv_cots(&mut self, ch: &mut dyn Channel, choices: &mut BitVec, t: &mut [Block]) -> Result<()> {
        (**self).recv_cots(ch, choices, t)
    }
}
