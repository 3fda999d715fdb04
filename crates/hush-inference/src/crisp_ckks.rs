//! Model-level inference against a **malicious client** with CRISP's
//! CKKS-packed linear layers (issue 14; CRISP §IV–V), built as
//! [`hush_2pc::crisp_ckks`]: per linear layer the dealer makes the
//! ciphertexts Enc(B + i·β_1) of an authenticated mask (value in the real
//! part, MAC in the imaginary part), the server multiplies them by its
//! plaintext weights once offline and returns the flooded product, and
//! online the client sends the same MAC-checked opening x − B as with the
//! dealt triples; the nonlinear layers, truncations and the final
//! consistency check are those of [`crate::crisp_run`]. It is the opt-in
//! linear backend of `--mode malicious-client` (`--crisp-linear ckks`,
//! [`crate::crisp_run::LinearBackend::Ckks`]); the default is the
//! dealer-dealt bilinear triples (`dealt`).
//!
//! **What it computes** is bit for bit the plaintext fixed-point
//! reference ([`crate::reference`]): the linear layers are exact on the
//! lifted ring (the scale is q/2^k: the CKKS error bound is 0 after
//! rounding, see [`hush_rlwe::ckks_crisp`]), the gates exact. Tests:
//! `tests_crisp.rs`.
//!
//! **Trust and views.** μ, every gate correlation, the RLWE key (the
//! client gets its secret-key seed, the server the public key) and every
//! layer's input ciphertexts come from the dealer (independent party; it
//! never touches W). The server sees ciphertexts under a key it does not
//! hold and uniform openings; the client sees flooded responses and
//! uniform shares. The client sends no ciphertext, so CRISP's missing
//! proof of plaintext knowledge leaves no gap here, and the check's
//! verdict is independent of W ([`hush_2pc::crisp_ckks`], "No selective
//! failure").
//!
//! **Phases.** *Offline*: the MAC key request (fresh μ), the RLWE key,
//! every dealt gate and layer mask, then per linear layer the server's HE
//! product (server → client). *Online*: the client's input, the layers
//! (one opening each), the check and the release.
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
