//! Training sharded over K worker pairs (issue 31: the `hush.ray` module
//! drives these workers as Ray actors, one Ray cluster per party).
//!
//! Worker i of one party pairs with worker i of the other over its own TLS
//! link and runs the ordinary batch protocol ([`Session::batch_gradient`])
//! on its part of every batch; the party's **driver** holds the model
//! shares, sums its workers' gradient shares and applies the update
//! ([`apply_gradient`]), then hands the new shares to the workers for the
//! next batch.
//!
//! * **Same batches as one process.** Every worker computes the epoch's
//!   batch order ([`crate::batches`], from the agreed order seed) and takes
//!   the i-th of K contiguous chunks of each batch ([`chunk`]). The sum of
//!   the K gradient shares is a sharing of the same Σ x·e over the whole
//!   batch that one session computes, and the driver applies the update
//!   once per batch with the batch's full size, so a K-worker training
//!   takes the same steps as `hush train`. The opened model differs only
//!   by the fixed-point rounding of SecureML's local truncation, whose ±1
//!   errors land on different rows (each pair has its own masks); with
//!   K = 1 the shares are bit-identical to [`Session::train`]'s under the
//!   same [`Randomness::InsecureTestSeed`] (tested).
//! * **What a worker sees.** The same as the one-process session on its
//!   rows: its party's data and model shares, the peer worker's messages
//!   (Paillier ciphertexts under the peer's key, masked h2s values, Beaver
//!   openings). The driver and the workers of one party are one trust
//!   domain (one organisation's cluster), so handing them the party's
//!   shares reveals nothing to the peer. Each pair has its own Paillier
//!   keys and triples, made from fresh randomness.
//! * **What the peer learns beyond one process:** the chunk sizes, which
//!   follow from the public batch size and K.
//! * **Pairing.** A shard hello before the session checks that both
//!   workers have the same K, the same index and the same starting epoch
//!   (a resumed run must resume at the same epoch at both parties).
//!
//! PSI shards by hash bucket ([`bucket_of`]): worker i intersects the IDs
//! whose bucket is i. Each party learns every bucket's sizes and
//! intersection size instead of only the totals (see docs/lr.md).

use crate::data::Dataset;
use crate::secure::{apply_gradient, EpochState, ModelShares, Opened, Randomness, Role, Session};
use crate::{batches, Error, Result, TrainConfig};
use hush_paillier::sparse::Csr;
use hush_transport::Channel;
use std::ops::Range;
use std::sync::mpsc;

/// The rows of a batch of `len` rows that worker `i` of `k` takes: the
/// i-th of k contiguous chunks (sizes differ by at most one).
pub fn chunk(len: usize, k: usize, i: usize) -> Range<usize> {
    (i * len / k)..((i + 1) * len / k)
}

/// The PSI bucket of an ID among `k`: the first 8 bytes of SHA-256(id),
/// little-endian, mod k. Public and the same at both parties.
pub fn bucket_of(id: &str, k: usize) -> usize {
    use sha2::Digest;
    let h = sha2::Sha256::digest(id.as_bytes());
    (u64::from_le_bytes(h[..8].try_into().unwrap()) % k as u64) as usize
}

/// Which worker this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardSpec {
    /// Workers per party (both parties must agree).
    pub k: u32,
    /// This worker's index, 0..k.
    pub index: u32,
}

impl ShardSpec {
    pub fn check(self) -> Result<Self> {
        if self.k == 0 || self.k > MAX_WORKERS || self.index >= self.k {
            return Err(Error::Config(format!("worker {} of {} (1 ≤ K ≤ {MAX_WORKERS}, index < K)", self.index, self.k)));
        }
        Ok(self)
    }
}

/// Most workers per party.
pub const MAX_WORKERS: u32 = 4096;

const SHARD_MAGIC: &[u8; 8] = b"hushSH01";

/// Checks the peer worker's K, index and starting epoch.
fn shard_hello<C: Channel + ?Sized>(ch: &mut C, spec: ShardSpec, start_epoch: u32) -> Result<()> {
    let mut hello = SHARD_MAGIC.to_vec();
    for v in [spec.k, spec.index, start_epoch] {
        hello.extend_from_slice(&v.to_le_bytes());
    }
    ch.send(&hello)?;
    let p = ch.recv()?;
    if p.len() != hello.len() || &p[..8] != SHARD_MAGIC {
        return Err(Error::Peer("the peer is not a worker of a sharded `hush train` of this version (unexpected greeting)".into()));
    }
    let u = |i: usize| u32::from_le_bytes(p[8 + 4 * i..12 + 4 * i].try_into().unwrap());
    if u(0) != spec.k {
        return Err(Error::Peer(format!("workers per party differ: {} here, {} at the peer (both parties must use the same K)", spec.k, u(0))));
    }
    if u(1) != spec.index {
        return Err(Error::Peer(format!("worker {} here is linked to the peer's worker {} (worker i must pair with worker i)", spec.index, u(1))));
    }
    if u(2) != start_epoch {
        return Err(Error::Peer(format!(
            "this party starts at epoch {start_epoch} and the peer at epoch {} (resume both parties from the same checkpoint epoch)",
            u(2)
        )));
    }
    Ok(())
}

/// What one worker's PSI on its bucket found.
#[derive(Clone, Debug)]
pub struct BucketPsi {
    /// Indices into the bucket's ID list, in the order both parties share.
    pub rows: Vec<usize>,
    pub own_size: usize,
    pub peer_size: usize,
    pub intersection: usize,
    pub bytes: u64,
    pub wall_s: f64,
}

/// One step's result: the worker's gradient shares and its row count.
pub struct StepOut {
    pub g_own: Vec<u64>,
    pub g_peer: Vec<u64>,
    pub rows: usize,
}

enum Cmd {
    Psi(Vec<String>, mpsc::Sender<Result<BucketPsi>>),
    Start(Box<StartArgs>, mpsc::Sender<Result<usize>>),
    Epoch(u32, mpsc::Sender<Result<usize>>),
    Step(usize, Box<ModelShares>, mpsc::Sender<Result<StepOut>>),
    Reveal(Box<ModelShares>, mpsc::Sender<Result<Opened>>),
    Cost(mpsc::Sender<Result<(u64, u32)>>),
}

struct StartArgs {
    data: Dataset,
    start_epoch: u32,
}

/// One worker: a thread that owns its link to the peer's worker and its
/// session; the methods send it a command and wait for the answer. After
/// an error the worker stops and every later call returns that error.
pub struct ShardWorker {
    tx: Option<mpsc::Sender<Cmd>>,
    thread: Option<std::thread::JoinHandle<()>>,
    failed: Option<String>,
    spec: ShardSpec,
}

impl ShardWorker {
    /// Starts the worker: `open` makes the link to the peer's worker (in
    /// the worker's thread, so listening does not block the caller).
    pub fn spawn<C, F>(open: F, role: Role, spec: ShardSpec, cfg: TrainConfig, randomness: Randomness) -> Result<ShardWorker>
    where
        C: Channel + 'static,
        F: FnOnce() -> Result<C> + Send + 'static,
    {
        let spec = spec.check()?;
        let (tx, rx) = mpsc::channel::<Cmd>();
        let thread = std::thread::Builder::new()
            .name(format!("hush-lr-worker-{}", spec.index))
            .spawn(move || worker_main(open, rx, role, spec, cfg, randomness))
            .map_err(Error::Io)?;
        Ok(ShardWorker { tx: Some(tx), thread: Some(thread), failed: None, spec })
    }

    fn call<T>(&mut self, make: impl FnOnce(mpsc::Sender<Result<T>>) -> Cmd) -> Result<T> {
        if let Some(f) = &self.failed {
            return Err(Error::Peer(format!("worker {} stopped after an earlier error: {f}", self.spec.index)));
        }
        let (rtx, rrx) = mpsc::channel();
        let sent = self.tx.as_ref().map(|t| t.send(make(rtx)).is_ok()).unwrap_or(false);
        let r = if sent { rrx.recv().unwrap_or_else(|_| Err(Error::Peer("the worker's thread ended".into()))) } else { Err(Error::Peer("the worker's thread ended".into())) };
        if let Err(e) = &r {
            self.failed = Some(e.to_string());
        }
        r
    }

    /// PSI on this worker's bucket of IDs (before [`Self::start`]); the
    /// labels party is the PSI's receiver.
    pub fn psi(&mut self, ids: Vec<String>) -> Result<BucketPsi> {
        self.call(|r| Cmd::Psi(ids, r))
    }

    /// Shard hello, then the session's handshake and keys, on the party's
    /// aligned data (all rows: a worker reads the rows of its chunks).
    /// Returns the peer's feature count.
    pub fn start(&mut self, data: Dataset, start_epoch: u32) -> Result<usize> {
        self.call(|r| Cmd::Start(Box::new(StartArgs { data, start_epoch }), r))
    }

    /// Starts an epoch; returns its number of batches.
    pub fn begin_epoch(&mut self, epoch: u32) -> Result<usize> {
        self.call(|r| Cmd::Epoch(epoch, r))
    }

    /// Batch `j` of the current epoch on this worker's chunk, with the
    /// driver's current model shares.
    pub fn step(&mut self, j: usize, m: ModelShares) -> Result<StepOut> {
        self.call(|r| Cmd::Step(j, Box::new(m), r))
    }

    /// Opens the model with the peer worker (both parties must agree).
    pub fn reveal(&mut self, m: ModelShares) -> Result<Opened> {
        self.call(|r| Cmd::Reveal(Box::new(m), r))
    }

    /// Bytes (sent + received) and rounds on this worker's link so far.
    pub fn cost(&mut self) -> Result<(u64, u32)> {
        self.call(Cmd::Cost)
    }
}

impl Drop for ShardWorker {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Trainer {
    x: Csr,
    labels: Option<Vec<f64>>,
    batches: Vec<Vec<usize>>,
    st: EpochState,
}

fn worker_main<C, F>(open: F, rx: mpsc::Receiver<Cmd>, role: Role, spec: ShardSpec, cfg: TrainConfig, randomness: Randomness)
where
    C: Channel + 'static,
    F: FnOnce() -> Result<C>,
{
    let mut opened = Some(open);
    let mut ch: Option<C> = None;
    // the link opens at the first command, so that its error reaches a caller
    let mut link = |ch: &mut Option<C>| -> Result<()> {
        if ch.is_none() {
            *ch = Some((opened.take().ok_or_else(|| Error::Peer("the link could not be opened".into()))?)()?);
        }
        Ok(())
    };
    // phase 1: PSI buckets until the session starts
    let start = loop {
        match rx.recv() {
            Err(_) => return,
            Ok(Cmd::Psi(ids, r)) => {
                let out = link(&mut ch).and_then(|_| bucket_psi(ch.as_mut().unwrap(), role, &ids));
                let stop = out.is_err();
                let _ = r.send(out);
                if stop {
                    return;
                }
            }
            Ok(Cmd::Start(a, r)) => break (a, r),
            Ok(Cmd::Cost(r)) => {
                let _ = r.send(Ok(ch.as_ref().map(|c| (c.cost().bytes_sent + c.cost().bytes_recv, c.cost().rounds)).unwrap_or((0, 0))));
            }
            Ok(other) => {
                reply_err(other, Error::Config("the worker's session has not started (call start first)".into()));
                return;
            }
        }
    };
    let (args, r) = start;
    if let Err(e) = link(&mut ch) {
        let _ = r.send(Err(e));
        return;
    }
    let ch = ch.as_mut().unwrap();
    let StartArgs { data, start_epoch } = *args;
    let prep = (|| -> Result<(Csr, Option<Vec<f64>>)> {
        let labels = (role == Role::Labels).then(|| data.labels.clone());
        Ok((data.to_fixed()?, labels))
    })();
    let (x, labels) = match prep {
        Ok(v) => v,
        Err(e) => {
            let _ = r.send(Err(e));
            return;
        }
    };
    if let Err(e) = shard_hello(ch, spec, start_epoch) {
        let _ = r.send(Err(e));
        return;
    }
    let mut s = match Session::start_with(ch, role, x.rows, x.cols, &cfg, randomness) {
        Ok(s) => s,
        Err(e) => {
            let _ = r.send(Err(e));
            return;
        }
    };
    let _ = r.send(Ok(s.peer_features()));
    let mut tr = Trainer { x, labels, batches: Vec::new(), st: EpochState::default() };
    let (k, i) = (spec.k as usize, spec.index as usize);
    while let Ok(cmd) = rx.recv() {
        let ok = match cmd {
            Cmd::Epoch(ep, r) => {
                let out = (|| {
                    tr.batches = batches(tr.x.rows, cfg.batch as usize, ep, cfg.order_seed);
                    let rows = tr.batches.iter().map(|b| chunk(b.len(), k, i).len()).sum();
                    tr.st = s.begin_epoch(ep, rows)?;
                    Ok(tr.batches.len())
                })();
                send(r, out)
            }
            Cmd::Step(j, m, r) => {
                let out = (|| {
                    let batch = tr.batches.get(j).ok_or_else(|| Error::Config(format!("batch {j} of an epoch of {}", tr.batches.len())))?;
                    let rows = &batch[chunk(batch.len(), k, i)];
                    if m.own.len() != tr.x.cols || m.peer.len() != s.peer_features() || m.role != role {
                        return Err(Error::Config("model shares of another shape or role".into()));
                    }
                    if rows.is_empty() {
                        return Ok(StepOut { g_own: vec![0; m.own.len()], g_peer: vec![0; m.peer.len()], rows: 0 });
                    }
                    let xb = tr.x.select_rows(rows);
                    let yb: Option<Vec<f64>> = tr.labels.as_ref().map(|y| rows.iter().map(|&r| y[r]).collect());
                    let (g_own, g_peer) = s.batch_gradient(&xb, yb.as_deref(), &m, &mut tr.st)?;
                    Ok(StepOut { g_own, g_peer, rows: rows.len() })
                })();
                send(r, out)
            }
            Cmd::Reveal(m, r) => send(r, s.reveal(&m)),
            Cmd::Cost(r) => {
                let c = s.cost();
                send(r, Ok((c.bytes_sent + c.bytes_recv, c.rounds)))
            }
            other => {
                reply_err(other, Error::Config("the worker's session has already started".into()));
                false
            }
        };
        if !ok {
            return;
        }
    }
}

/// Sends a reply; false if it was an error (the worker then stops).
fn send<T>(r: mpsc::Sender<Result<T>>, out: Result<T>) -> bool {
    let ok = out.is_ok();
    let _ = r.send(out);
    ok
}

fn reply_err(cmd: Cmd, e: Error) {
    match cmd {
        Cmd::Psi(_, r) => drop(r.send(Err(e))),
        Cmd::Start(_, r) => drop(r.send(Err(e))),
        Cmd::Epoch(_, r) => drop(r.send(Err(e))),
        Cmd::Step(_, _, r) => drop(r.send(Err(e))),
        Cmd::Reveal(_, r) => drop(r.send(Err(e))),
        Cmd::Cost(r) => drop(r.send(Err(e))),
    }
}

fn bucket_psi<C: Channel + ?Sized>(ch: &mut C, role: Role, ids: &[String]) -> Result<BucketPsi> {
    let t0 = std::time::Instant::now();
    hush_psi::check_distinct(ids)?;
    let c0 = ch.cost();
    let psi_role = if role == Role::Labels { hush_psi::Role::Receiver } else { hush_psi::Role::Sender };
    let o = hush_psi::run(ch, psi_role, ids, &hush_psi::PsiConfig::default(), &mut rand::rngs::OsRng)?;
    let rows = o.rows.ok_or_else(|| Error::Config("the PSI returned no rows (aligned output expected)".into()))?;
    let c = ch.cost() - c0;
    Ok(BucketPsi { rows, own_size: o.own_size, peer_size: o.peer_size, intersection: o.intersection, bytes: c.bytes_sent + c.bytes_recv, wall_s: t0.elapsed().as_secs_f64() })
}

/// The driver's part of a batch: sums the workers' gradient shares
/// (Z_2^64, so the order does not matter) and applies the update.
pub fn apply_steps(cfg: &TrainConfig, m: &mut ModelShares, steps: &[StepOut], epoch: u32) -> Result<()> {
    let b: usize = steps.iter().map(|s| s.rows).sum();
    if b == 0 {
        return Err(Error::Config("a batch with no rows".into()));
    }
    let mut g_own = vec![0u64; m.own.len()];
    let mut g_peer = vec![0u64; m.peer.len()];
    for s in steps {
        if s.g_own.len() != g_own.len() || s.g_peer.len() != g_peer.len() {
            return Err(Error::Config("a worker's gradient shares have another shape".into()));
        }
        for (a, &v) in g_own.iter_mut().zip(&s.g_own) {
            *a = a.wrapping_add(v);
        }
        for (a, &v) in g_peer.iter_mut().zip(&s.g_peer) {
            *a = a.wrapping_add(v);
        }
    }
    apply_gradient(m.role, cfg, &mut m.own, &g_own, b, epoch);
    apply_gradient(m.role, cfg, &mut m.peer, &g_peer, b, epoch);
    Ok(())
}
