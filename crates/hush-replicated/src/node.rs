//! One compute party of the three-party service from plain settings: what
//! `hush node` (in `hush-cli`) and this crate's `hush3 node` run.

use crate::error::{Error, Result};
use crate::service::{all_cores, run_node, NodeConfig};
use hush_transport::{ChannelOptions, LinkConfig, LinkFlags, NetProfile};
use std::time::Duration;

fn profile(name: &str) -> Result<NetProfile> {
    NetProfile::by_name(name).ok_or_else(|| Error::Input(format!("unknown network profile {name:?} (known: {:?})", NetProfile::names())))
}

fn three(v: &[String], what: &str) -> Result<[String; 3]> {
    <[String; 3]>::try_from(v.to_vec()).map_err(|_| Error::Input(format!("{what} needs exactly three addresses A,B,C, got {}", v.len())))
}

/// One compute party's settings (the flags of `hush node`, parsed in
/// `hush-cli`, and of this crate's `hush3 node`).
#[derive(Debug, Clone)]
pub struct NodeOptions {
    /// This party's index: 0, 1 or 2 (position in --peers).
    pub party: usize,
    /// The three parties' addresses, in party order: A,B,C.
    pub peers: Vec<String>,
    /// Address to listen on (default: this party's entry in --peers).
    pub listen: Option<String>,
    /// Emulated network on the ring links: none, lan, wan, mobile.
    pub net: String,
    /// Seconds to wait for a silent peer before failing the job.
    pub timeout: u64,
    /// Exit after this many jobs (default: run forever).
    pub max_jobs: Option<u64>,
    /// Log one line per job.
    pub verbose: bool,
    /// Folder of this node's encrypted store (stored inputs, result
    /// shares; key file node.key made on first start, mode 0600). Without
    /// it the node runs inline jobs only.
    pub store: Option<std::path::PathBuf>,
    /// Threads (job lanes) this node runs at once; party 0 admits jobs
    /// fairly (round-robin over submitters) within this. Default: all cores.
    pub threads: Option<usize>,
    /// TLS identity and pins: a node pins the two other nodes by their
    /// --peers address (`--pin ADDR=sha256:<hex>`, twice).
    pub link: LinkFlags,
}

impl Default for NodeOptions {
    fn default() -> Self {
        NodeOptions { party: 0, peers: Vec::new(), listen: None, net: "none".into(), timeout: 60, max_jobs: None, verbose: false, store: None, threads: None, link: LinkFlags::default() }
    }
}

fn resolve_link(f: &LinkFlags) -> Result<LinkConfig> {
    LinkConfig::from_flags(f).map_err(|e| Error::Input(e.to_string()))
}

/// What a party prints at start: `fingerprint sha256:<hex>` on stdout
/// (flushed), or the plaintext warning on stderr.
fn print_identity(link: &LinkConfig) {
    use std::io::Write;
    match link.fingerprint() {
        Some(fp) => {
            println!("fingerprint {fp}");
            let _ = std::io::stdout().flush();
        }
        None => eprintln!("hush: {}", link.banner()),
    }
}

/// Runs a compute party (returns only with `--max-jobs` or on a local error).
pub fn node_main(a: NodeOptions) -> Result<()> {
    let peers = three(&a.peers, "--peers")?;
    if a.party > 2 {
        return Err(Error::Input(format!("--party must be 0, 1 or 2, got {}", a.party)));
    }
    let listen = a.listen.clone().unwrap_or_else(|| peers[a.party].clone());
    let t = Duration::from_secs(a.timeout.max(1));
    let link = resolve_link(&a.link)?;
    let ring = ChannelOptions { timeout: t, profile: profile(&a.net)?, connect_timeout: link.connect_timeout(), ..Default::default() };
    let client = ChannelOptions { timeout: t, connect_timeout: link.connect_timeout(), ..Default::default() };
    print_identity(&link);
    let threads = a.threads.unwrap_or_else(all_cores).max(1);
    run_node(NodeConfig { party: a.party, peers, listen, ring, client, max_jobs: a.max_jobs, verbose: a.verbose, link, store: a.store, threads })
}

