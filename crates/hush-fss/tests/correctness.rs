//! Correctness of DCF and the gates against plaintext, over several ring
//! sizes, exhaustively for 8 bits; scalar and batched evaluation agree; keys
//! survive a byte round trip.

use hush_fss::{
    dcf_eval, dcf_eval_batch, dcf_gen, drelu_eval, drelu_eval_batch, drelu_gen, lt_eval, lt_eval_batch, lt_gen,
    relu_eval, relu_eval_batch, relu_gen, DcfKey, DcfKeyBatch, DreluBatch, DreluKey, LtBatch, LtKey, ReluBatch, ReluKey,
};
use hush_primitives::{Block, Prg};

fn mask(bits: u32) -> u64 {
    if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

fn signed(x: u64, bits: u32) -> i64 {
    let s = 64 - bits;
    ((x << s) as i64) >> s
}

/// Inputs worth checking for a `bits`-bit ring around the points `pts`.
fn edge_values(bits: u32, pts: &[u64], prg: &mut Prg, random: usize) -> Vec<u64> {
    let m = mask(bits);
    let mut v = vec![0, 1, 2, m, m - 1, m >> 1, (m >> 1) + 1, (m >> 1).wrapping_sub(1)];
    for &p in pts {
        for d in [0u64, 1, 2, u64::MAX, u64::MAX - 1] {
            v.push(p.wrapping_add(d) & m);
        }
    }
    for _ in 0..random {
        v.push(prg.next_u64() & m);
    }
    v
}

// ------------------------------------------------------------------ DCF

fn check_dcf(prg: &mut Prg, bits: u32, out_bits: u32, alpha: u64, beta: u64, xs: &[u64]) {
    let (k0, k1) = dcf_gen(prg, bits, alpha, beta, out_bits);
    let om = mask(out_bits);
    let mut o0 = vec![0; xs.len()];
    let mut o1 = vec![0; xs.len()];
    dcf_eval_batch(0, &[], &[], &mut []);
    let keys0 = vec![k0.clone(); xs.len()];
    let keys1 = vec![k1.clone(); xs.len()];
    dcf_eval_batch(0, &keys0, xs, &mut o0);
    dcf_eval_batch(1, &keys1, xs, &mut o1);
    for (i, &x) in xs.iter().enumerate() {
        let want = if x < alpha { beta & om } else { 0 };
        assert_eq!(o0[i].wrapping_add(o1[i]) & om, want, "bits={bits} out={out_bits} α={alpha} x={x}");
        assert!(o0[i] <= om && o1[i] <= om);
    }
    // Scalar path agrees with the batch on a few points.
    for (i, &x) in xs.iter().enumerate().step_by(xs.len() / 7 + 1) {
        assert_eq!(dcf_eval(0, &k0, x), o0[i]);
        assert_eq!(dcf_eval(1, &k1, x), o1[i]);
    }
}

#[test]
fn dcf_exhaustive_8_bits() {
    let mut prg = Prg::new(Block(1));
    let xs: Vec<u64> = (0..256).collect();
    for out_bits in [1u32, 8, 64] {
        for alpha in 0..256u64 {
            let beta = prg.next_u64();
            check_dcf(&mut prg, 8, out_bits, alpha, beta, &xs);
        }
    }
}

#[test]
fn dcf_small_domains_exhaustive() {
    let mut prg = Prg::new(Block(11));
    for bits in 1..=5u32 {
        let xs: Vec<u64> = (0..1u64 << bits).collect();
        for alpha in 0..1u64 << bits {
            for out_bits in [1u32, 3, 64] {
                let beta = prg.next_u64();
                check_dcf(&mut prg, bits, out_bits, alpha, beta, &xs);
            }
        }
    }
}

#[test]
fn dcf_random_and_edges_wide() {
    let mut prg = Prg::new(Block(2));
    for bits in [16u32, 32, 37, 64] {
        let m = mask(bits);
        let mut alphas = vec![0, 1, m, m - 1, m >> 1, (m >> 1) + 1];
        for _ in 0..6 {
            alphas.push(prg.next_u64() & m);
        }
        for out_bits in [1u32, 7, 32, 64] {
            for &alpha in &alphas {
                let xs = edge_values(bits, &[alpha], &mut prg, 40);
                let beta = prg.next_u64();
                check_dcf(&mut prg, bits, out_bits, alpha, beta, &xs);
            }
        }
    }
}

#[test]
fn dcf_batch_with_many_distinct_keys() {
    // Thousands of different keys in one batch (several AES chunks), mixed
    // with a chunk of odd-shaped keys (scalar fallback).
    let mut prg = Prg::new(Block(3));
    for (bits, out_bits) in [(32u32, 1u32), (32, 32), (37, 5)] {
        let n = 1000;
        let mut k0 = Vec::new();
        let mut k1 = Vec::new();
        let mut want = Vec::new();
        let mut xs = Vec::new();
        for i in 0..n {
            let (b, o) = if (600..620).contains(&i) { (9, 3) } else { (bits, out_bits) };
            let alpha = prg.next_u64() & mask(b);
            let x = if i % 3 == 0 { alpha } else { prg.next_u64() & mask(b) };
            let beta = prg.next_u64() & mask(o);
            let (a, c) = dcf_gen(&mut prg, b, alpha, beta, o);
            k0.push(a);
            k1.push(c);
            xs.push(x);
            want.push((if x < alpha { beta } else { 0 }, mask(o)));
        }
        let mut o0 = vec![0; n];
        let mut o1 = vec![0; n];
        dcf_eval_batch(0, &k0, &xs, &mut o0);
        dcf_eval_batch(1, &k1, &xs, &mut o1);
        for i in 0..n {
            assert_eq!(o0[i].wrapping_add(o1[i]) & want[i].1, want[i].0, "key {i}");
        }
    }
}

// ------------------------------------------------------------------ DReLU

fn check_drelu(prg: &mut Prg, bits: u32, out_bits: u32, r_in: u64, xs: &[u64]) {
    let r_out = prg.next_u64() & mask(out_bits);
    let (k0, k1) = drelu_gen(prg, bits, r_in, r_out, out_bits);
    let nm = mask(bits);
    let om = mask(out_bits);
    let xh: Vec<u64> = xs.iter().map(|&x| x.wrapping_add(r_in) & nm).collect();
    let mut o0 = vec![0; xs.len()];
    let mut o1 = vec![0; xs.len()];
    drelu_eval_batch(0, &vec![k0.clone(); xs.len()], &xh, &mut o0);
    drelu_eval_batch(1, &vec![k1.clone(); xs.len()], &xh, &mut o1);
    for (i, &x) in xs.iter().enumerate() {
        let d = (signed(x, bits) >= 0) as u64;
        assert_eq!(
            o0[i].wrapping_add(o1[i]) & om,
            d.wrapping_add(r_out) & om,
            "bits={bits} out={out_bits} r_in={r_in} x={x}"
        );
    }
    for (i, &x) in xh.iter().enumerate().step_by(xs.len() / 5 + 1) {
        assert_eq!(drelu_eval(0, &k0, x), o0[i]);
        assert_eq!(drelu_eval(1, &k1, x), o1[i]);
    }
}

#[test]
fn drelu_exhaustive_8_bits() {
    let mut prg = Prg::new(Block(4));
    let xs: Vec<u64> = (0..256).collect();
    let mut masks = vec![0u64, 1, 127, 128, 129, 255];
    for _ in 0..10 {
        masks.push(prg.next_u64() & 255);
    }
    for out_bits in [1u32, 8, 32] {
        for &r in &masks {
            check_drelu(&mut prg, 8, out_bits, r, &xs);
        }
    }
}

#[test]
fn drelu_tiny_rings_exhaustive() {
    let mut prg = Prg::new(Block(44));
    for bits in 1..=4u32 {
        let xs: Vec<u64> = (0..1u64 << bits).collect();
        for r in 0..1u64 << bits {
            check_drelu(&mut prg, bits, 1, r, &xs);
            check_drelu(&mut prg, bits, 16, r, &xs);
        }
    }
}

#[test]
fn drelu_random_and_edges_wide() {
    let mut prg = Prg::new(Block(5));
    for bits in [16u32, 32, 37, 64] {
        let nm = mask(bits);
        let half = nm >> 1; // max positive
        let mut masks = vec![0, 1, nm, half, half + 1];
        for _ in 0..4 {
            masks.push(prg.next_u64() & nm);
        }
        for &r in &masks {
            // 0, ±1, min, max and the inputs where x + r wraps (x = −r, −r ± 1).
            let neg_r = r.wrapping_neg() & nm;
            let xs = edge_values(bits, &[0, half, half + 1, neg_r, nm], &mut prg, 40);
            for out_bits in [1u32, bits] {
                check_drelu(&mut prg, bits, out_bits, r, &xs);
            }
        }
    }
}

// ------------------------------------------------------------------ ReLU

fn check_relu(prg: &mut Prg, bits: u32, r_in: u64, xs: &[u64]) {
    let nm = mask(bits);
    let r_out = prg.next_u64() & nm;
    let (k0, k1) = relu_gen(prg, bits, r_in, r_out);
    let xh: Vec<u64> = xs.iter().map(|&x| x.wrapping_add(r_in) & nm).collect();
    let mut o0 = vec![0; xs.len()];
    let mut o1 = vec![0; xs.len()];
    relu_eval_batch(0, &vec![k0.clone(); xs.len()], &xh, &mut o0);
    relu_eval_batch(1, &vec![k1.clone(); xs.len()], &xh, &mut o1);
    for (i, &x) in xs.iter().enumerate() {
        let relu = if signed(x, bits) >= 0 { x & nm } else { 0 };
        assert_eq!(o0[i].wrapping_add(o1[i]) & nm, relu.wrapping_add(r_out) & nm, "bits={bits} r_in={r_in} x={x}");
    }
    for (i, &x) in xh.iter().enumerate().step_by(xs.len() / 5 + 1) {
        assert_eq!(relu_eval(0, &k0, x), o0[i]);
        assert_eq!(relu_eval(1, &k1, x), o1[i]);
    }
}

#[test]
fn relu_exhaustive_8_bits() {
    let mut prg = Prg::new(Block(6));
    let xs: Vec<u64> = (0..256).collect();
    let mut masks = vec![0u64, 1, 127, 128, 129, 255];
    for _ in 0..20 {
        masks.push(prg.next_u64() & 255);
    }
    for &r in &masks {
        check_relu(&mut prg, 8, r, &xs);
    }
    for bits in 1..=4u32 {
        let xs: Vec<u64> = (0..1u64 << bits).collect();
        for r in 0..1u64 << bits {
            check_relu(&mut prg, bits, r, &xs);
        }
    }
}

#[test]
fn relu_random_and_edges_wide() {
    let mut prg = Prg::new(Block(7));
    for bits in [16u32, 32, 37, 63, 64] {
        let nm = mask(bits);
        let half = nm >> 1;
        let mut masks = vec![0, 1, nm, half, half + 1];
        for _ in 0..4 {
            masks.push(prg.next_u64() & nm);
        }
        for &r in &masks {
            let neg_r = r.wrapping_neg() & nm;
            let xs = edge_values(bits, &[0, half, half + 1, neg_r, nm], &mut prg, 40);
            check_relu(&mut prg, bits, r, &xs);
        }
    }
}

// ------------------------------------------------------------------ less-than

fn check_lt(prg: &mut Prg, bits: u32, out_bits: u32, r_in: u64, c: u64, xs: &[u64]) {
    let nm = mask(bits);
    let om = mask(out_bits);
    let r_out = prg.next_u64() & om;
    let (k0, k1) = lt_gen(prg, bits, r_in, c, r_out, out_bits);
    let xh: Vec<u64> = xs.iter().map(|&x| x.wrapping_add(r_in) & nm).collect();
    let mut o0 = vec![0; xs.len()];
    let mut o1 = vec![0; xs.len()];
    lt_eval_batch(0, &vec![k0.clone(); xs.len()], &xh, &mut o0);
    lt_eval_batch(1, &vec![k1.clone(); xs.len()], &xh, &mut o1);
    for (i, &x) in xs.iter().enumerate() {
        let want = ((x & nm) < c) as u64;
        assert_eq!(
            o0[i].wrapping_add(o1[i]) & om,
            want.wrapping_add(r_out) & om,
            "bits={bits} r_in={r_in} c={c} x={x}"
        );
    }
    for (i, &x) in xh.iter().enumerate().step_by(xs.len() / 5 + 1) {
        assert_eq!(lt_eval(0, &k0, x), o0[i]);
        assert_eq!(lt_eval(1, &k1, x), o1[i]);
    }
}

#[test]
fn lt_exhaustive_8_bits() {
    let mut prg = Prg::new(Block(8));
    let xs: Vec<u64> = (0..256).collect();
    let special = [0u64, 1, 127, 128, 254, 255];
    for &r in &special {
        for &c in &special {
            check_lt(&mut prg, 8, 1, r, c, &xs);
        }
    }
    for _ in 0..40 {
        let r = prg.next_u64() & 255;
        let c = prg.next_u64() & 255;
        check_lt(&mut prg, 8, 8, r, c, &xs);
    }
}

#[test]
fn lt_random_and_edges_wide() {
    let mut prg = Prg::new(Block(9));
    for bits in [16u32, 32, 37, 64] {
        let nm = mask(bits);
        let mut pairs = vec![(0, 0), (0, nm), (nm, 1), (nm, nm), (1, nm), (nm >> 1, (nm >> 1) + 1)];
        for _ in 0..6 {
            pairs.push((prg.next_u64() & nm, prg.next_u64() & nm));
        }
        for &(r, c) in &pairs {
            let neg_r = r.wrapping_neg() & nm;
            let xs = edge_values(bits, &[c, neg_r, c.wrapping_sub(r)], &mut prg, 30);
            for out_bits in [1u32, 32] {
                check_lt(&mut prg, bits, out_bits, r, c, &xs);
            }
        }
    }
}

// ------------------------------------------------------------------ keys

#[test]
fn key_sizes_pinned() {
    // DCF, 32-bit inputs, m-bit outputs: 5 + 16 + 32·16 + ⌈(64 + 32·m + m)/8⌉;
    // one-bit outputs stop 7 levels early (a 128-entry leaf table):
    // 5 + 16 + 25·16 + ⌈(3·25 + 128)/8⌉.
    assert_eq!(DcfKey::size_bytes(32, 1), 447);
    assert_eq!(DcfKey::size_bytes(32, 32), 673);
    assert_eq!(DcfKey::size_bytes(7, 1), 5 + 16 + 16);
    assert_eq!(DcfKey::size_bytes(3, 1), 5 + 16 + 1);
    // DReLU on 32-bit values: one 31-bit DCF + 20 bytes.
    assert_eq!(DreluKey::size_bytes(32, 1), 450);
    assert_eq!(DreluKey::size_bytes(33, 1), 467);
    assert_eq!(DreluKey::size_bytes(32, 32), 673);
    // ReLU on 32-bit values: one two-lane 31-bit DCF over Z_2^32 × Z_2^32.
    assert_eq!(ReluKey::size_bytes(32), 809);
    assert_eq!(LtKey::size_bytes(32, 1), 906);
    let mut prg = Prg::new(Block(10));
    for out in [1u32, 32] {
        assert_eq!(dcf_gen(&mut prg, 32, 5, 1, out).0.to_bytes().len(), DcfKey::size_bytes(32, out));
        assert_eq!(drelu_gen(&mut prg, 32, 5, 0, out).1.to_bytes().len(), DreluKey::size_bytes(32, out));
        assert_eq!(lt_gen(&mut prg, 32, 5, 9, 0, out).1.to_bytes().len(), LtKey::size_bytes(32, out));
    }
    assert_eq!(relu_gen(&mut prg, 32, 5, 0).0.to_bytes().len(), ReluKey::size_bytes(32));
}

#[test]
fn round_trip_preserves_evaluation() {
    let mut prg = Prg::new(Block(12));
    for bits in [1u32, 8, 37, 64] {
        for out in [1u32, 13, 64] {
            if bits >= 1 {
                let (a, b) = dcf_gen(&mut prg, bits, 3 & mask(bits), 77, out);
                for k in [&a, &b] {
                    let k2 = DcfKey::from_bytes(&k.to_bytes()).unwrap();
                    assert_eq!(k2.to_bytes(), k.to_bytes());
                    assert_eq!(dcf_eval(k.party(), &k2, 2), dcf_eval(k.party(), k, 2));
                }
            }
            let (a, b) = drelu_gen(&mut prg, bits, 12345, 3, out);
            for k in [&a, &b] {
                let k2 = DreluKey::from_bytes(&k.to_bytes()).unwrap();
                assert_eq!(k2.to_bytes(), k.to_bytes());
                assert_eq!(drelu_eval(k.party(), &k2, 99), drelu_eval(k.party(), k, 99));
            }
            let (a, b) = lt_gen(&mut prg, bits, 12345, 1, 3, out);
            for k in [&a, &b] {
                let k2 = LtKey::from_bytes(&k.to_bytes()).unwrap();
                assert_eq!(k2.to_bytes(), k.to_bytes());
                assert_eq!(lt_eval(k.party(), &k2, 99), lt_eval(k.party(), k, 99));
            }
        }
        let (a, b) = relu_gen(&mut prg, bits, 999, 5);
        for k in [&a, &b] {
            let k2 = ReluKey::from_bytes(&k.to_bytes()).unwrap();
            assert_eq!(k2.to_bytes(), k.to_bytes());
            assert_eq!(relu_eval(k.party(), &k2, 7), relu_eval(k.party(), k, 7));
        }
    }
}

#[test]
fn keygen_is_deterministic_given_the_prg() {
    let a = dcf_gen(&mut Prg::new(Block(77)), 32, 1000, 5, 32);
    let b = dcf_gen(&mut Prg::new(Block(77)), 32, 1000, 5, 32);
    assert_eq!(a.0.to_bytes(), b.0.to_bytes());
    assert_eq!(a.1.to_bytes(), b.1.to_bytes());
    let a = relu_gen(&mut Prg::new(Block(78)), 32, 1000, 5);
    let b = relu_gen(&mut Prg::new(Block(78)), 32, 1000, 5);
    assert_eq!(a.1.to_bytes(), b.1.to_bytes());
}

fn pick<K>(party: u8, k: (K, K)) -> K {
    if party == 0 { k.0 } else { k.1 }
}

#[test]
fn gate_batches_match_scalar_eval() {
    let mut prg = Prg::new(Block(0xba7c));
    for &bits in &[1u32, 2, 8, 31, 32, 33, 64] {
        for &out_bits in &[1u32, 32] {
            let n = 77;
            let m = mask(bits);
            let xs: Vec<u64> = (0..n).map(|i| if i % 3 == 0 { prg.next_u64() } else { prg.next_u64() & m }).collect();
            for party in 0..2u8 {
                let dk: Vec<DreluKey> = (0..n).map(|_| { let r = prg.next_u64(); pick(party, drelu_gen(&mut prg, bits, r, 1, out_bits)) }).collect();
                let rk: Vec<ReluKey> = (0..n).map(|_| { let r = prg.next_u64(); pick(party, relu_gen(&mut prg, bits, r, 3)) }).collect();
                let lk: Vec<LtKey> = (0..n).map(|_| { let r = prg.next_u64(); let c = prg.next_u64() & m; pick(party, lt_gen(&mut prg, bits, r, c, 1, out_bits)) }).collect();
                let (mut o, mut s) = (vec![0u64; n], vec![0u64; n]);
                DreluBatch::from_keys(&dk).unwrap().eval(party, &xs, &mut o);
                for i in 0..n {
                    assert_eq!(o[i], drelu_eval(party, &dk[i], xs[i]), "drelu bits {bits} out {out_bits} i {i}");
                }
                ReluBatch::from_keys(&rk).unwrap().eval(party, &xs, &mut o, &mut s);
                for i in 0..n {
                    assert_eq!(o[i], relu_eval(party, &rk[i], xs[i]), "relu bits {bits} i {i}");
                }
                LtBatch::from_keys(&lk).unwrap().eval(party, &xs, &mut o, &mut s);
                for i in 0..n {
                    assert_eq!(o[i], lt_eval(party, &lk[i], xs[i]), "lt bits {bits} out {out_bits} i {i}");
                }
                let dcfs: Vec<DcfKey> = (0..n).map(|_| { let a = prg.next_u64() & m; pick(party, dcf_gen(&mut prg, bits, a, 5, out_bits)) }).collect();
                DcfKeyBatch::from_keys(&dcfs).unwrap().eval(party, &xs, &mut o, None);
                for i in 0..n {
                    assert_eq!(o[i], dcf_eval(party, &dcfs[i], xs[i]), "dcf bits {bits} out {out_bits} i {i}");
                }
            }
        }
    }
}
