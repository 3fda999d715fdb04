//! Attestation of the module: the simulated report in every module hello,
//! and the hook through which a module in a confidential VM gives hardware
//! evidence for its handshake key.
//!
//! **The simulated report** ([`SimulatedAttester`], [`SimulatedVerifier`])
//! is in every module hello and checked by the peer module. It is
//! **simulated — gives no hardware protection**: the "signature" is a keyed
//! hash under a *public* constant platform key, so anyone can forge a
//! report. It exists so that the protocol flow, the binding of the report
//! to the handshake and the failure paths are real and testable.
//!
//! **Hardware evidence** ([`EvidenceSource`], `hush-tee-module --attest
//! snp|tdx`): the module asks configfs-tsm (through `hush-attest`) for a
//! report whose REPORT_DATA is `SHA-512(x25519_spki(K) ‖ nonce)`, `K` being
//! the X25519 public key of **its own** handshake and `nonce` the peer
//! party's nonce. The peer *party* (its host, not its module) verifies it
//! against its `--module-attest` policy before the handshake completes; see
//! [`crate::handshake`] ("Hardware attestation") for the exchange and the
//! security argument. The module computes REPORT_DATA itself from its own
//! key, so its host cannot obtain evidence binding any other key.

use crate::{Error, Result, SIMULATED_NOTE};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// A module's hardware evidence source (`hush-tee-module --attest`): given
/// the DER SubjectPublicKeyInfo of the module's handshake key
/// ([`x25519_spki`]) and the peer's nonce, the encoded evidence (the
/// `hush-attest` format) whose REPORT_DATA is `SHA-512(spki ‖ nonce)`, or
/// why none could be made. Only the module calls it, with its own key.
pub type EvidenceSource = Arc<dyn Fn(&[u8], &[u8]) -> std::result::Result<Vec<u8>, String> + Send + Sync>;

/// The DER prefix of an X25519 SubjectPublicKeyInfo (RFC 8410 §4: SEQUENCE
/// { SEQUENCE { OID 1.3.101.110 }, BIT STRING (32 bytes) }).
const X25519_SPKI_PREFIX: [u8; 12] = [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x6e, 0x03, 0x21, 0x00];

/// The DER SubjectPublicKeyInfo of an X25519 public key (RFC 8410): what a
/// module's hardware evidence binds, the way a dealer's binds its TLS
/// certificate's SPKI. DER is self-delimiting, so `spki ‖ nonce` is
/// unambiguous.
pub fn x25519_spki(public: &[u8; 32]) -> [u8; 44] {
    let mut out = [0u8; 44];
    out[..12].copy_from_slice(&X25519_SPKI_PREFIX);
    out[12..].copy_from_slice(public);
    out
}

/// Size of an encoded [`Report`].
pub const REPORT_LEN: usize = 96;

/// An attestation report: the module's code measurement and 32 bytes of
/// report data (a hash binding the handshake message), plus a signature.
#[derive(Clone, PartialEq, Eq)]
pub struct Report {
    pub measurement: [u8; 32],
    pub report_data: [u8; 32],
    pub signature: [u8; 32],
}

impl std::fmt::Debug for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Report({SIMULATED_NOTE}; measurement {:02x?}..)", &self.measurement[..4])
    }
}

impl Report {
    pub fn to_bytes(&self) -> [u8; REPORT_LEN] {
        let mut out = [0u8; REPORT_LEN];
        out[..32].copy_from_slice(&self.measurement);
        out[32..64].copy_from_slice(&self.report_data);
        out[64..].copy_from_slice(&self.signature);
        out
    }
    pub fn from_bytes(b: &[u8]) -> Result<Self> {
        if b.len() != REPORT_LEN {
            return Err(Error::Attestation(format!("report of {} bytes, expected {REPORT_LEN}", b.len())));
        }
        let mut r = Report { measurement: [0; 32], report_data: [0; 32], signature: [0; 32] };
        r.measurement.copy_from_slice(&b[..32]);
        r.report_data.copy_from_slice(&b[32..64]);
        r.signature.copy_from_slice(&b[64..]);
        Ok(r)
    }
}

/// Produces reports for this module.
pub trait Attester: Send {
    fn attest(&self, report_data: [u8; 32]) -> Report;
    /// Human-readable name, shown in logs and benchmark records.
    fn describe(&self) -> &'static str;
}

/// Checks a peer module's report.
pub trait Verifier: Send {
    /// Ok if `report` is genuine, from the expected module code, and binds
    /// `expected_data`.
    fn verify(&self, report: &Report, expected_data: &[u8; 32]) -> Result<()>;
    fn describe(&self) -> &'static str;
}

/// The code measurement of this module version (simulated: a hash of the
/// crate name and version rather than of the enclave pages).
pub fn module_measurement() -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"hush-tee module measurement (simulated)");
    h.update(env!("CARGO_PKG_VERSION").as_bytes());
    h.finalize().into()
}

/// The public "platform key" of the simulation. Public, hence no protection.
const SIM_PLATFORM_KEY: &[u8] = b"hush-tee simulated platform key - public - gives no hardware protection";

fn sim_sign(measurement: &[u8; 32], data: &[u8; 32]) -> [u8; 32] {
    crate::handshake::hmac(SIM_PLATFORM_KEY, &[measurement, data])
}

/// Simulated attester — gives no hardware protection.
#[derive(Default)]
pub struct SimulatedAttester;

impl Attester for SimulatedAttester {
    fn attest(&self, report_data: [u8; 32]) -> Report {
        let measurement = module_measurement();
        let signature = sim_sign(&measurement, &report_data);
        Report { measurement, report_data, signature }
    }
    fn describe(&self) -> &'static str {
        "simulated attester (simulated — gives no hardware protection)"
    }
}

impl std::fmt::Debug for SimulatedAttester {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SimulatedAttester({SIMULATED_NOTE})")
    }
}
impl std::fmt::Display for SimulatedAttester {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.describe())
    }
}

/// Simulated verifier — gives no hardware protection: it accepts any report
/// made with the public simulation key for the expected measurement.
pub struct SimulatedVerifier {
    pub expected_measurement: [u8; 32],
}

impl Default for SimulatedVerifier {
    fn default() -> Self {
        SimulatedVerifier { expected_measurement: module_measurement() }
    }
}

impl Verifier for SimulatedVerifier {
    fn verify(&self, report: &Report, expected_data: &[u8; 32]) -> Result<()> {
        if report.measurement != self.expected_measurement {
            return Err(Error::Attestation("unexpected module measurement".into()));
        }
        if !crate::handshake::ct_eq(&report.report_data, expected_data) {
            return Err(Error::Attestation("report does not bind this handshake message".into()));
        }
        let sig = sim_sign(&report.measurement, &report.report_data);
        if !crate::handshake::ct_eq(&sig, &report.signature) {
            return Err(Error::Attestation("bad report signature".into()));
        }
        Ok(())
    }
    fn describe(&self) -> &'static str {
        "simulated verifier (simulated — gives no hardware protection)"
    }
}

impl std::fmt::Debug for SimulatedVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SimulatedVerifier({SIMULATED_NOTE})")
    }
}
impl std::fmt::Display for SimulatedVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.describe())
    }
}
