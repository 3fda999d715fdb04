//! The three-node service: compute parties (`hush node`), data owners
//! (`hush share`), job submitters (`hush job`) and output parties
//! (`hush fetch`), all over TLS 1.3 with pinned identities.
//!
//! ## Roles and identities
//! Every party is known by the SHA-256 fingerprint of its certificate
//! (`hush keygen`; nodes pin each other by address, clients pin all three
//! nodes, nodes learn a client's fingerprint from its TLS client
//! certificate). Access control is by fingerprint, so it needs TLS: a
//! plaintext (`--insecure`) node refuses stored inputs and stored results.
//!
//! * **Data owner** (`hush share`): shares a named value into replicated
//!   shares and sends each node its pair. The uploader's fingerprint is the
//!   input's *owner*; with it goes the owner's *grant*: `users` (who may
//!   submit jobs reading the input), `recipients` (who may receive results
//!   computed from it) and `circuits` (which functions, at which input
//!   position: [`crate::grant`]; none by default). The owner is implicitly
//!   in both lists and not bound by `circuits`; `any` allows everyone (or,
//!   in `circuits`, every function). Only the owner may replace a name or
//!   re-grant it (`hush share --regrant`). An upload is two steps (the
//!   nodes' current versions, then one version above all of them), so the
//!   three nodes hold each input at one version ([`crate::store`]).
//! * **Submitter** (`hush job`): names a circuit and, per circuit input,
//!   a stored input or inline data it shares itself; `--output-to FP`
//!   names the output party. Every node checks, for every stored input,
//!   that the submitter is a user, the output party (the submitter itself
//!   without `--output-to`) a recipient, and the job's circuit (built-in
//!   name or SHA-256 of its text) with the input at its position granted;
//!   a refusal is a clear error naming the input, the fingerprints or the
//!   circuit, from each node independently. Since a job needs all three
//!   nodes and each checks its own copy of the grant, one node alone
//!   cannot admit a job its grant does not allow.
//! * **Admission cross-check**: before a job's first AND, each node sends
//!   the next one the digest of the job header and, per stored input, its
//!   name, record version, upload id and grant digest; a difference fails
//!   the job, naming the input and the node that is behind (a store
//!   restored from a backup, or a node that missed an update).
//! * **Output party** (`hush fetch --job ID`): a job run with `--output-to`
//!   leaves each node's share of the outputs in its store (encrypted at
//!   rest, [`crate::store`]); only a client presenting the output party's
//!   certificate gets them, and it alone reconstructs. A node holds one
//!   share `a_i = x_{i−1} ⊕ v` with `x_{i−1}` uniform to it, so no node —
//!   and not the submitter, which only gets acknowledgements — sees the
//!   result. The job ID is the 64-bit id the submitter chose (printed by
//!   `hush job`), the output party the fingerprint it names.
//!
//! ## Connections
//! Every connection to a node starts with a hello (`HUSH3`, kind: 0 ring,
//! 1 client; party index), then TLS; a ring caller must present the pin
//! of the party it claims to be. The first frame says what the connection
//! is for: ring links carry (job id, lane); client links a request:
//! `HJB2` job header (JSON), `HLAN` an extra lane of a job, `HSHR` a
//! share upload or re-grant, `HFET` a fetch, `HSTA` status, `HCAN` cancel.
//! An `HLAN` link is bound to the identity that opened it: a job takes
//! only its submitter's, and once the job's header has arrived a lane link
//! from anyone else is refused at once, leaving the job untouched.
//!
//! ## Jobs, concurrency and lanes
//! Each job has its own ring links, one set per *lane*; a job split over
//! `L` lanes runs `L` threads per node, chunk `c` on lane `c mod L`, each
//! lane with its own client link and ring links. Many jobs run at once.
//! **Fair scheduling:** party 0 admits jobs — per-submitter FIFO queues
//! served round-robin, as long as the running jobs' lanes fit its
//! `--threads` — and the order propagates: parties 1 and 2 start a job's
//! lane when their predecessor's ring link for it arrives, so all three
//! run the same set of jobs and no cross-node wait can deadlock.
//! `hush job status|cancel` query or stop a job (submitter or output party
//! only).
//!
//! **Domain separation.** Each lane agrees fresh PRF keys
//! ([`PartyKeys::setup`], random per node and lane), and the PRF input of
//! every AND is (job id, global chunk × ANDs × words + gate offset): no
//! correlated randomness is reused across jobs, lanes or chunks. Nodes
//! refuse a job id they have seen.
//!
//! A node that loses a peer or its client fails that job (its links are
//! dropped, so the other nodes fail fast), tells the client, and keeps
//! serving; stored inputs are untouched by jobs.

use crate::araki::PartyKeys;
use crate::bristol::Circuit;
use crate::engine::{recv_words, run_streams_lane, send_words, words_as_bytes, words_as_bytes_mut, Evaluator, Program, MAX_STREAMS};
use crate::error::{Error, Result};
use crate::prf::{os_seed, Prf};
use crate::share::{next, prev};
use crate::grant::{CircuitId, FuncGrant};
use crate::store::{check_name, RecordMeta, Store, LEGACY_GRANT};
use zeroize::{Zeroize, Zeroizing};
use hush_transport::{Channel, ChannelExt, ChannelOptions, Cost, Fingerprint, LinkConfig, LinkSecurity, TcpChannel};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

const HELLO: &[u8; 5] = b"HUSH3";
/// Largest number of instances one job may ask for.
pub const MAX_INSTANCES: u64 = 1 << 34;
/// Largest chunk width (words per share half).
pub const MAX_CHUNK_WORDS: usize = 1 << 16;
/// Default chunk width: 4096 instances keep a party's live wires in L2.
pub const DEFAULT_CHUNK_WORDS: usize = 64;
/// Largest number of lanes (threads per node) of one job.
pub const MAX_LANES: usize = 64;

/// How a node runs.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub party: usize,
    pub peers: [String; 3],
    pub listen: String,
    /// Options of the ring links (timeout, emulated network).
    pub ring: ChannelOptions,
    /// Options of client links.
    pub client: ChannelOptions,
    /// Stop after this many jobs (successful or not); `None` = forever.
    pub max_jobs: Option<u64>,
    /// Print one line per job to stderr.
    pub verbose: bool,
    /// LinkConfig security: TLS 1.3 with this node's identity, pinning the two
    /// other nodes by address (required), or plaintext.
    pub link: LinkConfig,
    /// Folder of the encrypted store (stored inputs and results); `None`:
    /// inline jobs only.
    pub store: Option<PathBuf>,
    /// Lanes (threads) of running jobs this node admits at once (party 0
    /// schedules for the ring).
    pub threads: usize,
}

/// The cores of this machine.
pub fn all_cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

fn hello(kind: u8, party: usize) -> [u8; 7] {
    let mut h = [0u8; 7];
    h[..5].copy_from_slice(HELLO);
    h[5] = kind;
    h[6] = party as u8;
    h
}

/// Connects to `addr` (retrying while it is not up yet, until the
/// options' `connect_timeout`, `--connect-timeout`; then "could not
/// connect to ADDR: connection refused"), writes the hello preamble, then
/// runs the link's security (mode preamble, TLS handshake with `sec`'s
/// pin) on the stream. The hello is unauthenticated; the acceptor checks
/// the claimed role against the certificate the TLS handshake
/// authenticated.
fn connect_with_hello(addr: &str, kind: u8, party: usize, opts: &ChannelOptions, sec: &LinkSecurity) -> std::io::Result<TcpChannel> {
    use std::io::Write;
    let mut s = hush_transport::connect_retrying(addr, opts).map_err(|e| match e {
        hush_transport::Error::Io(e) => e,
        e => std::io::Error::other(e.to_string()),
    })?;
    s.write_all(&hello(kind, party))?;
    TcpChannel::from_connected(s, opts.clone(), sec, addr).map_err(|e| std::io::Error::other(e.to_string()))
}

/// Reads the hello preamble of an accepted stream.
fn read_hello(s: &mut std::net::TcpStream) -> std::io::Result<(u8, usize)> {
    use std::io::Read;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut h = [0u8; 7];
    s.read_exact(&mut h)?;
    s.set_read_timeout(None)?;
    if &h[..5] != HELLO || h[5] > 1 || h[6] > 2 {
        return Err(std::io::Error::other("not a hush 3PC peer or client"));
    }
    Ok((h[5], h[6] as usize))
}

/// Where links wait for the job thread that takes them: ring links from
/// the previous party (kind 0) and extra client lanes (kind 1), by (job,
/// lane, kind, identity). A lane link is kept under the fingerprint of the
/// client that opened it, and a job takes only the one of its submitter:
/// a link parked by anyone else for the same job and lane (squatting) is
/// never taken and never replaces the submitter's, so it cannot fail the
/// job; it expires or goes when the job ends. Once a job's header has
/// arrived, a lane link for it from another identity is refused at once
/// ([`handle_client`]). A link nobody claims within `ttl` (a job whose header never
/// reached this node: its submitter left, or never meant to send it) is
/// dropped — by the next `put` or the node's sweeper ([`Hub::sweep`]); at
/// most [`MAX_PARKED`] links wait at once (more are closed).
struct Hub {
    m: Mutex<HashMap<HubKey, (TcpChannel, Instant)>>,
    cv: Condvar,
    ttl: Duration,
}

/// Most links parked in the hub at once.
pub const MAX_PARKED: usize = 1024;

/// (job, lane, kind, identity of the link's opener: ring links `None`).
type HubKey = (u64, u32, u8, Option<Fingerprint>);

impl Hub {
    fn new(ttl: Duration) -> Self {
        Hub { m: Mutex::new(HashMap::new()), cv: Condvar::new(), ttl }
    }
    /// Parks a link; `false` (the link is closed) when the hub is full.
    fn put(&self, key: HubKey, ch: TcpChannel) -> bool {
        let mut m = self.m.lock().unwrap_or_else(|e| e.into_inner());
        let ttl = self.ttl;
        m.retain(|_, (_, t)| t.elapsed() < ttl);
        if m.len() >= MAX_PARKED {
            return false;
        }
        m.insert(key, (ch, Instant::now()));
        self.cv.notify_all();
        true
    }
    /// Drops links nobody claimed within the ttl; returns how many.
    fn sweep(&self) -> usize {
        let ttl = self.ttl;
        let mut m = self.m.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.len();
        m.retain(|_, (_, t)| t.elapsed() < ttl);
        n - m.len()
    }
    fn take(&self, key: HubKey, deadline: Instant, cancel: &AtomicBool) -> Option<TcpChannel> {
        let mut m = self.m.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some((ch, _)) = m.remove(&key) {
                return Some(ch);
            }
            let now = Instant::now();
            if now >= deadline || cancel.load(Ordering::Relaxed) {
                return None;
            }
            m = self.cv.wait_timeout(m, (deadline - now).min(Duration::from_millis(200))).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
    fn forget(&self, job: u64) {
        self.m.lock().unwrap_or_else(|e| e.into_inner()).retain(|k, _| k.0 != job);
    }
}

/// Party 0's admission queue: per-submitter FIFO queues served
/// round-robin; a job is admitted when its lanes fit (or nothing runs).
struct Sched {
    m: Mutex<SchedState>,
    cv: Condvar,
    capacity: usize,
}

#[derive(Default)]
struct SchedState {
    used: usize,
    queues: BTreeMap<String, VecDeque<(u64, usize)>>,
    turn: VecDeque<String>,
    granted: HashSet<u64>,
}

impl Sched {
    fn dispatch(&self, s: &mut SchedState) {
        while let Some(sub) = s.turn.front().cloned() {
            let Some(&(job, lanes)) = s.queues.get(&sub).and_then(|q| q.front()) else {
                s.turn.pop_front();
                s.queues.remove(&sub);
                continue;
            };
            if s.used > 0 && s.used + lanes > self.capacity {
                break;
            }
            s.used += lanes;
            s.granted.insert(job);
            s.turn.pop_front();
            let q = s.queues.get_mut(&sub).expect("present");
            q.pop_front();
            if q.is_empty() {
                s.queues.remove(&sub);
            } else {
                s.turn.push_back(sub);
            }
            self.cv.notify_all();
        }
    }
    fn acquire(&self, sub: &str, job: u64, lanes: usize, cancel: &AtomicBool, deadline: Instant) -> Result<()> {
        let mut s = self.m.lock().unwrap_or_else(|e| e.into_inner());
        if !s.queues.contains_key(sub) {
            s.turn.push_back(sub.to_string());
        }
        s.queues.entry(sub.to_string()).or_default().push_back((job, lanes));
        loop {
            self.dispatch(&mut s);
            if s.granted.remove(&job) {
                return Ok(());
            }
            if cancel.load(Ordering::Relaxed) || Instant::now() >= deadline {
                for q in s.queues.values_mut() {
                    q.retain(|&(j, _)| j != job);
                }
                return Err(if cancel.load(Ordering::Relaxed) {
                    Error::protocol("job", "cancelled while queued")
                } else {
                    Error::protocol("job", "not admitted in time (the node is busy)")
                });
            }
            s = self.cv.wait_timeout(s, Duration::from_millis(200)).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
    fn release(&self, lanes: usize) {
        let mut s = self.m.lock().unwrap_or_else(|e| e.into_inner());
        s.used = s.used.saturating_sub(lanes);
        self.dispatch(&mut s);
        self.cv.notify_all();
    }
}

#[derive(Clone, Debug)]
enum JobState {
    Queued,
    Running,
    Done,
    Failed(String),
    Cancelled,
}

impl JobState {
    fn is_final(&self) -> bool {
        matches!(self, JobState::Done | JobState::Failed(_) | JobState::Cancelled)
    }
}

struct JobInfo {
    submitter: Option<Fingerprint>,
    output_to: Option<Fingerprint>,
    /// Shared with the compiled program's cache entry (no allocation per job).
    circuit: Arc<str>,
    nchunks: u64,
    progress: Progress,
    state: JobState,
    started: Instant,
}

/// A job's chunk counter and cancel flag while it runs (shared with its
/// lanes); once it has ended, just the final count.
enum Progress {
    Live { done: Arc<AtomicU64>, cancel: Arc<AtomicBool> },
    Final(u64),
}

impl JobInfo {
    fn chunks_done(&self) -> u64 {
        match &self.progress {
            Progress::Live { done, .. } => done.load(Ordering::Relaxed),
            Progress::Final(n) => *n,
        }
    }
}

/// Most ended jobs a node remembers (for `hush job status` and fetch
/// messages); the oldest is forgotten first.
pub const MAX_FINISHED_JOBS: usize = 4096;

/// The node's jobs: those queued or running by id, and the ended ones in
/// the order they ended. An ended job keeps no allocation of its own (its
/// record sits in one contiguous ring; only a failure message is a string):
/// thousands of small long-lived allocations scattered through the heap
/// would pin pages that `malloc_trim` can then not return, so the idle
/// node's resident size would grow with the number of jobs served.
#[derive(Default)]
struct JobTable {
    live: HashMap<u64, JobInfo>,
    finished: VecDeque<(u64, JobInfo)>,
}

impl JobTable {
    fn get(&self, id: u64) -> Option<&JobInfo> {
        self.live.get(&id).or_else(|| self.finished.iter().rev().find(|(k, _)| *k == id).map(|(_, j)| j))
    }
    fn contains(&self, id: u64) -> bool {
        self.get(id).is_some()
    }
    /// Every job: queued and running ones, then ended ones.
    fn iter(&self) -> impl Iterator<Item = (u64, &JobInfo)> {
        self.live.iter().map(|(k, j)| (*k, j)).chain(self.finished.iter().map(|(k, j)| (*k, j)))
    }
    fn insert(&mut self, id: u64, j: JobInfo) {
        self.live.insert(id, j);
    }
    fn set_state(&mut self, id: u64, st: JobState) {
        if !st.is_final() {
            if let Some(j) = self.live.get_mut(&id) {
                j.state = st;
            }
            return;
        }
        if let Some(mut j) = self.live.remove(&id) {
            j.progress = Progress::Final(j.chunks_done());
            j.state = st;
            while self.finished.len() >= MAX_FINISHED_JOBS {
                self.finished.pop_front();
            }
            self.finished.push_back((id, j));
            // the emptied live map's table is not kept at its peak size
            if self.live.is_empty() {
                self.live.shrink_to_fit();
            }
        } else if let Some((_, j)) = self.finished.iter_mut().rev().find(|(k, _)| *k == id) {
            j.state = st;
        }
    }
}

struct Shared {
    cfg: NodeConfig,
    store: Option<Store>,
    /// Serialises read-modify-write of stored inputs.
    store_lock: Mutex<()>,
    hub: Hub,
    jobs: Mutex<JobTable>,
    sched: Sched,
    /// Compiled circuits by hash, with the circuit's name for job records.
    programs: Mutex<HashMap<[u8; 32], Arc<Compiled>>>,
    handled: Mutex<u64>,
    handled_cv: Condvar,
    /// Jobs being served at this node now.
    running: AtomicUsize,
    /// Connection threads alive (jobs, lanes, requests, links in set-up);
    /// when the last one ends the node is idle and the allocator's free
    /// memory goes back to the system (`idle` wakes the housekeeper).
    conns: AtomicUsize,
    idle: (Mutex<bool>, Condvar),
}

/// Most connections in their set-up (hello, greeting, TLS handshake) at
/// once; beyond it a new connection is closed at once (and logged).
pub const MAX_PENDING: usize = 256;

fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    let mut c = ring::digest::Context::new(&ring::digest::SHA256);
    for p in parts {
        c.update(&(p.len() as u64).to_le_bytes());
        c.update(p);
    }
    c.finish().as_ref().try_into().expect("32 bytes")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
fn unhex(s: &str) -> Result<Vec<u8>> {
    if s.len() % 2 != 0 {
        return Err(Error::Input("odd-length hex".into()));
    }
    (0..s.len() / 2).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| Error::Input("not hex".into()))).collect()
}

/// Status frame: `0` (+ payload) ok, `1` + message refused/failed.
fn ok_frame(payload: &[u8]) -> Vec<u8> {
    let mut m = vec![0u8];
    m.extend_from_slice(payload);
    m
}
fn err_frame(party: usize, e: &Error) -> Vec<u8> {
    let mut m = vec![1u8];
    m.extend_from_slice(format!("party {party}: {e}").as_bytes());
    m
}
/// Reads a status frame: the payload, or the node's refusal as an error.
fn read_status(ch: &mut TcpChannel, party: usize, step: &'static str) -> Result<Vec<u8>> {
    let st = ch.recv().map_err(|e| Error::Protocol { step: "node reported", msg: format!("party {party}: connection lost during {step} ({e})") })?;
    match st.first() {
        Some(0) => Ok(st[1..].to_vec()),
        Some(1) => Err(Error::Protocol { step: "node reported", msg: String::from_utf8_lossy(&st[1..]).into_owned() }),
        _ => Err(Error::protocol(step, format!("party {party}: unexpected frame of {} bytes", st.len()))),
    }
}

/// Runs a compute party until `max_jobs` jobs have been handled (forever
/// by default). Peer failures end the current job, never the node.
pub fn run_node(cfg: NodeConfig) -> Result<()> {
    keep_heap_warm();
    if cfg.party > 2 {
        return Err(Error::Input(format!("--party must be 0, 1 or 2, got {}", cfg.party)));
    }
    if cfg.link.is_tls() {
        for j in (0..3).filter(|&j| j != cfg.party) {
            if cfg.link.pins().for_addr(&cfg.peers[j]).is_none() {
                return Err(Error::Input(format!(
                    "no pin for party {j} at {}: pass --pin {}=sha256:<hex> (each node prints its fingerprint at start), or --insecure on every node and job",
                    cfg.peers[j], cfg.peers[j]
                )));
            }
        }
    }
    let store = match &cfg.store {
        Some(d) => Some(Store::open(d)?),
        None => None,
    };
    let listener = TcpListener::bind(&cfg.listen).map_err(|e| Error::Local(format!("cannot listen on {}: {e}", cfg.listen)))?;
    let sec = cfg.link.accept_any_authenticated();
    let peer_pins: [Option<Fingerprint>; 3] = std::array::from_fn(|j| if j == cfg.party { None } else { cfg.link.pins().for_addr(&cfg.peers[j]) });
    // a parked link waits for its job's header at most four times as long
    // as a job waits for a silent peer (and at least a minute: queued jobs)
    let hub_ttl = cfg.ring.timeout.max(cfg.client.timeout).saturating_mul(4).max(Duration::from_secs(60));
    let shared = Arc::new(Shared {
        sched: Sched { m: Mutex::new(SchedState::default()), cv: Condvar::new(), capacity: cfg.threads.max(1) },
        cfg,
        store,
        store_lock: Mutex::new(()),
        hub: Hub::new(hub_ttl),
        jobs: Mutex::new(JobTable::default()),
        programs: Mutex::new(HashMap::new()),
        handled: Mutex::new(0),
        handled_cv: Condvar::new(),
        running: AtomicUsize::new(0),
        conns: AtomicUsize::new(0),
        idle: (Mutex::new(false), Condvar::new()),
    });
    let pending = hush_transport::admission::PendingGate::new(MAX_PENDING);
    {
        let sh = Arc::downgrade(&shared);
        // housekeeping: drops parked links nobody claimed, and gives free
        // memory back once the node is idle (woken by the last connection
        // thread to end, or by the sweep when it dropped links)
        let _ = std::thread::Builder::new().name("hush3-housekeeping".into()).spawn(move || loop {
            let Some(s) = sh.upgrade() else { return };
            let woken = {
                let g = s.idle.0.lock().unwrap_or_else(|e| e.into_inner());
                let (mut g, _) = s.idle.1.wait_timeout_while(g, hub_ttl / 2, |w| !*w).unwrap_or_else(|e| e.into_inner());
                std::mem::replace(&mut *g, false)
            };
            if woken {
                // let the last thread finish exiting (its malloc cache is then flushed)
                std::thread::sleep(Duration::from_millis(50));
            }
            let swept = s.hub.sweep() > 0;
            if (woken || swept) && s.conns.load(Ordering::SeqCst) == 0 {
                let before = hush_transport::admission::resident_bytes();
                hush_transport::admission::return_free_memory();
                if s.cfg.verbose {
                    let after = hush_transport::admission::resident_bytes();
                    if let (Some(b), Some(a)) = (before, after) {
                        hush_transport::log_line!(format!("hush node {}", s.cfg.party), "idle; gave free memory back: resident {:.1} -> {:.1} MiB", b as f64 / 1048576.0, a as f64 / 1048576.0);
                    }
                }
            }
        });
    }
    let sh = shared.clone();
    std::thread::Builder::new()
        .name("hush3-accept".into())
        .spawn(move || {
            for s in listener.incoming() {
                let Ok(mut s) = s else { continue };
                let Some(ticket) = pending.try_enter() else {
                    let from_addr = s.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
                    let _ = s.shutdown(std::net::Shutdown::Both);
                    hush_transport::log_line!(format!("hush node {}", sh.cfg.party), "refused a connection from {from_addr}: {} connections already in set-up", pending.max());
                    continue;
                };
                let (sh, sec) = (sh.clone(), sec.clone());
                sh.conns.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || {
                    let _idle = IdleTrim(&sh);
                    let me = sh.cfg.party;
                    let from_addr = s.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
                    let (kind, from) = match read_hello(&mut s) {
                        Ok(h) => h,
                        Err(e) => {
                            hush_transport::log_line!(format!("hush node {me}"), "refused a connection from {from_addr}: {e}");
                            return;
                        }
                    };
                    let opts = if kind == 1 { sh.cfg.client.clone() } else { sh.cfg.ring.clone() };
                    let ch = TcpChannel::from_accepted(s, opts, &sec);
                    drop(ticket);
                    let mut ch = match ch {
                        Ok(c) => c,
                        Err(e) => {
                            hush_transport::log_line!(format!("hush node {me}"), "refused a connection from {from_addr}: {e}");
                            return;
                        }
                    };
                    if kind == 0 {
                        if sh.cfg.link.is_tls() {
                            let got = ch.peer_fingerprint();
                            if got.is_none() || got != peer_pins[from] {
                                let got = got.map(|f| f.to_string()).unwrap_or_else(|| "no certificate".into());
                                let want = peer_pins[from].map(|f| f.to_string()).unwrap_or_else(|| "nothing (no pin)".into());
                                hush_transport::log_line!(
                                    format!("hush node {me}"),
                                    "refused a ring connection from {from_addr} claiming to be party {from}: it presented {got}, party {from} is pinned to {want}"
                                );
                                return;
                            }
                        }
                        if from != prev(me) {
                            return;
                        }
                        let Ok(f) = ch.recv_exact("ring link (job, lane)", 12) else { return };
                        let job = u64::from_le_bytes(f[..8].try_into().unwrap());
                        let lane = u32::from_le_bytes(f[8..].try_into().unwrap());
                        if !sh.hub.put((job, lane, 0, None), ch) {
                            hush_transport::log_line!(format!("hush node {me}"), "dropped a ring link for job {job:016x}: {MAX_PARKED} links already wait for their jobs");
                        }
                        return;
                    }
                    handle_client(&sh, ch);
                });
            }
        })
        .map_err(|e| Error::Local(e.to_string()))?;
    let mut h = shared.handled.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if shared.cfg.max_jobs.is_some_and(|m| *h >= m) {
            return Ok(());
        }
        h = shared.handled_cv.wait(h).unwrap_or_else(|e| e.into_inner());
    }
}

/// Held by every connection thread: when the last one ends (its buffers,
/// TLS state and job memory already freed), the node is idle and the
/// housekeeping thread gives the allocator's free memory back
/// (`malloc_trim`, after the thread has exited and flushed its cache).
struct IdleTrim<'a>(&'a Shared);
impl Drop for IdleTrim<'_> {
    fn drop(&mut self) {
        if self.0.conns.fetch_sub(1, Ordering::SeqCst) == 1 {
            *self.0.idle.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
            self.0.idle.1.notify_all();
        }
    }
}

fn handle_client(sh: &Arc<Shared>, mut ch: TcpChannel) {
    let me = sh.cfg.party;
    // the first frame may carry shares (an upload): zeroized when dropped
    let Ok(first) = ch.recv().map(Zeroizing::new) else { return };
    if first.len() < 4 {
        return;
    }
    let body = &first[4..];
    let r = match &first[..4] {
        b"HJB2" => {
            sh.running.fetch_add(1, Ordering::SeqCst);
            let r = serve_job(sh, &mut ch, body);
            sh.running.fetch_sub(1, Ordering::SeqCst);
            *sh.handled.lock().unwrap_or_else(|e| e.into_inner()) += 1;
            sh.handled_cv.notify_all();
            if let Err(e) = &r {
                hush_transport::log_line!(format!("hush node {me}"), "job failed: {e}");
                let _ = ch.send(&err_frame(me, e));
            }
            return;
        }
        b"HLAN" if body.len() == 12 => {
            let job = u64::from_le_bytes(body[..8].try_into().unwrap());
            let lane = u32::from_le_bytes(body[8..].try_into().unwrap());
            let who = ch.peer_fingerprint();
            // A job whose header arrived is bound to its submitter: a lane
            // link from anyone else is refused now (the job is untouched).
            let owner = sh.jobs.lock().unwrap_or_else(|e| e.into_inner()).get(job).map(|j| j.submitter);
            if let Some(sub) = owner {
                if sub != who {
                    let e = Error::protocol(
                        "access control",
                        format!("lane link for job {job:016x} refused: the job was submitted by another identity"),
                    );
                    if sh.cfg.verbose {
                        hush_transport::log_line!(format!("hush node {me}"), "{e}");
                    }
                    let _ = ch.send(&err_frame(me, &e));
                    return;
                }
            }
            if !sh.hub.put((job, lane, 1, who), ch) {
                hush_transport::log_line!(format!("hush node {me}"), "refused a lane link for job {job:016x}: {MAX_PARKED} links already wait for their jobs");
            }
            return;
        }
        b"HSHR" => handle_share(sh, &mut ch, body),
        b"HFET" => match handle_fetch(sh, &mut ch, body) {
            Ok(()) => return,
            Err(e) => Err(e),
        },
        b"HSTA" => handle_status(sh, &ch, body),
        b"HCAN" => handle_cancel(sh, &ch, body),
        _ => Err(Error::protocol("request", "unknown request")),
    };
    match r {
        Ok(payload) => {
            let _ = ch.send(&ok_frame(&payload));
        }
        Err(e) => {
            if sh.cfg.verbose {
                hush_transport::log_line!(format!("hush node {me}"), "refused a request: {e}");
            }
            let _ = ch.send(&err_frame(me, &e));
        }
    }
}

fn need_acl(sh: &Shared, ch: &TcpChannel, what: &str) -> Result<(Fingerprint, &'static ())> {
    let fp = ch.peer_fingerprint().ok_or_else(|| {
        Error::protocol("access control", format!("{what} needs TLS identities (this node or its caller runs --insecure)"))
    })?;
    if sh.store.is_none() {
        return Err(Error::protocol("access control", format!("{what}: this node runs without --store")));
    }
    Ok((fp, &()))
}

/// A stored input as kept (encrypted) by one node. Its shares are
/// zeroized when it is dropped.
struct InputRecord {
    owner: Fingerprint,
    users: Vec<String>,
    recipients: Vec<String>,
    /// Function grant entries, canonical ([`crate::grant`]).
    circuits: Vec<String>,
    width: usize,
    /// Upload id: the same at all three nodes for one upload.
    upload: String,
    x: Vec<bool>,
    a: Vec<bool>,
    /// Stored before grants named functions (it allows none).
    legacy: bool,
}

impl Drop for InputRecord {
    fn drop(&mut self) {
        self.x.zeroize();
        self.a.zeroize();
    }
}

fn bits_to_bytes(b: &[bool]) -> Vec<u8> {
    let mut bytes = vec![0u8; b.len().div_ceil(8)];
    for (i, &v) in b.iter().enumerate() {
        bytes[i / 8] |= (v as u8) << (i % 8);
    }
    bytes
}
fn bytes_to_bits(bytes: &[u8], n: usize) -> Result<Vec<bool>> {
    if bytes.len() != n.div_ceil(8) {
        return Err(Error::protocol("stored input", "share length does not match the width"));
    }
    Ok((0..n).map(|i| (bytes[i / 8] >> (i % 8)) & 1 == 1).collect())
}
fn hex_to_bits(s: &str, n: usize) -> Result<Vec<bool>> {
    let mut bytes = unhex(s)?;
    let r = bytes_to_bits(&bytes, n);
    bytes.zeroize();
    r
}

/// `u32 LE length ‖ JSON ‖ rest`: the JSON and the rest (binary shares).
fn split_meta<'a>(b: &'a [u8], step: &'static str) -> Result<(serde_json::Value, &'a [u8])> {
    if b.len() < 4 {
        return Err(Error::protocol(step, "truncated"));
    }
    let n = u32::from_le_bytes(b[..4].try_into().expect("4")) as usize;
    if b.len() - 4 < n {
        return Err(Error::protocol(step, "truncated"));
    }
    let v = serde_json::from_slice(&b[4..4 + n]).map_err(|e| Error::protocol(step, e.to_string()))?;
    Ok((v, &b[4 + n..]))
}
fn join_meta(meta: &serde_json::Value, rest: &[&[u8]]) -> Vec<u8> {
    let m = meta.to_string();
    let mut out = (m.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(m.as_bytes());
    for r in rest {
        out.extend_from_slice(r);
    }
    out
}

fn str_list(v: &serde_json::Value, k: &str) -> Vec<String> {
    v.get(k).and_then(|x| x.as_array()).map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()).unwrap_or_default()
}

/// SHA-256 of an owner's grant: owner, access lists and function entries
/// (canonical), bound into the record's associated data and compared
/// between the nodes at every job.
fn grant_digest(owner: &Fingerprint, users: &[String], recipients: &[String], circuits: &[String]) -> [u8; 32] {
    let j = serde_json::json!({ "owner": owner.to_string(), "users": users, "recipients": recipients, "circuits": circuits });
    sha256(&[b"hush grant v1", j.to_string().as_bytes()])
}

impl InputRecord {
    fn grant(&self) -> [u8; 32] {
        if self.legacy {
            LEGACY_GRANT
        } else {
            grant_digest(&self.owner, &self.users, &self.recipients, &self.circuits)
        }
    }
    /// Record plaintext: `u32 ‖ JSON (no shares) ‖ x bytes ‖ a bytes`.
    fn to_bytes(&self, name: &str) -> Zeroizing<Vec<u8>> {
        let meta = serde_json::json!({
            "name": name, "owner": self.owner.to_string(), "users": self.users, "recipients": self.recipients,
            "circuits": self.circuits, "width": self.width, "upload": self.upload,
        });
        let (x, a) = (Zeroizing::new(bits_to_bytes(&self.x)), Zeroizing::new(bits_to_bytes(&self.a)));
        Zeroizing::new(join_meta(&meta, &[&x, &a]))
    }
    fn from_bytes(meta: &RecordMeta, b: &[u8]) -> Result<Self> {
        if meta.grant == LEGACY_GRANT && b.first() == Some(&b'{') {
            return Self::from_legacy_json(b);
        }
        let (v, rest) = split_meta(b, "stored input")?;
        let width = v.get("width").and_then(|x| x.as_u64()).unwrap_or(0) as usize;
        let nb = width.div_ceil(8);
        if width == 0 || rest.len() != 2 * nb {
            return Err(Error::protocol("stored input", "share length does not match the width"));
        }
        let r = InputRecord {
            owner: v.get("owner").and_then(|x| x.as_str()).unwrap_or("").parse().map_err(|_| Error::protocol("stored input", "bad owner"))?,
            users: str_list(&v, "users"),
            recipients: str_list(&v, "recipients"),
            circuits: str_list(&v, "circuits"),
            width,
            upload: v.get("upload").and_then(|x| x.as_str()).unwrap_or("").to_string(),
            x: bytes_to_bits(&rest[..nb], width)?,
            a: bytes_to_bits(&rest[nb..], width)?,
            legacy: false,
        };
        if r.grant() != meta.grant {
            return Err(Error::protocol("stored input", "the record's grant does not match the digest bound to it"));
        }
        Ok(r)
    }
    /// A record of a store made before grants named functions: JSON with
    /// hex shares and no function list.
    fn from_legacy_json(b: &[u8]) -> Result<Self> {
        let v: serde_json::Value = serde_json::from_slice(b).map_err(|e| Error::protocol("stored input", e.to_string()))?;
        let s = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
        let width = v.get("width").and_then(|x| x.as_u64()).unwrap_or(0) as usize;
        Ok(InputRecord {
            owner: s("owner").parse().map_err(|_| Error::protocol("stored input", "bad owner"))?,
            users: str_list(&v, "users"),
            recipients: str_list(&v, "recipients"),
            circuits: Vec::new(),
            width,
            upload: s("upload"),
            x: hex_to_bits(&s("x"), width)?,
            a: hex_to_bits(&s("a"), width)?,
            legacy: true,
        })
    }
    fn allows(list: &[String], owner: &Fingerprint, who: &Fingerprint) -> bool {
        who == owner || list.iter().any(|e| e == "any" || e.parse::<Fingerprint>().ok().as_ref() == Some(who))
    }
    /// Whether the function grant lets circuit `c` read this input as its
    /// input value `pos` (0-based). The owner's own jobs are not bound.
    fn allows_function(&self, who: &Fingerprint, c: &CircuitId, pos: usize) -> bool {
        *who == self.owner || self.circuits.iter().any(|g| FuncGrant::from_canonical(g).is_ok_and(|g| g.allows(c, pos)))
    }
}

/// Reads and parses a stored input.
fn read_input(store: &Store, name: &str) -> Result<Option<(RecordMeta, InputRecord)>> {
    match store.get("inputs", name)? {
        None => Ok(None),
        Some((meta, plain)) => Ok(Some((meta, InputRecord::from_bytes(&meta, &plain)?))),
    }
}

/// Owner of a stored input: from the manifest, or (adopted first-format
/// records) from the record.
fn input_owner(store: &Store, name: &str) -> Result<Option<String>> {
    match store.owner("inputs", name) {
        None => Ok(None),
        Some(o) if !o.is_empty() => Ok(Some(o)),
        Some(_) => Ok(read_input(store, name)?.map(|(_, r)| r.owner.to_string())),
    }
}

fn parse_fp_list(v: &serde_json::Value, k: &str) -> Result<Vec<String>> {
    let Some(a) = v.get(k).and_then(|x| x.as_array()) else { return Ok(Vec::new()) };
    a.iter()
        .map(|x| {
            let s = x.as_str().ok_or_else(|| Error::Input(format!("{k}: not a string")))?;
            if s != "any" {
                s.parse::<Fingerprint>().map_err(|e| Error::Input(format!("{k}: {s:?}: {e}")))?;
            }
            Ok(s.to_string())
        })
        .collect()
}

/// `HSHR`: an upload (or, with `regrant`, a new grant for the shares a
/// node already holds), in two steps on one connection. (1) The client
/// sends the upload; the node checks it and the ownership, and answers
/// with the input's current version. (2) The client, having heard all
/// three nodes, sends one version above the highest of them; the node
/// writes the record under it (refusing a version that is not newer) and
/// answers. So the three nodes hold one input at one version even after
/// a node missed an earlier upload.
fn handle_share(sh: &Shared, ch: &mut TcpChannel, body: &[u8]) -> Result<Vec<u8>> {
    let (owner, _) = need_acl(sh, ch, "stored inputs")?;
    let (v, shares) = split_meta(body, "share")?;
    let name = v.get("name").and_then(|x| x.as_str()).unwrap_or("").to_string();
    check_name(&name)?;
    let regrant = v.get("regrant").and_then(|x| x.as_bool()).unwrap_or(false);
    let users = parse_fp_list(&v, "users")?;
    let recipients = parse_fp_list(&v, "recipients")?;
    let circuits = crate::grant::parse_list(&str_list(&v, "circuits"))?;
    let store = sh.store.as_ref().expect("checked");
    let fresh = if regrant {
        None
    } else {
        let width = v.get("width").and_then(|x| x.as_u64()).unwrap_or(0) as usize;
        if width == 0 || width > 1 << 24 {
            return Err(Error::Input(format!("width {width} out of range")));
        }
        let nb = width.div_ceil(8);
        if shares.len() != 2 * nb {
            return Err(Error::protocol("share", "share length does not match the width"));
        }
        let upload = v.get("upload").and_then(|x| x.as_str()).unwrap_or("").to_string();
        Some((width, upload, bytes_to_bits(&shares[..nb], width)?, bytes_to_bits(&shares[nb..], width)?))
    };
    let check_owner = || -> Result<u64> {
        if let Some(o) = input_owner(store, &name)? {
            if o != owner.to_string() {
                return Err(Error::protocol("access control", format!("input {name:?} belongs to {o}; only its owner may replace or re-grant it")));
            }
        }
        Ok(store.version("inputs", &name).unwrap_or(0))
    };
    let current = {
        let _g = sh.store_lock.lock().unwrap_or_else(|e| e.into_inner());
        check_owner()?
    };
    if regrant && current == 0 {
        return Err(Error::protocol("share", format!("no stored input {name:?} on this node to re-grant (share it with --input)")));
    }
    ch.send(&ok_frame(serde_json::json!({ "version": current }).to_string().as_bytes())).map_err(Error::transport("share (current version)"))?;
    let f = ch.recv().map_err(Error::transport("share (version to write)"))?;
    let version = u64::from_le_bytes(f.as_slice().try_into().map_err(|_| Error::protocol("share", "bad version frame"))?);
    let _g = sh.store_lock.lock().unwrap_or_else(|e| e.into_inner());
    let now = check_owner()?;
    if version <= now {
        return Err(Error::protocol("share", format!("input {name:?}: version {version} is not newer than the stored version {now}")));
    }
    let rec = match fresh {
        Some((width, upload, x, a)) => InputRecord { owner, users, recipients, circuits, width, upload, x, a, legacy: false },
        None => {
            let (_, old) = read_input(store, &name)?.ok_or_else(|| Error::protocol("share", format!("no stored input {name:?} to re-grant")))?;
            InputRecord { owner, users, recipients, circuits, width: old.width, upload: old.upload.clone(), x: old.x.clone(), a: old.a.clone(), legacy: false }
        }
    };
    let grant = rec.grant();
    store.put("inputs", &name, RecordMeta { version, grant }, &owner.to_string(), &rec.to_bytes(&name))?;
    if sh.cfg.verbose {
        let what = if regrant { "re-granted" } else { "stored" };
        hush_transport::log_line!(format!("hush node {}", sh.cfg.party), "{what} input {name:?} ({} bits) for owner {owner}, version {version}", rec.width);
    }
    Ok(serde_json::json!({ "version": version, "grant": hex(&grant) }).to_string().into_bytes())
}

fn handle_fetch(sh: &Shared, ch: &mut TcpChannel, body: &[u8]) -> Result<()> {
    let (who, _) = need_acl(sh, ch, "fetching results")?;
    let job = u64::from_le_bytes(body.try_into().map_err(|_| Error::protocol("fetch", "bad request"))?);
    let name = format!("{job:016x}");
    let rec = sh.store.as_ref().expect("checked").get("results", &name)?;
    let Some((_, rec)) = rec else {
        let state = sh.jobs.lock().unwrap_or_else(|e| e.into_inner()).get(job).map(|j| format!("{:?}", j.state));
        return Err(Error::protocol("fetch", format!("no stored result for job {name}{}", state.map(|s| format!(" (job state: {s})")).unwrap_or_default())));
    };
    if rec.len() < 4 {
        return Err(Error::protocol("fetch", "corrupt result record"));
    }
    let mlen = u32::from_le_bytes(rec[..4].try_into().unwrap()) as usize;
    if rec.len() - 4 < mlen {
        return Err(Error::protocol("fetch", "corrupt result record"));
    }
    let meta: serde_json::Value = serde_json::from_slice(&rec[4..4 + mlen]).map_err(|e| Error::protocol("fetch", e.to_string()))?;
    let to = meta.get("output_to").and_then(|x| x.as_str()).unwrap_or("");
    if to != who.to_string() {
        return Err(Error::protocol("access control", format!("the result of job {name} is for {to}, not for {who}")));
    }
    ch.send(&ok_frame(&rec[4..4 + mlen])).map_err(Error::transport("result to the output party"))?;
    ch.send_chunked(&rec[4 + mlen..]).map_err(Error::transport("result to the output party"))?;
    Ok(())
}

fn job_json(id: u64, j: &JobInfo) -> serde_json::Value {
    let (state, msg) = match &j.state {
        JobState::Queued => ("queued", String::new()),
        JobState::Running => ("running", String::new()),
        JobState::Done => ("done", String::new()),
        JobState::Failed(m) => ("failed", m.clone()),
        JobState::Cancelled => ("cancelled", String::new()),
    };
    serde_json::json!({
        "job": format!("{id:016x}"), "state": state, "error": msg, "circuit": &*j.circuit,
        "chunks_done": j.chunks_done(), "chunks": j.nchunks, "age_s": j.started.elapsed().as_secs_f64(),
        "submitter": j.submitter.map(|f| f.to_string()), "output_to": j.output_to.map(|f| f.to_string()),
    })
}

fn may_see(j: &JobInfo, who: Option<Fingerprint>) -> bool {
    match who {
        Some(w) => j.submitter == Some(w) || j.output_to == Some(w),
        None => j.submitter.is_none(),
    }
}

fn handle_status(sh: &Shared, ch: &TcpChannel, body: &[u8]) -> Result<Vec<u8>> {
    let who = ch.peer_fingerprint();
    let job = u64::from_le_bytes(body.try_into().map_err(|_| Error::protocol("status", "bad request"))?);
    let jobs = sh.jobs.lock().unwrap_or_else(|e| e.into_inner());
    let list: Vec<serde_json::Value> = if job == 0 {
        let mut v: Vec<_> = jobs.iter().filter(|(_, j)| may_see(j, who)).map(|(id, j)| (j.started, job_json(id, j))).collect();
        v.sort_by_key(|x| x.0);
        v.into_iter().map(|x| x.1).collect()
    } else {
        match jobs.get(job) {
            Some(j) if may_see(j, who) => vec![job_json(job, j)],
            Some(_) => return Err(Error::protocol("access control", format!("job {job:016x} is not yours"))),
            None => return Err(Error::protocol("status", format!("no job {job:016x} on this node"))),
        }
    };
    Ok(serde_json::json!({ "party": sh.cfg.party, "jobs": list }).to_string().into_bytes())
}

fn handle_cancel(sh: &Shared, ch: &TcpChannel, body: &[u8]) -> Result<Vec<u8>> {
    let who = ch.peer_fingerprint();
    let job = u64::from_le_bytes(body.try_into().map_err(|_| Error::protocol("cancel", "bad request"))?);
    let jobs = sh.jobs.lock().unwrap_or_else(|e| e.into_inner());
    match jobs.get(job) {
        Some(j) if j.submitter == who => {
            if let Progress::Live { cancel, .. } = &j.progress {
                cancel.store(true, Ordering::Relaxed);
            }
            sh.sched.cv.notify_all();
            sh.hub.cv.notify_all();
            Ok(Vec::new())
        }
        Some(_) => Err(Error::protocol("access control", format!("job {job:016x} was submitted by another identity"))),
        None => Err(Error::protocol("cancel", format!("no job {job:016x} on this node"))),
    }
}

/// Per-node statistics of one job (sent to the client as JSON).
#[derive(Clone, Debug, Default)]
pub struct NodeStats {
    pub party: usize,
    pub ring_bytes_sent: u64,
    pub ring_bytes_recv: u64,
    pub client_bytes_recv: u64,
    pub client_bytes_sent: u64,
    pub rounds: u64,
    pub chunks: u64,
    pub eval_s: f64,
    /// What crossed this node's sockets during the job (ring links sent,
    /// client link both ways), frame headers and TLS records included.
    pub socket_bytes: u64,
}

impl NodeStats {
    fn add(&mut self, o: &NodeStats) {
        self.ring_bytes_sent += o.ring_bytes_sent;
        self.ring_bytes_recv += o.ring_bytes_recv;
        self.client_bytes_recv += o.client_bytes_recv;
        self.client_bytes_sent += o.client_bytes_sent;
        self.rounds += o.rounds;
        self.chunks += o.chunks;
        self.socket_bytes += o.socket_bytes;
    }
    fn to_json(&self) -> String {
        serde_json::json!({
            "party": self.party, "ring_bytes_sent": self.ring_bytes_sent, "ring_bytes_recv": self.ring_bytes_recv,
            "client_bytes_recv": self.client_bytes_recv, "client_bytes_sent": self.client_bytes_sent,
            "rounds": self.rounds, "chunks": self.chunks, "eval_s": self.eval_s, "socket_bytes": self.socket_bytes,
        })
        .to_string()
    }
    fn from_json(s: &[u8]) -> Result<Self> {
        let v: serde_json::Value = serde_json::from_slice(s).map_err(|e| Error::protocol("job statistics", e.to_string()))?;
        let u = |k: &str| v.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
        Ok(NodeStats {
            party: u("party") as usize,
            ring_bytes_sent: u("ring_bytes_sent"),
            ring_bytes_recv: u("ring_bytes_recv"),
            client_bytes_recv: u("client_bytes_recv"),
            client_bytes_sent: u("client_bytes_sent"),
            rounds: u("rounds"),
            chunks: u("chunks"),
            eval_s: v.get("eval_s").and_then(|x| x.as_f64()).unwrap_or(0.0),
            socket_bytes: u("socket_bytes"),
        })
    }
}

/// How a job names its circuit.
#[derive(Clone, Debug)]
pub enum CircuitSpec {
    Builtin(String),
    Text(String),
}

impl CircuitSpec {
    /// A built-in name or a path read into text.
    pub fn from_arg(s: &str) -> Result<Self> {
        if Circuit::is_builtin(s) {
            Ok(CircuitSpec::Builtin(s.to_string()))
        } else {
            let text = crate::bristol::read_circuit_text(s)?;
            Circuit::parse(s, &text)?;
            Ok(CircuitSpec::Text(text))
        }
    }
    pub fn circuit(&self) -> Result<Circuit> {
        match self {
            CircuitSpec::Builtin(n) => Circuit::builtin(n).ok_or_else(|| Error::Input(format!("no built-in circuit {n:?}"))),
            CircuitSpec::Text(t) => Circuit::parse("job circuit", t),
        }
    }
}


/// Where one circuit input value of a job comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputSource {
    /// A stored input (one instance, used by every instance of the job).
    Stored(String),
    /// Shared by the submitter, fresh per instance ([`Inputs`]).
    Inline,
}

/// What a submitter asks for.
#[derive(Clone, Debug)]
pub struct JobSpec {
    pub circuit: CircuitSpec,
    pub instances: u64,
    /// Instances per chunk = 64 × words.
    pub words: usize,
    /// Chunks in flight per lane (1..=8).
    pub streams: usize,
    /// Lanes: threads per node (chunks split round-robin).
    pub lanes: usize,
    /// One per circuit input value; empty = all inline.
    pub sources: Vec<InputSource>,
    /// The output party; `None`: the submitter receives the outputs.
    pub output_to: Option<Fingerprint>,
}

impl JobSpec {
    pub fn inline(circuit: CircuitSpec, instances: u64, words: usize, streams: usize) -> JobSpec {
        JobSpec { circuit, instances, words, streams, lanes: 1, sources: Vec::new(), output_to: None }
    }
}

struct JobHeader {
    job_id: u64,
    instances: u64,
    words: usize,
    streams: usize,
    lanes: usize,
    circuit: CircuitSpec,
    sources: Vec<InputSource>,
    output_to: Option<Fingerprint>,
}

fn encode_header(h: &JobHeader) -> Vec<u8> {
    let circuit = match &h.circuit {
        CircuitSpec::Builtin(n) => serde_json::json!({ "builtin": n }),
        CircuitSpec::Text(t) => serde_json::json!({ "text": t }),
    };
    let sources: Vec<serde_json::Value> = h
        .sources
        .iter()
        .map(|s| match s {
            InputSource::Stored(n) => serde_json::json!({ "stored": n }),
            InputSource::Inline => serde_json::json!("inline"),
        })
        .collect();
    let mut m = b"HJB2".to_vec();
    m.extend_from_slice(
        serde_json::json!({
            "job_id": h.job_id, "instances": h.instances, "words": h.words, "streams": h.streams, "lanes": h.lanes,
            "circuit": circuit, "inputs": sources, "output_to": h.output_to.map(|f| f.to_string()),
        })
        .to_string()
        .as_bytes(),
    );
    m
}

fn decode_header(m: &[u8]) -> Result<JobHeader> {
    const STEP: &str = "job header";
    let v: serde_json::Value = serde_json::from_slice(m).map_err(|e| Error::protocol(STEP, e.to_string()))?;
    let u = |k: &str| v.get(k).and_then(|x| x.as_u64()).ok_or_else(|| Error::protocol(STEP, format!("missing {k}")));
    let (job_id, instances, words, streams, lanes) = (u("job_id")?, u("instances")?, u("words")? as usize, u("streams")? as usize, u("lanes")? as usize);
    if instances == 0 || instances > MAX_INSTANCES {
        return Err(Error::protocol(STEP, format!("{instances} instances (allowed 1..={MAX_INSTANCES})")));
    }
    if words == 0 || words > MAX_CHUNK_WORDS {
        return Err(Error::protocol(STEP, format!("chunk of {words} words (allowed 1..={MAX_CHUNK_WORDS})")));
    }
    if streams == 0 || streams > MAX_STREAMS {
        return Err(Error::protocol(STEP, format!("{streams} streams (allowed 1..={MAX_STREAMS})")));
    }
    let nchunks = instances.div_ceil(64 * words as u64);
    if lanes == 0 || lanes > MAX_LANES || lanes as u64 > nchunks {
        return Err(Error::protocol(STEP, format!("{lanes} lanes for {nchunks} chunks (allowed 1..={MAX_LANES}, at most one per chunk)")));
    }
    let c = v.get("circuit").ok_or_else(|| Error::protocol(STEP, "missing circuit"))?;
    let circuit = if let Some(n) = c.get("builtin").and_then(|x| x.as_str()) {
        CircuitSpec::Builtin(n.to_string())
    } else if let Some(t) = c.get("text").and_then(|x| x.as_str()) {
        CircuitSpec::Text(t.to_string())
    } else {
        return Err(Error::protocol(STEP, "bad circuit"));
    };
    let mut sources = Vec::new();
    for s in v.get("inputs").and_then(|x| x.as_array()).into_iter().flatten() {
        sources.push(match s.get("stored").and_then(|x| x.as_str()) {
            Some(n) => {
                check_name(n)?;
                InputSource::Stored(n.to_string())
            }
            None => InputSource::Inline,
        });
    }
    let output_to = match v.get("output_to").and_then(|x| x.as_str()) {
        Some(s) => Some(s.parse::<Fingerprint>().map_err(|e| Error::protocol(STEP, format!("output_to: {e}")))?),
        None => None,
    };
    Ok(JobHeader { job_id, instances, words, streams, lanes, circuit, sources, output_to })
}

/// Per input wire of the circuit: this node's stored pair bits, or the
/// index of the inline wire in the client's per-chunk message.
enum WireSrc {
    Stored(bool, bool),
    Inline(usize),
}

impl Drop for WireSrc {
    fn drop(&mut self) {
        if let WireSrc::Stored(x, a) = self {
            x.zeroize();
            a.zeroize();
        }
    }
}

/// A job's circuit, compiled, with what grants are checked against.
struct Compiled {
    prog: Program,
    circ: Circuit,
    name: Arc<str>,
    id: CircuitId,
}

fn program_for(sh: &Shared, spec: &CircuitSpec) -> Result<Arc<Compiled>> {
    let key = match spec {
        CircuitSpec::Builtin(n) => sha256(&[b"builtin", n.as_bytes()]),
        CircuitSpec::Text(t) => sha256(&[b"text", t.as_bytes()]),
    };
    if let Some(p) = sh.programs.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(p.clone());
    }
    let c = spec.circuit()?;
    let name: Arc<str> = Arc::from(c.name.as_str());
    let id = match spec {
        CircuitSpec::Builtin(n) => CircuitId { builtin: Some(c.name.clone()), digest: crate::grant::builtin_digest(&c, n), n_values: c.inputs.len() },
        CircuitSpec::Text(t) => CircuitId { builtin: None, digest: crate::grant::text_digest(t), n_values: c.inputs.len() },
    };
    let p = Arc::new(Compiled { prog: Program::compile(&c), circ: c, name, id });
    let mut m = sh.programs.lock().unwrap_or_else(|e| e.into_inner());
    if m.len() > 16 {
        m.clear();
    }
    m.insert(key, p.clone());
    Ok(p)
}

fn set_state(sh: &Shared, job: u64, st: JobState) {
    sh.jobs.lock().unwrap_or_else(|e| e.into_inner()).set_state(job, st);
}

fn serve_job(sh: &Arc<Shared>, client: &mut TcpChannel, hdr_bytes: &[u8]) -> Result<()> {
    let me = sh.cfg.party;
    let hdr = decode_header(hdr_bytes)?;
    let submitter = client.peer_fingerprint();
    let pc = program_for(sh, &hdr.circuit)?;
    let (prog, circ) = (&pc.prog, &pc.circ);
    let words = hdr.words;
    // Input sources and access control.
    let sources = if hdr.sources.is_empty() { vec![InputSource::Inline; circ.inputs.len()] } else { hdr.sources.clone() };
    if sources.len() != circ.inputs.len() {
        return Err(Error::protocol("job header", format!("{} input sources for a circuit with {} input values", sources.len(), circ.inputs.len())));
    }
    let uses_store = sources.iter().any(|s| matches!(s, InputSource::Stored(_)));
    if (uses_store || hdr.output_to.is_some()) && submitter.is_none() {
        return Err(Error::protocol("access control", "stored inputs and --output-to need TLS identities"));
    }
    if (uses_store || hdr.output_to.is_some()) && sh.store.is_none() {
        return Err(Error::protocol("access control", "this node runs without --store"));
    }
    let mut wires = Vec::with_capacity(prog.n_in);
    let mut n_inline = 0usize;
    // Per stored input: name, version, upload id and grant digest — what
    // the three nodes must agree on (compared at admission, run_lane).
    let mut held = Vec::new();
    for (pos, (s, &width)) in sources.iter().zip(&circ.inputs).enumerate() {
        match s {
            InputSource::Inline => {
                for _ in 0..width {
                    wires.push(WireSrc::Inline(n_inline));
                    n_inline += 1;
                }
            }
            InputSource::Stored(name) => {
                let (meta, rec) = read_input(sh.store.as_ref().expect("checked"), name)?
                    .ok_or_else(|| Error::protocol("job", format!("no stored input {name:?} on this node")))?;
                let sub = submitter.expect("checked");
                if !InputRecord::allows(&rec.users, &rec.owner, &sub) {
                    return Err(Error::protocol(
                        "access control",
                        format!("input {name:?} (owner {}) does not allow jobs from {sub}", rec.owner),
                    ));
                }
                let receiver = hdr.output_to.unwrap_or(sub);
                if !InputRecord::allows(&rec.recipients, &rec.owner, &receiver) {
                    return Err(Error::protocol(
                        "access control",
                        format!("input {name:?} (owner {}) does not allow results to go to {receiver}", rec.owner),
                    ));
                }
                if !rec.allows_function(&sub, &pc.id, pos) {
                    let why = if rec.legacy {
                        format!(
                            "it was stored before grants named functions and allows none until its owner re-grants it (hush share --regrant --name {name} --allow-circuit ...)"
                        )
                    } else if rec.circuits.is_empty() {
                        "its owner granted no function (only the owner may compute on it)".to_string()
                    } else {
                        format!("its owner granted only {}", rec.circuits.join(","))
                    };
                    return Err(Error::protocol(
                        "access control",
                        format!("input {name:?} (owner {}) does not allow circuit {} with it as input value {} of {}: {why}", rec.owner, pc.id.describe(), pos + 1, pc.id.n_values),
                    ));
                }
                if rec.width != width {
                    return Err(Error::protocol("job", format!("stored input {name:?} has {} bits, the circuit input {width}", rec.width)));
                }
                held.push(serde_json::json!({ "name": name, "version": meta.version, "upload": rec.upload, "grant": hex(&meta.grant) }));
                for k in 0..width {
                    wires.push(WireSrc::Stored(rec.x[k], rec.a[k]));
                }
            }
        }
    }
    let nchunks = hdr.instances.div_ceil(64 * words as u64);
    let cancel = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    {
        let mut jobs = sh.jobs.lock().unwrap_or_else(|e| e.into_inner());
        let id_name = format!("{:016x}", hdr.job_id);
        let stored_result = sh.store.as_ref().is_some_and(|s| s.contains("results", &id_name));
        if hdr.job_id == 0 || jobs.contains(hdr.job_id) || stored_result {
            return Err(Error::protocol("job header", format!("job id {id_name} was used before")));
        }
        jobs.insert(
            hdr.job_id,
            JobInfo {
                submitter,
                output_to: hdr.output_to,
                circuit: pc.name.clone(),
                nchunks,
                progress: Progress::Live { done: done.clone(), cancel: cancel.clone() },
                state: JobState::Queued,
                started: Instant::now(),
            },
        );
    }
    // What every node must agree on: the header, and the uploads of the
    // stored inputs (all three hold shares of the same upload).
    let held = serde_json::Value::Array(held).to_string();
    let mut check = sha256(&[hdr_bytes, held.as_bytes()]).to_vec();
    check.extend_from_slice(&hdr.job_id.to_le_bytes());
    check.extend_from_slice(held.as_bytes());
    let queue_deadline = Instant::now() + sh.cfg.ring.timeout.max(Duration::from_secs(10)) * 10;
    let sub_name = submitter.map(|f| f.to_string()).unwrap_or_default();
    if me == 0 {
        if let Err(e) = sh.sched.acquire(&sub_name, hdr.job_id, hdr.lanes, &cancel, queue_deadline) {
            set_state(sh, hdr.job_id, if cancel.load(Ordering::Relaxed) { JobState::Cancelled } else { JobState::Failed(e.to_string()) });
            return Err(e);
        }
    }
    set_state(sh, hdr.job_id, JobState::Running);
    let t0 = Instant::now();
    let result_buf: Option<Mutex<Vec<u64>>> = hdr.output_to.map(|_| Mutex::new(vec![0u64; nchunks as usize * prog.n_out * words]));
    let lanes = hdr.lanes;
    // Run the lanes; each returns its stats and (for lanes > 0) its client link.
    let outcomes: Vec<Result<(NodeStats, Option<TcpChannel>)>> = std::thread::scope(|sc| {
        let mut hs = Vec::new();
        let mut client0 = Some(&mut *client);
        for l in 0..lanes {
            let c0 = if l == 0 { client0.take() } else { None };
            let (hdr, wires, cancel, done, result_buf, check, sh) = (&hdr, &wires, &cancel, &done, &result_buf, &check, &**sh);
            hs.push(sc.spawn(move || {
                run_lane(sh, hdr, prog, wires, n_inline, l, c0, cancel, done, result_buf.as_ref(), check, queue_deadline, submitter)
            }));
        }
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(Error::Local("lane thread panicked".into())))).collect()
    });
    if me == 0 {
        sh.sched.release(lanes);
    }
    sh.hub.forget(hdr.job_id);
    let first_err = outcomes.iter().find_map(|r| r.as_ref().err()).map(|e| e.to_string());
    if let Some(msg) = first_err {
        let e = if cancel.load(Ordering::Relaxed) { Error::protocol("job", "cancelled") } else { Error::protocol("job", msg.clone()) };
        for (ch, _) in outcomes.into_iter().filter_map(|r| r.ok()).filter_map(|(_, c)| c.map(|c| (c, ()))) {
            let mut ch = ch;
            let _ = ch.send(&err_frame(me, &e));
        }
        set_state(sh, hdr.job_id, if cancel.load(Ordering::Relaxed) { JobState::Cancelled } else { JobState::Failed(msg) });
        return Err(e);
    }
    // Store the result share before anyone is told the job is done.
    if let (Some(buf), Some(to)) = (result_buf, hdr.output_to) {
        let outs = Zeroizing::new(buf.into_inner().unwrap_or_else(|e| e.into_inner()));
        let meta = serde_json::json!({
            "job": format!("{:016x}", hdr.job_id), "party": me, "output_to": to.to_string(),
            "submitter": submitter.map(|f| f.to_string()), "circuit": circ.name, "outputs": circ.outputs,
            "instances": hdr.instances, "words": words, "n_out": prog.n_out,
        })
        .to_string();
        let mut rec = Zeroizing::new((meta.len() as u32).to_le_bytes().to_vec());
        rec.extend_from_slice(meta.as_bytes());
        rec.extend_from_slice(words_as_bytes(&outs));
        let rm = RecordMeta { version: 1, grant: sha256(&[b"result for", to.to_string().as_bytes()]) };
        if let Err(e) = sh.store.as_ref().expect("checked").put("results", &format!("{:016x}", hdr.job_id), rm, &to.to_string(), &rec) {
            set_state(sh, hdr.job_id, JobState::Failed(e.to_string()));
            return Err(e);
        }
    }
    set_state(sh, hdr.job_id, JobState::Done);
    let mut all = NodeStats { party: me, ..Default::default() };
    let mut lane_chs = Vec::new();
    for (st, ch) in outcomes.into_iter().flatten() {
        all.add(&st);
        if let Some(ch) = ch {
            lane_chs.push((st, ch));
        }
    }
    all.eval_s = t0.elapsed().as_secs_f64();
    // Lane 0 reports the whole node; other lanes just close.
    client.send(&[2]).map_err(Error::transport("statistics to the client"))?;
    client.send(all.to_json().as_bytes()).map_err(Error::transport("statistics to the client"))?;
    for (_, mut ch) in lane_chs {
        let _ = ch.send(&[2]);
        let _ = ch.send(b"{}");
    }
    if sh.cfg.verbose {
        hush_transport::log_line!(format!("hush node {me}"), "job {:016x} done in {:.3}s ({nchunks} chunks, {lanes} lanes)", hdr.job_id, t0.elapsed().as_secs_f64());
    }
    Ok(())
}

/// Why the previous party's job check differs from ours: names the stored
/// input and the node that is behind when their versions differ (a node
/// whose store was rolled back, or that missed an update), else the
/// header. The check is `SHA-256 (32) ‖ job id (8) ‖ stored inputs (JSON)`.
fn explain_check_mismatch(me: usize, mine: &[u8], theirs: &[u8]) -> Error {
    let p = prev(me);
    let parse = |b: &[u8]| -> Option<Vec<serde_json::Value>> { serde_json::from_slice::<serde_json::Value>(b.get(40..)?).ok()?.as_array().cloned() };
    if let (Some(a), Some(b)) = (parse(mine), parse(theirs)) {
        for (m, t) in a.iter().zip(&b) {
            if m == t || m.get("name") != t.get("name") {
                continue;
            }
            let name = m.get("name").and_then(|x| x.as_str()).unwrap_or("?");
            let (vm, vt) = (m["version"].as_u64().unwrap_or(0), t["version"].as_u64().unwrap_or(0));
            if vm != vt {
                let (behind, bv, ahead, av) = if vt < vm { (p, vt, me, vm) } else { (me, vm, p, vt) };
                return Error::protocol(
                    "job check",
                    format!(
                        "stored input {name:?}: party {behind} holds version {bv}, party {ahead} version {av}: the store of party {behind} is behind (restored from a backup, or it missed an update); the job is refused. The owner re-shares or re-grants {name:?} to bring the three nodes to one version"
                    ),
                );
            }
            return Error::protocol(
                "job check",
                format!("stored input {name:?} (version {vm}) differs between party {p} and party {me} (upload or grant): the owner re-shares it"),
            );
        }
    }
    Error::protocol("job check", "the previous party runs a different job (different header or different uploads of a stored input: re-share it)")
}

#[allow(clippy::too_many_arguments)]
fn run_lane(
    sh: &Shared,
    hdr: &JobHeader,
    prog: &Program,
    wires: &[WireSrc],
    n_inline: usize,
    lane: usize,
    client0: Option<&mut TcpChannel>,
    cancel: &AtomicBool,
    done: &AtomicU64,
    result_buf: Option<&Mutex<Vec<u64>>>,
    check: &[u8],
    queue_deadline: Instant,
    submitter: Option<Fingerprint>,
) -> Result<(NodeStats, Option<TcpChannel>)> {
    let me = sh.cfg.party;
    let i = me;
    let job = hdr.job_id;
    let l32 = lane as u32;
    let deadline = Instant::now() + sh.cfg.client.timeout;
    let mut own_client = None;
    let client: &mut TcpChannel = match client0 {
        Some(c) => c,
        None => {
            let c = sh.hub.take((job, l32, 1, submitter), deadline, cancel).ok_or_else(|| Error::protocol("job lanes", format!("lane {lane}: the client did not connect")))?;
            if c.peer_fingerprint() != submitter {
                return Err(Error::protocol("access control", format!("lane {lane} connected by another identity than the submitter")));
            }
            own_client = Some(c);
            own_client.as_mut().expect("set")
        }
    };
    let mut lane_result = || -> Result<NodeStats> {
        // Ring links of this lane: party 0 starts (it admitted the job), the
        // others follow their predecessor.
        let connect_next = || -> Result<TcpChannel> {
            let addr = &sh.cfg.peers[next(i)];
            let sec = sh.cfg.link.to_peer(addr).map_err(|e| Error::Input(e.to_string()))?;
            let mut ch = connect_with_hello(addr, 0, i, &sh.cfg.ring, &sec)
                .map_err(|e| Error::protocol("ring setup", format!("connect to the next party at {addr}: {e}")))?;
            let mut f = job.to_le_bytes().to_vec();
            f.extend_from_slice(&l32.to_le_bytes());
            ch.send(&f).map_err(Error::transport("ring setup (job, lane)"))?;
            Ok(ch)
        };
        let take_prev = |dl: Instant| -> Result<TcpChannel> {
            sh.hub.take((job, l32, 0, None), dl, cancel).ok_or_else(|| {
                if cancel.load(Ordering::Relaxed) {
                    Error::protocol("job", "cancelled")
                } else {
                    Error::protocol("ring setup", format!("party {} did not join the job in time", prev(i)))
                }
            })
        };
        let (mut to_next, mut from_prev) = if i == 0 {
            let n = connect_next()?;
            (n, take_prev(Instant::now() + sh.cfg.ring.timeout)?)
        } else {
            // Waits while party 0 has the job queued.
            let p = take_prev(queue_deadline)?;
            (connect_next()?, p)
        };
        let keys = PartyKeys::setup(i, os_seed()?, &mut to_next, &mut from_prev)?;
        to_next.send(check).map_err(Error::transport("job check (send to the next party)"))?;
        let theirs = from_prev.recv().map_err(Error::transport("job check (from the previous party)"))?;
        if theirs != check {
            return Err(explain_check_mismatch(i, check, &theirs));
        }
        let c0 = client.cost();
        let r0 = to_next.cost() + from_prev.cost();
        let words = hdr.words;
        let w2 = 2 * words;
        let nchunks = hdr.instances.div_ceil(64 * words as u64);
        let lanes = hdr.lanes as u64;
        let my_chunks = (nchunks - lane as u64).div_ceil(lanes);
        let k = hdr.streams.min(my_chunks as usize).max(1);
        let mut evs = (0..k).map(|_| Evaluator::new(prog, words)).collect::<Result<Vec<_>>>()?;
        // Template: stored wires broadcast to every instance.
        let mut template = Zeroizing::new(vec![0u64; prog.n_in * w2]);
        for (w, src) in wires.iter().enumerate() {
            if let WireSrc::Stored(x, a) = *src {
                template[w * w2..][..words].fill(0u64.wrapping_sub(x as u64));
                template[w * w2 + words..][..words].fill(0u64.wrapping_sub(a as u64));
            }
        }
        let mut inline = Zeroizing::new(vec![0u64; n_inline * w2]);
        let client_cell = std::cell::RefCell::new(&mut *client);
        let n_out = prog.n_out;
        let t = Instant::now();
        run_streams_lane(
            &mut evs,
            &keys,
            job,
            (lane as u64, lanes),
            my_chunks,
            |_, buf| {
                if cancel.load(Ordering::Relaxed) {
                    return Err(Error::protocol("job", "cancelled"));
                }
                if n_inline > 0 {
                    recv_words(*client_cell.borrow_mut(), "input shares", &mut inline).map_err(Error::transport("input shares from the client"))?;
                }
                buf.copy_from_slice(&template);
                for (w, src) in wires.iter().enumerate() {
                    if let WireSrc::Inline(s) = *src {
                        buf[w * w2..][..w2].copy_from_slice(&inline[s * w2..][..w2]);
                    }
                }
                Ok(())
            },
            |c, out| {
                let g = lane as u64 + c * lanes;
                let mut cl = client_cell.borrow_mut();
                match result_buf {
                    Some(rb) => {
                        rb.lock().unwrap_or_else(|e| e.into_inner())[g as usize * n_out * words..][..n_out * words].copy_from_slice(out);
                        cl.send(&[0]).map_err(Error::transport("chunk acknowledgement to the client"))?;
                    }
                    None => {
                        cl.send(&[0]).map_err(Error::transport("output status to the client"))?;
                        let mut o = out.to_vec();
                        send_words(*cl, &mut o).map_err(Error::transport("output shares to the client"))?;
                    }
                }
                done.fetch_add(1, Ordering::Relaxed);
                Ok(())
            },
            &mut to_next,
            &mut from_prev,
        )?;
        let eval_s = t.elapsed().as_secs_f64();
        let rounds: u64 = evs.iter().map(|e| e.rounds()).sum();
        let d: Cost = (to_next.cost() + from_prev.cost()) - r0;
        let c1 = client.cost();
        Ok(NodeStats {
            party: me,
            ring_bytes_sent: d.bytes_sent,
            ring_bytes_recv: d.bytes_recv,
            client_bytes_recv: (c1 - c0).bytes_recv,
            client_bytes_sent: (c1 - c0).bytes_sent,
            rounds: rounds + 1,
            chunks: my_chunks,
            eval_s,
            socket_bytes: d.socket_bytes_sent + (c1 - c0).socket_bytes_recv + (c1 - c0).socket_bytes_sent,
        })
    };
    let r = lane_result();
    match r {
        Ok(st) => Ok((st, own_client)),
        Err(e) => {
            let _ = client.send(&err_frame(me, &e));
            Err(e)
        }
    }
}

/// Where a job's inputs come from.
#[derive(Clone, Debug)]
pub enum Inputs {
    /// The same input bits (wire order) for every instance.
    Fixed(Vec<bool>),
    /// Independent uniformly random inputs per instance, from a seed (the
    /// client can recompute any instance's inputs with [`random_input_bits`]).
    Random([u8; 16]),
}

/// The input bits of instance `k` of a job with [`Inputs::Random`].
pub fn random_input_bits(seed: [u8; 16], n_in: usize, words: usize, k: u64) -> Vec<bool> {
    let prf = Prf::new(seed);
    let chunk = k / (64 * words as u64);
    let j = (k % (64 * words as u64)) as usize;
    let mut w = vec![0u64; 1];
    (0..n_in)
        .map(|wire| {
            prf.fill_words(chunk, (wire * words + j / 64) as u64, &mut w);
            (w[0] >> (j % 64)) & 1 == 1
        })
        .collect()
}


/// What a job returns to its client.
pub struct JobResult {
    pub job_id: u64,
    pub instances: u64,
    pub words: usize,
    pub n_out: usize,
    /// Reconstructed outputs, chunk by chunk, each `n_out × words` words
    /// (empty when the outputs went to an output party's store).
    pub outputs: Vec<u64>,
    /// Per node (lanes summed).
    pub stats: Vec<NodeStats>,
    /// Client-observed time from sending the job to the last output.
    pub wall_s: f64,
    /// Bytes the client sent/received.
    pub client_cost: Cost,
}

impl JobResult {
    /// Output bits (wire order) of instance `k`.
    pub fn output_bits(&self, k: u64) -> Vec<bool> {
        let ci = 64 * self.words as u64;
        let base = (k / ci) as usize * self.n_out * self.words;
        let j = (k % ci) as usize;
        (0..self.n_out).map(|w| (self.outputs[base + w * self.words + j / 64] >> (j % 64)) & 1 == 1).collect()
    }
}

/// The client's view of an all-inline job toward three nodes: shares
/// inputs, collects and reconstructs the outputs.
#[allow(clippy::too_many_arguments)]
pub fn run_job(
    nodes: &[String; 3],
    circuit: &CircuitSpec,
    instances: u64,
    words: usize,
    streams: usize,
    inputs: &Inputs,
    opts: &ChannelOptions,
    link: &LinkConfig,
) -> Result<JobResult> {
    submit_job(nodes, &JobSpec::inline(circuit.clone(), instances, words, streams), inputs, opts, link)
}

fn connect_node(nodes: &[String; 3], i: usize, opts: &ChannelOptions, link: &LinkConfig) -> Result<TcpChannel> {
    let addr = &nodes[i];
    let sec = link.to_peer(addr).map_err(|e| Error::Input(e.to_string()))?;
    connect_with_hello(addr, 1, i, opts, &sec).map_err(|e| Error::Protocol { step: "connect to a node", msg: format!("party {i} at {addr}: {e}") })
}

/// Opens an extra-lane link (`HLAN`) for `job`, `lane` at node `i` under
/// this identity, as a submitter's client does: for tests of lane
/// binding (a node refuses it with a status frame when the job belongs
/// to someone else).
#[doc(hidden)]
pub fn open_lane_link(nodes: &[String; 3], i: usize, job: u64, lane: u32, opts: &ChannelOptions, link: &LinkConfig) -> Result<TcpChannel> {
    let mut ch = connect_node(nodes, i, opts, link)?;
    let mut m = b"HLAN".to_vec();
    m.extend_from_slice(&job.to_le_bytes());
    m.extend_from_slice(&lane.to_le_bytes());
    ch.send(&m).map_err(Error::transport("lane to a node"))?;
    Ok(ch)
}

/// Submits a job: `inputs` gives the bits of the inline input values only
/// (in order), stored values come from the nodes' stores.
pub fn submit_job(nodes: &[String; 3], spec: &JobSpec, inputs: &Inputs, opts: &ChannelOptions, link: &LinkConfig) -> Result<JobResult> {
    submit_job_with_id(nodes, spec, inputs, opts, link, None)
}

/// [`submit_job`] under a job id the caller chose (`None`: a random one).
/// Nodes refuse an id they have seen; ids must be unpredictable to others.
pub fn submit_job_with_id(
    nodes: &[String; 3],
    spec: &JobSpec,
    inputs: &Inputs,
    opts: &ChannelOptions,
    link: &LinkConfig,
    job_id: Option<u64>,
) -> Result<JobResult> {
    let (instances, words, streams) = (spec.instances, spec.words, spec.streams);
    if streams == 0 || streams > MAX_STREAMS {
        return Err(Error::Input(format!("{streams} streams (allowed 1..={MAX_STREAMS})")));
    }
    let c = spec.circuit.circuit()?;
    if instances == 0 || instances > MAX_INSTANCES || words == 0 || words > MAX_CHUNK_WORDS {
        return Err(Error::Input("instances or chunk width out of range".into()));
    }
    let sources = if spec.sources.is_empty() { vec![InputSource::Inline; c.inputs.len()] } else { spec.sources.clone() };
    if sources.len() != c.inputs.len() {
        return Err(Error::Input(format!("circuit {} takes {} input values, {} sources given", c.name, c.inputs.len(), sources.len())));
    }
    let n_in: usize = sources.iter().zip(&c.inputs).filter(|(s, _)| **s == InputSource::Inline).map(|(_, w)| *w).sum();
    if let Inputs::Fixed(b) = inputs {
        if b.len() != n_in {
            return Err(Error::Input(format!("{} inline input bits for {} inline input wires", b.len(), n_in)));
        }
    }
    let n_out = c.num_output_wires();
    let nchunks = instances.div_ceil(64 * words as u64);
    let lanes = spec.lanes.clamp(1, MAX_LANES).min(nchunks as usize);
    let mut seeds = [[0u8; 16]; 2];
    for s in &mut seeds {
        *s = os_seed()?;
    }
    let job_id = match job_id {
        Some(0) => return Err(Error::Input("job id 0 is reserved".into())),
        Some(id) => id,
        None => loop {
            let id = u64::from_le_bytes(os_seed()?[..8].try_into().unwrap());
            if id != 0 {
                break id;
            }
        },
    };
    let header = encode_header(&JobHeader {
        job_id,
        instances,
        words,
        streams,
        lanes,
        circuit: spec.circuit.clone(),
        sources,
        output_to: spec.output_to,
    });
    let to_store = spec.output_to.is_some();
    // Connect everything first, so a missing node fails before any work.
    let mut chans: Vec<Vec<TcpChannel>> = Vec::new();
    for i in 0..3 {
        let mut v = Vec::new();
        for l in 0..lanes {
            let mut ch = connect_node(nodes, i, opts, link)?;
            if l > 0 {
                let mut m = b"HLAN".to_vec();
                m.extend_from_slice(&job_id.to_le_bytes());
                m.extend_from_slice(&(l as u32).to_le_bytes());
                ch.send(&m).map_err(Error::transport("lane to a node"))?;
            }
            v.push(ch);
        }
        chans.push(v);
    }
    let t0 = Instant::now();
    type LaneOut = Result<(usize, usize, Vec<u64>, Option<NodeStats>, Cost)>;
    let results: Vec<LaneOut> = std::thread::scope(|sc| {
        let mut hs = Vec::new();
        for (i, v) in chans.into_iter().enumerate() {
            for (l, mut ch) in v.into_iter().enumerate() {
                let header = &header;
                let seeds = &seeds;
                hs.push(sc.spawn(move || -> LaneOut {
                    if l == 0 {
                        ch.send(header).map_err(Error::transport("job header to a node"))?;
                    }
                    let chunks: Vec<u64> = (l as u64..nchunks).step_by(lanes).collect();
                    let (o, st) = client_party(i, &mut ch, n_in, n_out, words, &chunks, streams, seeds, inputs, to_store, l == 0)?;
                    Ok((i, l, o, st, ch.cost()))
                }));
            }
        }
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(Error::Local("client thread panicked".into())))).collect()
    });
    let wall_s = t0.elapsed().as_secs_f64();
    let mut shares = vec![vec![0u64; if to_store { 0 } else { nchunks as usize * n_out * words }]; 3];
    let mut stats: Vec<NodeStats> = (0..3).map(|i| NodeStats { party: i, ..Default::default() }).collect();
    let mut client_cost = Cost::default();
    let mut first_err = None;
    for r in results {
        match r {
            Ok((i, l, o, st, cost)) => {
                if !to_store {
                    for (k, c) in (l as u64..nchunks).step_by(lanes).enumerate() {
                        shares[i][c as usize * n_out * words..][..n_out * words].copy_from_slice(&o[k * n_out * words..][..n_out * words]);
                    }
                }
                if let Some(st) = st {
                    stats[i] = st;
                }
                client_cost = client_cost + cost;
            }
            Err(e) => {
                // Prefer a node's own report over a follow-on disconnect.
                let is_report = matches!(&e, Error::Protocol { step: "node reported", msg } if !msg.contains("connection lost"));
                if first_err.is_none() || is_report {
                    first_err = Some(e);
                }
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    let outputs = if to_store { Vec::new() } else { crate::share::reconstruct([&shares[0], &shares[1], &shares[2]]) };
    Ok(JobResult { job_id, instances, words, n_out, outputs, stats, wall_s, client_cost })
}

#[allow(clippy::too_many_arguments)]
fn client_party(
    i: usize,
    ch: &mut TcpChannel,
    n_in: usize,
    n_out: usize,
    words: usize,
    chunks: &[u64],
    streams: usize,
    seeds: &[[u8; 16]; 2],
    inputs: &Inputs,
    to_store: bool,
    lane0: bool,
) -> Result<(Vec<u64>, Option<NodeStats>)> {
    let px = [Prf::new(seeds[0]), Prf::new(seeds[1])];
    let pv = match inputs {
        Inputs::Random(s) => Some(Prf::new(*s)),
        Inputs::Fixed(_) => None,
    };
    let w2 = 2 * words;
    let mut x0 = vec![0u64; words];
    let mut x1 = vec![0u64; words];
    let mut v = vec![0u64; words];
    let mut msg = vec![0u64; n_in * w2];
    let mut build = |c: u64, msg: &mut [u64]| {
        for w in 0..n_in {
            let off = (w * words) as u64;
            px[0].fill_words(c, off, &mut x0);
            px[1].fill_words(c, off, &mut x1);
            match (&pv, inputs) {
                (Some(p), _) => p.fill_words(c, off, &mut v),
                (None, Inputs::Fixed(b)) => v.fill(0u64.wrapping_sub(b[w] as u64)),
                _ => unreachable!(),
            }
            let (mx, ma) = msg[w * w2..][..w2].split_at_mut(words);
            // x_0, x_1 from the seeds, x_2 = x_0 ⊕ x_1; party i gets
            // (x_i, x_{i−1} ⊕ v).
            for k in 0..words {
                let xs = [x0[k], x1[k], x0[k] ^ x1[k]];
                mx[k] = xs[i];
                ma[k] = xs[prev(i)] ^ v[k];
            }
        }
    };
    let nchunks = chunks.len();
    let mut outputs = vec![0u64; if to_store { 0 } else { nchunks * n_out * words }];
    let window = streams + 1;
    let mut sent = 0usize;
    let send = |ch: &mut TcpChannel, msg: &mut [u64]| -> Result<()> {
        if n_in > 0 {
            send_words(ch, msg).map_err(Error::transport("input shares to a node"))?;
        }
        Ok(())
    };
    while sent < nchunks.min(window) {
        build(chunks[sent], &mut msg);
        send(ch, &mut msg)?;
        sent += 1;
    }
    for c in 0..nchunks {
        read_status(ch, i, "output status")?;
        if !to_store {
            let o = &mut outputs[c * n_out * words..][..n_out * words];
            recv_words(ch, "output shares", o).map_err(Error::transport("output shares from a node"))?;
        }
        if sent < nchunks {
            build(chunks[sent], &mut msg);
            send(ch, &mut msg)?;
            sent += 1;
        }
    }
    let st = ch.recv().map_err(Error::transport("statistics from a node"))?;
    match st.first() {
        Some(2) => {}
        Some(1) => return Err(Error::Protocol { step: "node reported", msg: String::from_utf8_lossy(&st[1..]).into_owned() }),
        _ => return Err(Error::protocol("statistics", "unexpected frame")),
    }
    let js = ch.recv().map_err(Error::transport("statistics from a node"))?;
    let stats = if lane0 { Some(NodeStats::from_json(&js)?) } else { None };
    Ok((outputs, stats))
}

/// Access lists and function grant of a stored input (fingerprints, or
/// `any`); the owner is implicitly in both lists and not bound by the
/// function grant.
#[derive(Clone, Debug, Default)]
pub struct Acl {
    /// Who may submit jobs reading the input.
    pub users: Vec<String>,
    /// Who may receive results computed from it.
    pub recipients: Vec<String>,
    /// Which functions others may compute on it: built-in names or
    /// `sha256:<hex>` of Bristol files, each with `@N` for the input value
    /// it may feed, or `any` ([`crate::grant`]). Empty: none.
    pub circuits: Vec<String>,
}

/// What the nodes answered to an upload or re-grant.
#[derive(Clone, Debug)]
pub struct Stored {
    /// The version the three nodes now hold.
    pub version: u64,
    /// The grant digest (hex) the three nodes bound to the record.
    pub grant: String,
}

/// `hush share`: replicated shares of one `bits.len()`-bit value, stored
/// under `name` at the three nodes with `acl`; the caller (its TLS
/// identity) becomes the owner.
pub fn share_input(nodes: &[String; 3], name: &str, bits: &[bool], acl: &Acl, opts: &ChannelOptions, link: &LinkConfig) -> Result<Stored> {
    let n = bits.len();
    if n == 0 {
        return Err(Error::Input("an empty input".into()));
    }
    let mut rng = crate::prf::Prg::from_os()?;
    let mut r = Zeroizing::new(vec![0u64; n.div_ceil(64) * 2]);
    rng.fill_words(&mut r);
    let bit = |w: &[u64], k: usize| (w[k / 64] >> (k % 64)) & 1 == 1;
    let (r0, r1) = r.split_at(n.div_ceil(64));
    let mut x: [Vec<bool>; 3] = [(0..n).map(|k| bit(r0, k)).collect(), (0..n).map(|k| bit(r1, k)).collect(), (0..n).map(|k| bit(r0, k) ^ bit(r1, k)).collect()];
    let upload = hex(&os_seed()?);
    let bodies: Vec<Zeroizing<Vec<u8>>> = (0..3)
        .map(|i| {
            let mut a: Vec<bool> = (0..n).map(|k| x[prev(i)][k] ^ bits[k]).collect();
            let meta = serde_json::json!({
                "name": name, "width": n, "users": acl.users, "recipients": acl.recipients, "circuits": acl.circuits, "upload": upload,
            });
            let (xb, ab) = (Zeroizing::new(bits_to_bytes(&x[i])), Zeroizing::new(bits_to_bytes(&a)));
            a.zeroize();
            Zeroizing::new(join_meta(&meta, &[&xb, &ab]))
        })
        .collect();
    for v in &mut x {
        v.zeroize();
    }
    store_at_nodes(nodes, name, acl, bodies, opts, link)
}

/// `hush share --regrant`: the owner replaces the access lists and
/// function grant of an input the nodes already hold, keeping its shares
/// (the way to give inputs stored before function grants a meaning again).
pub fn regrant_input(nodes: &[String; 3], name: &str, acl: &Acl, opts: &ChannelOptions, link: &LinkConfig) -> Result<Stored> {
    let meta = serde_json::json!({ "name": name, "regrant": true, "users": acl.users, "recipients": acl.recipients, "circuits": acl.circuits });
    let body = Zeroizing::new(join_meta(&meta, &[]));
    store_at_nodes(nodes, name, acl, vec![body.clone(), body.clone(), body], opts, link)
}

/// The two steps of `HSHR` toward the three nodes: send, hear the current
/// versions, send one above the highest, hear the results.
fn store_at_nodes(nodes: &[String; 3], name: &str, acl: &Acl, bodies: Vec<Zeroizing<Vec<u8>>>, opts: &ChannelOptions, link: &LinkConfig) -> Result<Stored> {
    check_name(name)?;
    if !link.is_tls() {
        return Err(Error::Input("stored inputs need TLS identities (not --insecure)".into()));
    }
    for f in acl.users.iter().chain(&acl.recipients) {
        if f != "any" {
            f.parse::<Fingerprint>().map_err(|e| Error::Input(format!("{f:?}: {e}")))?;
        }
    }
    crate::grant::parse_list(&acl.circuits)?;
    let mut chans = Vec::new();
    for i in 0..3 {
        chans.push(connect_node(nodes, i, opts, link)?);
    }
    for (ch, body) in chans.iter_mut().zip(&bodies) {
        let mut m = Zeroizing::new(b"HSHR".to_vec());
        m.extend_from_slice(body);
        ch.send(&m).map_err(Error::transport("share to a node"))?;
    }
    drop(bodies);
    let mut version = 0u64;
    let mut first_err = None;
    for (i, ch) in chans.iter_mut().enumerate() {
        match read_status(ch, i, "share") {
            Ok(b) => {
                let v: serde_json::Value = serde_json::from_slice(&b).map_err(|e| Error::protocol("share", e.to_string()))?;
                version = version.max(v.get("version").and_then(|x| x.as_u64()).unwrap_or(0));
            }
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    let version = version.checked_add(1).ok_or_else(|| Error::protocol("share", "version overflow"))?;
    for ch in chans.iter_mut() {
        ch.send(&version.to_le_bytes()).map_err(Error::transport("share version to a node"))?;
    }
    let mut grants = Vec::new();
    for (i, ch) in chans.iter_mut().enumerate() {
        match read_status(ch, i, "share") {
            Ok(b) => {
                let v: serde_json::Value = serde_json::from_slice(&b).map_err(|e| Error::protocol("share", e.to_string()))?;
                grants.push(v.get("grant").and_then(|x| x.as_str()).unwrap_or("").to_string());
            }
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    if grants.iter().any(|g| *g != grants[0]) {
        return Err(Error::protocol("share", "the three nodes bound different grant digests"));
    }
    Ok(Stored { version, grant: grants.swap_remove(0) })
}

/// What an output party fetched.
pub struct Fetched {
    pub job_id: u64,
    pub circuit: String,
    /// Widths of the output values.
    pub outputs: Vec<usize>,
    pub result: JobResult,
}

/// `hush fetch`: the output party collects the three shares of a job's
/// result and reconstructs it.
pub fn fetch_result(nodes: &[String; 3], job_id: u64, opts: &ChannelOptions, link: &LinkConfig) -> Result<Fetched> {
    let mut metas = Vec::new();
    let mut shares = Vec::new();
    for i in 0..3 {
        let mut ch = connect_node(nodes, i, opts, link)?;
        let mut m = b"HFET".to_vec();
        m.extend_from_slice(&job_id.to_le_bytes());
        ch.send(&m).map_err(Error::transport("fetch request"))?;
        let meta = read_status(&mut ch, i, "fetch")?;
        let v: serde_json::Value = serde_json::from_slice(&meta).map_err(|e| Error::protocol("fetch", e.to_string()))?;
        let u = |k: &str| v.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
        let len = (u("instances").div_ceil(64 * u("words").max(1)) * u("n_out") * u("words")) as usize;
        let mut w = vec![0u64; len];
        ch.recv_chunked_into("result share", words_as_bytes_mut(&mut w)).map_err(Error::transport("result share"))?;
        metas.push(v);
        shares.push(w);
    }
    let key = |v: &serde_json::Value| (v["job"].clone(), v["circuit"].clone(), v["outputs"].clone(), v["instances"].clone(), v["words"].clone(), v["n_out"].clone());
    if metas.iter().any(|m| key(m) != key(&metas[0])) {
        return Err(Error::protocol("fetch", "the three nodes describe the result differently"));
    }
    let m = &metas[0];
    let u = |k: &str| m.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
    let outputs = crate::share::reconstruct([&shares[0], &shares[1], &shares[2]]);
    Ok(Fetched {
        job_id,
        circuit: m["circuit"].as_str().unwrap_or("").to_string(),
        outputs: m["outputs"].as_array().map(|a| a.iter().filter_map(|x| x.as_u64().map(|x| x as usize)).collect()).unwrap_or_default(),
        result: JobResult {
            job_id,
            instances: u("instances"),
            words: u("words") as usize,
            n_out: u("n_out") as usize,
            outputs,
            stats: Vec::new(),
            wall_s: 0.0,
            client_cost: Cost::default(),
        },
    })
}

/// `hush job status` (`job_id` 0: all of the caller's jobs) and `hush job
/// cancel`: one JSON answer per node.
pub fn job_control(nodes: &[String; 3], job_id: u64, cancel: bool, opts: &ChannelOptions, link: &LinkConfig) -> Vec<Result<serde_json::Value>> {
    (0..3)
        .map(|i| {
            let mut ch = connect_node(nodes, i, opts, link)?;
            let mut m = if cancel { b"HCAN".to_vec() } else { b"HSTA".to_vec() };
            m.extend_from_slice(&job_id.to_le_bytes());
            ch.send(&m).map_err(Error::transport("job control request"))?;
            let r = read_status(&mut ch, i, "job control")?;
            if r.is_empty() {
                Ok(serde_json::json!({ "party": i, "cancelled": format!("{job_id:016x}") }))
            } else {
                serde_json::from_slice(&r).map_err(|e| Error::protocol("job control", e.to_string()))
            }
        })
        .collect()
}

/// The transport allocates a fresh buffer per received frame; with glibc's
/// default (dynamic) mmap threshold, frames of a few hundred KiB are mapped
/// and unmapped every round, and the page faults cost more kernel time than
/// the protocol itself. Keep such buffers on the heap instead.
///
/// And one malloc arena for the whole node. glibc gives threads their own
/// arenas (up to 8 per core); `malloc_trim(0)` releases the free chunks
/// inside every arena and shrinks the main arena's top, but not a
/// per-thread arena's top, which only shrinks when a large chunk is freed
/// while that top exceeds the trim threshold — never, at this threshold. So
/// under many concurrent jobs the idle node's resident size grew with every
/// arena that reached a new peak (+6–22 % from 100 to 1,000 jobs under 64
/// concurrent submitters, 16–20 MB of the idle node's ≈ 25 MB in per-thread
/// arenas). With the one (main) arena, the `malloc_trim(0)` when the node
/// goes idle gives everything free back. The node's allocations are few and
/// mostly large (frames, wire buffers; small ones go through the per-thread
/// caches), so the shared arena lock is rarely contended.
fn keep_heap_warm() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn mallopt(param: i32, value: i32) -> i32;
        }
        const M_TRIM_THRESHOLD: i32 = -1;
        const M_MMAP_THRESHOLD: i32 = -3;
        const M_ARENA_MAX: i32 = -8;

        // SAFETY: mallopt only adjusts allocator tuning parameters; it is
        // called before the node allocates its buffers.
        unsafe {
            mallopt(M_MMAP_THRESHOLD, 64 << 20);
            mallopt(M_TRIM_THRESHOLD, 256 << 20);
            mallopt(M_ARENA_MAX, 1);
        }
    }
}



#[cfg(test)]
mod tests {
    use super::*;

    fn job(name: &Arc<str>, done: &Arc<AtomicU64>) -> JobInfo {
        JobInfo {
            submitter: None,
            output_to: None,
            circuit: name.clone(),
            nchunks: 10,
            progress: Progress::Live { done: done.clone(), cancel: Arc::new(AtomicBool::new(false)) },
            state: JobState::Queued,
            started: Instant::now(),
        }
    }

    #[test]
    fn job_table_keeps_ended_jobs_compact_and_bounded() {
        let name: Arc<str> = Arc::from("adder64");
        let done = Arc::new(AtomicU64::new(0));
        let mut t = JobTable::default();
        t.insert(1, job(&name, &done));
        t.set_state(1, JobState::Running);
        assert!(matches!(t.get(1).unwrap().state, JobState::Running));
        done.store(7, Ordering::Relaxed);
        assert_eq!(t.get(1).unwrap().chunks_done(), 7);
        // ending a job freezes its progress and drops its shared counters
        t.set_state(1, JobState::Done);
        assert!(t.live.is_empty() && t.finished.len() == 1);
        done.store(9, Ordering::Relaxed);
        let j = t.get(1).unwrap();
        assert!(matches!(j.progress, Progress::Final(7)) && matches!(j.state, JobState::Done));
        assert_eq!(Arc::strong_count(&done), 1, "an ended job holds no counter");
        // a later state (e.g. a failure found afterwards) still lands
        t.set_state(1, JobState::Failed("late".into()));
        assert!(matches!(&t.get(1).unwrap().state, JobState::Failed(m) if m == "late"));
        // bounded: the oldest ended job is forgotten first; live ones stay
        t.insert(2, job(&name, &done));
        for id in 3..(MAX_FINISHED_JOBS as u64 + 10) {
            t.insert(id, job(&name, &done));
            t.set_state(id, JobState::Cancelled);
        }
        assert_eq!(t.finished.len(), MAX_FINISHED_JOBS);
        assert!(t.get(1).is_none() && !t.contains(3), "the oldest ended jobs are forgotten");
        assert!(t.contains(2) && t.contains(MAX_FINISHED_JOBS as u64 + 9));
        assert_eq!(t.iter().count(), MAX_FINISHED_JOBS + 1);
        assert_eq!(Arc::strong_count(&name), 1 + MAX_FINISHED_JOBS + 1, "records share the circuit's name");
    }
}
