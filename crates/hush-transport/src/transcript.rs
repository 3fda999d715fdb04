//! A channel wrapper that digests every payload it sends and receives, for
//! deterministic-transcript tests: with all randomness seeded, a protocol's
//! transcript digest is a regression pin — a change to the bytes on the wire
//! cannot slip through unnoticed.

use crate::{Channel, Cost, Result};
use std::time::Duration;

/// Wraps a channel and keeps a running CRC-32 of each direction (each
/// message's length is mixed in, so message boundaries count too).
pub struct Transcript<C: Channel> {
    inner: C,
    sent: crc32fast::Hasher,
    recv: crc32fast::Hasher,
}

impl<C: Channel> Transcript<C> {
    pub fn new(inner: C) -> Self {
        Transcript { inner, sent: crc32fast::Hasher::new(), recv: crc32fast::Hasher::new() }
    }
    /// (digest of everything sent, digest of everything received).
    pub fn digest(&self) -> (u32, u32) {
        (self.sent.clone().finalize(), self.recv.clone().finalize())
    }
    pub fn into_inner(self) -> C {
        self.inner
    }
}

impl<C: Channel> Channel for Transcript<C> {
    fn send(&mut self, payload: &[u8]) -> Result<()> {
        self.inner.send(payload)?;
        self.sent.update(&(payload.len() as u64).to_le_bytes());
        self.sent.update(payload);
        Ok(())
    }
    fn recv(&mut self) -> Result<Vec<u8>> {
        let m = self.inner.recv()?;
        self.recv.update(&(m.len() as u64).to_le_bytes());
        self.recv.update(&m);
        Ok(m)
    }
    fn recv_exact_into(&mut self, what: &'static str, out: &mut [u8]) -> Result<()> {
        self.inner.recv_exact_into(what, out)?;
        self.recv.update(&(out.len() as u64).to_le_bytes());
        self.recv.update(out);
        Ok(())
    }
    fn cost(&self) -> Cost {
        self.inner.cost()
    }
    fn max_frame(&self) -> usize {
        self.inner.max_frame()
    }
    fn set_timeout(&mut self, timeout: Duration) {
        self.inner.set_timeout(timeout)
    }
}
