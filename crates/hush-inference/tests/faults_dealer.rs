//! Fault injection for the inference runtime in **dealer mode** (families
//! fss and tami): a dealer service on loopback, a server session and a
//! client session (hello, dealer session open/join, pre-dealing, one
//! inference, quit), with one fault per run on one of three links:
//!
//! * the **party link** (server–client, in memory): a `FaultyChannel`
//!   drops, duplicates, reorders, truncates, delays, corrupts (above or
//!   below the frame checksum) or closes one message, either endpoint;
//! * the **server–dealer** or **client–dealer** link (real TCP, plaintext):
//!   a frame-aware proxy hits one frame of either direction — it duplicates
//!   it, truncates it (re-framed with a valid checksum), flips a payload bit
//!   above the checksum (re-framed: what a broken peer or dealer can send),
//!   flips a bit of the payload as sent (below the checksum), delays it
//!   (300 ms, below every timeout), or cuts the connection there (at once,
//!   or after a 1.5 s stall).
//!
//! Not drawn on the dealer links: drop and reorder. The link is request–
//! response, so a lost frame leaves it silent until the party's 60 s
//! receive timeout (`hush_transport::DEFAULT_TIMEOUT`): bounded, but too
//! slow for a campaign; the stall-then-cut models the same loss.
//!
//! Invariant (as in `faults.rs`): both parties end within the watchdog;
//! the client's output is the plaintext reference's (fss: exactly; tami:
//! within its truncation bound) or someone reports an error; never a panic
//! or a hang; a truncation, cut, delay or a flip below the checksum never
//! yields a wrong output accepted. After the campaign the dealer holds no
//! session and still serves a fault-free run. `HUSH_FAULT_SCHEDULES` sets
//! the number of schedules (default 50).

use hush_inference::model::Builder;
use hush_inference::runtime::{self, ClientSession, Mode, Options};
use hush_inference::{reference, FixedConfig, Model, Plan};
use hush_primitives::{Block, Prg};
use hush_transport::faulty::{judge, run_pair, schedules_from_env, Ended, FaultKind, Mix, Schedule, SplitMix, Tally, Verdict};
use hush_transport::{decode_header, encode_frame, Channel, Cost, HEADER_LEN};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Borrowed<'a>(&'a mut dyn Channel);

impl Channel for Borrowed<'_> {
    fn send(&mut self, p: &[u8]) -> hush_transport::Result<()> {
        self.0.send(p)
    }
    fn recv(&mut self) -> hush_transport::Result<Vec<u8>> {
        self.0.recv()
    }
    fn cost(&self) -> Cost {
        self.0.cost()
    }
    fn max_frame(&self) -> usize {
        self.0.max_frame()
    }
    fn set_timeout(&mut self, t: Duration) {
        self.0.set_timeout(t)
    }
}

fn rnd(p: &mut Prg, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| ((p.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32 * scale).collect()
}

fn model() -> Model {
    let mut p = Prg::new(Block(5));
    let (mut b, x) = Builder::new("faults-dealer", &[2, 6, 6]);
    let (w, bias) = (rnd(&mut p, 3 * 2 * 9, 0.4), rnd(&mut p, 3, 0.1));
    let y = b.conv(x, 3, [3, 3], [1, 1], [1; 4], &w, &bias);
    let y = b.relu(y);
    let y = b.maxpool(y, [2, 2], [2, 2], [0; 4]);
    let y = b.flatten(y);
    let (w, bias) = (rnd(&mut p, 4 * 27, 0.3), rnd(&mut p, 4, 0.1));
    let y = b.dense(y, 4, &w, &bias);
    Model::from_bytes(&b.finish(y)).unwrap()
}

// ---------------------------------------------------------------------------
// The frame-aware proxy of a party–dealer link

/// One fault on a dealer link: direction (0: party → dealer, 1: dealer →
/// party), frame index in that direction, what to do.
#[derive(Clone, Copy, Debug)]
struct WireFault {
    dir: usize,
    index: u64,
    kind: FaultKind,
    /// Close: after a 1.5 s stall instead of at once.
    stall: bool,
}

#[derive(Default)]
struct ProxyState {
    frames: [AtomicU64; 2],
    fired: AtomicBool,
}

const GREETING: usize = 8;

fn read_exact(s: &mut TcpStream, b: &mut [u8]) -> bool {
    s.read_exact(b).is_ok()
}

/// Forwards one direction: the greeting as is, then frame by frame.
fn pump(mut from: TcpStream, mut to: TcpStream, dir: usize, fault: Option<WireFault>, st: Arc<ProxyState>) {
    let cut = |a: &TcpStream, b: &TcpStream| {
        let _ = a.shutdown(Shutdown::Both);
        let _ = b.shutdown(Shutdown::Both);
    };
    let mut g = [0u8; GREETING];
    if !read_exact(&mut from, &mut g) || to.write_all(&g).is_err() {
        return cut(&from, &to);
    }
    loop {
        let mut h = [0u8; HEADER_LEN];
        if !read_exact(&mut from, &mut h) {
            return cut(&from, &to);
        }
        let Ok(hdr) = decode_header(&h, 1 << 30) else { return cut(&from, &to) };
        let mut body = vec![0u8; hdr.len];
        if !read_exact(&mut from, &mut body) {
            return cut(&from, &to);
        }
        let k = st.frames[dir].fetch_add(1, Ordering::SeqCst);
        let mut out: Vec<Vec<u8>> = Vec::new();
        let raw = |h: &[u8], b: &[u8]| [h, b].concat();
        match fault {
            Some(f) if f.dir == dir && f.index == k => {
                st.fired.store(true, Ordering::SeqCst);
                match f.kind {
                    FaultKind::Duplicate => {
                        out.push(raw(&h, &body));
                        out.push(raw(&h, &body));
                    }
                    FaultKind::Truncate { keep } => {
                        let b = if body.is_empty() { vec![0u8] } else { body[..keep % body.len()].to_vec() };
                        out.push(encode_frame(&b, hdr.depth, hdr.delay_ns));
                    }
                    FaultKind::Corrupt { bit } => {
                        if !body.is_empty() {
                            let i = bit % (8 * body.len());
                            body[i / 8] ^= 1 << (i % 8);
                        }
                        out.push(encode_frame(&body, hdr.depth, hdr.delay_ns));
                    }
                    FaultKind::CorruptWire { bit } => {
                        // payload and checksum bytes only: a flip in the
                        // length field would leave the link waiting (see
                        // faults_tcp.rs for flips anywhere in the stream)
                        let mut fr = raw(&h, &body);
                        let span = 4 + body.len();
                        let i = bit % (8 * span);
                        fr[HEADER_LEN - 4 + i / 8] ^= 1 << (i % 8);
                        out.push(fr);
                    }
                    FaultKind::Delay(d) => {
                        std::thread::sleep(d);
                        out.push(raw(&h, &body));
                    }
                    FaultKind::Close => {
                        if f.stall {
                            std::thread::sleep(Duration::from_millis(1500));
                        }
                        return cut(&from, &to);
                    }
                    FaultKind::Drop | FaultKind::Reorder => unreachable!("not drawn on dealer links"),
                }
            }
            _ => out.push(raw(&h, &body)),
        }
        for o in out {
            if to.write_all(&o).is_err() {
                return cut(&from, &to);
            }
        }
    }
}

/// A proxy for one party's dealer connection (the first it accepts; later
/// ones are forwarded without faults).
fn proxy(dealer: std::net::SocketAddr, fault: Option<WireFault>) -> (String, Arc<ProxyState>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let st = Arc::new(ProxyState::default());
    let s2 = st.clone();
    std::thread::spawn(move || {
        let mut first = true;
        // the listener lives until the run's parties are gone: accept with a deadline
        l.set_nonblocking(true).unwrap();
        let end = Instant::now() + Duration::from_secs(40);
        while Instant::now() < end {
            match l.accept() {
                Ok((a, _)) => {
                    a.set_nonblocking(false).unwrap();
                    let Ok(b) = TcpStream::connect(dealer) else { continue };
                    let f = if first { fault } else { None };
                    first = false;
                    let (a2, b2) = (a.try_clone().unwrap(), b.try_clone().unwrap());
                    let (sa, sb) = (s2.clone(), s2.clone());
                    std::thread::spawn(move || pump(a, b, 0, f, sa));
                    std::thread::spawn(move || pump(b2, a2, 1, f, sb));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    (addr, st)
}

fn dealer_fault(rng: &mut SplitMix, counts: [u64; 2]) -> WireFault {
    let dir = rng.below(2) as usize;
    let n = counts[dir].max(1);
    let index = if rng.below(2) == 0 { rng.below(n.min(4)) } else { rng.below(n) };
    let r = rng.next_u64() as usize;
    let (kind, stall) = match rng.below(7) {
        0 => (FaultKind::Duplicate, false),
        1 => (FaultKind::Truncate { keep: r }, false),
        2 => (FaultKind::Corrupt { bit: r }, false),
        3 => (FaultKind::CorruptWire { bit: r }, false),
        4 => (FaultKind::Delay(Duration::from_millis(300)), false),
        5 => (FaultKind::Close, false),
        _ => (FaultKind::Close, true),
    };
    WireFault { dir, index, kind, stall }
}

// ---------------------------------------------------------------------------
// One run and the campaign

struct Setup {
    m: Arc<Model>,
    plan: Arc<Plan>,
    xq: Arc<Vec<u64>>,
    want: Vec<u64>,
    proto: &'static str,
}

type Out = Result<Vec<u64>, String>;

/// One run; returns both ends, the faults that took effect, the party-link
/// message counts (server sent/recv, client sent/recv) and the dealer-link
/// frame counts (server link, client link).
#[allow(clippy::type_complexity)]
fn run(s: &Setup, dealer: std::net::SocketAddr, sa: Schedule, sb: Schedule, server_link: Option<WireFault>, client_link: Option<WireFault>) -> (Vec<Ended<Out>>, Vec<FaultKind>, [u64; 4], [[u64; 2]; 2]) {
    let (srv_addr, srv_st) = proxy(dealer, server_link);
    let (cl_addr, cl_st) = proxy(dealer, client_link);
    let base = Options { proto: s.proto.into(), chunk: 100, ..Default::default() };
    let so = Options { mode: Mode::Dealer { addr: srv_addr, pin: None }, ..base.clone() };
    let co = Options { mode: Mode::Dealer { addr: cl_addr, pin: None }, ..base };
    let (m2, p2) = (s.m.clone(), s.plan.clone());
    let xq = s.xq.clone();
    let server = move |ch: &mut dyn Channel| -> Out { runtime::serve_session(ch, &m2, &p2, &so).map(|_| Vec::new()).map_err(|e| e.to_string()) };
    let client = move |ch: &mut dyn Channel| -> Out {
        let e = |e: hush_inference::Error| e.to_string();
        let mut c = ClientSession::start(Borrowed(ch), &co).map_err(e)?;
        c.predeal_next = false;
        let y = c.infer_ring(&xq).map_err(e)?;
        c.close().map_err(e)?;
        Ok(y)
    };
    let (ea, eb) = run_pair(sa, sb, Duration::from_secs(1), Duration::from_secs(25), server, client);
    let mut applied = Vec::new();
    let mut counts = [0u64; 4];
    let mut ends = Vec::new();
    for (i, e) in [ea, eb].into_iter().enumerate() {
        ends.push(match e {
            Ended::Returned((r, ap, sent, recvd)) => {
                applied.extend(ap.iter().map(|a| a.fault.kind));
                counts[2 * i] = sent;
                counts[2 * i + 1] = recvd;
                Ended::Returned(r)
            }
            Ended::Panicked(m) => Ended::Panicked(m),
            Ended::Hung => Ended::Hung,
        });
    }
    for (st, f) in [(&srv_st, server_link), (&cl_st, client_link)] {
        if let (true, Some(f)) = (st.fired.load(Ordering::SeqCst), f) {
            applied.push(f.kind);
        }
    }
    let frames = [
        [srv_st.frames[0].load(Ordering::SeqCst), srv_st.frames[1].load(Ordering::SeqCst)],
        [cl_st.frames[0].load(Ordering::SeqCst), cl_st.frames[1].load(Ordering::SeqCst)],
    ];
    (ends, applied, counts, frames)
}

fn check(s: &Setup, bits: u32, outs: Vec<Option<Vec<u64>>>) -> Option<bool> {
    let y = outs.get(1).cloned().flatten()?;
    if y.len() != s.want.len() {
        return Some(false);
    }
    let tol: i64 = if s.proto == "fss" { 0 } else { 16 };
    let sh = 64 - bits;
    Some(y.iter().zip(&s.want).all(|(a, b)| {
        let d = ((a.wrapping_sub(*b) << sh) as i64) >> sh;
        d.abs() <= tol
    }))
}

fn campaign(proto: &'static str, seed0: u64) {
    let m = Arc::new(model());
    let cfg = FixedConfig::default();
    let plan = Arc::new(Plan::new(&m, cfg).unwrap());
    let mut p = Prg::new(Block(9));
    let x: Vec<f64> = rnd(&mut p, m.input_len(), 2.0).into_iter().map(|v| v as f64).collect();
    let xq = Arc::new(plan.encode_input(&x).unwrap());
    let want = reference::run(&plan, &xq).unwrap();
    let s = Setup { m, plan, xq, want, proto };
    let dcfg = hush_tee::dealer::DealerConfig { idle_timeout: Duration::from_secs(5), ..hush_tee::dealer::DealerConfig::new(hush_transport::LinkSecurity::Insecure, hush_2pc::deal::kinds()) };
    let dealer_log = Arc::new(Mutex::new(0u64));
    let dl = dealer_log.clone();
    let dealer = hush_tee::dealer::serve("127.0.0.1:0", dcfg, Arc::new(move |_| *dl.lock().unwrap() += 1)).unwrap();
    let d = dealer.addr;

    // fault-free reference run: must be correct; gives the counts aimed at
    let (ends, applied, counts, frames) = run(&s, d, Schedule::none(), Schedule::none(), None, None);
    let v = judge(ends, &applied, |o| check(&s, cfg.bits, o));
    assert_eq!(v, Verdict::Correct, "fault-free dealer-mode run");
    let mix = Mix::default();
    let mut tallies: [Tally; 3] = Default::default();
    for i in 0..schedules_from_env(50) {
        let seed = seed0 + i;
        let mut rng = SplitMix(seed);
        let link = rng.below(3);
        let (mut sa, mut sb, mut sl, mut cl) = (Schedule::none(), Schedule::none(), None, None);
        match link {
            0 => {
                if rng.below(2) == 0 {
                    sa = Schedule::random_one(&mut rng, counts[0], counts[1], &mix);
                } else {
                    sb = Schedule::random_one(&mut rng, counts[2], counts[3], &mix);
                }
            }
            1 => sl = Some(dealer_fault(&mut rng, frames[0])),
            _ => cl = Some(dealer_fault(&mut rng, frames[1])),
        }
        let scheduled: Vec<FaultKind> = sa.faults.iter().chain(&sb.faults).map(|f| f.kind).chain(sl.iter().chain(&cl).map(|f| f.kind)).collect();
        let (ends, mut applied, _, _) = run(&s, d, sa, sb, sl, cl);
        if applied.is_empty() {
            applied = scheduled.clone();
        }
        let v = match judge(ends, &applied, |o| check(&s, cfg.bits, o)) {
            Verdict::Violation(m) => Verdict::Violation(format!("{m}; link {link}, schedule {scheduled:?} {sl:?} {cl:?}")),
            v => v,
        };
        let names: Vec<&'static str> = scheduled.iter().map(|k| k.name()).collect();
        tallies[link as usize].add(seed, &names, &v);
    }
    let names = ["party-link", "server-dealer-link", "client-dealer-link"];
    let mut all = String::new();
    for (t, n) in tallies.iter().zip(names) {
        all += &t.report(&format!("inference-dealer-{proto}-{n}"));
    }
    eprint!("{all}");
    for t in &tallies {
        assert!(t.violations.is_empty(), "{all}");
    }
    // the dealer survived: no session left behind (idle timeout 5 s), and a
    // fault-free run is still correct
    let t = Instant::now();
    while dealer.live_sessions() > 0 {
        assert!(t.elapsed() < Duration::from_secs(30), "the dealer still holds {} session(s) after the campaign", dealer.live_sessions());
        std::thread::sleep(Duration::from_millis(50));
    }
    let (ends, applied, _, _) = run(&s, d, Schedule::none(), Schedule::none(), None, None);
    assert_eq!(judge(ends, &applied, |o| check(&s, cfg.bits, o)), Verdict::Correct, "fault-free run after the campaign");
    dealer.shutdown();
}

#[test]
fn faults_inference_dealer_fss() {
    campaign("fss", 40_000);
}

#[test]
fn faults_inference_dealer_tami() {
    campaign("tami", 41_000);
}
