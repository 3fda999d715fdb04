//! The trusted module as its own process: reads length-prefixed requests on
//! stdin, answers on stdout, exits (erasing its state) at end of input.
//! Attestation is simulated — gives no hardware protection.

use hush_tee::backend::{read_frame, write_frame};
use hush_tee::Module;
use std::io::{BufReader, BufWriter};

fn main() {
    eprintln!("hush-tee-module: attestation {}", hush_tee::SIMULATED_NOTE);
    let mut module = Module::new();
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
