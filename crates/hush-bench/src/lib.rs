//! # hush-bench — measured runs of hush's protocols
//!
//! Each harness runs both parties in one process (two threads) over TCP
//! loopback (or the in-memory pair) with an emulated [`NetProfile`], and
//! returns a [`Record`]: one flat JSON object with at least `bench`,
//! `wall_s` (the whole protocol, both parties, excluding one-time setup),
//! `setup_s`, `bytes` (payload bytes, both directions) and `rounds`.
//! On the development machine both parties share its 2 cores; every record
//! says so in `machine`, and carries `cpu`, `simd` (the SIMD level the
//! kernels ran at, see [`simd`]), `l2_bytes` and `l3_bytes`
//! ([`machine_fields`]).

pub mod aes;
pub mod cot;
pub mod deal;
pub mod he_linear;
pub mod infer;
mod machine;
pub mod nonlinear;
mod record;
pub mod transformer;

pub use hush_primitives::simd;
pub use machine::{cache_bytes, cpu_model, machine_fields};
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

/// Pins the calling party thread to CPU `party` (mod the CPUs this process
/// may use) when there are at least two, so that the two parties of a run
/// each have a core of their own — as on two machines — instead of waiting
/// for the scheduler to spread them: threads spawned together start on the
/// same CPU, and on this 2-core VM both parties were seen time-sharing one
/// core for tens of milliseconds while the other idled (`perf sched`).
/// Children spawned afterwards by the thread (SilentFlow's out-of-process
/// module) inherit the pinning: the module runs while its host waits.
/// Returns the CPU, or None when not pinned (also when the environment
/// sets `HUSH_BENCH_NO_PIN`).
///
/// Rayon: a thread inherits its creator's CPU mask and rayon sizes its
/// global pool by the CPUs of the thread that first uses it, so a pool
/// first touched by a pinned party has **one** worker, pinned to that
/// party's core, shared by both parties. A harness whose parties use rayon
/// on both cores starts the pool before pinning ([`start_rayon_pool`]).
pub fn pin_party(party: usize) -> Option<usize> {
    if std::env::var_os("HUSH_BENCH_NO_PIN").is_some() {
        return None;
    }
    #[cfg(target_os = "linux")]
    // SAFETY: plain libc calls on a zeroed cpu_set_t we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect();
        if cpus.len() < 2 {
            return None;
        }
        let cpu = cpus[party % cpus.len()];
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one) != 0 {
            return None;
        }
        Some(cpu)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = party;
        None
    }
}

/// Starts rayon's global pool from the calling (unpinned) thread, with a
/// worker per CPU of the process, before party threads are pinned
/// ([`pin_party`]). Issue 35: in `hush bench nonlinear --op gelu|softmax`
/// the pool was first touched by a pinned party, so it had one worker on
/// that party's core, and every "parallel" dealing of both parties'
/// modules (TAMI row builders, elementwise kinds, the hosts' decode) ran
/// through it on one core.
pub fn start_rayon_pool() -> usize {
    rayon::current_num_threads()
}

/// Lets the calling thread run on every CPU of the machine again (a
/// helper thread spawned by a pinned party, e.g. its dealing thread, which
/// should not compete with its own party for one core). Best effort.
pub fn unpin() {
    #[cfg(target_os = "linux")]
    // SAFETY: plain libc calls on a zeroed cpu_set_t we own.
    unsafe {
        let mut all: libc::cpu_set_t = std::mem::zeroed();
        let n = std::thread::available_parallelism().map_or(1, |n| n.get()).max(num_cpus_online());
        for c in 0..n.min(libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(c, &mut all);
        }
        let _ = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &all);
    }
}

#[cfg(target_os = "linux")]
fn num_cpus_online() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 { n as usize } else { 1 }
}

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

/// What a one-process protocol benchmark's link is: both parties are
/// threads of this process, so their loopback link is plaintext (TLS is
/// measured where it matters, beside plaintext: `hush bench infer
/// --tls-overhead`, `hush bench aes3 --tls-overhead`).
pub fn link_note(t: Transport) -> &'static str {
    match t {
        Transport::Tcp => "plaintext TCP loopback between two threads of one process (no TLS)",
        Transport::Mem => "in-memory channel pair (no TLS)",
    }
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
