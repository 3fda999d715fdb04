//! Fault injection (see `hush_transport::faulty`) for the inference
//! runtime in tee mode, families fss and tami: a server session
//! ([`runtime::serve_session`]) and a client session (hello, module seed
//! agreement, pre-dealing, one inference, quit) over an in-memory pair while
//! one message is dropped, duplicated, reordered, truncated, delayed,
//! corrupted above or below the frame checksum, or the link is closed.
//! Invariant: both parties end within the watchdog; the client's logits are
//! the plaintext fixed-point reference's (fss: exactly; tami: within its
//! truncation bound) or someone reports an error; never a panic or a hang;
//! a truncation, close, delay or wire corruption never yields a wrong
//! output. `HUSH_FAULT_SCHEDULES` sets the number of schedules (default 50).

use hush_inference::model::Builder;
use hush_inference::runtime::{self, ClientSession, Options};
use hush_inference::{reference, FixedConfig, Model, Plan};
use hush_primitives::{Block, Prg};
use hush_transport::faulty::{campaign_pair, schedules_from_env, Mix};
use hush_transport::{Channel, Cost};
use std::sync::Arc;
use std::time::Duration;

/// A borrowed channel as an owned one (ClientSession takes its channel by value).
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
    let (mut b, x) = Builder::new("faults", &[2, 6, 6]);
    let (w, bias) = (rnd(&mut p, 3 * 2 * 9, 0.4), rnd(&mut p, 3, 0.1));
    let y = b.conv(x, 3, [3, 3], [1, 1], [1; 4], &w, &bias);
    let y = b.relu(y);
    let y = b.maxpool(y, [2, 2], [2, 2], [0; 4]);
    let y = b.flatten(y);
    let (w, bias) = (rnd(&mut p, 4 * 27, 0.3), rnd(&mut p, 4, 0.1));
    let y = b.dense(y, 4, &w, &bias);
    Model::from_bytes(&b.finish(y)).unwrap()
}

fn campaign(proto: &'static str, seed0: u64) {
    let m = Arc::new(model());
    let cfg = FixedConfig::default();
    let plan = Arc::new(Plan::new(&m, cfg).unwrap());
    let mut p = Prg::new(Block(9));
    let x: Vec<f64> = rnd(&mut p, m.input_len(), 2.0).into_iter().map(|v| v as f64).collect();
    let xq = Arc::new(plan.encode_input(&x).unwrap());
    let want = reference::run(&plan, &xq).unwrap();
    let opts = Options { proto: proto.into(), chunk: 100, ..Default::default() };
    let (m2, p2, o2) = (m.clone(), plan.clone(), opts.clone());
    let server = move |ch: &mut dyn Channel| -> Result<usize, String> {
        runtime::serve_session(ch, &m2, &p2, &o2).map_err(|e| e.to_string())
    };
    let client = move |ch: &mut dyn Channel| -> Result<Vec<u64>, String> {
        let e = |e: hush_inference::Error| e.to_string();
        let mut s = ClientSession::start(Borrowed(ch), &opts).map_err(e)?;
        s.predeal_next = false;
        let y = s.infer_ring(&xq).map_err(e)?;
        s.close().map_err(e)?;
        Ok(y)
    };
    let bits = cfg.bits;
    let tally = campaign_pair(
        schedules_from_env(50),
        seed0,
        &Mix::default(),
        Duration::from_secs(1),
        Duration::from_secs(20),
        server,
        client,
        move |_srv, cl| {
            let y = cl?;
            if y.len() != want.len() {
                return Some(false);
            }
            let tol: i64 = if proto == "fss" { 0 } else { 16 };
            let sh = 64 - bits;
            Some(y.iter().zip(&want).all(|(a, b)| {
                let d = ((a.wrapping_sub(*b) << sh) as i64) >> sh;
                d.abs() <= tol
            }))
        },
    );
    eprint!("{}", tally.report(&format!("inference-{proto}")));
    assert!(tally.violations.is_empty(), "{}", tally.report(proto));
}

#[test]
fn faults_inference_fss() {
    campaign("fss", 20_000);
}

#[test]
fn faults_inference_tami() {
    campaign("tami", 21_000);
}
