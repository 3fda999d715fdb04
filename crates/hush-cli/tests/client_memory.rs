//! The client's memory bound and weak-client profiles through the `hush`
//! binary (whose counting allocator measures each party's heap):
//! `--max-mem` holds as *measured* client peak, a budget below the model's
//! floor is refused before anything is sent, and `--client-profile` says
//! which profile ran and how it was enforced.

use std::process::Command;

const HUSH: &str = env!("CARGO_BIN_EXE_hush");

fn run(args: &[&str]) -> (bool, Vec<serde_json::Value>, String) {
    let o = Command::new(HUSH).args(args).arg("--json").output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let recs = out.lines().filter(|l| l.trim_start().starts_with('{')).map(|l| serde_json::from_str(l).unwrap()).collect();
    (o.status.success(), recs, String::from_utf8_lossy(&o.stderr).to_string())
}

#[test]
fn measured_client_peak_stays_within_max_mem() {
    for (model, proto, budget, bytes) in [("minionn-cifar", "tami", "40MiB", 40u64 << 20), ("minionn-mnist", "fss", "24MiB", 24 << 20)] {
        let (ok, recs, err) = run(&["bench", "infer", "--model", model, "--proto", proto, "--insecure", "--max-mem", budget]);
        assert!(ok, "{model}: {err}");
        let r = &recs[0];
        let peak = r["client_peak_mem_bytes"].as_i64().unwrap();
        assert!(peak > 0 && (peak as u64) <= bytes, "{model}: measured client peak {peak} above {budget}: {r}");
        assert_eq!(r["within_max_mem"], true);
        assert_eq!(r["max_mem_bytes"].as_u64(), Some(bytes));
        assert!(r["max_mem_floor_bytes"].as_u64().unwrap() <= bytes);
        assert!(r["max_mem_enforced"].as_str().unwrap().starts_with("measured peak"));
        assert!(r["client_peak_mem_counts"].as_str().unwrap().contains("in-process module"));
    }
}

#[test]
fn budget_below_the_floor_is_refused_naming_it() {
    let (ok, recs, err) = run(&["bench", "infer", "--model", "minionn-cifar", "--insecure", "--max-mem", "3MiB"]);
    assert!(!ok && recs.is_empty(), "a 3 MiB budget ran: {recs:?}");
    assert!(err.contains("below the floor") && err.contains("minionn-cifar") && err.contains("nothing was sent"), "{err}");
}

#[test]
fn client_profiles_are_recorded_with_their_method() {
    let (ok, recs, err) = run(&["bench", "infer", "--model", "minionn-mnist", "--proto", "tami", "--insecure", "--client-profile", "tiny"]);
    assert!(ok, "{err}");
    let r = &recs[0];
    assert_eq!(r["client_profile"], "tiny");
    let m = r["client_profile_method"].as_str().unwrap();
    assert!(m.contains("cgroup") || m.contains("duty-cycle"), "{m}");
    assert_eq!(r["max_mem_bytes"].as_u64(), Some(256 << 20));
    assert_eq!(r["within_max_mem"], true);
    let (ok, recs, err) = run(&["bench", "cot", "--source", "silent", "--n", "200000", "--client-profile", "weak"]);
    assert!(ok, "{err}");
    assert_eq!(recs[0]["client_profile"], "weak");
    assert!(recs[0]["client_profile_method"].as_str().unwrap() != "none");
    assert_eq!(recs[0]["max_mem_bytes"].as_u64(), Some(512 << 20));
    let (ok, _, err) = run(&["bench", "infer", "--model", "minionn-mnist", "--insecure", "--client-profile", "fast"]);
    assert!(!ok && err.contains("--client-profile fast"), "{err}");
}
