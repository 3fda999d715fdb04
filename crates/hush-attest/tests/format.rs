//! Hostile evidence bytes, certificate tables, policy files: clear errors, no panics.

mod common;
use common::*;
use hush_attest::evidence::{encode_cert_table, parse_cert_table, EndorsementKey, Evidence, EvidenceKind, MAX_AUX};
use hush_attest::policy::Policy;
use hush_attest::Error;
use sev::firmware::host::CertType;

fn err(r: Result<impl std::fmt::Debug, Error>) -> String {
    match r {
        Ok(v) => panic!("accepted: {v:?}"),
        Err(e) => e.to_string(),
    }
}

fn sample() -> Vec<u8> {
    let (ask, ark) = milan_ask_ark();
    let table = encode_cert_table(&[(CertType::VCEK, MILAN_VCEK), (CertType::ASK, &ask), (CertType::ARK, &ark)]);
    Evidence::new(EvidenceKind::SevSnp, vec![3; 32], milan_report(), table).unwrap().encode()
}

#[test]
fn every_truncation_is_a_clear_error() {
    let bytes = sample();
    for n in 0..bytes.len() {
        let e = err(Evidence::decode(&bytes[..n]));
        assert!(e.contains("malformed evidence"), "{n}: {e}");
    }
    assert!(Evidence::decode(&bytes).is_ok());
}

#[test]
fn bad_header_fields_are_named() {
    let good = sample();
    let mut b = good.clone();
    b[0] = b'X';
    assert!(err(Evidence::decode(&b)).contains("magic"));
    let mut b = good.clone();
    b[4] = 2;
    assert!(err(Evidence::decode(&b)).contains("unsupported evidence version 2"));
    let mut b = good.clone();
    b[6] = 9;
    assert!(err(Evidence::decode(&b)).contains("unknown evidence kind 9"));
    let mut b = good.clone();
    b[7] = 1;
    assert!(err(Evidence::decode(&b)).contains("reserved"));
    let mut b = good.clone();
    b[8] = 65;
    assert!(err(Evidence::decode(&b)).contains("nonce of 65 bytes"));
    let mut b = good.clone();
    b.push(0);
    assert!(err(Evidence::decode(&b)).contains("trailing"));
    // SNP report length other than 1184.
    let mut b = good.clone();
    b[9 + 32..9 + 36].copy_from_slice(&1183u32.to_le_bytes());
    assert!(err(Evidence::decode(&b)).contains("must be 1184"));
}

#[test]
fn oversized_lengths_are_refused_before_allocation() {
    let good = sample();
    // aux length claims 4 GiB: refused on the cap, not by trying to allocate.
    let aux_at = 9 + 32 + 4 + 1184;
    let mut b = good.clone();
    b[aux_at..aux_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(err(Evidence::decode(&b)).contains("more than"));
    let mut b = good.clone();
    b[aux_at..aux_at + 4].copy_from_slice(&((MAX_AUX + 1) as u32).to_le_bytes());
    assert!(err(Evidence::decode(&b)).contains("more than"));
    // TDX quote length over the cap.
    let tdx = Evidence::new(EvidenceKind::Tdx, vec![], vec![0; 100], vec![]).unwrap().encode();
    let mut b = tdx.clone();
    b[9..13].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(err(Evidence::decode(&b)).contains("TDX quote of"));
    // A whole buffer over the evidence cap.
    assert!(err(Evidence::decode(&vec![0; hush_attest::evidence::MAX_EVIDENCE + 1])).contains("more than"));
    assert!(Evidence::new(EvidenceKind::SevSnp, vec![0; 65], milan_report(), vec![]).is_err());
}

#[test]
fn cert_tables_with_extra_or_missing_entries_are_refused() {
    let (ask, ark) = milan_ask_ark();
    let ok = parse_cert_table(&encode_cert_table(&[(CertType::VCEK, MILAN_VCEK), (CertType::ARK, &ark)])).unwrap();
    assert_eq!(ok.vek_kind, EndorsementKey::Vcek);
    assert!(ok.ask.is_none());
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (encode_cert_table(&[(CertType::ASK, &ask), (CertType::ARK, &ark)]), "no VCEK or VLEK"),
        (encode_cert_table(&[(CertType::VCEK, MILAN_VCEK), (CertType::VCEK, MILAN_VCEK)]), "a second"),
        (encode_cert_table(&[(CertType::VCEK, MILAN_VCEK), (CertType::VLEK, MILAN_VCEK)]), "both a VCEK and a VLEK"),
        (encode_cert_table(&[(CertType::VCEK, MILAN_VCEK), (CertType::CRL, b"crl")]), "unexpected entry"),
        (encode_cert_table(&[(CertType::VCEK, MILAN_VCEK), (CertType::OTHER(uuid::Uuid::from_u128(7)), b"x")]), "unexpected entry"),
        (vec![], "truncated"),
        (vec![1; 23], "truncated"),
    ];
    for (t, want) in cases {
        let e = err(parse_cert_table(&t));
        assert!(e.contains(want), "want {want:?}: {e}");
    }
    // No terminator.
    let mut t = encode_cert_table(&[(CertType::VCEK, MILAN_VCEK)]);
    t.truncate(24);
    let e = err(parse_cert_table(&t));
    assert!(e.contains("truncated") || e.contains("outside"), "{e}");
    let mut t = encode_cert_table(&[(CertType::VCEK, MILAN_VCEK)]);
    t[24] = 1; // the terminator is no longer all zero
    assert!(err(parse_cert_table(&t)).contains("entry 1"));
    // Offset beyond the table, length 0, offset into the header.
    let good = encode_cert_table(&[(CertType::VCEK, MILAN_VCEK)]);
    let mut t = good.clone();
    t[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(err(parse_cert_table(&t)).contains("outside"));
    let mut t = good.clone();
    t[20..24].copy_from_slice(&0u32.to_le_bytes());
    assert!(err(parse_cert_table(&t)).contains("1..="));
    let mut t = good.clone();
    t[16..20].copy_from_slice(&0u32.to_le_bytes());
    assert!(err(parse_cert_table(&t)).contains("overlaps"));
    // Too many entries.
    let many: Vec<(CertType, &[u8])> = (0..9).map(|i| (CertType::OTHER(uuid::Uuid::from_u128(i + 1)), &b"x"[..])).collect();
    assert!(err(parse_cert_table(&encode_cert_table(&many))).contains("entry 0"));
}

#[test]
fn random_bytes_never_panic() {
    // A cheap deterministic sweep beside the AFL targets in fuzz/.
    let good = sample();
    let mut x: u64 = 0x9e3779b97f4a7c15;
    for i in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut b = good.clone();
        let at = (x as usize) % b.len();
        b[at] ^= (x >> 32) as u8 | 1;
        if let Ok(e) = Evidence::decode(&b) {
            let _ = parse_cert_table(&e.aux);
            if i % 100 == 0 {
                let _ = hush_attest::verify(&e, &Policy::default(), &Default::default());
            }
        }
        let _ = parse_cert_table(&b[(x as usize >> 8) % 64..]);
    }
}

#[test]
fn policy_files_parse_and_unknown_keys_are_refused() {
    let p = Policy::from_toml(
        r#"
kinds = ["sev-snp"]
allow_debug = false
[sev_snp]
products = ["Milan", "Genoa"]
measurements = ["000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f"]
min_tcb = { bootloader = 3, snp = 8, microcode = 115 }
[tdx]
mrtd = []
tcb_statuses = ["UpToDate", "SWHardeningNeeded"]
collateral_max_age_days = 7
"#,
    )
    .unwrap();
    assert_eq!(p.snp.measurements[0][47], 0x2f);
    assert_eq!(p.snp.min_tcb.microcode, 115);
    assert_eq!(p.kinds, vec![EvidenceKind::SevSnp]);
    assert_eq!(p.tdx.collateral_max_age_days, 7);
    for (bad, want) in [
        ("allow_debugg = true", "unknown field"),
        ("[sev_snp]\nmeasurements = [\"00\"]", "must be 48"),
        ("[sev_snp]\nmeasurements = [\"zz\"]", "hex"),
        ("[sev_snp]\nproducts = [\"Rome\"]", "unknown variant"),
        ("kinds = [\"sgx\"]", "unknown kind"),
        ("[sev_snp]\nmin_tcb = { snp = 300 }", "snp"),
    ] {
        let e = err(Policy::from_toml(bad));
        assert!(e.contains(want), "{bad:?}: {e}");
    }
}
