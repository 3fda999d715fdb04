//! `hush3`: the crate's stand-alone front end (the same subcommands the
//! `hush` binary mounts): `node`, `job`, `circuit run|info`, `bench aes3`.
use clap::{Parser, Subcommand};
use hush_replicated::cli;

#[derive(Parser)]
#[command(name = "hush3", about = "Three-party replicated secret sharing (Araki et al.)")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one compute party.
    Node(cli::NodeArgs),
    /// Share inputs, run a job on three nodes, reconstruct the output.
    Job(cli::JobArgs),
    /// Data owner: upload shares of a named input (stored encrypted at the nodes).
    Share(cli::ShareArgs),
    /// Output party: collect and reconstruct a job's stored result.
    Fetch(cli::FetchArgs),
    /// Circuits: run all three parties in this process, or inspect.
    Circuit {
        #[command(subcommand)]
        cmd: cli::CircuitCmd,
    },
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        cmd: BenchCmd,
    },
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Secure AES-128 throughput with three node processes.
    Aes3(cli::BenchAes3Args),
    /// AES/s by threads per node, beside Araki et al. Table I.
    #[command(name = "3pc")]
    ThreePc(cli::Bench3pcArgs),
}

fn main() {
    let r = match Cli::parse().cmd {
        Cmd::Node(a) => cli::node_main(a),
        Cmd::Job(a) => cli::job_main(a),
        Cmd::Circuit { cmd } => cli::circuit_main(cmd),
        Cmd::Bench { cmd: BenchCmd::Aes3(a) } => cli::bench_aes3_main(a),
        Cmd::Bench { cmd: BenchCmd::ThreePc(a) } => cli::bench_3pc_main(a),
        Cmd::Share(a) => cli::share_main(a),
        Cmd::Fetch(a) => cli::fetch_main(a),
    };
    if let Err(e) = r {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
