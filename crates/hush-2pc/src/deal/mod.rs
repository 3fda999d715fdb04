//! The two-party dealing kinds, described once here next to the protocols
//! that consume them (VISION.md "Trust modes"): Beaver and AND triples
//! ([`triples`], consumed by [`crate::beaver`]), TAMI-MPC's comparison
//! tables ([`tami`], consumed by [`crate::tami`]) and the transformer
//! operators' truncation pairs, power tuples, subset products and matrix
//! triples ([`trunc`], [`powers`], [`subset`], [`matrix`], consumed by [`crate::transformer`]); the FSS gate keys are
//! described in `hush_fss::deal` next to the gates; CRISP's offline phase
//! (MAC key, MAC-carrying ReLU keys, client masks; [`crisp`]) is consumed by
//! [`crate::crisp`]. Each is a pure function
//! from a seed-derived key and public parameters to one party's share
//! ([`hush_deal::Description`]); the trusted modules and the dealer service
//! serve them through [`kinds`], and the protocols ask for them through
//! [`crate::tee::Dealer`] without knowing which provider answers.
//!
//! Party 0 (the module role `Sender`) gets pure PRG streams; party 1's
//! share is derived from the full dealer output. Security: semi-honest.

pub mod crisp;
pub mod matrix;
pub mod powers;
pub mod subset;
pub mod tami;
pub mod triples;
pub mod trunc;

use hush_deal::Kinds;

/// Every two-party dealing kind, for the providers (modules, dealer).
pub fn kinds() -> Kinds {
    Kinds::new(&[&triples::ARITH_TRIPLES, &triples::BIT_TRIPLES, &tami::TAMI_TABLES, &tami::TAMI_TABLES_SWAPPED, &hush_fss::deal::FSS_KEYS,
        &trunc::TRUNC_PAIRS, &trunc::TRUNC_SQUARES, &trunc::TRUNC_MULS, &powers::POWER_TUPLES, &matrix::MATRIX_TRIPLES, &matrix::WEIGHT_TRIPLES,
        &subset::SUBSET_PRODUCTS, &crisp::CRISP_MAC])
}
