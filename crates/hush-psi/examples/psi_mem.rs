//! One PSI between two threads over an in-memory channel pair, timed:
//! `cargo run --release -p hush-psi --example psi_mem -- N [OVERLAP]`.
//! Prints one JSON line per party (compute only: no TCP, no TLS).
use hush_psi::{run, PsiConfig, Role};
use hush_transport::{Channel, MemChannel};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let ov: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0.5);
    let c = (n as f64 * ov) as usize;
    let a: Vec<String> = (0..n).map(|i| format!("{i:016x}")).collect();
    let b: Vec<String> = (n - c..2 * n - c).map(|i| format!("{i:016x}")).collect();
    let (mut x, mut y) = MemChannel::pair();
    let t0 = Instant::now();
    let h = std::thread::spawn(move || {
        let r = run(&mut y, Role::Receiver, &b, &PsiConfig::default(), &mut rand::rngs::OsRng).unwrap();
        (r.intersection, y.cost())
    });
    let r = run(&mut x, Role::Sender, &a, &PsiConfig::default(), &mut rand::rngs::OsRng).unwrap();
    let wall = t0.elapsed().as_secs_f64();
    let (ib, cb) = h.join().unwrap();
    assert_eq!((r.intersection, ib), (c, c));
    let ca = x.cost();
    println!(
        "{{\"bench\":\"psi_mem\",\"n\":{n},\"intersection\":{c},\"wall_s\":{wall:.3},\"bytes\":{},\"rounds\":{},\"threads\":{}}}",
        ca.bytes_sent + cb.bytes_sent,
        ca.rounds,
        rayon::current_num_threads()
    );
}
