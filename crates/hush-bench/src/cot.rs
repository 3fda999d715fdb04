//! `hush bench cot`: n COTs from a named source, both parties in this
//! process, over loopback TCP (or memory) with an emulated network.

use crate::{connect_pair, machine_note, Error, Record, Result, Transport};
use hush_correlations::registry::{setup_receiver, setup_sender, SourceConfig};
use hush_primitives::{BitVec, Block, Prg};
use hush_transport::{Channel, Cost, NetProfile};
use std::sync::{Arc, Barrier};
use std::time::Instant;

/// COTs produced per call into the caller's buffer.
pub const BATCH: usize = 1 << 20;

/// What to run.
#[derive(Clone, Debug)]
pub struct CotBench {
    pub source: SourceConfig,
    pub n: usize,
    pub profile: NetProfile,
    pub transport: Transport,
    /// Seed for all randomness (deterministic runs); OS randomness if None.
    pub seed: Option<u64>,
}

struct PartyOut {
    setup_s: f64,
    start: Instant,
    end: Instant,
    cost_setup: Cost,
    cost: Cost,
    last: Vec<Block>,
    choices: Option<BitVec>,
    delta: Option<Block>,
}

fn rng(seed: Option<u64>, party: u64) -> Prg {
    match seed {
        Some(s) => Prg::with_nonce(Block(s as u128), party),
        None => Prg::from_os(),
    }
}

/// Runs the benchmark and checks the COT relation on the last batch.
pub fn bench_cot(cfg: &CotBench) -> Result<Record> {
    if cfg.n == 0 {
        return Err(Error::Invalid("--n must be at least 1".into()));
    }
    let (mut ca, mut cb) = connect_pair(cfg.transport, cfg.profile.clone())?;
    let barrier = Arc::new(Barrier::new(2));
    let n = cfg.n;
    let (b1, b2) = (barrier.clone(), barrier);
    let (s1, s2) = (cfg.source.clone(), cfg.source.clone());
    let seed = cfg.seed;
    let sender = std::thread::spawn(move || -> Result<PartyOut> {
        let t = Instant::now();
        let mut r = rng(seed, 0);
        let mut src = setup_sender(&s1, &mut *ca, &mut r)?;
        let setup_s = t.elapsed().as_secs_f64();
        let cost_setup = ca.cost();
        b1.wait();
        let start = Instant::now();
        let mut q = vec![Block::ZERO; n.min(BATCH)];
        let mut done = 0;
        while done < n {
            let m = (n - done).min(BATCH);
            src.send_cots(&mut *ca, &mut q[..m])?;
            done += m;
        }
        let end = Instant::now();
        let last = (n - 1) % BATCH + 1;
        q.truncate(last);
        Ok(PartyOut { setup_s, start, end, cost_setup, cost: ca.cost(), last: q, choices: None, delta: Some(src.delta()) })
    });
    let receiver = std::thread::spawn(move || -> Result<PartyOut> {
        let t = Instant::now();
        let mut r = rng(seed, 1);
        let mut src = setup_receiver(&s2, &mut *cb, &mut r)?;
        let setup_s = t.elapsed().as_secs_f64();
        let cost_setup = cb.cost();
        b2.wait();
        let start = Instant::now();
        let mut t = vec![Block::ZERO; n.min(BATCH)];
        let mut ch = BitVec::zeros(0);
        let mut done = 0;
        while done < n {
            let m = (n - done).min(BATCH);
            src.recv_cots(&mut *cb, &mut ch, &mut t[..m])?;
            done += m;
        }
        let end = Instant::now();
        let last = (n - 1) % BATCH + 1;
        t.truncate(last);
        Ok(PartyOut { setup_s, start, end, cost_setup, cost: cb.cost(), last: t, choices: Some(ch), delta: None })
    });
    let s = sender.join().map_err(|_| Error::Panic)??;
    let r = receiver.join().map_err(|_| Error::Panic)??;
    // Check the COT relation on every output of the last batch.
    let delta = s.delta.unwrap_or_default();
    let ch = r.choices.as_ref().expect("receiver returns choices");
    for i in 0..s.last.len() {
        if r.last[i] != s.last[i] ^ delta.and_bit(ch.get(i)) {
            return Err(Error::Check(format!("COT relation fails at output {i} of the last batch")));
        }
    }
    let wall = s.end.max(r.end).duration_since(s.start.min(r.start)).as_secs_f64();
    let cs = s.cost - s.cost_setup;
    let cr = r.cost - r.cost_setup;
    let bytes = cs.bytes_sent + cr.bytes_sent;
    let mut rec = Record::new("cot");
    rec.set("source", cfg.source.name.as_str())
        .set("n", n as u64)
        .set("net", cfg.profile.name.as_str())
        .set("transport", cfg.transport.name())
        .set("wall_s", wall)
        .set("setup_s", s.setup_s.max(r.setup_s))
        .set("bytes", bytes)
        .set("rounds", cs.rounds.max(cr.rounds))
        .set("cots_per_s", n as f64 / wall)
        .set("bits_per_cot", bytes as f64 * 8.0 / n as f64)
        .set("sender_s", s.end.duration_since(s.start).as_secs_f64())
        .set("receiver_s", r.end.duration_since(r.start).as_secs_f64())
        .set("sender_bytes_sent", cs.bytes_sent)
        .set("receiver_bytes_sent", cr.bytes_sent)
        .set("setup_bytes", s.cost_setup.bytes_sent + r.cost_setup.bytes_sent)
        .set("setup_rounds", s.cost_setup.rounds.max(r.cost_setup.rounds))
        .set("checked", s.last.len() as u64)
        .set("machine", machine_note());
    Ok(rec)
}
