//! Command-line front ends: clap argument structs and entry functions that
//! the `hush` binary mounts (`hush node`, `hush job`, `hush circuit run`,
//! `hush bench aes3`). The crate's own `hush3` binary mounts the same ones.

use crate::bristol::Circuit;
use crate::error::{Error, Result};
use crate::service::{run_job, run_node, CircuitSpec, Inputs, NodeConfig, DEFAULT_CHUNK_WORDS};
use hush_transport::{ChannelOptions, LinkConfig, LinkFlags, NetProfile};
use std::time::Duration;

fn profile(name: &str) -> Result<NetProfile> {
    NetProfile::by_name(name).ok_or_else(|| Error::Input(format!("unknown network profile {name:?} (known: {:?})", NetProfile::names())))
}

fn three(v: &[String], what: &str) -> Result<[String; 3]> {
    <[String; 3]>::try_from(v.to_vec()).map_err(|_| Error::Input(format!("{what} needs exactly three addresses A,B,C, got {}", v.len())))
}

/// `hush node`: run one compute party.
#[derive(clap::Args, Debug, Clone)]
pub struct NodeArgs {
    /// This party's index: 0, 1 or 2 (position in --peers).
    #[arg(long)]
    pub party: usize,
    /// The three parties' addresses, in party order: A,B,C.
    #[arg(long, value_delimiter = ',', required = true)]
    pub peers: Vec<String>,
    /// Address to listen on (default: this party's entry in --peers).
    #[arg(long)]
    pub listen: Option<String>,
    /// Emulated network on the ring links: none, lan, wan, mobile.
    #[arg(long, default_value = "none")]
    pub net: String,
    /// Seconds to wait for a silent peer before failing the job.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
    /// Exit after this many jobs (default: run forever).
    #[arg(long)]
    pub max_jobs: Option<u64>,
    /// Log one line per job.
    #[arg(long)]
    pub verbose: bool,
    /// TLS identity and pins: a node pins the two other nodes by their
    /// --peers address (`--pin ADDR=sha256:<hex>`, twice).
    #[command(flatten)]
    pub link: LinkFlags,
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
pub fn node_main(a: NodeArgs) -> Result<()> {
    let peers = three(&a.peers, "--peers")?;
    if a.party > 2 {
        return Err(Error::Input(format!("--party must be 0, 1 or 2, got {}", a.party)));
    }
    let listen = a.listen.clone().unwrap_or_else(|| peers[a.party].clone());
    let t = Duration::from_secs(a.timeout.max(1));
    let ring = ChannelOptions { timeout: t, profile: profile(&a.net)?, ..Default::default() };
    let client = ChannelOptions { timeout: t, ..Default::default() };
    let link = resolve_link(&a.link)?;
    print_identity(&link);
    run_node(NodeConfig { party: a.party, peers, listen, ring, client, max_jobs: a.max_jobs, verbose: a.verbose, link })
}

/// `hush job`: share inputs toward three nodes, run, reconstruct.
#[derive(clap::Args, Debug, Clone)]
pub struct JobArgs {
    /// The three nodes' addresses, in party order: A,B,C.
    #[arg(long, value_delimiter = ',', required = true)]
    pub nodes: Vec<String>,
    /// Bristol Fashion file or built-in name (aes128, adder64, sub64, neg64, zero_equal).
    #[arg(long)]
    pub circuit: String,
    /// One hex string per circuit input, natural byte order (AES: KEY then PLAINTEXT).
    #[arg(long = "input", num_args = 1)]
    pub inputs: Vec<String>,
    /// Evaluate this many instances of the inputs at once (fresh shares each).
    #[arg(long, default_value_t = 1)]
    pub repeat: u64,
    /// Instances per chunk = 64 × this.
    #[arg(long)]
    pub chunk_words: Option<usize>,
    /// Chunks in flight per party (1..=8).
    #[arg(long, default_value_t = 1)]
    pub streams: usize,
    /// Seconds to wait for a silent node.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
    /// Print a JSON object instead of plain hex.
    #[arg(long)]
    pub json: bool,
    /// TLS identity and pins: `--pin ADDR=sha256:<hex>` for each of the three nodes.
    #[command(flatten)]
    pub link: LinkFlags,
}

fn default_words(instances: u64) -> usize {
    (instances.div_ceil(64) as usize).clamp(1, DEFAULT_CHUNK_WORDS)
}

/// Runs one job and prints the outputs (one hex string per output value).
pub fn job_main(a: JobArgs) -> Result<()> {
    let nodes = three(&a.nodes, "--nodes")?;
    let spec = CircuitSpec::from_arg(&a.circuit)?;
    let c = spec.circuit()?;
    let bits = c.inputs_from_hex(&a.inputs)?;
    let words = a.chunk_words.unwrap_or_else(|| default_words(a.repeat));
    let opts = ChannelOptions { timeout: Duration::from_secs(a.timeout.max(1)), ..Default::default() };
    let link = resolve_link(&a.link)?;
    if !link.is_tls() {
        eprintln!("hush job: {}", link.banner());
    }
    let r = run_job(&nodes, &spec, a.repeat.max(1), words, a.streams.clamp(1, 8), &Inputs::Fixed(bits), &opts, &link)?;
    let first = r.output_bits(0);
    for k in 1..r.instances {
        if r.output_bits(k) != first {
            return Err(Error::Protocol { step: "reconstruction", msg: format!("instance {k} differs from instance 0") });
        }
    }
    let out = c.outputs_to_hex(&first);
    if a.json {
        let ring: u64 = r.stats.iter().map(|s| s.ring_bytes_sent).sum();
        println!(
            "{}",
            serde_json::json!({
                "outputs": out, "instances": r.instances, "wall_s": r.wall_s,
                "ring_bytes_sent": ring, "rounds": r.stats.iter().map(|s| s.rounds).max().unwrap_or(0),
            })
        );
    } else {
        for o in out {
            println!("{o}");
        }
        if r.instances > 1 {
            eprintln!("{} instances in {:.3} s ({:.0}/s)", r.instances, r.wall_s, r.instances as f64 / r.wall_s);
        }
    }
    Ok(())
}

/// `hush circuit ...`
#[derive(clap::Subcommand, Debug, Clone)]
pub enum CircuitCmd {
    /// Evaluate a circuit securely with all three parties in this process.
    Run(CircuitRunArgs),
    /// Validate a circuit and print its sizes: AND gates, depth, bytes per instance.
    Info(CircuitInfoArgs),
    /// Print a circuit (built-in or generated) as Bristol Fashion text.
    Export(CircuitExportArgs),
    /// List the built-in circuit names.
    List,
}

#[derive(clap::Args, Debug, Clone)]
pub struct CircuitRunArgs {
    /// Bristol Fashion file or built-in name (aes128, adder64, ...).
    #[arg(long)]
    pub circuit: String,
    /// One hex string per circuit input, natural byte order.
    #[arg(long = "input", num_args = 1)]
    pub inputs: Vec<String>,
    /// Evaluate in plaintext instead (the reference).
    #[arg(long)]
    pub plain: bool,
}

#[derive(clap::Args, Debug, Clone)]
pub struct CircuitInfoArgs {
    /// Bristol Fashion file or built-in name.
    #[arg(long)]
    pub circuit: String,
    /// One JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug, Clone)]
pub struct CircuitExportArgs {
    /// Built-in name (e.g. aes128-expanded, lt64) or file.
    #[arg(long)]
    pub circuit: String,
}

pub fn circuit_main(cmd: CircuitCmd) -> Result<()> {
    match cmd {
        CircuitCmd::Run(a) => circuit_run_main(a),
        CircuitCmd::Export(a) => {
            print!("{}", crate::gen::to_bristol(&Circuit::load(&a.circuit)?));
            Ok(())
        }
        CircuitCmd::List => {
            for n in Circuit::builtin_names() {
                let c = Circuit::builtin(n).expect("listed");
                println!("{n:<18} inputs {:?} outputs {:?} ANDs {} depth {}", c.inputs, c.outputs, c.and_count(), c.and_depth());
            }
            Ok(())
        }
        CircuitCmd::Info(a) => {
            let c = Circuit::load(&a.circuit)?;
            let p = crate::Program::compile(&c);
            let (n_in, n_out, ands) = (c.num_input_wires() as f64, c.num_output_wires() as f64, c.and_count() as f64);
            // Per instance: each party sends one bit per AND to the next
            // party; a data holder sends each party 2 bits per input wire
            // (x_i, a_i); each party sends the output party 1 bit per
            // output wire (a_i).
            let v = serde_json::json!({
                "circuit": c.name, "inputs": c.inputs, "outputs": c.outputs, "gates": c.gates.len(),
                "wires": c.num_wires, "and_gates": c.and_count(), "and_depth": c.and_depth(), "live_slots": p.nslots,
                "ring_bytes_per_instance_per_party": ands / 8.0,
                "ring_bytes_per_instance_total": 3.0 * ands / 8.0,
                "input_bytes_per_instance": 3.0 * 2.0 * n_in / 8.0,
                "output_bytes_per_instance": 3.0 * n_out / 8.0,
                "rounds": c.and_depth(),
            });
            if a.json {
                println!("{v}");
            } else {
                println!("circuit {}: inputs {:?}, outputs {:?}", c.name, c.inputs, c.outputs);
                println!("  {:<44}{:>12}", "gates", c.gates.len());
                println!("  {:<44}{:>12}", "AND gates", c.and_count());
                println!("  {:<44}{:>12}", "AND depth (rounds)", c.and_depth());
                println!("  {:<44}{:>12}", "live slots (evaluator working set, wires)", p.nslots);
                println!("  {:<44}{:>12.1}", "ring bytes / instance / party (ANDs/8)", ands / 8.0);
                println!("  {:<44}{:>12.1}", "ring bytes / instance, all three links", 3.0 * ands / 8.0);
                println!("  {:<44}{:>12.1}", "input bytes / instance (to 3 nodes)", 3.0 * 2.0 * n_in / 8.0);
                println!("  {:<44}{:>12.1}", "output bytes / instance (from 3 nodes)", 3.0 * n_out / 8.0);
            }
            Ok(())
        }
    }
}

/// `hush circuit run`: prints one hex string per output value.
pub fn circuit_run_main(a: CircuitRunArgs) -> Result<()> {
    let c = Circuit::load(&a.circuit)?;
    let out = if a.plain {
        let bits = c.inputs_from_hex(&a.inputs)?;
        c.outputs_to_hex(&c.eval_plain(&bits)?)
    } else {
        crate::local::run_hex(&c, &a.inputs)?
    };
    for o in out {
        println!("{o}");
    }
    Ok(())
}

pub use crate::bench::{bench_aes3_main, BenchAes3Args};
