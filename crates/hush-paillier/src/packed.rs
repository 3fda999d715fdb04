//! Sparse matrix × a **slot-packed** encrypted vector: the owner of a
//! vector of 64-bit shares sends ⌈d/K⌉ ciphertexts instead of d, and the
//! evaluator, who holds the sparse matrix X, ends with shares of X·s over
//! Z_{2^64} as [`crate::proto::matvec_owner`]/[`crate::proto::matvec_eval`]
//! give them (up to +1 per row, see below). This is hush's own
//! construction, beyond SHAPER/CAESAR (which send one ciphertext per
//! entry); it exists for links where the vector's ciphertexts dominate the
//! bytes (vertical LR's model shares, sent every mini-batch: 70,000 of them
//! for SHAPER's 1M × (30k + 70k) task).
//!
//! ## The construction
//! Let S = 64 + x_bits + ⌈log₂(d+1)⌉ + 1 (a slot: any sum of at most d
//! products |x|·t with |x| < 2^x_bits and t ≤ 2^64 fits in it). The owner
//! sends P_g = Enc(Σ_{k<K} s_{gK+k}·2^{kS}). For each row i the evaluator
//! computes, for every non-zero x_ij (j = gK + k),
//!
//! * the base P_g if x_ij > 0, else the **complement** P̄_g =
//!   P_g^{−1}·Enc(2^64·Σ_k 2^{kS}) = Enc(Σ_k (2^64 − s_{gK+k})·2^{kS}) (one
//!   inversion per packed ciphertext, batched), so that every slot stays
//!   non-negative and |x_ij|·(2^64 − s_j) ≡ x_ij·s_j (mod 2^64);
//! * raised to |x_ij|·2^{(K−1−k)S}: slot k lands in slot K−1.
//!
//! The product V_i = Π over the row is computed as K small-exponent
//! multi-exponentiations (one per slot k, over the row's terms in that
//! slot) joined by Horner's rule with K − 1 steps of S squarings
//! ([`crate::ifma::MontCtx::multi_exp8`] and `horner8`, eight rows at a
//! time). Its plaintext is V_i = L + 2^{(K−1)S}·(W_i + 2^S·H) with
//! W_i = Σ_j |x_ij|·t_j ≡ ⟨x_i, s⟩ (mod 2^64) the wanted sum, L < 2^{(K−1)S}
//! the slots below k that moved down (each output slot below K−1 holds a
//! sum of fewer than d products, so no carry reaches slot K−1), and H the
//! slots above k that moved up. V_i < 2^{(2K−1)S}.
//!
//! V_i goes through h2s with one value per ciphertext
//! ([`crate::proto::h2s_eval_packed_pack`]): the evaluator adds a mask r
//! uniform on [2^b, 2^b + 2^{b+σ}) (b = (2K−1)S, σ = 40; K is chosen so that
//! b + σ + 1 ≤ |n| − 2, so V + r < n and decryption gives the integer
//! V + r), rerandomises, and the shares are the owner's ⌊(V+r)/2^{(K−1)S}⌋
//! and the evaluator's −⌊r/2^{(K−1)S}⌋, mod 2^64. Their sum is
//! ⌊V/2^{(K−1)S}⌋ or one more — integer shares, so no other error — and
//! ⌊V/2^{(K−1)S}⌋ = W_i + 2^S·H ≡ ⟨x_i, s⟩ (mod 2^64) since S ≥ 64. The
//! +1 is one unit in the last place of the product (2^{−2f} in fixed point
//! with f fractional bits on each factor), below the truncation that
//! follows.
//!
//! ## What each host sees (semi-honest), and why that is safe
//! * **Evaluator:** ⌈d/K⌉ ciphertexts under the owner's key. Packing
//!   changes the plaintexts, not what the evaluator can do with them: like
//!   every ciphertext under the owner's key they are simulatable by
//!   encryptions of zero (DCR, DJN's short-exponent variant). The
//!   complements and shifts are computed from them publicly.
//! * **Owner:** one ciphertext per row, decrypting to V_i + r_i with r_i
//!   uniform on [2^b, 2^b + 2^{b+σ}) and 0 ≤ V_i < 2^b: within statistical
//!   distance 2^−σ of r_i alone, whatever V_i is — including the parts L
//!   and H that depend on the evaluator's row beyond the wanted sum — so the
//!   owner's view is simulatable from its output share, as in plain h2s.
//!   The evaluator rerandomises every ciphertext it returns (the owner
//!   knows the randomness of the P_g it sent). Test:
//!   `packed_matvec_owner_view_is_independent_of_the_matrix` (the owner's
//!   shares for two very different matrices are alike and uniform; it
//!   fails when the mask is dropped).
//! * The sizes d, K, S and the number of rows are public, as in the
//!   unpacked protocol; x_bits is a public bound (the evaluator refuses a
//!   matrix above it before anything is sent).
//!
//! Costs: owner → evaluator ⌈d/K⌉ ciphertexts (a 2,048-bit key fits K = 10
//! for d ≤ 10^5; vertical LR uses 6); evaluator → owner one ciphertext per
//! row (the unpacked h2s packs about 14 rows per ciphertext there); the
//! evaluator's work grows by (K−1)·S squarings per eight rows. 1 round each
//! way, as [`crate::proto::matvec_owner`].

use crate::key::{Ciphertext, KeyPair, PublicKey};
use crate::pack::Packing;
use crate::proto::{h2s_eval_packed_pack, h2s_owner_pack, recv_cts, send_cts};
use crate::sparse::{multi_exp, Csr, ROWS_AHEAD};
use crate::{Error, Result, SIGMA};
use hush_transport::Channel;
use rand::{CryptoRng, RngCore};
use rug::Integer;

/// The public layout of a slot-packed vector of `len` u64 shares that rows
/// with entries |x| < 2^`x_bits` multiply: `k` shares per ciphertext,
/// `slot_bits` (S) bits per slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackedVec {
    pub len: usize,
    pub k: usize,
    pub slot_bits: u32,
    pub x_bits: u32,
}

fn bits_of(d: usize) -> u32 {
    64 - (d as u64).leading_zeros()
}

impl PackedVec {
    /// The layout for `len` shares under an `n_bits` key with at most
    /// `k_max` shares per ciphertext: S = 64 + x_bits + bits(len) + 1, and
    /// the largest K ≤ k_max with (2K−1)·S + σ + 1 ≤ n_bits − 2 (at least
    /// 1). An error if not even one slot fits.
    pub fn new(len: usize, x_bits: u32, n_bits: u32, k_max: usize) -> Result<PackedVec> {
        let slot_bits = 64 + x_bits + bits_of(len) + 1;
        let room = n_bits.saturating_sub(2 + SIGMA + 1);
        if room < slot_bits {
            return Err(Error::Packing(format!("a {slot_bits}-bit product slot does not fit a {n_bits}-bit plaintext")));
        }
        let k_fit = (room / slot_bits).div_ceil(2) as usize;
        Ok(PackedVec { len, k: k_fit.min(k_max).max(1), slot_bits, x_bits })
    }

    /// Ciphertexts the owner sends.
    pub fn cts(&self) -> usize {
        self.len.div_ceil(self.k)
    }

    /// Bits of a row's packed product V (< 2^((2K−1)·S)).
    pub fn value_bits(&self) -> u32 {
        (2 * self.k as u32 - 1) * self.slot_bits
    }

    /// Where the wanted sum sits in V: slot K − 1.
    pub fn shift(&self) -> u32 {
        (self.k as u32 - 1) * self.slot_bits
    }

    /// The h2s packing of the row products: one per ciphertext.
    pub fn h2s(&self) -> Packing {
        let value_bits = self.value_bits();
        Packing { value_bits, slot_bits: value_bits + SIGMA + 1, slots: 1 }
    }

    /// Horner's join of the K per-slot products (entry e shifted by e·S).
    fn horner(&self) -> Packing {
        Packing { value_bits: 0, slot_bits: self.slot_bits, slots: self.k }
    }

    /// The packed plaintexts Σ_k s_{gK+k}·2^{kS}.
    fn plaintexts(&self, s: &[u64]) -> Vec<Integer> {
        s.chunks(self.k)
            .map(|c| {
                let mut acc = Integer::new();
                for &v in c.iter().rev() {
                    acc <<= self.slot_bits;
                    acc += v;
                }
                acc
            })
            .collect()
    }
}

/// Owner side, first half: sends the ⌈d/K⌉ packed encryptions of `s`.
pub fn send_packed<C: Channel + ?Sized, R: RngCore + CryptoRng + ?Sized>(
    ch: &mut C,
    kp: &KeyPair,
    s: &[u64],
    layout: PackedVec,
    rng: &mut R,
) -> Result<()> {
    if s.len() != layout.len {
        return Err(Error::Packing(format!("{} shares for a layout of {}", s.len(), layout.len)));
    }
    let mut ms = layout.plaintexts(s);
    let cts = kp.encrypt_batch(&ms, rng)?;
    crate::wipe::wipe_all(ms.iter_mut());
    send_cts(ch, kp.public(), &cts)
}

/// Owner side, second half: receives the row products and returns its
/// shares of X·s (`rows` values).
pub fn recv_products<C: Channel + ?Sized>(ch: &mut C, kp: &KeyPair, rows: usize, layout: PackedVec) -> Result<Vec<u64>> {
    h2s_owner_pack(ch, kp, rows, layout.h2s(), layout.shift())
}

/// Both halves of the owner's side.
pub fn matvec_packed_owner<C: Channel + ?Sized, R: RngCore + CryptoRng + ?Sized>(
    ch: &mut C,
    kp: &KeyPair,
    s: &[u64],
    rows: usize,
    layout: PackedVec,
    rng: &mut R,
) -> Result<Vec<u64>> {
    send_packed(ch, kp, s, layout, rng)?;
    recv_products(ch, kp, rows, layout)
}

/// Evaluator side: checks X against the layout, receives and validates the
/// packed ciphertexts, computes the rows' products (eight rows at a time
/// where the CPU has IFMA) while streaming them through h2s; returns its
/// shares of X·s.
pub fn matvec_packed_eval<C: Channel + ?Sized, R: RngCore + CryptoRng + ?Sized>(
    ch: &mut C,
    owner: &PublicKey,
    x: &Csr,
    layout: PackedVec,
    rng: &mut R,
) -> Result<Vec<u64>> {
    if x.cols != layout.len {
        return Err(Error::Packing(format!("a matrix of {} columns for a packed vector of {}", x.cols, layout.len)));
    }
    if x.max_abs_bits() > layout.x_bits {
        return Err(Error::PlaintextRange(format!(
            "a matrix entry of {} bits above the layout's bound of {} bits",
            x.max_abs_bits(),
            layout.x_bits
        )));
    }
    let cts = recv_cts(ch, owner, layout.cts(), "packed encrypted vector")?;
    let comp = if x.values.iter().any(|&v| v < 0) { complements(owner, &cts, layout) } else { Vec::new() };
    let mut cache: (usize, Vec<Ciphertext>) = (0, Vec::new());
    h2s_eval_packed_pack(ch, owner, x.rows, layout.h2s(), layout.shift(), rng, |r| {
        if r < cache.0 || r >= cache.0 + cache.1.len() {
            let hi = (r + ROWS_AHEAD).min(x.rows);
            cache = (r, rows_packed(x, owner, &cts, &comp, layout, r..hi)?);
        }
        Ok(cache.1[r - cache.0].clone())
    })
}

/// P̄_g = P_g^{−1}·Enc(2^64·Σ_k 2^{kS}) for every packed ciphertext: one
/// inversion for all (Montgomery's trick), three products each.
pub(crate) fn complements(pk: &PublicKey, cts: &[Ciphertext], layout: PackedVec) -> Vec<Integer> {
    let n2 = pk.n2();
    if cts.is_empty() {
        return Vec::new();
    }
    let mut prefix = Vec::with_capacity(cts.len());
    let mut acc = Integer::from(1);
    for c in cts {
        acc *= &c.0;
        acc %= n2;
        prefix.push(acc.clone());
    }
    // validated units mod n², so the product is one too
    let mut rest = acc.invert(n2).expect("validated ciphertexts are units");
    let mut c_all = Integer::new();
    for _ in 0..layout.k {
        c_all <<= layout.slot_bits;
        c_all += 1;
    }
    c_all <<= 64;
    let shift = pk.add_plain(&Ciphertext(Integer::from(1)), &c_all).0;
    let mut out = vec![Integer::new(); cts.len()];
    for i in (0..cts.len()).rev() {
        let mut inv = if i == 0 { rest.clone() } else { Integer::from(&rest * &prefix[i - 1]) };
        inv %= n2;
        rest *= &cts[i].0;
        rest %= n2;
        inv *= &shift;
        inv %= n2;
        out[i] = inv;
    }
    out
}

/// The packed products V_i of `rows` (see the module docs): per eight rows,
/// K multi-exponentiations (one per slot, small exponents) and a Horner
/// join; GMP row by row where the CPU has no IFMA or one row is asked for.
pub(crate) fn rows_packed(
    x: &Csr,
    pk: &PublicKey,
    cts: &[Ciphertext],
    comp: &[Integer],
    layout: PackedVec,
    rows: std::ops::Range<usize>,
) -> Result<Vec<Ciphertext>> {
    let k = layout.k;
    let n2 = pk.n2();
    let ctx = if rows.len() > 1 { pk.mont_n2() } else { None };
    let term = |c: usize, v: i64| -> (&Integer, u64) {
        let g = c / k;
        if v > 0 {
            (&cts[g].0, v as u64)
        } else {
            (&comp[g], v.unsigned_abs())
        }
    };
    let idx: Vec<usize> = rows.collect();
    let mut out = Vec::with_capacity(idx.len());
    for chunk in idx.chunks(crate::ifma::LANES) {
        // per row: [G_{K−1}, …, G_0] (Horner entry e is shifted by e·S)
        let mut groups: Vec<Vec<Ciphertext>> = vec![Vec::with_capacity(k); chunk.len()];
        for slot in (0..k).rev() {
            let lanes: Vec<Vec<(&Integer, u64)>> = chunk
                .iter()
                .map(|&r| x.row(r).filter(|&(c, v)| c % k == slot && v != 0).map(|(c, v)| term(c, v)).collect())
                .collect();
            let g: Vec<Integer> = match &ctx {
                Some(ctx) if lanes.len() > 1 => ctx.multi_exp8(&lanes),
                _ => lanes.iter().map(|l| multi_exp(l, n2).unwrap_or_else(|| Integer::from(1))).collect(),
            };
            for (lane, v) in g.into_iter().enumerate() {
                groups[lane].push(Ciphertext(v));
            }
        }
        out.extend(layout.horner().pack_many(pk, &groups)?);
    }
    Ok(out)
}

