//! `hush-inference`: the private-inference subcommands on their own (the
//! `hush` binary mounts the same entry points). Useful for scripts and tests.

use clap::{Parser, Subcommand};
use hush_inference::cli;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "hush-inference", version, about = "Private two-party inference in tee mode (module attestation simulated — gives no hardware protection)")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve a model to many concurrent clients.
    Serve(cli::ServeArgs),
    /// Private inference against a server.
    Infer(cli::InferArgs),
    /// Both parties in this process (or --exec reference|float).
    Run(cli::RunArgs),
    /// Private inference of bundled MNIST samples on the bundled model.
    Demo(cli::DemoArgs),
    /// Online/offline costs of a benchmark model.
    Bench(cli::BenchInferArgs),
}

fn main() -> ExitCode {
    let r = match Cli::parse().cmd {
        Cmd::Serve(a) => cli::serve_main(a),
        Cmd::Infer(a) => cli::infer_main(a),
        Cmd::Run(a) => cli::run_main(a),
        Cmd::Demo(a) => cli::demo_main(a),
        Cmd::Bench(a) => cli::bench_infer_main(a, None),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hush-inference: {e}");
            ExitCode::FAILURE
        }
    }
}
