//! Dealer mode: the module's code as a service on a third host
//! (`hush dealer --listen ADDR`), the trusted-third-party model of CrypTen
//! and SPU. VISION.md "Trust modes", row `dealer`.
//!
//! ## What runs where
//! * [`serve`] runs the service. For each *session* it makes a fresh
//!   32-byte seed from OS randomness and hosts one [`Module`] per role
//!   ([`Module::with_session_seed`]) serving the same dealing kinds
//!   ([`DealerConfig::kinds`]): the same code, descriptions and checks as a
//!   party's own module in tee mode, so the dealer deals exactly what the
//!   two modules deal in tee mode, and the online protocol does not change.
//! * [`DealerModule`] is the parties' backend: a third [`TrustedModule`]
//!   whose crossings are requests over a TLS 1.3 connection to the dealer
//!   (pinned by its fingerprint, which `hush dealer` prints at start).
//!
//! ## Sessions
//! The two parties agree a fresh random [`SessionId`] over their own TLS
//! link (the server makes it and sends it in its hello reply). Then:
//! 1. the **server** (party 0, [`ModuleRole::Sender`]) connects and
//!    *opens* the session — before it tells the client the id; opening an
//!    id that exists is refused;
//! 2. the **client** (party 1, [`ModuleRole::Receiver`]) connects and
//!    *joins* it; joining an unknown session, or a session whose receiver
//!    is already claimed, is refused;
//! 3. each connection is bound to the one (session, role) it claimed: its
//!    requests only ever reach that role's module, which releases only that
//!    role's shares (asking for the other role's shares is refused by the
//!    module exactly as in tee mode);
//! 4. when a connection ends (closed, broken, or silent beyond the idle
//!    timeout) its module is dropped — the seed and all per-batch state are
//!    zeroized — and when both have ended the session's seed is dropped
//!    from the table. The dealer keeps nothing after a session.
//!
//! ## Admission (what one party can make the dealer hold)
//! Issue 33: with paired dealing (`Paired`, below) the first role to ask for a
//! batch makes the dealer compute both shares and keep the other role's,
//! so a client alone could ask far ahead and make the dealer hold the
//! server's shares (GiBs per session). Now:
//! * per session, the shares held for one role (computed on the other's
//!   request, unclaimed) are bounded by [`DealerConfig::session_mem`]
//!   (`hush dealer --session-mem`, default [`DEFAULT_SESSION_MEM`]); a
//!   request that would add to them beyond it is held without computing
//!   until the peer claims shares, and refused after
//!   [`DealerConfig::ahead_wait`] with an error naming the budget
//!   (`Paired::admit_ahead`); held bytes stay below the budget plus
//!   two batches (computations under way). Dealing plans keep their own budget
//!   ([`DealerConfig::plan_mem`]).
//! * sessions opened from one source address are capped
//!   ([`DealerConfig::max_sessions_per_addr`]; the server side caps its
//!   clients' sessions per address too: `hush serve --max-sessions-per-addr`);
//! * a party can [`probe`] the dealer (a server does at start) without
//!   opening a session.
//!
//! Honest sessions are unaffected: the roles ask for the same batches in
//! the same order, so a role only waits when it is more than the budget
//! ahead of a peer that is not asking.
//!
//! ## Why a third party cannot get a session's correlations
//! A session's shares are only released to the connection that claimed the
//! role. The server claims the sender role *before* the id leaves the
//! server, so nobody can claim it first. The id is 256 random bits sent only
//! over the parties' TLS link (pinned server), so a third party cannot
//! guess it to claim the receiver role before the client; and if anyone
//! (even a malicious server, who knows the id) claims the receiver role
//! first, the client's own join is refused and the client aborts before its
//! input is used — first-come role binding turns a stolen role into a clean
//! failure, never into a silent leak. The parties' links to the dealer are
//! TLS with the dealer pinned, so a network attacker can neither read the
//! shares nor impersonate the dealer.
//!
//! ## What the dealer can do
//! Everything, if it is malicious or colludes: it makes the seed, so it
//! knows both parties' shares of every correlation, and for module-dealt
//! linear layers it holds the server's weights (as the server's own module
//! does in tee mode). With the server it learns the client's input; with the
//! client it learns the model. The trust assumption is that it colludes
//! with neither party. It never sees online messages (masked activations,
//! the parties' shares of activations, the output).

//! ## Attestation (`hush dealer --attest`, a party's `--dealer-attest POLICY`)
//! A dealer in a confidential VM (AMD SEV-SNP, Intel TDX) can prove what
//! it is. The exchange is the first thing on a connection, right after
//! the TLS handshake and before the join (so before any session, seed or
//! correlation exists on it):
//! 1. the party sends [`ATTEST`] ‖ a fresh 32-byte nonce from OS randomness;
//! 2. the dealer asks its evidence source ([`DealerConfig::attest`]) for a
//!    report whose REPORT_DATA is `SHA-512(SPKI ‖ nonce)`, SPKI being the
//!    SubjectPublicKeyInfo of **its own TLS certificate on this
//!    connection**, and sends it as its first message ([`ATTEST_OK`] ‖
//!    evidence; [`ATTEST_NONE`] ‖ reason when it has none);
//! 3. the party reads it with a frame cap of [`DealerCheck::max_evidence`]
//!    (checked before the body is allocated), and its check
//!    ([`DealerCheck::verify`]) verifies the evidence against its policy,
//!    its nonce, and the SPKI of the certificate **this TLS session was
//!    authenticated with**. Any failure ends the connection with
//!    [`Error::DealerAttestation`] naming the failed leg; the join is never
//!    sent, so no correlation from that dealer is ever used.
//!
//! **Why the evidence cannot be replayed on another key.** The hardware
//! signs REPORT_DATA; the party recomputes it from the certificate of its
//! own TLS session, and TLS 1.3 makes the server prove possession of that
//! certificate's private key by signing the handshake transcript
//! (CertificateVerify), which includes both parties' fresh randoms. So an
//! attacker who relays a genuine dealer's evidence (fetched with the
//! party's nonce on a connection of its own) to a connection where it
//! presents *its* certificate fails the binding leg (another SPKI); if it
//! presents the genuine dealer's certificate instead, it cannot complete
//! the handshake without that private key. Old evidence fails the
//! freshness leg (the nonce is new per connection). What remains is the
//! premise the report itself vouches for: the measured dealer never lets
//! its private key out. That holds only if the key is made inside the VM —
//! `hush dealer --attest` refuses `--identity` (a key read from a disk the
//! host may have seen) and uses a fresh in-memory identity. This is the
//! RA-TLS construction (Knauth et al., "Integrating Remote Attestation with
//! Transport Layer Security", 2018) with the report in a first message
//! bound to the key instead of in a certificate extension.

use crate::backend::MAX_MODULE_FRAME;
use crate::module::{Module, ModuleRole, Request, Response};
use crate::{Error, Result, TrustedModule};
use crate::backend::ModuleStats;
use hush_primitives::Prg;
use hush_transport::{Channel, ChannelOptions, Fingerprint, LinkSecurity, TcpChannel};
use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use zeroize::{Zeroize, Zeroizing};

/// A session's id: 256 random bits made by the server, shared only with
/// its client over their TLS link.
pub type SessionId = [u8; 32];

/// First bytes of a party's join message.
const MAGIC: &[u8] = b"hush-dealer v1";
/// A party's probe ([`probe`]): answered with `Established`, opens nothing.
const PROBE: &[u8] = b"hush-dealer probe v1";
/// A party's attestation request: this, then a 32-byte nonce.
pub const ATTEST: &[u8] = b"hush-dealer attest v1";
/// First byte of the dealer's answer: evidence follows.
pub const ATTEST_OK: u8 = 0;
/// First byte of the dealer's answer: no evidence; UTF-8 reason follows.
pub const ATTEST_NONE: u8 = 1;
/// Size of the verifier's nonce.
pub const NONCE_LEN: usize = 32;
/// How long a party waits for the dealer's evidence (a TDX quote may take
/// the quoting enclave a few seconds).
pub const ATTEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The dealer's evidence source (`hush dealer --attest`): given the
/// dealer's own TLS certificate (DER) and a party's nonce, the encoded
/// evidence whose REPORT_DATA binds the certificate's public key and the
/// nonce (see "Attestation" above), or why none could be made.
pub type EvidenceFn = Arc<dyn Fn(&[u8], &[u8; NONCE_LEN]) -> std::result::Result<Vec<u8>, String> + Send + Sync>;

/// A party's check of its dealer's evidence (`--dealer-attest POLICY`).
#[derive(Clone)]
pub struct DealerCheck {
    /// Largest evidence accepted (the frame cap while it is read).
    pub max_evidence: usize,
    /// Given the evidence bytes, the nonce this party sent, and the
    /// dealer's certificate (DER) from this TLS session: `Ok(summary)` to
    /// accept, `Err(reason naming the failed leg)` to refuse.
    pub verify: Arc<dyn Fn(&[u8], &[u8; NONCE_LEN], &[u8]) -> std::result::Result<String, String> + Send + Sync>,
}

impl std::fmt::Debug for DealerCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DealerCheck(max_evidence {})", self.max_evidence)
    }
}

/// How long the dealer waits for a connection's join message.
pub const JOIN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a session's connection may stay silent before the dealer ends it.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// Default bound on the sessions a dealer holds at once.
pub const DEFAULT_MAX_SESSIONS: usize = 1024;
/// Default [`DealerConfig::plan_mem`]: 1 GiB per session.
pub const DEFAULT_PLAN_MEM: u64 = 1 << 30;

/// Default bound on connections in their set-up ([`DealerConfig::max_pending`]).
pub const DEFAULT_MAX_PENDING: usize = 256;

/// Default [`DealerConfig::session_mem`]: the cap, 1 GiB, on the shares
/// one role may hold dealt-but-unclaimed for the other. A session's own
/// budget is what its server announces in its join, sized from its model:
/// an honest party runs ahead of its peer by at most its pre-dealing
/// budget plus one step's dealing (`hush_inference::runtime` announces
/// twice that plus slack), clamped to [[`MIN_SESSION_MEM`], the cap]. A
/// server that announces nothing gets the cap. Only the server's join may
/// carry it, so a client cannot raise its own allowance.
pub const DEFAULT_SESSION_MEM: u64 = 1 << 30;
/// The smallest announced session budget honoured.
pub const MIN_SESSION_MEM: u64 = 1 << 20;
/// Default [`DealerConfig::ahead_wait`].
pub const DEFAULT_AHEAD_WAIT: Duration = Duration::from_secs(60);
/// Default [`DealerConfig::max_sessions_per_addr`].
pub const DEFAULT_MAX_SESSIONS_PER_ADDR: usize = 256;
/// Computations one role may have under way for the other at once (the
/// seeded path answers at once and computes the peer's share on a helper
/// thread: without this bound a request stream could start many before
/// any of them is counted against the budget).
const MAX_INFLIGHT: usize = 2;

/// A fresh random session id (OS randomness).
pub fn new_session_id() -> SessionId {
    let mut id = [0u8; 32];
    Prg::from_os().fill_bytes(&mut id);
    id
}

/// Lower-case hex of a session id (carried in the parties' hello).
pub fn session_hex(id: &SessionId) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses [`session_hex`].
pub fn parse_session_hex(s: &str) -> Result<SessionId> {
    if s.len() != 64 || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Err(Error::Malformed("dealer session id: expected 64 hex digits".into()));
    }
    let mut id = [0u8; 32];
    for (i, b) in id.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| Error::Malformed("dealer session id".into()))?;
    }
    Ok(id)
}

/// How long a party keeps retrying to reach a dealer that does not listen
/// (it may still be starting); then the session fails naming the dealer.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Channel options of dealer links: frames as large as a module message.
pub fn channel_options() -> ChannelOptions {
    ChannelOptions { max_frame: MAX_MODULE_FRAME + 64, connect_timeout: CONNECT_TIMEOUT, ..Default::default() }
}

/// The dealer service's settings.
#[derive(Clone)]
pub struct DealerConfig {
    /// TLS with the dealer's identity (clients anonymous), or plaintext.
    pub link: LinkSecurity,
    /// The dealing kinds served (e.g. `hush_2pc::deal::kinds()`), besides
    /// the module's own stateful kinds (SilentFlow, linear layers).
    pub kinds: crate::deal::Kinds,
    /// A connection silent this long is ended (and its module erased).
    pub idle_timeout: Duration,
    /// Most sessions held at once; opening one more is refused.
    pub max_sessions: usize,
    /// Bytes of shares one session's dealing plan may hold computed ahead
    /// at the dealer (see "Dealing plans" on `Paired`); 0 turns plans
    /// off (a plan is then acknowledged with nothing computed).
    pub plan_mem: u64,
    /// Most connections in their set-up (greeting, TLS handshake, join);
    /// beyond it a new connection is closed at once and logged.
    pub max_pending: usize,
    /// Resident-memory cap (bytes): opening a session is refused while
    /// the dealer's resident memory is at it (`None`: no cap).
    pub max_mem: Option<u64>,
    /// **Admission of requests ahead of the peer** (`--session-mem`):
    /// bytes of shares the dealer holds for one role of a session,
    /// computed on the other role's request and not yet claimed (dealing
    /// plans have their own budget, [`DealerConfig::plan_mem`]). A request
    /// that would compute more for the peer while this much is held is
    /// *held without computing* until the peer claims shares, and refused
    /// with an error after [`DealerConfig::ahead_wait`]. Held bytes stay
    /// below this plus two batches (computations under way).
    pub session_mem: u64,
    /// How long a request ahead of the budget waits for the peer.
    pub ahead_wait: Duration,
    /// Most sessions opened from one source address at once (the sender's
    /// IP; more are refused).
    pub max_sessions_per_addr: usize,
    /// **INSECURE, tests only**: every session gets this seed instead of
    /// a fresh random one, so that outputs can be compared bit for bit
    /// with other providers. No `hush` command sets it.
    pub insecure_test_seed: Option<[u8; 32]>,
    /// Evidence for parties that ask ([`ATTEST`]); `None`: a party that
    /// asks is told this dealer has none (and refuses it).
    pub attest: Option<EvidenceFn>,
}

impl DealerConfig {
    pub fn new(link: LinkSecurity, kinds: crate::deal::Kinds) -> Self {
        DealerConfig {
            link,
            kinds,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_sessions: DEFAULT_MAX_SESSIONS,
            plan_mem: DEFAULT_PLAN_MEM,
            max_pending: DEFAULT_MAX_PENDING,
            max_mem: None,
            session_mem: DEFAULT_SESSION_MEM,
            ahead_wait: DEFAULT_AHEAD_WAIT,
            max_sessions_per_addr: DEFAULT_MAX_SESSIONS_PER_ADDR,
            insecure_test_seed: None,
            attest: None,
        }
    }
}

/// One session's entry: its seed until both roles' connections are gone.
struct Slot {
    seed: Zeroizing<[u8; 32]>,
    receiver_claimed: bool,
    live_connections: u8,
    /// Batches one role's request computed for the other (see [`Paired`]).
    paired: Arc<Paired>,
    /// The sender's source address ([`DealerConfig::max_sessions_per_addr`]).
    source: Option<std::net::IpAddr>,
}

#[derive(Default)]
struct Table {
    sessions: HashMap<SessionId, Slot>,
}

/// A running dealer service.
pub struct DealerHandle {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    table: Arc<Mutex<Table>>,
    conns: Arc<Mutex<Vec<(u64, TcpStream)>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl DealerHandle {
    /// Sessions with at least one live connection (0 once every session has ended).
    pub fn live_sessions(&self) -> usize {
        self.table.lock().map(|t| t.sessions.len()).unwrap_or(0)
    }

    /// Stops accepting and waits for the accept loop; running sessions
    /// finish on their own.
    pub fn shutdown(mut self) {
        self.stop_accepting();
    }

    /// The dealer disappears: stops accepting and breaks every live
    /// connection at once (tests of a dealer that dies mid-session).
    pub fn kill(mut self) {
        self.stop_accepting();
        if let Ok(c) = self.conns.lock() {
            for (_, s) in c.iter() {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        }
    }

    /// Blocks until the accept loop ends (never, unless it fails).
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    fn stop_accepting(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts the dealer service on `addr`; each connection runs on its own
/// thread. `log` gets one line per session event (never a secret).
pub fn serve(addr: &str, cfg: DealerConfig, log: Arc<dyn Fn(String) + Send + Sync>) -> Result<DealerHandle> {
    let listener = TcpListener::bind(addr).map_err(|e| Error::Process(format!("dealer: listen on {addr}: {e}")))?;
    let local = listener.local_addr().map_err(|e| Error::Process(e.to_string()))?;
    let stop = Arc::new(AtomicBool::new(false));
    let table = Arc::new(Mutex::new(Table::default()));
    let conns: Arc<Mutex<Vec<(u64, TcpStream)>>> = Arc::new(Mutex::new(Vec::new()));
    let (st, tb, cs) = (stop.clone(), table.clone(), conns.clone());
    let pending = hush_transport::admission::PendingGate::new(cfg.max_pending);
    let thread = std::thread::spawn(move || {
        let mut next = 0u64;
        loop {
            let accepted = listener.accept();
            if st.load(Ordering::SeqCst) {
                break;
            }
            let (stream, source) = match accepted {
                Ok((s, a)) => (s, a.ip()),
                Err(e) => {
                    log(format!("accept failed: {e}"));
                    continue;
                }
            };
            next += 1;
            let id = next;
            let Some(ticket) = pending.try_enter() else {
                let _ = stream.shutdown(std::net::Shutdown::Both);
                log(format!("connection {id}: refused ({} connections already in set-up, --max-pending)", pending.max()));
                continue;
            };
            if let (Ok(clone), Ok(mut c)) = (stream.try_clone(), cs.lock()) {
                c.push((id, clone));
            }
            let (tb, cs, cfg, log) = (tb.clone(), cs.clone(), cfg.clone(), log.clone());
            std::thread::spawn(move || {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| connection(stream, source, &tb, &cfg, ticket)));
                match r {
                    Ok(Ok(line)) => log(format!("connection {id}: {line}")),
                    Ok(Err(e)) => log(format!("connection {id}: {e}")),
                    Err(_) => log(format!("connection {id}: internal error (panic caught); other sessions unaffected")),
                }
                if let Ok(mut c) = cs.lock() {
                    c.retain(|(i, _)| *i != id);
                }
            });
        }
    });
    Ok(DealerHandle { addr: local, stop, table, conns, thread: Some(thread) })
}

/// Claims (session, role) in the table; returns the session's seed.
fn claim(table: &Mutex<Table>, session: &SessionId, role: ModuleRole, source: Option<std::net::IpAddr>, cfg: &DealerConfig, announced: Option<u64>) -> std::result::Result<(Zeroizing<[u8; 32]>, Arc<Paired>), String> {
    let mut t = table.lock().map_err(|_| "dealer table poisoned".to_string())?;
    match role {
        ModuleRole::Sender => {
            if t.sessions.contains_key(session) {
                return Err("session already opened (its sender role is claimed)".into());
            }
            if t.sessions.len() >= cfg.max_sessions {
                return Err(format!("dealer busy ({} sessions, the most it holds); try again later", cfg.max_sessions));
            }
            if let Some(ip) = source {
                let from = t.sessions.values().filter(|s| s.source == Some(ip)).count();
                if from >= cfg.max_sessions_per_addr {
                    return Err(format!("{from} sessions already open from {ip}, the most one address may hold (--max-sessions-per-addr {}); try again later", cfg.max_sessions_per_addr));
                }
            }
            if let (Some(cap), Some(rss)) = (cfg.max_mem, hush_transport::admission::resident_bytes()) {
                if rss >= cap {
                    return Err(format!("dealer memory cap reached (resident {} MiB of {} MiB); try again later", rss >> 20, cap >> 20));
                }
            }
            let mut seed = Zeroizing::new([0u8; 32]);
            match cfg.insecure_test_seed {
                Some(s) => seed.copy_from_slice(&s),
                None => Prg::from_os().fill_bytes(&mut *seed),
            }
            // the session's budget: what its server announced for its model
            // (sized to let an honest party run ahead by its pre-dealing and
            // one step), never above the dealer's cap `--session-mem`
            let budget = announced.map_or(cfg.session_mem, |a| a.clamp(MIN_SESSION_MEM.min(cfg.session_mem), cfg.session_mem));
            let paired = Arc::new(Paired { budget, ahead_wait: cfg.ahead_wait, ..Paired::default() });
            t.sessions.insert(*session, Slot { seed: seed.clone(), receiver_claimed: false, live_connections: 1, paired: paired.clone(), source });
            Ok((seed, paired))
        }
        ModuleRole::Receiver => {
            let slot = t.sessions.get_mut(session).ok_or_else(|| "unknown session (no server opened it at this dealer)".to_string())?;
            if slot.receiver_claimed {
                return Err("the receiver role of this session is already claimed".into());
            }
            slot.receiver_claimed = true;
            slot.live_connections += 1;
            Ok((slot.seed.clone(), slot.paired.clone()))
        }
    }
}

fn release(table: &Mutex<Table>, session: &SessionId) {
    if let Ok(mut t) = table.lock() {
        let gone = match t.sessions.get_mut(session) {
            Some(s) => {
                s.live_connections -= 1;
                s.live_connections == 0
            }
            None => false,
        };
        if gone {
            t.sessions.remove(session); // Zeroizing erases the seed
        }
    }
}

/// A join: MAGIC, the role, the session id, and (a server's, optionally)
/// the session budget it announces for its model: 8 bytes, little-endian.
fn encode_join(session: &SessionId, role: ModuleRole, announce: Option<u64>) -> Vec<u8> {
    let mut m = MAGIC.to_vec();
    m.push(role.byte());
    m.extend_from_slice(session);
    if let Some(a) = announce {
        m.extend_from_slice(&a.to_le_bytes());
    }
    m
}

fn decode_join(m: &[u8]) -> Result<(SessionId, ModuleRole, Option<u64>)> {
    let k = MAGIC.len();
    if !(m.len() == k + 33 || m.len() == k + 41) || &m[..k] != MAGIC {
        return Err(Error::Malformed("not a hush dealer join message (v1)".into()));
    }
    let role = ModuleRole::from_byte(m[k])?;
    let session: SessionId = m[k + 1..k + 33].try_into().map_err(|_| Error::Malformed("join: session id".into()))?;
    let announce = if m.len() == k + 41 {
        if role != ModuleRole::Sender {
            return Err(Error::Malformed("join: only the server (sender) announces a session budget".into()));
        }
        Some(u64::from_le_bytes(m[k + 33..].try_into().map_err(|_| Error::Malformed("join: budget".into()))?))
    } else {
        None
    };
    Ok((session, role, announce))
}

fn role_name(r: ModuleRole) -> &'static str {
    match r {
        ModuleRole::Sender => "sender (server)",
        ModuleRole::Receiver => "receiver (client)",
    }
}

/// A dealing request through the session's [`Paired`] dealing: admitted
/// and recorded by this role's module exactly as [`Module::handle`] would.
fn deal_paired(module: &mut Module, paired: &Arc<Paired>, d: &DealRequest, seeded_req: bool) -> Response {
    let r = module.prepare_deal(d).and_then(|p| paired.serve(p, seeded_req)).and_then(|resp| {
        module.commit_deal(d)?;
        Ok(resp)
    });
    match r {
        Ok(resp @ Response::Dealt(_)) => {
            paired.speculate(module, d);
            resp
        }
        Ok(resp) => resp,
        Err(e) => Response::Error(e.to_string()),
    }
}

/// One party's connection: join, then requests until it ends.
fn connection(stream: TcpStream, source: std::net::IpAddr, table: &Mutex<Table>, cfg: &DealerConfig, pending: hush_transport::admission::PendingTicket) -> Result<String> {
    let mut ch = TcpChannel::from_accepted(stream, channel_options(), &cfg.link)?;
    ch.set_timeout(JOIN_TIMEOUT);
    let mut join = ch.recv();
    if let Ok(m) = &join {
        if let Some(nonce) = m.strip_prefix(ATTEST) {
            match answer_attest(&mut ch, cfg, nonce) {
                Ok(true) => join = ch.recv(),
                Ok(false) => return Ok("a party asked for attestation evidence and was told why there is none (see the party's error)".into()),
                Err(e) => return Err(e),
            }
        }
    }
    drop(pending);
    let join = join?;
    if join == PROBE {
        // a server checking its dealer at start: the TLS handshake (the
        // pin) is the check; nothing is opened
        let _ = ch.send(&Response::Established.encode());
        return Ok("probe answered (a party checking its dealer; no session)".into());
    }
    let (session, role, announced) = match decode_join(&join) {
        Ok(j) => j,
        Err(e) => {
            let _ = ch.send(&Response::Error(e.to_string()).encode());
            return Err(e);
        }
    };
    let (seed, paired) = match claim(table, &session, role, Some(source), cfg, announced) {
        Ok(s) => s,
        Err(e) => {
            let _ = ch.send(&Response::Error(format!("dealer refused the {}: {e}", role_name(role))).encode());
            return Ok(format!("refused a {}: {e}", role_name(role)));
        }
    };
    let mut module = Module::with_session_seed(role, &seed).with_kinds(cfg.kinds.clone());
    drop(seed);
    let served = (|| -> Result<u64> {
        ch.send(&Response::Established.encode())?;
        ch.set_timeout(cfg.idle_timeout);
        let mut n = 0u64;
        loop {
            let mut req = match ch.recv() {
                Ok(r) => r,
                Err(hush_transport::Error::Disconnected) => return Ok(n),
                Err(e) => return Err(e.into()),
            };
            let decoded = Request::decode(&req);
            req.zeroize();
            let resp = match decoded {
                Ok(Request::Deal(d)) => deal_paired(&mut module, &paired, &d, false),
                Ok(Request::DealSeeded(d)) => deal_paired(&mut module, &paired, &d, true),
                Ok(Request::Plan(reqs)) if role == ModuleRole::Sender => paired.plan(&module, reqs, cfg.plan_mem, cfg.idle_timeout),
                Ok(Request::Plan(_)) => Response::Error("only the server (the session's sender) sends a dealing plan".into()),
                Ok(r) => module.handle(&r).unwrap_or_else(|e| Response::Error(e.to_string())),
                Err(e) => Response::Error(e.to_string()),
            };
            resp.send_on(&mut ch)?;
            n += 1;
        }
    })();
    drop(module); // erases the seed and per-batch state
    if role == ModuleRole::Sender {
        paired.close(); // the plan's worker stops; what it computed is erased
    }
    release(table, &session);
    match served {
        Ok(n) => Ok(format!(
            "{} ended after {n} request(s) ({} shares of the session served from batches computed once for both roles or ahead, {} computed ahead; {} computed from the dealing plan, {} requests served from them; {} refused ahead of the peer at the session budget); its state is erased",
            role_name(role),
            paired.taken.load(Ordering::Relaxed),
            paired.ahead.load(Ordering::Relaxed),
            paired.planned.load(Ordering::Relaxed),
            paired.plan_served.load(Ordering::Relaxed),
            paired.refused_ahead.load(Ordering::Relaxed)
        )),
        Err(e) => Err(Error::Process(format!("{} ended with an error: {e}; its state is erased", role_name(role)))),
    }
}

/// **Paired dealing.** The two roles of a session ask for the same batches
/// (same kind, batch number, size and parameters; the parties number
/// batches in the same order). Each role's module would compute the whole
/// correlation and keep its own share — FSS key generation, for one, makes
/// both keys either way — so the dealer computes each batch once: the first
/// role to ask computes both shares ([`hush_deal::Description::deal_pair`])
/// and leaves the other role's share here, the other role's request takes
/// it (waiting if it is still being computed). A client's request for a
/// seeded kind is answered with its sub-key at once and starts the server's
/// share on a helper thread: the client's dealing runs ahead of the
/// server's (it is cheap), so the server's share is often ready, or being
/// computed, before the server asks — the dealer's computation overlaps the
/// transfer of the previous batch.
///
/// What changes in the releases: nothing. Both roles' modules admit each
/// request with their own checks and record it (one release per batch per
/// role), and derive the same batch key; a share left here is released
/// only to its own role's connection, only for that exact request, and
/// erased when taken, or unreleased when the session ends.
#[derive(Default)]
struct Paired {
    st: Mutex<HashMap<DealRequest, PairEntry>>,
    cv: std::sync::Condvar,
    /// Shares served from an entry (computed for this role earlier), and
    /// batches computed ahead (counters for the dealer's log).
    taken: std::sync::atomic::AtomicU64,
    ahead: std::sync::atomic::AtomicU64,
    /// Batches computed from the session's dealing plan, and requests
    /// (either role) served from them.
    planned: std::sync::atomic::AtomicU64,
    plan_served: std::sync::atomic::AtomicU64,
    /// The plan's queue and its worker's state.
    plan: Mutex<PlanState>,
    plan_cv: std::sync::Condvar,
    /// The session's server connection ended: the plan's worker stops.
    closed: std::sync::atomic::AtomicBool,
    /// [`DealerConfig::session_mem`] and [`DealerConfig::ahead_wait`]
    /// (0 budget: the default struct of unit tests — no admission bound).
    budget: u64,
    ahead_wait: Duration,
    /// Requests refused at the budget (for the dealer's log).
    refused_ahead: std::sync::atomic::AtomicU64,
}

/// **Dealing plans.** A server that knows the rest of its dealing
/// schedule (its engine does: the public architecture fixes it) sends it
/// as a plan, after its own pre-dealing. A worker of the session then
/// computes the plan's batches in order, both roles' shares as paired
/// dealing would, into this table — while the held shares stay under the
/// session's byte budget, waiting for requests to take them beyond it —
/// and the plan is acknowledged once the worker is done or at the budget.
/// The server reports ready only after that, so this computation is part
/// of the offline phase (before the client's input exists) and uses the
/// dealer's memory, not the parties'. A plan adds no release: its entries
/// are the paired-dealing entries a request would have made, taken only
/// by their own role's request, erased unreleased when the session ends
/// (or swept when their batch is passed). Batches each role has already
/// asked for are skipped; the plan's requests are admitted by the server
/// module's own checks before anything is computed. While a session has a
/// plan, same-shape speculation ([`AHEAD`]) is off: the plan says what
/// comes next, where speculation guessed (and, at every change of shape,
/// guessed wrong).
#[derive(Default)]
struct PlanState {
    queue: std::collections::VecDeque<Prepared>,
    /// Computed planned batches still in the table, with their bytes.
    held: std::collections::VecDeque<(DealRequest, u64)>,
    worker: bool,
    /// The worker is waiting (queue empty, or at the budget).
    idle: bool,
    active: bool,
    computed: u32,
    /// Highest batch number each role has asked for, per kind.
    asked: HashMap<String, [Option<u64>; 2]>,
}

/// A batch computed for the other role: shares by party, whether a
/// computation is under way, which roles have been served.
struct PairEntry {
    shares: [Option<Vec<u8>>; 2],
    computing: bool,
    served: [bool; 2],
    /// Computed from the session's dealing plan.
    planned: bool,
}

impl PairEntry {
    /// Being computed on `me`'s request, which it serves.
    fn computing(me: usize) -> Self {
        PairEntry { shares: [None, None], computing: true, served: [me == 0, me == 1], planned: false }
    }
}

impl Drop for PairEntry {
    fn drop(&mut self) {
        for s in self.shares.iter_mut().flatten() {
            s.zeroize();
        }
    }
}

/// Ends an entry's computation with nothing if the computing thread
/// unwinds, so the other role never waits for it forever.
struct Unfinished<'a>(&'a Paired, &'a DealRequest, usize);

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        self.0.finish(self.1, self.2, None);
    }
}

/// Batches of the same shape computed ahead of the last one dealt (each on
/// its own thread, so the dealer's computation of consecutive batches runs
/// in parallel).
const AHEAD: u64 = 1;

/// Most batches held for the other role (the roles run in lockstep, so a
/// few are enough; beyond this each role computes its own share).
const MAX_PAIRED: usize = 64;

use crate::deal::{DealRequest, Prepared};

impl Paired {
    /// This role's share of the admitted request `p` (`seeded_req`: the
    /// role can expand a sub-key).
    fn serve(self: &Arc<Self>, p: Prepared, seeded_req: bool) -> Result<Response> {
        let me = p.party() as usize;
        let other = 1 - me;
        self.sweep(&p.req, me);
        self.asked(&p.req, me);
        self.admit_ahead(&p.req, me)?;
        if seeded_req && p.seeded() {
            // the client's sub-key now; the server's share on a helper thread
            let start = {
                let mut st = self.st.lock().map_err(|_| Error::Process("dealer pairing lock".into()))?;
                let len = st.len();
                match st.get_mut(&p.req) {
                    Some(e) => {
                        e.served[me] = true;
                        if e.planned {
                            self.plan_served.fetch_add(1, Ordering::Relaxed);
                        }
                        if let Some(mut s) = e.shares[me].take() {
                            s.zeroize();
                        }
                        if e.served[other] && !e.computing {
                            st.remove(&p.req);
                        }
                        self.cv.notify_all();
                        false
                    }
                    None if len < self.cap() => {
                        st.insert(p.req.clone(), PairEntry::computing(me));
                        true
                    }
                    None => false,
                }
            };
            let sub = p.sub_key();
            if start {
                let this = self.clone();
                let spawned = std::thread::Builder::new().name("hush-dealer-pair".into()).spawn(move || {
                    let guard = Unfinished(&this, &p.req, other);
                    let r = p.compute_party(other as u8);
                    std::mem::forget(guard);
                    this.finish(&p.req, other, r.ok());
                });
                if spawned.is_err() {
                    self.abandon_all();
                }
            }
            return Ok(Response::Seed(sub));
        }
        let mut st = self.st.lock().map_err(|_| Error::Process("dealer pairing lock".into()))?;
        loop {
            match st.get_mut(&p.req) {
                Some(e) if e.shares[me].is_some() => {
                    self.taken.fetch_add(1, Ordering::Relaxed);
                    let share = e.shares[me].take().expect("checked");
                    e.served[me] = true;
                    if e.planned {
                        self.plan_served.fetch_add(1, Ordering::Relaxed);
                    }
                    if e.served[other] {
                        st.remove(&p.req);
                    }
                    drop(st);
                    self.cv.notify_all(); // a request held ahead of the budget re-checks
                    return Ok(Response::Dealt(share));
                }
                Some(e) if e.computing => {
                    st = self.cv.wait(st).map_err(|_| Error::Process("dealer pairing lock".into()))?;
                }
                Some(_) => {
                    // computed without this role's share (a failure): deal it alone
                    st.remove(&p.req);
                    drop(st);
                    return Ok(Response::Dealt(p.compute_party(me as u8)?));
                }
                None => break,
            }
        }
        if st.len() >= self.cap() {
            drop(st);
            return Ok(Response::Dealt(p.compute_party(me as u8)?));
        }
        st.insert(p.req.clone(), PairEntry::computing(me));
        drop(st);
        let guard = Unfinished(self, &p.req, other);
        if p.other_seeded() {
            // the other role (the client) gets a sub-key: compute only this share
            let r = p.compute_party(me as u8);
            std::mem::forget(guard);
            self.finish(&p.req, other, None);
            return Ok(Response::Dealt(r?));
        }
        let r = p.compute_pair();
        std::mem::forget(guard);
        match r {
            Ok((mine, theirs)) => {
                self.finish(&p.req, other, Some(theirs));
                Ok(Response::Dealt(mine))
            }
            Err(e) => {
                self.finish(&p.req, other, None);
                Err(e)
            }
        }
    }

    /// Ends a computation: `share` is party `p`'s (None: not computed, or
    /// not needed). The entry stays until `p`'s request takes or clears it.
    fn finish(&self, req: &DealRequest, p: usize, share: Option<Vec<u8>>) {
        if let Ok(mut st) = self.st.lock() {
            if let Some(e) = st.get_mut(req) {
                e.computing = false;
                if e.served[p] {
                    if let Some(mut s) = share {
                        s.zeroize();
                    }
                    st.remove(req);
                } else {
                    e.shares[p] = share;
                }
            }
        }
        self.cv.notify_all();
    }

    /// Batches of `req`'s kind below its batch will never be asked for by
    /// role `me` again (a role's batches increase): its shares of them are
    /// erased, and entries nobody will ask for are dropped.
    fn sweep(&self, req: &DealRequest, me: usize) {
        if let Ok(mut st) = self.st.lock() {
            st.retain(|k, e| {
                if k.kind == req.kind && k.batch < req.batch && !e.served[me] {
                    e.served[me] = true;
                    if let Some(mut s) = e.shares[me].take() {
                        s.zeroize();
                    }
                }
                !(e.served[0] && e.served[1] && !e.computing)
            });
        }
        self.cv.notify_all();
    }

    /// **Admission ahead of the peer** ([`DealerConfig::session_mem`]).
    /// A request of role `me` for a batch nobody has computed yet will
    /// leave the peer's share here. While the peer's unclaimed shares
    /// reach the budget (or [`MAX_INFLIGHT`] computations for it are under
    /// way), the request is held — nothing computed, nothing allocated —
    /// until the peer claims shares; after `ahead_wait` it is refused with
    /// an error naming the budget. An honest peer claims what was dealt
    /// for it (the roles ask for the same batches in the same order), so
    /// only a role far ahead of its peer, or alone, ever waits.
    fn admit_ahead(&self, req: &DealRequest, me: usize) -> Result<()> {
        if self.budget == 0 {
            return Ok(());
        }
        let other = 1 - me;
        let deadline = std::time::Instant::now() + self.ahead_wait;
        let mut st = self.st.lock().map_err(|_| Error::Process("dealer pairing lock".into()))?;
        loop {
            if st.contains_key(req) {
                return Ok(()); // computed or under way: taking it adds nothing
            }
            let (bytes, inflight) = held_for(&st, other);
            if bytes < self.budget && inflight < MAX_INFLIGHT {
                return Ok(());
            }
            let now = std::time::Instant::now();
            if now >= deadline || self.closed.load(Ordering::Acquire) {
                self.refused_ahead.fetch_add(1, Ordering::Relaxed);
                return Err(Error::Refused(format!(
                    "dealer: the {} asked for batch {} of '{}' while {} MiB of shares dealt for the {} are unclaimed ({} computation(s) under way; this session's budget is {} MiB, hush dealer --session-mem); held {:.1} s without the peer catching up, so refused: a party this far ahead of its peer is not following the protocol",
                    role_name(ModuleRole::from_byte(me as u8).unwrap_or(ModuleRole::Sender)),
                    req.batch,
                    req.kind,
                    bytes >> 20,
                    role_name(ModuleRole::from_byte(other as u8).unwrap_or(ModuleRole::Sender)),
                    inflight,
                    self.budget >> 20,
                    self.ahead_wait.as_secs_f64()
                )));
            }
            st = self.cv.wait_timeout(st, (deadline - now).min(Duration::from_millis(100))).map_err(|_| Error::Process("dealer pairing lock".into()))?.0;
        }
    }

    /// Computes batches b + 1..=b + [`AHEAD`] of `d` (same kind, size,
    /// parameters) ahead, for both roles, while batch b crosses the link — consecutive sub-batches
    /// of one gate are such requests. Admitted with `module`'s checks; a
    /// share nobody asks for is erased unreleased (see [`Paired::sweep`]).
    fn speculate(self: &Arc<Self>, module: &Module, d: &DealRequest) {
        if self.plan.lock().map(|p| p.active).unwrap_or(true) {
            return;
        }
        for k in 1..=AHEAD {
            let Some(b) = d.batch.checked_add(k) else { return };
            self.speculate_one(module, DealRequest { batch: b, ..d.clone() });
        }
    }

    fn speculate_one(self: &Arc<Self>, module: &Module, next: DealRequest) {
        let Ok(p) = module.prepare_deal(&next) else { return };
        {
            let Ok(mut st) = self.st.lock() else { return };
            if st.contains_key(&next) || st.len() >= self.cap() {
                return;
            }
            if self.budget > 0 && held_for(&st, 0).0 + held_for(&st, 1).0 >= self.budget {
                return; // never speculate beyond the session's budget
            }
            st.insert(next.clone(), PairEntry { shares: [None, None], computing: true, served: [false, false], planned: false });
        }
        self.ahead.fetch_add(1, Ordering::Relaxed);
        let this = self.clone();
        let spawned = std::thread::Builder::new().name("hush-dealer-ahead".into()).spawn(move || {
            let guard = Unfinished(&this, &p.req, 0);
            let r = compute_both(&p);
            std::mem::forget(guard);
            this.finish_both(&p.req, r.unwrap_or([None, None]));
        });
        if spawned.is_err() {
            self.abandon_all();
        }
    }

    /// Ends a computation of both parties' shares.
    fn finish_both(&self, req: &DealRequest, shares: [Option<Vec<u8>>; 2]) {
        if let Ok(mut st) = self.st.lock() {
            if let Some(e) = st.get_mut(req) {
                e.computing = false;
                for (p, share) in shares.into_iter().enumerate() {
                    match share {
                        Some(mut s) if e.served[p] => s.zeroize(),
                        s => e.shares[p] = s,
                    }
                }
                if e.served[0] && e.served[1] {
                    st.remove(req);
                }
            }
        }
        self.cv.notify_all();
    }

    fn abandon_all(&self) {
        if let Ok(mut st) = self.st.lock() {
            st.clear();
        }
        self.cv.notify_all();
    }

    /// Most entries in the table: [`MAX_PAIRED`] beyond the plan's.
    fn cap(&self) -> usize {
        MAX_PAIRED + self.plan.lock().map(|p| p.held.len()).unwrap_or(0)
    }

    /// Records that role `me` asked for `req`'s batch.
    fn asked(&self, req: &DealRequest, me: usize) {
        if let Ok(mut pl) = self.plan.lock() {
            if pl.active {
                let a = pl.asked.entry(req.kind.clone()).or_default();
                a[me] = Some(a[me].map_or(req.batch, |b| b.max(req.batch)));
            }
        }
    }

    /// Takes a dealing plan (see [`PlanState`]): admits every request with
    /// the server's module, queues them for the session's plan worker, and
    /// answers once the worker is done or at `budget` bytes held (at most
    /// `wait`).
    fn plan(self: &Arc<Self>, module: &Module, reqs: Vec<DealRequest>, budget: u64, wait: Duration) -> Response {
        if budget == 0 || reqs.is_empty() {
            return Response::Planned { computed: 0, bytes: 0 };
        }
        let mut prepared = Vec::with_capacity(reqs.len());
        for r in &reqs {
            match module.prepare_deal(r) {
                Ok(p) => prepared.push(p),
                Err(e) => return Response::Error(format!("dealing plan refused: {e}")),
            }
        }
        let Ok(mut pl) = self.plan.lock() else { return Response::Error("dealer plan lock".into()) };
        pl.active = true;
        pl.queue.extend(prepared);
        pl.idle = false;
        let start = !pl.worker;
        pl.worker = true;
        let computed0 = pl.computed;
        drop(pl);
        if start {
            let this = self.clone();
            if std::thread::Builder::new().name("hush-dealer-plan".into()).spawn(move || this.plan_worker(budget)).is_err() {
                if let Ok(mut pl) = self.plan.lock() {
                    pl.worker = false;
                    pl.queue.clear();
                }
                return Response::Planned { computed: 0, bytes: 0 };
            }
        }
        self.plan_cv.notify_all();
        let deadline = std::time::Instant::now() + wait;
        let Ok(mut pl) = self.plan.lock() else { return Response::Error("dealer plan lock".into()) };
        while !pl.idle && pl.worker {
            let now = std::time::Instant::now();
            if now >= deadline {
                break;
            }
            pl = match self.plan_cv.wait_timeout(pl, deadline - now) {
                Ok((g, _)) => g,
                Err(_) => return Response::Error("dealer plan lock".into()),
            };
        }
        Response::Planned { computed: pl.computed - computed0, bytes: pl.held.iter().map(|h| h.1).sum() }
    }

    /// The plan's worker: computes queued batches in order while the
    /// held bytes stay under `budget`, until the session closes.
    fn plan_worker(self: Arc<Self>, budget: u64) {
        loop {
            if self.closed.load(Ordering::Acquire) {
                break;
            }
            // what the plan holds now: entries still in the table
            let held: u64 = {
                let Ok(st) = self.st.lock() else { break };
                let Ok(mut pl) = self.plan.lock() else { break };
                pl.held.retain(|(r, _)| st.contains_key(r));
                pl.held.iter().map(|h| h.1).sum()
            };
            let next = {
                let Ok(mut pl) = self.plan.lock() else { break };
                if pl.queue.is_empty() || held >= budget {
                    pl.idle = true;
                    self.plan_cv.notify_all();
                    let _ = self.plan_cv.wait_timeout(pl, Duration::from_millis(5));
                    continue;
                }
                pl.idle = false;
                let p = pl.queue.pop_front().expect("not empty");
                // a batch both roles have asked for is history
                let done = pl.asked.get(&p.req.kind).is_some_and(|a| a.iter().all(|b| b.is_some_and(|b| b >= p.req.batch)));
                if done {
                    continue;
                }
                p
            };
            {
                let Ok(mut st) = self.st.lock() else { break };
                if st.contains_key(&next.req) {
                    continue; // a request got there first
                }
                st.insert(next.req.clone(), PairEntry { shares: [None, None], computing: true, served: [false, false], planned: true });
            }
            let guard = Unfinished(&self, &next.req, 0);
            let r = compute_both(&next);
            std::mem::forget(guard);
            let shares = r.unwrap_or([None, None]);
            let bytes = shares.iter().flatten().map(|s| s.len() as u64).sum();
            self.finish_both(&next.req, shares);
            self.planned.fetch_add(1, Ordering::Relaxed);
            if let Ok(mut pl) = self.plan.lock() {
                pl.computed += 1;
                pl.held.push_back((next.req.clone(), bytes));
            }
        }
        if let Ok(mut pl) = self.plan.lock() {
            pl.worker = false;
            pl.idle = true;
            pl.queue.clear();
        }
        self.plan_cv.notify_all();
    }

    /// The session's server connection ended: stops the plan's worker.
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.plan_cv.notify_all();
    }
}

/// Bytes of shares held for role `p` (computed on the other role's
/// request or ahead, not yet claimed; dealing-plan entries have their own
/// budget and are not counted) and computations under way that will hold
/// one.
fn held_for(st: &HashMap<DealRequest, PairEntry>, p: usize) -> (u64, usize) {
    let (mut bytes, mut inflight) = (0u64, 0usize);
    for e in st.values().filter(|e| !e.planned && !e.served[p]) {
        bytes += e.shares[p].as_ref().map_or(0, |s| s.len() as u64);
        inflight += e.computing as usize;
    }
    (bytes, inflight)
}

/// Checks that a dealer answers at `addr` with the pinned identity in
/// `sec` (a party's check at start, e.g. `hush serve --mode dealer`):
/// connects, completes the TLS handshake, sends a probe that opens
/// nothing, and expects the dealer's acknowledgement.
pub fn probe(addr: &str, sec: &LinkSecurity, connect_timeout: Option<Duration>) -> Result<()> {
    probe_checked(addr, sec, connect_timeout, None).map(|_| ())
}

/// [`probe`], attesting the dealer first when `check` is given; returns
/// the check's summary.
pub fn probe_checked(addr: &str, sec: &LinkSecurity, connect_timeout: Option<Duration>, check: Option<&DealerCheck>) -> Result<Option<String>> {
    let lost = |e: hush_transport::Error| Error::Dealer(format!("dealer at {addr}: {e}"));
    let base = channel_options();
    let opts = ChannelOptions { connect_timeout: connect_timeout.unwrap_or(base.connect_timeout), ..base };
    let (mut ch, summary) = connect_dealer(addr, opts, sec, check)?;
    ch.send(PROBE).map_err(lost)?;
    ch.set_timeout(JOIN_TIMEOUT);
    match &Response::decode(&ch.recv().map_err(lost)?)? {
        Response::Established => Ok(summary),
        Response::Error(e) => Err(Error::Dealer(format!("dealer at {addr} answered the probe with an error: {e}"))),
        _ => Err(Error::Malformed("dealer: unexpected reply to the probe".into())),
    }
}

/// Answers a party's [`ATTEST`] request; `Ok(true)` when evidence was sent.
fn answer_attest(ch: &mut TcpChannel, cfg: &DealerConfig, nonce: &[u8]) -> Result<bool> {
    let nonce: &[u8; NONCE_LEN] = nonce.try_into().map_err(|_| Error::Malformed(format!("attestation request: the nonce must be {NONCE_LEN} bytes")))?;
    let none = |why: String| {
        let mut m = vec![ATTEST_NONE];
        m.extend_from_slice(why.as_bytes());
        m
    };
    let (reply, sent) = match (&cfg.attest, &cfg.link) {
        (Some(get), LinkSecurity::Tls(t)) => match get(t.identity.cert_der(), nonce) {
            Ok(ev) => {
                let mut m = Vec::with_capacity(1 + ev.len());
                m.push(ATTEST_OK);
                m.extend_from_slice(&ev);
                (m, true)
            }
            Err(e) => (none(format!("this dealer could not obtain its evidence: {e}")), false),
        },
        (Some(_), LinkSecurity::Insecure) => (none("this dealer runs in plaintext: there is no TLS key to bind evidence to".into()), false),
        (None, _) => (none("this dealer runs without --attest: it has no evidence to give".into()), false),
    };
    ch.send(&reply)?;
    Ok(sent)
}

/// A party's side of the attestation exchange on a fresh connection (see
/// "Attestation" above): nonce out, evidence in (under `check`'s frame
/// cap), checked against this TLS session's certificate. Returns the
/// check's summary.
fn attest_dealer(ch: &mut TcpChannel, addr: &str, check: &DealerCheck) -> Result<String> {
    let refuse = |why: String| Error::DealerAttestation(format!("dealer at {addr}: {why}"));
    let cert = ch
        .peer_certificate()
        .ok_or_else(|| refuse("the link is plaintext; attestation binds the dealer's TLS key, so it needs TLS".into()))?
        .to_vec();
    let mut nonce = [0u8; NONCE_LEN];
    Prg::from_os().fill_bytes(&mut nonce);
    let mut m = ATTEST.to_vec();
    m.extend_from_slice(&nonce);
    let lost = |e: hush_transport::Error| match e {
        hush_transport::Error::Oversized { len, max } => refuse(format!("its evidence is {len} bytes, more than the {max} accepted")),
        e => Error::Dealer(format!("dealer at {addr}: {e}")),
    };
    ch.send(&m).map_err(lost)?;
    ch.set_timeout(ATTEST_TIMEOUT);
    let r = ch.recv().map_err(lost)?;
    match r.split_first() {
        Some((&ATTEST_OK, ev)) => (check.verify)(ev, &nonce, &cert).map_err(refuse),
        Some((&ATTEST_NONE, why)) => Err(refuse(format!("it gave no evidence: {}", String::from_utf8_lossy(why)))),
        _ => Err(refuse("its answer to the attestation request is malformed".into())),
    }
}

/// Connects to a dealer with `opts`, attesting it first when `check` is
/// given (the frame cap is the evidence's until the evidence is in).
fn connect_dealer(addr: &str, opts: ChannelOptions, sec: &LinkSecurity, check: Option<&DealerCheck>) -> Result<(TcpChannel, Option<String>)> {
    let lost = |e: hush_transport::Error| Error::Dealer(format!("dealer at {addr}: {e}"));
    let full = opts.max_frame;
    let Some(c) = check else {
        return Ok((TcpChannel::connect_with(addr, opts, sec).map_err(lost)?, None));
    };
    let small = ChannelOptions { max_frame: c.max_evidence.saturating_add(1).min(full), ..opts };
    let mut ch = TcpChannel::connect_with(addr, small, sec).map_err(lost)?;
    let summary = attest_dealer(&mut ch, addr, c)?;
    ch.set_max_frame(full);
    Ok((ch, Some(summary)))
}

/// Both parties' shares of a prepared batch, by party (a seeded party's
/// share is not computed: its request is answered with its sub-key).
fn compute_both(p: &Prepared) -> Result<[Option<Vec<u8>>; 2]> {
    let me = p.party() as usize;
    if p.other_seeded() {
        p.compute_party(me as u8).map(|s| if me == 0 { [Some(s), None] } else { [None, Some(s)] })
    } else if p.seeded() {
        p.compute_party(1 - me as u8).map(|s| if me == 0 { [None, Some(s)] } else { [Some(s), None] })
    } else {
        p.compute_pair().map(|(a, b)| if me == 0 { [Some(a), Some(b)] } else { [Some(b), Some(a)] })
    }
}

/// A party's module in dealer mode: its crossings are requests to the
/// dealer service over a TLS connection bound to (session, role).
pub struct DealerModule {
    ch: TcpChannel,
    addr: String,
    role: ModuleRole,
    stats: ModuleStats,
    /// The dealing kinds this party can expand from a seed (see
    /// [`DealerModule::with_kinds`]).
    kinds: Option<crate::deal::Kinds>,
    /// The attestation check's summary, when the dealer was attested.
    attested: Option<String>,
}

impl DealerModule {
    /// Connects to the dealer at `addr` and opens (sender) or joins
    /// (receiver) `session`. A refusal comes back as [`Error::Refused`]
    /// with the dealer's reason.
    pub fn connect(addr: &str, sec: &LinkSecurity, session: &SessionId, role: ModuleRole) -> Result<Self> {
        Self::connect_profiled(addr, sec, &hush_transport::NetProfile::none(), session, role)
    }

    /// [`DealerModule::connect`] over an emulated network `profile`
    /// (benchmarks: the dealer link as slow as the parties' link).
    pub fn connect_profiled(addr: &str, sec: &LinkSecurity, profile: &hush_transport::NetProfile, session: &SessionId, role: ModuleRole) -> Result<Self> {
        Self::connect_timed(addr, sec, profile, None, session, role)
    }

    /// [`DealerModule::connect_profiled`] retrying a refused connection for
    /// `connect_timeout` (`--connect-timeout`; None: [`CONNECT_TIMEOUT`]).
    pub fn connect_timed(
        addr: &str,
        sec: &LinkSecurity,
        profile: &hush_transport::NetProfile,
        connect_timeout: Option<Duration>,
        session: &SessionId,
        role: ModuleRole,
    ) -> Result<Self> {
        Self::connect_announced(addr, sec, profile, connect_timeout, session, role, None)
    }

    /// [`DealerModule::connect_timed`]; a server (sender) may announce the
    /// session's budget for dealt-but-unclaimed shares, sized from its
    /// model ([`DealerConfig::session_mem`] caps it).
    #[allow(clippy::too_many_arguments)]
    pub fn connect_announced(
        addr: &str,
        sec: &LinkSecurity,
        profile: &hush_transport::NetProfile,
        connect_timeout: Option<Duration>,
        session: &SessionId,
        role: ModuleRole,
        announce: Option<u64>,
    ) -> Result<Self> {
        Self::connect_checked(addr, sec, profile, connect_timeout, session, role, announce, None)
    }

    /// [`DealerModule::connect_announced`], attesting the dealer first
    /// when `check` is given (see "Attestation" in the module docs): a
    /// dealer whose evidence fails is refused with
    /// [`Error::DealerAttestation`] before the join is sent.
    #[allow(clippy::too_many_arguments)]
    pub fn connect_checked(
        addr: &str,
        sec: &LinkSecurity,
        profile: &hush_transport::NetProfile,
        connect_timeout: Option<Duration>,
        session: &SessionId,
        role: ModuleRole,
        announce: Option<u64>,
        check: Option<&DealerCheck>,
    ) -> Result<Self> {
        let lost = |e: hush_transport::Error| Error::Dealer(format!("dealer at {addr}: {e}"));
        let base = channel_options();
        let opts = ChannelOptions { profile: profile.clone(), connect_timeout: connect_timeout.unwrap_or(base.connect_timeout), ..base };
        let (mut ch, attested) = connect_dealer(addr, opts, sec, check)?;
        ch.send(&encode_join(session, role, announce.filter(|_| role == ModuleRole::Sender))).map_err(lost)?;
        ch.set_timeout(JOIN_TIMEOUT);
        let r = Response::decode(&ch.recv().map_err(lost)?)?;
        match &r {
            Response::Established => {}
            Response::Error(e) => return Err(Error::Refused(e.clone())),
            _ => return Err(Error::Malformed("dealer: unexpected reply to the join".into())),
        }
        ch.set_timeout(hush_transport::DEFAULT_TIMEOUT);
        Ok(DealerModule { ch, addr: addr.to_string(), role, stats: ModuleStats::default(), kinds: None, attested })
    }

    /// Lets this party expand seeded shares itself: its dealing requests go
    /// out as [`Request::DealSeeded`], and for a kind whose seeded party is
    /// this one the dealer answers with the 16-byte sub-key, expanded here
    /// with `kinds` (the same descriptions the dealer serves) into exactly
    /// the share it would have sent. For hush's kinds that is the client's
    /// (party 1's) share of triples and TAMI batches, and (as
    /// [`Request::LinearSeeded`]) its linear-layer masks B and R_C: the
    /// client's link to the dealer carries 16 bytes per batch instead of
    /// the share.
    pub fn with_kinds(mut self, kinds: crate::deal::Kinds) -> Self {
        self.kinds = Some(kinds);
        self
    }

    /// The dealer's certificate fingerprint (None when plaintext).
    pub fn dealer_fingerprint(&self) -> Option<Fingerprint> {
        self.ch.peer_fingerprint()
    }

    /// How long to wait for the dealer's answer to one request.
    pub fn set_timeout(&mut self, t: Duration) {
        self.ch.set_timeout(t);
    }
}

impl TrustedModule for DealerModule {
    fn call(&mut self, req: &Request) -> Result<Response> {
        let seeded = match (req, &self.kinds) {
            (Request::Deal(d), Some(_)) => Some(Request::DealSeeded(d.clone())),
            (Request::Linear(l @ crate::linear_deal::LinearRequest::Deal { .. }), Some(_)) => Some(Request::LinearSeeded(l.clone())),
            _ => None,
        };
        let q = seeded.as_ref().unwrap_or(req).encode();
        let addr = &self.addr;
        let lost = |e: hush_transport::Error| Error::Dealer(format!("dealer at {addr} lost: {e}"));
        self.ch.send(&q).map_err(lost)?;
        let r = self.ch.recv().map_err(lost)?;
        self.stats.crossings += 1;
        self.stats.bytes_to_module += q.len() as u64;
        self.stats.bytes_from_module += r.len() as u64;
        let resp = Response::decode_owned(r)?;
        match (&resp, req, &self.kinds) {
            (Response::Error(e), _, _) => Err(Error::Refused(e.clone())),
            (Response::Seed(k), Request::Deal(d), Some(kinds)) => Ok(Response::Dealt(crate::deal::expand(kinds, d, *k)?)),
            (Response::Seed(k), Request::Linear(crate::linear_deal::LinearRequest::Deal { bits, in_len, out_len, .. }), Some(_)) => {
                if !(1..=64).contains(bits) || *in_len as usize > crate::linear_deal::MAX_LINEAR_ELEMS || *out_len as usize > crate::linear_deal::MAX_LINEAR_ELEMS {
                    return Err(Error::Malformed("dealer: a mask seed for an out-of-range layer".into()));
                }
                let (first, second) = crate::linear_deal::expand_masks(*k, *bits, *in_len as usize, *out_len as usize);
                Ok(Response::Linear(crate::linear_deal::LinearResponse { first, second }))
            }
            (Response::Seed(_), _, _) => Err(Error::Malformed("dealer: a seed where a share was expected".into())),
            _ => Ok(resp),
        }
    }
    fn stats(&self) -> ModuleStats {
        self.stats
    }
    fn describe(&self) -> String {
        let link = match self.dealer_fingerprint() {
            Some(f) => format!("TLS 1.3, dealer {f}"),
            None => "plaintext (--insecure)".into(),
        };
        let attested = match &self.attested {
            Some(a) => format!("; attested: {a}"),
            None => String::new(),
        };
        format!("dealer service at {} ({}, {link}{attested}); trusted not to collude with either party", self.addr, role_name(self.role))
    }
}
