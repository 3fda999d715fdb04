//! Deployment configs: `hush serve|infer|node|job|dealer|train --config
//! FILE.toml`, and `hush config check FILE [FILE...]`.
//!
//! A config file is a TOML table whose keys are the long flag names of the
//! command it configures (`mode = "dealer"` is `--mode dealer`; `_` and `-`
//! are the same), plus `command = "serve"` naming that command. Arrays give
//! repeatable flags (`pin = ["A=sha256:…", "B=sha256:…"]`), `true` gives a
//! switch (`insecure = true`). The keys a command accepts are read from its
//! own flag definitions, so a config can say exactly what the flags can,
//! and an unknown key is refused by name.
//!
//! **Flags override the file**: the file's values are placed before the
//! command line's, and a key given on the command line (single value or
//! list) is dropped from the file's.
//!
//! The file is untrusted input: at most [`MAX_CONFIG_BYTES`], parsed by
//! `toml` (errors carry the line), every key checked against the command's
//! flags, every value's type against the flag's (one value, a list, a
//! switch), and the values by the command's own parser.
//!
//! `hush config check` validates each file, then checks that the parties'
//! files of one deployment agree: the settings both sides of a session
//! must share (see [`AGREE`]), listening and connecting ports, and — where
//! the identity folders exist — that each pin is its peer's fingerprint.

use clap::{ArgAction, CommandFactory};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The commands that take `--config`.
pub const COMMANDS: &[&str] = &["serve", "infer", "node", "job", "dealer", "train"];
/// Largest config file read.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Settings the parties of one deployment must agree on, per kind of
/// deployment (compared on their effective values, defaults included).
pub const AGREE: &[(&str, &[&str])] = &[
    ("inference", &["mode", "proto", "bits", "frac", "chunk", "insecure", "dealer-pin", "mac-s", "crisp-linear"]),
    ("3pc", &["peers", "insecure"]),
    ("train", &["bits", "epochs", "batch", "lr", "lr-decay", "l2", "sigmoid", "seed", "reveal", "insecure"]),
];

fn kind(command: &str) -> &'static str {
    match command {
        "serve" | "infer" | "dealer" => "inference",
        "node" | "job" => "3pc",
        _ => "train",
    }
}

/// One loaded config file: the command it configures and its settings as flags.
#[derive(Debug, Clone)]
pub struct Config {
    pub path: PathBuf,
    pub command: String,
    /// (long flag name, values) in file order; a switch has no value.
    pub settings: Vec<(String, Vec<String>)>,
}

fn sub_command(name: &str) -> Option<clap::Command> {
    super::Cli::command().find_subcommand(name).cloned()
}

/// Reads and checks a config file for `command` (or for the command it names).
pub fn load(path: &Path, command: Option<&str>) -> Result<Config, String> {
    let show = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("config {show}: {e}"))?;
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(format!("config {show}: {} bytes is larger than the {MAX_CONFIG_BYTES}-byte limit", meta.len()));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("config {show}: {e}"))?;
    parse(&text, path, command)
}

/// Parses a config file's text (see [`load`]).
pub fn parse(text: &str, path: &Path, command: Option<&str>) -> Result<Config, String> {
    let show = path.display();
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| format!("config {show}: {}", e.to_string().trim_end()))?;
    let named = match table.get("command") {
        None => None,
        Some(toml::Value::String(s)) => Some(s.as_str()),
        Some(_) => return Err(format!("config {show}: `command` must be a string (one of {})", COMMANDS.join(", "))),
    };
    let cmd_name = match (named, command) {
        (Some(n), Some(c)) if n != c => return Err(format!("config {show} is for `hush {n}`, not `hush {c}`")),
        (Some(n), _) => n,
        (None, Some(c)) => c,
        (None, None) => return Err(format!("config {show}: no `command = \"...\"` line (one of {})", COMMANDS.join(", "))),
    };
    if !COMMANDS.contains(&cmd_name) {
        return Err(format!("config {show}: command {cmd_name:?} does not take a config (one of {})", COMMANDS.join(", ")));
    }
    let sub = sub_command(cmd_name).ok_or_else(|| format!("config {show}: no command {cmd_name}"))?;
    let args: Vec<&clap::Arg> = sub.get_arguments().filter(|a| a.get_long().is_some() && a.get_id() != "help").collect();
    let mut settings = Vec::new();
    for (key, value) in &table {
        if key == "command" {
            continue;
        }
        let norm = key.replace('_', "-");
        let arg = args
            .iter()
            .find(|a| a.get_long() == Some(norm.as_str()))
            .or_else(|| norm.strip_suffix('s').and_then(|k| args.iter().find(|a| a.get_long() == Some(k))));
        let arg = match arg {
            Some(a) => *a,
            None => {
                let mut names: Vec<&str> = args.iter().filter_map(|a| a.get_long()).collect();
                names.sort();
                return Err(format!("config {show}: unknown setting `{key}` for `hush {cmd_name}` (settings: {})", names.join(", ")));
            }
        };
        let long = arg.get_long().unwrap_or_default().to_string();
        let switch = matches!(arg.get_action(), ArgAction::SetTrue);
        let many = matches!(arg.get_action(), ArgAction::Append);
        let scalar = |v: &toml::Value| -> Result<String, String> {
            match v {
                toml::Value::String(s) => Ok(s.clone()),
                toml::Value::Integer(i) => Ok(i.to_string()),
                toml::Value::Float(f) => Ok(f.to_string()),
                toml::Value::Boolean(b) => Ok(b.to_string()),
                _ => Err(format!("config {show}: `{key}` must be a string, number or boolean")),
            }
        };
        let values = match value {
            toml::Value::Boolean(b) if switch => {
                if *b {
                    settings.push((long, vec![]));
                }
                continue;
            }
            _ if switch => return Err(format!("config {show}: `{key}` is a switch: give true or false")),
            toml::Value::Array(items) if many => items.iter().map(scalar).collect::<Result<Vec<_>, _>>()?,
            toml::Value::Array(_) => return Err(format!("config {show}: `{key}` takes one value, not a list")),
            v => vec![scalar(v)?],
        };
        if values.is_empty() {
            continue;
        }
        settings.push((long, values));
    }
    Ok(Config { path: path.to_path_buf(), command: cmd_name.to_string(), settings })
}

impl Config {
    /// The file's settings as command-line arguments, leaving out every
    /// flag in `given` (the command line's own, which override the file).
    pub fn args(&self, given: &[String]) -> Vec<String> {
        let mut out = Vec::new();
        for (long, values) in &self.settings {
            if given.iter().any(|g| g == long) {
                continue;
            }
            if values.is_empty() {
                out.push(format!("--{long}"));
            }
            for v in values {
                // one argument, so that a value starting with '-' is not read as a flag
                out.push(format!("--{long}={v}"));
            }
        }
        out
    }
}

/// Expands `--config FILE` on the command line of a command in
/// [`COMMANDS`]: the file's settings go first, the command line's flags
/// after (and replace the file's for the same flag). Other command lines
/// are returned unchanged.
pub fn expand_args(args: Vec<OsString>) -> Result<Vec<OsString>, String> {
    let strs: Vec<Option<&str>> = args.iter().map(|a| a.to_str()).collect();
    let Some(Some(cmd)) = strs.get(1).copied() else { return Ok(args) };
    if !COMMANDS.contains(&cmd) {
        return Ok(args);
    }
    let mut config: Option<PathBuf> = None;
    let mut rest: Vec<OsString> = Vec::new();
    let mut i = 2;
    while i < args.len() {
        match strs[i] {
            Some("--config") => {
                let p = args.get(i + 1).ok_or("--config needs a file")?;
                if config.replace(PathBuf::from(p)).is_some() {
                    return Err("--config given twice".into());
                }
                i += 2;
                continue;
            }
            Some(s) if s.starts_with("--config=") => {
                if config.replace(PathBuf::from(&s["--config=".len()..])).is_some() {
                    return Err("--config given twice".into());
                }
            }
            _ => rest.push(args[i].clone()),
        }
        i += 1;
    }
    let Some(path) = config else { return Ok(args) };
    let cfg = load(&path, Some(cmd))?;
    let given: Vec<String> = rest
        .iter()
        .filter_map(|a| a.to_str())
        .filter_map(|a| a.strip_prefix("--"))
        .map(|a| a.split('=').next().unwrap_or(a).to_string())
        .collect();
    let mut out = vec![args[0].clone(), args[1].clone()];
    out.extend(cfg.args(&given).into_iter().map(OsString::from));
    out.extend(rest);
    Ok(out)
}

/// A checked config: its effective values (defaults included) and the
/// required flags it leaves to the command line.
struct Checked {
    cfg: Config,
    values: BTreeMap<String, Vec<String>>,
    left: Vec<String>,
}

fn effective(cfg: &Config) -> Result<Checked, String> {
    let show = cfg.path.display();
    let sub = sub_command(&cfg.command).ok_or("no such command")?;
    let mut extra: Vec<String> = Vec::new();
    let mut left = Vec::new();
    for _ in 0..16 {
        let mut argv = vec!["hush".to_string(), cfg.command.clone()];
        argv.extend(cfg.args(&[]));
        argv.extend(extra.iter().cloned());
        match super::Cli::command().try_get_matches_from(&argv) {
            Ok(m) => {
                let Some((_, sm)) = m.subcommand() else { return Err(format!("config {show}: no command")) };
                let mut values = BTreeMap::new();
                for a in sub.get_arguments() {
                    let (Some(long), id) = (a.get_long(), a.get_id().as_str()) else { continue };
                    if left.iter().any(|l| l == long) {
                        continue;
                    }
                    if let Ok(Some(raw)) = sm.try_get_raw(id) {
                        values.insert(long.to_string(), raw.map(|v| v.to_string_lossy().into_owned()).collect());
                    } else if matches!(a.get_action(), ArgAction::SetTrue) {
                        values.insert(long.to_string(), vec![sm.get_flag(id).to_string()]);
                    }
                }
                // fingerprints are checked when a command starts; check them here too
                if let Some(p) = values.get("pin") {
                    hush_transport::peering::Pins::parse(p).map_err(|e| format!("config {show}: {e}"))?;
                }
                if let Some(fp) = values.get("dealer-pin").and_then(|v| v.first()) {
                    fp.trim().parse::<hush_transport::Fingerprint>().map_err(|e| format!("config {show}: dealer_pin {fp:?}: {e}"))?;
                }
                return Ok(Checked { cfg: cfg.clone(), values, left });
            }
            Err(e) if e.kind() == clap::error::ErrorKind::MissingRequiredArgument => {
                // A required flag left to the command line: note it, fill a placeholder, parse again.
                let missing: Vec<String> = match e.get(clap::error::ContextKind::InvalidArg) {
                    Some(clap::error::ContextValue::Strings(v)) => v.clone(),
                    _ => vec![],
                };
                let mut progressed = false;
                for m in missing {
                    let long = m.trim_start_matches('-').split([' ', '=']).next().unwrap_or("").to_string();
                    if long.is_empty() || left.contains(&long) {
                        continue;
                    }
                    extra.push(format!("--{long}"));
                    extra.push("0".into());
                    left.push(long);
                    progressed = true;
                }
                if !progressed {
                    return Err(format!("config {show}: {}", e.to_string().lines().next().unwrap_or("").trim_start_matches("error: ")));
                }
            }
            Err(e) => {
                let first = e.to_string().lines().next().unwrap_or("").trim_start_matches("error: ").to_string();
                return Err(format!("config {show}: {first}"));
            }
        }
    }
    Err(format!("config {show}: too many required flags missing"))
}

fn port(addr: &str) -> Option<&str> {
    addr.rsplit_once(':').map(|(_, p)| p)
}

/// The fingerprint of an identity folder, if it exists and loads.
fn identity_fp(dir: &str) -> Option<String> {
    let flags = hush_transport::LinkFlags { identity: Some(PathBuf::from(dir)), ..Default::default() };
    if !Path::new(dir).join("identity.crt").is_file() {
        return None;
    }
    hush_transport::LinkConfig::from_flags(&flags).ok()?.fingerprint().map(|f| f.to_string())
}

fn one<'a>(c: &'a Checked, key: &str) -> Option<&'a str> {
    c.values.get(key).and_then(|v| v.first()).map(|s| s.as_str())
}

fn pins(c: &Checked) -> Vec<String> {
    c.values.get("pin").cloned().unwrap_or_default()
}

/// Checks the pins `who` holds for `peer` against the peer's identity.
fn check_pin(problems: &mut Vec<String>, who: &Checked, addr: Option<&str>, peer: &Checked, flag: &str) {
    let (Some(dir), true) = (one(peer, "identity"), one(who, "insecure") != Some("true")) else { return };
    let Some(fp) = identity_fp(dir) else { return };
    let given: Vec<String> = if flag == "pin" {
        pins(who)
            .into_iter()
            .filter_map(|p| match p.rsplit_once('=') {
                Some((a, f)) if Some(a) == addr || addr.is_none() => Some(f.to_string()),
                None => Some(p),
                _ => None,
            })
            .collect()
    } else {
        who.values.get(flag).cloned().unwrap_or_default()
    };
    if !given.iter().any(|g| g == &fp) {
        problems.push(format!(
            "{} pins {} with --{flag} {}, but {}'s identity {dir} is {fp}",
            who.cfg.path.display(),
            addr.unwrap_or("its peer"),
            if given.is_empty() { "nothing".to_string() } else { given.join(",") },
            peer.cfg.path.display()
        ));
    }
}

/// `hush config check FILE [FILE...]`: validates each file, then the agreement of the set.
pub fn check_main(files: &[PathBuf]) -> Result<(), String> {
    let mut checked = Vec::new();
    for f in files {
        let c = effective(&load(f, None)?)?;
        let note = if c.left.is_empty() { String::new() } else { format!(" (left to the command line: --{})", c.left.join(", --")) };
        println!("{}: ok, hush {}{note}", f.display(), c.cfg.command);
        checked.push(c);
    }
    let mut problems = Vec::new();
    for (kind_name, keys) in AGREE {
        let group: Vec<&Checked> = checked.iter().filter(|c| kind(&c.cfg.command) == *kind_name).collect();
        for key in keys.iter() {
            // 3PC: the job's --nodes are the nodes' --peers.
            let get = |c: &Checked| {
                if *key == "peers" && c.cfg.command == "job" {
                    c.values.get("nodes").cloned()
                } else {
                    c.values.get(*key).cloned()
                }
            };
            let have: Vec<(&Checked, Vec<String>)> = group.iter().filter_map(|c| get(c).map(|v| (*c, v))).collect();
            if let Some((first, v0)) = have.first() {
                for (c, v) in &have[1..] {
                    if v != v0 {
                        problems.push(format!(
                            "setting `{key}` disagrees: {} has {}, {} has {}",
                            first.cfg.path.display(),
                            v0.join(","),
                            c.cfg.path.display(),
                            v.join(",")
                        ));
                    }
                }
            }
        }
    }
    let by = |cmd: &str| checked.iter().filter(|c| c.cfg.command == cmd).collect::<Vec<_>>();
    // inference: client -> server, parties -> dealer
    for s in by("serve") {
        for c in by("infer") {
            if let (Some(l), Some(k)) = (one(s, "listen"), one(c, "connect")) {
                if port(l) != port(k) {
                    problems.push(format!("{} connects to {k}, but {} listens on {l}", c.cfg.path.display(), s.cfg.path.display()));
                }
            }
            check_pin(&mut problems, c, None, s, "pin");
        }
    }
    for d in by("dealer") {
        for p in by("serve").into_iter().chain(by("infer")) {
            if !matches!(one(p, "mode"), Some("dealer" | "malicious-client")) {
                problems.push(format!("{} has a dealer, but {} runs --mode {}", d.cfg.path.display(), p.cfg.path.display(), one(p, "mode").unwrap_or("tee")));
                continue;
            }
            match (one(d, "listen"), one(p, "dealer")) {
                (Some(l), Some(k)) if port(l) != port(k) => {
                    problems.push(format!("{} reaches the dealer at {k}, but {} listens on {l}", p.cfg.path.display(), d.cfg.path.display()))
                }
                (_, None) => problems.push(format!("{} runs dealer mode without --dealer ADDR", p.cfg.path.display())),
                _ => {}
            }
            check_pin(&mut problems, p, None, d, "dealer-pin");
        }
    }
    // 3PC: distinct parties, each pinning the others by address
    let nodes = by("node");
    for (i, a) in nodes.iter().enumerate() {
        for b in &nodes[i + 1..] {
            if one(a, "party") == one(b, "party") {
                problems.push(format!("{} and {} are both --party {}", a.cfg.path.display(), b.cfg.path.display(), one(a, "party").unwrap_or("?")));
            }
        }
    }
    for a in &nodes {
        for b in &nodes {
            if std::ptr::eq(*a, *b) {
                continue;
            }
            let peers = a.values.get("peers").cloned().unwrap_or_default();
            let addr = one(b, "party").and_then(|p| p.parse::<usize>().ok()).and_then(|p| peers.get(p).cloned());
            check_pin(&mut problems, a, addr.as_deref(), b, "pin");
        }
    }
    for j in by("job") {
        for b in &nodes {
            let peers = j.values.get("nodes").cloned().unwrap_or_default();
            let addr = one(b, "party").and_then(|p| p.parse::<usize>().ok()).and_then(|p| peers.get(p).cloned());
            check_pin(&mut problems, j, addr.as_deref(), b, "pin");
        }
    }
    // training: one party of each role, listen/peer ports agree
    let train = by("train");
    for (i, a) in train.iter().enumerate() {
        for b in &train[i + 1..] {
            if one(a, "role") == one(b, "role") {
                problems.push(format!("{} and {} are both --role {}", a.cfg.path.display(), b.cfg.path.display(), one(a, "role").unwrap_or("?")));
            }
            let (l, p) = if one(a, "listen").is_some() { (*a, *b) } else { (*b, *a) };
            if let (Some(la), Some(pa)) = (one(l, "listen"), one(p, "peer")) {
                if port(la) != port(pa) {
                    problems.push(format!("{} connects to {pa}, but {} listens on {la}", p.cfg.path.display(), l.cfg.path.display()));
                }
            }
            check_pin(&mut problems, p, None, l, "pin");
        }
    }
    if problems.is_empty() {
        if checked.len() > 1 {
            println!("{} configs agree", checked.len());
        }
        Ok(())
    } else {
        Err(format!("the configs disagree:\n  {}", problems.join("\n  ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str, cmd: Option<&str>) -> Result<Config, String> {
        parse(text, Path::new("t.toml"), cmd)
    }

    #[test]
    fn keys_map_to_flags_and_flags_override() {
        let c = cfg("command = \"serve\"\nmodel = \"m.onnx\"\nmode = \"dealer\"\nbits = 40\npins = [\"sha256:aa\", \"sha256:bb\"]\ninsecure = true\nmax_sessions = 3\n", None).unwrap();
        assert_eq!(c.args(&[]), ["--model=m.onnx", "--mode=dealer", "--bits=40", "--pin=sha256:aa", "--pin=sha256:bb", "--insecure", "--max-sessions=3"]);
        assert_eq!(c.args(&["mode".into(), "pin".into()]), ["--model=m.onnx", "--bits=40", "--insecure", "--max-sessions=3"]);
    }

    #[test]
    fn bad_configs_are_refused_by_name() {
        let e = cfg("command = \"serve\"\nmodle = \"m\"\n", None).unwrap_err();
        assert!(e.contains("unknown setting `modle`") && e.contains("model"), "{e}");
        let e = cfg("command = \"serve\"\nmode = [\"a\", \"b\"]\n", None).unwrap_err();
        assert!(e.contains("`mode` takes one value"), "{e}");
        let e = cfg("command = \"serve\"\ninsecure = \"yes\"\n", None).unwrap_err();
        assert!(e.contains("switch"), "{e}");
        let e = cfg("command = \"infer\"\n", Some("serve")).unwrap_err();
        assert!(e.contains("for `hush infer`, not `hush serve`"), "{e}");
        let e = cfg("command = \"serve\"\nmode = \n", None).unwrap_err();
        assert!(e.contains("t.toml") && e.contains("line 2"), "{e}");
        let e = cfg("model = \"m\"\n", None).unwrap_err();
        assert!(e.contains("no `command"), "{e}");
        let e = cfg("command = \"serve\"\n[link]\nx = 1\n", None).unwrap_err();
        assert!(e.contains("unknown setting `link`"), "{e}");
    }

    fn check_files(files: &[(&str, &str)]) -> Result<(), String> {
        let dir = std::env::temp_dir().join(format!("hush-config-check-{}-{}", std::process::id(), files[0].0));
        std::fs::create_dir_all(&dir).unwrap();
        let paths: Vec<PathBuf> = files
            .iter()
            .map(|(name, text)| {
                let p = dir.join(name);
                std::fs::write(&p, text).unwrap();
                p
            })
            .collect();
        let r = check_main(&paths);
        let _ = std::fs::remove_dir_all(&dir);
        r
    }

    #[test]
    fn training_pair_agreement() {
        let labels = "command = \"train\"\nrole = \"labels\"\ndata = \"a.svm\"\nout = \"a.json\"\nlisten = \"127.0.0.1:7300\"\nepochs = 5\ninsecure = true\n";
        let features = "command = \"train\"\nrole = \"features\"\ndata = \"b.svm\"\nout = \"b.json\"\npeer = \"127.0.0.1:7300\"\nepochs = 5\ninsecure = true\n";
        check_files(&[("tl.toml", labels), ("tf.toml", features)]).unwrap();
        let e = check_files(&[("tl2.toml", labels), ("tf2.toml", &features.replace("epochs = 5", "epochs = 6"))]).unwrap_err();
        assert!(e.contains("setting `epochs` disagrees") && e.contains("has 5") && e.contains("has 6"), "{e}");
        let e = check_files(&[("tl3.toml", labels), ("tf3.toml", &features.replace("features", "labels"))]).unwrap_err();
        assert!(e.contains("both --role labels"), "{e}");
        let e = check_files(&[("tl4.toml", labels), ("tf4.toml", &features.replace("7300", "7301"))]).unwrap_err();
        assert!(e.contains("connects to 127.0.0.1:7301") && e.contains("listens on 127.0.0.1:7300"), "{e}");
        let e = check_files(&[("tl5.toml", labels), ("tf5.toml", &features.replace("insecure = true", "insecure = false"))]).unwrap_err();
        assert!(e.contains("setting `insecure` disagrees"), "{e}");
        // a fingerprint that is not one (an unfilled placeholder)
        let e = check_files(&[("tl7.toml", &labels.replace("insecure = true", "pin = [\"sha256:<peer>\"]"))]).unwrap_err();
        assert!(e.contains("tl7.toml") && e.contains("sha256:<peer>"), "{e}");
        // a value the command's parser refuses, named with the file
        let e = check_files(&[("tl6.toml", &labels.replace("epochs = 5", "epochs = -1"))]).unwrap_err();
        assert!(e.contains("tl6.toml") && e.contains("epochs"), "{e}");
    }

    /// A malicious-client deployment: dealer, server and client agree; a
    /// client with another MAC parameter s, or of the semi-honest dealer
    /// mode, is named.
    #[test]
    fn malicious_client_deployment_agreement() {
        let dealer = "command = \"dealer\"\nlisten = \"127.0.0.1:7100\"\ninsecure = true\n";
        let serve = "command = \"serve\"\nmodel = \"m.hushm\"\nlisten = \"127.0.0.1:7000\"\nmode = \"malicious-client\"\ndealer = \"127.0.0.1:7100\"\ninsecure = true\n";
        let infer = "command = \"infer\"\nconnect = \"127.0.0.1:7000\"\nmode = \"malicious-client\"\ndealer = \"127.0.0.1:7100\"\ninsecure = true\n";
        check_files(&[("md.toml", dealer), ("ms.toml", serve), ("mi.toml", infer)]).unwrap();
        let e = check_files(&[("md2.toml", dealer), ("ms2.toml", serve), ("mi2.toml", &format!("{infer}mac_s = 48\n"))]).unwrap_err();
        assert!(e.contains("setting `mac-s` disagrees") && e.contains("has 40") && e.contains("has 48"), "{e}");
        let e = check_files(&[("md3.toml", dealer), ("ms3.toml", serve), ("mi3.toml", &infer.replace("malicious-client", "dealer"))]).unwrap_err();
        assert!(e.contains("setting `mode` disagrees") && e.contains("malicious-client") && e.contains("has dealer"), "{e}");
        let e = check_files(&[("ms4.toml", serve), ("mi4.toml", &format!("{infer}crisp_linear = \"ckks\"\n"))]).unwrap_err();
        assert!(e.contains("setting `crisp-linear` disagrees"), "{e}");
    }

    #[test]
    fn expand_puts_the_file_first_and_drops_overridden_flags() {
        let dir = std::env::temp_dir().join(format!("hush-config-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("s.toml");
        std::fs::write(&p, "command = \"serve\"\nmodel = \"m.onnx\"\nmode = \"dealer\"\npin = [\"sha256:aa\"]\n").unwrap();
        let argv: Vec<OsString> = ["hush", "serve", "--mode", "tee", "--config", p.to_str().unwrap(), "--pin=sha256:cc"].iter().map(OsString::from).collect();
        let out: Vec<String> = expand_args(argv).unwrap().into_iter().map(|s| s.into_string().unwrap()).collect();
        assert_eq!(out, ["hush", "serve", "--model=m.onnx", "--mode", "tee", "--pin=sha256:cc"]);
        let argv: Vec<OsString> = ["hush", "demo", "--config", "x"].iter().map(OsString::from).collect();
        assert_eq!(expand_args(argv.clone()).unwrap(), argv);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
