//! Fault injection (see `hush_transport::faulty`) for the three nonlinear
//! families: cf2 (over IKNP), tami and fss (modules in process, seed
//! agreement included). Each run sets up a session and computes DReLU and
//! ReLU of 64 shared 32-bit values while one message is dropped,
//! duplicated, reordered, truncated, delayed, corrupted above or below the
//! frame checksum, or the link is closed. Invariant: both parties end within
//! the watchdog with the plaintext result or an error; never a panic or a
//! hang; a truncation, close, delay or wire corruption never yields a wrong
//! output. `HUSH_FAULT_SCHEDULES` sets the number of schedules (default 50).

mod common;
use common::edge_values;
use hush_2pc::beaver::OtSession;
use hush_2pc::nonlinear::{Proto, Session};
use hush_2pc::share::share_arith;
use hush_2pc::tee::Dealer;
use hush_correlations::registry::SourceConfig;
use hush_primitives::{Block, Prg, Ring};
use hush_transport::faulty::{campaign_pair, schedules_from_env, Mix};
use hush_transport::Channel;
use std::sync::Arc;
use std::time::Duration;

const BITS: u32 = 32;
const N: usize = 64;

type Out = (Vec<u64>, Vec<u64>);

fn party(ch: &mut dyn Channel, p: u8, proto: Proto, x: &[u64]) -> Result<Out, String> {
    let ring = Ring::new(BITS).unwrap();
    let e = |e: hush_2pc::Error| e.to_string();
    let mut ses = match proto {
        Proto::Cf2 => {
            let ot = OtSession::setup(ch, p, &SourceConfig::named("iknp"), &mut Prg::new(Block(p as u128 + 9))).map_err(e)?;
            Session::interactive(p, ot)
        }
        _ => Session::tee(p, proto, Dealer::in_process(ch, p).map_err(e)?),
    };
    let s = hush_2pc::share::ArithShare { ring, v: x.to_vec() };
    let d = ses.drelu(ch, &s).map_err(e)?;
    let dv = (0..d.n).map(|i| d.get(i) as u64).collect();
    let r = ses.relu(ch, &s).map_err(e)?;
    Ok((dv, r.v.clone()))
}

fn campaign(proto: Proto, seed0: u64) {
    let ring = Ring::new(BITS).unwrap();
    let xs = edge_values(BITS, N, 7);
    let (s0, s1) = share_arith(ring, &xs, &mut Prg::new(Block(3)));
    let (s0, s1) = (Arc::new(s0.v.clone()), Arc::new(s1.v.clone()));
    let tally = campaign_pair(
        schedules_from_env(50),
        seed0,
        &Mix::default(),
        Duration::from_secs(1),
        Duration::from_secs(20),
        move |ch: &mut dyn Channel| party(ch, 0, proto, &s0),
        move |ch: &mut dyn Channel| party(ch, 1, proto, &s1),
        |a, b| {
            let (a, b) = (a?, b?);
            if a.0.len() != N || b.0.len() != N || a.1.len() != N || b.1.len() != N {
                return Some(false);
            }
            Some((0..N).all(|i| {
                let pos = !ring.msb(xs[i]);
                (a.0[i] ^ b.0[i] == pos as u64) && ring.add(a.1[i], b.1[i]) == if pos { xs[i] } else { 0 }
            }))
        },
    );
    let name = proto.name();
    eprint!("{}", tally.report(name));
    assert!(tally.violations.is_empty(), "{}", tally.report(name));
}

#[test]
fn faults_cf2() {
    campaign(Proto::Cf2, 10_000);
}

#[test]
fn faults_tami() {
    campaign(Proto::Tami, 11_000);
}

#[test]
fn faults_fss() {
    campaign(Proto::Fss, 12_000);
}
