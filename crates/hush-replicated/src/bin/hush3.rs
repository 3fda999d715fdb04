//! `hush3 node`: one compute party of the three-party service, for this
//! crate's integration tests (a test can only start binaries of its own
//! crate) and for `hush bench aes3 --exe`. Users run `hush node`, which
//! takes the same flags; every other command is `hush`'s only. The flags
//! are parsed by hand so that the library needs no clap.

use hush_replicated::node::{node_main, NodeOptions};

const USAGE: &str = "usage: hush3 node --party I --peers A,B,C [--listen ADDR] [--net PROFILE] [--timeout SECS] [--max-jobs N] [--verbose] \
[--store DIR] [--threads N] [--identity DIR] [--pin [ADDR=]sha256:HEX]... [--insecure] [--connect-timeout SECS]\n\
(the flags of `hush node`; see `hush node --help`)";

fn parse(args: &[String]) -> Result<NodeOptions, String> {
    let mut o = NodeOptions::default();
    let mut peers = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        let mut value = || inline.clone().or_else(|| it.next().cloned()).ok_or_else(|| format!("{flag} needs a value"));
        fn num<T: std::str::FromStr>(flag: &str, v: String) -> Result<T, String> {
            v.parse().map_err(|_| format!("{flag} {v:?}: expected a number"))
        }
        match flag {
            "--party" => o.party = num(flag, value()?)?,
            "--peers" => {
                o.peers = value()?.split(',').map(str::to_string).collect();
                peers = true;
            }
            "--listen" => o.listen = Some(value()?),
            "--net" => o.net = value()?,
            "--timeout" => o.timeout = num(flag, value()?)?,
            "--max-jobs" => o.max_jobs = Some(num(flag, value()?)?),
            "--verbose" => o.verbose = true,
            "--store" => o.store = Some(value()?.into()),
            "--threads" => o.threads = Some(num(flag, value()?)?),
            "--identity" => o.link.identity = Some(value()?.into()),
            "--pin" => o.link.pins.push(value()?),
            "--insecure" => o.link.insecure = true,
            "--connect-timeout" => o.link.connect_timeout = Some(num(flag, value()?)?),
            _ => return Err(format!("unknown argument {a:?}")),
        }
    }
    if !peers {
        return Err("--peers A,B,C is required".into());
    }
    Ok(o)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match args.split_first() {
        Some((cmd, rest)) if cmd == "node" => parse(rest),
        Some((h, _)) if h == "--help" || h == "-h" => {
            println!("{USAGE}");
            return;
        }
        _ => Err("the only command is `node` (use `hush` for the others)".into()),
    };
    let opts = match opts {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    if let Err(e) = node_main(opts) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
