//! Packing of protocol messages: ring elements in ceil(ℓ/8) bytes, bit
//! vectors as little-endian words. Every decoder checks lengths (the
//! transport already did) and value ranges, and names the step.

use crate::{malformed, Result};
use hush_transport::{Channel, ChannelExt};

pub fn ring_bytes(bits: u32) -> usize {
    (bits as usize).div_ceil(8)
}

pub fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Packs ring elements, ceil(bits/8) bytes each.
pub fn pack_ring(v: &[u64], bits: u32, out: &mut Vec<u8>) {
    let w = ring_bytes(bits);
    out.reserve(v.len() * w);
    if w == 8 {
        for x in v {
            out.extend_from_slice(&x.to_le_bytes());
        }
    } else {
        for x in v {
            out.extend_from_slice(&x.to_le_bytes()[..w]);
        }
    }
}

/// Unpacks `out.len()` ring elements; bits at or above `bits` are an error.
pub fn unpack_ring(step: &'static str, b: &[u8], bits: u32, out: &mut [u64]) -> Result<()> {
    let w = ring_bytes(bits);
    if b.len() != w * out.len() {
        return Err(malformed(step, format!("{} bytes for {} elements", b.len(), out.len())));
    }
    let m = mask(bits);
    let mut bad = 0u64;
    for (o, c) in out.iter_mut().zip(b.chunks_exact(w)) {
        let mut a = [0u8; 8];
        a[..w].copy_from_slice(c);
        let x = u64::from_le_bytes(a);
        bad |= x & !m;
        *o = x;
    }
    if bad != 0 {
        return Err(malformed(step, format!("element with bits set above the {bits}-bit ring")));
    }
    Ok(())
}

pub fn pack_words(v: &[u64], out: &mut Vec<u8>) {
    out.reserve(v.len() * 8);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
}

pub fn unpack_words(step: &'static str, b: &[u8], out: &mut [u64]) -> Result<()> {
    if b.len() != out.len() * 8 {
        return Err(malformed(step, format!("{} bytes for {} words", b.len(), out.len())));
    }
    for (o, c) in out.iter_mut().zip(b.chunks_exact(8)) {
        *o = u64::from_le_bytes(c.try_into().expect("8 bytes"));
    }
    Ok(())
}

/// Mask of the valid lanes of the last word of an n-lane bit vector.
pub fn tail(n: usize) -> u64 {
    if n % 64 == 0 {
        u64::MAX
    } else {
        (1u64 << (n % 64)) - 1
    }
}

/// Checks that lanes ≥ n are zero in every `stride`-th group of words
/// belonging to the last word of lanes (layout [word][stride]).
pub fn check_tail(step: &'static str, v: &[u64], n: usize, stride: usize) -> Result<()> {
    let w = n.div_ceil(64);
    if w == 0 || stride == 0 || v.len() < w * stride {
        return Ok(());
    }
    let t = tail(n);
    if v[(w - 1) * stride..w * stride].iter().any(|x| x & !t != 0) {
        return Err(malformed(step, "bits set past the last element"));
    }
    Ok(())
}

/// Sends a byte message (chunked if needed: one flight).
pub fn send(ch: &mut dyn Channel, b: &[u8]) -> Result<()> {
    ch.send_chunked(b)?;
    Ok(())
}

/// Receives exactly `len` bytes sent with [`send`].
pub fn recv(ch: &mut dyn Channel, step: &'static str, len: usize) -> Result<Vec<u8>> {
    let mut b = vec![0u8; len];
    ch.recv_chunked_into(step, &mut b)?;
    Ok(b)
}

/// Sends `mine` and receives the peer's message of the same length (both
/// parties send first: one round).
pub fn exchange(ch: &mut dyn Channel, step: &'static str, mine: &[u8]) -> Result<Vec<u8>> {
    send(ch, mine)?;
    recv(ch, step, mine.len())
}
