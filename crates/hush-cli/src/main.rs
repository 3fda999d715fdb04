//! The `hush` command line. Each subcommand is a thin layer over a library
//! crate; nothing protocol-specific lives here. Compiled as the module
//! `app` of the `hush_cli` library (see `lib.rs`); the binary is
//! `src/bin/hush.rs`.

use clap::{Args, Parser, Subcommand};

#[path = "config.rs"]
pub(crate) mod config;
#[path = "report.rs"]
pub(crate) mod report;
#[path = "help.rs"]
pub(crate) mod help;
#[path = "records_md.rs"]
pub(crate) mod records_md;
#[path = "psi.rs"]
pub(crate) mod psi;
#[path = "replicated.rs"]
pub(crate) mod replicated;
#[path = "lr.rs"]
pub(crate) mod lr;
#[path = "inference.rs"]
pub(crate) mod inference;
use hush_bench::{cot::CotBench, Record, Transport};
use hush_correlations::registry::SourceConfig;

#[derive(Parser)]
#[command(
    name = "hush",
    version,
    about = "Private machine learning with secure multi-party computation, made fast by trusted acceleration",
    after_help = "Deployment configs: serve, infer, node, job, dealer and train take --config FILE.toml \
                  (keys = the command's long flags; flags on the command line override the file); \
                  `hush config check FILE...` validates configs and checks that a set of parties' configs agree."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The main job: private inference (tee mode) of bundled MNIST sample
    /// images on the bundled model; prints true label, private prediction, costs.
    Demo(inference::DemoArgs),
    /// Two parties over TCP loopback generate correlated OTs with IKNP and print the costs.
    DemoCot(DemoArgs),
    /// Serve private inference of a model to many concurrent clients (server party).
    Serve(inference::ServeArgs),
    /// Private inference against a `hush serve` server (client party).
    Infer(inference::InferArgs),
    /// Private inference with both parties in this process.
    Run(inference::RunArgs),
    /// The dealer service of dealer mode: deals each session's correlations
    /// to its two parties over TLS (prints its fingerprint at start);
    /// trusted not to collude with either party.
    Dealer(inference::DealerArgs),
    /// Benchmarks (one JSON object per line with --json).
    #[command(subcommand)]
    Bench(BenchCmd),
    /// Private embeddings or outputs of a transformer encoder from ONNX
    /// (torch.onnx/optimum exports, or scripts/minilm.py's graph): both
    /// parties in this process (tee mode, module simulated — no hardware
    /// protection), or with --connect against `hush serve` (tee or dealer).
    Embed(inference::EmbedArgs),
    /// Plans a model from costs measured on this machine, predicted on a
    /// network profile: an encoder graph (.onnx) step by step (the backend
    /// of each layer with the server's weights: module-dealt or dealt
    /// triples), a CNN layer by layer (the comparison family of the mode);
    /// why each choice won; totals of every fixed choice and of the plan
    /// (`--verify`: measured beside predicted).
    Plan(PlanArgs),
    /// Convert an ONNX model into a hush model file (.hushm); prints the
    /// layers. `serve`, `run` and `bench infer` also take .onnx directly.
    Import(ImportArgs),
    /// Render `--json` benchmark output as a self-contained HTML report:
    /// per-layer time, bytes and rounds as bar charts (inline SVG), and one
    /// table per benchmark. `hush bench ... --report OUT.html` writes one directly.
    Report {
        /// The `--json` output (one JSON object per line); with --markdown, any number of record files.
        #[arg(required = true, num_args = 1..)]
        inputs: Vec<std::path::PathBuf>,
        /// Where to write the HTML (default: the input with .html).
        #[arg(long, conflicts_with = "markdown")]
        html: Option<std::path::PathBuf>,
        /// Print Markdown tables to stdout instead (one per benchmark, human
        /// units; every record must carry `cpu`, `date` and `load`, as the
        /// records in bench/records/ do): the performance page of the docs.
        #[arg(long)]
        markdown: bool,
    },
    /// Deployment configs (TOML): validate them and check that parties agree.
    Config {
        #[command(subcommand)]
        cmd: ConfigCmd,
    },
    /// Run one compute party of the three-party circuit service (Araki et al.).
    Node(replicated::NodeArgs),
    /// Share inputs with three nodes, run a circuit, reconstruct the output.
    Job(replicated::JobArgs),
    /// Data owner: upload shares of a named input to the three nodes (stored encrypted, access list by fingerprint).
    Share(replicated::ShareArgs),
    /// Output party: collect and reconstruct a job's result from the three nodes.
    Fetch(replicated::FetchArgs),
    /// Make a party identity for TLS links: DIR/identity.key (private,
    /// mode 0600) and DIR/identity.crt (self-signed); prints its fingerprint,
    /// which peers pin with --pin.
    Keygen {
        /// Folder to write identity.key and identity.crt into (created; existing files are not overwritten).
        #[arg(long, value_name = "DIR", required_unless_present = "show", conflicts_with = "show")]
        out: Option<std::path::PathBuf>,
        /// Print the fingerprint of an existing identity folder (one that
        /// `hush keygen --out DIR` made) instead of making a new one.
        #[arg(long, value_name = "DIR")]
        show: Option<std::path::PathBuf>,
    },
    /// Boolean circuits: run all three parties in this process, or inspect a circuit.
    Circuit {
        #[command(subcommand)]
        cmd: replicated::CircuitCmd,
    },
    /// Vertical logistic regression (CAESAR: secret sharing + Paillier), one party.
    Train(lr::TrainArgs),
    /// Score rows with a vertical LR model: with the peer (shared model), or alone from a revealed one.
    Predict(lr::PredictArgs),
    /// Private set intersection (ECDH-PSI): align this party's CSV rows with the peer's by ID.
    Psi(psi::PsiArgs),
    /// Hardware attestation (AMD SEV-SNP, Intel TDX) of a dealer or module:
    /// `hush attest verify` checks evidence offline and prints each leg.
    #[command(subcommand)]
    Attest(hush_attest::cli::AttestCmd),
}

#[derive(Subcommand)]
enum ConfigCmd {
    /// Validate each config file (keys, value types, values), then check
    /// that the set agrees: the settings every party of a session shares
    /// (mode, family, ring and fraction bits, chunk, ...), ports, and pins
    /// against the identity folders that exist. Names each disagreeing setting.
    Check {
        /// Config files (TOML), e.g. every party's of one deployment.
        #[arg(required = true)]
        files: Vec<std::path::PathBuf>,
    },
}

#[derive(Args)]
struct ImportArgs {
    /// The ONNX model to read.
    model: std::path::PathBuf,
    /// The .hushm file to write.
    out: std::path::PathBuf,
    /// Declare the input range the model was trained on, LO,HI (e.g. 0,1):
    /// clients refuse inputs outside it, naming the value.
    #[arg(long, value_name = "LO,HI")]
    input_range: Option<String>,
    /// With --input-range: the factor that brings raw whole-number inputs
    /// into the range (e.g. 0.00392156862745098 = 1/255 for 8-bit pixels);
    /// clients then normalise such inputs instead of refusing them.
    #[arg(long, value_name = "FACTOR", requires = "input_range")]
    raw_scale: Option<f64>,
}

/// `hush import IN.onnx OUT.hushm`: the built-in importer, then the loader's checks.
fn import(a: ImportArgs) -> Result<(), String> {
    let bytes = hush_inference::model::convert_onnx(&a.model).map_err(|e| e.to_string())?;
    let bytes = match &a.input_range {
        None => bytes,
        Some(r) => {
            let (lo, hi) = r
                .split_once(',')
                .and_then(|(l, h)| Some((l.trim().parse::<f64>().ok()?, h.trim().parse::<f64>().ok()?)))
                .ok_or_else(|| format!("--input-range {r}: expected LO,HI (two numbers, e.g. 0,1)"))?;
            hush_inference::model::Model::declare_input_range(&bytes, (lo, hi), a.raw_scale).map_err(|e| e.to_string())?
        }
    };
    let m = hush_inference::model::Model::from_bytes(&bytes).map_err(|e| e.to_string())?;
    std::fs::write(&a.out, &bytes).map_err(|e| format!("{}: {e}", a.out.display()))?;
    println!(
        "{}: {} layers, input {:?}{}, output {:?}, postprocess {:?}, {} weights",
        a.out.display(),
        m.nodes.len(),
        m.input_shape,
        match (m.input_range, m.input_raw_scale) {
            (Some((lo, hi)), Some(s)) => format!(" in [{lo}, {hi}] (raw inputs × {s})"),
            (Some((lo, hi)), None) => format!(" in [{lo}, {hi}]"),
            _ => String::new(),
        },
        m.output_shape(),
        m.post,
        m.params()
    );
    Ok(())
}

#[derive(Args)]
struct DemoArgs {
    /// Number of COTs.
    #[arg(long, default_value_t = 1_000_000)]
    n: usize,
    /// Network profile to emulate: none, lan, wan, mobile.
    #[arg(long, default_value = "none")]
    net: String,
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Fixed-key AES-128 throughput on one core.
    Aes {
        #[arg(long)]
        json: bool,
        /// Blocks per call.
        #[arg(long, default_value_t = 4096)]
        batch: usize,
        /// Seconds to run.
        #[arg(long, default_value_t = 1.0)]
        seconds: f64,
    },
    /// Correlated OT generation, both parties in this process.
    Cot(CotArgs),
    /// Secure AES-128 with three node processes over loopback (Araki et al.).
    Aes3(replicated::BenchAes3Args),
    /// Secure AES/s by threads per node with three node processes, beside Araki et al. Table I.
    #[command(name = "3pc")]
    ThreePc(replicated::Bench3pcArgs),
    /// Two-party comparison layer: millionaires', DReLU, ReLU, MaxPool, truncation
    /// in the CrypTFlow2, TAMI-MPC and FSS families.
    Nonlinear(hush_bench::nonlinear::NonlinearArgs),
    /// Trusted-module dealing per kind: items/s, dealt bytes/s, against this core's AES-call bound.
    Deal(hush_bench::deal::DealArgs),
    /// Cheetah's HE linear layers (coefficient-encoded conv/FC, RLWE) on benchmark shapes.
    #[command(name = "he-linear")]
    HeLinear(hush_bench::he_linear::HeLinearArgs),
    /// Private inference of a benchmark model (online and offline split).
    Infer(inference::BenchInferArgs),
    /// Paillier (DJN, CRT, fixed base) µs/op on one core.
    Paillier(lr::BenchPaillierArgs),
    /// Vertical sparse logistic regression, both parties in this process.
    Lr(lr::BenchLrArgs),
}

#[derive(Args)]
struct CotArgs {
    /// COT source: iknp, ferret (interactive silent OT) or silent (SilentFlow,
    /// tee mode; module attestation simulated — gives no hardware protection).
    #[arg(long, default_value = "iknp")]
    source: String,
    /// Number of COTs.
    #[arg(long, default_value_t = 10_000_000)]
    n: usize,
    /// Network profile: none, lan, wan, mobile.
    #[arg(long, default_value = "none")]
    net: String,
    /// Transport: tcp (loopback) or mem.
    #[arg(long, default_value = "tcp")]
    transport: String,
    /// Peak-memory budget per party (e.g. 256MiB): ferret/silent pick the
    /// largest LPN batch that fits and generate batch by batch.
    #[arg(long)]
    max_mem: Option<String>,
    /// Where SilentFlow's trusted module runs: auto, in-process, out-of-process.
    #[arg(long, default_value = "auto")]
    tee: String,
    /// Run GGM and LPN one after the other (no kernel fusion).
    #[arg(long)]
    unfused: bool,
    /// SilentFlow Table III: silent, ferret and iknp under lan, wan, mobile in one run.
    #[arg(long)]
    table: bool,
    /// Repetitions (one JSON line each; with --table each cell is the median of this many runs).
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Seed for all randomness (default: OS randomness).
    #[arg(long)]
    seed: Option<u64>,
    /// Weak-client profile for the receiver (the client's side): weak
    /// (TAMI-MPC's 800 MHz, 512 MB client), tiny (SilentFlow's 500 MHz,
    /// 256 MB) or none. Limits its thread's CPU share (cgroup quota, else a
    /// duty-cycle throttle) and sets --max-mem to the profile's memory
    /// unless smaller.
    #[arg(long, default_value = "none")]
    client_profile: String,
    #[arg(long)]
    json: bool,
}

/// `hush plan`.
#[derive(clap::Args, Clone, Debug)]
struct PlanArgs {
    /// The encoder graph (.onnx, as torch.onnx.export or optimum write it),
    /// or a CNN (.hushm, a CNN's .onnx, or a benchmark architecture:
    /// minionn-mnist, minionn-cifar, squeezenet, resnet50).
    model: std::path::PathBuf,
    /// Trust mode. Encoder graphs: tee (a backend per layer) or dealer
    /// (dealt triples only: the dealer must never see W). CNNs: tee,
    /// dealer (the dealer holds W), interactive or silent (the comparison
    /// family chosen per model).
    #[arg(long, default_value = "tee")]
    mode: String,
    /// Network profile the times are predicted for (none, lan, wan, mobile,
    /// shaper), or several comma-separated (measured once, one plan each).
    #[arg(long, default_value = "lan")]
    net: String,
    /// Sentences per request.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Padded sequence length.
    #[arg(long, default_value_t = 128)]
    seq: usize,
    /// Comparison family (tami or fss).
    #[arg(long, default_value = "tami")]
    proto: String,
    /// Fraction bits (8..=12).
    #[arg(long, default_value_t = 12)]
    frac: u32,
    /// Also run the plan over the emulated profile and print measured beside predicted.
    #[arg(long)]
    verify: bool,
    /// Also run every fixed choice over the emulated profile (measured
    /// beside predicted for each; implies --verify).
    #[arg(long)]
    verify_fixed: bool,
    /// The client device to plan for (its CPU share of this machine's
    /// core, and its memory as a budget): none, or a profile of `hush bench
    /// infer --client-profile`.
    #[arg(long, default_value = "none")]
    client_profile: String,
    /// The client's memory budget (e.g. 256MiB). CNNs: the measured runs
    /// use the chunk and pre-dealing it fits, and each layer reports the
    /// client's estimated memory. Encoder graphs: the client's heap peak is
    /// measured per step, and a backend over the budget is not chosen.
    #[arg(long, value_name = "BYTES")]
    max_mem: Option<String>,
    /// One JSON object on stdout.
    #[arg(long)]
    json: bool,
}

fn plan_main(a: PlanArgs) -> Result<(), hush_inference::Error> {
    use hush_inference::{graph_plan, graph_run::GraphOptions, Error};
    let nets = a.net.split(',').map(|n| hush_transport::NetProfile::by_name(n.trim()).ok_or_else(|| Error::Config(format!("--net {n}: one of {}", hush_transport::NetProfile::names().join(", "))))).collect::<Result<Vec<_>, _>>()?;
    let net = nets[0].clone();
    // a CNN: a benchmark architecture by name, a .hushm, or an ONNX file the
    // encoder-graph importer refuses and the CNN importer takes
    let name = a.model.to_string_lossy().to_string();
    let graph = if hush_inference::zoo::NAMES.contains(&name.as_str()) || name.ends_with(".hushm") { None } else { Some(graph_plan::load(&a.model)) };
    let cnn = match &graph {
        None => Some(hush_inference::zoo::load(&name)?),
        Some(Err(e)) => match hush_inference::zoo::load(&name) {
            Ok(m) => Some(m),
            Err(_) => return Err(Error::Model(e.to_string())),
        },
        Some(Ok(_)) => None,
    };
    if let Some(model) = cnn {
        let mut opts = hush_inference::runtime::Options { mode: hush_inference::runtime::Mode::from_flags_local(&a.mode, None, None)?, proto: "auto".into(), ..Default::default() };
        opts.resolve_family()?;
        if let Some(m) = &a.max_mem {
            opts.max_mem = Some(hush_inference::commands::parse_size(m)?);
        }
        let opts = hush_inference::commands::with_profile(opts, &a.client_profile)?;
        for (_, rep) in hush_inference::cnn_plan::plan_cnn_nets(std::sync::Arc::new(model), &opts, &nets, a.verify || a.verify_fixed, a.verify_fixed)? {
            if a.json {
                println!("{rep}");
            } else {
                hush_inference::cnn_plan::print_plan(&rep);
            }
        }
        return Ok(());
    }
    if a.batch == 0 || a.seq == 0 || a.batch.saturating_mul(a.seq) > hush_inference::graph_serve::MAX_INPUT_ELEMS {
        return Err(Error::Config(format!("--batch {} --seq {}: at most {} tokens", a.batch, a.seq, hush_inference::graph_serve::MAX_INPUT_ELEMS)));
    }
    let client_profile = hush_transport::ClientProfile::by_name(&a.client_profile)
        .ok_or_else(|| Error::Config(format!("--client-profile {}: choose one of {}", a.client_profile, hush_transport::ClientProfile::names().join(", "))))?;
    let max_mem = a.max_mem.as_deref().map(hush_inference::commands::parse_size).transpose()?;
    let proto = match (a.proto.as_str(), a.mode.as_str()) {
        (_, "interactive" | "silent") => hush_2pc::nonlinear::Proto::Cf2,
        ("tami", _) => hush_2pc::nonlinear::Proto::Tami,
        ("fss", _) => hush_2pc::nonlinear::Proto::Fss,
        (p, _) => return Err(Error::Config(format!("--proto {p}: tami or fss"))),
    };
    let fx = hush_inference::graph_serve::graph_fixed(a.frac)?;
    let opts = match a.mode.as_str() {
        "tee" => GraphOptions::tee(fx, proto),
        "dealer" => GraphOptions::dealer(fx, proto),
        "interactive" => GraphOptions::interactive(fx, Default::default()),
        "silent" => GraphOptions::interactive(fx, hush_inference::graph_run::InteractiveSetup::silent()),
        m => return Err(Error::Config(format!("--mode {m}: encoder graphs are planned in tee, dealer, interactive and silent modes"))),
    };
    let g = match graph {
        Some(Ok(g)) => g,
        _ => graph_plan::load(&a.model)?,
    };
    let req = graph_plan::PlanRequest { mode: a.mode.clone(), batch: a.batch, seq: a.seq, net, opts, verify: a.verify || a.verify_fixed, verify_fixed: a.verify_fixed, client_profile, max_mem };
    for (_, mut rep) in graph_plan::plan_graph_nets(&g, &req, &nets)? {
        rep["model"] = serde_json::json!(a.model.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default());
        if a.json {
            println!("{rep}");
        } else {
            graph_plan::print_plan(&rep);
        }
    }
    Ok(())
}

fn inference(r: Result<(), hush_inference::Error>) -> Result<(), String> {
    r.map_err(|e| e.to_string())
}

fn replicated_err(r: Result<(), hush_replicated::Error>) -> Result<(), String> {
    r.map_err(|e| e.to_string())
}

/// How `bench infer` counts each party's peak heap.
const INFER_MEM_METHOD: &str = "counting global allocator: live heap bytes attributed to the allocating party's thread until freed (by any thread), high-water mark above its level at the session's start \
(messages are charged to the sending party; an in-process module runs on its party's thread and is counted); a TCP channel's I/O thread counts for the party whose thread made the channel; module processes and the dealer are not counted";

fn infer_probe() -> hush_inference::runtime::MemProbe {
    hush_inference::runtime::MemProbe { enter: hush_bench::cot::mem::enter, peak: hush_bench::cot::mem::peak, restart_peak: hush_bench::cot::mem::restart_peak, method: INFER_MEM_METHOD }
}

fn emit(r: &Record, json: bool) {
    if json {
        println!("{}", r.json());
    } else {
        print!("{}", r.table());
        println!();
    }
}

fn run(cli: Cli) -> Result<(), String> {
    hush_bench::simd::check_env().map_err(|e| e.to_string())?;
    // every inference client with --max-mem enforces it as measured peak
    hush_inference::runtime::install_mem_probe(infer_probe());
    // a TCP channel's I/O thread counts for the party that made the channel
    hush_transport::set_io_thread_init(hush_bench::cot::mem::current_tag, hush_bench::cot::mem::set_tag);
    match cli.cmd {
        Cmd::Demo(a) => inference(hush_inference::commands::demo_main(a.into())),
        Cmd::DemoCot(a) => demo(a),
        Cmd::Serve(a) => inference(hush_inference::commands::serve_main(a.into())),
        Cmd::Infer(a) => inference(hush_inference::commands::infer_main(a.into())),
        Cmd::Run(a) => inference(hush_inference::commands::run_main(a.into())),
        Cmd::Dealer(a) => inference(hush_inference::commands::dealer_main(a.into())),
        Cmd::Bench(BenchCmd::Infer(a)) => inference(hush_bench::infer::bench_infer_main(a.into(), Some(infer_probe()))),
        Cmd::Import(a) => import(a),
        Cmd::Embed(a) => inference(hush_inference::encoder::embed_main(a.into())),
        Cmd::Plan(a) => inference(plan_main(a)),
        Cmd::Report { inputs, markdown: true, .. } => records_md::markdown_main(&inputs).map(|md| print!("{md}")),
        Cmd::Report { inputs, html, .. } => match inputs.as_slice() {
            [input] => report::report_main(input, html.as_deref()).map(|p| println!("wrote {}", p.display())),
            _ => Err("report: one input file for HTML (several only with --markdown)".into()),
        },
        Cmd::Config { cmd: ConfigCmd::Check { files } } => config::check_main(&files),
        Cmd::Node(a) => replicated_err(replicated::node_main(a)),
        Cmd::Job(a) => replicated_err(replicated::job_main(a)),
        Cmd::Share(a) => replicated_err(replicated::share_main(a)),
        Cmd::Fetch(a) => replicated_err(replicated::fetch_main(a)),
        Cmd::Keygen { out, show } => {
            let fp = match (out, show) {
                (_, Some(dir)) => hush_transport::Identity::load(&dir).map_err(|e| format!("keygen --show: {e}"))?.fingerprint(),
                (Some(dir), None) => hush_transport::peering::keygen(&dir).map_err(|e| format!("keygen: {e}"))?,
                (None, None) => return Err("keygen: give --out DIR (a new identity) or --show DIR (an existing one)".into()),
            };
            println!("fingerprint {fp}");
            Ok(())
        }
        Cmd::Circuit { cmd } => replicated_err(replicated::circuit_main(cmd)),
        Cmd::Train(a) => lr::train_main(a).map_err(|e| e.to_string()),
        Cmd::Predict(a) => lr::predict_main(a).map_err(|e| e.to_string()),
        Cmd::Psi(a) => psi::psi_main(a).map_err(|e| e.to_string()),
        Cmd::Attest(c) => hush_attest::cli::attest_cmd(c),
        Cmd::Bench(BenchCmd::Paillier(a)) => {
            let r = hush_lr::bench::bench_paillier(a.bits, a.iters, a.window).map_err(|e| e.to_string())?;
            emit(&r, a.json);
            Ok(())
        }
        Cmd::Bench(BenchCmd::Lr(a)) => {
            let json = a.json;
            let r = hush_lr::bench::bench_lr(&a.into()).map_err(|e| e.to_string())?;
            emit(&r, json);
            Ok(())
        }
        Cmd::Bench(BenchCmd::Aes3(a)) => replicated_err(replicated::bench_aes3_main(a)),
        Cmd::Bench(BenchCmd::ThreePc(a)) => replicated_err(replicated::bench_3pc_main(a)),
        Cmd::Bench(BenchCmd::Nonlinear(a)) => hush_bench::nonlinear::bench_nonlinear_main(a).map_err(|e| e.to_string()),
        Cmd::Bench(BenchCmd::Deal(a)) => hush_bench::deal::bench_deal(&a).map_err(|e| e.to_string()).map(|rs| rs.iter().for_each(|r| emit(r, a.json))),
        Cmd::Bench(BenchCmd::HeLinear(a)) => hush_bench::he_linear::bench_he_linear_main(a).map_err(|e| e.to_string()),
        Cmd::Bench(BenchCmd::Aes { json, batch, seconds }) => {
            if batch == 0 || !(seconds > 0.0) {
                return Err("--batch and --seconds must be positive".into());
            }
            emit(&hush_bench::aes::bench_aes(batch, seconds), json);
            Ok(())
        }
        Cmd::Bench(BenchCmd::Cot(a)) => {
            let max_mem = match &a.max_mem {
                Some(m) => Some(hush_bench::cot::parse_size(m).map_err(|e| e.to_string())?),
                None => None,
            };
            let client = hush_transport::ClientProfile::by_name(&a.client_profile)
                .ok_or_else(|| format!("--client-profile {}: choose one of {}", a.client_profile, hush_transport::ClientProfile::names().join(", ")))?;
            if a.table {
                if client.name != "none" {
                    return Err("--client-profile applies to single runs, not --table".into());
                }
                let t = Transport::by_name(&a.transport).ok_or("unknown transport (tcp, mem)")?;
                let bar = hush_inference::progress::Bar::new(0, "hush bench cot --table", "runs");
                let mut show = |done: usize, all: usize, cell: &str| {
                    bar.set(done as u64, all as u64);
                    bar.message(cell.to_string());
                };
                let r = hush_bench::cot::cot_table(a.n, max_mem, t, a.seed, a.repeat, &mut show);
                bar.finish();
                let (recs, table) = r.map_err(|e| e.to_string())?;
                if a.json {
                    recs.iter().for_each(|r| println!("{}", r.json()));
                }
                print!("{table}");
                return Ok(());
            }
            let mut cfg = cot_cfg(&a.source, a.n, &a.net, &a.transport, a.seed)?;
            cfg.source.max_mem = max_mem;
            cfg.source.fused = !a.unfused;
            cfg.source.tee = hush_bench::cot::parse_tee(&a.tee).map_err(|e| e.to_string())?;
            for _ in 0..a.repeat.max(1) {
                let r = hush_bench::cot::bench_cot_profiled(&cfg, &client).map_err(|e| e.to_string())?;
                emit(&r, a.json);
            }
            Ok(())
        }
    }
}

fn cot_cfg(source: &str, n: usize, net: &str, transport: &str, seed: Option<u64>) -> Result<CotBench, String> {
    let profile = hush_bench::profile(net).map_err(|e| e.to_string())?;
    let transport = Transport::by_name(transport).ok_or_else(|| format!("unknown transport '{transport}' (tcp, mem)"))?;
    Ok(CotBench { source: SourceConfig::named(source), n, profile, transport, seed, level: None })
}

fn demo(a: DemoArgs) -> Result<(), String> {
    println!("hush demo-cot: two parties in this process over TCP loopback generate {} correlated OTs with IKNP", a.n);
    println!("(semi-honest; base OTs: Chou-Orlandi over Ristretto255; network profile: {})", a.net);
    let cfg = cot_cfg("iknp", a.n, &a.net, "tcp", None)?;
    let r = hush_bench::cot::bench_cot(&cfg).map_err(|e| e.to_string())?;
    let mib = r.f64("bytes") / (1024.0 * 1024.0);
    println!();
    println!("  {:<28} {:>14}", "phase", "value");
    println!("  {:<28} {:>14.3} s", "setup (128 base OTs)", r.f64("setup_s"));
    println!("  {:<28} {:>14.3} s", "extension time (wall)", r.f64("wall_s"));
    println!("  {:<28} {:>14.2} MiB", "bytes (both directions)", mib);
    println!("  {:<28} {:>14}", "rounds (extension)", r.f64("rounds"));
    println!("  {:<28} {:>14.1} bits", "communication per COT", r.f64("bits_per_cot"));
    println!("  {:<28} {:>14.3e}", "COTs per second", r.f64("cots_per_s"));
    println!("  {:<28} {:>14}", "COT relation checked on", format!("{} outputs", r.f64("checked")));
    println!();
    println!("Both parties share this machine's cores; see `hush bench cot --help` for more.");
    Ok(())
}

/// `hush bench ... --report OUT.html`: runs the same benchmark as a child
/// `hush` process with `--json`, passes its output through, and renders it
/// (see [`report`]). None when there is no `--report`.
fn bench_with_report(args: &[std::ffi::OsString]) -> Option<u8> {
    use std::io::{BufRead, Write};
    let pos = args.iter().position(|a| a == "--report" || a.to_str().is_some_and(|s| s.starts_with("--report=")))?;
    let (out, skip) = match args[pos].to_str().and_then(|s| s.strip_prefix("--report=")) {
        Some(p) => (std::path::PathBuf::from(p), 1),
        None => match args.get(pos + 1) {
            Some(p) => (std::path::PathBuf::from(p), 2),
            None => {
                eprintln!("hush: error: --report needs a file (OUT.html)");
                return Some(2);
            }
        },
    };
    let exe = match std::env::current_exe() {
        Ok(e) if e.file_stem().is_some_and(|s| s.to_string_lossy().starts_with("hush")) => e,
        _ => {
            eprintln!("hush: error: --report runs the hush program itself, which this process is not; run `hush bench ... --json > run.json` and `hush report run.json`");
            return Some(2);
        }
    };
    let mut child_args: Vec<std::ffi::OsString> = args[1..pos].to_vec();
    child_args.extend(args[pos + skip..].iter().cloned());
    if !child_args.iter().any(|a| a == "--json") {
        child_args.push("--json".into());
    }
    let mut child = match std::process::Command::new(exe).args(&child_args).stdout(std::process::Stdio::piped()).spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("hush: error: cannot run the benchmark: {e}");
            return Some(1);
        }
    };
    let mut lines = String::new();
    if let Some(so) = child.stdout.take() {
        for line in std::io::BufReader::new(so).lines().map_while(Result::ok) {
            println!("{line}");
            let _ = std::io::stdout().flush();
            lines.push_str(&line);
            lines.push('\n');
        }
    }
    let status = child.wait().map(|s| s.code().unwrap_or(1)).unwrap_or(1);
    if status != 0 {
        return Some(status.clamp(1, 255) as u8);
    }
    let records = match report::read_records(&lines) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hush: error: --report: {e}");
            return Some(1);
        }
    };
    match std::fs::write(&out, report::render(&records, "hush bench")) {
        Ok(()) => {
            eprintln!("hush: wrote {}", out.display());
            Some(0)
        }
        Err(e) => {
            eprintln!("hush: error: {}: {e}", out.display());
            Some(1)
        }
    }
}

/// The connection notice of every command (see `hush_transport::notice`).
fn print_connect_notice(msg: &str) {
    eprintln!("hush: {msg}; --connect-timeout SECS sets the wait");
}

/// Parses `args` and runs the command; the exit status (see
/// `hush_cli::run_with_args`).
pub(crate) fn run_with_args<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    if args.get(1).and_then(|a| a.to_str()) == Some("bench") {
        if let Some(code) = bench_with_report(&args) {
            return code;
        }
    }
    let args = match config::expand_args(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("hush: error: {e}");
            return 2;
        }
    };
    let parsed = help::grouped(<Cli as clap::CommandFactory>::command())
        .try_get_matches_from(args)
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m));
    let cli = match parsed {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return e.exit_code().clamp(0, 255) as u8;
        }
    };
    hush_transport::set_connect_notice(print_connect_notice);
    match run(cli) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("hush: error: {e}");
            1
        }
    }
}
