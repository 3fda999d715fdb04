//! Resource limits of `hush serve`: a per-session memory cap, a global
//! memory cap, and a bound on pending connections. Exceeding any of them is
//! a refusal the client receives as an error naming the limit (and the
//! server logs in one line) — never an out-of-memory kill.
//!
//! * **Per session** (`--session-mem BYTES`): at the hello, the server
//!   fits the session's chunk and pre-dealing budget to the cap with the
//!   client's memory model ([`crate::budget::fit`], which describes the
//!   server's own engine too: same plan, same chunks, same dealt items)
//!   after setting aside what only the server holds ([`server_extra`]: the
//!   module's copy of the weights, the transport's inbound buffer). A model
//!   whose floor does not fit is refused before anything is dealt. The
//!   session's TCP channel buffers at most a quarter of the cap from the
//!   client ([`session_buffer`]): a client that floods the server while it
//!   sends hits a transport error, not the server's memory.
//! * **Global** (`--total-mem BYTES`): every session reserves its estimate
//!   ([`server_estimate`]) before it deals or loads anything; a session
//!   whose reservation would take the sum above the cap is refused ("server
//!   memory cap reached … try again later") and running sessions are not
//!   touched. Backstop: a session is also refused while the process's
//!   resident memory (measured) is at the cap.
//! * **Pending connections** (`--max-pending N`): connections accepted
//!   but still in their greeting / TLS handshake (each on its own thread,
//!   bounded in time by the transport's handshake timeout). Beyond N the
//!   accept loop closes a new connection at once and logs it; the client
//!   sees the connection closed during set-up. Sessions past their
//!   handshake are bounded by `--max-sessions` (refused with a message).
//!
//! What the caps count is an *estimate* of each session's peak (the same
//! model the client's `--max-mem` fit uses), reserved before the session
//! allocates; the backstop and the transport's caps (frame size, inbound
//! buffer) bound what a hostile client can add to it.

use crate::model::Model;
use crate::plan::{Plan, StepKind};
use crate::{Error, Result};
use hush_transport::admission::{MemGate, PendingGate, Reservation};
use std::sync::Arc;

/// Default bound on pending connections.
pub const DEFAULT_MAX_PENDING: usize = 128;

/// Smallest inbound buffer a session channel is given (two frames).
const MIN_SESSION_BUFFER: u64 = 2 * (hush_transport::DEFAULT_MAX_FRAME as u64 + 64);

/// A server's limits, shared by all its sessions (clones share the gates).
#[derive(Clone, Debug)]
pub struct ServerLimits {
    /// Per-session memory cap in bytes (`None`: sessions are not fitted to a cap).
    pub session_mem: Option<u64>,
    /// The global budget (reservations of running sessions).
    pub mem: Arc<MemGate>,
    /// Connections in their set-up.
    pub pending: Arc<PendingGate>,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits::new(None, None, DEFAULT_MAX_PENDING)
    }
}

impl ServerLimits {
    pub fn new(session_mem: Option<u64>, total_mem: Option<u64>, max_pending: usize) -> Self {
        ServerLimits { session_mem, mem: MemGate::new(total_mem), pending: PendingGate::new(max_pending) }
    }
}

fn mib(b: u64) -> f64 {
    b as f64 / 1048576.0
}

/// Bytes of the server's weights (ring elements) in its plan.
pub fn weight_bytes(plan: &Plan) -> u64 {
    plan.steps
        .iter()
        .map(|st| match &st.kind {
            StepKind::Linear { op: Some(op), bias, .. } => {
                let w = match op {
                    hush_tee::linear_deal::LinearOp::Conv { weight, .. } => weight.len(),
                    hush_tee::linear_deal::LinearOp::Dense { weight, .. } => weight.len(),
                    hush_tee::linear_deal::LinearOp::Scale { weight, .. } => weight.len(),
                };
                8 * (w + bias.len()) as u64
            }
            _ => 0,
        })
        .sum()
}

/// The inbound buffer of a session's channel under a per-session cap: a
/// quarter of it, at least two default frames; `None` without a cap (the
/// transport's default).
pub fn session_buffer(session_mem: Option<u64>) -> Option<usize> {
    session_mem.map(|s| (s / 4).max(MIN_SESSION_BUFFER) as usize)
}

/// What a server session holds beyond the engine's working set (which
/// [`crate::budget::client_estimate`] models for either party): the
/// module's copy of the weights (loaded per session; twice while the load
/// request is encoded) and, under a cap, the channel's inbound buffer.
pub fn server_extra(plan: &Plan, session_mem: Option<u64>) -> u64 {
    2 * weight_bytes(plan) + session_buffer(session_mem).unwrap_or(0) as u64
}

/// Bytes one inference's dealt items take (what pre-dealing can hold at
/// most, whatever its budget).
pub fn dealt_bytes(plan: &Plan, proto: &str, chunk: usize) -> Result<u64> {
    let mut t = 0u64;
    for it in crate::engine::schedule(plan, chunk) {
        t += crate::engine::item_est_bytes(proto, plan.cfg.bits, &it)?;
    }
    Ok(t)
}

/// Estimated peak of one server session with these parameters (the
/// pre-dealing budget counted up to what one inference deals).
pub fn server_estimate(model: &Model, plan: &Plan, proto: &str, chunk: usize, predeal: u64, session_mem: Option<u64>) -> Result<u64> {
    let predeal = if proto == "cf2" { 0 } else { predeal.min(dealt_bytes(plan, proto, chunk)?) };
    let mut e = crate::budget::client_estimate_total(model, plan, proto, chunk, predeal, None)?;
    if proto != "cf2" {
        e += crate::budget::lookahead_bytes(plan, proto, chunk)?;
    }
    Ok(e + server_extra(plan, session_mem))
}

/// Admits one session at its hello: fits `chunk` and `predeal` (already
/// fitted to the client's budget) to the per-session cap, then reserves the
/// session's estimate in the global budget. `Err` is the refusal to send
/// to the client.
pub fn admit(limits: &ServerLimits, model: &Model, plan: &Plan, proto: &str, chunk: usize, predeal: u64) -> std::result::Result<(usize, u64, Reservation), String> {
    let (mut chunk, mut predeal) = (chunk, predeal);
    if let Some(cap) = limits.session_mem {
        let extra = server_extra(plan, Some(cap));
        let engine_budget = cap.saturating_sub(extra);
        let f = crate::budget::fit(model, plan, proto, chunk, predeal, engine_budget).map_err(|_| {
            let floor = crate::budget::floor(model, plan, proto).unwrap_or(0);
            format!(
                "server per-session memory cap (--session-mem {:.1} MiB) is below what model '{}' needs there ({:.1} MiB: the engine's floor {:.1} MiB, the module's weights and the channel buffer {:.1} MiB); session refused before anything was dealt",
                mib(cap),
                model.name,
                mib(floor + extra),
                mib(floor),
                mib(extra)
            )
        })?;
        chunk = chunk.min(f.chunk);
        predeal = predeal.min(f.predeal_mem);
    }
    let need = server_estimate(model, plan, proto, chunk, predeal, limits.session_mem).map_err(|e| e.to_string())?;
    let r = limits.mem.reserve(need)?;
    Ok((chunk, predeal, r))
}

/// The accept loop's gate: a place among the pending connections for
/// `stream` (returned with it), or — when all are taken — the connection
/// is closed at once, counted as failed and logged in one line.
pub fn enter_pending(
    limits: &ServerLimits,
    stream: std::net::TcpStream,
    id: u64,
    log: &(dyn Fn(String) + Send + Sync),
    failed: &std::sync::atomic::AtomicU64,
) -> Option<(std::net::TcpStream, hush_transport::admission::PendingTicket)> {
    match limits.pending.try_enter() {
        Some(t) => Some((stream, t)),
        None => {
            let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
            let _ = stream.shutdown(std::net::Shutdown::Both);
            failed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            log(format!("session {id}: refused (connection from {peer}: {} connections already in set-up, --max-pending)", limits.pending.max()));
            None
        }
    }
}

/// A global cap flag: a size, `none`, or absent (3/4 of physical memory,
/// none where it cannot be read).
pub fn cap_flag(v: Option<&str>, flag: &str) -> Result<Option<u64>> {
    match v {
        Some("none") => Ok(None),
        Some(s) => parse_bytes(s).map(Some).map_err(|e| Error::Config(format!("{flag}: {e}"))),
        None => Ok(hush_transport::admission::physical_bytes().map(|b| b / 4 * 3)),
    }
}

/// Parses a byte size: a number with an optional K, M, G suffix (powers of 1024).
pub fn parse_bytes(s: &str) -> Result<u64> {
    let t = s.trim();
    let (num, mul) = match t.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => {
            let unit = t[i..].to_ascii_lowercase();
            let m = match unit.trim_end_matches("ib").trim_end_matches('b') {
                "" => 1,
                "k" => 1 << 10,
                "m" => 1 << 20,
                "g" => 1 << 30,
                "t" => 1 << 40,
                _ => return Err(Error::Config(format!("'{s}': unknown size unit (use K, M, G or T)"))),
            };
            (&t[..i], m)
        }
        None => (t, 1u64),
    };
    let n: f64 = num.trim().parse().map_err(|_| Error::Config(format!("'{s}' is not a size (e.g. 512M, 4G)")))?;
    if !n.is_finite() || n < 0.0 || n * mul as f64 >= 1.8e19 {
        return Err(Error::Config(format!("'{s}': size out of range")));
    }
    Ok((n * mul as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_bytes("512M").unwrap(), 512 << 20);
        assert_eq!(parse_bytes("4GiB").unwrap(), 4 << 30);
        assert_eq!(parse_bytes("1000").unwrap(), 1000);
        assert_eq!(parse_bytes("1.5k").unwrap(), 1536);
        assert!(parse_bytes("12Q").is_err());
        assert!(parse_bytes("-1G").is_err());
        assert!(parse_bytes("1e30").is_err());
    }
}
