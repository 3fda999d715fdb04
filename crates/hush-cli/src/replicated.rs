//! The three-party service's commands (`hush node`, `hush job`, `hush
//! share`, `hush fetch`, `hush circuit ...`, `hush bench aes3|3pc`): clap
//! argument structs and the glue that prints; the work is in
//! `hush-replicated`.

use hush_replicated::bench::{Aes3Options, ThreePcOptions};
use hush_replicated::bristol::Circuit;
use hush_replicated::node::NodeOptions;
use hush_replicated::service::{fetch_result, job_control, regrant_input, share_input, submit_job, Acl, CircuitSpec, InputSource, Inputs, JobSpec, DEFAULT_CHUNK_WORDS};
use hush_replicated::{Error, Result};
use hush_transport::{ChannelOptions, LinkConfig, LinkFlags};
use std::path::PathBuf;
use std::time::Duration;

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
    /// Folder of this node's encrypted store (stored inputs, result
    /// shares; key file node.key made on first start, mode 0600). Without
    /// it the node runs inline jobs only.
    #[arg(long, value_name = "DIR")]
    pub store: Option<std::path::PathBuf>,
    /// Threads (job lanes) this node runs at once; party 0 admits jobs
    /// fairly (round-robin over submitters) within this. Default: all cores.
    #[arg(long)]
    pub threads: Option<usize>,
    /// TLS identity and pins: a node pins the two other nodes by their
    /// --peers address (`--pin ADDR=sha256:<hex>`, twice).
    #[command(flatten)]
    pub link: LinkFlags,
}

impl From<NodeArgs> for NodeOptions {
    fn from(a: NodeArgs) -> Self {
        NodeOptions { party: a.party, peers: a.peers, listen: a.listen, net: a.net, timeout: a.timeout, max_jobs: a.max_jobs, verbose: a.verbose, store: a.store, threads: a.threads, link: a.link }
    }
}

/// Runs a compute party (returns only with `--max-jobs` or on a local error).
pub fn node_main(a: NodeArgs) -> Result<()> {
    hush_replicated::node::node_main(a.into())
}

fn resolve_link(f: &LinkFlags) -> Result<LinkConfig> {
    LinkConfig::from_flags(f).map_err(|e| Error::Input(e.to_string()))
}

/// `hush job`: run a circuit on three nodes, on inline inputs (shared by
/// the submitter) and/or stored inputs; outputs to the submitter or, with
/// `--output-to`, to an output party's store at the nodes.
#[derive(clap::Args, Debug, Clone)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct JobArgs {
    #[command(subcommand)]
    pub action: Option<JobAction>,
    /// The three nodes' addresses, in party order: A,B,C.
    #[arg(long, value_delimiter = ',', required = true)]
    pub nodes: Vec<String>,
    /// Bristol Fashion file or built-in name (`hush circuit list`).
    #[arg(long, required = true)]
    pub circuit: Option<String>,
    /// One hex string per inline circuit input, natural byte order (AES: KEY then PLAINTEXT).
    #[arg(long = "input", num_args = 1)]
    pub inputs: Vec<String>,
    /// One source per circuit input value: a stored input's name, or `-`
    /// for the next --input (default: all inline).
    #[arg(long = "inputs", value_delimiter = ',')]
    pub sources: Vec<String>,
    /// The output party's fingerprint (sha256:HEX): the nodes keep the
    /// result as shares until it fetches them (`hush fetch`); the submitter
    /// sees only the job id.
    #[arg(long)]
    pub output_to: Option<String>,
    /// Lanes: threads per node for this job (chunks split round-robin).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
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

/// `hush job status|cancel`.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum JobAction {
    /// State of a job (or, without --id, of all your jobs) at each node.
    Status(JobControlArgs),
    /// Cancel a job you submitted (queued or running) at every node.
    Cancel(JobControlArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct JobControlArgs {
    /// The three nodes' addresses, in party order: A,B,C.
    #[arg(long, value_delimiter = ',', required = true)]
    pub nodes: Vec<String>,
    /// Job id (hex, as printed by `hush job`).
    #[arg(long)]
    pub id: Option<String>,
    #[arg(long, default_value_t = 20)]
    pub timeout: u64,
    /// Each node's answer as one JSON object per line (default: a table).
    #[arg(long)]
    pub json: bool,
    /// TLS identity (the submitter's or output party's) and pins of the three nodes.
    #[command(flatten)]
    pub link: LinkFlags,
}

fn parse_job_id(s: &str) -> Result<u64> {
    u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).map_err(|_| Error::Input(format!("job id {s:?}: expected hex")))
}

fn job_control_main(a: JobControlArgs, cancel: bool) -> Result<()> {
    let nodes = three(&a.nodes, "--nodes")?;
    let id = match &a.id {
        Some(s) => parse_job_id(s)?,
        None if cancel => return Err(Error::Input("cancel needs --id".into())),
        None => 0,
    };
    let link = resolve_link(&a.link)?;
    let opts = link.channel_options(ChannelOptions { timeout: Duration::from_secs(a.timeout.max(1)), ..Default::default() });
    let mut failed = None;
    let mut answers = Vec::new();
    for (i, r) in job_control(&nodes, id, cancel, &opts, &link).into_iter().enumerate() {
        match r {
            Ok(v) if a.json => println!("{v}"),
            Ok(v) => answers.push((i, v)),
            Err(e) => {
                eprintln!("party {i}: {e}");
                failed = Some(e);
            }
        }
    }
    if !a.json {
        print!("{}", status_table(&answers));
    }
    failed.map_or(Ok(()), Err)
}

/// Seconds for a human: `4.2 s`, `3 min 05 s`, `2 h 07 min`.
fn human_age(s: f64) -> String {
    if !s.is_finite() || s < 0.0 {
        return "-".into();
    }
    let t = s as u64;
    match t {
        _ if s < 60.0 => format!("{s:.1} s"),
        _ if t < 3600 => format!("{} min {:02} s", t / 60, t % 60),
        _ => format!("{} h {:02} min", t / 3600, t % 3600 / 60),
    }
}

/// A fingerprint cut for a table column: `sha256:` and 12 hex digits, then `…`.
fn short_fp(f: &str) -> String {
    let n = "sha256:".len() + 12;
    if f.chars().count() > n + 1 {
        format!("{}…", f.chars().take(n).collect::<String>())
    } else {
        f.to_string()
    }
}

/// `hush job status|cancel` for a human: one row per job and node (job,
/// node, state, chunks done, age, circuit, output party), a failed job's
/// error on the line below, a cancellation as one line per node.
/// `answers` are the nodes' JSON answers (`{"party", "jobs": [...]}` or
/// `{"party", "cancelled"}`), with the node's index in party order.
pub fn status_table(answers: &[(usize, serde_json::Value)]) -> String {
    use std::fmt::Write;
    let str_of = |v: &serde_json::Value, k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
    let mut out = String::new();
    let mut rows: Vec<[String; 7]> = Vec::new();
    let mut errors: Vec<(usize, String)> = Vec::new();
    for (i, v) in answers {
        if let Some(c) = v.get("cancelled").and_then(|x| x.as_str()) {
            let _ = writeln!(out, "party {i}: job {c} cancelled");
            continue;
        }
        let jobs = v.get("jobs").and_then(|x| x.as_array()).map(Vec::as_slice).unwrap_or(&[]);
        if jobs.is_empty() {
            let _ = writeln!(out, "party {i}: no jobs of yours");
        }
        for j in jobs {
            let n = |k: &str| j.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
            let to = j.get("output_to").and_then(|x| x.as_str()).map(short_fp).unwrap_or_else(|| "(submitter)".into());
            rows.push([
                str_of(j, "job"),
                i.to_string(),
                str_of(j, "state"),
                format!("{}/{}", n("chunks_done"), n("chunks")),
                human_age(j.get("age_s").and_then(|x| x.as_f64()).unwrap_or(f64::NAN)),
                str_of(j, "circuit"),
                to,
            ]);
            let err = str_of(j, "error");
            if !err.is_empty() {
                errors.push((rows.len() - 1, err));
            }
        }
    }
    if rows.is_empty() {
        return out;
    }
    let head = ["job", "party", "state", "chunks", "age", "circuit", "output to"];
    let w: Vec<usize> = (0..7).map(|c| rows.iter().map(|r| r[c].chars().count()).chain([head[c].len()]).max().unwrap_or(0)).collect();
    let line = |cells: &[&str]| -> String {
        let mut l = String::new();
        for (c, x) in cells.iter().enumerate() {
            let pad = w[c].saturating_sub(x.chars().count());
            // numbers right-aligned, words left-aligned
            if c == 3 || c == 4 {
                let _ = write!(l, "{}{x}  ", " ".repeat(pad));
            } else {
                let _ = write!(l, "{x}{}  ", " ".repeat(pad));
            }
        }
        l.trim_end().to_string()
    };
    let _ = writeln!(out, "{}", line(&head));
    for (k, r) in rows.iter().enumerate() {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        let _ = writeln!(out, "{}", line(&cells));
        for (_, e) in errors.iter().filter(|(at, _)| *at == k) {
            let _ = writeln!(out, "  error: {e}");
        }
    }
    out
}

/// Runs one job and prints the outputs (one hex string per output value),
/// or with `--output-to` the job id.
pub fn job_main(a: JobArgs) -> Result<()> {
    match a.action {
        Some(JobAction::Status(c)) => return job_control_main(c, false),
        Some(JobAction::Cancel(c)) => return job_control_main(c, true),
        None => {}
    }
    let nodes = three(&a.nodes, "--nodes")?;
    let spec = CircuitSpec::from_arg(a.circuit.as_deref().ok_or_else(|| Error::Input("--circuit is required".into()))?)?;
    let c = spec.circuit()?;
    let (sources, bits) = if a.sources.is_empty() {
        (Vec::new(), c.inputs_from_hex(&a.inputs)?)
    } else {
        if a.sources.len() != c.inputs.len() {
            return Err(Error::Input(format!("--inputs names {} sources; circuit {} takes {} input values", a.sources.len(), c.name, c.inputs.len())));
        }
        let mut hexes = a.inputs.iter();
        let mut bits = Vec::new();
        let mut src = Vec::new();
        for (k, (s, &w)) in a.sources.iter().zip(&c.inputs).enumerate() {
            if s == "-" {
                let h = hexes.next().ok_or_else(|| Error::Input(format!("input {}: `-` needs an --input", k + 1)))?;
                bits.extend(hush_replicated::bristol::value_bits_from_hex(h, w).map_err(|e| Error::Input(format!("input {}: {e}", k + 1)))?);
                src.push(InputSource::Inline);
            } else {
                hush_replicated::store::check_name(s)?;
                src.push(InputSource::Stored(s.clone()));
            }
        }
        if hexes.next().is_some() {
            return Err(Error::Input("more --input values than `-` in --inputs".into()));
        }
        (src, bits)
    };
    let output_to = match &a.output_to {
        Some(f) => Some(f.parse::<hush_transport::Fingerprint>().map_err(|e| Error::Input(format!("--output-to: {e}")))?),
        None => None,
    };
    let words = a.chunk_words.unwrap_or_else(|| default_words(a.repeat));
    let link = resolve_link(&a.link)?;
    let opts = link.channel_options(ChannelOptions { timeout: Duration::from_secs(a.timeout.max(1)), ..Default::default() });
    if !link.is_tls() {
        eprintln!("hush job: {}", link.banner());
    }
    let js = JobSpec {
        circuit: spec,
        instances: a.repeat.max(1),
        words,
        streams: a.streams.clamp(1, 8),
        lanes: a.threads.max(1),
        sources,
        output_to,
    };
    let r = submit_job(&nodes, &js, &Inputs::Fixed(bits), &opts, &link)?;
    if let Some(to) = output_to {
        if a.json {
            println!("{}", serde_json::json!({ "job": format!("{:016x}", r.job_id), "output_to": to.to_string(), "instances": r.instances, "wall_s": r.wall_s }));
        } else {
            println!("job {:016x}", r.job_id);
            eprintln!("result stored as shares at the three nodes for {to}: `hush fetch --job {:016x}` with that identity", r.job_id);
        }
        return Ok(());
    }
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
            print!("{}", hush_replicated::gen::to_bristol(&Circuit::load(&a.circuit)?));
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
            let p = hush_replicated::Program::compile(&c);
            let (n_in, n_out, ands) = (c.num_input_wires() as f64, c.num_output_wires() as f64, c.and_count() as f64);
            // Per instance: each party sends one bit per AND to the next
            // party; a data holder sends each party 2 bits per input wire
            // (x_i, a_i); each party sends the output party 1 bit per
            // output wire (a_i).
            let digest = match Circuit::builtin(&a.circuit) {
                Some(b) => hush_replicated::grant::builtin_digest(&b, &a.circuit),
                None => hush_replicated::grant::text_digest(&hush_replicated::bristol::read_circuit_text(&a.circuit)?),
            };
            let digest: String = digest.iter().map(|x| format!("{x:02x}")).collect();
            let v = serde_json::json!({
                "circuit": c.name, "sha256": digest, "inputs": c.inputs, "outputs": c.outputs, "gates": c.gates.len(),
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
                println!("  {:<44}sha256:{digest}", "digest (for hush share --allow-circuit)");
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
        hush_replicated::local::run_hex(&c, &a.inputs)?
    };
    for o in out {
        println!("{o}");
    }
    Ok(())
}

/// `hush bench aes3`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchAes3Args {
    /// Number of AES-128 evaluations.
    #[arg(long, default_value_t = 1 << 20)]
    pub n: u64,
    /// Emulated network on the ring links: none, lan, wan, mobile.
    #[arg(long, default_value = "none")]
    pub net: String,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Instances per chunk = 64 × this.
    #[arg(long, default_value_t = DEFAULT_CHUNK_WORDS)]
    pub chunk_words: usize,
    /// Chunks in flight per party (1..=8): hides the ring latency.
    #[arg(long, default_value_t = 1)]
    pub streams: usize,
    /// Executable that provides the `node` subcommand (default: this one,
    /// or $HUSH_EXE).
    #[arg(long)]
    pub exe: Option<PathBuf>,
    /// Instances checked against software AES.
    #[arg(long, default_value_t = 64)]
    pub verify: u64,
    /// Plaintext links (default: TLS 1.3 between all parties, with an
    /// identity per node made for the run and every peer pinned).
    #[arg(long)]
    pub insecure: bool,
    /// Run twice, plaintext then TLS, and report TLS's overhead (time and
    /// socket bytes) beside the plaintext figures.
    #[arg(long)]
    pub tls_overhead: bool,
    /// aes128 (Bristol aes_128.txt, key expansion in the circuit, 6,400
    /// ANDs) or aes128-expanded (pre-expanded key, 5,120 ANDs).
    #[arg(long, default_value = "aes128")]
    pub circuit: String,
    /// Threads per node (job lanes); nodes run with --threads this.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Key handling: `stored` (one secret key, uploaded once with `hush
    /// share` semantics, used by every instance — the datacenter case; needs
    /// TLS) or `inline` (a fresh random key per instance, shared with the
    /// plaintext); `auto` (default) = `stored` over TLS, `inline` with
    /// `--insecure` or `--tls-overhead` (so that both runs compare the same
    /// work).
    #[arg(long, default_value = "auto")]
    pub key: String,
}

impl From<BenchAes3Args> for Aes3Options {
    fn from(a: BenchAes3Args) -> Self {
        Aes3Options { n: a.n, net: a.net, json: a.json, chunk_words: a.chunk_words, streams: a.streams, exe: a.exe, verify: a.verify, insecure: a.insecure, tls_overhead: a.tls_overhead, circuit: a.circuit, threads: a.threads, key: a.key }
    }
}

/// `hush bench 3pc`: AES/s by threads per node, beside Araki Table I.
#[derive(clap::Args, Debug, Clone)]
pub struct Bench3pcArgs {
    /// Print the table (Araki Table I's shape).
    #[arg(long)]
    pub table: bool,
    /// Threads per node to measure (default: 1 .. all cores).
    #[arg(long, value_delimiter = ',')]
    pub threads: Vec<usize>,
    /// AES evaluations per measurement.
    #[arg(long, default_value_t = 1 << 18)]
    pub n: u64,
    /// Repetitions per cell (the table shows min–max and median).
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// aes128-expanded (default, as in the paper) or aes128.
    #[arg(long, default_value = "aes128-expanded")]
    pub circuit: String,
    #[arg(long, default_value_t = 2)]
    pub streams: usize,
    #[arg(long)]
    pub exe: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

impl From<Bench3pcArgs> for ThreePcOptions {
    fn from(a: Bench3pcArgs) -> Self {
        ThreePcOptions { table: a.table, threads: a.threads, n: a.n, repeat: a.repeat, circuit: a.circuit, streams: a.streams, exe: a.exe, json: a.json }
    }
}

pub fn bench_aes3_main(a: BenchAes3Args) -> Result<()> {
    hush_replicated::bench::bench_aes3_main(a.into())
}

pub fn bench_3pc_main(a: Bench3pcArgs) -> Result<()> {
    hush_replicated::bench::bench_3pc_main(a.into())
}

/// `hush share`: upload replicated shares of a named input to the three nodes.
#[derive(clap::Args, Debug, Clone)]
pub struct ShareArgs {
    /// The three nodes' addresses, in party order: A,B,C.
    #[arg(long, value_delimiter = ',', required = true)]
    pub nodes: Vec<String>,
    /// Name under which the nodes store the input (1-64 of A-Z a-z 0-9 . _ -).
    #[arg(long)]
    pub name: String,
    /// The value: hex (natural byte order), or a file whose bytes are the
    /// value (not with --regrant).
    #[arg(long, required_unless_present = "regrant")]
    pub input: Option<String>,
    /// Width in bits (default: 8 × bytes).
    #[arg(long)]
    pub width: Option<usize>,
    /// Fingerprints (sha256:HEX, or `any`) allowed to submit jobs using
    /// this input; you (the owner) always may.
    #[arg(long = "allow-job", value_delimiter = ',')]
    pub allow_job: Vec<String>,
    /// Fingerprints (or `any`) allowed to receive results computed from
    /// this input; you always may.
    #[arg(long = "allow-output", value_delimiter = ',')]
    pub allow_output: Vec<String>,
    /// Functions the --allow-job identities may compute on this input:
    /// built-in circuit names (`hush circuit list`) or `sha256:<hex>` of a
    /// Bristol file, each with `@N` for the input value this input feeds
    /// (e.g. `aes128@1`: the key of AES-128), or `any` (every function,
    /// so a recipient may learn the input itself). Default: none (only
    /// you may compute on it).
    #[arg(long = "allow-circuit", value_delimiter = ',')]
    pub allow_circuit: Vec<String>,
    /// Replace the access lists and --allow-circuit of an input the nodes
    /// already hold, keeping its shares (no --input). This is how an input
    /// stored before function grants is given a meaning again.
    #[arg(long, conflicts_with_all = ["input", "width"])]
    pub regrant: bool,
    #[arg(long, default_value_t = 20)]
    pub timeout: u64,
    /// TLS identity (the owner's: `--identity DIR`) and pins of the three nodes.
    #[command(flatten)]
    pub link: LinkFlags,
}

pub fn share_main(a: ShareArgs) -> Result<()> {
    let nodes = three(&a.nodes, "--nodes")?;
    let circuits = hush_replicated::grant::parse_list(&a.allow_circuit)?;
    if circuits.iter().any(|c| c == "any") && !a.allow_job.is_empty() {
        eprintln!(
            "hush share: warning: --allow-circuit any lets {} compute any function of {:?}, the identity included: every identity in --allow-output ({}) may then learn the input itself",
            a.allow_job.join(","),
            a.name,
            if a.allow_output.is_empty() { "you only".to_string() } else { a.allow_output.join(",") }
        );
    }
    if circuits.is_empty() && !a.allow_job.is_empty() {
        eprintln!("hush share: no --allow-circuit: the identities in --allow-job may compute nothing on {:?} (only you may)", a.name);
    }
    let acl = Acl { users: a.allow_job, recipients: a.allow_output, circuits };
    let link = resolve_link(&a.link)?;
    let opts = link.channel_options(ChannelOptions { timeout: Duration::from_secs(a.timeout.max(1)), ..Default::default() });
    let owner = link.fingerprint().map(|f| f.to_string()).unwrap_or_default();
    if a.regrant {
        let st = regrant_input(&nodes, &a.name, &acl, &opts, &link)?;
        eprintln!("re-granted {:?} at the three nodes: version {}, grant sha256:{}; owner {owner}", a.name, st.version, st.grant);
        return Ok(());
    }
    let input = a.input.as_deref().ok_or_else(|| Error::Input("--input is required (or --regrant)".into()))?;
    let hexv = if std::path::Path::new(input).is_file() {
        let b = zeroize::Zeroizing::new(std::fs::read(input).map_err(|e| Error::File { what: format!("reading {input}"), err: e })?);
        b.iter().map(|x| format!("{x:02x}")).collect::<String>()
    } else {
        input.trim().trim_start_matches("0x").to_string()
    };
    let hexv = zeroize::Zeroizing::new(hexv);
    let width = a.width.unwrap_or(hexv.len() / 2 * 8);
    let mut bits = hush_replicated::bristol::value_bits_from_hex(&hexv, width).map_err(|e| Error::Input(format!("--input: {e}")))?;
    let r = share_input(&nodes, &a.name, &bits, &acl, &opts, &link);
    zeroize::Zeroize::zeroize(&mut bits);
    let st = r?;
    eprintln!("stored {:?} ({width} bits) at the three nodes: version {}, grant sha256:{}; owner {owner}", a.name, st.version, st.grant);
    Ok(())
}

/// `hush fetch`: as the output party, collect and reconstruct a job's result.
#[derive(clap::Args, Debug, Clone)]
pub struct FetchArgs {
    /// The three nodes' addresses, in party order: A,B,C.
    #[arg(long, value_delimiter = ',', required = true)]
    pub nodes: Vec<String>,
    /// Job id (hex, as printed by `hush job`).
    #[arg(long)]
    pub job: String,
    /// Print every instance (default: instance 0, and a check that all agree when inputs were stored).
    #[arg(long)]
    pub all: bool,
    #[arg(long)]
    pub json: bool,
    #[arg(long, default_value_t = 20)]
    pub timeout: u64,
    /// TLS identity (the output party's: `--identity DIR`) and pins of the three nodes.
    #[command(flatten)]
    pub link: LinkFlags,
}

pub fn fetch_main(a: FetchArgs) -> Result<()> {
    let nodes = three(&a.nodes, "--nodes")?;
    let id = parse_job_id(&a.job)?;
    let link = resolve_link(&a.link)?;
    let opts = link.channel_options(ChannelOptions { timeout: Duration::from_secs(a.timeout.max(1)), ..Default::default() });
    let f = fetch_result(&nodes, id, &opts, &link)?;
    let c = Circuit { name: f.circuit.clone(), num_wires: 0, inputs: vec![], outputs: f.outputs.clone(), gates: vec![], header_gates: 0 };
    let n = if a.all { f.result.instances } else { 1 };
    let rows: Vec<Vec<String>> = (0..n).map(|k| c.outputs_to_hex(&f.result.output_bits(k))).collect();
    if a.json {
        println!("{}", serde_json::json!({ "job": format!("{id:016x}"), "circuit": f.circuit, "instances": f.result.instances, "outputs": rows }));
    } else {
        for r in rows {
            println!("{}", r.join(" "));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn job_status_reads_as_a_table() {
        let fp = format!("sha256:{}", "ab".repeat(32));
        let job = |state: &str, done: u64, err: &str, age: f64| {
            json!({ "job": "00000000000000ff", "state": state, "error": err, "circuit": "aes128", "chunks_done": done, "chunks": 4,
                    "age_s": age, "submitter": fp, "output_to": fp })
        };
        let answers = vec![
            (0, json!({ "party": 0, "jobs": [job("done", 4, "", 3.25)] })),
            (1, json!({ "party": 1, "jobs": [job("running", 2, "", 125.0)] })),
            (2, json!({ "party": 2, "jobs": [job("failed", 1, "lost party 1", 7300.0)] })),
        ];
        let t = status_table(&answers);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 5, "{t}");
        assert!(lines[0].starts_with("job") && lines[0].contains("state") && lines[0].contains("output to"), "{t}");
        assert!(lines[1].contains("00000000000000ff") && lines[1].contains(" done ") && lines[1].contains("4/4") && lines[1].contains("3.2 s"), "{t}");
        assert!(lines[2].contains("running") && lines[2].contains("2/4") && lines[2].contains("2 min 05 s"), "{t}");
        assert!(lines[3].contains("failed") && lines[3].contains("2 h 01 min"), "{t}");
        assert_eq!(lines[4], "  error: lost party 1");
        // the fingerprint shortened, columns aligned, no JSON
        assert!(lines[1].contains("sha256:abababababab…") && !t.contains('{'), "{t}");
        let col = |l: &str| l.find("aes128").unwrap();
        assert!(lines[1..4].iter().all(|l| col(l) == col(lines[1])), "{t}");
        // no jobs, a cancellation, the submitter as output party
        let t = status_table(&[(0, json!({ "party": 0, "jobs": [] })), (1, json!({ "party": 1, "cancelled": "00000000000000ff" }))]);
        assert_eq!(t, "party 0: no jobs of yours\nparty 1: job 00000000000000ff cancelled\n");
        let mut j = job("queued", 0, "", 0.5);
        j["output_to"] = serde_json::Value::Null;
        assert!(status_table(&[(0, json!({ "party": 0, "jobs": [j] }))]).contains("(submitter)"));
        assert_eq!(human_age(f64::NAN), "-");
    }
}
