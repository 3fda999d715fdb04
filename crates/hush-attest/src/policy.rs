//! The attestation policy (`--attest-policy FILE.toml`).
//!
//! ```toml
//! # Which kinds of evidence are accepted at all.
//! kinds = ["sev-snp", "tdx"]
//! # A report from a debuggable guest is refused unless this is true.
//! allow_debug = false
//!
//! [sev_snp]
//! # Products whose pinned AMD root (ARK) is trusted.
//! products = ["Milan", "Genoa", "Turin"]
//! # Allowed launch measurements (48 bytes, hex). Empty: every report is refused.
//! measurements = ["<96 hex digits>"]
//! # Minimum reported TCB, per component (fmc applies to Turin only).
//! min_tcb = { bootloader = 3, tee = 0, snp = 8, microcode = 115, fmc = 0 }
//! # Accept a report signed by a VLEK (cloud-provider key) as well as a VCEK.
//! allow_vlek = true
//!
//! [tdx]
//! # Allowed MRTD values (48 bytes, hex). Empty: every quote is refused.
//! mrtd = ["<96 hex digits>"]
//! # Optional: if given, RTMR0..3 must each be one of the listed values.
//! rtmr0 = []
//! rtmr1 = []
//! rtmr2 = []
//! rtmr3 = []
//! # TCB statuses dcap-qvl may report that are accepted.
//! tcb_statuses = ["UpToDate"]
//! # How old the TCB info and QE identity may be, in days.
//! collateral_max_age_days = 30
//! ```
//!
//! Unknown keys are refused, so a misspelt rule is never silently ignored.
//! The default policy ([`Policy::default`]) trusts the three pinned AMD roots
//! and Intel's production root, forbids debug, requires TCB `UpToDate` for
//! TDX and collateral at most 30 days old, and lists no measurement — so it
//! refuses every report until the operator names the measurement of the
//! binary they deployed.

use crate::evidence::EvidenceKind;
use crate::{Error, Result};
use serde::Deserialize;

/// An AMD product generation with a pinned root in the `sev` crate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum Product {
    Milan,
    Genoa,
    Turin,
}

impl Product {
    pub const ALL: [Product; 3] = [Product::Milan, Product::Genoa, Product::Turin];
    pub fn name(self) -> &'static str {
        match self {
            Product::Milan => "Milan",
            Product::Genoa => "Genoa",
            Product::Turin => "Turin",
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinTcb {
    #[serde(default)]
    pub bootloader: u8,
    #[serde(default)]
    pub tee: u8,
    #[serde(default)]
    pub snp: u8,
    #[serde(default)]
    pub microcode: u8,
    #[serde(default)]
    pub fmc: u8,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnpPolicy {
    pub products: Vec<Product>,
    pub measurements: Vec<[u8; 48]>,
    pub min_tcb: MinTcb,
    pub allow_vlek: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TdxPolicy {
    pub mrtd: Vec<[u8; 48]>,
    pub rtmr: [Option<Vec<[u8; 48]>>; 4],
    pub tcb_statuses: Vec<String>,
    pub collateral_max_age_days: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub kinds: Vec<EvidenceKind>,
    pub allow_debug: bool,
    pub snp: SnpPolicy,
    pub tdx: TdxPolicy,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            kinds: vec![EvidenceKind::SevSnp, EvidenceKind::Tdx],
            allow_debug: false,
            snp: SnpPolicy {
                products: Product::ALL.to_vec(),
                measurements: Vec::new(),
                min_tcb: MinTcb::default(),
                allow_vlek: true,
            },
            tdx: TdxPolicy {
                mrtd: Vec::new(),
                rtmr: [None, None, None, None],
                tcb_statuses: vec!["UpToDate".into()],
                collateral_max_age_days: 30,
            },
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    kinds: Option<Vec<String>>,
    allow_debug: Option<bool>,
    sev_snp: Option<RawSnp>,
    tdx: Option<RawTdx>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSnp {
    products: Option<Vec<Product>>,
    measurements: Option<Vec<String>>,
    min_tcb: Option<MinTcb>,
    allow_vlek: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTdx {
    mrtd: Option<Vec<String>>,
    rtmr0: Option<Vec<String>>,
    rtmr1: Option<Vec<String>>,
    rtmr2: Option<Vec<String>>,
    rtmr3: Option<Vec<String>>,
    tcb_statuses: Option<Vec<String>>,
    collateral_max_age_days: Option<u64>,
}

/// Largest policy file read.
pub const MAX_POLICY: usize = 1 << 20;

fn digests(what: &str, v: Vec<String>) -> Result<Vec<[u8; 48]>> {
    v.iter()
        .map(|s| {
            let b = crate::unhex(what, s).map_err(|e| Error::Policy(e.to_string()))?;
            <[u8; 48]>::try_from(b.as_slice())
                .map_err(|_| Error::Policy(format!("{what}: {} bytes, must be 48", b.len())))
        })
        .collect()
}

impl Policy {
    pub fn from_toml(text: &str) -> Result<Self> {
        let raw: RawPolicy = toml::from_str(text).map_err(|e| Error::Policy(e.to_string()))?;
        let mut p = Policy::default();
        if let Some(k) = raw.kinds {
            p.kinds = k
                .iter()
                .map(|s| match s.as_str() {
                    "sev-snp" => Ok(EvidenceKind::SevSnp),
                    "tdx" => Ok(EvidenceKind::Tdx),
                    o => Err(Error::Policy(format!("unknown kind {o:?} (sev-snp, tdx)"))),
                })
                .collect::<Result<_>>()?;
        }
        if let Some(d) = raw.allow_debug {
            p.allow_debug = d;
        }
        if let Some(s) = raw.sev_snp {
            if let Some(v) = s.products {
                p.snp.products = v;
            }
            if let Some(v) = s.measurements {
                p.snp.measurements = digests("sev_snp.measurements", v)?;
            }
            if let Some(v) = s.min_tcb {
                p.snp.min_tcb = v;
            }
            if let Some(v) = s.allow_vlek {
                p.snp.allow_vlek = v;
            }
        }
        if let Some(t) = raw.tdx {
            if let Some(v) = t.mrtd {
                p.tdx.mrtd = digests("tdx.mrtd", v)?;
            }
            for (i, r) in [t.rtmr0, t.rtmr1, t.rtmr2, t.rtmr3].into_iter().enumerate() {
                if let Some(v) = r {
                    p.tdx.rtmr[i] = Some(digests(&format!("tdx.rtmr{i}"), v)?);
                }
            }
            if let Some(v) = t.tcb_statuses {
                p.tdx.tcb_statuses = v;
            }
            if let Some(v) = t.collateral_max_age_days {
                p.tdx.collateral_max_age_days = v;
            }
        }
        Ok(p)
    }

    pub fn read_file(path: &std::path::Path) -> Result<Self> {
        let b = crate::evidence::read_capped(path, MAX_POLICY).map_err(|e| Error::Policy(e.to_string()))?;
        let s = std::str::from_utf8(&b).map_err(|_| Error::Policy(format!("{}: not UTF-8", path.display())))?;
        Self::from_toml(s).map_err(|e| Error::Policy(format!("{}: {e}", path.display())))
    }
}
