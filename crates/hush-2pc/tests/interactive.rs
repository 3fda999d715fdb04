//! The interactive provider (`hush_2pc::interactive`, `Ctx::new_interactive`):
//! every correlation kind the transformer operators consume, made by the
//! two parties over IKNP COTs with no module and no dealer.
//! * each kind satisfies the same checks as the dealer's description
//!   (the same check functions run on dealt shares too);
//! * curious-party tests: a party's real view against the peer's secret;
//! * pinned bytes and rounds per provider call;
//! * every transformer operator in interactive mode against the clear
//!   fixed-point reference (random and edge inputs), lazy and prefilled;
//! * no module or dealer anywhere in the interactive context.

use hush_2pc::beaver::OtSession;
use hush_2pc::deal::matrix::{matmul_ring, MatDims, MatrixShare, WeightShare};
use hush_2pc::deal::powers::PowerShare;
use hush_2pc::deal::subset::SubsetShare;
use hush_2pc::deal::triples::TripleShare;
use hush_2pc::deal::trunc::{TruncMulShare, TruncShare, TruncSqShare};
use hush_2pc::interactive::{self, Dir};
use hush_2pc::share::{share_arith, ArithShare, FixedPoint};
use hush_2pc::transformer::{ctx::NEEDS_CHANNEL, elementwise, gelu, layernorm, matmul, recip, softmax, Bound, Ctx, Need};
use hush_correlations::registry::SourceConfig;
use hush_primitives::{Block, Prg, Ring};
use hush_transport::{Channel, Cost, MemChannel, Recording, ViewLog};

fn fx() -> FixedPoint {
    FixedPoint::new(64, 12).unwrap()
}

fn ot(ch: &mut dyn Channel, p: u8, seed: u64) -> OtSession {
    ot_from("iknp", ch, p, seed)
}

fn ot_from(source: &str, ch: &mut dyn Channel, p: u8, seed: u64) -> OtSession {
    OtSession::setup(ch, p, &SourceConfig::named(source), &mut Prg::new(Block((seed * 2 + p as u64) as u128))).unwrap()
}

/// Both parties over an in-memory pair, each with an IKNP session set up
/// first; `f(party, session, channel)`; returns each party's result, its
/// cost after the setup, and the messages it received after the setup.
fn run2<R: Send + 'static>(seed: u64, f: impl Fn(u8, OtSession, &mut dyn Channel) -> R + Send + Sync + 'static) -> [(R, Cost, Vec<Vec<u8>>); 2] {
    run2_on("iknp", seed, f)
}

fn run2_on<R: Send + 'static>(source: &'static str, seed: u64, f: impl Fn(u8, OtSession, &mut dyn Channel) -> R + Send + Sync + 'static) -> [(R, Cost, Vec<Vec<u8>>); 2] {
    let f = std::sync::Arc::new(f);
    let (ca, cb) = MemChannel::pair();
    let mut hs = Vec::new();
    for (p, c) in [(0u8, ca), (1u8, cb)] {
        let f = f.clone();
        hs.push(std::thread::spawn(move || {
            let log = ViewLog::default();
            let mut ch = Recording::with_log(c, log.clone());
            let s = ot_from(source, &mut ch, p, seed);
            log.lock().unwrap().clear();
            let before = ch.cost();
            let r = f(p, s, &mut ch);
            let cost = ch.cost() - before;
            let seen = log.lock().unwrap().clone();
            (r, cost, seen)
        }));
    }
    let b = hs.pop().unwrap().join().unwrap();
    let a = hs.pop().unwrap().join().unwrap();
    [a, b]
}

fn ring(bits: u32) -> Ring {
    Ring::new(bits).unwrap()
}

fn add(r: Ring, a: &[u64], b: &[u64]) -> Vec<u64> {
    a.iter().zip(b).map(|(x, y)| r.add(*x, *y)).collect()
}

/// IKNP's bytes for `m` ROTs (requested 2^12 at a time, each request
/// padded to 128 COTs of 16 bytes).
fn iknp_bytes(m: usize) -> u64 {
    let mut t = 0;
    let mut left = m;
    while left > 0 {
        let c = left.min(1 << 12);
        t += 16 * c.div_ceil(128) * 128;
        left -= c;
    }
    t as u64
}

// ---- the checks of each description (run on dealt and interactive shares)

fn check_triples(r: Ring, t: &[TripleShare; 2]) {
    let (a, b, c) = (add(r, &t[0].a, &t[1].a), add(r, &t[0].b, &t[1].b), add(r, &t[0].c, &t[1].c));
    for i in 0..a.len() {
        assert_eq!(c[i], r.mul(a[i], b[i]), "triple {i}");
    }
}

fn check_matrix(r: Ring, t: &[MatrixShare; 2], count: usize, d: MatDims) {
    let (a, b, c) = (add(r, &t[0].a, &t[1].a), add(r, &t[0].b, &t[1].b), add(r, &t[0].c, &t[1].c));
    let (ma, mb, mc) = (d.m * d.k, d.k * d.n, d.m * d.n);
    for q in 0..count {
        let mut want = vec![0u64; mc];
        matmul_ring(&a[q * ma..(q + 1) * ma], &b[q * mb..(q + 1) * mb], d, &mut want);
        want.iter_mut().for_each(|x| *x = r.reduce(*x));
        assert_eq!(&c[q * mc..(q + 1) * mc], &want[..], "matrix triple {q}");
    }
}

/// party 0 holds B (k×n), party 1 A (m×k); C₀ + C₁ = A·B.
fn check_weight(r: Ring, t: &[WeightShare; 2], count: usize, d: MatDims) {
    let c = add(r, &t[0].c, &t[1].c);
    let (ma, mb, mc) = (d.m * d.k, d.k * d.n, d.m * d.n);
    for q in 0..count {
        let mut want = vec![0u64; mc];
        matmul_ring(&t[1].ab[q * ma..(q + 1) * ma], &t[0].ab[q * mb..(q + 1) * mb], d, &mut want);
        want.iter_mut().for_each(|x| *x = r.reduce(*x));
        assert_eq!(&c[q * mc..(q + 1) * mc], &want[..], "weight triple {q}");
    }
}

fn check_trunc(r: Ring, t: &[&TruncShare; 2], f: u32) -> Vec<u64> {
    let l = r.bits();
    let v = add(r, &t[0].r, &t[1].r);
    let (hi, msb) = (add(r, &t[0].hi, &t[1].hi), add(r, &t[0].msb, &t[1].msb));
    for i in 0..v.len() {
        assert_eq!(hi[i], v[i] >> f, "r_hi of {}", v[i]);
        assert_eq!(msb[i], v[i] >> (l - 1), "r_msb of {}", v[i]);
    }
    v
}

fn check_trunc_sq(r: Ring, t: &[TruncSqShare; 2], f: u32) {
    let v = check_trunc(r, &[&t[0].t, &t[1].t], f);
    let (sq, hm) = (add(r, &t[0].sq, &t[1].sq), add(r, &t[0].hm, &t[1].hm));
    for i in 0..v.len() {
        let (h, m) = (v[i] >> f, v[i] >> (r.bits() - 1));
        assert_eq!((sq[i], hm[i]), (r.mul(h, h), r.mul(h, m)));
    }
}

fn check_trunc_mul(r: Ring, t: &[TruncMulShare; 2], f: u32) {
    let v = check_trunc(r, &[&t[0].t, &t[1].t], f);
    let s = add(r, &t[0].s, &t[1].s);
    let (hs, ms) = (add(r, &t[0].hs, &t[1].hs), add(r, &t[0].ms, &t[1].ms));
    for i in 0..v.len() {
        let (h, m) = (v[i] >> f, v[i] >> (r.bits() - 1));
        assert_eq!((hs[i], ms[i]), (r.mul(h, s[i]), r.mul(m, s[i])));
    }
}

fn check_powers(r: Ring, t: &[PowerShare; 2], k: u32) {
    let base = add(r, &t[0].pows[0], &t[1].pows[0]);
    for j in 1..k as usize {
        let got = add(r, &t[0].pows[j], &t[1].pows[j]);
        for i in 0..base.len() {
            let want = (0..=j).fold(1u64, |a, _| r.mul(a, base[i]));
            assert_eq!(got[i], want, "r^{} of element {i}", j + 1);
        }
    }
}

fn check_subsets(r: Ring, t: &[SubsetShare; 2], d: u32) {
    let masks: Vec<Vec<u64>> = (0..d as usize).map(|j| add(r, &t[0].sets[(1 << j) - 1], &t[1].sets[(1 << j) - 1])).collect();
    for s in 1usize..1 << d {
        let got = add(r, &t[0].sets[s - 1], &t[1].sets[s - 1]);
        for i in 0..got.len() {
            let want = (0..d as usize).filter(|j| s >> j & 1 == 1).fold(1u64, |a, j| r.mul(a, masks[j][i]));
            assert_eq!(got[i], want, "subset {s:b} of element {i}");
        }
    }
}

/// The top bits of a share look uniform (a share that is a fixed value, or
/// the secret itself, fails).
fn looks_uniform(v: &[u64], bits: u32, what: &str) {
    let ones = v.iter().filter(|x| (*x >> (bits - 1)) & 1 == 1).count();
    let n = v.len();
    assert!((ones as f64 - n as f64 / 2.0).abs() <= 5.0 * (n as f64).sqrt() / 2.0, "{what}: {ones}/{n} top bits set");
}

#[test]
fn every_interactive_kind_satisfies_the_dealers_checks() {
    for bits in [64u32, 37] {
        let r = ring(bits);
        let f = 12;
        let n = 300;
        let d = MatDims { m: 3, k: 4, n: 5 };
        let out = run2(1, move |p, mut s, ch| {
            let tr = interactive::triples(&mut s, ch, p, bits, n).unwrap();
            let mx = interactive::matrix(&mut s, ch, p, bits, 2, d).unwrap();
            let wt = interactive::weight(&mut s, ch, p, bits, 2, d).unwrap();
            let tp = interactive::trunc(&mut s, ch, p, bits, f, n).unwrap();
            let tq = interactive::trunc_square(&mut s, ch, p, bits, f, n).unwrap();
            let tm = interactive::trunc_mul(&mut s, ch, p, bits, f, n).unwrap();
            let pw: Vec<PowerShare> = (2..=8).map(|k| interactive::powers(&mut s, ch, p, bits, k, 50).unwrap()).collect();
            let ss: Vec<SubsetShare> = (2..=4).map(|dd| interactive::subsets(&mut s, ch, p, bits, dd, 50).unwrap()).collect();
            (tr, mx, wt, tp, tq, tm, pw, ss)
        });
        let [(a, _, _), (b, _, _)] = out;
        check_triples(r, &[a.0.clone(), b.0.clone()]);
        check_matrix(r, &[a.1.clone(), b.1.clone()], 2, d);
        check_weight(r, &[a.2.clone(), b.2.clone()], 2, d);
        let v = check_trunc(r, &[&a.3, &b.3], f);
        check_trunc_sq(r, &[a.4.clone(), b.4.clone()], f);
        check_trunc_mul(r, &[a.5.clone(), b.5.clone()], f);
        for (k, (x, y)) in (2..=8).zip(a.6.iter().zip(&b.6)) {
            check_powers(r, &[x.clone(), y.clone()], k);
        }
        for (dd, (x, y)) in (2..=4).zip(a.7.iter().zip(&b.7)) {
            check_subsets(r, &[x.clone(), y.clone()], dd);
        }
        // the values and each party's shares are uniform, as dealt
        looks_uniform(&v, bits, "r");
        for (sh, who) in [(&a.3, "party 0"), (&b.3, "party 1")] {
            looks_uniform(&sh.r, bits, who);
            looks_uniform(&sh.hi, bits, who);
            looks_uniform(&sh.msb, bits, who);
        }
        looks_uniform(&add(r, &a.0.c, &b.0.c), bits, "c");
        looks_uniform(&a.0.c, bits, "c₀");
        looks_uniform(&b.2.c, bits, "C₁");
    }
    // and the same check functions accept the dealer's shares
    let key = Block(99);
    let (r, f, n, d) = (ring(64), 12, 100, MatDims { m: 3, k: 4, n: 5 });
    use hush_2pc::deal::{matrix, powers, subset, triples, trunc};
    check_triples(r, &[triples::deal_arith(key, 0, n, 64), triples::deal_arith(key, 1, n, 64)]);
    check_matrix(r, &[matrix::deal_matrix(key, 0, 2, d, 64), matrix::deal_matrix(key, 1, 2, d, 64)], 2, d);
    let w: Vec<WeightShare> = (0..2).map(|p| WeightShare::from_bytes(&matrix::deal_weight(key, p, 2, d, 64), p, 2, d, 64).unwrap()).collect();
    check_weight(r, &[w[0].clone(), w[1].clone()], 2, d);
    check_trunc(r, &[&trunc::deal_trunc(key, 0, n, 64, f), &trunc::deal_trunc(key, 1, n, 64, f)], f);
    check_trunc_sq(r, &[trunc::deal_trunc_square(key, 0, n, 64, f), trunc::deal_trunc_square(key, 1, n, 64, f)], f);
    check_trunc_mul(r, &[trunc::deal_trunc_mul(key, 0, n, 64, f), trunc::deal_trunc_mul(key, 1, n, 64, f)], f);
    check_powers(r, &[powers::deal_powers(key, 0, n, 64, 5), powers::deal_powers(key, 1, n, 64, 5)], 5);
    check_subsets(r, &[subset::deal_subsets(key, 0, n, 64, 4), subset::deal_subsets(key, 1, n, 64, 4)], 4);
}

#[test]
fn truncation_pairs_at_every_shift_and_small_rings() {
    for (bits, f) in [(8u32, 1u32), (8, 6), (16, 5), (63, 30), (64, 1), (64, 62)] {
        let out = run2(2, move |p, mut s, ch| interactive::trunc(&mut s, ch, p, bits, f, 200).unwrap());
        let [(a, _, _), (b, _, _)] = out;
        check_trunc(ring(bits), &[&a, &b], f);
    }
    // refusals
    let out = run2(3, |p, mut s, ch| (interactive::trunc(&mut s, ch, p, 64, 0, 4).is_err(), interactive::trunc(&mut s, ch, p, 64, 63, 4).is_err(), interactive::powers(&mut s, ch, p, 64, 9, 4).is_err(), interactive::subsets(&mut s, ch, p, 64, 5, 4).is_err()));
    assert_eq!(out[0].0, (true, true, true, true));
}

/// Sums of the pinned per-call costs (both parties send the same amount
/// for the symmetric kinds).
#[test]
fn bytes_and_rounds_per_provider_call_are_pinned() {
    let (l, f, n) = (64u64, 12u64, 100usize);
    let nn = n as u64;
    let d = MatDims { m: 3, k: 4, n: 5 };
    type Call = fn(u8, &mut OtSession, &mut dyn Channel);
    let calls: Vec<(&str, Call)> = vec![
        ("triples", |p, mut s, ch| drop(interactive::triples(&mut s, ch, p, 64, 100).unwrap())),
        ("matrix", |p, mut s, ch| drop(interactive::matrix(&mut s, ch, p, 64, 2, MatDims { m: 3, k: 4, n: 5 }).unwrap())),
        ("weight", |p, mut s, ch| drop(interactive::weight(&mut s, ch, p, 64, 2, MatDims { m: 3, k: 4, n: 5 }).unwrap())),
        ("trunc", |p, mut s, ch| drop(interactive::trunc(&mut s, ch, p, 64, 12, 100).unwrap())),
        ("trunc_square", |p, mut s, ch| drop(interactive::trunc_square(&mut s, ch, p, 64, 12, 100).unwrap())),
        ("trunc_mul", |p, mut s, ch| drop(interactive::trunc_mul(&mut s, ch, p, 64, 12, 100).unwrap())),
        ("powers4", |p, mut s, ch| drop(interactive::powers(&mut s, ch, p, 64, 4, 100).unwrap())),
        ("subsets3", |p, mut s, ch| drop(interactive::subsets(&mut s, ch, p, 64, 3, 100).unwrap())),
        ("wrap", |p, mut s, ch| drop(interactive::wrap_ole(&mut s, ch, p, 12, 100).unwrap())),
    ];
    // Gilboa corrections: Σ_j (ℓ − j) = ℓ(ℓ+1)/2 bits per ℓ-bit multiplier
    // and vector element, plus ℓ IKNP ROTs per multiplier; a chosen
    // multiplier adds ℓ derandomisation bits.
    let tri = l * (l + 1) / 2;
    let gilboa = |groups: u64, m: u64| (groups * m * tri).div_ceil(8);
    let chosen = |groups: u64| gilboa(groups, 1) + (groups * l).div_ceil(8) + iknp_bytes((groups * l) as usize);
    // `products` of p pairs and q squares: party 0 → 1 carries p + q cross
    // terms, party 1 → 0 p (a square has one cross term)
    let prods = |p: u64, q: u64| [gilboa(p + q, 1) + (p * l).div_ceil(8) + iknp_bytes((p * l) as usize), gilboa(p, 1) + ((p + q) * l).div_ceil(8) + iknp_bytes(((p + q) * l) as usize)];
    // a bit times a share: one OT per element each way, vectors of two
    // ℓ-bit corrections and one derandomisation bit
    let bit_times = |g: u64| g * 2 * l / 8 + g.div_ceil(8) + iknp_bytes(g as usize);
    // truncation pairs: Σ_i w_i bits per pair, one direction (party 0 → 1)
    let wsum: u64 = (0..l).map(|i| if i == l - 1 { l - 1 } else if i >= f { l - i + f - 1 } else { l - i - 1 }).sum();
    let tp = [(nn * wsum).div_ceil(8), iknp_bytes(n * l as usize)];
    // rounds: the channel's message depth added by the call (IKNP's
    // matrix u and the corrections in flight together where the
    // directions overlap): the COTs of both directions and the
    // corrections (2); one direction (1); each later OLE call adds its
    // COTs, derandomisation bits and corrections (a square's single
    // direction overlaps with less).
    let expect: Vec<([u64; 2], u32)> = vec![
        ([gilboa(nn, 1) + iknp_bytes(n * 64); 2], 2),
        ([gilboa(2 * (d.k * d.n) as u64, d.m as u64) + iknp_bytes(2 * d.k * d.n * 64); 2], 2),
        ([gilboa(2 * (d.m * d.k) as u64, d.n as u64), iknp_bytes(2 * d.m * d.k * 64)], 1),
        (tp, 1),
        ([tp[0] + prods(0, nn)[0] + bit_times(nn), tp[1] + prods(0, nn)[1] + bit_times(nn)], 7),
        ([tp[0] + chosen(nn) + bit_times(nn), tp[1] + chosen(nn) + bit_times(nn)], 9),
        ([prods(0, nn)[0] + prods(nn, nn)[0], prods(0, nn)[1] + prods(nn, nn)[1]], 5),
        ([chosen(3 * nn) + chosen(nn); 2], 7),
        // the wrap-bit truncation's bit products: one ROT and f correction
        // bits per element, party 0 → 1
        ([(nn * f).div_ceil(8), iknp_bytes(n)], 1),
    ];
    for ((name, call), (bytes, rounds)) in calls.into_iter().zip(expect) {
        let out = run2(4, move |p, mut s, ch| call(p, &mut s, ch));
        let got = [out[0].1.bytes_sent, out[1].1.bytes_sent];

        assert_eq!(got, bytes, "{name}: bytes sent by party 0, party 1");
        assert_eq!(out[0].1.rounds.max(out[1].1.rounds), rounds, "{name}: rounds");
    }
}

#[test]
fn curious_parties_learn_nothing_from_the_provider_messages() {
    // (1) The OLE sender's view of a chosen multiplier: d = y ⊕ c. The
    // receiver's y has a secret top bit; the sender guesses it from the d
    // bit of that position: chance.
    let n = 4000usize;
    let mut p = Prg::new(Block(5));
    let ys: Vec<u64> = (0..n).map(|_| p.next_u64()).collect();
    let ys2 = ys.clone();
    let out = run2(6, move |party, mut s, ch| {
        let wf = |_| 64u32;
        let dir = Dir { groups: n, m: 1, ybits: 64, width: &wf, chosen: true, per_bit: false };
        let x = vec![3u64; n];
        if party == 0 {
            interactive::vole(&mut s, ch, party, Some((dir, &x)), None).unwrap().send.clone()
        } else {
            interactive::vole(&mut s, ch, party, None, Some((dir, Some(&ys2)))).unwrap().recv.clone()
        }
    });
    let r = ring(64);
    assert_eq!(add(r, &out[0].0, &out[1].0), ys.iter().map(|y| r.mul(3, *y)).collect::<Vec<_>>());
    // party 0's received messages after the IKNP traffic it gets: the d bits
    // are the last message it received
    let dbits = out[0].2.last().expect("party 0 received the d bits");
    assert_eq!(dbits.len(), n * 64 / 8);
    let right = (0..n).filter(|&i| ((dbits[(i * 64 + 63) / 8] >> 7) & 1) as u64 == ys[i] >> 63).count();
    let chance = |right: usize, n: usize, what: &str| {
        let dev = (right as f64 - n as f64 / 2.0).abs();
        assert!(dev <= 5.0 * (n as f64).sqrt() / 2.0, "{what}: the view predicts the secret {right}/{n} times");
    };
    chance(right, n, "OLE sender sees y ⊕ c");
    // the attack works on the unmasked multiplier itself
    assert_eq!((0..n).filter(|&i| (ys[i] >> 63) == ys[i] >> 63).count(), n);

    // (2) Truncation pairs: party 1 (the OLE receiver) against r's top bit
    // (the secret both must not know): from its own shares and the
    // corrections it received. Its guess: its own top bit v_{ℓ−1} xor the
    // lowest bit of the correction of bit ℓ−1 (what it would be if party
    // 0's pads were not there), and its r-share's top bit.
    let n = 4000usize;
    let out = run2(7, move |p, mut s, ch| interactive::trunc(&mut s, ch, p, 64, 12, n).unwrap());
    let (a, b) = (&out[0].0, &out[1].0);
    let r = ring(64);
    let v = add(r, &a.r, &b.r);
    let tau = out[1].2.last().expect("party 1 received the corrections");
    let wsum: usize = (0..64usize).map(|i| if i == 63 { 63 } else if i >= 12 { 64 - i + 11 } else { 63 - i }).sum();
    assert_eq!(tau.len(), (n * wsum).div_ceil(8));
    let top_pos = |e: usize| e * wsum + wsum - 63; // bit position of bit 63's correction
    let guess = |e: usize| ((tau[top_pos(e) / 8] >> (top_pos(e) % 8)) & 1) as u64 ^ (b.msb[e] & 1);
    chance((0..n).filter(|&e| guess(e) == v[e] >> 63).count(), n, "party 1's corrections against msb(r)");
    chance((0..n).filter(|&e| b.r[e] >> 63 == v[e] >> 63).count(), n, "party 1's r-share against msb(r)");
    chance((0..n).filter(|&e| a.r[e] >> 63 == v[e] >> 63).count(), n, "party 0's r-share against msb(r)");

    // (3) Weight triples: party 1 (the client) against party 0's B, from the
    // corrections it received (bit 0 of each vector: τ = pad₁ − pad₀ − B
    // mod 2^64, the first 64 bits per entry) and its C₁.
    let d = MatDims { m: 20, k: 10, n: 20 };
    let out = run2(8, move |p, mut s, ch| interactive::weight(&mut s, ch, p, 64, 1, d).unwrap());
    let bmat = &out[0].0.ab;
    let tau = out[1].2.last().expect("party 1 received the corrections");
    let per_group = d.n * (64 * 65 / 2); // bits per (i, t) group
    let mut right = 0;
    let mut total = 0;
    for i in 0..d.m {
        for t in 0..d.k {
            let g = i * d.k + t;
            for j in 0..d.n {
                let pos = g * per_group + j * 64 + 63; // top bit of bit 0's τ
                let bit = ((tau[pos / 8] >> (pos % 8)) & 1) as u64;
                right += usize::from(bit == 1 - (bmat[t * d.n + j] >> 63));
                total += 1;
            }
        }
    }
    chance(right, total, "client's corrections against the server's B");
    chance((0..d.m * d.n).filter(|&i| out[1].0.c[i] >> 63 == out[0].0.c[i] >> 63).count(), d.m * d.n, "client's C₁ against the server's C₀");
}

// ---- operators in interactive mode

type Op = std::sync::Arc<dyn Fn(&mut Ctx, &mut dyn Channel, &ArithShare) -> hush_2pc::Result<ArithShare> + Send + Sync>;

fn enc(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| fx().encode(*x)).collect()
}
fn dec(v: &[u64]) -> Vec<f64> {
    v.iter().map(|x| fx().decode(*x)).collect()
}

fn randoms(n: usize, lo: f64, hi: f64, seed: u64) -> Vec<f64> {
    let mut p = Prg::new(Block(seed as u128));
    (0..n).map(|_| lo + (hi - lo) * (p.next_u64() >> 11) as f64 / (1u64 << 53) as f64).collect()
}

fn max_err(a: &[f64], b: &[f64]) -> (f64, usize) {
    a.iter().zip(b).enumerate().map(|(i, (x, y))| ((x - y).abs(), i)).fold((0.0, 0), |m, e| if e.0 > m.0 { e } else { m })
}

const ULP: f64 = 1.0 / 4096.0;

/// Runs `op` in interactive mode (lazy, or planned and prefilled over the
/// channel first) and on the clear reference.
fn run_op(x: &[f64], op: Op, prefill: bool) -> (Vec<f64>, Vec<f64>, Cost) {
    let xs = enc(x);
    let (s0, s1) = share_arith(fx().ring, &xs, &mut Prg::new(Block(7)));
    let shares = [s0, s1];
    let op2 = op.clone();
    let out = run2(9, move |p, s, ch| {
        let mut c = Ctx::new_interactive(p, s, fx()).unwrap();
        assert!(c.dealer().is_none() && c.is_interactive());
        let x = &shares[p as usize];
        if prefill {
            let zeros = ArithShare::zeros(fx().ring, x.len());
            let plan = c.plan(|c, ch| op2(c, ch, &zeros)).unwrap();
            assert_eq!(c.prefill(&plan).unwrap_err().to_string().contains(NEEDS_CHANNEL), true);
            c.prefill_on(ch, &plan).unwrap();
        }
        let before = ch.cost();
        let y = op2(&mut c, ch, x).unwrap();
        assert_eq!(c.pending(), 0);
        assert!(c.dealer().is_none());
        (y.v.clone(), ch.cost() - before)
    });
    let r = fx().ring;
    let secure = dec(&add(r, &out[0].0 .0, &out[1].0 .0));
    let mut cc = Ctx::clear(fx());
    let (mut dummy, _peer) = MemChannel::pair();
    let clear = dec(&op(&mut cc, &mut dummy, &ArithShare::new(r, xs)).unwrap().v);
    (secure, clear, out[0].0 .1)
}

#[test]
fn gelu_runs_interactively_against_the_reference() {
    let mut x = randoms(150, -6.0, 6.0, 1);
    x.extend([0.0, ULP, -ULP, 1.6, -1.6, 4.0, -4.0, 4.0 + ULP, -4.0 - ULP, 100.0, -100.0, 1e6, -1e6, 1e9, -1e9]);
    for prefill in [false, true] {
        let (secure, clear, _) = run_op(&x, std::sync::Arc::new(|c, ch, x| gelu::gelu(c, ch, x)), prefill);
        let want: Vec<f64> = x.iter().map(|v| gelu::gelu_f64(*v)).collect();
        let (e, i) = max_err(&secure, &want);
        assert!(e <= gelu::GELU_ERR_F12, "gelu error {e} at {}", x[i]);
        let (e, i) = max_err(&secure, &clear);
        assert!(e <= 4.0 * ULP, "gelu vs reference {e} at {}", x[i]);
    }
}

#[test]
fn softmax_and_exp_run_interactively_against_the_reference() {
    let len = 8;
    let mut x = randoms(3 * len, -4.0, 4.0, 3);
    x.extend([1.5; 8]);
    x.extend([0.0, -1e6, 0.5, -3.0, -1000.0, 2.0, 2.0, -20.0]);
    let (secure, clear, _) = run_op(&x, std::sync::Arc::new(move |c, ch, x| softmax::softmax(c, ch, x, len)), true);
    let (e, i) = max_err(&secure, &softmax::softmax_f64(&x, len));
    assert!(e <= softmax::SOFTMAX_ERR_F12, "softmax error {e} at {i}");
    let (e, _) = max_err(&secure, &clear);
    assert!(e <= 4.0 * ULP, "softmax vs reference {e}");
    let mut x = randoms(40, -18.0, 0.0, 4);
    x.extend([0.0, -ULP, -16.0, -1e3, -1e9, 0.5, 1e6]);
    let (secure, _, _) = run_op(&x, std::sync::Arc::new(|c, ch, x| softmax::exp_nonpos(c, ch, x)), false);
    for (i, v) in x.iter().enumerate() {
        let want = v.clamp(-softmax::EXP_CLIP, 0.0).exp();
        assert!((secure[i] - want).abs() <= ULP + 1e-4 * want, "exp({v}) = {} want {want}", secure[i]);
    }
}

#[test]
fn layernorm_runs_interactively_against_the_reference() {
    let len = 16;
    let mut x = randoms(3 * len, -3.0, 3.0, 5);
    let normal = x.len();
    x.extend([0.75; 16]);
    let (secure, clear, _) = run_op(&x, std::sync::Arc::new(move |c, ch, x| layernorm::layernorm(c, ch, x, len, 1e-5, None, None)), true);
    let (e, i) = max_err(&secure[..normal], &layernorm::layernorm_f64(&x[..normal], len, 1e-5));
    assert!(e <= layernorm::LN_ERR_F12, "layernorm error {e} at {i}");
    let (e, _) = max_err(&secure, &clear);
    assert!(e <= 0.02, "layernorm vs reference {e}");
    for v in &secure[normal..] {
        assert!(v.abs() <= 0.02, "zero-variance row gave {v}");
    }
    // rows at the clip and beyond it (the square's shifted operand at its
    // extremes): against the clear reference, and one-sided rows
    let mut e: Vec<f64> = (0..len).map(|i| if i % 2 == 0 { 1024.0 } else { -1024.0 }).collect();
    e.extend((0..len).map(|i| if i < len / 2 { 5000.0 } else { -5000.0 }));
    e.extend((0..len).map(|i| if i == 0 { -1024.0 } else { 1024.0 }));
    let (secure, clear, _) = run_op(&e, std::sync::Arc::new(move |c, ch, x| layernorm::layernorm(c, ch, x, len, 1e-5, None, None)), false);
    let (err, i) = max_err(&secure, &clear);
    assert!(err <= 0.02, "layernorm at the clip vs reference {err} at {i}");
}

#[test]
fn reciprocal_and_rsqrt_run_interactively() {
    let mut v = randoms(40, 0.6, 200.0, 8);
    v.extend([0.5, 1.0, 255.9, 256.0, 1e5, 0.1, 0.0, -3.0]);
    let (secure, clear, _) = run_op(&v, std::sync::Arc::new(|c, ch, x| {
        let r = recip::reciprocal(c, ch, &x.scale(1 << 12), 24, -1, 8)?;
        c.trunc(ch, &r, 12)
    }), false);
    for (i, x) in v.iter().enumerate() {
        let x = fx().decode(fx().encode(*x));
        let want = 1.0 / x.clamp(0.5, 256.0);
        assert!((secure[i] - want).abs() <= 2.0 * ULP + 1e-5 * want, "1/{x} = {} want {want}", secure[i]);
    }
    assert!(max_err(&secure, &clear).0 <= 4.0 * ULP);
    let (secure, _, _) = run_op(&v, std::sync::Arc::new(|c, ch, x| {
        let r = recip::rsqrt(c, ch, &x.scale(1 << 12), 24, -12, 22)?;
        c.trunc(ch, &r, 12)
    }), true);
    for (i, x) in v.iter().enumerate() {
        let x = fx().decode(fx().encode(*x));
        let want = 1.0 / x.clamp(1.0 / 4096.0, 4194304.0).sqrt();
        assert!((secure[i] - want).abs() <= 2.0 * ULP + 3.5e-5 * want, "1/√{x} = {} want {want}", secure[i]);
    }
}

#[test]
fn matmul_mul_pow_and_weight_products_run_interactively() {
    let d = MatDims { m: 3, k: 5, n: 4 };
    let count = 2;
    let a = randoms(count * d.m * d.k, -4.0, 4.0, 9);
    let b = randoms(count * d.k * d.n, -4.0, 4.0, 10);
    let na = a.len();
    let mut x = a.clone();
    x.extend(&b);
    let (secure, clear, _) = run_op(&x, std::sync::Arc::new(move |c, ch, x| {
        let (aa, bb) = (ArithShare::new(x.ring, x.v[..na].to_vec()), ArithShare::new(x.ring, x.v[na..].to_vec()));
        matmul::matmul(c, ch, &aa, &bb, count, d, Bound::Proven { x: 4.0, y: 4.0 })
    }), true);
    let (ae, be) = (dec(&enc(&a)), dec(&enc(&b)));
    let mut want = vec![0.0; count * d.m * d.n];
    for q in 0..count {
        for i in 0..d.m {
            for j in 0..d.n {
                want[q * d.m * d.n + i * d.n + j] = (0..d.k).map(|t| ae[q * d.m * d.k + i * d.k + t] * be[q * d.k * d.n + t * d.n + j]).sum();
            }
        }
    }
    assert!(max_err(&secure, &want).0 <= ULP, "matmul");
    assert!(max_err(&secure, &clear).0 <= ULP, "matmul vs reference");
    let x = randoms(64, -30.0, 30.0, 11);
    let (secure, _, _) = run_op(&x, std::sync::Arc::new(|c, ch, x| elementwise::mul(c, ch, x, &x.scale(3), Bound::Proven { x: 30.0, y: 90.0 })), false);
    for (i, v) in x.iter().enumerate() {
        let xe = fx().decode(fx().encode(*v));
        assert!((secure[i] - 3.0 * xe * xe).abs() <= ULP, "mul {v}");
    }
    let x = randoms(64, -3.0, 3.0, 12);
    let (secure, _, _) = run_op(&x, std::sync::Arc::new(|c, ch, x| elementwise::pow(c, ch, x, 4, Bound::Proven { x: 3.0, y: 3.0 })), true);
    for (i, v) in x.iter().enumerate() {
        let xe = fx().decode(fx().encode(*v));
        assert!((secure[i] - xe.powi(4)).abs() <= ULP, "pow4 {v}");
    }
    // products of three distinct factors (subset products), exact in the ring
    let x = randoms(30, -3.0, 3.0, 13);
    let (secure, clear, _) = run_op(&x, std::sync::Arc::new(|c, ch, x| {
        let (y, z) = (x.scale(2), x.add(x));
        c.product(ch, &[x, &y, &z])
    }), false);
    assert_eq!(secure, clear, "product of three factors");
    // X·W with W party 0's own (one-sided weight triples)
    let d = MatDims { m: 4, k: 6, n: 3 };
    let w: Vec<u64> = enc(&randoms(d.k * d.n, -2.0, 2.0, 14));
    let xv = randoms(d.m * d.k, -2.0, 2.0, 15);
    let w2 = w.clone();
    let (secure, clear, _) = run_op(&xv, std::sync::Arc::new(move |c, ch, x| {
        let wm = if c.party == 0 || c.is_clear() { w2.clone() } else { Vec::new() };
        c.weight_matmul(ch, x, &wm, 1, d)
    }), true);
    assert_eq!(secure, clear, "weight product is exact in the ring");
}

#[test]
fn full_range_truncation_runs_on_cf2() {
    // values with no bound: trunc_full uses CrypTFlow2's truncation on the
    // context's COT session (faithful: within one ulp of the reference)
    let mut x = randoms(60, -1e6, 1e6, 17);
    x.extend([0.0, ULP, -ULP, 1e9, -1e9]);
    let (secure, clear, _) = run_op(&x, std::sync::Arc::new(|c, ch, x| c.trunc_full(ch, &x.scale(1 << 12), 12)), false);
    let (e, i) = max_err(&secure, &clear);
    assert!(e <= ULP, "trunc_full vs reference {e} at {}", x[i]);
}

#[test]
fn relu_is_cf2_with_the_proven_width() {
    let mut x = randoms(100, -50.0, 50.0, 16);
    x.extend([0.0, ULP, -ULP, 60.0, -60.0]);
    let (secure, clear, c_full) = run_op(&x, std::sync::Arc::new(|c, ch, x| c.relu(ch, x)), false);
    assert_eq!(secure, clear);
    let (secure, clear, c_w) = run_op(&x, std::sync::Arc::new(|c, ch, x| c.relu_within(ch, x, 64.0 * 4096.0)), false);
    assert_eq!(secure, clear);
    assert!(c_w.bytes_sent < c_full.bytes_sent, "a narrower comparison sends less ({} vs {})", c_w.bytes_sent, c_full.bytes_sent);
}

#[test]
fn interactive_context_has_no_module_or_dealer_and_refuses_channel_less_dealing() {
    // No dealer handle exists in an interactive context: every need is
    // served by the peer over the channel, and the channel-less dealing
    // calls are refused rather than falling back to a module.
    let out = run2(10, |p, s, ch| {
        let mut c = Ctx::new_interactive(p, s, fx()).unwrap();
        let plan = vec![Need::Trunc { n: 4, f: 12 }];
        let refused = (c.prefill(&plan).is_err(), c.deal_plan(&plan).is_err());
        let ok = c.deal_plan_on(ch, &plan).map(|p| p.len()).unwrap();
        (c.dealer().is_none(), c.is_interactive(), refused, ok, c.proto())
    });
    for (r, _, _) in &out {
        assert_eq!((r.0, r.1, r.2, r.3), (true, true, (true, true), 1));
        assert_eq!(r.4, hush_2pc::nonlinear::Proto::Cf2);
    }
    // and the dealt constructor still refuses cf2 without a provider
    let (mut a, mut b) = MemChannel::pair();
    let t = std::thread::spawn(move || hush_2pc::tee::Dealer::in_process(&mut b, 1).unwrap());
    let d = hush_2pc::tee::Dealer::in_process(&mut a, 0).unwrap();
    drop(t.join());
    assert!(Ctx::new(0, hush_2pc::nonlinear::Proto::Cf2, d, fx()).is_err());
}

#[test]
fn malformed_provider_messages_are_errors_not_panics() {
    // The peer sends corrections of the wrong length, or with padding bits
    // set: the receiver gets an error naming the step, never a panic.
    for (groups, width, case) in [(3usize, 64u32, "long"), (3, 64, "short"), (1, 3, "padding")] {
        let (mut a, mut b) = MemChannel::pair();
        let t = std::thread::spawn(move || {
            let mut s = ot(&mut b, 1, 11);
            let wf = move |_| width;
            let ybits = width.min(64);
            let dir = Dir { groups, m: 1, ybits, width: &wf, chosen: false, per_bit: false };
            interactive::vole(&mut s, &mut b, 1, None, Some((dir, None))).map(|_| ())
        });
        let mut s = ot(&mut a, 0, 11);
        let w = width as usize;
        let nots = groups * w;
        let (mut m0, mut m1) = (vec![Block::ZERO; nots], vec![Block::ZERO; nots]);
        hush_correlations::ot::rot_send(&mut *s.send, &mut a, &mut m0, &mut m1).unwrap();
        let len = (groups * (w * (w + 1) / 2)).div_ceil(8);
        let bad = match case {
            "long" => vec![0u8; len + 1],
            "short" => vec![0u8; len - 1],
            _ => vec![0xffu8; len],
        };
        hush_transport::ChannelExt::send_chunked(&mut a, &bad).unwrap();
        let e = t.join().unwrap().expect_err(case);
        assert!(!e.to_string().is_empty(), "{case}");
    }
}

/// The interactive provider's traffic per kind for one GeLU on 128×768
/// (the plan of the operator, each item produced separately), on Ferret
/// COTs (`HUSH_COT=iknp` for IKNP). A measurement, not a check: `cargo
/// test --release -p hush-2pc --test interactive -- --ignored --nocapture
/// gelu_128x768`.
#[test]
#[ignore]
fn gelu_128x768_provider_costs() {
    let n = 128 * 768;
    let source = if std::env::var("HUSH_COT").as_deref() == Ok("iknp") { "iknp" } else { "ferret" };
    let out = run2_on(source, 12, move |p, s, ch| {
        let mut c = Ctx::new_interactive(p, s, fx()).unwrap();
        let zeros = ArithShare::zeros(fx().ring, n);
        let plan = c.plan(|c, ch| gelu::gelu(c, ch, &zeros)).unwrap();
        let mut rows = Vec::new();
        for need in &plan {
            let before = ch.cost();
            let t = std::time::Instant::now();
            let pre = c.deal_plan_on(ch, std::slice::from_ref(need)).unwrap();
            drop(pre);
            let cost = ch.cost() - before;
            rows.push((format!("{need:?}"), cost.bytes_sent, cost.bytes_recv, cost.rounds, t.elapsed().as_secs_f64()));
        }
        rows
    });
    eprintln!("GeLU 128×768, interactive provider ({source} COTs), per plan item: party 0 sent / received bytes, rounds, seconds");
    for r in &out[0].0 {
        eprintln!("{:<40} {:>12} {:>12} {:>4} {:>7.2}", r.0, r.1, r.2, r.3, r.4);
    }
    let tot: (u64, u64) = out[0].0.iter().fold((0, 0), |a, r| (a.0 + r.1, a.1 + r.2));
    eprintln!("total: party 0 sent {} received {} bytes", tot.0, tot.1);
}

// ---- the wrap-bit truncation of the interactive context (Cheetah's
// known-MSB truncation on interactive bit products)

/// Runs the wrap-bit truncation of `xs` (ring values) by `f` bits in a
/// `bits`-bit ring: returns each party's output shares, its correlation's
/// own bits, the peer bits it received and its own MSB bits.
#[allow(clippy::type_complexity)]
fn wrap_run(bits: u32, f: u32, xs: Vec<u64>, seed: u64) -> [(Vec<u64>, Vec<u64>, Vec<u64>, Vec<u64>); 2] {
    let r = ring(bits);
    let (s0, s1) = share_arith(r, &xs, &mut Prg::new(Block(seed as u128 + 100)));
    let shares = [s0, s1];
    let out = run2(seed, move |p, mut s, ch| {
        let x = &shares[p as usize].v;
        let w = interactive::wrap_ole(&mut s, ch, p, f, x.len()).unwrap();
        let mine = interactive::wrap_trunc_bits(r, p, x, &w).unwrap();
        ch.send(&mine).unwrap();
        let peer = ch.recv().unwrap();
        let peer = interactive::unpack_bits("test", &peer, x.len()).unwrap();
        let t = interactive::wrap_trunc_finish(r, p, x, f, &w, &peer);
        let bias = if p == 0 { 1u64 << (bits - 2) } else { 0 };
        let msb: Vec<u64> = x.iter().map(|v| r.add(*v, bias) >> (bits - 1)).collect();
        (t, w.own.clone(), peer, msb)
    });
    let [(a, _, _), (b, _, _)] = out;
    [a, b]
}

#[test]
fn wrap_truncation_is_faithful_at_every_shift_and_edge() {
    for (bits, f, seed) in [(64u32, 12u32, 11u64), (64, 40, 12), (64, 1, 13), (64, 62, 14), (16, 5, 15), (8, 3, 16), (37, 20, 17)] {
        let r = ring(bits);
        let half = 1i128 << (bits - 2);
        // the range's ends, zero, ±1, ±2^f and its neighbours, then random
        let mut vals: Vec<i128> = vec![-half, -half + 1, half - 1, half - 2, 0, 1, -1, 1 << f, (1 << f) - 1, -(1 << f), -(1 << f) - 1];
        let mut p = Prg::new(Block(seed as u128));
        vals.extend((0..3000).map(|_| (p.next_u64() as i128).rem_euclid(2 * half) - half));
        let xs: Vec<u64> = vals.iter().map(|v| (v.rem_euclid(1i128 << bits)) as u64).collect();
        let [(a, ..), (b, ..)] = wrap_run(bits, f, xs, seed);
        let mut errs = [0usize; 2];
        for (i, v) in vals.iter().enumerate() {
            let fl = v.div_euclid(1i128 << f);
            let got = r.add(a[i], b[i]);
            let want = |e: i128| ((fl + e).rem_euclid(1i128 << bits)) as u64;
            let e = [0, 1].into_iter().find(|e| got == want(*e));
            assert!(e.is_some(), "ring {bits}, f {f}: x = {v} gave {got}, want ⌊x/2^f⌋ or +1");
            errs[e.unwrap() as usize] += 1;
        }
        // both outcomes occur (the one-bit error is the shares' carry)
        if f > 1 {
            assert!(errs[0] > 100 && errs[1] > 100, "ring {bits}, f {f}: error counts {errs:?}");
        }
    }
    // refusals: shift out of range, correlation of the wrong length
    let out = run2(18, |p, mut s, ch| interactive::wrap_ole(&mut s, ch, p, 0, 4).is_err() && interactive::wrap_ole(&mut s, ch, p, 63, 4).is_err());
    assert!(out[0].0 && out[1].0);
    assert!(interactive::unpack_bits("test", &[0x10], 4).is_err());
    assert!(interactive::unpack_bits("test", &[0, 0], 4).is_err());
}

#[test]
fn wrap_truncation_bits_reveal_nothing() {
    // x with a secret sign: each party's received bits against the peer's
    // MSB bit (the wrap's input) and against the sign of x
    let n = 4000usize;
    let mut p = Prg::new(Block(21));
    let vals: Vec<i64> = (0..n).map(|_| (p.next_u64() >> 30) as i64 - (1i64 << 33)).collect();
    let xs: Vec<u64> = vals.iter().map(|v| *v as u64).collect();
    let [(_, own0, recv0, msb0), (_, own1, recv1, msb1)] = wrap_run(64, 12, xs, 22);
    let chance = |right: usize, what: &str| {
        let dev = (right as f64 - n as f64 / 2.0).abs();
        assert!(dev <= 5.0 * (n as f64).sqrt() / 2.0, "{what}: the view predicts the secret {right}/{n} times");
    };
    chance((0..n).filter(|&i| recv1[i] == msb0[i]).count(), "party 1's bits against party 0's MSB");
    chance((0..n).filter(|&i| recv0[i] == msb1[i]).count(), "party 0's bits against party 1's MSB");
    chance((0..n).filter(|&i| recv1[i] ^ msb1[i] == u64::from(vals[i] < 0)).count(), "party 1's bits and MSB against the sign");
    chance((0..n).filter(|&i| recv0[i] ^ msb0[i] == u64::from(vals[i] < 0)).count(), "party 0's bits and MSB against the sign");
    // the attack works once the mask is known: the bits are the MSBs masked
    // by the correlation's own bits
    assert!((0..n).all(|i| recv1[i] ^ own0[i] == msb0[i] && recv0[i] ^ own1[i] == msb1[i]));
}

/// `relu_and_bit` then `select`: ReLU of x, and b·z for b = [y ≥ 0], against
/// the clear values; its bytes are pinned to those of one plain cf2 ReLU
/// over x ‖ y (the same comparison batch and the same multiplexer OTs, used
/// for x now and for z later), its rounds to that ReLU's plus the second
/// multiplexer's two flights.
#[test]
fn relu_and_bit_then_select_is_one_cf2_batch() {
    let (n, q) = (64usize, 128usize);
    let mut xv = randoms(n, -50.0, 50.0, 31);
    xv[0] = 0.0;
    xv[1] = -ULP;
    let mut yv = randoms(q, -50.0, 50.0, 32);
    yv[0] = 0.0; // [0 ≥ 0] = 1
    yv[1] = -ULP;
    yv[2] = ULP;
    let zv = randoms(q, -1e6, 1e6, 33);
    let r = fx().ring;
    let mk = |v: &[f64], seed: u64| {
        let (a, b) = share_arith(r, &enc(v), &mut Prg::new(Block(seed as u128)));
        [a, b]
    };
    let (xs, ys, zs) = (mk(&xv, 1), mk(&yv, 2), mk(&zv, 3));
    let xy = mk(&xv.iter().chain(&yv).copied().collect::<Vec<_>>(), 4);
    let out = run2(34, move |p, s, ch| {
        let pi = p as usize;
        let mut c = Ctx::new_interactive(p, s, fx()).unwrap();
        let before = ch.cost();
        let (rx, sel) = c.relu_and_bit(ch, &xs[pi], &ys[pi], 64.0 * 4096.0).unwrap();
        let bz = c.select(ch, sel, &zs[pi]).unwrap();
        let mine = ch.cost() - before;
        let before = ch.cost();
        let plain = c.relu_within(ch, &xy[pi], 64.0 * 4096.0).unwrap();
        let reference = ch.cost() - before;
        (rx.v.clone(), bz.v.clone(), plain.v.clone(), mine, reference)
    });
    let (a, b) = (&out[0].0, &out[1].0);
    let rx = dec(&add(r, &a.0, &b.0));
    let bz = dec(&add(r, &a.1, &b.1));
    for i in 0..n {
        assert_eq!(rx[i], dec(&enc(&[xv[i]]))[0].max(0.0), "relu at {i}");
    }
    for i in 0..q {
        let want = if fx().encode(yv[i]) as i64 >= 0 { dec(&enc(&[zv[i]]))[0] } else { 0.0 };
        assert_eq!(bz[i], want, "select at {i} (y = {})", yv[i]);
    }
    for p in 0..2 {
        let (mine, reference) = (out[p].0 .3, out[p].0 .4);
        assert_eq!(mine.bytes_sent, reference.bytes_sent, "party {p}: bytes of relu_and_bit + select vs one ReLU");
        assert_eq!(mine.rounds, reference.rounds + 2, "party {p}: rounds");
    }
    // refusals: a dealt or clear context has no cf2 bit; lengths checked
    let mut cc = Ctx::clear(fx());
    let (mut dummy, _peer) = MemChannel::pair();
    let z = ArithShare::zeros(r, 4);
    assert!(cc.relu_and_bit(&mut dummy, &z, &z, 1.0).is_err());
}

// ---- products with a small (known-MSB) operand

#[test]
fn small_products_and_squares_match_the_ring_at_edges() {
    for (bits, k, seed) in [(64u32, 16u32, 41u64), (64, 26, 42), (64, 2, 43), (64, 63, 44), (64, 31, 45), (16, 8, 46), (37, 20, 47)] {
        let r = ring(bits);
        let top = 1u64 << (k - 1);
        let mut p = Prg::new(Block(seed as u128));
        let mut xs: Vec<u64> = vec![0, 1, top - 1, top - 2, top / 2];
        xs.extend((0..1000).map(|_| p.next_u64() % top));
        let ys: Vec<u64> = (0..xs.len()).map(|_| p.next_u64() & r.mask()).collect();
        let (x0, x1) = share_arith(r, &xs, &mut Prg::new(Block(seed as u128 + 1)));
        let (y0, y1) = share_arith(r, &ys, &mut Prg::new(Block(seed as u128 + 2)));
        let sx = [x0, x1];
        let sy = [y0, y1];
        let out = run2(seed, move |pp, mut s, ch| {
            let i = pp as usize;
            let m = interactive::mul_small(&mut s, ch, pp, r, k, &sx[i].v, &sy[i].v).unwrap();
            let q = interactive::square_small(&mut s, ch, pp, r, k, &sx[i].v).unwrap();
            (m, q)
        });
        let prod = add(r, &out[0].0 .0, &out[1].0 .0);
        let sq = add(r, &out[0].0 .1, &out[1].0 .1);
        for i in 0..xs.len() {
            assert_eq!(prod[i], r.mul(xs[i], ys[i]), "ring {bits}, k {k}: x·y at x = {}", xs[i]);
            assert_eq!(sq[i], r.mul(xs[i], xs[i]), "ring {bits}, k {k}: x² at x = {}", xs[i]);
        }
    }
    // refusals: widths outside 2..ℓ, lengths
    let out = run2(48, |p, mut s, ch| {
        let r = ring(64);
        (interactive::mul_small(&mut s, ch, p, r, 1, &[1], &[1]).is_err(), interactive::square_small(&mut s, ch, p, r, 64, &[1]).is_err(), interactive::mul_small(&mut s, ch, p, r, 8, &[1, 2], &[1]).is_err())
    });
    assert_eq!(out[0].0, (true, true, true));
}

/// The small square's bytes and rounds, and a curious party 0 against
/// party 1's top bit t₁ (the multiplier bit k−1 whose derandomisation bit
/// party 0 receives): chance.
#[test]
fn small_square_is_pinned_and_its_bits_reveal_nothing() {
    let (n, k) = (4000usize, 26u32);
    let r = ring(64);
    let mut p = Prg::new(Block(51));
    let xs: Vec<u64> = (0..n).map(|_| p.next_u64() % (1 << (k - 1))).collect();
    let (x0, x1) = share_arith(r, &xs, &mut Prg::new(Block(52)));
    let sx = [x0.clone(), x1.clone()];
    let out = run2(53, move |pp, mut s, ch| interactive::square_small(&mut s, ch, pp, r, k, &sx[pp as usize].v).unwrap());
    // bytes: party 0 → 1 sends the k-bit direction's corrections (Σ_{j<k}(64 − j)
    // bits per element) and the 1-bit direction's derandomisation bit;
    // party 1 → 0 the k derandomisation bits and one 64-bit correction per
    // element; plus each side's IKNP traffic as receiver
    let nn = n as u64;
    let kk = k as u64;
    let corr: u64 = (0..kk).map(|j| 64 - j).sum();
    let b0 = (nn * corr).div_ceil(8) + nn.div_ceil(8) + iknp_bytes(n);
    let b1 = nn * 8 + (nn * kk).div_ceil(8) + iknp_bytes(n * k as usize);
    assert_eq!([out[0].1.bytes_sent, out[1].1.bytes_sent], [b0, b1]);
    assert_eq!(out[0].1.rounds.max(out[1].1.rounds), 3, "rounds");
    // party 0's received derandomisation bits: the last-but-one message
    // (before the corrections), k bits per element; bit k−1 is t₁ ⊕ c
    let d = &out[0].2[out[0].2.len() - 2];
    assert_eq!(d.len(), (n * k as usize).div_ceil(8));
    let t1: Vec<u64> = x1.v.iter().map(|v| (v >> (k - 1)) & 1).collect();
    let pos = |i: usize| i * k as usize + k as usize - 1;
    let right = (0..n).filter(|&i| ((d[pos(i) / 8] >> (pos(i) % 8)) & 1) as u64 == t1[i]).count();
    let dev = (right as f64 - n as f64 / 2.0).abs();
    assert!(dev <= 5.0 * (n as f64).sqrt() / 2.0, "party 0 predicts t₁ {right}/{n} times");
    let sq = add(r, &out[0].0, &out[1].0);
    assert!((0..n).all(|i| sq[i] == r.mul(xs[i], xs[i])));
}

/// The OT table lookup ([`interactive::lut`]) in both directions at once:
/// shares of each sender row's entry at the receiver's index, for 7-bit
/// tables of 26-bit entries and 3-bit tables of 64-bit entries; bytes and
/// rounds pinned; a curious sender's received index corrections against
/// the receiver's indices: chance.
#[test]
fn table_lookup_is_exact_pinned_and_its_corrections_reveal_nothing() {
    for (kb, w, n0, n1, seed) in [(7u32, 26u32, 500usize, 300usize, 61u64), (3, 64, 200, 0, 62), (1, 5, 0, 100, 63)] {
        let nn = 1usize << kb;
        // row entry of sender P's element i at receiver index x
        let entry = move |p: u8, i: usize, x: usize| -> u64 {
            let h = (p as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ ((i as u64) << 20) ^ x as u64;
            h.wrapping_mul(0xbf58_476d_1ce4_e5b9).rotate_left(17) & wmask(w)
        };
        let mut pr = Prg::new(Block(seed as u128));
        // idx[p]: party p's indices as receiver (of the peer's elements)
        let idx: [Vec<u64>; 2] = [(0..n1).map(|_| pr.next_u64() % nn as u64).collect(), (0..n0).map(|_| pr.next_u64() % nn as u64).collect()];
        let ix = idx.clone();
        let out = run2(seed, move |p, mut s, ch| {
            let ns = if p == 0 { n0 } else { n1 };
            let mut fill = |i: usize, row: &mut [u64]| row.iter_mut().enumerate().for_each(|(x, o)| *o = entry(p, i, x));
            interactive::lut(&mut s, ch, p, kb, w, Some((ns, &mut fill)), Some(&ix[p as usize])).unwrap()
        });
        let m = wmask(w);
        for (sp, n) in [(0usize, n0), (1, n1)] {
            let rp = 1 - sp;
            for i in 0..n {
                let got = out[sp].0 .0[i].wrapping_add(out[rp].0 .1[i]) & m;
                assert_eq!(got, entry(sp as u8, i, idx[rp][i] as usize), "k {kb}, sender {sp}, element {i}");
            }
        }
        if n0 >= 200 {
            looks_uniform(&out[1].0 .1, w.min(20), "receiver's table shares");
        }
        // bytes: δ (k bits per received element), the masked rows (2^k·w
        // bits per sent element), IKNP's traffic as receiver (k COTs per
        // received element, one request)
        let cots = |n: usize| if n == 0 { 0 } else { 16 * (n * kb as usize).div_ceil(128) as u64 * 128 };
        let bytes = |ns: usize, nr: usize| (nr * kb as usize).div_ceil(8) as u64 + (ns * nn * w as usize).div_ceil(8) as u64 + cots(nr);
        assert_eq!([out[0].1.bytes_sent, out[1].1.bytes_sent], [bytes(n0, n1), bytes(n1, n0)], "k {kb}");
        assert!(out[0].1.rounds.max(out[1].1.rounds) <= 4, "rounds {:?}", (out[0].1.rounds, out[1].1.rounds));
    }
    // a curious sender (party 0) reads the δ bits against party 1's indices
    let n = 4000usize;
    let mut pr = Prg::new(Block(64));
    let xs: Vec<u64> = (0..n).map(|_| pr.next_u64() % 128).collect();
    let x1 = xs.clone();
    let out = run2(65, move |p, mut s, ch| {
        let mut fill = |_: usize, row: &mut [u64]| row.iter_mut().enumerate().for_each(|(x, o)| *o = x as u64);
        if p == 0 {
            interactive::lut(&mut s, ch, p, 7, 26, Some((n, &mut fill)), None).unwrap()
        } else {
            interactive::lut(&mut s, ch, p, 7, 26, None, Some(&x1)).unwrap()
        }
    });
    let d = out[0].2.last().unwrap();
    assert_eq!(d.len(), (n * 7).div_ceil(8));
    let right = (0..n).filter(|&i| ((d[(7 * i) / 8] >> ((7 * i) % 8)) & 1) as u64 == xs[i] & 1).count();
    let dev = (right as f64 - n as f64 / 2.0).abs();
    assert!(dev <= 5.0 * (n as f64).sqrt() / 2.0, "party 0 predicts the index bit {right}/{n} times");
    let got: Vec<u64> = (0..n).map(|i| out[0].0 .0[i].wrapping_add(out[1].0 .1[i]) & ((1 << 26) - 1)).collect();
    assert_eq!(got, xs);
    // refusals: index bits, an index above the table
    let out = run2(66, |p, mut s, ch| (interactive::lut(&mut s, ch, p, 9, 8, None, Some(&[1])).is_err(), interactive::lut(&mut s, ch, p, 2, 8, None, Some(&[4])).is_err()));
    assert_eq!(out[0].0, (true, true));
}

/// [`interactive::mul_small_rows`]: one small operand per row times its
/// row, exact in the ring, at rows of 1, 3 and 128 (the pad expansion's
/// three cases) and the range's ends.
#[test]
fn small_row_products_match_the_ring() {
    for (m, k, seed) in [(1usize, 27u32, 71u64), (3, 32, 72), (128, 27, 73)] {
        let r = ring(64);
        let top = 1u64 << (k - 1);
        let mut p = Prg::new(Block(seed as u128));
        let mut xs: Vec<u64> = vec![0, 1, top - 1];
        xs.extend((0..20).map(|_| p.next_u64() % top));
        let ys: Vec<u64> = (0..xs.len() * m).map(|_| p.next_u64()).collect();
        let (x0, x1) = share_arith(r, &xs, &mut Prg::new(Block(seed as u128 + 1)));
        let (y0, y1) = share_arith(r, &ys, &mut Prg::new(Block(seed as u128 + 2)));
        let (sx, sy) = ([x0, x1], [y0, y1]);
        let out = run2(seed, move |pp, mut s, ch| interactive::mul_small_rows(&mut s, ch, pp, r, k, &sx[pp as usize].v, &sy[pp as usize].v, m).unwrap());
        let prod = add(r, &out[0].0, &out[1].0);
        for i in 0..ys.len() {
            assert_eq!(prod[i], r.mul(xs[i / m], ys[i]), "rows of {m}: element {i}");
        }
    }
}

/// exp by the table ([`softmax::exp_lut`]) at scale 2^24 against f64 exp
/// over [−16, 0]: the ends, both sides of each split point of the shares'
/// low bits (multiples of 2^{f+1}), and random values; within the
/// documented 7.6·10⁻⁷.
#[test]
fn exp_by_table_is_within_its_bound_at_every_split() {
    let mut xs: Vec<i64> = vec![0, -1, -65536, -65535, -8191, -8192, -8193, -16383, -16384, -16385, -57343, -57344, -57345];
    let mut p = Prg::new(Block(81));
    xs.extend((0..400).map(|_| -((p.next_u64() % 65537) as i64)));
    let r = fx().ring;
    let enc: Vec<u64> = xs.iter().map(|v| r.from_signed(*v)).collect();
    let (s0, s1) = share_arith(r, &enc, &mut Prg::new(Block(82)));
    let sh = [s0, s1];
    let out = run2(83, move |pp, s, ch| {
        let mut c = Ctx::new_interactive(pp, s, fx()).unwrap();
        softmax::exp_lut(&mut c, ch, &sh[pp as usize]).unwrap().v.clone()
    });
    let y = add(r, &out[0].0, &out[1].0);
    for (i, v) in xs.iter().enumerate() {
        let want = (*v as f64 / 4096.0).exp();
        let got = r.to_signed(y[i]) as f64 / (1u64 << 24) as f64;
        assert!((got - want).abs() <= 7.6e-7, "exp({}) = {got}, want {want}", *v as f64 / 4096.0);
    }
}

/// Softmax with the bound 8 the encoder graphs prove (interactive mode
/// skips the clip: x − max ∈ [−16, 0] already), at the bound's ends.
#[test]
fn bounded_softmax_skips_the_clip_within_the_bound() {
    let len = 16;
    let mut x = randoms(3 * len, -8.0, 8.0, 91);
    x.extend([8.0, -8.0, 8.0, -8.0, 0.0, 0.0, 7.9, -7.9, 8.0, 8.0, 8.0, 8.0, -8.0, -8.0, -8.0, -8.0]);
    let (secure, clear, _) = run_op(&x, std::sync::Arc::new(move |c, ch, x| softmax::softmax_within(c, ch, x, len, 8.0)), true);
    let (e, i) = max_err(&secure, &softmax::softmax_f64(&x, len));
    assert!(e <= softmax::SOFTMAX_ERR_F12, "softmax error {e} at {i}");
    let (e, _) = max_err(&secure, &clear);
    assert!(e <= 4.0 * ULP, "softmax vs reference {e}");
}

fn wmask(w: u32) -> u64 {
    if w >= 64 {
        u64::MAX
    } else {
        (1u64 << w) - 1
    }
}

/// `bit_times_private`: party 1's bits times party 0's values mod 2^w, at
/// several widths (random values and the edges 0 and 2^w − 1), with
/// uniform output shares; pinned bytes (one IKNP ROT, one bit up and w
/// bits down per element) and rounds; malformed calls are errors.
#[test]
fn bit_times_private_value_is_exact_and_one_directional() {
    for w in [1u32, 17, 64] {
        let n = 300usize;
        let m = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
        let mut g = Prg::new(Block(w as u128 + 7));
        let mut vals: Vec<u64> = (0..n).map(|_| g.next_u64() & m).collect();
        vals[0] = 0;
        vals[1] = m;
        let bits: Vec<u64> = (0..n).map(|i| if i < 2 { 1 } else { g.next_u64() & 1 }).collect();
        let (b2, v2) = (bits.clone(), vals.clone());
        let r = run2(w as u64, move |p, mut s, ch| {
            let (b, v) = if p == 0 { (None, Some(&v2[..])) } else { (Some(&b2[..]), None) };
            interactive::bit_times_private(&mut s, ch, p, &vec![w; v.or(b).unwrap().len()], b, v).unwrap()
        });
        let rw = if w == 64 { ring(64) } else { ring(w) };
        for i in 0..n {
            assert_eq!(rw.add(r[0].0[i], r[1].0[i]), (bits[i] * vals[i]) & m, "width {w}, element {i}");
        }
        if w >= 17 {
            looks_uniform(&r[1].0, w, "receiver's share");
        }
        // curious parties: the sender's received derandomisation bits say
        // nothing of the receiver's bits, the receiver's received corrections
        // nothing of the sender's values (agreement with the secret near 1/2)
        let d = r[0].2.iter().rev().find(|m| m.len() == n.div_ceil(8)).expect("the derandomisation bits");
        let agree = (0..n).filter(|&i| ((d[i / 8] >> (i % 8)) & 1) as u64 == bits[i]).count();
        assert!((agree as f64 - n as f64 / 2.0).abs() <= 2.5 * (n as f64).sqrt(), "width {w}: d bits agree with the receiver's bits {agree}/{n}");
        let tau = r[1].2.iter().rev().find(|m| m.len() == (n * w as usize).div_ceil(8)).expect("the corrections");
        let agree = (0..n).filter(|&i| ((tau[i * w as usize / 8] >> (i * w as usize % 8)) & 1) as u64 == vals[i] & 1).count();
        assert!((agree as f64 - n as f64 / 2.0).abs() <= 2.5 * (n as f64).sqrt(), "width {w}: corrections agree with the sender's values {agree}/{n}");
        // party 1 sends its derandomisation bits only; party 0 the corrections
        let (c0, c1) = (&r[0].1, &r[1].1);
        assert_eq!(c1.bytes_sent, iknp_bytes(n) + n.div_ceil(8) as u64, "width {w}: the receiver's IKNP columns and derandomisation bits");
        assert_eq!(c0.bytes_sent, (n * w as usize).div_ceil(8) as u64, "width {w}: the sender's corrections");
        assert_eq!(c0.rounds + c1.rounds, BTP_ROUNDS, "width {w}: rounds");
    }
    let r = run2(9, |p, mut s, ch| {
        (
            interactive::bit_times_private(&mut s, ch, p, &[0], None, Some(&[1])).is_err(),
            interactive::bit_times_private(&mut s, ch, p, &[8], Some(&[2]), None).is_err(),
            interactive::bit_times_private(&mut s, ch, p, &[8], Some(&[1]), Some(&[1])).is_err(),
            interactive::bit_times_private(&mut s, ch, p, &[8], None, None).is_err(),
            interactive::bit_times_private(&mut s, ch, p, &[8, 8], Some(&[1]), None).is_err(),
        )
    });
    assert_eq!(r[0].0, (true, true, true, true, true));
}

/// Both parties' rounds of one call (IKNP's flight, the bits, the corrections).
const BTP_ROUNDS: u32 = 2;

/// Both parties' bytes and the rounds of each interactive transformer
/// operator on a small input (IKNP COTs, made on demand), pinned from a
/// run, with the results checked against the clear reference: GeLU,
/// LayerNorm (clipped and proven-bounded), Softmax (clipped and
/// proven-bounded), the reciprocal, the reciprocal square root and exp.
#[test]
fn interactive_operator_bytes_and_rounds_are_pinned() {
    let len = 16;
    let cases: Vec<(&str, Vec<f64>, Op)> = vec![
        ("gelu", randoms(64, -6.0, 6.0, 21), std::sync::Arc::new(|c, ch, x| gelu::gelu_within(c, ch, x, 8.0))),
        ("layernorm", randoms(64, -3.0, 3.0, 22), std::sync::Arc::new(move |c, ch, x| layernorm::layernorm(c, ch, x, len, 1e-5, None, None))),
        ("layernorm within 4", randoms(64, -3.0, 3.0, 23), std::sync::Arc::new(move |c, ch, x| layernorm::layernorm_within(c, ch, x, len, 1e-5, None, None, 4.0))),
        ("softmax", randoms(64, -4.0, 4.0, 24), std::sync::Arc::new(move |c, ch, x| softmax::softmax(c, ch, x, len))),
        ("softmax within 8", randoms(64, -4.0, 4.0, 25), std::sync::Arc::new(move |c, ch, x| softmax::softmax_within(c, ch, x, len, 8.0))),
        ("reciprocal", randoms(64, 0.6, 200.0, 26), std::sync::Arc::new(|c, ch, x| {
            let r = recip::reciprocal(c, ch, &x.scale(1 << 12), 24, -1, 8)?;
            c.trunc(ch, &r, 12)
        })),
        ("rsqrt", randoms(64, 0.6, 200.0, 27), std::sync::Arc::new(|c, ch, x| {
            let r = recip::rsqrt(c, ch, &x.scale(1 << 12), 24, -12, 22)?;
            c.trunc(ch, &r, 12)
        })),
        ("exp", randoms(64, -15.0, 0.0, 28), std::sync::Arc::new(|c, ch, x| softmax::exp_nonpos(c, ch, x))),
    ];
    let mut got = Vec::new();
    for (name, x, op) in cases {
        let xs = enc(&x);
        let (s0, s1) = share_arith(fx().ring, &xs, &mut Prg::new(Block(31)));
        let shares = [s0, s1];
        let op2 = op.clone();
        let out = run2(17, move |p, s, ch| {
            let mut c = Ctx::new_interactive(p, s, fx()).unwrap();
            op2(&mut c, ch, &shares[p as usize]).unwrap().v.clone()
        });
        let secure = dec(&add(fx().ring, &out[0].0, &out[1].0));
        let mut cc = Ctx::clear(fx());
        let (mut dummy, _peer) = MemChannel::pair();
        let clear = dec(&op(&mut cc, &mut dummy, &ArithShare::new(fx().ring, xs)).unwrap().v);
        let (e, i) = max_err(&secure, &clear);
        assert!(e <= 0.02, "{name}: {e} from the reference at {i}");
        got.push((name, out[0].1.bytes_sent, out[1].1.bytes_sent, out[0].1.rounds.max(out[1].1.rounds)));
    }
    assert_eq!(got, OPERATOR_PIN.to_vec());
}

/// (operator, party 0's bytes, party 1's bytes, rounds) of 64 elements (rows of 16; IKNP
/// COTs at 16 bytes each dominate the small cases).
const OPERATOR_PIN: [(&str, u64, u64, u32); 8] = [
    ("gelu", 50264, 130184, 44),
    ("layernorm", 463749, 1677537, 76),
    ("layernorm within 4", 422244, 1513065, 64),
    ("softmax", 175262, 364661, 122),
    ("softmax within 8", 99236, 185812, 102),
    ("reciprocal", 1218040, 3555816, 46),
    ("rsqrt", 6191048, 22966344, 46),
    ("exp", 61856, 189960, 26),
];
