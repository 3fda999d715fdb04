//! Truncation pairs: the correlation of [`crate::transformer::Ctx::trunc`],
//! hush's one-opening faithful truncation of *bounded* values
//! (|x| < 2^{ℓ−2}).
//!
//! Per element: a uniform r ∈ Z_2^ℓ, shared additively, with additive
//! shares (over Z_2^ℓ) of r_hi = ⌊r / 2^f⌋ and of r_msb = ⌊r / 2^{ℓ−1}⌋.
//! This is the dealer-assisted form of the truncation pair of Mohassel and
//! Zhang (SecureML, S&P 2017) with the extra most-significant-bit share that
//! makes the wrap-around exact, as in the "known MSB" truncation of
//! Escudero, Ghosh, Keller, Rachuri and Scholl (CRYPTO 2020, §5).
//!
//! **Seeded.** Party 1's three shares are PRG streams under its sub-key
//! ([`hush_deal::sub_key`]); party 0's r-share is a stream under the batch
//! key and its r_hi and r_msb shares are the differences to the true values.
//! **What each host sees.** Its own share of each of the three values; each
//! is uniform on its own (a uniform stream, or a true value minus the
//! other party's uniform stream), so neither host learns r, r_hi or r_msb.
//! The dealer (or the modules) compute r and never see online data.

use hush_deal::wire::{Reader, Writer};
use hush_deal::{ring_mask, stream, Blob, BlobReader, DealRequest, Description, Error, Result};
use hush_primitives::aes::Aes128;
use hush_primitives::Block;
use zeroize::Zeroize;

/// One party's share of `n` truncation pairs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TruncShare {
    pub r: Vec<u64>,
    pub hi: Vec<u64>,
    pub msb: Vec<u64>,
}

impl Drop for TruncShare {
    fn drop(&mut self) {
        hush_primitives::wipe::wipe_vec_u64(&mut self.r);
        hush_primitives::wipe::wipe_vec_u64(&mut self.hi);
        hush_primitives::wipe::wipe_vec_u64(&mut self.msb);
    }
}

impl TruncShare {
    pub fn to_bytes(&self, bits: u32) -> Vec<u8> {
        let mut b = Blob::new();
        b.put_ring(&self.r, bits).put_ring(&self.hi, bits).put_ring(&self.msb, bits);
        std::mem::take(&mut b.0)
    }
    pub fn from_bytes(buf: &[u8], n: usize, bits: u32) -> Result<Self> {
        let mut rd = BlobReader::new(buf);
        let t = TruncShare { r: rd.take_ring(n, bits)?, hi: rd.take_ring(n, bits)?, msb: rd.take_ring(n, bits)? };
        rd.finish()?;
        Ok(t)
    }
}

const R0: u64 = 1;
const R1: u64 = 4;
const H1: u64 = 5;
const M1: u64 = 6;

/// Words `start ..` of [`ring_stream`] (as many as `out` holds), under the
/// stream key expanded once per share (`aes` = `Aes128::new(key)`).
pub(crate) fn ring_part(aes: &Aes128, nonce: u64, start: usize, bits: u32, out: &mut [u64]) {
    hush_deal::stream_at_with(aes, nonce, start, out);
    if bits < 64 {
        let m = ring_mask(bits);
        out.iter_mut().for_each(|x| *x &= m);
    }
}

/// Party 1's first arrays (r, hi, msb and then the streams `more`) of
/// items `start ..` into `v`.
fn party1_part(sub: &Aes128, start: usize, bits: u32, more: &[u64], v: &mut [Vec<u64>]) {
    for (o, &nonce) in v.iter_mut().zip([R1, H1, M1].iter().chain(more)) {
        ring_part(sub, nonce, start, bits, o);
    }
}

/// Party 0's (r, hi, msb) of items `start ..` into `v[0..3]`, against party
/// 1's, which must be in `one[0..3]`.
fn party0_part(key: &Aes128, start: usize, bits: u32, f: u32, v: &mut [Vec<u64>], one: &[Vec<u64>]) {
    let m = ring_mask(bits);
    ring_part(key, R0, start, bits, &mut v[0]);
    let (r0, rest) = v.split_at_mut(1);
    let (hi, msb) = rest.split_at_mut(1);
    for i in 0..r0[0].len() {
        let r = r0[0][i].wrapping_add(one[0][i]) & m;
        hi[0][i] = (r >> f).wrapping_sub(one[1][i]) & m;
        msb[0][i] = (r >> (bits - 1)).wrapping_sub(one[2][i]) & m;
    }
}

/// [`deal_trunc`]`(…).to_bytes(bits)`, built in place on every core
/// ([`hush_deal::elementwise_bytes`]; the same bytes).
pub fn deal_trunc_bytes(key: Block, party: u8, n: usize, bits: u32, f: u32) -> Vec<u8> {
    let sub = hush_deal::sub_key(key, 1);
    if party == 1 {
        return party1_bytes(sub, n, bits);
    }
    let (key, sub) = (&Aes128::new(key), &Aes128::new(sub));
    hush_deal::elementwise_bytes(n, 3, 3, bits, |start, v| {
        let (out, one) = v.split_at_mut(3);
        party1_part(sub, start, bits, &[], one);
        party0_part(key, start, bits, f, out, one);
    })
}

fn party1_bytes(sub: Block, n: usize, bits: u32) -> Vec<u8> {
    let sub = &Aes128::new(sub);
    hush_deal::elementwise_bytes(n, 3, 0, bits, |start, v| party1_part(sub, start, bits, &[], v))
}

/// [`deal_trunc_square`]`(…).to_bytes(bits)`, built in place (the same bytes).
pub fn deal_trunc_square_bytes(key: Block, party: u8, n: usize, bits: u32, f: u32) -> Vec<u8> {
    let sub = hush_deal::sub_key(key, 1);
    if party == 1 {
        return party1_sq_bytes(sub, n, bits);
    }
    let (key, sub) = (&Aes128::new(key), &Aes128::new(sub));
    let m = ring_mask(bits);
    hush_deal::elementwise_bytes(n, 5, 5, bits, |start, v| {
        let (out, one) = v.split_at_mut(5);
        party1_part(sub, start, bits, &[SQ1, HM1], one);
        party0_part(key, start, bits, f, out, one);
        let (t, rest) = out.split_at_mut(3);
        let (sq, hm) = rest.split_at_mut(1);
        for i in 0..t[0].len() {
            let r = t[0][i].wrapping_add(one[0][i]) & m;
            let (h, b) = ((r >> f) & m, (r >> (bits - 1)) & 1);
            sq[0][i] = h.wrapping_mul(h).wrapping_sub(one[3][i]) & m;
            hm[0][i] = h.wrapping_mul(b).wrapping_sub(one[4][i]) & m;
        }
    })
}

fn party1_sq_bytes(sub: Block, n: usize, bits: u32) -> Vec<u8> {
    let sub = &Aes128::new(sub);
    hush_deal::elementwise_bytes(n, 5, 0, bits, |start, v| party1_part(sub, start, bits, &[SQ1, HM1], v))
}

/// [`deal_trunc_mul`]`(…).to_bytes(bits)`, built in place (the same bytes).
pub fn deal_trunc_mul_bytes(key: Block, party: u8, n: usize, bits: u32, f: u32) -> Vec<u8> {
    let sub = hush_deal::sub_key(key, 1);
    if party == 1 {
        return party1_mul_bytes(sub, n, bits);
    }
    let (key, sub) = (&Aes128::new(key), &Aes128::new(sub));
    let m = ring_mask(bits);
    hush_deal::elementwise_bytes(n, 6, 6, bits, |start, v| {
        let (out, one) = v.split_at_mut(6);
        party1_part(sub, start, bits, &[S1M, HS1, MS1], one);
        party0_part(key, start, bits, f, out, one);
        ring_part(key, S0M, start, bits, &mut out[3]);
        let (t, rest) = out.split_at_mut(3);
        let (s0, rest) = rest.split_at_mut(1);
        let (hs, ms) = rest.split_at_mut(1);
        for i in 0..t[0].len() {
            let r = t[0][i].wrapping_add(one[0][i]) & m;
            let s = s0[0][i].wrapping_add(one[3][i]) & m;
            let (h, b) = ((r >> f) & m, (r >> (bits - 1)) & 1);
            hs[0][i] = h.wrapping_mul(s).wrapping_sub(one[4][i]) & m;
            ms[0][i] = b.wrapping_mul(s).wrapping_sub(one[5][i]) & m;
        }
    })
}

fn party1_mul_bytes(sub: Block, n: usize, bits: u32) -> Vec<u8> {
    let sub = &Aes128::new(sub);
    hush_deal::elementwise_bytes(n, 6, 0, bits, |start, v| party1_part(sub, start, bits, &[S1M, HS1, MS1], v))
}

pub(crate) fn ring_stream(key: Block, nonce: u64, n: usize, bits: u32) -> Vec<u64> {
    let m = ring_mask(bits);
    let mut v = stream(key, nonce, n);
    v.iter_mut().for_each(|x| *x &= m);
    v
}

fn party1(sub: Block, n: usize, bits: u32) -> TruncShare {
    TruncShare { r: ring_stream(sub, R1, n, bits), hi: ring_stream(sub, H1, n, bits), msb: ring_stream(sub, M1, n, bits) }
}

/// `party`'s share of `n` truncation pairs over Z_2^bits with shift `f`.
pub fn deal_trunc(key: Block, party: u8, n: usize, bits: u32, f: u32) -> TruncShare {
    let one = party1(hush_deal::sub_key(key, 1), n, bits);
    if party == 1 {
        return one;
    }
    let m = ring_mask(bits);
    let r0 = ring_stream(key, R0, n, bits);
    let mut hi = Vec::with_capacity(n);
    let mut msb = Vec::with_capacity(n);
    for i in 0..n {
        let mut r = r0[i].wrapping_add(one.r[i]) & m;
        hi.push(((r >> f).wrapping_sub(one.hi[i])) & m);
        msb.push(((r >> (bits - 1)).wrapping_sub(one.msb[i])) & m);
        r.zeroize();
    }
    TruncShare { r: r0, hi, msb }
}

/// Truncation pairs (parameters: ring width `bits` in 2..=64, shift `f` in
/// 1..bits−1).
pub struct TruncPairs;
pub static TRUNC_PAIRS: TruncPairs = TruncPairs;

/// The request and [`Description`] of a truncation kind whose parameters
/// are (ring width, shift) ([`TruncPairs::params`]), party 1 seeded: from
/// its KIND, its dealing function (key, party, n, bits, f) and party 1's
/// expansion (sub-key, n, bits), each returning a share with `to_bytes`.
macro_rules! trunc_kind {
    ($ty:ident, $kind:literal, $deal:path, $party1:path) => {
        impl $ty {
            pub const KIND: &'static str = $kind;

            pub fn request(batch: u64, n: u32, bits: u32, f: u32) -> DealRequest {
                let mut w = Writer::default();
                w.u32(bits).u32(f);
                DealRequest::new(Self::KIND, batch, n, w.0)
            }
        }

        impl Description for $ty {
            fn kind(&self) -> &'static str {
                Self::KIND
            }
            fn label(&self, batch: u64, n: u32, params: &[u8]) -> Result<String> {
                let (bits, f) = TruncPairs::params(params)?;
                Ok(format!("{}/{batch}/{n}/{bits}/{f}", Self::KIND))
            }
            fn deal(&self, key: Block, party: u8, n: u32, params: &[u8]) -> Result<Vec<u8>> {
                let (bits, f) = TruncPairs::params(params)?;
                Ok($deal(key, party, n as usize, bits, f))
            }
            fn seeded_party(&self) -> Option<u8> {
                Some(1)
            }
            fn expand(&self, sub: Block, n: u32, params: &[u8]) -> Result<Vec<u8>> {
                let (bits, _) = TruncPairs::params(params)?;
                Ok($party1(sub, n as usize, bits))
            }
        }
    };
}

trunc_kind!(TruncPairs, "2pc/trunc-pairs", deal_trunc_bytes, party1_bytes);

impl TruncPairs {
    pub fn params(params: &[u8]) -> Result<(u32, u32)> {
        let (bits, f) = hush_deal::parse_params(params, "truncation-pair parameters", |r: &mut Reader<'_>| Ok((r.u32()?, r.u32()?)))?;
        if !(2..=64).contains(&bits) || f == 0 || f >= bits - 1 {
            return Err(Error::Refused(format!("truncation pairs: ring width {bits}, shift {f} out of range")));
        }
        Ok((bits, f))
    }
}


/// Truncate-and-square tuples: the correlation of
/// [`crate::transformer::Ctx::trunc_square`] — a truncation pair
/// (r, r_hi = ⌊r/2^f⌋, r_msb) plus additive shares of r_hi² and r_hi·r_msb.
/// After the truncation's single opening c = x + 2^{ℓ−2} + r, the truncated
/// value is T = P − R with P = ⌊c/2^f⌋ − 2^{ℓ−2−f} public and
/// R = r_hi − α·r_msb·2^{ℓ−f} (α = 1 − msb(c), public) linear in dealt
/// shares, so T² = P² − 2P·R + R², R² = r_hi² − 2α·2^{ℓ−f}·r_hi·r_msb +
/// α·2^{2(ℓ−f)}·r_msb (r_msb² = r_msb, α² = α) is linear in dealt shares
/// too: the truncation and the next square cost one opening instead of two
/// (hush's own construction; exp's repeated squarings in Softmax use it).
/// **Seeded** and **what each host sees** as for the pairs: party 1's five
/// shares are streams under its sub-key, party 0's four corrections are
/// true values minus them; each share is uniform on its own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TruncSqShare {
    pub t: TruncShare,
    /// share of r_hi²
    pub sq: Vec<u64>,
    /// share of r_hi·r_msb
    pub hm: Vec<u64>,
}

impl Drop for TruncSqShare {
    fn drop(&mut self) {
        hush_primitives::wipe::wipe_vec_u64(&mut self.sq);
        hush_primitives::wipe::wipe_vec_u64(&mut self.hm);
    }
}

impl TruncSqShare {
    pub fn to_bytes(&self, bits: u32) -> Vec<u8> {
        let mut b = Blob::new();
        b.put_ring(&self.t.r, bits).put_ring(&self.t.hi, bits).put_ring(&self.t.msb, bits).put_ring(&self.sq, bits).put_ring(&self.hm, bits);
        std::mem::take(&mut b.0)
    }
    pub fn from_bytes(buf: &[u8], n: usize, bits: u32) -> Result<Self> {
        let mut rd = BlobReader::new(buf);
        let t = TruncShare { r: rd.take_ring(n, bits)?, hi: rd.take_ring(n, bits)?, msb: rd.take_ring(n, bits)? };
        let s = TruncSqShare { t, sq: rd.take_ring(n, bits)?, hm: rd.take_ring(n, bits)? };
        rd.finish()?;
        Ok(s)
    }
}

const SQ1: u64 = 7;
const HM1: u64 = 8;

fn party1_sq(sub: Block, n: usize, bits: u32) -> TruncSqShare {
    TruncSqShare { t: party1(sub, n, bits), sq: ring_stream(sub, SQ1, n, bits), hm: ring_stream(sub, HM1, n, bits) }
}

/// `party`'s share of `n` truncate-and-square tuples over Z_2^bits, shift `f`.
pub fn deal_trunc_square(key: Block, party: u8, n: usize, bits: u32, f: u32) -> TruncSqShare {
    let one = party1_sq(hush_deal::sub_key(key, 1), n, bits);
    if party == 1 {
        return one;
    }
    let m = ring_mask(bits);
    let t = deal_trunc(key, 0, n, bits, f);
    let mut sq = Vec::with_capacity(n);
    let mut hm = Vec::with_capacity(n);
    for i in 0..n {
        let mut r = t.r[i].wrapping_add(one.t.r[i]) & m;
        let (mut h, mut b) = ((r >> f) & m, (r >> (bits - 1)) & 1);
        sq.push(h.wrapping_mul(h).wrapping_sub(one.sq[i]) & m);
        hm.push(h.wrapping_mul(b).wrapping_sub(one.hm[i]) & m);
        r.zeroize();
        h.zeroize();
        b.zeroize();
    }
    TruncSqShare { t, sq, hm }
}

/// Truncate-and-square tuples (same parameters as [`TruncPairs`]).
pub struct TruncSquares;
pub static TRUNC_SQUARES: TruncSquares = TruncSquares;

trunc_kind!(TruncSquares, "2pc/trunc-squares", deal_trunc_square_bytes, party1_sq_bytes);

/// Truncate-and-multiply tuples: the correlation of
/// [`crate::transformer::Ctx::trunc_mul`] — a truncation pair
/// (r, r_hi, r_msb), a uniform mask s for the second operand, and shares
/// of r_hi·s and r_msb·s. With the truncation's opening c (T = P − R as
/// for [`TruncSquares`]) and e = y − s opened in the same flight,
/// T·y = P·e + P·s − R·e − R·s with R·s = r_hi·s − α·2^{ℓ−f}·r_msb·s:
/// linear in dealt shares, so a truncation followed by a product (Newton's
/// iterations) costs one opening instead of two (hush's own construction).
/// **Seeded** and **what each host sees** as for the pairs: party 1's six
/// shares are streams under its sub-key, party 0's corrections are true
/// values minus them; each share is uniform on its own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TruncMulShare {
    pub t: TruncShare,
    pub s: Vec<u64>,
    /// share of r_hi·s
    pub hs: Vec<u64>,
    /// share of r_msb·s
    pub ms: Vec<u64>,
}

impl Drop for TruncMulShare {
    fn drop(&mut self) {
        hush_primitives::wipe::wipe_vec_u64(&mut self.s);
        hush_primitives::wipe::wipe_vec_u64(&mut self.hs);
        hush_primitives::wipe::wipe_vec_u64(&mut self.ms);
    }
}

impl TruncMulShare {
    pub fn to_bytes(&self, bits: u32) -> Vec<u8> {
        let mut b = Blob::new();
        b.put_ring(&self.t.r, bits).put_ring(&self.t.hi, bits).put_ring(&self.t.msb, bits).put_ring(&self.s, bits).put_ring(&self.hs, bits).put_ring(&self.ms, bits);
        std::mem::take(&mut b.0)
    }
    pub fn from_bytes(buf: &[u8], n: usize, bits: u32) -> Result<Self> {
        let mut rd = BlobReader::new(buf);
        let t = TruncShare { r: rd.take_ring(n, bits)?, hi: rd.take_ring(n, bits)?, msb: rd.take_ring(n, bits)? };
        let s = TruncMulShare { t, s: rd.take_ring(n, bits)?, hs: rd.take_ring(n, bits)?, ms: rd.take_ring(n, bits)? };
        rd.finish()?;
        Ok(s)
    }
}

const S0M: u64 = 9;
const S1M: u64 = 10;
const HS1: u64 = 11;
const MS1: u64 = 12;

fn party1_mul(sub: Block, n: usize, bits: u32) -> TruncMulShare {
    TruncMulShare { t: party1(sub, n, bits), s: ring_stream(sub, S1M, n, bits), hs: ring_stream(sub, HS1, n, bits), ms: ring_stream(sub, MS1, n, bits) }
}

/// `party`'s share of `n` truncate-and-multiply tuples over Z_2^bits, shift `f`.
pub fn deal_trunc_mul(key: Block, party: u8, n: usize, bits: u32, f: u32) -> TruncMulShare {
    let one = party1_mul(hush_deal::sub_key(key, 1), n, bits);
    if party == 1 {
        return one;
    }
    let m = ring_mask(bits);
    let t = deal_trunc(key, 0, n, bits, f);
    let s0 = ring_stream(key, S0M, n, bits);
    let mut hs = Vec::with_capacity(n);
    let mut ms = Vec::with_capacity(n);
    for i in 0..n {
        let mut r = t.r[i].wrapping_add(one.t.r[i]) & m;
        let mut s = s0[i].wrapping_add(one.s[i]) & m;
        let (mut h, mut b) = ((r >> f) & m, (r >> (bits - 1)) & 1);
        hs.push(h.wrapping_mul(s).wrapping_sub(one.hs[i]) & m);
        ms.push(b.wrapping_mul(s).wrapping_sub(one.ms[i]) & m);
        r.zeroize();
        s.zeroize();
        h.zeroize();
        b.zeroize();
    }
    TruncMulShare { t, s: s0, hs, ms }
}

/// Truncate-and-multiply tuples (same parameters as [`TruncPairs`]).
pub struct TruncMuls;
pub static TRUNC_MULS: TruncMuls = TruncMuls;

trunc_kind!(TruncMuls, "2pc/trunc-muls", deal_trunc_mul_bytes, party1_mul_bytes);

#[cfg(test)]
mod wire_tests {
    use super::*;

    #[test]
    fn in_place_truncation_kinds_match_the_share_encoding() {
        for (bits, f) in [(16u32, 5u32), (32, 12), (37, 13), (64, 16)] {
            for n in [0usize, 1, 4095, 4096, 4097, 9000] {
                let key = Block(0x7c + n as u128);
                let sub = hush_deal::sub_key(key, 1);
                for p in 0..2u8 {
                    let what = format!("bits {bits} n {n} party {p}");
                    assert_eq!(deal_trunc_bytes(key, p, n, bits, f), deal_trunc(key, p, n, bits, f).to_bytes(bits), "{what}");
                    assert_eq!(deal_trunc_square_bytes(key, p, n, bits, f), deal_trunc_square(key, p, n, bits, f).to_bytes(bits), "{what}");
                    assert_eq!(deal_trunc_mul_bytes(key, p, n, bits, f), deal_trunc_mul(key, p, n, bits, f).to_bytes(bits), "{what}");
                }
                assert_eq!(party1_bytes(sub, n, bits), party1(sub, n, bits).to_bytes(bits));
                assert_eq!(party1_sq_bytes(sub, n, bits), party1_sq(sub, n, bits).to_bytes(bits));
                assert_eq!(party1_mul_bytes(sub, n, bits), party1_mul(sub, n, bits).to_bytes(bits));
            }
        }
    }
}
