//! Minimal `.npy` reading and writing (C order; float, int and uint dtypes
//! read as f64; written as little-endian f64). The file is untrusted: the
//! header is parsed with length checks and the data size is checked
//! against the shape before anything is allocated.

use crate::{Error, Result};

const MAX_NPY_ELEMS: usize = 1 << 28;

fn bad(m: impl std::fmt::Display) -> Error {
    Error::Input(format!("npy: {m}"))
}

/// Parses `.npy` bytes into (shape, values).
pub fn parse(b: &[u8]) -> Result<(Vec<usize>, Vec<f64>)> {
    if b.len() < 10 || &b[..6] != b"\x93NUMPY" {
        return Err(bad("not a .npy file (bad magic)"));
    }
    let (hlen, start): (usize, usize) = match b[6] {
        1 => (u16::from_le_bytes([b[8], b[9]]) as usize, 10),
        2 | 3 => {
            if b.len() < 12 {
                return Err(bad("truncated header"));
            }
            (u32::from_le_bytes(b[8..12].try_into().expect("4 bytes")) as usize, 12)
        }
        v => return Err(bad(format!("unsupported version {v}"))),
    };
    let end = start.checked_add(hlen).filter(|&e| e <= b.len() && hlen <= 1 << 16).ok_or_else(|| bad("truncated header"))?;
    let h = std::str::from_utf8(&b[start..end]).map_err(|_| bad("header not text"))?;
    let field = |key: &str| -> Result<&str> {
        let k = format!("'{key}':");
        let i = h.find(&k).ok_or_else(|| bad(format!("header lacks {key}")))?;
        Ok(h[i + k.len()..].trim_start())
    };
    let descr = field("descr")?;
    let descr = descr.strip_prefix('\'').and_then(|s| s.split('\'').next()).ok_or_else(|| bad("bad descr"))?;
    if field("fortran_order")?.starts_with("True") {
        return Err(bad("Fortran-order arrays are not supported"));
    }
    let sh = field("shape")?;
    let sh = sh.strip_prefix('(').and_then(|s| s.split(')').next()).ok_or_else(|| bad("bad shape"))?;
    let mut shape = Vec::new();
    for p in sh.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        shape.push(p.parse::<usize>().map_err(|_| bad(format!("bad dimension '{p}'")))?);
    }
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).filter(|&n| n <= MAX_NPY_ELEMS).ok_or_else(|| bad("array too large"))?;
    let (size, conv): (usize, fn(&[u8]) -> f64) = match descr {
        "<f8" => (8, |c| f64::from_le_bytes(c.try_into().expect("8"))),
        "<f4" => (4, |c| f32::from_le_bytes(c.try_into().expect("4")) as f64),
        "<i8" => (8, |c| i64::from_le_bytes(c.try_into().expect("8")) as f64),
        "<i4" => (4, |c| i32::from_le_bytes(c.try_into().expect("4")) as f64),
        "<i2" => (2, |c| i16::from_le_bytes(c.try_into().expect("2")) as f64),
        "|i1" => (1, |c| c[0] as i8 as f64),
        "|u1" => (1, |c| c[0] as f64),
        "<u2" => (2, |c| u16::from_le_bytes(c.try_into().expect("2")) as f64),
        d => return Err(bad(format!("dtype {d} is not supported (use float32/float64/int/uint8)"))),
    };
    let data = &b[end..];
    if data.len() != n * size {
        return Err(bad(format!("data has {} bytes, shape {:?} of {descr} needs {}", data.len(), shape, n * size)));
    }
    let v: Vec<f64> = data.chunks_exact(size).map(conv).collect();
    if v.iter().any(|x| !x.is_finite()) {
        return Err(bad("non-finite values"));
    }
    Ok((shape, v))
}

pub fn read(path: &std::path::Path) -> Result<(Vec<usize>, Vec<f64>)> {
    let b = std::fs::read(path).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
    // "input: x.npy: not a .npy file", not "input: x.npy: input: npy: not a .npy file"
    parse(&b).map_err(|e| match e {
        Error::Input(m) => Error::Input(format!("{}: {}", path.display(), m.strip_prefix("npy: ").unwrap_or(&m))),
        e => Error::Input(format!("{}: {e}", path.display())),
    })
}

/// `.npy` bytes of a little-endian f64 array.
pub fn to_bytes(shape: &[usize], v: &[f64]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let sh = if dims.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
    let mut h = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {sh}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

pub fn write(path: &std::path::Path, shape: &[usize], v: &[f64]) -> Result<()> {
    std::fs::write(path, to_bytes(shape, v)).map_err(|e| Error::Io(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    #[test]
    fn roundtrip_and_garbage() {
        let b = super::to_bytes(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, -6.5]);
        let (s, v) = super::parse(&b).unwrap();
        assert_eq!(s, vec![2, 3]);
        assert_eq!(v[5], -6.5);
        assert!(super::parse(&b[..b.len() - 1]).is_err());
        assert!(super::parse(b"hello").is_err());
    }
}
