//! # hush-transport — the bottom layer
//!
//! Every protocol in hush talks through the [`Channel`] trait: framed
//! messages between exactly two endpoints, with cost accounting built in.
//! Two implementations exist: [`MemChannel`] (a connected in-memory pair for
//! tests and single-process benchmarks) and [`TcpChannel`], plaintext or
//! TLS 1.3 with pinned identities ([`LinkSecurity`], module [`tls`]).
//!
//! ## Connections
//! [`TcpChannel::connect_with`] / [`TcpChannel::from_accepted`] (and
//! [`TcpChannel::accept_with`], [`tcp_pair_loopback_with`]) set a connection
//! up in three steps: TCP connect (retried while refused, up to
//! [`ChannelOptions::connect_timeout`], then [`Error::ConnectRefused`]), an
//! 8-byte mode greeting so that a plaintext/TLS mismatch is a clear error on
//! both sides, and under TLS the handshake (deadline [`HANDSHAKE_TIMEOUT`]).
//! The older [`TcpChannel::connect`], [`TcpChannel::accept`] and
//! [`tcp_pair_loopback`] are the plaintext (`--insecure`) case of the same;
//! [`TcpChannel::from_stream`] wraps a stream as is (plaintext, no greeting).
//!
//! Channels are full duplex: a `send` that cannot complete because the peer
//! is itself busy sending keeps reading the peer's bytes into a bounded
//! buffer ([`ChannelOptions::max_buffered`]), so two parties may send large
//! messages at the same time without deadlocking.
//!
//! ## Frames
//! A frame on the wire is a 20-byte header followed by the payload:
//! `len: u32 | depth: u32 | delay_ns: u64 | crc32: u32` (little endian),
//! where `crc32` covers the first 16 header bytes and the payload on a
//! plaintext link, and is 0 on a TLS link (the AEAD of every record already
//! authenticates each byte). Frames from
//! the peer are untrusted: the length is checked against the channel's
//! maximum *before* anything is allocated, a short read is
//! [`Error::Truncated`], a checksum mismatch is [`Error::Garbled`]. After any
//! such error the receiving endpoint closes the connection, so the peer's
//! next operation fails too (it sees [`Error::Disconnected`]). A peer that
//! goes silent yields [`Error::Timeout`] after the channel's timeout. A depth
//! of `u32::MAX` is [`Error::DepthOverflow`] (there would be no next round),
//! and the emulated delay a peer announces is capped by what this side's own
//! profile could produce (see [`NetProfile`] below).
//!
//! ## Rounds
//! **Definition (used everywhere in hush).** A *round* is one sequential
//! flight of messages on the critical path. Each message carries a depth:
//! `1 + the largest depth among the messages its sender had received before
//! sending it` (0 if none). Consecutive sends without an intervening receive
//! therefore form one flight with one depth, and messages that both parties
//! send at the same time (neither has read the other's yet) have the same
//! depth and count as **one** round. The number of rounds of a protocol run
//! is the largest depth seen — the length of the longest chain of
//! message-dependencies. Both endpoints agree on it once every message has
//! been received. The depth travels in the frame header and is not counted in
//! [`Cost::bytes_sent`]; payload bytes are what protocols are charged for.
//!
//! ## Network profiles
//! [`NetProfile`] lets any run behave "as if" over a given link while on
//! loopback or in memory: the sender serialises its frames onto a virtual
//! link of the profile's bandwidth (frames queue behind each other) and the
//! receiver delivers each frame only after its transmission time plus the
//! one-way latency. The emulation is applied by the channel itself, so every
//! protocol and benchmark gets it for free. The receiver never trusts the
//! sender's announced delay beyond `latency + transmission time of all
//! bytes received so far` under its own profile (nor beyond its receive
//! timeout); with profile `none` announced delays are ignored. Over TCP an
//! I/O thread stamps each frame's real arrival time, so time the application
//! spends computing overlaps the emulated transfer as it would on a real
//! link.
//!
//! ## Cost
//! [`Cost`] counts payload bytes (`bytes_*`, what protocols are charged
//! for), frames (`wire_bytes_*`, payload + 20-byte headers) and what crossed
//! the socket (`socket_bytes_*`: frames + greeting + TLS handshake and
//! record overhead), so benchmarks can report TLS overhead separately.

pub mod admission;
pub mod client_profile;
pub mod faulty;
mod frame;
mod link;
mod memory;
mod meter;
mod profile;
mod recording;
mod tcp;
pub mod tls;
pub mod peering;
pub mod notice;
mod transcript;

pub use frame::{decode_header, encode_frame, FrameHeader, DEFAULT_MAX_FRAME, HEADER_LEN};
pub use memory::MemChannel;
pub use meter::{Cost, RoundClock};
pub use profile::NetProfile;
pub use client_profile::{ClientProfile, CpuLimit, Throttled};
pub use recording::{Recording, ViewLog};
pub use tcp::{connect_retrying, helper_thread_context, set_io_thread_init, tcp_pair_loopback, tcp_pair_loopback_with, TcpChannel};
pub use notice::{clear_connect_notice, set_connect_notice};
pub use tls::{Fingerprint, Identity, LinkSecurity, PeerCheck, TlsSettings, HANDSHAKE_TIMEOUT};
pub use peering::{LinkConfig, LinkFlags, Pins, INSECURE_WARNING};
pub use transcript::Transcript;

use std::time::Duration;

/// Default time a `recv` waits for the peer before giving up.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The time a `recv` waits for the peer when the caller sets none: the
/// environment's `HUSH_PEER_TIMEOUT` (whole seconds, 1 to 86,400) when set,
/// else [`DEFAULT_TIMEOUT`]. For long sessions on a loaded or throttled
/// host, where one party can compute for more than a minute between two
/// messages (an interactive HE layer over a large batch). A value that does
/// not parse, or is out of range, is ignored with the default kept: a
/// timeout only bounds how long a dead peer is waited for, and never
/// changes what is sent.
pub fn default_timeout() -> Duration {
    timeout_from(std::env::var("HUSH_PEER_TIMEOUT").ok().as_deref())
}

/// [`default_timeout`]'s reading of `HUSH_PEER_TIMEOUT`'s value.
fn timeout_from(v: Option<&str>) -> Duration {
    v.and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|s| (1..=86_400).contains(s))
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_TIMEOUT)
}

#[cfg(test)]
mod tests_timeout {
    use super::*;

    #[test]
    fn peer_timeout_reads_whole_seconds_in_range_and_keeps_the_default_otherwise() {
        assert_eq!(timeout_from(None), DEFAULT_TIMEOUT);
        assert_eq!(timeout_from(Some("7200")), Duration::from_secs(7200));
        assert_eq!(timeout_from(Some(" 1 ")), Duration::from_secs(1));
        assert_eq!(timeout_from(Some("86400")), Duration::from_secs(86_400));
        for bad in ["0", "86401", "-5", "1.5", "", "soon", "18446744073709551616"] {
            assert_eq!(timeout_from(Some(bad)), DEFAULT_TIMEOUT, "{bad:?}");
        }
    }
}
/// Default time `connect` keeps retrying a refused connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Lower bound of the default inbound buffering limit (see
/// [`ChannelOptions::max_buffered`]).
pub const MIN_DEFAULT_BUFFERED: usize = 256 << 20;

fn fmt_fps(fps: &[tls::Fingerprint]) -> String {
    if fps.is_empty() {
        return "(no fingerprint)".into();
    }
    fps.iter().map(|f| f.to_string()).collect::<Vec<_>>().join(" or ")
}

/// Errors of the transport layer. Every way a peer can misbehave maps to one
/// of these; none of them panics.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    #[error("peer disconnected")]
    Disconnected,
    #[error("peer silent for {0:?} (timeout)")]
    Timeout(Duration),
    #[error("frame of {len} bytes exceeds the maximum of {max} bytes")]
    Oversized { len: usize, max: usize },
    #[error("truncated frame: expected {expected} bytes, got {got}")]
    Truncated { expected: usize, got: usize },
    #[error("garbled frame (checksum mismatch)")]
    Garbled,
    #[error("unexpected message length in {what}: expected {expected} bytes, got {got}")]
    WrongLength { what: &'static str, expected: usize, got: usize },
    #[error("channel closed after an earlier error")]
    Closed,
    #[error("peer sent message depth {depth}, which leaves no room for a next round (depth overflow)")]
    DepthOverflow { depth: u32 },
    #[error(
        "peer sent more than {cap} bytes while this side was still sending (both sides sending at once beyond the \
         buffering limit; raise ChannelOptions::max_buffered)"
    )]
    BufferLimit { cap: usize },
    #[error("could not connect to {addr}: connection refused")]
    ConnectRefused { addr: String },
    #[error("peer {peer} runs with TLS but this side was started with --insecure (plaintext)")]
    PeerWantsTls { peer: String },
    #[error("peer {peer} runs plaintext (--insecure) but this side requires TLS")]
    PeerIsPlaintext { peer: String },
    #[error("peer {peer} does not speak the hush protocol (unexpected greeting)")]
    NotHush { peer: String },
    #[error("connection setup with peer {peer} failed: {msg}")]
    Setup { peer: String, msg: String },
    #[error("TLS with peer {peer}: {msg}")]
    Tls { peer: String, msg: String },
    #[error("peer {peer} presented {got} but --pin expects {}; our identity is {ours}", fmt_fps(expected))]
    PinMismatch { peer: String, expected: Vec<tls::Fingerprint>, got: tls::Fingerprint, ours: tls::Fingerprint },
    #[error("invalid fingerprint {input:?}: {reason} (expected \"sha256:\" followed by 64 hex digits)")]
    InvalidFingerprint { input: String, reason: &'static str },
    #[error("identity {path}: {msg}")]
    Identity { path: String, msg: String },
    #[error("{0}")]
    Config(String),
}

pub type Result<T> = std::result::Result<T, Error>;

/// Options common to every channel.
#[derive(Clone, Debug)]
pub struct ChannelOptions {
    /// Largest payload accepted in one frame (checked before allocating).
    pub max_frame: usize,
    /// How long `recv` waits for the peer.
    pub timeout: Duration,
    /// Emulated network.
    pub profile: NetProfile,
    /// How long `connect` keeps retrying while nothing listens at the
    /// address (the peer may still be starting up); then
    /// [`Error::ConnectRefused`].
    pub connect_timeout: Duration,
    /// Largest number of bytes buffered from the peer ahead of `recv`
    /// (`None`: max(256 MiB, 4 × `max_frame`)). Bytes are buffered while this
    /// side is blocked sending (so that two parties sending large messages at
    /// once never deadlock) and, with an emulated profile, read ahead by the
    /// I/O thread. Exceeding it while sending is [`Error::BufferLimit`].
    pub max_buffered: Option<usize>,
}

impl ChannelOptions {
    /// The effective inbound buffering limit.
    pub fn buffer_cap(&self) -> usize {
        self.max_buffered
            .unwrap_or_else(|| MIN_DEFAULT_BUFFERED.max(self.max_frame.saturating_mul(4)))
            .max(self.max_frame.saturating_add(HEADER_LEN))
    }
}

impl Default for ChannelOptions {
    fn default() -> Self {
        Self {
            max_frame: DEFAULT_MAX_FRAME,
            timeout: default_timeout(),
            profile: NetProfile::none(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_buffered: None,
        }
    }
}

/// A bidirectional, framed, metered connection to exactly one peer.
///
/// Protocols are written against this trait and never touch sockets. There
/// is no manual flush contract: `send` hands the frame to the transport
/// immediately.
pub trait Channel: Send {
    /// Sends one message (one frame). Fails with [`Error::Oversized`] if it
    /// is larger than the channel's maximum frame; use [`ChannelExt::send_chunked`]
    /// for large data.
    fn send(&mut self, payload: &[u8]) -> Result<()>;
    /// Receives one message, waiting at most the channel's timeout.
    fn recv(&mut self) -> Result<Vec<u8>>;
    /// Receives one message that must be exactly `out.len()` bytes long
    /// straight into a caller-owned buffer (no allocation on transports
    /// that can avoid it). A message of another length is
    /// [`Error::WrongLength`] and closes the channel.
    fn recv_exact_into(&mut self, what: &'static str, out: &mut [u8]) -> Result<()> {
        let m = self.recv()?;
        if m.len() != out.len() {
            return Err(Error::WrongLength { what, expected: out.len(), got: m.len() });
        }
        out.copy_from_slice(&m);
        Ok(())
    }
    /// Sends `head` followed by `body` as **one** message (the receiver
    /// gets their concatenation). The TCP channel writes both parts without
    /// joining them first — a large dealt share behind a few header bytes
    /// is not copied; this default joins them, then erases the joined copy
    /// (it may carry shares).
    fn send2(&mut self, head: &[u8], body: &[u8]) -> Result<()> {
        let mut m = Vec::with_capacity(head.len() + body.len());
        m.extend_from_slice(head);
        m.extend_from_slice(body);
        let r = self.send(&m);
        zeroize::Zeroize::zeroize(&mut m);
        r
    }
    /// Cost so far (bytes each way, messages, rounds).
    fn cost(&self) -> Cost;
    /// Largest payload per frame.
    fn max_frame(&self) -> usize;
    /// Changes the receive timeout.
    fn set_timeout(&mut self, timeout: Duration);
}

impl<C: Channel + ?Sized> Channel for Box<C> {
    fn send(&mut self, payload: &[u8]) -> Result<()> {
        (**self).send(payload)
    }
    fn recv(&mut self) -> Result<Vec<u8>> {
        (**self).recv()
    }
    fn send2(&mut self, head: &[u8], body: &[u8]) -> Result<()> {
        (**self).send2(head, body)
    }
    fn recv_exact_into(&mut self, what: &'static str, out: &mut [u8]) -> Result<()> {
        (**self).recv_exact_into(what, out)
    }
    fn cost(&self) -> Cost {
        (**self).cost()
    }
    fn max_frame(&self) -> usize {
        (**self).max_frame()
    }
    fn set_timeout(&mut self, timeout: Duration) {
        (**self).set_timeout(timeout)
    }
}

/// Convenience methods on every channel.
pub trait ChannelExt: Channel {
    /// Receives one message that must be exactly `len` bytes long.
    fn recv_exact(&mut self, what: &'static str, len: usize) -> Result<Vec<u8>> {
        let m = self.recv()?;
        if m.len() != len {
            return Err(Error::WrongLength { what, expected: len, got: m.len() });
        }
        Ok(m)
    }

    /// Sends `data` as consecutive frames of at most `max_frame` bytes. The
    /// frames form one flight (one round).
    fn send_chunked(&mut self, data: &[u8]) -> Result<()> {
        let max = self.max_frame().max(1);
        if data.is_empty() {
            return self.send(&[]);
        }
        for c in data.chunks(max) {
            self.send(c)?;
        }
        Ok(())
    }

    /// Receives exactly `out.len()` bytes sent with [`ChannelExt::send_chunked`]
    /// into a caller-owned buffer.
    fn recv_chunked_into(&mut self, what: &'static str, out: &mut [u8]) -> Result<()> {
        let max = self.max_frame().max(1);
        if out.is_empty() {
            return self.recv_exact(what, 0).map(|_| ());
        }
        let mut off = 0;
        while off < out.len() {
            let want = (out.len() - off).min(max);
            self.recv_exact_into(what, &mut out[off..off + want])?;
            off += want;
        }
        Ok(())
    }
}

impl<C: Channel + ?Sized> ChannelExt for C {}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_link;
