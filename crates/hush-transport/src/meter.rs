//! Cost accounting: bytes each way, messages, rounds (see crate docs for the
//! definition of a round).

use crate::{Error, Result};
use std::ops::{Add, Sub};

/// What a channel endpoint has spent so far. `bytes_*` count payload bytes;
/// `wire_bytes_*` include frame headers; `socket_bytes_*` are what actually
/// crossed the socket: frames plus the connection greeting and, under TLS,
/// the handshake and record overhead (equal to `wire_bytes_*` in memory).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cost {
    pub bytes_sent: u64,
    pub bytes_recv: u64,
    pub wire_bytes_sent: u64,
    pub wire_bytes_recv: u64,
    pub socket_bytes_sent: u64,
    pub socket_bytes_recv: u64,
    pub msgs_sent: u64,
    pub msgs_recv: u64,
    /// Largest message depth seen (sent or received) = rounds so far.
    pub rounds: u32,
}

impl Cost {
    /// Payload bytes in both directions.
    pub fn bytes(&self) -> u64 {
        self.bytes_sent + self.bytes_recv
    }
}

impl Sub for Cost {
    type Output = Cost;
    /// Difference of two snapshots of the same endpoint. `rounds` becomes the
    /// number of rounds added between the snapshots.
    fn sub(self, o: Cost) -> Cost {
        Cost {
            bytes_sent: self.bytes_sent - o.bytes_sent,
            bytes_recv: self.bytes_recv - o.bytes_recv,
            wire_bytes_sent: self.wire_bytes_sent - o.wire_bytes_sent,
            wire_bytes_recv: self.wire_bytes_recv - o.wire_bytes_recv,
            socket_bytes_sent: self.socket_bytes_sent - o.socket_bytes_sent,
            socket_bytes_recv: self.socket_bytes_recv - o.socket_bytes_recv,
            msgs_sent: self.msgs_sent - o.msgs_sent,
            msgs_recv: self.msgs_recv - o.msgs_recv,
            rounds: self.rounds - o.rounds,
        }
    }
}

impl Add for Cost {
    type Output = Cost;
    /// Sum of two endpoints' costs (e.g. several channels of one party);
    /// rounds take the maximum.
    fn add(self, o: Cost) -> Cost {
        Cost {
            bytes_sent: self.bytes_sent + o.bytes_sent,
            bytes_recv: self.bytes_recv + o.bytes_recv,
            wire_bytes_sent: self.wire_bytes_sent + o.wire_bytes_sent,
            wire_bytes_recv: self.wire_bytes_recv + o.wire_bytes_recv,
            socket_bytes_sent: self.socket_bytes_sent + o.socket_bytes_sent,
            socket_bytes_recv: self.socket_bytes_recv + o.socket_bytes_recv,
            msgs_sent: self.msgs_sent + o.msgs_sent,
            msgs_recv: self.msgs_recv + o.msgs_recv,
            rounds: self.rounds.max(o.rounds),
        }
    }
}

/// Tracks message depths for one endpoint.
#[derive(Clone, Copy, Debug, Default)]
pub struct RoundClock {
    recv_max: u32,
    sent_max: u32,
}

impl RoundClock {
    /// Depth to stamp on a message sent now. Cannot overflow: received
    /// depths are at most `u32::MAX - 1` (see [`RoundClock::on_recv`]).
    pub fn on_send(&mut self) -> u32 {
        let d = self.recv_max.saturating_add(1);
        self.sent_max = self.sent_max.max(d);
        d
    }
    /// Records the depth of a received message. A depth of `u32::MAX` (the
    /// next send would need depth `u32::MAX + 1`) is rejected with
    /// [`Error::DepthOverflow`]; the clock is left unchanged.
    pub fn on_recv(&mut self, depth: u32) -> Result<()> {
        if depth == u32::MAX {
            return Err(Error::DepthOverflow { depth });
        }
        self.recv_max = self.recv_max.max(depth);
        Ok(())
    }
    pub fn rounds(&self) -> u32 {
        self.recv_max.max(self.sent_max)
    }
}
