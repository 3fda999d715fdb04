//! **Test-only evidence. It gives NO hardware protection.**
//!
//! A stand-in for a confidential VM's report so that the wiring of
//! attestation into sessions (a dealer's evidence, a party's policy, the
//! refusal before any correlation is used) runs end to end on machines
//! without SEV-SNP or TDX. The "report" is signed by an Ed25519 *test root*
//! that a test generates ([`TestRootKey::generate`], written to a directory
//! by [`TestRootKey::write_dir`]); whoever holds that directory can sign any
//! measurement, so the evidence proves nothing about hardware. It goes
//! through the same eight legs as real evidence, and:
//! - the default policy refuses it on the root leg, saying it is a test root
//!   ([`REFUSED_BY_POLICY`]);
//! - a policy accepts it only when it names the test root's public key
//!   explicitly (`[test] roots = ["<hex>"]`), and the pass of the root leg
//!   still says "test root ... no hardware protection".
//!
//! Report layout (all fixed size, [`TEST_REPORT_LEN`] bytes):
//!
//! | field        | size | notes                                        |
//! |--------------|------|----------------------------------------------|
//! | magic        | 16   | `b"HUSH-TEST-ONLY01"`                        |
//! | measurement  | 48   | what the test claims was launched            |
//! | report_data  | 64   | [`crate::report_data`]`(TLS SPKI, nonce)`    |
//! | tcb          | 8    | u64 little-endian                            |
//! | debug        | 1    | 0 or 1                                       |
//! | signer       | 32   | the test root's Ed25519 public key           |
//! | signature    | 64   | Ed25519 over [`DOMAIN`] ‖ measurement ‖ report_data ‖ tcb ‖ debug |
//!
//! There is no chain: the test root signs reports itself (the chain leg says
//! so). The signature is checked with `verify_strict` (no malleable or
//! small-order keys).

use crate::evidence::{read_capped, Evidence, EvidenceKind};
use crate::policy::Policy;
use crate::verify::{binding_and_nonce, Leg, Outcome, Verdict, VerifyInput};
use crate::{Error, Result};
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use std::path::Path;

/// First bytes of a test report.
pub const REPORT_MAGIC: &[u8; 16] = b"HUSH-TEST-ONLY01";
/// Domain separation of the signed message.
pub const DOMAIN: &[u8] = b"hush-attest test report v1 (tests only, no hardware protection)";
/// Size of a test report.
pub const TEST_REPORT_LEN: usize = 16 + 48 + 64 + 8 + 1 + 32 + 64;
/// The root leg's failure for test evidence under a policy that names no
/// test root (the default policy among them).
pub const REFUSED_BY_POLICY: &str = "the evidence is signed by a test root (a key generated for tests: no hardware protection); \
this policy names no test root ([test] roots), so it is refused";
/// What anything showing test evidence says.
pub const TEST_NOTE: &str = "TEST evidence from a test root: for tests only, gives no hardware protection";

/// Files of a test root directory.
pub const KEY_FILE: &str = "test-root.key";
pub const PUB_FILE: &str = "test-root.pub";
pub const MEASUREMENT_FILE: &str = "measurement";

/// A parsed test report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestReport {
    pub measurement: [u8; 48],
    pub report_data: [u8; 64],
    pub tcb: u64,
    pub debug: bool,
    pub signer: [u8; 32],
    pub signature: [u8; 64],
}

fn signed_message(measurement: &[u8; 48], report_data: &[u8; 64], tcb: u64, debug: bool) -> Vec<u8> {
    let mut m = Vec::with_capacity(DOMAIN.len() + 48 + 64 + 9);
    m.extend_from_slice(DOMAIN);
    m.extend_from_slice(measurement);
    m.extend_from_slice(report_data);
    m.extend_from_slice(&tcb.to_le_bytes());
    m.push(debug as u8);
    m
}

/// Parse a test report (exact size, magic, debug byte 0 or 1).
pub fn parse(raw: &[u8]) -> Result<TestReport> {
    let bad = |s: String| Error::Format(format!("test report: {s}"));
    if raw.len() != TEST_REPORT_LEN {
        return Err(bad(format!("{} bytes, must be {TEST_REPORT_LEN}", raw.len())));
    }
    if &raw[..16] != REPORT_MAGIC {
        return Err(bad("bad magic".into()));
    }
    let mut at = 16;
    let mut take = |n: usize| {
        let s = &raw[at..at + n];
        at += n;
        s
    };
    let measurement: [u8; 48] = take(48).try_into().expect("sized");
    let report_data: [u8; 64] = take(64).try_into().expect("sized");
    let tcb = u64::from_le_bytes(take(8).try_into().expect("sized"));
    let debug = match take(1)[0] {
        0 => false,
        1 => true,
        d => return Err(bad(format!("debug byte is {d}, must be 0 or 1"))),
    };
    let signer: [u8; 32] = take(32).try_into().expect("sized");
    let signature: [u8; 64] = take(64).try_into().expect("sized");
    Ok(TestReport { measurement, report_data, tcb, debug, signer, signature })
}

/// A test root: an Ed25519 signing key (zeroized on drop). **Tests only.**
pub struct TestRootKey {
    key: SigningKey,
}

impl std::fmt::Debug for TestRootKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TestRootKey({}, tests only)", crate::hex(&self.public()))
    }
}

impl TestRootKey {
    /// A fresh test root from OS randomness.
    pub fn generate() -> Self {
        use rand::RngCore;
        let mut seed = zeroize::Zeroizing::new([0u8; 32]);
        rand::rngs::OsRng.fill_bytes(&mut *seed);
        TestRootKey { key: SigningKey::from_bytes(&seed) }
    }

    /// The public key a policy names in `[test] roots`.
    pub fn public(&self) -> [u8; 32] {
        self.key.verifying_key().to_bytes()
    }

    /// Sign a report claiming `measurement`, `report_data`, `tcb`, `debug`.
    pub fn sign_report(&self, measurement: &[u8; 48], report_data: &[u8; 64], tcb: u64, debug: bool) -> Vec<u8> {
        let sig = self.key.sign(&signed_message(measurement, report_data, tcb, debug));
        let mut r = Vec::with_capacity(TEST_REPORT_LEN);
        r.extend_from_slice(REPORT_MAGIC);
        r.extend_from_slice(measurement);
        r.extend_from_slice(report_data);
        r.extend_from_slice(&tcb.to_le_bytes());
        r.push(debug as u8);
        r.extend_from_slice(&self.public());
        r.extend_from_slice(&sig.to_bytes());
        r
    }

    /// Write the test root to `dir` (created if absent): `test-root.key`
    /// (hex seed, mode 0600), `test-root.pub` (hex public key) and
    /// `measurement` (hex, 48 bytes: what the provider will claim).
    pub fn write_dir(&self, dir: &Path, measurement: &[u8; 48]) -> Result<()> {
        let io = |p: &Path, e: std::io::Error| Error::Io(format!("{}: {e}", p.display()));
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let key_path = dir.join(KEY_FILE);
        let seed = zeroize::Zeroizing::new(crate::hex(&self.key.to_bytes()));
        {
            use std::io::Write;
            let mut o = std::fs::OpenOptions::new();
            o.write(true).create(true).truncate(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                o.mode(0o600);
            }
            let mut f = o.open(&key_path).map_err(|e| io(&key_path, e))?;
            f.write_all(seed.as_bytes()).map_err(|e| io(&key_path, e))?;
        }
        let pub_path = dir.join(PUB_FILE);
        std::fs::write(&pub_path, crate::hex(&self.public())).map_err(|e| io(&pub_path, e))?;
        let m_path = dir.join(MEASUREMENT_FILE);
        std::fs::write(&m_path, crate::hex(measurement)).map_err(|e| io(&m_path, e))?;
        Ok(())
    }

    /// Another handle on the same key (tests that sign several reports
    /// with one root).
    pub fn read_dir_for_test(other: &TestRootKey) -> Self {
        TestRootKey { key: SigningKey::from_bytes(&other.key.to_bytes()) }
    }

    /// Read `dir/test-root.key`.
    pub fn read_dir(dir: &Path) -> Result<Self> {
        let p = dir.join(KEY_FILE);
        let text = zeroize::Zeroizing::new(read_capped(&p, 256)?);
        let s = std::str::from_utf8(&text).map_err(|_| Error::Io(format!("{}: not text", p.display())))?;
        let seed = zeroize::Zeroizing::new(crate::unhex("test root key", s)?);
        let seed: &[u8; 32] = seed.as_slice().try_into().map_err(|_| Error::Io(format!("{}: not a 32-byte key", p.display())))?;
        Ok(TestRootKey { key: SigningKey::from_bytes(seed) })
    }
}

/// The test provider (`hush dealer --attest test:DIR`): signs reports with
/// the test root in DIR, claiming DIR's measurement. **Tests only, no
/// hardware protection.**
#[derive(Debug)]
pub struct TestProvider {
    pub key: TestRootKey,
    pub measurement: [u8; 48],
    pub tcb: u64,
    pub debug: bool,
}

impl TestProvider {
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let key = TestRootKey::read_dir(dir)?;
        let p = dir.join(MEASUREMENT_FILE);
        let text = read_capped(&p, 1024)?;
        let m = crate::unhex("test measurement", std::str::from_utf8(&text).unwrap_or(""))?;
        let measurement = <[u8; 48]>::try_from(m.as_slice())
            .map_err(|_| Error::Io(format!("{}: {} bytes, must be 48", p.display(), m.len())))?;
        Ok(TestProvider { key, measurement, tcb: 0, debug: false })
    }

    /// Evidence binding `spki_der` and `nonce`.
    pub fn get(&self, spki_der: &[u8], nonce: &[u8]) -> Result<Evidence> {
        let rd = crate::report_data(spki_der, nonce);
        let report = self.key.sign_report(&self.measurement, &rd, self.tcb, self.debug);
        Evidence::new(EvidenceKind::Test, nonce.to_vec(), report, Vec::new())
    }
}

pub(crate) fn verify(evidence: &Evidence, policy: &Policy, input: &VerifyInput<'_>) -> Verdict {
    let mut v = Verdict::new(evidence.kind);
    let r = match parse(&evidence.report) {
        Ok(r) => r,
        Err(e) => {
            v.set(Leg::Signature, Outcome::Fail(e.to_string()));
            return v.finish("not checked: the report could not be parsed");
        }
    };
    v.measurement = Some(crate::hex(&r.measurement));
    v.product = Some(format!("test root {} ({TEST_NOTE})", crate::hex(&r.signer)));
    let sig = match VerifyingKey::from_bytes(&r.signer) {
        Err(e) => Outcome::Fail(format!("the signer is not an Ed25519 public key: {e}")),
        Ok(k) => match k.verify_strict(&signed_message(&r.measurement, &r.report_data, r.tcb, r.debug), &Signature::from_bytes(&r.signature)) {
            Ok(()) => Outcome::Pass("Ed25519 signature by the test root verifies (test evidence: no hardware protection)".into()),
            Err(_) => Outcome::Fail("the test report's Ed25519 signature does not verify".into()),
        },
    };
    v.set(Leg::Signature, sig);
    v.set(Leg::Chain, Outcome::Pass("no chain: a test root signs test reports itself".into()));
    v.set(
        Leg::Root,
        if policy.test.roots.contains(&r.signer) {
            Outcome::Pass(format!("signer is the test root {} named by the policy — a key generated for tests: NO hardware protection", crate::hex(&r.signer)))
        } else if policy.test.roots.is_empty() {
            Outcome::Fail(REFUSED_BY_POLICY.into())
        } else {
            Outcome::Fail(format!(
                "the evidence is signed by the test root {}, which is not one of the policy's [test] roots (test roots give no hardware protection)",
                crate::hex(&r.signer)
            ))
        },
    );
    v.set(
        Leg::Tcb,
        if r.tcb >= policy.test.min_tcb {
            Outcome::Pass(format!("test TCB {} >= policy's {}", r.tcb, policy.test.min_tcb))
        } else {
            Outcome::Fail(format!("test TCB {} below the policy's minimum {}", r.tcb, policy.test.min_tcb))
        },
    );
    v.set(
        Leg::Measurement,
        if policy.test.measurements.is_empty() {
            Outcome::Fail("the policy lists no allowed measurement ([test] measurements)".into())
        } else if policy.test.measurements.contains(&r.measurement) {
            Outcome::Pass(format!("measurement {} is allowed", crate::hex(&r.measurement)))
        } else {
            Outcome::Fail(format!("measurement {} is not in the policy", crate::hex(&r.measurement)))
        },
    );
    v.set(
        Leg::Debug,
        match (r.debug, policy.allow_debug) {
            (true, false) => Outcome::Fail("the test report's debug flag is set".into()),
            (true, true) => Outcome::Pass("debug flag set and the policy allows debug".into()),
            (false, _) => Outcome::Pass("debug flag clear".into()),
        },
    );
    let nonce_ok = binding_and_nonce(&mut v, &r.report_data, evidence, input);
    v.set(
        Leg::Freshness,
        match input.nonce {
            None => Outcome::Skipped("no verifier nonce given (offline check): the evidence may be a replay".into()),
            Some(_) if !nonce_ok => Outcome::Fail("the evidence's nonce is not the one this verifier sent".into()),
            Some(_) => Outcome::Pass("nonce matches".into()),
        },
    );
    v.finish("not checked")
}
