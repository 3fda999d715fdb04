//! The `soft` AES back end (level portable, RustCrypto `aes`) on one core,
//! best of 20 passes of 50 × 4096 blocks, one JSON line on stdout. Built
//! normally, the `aes` crate uses AES-NI when the CPU has it; built with
//! `RUSTFLAGS="--cfg aes_force_soft"` it runs its fixsliced software AES —
//! the path of a CPU without AES instructions. `scripts/record_iknp_emp.py
//! --aes-soft BINARY` runs it beside `openssl speed` with the same
//! instructions masked and records both.
//!
//! `cargo run --release -p hush-primitives --example aes_soft_speed`
use hush_primitives::aes::{Aes128, Backend};
use hush_primitives::Block;
use std::time::Instant;

fn main() {
    let a = Aes128::new(Block(0x2b7e_1516_28ae_d2a6_abf7_1588_09cf_4f3c));
    let mut buf: Vec<Block> = (0..4096u128).map(Block).collect();
    let mut best = f64::INFINITY;
    for _ in 0..20 {
        let t = Instant::now();
        for _ in 0..50 {
            a.encrypt_blocks_with(Backend::Soft, &mut buf);
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    std::hint::black_box(&buf);
    #[allow(unexpected_cfgs)]
    let forced = cfg!(aes_force_soft);
    println!(
        "{{\"bench\":\"aes-soft\",\"backend\":\"soft\",\"aes_force_soft\":{forced},\"batch\":4096,\"blocks_per_s\":{:.1}}}",
        50.0 * 4096.0 / best
    );
}
