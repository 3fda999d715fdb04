//! The bit-sliced AND layers (and linear layers) at every SIMD level this
//! CPU supports against the portable level, bit for bit: the same seed
//! gives the same ring messages (every party's view) and the same outputs.

use hush_primitives::simd::{self, Level};
use hush_replicated::engine::Kernel;
use hush_replicated::local::eval_local;
use hush_replicated::{Circuit, Evaluator, Program};

fn prog(name: &str) -> Program {
    let c = Circuit::load(&format!("{}/circuits/{name}.txt", env!("CARGO_MANIFEST_DIR"))).unwrap();
    Program::compile(&c)
}

#[test]
fn every_level_matches_portable() {
    for name in ["aes_128", "adder64", "sha256"] {
        let p = prog(name);
        for words in [1usize, 3, 8, 17] {
            let input: Vec<u64> = (0..p.n_in * words).map(|i| (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(i as u32 % 64)).collect();
            let seed = Some([7u8; 16]);
            let want = simd::with_level(Level::Portable, || eval_local(&p, words, &input, seed, true).unwrap()).unwrap();
            simd::for_each_level("replicated engine", |l| {
                let ev = Evaluator::new(&p, words).unwrap();
                assert_eq!(ev.kernel(), Kernel::for_level(l));
                let got = eval_local(&p, words, &input, seed, true).unwrap();
                assert!(got.outputs == want.outputs, "{name} words {words} level {l}: outputs differ from portable");
                assert!(got.views == want.views, "{name} words {words} level {l}: ring messages differ from portable");
            });
        }
    }
}

#[test]
fn unsupported_kernel_is_not_forced() {
    let p = prog("adder64");
    let mut ev = Evaluator::new(&p, 2).unwrap();
    for l in Level::ALL {
        let k = Kernel::for_level(l);
        ev.set_kernel(k);
        assert_eq!(ev.kernel() == k, k.supported(), "{l}");
        assert_eq!(k.supported(), l.supported() || k == Kernel::Portable, "{l}");
    }
}
