//! Fuzzing regressions in the test command: every fuzz target
//! (`fuzz/src/targets.rs`, included here verbatim) runs on its seed inputs,
//! on every file committed under `tests/corpus/<target>/`, and on 150
//! deterministic mutations per seed (bit flips, cuts, insertions, splices).
//! A panic fails the test; so does a target that takes more than 10 s on
//! one input.

#[path = "../../../fuzz/src/targets.rs"]
mod targets;

use std::path::PathBuf;
use std::time::{Duration, Instant};

struct Mix(u64);
impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(r: &mut Mix, s: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = s.to_vec();
    for _ in 0..1 + r.below(4) {
        match r.below(6) {
            0 if !v.is_empty() => {
                let i = r.below(v.len());
                v[i] ^= 1 << r.below(8);
            }
            1 if !v.is_empty() => {
                let i = r.below(v.len());
                v[i] = [0, 1, 0x7f, 0x80, 0xff][r.below(5)];
            }
            2 => {
                let n = r.below(v.len() + 1);
                v.truncate(n);
            }
            3 => {
                let i = r.below(v.len() + 1);
                let b = r.next() as u8;
                v.insert(i, b);
            }
            4 if !other.is_empty() => {
                let i = r.below(v.len() + 1);
                let j = r.below(other.len());
                v.truncate(i);
                v.extend_from_slice(&other[j..]);
            }
            _ if v.len() >= 4 => {
                let i = r.below(v.len() - 3);
                v[i..i + 4].copy_from_slice(&(r.next() as u32).to_le_bytes());
            }
            _ => {}
        }
    }
    v
}

fn timed(t: &str, d: &[u8], what: &str) {
    let t0 = Instant::now();
    targets::run(t, d);
    assert!(t0.elapsed() < Duration::from_secs(10), "{t}: {what} took {:?}", t0.elapsed());
}

#[test]
fn fuzz_corpus_and_mutations() {
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus");
    let mut files = 0;
    for t in targets::TARGETS {
        let seeds = targets::seeds(t);
        for s in &seeds {
            timed(t, s, "a seed");
        }
        if let Ok(rd) = std::fs::read_dir(corpus.join(t)) {
            for f in rd.flatten() {
                timed(t, &std::fs::read(f.path()).unwrap(), &f.path().display().to_string());
                files += 1;
            }
        }
        let mut r = Mix(0xC0FFEE ^ t.len() as u64);
        let per = if t.starts_with("peer_") { 60 } else { 150 };
        for (k, s) in seeds.iter().enumerate() {
            let other = &seeds[(k + 1) % seeds.len()];
            for i in 0..per {
                let m = mutate(&mut r, s, other);
                timed(t, &m, &format!("mutation {i} of seed {k}"));
            }
        }
    }
    eprintln!("replayed {files} corpus files");
}
