use crate::proto::*;
use crate::sparse::Csr;
use crate::*;
use hush_transport::{Channel, MemChannel};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::OnceLock;

fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

fn key1024() -> &'static KeyPair {
    static K: OnceLock<KeyPair> = OnceLock::new();
    K.get_or_init(|| KeyPair::generate(1024, &mut rng(1)).unwrap())
}

/// One 2048-bit small-subgroup key for the tests that need that size.
fn key2048() -> &'static KeyPair {
    static K: OnceLock<KeyPair> = OnceLock::new();
    K.get_or_init(|| KeyPair::generate(2048, &mut rng(2)).unwrap())
}

fn roundtrip(kp: &KeyPair, r: &mut StdRng) {
    let pk = kp.public();
    for m in [Integer::from(0), Integer::from(1), Integer::from(pk.n() - 1u32), Integer::from(u64::MAX)] {
        let c = kp.encrypt(&m, r).unwrap();
        pk.validate(c.as_integer(), "t").unwrap();
        assert_eq!(kp.decrypt(&c), m);
        let c2 = pk.encrypt(&m, r).unwrap();
        assert_eq!(kp.decrypt(&c2), m);
        assert_eq!(kp.decrypt_no_crt(&c2), m);
    }
    for _ in 0..5 {
        let m = crate::key::random_below(r, pk.n());
        assert_eq!(kp.decrypt(&kp.encrypt(&m, r).unwrap()), m);
    }
    assert!(kp.encrypt(pk.n(), r).is_err());
    assert!(kp.encrypt(&Integer::from(-1), r).is_err());
}

#[test]
fn roundtrip_2048() {
    let mut r = rng(2);
    let kp = key2048();
    assert_eq!(kp.public().bits(), 2048);
    roundtrip(kp, &mut r);
}

#[test]
fn roundtrip_3072() {
    let mut r = rng(3);
    let kp = KeyPair::generate(3072, &mut r).unwrap();
    assert_eq!(kp.public().bits(), 3072);
    check_subgroup_structure(&kp);
    roundtrip(&kp, &mut r);
    check_decryption_edges(&kp, &mut r);
}

#[test]
fn rejects_other_sizes() {
    assert!(matches!(KeyPair::generate(1536, &mut rng(0)), Err(Error::KeySize(1536))));
}

#[test]
fn homomorphic_ops() {
    let kp = key1024();
    let pk = kp.public();
    let mut r = rng(4);
    for _ in 0..20 {
        let a: i64 = r.gen_range(-1_000_000_000..1_000_000_000);
        let b: i64 = r.gen_range(-1_000_000_000..1_000_000_000);
        let k: i64 = r.gen_range(-100_000..100_000);
        let ca = kp.encrypt_i64(a, &mut r);
        let cb = pk.encrypt_i64(b, &mut r);
        assert_eq!(kp.decrypt_signed(&pk.add(&ca, &cb)), a + b);
        assert_eq!(kp.decrypt_signed(&pk.add_plain(&ca, &Integer::from(b))), a + b);
        assert_eq!(kp.decrypt_signed(&pk.mul_i64(&ca, k)), a as i128 as i64 * k);
        assert_eq!(kp.decrypt_signed(&pk.neg(&ca)), -a);
        assert_eq!(kp.decrypt_signed(&pk.rerandomize(&ca, &mut r)), a);
        assert_ne!(pk.rerandomize(&ca, &mut r), ca);
    }
    let c = kp.encrypt_i64(7, &mut r);
    assert_eq!(kp.decrypt(&pk.mul_i64(&c, 0)), 0);
}

#[test]
fn fixed_base_matches_powm() {
    let kp = key1024();
    let pk = kp.public();
    let mut r = rng(5);
    for w in [1, 3, 4, 7, 8, 11] {
        let base = crate::key::random_below(&mut r, pk.n2());
        let fb = FixedBase::new(&base, pk.n2(), 200, w, false);
        for bits in [0u32, 1, 7, 64, 199, 200] {
            let e = crate::key::random_bits(&mut r, bits);
            assert_eq!(fb.pow(&e), Integer::from(base.pow_mod_ref(&e, pk.n2()).unwrap()), "w={w} bits={bits}");
        }
    }
}

#[test]
fn malformed_ciphertexts_are_rejected() {
    let kp = key1024();
    let pk = kp.public();
    let l = pk.ct_bytes();
    let good = pk.encode_cts(&[kp.encrypt_u64(5, &mut rng(6))]);
    assert_eq!(pk.decode_cts(&good, 1, "t").unwrap().len(), 1);
    // zero
    let e = pk.decode_cts(&vec![0u8; l], 1, "t").unwrap_err();
    assert!(e.to_string().contains("zero"), "{e}");
    // ≥ n²
    let e = pk.decode_cts(&vec![0xffu8; l], 1, "t").unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
    let n2 = pk.encode_cts(&[crate::key::Ciphertext(pk.n2().clone() - 0u32)]);
    assert!(pk.decode_cts(&n2, 1, "t").unwrap_err().to_string().contains("out of range"));
    // multiple of a factor of n: n itself
    let e = pk.decode_cts(&pk.encode_cts(&[crate::key::Ciphertext(pk.n().clone())]), 1, "t").unwrap_err();
    assert!(e.to_string().contains("not a unit"), "{e}");
    // a non-unit inside a batch of good ones (the unit check is one gcd
    // over the batch's product)
    let mut cts: Vec<_> = (0..5u64).map(|i| kp.encrypt_u64(i, &mut rng(60 + i))).collect();
    assert_eq!(pk.decode_cts(&pk.encode_cts(&cts), 5, "t").unwrap().len(), 5);
    cts[3] = crate::key::Ciphertext(Integer::from(pk.n() * 3u32));
    let e = pk.decode_cts(&pk.encode_cts(&cts), 5, "t").unwrap_err();
    assert!(e.to_string().contains("not a unit"), "{e}");
    // wrong length
    let e = pk.decode_cts(&good[1..], 1, "t").unwrap_err();
    assert!(matches!(e, Error::Malformed { .. }), "{e}");
    // public keys
    assert!(PublicKey::from_bytes(&[1, 2, 3], 4).is_err());
    let mut pkb = pk.to_bytes();
    assert!(PublicKey::from_bytes(&pkb, 4).is_ok());
    pkb[1] = 5;
    assert!(PublicKey::from_bytes(&pkb, 4).is_err());
}

#[test]
fn malformed_ciphertext_over_channel() {
    let kp = key1024();
    let pk = kp.public().clone();
    let (mut a, mut b) = MemChannel::pair();
    let l = pk.ct_bytes();
    a.send(&vec![0xffu8; l]).unwrap();
    let e = recv_cts(&mut b, &pk, 1, "h2s packed ciphertexts").unwrap_err();
    assert!(e.to_string().contains("h2s packed ciphertexts") && e.to_string().contains("out of range"), "{e}");
    a.send(&vec![1u8; l - 1]).unwrap();
    let mut b2 = b;
    assert!(recv_cts(&mut b2, &pk, 1, "x").is_err());
}

#[test]
fn packing_slot_boundaries() {
    let kp = key1024();
    let pk = kp.public();
    let mut r = rng(7);
    let value_bits = 100;
    let p = Packing::new(value_bits, SIGMA, pk.bits()).unwrap();
    assert_eq!(p.slot_bits, 141);
    assert_eq!(p.slots, (1024 - 2) / 141);
    assert!(p.slots as u32 * p.slot_bits <= pk.bits() - 2);
    // extreme masked values in every slot: 0 and 2^slot_bits − 1
    let maxv = (Integer::from(1) << p.slot_bits) - 1u32;
    for pattern in 0..4 {
        let vals: Vec<Integer> = (0..p.slots)
            .map(|k| if (k + pattern) % 2 == 0 { maxv.clone() } else { Integer::from(0) })
            .collect();
        let cts: Vec<_> = vals.iter().map(|v| kp.encrypt(v, &mut r).unwrap()).collect();
        let packed = p.pack(pk, &cts).unwrap();
        assert_eq!(p.unpack(&kp.decrypt(&packed), vals.len()).unwrap(), vals);
        // fewer values than slots
        let packed = p.pack(pk, &cts[..1]).unwrap();
        assert_eq!(p.unpack(&kp.decrypt(&packed), 1).unwrap(), vals[..1]);
    }
    assert!(p.pack(pk, &[]).is_err());
    let too_many: Vec<_> = (0..=p.slots).map(|_| kp.encrypt_u64(1, &mut r)).collect();
    assert!(p.pack(pk, &too_many).is_err());
    // overflow detected on unpack
    assert!(p.unpack(&(Integer::from(1) << p.slot_bits), 1).is_err());
    assert!(Packing::new(2000, SIGMA, 1024).is_err());
}

fn run2<A: Send, B: Send>(
    fa: impl FnOnce(&mut MemChannel) -> A + Send,
    fb: impl FnOnce(&mut MemChannel) -> B + Send,
) -> (A, B, hush_transport::Cost) {
    let (mut ca, mut cb) = MemChannel::pair();
    let (a, b) = std::thread::scope(|s| {
        let h = s.spawn(move || fb(&mut cb));
        let a = fa(&mut ca);
        (a, h.join().unwrap())
    });
    let cost = ca.cost();
    (a, b, cost)
}

#[test]
fn h2s_random_and_edges() {
    let kp = key1024();
    let pk = kp.public().clone();
    let mut r = rng(8);
    let bits = 80u32;
    let mut vals: Vec<i128> = vec![0, 1, -1, (1i128 << bits) - 1, -((1i128 << bits) - 1)];
    for _ in 0..40 {
        vals.push(r.gen_range(-(1i128 << bits) + 1..(1i128 << bits)));
    }
    let cts: Vec<_> = vals.iter().map(|&v| pk.encrypt(&pk.encode(&Integer::from(v)).unwrap(), &mut r).unwrap()).collect();
    let n = vals.len();
    let (s_owner, s_eval, cost) = run2(
        |ch| h2s_owner(ch, kp, n, bits).unwrap(),
        |ch| h2s_eval(ch, &pk, &cts, bits, &mut rng(9)).unwrap(),
    );
    for i in 0..n {
        assert_eq!(s_owner[i].wrapping_add(s_eval[i]), vals[i] as u64, "value {i}");
    }
    // cost pin: ceil(45 / 8 slots) = 6 packed ciphertexts of 256 bytes, one round
    let pack = h2s_packing(&pk, bits).unwrap();
    assert_eq!(pack.slots, 8);
    assert_eq!(cost.bytes_sent + cost.bytes_recv, 6 * 256);
    assert_eq!(cost.rounds, 1);
}

#[test]
fn s2h_then_h2s() {
    let kp = key1024();
    let pk = kp.public().clone();
    let mut r = rng(10);
    let x: Vec<u64> = (0..20).map(|_| r.gen()).collect();
    let x1: Vec<u64> = (0..20).map(|_| r.gen()).collect();
    let x2: Vec<u64> = x.iter().zip(&x1).map(|(a, b)| a.wrapping_sub(*b)).collect();
    let (_, cts, cost) = run2(|ch| s2h_owner(ch, kp, &x1, &mut rng(11)).unwrap(), |ch| s2h_eval(ch, &pk, &x2).unwrap());
    assert_eq!(cost.rounds, 1);
    assert_eq!(cost.bytes_sent, 20 * 256);
    for i in 0..20 {
        assert_eq!(kp.decrypt(&cts[i]).to_u64_wrapping(), x[i]);
    }
    let (a, b, _) =
        run2(|ch| h2s_owner(ch, kp, 20, 66).unwrap(), |ch| h2s_eval(ch, &pk, &cts, 66, &mut rng(12)).unwrap());
    for i in 0..20 {
        assert_eq!(a[i].wrapping_add(b[i]), x[i]);
    }
}

#[test]
fn triples_are_correct() {
    let kp = key1024();
    let pk = kp.public().clone();
    let n = 37;
    let (t0, t1, cost) = run2(
        |ch| triples_owner(ch, kp, n, &mut rng(13)).unwrap(),
        |ch| triples_helper(ch, &pk, n, &mut rng(14)).unwrap(),
    );
    for i in 0..n {
        let a = t0.a[i].wrapping_add(t1.a[i]);
        let b = t0.b[i].wrapping_add(t1.b[i]);
        assert_eq!(t0.c[i].wrapping_add(t1.c[i]), a.wrapping_mul(b));
    }
    assert_eq!(cost.rounds, 2);
    let slots = h2s_packing(&pk, 130).unwrap().slots;
    assert_eq!(cost.bytes_sent + cost.bytes_recv, ((2 * n + n.div_ceil(slots)) * 256) as u64);
}

#[test]
fn sparse_matvec_enc_matches_plain() {
    let kp = key1024();
    let pk = kp.public().clone();
    let mut r = rng(15);
    let (rows, cols) = (30, 50);
    let mut t = vec![];
    for i in 0..rows {
        for _ in 0..r.gen_range(0..6) {
            t.push((i, r.gen_range(0..cols), r.gen_range(-70000i64..70000)));
        }
    }
    t.push((3, 7, i64::from(i32::MIN) * 2));
    let x = Csr::from_triplets(rows, cols, t);
    let xt = x.transpose();
    assert_eq!(xt.transpose(), x);
    let s: Vec<u64> = (0..cols).map(|_| r.gen()).collect();
    let expect = x.matvec_ring(&s);
    let (a, b, cost) = run2(
        |ch| matvec_owner(ch, kp, &s, rows, x.product_bits(), &mut rng(16)).unwrap(),
        |ch| matvec_eval(ch, &pk, &x, &mut rng(17)).unwrap(),
    );
    for i in 0..rows {
        assert_eq!(a[i].wrapping_add(b[i]), expect[i], "row {i}");
    }
    assert_eq!(cost.rounds, 2);
}

#[test]
fn transport_error_is_reported() {
    let kp = key1024();
    let (mut a, b) = MemChannel::pair();
    drop(b);
    let e = h2s_owner(&mut a, kp, 3, 64).unwrap_err();
    assert!(matches!(e, Error::Transport(_)), "{e}");
}

/// The curious key owner's view of h2s: the values it decrypts are v + r
/// with r uniform on an interval 2^σ times wider than v's range, so its
/// shares look the same whatever v is. Low-nibble histograms of the owner's
/// shares are uniform (χ², 15 dof) for v = 0 and for v = 2^20 − 1, and the
/// two agree (two-sample χ²). Fails if the mask r were fixed or zero (all
/// shares would carry v's nibble).
#[test]
fn h2s_owner_view_is_independent_of_the_value() {
    let kp = key1024();
    let pk = kp.public().clone();
    let bits = 20u32;
    let n = 2048;
    let hist = |v: u64, seed: u64| -> [f64; 16] {
        let ct = pk.encrypt(&pk.encode(&Integer::from(v)).unwrap(), &mut rng(seed)).unwrap();
        let cts = vec![ct; n];
        let (owner, _, _) = run2(|ch| h2s_owner(ch, kp, n, bits).unwrap(), |ch| h2s_eval(ch, &pk, &cts, bits, &mut rng(seed + 1)).unwrap());
        let mut h = [0f64; 16];
        for s in owner {
            h[(s & 15) as usize] += 1.0;
        }
        h
    };
    let (h0, h1) = (hist(0, 40), hist((1 << bits) - 1, 50));
    assert_uniform_and_alike(&h0, &h1, n as f64 / 16.0, "the value");
}

/// Two low-nibble histograms of a curious owner's shares are each uniform
/// (χ², 15 dof, expected count `e` per cell) and alike (two-sample χ²).
fn assert_uniform_and_alike(h0: &[f64; 16], h1: &[f64; 16], e: f64, what: &str) {
    for h in [h0, h1] {
        let chi: f64 = h.iter().map(|o| (o - e) * (o - e) / e).sum();
        assert!(chi < 50.0, "owner's shares not uniform: χ² = {chi}");
    }
    let two: f64 = h0.iter().zip(h1).map(|(a, b)| if a + b > 0.0 { (a - b) * (a - b) / (a + b) } else { 0.0 }).sum();
    assert!(two < 50.0, "owner's shares depend on {what}: χ² = {two}");
}

fn rand_int(r: &mut StdRng, bits: u32) -> Integer {
    let words: Vec<u64> = (0..bits.div_ceil(64)).map(|_| r.gen()).collect();
    let x = Integer::from_digits(&words, rug::integer::Order::Lsf);
    x.keep_bits(bits)
}

#[test]
fn ifma_pow8_equals_gmp() {
    if !ifma::available() {
        eprintln!("ifma_pow8_equals_gmp: this CPU has no AVX-512 IFMA (or HUSH_PAILLIER=gmp); the GMP path is the only one here");
        return;
    }
    let mut r = rng(21);
    for bits in [52u32, 61, 104, 105, 520, 1024, 2047, 2048, 3072, 4096] {
        let mut m = rand_int(&mut r, bits);
        m.set_bit(bits - 1, true);
        m.set_bit(0, true);
        let ctx = ifma::MontCtx::new(&m).unwrap();
        let mut bases: Vec<Integer> = (0..8).map(|_| rand_int(&mut r, bits + 3)).collect(); // some ≥ M
        bases[0] = Integer::from(0);
        bases[1] = Integer::from(1);
        bases[2] = Integer::from(&m - 1u32);
        let refs: Vec<&Integer> = bases.iter().collect();
        for e in [Integer::from(0), Integer::from(1), Integer::from(31), Integer::from(32), rand_int(&mut r, 64), rand_int(&mut r, bits / 2), rand_int(&mut r, bits)] {
            let got = ctx.pow8(&refs, &e);
            for (k, b) in bases.iter().enumerate() {
                let want = Integer::from(b.pow_mod_ref(&e, &m).unwrap());
                assert_eq!(got[k], want, "bits {bits} lane {k} e {e}");
            }
            // fewer than eight lanes
            let got3 = ctx.pow8(&refs[..3], &e);
            assert_eq!(got3, got[..3].to_vec());
        }
    }
    assert!(ifma::MontCtx::new(&Integer::from(100)).is_none());
    assert!(ifma::MontCtx::new(&Integer::from(101)).is_none()); // too small for two limbs
}

#[test]
fn decrypt_batch_equals_decrypt() {
    let mut r = rng(22);
    for kp in [key1024(), key2048()] {
        let ms: Vec<Integer> = (0..19).map(|i| rand_int(&mut r, 40 + i * 50) % kp.public().n()).collect();
        let cts: Vec<Ciphertext> = ms.iter().map(|m| kp.public().encrypt(m, &mut r).unwrap()).collect();
        assert_eq!(kp.decrypt_batch(&cts), ms);
        assert_eq!(kp.decrypt_batch(&cts[..1]), ms[..1].to_vec());
        assert!(kp.decrypt_batch(&[]).is_empty());
    }
}

#[test]
fn pack_many_equals_pack() {
    let kp = key1024();
    let pk = kp.public();
    let mut r = rng(23);
    let pack = proto::h2s_packing(pk, 70).unwrap();
    // 11 full groups (one IFMA chunk of 8, then 3) and a short last group
    let mut groups: Vec<Vec<Ciphertext>> = (0..11)
        .map(|_| (0..pack.slots).map(|_| pk.encrypt(&Integer::from(r.gen::<u64>()), &mut r).unwrap()).collect())
        .collect();
    groups.push((0..2).map(|_| pk.encrypt(&Integer::from(r.gen::<u32>()), &mut r).unwrap()).collect());
    let many = pack.pack_many(pk, &groups).unwrap();
    assert_eq!(many.len(), groups.len());
    for (g, c) in groups.iter().zip(&many) {
        assert_eq!(c, &pack.pack(pk, g).unwrap());
    }
}

#[test]
fn ifma_multi_exp8_equals_gmp() {
    if !ifma::available() {
        eprintln!("ifma_multi_exp8_equals_gmp: no AVX-512 IFMA here (or HUSH_PAILLIER=gmp)");
        return;
    }
    let mut r = rng(24);
    for bits in [130u32, 1024, 2048, 4096] {
        let mut m = rand_int(&mut r, bits);
        m.set_bit(bits - 1, true);
        m.set_bit(0, true);
        let ctx = ifma::MontCtx::new(&m).unwrap();
        let pool: Vec<Integer> = (0..40).map(|_| rand_int(&mut r, bits) % &m).collect();
        for lanes_n in [1usize, 3, 8] {
            let lanes: Vec<Vec<(&Integer, u64)>> = (0..lanes_n)
                .map(|k| {
                    let terms = if k == 1 { 0 } else { r.gen_range(1..15) };
                    (0..terms)
                        .map(|t| {
                            let e = match (k + t) % 4 {
                                0 => r.gen::<u64>(),
                                1 => r.gen_range(0..1u64 << 20),
                                2 => u64::MAX,
                                _ => r.gen_range(0..3),
                            };
                            (&pool[r.gen_range(0..pool.len())], e)
                        })
                        .collect()
                })
                .collect();
            let got = ctx.multi_exp8(&lanes);
            for (k, lane) in lanes.iter().enumerate() {
                let mut want = Integer::from(1);
                for (b, e) in lane {
                    want *= Integer::from(b.pow_mod_ref(&Integer::from(*e), &m).unwrap());
                    want %= &m;
                }
                assert_eq!(got[k], want, "bits {bits} lanes {lanes_n} lane {k}");
            }
        }
        // bases not reduced mod M are reduced first
        let big = Integer::from(&m + 5u32);
        let got = ctx.multi_exp8(&[vec![(&big, 3u64)]]);
        assert_eq!(got[0], Integer::from(125u32) % &m);
    }
}

/// The two-digit mod-n² kernel of batched ct·pt (ifma::n2) against GMP's
/// pow_mod, on random and edge bases (0, 1, n − 1, n, n² − 1, an all-ones
/// value, bases ≥ n² and negative ones) and scalars (0, 1, 2⁶³, 2⁶⁴ − 1),
/// for moduli of 64 … 3072 bits (random odd n, and a real key's n), with
/// 1 … 8 lanes.
#[test]
fn ifma_n2_equals_gmp() {
    if !ifma::available() {
        eprintln!("ifma_n2_equals_gmp: no AVX-512 IFMA here (or HUSH_PAILLIER=gmp / HUSH_SIMD below avx512): GMP path only");
        return;
    }
    let mut r = rng(34);
    // k = 4, 4, 8, 12, 20, 40, 60 limbs: the Zen 4 schedule's trimmed
    // edges meet (k = 4) or leave an empty middle (k = 12) in some passes
    let mut moduli: Vec<Integer> = [64u32, 130, 300, 600, 1024, 2048, 3072]
        .iter()
        .map(|&bits| {
            let mut n = rand_int(&mut r, bits);
            n.set_bit(bits - 1, true);
            n.set_bit(0, true);
            n
        })
        .collect();
    moduli.push(key2048().public().n().clone());
    for n in &moduli {
        let ctx = ifma::n2::N2Ctx::new(n).unwrap();
        let n2 = Integer::from(n * n);
        let ones = (Integer::from(1) << (n2.significant_bits() - 1)) - 1u32;
        let mut bases: Vec<Integer> = vec![
            Integer::new(),
            Integer::from(1),
            Integer::from(n - 1u32),
            n.clone(),
            Integer::from(&n2 - 1u32),
            ones,
            Integer::from(&n2 + 7u32),
            Integer::from(-5),
        ];
        bases.extend((0..12).map(|_| rand_int(&mut r, n2.significant_bits()) % &n2));
        let edge_exps = [0u64, 1, 1 << 63, u64::MAX, 2, 15, 16];
        let same = r.gen::<u64>();
        for round in 0..8 {
            let lanes = [8usize, 1, 3, 8, 8, 5, 8, 8][round];
            let bs: Vec<&Integer> = (0..lanes).map(|i| &bases[(round * 8 + i) % bases.len()]).collect();
            let es: Vec<u64> = (0..lanes)
                .map(|i| match (round, (round + i) % 3) {
                    // every lane's scalar 0 (no multiplication at all), and
                    // one scalar in every lane
                    (6, _) => 0,
                    (7, _) => same,
                    (_, 0) => edge_exps[(round * 3 + i) % edge_exps.len()],
                    (_, 1) => r.gen::<u64>(),
                    _ => r.gen::<u64>() | 1 << 63,
                })
                .collect();
            // both schedules (Intel's and Zen 4's) on any CPU with IFMA,
            // and the one this CPU picks
            let got = [ctx.pow_u64_8_with(&bs, &es, false), ctx.pow_u64_8_with(&bs, &es, true), ctx.pow_u64_8(&bs, &es)];
            for (i, (b, e)) in bs.iter().zip(&es).enumerate() {
                let want = Integer::from(b.pow_mod_ref(&Integer::from(*e), &n2).unwrap());
                for (g, name) in got.iter().zip(["intel", "zen", "default"]) {
                    assert_eq!(g[i], want, "{name} schedule, n of {} bits, round {round}, lane {i}, e = {e}", n.significant_bits());
                }
            }
        }
    }
}

/// PublicKey::mul_u64_batch (the two-digit IFMA kernel where the CPU has
/// it) under a 2048-bit key decrypts to k·m and equals mul_plain (GMP)
/// ciphertext for ciphertext.
#[test]
fn mul_u64_batch_2048_decrypts_to_products() {
    let kp = key2048();
    let pk = kp.public();
    let mut r = rng(35);
    let ms: Vec<u64> = (0..11).map(|_| r.gen::<u32>() as u64).collect();
    let cts: Vec<Ciphertext> = ms.iter().map(|&m| kp.encrypt(&Integer::from(m), &mut r).unwrap()).collect();
    let ks: Vec<u64> = (0..11).map(|i| if i == 0 { 0 } else if i == 1 { u64::MAX } else { r.gen() }).collect();
    let pairs: Vec<(&Ciphertext, u64)> = cts.iter().zip(&ks).map(|(c, &k)| (c, k)).collect();
    let got = pk.mul_u64_batch(&pairs);
    for (i, ((c, k), g)) in pairs.iter().zip(&got).enumerate() {
        assert_eq!(g.as_integer(), pk.mul_plain(c, &Integer::from(*k)).as_integer(), "pair {i}");
        let want = Integer::from(ms[i]) * Integer::from(*k) % pk.n();
        assert_eq!(kp.decrypt(g), want, "pair {i}");
    }
}

#[test]
fn rows_enc_equals_row_enc() {
    let kp = key1024();
    let pk = kp.public();
    let mut r = rng(25);
    let cols = 9;
    let cts: Vec<Ciphertext> = (0..cols).map(|_| pk.encrypt(&Integer::from(r.gen::<u32>()), &mut r).unwrap()).collect();
    // rows with positive, negative, mixed and no entries; 21 rows (two full IFMA chunks and a part)
    let mut t = Vec::new();
    for row in 0..21usize {
        for c in 0..cols {
            if (row * 7 + c * 3) % 4 == 0 {
                let v = match (row + c) % 3 {
                    0 => r.gen_range(1..1i64 << 18),
                    1 => -r.gen_range(1..1i64 << 18),
                    _ => r.gen_range(-3..4),
                };
                t.push((row, c, v));
            }
        }
    }
    t.retain(|&(row, _, _)| row != 5); // an empty row
    let x = Csr::from_triplets(21, cols, t);
    let many = x.rows_enc(pk, &cts, 0..21);
    let mut f = crate::sparse::row_enc_stream(&x, pk, &cts);
    assert_eq!(many.len(), 21);
    for (row, got) in many.iter().enumerate() {
        let want = x.row_enc(pk, &cts, row);
        assert_eq!(*got, want, "row {row}");
        assert_eq!(f(row), want);
    }
}

#[test]
fn encrypt_batch_decrypts_and_fixed_table_equals_gmp() {
    let mut r = rng(26);
    for kp in [key1024(), key2048()] {
        let pk = kp.public();
        let ms: Vec<Integer> = (0..19).map(|i| rand_int(&mut r, 10 + 60 * i as u32) % pk.n()).collect();
        let cts = kp.encrypt_batch(&ms, &mut r).unwrap();
        for c in &cts {
            pk.validate(c.as_integer(), "t").unwrap();
        }
        assert_eq!(kp.decrypt_batch(&cts), ms);
        assert_ne!(cts[0], kp.encrypt_batch(&ms[..1], &mut r).unwrap()[0], "fresh randomness");
        // plaintexts out of range are refused
        assert!(kp.encrypt_batch(&[Integer::from(pk.n())], &mut r).is_err());
    }
    if ifma::available() {
        // the Montgomery-domain table gives the GMP table's powers
        let kp = key1024();
        let (p2, tp) = kp.test_p2_table();
        let ctx = ifma::MontCtx::new(p2).unwrap();
        let ft = ifma::FixedTable::new(&ctx, tp).unwrap();
        let exps: Vec<Integer> = (0..8).map(|k| if k == 0 { Integer::new() } else { rand_int(&mut r, tp.exp_bits() - k) }).collect();
        let got = ft.pow8(&ctx, &exps);
        for (e, g) in exps.iter().zip(&got) {
            assert_eq!(*g, tp.pow(e));
        }
    }
}

/// The structure the small-subgroup security argument and the short
/// decryption exponent rest on (crate docs, "Key generation"):
/// p = 2·α_p·β_p + 1 with α_p, β_p prime and |α_p| = subgroup_bits, the
/// same for q with α_q ≠ α_p, gcd(p − 1, q − 1) = 2, n = pq of the stated size, and h_s of
/// order exactly α_p·α_q (mod n and mod n²).
fn check_subgroup_structure(kp: &KeyPair) {
    let pk = kp.public();
    let bits = pk.bits();
    assert_eq!(kp.kind(), KeyKind::Subgroup);
    let (p, q, ap, aq) = kp.test_secrets();
    assert_eq!(Integer::from(p * q), *pk.n());
    assert_eq!(pk.n().significant_bits(), bits);
    assert_eq!(p.significant_bits(), bits / 2);
    assert_eq!(q.significant_bits(), bits / 2);
    assert_ne!(ap, aq);
    for (pr, a) in [(p, ap), (q, aq)] {
        assert_ne!(pr.is_probably_prime(40), rug::integer::IsPrime::No);
        assert_ne!(a.is_probably_prime(40), rug::integer::IsPrime::No, "α is prime");
        assert_eq!(a.significant_bits(), subgroup_bits(bits), "α has the stated size");
        let pm1 = Integer::from(pr - 1u32);
        assert!(pm1.is_divisible(&Integer::from(a * 2u32)), "2α divides p − 1");
        let beta = Integer::from(&pm1 / a) / 2u32;
        assert_ne!(beta.is_probably_prime(40), rug::integer::IsPrime::No, "β is prime");
    }
    assert_eq!(Integer::from(Integer::from(p - 1u32).gcd_ref(&Integer::from(q - 1u32))), 2);
    assert_eq!(kp.decryption_exponent_bits(), subgroup_bits(bits));
    // h_s has order exactly α_p·α_q: both primes, so it suffices that
    // h_s^{α_pα_q} = 1 mod n² while h_s^{α_p} ≠ 1 and h_s^{α_q} ≠ 1 mod n
    let hs = Integer::from(pk.hs());
    let apq = Integer::from(ap * aq);
    assert_eq!(Integer::from(hs.pow_mod_ref(&apq, pk.n2()).unwrap()), 1);
    assert_ne!(Integer::from(hs.pow_mod_ref(ap, pk.n()).unwrap()), 1);
    assert_ne!(Integer::from(hs.pow_mod_ref(aq, pk.n()).unwrap()), 1);
    // and that order is the order of every randomiser h_s^a
    let c = pk.random_factor(&mut rng(99));
    assert_eq!(Integer::from(c.pow_mod_ref(&apq, pk.n2()).unwrap()), 1);
}

/// Honest ciphertexts (public, CRT, batched encryption; homomorphic
/// results; packed slots at their extremes) decrypt to the plaintext with
/// the short exponent, equal to the full-exponent references and, batched
/// (IFMA where present), to single GMP decryption.
fn check_decryption_edges(kp: &KeyPair, r: &mut StdRng) {
    let pk = kp.public();
    let n = pk.n();
    let mut ms = vec![
        Integer::from(0),
        Integer::from(1),
        Integer::from(2),
        Integer::from(n - 1u32),
        Integer::from(n - 2u32),
        Integer::from(n >> 1),
        Integer::from(n >> 1) + 1u32,
        Integer::from(u64::MAX),
        (Integer::from(1) << (pk.bits() - 2)) - 1u32,
    ];
    ms.extend((0..12).map(|_| crate::key::random_below(r, n)));
    let mut cts = Vec::new();
    for m in &ms {
        cts.push(pk.encrypt(m, r).unwrap());
        cts.push(kp.encrypt(m, r).unwrap());
    }
    cts.extend(kp.encrypt_batch(&ms, r).unwrap());
    let mut want: Vec<Integer> = ms.iter().flat_map(|m| [m.clone(), m.clone()]).collect();
    want.extend(ms.iter().cloned());
    // homomorphic results: sums wrapping past n, products by scalars, negation
    let k = Integer::from(r.gen::<u64>());
    let mut extra = Vec::new();
    for i in 0..4 {
        let (a, b) = (&ms[i], &ms[ms.len() - 1 - i]);
        let ca = pk.encrypt(a, r).unwrap();
        let cb = pk.encrypt(b, r).unwrap();
        cts.push(pk.add(&ca, &cb));
        extra.push(Integer::from(a + b) % n);
        cts.push(pk.mul_plain(&ca, &k));
        extra.push(Integer::from(a * &k) % n);
        cts.push(pk.neg(&ca));
        extra.push(Integer::from(n - a) % n);
        cts.push(pk.rerandomize(&ca, r));
        extra.push(a.clone());
    }
    want.extend(extra);
    assert_eq!(cts.len(), want.len());
    for (c, m) in cts.iter().zip(&want) {
        pk.validate(c.as_integer(), "t").unwrap();
        assert_eq!(kp.decrypt(c), *m);
        assert_eq!(kp.decrypt_full_exponent(c), *m);
    }
    for c in cts.iter().take(6) {
        assert_eq!(kp.decrypt_no_crt(c), kp.decrypt(c));
    }
    assert_eq!(kp.decrypt_batch(&cts), want);
    // packed values at the slot boundaries (all ones / zero per slot)
    let p = Packing::new(64, SIGMA, pk.bits()).unwrap();
    let maxv = (Integer::from(1) << p.slot_bits) - 1u32;
    let vals: Vec<Integer> = (0..p.slots).map(|i| if i % 3 == 0 { Integer::from(0) } else { maxv.clone() }).collect();
    let vcts: Vec<_> = vals.iter().map(|v| pk.encrypt(v, r).unwrap()).collect();
    let packed = p.pack(pk, &vcts).unwrap();
    assert_eq!(p.unpack(&kp.decrypt(&packed), vals.len()).unwrap(), vals);
    assert_eq!(p.unpack(&kp.decrypt_batch(&[packed.clone(), packed])[1], vals.len()).unwrap(), vals);
}

#[test]
fn subgroup_key_structure_and_decryption_1024() {
    check_subgroup_structure(key1024());
    check_decryption_edges(key1024(), &mut rng(30));
}

#[test]
fn subgroup_key_structure_and_decryption_2048() {
    check_subgroup_structure(key2048());
    check_decryption_edges(key2048(), &mut rng(31));
}

/// Units outside (1 + n)^Z·⟨h_s⟩ — a random unit, a standard Paillier
/// encryption (1 + n)^m·r^n with a random r, an honest ciphertext times −1
/// — decrypt to the standard Paillier decryption (the λ reference), singly
/// and batched beside honest ciphertexts: the short exponent notices them
/// (c^{α_p} ≢ 1 mod p) and falls back to p − 1.
#[test]
fn ciphertexts_outside_the_subgroup_decrypt_like_standard_paillier() {
    let mut r = rng(32);
    for kp in [key1024(), key2048()] {
        let pk = kp.public();
        let n2 = pk.n2();
        let mut cts = Vec::new();
        let mut want = Vec::new();
        for i in 0..11 {
            let m = crate::key::random_below(&mut r, pk.n());
            let c = match i % 3 {
                0 => crate::key::random_below(&mut r, n2),
                1 => {
                    let rr = crate::key::random_below(&mut r, pk.n());
                    let rn = Integer::from(rr.pow_mod_ref(pk.n(), n2).unwrap());
                    (Integer::from(&m * pk.n()) + 1u32) * rn % n2
                }
                _ => Integer::from(n2 - pk.encrypt(&m, &mut r).unwrap().as_integer()),
            };
            pk.validate(&c, "t").unwrap();
            let c = Ciphertext(c);
            let std = kp.decrypt_no_crt(&c);
            if i % 3 == 1 {
                assert_eq!(std, m, "a standard Paillier ciphertext");
            }
            assert_eq!(kp.decrypt(&c), std);
            assert_eq!(kp.decrypt_full_exponent(&c), std);
            cts.push(c);
            want.push(std);
            // an honest neighbour in the same batch
            let m2 = crate::key::random_below(&mut r, pk.n());
            cts.push(pk.encrypt(&m2, &mut r).unwrap());
            want.push(m2);
        }
        assert_eq!(kp.decrypt_batch(&cts), want);
    }
}

/// The previous key generation stays available: DJN keys decrypt with the
/// full exponents, singly and batched.
#[test]
fn djn_keys_still_work() {
    let mut r = rng(33);
    let kp = KeyPair::generate_kind(1024, 4, KeyKind::Djn, &mut r).unwrap();
    assert_eq!(kp.kind(), KeyKind::Djn);
    assert_eq!(kp.decryption_exponent_bits(), 512);
    roundtrip(&kp, &mut r);
    let ms: Vec<Integer> = (0..9).map(|_| crate::key::random_below(&mut r, kp.public().n())).collect();
    let cts: Vec<Ciphertext> = ms.iter().map(|m| kp.public().encrypt(m, &mut r).unwrap()).collect();
    assert_eq!(kp.decrypt_batch(&cts), ms);
    assert!(matches!(KeyPair::generate_kind(1536, 8, KeyKind::Subgroup, &mut r), Err(Error::KeySize(1536))));
}

/// The windowed Straus multi-exponentiation at each window width it picks
/// (small, 20-bit and 64-bit exponents; a table-size cap), with lanes that
/// share a digit (one table entry for all) and lanes that differ (entries
/// blended lane by lane), against GMP.
#[test]
fn ifma_multi_exp8_windows_equal_gmp() {
    assert_eq!(ifma::straus_window(0, 1, 79), 1);
    assert_eq!(ifma::straus_window(2, 1, 79), 1);
    assert_eq!(ifma::straus_window(20, 1, 79), 2);
    assert_eq!(ifma::straus_window(63, 1, 79), 3);
    assert_eq!(ifma::straus_window(64, 1, 79), 4);
    assert_eq!(ifma::straus_window(64, 2, 79), 4);
    assert_eq!(ifma::straus_window(64, 40, 79), 3);
    assert_eq!(ifma::straus_window(16, 40, 79), 2);
    assert_eq!(ifma::straus_window(64, 1 << 20, 79), 1, "tables capped");
    if !ifma::available() {
        eprintln!("ifma_multi_exp8_windows_equal_gmp: no AVX-512 IFMA here (or HUSH_PAILLIER=gmp)");
        return;
    }
    let kp = key1024();
    let n2 = kp.public().n2();
    let ctx = ifma::MontCtx::new(n2).unwrap();
    let mut r = rng(34);
    let pool: Vec<Integer> = (0..16).map(|_| crate::key::random_below(&mut r, n2)).collect();
    for bits in [1u32, 2, 3, 5, 20, 21, 63, 64] {
        let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
        for same in [false, true] {
            let e0 = r.gen::<u64>() & mask;
            let lanes: Vec<Vec<(&Integer, u64)>> = (0..8)
                .map(|k| {
                    (0..1 + k % 3)
                        .map(|t| (&pool[(k + 5 * t) % pool.len()], if same { e0 } else { r.gen::<u64>() & mask }))
                        .collect()
                })
                .collect();
            let got = ctx.multi_exp8(&lanes);
            for (k, lane) in lanes.iter().enumerate() {
                let mut want = Integer::from(1);
                for (b, e) in lane {
                    want *= Integer::from(b.pow_mod_ref(&Integer::from(*e), n2).unwrap());
                    want %= n2;
                }
                assert_eq!(got[k], want, "bits {bits} same {same} lane {k}");
            }
        }
    }
}

/// Slot-packed products: the owner sends its share pre-shifted into every
/// h2s slot, the evaluator multiplies grouped rows and runs the packed h2s
/// — the reconstructed products are exactly X·y (signed entries, empty
/// rows, a last group with fewer rows), the owner side is the unchanged
/// `h2s_owner`, and the bytes are the copies plus the same packed
/// ciphertexts as the Horner path.
#[test]
fn shifted_copies_and_grouped_rows_give_the_packed_products() {
    let kp = key1024();
    let pk = kp.public().clone();
    let mut r = rng(31);
    let (rows, cols) = (19usize, 6usize);
    let y: Vec<u64> = (0..cols).map(|_| r.gen()).collect();
    let mut t = Vec::new();
    for row in 0..rows {
        for c in 0..cols {
            if row != 4 && (row + 2 * c) % 3 != 0 {
                t.push((row, c, r.gen_range(-(1i64 << 14)..(1i64 << 14))));
            }
        }
    }
    let x = Csr::from_triplets(rows, cols, t);
    let value_bits = 64 + 15 + 4;
    let pack = h2s_packing(&pk, value_bits).unwrap();
    assert!(pack.slots > 1 && rows % pack.slots != 0, "the test wants several slots and a short last group");
    let copies = pack.slots.min(rows);
    let (a, b, cost) = run2(
        |ch| {
            crate::proto::s2h_owner_shifted(ch, kp, &y, copies, pack.slot_bits, &mut rng(32)).unwrap();
            h2s_owner(ch, kp, rows, value_bits).unwrap()
        },
        |ch| {
            let cts = crate::proto::recv_cts(ch, &pk, cols * copies, "shifted").unwrap();
            let g = x.grouped(copies);
            let mut f = crate::sparse::row_enc_stream(&g, &pk, &cts);
            crate::proto::h2s_eval_packed_with(ch, &pk, rows, value_bits, &mut rng(33), |i| Ok(f(i))).unwrap()
        },
    );
    for row in 0..rows {
        let want = x.row(row).fold(0u64, |acc, (c, v)| acc.wrapping_add((v as u64).wrapping_mul(y[c])));
        assert_eq!(a[row].wrapping_add(b[row]), want, "row {row}");
    }
    assert_eq!(cost.bytes_sent, (cols * copies * pk.ct_bytes()) as u64);
    assert_eq!(cost.bytes_recv, (pack.packed_len(rows) * pk.ct_bytes()) as u64);
}

/// The four-row IFMA kernels at their carry extremes: all-ones moduli (every
/// limb and every product half at its maximum) at limb counts around
/// multiples of four and of the 52-bit radix, bases M − 1, M − 2, 2^(b−1)
/// and a random one, all-ones exponents (every window a full multiply);
/// pow8, multi_exp8 and horner8 against GMP.
#[test]
fn ifma_kernels_at_carry_extremes_equal_gmp() {
    if !ifma::available() {
        eprintln!("ifma_kernels_at_carry_extremes_equal_gmp: no AVX-512 IFMA here (or HUSH_PAILLIER=gmp)");
        return;
    }
    let mut r = rng(31);
    for bits in [103u32, 104, 105, 155, 207, 208, 209, 311, 415, 416, 1039, 2047, 4095, 4096, 4097, 4159, 6144] {
        let m = (Integer::from(1) << bits) - 1u32;
        let ctx = ifma::MontCtx::new(&m).unwrap();
        let bases = [Integer::from(&m - 1u32), Integer::from(&m - 2u32), Integer::from(1) << (bits - 1), rand_int(&mut r, bits) % &m];
        let refs: Vec<&Integer> = bases.iter().collect();
        let e = (Integer::from(1) << 64u32) - 1u32;
        let got = ctx.pow8(&refs, &e);
        for (k, b) in bases.iter().enumerate() {
            assert_eq!(got[k], Integer::from(b.pow_mod_ref(&e, &m).unwrap()), "pow8 bits {bits} lane {k}");
        }
        let lanes: Vec<Vec<(&Integer, u64)>> = bases.iter().map(|b| vec![(b, u64::MAX), (&bases[0], u64::MAX >> 1)]).collect();
        let got = ctx.multi_exp8(&lanes);
        for (k, b) in bases.iter().enumerate() {
            let want = Integer::from(b.pow_mod_ref(&e, &m).unwrap()) * Integer::from(bases[0].pow_mod_ref(&Integer::from(u64::MAX >> 1), &m).unwrap()) % &m;
            assert_eq!(got[k], want, "multi_exp8 bits {bits} lane {k}");
        }
        let groups: Vec<&[Integer]> = vec![&bases[..]; 3];
        let got = ctx.horner8(&groups, 61);
        let mut want = Integer::from(0);
        for (i, b) in bases.iter().enumerate() {
            let sh = Integer::from(1) << (61 * i as u32);
            let term = Integer::from(b.pow_mod_ref(&sh, &m).unwrap());
            want = if i == 0 { term } else { want * term % &m };
        }
        for g in &got {
            assert_eq!(*g, want, "horner8 bits {bits}");
        }
    }
}

/// The curious key owner's view of h2s when the evaluator's ciphertexts come
/// already packed (`h2s_eval_packed_with`, LR's slot-shifted backward pass):
/// every slot the owner decrypts must carry its own fresh mask. Low-nibble
/// histograms of the owner's shares, per slot position (first and last slot
/// of a group), are uniform for v = 0 and v = 2^20 − 1 and agree between
/// the two. Fails if a slot were left unmasked or masked with a constant.
#[test]
fn h2s_packed_owner_view_is_independent_of_the_value() {
    let kp = key1024();
    let pk = kp.public().clone();
    let bits = 20u32;
    let pack = proto::h2s_packing(&pk, bits).unwrap();
    let n = 1024 * pack.slots;
    let hist = |v: u64, seed: u64| -> Vec<[f64; 16]> {
        let group = pk.encrypt(&pack.pack_plain(&vec![Integer::from(v); pack.slots]), &mut rng(seed)).unwrap();
        let (owner, _, _) = run2(
            |ch| h2s_owner(ch, kp, n, bits).unwrap(),
            |ch| proto::h2s_eval_packed_with(ch, &pk, n, bits, &mut rng(seed + 1), |_| Ok(group.clone())).unwrap(),
        );
        let mut h = vec![[0f64; 16]; 2];
        for (i, s) in owner.iter().enumerate() {
            let slot = i % pack.slots;
            if slot == 0 || slot == pack.slots - 1 {
                h[usize::from(slot != 0)][(s & 15) as usize] += 1.0;
            }
        }
        h
    };
    let (h0, h1) = (hist(0, 60), hist((1 << bits) - 1, 70));
    for (a, b) in h0.iter().zip(&h1) {
        assert_uniform_and_alike(a, b, (n / pack.slots) as f64 / 16.0, "the packed value");
    }
}

/// `mul_u64_batch` equals `mul_plain` one by one, at the scalar edges (0, 1,
/// 2^63, 2^64 − 1) and for random scalars with the top bit set, for batch
/// sizes that fill and do not fill the eight lanes.
#[test]
fn mul_u64_batch_equals_mul_plain() {
    let kp = key1024();
    let pk = kp.public();
    let mut r = rng(32);
    let cts: Vec<Ciphertext> = (0..19).map(|i| pk.encrypt_i64(i as i64 * 7919 - 50_000, &mut r)).collect();
    let mut ks: Vec<u64> = vec![0, 1, 1 << 63, u64::MAX];
    ks.extend((4..19).map(|_| r.gen::<u64>() | 1 << 63));
    for len in [1, 2, 8, 9, 19] {
        let pairs: Vec<(&Ciphertext, u64)> = cts.iter().zip(&ks).take(len).map(|(c, &k)| (c, k)).collect();
        let got = pk.mul_u64_batch(&pairs);
        for ((c, k), g) in pairs.iter().zip(&got) {
            assert_eq!(g, &pk.mul_plain(c, &Integer::from(*k)), "k = {k}");
        }
    }
}

/// A random sparse matrix with entries in ±(2^xb − 1), every extreme among
/// them, some empty rows.
fn random_csr(r: &mut StdRng, rows: usize, cols: usize, per_row: usize, xb: u32, neg: bool) -> Csr {
    let lim = (1i64 << xb) - 1;
    let mut t = vec![];
    for i in 0..rows {
        if i % 5 == 4 {
            continue; // empty row
        }
        for _ in 0..r.gen_range(1..=per_row) {
            let v = match r.gen_range(0..6) {
                0 => lim,
                1 if neg => -lim,
                2 => 1,
                3 if neg => -1,
                _ => r.gen_range(if neg { -lim } else { 1 }..=lim),
            };
            t.push((i, r.gen_range(0..cols), v));
        }
    }
    let mut x = Csr::from_triplets(rows, cols, t);
    // duplicates were summed: clip back into the bound
    for v in x.values.iter_mut() {
        *v = (*v).clamp(-lim, lim);
    }
    x
}

/// The slot-packed matrix–vector product ([`packed`]) equals X·s over
/// Z_{2^64} up to +1 per row (the integer shares' floor), for matrices
/// with negative and positive extremes, empty rows, lengths that are not a
/// multiple of K, shares 0 and 2^64 − 1, K from 1 to the key's largest;
/// bytes and rounds pinned: ⌈d/K⌉ ciphertexts one way, one per row back,
/// two flights.
#[test]
fn packed_matvec_equals_plaintext_and_pins_its_bytes() {
    let kp = key1024();
    let pk = kp.public().clone();
    let mut r = rng(90);
    let mut ks = std::collections::BTreeSet::new();
    for (rows, cols, per_row, k_max, neg) in
        [(37, 23, 6, 8, true), (16, 5, 4, 8, true), (9, 40, 6, 1, true), (20, 31, 8, 3, false), (0, 7, 2, 4, true), (8, 1, 1, 8, true), (70, 200, 12, 2, true)]
    {
        let xb = 16;
        let x = random_csr(&mut r, rows, cols, per_row, xb, neg);
        let mut s: Vec<u64> = (0..cols).map(|_| r.gen()).collect();
        s[0] = 0;
        s[cols - 1] = u64::MAX;
        let layout = packed::PackedVec::new(cols, xb, pk.bits(), k_max).unwrap();
        ks.insert(layout.k);
        let (o, e, cost) = run2(
            |ch| packed::matvec_packed_owner(ch, kp, &s, rows, layout, &mut rng(91)).unwrap(),
            |ch| packed::matvec_packed_eval(ch, &pk, &x, layout, &mut rng(92)).unwrap(),
        );
        let want = x.matvec_ring(&s);
        assert_eq!((o.len(), e.len()), (rows, rows));
        for i in 0..rows {
            let d = o[i].wrapping_add(e[i]).wrapping_sub(want[i]);
            assert!(d <= 1, "rows {rows} cols {cols} K {}: row {i} off by {d}", layout.k);
        }
        assert_eq!(cost.bytes_sent, (layout.cts() * pk.ct_bytes()) as u64, "owner → evaluator: ⌈d/K⌉ ciphertexts");
        assert_eq!(cost.bytes_recv, (rows * pk.ct_bytes()) as u64, "evaluator → owner: one per row");
        assert_eq!(cost.rounds, if rows == 0 { 1 } else { 2 });
    }
    // K = 1 (no packing), K = 2 and larger ones up to what a 1024-bit key fits all ran
    assert!(ks.contains(&1) && ks.contains(&2) && ks.iter().any(|&k| k >= 4), "{ks:?}");
}

/// The eight-lane (IFMA) and the row-by-row (GMP) computations of the
/// packed products give the same plaintexts, at 2,048 bits where K = 6.
#[test]
fn packed_rows_ifma_equal_gmp() {
    let kp = key2048();
    let pk = kp.public().clone();
    let mut r = rng(93);
    let (rows, cols) = (19, 50);
    let x = random_csr(&mut r, rows, cols, 10, 16, true);
    let s: Vec<u64> = (0..cols).map(|_| r.gen()).collect();
    let layout = packed::PackedVec::new(cols, 16, pk.bits(), 6).unwrap();
    assert_eq!(layout.k, 6);
    let (_, e, _) = run2(
        |ch| packed::matvec_packed_owner(ch, kp, &s, rows, layout, &mut rng(94)).unwrap(),
        |ch| packed::matvec_packed_eval(ch, &pk, &x, layout, &mut rng(95)).unwrap(),
    );
    assert_eq!(e.len(), rows);
    // direct: the same packed ciphertexts, rows alone (GMP) vs together
    let cts: Vec<Ciphertext> = s
        .chunks(layout.k)
        .map(|c| {
            let mut m = Integer::new();
            for &v in c.iter().rev() {
                m <<= layout.slot_bits;
                m += v;
            }
            kp.encrypt(&m, &mut r).unwrap()
        })
        .collect();
    let comp = packed::complements(&pk, &cts, layout);
    let together = packed::rows_packed(&x, &pk, &cts, &comp, layout, 0..rows).unwrap();
    let want = x.matvec_ring(&s);
    for (i, (t, w)) in together.iter().zip(&want).enumerate() {
        let alone = packed::rows_packed(&x, &pk, &cts, &comp, layout, i..i + 1).unwrap();
        let v = kp.decrypt(t);
        assert_eq!(kp.decrypt(&alone[0]), v, "row {i}");
        // and the wanted sum sits in slot K − 1 of the plaintext, mod 2^64
        assert_eq!((v >> layout.shift()).to_u64_wrapping(), *w, "row {i}");
    }
}

/// The curious key owner in the packed product: it decrypts V + r, where V
/// carries more of the evaluator's row than the wanted sum (the slots that
/// moved up and down). Its shares' low nibbles are uniform for a matrix of
/// ones and for one of extremes, and the two agree (χ² as in the h2s
/// tests); without the mask they would be the (deterministic) wanted sums.
#[test]
fn packed_matvec_owner_view_is_independent_of_the_matrix() {
    let kp = key1024();
    let pk = kp.public().clone();
    let (rows, cols) = (2048, 6);
    let layout = packed::PackedVec::new(cols, 16, pk.bits(), 8).unwrap();
    let s: Vec<u64> = (0..cols as u64).map(|j| j * 0x1234_5678_9abc + 7).collect();
    let hist = |v: i64, seed: u64| -> [f64; 16] {
        let x = Csr::from_triplets(rows, cols, (0..rows).flat_map(|i| (0..cols).map(move |j| (i, j, v))).collect());
        let (owner, _, _) = run2(
            |ch| packed::matvec_packed_owner(ch, kp, &s, rows, layout, &mut rng(seed)).unwrap(),
            |ch| packed::matvec_packed_eval(ch, &pk, &x, layout, &mut rng(seed + 1)).unwrap(),
        );
        let mut h = [0f64; 16];
        for o in owner {
            h[(o & 15) as usize] += 1.0;
        }
        h
    };
    let (h0, h1) = (hist(1, 80), hist(-((1 << 16) - 1), 82));
    assert_uniform_and_alike(&h0, &h1, rows as f64 / 16.0, "the matrix");
}

/// Untrusted input in the packed product: too few ciphertexts from the
/// owner, an out-of-range one, a matrix above the layout's bound (refused
/// before anything is received), a share vector of the wrong length.
#[test]
fn packed_matvec_refuses_bad_input() {
    let kp = key1024();
    let pk = kp.public().clone();
    let layout = packed::PackedVec::new(10, 16, pk.bits(), 8).unwrap();
    let x = Csr::from_triplets(3, 10, vec![(0, 1, 5), (2, 9, -3)]);
    // too few ciphertexts, then the link closes
    let (_, e, _) = run2(
        |ch| send_cts(ch, &pk, &[kp.encrypt(&Integer::from(1), &mut rng(1)).unwrap()]).unwrap(),
        |ch| packed::matvec_packed_eval(ch, &pk, &x, layout, &mut rng(2)).unwrap_err(),
    );
    assert!(matches!(e, Error::Transport(_) | Error::Malformed { .. }), "{e}");
    // a ciphertext that is not below n²
    let mut bad = pk.n2().clone().to_digits::<u8>(rug::integer::Order::Msf);
    bad.resize(pk.ct_bytes(), 0xff);
    let bytes: Vec<u8> = std::iter::repeat_n(bad, layout.cts()).flatten().collect();
    let (_, e, _) = run2(
        |ch| ch.send(&bytes).unwrap(),
        |ch| packed::matvec_packed_eval(ch, &pk, &x, layout, &mut rng(2)).unwrap_err(),
    );
    assert!(matches!(e, Error::BadCiphertext { .. } | Error::Malformed { .. }), "{e}");
    // entries above the bound
    let big = Csr::from_triplets(1, 10, vec![(0, 0, 1 << 16)]);
    let (mut a, _b) = MemChannel::pair();
    let e = packed::matvec_packed_eval(&mut a, &pk, &big, layout, &mut rng(3)).unwrap_err();
    assert!(matches!(e, Error::PlaintextRange(_)), "{e}");
    let e = packed::send_packed(&mut a, kp, &[1, 2, 3], layout, &mut rng(4)).unwrap_err();
    assert!(matches!(e, Error::Packing(_)), "{e}");
}

/// Batched rerandomisation (the public fixed-base table on the IFMA lanes
/// where the CPU has them): every factor is an encryption of zero, the
/// plaintexts are kept, the ciphertexts change, and no two factors are
/// equal; batch sizes that fill and do not fill the eight lanes.
#[test]
fn rerandomize_batch_keeps_plaintexts() {
    for kp in [key1024(), key2048()] {
        let pk = kp.public();
        let mut r = rng(33);
        for count in [1usize, 7, 8, 9, 20] {
            let ms: Vec<Integer> = (0..count).map(|i| Integer::from(i as u64 * 0x9e37_79b9 + 1)).collect();
            let cs: Vec<Ciphertext> = ms.iter().map(|m| pk.encrypt(m, &mut r).unwrap()).collect();
            let rr = pk.rerandomize_batch(&cs, &mut r);
            for ((m, c), d) in ms.iter().zip(&cs).zip(&rr) {
                assert_ne!(c, d);
                pk.validate(d.as_integer(), "t").unwrap();
                assert_eq!(&kp.decrypt(d), m);
            }
            let f = pk.random_factors(count, &mut r);
            let distinct: std::collections::BTreeSet<_> = f.iter().map(|x| x.to_string()).collect();
            assert_eq!(distinct.len(), count);
            for x in &f {
                assert_eq!(kp.decrypt(&Ciphertext(x.clone())), 0);
            }
        }
    }
}
