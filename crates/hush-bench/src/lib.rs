//! # hush-bench — measured runs of hush's protocols
//!
//! Each harness runs both parties in one process (two threads) over TCP
//! loopback (or the in-memory pair) with an emulated [`NetProfile`], and
//! returns a [`Record`]: one flat JSON object with at least `bench`,
//! `wall_s` (the whole protocol, both parties, excluding one-time setup),
//! `setup_s`, `bytes` (payload bytes, both directions) and `rounds`.
//! On the development machine both parties share its 2 cores; every record
//! says so in `machine`.

pub mod aes;
pub mod cot;
mod record;

pub use record::Record;

use hush_transport::{ChannelOptions, MemChannel, NetProfile, TcpChannel};

/// Errors of a benchmark run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Invalid(String),
    #[error("transport: {0}")]
    Transport(#[from] hush_transport::Error),
    #[error("{0}")]
    Correlations(#[from] hush_correlations::Error),
    #[error("a party thread panicked")]
    Panic,
    #[error("result check failed: {0}")]
    Check(String),
}

pub type Result<T> = std::result::Result<T, Error>;

/// Which transport carries a two-party run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Mem,
}

impl Transport {
    pub fn by_name(s: &str) -> Option<Self> {
        match s {
            "tcp" => Some(Transport::Tcp),
            "mem" => Some(Transport::Mem),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Mem => "mem",
        }
    }
}

/// A connected pair of boxed channels.
pub type ChannelPair = (Box<dyn hush_transport::Channel>, Box<dyn hush_transport::Channel>);

/// Connects two parties in this process.
pub fn connect_pair(t: Transport, profile: NetProfile) -> Result<ChannelPair> {
    let opts = ChannelOptions { profile, ..Default::default() };
    Ok(match t {
        Transport::Tcp => {
            let (a, b): (TcpChannel, TcpChannel) = hush_transport::tcp_pair_loopback(opts)?;
            (Box::new(a), Box::new(b))
        }
        Transport::Mem => {
            let (a, b) = MemChannel::pair_with(opts);
            (Box::new(a), Box::new(b))
        }
    })
}

/// Parses a network profile name with a helpful error.
pub fn profile(name: &str) -> Result<NetProfile> {
    NetProfile::by_name(name)
        .ok_or_else(|| Error::Invalid(format!("unknown network profile '{name}' (known: {})", NetProfile::names().join(", "))))
}

/// Describes where the figures come from.
pub fn machine_note() -> String {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    format!("both parties on this machine ({cores} cores)")
}
