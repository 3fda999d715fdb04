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
pub fn main() -> ExitCode {
    ExitCode::from(run_with_args(std::env::args_os()))
}
