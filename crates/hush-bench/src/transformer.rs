//! `hush bench nonlinear --op gelu|softmax|layernorm --shape AxBxC`: one
//! transformer operator ([`hush_2pc::transformer`]) along the last axis of
//! the shape, both parties as two threads of this process.
//!
//! Phases, timed separately: `setup_s` (seed agreement with the module, or
//! joining the dealer's session), `plan_s` (the operator run in plan mode
//! on zeros to list what it consumes: a function of the shapes and
//! parameters only, computed once per shape and reusable for every input —
//! the counterpart of SPU's compilation, `compile_s`, which SPU's `wall_s`
//! excludes too; records before the deal7 branch have it inside
//! `offline_s`),
//! `offline_s` (the operator's plan dealt:
//! module crossings or dealer requests, no party-to-party traffic),
//! `wall_s` = `online_s` (the operator itself, both parties, from a
//! barrier to the later party's end) with its `bytes` and `rounds`. The
//! result is checked element by element against f64 within the operator's
//! documented error bound (`max_abs_err`, `err_bound`). Inputs are uniform
//! on a documented range per operator (`input_range`), from a fixed public
//! seed. The ring is ℓ = 64 for these operators (their powers need it);
//! `--frac` sets the fraction bits (default 12).
//!
//! `--mode interactive` has no module and no dealer: the parties make every
//! correlation with each other over COTs from `--source` (iknp, ferret,
//! silent) by `hush_2pc::interactive`, comparisons by CrypTFlow2 (`cf2`).
//! Its `offline_s` is that traffic (`offline_bytes`, `offline_rounds`),
//! `total_s` = offline + online; `setup_s` is the COT source's setup.
//!
//! `--mode dealer` starts a dealer service in this process (TLS on
//! loopback): it competes for the same cores, and its link is plaintext
//! loopback TCP under TLS, not a separate host.

use crate::nonlinear::NonlinearArgs;
use crate::{connect_pair, machine_note, Record, Transport};
use hush_2pc::nonlinear::Proto;
use hush_2pc::share::{ArithShare, FixedPoint};
use hush_2pc::tee::Dealer;
use hush_2pc::transformer::{gelu, layernorm, softmax, Ctx};
use hush_2pc::{Error, Result};
use hush_primitives::{Block, Prg};
use hush_transport::{Channel, Cost};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Instant;

/// The operators this harness runs.
pub const OPS: [&str; 3] = ["gelu", "softmax", "layernorm"];

/// Parses `AxBxC` into its dimensions.
pub fn parse_shape(s: &str) -> Result<Vec<usize>> {
    let d: Vec<usize> = s
        .split('x')
        .map(|p| p.trim().parse::<usize>().map_err(|_| Error::Invalid(format!("--shape {s}: expected dimensions like 12x128x128"))))
        .collect::<Result<_>>()?;
    if d.is_empty() || d.contains(&0) || d.iter().try_fold(1usize, |a, b| a.checked_mul(*b)).is_none_or(|n| n > 1 << 24) {
        return Err(Error::Invalid(format!("--shape {s}: dimensions must be ≥ 1, at most 2^24 elements")));
    }
    Ok(d)
}

fn input_range(op: &str) -> (f64, f64) {
    match op {
        "gelu" => (-6.0, 6.0),
        "softmax" => (-8.0, 8.0),
        _ => (-4.0, 4.0),
    }
}

struct PartyOut {
    setup_s: f64,
    /// Planning the operator (running it in plan mode on zeros: a function
    /// of the shapes and parameters only, computed once per shape), timed
    /// apart like SPU's `compile_s`: not in `offline_s` nor `total_s`.
    plan_s: f64,
    offline_s: f64,
    start: Instant,
    end: Instant,
    online: Cost,
    offline: Cost,
    dealt: u64,
    crossings: u64,
    plan_items: usize,
    out: Vec<u64>,
}

fn run_op(op: &str, c: &mut Ctx, ch: &mut dyn Channel, x: &ArithShare, len: usize, bound: Option<f64>) -> Result<ArithShare> {
    match op {
        "gelu" => match bound {
            Some(b) => gelu::gelu_within(c, ch, x, b),
            None => gelu::gelu(c, ch, x),
        },
        "softmax" => match bound {
            Some(b) => softmax::softmax_within(c, ch, x, len, b),
            None => softmax::softmax(c, ch, x, len),
        },
        _ => match bound {
            // as the encoder graphs run it: inputs proven within ±2^11 skip the clip
            Some(b) => layernorm::layernorm_within(c, ch, x, len, 1e-5, None, None, b),
            None => layernorm::layernorm(c, ch, x, len, 1e-5, None, None),
        },
    }
}

/// One module shared by a party's online context and its dealing thread
/// (`--overlap`): calls are serialised by the lock; the online context
/// never deals.
#[derive(Clone)]
struct Shared(Arc<Mutex<Box<dyn hush_tee::TrustedModule>>>);

impl hush_tee::TrustedModule for Shared {
    fn call(&mut self, req: &hush_tee::Request) -> hush_tee::Result<hush_tee::Response> {
        self.0.lock().map_err(|_| hush_tee::Error::Process("module lock poisoned".into()))?.call(req)
    }
    fn stats(&self) -> hush_tee::ModuleStats {
        self.0.lock().map(|m| m.stats()).unwrap_or_default()
    }
    /// Forwarded, so that `--overlap` with an in-process module takes the
    /// direct path as the prefilled run does (same shares, see
    /// `hush_tee::deal::handle_into`).
    fn deal_into(&mut self, req: &hush_tee::deal::DealRequest, sink: &mut dyn std::any::Any) -> hush_tee::Result<Option<usize>> {
        self.0.lock().map_err(|_| hush_tee::Error::Process("module lock poisoned".into()))?.deal_into(req, sink)
    }
    fn describe(&self) -> String {
        self.0.lock().map(|m| m.describe()).unwrap_or_else(|_| "module (poisoned)".into())
    }
}

/// Plan pieces the dealing thread of `--overlap` may run ahead of the
/// operator (`HUSH_DEAL_AHEAD`, 1–64, for measurements; the correlations
/// and their order do not depend on it).
fn deal_ahead() -> usize {
    std::env::var("HUSH_DEAL_AHEAD").ok().and_then(|v| v.parse::<usize>().ok()).filter(|v| (1..=64).contains(v)).unwrap_or(4)
}

/// `--overlap` (tee and dealer modes): the plan is dealt need by need on a
/// dealing thread of this party, sharing its module, while the operator
/// runs on what has been dealt ([`Ctx::install_feed`]). Both parties deal
/// the same plan in the same order, so the batch numbers and every
/// correlation are those of the prefilled run; only their timing moves.
/// Timed from the barrier to the end of the operator: `wall_s` is the tee
/// total, dealing included (planning, before the barrier, is `plan_s`).
#[allow(clippy::too_many_arguments)]
fn party_overlap(a: &NonlinearArgs, proto: Proto, fx: FixedPoint, len: usize, share: Vec<u64>, ch: &mut dyn Channel, p: u8, module: Option<Box<dyn hush_tee::TrustedModule>>, barrier: Arc<Barrier>) -> Result<PartyOut> {
    crate::pin_party(p as usize);
    let ts = Instant::now();
    let tee = module.is_none();
    let m: Box<dyn hush_tee::TrustedModule> = match module {
        Some(m) => m,
        None => Box::new(hush_tee::InProcessModule::new(hush_tee::Module::new().with_kinds(hush_2pc::deal::kinds()))),
    };
    let mut shared = Shared(Arc::new(Mutex::new(m)));
    if tee {
        let role = if p == 0 { hush_tee::ModuleRole::Sender } else { hush_tee::ModuleRole::Receiver };
        hush_tee::establish(&mut shared, ch, role)?;
    }
    let mut c = Ctx::new(p, proto, Dealer::new(Box::new(shared.clone())), fx)?;
    let setup_s = ts.elapsed().as_secs_f64();
    (c.k, c.arity, c.one_round) = (a.k(proto), a.arity, !a.no_one_round);
    let x = ArithShare::new(fx.ring, share);
    let tp = Instant::now();
    let zeros = ArithShare::zeros(fx.ring, x.len());
    let plan = c.plan(|c, ch| run_op(&a.op, c, ch, &zeros, len, a.bound))?;
    let plan_s = tp.elapsed().as_secs_f64();
    barrier.wait();
    let c1 = ch.cost();
    let start = Instant::now();
    let (tx, rx) = std::sync::mpsc::sync_channel::<Result<hush_2pc::transformer::ctx::Prefilled>>(deal_ahead());
    c.install_feed(rx)?;
    let (k, arity, one_round) = (c.k, c.arity, c.one_round);
    let (y, end, dealt) = std::thread::scope(|sc| -> Result<_> {
        let plan = &plan;
        let worker = sc.spawn(move || -> Result<u64> {
            crate::unpin();
            let mut d = Ctx::new(p, proto, Dealer::new(Box::new(shared)), fx)?;
            (d.k, d.arity, d.one_round) = (k, arity, one_round);
            for need in plan {
                let r = d.deal_plan(std::slice::from_ref(need));
                let stop = r.is_err();
                if tx.send(r).is_err() || stop {
                    break; // the operator stopped, or dealing failed
                }
            }
            Ok(d.dealer().map_or(0, |d| d.dealt_bytes))
        });
        let y = run_op(&a.op, &mut c, ch, &x, len, a.bound);
        let end = Instant::now();
        let dealt = worker.join().map_err(|_| Error::Bench("the dealing thread panicked".into()))?;
        Ok((y?, end, dealt?))
    })?;
    let online = ch.cost() - c1;
    c.lazy().map_err(|e| Error::Bench(format!("dealt items left unused: {e}")))?;
    let crossings = c.dealer().map_or(0, |d| d.stats().crossings);
    Ok(PartyOut { setup_s, plan_s, offline_s: 0.0, start, end, online, offline: Cost::default(), dealt, crossings, plan_items: plan.len(), out: y.v.clone() })
}

#[allow(clippy::too_many_arguments)]
fn party(a: &NonlinearArgs, proto: Proto, fx: FixedPoint, len: usize, share: Vec<u64>, ch: &mut dyn Channel, p: u8, module: Option<Box<dyn hush_tee::TrustedModule>>, barrier: Arc<Barrier>) -> Result<PartyOut> {
    if a.overlap {
        return party_overlap(a, proto, fx, len, share, ch, p, module, barrier);
    }
    crate::pin_party(p as usize);
    let ts = Instant::now();
    let mut c = if a.mode == "interactive" {
        let cfg = hush_correlations::registry::SourceConfig::named(&a.source);
        let ot = hush_2pc::beaver::OtSession::setup(ch, p, &cfg, &mut Prg::from_os())?;
        Ctx::new_interactive(p, ot, fx)?
    } else {
        let dealer = match module {
            Some(m) => Dealer::new(m),
            None => Dealer::in_process(ch, p)?,
        };
        Ctx::new(p, proto, dealer, fx)?
    };
    let setup_s = ts.elapsed().as_secs_f64();
    c.k = a.k(proto);
    if !c.is_interactive() {
        c.arity = a.arity;
    }
    c.one_round = !a.no_one_round;
    let x = ArithShare::new(fx.ring, share);
    let tp = Instant::now();
    let zeros = ArithShare::zeros(fx.ring, x.len());
    let plan = c.plan(|c, ch| run_op(&a.op, c, ch, &zeros, len, a.bound))?;
    let plan_s = tp.elapsed().as_secs_f64();
    let c0 = ch.cost();
    let t0 = Instant::now();
    c.prefill_on(ch, &plan)?;
    let offline_s = t0.elapsed().as_secs_f64();
    let offline = ch.cost() - c0;
    barrier.wait();
    let c1 = ch.cost();
    let start = Instant::now();
    let y = run_op(&a.op, &mut c, ch, &x, len, a.bound)?;
    let end = Instant::now();
    let online = ch.cost() - c1;
    if c.pending() != 0 {
        return Err(Error::Bench(format!("{} dealt items left unused", c.pending())));
    }
    let (dealt, crossings) = c.dealer().map_or((0, 0), |d| (d.dealt_bytes, d.stats().crossings));
    Ok(PartyOut { setup_s, plan_s, offline_s, start, end, online, offline, dealt, crossings, plan_items: plan.len(), out: y.v.clone() })
}

/// Runs one transformer operator and returns its record.
pub fn bench_transformer(a: &NonlinearArgs) -> Result<Record> {
    let proto = match a.proto.as_str() {
        // interactive mode compares with cf2 whatever --proto says
        _ if a.mode == "interactive" => Proto::Cf2,
        "tami" => Proto::Tami,
        "fss" => Proto::Fss,
        "cf2" => return Err(Error::Invalid(hush_2pc::transformer::ctx::NOT_INTERACTIVE.into())),
        o => return Err(Error::Invalid(format!("unknown --proto {o} (tami, fss)"))),
    };
    if a.overlap && !matches!(a.mode.as_str(), "tee" | "dealer") {
        return Err(Error::Invalid("--overlap applies to the tee and dealer modes (dealing on a thread beside the operator)".into()));
    }
    if a.stream > 0 {
        return Err(Error::Invalid("--stream applies to the fss and tami comparisons; the transformer operators take --overlap".into()));
    }
    let shape = parse_shape(a.shape.as_deref().ok_or_else(|| Error::Invalid(format!("--op {} needs --shape AxBxC", a.op)))?)?;
    let len = *shape.last().expect("nonempty");
    let n: usize = shape.iter().product();
    let fx = FixedPoint::new(64, a.frac)?;
    let ring = fx.ring;
    // Inputs: uniform on the operator's range, shared with a uniform mask.
    let (lo, hi) = input_range(&a.op);
    if let Some(b) = a.bound {
        if !matches!(a.op.as_str(), "gelu" | "softmax" | "layernorm") || !(b >= lo.abs().max(hi.abs())) {
            return Err(Error::Invalid(format!("--bound applies to gelu, softmax and layernorm and must cover the input range [{lo}, {hi}]")));
        }
    }
    let mut common = Prg::new(Block(0xfeed));
    let xs: Vec<f64> = (0..n).map(|_| lo + (hi - lo) * (common.next_u64() >> 11) as f64 / (1u64 << 53) as f64).collect();
    let enc: Vec<u64> = xs.iter().map(|v| fx.encode(*v)).collect();
    let s1: Vec<u64> = (0..n).map(|_| common.next_u64()).collect();
    let s0: Vec<u64> = enc.iter().zip(&s1).map(|(x, r)| ring.sub(*x, *r)).collect();
    let profile = crate::profile(&a.net).map_err(|e| Error::Invalid(e.to_string()))?;
    let transport = Transport::by_name(&a.transport).ok_or_else(|| Error::Invalid("--transport mem or tcp".into()))?;
    let (mut ca, mut cb) = connect_pair(transport, profile).map_err(|e| Error::Bench(e.to_string()))?;
    // dealer mode: a dealer service in this process, both parties join one session
    let mut dealer_handle = None;
    let (m0, m1): (Option<Box<dyn hush_tee::TrustedModule>>, Option<Box<dyn hush_tee::TrustedModule>>) = match a.mode.as_str() {
        "tee" | "interactive" => (None, None),
        "dealer" => {
            use hush_tee::dealer::{self, DealerConfig};
            use hush_tee::{DealerModule, ModuleRole};
            use hush_transport::{Identity, LinkSecurity, PeerCheck, TlsSettings};
            let ts = Instant::now();
            let di = Arc::new(Identity::generate().map_err(|e| Error::Bench(e.to_string()))?);
            let pi = Arc::new(Identity::generate().map_err(|e| Error::Bench(e.to_string()))?);
            let fp = di.fingerprint();
            let dl = LinkSecurity::Tls(TlsSettings { identity: di, peer: PeerCheck::AnyPeer, require_client_cert: false });
            let pl = LinkSecurity::Tls(TlsSettings { identity: pi, peer: PeerCheck::Pinned(vec![fp]), require_client_cert: false });
            let h = dealer::serve("127.0.0.1:0", DealerConfig::new(dl, hush_2pc::deal::kinds()), Arc::new(|_| {})).map_err(|e| Error::Bench(e.to_string()))?;
            let sid = dealer::new_session_id();
            let m0 = DealerModule::connect(&h.addr.to_string(), &pl, &sid, ModuleRole::Sender)?;
            let m1 = DealerModule::connect(&h.addr.to_string(), &pl, &sid, ModuleRole::Receiver)?;
            let _ = ts;
            dealer_handle = Some(h);
            (Some(Box::new(m0)), Some(Box::new(m1)))
        }
        "silent" => return Err(Error::Invalid(hush_2pc::transformer::ctx::NOT_INTERACTIVE.into())),
        o => return Err(Error::Invalid(format!("unknown --mode {o} (tee, dealer, interactive)"))),
    };
    // before the parties pin themselves: the dealing's rayon workers on
    // every core (see `start_rayon_pool`)
    crate::start_rayon_pool();
    let barrier = Arc::new(Barrier::new(2));
    let (b1, b2) = (barrier.clone(), barrier);
    let (a1, a2) = (a.clone(), a.clone());
    let t0 = std::thread::spawn(move || party(&a1, proto, fx, len, s0, &mut *ca, 0, m0, b1));
    let t1 = std::thread::spawn(move || party(&a2, proto, fx, len, s1, &mut *cb, 1, m1, b2));
    let s = t0.join().map_err(|_| Error::Bench("party 0 panicked".into()))??;
    let r = t1.join().map_err(|_| Error::Bench("party 1 panicked".into()))??;
    drop(dealer_handle);
    // Check against f64 within the documented bound.
    let got: Vec<f64> = s.out.iter().zip(&r.out).map(|(p, q)| fx.decode(ring.add(*p, *q))).collect();
    let xd: Vec<f64> = enc.iter().map(|v| fx.decode(*v)).collect();
    let (want, bound) = match a.op.as_str() {
        "gelu" => (xd.iter().map(|v| gelu::gelu_f64(*v)).collect::<Vec<_>>(), gelu::GELU_ERR_F12),
        "softmax" => (softmax::softmax_f64(&xd, len), softmax::SOFTMAX_ERR_F12),
        _ => (layernorm::layernorm_f64(&xd, len, 1e-5), layernorm::LN_ERR_F12),
    };
    // the documented bounds are for f = 12; scale the ulp part for other f
    let bound = bound + 4.0 * ((-(a.frac as f64)).exp2() - 1.0 / 4096.0).max(0.0);
    let max_err = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0, f64::max);
    if !(max_err <= bound) {
        return Err(Error::Bench(format!("result check failed: {} max error {max_err} exceeds the documented {bound}", a.op)));
    }
    let wall = s.end.max(r.end).duration_since(s.start.min(r.start)).as_secs_f64();
    let bytes = s.online.bytes_sent + r.online.bytes_sent;
    let mut rec = Record::new("nonlinear");
    let shape_s = shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x");
    rec.set("op", a.op.as_str())
        .set("shape", shape_s)
        .set("n", n as u64)
        .set("proto", proto.name())
        .set("mode", a.mode.as_str())
        .set("one_round_products", !a.no_one_round)
        .set("bits", 64u64)
        .set("frac", a.frac as u64)
        .set("net", a.net.as_str())
        .set("transport", transport.name())
        .set("wall_s", wall)
        .set("online_s", wall)
        .set("bytes", bytes)
        .set("rounds", s.online.rounds.max(r.online.rounds) as u64)
        .set("setup_s", s.setup_s.max(r.setup_s))
        .set("offline_s", s.offline_s.max(r.offline_s))
        .set("offline_bytes", s.offline.bytes_sent + r.offline.bytes_sent)
        .set("offline_rounds", s.offline.rounds.max(r.offline.rounds) as u64)
        .set("party0_offline_bytes_sent", s.offline.bytes_sent)
        .set("party1_offline_bytes_sent", r.offline.bytes_sent)
        .set("total_s", s.offline_s.max(r.offline_s) + wall)
        .set("overlap", a.overlap)
        .set("dealt_bytes", s.dealt + r.dealt)
        .set("dealt_bytes_party0", s.dealt)
        .set("dealt_bytes_party1", r.dealt)
        .set("module_crossings", s.crossings + r.crossings)
        .set("plan_items", s.plan_items as u64)
        .set("plan_s", s.plan_s.max(r.plan_s))
        .set("party0_bytes_sent", s.online.bytes_sent)
        .set("party1_bytes_sent", r.online.bytes_sent)
        .set("input_range", format!("[{lo}, {hi}]"))
        .set("abs_bound", a.bound.map_or("none".to_string(), |b| b.to_string()).as_str())
        .set("max_abs_err", max_err)
        .set("err_bound", bound)
        .set("checked", n as u64);
    if a.op != "gelu" {
        rec.set("axis_len", len as u64);
    }
    if a.overlap {
        rec.set("deal_ahead", deal_ahead() as u64).set(
            "overlap_note",
            "dealing on a thread per party beside the operator, need by need: wall_s = online_s = total_s includes the dealing; offline_s is 0; planning is plan_s",
        );
    }
    if proto == Proto::Tami {
        rec.set("k", a.k(proto) as u64).set("arity", a.arity as u64);
    }
    if a.mode == "interactive" {
        rec.set("source", a.source.as_str()).set("k", a.k(proto) as u64);
    }
    rec.set(
        "tee_note",
        if a.mode == "interactive" {
            "interactive mode: no module and no dealer; correlations from COTs between the parties (offline_s, offline_bytes)"
        } else if a.mode == "dealer" {
            "dealer mode: a dealer service in this process (TLS on loopback), sharing the cores"
        } else {
            "tee mode: trusted module simulated — gives no hardware protection"
        },
    );
    rec.set("machine", machine_note());
    crate::machine_fields(&mut rec);
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(op: &str, shape: &str, proto: &str, mode: &str, overlap: bool) -> NonlinearArgs {
        NonlinearArgs { op: op.into(), shape: Some(shape.into()), proto: proto.into(), mode: mode.into(), overlap, bound: Some(8.0), ..Default::default() }
    }

    /// `--overlap` runs the same plan (items, dealt bytes, online bytes and
    /// rounds) as the prefilled run and passes the harness's check against
    /// f64; it is refused where there is no module to share.
    #[test]
    fn overlapped_dealing_runs_the_same_plan() {
        for (op, shape, proto) in [("softmax", "2x8x16", "tami"), ("gelu", "4x32", "fss"), ("gelu", "4x32", "tami")] {
            let a = bench_transformer(&args(op, shape, proto, "tee", false)).unwrap();
            let b = bench_transformer(&args(op, shape, proto, "tee", true)).unwrap();
            for k in ["plan_items", "dealt_bytes", "bytes", "rounds", "checked"] {
                assert_eq!(a.f64(k), b.f64(k), "{op} {proto}: {k}");
            }
            assert_eq!(b.f64("offline_s"), 0.0);
            assert!(b.f64("total_s") > 0.0 && b.f64("plan_s") > 0.0);
        }
        let e = bench_transformer(&args("gelu", "4x32", "tami", "interactive", true)).unwrap_err();
        assert!(e.to_string().contains("--overlap"), "{e}");
    }
}
