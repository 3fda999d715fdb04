//! The evidence a dealer or trusted module serves, and the SNP certificate
//! table inside it.
//!
//! Wire format, version 1 (all integers little-endian):
//!
//! | field        | size            | notes                                              |
//! |--------------|-----------------|----------------------------------------------------|
//! | magic        | 4               | `b"HATT"`                                          |
//! | version      | 2               | `1`                                                |
//! | kind         | 1               | `1` = SEV-SNP, `2` = TDX                           |
//! | reserved     | 1               | must be 0                                          |
//! | nonce_len    | 1               | `<= 64`                                            |
//! | nonce        | nonce_len       | the verifier's nonce bound into REPORT_DATA        |
//! | report_len   | 4               | SNP: exactly 1184; TDX: 48 ..= [`MAX_QUOTE`]       |
//! | report       | report_len      | raw SNP report (outblob) or TDX quote              |
//! | aux_len      | 4               | `<=` [`MAX_AUX`]                                   |
//! | aux          | aux_len         | SNP: certificate table (auxblob); TDX: collateral JSON (dcap-qvl `QuoteCollateralV3`) |
//!
//! Nothing may follow. Every length is checked against its cap and against the
//! bytes that remain before any buffer is allocated, so a hostile length
//! prefix costs nothing.
//!
//! The SNP certificate table is the layout the kernel returns in configfs-tsm's
//! `auxblob` (the GHCB extended guest request table): entries of 24 bytes
//! (GUID 16 bytes as stored, offset u32, length u32; offsets from the start of
//! the table), ended by an all-zero entry, followed by the certificates (DER).

use crate::{Error, Result};
pub use sev::firmware::host::CertType;

pub const MAGIC: &[u8; 4] = b"HATT";
pub const VERSION: u16 = 1;
/// Largest nonce accepted (SNP and TDX REPORT_DATA are 64 bytes; the nonce is hashed in).
pub const MAX_NONCE: usize = 64;
/// Size of an SEV-SNP attestation report (all versions to date).
pub const SNP_REPORT_LEN: usize = 1184;
/// Largest TDX quote accepted (a v4 quote with an embedded PCK chain is ~5 KiB).
pub const MAX_QUOTE: usize = 16 * 1024;
/// Largest aux blob accepted (SNP certificate table or TDX collateral JSON, ~16 KiB in practice).
pub const MAX_AUX: usize = 256 * 1024;
/// Largest evidence file or message accepted.
pub const MAX_EVIDENCE: usize = 12 + MAX_NONCE + 4 + MAX_QUOTE + 4 + MAX_AUX;
/// Most entries a certificate table may have (ARK, ASK, VCEK or VLEK: 3 today).
pub const MAX_CERT_ENTRIES: usize = 8;
/// Largest single certificate in a table.
pub const MAX_CERT_LEN: usize = 16 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvidenceKind {
    SevSnp,
    Tdx,
}

impl EvidenceKind {
    fn code(self) -> u8 {
        match self {
            EvidenceKind::SevSnp => 1,
            EvidenceKind::Tdx => 2,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            EvidenceKind::SevSnp => "sev-snp",
            EvidenceKind::Tdx => "tdx",
        }
    }
}

/// Decoded evidence. Construct with [`Evidence::new`] (checks the same
/// limits as the decoder) or [`Evidence::decode`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evidence {
    pub kind: EvidenceKind,
    pub nonce: Vec<u8>,
    pub report: Vec<u8>,
    pub aux: Vec<u8>,
}

impl Evidence {
    pub fn new(kind: EvidenceKind, nonce: Vec<u8>, report: Vec<u8>, aux: Vec<u8>) -> Result<Self> {
        check_lengths(kind, nonce.len(), report.len(), aux.len())?;
        Ok(Evidence { kind, nonce, report, aux })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(17 + self.nonce.len() + self.report.len() + self.aux.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.push(self.kind.code());
        out.push(0);
        out.push(self.nonce.len() as u8);
        out.extend_from_slice(&self.nonce);
        out.extend_from_slice(&(self.report.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.report);
        out.extend_from_slice(&(self.aux.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.aux);
        out
    }

    /// Decode untrusted bytes. Never panics; allocates only after each length
    /// has passed its cap and fits in what remains.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        if bytes.len() > MAX_EVIDENCE {
            return Err(fmt(format!("{} bytes, more than the {MAX_EVIDENCE} allowed", bytes.len())));
        }
        let mut r = Reader { buf: bytes, pos: 0 };
        let magic = r.take(4, "magic")?;
        if magic != MAGIC {
            return Err(fmt("bad magic (not hush attestation evidence)".into()));
        }
        let version = u16::from_le_bytes(r.array::<2>("version")?);
        if version != VERSION {
            return Err(fmt(format!("unsupported evidence version {version} (this build reads {VERSION})")));
        }
        let kind = match r.array::<1>("kind")?[0] {
            1 => EvidenceKind::SevSnp,
            2 => EvidenceKind::Tdx,
            k => return Err(fmt(format!("unknown evidence kind {k} (1 = SEV-SNP, 2 = TDX)"))),
        };
        let reserved = r.array::<1>("reserved")?[0];
        if reserved != 0 {
            return Err(fmt(format!("reserved byte is {reserved}, must be 0")));
        }
        let nonce_len = r.array::<1>("nonce length")?[0] as usize;
        if nonce_len > MAX_NONCE {
            return Err(fmt(format!("nonce of {nonce_len} bytes, more than {MAX_NONCE}")));
        }
        let nonce = r.take(nonce_len, "nonce")?.to_vec();
        let report_len = u32::from_le_bytes(r.array::<4>("report length")?) as usize;
        check_report_len(kind, report_len)?;
        let report = r.take(report_len, "report")?.to_vec();
        let aux_len = u32::from_le_bytes(r.array::<4>("aux length")?) as usize;
        if aux_len > MAX_AUX {
            return Err(fmt(format!("aux blob of {aux_len} bytes, more than {MAX_AUX}")));
        }
        let aux = r.take(aux_len, "aux blob")?.to_vec();
        if r.pos != bytes.len() {
            return Err(fmt(format!("{} trailing bytes after the aux blob", bytes.len() - r.pos)));
        }
        Ok(Evidence { kind, nonce, report, aux })
    }

    /// Read an evidence file, checking its size before reading it.
    pub fn read_file(path: &std::path::Path) -> Result<Self> {
        let bytes = read_capped(path, MAX_EVIDENCE)?;
        Self::decode(&bytes)
    }
}

/// Read a file of at most `cap` bytes (size checked from metadata, then
/// through a bounded read in case the file grows).
pub fn read_capped(path: &std::path::Path, cap: usize) -> Result<Vec<u8>> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
    let len = f.metadata().map_err(|e| Error::Io(format!("{}: {e}", path.display())))?.len();
    if len > cap as u64 {
        return Err(Error::Io(format!("{}: {len} bytes, more than the {cap} allowed", path.display())));
    }
    let mut out = Vec::with_capacity(len as usize);
    f.take(cap as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
    if out.len() > cap {
        return Err(Error::Io(format!("{}: more than the {cap} bytes allowed", path.display())));
    }
    Ok(out)
}

fn fmt(s: String) -> Error {
    Error::Format(s)
}

fn check_report_len(kind: EvidenceKind, len: usize) -> Result<()> {
    match kind {
        EvidenceKind::SevSnp if len != SNP_REPORT_LEN => {
            Err(fmt(format!("SEV-SNP report of {len} bytes, must be {SNP_REPORT_LEN}")))
        }
        EvidenceKind::Tdx if !(48..=MAX_QUOTE).contains(&len) => {
            Err(fmt(format!("TDX quote of {len} bytes, must be 48..={MAX_QUOTE}")))
        }
        _ => Ok(()),
    }
}

fn check_lengths(kind: EvidenceKind, nonce: usize, report: usize, aux: usize) -> Result<()> {
    if nonce > MAX_NONCE {
        return Err(fmt(format!("nonce of {nonce} bytes, more than {MAX_NONCE}")));
    }
    check_report_len(kind, report)?;
    if aux > MAX_AUX {
        return Err(fmt(format!("aux blob of {aux} bytes, more than {MAX_AUX}")));
    }
    Ok(())
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let rest = self.buf.len() - self.pos;
        if n > rest {
            return Err(fmt(format!("truncated: {what} needs {n} bytes, {rest} remain")));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
}

/// Which key signs an SNP report, per the certificate table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndorsementKey {
    Vcek,
    Vlek,
}

impl std::fmt::Display for EndorsementKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EndorsementKey::Vcek => "VCEK",
            EndorsementKey::Vlek => "VLEK",
        })
    }
}

/// The checked contents of an SNP certificate table: exactly one of VCEK or
/// VLEK, at most one ASK (or ASVK, for a VLEK) and at most one ARK.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertTable {
    pub vek_kind: EndorsementKey,
    pub vek: Vec<u8>,
    pub ask: Option<Vec<u8>>,
    pub ark: Option<Vec<u8>>,
}

const ENTRY: usize = 24;

/// Parse an SNP certificate table (configfs-tsm `auxblob`). Refuses: a missing
/// terminator, more than [`MAX_CERT_ENTRIES`] entries, an entry whose bytes
/// lie outside the table or inside its header, an empty or oversized
/// certificate, a duplicate entry, an entry that is not ARK/ASK/VCEK/VLEK, and
/// a table with neither or both of VCEK and VLEK.
pub fn parse_cert_table(table: &[u8]) -> Result<CertTable> {
    let bad = |s: String| Error::Format(format!("SNP certificate table: {s}"));
    let (mut ark, mut ask, mut vcek, mut vlek) = (None, None, None, None);
    let mut header_end = None;
    for i in 0..=MAX_CERT_ENTRIES {
        let at = i * ENTRY;
        if table.len() < at + ENTRY {
            return Err(bad(format!("truncated at entry {i} (no all-zero terminator)")));
        }
        let e = &table[at..at + ENTRY];
        if e.iter().all(|&b| b == 0) {
            header_end = Some(at + ENTRY);
            break;
        }
        if i == MAX_CERT_ENTRIES {
            return Err(bad(format!("more than {MAX_CERT_ENTRIES} entries")));
        }
        let guid = uuid::Uuid::from_slice(&e[..16]).map_err(|e| bad(format!("entry {i}: {e}")))?;
        let off = u32::from_le_bytes([e[16], e[17], e[18], e[19]]) as usize;
        let len = u32::from_le_bytes([e[20], e[21], e[22], e[23]]) as usize;
        if len == 0 || len > MAX_CERT_LEN {
            return Err(bad(format!("entry {i} ({guid}): certificate of {len} bytes (must be 1..={MAX_CERT_LEN})")));
        }
        let end = off.checked_add(len).filter(|&end| end <= table.len());
        let Some(end) = end else {
            return Err(bad(format!("entry {i} ({guid}): bytes {off}+{len} outside the {}-byte table", table.len())));
        };
        let slot = match CertType::try_from(&guid).map_err(|e| bad(format!("entry {i}: {e}")))? {
            CertType::ARK => &mut ark,
            CertType::ASK => &mut ask,
            CertType::VCEK => &mut vcek,
            CertType::VLEK => &mut vlek,
            other => return Err(bad(format!("entry {i}: unexpected entry {other} (only ARK, ASK, VCEK, VLEK are accepted)"))),
        };
        if slot.is_some() {
            return Err(bad(format!("entry {i}: a second {guid} entry")));
        }
        *slot = Some((off, end));
    }
    let header_end = header_end.ok_or_else(|| bad("no terminator".into()))?;
    let get = |r: Option<(usize, usize)>| -> Result<Option<Vec<u8>>> {
        match r {
            None => Ok(None),
            Some((off, _)) if off < header_end => {
                Err(bad(format!("a certificate at offset {off} overlaps the {header_end}-byte header")))
            }
            Some((off, end)) => Ok(Some(table[off..end].to_vec())),
        }
    };
    let (ark, ask, vcek, vlek) = (get(ark)?, get(ask)?, get(vcek)?, get(vlek)?);
    let (vek_kind, vek) = match (vcek, vlek) {
        (Some(v), None) => (EndorsementKey::Vcek, v),
        (None, Some(v)) => (EndorsementKey::Vlek, v),
        (None, None) => return Err(bad("no VCEK or VLEK entry".into())),
        (Some(_), Some(_)) => return Err(bad("both a VCEK and a VLEK entry".into())),
    };
    Ok(CertTable { vek_kind, vek, ask, ark })
}

/// Encode a certificate table in the kernel's layout (for the provider's
/// tests and for operators assembling evidence from files).
pub fn encode_cert_table(entries: &[(CertType, &[u8])]) -> Vec<u8> {
    let header = (entries.len() + 1) * ENTRY;
    let mut out = Vec::new();
    let mut body = Vec::new();
    for (ty, data) in entries {
        let guid: uuid::Uuid = uuid::Uuid::try_from(ty.clone()).unwrap_or(uuid::Uuid::nil());
        out.extend_from_slice(guid.as_bytes());
        out.extend_from_slice(&((header + body.len()) as u32).to_le_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        body.extend_from_slice(data);
    }
    out.extend_from_slice(&[0u8; ENTRY]);
    out.extend_from_slice(&body);
    out
}
