//! The record contract of `hush bench`: every JSON record carries `bench`,
//! `wall_s`, `bytes`, `rounds` and `setup_s` (numbers, except `bench`).
//! Runs each benchmark small enough to be quick.

use std::path::PathBuf;
use std::process::Command;

const HUSH: &str = env!("CARGO_BIN_EXE_hush");
const KEYS: [&str; 5] = ["bench", "wall_s", "bytes", "rounds", "setup_s"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `hush bench <args> --json` and returns its records.
fn records(args: &[&str]) -> Vec<serde_json::Value> {
    let o = Command::new(HUSH).arg("bench").args(args).arg("--json").output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "hush bench {args:?} failed: {}{}", out, String::from_utf8_lossy(&o.stderr));
    let recs: Vec<serde_json::Value> = out
        .lines()
        .filter(|l| l.trim_start().starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("hush bench {args:?}: not JSON ({e}): {l}")))
        .collect();
    assert!(!recs.is_empty(), "hush bench {args:?}: no record in {out}");
    recs
}

fn check(args: &[&str]) -> Vec<serde_json::Value> {
    let recs = records(args);
    for r in &recs {
        for k in KEYS {
            let v = r.get(k).unwrap_or_else(|| panic!("hush bench {args:?}: record lacks `{k}`: {r}"));
            if k == "bench" {
                assert!(v.is_string(), "{args:?}: `bench` is not a string: {r}");
            } else {
                assert!(v.as_f64().is_some_and(|x| x >= 0.0), "{args:?}: `{k}` is not a non-negative number: {r}");
            }
        }
    }
    recs
}

#[test]
fn every_bench_record_carries_the_contract_keys() {
    check(&["cot", "--n", "20000", "--transport", "mem"]);
    check(&["cot", "--source", "silent", "--n", "20000", "--transport", "mem"]);
    check(&["nonlinear", "--op", "relu", "--proto", "fss", "--n", "2000"]);
    check(&["nonlinear", "--op", "millionaire", "--proto", "cf2", "--n", "2000"]);
    for (op, shape) in [("gelu", "4x64"), ("softmax", "2x8x16"), ("layernorm", "8x64")] {
        let r = &check(&["nonlinear", "--op", op, "--shape", shape])[0];
        assert_eq!(r["wall_s"], r["online_s"], "{op}: wall_s is the online time");
        assert!(r["cpu"].is_string() && r["offline_s"].as_f64().is_some(), "{op}: {r}");
    }
    check(&["nonlinear", "--op", "gelu", "--shape", "2x32", "--mode", "dealer", "--proto", "fss"]);
    let r = &check(&["nonlinear", "--op", "gelu", "--shape", "2x32", "--mode", "interactive"])[0];
    assert!(r["offline_bytes"].as_u64().is_some_and(|b| b > 0) && r["dealt_bytes"] == 0 && r["module_crossings"] == 0, "interactive: {r}");
    check(&["aes", "--seconds", "0.05"]);
    let r = &check(&["deal", "--kind", "fss-relu", "--n", "2000", "--repeat", "1"])[0];
    assert!(r["bound_ratio"].as_f64().is_some_and(|x| x > 0.0) && r["cpu"].is_string(), "deal: {r}");
    check(&["he-linear", "--layers", "minionn-mnist"]);
    check(&["aes3", "--n", "4096", "--verify", "8"]);
    let recs = check(&["aes3", "--n", "4096", "--verify", "8", "--tls-overhead"]);
    assert!(recs.iter().any(|r| r["bench"] == "aes3-tls-overhead"));
    let model = repo().join("models/mnist_cnn.hushm");
    for mode in ["tee", "dealer", "interactive", "silent"] {
        let recs = check(&["infer", "--model", model.to_str().unwrap(), "--mode", mode]);
        let r = &recs[0];
        assert_eq!(r["mode"], mode);
        assert_eq!(r["wall_s"], r["online_s"], "wall_s is the online time");
        assert_eq!(r["bytes"], r["online_bytes"], "bytes are the online bytes");
        for k in ["server_peak_mem_bytes", "client_peak_mem_bytes"] {
            assert!(r[k].as_i64().is_some_and(|b| b > 0), "{k}: {r}");
        }
    }
    let recs = check(&["infer", "--model", model.to_str().unwrap(), "--tls-overhead"]);
    assert!(recs.iter().any(|r| r["bench"] == "infer-tls-overhead"));
    // the table's records (one per model × mode × net)
    let recs = check(&["infer", "--table", "--models", model.to_str().unwrap(), "--modes", "tee,interactive", "--nets", "lan"]);
    assert_eq!(recs.len(), 2);
    assert!(recs.iter().all(|r| r["total_s"].as_f64().is_some() && r["cpu"].is_string()));
}
