//! Matrix Beaver triples: A (m×k), B (k×n) uniform over Z_2^ℓ and
//! C = A·B over the ring, shared additively; consumed by
//! [`crate::transformer::Ctx::matmul`] for products of two secret matrices
//! (attention's Q·Kᵀ and P·V). The matrix form of Beaver's triples
//! (Mohassel and Zhang, SecureML, S&P 2017, §4.1): one triple per matrix
//! product, so the online opening is m·k + k·n elements instead of the m·k·n
//! of element-wise triples.
//!
//! A request deals `count` independent triples of the same dimensions
//! (row-major, matrix after matrix).
//!
//! **Seeded.** Party 1's A₁, B₁, C₁ are PRG streams under its sub-key;
//! party 0's A₀, B₀ are streams under the batch key and
//! C₀ = (A₀ + A₁)(B₀ + B₁) − C₁. **What each host sees.** Its own shares:
//! A_p and B_p are uniform, C_p is masked by the other party's uniform
//! C-share, so a host learns nothing about A, B or C. The dealer computes
//! the product and never sees online data.

use super::trunc::ring_stream;
use hush_deal::wire::{Reader, Writer};
use hush_deal::{ring_mask, Blob, BlobReader, DealRequest, Description, Error, Result};
use hush_primitives::Block;
use zeroize::Zeroize;

/// Largest dimension of a dealt matrix.
pub const MAX_DIM: u32 = 1 << 16;
/// Largest number of ring words (all of A, B, C over all matrices) one
/// request may deal.
pub const MAX_WORDS: u64 = 1 << 22;

/// Dimensions of one matrix triple.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatDims {
    pub m: usize,
    pub k: usize,
    pub n: usize,
}

impl MatDims {
    pub fn words(&self) -> u64 {
        (self.m * self.k + self.k * self.n + self.m * self.n) as u64
    }
}

/// One party's share of `count` matrix triples (row-major, concatenated).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MatrixShare {
    pub a: Vec<u64>,
    pub b: Vec<u64>,
    pub c: Vec<u64>,
}

impl Drop for MatrixShare {
    fn drop(&mut self) {
        hush_primitives::wipe::wipe_vec_u64(&mut self.a);
        hush_primitives::wipe::wipe_vec_u64(&mut self.b);
        hush_primitives::wipe::wipe_vec_u64(&mut self.c);
    }
}

impl MatrixShare {
    pub fn to_bytes(&self, bits: u32) -> Vec<u8> {
        let mut b = Blob::new();
        b.put_ring(&self.a, bits).put_ring(&self.b, bits).put_ring(&self.c, bits);
        std::mem::take(&mut b.0)
    }
    pub fn from_bytes(buf: &[u8], count: usize, d: MatDims, bits: u32) -> Result<Self> {
        let mut rd = BlobReader::new(buf);
        let t = MatrixShare {
            a: rd.take_ring(count * d.m * d.k, bits)?,
            b: rd.take_ring(count * d.k * d.n, bits)?,
            c: rd.take_ring(count * d.m * d.n, bits)?,
        };
        rd.finish()?;
        Ok(t)
    }
}

const A0: u64 = 1;
const B0: u64 = 2;
const A1: u64 = 4;
const B1: u64 = 5;
const C1: u64 = 6;

fn party1(sub: Block, count: usize, d: MatDims, bits: u32) -> MatrixShare {
    MatrixShare {
        a: ring_stream(sub, A1, count * d.m * d.k, bits),
        b: ring_stream(sub, B1, count * d.k * d.n, bits),
        c: ring_stream(sub, C1, count * d.m * d.n, bits),
    }
}

/// C = A·B over Z_2^64 (reduced by the caller), row-major
/// ([`hush_primitives::gemm`]).
pub fn matmul_ring(a: &[u64], b: &[u64], d: MatDims, out: &mut [u64]) {
    hush_primitives::gemm::gemm(a, b, d.m, d.k, d.n, out);
}

/// `party`'s share of `count` matrix triples over Z_2^bits.
pub fn deal_matrix(key: Block, party: u8, count: usize, d: MatDims, bits: u32) -> MatrixShare {
    let one = party1(hush_deal::sub_key(key, 1), count, d, bits);
    if party == 1 {
        return one;
    }
    let msk = ring_mask(bits);
    let a0 = ring_stream(key, A0, count * d.m * d.k, bits);
    let b0 = ring_stream(key, B0, count * d.k * d.n, bits);
    let mut c0 = vec![0u64; count * d.m * d.n];
    let mut a: Vec<u64> = a0.iter().zip(&one.a).map(|(x, y)| x.wrapping_add(*y)).collect();
    let mut b: Vec<u64> = b0.iter().zip(&one.b).map(|(x, y)| x.wrapping_add(*y)).collect();
    let (ma, mb, mc) = (d.m * d.k, d.k * d.n, d.m * d.n);
    for q in 0..count {
        let out = &mut c0[q * mc..(q + 1) * mc];
        matmul_ring(&a[q * ma..(q + 1) * ma], &b[q * mb..(q + 1) * mb], d, out);
        for (o, c1) in out.iter_mut().zip(&one.c[q * mc..(q + 1) * mc]) {
            *o = o.wrapping_sub(*c1) & msk;
        }
    }
    a.zeroize();
    b.zeroize();
    MatrixShare { a: a0, b: b0, c: c0 }
}

/// Matrix triples (parameters: ring width `bits` in 1..=64 and the
/// dimensions m, k, n in 1..=[`MAX_DIM`]; the request's `n` is the number
/// of triples; at most [`MAX_WORDS`] words per request).
pub struct MatrixTriples;
pub static MATRIX_TRIPLES: MatrixTriples = MatrixTriples;

impl MatrixTriples {
    pub const KIND: &'static str = "2pc/matrix-triples";

    pub fn request(batch: u64, count: u32, bits: u32, d: MatDims) -> DealRequest {
        let mut w = Writer::default();
        w.u32(bits).u32(d.m as u32).u32(d.k as u32).u32(d.n as u32);
        DealRequest::new(Self::KIND, batch, count, w.0)
    }

    /// Parses and checks the parameters against the request's count.
    pub fn params(count: u32, params: &[u8]) -> Result<(u32, MatDims)> {
        let (bits, m, k, n) =
            hush_deal::parse_params(params, "matrix-triple parameters", |r: &mut Reader<'_>| Ok((r.u32()?, r.u32()?, r.u32()?, r.u32()?)))?;
        if !(1..=64).contains(&bits) {
            return Err(Error::Refused(format!("matrix triples: ring width {bits} out of range 1..=64")));
        }
        for (name, v) in [("m", m), ("k", k), ("n", n)] {
            if !(1..=MAX_DIM).contains(&v) {
                return Err(Error::Refused(format!("matrix triples: dimension {name} = {v} out of range 1..={MAX_DIM}")));
            }
        }
        let d = MatDims { m: m as usize, k: k as usize, n: n as usize };
        if count == 0 || (count as u64).saturating_mul(d.words()) > MAX_WORDS {
            return Err(Error::Refused(format!("matrix triples: {count} triples of {m}×{k}·{k}×{n} exceed {MAX_WORDS} words")));
        }
        Ok((bits, d))
    }
}

impl Description for MatrixTriples {
    fn kind(&self) -> &'static str {
        Self::KIND
    }
    fn label(&self, batch: u64, n: u32, params: &[u8]) -> Result<String> {
        let (bits, d) = Self::params(n, params)?;
        Ok(format!("{}/{batch}/{n}/{bits}/{}x{}x{}", Self::KIND, d.m, d.k, d.n))
    }
    fn deal(&self, key: Block, party: u8, n: u32, params: &[u8]) -> Result<Vec<u8>> {
        let (bits, d) = Self::params(n, params)?;
        Ok(deal_matrix(key, party, n as usize, d, bits).to_bytes(bits))
    }
    fn seeded_party(&self) -> Option<u8> {
        Some(1)
    }
    fn expand(&self, sub: Block, n: u32, params: &[u8]) -> Result<Vec<u8>> {
        let (bits, d) = Self::params(n, params)?;
        Ok(party1(sub, n as usize, d, bits).to_bytes(bits))
    }
}

/// One-sided matrix triples for a product X·W whose right factor W is
/// **one party's own** (the server's weights, party 0), the dealer-mode
/// linear layers' correlation (issue 28: "the dealer must never see W").
///
/// Party 1 (the client) gets A (m×k) and C₁ (m×n) as PRG streams under its
/// sub-key; party 0 (the weight holder) gets a seed for B (k×n) and
/// C₀ = A·B − C₁. Consumed by [`crate::transformer::Ctx::weight_matmul`]:
/// the client opens U = X₁ − A, the server opens V = W − B, and
///
/// > (X₀ + U)·W + C₀  +  A·V + C₁  =  X·W − A·W + A·W − A·B + A·B  =  X·W.
///
/// **Why one-sided.** The two-sided matrix triple ([`MatrixTriples`])
/// shares both factors, so both parties open both differences and each
/// computes two products; here each party opens one matrix and computes
/// one product (X₀ + U)·W resp. A·V, the dealer one (A·B): three products
/// per layer instead of five, and the client sends only m·k words.
///
/// **What each host sees.** The client sees V = W − B with B uniform and
/// unknown to it (B's seed goes to party 0 only), so V is uniform whatever
/// W is; it also holds A and C₁, independent of W. The server sees U =
/// X₁ − A with A uniform and unknown to it: uniform whatever X₁ is. C₀ is
/// masked by the client's uniform C₁. The dealer computes A·B and never
/// sees U, V, X or W (it takes no part in the online phase). Each triple
/// is used for one product only (fresh batch per request), so V and U are
/// one-time pads. The curious-party test is
/// `weight_triples_views_do_not_depend_on_the_secret_factor`
/// (crates/hush-2pc/tests/transformer.rs).
pub struct WeightTriples;
pub static WEIGHT_TRIPLES: WeightTriples = WeightTriples;

/// One party's share of `count` one-sided triples: party 0 holds B (`ab`)
/// and C₀, party 1 holds A (`ab`) and C₁.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WeightShare {
    pub ab: Vec<u64>,
    pub c: Vec<u64>,
}

impl Drop for WeightShare {
    fn drop(&mut self) {
        hush_primitives::wipe::wipe_vec_u64(&mut self.ab);
        hush_primitives::wipe::wipe_vec_u64(&mut self.c);
    }
}

const WB: u64 = 7;
const WA: u64 = 8;
const WC1: u64 = 9;
/// Sub-key index of party 0's B seed (party 1's is 1).
const WB_SEED: u8 = 2;

fn weight_party1(sub: Block, count: usize, d: MatDims, bits: u32) -> WeightShare {
    WeightShare { ab: ring_stream(sub, WA, count * d.m * d.k, bits), c: ring_stream(sub, WC1, count * d.m * d.n, bits) }
}

impl WeightShare {
    /// Party 0's bytes are its B seed and C₀; party 1's are A and C₁.
    pub fn from_bytes(buf: &[u8], party: u8, count: usize, d: MatDims, bits: u32) -> Result<Self> {
        let mut rd = BlobReader::new(buf);
        let t = if party == 0 {
            let seed = rd.take_ring(2, 64)?;
            let c = rd.take_ring(count * d.m * d.n, bits)?;
            WeightShare { ab: ring_stream(Block::from_u64s(seed[0], seed[1]), WB, count * d.k * d.n, bits), c }
        } else {
            WeightShare { ab: rd.take_ring(count * d.m * d.k, bits)?, c: rd.take_ring(count * d.m * d.n, bits)? }
        };
        rd.finish()?;
        Ok(t)
    }
}

/// `party`'s dealt bytes for `count` one-sided triples over Z_2^bits.
pub fn deal_weight(key: Block, party: u8, count: usize, d: MatDims, bits: u32) -> Vec<u8> {
    let one = weight_party1(hush_deal::sub_key(key, 1), count, d, bits);
    let mut b = Blob::new();
    if party == 1 {
        b.put_ring(&one.ab, bits).put_ring(&one.c, bits);
        return std::mem::take(&mut b.0);
    }
    let seed = hush_deal::sub_key(key, WB_SEED);
    let mut bm = ring_stream(seed, WB, count * d.k * d.n, bits);
    let msk = ring_mask(bits);
    let (ma, mb, mc) = (d.m * d.k, d.k * d.n, d.m * d.n);
    let mut c0 = vec![0u64; count * mc];
    for q in 0..count {
        let out = &mut c0[q * mc..(q + 1) * mc];
        matmul_ring(&one.ab[q * ma..(q + 1) * ma], &bm[q * mb..(q + 1) * mb], d, out);
        for (o, c1) in out.iter_mut().zip(&one.c[q * mc..(q + 1) * mc]) {
            *o = o.wrapping_sub(*c1) & msk;
        }
    }
    bm.zeroize();
    let mut s = vec![seed.lo(), seed.hi()];
    b.put_ring(&s, 64).put_ring(&c0, bits);
    s.zeroize();
    c0.zeroize();
    std::mem::take(&mut b.0)
}

impl WeightTriples {
    pub const KIND: &'static str = "2pc/weight-triples";

    pub fn request(batch: u64, count: u32, bits: u32, d: MatDims) -> DealRequest {
        let mut w = Writer::default();
        w.u32(bits).u32(d.m as u32).u32(d.k as u32).u32(d.n as u32);
        DealRequest::new(Self::KIND, batch, count, w.0)
    }
}

impl Description for WeightTriples {
    fn kind(&self) -> &'static str {
        Self::KIND
    }
    fn label(&self, batch: u64, n: u32, params: &[u8]) -> Result<String> {
        let (bits, d) = MatrixTriples::params(n, params)?;
        Ok(format!("{}/{batch}/{n}/{bits}/{}x{}x{}", Self::KIND, d.m, d.k, d.n))
    }
    fn deal(&self, key: Block, party: u8, n: u32, params: &[u8]) -> Result<Vec<u8>> {
        let (bits, d) = MatrixTriples::params(n, params)?;
        Ok(deal_weight(key, party, n as usize, d, bits))
    }
    fn seeded_party(&self) -> Option<u8> {
        Some(1)
    }
    fn expand(&self, sub: Block, n: u32, params: &[u8]) -> Result<Vec<u8>> {
        let (bits, d) = MatrixTriples::params(n, params)?;
        let one = weight_party1(sub, n as usize, d, bits);
        let mut b = Blob::new();
        b.put_ring(&one.ab, bits).put_ring(&one.c, bits);
        Ok(std::mem::take(&mut b.0))
    }
}
