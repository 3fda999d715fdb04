//! The `hush` command line as a library, so that the `hush` binary
//! (`src/bin/hush.rs`, also what `cargo install --path crates/hush-cli`
//! installs) and the Python package's `hush` console command (through the
//! `hush._native` extension) run the very same code.
//!
//! The commands themselves live in `src/main.rs` (kept under that name so
//! that work on the command set stays in one file); this crate compiles it
//! as its private module `app`.

use std::ffi::OsString;
use std::process::ExitCode;

#[path = "main.rs"]
mod app;

/// Runs the `hush` command line on `args` (the program name first, as in
/// `std::env::args_os()`); returns the process exit status: 0 on success,
/// 1 on an error (printed to stderr as `hush: error: ...`), 2 on a usage
/// error (`--help` and `--version` print and return 0).
///
/// Installs a [`hush_transport::set_connect_notice`] hook that prints
/// "hush: waiting for ADDR: connection refused, retrying… (for up to 30 s);
/// --connect-timeout SECS sets the wait" to stderr.
pub fn run_with_args<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    app::run_with_args(args)
}

pub use app::lr::{ray_spec, RaySpec};

/// [`run_with_args`] on the process's own arguments.
///
/// Output into a closed pipe (`hush circuit list | head -1`) ends the
/// process quietly with status 141, as a shell reports a process killed by
/// SIGPIPE, instead of a panic and a backtrace. SIGPIPE itself stays
/// ignored: a server writing to a module process or a peer that went away
/// gets an error for that session, not a signal that ends the server.
pub fn main() -> ExitCode {
    hush_2pc::retain_freed_memory();
    match run_quiet_on_closed_stdout(std::env::args_os()) {
        Ok(code) => ExitCode::from(code),
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// [`run_with_args`] with output into a closed pipe ending quietly with
/// status 141 (see [`main`]); any other panic is returned to the caller
/// (the binary resumes it, the Python package reports an internal error).
/// The panic hook that silences the closed-pipe panic's message is
/// installed once per process and passes every other panic on.
pub fn run_quiet_on_closed_stdout<I, T>(args: I) -> std::thread::Result<u8>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !stdout_closed(info.payload()) {
                default(info)
            }
        }));
    });
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_with_args(args))) {
        Err(p) if stdout_closed(&*p) => Ok(141),
        r => r,
    }
}

/// Whether a panic is std's "failed printing to stdout" on a closed pipe.
fn stdout_closed(payload: &(dyn std::any::Any + Send)) -> bool {
    let msg = payload.downcast_ref::<String>().map(String::as_str).or_else(|| payload.downcast_ref::<&str>().copied()).unwrap_or("");
    msg.starts_with("failed printing to stdout") && msg.contains(&format!("os error {}", libc_epipe()))
}

const fn libc_epipe() -> i32 {
    32 // EPIPE on Linux
}
