//! # CRISP's linear layers: InitLin and Lin (CRISP §IV, Fig. 2; App. C)
//!
//! The linear layers of inference against a malicious client as CRISP
//! builds them: the client encrypts its authenticated share under its own
//! key with the **value in the real part and the MAC in the imaginary part
//! of the same slot**, the server multiplies by its plaintext weights once
//! and gets both W·x and μ·W·x, adds the bias as b + i·μb, masks, floods,
//! and returns; both end with authenticated shares (⟨Wx + b⟩, ⟨μ(Wx + b)⟩)
//! on the lifted ring Z_2^k (k = ℓ + s) that feed the MAC-carrying gates
//! of [`crate::crisp`] and its final check. The RLWE side (encoding,
//! parameters, noise budget, flooding, the wire) is
//! [`hush_rlwe::ckks_crisp`]; read its docs for the complex packing
//! (v + X^(N/2)·m: X^(N/2) is i in every CKKS slot) and for why the scale
//! is the exact q/2^k rather than an approximate 2^40.
//!
//! * **InitLin** ([`init_lin`]): CRISP's client first obtains shares of
//!   μx "by multiplication triples or garbled circuits" and then encrypts
//!   x + i·⟨μx⟩_1. Here the first step is [`crate::crisp::input`] (a
//!   dealt mask a with shares of μa; the client sends δ = x − a): the
//!   client then holds (x̃, σ_1), the server (0, σ_0 + μδ), and Lin runs
//!   on these shares.
//! * **Lin** ([`lin`]): client → server Enc(⟨x̃⟩_1 + i·⟨μx̃⟩_1), the server
//!   adds Ecd(⟨x̃⟩_0 + i·⟨μx̃⟩_0) (CRISP: x' = c_1 + Ecd(⟨μx⟩_0·j)),
//!   multiplies by W, adds Ecd(b + i·μb − R − i·R') (App. C), re-randomises
//!   and floods; the client decrypts (Wx̃ + b − R, μ(Wx̃ + b) − R'), the
//!   server keeps (R, R'). One flight each way.
//!
//! **Deviation: no t-tags.** CRISP's Lin (Fig. 2) also makes the client
//! send Enc(Re⟨m⟩_1), Enc(Im⟨m⟩_1) and computes t = μ³·Re − μ²·Im to
//! check that the packed ciphertext agrees with the shares. hush does not
//! need them: its final check already covers every *opening* of every gate
//! and the output ([`crate::crisp`], "Soundness"), and whatever the client
//! puts in its ciphertext only adds an error, independent of μ, to the
//! shares this layer produces — value error W·e_v, MAC error W·e_m for
//! the client's (e_v, e_m) — which the next opening's check share
//! (MAC error − μ·value error) exposes exactly as for an altered share.
//! The server's side of the layer (its share, W, b, μb, R, R', the
//! flooding) is independent of the client's message, so the errors are
//! functions of the client's view and of W, never of μ (the client sees no
//! μ-dependent value: its decryptions are masked by fresh R, R'). The
//! server's μ-dependent inputs (its MAC share, μb) enter the response only
//! as multiples of Δ plus encoding roundings bounded by D, so even a
//! client that sends a malformed ciphertext and reads the flooded residual
//! (see below) sees them at statistical distance ≤ D/2^(F+1) ≈ 2^−66:
//! its errors stay independent of μ. The SPDZ2k bound of [`crate::crisp`]
//! applies unchanged.
//!
//! **Selective failure: not closed here** (issue 36). Soundness is not
//! privacy of the verdict: the client's errors (e_v, e_m) reach the check
//! only as W·(e_m − μ·e_v), so whether it passes depends on W. A
//! value-preserving e_v (a multiple of 2^ℓ, or 2^(k−1)) or any e_m on input
//! i passes iff W·e_i ≡ 0 — column i zero, two columns equal, a column
//! even — one chosen predicate of W per inference. CRISP's t-tags would
//! not stop it either (they compare the packed ciphertext with the
//! client's own shares, which the client chooses consistently). The dealt
//! backend ([`crate::crisp::linear`]) closes it by opening x − B under a
//! MAC before the product and authenticating the product at the server;
//! here the product's other operand is a client ciphertext, and the same
//! fix needs the ciphertext of the mask B to come from an honest party
//! (the dealer encrypting B + i·β_1 under a client key it deals) or a
//! proof that it encrypts the dealt B — neither is built. This backend
//! stays opt-in with both gaps named in its warning
//! (`hush_inference::crisp_run::CKKS_GAP_WARNING`).
//!
//! ## Where μ lives
//! μ is drawn per inference by the dealer and given to the server only
//! ([`crate::crisp::Session::start`]); this layer uses it once, to form the
//! bias MAC μ·b in the server's plaintext. The client never receives μ, μb
//! or anything that depends on them unmasked: its output shares are
//! uniform (R, R' fresh), its decryptions of the response are flooded.
//!
//! ## What each party sees
//! * **Server**: the client's public key and ciphertexts (seeded) —
//!   pseudorandom under RLWE at the HE standard's 128-bit parameters,
//!   whatever the client's shares are; its own shares. Nothing about x.
//! * **Honest client**: uniform output shares, and the response, whose a
//!   part is re-randomised by Enc_pk(0) and whose b part is flooded with
//!   F − log2 D ≥ 40 bits of margin (≈ 66 at ℓ = 37, s = 40): 2^−40-close
//!   to a simulation from its shares alone. Nothing about W, b or μ.
//! * **Malicious client**: the client's ciphertexts are checked for their
//!   syntax only (hello, lengths, every residue below its prime); no
//!   zero-knowledge proof of plaintext knowledge is built, so a client can
//!   add an arbitrary polynomial φ to its phase. Exactly what that allows
//!   ([`hush_rlwe::ckks_crisp`], "Well-formedness"): per revealed
//!   coefficient and inference, about one bit of a linear function of W
//!   of its choice **without failing the check** (statistical distance
//!   ≤ |W·φ|/2^(F+1) with |W·φ| < Δ/2), or a few bits (≤ log2(Δ/2^F) ≈ 3)
//!   in an inference the check then aborts. The test
//!   `malformed_ciphertext_gap_is_real_and_bounded` (hush-rlwe's
//!   `tests/ckks_crisp.rs`) plays that client and reads a weight's sign
//!   while its shares stay correct. The dealt layer ([`crate::crisp::linear`]) has no
//!   such gap (the client only ever sees uniformly masked W − A).
//!
//! Untrusted bytes: the server's parsing checks lengths before allocating
//! and ranges; the client's parsing of the response likewise. Errors never
//! panic.

use crate::crisp::{AuthShare, LinShape, MaskBatch, Session};
use crate::{invalid, malformed, Result};
use hush_primitives::{Block, Prg};
use hush_rlwe::ckks_crisp::{self, Client, Config, CtHook, Server};
use hush_rlwe::cheetah::Shape;
use hush_rlwe::Context;
use hush_transport::Channel;
use std::sync::Arc;
use zeroize::Zeroize;

/// One party's state of the CKKS linear layers of a session.
pub enum CkksLin {
    Client(Box<Client>),
    Server(Box<Server>),
}

fn rlwe(e: hush_rlwe::Error) -> crate::Error {
    match e {
        hush_rlwe::Error::Transport(t) => crate::Error::Transport(t),
        hush_rlwe::Error::Malformed { what, why } => malformed(what, why),
        e => invalid(format!("CRISP linear layer (CKKS): {e}")),
    }
}

/// The RLWE context of these layers (N = 8192, four 50-bit primes).
pub fn context() -> Result<Arc<Context>> {
    Ok(Arc::new(Context::new(ckks_crisp::params()).map_err(rlwe)?))
}

/// Setup (once per session, may run offline): the client generates its
/// key pair from `seed` (fresh OS randomness if `None`) and sends the
/// hello and its public key; the server receives them (a parameter
/// mismatch or malformed key is an error).
pub fn setup(ch: &mut dyn Channel, sess: &Session, ctx: Arc<Context>, seed: Option<Block>) -> Result<CkksLin> {
    let l = sess.lift;
    let cfg = Config::new(l.ell, l.k());
    let prg = Prg::new(seed.unwrap_or_else(hush_primitives::rand::os_seed));
    if sess.party == 1 {
        Ok(CkksLin::Client(Box::new(Client::setup(ch, ctx, cfg, prg).map_err(rlwe)?)))
    } else {
        Ok(CkksLin::Server(Box::new(Server::setup(ch, ctx, cfg, prg).map_err(rlwe)?)))
    }
}

/// The RLWE layer's shape of a CRISP linear shape (Scale becomes a 1×1
/// convolution with diagonal weights, see [`scale_weights`]).
pub fn shape(s: &LinShape) -> Shape {
    match *s {
        LinShape::Conv { c_in, h, w, c_out, kh, kw, stride, pads } => Shape::Conv {
            c_in: c_in as usize,
            h: h as usize,
            w: w as usize,
            c_out: c_out as usize,
            kh: kh as usize,
            kw: kw as usize,
            stride: [stride[0] as usize, stride[1] as usize],
            pads: pads.map(|p| p as usize),
        },
        LinShape::Dense { n_in, n_out } => Shape::Fc { n_in: n_in as usize, n_out: n_out as usize },
        LinShape::Scale { channels, inner } => {
            Shape::Conv { c_in: channels as usize, h: inner as usize, w: 1, c_out: channels as usize, kh: 1, kw: 1, stride: [1, 1], pads: [0; 4] }
        }
    }
}

/// A per-channel scale's weights as the diagonal of a 1×1 convolution.
pub fn scale_weights(w: &[u64]) -> Vec<u64> {
    let c = w.len();
    let mut out = vec![0u64; c * c];
    for (i, &v) in w.iter().enumerate() {
        out[i * c + i] = v;
    }
    out
}

/// Online: **Lin** — authenticated shares of W·x + b for the server's
/// private weights. The server passes `w` (ℓ-bit ring elements, the
/// layer's weights; for a Scale layer its per-channel weights) and `bias`
/// (ℓ-bit ring elements, per output; `None`: no bias), the client `None`
/// for both. One flight each way.
pub fn lin(ch: &mut dyn Channel, sess: &mut Session, he: &mut CkksLin, sh: &LinShape, w: Option<&[u64]>, bias: Option<&[u64]>, x: &AuthShare) -> Result<AuthShare> {
    lin_with(ch, sess, he, sh, w, bias, x, None)
}

/// As [`lin`], with a hook on the client's outgoing ciphertexts (a
/// malicious client in tests and the tamper trials; ignored at the server).
#[allow(clippy::too_many_arguments)]
pub fn lin_with(ch: &mut dyn Channel, sess: &mut Session, he: &mut CkksLin, sh: &LinShape, w: Option<&[u64]>, bias: Option<&[u64]>, x: &AuthShare, hook: Option<CtHook<'_>>) -> Result<AuthShare> {
    sess.ensure_open()?;
    let l = sess.lift;
    let (wl, il, ol) = sh.lens().ok_or_else(|| invalid(format!("linear shape {sh:?} out of range")))?;
    if x.len() != il || x.m.len() != il {
        return Err(invalid(format!("{} inputs for a linear layer of {il}", x.len())));
    }
    let rs = shape(sh);
    match he {
        CkksLin::Client(c) => {
            if sess.party != 1 || w.is_some() || bias.is_some() {
                return Err(invalid("the client has no weights, and its session must be the client's"));
            }
            let (v, m) = c.linear_with(ch, &rs, &x.v, &x.m, hook).map_err(rlwe)?;
            Ok(AuthShare { v, m })
        }
        CkksLin::Server(s) => {
            let w = w.ok_or_else(|| invalid("the server's weights are missing"))?;
            if sess.party != 0 || w.len() != wl {
                return Err(invalid(format!("{} weights for a layer of {wl}", w.len())));
            }
            let mut wfull = if matches!(sh, LinShape::Scale { .. }) { scale_weights(w) } else { w.to_vec() };
            let mu = sess.mac_key();
            let (mut b, mut bm) = (vec![0u128; ol], vec![0u128; ol]);
            if let Some(bias) = bias {
                if bias.len() != ol {
                    return Err(invalid(format!("{} biases for {ol} outputs", bias.len())));
                }
                for (i, &v) in bias.iter().enumerate() {
                    b[i] = l.lift(v);
                    bm[i] = l.mul(mu, b[i]);
                }
            }
            let r = s.linear(ch, &rs, &wfull, &b, &bm, &x.v, &x.m).map_err(rlwe);
            wfull.zeroize();
            b.zeroize();
            bm.zeroize();
            let (v, m) = r?;
            Ok(AuthShare { v, m })
        }
    }
}

/// Online: **InitLin** — the client's input authenticated
/// ([`crate::crisp::input`]: one message δ = x − a) followed by [`lin`].
#[allow(clippy::too_many_arguments)]
pub fn init_lin(
    ch: &mut dyn Channel,
    sess: &mut Session,
    he: &mut CkksLin,
    masks: &MaskBatch,
    x: Option<&[u64]>,
    sh: &LinShape,
    w: Option<&[u64]>,
    bias: Option<&[u64]>,
) -> Result<AuthShare> {
    let a = crate::crisp::input(ch, sess, masks, x)?;
    lin(ch, sess, he, sh, w, bias, &a)
}
