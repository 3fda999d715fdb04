//! SilentFlow: the COT relation for every output at several sizes, one Δ per
//! session, statistical sanity of the choice bits, zero communication after
//! setup and h−1 module crossings per batch.

use hush_correlations::lpn::{LpnParams, FERRET_MAIN, LPN_B10, TEST_INSECURE};
use hush_correlations::silentflow::{share, stats, SilentReceiver, SilentSender};
use hush_correlations::{CorrelationSource, CotReceiver, CotSender};
use hush_primitives::{BitVec, Block, Prg};
use hush_tee::{InProcessModule, Module, OutOfProcessModule, TrustedModule};
use hush_transport::{Channel, MemChannel};
use std::thread;

fn module(seed: u64, party: u64) -> Box<dyn TrustedModule> {
    Box::new(InProcessModule::new(Module::with_rng(Prg::with_nonce(Block(seed as u128), party))))
}

fn setup(
    params: LpnParams,
    fused: bool,
    ms: Box<dyn TrustedModule>,
    mr: Box<dyn TrustedModule>,
) -> (SilentSender, SilentReceiver, MemChannel, MemChannel) {
    let (mut a, mut b) = MemChannel::pair();
    let h = thread::spawn(move || {
        let s = SilentSender::setup(&mut a, share(ms), params, fused).unwrap();
        (s, a)
    });
    let r = SilentReceiver::setup(&mut b, share(mr), params, fused).unwrap();
    let (s, a) = h.join().unwrap();
    (s, r, a, b)
}

/// Frequency (monobit) and runs tests (NIST SP 800-22 §2.1, §2.3) at the 1% level.
fn randomness_tests(bits: &BitVec) {
    let n = bits.len() as f64;
    let ones = bits.count_ones() as f64;
    let s = (2.0 * ones - n).abs() / n.sqrt();
    assert!(s < 2.576, "frequency test: |S|/sqrt(n) = {s}");
    let pi = ones / n;
    let mut runs = 1u64;
    for i in 1..bits.len() {
        runs += (bits.get(i) != bits.get(i - 1)) as u64;
    }
    let z = (runs as f64 - 2.0 * n * pi * (1.0 - pi)).abs() / (2.0 * (2.0 * n).sqrt() * pi * (1.0 - pi));
    assert!(z < 2.576, "runs test: z = {z}");
}

fn run_sizes(mut s: SilentSender, mut r: SilentReceiver, a: MemChannel, mut b: MemChannel, sizes: &[usize]) -> (SilentSender, SilentReceiver) {
    let delta = s.delta();
    let mut a = Some(a);
    let cost0 = b.cost();
    for &n in sizes {
        let mut ca = a.take().unwrap();
        let h = thread::spawn(move || {
            let mut q = vec![Block::ZERO; n];
            s.send_cots(&mut ca, &mut q).unwrap();
            (s, ca, q)
        });
        let mut ch = BitVec::zeros(0);
        let mut t = vec![Block::ZERO; n];
        r.recv_cots(&mut b, &mut ch, &mut t).unwrap();
        let (s2, ca, q) = h.join().unwrap();
        s = s2;
        a = Some(ca);
        assert_eq!(ch.len(), n);
        for i in 0..n {
            assert_eq!(t[i], q[i] ^ delta.and_bit(ch.get(i)), "n={n} i={i}");
        }
        assert_eq!(s.delta(), delta, "one Δ per session");
        if n >= 10_000 {
            randomness_tests(&ch);
        }
    }
    // No communication after setup.
    let c = b.cost() - cost0;
    assert_eq!((c.bytes_sent, c.bytes_recv, c.rounds), (0, 0, 0));
    (s, r)
}

#[test]
fn silent_cot_relation_small_params() {
    let (s, r, a, b) = setup(TEST_INSECURE, true, module(1, 0), module(1, 1));
    // usable per batch = 2560 - 300 = 2260; sizes straddle batch boundaries.
    let (s, r) = run_sizes(s, r, a, b, &[1, 63, 2260, 2261, 5000, 12_345, 1]);
    assert_eq!(s.produced(), r.produced());
}

#[test]
fn silent_unfused_matches_relation() {
    let (s, r, a, b) = setup(TEST_INSECURE, false, module(2, 0), module(2, 1));
    run_sizes(s, r, a, b, &[3000, 777]);
}

#[test]
fn silent_crossings_per_batch_are_h_minus_1() {
    for params in [TEST_INSECURE, LpnParams { name: "t", n: 7 << 9, k: 500, t: 7, h: 9, security_bits: 0 }] {
        let (s, r, a, b) = setup(params, true, module(3, 0), module(3, 1));
        let (ms, mr) = (s.module().clone(), r.module().clone());
        let (c0s, c0r) = (stats(&ms).crossings, stats(&mr).crossings);
        let usable = params.n - params.k;
        run_sizes(s, r, a, b, &[3 * usable]); // exactly 3 batches
        assert_eq!(stats(&mr).crossings - c0r, 3 * (params.h as u64 - 1), "{}", params.name);
        assert_eq!(stats(&ms).crossings - c0s, 3);
    }
}

#[test]
fn silent_full_parameter_set_one_batch() {
    let (s, r, a, b) = setup(FERRET_MAIN, true, module(4, 0), module(4, 1));
    let (s, r) = run_sizes(s, r, a, b, &[FERRET_MAIN.n - FERRET_MAIN.k]);
    assert_eq!(stats(s.module()).crossings, 3 + 1 + 1);
    assert_eq!(stats(r.module()).crossings, 3 + 1 + (FERRET_MAIN.h as u64 - 1));
}

#[test]
fn silent_default_parameter_set_across_batches() {
    // SilentFlow's default set (k = 2^16: 16-bit indices), three batches,
    // requests that straddle both batch boundaries.
    let p = LPN_B10;
    let (s, r, a, b) = setup(p, true, module(5, 0), module(5, 1));
    let usable = p.n - p.k;
    let (s, r) = run_sizes(s, r, a, b, &[usable - 1000, 2500, usable + 7]);
    assert_eq!(s.produced(), 2 * usable as u64 + 1507);
    assert_eq!(stats(r.module()).crossings, 3 + 1 + 3 * (p.h as u64 - 1));
    assert_eq!(stats(s.module()).crossings, 3 + 1 + 3);
}

#[test]
fn silent_power_of_two_k_small_params_fused_and_unfused() {
    let p = LpnParams { name: "t-pow2", n: 40 << 6, k: 256, t: 40, h: 6, security_bits: 0 };
    for fused in [true, false] {
        let (s, r, a, b) = setup(p, fused, module(6, 0), module(6, 1));
        run_sizes(s, r, a, b, &[1, 2303, 2304, 5000, 3]);
    }
}

#[test]
fn silent_out_of_process_modules() {
    // Built by `cargo test -p hush-tee` (or `cargo build -p hush-tee`); skipped otherwise.
    let Ok(p) = hush_tee::backend::module_binary() else {
        eprintln!("hush-tee-module not built; skipping");
        return;
    };
    let p = p.as_path();
    let ms = Box::new(OutOfProcessModule::spawn_path(p).unwrap());
    let mr = Box::new(OutOfProcessModule::spawn_path(p).unwrap());
    let (s, r, a, b) = setup(TEST_INSECURE, true, ms, mr);
    run_sizes(s, r, a, b, &[4000]);
}
