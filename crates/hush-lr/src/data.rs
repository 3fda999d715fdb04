//! Input data: libsvm/svmlight text, synthetic sparse data with a planted
//! model, fixed-point quantisation.

use crate::{Error, Result, FRAC, XBITS};
use hush_paillier::sparse::Csr;
use rand::{Rng, SeedableRng};

/// A sparse data set in floating point: rows of (column, value), labels.
#[derive(Clone, Debug)]
pub struct Dataset {
    pub rows: Vec<Vec<(usize, f64)>>,
    pub cols: usize,
    pub labels: Vec<f64>,
}

/// Largest file accepted (bytes) and largest feature index.
pub const MAX_FILE: u64 = 8 << 30;
pub const MAX_COLS: usize = 1 << 26;

impl Dataset {
    /// Parses libsvm/svmlight text: `label idx:value ...` with 1-based,
    /// strictly increasing indices; labels 0/1 or −1/+1; `#` comments.
    pub fn parse_libsvm(text: &str, name: &str) -> Result<Dataset> {
        let mut rows = Vec::new();
        let mut labels = Vec::new();
        let mut cols = 0usize;
        for (ln, line) in text.lines().enumerate() {
            let bad = |m: String| Error::Data(format!("{name}:{}: {m}", ln + 1));
            let line = line.split('#').next().unwrap().trim();
            if line.is_empty() {
                continue;
            }
            let mut it = line.split_ascii_whitespace();
            let lab: f64 = it.next().unwrap().parse().map_err(|_| bad("label is not a number".into()))?;
            let lab = match lab {
                l if l == 1.0 => 1.0,
                l if l == 0.0 || l == -1.0 => 0.0,
                l => return Err(bad(format!("label {l} (expected 0/1 or -1/+1)"))),
            };
            let mut row = Vec::new();
            let mut last = 0usize;
            for tok in it {
                let (i, v) = tok.split_once(':').ok_or_else(|| bad(format!("{tok:?} is not idx:value")))?;
                let i: usize = i.parse().map_err(|_| bad(format!("bad index {i:?}")))?;
                let v: f64 = v.parse().map_err(|_| bad(format!("bad value {v:?}")))?;
                if i == 0 || i <= last {
                    return Err(bad(format!("index {i} (indices are 1-based and strictly increasing)")));
                }
                if i > MAX_COLS {
                    return Err(bad(format!("index {i} above the limit {MAX_COLS}")));
                }
                if !v.is_finite() {
                    return Err(bad(format!("value {v} is not finite")));
                }
                last = i;
                cols = cols.max(i);
                if v != 0.0 {
                    row.push((i - 1, v));
                }
            }
            rows.push(row);
            labels.push(lab);
        }
        if rows.is_empty() {
            return Err(Error::Data(format!("{name}: no samples")));
        }
        Ok(Dataset { rows, cols, labels })
    }

    /// Reads a libsvm file (size checked first).
    pub fn load(path: &std::path::Path) -> Result<Dataset> {
        let name = path.display().to_string();
        let meta = std::fs::metadata(path).map_err(|e| Error::Data(format!("{name}: {e}")))?;
        if meta.len() > MAX_FILE {
            return Err(Error::Data(format!("{name}: {} bytes exceeds the limit", meta.len())));
        }
        let text = std::fs::read_to_string(path).map_err(|e| Error::Data(format!("{name}: {e}")))?;
        Self::parse_libsvm(&text, &name)
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Columns [lo, hi) as a new data set (renumbered from 0).
    pub fn columns(&self, lo: usize, hi: usize) -> Dataset {
        let rows = self
            .rows
            .iter()
            .map(|r| r.iter().filter(|(c, _)| *c >= lo && *c < hi).map(|&(c, v)| (c - lo, v)).collect())
            .collect();
        Dataset { rows, cols: hi - lo, labels: self.labels.clone() }
    }

    /// The given rows.
    pub fn subset(&self, idx: &[usize]) -> Dataset {
        Dataset {
            rows: idx.iter().map(|&i| self.rows[i].clone()).collect(),
            cols: self.cols,
            labels: idx.iter().map(|&i| self.labels[i]).collect(),
        }
    }

    /// Per-column standardisation constants (mean, std) on this set.
    pub fn scaler(&self) -> Vec<(f64, f64)> {
        let n = self.len() as f64;
        let mut s = vec![(0.0, 0.0); self.cols];
        for r in &self.rows {
            for &(c, v) in r {
                s[c].0 += v;
                s[c].1 += v * v;
            }
        }
        s.iter().map(|&(a, b)| (a / n, ((b / n) - (a / n).powi(2)).max(1e-12).sqrt())).collect()
    }

    /// Per-column (min, max) on this set, counting the implicit zeros of
    /// sparse rows (for [`Dataset::scale_sym`]).
    pub fn range_scaler(&self) -> Vec<(f64, f64)> {
        let mut s = vec![(f64::INFINITY, f64::NEG_INFINITY); self.cols];
        let mut count = vec![0usize; self.cols];
        for r in &self.rows {
            for &(c, v) in r {
                s[c].0 = s[c].0.min(v);
                s[c].1 = s[c].1.max(v);
                count[c] += 1;
            }
        }
        for (c, r) in s.iter_mut().enumerate() {
            if count[c] < self.len() {
                r.0 = r.0.min(0.0);
                r.1 = r.1.max(0.0);
            }
        }
        s
    }

    /// Applies x ← 2(x − min)/(max − min) − 1 densely (to [−1, 1] on the set
    /// the constants come from; a constant column becomes 0). Each party
    /// does this on its own columns, so the vertical split changes nothing.
    pub fn scale_sym(&self, sc: &[(f64, f64)]) -> Dataset {
        self.map_dense(|c, v| {
            let (lo, hi) = sc[c];
            if hi > lo {
                2.0 * (v - lo) / (hi - lo) - 1.0
            } else {
                0.0
            }
        })
    }

    /// Applies `f(column, value)` to every entry of every row, zeros
    /// included (densely), keeping the non-zero results sparse.
    fn map_dense(&self, f: impl Fn(usize, f64) -> f64) -> Dataset {
        let rows = self
            .rows
            .iter()
            .map(|r| {
                let mut d = vec![0.0; self.cols];
                for &(c, v) in r {
                    d[c] = v;
                }
                d.iter().enumerate().map(|(c, &v)| (c, f(c, v))).filter(|&(_, v)| v != 0.0).collect()
            })
            .collect();
        Dataset { rows, cols: self.cols, labels: self.labels.clone() }
    }

    /// Joins the columns of `other` (same samples) after this set's.
    pub fn hjoin(&self, other: &Dataset) -> Dataset {
        let rows = self
            .rows
            .iter()
            .zip(&other.rows)
            .map(|(a, b)| a.iter().copied().chain(b.iter().map(|&(c, v)| (c + self.cols, v))).collect())
            .collect();
        Dataset { rows, cols: self.cols + other.cols, labels: self.labels.clone() }
    }

    /// Applies x ← (x − mean)/std densely (for dense data such as
    /// breast_cancer; sparse data should use `scale_only`).
    pub fn standardize(&self, sc: &[(f64, f64)]) -> Dataset {
        self.map_dense(|c, v| (v - sc[c].0) / sc[c].1)
    }

    /// Fixed-point CSR (FRAC fractional bits), values clamped to
    /// |x| < 2^(XBITS−FRAC).
    pub fn to_fixed(&self) -> Result<Csr> {
        let lim = ((1i64 << XBITS) - 1) as f64;
        let mut t = Vec::new();
        for (r, row) in self.rows.iter().enumerate() {
            for &(c, v) in row {
                let q = (v * (1u64 << FRAC) as f64).round().clamp(-lim, lim) as i64;
                t.push((r, c, q));
            }
        }
        Ok(Csr::from_triplets(self.len(), self.cols, t))
    }
}

/// Reads a party's data: SciPy sparse `.npz` (by its zip signature) with
/// labels from `labels` if given, or libsvm text (labels inline; `labels`
/// must then be absent). Returns the data and whether it carries labels.
pub fn load_with_labels(path: &std::path::Path, labels: Option<&std::path::Path>) -> Result<(Dataset, bool)> {
    let name = path.display().to_string();
    let mut head = [0u8; 4];
    let is_zip = {
        use std::io::Read;
        let mut f = std::fs::File::open(path).map_err(|e| Error::Data(format!("{name}: {e}")))?;
        f.read(&mut head).map_err(|e| Error::Data(format!("{name}: {e}")))? == 4 && head == *b"PK\x03\x04"
    };
    if is_zip {
        let b = crate::npz::read_limited(path)?;
        let mut ds = crate::npz::parse_csr_npz(&b, &name)?;
        Ok(match labels {
            Some(l) => {
                ds.labels = crate::npz::load_labels(l, ds.len())?;
                (ds, true)
            }
            None => (ds, false),
        })
    } else {
        if labels.is_some() {
            return Err(Error::Config(format!("--labels is for .npz data; {name} is libsvm text, which carries its labels")));
        }
        Ok((Dataset::load(path)?, true))
    }
}

/// Reads a party's data from CSV with an ID column (for `hush train
/// --ids-column`): a header line, the IDs in `id_col`, the labels (0/1 or
/// −1/+1) in `label_col` if the file has that column, every other column a
/// numeric feature (empty cells are refused). Returns the data, whether it
/// carries labels, and the IDs (unique, checked).
pub fn load_csv_with_ids(path: &std::path::Path, id_col: &str, label_col: &str) -> Result<(Dataset, bool, Vec<String>)> {
    let name = path.display().to_string();
    let t = hush_psi::csv::Table::load(path)?;
    let ids = t.ids(id_col, &name)?;
    let idc = t.column(id_col, &name)?;
    let lc = t.columns.iter().position(|c| c == label_col && c != id_col);
    let feat: Vec<usize> = (0..t.columns.len()).filter(|&c| c != idc && Some(c) != lc).collect();
    if feat.len() > MAX_COLS {
        return Err(Error::Data(format!("{name}: {} feature columns above the limit {MAX_COLS}", feat.len())));
    }
    let mut rows = Vec::with_capacity(t.fields.len());
    let mut labels = Vec::with_capacity(t.fields.len());
    for (r, f) in t.fields.iter().enumerate() {
        let bad = |m: String| Error::Data(format!("{name}:{}: {m}", t.line_no[r]));
        let mut row = Vec::new();
        for (j, &c) in feat.iter().enumerate() {
            let v: f64 = f[c].trim().parse().map_err(|_| bad(format!("column {:?}: {:?} is not a number", t.columns[c], f[c])))?;
            if !v.is_finite() {
                return Err(bad(format!("column {:?}: {v} is not finite", t.columns[c])));
            }
            if v != 0.0 {
                row.push((j, v));
            }
        }
        rows.push(row);
        if let Some(lc) = lc {
            let l: f64 = f[lc].trim().parse().map_err(|_| bad(format!("label {:?} is not a number", f[lc])))?;
            labels.push(match l {
                l if l == 1.0 => 1.0,
                l if l == 0.0 || l == -1.0 => 0.0,
                l => return Err(bad(format!("label {l} (expected 0/1 or -1/+1)"))),
            });
        } else {
            labels.push(0.0);
        }
    }
    Ok((Dataset { rows, cols: feat.len(), labels }, lc.is_some(), ids))
}

/// Synthetic sparse data with a planted model, generated as documented:
/// `n` samples × `d` features; each entry is non-zero independently with
/// probability `density`, its value uniform in [−1, 1]; the planted model
/// has weights ±U[1, 2] (sign uniform) and the label is
/// 1[w*·x + ε > 0] with ε ~ U[−0.1, 0.1]. Returns the data and w*.
pub fn synthetic(n: usize, d: usize, density: f64, seed: u64) -> (Dataset, Vec<f64>) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let w: Vec<f64> = (0..d).map(|_| rng.gen_range(1.0..2.0) * if rng.gen::<bool>() { 1.0 } else { -1.0 }).collect();
    let mut rows = Vec::with_capacity(n);
    let mut labels = Vec::with_capacity(n);
    let sparse = density < 0.05;
    for _ in 0..n {
        let mut row = Vec::new();
        if sparse {
            // geometric skipping: work ∝ non-zeros
            let mut c = 0usize;
            loop {
                let u: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
                c += (u.ln() / (1.0 - density).ln()).floor() as usize;
                if c >= d {
                    break;
                }
                row.push((c, rng.gen_range(-1.0..1.0)));
                c += 1;
            }
        } else {
            for c in 0..d {
                if rng.gen_bool(density) {
                    row.push((c, rng.gen_range(-1.0..1.0)));
                }
            }
        }
        let z: f64 = row.iter().map(|&(c, v)| w[c] * v).sum::<f64>() + rng.gen_range(-0.1..0.1);
        labels.push(if z > 0.0 { 1.0 } else { 0.0 });
        rows.push(row);
    }
    (Dataset { rows, cols: d, labels }, w)
}
