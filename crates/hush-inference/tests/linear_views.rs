//! The module-dealt linear layer from each curious host's REAL view
//! (`hush_inference::linear`, `hush_tee::linear_deal`): the server's view
//! (F = x_C − B received, W·B − R_C from its module) must not depend on the
//! client's share; the client's view (B and R_C from its module, nothing
//! received) must not depend on the server's weights W. Deterministic
//! module seeds.

use hush_inference::linear;
use hush_inference::FixedConfig;
use hush_primitives::{Block, Prg};
use hush_tee::linear_deal::LinearOp;
use hush_tee::{InProcessModule, Module, ModuleRole};
use hush_transport::{Channel, MemChannel, Recording};
use std::sync::{Arc, Mutex};


const N_IN: usize = 64;
const N_OUT: usize = 16;
const INFERENCES: u64 = 256;

fn cfg() -> FixedConfig {
    FixedConfig::new(37, 12).unwrap()
}

fn weights(seed: u128) -> LinearOp {
    let mut p = Prg::new(Block(seed));
    let m = (1u64 << 37) - 1;
    LinearOp::Dense { n_in: N_IN as u32, n_out: N_OUT as u32, weight: (0..N_IN * N_OUT).map(|_| p.next_u64() & m).collect() }
}

struct Views {
    /// Server: every F it received, and W·F + (W·B − R_C) (what it can
    /// compute about the client's share), over all inferences.
    server_f: Vec<u64>,
    server_g: Vec<u64>,
    /// Client: everything its module released (B, R_C per inference) and
    /// the bytes the server sent it after seed agreement.
    client_released: Vec<u64>,
    server_bytes_sent: u64,
}

/// One session: seed agreement, the server loads W, then `INFERENCES`
/// inferences of one dense layer (batch = inference number, as the engine
/// does) with client share `x_c` and server share `x_s`.
fn session(op: LinearOp, x_c: Vec<u64>, x_s: Vec<u64>, seeds: (u128, u128)) -> Views {
    let cfg = cfg();
    let (ca, cb) = MemChannel::pair();
    let got = Arc::new(Mutex::new(Vec::new()));
    let mut sch = Recording::with_log(ca, got.clone());
    let client = std::thread::spawn(move || {
        let mut ch = cb;
        let mut m = InProcessModule::new(Module::with_rng(Prg::new(Block(seeds.1))));
        hush_tee::establish(&mut m, &mut ch, ModuleRole::Receiver).unwrap();
        let mut released = Vec::new();
        for batch in 0..INFERENCES {
            let d = linear::deal(&mut m, &cfg, 0, batch, N_IN, N_OUT).unwrap();
            released.extend_from_slice(&d.first);
            released.extend_from_slice(&d.second);
            linear::client_with(&mut ch, &cfg, d, &x_c, N_OUT).unwrap();
        }
        released
    });
    let mut m = InProcessModule::new(Module::with_rng(Prg::new(Block(seeds.0))));
    hush_tee::establish(&mut m, &mut sch, ModuleRole::Sender).unwrap();
    linear::load(&mut m, 0, &op).unwrap();
    let sent_before = sch.cost().bytes_sent;
    let mask = (1u64 << 37) - 1;
    let (mut server_f, mut server_g) = (Vec::new(), Vec::new());
    for batch in 0..INFERENCES {
        let d = linear::deal(&mut m, &cfg, 0, batch, N_IN, N_OUT).unwrap();
        let dealt = d.first.clone();
        got.lock().unwrap().clear();
        linear::server_with(&mut sch, &cfg, d, &op, &x_s).unwrap();
        let bytes: Vec<u8> = got.lock().unwrap().concat();
        let f = linear::unpack(&cfg, &bytes, "F").unwrap();
        assert_eq!(f.len(), N_IN);
        let mut wf = vec![0u64; N_OUT];
        op.apply(37, &f, &mut wf);
        server_g.extend(wf.iter().zip(&dealt).map(|(a, b)| a.wrapping_add(*b) & mask));
        server_f.extend_from_slice(&f);
    }
    let server_bytes_sent = sch.cost().bytes_sent - sent_before;
    let client_released = client.join().unwrap();
    Views { server_f, server_g, client_released, server_bytes_sent }
}

fn chi2(a: &[u64], b: &[u64]) -> f64 {
    a.iter().zip(b).filter(|(x, y)| **x + **y > 0).map(|(x, y)| (*x as f64 - *y as f64).powi(2) / (*x + *y) as f64).sum()
}

fn hist(v: &[u64]) -> ([u64; 16], [u64; 16]) {
    let (mut hi, mut lo) = ([0u64; 16], [0u64; 16]);
    for &x in v {
        hi[((x >> 33) & 15) as usize] += 1;
        lo[(x & 15) as usize] += 1;
    }
    (hi, lo)
}

/// χ² with 15 degrees of freedom: P(χ² > 45) < 10^-4.
const CHI2_15: f64 = 45.0;

/// The server's view — F = x_C − B over fresh masks, and W·F + (W·B − R_C)
/// = W·x_C − R_C — has the same distribution for two very different client
/// shares, and F never repeats between inferences (a reused B would repeat
/// it, and F − F' = x_C − x_C' would leak input differences).
///
/// Checked to fail (local, uncommitted edits of `hush_tee::linear_deal::masks`):
/// with B fixed to a constant, F is constant and χ² is 32,768 on the high
/// bits; with the batch number left out of the mask's key label (B reused
/// by every inference), χ² is ~4,600. Reusing B by dealing the same (layer,
/// batch) twice is refused by the module (`dealt_correlation_is_w_b_minus_r`
/// in hush-tee), so it cannot be staged from the host.
#[test]
fn server_view_is_independent_of_the_client_share() {
    let op = weights(7);
    let x_s = vec![3u64; N_IN];
    let a = session(op.clone(), vec![0u64; N_IN], x_s.clone(), (1, 2));
    let xc: Vec<u64> = (0..N_IN as u64).map(|i| (0x10_0000_0000 + 0x1234_5678 * i) & ((1 << 37) - 1)).collect();
    let b = session(op, xc, x_s, (3, 4));
    for (what, va, vb) in [("F", &a.server_f, &b.server_f), ("W·F + (W·B − R_C)", &a.server_g, &b.server_g)] {
        let (ha, la) = hist(va);
        let (hb, lb) = hist(vb);
        let (c_hi, c_lo) = (chi2(&ha, &hb), chi2(&la, &lb));
        assert!(c_hi < CHI2_15, "{what}: high bits depend on the client's share (χ² = {c_hi})");
        assert!(c_lo < CHI2_15, "{what}: low bits depend on the client's share (χ² = {c_lo})");
    }
    for v in [&a.server_f, &b.server_f] {
        for (i, w) in v.chunks(N_IN).collect::<Vec<_>>().windows(2).enumerate() {
            let same = w[0].iter().zip(w[1]).filter(|(x, y)| x == y).count();
            assert_eq!(same, 0, "F repeats between inferences {i} and {}", i + 1);
        }
    }
}

/// The client's whole view is the same, bit for bit, whatever the
/// server's weights: it receives no byte after seed agreement, and its
/// module's releases (B, R_C) are functions of the seed alone. (Exact
/// equality: any dependence of a release or a message on W fails it.)
#[test]
fn client_view_is_independent_of_the_weights() {
    let x = vec![9u64; N_IN];
    let a = session(weights(100), x.clone(), x.clone(), (5, 6));
    let b = session(weights(200), x.clone(), x, (5, 6));
    assert_eq!(a.server_bytes_sent, 0, "the client receives nothing in a linear layer");
    assert_eq!(b.server_bytes_sent, 0);
    assert_eq!(a.client_released.len(), INFERENCES as usize * (N_IN + N_OUT));
    assert!(a.client_released == b.client_released, "the client's module releases depend on W");
    // And the server's views differ (the weights were really different).
    assert_ne!(a.server_g, b.server_g);
}
