//! One party's compute cost per secure AES (messages looped back to itself).
use hush_replicated::{araki::PartyKeys, Circuit, Evaluator, Program};
use hush_transport::MemChannel;
fn main() {
    let a: Vec<usize> = std::env::args().skip(1).map(|s| s.parse().unwrap()).collect();
    let words = *a.first().unwrap_or(&64);
    let chunks = *a.get(1).unwrap_or(&16);
    let c = Circuit::builtin("aes128").unwrap();
    let p = Program::compile(&c);
    let keys = PartyKeys::from_keys(0, [1; 16], [2; 16]);
    let (mut tx, mut rx) = MemChannel::pair();
    let mut ev = Evaluator::new(&p, words).unwrap();
    let input = vec![0x5555u64; p.n_in * 2 * words];
    let mut out = vec![0u64; p.n_out * words];
    let t = std::time::Instant::now();
    for ch in 0..chunks {
        ev.eval_chunk(&keys, 1, ch as u64, &input, &mut out, &mut tx, &mut rx).unwrap();
    }
    let s = t.elapsed().as_secs_f64();
    println!("words {words}: {:.0} AES/s for one party on one core", (chunks * words * 64) as f64 / s);
}
