//! SciPy sparse `.npz` input (`scipy.sparse.save_npz`, CSR), read as
//! untrusted bytes: every size is checked against the file and the limits
//! before anything is allocated, and every error names the file and what
//! is wrong.
//!
//! An `.npz` is a zip archive (stored or deflated members, possibly with
//! zip64 size fields, as numpy writes them) of `.npy` arrays; a CSR matrix
//! is `data`, `indices`, `indptr`, `shape` and `format` (= `csr`). The
//! zip container and the `.npy` header are parsed here (the ZIP
//! application note and numpy's NEP 1 format description); deflate is
//! `miniz_oxide`'s, with the output capped at the member's declared size.
//! Member CRCs are not checked (a corrupt member still fails validation
//! or yields other finite numbers — the file is the party's own input).

use crate::data::{Dataset, MAX_COLS, MAX_FILE};
use crate::{Error, Result};

/// Largest number of rows and of stored entries accepted.
pub const MAX_ROWS: u64 = 1 << 31;
pub const MAX_NNZ: u64 = 1 << 32;
/// Deflate cannot expand more than ~1032:1; a larger claim is malformed.
const MAX_RATIO: u64 = 1100;

fn u16le(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at.checked_add(2)?).map(|s| u16::from_le_bytes([s[0], s[1]]) as u64)
}
fn u32le(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at.checked_add(4)?).map(|s| u32::from_le_bytes(s.try_into().unwrap()) as u64)
}
fn u64le(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at.checked_add(8)?).map(|s| u64::from_le_bytes(s.try_into().unwrap()))
}

/// The members of a zip archive: name → (method, compressed bytes, size).
fn zip_members<'a>(b: &'a [u8], bad: &dyn Fn(String) -> Error) -> Result<Vec<(String, u64, &'a [u8], u64)>> {
    let trunc = || bad("truncated zip structure".into());
    // End of central directory: the last signature within 64 KiB + 22 bytes.
    let lo = b.len().saturating_sub(65_557);
    let eocd = (lo..b.len().saturating_sub(21))
        .rev()
        .find(|&i| b[i..i + 4] == [0x50, 0x4b, 0x05, 0x06])
        .ok_or_else(|| bad("not a zip archive (no end of central directory)".into()))?;
    let mut count = u16le(b, eocd + 10).ok_or_else(trunc)?;
    let mut cd = u32le(b, eocd + 16).ok_or_else(trunc)?;
    if count == 0xffff || cd == 0xffff_ffff {
        // zip64 end of central directory locator, then record
        let loc = eocd.checked_sub(20).ok_or_else(trunc)?;
        if b[loc..loc + 4] != [0x50, 0x4b, 0x06, 0x07] {
            return Err(bad("zip64 locator missing".into()));
        }
        let rec = usize::try_from(u64le(b, loc + 8).ok_or_else(trunc)?).map_err(|_| trunc())?;
        if rec > b.len() || u32le(b, rec) != Some(0x0606_4b50) {
            return Err(bad("zip64 end record missing".into()));
        }
        count = u64le(b, rec + 32).ok_or_else(trunc)?;
        cd = u64le(b, rec + 48).ok_or_else(trunc)?;
    }
    if count > 64 {
        return Err(bad(format!("{count} members (a sparse matrix has 5)")));
    }
    let mut out = Vec::new();
    let mut p = usize::try_from(cd).map_err(|_| trunc())?;
    for _ in 0..count {
        if p > b.len() || u32le(b, p) != Some(0x0201_4b50) {
            return Err(bad("bad central directory entry".into()));
        }
        let flags = u16le(b, p + 8).ok_or_else(trunc)?;
        let method = u16le(b, p + 10).ok_or_else(trunc)?;
        let mut csize = u32le(b, p + 20).ok_or_else(trunc)?;
        let mut usize_ = u32le(b, p + 24).ok_or_else(trunc)?;
        let nlen = u16le(b, p + 28).ok_or_else(trunc)? as usize;
        let xlen = u16le(b, p + 30).ok_or_else(trunc)? as usize;
        let clen = u16le(b, p + 32).ok_or_else(trunc)? as usize;
        let mut local = u32le(b, p + 42).ok_or_else(trunc)?;
        let name = b.get(p + 46..p + 46 + nlen).ok_or_else(trunc)?;
        let name = String::from_utf8_lossy(name).into_owned();
        // zip64 extra field: the 0xffffffff fields, in order usize, csize, offset
        let mut x = p + 46 + nlen;
        let xend = x + xlen;
        while x + 4 <= xend {
            let id = u16le(b, x).ok_or_else(trunc)?;
            let len = u16le(b, x + 2).ok_or_else(trunc)? as usize;
            if id == 1 {
                let mut q = x + 4;
                for f in [&mut usize_, &mut csize, &mut local] {
                    if *f == 0xffff_ffff {
                        if q + 8 > x + 4 + len {
                            return Err(bad("short zip64 extra field".into()));
                        }
                        *f = u64le(b, q).ok_or_else(trunc)?;
                        q += 8;
                    }
                }
            }
            x += 4 + len;
        }
        if flags & 1 != 0 {
            return Err(bad(format!("member {name} is encrypted")));
        }
        // the data start from the local header
        let lh = usize::try_from(local).ok().filter(|&l| l <= b.len()).ok_or_else(trunc)?;
        if u32le(b, lh) != Some(0x0403_4b50) {
            return Err(bad(format!("member {name}: bad local header")));
        }
        let start = lh + 30 + u16le(b, lh + 26).ok_or_else(trunc)? as usize + u16le(b, lh + 28).ok_or_else(trunc)? as usize;
        let end = usize::try_from(csize).ok().and_then(|c| start.checked_add(c)).filter(|&e| e <= b.len()).ok_or_else(|| bad(format!("member {name} runs past the end of the file")))?;
        out.push((name, method, &b[start..end], usize_));
        p = p + 46 + nlen + xlen + clen;
    }
    Ok(out)
}

fn inflate(name: &str, method: u64, data: &[u8], size: u64, limit: u64, bad: &dyn Fn(String) -> Error) -> Result<Vec<u8>> {
    if size > limit {
        return Err(bad(format!("member {name} declares {size} bytes, above the limit {limit}")));
    }
    match method {
        0 => {
            if data.len() as u64 != size {
                return Err(bad(format!("stored member {name}: {} bytes, {size} declared", data.len())));
            }
            Ok(data.to_vec())
        }
        8 => {
            if size > (data.len() as u64).saturating_mul(MAX_RATIO).saturating_add(1024) {
                return Err(bad(format!("member {name} declares {size} bytes from {} compressed (impossible for deflate)", data.len())));
            }
            let v = miniz_oxide::inflate::decompress_to_vec_with_limit(data, size as usize)
                .map_err(|e| bad(format!("member {name}: deflate data is corrupt or longer than declared ({:?})", e.status)))?;
            if v.len() as u64 != size {
                return Err(bad(format!("member {name}: {} bytes inflated, {size} declared", v.len())));
            }
            Ok(v)
        }
        m => Err(bad(format!("member {name}: compression method {m} (only stored or deflate)"))),
    }
}

/// A parsed `.npy`: dtype code, shape, little-endian payload.
pub struct Npy {
    pub descr: String,
    pub shape: Vec<u64>,
    pub data: Vec<u8>,
}

fn header_value<'a>(h: &'a str, key: &str) -> Option<&'a str> {
    let i = h.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = h[i..].trim_start().strip_prefix(':')?.trim_start();
    if let Some(r) = rest.strip_prefix('(') {
        return Some(&r[..r.find(')')?]);
    }
    if let Some(r) = rest.strip_prefix('\'') {
        return Some(&r[..r.find('\'')?]);
    }
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    Some(rest[..end].trim())
}

/// Parses `.npy` bytes (versions 1–3; C order; little-endian or 1-byte types).
pub fn parse_npy(b: Vec<u8>, what: &str) -> Result<Npy> {
    let bad = |m: &str| Error::Data(format!("{what}: {m}"));
    if b.len() < 10 || &b[..6] != b"\x93NUMPY" {
        return Err(bad("not an .npy array"));
    }
    let (hlen, hstart) = match b[6] {
        1 => (u16le(&b, 8).unwrap() as usize, 10usize),
        2 | 3 => (u32le(&b, 8).ok_or_else(|| bad("truncated header"))? as usize, 12),
        v => return Err(bad(&format!(".npy version {v}"))),
    };
    let hend = hstart.checked_add(hlen).filter(|&e| e <= b.len()).ok_or_else(|| bad("truncated header"))?;
    let h = std::str::from_utf8(&b[hstart..hend]).map_err(|_| bad("header is not text"))?;
    let descr = header_value(h, "descr").ok_or_else(|| bad("no descr in header"))?.to_string();
    if header_value(h, "fortran_order") != Some("False") {
        return Err(bad("Fortran-ordered or unreadable fortran_order (save C-ordered arrays)"));
    }
    let shape_s = header_value(h, "shape").ok_or_else(|| bad("no shape in header"))?;
    let shape: Vec<u64> = shape_s
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_end_matches('L').parse::<u64>().map_err(|_| bad(&format!("shape ({shape_s})"))))
        .collect::<Result<_>>()?;
    let item = dtype_size(&descr).ok_or_else(|| bad(&format!("dtype {descr:?} is not supported")))?;
    let count = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d)).ok_or_else(|| bad("shape overflows"))?;
    let bytes = count.checked_mul(item).ok_or_else(|| bad("shape overflows"))?;
    if (b.len() - hend) as u64 != bytes {
        return Err(bad(&format!("{} payload bytes, the header's shape ({shape_s}) and dtype {descr} need {bytes}", b.len() - hend)));
    }
    let mut b = b;
    b.drain(..hend);
    Ok(Npy { descr, shape, data: b })
}

fn dtype_size(d: &str) -> Option<u64> {
    let d = d.strip_prefix('<').or_else(|| d.strip_prefix('|')).or_else(|| d.strip_prefix('=')).unwrap_or(d);
    let (kind, n) = d.split_at(1);
    let n: u64 = n.parse().ok()?;
    match (kind, n) {
        ("f", 4 | 8) | ("i", 1 | 2 | 4 | 8) | ("u", 1 | 2 | 4 | 8) | ("b", 1) | ("S", 1..=64) => Some(n),
        ("U", 1..=64) => Some(4 * n),
        _ => None,
    }
}

impl Npy {
    fn kind(&self) -> (char, usize) {
        let d = self.descr.trim_start_matches(['<', '|', '=']);
        (d.chars().next().unwrap_or('?'), d[1..].parse().unwrap_or(0))
    }

    /// The values as f64 (numeric dtypes).
    pub fn to_f64(&self, what: &str) -> Result<Vec<f64>> {
        let (k, n) = self.kind();
        let c = self.data.chunks_exact(n.max(1));
        Ok(match (k, n) {
            ('f', 8) => c.map(|x| f64::from_le_bytes(x.try_into().unwrap())).collect(),
            ('f', 4) => c.map(|x| f32::from_le_bytes(x.try_into().unwrap()) as f64).collect(),
            ('i', _) => self.to_i64(what)?.into_iter().map(|v| v as f64).collect(),
            ('u', _) | ('b', 1) => self.to_u64(what)?.into_iter().map(|v| v as f64).collect(),
            _ => return Err(Error::Data(format!("{what}: dtype {} is not numeric", self.descr))),
        })
    }

    fn to_i64(&self, what: &str) -> Result<Vec<i64>> {
        let (k, n) = self.kind();
        if k != 'i' {
            return Err(Error::Data(format!("{what}: dtype {} (expected a signed integer type)", self.descr)));
        }
        Ok(self
            .data
            .chunks_exact(n)
            .map(|x| {
                let mut w = [if x[n - 1] & 0x80 != 0 { 0xff } else { 0 }; 8];
                w[..n].copy_from_slice(x);
                i64::from_le_bytes(w)
            })
            .collect())
    }

    fn to_u64(&self, what: &str) -> Result<Vec<u64>> {
        let (k, n) = self.kind();
        if k != 'u' && k != 'b' {
            return Err(Error::Data(format!("{what}: dtype {} (expected an unsigned type)", self.descr)));
        }
        Ok(self
            .data
            .chunks_exact(n)
            .map(|x| {
                let mut w = [0u8; 8];
                w[..n].copy_from_slice(x);
                u64::from_le_bytes(w)
            })
            .collect())
    }

    /// Non-negative integer indices (signed or unsigned types).
    fn to_index(&self, what: &str) -> Result<Vec<u64>> {
        if self.kind().0 == 'u' {
            return self.to_u64(what);
        }
        self.to_i64(what)?
            .into_iter()
            .map(|v| u64::try_from(v).map_err(|_| Error::Data(format!("{what}: negative entry {v}"))))
            .collect()
    }

    fn text(&self) -> String {
        match self.kind() {
            ('S', _) => String::from_utf8_lossy(&self.data).trim_end_matches('\0').to_string(),
            ('U', _) => self
                .data
                .chunks_exact(4)
                .filter_map(|c| char::from_u32(u32::from_le_bytes(c.try_into().unwrap())))
                .filter(|&c| c != '\0')
                .collect(),
            _ => String::new(),
        }
    }
}

/// Reads a file, refusing one above the limit before reading it.
pub fn read_limited(path: &std::path::Path) -> Result<Vec<u8>> {
    let name = path.display();
    let meta = std::fs::metadata(path).map_err(|e| Error::Data(format!("{name}: {e}")))?;
    if meta.len() > MAX_FILE {
        return Err(Error::Data(format!("{name}: {} bytes exceeds the limit {MAX_FILE}", meta.len())));
    }
    std::fs::read(path).map_err(|e| Error::Data(format!("{name}: {e}")))
}

/// Parses a SciPy sparse CSR `.npz` (labels all 0; give them separately).
pub fn parse_csr_npz(b: &[u8], name: &str) -> Result<Dataset> {
    let bad = |m: String| Error::Data(format!("{name}: {m}"));
    let members = zip_members(b, &bad)?;
    let limit = (b.len() as u64).saturating_mul(MAX_RATIO).min(MAX_FILE);
    let get = |key: &str| -> Result<Npy> {
        let (n, m, d, s) = members
            .iter()
            .find(|(n, ..)| n == &format!("{key}.npy"))
            .ok_or_else(|| bad(format!("no {key}.npy: not a scipy.sparse.save_npz file")))?;
        parse_npy(inflate(n, *m, d, *s, limit, &bad)?, &format!("{name}: {key}"))
    };
    let format = get("format")?.text();
    if format != "csr" {
        return Err(bad(format!("sparse format {format:?}: save a CSR matrix (matrix.tocsr())")));
    }
    let shape = get("shape")?.to_index(&format!("{name}: shape"))?;
    let [rows, cols] = shape[..] else { return Err(bad(format!("shape has {} entries, not 2", shape.len()))) };
    if rows == 0 || rows > MAX_ROWS {
        return Err(bad(format!("{rows} rows (1 to {MAX_ROWS})")));
    }
    if cols > MAX_COLS as u64 {
        return Err(bad(format!("{cols} columns, above the limit {MAX_COLS}")));
    }
    let indptr_a = get("indptr")?;
    if indptr_a.shape != [rows + 1] {
        return Err(bad(format!("indptr has shape {:?}, expected [{}]", indptr_a.shape, rows + 1)));
    }
    let indptr = indptr_a.to_index(&format!("{name}: indptr"))?;
    let nnz = *indptr.last().unwrap();
    let indices_a = get("indices")?;
    let data_a = get("data")?;
    if indices_a.shape != [nnz] || data_a.shape != [nnz] {
        return Err(bad(format!("indices {:?} and data {:?} must both have indptr's last entry ({nnz}) entries", indices_a.shape, data_a.shape)));
    }
    let indices = indices_a.to_index(&format!("{name}: indices"))?;
    let data = data_a.to_f64(&format!("{name}: data"))?;
    from_csr(rows, cols, &indptr, &indices, &data, name)
}

/// A data set from CSR arrays (labels all 0), validated as untrusted:
/// sizes first, then indptr monotone from 0, indices in range, values
/// finite; unsorted indices are sorted and duplicates summed (SciPy's
/// meaning).
pub fn from_csr(rows: u64, cols: u64, indptr: &[u64], indices: &[u64], data: &[f64], name: &str) -> Result<Dataset> {
    let bad = |m: String| Error::Data(format!("{name}: {m}"));
    if rows == 0 || rows > MAX_ROWS {
        return Err(bad(format!("{rows} rows (1 to {MAX_ROWS})")));
    }
    if cols > MAX_COLS as u64 {
        return Err(bad(format!("{cols} columns, above the limit {MAX_COLS}")));
    }
    if indptr.len() as u64 != rows + 1 {
        return Err(bad(format!("indptr has {} entries, expected {}", indptr.len(), rows + 1)));
    }
    let nnz = *indptr.last().unwrap();
    if indptr[0] != 0 || indptr.windows(2).any(|w| w[0] > w[1]) || nnz > MAX_NNZ {
        return Err(bad("indptr does not start at 0 and increase".into()));
    }
    if indices.len() as u64 != nnz || data.len() as u64 != nnz {
        return Err(bad(format!("indices ({}) and data ({}) must both have indptr's last entry ({nnz}) entries", indices.len(), data.len())));
    }
    let mut out = Vec::with_capacity(rows as usize);
    for r in 0..rows as usize {
        let (a, z) = (indptr[r] as usize, indptr[r + 1] as usize);
        let mut row: Vec<(usize, f64)> = Vec::with_capacity(z - a);
        for k in a..z {
            let (c, v) = (indices[k], data[k]);
            if c >= cols {
                return Err(bad(format!("row {r}: column {c} outside the shape's {cols} columns")));
            }
            if !v.is_finite() {
                return Err(bad(format!("row {r}: value {v} is not finite")));
            }
            row.push((c as usize, v));
        }
        // scipy allows unsorted indices and duplicates (summed)
        row.sort_by_key(|e| e.0);
        row.dedup_by(|b, a| {
            if a.0 == b.0 {
                a.1 += b.1;
                true
            } else {
                false
            }
        });
        row.retain(|e| e.1 != 0.0);
        out.push(row);
    }
    let n = out.len();
    Ok(Dataset { rows: out, cols: cols as usize, labels: vec![0.0; n] })
}

/// Labels 0/1 or −1/+1 (as 0/1), checked.
pub fn check_labels(raw: Vec<f64>, n: usize, name: &str) -> Result<Vec<f64>> {
    if raw.len() != n {
        return Err(Error::Data(format!("{name}: {} labels for {n} rows", raw.len())));
    }
    raw.into_iter()
        .enumerate()
        .map(|(i, y)| match y {
            y if y == 1.0 => Ok(1.0),
            y if y == 0.0 || y == -1.0 => Ok(0.0),
            y => Err(Error::Data(format!("{name}: label {y} at row {i} (expected 0/1 or -1/+1)"))),
        })
        .collect()
}

/// Labels from `.npy` (1-D, numeric) or text (one per line); 0/1 or −1/+1.
pub fn load_labels(path: &std::path::Path, n: usize) -> Result<Vec<f64>> {
    let name = path.display().to_string();
    let b = read_limited(path)?;
    let raw = if b.starts_with(b"\x93NUMPY") {
        let a = parse_npy(b, &name)?;
        if a.shape.len() != 1 {
            return Err(Error::Data(format!("{name}: labels must be 1-D, shape {:?}", a.shape)));
        }
        a.to_f64(&name)?
    } else {
        let t = String::from_utf8(b).map_err(|_| Error::Data(format!("{name}: labels are neither .npy nor text")))?;
        t.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .enumerate()
            .map(|(i, l)| l.parse::<f64>().map_err(|_| Error::Data(format!("{name}:{}: {l:?} is not a number", i + 1))))
            .collect::<Result<_>>()?
    };
    check_labels(raw, n, &name)
}
