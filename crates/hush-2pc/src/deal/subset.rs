//! Subset products: the correlation of TAMI-MPC's one-round product
//! (§3.2, eqs. 1-3) over Z_2^ℓ for d distinct factors, consumed by
//! [`crate::transformer::Ctx::product`].
//!
//! Per element: uniform masks r_1, …, r_d and additive shares of
//! r_S = ∏_{j∈S} r_j for every non-empty S ⊆ {1..d} (2^d − 1 values; the
//! singletons are the masks). Online, the parties open e_j = x_j − r_j
//! once and finish ∏_j x_j = Σ_S (∏_{j∉S} e_j)·r_S locally (r_∅ = 1).
//!
//! **Seeded.** Party 1's 2^d − 1 shares are PRG streams under its sub-key;
//! party 0's mask shares are streams under the batch key and its shares of
//! r_S (|S| ≥ 2) are r_S minus party 1's stream. **What each host sees.**
//! Its own shares, each uniform on its own; the masks are known to neither.

use super::trunc::ring_stream;
use hush_deal::wire::{Reader, Writer};
use hush_deal::{ring_mask, Blob, BlobReader, DealRequest, Description, Error, Result};
use hush_primitives::aes::Aes128;
use hush_primitives::Block;
use zeroize::Zeroize;

/// Most factors per product (2^4 − 1 = 15 dealt values per element).
pub const MAX_FACTORS: u32 = 4;

/// One party's share: `sets[S − 1][i]` is its share of r_S for the
/// element i, S a non-empty bit set over the factors.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubsetShare {
    pub sets: Vec<Vec<u64>>,
}

impl Drop for SubsetShare {
    fn drop(&mut self) {
        self.sets.iter_mut().for_each(hush_primitives::wipe::wipe_vec_u64);
    }
}

impl SubsetShare {
    pub fn to_bytes(&self, bits: u32) -> Vec<u8> {
        let mut b = Blob::new();
        for v in &self.sets {
            b.put_ring(v, bits);
        }
        std::mem::take(&mut b.0)
    }
    pub fn from_bytes(buf: &[u8], n: usize, bits: u32, d: u32) -> Result<Self> {
        let mut rd = BlobReader::new(buf);
        let sets = (0..(1usize << d) - 1).map(|_| rd.take_ring(n, bits)).collect::<Result<Vec<_>>>()?;
        rd.finish()?;
        Ok(SubsetShare { sets })
    }
}

const R0: u64 = 1;
const P1: u64 = 32;

fn party1(sub: Block, n: usize, bits: u32, d: u32) -> SubsetShare {
    SubsetShare { sets: (1..1u64 << d).map(|s| ring_stream(sub, P1 + s, n, bits)).collect() }
}

/// `party`'s share of `n` subset-product tuples of `d` factors.
pub fn deal_subsets(key: Block, party: u8, n: usize, bits: u32, d: u32) -> SubsetShare {
    let one = party1(hush_deal::sub_key(key, 1), n, bits, d);
    if party == 1 {
        return one;
    }
    let m = ring_mask(bits);
    let mut sets: Vec<Vec<u64>> = vec![Vec::with_capacity(n); (1 << d) - 1];
    let own: Vec<Vec<u64>> = (0..d as u64).map(|j| ring_stream(key, R0 + j, n, bits)).collect();
    let mut r = vec![0u64; d as usize];
    for i in 0..n {
        for j in 0..d as usize {
            r[j] = own[j][i].wrapping_add(one.sets[(1 << j) - 1][i]) & m;
        }
        for s in 1usize..1 << d {
            let v = if s.is_power_of_two() {
                own[s.trailing_zeros() as usize][i]
            } else {
                let p = (0..d as usize).filter(|j| s >> j & 1 == 1).fold(1u64, |a, j| a.wrapping_mul(r[j]));
                p.wrapping_sub(one.sets[s - 1][i]) & m
            };
            sets[s - 1].push(v);
        }
    }
    r.zeroize();
    SubsetShare { sets }
}

/// Subset products (parameters: ring width `bits` in 1..=64, factors `d`
/// in 2..=[`MAX_FACTORS`]).
/// [`deal_subsets`]`(…).to_bytes(bits)`, built in place on every core
/// ([`hush_deal::elementwise_bytes`]; the same bytes).
pub fn deal_subsets_bytes(key: Block, party: u8, n: usize, bits: u32, d: u32) -> Vec<u8> {
    let sub = hush_deal::sub_key(key, 1);
    if party == 1 {
        return party1_bytes(sub, n, bits, d);
    }
    let (key, sub) = (&Aes128::new(key), &Aes128::new(sub));
    let (m, d, sets) = (ring_mask(bits), d as usize, (1usize << d) - 1);
    // Scratch: party 1's sets, party 0's d own streams, the d masks r_j.
    hush_deal::elementwise_bytes(n, sets, sets + 2 * d, bits, |start, v| {
        let (out, rest) = v.split_at_mut(sets);
        let (one, rest) = rest.split_at_mut(sets);
        let (own, r) = rest.split_at_mut(d);
        for (s, o) in one.iter_mut().enumerate() {
            super::trunc::ring_part(sub, P1 + 1 + s as u64, start, bits, o);
        }
        for (j, o) in own.iter_mut().enumerate() {
            super::trunc::ring_part(key, R0 + j as u64, start, bits, o);
        }
        for j in 0..d {
            for ((x, a), b) in r[j].iter_mut().zip(&own[j]).zip(&one[(1 << j) - 1]) {
                *x = a.wrapping_add(*b) & m;
            }
        }
        // Set by set, item by item (straight loops over the part's arrays).
        for s in 1usize..1 << d {
            let o = &mut out[s - 1];
            if s.is_power_of_two() {
                o.copy_from_slice(&own[s.trailing_zeros() as usize]);
                continue;
            }
            o.iter_mut().for_each(|x| *x = 1);
            for j in (0..d).filter(|j| s >> j & 1 == 1) {
                for (x, rj) in o.iter_mut().zip(&r[j]) {
                    *x = x.wrapping_mul(*rj);
                }
            }
            for (x, b) in o.iter_mut().zip(&one[s - 1]) {
                *x = x.wrapping_sub(*b) & m;
            }
        }
    })
}

fn party1_bytes(sub: Block, n: usize, bits: u32, d: u32) -> Vec<u8> {
    let sub = &Aes128::new(sub);
    hush_deal::elementwise_bytes(n, (1usize << d) - 1, 0, bits, |start, v| {
        for (s, o) in v.iter_mut().enumerate() {
            super::trunc::ring_part(sub, P1 + 1 + s as u64, start, bits, o);
        }
    })
}

pub struct SubsetProducts;
pub static SUBSET_PRODUCTS: SubsetProducts = SubsetProducts;

impl SubsetProducts {
    pub const KIND: &'static str = "2pc/subset-products";

    pub fn request(batch: u64, n: u32, bits: u32, d: u32) -> DealRequest {
        let mut w = Writer::default();
        w.u32(bits).u32(d);
        DealRequest::new(Self::KIND, batch, n, w.0)
    }

    pub fn params(params: &[u8]) -> Result<(u32, u32)> {
        let (bits, d) = hush_deal::parse_params(params, "subset-product parameters", |r: &mut Reader<'_>| Ok((r.u32()?, r.u32()?)))?;
        if !(1..=64).contains(&bits) || !(2..=MAX_FACTORS).contains(&d) {
            return Err(Error::Refused(format!("subset products: ring width {bits}, {d} factors out of range")));
        }
        Ok((bits, d))
    }
}

impl Description for SubsetProducts {
    fn kind(&self) -> &'static str {
        Self::KIND
    }
    fn label(&self, batch: u64, n: u32, params: &[u8]) -> Result<String> {
        let (bits, d) = Self::params(params)?;
        Ok(format!("{}/{batch}/{n}/{bits}/{d}", Self::KIND))
    }
    fn deal(&self, key: Block, party: u8, n: u32, params: &[u8]) -> Result<Vec<u8>> {
        let (bits, d) = Self::params(params)?;
        Ok(deal_subsets_bytes(key, party, n as usize, bits, d))
    }
    fn seeded_party(&self) -> Option<u8> {
        Some(1)
    }
    fn expand(&self, sub: Block, n: u32, params: &[u8]) -> Result<Vec<u8>> {
        let (bits, d) = Self::params(params)?;
        Ok(party1_bytes(sub, n as usize, bits, d))
    }
}

#[cfg(test)]
mod wire_tests {
    use super::*;

    #[test]
    fn in_place_subset_products_match_the_share_encoding() {
        for (bits, d) in [(16u32, 2u32), (32, 3), (37, 4), (64, 4)] {
            for n in [0usize, 1, 4095, 4096, 4097, 9000] {
                let key = Block(0x5b + n as u128);
                for p in 0..2u8 {
                    assert_eq!(deal_subsets_bytes(key, p, n, bits, d), deal_subsets(key, p, n, bits, d).to_bytes(bits), "bits {bits} n {n} party {p}");
                }
                let sub = hush_deal::sub_key(key, 1);
                assert_eq!(party1_bytes(sub, n, bits, d), party1(sub, n, bits, d).to_bytes(bits));
            }
        }
    }
}
