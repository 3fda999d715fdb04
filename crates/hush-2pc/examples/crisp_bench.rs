//! CRISP gates at the protocol layer: offline (dealing) and online time,
//! bytes and rounds of n MAC-carrying ReLUs (and truncations) plus the
//! final check, over an in-memory channel with in-process modules.
//!
//! `cargo run --release -p hush-2pc --example crisp_bench -- [n] [ell] [s]`
//! prints one JSON object per gate kind.
use hush_2pc::crisp::{self, Lift, Session};
use hush_2pc::tee::Dealer;
use hush_transport::{Channel, MemChannel};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let ell: u32 = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(37);
    let s: u32 = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(40);
    let l = Lift::new(ell, s).expect("lift");
    for kind in ["relu", "trunc12"] {
        let (mut ca, mut cb) = MemChannel::pair();
        let party = move |ch: &mut dyn Channel, p: u8| {
            let mut d = Dealer::in_process(ch, p).expect("seed agreement");
            let t0 = Instant::now();
            let mut sess = Session::start(&mut d, p, l).unwrap();
            let im = crisp::deal_masks(&mut d, &sess, n).unwrap();
            let om = crisp::deal_masks(&mut d, &sess, n).unwrap();
            let (rb, tb) = if kind == "relu" {
                (Some(crisp::deal_relu(&mut d, &sess, n).unwrap()), None)
            } else {
                (None, Some(crisp::deal_trunc(&mut d, &sess, n, 12).unwrap()))
            };
            let offline = t0.elapsed().as_secs_f64();
            let xs: Vec<u64> = (0..n as u64).map(|i| (i * 2654435761) & ((1u64 << ell) - 1)).collect();
            let x = crisp::input(ch, &mut sess, &im, if p == 1 { Some(&xs) } else { None }).unwrap();
            let c0 = ch.cost();
            let t1 = Instant::now();
            let y = match (&rb, &tb) {
                (Some(b), _) => crisp::relu(ch, &mut sess, b, &x).unwrap(),
                (_, Some(b)) => crisp::trunc(ch, &mut sess, b, &x).unwrap(),
                _ => unreachable!(),
            };
            let gate = t1.elapsed().as_secs_f64();
            let c1 = ch.cost();
            let t2 = Instant::now();
            crisp::reveal_to_client(ch, &mut sess, &om, &y, &mut |_| {}).unwrap();
            let check = t2.elapsed().as_secs_f64();
            let c2 = ch.cost();
            (offline, gate, check, c1 - c0, c2 - c1, d.dealt_bytes)
        };
        let ta = std::thread::spawn(move || party(&mut ca, 0));
        let b = party(&mut cb, 1);
        let a = ta.join().unwrap();
        println!(
            "{{\"bench\":\"crisp_gate\",\"gate\":\"{kind}\",\"n\":{n},\"ell\":{ell},\"s\":{s},\"offline_s\":{:.3},\"gate_online_s\":{:.3},\"check_release_s\":{:.3},\"gate_bytes\":{},\"gate_rounds\":{},\"check_bytes\":{},\"check_rounds\":{},\"dealt_bytes_server\":{},\"dealt_bytes_client\":{}}}",
            a.0.max(b.0), a.1.max(b.1), a.2.max(b.2), a.3.bytes_sent + b.3.bytes_sent, a.3.rounds, a.4.bytes_sent + b.4.bytes_sent, a.4.rounds, a.5, b.5
        );
    }
}
