//! What each party's *host* sees in a TAMI batch, and whether it can use it.
//!
//! These tests play a curious party with its real view: every byte its
//! trusted module releases to it (recorded at the module boundary) and
//! every byte it receives from the peer (recorded at the channel), running
//! the real dealer and the real online protocol over an in-memory channel.
//! Each test then runs the best attack that view allows and asserts the
//! attack does **no better than chance**, with a statistical bound that
//! can fail (a few standard deviations of a binomial around the chance
//! rate).
//!
//! **On the commit that adds this file the party-1 tests FAIL on purpose**
//! (they document the leak before the fix).
//!
//! History: `curious_party1_*` were written against the old leaf (party 1
//! received the whole table T_j[u] = leaf(u ⊕ τ_j, x'_j) ⊕ r for every
//! chunk). On that code the attack recovered τ — and therefore party 0's
//! input y = ŷ ⊕ τ — for 100% of the chunks, and the tests failed.

mod common;
use hush_2pc::tami::{self, Flavor, TamiShape};
use hush_2pc::tee::Dealer;
use hush_primitives::{Block, Prg};
use hush_2pc::deal::tami::{threshold, TamiShare};
use hush_tee::{InProcessModule, Module, ModuleStats, Request, Response, TrustedModule};
use hush_transport::{Channel, Cost, MemChannel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Log = Arc<Mutex<Vec<Vec<u8>>>>;

/// A module handle that records every dealt share the module releases to its host.
struct RecModule {
    inner: InProcessModule,
    log: Log,
}

impl TrustedModule for RecModule {
    fn call(&mut self, req: &Request) -> hush_tee::Result<Response> {
        let r = self.inner.call(req)?;
        if let Response::Dealt(b) = &r {
            self.log.lock().unwrap().push(b.clone());
        }
        Ok(r)
    }
    fn stats(&self) -> ModuleStats {
        self.inner.stats()
    }
    fn describe(&self) -> String {
        "recording ".to_string() + &self.inner.describe()
    }
}

/// A channel that records every message this party receives.
struct RecChannel {
    inner: MemChannel,
    log: Log,
}

impl Channel for RecChannel {
    fn send(&mut self, payload: &[u8]) -> hush_transport::Result<()> {
        self.inner.send(payload)
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
    fn set_timeout(&mut self, timeout: Duration) {
        self.inner.set_timeout(timeout)
    }
}

/// One party's recorded view of one batch.
struct View {
    /// The bytes its module released for the batch.
    dealt: Vec<u8>,
    /// Every byte received over the channel during the online phase, in order.
    received: Vec<u8>,
    /// Its protocol output (bit shares or ring shares).
    out: Vec<u64>,
}

/// Runs one real batch with recording on both sides. Party 0's input is
/// chosen by `y_of(dealt input of party 1)` — the test harness sees both
/// sides so it can score the attacks; the attacker only gets its `View`.
/// Optionally on a batch of the swapped-role kind
/// (`2pc/tami-swapped`: host 1 plays A, host 0 plays B). The views are
/// returned by role (A's, B's), so every attack below runs on either.
fn run_recorded_roles(shape: TamiShape, n: usize, seed: u64, swapped: bool) -> (View, View, Vec<u64>, Vec<u64>) {
    let (ca, cb) = MemChannel::pair();
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u64>>();
    let host_a: u8 = if swapped { 1 } else { 0 };
    let party = move |p: u8, ch: MemChannel, tx: Option<std::sync::mpsc::Sender<Vec<u64>>>| {
        let mlog: Log = Default::default();
        let clog: Log = Default::default();
        let mut ch = RecChannel { inner: ch, log: clog.clone() };
        let module = RecModule { inner: InProcessModule::new(Module::new().with_kinds(hush_2pc::deal::kinds())), log: mlog.clone() };
        let mut d = Dealer::establish(Box::new(module), &mut ch, p).expect("seed agreement");
        mlog.lock().unwrap().clear();
        let b = if swapped { tami::deal_swapped(&mut d, p, n, shape).unwrap() } else { tami::deal(&mut d, p, n, shape).unwrap() };
        assert_eq!(b.party, if p == host_a { 0 } else { 1 }, "the batch's role");
        let dealt = mlog.lock().unwrap().concat();
        clog.lock().unwrap().clear();
        (b, dealt, ch, clog, tx)
    };
    let ta = std::thread::spawn(move || {
        let (b, dealt, mut ch, clog, _) = party(host_a, ca, None);
        // Party 0's input: uniform, independent of everything party 1 holds.
        let mut prg = Prg::new(Block(0x7a31 ^ seed as u128));
        let lm = if shape.bits == 64 { u64::MAX } else { (1u64 << shape.bits) - 1 };
        let y: Vec<u64> = (0..n).map(|_| prg.next_u64() & lm).collect();
        let out = tami::online(&mut ch, &b, Some(&y)).unwrap();
        let received = clog.lock().unwrap().concat();
        (View { dealt, received, out: out_vec(out) }, y)
    });
    let tb = std::thread::spawn(move || {
        let (b, dealt, mut ch, clog, tx) = party(1 - host_a, cb, Some(tx));
        tx.unwrap().send(b.dealt_input().to_vec()).unwrap();
        let out = tami::online(&mut ch, &b, None).unwrap();
        let received = clog.lock().unwrap().concat();
        View { dealt, received, out: out_vec(out) }
    });
    let (va, y) = ta.join().unwrap();
    let vb = tb.join().unwrap();
    let x = rx.recv().unwrap();
    (va, vb, y, x)
}

fn out_vec(o: tami::TamiOut) -> Vec<u64> {
    match o {
        tami::TamiOut::Bits(b) => (0..b.n).map(|i| b.get(i) as u64).collect(),
        tami::TamiOut::Arith(a) => a.v.clone(),
    }
}

/// The value party 0 compares (y' in the docs): y, or y + 2^{ℓ−1} for truncation.
fn y_prime(shape: &TamiShape, y: u64) -> u64 {
    let l = shape.bits;
    let lm = if l == 64 { u64::MAX } else { (1u64 << l) - 1 };
    match shape.flavor {
        Flavor::Trunc { .. } => y.wrapping_add(1u64 << (l - 1)) & lm,
        _ => y & lm,
    }
}

/// Asserts `hits` successes out of trials with success probabilities `p`
/// are within `z` standard deviations of chance (a one-sided bound: doing
/// better than chance is the leak; two-sided to also catch anti-correlation).
fn assert_chance(what: &str, hits: usize, ps: &[f64], z: f64) {
    let r = score(what, hits, ps);
    assert!(r.abs() <= z, "{what}: {r:+.1} sd from chance — the view leaks");
}

/// Prints the attack's score; returns its deviation from chance in standard deviations.
fn score(what: &str, hits: usize, ps: &[f64]) -> f64 {
    let mean: f64 = ps.iter().sum();
    let sd: f64 = ps.iter().map(|p| p * (1.0 - p)).sum::<f64>().sqrt();
    let dev = (hits as f64 - mean) / sd;
    eprintln!("{what}: {hits} of {} correct ({:.2}%), chance {:.1} ({:.2}%), {dev:+.2} sd", ps.len(), 100.0 * hits as f64 / ps.len() as f64, mean, 100.0 * mean / ps.len() as f64);
    dev
}

/// Party 1's attack (the issue's): for every chunk, find the masks τ_j that
/// make each dealt 2^k-entry table half a (possibly complemented) leaf
/// function of x'_j; guess one such τ_j (uniformly at random if none —
/// then the view says nothing and chance is the best), and y_j = ŷ_j ⊕ τ_j.
fn party1_attack(shape: TamiShape, n: usize, seed: u64) {
    party1_attack_roles(shape, n, seed, false)
}

/// [`party1_attack`] by the host playing B, on a plain or swapped batch.
fn party1_attack_roles(shape: TamiShape, n: usize, seed: u64, swapped: bool) {
    let (_va, vb, y, x) = run_recorded_roles(shape, n, seed, swapped);
    let plan = shape.plan();
    let share = TamiShare::from_bytes(&vb.dealt, 1, n, &shape, &plan).expect("party 1's release parses");
    assert_eq!(share.input, x, "party 1 knows its dealt input");
    let chunks = shape.chunks();
    let nc = chunks.len();
    let mut has_eq = vec![false; nc];
    for &(node, eq) in &plan.levels[0].inputs {
        if eq {
            has_eq[node as usize] = true;
        }
    }
    // ŷ: the first n·⌈sent/8⌉ received bytes (party 0's leaf flight starts with it).
    let sent = shape.sent_bits();
    let w = (sent as usize).div_ceil(8);
    assert!(vb.received.len() >= n * w, "party 1 received the leaf flight");
    let yhat: Vec<u64> = (0..n)
        .map(|i| {
            let mut a = [0u8; 8];
            a[..w].copy_from_slice(&vb.received[i * w..(i + 1) * w]);
            u64::from_le_bytes(a)
        })
        .collect();
    let mut prg = Prg::new(Block(0x5eed ^ seed as u128));
    let (mut tau_hits, mut tau_ps, mut ybit_hits, mut ybit_ps) = (0usize, Vec::new(), 0usize, Vec::new());
    let (mut eqc_hits, mut eqc_ps, mut y_whole) = (0usize, Vec::new(), 0usize);
    for i in 0..n {
        let xc = threshold(&shape, share.input[i]);
        let yp = y_prime(&shape, y[i]);
        let mut yguess = 0u64;
        for (j, &(lo, width)) in chunks.iter().enumerate() {
            let cm = (1u64 << width) - 1;
            let size = 1u32 << width;
            let full = if size == 64 { u64::MAX } else { (1u64 << size) - 1 };
            let xj = (xc >> lo) & cm;
            let t = share.tables.get(i * nc + j).copied().unwrap_or(0);
            let (gt_half, eq_half) = (t & full, (t >> 32) & full);
            let consistent: Vec<u64> = (0..=cm)
                .filter(|&tj| {
                    let (mut g, mut e) = (0u64, 0u64);
                    for u in 0..=cm {
                        let v = u ^ tj;
                        g |= ((v > xj) as u64) << u;
                        e |= ((v == xj) as u64) << u;
                    }
                    let gok = gt_half == g || gt_half == g ^ full;
                    let eok = !has_eq[j] || eq_half == e || eq_half == e ^ full;
                    gok && eok
                })
                .collect();
            let guess = if consistent.is_empty() { prg.next_u64() & cm } else { consistent[(prg.next_u64() % consistent.len() as u64) as usize] };
            let true_tau = ((yhat[i] ^ yp) >> lo) & cm;
            tau_hits += (guess == true_tau) as usize;
            tau_ps.push(1.0 / (cm + 1) as f64);
            if has_eq[j] {
                eqc_hits += (guess == true_tau) as usize;
                eqc_ps.push(1.0 / (cm + 1) as f64);
            }
            yguess |= (((yhat[i] >> lo) & cm) ^ guess) << lo;
        }
        let cmask = (1u64 << shape.cmp_bits()) - 1;
        y_whole += ((yguess ^ yp) & cmask == 0) as usize;
        for bit in 0..shape.cmp_bits() {
            ybit_hits += (((yguess ^ yp) >> bit) & 1 == 0) as usize;
            ybit_ps.push(0.5);
        }
    }
    // Second attack on the same view: party 1 unlocks the one table entry
    // per chunk it can (its table word at ŷ_j XOR the received pad bit),
    // reads it as if it were the unmasked leaf bit, and reads its own
    // output share as the comparison result.
    let nw = n.div_ceil(64);
    let lv0 = &plan.levels[0];
    let t0 = lv0.inputs.len();
    let pads: Vec<u64> = vb.received[n * w..]
        .chunks_exact(8)
        .take(nw * t0)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .chain(std::iter::repeat(0))
        .take(nw * t0)
        .collect();
    let (mut leaf_hits, mut leaf_ps, mut out_hits, mut out_ps) = (0usize, Vec::new(), 0usize, Vec::new());
    for i in 0..n {
        let xc = threshold(&shape, share.input[i]);
        let yp = y_prime(&shape, y[i]);
        let (wi, bi) = (i / 64, i % 64);
        for (t, &(node, eq)) in lv0.inputs.iter().enumerate() {
            let (lo, width) = chunks[node as usize];
            let cm = (1u64 << width) - 1;
            let u = (yhat[i] >> lo) & cm;
            let word = share.tables.get(i * nc + node as usize).copied().unwrap_or(0);
            let read = ((word >> (u + if eq { 32 } else { 0 })) & 1) ^ ((pads[wi * t0 + t] >> bi) & 1);
            let (yj, xj) = ((yp >> lo) & cm, (xc >> lo) & cm);
            let truth = if eq { yj == xj } else { yj > xj } as u64;
            leaf_hits += (read == truth) as usize;
            leaf_ps.push(0.5);
        }
        if matches!(shape.flavor, Flavor::Millionaire | Flavor::Drelu) {
            let truth = match shape.flavor {
                Flavor::Millionaire => (yp > xc) as u64,
                _ => {
                    let l = shape.bits;
                    let xv = yp.wrapping_add(share.input[i]) & if l == 64 { u64::MAX } else { (1u64 << l) - 1 };
                    ((xv >> (l - 1)) & 1) ^ 1
                }
            };
            out_hits += (vb.out[i] == truth) as usize;
            out_ps.push(0.5);
        }
    }
    let tag = format!("{:?} ℓ={} k={}", shape.flavor, shape.bits, shape.k);
    if shape.flavor == Flavor::Relu {
        // ReLU: A's leaf flight ends with y − s (ℓ bits each). Party 1 tries
        // every ring array of its release as the mask s (and ŷ's τ-free
        // bits), guessing y = (y − s) + s; each guess must be at chance per bit.
        let l = shape.bits;
        let lm = if l == 64 { u64::MAX } else { (1u64 << l) - 1 };
        let rb = (l as usize).div_ceil(8);
        // Received: ŷ, pad bits, y − s (the leaf flight), then e (one word per 64).
        let start = n * w + 8 * nw * t0;
        assert_eq!(vb.received.len(), start + n * rb + 8 * nw, "party 1 receives ŷ, pad bits, y − s, e");
        let ys: Vec<u64> = (0..n)
            .map(|i| {
                let mut a = [0u8; 8];
                a[..rb].copy_from_slice(&vb.received[start + i * rb..start + (i + 1) * rb]);
                u64::from_le_bytes(a) & lm
            })
            .collect();
        let zeros = vec![0u64; n];
        for (name, cand) in [("0", &zeros), ("input", &share.input), ("rho", &share.rho), ("rho_x", &share.rho_x), ("smask", &share.smask)] {
            if cand.len() != n {
                assert!(cand.is_empty(), "{name}: unexpected length");
                continue;
            }
            let (mut hits, mut ps) = (0usize, Vec::new());
            for i in 0..n {
                let guess = ys[i].wrapping_add(cand[i]) & lm;
                let yp = y_prime(&shape, y[i]) & lm;
                for bit in 0..l {
                    hits += (((guess ^ yp) >> bit) & 1 == 0) as usize;
                    ps.push(0.5);
                }
            }
            let z = score(&format!("{tag} party 1 unmasking y − s with its {name}"), hits, &ps);
            assert!(z.abs() <= 5.0, "{tag}: y − s unmasked by party 1's {name} ({z:+.1} sd)");
        }
        assert!(share.smask.is_empty(), "party 1 never gets the mask s");
    }
    let d = score(&format!("{tag} party 1 reading unlocked leaf bits"), leaf_hits, &leaf_ps);
    let e = if out_ps.is_empty() { 0.0 } else { score(&format!("{tag} party 1 reading its output share as the result"), out_hits, &out_ps) };
    assert!(d.abs() <= 5.0 && e.abs() <= 5.0, "{tag}: party 1's view leaks leaf bits / the result ({d:+.1}, {e:+.1} sd)");
    let a = score(&format!("{tag} party 1 guessing τ chunks"), tau_hits, &tau_ps);
    let b = score(&format!("{tag} party 1 guessing τ chunks that carry an eq leaf"), eqc_hits, &eqc_ps);
    let c = score(&format!("{tag} party 1 guessing bits of y"), ybit_hits, &ybit_ps);
    eprintln!("{tag} party 1 recovered all {} compared bits of y for {y_whole} of {n} comparisons", shape.cmp_bits());
    assert!(a.abs() <= 5.0 && b.abs() <= 5.0 && c.abs() <= 5.0, "{tag}: party 1's view leaks τ / y ({a:+.1}, {b:+.1}, {c:+.1} sd from chance)");
}

#[test]
fn curious_party1_millionaire() {
    party1_attack(TamiShape::new(32, 4, 8, Flavor::Millionaire), 4096, 1);
    party1_attack(TamiShape::new(16, 3, 8, Flavor::Millionaire), 4096, 2);
}

#[test]
fn curious_party1_relu_trunc() {
    party1_attack(TamiShape::new(32, 4, 8, Flavor::Relu), 2048, 3);
    party1_attack(TamiShape::new(32, 4, 8, Flavor::Trunc { f: 12 }), 2048, 4);
    party1_attack(TamiShape::new(37, 4, 8, Flavor::Drelu), 2048, 5);
    party1_attack(TamiShape::new(37, 5, 8, Flavor::Relu), 2048, 6);
    party1_attack(TamiShape::new(64, 5, 8, Flavor::Millionaire), 2048, 7);
    // a reduced compared width (only the low w bits compared, the
    // arithmetic in the whole ring): the same view with fewer masked bits
    party1_attack(TamiShape::new(64, 5, 5, Flavor::Relu).with_width(24), 2048, 8);
}

/// Party 0 (y-holder) with its real view: it knows y and everything its
/// module released, and receives party 1's flights. It tries to learn the
/// leaf comparison bits (gt_j, eq_j of y'_j vs x'_j), party 1's threshold
/// chunks x'_j (eq_j = 1 ⇒ x'_j = y'_j) and the final comparison bit, by
/// reading the received opened bits as if unmasked and its own output
/// share as the result. Each must be at chance.
#[test]
fn curious_party0() {
    for (shape, n) in [
        (TamiShape::new(32, 4, 8, Flavor::Millionaire), 4096),
        (TamiShape::new(32, 4, 8, Flavor::Relu), 2048),
        (TamiShape::new(64, 5, 5, Flavor::Relu).with_width(24), 2048),
    ] {
        party0_attack(shape, n, 9, false);
    }
}

/// The swapped-role kind (`2pc/tami-swapped`, used by the chained ReLUs of
/// `Ctx::relu_chain`): host 0 plays B and host 1 plays A; each host's view
/// is attacked as the same role's view on a plain batch — both at chance.
#[test]
fn curious_hosts_on_swapped_role_batches() {
    let shape = TamiShape::new(64, 5, 4, Flavor::Relu).with_width(28);
    let shape = TamiShape { arity: shape.chunks().len() as u32, ..shape };
    party1_attack_roles(shape, 2048, 11, true);
    party0_attack(shape, 2048, 12, true);
    party1_attack_roles(TamiShape::new(32, 4, 8, Flavor::Relu), 2048, 13, true);
}

/// Party 0's (role A's) attacks on its view of a plain or swapped batch.
fn party0_attack(shape: TamiShape, n: usize, seed: u64, swapped: bool) {
    {
        let (va, _vb, y, x) = run_recorded_roles(shape, n, seed, swapped);
        let plan = shape.plan();
        let share = TamiShare::from_bytes(&va.dealt, 0, n, &shape, &plan).expect("party 0's release parses");
        assert!(share.input.is_empty(), "party 0 never gets party 1's dealt input");
        let nw = n.div_ceil(64);
        let lv0 = &plan.levels[0];
        let t0 = lv0.inputs.len();
        // Party 1's merge opening: the last nw·t0 words of the leaf-merge flight.
        // For the millionaires' it is the whole of the one message party 0 receives;
        // for ReLU it is followed by one word per 64 elements (e_B).
        let extra = if shape.has_post() { nw } else { 0 };
        assert_eq!(va.received.len(), 8 * (nw * t0 + extra), "party 0 receives exactly the merge opening (+ e_B)");
        let word = |k: usize| u64::from_le_bytes(va.received[8 * k..8 * k + 8].try_into().unwrap());
        let chunks = shape.chunks();
        let mut prg = Prg::new(Block(0xa0));
        let (mut leaf_hits, mut leaf_ps, mut x_hits, mut x_ps, mut out_hits, mut out_ps) = (0, Vec::new(), 0, Vec::new(), 0, Vec::new());
        for i in 0..n {
            let xc = threshold(&shape, x[i]);
            let yp = y_prime(&shape, y[i]);
            let (wi, bi) = (i / 64, i % 64);
            for (t, &(node, eq)) in lv0.inputs.iter().enumerate() {
                let (lo, width) = chunks[node as usize];
                let cm = (1u64 << width) - 1;
                let (yj, xj) = ((yp >> lo) & cm, (xc >> lo) & cm);
                let truth = if eq { yj == xj } else { yj > xj } as u64;
                let d = (word(wi * t0 + t) >> bi) & 1;
                leaf_hits += (d == truth) as usize;
                leaf_ps.push(0.5);
                if eq {
                    let guess = if d == 1 { yj } else { (yj + 1 + prg.next_u64() % cm) & cm };
                    x_hits += (guess == xj) as usize;
                    x_ps.push(1.0 / (cm + 1) as f64);
                }
            }
            if shape.flavor == Flavor::Millionaire {
                let truth = (yp > xc) as u64;
                out_hits += (va.out[i] == truth) as usize;
                out_ps.push(0.5);
            } else {
                let e_b = (word(nw * t0 + wi) >> bi) & 1;
                let ring_half = 1u64 << (shape.bits - 1);
                let xv = yp.wrapping_add(x[i]) & ((1u64 << shape.bits) - 1);
                let truth = (xv < ring_half) as u64;
                out_hits += (e_b == truth) as usize;
                out_ps.push(0.5);
            }
        }
        let f = format!("{:?}", shape.flavor);
        assert_chance(&format!("{f} party 0 reading opened leaf bits"), leaf_hits, &leaf_ps, 5.0);
        assert_chance(&format!("{f} party 0 guessing x' chunks"), x_hits, &x_ps, 5.0);
        assert_chance(&format!("{f} party 0 guessing the result"), out_hits, &out_ps, 5.0);
    }
}
