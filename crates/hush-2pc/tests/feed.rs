//! `Ctx::install_feed`: an operator run on correlations a dealing thread
//! deals while it runs (sharing the party's module) gives bit for bit the
//! output shares of the same operator on the whole plan prefilled, with the
//! same module seed — the same correlations in the same order — in both
//! comparison families; a dealing error reaches the operator as an error,
//! and an item dealt but never used is reported.

use hush_2pc::nonlinear::Proto;
use hush_2pc::share::{share_arith, ArithShare, FixedPoint};
use hush_2pc::tee::Dealer;
use hush_2pc::transformer::ctx::Prefilled;
use hush_2pc::transformer::{gelu, softmax, Ctx};
use hush_primitives::{Block, Prg};
use hush_tee::{InProcessModule, Module, ModuleRole, ModuleStats, Request, Response, TrustedModule};
use hush_transport::{Channel, MemChannel};
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex};

fn fx() -> FixedPoint {
    FixedPoint::new(64, 12).unwrap()
}

#[derive(Clone)]
struct Shared(Arc<Mutex<InProcessModule>>);
impl TrustedModule for Shared {
    fn call(&mut self, req: &Request) -> hush_tee::Result<Response> {
        self.0.lock().unwrap().call(req)
    }
    fn stats(&self) -> ModuleStats {
        self.0.lock().unwrap().stats()
    }
    fn describe(&self) -> String {
        "shared test module".into()
    }
}

fn module(party: u8) -> Shared {
    let role = if party == 0 { ModuleRole::Sender } else { ModuleRole::Receiver };
    Shared(Arc::new(Mutex::new(InProcessModule::new(Module::with_session_seed(role, &[9; 32]).with_kinds(hush_2pc::deal::kinds())))))
}

type Op = fn(&mut Ctx, &mut dyn Channel, &ArithShare) -> hush_2pc::Result<ArithShare>;

fn ops() -> Vec<(&'static str, Op)> {
    vec![
        ("softmax", |c, ch, x| softmax::softmax_within(c, ch, x, 8, 6.0)),
        ("gelu", |c, ch, x| gelu::gelu_within(c, ch, x, 6.0)),
    ]
}

/// One party's output: the whole plan prefilled, or fed by a dealing thread
/// (`ahead` pieces of slack, one need per piece).
fn party(ch: &mut dyn Channel, party: u8, proto: Proto, x: ArithShare, op: Op, feed: Option<usize>) -> Vec<u64> {
    let m = module(party);
    let mut c = Ctx::new(party, proto, Dealer::new(Box::new(m.clone())), fx()).unwrap();
    let zeros = ArithShare::zeros(fx().ring, x.len());
    let plan = c.plan(|c, ch| op(c, ch, &zeros)).unwrap();
    assert!(plan.len() > 2, "a plan of several needs");
    let Some(ahead) = feed else {
        c.prefill(&plan).unwrap();
        let y = op(&mut c, ch, &x).unwrap();
        assert_eq!(c.pending(), 0);
        return y.v.clone();
    };
    let (tx, rx) = sync_channel::<hush_2pc::Result<Prefilled>>(ahead);
    c.install_feed(rx).unwrap();
    let y = std::thread::scope(|sc| {
        let plan = &plan;
        sc.spawn(move || {
            let mut d = Ctx::new(party, proto, Dealer::new(Box::new(m)), fx()).unwrap();
            for need in plan {
                if tx.send(d.deal_plan(std::slice::from_ref(need))).is_err() {
                    break;
                }
            }
        });
        op(&mut c, ch, &x).unwrap()
    });
    c.lazy().unwrap();
    y.v.clone()
}

fn run(proto: Proto, op: Op, feed: Option<usize>) -> (Vec<u64>, Vec<u64>) {
    let mut g = Prg::new(Block(31));
    let xs: Vec<u64> = (0..32).map(|_| fx().encode((g.next_u64() % 10_000) as f64 / 1000.0 - 5.0)).collect();
    let (s0, s1) = share_arith(fx().ring, &xs, &mut Prg::new(Block(32)));
    let (mut ca, mut cb) = MemChannel::pair();
    let t = std::thread::spawn(move || party(&mut cb, 1, proto, s1, op, feed));
    let a = party(&mut ca, 0, proto, s0, op, feed);
    (a, t.join().unwrap())
}

#[test]
fn fed_operators_match_the_prefilled_run_bit_for_bit() {
    for proto in [Proto::Tami, Proto::Fss] {
        for (name, op) in ops() {
            let want = run(proto, op, None);
            for ahead in [1, 3] {
                assert_eq!(run(proto, op, Some(ahead)), want, "{name} {proto:?} fed {ahead} ahead");
            }
        }
    }
}

#[test]
fn a_dealing_error_reaches_the_operator_and_unused_items_are_reported() {
    let x = ArithShare::zeros(fx().ring, 16);
    let mut c = Ctx::new(0, Proto::Tami, Dealer::new(Box::new(module(0))), fx()).unwrap();
    let (tx, rx) = sync_channel::<hush_2pc::Result<Prefilled>>(2);
    c.install_feed(rx).unwrap();
    tx.send(Err(hush_2pc::Error::Invalid("the dealing thread failed".into()))).unwrap();
    let (mut ch, _peer) = MemChannel::pair();
    let e = c.trunc(&mut ch, &x, 12).unwrap_err();
    assert!(e.to_string().contains("dealing thread failed"), "{e}");
    // the feed ended (sender dropped) before the operator's need: exhausted
    drop(tx);
    let e = c.trunc(&mut ch, &x, 12).unwrap_err();
    assert!(e.to_string().contains("exhausted"), "{e}");
    // a piece delivered but never used is unconsumed at the end
    let mut d = Ctx::new(0, Proto::Tami, Dealer::new(Box::new(module(0))), fx()).unwrap();
    let mut p = Ctx::new(0, Proto::Tami, Dealer::new(Box::new(module(0))), fx()).unwrap();
    let plan = p.plan(|c, ch| c.trunc(ch, &x, 12)).unwrap();
    let (tx, rx) = sync_channel::<hush_2pc::Result<Prefilled>>(2);
    c.lazy().unwrap();
    c.install_feed(rx).unwrap();
    tx.send(d.deal_plan(&plan)).unwrap();
    drop(tx);
    let e = c.lazy().unwrap_err();
    assert!(e.to_string().contains("not consumed"), "{e}");
}
