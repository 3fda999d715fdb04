//! In-process throughput of secure AES (three threads, in-memory channels).
//! `cargo run --release -p hush-replicated --example aes_local -- WORDS CHUNKS`
use hush_replicated::{local::eval_local, Circuit, Program};
fn main() {
    let a: Vec<usize> = std::env::args().skip(1).map(|s| s.parse().unwrap()).collect();
    let words = *a.first().unwrap_or(&64);
    let chunks = *a.get(1).unwrap_or(&16);
    let c = Circuit::builtin("aes128").unwrap();
    let p = Program::compile(&c);
    println!("slots {} depth {} ands {} max_layer {}", p.nslots, p.depth, p.and_count, p.max_layer_ands);
    let input = vec![0x5555u64; p.n_in * words];
    let t = std::time::Instant::now();
    for _ in 0..chunks {
        eval_local(&p, words, &input, Some([1; 16]), false).unwrap();
    }
    let s = t.elapsed().as_secs_f64();
    println!("{:.0} AES/s", (chunks * words * 64) as f64 / s);
}
