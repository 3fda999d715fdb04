//! Attestation behind a verifier interface.
//!
//! A real deployment would use a hardware quote (SGX DCAP, TDX) binding the
//! module's measurement to the key-exchange public key. hush has no such
//! hardware here, so the only backend is **simulated — gives no hardware
//! protection**: the "signature" is a keyed hash under a *public* constant
//! platform key, so anyone can forge a report. It exists so that the
//! protocol flow, the binding of the report to the handshake and the
//! failure paths are real and testable, and a real [`Verifier`] can be
//! slotted in later.

use crate::{Error, Result, SIMULATED_NOTE};
use sha2::{Digest, Sha256};

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
