//! The RLWE core: parameters, encrypt/decrypt, homomorphic add and
//! plaintext multiply, modulus switching. Deterministic (fixed seeds).

use hush_primitives::{Block, Prg};
use hush_rlwe::he::SecretKey;
use hush_rlwe::ring::Context;
use hush_rlwe::Params;

fn decrypt_full(ctx: &Context, sk: &SecretKey, b: &[u64], a: &[u64], bits: u32) -> Vec<u64> {
    let n = ctx.n;
    let l = ctx.levels();
    let idx: Vec<u32> = (0..n as u32).collect();
    let mut bb = vec![0u64; n * l];
    for i in 0..l {
        for j in 0..n {
            bb[j * l + i] = b[i * n + j];
        }
    }
    let ph = sk.phase_full(ctx, a, &idx, &bb);
    ph.iter()
        .map(|p| {
            let mut t = vec![0u64; ctx.poly_len()];
            for i in 0..l {
                t[i * n] = p[i];
            }
            ctx.mod_switch_coeff(&t, 0, bits)
        })
        .collect()
}

fn rand_msg(prg: &mut Prg, n: usize, bits: u32) -> Vec<u64> {
    (0..n).map(|_| prg.next_u64() & ((1u64 << bits) - 1)).collect()
}

#[test]
fn parameter_sets_meet_the_standard() {
    for p in [Params::he128_n4096(), Params::he128_n8192_p50(), Params::he128_n8192(), Params::he128_n8192_wide()] {
        let max = Params::standard_max_log_q(p.n).unwrap() as f64;
        assert!(p.secure && p.log_q() <= max, "{}: log q {} > {max}", p.name, p.log_q());
        Context::new(p).unwrap();
    }
    assert!(!Params::insecure_test_n256().secure);
    Context::new(Params::insecure_test_n256()).unwrap();
    // a set above the standard's bound is refused
    let mut bad = Params::he128_n4096();
    bad.primes.push(0x0fff_ffff_ffff_c001);
    assert!(Context::new(bad).is_err());
    let mut bad = Params::insecure_test_n256();
    bad.primes[1] = 1_000_003; // not ≡ 1 mod 2N
    assert!(Context::new(bad).is_err());
}

#[test]
fn encrypt_decrypt_round_trip() {
    for (p, bits) in [(Params::insecure_test_n256(), 37), (Params::he128_n8192(), 37), (Params::he128_n8192_p50(), 37), (Params::he128_n8192_p50(), 47), (Params::he128_n4096(), 20), (Params::insecure_test_n256(), 1)] {
        let ctx = Context::new(p).unwrap();
        let mut prg = Prg::new(Block(7));
        let sk = SecretKey::generate(&ctx, &mut prg);
        let mut m = rand_msg(&mut prg, ctx.n, bits);
        m[0] = 0;
        m[1] = (1 << bits) - 1;
        let ct = sk.encrypt(&ctx, bits, &m, &mut prg);
        let a = ctx.uniform_from_seed(ct.seed);
        assert_eq!(decrypt_full(&ctx, &sk, &ct.b, &a, bits), m);
        // a wrong key does not decrypt
        let sk2 = SecretKey::generate(&ctx, &mut prg);
        assert_ne!(decrypt_full(&ctx, &sk2, &ct.b, &a, bits), m);
    }
}

#[test]
fn homomorphic_add_and_plaintext_multiply() {
    let ctx = Context::new(Params::insecure_test_n256()).unwrap();
    let bits = 37;
    let t = 1u64 << bits;
    let mut prg = Prg::new(Block(11));
    let sk = SecretKey::generate(&ctx, &mut prg);
    let (m1, m2) = (rand_msg(&mut prg, ctx.n, bits), rand_msg(&mut prg, ctx.n, bits));
    let (c1, c2) = (sk.encrypt(&ctx, bits, &m1, &mut prg), sk.encrypt(&ctx, bits, &m2, &mut prg));
    let (a1, a2) = (ctx.uniform_from_seed(c1.seed), ctx.uniform_from_seed(c2.seed));
    let mut b = c1.b.clone();
    ctx.add_assign(&mut b, &c2.b);
    let mut a = a1.clone();
    ctx.add_assign(&mut a, &a2);
    let sum: Vec<u64> = m1.iter().zip(&m2).map(|(x, y)| (x + y) % t).collect();
    assert_eq!(decrypt_full(&ctx, &sk, &b, &a, bits), sum);
    // plaintext multiply by w with centered coefficients (full ℓ-bit range)
    let w: Vec<i64> = (0..ctx.n).map(|_| (prg.next_u64() & (t - 1)) as i64 - (t / 2) as i64).collect();
    let mut wn = ctx.from_signed(&w);
    ctx.ntt(&mut wn);
    let mul = |x: &[u64]| {
        let mut y = x.to_vec();
        ctx.ntt(&mut y);
        let mut z = ctx.mul(&y, &wn);
        ctx.intt(&mut z);
        z
    };
    let (pb, pa) = (mul(&c1.b), mul(&a1));
    let mut want = vec![0i128; ctx.n];
    for i in 0..ctx.n {
        for j in 0..ctx.n {
            let v = m1[i] as i128 * w[j] as i128;
            if i + j < ctx.n {
                want[i + j] += v;
            } else {
                want[i + j - ctx.n] -= v;
            }
        }
    }
    let want: Vec<u64> = want.iter().map(|v| v.rem_euclid(t as i128) as u64).collect();
    assert_eq!(decrypt_full(&ctx, &sk, &pb, &pa, bits), want);
}

#[test]
fn modulus_switching_keeps_the_message() {
    for p in [Params::insecure_test_n256(), Params::he128_n8192(), Params::he128_n8192_p50()] {
        let ctx = Context::new(p).unwrap();
        let bits = 37;
        let k = bits + (ctx.n as f64 + 1.0).log2().ceil() as u32 + 2;
        let mut prg = Prg::new(Block(5));
        let sk = SecretKey::generate(&ctx, &mut prg);
        let m = rand_msg(&mut prg, ctx.n, bits);
        let ct = sk.encrypt(&ctx, bits, &m, &mut prg);
        let a = ctx.uniform_from_seed(ct.seed);
        let a2: Vec<u64> = (0..ctx.n).map(|j| ctx.mod_switch_coeff(&a, j, k)).collect();
        let b2: Vec<u64> = (0..ctx.n).map(|j| ctx.mod_switch_coeff(&ct.b, j, k)).collect();
        let idx: Vec<u32> = (0..ctx.n as u32).collect();
        assert_eq!(sk.decrypt_switched(&ctx, bits, k, &a2, &idx, &b2), m);
        // too few bits after the switch (k = ℓ + 2) breaks decryption: the bound is needed
        let k2 = bits + 2;
        let a3: Vec<u64> = (0..ctx.n).map(|j| ctx.mod_switch_coeff(&a, j, k2)).collect();
        let b3: Vec<u64> = (0..ctx.n).map(|j| ctx.mod_switch_coeff(&ct.b, j, k2)).collect();
        assert_ne!(sk.decrypt_switched(&ctx, bits, k2, &a3, &idx, &b3), m);
    }
}

#[test]
fn encoding_is_exact_rounding() {
    // encode(m) = round(q·m/2^ℓ): check against big-integer arithmetic on two primes' CRT
    let ctx = Context::new(Params::he128_n4096()).unwrap();
    let q: u128 = ctx.primes()[0] as u128 * ctx.primes()[1] as u128;
    for bits in [1u32, 13, 37] {
        let ms: Vec<u64> = vec![0, 1, 2, (1 << bits) - 1, 12345 & ((1 << bits) - 1)];
        let mut v = ms.clone();
        v.resize(ctx.n, 0);
        let e = ctx.encode(bits, &v);
        for (j, &m) in ms.iter().enumerate() {
            // round(q·m/2^bits) with q < 2^109, m < 2^37: q·m < 2^146 — split
            let t = 1u128 << bits;
            let (qh, ql) = (q / t, q % t);
            let want = (qh * m as u128 + (ql * m as u128 + t / 2) / t) % q;
            let got = ctx.crt2_centered(e[j], e[ctx.n + j]).rem_euclid(q as i128) as u128;
            assert_eq!(got, want, "bits {bits} m {m}");
        }
    }
}

#[test]
fn fast_switch_agrees_with_the_reference_switch() {
    for p in [Params::insecure_test_n256(), Params::he128_n8192_wide(), Params::he128_n4096()] {
        let ctx = Context::new(p).unwrap();
        let mut prg = Prg::new(Block(42));
        for k in [17u32, 53, 63] {
            let sw = ctx.switcher(k);
            let mut diff = 0;
            for _ in 0..8 {
                let a = ctx.uniform(&mut prg);
                for j in 0..ctx.n {
                    let (x, y) = (ctx.switch(&sw, &a, j), ctx.mod_switch_coeff(&a, j, k));
                    let d = x.wrapping_sub(y) & ((1u64 << k) - 1);
                    assert!(d == 0 || d == 1 || d == (1u64 << k) - 1, "k {k}: {x} vs {y}");
                    diff += (d != 0) as usize;
                }
            }
            assert!(diff <= 2, "k {k}: {diff} roundings differ");
        }
    }
}

/// The NTT kernels named in benchmark records are the ones this build can
/// reach: without the `ntt-avx512` feature (as `scripts/test.sh` also
/// builds this crate) never the AVX-512 ones.
#[test]
fn ntt_path_names_what_this_build_and_cpu_can_run() {
    let p = hush_rlwe::ntt_path();
    eprintln!("tfhe-ntt kernels in this run: {p}");
    assert!(["avx512", "avx2", "scalar"].contains(&p));
    if !cfg!(feature = "ntt-avx512") {
        assert_ne!(p, "avx512", "built without ntt-avx512");
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        assert_ne!(p, "scalar", "this CPU has AVX2 and FMA");
    }
}
