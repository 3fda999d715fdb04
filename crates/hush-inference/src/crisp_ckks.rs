//! Model-level inference against a **malicious client** with CRISP's own
//! linear layers (issue 14; CRISP §IV–V): the client's authenticated
//! shares go through [`hush_2pc::crisp_ckks`] — one ciphertext per input
//! polynomial carrying the value (real part) and its MAC (imaginary part),
//! one homomorphic product with the server's plaintext weights, the bias
//! as b + i·μb — and the nonlinear layers, truncations and the final
//! consistency check are those of [`crate::crisp_run`] (MAC-carrying FSS
//! gates dealt by the dealer). It is the opt-in linear backend of
//! `--mode malicious-client` (`--crisp-linear ckks`,
//! [`crate::crisp_run::LinearBackend::Ckks`]); the default is the
//! dealer-dealt bilinear triples (`dealt`), which have no well-formedness
//! gap (see below and [`hush_rlwe::ckks_crisp`]).
//!
//! **What it computes** is bit for bit the plaintext fixed-point
//! reference ([`crate::reference`]): the linear layers are exact on the
//! lifted ring (the scale is q/2^k: the CKKS error bound is 0 after
//! rounding, see [`hush_rlwe::ckks_crisp`]), the gates exact. Tests:
//! `tests_crisp.rs`.
//!
//! **Trust and views.** μ and every gate correlation come from the dealer
//! (independent party); the linear layers need no dealer at all — the
//! dealer never touches W. The server sees ciphertexts under the client's
//! fresh key (generated per inference, in the offline phase) and uniform
//! openings; the client sees flooded responses and uniform shares. The
//! client's ciphertexts are checked for syntax only; the exact gap (about
//! one bit of a chosen linear function of W per revealed coefficient and
//! inference for a client that sends malformed ciphertexts, with no ZK
//! proof of plaintext knowledge) is stated in [`hush_2pc::crisp_ckks`].
//!
//! **Phases.** *Offline*: the MAC key request (fresh μ), the client's key
//! pair and public key (client → server), every dealt gate. *Online*: the
//! client's input (InitLin = authenticated input + the first Lin), the
//! layers, the check and the release.
//!
//! **One model loop.** The phases are [`crate::crisp_run`]'s
//! ([`crate::crisp_run::offline_with`], [`crate::crisp_run::online`]): the
//! backend is a choice inside the linear step, so both backends take the
//! same steps (Concat included), are metered per step, and share their
//! tests of the loop. The functions here name the CKKS backend.

use crate::crisp_run::{self, CrispCost, LinearBackend, Offline};
use crate::model::Model;
use crate::plan::Plan;
use crate::Result;
use hush_2pc::tee::Dealer;
use hush_transport::Channel;

/// Offline phase with CKKS linear layers (server = 0 with a weighted
/// plan, client = 1): [`crisp_run::offline_with`].
pub fn offline(model: &Model, plan: &Plan, party: u8, ch: &mut dyn Channel, dealer: &mut Dealer, s: u32) -> Result<Offline> {
    crisp_run::offline_with(LinearBackend::Ckks, model, plan, party, ch, dealer, s)
}

/// Online phase: the client passes `Some(x)`, the server `None`
/// ([`crisp_run::online`]; the CKKS session is part of `off`).
pub fn online(plan: &Plan, ch: &mut dyn Channel, off: &mut Offline, x: Option<&[u64]>, log: &mut dyn FnMut(&str)) -> Result<Option<Vec<u64>>> {
    crisp_run::online(plan, ch, off, x, log)
}

/// One party end to end, with its costs ([`crisp_run::party_with`]).
#[allow(clippy::too_many_arguments)]
pub fn party(model: &Model, plan: &Plan, party: u8, ch: &mut dyn Channel, dealer: &mut Dealer, s: u32, x: Option<&[u64]>, log: &mut dyn FnMut(&str)) -> Result<(Option<Vec<u64>>, CrispCost)> {
    crisp_run::party_with(LinearBackend::Ckks, model, plan, party, ch, dealer, s, x, log)
}
