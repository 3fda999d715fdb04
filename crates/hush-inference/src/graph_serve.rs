//! Encoder graphs served across hosts: `hush serve --model encoder.onnx`
//! and `hush embed --connect` (issue 28, item 4), over the same accept
//! loop, TLS links, pins and correlation providers as the CNN server
//! ([`crate::runtime::serve_with`]).
//!
//! **Session.** The client's hello names the protocol (`"hush": "graph"`),
//! its trust mode and family, and the **padded shapes** of its inputs (for
//! token ids: sentences × padded length). The server lowers its graph for
//! those shapes ([`hush_onnx::graph::GraphModel::instantiate`]), checks the
//! program (refusing a graph or shape it cannot run, with the reason, before
//! anything is dealt) and replies with the public program (no weights;
//! bounds as powers of two), the ring, the family and the **plan** (linear
//! backend and comparison sizing). The client validates the program as
//! untrusted input ([`hush_onnx::graph::Program::validate`]) and refuses a
//! plan other than the one its own mode calls for, naming both. Then the
//! providers are established (tee: the two modules agree a seed; dealer:
//! both join the dealer session the server opened) and the program runs;
//! the server sends its share of the outputs; the session ends.
//!
//! **Plans by mode** ([`graph_options`]): `tee` — weights in the server's
//! module (module-dealt linear layers), comparisons sized from the proven
//! bounds; `dealer` — dealt matrix and Beaver triples for every weight
//! (**the dealer never sees W**: its requests are a function of the shapes
//! alone, tested) and whole-ring comparisons. Other modes are refused with
//! a message saying they are not implemented for encoder graphs.
//!
//! **What the server learns:** the padded input shapes (batch and padded
//! length — not the true lengths, which are in the client's mask). **What
//! the client learns:** the outputs and the public program.

use crate::fixed::FixedConfig;
use crate::engine::SharedModule;
use crate::graph_run::{check_program, GraphOptions, LinearBackend, PlanChoice, Role};
use crate::preset::TransformerPreset;
use crate::runtime::{self, Options, ServerHandle};
use crate::{Error, Result};
use hush_2pc::nonlinear::Proto;
use hush_onnx::eval::Tensor;
use hush_onnx::graph::{GraphModel, Program};
use hush_tee::ModuleRole;
use hush_transport::{Channel, ChannelOptions, TcpChannel};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// Most tokens (elements of one input) a client may ask for.
pub const MAX_INPUT_ELEMS: usize = 1 << 14;
/// Largest hello or reply accepted.
const MAX_MSG: usize = 64 << 20;

fn proto_of(p: &str) -> Result<Proto> {
    match p {
        "tami" | "auto" => Ok(Proto::Tami),
        "fss" => Ok(Proto::Fss),
        o => Err(Error::Config(format!("--proto {o}: encoder graphs run with tami or fss (their operators take dealt correlations)"))),
    }
}

/// The plan a trust mode calls for (the presets): see the module docs.
pub fn graph_options(opts: &Options, proto: &str, fx: FixedConfig) -> Result<GraphOptions> {
    match opts.mode.preset().transformer {
        Some(TransformerPreset::Tee) => Ok(GraphOptions::tee(fx, proto_of(proto)?)),
        Some(TransformerPreset::Dealer) => Ok(GraphOptions::dealer(fx, proto_of(proto)?)),
        Some(t @ (TransformerPreset::Interactive | TransformerPreset::Silent)) => {
            if proto != "cf2" {
                return Err(Error::Config(format!("--proto {proto}: the {} preset compares with cf2", opts.mode.name())));
            }
            // the insecure test seed (tests only) makes the run deterministic: two-process = one-process
            let seed = opts.insecure_test_seed.map(|s| u64::from_le_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]));
            let source = if t == TransformerPreset::Silent { "silent" } else { "ferret" };
            Ok(GraphOptions::interactive(fx, crate::graph_run::InteractiveSetup { source: source.into(), he_params: opts.he_params.clone(), seed }))
        }
        None => Err(Error::Config(format!(
            "--mode {}: encoder graphs run in tee, dealer, interactive and silent modes; {} is not implemented for them yet (malicious-client needs CRISP's checks for the transformer operators)",
            opts.mode.name(),
            opts.mode.name()
        ))),
    }
}

/// The ring an encoder graph runs in: ℓ = 64 and the given fraction bits
/// (8..=12; the CNN default ℓ = 37 is replaced).
pub fn graph_fixed(frac: u32) -> Result<FixedConfig> {
    if !(8..=12).contains(&frac) {
        return Err(Error::Config(format!("encoder graphs run with 8..=12 fraction bits (got --frac {frac})")));
    }
    FixedConfig::new(64, frac)
}

fn recv_json(ch: &mut dyn Channel, what: &str) -> Result<Value> {
    let b = ch.recv()?;
    if b.len() > MAX_MSG {
        return Err(Error::Protocol(format!("{what}: message too large")));
    }
    serde_json::from_slice(&b).map_err(|e| Error::Protocol(format!("{what}: not JSON ({e})")))
}

/// Plans measured by `--plan auto`, per program fingerprint.
pub type PlanCache = Arc<std::sync::Mutex<HashMap<String, GraphOptions>>>;

/// The server's plan for a session's program: the preset, a plan file's
/// choices (refused naming the entry) or the cost model's (`auto`,
/// measured once per program and cached; in dealer mode the triples
/// preset is the only sound candidate, so nothing is measured).
pub fn server_plan(o: &GraphOptions, prog: &Program, choice: &PlanChoice, opts: &Options, cache: &PlanCache) -> Result<GraphOptions> {
    let dealer = opts.mode.preset().dealer();
    let p = server_plan_unchecked(o, prog, choice, opts, cache, dealer)?;
    p.validate(prog, dealer)?;
    Ok(p)
}

fn server_plan_unchecked(o: &GraphOptions, prog: &Program, choice: &PlanChoice, opts: &Options, cache: &PlanCache, dealer: bool) -> Result<GraphOptions> {
    // `auto` is measured once per program and cached; the rest is cheap
    let cached = matches!(choice, PlanChoice::Auto) && !dealer;
    let key = prog.fingerprint();
    if cached {
        if let Some(p) = cache.lock().map_err(|_| Error::Config("plan cache poisoned".into()))?.get(&key) {
            return Ok(p.clone());
        }
    }
    let (p, _) = crate::graph_plan::resolve(choice, o, prog, &opts.profile, dealer)?;
    if cached {
        cache.lock().map_err(|_| Error::Config("plan cache poisoned".into()))?.insert(key, p.clone());
    }
    Ok(p)
}

/// Serves an encoder graph on `addr` (each connection a session) with the
/// plan `plan`.
pub fn serve_graph(g: Arc<GraphModel>, addr: &str, opts: Options, plan: PlanChoice, log: Arc<dyn Fn(String) + Send + Sync>) -> Result<ServerHandle> {
    let o = opts.clone();
    let cache: PlanCache = Arc::default();
    runtime::serve_with(addr, opts, log, Arc::new(move |ch: &mut TcpChannel| serve_graph_session(ch, &g, &o, &plan, &cache)))
}

/// The input shapes a client asks for: the graph's inputs, each a list of
/// positive sizes, capped.
fn parse_shapes(g: &GraphModel, v: Option<&Value>) -> std::result::Result<HashMap<String, Vec<usize>>, String> {
    let obj = v.and_then(Value::as_object).ok_or("the hello lacks the input shapes")?;
    let mut out = HashMap::new();
    for spec in &g.inputs {
        let dims = obj.get(&spec.name).and_then(Value::as_array).ok_or_else(|| format!("the hello lacks the shape of input '{}'", spec.name))?;
        if dims.is_empty() || dims.len() > 4 {
            return Err(format!("input '{}': rank {}", spec.name, dims.len()));
        }
        let mut shape = Vec::new();
        let mut n = 1usize;
        for d in dims {
            let d = d.as_u64().filter(|&d| d > 0 && d <= MAX_INPUT_ELEMS as u64).ok_or_else(|| format!("input '{}': bad size {d}", spec.name))? as usize;
            n = n.saturating_mul(d);
            shape.push(d);
        }
        if n > MAX_INPUT_ELEMS {
            return Err(format!("input '{}' of {n} elements (at most {MAX_INPUT_ELEMS})", spec.name));
        }
        out.insert(spec.name.clone(), shape);
    }
    // inputs the graph does not take (a client sends the standard three) are ignored
    Ok(out)
}

/// One server session on an accepted channel.
pub fn serve_graph_session(ch: &mut dyn Channel, g: &GraphModel, opts: &Options, plan: &PlanChoice, cache: &PlanCache) -> Result<usize> {
    let hello = recv_json(ch, "client hello")?;
    let refuse = |ch: &mut dyn Channel, msg: String| -> Error {
        let _ = ch.send(json!({"ok": false, "error": msg}).to_string().as_bytes());
        Error::Protocol(msg)
    };
    if hello.get("hush").and_then(Value::as_str) != Some("graph") || hello.get("version").and_then(Value::as_u64) != Some(1) {
        let what = if hello.get("hush").and_then(Value::as_str) == Some("inference") {
            "this server serves an encoder graph: use `hush embed --connect` (not `hush infer`)".to_string()
        } else {
            "not a hush graph client (version 1)".to_string()
        };
        return Err(refuse(ch, what));
    }
    if let Err(m) = runtime::check_client_mode(&hello, opts) {
        return Err(refuse(ch, m));
    }
    let proto = match crate::hello::negotiate_family(&hello, opts) {
        Ok(p) => p,
        Err(m) => return Err(refuse(ch, m)),
    };
    let o = match graph_options(opts, &proto, opts.cfg) {
        Ok(o) => o,
        Err(e) => return Err(refuse(ch, e.to_string())),
    };
    let shapes = match parse_shapes(g, hello.get("inputs")) {
        Ok(s) => s,
        Err(m) => return Err(refuse(ch, m)),
    };
    // the outputs revealed: those the client names, else the graph's first
    let outs: Vec<String> = match hello.get("outputs").and_then(Value::as_array) {
        Some(v) if !v.is_empty() => v.iter().filter_map(Value::as_str).map(str::to_string).take(16).collect(),
        _ => g.outputs.iter().take(1).cloned().collect(),
    };
    let prog = match g.instantiate_outputs(&shapes, &outs).map_err(|e| Error::Model(e.to_string())).and_then(|p| check_program(&p, o.fx).map(|_| p)) {
        Ok(p) => p,
        Err(e) => return Err(refuse(ch, format!("the server cannot run its graph for these inputs: {e}"))),
    };
    let o = match server_plan(&o, &prog, plan, opts, cache) {
        Ok(o) => o,
        Err(e) => return Err(refuse(ch, format!("the server's plan ({}): {e}", plan.describe()))),
    };
    let provider = match runtime::server_provider(opts) {
        Ok(p) => p,
        Err(e) => return Err(refuse(ch, format!("the server cannot provide correlations: {e}"))),
    };
    let mut reply = json!({
        "ok": true, "bits": o.fx.bits, "frac": o.fx.frac, "proto": proto, "plan": o.to_json(&prog),
        "program": prog.to_json(),
    });
    runtime::mode_fields(&mut reply, opts, &provider);
    ch.send(reply.to_string().as_bytes())?;
    o.validate(&prog, opts.mode.preset().dealer())?;
    // the plan's provider (interactive: no module, no dealer; else the
    // module or dealer connection made above, established here)
    let establish = |ch: &mut dyn Channel| -> Result<SharedModule> {
        let mut module = provider.module;
        runtime::establish(&mut module, ch, opts, ModuleRole::Sender)?;
        Ok(module)
    };
    crate::graph_run::party_planned(Role::Server, &prog, &o, ch, &HashMap::new(), None, establish, |m, e| runtime::diagnose(m, &opts.mode, e))?;
    Ok(1)
}

/// The client's result.
#[derive(Clone, Debug)]
pub struct RemoteRun {
    pub outputs: Vec<Tensor>,
    pub output_names: Vec<String>,
    pub seconds: f64,
    pub bytes_sent: u64,
    pub bytes_recv: u64,
    pub rounds: u32,
    pub mode: String,
    pub proto: String,
    pub plan: Value,
    pub program: String,
    /// The client's time, bytes sent and rounds per operator type.
    pub by_op: Value,
}

/// Runs an encoder graph with a remote server: the client's side.
pub fn run_remote(addr: &str, opts: &Options, plan: &PlanChoice, inputs: &HashMap<String, Tensor>, outputs: &[String]) -> Result<RemoteRun> {
    let copts = ChannelOptions { profile: opts.profile.clone(), connect_timeout: opts.link.connect_timeout(), ..Default::default() };
    let sec = opts.link.to_peer(addr)?;
    let mut ch = TcpChannel::connect_with(addr, copts, &sec)?;
    run_remote_on(&mut ch, opts, plan, inputs, outputs)
}

/// [`run_remote`] on a connected channel.
pub fn run_remote_on(ch: &mut dyn Channel, opts: &Options, plan: &PlanChoice, inputs: &HashMap<String, Tensor>, outputs: &[String]) -> Result<RemoteRun> {
    let t = Instant::now();
    let shapes: serde_json::Map<String, Value> = inputs.iter().map(|(k, v)| (k.clone(), json!(v.shape))).collect();
    let hello = json!({"hush": "graph", "version": 1, "mode": opts.mode.name(), "proto": opts.proto, "proto_explicit": opts.expect.proto, "inputs": shapes, "outputs": outputs});
    ch.send(hello.to_string().as_bytes())?;
    let reply = recv_json(ch, "server reply")?;
    if reply.get("ok").and_then(Value::as_bool) != Some(true) {
        return Err(Error::Peer(format!("the server refused: {}", reply.get("error").and_then(Value::as_str).unwrap_or("no reason given"))));
    }
    crate::hello::check_reply(opts, &reply)?;
    let proto = reply.get("proto").and_then(Value::as_str).unwrap_or("").to_string();
    let frac = reply.get("frac").and_then(Value::as_u64).unwrap_or(0) as u32;
    if reply.get("bits").and_then(Value::as_u64) != Some(64) {
        return Err(Error::Peer("the server's ring is not 64 bits (encoder graphs need ℓ = 64)".into()));
    }
    let preset = graph_options(opts, &proto, graph_fixed(frac)?)?;
    let theirs = reply.get("plan").cloned().unwrap_or(Value::Null);
    let pj = reply.get("program").and_then(Value::as_str).ok_or_else(|| Error::Protocol("server reply lacks the program".into()))?;
    let prog = Program::from_json(pj).map_err(|e| Error::Protocol(format!("the server's program: {e}")))?;
    if prog.has_weights {
        return Err(Error::Protocol("the server's program carries weights (it must send the public program)".into()));
    }
    let dealer = opts.mode.preset().dealer();
    // the plan this client expects (`auto`: any plan sound for its mode)
    let mine = match plan {
        PlanChoice::Preset => Some(preset.clone()),
        PlanChoice::File { plan: f, .. } => Some(preset.with_plan_file(&prog, f, dealer)?),
        PlanChoice::Auto => None,
    };
    if let Some(m) = &mine {
        if theirs != m.to_json(&prog) {
            return Err(Error::Peer(format!(
                "plan mismatch: the server runs {theirs}, this client ({}, --mode {}) calls for {}",
                plan.describe(),
                opts.mode.name(),
                m.to_json(&prog)
            )));
        }
    }
    let o = preset.from_json(&theirs, &prog, dealer)?;
    for (name, shape, _) in &prog.inputs {
        if inputs.get(name).map(|t| &t.shape) != Some(shape) {
            return Err(Error::Protocol(format!("the server's program takes input '{name}' of shape {shape:?}, not the one asked for")));
        }
    }
    let establish = |ch: &mut dyn Channel| -> Result<SharedModule> {
        let mut module = runtime::client_provider(opts, &reply)?;
        runtime::establish(&mut module, ch, opts, ModuleRole::Receiver)?;
        Ok(module)
    };
    let (outputs, meter) = crate::graph_run::party_planned(Role::Client, &prog, &o, ch, inputs, None, establish, |m, e| runtime::diagnose(m, &opts.mode, e))?;
    let by_op = crate::graph_run::by_op(&prog, &meter);
    let outputs = outputs.ok_or_else(|| Error::Protocol("no outputs".into()))?;
    let c = ch.cost();
    Ok(RemoteRun {
        outputs,
        output_names: prog.outputs.iter().map(|(n, _)| n.clone()).collect(),
        seconds: t.elapsed().as_secs_f64(),
        bytes_sent: c.bytes_sent,
        bytes_recv: c.bytes_recv,
        rounds: c.rounds,
        mode: opts.mode.name().to_string(),
        proto,
        plan: theirs,
        program: prog.fingerprint(),
        by_op,
    })
}

/// One session of graph `g` over a loopback TCP link (TLS when `opts`
/// asks for it, each end pinning the other), the server on its own
/// thread: the client's result and the server's seconds
/// (`hush bench infer --model FILE.onnx --transport tcp`).
pub fn run_loopback(g: Arc<GraphModel>, opts: &Options, plan: &PlanChoice, inputs: &HashMap<String, Tensor>) -> Result<(RemoteRun, f64)> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| Error::Io(format!("loopback listener: {e}")))?;
    let addr = l.local_addr().map_err(|e| Error::Io(e.to_string()))?;
    let (sa, sb) = runtime::loopback_security(opts.link.is_tls())?;
    let copts = ChannelOptions { profile: opts.profile.clone(), ..Default::default() };
    let (so, sp, sc) = (opts.clone(), plan.clone(), copts.clone());
    let server = std::thread::spawn(move || -> Result<f64> {
        let t = Instant::now();
        let mut ch = TcpChannel::accept_with(&l, sc, &sa)?;
        serve_graph_session(&mut ch, &g, &so, &sp, &PlanCache::default())?;
        Ok(t.elapsed().as_secs_f64())
    });
    let client = TcpChannel::connect_with(addr, copts, &sb).map_err(Error::from).and_then(|mut ch| run_remote_on(&mut ch, opts, plan, inputs, &[]));
    let server = server.join().map_err(|_| Error::Protocol("the server thread panicked".into()))?;
    let r = client?;
    Ok((r, server?))
}

/// Which linear backend a plan names (reports).
pub fn backend_of(plan: &Value) -> Option<LinearBackend> {
    match plan.get("linear").and_then(Value::as_str) {
        Some("module") => Some(LinearBackend::Module),
        Some("triples") => Some(LinearBackend::Triples),
        _ => None,
    }
}

/// `hush serve --model M.onnx`: the encoder graph when the file is one
/// (an ONNX graph that the CNN importer refuses and the graph importer
/// takes); `None` for CNN models.
pub fn graph_model_for(path: &std::path::Path) -> Result<Option<GraphModel>> {
    if path.extension().and_then(|e| e.to_str()) != Some("onnx") {
        return Ok(None);
    }
    if hush_onnx::convert_file(path).is_ok() {
        return Ok(None);
    }
    match GraphModel::from_file(path) {
        Ok(g) => Ok(Some(g)),
        // neither: the CNN importer's message (Model::load repeats it), unless
        // the graph importer names a node of a transformer graph
        Err(e) if e.to_string().contains("graph:") && !e.to_string().contains("has no graph") => Err(Error::Model(e.to_string())),
        Err(_) => Ok(None),
    }
}

/// `hush serve` for an encoder graph.
pub fn serve_graph_main(a: crate::commands::ServeOptions, o: Options, g: GraphModel) -> Result<()> {
    let o = Options { cfg: graph_fixed(a.fixed.frac)?, ..o };
    graph_options(&o, &o.proto, o.cfg)?;
    let inputs: Vec<String> = g.inputs.iter().map(|i| i.name.clone()).collect();
    let outputs = g.outputs.clone();
    let log = hush_transport::notice::logger("hush serve");
    let plan = PlanChoice::from_arg(a.plan.as_deref())?;
    let h = serve_graph(Arc::new(g), &a.listen, o.clone(), plan, log)?;
    crate::commands::print_identity("hush serve", &o.link);
    hush_transport::log_line!(
        "hush serve",
        "encoder graph {} (inputs {}, outputs {}) on {} — ring 2^64, {} fraction bits, {}; clients connect with `hush embed --connect`; the server learns the padded input shapes only",
        a.model.display(),
        inputs.join(", "),
        outputs.join(", "),
        h.addr,
        o.cfg.frac,
        crate::commands::mode_line(&o)
    );
    h.wait();
    Ok(())
}

/// `hush embed --connect ADDR`: the client of an encoder-graph server.
pub fn embed_remote_main(a: &crate::encoder::EmbedCommandOptions, addr: &str) -> Result<()> {
    crate::commands::needs_dealer_addr(&a.common, "hush embed")?;
    let opts = crate::commands::options(&a.common, None, None)?;
    let inputs = crate::graph_run::token_inputs(&["input_ids", "attention_mask", "token_type_ids"], &a.ids, &a.mask, a.token_types.as_deref())?;
    let plan = PlanChoice::from_arg(a.plan.as_deref())?;
    let r = run_remote(addr, &opts, &plan, &inputs, &a.output.iter().cloned().collect::<Vec<_>>())?;
    let first = r.outputs.first().ok_or_else(|| Error::Model("the graph has no outputs".into()))?;
    crate::npy::write(&a.out, &first.shape, &first.v)?;
    let rec = json!({
        "cmd": "embed",
        "runtime": "graph",
        "connect": addr,
        "mode": r.mode,
        "proto": r.proto,
        "plan": r.plan,
        "program": r.program,
        "by_op": r.by_op,
        "output": r.output_names.first(),
        "output_shape": first.shape,
        "total_s": r.seconds,
        "bytes_sent": r.bytes_sent,
        "bytes_recv": r.bytes_recv,
        "rounds": r.rounds,
        "tee_note": match r.mode.as_str() { "tee" => "tee mode: trusted module simulated — gives no hardware protection", "silent" => "silent mode: SilentFlow modules simulated — they give no hardware protection", _ => "" },
    });
    if a.json {
        println!("{rec}");
    } else {
        println!(
            "hush embed: output '{}' {:?} from {addr}, {} mode, {:.2} s, sent {:.1} MiB, received {:.1} MiB, {} rounds{}",
            r.output_names.first().map(String::as_str).unwrap_or(""),
            first.shape,
            r.mode,
            r.seconds,
            r.bytes_sent as f64 / 1048576.0,
            r.bytes_recv as f64 / 1048576.0,
            r.rounds,
            if r.mode == "tee" { " (tee mode: trusted module simulated — gives no hardware protection)" } else { "" }
        );
        println!("wrote {}", a.out.display());
    }
    Ok(())
}
