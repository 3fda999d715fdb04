//! Base OT: Chou–Orlandi, "The Simplest Protocol for Oblivious Transfer"
//! (LATINCRYPT 2015, Fig. 1), over the Ristretto255 group
//! (curve25519-dalek). Semi-honest security; outputs are random OTs
//! (the sender gets two 128-bit keys per OT, the receiver the chosen one).
//!
//! Protocol (n OTs, one group element per OT from the receiver):
//! 1. S: a ← Z_q, A = a·G; send A.
//! 2. R: for each i, x_i ← Z_q, B_i = x_i·G + c_i·A; send (B_i).
//! 3. S: k_i^0 = H(i, A, B_i, a·B_i), k_i^1 = H(i, A, B_i, a·B_i − a·A).
//!    R: k_i = H(i, A, B_i, x_i·A).
//!
//! H is SHA-256 (domain-separated) truncated to 128 bits. Two flights:
//! 2 rounds, 32 + 32·n bytes. Points from the peer are decoded with
//! validation; a non-canonical encoding is an error.

use crate::{malformed, Result};
use curve25519_dalek::constants::RISTRETTO_BASEPOINT_TABLE;
use curve25519_dalek::ristretto::{CompressedRistretto, RistrettoPoint};
use curve25519_dalek::scalar::Scalar;
use hush_primitives::Block;
use hush_transport::{Channel, ChannelExt};
use rand_core::{CryptoRng, RngCore};
use sha2::{Digest, Sha256};
use zeroize::Zeroize;

fn kdf(i: u64, a: &CompressedRistretto, b: &CompressedRistretto, p: &RistrettoPoint) -> Block {
    let mut h = Sha256::new();
    h.update(b"hush/base-ot/chou-orlandi/v1");
    h.update(i.to_le_bytes());
    h.update(a.as_bytes());
    h.update(b.as_bytes());
    h.update(p.compress().as_bytes());
    let d = h.finalize();
    Block::from_slice(&d[..16])
}

fn decode_point(step: &'static str, bytes: &[u8]) -> Result<(CompressedRistretto, RistrettoPoint)> {
    let c = CompressedRistretto::from_slice(bytes).map_err(|_| malformed(step, "point must be 32 bytes"))?;
    let p = c.decompress().ok_or_else(|| malformed(step, "invalid Ristretto255 point"))?;
    Ok((c, p))
}

/// Sender: returns n key pairs (k_i^0, k_i^1).
pub fn send<R: RngCore + CryptoRng>(ch: &mut dyn Channel, n: usize, rng: &mut R) -> Result<Vec<[Block; 2]>> {
    let mut a = Scalar::random(rng);
    let big_a = RISTRETTO_BASEPOINT_TABLE * &a;
    let ca = big_a.compress();
    ch.send(ca.as_bytes())?;
    let msg = ch.recv_exact("base OT: receiver's points", 32 * n)?;
    let a_a = big_a * a;
    let mut out = Vec::with_capacity(n);
    for (i, chunk) in msg.chunks_exact(32).enumerate() {
        let (cb, b) = decode_point("base OT: receiver's points", chunk)?;
        let ab = b * a;
        out.push([kdf(i as u64, &ca, &cb, &ab), kdf(i as u64, &ca, &cb, &(ab - a_a))]);
    }
    a.zeroize();
    Ok(out)
}

/// Receiver: returns k_i^{c_i} for each choice bit.
pub fn recv<R: RngCore + CryptoRng>(ch: &mut dyn Channel, choices: &[bool], rng: &mut R) -> Result<Vec<Block>> {
    let m = ch.recv_exact("base OT: sender's point", 32)?;
    let (ca, big_a) = decode_point("base OT: sender's point", &m)?;
    let mut xs = Vec::with_capacity(choices.len());
    let mut msg = Vec::with_capacity(32 * choices.len());
    let mut cbs = Vec::with_capacity(choices.len());
    for &c in choices {
        let x = Scalar::random(rng);
        let mut b = RISTRETTO_BASEPOINT_TABLE * &x;
        if c {
            b += big_a;
        }
        let cb = b.compress();
        msg.extend_from_slice(cb.as_bytes());
        cbs.push(cb);
        xs.push(x);
    }
    ch.send(&msg)?;
    let out = xs
        .iter()
        .zip(&cbs)
        .enumerate()
        .map(|(i, (x, cb))| kdf(i as u64, &ca, cb, &(big_a * x)))
        .collect();
    for x in &mut xs {
        x.zeroize();
    }
    Ok(out)
}
