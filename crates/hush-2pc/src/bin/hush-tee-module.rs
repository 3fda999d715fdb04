//! The trusted module as its own process: reads length-prefixed requests on
//! stdin, answers on stdout, exits (erasing its state) at end of input.
//! It serves every two-party dealing kind (`hush_2pc::deal::kinds`), which
//! is why it is built here rather than in `hush-tee`.
//! Attestation is simulated — gives no hardware protection.
//!
//! `--insecure-test-seed` (tests only, never passed by a `hush` command)
//! lets the host install a fixed session seed (`Request::InsecureTestSeed`)
//! so providers can be compared bit for bit; a host that picks the seed
//! knows the peer's shares.

use hush_tee::backend::{read_frame, write_frame};
use hush_tee::Module;
use std::io::{BufReader, BufWriter};

fn main() {
    eprintln!("hush-tee-module: attestation {}", hush_tee::SIMULATED_NOTE);
    let mut module = Module::new().with_kinds(hush_2pc::deal::kinds());
    if std::env::args().skip(1).any(|a| a == "--insecure-test-seed") {
        eprintln!("hush-tee-module: INSECURE test mode: the host may fix the session seed (tests only)");
        module = module.insecure_test_mode();
    }
    let mut input = BufReader::new(std::io::stdin().lock());
    let mut output = BufWriter::new(std::io::stdout().lock());
    loop {
        match read_frame(&mut input) {
            Ok(Some(req)) => {
                let resp = module.handle_bytes(&req);
                if write_frame(&mut output, &resp).is_err() {
                    break;
                }
            }
            Ok(None) => break,
            Err(e) => {
                eprintln!("hush-tee-module: {e}");
                std::process::exit(2);
            }
        }
    }
}
