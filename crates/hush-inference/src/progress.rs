//! Progress bars for long runs (`indicatif`): drawn on stderr when it is a
//! terminal, nothing otherwise (pipes, files, CI logs keep only the final
//! summary). `HUSH_PROGRESS=0` turns them off on a terminal too. The engine
//! only calls a `(done, total)` callback per layer; everything else is here.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

/// Whether bars are drawn: stderr is a terminal and `HUSH_PROGRESS` is not `0`.
pub fn enabled() -> bool {
    std::io::stderr().is_terminal() && std::env::var("HUSH_PROGRESS").map(|v| v != "0").unwrap_or(true)
}

/// A progress bar (hidden when [`enabled`] is false).
pub struct Bar(ProgressBar);

impl Bar {
    /// A bar of `len` steps named `prefix`, counting `unit` (e.g. "layers").
    pub fn new(len: u64, prefix: &str, unit: &str) -> Bar {
        let pb = ProgressBar::with_draw_target(Some(len), if enabled() { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() });
        let tpl = format!("{{prefix}} [{{bar:30}}] {{pos}}/{{len}} {unit}, {{elapsed}} elapsed, ETA {{eta}} {{msg}}");
        if let Ok(style) = ProgressStyle::with_template(&tpl) {
            pb.set_style(style.progress_chars("=> "));
        }
        pb.set_prefix(prefix.to_string());
        Bar(pb)
    }
    /// Moves the bar to `pos` of `len` (the length may change, e.g. once known).
    pub fn set(&self, pos: u64, len: u64) {
        if self.0.length() != Some(len) {
            self.0.set_length(len);
        }
        self.0.set_position(pos);
    }
    /// The text after the bar (e.g. the current cell of a table).
    pub fn message(&self, m: String) {
        self.0.set_message(m);
    }
    /// Removes the bar (the command's own summary follows).
    pub fn finish(&self) {
        self.0.finish_and_clear();
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        if !self.0.is_finished() {
            self.0.finish_and_clear();
        }
    }
}

/// A layer callback for [`crate::runtime`]'s `progress` arguments: "layer k of n"
/// with elapsed time and ETA, cleared when the last layer is done.
pub fn layers(prefix: &str) -> impl FnMut(usize, usize) {
    let bar = Bar::new(0, prefix, "layers");
    move |done, total| {
        bar.set(done as u64, total as u64);
        if done >= total {
            bar.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hidden_bars_take_updates() {
        // under the test harness stderr is usually not a terminal: hidden, but usable
        let mut f = super::layers("t");
        for i in 0..=5 {
            f(i, 5);
        }
        let b = super::Bar::new(3, "x", "cells");
        b.message("m".into());
        b.set(1, 3);
        b.finish();
    }
}
