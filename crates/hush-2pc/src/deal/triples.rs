//! Beaver triples (Beaver, CRYPTO '91) dealt from the synchronized seed:
//! arithmetic triples c = a·b over Z_2^ℓ and AND triples c = a ∧ b,
//! 64 per word. Party 0's shares are PRG streams; party 1's module
//! recomputes them and sets c_1 = (a_0 + a_1)(b_0 + b_1) − c_0.

use hush_deal::wire::{Reader, Writer};
use hush_deal::{ring_mask, stream, Blob, BlobReader, DealRequest, Description, Error, Result};
use hush_primitives::Block;
use zeroize::Zeroize;

/// One party's share of `n` triples (ring elements, or bit-packed words).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TripleShare {
    pub a: Vec<u64>,
    pub b: Vec<u64>,
    pub c: Vec<u64>,
}

impl Drop for TripleShare {
    fn drop(&mut self) {
        self.a.zeroize();
        self.b.zeroize();
        self.c.zeroize();
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
const C0: u64 = 3;
const A1: u64 = 4;
const B1: u64 = 5;

/// Arithmetic triples over Z_2^bits.
pub fn deal_arith(key: Block, party: u8, n: usize, bits: u32) -> TripleShare {
    let m = ring_mask(bits);
    let red = |mut v: Vec<u64>| {
        v.iter_mut().for_each(|x| *x &= m);
        v
    };
    let (a0, b0, c0) = (red(stream(key, A0, n)), red(stream(key, B0, n)), red(stream(key, C0, n)));
    if party == 0 {
        return TripleShare { a: a0, b: b0, c: c0 };
    }
    let (a1, b1) = (red(stream(key, A1, n)), red(stream(key, B1, n)));
    let c1 = (0..n)
        .map(|i| a0[i].wrapping_add(a1[i]).wrapping_mul(b0[i].wrapping_add(b1[i])).wrapping_sub(c0[i]) & m)
        .collect();
    TripleShare { a: a1, b: b1, c: c1 }
}

/// `n` AND triples, bit-packed into ceil(n/64) words (tail bits zero).
pub fn deal_bits(key: Block, party: u8, n: usize) -> TripleShare {
    let w = n.div_ceil(64);
    let tail = if n % 64 == 0 { u64::MAX } else { (1u64 << (n % 64)) - 1 };
    let clip = |mut v: Vec<u64>| {
        if let Some(l) = v.last_mut() {
            *l &= tail;
        }
        v
    };
    let (a0, b0, c0) = (clip(stream(key, A0, w)), clip(stream(key, B0, w)), clip(stream(key, C0, w)));
    if party == 0 {
        return TripleShare { a: a0, b: b0, c: c0 };
    }
    let (a1, b1) = (clip(stream(key, A1, w)), clip(stream(key, B1, w)));
    let c1 = (0..w).map(|i| ((a0[i] ^ a1[i]) & (b0[i] ^ b1[i])) ^ c0[i]).collect();
    TripleShare { a: a1, b: b1, c: c1 }
}

/// Arithmetic Beaver triples over Z_2^bits (parameter: `bits`, 1..=64).
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
        Ok(deal_arith(key, party, n as usize, Self::bits(params)?).to_bytes())
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
}
