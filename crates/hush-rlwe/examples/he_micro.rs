//! Micro-benchmark of the RLWE building blocks (N = 8192, three 60-bit
//! primes): NTT, NTT-domain multiply-accumulate, modulus switch, public-key
//! encryption of zero. `cargo run --release -p hush-rlwe --example he_micro`.
use hush_primitives::{Block, Prg};
use hush_rlwe::he::{PublicKey, SecretKey};
use hush_rlwe::{Context, Params};
use std::time::Instant;

fn time(what: &str, reps: usize, mut f: impl FnMut()) {
    let t = Instant::now();
    for _ in 0..reps {
        f();
    }
    println!("{what:<40} {:>9.1} µs", t.elapsed().as_secs_f64() * 1e6 / reps as f64);
}

fn main() {
    let ctx = Context::new(Params::he128_n8192()).unwrap();
    let mut prg = Prg::new(Block(1));
    let mut a = ctx.uniform(&mut prg);
    let b = ctx.uniform(&mut prg);
    let mut acc = ctx.zero();
    time("ntt (3 primes)", 200, || ctx.ntt(&mut a));
    time("intt (3 primes)", 200, || ctx.intt(&mut a));
    time("mul_acc (3 primes)", 200, || ctx.mul_acc(&mut acc, &a, &b));
    let sw = ctx.switcher(53);
    let mut s = 0u64;
    time("mod switch, 8192 coefficients", 100, || {
        for j in 0..ctx.n {
            s ^= ctx.switch(&sw, &a, j);
        }
    });
    let sk = SecretKey::generate(&ctx, &mut prg);
    let pk = PublicKey::from_seeded(&ctx, &sk.public_key(&ctx, &mut prg));
    time("Enc_pk(0)", 50, || {
        let _ = pk.encrypt_zero(&ctx, &mut prg);
    });
    time("sk encrypt (seeded)", 50, || {
        let _ = sk.encrypt(&ctx, 37, &vec![5; ctx.n], &mut prg);
    });
    time("zero a poly buffer", 200, || acc.iter_mut().for_each(|v| *v = 0));
    println!("{s}");
}
