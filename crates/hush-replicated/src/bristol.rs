//! Bristol Fashion circuits: parser with validation, plaintext evaluator and
//! the mapping between hex strings and wire order.
//!
//! ## Format
//! ```text
//! <gates> <wires>
//! <number of inputs> <width of input 1> ... <width of input n>
//! <number of outputs> <width of output 1> ...
//! <in-arity> <out-arity> <input wires...> <output wires...> <TYPE>   (one gate a line)
//! ```
//! with `TYPE` one of `XOR`, `AND`, `INV`, `EQ` (the input is a constant
//! 0/1), `EQW` (wire copy) and `MAND` (k ANDs in one line: in-arity 2k,
//! inputs `a_1..a_k b_1..b_k`, outputs `c_j = a_j ∧ b_j`). Inputs occupy the
//! first wires, outputs the last ones, gates are in topological order and
//! every wire is assigned once.
//!
//! ## Validation
//! A file is untrusted: every count is checked against a limit before
//! anything is allocated, a gate may only read wires already defined and
//! write wires not yet defined, arities must match the gate type, and the
//! file must contain exactly the announced number of gates and define every
//! output wire. Any violation is [`Error::Circuit`] with the line number.
//!
//! ## Wire order of values
//! A value of width `w` is written as a hex string of `ceil(w/8)` bytes in
//! its natural (big-endian) byte order; wire `j` of the value is bit `j`,
//! least significant first, of that string read as one big-endian integer.
//! For `aes_128.txt` this gives `--input KEY --input PLAINTEXT` and the
//! ciphertext in FIPS-197 byte order; for the 64-bit arithmetic circuits it
//! gives ordinary big-endian numbers (tests check both).

use crate::error::{Error, Result};

/// Upper bound on wires and gates accepted from a file (2^26).
pub const MAX_WIRES: usize = 1 << 26;
/// Upper bound on the number of input or output values in the header.
pub const MAX_VALUES: usize = 1 << 16;
/// Largest circuit file read from disk.
pub const MAX_FILE_BYTES: u64 = 1 << 30;

/// Built-in circuits, usable by name wherever a circuit file is expected.
const BUILTINS: &[(&str, &str)] = &[
    ("aes128", include_str!("../circuits/aes_128.txt")),
    ("adder64", include_str!("../circuits/adder64.txt")),
    ("sub64", include_str!("../circuits/sub64.txt")),
    ("neg64", include_str!("../circuits/neg64.txt")),
    ("zero_equal", include_str!("../circuits/zero_equal.txt")),
    ("mult64", include_str!("../circuits/mult64.txt")),
    ("sha256", include_str!("../circuits/sha256.txt")),
];

/// One gate, with wire numbers as in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    Xor { a: u32, b: u32, out: u32 },
    And { a: u32, b: u32, out: u32 },
    Inv { a: u32, out: u32 },
    /// `out = a` (EQW).
    Copy { a: u32, out: u32 },
    /// `out = bit` (EQ with a constant input).
    Const { bit: bool, out: u32 },
}

impl Gate {
    fn out(&self) -> u32 {
        match *self {
            Gate::Xor { out, .. } | Gate::And { out, .. } | Gate::Inv { out, .. } | Gate::Copy { out, .. } | Gate::Const { out, .. } => out,
        }
    }
}

/// A validated Bristol Fashion circuit.
#[derive(Clone, Debug)]
pub struct Circuit {
    /// Where it came from (file name or built-in name), for messages.
    pub name: String,
    pub num_wires: usize,
    /// Widths of the input values, in order.
    pub inputs: Vec<usize>,
    /// Widths of the output values, in order.
    pub outputs: Vec<usize>,
    /// Gates in file order (MAND lines expanded into ANDs).
    pub gates: Vec<Gate>,
    /// Number of gate lines announced in the header (MAND counts once).
    pub header_gates: usize,
}

fn err(name: &str, line: usize, msg: impl Into<String>) -> Error {
    Error::Circuit { source_name: name.to_string(), line, msg: msg.into() }
}

fn parse_num(name: &str, line: usize, tok: &str, what: &str) -> Result<usize> {
    tok.parse::<usize>().map_err(|_| err(name, line, format!("{what}: expected a non-negative integer, found {tok:?}")))
}

struct BitSet(Vec<u64>);
impl BitSet {
    fn new(n: usize) -> Self {
        BitSet(vec![0; n.div_ceil(64)])
    }
    fn get(&self, i: usize) -> bool {
        (self.0[i / 64] >> (i % 64)) & 1 == 1
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
}

impl Circuit {
    /// Parses and validates Bristol Fashion text. `name` appears in errors.
    pub fn parse(name: &str, text: &str) -> Result<Circuit> {
        // Non-empty lines with their 1-based numbers.
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())).filter(|(_, l)| !l.is_empty());
        let last_line = text.lines().count().max(1);

        let (ln, l) = lines.next().ok_or_else(|| err(name, 1, "empty file: expected header `<gates> <wires>`"))?;
        let t: Vec<&str> = l.split_whitespace().collect();
        if t.len() != 2 {
            return Err(err(name, ln, format!("header: expected `<gates> <wires>`, found {} fields", t.len())));
        }
        let ngates = parse_num(name, ln, t[0], "number of gates")?;
        let nwires = parse_num(name, ln, t[1], "number of wires")?;
        if nwires > MAX_WIRES || ngates > MAX_WIRES {
            return Err(err(name, ln, format!("header announces {ngates} gates and {nwires} wires; the limit is {MAX_WIRES}")));
        }

        let mut value_line = |what: &str| -> Result<(usize, Vec<usize>)> {
            let (ln, l) = lines.next().ok_or_else(|| err(name, last_line, format!("truncated file: missing the {what} line")))?;
            let t: Vec<&str> = l.split_whitespace().collect();
            let n = parse_num(name, ln, t[0], &format!("number of {what}"))?;
            if n > MAX_VALUES {
                return Err(err(name, ln, format!("{n} {what} exceed the limit of {MAX_VALUES}")));
            }
            if t.len() != n + 1 {
                return Err(err(name, ln, format!("{what} line announces {n} values but lists {} widths", t.len() - 1)));
            }
            let mut w = Vec::with_capacity(n);
            let mut sum = 0usize;
            for tok in &t[1..] {
                let x = parse_num(name, ln, tok, &format!("width of one of the {what}"))?;
                if x == 0 {
                    return Err(err(name, ln, format!("{what} of width 0")));
                }
                sum = sum.saturating_add(x);
                w.push(x);
            }
            if sum > nwires {
                return Err(err(name, ln, format!("{what} need {sum} wires but the header announces only {nwires}")));
            }
            Ok((ln, w))
        };
        let (_, inputs) = value_line("inputs")?;
        let (out_ln, outputs) = value_line("outputs")?;
        let n_in: usize = inputs.iter().sum();
        let n_out: usize = outputs.iter().sum();

        let mut defined = BitSet::new(nwires);
        for w in 0..n_in {
            defined.set(w);
        }
        let mut gates = Vec::with_capacity(ngates.min(1 << 20));
        let mut lines_seen = 0usize;
        let mut gate_line_no = out_ln;
        for (ln, l) in lines {
            gate_line_no = ln;
            if lines_seen == ngates {
                return Err(err(name, ln, format!("more gates than the {ngates} announced in the header")));
            }
            lines_seen += 1;
            let t: Vec<&str> = l.split_whitespace().collect();
            if t.len() < 3 {
                return Err(err(name, ln, "gate line too short: expected `<in> <out> <wires...> <TYPE>`"));
            }
            let nin = parse_num(name, ln, t[0], "gate in-arity")?;
            let nout = parse_num(name, ln, t[1], "gate out-arity")?;
            let expect = nin.saturating_add(nout).saturating_add(3);
            if t.len() != expect {
                return Err(err(name, ln, format!("gate announces {nin} inputs and {nout} outputs, so {expect} fields, but has {}", t.len())));
            }
            let ty = t[t.len() - 1];
            let (want_in, want_out) = match ty {
                "XOR" | "AND" => (2, 1),
                "INV" | "EQ" | "EQW" => (1, 1),
                "MAND" => {
                    if nout == 0 || nin != 2 * nout {
                        return Err(err(name, ln, format!("MAND needs 2k inputs and k outputs, found {nin} and {nout}")));
                    }
                    (nin, nout)
                }
                other => return Err(err(name, ln, format!("unknown gate type {other:?}"))),
            };
            if nin != want_in || nout != want_out {
                return Err(err(name, ln, format!("{ty} needs {want_in} input(s) and {want_out} output(s), found {nin} and {nout}")));
            }
            let wire = |tok: &str| -> Result<u32> {
                let w = parse_num(name, ln, tok, "wire number")?;
                if w >= nwires {
                    return Err(err(name, ln, format!("wire {w} out of range (the circuit has {nwires} wires)")));
                }
                Ok(w as u32)
            };
            let ins: Vec<&str> = t[2..2 + nin].to_vec();
            let outs: Vec<&str> = t[2 + nin..2 + nin + nout].to_vec();
            let mut in_w = Vec::with_capacity(nin);
            if ty == "EQ" {
                let c = match ins[0] {
                    "0" => false,
                    "1" => true,
                    o => return Err(err(name, ln, format!("EQ takes a constant 0 or 1, found {o:?}"))),
                };
                in_w.push(c as u32);
            } else {
                for tok in &ins {
                    let w = wire(tok)?;
                    if !defined.get(w as usize) {
                        return Err(err(name, ln, format!("gate reads wire {w}, which is not defined before this line")));
                    }
                    in_w.push(w);
                }
            }
            let mut out_w = Vec::with_capacity(nout);
            for tok in &outs {
                let w = wire(tok)?;
                if defined.get(w as usize) {
                    return Err(err(name, ln, format!("gate writes wire {w}, which is already defined")));
                }
                defined.set(w as usize);
                out_w.push(w);
            }
            match ty {
                "XOR" => gates.push(Gate::Xor { a: in_w[0], b: in_w[1], out: out_w[0] }),
                "AND" => gates.push(Gate::And { a: in_w[0], b: in_w[1], out: out_w[0] }),
                "INV" => gates.push(Gate::Inv { a: in_w[0], out: out_w[0] }),
                "EQW" => gates.push(Gate::Copy { a: in_w[0], out: out_w[0] }),
                "EQ" => gates.push(Gate::Const { bit: in_w[0] == 1, out: out_w[0] }),
                _ => {
                    for j in 0..nout {
                        gates.push(Gate::And { a: in_w[j], b: in_w[nout + j], out: out_w[j] });
                    }
                }
            }
        }
        if lines_seen < ngates {
            return Err(err(
                name,
                gate_line_no.max(last_line),
                format!("truncated file: the header announces {ngates} gates but only {lines_seen} follow"),
            ));
        }
        for w in nwires - n_out..nwires {
            if !defined.get(w) {
                return Err(err(name, gate_line_no, format!("output wire {w} is never assigned")));
            }
        }
        Ok(Circuit { name: name.to_string(), num_wires: nwires, inputs, outputs, gates, header_gates: ngates })
    }

    /// Names of the built-in circuits (bundled files, then circuits
    /// generated in code: [`crate::gen`]).
    pub fn builtin_names() -> Vec<&'static str> {
        BUILTINS.iter().map(|(n, _)| *n).chain(crate::gen::GENERATED.iter().copied()).collect()
    }

    fn builtin_key(name: &str) -> &str {
        match name {
            "aes_128" | "aes-128" => "aes128",
            "mult_64" | "mul64" => "mult64",
            "sha-256" | "sha_256" => "sha256",
            n => n,
        }
    }

    /// A built-in circuit by name (`aes128`, `aes128-expanded`, `adder64`,
    /// `mult64`, `lt64`, `sha256`, ...), if any.
    pub fn builtin(name: &str) -> Option<Circuit> {
        let key = Self::builtin_key(name);
        if let Some(c) = crate::gen::generated(key) {
            return Some(c);
        }
        BUILTINS
            .iter()
            .find(|(n, _)| *n == key)
            .map(|(n, text)| Circuit::parse(n, text).expect("built-in circuits are valid"))
    }

    /// Whether `name` names a built-in circuit (nodes resolve it locally).
    pub fn is_builtin(name: &str) -> bool {
        let key = Self::builtin_key(name);
        crate::gen::generated_name(key) || BUILTINS.iter().any(|(n, _)| *n == key)
    }

    /// Canonical name and input widths of a built-in circuit, without
    /// parsing its gates (bundled files: the header only).
    pub fn builtin_signature(name: &str) -> Option<(String, Vec<usize>)> {
        let key = Self::builtin_key(name);
        if let Some(c) = crate::gen::generated(key) {
            return Some((c.name.clone(), c.inputs.clone()));
        }
        let (n, text) = BUILTINS.iter().find(|(n, _)| *n == key)?;
        let line = text.lines().filter(|l| !l.trim().is_empty()).nth(1)?;
        let mut it = line.split_whitespace().map(|t| t.parse::<usize>().ok());
        let k = it.next()??;
        let widths: Option<Vec<usize>> = it.take(k).collect();
        Some((n.to_string(), widths?))
    }

    /// The text of a bundled circuit file (None for generated circuits).
    pub fn builtin_text(name: &str) -> Option<&'static str> {
        let key = Self::builtin_key(name);
        BUILTINS.iter().find(|(n, _)| *n == key).map(|(_, t)| *t)
    }

    /// A built-in name or a file path.
    pub fn load(spec: &str) -> Result<Circuit> {
        if let Some(c) = Circuit::builtin(spec) {
            return Ok(c);
        }
        let text = read_circuit_text(spec)?;
        Circuit::parse(spec, &text)
    }

    /// Total input wires.
    pub fn num_input_wires(&self) -> usize {
        self.inputs.iter().sum()
    }
    /// Total output wires.
    pub fn num_output_wires(&self) -> usize {
        self.outputs.iter().sum()
    }
    /// First output wire (outputs are the last wires).
    pub fn first_output_wire(&self) -> usize {
        self.num_wires - self.num_output_wires()
    }
    /// Number of AND gates.
    pub fn and_count(&self) -> usize {
        self.gates.iter().filter(|g| matches!(g, Gate::And { .. })).count()
    }
    /// AND depth (the number of communication layers of a secure evaluation).
    pub fn and_depth(&self) -> usize {
        let mut d = vec![0u32; self.num_wires];
        let mut max = 0;
        for g in &self.gates {
            let v = match *g {
                Gate::Xor { a, b, .. } => d[a as usize].max(d[b as usize]),
                Gate::And { a, b, .. } => d[a as usize].max(d[b as usize]) + 1,
                Gate::Inv { a, .. } | Gate::Copy { a, .. } => d[a as usize],
                Gate::Const { .. } => 0,
            };
            d[g.out() as usize] = v;
            max = max.max(v);
        }
        max as usize
    }

    /// Plaintext evaluation of `words × 64` instances at once, bit-sliced:
    /// `input` holds `num_input_wires × words` words (wire-major; bit `j` of
    /// word `k` of a wire is instance `64k + j`); the result holds
    /// `num_output_wires × words` words in the same layout.
    pub fn eval_plain_sliced(&self, words: usize, input: &[u64]) -> Result<Vec<u64>> {
        let n_in = self.num_input_wires();
        if input.len() != n_in * words {
            return Err(Error::Input(format!("plaintext evaluation: expected {} input words, got {}", n_in * words, input.len())));
        }
        let mut w = vec![0u64; self.num_wires * words];
        w[..n_in * words].copy_from_slice(input);
        for g in &self.gates {
            let o = g.out() as usize * words;
            for k in 0..words {
                w[o + k] = match *g {
                    Gate::Xor { a, b, .. } => w[a as usize * words + k] ^ w[b as usize * words + k],
                    Gate::And { a, b, .. } => w[a as usize * words + k] & w[b as usize * words + k],
                    Gate::Inv { a, .. } => !w[a as usize * words + k],
                    Gate::Copy { a, .. } => w[a as usize * words + k],
                    Gate::Const { bit, .. } => 0u64.wrapping_sub(bit as u64),
                };
            }
        }
        Ok(w[self.first_output_wire() * words..].to_vec())
    }

    /// Plaintext evaluation of one instance on wire bits.
    pub fn eval_plain(&self, input_bits: &[bool]) -> Result<Vec<bool>> {
        let words: Vec<u64> = input_bits.iter().map(|&b| b as u64).collect();
        Ok(self.eval_plain_sliced(1, &words)?.iter().map(|w| w & 1 == 1).collect())
    }

    /// Maps one hex string per input value to the circuit's input wire bits.
    pub fn inputs_from_hex(&self, hex: &[String]) -> Result<Vec<bool>> {
        if hex.len() != self.inputs.len() {
            return Err(Error::Input(format!(
                "circuit {} takes {} input value(s) of widths {:?}, got {}",
                self.name,
                self.inputs.len(),
                self.inputs,
                hex.len()
            )));
        }
        let mut bits = Vec::with_capacity(self.num_input_wires());
        for (i, (h, &w)) in hex.iter().zip(&self.inputs).enumerate() {
            bits.extend(value_bits_from_hex(h, w).map_err(|e| Error::Input(format!("input {}: {e}", i + 1)))?);
        }
        Ok(bits)
    }

    /// Maps output wire bits to one hex string per output value.
    pub fn outputs_to_hex(&self, bits: &[bool]) -> Vec<String> {
        let mut off = 0;
        self.outputs
            .iter()
            .map(|&w| {
                let s = value_bits_to_hex(&bits[off..off + w]);
                off += w;
                s
            })
            .collect()
    }
}

/// Reads a circuit file with a size cap.
pub fn read_circuit_text(path: &str) -> Result<String> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| Error::File { what: format!("opening circuit {path}"), err: e })?;
    let mut s = String::new();
    f.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut s)
        .map_err(|e| Error::File { what: format!("reading circuit {path}"), err: e })?;
    if s.len() as u64 > MAX_FILE_BYTES {
        return Err(Error::Circuit { source_name: path.into(), line: 0, msg: format!("file larger than {MAX_FILE_BYTES} bytes") });
    }
    Ok(s)
}

/// Bits (wire order) of a `width`-bit value given as big-endian hex.
pub fn value_bits_from_hex(hex: &str, width: usize) -> std::result::Result<Vec<bool>, String> {
    let hex = hex.trim().trim_start_matches("0x");
    let nbytes = width.div_ceil(8);
    if hex.len() != 2 * nbytes {
        return Err(format!("expected {} hex digits for a {width}-bit value, got {}", 2 * nbytes, hex.len()));
    }
    let mut bytes = Vec::with_capacity(nbytes);
    for i in 0..nbytes {
        let b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| format!("not hex: {:?}", &hex[2 * i..2 * i + 2]))?;
        bytes.push(b);
    }
    let bit = |j: usize| (bytes[nbytes - 1 - j / 8] >> (j % 8)) & 1 == 1;
    if (width..8 * nbytes).any(bit) {
        return Err(format!("value does not fit in {width} bits"));
    }
    Ok((0..width).map(bit).collect())
}

/// Big-endian hex of a value given by its bits in wire order.
pub fn value_bits_to_hex(bits: &[bool]) -> String {
    let nbytes = bits.len().div_ceil(8);
    let mut bytes = vec![0u8; nbytes];
    for (j, &b) in bits.iter().enumerate() {
        if b {
            bytes[nbytes - 1 - j / 8] |= 1 << (j % 8);
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
