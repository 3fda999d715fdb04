//! Random OT, chosen-message OT and 1-out-of-N OT from any COT source.
//!
//! All derivations hash COTs with the tweakable correlation-robust hash of
//! Guo–Katz–Wang–Yu (S&P 2020), `hush_primitives::hash::tccr_hash`. Each COT
//! carries its session-unique index (see [`CorrelationSource::produced`](crate::CorrelationSource::produced)),
//! and tweaks are domain-separated, so no tweak repeats under one Δ.
//!
//! * ROT: m_0 = H(i, q_i), m_1 = H(i, q_i ⊕ Δ); the receiver gets
//!   m_b = H(i, t_i). No communication beyond the COTs.
//! * Chosen-message OT (Beaver's derandomisation): the receiver sends
//!   d = b ⊕ b′ (its chosen vs. random bits); the sender sends
//!   y_c = m_c ⊕ H(i, q_i ⊕ (c ⊕ d_i)·Δ) for c ∈ {0,1}.
//! * 1-out-of-N ROT, N = 2^k, k ≤ 8 (Naor–Pinkas style, from k COTs): the
//!   pad of index x is ⊕_j H((i, j, x), q_{ij} ⊕ x_j·Δ); the receiver knows
//!   exactly the pad of its choice c = (b_{i0}, …, b_{i,k−1}). Every other
//!   pad contains a term H(tweak, t ⊕ Δ) with a fresh tweak, which is
//!   pseudorandom to the receiver by the TCCR property.
//! * Chosen 1-out-of-N OT of ℓ-bit messages (the millionaires' protocol's
//!   leaf OTs): derandomised like the 1-of-2 case with a k-bit shift.

use crate::source::{CotReceiver, CotSender};
use crate::{malformed, Error, Result};
use hush_primitives::hash::{tccr_hash_many, tccr_hash_tweaks};
use hush_primitives::{BitVec, Block};
use hush_transport::{Channel, ChannelExt};

const DOMAIN_ROT: u128 = 1 << 96;
const DOMAIN_OTN: u128 = 2 << 96;

fn tweak_n(index: u64, x: usize) -> Block {
    Block(DOMAIN_OTN | (index as u128) << 8 | x as u128)
}

/// COTs are requested from the source and hashed this many at a time
/// (a multiple of 64, so a chunk's choice bits are whole words): the
/// scratch stays cache-resident and no n-block buffer is allocated (and
/// page-faulted) per call. The tweaks are the COTs' session indices, so the
/// pads do not depend on the chunking. 2^12 (64 KiB of blocks, L2-resident;
/// Ferret fills such a request through its scratch tree with ordinary
/// stores): the cf2 ReLU on 2 × 10^5 took 1.11–1.17 s of CPU at 2^11–2^12
/// against 1.19–1.24 s at 2^13 and 1.29–1.38 s at 2^18 (3 runs each,
/// `/usr/bin/time`, both parties).
pub const ROT_CHUNK: usize = 1 << 12;

/// GKWY's TCCR hash of `x` (in place) with tweaks `DOMAIN_ROT | g + j`:
/// `a` is scratch of the same length.
fn tccr_rot_in_place(g: u128, x: &mut [Block], a: &mut [Block]) {
    let p = hush_primitives::aes::fixed_key();
    a.copy_from_slice(x);
    p.encrypt_blocks(a);
    for (j, (o, &ai)) in x.iter_mut().zip(a.iter()).enumerate() {
        *o = ai ^ Block(DOMAIN_ROT | g.wrapping_add(j as u128));
    }
    p.encrypt_blocks(x);
    for (o, &ai) in x.iter_mut().zip(a.iter()) {
        *o ^= ai;
    }
}

/// Sender of `n` random OTs, streamed: `f(start, m0, m1)` gets the pads of
/// OTs `start..start + m0.len()`, [`ROT_CHUNK`] at a time (the same pads as
/// [`rot_send`]).
pub fn rot_send_chunked<S: CotSender + ?Sized>(
    src: &mut S,
    ch: &mut dyn Channel,
    n: usize,
    mut f: impl FnMut(usize, &[Block], &[Block]),
) -> Result<()> {
    let c = ROT_CHUNK.min(n);
    let (mut m0, mut m1, mut a) = (vec![Block::ZERO; c], vec![Block::ZERO; c], vec![Block::ZERO; c]);
    let d = src.delta();
    let mut start = 0;
    while start < n {
        let m = c.min(n - start);
        let g = src.produced() as u128;
        src.send_cots(ch, &mut m0[..m])?;
        for (b, &q) in m1[..m].iter_mut().zip(&m0[..m]) {
            *b = q ^ d;
        }
        tccr_rot_in_place(g, &mut m0[..m], &mut a[..m]);
        tccr_rot_in_place(g, &mut m1[..m], &mut a[..m]);
        f(start, &m0[..m], &m1[..m]);
        start += m;
    }
    zeroize::Zeroize::zeroize(&mut m0);
    zeroize::Zeroize::zeroize(&mut m1);
    zeroize::Zeroize::zeroize(&mut a);
    Ok(())
}

/// Receiver of `n` random OTs, streamed: `f(start, choice_words, mb)` gets
/// OTs `start..start + mb.len()` (`start` a multiple of 64; the choice bits
/// as 64-bit words, LSB first), [`ROT_CHUNK`] at a time.
pub fn rot_recv_chunked<R: CotReceiver + ?Sized>(
    src: &mut R,
    ch: &mut dyn Channel,
    n: usize,
    mut f: impl FnMut(usize, &[u64], &[Block]),
) -> Result<()> {
    let c = ROT_CHUNK.min(n);
    let (mut t, mut a) = (vec![Block::ZERO; c], vec![Block::ZERO; c]);
    let mut bits = BitVec::zeros(0);
    let mut start = 0;
    while start < n {
        let m = c.min(n - start);
        let g = src.produced() as u128;
        src.recv_cots(ch, &mut bits, &mut t[..m])?;
        tccr_rot_in_place(g, &mut t[..m], &mut a[..m]);
        f(start, bits.words(), &t[..m]);
        start += m;
    }
    zeroize::Zeroize::zeroize(&mut t);
    zeroize::Zeroize::zeroize(&mut a);
    Ok(())
}

/// Sender of random OTs: fills `m0`, `m1` (same length).
pub fn rot_send<S: CotSender + ?Sized>(src: &mut S, ch: &mut dyn Channel, m0: &mut [Block], m1: &mut [Block]) -> Result<()> {
    if m0.len() != m1.len() {
        return Err(Error::Invalid("m0 and m1 differ in length".into()));
    }
    let n = m0.len();
    rot_send_chunked(src, ch, n, |s, a, b| {
        m0[s..s + a.len()].copy_from_slice(a);
        m1[s..s + b.len()].copy_from_slice(b);
    })
}

/// Receiver of random OTs: fills `choices` and `mb`.
pub fn rot_recv<R: CotReceiver + ?Sized>(src: &mut R, ch: &mut dyn Channel, choices: &mut BitVec, mb: &mut [Block]) -> Result<()> {
    let n = mb.len();
    *choices = BitVec::zeros(n);
    let w = choices.words_mut();
    rot_recv_chunked(src, ch, n, |s, c, h| {
        mb[s..s + h.len()].copy_from_slice(h);
        let ws = s / 64;
        let nw = h.len().div_ceil(64);
        w[ws..ws + nw].copy_from_slice(&c[..nw]);
    })?;
    choices.clear_tail();
    Ok(())
}

/// Sender of chosen-message OT.
pub fn ot_send<S: CotSender + ?Sized>(src: &mut S, ch: &mut dyn Channel, m0: &[Block], m1: &[Block]) -> Result<()> {
    let n = m0.len();
    if m1.len() != n {
        return Err(Error::Invalid("m0 and m1 differ in length".into()));
    }
    let g = src.produced() as u128;
    let mut q = vec![Block::ZERO; n];
    src.send_cots(ch, &mut q)?;
    let dmsg = ch.recv_exact("chosen OT: receiver's d", n.div_ceil(8))?;
    let dbits = BitVec::from_bytes(&dmsg, n).ok_or_else(|| malformed("chosen OT: receiver's d", "bad length"))?;
    if dbits.to_bytes() != dmsg {
        return Err(malformed("chosen OT: receiver's d", "non-zero padding bits"));
    }
    let delta = src.delta();
    let mut k0: Vec<Block> = (0..n).map(|i| q[i] ^ delta.and_bit(dbits.get(i))).collect();
    let mut k1: Vec<Block> = k0.iter().map(|&x| x ^ delta).collect();
    let a = k0.clone();
    tccr_hash_many(DOMAIN_ROT | g, &a, &mut k0);
    let b = k1.clone();
    tccr_hash_many(DOMAIN_ROT | g, &b, &mut k1);
    let mut y = Vec::with_capacity(32 * n);
    for i in 0..n {
        y.extend_from_slice(&(m0[i] ^ k0[i]).to_bytes());
    }
    for i in 0..n {
        y.extend_from_slice(&(m1[i] ^ k1[i]).to_bytes());
    }
    ch.send_chunked(&y)?;
    Ok(())
}

/// Receiver of chosen-message OT: `out[i] = m_{choices[i]}`.
pub fn ot_recv<R: CotReceiver + ?Sized>(src: &mut R, ch: &mut dyn Channel, choices: &BitVec, out: &mut [Block]) -> Result<()> {
    let n = out.len();
    if choices.len() != n {
        return Err(Error::Invalid(format!("{} choices for {} OTs", choices.len(), n)));
    }
    let g = src.produced() as u128;
    let mut rbits = BitVec::zeros(n);
    let mut t = vec![Block::ZERO; n];
    src.recv_cots(ch, &mut rbits, &mut t)?;
    let mut d = rbits;
    d.xor_assign(choices);
    ch.send(&d.to_bytes())?;
    let mut kt = vec![Block::ZERO; n];
    tccr_hash_many(DOMAIN_ROT | g, &t, &mut kt);
    let mut y = vec![0u8; 32 * n];
    ch.recv_chunked_into("chosen OT: sender's ciphertexts", &mut y)?;
    for i in 0..n {
        let off = if choices.get(i) { 16 * (n + i) } else { 16 * i };
        out[i] = Block::from_slice(&y[off..off + 16]) ^ kt[i];
    }
    Ok(())
}

fn check_k(k: usize) -> Result<()> {
    if !(1..=8).contains(&k) {
        return Err(Error::Invalid(format!("1-out-of-2^k OT needs 1 <= k <= 8, got {k}")));
    }
    Ok(())
}

/// Sender of `n` random 1-out-of-2^k OTs: `pads[i * 2^k + x]` is the pad of
/// index x in instance i (`pads.len() == n * 2^k`).
pub fn rot1n_send<S: CotSender + ?Sized>(src: &mut S, ch: &mut dyn Channel, k: usize, n: usize, pads: &mut [Block]) -> Result<()> {
    check_k(k)?;
    let nn = 1usize << k;
    if pads.len() != n * nn {
        return Err(Error::Invalid(format!("pads buffer has {} entries, need {}", pads.len(), n * nn)));
    }
    rot1n_send_with(src, ch, k, n, |i, x, pad| pads[i * nn + x] = pad)
}

/// [`rot1n_send`] keeping only the low `bits` ≤ 8 bits of every pad
/// (`out[i * 2^k + x]`): the same pads (their low bits), without holding
/// n·2^k full blocks — for protocols whose messages are that short (the
/// millionaires' leaves: 2 bits).
pub fn rot1n_send_lsb<S: CotSender + ?Sized>(src: &mut S, ch: &mut dyn Channel, k: usize, n: usize, bits: u32, out: &mut [u8]) -> Result<()> {
    check_k(k)?;
    let nn = 1usize << k;
    if out.len() != n * nn || !(1..=8).contains(&bits) {
        return Err(Error::Invalid(format!("pads buffer has {} entries, need {} (bits {bits} of 1..=8)", out.len(), n * nn)));
    }
    let m = ((1u16 << bits) - 1) as u8;
    rot1n_send_with(src, ch, k, n, |i, x, pad| out[i * nn + x] = pad.lo() as u8 & m)
}

/// Instances per COT request of the 1-of-2^k ROTs — the same on both
/// sides (the source's requests must match), a multiple of 256 (of both
/// sides' hashing groups, and so of 64 choice bits).
fn rot1n_per_request(k: usize) -> usize {
    (ROT_CHUNK / k).max(256) / 256 * 256
}

/// The sender's pads, handed to `put(instance, index, pad)` group by group.
fn rot1n_send_with<S: CotSender + ?Sized>(src: &mut S, ch: &mut dyn Channel, k: usize, n: usize, mut put: impl FnMut(usize, usize, Block)) -> Result<()> {
    let nn = 1usize << k;
    let g = src.produced();
    let delta = src.delta();
    let aes = hush_primitives::aes::fixed_key();
    // H((i, j, x), q_ij ⊕ x_j·Δ) = π(π(q_ij ⊕ x_j·Δ) ⊕ tweak) ⊕ π(q_ij ⊕ x_j·Δ)
    // (GKWY's TCCR, as `tccr_hash_tweaks`): the inner π takes only the two
    // values q_ij and q_ij ⊕ Δ, so it is computed once per (i, j, bit) —
    // 2k + k·2^k AES per instance instead of 2k·2^k; the pads are the same.
    // COTs are requested [`ROT_CHUNK`]-ish at a time and hashed a group
    // of instances at a time: bounded, cache-resident scratch.
    const GROUP: usize = 64;
    let per_req = rot1n_per_request(k);
    let mut q = vec![Block::ZERO; per_req.min(n) * k];
    let mut inner = vec![Block::ZERO; GROUP * 2 * k];
    let mut hs = vec![Block::ZERO; GROUP * nn * k];
    let (mut acc, mut sa) = (vec![Block::ZERO; nn], vec![Block::ZERO; nn]);
    for req in (0..n).step_by(per_req) {
        let req_end = (req + per_req).min(n);
        src.send_cots(ch, &mut q[..(req_end - req) * k])?;
        for start in (req..req_end).step_by(GROUP) {
            let end = (start + GROUP).min(req_end);
            let (inner, hs) = (&mut inner[..(end - start) * 2 * k], &mut hs[..(end - start) * nn * k]);
            for (pair, &qij) in inner.chunks_exact_mut(2).zip(&q[(start - req) * k..(end - req) * k]) {
                pair[0] = qij;
                pair[1] = qij ^ delta;
            }
            aes.encrypt_blocks(inner);
            // outer inputs π(q_ij ⊕ x_j·Δ) ⊕ tweak(i·k + j, x), laid out
            // (instance, j, x); the tweak's low byte is x, so the per-(i, j)
            // part is computed once
            for (ii, (a, h)) in inner.chunks_exact(2 * k).zip(hs.chunks_exact_mut(nn * k)).enumerate() {
                let i = start + ii;
                for (j, row) in h.chunks_exact_mut(nn).enumerate() {
                    let t = tweak_n(g + (i * k + j) as u64, 0);
                    let b = [a[2 * j] ^ t, a[2 * j + 1] ^ t];
                    for (x, o) in row.iter_mut().enumerate() {
                        *o = b[(x >> j) & 1] ^ Block(x as u128);
                    }
                }
            }
            aes.encrypt_blocks(hs);
            // pad(x) = ⊕_j π(in_jx) ⊕ ⊕_j π(q_ij ⊕ x_j·Δ): the first sum
            // row by row, the second over subsets (one XOR per x)
            for (ii, (a, h)) in inner.chunks_exact(2 * k).zip(hs.chunks_exact(nn * k)).enumerate() {
                let acc = &mut acc[..nn];
                acc.copy_from_slice(&h[..nn]);
                for row in h[nn..].chunks_exact(nn) {
                    for (o, &r) in acc.iter_mut().zip(row) {
                        *o ^= r;
                    }
                }
                let sa = &mut sa[..nn];
                sa[0] = (0..k).fold(Block::ZERO, |z, j| z ^ a[2 * j]);
                for x in 1..nn {
                    let j = x.trailing_zeros() as usize;
                    sa[x] = sa[x & (x - 1)] ^ a[2 * j] ^ a[2 * j + 1];
                }
                for (x, (&o, &t)) in acc.iter().zip(sa.iter()).enumerate() {
                    put(start + ii, x, o ^ t);
                }
            }
        }
    }
    zeroize::Zeroize::zeroize(&mut q);
    zeroize::Zeroize::zeroize(&mut inner);
    zeroize::Zeroize::zeroize(&mut hs);
    zeroize::Zeroize::zeroize(&mut acc);
    zeroize::Zeroize::zeroize(&mut sa);
    Ok(())
}

/// Receiver of `n` random 1-out-of-2^k OTs: `choices[i]` ∈ [0, 2^k) is the
/// random choice and `out[i]` its pad.
pub fn rot1n_recv<R: CotReceiver + ?Sized>(
    src: &mut R,
    ch: &mut dyn Channel,
    k: usize,
    choices: &mut [u8],
    out: &mut [Block],
) -> Result<()> {
    check_k(k)?;
    let n = out.len();
    if choices.len() != n {
        return Err(Error::Invalid("choices and out differ in length".into()));
    }
    rot1n_recv_with(src, ch, k, choices, |i, pad| out[i] = pad)
}

/// [`rot1n_recv`] keeping only the low `bits` ≤ 8 bits of each pad.
pub fn rot1n_recv_lsb<R: CotReceiver + ?Sized>(src: &mut R, ch: &mut dyn Channel, k: usize, bits: u32, choices: &mut [u8], out: &mut [u8]) -> Result<()> {
    check_k(k)?;
    if choices.len() != out.len() || !(1..=8).contains(&bits) {
        return Err(Error::Invalid(format!("choices ({}) and out ({}) differ in length, or bits {bits} outside 1..=8", choices.len(), out.len())));
    }
    let m = ((1u16 << bits) - 1) as u8;
    rot1n_recv_with(src, ch, k, choices, |i, pad| out[i] = pad.lo() as u8 & m)
}

/// The receiver's choices and pads, the pads handed to `put(instance,
/// pad)`; hashing runs a group of instances at a time (bounded scratch).
fn rot1n_recv_with<R: CotReceiver + ?Sized>(src: &mut R, ch: &mut dyn Channel, k: usize, choices: &mut [u8], mut put: impl FnMut(usize, Block)) -> Result<()> {
    let n = choices.len();
    let g = src.produced();
    const GROUP: usize = 256;
    let per_req = rot1n_per_request(k);
    let mut bits = BitVec::zeros(0);
    let mut t = vec![Block::ZERO; per_req.min(n) * k];
    let mut tw = Vec::with_capacity(GROUP * k);
    let mut hs = vec![Block::ZERO; GROUP * k];
    for req in (0..n).step_by(per_req) {
        let req_end = (req + per_req).min(n);
        src.recv_cots(ch, &mut bits, &mut t[..(req_end - req) * k])?;
        for start in (req..req_end).step_by(GROUP) {
            let end = (start + GROUP).min(req_end);
            tw.clear();
            for i in start..end {
                let mut c = 0usize;
                for j in 0..k {
                    c |= (bits.get((i - req) * k + j) as usize) << j;
                }
                choices[i] = c as u8;
                for j in 0..k {
                    tw.push(tweak_n(g + (i * k + j) as u64, c));
                }
            }
            let m = (end - start) * k;
            tccr_hash_tweaks(&tw, &t[(start - req) * k..(end - req) * k], &mut hs[..m]);
            for i in start..end {
                let mut acc = Block::ZERO;
                for j in 0..k {
                    acc ^= hs[(i - start) * k + j];
                }
                put(i, acc);
            }
        }
    }
    zeroize::Zeroize::zeroize(&mut t);
    zeroize::Zeroize::zeroize(&mut hs);
    Ok(())
}

fn mask_bits(bits: u32) -> u64 {
    if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Sender of `n` chosen 1-out-of-2^k OTs with `bits`-bit messages
/// (`msgs[i * 2^k + x]`, 1 ≤ bits ≤ 64).
pub fn ot1n_send<S: CotSender + ?Sized>(
    src: &mut S,
    ch: &mut dyn Channel,
    k: usize,
    bits: u32,
    msgs: &[u64],
) -> Result<()> {
    check_k(k)?;
    if !(1..=64).contains(&bits) {
        return Err(Error::Invalid(format!("message width {bits} not in 1..=64")));
    }
    let nn = 1usize << k;
    if msgs.len() % nn != 0 {
        return Err(Error::Invalid("message count is not a multiple of 2^k".into()));
    }
    let n = msgs.len() / nn;
    let mut pads = vec![Block::ZERO; n * nn];
    rot1n_send(src, ch, k, n, &mut pads)?;
    let d = ch.recv_exact("1-of-N OT: receiver's shifts", n)?;
    let w = (bits as usize).div_ceil(8);
    let mask = mask_bits(bits);
    let mut y = Vec::with_capacity(n * nn * w);
    for i in 0..n {
        let di = d[i] as usize;
        if di >= nn {
            return Err(malformed("1-of-N OT: receiver's shifts", format!("shift {di} out of range")));
        }
        for x in 0..nn {
            let v = (msgs[i * nn + x] ^ pads[i * nn + (x ^ di)].lo()) & mask;
            y.extend_from_slice(&v.to_le_bytes()[..w]);
        }
    }
    ch.send_chunked(&y)?;
    Ok(())
}

/// Receiver of chosen 1-out-of-2^k OTs: `out[i] = msgs[i][choices[i]]`.
pub fn ot1n_recv<R: CotReceiver + ?Sized>(
    src: &mut R,
    ch: &mut dyn Channel,
    k: usize,
    bits: u32,
    choices: &[u8],
    out: &mut [u64],
) -> Result<()> {
    check_k(k)?;
    if !(1..=64).contains(&bits) {
        return Err(Error::Invalid(format!("message width {bits} not in 1..=64")));
    }
    let nn = 1usize << k;
    let n = choices.len();
    if out.len() != n {
        return Err(Error::Invalid("choices and out differ in length".into()));
    }
    if let Some(&c) = choices.iter().find(|&&c| c as usize >= nn) {
        return Err(Error::Invalid(format!("choice {c} out of range for k = {k}")));
    }
    let mut rc = vec![0u8; n];
    let mut pads = vec![Block::ZERO; n];
    rot1n_recv(src, ch, k, &mut rc, &mut pads)?;
    let d: Vec<u8> = choices.iter().zip(&rc).map(|(&c, &r)| c ^ r).collect();
    ch.send(&d)?;
    let w = (bits as usize).div_ceil(8);
    let mut y = vec![0u8; n * nn * w];
    ch.recv_chunked_into("1-of-N OT: sender's ciphertexts", &mut y)?;
    let mask = mask_bits(bits);
    for i in 0..n {
        let off = (i * nn + choices[i] as usize) * w;
        let mut a = [0u8; 8];
        a[..w].copy_from_slice(&y[off..off + w]);
        let v = u64::from_le_bytes(a);
        if v & !mask != 0 {
            return Err(malformed("1-of-N OT: sender's ciphertexts", "bits set above the message width"));
        }
        out[i] = (v ^ pads[i].lo()) & mask;
    }
    Ok(())
}
