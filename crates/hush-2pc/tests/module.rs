//! Seed agreement, dealing and the release rules of the trusted module,
//! through its public API, over both backends. (Here rather than in
//! `hush-tee`: the module binary and the dealing kinds it serves are built
//! in this crate.)

use hush_primitives::{Block, Prg};
use hush_tee::attest::{Report, SimulatedAttester, Verifier};
use hush_tee::{establish, ggm, InProcessModule, Module, ModuleRole, OutOfProcessModule, Request, Response, TrustedModule};
use hush_transport::{Channel, MemChannel};
use std::thread;

fn pair_in_process(seed: u64) -> (InProcessModule, InProcessModule) {
    let (mut a, mut b) = MemChannel::pair();
    let h = thread::spawn(move || {
        let mut m = InProcessModule::new(Module::with_rng(Prg::with_nonce(Block(seed as u128), 0)).with_kinds(hush_2pc::deal::kinds()));
        establish(&mut m, &mut a, ModuleRole::Sender).unwrap();
        m
    });
    let mut r = InProcessModule::new(Module::with_rng(Prg::with_nonce(Block(seed as u128), 1)).with_kinds(hush_2pc::deal::kinds()));
    establish(&mut r, &mut b, ModuleRole::Receiver).unwrap();
    assert_eq!(b.cost().rounds, 2);
    (h.join().unwrap(), r)
}

fn sender_init(m: &mut dyn TrustedModule, k: u32) -> (Block, Vec<Block>) {
    match &m.call(&Request::CotInit { k }).unwrap() {
        Response::CotSenderInit { delta, v } => (*delta, v.clone()),
        r => panic!("unexpected {r:?}"),
    }
}
fn receiver_init(m: &mut dyn TrustedModule, k: u32) -> Vec<Block> {
    match &m.call(&Request::CotInit { k }).unwrap() {
        Response::CotReceiverInit { w } => w.clone(),
        r => panic!("unexpected {r:?}"),
    }
}

/// Leaves of a full tree from its root.
fn leaves(root: Block, h: u32) -> Vec<Block> {
    let mut buf = vec![Block::ZERO; 1 << h];
    buf[0] = root;
    ggm::expand_in_place(&mut buf, h);
    buf
}

/// Runs one batch on both modules and checks the released seeds.
fn check_batch(s: &mut dyn TrustedModule, r: &mut dyn TrustedModule, batch: u64, trees: u32, h: u32, delta: Block) {
    let roots = match &s.call(&Request::GgmRoots { batch, trees, height: h }).unwrap() {
        Response::GgmRoots(r) => r.clone(),
        x => panic!("{x:?}"),
    };
    let before = r.stats().crossings;
    let mut alphas = Vec::new();
    let mut red = vec![Vec::new(); h as usize + 1];
    let mut masked = Vec::new();
    for level in 1..h {
        match &r.call(&Request::GgmLevel { batch, trees, height: h, level }).unwrap() {
            Response::GgmLevel { alphas: a, red: rd, leaf_red, masked: m } => {
                if level == 1 {
                    alphas = a.clone();
                } else {
                    assert!(a.is_empty());
                }
                red[level as usize] = rd.clone();
                if level == h - 1 {
                    red[h as usize] = leaf_red.clone();
                    masked = m.clone();
                }
            }
            x => panic!("{x:?}"),
        }
    }
    assert_eq!(r.stats().crossings - before, (h - 1) as u64, "crossings per batch = h-1 for {trees} trees");
    for (i, &root) in roots.iter().enumerate() {
        let l = leaves(root, h);
        let a = alphas[i] as usize;
        // Red seed at level j = sibling of the path node at level j.
        for j in 1..=h {
            let sib = (a >> (h - j)) ^ 1;
            let mut x = root;
            for lvl in (0..j).rev() {
                x = ggm::children(x)[(sib >> lvl) & 1];
            }
            assert_eq!(red[j as usize][i], x, "tree {i} level {j}");
        }
        assert_eq!(masked[i], Block(l[a].0 & !1) ^ delta);
        // Nothing released to the receiver equals Δ, a root or the punctured leaf.
        for lv in &red {
            assert!(!lv.contains(&delta) && !lv.contains(&root) && !lv.contains(&l[a]));
        }
    }
}

#[test]
fn seed_agreement_gives_one_correlation() {
    let (mut s, mut r) = pair_in_process(7);
    let (delta, v) = sender_init(&mut s, 1000);
    let w = receiver_init(&mut r, 1000);
    assert!(delta.lsb());
    let mut ones = 0;
    for (vi, wi) in v.iter().zip(&w) {
        assert!(!vi.lsb());
        assert_eq!(*wi, *vi ^ delta.and_bit(wi.lsb()));
        ones += wi.lsb() as usize;
    }
    assert!((400..600).contains(&ones), "{ones}");
    // Released once only.
    assert!(s.call(&Request::CotInit { k: 1000 }).is_err());
    assert!(r.call(&Request::CotInit { k: 1000 }).is_err());
}

#[test]
fn different_sessions_have_different_seeds() {
    let (mut s1, _) = pair_in_process(1);
    let (mut s2, _) = pair_in_process(2);
    assert_ne!(sender_init(&mut s1, 4).0, sender_init(&mut s2, 4).0);
}

#[test]
fn ggm_crossings_are_h_minus_1_whatever_the_tree_count() {
    let (mut s, mut r) = pair_in_process(3);
    let (delta, _) = sender_init(&mut s, 16);
    let mut batch = 0;
    for (trees, h) in [(1u32, 2u32), (1, 5), (100, 5), (1319, 13)] {
        check_batch(&mut s, &mut r, batch, trees, h, delta);
        batch += 1;
    }
}

#[test]
fn module_releases_only_its_hosts_share() {
    let (mut s, mut r) = pair_in_process(4);
    // The receiver's module never hands out roots, the sender's never walks paths.
    assert!(r.call(&Request::GgmRoots { batch: 0, trees: 4, height: 4 }).is_err());
    assert!(s.call(&Request::GgmLevel { batch: 0, trees: 4, height: 4, level: 1 }).is_err());
    let (delta, v) = sender_init(&mut s, 64);
    let w = receiver_init(&mut r, 64);
    assert!(!w.contains(&delta), "receiver must not get Δ");
    assert!(w.iter().zip(&v).any(|(a, b)| a != b));
    // Replays and out-of-order crossings are refused; a batch is released once.
    assert!(s.call(&Request::GgmRoots { batch: 0, trees: 4, height: 4 }).is_ok());
    assert!(s.call(&Request::GgmRoots { batch: 0, trees: 4, height: 4 }).is_err());
    assert!(r.call(&Request::GgmLevel { batch: 0, trees: 4, height: 4, level: 2 }).is_err());
    assert!(r.call(&Request::GgmLevel { batch: 0, trees: 4, height: 4, level: 1 }).is_ok());
    assert!(r.call(&Request::GgmLevel { batch: 0, trees: 4, height: 4, level: 1 }).is_err());
    assert!(r.call(&Request::GgmLevel { batch: 0, trees: 4, height: 4, level: 2 }).is_ok());
    assert!(r.call(&Request::GgmLevel { batch: 0, trees: 4, height: 4, level: 3 }).is_ok());
    assert!(r.call(&Request::GgmLevel { batch: 0, trees: 4, height: 4, level: 3 }).is_err());
    // Requests before seed agreement are refused.
    let mut fresh = InProcessModule::new(Module::with_rng(Prg::new(Block(9))));
    assert!(fresh.call(&Request::CotInit { k: 4 }).is_err());
    assert!(fresh.call(&Request::GgmRoots { batch: 0, trees: 1, height: 2 }).is_err());
    // Garbage requests are errors, not panics.
    let mut m = Module::new();
    for junk in [&[][..], &[0xff][..], &[10, 1][..], &[2, 0xff, 0xff, 0xff, 0xff][..]] {
        let resp = Response::decode(&m.handle_bytes(junk)).unwrap();
        assert!(matches!(resp, Response::Error(_)));
    }
}

#[test]
fn simulated_attestation_is_named_everywhere() {
    let m = Module::new();
    let dbg = format!("{m:?}");
    assert!(dbg.contains(hush_tee::SIMULATED_NOTE), "{dbg}");
    assert!(format!("{SimulatedAttester:?}").contains(hush_tee::SIMULATED_NOTE));
    let b = InProcessModule::new(Module::new());
    assert!(b.describe().contains(hush_tee::SIMULATED_NOTE));
}

struct Rejecting;
impl Verifier for Rejecting {
    fn verify(&self, _: &Report, _: &[u8; 32]) -> hush_tee::Result<()> {
        Err(hush_tee::Error::Attestation("test verifier rejects everything".into()))
    }
    fn describe(&self) -> &'static str {
        "rejecting test verifier"
    }
}

#[test]
fn failed_attestation_or_tampering_fails_on_both_sides() {
    // A verifier that rejects: the rejecting side errors and drops its
    // channel, so the other side errors too.
    let (mut a, mut b) = MemChannel::pair();
    let h = thread::spawn(move || {
        let mut m = InProcessModule::new(Module::with_backend(
            Prg::new(Block(1)),
            Box::new(SimulatedAttester),
            Box::new(Rejecting),
        ));
        let e = establish(&mut m, &mut a, ModuleRole::Sender).unwrap_err();
        drop(a);
        e
    });
    let mut r = InProcessModule::new(Module::with_rng(Prg::new(Block(2))));
    let er = establish(&mut r, &mut b, ModuleRole::Receiver).unwrap_err();
    let es = h.join().unwrap();
    assert!(es.to_string().contains("attestation"), "{es}");
    assert!(!er.to_string().is_empty());

    // A host that tampers with its module's hello (flips a public-key byte):
    // the report no longer binds it.
    let (mut a, mut b) = MemChannel::pair();
    let h = thread::spawn(move || {
        let mut m = InProcessModule::new(Module::with_rng(Prg::new(Block(3))));
        let hello = match &m.call(&Request::Hello { role: ModuleRole::Sender }).unwrap() {
            Response::Hello(h) => h.clone(),
            _ => unreachable!(),
        };
        let mut bad = hello;
        bad[5] ^= 1;
        a.send(&bad).unwrap();
        let peer = a.recv().unwrap();
        let r = m.call(&Request::PeerHello { hello: peer });
        drop(a);
        r.is_err()
    });
    let mut r = InProcessModule::new(Module::with_rng(Prg::new(Block(4))));
    let er = establish(&mut r, &mut b, ModuleRole::Receiver).unwrap_err();
    assert!(er.to_string().contains("attestation") || er.to_string().contains("disconnected"), "{er}");
    h.join().unwrap();
}

#[test]
fn out_of_process_module_counts_crossings_and_bytes() {
    let path = std::path::Path::new(env!("CARGO_BIN_EXE_hush-tee-module"));
    let (mut a, mut b) = MemChannel::pair();
    let p2 = path.to_path_buf();
    let h = thread::spawn(move || {
        let mut m = OutOfProcessModule::spawn_path(&p2).unwrap();
        establish(&mut m, &mut a, ModuleRole::Sender).unwrap();
        m
    });
    let mut r = OutOfProcessModule::spawn_path(path).unwrap();
    establish(&mut r, &mut b, ModuleRole::Receiver).unwrap();
    let mut s = h.join().unwrap();
    assert_eq!(s.stats().crossings, 3);
    assert!(r.describe().contains(hush_tee::SIMULATED_NOTE));
    let (delta, v) = sender_init(&mut s, 256);
    let w = receiver_init(&mut r, 256);
    for (vi, wi) in v.iter().zip(&w) {
        assert_eq!(*wi, *vi ^ delta.and_bit(wi.lsb()));
    }
    let st = r.stats();
    assert_eq!(st.crossings, 4);
    assert!(st.bytes_from_module >= 256 * 16);
    check_batch(&mut s, &mut r, 0, 50, 8, delta);
    assert_eq!(r.stats().crossings, 4 + 7);
    // The module process itself refuses a replayed dealing batch.
    let req = hush_2pc::deal::triples::BitTriples::request(0, 64);
    deal(&mut r, req.clone()).unwrap();
    let e = deal(&mut r, req).unwrap_err().to_string();
    assert!(e.contains("already dealt"), "{e}");
}

fn deal(m: &mut dyn TrustedModule, req: hush_deal::DealRequest) -> hush_tee::Result<Vec<u8>> {
    match m.call(&Request::Deal(req))? {
        Response::Dealt(ref b) => Ok(b.clone()),
        r => panic!("unexpected {r:?}"),
    }
}

/// The module, not the host, keeps dealing batches fresh: per dealing
/// kind a batch number is dealt once and must increase; both modules still
/// derive matching correlations for the batches they deal.
#[test]
fn replayed_deal_batches_are_refused() {
    use hush_2pc::deal::tami::{Flavor, TamiShape, TamiTables};
    use hush_2pc::deal::triples::{ArithTriples, BitTriples, TripleShare};
    use hush_fss::deal::FssKeys;
    let (mut s, mut r) = pair_in_process(41);
    let tr = |batch| ArithTriples::request(batch, 16, 64);
    let (a0, b0) = (deal(&mut s, tr(0)).unwrap(), deal(&mut r, tr(0)).unwrap());
    let check = |a: &[u8], b: &[u8]| {
        let (ta, tb) = (TripleShare::from_bytes(a, 16).unwrap(), TripleShare::from_bytes(b, 16).unwrap());
        for i in 0..16 {
            assert_eq!(ta.c[i].wrapping_add(tb.c[i]), ta.a[i].wrapping_add(tb.a[i]).wrapping_mul(ta.b[i].wrapping_add(tb.b[i])));
        }
    };
    check(&a0, &b0);
    // The same batch again — same or other parameters — is refused on both sides.
    for m in [&mut s as &mut dyn TrustedModule, &mut r] {
        let e = deal(m, tr(0)).unwrap_err().to_string();
        assert!(e.contains("already dealt"), "{e}");
        assert!(deal(m, ArithTriples::request(0, 17, 32)).is_err());
    }
    // Gaps are fine; going back is not.
    let (a5, b5) = (deal(&mut s, tr(5)).unwrap(), deal(&mut r, tr(5)).unwrap());
    check(&a5, &b5);
    assert_ne!(a5, a0);
    assert!(deal(&mut s, tr(3)).is_err() && deal(&mut r, tr(4)).is_err());
    // A refused (malformed) request does not consume its batch number.
    assert!(deal(&mut s, ArithTriples::request(6, 0, 64)).is_err());
    assert!(deal(&mut s, tr(6)).is_ok());
    // Counters are per kind: TAMI batch 0 is still fresh, once.
    let t = |batch| TamiTables::request(batch, 70, &TamiShape::new(32, 4, 8, Flavor::Relu));
    deal(&mut r, t(0)).unwrap();
    let e = deal(&mut r, t(0)).unwrap_err().to_string();
    assert!(e.contains("2pc/tami batch 0 already dealt"), "{e}");
    assert!(deal(&mut r, TamiTables::request(0, 70, &TamiShape::new(16, 3, 8, Flavor::Millionaire))).is_err());
    deal(&mut r, t(1)).unwrap();
    // FSS and bit triples likewise.
    deal(&mut s, BitTriples::request(2, 128)).unwrap();
    assert!(deal(&mut s, BitTriples::request(2, 128)).is_err());
    let f = FssKeys::request(9, 4, &hush_fss::deal::FssShape { bits: 32, gate: hush_fss::deal::FssGate::Relu });
    deal(&mut s, f.clone()).unwrap();
    assert!(deal(&mut s, f).is_err());
}
