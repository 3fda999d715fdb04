//! The trusted module as its own process; see `hush_2pc::module_process`.
//! Without `--attest` its attestation is simulated — gives no hardware
//! protection; `--attest snp|tdx` gives configfs-tsm evidence in a
//! confidential VM.

fn main() {
    hush_deal::retain_freed_memory();
    let code = hush_2pc::module_process::module_main(std::env::args().skip(1));
    if code != 0 {
        std::process::exit(code);
    }
}
