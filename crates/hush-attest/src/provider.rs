//! The provider side: obtain a report from the kernel through configfs-tsm.
//!
//! Linux (6.7+) exposes guest attestation as a configfs tree
//! (`Documentation/ABI/testing/configfs-tsm`):
//!
//! ```text
//! /sys/kernel/config/tsm/report/<name>/   created with mkdir by the caller
//!     inblob      write: up to 64 bytes of REPORT_DATA
//!     outblob     read:  the report (SNP: 1184-byte report; TDX: the quote)
//!     auxblob     read:  SNP only: the certificate table (VCEK/VLEK, ASK, ARK)
//!     provider    read:  "sev_guest" or "tdx_guest"
//!     generation  read:  increments on every write to inblob or an option
//! ```
//!
//! [`ConfigfsTsm::get`] writes REPORT_DATA = [`crate::report_data`]`(spki, nonce)`,
//! reads `generation` right after the write and again after reading the
//! blobs, and refuses if it moved (another writer shared the entry) or if the
//! report does not carry the REPORT_DATA just written. The root is
//! configurable so tests run against a fake tree.

use crate::evidence::{read_capped, Evidence, EvidenceKind, MAX_AUX, MAX_QUOTE, SNP_REPORT_LEN};
use crate::{Error, Result};
use std::path::{Path, PathBuf};

/// Where the kernel mounts configfs-tsm's report directory.
pub const DEFAULT_ROOT: &str = "/sys/kernel/config/tsm/report";

/// A configfs-tsm report entry `<root>/<name>`.
#[derive(Clone, Debug)]
pub struct ConfigfsTsm {
    pub root: PathBuf,
    pub name: String,
}

impl ConfigfsTsm {
    pub fn new(root: impl Into<PathBuf>, name: impl Into<String>) -> Self {
        ConfigfsTsm { root: root.into(), name: name.into() }
    }

    /// The system's configfs-tsm, entry `hush-<pid>`.
    pub fn system() -> Self {
        Self::new(DEFAULT_ROOT, format!("hush-{}", std::process::id()))
    }

    fn entry(&self) -> PathBuf {
        self.root.join(&self.name)
    }

    /// Obtain evidence of `kind` binding `spki_der` and `nonce`. For TDX the
    /// kernel returns only the quote; `tdx_collateral` (dcap-qvl
    /// `QuoteCollateralV3` JSON, fetched by the operator from a PCCS) is
    /// served beside it so the verifier needs no network.
    pub fn get(
        &self,
        kind: EvidenceKind,
        spki_der: &[u8],
        nonce: &[u8],
        tdx_collateral: Option<Vec<u8>>,
    ) -> Result<Evidence> {
        let perr = |s: String| Error::Provider(s);
        if nonce.len() > crate::evidence::MAX_NONCE {
            return Err(perr(format!("nonce of {} bytes, more than {}", nonce.len(), crate::evidence::MAX_NONCE)));
        }
        if !self.root.is_dir() {
            return Err(perr(format!(
                "{} is not a directory: no configfs-tsm here (not a confidential VM, kernel older than 6.7, or configfs not mounted)",
                self.root.display()
            )));
        }
        let dir = self.entry();
        if !dir.is_dir() {
            std::fs::create_dir(&dir).map_err(|e| perr(format!("mkdir {}: {e}", dir.display())))?;
        }
        let provider = read_text(&dir.join("provider"))?;
        let want = match kind {
            EvidenceKind::SevSnp => "sev_guest",
            EvidenceKind::Tdx => "tdx_guest",
            EvidenceKind::Test => {
                return Err(perr("test evidence does not come from configfs-tsm (see hush_attest::test_evidence)".into()))
            }
        };
        if provider != want {
            return Err(perr(format!("provider is {provider:?}, {} evidence needs {want:?}", kind.name())));
        }
        let rd = crate::report_data(spki_der, nonce);
        let inblob = dir.join("inblob");
        std::fs::write(&inblob, rd).map_err(|e| perr(format!("write {}: {e}", inblob.display())))?;
        let gen_before = read_generation(&dir)?;
        let report_cap = match kind {
            EvidenceKind::SevSnp => SNP_REPORT_LEN,
            EvidenceKind::Tdx | EvidenceKind::Test => MAX_QUOTE,
        };
        let report = read_capped(&dir.join("outblob"), report_cap).map_err(|e| perr(e.to_string()))?;
        let aux = match kind {
            EvidenceKind::SevSnp => read_capped(&dir.join("auxblob"), MAX_AUX).map_err(|e| perr(e.to_string()))?,
            EvidenceKind::Test => Vec::new(),
            EvidenceKind::Tdx => match tdx_collateral {
                Some(c) => c,
                None => {
                    return Err(perr(
                        "TDX evidence needs collateral (QuoteCollateralV3 JSON from a PCCS): none given".into(),
                    ))
                }
            },
        };
        let gen_after = read_generation(&dir)?;
        if gen_after != gen_before {
            return Err(perr(format!(
                "generation moved from {gen_before} to {gen_after} while reading: another writer shares {}",
                dir.display()
            )));
        }
        let carried = carried_report_data(kind, &report)?;
        if carried != rd {
            return Err(perr("outblob does not carry the REPORT_DATA just written (another writer, or a stale report)".into()));
        }
        Evidence::new(kind, nonce.to_vec(), report, aux)
    }
}

/// REPORT_DATA as carried in a report, read with the field's libraries.
pub(crate) fn carried_report_data(kind: EvidenceKind, report: &[u8]) -> Result<[u8; 64]> {
    match kind {
        EvidenceKind::SevSnp => Ok(crate::snp::parse_report(report)?.report_data),
        EvidenceKind::Tdx => crate::tdx::report_data(report),
        EvidenceKind::Test => Ok(crate::test_evidence::parse(report)?.report_data),
    }
}

fn read_text(path: &Path) -> Result<String> {
    let b = read_capped(path, 256).map_err(|e| Error::Provider(e.to_string()))?;
    Ok(String::from_utf8_lossy(&b).trim().to_string())
}

fn read_generation(dir: &Path) -> Result<u64> {
    let t = read_text(&dir.join("generation"))?;
    t.parse().map_err(|_| Error::Provider(format!("generation is {t:?}, not a number")))
}

/// Where a dealer (or module) gets its evidence: `hush dealer --attest
/// snp|tdx|test:DIR`.
#[derive(Debug)]
pub enum Source {
    /// configfs-tsm in an SEV-SNP or TDX guest (TDX: with the operator's
    /// collateral, served beside the quote).
    Configfs { tsm: ConfigfsTsm, kind: EvidenceKind, tdx_collateral: Option<Vec<u8>> },
    /// **Tests only, no hardware protection**: [`crate::test_evidence`].
    Test(crate::test_evidence::TestProvider),
}

impl Source {
    /// From the flag's value: `snp`, `tdx` or `test:DIR`. `tsm_root`
    /// overrides [`DEFAULT_ROOT`] (a fake tree in tests); `tdx_collateral`
    /// is the QuoteCollateralV3 JSON file TDX evidence carries.
    pub fn from_flag(spec: &str, tsm_root: Option<&Path>, tdx_collateral: Option<&Path>) -> Result<Self> {
        let tsm = || match tsm_root {
            Some(r) => ConfigfsTsm::new(r, format!("hush-{}", std::process::id())),
            None => ConfigfsTsm::system(),
        };
        match spec {
            "snp" | "sev-snp" => {
                if tdx_collateral.is_some() {
                    return Err(Error::Provider("TDX collateral given for SEV-SNP evidence (SNP carries its certificate table)".into()));
                }
                Ok(Source::Configfs { tsm: tsm(), kind: EvidenceKind::SevSnp, tdx_collateral: None })
            }
            "tdx" => {
                let p = tdx_collateral.ok_or_else(|| {
                    Error::Provider("TDX evidence needs its collateral (QuoteCollateralV3 JSON from a PCCS) so verifiers need no network: give its file".into())
                })?;
                let c = read_capped(p, MAX_AUX).map_err(|e| Error::Provider(e.to_string()))?;
                Ok(Source::Configfs { tsm: tsm(), kind: EvidenceKind::Tdx, tdx_collateral: Some(c) })
            }
            s => match s.strip_prefix("test:") {
                Some(dir) if !dir.is_empty() => Ok(Source::Test(crate::test_evidence::TestProvider::from_dir(Path::new(dir))?)),
                _ => Err(Error::Provider(format!("--attest {s:?}: choose snp, tdx or test:DIR (test:DIR is for tests only and gives no hardware protection)"))),
            },
        }
    }

    /// Evidence binding `spki_der` (this process's TLS key) and `nonce`.
    pub fn get(&self, spki_der: &[u8], nonce: &[u8]) -> Result<Evidence> {
        match self {
            Source::Configfs { tsm, kind, tdx_collateral } => tsm.get(*kind, spki_der, nonce, tdx_collateral.clone()),
            Source::Test(t) => t.get(spki_der, nonce),
        }
    }

    /// One line for logs.
    pub fn describe(&self) -> String {
        match self {
            Source::Configfs { tsm, kind, .. } => format!("{} evidence from configfs-tsm at {}", kind.name(), tsm.root.display()),
            Source::Test(_) => format!("{} (--attest test:DIR)", crate::test_evidence::TEST_NOTE),
        }
    }
}
