//! Emulated network profiles (the papers' settings).

use std::time::{Duration, Instant};

/// A network link to emulate: bandwidth (None = unlimited) and one-way latency.
#[derive(Clone, Debug, PartialEq)]
pub struct NetProfile {
    pub name: String,
    pub bandwidth_bps: Option<u64>,
    pub latency: Duration,
}

impl NetProfile {
    /// No emulation: the raw transport.
    pub fn none() -> Self {
        Self { name: "none".into(), bandwidth_bps: None, latency: Duration::ZERO }
    }
    /// LAN: 3 Gbps, 0.3 ms one-way.
    pub fn lan() -> Self {
        Self { name: "lan".into(), bandwidth_bps: Some(3_000_000_000), latency: Duration::from_micros(300) }
    }
    /// WAN: 200 Mbps, 50 ms one-way.
    pub fn wan() -> Self {
        Self { name: "wan".into(), bandwidth_bps: Some(200_000_000), latency: Duration::from_millis(50) }
    }
    /// Mobile: 100 Mbps, 80 ms one-way.
    pub fn mobile() -> Self {
        Self { name: "mobile".into(), bandwidth_bps: Some(100_000_000), latency: Duration::from_millis(80) }
    }
    /// SHAPER's evaluation network (§5: "40 Mbps network bandwidth and 40ms
    /// latency", the setting of its Table 6 and of CAESAR's CPU figures):
    /// 40 Mbps per direction, 40 ms one-way. The paper does not say whether
    /// its 40 ms is one-way or a round trip; one-way is the slower reading.
    pub fn shaper() -> Self {
        Self { name: "shaper".into(), bandwidth_bps: Some(40_000_000), latency: Duration::from_millis(40) }
    }
    /// Looks a profile up by name (`none`, `lan`, `wan`, `mobile`, `shaper`).
    pub fn by_name(name: &str) -> Option<Self> {
        match name {
            "none" => Some(Self::none()),
            "lan" => Some(Self::lan()),
            "wan" => Some(Self::wan()),
            "mobile" => Some(Self::mobile()),
            "shaper" => Some(Self::shaper()),
            _ => None,
        }
    }
    pub fn names() -> &'static [&'static str] {
        &["none", "lan", "wan", "mobile", "shaper"]
    }
    pub fn is_none(&self) -> bool {
        self.bandwidth_bps.is_none() && self.latency.is_zero()
    }
}

/// The sending side of an emulated link: frames queue behind each other at
/// the profile's bandwidth.
#[derive(Debug)]
pub(crate) struct LinkShaper {
    profile: NetProfile,
    free_at: Option<Instant>,
}

impl LinkShaper {
    pub(crate) fn new(profile: NetProfile) -> Self {
        Self { profile, free_at: None }
    }
    /// For a frame of `wire_len` bytes handed to the link now, returns how
    /// long after now the receiver may deliver it (transmission + latency).
    pub(crate) fn delay_for(&mut self, wire_len: usize) -> u64 {
        if self.profile.is_none() {
            return 0;
        }
        let now = Instant::now();
        let start = match self.free_at {
            Some(t) if t > now => t,
            _ => now,
        };
        let tx = match self.profile.bandwidth_bps {
            Some(bps) => Duration::from_nanos(tx_ns(wire_len as u64, bps)),
            None => Duration::ZERO,
        };
        let done = start + tx;
        self.free_at = Some(done);
        ((done - now) + self.profile.latency).as_nanos() as u64
    }
}

/// Transmission time of `bytes` at `bps` in nanoseconds (saturating).
fn tx_ns(bytes: u64, bps: u64) -> u64 {
    let ns = (bytes as u128 * 8 * 1_000_000_000) / bps.max(1) as u128;
    ns.min(u64::MAX as u128) as u64
}

/// Receiver-side bound on the emulated delay a peer announces in a frame
/// header (`delay_ns` is peer-supplied, hence untrusted).
///
/// The sender computes `delay = (time until its virtual link is free after
/// this frame) + latency`. Its link can only be busy with frames it has
/// already sent, all of which this endpoint has received (TCP and the
/// in-memory queue are in order), so with *our own* profile the largest
/// delay a correct peer can announce for a frame is
/// `latency + transmission time of every wire byte received so far,
/// this frame included`. A larger value is clamped to that bound, and the
/// result is further capped by the channel's receive timeout, so a peer can
/// never make `recv` sleep longer than it could stay silent anyway. With our
/// profile `none`, peer delays are ignored.
#[derive(Debug)]
pub(crate) struct DelayBound {
    profile: NetProfile,
    wire_recv: u64,
}

impl DelayBound {
    pub(crate) fn new(profile: NetProfile) -> Self {
        Self { profile, wire_recv: 0 }
    }
    /// Records a received frame of `wire_len` bytes and returns its delay
    /// clamped as described above.
    pub(crate) fn clamp(&mut self, wire_len: usize, delay_ns: u64, timeout: Duration) -> u64 {
        self.wire_recv = self.wire_recv.saturating_add(wire_len as u64);
        if self.profile.is_none() {
            return 0;
        }
        let lat = self.profile.latency.as_nanos().min(u64::MAX as u128) as u64;
        let tx = self.profile.bandwidth_bps.map_or(0, |bps| tx_ns(self.wire_recv, bps));
        let bound = lat.saturating_add(tx);
        let t = timeout.as_nanos().min(u64::MAX as u128) as u64;
        delay_ns.min(bound).min(t)
    }
}

/// Sleeps until `arrived + delay_ns` (receiver side of the emulation).
pub(crate) fn wait_delivery(arrived: Instant, delay_ns: u64) {
    if delay_ns == 0 {
        return;
    }
    let Some(at) = arrived.checked_add(Duration::from_nanos(delay_ns)) else { return };
    let now = Instant::now();
    if at > now {
        std::thread::sleep(at - now);
    }
}
