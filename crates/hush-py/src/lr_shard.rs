//! `hush._native.LrWorker` and the driver's helpers: the Rust side of
//! `hush.ray` (vertical LR sharded over K worker pairs, `hush_lr::shard`).
//! Arrays cross as little-endian bytes (`numpy.ndarray.tobytes()` /
//! `numpy.frombuffer`): model and gradient shares as u64, CSR arrays as
//! u64 (indptr, indices) and f64 (data, labels).

use hush_lr::secure::{ModelShares, Opened, Randomness, Role};
use hush_lr::shard::{ShardSpec, ShardWorker, StepOut};
use hush_lr::{Sigmoid, TrainConfig};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

fn u64s(b: &[u8], what: &str) -> PyResult<Vec<u64>> {
    if b.len() % 8 != 0 {
        return Err(PyValueError::new_err(format!("{what}: {} bytes is not a whole number of 64-bit words", b.len())));
    }
    Ok(b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect())
}

fn f64s(b: &[u8], what: &str) -> PyResult<Vec<f64>> {
    Ok(u64s(b, what)?.into_iter().map(f64::from_bits).collect())
}

fn bytes_of<'py>(py: Python<'py>, v: &[u64]) -> Bound<'py, PyBytes> {
    let mut out = Vec::with_capacity(v.len() * 8);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    PyBytes::new(py, &out)
}

fn run<T: Send>(py: Python<'_>, f: impl FnOnce() -> hush_lr::Result<T> + Send) -> PyResult<T> {
    py.allow_threads(|| match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(PyRuntimeError::new_err(e.to_string())),
        Err(_) => Err(PyRuntimeError::new_err("internal error (Rust panic caught at the Python boundary)")),
    })
}

#[allow(clippy::too_many_arguments)]
fn train_config(epochs: u32, batch: u32, lr: f64, lr_decay: f64, l2: f64, bits: u32, sigmoid: &str, seed: u64, reveal: bool, low_bandwidth: bool) -> PyResult<TrainConfig> {
    let sigmoid = Sigmoid::parse(sigmoid).map_err(|e| PyValueError::new_err(e.to_string()))?;
    if bits != 2048 && bits != 3072 {
        return Err(PyValueError::new_err(format!("bits={bits} (2048 or 3072)")));
    }
    if epochs == 0 || batch == 0 || !lr.is_finite() || !l2.is_finite() || !lr_decay.is_finite() || l2 < 0.0 || lr_decay < 0.0 {
        return Err(PyValueError::new_err("epochs and batch must be positive; lr, l2 and lr_decay finite, l2 and lr_decay not negative"));
    }
    Ok(TrainConfig { epochs, batch, lr, lr_decay, l2, sigmoid, key_bits: bits, order_seed: seed, reveal, low_bandwidth })
}

fn role_of(role: &str) -> PyResult<Role> {
    Role::parse(role).map_err(|e| PyValueError::new_err(e.to_string()))
}

fn opened_dict(py: Python<'_>, op: &Opened) -> PyResult<PyObject> {
    let d = PyDict::new(py);
    d.set_item("weights_labels_party", op.labels.clone())?;
    d.set_item("weights_features_party", op.features.clone())?;
    d.set_item("intercept", op.intercept)?;
    Ok(d.into_any().unbind())
}

/// One worker of a sharded training (`hush_lr::shard::ShardWorker`): its
/// own TLS link to the peer's worker with the same index (listen at
/// `listen` or connect to `peer`, pinned like every hush link), opened in
/// the worker's thread at the first call.
#[pyclass(module = "hush._native")]
pub struct LrWorker {
    w: Mutex<ShardWorker>,
    role: Role,
}

#[pymethods]
impl LrWorker {
    /// `insecure_test_seed`: derive every random value from this seed
    /// (reproducibility tests only; see `hush_lr::secure::Randomness`).
    #[new]
    #[pyo3(signature = (role, k, index, listen=None, peer=None, pin=None, identity=None, insecure=false, epochs=10, batch=64, lr=0.5, lr_decay=0.0, l2=0.0, bits=2048, sigmoid="cubic", seed=1, reveal=false, low_bandwidth=false, insecure_test_seed=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        role: &str,
        k: u32,
        index: u32,
        listen: Option<String>,
        peer: Option<String>,
        pin: Option<String>,
        identity: Option<String>,
        insecure: bool,
        epochs: u32,
        batch: u32,
        lr: f64,
        lr_decay: f64,
        l2: f64,
        bits: u32,
        sigmoid: &str,
        seed: u64,
        reveal: bool,
        low_bandwidth: bool,
        insecure_test_seed: Option<u64>,
    ) -> PyResult<Self> {
        let role = role_of(role)?;
        let cfg = train_config(epochs, batch, lr, lr_decay, l2, bits, sigmoid, seed, reveal, low_bandwidth)?;
        if listen.is_some() == peer.is_some() {
            return Err(PyValueError::new_err("give exactly one of listen=ADDR or peer=ADDR"));
        }
        let link = crate::link_of(identity, pin.into_iter().collect(), insecure)?;
        let randomness = match insecure_test_seed {
            Some(seed) => Randomness::InsecureTestSeed { seed, worker: index },
            None => Randomness::Os,
        };
        let open = move || hush_lr::party::connect(listen.as_deref(), peer.as_deref(), &link);
        let w = ShardWorker::spawn(open, role, ShardSpec { k, index }, cfg, randomness).map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(LrWorker { w: Mutex::new(w), role })
    }

    /// PSI on this worker's bucket of IDs; a dict with `rows` (indices into
    /// `ids`, in the order both parties share) and the sizes.
    fn psi(&self, py: Python<'_>, ids: Vec<String>) -> PyResult<PyObject> {
        let r = run(py, || self.w.lock().unwrap().psi(ids))?;
        let d = PyDict::new(py);
        d.set_item("rows", r.rows)?;
        d.set_item("own_size", r.own_size)?;
        d.set_item("peer_size", r.peer_size)?;
        d.set_item("intersection", r.intersection)?;
        d.set_item("bytes", r.bytes)?;
        d.set_item("wall_s", r.wall_s)?;
        Ok(d.into_any().unbind())
    }

    /// Starts the session on the party's aligned rows (CSR as bytes);
    /// `intercept` appends the labels party's constant column. Returns
    /// (own feature count, the peer's).
    #[pyo3(signature = (rows, cols, indptr, indices, data, labels=None, intercept=true, start_epoch=0))]
    #[allow(clippy::too_many_arguments)]
    fn start(&self, py: Python<'_>, rows: u64, cols: u64, indptr: &[u8], indices: &[u8], data: &[u8], labels: Option<&[u8]>, intercept: bool, start_epoch: u32) -> PyResult<(usize, usize)> {
        let bad = |e: hush_lr::Error| PyValueError::new_err(e.to_string());
        let mut ds = hush_lr::npz::from_csr(rows, cols, &u64s(indptr, "indptr")?, &u64s(indices, "indices")?, &f64s(data, "data")?, "X").map_err(bad)?;
        match (self.role, labels) {
            (Role::Labels, Some(y)) => ds.labels = hush_lr::npz::check_labels(f64s(y, "y")?, ds.len(), "y").map_err(bad)?,
            (Role::Labels, None) => return Err(PyValueError::new_err("the labels party needs labels")),
            (Role::Features, Some(_)) => return Err(PyValueError::new_err("labels are for the labels party only")),
            (Role::Features, None) => {}
        }
        if self.role == Role::Labels && intercept {
            ds = hush_lr::party::with_intercept(&ds);
        }
        let d_own = ds.cols;
        let d_peer = run(py, || self.w.lock().unwrap().start(ds, start_epoch))?;
        Ok((d_own, d_peer))
    }

    /// Starts an epoch; returns its number of batches.
    fn begin_epoch(&self, py: Python<'_>, epoch: u32) -> PyResult<usize> {
        run(py, || self.w.lock().unwrap().begin_epoch(epoch))
    }

    /// Batch `j` on this worker's chunk: (gradient share of own features,
    /// of the peer's, rows) with the driver's current shares.
    fn step<'py>(&self, py: Python<'py>, j: usize, own: &[u8], peer: &[u8]) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, usize)> {
        let m = ModelShares { role: self.role, own: u64s(own, "own")?, peer: u64s(peer, "peer")?, intercept: false };
        let s: StepOut = run(py, || self.w.lock().unwrap().step(j, m))?;
        Ok((bytes_of(py, &s.g_own), bytes_of(py, &s.g_peer), s.rows))
    }

    /// Opens the model with the peer's worker.
    fn reveal(&self, py: Python<'_>, own: &[u8], peer: &[u8], intercept: bool) -> PyResult<PyObject> {
        let m = ModelShares { role: self.role, own: u64s(own, "own")?, peer: u64s(peer, "peer")?, intercept };
        let op = run(py, || self.w.lock().unwrap().reveal(m))?;
        opened_dict(py, &op)
    }

    /// (bytes sent + received, rounds) on this worker's link.
    fn cost(&self, py: Python<'_>) -> PyResult<(u64, u32)> {
        run(py, || self.w.lock().unwrap().cost())
    }
}

/// The driver's update: sums the workers' gradient shares (a list of
/// `step` results) and applies θ ← θ − η·(g/b + λθ) to this party's
/// shares; returns the new (own, peer) shares.
#[pyfunction]
#[pyo3(signature = (role, own, peer, steps, epoch, lr, lr_decay=0.0, l2=0.0))]
#[allow(clippy::too_many_arguments)]
pub fn lr_apply_steps<'py>(
    py: Python<'py>,
    role: &str,
    own: &[u8],
    peer: &[u8],
    steps: Vec<(Vec<u8>, Vec<u8>, usize)>,
    epoch: u32,
    lr: f64,
    lr_decay: f64,
    l2: f64,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let role = role_of(role)?;
    let cfg = TrainConfig { lr, lr_decay, l2, ..TrainConfig::default() };
    let mut m = ModelShares { role, own: u64s(own, "own")?, peer: u64s(peer, "peer")?, intercept: false };
    let steps = steps
        .into_iter()
        .map(|(a, b, rows)| Ok(StepOut { g_own: u64s(&a, "gradient")?, g_peer: u64s(&b, "gradient")?, rows }))
        .collect::<PyResult<Vec<_>>>()?;
    hush_lr::shard::apply_steps(&cfg, &mut m, &steps, epoch).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok((bytes_of(py, &m.own), bytes_of(py, &m.peer)))
}

/// Writes a model file as `hush train` does (atomically), with the opened
/// weights if given (a dict as `LrWorker.reveal` returns).
#[pyfunction]
#[pyo3(signature = (path, role, own, peer, intercept, opened=None))]
pub fn lr_save_model(path: std::path::PathBuf, role: &str, own: &[u8], peer: &[u8], intercept: bool, opened: Option<Bound<'_, PyDict>>) -> PyResult<()> {
    let m = ModelShares { role: role_of(role)?, own: u64s(own, "own")?, peer: u64s(peer, "peer")?, intercept };
    let op = match opened {
        Some(d) => Some(Opened {
            labels: d.get_item("weights_labels_party")?.ok_or_else(|| PyValueError::new_err("opened: weights_labels_party"))?.extract()?,
            features: d.get_item("weights_features_party")?.ok_or_else(|| PyValueError::new_err("opened: weights_features_party"))?.extract()?,
            intercept: d.get_item("intercept")?.map(|v| v.extract()).transpose()?.unwrap_or(false),
        }),
        None => None,
    };
    hush_lr::secure::save_model(&path, &m, op.as_ref()).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// `hush train --ray ...` (the flags after `train`): parsed and the data
/// loaded by the `hush` command's own code (`hush_cli::ray_spec`), as a
/// dict for `hush.ray` (CSR arrays as bytes, flags by their long names).
#[pyfunction]
pub fn lr_ray_spec(py: Python<'_>, argv: Vec<String>) -> PyResult<PyObject> {
    let s = py.allow_threads(|| hush_cli::ray_spec(argv)).map_err(PyValueError::new_err)?;
    let a = &s.args;
    let d = PyDict::new(py);
    let mut indptr = vec![0u64];
    let (mut indices, mut data) = (Vec::new(), Vec::new());
    for r in &s.data.rows {
        for &(c, v) in r {
            indices.push(c as u64);
            data.push(v.to_bits());
        }
        indptr.push(indices.len() as u64);
    }
    d.set_item("rows", s.data.rows.len())?;
    d.set_item("cols", s.data.cols)?;
    d.set_item("indptr", bytes_of(py, &indptr))?;
    d.set_item("indices", bytes_of(py, &indices))?;
    d.set_item("data", bytes_of(py, &data))?;
    if s.has_labels && a.role == "labels" {
        d.set_item("labels", bytes_of(py, &s.data.labels.iter().map(|v| v.to_bits()).collect::<Vec<_>>()))?;
    }
    d.set_item("ids", s.ids.clone())?;
    d.set_item("role", &a.role)?;
    d.set_item("listen", a.listen.clone())?;
    d.set_item("peer", a.peer.clone())?;
    d.set_item("out", a.out.to_string_lossy().to_string())?;
    d.set_item("epochs", a.epochs)?;
    d.set_item("batch", a.batch)?;
    d.set_item("lr", a.lr)?;
    d.set_item("lr_decay", a.lr_decay)?;
    d.set_item("l2", a.l2)?;
    d.set_item("bits", a.bits)?;
    d.set_item("sigmoid", &a.sigmoid)?;
    d.set_item("low_bandwidth", a.low_bandwidth)?;
    d.set_item("intercept", a.intercept)?;
    d.set_item("reveal", a.reveal)?;
    d.set_item("seed", a.seed)?;
    d.set_item("ray", a.ray.clone())?;
    d.set_item("workers", a.workers)?;
    d.set_item("checkpoint", a.checkpoint.as_ref().map(|p| p.to_string_lossy().to_string()))?;
    d.set_item("identity", a.link.identity.as_ref().map(|p| p.to_string_lossy().to_string()))?;
    if a.link.pins.len() > 1 {
        return Err(PyValueError::new_err("--ray: give one --pin (the peer party's identity, the same for all its workers)"));
    }
    d.set_item("pin", a.link.pins.first().cloned())?;
    d.set_item("insecure", a.link.insecure)?;
    Ok(d.into_any().unbind())
}

/// The PSI bucket of each ID among `k` (`hush_lr::shard::bucket_of`: the
/// one definition both parties' drivers use).
#[pyfunction]
pub fn lr_buckets(py: Python<'_>, ids: Vec<String>, k: usize) -> PyResult<Vec<usize>> {
    if k == 0 {
        return Err(PyValueError::new_err("k must be at least 1"));
    }
    Ok(py.allow_threads(|| ids.iter().map(|s| hush_lr::shard::bucket_of(s, k)).collect()))
}
