//! Choosing a COT source by name (CLI, benchmarks, Python).

use crate::iknp::{IknpReceiver, IknpSender};
use crate::source::{CotReceiver, CotSender};
use crate::{Error, Result};
use hush_primitives::Prg;
use hush_transport::Channel;

/// Names of the COT sources hush knows.
pub const SOURCES: &[&str] = &["iknp", "ferret", "silent"];

/// How to build a source.
#[derive(Clone, Debug)]
pub struct SourceConfig {
    /// `iknp`, `ferret` or `silent`.
    pub name: String,
    /// Peak-memory budget in bytes for sources that generate in batches.
    pub max_mem: Option<usize>,
}

impl SourceConfig {
    pub fn named(name: &str) -> Self {
        SourceConfig { name: name.to_string(), max_mem: None }
    }
}

fn unknown(name: &str) -> Error {
    if SOURCES.contains(&name) {
        Error::Invalid(format!("COT source '{name}' is not implemented yet"))
    } else {
        Error::Invalid(format!("unknown COT source '{name}' (known: {})", SOURCES.join(", ")))
    }
}

/// Runs the one-time setup of the named source on the sender side.
pub fn setup_sender(cfg: &SourceConfig, ch: &mut dyn Channel, rng: &mut Prg) -> Result<Box<dyn CotSender>> {
    match cfg.name.as_str() {
        "iknp" => Ok(Box::new(IknpSender::setup(ch, rng)?)),
        other => Err(unknown(other)),
    }
}

/// Runs the one-time setup of the named source on the receiver side.
pub fn setup_receiver(cfg: &SourceConfig, ch: &mut dyn Channel, rng: &mut Prg) -> Result<Box<dyn CotReceiver>> {
    match cfg.name.as_str() {
        "iknp" => Ok(Box::new(IknpReceiver::setup(ch, rng)?)),
        other => Err(unknown(other)),
    }
}
