//! The three-node service as its users run it: `hush keygen`, three
//! `hush node` processes with stored inputs, a data owner's `hush share`,
//! a submitter's `hush job --inputs … --output-to`, `hush job status` and
//! the output party's `hush fetch` — whose result equals the plaintext
//! evaluation (`hush circuit run --plain`), while a stranger's fetch, a
//! submitter the owner did not allow, and the submitter's own fetch are
//! refused.

mod common;
use common::{free_addr, listen, Proc, HUSH};
use std::process::{Command, Output};
use std::time::Duration;

fn run(args: &[String]) -> Output {
    Command::new(HUSH).args(args).output().unwrap()
}

fn ok(args: &[String]) -> String {
    let o = run(args);
    assert!(o.status.success(), "hush {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

fn keygen(dir: &std::path::Path, name: &str) -> (String, String) {
    let d = dir.join(name);
    let out = ok(&["keygen".into(), "--out".into(), d.display().to_string()]);
    let fp = out.lines().find_map(|l| l.trim().strip_prefix("fingerprint ")).unwrap_or_else(|| panic!("keygen printed {out:?}")).to_string();
    (d.display().to_string(), fp)
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[test]
fn owner_submitter_and_output_party_through_the_cli() {
    let tmp = std::env::temp_dir().join(format!("hush-3pc-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let nodes: Vec<(String, String)> = (0..3).map(|i| keygen(&tmp, &format!("node{i}"))).collect();
    let (owner_dir, _owner) = keygen(&tmp, "owner");
    let (sub_dir, sub_fp) = keygen(&tmp, "submitter");
    let (out_dir, out_fp) = keygen(&tmp, "output");
    let (stranger_dir, _) = keygen(&tmp, "stranger");
    let addrs: Vec<String> = (0..3).map(|_| free_addr()).collect();
    let peers = addrs.join(",");
    let mut procs: Vec<Proc> = Vec::new();
    for i in 0..3 {
        let mut a = s(&["node", "--party", &i.to_string(), "--peers", &peers, "--identity", &nodes[i].0]);
        a.extend(s(&["--listen", &addrs[i], "--store", &tmp.join(format!("store{i}")).display().to_string()]));
        for j in (0..3).filter(|&j| j != i) {
            a.extend(s(&["--pin", &format!("{}={}", addrs[j], nodes[j].1)]));
        }
        let args: Vec<&str> = a.iter().map(|x| x.as_str()).collect();
        let (p, fp) = listen(&args, &addrs[i], Duration::from_secs(20));
        assert_eq!(fp, nodes[i].1);
        procs.push(p);
    }
    let pins: Vec<String> = (0..3).flat_map(|i| s(&["--pin", &format!("{}={}", addrs[i], nodes[i].1)])).collect();
    let with = |base: &[&str], id: &str| -> Vec<String> {
        let mut a = s(base);
        a.extend(s(&["--nodes", &peers, "--identity", id]));
        a.extend(pins.clone());
        a
    };
    let key = "000102030405060708090a0b0c0d0e0f";
    let pt = "00112233445566778899aabbccddeeff";
    // the owner stores the key, for this submitter and this output party
    let mut a = with(&["share"], &owner_dir);
    a.extend(s(&["--name", "k1", "--input", key, "--allow-job", &sub_fp, "--allow-output", &out_fp, "--allow-circuit", "aes128@1"]));
    ok(&a);
    // a grant of every function must say `any`, and warns
    let mut a = with(&["share"], &owner_dir);
    a.extend(s(&["--name", "k2", "--input", key, "--allow-job", &sub_fp, "--allow-circuit", "any"]));
    let o = run(&a);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && err.contains("warning") && err.contains("learn the input"), "{err}");
    // a two-input built-in without the position of the input: refused up front
    let mut a = with(&["share"], &owner_dir);
    a.extend(s(&["--name", "k3", "--input", key, "--allow-job", &sub_fp, "--allow-circuit", "aes128"]));
    let o = run(&a);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("aes128@1"), "{}", String::from_utf8_lossy(&o.stderr));
    // a submitter the owner did not allow is refused
    let mut a = with(&["job"], &stranger_dir);
    a.extend(s(&["--circuit", "aes128", "--inputs", "k1,-", "--input", pt, "--output-to", &out_fp]));
    let o = run(&a);
    assert!(!o.status.success(), "an unallowed submitter's job ran");
    assert!(String::from_utf8_lossy(&o.stderr).to_lowercase().contains("k1"), "{}", String::from_utf8_lossy(&o.stderr));
    // the allowed submitter's job, for the output party
    let mut a = with(&["job"], &sub_dir);
    a.extend(s(&["--circuit", "aes128", "--inputs", "k1,-", "--input", pt, "--output-to", &out_fp]));
    let out = ok(&a);
    let id = out.lines().find_map(|l| l.trim().strip_prefix("job ")).unwrap_or_else(|| panic!("job printed {out:?}")).to_string();
    // its status, asked by the submitter
    let mut a = with(&["job", "status"], &sub_dir);
    a.extend(s(&["--id", &id]));
    let st = ok(&a);
    assert!(st.contains(&id), "status: {st}");
    // a table for a human (one row per node), the nodes' JSON with --json
    assert!(st.lines().next().is_some_and(|l| l.starts_with("job") && l.contains("state")) && !st.contains('{'), "status: {st}");
    assert_eq!(st.lines().filter(|l| l.contains(&id) && l.contains("aes128")).count(), 3, "status: {st}");
    a.push("--json".into());
    let js = ok(&a);
    assert_eq!(js.lines().filter(|l| serde_json::from_str::<serde_json::Value>(l).is_ok_and(|v| v["jobs"][0]["job"] == id.as_str())).count(), 3, "status --json: {js}");
    // only the output party can fetch; it gets the plaintext evaluation
    for who in [&sub_dir, &stranger_dir] {
        let mut a = with(&["fetch"], who);
        a.extend(s(&["--job", &id]));
        assert!(!run(&a).status.success(), "a fetch by {who} succeeded");
    }
    let mut a = with(&["fetch"], &out_dir);
    a.extend(s(&["--job", &id]));
    let got = ok(&a);
    let want = ok(&s(&["circuit", "run", "--circuit", "aes128", "--input", key, "--input", pt, "--plain"]));
    assert_eq!(got.trim(), want.trim());
    assert_eq!(want.trim(), "69c4e0d86a7b0430d8cdb78070b4c55a", "FIPS-197 C.1");
    drop(procs);
    let _ = std::fs::remove_dir_all(&tmp);
}
