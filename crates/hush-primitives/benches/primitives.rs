use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use hush_primitives::{aes, hash, transpose, Block, Prg};

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("primitives");
    let n = 1 << 14;
    let a = aes::fixed_key();
    let mut buf = vec![Block(7); n];
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("fixed_key_aes_16k_blocks", |b| b.iter(|| a.encrypt_blocks(&mut buf)));
    let mut prg = Prg::new(Block(1));
    g.bench_function("prg_16k_blocks", |b| b.iter(|| prg.fill_blocks(&mut buf)));
    let xs = buf.clone();
    let mut out = vec![Block::ZERO; n];
    g.bench_function("tccr_hash_16k", |b| b.iter(|| hash::tccr_hash_many(0, &xs, &mut out)));
    let m = vec![0x5au8; 128 * n / 8];
    let mut t = vec![0u8; m.len()];
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("transpose_128x16k", |b| b.iter(|| transpose::transpose(&m, 128, n, &mut t)));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
