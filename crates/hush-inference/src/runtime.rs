//! Party runtime: sessions between a server (model owner) and a client.
//!
//! ## Session protocol (over any [`Channel`])
//! 1. client → server: hello JSON `{"hush":"inference","version":1,"proto":…}`,
//!    with `max_mem` when the client has a memory budget: the server then
//!    fits its chunk size and the pre-dealing budget to it
//!    ([`crate::budget::fit`]); the client refuses, naming the model's
//!    floor, a budget it cannot meet, before it sends anything else;
//! 2. server → client: `{"ok":true,"bits","frac","proto","chunk","architecture"}`
//!    (the public architecture: layer kinds and shapes, no weights) or
//!    `{"ok":false,"error":…}`;
//!    Both carry the trust `mode` (`tee` or `dealer`); a server refuses a
//!    client of another mode, naming both. In dealer mode the server has
//!    already opened a session at its dealer and the reply carries the
//!    session id and the dealer's fingerprint (see [`Mode`]). The family
//!    is negotiated and ring/fraction bits, chunk and model digest checked
//!    as [`crate::hello`] says (refusals name both settings);
//! 3. seed agreement of the two parties' modules (server = party 0 =
//!    `Sender`) in tee mode, or the client joins the server's dealer
//!    session in dealer mode; the server binds its linear layers' weights to its module,
//!    then both parties *pre-deal* the first inference's correlations
//!    ([`engine::predeal`], up to the session's pre-dealing budget: the
//!    smaller of the client's `predeal_mem` in its hello and the server's,
//!    echoed in the reply) — this is the *offline* part (input-independent);
//! 4. per inference: client → server `I`, then both run the engine in
//!    lockstep and the server sends its share of the logits (client only
//!    reconstructs); then both pre-deal the next inference (offline again,
//!    before its input exists); `Q` ends the session.
//!
//! A server session that fails (a client that disconnects, sends garbage,
//! or times out) ends with an error for that session only: each session has
//! its own thread, channel and modules, and panics are caught.

use crate::crisp_run::CrispCost;
use crate::engine::{self, LayerCost, CLIENT, SERVER};
use crate::fixed::FixedConfig;
use crate::model::Model;
use crate::plan::Plan;
use crate::{linear, Error, Result};
use hush_tee::TrustedModule;
use hush_transport::{Channel, ChannelOptions, ClientProfile, CpuLimit, LinkConfig, MemChannel, NetProfile, TcpChannel, Throttled};
use serde_json::{json, Value};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

pub use crate::preset::{Mode, MALICIOUS_CLIENT_NEEDS_DEALER};
use crate::preset::Cot;
pub use crate::provider::*;

/// Options shared by both parties (the server's values win in a session).
#[derive(Clone, Debug)]
pub struct Options {
    /// Trust mode: the parties' modules (`tee`) or a dealer service.
    pub mode: Mode,
    pub cfg: FixedConfig,
    /// Nonlinear family: `fss` (default) or `tami`.
    pub proto: String,
    /// Elements per nonlinear chunk (bounds dealt key material).
    pub chunk: usize,
    /// Where modules run: `in-process` or `out-of-process`.
    pub tee: String,
    pub profile: NetProfile,
    /// Most concurrent sessions a server runs (more are refused).
    pub max_sessions: usize,
    /// Most concurrent sessions from one client address (more are
    /// refused): in dealer and malicious-client modes every session opens
    /// a dealer session, so this bounds what one client host can make the
    /// dealer hold (issue 33).
    pub max_sessions_per_addr: usize,
    /// Client's peak-memory budget in bytes: the chunk size and
    /// pre-dealing budget are fitted to it ([`crate::budget::fit`]), a
    /// budget below the model's floor is refused before the client sends
    /// anything of its input, and — when a heap meter is installed
    /// ([`install_mem_probe`]) — it is enforced as measured peak.
    pub max_mem: Option<u64>,
    /// The weak-client profile the client party runs under (CPU share and
    /// memory; see [`hush_transport::client_profile`]). Applied by the
    /// local runs ([`run_local`], `hush run`, `hush bench infer`) to the
    /// client's thread.
    pub client_profile: ClientProfile,
    /// Per-party budget (bytes, estimated) for correlations pre-dealt
    /// before an inference's input exists; 0 disables pre-dealing.
    pub predeal_mem: u64,
    /// Deal what is not pre-dealt on a look-ahead worker overlapping the
    /// online evaluation (see [`engine::run`]); off deals each item just
    /// before it is used. Local to a party (the dealing order is the same
    /// either way). Default on; `HUSH_LOOKAHEAD=0` turns it off.
    pub lookahead: bool,
    /// Dealer mode, server: send the dealer a dealing plan after each
    /// pre-dealing (see [`engine::plan_dealer`]). Default on.
    pub dealer_plan: bool,
    /// LinkConfig security of TCP connections: TLS 1.3 with this party's
    /// identity and its pins, or plaintext ([`LinkConfig::insecure`], the
    /// library default; the CLI and Python default to TLS). One-process
    /// runs over TCP use TLS with ephemeral identities when this is TLS.
    pub link: LinkConfig,
    /// **INSECURE, tests only**: in tee mode both parties' modules install
    /// this seed instead of agreeing one (the modules are started in their
    /// insecure test mode), so that providers can be compared bit for bit.
    /// Both parties must set the same value. Not reachable from the CLI.
    pub insecure_test_seed: Option<[u8; 32]>,
    /// HE modes: the RLWE parameter set (the server's choice wins; a client
    /// accepts an insecure test set only if it names the same one).
    pub he_params: String,
    /// HE modes: the COT source's LPN set by name (the server's choice
    /// wins); `None`: the server picks ([`cot_set_for`]).
    pub cot_set: Option<String>,
    /// What this party insists on at the hello (family, and for a client
    /// ring/fraction bits, chunk, model digest); see [`crate::hello`].
    pub expect: crate::hello::Expect,
    /// Server: per-session and global memory caps, pending-connection
    /// bound ([`crate::limits`]); clones share the global counters.
    pub limits: crate::limits::ServerLimits,
    /// `malicious-client` mode: the MAC parameter s and the linear backend
    /// (both must agree at the hello; refusals name both).
    pub crisp: crate::crisp_run::CrispOptions,
    /// A comparison family per CNN layer (indices into
    /// [`engine::MIX_FAMILIES`], one per plan step; `hush plan`'s per-layer
    /// mix): both parties must hold the same (checked at the hello, the
    /// refusal names both). `None`: `proto` for every layer.
    pub family_plan: Option<Arc<Vec<u8>>>,
    /// Dealer and malicious-client modes (`--dealer-attest POLICY`): the
    /// dealer must present hardware evidence (SEV-SNP, TDX; or test
    /// evidence, which a policy accepts only by naming its test root) that
    /// passes this policy and binds the dealer's TLS key, or it is refused
    /// before any correlation is used ([`hush_tee::dealer`], "Attestation").
    /// `None`: no attestation, as before.
    pub dealer_attest: Option<Arc<hush_attest::Policy>>,
    /// Tee mode (`--module-attest POLICY`): the **peer's** trusted module
    /// must present hardware evidence that passes this policy and binds
    /// its handshake key and this party's nonce, or it is refused before
    /// seed agreement completes, naming the failed leg
    /// ([`hush_tee::handshake`], "Hardware attestation"). `None`: only the
    /// simulated report, which gives no hardware protection.
    pub module_attest: Option<Arc<hush_attest::Policy>>,
    /// In-process modules' hardware evidence source (tests: test-root
    /// evidence, or a fake configfs-tsm tree). An in-process module lives
    /// in its host's memory, so this protects nothing; a deployment runs
    /// `hush-tee-module --attest snp|tdx` in a confidential VM instead.
    /// Not reachable from the CLI.
    pub module_evidence: Option<ModuleEvidence>,
}

/// Default pre-dealing budget per party (256 MiB).
pub const DEFAULT_PREDEAL_MEM: u64 = 256 << 20;

/// Default [`Options::max_sessions_per_addr`].
pub const DEFAULT_MAX_SESSIONS_PER_ADDR: usize = 8;

impl Default for Options {
    fn default() -> Self {
        Options {
            cfg: FixedConfig::default(),
            proto: "fss".into(),
            chunk: engine::DEFAULT_CHUNK,
            tee: "in-process".into(),
            profile: NetProfile::none(),
            max_sessions: 64,
            max_sessions_per_addr: DEFAULT_MAX_SESSIONS_PER_ADDR,
            max_mem: None,
            predeal_mem: DEFAULT_PREDEAL_MEM,
            lookahead: true,
            dealer_plan: true,
            link: LinkConfig::insecure(),
            mode: Mode::Tee,
            insecure_test_seed: None,
            client_profile: ClientProfile::none(),
            he_params: crate::he_linear::DEFAULT_PARAMS.into(),
            cot_set: None,
            expect: Default::default(),
            limits: Default::default(),
            crisp: Default::default(),
            family_plan: None,
            dealer_attest: None,
            module_attest: None,
            module_evidence: None,
        }
    }
}

impl Options {
    /// Resolves `proto = "auto"` to the mode's default family and checks
    /// that the family runs in the mode (`fss`/`tami` in tee and dealer
    /// modes, `cf2` in the HE modes).
    /// In the HE modes, a chunk left at the dealt families' default
    /// ([`engine::DEFAULT_CHUNK`]) becomes cf2's ([`engine::CF2_DEFAULT_CHUNK`]).
    pub fn resolve_family(&mut self) -> Result<()> {
        if self.proto == "auto" {
            self.proto = self.mode.default_family().to_string();
        }
        self.chunk = self.mode.default_chunk(self.chunk);
        self.mode.check_family(&self.proto)
    }
}

/// The per-layer family plan this client runs, from the server's reply: the
/// client's own (which the server must have echoed), or with `--plan auto`
/// (`Expect::any_family_plan`) the server's, checked here (indices into
/// [`engine::MIX_FAMILIES`], at most one per plan step, each family one
/// this client's mode can run; the length is checked against the plan by
/// [`engine::make_nonlinear`]). Untrusted input: sizes checked first.
pub(crate) fn server_family_plan(opts: &Options, r: &Value) -> Result<Option<Arc<Vec<u8>>>> {
    let theirs = r.get("family_plan").cloned().unwrap_or(Value::Null);
    let mine = json!(opts.family_plan.as_deref());
    if theirs == mine {
        return Ok(opts.family_plan.clone());
    }
    if !(opts.expect.any_family_plan && opts.family_plan.is_none()) {
        return Err(Error::Peer(format!("per-layer family plan mismatch: this client runs {mine}, the server runs {theirs} (indices into {:?}, one per layer; `--plan auto` runs the server's)", engine::MIX_FAMILIES)));
    }
    let arr = theirs.as_array().ok_or_else(|| Error::Protocol("server hello: the family plan is not a list".into()))?;
    if arr.len() > crate::model::MAX_NODES {
        return Err(Error::Protocol(format!("server hello: a family plan of {} entries (at most {})", arr.len(), crate::model::MAX_NODES)));
    }
    let mix = arr
        .iter()
        .map(|v| v.as_u64().filter(|&i| (i as usize) < engine::MIX_FAMILIES.len()).map(|i| i as u8))
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(|| Error::Protocol(format!("server hello: a family plan entry is not an index into {:?}", engine::MIX_FAMILIES)))?;
    for &i in &mix {
        opts.mode.check_family(engine::MIX_FAMILIES[i as usize]).map_err(|e| Error::Peer(format!("the server's family plan needs a family this client cannot run: {e}")))?;
    }
    Ok(Some(Arc::new(mix)))
}

/// Server side of a CNN-engine session's set-up: checks the client's hello
/// (family, mode, family plan), fits and admits the session, opens the
/// correlation provider, replies, and has the provider complete the
/// set-up ([`crate::provider::server_correlations`]); then "ready". A
/// refusal is sent to the client as `{"ok":false,…}` before the error is
/// returned. Reached through [`crate::provider::server_engine`].
pub(crate) fn server_open(ch: &mut dyn Channel, model: &Model, plan: &Plan, opts: &Options, hello: &Value) -> Result<(EngineCorrelations, hush_transport::admission::Reservation)> {
    let refuse = |ch: &mut dyn Channel, msg: String| -> Error {
        let _ = ch.send(json!({"ok": false, "error": msg}).to_string().as_bytes());
        Error::Protocol(msg)
    };
    if let Err(msg) = check_client_mode(hello, opts) {
        return Err(refuse(ch, msg));
    }
    let mine = json!(opts.family_plan.as_deref());
    let theirs = hello.get("family_plan").cloned().unwrap_or(Value::Null);
    // a client with `--plan auto` runs the server's plan (it sends none)
    let adopts = theirs.is_null() && hello.get("any_family_plan").and_then(Value::as_bool) == Some(true);
    if mine != theirs && !adopts {
        return Err(refuse(ch, format!("per-layer family plan mismatch: the client runs {theirs}, this server runs {mine} (indices into {:?}, one per layer)", engine::MIX_FAMILIES)));
    }
    if opts.family_plan.is_some() {
        if let Err(msg) = opts.mode.check_family_plan(&opts.proto) {
            return Err(refuse(ch, msg));
        }
    }
    let proto = match crate::hello::negotiate_family(hello, opts) {
        Ok(p) => p,
        Err(msg) => return Err(refuse(ch, msg)),
    };
    // a client that names no budget gets none (it would not pre-deal);
    // a provider that deals nothing ahead gets none either
    let predeal_mem = predeal_budget(opts, hello.get("predeal_mem").and_then(Value::as_u64).unwrap_or(0).min(opts.predeal_mem));
    let (chunk, predeal_mem) = fit_for_client(model, plan, &proto, hello, opts.chunk, predeal_mem);
    let (chunk, predeal_mem, admitted) = match crate::limits::admit(&opts.limits, model, plan, &proto, chunk, predeal_mem) {
        Ok(a) => a,
        Err(msg) => return Err(refuse(ch, msg)),
    };
    // the dealer session's budget for dealt-but-unclaimed shares, from this
    // model (issue 33): a party runs ahead of its peer by at most the
    // session's pre-dealing budget and one step's dealing (the lookahead)
    let announce = crate::budget::lookahead_bytes(plan, &proto, chunk).ok().map(|l| 2 * (predeal_mem + l) + SESSION_MEM_SLACK);
    let provider = match server_provider_for(opts, announce) {
        Ok(p) => p,
        Err(e) => {
            let _ = ch.send(json!({"ok": false, "error": format!("the server cannot provide correlations: {e}")}).to_string().as_bytes());
            return Err(e);
        }
    };
    let mut reply = json!({
        "ok": true, "bits": plan.cfg.bits, "frac": plan.cfg.frac, "proto": proto, "chunk": chunk,
        "predeal_mem": predeal_mem, "architecture": model.header_json, "family_plan": opts.family_plan.as_deref(),
    });
    mode_fields(&mut reply, opts, &provider);
    let setup = match server_engine_setup(opts, model, plan, hello, &mut reply) {
        Ok(s) => s,
        Err(msg) => return Err(refuse(ch, msg)),
    };
    ch.send(reply.to_string().as_bytes())?;
    let c = server_correlations(ch, model, plan, opts, provider.module, setup, &proto, chunk, predeal_mem).map_err(client_left_after_hello)?;
    ch.send(READY).map_err(|e| client_left_after_hello(e.into()))?;
    Ok((c, admitted))
}

/// A client that checks the server's hello and refuses it (a `--bits`,
/// `--frac`, `--proto` or `--model-digest` it requires, its memory budget)
/// leaves without a word: the server's next step sees only "peer
/// disconnected". Said as what it most likely is, so the server's log
/// shows why the session ended (the client's own error names the setting).
fn client_left_after_hello(e: Error) -> Error {
    match e {
        Error::Transport(hush_transport::Error::Disconnected) | Error::Tee(hush_tee::Error::Transport(hush_transport::Error::Disconnected)) => Error::Peer(
            "the client left right after the server's hello: it refused the server's settings (a --bits, --frac, --proto or --model-digest it requires, or its memory budget; the client's error names which)".into(),
        ),
        e => e,
    }
}

/// The server's "ready" message: sent, unasked, when its offline work for
/// the next inference (session set-up, pre-dealing) is done. A client
/// waits for it before it sends an inference request "I" and starts its
/// online phase (and clock), so a client's online time never includes the
/// server's offline tail (in dealer mode the server's pre-dealing takes
/// longer than the client's, whose shares are seeded). The last one of a
/// session may go unread: a client that is done sends "Q" (or leaves).
pub(crate) const READY: &[u8] = b"R";

/// The first inference's pre-dealing time inside a client's set-up (its
/// report counts it apart from the session's set-up).
fn eng_predeal_secs(e: &ClientEngine) -> f64 {
    match e {
        ClientEngine::Engine(c) => c.pre.secs,
        ClientEngine::Crisp { .. } => 0.0,
    }
}

/// Waits for the server's [`READY`].
fn await_ready(ch: &mut dyn Channel) -> Result<()> {
    match ch.recv()?.as_slice() {
        b"R" => Ok(()),
        _ => Err(Error::Protocol("expected the server's ready message".into())),
    }
}

pub(crate) fn recv_json(ch: &mut dyn Channel, what: &str) -> Result<Value> {
    let b = ch.recv()?;
    if b.len() > 16 << 20 {
        return Err(Error::Protocol(format!("{what}: message too large")));
    }
    serde_json::from_slice(&b).map_err(|e| Error::Protocol(format!("{what}: not JSON ({e})")))
}

/// The heap meter of this process, if the binary installed one (the
/// `hush` binary installs hush-bench's counting allocator).
static PROBE: std::sync::OnceLock<MemProbe> = std::sync::OnceLock::new();

/// Installs the process's per-party heap meter: clients with a `max_mem`
/// then enforce it as measured peak (see [`engine::MemGuard`]).
pub fn install_mem_probe(p: MemProbe) {
    let _ = PROBE.set(p);
}

/// The installed heap meter.
pub fn mem_probe() -> Option<MemProbe> {
    PROBE.get().copied()
}

/// The server's choice of chunk and pre-dealing budget for a client that
/// states a memory budget in its hello (`max_mem`): [`crate::budget::fit`]
/// on the model; a budget below the floor leaves the server's values (the
/// client refuses, naming the floor).
fn fit_for_client(model: &Model, plan: &Plan, proto: &str, hello: &Value, chunk: usize, predeal_mem: u64) -> (usize, u64) {
    match hello.get("max_mem").and_then(Value::as_u64) {
        Some(b) => match crate::budget::fit(model, plan, proto, chunk, predeal_mem, b) {
            Ok(f) => (f.chunk, f.predeal_mem),
            Err(_) => (chunk, predeal_mem),
        },
        None => (chunk, predeal_mem),
    }
}

/// Summary of one party's inference.
#[derive(Clone, Debug, Default)]
pub struct PartyReport {
    pub layers: Vec<LayerCost>,
    pub online_secs: f64,
    pub offline_secs: f64,
    pub offline_bytes_sent: u64,
    pub offline_bytes_recv: u64,
    /// Rounds of the offline phase (hello, set-up; the session's first
    /// inference).
    pub offline_rounds: u32,
    pub module: String,
    /// Pre-dealing for this inference (included in `offline_secs`).
    pub predeal_secs: f64,
    pub predeal_items: usize,
    pub predeal_total_items: usize,
    pub predeal_est_bytes: u64,
    pub predeal_crossings: u64,
    /// The session's pre-dealing budget.
    pub predeal_mem: u64,
    /// Time this client waited for the server's "ready" (the server's
    /// offline tail: its own pre-dealing, and in dealer mode the dealer's
    /// work on its dealing plan); included in `offline_secs`.
    pub ready_wait_secs: f64,
    /// HE modes: the COT source's LPN set and the RLWE parameter set.
    pub cot_set: Option<String>,
    pub he_params: Option<String>,
    /// `malicious-client` mode: this party's CRISP costs of the inference
    /// (offline/online split, dealer link, checked openings).
    pub crisp: Option<crate::crisp_run::CrispCost>,
}

fn totals(layers: &[LayerCost]) -> (u64, u64, u32, u64, f64) {
    let sent = layers.iter().map(|l| l.bytes_sent).sum();
    let recv = layers.iter().map(|l| l.bytes_recv).sum();
    let rounds = layers.iter().map(|l| l.rounds).sum();
    let cross = layers.iter().map(|l| l.module_crossings).sum();
    let msecs = layers.iter().map(|l| l.module_secs).sum();
    (sent, recv, rounds, cross, msecs)
}

/// Runs one server session on an accepted channel until the client ends it.
/// Returns the number of inferences served.
pub fn serve_session(ch: &mut dyn Channel, model: &Model, plan: &Plan, opts: &Options) -> Result<usize> {
    let hello = recv_json(ch, "client hello")?;
    if hello.get("hush").and_then(Value::as_str) != Some("inference") || hello.get("version").and_then(Value::as_u64) != Some(1) {
        let _ = ch.send(json!({"ok": false, "error": "not a hush inference client (version 1)"}).to_string().as_bytes());
        return Err(Error::Protocol("client hello: not a hush inference client".into()));
    }
    let mut eng = server_engine(ch, model, plan, opts, &hello)?;
    let mut served = 0usize;
    let r = (|| loop {
        let ctl = match ch.recv() {
            // the client ended the session before its first request
            // (e.g. it refused the server's settings once set up)
            Err(hush_transport::Error::Disconnected) if served == 0 => {
                return Err(Error::Peer(
                    "the client left before its first inference: it refused the server's settings (a --bits, --frac, --proto or --model-digest it requires, or its memory budget) or its input does not fit the model; the client's error names which".into(),
                ))
            }
            r => r?,
        };
        match ctl.as_slice() {
            b"Q" => return Ok(served),
            b"I" => {
                eng.infer(&mut *ch, model, plan, served as u64, opts.lookahead)?;
                served += 1;
                // offline for the next inference (the client does the same)
                eng.predeal(plan, served as u64)?;
                match ch.send(READY) {
                    // a client that is done may have left already
                    Err(hush_transport::Error::Disconnected) => return Ok(served),
                    r => r?,
                }
            }
            _ => return Err(Error::Protocol("unknown session control message".into())),
        }
    })();
    r.map_err(|e| diagnose(eng.module_mut(), &opts.mode, e))
}

/// The client's side of a session.
pub struct ClientSession<C: Channel> {
    ch: C,
    pub model: Model,
    pub plan: Plan,
    /// The engine and correlations the mode's provider built
    /// ([`crate::provider::client_engine`]).
    eng: ClientEngine,
    next: u64,
    pub proto: String,
    /// Session setup (hello, seed agreement), without pre-dealing.
    pub offline_secs: f64,
    offline_cost: hush_transport::Cost,
    /// The memory budget's fit (chunk, pre-dealing, estimate, floor), when
    /// the client has a budget.
    pub mem_fit: Option<crate::budget::MemFit>,
    /// Enforces the budget as measured peak (a heap meter is installed).
    guard: Option<engine::MemGuard>,
    pub chunk: usize,
    /// The session's pre-dealing budget (the smaller of both parties').
    pub predeal_mem: u64,
    /// Whether to pre-deal the next inference after each one (the server
    /// of [`serve_session`] always does: keep it on with such a server).
    pub predeal_next: bool,
    /// See [`Options::lookahead`].
    pub lookahead: bool,
    mode: Mode,
    /// HE modes: the COT set and RLWE parameters the server chose.
    pub cot_set: Option<String>,
    pub he_params: Option<String>,
}

/// The result of one private inference at the client.
#[derive(Clone, Debug)]
pub struct Inference {
    pub logits: Vec<f64>,
    pub shape: Vec<usize>,
    pub report: PartyReport,
}

impl<C: Channel> ClientSession<C> {
    /// Hello, architecture, module seed agreement (the offline part).
    /// With `opts.max_mem` and an installed heap meter the budget is
    /// enforced as measured peak.
    pub fn start(ch: C, opts: &Options) -> Result<Self> {
        Self::start_probed(ch, opts, mem_probe())
    }

    /// [`ClientSession::start`] with this heap meter (none: the budget
    /// only chooses the sizes).
    pub fn start_probed(mut ch: C, opts: &Options, probe: Option<MemProbe>) -> Result<Self> {
        let t0 = Instant::now();
        let mut hello = json!({"hush": "inference", "version": 1, "proto": opts.proto, "proto_explicit": opts.expect.proto, "predeal_mem": opts.predeal_mem, "mode": opts.mode.name(), "family_plan": opts.family_plan.as_deref(), "any_family_plan": opts.expect.any_family_plan && opts.family_plan.is_none()});
        // the mode's own checks and hello fields (a missing dealer pin
        // fails before the server does any work)
        client_hello(opts, &mut hello)?;
        // the heap meter counts this party from here (its thread; an
        // in-process module runs on it too)
        let probe = if opts.max_mem.is_some() { probe } else { None };
        if let Some(p) = probe {
            (p.enter)(CLIENT as usize);
        }
        if let Some(b) = opts.max_mem {
            hello["max_mem"] = json!(b);
        }
        ch.send(hello.to_string().as_bytes())?;
        let r = recv_json(&mut ch, "server hello")?;
        if r.get("ok").and_then(Value::as_bool) != Some(true) {
            return Err(Error::Peer(r.get("error").and_then(Value::as_str).unwrap_or("server refused the session").to_string()));
        }
        crate::hello::check_reply(opts, &r)?;
        check_reply_fields(opts, &r)?;
        let field = |k: &str| r.get(k).and_then(Value::as_u64).ok_or_else(|| Error::Protocol(format!("server hello lacks {k}")));
        let small = |k: &str| field(k).and_then(|v| u32::try_from(v).map_err(|_| Error::Protocol(format!("server hello: {k} = {v} out of range"))));
        let cfg = FixedConfig::new(small("bits")?, small("frac")?)?;
        let chunk = field("chunk")? as usize;
        if chunk == 0 || chunk > 1 << 24 {
            return Err(Error::Protocol(format!("server hello: chunk {chunk} out of range")));
        }
        let proto = r.get("proto").and_then(Value::as_str).unwrap_or("").to_string();
        let family_plan = server_family_plan(opts, &r)?;
        let arch = r.get("architecture").and_then(Value::as_str).ok_or_else(|| Error::Protocol("server hello lacks the architecture".into()))?;
        let model = Model::from_architecture(arch)?;
        let plan = Plan::new(&model, cfg)?;
        let predeal_mem = r.get("predeal_mem").and_then(Value::as_u64).unwrap_or(0).min(opts.predeal_mem);
        // the budget: refused below the floor (before this client sends
        // anything more, let alone its input); the server's chunk and
        // pre-dealing budget must fit it
        let mem_fit = match opts.max_mem {
            Some(budget) => {
                let f = crate::budget::fit(&model, &plan, &proto, chunk, predeal_mem, budget)?;
                let est = crate::budget::client_estimate_total(&model, &plan, &proto, chunk, predeal_mem, Some(budget))?;
                if est > budget {
                    return Err(Error::Memory(format!(
                        "the server's chunk {chunk} and pre-dealing budget {} MiB need about {:.1} MiB at this client, above --max-mem {:.1} MiB",
                        predeal_mem >> 20,
                        est as f64 / 1048576.0,
                        budget as f64 / 1048576.0
                    )));
                }
                // the look-ahead where the rest of the budget holds it
                let la = lookahead_bytes(opts, &plan, &proto, chunk)?;
                let lookahead = if est + la <= budget { la } else { 0 };
                Some(crate::budget::MemFit { chunk, predeal_mem, lookahead, estimate: est + lookahead, ..f })
            }
            None => None,
        };
        let guard = match (probe, mem_fit) {
            (Some(p), Some(f)) => Some(engine::MemGuard { peak: p.peak, tag: CLIENT as usize, budget: f.budget, estimate: f.estimate }),
            _ => None,
        };
        let module = client_provider(opts, &r)?;
        opts.mode.check_family(&proto).map_err(|e| Error::Peer(format!("the server chose a family this client cannot run: {e}")))?;
        let predeal_mem = predeal_budget(opts, predeal_mem);
        let (eng, (cot_set, he_params)) = client_engine(&mut ch, module, opts, &r, &model, &plan, &proto, family_plan.as_deref().map(|v| v.as_slice()), chunk, predeal_mem, guard.as_ref())?;
        // session set-up, without the first inference's pre-dealing
        let offline_secs = t0.elapsed().as_secs_f64() - eng_predeal_secs(&eng);
        let offline_cost = ch.cost();
        Ok(ClientSession {
            ch,
            model,
            plan,
            eng,
            next: 0,
            proto,
            offline_secs,
            offline_cost,
            mem_fit,
            guard,
            chunk,
            predeal_mem,
            predeal_next: true,
            lookahead: opts.lookahead && mem_fit.map_or(true, |f| f.lookahead > 0),
            mode: opts.mode.clone(),
            cot_set,
            he_params,
        })
    }

    /// Checks an input's shape against the model's (a leading batch
    /// dimension of 1 is accepted).
    pub fn check_shape(&self, shape: &[usize]) -> Result<()> {
        let want = &self.model.input_shape;
        let ok = shape == want.as_slice() || (shape.len() == want.len() + 1 && shape[0] == 1 && &shape[1..] == want.as_slice());
        if !ok {
            return Err(Error::Input(format!("input of shape {shape:?}, the model expects {want:?} (optionally with a leading batch dimension of 1)")));
        }
        Ok(())
    }

    /// One private inference; `progress(done, total)` after each layer.
    pub fn infer(&mut self, shape: &[usize], x: &[f64], progress: impl FnMut(usize, usize)) -> Result<Inference> {
        self.check_shape(shape)?;
        self.infer_checked(x, progress).map_err(|e| diagnose(self.eng.module_mut(), &self.mode, e))
    }

    fn infer_checked(&mut self, x: &[f64], mut progress: impl FnMut(usize, usize)) -> Result<Inference> {
        let xq = self.plan.encode_input(x)?;
        if let ClientEngine::Crisp { .. } = self.eng {
            let tw = Instant::now();
            let (y, c) = self.crisp_ring(&xq)?;
            let ready_wait_secs = (tw.elapsed().as_secs_f64() - c.offline_s - c.online_s).max(0.0);
            progress(self.plan.steps.len(), self.plan.steps.len());
            let report = PartyReport {
                layers: c.layers.clone(),
                online_secs: c.online_s,
                offline_secs: self.offline_secs + c.offline_s + ready_wait_secs,
                ready_wait_secs,
                offline_bytes_sent: c.offline_bytes_sent,
                offline_bytes_recv: c.offline_bytes_recv,
                module: self.eng.module().describe(),
                crisp: Some(CrispCost { layers: Vec::new(), ..c }),
                ..Default::default()
            };
            return Ok(Inference { logits: self.plan.decode(&y), shape: self.model.output_shape().to_vec(), report });
        }
        let ClientEngine::Engine(c) = &mut self.eng else { unreachable!("CRISP sessions returned above") };
        let pd = (c.pre.secs, c.pre.items, c.pre.total_items, c.pre.est_bytes, c.pre.crossings);
        let tw = Instant::now();
        await_ready(&mut self.ch)?;
        let ready_wait_secs = tw.elapsed().as_secs_f64();
        let t0 = Instant::now();
        self.ch.send(b"I")?;
        let mut p = c.party(CLIENT, &mut self.ch, self.next, self.guard, self.lookahead);
        let (share, layers) = engine::run(&self.plan, &mut p, xq, progress)?;
        let theirs = linear::recv_ring(&mut self.ch, &self.plan.cfg, share.len(), "server's share of the logits")?;
        let online_secs = t0.elapsed().as_secs_f64();
        self.next += 1;
        let m = self.plan.cfg.mask();
        let y: Vec<u64> = share.iter().zip(&theirs).map(|(a, b)| a.wrapping_add(*b) & m).collect();
        let report = PartyReport {
            layers,
            online_secs,
            offline_secs: self.offline_secs + pd.0 + ready_wait_secs,
            ready_wait_secs,
            offline_bytes_sent: self.offline_cost.bytes_sent,
            offline_bytes_recv: self.offline_cost.bytes_recv,
            offline_rounds: self.offline_cost.rounds,
            module: self.eng.module().describe(),
            predeal_secs: pd.0,
            predeal_items: pd.1,
            predeal_total_items: pd.2,
            predeal_est_bytes: pd.3,
            predeal_crossings: pd.4,
            predeal_mem: self.predeal_mem,
            cot_set: self.cot_set.clone(),
            he_params: self.he_params.clone(),
            crisp: None,
        };
        self.after_inference()?;
        Ok(Inference { logits: self.plan.decode(&y), shape: self.model.output_shape().to_vec(), report })
    }

    /// Offline for the next inference, in lock-step with the server.
    fn after_inference(&mut self) -> Result<()> {
        if let ClientEngine::Engine(c) = &mut self.eng {
            if self.predeal_next {
                c.predeal(&self.plan, self.next, self.guard.as_ref())?;
            } else {
                c.clear_predealt();
            }
        }
        Ok(())
    }

    /// What is pre-dealt for the next inference (nothing in a CRISP session).
    pub fn predealt(&self) -> &engine::Predealt {
        static NONE: std::sync::OnceLock<engine::Predealt> = std::sync::OnceLock::new();
        match &self.eng {
            ClientEngine::Engine(c) => &c.pre,
            ClientEngine::Crisp { .. } => NONE.get_or_init(engine::Predealt::default),
        }
    }

    /// The raw ring output of one inference (tests compare it to the reference).
    pub fn infer_ring(&mut self, x: &[u64]) -> Result<Vec<u64>> {
        Ok(self.infer_ring_costs(x)?.0)
    }

    /// [`ClientSession::infer_ring`] with the client's per-layer costs.
    pub fn infer_ring_costs(&mut self, x: &[u64]) -> Result<(Vec<u64>, Vec<LayerCost>)> {
        self.infer_ring_inner(x).map_err(|e| diagnose(self.eng.module_mut(), &self.mode, e))
    }

    fn infer_ring_inner(&mut self, x: &[u64]) -> Result<(Vec<u64>, Vec<LayerCost>)> {
        let ClientEngine::Engine(c) = &mut self.eng else {
            let (y, c) = self.crisp_ring(x)?;
            return Ok((y, c.layers));
        };
        await_ready(&mut self.ch)?;
        self.ch.send(b"I")?;
        let mut p = c.party(CLIENT, &mut self.ch, self.next, self.guard, self.lookahead);
        let (share, layers) = engine::run(&self.plan, &mut p, x.to_vec(), |_, _| {})?;
        let theirs = linear::recv_ring(&mut self.ch, &self.plan.cfg, share.len(), "server's share of the logits")?;
        self.next += 1;
        let m = self.plan.cfg.mask();
        let y = share.iter().zip(&theirs).map(|(a, b)| a.wrapping_add(*b) & m).collect();
        self.after_inference()?;
        Ok((y, layers))
    }

    /// `malicious-client` mode: one inference of an encoded input — wait
    /// for "ready", `I`, then CRISP's offline and online phases. The
    /// server's abort is an error, with no output.
    fn crisp_ring(&mut self, xq: &[u64]) -> Result<(Vec<u64>, CrispCost)> {
        if xq.len() != self.plan.input_len {
            return Err(Error::Input(format!("input of {} elements, the model expects {}", xq.len(), self.plan.input_len)));
        }
        let ClientEngine::Crisp { crisp: c, .. } = &mut self.eng else { return Err(Error::Protocol("not a malicious-client session".into())) };
        await_ready(&mut self.ch)?;
        self.ch.send(b"I")?;
        let r = c.infer(&mut self.ch, &self.model, &self.plan, xq)?;
        self.next += 1;
        Ok(r)
    }

    /// Ends the session politely.
    pub fn close(mut self) -> Result<()> {
        self.ch.send(b"Q")?;
        Ok(())
    }

    pub fn channel(&self) -> &C {
        &self.ch
    }
}

/// Applies the model's final Softmax/ArgMax to revealed logits (in the clear, at the client).
pub fn postprocess(post: crate::model::Post, logits: &[f64]) -> Vec<f64> {
    match post {
        crate::model::Post::None => logits.to_vec(),
        crate::model::Post::Softmax => {
            let mx = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = logits.iter().map(|v| (v - mx).exp()).collect();
            let s: f64 = e.iter().sum();
            e.iter().map(|v| v / s).collect()
        }
        crate::model::Post::Argmax => vec![argmax(logits) as f64],
    }
}

pub fn argmax(v: &[f64]) -> usize {
    let mut best = 0;
    for (i, x) in v.iter().enumerate() {
        if *x > v[best] {
            best = i;
        }
    }
    best
}

/// A two-party run in this process: the server on a thread, the client
/// here, over an in-memory pair or TCP loopback, with `opts.profile`.
pub struct LocalRun {
    pub inference: Inference,
    pub server_layers: Vec<LayerCost>,
    pub server_online_secs: f64,
    pub transport: String,
    /// Whether the two parties' link was TLS.
    pub tls: bool,
    /// The whole session at the server's channel (hello, module seed
    /// agreement, pre-dealing, inference): payload bytes both ways, and
    /// what crossed the socket (frame headers, and TLS records with the
    /// handshake when `tls`).
    pub session_bytes: u64,
    pub session_socket_bytes: u64,
    /// Peak heap of (server, client) during the session, when measured
    /// with a [`MemProbe`].
    pub peak_mem: Option<(i64, i64)>,
    /// Peak heap of untagged threads (TCP I/O threads of an emulated
    /// network, a local dealer's threads), when measured.
    pub untagged_peak_mem: Option<i64>,
    /// The client's memory budget fit, when it had a budget.
    pub mem_fit: Option<crate::budget::MemFit>,
    /// How the client profile's CPU limit was enforced.
    pub client_profile_method: String,
}

/// A per-thread heap meter (the counting allocator of `hush-bench`,
/// handed in by the `hush` binary): `enter(party)` tags the calling thread
/// and restarts its high-water mark, `peak(party)` reads it.
#[derive(Clone, Copy)]
pub struct MemProbe {
    pub enter: fn(usize),
    pub peak: fn(usize) -> i64,
    /// Restarts a party's high-water mark at its current level (the base
    /// stays where `enter` set it): per-step peaks (`hush plan --max-mem`).
    pub restart_peak: fn(usize),
    /// How the meter counts (reported with the figures).
    pub method: &'static str,
}

/// Runs one private inference of `x` (shape `shape`) on `model` with both
/// parties in this process.
pub fn run_local(model: Arc<Model>, shape: &[usize], x: &[f64], opts: &Options, tcp: bool, progress: impl FnMut(usize, usize)) -> Result<LocalRun> {
    run_local_probed(model, shape, x, opts, tcp, progress, None)
}

/// [`run_local`] measuring each party's peak heap with `probe` (server =
/// party 0 on its thread, client = party 1 on the calling thread; module
/// processes and the dealer are not counted).
pub fn run_local_probed(
    model: Arc<Model>,
    shape: &[usize],
    x: &[f64],
    opts: &Options,
    tcp: bool,
    progress: impl FnMut(usize, usize),
    probe: Option<MemProbe>,
) -> Result<LocalRun> {
    let plan = Arc::new(Plan::new(&model, opts.cfg)?);
    if let Some(b) = opts.max_mem {
        // below the floor: refused before any channel exists
        crate::budget::fit(&model, &plan, &opts.proto, opts.chunk, opts.predeal_mem, b)?;
    }
    let probe = probe.or_else(mem_probe);
    let copts = ChannelOptions { profile: opts.profile.clone(), ..Default::default() };
    // Over TCP each party makes its own end on its own thread, after the
    // heap meter has tagged it, so that a channel's I/O thread (emulated
    // networks) counts for the party that owns it.
    let (a, b, wake) = if tcp {
        let l = TcpListener::bind("127.0.0.1:0").map_err(|e| Error::Io(format!("loopback listener: {e}")))?;
        let addr = l.local_addr().map_err(|e| Error::Io(e.to_string()))?;
        let (sa, sb) = loopback_security(opts.link.is_tls())?;
        (End::Accept(l, copts.clone(), sa), End::Connect(addr, copts, sb), Some(addr))
    } else {
        let (a, b) = MemChannel::pair_with(copts);
        (End::Ready(Box::new(a)), End::Ready(Box::new(b)), None)
    };
    let (m2, p2, o2) = (model.clone(), plan.clone(), opts.clone());
    let server = std::thread::spawn(move || -> Result<(Vec<LayerCost>, f64, hush_transport::Cost, i64)> {
        if let Some(p) = probe {
            (p.enter)(SERVER as usize);
        }
        let mut ch = a.open()?;
        // one inference, with the server's own metering
        let hello = recv_json(&mut ch, "client hello")?;
        let mut eng = server_engine(&mut *ch, &m2, &p2, &o2, &hello)?;
        if ch.recv()? != b"I" {
            return Err(Error::Protocol("expected an inference".into()));
        }
        let (layers, secs) = eng.infer(&mut *ch, &m2, &p2, 0, o2.lookahead)?;
        let _ = ch.recv(); // Q
        let peak = probe.map(|p| (p.peak)(SERVER as usize)).unwrap_or(0);
        Ok((layers, secs, ch.cost(), peak))
    });
    if let Some(p) = probe {
        (p.enter)(CLIENT as usize);
    }
    // the client profile's CPU limit on this (the client's) thread, lifted
    // when `limit` goes out of scope with the channel
    let limit = CpuLimit::apply(opts.client_profile.cpu_share());
    let client_profile_method = limit.method().to_string();
    let mut mem_fit = None;
    let client = (|| -> Result<Inference> {
        let b = b.open().inspect_err(|_| {
            // wake the server's accept so that it fails too
            if let Some(addr) = wake {
                let _ = std::net::TcpStream::connect(addr);
            }
        })?;
        let mut s = ClientSession::start_probed(Throttled { inner: b, limit }, opts, probe)?;
        mem_fit = s.mem_fit;
        // one inference only: nothing to pre-deal after it (the server
        // thread above does not either)
        s.predeal_next = false;
        let r = s.infer(shape, x, progress)?;
        s.close()?;
        Ok(r)
    })();
    let client_peak = probe.map(|p| (p.peak)(CLIENT as usize)).unwrap_or(0);
    let srv = server.join().map_err(|_| Error::Protocol("server thread panicked".into()))?;
    let inference = client?;
    let (server_layers, server_online_secs, sc, server_peak) = srv?;
    Ok(LocalRun {
        inference,
        server_layers,
        server_online_secs,
        transport: if tcp { "tcp" } else { "mem" }.into(),
        tls: tcp && opts.link.is_tls(),
        session_bytes: sc.bytes_sent + sc.bytes_recv,
        session_socket_bytes: socket_bytes(&sc),
        peak_mem: probe.map(|_| (server_peak, client_peak)),
        untagged_peak_mem: probe.map(|p| (p.peak)(2)),
        mem_fit,
        client_profile_method,
    })
}

/// One party's end of a local run's link, made on that party's thread.
enum End {
    Ready(Box<dyn Channel>),
    Accept(TcpListener, ChannelOptions, hush_transport::LinkSecurity),
    Connect(SocketAddr, ChannelOptions, hush_transport::LinkSecurity),
}

impl End {
    fn open(self) -> Result<Box<dyn Channel>> {
        Ok(match self {
            End::Ready(c) => c,
            End::Accept(l, o, s) => Box::new(TcpChannel::accept_with(&l, o, &s)?),
            End::Connect(a, o, s) => Box::new(TcpChannel::connect_with(a, o, &s)?),
        })
    }
}

/// A loopback link's two ends' security: TLS with ephemeral identities
/// pinned to each other (as `hush_transport::peering::loopback_pair`), or
/// plaintext.
pub(crate) fn loopback_security(tls: bool) -> Result<(hush_transport::LinkSecurity, hush_transport::LinkSecurity)> {
    use hush_transport::{Identity, LinkSecurity, PeerCheck, TlsSettings};
    if !tls {
        return Ok((LinkSecurity::Insecure, LinkSecurity::Insecure));
    }
    let (a, b) = (Arc::new(Identity::generate()?), Arc::new(Identity::generate()?));
    let sa = LinkSecurity::Tls(TlsSettings { identity: a.clone(), peer: PeerCheck::Pinned(vec![b.fingerprint()]), require_client_cert: true });
    let sb = LinkSecurity::Tls(TlsSettings { identity: b, peer: PeerCheck::Pinned(vec![a.fingerprint()]), require_client_cert: false });
    Ok((sa, sb))
}

/// Bytes that crossed a channel's socket, both ways.
fn socket_bytes(c: &hush_transport::Cost) -> u64 {
    c.socket_bytes_sent + c.socket_bytes_recv
}

/// A report of a local run as one JSON object.
pub fn run_json(model: &Model, run: &LocalRun, opts: &Options) -> Value {
    let c = &run.inference.report;
    let (c_sent, c_recv, rounds, c_cross, c_msecs) = totals(&c.layers);
    let (_, _, _, s_cross, s_msecs) = totals(&run.server_layers);
    let layers: Vec<Value> = c
        .layers
        .iter()
        .zip(run.server_layers.iter().map(Some).chain(std::iter::repeat(None)))
        .map(|(cl, sl)| {
            let mut v = cl.json();
            v["client_secs"] = json!(cl.secs);
            if let Some(s) = sl {
                v["server_secs"] = json!(s.secs);
                v["server_module_secs"] = json!(s.module_secs);
                v["server_module_crossings"] = json!(s.module_crossings);
                v["macs"] = json!(s.macs);
            }
            v
        })
        .collect();
    let mut v = json!({
        "bench": "infer",
        // the record contract of every `hush bench` record: the online
        // phase's wall time and payload bytes, rounds, and setup (session
        // set-up and pre-dealing) time
        "wall_s": c.online_secs,
        "bytes": c_sent + c_recv,
        "setup_s": c.offline_secs,
        "model": model.name,
        "proto": opts.proto,
        "bits": opts.cfg.bits,
        "frac": opts.cfg.frac,
        "net": opts.profile.name,
        "transport": run.transport,
        "tls": run.tls,
        "link": if run.tls { "TLS 1.3 (ephemeral identities, both pinned)" } else if run.transport == "tcp" { "plaintext (--insecure)" } else { "in-memory" },
        "session_bytes": run.session_bytes,
        "session_socket_bytes": run.session_socket_bytes,
        "mode": opts.mode.name(),
        "tee": c.module,
        "layers": model.nodes.len(),
        "online_s": c.online_secs,
        "server_online_s": run.server_online_secs,
        "offline_s": c.offline_secs,
        "predeal_s": c.predeal_secs,
        "ready_wait_s": c.ready_wait_secs,
        "predeal_mem": c.predeal_mem,
        "predeal_items": c.predeal_items,
        "predeal_total_items": c.predeal_total_items,
        "predeal_est_bytes": c.predeal_est_bytes,
        "predeal_module_crossings": c.predeal_crossings,
        "offline_bytes": c.offline_bytes_sent + c.offline_bytes_recv,
        "online_bytes_client_to_server": c_sent,
        "online_bytes_server_to_client": c_recv,
        "online_bytes": c_sent + c_recv,
        "rounds": rounds,
        "client_module_crossings": c_cross,
        "client_module_s": c_msecs,
        "server_module_crossings": s_cross,
        "server_module_s": s_msecs,
        // bytes across each party's module boundary during the online phase
        // (dealer mode: its link to the dealer; seeded kinds cross as sub-keys)
        "client_module_bytes": c.layers.iter().map(|l| l.module_bytes).sum::<u64>(),
        "server_module_bytes": run.server_layers.iter().map(|l| l.module_bytes).sum::<u64>(),
        // Module dealing is input-independent: what fits the pre-dealing
        // budget ran before the input existed (in offline_s); dealing_s is
        // the dealing left to the online phase (0 when everything was
        // pre-dealt). Both parties deal concurrently, so the online time
        // without it is estimated as online − the larger module time.
        "dealing_s": c_msecs.max(s_msecs),
        "online_excl_dealing_s": (c.online_secs - c_msecs.max(s_msecs)).max(0.0),
        "per_layer": layers,
    });
    if let Some((s, cl)) = run.peak_mem {
        v["server_peak_mem_bytes"] = json!(s);
        v["client_peak_mem_bytes"] = json!(cl);
        // the contract's per-party key: the client's (the bounded party)
        v["peak_mem_bytes"] = json!(cl);
        v["untagged_peak_mem_bytes"] = json!(run.untagged_peak_mem);
        v["client_peak_mem_counts"] = json!(client_mem_counts(opts, run.transport == "tcp"));
    }
    v["chunk"] = json!(run.mem_fit.map(|f| f.chunk).unwrap_or(opts.chunk));
    v["lookahead"] = json!(opts.lookahead && engine::lookahead_env() && run.mem_fit.map_or(true, |f| f.lookahead > 0));
    if let Some(f) = run.mem_fit {
        v["max_mem_bytes"] = json!(f.budget);
        v["max_mem_floor_bytes"] = json!(f.floor);
        v["client_mem_estimate_bytes"] = json!(f.estimate);
        v["lookahead_mem_bytes"] = json!(f.lookahead);
        v["max_mem_enforced"] = json!(if run.peak_mem.is_some() { "measured peak, checked after every layer and pre-dealt item" } else { "estimate only (no heap meter in this process)" });
        if let Some((_, cl)) = run.peak_mem {
            v["within_max_mem"] = json!((cl.max(0) as u64) <= f.budget);
        }
    }
    if let (Some(c), Some(h)) = (&c.cot_set, &c.he_params) {
        v["cot_set"] = json!(c);
        v["he_params"] = json!(h);
        v["cot_source"] = json!(if opts.mode.preset().cot == Some(Cot::Silent) { "silent (SilentFlow, module-expanded)" } else { "ferret" });
    }
    if let Some(cc) = &c.crisp {
        // malicious-client mode: the check passed before the release
        v["s"] = json!(opts.crisp.s);
        v["crisp_linear"] = json!(opts.crisp.linear);
        v["check"] = json!("passed");
        v["checked_openings"] = json!(cc.checked_openings);
        v["offline_bytes"] = json!(cc.offline_bytes);
        v["dealer_bytes_client"] = json!(cc.dealer_bytes);
        v["dealer_requests_client"] = json!(cc.dealer_requests);
    }
    v["client_profile"] = json!(opts.client_profile.name);
    v["client_profile_desc"] = json!(opts.client_profile.describe());
    v["client_profile_method"] = json!(run.client_profile_method);
    v
}

/// What the client's measured peak counts, for records.
pub fn client_mem_counts(opts: &Options, tcp: bool) -> String {
    let mut s = String::from("the client thread's heap: session, plan, activations, masks, dealt correlations, its messages");
    s.push_str(opts.mode.preset().client_holds(&opts.tee));
    if tcp && !opts.profile.is_none() {
        s.push_str(", and its channel's I/O thread (frames read ahead), when the heap meter tags it (the hush binary does)");
    }
    s
}

/// A running TCP server (many concurrent sessions).
pub struct ServerHandle {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    pub sessions_ok: Arc<AtomicU64>,
    pub sessions_failed: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerHandle {
    /// Stops accepting and waits for the accept loop (running sessions finish on their own).
    pub fn shutdown(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
    /// Blocks until the accept loop ends (never, unless it fails).
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts serving `model` on `addr`; each accepted connection is an
/// independent session on its own thread. `log` receives one line per
/// session end.
pub fn serve(model: Arc<Model>, addr: &str, opts: Options, log: Arc<dyn Fn(String) + Send + Sync>) -> Result<ServerHandle> {
    let plan = Arc::new(Plan::new(&model, opts.cfg)?);
    let o = opts.clone();
    serve_with(addr, opts, log, Arc::new(move |ch: &mut TcpChannel| serve_session(ch, &model, &plan, &o)))
}

/// A session handler of [`serve_with`]: runs one session on an accepted,
/// secured channel; returns the number of requests served.
pub type Session = Arc<dyn Fn(&mut TcpChannel) -> Result<usize> + Send + Sync>;

/// The accept loop of every hush server (CNN models, encoder graphs):
/// each connection on its own thread, set-up bounded, sessions capped (in
/// all and per source address), a dealer-mode server's dealer checked at
/// start, a failing or panicking session never taking the server down.
pub fn serve_with(addr: &str, opts: Options, log: Arc<dyn Fn(String) + Send + Sync>, session: Session) -> Result<ServerHandle> {
    check_dealer(&opts)?;
    let per_addr: Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>> = Arc::default();
    let listener = TcpListener::bind(addr).map_err(|e| Error::Io(format!("listen on {addr}: {e}")))?;
    let local = listener.local_addr().map_err(|e| Error::Io(e.to_string()))?;
    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let active = Arc::new(AtomicUsize::new(0));
    let (st, okc, fc) = (stop.clone(), ok.clone(), failed.clone());
    let sec = opts.link.accept_clients();
    // The accept loop only accepts: every connection — its channel set-up,
    // a refusal when the server is busy, and the session — runs on its own
    // thread, so a client that connects and then stalls (or is refused)
    // never blocks the next client.
    let thread = std::thread::spawn(move || {
        let mut next_id = 0u64;
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
            next_id += 1;
            let id = next_id;
            let Some(ticket) = crate::limits::enter_pending(&opts.limits, stream, id, &*log, &fc) else { continue };
            let (sess, o, l, okc, fc, act, sec, pa) = (session.clone(), opts.clone(), log.clone(), okc.clone(), fc.clone(), active.clone(), sec.clone(), per_addr.clone());
            std::thread::spawn(move || {
                let (stream, ticket) = ticket;
                let copts = ChannelOptions { profile: o.profile.clone(), max_buffered: crate::limits::session_buffer(o.limits.session_mem), ..Default::default() };
                // Mode preamble and TLS handshake (bounded by the
                // transport's handshake timeout) on this thread.
                let ch = TcpChannel::from_accepted(stream, copts, &sec);
                drop(ticket);
                let mut ch = match ch {
                    Ok(c) => c,
                    Err(e) => {
                        fc.fetch_add(1, Ordering::SeqCst);
                        l(format!("session {id}: connection failed: {e}"));
                        return;
                    }
                };
                let from_addr = pa.lock().map(|mut t| {
                    let n = t.entry(source).or_insert(0);
                    *n += 1;
                    *n
                });
                let leave_addr = || {
                    if let Ok(mut t) = pa.lock() {
                        if let Some(n) = t.get_mut(&source) {
                            *n -= 1;
                            if *n == 0 {
                                t.remove(&source);
                            }
                        }
                    }
                };
                if from_addr.map_or(true, |n| n > o.max_sessions_per_addr.max(1)) {
                    leave_addr();
                    ch.set_timeout(std::time::Duration::from_secs(5));
                    let _ = ch.recv();
                    let _ = ch.send(json!({"ok": false, "error": format!("too many sessions from this address (at most {} at once); try again later", o.max_sessions_per_addr.max(1))}).to_string().as_bytes());
                    fc.fetch_add(1, Ordering::SeqCst);
                    l(format!("session {id}: refused ({} sessions already open from {source}, --max-sessions-per-addr)", o.max_sessions_per_addr.max(1)));
                    return;
                }
                if act.fetch_add(1, Ordering::SeqCst) >= o.max_sessions {
                    act.fetch_sub(1, Ordering::SeqCst);
                    leave_addr();
                    // Answer the hello with a refusal, waiting briefly.
                    ch.set_timeout(std::time::Duration::from_secs(5));
                    let _ = ch.recv();
                    let _ = ch.send(json!({"ok": false, "error": "server busy (too many sessions); try again later"}).to_string().as_bytes());
                    fc.fetch_add(1, Ordering::SeqCst);
                    l(format!("session {id}: refused (server busy)"));
                    return;
                }
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sess(&mut ch)));
                match r {
                    Ok(Ok(n)) => {
                        okc.fetch_add(1, Ordering::SeqCst);
                        l(format!("session {id}: {n} inference(s) served"));
                    }
                    Ok(Err(e)) => {
                        fc.fetch_add(1, Ordering::SeqCst);
                        l(format!("session {id}: ended with an error: {e}"));
                    }
                    Err(_) => {
                        fc.fetch_add(1, Ordering::SeqCst);
                        l(format!("session {id}: internal error (panic caught); other sessions unaffected"));
                    }
                }
                act.fetch_sub(1, Ordering::SeqCst);
                leave_addr();
                hush_transport::admission::return_free_memory();
            });
        }
    });
    Ok(ServerHandle { addr: local, stop, sessions_ok: ok, sessions_failed: failed, thread: Some(thread) })
}

/// Connects to a server and starts a session.
pub fn connect(addr: &str, opts: &Options) -> Result<ClientSession<TcpChannel>> {
    let copts = ChannelOptions { profile: opts.profile.clone(), connect_timeout: opts.link.connect_timeout(), ..Default::default() };
    let sec = opts.link.to_peer(addr)?;
    let ch = TcpChannel::connect_with(addr, copts, &sec)?;
    ClientSession::start(ch, opts)
}
