//! Bit-packed vectors: `count` values of `bits` bits each, little endian,
//! in ⌈count·bits/8⌉ bytes. Decoding a peer's bytes checks the length
//! before allocating and every value against its bound.

use crate::{Error, Result};

/// Bytes of `count` values of `bits` bits.
pub fn packed_len(count: usize, bits: u32) -> usize {
    (count * bits as usize).div_ceil(8)
}

/// Appends `vals` (each < 2^bits) to `out`.
pub fn pack_into(vals: impl IntoIterator<Item = u64>, bits: u32, out: &mut Vec<u8>) {
    debug_assert!((1..=64).contains(&bits));
    let mut acc: u128 = 0;
    let mut fill = 0u32;
    for v in vals {
        acc |= (v as u128) << fill;
        fill += bits;
        while fill >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            fill -= 8;
        }
    }
    if fill > 0 {
        out.push(acc as u8);
    }
}

/// Reads `count` values of `bits` bits from the front of `buf`, each
/// checked `< bound`; returns them and the rest of `buf`.
pub fn unpack<'a>(buf: &'a [u8], count: usize, bits: u32, bound: u64, what: &'static str) -> Result<(Vec<u64>, &'a [u8])> {
    let len = packed_len(count, bits);
    if buf.len() < len {
        return Err(Error::Malformed { what, why: format!("{} bytes, need at least {len}", buf.len()) });
    }
    let (head, rest) = buf.split_at(len);
    let mut out = Vec::with_capacity(count);
    let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let mut acc: u128 = 0;
    let mut fill = 0u32;
    let mut it = head.iter();
    for idx in 0..count {
        while fill < bits {
            acc |= (*it.next().unwrap_or(&0) as u128) << fill;
            fill += 8;
        }
        let v = (acc as u64) & mask;
        acc >>= bits;
        fill -= bits;
        if v >= bound {
            return Err(Error::Malformed { what, why: format!("value {idx} is {v}, out of range (must be < {bound})") });
        }
        out.push(v);
    }
    if fill > 0 && acc != 0 {
        return Err(Error::Malformed { what, why: "nonzero padding bits".into() });
    }
    Ok((out, rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn round_trip_and_bounds() {
        for bits in [1u32, 7, 37, 53, 60, 64] {
            let m = if bits == 64 { u64::MAX } else { (1 << bits) - 1 };
            let v: Vec<u64> = (0..37u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) & m).collect();
            let mut b = Vec::new();
            pack_into(v.iter().copied(), bits, &mut b);
            assert_eq!(b.len(), packed_len(v.len(), bits));
            let (w, rest) = unpack(&b, v.len(), bits, u64::MAX, "t").unwrap();
            assert_eq!(w, v);
            assert!(rest.is_empty());
            assert!(unpack(&b[..b.len() - 1], v.len(), bits, u64::MAX, "t").is_err());
        }
        let mut b = Vec::new();
        pack_into([5u64, 9], 4, &mut b);
        assert!(unpack(&b, 2, 4, 9, "t").is_err());
        assert!(unpack(&b, 2, 4, 10, "t").is_ok());
    }
}
