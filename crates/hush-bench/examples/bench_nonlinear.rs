//! Runs `hush bench nonlinear` without the CLI: `cargo run --release -p
//! hush-bench --example bench_nonlinear -- --op relu --proto tami --net mobile`.
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: hush_bench::nonlinear::NonlinearArgs,
}

fn main() {
    let c = Cli::parse();
    if let Err(e) = hush_bench::nonlinear::bench_nonlinear_main(c.args) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
