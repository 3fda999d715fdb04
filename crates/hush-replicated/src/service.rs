//! The three-node service: compute parties (`hush node`) connected in a
//! ring over TCP, and a client (`hush job`) that plays data holder and
//! output party.
//!
//! ## Connections
//! Every connection to a node starts with a hello frame: `HUSH3`, a kind
//! byte (0 = ring peer, 1 = client) and the sender's party index. Party `i`
//! connects to party `i+1` and accepts party `i−1`; once both ring links
//! are up the pair of PRF keys is agreed ([`PartyKeys::setup`]) — once per
//! ring session, not per job.
//!
//! ## A job
//! 1. The client sends each node the job header: magic `HJOB`, job id,
//!    number of instances, chunk width in words, and the circuit (a built-in
//!    name or the full Bristol text).
//! 2. The nodes check over the ring that they run the same job (id,
//!    sizes, circuit digest, job sequence number); a mismatch fails the job.
//! 3. Per chunk of `64 × words` instances the client sends each node its
//!    input pairs `(x_i, a_i)`; the node evaluates ([`Evaluator`]) and
//!    answers with a status frame (`0`, or `1` + message) and its output
//!    halves `a_i`, which the client XORs (reconstruction, Fig. 1).
//! 4. The node closes with a statistics frame (JSON).
//!
//! A node that loses a peer or its client fails the job, tells the client
//! (if it still can), drops its ring links — so the other nodes fail fast
//! instead of waiting for a timeout — and re-establishes the ring for the
//! next job. It never exits because of a peer.

use crate::araki::PartyKeys;
use crate::bristol::Circuit;
use crate::engine::{recv_words, run_streams, send_words, Evaluator, Program, MAX_STREAMS};
use crate::error::{Error, Result};
use crate::prf::{os_seed, Prf};
use crate::share::{next, prev};
use hush_transport::{Channel, ChannelExt, ChannelOptions, Cost, Fingerprint, LinkConfig, LinkSecurity, TcpChannel};
use std::collections::VecDeque;
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const HELLO: &[u8; 5] = b"HUSH3";
const JOB_MAGIC: &[u8; 4] = b"HJOB";
/// Largest number of instances one job may ask for.
pub const MAX_INSTANCES: u64 = 1 << 34;
/// Largest chunk width (words per share half).
pub const MAX_CHUNK_WORDS: usize = 1 << 16;
/// Default chunk width: 4096 instances keep a party's live wires in L2.
pub const DEFAULT_CHUNK_WORDS: usize = 64;

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
}

enum Incoming {
    Peer { from: usize, ch: TcpChannel },
    Client(TcpChannel),
    /// A party waiting to rebuild the ring asks us to rebuild ours.
    Reset,
}

fn hello(kind: u8, party: usize) -> [u8; 7] {
    let mut h = [0u8; 7];
    h[..5].copy_from_slice(HELLO);
    h[5] = kind;
    h[6] = party as u8;
    h
}

/// Connects to `addr` (retrying while it is not up yet, until the
/// options' timeout), writes the hello preamble, then runs the link's
/// security (mode preamble, TLS handshake with `sec`'s pin) on the stream.
/// The hello is unauthenticated; the acceptor checks the claimed role
/// against the certificate the TLS handshake authenticated.
fn connect_with_hello(addr: &str, kind: u8, party: usize, opts: &ChannelOptions, sec: &LinkSecurity) -> std::io::Result<TcpChannel> {
    use std::io::{ErrorKind, Write};
    let deadline = Instant::now() + opts.timeout;
    let mut s = loop {
        match std::net::TcpStream::connect(addr) {
            Ok(s) => break s,
            Err(e)
                if Instant::now() < deadline
                    && matches!(e.kind(), ErrorKind::ConnectionRefused | ErrorKind::ConnectionReset | ErrorKind::TimedOut) =>
            {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => return Err(e),
        }
    };
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
    if &h[..5] != HELLO || h[5] > 2 || h[6] > 2 {
        return Err(std::io::Error::other("not a hush 3PC peer or client"));
    }
    Ok((h[5], h[6] as usize))
}

struct Ring {
    to_next: TcpChannel,
    from_prev: TcpChannel,
    keys: PartyKeys,
    jobs: u64,
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
    let listener = TcpListener::bind(&cfg.listen).map_err(|e| Error::Local(format!("cannot listen on {}: {e}", cfg.listen)))?;
    let (tx, rx) = mpsc::channel::<Incoming>();
    let copts = cfg.client.clone();
    let ropts = cfg.ring.clone();
    // Every caller presents a certificate (job submitters an ephemeral one);
    // a caller claiming to be a ring peer must present that peer's pin.
    let sec = cfg.link.accept_any_authenticated();
    let peer_pins: [Option<Fingerprint>; 3] = std::array::from_fn(|j| if j == cfg.party { None } else { cfg.link.pins().for_addr(&cfg.peers[j]) });
    let tls = cfg.link.is_tls();
    let me = cfg.party;
    std::thread::Builder::new()
        .name("hush3-accept".into())
        .spawn(move || {
            for s in listener.incoming() {
                let Ok(mut s) = s else { continue };
                let tx = tx.clone();
                let (copts, ropts, sec) = (copts.clone(), ropts.clone(), sec.clone());
                std::thread::spawn(move || {
                    let from_addr = s.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
                    let Ok((kind, from)) = read_hello(&mut s) else { return };
                    let opts = if kind == 1 { copts } else { ropts };
                    let ch = match TcpChannel::from_accepted(s, opts, &sec) {
                        Ok(c) => c,
                        Err(e) => {
                            eprintln!("hush node {me}: refused a connection from {from_addr}: {e}");
                            return;
                        }
                    };
                    if kind != 1 && tls {
                        let got = ch.peer_fingerprint();
                        if got.is_none() || got != peer_pins[from] {
                            let got = got.map(|f| f.to_string()).unwrap_or_else(|| "no certificate".into());
                            let want = peer_pins[from].map(|f| f.to_string()).unwrap_or_else(|| "nothing (no pin)".into());
                            eprintln!(
                                "hush node {me}: refused a ring connection from {from_addr} claiming to be party {from}: it presented {got}, party {from} is pinned to {want}"
                            );
                            return;
                        }
                    }
                    let msg = match kind {
                        0 => Incoming::Peer { from, ch },
                        2 => Incoming::Reset,
                        _ => Incoming::Client(ch),
                    };
                    let _ = tx.send(msg);
                });
            }
        })
        .map_err(|e| Error::Local(e.to_string()))?;
    node_loop(cfg, rx)
}

fn node_loop(cfg: NodeConfig, rx: mpsc::Receiver<Incoming>) -> Result<()> {
    let mut ring: Option<Ring> = None;
    let mut pending_prev: Option<TcpChannel> = None;
    let mut clients: VecDeque<TcpChannel> = VecDeque::new();
    let mut jobs = 0u64;
    let mut program_cache: Option<(u64, Program, Circuit)> = None;
    loop {
        if cfg.max_jobs.is_some_and(|m| jobs >= m) {
            return Ok(());
        }
        if ring.is_none() {
            match establish_ring(&cfg, &rx, &mut pending_prev, &mut clients) {
                Ok(r) => ring = Some(r),
                Err(e) => {
                    if cfg.verbose {
                        eprintln!("hush node {}: ring not ready: {e}", cfg.party);
                    }
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
            }
        }
        let client = match clients.pop_front() {
            Some(c) => c,
            None => match rx.recv() {
                Ok(Incoming::Client(c)) => c,
                Ok(Incoming::Reset) => {
                    ring = None;
                    continue;
                }
                Ok(Incoming::Peer { from, ch }) => {
                    if from == prev(cfg.party) {
                        // The previous party rebuilt its ring: ours is stale.
                        ring = None;
                        pending_prev = Some(ch);
                    }
                    continue;
                }
                Err(_) => return Err(Error::Local("listener stopped".into())),
            },
        };
        jobs += 1;
        let mut client = client;
        let r = ring.as_mut().expect("ring established above");
        let t0 = Instant::now();
        match serve_job(&cfg, r, &mut client, &mut program_cache) {
            Ok(stats) => {
                r.jobs += 1;
                if cfg.verbose {
                    eprintln!(
                        "hush node {}: job done in {:.3}s ({} chunks, {} bytes to next)",
                        cfg.party,
                        t0.elapsed().as_secs_f64(),
                        stats.chunks,
                        stats.ring_bytes_sent
                    );
                }
            }
            Err(e) => {
                eprintln!("hush node {}: job failed: {e}", cfg.party);
                let mut m = vec![1u8];
                m.extend_from_slice(format!("party {}: {e}", cfg.party).as_bytes());
                let _ = client.send(&m);
                // Drop the ring so the other parties fail fast; rebuild it
                // before the next job.
                ring = None;
            }
        }
    }
}

fn establish_ring(
    cfg: &NodeConfig,
    rx: &mpsc::Receiver<Incoming>,
    pending_prev: &mut Option<TcpChannel>,
    clients: &mut VecDeque<TcpChannel>,
) -> Result<Ring> {
    let i = cfg.party;
    let sec_next = cfg.link.to_peer(&cfg.peers[next(i)]).map_err(|e| Error::Input(e.to_string()))?;
    let mut to_next = connect_with_hello(&cfg.peers[next(i)], 0, i, &cfg.ring, &sec_next)
        .map_err(|e| Error::protocol("ring setup", format!("connect to the next party at {}: {e}", cfg.peers[next(i)])))?;
    let mut from_prev = match pending_prev.take() {
        Some(c) => c,
        None => {
            let deadline = Instant::now() + cfg.ring.timeout;
            let mut next_reset = Instant::now() + Duration::from_secs(1);
            loop {
                match rx.recv_timeout(Duration::from_millis(200)) {
                    Ok(Incoming::Peer { from, ch }) if from == prev(i) => break ch,
                    Ok(Incoming::Peer { .. }) | Ok(Incoming::Reset) => continue,
                    Ok(Incoming::Client(c)) => clients.push_back(c),
                    Err(mpsc::RecvTimeoutError::Disconnected) => return Err(Error::Local("listener stopped".into())),
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                }
                let now = Instant::now();
                if now >= deadline {
                    return Err(Error::protocol("ring setup", "the previous party did not connect in time"));
                }
                if now >= next_reset {
                    // The previous party may sit idle on a stale ring: ask it
                    // to rebuild (best effort).
                    let quick = ChannelOptions { timeout: Duration::from_millis(500), ..cfg.ring.clone() };
                    if let Ok(sec) = cfg.link.to_peer(&cfg.peers[prev(i)]) {
                        let _ = connect_with_hello(&cfg.peers[prev(i)], 2, i, &quick, &sec);
                    }
                    next_reset = now + Duration::from_secs(3);
                }
            }
        }
    };
    // Take the newest connection of the previous party if several queued.
    while let Ok(m) = rx.try_recv() {
        match m {
            Incoming::Peer { from, ch } if from == prev(i) => from_prev = ch,
            Incoming::Peer { .. } | Incoming::Reset => {}
            Incoming::Client(c) => clients.push_back(c),
        }
    }
    let keys = PartyKeys::setup(i, os_seed()?, &mut to_next, &mut from_prev)?;
    Ok(Ring { to_next, from_prev, keys, jobs: 0 })
}

/// FNV-1a, for the cross-check of circuit texts between nodes.
fn digest(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

struct JobHeader {
    job_id: u64,
    instances: u64,
    words: usize,
    streams: usize,
    circuit: CircuitSpec,
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

fn encode_header(h: &JobHeader) -> Vec<u8> {
    let mut m = JOB_MAGIC.to_vec();
    m.extend_from_slice(&h.job_id.to_le_bytes());
    m.extend_from_slice(&h.instances.to_le_bytes());
    m.extend_from_slice(&(h.words as u32).to_le_bytes());
    m.push(h.streams as u8);
    match &h.circuit {
        CircuitSpec::Builtin(n) => {
            m.push(0);
            m.extend_from_slice(n.as_bytes());
        }
        CircuitSpec::Text(t) => {
            m.push(1);
            m.extend_from_slice(t.as_bytes());
        }
    }
    m
}

fn decode_header(m: &[u8]) -> Result<JobHeader> {
    const STEP: &str = "job header";
    if m.len() < 26 || &m[..4] != JOB_MAGIC {
        return Err(Error::protocol(STEP, "not a job header"));
    }
    let job_id = u64::from_le_bytes(m[4..12].try_into().unwrap());
    let instances = u64::from_le_bytes(m[12..20].try_into().unwrap());
    let words = u32::from_le_bytes(m[20..24].try_into().unwrap()) as usize;
    if instances == 0 || instances > MAX_INSTANCES {
        return Err(Error::protocol(STEP, format!("{instances} instances (allowed 1..={MAX_INSTANCES})")));
    }
    if words == 0 || words > MAX_CHUNK_WORDS {
        return Err(Error::protocol(STEP, format!("chunk of {words} words (allowed 1..={MAX_CHUNK_WORDS})")));
    }
    let streams = m[24] as usize;
    if streams == 0 || streams > MAX_STREAMS {
        return Err(Error::protocol(STEP, format!("{streams} streams (allowed 1..={MAX_STREAMS})")));
    }
    let text = std::str::from_utf8(&m[26..]).map_err(|_| Error::protocol(STEP, "circuit is not UTF-8"))?;
    let circuit = match m[25] {
        0 => CircuitSpec::Builtin(text.to_string()),
        1 => CircuitSpec::Text(text.to_string()),
        k => return Err(Error::protocol(STEP, format!("unknown circuit kind {k}"))),
    };
    Ok(JobHeader { job_id, instances, words, streams, circuit })
}

fn serve_job(cfg: &NodeConfig, ring: &mut Ring, client: &mut TcpChannel, cache: &mut Option<(u64, Program, Circuit)>) -> Result<NodeStats> {
    let c0 = client.cost();
    let hdr_bytes = client.recv().map_err(Error::transport("job header"))?;
    let hdr = decode_header(&hdr_bytes)?;
    let cdigest = digest(&hdr_bytes[25..]);
    if cache.as_ref().map(|c| c.0) != Some(cdigest) {
        let c = hdr.circuit.circuit()?;
        let p = Program::compile(&c);
        *cache = Some((cdigest, p, c));
    }
    let (_, prog, _) = cache.as_ref().expect("filled above");
    // Same job everywhere? (id, sizes, circuit, position in the session)
    let mut check = Vec::with_capacity(48);
    for v in [hdr.job_id, hdr.instances, hdr.words as u64, hdr.streams as u64, cdigest, ring.jobs] {
        check.extend_from_slice(&v.to_le_bytes());
    }
    ring.to_next.send(&check).map_err(Error::transport("job check (send to the next party)"))?;
    let theirs = ring
        .from_prev
        .recv_exact("job check (from the previous party)", check.len())
        .map_err(Error::transport("job check (receive from the previous party)"))?;
    if theirs != check {
        return Err(Error::protocol("job check", "the previous party runs a different job (concurrent clients?)"));
    }
    let words = hdr.words;
    let chunk_inst = 64 * words as u64;
    let nchunks = hdr.instances.div_ceil(chunk_inst);
    let k = hdr.streams.min(nchunks as usize).max(1);
    let mut evs = (0..k).map(|_| Evaluator::new(prog, words)).collect::<Result<Vec<_>>>()?;
    let r0 = ring.to_next.cost() + ring.from_prev.cost();
    let t = Instant::now();
    let Ring { to_next, from_prev, keys, jobs } = ring;
    let client_cell = std::cell::RefCell::new(&mut *client);
    run_streams(
        &mut evs,
        keys,
        *jobs,
        nchunks,
        |_, buf| recv_words(*client_cell.borrow_mut(), "input shares", buf).map_err(Error::transport("input shares from the client")),
        |_, out| {
            let mut cl = client_cell.borrow_mut();
            cl.send(&[0]).map_err(Error::transport("output status to the client"))?;
            let mut o = out.to_vec();
            send_words(*cl, &mut o).map_err(Error::transport("output shares to the client"))
        },
        to_next,
        from_prev,
    )?;
    let eval_s = t.elapsed().as_secs_f64();
    let rounds: u64 = evs.iter().map(|e| e.rounds()).sum();
    let r1 = ring.to_next.cost() + ring.from_prev.cost();
    let c1 = client.cost();
    let d: Cost = r1 - r0;
    let stats = NodeStats {
        party: cfg.party,
        ring_bytes_sent: d.bytes_sent,
        ring_bytes_recv: d.bytes_recv,
        client_bytes_recv: (c1 - c0).bytes_recv,
        client_bytes_sent: (c1 - c0).bytes_sent,
        rounds: rounds + 1,
        chunks: nchunks,
        eval_s,
        socket_bytes: d.socket_bytes_sent + (c1 - c0).socket_bytes_recv + (c1 - c0).socket_bytes_sent,
    };
    client.send(&[2]).map_err(Error::transport("statistics to the client"))?;
    client.send(stats.to_json().as_bytes()).map_err(Error::transport("statistics to the client"))?;
    Ok(stats)
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
    pub instances: u64,
    pub words: usize,
    pub n_out: usize,
    /// Reconstructed outputs, chunk by chunk, each `n_out × words` words.
    pub outputs: Vec<u64>,
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

/// The client's view of a job: shares inputs toward the three nodes,
/// collects and reconstructs the outputs.
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
    if streams == 0 || streams > MAX_STREAMS {
        return Err(Error::Input(format!("{streams} streams (allowed 1..={MAX_STREAMS})")));
    }
    let c = circuit.circuit()?;
    if instances == 0 || instances > MAX_INSTANCES || words == 0 || words > MAX_CHUNK_WORDS {
        return Err(Error::Input("instances or chunk width out of range".into()));
    }
    if let Inputs::Fixed(b) = inputs {
        if b.len() != c.num_input_wires() {
            return Err(Error::Input(format!("{} input bits for a circuit with {} input wires", b.len(), c.num_input_wires())));
        }
    }
    let n_in = c.num_input_wires();
    let n_out = c.num_output_wires();
    let mut seeds = [[0u8; 16]; 2];
    for s in &mut seeds {
        *s = os_seed()?;
    }
    let job_id = u64::from_le_bytes(os_seed()?[..8].try_into().unwrap());
    let header = encode_header(&JobHeader { job_id, instances, words, streams, circuit: circuit.clone() });
    let nchunks = instances.div_ceil(64 * words as u64);
    // Connect to all three first, so a missing node fails before any work.
    let mut chans = Vec::with_capacity(3);
    for (i, addr) in nodes.iter().enumerate() {
        let sec = link.to_peer(addr).map_err(|e| Error::Input(e.to_string()))?;
        let ch = connect_with_hello(addr, 1, i, opts, &sec).map_err(|e| Error::Protocol {
            step: "connect to a node",
            msg: format!("party {i} at {addr}: {e}"),
        })?;
        chans.push(ch);
    }
    let t0 = Instant::now();
    let results: Vec<Result<(Vec<u64>, NodeStats, Cost)>> = std::thread::scope(|sc| {
        let hs: Vec<_> = chans
            .into_iter()
            .enumerate()
            .map(|(i, mut ch)| {
                let header = &header;
                sc.spawn(move || client_party(i, &mut ch, header, n_in, n_out, words, nchunks, streams, &seeds, inputs))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(Error::Local("client thread panicked".into())))).collect()
    });
    let wall_s = t0.elapsed().as_secs_f64();
    let mut shares = Vec::new();
    let mut stats = Vec::new();
    let mut client_cost = Cost::default();
    let mut first_err = None;
    for r in results {
        match r {
            Ok((o, s, c)) => {
                shares.push(o);
                stats.push(s);
                client_cost = client_cost + c;
            }
            Err(e) => {
                // Prefer a node's own report over a follow-on disconnect.
                let is_report = matches!(e, Error::Protocol { step: "node reported", .. });
                if first_err.is_none() || is_report {
                    first_err = Some(e);
                }
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    let outputs = crate::share::reconstruct([&shares[0], &shares[1], &shares[2]]);
    Ok(JobResult { instances, words, n_out, outputs, stats, wall_s, client_cost })
}

#[allow(clippy::too_many_arguments)]
fn client_party(
    i: usize,
    ch: &mut TcpChannel,
    header: &[u8],
    n_in: usize,
    n_out: usize,
    words: usize,
    nchunks: u64,
    streams: usize,
    seeds: &[[u8; 16]; 2],
    inputs: &Inputs,
) -> Result<(Vec<u64>, NodeStats, Cost)> {
    ch.send(header).map_err(Error::transport("job header to a node"))?;
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
    let mut outputs = vec![0u64; nchunks as usize * n_out * words];
    let window = streams as u64 + 1;
    let mut sent = 0u64;
    while sent < nchunks.min(window) {
        build(sent, &mut msg);
        send_words(ch, &mut msg).map_err(Error::transport("input shares to a node"))?;
        sent += 1;
    }
    for c in 0..nchunks {
        let st = ch.recv().map_err(|e| Error::Protocol { step: "node reported", msg: format!("party {i}: connection lost ({e})") })?;
        match st.first() {
            Some(0) if st.len() == 1 => {}
            Some(1) => return Err(Error::Protocol { step: "node reported", msg: String::from_utf8_lossy(&st[1..]).into_owned() }),
            _ => return Err(Error::protocol("output status", format!("party {i}: unexpected frame of {} bytes", st.len()))),
        }
        let o = &mut outputs[c as usize * n_out * words..][..n_out * words];
        recv_words(ch, "output shares", o).map_err(Error::transport("output shares from a node"))?;
        if sent < nchunks {
            build(sent, &mut msg);
            send_words(ch, &mut msg).map_err(Error::transport("input shares to a node"))?;
            sent += 1;
        }
    }
    let st = ch.recv().map_err(Error::transport("statistics from a node"))?;
    if st.first() != Some(&2) {
        return Err(Error::protocol("statistics", "unexpected frame"));
    }
    let js = ch.recv().map_err(Error::transport("statistics from a node"))?;
    let stats = NodeStats::from_json(&js)?;
    Ok((outputs, stats, ch.cost()))
}

/// The transport allocates a fresh buffer per received frame; with glibc's
/// default (dynamic) mmap threshold, frames of a few hundred KiB are mapped
/// and unmapped every round, and the page faults cost more kernel time than
/// the protocol itself. Keep such buffers on the heap instead.
fn keep_heap_warm() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn mallopt(param: i32, value: i32) -> i32;
        }
        const M_TRIM_THRESHOLD: i32 = -1;
        const M_MMAP_THRESHOLD: i32 = -3;
        // SAFETY: mallopt only adjusts allocator tuning parameters; it is
        // called before the node allocates its buffers.
        unsafe {
            mallopt(M_MMAP_THRESHOLD, 64 << 20);
            mallopt(M_TRIM_THRESHOLD, 256 << 20);
        }
    }
}
