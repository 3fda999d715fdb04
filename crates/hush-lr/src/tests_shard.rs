//! Sharded training ([`crate::shard`]) over in-memory links: K = 1 is
//! bit-identical to one session, K > 1 trains the same model within the
//! fixed-point bound, resuming from an epoch's shares is bit-identical to
//! not stopping, and mismatched pairings are refused.

use crate::data::{synthetic, Dataset};
use crate::secure::{ModelShares, Opened, Randomness, Role, Session};
use crate::shard::{apply_steps, bucket_of, chunk, ShardSpec, ShardWorker};
use crate::*;
use hush_transport::MemChannel;

fn cfg() -> TrainConfig {
    TrainConfig { epochs: 3, batch: 24, lr: 1.0, lr_decay: 0.2, l2: 0.001, sigmoid: Sigmoid::Cubic, key_bits: 1024, order_seed: 5, reveal: false, low_bandwidth: false }
}

const SEED_L: u64 = 0x1abe15;
const SEED_F: u64 = 0xfea7;

fn zero(role: Role, d_own: usize, d_peer: usize) -> ModelShares {
    ModelShares { role, own: vec![0; d_own], peer: vec![0; d_peer], intercept: false }
}

/// One party's driver over `k` in-memory workers, epochs `from..to`,
/// starting from shares `m`; reveals through worker 0 at the end.
fn drive(workers: &mut [ShardWorker], data: &Dataset, c: &TrainConfig, mut m: ModelShares, from: u32, to: u32, reveal: bool) -> (ModelShares, Option<Opened>) {
    for w in workers.iter_mut() {
        let d_peer = w.start(data.clone(), from).unwrap();
        assert_eq!(d_peer, m.peer.len());
    }
    for ep in from..to {
        let nb: Vec<usize> = workers.iter_mut().map(|w| w.begin_epoch(ep).unwrap()).collect();
        assert!(nb.iter().all(|&n| n == nb[0]));
        for j in 0..nb[0] {
            let steps: Vec<_> = workers.iter_mut().map(|w| w.step(j, m.clone()).unwrap()).collect();
            apply_steps(c, &mut m, &steps, ep).unwrap();
        }
    }
    let op = reveal.then(|| workers[0].reveal(m.clone()).unwrap());
    (m, op)
}

fn workers(role: Role, k: u32, links: Vec<MemChannel>, c: &TrainConfig, seed: u64) -> Vec<ShardWorker> {
    links
        .into_iter()
        .enumerate()
        .map(|(i, ch)| {
            let spec = ShardSpec { k, index: i as u32 };
            ShardWorker::spawn(move || Ok(ch), role, spec, c.clone(), Randomness::InsecureTestSeed { seed, worker: i as u32 }).unwrap()
        })
        .collect()
}

/// Both parties' drivers with `k` worker pairs.
fn sharded(dl: &Dataset, df: &Dataset, c: &TrainConfig, k: u32, from: u32, to: u32, start: Option<(ModelShares, ModelShares)>) -> (ModelShares, ModelShares, Opened) {
    let (mut la, mut fa) = (Vec::new(), Vec::new());
    for _ in 0..k {
        let (a, b) = MemChannel::pair();
        la.push(a);
        fa.push(b);
    }
    let (ml0, mf0) = start.unwrap_or_else(|| (zero(Role::Labels, dl.cols, df.cols), zero(Role::Features, df.cols, dl.cols)));
    let (df2, c2) = (df.clone(), c.clone());
    let h = std::thread::spawn(move || {
        let mut ws = workers(Role::Features, k, fa, &c2, SEED_F);
        drive(&mut ws, &df2, &c2, mf0, from, to, true)
    });
    let mut ws = workers(Role::Labels, k, la, c, SEED_L);
    let (ml, ol) = drive(&mut ws, dl, c, ml0, from, to, true);
    let (mf, of) = h.join().unwrap();
    assert_eq!(ol, of);
    (ml, mf, ol.unwrap())
}

fn split(n: usize, d: usize, seed: u64) -> (Dataset, Dataset, Dataset) {
    let (ds, _) = synthetic(n, d, 0.6, seed);
    (ds.columns(0, d / 2), ds.columns(d / 2, d), ds)
}

#[test]
fn chunks_cover_each_batch_once() {
    for len in 0..40 {
        for k in 1..7 {
            let mut next = 0;
            for i in 0..k {
                let r = chunk(len, k, i);
                assert_eq!(r.start, next);
                assert!(r.len() == len / k || r.len() == len / k + 1);
                next = r.end;
            }
            assert_eq!(next, len);
        }
    }
    let b: Vec<usize> = (0..1000).map(|i| bucket_of(&format!("id{i}"), 4)).collect();
    assert!((0..4).all(|k| b.iter().filter(|&&x| x == k).count() > 200), "buckets are balanced");
    assert_eq!(bucket_of("customer-17", 7), bucket_of("customer-17", 7));
}

/// K = 1 is the one-process training, share for share.
#[test]
fn one_worker_is_bit_identical_to_one_session() {
    let (dl, df, _) = split(150, 6, 21);
    let c = cfg();
    let (ml, mf, _) = sharded(&dl, &df, &c, 1, 0, c.epochs, None);
    let (mut a, mut b) = MemChannel::pair();
    let (df2, c2) = (df.clone(), c.clone());
    let h = std::thread::spawn(move || {
        let x = df2.to_fixed().unwrap();
        let mut s = Session::start_with(&mut b, Role::Features, x.rows, x.cols, &c2, Randomness::InsecureTestSeed { seed: SEED_F, worker: 0 }).unwrap();
        s.train(&x, None, &mut Default::default()).unwrap()
    });
    let x = dl.to_fixed().unwrap();
    let mut s = Session::start_with(&mut a, Role::Labels, x.rows, x.cols, &c, Randomness::InsecureTestSeed { seed: SEED_L, worker: 0 }).unwrap();
    let sl = s.train(&x, Some(&dl.labels), &mut Default::default()).unwrap();
    let sf = h.join().unwrap();
    assert_eq!(ml, sl);
    assert_eq!(mf, sf);
}

/// The first-order bound on how far two trainings of the same steps can
/// drift apart when SecureML's local truncation rounds differently
/// (±1 ulp per truncation, 2^-FRAC): per row the error e differs by at
/// most E ulp (z's truncation carried through the cubic's two products,
/// plus their own), so a step's gradient by at most b·X·E ulp, the step by
/// η·X·E + 3 ulp (gradient, step and L2 truncations); summed over the
/// steps. X bounds |x|.
fn fixed_point_bound(c: &TrainConfig, n: usize, x_max: f64) -> f64 {
    let ulp = 1.0 / (1u64 << FRAC) as f64;
    let e_ulps = 8.0;
    let steps_per_epoch = n.div_ceil(c.batch as usize) as f64;
    (0..c.epochs).map(|ep| steps_per_epoch * (c.lr_at(ep) * x_max * e_ulps + 3.0) * ulp).sum()
}

/// K = 2 and K = 5 (with empty chunks: the last batch has 6 rows) take
/// the same steps: the opened models differ only within the fixed-point
/// bound, and the shares themselves are fresh (not equal to K = 1's).
#[test]
fn more_workers_train_the_same_model_within_the_fixed_point_bound() {
    let (dl, df, ds) = split(150, 6, 22);
    let c = cfg();
    let (ml1, _, o1) = sharded(&dl, &df, &c, 1, 0, c.epochs, None);
    let x_max = ds.rows.iter().flatten().map(|&(_, v)| v.abs()).fold(0.0, f64::max);
    let bound = fixed_point_bound(&c, ds.len(), x_max);
    for k in [2, 5] {
        let (mlk, _, ok) = sharded(&dl, &df, &c, k, 0, c.epochs, None);
        assert_ne!(mlk.own, ml1.own, "K = {k}: fresh masks");
        let w1: Vec<f64> = o1.labels.iter().chain(&o1.features).copied().collect();
        let wk: Vec<f64> = ok.labels.iter().chain(&ok.features).copied().collect();
        let worst = w1.iter().zip(&wk).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(worst <= bound, "K = {k}: max |Δw| {worst} > bound {bound}");
        // and it is a trained model, not zeros
        assert!(w1.iter().any(|w| w.abs() > 0.05), "{w1:?}");
        assert_eq!(accuracy(&ds, &wk, 0.0), accuracy(&ds, &w1, 0.0));
    }
}

/// Stopping after epoch 1 and resuming from its shares (what a checkpoint
/// holds) ends share for share where an uninterrupted run ends, at K = 2.
#[test]
fn resuming_from_an_epochs_shares_is_bit_identical() {
    let (dl, df, _) = split(120, 4, 23);
    let c = cfg();
    let (ml, mf, o) = sharded(&dl, &df, &c, 2, 0, c.epochs, None);
    let (ml1, mf1, _) = sharded(&dl, &df, &c, 2, 0, 1, None);
    let (ml2, mf2, o2) = sharded(&dl, &df, &c, 2, 1, c.epochs, Some((ml1, mf1)));
    assert_eq!((ml, mf), (ml2, mf2));
    assert_eq!(o, o2);
}

fn refused(kl: (u32, u32, u32), kf: (u32, u32, u32)) -> String {
    let (dl, df, _) = split(40, 4, 24);
    let c = cfg();
    let (a, b) = MemChannel::pair();
    let c2 = c.clone();
    let h = std::thread::spawn(move || {
        let mut w = ShardWorker::spawn(move || Ok(b), Role::Features, ShardSpec { k: kf.0, index: kf.1 }, c2, Randomness::Os).unwrap();
        w.start(df, kf.2).err().map(|e| e.to_string())
    });
    let mut w = ShardWorker::spawn(move || Ok(a), Role::Labels, ShardSpec { k: kl.0, index: kl.1 }, c, Randomness::Os).unwrap();
    let e = w.start(dl, kl.2).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(h.join().unwrap().is_some());
    // the worker stays stopped, naming the first error
    assert!(w.begin_epoch(0).unwrap_err().to_string().contains("earlier error"));
    e
}

#[test]
fn mismatched_workers_are_refused() {
    assert!(refused((2, 0, 0), (3, 0, 0)).contains("same K"));
    assert!(refused((2, 0, 0), (2, 1, 0)).contains("worker i must pair with worker i"));
    assert!(refused((2, 1, 3), (2, 1, 2)).contains("same checkpoint epoch"));
    assert!(ShardSpec { k: 2, index: 2 }.check().is_err());
    assert!(ShardSpec { k: 0, index: 0 }.check().is_err());
}

/// A worker whose peer worker dies mid-epoch fails with an error, and
/// its driver can name it (the Python driver adds the worker's index).
#[test]
fn a_lost_peer_worker_fails_the_step() {
    let (dl, df, _) = split(60, 4, 25);
    let c = cfg();
    let (a, b) = MemChannel::pair();
    let c2 = c.clone();
    let h = std::thread::spawn(move || {
        let mut w = ShardWorker::spawn(move || Ok(b), Role::Features, ShardSpec { k: 1, index: 0 }, c2, Randomness::Os).unwrap();
        w.start(df, 0).unwrap();
        w.begin_epoch(0).unwrap();
        // dropped here: its link closes
    });
    let mut w = ShardWorker::spawn(move || Ok(a), Role::Labels, ShardSpec { k: 1, index: 0 }, c.clone(), Randomness::Os).unwrap();
    w.start(dl.clone(), 0).unwrap();
    w.begin_epoch(0).unwrap_or(0);
    h.join().unwrap();
    let e = w.step(0, zero(Role::Labels, dl.cols, 2)).err().expect("the peer is gone");
    assert!(!e.to_string().is_empty());
}

/// Sharded PSI: the union of the buckets' intersections is the plain
/// intersection, in one order both parties share.
#[test]
fn bucketed_psi_is_the_plain_intersection() {
    let k = 3u32;
    let a_ids: Vec<String> = (0..90).map(|i| format!("u{}", i * 2)).collect();
    let b_ids: Vec<String> = (0..90).map(|i| format!("u{}", i * 3)).collect();
    let run = move |role: Role, ids: Vec<String>, links: Vec<MemChannel>| -> Vec<String> {
        let mut out = Vec::new();
        let mut ws = workers(role, k, links, &cfg(), 1);
        for (i, w) in ws.iter_mut().enumerate() {
            let bucket: Vec<String> = ids.iter().filter(|s| bucket_of(s, k as usize) == i).cloned().collect();
            let r = w.psi(bucket.clone()).unwrap();
            out.extend(r.rows.iter().map(|&j| bucket[j].clone()));
        }
        out
    };
    let (mut la, mut fa) = (Vec::new(), Vec::new());
    for _ in 0..k {
        let (a, b) = MemChannel::pair();
        la.push(a);
        fa.push(b);
    }
    let b2 = b_ids.clone();
    let h = std::thread::spawn(move || run(Role::Features, b2, fa));
    let got_l = run(Role::Labels, a_ids.clone(), la);
    let got_f = h.join().unwrap();
    assert_eq!(got_l, got_f, "one order at both parties");
    let mut want: Vec<String> = a_ids.iter().filter(|s| b_ids.contains(s)).cloned().collect();
    let mut got = got_l.clone();
    want.sort();
    got.sort();
    assert_eq!(got, want);
}
