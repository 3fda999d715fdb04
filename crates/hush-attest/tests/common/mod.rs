//! Test-only evidence: an AMD-style chain generated in the test (RSA-PSS
//! "ARK" and "ASK", a P-384 "VCEK" with AMD's TCB and hwID extensions), and
//! SNP reports signed by it. Its root is named "TEST ROOT (generated in the
//! test, not AMD)" and is refused by the default policy; tests that want it
//! accepted pass it explicitly as a `TestRoot`.
#![allow(dead_code)]

use hush_attest::verify::TestRoot;
use p384::ecdsa::signature::Signer;
use std::str::FromStr;
use x509_cert::builder::{Builder, CertificateBuilder, Profile};
use x509_cert::der::asn1::{BitString, OctetString};
use x509_cert::der::{Decode, Encode};
use x509_cert::ext::Extension;
use x509_cert::name::Name;
use x509_cert::serial_number::SerialNumber;
use x509_cert::spki::{EncodePublicKey, SubjectPublicKeyInfoOwned};
use x509_cert::time::Validity;

pub const MILAN_REPORT_HEX: &str = include_str!("../../testdata/report_milan.hex");
pub const MILAN_VCEK: &[u8] = include_bytes!("../../testdata/vcek_milan.der");
pub const MILAN_CHAIN_PEM: &[u8] = include_bytes!("../../testdata/cert_chain_milan");
pub const TDX_QUOTE: &[u8] = include_bytes!("../../testdata/tdx_quote");
pub const TDX_COLLATERAL: &[u8] = include_bytes!("../../testdata/tdx_quote_collateral.json");

pub fn milan_report() -> Vec<u8> {
    hush_attest::unhex("report", MILAN_REPORT_HEX).unwrap()
}

/// ASK and ARK (DER) from the PEM stack shipped with the `sev` crate (ASK first).
pub fn milan_ask_ark() -> (Vec<u8>, Vec<u8>) {
    let text = std::str::from_utf8(MILAN_CHAIN_PEM).unwrap();
    let ders: Vec<Vec<u8>> = text
        .split("-----BEGIN CERTIFICATE-----")
        .skip(1)
        .map(|b| {
            let body = b.split("-----END CERTIFICATE-----").next().unwrap();
            b64(body)
        })
        .collect();
    assert_eq!(ders.len(), 2);
    (ders[0].clone(), ders[1].clone())
}

fn b64(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => continue,
        } as u32;
        acc = acc << 6 | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

/// Unix seconds at which the Milan VCEK (2023-04-03 .. 2030-04-03) is valid.
pub const MILAN_NOW: u64 = 1_750_000_000;

pub struct TestChain {
    pub ark_der: Vec<u8>,
    pub ask_der: Vec<u8>,
    pub vcek_der: Vec<u8>,
    pub vcek_key: p384::ecdsa::SigningKey,
}

fn rsa_pss_key(rng: &mut rand::rngs::ThreadRng) -> rsa::pss::SigningKey<sha2::Sha384> {
    let k = rsa::RsaPrivateKey::new(rng, 2048).unwrap();
    rsa::pss::SigningKey::<sha2::Sha384>::new(k)
}

fn spki<K: EncodePublicKey>(k: &K) -> SubjectPublicKeyInfoOwned {
    SubjectPublicKeyInfoOwned::from_der(k.to_public_key_der().unwrap().as_bytes()).unwrap()
}

fn ext(oid: &str, value: Vec<u8>) -> Extension {
    Extension {
        extn_id: x509_cert::der::oid::ObjectIdentifier::new_unwrap(oid),
        critical: false,
        extn_value: OctetString::new(value).unwrap(),
    }
}

impl TestChain {
    /// Generate a chain whose VCEK certifies `tcb` = (bootloader, tee, snp,
    /// microcode) and `hwid` (the report's CHIP_ID).
    pub fn generate(tcb: [u8; 4], hwid: &[u8]) -> Self {
        let mut rng = rand::thread_rng();
        // 2020-01-01 .. 2040-01-01, so MILAN_NOW lies inside.
        let t = |secs| x509_cert::time::Time::UtcTime(x509_cert::der::asn1::UtcTime::from_unix_duration(std::time::Duration::from_secs(secs)).unwrap());
        let validity = Validity { not_before: t(1_577_836_800), not_after: t(2_208_988_800) };
        let ark_key = rsa_pss_key(&mut rng);
        let ark_name = Name::from_str("CN=TEST-ROOT-generated-in-the-test-not-AMD").unwrap();
        let ark = CertificateBuilder::new(
            Profile::Root,
            SerialNumber::from(1u32),
            validity,
            ark_name.clone(),
            spki(&rsa::RsaPublicKey::from(ark_key.as_ref())),
            &ark_key,
        )
        .unwrap()
        .build_with_rng::<rsa::pss::Signature>(&mut rng)
        .unwrap();
        let ask_key = rsa_pss_key(&mut rng);
        let ask_name = Name::from_str("CN=TEST-ASK-generated-in-the-test-not-AMD").unwrap();
        let ask = CertificateBuilder::new(
            Profile::SubCA { issuer: ark_name, path_len_constraint: None },
            SerialNumber::from(2u32),
            validity,
            ask_name.clone(),
            spki(&rsa::RsaPublicKey::from(ask_key.as_ref())),
            &ark_key,
        )
        .unwrap()
        .build_with_rng::<rsa::pss::Signature>(&mut rng)
        .unwrap();
        let vcek_key = p384::ecdsa::SigningKey::random(&mut rng);
        let mut vcek = CertificateBuilder::new(
            Profile::Leaf { issuer: ask_name, enable_key_agreement: false, enable_key_encipherment: false },
            SerialNumber::from(3u32),
            validity,
            Name::from_str("CN=TEST-VCEK-generated-in-the-test-not-AMD").unwrap(),
            spki(vcek_key.verifying_key()),
            &ask_key,
        )
        .unwrap()
        .build_with_rng::<rsa::pss::Signature>(&mut rng)
        .unwrap();
        // AMD's extensions (VCEK spec 57230 table 8), then sign again.
        let exts = vcek.tbs_certificate.extensions.get_or_insert_with(Vec::new);
        for (oid, v) in [("1.3.6.1.4.1.3704.1.3.1", tcb[0]), ("1.3.6.1.4.1.3704.1.3.2", tcb[1]), ("1.3.6.1.4.1.3704.1.3.3", tcb[2]), ("1.3.6.1.4.1.3704.1.3.8", tcb[3])] {
            let int = if v < 0x80 { vec![2, 1, v] } else { vec![2, 2, 0, v] };
            exts.push(ext(oid, int));
        }
        exts.push(ext("1.3.6.1.4.1.3704.1.4", hwid.to_vec()));
        use rsa::signature::{RandomizedSigner, SignatureEncoding};
        let tbs = vcek.tbs_certificate.to_der().unwrap();
        let sig: rsa::pss::Signature = ask_key.sign_with_rng(&mut rng, &tbs);
        vcek.signature = BitString::from_bytes(&sig.to_bytes()).unwrap();
        TestChain {
            ark_der: ark.to_der().unwrap(),
            ask_der: ask.to_der().unwrap(),
            vcek_der: vcek.to_der().unwrap(),
            vcek_key,
        }
    }

    pub fn root(&self) -> TestRoot {
        TestRoot {
            name: "TEST ROOT (generated in the test, not AMD)".into(),
            ark_der: self.ark_der.clone(),
            ask_der: self.ask_der.clone(),
        }
    }

    /// Sign `report` (1184 bytes) in place with the test VCEK: ECDSA P-384 /
    /// SHA-384 over bytes 0..0x2A0, r and s little-endian in 72-byte fields.
    pub fn sign(&self, report: &mut [u8]) {
        let sig: p384::ecdsa::Signature = self.vcek_key.sign(&report[..0x2a0]);
        let (r, s) = sig.split_bytes();
        let mut rl = [0u8; 72];
        let mut sl = [0u8; 72];
        for i in 0..48 {
            rl[i] = r[47 - i];
            sl[i] = s[47 - i];
        }
        report[0x2a0..0x2a0 + 72].copy_from_slice(&rl);
        report[0x2a0 + 72..0x2a0 + 144].copy_from_slice(&sl);
    }
}

/// Byte offsets in an SNP report (ABI spec 56860 table 22).
pub const POLICY: usize = 0x08;
pub const REPORT_DATA: usize = 0x50;
pub const MEASUREMENT: usize = 0x90;
pub const REPORTED_TCB: usize = 0x180;
pub const CHIP_ID: usize = 0x1a0;
pub const SIGNATURE: usize = 0x2a0;
