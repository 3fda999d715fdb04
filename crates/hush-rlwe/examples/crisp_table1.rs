//! CRISP Table I's comparison on hush's linear layers: CRISP's packing
//! (value + i·MAC in one ciphertext, [`hush_rlwe::ckks_crisp`]) against
//! SIMC's layout (value and MAC in two ciphertexts), same exact scale,
//! parameters (N = 8192, four 50-bit primes) and flooding, for the fully
//! connected layers of benchmarks A and B and one of B's convolutions.
//! Time: the client's wall time from its first byte sent to its shares
//! decrypted (both parties in this process over an in-memory link, no
//! network emulation), best of 3; bytes: both directions, setup excluded.
//! `cargo run --release -p hush-rlwe --example crisp_table1`
use hush_primitives::{Block, Prg};
use hush_rlwe::ckks_crisp::{self, Client, Config, Server};
use hush_rlwe::cheetah::Shape;
use hush_rlwe::Context;
use hush_transport::{Channel, MemChannel};
use std::sync::Arc;
use std::time::Instant;

fn one(ctx: &Arc<Context>, cfg: Config, shape: &Shape, seed: u128) -> (f64, u64) {
    let k = cfg.k;
    let m = (1u128 << k) - 1;
    let mut p = Prg::new(Block(seed));
    let mut r = || ((p.next_u64() as u128) | ((p.next_u64() as u128) << 64)) & m;
    let (n_in, n_out) = (shape.in_len(), shape.out_len());
    let v: Vec<u128> = (0..n_in).map(|_| r()).collect();
    let mm: Vec<u128> = (0..n_in).map(|_| r()).collect();
    let w: Vec<u64> = (0..shape.weight_len()).map(|i| (i as u64 * 2654435761) % 8191).collect();
    let (mut ca, mut cb) = MemChannel::pair();
    let (c2, s2, v2, m2) = (ctx.clone(), shape.clone(), v.clone(), mm.clone());
    let t = std::thread::spawn(move || {
        let mut s = Server::setup(&mut cb, c2, cfg, Prg::new(Block(seed + 1))).unwrap();
        s.linear(&mut cb, &s2, &w, &vec![0; n_out], &vec![0; n_out], &v2, &m2).unwrap();
    });
    let mut c = Client::setup(&mut ca, ctx.clone(), cfg, Prg::new(Block(seed + 2))).unwrap();
    let c0 = ca.cost();
    let t0 = Instant::now();
    c.linear(&mut ca, shape, &v, &mm).unwrap();
    let dt = t0.elapsed().as_secs_f64();
    let c1 = ca.cost();
    t.join().unwrap();
    (dt, c1.bytes_sent - c0.bytes_sent + c1.bytes_recv - c0.bytes_recv)
}

fn main() {
    let ctx = Arc::new(Context::new(ckks_crisp::params()).unwrap());
    let rows = [
        ("A: FC 256→100", Shape::Fc { n_in: 256, n_out: 100 }),
        ("A: FC 100→10", Shape::Fc { n_in: 100, n_out: 10 }),
        ("B: FC 1024→10", Shape::Fc { n_in: 1024, n_out: 10 }),
        ("B: conv 64→64 3×3, 16×16", Shape::Conv { c_in: 64, h: 16, w: 16, c_out: 64, kh: 3, kw: 3, stride: [1, 1], pads: [1; 4] }),
    ];
    println!("| layer | layout | ciphertexts up / down | time (best of 3) | bytes |");
    println!("|---|---|---|---|---|");
    for (name, sh) in rows {
        for cfg in [Config::new(37, 77), Config::two_ciphertexts(37, 77)] {
            let lay = ckks_crisp::layout(&ctx, &cfg, &sh).unwrap();
            let (up, down) = ckks_crisp::layer_bytes(&ctx, &cfg, &sh).unwrap();
            let best = (0..3).map(|i| one(&ctx, cfg, &sh, 10 + i).0).fold(f64::INFINITY, f64::min);
            let label = if cfg.packed { "CRISP: value + i·MAC, one ciphertext" } else { "SIMC: value, MAC in two ciphertexts" };
            println!(
                "| {name} | {label} | {} / {} | {:.3} s | {:.2} MB |",
                lay.in_cts() * cfg.planes(),
                lay.out_cts() * cfg.planes(),
                best,
                (up + down) as f64 / 1e6
            );
        }
    }
}
