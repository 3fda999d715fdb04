//! All three parties in one process (threads over in-memory channels): the
//! data holder shares, the parties evaluate, the output party
//! reconstructs. Used by `hush circuit run`, the tests and quick
//! experiments; the same [`Evaluator`] runs in the TCP service.

use crate::araki::PartyKeys;
use crate::engine::{Evaluator, Program};
use crate::error::{Error, Result};
use crate::prf::Prg;
use crate::share::{prev, share};
use hush_transport::{Channel, Cost, MemChannel};

/// A channel wrapper that keeps a copy of every received message (a
/// party's view, for the privacy tests).
pub struct Recording<C: Channel> {
    pub inner: C,
    pub received: Vec<u8>,
}

impl<C: Channel> Channel for Recording<C> {
    fn send(&mut self, payload: &[u8]) -> hush_transport::Result<()> {
        self.inner.send(payload)
    }
    fn recv(&mut self) -> hush_transport::Result<Vec<u8>> {
        let m = self.inner.recv()?;
        self.received.extend_from_slice(&m);
        Ok(m)
    }
    fn cost(&self) -> Cost {
        self.inner.cost()
    }
    fn max_frame(&self) -> usize {
        self.inner.max_frame()
    }
    fn set_timeout(&mut self, t: std::time::Duration) {
        self.inner.set_timeout(t)
    }
}

/// What a local run produced.
pub struct LocalRun {
    /// Reconstructed outputs, `n_out × words` words (bit-sliced).
    pub outputs: Vec<u64>,
    /// Each party's ring cost for the evaluation (key setup excluded):
    /// sent to the next party / received from the previous one; `rounds`
    /// is the evaluator's count of AND layers.
    pub ring_cost: [Cost; 3],
    /// Everything each party received: its input pairs, then the ring
    /// messages of the evaluation (only when asked for).
    pub views: Option<[Vec<u8>; 3]>,
}

/// Shares `input` (`n_in × words` words, bit-sliced values), evaluates
/// with three threads and reconstructs. With `seed`, all randomness (PRF
/// keys, sharing) comes from it (deterministic mode); otherwise from the OS.
pub fn eval_local(prog: &Program, words: usize, input: &[u64], seed: Option<[u8; 16]>, record_views: bool) -> Result<LocalRun> {
    if input.len() != prog.n_in * words {
        return Err(Error::Input(format!("expected {} input words, got {}", prog.n_in * words, input.len())));
    }
    let mut rng = match seed {
        Some(s) => Prg::from_seed(s),
        None => Prg::from_os()?,
    };
    let keys: [[u8; 16]; 3] = std::array::from_fn(|_| rng.seed16());
    let nonce = rng.next_u64();
    // Input pairs per party, wire by wire: x then a.
    let w2 = 2 * words;
    let mut party_in: [Vec<u64>; 3] = std::array::from_fn(|_| vec![0u64; prog.n_in * w2]);
    for w in 0..prog.n_in {
        let s = share(&input[w * words..][..words], &mut rng);
        for i in 0..3 {
            party_in[i][w * w2..][..words].copy_from_slice(&s[i].0);
            party_in[i][w * w2 + words..][..words].copy_from_slice(&s[i].1);
        }
    }
    // Ring: ends[i].0 is P_i's channel to P_{i+1}, ends[i].1 its channel from P_{i-1}.
    let (n0, p1) = MemChannel::pair();
    let (n1, p2) = MemChannel::pair();
    let (n2, p0) = MemChannel::pair();
    let ends = [(n0, p0), (n1, p1), (n2, p2)];
    let level = hush_primitives::simd::level();
    let results: Vec<Result<(Vec<u64>, Cost, Vec<u8>)>> = std::thread::scope(|sc| {
        let handles: Vec<_> = ends
            .into_iter()
            .enumerate()
            .map(|(i, (mut to_next, from_prev))| {
                let my_in = &party_in[i];
                let own = keys[i];
                sc.spawn(move || -> Result<(Vec<u64>, Cost, Vec<u8>)> {
                    // The caller's SIMD level (maybe a `with_level`
                    // override of its thread) applies to the parties too.
                    let party = || -> Result<(Vec<u64>, Cost, Vec<u8>)> {
                        let mut from_prev = Recording { inner: from_prev, received: Vec::new() };
                        let k = PartyKeys::setup(i, own, &mut to_next, &mut from_prev)?;
                        from_prev.received.clear();
                        let c0 = to_next.cost() + from_prev.cost();
                        let mut ev = Evaluator::new(prog, words)?;
                        let mut out = vec![0u64; prog.n_out * words];
                        ev.eval_chunk(&k, nonce, 0, my_in, &mut out, &mut to_next, &mut from_prev)?;
                        let mut c1 = to_next.cost() + from_prev.cost();
                        c1.rounds = c0.rounds + ev.rounds() as u32;
                        let mut view = Vec::new();
                        if record_views {
                            view.extend(my_in.iter().flat_map(|w| w.to_le_bytes()));
                            view.extend_from_slice(&from_prev.received);
                        }
                        Ok((out, c1 - c0, view))
                    };
                    hush_primitives::simd::with_level(level, party).unwrap_or_else(|e| Err(Error::Local(e.to_string())))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(Error::Local("party thread panicked".into())))).collect()
    });
    let mut outs = Vec::new();
    let mut costs = [Cost::default(); 3];
    let mut views: [Vec<u8>; 3] = Default::default();
    for (i, r) in results.into_iter().enumerate() {
        let (o, c, v) = r?;
        outs.push(o);
        costs[i] = c;
        views[i] = v;
    }
    let _ = prev(0);
    let outputs = crate::share::reconstruct([&outs[0], &outs[1], &outs[2]]);
    Ok(LocalRun { outputs, ring_cost: costs, views: record_views.then_some(views) })
}

/// Evaluates one instance given as hex strings (one per circuit input) and
/// returns the outputs as hex strings, all three parties in this process.
pub fn run_hex(circuit: &crate::bristol::Circuit, inputs: &[String]) -> Result<Vec<String>> {
    let bits = circuit.inputs_from_hex(inputs)?;
    let prog = Program::compile(circuit);
    let words: Vec<u64> = bits.iter().map(|&b| b as u64).collect();
    let run = eval_local(&prog, 1, &words, None, false)?;
    let out_bits: Vec<bool> = run.outputs.iter().map(|w| w & 1 == 1).collect();
    Ok(circuit.outputs_to_hex(&out_bits))
}
