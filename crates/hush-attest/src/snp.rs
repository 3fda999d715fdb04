//! AMD SEV-SNP verification with the `sev` crate.
//!
//! Report parsing and the ECDSA P-384 report signature, the RSA-PSS chain
//! VCEK/VLEK <- ASK (ASVK for a VLEK) <- ARK, and the pinned ARK/ASK of
//! Milan, Genoa and Turin all come from `sev`. This module adds what `sev`
//! leaves to the caller (AMD SEV-SNP ABI spec 56860 §7.3, VCEK spec 57230 §3):
//! - the report must re-encode to the exact bytes received: `sev` checks the
//!   signature over its own re-encoding of the parsed fields, with reserved
//!   bytes written as zero. `sev` 8 refuses non-zero reserved bytes when
//!   parsing; this check stands behind that, so that a byte the parser
//!   drops or normalises can never escape the signature;
//! - the key named by KEY_INFO.SIGNING_KEY must be the one the table carries;
//! - the ARK must equal a pinned root (byte for byte), not just be self-signed;
//! - the VCEK's TCB extensions (blSPL, teeSPL, snpSPL, ucodeSPL, fmcSPL) must
//!   equal REPORTED_TCB and its hwID the report's CHIP_ID, so a key certified
//!   for an older TCB cannot vouch for a report claiming a newer one.

use crate::evidence::{parse_cert_table, EndorsementKey, Evidence};
use crate::policy::{Policy, Product};
use crate::verify::{binding_and_nonce, Leg, Outcome, Verdict, VerifyInput};
use crate::{Error, Result};
use sev::certs::snp::{ca, Certificate, Chain, Verifiable};
use sev::firmware::guest::AttestationReport;
use sev::parser::ByteParser;
use x509_cert::der::Decode;

/// Parse a raw report with `sev`, refusing a report that does not re-encode
/// to the same bytes (see the module comment).
pub(crate) fn parse_report(raw: &[u8]) -> Result<AttestationReport> {
    if raw.len() != crate::evidence::SNP_REPORT_LEN {
        return Err(Error::Format(format!("SEV-SNP report of {} bytes, must be {}", raw.len(), crate::evidence::SNP_REPORT_LEN)));
    }
    let parsed = std::panic::catch_unwind(|| AttestationReport::from_bytes(raw))
        .map_err(|_| Error::Format("the sev crate panicked parsing the report".into()))?
        .map_err(|e| Error::Format(format!("SEV-SNP report: {e}")))?;
    Ok(parsed)
}

fn canonical(report: &AttestationReport, raw: &[u8]) -> std::result::Result<(), String> {
    let again = report.to_bytes().map_err(|e| format!("report does not re-encode: {e}"))?;
    if again.as_slice() != raw {
        let at = again.iter().zip(raw).position(|(a, b)| a != b).unwrap_or(0);
        return Err(format!(
            "report is not canonical at byte {at:#x} (a reserved or unknown field is not zero): the signature check would not cover it"
        ));
    }
    Ok(())
}

fn pinned(p: Product) -> std::io::Result<ca::Chain> {
    use sev::certs::snp::builtin::{genoa, milan, turin};
    Ok(match p {
        Product::Milan => ca::Chain { ark: milan::ark()?, ask: milan::ask()? },
        Product::Genoa => ca::Chain { ark: genoa::ark()?, ask: genoa::ask()? },
        Product::Turin => ca::Chain { ark: turin::ark()?, ask: turin::ask()? },
    })
}

fn der(c: &Certificate) -> Vec<u8> {
    c.to_der().unwrap_or_default()
}

/// AMD's VCEK/VLEK extensions (spec 57230 table 8).
struct VekExt {
    tcb: [Option<u8>; 5], // bootloader, tee, snp, microcode, fmc
    hwid: Option<Vec<u8>>,
    not_before: u64,
    not_after: u64,
}

fn vek_extensions(vek_der: &[u8]) -> std::result::Result<VekExt, String> {
    let cert = x509_cert::Certificate::from_der(vek_der).map_err(|e| format!("endorsement certificate: {e}"))?;
    let mut out = VekExt {
        tcb: [None; 5],
        hwid: None,
        not_before: cert.tbs_certificate.validity.not_before.to_unix_duration().as_secs(),
        not_after: cert.tbs_certificate.validity.not_after.to_unix_duration().as_secs(),
    };
    const BASE: &str = "1.3.6.1.4.1.3704.1.";
    for ext in cert.tbs_certificate.extensions.iter().flatten() {
        let oid = ext.extn_id.to_string();
        let val = ext.extn_value.as_bytes();
        let Some(rest) = oid.strip_prefix(BASE) else { continue };
        let slot = match rest {
            "3.1" => 0,
            "3.2" => 1,
            "3.3" => 2,
            "3.8" => 3,
            "3.9" => 4,
            "4" => {
                out.hwid = Some(val.to_vec());
                continue;
            }
            _ => continue,
        };
        // DER INTEGER 0..=255: 02 01 vv, or 02 02 00 vv.
        let n = match val {
            [2, 1, v] if *v < 0x80 => *v,
            [2, 2, 0, v] if *v >= 0x80 => *v,
            _ => return Err(format!("extension {oid} is not an SPL integer 0..=255")),
        };
        out.tcb[slot] = Some(n);
    }
    Ok(out)
}

pub(crate) fn verify(evidence: &Evidence, policy: &Policy, input: &VerifyInput<'_>) -> Verdict {
    let mut v = Verdict::new(evidence.kind);
    let raw = &evidence.report;
    let report = match parse_report(raw) {
        Ok(r) => r,
        Err(e) => {
            v.set(Leg::Signature, Outcome::Fail(e.to_string()));
            return v.finish("not checked: the report could not be parsed");
        }
    };
    v.measurement = Some(crate::hex(&report.measurement));

    // The certificate table, or a VCEK from a file.
    let table = if evidence.aux.is_empty() {
        match input.vek_der {
            Some(d) => Ok(crate::evidence::CertTable { vek_kind: EndorsementKey::Vcek, vek: d.to_vec(), ask: None, ark: None }),
            None => Err(Error::Format("the evidence carries no certificate table and no VCEK file was given".into())),
        }
    } else {
        parse_cert_table(&evidence.aux)
    };
    let table = match table {
        Ok(t) => t,
        Err(e) => {
            v.set(Leg::Chain, Outcome::Fail(e.to_string()));
            report_legs(&mut v, &report, evidence, policy, input, None, None);
            return v.finish("not checked: no usable endorsement certificate");
        }
    };
    let vek = match Certificate::from_der(&table.vek) {
        Ok(c) => c,
        Err(e) => {
            v.set(Leg::Chain, Outcome::Fail(format!("endorsement certificate: {e}")));
            report_legs(&mut v, &report, evidence, policy, input, None, None);
            return v.finish("not checked: no usable endorsement certificate");
        }
    };

    // Signature: canonical bytes, the key KEY_INFO names, the ECDSA signature.
    let signing_key = report.key_info.signing_key();
    let sig = if report.sig_algo != 1 {
        Outcome::Fail(format!("SIGNATURE_ALGO is {}, not 1 (ECDSA P-384 with SHA-384)", report.sig_algo))
    } else if report.key_info.mask_chip_key() {
        Outcome::Fail("MASK_CHIP_KEY is set: the firmware did not sign this report".into())
    } else if let Err(e) = canonical(&report, raw) {
        Outcome::Fail(e)
    } else if !matches!((signing_key, table.vek_kind), (0, EndorsementKey::Vcek) | (1, EndorsementKey::Vlek)) {
        Outcome::Fail(format!("KEY_INFO.SIGNING_KEY is {signing_key} but the table carries a {}", table.vek_kind))
    } else {
        match (&vek, &report).verify() {
            Ok(()) => Outcome::Pass(format!("ECDSA P-384 signature verifies under the {}", table.vek_kind)),
            Err(e) => Outcome::Fail(format!("report signature: {e}")),
        }
    };
    v.set(Leg::Signature, sig);

    // Chain and root. Candidates: each product the policy allows, with the
    // evidence's ASK/ARK where it carries them, the pinned ones otherwise;
    // then the test roots (never in production).
    let vlek_refused = table.vek_kind == EndorsementKey::Vlek && !policy.snp.allow_vlek;
    let mut chain_ok: Option<(String, bool)> = None; // (root name, root pinned and allowed)
    let mut errors = Vec::new();
    let mut candidates: Vec<(String, Certificate, Certificate, bool)> = Vec::new();
    for p in Product::ALL {
        let Ok(pin) = pinned(p) else { continue };
        let ark = match &table.ark {
            Some(d) => match Certificate::from_der(d) {
                Ok(c) => c,
                Err(e) => {
                    errors.push(format!("ARK in the table: {e}"));
                    break;
                }
            },
            None => pin.ark.clone(),
        };
        let ask = match &table.ask {
            Some(d) => match Certificate::from_der(d) {
                Ok(c) => c,
                Err(e) => {
                    errors.push(format!("ASK in the table: {e}"));
                    break;
                }
            },
            None => pin.ask.clone(),
        };
        let is_pinned = der(&ark) == der(&pin.ark);
        let name = if is_pinned { p.name().to_string() } else { "an ARK from the evidence that is not a pinned AMD root".to_string() };
        candidates.push((name, ark, ask, is_pinned && policy.snp.products.contains(&p)));
    }
    for t in &input.test_roots {
        if let (Ok(ark), Ok(ask)) = (Certificate::from_der(&t.ark_der), Certificate::from_der(&t.ask_der)) {
            let ark_use = match &table.ark {
                Some(d) => Certificate::from_der(d).unwrap_or(ark.clone()),
                None => ark.clone(),
            };
            let ask_use = match &table.ask {
                Some(d) => Certificate::from_der(d).unwrap_or(ask),
                None => ask,
            };
            let ok = der(&ark_use) == t.ark_der;
            candidates.push((t.name.clone(), ark_use, ask_use, ok));
        }
    }
    for (name, ark, ask, trusted) in &candidates {
        let chain = Chain { ca: ca::Chain { ark: ark.clone(), ask: ask.clone() }, vek: vek.clone() };
        match (&chain).verify() {
            Ok(_) => {
                if chain_ok.as_ref().is_none_or(|(_, t)| !t) {
                    chain_ok = Some((name.clone(), *trusted));
                }
            }
            Err(e) => errors.push(format!("{name}: {e}")),
        }
    }
    match &chain_ok {
        Some((name, trusted)) => {
            v.set(Leg::Chain, Outcome::Pass(format!("{} <- ASK <- ARK verifies ({name})", table.vek_kind)));
            v.product = Some(name.clone());
            let root = if vlek_refused {
                Outcome::Fail("the report is signed by a VLEK and the policy does not allow VLEKs".into())
            } else if *trusted {
                Outcome::Pass(format!("ARK is the pinned AMD root for {name}"))
            } else if Product::ALL.iter().any(|p| p.name() == name) {
                Outcome::Fail(format!("the chain ends at the pinned {name} ARK, but the policy does not allow {name}"))
            } else {
                Outcome::Fail(format!("the chain ends at {name}, which the policy does not trust"))
            };
            v.set(Leg::Root, root);
        }
        None => {
            v.set(Leg::Chain, Outcome::Fail(format!("no chain VEK <- ASK <- ARK verifies: {}", errors.join("; "))));
            let any_pinned = candidates.iter().any(|c| c.3);
            v.set(
                Leg::Root,
                if any_pinned {
                    Outcome::Skipped("not checked: the chain does not verify".into())
                } else {
                    Outcome::Fail("the table's ARK is not a pinned AMD root of an allowed product".into())
                },
            );
        }
    }

    let ext = vek_extensions(&table.vek);
    report_legs(&mut v, &report, evidence, policy, input, Some(table.vek_kind), ext.as_ref().ok());
    if let Err(e) = ext {
        v.set(Leg::Tcb, Outcome::Fail(e));
    }
    v.finish("not checked")
}

/// The legs that read only the report (and the VEK's extensions when known).
fn report_legs(
    v: &mut Verdict,
    report: &AttestationReport,
    evidence: &Evidence,
    policy: &Policy,
    input: &VerifyInput<'_>,
    vek_kind: Option<EndorsementKey>,
    ext: Option<&VekExt>,
) {
    let t = report.reported_tcb;
    let m = policy.snp.min_tcb;
    let tcb_str = format!(
        "bootloader {} tee {} snp {} microcode {}{}",
        t.bootloader,
        t.tee,
        t.snp,
        t.microcode,
        t.fmc.map(|f| format!(" fmc {f}")).unwrap_or_default()
    );
    let mut low = Vec::new();
    for (name, have, min) in [
        ("bootloader", t.bootloader, m.bootloader),
        ("tee", t.tee, m.tee),
        ("snp", t.snp, m.snp),
        ("microcode", t.microcode, m.microcode),
    ] {
        if have < min {
            low.push(format!("{name} {have} < {min}"));
        }
    }
    if let Some(f) = t.fmc {
        if f < m.fmc {
            low.push(format!("fmc {f} < {}", m.fmc));
        }
    }
    let tcb = if !low.is_empty() {
        Outcome::Fail(format!("REPORTED_TCB below the policy's minimum: {}", low.join(", ")))
    } else if let Some(ext) = ext {
        let want = [Some(t.bootloader), Some(t.tee), Some(t.snp), Some(t.microcode), t.fmc];
        let names = ["blSPL", "teeSPL", "snpSPL", "ucodeSPL", "fmcSPL"];
        let mut mism = Vec::new();
        for i in 0..5 {
            if i == 4 && want[4].is_none() && ext.tcb[4].is_none() {
                continue;
            }
            if ext.tcb[i] != want[i] {
                mism.push(format!("{} {:?} vs report {:?}", names[i], ext.tcb[i], want[i]));
            }
        }
        let hw = match (vek_kind, &ext.hwid) {
            (Some(EndorsementKey::Vcek), Some(h)) if h.as_slice() != report.chip_id.as_slice() => {
                Some("the VCEK's hwID is not the report's CHIP_ID".to_string())
            }
            (Some(EndorsementKey::Vcek), None) => Some("the VCEK carries no hwID".to_string()),
            _ => None,
        };
        if !mism.is_empty() {
            Outcome::Fail(format!("the endorsement certificate is for another TCB: {}", mism.join(", ")))
        } else if let Some(h) = hw {
            Outcome::Fail(h)
        } else {
            Outcome::Pass(format!("REPORTED_TCB {tcb_str} >= policy; endorsement certificate matches"))
        }
    } else {
        Outcome::Skipped(format!("REPORTED_TCB {tcb_str} >= policy; endorsement certificate not readable"))
    };
    v.set(Leg::Tcb, tcb);

    let meas = if policy.snp.measurements.is_empty() {
        Outcome::Fail("the policy lists no allowed measurement".into())
    } else if policy.snp.measurements.iter().any(|a| a == &report.measurement) {
        Outcome::Pass(format!("MEASUREMENT {} is allowed", crate::hex(&report.measurement)))
    } else {
        Outcome::Fail(format!("MEASUREMENT {} is not in the policy", crate::hex(&report.measurement)))
    };
    v.set(Leg::Measurement, meas);

    let debug = if report.policy.debug_allowed() && !policy.allow_debug {
        Outcome::Fail("guest POLICY.DEBUG is set: the host can read and change guest memory".into())
    } else if report.policy.debug_allowed() {
        Outcome::Pass("guest POLICY.DEBUG is set and the policy allows debug".into())
    } else {
        Outcome::Pass("guest POLICY.DEBUG is clear".into())
    };
    v.set(Leg::Debug, debug);

    let nonce_ok = binding_and_nonce(v, &report.report_data, evidence, input);
    let fresh = match (input.nonce, ext) {
        (_, Some(e)) if input.now < e.not_before || input.now > e.not_after => Outcome::Fail(format!(
            "the endorsement certificate is not valid at {} (valid {}..{})",
            input.now, e.not_before, e.not_after
        )),
        (None, _) => Outcome::Skipped("no verifier nonce given (offline check): the evidence may be a replay".into()),
        (Some(_), _) if !nonce_ok => Outcome::Fail("the evidence's nonce is not the one this verifier sent".into()),
        (Some(_), Some(_)) => Outcome::Pass("nonce matches; endorsement certificate valid now".into()),
        (Some(_), None) => Outcome::Skipped("nonce matches; endorsement certificate not readable".into()),
    };
    v.set(Leg::Freshness, fresh);
}
