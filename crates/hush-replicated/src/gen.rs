//! Circuits built in code rather than read from a bundled file:
//!
//! * `lt64`, `le64`, `eq64` — 64-bit unsigned comparators (log-depth
//!   trees, one output bit);
//! * `aes128-expanded` — AES-128 encryption taking the **pre-expanded key**
//!   (11 round keys) as input, derived from the bundled `aes_128.txt` by
//!   removing its key schedule ([`aes128_expanded`]).
//!
//! Every circuit here is an ordinary [`Circuit`]; [`to_bristol`] writes it
//! as Bristol Fashion text (`hush circuit export`).

use crate::bristol::{Circuit, Gate};
use std::sync::OnceLock;

/// A small circuit builder: inputs first, then gates; outputs are copied
/// onto the last wires at [`Builder::finish`].
struct Builder {
    n: u32,
    gates: Vec<Gate>,
    inputs: Vec<usize>,
}

impl Builder {
    fn new(inputs: &[usize]) -> Builder {
        Builder { n: inputs.iter().sum::<usize>() as u32, gates: Vec::new(), inputs: inputs.to_vec() }
    }
    fn wire(&mut self) -> u32 {
        self.n += 1;
        self.n - 1
    }
    fn xor(&mut self, a: u32, b: u32) -> u32 {
        let out = self.wire();
        self.gates.push(Gate::Xor { a, b, out });
        out
    }
    fn and(&mut self, a: u32, b: u32) -> u32 {
        let out = self.wire();
        self.gates.push(Gate::And { a, b, out });
        out
    }
    fn inv(&mut self, a: u32) -> u32 {
        let out = self.wire();
        self.gates.push(Gate::Inv { a, out });
        out
    }
    fn finish(mut self, name: &str, outputs: &[Vec<u32>]) -> Circuit {
        for o in outputs {
            for &a in o {
                let out = self.wire();
                self.gates.push(Gate::Copy { a, out });
            }
        }
        let header_gates = self.gates.len();
        Circuit {
            name: name.to_string(),
            num_wires: self.n as usize,
            inputs: self.inputs,
            outputs: outputs.iter().map(|o| o.len()).collect(),
            gates: self.gates,
            header_gates,
        }
    }
}

/// Unsigned comparison of two 64-bit values (wire `j` = bit `j`, as in the
/// bundled arithmetic circuits). `strict`: `a < b`; else `a ≤ b`.
///
/// Log-depth: per bit `lt_j = ¬a_j ∧ b_j`, `eq_j = ¬(a_j ⊕ b_j)`; pairs
/// merge as `lt = lt_hi ⊕ (eq_hi ∧ lt_lo)` (the two terms exclude each
/// other, so XOR is OR) and `eq = eq_hi ∧ eq_lo`. 64 + 2·63 − 1 ANDs (the
/// top `eq` is not needed for `<`), AND depth 7.
fn cmp64(name: &str, strict: bool) -> Circuit {
    let mut b = Builder::new(&[64, 64]);
    // (lt, eq) per bit, least significant first.
    let mut level: Vec<(u32, Option<u32>)> = (0..64u32)
        .map(|j| {
            let (a, bb) = (j, 64 + j);
            let na = b.inv(a);
            let lt = b.and(na, bb);
            let d = b.xor(a, bb);
            let eq = b.inv(d);
            (lt, Some(eq))
        })
        .collect();
    while level.len() > 1 {
        let top = level.len() == 2;
        level = level
            .chunks(2)
            .map(|p| {
                let (lo, hi) = (p[0], p[1]);
                let (lt_lo, eq_lo) = (lo.0, lo.1.expect("eq kept below the top"));
                let (lt_hi, eq_hi) = (hi.0, hi.1.expect("eq kept below the top"));
                let t = b.and(eq_hi, lt_lo);
                let lt = b.xor(lt_hi, t);
                // The root's eq is needed only for ≤.
                let eq = if top && strict { None } else { Some(b.and(eq_hi, eq_lo)) };
                (lt, eq)
            })
            .collect();
    }
    let (lt, eq) = level[0];
    let out = if strict {
        lt
    } else {
        let eq = eq.expect("kept for <=");
        b.xor(lt, eq)
    };
    b.finish(name, &[vec![out]])
}

/// Equality of two 64-bit values: 63 ANDs, depth 6.
fn eq64() -> Circuit {
    let mut b = Builder::new(&[64, 64]);
    let mut level: Vec<u32> = (0..64u32)
        .map(|j| {
            let d = b.xor(j, 64 + j);
            b.inv(d)
        })
        .collect();
    while level.len() > 1 {
        level = level.chunks(2).map(|p| b.and(p[0], p[1])).collect();
    }
    b.finish("eq64", &[vec![level[0]]])
}

/// The AES S-box, from the definition (inverse in GF(2^8) mod x^8+x^4+x^3+x+1,
/// then the affine map).
fn sbox(x: u8) -> u8 {
    fn mul(mut a: u8, mut b: u8) -> u8 {
        let mut p = 0u8;
        while b != 0 {
            if b & 1 == 1 {
                p ^= a;
            }
            let hi = a & 0x80;
            a <<= 1;
            if hi != 0 {
                a ^= 0x1b;
            }
            b >>= 1;
        }
        p
    }
    // x^254 = x^-1 (0 ↦ 0).
    let mut inv = 1u8;
    for _ in 0..254 {
        inv = mul(inv, x);
    }
    if x == 0 {
        inv = 0;
    }
    inv ^ inv.rotate_left(1) ^ inv.rotate_left(2) ^ inv.rotate_left(3) ^ inv.rotate_left(4) ^ 0x63
}

/// FIPS-197 key expansion: the 11 round keys of `key`, 16 bytes each, in
/// order (round key 0 = the key).
pub fn aes128_expand_key(key: &[u8; 16]) -> [[u8; 16]; 11] {
    let s: Vec<u8> = (0..=255u8).map(sbox).collect();
    let mut w = [[0u8; 4]; 44];
    for i in 0..4 {
        w[i].copy_from_slice(&key[4 * i..4 * i + 4]);
    }
    let mut rcon = 1u8;
    for i in 4..44 {
        let mut t = w[i - 1];
        if i % 4 == 0 {
            t = [s[t[1] as usize] ^ rcon, s[t[2] as usize], s[t[3] as usize], s[t[0] as usize]];
            rcon = if rcon & 0x80 != 0 { (rcon << 1) ^ 0x1b } else { rcon << 1 };
        }
        for k in 0..4 {
            w[i][k] = w[i - 4][k] ^ t[k];
        }
    }
    let mut rk = [[0u8; 16]; 11];
    for (r, k) in rk.iter_mut().enumerate() {
        for c in 0..4 {
            k[4 * c..4 * c + 4].copy_from_slice(&w[4 * r + c]);
        }
    }
    rk
}

/// The expanded key as the hex string `aes128-expanded` takes as its first
/// input: round keys 0..=10, 176 bytes, in order.
pub fn aes128_expanded_key_hex(key: &[u8; 16]) -> String {
    aes128_expand_key(key).iter().flatten().map(|b| format!("{b:02x}")).collect()
}

/// AES-128 with a pre-expanded key, derived from the bundled `aes_128.txt`.
///
/// **Derivation.** A wire of `aes_128.txt` is *key-side* if it does not
/// depend on the plaintext. Key-side gates are the key schedule; they are
/// dropped. Key-side wires read by a kept gate are round-key bits: each is
/// identified (by evaluating the original circuit on 64 random keys at
/// once and comparing with [`aes128_expand_key`]) with a bit of the
/// expanded key — or its complement (an `INV` is kept), or a constant —
/// and becomes an input wire. The first input is the 1408-bit expanded key
/// `rk_0 ‖ … ‖ rk_10` as one big-endian value (round key 0 in the most
/// significant bytes), the second the plaintext; the output is the
/// ciphertext, as in `aes_128.txt`.
///
/// `aes_128.txt`'s S-box costs 32 ANDs, so the result has 10 × 16 × 32 =
/// 5,120 ANDs (the key schedule's 40 S-boxes, 1,280 ANDs, are gone); with
/// the 34-AND S-box of the datacenter paper it would be 5,440.
pub fn aes128_expanded() -> &'static Circuit {
    static C: OnceLock<Circuit> = OnceLock::new();
    C.get_or_init(|| derive_aes128_expanded(&Circuit::builtin("aes128").expect("bundled")))
}

fn derive_aes128_expanded(orig: &Circuit) -> Circuit {
    let nw = orig.num_wires;
    // Plaintext dependence.
    let mut pt = vec![false; nw];
    for w in 128..256 {
        pt[w] = true;
    }
    for g in &orig.gates {
        let (o, v) = match *g {
            Gate::Xor { a, b, out } | Gate::And { a, b, out } => (out, pt[a as usize] || pt[b as usize]),
            Gate::Inv { a, out } | Gate::Copy { a, out } => (out, pt[a as usize]),
            Gate::Const { out, .. } => (out, false),
        };
        pt[o as usize] = v;
    }
    let reads = |g: &Gate| -> Vec<u32> {
        match *g {
            Gate::Xor { a, b, .. } | Gate::And { a, b, .. } => vec![a, b],
            Gate::Inv { a, .. } | Gate::Copy { a, .. } => vec![a],
            Gate::Const { .. } => vec![],
        }
    };
    let out_of = |g: &Gate| -> u32 {
        match *g {
            Gate::Xor { out, .. } | Gate::And { out, .. } | Gate::Inv { out, .. } | Gate::Copy { out, .. } | Gate::Const { out, .. } => out,
        }
    };
    // Boundary: key-side wires read by plaintext-side gates.
    let mut boundary: Vec<u32> = Vec::new();
    let mut is_b = vec![false; nw];
    for g in &orig.gates {
        if pt[out_of(g) as usize] {
            for r in reads(g) {
                if !pt[r as usize] && !is_b[r as usize] {
                    is_b[r as usize] = true;
                    boundary.push(r);
                }
            }
        }
    }
    // Values of the boundary wires on 64 random keys, and the expanded keys.
    let mut prg = crate::prf::Prg::from_seed(*b"hush-aes-expand!");
    let keys: Vec<[u8; 16]> = (0..64).map(|_| prg.seed16()).collect();
    let mut input = vec![0u64; 256];
    for (k, key) in keys.iter().enumerate() {
        for j in 0..128 {
            let bit = (key[15 - j / 8] >> (j % 8)) & 1;
            input[j] |= (bit as u64) << k;
        }
    }
    let mut w = vec![0u64; nw];
    w[..256].copy_from_slice(&input);
    for g in &orig.gates {
        let v = match *g {
            Gate::Xor { a, b, .. } => w[a as usize] ^ w[b as usize],
            Gate::And { a, b, .. } => w[a as usize] & w[b as usize],
            Gate::Inv { a, .. } => !w[a as usize],
            Gate::Copy { a, .. } => w[a as usize],
            Gate::Const { bit, .. } => 0u64.wrapping_sub(bit as u64),
        };
        w[out_of(g) as usize] = v;
    }
    // Expanded-key bit t (wire order of the 1408-bit input) over the 64 keys.
    let rks: Vec<[[u8; 16]; 11]> = keys.iter().map(aes128_expand_key).collect();
    let mut rk_words = vec![0u64; 1408];
    for (k, rk) in rks.iter().enumerate() {
        for (t, word) in rk_words.iter_mut().enumerate() {
            // Wire t is bit t of the big-endian 176-byte string.
            let byte = 175 - t / 8;
            let bit = (rk[byte / 16][byte % 16] >> (t % 8)) & 1;
            *word |= (bit as u64) << k;
        }
    }
    let mut by_value: std::collections::HashMap<u64, u32> = std::collections::HashMap::new();
    for (t, &v) in rk_words.iter().enumerate() {
        by_value.insert(v, t as u32);
    }
    // How each boundary wire is made in the new circuit.
    enum Src {
        Bit(u32),
        NotBit(u32),
        Const(bool),
    }
    let src: Vec<Src> = boundary
        .iter()
        .map(|&b| {
            let v = w[b as usize];
            if v == 0 || v == u64::MAX {
                Src::Const(v == u64::MAX)
            } else if let Some(&t) = by_value.get(&v) {
                Src::Bit(t)
            } else if let Some(&t) = by_value.get(&!v) {
                Src::NotBit(t)
            } else {
                panic!("aes_128.txt: key-side wire {b} read by the rounds is not a round-key bit")
            }
        })
        .collect();
    // New numbering: 1408 key wires, 128 plaintext wires, then the made
    // boundary wires (INV / constants), then kept gates' outputs in file
    // order of their original wire numbers (outputs stay last).
    let mut map = vec![u32::MAX; nw];
    for j in 0..128 {
        map[128 + j] = 1408 + j as u32;
    }
    let mut n = 1536u32;
    let mut gates = Vec::new();
    for (&b, s) in boundary.iter().zip(&src) {
        map[b as usize] = match *s {
            Src::Bit(t) => t,
            Src::NotBit(t) => {
                gates.push(Gate::Inv { a: t, out: n });
                n += 1;
                n - 1
            }
            Src::Const(bit) => {
                gates.push(Gate::Const { bit, out: n });
                n += 1;
                n - 1
            }
        };
    }
    let mut kept: Vec<u32> = orig.gates.iter().map(out_of).filter(|&o| pt[o as usize]).collect();
    kept.sort_unstable();
    for o in kept {
        map[o as usize] = n;
        n += 1;
    }
    for g in &orig.gates {
        if !pt[out_of(g) as usize] {
            continue;
        }
        let m = |x: u32| map[x as usize];
        gates.push(match *g {
            Gate::Xor { a, b, out } => Gate::Xor { a: m(a), b: m(b), out: m(out) },
            Gate::And { a, b, out } => Gate::And { a: m(a), b: m(b), out: m(out) },
            Gate::Inv { a, out } => Gate::Inv { a: m(a), out: m(out) },
            Gate::Copy { a, out } => Gate::Copy { a: m(a), out: m(out) },
            Gate::Const { .. } => unreachable!("constants are key-side"),
        });
    }
    // Gates must be in topological order with outputs on the last wires;
    // the original's outputs are its last wires and plaintext-side.
    let header_gates = gates.len();
    let c = Circuit { name: "aes128-expanded".into(), num_wires: n as usize, inputs: vec![1408, 128], outputs: vec![128], gates, header_gates };
    // Round-trip through the validating parser: a structural mistake here
    // is caught at once.
    Circuit::parse("aes128-expanded", &to_bristol(&c)).expect("derived circuit is valid Bristol Fashion")
}

/// The comparator and equality circuits by name.
pub fn generated(name: &str) -> Option<Circuit> {
    match name {
        "lt64" => Some(cmp64("lt64", true)),
        "le64" => Some(cmp64("le64", false)),
        "eq64" => Some(eq64()),
        "aes128-expanded" | "aes128_expanded" | "aes-128-expanded" => Some(aes128_expanded().clone()),
        _ => None,
    }
}

/// Whether `name` is a generated circuit (without building it).
pub fn generated_name(name: &str) -> bool {
    matches!(name, "lt64" | "le64" | "eq64" | "aes128-expanded" | "aes128_expanded" | "aes-128-expanded")
}

/// Names of the generated circuits.
pub const GENERATED: &[&str] = &["aes128-expanded", "lt64", "le64", "eq64"];

/// Bristol Fashion text of a circuit (ANDs written one per line).
pub fn to_bristol(c: &Circuit) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(c.gates.len() * 16);
    let _ = writeln!(s, "{} {}", c.gates.len(), c.num_wires);
    let _ = write!(s, "{}", c.inputs.len());
    for w in &c.inputs {
        let _ = write!(s, " {w}");
    }
    let _ = write!(s, "\n{}", c.outputs.len());
    for w in &c.outputs {
        let _ = write!(s, " {w}");
    }
    s.push_str("\n\n");
    for g in &c.gates {
        let _ = match *g {
            Gate::Xor { a, b, out } => writeln!(s, "2 1 {a} {b} {out} XOR"),
            Gate::And { a, b, out } => writeln!(s, "2 1 {a} {b} {out} AND"),
            Gate::Inv { a, out } => writeln!(s, "1 1 {a} {out} INV"),
            Gate::Copy { a, out } => writeln!(s, "1 1 {a} {out} EQW"),
            Gate::Const { bit, out } => writeln!(s, "1 1 {} {out} EQ", bit as u8),
        };
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fips197_key_expansion() {
        let key: [u8; 16] = [0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6, 0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf, 0x4f, 0x3c];
        let rk = aes128_expand_key(&key);
        assert_eq!(rk[10], [0xd0, 0x14, 0xf9, 0xa8, 0xc9, 0xee, 0x25, 0x89, 0xe1, 0x3f, 0x0c, 0xc8, 0xb6, 0x63, 0x0c, 0xa6]);
    }
}
