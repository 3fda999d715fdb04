//! Hostile key bytes are errors, never panics; sanity checks that one key
//! alone looks random.

use hush_fss::{dcf_gen, drelu_gen, lt_gen, relu_gen, try_dcf_gen, DcfKey, DreluKey, Error, LtKey, ReluKey};
use hush_primitives::{Block, Prg};

fn all_decoders(b: &[u8]) {
    // Whatever happens, no panic.
    let _ = DcfKey::from_bytes(b);
    let _ = DreluKey::from_bytes(b);
    let _ = ReluKey::from_bytes(b);
    let _ = LtKey::from_bytes(b);
}

#[test]
fn malformed_dcf_keys_are_errors() {
    let mut prg = Prg::new(Block(20));
    let (k, _) = dcf_gen(&mut prg, 32, 1234, 5, 8);
    let good = k.to_bytes();
    assert!(DcfKey::from_bytes(&good).is_ok());
    // Every truncation and a one-byte extension.
    for len in 0..good.len() {
        assert!(matches!(DcfKey::from_bytes(&good[..len]), Err(Error::Length { .. })), "len {len}");
    }
    let mut long = good.clone();
    long.push(0);
    assert!(matches!(DcfKey::from_bytes(&long), Err(Error::Length { .. })));
    // Header fields.
    let bad = |i: usize, v: u8| {
        let mut b = good.clone();
        b[i] = v;
        DcfKey::from_bytes(&b)
    };
    assert!(matches!(bad(0, 0x00), Err(Error::Header { .. })), "tag");
    assert!(matches!(bad(1, 2), Err(Error::Header { .. })), "party");
    assert!(matches!(bad(2, 65), Err(Error::Header { .. })), "bits");
    assert!(matches!(bad(3, 0), Err(Error::Header { .. })), "out_bits 0");
    assert!(matches!(bad(3, 65), Err(Error::Header { .. })), "out_bits 65");
    assert!(matches!(bad(4, 3), Err(Error::Header { .. })), "lanes");
    // A different but valid shape makes the length wrong.
    assert!(matches!(bad(2, 31), Err(Error::Length { .. })));
    // Reserved seed bit set in the root seed / a correction word.
    assert!(matches!(bad(5, good[5] | 1), Err(Error::NonCanonical { .. })));
    assert!(matches!(bad(5 + 16, good[5 + 16] | 1), Err(Error::NonCanonical { .. })));
    // Padding bits of the bit-packed tail: 64 + 32·8 + 8 = 328 bits = 41
    // bytes exactly, so use a shape with padding (out_bits 7: 64+224+7 = 295).
    let (k7, _) = dcf_gen(&mut prg, 32, 1234, 5, 7);
    let mut b = k7.to_bytes();
    let last = b.len() - 1;
    b[last] |= 0x80;
    assert!(matches!(DcfKey::from_bytes(&b), Err(Error::NonCanonical { .. })));
}

#[test]
fn malformed_gate_keys_are_errors() {
    let mut prg = Prg::new(Block(21));
    let d = drelu_gen(&mut prg, 32, 77, 1, 16).0.to_bytes();
    let r = relu_gen(&mut prg, 32, 77, 1).1.to_bytes();
    let l = lt_gen(&mut prg, 32, 77, 5, 1, 16).0.to_bytes();
    assert!(DreluKey::from_bytes(&d).is_ok());
    assert!(ReluKey::from_bytes(&r).is_ok());
    assert!(LtKey::from_bytes(&l).is_ok());
    // Keys of one gate are not accepted as another.
    assert!(DreluKey::from_bytes(&r).is_err());
    assert!(ReluKey::from_bytes(&l).is_err());
    assert!(LtKey::from_bytes(&d).is_err());
    assert!(DcfKey::from_bytes(&d).is_err());
    for good in [&d, &r, &l] {
        for len in 0..good.len() {
            all_decoders(&good[..len]);
        }
    }
    // Offsets out of range for the output ring (DReLU out_bits = 16).
    let mut b = d.clone();
    b[4 + 7] = 0xff;
    assert!(matches!(DreluKey::from_bytes(&b), Err(Error::NonCanonical { .. })));
    // Gate header says party 1, embedded DCF says party 0.
    let mut b = d.clone();
    b[1] = 1;
    assert!(matches!(DreluKey::from_bytes(&b), Err(Error::Header { .. })));
    // Gate header bits disagree with the embedded DCF (length still right
    // for the outer parse, so the consistency check must catch it).
    let mut b = d.clone();
    b[2] = 31;
    assert!(DreluKey::from_bytes(&b).is_err());
    // ReLU with out_bits ≠ bits.
    let mut b = r.clone();
    b[3] = 31;
    assert!(matches!(ReluKey::from_bytes(&b), Err(Error::Header { .. })));
}

#[test]
fn random_bytes_never_panic() {
    let mut prg = Prg::new(Block(22));
    let mut buf = vec![0u8; 2000];
    for i in 0..3000 {
        let len = (prg.next_u64() % 2000) as usize;
        prg.fill_bytes(&mut buf[..len]);
        // Plausible headers too, so parsing gets past the first byte.
        if len > 5 {
            buf[0] = [0xD1, 0xE1, 0xE2, 0xE3][i % 4];
            buf[1] &= 1;
            buf[2] %= 65;
            buf[3] = buf[3] % 64 + 1;
            buf[4] = buf[4] % 2 + 1;
        }
        all_decoders(&buf[..len]);
    }
    // Bit flips in valid keys: error or a valid key, never a panic.
    let (k, _) = dcf_gen(&mut prg, 37, 99, 5, 9);
    let good = k.to_bytes();
    for i in 0..good.len() {
        for bit in 0..8 {
            let mut b = good.clone();
            b[i] ^= 1 << bit;
            all_decoders(&b);
        }
    }
}

#[test]
fn bad_parameters_are_errors() {
    let mut prg = Prg::new(Block(23));
    assert!(matches!(try_dcf_gen(&mut prg, 0, 0, 1, 1), Err(Error::Param { name: "bits", .. })));
    assert!(matches!(try_dcf_gen(&mut prg, 65, 0, 1, 1), Err(Error::Param { name: "bits", .. })));
    assert!(matches!(try_dcf_gen(&mut prg, 8, 0, 1, 0), Err(Error::Param { name: "out_bits", .. })));
    assert!(matches!(try_dcf_gen(&mut prg, 8, 256, 1, 8), Err(Error::Param { name: "alpha", .. })));
    assert!(hush_fss::gates::try_drelu_gen(&mut prg, 0, 0, 0, 1).is_err());
    assert!(hush_fss::gates::try_relu_gen(&mut prg, 65, 0, 0).is_err());
    assert!(hush_fss::gates::try_lt_gen(&mut prg, 8, 0, 256, 0, 1).is_err());
}

/// Not a security proof — a sanity check that correction words are not
/// trivially tied to α: keys for α and α' generated from the same PRG seed
/// differ in every correction word from the first level where the paths to
/// α and α' part (identical prefixes of α give identical corrections by
/// construction), and keys for the same α from different seeds differ in
/// every correction word.
#[test]
fn correction_words_look_random() {
    let bits = 32;
    let words = |k: &DcfKey| -> Vec<Vec<u8>> {
        let b = k.to_bytes();
        (0..bits as usize).map(|i| b[5 + 16 + 16 * i..5 + 32 + 16 * i].to_vec()).collect()
    };
    let mut seedp = Prg::new(Block(24));
    for _ in 0..20 {
        let a = seedp.next_u64() & 0xffff_ffff;
        let a2 = seedp.next_u64() & 0xffff_ffff;
        let seed = seedp.random_block();
        let k = dcf_gen(&mut Prg::new(seed), bits, a, 1, 32).1;
        let k_other_alpha = dcf_gen(&mut Prg::new(seed), bits, a2, 1, 32).1;
        let k_other_seed = dcf_gen(&mut Prg::new(seedp.random_block()), bits, a, 1, 32).1;
        let first_diff = (a ^ a2).leading_zeros() as usize - 32;
        let (w, wa, ws) = (words(&k), words(&k_other_alpha), words(&k_other_seed));
        for i in 0..bits as usize {
            assert_ne!(w[i], ws[i], "level {i}: same α, different seed");
            if i >= first_diff {
                assert_ne!(w[i], wa[i], "level {i}: different α");
            }
        }
        // About half the bits of each 127-bit seed correction are set.
        for s in &w {
            let ones: u32 = s.iter().map(|b| b.count_ones()).sum();
            assert!((30..=97).contains(&ones), "weight {ones}");
        }
    }
    // The DReLU share of one party is spread over the ring, not a function
    // of the input bit.
    let mut prg = Prg::new(Block(25));
    let mut seen = std::collections::HashSet::new();
    for x in 0..256u64 {
        let (k0, _) = drelu_gen(&mut prg, 16, x * 97, 0, 16);
        seen.insert(hush_fss::drelu_eval(0, &k0, x));
    }
    assert!(seen.len() > 200);
}

/// The gate batches' direct decoders (`extend_encoded`) give the batches
/// that `from_bytes` + `from_keys` give (compared by evaluating every key
/// at edge and random points) and refuse what `from_bytes` refuses.
#[test]
fn gate_batches_decode_straight_from_bytes() {
    use hush_fss::{DreluBatch, ReluBatch};
    let mut prg = Prg::new(Block(0xdec0de));
    for &bits in &[32u32, 17, 64, 2] {
        let lm = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let n = 70;
        let (mut rk, mut dk, mut xs) = (Vec::new(), Vec::new(), Vec::new());
        for j in 0..n {
            let r = prg.next_u64() & lm;
            let ro = prg.next_u64();
            let (a, _) = relu_gen(&mut prg, bits, r, ro);
            rk.push(a);
            let (_, b) = drelu_gen(&mut prg, bits, r, 1, 1);
            dk.push(b);
            xs.push(match j % 3 {
                0 => r,
                1 => r.wrapping_sub(1) & lm,
                _ => prg.next_u64() & lm,
            });
        }
        let renc: Vec<u8> = rk.iter().flat_map(|k| k.to_bytes()).collect();
        let denc: Vec<u8> = dk.iter().flat_map(|k| k.to_bytes()).collect();
        let rdec: Vec<ReluKey> = renc
            .chunks(ReluKey::size_bytes(bits))
            .map(|c| ReluKey::from_bytes(c).unwrap())
            .collect();
        let ddec: Vec<DreluKey> = denc
            .chunks(DreluKey::size_bytes(bits, 1))
            .map(|c| DreluKey::from_bytes(c).unwrap())
            .collect();
        let (ra, da) = (
            ReluBatch::from_keys(&rdec).unwrap(),
            DreluBatch::from_keys(&ddec).unwrap(),
        );
        for split in [0usize, 32, 5] {
            let kb = ReluKey::size_bytes(bits);
            let mut rb = ReluBatch::default();
            rb.extend_encoded(&renc[..split * kb], split).unwrap();
            rb.extend_encoded(&renc[split * kb..], n - split).unwrap();
            let db_kb = DreluKey::size_bytes(bits, 1);
            let mut db = DreluBatch::default();
            db.extend_encoded(&denc[..split * db_kb], split).unwrap();
            db.extend_encoded(&denc[split * db_kb..], n - split)
                .unwrap();
            let (mut o1, mut o2, mut s) = (vec![0; n], vec![0; n], vec![0; n]);
            ra.eval(0, &xs, &mut o1, &mut s);
            rb.eval(0, &xs, &mut o2, &mut s);
            assert_eq!(o1, o2, "relu {bits} split {split}");
            da.eval(1, &xs, &mut o1);
            db.eval(1, &xs, &mut o2);
            assert_eq!(o1, o2, "drelu {bits} split {split}");
        }
        // Refused: a truncated buffer, another gate's bytes, a flipped tag,
        // an offset out of range.
        let mut rb = ReluBatch::default();
        assert!(rb.extend_encoded(&renc[..renc.len() - 1], n).is_err());
        assert!(rb.extend_encoded(&denc, n).is_err());
        let mut bad = renc.clone();
        bad[ReluKey::size_bytes(bits) * 3] ^= 1;
        assert!(rb.extend_encoded(&bad, n).is_err());
        assert!(rb.is_empty());
        if bits < 64 {
            let mut bad = renc.clone();
            bad[ReluKey::size_bytes(bits) * 4 + 4 + 7] = 0xff;
            assert!(ReluKey::from_bytes(
                &bad[ReluKey::size_bytes(bits) * 4..ReluKey::size_bytes(bits) * 5]
            )
            .is_err());
            assert!(rb.extend_encoded(&bad, n).is_err());
        }
    }
}
