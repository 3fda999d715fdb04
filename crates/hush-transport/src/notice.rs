//! Process-wide notices of the transport layer: lines meant for a human
//! watching a command (today: "waiting for ADDR: connection refused,
//! retrying…" while a peer is not up yet).
//!
//! The library never prints by itself: the default hook is silent. A
//! program installs one with [`set_connect_notice`] (the `hush` binary
//! prints to stderr).

use std::sync::RwLock;

static CONNECT_NOTICE: RwLock<Option<fn(&str)>> = RwLock::new(None);

/// Installs the hook called with a one-line notice when a connection is
/// refused and will be retried (once per connection attempt, not per retry).
/// Replaces any earlier hook; process-wide.
pub fn set_connect_notice(f: fn(&str)) {
    *CONNECT_NOTICE.write().unwrap_or_else(|p| p.into_inner()) = Some(f);
}

/// Removes the hook installed by [`set_connect_notice`] (silent again).
pub fn clear_connect_notice() {
    *CONNECT_NOTICE.write().unwrap_or_else(|p| p.into_inner()) = None;
}

/// The notice printed while retrying a refused connection to `addr` for
/// up to `wait`: "waiting for ADDR: connection refused, retrying… (for up
/// to 30 s)".
pub fn waiting_line(addr: &str, wait: std::time::Duration) -> String {
    let secs = wait.as_secs_f64();
    let secs = if secs.fract() == 0.0 { format!("{secs:.0}") } else { format!("{secs:.1}") };
    format!("waiting for {addr}: connection refused, retrying… (for up to {secs} s)")
}

/// Calls the installed hook, if any.
pub(crate) fn connect_notice(msg: &str) {
    let f = *CONNECT_NOTICE.read().unwrap_or_else(|p| p.into_inner());
    if let Some(f) = f {
        f(msg);
    }
}
