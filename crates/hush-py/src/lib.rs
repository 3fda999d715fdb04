//! Python bindings: `hush._native`, wrapped by the pure-Python package in
//! `python/hush`. Long runs release the GIL; Rust errors become Python
//! exceptions (`ValueError` for bad arguments, `RuntimeError` otherwise),
//! and a Rust panic is caught here and never crosses into Python as one.

use hush_bench::{cot::CotBench, Record, Transport};
use hush_correlations::registry::SourceConfig;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::Value;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use hush_inference::fixed::FixedConfig;
use hush_inference::model::Model;
use hush_inference::runtime::{self, ClientSession, Options, ServerHandle};
use hush_transport::TcpChannel;

mod lr_shard;

fn to_py(py: Python<'_>, r: &Record) -> PyResult<PyObject> {
    let d = PyDict::new(py);
    for (k, v) in &r.0 {
        match v {
            Value::Bool(b) => d.set_item(k, *b)?,
            Value::Number(n) => {
                if let Some(i) = n.as_u64() {
                    d.set_item(k, i)?
                } else if let Some(i) = n.as_i64() {
                    d.set_item(k, i)?
                } else {
                    d.set_item(k, n.as_f64().unwrap_or(f64::NAN))?
                }
            }
            Value::String(s) => d.set_item(k, s)?,
            Value::Null => d.set_item(k, py.None())?,
            other => d.set_item(k, other.to_string())?,
        }
    }
    Ok(d.into_any().unbind())
}

/// Runs `f` without the GIL and with panics turned into RuntimeError.
fn guarded<T: Send>(py: Python<'_>, f: impl FnOnce() -> Result<T, String> + Send) -> PyResult<T> {
    py.allow_threads(|| match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(PyRuntimeError::new_err(e)),
        Err(_) => Err(PyRuntimeError::new_err("internal error (Rust panic caught at the Python boundary)")),
    })
}

/// Generates `n` correlated OTs between two parties in this process and
/// returns the benchmark record as a dict (wall_s, bytes, rounds, ...).
#[pyfunction]
#[pyo3(signature = (n=1_000_000, source="iknp", net="none", transport="tcp", seed=None))]
fn bench_cot(py: Python<'_>, n: usize, source: &str, net: &str, transport: &str, seed: Option<u64>) -> PyResult<PyObject> {
    if n == 0 {
        return Err(PyValueError::new_err("n must be at least 1"));
    }
    let profile = hush_bench::profile(net).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let transport = Transport::by_name(transport)
        .ok_or_else(|| PyValueError::new_err(format!("unknown transport '{transport}' (tcp, mem)")))?;
    let cfg = CotBench { source: SourceConfig::named(source), n, profile, transport, seed, level: None };
    let r = guarded(py, || hush_bench::cot::bench_cot(&cfg).map_err(|e| e.to_string()))?;
    to_py(py, &r)
}

/// Fixed-key AES throughput on one core for about `seconds`.
#[pyfunction]
#[pyo3(signature = (seconds=0.5, batch=4096))]
fn bench_aes(py: Python<'_>, seconds: f64, batch: usize) -> PyResult<PyObject> {
    if !(seconds > 0.0) || batch == 0 {
        return Err(PyValueError::new_err("seconds and batch must be positive"));
    }
    let r = guarded(py, || Ok(hush_bench::aes::bench_aes(batch, seconds)))?;
    to_py(py, &r)
}

/// Names of the network profiles.
#[pyfunction]
fn net_profiles() -> Vec<&'static str> {
    hush_transport::NetProfile::names().to_vec()
}

/// Names of the COT sources.
#[pyfunction]
fn cot_sources() -> Vec<&'static str> {
    hush_correlations::registry::SOURCES.to_vec()
}

/// The trust mode from `mode`, `dealer` and `dealer_pin` (dealer and
/// malicious-client modes without an address: a dealer started in this
/// process, for `run` only).

/// The malicious-client settings from `mac_s` (the MAC parameter s) and
/// `crisp_linear` (the linear backend: `dealt`, the default, or `ckks`,
/// which is announced by a `UserWarning` carrying
/// [`hush_inference::crisp_run::CKKS_GAP_WARNING`], as the CLI prints it).
fn crisp_of(py: Python<'_>, opts: &mut Options, mac_s: Option<u32>, crisp_linear: Option<&str>) -> PyResult<()> {
    let crisp = opts.mode.preset().engine == hush_inference::preset::Engine::Crisp;
    match (crisp, mac_s, crisp_linear) {
        (true, s, linear) => {
            opts.crisp.s = s.unwrap_or(opts.crisp.s);
            if let Some(l) = linear {
                opts.crisp.linear = l.to_string();
            }
            opts.crisp.check().map_err(|e| PyValueError::new_err(e.to_string()))?;
            if opts.crisp.linear == "ckks" {
                PyErr::warn(py, &py.get_type::<pyo3::exceptions::PyUserWarning>(), &std::ffi::CString::new(hush_inference::crisp_run::CKKS_GAP_WARNING).unwrap_or_default(), 1)?;
            }
            Ok(())
        }
        (_, Some(_), _) => Err(PyValueError::new_err("mac_s applies to mode=\"malicious-client\" only")),
        (_, _, Some(_)) => Err(PyValueError::new_err("crisp_linear applies to mode=\"malicious-client\" only")),
        _ => Ok(()),
    }
}
fn mode_of(mode: &str, dealer: Option<&str>, dealer_pin: Option<&str>, local_ok: bool) -> PyResult<runtime::Mode> {
    if mode == "dealer" && dealer.is_none() && !local_ok {
        return Err(PyValueError::new_err("mode=\"dealer\" needs dealer=\"HOST:PORT\" (where `hush dealer` listens) and dealer_pin=\"sha256:<hex>\""));
    }
    // local_ok: both parties here, a dealer started in this process (never a module)
    let f = if local_ok { runtime::Mode::from_flags_local } else { runtime::Mode::from_flags };
    f(mode, dealer, dealer_pin).map_err(|e| PyValueError::new_err(e.to_string()))
}

fn inference_options(proto: &str, net: &str, bits: u32, frac: u32) -> PyResult<Options> {
    let cfg = FixedConfig::new(bits, frac).map_err(|e| PyValueError::new_err(e.to_string()))?;
    if !["auto", "fss", "tami", "cf2", "crisp"].contains(&proto) {
        return Err(PyValueError::new_err(format!("proto '{proto}': choose auto, fss, tami (tee, dealer), cf2 (interactive, silent) or crisp (malicious-client)")));
    }
    let profile = hush_bench::profile(net).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let expect = hush_inference::hello::Expect { proto: proto != "auto", ..Default::default() };
    Ok(Options { cfg, proto: proto.to_string(), profile, expect, ..Default::default() })
}

/// LinkConfig settings from the Python arguments (TLS unless `insecure`).
fn link_of(identity: Option<String>, pins: Vec<String>, insecure: bool) -> PyResult<hush_transport::LinkConfig> {
    let flags = hush_transport::LinkFlags { identity: identity.map(Into::into), pins, insecure, ..Default::default() };
    hush_transport::LinkConfig::from_flags(&flags).map_err(|e| PyValueError::new_err(e.to_string()))
}

fn load_model(bytes: &[u8]) -> PyResult<Model> {
    Model::from_bytes(bytes).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Converts an ONNX model's bytes into a hush model file's bytes with the
/// built-in importer (the one the `hush` command uses). Raises ValueError
/// naming the node and operator on a model hush cannot run.
#[pyfunction]
fn onnx_to_hushm(py: Python<'_>, onnx: &[u8]) -> PyResult<PyObject> {
    let r = py.allow_threads(|| catch_unwind(AssertUnwindSafe(|| hush_onnx::convert(onnx))));
    onnx_result(py, r)
}

/// Reads an ONNX file (size-checked before reading) and converts it into a
/// hush model file's bytes with the built-in importer. Raises ValueError on
/// a model hush cannot run (naming the node and operator) or a file that
/// cannot be read.
#[pyfunction]
fn onnx_file_to_hushm(py: Python<'_>, path: std::path::PathBuf) -> PyResult<PyObject> {
    let r = py.allow_threads(|| catch_unwind(AssertUnwindSafe(|| hush_onnx::convert_file(&path))));
    onnx_result(py, r)
}

fn onnx_result(py: Python<'_>, r: std::thread::Result<hush_onnx::Result<Vec<u8>>>) -> PyResult<PyObject> {
    match r {
        Ok(Ok(b)) => Ok(pyo3::types::PyBytes::new(py, &b).into_any().unbind()),
        Ok(Err(e)) => Err(PyValueError::new_err(e.to_string())),
        Err(_) => Err(PyRuntimeError::new_err("internal error (Rust panic caught at the Python boundary)")),
    }
}

/// Calls a Python progress callback `f(done, total)` from a worker thread.
fn progress_fn(cb: Option<PyObject>) -> impl FnMut(usize, usize) + Send {
    move |done, total| {
        if let Some(f) = &cb {
            Python::with_gil(|py| {
                let _ = f.call1(py, (done, total));
            });
        }
    }
}

/// Private inference with both parties in this process (tee mode, or
/// dealer mode with a dealer started in this process). Takes a
/// hush model file's bytes and a flat float64 input with its shape; returns
/// (flat logits, output shape, report as JSON text).
#[pyfunction]
#[pyo3(signature = (model_bytes, data, shape, proto="auto", net="none", bits=37, frac=12, tcp=true, progress=None, mode="tee", mac_s=None, crisp_linear=None))]
#[allow(clippy::too_many_arguments)]
fn run_model(
    py: Python<'_>,
    model_bytes: Vec<u8>,
    data: Vec<f64>,
    shape: Vec<usize>,
    proto: &str,
    net: &str,
    bits: u32,
    frac: u32,
    tcp: bool,
    progress: Option<PyObject>,
    mode: &str,
    mac_s: Option<u32>,
    crisp_linear: Option<&str>,
) -> PyResult<(Vec<f64>, Vec<usize>, String)> {
    let mut opts = inference_options(proto, net, bits, frac)?;
    // Both parties in this process: TLS with ephemeral identities over TCP.
    opts.link = link_of(None, Vec::new(), false)?;
    opts.mode = mode_of(mode, None, None, true)?;
    crisp_of(py, &mut opts, mac_s, crisp_linear)?;
    opts.resolve_family().map_err(|e| PyValueError::new_err(e.to_string()))?;
    let model = Arc::new(load_model(&model_bytes)?);
    let n: usize = model.input_shape.iter().product();
    let ok_shape = shape == model.input_shape || (shape.len() == model.input_shape.len() + 1 && shape[0] == 1 && shape[1..] == model.input_shape[..]);
    if !ok_shape || data.len() != n {
        return Err(PyValueError::new_err(format!(
            "input of shape {shape:?}; the model expects {:?} (optionally with a leading batch dimension of 1)",
            model.input_shape
        )));
    }
    let (data, _note) = model.prepare_input(&data).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let out_shape = model.output_shape().to_vec();
    let prog = progress_fn(progress);
    let (logits, report) = guarded(py, move || {
        let ins = model.input_shape.clone();
        let mut opts = opts;
        let _dealer = runtime::local_dealer(&mut opts).map_err(|e| e.to_string())?;
        let run = runtime::run_local(model.clone(), &ins, &data, &opts, tcp, prog).map_err(|e| e.to_string())?;
        let v = runtime::run_json(&model, &run, &opts);
        Ok((run.inference.logits, v.to_string()))
    })?;
    Ok((logits, out_shape, report))
}

/// Private sentence embeddings with a BERT-family ONNX encoder (the MiniLM
/// path of `hush embed`): both parties in this process, tee mode (trusted
/// modules simulated — no hardware protection). `ids` are the token ids of
/// each sentence ([CLS] … [SEP], no padding: the client tokenizes and pads
/// locally, the server learns the padded lengths only). Returns
/// (embeddings, one per sentence, and the run's record as JSON text).
#[pyfunction]
#[pyo3(signature = (model_path, ids, proto="tami", bits=64, frac=12, batch_tokens=None, check=false))]
#[allow(clippy::too_many_arguments)]
fn embed_tokens(
    py: Python<'_>,
    model_path: std::path::PathBuf,
    ids: Vec<Vec<u32>>,
    proto: &str,
    bits: u32,
    frac: u32,
    batch_tokens: Option<usize>,
    check: bool,
) -> PyResult<(Vec<Vec<f64>>, String)> {
    let proto = match proto {
        "tami" => hush_2pc::nonlinear::Proto::Tami,
        "fss" => hush_2pc::nonlinear::Proto::Fss,
        p => return Err(PyValueError::new_err(format!("proto {p:?}: 'tami' or 'fss' (the transformer operators need dealt correlations)"))),
    };
    if ids.is_empty() || ids.iter().any(|s| s.is_empty()) {
        return Err(PyValueError::new_err("ids: at least one sentence, each with at least one token"));
    }
    let fx = FixedConfig::new(bits, frac).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let mut o = hush_inference::encoder::EmbedOptions { fx, proto, ..Default::default() };
    if let Some(b) = batch_tokens {
        o.batch_tokens = b.max(1);
    }
    guarded(py, move || {
        let e = hush_onnx::encoder::encoder_from_file(&model_path).map_err(|e| e.to_string())?;
        let (emb, st, bounds) = hush_inference::encoder::embed_private(&e, &ids, &o).map_err(|e| e.to_string())?;
        let refcheck = if check {
            let c = hush_inference::encoder::embed_clear(&e, &ids, &o).map_err(|e| e.to_string())?;
            Some(emb.iter().zip(&c).map(|(x, y)| hush_inference::encoder::cosine(x, y)).fold(1.0f64, f64::min))
        } else {
            None
        };
        let rec = serde_json::json!({
            "cmd": "embed",
            "sentences": emb.len(),
            "hidden": e.hidden,
            "layers": e.layers.len(),
            "mode": "tee",
            "bits": fx.bits,
            "frac": fx.frac,
            "batches": st.batches,
            "tokens_padded": st.tokens,
            "online_s": st.seconds,
            "bytes": st.bytes,
            "rounds": st.rounds,
            "headroom_bits": bounds.headroom_bits,
            "reference_min_cosine": refcheck,
            "tee_note": "tee mode: trusted module simulated — gives no hardware protection; both parties in this process",
        });
        Ok((emb, rec.to_string()))
    })
}

/// Token ids of each sentence (special tokens added, at most `max_len`,
/// no padding) with the Hugging Face tokenizer.json at `path`: the same
/// code as `hush embed --text` (the `tokenizers` crate).
#[pyfunction]
#[pyo3(signature = (path, texts, max_len=128))]
fn tokenize(py: Python<'_>, path: std::path::PathBuf, texts: Vec<String>, max_len: usize) -> PyResult<Vec<Vec<u32>>> {
    let r = py.allow_threads(|| catch_unwind(AssertUnwindSafe(|| hush_inference::tokenize::encode(&path, &texts, max_len))));
    match r {
        Ok(Ok(t)) => Ok(t.ids),
        Ok(Err(e)) => Err(PyValueError::new_err(e.to_string())),
        Err(_) => Err(PyRuntimeError::new_err("internal error (Rust panic caught at the Python boundary)")),
    }
}

/// The client of an encoder-graph server (`hush serve --model encoder.onnx`):
/// `ids`, `mask` (and `token_types`) are `rows × padded length` integer
/// arrays, flattened, with their `shape`. Returns (the output's values, its
/// shape, the run's record as JSON text).
#[pyfunction]
#[pyo3(signature = (addr, ids, mask, shape, token_types=None, output=None, proto="auto", net="none", pin=None, identity=None, insecure=false, mode="tee", dealer=None, dealer_pin=None, connect_timeout=None, plan=None))]
#[allow(clippy::too_many_arguments)]
fn embed_remote(
    py: Python<'_>,
    addr: &str,
    ids: Vec<i64>,
    mask: Vec<i64>,
    shape: Vec<usize>,
    token_types: Option<Vec<i64>>,
    output: Option<String>,
    proto: &str,
    net: &str,
    pin: Option<String>,
    identity: Option<String>,
    insecure: bool,
    mode: &str,
    dealer: Option<String>,
    dealer_pin: Option<String>,
    connect_timeout: Option<f64>,
    plan: Option<String>,
) -> PyResult<(Vec<f64>, Vec<usize>, String)> {
    use hush_onnx::eval::Tensor;
    let plan = hush_inference::graph_run::PlanChoice::from_arg(plan.as_deref()).map_err(|e| PyValueError::new_err(e.to_string()))?;
    if !insecure && pin.is_none() {
        return Err(PyValueError::new_err(format!("no pin for {addr}: pass pin=\"sha256:<hex>\" (the server's fingerprint), or insecure=True on both sides")));
    }
    let n: usize = shape.iter().product();
    if shape.len() != 2 || n == 0 || ids.len() != n || mask.len() != n || token_types.as_ref().is_some_and(|t| t.len() != n) {
        return Err(PyValueError::new_err(format!("ids, mask (and token_types) must be non-empty 2-D arrays of one shape (got shape {shape:?})")));
    }
    if mask.iter().any(|&m| m != 0 && m != 1) || ids.iter().any(|&t| t < 0) {
        return Err(PyValueError::new_err("mask must hold only 0 and 1, token ids must be non-negative"));
    }
    let mut opts = inference_options(proto, net, 64, 12)?;
    opts.link = link_of(identity, pin.into_iter().collect(), insecure)?;
    if let Some(t) = connect_timeout {
        if !(t > 0.0 && t.is_finite()) {
            return Err(PyValueError::new_err("connect_timeout must be a positive number of seconds"));
        }
        opts.link = opts.link.with_connect_timeout(std::time::Duration::from_secs_f64(t));
    }
    opts.mode = mode_of(mode, dealer.as_deref(), dealer_pin.as_deref(), false)?;
    opts.resolve_family().map_err(|e| PyValueError::new_err(e.to_string()))?;
    let f = |v: &[i64]| Tensor::ints(shape.clone(), v.iter().map(|&x| x as f64).collect());
    let mut inputs = std::collections::HashMap::from([("input_ids".to_string(), f(&ids)), ("attention_mask".to_string(), f(&mask))]);
    inputs.insert("token_type_ids".into(), f(token_types.as_deref().unwrap_or(&vec![0; n])));
    let addr = addr.to_string();
    guarded(py, move || {
        let outs: Vec<String> = output.into_iter().collect();
        let r = hush_inference::graph_serve::run_remote(&addr, &opts, &plan, &inputs, &outs).map_err(|e| e.to_string())?;
        let first = r.outputs.into_iter().next().ok_or("the graph has no outputs")?;
        let rec = serde_json::json!({
            "cmd": "embed", "runtime": "graph", "connect": addr, "mode": r.mode, "proto": r.proto, "plan": r.plan,
            "program": r.program, "by_op": r.by_op, "output": r.output_names.first(), "total_s": r.seconds, "bytes_sent": r.bytes_sent,
            "bytes_recv": r.bytes_recv, "rounds": r.rounds,
        });
        Ok((first.v, first.shape, rec.to_string()))
    })
}

/// A model server (many concurrent client sessions on their own threads).
#[pyclass]
struct NativeServer {
    handle: std::sync::Mutex<Option<ServerHandle>>,
    addr: String,
    fingerprint: Option<String>,
}

#[pymethods]
impl NativeServer {
    #[getter]
    fn addr(&self) -> String {
        self.addr.clone()
    }
    /// "sha256:<hex>" of the server's certificate (None with insecure=True).
    #[getter]
    fn fingerprint(&self) -> Option<String> {
        self.fingerprint.clone()
    }
    /// (sessions that ended well, sessions that failed).
    fn sessions(&self) -> (u64, u64) {
        let g = self.handle.lock();
        match g.as_ref().ok().and_then(|g| g.as_ref()) {
            Some(h) => (
                h.sessions_ok.load(std::sync::atomic::Ordering::SeqCst),
                h.sessions_failed.load(std::sync::atomic::Ordering::SeqCst),
            ),
            None => (0, 0),
        }
    }
    /// Stops accepting new sessions.
    fn shutdown(&self, py: Python<'_>) {
        let h = self.handle.lock().map(|mut g| g.take()).unwrap_or(None);
        if let Some(h) = h {
            py.allow_threads(|| h.shutdown());
        }
    }
}

#[pyfunction]
#[pyo3(signature = (model_bytes, listen="127.0.0.1:0", proto="auto", net="none", bits=37, frac=12, identity=None, pins=Vec::new(), insecure=false, mode="tee", dealer=None, dealer_pin=None, mac_s=None, crisp_linear=None))]
#[allow(clippy::too_many_arguments)]
fn serve(
    py: Python<'_>,
    model_bytes: Vec<u8>,
    listen: &str,
    proto: &str,
    net: &str,
    bits: u32,
    frac: u32,
    identity: Option<String>,
    pins: Vec<String>,
    insecure: bool,
    mode: &str,
    dealer: Option<String>,
    dealer_pin: Option<String>,
    mac_s: Option<u32>,
    crisp_linear: Option<&str>,
) -> PyResult<NativeServer> {
    let mut opts = inference_options(proto, net, bits, frac)?;
    opts.link = link_of(identity, pins, insecure)?;
    opts.mode = mode_of(mode, dealer.as_deref(), dealer_pin.as_deref(), false)?;
    crisp_of(py, &mut opts, mac_s, crisp_linear)?;
    opts.resolve_family().map_err(|e| PyValueError::new_err(e.to_string()))?;
    let fingerprint = opts.link.fingerprint().map(|f| f.to_string());
    let model = Arc::new(load_model(&model_bytes)?);
    let h = runtime::serve(model, listen, opts, Arc::new(|_line: String| {})).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    let addr = h.addr.to_string();
    Ok(NativeServer { handle: std::sync::Mutex::new(Some(h)), addr, fingerprint })
}

/// A client session with a model server.
#[pyclass]
struct NativeClient {
    session: std::sync::Mutex<Option<ClientSession<TcpChannel>>>,
}

impl NativeClient {
    fn take(&self) -> Option<ClientSession<TcpChannel>> {
        self.session.lock().map(|mut g| g.take()).unwrap_or(None)
    }
    fn put(&self, s: ClientSession<TcpChannel>) {
        if let Ok(mut g) = self.session.lock() {
            *g = Some(s);
        }
    }
}

#[pymethods]
impl NativeClient {
    /// The model's input shape, as the server announced it.
    #[getter]
    fn input_shape(&self) -> Vec<usize> {
        self.session.lock().ok().and_then(|g| g.as_ref().map(|s| s.model.input_shape.clone())).unwrap_or_default()
    }
    /// One private inference; returns (flat logits, output shape, report JSON).
    #[pyo3(signature = (data, shape, progress=None))]
    fn infer(&self, py: Python<'_>, data: Vec<f64>, shape: Vec<usize>, progress: Option<PyObject>) -> PyResult<(Vec<f64>, Vec<usize>, String)> {
        let mut s = self.take().ok_or_else(|| PyRuntimeError::new_err("client session is closed"))?;
        let data = match s.model.prepare_input(&data) {
            Ok((d, _)) => d,
            Err(e) => {
                // refused before anything is sent: the session stays open
                self.put(s);
                return Err(PyValueError::new_err(e.to_string()));
            }
        };
        let prog = progress_fn(progress);
        let (s, r) = py.allow_threads(move || {
            let r = catch_unwind(AssertUnwindSafe(|| s.infer(&shape, &data, prog)));
            (s, r)
        });
        let r = match r {
            Ok(Ok(inf)) => inf,
            Ok(Err(e)) => {
                // A failed inference ends the session (the channel is closed on errors).
                drop(s);
                return Err(match e {
                    hush_inference::Error::Input(m) => PyValueError::new_err(m),
                    other => PyRuntimeError::new_err(other.to_string()),
                });
            }
            Err(_) => return Err(PyRuntimeError::new_err("internal error (Rust panic caught at the Python boundary)")),
        };
        let mut report = serde_json::json!({
            "online_s": r.report.online_secs,
            "offline_s": r.report.offline_secs,
            "bytes_sent": r.report.layers.iter().map(|l| l.bytes_sent).sum::<u64>(),
            "bytes_recv": r.report.layers.iter().map(|l| l.bytes_recv).sum::<u64>(),
            "rounds": r.report.layers.iter().map(|l| l.rounds).sum::<u32>(),
            "module": r.report.module,
        });
        if let Some(c) = &r.report.crisp {
            // malicious-client mode: the server's check passed before the release
            report["mac_check"] = serde_json::json!("passed");
            report["checked_openings"] = serde_json::json!(c.checked_openings);
            report["dealer_bytes"] = serde_json::json!(c.dealer_bytes);
        }
        self.put(s);
        Ok((r.logits, r.shape, report.to_string()))
    }
    /// Ends the session.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        if let Some(s) = self.take() {
            py.allow_threads(|| s.close()).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        }
        Ok(())
    }
}

#[pyfunction]
#[pyo3(signature = (addr, proto="auto", net="none", pin=None, identity=None, insecure=false, mode="tee", dealer=None, dealer_pin=None, connect_timeout=None, mac_s=None, crisp_linear=None))]
#[allow(clippy::too_many_arguments)]
fn connect(
    py: Python<'_>,
    addr: &str,
    proto: &str,
    net: &str,
    pin: Option<String>,
    identity: Option<String>,
    insecure: bool,
    mode: &str,
    dealer: Option<String>,
    dealer_pin: Option<String>,
    connect_timeout: Option<f64>,
    mac_s: Option<u32>,
    crisp_linear: Option<&str>,
) -> PyResult<NativeClient> {
    if !insecure && pin.is_none() {
        return Err(PyValueError::new_err(format!(
            "no pin for {addr}: pass pin=\"sha256:<hex>\" (the server's fingerprint, printed by `hush serve` or Server.fingerprint), or insecure=True on both sides"
        )));
    }
    let mut opts = inference_options(proto, net, 37, 12)?;
    opts.link = link_of(identity, pin.into_iter().collect(), insecure)?;
    if let Some(t) = connect_timeout {
        if !(t > 0.0 && t.is_finite()) {
            return Err(PyValueError::new_err("connect_timeout must be a positive number of seconds"));
        }
        opts.link = opts.link.with_connect_timeout(std::time::Duration::from_secs_f64(t));
    }
    opts.mode = mode_of(mode, dealer.as_deref(), dealer_pin.as_deref(), false)?;
    crisp_of(py, &mut opts, mac_s, crisp_linear)?;
    opts.resolve_family().map_err(|e| PyValueError::new_err(e.to_string()))?;
    let addr = addr.to_string();
    let s = guarded(py, move || runtime::connect(&addr, &opts).map_err(|e| e.to_string()))?;
    Ok(NativeClient { session: std::sync::Mutex::new(Some(s)) })
}

/// The `hush` command line (`argv` as `sys.argv`: the program name first);
/// returns the exit status. Runs without the GIL; a Rust panic is status
/// 101, output into a closed pipe (`hush circuit list | head -1`) 141, as
/// with the Cargo-built binary.
#[pyfunction]
fn cli_main(py: Python<'_>, argv: Vec<String>) -> i32 {
    py.allow_threads(|| match hush_cli::run_quiet_on_closed_stdout(argv) {
        Ok(code) => code as i32,
        Err(_) => {
            eprintln!("hush: internal error (Rust panic)");
            101
        }
    })
}

/// The out-of-process trusted module (`hush-tee-module`) on this process's
/// stdin/stdout; `args` after the program name. Returns the exit status.
#[pyfunction]
fn tee_module_main(py: Python<'_>, args: Vec<String>) -> i32 {
    py.allow_threads(|| catch_unwind(AssertUnwindSafe(|| hush_2pc::module_process::module_main(args))).unwrap_or(101))
}

/// One party of a vertical logistic-regression training (CAESAR-style,
/// `hush-lr`) over TCP: this party's rows as CSR arrays, labels at the
/// labels party. Returns a dict of costs (and the opened model if both
/// parties chose `reveal`); the shares go to `out` (written atomically).
#[pyfunction]
#[pyo3(signature = (role, rows, cols, indptr, indices, data, labels=None, listen=None, peer=None, pin=None, identity=None, insecure=false, out=None, epochs=10, batch=64, lr=0.5, lr_decay=0.0, l2=0.0, bits=2048, sigmoid="cubic", intercept=true, reveal=false, seed=1, low_bandwidth=false))]
#[allow(clippy::too_many_arguments)]
fn train_vertical(
    py: Python<'_>,
    role: &str,
    rows: u64,
    cols: u64,
    indptr: Vec<u64>,
    indices: Vec<u64>,
    data: Vec<f64>,
    labels: Option<Vec<f64>>,
    listen: Option<String>,
    peer: Option<String>,
    pin: Option<String>,
    identity: Option<String>,
    insecure: bool,
    out: Option<String>,
    epochs: u32,
    batch: u32,
    lr: f64,
    lr_decay: f64,
    l2: f64,
    bits: u32,
    sigmoid: &str,
    intercept: bool,
    reveal: bool,
    seed: u64,
    low_bandwidth: bool,
) -> PyResult<PyObject> {
    use hush_lr::secure::Role;
    let bad = |e: hush_lr::Error| PyValueError::new_err(e.to_string());
    let role = Role::parse(role).map_err(bad)?;
    let sigmoid = hush_lr::Sigmoid::parse(sigmoid).map_err(bad)?;
    if listen.is_some() == peer.is_some() {
        return Err(PyValueError::new_err("give exactly one of listen=ADDR or peer=ADDR"));
    }
    if out.is_none() && !reveal {
        return Err(PyValueError::new_err("give out=PATH for the model shares (or reveal=True): the model would be lost"));
    }
    let mut ds = hush_lr::npz::from_csr(rows, cols, &indptr, &indices, &data, "X").map_err(bad)?;
    let has_labels = labels.is_some();
    if let Some(y) = labels {
        ds.labels = hush_lr::npz::check_labels(y, ds.len(), "y").map_err(bad)?;
    }
    if role == Role::Features && has_labels {
        return Err(PyValueError::new_err("y is for the labels party only"));
    }
    let link = link_of(identity, pin.into_iter().collect(), insecure)?;
    let cfg = hush_lr::TrainConfig { epochs, batch, lr, lr_decay, l2, sigmoid, key_bits: bits, order_seed: seed, reveal, low_bandwidth };
    let o = guarded(py, move || {
        hush_lr::train_party(ds, has_labels, role, &cfg, intercept, listen.as_deref(), peer.as_deref(), &link, out.as_deref().map(std::path::Path::new))
            .map_err(|e| e.to_string())
    })?;
    let d = PyDict::new(py);
    d.set_item("role", o.shares.role.name())?;
    d.set_item("wall_s", o.report.wall_s)?;
    d.set_item("setup_s", o.report.setup_s)?;
    d.set_item("triple_s", o.report.triple_s)?;
    d.set_item("bytes", o.bytes)?;
    d.set_item("rounds", o.rounds)?;
    d.set_item("epochs", o.report.epoch_s.len())?;
    if let Some(op) = &o.opened {
        d.set_item("weights_labels_party", op.labels.clone())?;
        d.set_item("weights_features_party", op.features.clone())?;
        d.set_item("intercept", op.intercept)?;
    }
    Ok(d.into_any().unbind())
}

/// One party of an ECDH-PSI (hush-psi) over TCP + TLS: the aligned row
/// order (this party's row indices of the intersection, in the order both
/// parties' outputs share) or only the intersection's size.
#[pyfunction]
#[pyo3(signature = (role, ids, listen=None, peer=None, pin=None, identity=None, insecure=false, size_only=false, max_peer_ids=hush_psi::DEFAULT_MAX_PEER_IDS))]
#[allow(clippy::too_many_arguments)]
fn psi(
    py: Python<'_>,
    role: &str,
    ids: Vec<String>,
    listen: Option<String>,
    peer: Option<String>,
    pin: Option<String>,
    identity: Option<String>,
    insecure: bool,
    size_only: bool,
    max_peer_ids: usize,
) -> PyResult<PyObject> {
    let role = hush_psi::Role::parse(role).map_err(|e| PyValueError::new_err(e.to_string()))?;
    if listen.is_some() == peer.is_some() {
        return Err(PyValueError::new_err("give exactly one of listen=ADDR or peer=ADDR"));
    }
    hush_psi::check_distinct(&ids).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let link = link_of(identity, pin.into_iter().collect(), insecure)?;
    let cfg = hush_psi::PsiConfig {
        output: if size_only { hush_psi::Output::SizeOnly } else { hush_psi::Output::Aligned },
        max_peer_ids,
        ..Default::default()
    };
    let r = guarded(py, move || {
        hush_psi::psi_party(&ids, role, &cfg, listen.as_deref(), peer.as_deref(), &link).map_err(|e| e.to_string())
    })?;
    let d = PyDict::new(py);
    d.set_item("role", role.name())?;
    d.set_item("rows", r.out.rows.clone())?;
    d.set_item("intersection", r.out.intersection)?;
    d.set_item("own_size", r.out.own_size)?;
    d.set_item("peer_size", r.out.peer_size)?;
    d.set_item("bytes", r.cost.bytes_sent + r.cost.bytes_recv)?;
    d.set_item("rounds", r.cost.rounds)?;
    d.set_item("wall_s", r.wall_s)?;
    Ok(d.into_any().unbind())
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(bench_cot, m)?)?;
    m.add_function(wrap_pyfunction!(bench_aes, m)?)?;
    m.add_function(wrap_pyfunction!(net_profiles, m)?)?;
    m.add_function(wrap_pyfunction!(cot_sources, m)?)?;
    m.add_function(wrap_pyfunction!(run_model, m)?)?;
    m.add_function(wrap_pyfunction!(embed_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(tokenize, m)?)?;
    m.add_function(wrap_pyfunction!(embed_remote, m)?)?;
    m.add_function(wrap_pyfunction!(onnx_to_hushm, m)?)?;
    m.add_function(wrap_pyfunction!(onnx_file_to_hushm, m)?)?;
    m.add_function(wrap_pyfunction!(serve, m)?)?;
    m.add_function(wrap_pyfunction!(connect, m)?)?;
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    m.add_function(wrap_pyfunction!(tee_module_main, m)?)?;
    m.add_function(wrap_pyfunction!(train_vertical, m)?)?;
    m.add_function(wrap_pyfunction!(psi, m)?)?;
    m.add_function(wrap_pyfunction!(lr_shard::lr_apply_steps, m)?)?;
    m.add_function(wrap_pyfunction!(lr_shard::lr_save_model, m)?)?;
    m.add_function(wrap_pyfunction!(lr_shard::lr_ray_spec, m)?)?;
    m.add_function(wrap_pyfunction!(lr_shard::lr_buckets, m)?)?;
    m.add_class::<lr_shard::LrWorker>()?;
    m.add_class::<NativeServer>()?;
    m.add_class::<NativeClient>()?;
    Ok(())
}
