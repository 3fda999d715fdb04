//! Hybrid protocols over a [`Channel`]: conversions between additive shares
//! over Z_{2^64} and Paillier ciphertexts (SHAPER App. C, after FZT+21),
//! Beaver triples from Paillier, and the sparse-matrix × encrypted-vector
//! product.
//!
//! Roles: the **owner** holds the key pair; the **evaluator** holds only the
//! owner's public key and computes on ciphertexts.
//!
//! * [`s2h_owner`]/[`s2h_eval`] (shares → ciphertext, SHAPER's Algorithm 4,
//!   which the paper labels "H2S"): the owner sends Enc(x₁); the evaluator
//!   adds x₂ in plaintext and holds Enc(x₁ + x₂) (≡ x mod 2^64). 1 round.
//! * [`h2s_eval`]/[`h2s_owner`] (ciphertext → shares, the paper's
//!   Algorithm 5, labelled "S2H" there): the evaluator masks each value
//!   with r ∈ [2^b, 2^b + 2^(b+σ)), packs [`Packing::slots`] masked values
//!   per ciphertext, **rerandomises** (the paper's step sends c·g^{−r}
//!   alone, which would let the owner, who knows the randomness of the
//!   ciphertexts it sent, strip h_s-powers that depend on the evaluator's
//!   plaintexts) and streams the packed ciphertexts in frames of
//!   `STREAM_CHUNK` as they are computed; the owner decrypts each frame on
//!   arrival. Shares: owner (v + r) mod 2^64, evaluator −r mod 2^64.
//!   1 round.
//! * [`triples_owner`]/[`triples_helper`]: Beaver triples c = a·b over
//!   Z_{2^64} with no dealer (cross terms a₀b₁ + a₁b₀ through Paillier and
//!   h2s). The owner encrypts a₀, b₀ already shifted to the h2s slot their
//!   triple lands in, so the helper's packed ciphertext is one
//!   multi-exponentiation per group (no Horner chain). 2 rounds.
//! * [`s2h_owner_shifted`] + [`h2s_eval_packed_with`] (with
//!   [`Csr::grouped`]): products that land in h2s slots directly — the
//!   owner sends its vector shifted into every slot, the evaluator
//!   multiplies grouped rows; for many more outputs than inputs (LR's
//!   backward pass on wide data).
//!
//! Every ciphertext received is validated ([`PublicKey::decode_cts`]) and
//! every message length is computed locally before anything is received.
//!
//! ## What each host sees (semi-honest)
//! * **Evaluator**: only ciphertexts under the owner's key (and, in the
//!   triples, its own values): simulatable by encryptions of zero under the
//!   DCR assumption (DJN's short-exponent variant). Shifted plaintexts
//!   (x·2^s) change nothing here: the evaluator could compute Enc(x·2^s)
//!   = Enc(x)^(2^s) itself.
//! * **Owner**: in s2h it only sends. In h2s and in the triples' cross
//!   terms it decrypts v + r with r uniform on [2^b, 2^b + 2^(b+σ)) for
//!   |v| < 2^b, which is within statistical distance 2^−σ (σ = [`SIGMA`] =
//!   40) of r alone, so its view is simulatable from its output share; the
//!   evaluator rerandomises every ciphertext it returns, so their
//!   randomness carries nothing of the evaluator's plaintexts. Tests:
//!   `h2s_owner_view_is_independent_of_the_value` (Horner packing) and
//!   `h2s_packed_owner_view_is_independent_of_the_value` (already-packed
//!   groups: each slot masked on its own).

use crate::key::{random_bits, Ciphertext, KeyPair, PublicKey};
use crate::pack::Packing;
use crate::sparse::{multi_exp, Csr};
use crate::{Error, Result, SIGMA};
use hush_transport::{Channel, ChannelExt};
use rand::{CryptoRng, RngCore};
use rug::Integer;

/// Packed ciphertexts per frame when streaming h2s.
pub const STREAM_CHUNK: usize = 16;

/// Sends ciphertexts as one flight (frames of at most max_frame bytes).
pub fn send_cts<C: Channel + ?Sized>(ch: &mut C, pk: &PublicKey, cts: &[Ciphertext]) -> Result<()> {
    ch.send_chunked(&pk.encode_cts(cts))?;
    Ok(())
}

/// Receives and validates exactly `count` ciphertexts under `pk`.
pub fn recv_cts<C: Channel + ?Sized>(
    ch: &mut C,
    pk: &PublicKey,
    count: usize,
    what: &'static str,
) -> Result<Vec<Ciphertext>> {
    let len = count
        .checked_mul(pk.ct_bytes())
        .ok_or_else(|| Error::Malformed { what, reason: "size overflow".into() })?;
    let mut buf = vec![0u8; len];
    ch.recv_chunked_into(what, &mut buf)?;
    pk.decode_cts(&buf, count, what)
}

/// Encrypts u64 values (as integers in [0, 2^64)) with CRT.
pub fn encrypt_u64s<R: RngCore + CryptoRng + ?Sized>(kp: &KeyPair, xs: &[u64], rng: &mut R) -> Vec<Ciphertext> {
    let ms: Vec<Integer> = xs.iter().map(|&x| Integer::from(x)).collect();
    kp.encrypt_batch(&ms, rng).expect("64-bit values are below n")
}

/// Exchanges public keys (both parties call it). Returns the peer's key.
pub fn exchange_keys<C: Channel + ?Sized>(ch: &mut C, kp: &KeyPair, window: u32) -> Result<PublicKey> {
    ch.send(&kp.public().to_bytes())?;
    let b = ch.recv()?;
    if b.len() > 4 + 3 * 3072 / 8 {
        return Err(Error::Malformed { what: "public key", reason: format!("{} bytes", b.len()) });
    }
    PublicKey::from_bytes(&b, window)
}

/// s2h, owner side: sends Enc(x₁).
pub fn s2h_owner<C: Channel + ?Sized, R: RngCore + CryptoRng + ?Sized>(
    ch: &mut C,
    kp: &KeyPair,
    x1: &[u64],
    rng: &mut R,
) -> Result<()> {
    send_cts(ch, kp.public(), &encrypt_u64s(kp, x1, rng))
}

/// s2h for slot-packed products, owner side: sends Enc(x₁ · 2^(k·`slot_bits`))
/// for k < `copies` (copy-major: all of copy 0, then copy 1, …), so the
/// evaluator can compute products that land in slot k directly
/// ([`crate::sparse::Csr::grouped`], [`h2s_eval_packed_with`]) instead of
/// shifting each product by `slot_bits` squarings per slot (Horner).
/// **View:** the evaluator could compute each copy itself from Enc(x₁)
/// (Enc(x)^(2^s) = Enc(2^s·x)); like every ciphertext under the owner's
/// key it is simulatable by an encryption of zero (see the module docs).
/// Costs `copies` × the encryptions and bytes of [`s2h_owner`].
pub fn s2h_owner_shifted<C: Channel + ?Sized, R: RngCore + CryptoRng + ?Sized>(
    ch: &mut C,
    kp: &KeyPair,
    x1: &[u64],
    copies: usize,
    slot_bits: u32,
    rng: &mut R,
) -> Result<()> {
    let mut ms = Vec::with_capacity(copies * x1.len());
    for k in 0..copies {
        ms.extend(x1.iter().map(|&x| Integer::from(x) << (k as u32 * slot_bits)));
    }
    let cts = kp.encrypt_batch(&ms, rng)?;
    crate::wipe::wipe_all(ms.iter_mut());
    send_cts(ch, kp.public(), &cts)
}

/// s2h, evaluator side: receives Enc(x₁) and returns Enc(x₁ + x₂).
pub fn s2h_eval<C: Channel + ?Sized>(ch: &mut C, owner: &PublicKey, x2: &[u64]) -> Result<Vec<Ciphertext>> {
    let cts = recv_cts(ch, owner, x2.len(), "s2h ciphertexts")?;
    Ok(cts.iter().zip(x2).map(|(c, &x)| owner.add_plain(c, &Integer::from(x))).collect())
}

/// The packing used by h2s for values below 2^value_bits under `pk`.
pub fn h2s_packing(pk: &PublicKey, value_bits: u32) -> Result<Packing> {
    Packing::new(value_bits, SIGMA, pk.bits())
}

/// Masks, packs and rerandomises groups of ciphertexts; returns the
/// packed ciphertexts and the evaluator's shares (−r mod 2^64), in order.
fn h2s_pack_groups<R: RngCore + CryptoRng + ?Sized>(
    owner: &PublicKey,
    pack: &Packing,
    groups: &[Vec<Ciphertext>],
    rng: &mut R,
) -> Result<(Vec<Ciphertext>, Vec<u64>)> {
    let base = Integer::from(1) << pack.value_bits;
    let packed = pack.pack_many(owner, groups)?;
    let mut shares = Vec::new();
    let mut masked = Vec::with_capacity(groups.len());
    for (g, p) in groups.iter().zip(packed) {
        let masks: Vec<Integer> = g.iter().map(|_| random_bits(rng, pack.value_bits + SIGMA) + &base).collect();
        shares.extend(masks.iter().map(|r| r.to_u64_wrapping().wrapping_neg()));
        masked.push(owner.add_plain(&p, &pack.pack_plain(&masks)));
    }
    Ok((owner.rerandomize_batch(&masked, rng), shares))
}

/// h2s, evaluator side: turns ciphertexts of signed values |v| < 2^value_bits
/// into shares; returns the evaluator's shares. Streams frames of
/// [`STREAM_CHUNK`] packed ciphertexts.
pub fn h2s_eval<C: Channel + ?Sized, R: RngCore + CryptoRng + ?Sized>(
    ch: &mut C,
    owner: &PublicKey,
    cts: &[Ciphertext],
    value_bits: u32,
    rng: &mut R,
) -> Result<Vec<u64>> {
    h2s_eval_with(ch, owner, cts.len(), value_bits, rng, |i| Ok(cts[i].clone()))
}

/// h2s, evaluator side, with ciphertexts produced on demand by `make(i)`
/// (so computing the next group overlaps the owner's decryption of the
/// previous frames).
pub fn h2s_eval_with<C: Channel + ?Sized, R: RngCore + CryptoRng + ?Sized>(
    ch: &mut C,
    owner: &PublicKey,
    count: usize,
    value_bits: u32,
    rng: &mut R,
    mut make: impl FnMut(usize) -> Result<Ciphertext>,
) -> Result<Vec<u64>> {
    let pack = h2s_packing(owner, value_bits)?;
    let mut shares = Vec::with_capacity(count);
    let mut frame = Vec::new();
    let mut in_frame = 0;
    let groups = pack.packed_len(count);
    // eight groups at a time (the IFMA packing lanes), frames of STREAM_CHUNK
    let mut g = 0;
    while g < groups {
        let take = crate::ifma::LANES.min(groups - g).min(STREAM_CHUNK - in_frame);
        let mut batch = Vec::with_capacity(take);
        for k in g..g + take {
            let lo = k * pack.slots;
            let hi = (lo + pack.slots).min(count);
            batch.push((lo..hi).map(&mut make).collect::<Result<Vec<_>>>()?);
        }
        let (cs, s) = h2s_pack_groups(owner, &pack, &batch, rng)?;
        shares.extend(s);
        for c in &cs {
            owner.write_ct(c, &mut frame);
        }
        in_frame += take;
        g += take;
        if in_frame == STREAM_CHUNK || g == groups {
            ch.send_chunked(&frame)?;
            frame.clear();
            in_frame = 0;
        }
    }
    Ok(shares)
}

/// h2s, evaluator side, for `count` values whose ciphertexts come
/// **already packed**: `make_group(g)` = Enc(Σ_k 2^(k·slot_bits) · v_(g·slots+k))
/// for the packing of [`h2s_packing`] (e.g. products over the shifted
/// copies of [`s2h_owner_shifted`]). Masks, rerandomises and streams them
/// exactly as [`h2s_eval_with`] does after its packing step — the owner
/// runs the same [`h2s_owner`], and sees the same masked slots.
pub fn h2s_eval_packed_with<C: Channel + ?Sized, R: RngCore + CryptoRng + ?Sized>(
    ch: &mut C,
    owner: &PublicKey,
    count: usize,
    value_bits: u32,
    rng: &mut R,
    make_group: impl FnMut(usize) -> Result<Ciphertext>,
) -> Result<Vec<u64>> {
    h2s_eval_packed_pack(ch, owner, count, h2s_packing(owner, value_bits)?, 0, rng, make_group)
}

/// [`h2s_eval_packed_with`] with an explicit `pack` (e.g. a
/// [`Packing::capped`] one; the owner calls [`h2s_owner_pack`] with the
/// same) and the shares of ⌊v / 2^`shift`⌋ instead of v, for values
/// 0 ≤ v < 2^value_bits: with the mask r, the owner gets ⌊(v + r)/2^shift⌋
/// and the evaluator −⌊r/2^shift⌋ (mod 2^64), whose sum is ⌊v/2^shift⌋ or
/// one more (integer shares, so no wrap-around error: v + r < n). With
/// `shift` = 0 it is [`h2s_eval_packed_with`] exactly.
pub fn h2s_eval_packed_pack<C: Channel + ?Sized, R: RngCore + CryptoRng + ?Sized>(
    ch: &mut C,
    owner: &PublicKey,
    count: usize,
    pack: Packing,
    shift: u32,
    rng: &mut R,
    mut make_group: impl FnMut(usize) -> Result<Ciphertext>,
) -> Result<Vec<u64>> {
    let base = Integer::from(1) << pack.value_bits;
    let groups = pack.packed_len(count);
    let mut shares = Vec::with_capacity(count);
    let mut frame = Vec::new();
    // eight groups at a time (the lanes of the batched rerandomisation),
    // frames of STREAM_CHUNK
    let mut g = 0;
    while g < groups {
        let take = crate::ifma::LANES.min(groups - g);
        let mut masked = Vec::with_capacity(take);
        for h in g..g + take {
            let k = pack.slots.min(count - h * pack.slots);
            let masks: Vec<Integer> = (0..k).map(|_| random_bits(rng, pack.value_bits + SIGMA) + &base).collect();
            shares.extend(masks.iter().map(|r| Integer::from(r >> shift).to_u64_wrapping().wrapping_neg()));
            masked.push(owner.add_plain(&make_group(h)?, &pack.pack_plain(&masks)));
        }
        for (i, c) in owner.rerandomize_batch(&masked, rng).iter().enumerate() {
            owner.write_ct(c, &mut frame);
            if (g + i + 1) % STREAM_CHUNK == 0 || g + i + 1 == groups {
                ch.send_chunked(&frame)?;
                frame.clear();
            }
        }
        g += take;
    }
    Ok(shares)
}

/// h2s, owner side: receives the packed ciphertexts frame by frame,
/// decrypts and unpacks; returns the owner's shares.
pub fn h2s_owner<C: Channel + ?Sized>(ch: &mut C, kp: &KeyPair, count: usize, value_bits: u32) -> Result<Vec<u64>> {
    h2s_owner_pack(ch, kp, count, h2s_packing(kp.public(), value_bits)?, 0)
}

/// [`h2s_owner`] for [`h2s_eval_packed_pack`]'s explicit packing and
/// shift: the owner's shares of ⌊v / 2^`shift`⌋.
pub fn h2s_owner_pack<C: Channel + ?Sized>(ch: &mut C, kp: &KeyPair, count: usize, pack: Packing, shift: u32) -> Result<Vec<u64>> {
    let pk = kp.public();
    let groups = pack.packed_len(count);
    let mut out = Vec::with_capacity(count);
    let mut g = 0;
    while g < groups {
        let in_frame = STREAM_CHUNK.min(groups - g);
        let cts = recv_cts(ch, pk, in_frame, "h2s packed ciphertexts")?;
        for m in kp.decrypt_batch(&cts) {
            let lo = g * pack.slots;
            let k = pack.slots.min(count - lo);
            for v in pack.unpack(&m, k).map_err(|e| Error::Malformed { what: "h2s", reason: e.to_string() })? {
                out.push((v >> shift).to_u64_wrapping());
            }
            g += 1;
        }
    }
    Ok(out)
}

/// Bound on the triples' cross terms a₀b₁ + b₀a₁ (two 128-bit products).
const TRIPLE_BITS: u32 = 130;

/// Beaver triples over Z_{2^64}: c₀ + c₁ = (a₀ + a₁)(b₀ + b₁).
#[derive(Clone, Debug, Default)]
pub struct Triples {
    pub a: Vec<u64>,
    pub b: Vec<u64>,
    pub c: Vec<u64>,
}

/// Triple generation, key-owner side (2 rounds).
pub fn triples_owner<C: Channel + ?Sized, R: RngCore + CryptoRng + ?Sized>(
    ch: &mut C,
    kp: &KeyPair,
    count: usize,
    rng: &mut R,
) -> Result<Triples> {
    let pending = triples_owner_send(ch, kp, count, rng)?;
    triples_owner_finish(ch, kp, pending)
}

/// The owner's half-made triples between [`triples_owner_send`] and
/// [`triples_owner_finish`] (so other messages can go in between, e.g. a
/// training step's, and the two directions of the link overlap).
pub struct PendingTriples {
    a: Vec<u64>,
    b: Vec<u64>,
}

/// [`triples_owner`]'s first flight: draws a₀, b₀ and sends their
/// slot-shifted encryptions.
pub fn triples_owner_send<C: Channel + ?Sized, R: RngCore + CryptoRng + ?Sized>(
    ch: &mut C,
    kp: &KeyPair,
    count: usize,
    rng: &mut R,
) -> Result<PendingTriples> {
    let a: Vec<u64> = (0..count).map(|_| rng.next_u64()).collect();
    let b: Vec<u64> = (0..count).map(|_| rng.next_u64()).collect();
    // each value pre-shifted to the h2s slot its triple's cross term lands in
    let pack = h2s_packing(kp.public(), TRIPLE_BITS)?;
    let mut ms: Vec<Integer> = (0..count)
        .flat_map(|i| {
            let s = (i % pack.slots) as u32 * pack.slot_bits;
            [Integer::from(a[i]) << s, Integer::from(b[i]) << s]
        })
        .collect();
    let cts = kp.encrypt_batch(&ms, rng)?;
    crate::wipe::wipe_all(ms.iter_mut());
    send_cts(ch, kp.public(), &cts)?;
    Ok(PendingTriples { a, b })
}

/// [`triples_owner`]'s second half: receives the helper's packed cross
/// terms and completes the triples.
pub fn triples_owner_finish<C: Channel + ?Sized>(ch: &mut C, kp: &KeyPair, pending: PendingTriples) -> Result<Triples> {
    let PendingTriples { a, b } = pending;
    let count = a.len();
    let s = h2s_owner(ch, kp, count, TRIPLE_BITS)?;
    let c = (0..count).map(|i| a[i].wrapping_mul(b[i]).wrapping_add(s[i])).collect();
    Ok(Triples { a, b, c })
}

/// Triple generation, helper side (holds only the owner's public key).
pub fn triples_helper<C: Channel + ?Sized, R: RngCore + CryptoRng + ?Sized>(
    ch: &mut C,
    owner: &PublicKey,
    count: usize,
    rng: &mut R,
) -> Result<Triples> {
    let a: Vec<u64> = (0..count).map(|_| rng.next_u64()).collect();
    let b: Vec<u64> = (0..count).map(|_| rng.next_u64()).collect();
    let cts = recv_cts(ch, owner, 2 * count, "triple ciphertexts")?;
    let n2 = owner.n2().clone();
    let ctx = if crate::ifma::available() { crate::ifma::MontCtx::new(&n2) } else { None };
    // The owner's values arrive shifted into their slots, so group g's
    // packed cross terms Enc(Σ_k 2^(k·w)(a₀b₁ + b₀a₁)) are one
    // multi-exponentiation with 64-bit exponents (no Horner squarings);
    // eight groups at a time on the IFMA lanes where available.
    let pack = h2s_packing(owner, TRIPLE_BITS)?;
    let terms = |g: usize| -> Vec<(&Integer, u64)> {
        let lo = g * pack.slots;
        (lo..(lo + pack.slots).min(count)).flat_map(|j| [(&cts[2 * j].0, b[j]), (&cts[2 * j + 1].0, a[j])]).collect()
    };
    let groups = pack.packed_len(count);
    let mut cache: (usize, Vec<Ciphertext>) = (0, Vec::new());
    let s = h2s_eval_packed_with(ch, owner, count, TRIPLE_BITS, rng, |g| {
        let Some(ctx) = &ctx else {
            return Ok(Ciphertext(multi_exp(&terms(g), &n2).unwrap()));
        };
        if g < cache.0 || g >= cache.0 + cache.1.len() {
            let hi = (g + crate::ifma::LANES).min(groups);
            let lanes: Vec<Vec<(&Integer, u64)>> = (g..hi).map(terms).collect();
            cache = (g, ctx.multi_exp8(&lanes).into_iter().map(Ciphertext).collect());
        }
        Ok(cache.1[g - cache.0].clone())
    })?;
    let c = (0..count).map(|i| a[i].wrapping_mul(b[i]).wrapping_add(s[i])).collect();
    Ok(Triples { a, b, c })
}

/// X · s where the key owner holds the share vector s (u64, length
/// X.cols) and the evaluator holds the sparse X: owner side. Sends Enc(s),
/// then receives its shares of X·s (X.rows values below 2^value_bits).
pub fn matvec_owner<C: Channel + ?Sized, R: RngCore + CryptoRng + ?Sized>(
    ch: &mut C,
    kp: &KeyPair,
    s: &[u64],
    rows: usize,
    value_bits: u32,
    rng: &mut R,
) -> Result<Vec<u64>> {
    s2h_owner(ch, kp, s, rng)?;
    h2s_owner(ch, kp, rows, value_bits)
}

/// Evaluator side of [`matvec_owner`]: receives Enc(s), computes X·Enc(s)
/// row by row (work ∝ nnz) while streaming the packed results.
pub fn matvec_eval<C: Channel + ?Sized, R: RngCore + CryptoRng + ?Sized>(
    ch: &mut C,
    owner: &PublicKey,
    x: &Csr,
    rng: &mut R,
) -> Result<Vec<u64>> {
    let cts = recv_cts(ch, owner, x.cols, "encrypted vector")?;
    let mut f = crate::sparse::row_enc_stream(x, owner, &cts);
    h2s_eval_with(ch, owner, x.rows, x.product_bits(), rng, |r| Ok(f(r)))
}
