//! Beaver triples (Beaver, CRYPTO '91) dealt from the synchronized seed:
//! arithmetic triples c = a·b over Z_2^ℓ and AND triples c = a ∧ b,
//! 64 per word. Party 1's share (a_1, b_1, c_1) is **seeded**: PRG
//! streams under its sub-key ([`hush_deal::sub_key`]), so the dealer service
//! can send the client 16 bytes instead of the triples. Party 0's a_0, b_0
//! are streams under the batch key and c_0 = (a_0 + a_1)(b_0 + b_1) − c_1.
//! Each party's share alone is uniform (a, b uniform and each c-share
//! masked by the other's uniform c-share), as in the unseeded dealing.

use hush_deal::wire::{Reader, Writer};
use hush_deal::{ring_mask, stream, Blob, BlobReader, DealRequest, Description, Error, Result};
use hush_primitives::aes::Aes128;
use hush_primitives::Block;

/// One party's share of `n` triples (ring elements, or bit-packed words).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TripleShare {
    pub a: Vec<u64>,
    pub b: Vec<u64>,
    pub c: Vec<u64>,
}

impl Drop for TripleShare {
    fn drop(&mut self) {
        hush_primitives::wipe::wipe_vec_u64(&mut self.a);
        hush_primitives::wipe::wipe_vec_u64(&mut self.b);
        hush_primitives::wipe::wipe_vec_u64(&mut self.c);
    }
}

impl TripleShare {
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Blob::new();
        b.put(&self.a).put(&self.b).put(&self.c);
        std::mem::take(&mut b.0)
    }
    /// Parses `words` words per component.
    pub fn from_bytes(buf: &[u8], words: usize) -> Result<Self> {
        let mut r = BlobReader::new(buf);
        let t = TripleShare { a: r.take(words)?, b: r.take(words)?, c: r.take(words)? };
        r.finish()?;
        Ok(t)
    }
}

const A0: u64 = 1;
const B0: u64 = 2;
// Party 1's streams, under its sub-key.
const A1: u64 = 4;
const B1: u64 = 5;
const C1: u64 = 6;

/// Party 1's (seeded) share of `n` arithmetic triples over Z_2^bits.
fn arith_party1(sub: Block, n: usize, bits: u32) -> TripleShare {
    let m = ring_mask(bits);
    let red = |mut v: Vec<u64>| {
        v.iter_mut().for_each(|x| *x &= m);
        v
    };
    TripleShare { a: red(stream(sub, A1, n)), b: red(stream(sub, B1, n)), c: red(stream(sub, C1, n)) }
}

/// Arithmetic triples over Z_2^bits.
pub fn deal_arith(key: Block, party: u8, n: usize, bits: u32) -> TripleShare {
    let one = arith_party1(hush_deal::sub_key(key, 1), n, bits);
    if party == 1 {
        return one;
    }
    let m = ring_mask(bits);
    let red = |mut v: Vec<u64>| {
        v.iter_mut().for_each(|x| *x &= m);
        v
    };
    let (a0, b0) = (red(stream(key, A0, n)), red(stream(key, B0, n)));
    let c0 = (0..n)
        .map(|i| a0[i].wrapping_add(one.a[i]).wrapping_mul(b0[i].wrapping_add(one.b[i])).wrapping_sub(one.c[i]) & m)
        .collect();
    TripleShare { a: a0, b: b0, c: c0 }
}

fn bit_tail(n: usize) -> u64 {
    if n % 64 == 0 {
        u64::MAX
    } else {
        (1u64 << (n % 64)) - 1
    }
}

fn clip(mut v: Vec<u64>, tail: u64) -> Vec<u64> {
    if let Some(l) = v.last_mut() {
        *l &= tail;
    }
    v
}

/// Party 1's (seeded) share of `n` AND triples.
fn bits_party1(sub: Block, n: usize) -> TripleShare {
    let (w, tail) = (n.div_ceil(64), bit_tail(n));
    TripleShare { a: clip(stream(sub, A1, w), tail), b: clip(stream(sub, B1, w), tail), c: clip(stream(sub, C1, w), tail) }
}

/// `n` AND triples, bit-packed into ceil(n/64) words (tail bits zero).
pub fn deal_bits(key: Block, party: u8, n: usize) -> TripleShare {
    let one = bits_party1(hush_deal::sub_key(key, 1), n);
    if party == 1 {
        return one;
    }
    let (w, tail) = (n.div_ceil(64), bit_tail(n));
    let (a0, b0) = (clip(stream(key, A0, w), tail), clip(stream(key, B0, w), tail));
    let c0 = (0..w).map(|i| ((a0[i] ^ one.a[i]) & (b0[i] ^ one.b[i])) ^ one.c[i]).collect();
    TripleShare { a: a0, b: b0, c: c0 }
}

/// Arithmetic Beaver triples over Z_2^bits (parameter: `bits`, 1..=64).
/// [`deal_arith`]`(…).to_bytes()`, built in place on every core
/// ([`hush_deal::elementwise_bytes`]; the same bytes).
pub fn deal_arith_bytes(key: Block, party: u8, n: usize, bits: u32) -> Vec<u8> {
    let sub = hush_deal::sub_key(key, 1);
    if party == 1 {
        return arith_party1_bytes(sub, n, bits);
    }
    let m = ring_mask(bits);
    let (key, sub) = (&Aes128::new(key), &Aes128::new(sub));
    hush_deal::elementwise_bytes(n, 3, 3, 64, |start, v| {
        let (out, one) = v.split_at_mut(3);
        arith_part(sub, [A1, B1, C1], start, bits, one);
        arith_part(key, [A0, B0], start, bits, &mut out[..2]);
        let (ab, c) = out.split_at_mut(2);
        for i in 0..c[0].len() {
            c[0][i] = ab[0][i].wrapping_add(one[0][i]).wrapping_mul(ab[1][i].wrapping_add(one[1][i])).wrapping_sub(one[2][i]) & m;
        }
    })
}

/// Items `start ..` of the ring streams `nonces` under `aes` (an expanded
/// key), reduced to `bits` bits, into the first arrays of `v`.
fn arith_part<const K: usize>(aes: &Aes128, nonces: [u64; K], start: usize, bits: u32, v: &mut [Vec<u64>]) {
    let m = ring_mask(bits);
    for (o, nonce) in v.iter_mut().zip(nonces) {
        hush_deal::stream_at_with(aes, nonce, start, o);
        if bits < 64 {
            o.iter_mut().for_each(|x| *x &= m);
        }
    }
}

/// [`arith_party1`]`(…).to_bytes()`, built in place.
fn arith_party1_bytes(sub: Block, n: usize, bits: u32) -> Vec<u8> {
    let sub = &Aes128::new(sub);
    hush_deal::elementwise_bytes(n, 3, 0, 64, |start, v| arith_part(sub, [A1, B1, C1], start, bits, v))
}

pub struct ArithTriples;
/// Bit-packed AND triples (no parameters).
pub struct BitTriples;

pub static ARITH_TRIPLES: ArithTriples = ArithTriples;
pub static BIT_TRIPLES: BitTriples = BitTriples;

impl ArithTriples {
    pub const KIND: &'static str = "2pc/arith-triples";

    pub fn request(batch: u64, n: u32, bits: u32) -> DealRequest {
        let mut w = Writer::default();
        w.u32(bits);
        DealRequest::new(Self::KIND, batch, n, w.0)
    }

    fn bits(params: &[u8]) -> Result<u32> {
        let bits = hush_deal::parse_params(params, "triple parameters", |r: &mut Reader<'_>| r.u32())?;
        if !(1..=64).contains(&bits) {
            return Err(Error::Refused(format!("ring width {bits} out of range 1..=64")));
        }
        Ok(bits)
    }
}

impl Description for ArithTriples {
    fn kind(&self) -> &'static str {
        Self::KIND
    }
    fn label(&self, batch: u64, n: u32, params: &[u8]) -> Result<String> {
        Ok(format!("{}/{batch}/{n}/{}", Self::KIND, Self::bits(params)?))
    }
    fn deal(&self, key: Block, party: u8, n: u32, params: &[u8]) -> Result<Vec<u8>> {
        Ok(deal_arith_bytes(key, party, n as usize, Self::bits(params)?))
    }
    fn seeded_party(&self) -> Option<u8> {
        Some(1)
    }
    fn expand(&self, sub: Block, n: u32, params: &[u8]) -> Result<Vec<u8>> {
        Ok(arith_party1_bytes(sub, n as usize, Self::bits(params)?))
    }
}

impl BitTriples {
    pub const KIND: &'static str = "2pc/bit-triples";

    pub fn request(batch: u64, n: u32) -> DealRequest {
        DealRequest::new(Self::KIND, batch, n, Vec::new())
    }

    fn no_params(params: &[u8]) -> Result<()> {
        hush_deal::parse_params(params, "AND-triple parameters", |_| Ok(()))
    }
}

impl Description for BitTriples {
    fn kind(&self) -> &'static str {
        Self::KIND
    }
    fn label(&self, batch: u64, n: u32, params: &[u8]) -> Result<String> {
        Self::no_params(params)?;
        Ok(format!("{}/{batch}/{n}", Self::KIND))
    }
    fn deal(&self, key: Block, party: u8, n: u32, params: &[u8]) -> Result<Vec<u8>> {
        Self::no_params(params)?;
        Ok(deal_bits(key, party, n as usize).to_bytes())
    }
    fn seeded_party(&self) -> Option<u8> {
        Some(1)
    }
    fn expand(&self, sub: Block, n: u32, params: &[u8]) -> Result<Vec<u8>> {
        Self::no_params(params)?;
        Ok(bits_party1(sub, n as usize).to_bytes())
    }
}

#[cfg(test)]
mod wire_tests {
    use super::*;

    #[test]
    fn in_place_triples_match_the_share_encoding() {
        for bits in [1u32, 16, 32, 37, 64] {
            for n in [0usize, 1, 4095, 4096, 4097, 9000] {
                let key = Block(0x7e1 + n as u128);
                for p in 0..2u8 {
                    assert_eq!(deal_arith_bytes(key, p, n, bits), deal_arith(key, p, n, bits).to_bytes(), "bits {bits} n {n} party {p}");
                }
                let sub = hush_deal::sub_key(key, 1);
                assert_eq!(arith_party1_bytes(sub, n, bits), arith_party1(sub, n, bits).to_bytes());
            }
        }
    }
}
