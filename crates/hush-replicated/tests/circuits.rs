//! Bristol circuits: parser, wire-order conventions, plaintext vs Rust
//! references, plaintext vs secure evaluation, malformed files.

use aes::cipher::{BlockEncrypt, KeyInit};
use hush_replicated::bristol::{value_bits_from_hex, value_bits_to_hex, Circuit};
use hush_replicated::local::{eval_local, run_hex};
use hush_replicated::prf::Prg;
use hush_replicated::{Error, Program};

fn circuit_path(name: &str) -> String {
    format!("{}/circuits/{name}.txt", env!("CARGO_MANIFEST_DIR"))
}

fn load(name: &str) -> Circuit {
    Circuit::load(&circuit_path(name)).unwrap()
}

/// Packs per-instance input bit vectors into bit-sliced words.
fn slice(instances: &[Vec<bool>], nbits: usize, words: usize) -> Vec<u64> {
    let mut out = vec![0u64; nbits * words];
    for (k, bits) in instances.iter().enumerate() {
        for (w, &b) in bits.iter().enumerate() {
            if b {
                out[w * words + k / 64] |= 1 << (k % 64);
            }
        }
    }
    out
}

fn unslice(words_v: &[u64], nbits: usize, words: usize, k: usize) -> Vec<bool> {
    (0..nbits).map(|w| (words_v[w * words + k / 64] >> (k % 64)) & 1 == 1).collect()
}

fn random_hex(rng: &mut Prg, bytes: usize) -> String {
    (0..bytes).map(|_| format!("{:02x}", rng.next_u64() as u8)).collect()
}

fn aes_ref(key: &[u8; 16], pt: &[u8; 16]) -> [u8; 16] {
    let c = aes::Aes128::new(&(*key).into());
    let mut b = aes::Block::from(*pt);
    c.encrypt_block(&mut b);
    b.into()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap()).collect()
}

#[test]
fn hex_wire_order_roundtrip() {
    let bits = value_bits_from_hex("8001", 16).unwrap();
    assert!(bits[0] && bits[15] && bits.iter().filter(|&&b| b).count() == 2);
    assert_eq!(value_bits_to_hex(&bits), "8001");
    assert!(value_bits_from_hex("02", 1).is_err());
    assert!(value_bits_from_hex("01", 1).is_ok());
    assert!(value_bits_from_hex("0g", 8).is_err());
    assert!(value_bits_from_hex("000", 8).is_err());
}

#[test]
fn fips197_plaintext_and_secure() {
    let c = Circuit::builtin("aes128").unwrap();
    assert_eq!(c.and_count(), 6400);
    let inputs = vec!["000102030405060708090a0b0c0d0e0f".to_string(), "00112233445566778899aabbccddeeff".to_string()];
    let bits = c.inputs_from_hex(&inputs).unwrap();
    let plain = c.outputs_to_hex(&c.eval_plain(&bits).unwrap());
    assert_eq!(plain, vec!["69c4e0d86a7b0430d8cdb78070b4c55a"]);
    assert_eq!(run_hex(&c, &inputs).unwrap(), vec!["69c4e0d86a7b0430d8cdb78070b4c55a"]);
}

#[test]
fn secure_aes_matches_software_aes() {
    let c = Circuit::builtin("aes128").unwrap();
    let prog = Program::compile(&c);
    let mut rng = Prg::from_seed([42; 16]);
    let n = 200;
    let words = 4;
    let mut keys = Vec::new();
    let mut pts = Vec::new();
    let mut inst = Vec::new();
    for _ in 0..n {
        let k = random_hex(&mut rng, 16);
        let p = random_hex(&mut rng, 16);
        inst.push(c.inputs_from_hex(&[k.clone(), p.clone()]).unwrap());
        keys.push(k);
        pts.push(p);
    }
    let run = eval_local(&prog, words, &slice(&inst, 256, words), None, false).unwrap();
    for k in 0..n {
        let got = c.outputs_to_hex(&unslice(&run.outputs, 128, words, k));
        let want = aes_ref(&unhex(&keys[k]).try_into().unwrap(), &unhex(&pts[k]).try_into().unwrap());
        assert_eq!(got[0], hex(&want), "instance {k}");
    }
}

type Reference = fn(&[u64]) -> Vec<u64>;

fn u64_circuits() -> Vec<(&'static str, Reference)> {
    vec![
        ("adder64", |v| vec![v[0].wrapping_add(v[1])]),
        ("sub64", |v| vec![v[0].wrapping_sub(v[1])]),
        ("neg64", |v| vec![v[0].wrapping_neg()]),
        ("mult64", |v| vec![v[0].wrapping_mul(v[1])]),
        ("zero_equal", |v| vec![(v[0] == 0) as u64]),
    ]
}

#[test]
fn arithmetic_circuits_match_rust() {
    let mut rng = Prg::from_seed([3; 16]);
    for (name, f) in u64_circuits() {
        let c = load(name);
        for t in 0..40 {
            let mut vals: Vec<u64> = c.inputs.iter().map(|_| rng.next_u64()).collect();
            if t % 10 == 0 {
                vals.iter_mut().for_each(|v| *v = 0);
            }
            if t % 10 == 1 {
                vals[0] = u64::MAX;
            }
            let hexes: Vec<String> = vals.iter().map(|v| format!("{v:016x}")).collect();
            let bits = c.inputs_from_hex(&hexes).unwrap();
            let out = c.outputs_to_hex(&c.eval_plain(&bits).unwrap());
            let want: Vec<String> = f(&vals)
                .iter()
                .zip(&c.outputs)
                .map(|(v, &w)| if w == 1 { format!("{v:02x}") } else { format!("{v:016x}") })
                .collect();
            assert_eq!(out, want, "{name} on {hexes:?}");
        }
    }
}

/// SHA-256 compression function (FIPS 180-4), the reference for sha256.txt.
fn sha256_compress(state: &mut [u32; 8], block: &[u8; 64]) {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be,
        0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa,
        0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85,
        0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3,
        0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f,
        0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    ];
    let mut w = [0u32; 64];
    for i in 0..16 {
        w[i] = u32::from_be_bytes(block[4 * i..4 * i + 4].try_into().unwrap());
    }
    for i in 16..64 {
        let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
        let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16].wrapping_add(s0).wrapping_add(w[i - 7]).wrapping_add(s1);
    }
    let mut h = *state;
    for i in 0..64 {
        let s1 = h[4].rotate_right(6) ^ h[4].rotate_right(11) ^ h[4].rotate_right(25);
        let ch = (h[4] & h[5]) ^ (!h[4] & h[6]);
        let t1 = h[7].wrapping_add(s1).wrapping_add(ch).wrapping_add(K[i]).wrapping_add(w[i]);
        let s0 = h[0].rotate_right(2) ^ h[0].rotate_right(13) ^ h[0].rotate_right(22);
        let maj = (h[0] & h[1]) ^ (h[0] & h[2]) ^ (h[1] & h[2]);
        let t2 = s0.wrapping_add(maj);
        h = [t1.wrapping_add(t2), h[0], h[1], h[2], h[3].wrapping_add(t1), h[4], h[5], h[6]];
    }
    for i in 0..8 {
        state[i] = state[i].wrapping_add(h[i]);
    }
}

#[test]
fn sha256_circuit_matches_compression_function() {
    let c = load("sha256");
    assert_eq!(c.inputs, vec![512, 256]);
    let iv: [u32; 8] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
    // SHA-256("abc") is one block.
    let mut block = [0u8; 64];
    block[..3].copy_from_slice(b"abc");
    block[3] = 0x80;
    block[63] = 24;
    let mut st = iv;
    sha256_compress(&mut st, &block);
    let st_hex: String = st.iter().map(|x| format!("{x:08x}")).collect();
    assert_eq!(st_hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    let iv_hex: String = iv.iter().map(|x| format!("{x:08x}")).collect();
    let bits = c.inputs_from_hex(&[hex(&block), iv_hex]).unwrap();
    let out = c.outputs_to_hex(&c.eval_plain(&bits).unwrap());
    assert_eq!(out, vec![st_hex]);
}

#[test]
fn every_circuit_plaintext_equals_secure() {
    let mut rng = Prg::from_seed([5; 16]);
    for name in ["aes_128", "adder64", "sub64", "neg64", "mult64", "zero_equal", "sha256"] {
        let c = load(name);
        let prog = Program::compile(&c);
        let words = if name == "sha256" { 1 } else { 2 };
        let mut input = vec![0u64; c.num_input_wires() * words];
        rng.fill_words(&mut input);
        let plain = c.eval_plain_sliced(words, &input).unwrap();
        let run = eval_local(&prog, words, &input, None, false).unwrap();
        assert_eq!(run.outputs, plain, "{name}");
        // Cost pin: every party sends one bit per AND per instance and
        // spends one round per AND layer.
        for i in 0..3 {
            assert_eq!(run.ring_cost[i].bytes_sent as usize, c.and_count() * 64 * words / 8, "{name} bytes");
            assert_eq!(run.ring_cost[i].bytes_recv as usize, c.and_count() * 64 * words / 8, "{name} bytes");
            assert_eq!(run.ring_cost[i].rounds as usize, c.and_depth(), "{name} rounds");
        }
    }
}

fn parse_err(text: &str) -> (usize, String) {
    match Circuit::parse("bad.txt", text) {
        Err(Error::Circuit { line, msg, .. }) => (line, msg),
        Err(e) => panic!("wrong error kind: {e}"),
        Ok(_) => panic!("accepted a malformed circuit:\n{text}"),
    }
}

#[test]
fn malformed_circuits_are_clear_errors() {
    let good = "2 5\n2 1 1\n1 1\n2 1 0 1 2 XOR\n2 1 2 0 4 AND\n";
    // The good one parses and wires 3 is simply unused.
    assert!(Circuit::parse("ok", "2 4\n2 1 1\n1 1\n2 1 0 1 2 XOR\n2 1 2 0 3 AND\n").is_ok());
    let _ = good;
    let cases: Vec<(&str, usize, &str)> = vec![
        ("", 1, "empty"),
        ("x 4\n", 1, "gates"),
        ("2\n", 1, "header"),
        ("1000000000000 4\n2 1 1\n1 1\n", 1, "limit"),
        ("2 4\n2 1 1\n1 1 1\n", 3, "lists"),
        ("2 4\n2 1 1\n", 2, "missing the outputs"),
        ("2 4\n2 1 1\n1 1\n2 1 0 9 2 XOR\n2 1 2 0 3 AND\n", 4, "out of range"),
        ("2 4\n2 1 1\n1 1\n2 1 0 2 2 XOR\n2 1 2 0 3 AND\n", 4, "not defined"),
        ("2 4\n2 1 1\n1 1\n2 1 0 1 2 XOR\n2 1 2 0 2 AND\n", 5, "already defined"),
        ("2 4\n2 1 1\n1 1\n2 1 0 1 2 NAND\n2 1 2 0 3 AND\n", 4, "unknown gate type"),
        ("2 4\n2 1 1\n1 1\n1 1 0 2 XOR\n2 1 2 0 3 AND\n", 4, "XOR needs 2"),
        ("2 4\n2 1 1\n1 1\n2 1 0 1 XOR\n2 1 2 0 3 AND\n", 4, "fields"),
        ("2 4\n2 1 1\n1 1\n2 1 0 1 2 XOR\n", 4, "truncated"),
        ("2 4\n2 1 1\n1 1\n2 1 0 1 2 XOR\n2 1 2 0 3 AND\n1 1 3 2 INV\n", 6, "more gates"),
        ("1 4\n2 1 1\n1 1\n2 1 0 1 2 XOR\n", 4, "never assigned"),
        ("1 3\n1 1\n1 1\n1 1 7 2 EQ\n", 4, "constant"),
        ("1 3\n1 1\n1 1\n3 1 0 1 0 2 MAND\n", 4, "MAND"),
    ];
    for (text, line, needle) in cases {
        let (l, msg) = parse_err(text);
        assert_eq!(l, line, "line for {text:?}: {msg}");
        assert!(msg.contains(needle), "message for {text:?} is {msg:?}, expected it to mention {needle:?}");
    }
    // Missing file.
    assert!(matches!(Circuit::load("/nonexistent/circuit.txt"), Err(Error::File { .. })));
    // MAND, EQ and EQW are understood.
    let c = Circuit::parse("m", "3 7\n2 2 2\n1 2\n4 2 0 1 2 3 4 5 MAND\n1 1 1 6 EQ\n1 1 4 5 EQW\n");
    assert!(c.is_err(), "wire 5 written twice");
    let c = Circuit::parse("m", "2 6\n2 2 2\n1 2\n4 2 0 1 2 3 4 5 MAND\n1 1 1 7 EQ\n");
    assert!(c.is_err());
    let c = Circuit::parse("m", "1 6\n2 2 2\n1 2\n4 2 0 1 2 3 4 5 MAND\n").unwrap();
    assert_eq!(c.and_count(), 2);
    assert_eq!(c.eval_plain(&[true, true, true, false]).unwrap(), vec![true, false]);
}

/// The pre-expanded-key AES circuit: key schedule removed (5,120 ANDs with
/// the bundled 32-AND S-box), equal to software AES on FIPS-197 and on
/// random keys given their expansion, securely evaluated too.
#[test]
fn aes128_expanded_matches_software_aes() {
    use hush_replicated::gen::{aes128_expanded_key_hex, aes128_expand_key};
    let c = Circuit::builtin("aes128-expanded").unwrap();
    assert_eq!(c.inputs, vec![1408, 128]);
    assert_eq!(c.and_count(), 5120, "10 rounds × 16 S-boxes × 32 ANDs");
    let full = Circuit::builtin("aes128").unwrap();
    assert!(c.and_depth() <= full.and_depth());
    let key: [u8; 16] = unhex("000102030405060708090a0b0c0d0e0f").try_into().unwrap();
    let inputs = vec![aes128_expanded_key_hex(&key), "00112233445566778899aabbccddeeff".to_string()];
    assert_eq!(c.outputs_to_hex(&c.eval_plain(&c.inputs_from_hex(&inputs).unwrap()).unwrap()), vec!["69c4e0d86a7b0430d8cdb78070b4c55a"]);
    assert_eq!(run_hex(&c, &inputs).unwrap(), vec!["69c4e0d86a7b0430d8cdb78070b4c55a"]);
    assert_eq!(aes128_expand_key(&key)[0], key);
    let mut rng = Prg::from_seed([8; 16]);
    for _ in 0..20 {
        let k: [u8; 16] = unhex(&random_hex(&mut rng, 16)).try_into().unwrap();
        let p: [u8; 16] = unhex(&random_hex(&mut rng, 16)).try_into().unwrap();
        let bits = c.inputs_from_hex(&[aes128_expanded_key_hex(&k), hex(&p)]).unwrap();
        assert_eq!(c.outputs_to_hex(&c.eval_plain(&bits).unwrap())[0], hex(&aes_ref(&k, &p)));
    }
    // Bristol text round trip.
    let text = hush_replicated::gen::to_bristol(&c);
    let back = Circuit::parse("x", &text).unwrap();
    assert_eq!(back.gates, c.gates);
}

/// Generated 64-bit comparators against Rust, plaintext and secure.
#[test]
fn comparators_match_rust() {
    let mut rng = Prg::from_seed([11; 16]);
    let cases: [(&str, fn(u64, u64) -> bool); 3] = [("lt64", |a, b| a < b), ("le64", |a, b| a <= b), ("eq64", |a, b| a == b)];
    for (name, f) in cases {
        let c = Circuit::builtin(name).unwrap();
        assert_eq!(c.outputs, vec![1]);
        for t in 0..200 {
            let a = rng.next_u64();
            let b = match t % 4 {
                0 => a,
                1 => a ^ (1 << (t % 64)),
                2 => a.wrapping_add(1),
                _ => rng.next_u64(),
            };
            let bits = c.inputs_from_hex(&[format!("{a:016x}"), format!("{b:016x}")]).unwrap();
            let out = c.eval_plain(&bits).unwrap();
            assert_eq!(out, vec![f(a, b)], "{name}({a:#x}, {b:#x})");
        }
        let prog = Program::compile(&c);
        let mut input = vec![0u64; 128 * 2];
        rng.fill_words(&mut input);
        assert_eq!(eval_local(&prog, 2, &input, None, false).unwrap().outputs, c.eval_plain_sliced(2, &input).unwrap(), "{name}");
    }
    assert!(Circuit::builtin("lt64").unwrap().and_depth() <= 7);
    assert_eq!(Circuit::builtin("eq64").unwrap().and_count(), 63);
}
