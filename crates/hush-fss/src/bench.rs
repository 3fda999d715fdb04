//! Throughput measurement for the CLI (`hush bench`) and the example
//! `fss_bench`: generate `n` keys from a fixed seed, convert them into the
//! evaluation layout (untimed), then time one party's batched evaluation on
//! one thread. Timing lives here, never in tests.

use crate::{dcf, gates, DcfKeyBatch};
use hush_primitives::{Block, Prg};
use std::time::Instant;

/// Which FSS evaluation to time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchKind {
    /// `bits`-bit DCF with a one-bit output.
    Dcf1,
    /// `bits`-bit DCF with a `bits`-bit output.
    Dcf,
    /// DReLU with a one-bit (XOR-shared) output.
    Drelu1,
    /// DReLU with a `bits`-bit arithmetic output.
    Drelu,
    /// ReLU (spline), output over Z_2^bits.
    Relu,
    /// Less-than with a one-bit output.
    Lt1,
}

impl BenchKind {
    pub const ALL: [BenchKind; 6] =
        [BenchKind::Dcf1, BenchKind::Dcf, BenchKind::Drelu1, BenchKind::Drelu, BenchKind::Relu, BenchKind::Lt1];
    pub fn name(self) -> &'static str {
        match self {
            BenchKind::Dcf1 => "dcf(out=1)",
            BenchKind::Dcf => "dcf(out=bits)",
            BenchKind::Drelu1 => "drelu(out=1)",
            BenchKind::Drelu => "drelu(out=bits)",
            BenchKind::Relu => "relu",
            BenchKind::Lt1 => "lt(out=1)",
        }
    }
}

/// One measurement.
#[derive(Clone, Copy, Debug)]
pub struct BenchResult {
    pub kind: BenchKind,
    pub n: usize,
    pub bits: u32,
    /// Seconds for one party's batched evaluation of all `n` keys.
    pub eval_secs: f64,
    /// Seconds to generate the `n` key pairs and convert one party's keys
    /// into the evaluation layout.
    pub gen_secs: f64,
    /// Bytes of one party's key.
    pub key_bytes: usize,
}

impl BenchResult {
    /// Evaluations per second (one party, one core).
    pub fn keys_per_sec(&self) -> f64 {
        self.n as f64 / self.eval_secs
    }
}

/// Times the batched evaluation of `n` keys of kind `kind` on `bits`-bit
/// inputs (best of `reps` runs). Panics if `bits` is not in 2..=64.
pub fn bench_kind(kind: BenchKind, n: usize, bits: u32, reps: usize) -> BenchResult {
    assert!((2..=64).contains(&bits), "bench: bits must be in 2..=64");
    let mut prg = Prg::new(Block(0x05ee_df55));
    let m = crate::mask(bits);
    let xs: Vec<u64> = (0..n).map(|_| prg.next_u64() & m).collect();
    let mut out = vec![0u64; n];
    let reps = reps.max(1);
    let mut scratch = vec![0u64; n];
    macro_rules! run {
        ($gen:expr, $prep:expr, $eval:expr, $size:expr) => {{
            let t = Instant::now();
            let keys: Vec<_> = (0..n).map(|_| $gen(&mut prg).0).collect();
            // Offline: conversion into the evaluation layout (untimed, like
            // the dealing in `hush bench nonlinear`).
            let batch = $prep(&keys[..]).expect("keys of one shape");
            let gen_secs = t.elapsed().as_secs_f64();
            let mut best = f64::INFINITY;
            for _ in 0..reps {
                let t = Instant::now();
                $eval(&batch, &xs[..], &mut out[..], &mut scratch[..]);
                best = best.min(t.elapsed().as_secs_f64());
            }
            std::hint::black_box(&out);
            BenchResult { kind, n, bits, eval_secs: best, gen_secs, key_bytes: $size }
        }};
    }
    match kind {
        BenchKind::Dcf1 | BenchKind::Dcf => {
            let ob = if kind == BenchKind::Dcf1 { 1 } else { bits };
            run!(
                |p: &mut Prg| {
                    let a = p.next_u64() & m;
                    dcf::dcf_gen(p, bits, a, 1, ob)
                },
                DcfKeyBatch::from_keys::<dcf::DcfKey>,
                |b: &DcfKeyBatch, x: &[u64], o: &mut [u64], _s: &mut [u64]| b.eval(0, x, o, None),
                dcf::DcfKey::size_bytes(bits, ob)
            )
        }
        BenchKind::Drelu1 | BenchKind::Drelu => {
            let ob = if kind == BenchKind::Drelu1 { 1 } else { bits };
            run!(
                |p: &mut Prg| {
                    let r = p.next_u64();
                    gates::drelu_gen(p, bits, r, 0, ob)
                },
                gates::DreluBatch::from_keys,
                |b: &gates::DreluBatch, x: &[u64], o: &mut [u64], _s: &mut [u64]| b.eval(0, x, o),
                gates::DreluKey::size_bytes(bits, ob)
            )
        }
        BenchKind::Relu => run!(
            |p: &mut Prg| {
                let r = p.next_u64();
                gates::relu_gen(p, bits, r, 0)
            },
            gates::ReluBatch::from_keys,
            |b: &gates::ReluBatch, x: &[u64], o: &mut [u64], s: &mut [u64]| b.eval(0, x, o, s),
            gates::ReluKey::size_bytes(bits)
        ),
        BenchKind::Lt1 => run!(
            |p: &mut Prg| {
                let r = p.next_u64();
                let c = p.next_u64() & m;
                gates::lt_gen(p, bits, r, c, 0, 1)
            },
            gates::LtBatch::from_keys,
            |b: &gates::LtBatch, x: &[u64], o: &mut [u64], s: &mut [u64]| b.eval(0, x, o, s),
            gates::LtKey::size_bytes(bits, 1)
        ),
    }
}

/// Seconds for one party to evaluate `n` ReLU keys on `bits`-bit inputs
/// (batched, one thread, best of 3): the headline number for the CLI.
pub fn bench_eval(n: usize, bits: u32) -> f64 {
    bench_kind(BenchKind::Relu, n, bits, 3).eval_secs
}
