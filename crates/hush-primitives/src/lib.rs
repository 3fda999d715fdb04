//! # hush-primitives — the layer above transport
//!
//! Everything cryptographic that is not a protocol: 128-bit [`Block`]s,
//! fixed-key AES-128 with the CPU's AES instructions ([`aes`]), a PRG in
//! counter mode ([`prg`]), a PRF ([`prf`]), correlation-robust hashes for
//! deriving random OTs ([`hash`]), vectors over Z_2^ℓ ([`ring`]),
//! bit-packed Boolean vectors ([`bitvec`]), bit-matrix transposition
//! ([`transpose`]) and OS randomness plus zeroizing secrets ([`rand`]).
//!
//! SIMD code lives in small leaf modules; which variant runs is decided in
//! one place, [`simd::level`] (detected once, `HUSH_SIMD` to lower it), with
//! a portable fallback that always compiles (RustCrypto `aes`).

pub mod aes;
pub mod bitvec;
pub mod block;
pub mod cache;
pub mod gemm;
pub mod hash;
pub mod prf;
pub mod prg;
pub mod rand;
pub mod ring;
pub mod simd;
pub mod transpose;
pub mod wipe;

pub use bitvec::BitVec;
pub use block::Block;
pub use prg::Prg;
pub use ring::{Ring, RingVec};
