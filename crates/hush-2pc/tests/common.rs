#![allow(dead_code)]
use hush_2pc::tee::Dealer;
use hush_transport::{Channel, MemChannel};

/// Runs the two parties on two threads over an in-memory pair, each with
/// an in-process module (seed agreement included).
pub fn run_tee<A, B, RA, RB>(fa: A, fb: B) -> (RA, RB)
where
    A: FnOnce(&mut dyn Channel, &mut Dealer) -> RA + Send + 'static,
    B: FnOnce(&mut dyn Channel, &mut Dealer) -> RB + Send + 'static,
    RA: Send + 'static,
    RB: Send + 'static,
{
    let (mut ca, mut cb) = MemChannel::pair();
    let ta = std::thread::spawn(move || {
        let mut d = Dealer::in_process(&mut ca, 0).expect("seed agreement");
        fa(&mut ca, &mut d)
    });
    let tb = std::thread::spawn(move || {
        let mut d = Dealer::in_process(&mut cb, 1).expect("seed agreement");
        fb(&mut cb, &mut d)
    });
    (ta.join().expect("party 0"), tb.join().expect("party 1"))
}

pub fn run<A, B, RA, RB>(fa: A, fb: B) -> (RA, RB)
where
    A: FnOnce(&mut dyn Channel) -> RA + Send + 'static,
    B: FnOnce(&mut dyn Channel) -> RB + Send + 'static,
    RA: Send + 'static,
    RB: Send + 'static,
{
    let (mut ca, mut cb) = MemChannel::pair();
    let ta = std::thread::spawn(move || fa(&mut ca));
    let tb = std::thread::spawn(move || fb(&mut cb));
    (ta.join().expect("party 0"), tb.join().expect("party 1"))
}

/// Random values plus edge cases for an ℓ-bit ring.
pub fn edge_values(bits: u32, n: usize, seed: u64) -> Vec<u64> {
    let m = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let half = 1u64 << (bits - 1);
    let mut v = vec![0, 1, m, m - 1, half, half - 1, half + 1, 2, m - 2];
    let mut p = hush_primitives::Prg::new(hush_primitives::Block(seed as u128));
    while v.len() < n {
        v.push(p.next_u64() & m);
    }
    v.truncate(n);
    v
}
