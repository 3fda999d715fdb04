//! Served sessions of `--mode malicious-client` (CRISP, issue 14): the
//! session protocol of [`crate::runtime`] with [`crate::crisp_run`] in
//! place of the semi-honest engine, over any [`Channel`] — TCP with TLS in
//! `hush serve` / `hush infer` / `hush run` / `hush bench infer` and
//! Python — and the dealer service (`hush dealer`) underneath.
//!
//! ## Session
//! 1. client → server: the hello of [`crate::runtime`] with `"mode":
//!    "malicious-client"`, `"mac_s"` (the MAC parameter s, default 40) and
//!    `"crisp_linear"` (the linear backend, `dealt` or `ckks`);
//! 2. server → client: `{"ok":true,…}` with the same fields plus the
//!    dealer session and fingerprint (as in dealer mode), or
//!    `{"ok":false,"error":…}`: a server refuses a client of another mode,
//!    another s or another backend, naming both values; the client
//!    likewise refuses a reply that differs from what it runs. s is the
//!    server's protection (the check guards the server's model), but both
//!    must agree for the lifted ring Z_2^(ℓ+s) to be the same on both sides;
//! 3. the client joins the server's dealer session; the server sends
//!    "ready";
//! 4. per inference: client → server `I`; both run the offline phase (a
//!    fresh MAC key μ at the dealer, every correlation of the plan, the
//!    masked weights E = W − A server → client) and then the online phase
//!    ending in the consistency check. **Pass**: the server releases the
//!    logits, then sends "ready" for the next inference. **Fail**: the
//!    server sends only the one-byte abort (nothing of the output), the
//!    session ends with the check's error — which the server's log line
//!    for the session names ("malicious-client check failed: …") — and the
//!    server goes on serving its other sessions (each session has its own
//!    thread, channel and dealer session; see [`crate::runtime::serve`]).
//!    The client gets [`Error::Peer`] ("the server aborted …") and no
//!    output. `Q` ends a session.
//!
//! ## What each host sees, and why that is safe
//! As in [`hush_2pc::crisp`] ("What each party sees"): the server sees
//! uniform openings, δ, z_1, F and ⟨q⟩_1 (simulatable from nothing); the
//! client sees pseudorandom keys, uniform shares and openings, E = W − A,
//! the coefficient seed (public coins), the verdict (independent of W with
//! the default `dealt` layers: [`hush_2pc::crisp`], "No selective
//! failure"), and after a pass its output. The session layer adds only public data: the hello (mode, s,
//! backend, ring sizes, the architecture — which every mode gives the
//! client), "ready"/"I"/"Q", and the dealer session id (which lets a
//! party join the dealer session *in its own role*, already claimed for
//! the server before the id leaves it). TLS protects the link from third
//! parties; it is not part of the malicious-client argument (a client sees
//! its own link in the clear in any case).
//!
//! **Across inferences** of one session every inference opens a new
//! dealing epoch with a fresh μ (the dealer's batch counter moves on), so a
//! message replayed from an earlier inference is an arbitrary deviation
//! for the current one and the check catches it (tested below in
//! `tests_crisp`). After a failed check the session is over: no second try
//! under the same μ.

use crate::crisp_run::{self, CrispCost, CrispOptions};
use crate::engine::SharedModule;
use crate::model::Model;
use crate::plan::{Plan, StepKind};
use crate::runtime::Options;
use crate::{Error, Result};
use hush_2pc::tee::Dealer;
use hush_transport::Channel;
use serde_json::{json, Value};

/// The hello fields of this mode (client → server and back).
pub(crate) fn hello_fields(v: &mut Value, co: &CrispOptions) {
    v["mac_s"] = json!(co.s);
    v["crisp_linear"] = json!(co.linear);
}

/// Server side: the client's s and backend against the server's; the
/// refusal names both.
pub(crate) fn check_client_hello(hello: &Value, co: &CrispOptions) -> std::result::Result<(), String> {
    let s = hello.get("mac_s").and_then(Value::as_u64);
    if s != Some(u64::from(co.s)) {
        let got = s.map(|v| v.to_string()).unwrap_or_else(|| "none".into());
        return Err(format!("MAC parameter mismatch: the client runs --mac-s {got}, this server runs --mac-s {} (both parties must use the same s)", co.s));
    }
    let lin = hello.get("crisp_linear").and_then(Value::as_str).unwrap_or("none");
    if lin != co.linear {
        return Err(format!("linear backend mismatch: the client runs --crisp-linear {lin}, this server runs --crisp-linear {} (both parties must use the same backend)", co.linear));
    }
    Ok(())
}

/// Client side: the server's reply against this client's s and backend.
pub(crate) fn check_reply(reply: &Value, co: &CrispOptions) -> Result<()> {
    let s = reply.get("mac_s").and_then(Value::as_u64);
    if s != Some(u64::from(co.s)) {
        let got = s.map(|v| v.to_string()).unwrap_or_else(|| "none".into());
        return Err(Error::Peer(format!("MAC parameter mismatch: this client runs --mac-s {}, the server runs --mac-s {got}", co.s)));
    }
    let lin = reply.get("crisp_linear").and_then(Value::as_str).unwrap_or("none");
    if lin != co.linear {
        return Err(Error::Peer(format!("linear backend mismatch: this client runs --crisp-linear {}, the server runs --crisp-linear {lin}", co.linear)));
    }
    Ok(())
}

/// The server's memory estimate of one session (bytes): one inference's
/// dealt material (all FSS keys and triples are dealt before the online
/// phase), the authenticated activations and the lifted weights. Used for
/// the server's admission ([`crate::limits`]); an estimate from public
/// sizes, not a measurement.
pub fn server_estimate(plan: &Plan, co: &CrispOptions) -> u64 {
    use hush_fss::mac::{MacGate, MacReluKey, MacTruncKey};
    let (ell, k) = (plan.cfg.bits, plan.cfg.bits + co.s);
    let relu = <MacReluKey as MacGate>::size_bytes(ell, k, 0) as u64;
    let trunc = <MacTruncKey as MacGate>::size_bytes(ell, k, plan.cfg.frac) as u64;
    let mut b = 32 * plan.input_len as u64;
    for st in &plan.steps {
        let n = st.out_len as u64;
        b += 32 * n; // value and MAC shares of the activation
        b += match &st.kind {
            StepKind::Linear { in_len, macs, .. } => trunc * n + 16 * (*macs / n.max(1) + 4 * (*in_len as u64 + n)),
            StepKind::Relu => relu * n,
            // a tree of ReLUs: fewer than the window's inputs
            StepKind::MaxPool { idx, .. } => relu * idx.len() as u64,
            StepKind::AvgPool { .. } => trunc * n,
            _ => 0,
        };
    }
    b
}

/// A server's malicious-client session after the hello.
pub(crate) struct CrispServer {
    pub module: SharedModule,
    dealer: Dealer,
    co: CrispOptions,
    _admitted: hush_transport::admission::Reservation,
}

/// Server side of the set-up: checks the hello (mode, family, s, backend),
/// opens the dealer session, admits the session against the memory caps,
/// replies and sends "ready". A refusal is sent as `{"ok":false,…}`.
pub(crate) fn server_open(ch: &mut dyn Channel, model: &Model, plan: &Plan, opts: &Options, hello: &Value) -> Result<CrispServer> {
    let refuse = |ch: &mut dyn Channel, msg: String| -> Error {
        let _ = ch.send(json!({"ok": false, "error": msg}).to_string().as_bytes());
        Error::Protocol(msg)
    };
    if let Err(msg) = crate::runtime::check_client_mode(hello, opts) {
        return Err(refuse(ch, msg));
    }
    let proto = match crate::hello::negotiate_family(hello, opts) {
        Ok(p) => p,
        Err(msg) => return Err(refuse(ch, msg)),
    };
    if let Err(msg) = check_client_hello(hello, &opts.crisp) {
        return Err(refuse(ch, msg));
    }
    if hello.get("max_mem").is_some() {
        return Err(refuse(ch, "--max-mem is not supported in --mode malicious-client yet (one inference's FSS keys are dealt before its online phase)".into()));
    }
    let need = server_estimate(plan, &opts.crisp);
    if let Some(cap) = opts.limits.session_mem {
        if need > cap {
            return Err(refuse(
                ch,
                format!(
                    "server per-session memory cap (--session-mem {:.1} MiB) is below what model '{}' needs in --mode malicious-client (about {:.1} MiB); session refused before anything was dealt",
                    cap as f64 / 1048576.0,
                    model.name,
                    need as f64 / 1048576.0
                ),
            ));
        }
    }
    let admitted = match opts.limits.mem.reserve(need) {
        Ok(r) => r,
        Err(msg) => return Err(refuse(ch, msg)),
    };
    let provider = match crate::runtime::server_provider(opts) {
        Ok(p) => p,
        Err(e) => {
            let _ = ch.send(json!({"ok": false, "error": format!("the server cannot provide correlations: {e}")}).to_string().as_bytes());
            return Err(e);
        }
    };
    let mut reply = json!({
        "ok": true, "bits": plan.cfg.bits, "frac": plan.cfg.frac, "proto": proto, "chunk": opts.chunk,
        "predeal_mem": 0, "architecture": model.header_json,
    });
    crate::runtime::mode_fields(&mut reply, opts, &provider);
    hello_fields(&mut reply, &opts.crisp);
    ch.send(reply.to_string().as_bytes())?;
    let module = provider.module;
    let dealer = Dealer::new(Box::new(module.clone()));
    ch.send(crate::runtime::READY)?;
    Ok(CrispServer { module, dealer, co: opts.crisp.clone(), _admitted: admitted })
}

impl CrispServer {
    /// One inference (after the client's `I`): offline, online, check,
    /// release or abort. A failed check is an error naming it.
    pub(crate) fn infer(&mut self, ch: &mut dyn Channel, model: &Model, plan: &Plan) -> Result<CrispCost> {
        let mut why = None;
        let r = crisp_run::party_with(crisp_run::LinearBackend::parse(&self.co.linear)?, model, plan, 0, ch, &mut self.dealer, self.co.s, None, &mut |l| why = Some(l.to_string()));
        match (r, why) {
            (Ok((_, c)), _) => Ok(c),
            // the abort's reason is in the error already; keep it if not
            (Err(e), Some(w)) if !e.to_string().contains(&w) => Err(Error::Protocol(format!("malicious-client check failed: {w} ({e})"))),
            (Err(e), _) => Err(e),
        }
    }
}

/// A client's malicious-client state after the hello.
pub(crate) struct CrispClient {
    pub dealer: Dealer,
    pub co: CrispOptions,
}

impl CrispClient {
    pub(crate) fn new(module: &SharedModule, co: &CrispOptions) -> Self {
        CrispClient { dealer: Dealer::new(Box::new(module.clone())), co: co.clone() }
    }

    /// One inference of the encoded input `xq` (after "ready" and `I`):
    /// the logits as ring elements after a passed check, or the server's
    /// abort as an error (no output).
    pub(crate) fn infer(&mut self, ch: &mut dyn Channel, model: &Model, plan: &Plan, xq: &[u64]) -> Result<(Vec<u64>, CrispCost)> {
        let (y, c) = crisp_run::party_with(crisp_run::LinearBackend::parse(&self.co.linear)?, model, plan, 1, ch, &mut self.dealer, self.co.s, Some(xq), &mut |_| {}).map_err(|e| match e {
            // the server ends a session at once on a malformed message (and
            // after sending its abort on a failed check)
            Error::Transport(hush_transport::Error::Disconnected) => Error::Peer(
                "the server ended the session before the consistency check passed (it rejects a malformed message at once and aborts on a failed check); no output was released".into(),
            ),
            e => e,
        })?;
        let y = y.ok_or_else(|| Error::Protocol("the client received no output".into()))?;
        Ok((y, c))
    }
}
