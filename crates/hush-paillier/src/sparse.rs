//! Sparse matrices (CSR) with fixed-point integer entries, and their product
//! with a vector of ciphertexts in work proportional to the non-zeros.

use crate::key::{Ciphertext, PublicKey};
use rug::Integer;

/// (base, exponent) terms of a product of powers.
type Terms<'a> = Vec<(&'a Integer, u64)>;

/// Compressed sparse rows. A CSC matrix is the CSR of the transpose
/// ([`Csr::transpose`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Csr {
    pub rows: usize,
    pub cols: usize,
    pub indptr: Vec<usize>,
    pub indices: Vec<u32>,
    pub values: Vec<i64>,
}

impl Csr {
    /// The rows grouped `slots` at a time for slot-packed products: row g
    /// of the result holds, for each k < `slots`, the entries of row
    /// g·`slots` + k with their column c moved to k·`cols` + c. With
    /// ciphertexts `shifted[k·cols + c]` = Enc(y_c · 2^(k·w)) (see
    /// [`crate::proto::s2h_owner_shifted`]), `rows_enc` of row g is
    /// Enc(Σ_k 2^(k·w) · ⟨row g·slots + k, y⟩): the rows' products already
    /// packed, without squaring ciphertexts to shift them.
    pub fn grouped(&self, slots: usize) -> Csr {
        let slots = slots.max(1);
        let groups = self.rows.div_ceil(slots);
        let mut indptr = Vec::with_capacity(groups + 1);
        indptr.push(0);
        let mut indices = Vec::with_capacity(self.indices.len());
        let mut values = Vec::with_capacity(self.values.len());
        for g in 0..groups {
            for k in 0..slots {
                let r = g * slots + k;
                if r >= self.rows {
                    break;
                }
                for (c, v) in self.row(r) {
                    indices.push((k * self.cols + c) as u32);
                    values.push(v);
                }
            }
            indptr.push(indices.len());
        }
        Csr { rows: groups, cols: slots * self.cols, indptr, indices, values }
    }

    /// An empty matrix.
    pub fn zeros(rows: usize, cols: usize) -> Csr {
        Csr { rows, cols, indptr: vec![0; rows + 1], indices: vec![], values: vec![] }
    }

    /// From (row, col, value) triplets (any order; zero values dropped;
    /// duplicates summed).
    pub fn from_triplets(rows: usize, cols: usize, mut t: Vec<(usize, usize, i64)>) -> Csr {
        t.sort_unstable_by_key(|&(r, c, _)| (r, c));
        let mut indptr = vec![0usize; rows + 1];
        let mut indices = Vec::with_capacity(t.len());
        let mut values: Vec<i64> = Vec::with_capacity(t.len());
        let mut last: Option<(usize, usize)> = None;
        for (r, c, v) in t {
            assert!(r < rows && c < cols, "triplet out of range");
            if last == Some((r, c)) {
                *values.last_mut().unwrap() += v;
                continue;
            }
            last = Some((r, c));
            indices.push(c as u32);
            values.push(v);
            indptr[r + 1] += 1;
        }
        for r in 0..rows {
            indptr[r + 1] += indptr[r];
        }
        let mut m = Csr { rows, cols, indptr, indices, values };
        m.drop_zeros();
        m
    }

    fn drop_zeros(&mut self) {
        if self.values.iter().all(|&v| v != 0) {
            return;
        }
        let mut t = Vec::new();
        for r in 0..self.rows {
            for k in self.indptr[r]..self.indptr[r + 1] {
                if self.values[k] != 0 {
                    t.push((r, self.indices[k] as usize, self.values[k]));
                }
            }
        }
        *self = Csr::from_triplets(self.rows, self.cols, t);
    }

    /// Number of stored non-zeros.
    pub fn nnz(&self) -> usize {
        self.values.len()
    }

    /// Entries of row r.
    pub fn row(&self, r: usize) -> impl Iterator<Item = (usize, i64)> + '_ {
        (self.indptr[r]..self.indptr[r + 1]).map(move |k| (self.indices[k] as usize, self.values[k]))
    }

    /// The transpose (equivalently: this matrix in CSC form).
    pub fn transpose(&self) -> Csr {
        let mut counts = vec![0usize; self.cols + 1];
        for &c in &self.indices {
            counts[c as usize + 1] += 1;
        }
        for c in 0..self.cols {
            counts[c + 1] += counts[c];
        }
        let mut next = counts.clone();
        let mut indices = vec![0u32; self.nnz()];
        let mut values = vec![0i64; self.nnz()];
        for r in 0..self.rows {
            for (c, v) in self.row(r) {
                let k = next[c];
                next[c] += 1;
                indices[k] = r as u32;
                values[k] = v;
            }
        }
        Csr { rows: self.cols, cols: self.rows, indptr: counts, indices, values }
    }

    /// The sub-matrix of the given rows (in that order).
    pub fn select_rows(&self, rows: &[usize]) -> Csr {
        let mut indptr = Vec::with_capacity(rows.len() + 1);
        indptr.push(0);
        let mut indices = Vec::new();
        let mut values = Vec::new();
        for &r in rows {
            indices.extend_from_slice(&self.indices[self.indptr[r]..self.indptr[r + 1]]);
            values.extend_from_slice(&self.values[self.indptr[r]..self.indptr[r + 1]]);
            indptr.push(indices.len());
        }
        Csr { rows: rows.len(), cols: self.cols, indptr, indices, values }
    }

    /// Largest number of non-zeros in a row.
    pub fn max_row_nnz(&self) -> usize {
        (0..self.rows).map(|r| self.indptr[r + 1] - self.indptr[r]).max().unwrap_or(0)
    }

    /// Bits of the largest |entry|.
    pub fn max_abs_bits(&self) -> u32 {
        let m = self.values.iter().map(|v| v.unsigned_abs()).max().unwrap_or(0);
        64 - m.leading_zeros()
    }

    /// Bound (in bits) on |row · s| for any vector s of u64 shares:
    /// nnz · 2^(|x| bits) · 2^64.
    pub fn product_bits(&self) -> u32 {
        let k = self.max_row_nnz().max(1) as u64;
        64 + self.max_abs_bits() + (64 - k.leading_zeros())
    }

    /// X · s over Z_{2^64} (wrapping).
    pub fn matvec_ring(&self, s: &[u64]) -> Vec<u64> {
        assert_eq!(s.len(), self.cols);
        (0..self.rows)
            .map(|r| self.row(r).fold(0u64, |acc, (c, v)| acc.wrapping_add((v as u64).wrapping_mul(s[c]))))
            .collect()
    }

    /// X · Enc(s): one ciphertext per row, Π_j Enc(s_j)^{x_rj}. Each row is
    /// a simultaneous (Straus, 1-bit) multi-exponentiation of its positive
    /// and of its negative entries, then one inversion if both exist; cost
    /// ∝ nnz · |x| bits. Rows without entries give Enc(0) = 1 (callers
    /// rerandomise before anything leaves).
    pub fn matvec_enc(&self, pk: &PublicKey, cts: &[Ciphertext]) -> Vec<Ciphertext> {
        assert_eq!(cts.len(), self.cols);
        (0..self.rows).map(|r| self.row_enc(pk, cts, r)).collect()
    }

    /// One row of [`Csr::matvec_enc`].
    pub fn row_enc(&self, pk: &PublicKey, cts: &[Ciphertext], r: usize) -> Ciphertext {
        let (mut pos, mut neg): (Terms, Terms) = (vec![], vec![]);
        for (c, v) in self.row(r) {
            if v > 0 {
                pos.push((&cts[c].0, v as u64));
            } else if v < 0 {
                neg.push((&cts[c].0, v.unsigned_abs()));
            }
        }
        let n2 = pk.n2();
        let p = multi_exp(&pos, n2);
        let n = multi_exp(&neg, n2);
        let out = match (p, n) {
            (None, None) => Integer::from(1),
            (Some(p), None) => p,
            (None, Some(n)) => n.invert(n2).expect("unit"),
            (Some(mut p), Some(n)) => {
                p *= n.invert(n2).expect("unit");
                p %= n2;
                p
            }
        };
        Ciphertext(out)
    }
}

impl Csr {
    /// [`Csr::row_enc`] for the rows in `rows`: eight rows at a time in the
    /// lanes of [`crate::ifma::MontCtx::multi_exp8`] where the CPU has
    /// IFMA (positive and negative entries as two multi-exponentiations,
    /// then one inversion per row with negative entries), else row by row.
    /// Equal to `row_enc` on each row.
    pub fn rows_enc(&self, pk: &PublicKey, cts: &[Ciphertext], rows: std::ops::Range<usize>) -> Vec<Ciphertext> {
        let ctx = if rows.len() > 1 { pk.mont_n2() } else { None };
        let Some(ctx) = ctx else {
            return rows.map(|r| self.row_enc(pk, cts, r)).collect();
        };
        let n2 = pk.n2();
        let mut out = Vec::with_capacity(rows.len());
        let idx: Vec<usize> = rows.collect();
        for chunk in idx.chunks(crate::ifma::LANES) {
            let mut pos: Vec<Vec<(&Integer, u64)>> = Vec::with_capacity(chunk.len());
            let mut neg: Vec<Vec<(&Integer, u64)>> = Vec::with_capacity(chunk.len());
            for &r in chunk {
                let (mut p, mut q) = (vec![], vec![]);
                for (c, v) in self.row(r) {
                    if v > 0 {
                        p.push((&cts[c].0, v as u64));
                    } else if v < 0 {
                        q.push((&cts[c].0, v.unsigned_abs()));
                    }
                }
                pos.push(p);
                neg.push(q);
            }
            let pv = ctx.multi_exp8(&pos);
            let mut inv: Vec<Option<Integer>> = vec![None; chunk.len()];
            if neg.iter().any(|q| !q.is_empty()) {
                // the negative parts' inverses with one inversion (Montgomery's trick)
                let nv = ctx.multi_exp8(&neg);
                let ks: Vec<usize> = (0..chunk.len()).filter(|&k| !neg[k].is_empty()).collect();
                let mut prefix = Vec::with_capacity(ks.len());
                let mut acc = Integer::from(1);
                for &k in &ks {
                    acc *= &nv[k];
                    acc %= n2;
                    prefix.push(acc.clone());
                }
                let mut rest = acc.invert(n2).expect("unit");
                for (idx, &k) in ks.iter().enumerate().rev() {
                    let mut x = if idx == 0 { rest.clone() } else { Integer::from(&rest * &prefix[idx - 1]) % n2 };
                    x %= n2;
                    rest *= &nv[k];
                    rest %= n2;
                    inv[k] = Some(x);
                }
            }
            for (k, mut p) in pv.into_iter().enumerate() {
                if let Some(i) = &inv[k] {
                    p *= i;
                    p %= n2;
                }
                out.push(Ciphertext(p));
            }
        }
        out
    }
}

/// Row products on demand for `h2s_eval_with`: `f(r)` is
/// `x.row_enc(pk, cts, r)`, computed [`ROWS_AHEAD`] rows at a time with
/// [`Csr::rows_enc`] when `r` leaves the cached run (rows are asked for in
/// order, so this keeps the streaming overlap at that granularity).
pub fn row_enc_stream<'a>(x: &'a Csr, pk: &'a PublicKey, cts: &'a [Ciphertext]) -> impl FnMut(usize) -> Ciphertext + 'a {
    let mut cache: (usize, Vec<Ciphertext>) = (0, Vec::new());
    move |r| {
        if r < cache.0 || r >= cache.0 + cache.1.len() {
            let hi = (r + ROWS_AHEAD).min(x.rows);
            cache = (r, x.rows_enc(pk, cts, r..hi));
        }
        cache.1[r - cache.0].clone()
    }
}

/// Rows computed per refill of [`row_enc_stream`].
pub const ROWS_AHEAD: usize = 64;

/// Π b_i^{e_i} mod m (Straus with 1-bit windows); None for no terms.
pub(crate) fn multi_exp(terms: &[(&Integer, u64)], m: &Integer) -> Option<Integer> {
    if terms.is_empty() {
        return None;
    }
    if terms.len() == 1 {
        return Some(Integer::from(terms[0].0.pow_mod_ref(&Integer::from(terms[0].1), m).unwrap()));
    }
    let top = terms.iter().map(|t| 64 - t.1.leading_zeros()).max().unwrap();
    let mut acc: Option<Integer> = None;
    for bit in (0..top).rev() {
        if let Some(a) = acc.as_mut() {
            a.square_mut();
            *a %= m;
        }
        for (b, e) in terms {
            if (e >> bit) & 1 == 1 {
                match acc.as_mut() {
                    None => acc = Some((*b).clone()),
                    Some(a) => {
                        *a *= *b;
                        *a %= m;
                    }
                }
            }
        }
    }
    acc
}
