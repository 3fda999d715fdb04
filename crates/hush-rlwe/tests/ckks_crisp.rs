//! CRISP's linear layers (value + X^(N/2)·MAC in one ciphertext, exact
//! scale q/2^k) over an in-memory channel: conv and FC against a plaintext
//! reference on the lifted ring, bytes and rounds pinned, malformed peers,
//! the flooding view, and the documented well-formedness gap played by a
//! malicious client.

use hush_primitives::{Block, Prg};
use hush_rlwe::ckks_crisp::{self, Client, Config, Server};
use hush_rlwe::cheetah::Shape;
use hush_rlwe::{Context, Params};
use hush_transport::{Channel, MemChannel};
use std::sync::Arc;

const ELL: u32 = 37;
const K: u32 = 77;

fn kmask() -> u128 {
    (1u128 << K) - 1
}
fn sext(w: u64) -> u128 {
    let sh = 128 - ELL;
    ((((w as u128) << sh) as i128 >> sh) as u128) & kmask()
}
fn r128(p: &mut Prg) -> u128 {
    ((p.next_u64() as u128) | ((p.next_u64() as u128) << 64)) & kmask()
}

/// W·x + b mod 2^k with the ℓ-bit weights sign-extended.
fn reference(shape: &Shape, w: &[u64], x: &[u128], b: &[u128]) -> Vec<u128> {
    let m = kmask();
    let mut y = match *shape {
        Shape::Fc { n_in, n_out } => (0..n_out).map(|i| (0..n_in).fold(0u128, |a, j| a.wrapping_add(sext(w[i * n_in + j]).wrapping_mul(x[j])))).collect::<Vec<_>>(),
        Shape::Conv { c_in, h, w: wd, c_out, kh, kw, stride, pads } => {
            let oh = (h + pads[0] + pads[2] - kh) / stride[0] + 1;
            let ow = (wd + pads[1] + pads[3] - kw) / stride[1] + 1;
            let mut y = vec![0u128; c_out * oh * ow];
            for mo in 0..c_out {
                for i in 0..oh {
                    for j in 0..ow {
                        let mut acc = 0u128;
                        for c in 0..c_in {
                            for l in 0..kh {
                                for l2 in 0..kw {
                                    let (yi, xj) = ((i * stride[0] + l) as isize - pads[0] as isize, (j * stride[1] + l2) as isize - pads[1] as isize);
                                    if yi >= 0 && (yi as usize) < h && xj >= 0 && (xj as usize) < wd {
                                        acc = acc.wrapping_add(sext(w[((mo * c_in + c) * kh + l) * kw + l2]).wrapping_mul(x[(c * h + yi as usize) * wd + xj as usize]));
                                    }
                                }
                            }
                        }
                        y[(mo * oh + i) * ow + j] = acc;
                    }
                }
            }
            y
        }
    };
    for (v, bb) in y.iter_mut().zip(b) {
        *v = v.wrapping_add(*bb) & m;
    }
    y
}

struct Out {
    y: Vec<u128>,
    t: Vec<u128>,
    up: u64,
    down: u64,
    rounds: u32,
}

type Hook = Box<dyn FnMut(usize, &mut hush_rlwe::he::SeededCt) + Send>;

/// One layer between an honest server and a client (optionally altering
/// its ciphertexts); returns the reconstructed (value, MAC) outputs.
#[allow(clippy::too_many_arguments)]
fn run(params: Params, shape: &Shape, w: &[u64], x: &[u128], mu: u128, b: &[u128], seed: u128, hook: Option<Hook>) -> Result<Out, String> {
    run_cfg(params, Config::new(ELL, K), shape, w, x, mu, b, seed, hook)
}

#[allow(clippy::too_many_arguments)]
fn run_cfg(params: Params, cfg: Config, shape: &Shape, w: &[u64], x: &[u128], mu: u128, b: &[u128], seed: u128, hook: Option<Hook>) -> Result<Out, String> {
    let ctx = Arc::new(Context::new(params).unwrap());
    let m = kmask();
    let mut prg = Prg::new(Block(seed));
    let mx: Vec<u128> = x.iter().map(|v| v.wrapping_mul(mu) & m).collect();
    let (vs, ms): (Vec<u128>, Vec<u128>) = (0..x.len()).map(|_| (r128(&mut prg), r128(&mut prg))).unzip();
    let vc: Vec<u128> = x.iter().zip(&vs).map(|(a, s)| a.wrapping_sub(*s) & m).collect();
    let mc: Vec<u128> = mx.iter().zip(&ms).map(|(a, s)| a.wrapping_sub(*s) & m).collect();
    let bm: Vec<u128> = b.iter().map(|v| v.wrapping_mul(mu) & m).collect();
    let (mut ca, mut cb) = MemChannel::pair();
    let (ctx2, sh2, w2) = (ctx.clone(), shape.clone(), w.to_vec());
    let b2 = b.to_vec();
    let srv = std::thread::spawn(move || -> Result<(Vec<u128>, Vec<u128>), String> {
        let mut s = Server::setup(&mut cb, ctx2, cfg, Prg::new(Block(seed + 1))).map_err(|e| e.to_string())?;
        s.linear(&mut cb, &sh2, &w2, &b2, &bm, &vs, &ms).map_err(|e| e.to_string())
    });
    let mut c = Client::setup(&mut ca, ctx, cfg, Prg::new(Block(seed + 2))).unwrap();
    let c0 = ca.cost();
    let mut hook = hook;
    let r = match hook.as_mut() {
        Some(h) => c.linear_with(&mut ca, shape, &vc, &mc, Some(&mut **h)),
        None => c.linear(&mut ca, shape, &vc, &mc),
    };
    let c1 = ca.cost();
    drop(ca);
    let s = srv.join().unwrap();
    let (yc, tc) = r.map_err(|e| e.to_string())?;
    let (ys, ts) = s?;
    Ok(Out {
        y: yc.iter().zip(&ys).map(|(a, b)| a.wrapping_add(*b) & m).collect(),
        t: tc.iter().zip(&ts).map(|(a, b)| a.wrapping_add(*b) & m).collect(),
        up: c1.bytes_sent - c0.bytes_sent,
        down: c1.bytes_recv - c0.bytes_recv,
        rounds: c1.rounds - c0.rounds,
    })
}

fn check(params: Params, shape: Shape, seed: u128) -> Out {
    check_cfg(params, Config::new(ELL, K), shape, seed)
}

fn check_cfg(params: Params, cfg: Config, shape: Shape, seed: u128) -> Out {
    let mut p = Prg::new(Block(seed * 13 + 5));
    let wm = (1u64 << ELL) - 1;
    // weights: random ℓ-bit ring elements (worst case), and the edges
    let mut w: Vec<u64> = (0..shape.weight_len()).map(|_| p.next_u64() & wm).collect();
    w[0] = 1 << (ELL - 1); // −2^(ℓ−1)
    if w.len() > 1 {
        w[1] = wm >> 1; // 2^(ℓ−1) − 1
    }
    let mut x: Vec<u128> = (0..shape.in_len()).map(|_| r128(&mut p)).collect();
    x[0] = kmask();
    let b: Vec<u128> = (0..shape.out_len()).map(|_| r128(&mut p)).collect();
    let mu = r128(&mut p);
    let o = run_cfg(params, cfg, &shape, &w, &x, mu, &b, seed, None).unwrap();
    let want = reference(&shape, &w, &x, &b);
    assert_eq!(o.y, want, "values {shape:?}");
    let want_mac: Vec<u128> = want.iter().map(|v| v.wrapping_mul(mu) & kmask()).collect();
    assert_eq!(o.t, want_mac, "MACs {shape:?}");
    o
}

#[test]
fn fc_and_conv_are_exact_on_the_lifted_ring() {
    let p = Params::insecure_test_n256;
    for (i, (n_in, n_out)) in [(1, 1), (10, 3), (100, 10), (300, 7), (17, 90)].into_iter().enumerate() {
        check(p(), Shape::Fc { n_in, n_out }, 10 + i as u128);
    }
    let conv = |c_in, h, w, c_out, k: usize, s: usize, pads| Shape::Conv { c_in, h, w, c_out, kh: k, kw: k, stride: [s, s], pads };
    for (i, sh) in [conv(1, 5, 5, 1, 3, 1, [0; 4]), conv(3, 8, 8, 4, 3, 1, [1; 4]), conv(2, 9, 7, 3, 3, 2, [1, 0, 1, 0]), conv(5, 6, 6, 2, 1, 1, [0; 4]), conv(4, 12, 12, 5, 5, 1, [2; 4])].into_iter().enumerate() {
        check(p(), sh.clone(), 40 + i as u128);
        // SIMC's layout (value and MAC in two ciphertexts) computes the same
        check_cfg(p(), Config::two_ciphertexts(ELL, K), sh, 60 + i as u128);
    }
    check_cfg(p(), Config::two_ciphertexts(ELL, K), Shape::Fc { n_in: 300, n_out: 7 }, 70);
}

/// The real 128-bit set (N = 8192) on one FC and one conv layer, with the
/// bytes and rounds pinned: one upload flight, one response flight.
#[test]
fn real_parameters_bytes_and_rounds() {
    let ctx = Context::new(ckks_crisp::params()).unwrap();
    let sh = Shape::Fc { n_in: 256, n_out: 100 };
    let o = check(ckks_crisp::params(), sh.clone(), 3);
    let (up, down) = ckks_crisp::layer_bytes(&ctx, &Config::new(ELL, K), &sh).unwrap();
    // one flight each way (the channel counts a round per reply)
    assert_eq!((o.up as usize, o.down as usize, o.rounds), (up, down, 1));
    // each input ciphertext: seed + b at 4 × 50 bits; each output, switched
    // to 2^(k+16) = 2^93: a′ in full, b′ at the needed coefficients of both
    // halves (100 outputs in all)
    let lay = ckks_crisp::layout(&ctx, &Config::new(ELL, K), &sh).unwrap();
    assert_eq!(up, lay.in_cts() * (16 + 4 * 8192 * 50 / 8));
    let nd: Vec<usize> = (0..lay.rows).map(|r| lay.needed(r, 0).len()).collect();
    assert_eq!(nd.iter().sum::<usize>(), 100);
    assert_eq!(down, nd.iter().map(|&c| 8192 * 93 / 8 + (2 * c * 93).div_ceil(8)).sum::<usize>());
    check(ckks_crisp::params(), Shape::Conv { c_in: 3, h: 16, w: 16, c_out: 8, kh: 3, kw: 3, stride: [1, 1], pads: [1; 4] }, 4);
}

#[test]
fn malformed_and_mismatched_peers_are_clear_errors() {
    let ctx = Arc::new(Context::new(Params::insecure_test_n256()).unwrap());
    let cfg = Config::new(ELL, K);
    // a hello for another k
    let (mut ca, mut cb) = MemChannel::pair();
    let c2 = ctx.clone();
    let t = std::thread::spawn(move || Server::setup(&mut cb, c2, cfg, Prg::new(Block(1))).err().unwrap().to_string());
    let _ = Client::setup(&mut ca, ctx.clone(), Config::new(ELL, 70), Prg::new(Block(2))).unwrap();
    let e = t.join().unwrap();
    assert!(e.contains("differ from ours"), "{e}");
    // the packed layout against SIMC's two-ciphertext layout
    let (mut ca, mut cb) = MemChannel::pair();
    let c2 = ctx.clone();
    let t = std::thread::spawn(move || Server::setup(&mut cb, c2, cfg, Prg::new(Block(1))).err().unwrap().to_string());
    let _ = Client::setup(&mut ca, ctx.clone(), Config::two_ciphertexts(ELL, K), Prg::new(Block(2))).unwrap();
    assert!(t.join().unwrap().contains("differ from ours"));
    // garbage instead of a hello
    let (mut ca, mut cb) = MemChannel::pair();
    let c2 = ctx.clone();
    let t = std::thread::spawn(move || Server::setup(&mut cb, c2, cfg, Prg::new(Block(1))).err().unwrap().to_string());
    ca.send(&vec![7u8; 12 + hush_rlwe::he::SeededCt::wire_len(&ctx)]).unwrap();
    assert!(t.join().unwrap().contains("not a CRISP"));
    // a ciphertext message of the wrong length, and one with a residue ≥ p
    let sh = Shape::Fc { n_in: 10, n_out: 3 };
    for bad in [0usize, 1] {
        let (mut ca, mut cb) = MemChannel::pair();
        let (c2, sh2) = (ctx.clone(), sh.clone());
        let t = std::thread::spawn(move || {
            let mut s = Server::setup(&mut cb, c2, cfg, Prg::new(Block(1))).unwrap();
            s.linear(&mut cb, &sh2, &[1; 30], &[0; 3], &[0; 3], &[0; 10], &[0; 10]).err().unwrap().to_string()
        });
        let _c = Client::setup(&mut ca, ctx.clone(), cfg, Prg::new(Block(2))).unwrap();
        let len = hush_rlwe::he::SeededCt::wire_len(&ctx);
        if bad == 0 {
            ca.send(&vec![0u8; len - 1]).unwrap();
        } else {
            ca.send(&vec![0xffu8; len]).unwrap();
        }
        let e = t.join().unwrap();
        assert!(e.contains("CRISP linear layer"), "{e}");
    }
    // the client's side: shares outside Z_2^k, and a truncated response
    let (mut ca, mut cb) = MemChannel::pair();
    let c2 = ctx.clone();
    let t = std::thread::spawn(move || {
        let _s = Server::setup(&mut cb, c2, cfg, Prg::new(Block(1))).unwrap();
        let _ = cb.recv();
        cb.send(&[1, 2, 3]).unwrap();
    });
    let mut c = Client::setup(&mut ca, ctx.clone(), cfg, Prg::new(Block(2))).unwrap();
    assert!(c.linear(&mut ca, &sh, &[1u128 << K; 10], &[0; 10]).is_err());
    let e = c.linear(&mut ca, &sh, &[0; 10], &[0; 10]).err().unwrap().to_string();
    assert!(e.contains("server response") || e.contains("bytes"), "{e}");
    t.join().unwrap();
}

/// "Change its ciphertext": any alteration of a syntactically valid
/// ciphertext is an additive error on the client's shares (never a panic);
/// altering b by a multiple of Δ on one coefficient shifts exactly the
/// outputs that coefficient feeds.
#[test]
fn an_altered_ciphertext_is_an_additive_error() {
    let p = Params::insecure_test_n256;
    let sh = Shape::Fc { n_in: 20, n_out: 4 };
    let mut pr = Prg::new(Block(77));
    let w: Vec<u64> = (0..80).map(|_| pr.next_u64() % 7).collect();
    let x: Vec<u128> = (0..20).map(|_| r128(&mut pr)).collect();
    let b = vec![0u128; 4];
    let honest = run(p(), &sh, &w, &x, 5, &b, 9, None).unwrap();
    let changed = run(p(), &sh, &w, &x, 5, &b, 9, Some(Box::new(|_, ct: &mut hush_rlwe::he::SeededCt| ct.b[3] = (ct.b[3] + 12345) % 0x0fff_ffff_ffff_c001))).unwrap();
    assert_ne!(honest.y, changed.y);
}

/// The documented gap (module docs, "Well-formedness"): a client that adds
/// a raw polynomial φ (not a multiple of Δ) to its ciphertext learns the
/// sign of a weight it targets from the flooded residual of the response,
/// and its shares still decode correctly (the MAC check would pass). One
/// inference suffices for one bit; flooding at the largest F keeps it to
/// about one bit per revealed coefficient.
#[test]
fn malformed_ciphertext_gap_is_real_and_bounded() {
    let params = ckks_crisp::params;
    let ctx = Arc::new(Context::new(params()).unwrap());
    let cfg = Config::new(ELL, K);
    let sh = Shape::Fc { n_in: 3, n_out: 4 };
    let bud = ckks_crisp::budget(&ctx, &cfg, 1).unwrap();
    for (trial, sign) in [1i64, -1, 1, -1, -1, 1].into_iter().enumerate() {
        let wm = (1u64 << ELL) - 1;
        // W[0][0] = ±1, the rest random small
        let mut w: Vec<u64> = (0..12).map(|i| (i as u64 * 7 + 3) % 5).collect();
        w[0] = (sign as u64) & wm;
        for r in 1..4 {
            w[r * 3] = 0; // only output 0 sees φ
        }
        let (mut ca, mut cb) = MemChannel::pair();
        let (c2, sh2, w2) = (ctx.clone(), sh.clone(), w.clone());
        let srv = std::thread::spawn(move || {
            let mut s = Server::setup(&mut cb, c2, cfg, Prg::new(Block(900 + trial as u128))).unwrap();
            s.linear(&mut cb, &sh2, &w2, &[0; 4], &[0; 4], &[0; 3], &[0; 3]).unwrap()
        });
        let mut c = Client::setup(&mut ca, ctx.clone(), cfg, Prg::new(Block(1))).unwrap();
        c.record_fine_view_for_tests(8).unwrap();
        // φ = 2^(F+1) at input 0 of the value half: W·φ = ±2^(F+1) at output 0
        let phi = 1u128 << (bud.flood_log + 1);
        let ctx2 = ctx.clone();
        let mut hook = move |_: usize, ct: &mut hush_rlwe::he::SeededCt| {
            for (i, &p) in ctx2.primes().iter().enumerate() {
                ct.b[i * ctx2.n] = (ct.b[i * ctx2.n] + (phi % p as u128) as u64) % p;
            }
        };
        let (y, _) = c.linear_with(&mut ca, &sh, &[0; 3], &[0; 3], Some(&mut hook)).unwrap();
        let (ys, _) = srv.join().unwrap();
        // (ii): the shares still decode to the correct W·0 = 0 (a check would pass) ...
        assert!(y.iter().zip(&ys).all(|(a, b)| a.wrapping_add(*b) & kmask() == 0));
        // ... and the residual's sign is the weight's: |W·φ| = 2^(F+1) against f in [−2^F, 2^F)
        let fine = c.last_fine_view()[0].0 & 0xff;
        let residual = fine as u8 as i8; // units of Δ/256
        assert_eq!(residual.signum() as i64, sign, "trial {trial}: residual {residual}");
    }
}

/// The curious client's view of an honest run: its finest decoding of
/// every revealed coefficient (14 bits below the share, units of
/// Δ/2^14). With flooding the residual spreads over ±2^F (F from the
/// budget), whatever the weights; without it (insecure, test only) it is
/// the tiny deterministic W·e — the flooding is really applied at the
/// stated size. (Without flooding only W·e and the switch's rounding
/// remain; W·e is far below what the switched view shows, which is why the
/// statistical argument, not this test, is the guarantee.)
#[test]
fn curious_client_sees_flooded_residuals() {
    let ctx = Arc::new(Context::new(ckks_crisp::params()).unwrap());
    let cfg = Config::new(ELL, K);
    let bud = ckks_crisp::budget(&ctx, &cfg, 1).unwrap();
    let sh = Shape::Fc { n_in: 64, n_out: 32 };
    let w: Vec<u64> = (0..64 * 32).map(|i| (i as u64 * 0x9e37_79b9) & ((1 << ELL) - 1)).collect();
    let mut spans = Vec::new();
    for flood in [true, false] {
        let (mut ca, mut cb) = MemChannel::pair();
        let (c2, sh2, w2) = (ctx.clone(), sh.clone(), w.clone());
        let srv = std::thread::spawn(move || {
            let mut s = Server::setup(&mut cb, c2, cfg, Prg::new(Block(31))).unwrap();
            if !flood {
                s.insecure_disable_flooding_for_tests();
            }
            s.linear(&mut cb, &sh2, &w2, &[0; 32], &[0; 32], &[5; 64], &[7; 64]).unwrap()
        });
        let mut c = Client::setup(&mut ca, ctx.clone(), cfg, Prg::new(Block(32))).unwrap();
        c.record_fine_view_for_tests(14).unwrap();
        c.linear(&mut ca, &sh, &[1; 64], &[2; 64]).unwrap();
        srv.join().unwrap();
        let res: Vec<i64> = c.last_fine_view().iter().flat_map(|&(v, m)| [v, m]).map(|x| {
            let f = (x & 0x3fff) as i64;
            if f >= 1 << 13 { f - (1 << 14) } else { f }
        }).collect();
        spans.push(res.iter().map(|r| r.abs()).max().unwrap());
    }
    // Δ ≈ 2^(log q − k), so 2^F ≈ Δ/8: ±2^11 units of Δ/2^14
    let unit_f = 1i64 << (14 + bud.flood_log + K) >> (ctx.params.log_q().floor() as u32);
    assert!(spans[0] >= unit_f / 4 && spans[0] <= 2 * unit_f + 2, "flooded residuals span {} (2^F ≈ {unit_f})", spans[0]);
    // without it: W·e (≪ Δ/2^14) plus the modulus switch's rounding (≈ √N
    // units of 2^(K−k−14) = 4 phase units at most N/2): far below the flood
    assert!(spans[1] <= 64, "without flooding: {}", spans[1]);
}
