//! Hardware attestation of hush's trusted module and dealer running in a
//! confidential VM (AMD SEV-SNP, Intel TDX), bound to the TLS key the peer
//! presents. See `docs/attestation.md` for the deployment recipe and for what
//! the evidence proves and does not prove.
//!
//! Layers:
//! - [`evidence`]: the versioned, length-prefixed evidence format a dealer or
//!   module serves (the raw report or quote, its certificate table or
//!   collateral, and the verifier's nonce). Every length is checked against a
//!   cap and the remaining input before anything is allocated.
//! - [`provider`]: obtains a report from the kernel through configfs-tsm
//!   (`/sys/kernel/config/tsm/report`), with a configurable root so tests can
//!   point it at a fake tree.
//! - [`policy`]: the operator's policy file (`--attest-policy FILE.toml`).
//! - [`verify`]: verification with the field's own libraries (`sev` for
//!   SNP, `dcap-qvl` for TDX) producing one verdict per leg
//!   ([`Leg`]: signature, chain, root, TCB, measurement, report-data binding,
//!   debug, freshness).
//! - [`cli`]: `hush attest verify`.
//! - [`test_evidence`]: **tests only, no hardware protection** — evidence
//!   signed by an Ed25519 test root a test generates, verified through the
//!   same legs; the default policy refuses it, naming it as a test root.
//! - [`provider::Source`]: what `hush dealer --attest snp|tdx|test:DIR`
//!   obtains evidence from.
//!
//! The report binds the TLS key through REPORT_DATA, computed by
//! [`report_data`]: `SHA-512(SPKI_DER || nonce)` where `SPKI_DER` is the DER
//! encoding of the TLS certificate's `SubjectPublicKeyInfo` (the whole
//! SEQUENCE, tag and length included) and `nonce` the verifier's nonce bytes
//! as carried in the evidence (0..=64 bytes; hush uses 32). DER is
//! self-delimiting, so the concatenation is unambiguous.
//!
//! hush's simulated trusted module (`hush-tee`) is not attested hardware and
//! gives no hardware protection; this crate is what makes a module or dealer
//! in a real confidential VM checkable.

pub mod cli;
pub mod evidence;
pub mod policy;
pub mod provider;
mod snp;
mod tdx;
pub mod test_evidence;
pub mod verify;

use sha2::{Digest, Sha512};

pub use evidence::{Evidence, EvidenceKind};
pub use policy::Policy;
pub use verify::{verify, Leg, LegResult, Outcome, Verdict, VerifyInput};

/// Errors of this crate outside verification verdicts (I/O, malformed input).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("malformed evidence: {0}")]
    Format(String),
    #[error("configfs-tsm provider: {0}")]
    Provider(String),
    #[error("policy file: {0}")]
    Policy(String),
    #[error("not implemented: {0}")]
    NotImplemented(String),
    #[error("{0}")]
    Io(String),
}

pub type Result<T> = std::result::Result<T, Error>;

/// The 64 bytes a report must carry in REPORT_DATA to bind `spki_der` (the
/// DER `SubjectPublicKeyInfo` of the TLS certificate) and `nonce`:
/// `SHA-512(spki_der || nonce)`.
pub fn report_data(spki_der: &[u8], nonce: &[u8]) -> [u8; 64] {
    let mut h = Sha512::new();
    h.update(spki_der);
    h.update(nonce);
    h.finalize().into()
}

/// The DER `SubjectPublicKeyInfo` of a TLS certificate given as DER or PEM
/// (e.g. a hush `identity.crt`, or the end-entity certificate rustls
/// reports for a peer): what [`report_data`] hashes.
pub fn spki_of_certificate(cert: &[u8]) -> Result<Vec<u8>> {
    use x509_cert::der::{Decode, DecodePem, Encode};
    let c = if cert.starts_with(b"-----BEGIN") {
        x509_cert::Certificate::from_pem(cert)
    } else {
        x509_cert::Certificate::from_der(cert)
    }
    .map_err(|e| Error::Format(format!("TLS certificate: {e}")))?;
    c.tbs_certificate
        .subject_public_key_info
        .to_der()
        .map_err(|e| Error::Format(format!("TLS certificate's SubjectPublicKeyInfo: {e}")))
}

/// Lower-case hex, for measurements and report data in output.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parse hex (whitespace ignored). Errors name what was being parsed.
pub fn unhex(what: &str, s: &str) -> Result<Vec<u8>> {
    let clean: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if clean.len() % 2 != 0 {
        return Err(Error::Format(format!("{what}: odd number of hex digits")));
    }
    let nib = |c: u8| -> Result<u8> {
        match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(Error::Format(format!("{what}: not a hex digit: {:?}", c as char))),
        }
    };
    clean
        .chunks(2)
        .map(|p| Ok(nib(p[0])? << 4 | nib(p[1])?))
        .collect()
}
