//! The graph runtime's **HE linear backend** ([`crate::graph_run::LinearBackend::He`]):
//! X·W with X additively shared over Z_2^64 and W the server's plaintext
//! weights, by Cheetah's HE protocol ([`hush_rlwe::cheetah`]; Huang et al.,
//! USENIX Security 2022, §4) — the client holds the secret key, the server
//! multiplies its plaintext W into the client's ciphertexts, re-randomises,
//! floods and returns the client's share; the server's share is its own
//! uniform r_S. Used by the `interactive` preset
//! ([`crate::graph_run::GraphOptions::interactive`]).
//!
//! **Layout.** A token-batch linear layer X (S tokens × C inputs) · W (C × M)
//! is Cheetah's 1×1 convolution of C channels over an 1 × S image with M
//! output channels (the planner picks the spatial or the interleaved
//! encoding, whichever sends fewer bytes); an embedding is the same with
//! the client's one-hot rows (C = vocabulary) as the input and the server's
//! share zero.
//!
//! **Two rings.** Cheetah's plaintext ring is Z_2^ℓ with ℓ ≤ 47 at N = 8192
//! (its modulus switch and flooding budget, `hush_rlwe::cheetah::MAX_BITS`),
//! the graph runtime's Z_2^64. The parties reduce their shares mod 2^ℓ
//! (local: shares of X mod 2^ℓ), run the HE product mod 2^ℓ, and lift the
//! result back to Z_2^64. The product v = X·W (at scale 2^{2f}; 2^f for an
//! embedding) is exact mod 2^ℓ, and the lift is exact, whenever
//! |v| < 2^{ℓ−2}; the server checks this from its weights before anything
//! runs ([`check_fits`], naming the value) — the graph runtime's own bound
//! (2^62) is wider, so a graph whose products are proven beyond 2^45 ulps is
//! refused in this preset.
//!
//! **The lift (signed extension with a known most significant bit; Rathee et
//! al., SIRNN, S&P 2021, §4.1 "extension with MSB known").** The client holds
//! y_C, the server r_S, y_C + r_S ≡ v (mod 2^ℓ). The server adds 2^{ℓ−2}:
//! s = r_S + 2^{ℓ−2} mod 2^ℓ, so y_C + s ≡ v' = v + 2^{ℓ−2} ∈ [0, 2^{ℓ−1}).
//! Over the integers y_C + s = v' + w·2^ℓ, and since the top bit of v' is
//! 0, the carry w is a ∨ b for a = msb(y_C), b = msb(s) (a = b: w = a; a ≠ b:
//! the top bit of the sum is a ⊕ b ⊕ c = 0 forces the carry-in c = 1, so
//! w = 1). So v = y_C + s − 2^ℓ − 2^{ℓ−2} + ā·b̄·2^ℓ over Z_2^64, and the only
//! joint computation is ā·b̄·2^ℓ. Each operand is one party's, and the term
//! is a multiple of 2^ℓ, so shares of ā·b̄ mod 2^{64−ℓ} suffice (scaled by
//! 2^ℓ, they are shares of ā·b̄·2^ℓ mod 2^64):
//! [`hush_2pc::interactive::extend_known_msb`] (its
//! `bit_times_private`: one party's bit times the other's bit, one OT, one
//! bit one way and 64 − ℓ = 17 bits the other per element, on the
//! interactive context's COTs). (Until 2026-11-29 the lift ran the
//! general `bit_times_shared` with each party's operand zero on the other
//! side: two OTs and 2·(2·64 + 1) bits per element, ~7× the corrections.)
//!
//! **Views (semi-honest).** The HE part's views are Cheetah's (the server
//! sees ciphertexts under the client's key, pseudorandom under RLWE; the
//! client sees y_C = v − r_S with r_S fresh and uniform, and ciphertext noise
//! flooded by 2^κ, κ = 64, beyond its public bound: the argument and the
//! curious-client test are in `hush_rlwe::cheetah`). The client's bit a is a
//! function of y_C, the server's b of r_S; the lift's messages are one
//! direction of a vector OLE: the client's derandomisation bits (masked by
//! fresh ROT choices) and the server's corrections, masked by the pads the
//! client did not choose (`bit_times_private`'s doc; the OLE's curious-party
//! test `curious_parties_learn_nothing_from_the_provider_messages`).
//! The output shares are fresh (re-randomised by r_S and the OLE's pads), so
//! the step composes sequentially with the rest of the interactive run.
//!
//! **Secret × secret products** ([`GraphHe::matmul_shared`]: attention's
//! Q·Kᵀ and P·V, both operands shared). With A = A_C + A_S and
//! B = B_C + B_S over Z_2^ℓ,
//! A·B = A·B_S + A_S·B_C + A_C·B_C, and each term is one of the products
//! above with the client's key: (1) A·B_S is Cheetah's product with the
//! input Aᵀ (the client encrypts A_C, the server adds A_S into the
//! ciphertexts as Cheetah does with its own input share) and the server's
//! share B_S as the "weights"; (2) A_S·B_C = (B_Cᵀ·A_Sᵀ)ᵀ with the client's
//! B_C as the input and the server's A_S as the weights; (3) A_C·B_C is the
//! client's own, computed locally. The sum mod 2^ℓ is lifted to Z_2^64 as
//! above (the product's proven bound must fit |A·B| < 2^{ℓ−2}:
//! [`shared_fits`]), then truncated by the caller. This is the
//! cross-term decomposition of Cheetah §4 applied to two shared operands
//! (as in CrypTFlow2/Cheetah's secure matrix products and BumbleBee, NDSS
//! 2025, §3, whose "OLE-style" packing makes the same two cross products);
//! BumbleBee's further ciphertext packing that shares one encrypted operand
//! between the two cross products is **not** implemented here: each cross
//! product is its own Cheetah 1×1-convolution layer. Cost per product: two
//! Cheetah layers (a few ciphertexts each for attention's shapes) and one
//! bit-OT per output element, against an OT matrix triple's 2·260·m·k·n
//! bytes; [`choose_shared`] picks per shape by a measured cost model.
//! **Views:** the server sees only ciphertexts under the client's key; the
//! client sees Cheetah's flooded responses, simulatable from its output
//! shares, which are re-randomised by the server's fresh r_S of each layer
//! (Cheetah's argument covers any weights in Z_2^ℓ, so it covers the
//! server's uniformly random shares B_S and A_S used as weights); the lift
//! is as above. The client's local product involves no message.
//! The reduction mod 2^ℓ is local. The bound check is the server's own
//! computation on its weights; it reveals at most that the program was
//! refused (the client already learns the bounds, rounded to powers of two).

use crate::{Error, Result};
use hush_2pc::share::ArithShare;
use hush_2pc::transformer::Ctx;
use hush_onnx::graph::{Program, Step};
use hush_primitives::Prg;
use hush_rlwe::cheetah::{HeClient, HeServer, Shape};
use hush_transport::Channel;
use std::sync::Arc;

/// Cheetah's plaintext ring width in the graph runtime (the largest
/// [`hush_rlwe::cheetah`] allows at N = 8192).
pub const HE_BITS: u32 = 47;
/// The embedding selection's plaintext ring ([`GraphHe::select`]): rows
/// are single table entries, |T|·2^f < 2^{28} ([`check_fits`]), so ℓ = 30
/// suffices, and its one-ciphertext flooding budget (F + ℓ + 4 = 145 bits)
/// fits the three-prime set [`SELECT_PARAMS`]: the table travels in 150 bits
/// per coefficient instead of 200 (BERT-base: 586 → 440 MB; since
/// 2026-11-29).
pub const SELECT_BITS: u32 = 30;
/// The planner's price of a server product in the graph runtime's HE
/// layers: **half** of `hush_rlwe::cheetah::layout_bytes_per_product`
/// (1 KiB at N = 8192 with four primes; since 2026-11-29). At BERT-base's
/// shapes it moves FFN1 (768 → 3072 over 128 tokens) from two tiles of
/// 64 tokens to one of 128 (192 → 110 uploads; 68.8 → 50.4 MB) and the
/// output projection to C_b = 9: 19.4 MB less per layer, 0.23 GB per run,
/// for 3,328 more polynomial products per layer (+2.7 %, ~0.2 s). The CNN
/// runtime keeps the default price.
pub fn he_price(ctx: &hush_rlwe::Context) -> u32 {
    (hush_rlwe::cheetah::layout_bytes_per_product(ctx) / 2) as u32
}
/// The embedding selection's parameter set (N = 8192, 3 × 50-bit primes).
pub const SELECT_PARAMS: &str = "he128-n8192-p50x3";

/// A party's side of the HE session.
pub enum HeSide {
    /// Holds the secret key.
    Client(Box<HeClient>),
    /// Holds the client's public key and the weights.
    Server(Box<HeServer>),
}

/// One party's HE linear layers for a graph session.
pub struct GraphHe {
    side: HeSide,
    bits: u32,
    /// The keys of the other direction (the server holds the secret key),
    /// made at the first embedding lookup ([`GraphHe::select`]).
    rev: Option<HeSide>,
    rev_prg: Option<Prg>,
}

fn he_err(what: &str) -> impl Fn(hush_rlwe::Error) -> Error + '_ {
    move |e| match e {
        hush_rlwe::Error::Transport(t) => Error::Transport(t),
        hush_rlwe::Error::Malformed { .. } | hush_rlwe::Error::Mismatch(_) => Error::Protocol(format!("{what}: {e}")),
        other => Error::Config(format!("{what}: {other}")),
    }
}

impl GraphHe {
    /// The session's RLWE keys: the client generates them and sends the
    /// public key (parameter set `params`, [`crate::he_linear::params_by_name`]).
    pub fn setup(ch: &mut dyn Channel, server: bool, params: &str, prg: Prg) -> Result<GraphHe> {
        let p = crate::he_linear::params_by_name(params)?;
        let ctx = Arc::new(hush_rlwe::Context::new(p).map_err(|e| Error::Config(e.to_string()))?);
        let cfg = hush_rlwe::cheetah::Config::new(HE_BITS).with_price(he_price(&ctx));
        let mut prg = prg;
        let rev_prg = Some(Prg::new(prg.random_block()));
        let side = if server {
            HeSide::Server(Box::new(HeServer::setup(ch, ctx, cfg, prg).map_err(he_err("HE setup"))?))
        } else {
            HeSide::Client(Box::new(HeClient::setup(ch, ctx, cfg, prg).map_err(he_err("HE setup"))?))
        };
        Ok(GraphHe { side, bits: HE_BITS, rev: None, rev_prg })
    }

    fn ctx_cfg(&self) -> (Arc<hush_rlwe::Context>, hush_rlwe::cheetah::Config) {
        match &self.side {
            HeSide::Client(c) => (c.ctx.clone(), c.cfg),
            HeSide::Server(s) => (s.ctx.clone(), s.cfg),
        }
    }

    /// Whether [`GraphHe::select`] takes rows of `width` entries (at most
    /// the ring degree).
    pub fn can_select(&self, width: usize) -> bool {
        hush_rlwe::cheetah::rows_per_ct(self.ctx_cfg().0.n, width).is_some()
    }

    /// **Embedding lookup by selection** (`hush_rlwe::cheetah::select`):
    /// shares over Z_2^64 of rows `ids` of the server's `table` (`rows` ×
    /// `width`, ring values; empty at the client), for `queries` lookups
    /// whose row indices only the client knows (`ids`, empty at the
    /// server), row-major (`queries` × `width`).
    ///
    /// The product one-hot × table as a linear layer costs the server one
    /// weight transform and product per (row block, channel block) — for
    /// BERT-base's 30,522 × 768 table at 128 tokens, 366,336 products, the
    /// largest single piece of an interactive run's server work. Here the
    /// server, holding a second secret key made for this (the reverse of
    /// the linear layers' keys: the client gets its public key in the
    /// same flight as the first table ciphertexts), encrypts the table once
    /// and the client rotates the ciphertext that holds each of its rows
    /// (`select_reader`); the shares mod 2^ℓ are then lifted as every HE
    /// layer's are ([`lift`]). Views: the selection's (the server sees
    /// flooded, re-randomised ciphertexts under its own key, the client
    /// ciphertexts under the server's key; doc of the rlwe module) and the
    /// lift's. Rows wider than a ciphertext are refused (`can_select`), and
    /// the caller keeps the linear layer for them.
    #[allow(clippy::too_many_arguments)]
    pub fn select(&mut self, ctx: &mut Ctx, ch: &mut dyn Channel, rows: usize, width: usize, table: &[u64], ids: &[u32], queries: usize, ring: hush_primitives::Ring) -> Result<ArithShare> {
        let (l, server) = (SELECT_BITS, self.is_server());
        let lm = (1u64 << l) - 1;
        if self.rev.is_none() {
            let p = crate::he_linear::params_by_name(SELECT_PARAMS)?;
            let hctx = Arc::new(hush_rlwe::Context::new(p).map_err(|e| Error::Config(e.to_string()))?);
            let cfg = hush_rlwe::cheetah::Config::new(SELECT_BITS);
            let prg = self.rev_prg.take().ok_or_else(|| Error::Config("HE selection: no key material left".into()))?;
            self.rev = Some(if server {
                HeSide::Client(Box::new(HeClient::setup(ch, hctx, cfg, prg).map_err(he_err("HE selection setup"))?))
            } else {
                HeSide::Server(Box::new(HeServer::setup(ch, hctx, cfg, prg).map_err(he_err("HE selection setup"))?))
            });
        }
        let y = match self.rev.as_mut().expect("set above") {
            HeSide::Client(owner) => {
                if table.len() != rows * width {
                    return Err(Error::Config(format!("HE selection: a table of {} entries for {rows} × {width}", table.len())));
                }
                let mut t: Vec<u64> = table.iter().map(|v| v & lm).collect();
                let r = owner.select_owner(ch, rows, width, &t, queries).map_err(he_err("HE embedding lookup"));
                zeroize::Zeroize::zeroize(&mut t);
                r?
            }
            HeSide::Server(reader) => {
                if ids.len() != queries {
                    return Err(Error::Config(format!("HE selection: {} row indices for {queries} lookups", ids.len())));
                }
                reader.select_reader(ch, rows, width, ids).map_err(he_err("HE embedding lookup"))?
            }
        };
        if y.len() != queries * width {
            return Err(Error::Protocol(format!("HE selection: {} outputs for {queries} × {width}", y.len())));
        }
        Ok(ArithShare::new(ring, lift(ctx, ch, &y, l)?))
    }

    /// Wᵀ·Xᵀ over Z_2^64: `xt` is this party's share of Xᵀ (k × m, channel
    /// major), `wt` the server's Wᵀ (n × k, ring values; empty at the
    /// client). Returns this party's share of (X·W)ᵀ (n × m). `ctx` must be
    /// the interactive context (its COTs run the lift).
    #[allow(clippy::too_many_arguments)]
    pub fn apply(&mut self, ctx: &mut Ctx, ch: &mut dyn Channel, xt: &ArithShare, wt: &[u64], k: usize, m: usize, n: usize) -> Result<ArithShare> {
        let y = self.apply_raw(ch, &xt.v, wt, k, m, n)?;
        Ok(ArithShare::new(xt.ring, lift(ctx, ch, &y, self.bits)?))
    }

    /// [`GraphHe::apply`] for a product whose bound is beyond the HE ring,
    /// **exactly**: the input truncated by `d` bits gives the high part
    /// v' = (X'·W)·2^d (fits, lifted), the full input the low part v mod 2^ℓ
    /// (not lifted), and (v mod 2^ℓ − v') mod 2^ℓ lifts exactly to v − v'
    /// ([`linear_shift`] keeps |v − v'| < 2^{ℓ−2}); the same construction as
    /// [`GraphHe::matmul_shared_wide`], with its views.
    ///
    /// **One HE layer and one lift for both parts.** Both parts multiply the
    /// same W, so X' and X go into one Cheetah layer as the input [X' | X]
    /// (k channels × 2m positions, each party's shares side by side): the
    /// server transforms each weight polynomial once for both when the
    /// planner tiles the positions (`hush_rlwe::cheetah::Layout`), and the
    /// parts take one flight each way instead of two. The correction's shares
    /// are formed before any lift: y' = X'·W mod 2^ℓ (shares) gives
    /// v' mod 2^ℓ = 2^d·y' mod 2^ℓ, so w = (y_low − 2^d·y') mod 2^ℓ are shares
    /// mod 2^ℓ of v − v' (|v − v'| < 2^{ℓ−2}), and y' and w are lifted
    /// together, in one call over 2·n·m elements. **Views:** one Cheetah layer
    /// on an input of 2m positions (its argument holds for any input and
    /// shape: the server sees ciphertexts under the client's key, the client
    /// a flooded response simulatable from its output share, re-randomised by
    /// the server's fresh r_S) and one lift (`bit_times_private`'s uniform
    /// corrections); the lift is exact for each element on its own, so
    /// lifting y' and w in one call changes nothing in its argument. The
    /// result is v = 2^d·lift(y') + lift(w) over Z_2^64, the same shares'
    /// sum as the two-layer version (tested against the plain reference:
    /// `interactive_matmul_on_he_and_on_triples_agree_with_the_reference`).
    #[allow(clippy::too_many_arguments)]
    pub fn apply_wide(&mut self, ctx: &mut Ctx, ch: &mut dyn Channel, xt: &ArithShare, wt: &[u64], k: usize, m: usize, n: usize, d: u32) -> Result<ArithShare> {
        if d == 0 {
            return self.apply(ctx, ch, xt, wt, k, m, n);
        }
        let (l, ring) = (self.bits, xt.ring);
        let lm = (1u64 << l) - 1;
        if xt.len() != k * m {
            return Err(Error::Config(format!("HE linear: {} input elements for {k}×{m}", xt.len())));
        }
        let x2 = ctx.trunc(ch, xt, d).map_err(|e| Error::Nonlinear(format!("HE linear: {e}")))?;
        // [X' | X]: channel t's 2m positions are X'[t][·] then X[t][·]
        let mut both = vec![0u64; k * 2 * m];
        for t in 0..k {
            both[t * 2 * m..t * 2 * m + m].copy_from_slice(&x2.v[t * m..(t + 1) * m]);
            both[t * 2 * m + m..(t + 1) * 2 * m].copy_from_slice(&xt.v[t * m..(t + 1) * m]);
        }
        let y = self.apply_raw(ch, &both, wt, k, 2 * m, n);
        zeroize::Zeroize::zeroize(&mut both);
        let mut y = y?;
        // y: n × 2m; per output row j, y'[j][·] then y_low[j][·]
        let mut two = vec![0u64; 2 * n * m];
        for j in 0..n {
            for i in 0..m {
                let (hi, lo) = (y[j * 2 * m + i], y[j * 2 * m + m + i]);
                two[j * m + i] = hi;
                two[n * m + j * m + i] = lo.wrapping_sub(hi.wrapping_mul(1u64 << d)) & lm;
            }
        }
        zeroize::Zeroize::zeroize(&mut y);
        let lifted = lift(ctx, ch, &two, l);
        zeroize::Zeroize::zeroize(&mut two);
        let lifted = lifted?;
        let (hi, diff) = lifted.split_at(n * m);
        Ok(ArithShare::new(ring, hi.iter().zip(diff).map(|(x, y)| ring.add(x.wrapping_mul(1u64 << d), *y)).collect()))
    }

    /// [`GraphHe::apply`] without the lift: this party's share of (X·W)ᵀ
    /// mod 2^ℓ (`xt` reduced mod 2^ℓ here).
    fn apply_raw(&mut self, ch: &mut dyn Channel, xt: &[u64], wt: &[u64], k: usize, m: usize, n: usize) -> Result<Vec<u64>> {
        let l = self.bits;
        let lm = (1u64 << l) - 1;
        if xt.len() != k * m {
            return Err(Error::Config(format!("HE linear: {} input elements for {k}×{m}", xt.len())));
        }
        let shape = conv_shape(k, m, n);
        let mut x: Vec<u64> = xt.iter().map(|v| v & lm).collect();
        let r = match &mut self.side {
            HeSide::Client(c) => c.linear(ch, &shape, &x).map_err(he_err("HE linear layer")),
            HeSide::Server(s) => {
                if wt.len() != k * n {
                    return Err(Error::Config(format!("HE linear: {} weights for {n}×{k}", wt.len())));
                }
                let mut w: Vec<u64> = wt.iter().map(|v| v & lm).collect();
                let r = s.linear(ch, &shape, &w, &x).map_err(he_err("HE linear layer"));
                zeroize::Zeroize::zeroize(&mut w);
                r
            }
        };
        zeroize::Zeroize::zeroize(&mut x);
        let y = r?;
        if y.len() != n * m {
            return Err(Error::Protocol(format!("HE linear: {} outputs for {n}×{m}", y.len())));
        }
        Ok(y)
    }

    /// Whether this party holds the weights (the server).
    pub fn is_server(&self) -> bool {
        matches!(self.side, HeSide::Server(_))
    }

    /// `count` products A_q·B_q of two **shared** matrices (A_q m×k, B_q
    /// k×n, row-major, concatenated): this party's shares of the exact
    /// products over Z_2^64, at the operands' scale product (untruncated),
    /// for |A_q·B_q| < 2^{ℓ−2} entry by entry (the caller checks this from
    /// proven bounds: [`shared_fits`]). See the module doc, "Secret ×
    /// secret products".
    #[allow(clippy::too_many_arguments)]
    fn matmul_shared_mod(&mut self, ch: &mut dyn Channel, a: &ArithShare, b: &ArithShare, count: usize, m: usize, k: usize, n: usize) -> Result<Vec<u64>> {
        let l = self.bits;
        let lm = (1u64 << l) - 1;
        if a.len() != count * m * k || b.len() != count * k * n {
            return Err(Error::Config(format!("HE matmul: {} and {} elements for {count} products {m}×{k}·{k}×{n}", a.len(), b.len())));
        }
        let server = self.is_server();
        let mut y = vec![0u64; count * m * n];
        for q in 0..count {
            let aq = &a.v[q * m * k..(q + 1) * m * k];
            let bq = &b.v[q * k * n..(q + 1) * k * n];
            // (1) (A·B_S)ᵀ = B_Sᵀ·Aᵀ: the input Aᵀ (k channels × m positions,
            //     both shares: Cheetah adds the server's), the server's
            //     "weights" B_Sᵀ (n × k)
            let mut at = vec![0u64; k * m];
            for i in 0..m {
                for t in 0..k {
                    at[t * m + i] = aq[i * k + t];
                }
            }
            let mut bst = if server {
                let mut w = vec![0u64; n * k];
                for t in 0..k {
                    for j in 0..n {
                        w[j * k + t] = bq[t * n + j];
                    }
                }
                w
            } else {
                Vec::new()
            };
            let y1 = self.apply_raw(ch, &at, &bst, k, m, n);
            zeroize::Zeroize::zeroize(&mut at);
            zeroize::Zeroize::zeroize(&mut bst);
            let y1 = y1?;
            // (2) A_S·B_C = ((B_Cᵀ)·(A_Sᵀ))ᵀ: the client's B_C is the input
            //     (k channels × n positions, row-major as it is; the server's
            //     input share zero), the server's A_S (m × k, as it is) the
            //     "weights"; the output (m × n) comes out row-major
            let (x2, w2): (Vec<u64>, &[u64]) = if server { (vec![0u64; k * n], aq) } else { (bq.to_vec(), &[]) };
            let mut x2 = x2;
            let y2 = self.apply_raw(ch, &x2, w2, k, n, m);
            zeroize::Zeroize::zeroize(&mut x2);
            let y2 = y2?;
            let yq = &mut y[q * m * n..(q + 1) * m * n];
            for i in 0..m {
                for j in 0..n {
                    yq[i * n + j] = y1[j * m + i].wrapping_add(y2[i * n + j]);
                }
            }
            if !server {
                // (3) the client's own A_C·B_C, locally
                for i in 0..m {
                    for t in 0..k {
                        let av = aq[i * k + t];
                        for j in 0..n {
                            yq[i * n + j] = yq[i * n + j].wrapping_add(av.wrapping_mul(bq[t * n + j]));
                        }
                    }
                }
            }
            yq.iter_mut().for_each(|v| *v &= lm);
        }
        Ok(y)
    }

    /// [`GraphHe::matmul_shared`] for products whose proven bound is beyond
    /// the HE ring, **exactly** (no precision lost): with A', B' the
    /// operands truncated by `da`, `db` bits ([`pre_shift`]), the parties
    /// compute v' = A'·B'·2^{da+db} over Z_2^64 (fits the ring, lifted), and
    /// v mod 2^ℓ from the full operands (not lifted); v − v' is small
    /// (|v − v'| < k·(|a|·2^{db} + 2^{da}·(|b| + 2^{db})) ulps, which
    /// `pre_shift` keeps below 2^{ℓ−2}), so (v mod 2^ℓ − v') mod 2^ℓ lifts
    /// exactly to v − v', and v = v' + (v − v'). Cost: two HE products, two
    /// lifts and the operands' two truncations. The views are those of the
    /// parts (each HE product's and each lift's, composed sequentially; the
    /// truncations' are uniform).
    #[allow(clippy::too_many_arguments)]
    pub fn matmul_shared_wide(&mut self, ctx: &mut Ctx, ch: &mut dyn Channel, a: &ArithShare, b: &ArithShare, count: usize, m: usize, k: usize, n: usize, da: u32, db: u32) -> Result<ArithShare> {
        let (l, ring) = (self.bits, a.ring);
        let lm = (1u64 << l) - 1;
        let t = |ctx: &mut Ctx, ch: &mut dyn Channel, x: &ArithShare, d: u32| if d > 0 { ctx.trunc(ch, x, d).map_err(|e| Error::Nonlinear(format!("HE matmul: {e}"))) } else { Ok(x.clone()) };
        let a2 = t(ctx, ch, a, da)?;
        let b2 = t(ctx, ch, b, db)?;
        let approx = self.matmul_shared(ctx, ch, &a2, &b2, count, m, k, n)?;
        let vp: Vec<u64> = approx.v.iter().map(|v| v.wrapping_mul(1u64 << (da + db))).collect();
        let mut low = self.matmul_shared_mod(ch, a, b, count, m, k, n)?;
        let w: Vec<u64> = low.iter().zip(&vp).map(|(x, y)| x.wrapping_sub(*y) & lm).collect();
        zeroize::Zeroize::zeroize(&mut low);
        let diff = lift(ctx, ch, &w, l)?;
        Ok(ArithShare::new(ring, vp.iter().zip(&diff).map(|(x, y)| ring.add(*x, *y)).collect()))
    }

    /// `count` shared products as in [`GraphHe::matmul_shared`], lifted.
    #[allow(clippy::too_many_arguments)]
    pub fn matmul_shared(&mut self, ctx: &mut Ctx, ch: &mut dyn Channel, a: &ArithShare, b: &ArithShare, count: usize, m: usize, k: usize, n: usize) -> Result<ArithShare> {
        let mut y = self.matmul_shared_mod(ch, a, b, count, m, k, n)?;
        let r = lift(ctx, ch, &y, self.bits);
        zeroize::Zeroize::zeroize(&mut y);
        Ok(ArithShare::new(a.ring, r?))
    }

    /// The predicted cost in seconds of `count` shared products
    /// m×k·k×n by [`GraphHe::matmul_shared`] (public: both parties derive
    /// it from the shape and parameters); see [`choose_shared`].
    pub fn shared_cost(&self, count: usize, m: usize, k: usize, n: usize) -> Result<f64> {
        let (ctx, cfg) = match &self.side {
            HeSide::Client(c) => (&c.ctx, &c.cfg),
            HeSide::Server(s) => (&s.ctx, &s.cfg),
        };
        let mut secs = 0.0;
        for (pos, out) in [(m, n), (n, m)] {
            let shape = conv_shape(k, pos, out);
            let (lay, _) = hush_rlwe::cheetah::plan(ctx, cfg, &shape).map_err(he_err("HE matmul plan"))?;
            let (up, down) = hush_rlwe::cheetah::layer_bytes(ctx, cfg, &shape).map_err(he_err("HE matmul plan"))?;
            let work = lay.products() + 4 * lay.out_cts() + 2 * lay.in_cts();
            secs += work as f64 * HE_SECS_PER_PRODUCT + (up + down) as f64 / LINK_BYTES_PER_SEC + 2.0 * FLIGHT_SECS;
        }
        Ok(count as f64 * secs + (count * m * n) as f64 * LIFT_SECS_PER_ELEMENT)
    }
}

/// Measured unit costs of the per-shape choice between HE and OT matrix
/// triples for secret × secret products ([`choose_shared`]), on this
/// repository's reference machine (2-core Xeon, AVX-512 IFMA, both parties
/// on it, loaded): one polynomial product of the server in Cheetah's
/// layout (≈ 35 µs of a core, [`hush_rlwe::cheetah::layout_bytes_per_product`]'s
/// figure, doubled for the client's encryption/decryption and the other
/// party sharing the cores).
pub const HE_SECS_PER_PRODUCT: f64 = 70e-6;
/// The link the costs assume (bytes per second; the LAN profile's 3 Gbps is
/// faster than the two parties' CPU can fill on one machine).
pub const LINK_BYTES_PER_SEC: f64 = 300e6;
/// One flight (a message and its wait) on the loaded 2-core machine.
pub const FLIGHT_SECS: f64 = 0.5e-3;
/// The lift's one bit-OT per output element (Ferret COT, one bit up and 64 − ℓ bits down).
pub const LIFT_SECS_PER_ELEMENT: f64 = 1.5e-6;
/// An OT matrix triple per multiply–add (both parties: 2·64 COTs per k·n
/// and 2·260 bytes per m·k·n; measured 16.7 s for MiniLM's 746,496
/// multiply–adds, `bench/records/graph-embed.jsonl`, load 5.4–7.7).
pub const OT_SECS_PER_MAC: f64 = 22e-6;

/// Which backend a secret × secret product of `count` m×k·k×n matrices
/// takes in the interactive preset: HE ([`GraphHe::matmul_shared`]) when
/// its result fits Cheetah's ring (`fits`) and the predicted cost is below
/// the OT matrix triples'; else OT triples. Public (shape, bounds,
/// parameters): both parties choose the same.
pub fn choose_shared(he: &GraphHe, fits: bool, count: usize, m: usize, k: usize, n: usize) -> Result<bool> {
    if !fits {
        return Ok(false);
    }
    let ot = (count * m * k * n) as f64 * OT_SECS_PER_MAC;
    Ok(he.shared_cost(count, m, k, n)? < ot)
}

/// Whether every entry of a product of k terms with operands within
/// `bx`, `by` (real units, scale 2^f each) fits the HE ring's lift:
/// k·bx·by·2^{2f} < 2^{ℓ−2}.
pub fn shared_fits(k: usize, bx: f64, by: f64, frac: u32) -> bool {
    let v = k as f64 * bx * by * (2.0 * frac as f64).exp2();
    v.is_finite() && v < ((HE_BITS - 2) as f64).exp2()
}

/// The input truncation d of an HE linear layer ([`GraphHe::apply_wide`])
/// from **public** bounds only, so that both parties derive it: the
/// input's bound `bx` and the output's `out` (real units; the program's
/// output bound of a linear layer is max_j Σ_i |w_ij|·bx + |b_j|, so
/// Σ_i |w_ij| ≤ out/bx and |X·W| ≤ out). 0 when out·2^{2f} fits the ring
/// (the plain product); else the least d < f with the truncated product
/// and the correction 2^d·Σ|w| (ulps) both below 2^{ℓ−2}; None if none.
pub fn linear_shift(bx: f64, out: f64, frac: u32) -> Option<u32> {
    let lim = ((HE_BITS - 2) as f64).exp2();
    let sf = (frac as f64).exp2();
    if !(out.is_finite() && bx.is_finite()) {
        return None;
    }
    if out * sf * sf < lim {
        return Some(0);
    }
    let col = out / bx.max(1.0 / sf); // ≥ every Σ_i |w_ij|
    (1..frac).find(|&d| {
        let dd = (d as f64).exp2();
        (bx * sf / dd + 1.0) * col * sf < lim && dd * col * sf < lim
    })
}

/// The split of a secret × secret product whose proven bound is beyond the
/// HE ring ([`GraphHe::matmul_shared_wide`]): (d_a, d_b) bits to drop from
/// copies of A and B so that (1) the product of the truncated copies fits
/// the ring ([`shared_fits`]) and (2) the correction v − v' between the
/// exact product and the scaled approximate one stays below 2^{ℓ−2} ulps.
/// (0, 0) when the product fits already; None when no split with
/// d_a + d_b < f does.
///
/// **Why.** The proven bounds of attention's Q and K are worst cases
/// (BERT-base's are 4096 each: k·|q|·|k| reaches 2^50 ulps at f = 10), far
/// above real activations, but the lift from Cheetah's ring needs the worst
/// case to fit 2^{ℓ−2}. The approximate product carries the high part and
/// the exact product mod 2^ℓ the low part; together they give the exact
/// product over Z_2^64 — no precision is lost (an earlier version of this
/// branch dropped the bits instead, and BERT-base's logits moved by ≈ 1).
pub fn pre_shift(k: usize, bx: f64, by: f64, frac: u32) -> Option<(u32, u32)> {
    let ulp = 1.0 / (frac as f64).exp2();
    let lim = ((HE_BITS - 2) as f64).exp2();
    for d in 0..frac {
        let (da, db) = (d.div_ceil(2), d / 2);
        let (x, y) = if d == 0 { (bx, by) } else { (bx / (da as f64).exp2() + ulp, by / (db as f64).exp2() + ulp) };
        // the wide product's correction |v − v'| (ulps at scale 2^{2f})
        let (ax, by_u) = (bx * (frac as f64).exp2(), by * (frac as f64).exp2());
        let corr = k as f64 * (ax * (db as f64).exp2() + (da as f64).exp2() * (by_u + (db as f64).exp2()));
        if shared_fits(k, x, y, frac) && (d == 0 || corr < lim) {
            return Some((da, db));
        }
    }
    None
}

/// [`pre_shift`] for a product whose own proven bound is `out` (real
/// units: the MatMul's output slot bound, public): the plain product
/// (0, 0) when min(k·bx·by, out)·2^{2f} fits the ring, else [`pre_shift`].
///
/// **Why it may use `out`.** The program's bound of a secret × secret
/// MatMul (`hush_onnx::graph`'s `matmul_bound`) is the smallest of
/// k·|A|·|B|, P·V's softmax row sum and Q·Kᵀ's Cauchy–Schwarz
/// bound |q·k| ≤ ‖q‖₂‖k‖₂, each a bound on the **exact** product of the
/// operands' fixed-point values before its truncation (the margin for the
/// truncation only makes it larger), rounded up to a power of two. The
/// lift needs exactly that product below 2^{ℓ−2} ulps at scale 2^{2f}.
/// Both parties read `out` from the public program, so they choose alike.
/// On BERT-base this makes Q·Kᵀ a plain HE product (it was the last wide
/// product per layer: 2^54 ulps by k·|Q|·|K| at f = 12).
pub fn pre_shift_bounded(k: usize, bx: f64, by: f64, out: f64, frac: u32) -> Option<(u32, u32)> {
    let general = k as f64 * bx * by;
    if out.is_finite() && out < general && shared_fits(1, out, 1.0, frac) {
        return Some((0, 0));
    }
    pre_shift(k, bx, by, frac)
}

fn conv_shape(k: usize, m: usize, n: usize) -> Shape {
    Shape::Conv { c_in: k, h: 1, w: m, c_out: n, kh: 1, kw: 1, stride: [1, 1], pads: [0; 4] }
}

/// Shares mod 2^ℓ of v with |v| < 2^{ℓ−2} → shares of v over the context's
/// ring (Z_2^64); see the module doc for the argument.
pub fn lift(ctx: &mut Ctx, ch: &mut dyn Channel, y: &[u64], l: u32) -> Result<Vec<u64>> {
    let ring = ctx.ring();
    if l < 3 || l >= ring.bits() {
        return Err(Error::Config(format!("lift from Z_2^{l} to Z_2^{}", ring.bits())));
    }
    if y.iter().any(|v| *v >= 1u64 << l) {
        return Err(Error::Protocol(format!("HE linear: a share beyond 2^{l}")));
    }
    if ctx.ot_mut().is_none() {
        return Err(Error::Config("the HE linear backend needs the interactive context's COTs (no COT session here)".into()));
    }
    ctx.extend_signed(ch, y, l).map_err(|e| Error::Nonlinear(format!("HE lift: {e}")))
}

/// The server's check that every HE step's product fits Cheetah's ring:
/// |X·W| < 2^{ℓ−2} ulps (X's proven bound × W's largest column sum of
/// |w|, at 2^{2f}; an embedding's largest |table| at 2^f). Steps with
/// `he(i)` false are skipped. Errors name the value.
pub fn check_fits(p: &Program, frac: u32, he: impl Fn(usize) -> bool) -> Result<()> {
    for (i, st) in p.steps.iter().enumerate() {
        if !he(i) {
            continue;
        }
        let (ulps, what, bits) = match st {
            Step::Linear { x, n_in, n_out, w, .. } => {
                // the public shift (linear_shift: 0, or the wide product's input
                // truncation), checked against the weights themselves
                let col = (0..*n_out).map(|j| (0..*n_in).map(|t| w[t * n_out + j].abs()).sum::<f64>()).fold(0.0f64, f64::max);
                let sf = (frac as f64).exp2();
                let full = p.slots[*x].bound * col * sf * sf;
                let ulps = match linear_shift(p.slots[*x].bound, p.slots[st.out()].bound, frac) {
                    Some(0) | None => full,
                    Some(d) => {
                        let dd = (d as f64).exp2();
                        ((p.slots[*x].bound * sf / dd + 1.0) * col * sf).max(dd * col * sf)
                    }
                };
                (ulps, "linear layer", HE_BITS)
            }
            // the selection's ring ([`SELECT_BITS`]; the linear path's is wider)
            Step::Embed { table, .. } => (table.iter().fold(0.0f64, |m, v| m.max(v.abs())) * (frac as f64).exp2(), "embedding", SELECT_BITS),
            _ => continue,
        };
        let lim = (bits - 2) as f64;
        if !(ulps.max(1.0).log2() < lim) {
            return Err(Error::Model(format!(
                "value '{}' ({what}): its product could reach 2^{:.1} ulps, beyond the HE backend's ring (|X·W| < 2^{lim} in Z_2^{bits}); use fewer fraction bits or another backend",
                p.slots[st.out()].name,
                ulps.log2()
            )));
        }
    }
    Ok(())
}
