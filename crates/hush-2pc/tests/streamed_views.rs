//! The streamed forms (`fss::streamed`, `tami::streamed`: dealing and the
//! online phase interleaved chunk by chunk) against a curious party that
//! looks **across chunks**.
//!
//! Their security argument (doc comments of both functions) is that every
//! chunk is a separate dealing under its own batch number, so its masks are
//! fresh and used once, and the run's view is the concatenation of
//! independent chunk views. What could break it is a chunk that reuses an
//! earlier chunk's masks (a batch number not advanced, a module stream
//! restarted per chunk, a key buffer reused without a fresh dealing). A
//! curious party would then see the same masked bytes twice, and with party
//! 0's input the same in both chunks, the difference of two received
//! messages would be a function of the inputs alone.
//!
//! Each test plays one party with its real received messages, with the
//! other party's secret input **constant across the whole batch**, so that
//! any mask reuse across chunks shows up as repeated bytes at the same
//! offset of the same flight of two chunks. With fresh masks a 32-bit word
//! repeats with probability 2^-32; the tests allow a few. They also compare
//! the distribution of what party 1 can compute about party 0's input
//! (x̂ − m, FSS masked form) for two very different inputs, chunk by chunk.
//!
//! Checked to fail (local, uncommitted edits): with `fss::streamed`
//! dealing its first chunk once and reusing those keys for every chunk,
//! the FSS test fails with all 256 x̂ of chunk k + 1 equal to chunk k's;
//! with `Dealer::next_batch` returning a constant, both tests fail earlier,
//! because the module refuses to deal a batch number twice.

use hush_2pc::fss::{self, FssGate, FssShape};
use hush_2pc::tami::{self, Flavor, TamiShape};
use hush_2pc::tee::Dealer;
use hush_transport::{Channel, MemChannel, Recording, ViewLog};

const BITS: u32 = 32;
const N: usize = 2048;
const CHUNK: usize = 256;
const CHUNKS: usize = N / CHUNK;

/// Runs both parties' streamed batch with party 0's input constant (`y`
/// everywhere) and returns (messages party 0 received, messages party 1
/// received, party 1's dealt inputs).
fn run_streamed(
    y: u64,
    f0: fn(&mut dyn Channel, &mut Dealer, &[u64]) -> (),
    f1: fn(&mut dyn Channel, &mut Dealer) -> Vec<u64>,
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>, Vec<u64>) {
    let (l0, l1): (ViewLog, ViewLog) = (Default::default(), Default::default());
    let (ca, cb) = MemChannel::pair();
    let (a, b) = (l0.clone(), l1.clone());
    let t0 = std::thread::spawn(move || {
        let mut rec = Recording::with_log(ca, a.clone());
        let mut d = Dealer::in_process(&mut rec, 0).expect("seed agreement");
        a.lock().unwrap().clear();
        f0(&mut rec, &mut d, &vec![y; N]);
    });
    let t1 = std::thread::spawn(move || {
        let mut rec = Recording::with_log(cb, b.clone());
        let mut d = Dealer::in_process(&mut rec, 1).expect("seed agreement");
        b.lock().unwrap().clear();
        f1(&mut rec, &mut d)
    });
    t0.join().expect("party 0");
    let m = t1.join().expect("party 1");
    let (r0, r1) = (l0.lock().unwrap().clone(), l1.lock().unwrap().clone());
    (r0, r1, m)
}

/// Splits a party's received messages into its CHUNKS chunks (the same
/// number of flights per chunk) and counts, for each pair of consecutive
/// chunks, the 32-bit words that repeat at the same offset of the same
/// flight. Returns (words compared, the largest repeat count of any pair).
fn cross_chunk_repeats(msgs: &[Vec<u8>], what: &str) -> (usize, usize) {
    assert!(!msgs.is_empty(), "{what}: no messages");
    assert_eq!(
        msgs.len() % CHUNKS,
        0,
        "{what}: {} messages for {CHUNKS} chunks",
        msgs.len()
    );
    let per = msgs.len() / CHUNKS;
    let (mut compared, mut worst) = (0usize, 0usize);
    for k in 0..CHUNKS - 1 {
        let mut same = 0;
        for f in 0..per {
            let (a, b) = (&msgs[k * per + f], &msgs[(k + 1) * per + f]);
            assert_eq!(
                a.len(),
                b.len(),
                "{what}: flight {f} of chunks {k} and {}",
                k + 1
            );
            for (wa, wb) in a.chunks_exact(4).zip(b.chunks_exact(4)) {
                compared += 1;
                same += (wa == wb) as usize;
            }
        }
        worst = worst.max(same);
    }
    (compared, worst)
}

fn fss_p0(ch: &mut dyn Channel, d: &mut Dealer, y: &[u64]) {
    let shape = FssShape {
        bits: BITS,
        gate: FssGate::Drelu,
    };
    fss::streamed(ch, d, 0, N, shape, Some(y), CHUNK).unwrap();
}
fn fss_p1(ch: &mut dyn Channel, d: &mut Dealer) -> Vec<u64> {
    let shape = FssShape {
        bits: BITS,
        gate: FssGate::Drelu,
    };
    fss::streamed(ch, d, 1, N, shape, None, CHUNK)
        .unwrap()
        .dealt_input
}
fn tami_p0(ch: &mut dyn Channel, d: &mut Dealer, y: &[u64]) {
    let shape = TamiShape::new(BITS, 4, 8, Flavor::Relu);
    tami::streamed(ch, d, 0, N, shape, Some(y), CHUNK, false).unwrap();
}
fn tami_p1(ch: &mut dyn Channel, d: &mut Dealer) -> Vec<u64> {
    let shape = TamiShape::new(BITS, 4, 8, Flavor::Relu);
    tami::streamed(ch, d, 1, N, shape, None, CHUNK, false)
        .unwrap()
        .dealt_input
}
fn tami_p0_overlap(ch: &mut dyn Channel, d: &mut Dealer, y: &[u64]) {
    let shape = TamiShape::new(BITS, 4, 8, Flavor::Relu);
    tami::streamed(ch, d, 0, N, shape, Some(y), CHUNK, true).unwrap();
}
fn tami_p1_overlap(ch: &mut dyn Channel, d: &mut Dealer) -> Vec<u64> {
    let shape = TamiShape::new(BITS, 4, 8, Flavor::Relu);
    tami::streamed(ch, d, 1, N, shape, None, CHUNK, true)
        .unwrap()
        .dealt_input
}

/// At most this many repeated 32-bit words between two consecutive chunks'
/// flights: with fresh masks the expected count is (words per chunk)·2^-32,
/// far below 1; a chunk that reused its predecessor's masks repeats all of
/// them.
const MAX_REPEATS: usize = 3;

/// FSS masked form, party 1 (receives x̂ = y + r per gate, one message per
/// chunk): no chunk repeats its predecessor's x̂, and x̂ − m (the best
/// statistic about y that party 1 holds) has the same high-nibble
/// distribution for two very different y in every chunk.
#[test]
fn streamed_fss_chunks_are_fresh_to_a_curious_party1() {
    let (_, r1a, ma) = run_streamed(0, fss_p0, fss_p1);
    let (_, r1b, mb) = run_streamed(0x8000_1234 + 7, fss_p0, fss_p1);
    for (r1, what) in [(&r1a, "y = 0"), (&r1b, "y = 2^31 + …")] {
        assert_eq!(r1.len(), CHUNKS, "one one-way message per chunk");
        let (compared, worst) = cross_chunk_repeats(r1, what);
        assert!(
            compared >= (CHUNKS - 1) * CHUNK,
            "{what}: compared {compared}"
        );
        assert!(
            worst <= MAX_REPEATS,
            "{what}: {worst} of {CHUNK} x̂ repeat between consecutive chunks"
        );
    }
    // Chunk by chunk, d = x̂ − m for y = 0 and for y = 2^31 + 0x1234 + 7:
    // two-sample χ² on the top 4 bits over all chunks, and per chunk the
    // count of d with the top bit set (which would be 0 or CHUNK for each
    // chunk if r were a constant within it).
    let d = |r1: &[Vec<u8>], m: &[u64]| -> Vec<u64> {
        r1.concat()
            .chunks_exact(4)
            .zip(m)
            .map(|(c, m)| {
                (u32::from_le_bytes(c.try_into().unwrap()) as u64).wrapping_sub(*m) & 0xffff_ffff
            })
            .collect()
    };
    let (da, db) = (d(&r1a, &ma), d(&r1b, &mb));
    assert_eq!((da.len(), db.len()), (N, N));
    let hist = |v: &[u64]| {
        let mut h = [0u64; 16];
        v.iter().for_each(|x| h[(x >> 28) as usize] += 1);
        h
    };
    let (ha, hb) = (hist(&da), hist(&db));
    let chi2: f64 = ha
        .iter()
        .zip(&hb)
        .filter(|(a, b)| **a + **b > 0)
        .map(|(a, b)| (*a as f64 - *b as f64).powi(2) / (*a + *b) as f64)
        .sum();
    // 15 degrees of freedom: P(χ² > 45) < 10^-4.
    assert!(
        chi2 < 45.0,
        "x̂ − m depends on y across the chunks: χ² = {chi2}"
    );
    for (v, what) in [(&da, "y = 0"), (&db, "y = 2^31 + …")] {
        for (k, c) in v.chunks(CHUNK).enumerate() {
            let top = c.iter().filter(|x| *x >> 31 == 1).count();
            // Binomial(256, 1/2): mean 128, sd 8; ±6 sd.
            assert!(
                (80..=176).contains(&top),
                "{what}: chunk {k} has {top} of {CHUNK} top bits set"
            );
        }
    }
}

/// TAMI ReLU (three flights per chunk), both parties' received flights,
/// sequential and with the dealing one chunk ahead on a second thread: no
/// chunk repeats its predecessor's bytes at the same offset of the same
/// flight, with party 0's input constant over the batch.
#[test]
fn streamed_tami_chunks_are_fresh_to_both_curious_parties() {
    for (f0, f1, how) in [
        (
            tami_p0 as fn(&mut dyn Channel, &mut Dealer, &[u64]),
            tami_p1 as fn(&mut dyn Channel, &mut Dealer) -> Vec<u64>,
            "sequential",
        ),
        (tami_p0_overlap, tami_p1_overlap, "overlapped"),
    ] {
        for y in [0u64, 0x8000_0000 + 99] {
            let (r0, r1, m) = run_streamed(y, f0, f1);
            assert_eq!(m.len(), N);
            for (r, who) in [(&r0, "party 0"), (&r1, "party 1")] {
                let what = format!("{how}, y = {y:#x}, {who}");
                let (compared, worst) = cross_chunk_repeats(r, &what);
                assert!(compared >= CHUNKS - 1, "{what}: compared {compared}");
                assert!(worst <= MAX_REPEATS, "{what}: {worst} words repeat between consecutive chunks ({compared} compared in all)");
            }
        }
    }
}
