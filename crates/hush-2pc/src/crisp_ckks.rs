//! # CRISP's linear layers with CKKS packing (CRISP §IV, Fig. 2; App. C)
//!
//! The `ckks` linear backend of the malicious-client mode. CRISP's idea is
//! kept: one ciphertext carries a **value in the real part and its MAC in
//! the imaginary part of the same slot**, so one homomorphic product with
//! the server's plaintext weights W yields both W·v and W·m. The RLWE side
//! (encoding, parameters, noise budget, flooding, the wire) is
//! [`hush_rlwe::ckks_crisp`]; read its docs for the complex packing
//! (v + X^(N/2)·m: X^(N/2) is i in every CKKS slot) and for why the scale
//! is the exact q/2^k rather than an approximate 2^40.
//!
//! **What is encrypted, and by whom (the change of issue 36).** CRISP's
//! Lin has the *client* encrypt its own shares (⟨x⟩_1, ⟨μx⟩_1) online and
//! the server multiply them by W. Here the HE product runs **offline on a
//! dealt, authenticated mask**, and the client's online input is a
//! **MAC-checked opening**, exactly as in the dealt backend
//! ([`crate::crisp::linear`]):
//! * *Offline, dealer* ([`crate::deal::crisp`], ops `CkksKey` and
//!   `CkksLin`): per inference an RLWE key (the client gets the seed of
//!   its secret key, the server the public key); per layer a uniform mask
//!   B with authenticated shares β_0 + β_1 = μ·B (client: B, β_1; server:
//!   β_0) and the ciphertexts Enc_sk(B + X^(N/2)·β_1) in the layer's layout,
//!   **made by the dealer and given to the server**.
//! * *Offline, server → client* ([`prepare`]): the server multiplies those
//!   ciphertexts by W, subtracts fresh uniform (R, R′) in the value and MAC
//!   halves, re-randomises (Enc_pk(0)) and floods, and sends the response;
//!   the client decrypts Y = W·B − R and T = W·β_1 − R′. The server keeps
//!   R and R′ + W·β_0. This is CRISP's Lin (one product gives the value
//!   and the MAC part), applied to the mask instead of the input.
//! * *Online* ([`lin`] = [`crate::crisp::linear`]): the client sends
//!   F = ⟨x̃⟩_1 − B; the server forms X′ = ⟨x̃⟩_0 + F, records the opening's
//!   MAC relation ⟨μx̃⟩_0 − β_0 − μX′ for the final check (the client
//!   ⟨μx̃⟩_1 − β_1), and outputs (W̃·X′ + R, μ·W̃·X′ + W̃·β_0 + R′); the client
//!   outputs (Y, T). They sum to W̃·(X′ + B) = W̃·x̃ and μ·W̃·X′ + W̃·μB =
//!   μ·W̃·x̃: values and MACs are right. The server adds the bias as b, μb.
//!   One one-way message of |x| elements, as in the dealt backend.
//!
//! ## No selective failure: the verdict is independent of W
//! **The gap this closes.** With the client encrypting its own shares, an
//! error (e_v, e_m) it put in its plaintext (a value-preserving
//! e_v = 2^ℓ or 2^(k−1), any e_m) reached the final check only as
//! W·(e_m − μ·e_v), so the check passed iff W annihilated it — a zero
//! column, two equal columns, an even column: one chosen predicate of W
//! per inference (issue 36). A zero-knowledge proof of plaintext knowledge
//! would not have stopped it (the client knows the plaintext it chose).
//!
//! **Claim.** For every client strategy the verdict is a function of the
//! client's deviations, μ and the check coefficients, and the deviations
//! are (up to statistical distance 2^−κ per layer, κ ≥ 40 the flooding
//! margin) independent of W; so the probability of passing is the same for
//! every W. **Why.** The client's inputs to this layer are
//! (i) the opening F, (ii) its output shares (Y, T). It contributes
//! nothing to the ciphertexts W is multiplied by: their plaintext (B, β_1)
//! is fixed by the dealer (trusted not to collude, as for every CRISP
//! correlation here) and they never pass through the client. (i) An error
//! e on F and e′ on its MAC share of x are caught at this opening as
//! e′ − μ·e, before W is applied; the server then multiplies W by the
//! *opened* X′ and computes the product's MAC itself from its own μ, so
//! the output carries a correct MAC of W̃·(X′ + B) whatever X′ was — no
//! term f(W, ·) of a client error reaches any check share (the argument of
//! [`crate::crisp`], "No selective failure", applies verbatim).
//! (ii) Errors it adds to Y, T are additive share errors, checked at the
//! next opening as (MAC error) − μ·(value error); they are functions of
//! its view, and its view of this layer is W-independent: Y, T are
//! uniform (R, R′ fresh), and the decrypted phases carry the weight-
//! dependent noise only under flooding 2^κ times larger (statistical
//! distance ≤ 2^−κ; [`hush_rlwe::ckks_crisp`], "What each party sees"),
//! whatever the client does with its secret key. This is the SPDZ2k rule
//! (Cramer et al., CRYPTO 2018: a client-influenced value enters a product
//! with a secret only after it is opened under a MAC that the batched final
//! check verifies, with coefficients drawn after every opening is fixed) and
//! the first check of Boyle et al. (BCGGIKR21) that CRISP Remark 5.1 drops.
//! The test `crisp_selective.rs` runs every deviation class of the dealt
//! backend's W-dependence test through this backend too.
//!
//! **The well-formedness gap is gone as well.** The client sends no
//! ciphertext at all, so the gap of [`hush_rlwe::ckks_crisp`]
//! ("Well-formedness": a raw polynomial φ added to a client ciphertext
//! revealing ≈ one bit of W·φ per coefficient) cannot be exercised through
//! this backend; it remains a property of the raw RLWE layer
//! (`Client::linear`), which this backend no longer uses.
//!
//! **Soundness** is the dealt backend's: every client message but δ and
//! ⟨q⟩_1 is an opening under a dealt authenticated mask, so a
//! value-changing deviation passes the check with probability
//! ≤ (s + 3)·2^−(s+2) ([`crate::crisp`], "Soundness").
//!
//! **Deviation from CRISP (stated).** CRISP's client encrypts online and
//! needs no dealer for the linear layers (and assumes a ZK proof of
//! plaintext knowledge, Fig. 2 footnote a, not built). Here the dealer —
//! which this mode already needs for μ and every gate key — makes the
//! ciphertexts, and the HE product moves offline. Costs: the dealer sends
//! the server one ciphertext (≈ 205 KB) per input polynomial and encrypts
//! it; the server's HE product and the response (server → client) are
//! offline; online is one message of |x| elements instead of the upload
//! of ciphertexts and the response. CRISP's t-tags (Fig. 2) are not
//! needed: the ciphertexts are honest by construction.
//!
//! ## What each party sees
//! * **Server**: the public key and the dealer's ciphertexts under a key
//!   it does not hold (pseudorandom under RLWE at the HE standard's
//!   128-bit parameters), β_0 (uniform), F (uniform: B fresh, client-only).
//!   Nothing about x.
//! * **Client**: its secret-key seed, B, β_1 (uniform, independent of μ),
//!   the response, whose a part is re-randomised by Enc_pk(0) and whose
//!   b part is flooded with F − log2 D ≥ 40 bits of margin: 2^−40-close to a
//!   simulation from (Y, T), which are uniform. Nothing about W or μ.
//! * **Dealer**: nothing online; it never sees W, x or a response. As for
//!   every dealt correlation, a dealer colluding with the server learns x
//!   (from B and F), one colluding with the client can forge MACs (μ).
//!
//! Untrusted bytes: the dealt shares are length- and range-checked, the
//! server parses the dealer's ciphertexts (every residue below its prime),
//! the client's parsing of the response checks lengths before allocating.
//! Errors never panic. Secrets (key seed, B, β, R, R′) are zeroized.

use crate::crisp::{AuthShare, LinBatch, LinShape, MaskBatch, Session};
use crate::deal::crisp::{take_values, CrispMac, CrispOp};
use crate::tee::Dealer;
use crate::{invalid, malformed, Result};
use hush_primitives::{Block, Prg};
use hush_rlwe::ckks_crisp::{self, Client, Config, Server};
use hush_rlwe::cheetah::Shape;
use hush_rlwe::Context;
use hush_transport::Channel;
use std::sync::Arc;
use zeroize::Zeroize;

/// One party's state of the CKKS linear layers of a session: the client's
/// secret key or the server's copy of the public key (both dealt).
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
    Ok(crate::deal::crisp::ckks_context()?)
}

/// Setup (once per session, offline, no message between the parties):
/// the epoch's RLWE key from the dealer — the client derives its secret
/// key from the dealt seed, the server receives the public key (checked).
pub fn setup(dealer: &mut Dealer, sess: &Session, ctx: Arc<Context>) -> Result<CkksLin> {
    let l = sess.lift;
    let cfg = Config::new(l.ell, l.k());
    let batch = dealer.next_batch();
    let mut bytes = dealer.deal(CrispMac::request(l.params(CrispOp::CkksKey, batch, sess.epoch), 1))?;
    let out = if sess.party == 1 {
        if bytes.len() != 16 {
            let n = bytes.len();
            bytes.zeroize();
            return Err(malformed("CRISP CKKS key seed", format!("{n} bytes, expected 16")));
        }
        let seed = Block::from_slice(&bytes);
        let sk = crate::deal::crisp::ckks_secret_key(&ctx, seed);
        CkksLin::Client(Box::new(Client::with_secret_key(ctx, cfg, sk, Prg::new(hush_primitives::rand::os_seed())).map_err(rlwe)?))
    } else {
        CkksLin::Server(Box::new(Server::with_public_key(ctx, cfg, &bytes, Prg::new(hush_primitives::rand::os_seed())).map_err(rlwe)?))
    };
    bytes.zeroize();
    Ok(out)
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

/// This party's dealt material of one CKKS linear layer (single use,
/// zeroized on drop): client B, β_1; server β_0 and the dealer-made input
/// ciphertexts Enc_sk(B + X^(N/2)·β_1).
pub struct CkksMask {
    pub party: crate::Party,
    pub lift: crate::crisp::Lift,
    pub epoch: u64,
    pub shape: LinShape,
    b: Vec<u128>,
    beta: Vec<u128>,
    cts: Vec<u8>,
}

impl Drop for CkksMask {
    fn drop(&mut self) {
        self.b.zeroize();
        self.beta.zeroize();
        self.cts.zeroize();
    }
}

/// Offline: this party's dealt mask and (server) ciphertexts of a CKKS
/// linear layer of `sh` (one dealing crossing; the dealer never sees W).
pub fn deal_lin(dealer: &mut Dealer, sess: &Session, ctx: &Context, sh: LinShape) -> Result<CkksMask> {
    let l = sess.lift;
    let k = l.k();
    let (_, il, _) = sh.lens().ok_or_else(|| invalid(format!("linear shape {sh:?} out of range")))?;
    let cfg = Config::new(l.ell, k);
    let ct_len = ckks_crisp::input_bytes(ctx, &cfg, &shape(&sh)).map_err(rlwe)?;
    let batch = dealer.next_batch();
    let mut bytes = dealer.deal(CrispMac::request(l.params(CrispOp::CkksLin(sh), batch, sess.epoch), 1))?;
    let parsed = (|| -> Result<CkksMask> {
        let mut rd = &bytes[..];
        let mut t = CkksMask { party: sess.party, lift: l, epoch: sess.epoch, shape: sh, b: Vec::new(), beta: Vec::new(), cts: Vec::new() };
        if sess.party == 1 {
            t.b = take_values(&mut rd, il, k)?;
            t.beta = take_values(&mut rd, il, k)?;
        } else {
            t.beta = take_values(&mut rd, il, k)?;
            if rd.len() < 8 || u64::from_le_bytes(rd[..8].try_into().expect("8 bytes")) != ct_len as u64 || rd.len() != 8 + ct_len {
                return Err(malformed("CRISP CKKS dealt ciphertexts", format!("{} bytes, expected 8 + {ct_len}", rd.len())));
            }
            t.cts = rd[8..].to_vec();
            rd = &[];
        }
        if !rd.is_empty() {
            return Err(malformed("CRISP CKKS layer mask", "trailing bytes"));
        }
        Ok(t)
    })();
    bytes.zeroize();
    parsed
}

/// Offline (input-independent): **the HE product on the dealt mask**. The
/// server passes its ℓ-bit weights `w` (for a Scale layer its per-channel
/// weights), the client `None`. The server multiplies the dealer's
/// ciphertexts by W and sends the flooded response (one server → client
/// flight); the result is a prepared triple for [`lin`]
/// ([`crate::crisp::linear`]): client (B, β_1, Y = W·B − R, T = W·β_1 − R′),
/// server (β_0, R, W̃·β_0 + R′).
pub fn prepare(ch: &mut dyn Channel, sess: &Session, he: &mut CkksLin, mask: CkksMask, w: Option<&[u64]>) -> Result<LinBatch> {
    sess.ensure_open()?;
    let l = sess.lift;
    if mask.party != sess.party || mask.lift != l || mask.epoch != sess.epoch {
        return Err(invalid("CKKS layer mask dealt for another party, lift or session (epoch)"));
    }
    let sh = mask.shape;
    let (wl, il, ol) = sh.lens().ok_or_else(|| invalid(format!("linear shape {sh:?} out of range")))?;
    let rs = shape(&sh);
    let mut mask = mask;
    match he {
        CkksLin::Client(c) => {
            if sess.party != 1 || w.is_some() {
                return Err(invalid("the client has no weights, and its session must be the client's"));
            }
            let (y, t) = c.receive(ch, &rs).map_err(rlwe)?;
            let (b, beta) = (std::mem::take(&mut mask.b), std::mem::take(&mut mask.beta));
            Ok(LinBatch::prepared_parts(1, l, sess.epoch, sh, b, beta, y, t))
        }
        CkksLin::Server(s) => {
            let w = w.ok_or_else(|| invalid("the server's weights are missing"))?;
            if sess.party != 0 || w.len() != wl {
                return Err(invalid(format!("{} weights for a layer of {wl}", w.len())));
            }
            let mut wfull = if matches!(sh, LinShape::Scale { .. }) { scale_weights(w) } else { w.to_vec() };
            let zi = vec![0u128; il];
            let zo = vec![0u128; ol];
            let r = s.respond(ch, &rs, &wfull, &zo, &zo, &zi, &zi, &mask.cts).map_err(rlwe);
            wfull.zeroize();
            let (rv, rm) = r?;
            // W̃·β_0 + R′ (W̃ the sign-extended lift of the ℓ-bit weights)
            let mut wt: Vec<u128> = w.iter().map(|&v| l.lift(v)).collect();
            let wb = sh.apply(&wt, &mask.beta, l.mask()).map_err(invalid);
            wt.zeroize();
            let mut wb = wb?;
            wb.iter_mut().zip(&rm).for_each(|(x, r)| *x = l.add(*x, *r));
            let mut rm = rm;
            rm.zeroize();
            let beta = std::mem::take(&mut mask.beta);
            Ok(LinBatch::prepared_parts(0, l, sess.epoch, sh, Vec::new(), beta, rv, wb))
        }
    }
}

/// Online: **Lin** — authenticated shares of W·x + b for the server's
/// private weights, on a triple from [`prepare`]: the checked opening of
/// [`crate::crisp::linear`] (one client → server message of |x|·⌈k/8⌉
/// bytes), then the server adds the bias (ℓ-bit ring elements per output;
/// `None`: no bias). The server passes `w` (ℓ-bit, as to [`prepare`]),
/// the client `None` for both.
pub fn lin(ch: &mut dyn Channel, sess: &mut Session, t: LinBatch, w: Option<&[u64]>, bias: Option<&[u64]>, x: &AuthShare) -> Result<AuthShare> {
    let l = sess.lift;
    if sess.party == 1 && (w.is_some() || bias.is_some()) {
        return Err(invalid("the client has no weights"));
    }
    let mut wt: Option<Vec<u128>> = w.map(|w| w.iter().map(|&v| l.lift(v)).collect());
    let y = crate::crisp::linear(ch, sess, t, wt.as_deref(), x);
    if let Some(v) = wt.as_mut() {
        v.zeroize();
    }
    let y = y?;
    match bias {
        Some(b) if sess.party == 0 => {
            let mut bl: Vec<u128> = b.iter().map(|&v| l.lift(v)).collect();
            let out = y.add_public(sess, &bl);
            bl.zeroize();
            out
        }
        _ => Ok(y),
    }
}

/// Online: **InitLin** — the client's input authenticated
/// ([`crate::crisp::input`]: one message δ = x − a) followed by [`lin`].
#[allow(clippy::too_many_arguments)]
pub fn init_lin(
    ch: &mut dyn Channel,
    sess: &mut Session,
    masks: &MaskBatch,
    x: Option<&[u64]>,
    t: LinBatch,
    w: Option<&[u64]>,
    bias: Option<&[u64]>,
) -> Result<AuthShare> {
    let a = crate::crisp::input(ch, sess, masks, x)?;
    lin(ch, sess, t, w, bias, &a)
}
