//! The trusted module as its own process (`hush-tee-module`): reads
//! length-prefixed requests on stdin, answers on stdout, exits (erasing its
//! state) at end of input. It serves every two-party dealing kind
//! ([`crate::deal::kinds`]), which is why it lives here rather than in
//! `hush-tee`.
//!
//! [`module_main`] is the whole program, shared by the `hush-tee-module`
//! binary and the Python package's `hush-tee-module` console command.
//!
//! **Attestation.** Without `--attest` the module's attestation is
//! simulated — gives no hardware protection — and a peer party with
//! `--module-attest POLICY` refuses it. With `--attest snp|tdx` (the module
//! running inside an AMD SEV-SNP or Intel TDX confidential VM) it answers
//! a peer's evidence request with a report from configfs-tsm whose
//! REPORT_DATA is `SHA-512(SPKI of its own X25519 handshake key ‖ the peer's
//! nonce)` (see `hush_tee::handshake`, "Hardware attestation", for the
//! exchange and why the evidence cannot be carried to another key).
//! `--attest test:DIR` gives test-only evidence signed by a test root (**no
//! hardware protection**; refused by the default policy). `--attest-tsm
//! DIR` points at another configfs-tsm report directory (a fake tree in
//! tests); `--attest-collateral FILE` is the TDX collateral served beside
//! each quote. The module obtains evidence once at start, so a module that
//! cannot attest fails at once rather than at its first session.
//!
//! The flags go on the module's own command line, in the VM: the host that
//! talks to it over the pipe cannot change how it attests. A host reaches a
//! module in a VM through `HUSH_TEE_MODULE`, naming a program that connects
//! the pipe to it (see docs/attestation.md).
//!
//! `--insecure-test-seed` (tests only, never passed by a `hush` command)
//! lets the host install a fixed session seed (`Request::InsecureTestSeed`)
//! so providers can be compared bit for bit; a host that picks the seed
//! knows the peer's shares.

use hush_tee::attest::EvidenceSource;
use hush_tee::backend::{read_frame, write_frame};
use hush_tee::Module;
use std::io::{BufReader, BufWriter};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The module's evidence hook over `src`: each request gets evidence
/// binding the SPKI the module passes (its own handshake key) and the
/// peer's nonce. One report at a time (configfs-tsm's entry is shared by
/// the process).
pub fn evidence_source(src: hush_attest::provider::Source) -> EvidenceSource {
    let src = Mutex::new(src);
    Arc::new(move |spki: &[u8], nonce: &[u8]| {
        let s = src.lock().map_err(|_| "evidence source lock poisoned".to_string())?;
        s.get(spki, nonce).map(|e| e.encode()).map_err(|e| e.to_string())
    })
}

/// The parsed command line.
#[derive(Default)]
struct Args {
    insecure_test_seed: bool,
    attest: Option<String>,
    attest_tsm: Option<PathBuf>,
    attest_collateral: Option<PathBuf>,
}

const USAGE: &str = "usage: hush-tee-module [--attest snp|tdx|test:DIR] [--attest-tsm DIR] [--attest-collateral FILE]";

fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
    let mut a = Args::default();
    let mut it = args.into_iter();
    while let Some(x) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value ({USAGE})"));
        match x.as_str() {
            "--insecure-test-seed" => a.insecure_test_seed = true,
            "--attest" => a.attest = Some(value("--attest")?),
            "--attest-tsm" => a.attest_tsm = Some(PathBuf::from(value("--attest-tsm")?)),
            "--attest-collateral" => a.attest_collateral = Some(PathBuf::from(value("--attest-collateral")?)),
            "-h" | "--help" => return Err(USAGE.to_string()),
            o => return Err(format!("unknown argument {o:?} ({USAGE})")),
        }
    }
    if a.attest.is_none() && (a.attest_tsm.is_some() || a.attest_collateral.is_some()) {
        return Err("--attest-tsm and --attest-collateral need --attest".into());
    }
    Ok(a)
}

/// The evidence source `--attest` names, checked once now (with a
/// throw-away key and a zero nonce) so a module that cannot attest fails
/// at start.
fn attestation(a: &Args) -> Result<Option<EvidenceSource>, String> {
    let Some(spec) = &a.attest else { return Ok(None) };
    let src = hush_attest::provider::Source::from_flag(spec, a.attest_tsm.as_deref(), a.attest_collateral.as_deref()).map_err(|e| format!("--attest: {e}"))?;
    let probe = hush_tee::attest::x25519_spki(&[0x11; 32]);
    src.get(&probe, &[0u8; 32]).map_err(|e| format!("--attest {spec}: no evidence at start: {e}"))?;
    if let hush_attest::provider::Source::Test(_) = src {
        eprintln!("hush-tee-module: WARNING: {} — never use --attest test:DIR in a deployment", hush_attest::test_evidence::TEST_NOTE);
    }
    eprintln!("hush-tee-module: attestation: {} (REPORT_DATA = SHA-512(handshake key SPKI || peer's nonce))", src.describe());
    Ok(Some(evidence_source(src)))
}

/// Serves module requests on stdin/stdout until end of input. `args` are the
/// command-line arguments after the program name. Returns the exit status
/// (0 at end of input or when the host stops reading, 2 on a malformed
/// frame or a module that cannot attest, 64 on a bad command line).
pub fn module_main<I: IntoIterator<Item = String>>(args: I) -> i32 {
    let args = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("hush-tee-module: {e}");
            return 64;
        }
    };
    let mut module = Module::new().with_kinds(crate::deal::kinds());
    match attestation(&args) {
        Ok(Some(src)) => module = module.with_evidence(src),
        Ok(None) => eprintln!("hush-tee-module: attestation {} (no --attest: a peer with --module-attest refuses this module)", hush_tee::SIMULATED_NOTE),
        Err(e) => {
            eprintln!("hush-tee-module: {e}");
            return 2;
        }
    }
    if args.insecure_test_seed {
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
