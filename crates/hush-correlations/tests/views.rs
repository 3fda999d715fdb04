//! What a curious host learns from its REAL view, for the COT sources:
//! SilentFlow (each host's module releases, nothing on the channel after
//! setup) and IKNP (the matrix the sender receives). Each test would fail
//! if a mask were fixed, reused or left out (see each test's comment for
//! the broken variants that were tried locally). Deterministic seeds.

use hush_correlations::ggm::expand_box;
use hush_correlations::iknp::{IknpReceiver, IknpSender};
use hush_correlations::lpn::LPN_B10;
use hush_correlations::silentflow::{share, SilentReceiver, SilentSender};
use hush_correlations::{CotReceiver, CotSender};
use hush_primitives::{BitVec, Block, Prg};
use hush_tee::{InProcessModule, Module, ModuleStats, Request, Response, TrustedModule};
use hush_transport::{Channel, MemChannel, Recording as Recorded};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::thread;

/// What a host got from its module, copied out of each response.
#[derive(Default)]
struct Released {
    delta: Option<Block>,
    v: Vec<Block>,
    w: Vec<Block>,
    roots: Vec<Vec<Block>>,
    /// Per batch: α (crossing 1), every off-path seed, masked leaves.
    alphas: Vec<Vec<u32>>,
    red: Vec<Vec<Block>>,
    leaf_red: Vec<Vec<Block>>,
    masked: Vec<Vec<Block>>,
}

/// A module wrapper that records every release to the host.
struct Recording {
    inner: Box<dyn TrustedModule>,
    log: Arc<Mutex<Released>>,
}

impl TrustedModule for Recording {
    fn call(&mut self, req: &Request) -> hush_tee::Result<Response> {
        let r = self.inner.call(req)?;
        let mut l = self.log.lock().unwrap();
        match &r {
            Response::CotSenderInit { delta, v } => {
                l.delta = Some(*delta);
                l.v = v.clone();
            }
            Response::CotReceiverInit { w } => l.w = w.clone(),
            Response::GgmRoots(v) => l.roots.push(v.clone()),
            Response::GgmLevel { alphas, red, leaf_red, masked } => {
                if !alphas.is_empty() {
                    l.alphas.push(alphas.clone());
                    l.red.push(Vec::new());
                }
                l.red.last_mut().expect("crossing 1 first").extend_from_slice(red);
                if !masked.is_empty() {
                    l.leaf_red.push(leaf_red.clone());
                    l.masked.push(masked.clone());
                }
            }
            _ => {}
        }
        Ok(r)
    }
    fn stats(&self) -> ModuleStats {
        self.inner.stats()
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}

fn module(seed: u128, log: Arc<Mutex<Released>>) -> Box<dyn TrustedModule> {
    Box::new(Recording { inner: Box::new(InProcessModule::new(Module::with_rng(Prg::new(Block(seed))))), log })
}

/// z-score of `ones` out of `n` fair coin flips.
fn z(ones: usize, n: usize) -> f64 {
    (ones as f64 - n as f64 / 2.0) / (n as f64 / 4.0).sqrt()
}

/// Every bit but the lsb (Δ's lsb is public: 1) of `v` is 1 about half the
/// time: blocks that were Δ, Δ ⊕ (a fixed value) or a function of few
/// values would fail.
fn bits_balanced(what: &str, v: &[Block]) {
    for b in 1..128 {
        let ones = v.iter().filter(|x| (x.0 >> b) & 1 == 1).count();
        let zz = z(ones, v.len());
        assert!(zz.abs() < 6.0, "{what}: bit {b} is 1 in {ones} of {}, z = {zz:.1}", v.len());
    }
}

/// SilentFlow, receiver's host: its view is the initial correlation w, the
/// punctured positions α, every off-path seed and the masked punctured
/// leaves s_α ⊕ Δ — and nothing on the channel. The sender's leaf s_α at
/// each punctured position (computed here from the sender's roots) and Δ
/// must not be among the released values (nor with the lsb flipped), and
/// w and the masked leaves must be balanced in every bit but the lsb (a
/// majority vote on either would otherwise give bits of Δ). Sender's host:
/// its module releases Δ, v and the roots only (never α), and it receives
/// no byte after setup.
///
/// Checked to fail (local, uncommitted edits of `hush_tee::module`): with
/// the masked leaf released unmasked (no ⊕ Δ), s_α is in the receiver's
/// view; with v = 0 (w = u·Δ), Δ itself is in the receiver's view.
#[test]
fn silentflow_views_hide_delta_and_the_punctured_leaves() {
    let p = LPN_B10;
    let (ls, lr) = (Arc::new(Mutex::new(Released::default())), Arc::new(Mutex::new(Released::default())));
    let (ms, mr) = (module(71, ls.clone()), module(72, lr.clone()));
    let (mut a, mut b) = MemChannel::pair();
    let batches = 2;
    let per = p.n - p.k;
    let hs = thread::spawn(move || {
        let mut s = SilentSender::setup(&mut a, share(ms), p, true).unwrap();
        let before = a.cost();
        let mut q = vec![Block::ZERO; per];
        for _ in 0..batches {
            s.send_cots(&mut a, &mut q).unwrap();
        }
        (a.cost().bytes_recv - before.bytes_recv, a.cost().bytes_sent - before.bytes_sent)
    });
    let mut r = SilentReceiver::setup(&mut b, share(mr), p, true).unwrap();
    let mut t = vec![Block::ZERO; per];
    let mut ch = BitVec::zeros(0);
    for _ in 0..batches {
        r.recv_cots(&mut b, &mut ch, &mut t).unwrap();
    }
    let (recv_bytes, sent_bytes) = hs.join().unwrap();
    assert_eq!((recv_bytes, sent_bytes), (0, 0), "no bytes after setup");

    let s = ls.lock().unwrap();
    let rv = lr.lock().unwrap();
    let delta = s.delta.expect("sender's Δ");
    assert!(s.alphas.is_empty() && s.masked.is_empty() && s.w.is_empty(), "the sender's module released receiver-side values");
    assert!(rv.delta.is_none() && rv.roots.is_empty() && rv.v.is_empty(), "the receiver's module released sender-side values");
    assert_eq!((s.roots.len(), rv.masked.len()), (batches, batches));

    let mut view: HashSet<u128> = HashSet::new();
    for x in rv.w.iter().chain(rv.red.concat().iter()).chain(rv.leaf_red.concat().iter()).chain(rv.masked.concat().iter()) {
        view.insert(x.0);
    }
    let seen = |x: u128| view.contains(&x) || view.contains(&(x ^ 1));
    assert!(!seen(delta.0), "Δ is in the receiver's view");
    let mut tree = vec![Block::ZERO; p.leaves()];
    for bt in 0..batches {
        for i in 0..p.t {
            tree[0] = s.roots[bt][i];
            expand_box(&mut tree, p.h);
            let alpha = rv.alphas[bt][i] as usize;
            let leaf = tree[alpha];
            assert!(!seen(leaf.0), "batch {bt} tree {i}: the sender's punctured leaf s_α is in the receiver's view");
            // Sanity: this is the leaf the receiver's masked value hides,
            // and the receiver does know the sibling leaf.
            assert_eq!(rv.masked[bt][i] ^ leaf, delta, "batch {bt} tree {i}: masked leaf ≠ s_α ⊕ Δ");
            assert_eq!(Block(rv.leaf_red[bt][i].0 & !1), tree[alpha ^ 1], "batch {bt} tree {i}: leaf-level sibling");
        }
    }
    bits_balanced("receiver's w", &rv.w);
    bits_balanced("receiver's masked leaves", &rv.masked.concat());
}

/// The IKNP sender's received matrix u for `batches` batches of `m` COTs
/// with every choice bit equal to `choice`.
fn iknp_sender_view(choice: bool, seed: u128, batches: usize, m: usize) -> Vec<Vec<u8>> {
    let (a, mut b) = MemChannel::pair();
    let got = Arc::new(Mutex::new(Vec::new()));
    let mut a = Recorded::with_log(a, got.clone());
    let hs = thread::spawn(move || {
        let mut s = IknpSender::setup(&mut a, &mut Prg::new(Block(seed))).unwrap();
        let mut out = Vec::new();
        for _ in 0..batches {
            got.lock().unwrap().clear();
            let mut q = vec![Block::ZERO; m];
            s.send_cots(&mut a, &mut q).unwrap();
            out.push(got.lock().unwrap().concat());
        }
        out
    });
    let mut r = IknpReceiver::setup(&mut b, &mut Prg::new(Block(seed + 1))).unwrap();
    let mut choices = BitVec::zeros(m);
    if choice {
        for i in 0..m {
            choices.set(i, true);
        }
    }
    for _ in 0..batches {
        let mut t = vec![Block::ZERO; m];
        r.recv_cots_chosen(&mut b, &choices, &mut t).unwrap();
    }
    hs.join().unwrap()
}

/// IKNP, sender's host: the columns u_j = G(k_j^0) ⊕ G(k_j^1) ⊕ r it
/// receives look the same for all-zero and all-one choice bits (byte
/// histograms, two-sample χ² with 255 dof), are balanced, and the XOR of
/// two batches' matrices is balanced too (a PRG stream reused between
/// batches would make it r ⊕ r' = 0 here).
///
/// Checked to fail (local, uncommitted edit of `iknp.rs`): with
/// u_j = G(k_j^0) ⊕ G(k_j^0) ⊕ r (the second key's stream left out), u = r
/// and χ² is 1,572,864. (A stream reused between batches would make the
/// XOR check fail: with constant choices it is all zero.)
#[test]
fn iknp_sender_view_is_independent_of_the_choice_bits() {
    let (batches, m) = (3, 1 << 14);
    let zeros = iknp_sender_view(false, 3, batches, m);
    let ones = iknp_sender_view(true, 5, batches, m);
    let hist = |v: &[Vec<u8>]| {
        let mut h = [0u64; 256];
        for x in v.concat() {
            h[x as usize] += 1;
        }
        h
    };
    let (h0, h1) = (hist(&zeros), hist(&ones));
    let c: f64 = h0.iter().zip(&h1).filter(|(a, b)| **a + **b > 0).map(|(a, b)| (*a as f64 - *b as f64).powi(2) / (*a + *b) as f64).sum();
    // χ² with 255 dof: mean 255, sd ≈ 22.6; 6 sd.
    assert!(c < 255.0 + 6.0 * 22.6, "the received matrix depends on the choice bits: χ² = {c}");
    for v in [&zeros, &ones] {
        let all = v.concat();
        let ones_ = all.iter().map(|x| x.count_ones() as usize).sum::<usize>();
        assert!(z(ones_, all.len() * 8).abs() < 6.0, "received matrix unbalanced");
        for w in v.windows(2) {
            let x = w[0].iter().zip(&w[1]).map(|(a, b)| (a ^ b).count_ones() as usize).sum::<usize>();
            assert!(z(x, w[0].len() * 8).abs() < 6.0, "two batches' matrices XOR to a biased value ({x} ones)");
        }
    }
}
