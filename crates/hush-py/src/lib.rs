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
    let cfg = CotBench { source: SourceConfig::named(source), n, profile, transport, seed };
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

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(bench_cot, m)?)?;
    m.add_function(wrap_pyfunction!(bench_aes, m)?)?;
    m.add_function(wrap_pyfunction!(net_profiles, m)?)?;
    m.add_function(wrap_pyfunction!(cot_sources, m)?)?;
    Ok(())
}
