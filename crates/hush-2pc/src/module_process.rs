//! The trusted module as its own process (`hush-tee-module`): reads
//! length-prefixed requests on stdin, answers on stdout, exits (erasing its
//! state) at end of input. It serves every two-party dealing kind
//! ([`crate::deal::kinds`]), which is why it lives here rather than in
//! `hush-tee`. Attestation is simulated — gives no hardware protection.
//!
//! [`module_main`] is the whole program, shared by the `hush-tee-module`
//! binary and the Python package's `hush-tee-module` console command.
//!
//! `--insecure-test-seed` (tests only, never passed by a `hush` command)
//! lets the host install a fixed session seed (`Request::InsecureTestSeed`)
//! so providers can be compared bit for bit; a host that picks the seed
//! knows the peer's shares.

use hush_tee::backend::{read_frame, write_frame};
use hush_tee::Module;
use std::io::{BufReader, BufWriter};

/// Serves module requests on stdin/stdout until end of input. `args` are the
/// command-line arguments after the program name. Returns the exit status
/// (0 at end of input or when the host stops reading, 2 on a malformed
/// frame).
pub fn module_main<I: IntoIterator<Item = String>>(args: I) -> i32 {
    eprintln!("hush-tee-module: attestation {}", hush_tee::SIMULATED_NOTE);
    let mut module = Module::new().with_kinds(crate::deal::kinds());
    if args.into_iter().any(|a| a == "--insecure-test-seed") {
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
                    return 0;
                }
            }
            Ok(None) => return 0,
            Err(e) => {
                eprintln!("hush-tee-module: {e}");
                return 2;
            }
        }
    }
}
