//! The `hush` binary: everything is in the library (`hush_cli`), which the
//! Python package's `hush` console command calls too.

fn main() -> std::process::ExitCode {
    hush_cli::main()
}
