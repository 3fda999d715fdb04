//! Correlation providers: what each trust mode's session is built on
//! (issue 28: "the session is built from the plan's providers").
//!
//! The constructors here are, with [`crate::preset::Mode::preset`] and plan
//! validation, the only code that matches a mode: a server's and a
//! client's provider for a session ([`server_provider`],
//! [`client_provider`]: a trusted module — simulated, **no hardware
//! protection** — a dealer session, or none), its completion after the
//! hello ([`establish`]: the modules' seed agreement), the dealer a local
//! run starts ([`local_dealer`]), the check of a configured dealer at start
//! ([`check_dealer`]), the HE modes' COT sources and RLWE keys
//! ([`he_session`], [`cot_set_for`]), and what a CNN session's engine runs
//! on ([`server_engine`], [`client_engine`], [`EngineCorrelations`]: see
//! the section "CNN sessions" below).

use crate::engine::{self, SharedModule, CLIENT};
use crate::model::Model;
use crate::plan::Plan;
use crate::preset::{Cot, Mode, Provider as Source};
use crate::runtime::Options;
use crate::{Error, Result};
use hush_tee::{InProcessModule, Module, ModuleRole, Request, Response, TrustedModule};
use hush_transport::{Channel, Fingerprint};
use serde_json::{json, Value};
use std::sync::Arc;

/// A dealer-mode (or malicious-client) server's check of its dealer at
/// start: the dealer answers at its address with the pinned identity
/// ([`hush_tee::dealer::probe`]; opens no session). Other modes: nothing.
pub fn check_dealer(opts: &Options) -> Result<()> {
    match &opts.mode {
        Mode::Dealer { addr, pin } | Mode::MaliciousClient { addr, pin } if !addr.is_empty() => {
            hush_tee::dealer::probe_checked(addr, &dealer_link(opts, addr, *pin)?, opts.link.connect_timeout_flag(), dealer_check(opts).as_ref())
                .map_err(|e| Error::Config(format!("{} mode: the dealer does not answer as configured (checked at start, before serving any client): {e}", opts.mode.name())))
                .map(|_| ())
        }
        _ => Ok(()),
    }
}

/// The LPN sets a mode's COT source may use: Ferret's ladder in
/// `interactive` mode, SilentFlow's set in `silent` mode.
fn cot_sets(mode: &Mode) -> &'static [hush_correlations::lpn::LpnParams] {
    if mode.preset().cot == Some(Cot::Silent) {
        &hush_correlations::lpn::SILENT_SETS
    } else {
        &hush_correlations::lpn::FERRET_SETS
    }
}

/// The server's choice of LPN set for a session: `opts.cot_set` if given;
/// else, for a client with a memory budget, the largest set whose two
/// sources' working sets (one per direction) take at most a quarter of it;
/// else the mode's first (largest) set.
pub fn cot_set_for(opts: &Options, client_max_mem: Option<u64>, reserved: u64) -> Result<&'static str> {
    let sets = cot_sets(&opts.mode);
    if let Some(n) = &opts.cot_set {
        return sets.iter().find(|p| p.name == n).map(|p| p.name).ok_or_else(|| {
            Error::Config(format!("COT set '{n}' is not one of --mode {}'s ({})", opts.mode.name(), sets.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")))
        });
    }
    Ok(crate::budget::cot_set_within(sets, client_max_mem, reserved).name)
}

/// The module slot of the HE modes, which have no trusted module for the
/// engine (silent mode's modules live inside its COT source): every call
/// is refused, naming the mode.
struct NoModule(&'static str);

impl TrustedModule for NoModule {
    fn call(&mut self, _req: &Request) -> hush_tee::Result<Response> {
        Err(hush_tee::Error::Refused(format!("--mode {} deals nothing through a module (HE linear layers, cf2 on COTs)", self.0)))
    }
    fn stats(&self) -> hush_tee::ModuleStats {
        Default::default()
    }
    fn describe(&self) -> String {
        match self.0 {
            "silent" => format!("SilentFlow modules inside the COT source (attestation {})", hush_tee::SIMULATED_NOTE),
            _ => "none (cryptography only)".into(),
        }
    }
}

/// A party's HE-mode session after the hello: COTs in both directions
/// (Ferret, or SilentFlow with modules), then the RLWE keys (client →
/// server). Returns the `cf2` family on the COTs and the HE linear layers.
#[allow(clippy::too_many_arguments)]
pub(crate) fn he_session(ch: &mut dyn Channel, party: u8, mode: &Mode, tee: &str, cot_set: &str, he_params: &str, model: &Model, plan: &Plan, chunk: usize) -> Result<(Box<dyn engine::Nonlinear>, crate::he_linear::HeLinear)> {
    use hush_correlations::registry::{SourceConfig, TeeBackend};
    use hush_primitives::Prg;
    let set = *cot_sets(mode).iter().find(|p| p.name == cot_set).ok_or_else(|| Error::Protocol(format!("COT set '{cot_set}' is not one of --mode {}'s", mode.name())))?;
    let mut sc = SourceConfig::named(if mode.preset().cot == Some(Cot::Silent) { "silent" } else { "ferret" });
    sc.params = Some(set);
    sc.tee = match tee {
        "in-process" => TeeBackend::InProcess,
        "out-of-process" => TeeBackend::OutOfProcess,
        other => return Err(Error::Config(format!("--tee {other}: choose in-process or out-of-process"))),
    };
    let mut rng = Prg::from_os();
    let ot = hush_2pc::beaver::OtSession::setup(ch, party, &sc, &mut rng).map_err(|e| Error::Nonlinear(format!("COT setup ({}): {e}", sc.name)))?;
    let params = crate::he_linear::params_by_name(he_params)?;
    let ctx = std::sync::Arc::new(hush_rlwe::Context::new(params).map_err(|e| Error::Config(e.to_string()))?);
    let hcfg = hush_rlwe::cheetah::Config::new(plan.cfg.bits);
    let he_err = |e: hush_rlwe::Error| match e {
        hush_rlwe::Error::Transport(t) => Error::Transport(t),
        hush_rlwe::Error::Malformed { .. } | hush_rlwe::Error::Mismatch(_) => Error::Protocol(format!("HE setup: {e}")),
        other => Error::Config(format!("HE setup: {other}")),
    };
    let side = if party == CLIENT {
        crate::he_linear::Side::Client(Box::new(hush_rlwe::cheetah::HeClient::setup(ch, ctx, hcfg, Prg::from_os()).map_err(he_err)?))
    } else {
        crate::he_linear::Side::Server(Box::new(hush_rlwe::cheetah::HeServer::setup(ch, ctx, hcfg, Prg::from_os()).map_err(he_err)?))
    };
    let he = crate::he_linear::HeLinear::new(side, model, plan)?;
    let nl: Box<dyn engine::Nonlinear> = Box::new(engine::Cf2Nonlinear::new(ot, party, plan.cfg.bits, chunk));
    Ok((nl, he))
}

fn new_module(kind: &str, test_seed: bool, evidence: Option<&ModuleEvidence>) -> Result<SharedModule> {
    let m: Box<dyn TrustedModule> = match (kind, test_seed) {
        ("in-process", false) => {
            let mut m = Module::new().with_kinds(hush_2pc::deal::kinds());
            if let Some(e) = evidence {
                m = m.with_evidence(e.0.clone());
            }
            Box::new(InProcessModule::new(m))
        }
        ("in-process", true) => Box::new(InProcessModule::new(Module::new().with_kinds(hush_2pc::deal::kinds()).insecure_test_mode())),
        ("out-of-process", false) => Box::new(hush_tee::OutOfProcessModule::spawn()?),
        ("out-of-process", true) => Box::new(hush_tee::OutOfProcessModule::spawn_insecure_test()?),
        (other, _) => return Err(Error::Config(format!("--tee {other}: choose in-process or out-of-process"))),
    };
    Ok(SharedModule::new(m))
}

/// A dealer service started in this process for a local run in dealer
/// mode (both parties here, no `--dealer` given); stops when dropped.
pub struct LocalDealer(Option<hush_tee::dealer::DealerHandle>);

impl Drop for LocalDealer {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            h.shutdown();
        }
    }
}

/// For local runs: when `o` is in dealer mode with an empty address,
/// starts a dealer on loopback (TLS with an ephemeral identity, pinned,
/// unless the parties are insecure) and points `o` at it.
pub fn local_dealer(o: &mut Options) -> Result<LocalDealer> {
    match &o.mode {
        Mode::Dealer { addr, .. } | Mode::MaliciousClient { addr, .. } if addr.is_empty() => {}
        _ => return Ok(LocalDealer(None)),
    }
    let (sec, pin) = if o.link.is_tls() {
        let id = Arc::new(hush_transport::Identity::generate()?);
        let fp = id.fingerprint();
        (hush_transport::LinkSecurity::Tls(hush_transport::TlsSettings { identity: id, peer: hush_transport::PeerCheck::AnyPeer, require_client_cert: false }), Some(fp))
    } else {
        (hush_transport::LinkSecurity::Insecure, None)
    };
    let h = hush_tee::dealer::serve("127.0.0.1:0", hush_tee::dealer::DealerConfig::new(sec, hush_2pc::deal::kinds()), Arc::new(|l: String| if std::env::var_os("HUSH_DEALER_TRACE").is_some() { eprintln!("dealer: {l}") }))?;
    o.mode = match o.mode {
        Mode::MaliciousClient { .. } => Mode::MaliciousClient { addr: h.addr.to_string(), pin },
        _ => Mode::Dealer { addr: h.addr.to_string(), pin },
    };
    Ok(LocalDealer(Some(h)))
}

/// A party's correlation provider for one session, before the hello
/// exchange is over: the module, and in dealer mode the session.
pub(crate) struct Provider {
    pub(crate) module: SharedModule,
    /// Dealer mode: the session id and the dealer's fingerprint.
    dealer: Option<(hush_tee::dealer::SessionId, Option<Fingerprint>)>,
}

pub(crate) fn dealer_link(opts: &Options, addr: &str, pin: Option<Fingerprint>) -> Result<hush_transport::LinkSecurity> {
    if opts.dealer_attest.is_some() {
        if !opts.link.is_tls() {
            return Err(Error::Config("--dealer-attest needs TLS: the dealer's evidence binds its TLS key (drop --insecure)".into()));
        }
        // attestation in place of a pin: any certificate, then the
        // evidence must bind exactly the one this session was made with
        if pin.is_none() && opts.link.to_service(addr, None, "--dealer-pin").is_err() {
            return Ok(opts.link.to_any_peer());
        }
    }
    opts.link.to_service(addr, pin, "--dealer-pin").map_err(|e| Error::Config(e.to_string()))
}

/// The dealer's evidence hook (`hush dealer --attest`) over `src`: each
/// party's request gets evidence binding the SPKI of the certificate the
/// dealer presents and the party's nonce. One report at a time
/// (configfs-tsm's entry is shared by the process).
pub fn evidence_hook(src: hush_attest::provider::Source) -> hush_tee::dealer::EvidenceFn {
    let src = std::sync::Mutex::new(src);
    Arc::new(move |cert: &[u8], nonce: &[u8; hush_tee::dealer::NONCE_LEN]| {
        let spki = hush_attest::spki_of_certificate(cert).map_err(|e| e.to_string())?;
        let s = src.lock().map_err(|_| "evidence source lock poisoned".to_string())?;
        s.get(&spki, nonce).map(|e| e.encode()).map_err(|e| e.to_string())
    })
}

/// The party's check of its dealer's evidence under `--dealer-attest`
/// (`None` without it: no attestation, as before).
pub(crate) fn dealer_check(opts: &Options) -> Option<hush_tee::dealer::DealerCheck> {
    let policy = opts.dealer_attest.clone()?;
    Some(hush_tee::dealer::DealerCheck {
        max_evidence: hush_attest::evidence::MAX_EVIDENCE,
        verify: Arc::new(move |ev: &[u8], nonce: &[u8; hush_tee::dealer::NONCE_LEN], cert: &[u8]| verify_dealer_evidence(&policy, ev, nonce, cert)),
    })
}

/// Verifies a dealer's evidence against `policy`, the nonce this party
/// sent and the dealer's certificate from this TLS session; every leg must
/// pass. The refusal names the failed (or unchecked) leg.
pub fn verify_dealer_evidence(policy: &hush_attest::Policy, evidence: &[u8], nonce: &[u8], cert_der: &[u8]) -> std::result::Result<String, String> {
    let spki = hush_attest::spki_of_certificate(cert_der).map_err(|e| format!("its TLS certificate: {e}"))?;
    verify_evidence(policy, evidence, nonce, &spki)
}

/// In-process modules' hardware evidence source (see
/// [`Options::module_evidence`]).
#[derive(Clone)]
pub struct ModuleEvidence(pub hush_tee::attest::EvidenceSource);

impl std::fmt::Debug for ModuleEvidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ModuleEvidence(..)")
    }
}

/// The party's check of its peer's module under `--module-attest` (`None`
/// without it: only the simulated report, which protects nothing).
pub(crate) fn module_check(opts: &Options) -> Option<hush_tee::ModuleCheck> {
    let policy = opts.module_attest.clone()?;
    Some(hush_tee::ModuleCheck {
        max_evidence: hush_attest::evidence::MAX_EVIDENCE,
        verify: Arc::new(move |ev: &[u8], nonce: &[u8; hush_tee::handshake::NONCE_LEN], spki: &[u8]| verify_evidence(&policy, ev, nonce, spki)),
    })
}

/// Verifies evidence against `policy`, the nonce this party sent and the
/// DER SPKI of the key it must bind (a dealer's TLS key, a module's
/// handshake key); every leg must pass. The refusal names the failed (or
/// unchecked) leg.
pub fn verify_evidence(policy: &hush_attest::Policy, evidence: &[u8], nonce: &[u8], spki: &[u8]) -> std::result::Result<String, String> {
    let e = hush_attest::Evidence::decode(evidence).map_err(|e| format!("its evidence is unreadable: {e}"))?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let input = hush_attest::VerifyInput { tls_spki: Some(spki), nonce: Some(nonce), vek_der: None, now, test_roots: policy.test_roots.clone() };
    let v = hush_attest::verify(&e, policy, &input);
    if v.accepted() {
        let test = if e.kind == hush_attest::EvidenceKind::Test { format!(" — {}", hush_attest::test_evidence::TEST_NOTE) } else { String::new() };
        return Ok(format!("{} evidence, measurement {}{test}", v.kind, v.measurement.as_deref().unwrap_or("?")));
    }
    if let Some((leg, why)) = v.failed() {
        return Err(format!("attestation failed on the {} leg: {why}", leg.name()));
    }
    let skipped: Vec<&str> = v.legs.iter().filter(|l| !matches!(l.outcome, hush_attest::Outcome::Pass(_))).map(|l| l.leg.name()).collect();
    Err(format!("attestation incomplete: legs not checked: {}", skipped.join(", ")))
}

/// Server side, before its hello reply: in dealer mode, opens a fresh
/// session at the dealer (so the session's sender role is claimed before
/// its id leaves this process).
pub(crate) fn server_provider(opts: &Options) -> Result<Provider> {
    server_provider_for(opts, None)
}

/// Slack added to an announced dealer-session budget (the dealer's own
/// batches in flight).
pub const SESSION_MEM_SLACK: u64 = 64 << 20;

/// [`server_provider`], announcing to a dealer the session's budget for
/// dealt-but-unclaimed shares (`None`: the dealer's cap).
pub(crate) fn server_provider_for(opts: &Options, announce: Option<u64>) -> Result<Provider> {
    match &opts.mode {
        Mode::Tee => Ok(Provider { module: new_module(&opts.tee, opts.insecure_test_seed.is_some(), opts.module_evidence.as_ref())?, dealer: None }),
        Mode::Interactive | Mode::Silent => Ok(Provider { module: SharedModule::new(Box::new(NoModule(opts.mode.name()))), dealer: None }),
        Mode::Dealer { addr, pin } | Mode::MaliciousClient { addr, pin } => {
            let sid = hush_tee::dealer::new_session_id();
            let m = hush_tee::DealerModule::connect_checked(addr, &dealer_link(opts, addr, *pin)?, &opts.profile, opts.link.connect_timeout_flag(), &sid, ModuleRole::Sender, announce, dealer_check(opts).as_ref())?
                .with_kinds(hush_2pc::deal::kinds());
            let fp = m.dealer_fingerprint();
            Ok(Provider { module: SharedModule::new(Box::new(m)), dealer: Some((sid, fp)) })
        }
    }
}

/// The hello-reply fields describing the server's mode.
pub(crate) fn mode_fields(reply: &mut Value, opts: &Options, p: &Provider) {
    reply["mode"] = json!(opts.mode.name());
    if let Some((sid, fp)) = &p.dealer {
        reply["dealer_session"] = json!(hush_tee::dealer::session_hex(sid));
        reply["dealer_fingerprint"] = json!(fp.map(|f| f.to_string()));
    }
}

/// Checks the client's mode against the server's; the refusal names both.
pub(crate) fn check_client_mode(hello: &Value, opts: &Options) -> std::result::Result<(), String> {
    let theirs = hello.get("mode").and_then(Value::as_str).unwrap_or("tee");
    if theirs != opts.mode.name() {
        return Err(format!(
            "trust mode mismatch: the client runs --mode {theirs}, this server runs --mode {} (both parties must use the same mode)",
            opts.mode.name()
        ));
    }
    Ok(())
}

/// Completes a party's provider after the hello exchange: tee-mode seed
/// agreement over `ch` (or the test seed), checking the peer's module
/// against `--module-attest` before the seed is established (a refusal
/// names the failed leg; see `hush_tee::handshake`, "Hardware
/// attestation"); nothing more in dealer mode.
pub(crate) fn establish(module: &mut SharedModule, ch: &mut dyn Channel, opts: &Options, role: ModuleRole) -> Result<()> {
    if opts.mode.preset().provider != Source::OwnModules {
        return Ok(());
    }
    match opts.insecure_test_seed {
        Some(_) if opts.module_attest.is_some() => Err(Error::Config("module attestation needs seed agreement: a fixed test seed skips it".into())),
        Some(seed) => match module.call(&Request::InsecureTestSeed { role, seed })? {
            Response::Established => Ok(()),
            _ => Err(Error::Protocol("module: unexpected answer to the test seed".into())),
        },
        None => {
            hush_tee::establish_checked(module, ch, role, module_check(opts).as_ref())?;
            Ok(())
        }
    }
}

/// In dealer mode a peer that vanishes has usually lost the dealer too:
/// when a session fails, probe this party's own dealer connection (with a
/// request every established module refuses harmlessly) and, if the dealer
/// is gone, say so rather than only "peer disconnected".
pub(crate) fn diagnose(module: &mut SharedModule, mode: &Mode, e: Error) -> Error {
    if mode.dealer().is_none() || matches!(e, Error::Tee(hush_tee::Error::Dealer(_))) {
        return e;
    }
    match module.call(&Request::Hello { role: ModuleRole::Sender }) {
        Err(hush_tee::Error::Dealer(m)) => Error::Tee(hush_tee::Error::Dealer(format!("{m}; the session ended ({e})"))),
        _ => e,
    }
}

/// Client side: the provider the server's reply calls for.
pub(crate) fn client_provider(opts: &Options, reply: &Value) -> Result<SharedModule> {
    let theirs = reply.get("mode").and_then(Value::as_str).unwrap_or("tee");
    if theirs != opts.mode.name() {
        return Err(Error::Peer(format!("trust mode mismatch: the server runs --mode {theirs}, this client runs --mode {}", opts.mode.name())));
    }
    match &opts.mode {
        Mode::Tee => new_module(&opts.tee, opts.insecure_test_seed.is_some(), opts.module_evidence.as_ref()),
        Mode::Interactive | Mode::Silent => Ok(SharedModule::new(Box::new(NoModule(opts.mode.name())))),
        Mode::Dealer { addr, pin } | Mode::MaliciousClient { addr, pin } => {
            let sid = reply
                .get("dealer_session")
                .and_then(Value::as_str)
                .ok_or_else(|| Error::Protocol("server hello (dealer mode) lacks the dealer session".into()))?;
            let sid = hush_tee::dealer::parse_session_hex(sid)?;
            let sec = dealer_link(opts, addr, *pin)?;
            let server_dealer = reply.get("dealer_fingerprint").and_then(Value::as_str).map(str::to_string);
            if let (Some(theirs), hush_transport::LinkSecurity::Tls(t)) = (&server_dealer, &sec) {
                if let hush_transport::PeerCheck::Pinned(p) = &t.peer {
                    if !p.iter().any(|f| f.to_string() == *theirs) {
                        return Err(Error::Config(format!(
                            "dealer mismatch: the server uses the dealer {theirs}, this client's dealer pin is {} (both parties must use the same dealer)",
                            p.iter().map(|f| f.to_string()).collect::<Vec<_>>().join(", ")
                        )));
                    }
                }
            }
            let m = hush_tee::DealerModule::connect_checked(addr, &sec, &opts.profile, opts.link.connect_timeout_flag(), &sid, ModuleRole::Receiver, None, dealer_check(opts).as_ref()).map_err(|e| match e {
                hush_tee::Error::Refused(r) => Error::Tee(hush_tee::Error::Refused(format!(
                    "{r} — the session was not opened at {addr} (does the server use the same dealer?) or its client role was taken by someone else; nothing was sent"
                ))),
                e => e.into(),
            })?
            .with_kinds(hush_2pc::deal::kinds());
            // attested without a pin: the dealer this client attested must
            // be the one the server uses (the server checked its own)
            if let (Some(theirs), Some(ours)) = (&server_dealer, m.dealer_fingerprint()) {
                if *theirs != ours.to_string() {
                    return Err(Error::Config(format!("dealer mismatch: the server uses the dealer {theirs}, the dealer at {addr} presented {ours} (both parties must use the same dealer)")));
                }
            }
            Ok(SharedModule::new(Box::new(m)))
        }
    }
}

// ---------------------------------------------------------------------------
// CNN sessions: the engine each provider builds (issue 28).
//
// The session code in `runtime.rs` never asks which mode it runs: it calls
// the functions below, which are the provider constructors for CNN
// sessions, and runs what they return. Each difference between the modes
// lives here:
// - what the provider deals ahead (tee and dealer: pre-dealing, the
//   look-ahead, the dealer's dealing plans; the HE modes: nothing);
// - what the server's hello reply adds (the HE modes' COT and RLWE sets);
// - how a session's correlations are set up after the hello (the modules'
//   seed agreement and the weights' binding, or COTs and RLWE keys);
// - which engine runs the session (the CNN engine, or CRISP's checked one
//   in `malicious-client` mode).
// ---------------------------------------------------------------------------

/// A session's pre-dealing budget under this mode's provider: what the
/// parties agreed (`asked`), or 0 where nothing is dealt (the HE modes).
pub(crate) fn predeal_budget(opts: &Options, asked: u64) -> u64 {
    if opts.mode.he() {
        0
    } else {
        asked
    }
}

/// The look-ahead's working set at a client (0 where nothing is dealt).
pub(crate) fn lookahead_bytes(opts: &Options, plan: &Plan, proto: &str, chunk: usize) -> Result<u64> {
    if opts.mode.he() {
        Ok(0)
    } else {
        crate::budget::lookahead_bytes(plan, proto, chunk)
    }
}

/// What the server's hello reply set up beyond the mode.
pub(crate) enum EngineSetup {
    /// Tee and dealer: the provider deals every correlation.
    Dealt,
    /// The HE modes: COTs of this LPN set, RLWE keys of `opts.he_params`.
    He { cot_set: &'static str },
}

/// Server, while it writes its hello reply: the provider's set-up fields
/// (in the HE modes the COT set, chosen for the client's memory budget, and
/// the RLWE parameters). `Err` is a refusal to send the client.
pub(crate) fn server_engine_setup(opts: &Options, model: &Model, plan: &Plan, hello: &Value, reply: &mut Value) -> std::result::Result<EngineSetup, String> {
    if !opts.mode.he() {
        return Ok(EngineSetup::Dealt);
    }
    let reserved = crate::budget::cot_reserve(model, plan).unwrap_or(0);
    let c = cot_set_for(opts, hello.get("max_mem").and_then(Value::as_u64), reserved).map_err(|e| e.to_string())?;
    reply["cot_set"] = json!(c);
    reply["he_params"] = json!(opts.he_params);
    Ok(EngineSetup::He { cot_set: c })
}

/// One party's correlations for the CNN engine, as its provider set them
/// up: the module (a trusted module, a dealer session, or the HE modes'
/// refusing slot), the nonlinear family, the HE linear layers where the
/// provider has them, and what is pre-dealt.
pub(crate) struct EngineCorrelations {
    pub(crate) module: SharedModule,
    pub(crate) nl: Box<dyn engine::Nonlinear>,
    pub(crate) he: Option<crate::he_linear::HeLinear>,
    pub(crate) pre: engine::Predealt,
    /// The session's pre-dealing budget (0 where nothing is dealt).
    pub(crate) predeal_mem: u64,
    /// The provider deals ahead (module or dealer): pre-dealing and the
    /// look-ahead apply. False for COTs + HE, which are made online.
    deals: bool,
    /// A dealer-mode server: after pre-dealing, it sends the dealer the
    /// rest of the inference's schedule ([`engine::plan_dealer`]).
    dealer_plan: bool,
}

impl EngineCorrelations {
    /// The engine's view of this party for inference number `batch`; the
    /// look-ahead runs only where the provider deals ahead.
    pub(crate) fn party<'a>(&'a mut self, party: u8, ch: &'a mut dyn Channel, batch: u64, guard: Option<engine::MemGuard>, lookahead: bool) -> engine::Party<'a> {
        engine::Party { party, ch, module: self.module.clone(), nl: &mut *self.nl, batch, pre: &mut self.pre, guard, lookahead: lookahead && self.deals, he: self.he.as_mut() }
    }

    /// Offline work for inference number `batch`, before its input exists:
    /// pre-dealing up to the budget, and a dealer-mode server's dealing
    /// plan. Nothing where the provider deals nothing ahead.
    pub(crate) fn predeal(&mut self, plan: &Plan, batch: u64, guard: Option<&engine::MemGuard>) -> Result<()> {
        if !self.deals {
            return Ok(());
        }
        engine::predeal_guarded(plan, &mut self.module, &mut *self.nl, &mut self.pre, batch, self.predeal_mem, guard)?;
        if self.dealer_plan {
            engine::plan_dealer(plan, &mut self.module, &*self.nl, &self.pre)?;
        }
        Ok(())
    }

    /// Drops what is pre-dealt (a client that runs no further inference).
    pub(crate) fn clear_predealt(&mut self) {
        self.pre = engine::Predealt::default();
    }
}

/// `HUSH_DEALER_PLAN=0` turns dealing plans off (for A/B measurements).
pub fn dealer_plan_env() -> bool {
    std::env::var("HUSH_DEALER_PLAN").map(|v| v != "0").unwrap_or(true)
}

/// Server, after its hello reply: completes the provider (the HE modes'
/// COTs and RLWE keys; or the modules' seed agreement and the weights'
/// binding), then pre-deals the first inference.
#[allow(clippy::too_many_arguments)]
pub(crate) fn server_correlations(
    ch: &mut dyn Channel,
    model: &Model,
    plan: &Plan,
    opts: &Options,
    module: SharedModule,
    setup: EngineSetup,
    proto: &str,
    chunk: usize,
    predeal_mem: u64,
) -> Result<EngineCorrelations> {
    let mut module = module;
    if let EngineSetup::He { cot_set } = setup {
        let (nl, he) = he_session(ch, engine::SERVER, &opts.mode, &opts.tee, cot_set, &opts.he_params, model, plan, chunk)?;
        return Ok(EngineCorrelations { module, nl, he: Some(he), pre: engine::Predealt::default(), predeal_mem: 0, deals: false, dealer_plan: false });
    }
    establish(&mut module, ch, opts, ModuleRole::Sender)?;
    engine::load_weights(plan, &mut module)?;
    let nl = engine::make_nonlinear(proto, opts.family_plan.as_deref().map(|v| v.as_slice()), plan, module.clone(), engine::SERVER, plan.cfg.bits, chunk)?;
    let dealer_plan = opts.mode.preset().dealer() && opts.dealer_plan && dealer_plan_env();
    let mut c = EngineCorrelations { module, nl, he: None, pre: engine::Predealt::default(), predeal_mem, deals: true, dealer_plan };
    c.predeal(plan, 0, None)?;
    Ok(c)
}

/// A server's session engine after the hello, as its provider built it.
pub(crate) enum ServerEngine {
    /// The CNN engine on the provider's correlations, and the session's
    /// share of the server's memory cap (released at its end).
    Engine { c: EngineCorrelations, _admitted: hush_transport::admission::Reservation },
    /// `malicious-client`: CRISP's checked engine on a dealer.
    Crisp(crate::crisp_serve::CrispServer),
}

/// Server: answers the client's hello and builds the session's engine
/// (CRISP's in `malicious-client` mode, the CNN engine otherwise); a
/// refusal is sent to the client before the error is returned.
pub(crate) fn server_engine(ch: &mut dyn Channel, model: &Model, plan: &Plan, opts: &Options, hello: &Value) -> Result<ServerEngine> {
    if opts.mode.preset().engine == crate::preset::Engine::Crisp {
        return Ok(ServerEngine::Crisp(crate::crisp_serve::server_open(ch, model, plan, opts, hello)?));
    }
    let (c, admitted) = crate::runtime::server_open(ch, model, plan, opts, hello)?;
    Ok(ServerEngine::Engine { c, _admitted: admitted })
}

impl ServerEngine {
    /// The session's module or dealer connection (for diagnosis).
    pub(crate) fn module_mut(&mut self) -> &mut SharedModule {
        match self {
            ServerEngine::Engine { c, .. } => &mut c.module,
            ServerEngine::Crisp(s) => &mut s.module,
        }
    }

    /// One inference after the client's `I`: this party's per-layer costs
    /// and online seconds (the server's share of the logits is sent).
    pub(crate) fn infer(&mut self, ch: &mut dyn Channel, model: &Model, plan: &Plan, batch: u64, lookahead: bool) -> Result<(Vec<engine::LayerCost>, f64)> {
        match self {
            ServerEngine::Engine { c, .. } => {
                let t = std::time::Instant::now();
                let mut p = c.party(engine::SERVER, &mut *ch, batch, None, lookahead);
                let (share, layers) = engine::run(plan, &mut p, vec![0u64; plan.input_len], |_, _| {})?;
                crate::linear::send_ring(ch, &plan.cfg, &share)?;
                Ok((layers, t.elapsed().as_secs_f64()))
            }
            ServerEngine::Crisp(s) => {
                let c = s.infer(ch, model, plan)?;
                Ok((c.layers, c.online_s))
            }
        }
    }

    /// Offline work for inference number `batch` (CRISP deals per
    /// inference, inside [`ServerEngine::infer`]).
    pub(crate) fn predeal(&mut self, plan: &Plan, batch: u64) -> Result<()> {
        match self {
            ServerEngine::Engine { c, .. } => c.predeal(plan, batch, None),
            ServerEngine::Crisp(_) => Ok(()),
        }
    }
}

/// A client's session engine after the hello, as its provider built it.
pub(crate) enum ClientEngine {
    Engine(EngineCorrelations),
    Crisp { module: SharedModule, crisp: crate::crisp_serve::CrispClient },
}

impl ClientEngine {
    pub(crate) fn module_mut(&mut self) -> &mut SharedModule {
        match self {
            ClientEngine::Engine(c) => &mut c.module,
            ClientEngine::Crisp { module, .. } => module,
        }
    }

    pub(crate) fn module(&self) -> &SharedModule {
        match self {
            ClientEngine::Engine(c) => &c.module,
            ClientEngine::Crisp { module, .. } => module,
        }
    }
}

/// Client, before its hello: refuses options this mode cannot run (a
/// dealer without a pin fails before the server does any work;
/// `malicious-client` takes no memory budget yet and checks its CRISP
/// options) and adds the mode's hello fields.
pub(crate) fn client_hello(opts: &Options, hello: &mut Value) -> Result<()> {
    if let Some((addr, pin)) = opts.mode.dealer() {
        dealer_link(opts, addr, pin)?;
    }
    if opts.mode.preset().engine == crate::preset::Engine::Crisp {
        if opts.max_mem.is_some() {
            return Err(Error::Config("--max-mem is not supported in --mode malicious-client yet (one inference's FSS keys are dealt before its online phase)".into()));
        }
        opts.crisp.check()?;
        crate::crisp_serve::hello_fields(hello, &opts.crisp);
    }
    Ok(())
}

/// Client: checks the mode's fields of the server's hello reply.
pub(crate) fn check_reply_fields(opts: &Options, reply: &Value) -> Result<()> {
    if opts.mode.preset().engine == crate::preset::Engine::Crisp {
        crate::crisp_serve::check_reply(reply, &opts.crisp)?;
    }
    Ok(())
}

/// The COT set and RLWE parameters a client's session runs on (the HE
/// modes), for its report.
pub(crate) type HeSets = (Option<String>, Option<String>);

/// Client, after the server's hello reply: the session's engine, with the
/// provider the reply calls for completed — `malicious-client`: CRISP's on
/// the dealer session; the HE modes: COTs and RLWE keys (refusing an
/// insecure RLWE set it did not ask for); tee and dealer: the modules' seed
/// agreement, then the first inference pre-dealt within the client's
/// memory guard.
#[allow(clippy::too_many_arguments)]
pub(crate) fn client_engine(
    ch: &mut dyn Channel,
    module: SharedModule,
    opts: &Options,
    reply: &Value,
    model: &Model,
    plan: &Plan,
    proto: &str,
    family_plan: Option<&[u8]>,
    chunk: usize,
    predeal_mem: u64,
    guard: Option<&engine::MemGuard>,
) -> Result<(ClientEngine, HeSets)> {
    let mut module = module;
    if opts.mode.preset().engine == crate::preset::Engine::Crisp {
        let crisp = crate::crisp_serve::CrispClient::new(&module, &opts.crisp);
        return Ok((ClientEngine::Crisp { module, crisp }, (None, None)));
    }
    if opts.mode.he() {
        let cot = reply.get("cot_set").and_then(Value::as_str).ok_or_else(|| Error::Protocol("server hello (HE mode) lacks the COT set".into()))?.to_string();
        let hp = reply.get("he_params").and_then(Value::as_str).ok_or_else(|| Error::Protocol("server hello (HE mode) lacks the HE parameters".into()))?.to_string();
        let params = crate::he_linear::params_by_name(&hp)?;
        if !params.secure && hp != opts.he_params {
            return Err(Error::Peer(format!("the server asks for the insecure HE parameter set '{hp}'; refused (this client uses {})", opts.he_params)));
        }
        let (nl, he) = he_session(ch, CLIENT, &opts.mode, &opts.tee, &cot, &hp, model, plan, chunk)?;
        let c = EngineCorrelations { module, nl, he: Some(he), pre: engine::Predealt::default(), predeal_mem: 0, deals: false, dealer_plan: false };
        return Ok((ClientEngine::Engine(c), (Some(cot), Some(hp))));
    }
    establish(&mut module, ch, opts, ModuleRole::Receiver)?;
    let nl = engine::make_nonlinear(proto, family_plan, plan, module.clone(), CLIENT, plan.cfg.bits, chunk)?;
    let mut c = EngineCorrelations { module, nl, he: None, pre: engine::Predealt::default(), predeal_mem, deals: true, dealer_plan: false };
    c.predeal(plan, 0, guard)?;
    Ok((ClientEngine::Engine(c), (None, None)))
}
