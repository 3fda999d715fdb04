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

/// Words per step of [`bits_bytes_with`]: 64 AES blocks per stream, in
/// 16-byte aligned stack buffers that stay in L1.
const BIT_STEP: usize = 128;

/// A word buffer aligned for [`hush_deal::stream_at_with`]'s direct
/// counter-mode path (a `Vec<u64>` usually is; a stack array need not be).
#[repr(C, align(64))]
struct Words([u64; BIT_STEP]);

/// [`deal_bits`]`(…).to_bytes()`, written straight into its wire bytes
/// (issue 35): one allocation of the exact length, the stream keys
/// expanded once, each step of [`BIT_STEP`] words of every stream made by
/// counter mode into aligned stack buffers (party 0: its a, b and the c it
/// corrects against party 1's streams) and stored once into the share —
/// no per-stream vectors, no growing encode buffer. AND triples are the
/// smallest kind (n bits are n/64 words per array), so what was fixed
/// cost per request (six key expansions and PRG objects, eight vectors, a
/// share encoded word by word into a growing buffer) was most of it.
/// The same bytes: `in_place_bit_triples_match_the_share_encoding`.
pub fn deal_bits_bytes(key: Block, party: u8, n: usize) -> Vec<u8> {
    let sub = Aes128::new(hush_deal::sub_key(key, 1));
    if party == 1 {
        return bits_bytes_with(None, &sub, n);
    }
    bits_bytes_with(Some(&Aes128::new(key)), &sub, n)
}

/// Party 1's share [`bits_party1`]`(sub, n).to_bytes()`, in place.
fn bits_party1_bytes(sub: Block, n: usize) -> Vec<u8> {
    bits_bytes_with(None, &Aes128::new(sub), n)
}

/// The share of party 0 (`key` = the batch key) or party 1 (`key` =
/// `None`), `sub` party 1's expanded sub-key.
fn bits_bytes_with(key: Option<&Aes128>, sub: &Aes128, n: usize) -> Vec<u8> {
    let (w, tail) = (n.div_ceil(64), bit_tail(n));
    let len = 3 * (8 + 8 * w);
    // Not zeroed first: every byte is written below (each array's count
    // word, then its w words step by step), before `set_len`.
    let mut buf: Vec<u8> = Vec::with_capacity(len);
    let spare = &mut buf.spare_capacity_mut()[..len];
    let (a_out, rest) = spare.split_at_mut(8 + 8 * w);
    let (b_out, c_out) = rest.split_at_mut(8 + 8 * w);
    let mut outs = [a_out, b_out, c_out];
    for o in outs.iter_mut() {
        put_words(&mut o[..8], &[w as u64]);
    }
    let mut t: [Words; 5] = std::array::from_fn(|_| Words([0; BIT_STEP]));
    let mut at = 0;
    while at < w {
        let m = BIT_STEP.min(w - at);
        let [a1, b1, c1, a0, b0] = &mut t;
        let (a1, b1, c1, a0, b0) = (&mut a1.0[..m], &mut b1.0[..m], &mut c1.0[..m], &mut a0.0[..m], &mut b0.0[..m]);
        hush_deal::stream_at_with(sub, A1, at, a1);
        hush_deal::stream_at_with(sub, B1, at, b1);
        hush_deal::stream_at_with(sub, C1, at, c1);
        if at + m == w {
            for v in [&mut *a1, &mut *b1, &mut *c1] {
                v[m - 1] &= tail;
            }
        }
        let vals: [&[u64]; 3] = match key {
            None => [a1, b1, c1],
            Some(key) => {
                hush_deal::stream_at_with(key, A0, at, a0);
                hush_deal::stream_at_with(key, B0, at, b0);
                if at + m == w {
                    a0[m - 1] &= tail;
                    b0[m - 1] &= tail;
                }
                // c_0 = (a_0 ⊕ a_1)(b_0 ⊕ b_1) ⊕ c_1, into c_1's buffer.
                for i in 0..m {
                    c1[i] ^= (a0[i] ^ a1[i]) & (b0[i] ^ b1[i]);
                }
                [a0, b0, c1]
            }
        };
        for (o, v) in outs.iter_mut().zip(vals) {
            put_words(&mut o[8 + 8 * at..8 + 8 * (at + m)], v);
        }
        at += m;
    }
    for x in t.iter_mut() {
        hush_primitives::wipe::wipe_u64s(&mut x.0);
    }
    // SAFETY: the three arrays tile the first `len` bytes of the capacity,
    // and each array's 8 + 8w bytes were all written above (its count word,
    // then words at..at + m for steps that cover 0..w).
    unsafe { buf.set_len(len) };
    buf
}

/// `v`'s words as little-endian bytes into `out` (exactly 8·len bytes).
fn put_words(out: &mut [std::mem::MaybeUninit<u8>], v: &[u64]) {
    assert_eq!(out.len(), 8 * v.len(), "put_words: output length");
    if cfg!(target_endian = "little") {
        // SAFETY: `out` holds exactly 8·len bytes and does not overlap `v`
        // (a distinct borrow); a u64's memory is its LE bytes here.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr() as *const u8, out.as_mut_ptr() as *mut u8, out.len()) };
        return;
    }
    for (d, x) in out.chunks_exact_mut(8).zip(v) {
        for (o, b) in d.iter_mut().zip(x.to_le_bytes()) {
            o.write(b);
        }
    }
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
        Ok(deal_bits_bytes(key, party, n as usize))
    }
    fn seeded_party(&self) -> Option<u8> {
        Some(1)
    }
    fn expand(&self, sub: Block, n: u32, params: &[u8]) -> Result<Vec<u8>> {
        Self::no_params(params)?;
        Ok(bits_party1_bytes(sub, n as usize))
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

    /// The in-place AND triples against the share encoding, word for word:
    /// random keys, sizes around the word and step boundaries (odd bit
    /// counts, partial last words), both parties and the seeded expansion;
    /// and the triples hold: (a_0 ⊕ a_1)(b_0 ⊕ b_1) = c_0 ⊕ c_1, tail bits 0.
    #[test]
    fn in_place_bit_triples_match_the_share_encoding() {
        let mut prg = hush_primitives::Prg::new(Block(0xa17d_3e));
        let sizes = [0usize, 1, 63, 64, 65, 127, 128 * 64 - 1, 128 * 64, 128 * 64 + 1, 3 * 128 * 64 + 77, 200_000];
        for &n in &sizes {
            for _ in 0..3 {
                let key = prg.random_block();
                let w = n.div_ceil(64);
                let mut parts = Vec::new();
                for p in 0..2u8 {
                    let fast = deal_bits_bytes(key, p, n);
                    assert_eq!(fast, deal_bits(key, p, n).to_bytes(), "n {n} party {p}");
                    parts.push(TripleShare::from_bytes(&fast, w).unwrap());
                }
                let sub = hush_deal::sub_key(key, 1);
                assert_eq!(bits_party1_bytes(sub, n), bits_party1(sub, n).to_bytes(), "n {n} seeded");
                assert_eq!(BIT_TRIPLES.expand(sub, n as u32, &[]).unwrap(), BIT_TRIPLES.deal(key, 1, n as u32, &[]).unwrap());
                let (s0, s1) = (&parts[0], &parts[1]);
                for i in 0..w {
                    assert_eq!((s0.a[i] ^ s1.a[i]) & (s0.b[i] ^ s1.b[i]), s0.c[i] ^ s1.c[i], "n {n} word {i}");
                }
                if w > 0 {
                    let t = !bit_tail(n);
                    for v in [&s0.a, &s0.b, &s0.c, &s1.a, &s1.b, &s1.c] {
                        assert_eq!(v[w - 1] & t, 0, "n {n}: tail bits");
                    }
                }
            }
        }
    }
}
