//! Admission control for services that accept connections from untrusted
//! peers (`hush serve`, `hush dealer`): a bound on connections still in
//! their set-up, and a byte budget that sessions reserve before they
//! allocate. Exceeding either is a refusal the caller reports in one clear
//! line — never an unbounded queue of threads, never an out-of-memory kill.
//!
//! * [`PendingGate`]: connections accepted but not yet past their set-up
//!   (greeting, TLS handshake, hello or join). The accept loop takes a
//!   [`PendingTicket`] before it spawns anything for a connection; when
//!   none is left it closes the connection at once (the peer sees the
//!   connection closed during set-up) and logs why. Set-up is bounded in
//!   time by the transport's handshake timeout, so the gate frees itself.
//! * [`MemGate`]: a global budget of bytes. A session reserves its estimated
//!   peak ([`MemGate::reserve`]) before it allocates anything sized by the
//!   model; the [`Reservation`] gives it back when dropped. As a backstop,
//!   a reservation is also refused while the process's resident memory
//!   ([`resident_bytes`], measured) is already at the budget.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Bound on connections in their set-up phase.
#[derive(Debug)]
pub struct PendingGate {
    max: usize,
    now: AtomicUsize,
}

/// One pending connection; dropping it frees its place.
#[derive(Debug)]
pub struct PendingTicket(Arc<PendingGate>);

impl Drop for PendingTicket {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}

impl PendingGate {
    /// At most `max` pending connections (0 is taken as 1).
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(PendingGate { max: max.max(1), now: AtomicUsize::new(0) })
    }

    /// A place for one more pending connection, or `None` when all `max`
    /// are taken.
    pub fn try_enter(self: &Arc<Self>) -> Option<PendingTicket> {
        let mut cur = self.now.load(Ordering::SeqCst);
        loop {
            if cur >= self.max {
                return None;
            }
            match self.now.compare_exchange(cur, cur + 1, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return Some(PendingTicket(self.clone())),
                Err(c) => cur = c,
            }
        }
    }

    /// Connections pending now.
    pub fn pending(&self) -> usize {
        self.now.load(Ordering::SeqCst)
    }

    /// The bound.
    pub fn max(&self) -> usize {
        self.max
    }
}

/// A global budget of bytes that sessions reserve.
#[derive(Debug)]
pub struct MemGate {
    total: Option<u64>,
    reserved: Mutex<u64>,
    /// Reads the process's resident bytes (the backstop); `None` skips it.
    rss: Option<fn() -> Option<u64>>,
}

/// Bytes reserved by one session; dropping it gives them back.
#[derive(Debug)]
pub struct Reservation {
    gate: Option<Arc<MemGate>>,
    bytes: u64,
}

impl Reservation {
    /// A reservation of nothing (no gate).
    pub fn none() -> Self {
        Reservation { gate: None, bytes: 0 }
    }
    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(g) = &self.gate {
            if let Ok(mut r) = g.reserved.lock() {
                *r = r.saturating_sub(self.bytes);
            }
        }
    }
}

fn mib(b: u64) -> f64 {
    b as f64 / 1048576.0
}

impl MemGate {
    /// A budget of `total` bytes (`None`: unlimited, reservations are only
    /// counted), with the resident-memory backstop of this process.
    pub fn new(total: Option<u64>) -> Arc<Self> {
        Arc::new(MemGate { total, reserved: Mutex::new(0), rss: Some(resident_bytes) })
    }

    /// As [`MemGate::new`] with another resident-memory reader (tests).
    pub fn with_rss(total: Option<u64>, rss: Option<fn() -> Option<u64>>) -> Arc<Self> {
        Arc::new(MemGate { total, reserved: Mutex::new(0), rss })
    }

    /// The budget.
    pub fn total(&self) -> Option<u64> {
        self.total
    }

    /// Bytes reserved now.
    pub fn reserved(&self) -> u64 {
        self.reserved.lock().map(|r| *r).unwrap_or(0)
    }

    /// Reserves `bytes`, or says in one line why not: the reservations
    /// would exceed the budget, or the process's resident memory is
    /// already at it.
    pub fn reserve(self: &Arc<Self>, bytes: u64) -> Result<Reservation, String> {
        let mut r = self.reserved.lock().map_err(|_| "memory gate poisoned".to_string())?;
        if let Some(total) = self.total {
            if r.saturating_add(bytes) > total {
                return Err(format!(
                    "server memory cap reached: this session needs about {:.1} MiB, running sessions hold {:.1} MiB of the {:.1} MiB cap; try again later",
                    mib(bytes),
                    mib(*r),
                    mib(total)
                ));
            }
            if let Some(rss) = self.rss.and_then(|f| f()) {
                if rss >= total {
                    return Err(format!("server memory cap reached: resident memory {:.1} MiB is at the {:.1} MiB cap; try again later", mib(rss), mib(total)));
                }
            }
        }
        *r += bytes;
        Ok(Reservation { gate: Some(self.clone()), bytes })
    }
}

/// The process's resident memory in bytes (`VmRSS` of
/// `/proc/self/status`; `None` where there is no procfs).
pub fn resident_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Gives the allocator's free memory back to the system (glibc:
/// `malloc_trim(0)`, which also releases free pages inside every arena's
/// heap, not just at its top; elsewhere nothing). A long-running service
/// calls it when a session ends: with many threads, glibc keeps freed
/// session memory in per-thread arenas, so the idle resident size would
/// otherwise creep up with the number of sessions served (fragmentation,
/// not a leak). Takes a few milliseconds; never called on a hot path.
pub fn return_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks and trims the allocator's own arenas
    // under their locks; it has no preconditions on the caller.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Physical memory in bytes (`MemTotal` of `/proc/meminfo`).
pub fn physical_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_gate_refuses_beyond_its_bound_and_frees_on_drop() {
        let g = PendingGate::new(2);
        let a = g.try_enter().expect("first");
        let _b = g.try_enter().expect("second");
        assert!(g.try_enter().is_none(), "a third pending connection must be refused");
        drop(a);
        assert_eq!(g.pending(), 1);
        assert!(g.try_enter().is_some());
    }

    #[test]
    fn mem_gate_counts_reservations_and_refuses_beyond_the_cap() {
        let g = MemGate::with_rss(Some(100), None);
        let a = g.reserve(60).unwrap();
        let e = g.reserve(50).unwrap_err();
        assert!(e.contains("memory cap reached"), "{e}");
        let b = g.reserve(40).unwrap();
        assert_eq!(g.reserved(), 100);
        drop(a);
        drop(b);
        assert_eq!(g.reserved(), 0);
        assert!(g.reserve(101).is_err(), "one session above the whole cap is refused");
    }

    #[test]
    fn mem_gate_backstop_refuses_when_resident_memory_is_at_the_cap() {
        fn full() -> Option<u64> {
            Some(1000)
        }
        let g = MemGate::with_rss(Some(500), Some(full));
        let e = g.reserve(1).unwrap_err();
        assert!(e.contains("resident memory"), "{e}");
        let unlimited = MemGate::with_rss(None, Some(full));
        assert!(unlimited.reserve(1 << 40).is_ok());
    }

    #[test]
    fn resident_bytes_reads_procfs() {
        if std::path::Path::new("/proc/self/status").exists() {
            assert!(resident_bytes().unwrap() > 0);
        }
    }
}
