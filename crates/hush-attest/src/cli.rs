//! `hush attest verify`: check evidence offline and print each leg.
//!
//! ```text
//! hush attest verify --evidence FILE [--vcek FILE] [--policy FILE] [--json]
//!                    [--tls-spki FILE | --tls-cert FILE] [--nonce HEX] [--at UNIX_SECONDS]
//! ```
//!
//! `--evidence` takes hush evidence (the format of [`crate::evidence`]), or a
//! raw 1184-byte SEV-SNP report (binary or hex, as `snpguest report` writes
//! it) whose VCEK is then given with `--vcek` (DER). `--tls-spki` (a DER
//! SubjectPublicKeyInfo) and `--nonce` enable the binding and freshness legs;
//! without them those legs are reported as skipped and the evidence is not
//! accepted. `--at` checks certificate and collateral validity at another
//! time than now (for evidence recorded earlier).
//!
//! Exit status: 0 every leg passed; 1 a leg failed; 2 no leg failed but some
//! were skipped; 64 bad usage or unreadable input.

use crate::evidence::{read_capped, Evidence, EvidenceKind, MAX_EVIDENCE, SNP_REPORT_LEN};
use crate::policy::Policy;
use crate::verify::{verify, Outcome, Verdict, VerifyInput};
use crate::{Error, Result};
use std::io::Write;
use std::path::PathBuf;

pub const USAGE: &str = "usage: hush attest verify --evidence FILE [--vcek FILE] [--policy FILE] [--json] \
[--tls-spki FILE | --tls-cert FILE] [--nonce HEX] [--at UNIX_SECONDS]";

#[derive(Clone, Debug, Default)]
pub struct VerifyOptions {
    pub evidence: PathBuf,
    pub vcek: Option<PathBuf>,
    pub policy: Option<PathBuf>,
    pub json: bool,
    pub tls_spki: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub nonce: Option<Vec<u8>>,
    pub at: Option<u64>,
}

impl VerifyOptions {
    /// Parse the arguments after `hush attest verify`.
    pub fn parse(args: &[String]) -> Result<Self> {
        let mut o = VerifyOptions::default();
        let mut evidence = None;
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut val = |name: &str| {
                it.next().cloned().ok_or_else(|| Error::Io(format!("{name} needs a value\n{USAGE}")))
            };
            match a.as_str() {
                "--evidence" => evidence = Some(PathBuf::from(val("--evidence")?)),
                "--vcek" => o.vcek = Some(PathBuf::from(val("--vcek")?)),
                "--policy" | "--attest-policy" => o.policy = Some(PathBuf::from(val("--policy")?)),
                "--tls-spki" => o.tls_spki = Some(PathBuf::from(val("--tls-spki")?)),
                "--tls-cert" => o.tls_cert = Some(PathBuf::from(val("--tls-cert")?)),
                "--nonce" => o.nonce = Some(crate::unhex("--nonce", &val("--nonce")?)?),
                "--at" => {
                    let s = val("--at")?;
                    o.at = Some(s.parse().map_err(|_| Error::Io(format!("--at {s:?}: not unix seconds")))?)
                }
                "--json" => o.json = true,
                other => return Err(Error::Io(format!("unknown argument {other:?}\n{USAGE}"))),
            }
        }
        o.evidence = evidence.ok_or_else(|| Error::Io(format!("--evidence is required\n{USAGE}")))?;
        Ok(o)
    }
}

/// Read evidence: hush format, or a raw SNP report (binary or hex).
pub fn load_evidence(path: &std::path::Path) -> Result<Evidence> {
    let bytes = read_capped(path, MAX_EVIDENCE)?;
    if bytes.starts_with(crate::evidence::MAGIC) {
        return Evidence::decode(&bytes);
    }
    if bytes.len() == SNP_REPORT_LEN {
        return Evidence::new(EvidenceKind::SevSnp, Vec::new(), bytes, Vec::new());
    }
    if let Ok(text) = std::str::from_utf8(&bytes) {
        if let Ok(raw) = crate::unhex("report", text) {
            if raw.len() == SNP_REPORT_LEN {
                return Evidence::new(EvidenceKind::SevSnp, Vec::new(), raw, Vec::new());
            }
        }
    }
    Err(Error::Format(format!(
        "{}: neither hush evidence (magic HATT) nor a {SNP_REPORT_LEN}-byte SEV-SNP report (binary or hex)",
        path.display()
    )))
}

/// Run a verification and print it; returns the verdict.
pub fn run(o: &VerifyOptions, out: &mut dyn Write) -> Result<Verdict> {
    let evidence = load_evidence(&o.evidence)?;
    let policy = match &o.policy {
        Some(p) => Policy::read_file(p)?,
        None => Policy::default(),
    };
    let vek = o.vcek.as_ref().map(|p| read_capped(p, crate::evidence::MAX_CERT_LEN)).transpose()?;
    let spki = match (&o.tls_spki, &o.tls_cert) {
        (Some(_), Some(_)) => return Err(Error::Io("give --tls-spki or --tls-cert, not both".into())),
        (Some(p), None) => Some(read_capped(p, 64 * 1024)?),
        (None, Some(p)) => Some(crate::spki_of_certificate(&read_capped(p, 64 * 1024)?)?),
        (None, None) => None,
    };
    let now = o.at.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
    });
    let input = VerifyInput {
        tls_spki: spki.as_deref(),
        nonce: o.nonce.as_deref(),
        vek_der: vek.as_deref(),
        now,
        test_roots: Vec::new(),
    };
    let v = verify(&evidence, &policy, &input);
    print_verdict(&v, o.json, out).map_err(|e| Error::Io(e.to_string()))?;
    Ok(v)
}

pub fn print_verdict(v: &Verdict, json: bool, out: &mut dyn Write) -> std::io::Result<()> {
    let status = status(v);
    if json {
        let mut j = serde_json::to_value(v).map_err(std::io::Error::other)?;
        j["verdict"] = serde_json::Value::from(status);
        writeln!(out, "{j}")?;
        return Ok(());
    }
    writeln!(out, "evidence:    {}{}", v.kind, v.product.as_ref().map(|p| format!(" ({p})")).unwrap_or_default())?;
    if let Some(m) = &v.measurement {
        writeln!(out, "measurement: {m}")?;
    }
    if let Some(r) = &v.report_data {
        writeln!(out, "report_data: {r}")?;
    }
    for l in &v.legs {
        let (tag, d) = match &l.outcome {
            Outcome::Pass(d) => ("pass", d),
            Outcome::Fail(d) => ("FAIL", d),
            Outcome::Skipped(d) => ("skip", d),
        };
        writeln!(out, "  {tag}  {:<20} {d}", l.leg.name())?;
    }
    writeln!(out, "verdict:     {status}")?;
    Ok(())
}

fn status(v: &Verdict) -> &'static str {
    if v.accepted() {
        "accepted"
    } else if v.failed().is_some() {
        "refused"
    } else {
        "incomplete"
    }
}

/// `hush attest <args>`: the entry point the CLI dispatches to. Returns the
/// process exit status.
pub fn attest_main(args: &[String]) -> i32 {
    match args.first().map(String::as_str) {
        Some("verify") => verify_main(&args[1..]),
        _ => {
            eprintln!("{USAGE}");
            64
        }
    }
}

/// `hush attest verify <args>`. Returns the process exit status.
pub fn verify_main(args: &[String]) -> i32 {
    let o = match VerifyOptions::parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("hush attest verify: {e}");
            return 64;
        }
    };
    let mut stdout = std::io::stdout().lock();
    match run(&o, &mut stdout) {
        Ok(v) if v.accepted() => 0,
        Ok(v) if v.failed().is_some() => 1,
        Ok(_) => 2,
        Err(e) => {
            eprintln!("hush attest verify: {e}");
            64
        }
    }
}

/// `hush attest ...` as clap subcommands (what `hush` dispatches to).
#[derive(clap::Subcommand, Debug)]
pub enum AttestCmd {
    /// Check evidence offline and print each leg (signature, chain, root,
    /// TCB, measurement, report-data binding, debug, freshness). Exit status:
    /// 0 every leg passed, 1 a leg failed, 2 none failed but some were skipped.
    Verify(VerifyArgs),
}

#[derive(clap::Args, Debug)]
pub struct VerifyArgs {
    /// hush evidence (what a dealer or module serves), or a raw 1184-byte
    /// SEV-SNP report (binary or hex, as `snpguest report` writes it).
    #[arg(long, value_name = "FILE")]
    pub evidence: PathBuf,
    /// The VCEK (DER) when the evidence carries no certificate table.
    #[arg(long, value_name = "FILE")]
    pub vcek: Option<PathBuf>,
    /// The attestation policy (TOML; see docs/attestation.md). Default:
    /// pinned vendor roots, debug forbidden, and no allowed measurement.
    #[arg(long, visible_alias = "attest-policy", value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// One JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// DER SubjectPublicKeyInfo of the TLS key the evidence must bind.
    #[arg(long, value_name = "FILE")]
    pub tls_spki: Option<PathBuf>,
    /// The TLS certificate (PEM or DER, e.g. a hush identity.crt) whose key the evidence must bind.
    #[arg(long, value_name = "FILE", conflicts_with = "tls_spki")]
    pub tls_cert: Option<PathBuf>,
    /// The nonce (hex) the verifier sent.
    #[arg(long, value_name = "HEX")]
    pub nonce: Option<String>,
    /// Check certificate and collateral validity at this time (unix seconds) instead of now.
    #[arg(long, value_name = "UNIX_SECONDS")]
    pub at: Option<u64>,
}

/// Run `hush attest <cmd>`: `Ok` when accepted; `Err` naming the failed leg
/// when refused; exits with status 2 when no leg failed but some were skipped.
pub fn attest_cmd(cmd: AttestCmd) -> std::result::Result<(), String> {
    let AttestCmd::Verify(a) = cmd;
    let o = VerifyOptions {
        evidence: a.evidence,
        vcek: a.vcek,
        policy: a.policy,
        json: a.json,
        tls_spki: a.tls_spki,
        tls_cert: a.tls_cert,
        nonce: a.nonce.map(|n| crate::unhex("--nonce", &n)).transpose().map_err(|e| e.to_string())?,
        at: a.at,
    };
    let v = run(&o, &mut std::io::stdout().lock()).map_err(|e| format!("attest verify: {e}"))?;
    if v.accepted() {
        return Ok(());
    }
    if let Some((leg, why)) = v.failed() {
        return Err(format!("attest verify: refused on the {} leg: {why}", leg.name()));
    }
    eprintln!("hush attest verify: not accepted: some legs were skipped (give --tls-spki and --nonce to check binding and freshness)");
    std::process::exit(2)
}
