//! Choosing a COT source by name (CLI, benchmarks, Python).

use crate::ferret::{FerretReceiver, FerretSender};
use crate::iknp::{IknpReceiver, IknpSender};
use crate::lpn::{LpnParams, FERRET_SETS, SILENT_SETS};
use crate::silentflow::{self, SharedModule, SilentReceiver, SilentSender};
use hush_tee::{InProcessModule, Module, OutOfProcessModule, TrustedModule};
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
    /// Peak-memory budget in bytes for sources that generate in batches
    /// (Ferret, SilentFlow): picks the largest LPN parameter set whose batch
    /// fits ([`params_for`]).
    pub max_mem: Option<usize>,
    /// Where SilentFlow's trusted module runs.
    pub tee: TeeBackend,
    /// Kernel fusion for Ferret and SilentFlow: GGM expansion and LPN index
    /// generation interleaved into the LPN reduction on one core per party
    /// (see `fused.rs`); `false` runs the stages one after another.
    pub fused: bool,
    /// Explicit LPN parameters (tests); overrides `max_mem`.
    pub params: Option<LpnParams>,
}

/// Where the trusted module runs (attestation is simulated — gives no
/// hardware protection — in both).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TeeBackend {
    /// The `hush-tee-module` child process if it can be found, else in-process.
    Auto,
    InProcess,
    OutOfProcess,
}

impl SourceConfig {
    pub fn named(name: &str) -> Self {
        SourceConfig { name: name.to_string(), max_mem: None, tee: TeeBackend::Auto, fused: true, params: None }
    }
}

/// Memory besides the batch buffers that a party needs (chunk buffers,
/// module messages, the caller's buffer of up to 2^20 COTs, code).
pub const MEM_OVERHEAD: usize = 64 << 20;

/// The LPN parameter set for `cfg`: explicit, else the largest set of the
/// source ([`SILENT_SETS`] for SilentFlow, [`FERRET_SETS`] for Ferret)
/// whose streaming working set ([`LpnParams::batch_bytes`]) plus [`MEM_OVERHEAD`] fits `max_mem`.
pub fn params_for(cfg: &SourceConfig) -> Result<LpnParams> {
    if let Some(p) = cfg.params {
        return Ok(p);
    }
    let sets: &[LpnParams] = if cfg.name == "silent" { &SILENT_SETS } else { &FERRET_SETS };
    let Some(m) = cfg.max_mem else { return Ok(sets[0]) };
    sets.iter()
        .find(|p| p.batch_bytes() + MEM_OVERHEAD <= m)
        .copied()
        .ok_or_else(|| Error::Invalid(format!("--max-mem {m} bytes is below the smallest batch's needs")))
}

/// What a setup produced besides the source (for meters and reports).
#[derive(Clone, Default)]
pub struct SetupInfo {
    /// SilentFlow's module (crossing and byte counters).
    pub module: Option<SharedModule>,
    /// The module backend and its attestation, in words.
    pub module_desc: Option<String>,
    pub params: Option<LpnParams>,
}

fn module(cfg: &SourceConfig) -> Result<Box<dyn TrustedModule>> {
    let inproc = || -> Box<dyn TrustedModule> { Box::new(InProcessModule::new(Module::new())) };
    Ok(match cfg.tee {
        TeeBackend::InProcess => inproc(),
        TeeBackend::OutOfProcess => Box::new(OutOfProcessModule::spawn()?),
        TeeBackend::Auto => match OutOfProcessModule::spawn() {
            Ok(m) => Box::new(m),
            Err(_) => inproc(),
        },
    })
}

/// As [`setup_sender`], also returning the [`SetupInfo`].
pub fn setup_sender_info(cfg: &SourceConfig, ch: &mut dyn Channel, rng: &mut Prg) -> Result<(Box<dyn CotSender>, SetupInfo)> {
    match cfg.name.as_str() {
        "ferret" => {
            let p = params_for(cfg)?;
            let s = FerretSender::setup(ch, rng, p, cfg.fused)?;
            Ok((Box::new(s), SetupInfo { params: Some(p), ..Default::default() }))
        }
        "silent" => {
            let p = params_for(cfg)?;
            let m = module(cfg)?;
            let desc = m.describe();
            let s = SilentSender::setup(ch, silentflow::share(m), p, cfg.fused)?;
            let info = SetupInfo { module: Some(s.module().clone()), module_desc: Some(desc), params: Some(p) };
            Ok((Box::new(s), info))
        }
        _ => Ok((setup_sender(cfg, ch, rng)?, SetupInfo::default())),
    }
}

/// As [`setup_receiver`], also returning the [`SetupInfo`].
pub fn setup_receiver_info(cfg: &SourceConfig, ch: &mut dyn Channel, rng: &mut Prg) -> Result<(Box<dyn CotReceiver>, SetupInfo)> {
    match cfg.name.as_str() {
        "ferret" => {
            let p = params_for(cfg)?;
            let r = FerretReceiver::setup(ch, rng, p, cfg.fused)?;
            Ok((Box::new(r), SetupInfo { params: Some(p), ..Default::default() }))
        }
        "silent" => {
            let p = params_for(cfg)?;
            let m = module(cfg)?;
            let desc = m.describe();
            let r = SilentReceiver::setup(ch, silentflow::share(m), p, cfg.fused)?;
            let info = SetupInfo { module: Some(r.module().clone()), module_desc: Some(desc), params: Some(p) };
            Ok((Box::new(r), info))
        }
        _ => Ok((setup_receiver(cfg, ch, rng)?, SetupInfo::default())),
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
        "ferret" | "silent" => Ok(setup_sender_info(cfg, ch, rng)?.0),
        other => Err(unknown(other)),
    }
}

/// Runs the one-time setup of the named source on the receiver side.
pub fn setup_receiver(cfg: &SourceConfig, ch: &mut dyn Channel, rng: &mut Prg) -> Result<Box<dyn CotReceiver>> {
    match cfg.name.as_str() {
        "iknp" => Ok(Box::new(IknpReceiver::setup(ch, rng)?)),
        "ferret" | "silent" => Ok(setup_receiver_info(cfg, ch, rng)?.0),
        other => Err(unknown(other)),
    }
}
