//! Fault injection: a seeded, deterministic [`FaultyChannel`] wrapper and
//! the outcome bookkeeping of the fault harness (`tests/faults*.rs` in the
//! protocol crates, `scripts/faults.sh`).
//!
//! ## What is injected, and where
//! A [`Schedule`] lists faults, each aimed at the `index`-th message one
//! endpoint sends ([`Dir::Send`]) or receives ([`Dir::Recv`]). Wrapping both
//! endpoints of a pair gives faults in either direction. The kinds:
//!
//! * **message level** ([`FaultKind::Drop`], [`Duplicate`](FaultKind::Duplicate),
//!   [`Reorder`](FaultKind::Reorder), [`Truncate`](FaultKind::Truncate),
//!   [`Delay`](FaultKind::Delay), [`Close`](FaultKind::Close),
//!   [`Corrupt`](FaultKind::Corrupt)): the message is altered *above* the
//!   frame checksum, i.e. the peer receives a well-formed frame with the
//!   altered payload. This is what a misbehaving (or buggy) peer can do; a
//!   reliable, integrity-protected link (TCP + CRC32 frames, TLS) never does
//!   it on its own. Invariant: no panic, no hang; a semi-honest protocol may
//!   accept a dropped/duplicated/reordered/flipped message of the right
//!   length and compute garbage (it has no integrity check of its own — the
//!   harness counts these as *undetected*, not as violations, and the
//!   protocols' docs say so). A truncated message or a closed link must be
//!   an error (lengths are checked), a delay below the timeout must not
//!   change the result.
//! * **wire level** ([`FaultKind::CorruptWire`]): one bit of the encoded
//!   frame (header or payload) is flipped *below* the checksum and the
//!   receiver decodes it with the transport's real frame decoder, as
//!   [`crate::MemChannel`] and [`crate::TcpChannel`] do. Invariant: always an
//!   error on both sides (CRC32 detects every single-bit error), never an
//!   output. Byte-level corruption of a real TCP stream, plaintext and TLS,
//!   is exercised separately (`crates/hush-transport/tests/faults_tcp.rs`).
//!
//! The wrapper is deterministic given its schedule: which message is hit,
//! which bit flips and how long a delay lasts come from the schedule's seed;
//! only thread timing varies between runs.

use crate::frame::{decode_frame, encode_frame};
use crate::{Channel, Cost, Error, Result};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Which way a fault acts, seen from the wrapped endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    Send,
    Recv,
}

/// One kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// The message vanishes.
    Drop,
    /// The message is delivered twice.
    Duplicate,
    /// The message swaps places with the next one in the same direction.
    Reorder,
    /// The payload is cut to `keep` bytes (`keep % len`; an empty payload
    /// gains one byte instead).
    Truncate { keep: usize },
    /// The message is held back this long.
    Delay(Duration),
    /// The link is closed instead of passing the message (the peer sees a
    /// disconnect).
    Close,
    /// One payload bit flipped above the checksum (`bit % (8·len)`).
    Corrupt { bit: usize },
    /// One bit of the encoded frame flipped below the checksum
    /// (`bit % (8·frame len)`), decoded by the real frame decoder.
    CorruptWire { bit: usize },
}

impl FaultKind {
    /// A short name (for counts and reports).
    pub fn name(&self) -> &'static str {
        match self {
            FaultKind::Drop => "drop",
            FaultKind::Duplicate => "duplicate",
            FaultKind::Reorder => "reorder",
            FaultKind::Truncate { .. } => "truncate",
            FaultKind::Delay(_) => "delay",
            FaultKind::Close => "close",
            FaultKind::Corrupt { .. } => "corrupt",
            FaultKind::CorruptWire { .. } => "corrupt-wire",
        }
    }
    /// Whether a protocol without its own integrity check may accept this
    /// fault and output garbage (see the module docs).
    pub fn may_pass_undetected(&self) -> bool {
        matches!(self, FaultKind::Drop | FaultKind::Duplicate | FaultKind::Reorder | FaultKind::Corrupt { .. })
    }
}

/// A fault aimed at one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    pub dir: Dir,
    /// 0-based index of the message in that direction at this endpoint.
    pub index: u64,
    pub kind: FaultKind,
}

/// The faults of one endpoint.
#[derive(Clone, Debug, Default)]
pub struct Schedule {
    pub faults: Vec<Fault>,
}

/// A small deterministic generator (SplitMix64) for schedules.
#[derive(Clone, Debug)]
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// Which fault kinds a random schedule draws from.
#[derive(Clone, Debug)]
pub struct Mix {
    pub kinds: Vec<&'static str>,
    /// Longest injected delay (some delays exceed the channel timeout on
    /// purpose when this is larger than it).
    pub max_delay: Duration,
}

impl Default for Mix {
    fn default() -> Self {
        Mix {
            kinds: vec!["drop", "duplicate", "reorder", "truncate", "delay", "close", "corrupt", "corrupt-wire"],
            max_delay: Duration::from_millis(60),
        }
    }
}

impl Schedule {
    /// No faults.
    pub fn none() -> Self {
        Schedule::default()
    }

    /// One fault.
    pub fn one(dir: Dir, index: u64, kind: FaultKind) -> Self {
        Schedule { faults: vec![Fault { dir, index, kind }] }
    }

    /// One random fault of a kind from `mix`, aimed at a message that
    /// exists in a fault-free run (`sent`/`recv`: that endpoint's message
    /// counts there). Deterministic in `rng`.
    pub fn random_one(rng: &mut SplitMix, sent: u64, recv: u64, mix: &Mix) -> Self {
        let dir = match (sent, recv) {
            (0, 0) => return Schedule::none(),
            (0, _) => Dir::Recv,
            (_, 0) => Dir::Send,
            _ => {
                if rng.below(2) == 0 {
                    Dir::Send
                } else {
                    Dir::Recv
                }
            }
        };
        let count = if dir == Dir::Send { sent } else { recv };
        // Early messages (set-up, headers) are the likeliest to matter and
        // the least covered by later messages: favour them half of the time.
        let index = if rng.below(2) == 0 { rng.below(count.min(4)) } else { rng.below(count) };
        let name = mix.kinds[rng.below(mix.kinds.len() as u64) as usize];
        let r = rng.next_u64() as usize;
        let kind = match name {
            "drop" => FaultKind::Drop,
            "duplicate" => FaultKind::Duplicate,
            "reorder" => FaultKind::Reorder,
            "truncate" => FaultKind::Truncate { keep: r },
            "delay" => FaultKind::Delay(Duration::from_micros(rng.below(mix.max_delay.as_micros().max(1) as u64))),
            "close" => FaultKind::Close,
            "corrupt" => FaultKind::Corrupt { bit: r },
            "corrupt-wire" => FaultKind::CorruptWire { bit: r },
            other => panic!("unknown fault kind {other}"),
        };
        Schedule::one(dir, index, kind)
    }
}

/// A record of a fault that took effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    pub fault: Fault,
    /// Payload length of the message it hit.
    pub len: usize,
}

/// A [`Channel`] that injects the faults of a [`Schedule`] into the
/// messages of an inner channel (see the module docs).
pub struct FaultyChannel<C: Channel> {
    inner: Option<C>,
    schedule: Schedule,
    sent: u64,
    recvd: u64,
    /// Messages to hand out before reading the inner channel.
    pending_in: VecDeque<Vec<u8>>,
    /// A received message held back by a receive-side reorder.
    held_in: Option<Vec<u8>>,
    /// A sent message held back by a send-side reorder.
    held_out: Option<Vec<u8>>,
    applied: Vec<Applied>,
    max_frame: usize,
    timeout: Duration,
    /// Set once the wrapper itself failed the link (closed, or a wire
    /// corruption detected here).
    failed: bool,
}

impl<C: Channel> FaultyChannel<C> {
    /// Wraps `inner`; `timeout` should equal the inner channel's receive
    /// timeout (it bounds delays).
    pub fn new(inner: C, schedule: Schedule) -> Self {
        let max_frame = inner.max_frame();
        FaultyChannel {
            inner: Some(inner),
            schedule,
            sent: 0,
            recvd: 0,
            pending_in: VecDeque::new(),
            held_in: None,
            held_out: None,
            applied: Vec::new(),
            max_frame,
            timeout: crate::DEFAULT_TIMEOUT,
            failed: false,
        }
    }

    /// The faults that took effect so far.
    pub fn applied(&self) -> &[Applied] {
        &self.applied
    }

    /// The inner channel, unless the wrapper closed it.
    pub fn inner(&self) -> Option<&C> {
        self.inner.as_ref()
    }

    fn fault_for(&self, dir: Dir, index: u64) -> Option<Fault> {
        self.schedule.faults.iter().copied().find(|f| f.dir == dir && f.index == index)
    }

    fn close(&mut self) {
        self.inner = None;
        self.failed = true;
        self.pending_in.clear();
        self.held_in = None;
        self.held_out = None;
    }

    fn inner_mut(&mut self) -> Result<&mut C> {
        match self.inner.as_mut() {
            Some(c) => Ok(c),
            None => Err(if self.failed { Error::Closed } else { Error::Disconnected }),
        }
    }

    fn raw_send(&mut self, payload: &[u8]) -> Result<()> {
        self.inner_mut()?.send(payload)
    }

    fn flush_held_out(&mut self) -> Result<()> {
        if let Some(m) = self.held_out.take() {
            self.raw_send(&m)?;
        }
        Ok(())
    }

    /// Flips one bit of the encoded frame and runs the real decoder on it:
    /// `Ok` carries what a receiver would accept, `Err` what it would report.
    fn through_corrupt_wire(&self, payload: &[u8], bit: usize) -> Result<Vec<u8>> {
        let mut frame = encode_frame(payload, 1, 0);
        let b = bit % (frame.len() * 8);
        frame[b / 8] ^= 1 << (b % 8);
        let (_, body) = decode_frame(&frame, self.max_frame)?;
        Ok(body.to_vec())
    }

    fn mutate(kind: FaultKind, m: &mut Vec<u8>) {
        match kind {
            FaultKind::Truncate { keep } => {
                if m.is_empty() {
                    m.push(0);
                } else {
                    let k = keep % m.len();
                    m.truncate(k);
                }
            }
            FaultKind::Corrupt { bit } => {
                if !m.is_empty() {
                    let b = bit % (m.len() * 8);
                    m[b / 8] ^= 1 << (b % 8);
                }
            }
            _ => {}
        }
    }

    /// Reads the next message from the inner channel (or the queue).
    fn next_in(&mut self) -> Result<Vec<u8>> {
        if let Some(m) = self.pending_in.pop_front() {
            return Ok(m);
        }
        // A send-side reorder whose partner never came: release it before
        // waiting for the peer (it would otherwise deadlock the run).
        self.flush_held_out()?;
        self.inner_mut()?.recv()
    }
}

impl<C: Channel> Channel for FaultyChannel<C> {
    fn send(&mut self, payload: &[u8]) -> Result<()> {
        let idx = self.sent;
        self.sent += 1;
        if self.inner.is_none() {
            return Err(if self.failed { Error::Closed } else { Error::Disconnected });
        }
        let Some(f) = self.fault_for(Dir::Send, idx) else {
            let r = self.raw_send(payload);
            // a held message goes out after its successor
            r.and_then(|_| self.flush_held_out())?;
            return Ok(());
        };
        self.applied.push(Applied { fault: f, len: payload.len() });
        match f.kind {
            FaultKind::Drop => self.flush_held_out(),
            FaultKind::Duplicate => {
                self.raw_send(payload)?;
                self.raw_send(payload)?;
                self.flush_held_out()
            }
            FaultKind::Reorder => {
                self.flush_held_out()?;
                self.held_out = Some(payload.to_vec());
                Ok(())
            }
            FaultKind::Truncate { .. } | FaultKind::Corrupt { .. } => {
                let mut m = payload.to_vec();
                Self::mutate(f.kind, &mut m);
                self.raw_send(&m)?;
                self.flush_held_out()
            }
            FaultKind::Delay(d) => {
                std::thread::sleep(d);
                self.raw_send(payload)?;
                self.flush_held_out()
            }
            FaultKind::Close => {
                self.close();
                Err(Error::Closed)
            }
            FaultKind::CorruptWire { bit } => {
                // The peer's decoder sees the flipped frame. A detected
                // error closes the link (the peer would close it); an
                // undetected flip would deliver the decoded payload.
                match self.through_corrupt_wire(payload, bit) {
                    Ok(m) => {
                        self.raw_send(&m)?;
                        self.flush_held_out()
                    }
                    Err(_) => {
                        // The peer drops the connection: this side sees a
                        // disconnect on its next operation, the peer an error
                        // on its next receive.
                        self.inner = None;
                        Ok(())
                    }
                }
            }
        }
    }

    fn recv(&mut self) -> Result<Vec<u8>> {
        if let Some(m) = self.held_in.take() {
            // second half of a receive-side reorder
            return Ok(m);
        }
        let mut m = self.next_in()?;
        let idx = self.recvd;
        self.recvd += 1;
        let Some(f) = self.fault_for(Dir::Recv, idx) else { return Ok(m) };
        self.applied.push(Applied { fault: f, len: m.len() });
        match f.kind {
            FaultKind::Drop => {
                let m2 = self.next_in();
                self.recvd += 1;
                m2
            }
            FaultKind::Duplicate => {
                self.pending_in.push_front(m.clone());
                Ok(m)
            }
            FaultKind::Reorder => {
                let next = self.next_in()?;
                self.recvd += 1;
                self.held_in = Some(m);
                Ok(next)
            }
            FaultKind::Truncate { .. } | FaultKind::Corrupt { .. } => {
                Self::mutate(f.kind, &mut m);
                Ok(m)
            }
            FaultKind::Delay(d) => {
                std::thread::sleep(d);
                Ok(m)
            }
            FaultKind::Close => {
                self.close();
                Err(Error::Disconnected)
            }
            FaultKind::CorruptWire { bit } => match self.through_corrupt_wire(&m, bit) {
                Ok(m) => Ok(m),
                Err(e) => {
                    // as the real transport: a broken frame ends the link
                    self.close();
                    Err(e)
                }
            },
        }
    }

    fn cost(&self) -> Cost {
        self.inner.as_ref().map(|c| c.cost()).unwrap_or_default()
    }

    fn max_frame(&self) -> usize {
        self.max_frame
    }

    fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
        if let Some(c) = self.inner.as_mut() {
            c.set_timeout(timeout)
        }
    }
}

// ---------------------------------------------------------------------------
// Harness bookkeeping

/// How one party of a run ended.
#[derive(Debug)]
pub enum Ended<T> {
    /// Returned (its own `Ok` or `Err`).
    Returned(T),
    /// Panicked, with the panic message.
    Panicked(String),
    /// Did not end before the watchdog.
    Hung,
}

/// Runs `f` on its own thread; a panic becomes [`Ended::Panicked`], and a
/// thread still running at `deadline` is abandoned as [`Ended::Hung`] (it
/// keeps running detached: the harness reports and moves on).
pub fn spawn_guarded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Guarded<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(r);
    });
    Guarded { rx }
}

/// A party started with [`spawn_guarded`].
pub struct Guarded<T> {
    rx: std::sync::mpsc::Receiver<std::thread::Result<T>>,
}

impl<T> Guarded<T> {
    /// Waits until `deadline`.
    pub fn wait(self, deadline: Instant) -> Ended<T> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.rx.recv_timeout(left) {
            Ok(Ok(v)) => Ended::Returned(v),
            Ok(Err(p)) => Ended::Panicked(panic_message(&p)),
            Err(_) => Ended::Hung,
        }
    }
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic)".into()
    }
}

/// The verdict on one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every party returned and the output is right.
    Correct,
    /// At least one party returned an error (with a message); none panicked
    /// or hung; no party accepted a wrong output... or the others errored.
    CleanError,
    /// Every party returned `Ok` but the output is wrong, after a fault that
    /// a semi-honest protocol cannot notice (see [`FaultKind::may_pass_undetected`]).
    Undetected,
    /// A broken invariant: panic, hang, an empty error message, or a wrong
    /// output after a fault that must be caught.
    Violation(String),
}

/// Counts of verdicts over many runs.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    pub runs: u64,
    pub correct: u64,
    pub clean_error: u64,
    pub undetected: u64,
    pub violations: Vec<(u64, String)>,
    /// verdicts by fault kind: (kind, correct, clean error, undetected, violation)
    pub by_kind: std::collections::BTreeMap<&'static str, [u64; 4]>,
}

impl Tally {
    pub fn add(&mut self, seed: u64, kinds: &[&'static str], v: &Verdict) {
        self.runs += 1;
        let slot = match v {
            Verdict::Correct => {
                self.correct += 1;
                0
            }
            Verdict::CleanError => {
                self.clean_error += 1;
                1
            }
            Verdict::Undetected => {
                self.undetected += 1;
                2
            }
            Verdict::Violation(m) => {
                self.violations.push((seed, m.clone()));
                3
            }
        };
        let key = if kinds.is_empty() { "none" } else { kinds[0] };
        self.by_kind.entry(key).or_default()[slot] += 1;
    }

    /// One line per protocol plus one per fault kind.
    pub fn report(&self, name: &str) -> String {
        let mut s = format!(
            "faults {name}: {} runs: {} correct, {} clean error, {} undetected (semi-honest, no integrity check), {} violations\n",
            self.runs,
            self.correct,
            self.clean_error,
            self.undetected,
            self.violations.len()
        );
        for (k, c) in &self.by_kind {
            s += &format!("  {k:<13} correct {:>4}  error {:>4}  undetected {:>4}  violation {:>4}\n", c[0], c[1], c[2], c[3]);
        }
        for (seed, m) in self.violations.iter().take(20) {
            s += &format!("  VIOLATION seed {seed}: {m}\n");
        }
        s
    }
}

/// Judges one run of parties that each return `Result<O, E>`. `check`
/// gets every party's output (`None` where it returned an error) and says
/// whether the outputs present are right (`Some(true)`), wrong
/// (`Some(false)`: some party accepted a wrong output), or cannot be
/// checked on their own (`None`, e.g. one half of a correlation). `applied`
/// lists the faults that took effect (all endpoints).
pub fn judge<O, E: std::fmt::Display>(
    ends: Vec<Ended<std::result::Result<O, E>>>,
    applied: &[FaultKind],
    check: impl FnOnce(Vec<Option<O>>) -> Option<bool>,
) -> Verdict {
    let mut outs = Vec::new();
    let mut errs = 0;
    for (i, e) in ends.into_iter().enumerate() {
        match e {
            Ended::Panicked(m) => return Verdict::Violation(format!("party {i} panicked: {m} (faults {applied:?})")),
            Ended::Hung => return Verdict::Violation(format!("party {i} hung (faults {applied:?})")),
            Ended::Returned(Ok(o)) => outs.push(Some(o)),
            Ended::Returned(Err(e)) => {
                if e.to_string().trim().is_empty() {
                    return Verdict::Violation(format!("party {i} returned an empty error (faults {applied:?})"));
                }
                errs += 1;
                outs.push(None);
            }
        }
    }
    match check(outs) {
        Some(false) => {
            if !applied.is_empty() && applied.iter().all(|k| k.may_pass_undetected()) {
                Verdict::Undetected
            } else {
                Verdict::Violation(format!("wrong output accepted after faults {applied:?}"))
            }
        }
        Some(true) if errs == 0 => Verdict::Correct,
        _ if errs > 0 => Verdict::CleanError,
        _ => Verdict::Violation(format!("every party returned Ok but the output could not be checked (faults {applied:?})")),
    }
}

/// Number of schedules per protocol: `HUSH_FAULT_SCHEDULES`, else `default`.
pub fn schedules_from_env(default: u64) -> u64 {
    std::env::var("HUSH_FAULT_SCHEDULES").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// What one party of [`run_pair`] did.
pub struct PartyRun<R> {
    pub ended: Ended<(R, Vec<Applied>, u64, u64)>,
}

/// Runs two parties over an in-memory pair whose endpoints are wrapped in
/// [`FaultyChannel`]s with schedules `sa` and `sb`, channel receive timeout
/// `timeout`, and a watchdog of `watchdog` for the whole run. Returns each
/// party's end (with the faults that took effect at its endpoint and its
/// sent/received message counts).
#[allow(clippy::type_complexity)]
pub fn run_pair<RA: Send + 'static, RB: Send + 'static>(
    sa: Schedule,
    sb: Schedule,
    timeout: Duration,
    watchdog: Duration,
    fa: impl FnOnce(&mut dyn Channel) -> RA + Send + 'static,
    fb: impl FnOnce(&mut dyn Channel) -> RB + Send + 'static,
) -> (Ended<(RA, Vec<Applied>, u64, u64)>, Ended<(RB, Vec<Applied>, u64, u64)>) {
    let opts = crate::ChannelOptions { timeout, ..Default::default() };
    let (a, b) = crate::MemChannel::pair_with(opts);
    let ga = spawn_guarded(move || {
        let mut ch = FaultyChannel::new(a, sa);
        ch.timeout = timeout;
        let r = fa(&mut ch);
        let applied = ch.applied().to_vec();
        (r, applied, ch.sent, ch.recvd)
    });
    let gb = spawn_guarded(move || {
        let mut ch = FaultyChannel::new(b, sb);
        ch.timeout = timeout;
        let r = fb(&mut ch);
        let applied = ch.applied().to_vec();
        (r, applied, ch.sent, ch.recvd)
    });
    let deadline = Instant::now() + watchdog;
    (ga.wait(deadline), gb.wait(deadline))
}

/// A campaign of `n` random single-fault schedules against a two-party
/// protocol (see the module docs for the invariant). `party_a`/`party_b`
/// run one party each on the channel they are given and return their
/// output or an error message; `check` judges the outputs (see [`judge`]).
/// The first run is fault-free and must be correct: it also gives the
/// message counts that the schedules aim at. Seeds are `seed0 + i`.
pub fn campaign_pair<OA, OB, FA, FB>(
    n: u64,
    seed0: u64,
    mix: &Mix,
    timeout: Duration,
    watchdog: Duration,
    party_a: FA,
    party_b: FB,
    check: impl Fn(Option<&OA>, Option<&OB>) -> Option<bool>,
) -> Tally
where
    OA: Send + 'static,
    OB: Send + 'static,
    FA: Fn(&mut dyn Channel) -> std::result::Result<OA, String> + Send + Sync + Clone + 'static,
    FB: Fn(&mut dyn Channel) -> std::result::Result<OB, String> + Send + Sync + Clone + 'static,
{
    let mut tally = Tally::default();
    // fault-free reference run
    let (ea, eb) = run_pair(Schedule::none(), Schedule::none(), timeout, watchdog, party_a.clone(), party_b.clone());
    let (ra, rb) = match (ea, eb) {
        (Ended::Returned(a), Ended::Returned(b)) => (a, b),
        (a, b) => {
            tally.add(0, &[], &Verdict::Violation(format!("fault-free run did not finish: a {}, b {}", state(&a), state(&b))));
            return tally;
        }
    };
    let (counts_a, counts_b) = ((ra.2, ra.3), (rb.2, rb.3));
    let v = match (&ra.0, &rb.0) {
        (Ok(a), Ok(b)) if check(Some(a), Some(b)) == Some(true) => Verdict::Correct,
        (a, b) => Verdict::Violation(format!(
            "fault-free run not correct: a {:?}, b {:?}",
            a.as_ref().err(),
            b.as_ref().err()
        )),
    };
    tally.add(0, &[], &v);
    if v != Verdict::Correct {
        return tally;
    }
    for i in 0..n {
        let seed = seed0.wrapping_add(i);
        let mut rng = SplitMix(seed);
        let on_a = rng.below(2) == 0;
        let (sa, sb) = if on_a {
            (Schedule::random_one(&mut rng, counts_a.0, counts_a.1, mix), Schedule::none())
        } else {
            (Schedule::none(), Schedule::random_one(&mut rng, counts_b.0, counts_b.1, mix))
        };
        let scheduled: Vec<FaultKind> = sa.faults.iter().chain(&sb.faults).map(|f| f.kind).collect();
        let (ea, eb) = run_pair(sa, sb, timeout, watchdog, party_a.clone(), party_b.clone());
        let mut applied: Vec<FaultKind> = Vec::new();
        let (ua, ub) = (unpack(ea, &mut applied), unpack(eb, &mut applied));
        if applied.is_empty() {
            applied = scheduled.clone();
        }
        let names: Vec<&'static str> = scheduled.iter().map(|k| k.name()).collect();
        // judge both ends with one output type: erase to a pair of options
        let ends: Vec<Ended<std::result::Result<(Option<OA>, Option<OB>), String>>> = vec![
            match ua {
                Ended::Returned(r) => Ended::Returned(r.map(|o| (Some(o), None))),
                Ended::Panicked(m) => Ended::Panicked(m),
                Ended::Hung => Ended::Hung,
            },
            match ub {
                Ended::Returned(r) => Ended::Returned(r.map(|o| (None, Some(o)))),
                Ended::Panicked(m) => Ended::Panicked(m),
                Ended::Hung => Ended::Hung,
            },
        ];
        let v = judge(ends, &applied, |outs| {
            let mut it = outs.into_iter();
            let a = it.next().flatten().and_then(|p| p.0);
            let b = it.next().flatten().and_then(|p| p.1);
            check(a.as_ref(), b.as_ref())
        });
        let v = match v {
            Verdict::Violation(m) => Verdict::Violation(format!("{m}; schedule {scheduled:?} on party {}", if on_a { 'a' } else { 'b' })),
            v => v,
        };
        tally.add(seed, &names, &v);
    }
    tally
}

fn unpack<R>(e: Ended<(R, Vec<Applied>, u64, u64)>, applied: &mut Vec<FaultKind>) -> Ended<R> {
    match e {
        Ended::Returned((r, ap, _, _)) => {
            applied.extend(ap.iter().map(|a| a.fault.kind));
            Ended::Returned(r)
        }
        Ended::Panicked(m) => Ended::Panicked(m),
        Ended::Hung => Ended::Hung,
    }
}

fn state<T>(e: &Ended<T>) -> &'static str {
    match e {
        Ended::Returned(_) => "returned",
        Ended::Panicked(_) => "panicked",
        Ended::Hung => "hung",
    }
}
