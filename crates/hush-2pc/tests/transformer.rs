//! Transformer operators against the plaintext fixed-point reference (the
//! same operator code on [`Ctx::clear`]) and against f64, over the
//! in-memory channel, in both comparison families, in tee and dealer mode;
//! pinned bytes and rounds; plan/prefill; refusals; malformed peers; and
//! curious-party tests for the dealt truncation and powers.

mod common;
use common::run_tee;
use hush_2pc::deal::matrix::MatDims;
use hush_2pc::nonlinear::Proto;
use hush_2pc::share::{share_arith, ArithShare, FixedPoint};
use hush_2pc::tee::Dealer;
use hush_2pc::transformer::{elementwise, gelu, layernorm, matmul, recip, softmax, Bound, Ctx};
use hush_primitives::{Block, Prg};
use hush_transport::{Channel, Cost, MemChannel};

type Op = std::sync::Arc<dyn Fn(&mut Ctx, &mut dyn Channel, &ArithShare) -> hush_2pc::Result<ArithShare> + Send + Sync>;

fn fx() -> FixedPoint {
    FixedPoint::new(64, 12).unwrap()
}

fn enc(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| fx().encode(*x)).collect()
}

fn dec(v: &[u64]) -> Vec<f64> {
    v.iter().map(|x| fx().decode(*x)).collect()
}

struct Out {
    secure: Vec<f64>,
    clear: Vec<f64>,
    cost: Cost,
}

/// Runs `op` on a sharing of `x` in tee mode (family `proto`), and on the
/// clear reference.
fn run(proto: Proto, one_round: bool, x: &[f64], op: Op) -> Out {
    let xs = enc(x);
    let (s0, s1) = share_arith(fx().ring, &xs, &mut Prg::new(Block(7)));
    let (o0, o1) = (op.clone(), op.clone());
    let (a, b) = run_tee(
        move |ch, d| {
            let mut c = Ctx::new(0, proto, std::mem::replace(d, Dealer::new(Box::new(Null))), fx()).unwrap();
            c.one_round = one_round;
            let before = ch.cost();
            let r = o0(&mut c, ch, &s0).unwrap();
            (r.v.clone(), ch.cost() - before)
        },
        move |ch, d| {
            let mut c = Ctx::new(1, proto, std::mem::replace(d, Dealer::new(Box::new(Null))), fx()).unwrap();
            c.one_round = one_round;
            let r = o1(&mut c, ch, &s1).unwrap();
            r.v.clone()
        },
    );
    let ring = fx().ring;
    let secure = dec(&a.0.iter().zip(&b).map(|(p, q)| ring.add(*p, *q)).collect::<Vec<_>>());
    let mut cc = Ctx::clear(fx());
    let (mut dummy, _peer) = MemChannel::pair();
    let clear = dec(&op(&mut cc, &mut dummy, &ArithShare::new(ring, xs)).unwrap().v);
    Out { secure, clear, cost: a.1 }
}

/// A module that serves nothing (a placeholder while the real dealer is moved).
struct Null;
impl hush_tee::TrustedModule for Null {
    fn call(&mut self, _: &hush_tee::Request) -> hush_tee::Result<hush_tee::Response> {
        Err(hush_tee::Error::Malformed("null module".into()))
    }
    fn stats(&self) -> hush_tee::ModuleStats {
        hush_tee::ModuleStats::default()
    }
    fn describe(&self) -> String {
        "null".into()
    }
}

fn max_err(a: &[f64], b: &[f64]) -> (f64, usize) {
    a.iter().zip(b).enumerate().map(|(i, (x, y))| ((x - y).abs(), i)).fold((0.0, 0), |m, e| if e.0 > m.0 { e } else { m })
}

fn randoms(n: usize, lo: f64, hi: f64, seed: u64) -> Vec<f64> {
    let mut p = Prg::new(Block(seed as u128));
    (0..n).map(|_| lo + (hi - lo) * (p.next_u64() >> 11) as f64 / (1u64 << 53) as f64).collect()
}

const ULP: f64 = 1.0 / 4096.0;

fn gelu_op() -> Op {
    std::sync::Arc::new(|c, ch, x| gelu::gelu(c, ch, x))
}

#[test]
fn gelu_matches_reference_and_float_in_both_families() {
    let mut x = randoms(600, -6.0, 6.0, 1);
    // edges: zero, ±1 ulp, the segment boundaries ±1.6 and ±4 and their
    // neighbours, large magnitudes (saturating segment), far out of any
    // activation range but inside the ring.
    x.extend([0.0, ULP, -ULP, 1.6, -1.6, 1.6 - ULP, 4.0, -4.0, 4.0 + ULP, -4.0 - ULP, 100.0, -100.0, 1e6, -1e6, 1e9, -1e9]);
    for proto in [Proto::Fss, Proto::Tami] {
        let o = run(proto, true, &x, gelu_op());
        let want: Vec<f64> = x.iter().map(|v| gelu::gelu_f64(*v)).collect();
        let (e, i) = max_err(&o.secure, &want);
        assert!(e <= gelu::GELU_ERR_F12, "{proto:?}: gelu error {e} at x = {} (got {}, want {})", x[i], o.secure[i], want[i]);
        let (e, i) = max_err(&o.secure, &o.clear);
        assert!(e <= 4.0 * ULP, "{proto:?}: secure vs reference {e} at x = {}", x[i]);
    }
}

#[test]
fn gelu_rounds_and_bytes_are_pinned() {
    let x = randoms(100, -5.0, 5.0, 2);
    let n = x.len() as u64;
    for one_round in [true, false] {
        let o = run(Proto::Fss, one_round, &x, gelu_op());
        // fss ReLU: one exchange of n·8 bytes each way; the clip+split ReLU
        // batch 3n; powers: 1 exchange of n (one-round) or 2 Beaver rounds
        // (x² then x³, x⁴: 2n then 4n openings); truncation of the powers
        // u³, u⁴ 2n (u and u² are scaled up locally); the selection's
        // truncate-and-multiply 2n and the truncation of P₁ n, in one
        // exchange.
        let (pw_rounds, pw_elems) = if one_round { (1, n) } else { (2, 2 * n + 4 * n) };
        assert_eq!(o.cost.rounds, 4 + pw_rounds, "one_round = {one_round}");
        assert_eq!(o.cost.bytes_sent, 8 * (n + 3 * n + pw_elems + 2 * n + 2 * n + n), "one_round = {one_round}");
        assert_eq!(o.cost.bytes_sent, o.cost.bytes_recv);
    }
}

#[test]
fn softmax_matches_reference_with_ties_and_large_negatives() {
    // rows of 8: random, all equal (ties everywhere), one huge negative,
    // repeated maximum, a row spanning [-40, 3], and rows of odd length.
    let len = 8;
    let mut x = randoms(8 * len, -4.0, 4.0, 3);
    x.extend([1.5; 8]);
    x.extend([0.0, -1e6, 0.5, -3.0, -1000.0, 2.0, 2.0, -20.0]);
    x.extend([3.0, 3.0, 3.0, 1.0, 3.0, -2.0, 0.0, 3.0]);
    x.extend([3.0, -40.0, -16.0, -15.9, -8.0, 0.0, 1.0, 2.5]);
    let o = run(Proto::Tami, true, &x, std::sync::Arc::new(move |c, ch, x| softmax::softmax(c, ch, x, len)));
    let want = softmax::softmax_f64(&x, len);
    let (e, i) = max_err(&o.secure, &want);
    assert!(e <= softmax::SOFTMAX_ERR_F12, "softmax error {e} at {i}: got {} want {}", o.secure[i], want[i]);
    let (e, _) = max_err(&o.secure, &o.clear);
    assert!(e <= 4.0 * ULP, "secure vs reference {e}");
    // each row sums to 1 within the bound
    for r in o.secure.chunks(len) {
        assert!((r.iter().sum::<f64>() - 1.0).abs() < len as f64 * 2.0 * ULP, "{r:?}");
    }
    // odd row length (the tree's carried element) and length 1, fss family
    for len in [5usize, 1] {
        let x = randoms(3 * len, -6.0, 6.0, 30 + len as u64);
        let o = run(Proto::Fss, true, &x, std::sync::Arc::new(move |c, ch, x| softmax::softmax(c, ch, x, len)));
        let (e, i) = max_err(&o.secure, &softmax::softmax_f64(&x, len));
        assert!(e <= softmax::SOFTMAX_ERR_F12, "len {len}: error {e} at {i}");
    }
}

#[test]
fn exp_saturates_outside_its_range() {
    let mut x = randoms(200, -18.0, 0.0, 4);
    x.extend([0.0, -ULP, -16.0, -16.0 - ULP, -1e3, -1e9, 0.5, 7.0, 1e6]);
    let o = run(Proto::Fss, true, &x, std::sync::Arc::new(|c, ch, x| softmax::exp_nonpos(c, ch, x)));
    for (i, v) in x.iter().enumerate() {
        let want = v.clamp(-softmax::EXP_CLIP, 0.0).exp();
        assert!((o.secure[i] - want).abs() <= ULP + 1e-4 * want, "exp({v}) = {} want {want}", o.secure[i]);
    }
}

#[test]
fn layernorm_matches_reference_including_near_zero_variance() {
    let len = 16;
    let mut x = randoms(6 * len, -3.0, 3.0, 5);
    for v in x.iter_mut().skip(len).take(len) {
        *v = *v * 50.0 + 200.0; // wide row with a large mean
    }
    let normal = x.len();
    x.extend([0.75; 16]); // zero variance
    x.extend((0..16).map(|i| 0.5 + if i % 2 == 0 { ULP } else { 0.0 })); // variance ~ulp²
    x.extend((0..16).map(|i| if i == 3 { 1e7 } else { i as f64 })); // beyond the clip: saturates
    let o = run(Proto::Tami, true, &x, std::sync::Arc::new(move |c, ch, x| layernorm::layernorm(c, ch, x, len, 1e-5, None, None)));
    let want = layernorm::layernorm_f64(&x[..normal], len, 1e-5);
    let (e, i) = max_err(&o.secure[..normal], &want);
    assert!(e <= layernorm::LN_ERR_F12, "layernorm error {e} at {i}: got {} want {}", o.secure[i], want[i]);
    let (e, _) = max_err(&o.secure, &o.clear);
    assert!(e <= 0.02, "secure vs reference {e}");
    // zero and near-zero variance: outputs stay near 0 (not amplified noise)
    for v in &o.secure[normal..normal + 32] {
        assert!(v.abs() <= 0.02, "near-constant row gave {v}");
    }
    // the clipped row equals LayerNorm of the row with 1e7 replaced by 2^10
    let mut clipped: Vec<f64> = (0..16).map(|i| i as f64).collect();
    clipped[3] = 1024.0;
    let (e, _) = max_err(&o.secure[normal + 32..], &layernorm::layernorm_f64(&clipped, len, 1e-5));
    assert!(e <= layernorm::LN_ERR_F12, "clipped row error {e}");
    // with public gamma and beta
    let g: Vec<f64> = (0..len).map(|i| 0.5 + i as f64 / 10.0).collect();
    let b: Vec<f64> = (0..len).map(|i| i as f64 / 7.0 - 1.0).collect();
    let x2 = randoms(2 * len, -2.0, 2.0, 6);
    let (g2, b2) = (g.clone(), b.clone());
    let o = run(Proto::Fss, true, &x2, std::sync::Arc::new(move |c, ch, x| layernorm::layernorm(c, ch, x, len, 1e-12, Some(&g2), Some(&b2))));
    let want: Vec<f64> = layernorm::layernorm_f64(&x2, len, 1e-12).iter().enumerate().map(|(i, v)| v * g[i % len] + b[i % len]).collect();
    let (e, i) = max_err(&o.secure, &want);
    assert!(e <= 2.0 * layernorm::LN_ERR_F12, "affine layernorm error {e} at {i}");
}

#[test]
fn reciprocal_and_rsqrt_accurate_in_range_saturating_outside() {
    let mut v = randoms(100, 0.6, 200.0, 8);
    v.extend([0.5, 1.0, 2.0, 255.9, 256.0, 300.0, 1e5, 0.1, 0.0, -3.0]);
    let o = run(Proto::Fss, true, &v, std::sync::Arc::new(|c, ch, x| {
        let up = x.scale(1 << 12); // to scale 2^24
        let r = recip::reciprocal(c, ch, &up, 24, -1, 8)?;
        c.trunc(ch, &r, 12)
    }));
    for (i, x) in v.iter().enumerate() {
        let x = fx().decode(fx().encode(*x));
        let want = 1.0 / x.clamp(0.5, 256.0);
        assert!((o.secure[i] - want).abs() <= 2.0 * ULP + 1e-5 * want, "1/{x} = {} want {want}", o.secure[i]);
    }
    let o = run(Proto::Tami, true, &v, std::sync::Arc::new(|c, ch, x| {
        let up = x.scale(1 << 12);
        let r = recip::rsqrt(c, ch, &up, 24, -12, 22)?;
        c.trunc(ch, &r, 12)
    }));
    for (i, x) in v.iter().enumerate() {
        let x = fx().decode(fx().encode(*x));
        let want = 1.0 / x.clamp(1.0 / 4096.0, 4194304.0).sqrt();
        // three Newton steps: relative error < 3.5·10⁻⁵ (recip.rs)
        assert!((o.secure[i] - want).abs() <= 2.0 * ULP + 3.5e-5 * want, "1/√{x} = {} want {want}", o.secure[i]);
    }
}

#[test]
fn matmul_mul_pow_match_reference_with_pinned_cost() {
    let d = MatDims { m: 3, k: 5, n: 4 };
    let count = 2;
    let a = randoms(count * d.m * d.k, -4.0, 4.0, 9);
    let b = randoms(count * d.k * d.n, -4.0, 4.0, 10);
    let na = a.len();
    let mut x = a.clone();
    x.extend(&b);
    let o = run(Proto::Fss, true, &x, std::sync::Arc::new(move |c, ch, x| {
        let (aa, bb) = (ArithShare::new(x.ring, x.v[..na].to_vec()), ArithShare::new(x.ring, x.v[na..].to_vec()));
        matmul::matmul(c, ch, &aa, &bb, count, d, Bound::Proven { x: 4.0, y: 4.0 })
    }));
    let mut want = vec![0.0; count * d.m * d.n];
    let (ae, be) = (dec(&enc(&a)), dec(&enc(&b)));
    for q in 0..count {
        for i in 0..d.m {
            for j in 0..d.n {
                want[q * d.m * d.n + i * d.n + j] = (0..d.k).map(|t| ae[q * d.m * d.k + i * d.k + t] * be[q * d.k * d.n + t * d.n + j]).sum();
            }
        }
    }
    let (e, _) = max_err(&o.secure, &want);
    assert!(e <= ULP, "matmul error {e}");
    let (e, _) = max_err(&o.secure, &o.clear);
    assert!(e <= ULP, "matmul vs reference {e}");
    // one opening of E, F (count·(mk + kn)), one truncation opening (count·mn)
    assert_eq!(o.cost.rounds, 2);
    assert_eq!(o.cost.bytes_sent, 8 * (count * (d.m * d.k + d.k * d.n) + count * d.m * d.n) as u64);

    let x = randoms(64, -30.0, 30.0, 11);
    let n = x.len() as u64;
    let o = run(Proto::Fss, true, &x, std::sync::Arc::new(|c, ch, x| {
        let y = x.scale(3);
        elementwise::mul(c, ch, x, &y, Bound::Proven { x: 30.0, y: 90.0 })
    }));
    for (i, v) in x.iter().enumerate() {
        let xe = fx().decode(fx().encode(*v));
        assert!((o.secure[i] - 3.0 * xe * xe).abs() <= ULP, "mul {v}");
    }
    assert_eq!((o.cost.rounds, o.cost.bytes_sent), (2, 8 * (2 * n + n)));
    let o = run(Proto::Fss, true, &x, std::sync::Arc::new(|c, ch, x| elementwise::pow(c, ch, x, 2, Bound::Proven { x: 30.0, y: 30.0 })));
    for (i, v) in x.iter().enumerate() {
        let xe = fx().decode(fx().encode(*v));
        assert!((o.secure[i] - xe * xe).abs() <= ULP, "pow2 {v}");
    }
    // Pow by 2 opens x − r once: half of Beaver's x·x
    assert_eq!((o.cost.rounds, o.cost.bytes_sent), (2, 8 * (n + n)));
    let x = randoms(64, -3.0, 3.0, 12);
    let o = run(Proto::Fss, true, &x, std::sync::Arc::new(|c, ch, x| elementwise::pow(c, ch, x, 4, Bound::Proven { x: 3.0, y: 3.0 })));
    for (i, v) in x.iter().enumerate() {
        let xe = fx().decode(fx().encode(*v));
        assert!((o.secure[i] - xe.powi(4)).abs() <= ULP, "pow4 {v}");
    }
    assert_eq!(o.cost.rounds, 2);
}

#[test]
fn softmax_and_layernorm_rounds_with_and_without_one_round_products() {
    let x = randoms(2 * 16, -3.0, 3.0, 13);
    let sm: Op = std::sync::Arc::new(|c, ch, x| softmax::softmax(c, ch, x, 16));
    let ln: Op = std::sync::Arc::new(|c, ch, x| layernorm::layernorm(c, ch, x, 16, 1e-5, None, None));
    // fss: softmax = tree log2(16) + clip 1 + poly (powers 1 + truncation
    //      of u³ 1) + 6 squarings (6 fused truncate-and-squares, the first
    //      truncating the polynomial, and a last truncation: 7)
    //      + reciprocal (1 + 2·3 − 1: truncations fused with products, the
    //      first product linear in the guess, the last truncation fused
    //      with the output product) + 2;
    //      without one-round products the
    //      degree-3 powers take 2 Beaver rounds and each square 1 (same).
    // layernorm = clip 1 + mean 1 + square 1 + variance 2 + rsqrt (1 + 3·2
    // − 1, as the reciprocal's) + 2.
    for (op, name, with, without) in [(sm, "softmax", 4 + 1 + 2 + 7 + 6 + 2, 4 + 1 + 3 + 7 + 6 + 2), (ln, "layernorm", 13, 13)] {
        let a = run(Proto::Fss, true, &x, op.clone());
        let b = run(Proto::Fss, false, &x, op);
        assert_eq!(a.cost.rounds, with, "{name} with one-round products");
        assert_eq!(b.cost.rounds, without, "{name} without");
        let (e, _) = max_err(&a.secure, &b.secure);
        assert!(e <= 4.0 * ULP, "{name}: both ways agree ({e})");
    }
}

#[test]
fn plan_prefill_then_run_consumes_exactly_the_plan() {
    let len = 8;
    let x = randoms(3 * len, -5.0, 5.0, 14);
    let xs = enc(&x);
    let (s0, s1) = share_arith(fx().ring, &xs, &mut Prg::new(Block(15)));
    let go = move |ch: &mut dyn Channel, d: &mut Dealer, party: u8, s: ArithShare| {
        let mut c = Ctx::new(party, Proto::Tami, std::mem::replace(d, Dealer::new(Box::new(Null))), fx()).unwrap();
        let zeros = ArithShare::zeros(fx().ring, s.len());
        let plan = c.plan(|c, ch| softmax::softmax(c, ch, &zeros, len)).unwrap();
        assert!(plan.len() > 10, "{plan:?}");
        c.prefill(&plan).unwrap();
        let before = ch.cost();
        let y = softmax::softmax(&mut c, ch, &s, len).unwrap();
        assert_eq!(c.pending(), 0);
        c.lazy().unwrap();
        // a mismatched plan is refused, not silently reused
        c.prefill(&plan).unwrap();
        let e = gelu::gelu(&mut c, ch, &s).unwrap_err();
        assert!(e.to_string().contains("plan mismatch"), "{e}");
        (y.v.clone(), (ch.cost() - before).rounds)
    };
    let (a, b) = run_tee(move |ch, d| go(ch, d, 0, s0), move |ch, d| go(ch, d, 1, s1));
    let ring = fx().ring;
    let got = dec(&a.0.iter().zip(&b.0).map(|(p, q)| ring.add(*p, *q)).collect::<Vec<_>>());
    let (e, _) = max_err(&got, &softmax::softmax_f64(&x, len));
    assert!(e <= softmax::SOFTMAX_ERR_F12, "{e}");
}

#[test]
fn interactive_mode_and_oversized_parameters_are_refused() {
    let (mut ca, mut cb) = MemChannel::pair();
    let t = std::thread::spawn(move || Dealer::in_process(&mut cb, 1).unwrap());
    let d = Dealer::in_process(&mut ca, 0).unwrap();
    let _d1 = t.join().unwrap();
    let e = Ctx::new(0, Proto::Cf2, d, fx()).err().expect("cf2 refused");
    assert!(e.to_string().contains("tami or fss") && e.to_string().contains("Ctx::new_interactive"), "{e}");
    // GeLU with too many fraction bits for the powers: refused up front
    let mut c = Ctx::clear(FixedPoint::new(64, 16).unwrap());
    let (mut ch, _p) = MemChannel::pair();
    let x = ArithShare::zeros(c.ring(), 4);
    let e = gelu::gelu(&mut c, &mut ch, &x).unwrap_err();
    assert!(e.to_string().contains("fraction bits"), "{e}");
    let e = softmax::softmax(&mut Ctx::clear(fx()), &mut ch, &x, 3).unwrap_err();
    assert!(e.to_string().contains("rows of 3"), "{e}");
    let e = layernorm::layernorm(&mut Ctx::clear(fx()), &mut ch, &x, 4, 1e-5, Some(&[1.0]), None).unwrap_err();
    assert!(e.to_string().contains("gamma"), "{e}");
}

#[test]
fn malformed_peer_messages_are_errors_not_panics() {
    // The peer sends a truncation opening of the wrong length, then one with
    // bits above a 37-bit ring (5 bytes per element).
    for bad in [vec![0u8; 7], vec![0xffu8; 5 * 4]] {
        let fx40 = FixedPoint::new(37, 8).unwrap();
        let (mut ca, mut cb) = MemChannel::pair();
        let t = std::thread::spawn(move || {
            let _d = Dealer::in_process(&mut cb, 1).unwrap();
            cb.send(&bad).unwrap();
            let _ = cb.recv();
        });
        let d = Dealer::in_process(&mut ca, 0).unwrap();
        let mut c = Ctx::new(0, Proto::Fss, d, fx40).unwrap();
        let x = ArithShare::zeros(fx40.ring, 4);
        let e = c.trunc(&mut ca, &x, 8).unwrap_err();
        assert!(e.to_string().contains("truncation"), "{e}");
        drop(ca);
        t.join().unwrap();
    }
}

#[test]
fn dealer_mode_runs_the_same_operators() {
    use hush_tee::dealer::{self, DealerConfig};
    use hush_tee::{DealerModule, ModuleRole};
    use hush_transport::{Identity, LinkSecurity, PeerCheck, TlsSettings};
    use std::sync::Arc;
    let di = Arc::new(Identity::generate().unwrap());
    let pi = Arc::new(Identity::generate().unwrap());
    let fp = di.fingerprint();
    let dl = LinkSecurity::Tls(TlsSettings { identity: di, peer: PeerCheck::AnyPeer, require_client_cert: false });
    let pl = LinkSecurity::Tls(TlsSettings { identity: pi, peer: PeerCheck::Pinned(vec![fp]), require_client_cert: false });
    let h = dealer::serve("127.0.0.1:0", DealerConfig::new(dl, hush_2pc::deal::kinds()), Arc::new(|_| {})).unwrap();
    let sid = dealer::new_session_id();
    let m0 = DealerModule::connect(&h.addr.to_string(), &pl, &sid, ModuleRole::Sender).unwrap();
    let m1 = DealerModule::connect(&h.addr.to_string(), &pl, &sid, ModuleRole::Receiver).unwrap();
    let len = 8;
    let x = randoms(2 * len, -4.0, 4.0, 16);
    let (s0, s1) = share_arith(fx().ring, &enc(&x), &mut Prg::new(Block(17)));
    let go = move |ch: &mut dyn Channel, m: DealerModule, party: u8, s: ArithShare| {
        let mut d = Dealer::new(Box::new(m));
        let mut out = Vec::new();
        // fss; then tami with bounds, whose ReLU chains deal the
        // swapped-role kind (seeded at host 0) through the dealer
        for proto in [Proto::Fss, Proto::Tami] {
            let mut c = Ctx::new(party, proto, d, fx()).unwrap();
            let y = softmax::softmax_within(&mut c, ch, &s, len, 4.0).unwrap();
            let g = gelu::gelu_within(&mut c, ch, &s, 4.0).unwrap();
            out.push((y.v.clone(), g.v.clone()));
            d = c.into_dealer().unwrap();
        }
        out
    };
    let (mut ca, mut cb) = MemChannel::pair();
    let t = std::thread::spawn(move || go(&mut cb, m1, 1, s1));
    let a = go(&mut ca, m0, 0, s0);
    let b = t.join().unwrap();
    let ring = fx().ring;
    let add = |p: &[u64], q: &[u64]| dec(&p.iter().zip(q).map(|(u, v)| ring.add(*u, *v)).collect::<Vec<_>>());
    for (a, b) in a.iter().zip(&b) {
        let (e, _) = max_err(&add(&a.0, &b.0), &softmax::softmax_f64(&x, len));
        assert!(e <= softmax::SOFTMAX_ERR_F12, "dealer-mode softmax {e}");
        let want: Vec<f64> = x.iter().map(|v| gelu::gelu_f64(*v)).collect();
        let (e, _) = max_err(&add(&a.1, &b.1), &want);
        assert!(e <= gelu::GELU_ERR_F12, "dealer-mode gelu {e}");
    }
}

/// `Ctx::relu_chain`: a chain of bounded TAMI ReLUs (x_{i+1} = a public
/// affine map of r_i) matches the clear reference exactly, sends exactly
/// the bytes of the same ReLUs called one by one, in one flight fewer per
/// link (pinned: 3k + 1 instead of 4k), runs from a plan dealt ahead
/// (plan and run agree on which steps are linked), and falls back to
/// separate calls where a step cannot be linked (a whole-ring batch).
#[test]
fn relu_chain_matches_separate_relus_in_fewer_flights() {
    let x = randoms(300, -20.0, 20.0, 61);
    let bound = 200.0 * 4096.0;
    // step (exact in the ring): the next input is 3·r − x_prev − 2, i.e.
    // 2x − 2 or |x| − 2: |x_i| ≤ 2·|x_{i−1}| + 2, below 200 for the four
    // steps from |x_0| ≤ 20
    let chain = move |k: usize, plan: bool, bounds: Vec<f64>| -> Op {
        std::sync::Arc::new(move |c: &mut Ctx, ch: &mut dyn Channel, x: &ArithShare| {
            let ring = x.ring;
            let two = ring.from_signed(2 * 4096);
            let mut prev = x.clone();
            let party0 = c.party == 0;
            let mut step = |_: usize, r: &ArithShare| -> hush_2pc::Result<ArithShare> {
                let mut n = r.scale(3).sub(&prev);
                if party0 {
                    n = ArithShare { ring, v: n.v.iter().map(|a| ring.sub(*a, two)).collect() };
                }
                prev = n.clone();
                Ok(n)
            };
            let sizes = vec![x.len(); k];
            let plan = plan && !c.is_clear();
            if plan {
                let zeros = ArithShare::zeros(ring, x.len());
                let p = c.plan(|c, ch| c.relu_chain(ch, &zeros, &sizes, &bounds, &mut |_, r: &ArithShare| Ok(r.clone())))?;
                c.prefill(&p)?;
            }
            let y = c.relu_chain(ch, x, &sizes, &bounds, &mut step)?;
            if plan {
                assert_eq!(c.pending(), 0, "the plan is consumed exactly");
            }
            Ok(y)
        })
    };
    let k = 4;
    let linked = run(Proto::Tami, true, &x, chain(k, false, vec![bound; k]));
    assert_eq!(linked.secure, linked.clear, "exact against the clear reference");
    let planned = run(Proto::Tami, true, &x, chain(k, true, vec![bound; k]));
    assert_eq!(planned.secure, planned.clear);
    // the same ReLUs one by one
    let separate: Op = std::sync::Arc::new(move |c: &mut Ctx, ch: &mut dyn Channel, x: &ArithShare| {
        let ring = x.ring;
        let two = ring.from_signed(2 * 4096);
        let mut cur = x.clone();
        let mut r = c.relu_within(ch, &cur, bound)?;
        for _ in 1..k {
            let mut n = r.scale(3).sub(&cur);
            if c.party == 0 {
                n = ArithShare { ring, v: n.v.iter().map(|a| ring.sub(*a, two)).collect() };
            }
            cur = n;
            r = c.relu_within(ch, &cur, bound)?;
        }
        Ok(r)
    });
    let sep = run(Proto::Tami, true, &x, separate);
    assert_eq!(sep.clear, linked.clear);
    assert_eq!((sep.cost.rounds, linked.cost.rounds), (4 * k as u32, 3 * k as u32 + 1), "flights");
    assert_eq!(sep.cost.bytes_sent + sep.cost.bytes_recv, linked.cost.bytes_sent + linked.cost.bytes_recv, "the same bytes");
    // a whole-ring step (two merge levels) is not linked to the next one
    let mixed = run(Proto::Tami, true, &x, chain(3, false, vec![bound, f64::INFINITY, bound]));
    assert_eq!(mixed.secure, mixed.clear);
    // fss: no linking, the same results
    let fss = run(Proto::Fss, true, &x, chain(k, false, vec![bound; k]));
    assert_eq!(fss.secure, fss.clear);
}

/// The curious party: party 1's whole view of a truncation (its dealt
/// share r₁, hi₁, msb₁ and party 0's opening message) must not predict the
/// sign of the shared input better than chance — the test fails if r were
/// not uniform (e.g. fixed, or derived from party 1's own streams only) or
/// if the opening were x + r₀ without party 0's mask.
#[test]
fn curious_party_learns_nothing_from_truncation_power_or_matrix_openings() {
    // also the fused truncate-and-square / truncate-and-multiply openings
    let n = 4000usize;
    let ring = fx().ring;
    let mut p = Prg::new(Block(18));
    // secret bit per element: x = +2^40 or −2^40 ulps (far apart)
    let bits: Vec<bool> = (0..n).map(|_| p.next_u64() & 1 == 1).collect();
    let xs: Vec<u64> = bits.iter().map(|b| ring.from_signed(if *b { 1 << 40 } else { -(1 << 40) })).collect();
    let (s0, s1) = share_arith(ring, &xs, &mut p);
    // matmul: party 1's input matrix A (40×100) is the shared vector; B is 100×1
    let md = MatDims { m: 40, k: 100, n: 1 };
    let ones = ArithShare::new(ring, vec![0; 100]);
    for which in ["trunc", "powers", "matmul", "product", "trunc_square", "trunc_mul"] {
        let ones = ones.clone();
        let (s0, s1c) = (s0.clone(), s1.clone());
        let (mut ca, cb) = MemChannel::pair();
        let rec = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let rec2 = rec.clone();
        let t = std::thread::spawn(move || {
            let mut cb = Recording { inner: cb, log: rec2 };
            let d = Dealer::in_process(&mut cb, 1).unwrap();
            let mut c = Ctx::new(1, Proto::Fss, d, fx()).unwrap();
            match which {
                "trunc" => drop(c.trunc(&mut cb, &s1c, 12).unwrap()),
                "powers" => drop(c.powers(&mut cb, &s1c, 3).unwrap()),
                "product" => drop(c.product(&mut cb, &[&s1c, &s1c.scale(3)]).unwrap()),
                "trunc_square" => drop(c.trunc_square(&mut cb, &s1c, 24).unwrap()),
                "trunc_mul" => drop(c.trunc_mul(&mut cb, &s1c, 24, &s1c).unwrap()),
                _ => drop(c.matmul(&mut cb, &s1c, &ones, 1, md).unwrap()),
            }
        });
        let d = Dealer::in_process(&mut ca, 0).unwrap();
        let mut c = Ctx::new(0, Proto::Fss, d, fx()).unwrap();
        let ones0 = ArithShare::new(ring, vec![1; 100]);
        match which {
            "trunc" => drop(c.trunc(&mut ca, &s0, 12).unwrap()),
            "powers" => drop(c.powers(&mut ca, &s0, 3).unwrap()),
            "product" => drop(c.product(&mut ca, &[&s0, &s0.scale(3)]).unwrap()),
            "trunc_square" => drop(c.trunc_square(&mut ca, &s0, 24).unwrap()),
            "trunc_mul" => drop(c.trunc_mul(&mut ca, &s0, 24, &s0).unwrap()),
            _ => drop(c.matmul(&mut ca, &s0, &ones0, 1, md).unwrap()),
        }
        t.join().unwrap();
        // The attack: party 1 reconstructs what it can of the opened value
        // (peer message + its own share) and guesses the sign from its top bit.
        let log = rec.lock().unwrap();
        let msg = log.last().expect("a received message");
        assert!(msg.len() >= n * 8);
        // (trunc_mul opens two values per element: the truncation's and y − s)
        let halves: &[usize] = if which == "trunc_mul" { &[0, 1] } else { &[0] };
        for &hf in halves {
            let mut right = 0;
            for i in 0..n {
                let o = (hf * n + i) * 8;
                let peer = u64::from_le_bytes(msg[o..o + 8].try_into().unwrap());
                let guess = !ring.msb(ring.add(peer, s1.v[i]));
                right += (guess == bits[i]) as usize;
            }
            // chance: n/2 ± 5σ (σ = √n/2)
            let dev = (right as f64 - n as f64 / 2.0).abs();
            assert!(dev <= 5.0 * (n as f64).sqrt() / 2.0, "{which}: the view predicts the input's sign {right}/{n} times");
        }
    }
}

struct Recording {
    inner: MemChannel,
    log: std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
}

impl Channel for Recording {
    fn send(&mut self, b: &[u8]) -> hush_transport::Result<()> {
        self.inner.send(b)
    }
    fn recv(&mut self) -> hush_transport::Result<Vec<u8>> {
        let m = self.inner.recv()?;
        self.log.lock().unwrap().push(m.clone());
        Ok(m)
    }
    fn recv_exact_into(&mut self, what: &'static str, out: &mut [u8]) -> hush_transport::Result<()> {
        self.inner.recv_exact_into(what, out)?;
        self.log.lock().unwrap().push(out.to_vec());
        Ok(())
    }
    fn cost(&self) -> Cost {
        self.inner.cost()
    }
    fn max_frame(&self) -> usize {
        self.inner.max_frame()
    }
    fn set_timeout(&mut self, timeout: std::time::Duration) {
        self.inner.set_timeout(timeout)
    }
}

/// The documented polynomial fits, in f64 on dense grids: GeLU's two
/// segments (≤ 4.4·10⁻⁴ plus erf's own 1.5·10⁻⁷) and exp on [−¼, 0]
/// (≤ 1.14·10⁻⁶).
#[test]
fn polynomial_fits_are_within_their_documented_error() {
    let pv = |c: &[f64], u: f64| c.iter().rev().fold(0.0, |a, k| a * u + k);
    let g = |t: f64| t * 0.5 * (1.0 - gelu::erf(t / std::f64::consts::SQRT_2));
    let split = gelu::GELU_SPLIT / gelu::GELU_CLIP;
    let mut worst: f64 = 0.0;
    for i in 0..=100_000 {
        let u = i as f64 / 100_000.0;
        let p = if u < split { pv(&gelu::GELU_P1, u) } else { pv(&gelu::GELU_P2, u) };
        worst = worst.max((p - g(u * gelu::GELU_CLIP)).abs());
    }
    assert!(worst <= 4.4e-4 + 2e-7, "gelu fit error {worst}");
    assert!(g(gelu::GELU_CLIP) < 1.3e-4 && (pv(&gelu::GELU_P2, 1.0) - g(gelu::GELU_CLIP)).abs() < 4.4e-4);
    let mut worst: f64 = 0.0;
    for i in 0..=100_000 {
        let v = -0.25 * i as f64 / 100_000.0;
        worst = worst.max((pv(&softmax::EXP_POLY, v) - v.exp()).abs());
    }
    assert!(worst <= 1.14e-6 + 1e-9, "exp fit error {worst}");
}

/// The truncation pair's documented range: faithful for |x| < 2^{ℓ−2}
/// (checked at both ends), and `trunc_full` (the comparison family's
/// full-range truncation) for values beyond it.
#[test]
fn truncation_range_is_as_documented() {
    let ring = fx().ring;
    let lim = (1i64 << 62) - 1;
    let inside: Vec<u64> = [lim, -lim, 0, 1, -1, 12345, -(1 << 61)].iter().map(|v| ring.from_signed(*v)).collect();
    let beyond: Vec<u64> = [(1i64 << 62) + 5, i64::MIN + 3, i64::MAX].iter().map(|v| ring.from_signed(*v)).collect();
    let mut all = inside.clone();
    all.extend(&beyond);
    let (s0, s1) = share_arith(ring, &all, &mut Prg::new(Block(19)));
    let go = move |ch: &mut dyn Channel, d: &mut Dealer, party: u8, s: ArithShare| {
        let mut c = Ctx::new(party, Proto::Fss, std::mem::replace(d, Dealer::new(Box::new(Null))), fx()).unwrap();
        let n = s.len();
        let inside = ArithShare::new(s.ring, s.v[..n - 3].to_vec());
        let a = c.trunc(ch, &inside, 12).unwrap();
        let b = c.trunc_full(ch, &s, 12).unwrap();
        (a.v.clone(), b.v.clone())
    };
    let (a, b) = run_tee(move |ch, d| go(ch, d, 0, s0), move |ch, d| go(ch, d, 1, s1));
    for (i, x) in inside.iter().enumerate() {
        let got = ring.to_signed(ring.add(a.0[i], b.0[i]));
        let want = ring.to_signed(*x) >> 12;
        assert!(got == want || got == want + 1, "trunc({}) = {got}, want {want}", ring.to_signed(*x));
    }
    for (i, x) in all.iter().enumerate() {
        let got = ring.to_signed(ring.add(a.1[i], b.1[i]));
        let want = ring.to_signed(*x) >> 12;
        assert!(got == want || got == want - 1, "trunc_full({}) = {got}, want {want}", ring.to_signed(*x));
    }
}

/// Empty inputs give empty outputs in every operator (no panic, no message).
#[test]
fn empty_inputs_give_empty_outputs() {
    let ops: Vec<Op> = vec![
        gelu_op(),
        std::sync::Arc::new(|c, ch, x| softmax::softmax(c, ch, x, 4)),
        std::sync::Arc::new(|c, ch, x| softmax::exp_nonpos(c, ch, x)),
        std::sync::Arc::new(|c, ch, x| layernorm::layernorm(c, ch, x, 4, 1e-5, None, None)),
        std::sync::Arc::new(|c, ch, x| elementwise::pow(c, ch, x, 2, Bound::Proven { x: 1.0, y: 1.0 })),
    ];
    for op in ops {
        let o = run(Proto::Fss, true, &[], op);
        assert!(o.secure.is_empty() && o.clear.is_empty());
        assert_eq!(o.cost.bytes_sent, 0);
    }
}

/// Smaller rings: GeLU runs at ℓ = 48, f = 8 within its bound plus the
/// coarser ulp; Softmax and LayerNorm, whose internal scales need ℓ = 64,
/// refuse with an error instead of wrapping.
#[test]
fn smaller_rings_run_or_refuse_cleanly() {
    let fx48 = FixedPoint::new(48, 8).unwrap();
    let x = randoms(200, -6.0, 6.0, 21);
    let xs: Vec<u64> = x.iter().map(|v| fx48.encode(*v)).collect();
    let (s0, s1) = share_arith(fx48.ring, &xs, &mut Prg::new(Block(22)));
    let go = move |ch: &mut dyn Channel, d: &mut Dealer, party: u8, s: ArithShare| {
        let mut c = Ctx::new(party, Proto::Tami, std::mem::replace(d, Dealer::new(Box::new(Null))), fx48).unwrap();
        let y = gelu::gelu(&mut c, ch, &s).unwrap();
        let e1 = softmax::softmax(&mut c, ch, &s, 8).unwrap_err().to_string();
        let e2 = layernorm::layernorm(&mut c, ch, &s, 8, 1e-5, None, None).unwrap_err().to_string();
        (y.v.clone(), e1, e2)
    };
    let (a, b) = run_tee(move |ch, d| go(ch, d, 0, s0), move |ch, d| go(ch, d, 1, s1));
    for (i, v) in x.iter().enumerate() {
        let xe = fx48.decode(fx48.encode(*v));
        let got = fx48.decode(fx48.ring.add(a.0[i], b.0[i]));
        assert!((got - gelu::gelu_f64(xe)).abs() <= gelu::GELU_ERR_F12 + 3.0 / 256.0, "gelu({xe}) = {got} at ℓ = 48");
    }
    assert!(a.1.contains("ring") && a.2.contains("layernorm"), "{} / {}", a.1, a.2);
}

/// TAMI's one-round product of d distinct factors: exact in the ring (equal
/// to the clear product), one round and d·n elements each way, against
/// ⌈log2 d⌉ Beaver rounds and 2(d − 1)·n elements.
#[test]
fn one_round_product_of_distinct_factors() {
    let x = randoms(50, -3.0, 3.0, 23);
    let n = x.len() as u64;
    for d in 2usize..=4 {
        for one_round in [true, false] {
            let op: Op = std::sync::Arc::new(move |c, ch, x| {
                let fs = [x.clone(), c.add_const(&x.scale(3), 5), x.neg(), c.add_const(x, 7 << 12)];
                let refs: Vec<&ArithShare> = fs.iter().take(d).collect();
                c.product(ch, &refs)
            });
            let o = run(Proto::Fss, one_round, &x, op);
            assert_eq!(o.secure, o.clear, "d = {d}, one_round = {one_round}: exact in the ring");
            let (rounds, elems) = if one_round { (1, d as u64 * n) } else { ((d as f64).log2().ceil() as u32, 2 * (d as u64 - 1) * n) };
            assert_eq!((o.cost.rounds, o.cost.bytes_sent), (rounds, 8 * elems), "d = {d}, one_round = {one_round}");
        }
    }
}

/// The four dealing kinds: both shares reconstruct the stated correlation,
/// party 1's share is exactly the expansion of its sub-key (what the dealer
/// service may send instead), and bad parameters are refused.
#[test]
fn dealt_kinds_hold_their_correlations_and_seed_party1() {
    use hush_2pc::deal::{matrix, powers, subset, trunc};
    use hush_deal::{sub_key, Description};
    let key = Block(0x1234_5678_9abc_def0_1122_3344_5566_7788);
    let bits = 64;
    let ring = fx().ring;
    let n = 37u32;
    let kinds: Vec<(&dyn Description, Vec<u8>, u32)> = vec![
        (&trunc::TRUNC_PAIRS, trunc::TruncPairs::request(0, n, bits, 12).params, n),
        (&trunc::TRUNC_SQUARES, trunc::TruncSquares::request(0, n, bits, 24).params, n),
        (&trunc::TRUNC_MULS, trunc::TruncMuls::request(0, n, bits, 25).params, n),
        (&powers::POWER_TUPLES, powers::PowerTuples::request(0, n, bits, 4).params, n),
        (&subset::SUBSET_PRODUCTS, subset::SubsetProducts::request(0, n, bits, 3).params, n),
        (&matrix::MATRIX_TRIPLES, matrix::MatrixTriples::request(0, 2, bits, MatDims { m: 3, k: 4, n: 5 }).params, 2),
    ];
    for (k, params, count) in &kinds {
        let p1 = k.deal(key, 1, *count, params).unwrap();
        assert_eq!(p1, k.expand(sub_key(key, 1), *count, params).unwrap(), "{}", k.kind());
        assert_eq!(k.seeded_party(), Some(1));
        assert!(k.label(0, *count, &[1, 2, 3]).is_err(), "{}: malformed parameters refused", k.kind());
    }
    let n = n as usize;
    let t0 = trunc::deal_trunc(key, 0, n, bits, 12);
    let t1 = trunc::deal_trunc(key, 1, n, bits, 12);
    let m0 = trunc::deal_trunc_mul(key, 0, n, bits, 25);
    let m1 = trunc::deal_trunc_mul(key, 1, n, bits, 25);
    let q0 = trunc::deal_trunc_square(key, 0, n, bits, 24);
    let q1 = trunc::deal_trunc_square(key, 1, n, bits, 24);
    let p0 = powers::deal_powers(key, 0, n, bits, 4);
    let p1 = powers::deal_powers(key, 1, n, bits, 4);
    let s0 = subset::deal_subsets(key, 0, n, bits, 3);
    let s1 = subset::deal_subsets(key, 1, n, bits, 3);
    for i in 0..n {
        let r = ring.add(t0.r[i], t1.r[i]);
        assert_eq!(ring.add(t0.hi[i], t1.hi[i]), r >> 12);
        assert_eq!(ring.add(t0.msb[i], t1.msb[i]), r >> 63);
        let r = ring.add(q0.t.r[i], q1.t.r[i]);
        let (h, b) = (r >> 24, r >> 63);
        assert_eq!(ring.add(q0.t.hi[i], q1.t.hi[i]), h);
        assert_eq!(ring.add(q0.t.msb[i], q1.t.msb[i]), b);
        assert_eq!(ring.add(q0.sq[i], q1.sq[i]), h.wrapping_mul(h));
        assert_eq!(ring.add(q0.hm[i], q1.hm[i]), h.wrapping_mul(b));
        let r = ring.add(m0.t.r[i], m1.t.r[i]);
        let (h, b, sm) = (r >> 25, r >> 63, ring.add(m0.s[i], m1.s[i]));
        assert_eq!(ring.add(m0.t.hi[i], m1.t.hi[i]), h);
        assert_eq!(ring.add(m0.hs[i], m1.hs[i]), h.wrapping_mul(sm));
        assert_eq!(ring.add(m0.ms[i], m1.ms[i]), b.wrapping_mul(sm));
        let r = ring.add(p0.pows[0][i], p1.pows[0][i]);
        for j in 0..4 {
            assert_eq!(ring.add(p0.pows[j][i], p1.pows[j][i]), (0..=j).fold(1u64, |a, _| a.wrapping_mul(r)));
        }
        let m: Vec<u64> = (0..3).map(|j| ring.add(s0.sets[(1 << j) - 1][i], s1.sets[(1 << j) - 1][i])).collect();
        for s in 1usize..8 {
            let want = (0..3).filter(|j| s >> j & 1 == 1).fold(1u64, |a, j| a.wrapping_mul(m[j]));
            assert_eq!(ring.add(s0.sets[s - 1][i], s1.sets[s - 1][i]), want, "subset {s}");
        }
    }
    let d = MatDims { m: 3, k: 4, n: 5 };
    let (a0, a1) = (matrix::deal_matrix(key, 0, 2, d, bits), matrix::deal_matrix(key, 1, 2, d, bits));
    let add = |x: &[u64], y: &[u64]| x.iter().zip(y).map(|(p, q)| p.wrapping_add(*q)).collect::<Vec<_>>();
    let (a, b, c) = (add(&a0.a, &a1.a), add(&a0.b, &a1.b), add(&a0.c, &a1.c));
    for q in 0..2 {
        let mut want = vec![0u64; 15];
        matrix::matmul_ring(&a[q * 12..(q + 1) * 12], &b[q * 20..(q + 1) * 20], d, &mut want);
        assert_eq!(&c[q * 15..(q + 1) * 15], &want[..]);
    }
    // over-large matrix requests are refused before any work
    let big = matrix::MatrixTriples::request(0, 1000, 64, MatDims { m: 4096, k: 4096, n: 4096 });
    assert!(matrix::MATRIX_TRIPLES.label(0, 1000, &big.params).is_err());
}

/// Issue 13: Mul/MatMul/Pow never wrap silently. A bound whose worst case
/// does not fit the ring is refused before anything is sent; a proven
/// bound that is false is caught by the clear reference; a saturating
/// bound clips out-of-range operands (the product of the clipped values)
/// where the unchecked ring product would have wrapped.
#[test]
fn products_refuse_saturate_or_check_their_bounds_never_wrap() {
    let ring = fx().ring;
    let (mut dummy, _peer) = MemChannel::pair();
    let big = ArithShare::new(ring, enc(&[1.0e6, -1.0e6]));
    // 10^6 · 10^6 at scale 2^24 is 2^63.8: refused, naming the operator.
    for e in [
        elementwise::mul(&mut Ctx::clear(fx()), &mut dummy, &big, &big, Bound::Proven { x: 1e6, y: 1e6 }).unwrap_err(),
        elementwise::mul(&mut Ctx::clear(fx()), &mut dummy, &big, &big, Bound::Saturate { x: 1e6, y: 1e6 }).unwrap_err(),
        matmul::matmul(&mut Ctx::clear(fx()), &mut dummy, &big, &big, 1, MatDims { m: 1, k: 2, n: 1 }, Bound::Proven { x: 5e5, y: 5e5 }).unwrap_err(),
        elementwise::pow(&mut Ctx::clear(fx()), &mut dummy, &big, 3, Bound::Proven { x: 1e5, y: 0.0 }).unwrap_err(),
    ] {
        assert!(e.to_string().contains("could wrap"), "{e}");
    }
    // The secure context refuses the same bound before dealing or sending.
    let mut c = Ctx::new(0, Proto::Fss, Dealer::new(Box::new(Null)), fx()).unwrap();
    let before = dummy.cost();
    assert!(elementwise::mul(&mut c, &mut dummy, &big, &big, Bound::Proven { x: 1e6, y: 1e6 }).is_err());
    assert_eq!(dummy.cost().bytes_sent, before.bytes_sent);
    // A proven bound that is false: the reference names it.
    let e = elementwise::mul(&mut Ctx::clear(fx()), &mut dummy, &big, &big, Bound::Proven { x: 1000.0, y: 1000.0 }).unwrap_err();
    assert!(e.to_string().contains("exceeds its proven bound"), "{e}");
    // Saturation: operands clipped to ±1000 (one extra ReLU round).
    let x = [3.0, -2.5, 1.0e6, -1.0e6, 999.0, 1500.0];
    let o = run(Proto::Fss, true, &x, std::sync::Arc::new(|c, ch, x| elementwise::mul(c, ch, x, x, Bound::Saturate { x: 1000.0, y: 1000.0 })));
    for (i, v) in x.iter().enumerate() {
        let cv = v.clamp(-1000.0, 1000.0);
        assert!((o.secure[i] - cv * cv).abs() <= ULP, "saturating mul {v}: {} want {}", o.secure[i], cv * cv);
        assert!((o.clear[i] - cv * cv).abs() <= ULP, "reference {v}");
    }
    assert_eq!(o.cost.rounds, 3);
    // Without the clip the exact ring product of 10^6·10^6 wraps: what the
    // bound prevents (the unchecked result is far from 10^12).
    let mut cc = Ctx::clear(fx());
    let raw = cc.mul(&mut dummy, &big, &big).unwrap();
    let raw = cc.trunc(&mut dummy, &raw, 12).unwrap();
    assert!((fx().decode(raw.v[0]) - 1e12).abs() > 1e9, "the ring product did not wrap: {}", fx().decode(raw.v[0]));
    // MatMul saturating: entries beyond ±8 are clipped.
    let d = MatDims { m: 1, k: 3, n: 1 };
    let x = [100.0, 2.0, -3.0, 1.0, -50.0, 2.0];
    let o = run(Proto::Fss, true, &x, std::sync::Arc::new(move |c, ch, x| {
        let (a, b) = (ArithShare::new(x.ring, x.v[..3].to_vec()), ArithShare::new(x.ring, x.v[3..].to_vec()));
        matmul::matmul(c, ch, &a, &b, 1, d, Bound::Saturate { x: 8.0, y: 8.0 })
    }));
    let want = 8.0 * 1.0 + 2.0 * -8.0 + -3.0 * 2.0;
    assert!((o.secure[0] - want).abs() <= ULP && (o.clear[0] - want).abs() <= ULP, "{:?} want {want}", o.secure);
}

/// ReLU on a reduced compared width (`Ctx::relu_within`): exact against the
/// reference for random and edge inputs inside the bound (±bound, 0, ±1
/// ulp), in both families; TAMI pays fewer bytes and (for w ≤ 41) one
/// flight fewer than on the whole ring; the clear reference refuses an input
/// above the bound.
#[test]
fn relu_within_a_proven_bound_is_exact_and_cheaper() {
    let ring = fx().ring;
    for bound in [100.0f64, 38.0, 12_000.0, 1e6] {
        let bu = bound * 4096.0;
        let mut x = randoms(300, -bound, bound, 40);
        x.extend([0.0, ULP, -ULP, bound, -bound, bound - ULP, -bound + ULP]);
        let op: Op = std::sync::Arc::new(move |c, ch, x| c.relu_within(ch, x, bu));
        let full: Op = std::sync::Arc::new(|c, ch, x| c.relu(ch, x));
        for proto in [Proto::Tami, Proto::Fss] {
            let o = run(proto, true, &x, op.clone());
            let want: Vec<f64> = x.iter().map(|v| fx().decode(fx().encode(*v)).max(0.0)).collect();
            assert_eq!(o.secure, want, "{proto:?} bound {bound}");
            assert_eq!(o.clear, want);
            if proto == Proto::Tami {
                let f = run(proto, true, &x, full.clone());
                assert_eq!(f.secure, want);
                assert!(o.cost.bytes_sent + o.cost.bytes_recv < f.cost.bytes_sent + f.cost.bytes_recv, "bound {bound}: {:?} vs {:?}", o.cost, f.cost);
                // ℓ = 64: 63 compared bits, 13 chunks, two merge levels (re-share,
                // leaf, opening, level 1, e: 5 flights); w ≤ 41: one level, 4
                assert_eq!(f.cost.rounds, 5);
                assert_eq!(o.cost.rounds, 4, "bound {bound}");
            }
        }
        // an input above the bound: the reference says the proof is wrong
        let mut cc = Ctx::clear(fx());
        let (mut dummy, _peer) = MemChannel::pair();
        let over = ArithShare::new(ring, enc(&[bound * 1.5]));
        let e = cc.relu_within(&mut dummy, &over, bu).unwrap_err();
        assert!(e.to_string().contains("proven bound"), "{e}");
    }
    let c = Ctx::clear(fx());
    assert_eq!(c.width_for(127.0), 8);
    assert_eq!(c.width_for(128.0), 9);
    assert_eq!(c.width_for(f64::INFINITY), 0);
    assert_eq!(c.width_for(1e30), 0);
}

/// Outside the bound a reduced-width ReLU errs as documented: 0 or x (the
/// sign of x mod 2^w), never a larger value.
#[test]
fn relu_within_outside_its_bound_returns_zero_or_x() {
    let bu = 38.0 * 4096.0; // w = 19
    let x = randoms(200, -1e4, 1e4, 41);
    let o = run(Proto::Tami, true, &[], std::sync::Arc::new(|c, ch, x| c.relu(ch, x)));
    assert!(o.secure.is_empty());
    let xs = enc(&x);
    let (s0, s1) = share_arith(fx().ring, &xs, &mut Prg::new(Block(9)));
    let (a, b) = run_tee(
        move |ch, d| {
            let mut c = Ctx::new(0, Proto::Tami, std::mem::replace(d, Dealer::new(Box::new(Null))), fx()).unwrap();
            c.relu_within(ch, &s0, bu).unwrap().v.clone()
        },
        move |ch, d| {
            let mut c = Ctx::new(1, Proto::Tami, std::mem::replace(d, Dealer::new(Box::new(Null))), fx()).unwrap();
            c.relu_within(ch, &s1, bu).unwrap().v.clone()
        },
    );
    let ring = fx().ring;
    let got = dec(&a.iter().zip(&b).map(|(p, q)| ring.add(*p, *q)).collect::<Vec<_>>());
    let mut wrong = 0;
    for (g, v) in got.iter().zip(&x) {
        let v = fx().decode(fx().encode(*v));
        assert!(*g == 0.0 || *g == v, "relu_within({v}) = {g}");
        wrong += (*g != v.max(0.0)) as usize;
    }
    assert!(wrong > 0, "inputs 2^7 times the bound must hit wrong signs");
}

/// The bounded operators (`gelu_within`, `softmax_within`,
/// `layernorm_within`) keep their documented error bounds against f64 and
/// the reference on random and edge inputs at their bounds, cost fewer
/// bytes and rounds than the whole-ring versions (TAMI; pinned), and the
/// reference refuses inputs above the bound.
#[test]
fn bounded_operators_keep_their_error_bounds_with_fewer_rounds() {
    // GeLU: |x| ≤ 40 (BERT-base's FFN bound is 38.9)
    let mut x = randoms(400, -40.0, 40.0, 42);
    x.extend([0.0, ULP, -ULP, 1.6, -1.6, 4.0, -4.0, 40.0, -40.0]);
    let g: Op = std::sync::Arc::new(|c, ch, x| gelu::gelu_within(c, ch, x, 40.0));
    let o = run(Proto::Tami, true, &x, g);
    let want: Vec<f64> = x.iter().map(|v| gelu::gelu_f64(*v)).collect();
    let (e, i) = max_err(&o.secure, &want);
    assert!(e <= gelu::GELU_ERR_F12, "gelu_within error {e} at {}", x[i]);
    assert!(max_err(&o.secure, &o.clear).0 <= 4.0 * ULP);
    let full = run(Proto::Tami, true, &x, gelu_op());
    // two ReLU batches of one merge level fewer each, chained
    // (`Ctx::relu_chain`: the second's re-share rides on the first's e flight)
    assert_eq!((full.cost.rounds, o.cost.rounds), (12, 10), "gelu rounds");
    let (bo, bf) = (o.cost.bytes_sent + o.cost.bytes_recv, full.cost.bytes_sent + full.cost.bytes_recv);
    assert!(bo * 10 < bf * 9, "gelu bytes {bo} vs {bf}");

    // Softmax: |x| ≤ 50, rows of 16 with ties and a spread of 100
    let len = 16;
    let mut x = randoms(4 * len, -50.0, 50.0, 43);
    x.extend([7.0; 16]);
    x.extend((0..16).map(|i| if i % 3 == 0 { 50.0 } else { -50.0 }));
    let sm: Op = std::sync::Arc::new(move |c, ch, x| softmax::softmax_within(c, ch, x, len, 50.0));
    let o = run(Proto::Tami, true, &x, sm);
    let (e, i) = max_err(&o.secure, &softmax::softmax_f64(&x, len));
    assert!(e <= softmax::SOFTMAX_ERR_F12, "softmax_within error {e} at {i}");
    assert!(max_err(&o.secure, &o.clear).0 <= 4.0 * ULP);
    let full = run(Proto::Tami, true, &x, std::sync::Arc::new(move |c, ch, x| softmax::softmax(c, ch, x, len)));
    // one merge level fewer per ReLU batch, and the single-level batches
    // chain (`Ctx::relu_chain`): the tree's 4 levels and the clip are 5
    // ReLUs in 3·5 + 1 flights instead of 4·5 (the whole-ring ones have two
    // merge levels and do not chain)
    assert_eq!((full.cost.rounds, o.cost.rounds), (41, 35), "softmax rounds");
    assert!(o.cost.bytes() < full.cost.bytes());

    // LayerNorm: |x| ≤ 3000 (beyond the clip 2^10: saturates as before)
    let mut x = randoms(3 * len, -3.0, 3.0, 44);
    x.extend((0..16).map(|i| if i == 5 { 3000.0 } else { i as f64 }));
    let ln: Op = std::sync::Arc::new(move |c, ch, x| layernorm::layernorm_within(c, ch, x, len, 1e-5, None, None, 3000.0));
    let o = run(Proto::Tami, true, &x, ln);
    let want = layernorm::layernorm_f64(&x[..3 * len], len, 1e-5);
    assert!(max_err(&o.secure[..3 * len], &want).0 <= layernorm::LN_ERR_F12);
    let mut clipped: Vec<f64> = (0..16).map(|i| i as f64).collect();
    clipped[5] = 1024.0;
    assert!(max_err(&o.secure[3 * len..], &layernorm::layernorm_f64(&clipped, len, 1e-5)).0 <= layernorm::LN_ERR_F12);
    let full = run(Proto::Tami, true, &x, std::sync::Arc::new(move |c, ch, x| layernorm::layernorm(c, ch, x, len, 1e-5, None, None)));
    // the clip batch is one level shorter but the rsqrt's (whole-ring)
    // octave batch keeps the critical path: same rounds, fewer bytes
    assert_eq!((full.cost.rounds, o.cost.rounds), (20, 20), "layernorm rounds");
    assert!(o.cost.bytes() < full.cost.bytes(), "layernorm bytes {:?} vs {:?}", o.cost, full.cost);

    // LayerNorm proven within ±2^11: no clip (one comparison round fewer),
    // the unclipped result, inputs beyond the old clip 2^10 included
    let mut x = randoms(3 * len, -2000.0, 2000.0, 45);
    x.extend((0..16).map(|i| if i == 5 { -2048.0 } else { 1500.0 + i as f64 }));
    let ln: Op = std::sync::Arc::new(move |c, ch, x| layernorm::layernorm_within(c, ch, x, len, 1e-5, None, None, 2048.0));
    let o = run(Proto::Tami, true, &x, ln);
    let (e, i) = max_err(&o.secure, &layernorm::layernorm_f64(&x, len, 1e-5));
    assert!(e <= layernorm::LN_ERR_F12, "unclipped layernorm error {e} at {i}");
    assert!(max_err(&o.secure, &o.clear).0 <= 4.0 * ULP);
    assert_eq!(o.cost.rounds, 20 - 4, "no clip round");

    // the reference refuses inputs above a claimed bound
    let ring = fx().ring;
    let (mut dummy, _peer) = MemChannel::pair();
    let big = ArithShare::new(ring, enc(&[1.0, 45.0]));
    assert!(gelu::gelu_within(&mut Ctx::clear(fx()), &mut dummy, &big, 40.0).unwrap_err().to_string().contains("proven bound"));
    let row = ArithShare::new(ring, enc(&[1.0, 60.0]));
    assert!(softmax::softmax_within(&mut Ctx::clear(fx()), &mut dummy, &row, 2, 50.0).unwrap_err().to_string().contains("proven bound"));
    let row16 = ArithShare::new(ring, enc(&[5000.0; 16]));
    assert!(layernorm::layernorm_within(&mut Ctx::clear(fx()), &mut dummy, &row16, 16, 1e-5, None, None, 3000.0).unwrap_err().to_string().contains("proven bound"));
    assert!(gelu::gelu_within(&mut Ctx::clear(fx()), &mut dummy, &big, f64::NAN).is_err());
}

/// The fused truncate-and-square (`Ctx::trunc_square`): one opening, T²
/// for T the faithful truncation (⌊x/2^f⌋ or one more), on random values
/// across the truncation's range (both signs, both values of the opened
/// msb), at the edges, for f = 24 (exp's) and f = 12; pinned cost.
#[test]
fn trunc_square_is_one_opening_and_exact_up_to_the_truncation() {
    let ring = fx().ring;
    for f in [24u32, 12] {
        let mut p = Prg::new(Block(50 + f as u128));
        // |T| ≤ 2^30 so that T² < 2^62: values up to 2^{30+f}
        let lim = 1u64 << (30 + f - 1);
        let mut xs: Vec<u64> = (0..500).map(|_| ring.from_signed((p.next_u64() % (2 * lim)) as i64 - lim as i64)).collect();
        xs.extend([0, 1, ring.from_signed(-1), lim - 1, ring.from_signed(-(lim as i64) + 1), 1 << f, (1 << f) - 1]);
        let (s0, s1) = share_arith(ring, &xs, &mut Prg::new(Block(8)));
        let n = xs.len() as u64;
        let (a, b) = run_tee(
            move |ch, d| {
                let mut c = Ctx::new(0, Proto::Tami, std::mem::replace(d, Dealer::new(Box::new(Null))), fx()).unwrap();
                let before = ch.cost();
                let r = c.trunc_square(ch, &s0, f).unwrap();
                (r.v.clone(), ch.cost() - before)
            },
            move |ch, d| {
                let mut c = Ctx::new(1, Proto::Tami, std::mem::replace(d, Dealer::new(Box::new(Null))), fx()).unwrap();
                c.trunc_square(ch, &s1, f).unwrap().v.clone()
            },
        );
        assert_eq!(a.1.rounds, 1);
        assert_eq!(a.1.bytes_sent, 8 * n);
        let mut cc = Ctx::clear(fx());
        let (mut dummy, _peer) = MemChannel::pair();
        let clear = cc.trunc_square(&mut dummy, &ArithShare::new(ring, xs.clone()), f).unwrap();
        for (i, x) in xs.iter().enumerate() {
            let got = ring.add(a.0[i], b[i]);
            let t = FixedPoint::trunc_ref(ring, *x, f);
            let t1 = ring.add(t, 1);
            assert!(got == ring.mul(t, t) || got == ring.mul(t1, t1), "f = {f}, x = {}: got {got}", ring.to_signed(*x));
            assert_eq!(clear.v[i], ring.mul(t, t));
        }
    }
}

/// The fused truncate-and-multiply (`Ctx::trunc_mul`): one flight, (T, T·y)
/// for T the faithful truncation of x, on random x across the truncation's
/// range (both signs) and random y, with edges; pinned cost.
#[test]
fn trunc_mul_is_one_flight_and_exact_up_to_the_truncation() {
    let ring = fx().ring;
    let f = 24u32;
    let mut p = Prg::new(Block(77));
    let lim = 1u64 << 50;
    let mut xs: Vec<u64> = (0..400).map(|_| ring.from_signed((p.next_u64() % (2 * lim)) as i64 - lim as i64)).collect();
    let mut ys: Vec<u64> = (0..400).map(|_| ring.from_signed((p.next_u64() % (1 << 30)) as i64 - (1 << 29))).collect();
    xs.extend([0, 1, ring.from_signed(-1), lim - 1, 1 << f]);
    ys.extend([5, ring.from_signed(-7), 0, 1, 1 << 29]);
    let (s0, s1) = share_arith(ring, &xs, &mut Prg::new(Block(8)));
    let (y0, y1) = share_arith(ring, &ys, &mut Prg::new(Block(9)));
    let n = xs.len() as u64;
    let (a, b) = run_tee(
        move |ch, d| {
            let mut c = Ctx::new(0, Proto::Tami, std::mem::replace(d, Dealer::new(Box::new(Null))), fx()).unwrap();
            let before = ch.cost();
            let (t, ty) = c.trunc_mul(ch, &s0, f, &y0).unwrap();
            (t.v.clone(), ty.v.clone(), ch.cost() - before)
        },
        move |ch, d| {
            let mut c = Ctx::new(1, Proto::Tami, std::mem::replace(d, Dealer::new(Box::new(Null))), fx()).unwrap();
            let (t, ty) = c.trunc_mul(ch, &s1, f, &y1).unwrap();
            (t.v.clone(), ty.v.clone())
        },
    );
    assert_eq!(a.2.rounds, 1);
    assert_eq!(a.2.bytes_sent, 16 * n);
    for i in 0..xs.len() {
        let t = ring.add(a.0[i], b.0[i]);
        let want = FixedPoint::trunc_ref(ring, xs[i], f);
        assert!(t == want || t == ring.add(want, 1), "x = {}", ring.to_signed(xs[i]));
        assert_eq!(ring.add(a.1[i], b.1[i]), ring.mul(t, ys[i]));
    }
    let mut cc = Ctx::clear(fx());
    let (mut dummy, _peer) = MemChannel::pair();
    let short = ArithShare::new(ring, vec![1, 2]);
    assert!(cc.trunc_mul(&mut dummy, &short, f, &ArithShare::new(ring, vec![1])).is_err());
}

fn tanh_op() -> Op {
    std::sync::Arc::new(|c, ch, x| hush_2pc::transformer::tanh::tanh(c, ch, x))
}

#[test]
fn tanh_matches_reference_and_float_in_both_families() {
    let mut x = randoms(400, -5.0, 5.0, 11);
    // edges: zero, ±1 ulp (the sign bit), the exp clip at |2x| = 16, huge magnitudes
    x.extend([0.0, ULP, -ULP, 2.0 * ULP, -2.0 * ULP, 8.0, -8.0, 8.0 + ULP, 20.0, -20.0, 1e6, -1e6, 1e9, -1e9]);
    for proto in [Proto::Fss, Proto::Tami] {
        let o = run(proto, true, &x, tanh_op());
        let want: Vec<f64> = x.iter().map(|v| v.tanh()).collect();
        let (e, i) = max_err(&o.secure, &want);
        assert!(e <= hush_2pc::transformer::tanh::TANH_ERR_F12, "{proto:?}: tanh error {e} at x = {} (got {}, want {})", x[i], o.secure[i], want[i]);
        let (e, i) = max_err(&o.secure, &o.clear);
        assert!(e <= 4.0 * ULP, "{proto:?}: secure vs reference {e} at x = {}", x[i]);
        assert!(o.secure.iter().all(|v| v.abs() <= 1.0 + hush_2pc::transformer::tanh::TANH_ERR_F12));
    }
}

#[test]
fn tanh_rounds_and_bytes_are_pinned() {
    let x = randoms(64, -3.0, 3.0, 12);
    let o = run(Proto::Fss, true, &x, tanh_op());
    // pinned from a run (a change in any constituent operator shows here):
    // the sign ReLU batch, exp (clip ReLU, polynomial, six squarings), the
    // reciprocal's octave ReLUs and Newton steps, one truncated product
    // and the sign product
    assert_eq!((o.cost.rounds, o.cost.bytes_sent), (TANH_PIN.0, TANH_PIN.1), "tanh on 64 values");
    assert_eq!(o.cost.bytes_sent, o.cost.bytes_recv);
}
const TANH_PIN: (u32, u64) = (22, 20480);

/// Runs X·W with X shared (party 0 holds `x0`, party 1 `x1`) and W party
/// 0's own, over the in-memory channel with in-process modules; returns the
/// product's shares, both parties' costs and the messages each received.
#[allow(clippy::type_complexity)]
fn weight_run(x0: Vec<u64>, x1: Vec<u64>, w: Vec<u64>, count: usize, d: MatDims) -> ((Vec<u64>, Cost, Vec<Vec<u8>>), (Vec<u64>, Cost, Vec<Vec<u8>>)) {
    weight_run_as(x0, x1, w, count, d, false)
}

#[allow(clippy::type_complexity)]
fn weight_run_as(x0: Vec<u64>, x1: Vec<u64>, w: Vec<u64>, count: usize, d: MatDims, client_input: bool) -> ((Vec<u64>, Cost, Vec<Vec<u8>>), (Vec<u64>, Cost, Vec<Vec<u8>>)) {
    let (ca, cb) = MemChannel::pair();
    let (ra, rb) = (std::sync::Arc::new(std::sync::Mutex::new(Vec::new())), std::sync::Arc::new(std::sync::Mutex::new(Vec::new())));
    let rb2 = rb.clone();
    let t = std::thread::spawn(move || {
        let mut cb = Recording { inner: cb, log: rb2.clone() };
        let dl = Dealer::in_process(&mut cb, 1).unwrap();
        rb2.lock().unwrap().clear();
        let before = cb.cost();
        let mut c = Ctx::new(1, Proto::Fss, dl, fx()).unwrap();
        let x1 = ArithShare::new(fx().ring, x1);
        let y = if client_input { c.weight_matmul_client_input(&mut cb, &x1, &[], count, d) } else { c.weight_matmul(&mut cb, &x1, &[], count, d) }.unwrap();
        (y.v.clone(), cb.cost() - before)
    });
    let mut ca = Recording { inner: ca, log: ra.clone() };
    let dl = Dealer::in_process(&mut ca, 0).unwrap();
    ra.lock().unwrap().clear();
    let before = ca.cost();
    let mut c = Ctx::new(0, Proto::Fss, dl, fx()).unwrap();
    let x0 = ArithShare::new(fx().ring, x0);
    let y0 = if client_input { c.weight_matmul_client_input(&mut ca, &x0, &w, count, d) } else { c.weight_matmul(&mut ca, &x0, &w, count, d) }.unwrap();
    let c0 = ca.cost() - before;
    let (y1, c1) = t.join().unwrap();
    let (l0, l1) = (ra.lock().unwrap().clone(), rb.lock().unwrap().clone());
    ((y0.v.clone(), c0, l0), (y1, c1, l1))
}

#[test]
fn weight_products_match_the_plaintext_product_with_pinned_cost() {
    let ring = fx().ring;
    let mut p = Prg::new(Block(31));
    // the last two: V = W − B goes in blocks of rows (2 and 3 rows of
    // 65,536 and 40,000 words), the same bytes in the same flight
    for (count, d) in [(1, MatDims { m: 1, k: 1, n: 1 }), (2, MatDims { m: 3, k: 5, n: 4 }), (1, MatDims { m: 7, k: 33, n: 17 }), (3, MatDims { m: 5, k: 2, n: 1 }), (2, MatDims { m: 3, k: 7, n: 65536 }), (1, MatDims { m: 2, k: 7, n: 40000 })] {
        let (ma, mb, mc) = (d.m * d.k, d.k * d.n, d.m * d.n);
        // edge values: 0, ±1, the ring's extremes, then random words
        let mut x: Vec<u64> = (0..count * ma).map(|_| p.next_u64()).collect();
        let edges = [0u64, 1, u64::MAX, 1 << 63, (1 << 63) - 1];
        for (i, e) in edges.iter().enumerate().take(x.len()) {
            x[i] = *e;
        }
        let w: Vec<u64> = (0..count * mb).map(|i| if i < edges.len() { edges[i] } else { p.next_u64() }).collect();
        let (x0, x1) = share_arith(ring, &x, &mut p);
        let ((y0, c0, _), (y1, c1, _)) = weight_run(x0.v.clone(), x1.v.clone(), w.clone(), count, d);
        let mut want = vec![0u64; count * mc];
        for q in 0..count {
            hush_2pc::deal::matrix::matmul_ring(&x[q * ma..(q + 1) * ma], &w[q * mb..(q + 1) * mb], d, &mut want[q * mc..(q + 1) * mc]);
        }
        let got: Vec<u64> = y0.iter().zip(&y1).map(|(a, b)| ring.add(*a, *b)).collect();
        assert_eq!(got, want, "{count} × {d:?}");
        // one flight each way: the server sends V = W − B (k·n words per
        // product), the client U = X₁ − A (m·k words)
        assert_eq!((c0.rounds, c0.bytes_sent), (1, 8 * (count * mb) as u64), "server cost at {d:?}");
        assert_eq!((c1.rounds, c1.bytes_sent), (1, 8 * (count * ma) as u64), "client cost at {d:?}");
    }
    // mismatched lengths are errors, not panics
    let mut c = Ctx::new(0, Proto::Fss, Dealer::new(Box::new(Null)), fx()).unwrap();
    let (mut ch, _peer) = MemChannel::pair();
    let d = MatDims { m: 2, k: 3, n: 4 };
    assert!(c.weight_matmul(&mut ch, &ArithShare::new(ring, vec![0; 6]), &[0; 11], 1, d).is_err());
    assert!(c.weight_matmul(&mut ch, &ArithShare::new(ring, vec![0; 5]), &[0; 12], 1, d).is_err());
}

/// X·W with X the client's own input (`weight_matmul_client_input`: party
/// 0's share zero): one-hot rows (an embedding lookup), a dense X₁ and the
/// ring's edge values all give the plaintext product, with exactly the
/// standard product's messages (one flight each way, V = W − B and U =
/// X₁ − A); party 0 refuses a non-zero share of X.
#[test]
fn weight_products_of_the_clients_own_input_match_the_plaintext_product() {
    let ring = fx().ring;
    let mut p = Prg::new(Block(33));
    for (count, d, onehot) in [(1, MatDims { m: 6, k: 50, n: 9 }, true), (2, MatDims { m: 3, k: 5, n: 4 }, false), (1, MatDims { m: 1, k: 1, n: 1 }, false), (2, MatDims { m: 4, k: 7, n: 40000 }, true)] {
        let (ma, mb, mc) = (d.m * d.k, d.k * d.n, d.m * d.n);
        let x: Vec<u64> = if onehot {
            let mut x = vec![0u64; count * ma];
            for i in 0..count * d.m {
                x[i * d.k + (p.next_u64() as usize % d.k)] = 1;
            }
            x
        } else {
            let edges = [0u64, 1, u64::MAX, 1 << 63];
            (0..count * ma).map(|i| if i < edges.len() { edges[i] } else { p.next_u64() }).collect()
        };
        let w: Vec<u64> = (0..count * mb).map(|_| p.next_u64()).collect();
        let ((y0, c0, l0), (y1, c1, l1)) = weight_run_as(vec![0; count * ma], x.clone(), w.clone(), count, d, true);
        let mut want = vec![0u64; count * mc];
        for q in 0..count {
            hush_2pc::deal::matrix::matmul_ring(&x[q * ma..(q + 1) * ma], &w[q * mb..(q + 1) * mb], d, &mut want[q * mc..(q + 1) * mc]);
        }
        let got: Vec<u64> = y0.iter().zip(&y1).map(|(a, b)| ring.add(*a, *b)).collect();
        assert_eq!(got, want, "{count} × {d:?}, one-hot {onehot}");
        assert_eq!((c0.rounds, c0.bytes_sent), (1, 8 * (count * mb) as u64), "server cost at {d:?}");
        assert_eq!((c1.rounds, c1.bytes_sent), (1, 8 * (count * ma) as u64), "client cost at {d:?}");
        // the same message sizes as the standard product's
        let ((_, _, s0), (_, _, s1)) = weight_run(vec![0; count * ma], x.clone(), w.clone(), count, d);
        assert_eq!(l0.iter().map(Vec::len).collect::<Vec<_>>(), s0.iter().map(Vec::len).collect::<Vec<_>>());
        assert_eq!(l1.iter().map(Vec::len).collect::<Vec<_>>(), s1.iter().map(Vec::len).collect::<Vec<_>>());
    }
    let mut c = Ctx::new(0, Proto::Fss, Dealer::new(Box::new(Null)), fx()).unwrap();
    let (mut ch, _peer) = MemChannel::pair();
    let e = c.weight_matmul_client_input(&mut ch, &ArithShare::new(ring, vec![0, 1]), &[0; 2], 1, MatDims { m: 1, k: 2, n: 1 }).unwrap_err().to_string();
    assert!(e.contains("must be zero"), "{e}");
}

#[test]
fn weight_triples_views_do_not_depend_on_the_secret_factor() {
    // The client's view (V = W − B) against a secret bit per weight, and the
    // server's view (U = X₁ − A, with its own X₀) against a secret bit per
    // input element: each ±2^40, far apart. A curious party guesses the bit
    // from the top bit of what it can reconstruct: chance, within 5σ.
    let ring = fx().ring;
    let mut p = Prg::new(Block(32));
    let d = MatDims { m: 40, k: 100, n: 50 };
    let (ma, mb) = (d.m * d.k, d.k * d.n);
    let sign = |b: bool| ring.from_signed(if b { 1 << 40 } else { -(1 << 40) });
    let wb: Vec<bool> = (0..mb).map(|_| p.next_u64() & 1 == 1).collect();
    let xb: Vec<bool> = (0..ma).map(|_| p.next_u64() & 1 == 1).collect();
    let w: Vec<u64> = wb.iter().map(|b| sign(*b)).collect();
    let x: Vec<u64> = xb.iter().map(|b| sign(*b)).collect();
    let (x0, x1) = share_arith(ring, &x, &mut p);
    let x0v = x0.v.clone();
    let ((_, _, seen0), (_, _, seen1)) = weight_run(x0.v.clone(), x1.v.clone(), w, 1, d);
    let chance = |right: usize, n: usize, what: &str| {
        let dev = (right as f64 - n as f64 / 2.0).abs();
        assert!(dev <= 5.0 * (n as f64).sqrt() / 2.0, "{what}: the view predicts the secret {right}/{n} times");
    };
    let word = |m: &[u8], i: usize| u64::from_le_bytes(m[i * 8..i * 8 + 8].try_into().unwrap());
    let v = seen1.iter().find(|m| m.len() == mb * 8).expect("the client received V");
    chance((0..mb).filter(|&i| !ring.msb(word(v, i)) == wb[i]).count(), mb, "client sees W − B");
    let u = seen0.iter().find(|m| m.len() == ma * 8).expect("the server received U");
    chance((0..ma).filter(|&i| !ring.msb(ring.add(word(u, i), x0v[i])) == xb[i]).count(), ma, "server sees X − A");
    // and the attack works where there is no mask: the plain W's top bit gives it away
    assert_eq!((0..mb).filter(|&i| !ring.msb(sign(wb[i])) == wb[i]).count(), mb);
}
