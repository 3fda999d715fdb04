//! Row selection from the key owner's encrypted table
//! (`hush_rlwe::cheetah::select`) over an in-memory channel: against the
//! plaintext table with random and edge indices, its bytes and flights,
//! and malformed peers. Deterministic (fixed seeds).

use hush_primitives::{Block, Prg};
use hush_rlwe::cheetah::{select_bytes, Config, HeClient, HeServer};
use hush_rlwe::{Context, Params};
use hush_transport::{Channel, ChannelExt, MemChannel};
use std::sync::Arc;

fn mask(bits: u32) -> u64 {
    (1u64 << bits) - 1
}

struct Run {
    owner: Vec<u64>,
    reader: Vec<u64>,
    owner_sent: u64,
    reader_sent: u64,
    rounds: u64,
}

/// The owner (key holder, table) and the reader (ids), keys set up in the
/// owner → reader direction first; costs counted after the setup.
fn run(params: Params, cfg: Config, rows: usize, width: usize, table: &[u64], ids: &[u32], seed: u128) -> Run {
    let ctx = Arc::new(Context::new(params).unwrap());
    let (mut co, mut cr) = MemChannel::pair();
    let (ctx2, ids2) = (ctx.clone(), ids.to_vec());
    let reader = std::thread::spawn(move || {
        let mut s = HeServer::setup(&mut cr, ctx2, cfg, Prg::new(Block(seed + 1))).unwrap();
        let c0 = cr.cost();
        let v = s.select_reader(&mut cr, rows, width, &ids2).unwrap();
        (v, cr.cost().bytes_sent - c0.bytes_sent)
    });
    let mut o = HeClient::setup(&mut co, ctx, cfg, Prg::new(Block(seed + 2))).unwrap();
    let c0 = co.cost();
    let owner = o.select_owner(&mut co, rows, width, table, ids.len()).unwrap();
    let c1 = co.cost();
    let (reader, reader_sent) = reader.join().unwrap();
    Run { owner, reader, owner_sent: c1.bytes_sent - c0.bytes_sent, reader_sent, rounds: (c1.rounds - c0.rounds) as u64 }
}

fn check(params: Params, bits: u32, rows: usize, width: usize, ids: &[u32], seed: u128) -> Run {
    let cfg = Config::new(bits);
    let mut prg = Prg::new(Block(seed));
    let table: Vec<u64> = (0..rows * width).map(|_| prg.next_u64() & mask(bits)).collect();
    let r = run(params, cfg, rows, width, &table, ids, seed);
    assert_eq!(r.owner.len(), ids.len() * width);
    for (q, &id) in ids.iter().enumerate() {
        for c in 0..width {
            let got = r.owner[q * width + c].wrapping_add(r.reader[q * width + c]) & mask(bits);
            assert_eq!(got, table[id as usize * width + c], "query {q} (row {id}) entry {c}");
        }
    }
    r
}

#[test]
fn selected_rows_equal_the_table_rows() {
    // N = 256: width 60 → 4 rows per ciphertext, 37 rows → 10 ciphertexts
    // (the last one partly empty); the first and last rows, rows at the
    // start and end of a ciphertext, repeated rows, random rows
    let mut prg = Prg::new(Block(77));
    let mut ids: Vec<u32> = vec![0, 36, 3, 4, 35, 36, 0, 17, 17, 17];
    ids.extend((0..30).map(|_| prg.gen_below(37) as u32));
    check(Params::insecure_test_n256(), 16, 37, 60, &ids, 1);
    // a row as wide as the ciphertext (one row each), ℓ = 37
    check(Params::insecure_test_n256(), 37, 5, 256, &[4, 0, 2, 2], 2);
    // one query, width 1 (256 rows per ciphertext)
    check(Params::insecure_test_n256(), 20, 600, 1, &[599], 3);
    // more queries than one response batch (32), ℓ = 47 on the real set
    let ids: Vec<u32> = (0..40).map(|_| prg.gen_below(1000) as u32).collect();
    check(Params::he128_n8192(), 47, 1000, 768, &ids, 4);
}

#[test]
fn selection_pins_its_bytes_and_flights() {
    let ids: Vec<u32> = vec![1, 2, 3, 30, 31, 9, 0];
    let r = check(Params::insecure_test_n256(), 16, 37, 60, &ids, 9);
    let ctx = Context::new(Params::insecure_test_n256()).unwrap();
    let (up, down) = select_bytes(&ctx, &Config::new(16), 37, 60, ids.len()).unwrap();
    assert_eq!((r.owner_sent as usize, r.reader_sent as usize), (up, down));
    // the owner's ciphertexts, then the reader's responses: two flights, one
    // round trip as the owner counts it
    assert_eq!(r.rounds, 1);
    // 10 seeded ciphertexts (37 rows, 4 per ciphertext); 7 responses of a
    // (256 coefficients) and 60 coefficients of b at k = 16 + 9 + 2 = 27 bits
    assert_eq!(up, 10 * hush_rlwe::he::SeededCt::wire_len(&ctx));
    assert_eq!(down, 7 * (256 * 27 / 8 + (60 * 27usize).div_ceil(8)));
}

#[test]
fn a_bad_reader_request_or_peer_is_an_error_not_a_panic() {
    let ctx = Arc::new(Context::new(Params::insecure_test_n256()).unwrap());
    let cfg = Config::new(16);
    // a row beyond the table, a row wider than a ciphertext, an empty table
    let (mut co, mut cr) = MemChannel::pair();
    let ctx2 = ctx.clone();
    let h = std::thread::spawn(move || HeClient::setup(&mut co, ctx2, cfg, Prg::new(Block(1))).map(|_| co));
    let mut s = HeServer::setup(&mut cr, ctx.clone(), cfg, Prg::new(Block(2))).unwrap();
    let _co = h.join().unwrap().unwrap();
    assert!(s.select_reader(&mut cr, 10, 8, &[10]).is_err());
    assert!(s.select_reader(&mut cr, 10, 257, &[0]).is_err());
    assert!(s.select_reader(&mut cr, 0, 8, &[]).is_err());
    // the owner: a table of the wrong size, entries beyond 2^ℓ
    let (mut co, mut cr) = MemChannel::pair();
    let ctx2 = ctx.clone();
    let h = std::thread::spawn(move || HeServer::setup(&mut cr, ctx2, cfg, Prg::new(Block(2))).map(|_| cr));
    let mut o = HeClient::setup(&mut co, ctx.clone(), cfg, Prg::new(Block(1))).unwrap();
    let _cr = h.join().unwrap().unwrap();
    assert!(o.select_owner(&mut co, 10, 8, &[0u64; 79], 1).is_err());
    assert!(o.select_owner(&mut co, 10, 8, &[1u64 << 16; 80], 1).is_err());
    // a reader receiving garbage where the owner's ciphertexts go: residues
    // beyond the primes are refused with an error
    let (mut co, mut cr) = MemChannel::pair();
    let ctx2 = ctx.clone();
    let h = std::thread::spawn(move || {
        let _o = HeClient::setup(&mut co, ctx2, cfg, Prg::new(Block(1))).unwrap();
        let (up, _) = select_bytes(&Context::new(Params::insecure_test_n256()).unwrap(), &cfg, 8, 64, 1).unwrap();
        co.send_chunked(&vec![0xffu8; up]).unwrap();
        co
    });
    let mut s = HeServer::setup(&mut cr, ctx.clone(), cfg, Prg::new(Block(2))).unwrap();
    let e = s.select_reader(&mut cr, 8, 64, &[5]).unwrap_err();
    assert!(e.to_string().contains("table ciphertext"), "{e}");
    drop(h.join().unwrap());
    // an owner receiving a short response: an error (the reader went silent)
    let (mut co, mut cr) = MemChannel::pair();
    let ctx2 = ctx.clone();
    let h = std::thread::spawn(move || {
        let s = HeServer::setup(&mut cr, ctx2, cfg, Prg::new(Block(2))).unwrap();
        let (up, _) = select_bytes(&Context::new(Params::insecure_test_n256()).unwrap(), &cfg, 8, 64, 1).unwrap();
        let mut buf = vec![0u8; up];
        cr.recv_chunked_into("test", &mut buf).unwrap();
        cr.send_chunked(&[1, 2, 3]).unwrap();
        drop(s);
        cr
    });
    let mut o = HeClient::setup(&mut co, ctx, cfg, Prg::new(Block(1))).unwrap();
    assert!(o.select_owner(&mut co, 8, 64, &[0u64; 8 * 64], 1).is_err());
    drop(h.join().unwrap());
}
