//! Cheetah's HE linear layers over an in-memory channel: conv and FC
//! against plaintext, the flooding check, malformed peers, cost pins and
//! the real 128-bit set. Deterministic (fixed seeds).

use hush_primitives::{Block, Prg};
use hush_rlwe::cheetah::{plan, Config, HeClient, HeServer, Layout, Shape};
use hush_rlwe::he::SecretKey;
use hush_rlwe::{Context, Error, Params};
use hush_transport::{Channel, ChannelExt, MemChannel};
use std::sync::Arc;

fn mask(bits: u32) -> u64 {
    (1u64 << bits) - 1
}

/// Plaintext W·x mod 2^ℓ.
fn reference(shape: &Shape, w: &[u64], x: &[u64], bits: u32) -> Vec<u64> {
    let m = mask(bits);
    match *shape {
        Shape::Fc { n_in, n_out } => (0..n_out)
            .map(|i| (0..n_in).fold(0u64, |a, j| a.wrapping_add(w[i * n_in + j].wrapping_mul(x[j]))) & m)
            .collect(),
        Shape::Conv { c_in, h, w: wd, c_out, kh, kw, stride, pads } => {
            let oh = (h + pads[0] + pads[2] - kh) / stride[0] + 1;
            let ow = (wd + pads[1] + pads[3] - kw) / stride[1] + 1;
            let mut y = vec![0u64; c_out * oh * ow];
            for mo in 0..c_out {
                for i in 0..oh {
                    for j in 0..ow {
                        let mut acc = 0u64;
                        for c in 0..c_in {
                            for l in 0..kh {
                                for l2 in 0..kw {
                                    let (yi, xj) = ((i * stride[0] + l) as isize - pads[0] as isize, (j * stride[1] + l2) as isize - pads[1] as isize);
                                    if yi >= 0 && (yi as usize) < h && xj >= 0 && (xj as usize) < wd {
                                        acc = acc.wrapping_add(
                                            w[((mo * c_in + c) * kh + l) * kw + l2].wrapping_mul(x[(c * h + yi as usize) * wd + xj as usize]),
                                        );
                                    }
                                }
                            }
                        }
                        y[(mo * oh + i) * ow + j] = acc & m;
                    }
                }
            }
            y
        }
    }
}

struct Run {
    y_c: Vec<u64>,
    y_s: Vec<u64>,
    bytes_c2s: u64,
    bytes_s2c: u64,
    rounds: u64,
}

/// One layer (setup included in the costs only where `count_setup`).
fn run(params: Params, cfg: Config, shape: &Shape, w: &[u64], x: &[u64], seed: u128) -> Run {
    let ctx = Arc::new(Context::new(params).unwrap());
    let m = mask(cfg.bits);
    let mut prg = Prg::new(Block(seed));
    let x_s: Vec<u64> = (0..x.len()).map(|_| prg.next_u64() & m).collect();
    let x_c: Vec<u64> = x.iter().zip(&x_s).map(|(a, b)| a.wrapping_sub(*b) & m).collect();
    let (mut ca, mut cb) = MemChannel::pair();
    let (ctx2, shape2, w2) = (ctx.clone(), shape.clone(), w.to_vec());
    let srv = std::thread::spawn(move || {
        let mut s = HeServer::setup(&mut cb, ctx2, cfg, Prg::new(Block(seed + 1))).unwrap();
        let c0 = cb.cost();
        let y = s.linear(&mut cb, &shape2, &w2, &x_s).unwrap();
        let c1 = cb.cost();
        (y, c1.bytes_sent - c0.bytes_sent, c1.bytes_recv - c0.bytes_recv)
    });
    let mut c = HeClient::setup(&mut ca, ctx, cfg, Prg::new(Block(seed + 2))).unwrap();
    let y_c = c.linear(&mut ca, shape, &x_c).unwrap();
    // setup + one layer: the key rides in the upload's flight, the response is the second
    let rounds = ca.cost().rounds as u64;
    let (y_s, s2c, c2s) = srv.join().unwrap();
    Run { y_c, y_s, bytes_c2s: c2s, bytes_s2c: s2c, rounds }
}

fn check(params: Params, bits: u32, shape: Shape, seed: u128) -> Run {
    let m = mask(bits);
    let mut prg = Prg::new(Block(seed * 31 + 7));
    let w: Vec<u64> = (0..shape.weight_len()).map(|_| prg.next_u64() & m).collect();
    let x: Vec<u64> = (0..shape.in_len()).map(|_| prg.next_u64() & m).collect();
    let r = run(params, Config::new(bits), &shape, &w, &x, seed);
    let want = reference(&shape, &w, &x, bits);
    let got: Vec<u64> = r.y_c.iter().zip(&r.y_s).map(|(a, b)| a.wrapping_add(*b) & m).collect();
    assert_eq!(got, want, "{shape:?}");
    r
}

#[test]
fn fc_matches_plaintext() {
    let p = Params::insecure_test_n256;
    // one polynomial, several row blocks, several input chunks, n_in > N
    for (i, (n_in, n_out)) in [(1, 1), (10, 3), (16, 16), (100, 10), (300, 7), (700, 40), (17, 300)].into_iter().enumerate() {
        check(p(), 37, Shape::Fc { n_in, n_out }, 100 + i as u128);
    }
    check(p(), 20, Shape::Fc { n_in: 50, n_out: 9 }, 3);
    check(p(), 1, Shape::Fc { n_in: 33, n_out: 5 }, 4);
}

#[test]
fn conv_matches_plaintext() {
    let p = Params::insecure_test_n256;
    let conv = |c_in, h, w, c_out, k: usize, s: usize, pads| Shape::Conv { c_in, h, w, c_out, kh: k, kw: k, stride: [s, s], pads };
    let shapes = [
        conv(1, 4, 4, 1, 1, 1, [0; 4]),
        conv(3, 8, 8, 4, 3, 1, [1; 4]),  // same padding
        conv(2, 9, 7, 3, 3, 2, [1, 0, 1, 2]), // stride 2, asymmetric pads
        conv(1, 28, 28, 5, 5, 1, [0; 4]), // MiniONN-MNIST's first conv (spatial tiles at N = 256)
        conv(16, 12, 12, 4, 5, 1, [0; 4]), // MiniONN-MNIST's second conv shape (channel groups)
        conv(40, 3, 3, 2, 1, 1, [0; 4]), // 1x1, many channels
        conv(3, 11, 11, 2, 7, 2, [3; 4]), // ResNet-style stem (7x7 stride 2 pad 3)
        Shape::Conv { c_in: 2, h: 6, w: 10, c_out: 2, kh: 2, kw: 3, stride: [1, 2], pads: [0, 1, 1, 0] },
        conv(1, 6, 6, 8, 3, 1, [0; 4]),   // small input, many output channels: packed products
        conv(2, 5, 5, 7, 3, 2, [1; 4]),
        conv(2, 4, 4, 6, 3, 1, [1; 4]),
        conv(4, 9, 9, 3, 1, 2, [0; 4]), // 1x1 stride 2 (ResNet downsampling skip)
    ];
    let ctx = Context::new(p()).unwrap();
    let mut packed = 0;
    for (i, s) in shapes.into_iter().enumerate() {
        let (lay, _) = plan(&ctx, &Config::new(37), &s).unwrap();
        packed += (lay.blocking()[3] > 1) as usize;
        eprintln!("{s:?}: blocking {:?}, {} in / {} out ciphertexts", lay.blocking(), lay.in_cts(), lay.out_cts());
        check(p(), 37, s, 200 + i as u128);
    }
    assert!(packed >= 2, "several output channels per product covered");
}

#[test]
fn real_128_bit_parameters() {
    // N = 8192, log q ≈ 180 (HE standard, 128 bits): one FC and one conv
    check(Params::he128_n8192(), 37, Shape::Fc { n_in: 100, n_out: 10 }, 1);
    check(Params::he128_n8192(), 37, Shape::Conv { c_in: 3, h: 16, w: 16, c_out: 4, kh: 3, kw: 3, stride: [1, 1], pads: [1; 4] }, 2);
    // ℓ = 44 over 16 accumulated ciphertexts: flooding of 2^129 (beyond 128-bit integers)
    let ctx = Context::new(Params::he128_n8192()).unwrap();
    let sh = Shape::Fc { n_in: 16 * 8192, n_out: 1 };
    let (lay, bud) = plan(&ctx, &Config::new(44), &sh).unwrap();
    assert_eq!((lay.groups, bud.flood_log, bud.k), (16, 129, 60));
    check(Params::he128_n8192(), 44, sh, 3);
    check(Params::he128_n8192(), 47, Shape::Fc { n_in: 30, n_out: 5 }, 4);
    assert!(matches!(plan(&ctx, &Config::new(48), &Shape::Fc { n_in: 30, n_out: 5 }), Err(Error::Params(_))));
    // the default set, four primes below 2^50 (log q < 200): the same shapes, ℓ up to 47, and the
    // larger q holds the same flooding over many more accumulated ciphertexts
    let p50 = Params::he128_n8192_p50;
    check(p50(), 37, Shape::Fc { n_in: 100, n_out: 10 }, 5);
    check(p50(), 37, Shape::Conv { c_in: 3, h: 16, w: 16, c_out: 4, kh: 3, kw: 3, stride: [1, 1], pads: [1; 4] }, 6);
    check(p50(), 37, Shape::Conv { c_in: 8, h: 9, w: 9, c_out: 5, kh: 3, kw: 3, stride: [2, 2], pads: [1; 4] }, 7);
    let ctx50 = Context::new(p50()).unwrap();
    let (lay, bud) = plan(&ctx50, &Config::new(44), &Shape::Fc { n_in: 16 * 8192, n_out: 1 }).unwrap();
    assert_eq!((lay.groups, bud.flood_log, bud.k), (16, 129, 60));
    check(p50(), 44, Shape::Fc { n_in: 16 * 8192, n_out: 1 }, 8);
    check(p50(), 47, Shape::Fc { n_in: 30, n_out: 5 }, 9);
    assert!(matches!(plan(&ctx50, &Config::new(48), &Shape::Fc { n_in: 30, n_out: 5 }), Err(Error::Params(_))));
    // N = 4096 (log q < 109) holds only small ℓ at κ = 64 over one ciphertext … and says so otherwise
    let ctx = Context::new(Params::he128_n4096()).unwrap();
    assert!(matches!(plan(&ctx, &Config::new(37), &Shape::Fc { n_in: 10, n_out: 10 }), Err(Error::Params(_))));
    let cfg = Config { bits: 12, flood_bits: 40, mod_switch: true, price: None };
    let sh = Shape::Fc { n_in: 64, n_out: 8 };
    let mut prg = Prg::new(Block(9));
    let w: Vec<u64> = (0..sh.weight_len()).map(|_| prg.next_u64() & mask(12)).collect();
    let x: Vec<u64> = (0..sh.in_len()).map(|_| prg.next_u64() & mask(12)).collect();
    let r = run(Params::he128_n4096(), cfg, &sh, &w, &x, 77);
    let got: Vec<u64> = r.y_c.iter().zip(&r.y_s).map(|(a, b)| a.wrapping_add(*b) & mask(12)).collect();
    assert_eq!(got, reference(&sh, &w, &x, 12));
}

#[test]
fn shares_are_uniform_and_unswitched_path_agrees() {
    // the server's share is its fresh randomness: different seeds, different shares, same sum
    let sh = Shape::Fc { n_in: 20, n_out: 6 };
    let a = check(Params::insecure_test_n256(), 37, sh.clone(), 1);
    let b = check(Params::insecure_test_n256(), 37, sh.clone(), 2);
    assert_ne!(a.y_s, b.y_s);
    let cfg = Config { bits: 16, flood_bits: 64, mod_switch: false, price: None };
    let mut prg = Prg::new(Block(3));
    let w: Vec<u64> = (0..sh.weight_len()).map(|_| prg.next_u64() & mask(16)).collect();
    let x: Vec<u64> = (0..sh.in_len()).map(|_| prg.next_u64() & mask(16)).collect();
    let r = run(Params::insecure_test_n256(), cfg, &sh, &w, &x, 5);
    let got: Vec<u64> = r.y_c.iter().zip(&r.y_s).map(|(a, b)| a.wrapping_add(*b) & mask(16)).collect();
    assert_eq!(got, reference(&sh, &w, &x, 16));
}

/// The curious client's view of the noise of every revealed coefficient,
/// over `reps` layers with fixed input and weights `w` (unswitched path:
/// the raw phase, the most the client could get).
fn noise_view(w: &[u64], x: &[u64], shape: &Shape, reps: usize, flood: bool, seed: u128) -> Vec<i128> {
    let cfg = Config { bits: 16, flood_bits: 64, mod_switch: false, price: None };
    let ctx = Arc::new(Context::new(Params::insecure_test_n256()).unwrap());
    let (mut ca, mut cb) = MemChannel::pair();
    let (ctx2, shape2, w2, x_s) = (ctx.clone(), shape.clone(), w.to_vec(), vec![0u64; x.len()]);
    let srv = std::thread::spawn(move || {
        let mut s = HeServer::setup(&mut cb, ctx2, cfg, Prg::new(Block(seed + 1))).unwrap();
        if !flood {
            s.insecure_disable_flooding_for_tests();
        }
        for _ in 0..reps {
            s.linear(&mut cb, &shape2, &w2, &x_s).unwrap();
        }
    });
    let mut c = HeClient::setup(&mut ca, ctx, cfg, Prg::new(Block(seed + 2))).unwrap();
    let mut all = Vec::new();
    for _ in 0..reps {
        let (_, nv) = c.linear_with_noise(&mut ca, shape, x).unwrap();
        all.extend(nv);
    }
    srv.join().unwrap();
    all
}

/// Bins: the magnitude class ⌊log2(|E|+1)⌋ (0..128) and the low 4 bits.
fn hist(v: &[i128]) -> (Vec<u64>, Vec<u64>) {
    let (mut mag, mut lo) = (vec![0u64; 129], vec![0u64; 16]);
    for &e in v {
        mag[(128 - (e.unsigned_abs() + 1).leading_zeros() - 1) as usize] += 1;
        lo[(e & 15) as usize] += 1;
    }
    (mag, lo)
}

fn chi2(a: &[u64], b: &[u64]) -> f64 {
    a.iter().zip(b).filter(|(x, y)| **x + **y > 0).map(|(x, y)| (*x as f64 - *y as f64).powi(2) / (*x + *y) as f64).sum()
}

#[test]
fn flooding_hides_the_weights() {
    // Two weight matrices, tiny and huge, with the same input: the output
    // share y_C = W·x − r_S is uniform in both (r_S fresh). Given y_C, the
    // client's best view of W is the noise of each revealed coefficient.
    // Without flooding the noise carries W·e (|W| ~ 2^15 vs 1): its
    // magnitude class tells the two apart at once; with flooding both are
    // uniform on [−2^F, 2^F).
    let sh = Shape::Fc { n_in: 64, n_out: 4 };
    let x: Vec<u64> = (0..64u64).map(|i| (i * 977) & mask(16)).collect();
    let w_small = vec![1u64; sh.weight_len()];
    let w_big: Vec<u64> = (0..sh.weight_len() as u64).map(|i| (0x7fff - i) & mask(16)).collect();
    let reps = 200; // 800 revealed coefficients each
    for flood in [false, true] {
        let (a, b) = (noise_view(&w_small, &x, &sh, reps, flood, 10), noise_view(&w_big, &x, &sh, reps, flood, 20));
        let ((ma, la), (mb, lb)) = (hist(&a), hist(&b));
        let (cm, cl) = (chi2(&ma, &mb), chi2(&la, &lb));
        if flood {
            // magnitude: almost all mass in the top two classes; χ² with few dof
            assert!(cm < 30.0, "flooded: magnitude classes differ (χ² = {cm:.1})");
            assert!(cl < 45.0, "flooded: low bits differ (χ² = {cl:.1}, 15 dof, P(>45) < 1e-4)");
            let top = a.iter().map(|e| e.unsigned_abs()).max().unwrap();
            assert!(top > 1u128 << 80, "flooding noise present");
        } else {
            assert!(cm > 500.0, "without flooding the weights must show (χ² = {cm:.1})");
        }
    }
}

// ---- malformed peers ------------------------------------------------------

fn setup_pair(cfg: Config) -> (HeClient, MemChannel, MemChannel) {
    let ctx = Arc::new(Context::new(Params::insecure_test_n256()).unwrap());
    let (mut ca, cb) = MemChannel::pair();
    let c = HeClient::setup(&mut ca, ctx, cfg, Prg::new(Block(1))).unwrap();
    (c, ca, cb)
}

fn server_err(bytes: Vec<u8>, setup_ok: bool) -> Error {
    let ctx = Arc::new(Context::new(Params::insecure_test_n256()).unwrap());
    let cfg = Config::new(37);
    let (mut ca, mut cb) = MemChannel::pair();
    if setup_ok {
        let ctx2 = ctx.clone();
        let h = std::thread::spawn(move || {
            let _c = HeClient::setup(&mut ca, ctx2, cfg, Prg::new(Block(1))).unwrap();
            ca.send_chunked(&bytes).unwrap();
            ca
        });
        let mut s = HeServer::setup(&mut cb, ctx, cfg, Prg::new(Block(2))).unwrap();
        let e = s.linear(&mut cb, &Shape::Fc { n_in: 10, n_out: 2 }, &[1; 20], &[0; 10]).unwrap_err();
        drop(h.join());
        e
    } else {
        ca.send_chunked(&bytes).unwrap();
        match HeServer::setup(&mut cb, ctx, cfg, Prg::new(Block(2))) {
            Err(e) => e,
            Ok(_) => panic!("accepted a malformed setup"),
        }
    }
}

#[test]
fn malformed_ciphertexts_are_clean_errors() {
    let ctx = Context::new(Params::insecure_test_n256()).unwrap();
    let one = hush_rlwe::he::SeededCt::wire_len(&ctx);
    // a valid ciphertext to start from
    let mut prg = Prg::new(Block(3));
    let sk = SecretKey::generate(&ctx, &mut prg);
    let mut good = Vec::new();
    sk.encrypt(&ctx, 37, &vec![0; ctx.n], &mut prg).write(&ctx, &mut good);
    assert_eq!(good.len(), one);
    // wrong length (short and long)
    let e = server_err(good[..one - 1].to_vec(), true);
    assert!(matches!(e, Error::Transport(hush_transport::Error::WrongLength { .. })), "{e}");
    let mut long = good.clone();
    long.push(0);
    let e = server_err(long, true);
    assert!(matches!(e, Error::Transport(_)), "{e}");
    // an out-of-range residue (≥ p_0): all ones in the first coefficient
    let mut bad = good.clone();
    for b in &mut bad[16..24] {
        *b = 0xff;
    }
    let e = server_err(bad, true);
    assert!(e.to_string().contains("out of range"), "{e}");
    // a bare seed (or less): every 16-byte seed is valid by construction, so a
    // "bad seed" can only be a missing or cut one — a length error
    let e = server_err(good[..10].to_vec(), true);
    assert!(matches!(e, Error::Transport(_)), "{e}");
    // setup: not a hello / a hello with other parameters / a bad key
    let mut hello = Vec::new();
    {
        let (mut ca, mut cb) = MemChannel::pair();
        let c = HeClient::setup(&mut ca, Arc::new(Context::new(Params::insecure_test_n256()).unwrap()), Config::new(37), Prg::new(Block(1)));
        c.unwrap();
        hello.extend(cb.recv().unwrap());
    }
    let mut junk = hello.clone();
    junk[0] ^= 1;
    assert!(matches!(server_err(junk, false), Error::Malformed { .. }));
    let mut other = hello.clone();
    other[8] = 20; // ℓ = 20
    let e = server_err(other, false);
    assert!(matches!(e, Error::Mismatch(_)) && e.to_string().contains("ℓ = 20"), "{e}");
    // another planner price (the layouts would differ)
    let mut priced = hello.clone();
    priced[11] ^= 1;
    let e = server_err(priced, false);
    assert!(matches!(e, Error::Mismatch(_)) && e.to_string().contains("price"), "{e}");
    let mut badkey = hello.clone();
    // the hello: magic 4, parameter id 4, ℓ κ switch 3, price 4; then the key's seed (16)
    let off = 15 + 16;
    for b in &mut badkey[off..off + 8] {
        *b = 0xff;
    }
    assert!(server_err(badkey, false).to_string().contains("out of range"));
    assert!(matches!(server_err(hello[..hello.len() - 3].to_vec(), false), Error::Transport(_)));
}

#[test]
fn malformed_response_is_a_clean_error() {
    let sh = Shape::Fc { n_in: 10, n_out: 2 };
    // a response of the wrong length
    let (mut c, mut ca, mut cb) = setup_pair(Config::new(37));
    let h = std::thread::spawn(move || {
        let _ = cb.recv().unwrap();
        let _ = cb.recv();
        cb.send(&[0u8; 7]).unwrap();
        cb
    });
    let e = c.linear(&mut ca, &sh, &[0; 10]).unwrap_err();
    assert!(matches!(e, Error::Transport(hush_transport::Error::WrongLength { .. })), "{e}");
    drop(h.join());
    // a wrong-length input share is refused before anything is sent
    let (mut c, mut ca, _cb) = setup_pair(Config::new(37));
    assert!(matches!(c.linear(&mut ca, &sh, &[0; 9]), Err(Error::Shape(_))));
    assert!(matches!(c.linear(&mut ca, &sh, &[1 << 40; 10]), Err(Error::Shape(_))));
}

// ---- cost pins ------------------------------------------------------------

#[test]
fn cost_pins() {
    // N = 8192, three 60-bit primes: an uploaded ciphertext is 16 + 3·8192·60/8 = 184,336 B;
    // ℓ = 37 → k = 37 + 14 + 2 = 53: a response is 8192·53/8 = 54,272 B + 53 bits per needed coefficient.
    let p = Params::he128_n8192;
    let p50 = Params::he128_n8192_p50;
    let fc = check(p(), 37, Shape::Fc { n_in: 100, n_out: 10 }, 1);
    assert_eq!((fc.bytes_c2s, fc.bytes_s2c, fc.rounds), (184_336, 54_272 + 67, 2), "FC 100→10");
    let sh = Shape::Conv { c_in: 16, h: 12, w: 12, c_out: 16, kh: 5, kw: 5, stride: [1, 1], pads: [0; 4] };
    let cv = check(p(), 37, sh.clone(), 2);
    // the cheapest blocking: 8 channels per input ciphertext (2 uploads), 3 output channels per
    // product (6 responses); 16·8·8 = 1024 needed coefficients of 53 bits in all
    let ctx = Context::new(p()).unwrap();
    let (lay, _) = plan(&ctx, &Config::new(37), &sh).unwrap();
    assert_eq!((lay.blocking(), lay.in_cts(), lay.out_cts()), ([8, 12, 12, 3], 2, 6));
    assert_eq!((cv.bytes_c2s, cv.bytes_s2c), (2 * 184_336, 6 * 54_272 + 1024 * 53 / 8), "conv 16x12x12 → 16x8x8");
    // the blocking is priced by bytes + layout_bytes_per_product (2 KiB here) per product: ResNet-50's 3×3
    // conv 256×14×14 → 256 takes 32 channels per upload and one output channel per product
    // (8 uploads, 256 responses, 2,048 products) where bytes alone chose 8 channels and 2 output
    // channels per product (32 uploads, 128 responses, 4,096 products)
    let ctx50 = Context::new(p50()).unwrap();
    let rn = Shape::Conv { c_in: 256, h: 14, w: 14, c_out: 256, kh: 3, kw: 3, stride: [1, 1], pads: [1; 4] };
    let (lay, _) = plan(&ctx50, &Config::new(37), &rn).unwrap();
    assert_eq!((lay.blocking(), lay.in_cts(), lay.out_cts(), lay.products()), ([32, 16, 16, 1], 8, 256, 2048));
    let bytes_only = Layout::new(&rn, 8192, 204_816, 54_272).unwrap();
    assert_eq!((bytes_only.blocking(), bytes_only.products()), ([8, 16, 16, 2], 4096));
    let r = check(p50(), 37, rn, 3);
    // its 256 responses stream in 8 batches of 32 (one flight: still 2 rounds, the same bytes
    // as one message: each response is 54,272 B + ⌈196·53/8⌉ = 1,299 B)
    assert_eq!((r.bytes_c2s, r.bytes_s2c, r.rounds), (8 * 204_816, 256 * (54_272 + 1_299), 2));
    // uploads stream in batches of UPLOAD_BATCH_CTS: a layer of 20 uploads takes two batches, one
    // flight (2 rounds), the bytes of 20 seeded ciphertexts
    let fc20 = Shape::Fc { n_in: 20 * 8192, n_out: 1 };
    let (lay, _) = plan(&ctx50, &Config::new(37), &fc20).unwrap();
    assert!(lay.in_cts() > hush_rlwe::cheetah::UPLOAD_BATCH_CTS);
    let r = check(p50(), 37, fc20, 4);
    assert_eq!((r.bytes_c2s, r.rounds), (lay.in_cts() as u64 * 204_816, 2));
    // the default set, four 50-bit primes: uploads of 16 + 4·8192·50/8 = 204,816 B (residues travel
    // in 50 bits instead of 60, one more of them); the switched responses do not change (k = 53)
    let fc = check(p50(), 37, Shape::Fc { n_in: 100, n_out: 10 }, 1);
    assert_eq!((fc.bytes_c2s, fc.bytes_s2c, fc.rounds), (204_816, 54_272 + 67, 2), "FC 100→10, p50");
    let cv = check(p50(), 37, sh, 2);
    assert_eq!((cv.bytes_c2s, cv.bytes_s2c), (2 * 204_816, 6 * 54_272 + 1024 * 53 / 8), "conv 16x12x12 → 16x8x8, p50");
}

// ---- the server's view ----------------------------------------------------

/// The server's view of a layer: the bytes of the uploaded ciphertexts.
/// With the client's share all zero or all 2^ℓ − 1, the b residues (top 4
/// bits of each 60-bit residue, and the low 4 bits) are distributed alike:
/// a broken encryption (b = encode(m) + e without −a·s) fails at once.
fn server_view(x_c: u64, seed: u128) -> Vec<u64> {
    let ctx = Arc::new(Context::new(Params::insecure_test_n256()).unwrap());
    let sh = Shape::Fc { n_in: 256, n_out: 1 };
    let (mut ca, cb) = MemChannel::pair();
    let got = hush_transport::Recording::new(cb);
    let log = got.log();
    let mut cb = got;
    let cfg = Config::new(37);
    let h = std::thread::spawn(move || {
        let mut s = HeServer::setup(&mut cb, ctx.clone(), cfg, Prg::new(Block(seed))).unwrap();
        for _ in 0..8 {
            s.linear(&mut cb, &Shape::Fc { n_in: 256, n_out: 1 }, &[3; 256], &[0; 256]).unwrap();
        }
    });
    let mut c = HeClient::setup(&mut ca, Arc::new(Context::new(Params::insecure_test_n256()).unwrap()), cfg, Prg::new(Block(seed + 1))).unwrap();
    for _ in 0..8 {
        c.linear(&mut ca, &sh, &[x_c; 256]).unwrap();
    }
    h.join().unwrap();
    let msgs = log.lock().unwrap().clone();
    // skip the setup message; each upload is one ciphertext: 16-byte seed + 3·256 residues of 60 bits
    let mut out = Vec::new();
    for m in &msgs[1..] {
        let (v, _) = hush_rlwe::wire::unpack(&m[16..], 3 * 256, 60, u64::MAX, "view").unwrap();
        out.extend(v);
    }
    out
}

#[test]
fn server_view_is_independent_of_the_client_share() {
    let (a, b) = (server_view(0, 1), server_view(mask(37), 1));
    assert_eq!(a.len(), 8 * 768);
    let h = |v: &[u64], f: &dyn Fn(u64) -> usize| {
        let mut c = vec![0u64; 16];
        v.iter().for_each(|&x| c[f(x)] += 1);
        c
    };
    let top = |x: u64| (x >> 56) as usize & 15;
    let low = |x: u64| x as usize & 15;
    let (ct, cl) = (chi2(&h(&a, &top), &h(&b, &top)), chi2(&h(&a, &low), &h(&b, &low)));
    assert!(ct < 45.0 && cl < 45.0, "χ² top {ct:.1}, low {cl:.1} (15 dof)");
}

#[test]
fn random_bytes_of_the_right_length_never_panic() {
    // a hostile server answers with random bytes of exactly the expected
    // length; a hostile client uploads random bytes of the right length.
    // Either side ends with a result or a clean error, never a panic.
    let sh = Shape::Fc { n_in: 40, n_out: 7 };
    let ctx = Context::new(Params::insecure_test_n256()).unwrap();
    let cfg = Config::new(37);
    let (lay, bud) = plan(&ctx, &cfg, &sh).unwrap();
    let resp_len: usize = (0..lay.rows).map(|r| hush_rlwe::wire::packed_len(ctx.n, bud.k) + hush_rlwe::wire::packed_len(lay.needed(r, 0).len(), bud.k)).sum();
    let up_len = lay.in_cts() * hush_rlwe::he::SeededCt::wire_len(&ctx);
    for seed in 0..20u128 {
        let mut prg = Prg::new(Block(seed));
        let mut junk = vec![0u8; resp_len.max(up_len)];
        prg.fill_bytes(&mut junk);
        let (mut c, mut ca, mut cb) = setup_pair(cfg);
        let j2 = junk[..resp_len].to_vec();
        let h = std::thread::spawn(move || {
            let _ = cb.recv();
            cb.send_chunked(&j2).unwrap();
            cb
        });
        let _ = c.linear(&mut ca, &sh, &[1; 40]); // Ok (garbage share) or a clean error
        drop(h.join());
        // the server side: random residues below every p_i form a valid ciphertext
        // (of an unknown message), others are refused
        let ctx2 = Arc::new(Context::new(Params::insecure_test_n256()).unwrap());
        let (mut ca, mut cb) = MemChannel::pair();
        let up = junk[..up_len].to_vec();
        let c2 = ctx2.clone();
        let h = std::thread::spawn(move || {
            let _c = HeClient::setup(&mut ca, c2, cfg, Prg::new(Block(1))).unwrap();
            ca.send_chunked(&up).unwrap();
            ca
        });
        let mut s = HeServer::setup(&mut cb, ctx2, cfg, Prg::new(Block(2))).unwrap();
        match s.linear(&mut cb, &sh, &[1; 280], &[0; 40]) {
            Ok(y) => assert_eq!(y.len(), 7),
            Err(e) => assert!(e.to_string().contains("out of range"), "{e}"),
        }
        drop(h.join());
    }
}

// ---- the interleaved 1×1 encoding -------------------------------------------

fn conv1x1(c_in: usize, h: usize, w: usize, c_out: usize, s: usize) -> Shape {
    Shape::Conv { c_in, h, w, c_out, kh: 1, kw: 1, stride: [s, s], pads: [0; 4] }
}

/// 1×1 convolutions in the interleaved encoding against plaintext: full and
/// partial blocks (channels, positions and output channels that do not
/// divide the blocking), one and several input groups and tiles, strided
/// (subsampled first), ℓ = 37, 20 and 1. Fails on any misplaced term.
#[test]
fn interleaved_1x1_conv_matches_plaintext() {
    let p = Params::insecure_test_n256;
    let ctx = Context::new(p()).unwrap();
    let shapes = [
        conv1x1(40, 3, 3, 2, 1),
        conv1x1(7, 5, 5, 13, 1),
        conv1x1(64, 2, 2, 64, 1),   // deep-layer shape: few positions, many channels
        conv1x1(33, 3, 2, 70, 1),   // nothing divides
        conv1x1(3, 17, 17, 5, 1),   // many positions: several tiles
        conv1x1(300, 1, 1, 9, 1),   // one position: a batched FC of width 1
        conv1x1(24, 7, 7, 40, 2),   // strided: 4×4 positions after subsampling
        conv1x1(17, 9, 6, 11, 2),
        conv1x1(48, 2, 2, 50, 1),
        conv1x1(100, 2, 1, 90, 1),
        conv1x1(60, 3, 3, 64, 1),
        conv1x1(30, 4, 4, 70, 2),   // strided, 2×2 positions after subsampling
    ];
    let mut inter = 0;
    for (i, s) in shapes.iter().enumerate() {
        let (lay, _) = plan(&ctx, &Config::new(37), s).unwrap();
        inter += lay.interleaved() as usize;
        eprintln!("{s:?}: interleaved {}, blocking {:?}, {} in / {} out ciphertexts, {} products", lay.interleaved(), lay.blocking(), lay.in_cts(), lay.out_cts(), lay.products());
        check(p(), 37, s.clone(), 900 + i as u128);
    }
    assert!(inter >= 6, "the interleaved encoding is chosen for most of these shapes ({inter} of {})", shapes.len());
    check(p(), 20, conv1x1(33, 3, 2, 70, 1), 950);
    check(p(), 1, conv1x1(33, 3, 2, 70, 1), 951);
    // a 1×1 conv with padding keeps the spatial encoding (zeros around the image)
    let padded = Shape::Conv { c_in: 8, h: 4, w: 4, c_out: 6, kh: 1, kw: 1, stride: [1, 1], pads: [1; 4] };
    assert!(!plan(&ctx, &Config::new(37), &padded).unwrap().0.interleaved());
    check(p(), 37, padded, 952);
}

/// The real default parameter set on ResNet-50-like deep 1×1 layers: the
/// interleaved encoding is chosen, with the blocking and counts pinned (N =
/// 8192, ℓ = 37: C_b·S_b·(M_b + 1) ≤ 8193), and the results are exact.
#[test]
fn interleaved_1x1_real_parameters() {
    let p50 = Params::he128_n8192_p50;
    let ctx = Context::new(p50()).unwrap();
    let deep = conv1x1(512, 7, 7, 2048, 1);
    let (lay, _) = plan(&ctx, &Config::new(37), &deep).unwrap();
    assert!(lay.interleaved());
    assert_eq!((lay.blocking(), lay.in_cts(), lay.out_cts(), lay.products()), ([11, 49, 0, 14], 47, 147, 6909));
    let small = conv1x1(96, 7, 7, 100, 1);
    let (lay, _) = plan(&ctx, &Config::new(37), &small).unwrap();
    assert!(lay.interleaved(), "{:?}", lay.blocking());
    check(p50(), 37, small, 960);
    check(p50(), 37, conv1x1(40, 9, 9, 30, 2), 961);
}

/// Flooding hides the weights in the interleaved encoding too: a curious
/// client's noise view of an interleaved 1×1 conv with tiny and huge
/// weights (the same output share) is indistinguishable with flooding and
/// tells them apart without it.
#[test]
fn flooding_hides_the_weights_interleaved() {
    let sh = conv1x1(16, 3, 3, 6, 1);
    let ctx = Context::new(Params::insecure_test_n256()).unwrap();
    assert!(plan(&ctx, &Config { bits: 16, flood_bits: 64, mod_switch: false, price: None }, &sh).unwrap().0.interleaved());
    let x: Vec<u64> = (0..sh.in_len() as u64).map(|i| (i * 977 + 5) & mask(16)).collect();
    let w_small = vec![1u64; sh.weight_len()];
    let w_big: Vec<u64> = (0..sh.weight_len() as u64).map(|i| (0x7fff - i) & mask(16)).collect();
    let reps = 20; // 54 revealed coefficients per layer
    for flood in [false, true] {
        let (a, b) = (noise_view(&w_small, &x, &sh, reps, flood, 30), noise_view(&w_big, &x, &sh, reps, flood, 40));
        assert_eq!(a.len(), reps * sh.out_len());
        let ((ma, la), (mb, lb)) = (hist(&a), hist(&b));
        let (cm, cl) = (chi2(&ma, &mb), chi2(&la, &lb));
        if flood {
            assert!(cm < 30.0, "flooded: magnitude classes differ (χ² = {cm:.1})");
            assert!(cl < 45.0, "flooded: low bits differ (χ² = {cl:.1})");
            assert!(a.iter().map(|e| e.unsigned_abs()).max().unwrap() > 1u128 << 80, "flooding noise present");
        } else {
            assert!(cm > 500.0, "without flooding the weights must show (χ² = {cm:.1})");
        }
    }
}

/// Malformed uploads for an interleaved layer are clean errors at the
/// server (wrong length; an out-of-range residue), and a response of the
/// wrong length is one at the client.
#[test]
fn malformed_interleaved_layer_is_a_clean_error() {
    let sh = conv1x1(64, 2, 2, 64, 1);
    let ctx = Arc::new(Context::new(Params::insecure_test_n256()).unwrap());
    let cfg = Config::new(37);
    let (lay, _) = plan(&ctx, &cfg, &sh).unwrap();
    assert!(lay.interleaved());
    let one = hush_rlwe::he::SeededCt::wire_len(&ctx);
    let n_up = lay.in_cts();
    let mut prg = Prg::new(Block(3));
    let sk = SecretKey::generate(&ctx, &mut prg);
    let mut good = Vec::new();
    for _ in 0..n_up {
        sk.encrypt(&ctx, 37, &vec![0; ctx.n], &mut prg).write(&ctx, &mut good);
    }
    let serve = |bytes: Vec<u8>| -> Error {
        let (mut ca, mut cb) = MemChannel::pair();
        let ctx2 = ctx.clone();
        let h = std::thread::spawn(move || {
            let _c = HeClient::setup(&mut ca, ctx2, cfg, Prg::new(Block(1))).unwrap();
            ca.send_chunked(&bytes).unwrap();
            ca
        });
        let mut s = HeServer::setup(&mut cb, ctx.clone(), cfg, Prg::new(Block(2))).unwrap();
        let e = s.linear(&mut cb, &sh, &vec![1; sh.weight_len()], &vec![0; sh.in_len()]).unwrap_err();
        drop(h.join());
        e
    };
    assert!(matches!(serve(good[..good.len() - 1].to_vec()), Error::Transport(_)));
    let mut bad = good.clone();
    for b in &mut bad[(n_up - 1) * one + 16..(n_up - 1) * one + 24] {
        *b = 0xff;
    }
    let e = serve(bad);
    assert!(e.to_string().contains("out of range"), "{e}");
    // the client: a response of the wrong length
    let (mut c, mut ca, mut cb) = setup_pair(cfg);
    let h = std::thread::spawn(move || {
        let _ = cb.recv().unwrap();
        let _ = cb.recv();
        cb.send(&[0u8; 9]).unwrap();
        cb
    });
    let e = c.linear(&mut ca, &sh, &vec![0; sh.in_len()]).unwrap_err();
    assert!(matches!(e, Error::Transport(_)), "{e}");
    drop(h.join());
}

/// Interleaved 1×1 layouts cut into **tiles** of S_b < S positions (the
/// weight polynomial of a row and group shared by every tile, transformed
/// once): the real parameters' choices for BERT-base's shapes (128 tokens ×
/// 768 or 3,072 channels, and the embedding's 30,522-row table) pinned (the
/// FFN's first layer takes two tiles), and the FFN's tiled layout exact
/// against plaintext with a partial last tile (127 tokens: 64 + 63). The
/// insecure N = 256 set prefers the spatial encoding at such shapes, so this
/// runs at N = 8192 (a few seconds).
#[test]
fn interleaved_tiles_match_plaintext_and_are_chosen_for_wide_inputs() {
    // the real parameters at BERT-base's shapes: (C, M) at S = 128 tokens
    let p50 = Params::he128_n8192_p50;
    let ctx = Context::new(p50()).unwrap();
    let mut got = Vec::new();
    for (c, m) in [(768, 768), (768, 3072), (3072, 768), (30522, 768)] {
        let (lay, _) = plan(&ctx, &Config::new(47), &conv1x1(c, 1, 128, m, 1)).unwrap();
        eprintln!("BERT {c}→{m}: interleaved {}, blocking {:?}, {} tiles, {} in / {} out ciphertexts, {} weight transforms, {} products", lay.interleaved(), lay.blocking(), lay.tiles, lay.in_cts(), lay.out_cts(), lay.rows * lay.groups, lay.products());
        got.push((lay.interleaved(), lay.blocking(), lay.tiles, lay.rows * lay.groups));
    }
    // the real parameters' tiled choices on small wide-input shapes (full and
    // partial last tiles), each run against plaintext (the insecure N = 256
    // set prefers the spatial encoding at every such shape)
    let mut tiled = 0;
    for (i, (c, w, m)) in [(768, 127, 3072)].into_iter().enumerate() {
        let s = conv1x1(c, 1, w, m, 1);
        let (lay, _) = plan(&ctx, &Config::new(47), &s).unwrap();
        eprintln!("{s:?}: interleaved {}, blocking {:?}, {} tiles, {} in / {} out ciphertexts, {} products", lay.interleaved(), lay.blocking(), lay.tiles, lay.in_cts(), lay.out_cts(), lay.products());
        if lay.interleaved() && lay.tiles > 1 {
            tiled += 1;
            check(p50(), 47, s, 970 + i as u128);
        }
    }
    assert_eq!(tiled, 1, "the FFN shape with a partial last tile is tiled");
    assert_eq!(
        got,
        [
            (true, [8, 128, 0, 7], 1, 10_560),
            // the FFN's first layer: 2 tiles, 19,680 weight transforms for 39,360 products
            (true, [8, 64, 0, 15], 2, 19_680),
            (false, [64, 1, 128, 1], 1, 36_864),
            // the embedding keeps the spatial encoding (at 4/5 and 1/5, 8 tiles were chosen and
            // measured about twice as slow)
            (false, [64, 1, 128, 1], 1, 366_336),
        ]
    );
}
