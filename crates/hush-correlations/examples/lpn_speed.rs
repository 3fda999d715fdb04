//! Times the LPN product and the GGM expansion of one FERRET_MAIN batch on
//! one thread (diagnostics for the COT benchmarks).
use hush_correlations::ggm::expand_box;
use hush_correlations::lpn::{LpnMatrix, FERRET_MAIN};
use hush_primitives::{Block, Prg};
use std::time::Instant;

fn main() {
    let p = if std::env::args().nth(2).is_some() { hush_correlations::lpn::LPN_B11 } else { FERRET_MAIN };
    let reps = if std::env::args().nth(2).is_some() { 19 } else { 1 };
    let mut base = if std::env::args().nth(1).is_some() { hush_correlations::lpn::huge_blocks(p.k) } else { vec![Block::ZERO; p.k] };
    Prg::new(Block(1)).fill_blocks(&mut base);
    let m = LpnMatrix::new(0, p.k);
    let mut out = if std::env::args().nth(1).is_some() { hush_correlations::lpn::huge_blocks(p.n) } else { vec![Block::ZERO; p.n] };
    for _ in 0..2 {
        let t = Instant::now();
        for _ in 0..reps {
            for (i, c) in out.chunks_mut(1 << 16).enumerate() {
                m.mul(&base, i << 16, c);
            }
        }
        println!("lpn {:.3}s", t.elapsed().as_secs_f64());
        let t = Instant::now();
        for _ in 0..reps {
            for (i, tree) in out.chunks_mut(p.leaves()).enumerate() {
                tree[0] = Block(i as u128);
                expand_box(tree, p.h);
            }
        }
        println!("ggm {:.3}s", t.elapsed().as_secs_f64());
    }
}
