//! Power tuples: the correlation of TAMI-MPC's one-round product (§3.2,
//! eqs. 1-3) specialised to the powers of one shared value, consumed by
//! [`crate::transformer::Ctx::powers`].
//!
//! Per element: a uniform r ∈ Z_2^ℓ and additive shares of r, r², …, r^K.
//! In TAMI's expansion ∏_j (d_j + r_j) every subset product ∏_{j∈S} r_j
//! needs a dealt share; when all K factors are the same value x (and the
//! same mask r), the subset products depend only on |S|, so K values
//! replace 2^K − 1 — the column-wise reuse of TAMI Opt#2 (eq. 7) taken to
//! its limit. Online: one opening of d = x − r, then
//! x^j = Σ_i C(j, i)·d^{j−i}·r^i locally.
//!
//! **Seeded.** Party 1's K shares are PRG streams under its sub-key; party
//! 0's share of r is a stream under the batch key, its shares of r^j (j ≥ 2)
//! are r^j minus party 1's stream. **What each host sees.** Its own K
//! shares, each uniform on its own; r itself is known to neither host.

use super::trunc::ring_stream;
use hush_deal::wire::{Reader, Writer};
use hush_deal::{ring_mask, BlobReader, Blob, DealRequest, Description, Error, Result};
use hush_primitives::aes::Aes128;
use hush_primitives::Block;
use zeroize::Zeroize;

/// Largest power a request may ask for.
pub const MAX_POWER: u32 = 8;

/// One party's share of `n` power tuples: `pows[j − 1][i]` is its share of
/// r_i^j.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PowerShare {
    pub pows: Vec<Vec<u64>>,
}

impl Drop for PowerShare {
    fn drop(&mut self) {
        self.pows.iter_mut().for_each(hush_primitives::wipe::wipe_vec_u64);
    }
}

impl PowerShare {
    pub fn to_bytes(&self, bits: u32) -> Vec<u8> {
        let mut b = Blob::new();
        for p in &self.pows {
            b.put_ring(p, bits);
        }
        std::mem::take(&mut b.0)
    }
    pub fn from_bytes(buf: &[u8], n: usize, bits: u32, k: u32) -> Result<Self> {
        let mut rd = BlobReader::new(buf);
        let pows = (0..k).map(|_| rd.take_ring(n, bits)).collect::<Result<Vec<_>>>()?;
        rd.finish()?;
        Ok(PowerShare { pows })
    }
}

const R0: u64 = 1;
/// Party 1's stream of r^j has nonce P1 + j.
const P1: u64 = 16;

fn party1(sub: Block, n: usize, bits: u32, k: u32) -> PowerShare {
    PowerShare { pows: (1..=k as u64).map(|j| ring_stream(sub, P1 + j, n, bits)).collect() }
}

/// `party`'s share of `n` power tuples (powers 1..=k) over Z_2^bits.
pub fn deal_powers(key: Block, party: u8, n: usize, bits: u32, k: u32) -> PowerShare {
    let one = party1(hush_deal::sub_key(key, 1), n, bits, k);
    if party == 1 {
        return one;
    }
    let m = ring_mask(bits);
    let r0 = ring_stream(key, R0, n, bits);
    let mut pows = vec![Vec::with_capacity(n); k as usize];
    for i in 0..n {
        let mut r = r0[i].wrapping_add(one.pows[0][i]) & m;
        let mut p = r;
        pows[0].push(r0[i]);
        for j in 1..k as usize {
            p = p.wrapping_mul(r) & m;
            pows[j].push(p.wrapping_sub(one.pows[j][i]) & m);
        }
        r.zeroize();
        p.zeroize();
    }
    PowerShare { pows }
}

/// Power tuples (parameters: ring width `bits` in 1..=64, highest power
/// `k` in 2..=[`MAX_POWER`]).
/// [`deal_powers`]`(…).to_bytes(bits)`, built in place on every core
/// ([`hush_deal::elementwise_bytes`]; the same bytes).
pub fn deal_powers_bytes(key: Block, party: u8, n: usize, bits: u32, k: u32) -> Vec<u8> {
    let sub = hush_deal::sub_key(key, 1);
    if party == 1 {
        return party1_bytes(sub, n, bits, k);
    }
    let (key, sub) = (&Aes128::new(key), &Aes128::new(sub));
    let (m, k) = (ring_mask(bits), k as usize);
    hush_deal::elementwise_bytes(n, k, k, bits, |start, v| {
        let (out, one) = v.split_at_mut(k);
        for (j, o) in one.iter_mut().enumerate() {
            super::trunc::ring_part(sub, P1 + 1 + j as u64, start, bits, o);
        }
        super::trunc::ring_part(key, R0, start, bits, &mut out[0]);
        for i in 0..out[0].len() {
            let r = out[0][i].wrapping_add(one[0][i]) & m;
            let mut p = r;
            for j in 1..k {
                p = p.wrapping_mul(r) & m;
                out[j][i] = p.wrapping_sub(one[j][i]) & m;
            }
        }
    })
}

fn party1_bytes(sub: Block, n: usize, bits: u32, k: u32) -> Vec<u8> {
    let sub = &Aes128::new(sub);
    hush_deal::elementwise_bytes(n, k as usize, 0, bits, |start, v| {
        for (j, o) in v.iter_mut().enumerate() {
            super::trunc::ring_part(sub, P1 + 1 + j as u64, start, bits, o);
        }
    })
}

pub struct PowerTuples;
pub static POWER_TUPLES: PowerTuples = PowerTuples;

impl PowerTuples {
    pub const KIND: &'static str = "2pc/power-tuples";

    pub fn request(batch: u64, n: u32, bits: u32, k: u32) -> DealRequest {
        let mut w = Writer::default();
        w.u32(bits).u32(k);
        DealRequest::new(Self::KIND, batch, n, w.0)
    }

    pub fn params(params: &[u8]) -> Result<(u32, u32)> {
        let (bits, k) = hush_deal::parse_params(params, "power-tuple parameters", |r: &mut Reader<'_>| Ok((r.u32()?, r.u32()?)))?;
        if !(1..=64).contains(&bits) || !(2..=MAX_POWER).contains(&k) {
            return Err(Error::Refused(format!("power tuples: ring width {bits}, power {k} out of range")));
        }
        Ok((bits, k))
    }
}

impl Description for PowerTuples {
    fn kind(&self) -> &'static str {
        Self::KIND
    }
    fn label(&self, batch: u64, n: u32, params: &[u8]) -> Result<String> {
        let (bits, k) = Self::params(params)?;
        Ok(format!("{}/{batch}/{n}/{bits}/{k}", Self::KIND))
    }
    fn deal(&self, key: Block, party: u8, n: u32, params: &[u8]) -> Result<Vec<u8>> {
        let (bits, k) = Self::params(params)?;
        Ok(deal_powers_bytes(key, party, n as usize, bits, k))
    }
    fn seeded_party(&self) -> Option<u8> {
        Some(1)
    }
    fn expand(&self, sub: Block, n: u32, params: &[u8]) -> Result<Vec<u8>> {
        let (bits, k) = Self::params(params)?;
        Ok(party1_bytes(sub, n as usize, bits, k))
    }
}

#[cfg(test)]
mod wire_tests {
    use super::*;

    #[test]
    fn in_place_powers_match_the_share_encoding() {
        for (bits, k) in [(16u32, 2u32), (32, 4), (37, 8), (64, 3)] {
            for n in [0usize, 1, 4095, 4096, 4097, 9000] {
                let key = Block(0x90 + n as u128);
                for p in 0..2u8 {
                    assert_eq!(deal_powers_bytes(key, p, n, bits, k), deal_powers(key, p, n, bits, k).to_bytes(bits), "bits {bits} n {n} party {p}");
                }
                let sub = hush_deal::sub_key(key, 1);
                assert_eq!(party1_bytes(sub, n, bits, k), party1(sub, n, bits, k).to_bytes(bits));
            }
        }
    }
}
