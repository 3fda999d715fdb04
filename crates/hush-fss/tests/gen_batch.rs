//! Batched key generation is byte-identical to one-at-a-time generation on
//! the same PRG stream (and leaves the PRG in the same state).

use hush_fss::*;
use hush_primitives::{Block, Prg};

fn vals(seed: u64, n: usize) -> Vec<u64> {
    let mut p = Prg::with_nonce(Block(0x5eed_0000 + seed as u128), 9);
    (0..n).map(|_| p.next_u64()).collect()
}

fn m(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

// Sizes crossing the internal chunk of 256 keys.
const SIZES: [usize; 4] = [0, 1, 7, 600];

#[test]
fn dcf_batch_matches_single() {
    for &bits in &[1u32, 2, 6, 7, 8, 9, 16, 32, 33, 63, 64] {
        for &ob in &[1u32, 2, 32, 64] {
            for &n in &SIZES {
                let alphas: Vec<u64> = vals(bits as u64, n).iter().map(|a| a & m(bits)).collect();
                let betas = vals(100 + ob as u64, n);
                let mut p1 = Prg::with_nonce(Block(77), 3);
                let mut p2 = Prg::with_nonce(Block(77), 3);
                let (b0, b1) = dcf_gen_batch(&mut p1, bits, &alphas, &betas, ob);
                assert_eq!(b0.len(), n);
                for j in 0..n {
                    let (s0, s1) = dcf_gen(&mut p2, bits, alphas[j], betas[j], ob);
                    assert_eq!(b0[j].to_bytes(), s0.to_bytes(), "bits {bits} out {ob} key {j}");
                    assert_eq!(b1[j].to_bytes(), s1.to_bytes(), "bits {bits} out {ob} key {j}");
                }
                assert_eq!(p1.next_u64(), p2.next_u64(), "PRG state after the batch");
            }
        }
    }
}

#[test]
fn dcf_batch_multi_matches_interleaved_single() {
    let n = 300;
    let a: Vec<u64> = vals(1, n).iter().map(|x| x & m(32)).collect();
    let b: Vec<u64> = a.iter().map(|x| x & m(12)).collect();
    let ba = vec![1u64 << 20; n];
    let bb = vec![m(32); n];
    let mut p1 = Prg::with_nonce(Block(5), 2);
    let mut p2 = Prg::with_nonce(Block(5), 2);
    let specs = [
        DcfBatchSpec { bits: 32, out_bits: 32, alphas: &a, betas: &ba },
        DcfBatchSpec { bits: 12, out_bits: 32, alphas: &b, betas: &bb },
    ];
    let r = dcf_gen_batch_multi(&mut p1, &specs).unwrap();
    for j in 0..n {
        let (x0, x1) = dcf_gen(&mut p2, 32, a[j], ba[j], 32);
        let (y0, y1) = dcf_gen(&mut p2, 12, b[j], bb[j], 32);
        assert_eq!(r[0].0[j].to_bytes(), x0.to_bytes());
        assert_eq!(r[0].1[j].to_bytes(), x1.to_bytes());
        assert_eq!(r[1].0[j].to_bytes(), y0.to_bytes());
        assert_eq!(r[1].1[j].to_bytes(), y1.to_bytes());
    }
    assert_eq!(p1.next_u64(), p2.next_u64());
}

#[test]
fn gate_batches_match_single() {
    for &bits in &[1u32, 2, 8, 9, 32, 33, 64] {
        for &n in &SIZES {
            let r_in = vals(bits as u64, n);
            let r_out = vals(1000 + bits as u64, n);
            let cs: Vec<u64> = vals(2000 + bits as u64, n).iter().map(|c| c & m(bits)).collect();
            for &ob in &[1u32, 16, 64] {
                let mut p1 = Prg::with_nonce(Block(11), 1);
                let mut p2 = Prg::with_nonce(Block(11), 1);
                let (b0, b1) = drelu_gen_batch(&mut p1, bits, &r_in, &r_out, ob);
                for j in 0..n {
                    let (s0, s1) = drelu_gen(&mut p2, bits, r_in[j], r_out[j], ob);
                    assert_eq!(b0[j].to_bytes(), s0.to_bytes());
                    assert_eq!(b1[j].to_bytes(), s1.to_bytes());
                }
                assert_eq!(p1.next_u64(), p2.next_u64());

                let (b0, b1) = lt_gen_batch(&mut p1, bits, &r_in, &cs, &r_out, ob);
                for j in 0..n {
                    let (s0, s1) = lt_gen(&mut p2, bits, r_in[j], cs[j], r_out[j], ob);
                    assert_eq!(b0[j].to_bytes(), s0.to_bytes());
                    assert_eq!(b1[j].to_bytes(), s1.to_bytes());
                }
                assert_eq!(p1.next_u64(), p2.next_u64());
            }
            let mut p1 = Prg::with_nonce(Block(12), 1);
            let mut p2 = Prg::with_nonce(Block(12), 1);
            let (b0, b1) = relu_gen_batch(&mut p1, bits, &r_in, &r_out);
            for j in 0..n {
                let (s0, s1) = relu_gen(&mut p2, bits, r_in[j], r_out[j]);
                assert_eq!(b0[j].to_bytes(), s0.to_bytes());
                assert_eq!(b1[j].to_bytes(), s1.to_bytes());
            }
            assert_eq!(p1.next_u64(), p2.next_u64());
        }
    }
}

#[test]
fn batch_keys_evaluate_correctly() {
    let n = 500;
    let bits = 16;
    let r_in = vals(3, n);
    let r_out = vec![0u64; n];
    let mut p = Prg::with_nonce(Block(3), 3);
    let (k0, k1) = drelu_gen_batch(&mut p, bits, &r_in, &r_out, 1);
    let xs = vals(4, n);
    for j in 0..n {
        let x = xs[j] & m(bits);
        let xh = x.wrapping_add(r_in[j]) & m(bits);
        let y = drelu_eval(0, &k0[j], xh) ^ drelu_eval(1, &k1[j], xh);
        assert_eq!(y, (x >> (bits - 1) == 0) as u64);
        // Round trip through the hostile-bytes decoder.
        assert_eq!(DreluKey::from_bytes(&k0[j].to_bytes()).unwrap().to_bytes(), k0[j].to_bytes());
    }
}

#[test]
fn batch_bad_params_draw_nothing() {
    let mut p1 = Prg::with_nonce(Block(1), 1);
    let p2_first = Prg::with_nonce(Block(1), 1).next_u64();
    assert!(try_dcf_gen_batch(&mut p1, 8, &[1, 256], &[1, 1], 1).is_err());
    assert!(try_dcf_gen_batch(&mut p1, 8, &[1], &[1, 1], 1).is_err());
    assert!(try_dcf_gen_batch(&mut p1, 0, &[0], &[1], 1).is_err());
    assert!(try_drelu_gen_batch(&mut p1, 8, &[1], &[], 1).is_err());
    assert!(try_lt_gen_batch(&mut p1, 8, &[1], &[256], &[0], 1).is_err());
    assert!(try_relu_gen_batch(&mut p1, 65, &[1], &[0]).is_err());
    assert_eq!(p1.next_u64(), p2_first);
}

/// Issue 35: the vectorised level loop (AVX-512 + VAES, four keys per
/// register; the scalar loop where the CPU lacks it) gives the keys of the
/// scalar level loop byte for byte, one-lane packed/unpacked and two-lane
/// (ReLU), random α with the edges 0 and 2^ℓ − 1 mixed in, ℓ = 1 included,
/// batch sizes around the vector group (4 and 8 keys) and the chunk (256).
#[test]
fn vector_gen_matches_scalar_gen() {
    for &bits in &[1u32, 2, 3, 8, 9, 17, 32, 33, 63, 64] {
        for &n in &[3usize, 8, 13, 64, 261] {
            let mut alphas: Vec<u64> = vals(3000 + bits as u64, n).iter().map(|a| a & m(bits)).collect();
            alphas[0] = 0;
            alphas[n - 1] = m(bits);
            if n > 5 {
                alphas[5] = m(bits);
                alphas[4] = 0;
            }
            for &ob in &[1u32, 2, 32, 64] {
                let betas = vals(4000 + ob as u64, n);
                let mut p1 = Prg::with_nonce(Block(91), 4);
                let mut p2 = Prg::with_nonce(Block(91), 4);
                let (v0, v1) = dcf_gen_batch(&mut p1, bits, &alphas, &betas, ob);
                let (s0, s1) = dcf::with_scalar_gen(|| dcf_gen_batch(&mut p2, bits, &alphas, &betas, ob));
                for j in 0..n {
                    assert_eq!(v0[j].to_bytes(), s0[j].to_bytes(), "bits {bits} out {ob} n {n} key {j} party 0");
                    assert_eq!(v1[j].to_bytes(), s1[j].to_bytes(), "bits {bits} out {ob} n {n} key {j} party 1");
                }
            }
            // Two lanes (the ReLU spline gate's DCF at ℓ − 1 bits).
            if bits >= 2 {
                let r_in = vals(5000 + bits as u64, n);
                let r_out = vals(6000 + bits as u64, n);
                let mut p1 = Prg::with_nonce(Block(92), 4);
                let mut p2 = Prg::with_nonce(Block(92), 4);
                let (v0, v1) = relu_gen_batch(&mut p1, bits, &r_in, &r_out);
                let (s0, s1) = dcf::with_scalar_gen(|| relu_gen_batch(&mut p2, bits, &r_in, &r_out));
                for j in 0..n {
                    assert_eq!(v0[j].to_bytes(), s0[j].to_bytes(), "relu bits {bits} n {n} key {j}");
                    assert_eq!(v1[j].to_bytes(), s1[j].to_bytes(), "relu bits {bits} n {n} key {j}");
                }
            }
        }
    }
}
