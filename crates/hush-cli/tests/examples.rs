//! The deployment configs in `examples/` run over loopback: the two-host
//! inference pair, the three-host dealer deployment and the three-node 3PC
//! service, each started with `--config` only (plus the per-run input
//! flags). As a user would: copy the folder, make identities with `hush
//! keygen`, fill the fingerprint placeholders (and here: free ports, the
//! models folder's absolute path), `hush config check`, start. A set that
//! disagrees is rejected by `hush config check`, naming the setting.

mod common;
use common::{free_addr, repo, Proc, HUSH};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LIVENESS: Duration = Duration::from_secs(30);

/// A copy of `examples/NAME` with identities made and placeholders filled.
struct Deployment {
    dir: PathBuf,
}

impl Deployment {
    fn new(name: &str, parties: &[&str], ports: &[&str]) -> Deployment {
        let dir = std::env::temp_dir().join(format!("hush-examples-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut subst: Vec<(String, String)> = vec![("../../models/".into(), format!("{}/", repo().join("models").display()))];
        for p in ports {
            let addr = free_addr();
            subst.push((format!("127.0.0.1:{p}"), addr));
        }
        for p in parties {
            let o = Command::new(HUSH).current_dir(&dir).args(["keygen", "--out", &format!("ids/{p}")]).output().unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let out = String::from_utf8_lossy(&o.stdout);
            let fp = out.split_whitespace().find(|w| w.starts_with("sha256:")).unwrap_or_else(|| panic!("keygen printed {out}")).to_string();
            subst.push((format!("sha256:<{p}>"), fp));
        }
        for e in std::fs::read_dir(repo().join("examples").join(name)).unwrap() {
            let e = e.unwrap();
            let mut text = std::fs::read_to_string(e.path()).unwrap();
            for (a, b) in &subst {
                text = text.replace(a, b);
            }
            assert!(!text.contains("sha256:<"), "{}: a placeholder is left", e.path().display());
            std::fs::write(dir.join(e.file_name()), text).unwrap();
        }
        Deployment { dir }
    }
    fn hush(&self, args: &[&str]) -> (bool, String) {
        let o = Command::new(HUSH).current_dir(&self.dir).args(args).output().unwrap();
        (o.status.success(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
    }
    /// Starts a listening party from its config; waits for its fingerprint line and its port.
    fn start(&self, command: &str, file: &str) -> Proc {
        let text = std::fs::read_to_string(self.dir.join(file)).unwrap();
        let addr = listen_addr(&text, command);
        let mut child = Command::new(HUSH).current_dir(&self.dir).args([command, "--config", file]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert!(line.starts_with("fingerprint sha256:"), "{command} {file}: {line:?}");
        let t = Instant::now();
        while std::net::TcpStream::connect(&addr).is_err() {
            assert!(t.elapsed() < LIVENESS, "{file} did not listen on {addr}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Proc(child)
    }
    fn edit(&self, file: &str, from: &str, to: &str) {
        let p = self.dir.join(file);
        let t = std::fs::read_to_string(&p).unwrap();
        assert!(t.contains(from), "{file} has no {from:?}");
        std::fs::write(p, t.replacen(from, to, 1)).unwrap();
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The address a config's party listens on (`listen`, or its `peers` entry for a node).
fn listen_addr(text: &str, command: &str) -> String {
    let t: toml::Table = text.parse().unwrap();
    if command == "node" {
        let i = t["party"].as_integer().unwrap() as usize;
        return t["peers"].as_array().unwrap()[i].as_str().unwrap().to_string();
    }
    t["listen"].as_str().unwrap().to_string()
}

fn sample() -> String {
    repo().join("models/samples/mnist_8000_label4.npy").display().to_string()
}

fn infer(d: &Deployment, extra: &[&str]) -> (bool, String) {
    let out = d.dir.join("y.npy");
    let mut args = vec!["infer", "--config", "client.toml", "--input"];
    let s = sample();
    args.push(&s);
    let o = out.display().to_string();
    args.extend(["--out", &o]);
    args.extend(extra);
    d.hush(&args)
}

fn check(d: &Deployment, files: &[&str]) -> (bool, String) {
    let mut a = vec!["config", "check"];
    a.extend(files);
    d.hush(&a)
}

#[test]
fn two_host_inference_from_configs() {
    let d = Deployment::new("two-host", &["server", "client"], &["7000"]);
    let (ok, out) = check(&d, &["server.toml", "client.toml"]);
    assert!(ok && out.contains("2 configs agree") && out.contains("left to the command line: --input, --out"), "{out}");
    let _srv = d.start("serve", "server.toml");
    let (ok, out) = infer(&d, &[]);
    assert!(ok && out.contains("class 4"), "{out}");
    // a flag overrides the file: a client asking for the other family is refused, both named
    let (ok, out) = infer(&d, &["--proto", "tami"]);
    assert!(!ok && out.contains("tami") && out.contains("fss"), "{out}");

    // config check names each disagreeing setting
    d.edit("client.toml", "mode = \"tee\"", "mode = \"dealer\"");
    let (ok, out) = check(&d, &["server.toml", "client.toml"]);
    assert!(!ok && out.contains("setting `mode` disagrees") && out.contains("server.toml has tee") && out.contains("client.toml has dealer"), "{out}");
    d.edit("client.toml", "mode = \"dealer\"", "mode = \"tee\"\nbits = 40");
    let (ok, out) = check(&d, &["server.toml", "client.toml"]);
    assert!(!ok && out.contains("setting `bits` disagrees"), "{out}");
    d.edit("client.toml", "bits = 40", "");
    d.edit("server.toml", "bits = 37", "bits = 40");
    d.edit("client.toml", "proto = \"fss\"", "proto = \"tami\"");
    let (ok, out) = check(&d, &["server.toml", "client.toml"]);
    assert!(!ok && out.contains("setting `proto` disagrees"), "{out}");
    // a pin that is not the server's identity
    d.edit("client.toml", "proto = \"tami\"", "proto = \"fss\"");
    let other = format!("sha256:{}", "ab".repeat(32));
    let t = std::fs::read_to_string(d.dir.join("client.toml")).unwrap();
    let start = t.find("pin = [\"").unwrap() + 8;
    let fp = t[start..start + 71].to_string();
    d.edit("client.toml", &fp, &other);
    let (ok, out) = check(&d, &["server.toml", "client.toml"]);
    assert!(!ok && out.contains("identity ids/server is sha256:"), "{out}");
}

#[test]
fn dealer_deployment_from_configs() {
    let d = Deployment::new("dealer", &["dealer", "server", "client"], &["7000", "7100"]);
    let (ok, out) = check(&d, &["dealer.toml", "server.toml", "client.toml"]);
    assert!(ok && out.contains("3 configs agree"), "{out}");
    let _dealer = d.start("dealer", "dealer.toml");
    let _srv = d.start("serve", "server.toml");
    let (ok, out) = infer(&d, &[]);
    assert!(ok && out.contains("class 4"), "{out}");
    let t = std::fs::read_to_string(d.dir.join("client.toml")).unwrap();
    let start = t.find("dealer_pin = \"").unwrap() + 14;
    let fp = t[start..start + 71].to_string();
    d.edit("client.toml", &fp, &format!("sha256:{}", "ab".repeat(32)));
    let (ok, out) = check(&d, &["dealer.toml", "server.toml", "client.toml"]);
    assert!(!ok && out.contains("setting `dealer-pin` disagrees"), "{out}");
}

#[test]
fn malicious_client_deployment_from_configs() {
    let d = Deployment::new("malicious-client", &["dealer", "server", "client"], &["7000", "7100"]);
    let (ok, out) = check(&d, &["dealer.toml", "server.toml", "client.toml"]);
    assert!(ok && out.contains("3 configs agree"), "{out}");
    let _dealer = d.start("dealer", "dealer.toml");
    let _srv = d.start("serve", "server.toml");
    let (ok, out) = infer(&d, &[]);
    assert!(ok && out.contains("class 4"), "{out}");
    d.edit("client.toml", "mac_s = 40", "mac_s = 44");
    let (ok, out) = check(&d, &["dealer.toml", "server.toml", "client.toml"]);
    assert!(!ok && out.contains("setting `mac-s` disagrees"), "{out}");
    let (ok, out) = infer(&d, &[]);
    assert!(!ok && out.contains("MAC parameter mismatch") && out.contains("--mac-s 44"), "{out}");
}

#[test]
fn three_node_service_from_configs() {
    let d = Deployment::new("3pc", &["node0", "node1", "node2", "job"], &["7200", "7201", "7202"]);
    let files = ["node0.toml", "node1.toml", "node2.toml", "job.toml"];
    let (ok, out) = check(&d, &files);
    assert!(ok && out.contains("4 configs agree") && out.contains("left to the command line: --circuit"), "{out}");
    let _nodes: Vec<Proc> = (0..3).map(|i| d.start("node", &format!("node{i}.toml"))).collect();
    let (ok, out) = d.hush(&[
        "job",
        "--config",
        "job.toml",
        "--circuit",
        "aes128",
        "--input",
        "000102030405060708090a0b0c0d0e0f",
        "--input",
        "00112233445566778899aabbccddeeff",
    ]);
    assert!(ok && out.contains("69c4e0d86a7b0430d8cdb78070b4c55a"), "{out}");
    d.edit("node2.toml", "party = 2", "party = 1");
    let (ok, out) = check(&d, &files);
    assert!(!ok && out.contains("are both --party 1"), "{out}");
}

