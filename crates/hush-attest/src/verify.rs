//! Verification of evidence against a policy, one verdict per leg.
//!
//! Evidence is accepted only when every leg passes ([`Verdict::accepted`]).
//! A leg that could not be checked (no TLS key or nonce given, as in an
//! offline `hush attest verify`) is `Skipped` with the reason, and a verdict
//! with a skipped leg is not accepted.

use crate::evidence::{Evidence, EvidenceKind};
use crate::policy::Policy;
use serde::Serialize;

/// The legs of a verification, in the order they are reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Leg {
    /// The report is well formed and its signature verifies under the endorsement key.
    Signature,
    /// The endorsement key's certificate chains to a root (VCEK/VLEK <- ASK <- ARK; PCK <- Intel root).
    Chain,
    /// That root is a pinned vendor root of a product the policy allows.
    Root,
    /// The TCB is at least the policy's (and matches the endorsement certificate).
    Tcb,
    /// The launch measurement is one the policy allows.
    Measurement,
    /// REPORT_DATA = SHA-512(TLS SPKI || nonce) for the presented key.
    ReportDataBinding,
    /// The guest is not debuggable (unless the policy allows it).
    Debug,
    /// The verifier's nonce is in the evidence; certificates and collateral are current.
    Freshness,
}

impl Leg {
    pub const ALL: [Leg; 8] = [
        Leg::Signature,
        Leg::Chain,
        Leg::Root,
        Leg::Tcb,
        Leg::Measurement,
        Leg::ReportDataBinding,
        Leg::Debug,
        Leg::Freshness,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Leg::Signature => "signature",
            Leg::Chain => "chain",
            Leg::Root => "root",
            Leg::Tcb => "tcb",
            Leg::Measurement => "measurement",
            Leg::ReportDataBinding => "report-data-binding",
            Leg::Debug => "debug",
            Leg::Freshness => "freshness",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", content = "detail", rename_all = "lowercase")]
pub enum Outcome {
    Pass(String),
    Fail(String),
    Skipped(String),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LegResult {
    pub leg: Leg,
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// The result of verifying one piece of evidence.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    pub kind: &'static str,
    /// The product (SNP) or TEE type (TDX) the evidence was identified as.
    pub product: Option<String>,
    /// The launch measurement (SNP MEASUREMENT, TDX MRTD), hex.
    pub measurement: Option<String>,
    pub report_data: Option<String>,
    pub legs: Vec<LegResult>,
}

impl Verdict {
    pub fn accepted(&self) -> bool {
        self.legs.len() == Leg::ALL.len() && self.legs.iter().all(|l| matches!(l.outcome, Outcome::Pass(_)))
    }
    pub fn outcome(&self, leg: Leg) -> &Outcome {
        &self.legs.iter().find(|l| l.leg == leg).expect("every leg is reported").outcome
    }
    /// The first leg that failed, if any.
    pub fn failed(&self) -> Option<(Leg, &str)> {
        self.legs.iter().find_map(|l| match &l.outcome {
            Outcome::Fail(s) => Some((l.leg, s.as_str())),
            _ => None,
        })
    }
    pub(crate) fn new(kind: EvidenceKind) -> Self {
        Verdict { kind: kind.name(), product: None, measurement: None, report_data: None, legs: Vec::new() }
    }
    pub(crate) fn set(&mut self, leg: Leg, outcome: Outcome) {
        self.legs.retain(|l| l.leg != leg);
        self.legs.push(LegResult { leg, outcome });
    }
    /// Every leg not yet set is skipped for `why`; legs are put in report order.
    pub(crate) fn finish(mut self, why: &str) -> Self {
        for leg in Leg::ALL {
            if !self.legs.iter().any(|l| l.leg == leg) {
                self.legs.push(LegResult { leg, outcome: Outcome::Skipped(why.to_string()) });
            }
        }
        self.legs.sort_by_key(|l| Leg::ALL.iter().position(|x| *x == l.leg));
        self
    }
}

/// A root a test generated, trusted in addition to the pinned vendor roots.
/// Only tests build one; no policy file can name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestRoot {
    /// Name shown in the verdict; always says it is a test root.
    pub name: String,
    pub ark_der: Vec<u8>,
    pub ask_der: Vec<u8>,
}

/// What a verifier knows beside the evidence.
#[derive(Clone, Debug, Default)]
pub struct VerifyInput<'a> {
    /// DER SubjectPublicKeyInfo of the TLS certificate the peer presented.
    /// `None` (offline check): the binding leg is skipped.
    pub tls_spki: Option<&'a [u8]>,
    /// The nonce this verifier sent. `None`: freshness is skipped.
    pub nonce: Option<&'a [u8]>,
    /// Endorsement certificate (DER) to use when the evidence carries none.
    pub vek_der: Option<&'a [u8]>,
    /// Unix seconds at which certificates and collateral must be valid.
    pub now: u64,
    /// Roots generated by tests (see [`crate::testing`]); empty in production.
    pub test_roots: Vec<TestRoot>,
}

/// Verify `evidence` against `policy`. Never panics on hostile evidence: the
/// third-party parsers run under `catch_unwind` as a last line of defence and
/// a panic there becomes a failed signature leg.
pub fn verify(evidence: &Evidence, policy: &Policy, input: &VerifyInput<'_>) -> Verdict {
    let mut v = Verdict::new(evidence.kind);
    if !policy.kinds.contains(&evidence.kind) {
        let why = match evidence.kind {
            EvidenceKind::Test => crate::test_evidence::REFUSED_BY_POLICY.to_string(),
            k => format!("policy does not accept {} evidence", k.name()),
        };
        v.set(Leg::Root, Outcome::Fail(why));
        return v.finish("not checked: evidence kind refused");
    }
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match evidence.kind {
        EvidenceKind::SevSnp => crate::snp::verify(evidence, policy, input),
        EvidenceKind::Tdx => crate::tdx::verify(evidence, policy, input),
        EvidenceKind::Test => crate::test_evidence::verify(evidence, policy, input),
    }));
    match r {
        Ok(v) => v,
        Err(_) => {
            let mut v = Verdict::new(evidence.kind);
            v.set(Leg::Signature, Outcome::Fail("a report parser panicked on this evidence".into()));
            v.finish("not checked: the report could not be parsed")
        }
    }
}

/// The binding and nonce legs, shared by SNP and TDX.
pub(crate) fn binding_and_nonce(v: &mut Verdict, carried: &[u8; 64], evidence: &Evidence, input: &VerifyInput<'_>) -> bool {
    v.report_data = Some(crate::hex(carried));
    let binding = match input.tls_spki {
        None => Outcome::Skipped("no TLS key given: REPORT_DATA not compared".into()),
        Some(spki) => {
            let want = crate::report_data(spki, &evidence.nonce);
            if &want == carried {
                Outcome::Pass("REPORT_DATA = SHA-512(TLS SPKI || nonce)".into())
            } else {
                Outcome::Fail("REPORT_DATA does not bind the presented TLS key and nonce".into())
            }
        }
    };
    v.set(Leg::ReportDataBinding, binding);
    match input.nonce {
        None => false,
        Some(n) => n == evidence.nonce.as_slice(),
    }
}
