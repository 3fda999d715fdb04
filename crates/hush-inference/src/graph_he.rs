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
//! joint computation is ā·b̄·2^ℓ: [`hush_2pc::interactive::bit_times_shared`]
//! with the client's bit ā and the server's value b̄·2^ℓ — one OT and
//! 2·64 + 1 bits per element each way, on the interactive context's COTs.
//!
//! **Views (semi-honest).** The HE part's views are Cheetah's (the server
//! sees ciphertexts under the client's key, pseudorandom under RLWE; the
//! client sees y_C = v − r_S with r_S fresh and uniform, and ciphertext noise
//! flooded by 2^κ, κ = 64, beyond its public bound: the argument and the
//! curious-client test are in `hush_rlwe::cheetah`). The client's bit a is a
//! function of y_C, the server's b of r_S; the lift's messages are
//! `bit_times_shared`'s vector-OLE corrections, uniform to the receiver (its
//! doc and `curious_parties_learn_nothing_from_the_provider_messages`).
//! The output shares are fresh (re-randomised by r_S and the OLE's pads), so
//! the step composes sequentially with the rest of the interactive run.
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
        let cfg = hush_rlwe::cheetah::Config::new(HE_BITS);
        let side = if server {
            HeSide::Server(Box::new(HeServer::setup(ch, ctx, cfg, prg).map_err(he_err("HE setup"))?))
        } else {
            HeSide::Client(Box::new(HeClient::setup(ch, ctx, cfg, prg).map_err(he_err("HE setup"))?))
        };
        Ok(GraphHe { side, bits: HE_BITS })
    }

    /// Wᵀ·Xᵀ over Z_2^64: `xt` is this party's share of Xᵀ (k × m, channel
    /// major), `wt` the server's Wᵀ (n × k, ring values; empty at the
    /// client). Returns this party's share of (X·W)ᵀ (n × m). `ctx` must be
    /// the interactive context (its COTs run the lift).
    pub fn apply(&mut self, ctx: &mut Ctx, ch: &mut dyn Channel, xt: &ArithShare, wt: &[u64], k: usize, m: usize, n: usize) -> Result<ArithShare> {
        let l = self.bits;
        let lm = (1u64 << l) - 1;
        if xt.len() != k * m {
            return Err(Error::Config(format!("HE linear: {} input elements for {k}×{m}", xt.len())));
        }
        let shape = Shape::Conv { c_in: k, h: 1, w: m, c_out: n, kh: 1, kw: 1, stride: [1, 1], pads: [0; 4] };
        let x: Vec<u64> = xt.v.iter().map(|v| v & lm).collect();
        let (y, server) = match &mut self.side {
            HeSide::Client(c) => (c.linear(ch, &shape, &x).map_err(he_err("HE linear layer"))?, false),
            HeSide::Server(s) => {
                if wt.len() != k * n {
                    return Err(Error::Config(format!("HE linear: {} weights for {n}×{k}", wt.len())));
                }
                let mut w: Vec<u64> = wt.iter().map(|v| v & lm).collect();
                let r = s.linear(ch, &shape, &w, &x).map_err(he_err("HE linear layer"));
                zeroize::Zeroize::zeroize(&mut w);
                (r?, true)
            }
        };
        if y.len() != n * m {
            return Err(Error::Protocol(format!("HE linear: {} outputs for {n}×{m}", y.len())));
        }
        Ok(ArithShare::new(xt.ring, lift(ctx, ch, &y, l, server)?))
    }
}

/// Shares mod 2^ℓ of v with |v| < 2^{ℓ−2} → shares of v over the context's
/// ring (Z_2^64); see the module doc for the argument.
pub fn lift(ctx: &mut Ctx, ch: &mut dyn Channel, y: &[u64], l: u32, server: bool) -> Result<Vec<u64>> {
    let ring = ctx.ring();
    if l < 3 || l >= ring.bits() {
        return Err(Error::Config(format!("lift from Z_2^{l} to Z_2^{}", ring.bits())));
    }
    let (top, quarter, lm) = (1u64 << l, 1u64 << (l - 2), (1u64 << l) - 1);
    let n = y.len();
    let (mut base, mut bits, mut vals) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    for &v in y {
        if v > lm {
            return Err(Error::Protocol(format!("HE linear: a share beyond 2^{l}")));
        }
        if server {
            let s = (v + quarter) & lm;
            let b = s >> (l - 1);
            base.push(ring.sub(ring.sub(s, top), quarter));
            bits.push(0);
            vals.push((1 - b) << l);
        } else {
            let a = v >> (l - 1);
            base.push(v);
            bits.push(1 - a);
            vals.push(0);
        }
    }
    let ot = ctx.ot_mut().ok_or_else(|| Error::Config("the HE linear backend needs the interactive context's COTs (no COT session here)".into()))?;
    let party = ot.party;
    let prod = hush_2pc::interactive::bit_times_shared(ot, ch, party, ring, &bits, &vals).map_err(|e| Error::Nonlinear(format!("HE lift: {e}")))?;
    Ok(base.iter().zip(&prod).map(|(a, b)| ring.add(*a, *b)).collect())
}

/// The server's check that every HE step's product fits Cheetah's ring:
/// |X·W| < 2^{ℓ−2} ulps (X's proven bound × W's largest column sum of
/// |w|, at 2^{2f}; an embedding's largest |table| at 2^f). Steps with
/// `he(i)` false are skipped. Errors name the value.
pub fn check_fits(p: &Program, frac: u32, he: impl Fn(usize) -> bool) -> Result<()> {
    let lim = (HE_BITS - 2) as f64;
    for (i, st) in p.steps.iter().enumerate() {
        if !he(i) {
            continue;
        }
        let (ulps, what) = match st {
            Step::Linear { x, n_in, n_out, w, .. } => {
                let col = (0..*n_out).map(|j| (0..*n_in).map(|t| w[t * n_out + j].abs()).sum::<f64>()).fold(0.0f64, f64::max);
                (p.slots[*x].bound * col * (2.0 * frac as f64).exp2(), "linear layer")
            }
            Step::Embed { table, .. } => (table.iter().fold(0.0f64, |m, v| m.max(v.abs())) * (frac as f64).exp2(), "embedding"),
            _ => continue,
        };
        if !(ulps.max(1.0).log2() < lim) {
            return Err(Error::Model(format!(
                "value '{}' ({what}): its product could reach 2^{:.1} ulps, beyond the HE backend's ring (|X·W| < 2^{lim} in Z_2^{HE_BITS}); use fewer fraction bits or another backend",
                p.slots[st.out()].name,
                ulps.log2()
            )));
        }
    }
    Ok(())
}
