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

/// The current time as an RFC 3339 UTC timestamp with milliseconds,
/// `2026-11-28T13:50:01.123Z`: the prefix of a server's log lines.
pub fn timestamp() -> String {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    rfc3339(d.as_secs(), d.subsec_millis())
}

/// One log line of a long-running hush process (a server, dealer or node):
/// `2026-11-28T13:50:01.123Z WHO: MESSAGE`, so every server's log reads
/// the same and sorts by time. [`log_line!`](crate::log_line) prints it to
/// stderr; [`logger`] makes the per-session log sink the servers take.
pub fn stamp(who: &str, msg: &str) -> String {
    format!("{} {who}: {msg}", timestamp())
}

/// A server's log sink: each line stamped ([`stamp`]) and written to stderr.
pub fn logger(who: &'static str) -> std::sync::Arc<dyn Fn(String) + Send + Sync> {
    std::sync::Arc::new(move |m: String| eprintln!("{}", stamp(who, &m)))
}

/// Prints one stamped log line to stderr: `log_line!("hush node {p}", "job {id} done")`
/// — who, then the message's format string and arguments.
#[macro_export]
macro_rules! log_line {
    ($who:expr, $($msg:tt)+) => {
        ::std::eprintln!("{}", $crate::notice::stamp(&$who, &::std::format!($($msg)+)))
    };
}

/// `secs` since the Unix epoch (UTC) and `millis` as RFC 3339.
pub fn rfc3339(secs: u64, millis: u32) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // civil date from days since 1970-01-01 (Howard Hinnant's algorithm)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400, 5), "2000-02-29T00:00:00.005Z"); // leap day of a century leap year
        assert_eq!(rfc3339(1_795_868_999, 999), "2026-11-28T12:29:59.999Z");
        assert_eq!(rfc3339(4_102_444_800, 0), "2100-01-01T00:00:00.000Z");
        let l = stamp("hush serve", "session 1: refused");
        assert!(l.ends_with(" hush serve: session 1: refused") && l.as_bytes()[23] == b'Z', "{l}");
        let t = timestamp();
        assert_eq!(t.len(), 24, "{t}");
        assert!(t.ends_with('Z') && t.as_bytes()[10] == b'T', "{t}");
    }
}
