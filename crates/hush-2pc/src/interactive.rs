//! The **interactive provider** of the transformer operators' correlations:
//! every kind of [`crate::deal`] that a [`crate::transformer::Ctx`] consumes
//! (Beaver triples, matrix triples, one-sided weight triples, truncation
//! pairs and their truncate-and-square / truncate-and-multiply variants,
//! power tuples, subset products), produced by the two parties talking to
//! each other over COTs from any source of `hush_correlations::registry`
//! (IKNP, Ferret, SilentFlow) — no trusted module, no dealer. Comparisons
//! (`Need::Relu`) are not a dealt kind here: the context runs them with the
//! CrypTFlow2 millionaires' ([`crate::cf2`]) whose offline part
//! ([`crate::cf2::prepare`]) is this provider's answer to a ReLU need.
//!
//! Each function returns **the same description** as the dealer's
//! ([`crate::deal`]): the same share structs, the same relations between
//! the shared values (c = a·b, C = A·B, r_hi = ⌊r/2^f⌋ and r_msb = msb(r)
//! exactly, r^j, ∏_{j∈S} r_j), the same marginal distribution of each
//! party's share (uniform; party 0's weight-triple B known to party 0 only,
//! A to party 1 only). `tests/interactive.rs` checks the relations on
//! reconstructed shares with the same checks the dealt kinds pass.
//!
//! # The one primitive: vector OLE by Gilboa's multiplication
//!
//! [`vole`]: the sender holds vectors x_g ∈ Z^m (g = 1..G), the receiver
//! values y_g of `ybits` bits; they get additive shares of x_g·y_g modulo
//! 2^{w_g} (w_g public per group). Gilboa (CRYPTO '99) over one random OT
//! per bit j of y_g (ROTs from the COT source by the TCCR hash of
//! Guo–Katz–Wang–Yu, as everywhere in hush): the sender sends, for each
//! element e, τ = pad₁ − pad₀ − x_g[e] mod 2^{w_g − j}; the receiver with
//! choice y_{g,j} computes pad_y − y·τ = pad₀ + y·x_g[e]; bit j weighs
//! 2^j, so only w_g − j bits of its message matter (the SCI/Cheetah
//! width reduction: m·w(w+1)/2 bits per ℓ-bit multiplier instead of m·w²).
//! The pads are expanded to m words by a PRG when m > 2 (vector OLE: one
//! OT per multiplier bit for the whole vector, the trick that makes matrix
//! triples cost k·n·ℓ OTs instead of m·k·n·ℓ).
//! When y is the receiver's fresh random value it **is** the ROT's random
//! choice bits (no derandomisation); a chosen y costs one bit per OT
//! (d = y ⊕ c, Beaver's derandomisation).
//!
//! **Security of the primitive (semi-honest).** The receiver sees, per OT,
//! τ masked by the pad of the index it did not choose — pseudorandom to it
//! by the ROT's security (IKNP: Ishai–Kilian–Nissim–Petrank, CRYPTO 2003;
//! Ferret: Yang et al., CCS 2020; the TCCR hash) — so its view is simulated
//! by uniform strings; the sender sees d = y ⊕ c with c the fresh random
//! choice hidden from it by the OT extension: uniform. Its output share,
//! −Σ 2^j·pad₀, is uniform and independent of y. Every OT is used for one
//! message only (`OtSession` hands out fresh COTs; the COT index is the hash
//! tweak).
//!
//! # The kinds
//!
//! * [`triples`]: c = a·b with a_P uniform and b_P the receiver's random
//!   choice bits; c_P = a_P·b_P + OLE(a_P → b_{1−P}) + OLE(b_P ← a_{1−P}):
//!   both directions at once, ℓ OTs and ℓ(ℓ+1)/2 bits each way.
//! * [`matrix`]: A, B uniform and C = A·B: the cross terms A₀·B₁ and A₁·B₀
//!   by vector OLE (receiver: each entry B_P[t][j]; sender: the column
//!   A_{1−P}[·][t]); k·n·ℓ OTs and m·k·n·ℓ(ℓ+1)/2 bits each way. **HE would
//!   be cheaper for large matrices**: BumbleBee's (NDSS 2025) packed
//!   matrix products send O(m·k + k·n + m·n) ring elements' worth of
//!   ciphertexts against this m·k·n·ℓ²/2 bits (for attention's 128×64·64×128
//!   per head: a few MB against ~270 MB); not done here — the Cheetah HE
//!   linear layers of `hush-rlwe` do plaintext-weight products only, and a
//!   secret×secret HE matrix triple is left for the plan's HE backend.
//!   For the small secret×secret products and the element-wise triples the
//!   OT path is what CrypTFlow2/Cheetah use.
//! * [`weight`]: party 1 holds A (m×k), party 0 holds B (k×n), C₀ + C₁ =
//!   A·B: one direction only (receiver party 1 with each A[i][t], sender
//!   party 0 with the row B[t][·]); the same distribution as
//!   [`crate::deal::matrix::WeightTriples`] (A known to party 1 only, B to
//!   party 0 only, C₀ = −Σ pads uniform, C₁ = A·B − C₀).
//! * [`trunc`]: r from ℓ random bits b_i = u_i ⊕ v_i (u_i party 0's, v_i
//!   party 1's ROT choices); b_i = u_i + v_i − 2·u_i·v_i with the product by
//!   one OLE of a 1-bit multiplier, so r = Σ 2^i b_i, r_hi = Σ_{i≥f}
//!   2^{i−f} b_i and r_msb = b_{ℓ−1} are exact and linear in the shares.
//!   Bit i's product is needed modulo 2^{w_i} only (w_i = ℓ − i − 1 below
//!   f, ℓ − i + f − 1 above, ℓ − 1 for the top bit): about ℓ²/2 + f·ℓ/2
//!   bits and ℓ OTs per pair, one direction, one flight after the COTs.
//!   Exact, so the pair is the dealer's (not a probabilistic truncation).
//!   The square variant adds r_hi² (a square: one cross term, one
//!   direction, [`products`]) and r_hi·r_msb; the multiply variant a
//!   uniform s, r_hi·s ([`mul_shared`]) and r_msb·s. A product with r_msb
//!   is cheap: r_msb = u ⊕ v of the two parties' own top bits, so
//!   [`bit_times_shared`] takes one OT with a 1-bit multiplier per element
//!   and direction (vectors of two: x_P and u·x_P) instead of ℓ.
//! * [`powers`] and [`subsets`]: products of fresh uniform masks by
//!   [`products`] level by level (⌈log2 K⌉ resp. ⌈log2 d⌉ OLE calls): each
//!   product of two shared values is two OLEs with a chosen multiplier
//!   (one per cross term), ℓ + ℓ(ℓ+1)/2 bits each way; a square
//!   (r², r⁴, r⁸) one OLE in one direction. This is
//!   cheaper than taking a Beaver triple and opening it (the triple's
//!   OLEs plus 2ℓ bits of opening each way): the derandomisation bit per
//!   OT replaces the opening. Power tuples would also follow from one
//!   party knowing all of r (no): both masks must stay unknown, so every
//!   power needs products of shares; K − 1 products per element is the
//!   minimum for the monomials r², …, r^K.
//!
//! * [`wrap_ole`]: **not a dealer's kind** — the offline part of the
//!   interactive context's truncation (Cheetah's known-MSB truncation): a
//!   random bit product u·c mod 2^f per element, one COT and f bits. The
//!   interactive context answers `Need::Trunc` with it instead of a pair
//!   ([`trunc`] stays for the description tests and for callers that want
//!   the dealer's pair).
//!
//! Curious-party tests (`tests/interactive.rs`): each kind played with a
//! party's real received messages and outputs against the peer's secret
//! (e.g. party 0's B of a weight triple, party 1's y of an OLE): the view
//! predicts the secret no better than chance.

use crate::beaver::OtSession;
use crate::deal::matrix::{matmul_ring, MatDims, MatrixShare, WeightShare};
use crate::deal::powers::{PowerShare, MAX_POWER};
use crate::deal::subset::{SubsetShare, MAX_FACTORS};
use crate::deal::triples::TripleShare;
use crate::deal::trunc::{TruncMulShare, TruncShare, TruncSqShare};
use crate::wire::{self, mask};
use crate::{invalid, malformed, Party, Result};
use hush_correlations::ot::{rot1n_recv, rot1n_send, rot_recv_chunked, rot_send_chunked};
use hush_primitives::{Block, Prg, Ring};
use hush_transport::Channel;
use zeroize::Zeroize;

/// Most OTs per direction handled at once (the pads are kept until the
/// peer's derandomisation bits arrive: 32 bytes each).
pub const VOLE_BATCH_OTS: usize = 1 << 18;

const STEP_D: &str = "interactive OLE: receiver's choice corrections";
const STEP_TAU: &str = "interactive OLE: sender's corrections";

/// One direction of a [`vole`]: `groups` multipliers of `ybits` bits, each
/// against a vector of `m` values, results modulo 2^{width(g)}.
#[derive(Clone, Copy)]
pub struct Dir<'a> {
    pub groups: usize,
    pub m: usize,
    pub ybits: u32,
    /// The result width of group g (1..=64, ≥ ybits).
    pub width: &'a dyn Fn(usize) -> u32,
    /// The multipliers are chosen (derandomised, one bit per OT) rather
    /// than the receiver's random choice bits.
    pub chosen: bool,
    /// The sender gives one vector per multiplier **bit** (groups·ybits·m
    /// values, bit j's vector at (g·ybits + j)·m): the result is
    /// Σ_j 2^j·y_j·x_{g,j}. Each OT still carries one correction masked by
    /// the pad the receiver did not choose, so the view is unchanged
    /// ([`mul_small`], [`square_small`]).
    pub per_bit: bool,
}

impl Dir<'_> {
    fn ots(&self) -> usize {
        self.groups * self.ybits as usize
    }
    /// Correction bits of groups `g0..g1`.
    fn tau_bits(&self, g0: usize, g1: usize) -> usize {
        (g0..g1).map(|g| {
            let w = (self.width)(g) as usize;
            let y = self.ybits as usize;
            self.m * (y * w - y * (y - 1) / 2)
        }).sum()
    }
}

/// Output of [`vole`]: as sender its shares (groups·m), as receiver the
/// multipliers used (its random choice bits when not chosen) and its
/// shares (groups·m).
#[derive(Default)]
pub struct Vole {
    pub send: Vec<u64>,
    pub y: Vec<u64>,
    pub recv: Vec<u64>,
}

impl Drop for Vole {
    fn drop(&mut self) {
        self.send.zeroize();
        self.y.zeroize();
        self.recv.zeroize();
    }
}

/// Expands a ROT pad into `m` words.
#[inline]
fn expand(b: Block, m: usize, out: &mut [u64]) {
    match m {
        1 => out[0] = b.lo(),
        2 => {
            out[0] = b.lo();
            out[1] = b.hi();
        }
        _ => {
            let mut p = Prg::new(b);
            out.iter_mut().for_each(|o| *o = p.next_u64());
        }
    }
}

/// Bit writer for variable-width corrections (LSB first).
struct Bits {
    out: Vec<u8>,
    acc: u128,
    n: u32,
}

impl Bits {
    fn new(cap: usize) -> Self {
        Bits { out: Vec::with_capacity(cap), acc: 0, n: 0 }
    }
    #[inline]
    fn push(&mut self, v: u64, w: u32) {
        self.acc |= ((v & mask(w)) as u128) << self.n;
        self.n += w;
        while self.n >= 64 {
            self.out.extend_from_slice(&(self.acc as u64).to_le_bytes());
            self.acc >>= 64;
            self.n -= 64;
        }
    }
    fn finish(mut self) -> Vec<u8> {
        let bytes = self.n.div_ceil(8) as usize;
        self.out.extend_from_slice(&(self.acc as u64).to_le_bytes()[..bytes]);
        self.out
    }
}

struct BitReader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl BitReader<'_> {
    #[inline]
    fn take(&mut self, w: u32) -> u64 {
        let at = self.pos / 8;
        if let Some(b) = self.b.get(at..at + 16) {
            // fast path: one unaligned 16-byte read holds any w ≤ 64 bits
            let x = u128::from_le_bytes(b.try_into().expect("16 bytes"));
            self.pos += w as usize;
            return ((x >> (self.pos - w as usize) % 8) as u64) & mask(w);
        }
        let mut v = 0u64;
        let mut got = 0u32;
        while got < w {
            let byte = self.b[self.pos / 8] as u64;
            let off = (self.pos % 8) as u32;
            let take = (8 - off).min(w - got);
            v |= ((byte >> off) & mask(take)) << got;
            got += take;
            self.pos += take as usize;
        }
        v
    }
}

/// Sends `mine` and/or receives `peer_len` bytes: one simultaneous
/// exchange when both exist, one one-way message otherwise.
fn flight(ch: &mut dyn Channel, step: &'static str, mine: Option<&[u8]>, peer_len: Option<usize>) -> Result<Option<Vec<u8>>> {
    if let Some(m) = mine {
        wire::send(ch, m)?;
    }
    match peer_len {
        Some(l) => Ok(Some(wire::recv(ch, step, l)?)),
        None => Ok(None),
    }
}

/// Vector OLE in both directions at once (see the module docs): as sender
/// with `send = (spec, x)` (x: groups·m values), as receiver with
/// `recv = (spec, y)` (y: the chosen multipliers, `None` for random ones).
/// The peer calls it with the two specs exchanged. Flights: the COT
/// source's, then one for the derandomisation bits (only if a direction is
/// chosen), then one for the corrections — per batch of at most
/// [`VOLE_BATCH_OTS`] OTs per direction.
pub fn vole(ot: &mut OtSession, ch: &mut dyn Channel, party: Party, send: Option<(Dir<'_>, &[u64])>, recv: Option<(Dir<'_>, Option<&[u64]>)>) -> Result<Vole> {
    if let Some((d, x)) = &send {
        if x.len() != d.groups * d.m * if d.per_bit { d.ybits as usize } else { 1 } || d.m == 0 || (d.groups > 0 && !(1..=64).contains(&d.ybits)) {
            return Err(invalid("interactive OLE: sender input does not match its shape"));
        }
    }
    if let Some((d, y)) = &recv {
        if d.m == 0 || y.is_some_and(|y| y.len() != d.groups) || y.is_some() != d.chosen || (d.groups > 0 && !(1..=64).contains(&d.ybits)) {
            return Err(invalid("interactive OLE: receiver input does not match its shape"));
        }
    }
    for (d, _) in send.iter().map(|(d, _)| (d, ())).chain(recv.iter().map(|(d, _)| (d, ()))) {
        if (0..d.groups).any(|g| !((d.ybits..=64).contains(&(d.width)(g)))) {
            return Err(invalid("interactive OLE: result widths must be in ybits..=64"));
        }
    }
    let ns = send.as_ref().map_or(0, |(d, _)| d.ots());
    let nr = recv.as_ref().map_or(0, |(d, _)| d.ots());
    let batches = ns.max(nr).div_ceil(VOLE_BATCH_OTS).max(1);
    let mut out = Vole::default();
    if let Some((d, _)) = &send {
        out.send = vec![0; d.groups * d.m];
    }
    if let Some((d, _)) = &recv {
        out.recv = vec![0; d.groups * d.m];
        out.y = vec![0; d.groups];
    }
    // group ranges per batch, per direction
    let range = |groups: usize, b: usize| {
        let per = groups.div_ceil(batches);
        ((b * per).min(groups), ((b + 1) * per).min(groups))
    };
    for b in 0..batches {
        let sr = send.as_ref().map(|(d, x)| (*d, *x, range(d.groups, b)));
        let rr = recv.as_ref().map(|(d, y)| (*d, *y, range(d.groups, b)));
        vole_batch(ot, ch, party, sr, rr, &mut out)?;
    }
    Ok(out)
}

#[allow(clippy::type_complexity)]
fn vole_batch(
    ot: &mut OtSession,
    ch: &mut dyn Channel,
    party: Party,
    send: Option<(Dir<'_>, &[u64], (usize, usize))>,
    recv: Option<(Dir<'_>, Option<&[u64]>, (usize, usize))>,
    out: &mut Vole,
) -> Result<()> {
    let ns = send.as_ref().map_or(0, |(d, _, (a, b))| (b - a) * d.ybits as usize);
    let nr = recv.as_ref().map_or(0, |(d, _, (a, b))| (b - a) * d.ybits as usize);
    let (mut p0, mut p1) = (vec![Block::ZERO; ns], vec![Block::ZERO; ns]);
    let (mut choice, mut pc) = (vec![0u8; nr], vec![Block::ZERO; nr]);
    // ROTs: party 0 runs its sender side first
    for turn in 0..2 {
        if (turn == 0) == (party == 0) {
            if ns > 0 {
                rot_send_chunked(&mut *ot.send, ch, ns, |s, a, b| {
                    p0[s..s + a.len()].copy_from_slice(a);
                    p1[s..s + b.len()].copy_from_slice(b);
                })?;
            }
        } else if nr > 0 {
            rot_recv_chunked(&mut *ot.recv, ch, nr, |s, bits, h| {
                for (j, x) in h.iter().enumerate() {
                    let i = s + j;
                    choice[i] = ((bits[(i - s) / 64] >> ((i - s) % 64)) & 1) as u8;
                    pc[i] = *x;
                }
            })?;
        }
    }
    // derandomisation: d = y ⊕ c, one bit per OT of a chosen direction
    let mine_d = match &recv {
        Some((d, Some(y), (g0, g1))) if d.chosen && nr > 0 => {
            let yb = d.ybits as usize;
            let mut w = Bits::new(nr.div_ceil(8));
            for g in *g0..*g1 {
                for j in 0..yb {
                    let q = (g - g0) * yb + j;
                    w.push(((y[g] >> j) & 1) ^ choice[q] as u64, 1);
                }
            }
            Some(w.finish())
        }
        _ => None,
    };
    // a direction with no OTs in this batch sends nothing (the peer's
    // matching direction has none either: the specs are the same)
    let peer_d_len = send.as_ref().filter(|(d, _, _)| d.chosen && ns > 0).map(|_| ns.div_ceil(8));
    let peer_d = flight(ch, STEP_D, mine_d.as_deref(), peer_d_len)?;
    if let Some(pd) = &peer_d {
        if ns % 8 != 0 && pd[pd.len() - 1] >> (ns % 8) != 0 {
            return Err(malformed(STEP_D, "padding bits set"));
        }
    }
    // corrections, as sender
    let mut mine_tau = None;
    if let Some((d, x, (g0, g1))) = send.as_ref().filter(|_| ns > 0) {
        let (m, yb) = (d.m, d.ybits as usize);
        let mut w = Bits::new(d.tau_bits(*g0, *g1).div_ceil(8));
        let (mut e0, mut e1) = (vec![0u64; m], vec![0u64; m]);
        let mut rd = peer_d.as_ref().map(|b| BitReader { b, pos: 0 });
        for g in *g0..*g1 {
            let wg = (d.width)(g);
            let acc = &mut out.send[g * m..(g + 1) * m];
            for j in 0..yb {
                let q = (g - g0) * yb + j;
                let flip = rd.as_mut().map_or(0, |r| r.take(1));
                let (a, b) = if flip == 0 { (p0[q], p1[q]) } else { (p1[q], p0[q]) };
                expand(a, m, &mut e0);
                expand(b, m, &mut e1);
                let wj = wg - j as u32;
                let xo = if d.per_bit { (g * yb + j) * m } else { g * m };
                for e in 0..m {
                    w.push(e1[e].wrapping_sub(e0[e]).wrapping_sub(x[xo + e]), wj);
                    acc[e] = acc[e].wrapping_sub((e0[e] & mask(wj)) << j);
                }
            }
            acc.iter_mut().for_each(|v| *v &= mask(wg));
        }
        e0.zeroize();
        e1.zeroize();
        mine_tau = Some(w.finish());
    }
    let peer_tau_len = recv.as_ref().filter(|_| nr > 0).map(|(d, _, (g0, g1))| d.tau_bits(*g0, *g1).div_ceil(8));
    let peer_tau = flight(ch, STEP_TAU, mine_tau.as_deref(), peer_tau_len)?;
    if let (Some((d, y, (g0, g1))), Some(pt)) = (&recv, &peer_tau) {
        let total = d.tau_bits(*g0, *g1);
        if total % 8 != 0 && pt[pt.len() - 1] >> (total % 8) != 0 {
            return Err(malformed(STEP_TAU, "padding bits set"));
        }
        let (m, yb) = (d.m, d.ybits as usize);
        let mut rd = BitReader { b: pt, pos: 0 };
        let mut e = vec![0u64; m];
        for g in *g0..*g1 {
            let wg = (d.width)(g);
            let acc = &mut out.recv[g * m..(g + 1) * m];
            let mut yv = 0u64;
            for j in 0..yb {
                let q = (g - g0) * yb + j;
                let bit = match y {
                    Some(y) => (y[g] >> j) & 1,
                    None => choice[q] as u64,
                };
                yv |= bit << j;
                expand(pc[q], m, &mut e);
                let wj = wg - j as u32;
                for (k, a) in acc.iter_mut().enumerate() {
                    let tau = rd.take(wj);
                    let t = if bit == 1 { e[k].wrapping_sub(tau) } else { e[k] };
                    *a = a.wrapping_add((t & mask(wj)) << j);
                }
            }
            acc.iter_mut().for_each(|v| *v &= mask(wg));
            out.y[g] = yv;
        }
        e.zeroize();
    }
    p0.zeroize();
    p1.zeroize();
    pc.zeroize();
    choice.zeroize();
    Ok(())
}

/// Products of shared vectors: shares of (x₀ + x₁)·(y₀ + y₁) over the ring,
/// element-wise: x_P·y_P plus the two cross terms by chosen-multiplier OLEs
/// (as sender with x_P, as receiver with y_P), both directions in one
/// call. **View:** [`vole`]'s (uniform d bits and corrections).
pub fn mul_shared(ot: &mut OtSession, ch: &mut dyn Channel, party: Party, ring: Ring, x: &[u64], y: &[u64]) -> Result<Vec<u64>> {
    let (p, _) = products(ot, ch, party, ring, x, y, &[])?;
    Ok(p)
}

/// [`mul_shared`] of (x, y) and the squares of `z`, in one call: a square
/// (z₀ + z₁)² = z₀² + z₁² + 2·z₀z₁ has one cross term, so it takes one
/// direction only (party 0 sends z₀, party 1 multiplies by z₁): half of a
/// product. Returns (x·y, z²).
pub fn products(ot: &mut OtSession, ch: &mut dyn Channel, party: Party, ring: Ring, x: &[u64], y: &[u64], z: &[u64]) -> Result<(Vec<u64>, Vec<u64>)> {
    if x.len() != y.len() {
        return Err(invalid("interactive product: operands of different lengths"));
    }
    let (n, q) = (x.len(), z.len());
    let l = ring.bits();
    let wf = move |_| l;
    // party 0 → 1 carries the products' first cross term and the squares'
    let wide = Dir { groups: n + q, m: 1, ybits: l, width: &wf, chosen: true, per_bit: false };
    let narrow = Dir { groups: n, m: 1, ybits: l, width: &wf, chosen: true, per_bit: false };
    let xz: Vec<u64> = x.iter().chain(z).copied().collect();
    let yz: Vec<u64> = y.iter().chain(z).copied().collect();
    let v = if party == 0 {
        vole(ot, ch, party, Some((wide, &xz)), Some((narrow, Some(y))))?
    } else {
        vole(ot, ch, party, Some((narrow, x)), Some((wide, Some(&yz))))?
    };
    let (cross_s, cross_r) = (&v.send, &v.recv);
    let prod = (0..n).map(|i| ring.add(ring.add(ring.mul(x[i], y[i]), cross_s[i]), cross_r[i])).collect();
    let sq = (0..q)
        .map(|i| {
            let c = if party == 0 { cross_s[n + i] } else { cross_r[n + i] };
            ring.add(ring.mul(z[i], z[i]), ring.mul(2, c))
        })
        .collect();
    Ok((prod, sq))
}

/// b·x for a bit b = b₀ ⊕ b₁ (each party's own bit, e.g. r_msb's top
/// random bits) and an additively shared x, element-wise:
/// (b₀ + b₁ − 2b₀b₁)(x₀ + x₁) needs b₁x₀, b₁·(b₀x₀) (party 1's bit times
/// party 0's pair (x₀, b₀x₀)) and the mirror terms: one vector OLE per
/// direction with a **1-bit** multiplier and vectors of 2: one OT and
/// 2ℓ + 1 bits per element each way, instead of a product's ℓ OTs and
/// ℓ(ℓ+1)/2 + ℓ bits. **View:** [`vole`]'s.
pub fn bit_times_shared(ot: &mut OtSession, ch: &mut dyn Channel, party: Party, ring: Ring, b: &[u64], x: &[u64]) -> Result<Vec<u64>> {
    if b.len() != x.len() || b.iter().any(|v| *v > 1) {
        return Err(invalid("bit times shared: operand lengths, or a bit above 1"));
    }
    let n = x.len();
    let l = ring.bits();
    let wf = move |_| l;
    let dir = Dir { groups: n, m: 2, ybits: 1, width: &wf, chosen: true, per_bit: false };
    let pairs: Vec<u64> = (0..n).flat_map(|i| [x[i], ring.mul(b[i], x[i])]).collect();
    let v = vole(ot, ch, party, Some((dir, &pairs)), Some((dir, Some(b))))?;
    Ok((0..n)
        .map(|i| {
            // b_P·x_P + (b_{1−P}x_P) + (b_P x_{1−P}) − 2(b_{1−P}b_P x_P) − 2(b_P b_{1−P} x_{1−P})
            let one = ring.add(v.send[2 * i], v.recv[2 * i]);
            let two = ring.add(v.send[2 * i + 1], v.recv[2 * i + 1]);
            ring.sub(ring.add(ring.mul(b[i], x[i]), one), ring.mul(2, two))
        })
        .collect())
}

/// c_i·x_i mod 2^{`widths[i]`} for bits c_i that **one party holds whole**
/// (the receiver: `bits`) and values x_i the **other** holds whole (the
/// sender: `vals`): one direction of [`vole`] with a 1-bit chosen
/// multiplier — one OT, one derandomisation bit and `widths[i]` correction
/// bits per element, against [`bit_times_shared`]'s two directions (two
/// OTs, two bits and 2·(2ℓ + 1) correction bits) when each operand is one
/// party's. The sender passes `(None, Some(vals))`, the receiver
/// `(Some(bits), None)`; each gets its additive share mod 2^{widths[i]}.
///
/// **View:** [`vole`]'s: the sender sees d = c ⊕ (a fresh ROT choice),
/// uniform; the receiver sees each correction masked by the pad it did not
/// choose (pseudorandom to it), and its output is the pad it chose minus
/// c·(the correction): with the sender's fresh pad, a uniform share.
pub fn bit_times_private(ot: &mut OtSession, ch: &mut dyn Channel, party: Party, widths: &[u32], bits: Option<&[u64]>, vals: Option<&[u64]>) -> Result<Vec<u64>> {
    let n = widths.len();
    if widths.iter().any(|w| !(1..=64).contains(w)) || bits.is_some() == vals.is_some() || bits.or(vals).is_some_and(|v| v.len() != n) {
        return Err(invalid("bit times private value: one side holds the bits, the other the values, one width in 1..=64 per element"));
    }
    if bits.is_some_and(|b| b.iter().any(|v| *v > 1)) {
        return Err(invalid("bit times private value: a bit above 1"));
    }
    let wf = |g: usize| widths[g];
    let dir = Dir { groups: n, m: 1, ybits: 1, width: &wf, chosen: true, per_bit: false };
    let v = match (bits, vals) {
        (Some(b), None) => vole(ot, ch, party, None, Some((dir, Some(b))))?,
        (None, Some(x)) => vole(ot, ch, party, Some((dir, x)), None)?,
        _ => unreachable!("checked above"),
    };
    Ok(if bits.is_some() { v.recv.clone() } else { v.send.clone() })
}

/// Shares mod 2^w → shares over `ring` (2^L, L > w) of a value v **known
/// to lie in [0, 2^{w−1})**: the extension with a known most significant
/// bit (Rathee et al., SIRNN, IEEE S&P 2021, §4.1). `parts` are
/// (shares mod 2^w, w) pairs, all extended in one call (one OT per
/// element, one flight each way); a part with w ≥ L is returned reduced
/// into the ring.
///
/// **Derivation.** With x₀ + x₁ = v + c·2^w over the integers (x_P < 2^w
/// the shares, c ∈ {0, 1} the carry) and v's top bit (bit w − 1) zero, the
/// carry is a ∨ b for a = msb(x₀), b = msb(x₁): equal bits carry exactly
/// when both are 1; unequal ones make the top bit a ⊕ b ⊕ c_in = 0 only
/// with a carry-in, so the sum carries. Hence v = x₀ + x₁ − 2^w +
/// ā·b̄·2^w over Z_2^L, and the only joint term, ā·b̄·2^w, is a multiple of
/// 2^w: shares of the bit product ā·b̄ mod 2^{L−w}, scaled by 2^w, are shares
/// of it mod 2^L — [`bit_times_private`] with party 1's bit ā as the
/// receiver's and party 0's b̄ as the sender's value: one OT, one bit up and
/// L − w bits down per element. Exact for every v in the range; outside it
/// the result is off by 2^w (every call site states its bound). The graph
/// runtime's HE lift is the signed case (v + 2^{w−2} at party 0 first).
///
/// **View:** [`bit_times_private`]'s; the outputs are fresh shares (the
/// OLE's pads), so the step composes with what follows.
pub fn extend_known_msb(ot: &mut OtSession, ch: &mut dyn Channel, party: Party, ring: Ring, parts: &[(&[u64], u32)]) -> Result<Vec<Vec<u64>>> {
    let big = ring.bits();
    if parts.iter().any(|(_, w)| *w < 2) {
        return Err(invalid("extension: source rings below 2 bits"));
    }
    let (mut base, mut bits, mut widths) = (Vec::new(), Vec::new(), Vec::new());
    for (x, w) in parts.iter().filter(|(_, w)| *w < big) {
        let mw = mask(*w);
        for &v in x.iter() {
            if v > mw {
                return Err(invalid(format!("extension: a share beyond 2^{w}")));
            }
            base.push(if party == 0 { ring.sub(v, pow2(*w) & ring.mask()) } else { v });
            bits.push(1 - (v >> (w - 1)));
            widths.push(big - w);
        }
    }
    let prod = if base.is_empty() {
        Vec::new()
    } else if party == 0 {
        bit_times_private(ot, ch, party, &widths, None, Some(&bits))?
    } else {
        bit_times_private(ot, ch, party, &widths, Some(&bits), None)?
    };
    let mut out = Vec::with_capacity(parts.len());
    let mut at = 0usize;
    for (x, w) in parts {
        if *w >= big {
            out.push(x.iter().map(|v| v & ring.mask()).collect());
            continue;
        }
        out.push((0..x.len()).map(|i| ring.add(base[at + i], (prod[at + i] << *w) & ring.mask())).collect());
        at += x.len();
    }
    Ok(out)
}

fn random_ring(ot: &mut OtSession, ring: Ring, n: usize) -> Vec<u64> {
    (0..n).map(|_| ot.rng.next_u64() & ring.mask()).collect()
}

/// `n` Beaver triples over Z_2^bits (the description of
/// [`crate::deal::triples::ArithTriples`]): a_P uniform (this party's
/// PRG), b_P its random ROT choices, c = a·b.
pub fn triples(ot: &mut OtSession, ch: &mut dyn Channel, party: Party, bits: u32, n: usize) -> Result<TripleShare> {
    let ring = Ring::new(bits).ok_or_else(|| invalid("ring width"))?;
    let a = random_ring(ot, ring, n);
    let wf = move |_| bits;
    let s = Dir { groups: n, m: 1, ybits: bits, width: &wf, chosen: false, per_bit: false };
    let v = vole(ot, ch, party, Some((s, &a)), Some((s, None)))?;
    let b = v.y.clone();
    let c = (0..n).map(|i| ring.add(ring.add(ring.mul(a[i], b[i]), v.send[i]), v.recv[i])).collect();
    Ok(TripleShare { a, b, c })
}

/// `count` matrix triples A (m×k), B (k×n), C = A·B (the description of
/// [`crate::deal::matrix::MatrixTriples`]): A_P uniform, B_P the random
/// choices of this party's receiver OTs; the cross products by vector OLE
/// (receiver: each B_P[t][j]; sender: its column A_P[·][t]).
pub fn matrix(ot: &mut OtSession, ch: &mut dyn Channel, party: Party, bits: u32, count: usize, d: MatDims) -> Result<MatrixShare> {
    let ring = Ring::new(bits).ok_or_else(|| invalid("ring width"))?;
    let (ma, mb, mc) = (d.m * d.k, d.k * d.n, d.m * d.n);
    let a = random_ring(ot, ring, count * ma);
    // the sender's vector of group (q, t, j) is A_q's column t
    let mut cols = Vec::with_capacity(count * mb * d.m);
    for q in 0..count {
        for t in 0..d.k {
            let col: Vec<u64> = (0..d.m).map(|i| a[q * ma + i * d.k + t]).collect();
            for _ in 0..d.n {
                cols.extend_from_slice(&col);
            }
        }
    }
    let wf = move |_| bits;
    let s = Dir { groups: count * mb, m: d.m, ybits: bits, width: &wf, chosen: false, per_bit: false };
    let v = vole(ot, ch, party, Some((s, &cols)), Some((s, None)))?;
    cols.zeroize();
    let b = v.y.clone();
    let mut c = vec![0u64; count * mc];
    for q in 0..count {
        let o = &mut c[q * mc..(q + 1) * mc];
        matmul_ring(&a[q * ma..(q + 1) * ma], &b[q * mb..(q + 1) * mb], d, o);
        for t in 0..d.k {
            for j in 0..d.n {
                let g = q * mb + t * d.n + j;
                for i in 0..d.m {
                    o[i * d.n + j] = o[i * d.n + j].wrapping_add(v.send[g * d.m + i]).wrapping_add(v.recv[g * d.m + i]);
                }
            }
        }
        o.iter_mut().for_each(|x| *x &= ring.mask());
    }
    Ok(MatrixShare { a, b, c })
}

/// `count` one-sided triples for X·W, W party 0's (the description of
/// [`crate::deal::matrix::WeightTriples`]): party 1 gets A (m×k, its
/// random receiver choices) and C₁, party 0 B (k×n, uniform from its PRG)
/// and C₀, with C₀ + C₁ = A·B. One direction: party 0 sends, party 1
/// receives. **View:** party 1 sees corrections masked by pads it did not
/// choose (independent of B); party 0 sees nothing but its COT traffic (A
/// is party 1's random choices, hidden by the OT extension).
pub fn weight(ot: &mut OtSession, ch: &mut dyn Channel, party: Party, bits: u32, count: usize, d: MatDims) -> Result<WeightShare> {
    let ring = Ring::new(bits).ok_or_else(|| invalid("ring width"))?;
    let (ma, mb, mc) = (d.m * d.k, d.k * d.n, d.m * d.n);
    let wf = move |_| bits;
    let dir = Dir { groups: count * ma, m: d.n, ybits: bits, width: &wf, chosen: false, per_bit: false };
    if party == 0 {
        let b = random_ring(ot, ring, count * mb);
        // group (q, i, t): the row B_q[t][·]
        let mut rows = Vec::with_capacity(count * ma * d.n);
        for q in 0..count {
            for _i in 0..d.m {
                for t in 0..d.k {
                    rows.extend_from_slice(&b[q * mb + t * d.n..q * mb + (t + 1) * d.n]);
                }
            }
        }
        let v = vole(ot, ch, party, Some((dir, &rows)), None)?;
        rows.zeroize();
        let mut c = vec![0u64; count * mc];
        sum_rows(&v.send, count, d, &mut c, ring);
        Ok(WeightShare { ab: b, c })
    } else {
        let v = vole(ot, ch, party, None, Some((dir, None)))?;
        let mut c = vec![0u64; count * mc];
        sum_rows(&v.recv, count, d, &mut c, ring);
        Ok(WeightShare { ab: v.y.clone(), c })
    }
}

/// C[q][i][j] = Σ_t S[(q, i, t)][j].
fn sum_rows(s: &[u64], count: usize, d: MatDims, c: &mut [u64], ring: Ring) {
    for q in 0..count {
        for i in 0..d.m {
            let o = &mut c[(q * d.m + i) * d.n..(q * d.m + i + 1) * d.n];
            for t in 0..d.k {
                let g = (q * d.m + i) * d.k + t;
                for (x, y) in o.iter_mut().zip(&s[g * d.n..(g + 1) * d.n]) {
                    *x = x.wrapping_add(*y);
                }
            }
            o.iter_mut().for_each(|x| *x &= ring.mask());
        }
    }
}

/// `n` truncation pairs over Z_2^bits with shift f (the description of
/// [`crate::deal::trunc::TruncPairs`]), exactly: r from XOR-shared random
/// bits, converted by one 1-bit OLE per bit (see the module docs).
pub fn trunc(ot: &mut OtSession, ch: &mut dyn Channel, party: Party, bits: u32, f: u32, n: usize) -> Result<TruncShare> {
    Ok(trunc_bits(ot, ch, party, bits, f, n)?.0)
}

/// [`trunc`], also returning this party's own random top bits (r_msb is
/// their XOR), for [`bit_times_shared`].
fn trunc_bits(ot: &mut OtSession, ch: &mut dyn Channel, party: Party, bits: u32, f: u32, n: usize) -> Result<(TruncShare, Vec<u64>)> {
    let ring = Ring::new(bits).ok_or_else(|| invalid("ring width"))?;
    let l = bits as usize;
    if f == 0 || f as usize + 2 > l {
        return Err(invalid(format!("truncation pairs: shift {f} in a {bits}-bit ring")));
    }
    let fu = f as usize;
    // bit i's product is needed modulo 2^{w_i}
    let width = move |g: usize| -> u32 {
        let i = g % l;
        (if i == l - 1 {
            l - 1
        } else if i >= fu {
            l - i + fu - 1
        } else {
            l - i - 1
        }) as u32
    };
    let dir = Dir { groups: n * l, m: 1, ybits: 1, width: &width, chosen: false, per_bit: false };
    // this party's random bits: party 0's u (sender values), party 1's v
    // (its ROT choices)
    let (own, prod) = if party == 0 {
        let u: Vec<u64> = (0..n * l).map(|_| ot.rng.next_u64() & 1).collect();
        let v = vole(ot, ch, party, Some((dir, &u)), None)?;
        (u, v.send.clone())
    } else {
        let v = vole(ot, ch, party, None, Some((dir, None)))?;
        (v.y.clone(), v.recv.clone())
    };
    let mut t = TruncShare { r: Vec::with_capacity(n), hi: Vec::with_capacity(n), msb: Vec::with_capacity(n) };
    for e in 0..n {
        let (mut r, mut hi, mut msb) = (0u64, 0u64, 0u64);
        for i in 0..l {
            let g = e * l + i;
            let (b, p) = (own[g], prod[g]);
            // share of b_i = own bit − 2·p (the peer adds its own bit)
            r = r.wrapping_add(b << i).wrapping_sub(p << (i + 1).min(63) << u32::from(i + 1 > 63));
            if i >= fu {
                hi = hi.wrapping_add(b << (i - fu)).wrapping_sub(p << (i - fu + 1));
            }
            if i == l - 1 {
                msb = b.wrapping_sub(p << 1);
            }
        }
        t.r.push(r & ring.mask());
        t.hi.push(hi & ring.mask());
        t.msb.push(msb & ring.mask());
    }
    let top: Vec<u64> = (0..n).map(|e| own[e * l + l - 1]).collect();
    let mut own = own;
    own.zeroize();
    Ok((t, top))
}

/// `n` truncate-and-square tuples ([`crate::deal::trunc::TruncSquares`]):
/// a pair, then r_hi² (a square: one direction, [`products`]) and
/// r_hi·r_msb ([`bit_times_shared`] on the pair's own top bits).
pub fn trunc_square(ot: &mut OtSession, ch: &mut dyn Channel, party: Party, bits: u32, f: u32, n: usize) -> Result<TruncSqShare> {
    let ring = Ring::new(bits).ok_or_else(|| invalid("ring width"))?;
    let (t, mut top) = trunc_bits(ot, ch, party, bits, f, n)?;
    let (_, sq) = products(ot, ch, party, ring, &[], &[], &t.hi)?;
    let hm = bit_times_shared(ot, ch, party, ring, &top, &t.hi)?;
    top.zeroize();
    Ok(TruncSqShare { sq, hm, t })
}

/// `n` truncate-and-multiply tuples ([`crate::deal::trunc::TruncMuls`]): a
/// pair, a uniform s (each party's own share), then r_hi·s by
/// [`mul_shared`] and r_msb·s by [`bit_times_shared`].
pub fn trunc_mul(ot: &mut OtSession, ch: &mut dyn Channel, party: Party, bits: u32, f: u32, n: usize) -> Result<TruncMulShare> {
    let ring = Ring::new(bits).ok_or_else(|| invalid("ring width"))?;
    let (t, mut top) = trunc_bits(ot, ch, party, bits, f, n)?;
    let s = random_ring(ot, ring, n);
    let hs = mul_shared(ot, ch, party, ring, &t.hi, &s)?;
    let ms = bit_times_shared(ot, ch, party, ring, &top, &s)?;
    top.zeroize();
    Ok(TruncMulShare { hs, ms, s, t })
}

/// `n` power tuples r, …, r^k ([`crate::deal::powers::PowerTuples`]): r_P
/// uniform, then level by level r^j = r^{h}·r^{j−h} (h the largest power
/// of two below j) by [`mul_shared`]: ⌈log2 k⌉ product flights.
pub fn powers(ot: &mut OtSession, ch: &mut dyn Channel, party: Party, bits: u32, k: u32, n: usize) -> Result<PowerShare> {
    let ring = Ring::new(bits).ok_or_else(|| invalid("ring width"))?;
    if !(2..=MAX_POWER).contains(&k) {
        return Err(invalid(format!("power tuples up to {k}: supported 2..={MAX_POWER}")));
    }
    let mut pows = vec![random_ring(ot, ring, n)];
    while pows.len() < k as usize {
        let have = pows.len();
        let hi = (2 * have).min(k as usize);
        // r^j = r^have · r^{j − have}; the last, j = 2·have, is a square
        let sq = hi == 2 * have;
        let (mut x, mut y) = (Vec::new(), Vec::new());
        for j in have + 1..=hi - usize::from(sq) {
            x.extend_from_slice(&pows[have - 1]);
            y.extend_from_slice(&pows[j - have - 1]);
        }
        let z = if sq { pows[have - 1].clone() } else { Vec::new() };
        let (p, s2) = products(ot, ch, party, ring, &x, &y, &z)?;
        for c in p.chunks(n.max(1)).take(hi - have - usize::from(sq)) {
            pows.push(c.to_vec());
        }
        if sq {
            pows.push(s2);
        }
        if n == 0 {
            pows.resize(hi, Vec::new());
        }
    }
    Ok(PowerShare { pows })
}

/// `n` subset-product tuples of `d` masks ([`crate::deal::subset::SubsetProducts`]):
/// uniform masks, then r_S = r_A·r_B (A the lowest 2^{t−1} members of S)
/// for |S| in (2^{t−1}, 2^t] at flight t: ⌈log2 d⌉ product flights.
pub fn subsets(ot: &mut OtSession, ch: &mut dyn Channel, party: Party, bits: u32, d: u32, n: usize) -> Result<SubsetShare> {
    let ring = Ring::new(bits).ok_or_else(|| invalid("ring width"))?;
    if !(2..=MAX_FACTORS).contains(&d) {
        return Err(invalid(format!("subset products of {d} factors: supported 2..={MAX_FACTORS}")));
    }
    let full = 1usize << d;
    let mut sets: Vec<Vec<u64>> = vec![Vec::new(); full - 1];
    for j in 0..d as usize {
        sets[(1 << j) - 1] = random_ring(ot, ring, n);
    }
    let mut lo = 1u32;
    while lo < d {
        let hi = (2 * lo).min(d);
        let todo: Vec<usize> = (1..full).filter(|s| (lo + 1..=hi).contains(&(s.count_ones()))).collect();
        let (mut x, mut y) = (Vec::new(), Vec::new());
        for &s in &todo {
            // A: the lowest `lo` members of S
            let mut a = 0usize;
            let mut rest = s;
            for _ in 0..lo {
                let b = rest & rest.wrapping_neg();
                a |= b;
                rest &= !b;
            }
            x.extend_from_slice(&sets[a - 1]);
            y.extend_from_slice(&sets[rest - 1]);
        }
        let p = mul_shared(ot, ch, party, ring, &x, &y)?;
        for (i, &s) in todo.iter().enumerate() {
            sets[s - 1] = p[i * n..(i + 1) * n].to_vec();
        }
        lo = hi;
    }
    Ok(SubsetShare { sets })
}

/// One element's offline part of the **wrap-bit truncation** that the
/// interactive context runs instead of a truncation pair
/// ([`crate::transformer::Ctx::trunc`] in interactive mode): party 0's
/// random bit u, party 1's random bit c (`own`), and additive shares of
/// u·c modulo 2^f (`uc`).
pub struct WrapShare {
    pub own: Vec<u64>,
    pub uc: Vec<u64>,
}

impl Drop for WrapShare {
    fn drop(&mut self) {
        self.own.zeroize();
        self.uc.zeroize();
    }
}

/// `n` random bit products for the wrap-bit truncation by `f` bits: party
/// 0 draws u from its PRG, party 1's c are the random choices of its ROTs,
/// and one [`vole`] with a **1-bit** multiplier (c) against u, result
/// modulo 2^f, gives additive shares of u·c mod 2^f. One COT and f
/// correction bits per element, party 0 → 1, one flight after the COTs
/// (against a truncation pair's ℓ COTs and ≈ ℓ²/2 + f·ℓ/2 bits).
///
/// **Where it is used** (Cheetah, Huang–Lu–Hong–Ding, USENIX Security 2022,
/// §4.1 "truncation with one-bit error" and its known-MSB optimisation; the
/// same identity is SCI's/CrypTFlow2's wrap computation, Rathee et al.,
/// CCS 2020, §5): for x in [−2^{ℓ−2}, 2^{ℓ−2}) shared as x₀ + x₁ mod 2^ℓ,
/// x' = x + 2^{ℓ−2} lies in [0, 2^{ℓ−1}) — its MSB is known to be 0 — so
/// the wrap of the shares, w = [x'₀ + x'₁ ≥ 2^ℓ], is msb(x'₀) ∨ msb(x'₁)
/// = a + b − a·b with a party 0's and b party 1's own bit. Then
/// ⌊x'₀/2^f⌋ + ⌊x'₁/2^f⌋ − 2^{ℓ−f}·w = ⌊x'/2^f⌋ − carry (carry ∈ {0, 1}
/// from the low f bits), and adding 1 − 2^{ℓ−2−f} gives
/// ⌊x/2^f⌋ + 1 − carry ∈ {⌊x/2^f⌋, ⌊x/2^f⌋ + 1}: **the same result set
/// as the pair-based truncation** (faithful, one-bit error). Since w is
/// multiplied by 2^{ℓ−f}, only a·b mod 2^f is needed: online the parties
/// exchange e = a ⊕ u and d = b ⊕ c (one bit each way, one flight,
/// instead of the pair's ℓ-bit opening) and
/// a·b = a·d + (1 − 2d)·(e·c + (1 − 2e)·u·c), linear in the shares of u·c
/// with public coefficients.
///
/// **Security (semi-honest).** Offline: [`vole`]'s view (party 1 sees
/// corrections masked by the pads it did not choose; party 0 sees only the
/// COT traffic). Online: party 1 sees e = a ⊕ u with u a fresh uniform bit
/// of party 0 used once: uniform; party 0 sees d = b ⊕ c with c the ROT's
/// choice, hidden from it by the OT extension and used once: uniform. No
/// value is opened, so unlike the pair-based truncation there is no masked
/// opening of x at all. The output shares are deterministic functions of
/// each party's input share and these uniform bits; the carry (the
/// one-bit error) is never seen by either party. The curious-party test
/// `wrap_truncation_bits_reveal_nothing` plays both parties' real views
/// against the peer's MSB and against the sign of x.
///
/// **Range.** The identity needs x' < 2^{ℓ−1}: x ∈ [−2^{ℓ−2}, 2^{ℓ−2}),
/// the range the pair-based truncation documents (|x| < 2^{ℓ−2}); outside
/// it the result is wrong by a multiple of 2^{ℓ−f}, as with the pair.
pub fn wrap_ole(ot: &mut OtSession, ch: &mut dyn Channel, party: Party, f: u32, n: usize) -> Result<WrapShare> {
    if !(1..=62).contains(&f) {
        return Err(invalid(format!("wrap-bit truncation: shift {f}")));
    }
    let wf = move |_| f;
    let dir = Dir { groups: n, m: 1, ybits: 1, width: &wf, chosen: false, per_bit: false };
    if party == 0 {
        let u: Vec<u64> = (0..n).map(|_| ot.rng.next_u64() & 1).collect();
        let v = vole(ot, ch, party, Some((dir, &u)), None)?;
        Ok(WrapShare { own: u, uc: v.send.clone() })
    } else {
        let v = vole(ot, ch, party, None, Some((dir, None)))?;
        Ok(WrapShare { own: v.y.clone(), uc: v.recv.clone() })
    }
}

/// The online step of the wrap-bit truncation (see [`wrap_ole`]) on this
/// party's shares `x` of values in [−2^{ℓ−2}, 2^{ℓ−2}): returns this
/// party's message: one bit per element (a ⊕ u resp. b ⊕ c), packed LSB
/// first; finished with the peer's bits by [`wrap_trunc_finish`].
pub fn wrap_trunc_bits(ring: Ring, party: Party, x: &[u64], w: &WrapShare) -> Result<Vec<u8>> {
    let l = ring.bits();
    if w.own.len() != x.len() || w.uc.len() != x.len() {
        return Err(invalid("wrap-bit truncation: correlation of the wrong length"));
    }
    let bias = if party == 0 { 1u64 << (l - 2) } else { 0 };
    let mut out = vec![0u8; x.len().div_ceil(8)];
    for (i, (&xi, &o)) in x.iter().zip(&w.own).enumerate() {
        let a = (ring.add(xi, bias) >> (l - 1)) & 1;
        out[i / 8] |= ((a ^ o) as u8) << (i % 8);
    }
    Ok(out)
}

/// Unpacks `n` bits sent by [`wrap_trunc_bits`], refusing set padding bits.
pub fn unpack_bits(step: &'static str, b: &[u8], n: usize) -> Result<Vec<u64>> {
    if b.len() != n.div_ceil(8) {
        return Err(malformed(step, format!("{} bytes for {n} bits", b.len())));
    }
    if n % 8 != 0 && b[b.len() - 1] >> (n % 8) != 0 {
        return Err(malformed(step, "padding bits set"));
    }
    Ok((0..n).map(|i| ((b[i / 8] >> (i % 8)) & 1) as u64).collect())
}

/// This party's share of T = ⌊x/2^f⌋ + 1 − carry ∈ {⌊x/2^f⌋, ⌊x/2^f⌋ + 1}
/// from its input shares, its correlation and the peer's bits (see
/// [`wrap_ole`]).
pub fn wrap_trunc_finish(ring: Ring, party: Party, x: &[u64], f: u32, w: &WrapShare, peer: &[u64]) -> Vec<u64> {
    let l = ring.bits();
    let bias = if party == 0 { 1u64 << (l - 2) } else { 0 };
    let mf = mask(f);
    let k = l - f; // w·2^{ℓ−f}: only w mod 2^f matters
    (0..x.len())
        .map(|i| {
            let xp = ring.add(x[i], bias);
            let own_msb = xp >> (l - 1);
            let lo = xp >> f;
            // party 0: a (own msb), d = peer bit; party 1: b (own msb), e = peer bit
            let ab = if party == 0 {
                let (a, d, e) = (own_msb, peer[i], own_msb ^ w.own[i]);
                let s = (1u64.wrapping_sub(2 * d)).wrapping_mul(1u64.wrapping_sub(2 * e)).wrapping_mul(w.uc[i]);
                (a * d).wrapping_add(s)
            } else {
                let (b, e) = (own_msb, peer[i]);
                let d = b ^ w.own[i];
                let c = w.own[i];
                let one_2d = 1u64.wrapping_sub(2 * d);
                one_2d.wrapping_mul((e * c).wrapping_add(1u64.wrapping_sub(2 * e).wrapping_mul(w.uc[i])))
            };
            let wp = own_msb.wrapping_sub(ab) & mf;
            let mut t = ring.sub(lo, (wp << k) & ring.mask());
            if party == 0 {
                t = ring.add(t, ring.sub(1, 1u64 << (l - 2 - f)));
            }
            t
        })
        .collect()
}

/// 2^e mod 2^64 (0 for e ≥ 64).
#[inline]
fn pow2(e: u32) -> u64 {
    if e >= 64 {
        0
    } else {
        1u64 << e
    }
}

/// This party's k-bit view of a shared x ∈ [0, 2^{k−1}): x'_P = x_P mod 2^k,
/// its top bit t_P (bit k−1) and its signed reading s_P = x'_P − 2^k·t_P
/// (as a ring element). With w the wrap of x'₀ + x'₁ (= t₀ ∨ t₁ since the
/// MSB of x at width k is known to be 0):
/// x = x'₀ + x'₁ − 2^k·w = s₀ + s₁ + 2^k·t₀·t₁.
fn small_parts(ring: Ring, x: &[u64], k: u32) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
    let xs: Vec<u64> = x.iter().map(|v| v & mask(k)).collect();
    let t: Vec<u64> = xs.iter().map(|v| v >> (k - 1)).collect();
    let s = xs.iter().zip(&t).map(|(v, t)| ring.sub(*v, ring.mul(*t, pow2(k) & ring.mask()))).collect();
    (xs, t, s)
}

fn check_small(ring: Ring, k: u32, what: &str) -> Result<()> {
    if !(2..ring.bits()).contains(&k) {
        return Err(invalid(format!("{what}: operand width {k} in a {}-bit ring", ring.bits())));
    }
    Ok(())
}

/// Products x·y of shared vectors where x is **known to lie in
/// [0, 2^{k−1})** (the caller proves it) and y is any shared value: a
/// product of two shares with k OTs per direction instead of ℓ — the
/// products of mixed bit-widths of SCI/Cheetah (Rathee et al., CCS 2020,
/// §5; Huang et al., USENIX Security 2022, §4), here with the known-MSB
/// wrap of [`wrap_ole`] instead of a millionaires'.
///
/// **Derivation.** With [`small_parts`]: x = s₀ + s₁ + 2^k·t₀t₁, so
/// x·y = s₀y₀ + s₁y₁ + (s₁ + 2^k t₀t₁)·y₀ + (s₀ + 2^k t₀t₁)·y₁. Party 1's
/// term (s₁ + 2^k t₀t₁)·y₀ = Σ_{j<k−1} 2^j x'_{1,j}·y₀ + 2^{k−1}·t₁·(2t₀ − 1)·y₀
/// is one [`vole`] with party 1's k-bit multiplier x'₁ (chosen) and party 0's
/// per-bit vectors (y₀ for bits below k−1, (2t₀ − 1)·y₀ for bit k−1, whose
/// multiplier bit is t₁); party 0's term the mirror. Both directions in one
/// call: 2k OTs and 2·Σ_{j<k}(ℓ − j) correction bits per element, against
/// [`mul_shared`]'s 2ℓ OTs and ℓ(ℓ+1) bits. Exact in the ring.
///
/// **Security (semi-honest).** [`vole`]'s view: the derandomisation bits
/// d = x'_{P,j} ⊕ c are masked by fresh ROT choices; each correction by the
/// pad the receiver did not choose — whatever the per-bit vectors are.
/// Nothing is opened. **Range:** outside [0, 2^{k−1}) the identity fails
/// and the product is wrong (no leak: the messages are the same uniform
/// strings); every call site states its bound.
pub fn mul_small(ot: &mut OtSession, ch: &mut dyn Channel, party: Party, ring: Ring, k: u32, x: &[u64], y: &[u64]) -> Result<Vec<u64>> {
    check_small(ring, k, "small product")?;
    if x.len() != y.len() {
        return Err(invalid("small product: operands of different lengths"));
    }
    let n = x.len();
    let l = ring.bits();
    let (xs, t, s) = small_parts(ring, x, k);
    let ku = k as usize;
    let mut vecs = Vec::with_capacity(n * ku);
    for i in 0..n {
        for _ in 0..ku - 1 {
            vecs.push(y[i]);
        }
        vecs.push(ring.mul(ring.sub(2 * t[i], 1), y[i]));
    }
    let wf = move |_| l;
    let dir = Dir { groups: n, m: 1, ybits: k, width: &wf, chosen: true, per_bit: true };
    let v = vole(ot, ch, party, Some((dir, &vecs)), Some((dir, Some(&xs))))?;
    vecs.zeroize();
    Ok((0..n).map(|i| ring.add(ring.add(ring.mul(s[i], y[i]), v.send[i]), v.recv[i])).collect())
}

/// [`mul_small`] with one small operand per **row**: x (`x.len()` rows,
/// each proven in [0, 2^{k−1})) times every element of its row of y
/// (`m` elements per row, row-major): one vector OLE per direction with the
/// row's k-bit multiplier against the row's vector (the PRG-expanded pads
/// of [`vole`] with m > 2). Per row 2k OTs instead of 2k·m; the correction
/// bits per element are [`mul_small`]'s. Softmax's e·(1/Σe), one
/// reciprocal per row of 128. **Derivation, security and range:** as
/// [`mul_small`], whose per-bit vectors become per-bit row vectors.
pub fn mul_small_rows(ot: &mut OtSession, ch: &mut dyn Channel, party: Party, ring: Ring, k: u32, x: &[u64], y: &[u64], m: usize) -> Result<Vec<u64>> {
    check_small(ring, k, "small row product")?;
    if m == 0 || x.len() * m != y.len() {
        return Err(invalid("small row product: rows do not match the vector"));
    }
    let rows = x.len();
    let l = ring.bits();
    let (xs, t, s) = small_parts(ring, x, k);
    let ku = k as usize;
    let mut vecs = Vec::with_capacity(y.len() * ku);
    for g in 0..rows {
        let yr = &y[g * m..(g + 1) * m];
        for _ in 0..ku - 1 {
            vecs.extend_from_slice(yr);
        }
        let c = ring.sub(2 * t[g], 1);
        vecs.extend(yr.iter().map(|v| ring.mul(c, *v)));
    }
    let wf = move |_| l;
    let dir = Dir { groups: rows, m, ybits: k, width: &wf, chosen: true, per_bit: true };
    let v = vole(ot, ch, party, Some((dir, &vecs)), Some((dir, Some(&xs))))?;
    vecs.zeroize();
    Ok((0..y.len()).map(|i| ring.add(ring.add(ring.mul(s[i / m], y[i]), v.send[i]), v.recv[i])).collect())
}

/// Squares x² of shared x **known to lie in [0, 2^{k−1})**: one direction
/// of k OTs plus one OT the other way per element, against a square's ℓ
/// OTs (the same known-MSB reading as [`mul_small`]).
///
/// **Derivation.** x² = s₀² + s₁² + 2s₀s₁ + 2^{k+1}t₀t₁(s₀ + s₁) + 2^{2k}t₀t₁.
/// Party 1 multiplies (k-bit multiplier x'₁, bit k−1 = t₁) against party
/// 0's per-bit vectors 2s₀ (bits below k−1) and (4t₀ − 2)·s₀ + 2^{k+1}·t₀
/// (bit k−1): Σ = 2s₀s₁ + 2^{k+1}t₀t₁s₀ + 2^{2k}t₀t₁. Party 0 multiplies
/// (1-bit multiplier t₀) against party 1's 2^{k+1}·t₁·s₁. One [`vole`]
/// call, both directions at once. **Security and range:** as
/// [`mul_small`].
pub fn square_small(ot: &mut OtSession, ch: &mut dyn Channel, party: Party, ring: Ring, k: u32, x: &[u64]) -> Result<Vec<u64>> {
    check_small(ring, k, "small square")?;
    let n = x.len();
    let l = ring.bits();
    let (xs, t, s) = small_parts(ring, x, k);
    let ku = k as usize;
    let wf = move |_| l;
    let wide = Dir { groups: n, m: 1, ybits: k, width: &wf, chosen: true, per_bit: true };
    let bit = Dir { groups: n, m: 1, ybits: 1, width: &wf, chosen: true, per_bit: false };
    let top = pow2(k + 1) & ring.mask();
    let v = if party == 0 {
        let mut vecs = Vec::with_capacity(n * ku);
        for i in 0..n {
            let two_s = ring.mul(2, s[i]);
            for _ in 0..ku - 1 {
                vecs.push(two_s);
            }
            let hi = ring.add(ring.mul(ring.sub(4 * t[i], 2), s[i]), ring.mul(t[i], top));
            vecs.push(hi);
        }
        let v = vole(ot, ch, party, Some((wide, &vecs)), Some((bit, Some(&t))))?;
        vecs.zeroize();
        v
    } else {
        let mut vecs: Vec<u64> = (0..n).map(|i| ring.mul(ring.mul(t[i], top), s[i])).collect();
        let v = vole(ot, ch, party, Some((bit, &vecs)), Some((wide, Some(&xs))))?;
        vecs.zeroize();
        v
    };
    Ok((0..n).map(|i| ring.add(ring.add(ring.mul(s[i], s[i]), v.send[i]), v.recv[i])).collect())
}

/// Most table instances per direction handled at once by [`lut`].
pub const LUT_BATCH: usize = 1 << 14;
/// Instances per 1-of-2^k ROT request inside a [`lut`] batch (bounded
/// scratch: 2^k pads of 16 bytes each).
const LUT_SUB: usize = 1 << 10;

const STEP_LUT_D: &str = "interactive table lookup: receiver's index corrections";
const STEP_LUT_M: &str = "interactive table lookup: sender's masked table";

/// Table lookups by 1-out-of-2^k OT (the OT-based lookup table of
/// SIRNN, Rathee et al., IEEE S&P 2021, §3, on random 1-of-2^k OTs from
/// `kbits` COTs each: [`hush_correlations::ot::rot1n_send`], the
/// Kolesnikov–Kumaresan construction with the TCCR hash, as `cf2`'s
/// millionaires' leaves): for each element, the **table sender** holds a
/// row of 2^k values of `width` bits (filled by `send.1(i, row)`: row[x] is
/// the entry when the receiver's index is x, so the sender can fold in
/// anything it knows itself), the **receiver** an index x_i < 2^k; they get
/// additive shares of row[x_i] mod 2^width: the sender a fresh uniform r_i
/// (from its session PRG), the receiver row[x_i] − r_i. Both directions in
/// one call (`send`: this party's number of sender elements and its rows;
/// `recv`: its indices as receiver; the peer calls with them exchanged).
///
/// **Flights** per batch of [`LUT_BATCH`] elements: the COT source's, the
/// receiver's δ_i = x_i − c_i mod 2^k (k bits; c_i its random ROT choice),
/// the sender's M_{i,y} = pad_{i,y} + row_i[y + δ_i] − r_i mod 2^width for
/// every y (2^k·width bits); the receiver takes M_{i,c_i} − pad_{i,c_i}.
///
/// **Security (semi-honest).** The sender sees δ_i = x_i − c_i with c_i
/// the receiver's fresh random choice, uniform and hidden from it by the
/// OT extension: δ_i is uniform, independent of x_i. The receiver sees
/// M_{i,y} for y ≠ c_i masked by pads of indices it did not choose
/// (pseudorandom to it by the 1-of-2^k ROT's security) and
/// M_{i,c_i} − pad = row_i[x_i] − r_i with r_i uniform, used once: its view
/// and its output are uniform strings. Each ROT is used for one element
/// only (fresh COTs; the COT index is the hash tweak). Sizes of the peer's
/// messages are fixed by the public shapes and checked before use; set
/// padding bits are refused.
pub fn lut(ot: &mut OtSession, ch: &mut dyn Channel, party: Party, kbits: u32, width: u32, send: Option<(usize, &mut dyn FnMut(usize, &mut [u64]))>, recv: Option<&[u64]>) -> Result<(Vec<u64>, Vec<u64>)> {
    if !(1..=8).contains(&kbits) || !(1..=64).contains(&width) {
        return Err(invalid(format!("table lookup: {kbits}-bit index, {width}-bit entries")));
    }
    let nn = 1usize << kbits;
    let ns = send.as_ref().map_or(0, |s| s.0);
    let nr = recv.map_or(0, |r| r.len());
    if recv.is_some_and(|r| r.iter().any(|x| *x >= nn as u64)) {
        return Err(invalid("table lookup: index above the table"));
    }
    let mut fill = send.map(|s| s.1);
    let mut out_s = Vec::with_capacity(ns);
    let mut out_r = Vec::with_capacity(nr);
    let batches = ns.max(nr).div_ceil(LUT_BATCH).max(1);
    let range = |n: usize, b: usize| ((b * LUT_BATCH).min(n), ((b + 1) * LUT_BATCH).min(n));
    let wm = mask(width);
    let mut blocks = vec![Block::ZERO; LUT_SUB * nn];
    let mut spads = vec![0u64; LUT_BATCH.min(ns) * nn];
    let mut row = vec![0u64; nn];
    for b in 0..batches {
        let (s0, s1) = range(ns, b);
        let (r0, r1) = range(nr, b);
        let (bs, br) = (s1 - s0, r1 - r0);
        let mut choice = vec![0u8; br];
        let mut rpads = vec![Block::ZERO; br];
        for turn in 0..2 {
            if (turn == 0) == (party == 0) {
                for c0 in (0..bs).step_by(LUT_SUB) {
                    let c1 = (c0 + LUT_SUB).min(bs);
                    let blk = &mut blocks[..(c1 - c0) * nn];
                    rot1n_send(&mut *ot.send, ch, kbits as usize, c1 - c0, blk)?;
                    for (o, p) in spads[c0 * nn..c1 * nn].iter_mut().zip(blk.iter()) {
                        *o = p.lo() & wm;
                    }
                }
            } else if br > 0 {
                rot1n_recv(&mut *ot.recv, ch, kbits as usize, &mut choice, &mut rpads)?;
            }
        }
        // δ = x − c mod 2^k
        let mine_d = recv.filter(|_| br > 0).map(|x| {
            let mut w = Bits::new((br * kbits as usize).div_ceil(8));
            for (i, &c) in choice.iter().enumerate() {
                w.push(x[r0 + i].wrapping_sub(c as u64), kbits);
            }
            w.finish()
        });
        let d_len = (bs * kbits as usize).div_ceil(8);
        let peer_d = flight(ch, STEP_LUT_D, mine_d.as_deref(), (bs > 0).then_some(d_len))?;
        let mut mine_m = None;
        if let (Some(pd), Some(fill)) = (&peer_d, fill.as_mut()) {
            check_padding(STEP_LUT_D, pd, bs * kbits as usize)?;
            let mut rd = BitReader { b: pd, pos: 0 };
            let mut w = Bits::new((bs * nn * width as usize).div_ceil(8));
            for i in 0..bs {
                let d = rd.take(kbits) as usize;
                fill(s0 + i, &mut row);
                let r = ot.rng.next_u64() & wm;
                let pads = &spads[i * nn..(i + 1) * nn];
                for (y, p) in pads.iter().enumerate() {
                    w.push(p.wrapping_add(row[(y + d) & (nn - 1)]).wrapping_sub(r), width);
                }
                out_s.push(r);
            }
            mine_m = Some(w.finish());
        }
        let m_len = (br * nn * width as usize).div_ceil(8);
        let peer_m = flight(ch, STEP_LUT_M, mine_m.as_deref(), (br > 0).then_some(m_len))?;
        if let Some(pm) = &peer_m {
            check_padding(STEP_LUT_M, pm, br * nn * width as usize)?;
            for i in 0..br {
                let c = choice[i] as usize;
                let mut rd = BitReader { b: pm, pos: (i * nn + c) * width as usize };
                out_r.push(rd.take(width).wrapping_sub(rpads[i].lo()) & wm);
            }
        }
        choice.zeroize();
        rpads.zeroize();
    }
    spads.zeroize();
    blocks.zeroize();
    row.zeroize();
    Ok((out_s, out_r))
}

fn check_padding(step: &'static str, b: &[u8], bits: usize) -> Result<()> {
    if b.len() != bits.div_ceil(8) {
        return Err(malformed(step, format!("{} bytes for {bits} bits", b.len())));
    }
    if bits % 8 != 0 && b[b.len() - 1] >> (bits % 8) != 0 {
        return Err(malformed(step, "padding bits set"));
    }
    Ok(())
}
