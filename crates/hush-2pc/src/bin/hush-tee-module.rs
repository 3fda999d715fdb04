//! The trusted module as its own process; see `hush_2pc::module_process`.
//! Attestation is simulated — gives no hardware protection.

fn main() {
    let code = hush_2pc::module_process::module_main(std::env::args().skip(1));
    if code != 0 {
        std::process::exit(code);
    }
}
