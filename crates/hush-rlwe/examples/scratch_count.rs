use hush_rlwe::cheetah::{plan, Config, Shape};
use hush_rlwe::{Context, Params};
use std::time::Instant;
fn conv(c_in: usize, h: usize, c_out: usize, k: usize, s: usize, p: usize) -> Shape {
    Shape::Conv { c_in, h, w: h, c_out, kh: k, kw: k, stride: [s, s], pads: [p; 4] }
}
fn resnet50() -> Vec<Shape> {
    let mut v = vec![conv(3, 224, 64, 7, 2, 3)];
    let (mut c, mut h) = (64, 56);
    for (i, (blocks, width)) in [(3, 64), (4, 128), (6, 256), (3, 512)].into_iter().enumerate() {
        for j in 0..blocks {
            let s = if j == 0 && i > 0 { 2 } else { 1 };
            let out = width * 4;
            v.push(conv(c, h, width, 1, 1, 0));
            v.push(conv(width, h, width, 3, s, 1));
            let h2 = (h + 2 - 3) / s + 1;
            v.push(conv(width, h2, out, 1, 1, 0));
            if s != 1 || c != out { v.push(conv(c, h, out, 1, s, 0)); }
            c = out; h = h2;
        }
    }
    v.push(Shape::Fc { n_in: 2048, n_out: 1000 });
    v
}
fn main() {
    let pname = std::env::args().nth(1).unwrap_or("he128-n8192".into());
    let p = Params::he128_n8192_p50();
    let ctx = Context::new(p).unwrap();
    let cfg = Config::new(37);
    let (mut ti, mut tw, mut tp, mut to) = (0, 0, 0, 0);
    for s in resnet50() {
        match plan(&ctx, &cfg, &s) {
            Ok((l, b)) => {
                let w = l.rows * l.groups;
                println!("{:?} blk {:?} g{} t{} r{} in {} wntt {} prod {} out {} F{} k{}", s, l.blocking(), l.groups, l.tiles, l.rows, l.in_cts(), w, l.products(), l.out_cts(), b.flood_log, b.k);
                ti += l.in_cts(); tw += w; tp += l.products(); to += l.out_cts();
            }
            Err(e) => println!("{:?} ERR {e}", s),
        }
    }
    println!("TOTAL in {ti} wntt {tw} prod {tp} out {to} bytes {}", ti * 204816 + to * 54272);
    if std::env::var("QUIT").is_ok() { return; }
    // primitive costs
    let mut a = ctx.uniform(&mut hush_primitives::Prg::new(hush_primitives::Block(1)));
    let b = a.clone();
    let mut acc = ctx.zero();
    let reps = 2000;
    let t = Instant::now(); for _ in 0..reps { ctx.ntt(&mut a); } let fwd = t.elapsed().as_secs_f64() / reps as f64;
    let t = Instant::now(); for _ in 0..reps { ctx.intt(&mut a); } let inv = t.elapsed().as_secs_f64() / reps as f64;
    let t = Instant::now(); for _ in 0..reps { ctx.mul_acc(&mut acc, &a, &b); } let ma = t.elapsed().as_secs_f64() / reps as f64;
    println!("per poly ({} primes): fwd {:.1} us inv {:.1} us mul_acc {:.1} us", ctx.levels(), fwd * 1e6, inv * 1e6, ma * 1e6);
    println!("server est: in 2 fwd {:.1}s, wntt {:.1}s, prod {:.1}s, out(1 fwd 2 inv 2 mulacc) {:.1}s",
        (2 * ti) as f64 * fwd, tw as f64 * fwd, (2 * tp) as f64 * ma, to as f64 * (fwd + 2.0 * inv + 2.0 * ma));
}
#[allow(dead_code)]
fn primes_below(bits: u32, n: usize, count: usize) -> Vec<u64> {
    let mut out = vec![];
    let mut p = (1u64 << bits) - (1u64 << 14) + 1; // ≡ 1 mod 2^14
    while out.len() < count {
        if tfhe_ntt::prime64::Plan::try_new(n, p).is_some() { out.push(p); }
        p -= 1 << 14;
    }
    out
}
pub fn ifma_bench() {
    use tfhe_ntt::prime64::Plan;
    for bits in [50u32, 60] {
        let ps = primes_below(bits, 8192, 4);
        let pl = Plan::try_new(8192, ps[0]).unwrap();
        let mut a: Vec<u64> = (0..8192u64).map(|i| i * 7919 % ps[0]).collect();
        let b = a.clone(); let mut acc = vec![0u64; 8192];
        let reps = 5000;
        let t = Instant::now(); for _ in 0..reps { pl.fwd(&mut a); } let f = t.elapsed().as_secs_f64()/reps as f64;
        let t = Instant::now(); for _ in 0..reps { pl.mul_accumulate(&mut acc, &a, &b); } let m = t.elapsed().as_secs_f64()/reps as f64;
        println!("{bits}-bit primes {:x?} ifma {}: fwd {:.1} us mul_acc {:.1} us", ps, pl.use_ifma(), f*1e6, m*1e6);
    }
}
