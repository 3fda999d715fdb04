//! Both parties of a COT source in this process on two threads, as in
//! `hush bench cot`, reporting each party's thread CPU time and wall time for
//! n COTs after setup (diagnostics; in-memory channel, in-process module).
//!
//! `cargo run --release -p hush-correlations --example cot_parties [silent|ferret] [n] [reps]`
//! (`reps` runs of n COTs each, the best CPU and wall time of each party;
//! `UNFUSED=1` runs the GGM and LPN stages one after another instead of
//! interleaved, `SourceConfig::fused`).
use hush_correlations::registry::{setup_receiver, setup_sender, SourceConfig, TeeBackend};
use hush_primitives::{BitVec, Block, Prg};
use hush_transport::MemChannel;
use std::sync::{Arc, Barrier};
use std::time::Instant;

fn cpu() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

fn main() {
    let src = std::env::args().nth(1).unwrap_or_else(|| "silent".into());
    let n: usize = std::env::args().nth(2).and_then(|x| x.parse().ok()).unwrap_or(10_000_000);
    let reps: usize = std::env::args().nth(3).and_then(|x| x.parse().ok()).unwrap_or(1).max(1);
    let mut cfg = SourceConfig::named(&src);
    cfg.tee = TeeBackend::InProcess;
    cfg.fused = std::env::var("UNFUSED").is_err();
    let (mut a, mut b) = MemChannel::pair();
    let bar = Arc::new(Barrier::new(2));
    let (c1, c2, b1, b2) = (cfg.clone(), cfg, bar.clone(), bar);
    let s = std::thread::spawn(move || {
        let mut s = setup_sender(&c1, &mut a, &mut Prg::new(Block(1))).unwrap();
        // The output buffer is allocated and touched before the clock
        // starts, as in `hush bench cot`.
        let mut q = vec![Block::ONES; 1 << 20];
        let mut best = (f64::INFINITY, f64::INFINITY);
        for _ in 0..reps {
            b1.wait();
            let (c, w) = (cpu(), Instant::now());
            let mut done = 0;
            while done < n {
                let m = (n - done).min(1 << 20);
                s.send_cots(&mut a, &mut q[..m]).unwrap();
                done += m;
            }
            best = (best.0.min(cpu() - c), best.1.min(w.elapsed().as_secs_f64()));
        }
        best
    });
    let mut r = setup_receiver(&c2, &mut b, &mut Prg::new(Block(2))).unwrap();
    let mut t = vec![Block::ONES; 1 << 20];
    let mut bits = BitVec::zeros(0);
    let mut rc = (f64::INFINITY, f64::INFINITY);
    for _ in 0..reps {
        b2.wait();
        let (c, w) = (cpu(), Instant::now());
        let mut done = 0;
        while done < n {
            let m = (n - done).min(1 << 20);
            r.recv_cots(&mut b, &mut bits, &mut t[..m]).unwrap();
            done += m;
        }
        rc = (rc.0.min(cpu() - c), rc.1.min(w.elapsed().as_secs_f64()));
    }
    let sc = s.join().unwrap();
    println!("{src} n={n} (best of {reps}): sender cpu {:.4}s wall {:.4}s | receiver cpu {:.4}s wall {:.4}s", sc.0, sc.1, rc.0, rc.1);
}
