//! Resource limits of `hush serve` and `hush dealer` (see
//! `hush_inference::limits`): every limit, when exceeded, is a refusal with
//! a message naming it — at the client and in the server's log — and the
//! server keeps serving.

use hush_inference::limits::{self, ServerLimits};
use hush_transport::admission::{MemGate, PendingGate};
use hush_inference::model::Builder;
use hush_inference::runtime::{self, Options};
use hush_inference::{reference, FixedConfig, Model, Plan};
use hush_primitives::{Block, Prg};
use std::io::Read;
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn rnd(p: &mut Prg, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| ((p.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32 * scale).collect()
}

fn model() -> Model {
    let mut p = Prg::new(Block(5));
    let (mut b, x) = Builder::new("limits", &[2, 6, 6]);
    let (w, bias) = (rnd(&mut p, 3 * 2 * 9, 0.4), rnd(&mut p, 3, 0.1));
    let y = b.conv(x, 3, [3, 3], [1, 1], [1; 4], &w, &bias);
    let y = b.relu(y);
    let y = b.flatten(y);
    let (w, bias) = (rnd(&mut p, 4 * 108, 0.3), rnd(&mut p, 4, 0.1));
    let y = b.dense(y, 4, &w, &bias);
    Model::from_bytes(&b.finish(y)).unwrap()
}

type Log = Arc<Mutex<Vec<String>>>;

fn start(opts: Options) -> (runtime::ServerHandle, Log, Arc<Model>) {
    let m = Arc::new(model());
    let log: Log = Arc::default();
    let l = log.clone();
    let h = runtime::serve(m.clone(), "127.0.0.1:0", opts, Arc::new(move |s| l.lock().unwrap().push(s))).unwrap();
    (h, log, m)
}

fn input(m: &Model) -> Vec<f64> {
    let mut p = Prg::new(Block(9));
    rnd(&mut p, m.input_len(), 2.0).into_iter().map(|v| v as f64).collect()
}

/// One inference through a fresh session; its logits must be the reference's.
fn honest(addr: &str, m: &Model) -> Result<(), String> {
    let x = input(m);
    let mut s = runtime::connect(addr, &Options::default()).map_err(|e| e.to_string())?;
    let r = s.infer(&m.input_shape.clone(), &x, |_, _| {}).map_err(|e| e.to_string())?;
    s.close().map_err(|e| e.to_string())?;
    let plan = Plan::new(m, FixedConfig::default()).unwrap();
    assert_eq!(r.logits, reference::run_f64(&plan, &x).unwrap(), "an admitted session must be correct");
    Ok(())
}

/// Waits (liveness bound only) until `f` holds.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(20), "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn logged(log: &Log, needle: &str) -> bool {
    log.lock().unwrap().iter().any(|l| l.contains(needle))
}

/// The pre-dealing budget and the reservation `admit` gives a default client on this server.
fn admitted(m: &Model, session_mem: Option<u64>) -> (u64, u64) {
    let plan = Plan::new(m, FixedConfig::default()).unwrap();
    let o = Options::default();
    let l = ServerLimits::new(session_mem, None, 8);
    let (_, predeal, r) = limits::admit(&l, m, &plan, "fss", o.chunk, o.predeal_mem).unwrap();
    (predeal, r.bytes())
}

fn need(m: &Model, session_mem: Option<u64>) -> u64 {
    admitted(m, session_mem).1
}

#[test]
fn per_session_cap_below_the_model_is_refused_with_its_name() {
    let (h, log, m) = start(Options { limits: ServerLimits::new(Some(1 << 20), None, 8), ..Default::default() });
    let e = honest(&h.addr.to_string(), &m).unwrap_err();
    assert!(e.contains("per-session memory cap") && e.contains("--session-mem"), "{e}");
    eventually("the refusal in the server log", || logged(&log, "per-session memory cap"));
    h.shutdown();
}

#[test]
fn per_session_cap_fits_the_session_and_it_runs_correctly() {
    let m = model();
    let cap = 48 << 20;
    let (predeal, fitted) = admitted(&m, Some(cap));
    assert!(fitted <= cap, "a fitted session reserves within its cap: {fitted} > {cap}");
    assert!(predeal < Options::default().predeal_mem, "the cap must bind (pre-dealing budget fitted down)");
    let (h, _log, m) = start(Options { limits: ServerLimits::new(Some(cap), None, 8), ..Default::default() });
    honest(&h.addr.to_string(), &m).unwrap();
    eventually("the session counted as served", || h.sessions_ok.load(std::sync::atomic::Ordering::SeqCst) == 1);
    h.shutdown();
}

#[test]
fn global_cap_refuses_a_session_that_does_not_fit_and_admits_it_later() {
    let m0 = model();
    let one = need(&m0, None);
    // room for one session, not two (the resident-memory backstop is off:
    // this test process's memory must not decide)
    let total = one + one / 2;
    let l = ServerLimits { session_mem: None, mem: MemGate::with_rss(Some(total), None), pending: PendingGate::new(8) };
    let (h, log, m) = start(Options { limits: l, ..Default::default() });
    let addr = h.addr.to_string();
    let held = runtime::connect(&addr, &Options::default()).expect("the first session fits");
    let e = match runtime::connect(&addr, &Options::default()) {
        Ok(_) => panic!("a second session must be refused"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("server memory cap reached"), "{e}");
    eventually("the refusal in the server log", || logged(&log, "server memory cap reached"));
    held.close().unwrap();
    // once the first session has ended its reservation is back
    eventually("a new session admitted after the first ended", || honest(&addr, &m).is_ok());
    h.shutdown();
}

#[test]
fn pending_connections_beyond_the_bound_are_closed_at_once() {
    let (h, log, m) = start(Options { limits: ServerLimits::new(None, None, 1), ..Default::default() });
    let addr = h.addr.to_string();
    // a connection that never greets holds the only pending place (until
    // the handshake timeout)
    let silent = TcpStream::connect(&addr).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut refused = TcpStream::connect(&addr).unwrap();
    refused.set_read_timeout(Some(Duration::from_secs(4))).unwrap();
    let mut b = [0u8; 16];
    let t = Instant::now();
    match refused.read(&mut b) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        r => panic!("the connection beyond --max-pending must be closed at once, got {r:?} after {:?}", t.elapsed()),
    }
    eventually("the refusal in the server log", || logged(&log, "--max-pending"));
    // the silent one leaves: the place is free again and honest clients are served
    drop(silent);
    eventually("an honest session after the silent connection left", || honest(&addr, &m).is_ok());
    h.shutdown();
}

#[test]
fn dealer_pending_bound_and_memory_cap_refuse() {
    let mut cfg = hush_tee::dealer::DealerConfig::new(hush_transport::LinkSecurity::Insecure, hush_2pc::deal::kinds());
    cfg.max_pending = 1;
    let log: Log = Arc::default();
    let l = log.clone();
    let d = hush_tee::dealer::serve("127.0.0.1:0", cfg.clone(), Arc::new(move |s| l.lock().unwrap().push(s))).unwrap();
    let silent = TcpStream::connect(d.addr).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut refused = TcpStream::connect(d.addr).unwrap();
    refused.set_read_timeout(Some(Duration::from_secs(4))).unwrap();
    let mut b = [0u8; 16];
    assert!(matches!(refused.read(&mut b), Ok(0) | Err(_)), "closed at once");
    eventually("the dealer's refusal in its log", || logged(&log, "--max-pending"));
    drop(silent);
    d.shutdown();

    // a dealer whose resident memory is at its cap refuses to open sessions
    cfg.max_pending = 8;
    cfg.max_mem = Some(1);
    let d = hush_tee::dealer::serve("127.0.0.1:0", cfg, Arc::new(|_| {})).unwrap();
    let m = Arc::new(model());
    let o = Options { mode: runtime::Mode::Dealer { addr: d.addr.to_string(), pin: None }, ..Default::default() };
    let x = input(&m);
    let e = runtime::run_local(m.clone(), &m.input_shape.clone(), &x, &o, false, |_, _| {}).err().expect("refused").to_string();
    assert!(e.contains("dealer memory cap reached"), "{e}");
    d.shutdown();
}

/// Issue 33: a dealer-mode server checks its dealer when it starts (a
/// dead address fails `serve` before it listens, naming the check), and a
/// server caps the sessions one client address holds at once
/// (`--max-sessions-per-addr`): the extra session is refused with a
/// message naming the flag, the others run correctly.
#[test]
fn dealer_mode_server_checks_its_dealer_at_start_and_caps_sessions_per_address() {
    // a port with nothing behind it
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let mut o = Options { mode: runtime::Mode::Dealer { addr: dead, pin: None }, ..Default::default() };
    o.link = o.link.clone().with_connect_timeout(Duration::from_millis(300));
    let e = runtime::serve(Arc::new(model()), "127.0.0.1:0", o, Arc::new(|_| {})).err().expect("a server with a dead dealer must not start").to_string();
    assert!(e.contains("checked at start"), "{e}");
    // a live dealer: the server starts; per-address cap 2
    let d = hush_tee::dealer::serve("127.0.0.1:0", hush_tee::dealer::DealerConfig::new(hush_transport::LinkSecurity::Insecure, hush_2pc::deal::kinds()), Arc::new(|_| {})).unwrap();
    let o = Options { mode: runtime::Mode::Dealer { addr: d.addr.to_string(), pin: None }, max_sessions_per_addr: 2, ..Default::default() };
    let (h, log, m) = start(o.clone());
    let addr = h.addr.to_string();
    let a = runtime::connect(&addr, &o).unwrap();
    let b = runtime::connect(&addr, &o).unwrap();
    let e = runtime::connect(&addr, &o).err().expect("a third session from one address").to_string();
    assert!(e.contains("too many sessions from this address"), "{e}");
    eventually("the refusal in the server's log", || logged(&log, "--max-sessions-per-addr"));
    drop((a, b));
    let x = input(&m);
    let plan = Plan::new(&m, FixedConfig::default()).unwrap();
    eventually("a slot to free", || {
        runtime::connect(&addr, &o).ok().map(|mut s| {
            let r = s.infer(&m.input_shape.clone(), &x, |_, _| {}).unwrap();
            assert_eq!(r.logits, reference::run_f64(&plan, &x).unwrap());
        }).is_some()
    });
    d.shutdown();
}
