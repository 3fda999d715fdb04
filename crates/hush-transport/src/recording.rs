//! A channel that records what its party receives — the network part of
//! that party's *view*. The view tests of every protocol (the curious party
//! replaying its real view) wrap one party's channel in [`Recording`].

use crate::{Channel, Cost, Result};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Every message received, in order (shared with the test that reads it).
pub type ViewLog = Arc<Mutex<Vec<Vec<u8>>>>;

/// Wraps a channel and keeps a copy of every message received through it.
pub struct Recording<C: Channel> {
    inner: C,
    log: ViewLog,
}

impl<C: Channel> Recording<C> {
    /// Wraps `inner`; the log starts empty.
    pub fn new(inner: C) -> Self {
        Recording { inner, log: ViewLog::default() }
    }
    /// Wraps `inner`, appending to an existing log.
    pub fn with_log(inner: C, log: ViewLog) -> Self {
        Recording { inner, log }
    }
    /// The shared log.
    pub fn log(&self) -> ViewLog {
        self.log.clone()
    }
    /// Every received byte so far, concatenated.
    pub fn received_bytes(&self) -> Vec<u8> {
        self.log.lock().map(|l| l.concat()).unwrap_or_default()
    }
    pub fn into_inner(self) -> C {
        self.inner
    }
}

impl<C: Channel> Channel for Recording<C> {
    fn send(&mut self, payload: &[u8]) -> Result<()> {
        self.inner.send(payload)
    }
    fn recv(&mut self) -> Result<Vec<u8>> {
        let m = self.inner.recv()?;
        if let Ok(mut l) = self.log.lock() {
            l.push(m.clone());
        }
        Ok(m)
    }
    fn recv_exact_into(&mut self, what: &'static str, out: &mut [u8]) -> Result<()> {
        self.inner.recv_exact_into(what, out)?;
        if let Ok(mut l) = self.log.lock() {
            l.push(out.to_vec());
        }
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
