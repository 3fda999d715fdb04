//! The client's memory budget: fit and floor, refusal before anything of
//! the client's is sent, and the measured-peak guard. (The measured peak
//! under the real heap meter is checked through the `hush` binary in
//! `crates/hush-cli/tests/client_memory.rs`.)

use crate::budget;
use crate::runtime::{self, MemProbe, Options};
use crate::{zoo, Error, Plan};
use hush_transport::{Channel, MemChannel};
use serde_json::json;
use std::sync::Arc;

fn model(name: &str) -> Arc<crate::Model> {
    Arc::new(zoo::load(name).unwrap())
}

#[test]
fn fit_stays_within_budget_and_refuses_below_the_floor() {
    for name in ["minionn-mnist", "minionn-cifar"] {
        let m = model(name);
        let plan = Plan::new(&m, Default::default()).unwrap();
        for proto in ["fss", "tami"] {
            let floor = budget::floor(&m, &plan, proto).unwrap();
            assert!(floor > 8 * m.peak_live_elems() as u64);
            for b in [floor, floor + (1 << 20), 64 << 20, 512 << 20] {
                let f = budget::fit(&m, &plan, proto, 1 << 16, 256 << 20, b).unwrap();
                assert!(f.estimate <= b, "{name} {proto}: estimate {} above budget {b}", f.estimate);
                assert!(f.chunk >= budget::MIN_CHUNK && f.chunk <= 1 << 16);
                assert_eq!(budget::client_estimate(&m, &plan, proto, f.chunk, f.predeal_mem).unwrap() + f.lookahead, f.estimate);
                // the look-ahead is granted all or nothing, before pre-dealing
                assert!(f.lookahead == 0 || f.lookahead == budget::lookahead_bytes(&plan, proto, f.chunk).unwrap());
                if b >= 64 << 20 {
                    assert!(f.lookahead > 0, "{name} {proto}: no look-ahead within {b}");
                }
            }
            // a larger budget never gets less pre-dealing
            let a = budget::fit(&m, &plan, proto, 1 << 16, 256 << 20, 64 << 20).unwrap();
            let c = budget::fit(&m, &plan, proto, 1 << 16, 256 << 20, 512 << 20).unwrap();
            assert!(c.predeal_mem >= a.predeal_mem);
            match budget::fit(&m, &plan, proto, 1 << 16, 256 << 20, floor - 1) {
                Err(Error::Memory(msg)) => assert!(msg.contains("floor") && msg.contains(name), "{msg}"),
                r => panic!("below the floor: {r:?}"),
            }
        }
    }
}

/// The HE modes pre-deal nothing, so the fit gives the nonlinear chunk the
/// whole budget left after the COT sources' batches (the largest chunk
/// whose estimate fits), where the dealt families keep half for
/// pre-dealing.
#[test]
fn he_fit_takes_the_largest_chunk_that_fits() {
    let m = model("minionn-cifar");
    let plan = Plan::new(&m, Default::default()).unwrap();
    let floor = budget::floor(&m, &plan, "cf2").unwrap();
    let mut seen_larger = false;
    for b in (0..16u64).map(|k| floor + k * (16 << 20)).chain([floor + (1 << 20), 512 << 20]) {
        let f = budget::fit(&m, &plan, "cf2", 1 << 18, 0, b).unwrap();
        assert!(f.estimate <= b && f.predeal_mem == 0 && f.lookahead == 0, "budget {b} (floor {floor}): {f:?}");
        let room = b - budget::cot_bytes(Some(b), budget::cot_reserve(&m, &plan).unwrap());
        assert!(budget::client_estimate(&m, &plan, "cf2", f.chunk, 0).unwrap() <= room);
        // the next larger chunk (if any) would not fit
        if f.chunk < 1 << 18 {
            assert!(budget::client_estimate(&m, &plan, "cf2", 2 * f.chunk, 0).unwrap() > room, "budget {b}: chunk {} is not the largest that fits", f.chunk);
        }
        // …which is more than the half-budget rule of the dealt families would allow
        let half = (10..=18).rev().map(|k| 1usize << k).find(|&c| budget::client_estimate(&m, &plan, "cf2", c, 0).unwrap() <= room / 2);
        if half.is_some_and(|h| h < f.chunk) {
            seen_larger = true;
        }
    }
    assert!(seen_larger, "no budget where the whole-budget fit chose a larger chunk");
}

/// A local run with a budget below the floor fails before any channel
/// exists.
#[test]
fn local_run_below_the_floor_is_refused() {
    let m = model("minionn-mnist");
    let x = vec![0.1; m.input_len()];
    let o = Options { max_mem: Some(1 << 20), ..Default::default() };
    match runtime::run_local(m.clone(), &m.input_shape.clone(), &x, &o, false, |_, _| {}) {
        Err(Error::Memory(msg)) => assert!(msg.contains("floor") && msg.contains("nothing was sent"), "{msg}"),
        r => panic!("expected a refusal, got {:?}", r.map(|_| ())),
    }
}

/// Against a server, a client whose budget is below the model's floor
/// sends its hello (it needs the architecture to know the floor) and
/// nothing more: no seed agreement, no input.
#[test]
fn client_below_the_floor_sends_nothing_after_its_hello() {
    let m = model("minionn-cifar");
    let (mut a, b) = MemChannel::pair();
    let header = m.header_json.clone();
    let srv = std::thread::spawn(move || {
        let hello: serde_json::Value = serde_json::from_slice(&a.recv().unwrap()).unwrap();
        assert!(hello["max_mem"].as_u64().is_some(), "the hello states the budget");
        let reply = json!({"ok": true, "bits": 37, "frac": 12, "proto": "fss", "chunk": 4096, "predeal_mem": 0, "architecture": header, "mode": "tee"});
        a.send(reply.to_string().as_bytes()).unwrap();
        // the client must not send anything else
        let next = a.recv();
        (next.is_err(), a.cost().bytes_recv)
    });
    let o = Options { max_mem: Some(2 << 20), ..Default::default() };
    match runtime::ClientSession::start(b, &o) {
        Err(Error::Memory(msg)) => assert!(msg.contains("floor"), "{msg}"),
        r => panic!("expected a refusal, got {:?}", r.map(|_| ())),
    }
    let (closed, recv) = srv.join().unwrap();
    assert!(closed, "the client sent something after its hello");
    assert!(recv < 200, "more than a hello reached the server: {recv} bytes");
}

fn huge(_: usize) -> i64 {
    1 << 40
}
fn noop(_: usize) {}

/// When the measured peak exceeds the budget mid-run (the estimate was
/// wrong), the run stops with a clear error instead of going on.
#[test]
fn measured_peak_above_the_budget_stops_the_run() {
    let m = model("minionn-mnist");
    let x = vec![0.1; m.input_len()];
    let o = Options { max_mem: Some(256 << 20), ..Default::default() };
    let probe = MemProbe { enter: noop, peak: huge, restart_peak: noop, method: "test meter: always 1 TiB" };
    match runtime::run_local_probed(m.clone(), &m.input_shape.clone(), &x, &o, false, |_, _| {}, Some(probe)) {
        Err(Error::Memory(msg)) => assert!(msg.contains("measured peak") && msg.contains("stopped"), "{msg}"),
        r => panic!("expected the guard to stop the run, got {:?}", r.map(|_| ())),
    }
}

/// Against a real server session, the server fits its chunk and
/// pre-dealing to the budget the client states, and the output is still
/// the fixed-point reference's, bit for bit.
#[test]
fn server_fits_the_session_to_the_clients_budget() {
    let m = model("minionn-mnist");
    let plan = Plan::new(&m, Default::default()).unwrap();
    let budget = 24u64 << 20;
    let fit = budget::fit(&m, &plan, "fss", 1 << 16, 256 << 20, budget).unwrap();
    assert!(fit.chunk < 1 << 16, "24 MiB should call for smaller fss chunks: {fit:?}");
    let (mut a, b) = MemChannel::pair();
    let (m2, p2) = (m.clone(), Plan::new(&m, Default::default()).unwrap());
    let srv = std::thread::spawn(move || runtime::serve_session(&mut a, &m2, &p2, &Options::default()).unwrap());
    let o = Options { max_mem: Some(budget), ..Default::default() };
    let mut s = runtime::ClientSession::start(b, &o).unwrap();
    assert_eq!(s.chunk, fit.chunk);
    assert_eq!(s.predeal_mem, fit.predeal_mem);
    assert_eq!(s.mem_fit.unwrap().estimate, fit.estimate);
    let x: Vec<f64> = (0..m.input_len()).map(|i| ((i * 7919) % 200) as f64 / 100.0 - 1.0).collect();
    let r = s.infer(&m.input_shape.clone(), &x, |_, _| {}).unwrap();
    s.close().unwrap();
    assert_eq!(srv.join().unwrap(), 1);
    assert_eq!(r.logits, crate::reference::run_f64(&plan, &x).unwrap());
}
