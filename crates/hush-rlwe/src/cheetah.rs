//! Cheetah's HE linear layers (Huang, Lu, Hong, Ding, "Cheetah: Lean and
//! Fast Secure Two-Party Deep Neural Network Inference", USENIX Security
//! 2022, §4: HomConv and HomFC): convolution and matrix–vector products by
//! **coefficient encoding**, no rotations, no Galois keys.
//!
//! ## Encodings (both parties derive the same [`Layout`] from the public shape)
//! * **FC** (W is n_out × n_in): input chunks of n_i elements, x̂ = Σ_j x_j X^j;
//!   a block of n_o rows, ŵ = Σ_{i,j} W\[i\]\[j\]·X^{i·n_i + n_i − 1 − j}, with
//!   n_i·n_o ≤ N. Coefficient i·n_i + n_i − 1 of x̂·ŵ is Σ_j W\[i\]\[j\]·x_j (no
//!   other term and no negacyclic wrap reaches it). Chunks accumulate into
//!   one product per row block.
//! * **Conv** (input C×H×W, kernel M×C×h×w', stride, zero padding): the
//!   padded input is cut into tiles of C_b channels × H_b × W_b
//!   (C_b·H_b·W_b ≤ N; spatial tiles overlap by the kernel's halo),
//!   x̂ = Σ T\[c,i,j\]·X^{c·H_bW_b + i·W_b + j}; for output channel m,
//!   ŵ = Σ K[m,c,l,l']·X^{O − c·H_bW_b − l·W_b − l'} with
//!   O = (C_b−1)·H_bW_b + (h−1)·W_b + (w'−1). Coefficient O + i·W_b + j of
//!   x̂·ŵ is the stride-1 output at (i, j) of the tile; channel groups
//!   accumulate. Several output channels share one product when the tile
//!   is small (M_b of them at offsets m·(span + O + 1), M_b·(span + O + 1) ≤ N).
//!   A stride s > 1 is first turned into a stride-1 conv over s×s phase
//!   images (both parties, locally), so no coefficient is spent on skipped
//!   positions. The blocking is chosen to minimise bytes (search over C_b, H_b).
//! * **Interleaved 1×1 conv** (a batch of matrix–vector products: kernel
//!   1×1, no padding, after the stride is removed; all S = H·W positions in
//!   one ciphertext): x̂ = Σ X\[c,s\]·X^{s·C_b + c} (channel fastest),
//!   ŵ = Σ W\[m,c\]·X^{m·S·C_b + C_b − 1 − c}; coefficient m·S·C_b + s·C_b +
//!   C_b − 1 is output (m, s). Output channels sit S·C_b apart instead of the
//!   spatial encoding's ≈ 2·C_b·H·W, so a product does up to twice the
//!   useful work; the planner takes whichever encoding is cheaper
//!   ([`Layout::interleaved`]). On ResNet-50 (he128-n8192-p50, ℓ = 37) it is
//!   chosen for 17 of the 36 1×1 convolutions (the 28×28 and smaller
//!   ones): 397,632 → 352,605 products, 2,924 → 2,458 uploads, 10,076 →
//!   9,445 responses, 1.69 → 1.53 GB of layer messages (upper bound).
//!
//! ## Protocol (semi-honest; the client holds the secret key)
//! Setup, once per session: client → server: parameter id, ℓ, κ and the
//! public key (seed of a_pk + b_pk).
//! Per layer, for x = x_C + x_S over Z_2^ℓ:
//! 1. client → server: Enc_s(x̂_C) for each input polynomial, seeded
//!    (seed + b only).
//! 2. server: ct ← (ct + encode(x̂_S))·ŵ summed over input groups, then
//!    − encode(r_S) on the needed coefficients, + Enc_pk(0) (fresh
//!    re-randomisation), + flooding noise f uniform in [−2^F, 2^F) on the
//!    needed coefficients; modulus switch to 2^k; server → client: a' (all
//!    N coefficients) and b' of the **needed coefficients only** (k bits each).
//! 3. client decrypts y_C = W·x − r_S; the server's share is y_S = r_S.
//!
//! Cost: 2 rounds (one flight each way) per layer. Each flight streams in
//! public batches ([`upload_batches`], [`response_batches`]) so that the
//! link, the client's encryption/decryption and the server's rows overlap;
//! batching changes neither the bytes nor the rounds.
//!
//! ## Blocking
//! The blocking (C_b, H_b, W_b, M_b) minimises bytes + a price per server
//! product ([`layout_bytes_per_product`]); it is public, derived by both
//! parties from the shape and parameters.
//!
//! ## Noise and flooding (all bounds public: from N, ℓ, κ and the shape)
//! Before the switch, a needed coefficient's phase is q·y/t + E with
//! E = Σ_g ŵ_g·(e_g + ε_C + ε_S) − ε_r + e_zero + f, where |e| ≤ 21 (binomial),
//! the encoding roundings |ε| ≤ 1/2, e_zero = u·e_pk + e_1 + e_2·s
//! (|·| ≤ 21(2N+1)). With G input groups and |ŵ| ≤ 2^{ℓ−1} (any weights,
//! centered): D = G·N·2^{ℓ−1}·22 + 21(2N+1) + 1 bounds every term but f,
//! and F = ⌈log2 D⌉ + κ. Correctness needs F + ℓ + 4 ≤ ⌊log2 q⌋ (checked per
//! layer, with a clear error otherwise); after switching to 2^k the error is
//! < 2^{k−ℓ−2} + (N+1)(1/2 + L·2^−32) < 2^{k−ℓ−1}, so decryption is always exact.
//!
//! ## What each party sees, and why it is simulatable
//! * **Server**: the public key and seeded ciphertexts Enc_s(x̂_C) under the
//!   client's key — pseudorandom under RLWE (ternary secret, σ ≈ 3.2, the HE
//!   standard's 128-bit parameters), so simulated by uniform b's and random
//!   seeds, whatever x_C is. Its output r_S is its own uniform randomness.
//! * **Client**: knows s, so its view is equivalent to (a', the phases of
//!   the needed coefficients). Hybrid 1: the phase's noise is E = D_W + f
//!   with |D_W| ≤ D, and f uniform on 2^{F+1} values with F ≥ log2 D + κ, so
//!   replacing D_W + f by f changes each revealed coefficient's distribution
//!   by at most D/2^{F+1} ≤ 2^{−κ−1} (statistical distance, whatever W is);
//!   now the phase is q·y_C/t + f and e_zero's randomness (u, e_1, e_2)
//!   appears only in a = a_in·ŵ + u·a_pk + e_2. Hybrid 2: u·a_pk + e_2 is an
//!   RLWE sample with secret u, so a is pseudorandom, independent of ŵ.
//!   The modulus switch and dropping the unneeded b coefficients are
//!   post-processing. So the client's view is simulated from y_C = W·x − r_S
//!   (uniform, since r_S is) alone: uniform a', and b' = round(2^k/q·(q·y_C/t +
//!   f − a·s)). Statistical distance ≤ 2^{−κ−1} per revealed coefficient
//!   (κ = 64 by default: ≤ 2^{−41} over the ~1.1·10^7 coefficients ResNet-50's linear layers reveal).
//! * Tests: `tests/cheetah.rs::flooding_hides_the_weights` plays the curious
//!   client on the unswitched phases with two very different W of the same
//!   output share and fails without flooding.
//!
//! **Integrity in transit** is the transport's job (CRC32, TLS): a response
//! altered to another of the right length decrypts to a wrong share. A
//! wrong length, out-of-range residues or a parameter mismatch are errors.

use crate::he::{residue_bits, PublicKey, SecretKey, SeededCt};
use crate::ring::{mul_mod, pow_mod, Context};
use crate::wire::{pack_into, packed_len, unpack};
use crate::{Error, Result};
use hush_primitives::Prg;
use hush_transport::{Channel, ChannelExt};
use rayon::prelude::*;
use std::sync::Arc;
use zeroize::Zeroize;

/// Default statistical flooding parameter κ (bits per revealed coefficient).
pub const DEFAULT_FLOOD_BITS: u32 = 64;
/// Largest ℓ accepted at all: the switched modulus 2^k, k = ℓ + ⌈log2(N+1)⌉ + 2,
/// must stay below 2^64 (so ℓ ≤ 47 at N = 8192, ≤ 48 at N = 4096), and
/// flooding must fit q (F + ℓ + 4 ≤ ⌊log2 q⌋, checked per layer by [`budget`]).
pub const MAX_BITS: u32 = 48;

/// A linear layer's public shape. Weights (server) are ℓ-bit ring
/// elements: FC n_out × n_in row-major; conv c_out × c_in × kh × kw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    Fc { n_in: usize, n_out: usize },
    /// Input c_in × h × w; pads = [top, left, bottom, right].
    Conv { c_in: usize, h: usize, w: usize, c_out: usize, kh: usize, kw: usize, stride: [usize; 2], pads: [usize; 4] },
}

impl Shape {
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::Shape(m.to_string()));
        match *self {
            Shape::Fc { n_in, n_out } => {
                if n_in == 0 || n_out == 0 || n_in.checked_mul(n_out).is_none_or(|v| v > 1 << 30) {
                    return bad("fc dimensions out of range");
                }
            }
            Shape::Conv { c_in, h, w, c_out, kh, kw, stride, pads } => {
                if [c_in, h, w, c_out, kh, kw, stride[0], stride[1]].contains(&0) {
                    return bad("conv dimension or stride is zero");
                }
                if h + pads[0] + pads[2] < kh || w + pads[1] + pads[3] < kw {
                    return bad("conv kernel larger than the padded input");
                }
                if c_in.checked_mul(h.saturating_mul(w)).is_none_or(|v| v > 1 << 27) || c_out.saturating_mul(c_in).saturating_mul(kh).saturating_mul(kw) > 1 << 30 {
                    return bad("conv dimensions out of range");
                }
            }
        }
        Ok(())
    }
    pub fn in_len(&self) -> usize {
        match *self {
            Shape::Fc { n_in, .. } => n_in,
            Shape::Conv { c_in, h, w, .. } => c_in * h * w,
        }
    }
    /// (oh, ow) of a conv.
    fn conv_out(&self) -> (usize, usize) {
        match *self {
            Shape::Conv { h, w, kh, kw, stride, pads, .. } => {
                ((h + pads[0] + pads[2] - kh) / stride[0] + 1, (w + pads[1] + pads[3] - kw) / stride[1] + 1)
            }
            _ => (1, 1),
        }
    }
    pub fn out_len(&self) -> usize {
        match *self {
            Shape::Fc { n_out, .. } => n_out,
            Shape::Conv { c_out, .. } => {
                let (a, b) = self.conv_out();
                c_out * a * b
            }
        }
    }
    pub fn weight_len(&self) -> usize {
        match *self {
            Shape::Fc { n_in, n_out } => n_in * n_out,
            Shape::Conv { c_in, c_out, kh, kw, .. } => c_out * c_in * kh * kw,
        }
    }
}

/// A strided convolution as an equivalent stride-1 convolution without
/// padding (both parties transform locally, before encoding): with stride
/// s, the padded input splits into s×s phase images x^{(a,b)}[c,i,j] =
/// x_pad[c, s·i+a, s·j+b] and the kernel into K^{(a,b)}[m,c,l,l'] =
/// K[m,c, s·l+a, s·l'+b]; y = Σ_{a,b} conv_1(x^{(a,b)}, K^{(a,b)}), i.e. one
/// stride-1 conv over C·p_h·p_w channels (p = min(s, kernel): phases the
/// kernel never reaches are dropped, so a 1×1 stride-2 conv just
/// subsamples). Only the needed outputs are computed — no response
/// coefficients are spent on the positions a stride skips.
#[derive(Clone, Debug)]
struct Destride {
    inner: Shape,
    pa: usize,
    pb: usize,
}

fn destride(shape: &Shape) -> Option<Destride> {
    match *shape {
        Shape::Conv { c_in, c_out, kh, kw, stride, .. } if stride != [1, 1] => {
            let (oh, ow) = shape.conv_out();
            let (pa, pb) = (stride[0].min(kh), stride[1].min(kw));
            let (kh2, kw2) = (kh.div_ceil(stride[0]), kw.div_ceil(stride[1]));
            Some(Destride {
                inner: Shape::Conv { c_in: c_in * pa * pb, h: oh + kh2 - 1, w: ow + kw2 - 1, c_out, kh: kh2, kw: kw2, stride: [1, 1], pads: [0; 4] },
                pa,
                pb,
            })
        }
        _ => None,
    }
}

impl Destride {
    fn input(&self, shape: &Shape, x: &[u64]) -> Vec<u64> {
        let (Shape::Conv { c_in, h, w, stride, pads, .. }, Shape::Conv { h: hs, w: ws, .. }) = (shape, &self.inner) else { unreachable!() };
        let mut out = vec![0u64; self.inner.in_len()];
        for c in 0..*c_in {
            for a in 0..self.pa {
                for b in 0..self.pb {
                    let ch = (c * self.pa + a) * self.pb + b;
                    for i in 0..*hs {
                        let yi = (stride[0] * i + a).wrapping_sub(pads[0]);
                        if yi >= *h {
                            continue;
                        }
                        for j in 0..*ws {
                            let xj = (stride[1] * j + b).wrapping_sub(pads[1]);
                            if xj < *w {
                                out[(ch * hs + i) * ws + j] = x[(c * h + yi) * w + xj];
                            }
                        }
                    }
                }
            }
        }
        out
    }
    fn weights(&self, shape: &Shape, wt: &[u64]) -> Vec<u64> {
        let (Shape::Conv { c_in, c_out, kh, kw, stride, .. }, Shape::Conv { c_in: ci2, kh: kh2, kw: kw2, .. }) = (shape, &self.inner) else { unreachable!() };
        let mut out = vec![0u64; self.inner.weight_len()];
        for m in 0..*c_out {
            for c in 0..*c_in {
                for a in 0..self.pa {
                    for b in 0..self.pb {
                        let ch = (c * self.pa + a) * self.pb + b;
                        for l in 0..*kh2 {
                            let u = stride[0] * l + a;
                            if u >= *kh {
                                continue;
                            }
                            for l2 in 0..*kw2 {
                                let v = stride[1] * l2 + b;
                                if v < *kw {
                                    out[((m * ci2 + ch) * kh2 + l) * kw2 + l2] = wt[((m * c_in + c) * kh + u) * kw + v];
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

/// How a layer maps onto polynomials (public; both parties compute it).
#[derive(Clone, Debug)]
pub struct Layout {
    pub shape: Shape,
    pub n: usize,
    /// Input groups (FC: input chunks; conv: channel groups).
    pub groups: usize,
    /// Spatial tiles (FC: 1).
    pub tiles: usize,
    /// Output row groups (FC: row blocks; conv: output channels).
    pub rows: usize,
    /// FC: (n_i, n_o, 0, 0); conv: (C_b, H_b, W_b, M_b) and the tile grid;
    /// interleaved 1×1 conv: (C_b, S_b, 0, M_b).
    blk: [usize; 4],
    tiles_w: usize,
    /// A 1×1 convolution in the interleaved encoding ([`Layout::interleaved`]).
    inter: bool,
}

impl Layout {
    pub fn in_cts(&self) -> usize {
        self.groups * self.tiles
    }
    pub fn out_cts(&self) -> usize {
        self.rows * self.tiles
    }
    /// FC: [n_i, n_o, 0, 0]; conv: [C_b, H_b, W_b, M_b] (M_b output channels per product);
    /// interleaved 1×1 conv: [C_b, S_b, 0, M_b].
    pub fn blocking(&self) -> [usize; 4] {
        self.blk
    }
    /// Whether this is a 1×1 convolution in the **interleaved encoding**
    /// (a batch of matrix–vector products, channel index fastest): with the
    /// input C×S (S = H·W spatial positions, no padding, stride 1 — strided
    /// 1×1 convs are first subsampled, see `Destride`) cut into blocks of
    /// C_b channels × S_b positions (2·S_b ≤ N; all S_b = S in one tile, or
    /// tiles of S_b = ⌈S/2^j⌉ consecutive positions, the last one padded with
    /// zeros), x̂ = Σ_{c,s} X\[c,s\]·X^{s·C_b + c} and, for
    /// M_b output channels, ŵ = Σ_{m,c} W\[m,c\]·X^{m·S_bC_b + C_b − 1 − c}.
    /// Coefficient m·S_bC_b + s·C_b + C_b − 1 of x̂·ŵ is Σ_c W\[m,c\]·X\[c,s\]:
    /// a term (s', c') × (m', c'') lands there iff (s' − s)·C_b + (m' − m)·S_bC_b
    /// = c'' − c' ∈ (−C_b, C_b), i.e. s' = s, m' = m, c' = c''; the product's
    /// degree is below (M_b + 1)·S_bC_b ≤ N + 1, so nothing wraps. A product
    /// then holds up to M_b·S_b·C_b ≈ N·M_b/(M_b + 1) useful multiply–adds,
    /// where the spatial encoding of a 1×1 kernel spaces output channels
    /// 2·C_bH_bW_b apart (≈ N/2). Both are candidates; [`Layout::new_weighted`]
    /// takes the cheaper (deep ResNet-50 layers such as 512×7×7 → 2048:
    /// 11,968 → 6,909 products). The weight polynomial of (row, group) does not
    /// depend on the tile, so the server transforms it once for all tiles;
    /// tiles cut the weight transforms (the largest part of the server's work
    /// at BERT's 128 tokens × 768 or 3,072 channels, and the embedding's
    /// 30,522-row table) at the price of more output ciphertexts, and the
    /// planner weighs both. The blocking is public, from the shape.
    pub fn interleaved(&self) -> bool {
        self.inter
    }
    /// Polynomial products the server computes (each for b and a).
    pub fn products(&self) -> usize {
        self.rows * self.groups * self.tiles
    }

    /// Chooses the blocking for `shape` on ring degree `n` minimising
    /// the bytes of one layer (`up` bytes per input ciphertext, `down`
    /// per output ciphertext without its needed coefficients).
    pub fn new(shape: &Shape, n: usize, up: usize, down: usize) -> Result<Layout> {
        Layout::new_weighted(shape, n, up, down, 0)
    }

    /// As [`Layout::new`], minimising bytes + `per_product`·(products + 4·output
    /// ciphertexts + 2·input ciphertexts): the server's work in units of one
    /// polynomial product (weight NTT + two multiply-accumulates), where an
    /// output ciphertext costs about four (re-randomisation, two inverse NTTs,
    /// the switch) and an input about two (its NTTs at the server and its
    /// encryption at the client), priced at `per_product` bytes each.
    pub fn new_weighted(shape: &Shape, n: usize, up: usize, down: usize, per_product: usize) -> Result<Layout> {
        shape.validate()?;
        let cost = |i: usize, o: usize, prod: usize| (i * (up + 2 * per_product) + o * (down + 4 * per_product) + prod * per_product, prod);
        // the interleaved candidates price the weight transform (once per row
        // and group, shared by the tiles) apart from the two multiply-accumulates
        // (per tile): 2/5 and 3/5 of a product (measured: BERT-base's
        // embedding priced at 4/5 and 1/5 took 8 tiles and ran ≈ 2× slower
        // than in one tile: the multiply-accumulates of both polynomials cost
        // more than the weight's transform); one tile prices as `cost`
        let cost_shared = |i: usize, o: usize, wnt: usize, prod: usize| (i * (up + 2 * per_product) + o * (down + 4 * per_product) + (2 * wnt + 3 * prod) * per_product / 5, prod);
        match *shape {
            Shape::Fc { n_in, n_out } => {
                let mut best: Option<((usize, usize), Layout)> = None;
                for ni in 1..=n_in.min(n) {
                    let no = n_out.min(n / ni);
                    let (g, r) = (n_in.div_ceil(ni), n_out.div_ceil(no));
                    let c = cost(g, r, g * r);
                    if best.as_ref().is_none_or(|(b, _)| c < *b) {
                        best = Some((c, Layout { shape: shape.clone(), n, groups: g, tiles: 1, rows: r, blk: [ni, no, 0, 0], tiles_w: 1, inter: false }));
                    }
                }
                Ok(best.expect("n_in ≥ 1").1)
            }
            Shape::Conv { c_in, h, w, c_out, kh, kw, pads, .. } => {
                let (hp, wp) = (h + pads[0] + pads[2], w + pads[1] + pads[3]);
                if kh * kw > n {
                    return Err(Error::Shape(format!("kernel {kh}x{kw} does not fit ring degree {n}")));
                }
                let (ho1, wo1) = (hp - kh + 1, wp - kw + 1);
                let mut best: Option<((usize, usize), Layout)> = None;
                for cb in 1..=c_in.min(n / (kh * kw)) {
                    for hb in kh..=hp.min(n / (cb * kw)) {
                        let wb = wp.min(n / (cb * hb));
                        if wb < kw {
                            continue;
                        }
                        let (th, tw) = (ho1.div_ceil(hb - kh + 1), wo1.div_ceil(wb - kw + 1));
                        let (g, t) = (c_in.div_ceil(cb), th * tw);
                        // output channels per product: x̂·ŵ_m has degree < stride_m = span + O + 1,
                        // so M_b channels at offsets m·stride_m fit without overlap or wrap if M_b·stride_m ≤ N
                        let mb = c_out.min((n / conv_stride_m(cb, hb, wb, kh, kw)).max(1));
                        let rows = c_out.div_ceil(mb);
                        let c = cost(g * t, rows * t, rows * g * t);
                        if best.as_ref().is_none_or(|(b, _)| c < *b) {
                            best = Some((c, Layout { shape: shape.clone(), n, groups: g, tiles: t, rows, blk: [cb, hb, wb, mb], tiles_w: tw, inter: false }));
                        }
                    }
                }
                // a 1×1 stride-1 conv without padding: the interleaved encoding too,
                // with S_b positions per ciphertext: all S (one tile), or tiles of
                // S_b = ⌈S/2^j⌉ positions, each weight polynomial (its transform)
                // shared by the tiles
                let sp = h * w;
                if kh == 1 && kw == 1 && pads == [0; 4] && matches!(shape, Shape::Conv { stride: [1, 1], .. }) {
                    let mut sbs: Vec<usize> = (0..usize::BITS).map(|j| sp.div_ceil(1 << j)).collect();
                    sbs.dedup();
                    for sb in sbs.into_iter().filter(|&sb| 2 * sb <= n) {
                        let t = sp.div_ceil(sb);
                        for cb in 1..=c_in.min(n / (2 * sb)) {
                            // (M_b + 1)·S_b·C_b ≤ N + 1: no wrap
                            let mb = c_out.min((n + 1) / (sb * cb) - 1);
                            let (g, rows) = (c_in.div_ceil(cb), c_out.div_ceil(mb));
                            let c = cost_shared(g * t, rows * t, rows * g, rows * g * t);
                            if best.as_ref().is_none_or(|(b, _)| c < *b) {
                                best = Some((c, Layout { shape: shape.clone(), n, groups: g, tiles: t, rows, blk: [cb, sb, 0, mb], tiles_w: t, inter: true }));
                            }
                        }
                    }
                }
                best.map(|b| b.1).ok_or_else(|| Error::Shape("no tiling fits the ring degree".into()))
            }
        }
    }

    /// The input polynomial of ciphertext (g, t): coefficient → input index.
    pub fn input_poly(&self, g: usize, t: usize, x: &[u64]) -> Vec<u64> {
        let mut p = vec![0u64; self.n];
        match self.shape {
            Shape::Fc { n_in, .. } => {
                let ni = self.blk[0];
                for j in 0..ni {
                    let col = g * ni + j;
                    if col < n_in {
                        p[j] = x[col];
                    }
                }
            }
            Shape::Conv { c_in, h, w, .. } if self.inter => {
                let [cb, sb, _, _] = self.blk;
                let sp = h * w;
                for c in 0..cb.min(c_in.saturating_sub(g * cb)) {
                    let ch = g * cb + c;
                    for s in 0..sb.min(sp.saturating_sub(t * sb)) {
                        p[s * cb + c] = x[ch * sp + t * sb + s];
                    }
                }
            }
            Shape::Conv { c_in, h, w, kh, kw, pads, .. } => {
                let [cb, hb, wb, _] = self.blk;
                let (oi, oj) = self.tile_origin(t, kh, kw);
                for c in 0..cb {
                    let ch = g * cb + c;
                    if ch >= c_in {
                        break;
                    }
                    for i in 0..hb {
                        let yi = (oi + i).wrapping_sub(pads[0]);
                        if yi >= h {
                            continue;
                        }
                        for j in 0..wb {
                            let xj = (oj + j).wrapping_sub(pads[1]);
                            if xj < w {
                                p[c * hb * wb + i * wb + j] = x[(ch * h + yi) * w + xj];
                            }
                        }
                    }
                }
            }
        }
        p
    }

    fn tile_origin(&self, t: usize, kh: usize, kw: usize) -> (usize, usize) {
        let [_, hb, wb, _] = self.blk;
        ((t / self.tiles_w) * (hb - kh + 1), (t % self.tiles_w) * (wb - kw + 1))
    }

    /// The weight polynomial of (row group r, input group g), centered
    /// signed coefficients (|w| ≤ 2^{ℓ−1}).
    pub fn weight_poly(&self, r: usize, g: usize, wt: &[u64], bits: u32) -> Vec<i64> {
        let mut p = vec![0i64; self.n];
        self.weight_terms(r, g, wt, bits, |pos, v| p[pos] = v);
        p
    }

    /// Visits the (position, centered value) of every weight-polynomial
    /// slot of (r, g) that the shape can fill (zeros included).
    pub fn weight_terms(&self, r: usize, g: usize, wt: &[u64], bits: u32, mut put: impl FnMut(usize, i64)) {
        let sh = 64 - bits;
        let sgn = |v: u64| ((v << sh) as i64) >> sh;
        match self.shape {
            Shape::Fc { n_in, n_out } => {
                let [ni, no, _, _] = self.blk;
                for i in 0..no {
                    let row = r * no + i;
                    if row >= n_out {
                        break;
                    }
                    for j in 0..ni {
                        let col = g * ni + j;
                        if col < n_in {
                            put(i * ni + ni - 1 - j, sgn(wt[row * n_in + col]));
                        }
                    }
                }
            }
            Shape::Conv { c_in, c_out, .. } if self.inter => {
                let [cb, sb, _, mb] = self.blk;
                for mm in 0..mb.min(c_out.saturating_sub(r * mb)) {
                    let m = r * mb + mm;
                    for c in 0..cb.min(c_in.saturating_sub(g * cb)) {
                        put(mm * sb * cb + cb - 1 - c, sgn(wt[m * c_in + g * cb + c]));
                    }
                }
            }
            Shape::Conv { c_in, c_out, kh, kw, .. } => {
                let [cb, hb, wb, mb] = self.blk;
                let o = (cb - 1) * hb * wb + (kh - 1) * wb + (kw - 1);
                let sm = conv_stride_m(cb, hb, wb, kh, kw);
                for mm in 0..mb {
                    let m = r * mb + mm;
                    if m >= c_out {
                        break;
                    }
                    for c in 0..cb {
                        let ch = g * cb + c;
                        if ch >= c_in {
                            break;
                        }
                        for l in 0..kh {
                            for l2 in 0..kw {
                                put(mm * sm + o - c * hb * wb - l * wb - l2, sgn(wt[((m * c_in + ch) * kh + l) * kw + l2]));
                            }
                        }
                    }
                }
            }
        }
    }

    /// Needed coefficients of output ciphertext (r, t): (coefficient, output index).
    pub fn needed(&self, r: usize, t: usize) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        match self.shape {
            Shape::Fc { n_out, .. } => {
                let [ni, no, _, _] = self.blk;
                for i in 0..no {
                    let row = r * no + i;
                    if row < n_out {
                        out.push(((i * ni + ni - 1) as u32, row as u32));
                    }
                }
            }
            Shape::Conv { h, w, c_out, .. } if self.inter => {
                let [cb, sb, _, mb] = self.blk;
                let sp = h * w;
                for mm in 0..mb.min(c_out.saturating_sub(r * mb)) {
                    let m = r * mb + mm;
                    for s in 0..sb.min(sp.saturating_sub(t * sb)) {
                        out.push(((mm * sb * cb + s * cb + cb - 1) as u32, (m * sp + t * sb + s) as u32));
                    }
                }
            }
            Shape::Conv { h, w, c_out, kh, kw, stride, pads, .. } => {
                let [cb, hb, wb, mb] = self.blk;
                let (ho1, wo1) = (h + pads[0] + pads[2] - kh + 1, w + pads[1] + pads[3] - kw + 1);
                let (oh, ow) = self.shape.conv_out();
                let (oi, oj) = self.tile_origin(t, kh, kw);
                let sm = conv_stride_m(cb, hb, wb, kh, kw);
                for mm in 0..mb {
                let m = r * mb + mm;
                if m >= c_out {
                    break;
                }
                let o = mm * sm + (cb - 1) * hb * wb + (kh - 1) * wb + (kw - 1);
                for i in 0..hb - kh + 1 {
                    let gi = oi + i;
                    if gi >= ho1 {
                        break;
                    }
                    if gi % stride[0] != 0 {
                        continue;
                    }
                    for j in 0..wb - kw + 1 {
                        let gj = oj + j;
                        if gj >= wo1 {
                            break;
                        }
                        if gj % stride[1] == 0 {
                            out.push(((o + i * wb + j) as u32, (m * oh * ow + (gi / stride[0]) * ow + gj / stride[1]) as u32));
                        }
                    }
                }
                }
            }
        }
        out
    }
}

/// The price of one polynomial product in bytes when [`plan`] picks a
/// layer's blocking ([`Layout::new_weighted`]): N·L/16, one byte per sixteen
/// residues the product touches (a product's work grows with N·L), 2 KiB at
/// N = 8192 with four primes. Minimising bytes alone (price 0) packs few
/// channels per input ciphertext and several output channels per product,
/// which halves the useful coefficients of a product; at this price
/// ResNet-50's linear layers take 16% fewer products for 6.6% more bytes
/// (he128-n8192-p50, ℓ = 37: 474,122 → 397,632 products, 1.075 → 1.146 GB;
/// twice the price saves only 2% more products for 1.4% more bytes, and
/// would take interactive ResNet-50 past Cheetah's 2.3 GB). One such
/// product costs ~35 µs of a core here (AVX-512 IFMA), what 2 KiB cost at
/// ~60 MB/s — between the LAN (375 MB/s) and WAN (25 MB/s) profiles. The blocking is public and both parties derive it
/// from the shape and parameters, so it needs no negotiation; the hello's
/// magic names this rule's version (a peer on another rule is refused).
pub fn layout_bytes_per_product(ctx: &Context) -> usize {
    ctx.n * ctx.levels() / 16
}

/// Response ciphertexts per streamed batch ([`response_batches`]).
pub const RESPONSE_BATCH_CTS: usize = 32;

/// The server's response to a layer travels in batches of whole rows, about
/// [`RESPONSE_BATCH_CTS`] ciphertexts each (≈ 1.8 MB at N = 8192, k = 53),
/// one message flight per batch; the split is public (from the layout), so
/// both parties agree on it. The bytes are those of one message, and the
/// batches form one flight (one round: no message of the client comes
/// between them).
pub fn response_batches(lay: &Layout) -> impl Iterator<Item = std::ops::Range<usize>> {
    let per = (RESPONSE_BATCH_CTS / lay.tiles.max(1)).max(1);
    let rows = lay.rows;
    (0..rows).step_by(per).map(move |r| r..(r + per).min(rows))
}

/// Input ciphertexts per streamed upload batch ([`upload_batches`]).
pub const UPLOAD_BATCH_CTS: usize = 16;

/// The client's upload of a layer travels in batches of about
/// [`UPLOAD_BATCH_CTS`] seeded ciphertexts (≈ 3.3 MB at N = 8192 with four
/// 50-bit primes), in ciphertext order; public, like [`response_batches`],
/// and one flight.
pub fn upload_batches(lay: &Layout) -> impl Iterator<Item = std::ops::Range<usize>> {
    let n = lay.in_cts();
    (0..n).step_by(UPLOAD_BATCH_CTS).map(move |c| c..(c + UPLOAD_BATCH_CTS).min(n))
}

/// Spacing of packed output channels in a conv product (see [`Layout`]).
fn conv_stride_m(cb: usize, hb: usize, wb: usize, kh: usize, kw: usize) -> usize {
    let o = (cb - 1) * hb * wb + (kh - 1) * wb + (kw - 1);
    cb * hb * wb + o
}

/// Protocol settings both parties must agree on (checked at setup).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// ℓ: shares live in Z_2^ℓ (1 ≤ ℓ ≤ [`MAX_BITS`]).
    pub bits: u32,
    /// κ: statistical flooding bits per revealed coefficient.
    pub flood_bits: u32,
    /// Modulus-switch responses to 2^k (always on outside tests; off, the
    /// response carries full residues — the flooding test reads them).
    pub mod_switch: bool,
    /// The planner's price of one server product, in bytes (`None`:
    /// [`layout_bytes_per_product`]). Public and part of the hello, so both
    /// parties plan alike. A caller that values bytes over server time sets
    /// a lower price: the graph runtime's transformer layers use half the
    /// default (`hush_inference::graph_he`).
    pub price: Option<u32>,
}

impl Config {
    pub fn new(bits: u32) -> Config {
        Config { bits, flood_bits: DEFAULT_FLOOD_BITS, mod_switch: true, price: None }
    }
    /// This configuration with the planner's price per product set to `bytes`.
    pub fn with_price(self, bytes: u32) -> Config {
        Config { price: Some(bytes), ..self }
    }
}

/// Public noise budget of one layer.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// log2 of the flooding bound F (f uniform in [−2^F, 2^F)).
    pub flood_log: u32,
    /// Switched modulus 2^k.
    pub k: u32,
}

/// The noise budget for a layer with `groups` accumulated input ciphertexts.
pub fn budget(ctx: &Context, cfg: &Config, groups: usize) -> Result<Budget> {
    let n = ctx.n as f64;
    let l = cfg.bits;
    if l == 0 || l > MAX_BITS {
        return Err(Error::Params(format!("ℓ = {l} outside 1..={MAX_BITS}")));
    }
    // centered weights (|w| ≤ 2^{ℓ−1}) must be below every prime (the server's
    // weight transform, Context::ntt_small, takes them as residues directly)
    if ctx.primes().iter().any(|&p| (1u64 << (l - 1)) >= p) {
        return Err(Error::Params(format!("ℓ = {l}: weights reach 2^{} ≥ a prime of {}", l - 1, ctx.params.name)));
    }
    let d = groups as f64 * n * 2f64.powi(l as i32 - 1) * 22.0 + 21.0 * (2.0 * n + 1.0) + 1.0;
    let flood_log = d.log2().ceil() as u32 + cfg.flood_bits;
    let log_q = ctx.params.log_q().floor() as u32;
    if flood_log > 250 {
        return Err(Error::Params(format!("flooding bound 2^{flood_log} exceeds the implementation's 2^250 (κ = {})", cfg.flood_bits)));
    }
    if flood_log + l + 4 > log_q {
        return Err(Error::Params(format!(
            "parameters {} (log q = {log_q}) cannot hold ℓ = {l} with κ = {} flooding bits over {groups} input ciphertexts \
             (needs log q ≥ {}); use a larger set such as he128-n8192",
            ctx.params.name,
            cfg.flood_bits,
            flood_log + l + 4
        )));
    }
    let k = l + (n + 1.0).log2().ceil() as u32 + 2;
    let p01 = (ctx.primes()[0] as f64).log2() + (ctx.primes()[1] as f64).log2();
    if k > 63 || n.log2() + k as f64 + 2.0 > p01 {
        return Err(Error::Params(format!("switched modulus 2^{k} too large for ℓ = {l}")));
    }
    Ok(Budget { flood_log, k })
}

/// "HRL5": layouts priced by [`Config::price`] (default
/// [`layout_bytes_per_product`]), the price in the hello; with the
/// interleaved 1×1 encoding among the candidates, also in tiles of S_b < S
/// positions ([`Layout::interleaved`]; HRL4: the default price only; HRL3:
/// one tile only; HRL2: without it; HRL1: bytes only).
const HELLO_MAGIC: &[u8; 4] = b"HRL5";

fn hello(ctx: &Context, cfg: &Config) -> Vec<u8> {
    let mut h = HELLO_MAGIC.to_vec();
    h.extend_from_slice(&ctx.params.id());
    h.extend_from_slice(&[cfg.bits as u8, cfg.flood_bits as u8, cfg.mod_switch as u8]);
    h.extend_from_slice(&cfg.price.unwrap_or(0).to_le_bytes());
    h
}

fn bytes_up(ctx: &Context) -> usize {
    SeededCt::wire_len(ctx)
}
fn bytes_down_fixed(ctx: &Context, cfg: &Config, k: u32) -> usize {
    if cfg.mod_switch {
        packed_len(ctx.n, k)
    } else {
        residue_bits(ctx).iter().map(|&w| packed_len(ctx.n, w)).sum()
    }
}
fn bytes_down_needed(ctx: &Context, cfg: &Config, k: u32, count: usize) -> usize {
    if cfg.mod_switch {
        packed_len(count, k)
    } else {
        residue_bits(ctx).iter().map(|&w| packed_len(count, w)).sum()
    }
}

/// The layout and budget of `shape` under `ctx`/`cfg` (both parties).
pub fn plan(ctx: &Context, cfg: &Config, shape: &Shape) -> Result<(Layout, Budget)> {
    shape.validate()?;
    if let Some(d) = destride(shape) {
        return plan(ctx, cfg, &d.inner);
    }
    let k0 = budget(ctx, cfg, 1)?.k;
    let price = cfg.price.map_or_else(|| layout_bytes_per_product(ctx), |p| p as usize);
    let lay = Layout::new_weighted(shape, ctx.n, bytes_up(ctx), bytes_down_fixed(ctx, cfg, k0), price)?;
    let b = budget(ctx, cfg, lay.groups)?;
    Ok((lay, b))
}

/// The client's messages of one layer, in bytes: (its upload, at most the
/// server's response). Public (from the shape and parameters): memory
/// budgets use it.
pub fn layer_bytes(ctx: &Context, cfg: &Config, shape: &Shape) -> Result<(usize, usize)> {
    let (lay, bud) = plan(ctx, cfg, shape)?;
    Ok((lay.in_cts() * bytes_up(ctx), lay.out_cts() * (bytes_down_fixed(ctx, cfg, bud.k) + bytes_down_needed(ctx, cfg, bud.k, ctx.n))))
}

/// The flooding noise of a response: f = U − 2^F with U uniform on F + 1
/// bits (a 256-bit integer hi·2^128 + lo), reduced per prime as
/// (hi mod p)·(2^128 mod p) + lo mod p − 2^F mod p.
struct Flooder {
    hi_mask: u128,
    lo_mask: u128,
    /// per prime: (2^128 mod p, 2^F mod p)
    c: Vec<(u64, u64)>,
}

impl Flooder {
    fn new(ctx: &Context, bud: &Budget) -> Flooder {
        let fb = bud.flood_log + 1;
        let (hi_mask, lo_mask) = if fb >= 128 { ((1u128 << (fb - 128)) - 1, u128::MAX) } else { (0, (1u128 << fb) - 1) };
        let c = ctx.primes().iter().map(|&p| (mul_mod(pow_mod(2, 64, p), pow_mod(2, 64, p), p), pow_mod(2, bud.flood_log as u64, p))).collect();
        Flooder { hi_mask, lo_mask, c }
    }
}

/// The common end of every response ciphertext (b, a) (coefficient form,
/// already re-randomised with a fresh Enc_pk(0)): subtracts encode(v) with
/// a fresh uniform v ∈ Z_2^ℓ on each needed coefficient (v is the
/// responder's share, pushed to `shares` with its output index), floods the
/// needed coefficients (`flood`: None only in the insecure test mode), and
/// appends a (all N coefficients) and the needed coefficients of b to
/// `down`, modulus-switched to 2^k (or as full residues without the switch).
/// The PRG draws all masks, then all flooding terms.
#[allow(clippy::too_many_arguments)]
fn finish_response(
    ctx: &Context,
    cfg: &Config,
    bud: &Budget,
    sw: &crate::ring::Switcher,
    enc: &crate::ring::Encoder,
    flood: Option<&Flooder>,
    prg: &mut Prg,
    b: &mut [u64],
    a: &[u64],
    nd: &[(u32, u32)],
    down: &mut Vec<u8>,
    shares: &mut Vec<(u32, u64)>,
) {
    let tm = if cfg.bits == 64 { u64::MAX } else { (1u64 << cfg.bits) - 1 };
    // − encode(r_S) on the needed coefficients
    for &(j, o) in nd {
        let v = prg.next_u64() & tm;
        shares.push((o, v));
        for (i, &p) in ctx.primes().iter().enumerate() {
            let x = &mut b[i * ctx.n + j as usize];
            *x = crate::ring::sub_mod(*x, enc.residue(i, v), p);
        }
    }
    // flood the needed coefficients
    if let Some(f) = flood {
        for &(j, _) in nd {
            let lo = ((prg.next_u64() as u128) | ((prg.next_u64() as u128) << 64)) & f.lo_mask;
            let hi = if f.hi_mask != 0 { ((prg.next_u64() as u128) | ((prg.next_u64() as u128) << 64)) & f.hi_mask } else { 0 };
            for (i, &p) in ctx.primes().iter().enumerate() {
                let (two128, two_f) = f.c[i];
                let u = crate::ring::add_mod(mul_mod((hi % p as u128) as u64, two128, p), (lo % p as u128) as u64, p);
                let x = &mut b[i * ctx.n + j as usize];
                *x = crate::ring::add_mod(*x, crate::ring::sub_mod(u, two_f, p), p);
            }
        }
    }
    if cfg.mod_switch {
        pack_into((0..ctx.n).map(|j| ctx.switch(sw, a, j)), bud.k, down);
        pack_into(nd.iter().map(|&(j, _)| ctx.switch(sw, b, j as usize)), bud.k, down);
    } else {
        for (i, wd) in residue_bits(ctx).into_iter().enumerate() {
            pack_into(a[i * ctx.n..(i + 1) * ctx.n].iter().copied(), wd, down);
        }
        for (i, wd) in residue_bits(ctx).into_iter().enumerate() {
            pack_into(nd.iter().map(|&(j, _)| b[i * ctx.n + j as usize]), wd, down);
        }
    }
}

mod select;
pub use select::{rows_per_ct, select_bytes};

/// Client side of a session: holds the secret key.
pub struct HeClient {
    pub ctx: Arc<Context>,
    pub cfg: Config,
    sk: SecretKey,
    prg: Prg,
}

/// Server side of a session: holds the client's public key.
pub struct HeServer {
    pub ctx: Arc<Context>,
    pub cfg: Config,
    pk: PublicKey,
    prg: Prg,
    flood: bool,
}

/// What a curious client computes from one revealed coefficient of an
/// unswitched response: the noise E = phase − encode(y_C), centered
/// (exact while |E| < p_0·p_1/2). Only with `mod_switch = false`.
pub type NoiseView = Vec<i128>;

impl HeClient {
    /// Generates the key and sends the hello and public key (one message).
    pub fn setup(ch: &mut dyn Channel, ctx: Arc<Context>, cfg: Config, mut prg: Prg) -> Result<HeClient> {
        budget(&ctx, &cfg, 1)?;
        let sk = SecretKey::generate(&ctx, &mut prg);
        let pk = sk.public_key(&ctx, &mut prg);
        let mut msg = hello(&ctx, &cfg);
        pk.write(&ctx, &mut msg);
        ch.send_chunked(&msg)?;
        Ok(HeClient { ctx, cfg, sk, prg })
    }

    /// Client side of one layer: sends Enc(x_C), returns y_C = W·x − r_S.
    pub fn linear(&mut self, ch: &mut dyn Channel, shape: &Shape, x_c: &[u64]) -> Result<Vec<u64>> {
        self.linear_inner(ch, shape, x_c, None)
    }

    /// As [`HeClient::linear`], also returning the noise of every revealed
    /// coefficient (the curious client's best view of W; tests).
    pub fn linear_with_noise(&mut self, ch: &mut dyn Channel, shape: &Shape, x_c: &[u64]) -> Result<(Vec<u64>, NoiseView)> {
        let mut nv = Vec::new();
        let y = self.linear_inner(ch, shape, x_c, Some(&mut nv))?;
        Ok((y, nv))
    }

    fn linear_inner(&mut self, ch: &mut dyn Channel, shape: &Shape, x_c: &[u64], noise: Option<&mut NoiseView>) -> Result<Vec<u64>> {
        shape.validate()?;
        if x_c.len() != shape.in_len() {
            return Err(Error::Shape(format!("input share has {} elements, the layer takes {}", x_c.len(), shape.in_len())));
        }
        if let Some(d) = destride(shape) {
            let mut xt = d.input(shape, x_c);
            let y = self.linear_inner(ch, &d.inner, &xt, noise);
            xt.zeroize();
            return y;
        }
        self.linear_stride1(ch, shape, x_c, noise)
    }

    fn linear_stride1(&mut self, ch: &mut dyn Channel, shape: &Shape, x_c: &[u64], mut noise: Option<&mut NoiseView>) -> Result<Vec<u64>> {
        let ctx = self.ctx.clone();
        let cfg = self.cfg;
        let (lay, bud) = plan(&ctx, &cfg, shape)?;
        if x_c.len() != shape.in_len() {
            return Err(Error::Shape(format!("input share has {} elements, the layer takes {}", x_c.len(), shape.in_len())));
        }
        let tm = if cfg.bits == 64 { u64::MAX } else { (1u64 << cfg.bits) - 1 };
        if x_c.iter().any(|&v| v & !tm != 0) {
            return Err(Error::Shape(format!("input share outside Z_2^{}", cfg.bits)));
        }
        // input ciphertexts encrypted in parallel (rayon), each with its own
        // PRG stream (a's seed and the error) derived from one fresh per-layer
        // seed — the same distribution as one sequential stream
        // sent in batches of UPLOAD_BATCH_CTS (one flight), so the link and
        // the server's parsing and NTTs overlap the client's next batch
        let lay_ref = &lay;
        self.upload(ch, lay.in_cts(), |idx| lay_ref.input_poly(idx / lay_ref.tiles, idx % lay_ref.tiles, x_c))?;
        // the response's length is fixed by the public layout: allocate only that
        let needed: Vec<Vec<(u32, u32)>> = (0..lay.rows).flat_map(|r| (0..lay.tiles).map(move |t| (r, t))).map(|(r, t)| lay.needed(r, t)).collect();
        let mut y = vec![0u64; shape.out_len()];
        for rows in response_batches(&lay) {
            let needed = &needed[rows.start * lay.tiles..rows.end * lay.tiles];
            self.response_batch(ch, &bud, needed, &mut y, noise.as_deref_mut())?;
        }
        Ok(y)
    }

    /// Encrypts `count` plaintext polynomials (`poly(i)`, N values mod 2^ℓ)
    /// under the secret key and sends them, seeded, in batches of
    /// [`UPLOAD_BATCH_CTS`] (one flight), each in parallel (rayon) with its
    /// own PRG stream (a's seed and the error) from one fresh seed — the same
    /// distribution as one sequential stream — so the link and the peer's
    /// parsing overlap the next batch.
    fn upload(&mut self, ch: &mut dyn Channel, count: usize, poly: impl Fn(usize) -> Vec<u64> + Sync) -> Result<()> {
        let (ctx, cfg) = (self.ctx.clone(), self.cfg);
        let bu = bytes_up(&ctx);
        let mut seed = self.prg.random_block();
        for batch in (0..count).step_by(UPLOAD_BATCH_CTS).map(|c| c..(c + UPLOAD_BATCH_CTS).min(count)) {
            let mut up = vec![0u8; batch.len() * bu];
            let (sk, ctx, poly) = (&self.sk, &ctx, &poly);
            let first = batch.start;
            up.par_chunks_mut(bu).enumerate().for_each(|(i, out)| {
                let idx = first + i;
                let mut prg = Prg::with_nonce(seed, idx as u64);
                let mut m = poly(idx);
                let mut ct = sk.encrypt(ctx, cfg.bits, &m, &mut prg);
                let mut buf = Vec::with_capacity(bu);
                ct.write(ctx, &mut buf);
                out.copy_from_slice(&buf);
                m.zeroize();
                ct.b.zeroize();
            });
            ch.send_chunked(&up)?;
        }
        seed.0.zeroize();
        Ok(())
    }

    /// Receives and decrypts one batch of response ciphertexts (their
    /// needed coefficients `needed`, in order) into `y`.
    fn response_batch(&mut self, ch: &mut dyn Channel, bud: &Budget, needed: &[Vec<(u32, u32)>], y: &mut [u64], mut noise: Option<&mut NoiseView>) -> Result<()> {
        let ctx = self.ctx.clone();
        let cfg = self.cfg;
        let total: usize = needed.iter().map(|nd| bytes_down_fixed(&ctx, &cfg, bud.k) + bytes_down_needed(&ctx, &cfg, bud.k, nd.len())).sum();
        let mut down = vec![0u8; total];
        ch.recv_chunked_into("HE linear layer: server response", &mut down)?;
        if cfg.mod_switch {
            // every response has a public length: decrypt them in parallel
            let fixed = bytes_down_fixed(&ctx, &cfg, bud.k);
            let mut parts = Vec::with_capacity(needed.len());
            let mut rest = &down[..];
            for nd in needed {
                let (head, r) = rest.split_at(fixed + bytes_down_needed(&ctx, &cfg, bud.k, nd.len()));
                parts.push((nd, head));
                rest = r;
            }
            let (sk, ctx) = (&self.sk, &ctx);
            let outs: Vec<Vec<u64>> = parts
                .into_par_iter()
                .map(|(nd, part)| {
                    let bound = 1u64 << bud.k; // k ≤ 63 (budget)
                    let (a, r) = unpack(part, ctx.n, bud.k, bound, "HE response: a")?;
                    let (b, _) = unpack(r, nd.len(), bud.k, bound, "HE response: b")?;
                    let idx: Vec<u32> = nd.iter().map(|p| p.0).collect();
                    Ok(sk.decrypt_switched(ctx, cfg.bits, bud.k, &a, &idx, &b))
                })
                .collect::<Result<_>>()?;
            for (nd, m) in needed.iter().zip(outs) {
                for (&(_, o), v) in nd.iter().zip(m) {
                    y[o as usize] = v;
                }
            }
            return Ok(());
        }
        let mut rest = &down[..];
        for nd in needed {
            let idx: Vec<u32> = nd.iter().map(|p| p.0).collect();
            {
                let mut a = Vec::with_capacity(ctx.poly_len());
                let mut r = rest;
                for (i, w) in residue_bits(&ctx).into_iter().enumerate() {
                    let (v, rr) = unpack(r, ctx.n, w, ctx.primes()[i], "HE response: a")?;
                    a.extend_from_slice(&v);
                    r = rr;
                }
                let l = ctx.levels();
                let mut b = vec![0u64; nd.len() * l];
                for (i, w) in residue_bits(&ctx).into_iter().enumerate() {
                    let (v, rr) = unpack(r, nd.len(), w, ctx.primes()[i], "HE response: b")?;
                    for (jj, x) in v.into_iter().enumerate() {
                        b[jj * l + i] = x;
                    }
                    r = rr;
                }
                rest = r;
                let phases = self.sk.phase_full(&ctx, &a, &idx, &b);
                for (&(_, o), ph) in nd.iter().zip(&phases) {
                    // m = round(2^ℓ·φ/q) mod 2^ℓ: the modulus switch to 2^ℓ
                    let mut tmp = vec![0u64; ctx.poly_len()];
                    for i in 0..l {
                        tmp[i * ctx.n] = ph[i];
                    }
                    let m = ctx.mod_switch_coeff(&tmp, 0, cfg.bits);
                    y[o as usize] = m;
                    if let Some(nv) = noise.as_deref_mut() {
                        let enc = ctx.encode(cfg.bits, &[m]);
                        let e0 = crate::ring::sub_mod(ph[0], enc[0], ctx.primes()[0]);
                        let e1 = crate::ring::sub_mod(ph[1], enc[ctx.n], ctx.primes()[1]);
                        nv.push(ctx.crt2_centered(e0, e1));
                    }
                }
            }
        }
        Ok(())
    }
}

impl HeServer {
    /// Receives the client's hello and public key; a parameter mismatch is an error.
    pub fn setup(ch: &mut dyn Channel, ctx: Arc<Context>, cfg: Config, prg: Prg) -> Result<HeServer> {
        budget(&ctx, &cfg, 1)?;
        let h = hello(&ctx, &cfg);
        let mut msg = vec![0u8; h.len() + SeededCt::wire_len(&ctx)];
        ch.recv_chunked_into("HE setup: hello and public key", &mut msg)?;
        if msg[..4] != h[..4] {
            return Err(Error::Malformed { what: "HE setup", why: "not an RLWE hello".into() });
        }
        if msg[..h.len()] != h[..] {
            return Err(Error::Mismatch(format!(
                "client's parameters (id {:?}, ℓ = {}, κ = {}, switch = {}, price {:?}) differ from ours (id {:?}, ℓ = {}, κ = {}, switch = {}, price {:?})",
                &msg[4..8],
                msg[8],
                msg[9],
                msg[10],
                &msg[11..15],
                &h[4..8],
                cfg.bits,
                cfg.flood_bits,
                cfg.mod_switch,
                &h[11..15]
            )));
        }
        let (pk, rest) = SeededCt::read(&ctx, &msg[h.len()..], "HE setup: public key")?;
        debug_assert!(rest.is_empty());
        Ok(HeServer { pk: PublicKey::from_seeded(&ctx, &pk), ctx, cfg, prg, flood: true })
    }

    /// **Insecure, tests only**: turns noise flooding off, so that the
    /// flooding test can show its statistic detects the weights without it.
    #[doc(hidden)]
    pub fn insecure_disable_flooding_for_tests(&mut self) {
        self.flood = false;
    }

    /// Server side of one layer: returns its share y_S = r_S.
    pub fn linear(&mut self, ch: &mut dyn Channel, shape: &Shape, weights: &[u64], x_s: &[u64]) -> Result<Vec<u64>> {
        shape.validate()?;
        if weights.len() != shape.weight_len() || x_s.len() != shape.in_len() {
            return Err(Error::Shape(format!(
                "weights/input share of {}/{} elements, the layer takes {}/{}",
                weights.len(),
                x_s.len(),
                shape.weight_len(),
                shape.in_len()
            )));
        }
        if let Some(d) = destride(shape) {
            let (mut xt, mut wt) = (d.input(shape, x_s), d.weights(shape, weights));
            let y = self.linear_stride1(ch, &d.inner, &wt, &xt);
            xt.zeroize();
            wt.zeroize();
            return y;
        }
        self.linear_stride1(ch, shape, weights, x_s)
    }

    fn linear_stride1(&mut self, ch: &mut dyn Channel, shape: &Shape, weights: &[u64], x_s: &[u64]) -> Result<Vec<u64>> {
        let ctx = self.ctx.clone();
        let cfg = self.cfg;
        let flood = self.flood;
        let (lay, bud) = plan(&ctx, &cfg, shape)?;
        if weights.len() != shape.weight_len() || x_s.len() != shape.in_len() {
            return Err(Error::Shape(format!(
                "weights/input share of {}/{} elements, the layer takes {}/{}",
                weights.len(),
                x_s.len(),
                shape.weight_len(),
                shape.in_len()
            )));
        }
        // input ciphertexts in NTT form: (b + encode(x_S), a), each upload batch
        // parsed and transformed in parallel as it arrives
        let bu = bytes_up(&ctx);
        let mut cts: Vec<(Vec<u64>, Vec<u64>)> = Vec::with_capacity(lay.in_cts());
        for batch in upload_batches(&lay) {
            let mut up = vec![0u8; batch.len() * bu];
            ch.recv_chunked_into("HE linear layer: client ciphertexts", &mut up)?;
            let (ctx, lay) = (&ctx, &lay);
            let first = batch.start;
            let part: Vec<(Vec<u64>, Vec<u64>)> = up
                .par_chunks(bu)
                .enumerate()
                .map(|(i, buf)| {
                    let idx = first + i;
                    let (ct, _) = SeededCt::read(ctx, buf, "HE linear layer: client ciphertext")?;
                    let mut a = ctx.uniform_from_seed(ct.seed);
                    let mut b = ct.b;
                    let mut xs = lay.input_poly(idx / lay.tiles, idx % lay.tiles, x_s);
                    let mut enc = ctx.encode(cfg.bits, &xs);
                    ctx.add_assign(&mut b, &enc);
                    xs.zeroize();
                    enc.zeroize();
                    ctx.ntt(&mut a);
                    ctx.ntt(&mut b);
                    Ok((b, a))
                })
                .collect::<Result<_>>()?;
            cts.extend(part);
        }
        let mut y_s = vec![0u64; shape.out_len()];
        let flooder = Flooder::new(&ctx, &bud);
        let flooder = &flooder;
        let sw = ctx.switcher(bud.k);
        let enc = ctx.encoder(cfg.bits);
        // rows are independent: computed in parallel (rayon), each with its
        // own PRG stream derived from one fresh per-layer seed
        let layer_seed = self.prg.random_block();
        let pk = &self.pk;
        let cts = &cts;
        let lay = &lay;
        // the response streams in batches of rows (public: [`response_batches`]),
        // each sent as soon as it is computed, so the link and the client's
        // decryption overlap the server's next batch
        for rows in response_batches(lay) {
            let per_row: Vec<(Vec<u8>, Vec<(u32, u64)>)> = rows
                .into_par_iter()
                .map(|r| {
                    let mut prg = Prg::with_nonce(layer_seed, r as u64);
                    let mut down = Vec::new();
                    let mut shares = Vec::new();
                    let mut acc: Vec<(Vec<u64>, Vec<u64>)> = (0..lay.tiles).map(|_| (ctx.zero(), ctx.zero())).collect();
                    let mut w = ctx.zero();
                    // the weight polynomial in coefficient form (|w| ≤ 2^{ℓ−1} < every
                    // prime, ℓ ≤ MAX_BITS), kept zero between groups by undoing its terms
                    let mut wc = vec![0i64; ctx.n];
                    let mut touched: Vec<u32> = Vec::new();
                    for g in 0..lay.groups {
                        lay.weight_terms(r, g, weights, cfg.bits, |pos, v| {
                            wc[pos] = v;
                            touched.push(pos as u32);
                        });
                        ctx.ntt_small(&wc, &mut w);
                        for &pos in &touched {
                            wc[pos as usize] = 0;
                        }
                        touched.clear();
                        for (t, (ab, aa)) in acc.iter_mut().enumerate() {
                            let (cb, ca) = &cts[g * lay.tiles + t];
                            ctx.mul_acc(ab, cb, &w);
                            ctx.mul_acc(aa, ca, &w);
                        }
                    }
                    w.zeroize();
                    wc.zeroize();
                    for (t, (mut b, mut a)) in acc.into_iter().enumerate() {
                        // re-randomise with a fresh Enc_pk(0): u·pk added in NTT
                        // form, its errors after the inverse transform
                        let (e1, e2) = pk.add_zero_ntt(&ctx, &mut prg, &mut b, &mut a);
                        ctx.intt(&mut b);
                        ctx.intt(&mut a);
                        ctx.add_signed(&mut b, &e1);
                        ctx.add_signed(&mut a, &e2);
                        let nd = lay.needed(r, t);
                        let fl = if flood { Some(flooder) } else { None };
                        finish_response(&ctx, &cfg, &bud, &sw, &enc, fl, &mut prg, &mut b, &a, &nd, &mut down, &mut shares);
                        b.zeroize();
                    }
                    (down, shares)
                })
                .collect();
            let mut down = Vec::with_capacity(per_row.iter().map(|r| r.0.len()).sum());
            for (bytes, shares) in per_row {
                down.extend_from_slice(&bytes);
                for (o, v) in shares {
                    y_s[o as usize] = v;
                }
            }
            ch.send_chunked(&down)?;
        }
        Ok(y_s)
    }
}
