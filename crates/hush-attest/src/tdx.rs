//! Intel TDX verification with `dcap-qvl`: quote parsing, the quote's
//! signature by the attestation key, the QE report, the PCK chain to Intel's
//! SGX root (pinned inside dcap-qvl), TCB info and QE identity with their
//! signatures, CRLs and validity windows — all offline, from the collateral
//! carried in the evidence (dcap-qvl's `QuoteCollateralV3` JSON).
//!
//! dcap-qvl performs signature, chain, root and collateral validity as one
//! call that returns one error; when it fails, the failure is reported on the
//! signature leg with dcap-qvl's message, and chain and root are marked as
//! checked by that same step. The policy legs (TCB status, MRTD/RTMRs,
//! debug, binding, nonce, collateral age) are then checked here on the
//! verified report. dcap-qvl is asked to allow debug TDs so that a debug TD
//! is refused on the debug leg, by name, rather than inside dcap-qvl.

use crate::evidence::Evidence;
use crate::policy::Policy;
use crate::verify::{binding_and_nonce, Leg, Outcome, Verdict, VerifyInput};
use crate::{Error, Result};

/// REPORT_DATA of a TD quote (for the provider's self-check).
pub(crate) fn report_data(quote: &[u8]) -> Result<[u8; 64]> {
    let q = dcap_qvl::quote::Quote::parse(quote).map_err(|e| Error::Format(format!("TDX quote: {e}")))?;
    q.report
        .as_td10()
        .map(|r| r.report_data)
        .ok_or_else(|| Error::Format("the quote is an SGX enclave quote, not a TD quote".into()))
}

/// Unix seconds of an RFC 3339 UTC timestamp `YYYY-MM-DDTHH:MM:SS[.fff]Z`.
fn rfc3339(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' || !s.ends_with('Z') {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<u16>().ok();
    let dt = x509_cert::der::DateTime::new(n(0..4)?, n(5..7)? as u8, n(8..10)? as u8, n(11..13)? as u8, n(14..16)? as u8, n(17..19)? as u8).ok()?;
    Some(dt.unix_duration().as_secs())
}

fn issue_date(json: &str) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    rfc3339(v.get("issueDate")?.as_str()?)
}

pub(crate) fn verify(evidence: &Evidence, policy: &Policy, input: &VerifyInput<'_>) -> Verdict {
    let mut v = Verdict::new(evidence.kind);
    let collateral: dcap_qvl::QuoteCollateralV3 = match serde_json::from_slice(&evidence.aux) {
        Ok(c) => c,
        Err(e) => {
            v.set(Leg::Chain, Outcome::Fail(format!("TDX collateral (QuoteCollateralV3 JSON): {e}")));
            return v.finish("not checked: no usable collateral");
        }
    };
    let verifier = dcap_qvl::verify::QuoteVerifier::new_prod().allow_debug(true);
    let verified = match verifier.verify(&evidence.report, &collateral, input.now) {
        Ok(r) => r,
        Err(e) => {
            v.set(Leg::Signature, Outcome::Fail(format!("dcap-qvl: {e:#}")));
            let why = "not checked: dcap-qvl checks signature, PCK chain, root and collateral validity in one step, which failed";
            v.set(Leg::Chain, Outcome::Skipped(why.into()));
            v.set(Leg::Root, Outcome::Skipped(why.into()));
            return v.finish("not checked: the quote did not verify");
        }
    };
    let Some(td) = verified.report.as_td10() else {
        v.set(Leg::Signature, Outcome::Fail("an SGX enclave quote, not a TD quote".into()));
        return v.finish("not checked: not a TD quote");
    };
    v.product = Some("Intel TDX".into());
    v.measurement = Some(crate::hex(&td.mr_td));
    v.set(Leg::Signature, Outcome::Pass("quote and QE report signatures verify (dcap-qvl)".into()));
    v.set(Leg::Chain, Outcome::Pass("PCK chain, TCB info and QE identity signatures verify (dcap-qvl)".into()));
    v.set(Leg::Root, Outcome::Pass("Intel SGX Root CA, pinned in dcap-qvl".into()));

    let status = verified.status.clone();
    v.set(
        Leg::Tcb,
        if policy.tdx.tcb_statuses.iter().any(|s| s == &status) {
            Outcome::Pass(format!("TCB status {status} is allowed"))
        } else {
            Outcome::Fail(format!(
                "TCB status {status} is not in the policy's {:?} (advisories: {})",
                policy.tdx.tcb_statuses,
                verified.advisory_ids.join(", ")
            ))
        },
    );

    let mut meas = Vec::new();
    if policy.tdx.mrtd.is_empty() {
        meas.push("the policy lists no allowed MRTD".to_string());
    } else if !policy.tdx.mrtd.contains(&td.mr_td) {
        meas.push(format!("MRTD {} is not in the policy", crate::hex(&td.mr_td)));
    }
    let rtmrs = [&td.rt_mr0, &td.rt_mr1, &td.rt_mr2, &td.rt_mr3];
    for (i, allowed) in policy.tdx.rtmr.iter().enumerate() {
        if let Some(a) = allowed {
            if !a.contains(rtmrs[i]) {
                meas.push(format!("RTMR{i} {} is not in the policy", crate::hex(rtmrs[i])));
            }
        }
    }
    v.set(
        Leg::Measurement,
        if meas.is_empty() {
            Outcome::Pass(format!("MRTD {} is allowed", crate::hex(&td.mr_td)))
        } else {
            Outcome::Fail(meas.join("; "))
        },
    );

    let debug = td.td_attributes[0] & 1 == 1;
    v.set(
        Leg::Debug,
        match (debug, policy.allow_debug) {
            (true, false) => Outcome::Fail("TD_ATTRIBUTES.DEBUG is set: the host can read and change TD memory".into()),
            (true, true) => Outcome::Pass("TD_ATTRIBUTES.DEBUG is set and the policy allows debug".into()),
            (false, _) => Outcome::Pass("TD_ATTRIBUTES.DEBUG is clear".into()),
        },
    );

    let nonce_ok = binding_and_nonce(&mut v, &td.report_data, evidence, input);
    let max_age = policy.tdx.collateral_max_age_days.saturating_mul(86_400);
    let issued = [issue_date(&collateral.tcb_info), issue_date(&collateral.qe_identity)];
    let fresh = if issued.iter().any(|d| d.is_none()) {
        Outcome::Fail("the collateral's issueDate cannot be read".into())
    } else if let Some(old) = issued.iter().flatten().find(|&&d| input.now.saturating_sub(d) > max_age) {
        Outcome::Fail(format!(
            "collateral issued at {old} is older than the policy's {} days at {}",
            policy.tdx.collateral_max_age_days, input.now
        ))
    } else {
        match input.nonce {
            None => Outcome::Skipped("no verifier nonce given (offline check): the evidence may be a replay".into()),
            Some(_) if !nonce_ok => Outcome::Fail("the evidence's nonce is not the one this verifier sent".into()),
            Some(_) => Outcome::Pass("nonce matches; collateral within the policy's age".into()),
        }
    };
    v.set(Leg::Freshness, fresh);
    v.finish("not checked")
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc3339_parses_and_refuses() {
        assert_eq!(super::rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(super::rfc3339("2025-06-19T10:16:03Z"), Some(1_750_328_163));
        assert_eq!(super::rfc3339("2025-06-19 10:16:03"), None);
        assert_eq!(super::rfc3339("2025-13-19T10:16:03Z"), None);
    }
}
