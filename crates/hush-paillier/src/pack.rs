//! Packing several masked values into one plaintext.

use crate::key::{Ciphertext, PublicKey};
use crate::{Error, Result};
use rug::Integer;

/// Slot layout of a packed plaintext: slot k holds bits
/// [k·slot_bits, (k+1)·slot_bits).
///
/// A value v with |v| < 2^value_bits is masked by r ∈ [2^value_bits,
/// 2^value_bits + 2^(value_bits+σ)), so v + r ∈ [0, 2^(value_bits+σ+1)):
/// slot_bits = value_bits + σ + 1 never overflows into the next slot, and
/// slots · slot_bits ≤ |n| − 2 keeps the packed value below n/2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packing {
    pub value_bits: u32,
    pub slot_bits: u32,
    pub slots: usize,
}

impl Packing {
    /// Layout for values of magnitude below 2^value_bits under a modulus of
    /// `n_bits` bits, statistical mask parameter `sigma`.
    pub fn new(value_bits: u32, sigma: u32, n_bits: u32) -> Result<Packing> {
        let slot_bits = value_bits + sigma + 1;
        let slots = (n_bits.saturating_sub(2) / slot_bits) as usize;
        if slots == 0 {
            return Err(Error::Packing(format!(
                "a slot of {slot_bits} bits does not fit a {n_bits}-bit plaintext"
            )));
        }
        Ok(Packing { value_bits, slot_bits, slots })
    }

    /// The same layout with at most `cap` slots per ciphertext (≥ 1): fewer
    /// values per packed ciphertext, for callers that trade the packed
    /// side's bytes against the other side's (both parties must cap alike).
    pub fn capped(self, cap: usize) -> Packing {
        Packing { slots: self.slots.min(cap.max(1)), ..self }
    }

    /// Packs up to `slots` ciphertexts into one: Enc(Σ m_k · 2^(k·slot_bits))
    /// by Horner's rule (slot_bits squarings per extra slot).
    pub fn pack(&self, pk: &PublicKey, cts: &[Ciphertext]) -> Result<Ciphertext> {
        if cts.is_empty() || cts.len() > self.slots {
            return Err(Error::Packing(format!("{} values for {} slots", cts.len(), self.slots)));
        }
        let n2 = pk.n2();
        let mut acc = cts[cts.len() - 1].0.clone();
        for c in cts[..cts.len() - 1].iter().rev() {
            for _ in 0..self.slot_bits {
                acc.square_mut();
                acc %= n2;
            }
            acc *= &c.0;
            acc %= n2;
        }
        Ok(Ciphertext(acc))
    }

    /// [`Packing::pack`] of many groups: eight groups of equal length at a
    /// time in the lanes of the IFMA path (each Horner step is the same
    /// 2^slot_bits power in every lane), else one by one with GMP.
    pub fn pack_many(&self, pk: &PublicKey, groups: &[Vec<Ciphertext>]) -> Result<Vec<Ciphertext>> {
        let ctx = if groups.len() > 1 { pk.mont_n2() } else { None };
        let Some(ctx) = ctx else {
            return groups.iter().map(|g| self.pack(pk, g)).collect();
        };
        let mut out = Vec::with_capacity(groups.len());
        for chunk in groups.chunks(crate::ifma::LANES) {
            let len = chunk[0].len();
            if chunk.len() == 1 || len < 2 || chunk.iter().any(|g| g.len() != len) || len > self.slots {
                for g in chunk {
                    out.push(self.pack(pk, g)?);
                }
                continue;
            }
            let ints: Vec<Vec<Integer>> = chunk.iter().map(|g| g.iter().map(|c| c.0.clone()).collect()).collect();
            let refs: Vec<&[Integer]> = ints.iter().map(Vec::as_slice).collect();
            out.extend(ctx.horner8(&refs, self.slot_bits).into_iter().map(Ciphertext));
        }
        Ok(out)
    }

    /// Packs plaintexts (the mask sum Σ r_k·2^(k·slot_bits)).
    pub fn pack_plain(&self, vals: &[Integer]) -> Integer {
        let mut acc = Integer::new();
        for v in vals.iter().rev() {
            acc <<= self.slot_bits;
            acc += v;
        }
        acc
    }

    /// Splits a packed plaintext into `count` slots.
    pub fn unpack(&self, m: &Integer, count: usize) -> Result<Vec<Integer>> {
        if count > self.slots {
            return Err(Error::Packing(format!("{count} values for {} slots", self.slots)));
        }
        if m.significant_bits() as usize > count * self.slot_bits as usize {
            return Err(Error::Packing("packed plaintext overflows its slots".into()));
        }
        let mut out = Vec::with_capacity(count);
        let mut x = m.clone();
        for _ in 0..count {
            out.push(Integer::from(x.keep_bits_ref(self.slot_bits)));
            x >>= self.slot_bits;
        }
        Ok(out)
    }

    /// Number of packed ciphertexts for `count` values.
    pub fn packed_len(&self, count: usize) -> usize {
        count.div_ceil(self.slots)
    }
}
