//! One model IR for transformer encoders, imported from the ONNX graphs
//! that `torch.onnx.export` (opsets 13–17) and Hugging Face `optimum`
//! write — hush's graph runtime (issue 28, item 1).
//!
//! **What it does.** [`GraphModel::from_onnx`] reads a graph (size-checked,
//! the same decoder as [`crate::convert`]) and finds its fused blocks;
//! [`GraphModel::instantiate`] fixes the inputs' shapes (the padded batch
//! shape: the only thing the server learns of the client's inputs), folds
//! every shape computation to constants, and lowers the graph to a
//! [`Program`]: a list of [`Step`]s over numbered slots, each step a
//! private operator of the runtime with concrete sizes. Values are of three
//! kinds:
//! * **constants** — initializers, `Constant` nodes and everything computed
//!   from them alone (`Shape` of a value of known shape is a constant);
//!   folded at import with [`crate::eval`];
//! * **client values** — the client's inputs (token ids, attention mask) and
//!   what is computed from them and constants alone (torch's mask
//!   arithmetic: Unsqueeze/Cast/Sub/Mul/Where/Expand): computed by the
//!   client in the clear ([`Step::ClientEval`]), never shared;
//! * **shared values** — everything else, additively secret-shared.
//!
//! **Pattern matching.** Blocks that are one operator of the runtime but
//! several ONNX nodes are recognised before lowering: LayerNorm decomposed
//! (ReduceMean, Sub, Pow, ReduceMean, Add ε, Sqrt, Div, then optionally Mul
//! γ and Add β) or fused (`LayerNormalization`); GeLU written with `Erf`
//! (x·½·(1 + erf(x/√2)) in either order of its products) or with `Tanh`
//! (½x(1 + tanh(√(2/π)(x + 0.044715x³)))). Other nodes map one to one:
//! MatMul with a constant weight on either side and Gemm → [`Step::Linear`];
//! MatMul of two shared values → [`Step::MatMul`]; `Gather` of a constant
//! table by the client's ids → [`Step::Embed`]; Softmax on the last axis;
//! a shared value plus a client value feeding a Softmax → [`Step::Mask`];
//! Add/Sub/Mul/Div with constants; Transpose, Reshape, Slice, Split, Concat,
//! Gather with constant indices, Expand, (Un)Squeeze, Flatten → index maps
//! ([`Step::Move`], computed by running the node on a tensor of indices).
//! Anything else is refused naming the node and the operator, with the list
//! of what is supported ([`SUPPORTED`]) — before anything is dealt.
//!
//! **The NaN guard.** torch's export of `scaled_dot_product_attention`
//! (transformers ≥ 4.48 with its default `sdpa` attention) follows each
//! Softmax with `Where(IsNaN(p), 0, p)`, turning a fully masked row's NaNs
//! into zeros. On a shared Softmax output hush lowers it to nothing (the
//! Where's output is the Softmax's slot). *Argument:* the runtime's Softmax
//! outputs ring elements, which are never NaN, so the guard is the
//! identity on every value it could see; no step, message or correlation
//! is added or removed, so neither party's view changes. The float
//! reference keeps the guard; the two differ only on a row whose float
//! Softmax is NaN, which needs an infinite or NaN score — impossible with
//! the finite mask constant transformers writes (float32's minimum) and
//! finite weights. Only this exact shape is fused (the fill must be the
//! constant 0 and the guarded value a Softmax output); any other IsNaN on a
//! private value is refused (`a_nan_guard_is_fused_only_in_its_exact_form`).
//!
//! **Who knows what.** The weights (every float initializer of two or more
//! elements, and whatever is computed from one) are the server's:
//! [`Program::public`] strips them for the client. Scalar constants (the
//! attention scale, GeLU's ½, LayerNorm's ε) and integer tensors are part of
//! the public architecture. A weight-derived constant that would have to
//! reach the client (in its mask arithmetic, or as a public scale) is
//! refused. The slots' worst-case bounds ([`SlotInfo::bound`]), derived
//! from the weights, are public rounded up to powers of two (as in
//! [`crate::encoder`]'s runtime: a few bits per layer).
//!
//! **Untrusted input.** Every tensor is size-checked before allocation
//! ([`crate::MAX_ELEMS`]); shapes come from checked arithmetic; every
//! failure is an [`Error`] naming the node; nothing panics.

use crate::eval::{attr_int, eval_node, norm_axis, Tensor};
use crate::proto::{DimensionValue, GraphProto, ModelProto, NodeProto};
use crate::{elems, Error, Result, MAX_FILE_BYTES};
use prost::Message;
use std::collections::{HashMap, HashSet};

/// The operators a graph may contain (after the fused blocks are recognised).
pub const SUPPORTED: &[&str] = &[
    "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Softmax", "LayerNormalization", "Gather", "Transpose", "Reshape", "Slice", "Split", "Concat",
    "Unsqueeze", "Squeeze", "Flatten", "Expand", "Identity", "Dropout", "Cast", "Shape", "Constant", "ConstantOfShape", "Range", "Where", "Equal",
    "Not", "Tanh", "Erf (in a GeLU)", "ReduceMean (in a LayerNorm)", "Pow/Sqrt (in a LayerNorm or GeLU)",
    "IsNaN (in a Softmax's NaN guard, or on the client's values)", "GreaterOrEqual/LessOrEqual/Less/Greater/And/Or/Xor/GatherElements/CumSum/Log (on the client's values and constants)",
];

/// A slot: one value of the program.
pub type Slot = usize;

/// An input of a client-side evaluation or a data-movement step.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum Src {
    Slot(Slot),
    Const(Tensor),
    Absent,
}

/// One operator of the runtime with concrete sizes. Shared values are
/// row-major in their ONNX shapes. Weight fields are empty in the client's
/// copy ([`Program::public`]).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum Step {
    /// A client input.
    Input { out: Slot, name: String },
    /// A node computed by the client in the clear on client values and
    /// public constants.
    ClientEval {
        out: Slot,
        #[serde(with = "node_hex")]
        node: Box<NodeProto>,
        ins: Vec<Src>,
    },
    /// `table[ids]` for the client's integer ids: one-hot × table (vocab × h).
    Embed { out: Slot, ids: Slot, vocab: usize, h: usize, table: Vec<f64> },
    /// x (rows × n_in) · w (n_in × n_out) + b.
    Linear { out: Slot, x: Slot, rows: usize, n_in: usize, n_out: usize, w: Vec<f64>, b: Vec<f64> },
    /// x + c (the server's constant, one value per element).
    AddConst { out: Slot, x: Slot, c: Vec<f64> },
    /// x · c for a public scalar c.
    Scale { out: Slot, x: Slot, c: f64 },
    /// x · c with the server's c per position of the last axis (`len`).
    ScaleVec { out: Slot, x: Slot, len: usize, c: Vec<f64> },
    Add { out: Slot, a: Slot, b: Slot },
    Sub { out: Slot, a: Slot, b: Slot },
    Neg { out: Slot, x: Slot },
    /// Element-wise product of two shared values.
    Mul { out: Slot, a: Slot, b: Slot },
    /// x + m for the client's m (broadcast by `idx`), each term clamped to
    /// [−clamp, clamp] (an attention mask before a Softmax).
    Mask { out: Slot, x: Slot, m: Slot, clamp: f64 },
    /// LayerNorm over rows of `len`, then γ, β (empty: none).
    LayerNorm { out: Slot, x: Slot, len: usize, eps: f64, gamma: Vec<f64>, beta: Vec<f64> },
    Gelu { out: Slot, x: Slot, tanh: bool },
    Tanh { out: Slot, x: Slot },
    /// Σ over `axis` of x·(m/d): masked mean pooling with the client's m
    /// and d (each broadcast to x's shape, and to the output's); the
    /// client's weights m/d of each output must sum to at most 1 in
    /// absolute value (a mean, not a sum: checked by the client).
    Pool { out: Slot, x: Slot, m: Slot, d: Slot, axis: usize },
    /// x / ‖x‖ over rows of `len` (the last axis).
    L2Norm { out: Slot, x: Slot, len: usize },
    Softmax { out: Slot, x: Slot, len: usize },
    /// `count` products of (m × k)·(k × n), two shared operands.
    MatMul { out: Slot, a: Slot, b: Slot, count: usize, m: usize, k: usize, n: usize },
    /// Data movement only: output `output` of `node` run on the shared
    /// values (`ins`' slots) and constants; the index map comes from
    /// running the node on tensors of indices ([`Program::move_map`]).
    Move {
        out: Slot,
        #[serde(with = "node_hex")]
        node: Box<NodeProto>,
        ins: Vec<Src>,
        output: usize,
    },
}

impl Step {
    pub fn out(&self) -> Slot {
        match self {
            Step::Input { out, .. }
            | Step::ClientEval { out, .. }
            | Step::Embed { out, .. }
            | Step::Linear { out, .. }
            | Step::AddConst { out, .. }
            | Step::Scale { out, .. }
            | Step::ScaleVec { out, .. }
            | Step::Add { out, .. }
            | Step::Sub { out, .. }
            | Step::Neg { out, .. }
            | Step::Mul { out, .. }
            | Step::Mask { out, .. }
            | Step::LayerNorm { out, .. }
            | Step::Gelu { out, .. }
            | Step::Tanh { out, .. }
            | Step::Pool { out, .. }
            | Step::L2Norm { out, .. }
            | Step::Softmax { out, .. }
            | Step::MatMul { out, .. }
            | Step::Move { out, .. } => *out,
        }
    }
    /// The operator's name (plans, reports, errors).
    pub fn kind(&self) -> &'static str {
        match self {
            Step::Input { .. } => "input",
            Step::ClientEval { .. } => "client",
            Step::Embed { .. } => "embed",
            Step::Linear { .. } => "linear",
            Step::AddConst { .. } => "add-const",
            Step::Scale { .. } => "scale",
            Step::ScaleVec { .. } => "scale-vec",
            Step::Add { .. } => "add",
            Step::Sub { .. } => "sub",
            Step::Neg { .. } => "neg",
            Step::Mul { .. } => "mul",
            Step::Mask { .. } => "mask",
            Step::LayerNorm { .. } => "layernorm",
            Step::Gelu { .. } => "gelu",
            Step::Tanh { .. } => "tanh",
            Step::Pool { .. } => "pool",
            Step::L2Norm { .. } => "l2norm",
            Step::Softmax { .. } => "softmax",
            Step::MatMul { .. } => "matmul",
            Step::Move { .. } => "move",
        }
    }
}

/// What is known of a slot.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct SlotInfo {
    pub shape: Vec<usize>,
    /// A client value (clear at the client, unknown to the server).
    pub client: bool,
    /// Worst-case |value| (real units) of a shared value, a power of two.
    pub bound: f64,
    /// The ONNX value it holds (messages).
    pub name: String,
}

/// A graph lowered for one input shape.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Program {
    pub steps: Vec<Step>,
    pub slots: Vec<SlotInfo>,
    /// (name, shape, slot) of each client input.
    pub inputs: Vec<(String, Vec<usize>, Slot)>,
    /// (name, slot) of each output (revealed to the client).
    pub outputs: Vec<(String, Slot)>,
    /// Whether the weights are present (the server's copy).
    pub has_weights: bool,
}

impl Program {
    /// The client's copy: the same steps with every weight removed.
    pub fn public(&self) -> Program {
        // by reference: a weight is never copied (BERT-base's are 0.9 GB)
        let steps = self
            .steps
            .iter()
            .map(|s| match s {
                Step::Embed { out, ids, vocab, h, .. } => Step::Embed { out: *out, ids: *ids, vocab: *vocab, h: *h, table: Vec::new() },
                Step::Linear { out, x, rows, n_in, n_out, b, .. } => Step::Linear { out: *out, x: *x, rows: *rows, n_in: *n_in, n_out: *n_out, w: Vec::new(), b: if b.is_empty() { Vec::new() } else { vec![0.0] } },
                Step::AddConst { out, x, .. } => Step::AddConst { out: *out, x: *x, c: Vec::new() },
                Step::ScaleVec { out, x, len, .. } => Step::ScaleVec { out: *out, x: *x, len: *len, c: Vec::new() },
                Step::LayerNorm { out, x, len, eps, gamma, beta } => Step::LayerNorm {
                    out: *out,
                    x: *x,
                    len: *len,
                    eps: *eps,
                    gamma: if gamma.is_empty() { Vec::new() } else { vec![0.0] },
                    beta: if beta.is_empty() { Vec::new() } else { vec![0.0] },
                },
                other => other.clone(),
            })
            .collect();
        Program { steps, slots: self.slots.clone(), inputs: self.inputs.clone(), outputs: self.outputs.clone(), has_weights: false }
    }

    /// A digest of the public program (steps, sizes, bounds; no weights):
    /// both parties must run the same program.
    pub fn fingerprint(&self) -> String {
        let public;
        let p = if self.has_weights {
            public = self.public();
            &public
        } else {
            self
        };
        let mut s = String::new();
        for st in &p.steps {
            s.push_str(&format!("{st:?}\n"));
        }
        for sl in &p.slots {
            s.push_str(&format!("{:?} {} {}\n", sl.shape, sl.client, sl.bound));
        }
        // FNV-1a, 64 bits: a label, not a security mechanism (the hello
        // compares the two sides' programs; a mismatch is refused)
        let mut h: u64 = 0xcbf29ce484222325;
        for b in s.bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
        format!("{h:016x}")
    }

    /// The index map of a [`Step::Move`]: for each output element, (which
    /// of the step's slot inputs, index in it). Errors if the node would
    /// mix a constant into the private value.
    pub fn move_map(&self, step: &Step) -> Result<Vec<(u32, u32)>> {
        self.move_checked(step).map(|(_, map, _)| map)
    }

    /// A movement step run once on index tensors: its output shape, its
    /// index map (checked: no constant mixed into the private value) and
    /// its bound (the largest of its sources').
    fn move_checked(&self, step: &Step) -> Result<(Vec<usize>, Vec<(u32, u32)>, f64)> {
        let Step::Move { node, ins, output, .. } = step else { return bad("not a data-movement step") };
        let (t, offsets) = self.move_eval(node, ins, *output)?;
        let total = offsets.last().map_or(0, |(o, s)| o + self.slot_len(*s));
        let mut map = Vec::with_capacity(t.len());
        for &x in &t.v {
            if x < 0.0 || x.fract() != 0.0 || x as usize >= total {
                return bad(format!("{}: a constant mixed into a private value", node_label(node)));
            }
            let g = x as usize;
            let k = offsets.iter().rposition(|(o, _)| *o <= g).unwrap_or(0);
            map.push((k as u32, (g - offsets[k].0) as u32));
        }
        let bound = offsets.iter().map(|(_, s)| self.slots[*s].bound).fold(0.0, f64::max);
        Ok((t.shape, map, bound))
    }

    fn slot_len(&self, s: Slot) -> usize {
        self.slots.get(s).map_or(0, |i| i.shape.iter().product())
    }

    /// Runs a movement node on iota tensors: (output, (offset, slot) per slot input).
    fn move_eval(&self, node: &NodeProto, ins: &[Src], output: usize) -> Result<(Tensor, Vec<(usize, Slot)>)> {
        let mut probe = Vec::new();
        let mut offsets = Vec::new();
        let mut total = 0usize;
        for s in ins {
            probe.push(match s {
                Src::Slot(k) => {
                    let info = self.slots.get(*k).ok_or_else(|| Error::Unsupported(format!("graph: slot {k} out of range")))?;
                    let mut t = Tensor::iota(&info.shape)?;
                    t.v.iter_mut().for_each(|x| *x += total as f64);
                    offsets.push((total, *k));
                    total += t.len();
                    Some(t)
                }
                Src::Const(t) => Some(t.clone()),
                Src::Absent => None,
            });
        }
        if offsets.is_empty() {
            return bad(format!("{}: no private input", node_label(node)));
        }
        let refs: Vec<Option<&Tensor>> = probe.iter().map(|t| t.as_ref()).collect();
        let mut outs = eval_node(node, &refs)?;
        if output >= outs.len() {
            return bad(format!("{}: output {output} out of range", node_label(node)));
        }
        Ok((outs.swap_remove(output), offsets))
    }

    /// The shape and bound (the largest of its sources') of a movement step.
    fn move_shape(&self, step: &Step) -> Result<(Vec<usize>, f64)> {
        self.move_checked(step).map(|(shape, _, bound)| (shape, bound))
    }

    /// For a [`Step::Mask`]: the client value's element added to each
    /// element of the output (numpy broadcasting).
    pub fn mask_index(&self, step: &Step) -> Option<Vec<usize>> {
        let Step::Mask { x, m, .. } = step else { return None };
        crate::broadcast_index(&self.slots.get(*m)?.shape, &self.slots.get(*x)?.shape)
    }

    /// For a [`Step::Pool`]: for each element of x, the index of its m and
    /// of its d (d indexed by the output position, x without `axis`).
    pub fn pool_index(&self, step: &Step) -> Option<(Vec<usize>, Vec<usize>)> {
        let Step::Pool { out, x, m, d, axis } = step else { return None };
        let xs = &self.slots.get(*x)?.shape;
        let os = &self.slots.get(*out)?.shape;
        let mut red: Vec<usize> = xs.clone();
        red.remove(*axis);
        if *os != red && {
            let mut k = xs.clone();
            k[*axis] = 1;
            *os != k
        } {
            return None;
        }
        let im = crate::broadcast_index(&self.slots.get(*m)?.shape, xs)?;
        let id_out = crate::broadcast_index(&self.slots.get(*d)?.shape, &red)?;
        // x's element → its output position (x without `axis`)
        let inner: usize = xs[axis + 1..].iter().product();
        let n_ax = xs[*axis];
        let id = (0..im.len()).map(|i| id_out[(i / (inner * n_ax)) * inner + i % inner]).collect();
        Some((im, id))
    }

    /// Counts of each operator kind (reports).
    pub fn op_counts(&self) -> Vec<(&'static str, usize)> {
        let mut m: Vec<(&'static str, usize)> = Vec::new();
        for s in &self.steps {
            match m.iter_mut().find(|(k, _)| *k == s.kind()) {
                Some(e) => e.1 += 1,
                None => m.push((s.kind(), 1)),
            }
        }
        m
    }
}

/// A node inside a serialised program: its protobuf bytes in hex.
mod node_hex {
    use crate::proto::NodeProto;
    use prost::Message;
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(n: &NodeProto, s: S) -> Result<S::Ok, S::Error> {
        let b = n.encode_to_vec();
        s.serialize_str(&b.iter().map(|x| format!("{x:02x}")).collect::<String>())
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Box<NodeProto>, D::Error> {
        let h = String::deserialize(d)?;
        if h.len() % 2 != 0 || h.len() > 1 << 20 {
            return Err(serde::de::Error::custom("node: bad hex length"));
        }
        let b: Option<Vec<u8>> = (0..h.len()).step_by(2).map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok()).collect();
        let b = b.ok_or_else(|| serde::de::Error::custom("node: not hex"))?;
        NodeProto::decode(b.as_slice()).map(Box::new).map_err(|e| serde::de::Error::custom(format!("node: {e}")))
    }
}

/// Largest program accepted from a peer: elements over all its slots.
pub const MAX_PROGRAM_ELEMS: usize = 1 << 29;
/// Most steps in a program.
pub const MAX_STEPS: usize = 1 << 16;

impl Program {
    /// The public program as JSON (what the server sends the client).
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.public()).unwrap_or_default()
    }

    /// A program received from a peer: parsed, then [`Program::validate`]d.
    pub fn from_json(s: &str) -> Result<Program> {
        if s.len() > 1 << 28 {
            return bad("program: too large");
        }
        let p: Program = serde_json::from_str(s).map_err(|e| Error::Parse(format!("program: {e}")))?;
        p.validate()?;
        Ok(p)
    }

    /// Checks an untrusted program before anything is allocated for it:
    /// sizes capped, every step's operands defined before it and of the
    /// right kind and size, data-movement maps in range.
    pub fn validate(&self) -> Result<()> {
        if self.steps.len() > MAX_STEPS || self.slots.len() > MAX_STEPS {
            return bad(format!("program: {} steps and {} slots (at most {MAX_STEPS})", self.steps.len(), self.slots.len()));
        }
        let mut total = 0usize;
        for (i, s) in self.slots.iter().enumerate() {
            if s.shape.len() > 8 || !(s.bound >= 0.0) {
                return bad(format!("program: slot {i} has shape {:?} and bound {}", s.shape, s.bound));
            }
            let n = elems(&s.shape).ok_or_else(|| Error::Unsupported(format!("graph: program: slot {i} of shape {:?} is too large", s.shape)))?;
            total = total.saturating_add(n);
        }
        if total > MAX_PROGRAM_ELEMS {
            return bad(format!("program: {total} elements over all values (at most {MAX_PROGRAM_ELEMS})"));
        }
        let mut defined = vec![false; self.slots.len()];
        let len = |k: Slot| self.slot_len(k);
        for (j, st) in self.steps.iter().enumerate() {
            let o = st.out();
            let fail = |m: &str| bad::<()>(format!("program: step {j} ({}): {m}", st.kind()));
            if o >= self.slots.len() || defined[o] {
                return fail("output slot out of range or defined twice");
            }
            let sh = |k: Slot| -> Result<()> {
                if k >= self.slots.len() || !defined[k] || self.slots[k].client {
                    return bad(format!("program: step {j} ({}): operand {k} is not a shared value defined before it", st.kind()));
                }
                Ok(())
            };
            let cl = |k: Slot| -> Result<()> {
                if k >= self.slots.len() || !defined[k] || !self.slots[k].client {
                    return bad(format!("program: step {j} ({}): operand {k} is not a client value defined before it", st.kind()));
                }
                Ok(())
            };
            let client_out = matches!(st, Step::Input { .. } | Step::ClientEval { .. });
            if self.slots[o].client != client_out {
                return fail("output slot of the wrong kind");
            }
            let w = self.has_weights;
            match st {
                Step::Input { name, .. } => {
                    if !self.inputs.iter().any(|(n, s, k)| n == name && *k == o && *s == self.slots[o].shape) {
                        return fail("an input not listed");
                    }
                }
                Step::ClientEval { ins, .. } => {
                    for s in ins {
                        if let Src::Slot(k) = s {
                            cl(*k)?;
                        }
                    }
                }
                Step::Embed { ids, vocab, h, table, .. } => {
                    cl(*ids)?;
                    if (*vocab).saturating_mul(len(*ids)) > MAX_PROGRAM_ELEMS || len(*ids).saturating_mul(*h) != len(o) || (w && table.len() != vocab * h) {
                        return fail("sizes");
                    }
                }
                Step::Linear { x, rows, n_in, n_out, w: wt, b, .. } => {
                    sh(*x)?;
                    if rows.saturating_mul(*n_in) != len(*x) || rows.saturating_mul(*n_out) != len(o) || (w && (wt.len() != n_in * n_out || !(b.is_empty() || b.len() == *n_out))) {
                        return fail("sizes");
                    }
                }
                Step::AddConst { x, c, .. } => {
                    sh(*x)?;
                    if len(*x) != len(o) || (w && c.len() != len(o)) {
                        return fail("sizes");
                    }
                }
                Step::Scale { x, c, .. } => {
                    sh(*x)?;
                    if len(*x) != len(o) || !c.is_finite() {
                        return fail("sizes");
                    }
                }
                Step::ScaleVec { x, len: l, c, .. } => {
                    sh(*x)?;
                    if *l == 0 || len(*x) != len(o) || len(o) % l != 0 || (w && c.len() != *l) {
                        return fail("sizes");
                    }
                }
                Step::Add { a, b, .. } | Step::Sub { a, b, .. } | Step::Mul { a, b, .. } => {
                    sh(*a)?;
                    sh(*b)?;
                    if len(*a) != len(o) || len(*b) != len(o) {
                        return fail("sizes");
                    }
                }
                Step::Neg { x, .. } | Step::Gelu { x, .. } | Step::Tanh { x, .. } => {
                    sh(*x)?;
                    if len(*x) != len(o) {
                        return fail("sizes");
                    }
                }
                Step::Mask { x, m, clamp, .. } => {
                    sh(*x)?;
                    cl(*m)?;
                    if len(*x) != len(o) || self.mask_index(st).is_none() || !clamp.is_finite() {
                        return fail("sizes");
                    }
                }
                Step::LayerNorm { x, len: l, gamma, beta, eps, .. } => {
                    sh(*x)?;
                    if *l == 0 || len(*x) != len(o) || len(o) % l != 0 || !(0.0..1.0).contains(eps) || (w && ((!gamma.is_empty() && gamma.len() != *l) || (!beta.is_empty() && beta.len() != *l))) {
                        return fail("sizes");
                    }
                }
                Step::Pool { x, m, d, axis, .. } => {
                    sh(*x)?;
                    cl(*m)?;
                    cl(*d)?;
                    let xs = &self.slots[*x].shape;
                    if *axis >= xs.len() || self.pool_index(st).is_none() {
                        return fail("sizes");
                    }
                }
                Step::L2Norm { x, len: l, .. } => {
                    sh(*x)?;
                    if *l == 0 || len(*x) != len(o) || len(o) % l != 0 {
                        return fail("sizes");
                    }
                }
                Step::Softmax { x, len: l, .. } => {
                    sh(*x)?;
                    if *l == 0 || len(*x) != len(o) || len(o) % l != 0 {
                        return fail("sizes");
                    }
                }
                Step::MatMul { a, b, count, m, k, n, .. } => {
                    sh(*a)?;
                    sh(*b)?;
                    let p = |x: usize, y: usize, z: usize| x.checked_mul(y).and_then(|v| v.checked_mul(z));
                    if p(*count, *m, *k) != Some(len(*a)) || p(*count, *k, *n) != Some(len(*b)) || p(*count, *m, *n) != Some(len(o)) {
                        return fail("sizes");
                    }
                }
                Step::Move { ins, .. } => {
                    for s in ins {
                        if let Src::Slot(k) = s {
                            sh(*k)?;
                        }
                    }
                    let (shape, _) = self.move_shape(st)?;
                    if shape != self.slots[o].shape {
                        return fail("shape");
                    }
                }
            }
            defined[o] = true;
        }
        for (_, s) in &self.outputs {
            if *s >= self.slots.len() || !defined[*s] || self.slots[*s].client {
                return bad("program: an output is not a shared value");
            }
        }
        Ok(())
    }
}

/// A graph input as declared.
#[derive(Clone, Debug)]
pub struct InputSpec {
    pub name: String,
    /// Fixed sizes (`Some`) or symbols (`None`).
    pub dims: Vec<Option<usize>>,
    pub int: bool,
}

/// A fused block found before lowering.
#[derive(Clone, Debug)]
enum Fused {
    LayerNorm { x: String, axes_node: usize, eps: f64, gamma: Option<String>, beta: Option<String> },
    Gelu { x: String, tanh: bool },
    /// Σ_axis (a·b) / d: masked mean pooling (one of a, b private, the
    /// other and d the client's); `sum` is the ReduceSum node.
    Pool { a: String, b: String, d: String, sum: usize },
    /// y / ‖y‖ over the last axis (the norm's floor, if any, ignored: a
    /// zero row stays zero).
    L2Norm { y: String, reduce: usize },
    /// `Where(IsNaN(x), 0, x)` with x a Softmax's output: the guard
    /// `scaled_dot_product_attention` gets in torch's export (a fully
    /// masked row's NaNs become zeros). On a shared x it is the identity —
    /// see [`GraphModel`]'s "NaN guard" note; `isnan` is the IsNaN node.
    NanGuard { x: String, isnan: usize },
}

/// An imported encoder graph.
#[derive(Clone, Debug)]
pub struct GraphModel {
    graph: GraphProto,
    inits: HashMap<String, Tensor>,
    pub inputs: Vec<InputSpec>,
    pub outputs: Vec<String>,
    /// node index → the fused block it ends
    roots: HashMap<usize, Fused>,
    /// nodes inside a fused block (not lowered on their own)
    members: HashSet<usize>,
}

fn bad<T>(m: impl std::fmt::Display) -> Result<T> {
    Err(Error::Unsupported(format!("graph: {m}")))
}

fn node_label(n: &NodeProto) -> String {
    format!("node '{}' ({})", n.name.as_deref().filter(|s| !s.is_empty()).unwrap_or("<unnamed>"), n.op_type.as_deref().unwrap_or(""))
}

fn up_pow2(x: f64) -> f64 {
    if x <= 0.0 || !x.is_finite() {
        return if x.is_finite() { 0.0 } else { f64::INFINITY };
    }
    x.log2().ceil().exp2()
}

/// Documented error bounds of the runtime's operators at f = 12 (real
/// units), used for the worst-case bounds.
pub const GELU_ERR: f64 = 1.2e-3 + 5e-4;
pub const SOFTMAX_ERR: f64 = 6e-4;
pub const TANH_ERR: f64 = 2e-3;

/// Relative part of the private Softmax's per-entry error, in every mode
/// that runs it (`hush_2pc::transformer::softmax::softmax_within`: tee,
/// dealer, interactive, silent): the documented exp relative error
/// 1.0·10⁻⁴ (the polynomial-and-squarings path; the table path's is
/// 7.6·10⁻⁷ absolute) and the reciprocal's 2·10⁻⁶, with a 5× margin.
pub const SOFTMAX_REL_ERR: f64 = 1e-3;
/// Absolute part of the private Softmax's per-entry error at the
/// **coarsest** fraction the graph runtime runs (f = 8, `graph_fixed`),
/// so it holds for every f in 8..=12: the last truncation to 2^f,
/// 2^{1−f} = 2^{−7}, plus the clip (an entry with x − max < −16 counts as
/// exp(−16) ≤ 1.2·10⁻⁷) and interactive mode's per-row reciprocal at
/// scale 2^16 (≤ e·2^{−16} ≤ 1.6·10⁻⁵): together below 2^{−7} + 2^{−15}.
pub const SOFTMAX_ABS_ERR_COARSE: f64 = 1.0 / 128.0 + 1.0 / 32768.0;

/// A proven bound on Σ_j |p̃_j| over a private Softmax row of length `k`
/// (see [`SOFTMAX_REL_ERR`], [`SOFTMAX_ABS_ERR_COARSE`]): with p the exact
/// softmax of the private input (p_j ≥ 0, Σ_j p_j = 1) and
/// |p̃_j − p_j| ≤ ρ·p_j + α, |p̃_j| ≤ (1 + ρ)·p_j + α, so
/// Σ_j |p̃_j| ≤ 1 + ρ + k·α.
pub fn softmax_row_abs_sum(k: usize) -> f64 {
    1.0 + SOFTMAX_REL_ERR + k as f64 * SOFTMAX_ABS_ERR_COARSE
}

/// Per-entry error of one private rounding step (a truncation, a public
/// constant's rounding) at the **coarsest** fraction the graph runtime
/// runs (f = 8): 4 ulps of 2^−8, for the row-norm bounds ([`RowL2`]).
pub const L2_ENTRY_ERR: f64 = 1.0 / 64.0;
/// Largest rounding error of a weight or public constant encoded at
/// f ≥ 8 (round to nearest: half an ulp of 2^−8).
pub const WEIGHT_ROUND_ERR: f64 = 1.0 / 512.0;

/// A proven upper bound on the spectral norm σ(W) (the largest singular
/// value) of the `n_in × n_out` row-major matrix `w`:
/// √(max_r Σ_c |G_rc|) for the Gram matrix G of the smaller side (WᵀW or
/// WWᵀ: the same nonzero eigenvalues, the largest σ(W)²). The max absolute
/// row sum is an induced norm of G, and every induced norm is at least the
/// spectral radius, so σ(W)² = ρ(G) ≤ max_r Σ_c |G_rc|. Computed in f64:
/// each G entry is a sum of at most n = max(n_in, n_out) products, off by
/// at most n·2^−53 of the sum of their absolute values (Higham, "Accuracy
/// and Stability of Numerical Algorithms", §3.1), and those sums over a row
/// of G are at most (max column sum of |W|)·(max row sum of |W|); that
/// (×2, and a relative 4n·2^−53 for the row sums themselves) is added, so
/// the result is an upper bound despite the rounding.
pub fn spectral_bound(w: &[f64], n_in: usize, n_out: usize) -> f64 {
    if w.len() != n_in * n_out {
        // no weights (a public program's copy) or a malformed matrix: no bound
        return f64::INFINITY;
    }
    if w.is_empty() {
        return 0.0;
    }
    let (g, n) = if n_out <= n_in {
        // G = WᵀW: G_jk = Σ_i w_ij·w_ik, as rank-one updates row by row
        let mut g = vec![0.0f64; n_out * n_out];
        for row in w.chunks_exact(n_out) {
            for (j, &wij) in row.iter().enumerate() {
                if wij != 0.0 {
                    g[j * n_out..(j + 1) * n_out].iter_mut().zip(row).for_each(|(gk, wk)| *gk += wij * wk);
                }
            }
        }
        (g, n_out)
    } else {
        // G = WWᵀ: G_il = Σ_j w_ij·w_lj
        let rows: Vec<&[f64]> = w.chunks_exact(n_out).collect();
        let mut g = vec![0.0f64; n_in * n_in];
        for i in 0..n_in {
            for l in i..n_in {
                let v: f64 = rows[i].iter().zip(rows[l]).map(|(a, b)| a * b).sum();
                g[i * n_in + l] = v;
                g[l * n_in + i] = v;
            }
        }
        (g, n_in)
    };
    let m = g.chunks_exact(n).map(|r| r.iter().map(|v| v.abs()).sum::<f64>()).fold(0.0f64, f64::max);
    let col = (0..n_out).map(|j| (0..n_in).map(|i| w[i * n_out + j].abs()).sum::<f64>()).fold(0.0f64, f64::max);
    let row = w.chunks_exact(n_out).map(|r| r.iter().map(|v| v.abs()).sum::<f64>()).fold(0.0f64, f64::max);
    let eps = n_in.max(n_out) as f64 * f64::EPSILON;
    (m * (1.0 + 4.0 * eps) + 2.0 * eps * col * row).sqrt() * (1.0 + 4.0 * f64::EPSILON)
}

/// A proven bound on σ(W̃ − W), the spectral norm of the weights' rounding
/// error, for every fraction the graph runtime runs (f in 8..=12; the
/// runtime encodes a weight as round(w·2^f), to nearest): the largest over
/// f of √(‖E_f‖₁·‖E_f‖_∞) (max column sum times max row sum of |E_f|, a
/// bound on σ: ‖E‖₂² ≤ ‖E‖₁‖E‖_∞, Golub and Van Loan, *Matrix
/// Computations*, §2.3), and never above the
/// Frobenius bound √(n_in·n_out)·2^−9. On BERT-base's projections it is
/// about 0.8 against the Frobenius bound's 1.5.
pub fn rounding_sigma(w: &[f64], n_in: usize, n_out: usize) -> f64 {
    let frob = ((n_in * n_out) as f64).sqrt() * WEIGHT_ROUND_ERR;
    if w.len() != n_in * n_out || n_out == 0 {
        return frob;
    }
    let mut worst = 0.0f64;
    for f in 8..=12 {
        let sf = (f as f64).exp2();
        let (mut col, mut row_max) = (vec![0.0f64; n_out], 0.0f64);
        for row in w.chunks_exact(n_out) {
            let mut r = 0.0;
            for (c, &v) in col.iter_mut().zip(row) {
                let e = ((v * sf).round() / sf - v).abs();
                *c += e;
                r += e;
            }
            row_max = row_max.max(r);
        }
        let col_max = col.iter().fold(0.0f64, |a, v| a.max(*v));
        worst = worst.max((col_max * row_max).sqrt() * (1.0 + 1e-12));
    }
    worst.min(frob)
}

/// A proven bound on ‖ỹ‖₂ of every row of the private LayerNorm's output
/// over rows of `len` with scale γ and shift β (empty: none), in every
/// mode (`hush_2pc::transformer::layernorm`) and every f in 8..=12.
///
/// **Argument.** The runtime computes z̃ = x_c − μ̃ (μ̃ with its error),
/// v̂ ≈ mean(z̃²) **of that same z̃**, r̃ ≈ 1/√(max(v̂, 2^−f) + ε) and
/// ỹ = trunc(z̃·r̃)·γ̃ + β̃. Since ‖z̃‖₂ = √(len·v) for v = mean(z̃²) exactly,
/// the mean's error cancels: ‖z̃·r̃‖₂ ≤ √len·√v·r̃. v̂ differs from v by
/// the variance's truncations (at most 2 ulps of 2^−f on the row's sum,
/// so 2·2^−f/len, plus 2^−23 at the rsqrt's scale 2^24), which relative
/// to a variance of at least 2^−f (smaller ones are floored there, which
/// only shrinks r̃) is at most 2/len + 2^{f−23} ≤ 2/len + 2^−11, and
/// 2/len + 2^−10 with the rounded 1/len's relative error; the
/// rsqrt's documented relative error is 3·10⁻⁴ (2·10⁻³ taken). So
/// ‖z̃·r̃‖₂ ≤ √len·(1 + 2·10⁻³)/√(1 − 2/len − 2^−10). Then
/// ‖γ̃ ⊙ u‖₂ ≤ max|γ̃|·‖u‖₂ with |γ̃| ≤ max|γ| + 2^−9 (rounding at f ≥ 8),
/// ‖β̃‖₂ ≤ ‖β‖₂ + √len·2^−9, and the output's truncations (of z̃·r̃, of
/// the ·γ) are at most [`L2_ENTRY_ERR`] per entry: √len·2^−5 covers
/// those and β's rounding. None for rows shorter than 4 (the variance's
/// relative error is not small there).
pub fn layernorm_row_l2(len: usize, gamma: &[f64], beta: &[f64]) -> Option<f64> {
    if len < 4 {
        return None;
    }
    let n = len as f64;
    let g = if gamma.is_empty() { 1.0 } else { gamma.iter().fold(0.0f64, |a, v| a.max(v.abs())) + WEIGHT_ROUND_ERR };
    let b = beta.iter().map(|v| v * v).sum::<f64>().sqrt();
    let rel = (1.0 + 2e-3) / (1.0 - 2.0 / n - 1.0 / 1024.0).sqrt();
    Some(g * n.sqrt() * rel + b + n.sqrt() / 32.0)
}

/// A proven bound on the Euclidean norm of every **line** of a private
/// value along one axis (fix every other index, run along `axis`):
/// a·σ̂ + b, with σ̂ the effective spectral bound of the linear layer that
/// wrote slot `w` ([`spectral_bound`] of its weights plus the weights'
/// rounding, computed only when a product needs it), or b when `w` is
/// None. Kept by the lowering beside the public max-abs bounds, never in
/// the program: only the secret × secret products' bounds it proves (rounded
/// up to powers of two as every slot bound) become public.
#[derive(Clone, Copy, Debug)]
struct RowL2 {
    axis: usize,
    a: f64,
    b: f64,
    w: Option<Slot>,
}

impl GraphModel {
    /// Reads an ONNX file (size-checked before reading).
    pub fn from_file(path: &std::path::Path) -> Result<Self> {
        use std::io::Read;
        let f = std::fs::File::open(path).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
        let mut b = Vec::new();
        f.take(MAX_FILE_BYTES + 1).read_to_end(&mut b).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
        if b.len() as u64 > MAX_FILE_BYTES {
            return Err(Error::Parse(format!("{}: file is larger than the {MAX_FILE_BYTES}-byte limit", path.display())));
        }
        Self::from_onnx(&b)
    }

    /// Reads a graph and finds its fused blocks; refuses unsupported
    /// operators naming the node.
    pub fn from_onnx(onnx: &[u8]) -> Result<Self> {
        if onnx.len() as u64 > MAX_FILE_BYTES {
            return Err(Error::Parse(format!("{} bytes is larger than the {MAX_FILE_BYTES}-byte limit", onnx.len())));
        }
        let model = ModelProto::decode(onnx).map_err(|e| Error::Parse(e.to_string()))?;
        Self::from_model(model)
    }

    /// [`GraphModel::from_onnx`] on a decoded model.
    pub fn from_model(model: ModelProto) -> Result<Self> {
        let graph = model.graph.ok_or_else(|| Error::Unsupported("graph: the model has no graph".into()))?;
        let mut inits = HashMap::new();
        for t in &graph.initializer {
            let n = t.name.clone().unwrap_or_default();
            let v = Tensor::from_proto(t).map_err(|e| Error::Unsupported(format!("graph: initializer '{n}': {e}")))?;
            if v.v.iter().any(|x| !x.is_finite()) && v.len() > 1 {
                return bad(format!("initializer '{n}' has non-finite values"));
            }
            if inits.insert(n.clone(), v).is_some() {
                return bad(format!("initializer '{n}' appears twice"));
            }
        }
        let mut inputs = Vec::new();
        for i in &graph.input {
            let name = i.name.clone().unwrap_or_default();
            if inits.contains_key(&name) {
                continue;
            }
            let tt = i.r#type.as_ref().and_then(|t| t.tensor_type.as_ref());
            let int = tt.and_then(|t| t.elem_type).is_some_and(|e| e != crate::proto::data_type::FLOAT && e != crate::proto::data_type::DOUBLE);
            let dims = tt
                .and_then(|t| t.shape.as_ref())
                .map(|s| s.dim.iter().map(|d| match &d.value { Some(DimensionValue::DimValue(v)) if *v > 0 => Some(*v as usize), _ => None }).collect())
                .unwrap_or_default();
            inputs.push(InputSpec { name, dims, int });
        }
        let outputs: Vec<String> = graph.output.iter().map(|o| o.name.clone().unwrap_or_default()).collect();
        if outputs.is_empty() {
            return bad("the graph has no outputs");
        }
        let mut m = GraphModel { graph, inits, inputs, outputs, roots: HashMap::new(), members: HashSet::new() };
        m.find_blocks()?;
        m.check_ops()?;
        Ok(m)
    }

    fn check_ops(&self) -> Result<()> {
        const PLAIN: &[&str] = &[
            "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Softmax", "LayerNormalization", "Gather", "Transpose", "Reshape", "Slice", "Split", "Concat",
            "Unsqueeze", "Squeeze", "Flatten", "Expand", "Identity", "Dropout", "Cast", "Shape", "Constant", "ConstantOfShape", "Range", "Where",
            "Equal", "Not", "Tanh", "Less", "Greater", "GreaterOrEqual", "LessOrEqual", "And", "Or", "Xor", "Neg", "Size", "Max", "Min", "Clip",
            "ReduceL2", "GatherElements", "IsNaN", "IsInf",
            // allowed where they only touch constants or client values (checked when lowering)
            "Erf", "ReduceMean", "ReduceSum", "Pow", "Sqrt", "Reciprocal", "Exp", "Abs", "Relu", "Sigmoid", "Log", "CumSum",
        ];
        for (i, n) in self.graph.node.iter().enumerate() {
            if self.members.contains(&i) {
                continue;
            }
            let op = n.op_type.as_deref().unwrap_or("");
            let dom = n.domain.as_deref().unwrap_or("");
            if !(dom.is_empty() || dom == "ai.onnx") || !PLAIN.contains(&op) {
                return bad(format!("{} is not supported (domain '{dom}'); supported: {}", node_label(n), SUPPORTED.join(", ")));
            }
        }
        Ok(())
    }

    /// A scalar constant (initializer or Constant node output of one element).
    fn scalar(&self, name: &str, prod: &HashMap<&str, usize>) -> Option<f64> {
        if let Some(t) = self.inits.get(name) {
            return (t.len() == 1).then(|| t.v[0]);
        }
        let n = &self.graph.node[*prod.get(name)?];
        if n.op_type.as_deref() != Some("Constant") {
            return None;
        }
        let t = eval_node(n, &[]).ok()?.pop()?;
        (t.len() == 1).then(|| t.v[0])
    }

    fn is_const(&self, name: &str, prod: &HashMap<&str, usize>) -> bool {
        self.inits.contains_key(name) || prod.get(name).is_some_and(|&i| self.graph.node[i].op_type.as_deref() == Some("Constant"))
    }

    fn find_blocks(&mut self) -> Result<()> {
        let g = &self.graph;
        let mut prod: HashMap<&str, usize> = HashMap::new();
        let mut cons: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, n) in g.node.iter().enumerate() {
            for o in &n.output {
                prod.insert(o.as_str(), i);
            }
            for x in &n.input {
                if !x.is_empty() {
                    cons.entry(x.as_str()).or_default().push(i);
                }
            }
        }
        let outs: HashSet<&str> = self.outputs.iter().map(|s| s.as_str()).collect();
        let op = |i: usize| g.node[i].op_type.as_deref().unwrap_or("");
        let out0 = |i: usize| g.node[i].output.first().map(|s| s.as_str()).unwrap_or("");
        // the single consumer of node i's output (None if several, or a graph output)
        let only = |i: usize| -> Option<usize> {
            let o = out0(i);
            if outs.contains(o) {
                return None;
            }
            match cons.get(o).map(|v| v.as_slice()) {
                Some([c]) => Some(*c),
                _ => None,
            }
        };
        // the other input of a binary node
        let other = |i: usize, name: &str| -> Option<String> {
            let n = &g.node[i];
            match n.input.as_slice() {
                [a, b] if a == name => Some(b.clone()),
                [a, b] if b == name => Some(a.clone()),
                _ => None,
            }
        };
        let near = |v: Option<f64>, c: f64| v.is_some_and(|v| (v - c).abs() < 1e-3 * c.abs().max(1.0));
        let mut roots = HashMap::new();
        let mut members = HashSet::new();
        // GeLU's common tail from q = 1 + erf(..) (or 1 + tanh(..)): x·q·½ in either order
        let tail = |q: usize, x: &str, mem: &mut Vec<usize>| -> Option<usize> {
            let u = only(q)?;
            if op(u) != "Mul" {
                return None;
            }
            let y = other(u, out0(q))?;
            if y == x {
                let w = only(u)?;
                if op(w) == "Mul" && near(other(w, out0(u)).and_then(|c| self.scalar(&c, &prod)), 0.5) {
                    mem.extend([u, w]);
                    return Some(w);
                }
                if op(w) == "Div" && g.node[w].input.first().map(|s| s.as_str()) == Some(out0(u)) && near(g.node[w].input.get(1).and_then(|c| self.scalar(c, &prod)), 2.0) {
                    mem.extend([u, w]);
                    return Some(w);
                }
                return None;
            }
            let h = *prod.get(y.as_str())?;
            if op(h) == "Mul" && other(h, x).is_some_and(|c| near(self.scalar(&c, &prod), 0.5)) && only(h) == Some(u) {
                mem.extend([h, u]);
                return Some(u);
            }
            None
        };
        for (i, n) in g.node.iter().enumerate() {
            match op(i) {
                "Erf" => {
                    let Some(&a) = prod.get(n.input.first().map(|s| s.as_str()).unwrap_or("")) else { continue };
                    let x = match op(a) {
                        "Div" if near(g.node[a].input.get(1).and_then(|c| self.scalar(c, &prod)), std::f64::consts::SQRT_2) => g.node[a].input[0].clone(),
                        "Mul" => {
                            let ins = &g.node[a].input;
                            match ins.iter().position(|c| near(self.scalar(c, &prod), std::f64::consts::FRAC_1_SQRT_2)) {
                                Some(p) if ins.len() == 2 => ins[1 - p].clone(),
                                _ => continue,
                            }
                        }
                        _ => continue,
                    };
                    if only(a) != Some(i) {
                        continue;
                    }
                    let Some(q) = only(i) else { continue };
                    if op(q) != "Add" || !near(other(q, out0(i)).and_then(|c| self.scalar(&c, &prod)), 1.0) {
                        continue;
                    }
                    let mut mem = vec![a, i, q];
                    if let Some(root) = tail(q, &x, &mut mem) {
                        members.extend(mem);
                        roots.insert(root, Fused::Gelu { x, tanh: false });
                    }
                }
                "Tanh" => {
                    // w = c·v, v = x + 0.044715·x³
                    let Some(&w) = prod.get(n.input.first().map(|s| s.as_str()).unwrap_or("")) else { continue };
                    if op(w) != "Mul" || only(w) != Some(i) {
                        continue;
                    }
                    let ins = &g.node[w].input;
                    let Some(p) = ins.iter().position(|c| near(self.scalar(c, &prod), (2.0 / std::f64::consts::PI).sqrt())) else { continue };
                    let Some(&v) = prod.get(ins[1 - p].as_str()) else { continue };
                    if op(v) != "Add" || only(v) != Some(w) {
                        continue;
                    }
                    let vi = &g.node[v].input;
                    let mut found = None;
                    for (xi, ki) in [(0, 1), (1, 0)] {
                        let Some(&k) = prod.get(vi[ki].as_str()) else { continue };
                        if op(k) != "Mul" || only(k) != Some(v) {
                            continue;
                        }
                        let ki2 = &g.node[k].input;
                        let Some(pc) = ki2.iter().position(|c| near(self.scalar(c, &prod), 0.044715)) else { continue };
                        let Some(&c3) = prod.get(ki2[1 - pc].as_str()) else { continue };
                        let x = vi[xi].clone();
                        if op(c3) == "Pow" && g.node[c3].input[0] == x && near(g.node[c3].input.get(1).and_then(|e| self.scalar(e, &prod)), 3.0) && only(c3) == Some(k) {
                            found = Some((x, vec![c3, k, v, w]));
                        }
                    }
                    let Some((x, mut mem)) = found else { continue };
                    let Some(q) = only(i) else { continue };
                    if op(q) != "Add" || !near(other(q, out0(i)).and_then(|c| self.scalar(&c, &prod)), 1.0) {
                        continue;
                    }
                    mem.extend([i, q]);
                    if let Some(root) = tail(q, &x, &mut mem) {
                        members.extend(mem);
                        roots.insert(root, Fused::Gelu { x, tanh: true });
                    }
                }
                "Div" => {
                    // pooling: Div(ReduceSum(Mul(a, b)), d)
                    let a0 = n.input.first().map(|s| s.as_str()).unwrap_or("");
                    if let Some(&r) = prod.get(a0) {
                        if op(r) == "ReduceSum" && only(r) == Some(i) {
                            if let Some(&m) = prod.get(g.node[r].input.first().map(|s| s.as_str()).unwrap_or("")) {
                                if op(m) == "Mul" && only(m) == Some(r) && n.input.len() == 2 {
                                    let mi = &g.node[m].input;
                                    members.extend([m, r]);
                                    roots.insert(i, Fused::Pool { a: mi[0].clone(), b: mi[1].clone(), d: n.input[1].clone(), sum: r });
                                    continue;
                                }
                            }
                        }
                    }
                    // L2 normalisation: Div(y, [Expand]([Max|Clip](Sqrt(ReduceSum(y·y)) | ReduceL2(y))))
                    let y = a0.to_string();
                    let mut chain = Vec::new();
                    let mut cur = n.input.get(1).and_then(|d| prod.get(d.as_str()).copied());
                    let mut reduce = None;
                    while let Some(c) = cur {
                        if only(c) != Some(*chain.last().unwrap_or(&i)) {
                            break;
                        }
                        match op(c) {
                            "Expand" | "Max" | "Clip" | "Sqrt" => {
                                chain.push(c);
                                cur = prod.get(g.node[c].input.first().map(|s| s.as_str()).unwrap_or("")).copied();
                            }
                            "ReduceL2" if g.node[c].input.first() == Some(&y) => {
                                chain.push(c);
                                reduce = Some(c);
                                break;
                            }
                            "ReduceSum" => {
                                let Some(&sq) = prod.get(g.node[c].input.first().map(|s| s.as_str()).unwrap_or("")) else { break };
                                let is_sq = (op(sq) == "Mul" && g.node[sq].input.iter().all(|s| *s == y))
                                    || (op(sq) == "Pow" && g.node[sq].input.first() == Some(&y) && near(g.node[sq].input.get(1).and_then(|e| self.scalar(e, &prod)), 2.0));
                                if is_sq && only(sq) == Some(c) && chain.iter().any(|&k| op(k) == "Sqrt") {
                                    chain.extend([c, sq]);
                                    reduce = Some(c);
                                }
                                break;
                            }
                            _ => break,
                        }
                    }
                    if let Some(rd) = reduce {
                        members.extend(chain.iter().copied());
                        roots.insert(i, Fused::L2Norm { y, reduce: rd });
                    }
                }
                "IsNaN" => {
                    // Where(IsNaN(x), 0, x), x = Softmax(..): the NaN guard
                    let x = n.input.first().cloned().unwrap_or_default();
                    let Some(&sm) = prod.get(x.as_str()) else { continue };
                    let Some(w) = only(i) else { continue };
                    let wi = &g.node[w].input;
                    if op(sm) == "Softmax" && op(w) == "Where" && wi.len() == 3 && wi[0] == out0(i) && wi[2] == x && self.scalar(&wi[1], &prod) == Some(0.0) {
                        members.insert(i);
                        roots.insert(w, Fused::NanGuard { x, isnan: i });
                    }
                }
                "ReduceMean" => {
                    let x = n.input.first().cloned().unwrap_or_default();
                    let Some(d) = only(i) else { continue };
                    if op(d) != "Sub" || g.node[d].input.as_slice() != [x.clone(), out0(i).to_string()] {
                        continue;
                    }
                    let dc = match cons.get(out0(d)) {
                        Some(v) if v.len() == 2 && !outs.contains(out0(d)) => v.clone(),
                        _ => continue,
                    };
                    let is_sq = |j: usize| {
                        (op(j) == "Pow" && g.node[j].input[0] == out0(d) && near(g.node[j].input.get(1).and_then(|e| self.scalar(e, &prod)), 2.0))
                            || (op(j) == "Mul" && g.node[j].input.iter().all(|s| s == out0(d)))
                    };
                    let (p, dv) = if is_sq(dc[0]) { (dc[0], dc[1]) } else if is_sq(dc[1]) { (dc[1], dc[0]) } else { continue };
                    let Some(v) = only(p) else { continue };
                    if op(v) != "ReduceMean" {
                        continue;
                    }
                    let Some(e) = only(v) else { continue };
                    let Some(eps) = (op(e) == "Add").then(|| other(e, out0(v)).and_then(|c| self.scalar(&c, &prod))).flatten() else { continue };
                    let Some(s) = only(e) else { continue };
                    if op(s) != "Sqrt" || only(s) != Some(dv) || op(dv) != "Div" || g.node[dv].input.as_slice() != [out0(d).to_string(), out0(s).to_string()] {
                        continue;
                    }
                    let mut mem = vec![i, d, p, v, e, s, dv];
                    let mut end = dv;
                    let mut gamma = None;
                    let mut beta = None;
                    if let Some(y) = only(end) {
                        if op(y) == "Mul" {
                            if let Some(c) = other(y, out0(end)).filter(|c| self.is_const(c, &prod)) {
                                gamma = Some(c);
                                mem.push(y);
                                end = y;
                            }
                        }
                    }
                    if let Some(z) = only(end) {
                        if op(z) == "Add" {
                            if let Some(c) = other(z, out0(end)).filter(|c| self.is_const(c, &prod)) {
                                beta = Some(c);
                                mem.push(z);
                            }
                        }
                    }
                    if !(0.0..1.0).contains(&eps) {
                        return bad(format!("{}: LayerNorm epsilon {eps} outside [0, 1)", node_label(&g.node[e])));
                    }
                    let last = *mem.last().unwrap_or(&i);
                    members.extend(mem.iter().copied().filter(|&m| m != last));
                    roots.insert(last, Fused::LayerNorm { x, axes_node: i, eps, gamma, beta });
                }
                _ => {}
            }
        }
        // a root is lowered, not skipped
        for r in roots.keys() {
            members.remove(r);
        }
        self.roots = roots;
        self.members = members;
        Ok(())
    }

    /// The float reference: the whole graph in f64 ([`crate::eval`]) on
    /// the given inputs (by name). Returns the outputs in graph order.
    pub fn eval_f64(&self, inputs: &HashMap<String, Tensor>) -> Result<Vec<Tensor>> {
        let mut vals: HashMap<&str, Tensor> = HashMap::new();
        for (k, v) in &self.inits {
            vals.insert(k.as_str(), v.clone());
        }
        for spec in &self.inputs {
            let t = inputs.get(&spec.name).ok_or_else(|| Error::Unsupported(format!("graph: input '{}' is missing", spec.name)))?;
            vals.insert(spec.name.as_str(), t.clone());
        }
        for n in &self.graph.node {
            let ins: Vec<Option<&Tensor>> = n.input.iter().map(|s| if s.is_empty() { None } else { vals.get(s.as_str()) }).collect();
            if n.input.iter().zip(&ins).any(|(s, v)| !s.is_empty() && v.is_none()) {
                return bad(format!("{}: an input is not defined before it", node_label(n)));
            }
            let outs = eval_node(n, &ins)?;
            for (name, t) in n.output.iter().zip(outs) {
                vals.insert(name.as_str(), t);
            }
        }
        self.outputs.iter().map(|o| vals.get(o.as_str()).cloned().ok_or_else(|| Error::Unsupported(format!("graph: output '{o}' is never computed")))).collect()
    }

    /// Lowers the graph for concrete input shapes (by input name).
    pub fn instantiate(&self, shapes: &HashMap<String, Vec<usize>>) -> Result<Program> {
        Lower::new(self).run(shapes, None)
    }

    /// [`GraphModel::instantiate`] revealing only the named outputs (the
    /// others are not sent to the client).
    pub fn instantiate_outputs(&self, shapes: &HashMap<String, Vec<usize>>, outputs: &[String]) -> Result<Program> {
        for o in outputs {
            if !self.outputs.contains(o) {
                return bad(format!("the graph has no output '{o}' (it has {})", self.outputs.join(", ")));
            }
        }
        Lower::new(self).run(shapes, Some(outputs))
    }
}

/// A value during lowering.
#[derive(Clone, Debug)]
enum V {
    /// A constant; `secret`: derived from a weight.
    C(Tensor, bool),
    Client(Slot),
    Shared(Slot),
}

struct Lower<'a> {
    m: &'a GraphModel,
    vals: HashMap<String, V>,
    p: Program,
    cons: HashMap<&'a str, Vec<usize>>,
    /// Row-norm bounds of shared slots ([`RowL2`]; absent: none proven).
    l2: HashMap<Slot, RowL2>,
    /// Effective σ̂ of a linear layer's weights, by its output slot.
    sigma: HashMap<Slot, f64>,
}

impl<'a> Lower<'a> {
    fn new(m: &'a GraphModel) -> Self {
        let mut cons: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, n) in m.graph.node.iter().enumerate() {
            for x in &n.input {
                cons.entry(x.as_str()).or_default().push(i);
            }
        }
        Lower {
            m,
            vals: HashMap::new(),
            p: Program { steps: Vec::new(), slots: Vec::new(), inputs: Vec::new(), outputs: Vec::new(), has_weights: true },
            cons,
            l2: HashMap::new(),
            sigma: HashMap::new(),
        }
    }

    /// The value a·σ̂ + b of a row-norm bound ([`RowL2`]).
    fn l2_value(&mut self, r: RowL2) -> f64 {
        match r.w {
            None => r.b,
            Some(s) => r.a * self.weight_sigma(s) + r.b,
        }
    }

    /// σ̂ of the linear layer that wrote slot `s` as the runtime runs it:
    /// σ(W̃) ≤ σ(W) + σ(W̃ − W) ≤ [`spectral_bound`](W) +
    /// [`rounding_sigma`](W) with W̃ the weights rounded at f in 8..=12.
    /// Cached; infinite if no such layer (never the case by construction).
    fn weight_sigma(&mut self, s: Slot) -> f64 {
        if let Some(v) = self.sigma.get(&s) {
            return *v;
        }
        let v = match self.p.steps.iter().rev().find(|st| st.out() == s) {
            Some(Step::Linear { w, n_in, n_out, .. }) => spectral_bound(w, *n_in, *n_out) + rounding_sigma(w, *n_in, *n_out),
            _ => f64::INFINITY,
        };
        self.sigma.insert(s, v);
        v
    }

    /// Carries a row-norm bound from `from` to `to` (same shape) through
    /// ỹ = trunc(c̃·x) with |c̃| ≤ `scale` per entry: ‖ỹ‖ ≤ scale·‖x‖ plus
    /// the truncation ([`L2_ENTRY_ERR`] per entry of the line, or none when
    /// `exact`).
    fn keep_l2(&mut self, from: Slot, to: Slot, scale: f64, exact: bool) {
        if let Some(r) = self.l2.get(&from).copied() {
            let len = self.p.slots[to].shape.get(r.axis).copied().unwrap_or(1) as f64;
            let e = if exact { 0.0 } else { len.sqrt() * L2_ENTRY_ERR };
            self.l2.insert(to, RowL2 { axis: r.axis, a: r.a * scale, b: r.b * scale + e, w: r.w });
        }
    }

    /// The row-norm bound of a [`Step::Move`]'s output `out` (the last
    /// step), from its sources' by the index map itself: along an output
    /// axis whose every line takes **distinct** elements of **one** line of
    /// one source (along that source's bounded axis), each output line is
    /// a sub-vector of a bounded line, so no longer than it (a head's
    /// sub-vector of a row, a row moved to axis −2 as in Kᵀ, a slice).
    /// Anything else — a line across source lines (a reshape that mixes
    /// rows), a repeated element (an Expand along the axis), a source with
    /// no bound — gives none. The longest bound of the sources is kept.
    fn move_l2(&mut self, out: Slot) {
        let Some(st @ Step::Move { ins, .. }) = self.p.steps.last() else { return };
        let srcs: Vec<Slot> = ins.iter().filter_map(|s| if let Src::Slot(k) = s { Some(*k) } else { None }).collect();
        let Some(forms) = srcs.iter().map(|s| self.l2.get(s).copied()).collect::<Option<Vec<RowL2>>>() else { return };
        let Ok(map) = self.p.move_map(st) else { return };
        let shape = self.p.slots[out].shape.clone();
        // (stride, length) of each source's bounded axis
        let geo: Vec<(usize, usize)> = srcs
            .iter()
            .zip(&forms)
            .map(|(s, f)| {
                let sh = &self.p.slots[*s].shape;
                (sh.get(f.axis + 1..).map_or(1, |t| t.iter().product()), sh.get(f.axis).copied().unwrap_or(1))
            })
            .collect();
        let Some(axis) = (0..shape.len()).rev().find(|&ax| shape[ax] > 1 && lines_within(&map, &shape, ax, &geo)) else { return };
        let form = if forms.len() == 1 {
            RowL2 { axis, ..forms[0] }
        } else {
            let v = forms.iter().map(|f| self.l2_value(*f)).fold(0.0f64, f64::max);
            RowL2 { axis, a: 0.0, b: v, w: None }
        };
        self.l2.insert(out, form);
    }

    fn slot(&mut self, shape: Vec<usize>, client: bool, bound: f64, name: &str) -> Result<Slot> {
        elems(&shape).ok_or_else(|| Error::Unsupported(format!("graph: value '{name}' of shape {shape:?} is too large")))?;
        self.p.slots.push(SlotInfo { shape, client, bound: if client { 0.0 } else { up_pow2(bound) }, name: name.to_string() });
        Ok(self.p.slots.len() - 1)
    }

    fn shape(&self, v: &V) -> Vec<usize> {
        match v {
            V::C(t, _) => t.shape.clone(),
            V::Client(s) | V::Shared(s) => self.p.slots[*s].shape.clone(),
        }
    }

    fn bound(&self, s: Slot) -> f64 {
        self.p.slots[s].bound
    }

    fn get(&self, n: &NodeProto, i: usize) -> Result<Option<V>> {
        match n.input.get(i) {
            None => Ok(None),
            Some(s) if s.is_empty() => Ok(None),
            Some(s) => self.lookup(s).map(Some).ok_or_else(|| Error::Unsupported(format!("graph: {}: input '{s}' is not defined before it", node_label(n)))),
        }
    }

    /// A value by name: computed, or an initializer (copied on use, so
    /// that each weight is copied once, into the step that uses it).
    fn lookup(&self, name: &str) -> Option<V> {
        if let Some(v) = self.vals.get(name) {
            return Some(v.clone());
        }
        let t = self.m.inits.get(name)?;
        Some(V::C(t.clone(), !t.int && t.len() > 1))
    }

    fn need(&self, n: &NodeProto, i: usize) -> Result<V> {
        self.get(n, i)?.ok_or_else(|| Error::Unsupported(format!("graph: {}: input {i} is missing", node_label(n))))
    }

    fn set(&mut self, n: &NodeProto, v: V) {
        if let Some(o) = n.output.first() {
            self.vals.insert(o.clone(), v);
        }
    }

    fn push(&mut self, s: Step) -> Slot {
        let o = s.out();
        self.p.steps.push(s);
        o
    }

    fn run(mut self, shapes: &HashMap<String, Vec<usize>>, select: Option<&[String]>) -> Result<Program> {
        for spec in &self.m.inputs {
            let shape = shapes.get(&spec.name).ok_or_else(|| Error::Unsupported(format!("graph: no shape given for input '{}'", spec.name)))?.clone();
            if !spec.dims.is_empty() && (spec.dims.len() != shape.len() || spec.dims.iter().zip(&shape).any(|(d, s)| d.is_some_and(|d| d != *s))) {
                return bad(format!("input '{}' of shape {shape:?} where the graph declares {:?}", spec.name, spec.dims));
            }
            let s = self.slot(shape.clone(), true, 0.0, &spec.name)?;
            self.push(Step::Input { out: s, name: spec.name.clone() });
            self.p.inputs.push((spec.name.clone(), shape, s));
            self.vals.insert(spec.name.clone(), V::Client(s));
        }
        let nodes = &self.m.graph.node;
        for (i, n) in nodes.iter().enumerate() {
            if self.m.members.contains(&i) {
                continue;
            }
            if let Some(f) = self.m.roots.get(&i).cloned() {
                self.fused(i, n, &f)?;
                continue;
            }
            self.node(i, n)?;
        }
        for o in &self.m.outputs {
            if select.is_some_and(|s| !s.contains(o)) {
                continue;
            }
            match self.lookup(o).as_ref() {
                Some(V::Shared(s)) => self.p.outputs.push((o.clone(), *s)),
                Some(_) => return bad(format!("output '{o}' does not depend on the server's weights and the client's input together (nothing to compute privately)")),
                None => return bad(format!("output '{o}' is never computed")),
            }
        }
        Ok(self.p)
    }

    fn shared(&self, n: &NodeProto, v: &V) -> Result<Slot> {
        match v {
            V::Shared(s) => Ok(*s),
            _ => bad(format!("{}: expected a private value here", node_label(n))),
        }
    }

    fn fused(&mut self, i: usize, n: &NodeProto, f: &Fused) -> Result<()> {
        match f {
            Fused::NanGuard { x, isnan } => {
                match self.lookup(x) {
                    // a shared Softmax output is a ring element, never NaN:
                    // the guard is the identity on it (nothing is computed)
                    Some(V::Shared(s)) => self.set(n, V::Shared(s)),
                    // constants and client values: the nodes as written
                    Some(_) => {
                        let isnan_node = self.m.graph.node[*isnan].clone();
                        self.node(*isnan, &isnan_node)?;
                        self.node(i, n)?;
                    }
                    None => return bad(format!("{}: input '{x}' undefined", node_label(n))),
                }
            }
            Fused::Gelu { x, tanh } => {
                let xv = self.lookup(x).ok_or_else(|| Error::Unsupported(format!("graph: GeLU input '{x}' undefined")))?;
                let xs = self.shared(n, &xv)?;
                let b = self.bound(xs).max(0.17) + GELU_ERR;
                let out = self.slot(self.p.slots[xs].shape.clone(), false, b, &n.output[0])?;
                self.push(Step::Gelu { out, x: xs, tanh: *tanh });
                self.set(n, V::Shared(out));
            }
            Fused::Pool { a, b, d, sum } => {
                let va = self.lookup(a);
                let vb = self.lookup(b);
                let vd = self.lookup(d);
                let (x, m) = match (va, vb) {
                    (Some(V::Shared(x)), Some(V::Client(m))) | (Some(V::Client(m)), Some(V::Shared(x))) => (x, m),
                    _ => return bad(format!("{}: a sum of products divided by a value is supported only as masked mean pooling (a private value times the client's mask, over the client's count)", node_label(n))),
                };
                let Some(V::Client(dv)) = vd else { return bad(format!("{}: pooling's denominator must be the client's own value", node_label(n))) };
                let sn = &self.m.graph.node[*sum];
                let xs = self.p.slots[x].shape.clone();
                let axes = crate::eval::attr_ints(sn, "axes").map(Ok).unwrap_or_else(|| match self.get(sn, 1)? {
                    Some(V::C(t, _)) => t.as_ints(),
                    _ => bad(format!("{}: pooling over non-constant axes", node_label(sn))),
                })?;
                if axes.len() != 1 {
                    return bad(format!("{}: pooling over {} axes (one is supported)", node_label(sn), axes.len()));
                }
                let axis = norm_axis(sn, axes[0], xs.len())?;
                let mut os = xs.clone();
                if attr_int(sn, "keepdims", 1) != 0 {
                    os[axis] = 1;
                } else {
                    os.remove(axis);
                }
                // the client's weights m/d of each output sum to at most 1 in
                // absolute value (a mean; checked at the client), so the
                // pooled value is within x's bound
                let bound = self.bound(x);
                let out = self.slot(os, false, bound, &n.output[0])?;
                let step = Step::Pool { out, x, m, d: dv, axis };
                if self.p.pool_index(&step).is_none() {
                    return bad(format!("{}: the mask and count do not broadcast to the pooled shapes", node_label(n)));
                }
                self.push(step);
                self.set(n, V::Shared(out));
            }
            Fused::L2Norm { y, reduce } => {
                let Some(V::Shared(x)) = self.lookup(y) else { return bad(format!("{}: L2 normalisation of a non-private value", node_label(n))) };
                let rn = &self.m.graph.node[*reduce];
                let xs = self.p.slots[x].shape.clone();
                let axes = crate::eval::attr_ints(rn, "axes").map(Ok).unwrap_or_else(|| match self.get(rn, 1)? {
                    Some(V::C(t, _)) => t.as_ints(),
                    _ => Ok(vec![-1]),
                })?;
                if axes.len() != 1 || norm_axis(rn, axes[0], xs.len())? + 1 != xs.len() {
                    return bad(format!("{}: L2 normalisation over axes {axes:?} (only the last axis)", node_label(rn)));
                }
                let len = *xs.last().unwrap_or(&1);
                let out = self.slot(xs, false, 1.0 + 1e-2, &n.output[0])?;
                self.push(Step::L2Norm { out, x, len });
                self.set(n, V::Shared(out));
            }
            Fused::LayerNorm { x, axes_node, eps, gamma, beta } => {
                let xv = self.lookup(x).ok_or_else(|| Error::Unsupported(format!("graph: LayerNorm input '{x}' undefined")))?;
                let xs = self.shared(n, &xv)?;
                let shape = self.p.slots[xs].shape.clone();
                let an = &self.m.graph.node[*axes_node];
                let axes = crate::eval::attr_ints(an, "axes").map(Ok).unwrap_or_else(|| match self.get(an, 1)? {
                    Some(V::C(t, _)) => t.as_ints(),
                    _ => Ok(vec![-1]),
                })?;
                let r = shape.len();
                if axes.len() != 1 || norm_axis(an, axes[0], r)? + 1 != r {
                    return bad(format!("{}: LayerNorm over axes {axes:?} of a rank-{r} value (only the last axis)", node_label(an)));
                }
                let len = shape[r - 1];
                let vec_of = |s: &mut Self, name: &Option<String>| -> Result<Vec<f64>> {
                    match name {
                        None => Ok(Vec::new()),
                        Some(c) => match s.lookup(c).as_ref() {
                            Some(V::C(t, _)) if t.len() == len || t.len() == 1 => Ok((0..len).map(|j| t.v[j % t.len()]).collect()),
                            _ => bad(format!("{}: LayerNorm scale/shift '{c}' must be a constant of {len} values", node_label(n))),
                        },
                    }
                };
                let g = vec_of(self, gamma)?;
                let b = vec_of(self, beta)?;
                let bound = (len as f64).sqrt() * 1.01 * g.iter().fold(if g.is_empty() { 1.0 } else { 0.0 }, |a: f64, v| a.max(v.abs())) + b.iter().fold(0.0f64, |a, v| a.max(v.abs())) + 0.01;
                let out = self.slot(shape, false, bound, &n.output[0])?;
                if let Some(v) = layernorm_row_l2(len, &g, &b) {
                    self.l2.insert(out, RowL2 { axis: r - 1, a: 0.0, b: v, w: None });
                }
                self.push(Step::LayerNorm { out, x: xs, len, eps: *eps, gamma: g, beta: b });
                self.set(n, V::Shared(out));
            }
        }
        let _ = i;
        Ok(())
    }

    /// Client values and constants in, client value out.
    fn client_eval(&mut self, n: &NodeProto, ins: &[Option<V>]) -> Result<()> {
        let mut srcs = Vec::new();
        let mut dummy = Vec::new();
        for v in ins {
            match v {
                None => {
                    srcs.push(Src::Absent);
                    dummy.push(None);
                }
                Some(V::C(t, secret)) => {
                    if *secret {
                        return bad(format!("{}: a weight-derived constant would reach the client's own computation (refused: it would reveal the weight)", node_label(n)));
                    }
                    srcs.push(Src::Const(t.clone()));
                    dummy.push(Some(t.clone()));
                }
                Some(V::Client(s)) => {
                    srcs.push(Src::Slot(*s));
                    dummy.push(Some(Tensor::zeros(&self.p.slots[*s].shape, true)?));
                }
                Some(V::Shared(_)) => unreachable_shared()?,
            }
        }
        // the output shape: the node on placeholders
        let refs: Vec<Option<&Tensor>> = dummy.iter().map(|t| t.as_ref()).collect();
        let outs = eval_node(n, &refs)?;
        if n.output.len() != 1 || outs.len() != 1 {
            return bad(format!("{}: client-side nodes with several outputs are not supported", node_label(n)));
        }
        let s = self.slot(outs[0].shape.clone(), true, 0.0, &n.output[0])?;
        self.push(Step::ClientEval { out: s, node: Box::new(n.clone()), ins: srcs });
        self.set(n, V::Client(s));
        Ok(())
    }

    /// A data-movement node on shared values (its index map is computed
    /// from iota tensors, at lowering to check it and at run time).
    fn movement(&mut self, n: &NodeProto, ins: &[Option<V>]) -> Result<()> {
        let mut srcs = Vec::new();
        for v in ins {
            srcs.push(match v {
                Some(V::Shared(s)) => Src::Slot(*s),
                Some(V::C(t, _)) => Src::Const(t.clone()),
                None => Src::Absent,
                Some(V::Client(_)) => return bad(format!("{}: mixes the client's values into a private value's layout", node_label(n))),
            });
        }
        for (k, name) in n.output.iter().enumerate() {
            let step = Step::Move { out: usize::MAX, node: Box::new(n.clone()), ins: srcs.clone(), output: k };
            let (shape, bound) = self.p.move_shape(&step)?;
            let out = self.slot(shape, false, bound, name)?;
            let Step::Move { node, ins, output, .. } = step else { unreachable!() };
            self.push(Step::Move { out, node, ins, output });
            self.move_l2(out);
            self.vals.insert(name.clone(), V::Shared(out));
        }
        Ok(())
    }

    fn node(&mut self, _i: usize, n: &NodeProto) -> Result<()> {
        let op = n.op_type.as_deref().unwrap_or("");
        let ins: Vec<Option<V>> = (0..n.input.len()).map(|k| self.get(n, k)).collect::<Result<_>>()?;
        let any_shared = ins.iter().any(|v| matches!(v, Some(V::Shared(_))));
        let any_client = ins.iter().any(|v| matches!(v, Some(V::Client(_))));
        // Shape of anything known: a public constant
        if op == "Shape" || op == "Size" {
            let v = self.need(n, 0)?;
            let t = Tensor::zeros(&self.shape(&v), false)?;
            let out = eval_node(n, &[Some(&t)])?.pop().ok_or_else(|| Error::Unsupported("Shape".into()))?;
            self.set(n, V::C(out, false));
            return Ok(());
        }
        if !any_shared && !any_client {
            // constant folding
            if op == "Constant" {
                let t = eval_node(n, &[])?.pop().ok_or_else(|| Error::Unsupported("Constant".into()))?;
                self.set(n, V::C(t, false));
                return Ok(());
            }
            let secret = ins.iter().any(|v| matches!(v, Some(V::C(_, true))));
            let ts: Vec<Option<&Tensor>> = ins.iter().map(|v| match v { Some(V::C(t, _)) => Some(t), _ => None }).collect();
            let outs = eval_node(n, &ts)?;
            for (name, t) in n.output.iter().zip(outs) {
                self.vals.insert(name.clone(), V::C(t, secret));
            }
            return Ok(());
        }
        if !any_shared {
            // the embedding lookup: a constant table by the client's ids
            if op == "Gather" {
                if let (Some(V::C(table, _)), Some(V::Client(ids))) = (&ins[0], &ins[1]) {
                    let ax = attr_int(n, "axis", 0);
                    if table.shape.len() != 2 || !(ax == 0 || ax == -2) {
                        return bad(format!("{}: an embedding lookup needs a 2-D table gathered on axis 0", node_label(n)));
                    }
                    let (vocab, h) = (table.shape[0], table.shape[1]);
                    let mut shape = self.p.slots[*ids].shape.clone();
                    shape.push(h);
                    let b = table.v.iter().fold(0.0f64, |a, v| a.max(v.abs()));
                    let out = self.slot(shape, false, b, &n.output[0])?;
                    self.push(Step::Embed { out, ids: *ids, vocab, h, table: table.v.clone() });
                    self.set(n, V::Shared(out));
                    return Ok(());
                }
            }
            return self.client_eval(n, &ins);
        }
        match op {
            "Identity" | "Dropout" | "Reshape" | "Flatten" | "Unsqueeze" | "Squeeze" | "Cast" => {
                let s = self.shared(n, &self.need(n, 0)?)?;
                if op == "Cast" && ![1, 10, 11, 16].contains(&(attr_int(n, "to", 1) as i32)) {
                    return bad(format!("{}: casting a private value to an integer type", node_label(n)));
                }
                // the same values in a new shape
                if ins.iter().skip(1).any(|v| !matches!(v, Some(V::C(..)) | None)) {
                    return bad(format!("{}: a non-constant shape", node_label(n)));
                }
                let _ = s;
                self.movement(n, &ins)
            }
            "Transpose" | "Slice" | "Split" | "Concat" | "Expand" => self.movement(n, &ins),
            "Gather" => match (&ins[0], &ins[1]) {
                (Some(V::Shared(_)), Some(V::C(_, _))) => self.movement(n, &ins),
                _ => bad(format!("{}: gathering a private value by private or client indices is not supported", node_label(n))),
            },
            "Add" | "Sub" => self.add_sub(n, op, &ins),
            "Mul" | "Div" => self.mul_div(n, op, &ins),
            "Neg" => {
                let s = self.shared(n, &self.need(n, 0)?)?;
                let out = self.slot(self.p.slots[s].shape.clone(), false, self.bound(s), &n.output[0])?;
                self.push(Step::Neg { out, x: s });
                self.keep_l2(s, out, 1.0, true);
                self.set(n, V::Shared(out));
                Ok(())
            }
            "MatMul" => self.matmul(n, &ins),
            "Gemm" => self.gemm(n, &ins),
            "Softmax" => {
                let s = self.shared(n, &self.need(n, 0)?)?;
                let shape = self.p.slots[s].shape.clone();
                let ax = norm_axis(n, attr_int(n, "axis", -1), shape.len())?;
                if ax + 1 != shape.len() {
                    return bad(format!("{}: Softmax over axis {ax} of {shape:?} (only the last axis)", node_label(n)));
                }
                let out = self.slot(shape.clone(), false, 1.0 + 4.0 * SOFTMAX_ERR, &n.output[0])?;
                self.push(Step::Softmax { out, x: s, len: shape[ax] });
                self.set(n, V::Shared(out));
                Ok(())
            }
            "Tanh" => {
                let s = self.shared(n, &self.need(n, 0)?)?;
                let out = self.slot(self.p.slots[s].shape.clone(), false, 1.0 + TANH_ERR, &n.output[0])?;
                self.push(Step::Tanh { out, x: s });
                self.set(n, V::Shared(out));
                Ok(())
            }
            "LayerNormalization" => {
                let s = self.shared(n, &self.need(n, 0)?)?;
                let shape = self.p.slots[s].shape.clone();
                let ax = norm_axis(n, attr_int(n, "axis", -1), shape.len())?;
                if ax + 1 != shape.len() {
                    return bad(format!("{}: LayerNormalization over more than the last axis", node_label(n)));
                }
                let len = shape[ax];
                let take = |v: &Option<V>| -> Result<Vec<f64>> {
                    match v {
                        None => Ok(Vec::new()),
                        Some(V::C(t, _)) if t.len() == len => Ok(t.v.clone()),
                        _ => bad(format!("{}: scale and bias must be constants of {len} values", node_label(n))),
                    }
                };
                let g = take(&ins.get(1).cloned().flatten())?;
                let b = take(&ins.get(2).cloned().flatten())?;
                let bound = (len as f64).sqrt() * 1.01 * g.iter().fold(if g.is_empty() { 1.0 } else { 0.0 }, |a: f64, v| a.max(v.abs())) + b.iter().fold(0.0f64, |a, v| a.max(v.abs())) + 0.01;
                let out = self.slot(shape, false, bound, &n.output[0])?;
                if let Some(v) = layernorm_row_l2(len, &g, &b) {
                    self.l2.insert(out, RowL2 { axis: ax, a: 0.0, b: v, w: None });
                }
                self.push(Step::LayerNorm { out, x: s, len, eps: crate::eval::attr_float(n, "epsilon", 1e-5), gamma: g, beta: b });
                self.set(n, V::Shared(out));
                Ok(())
            }
            "Where" => self.where_mask(n, &ins),
            _ => bad(format!("{} on a private value is not supported; supported: {}", node_label(n), SUPPORTED.join(", "))),
        }
    }

    /// Whether every consumer of `name` is a Softmax (the mask's use).
    fn feeds_softmax(&self, name: &str) -> bool {
        let c = self.cons.get(name).map(|v| v.as_slice()).unwrap_or(&[]);
        !c.is_empty() && !self.m.outputs.iter().any(|o| o == name) && c.iter().all(|&j| self.m.graph.node[j].op_type.as_deref() == Some("Softmax"))
    }

    fn mask_step(&mut self, n: &NodeProto, x: Slot, m: Slot) -> Result<()> {
        if !self.feeds_softmax(&n.output[0]) {
            return bad(format!("{}: a client value added to a private value is supported only as an attention mask feeding a Softmax", node_label(n)));
        }
        let shape = self.p.slots[x].shape.clone();
        let ms = self.p.slots[m].shape.clone();
        crate::broadcast_index(&ms, &shape).ok_or_else(|| Error::Unsupported(format!("graph: {}: mask of shape {ms:?} does not broadcast to {shape:?}", node_label(n))))?;
        // M = 2·(score bound) + 32: a masked score sits ≥ 32 below its row's
        // maximum, and Softmax gives it at most exp(−16) of weight (as in
        // `hush_inference::encoder`); terms beyond ±M are clamped
        let clamp = 2.0 * self.bound(x) + 32.0;
        let out = self.slot(shape, false, self.bound(x) + clamp, &n.output[0])?;
        self.push(Step::Mask { out, x, m, clamp });
        self.set(n, V::Shared(out));
        Ok(())
    }

    /// Where(client condition, big negative constant, scores) before a
    /// Softmax (masked_fill): a mask of −M where the condition holds.
    fn where_mask(&mut self, n: &NodeProto, ins: &[Option<V>]) -> Result<()> {
        match (&ins[0], &ins[1], &ins[2]) {
            (Some(V::Client(c)), Some(V::C(k, _)), Some(V::Shared(x))) if k.len() == 1 && k.v[0] <= -1e4 => {
                // the client's additive term: k where c, 0 elsewhere
                let mut node = NodeProto { op_type: Some("Where".into()), name: n.name.clone(), ..Default::default() };
                node.input = vec!["c".into(), "k".into(), "z".into()];
                node.output = vec![format!("{}::mask", n.output[0])];
                let cs = self.p.slots[*c].shape.clone();
                let m = self.slot(cs, true, 0.0, &node.output[0])?;
                self.push(Step::ClientEval { out: m, node: Box::new(node), ins: vec![Src::Slot(*c), Src::Const(k.clone()), Src::Const(Tensor::scalar(0.0))] });
                self.mask_step(n, *x, m)
            }
            _ => bad(format!("{}: Where on a private value is supported only as masked_fill(client mask, large negative constant) before a Softmax", node_label(n))),
        }
    }

    fn add_sub(&mut self, n: &NodeProto, op: &str, ins: &[Option<V>]) -> Result<()> {
        let a = self.need(n, 0)?;
        let b = self.need(n, 1)?;
        let name = n.output[0].clone();
        match (&a, &b) {
            (V::Shared(x), V::Shared(y)) => {
                let (sx, sy) = (self.p.slots[*x].shape.clone(), self.p.slots[*y].shape.clone());
                let shape = crate::broadcast_shape(&sx, &sy).ok_or_else(|| Error::Unsupported(format!("graph: {}: shapes {sx:?} and {sy:?}", node_label(n))))?;
                let x = self.broadcast(*x, &shape)?;
                let y = self.broadcast(*y, &shape)?;
                let out = self.slot(shape, false, self.bound(x) + self.bound(y), &name)?;
                self.push(if op == "Add" { Step::Add { out, a: x, b: y } } else { Step::Sub { out, a: x, b: y } });
                self.set(n, V::Shared(out));
            }
            (V::Shared(x), V::C(c, _)) | (V::C(c, _), V::Shared(x)) => {
                let sx = self.p.slots[*x].shape.clone();
                let shape = crate::broadcast_shape(&sx, &c.shape).ok_or_else(|| Error::Unsupported(format!("graph: {}: shapes {sx:?} and {:?}", node_label(n), c.shape)))?;
                let x = self.broadcast(*x, &shape)?;
                let idx = crate::broadcast_index(&c.shape, &shape).ok_or_else(|| Error::Unsupported("broadcast".into()))?;
                let const_first = matches!(a, V::C(..));
                let sign = if op == "Sub" && !const_first { -1.0 } else { 1.0 };
                let cv: Vec<f64> = idx.iter().map(|&i| sign * c.v[i]).collect();
                let cb = cv.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                let x = if op == "Sub" && const_first {
                    let o = self.slot(shape.clone(), false, self.bound(x), &name)?;
                    self.push(Step::Neg { out: o, x });
                    self.keep_l2(x, o, 1.0, true);
                    o
                } else {
                    x
                };
                let out = self.slot(shape, false, self.bound(x) + cb, &name)?;
                self.add_const_l2(x, out, &cv);
                self.push(Step::AddConst { out, x, c: cv });
                self.set(n, V::Shared(out));
            }
            (V::Shared(x), V::Client(m)) if op == "Add" => self.mask_step(n, *x, *m)?,
            (V::Client(m), V::Shared(x)) if op == "Add" => self.mask_step(n, *x, *m)?,
            _ => return bad(format!("{}: this combination of private and client values is not supported", node_label(n))),
        }
        let _ = ins;
        Ok(())
    }

    /// The row-norm bound through x + c (the server's c, one value per
    /// element, added exactly at the runtime's scale up to its rounding):
    /// ‖x + c‖ ≤ ‖x‖ + the longest line of c along the bounded axis, plus
    /// c's rounding ([`WEIGHT_ROUND_ERR`] per entry). A linear layer's bias
    /// Add lands here, so its norm is added once to the unrounded bound.
    fn add_const_l2(&mut self, x: Slot, out: Slot, c: &[f64]) {
        let Some(r) = self.l2.get(&x).copied() else { return };
        let shape = &self.p.slots[out].shape;
        let (len, inner) = (shape.get(r.axis).copied().unwrap_or(1), shape.get(r.axis + 1..).map_or(1, |t| t.iter().product::<usize>()));
        if len == 0 || inner == 0 || !c.len().is_multiple_of(len * inner) {
            return;
        }
        let outer = c.len() / (len * inner);
        let mut cn = 0.0f64;
        for o in 0..outer {
            for i in 0..inner {
                cn = cn.max((0..len).map(|p| c[(o * len + p) * inner + i].powi(2)).sum::<f64>().sqrt());
            }
        }
        let e = (len as f64).sqrt() * WEIGHT_ROUND_ERR;
        self.l2.insert(out, RowL2 { b: r.b + cn + e, ..r });
    }

    /// Broadcasts a shared slot to `shape` (a Move, or itself).
    fn broadcast(&mut self, s: Slot, shape: &[usize]) -> Result<Slot> {
        let from = self.p.slots[s].shape.clone();
        if from == shape {
            return Ok(s);
        }
        crate::broadcast_index(&from, shape).ok_or_else(|| Error::Unsupported(format!("graph: {from:?} does not broadcast to {shape:?}")))?;
        let name = self.p.slots[s].name.clone();
        let out = self.slot(shape.to_vec(), false, self.bound(s), &name)?;
        let node = NodeProto { op_type: Some("Expand".into()), name: Some(format!("{name}::broadcast")), input: vec!["x".into(), "shape".into()], output: vec!["y".into()], ..Default::default() };
        let dims = Tensor::ints(vec![shape.len()], shape.iter().map(|&d| d as f64).collect());
        self.push(Step::Move { out, node: Box::new(node), ins: vec![Src::Slot(s), Src::Const(dims)], output: 0 });
        self.move_l2(out);
        Ok(out)
    }

    fn mul_div(&mut self, n: &NodeProto, op: &str, _ins: &[Option<V>]) -> Result<()> {
        let a = self.need(n, 0)?;
        let b = self.need(n, 1)?;
        let name = n.output[0].clone();
        match (&a, &b) {
            (V::Shared(x), V::C(c, secret)) | (V::C(c, secret), V::Shared(x)) => {
                if op == "Div" && matches!(a, V::C(..)) {
                    return bad(format!("{}: dividing by a private value is not supported", node_label(n)));
                }
                let shape = self.p.slots[*x].shape.clone();
                if c.len() == 1 && !*secret {
                    let k = if op == "Div" { 1.0 / c.v[0] } else { c.v[0] };
                    if !k.is_finite() {
                        return bad(format!("{}: scale {k}", node_label(n)));
                    }
                    let out = self.slot(shape, false, self.bound(*x) * k.abs(), &name)?;
                    self.push(Step::Scale { out, x: *x, c: k });
                    self.keep_l2(*x, out, k.abs() + WEIGHT_ROUND_ERR, false);
                } else {
                    let len = *shape.last().unwrap_or(&1);
                    let ok = c.len() == len && c.shape.last() == Some(&len) && c.shape.iter().rev().skip(1).all(|&d| d == 1) && c.shape.len() <= shape.len();
                    if !ok && c.len() != 1 {
                        return bad(format!("{}: multiplying by a constant of shape {:?} (a scalar or one value per position of the last axis)", node_label(n), c.shape));
                    }
                    let cv: Vec<f64> = (0..len).map(|j| { let v = c.v[j % c.len()]; if op == "Div" { 1.0 / v } else { v } }).collect();
                    if cv.iter().any(|v| !v.is_finite()) {
                        return bad(format!("{}: non-finite scale", node_label(n)));
                    }
                    let m = cv.iter().fold(0.0f64, |a, v| a.max(v.abs()));
                    let out = self.slot(shape, false, self.bound(*x) * m, &name)?;
                    self.push(Step::ScaleVec { out, x: *x, len, c: cv });
                    self.keep_l2(*x, out, m + WEIGHT_ROUND_ERR, false);
                }
                self.set(n, V::Shared(out_of(&self.p)));
            }
            (V::Shared(x), V::Shared(y)) if op == "Mul" => {
                let (sx, sy) = (self.p.slots[*x].shape.clone(), self.p.slots[*y].shape.clone());
                let shape = crate::broadcast_shape(&sx, &sy).ok_or_else(|| Error::Unsupported(format!("graph: {}: shapes", node_label(n))))?;
                let x = self.broadcast(*x, &shape)?;
                let y = self.broadcast(*y, &shape)?;
                let out = self.slot(shape, false, self.bound(x) * self.bound(y), &name)?;
                self.push(Step::Mul { out, a: x, b: y });
                self.set(n, V::Shared(out));
            }
            _ => return bad(format!("{}: this combination of private and client values is not supported", node_label(n))),
        }
        Ok(())
    }

    fn linear(&mut self, name: &str, x: Slot, w: Vec<f64>, n_in: usize, n_out: usize, b: Vec<f64>) -> Result<Slot> {
        let shape = self.p.slots[x].shape.clone();
        let rows = self.p.slots[x].slots_len() / n_in.max(1);
        let bx = self.bound(x);
        let mut bound = (0..n_out)
            .map(|j| (0..n_in).map(|i| w[i * n_out + j].abs()).sum::<f64>() * bx + b.get(j).map_or(0.0, |v| v.abs()))
            .fold(0.0, f64::max);
        let mut os = shape;
        if let Some(l) = os.last_mut() {
            *l = n_out;
        }
        let rank = os.len();
        // **By Cauchy–Schwarz per output column**, when the input's rows have a
        // proven norm bound (a LayerNorm's output, [`layernorm_row_l2`]):
        // |Σ_i x̃_i·w̃_ij| ≤ ‖x̃‖₂·‖w̃_{:,j}‖₂ with ‖w̃_{:,j}‖₂ ≤ ‖w_{:,j}‖₂ +
        // √n_in·2^−9 (each weight rounded at f ≥ 8), plus the output's
        // truncation (L2_ENTRY_ERR) and b̃_j's rounding (2^−9). The ℓ1 bound
        // above takes every input at its largest at once; a row of norm L
        // cannot, so on BERT-base's Q, K, V and first FFN layer this is about
        // √n_in times tighter, and the GeLU's comparisons run on fewer bits.
        // Like every slot bound it is public, rounded up to a power of two: it
        // tells the client about log2 of max_j ‖w_j‖₂ (and the LayerNorm's γ, β),
        // a few bits per layer, the same kind of fact the ℓ1 bound gave; a
        // wrong bound would only make an output wrap (caught by the tests
        // against the fixed-point reference), never reveal a share.
        if !w.is_empty() && w.len() == n_in * n_out {
            if let Some(r) = self.l2.get(&x).copied().filter(|r| r.axis + 1 == rank) {
                let lx = self.l2_value(r);
                let round = (n_in as f64).sqrt() * WEIGHT_ROUND_ERR;
                let cs = (0..n_out)
                    .map(|j| {
                        let col = (0..n_in).map(|i| w[i * n_out + j] * w[i * n_out + j]).sum::<f64>().sqrt() * (1.0 + 1e-12);
                        lx * (col + round) + b.get(j).map_or(0.0, |v| v.abs()) + WEIGHT_ROUND_ERR + L2_ENTRY_ERR
                    })
                    .fold(0.0, f64::max);
                if cs.is_finite() {
                    bound = bound.min(cs);
                }
            }
        }
        let out = self.slot(os, false, bound, name)?;
        // the row norm: ‖x̃·W̃ + b̃‖₂ ≤ σ̂·‖x̃‖₂ + ‖b‖₂ + the output's rounding
        // (b̃'s at 2^{2f} and the truncation, L2_ENTRY_ERR per entry)
        if let Some(r) = self.l2.get(&x).copied().filter(|r| r.axis + 1 == rank) {
            let lx = self.l2_value(r);
            let bn = b.iter().map(|v| v * v).sum::<f64>().sqrt();
            self.l2.insert(out, RowL2 { axis: r.axis, a: lx, b: bn + (n_out as f64).sqrt() * L2_ENTRY_ERR, w: Some(out) });
        }
        Ok(self.push(Step::Linear { out, x, rows, n_in, n_out, w, b }))
    }

    fn matmul(&mut self, n: &NodeProto, _ins: &[Option<V>]) -> Result<()> {
        let a = self.need(n, 0)?;
        let b = self.need(n, 1)?;
        let name = n.output[0].clone();
        match (&a, &b) {
            (V::Shared(x), V::C(w, _)) => {
                let sx = &self.p.slots[*x].shape;
                if w.shape.len() != 2 || sx.last() != Some(&w.shape[0]) {
                    return bad(format!("{}: a private {:?} times a weight {:?} (the weight must be 2-D, in × out)", node_label(n), sx, w.shape));
                }
                let (n_in, n_out) = (w.shape[0], w.shape[1]);
                let o = self.linear(&name, *x, w.v.clone(), n_in, n_out, Vec::new())?;
                self.set(n, V::Shared(o));
            }
            (V::C(w, _), V::Shared(x)) => {
                // y = W·X over the last two axes of X: transpose X's last two axes, a linear layer with Wᵀ, transpose back
                let sx = self.p.slots[*x].shape.clone();
                let r = sx.len();
                if w.shape.len() != 2 || r < 2 || sx[r - 2] != w.shape[1] {
                    return bad(format!("{}: a weight {:?} times a private {sx:?}", node_label(n), w.shape));
                }
                let (n_out, n_in) = (w.shape[0], w.shape[1]);
                let t1 = self.swap_last(x.to_owned(), &name)?;
                let wt = crate::eval::transpose2(w);
                let y = self.linear(&name, t1, wt.v, n_in, n_out, Vec::new())?;
                let o = self.swap_last(y, &name)?;
                self.set(n, V::Shared(o));
            }
            (V::Shared(x), V::Shared(y)) => {
                let (sx, sy) = (self.p.slots[*x].shape.clone(), self.p.slots[*y].shape.clone());
                if sx.len() < 2 || sy.len() < 2 || sx[..sx.len() - 2] != sy[..sy.len() - 2] || sx[sx.len() - 1] != sy[sy.len() - 2] {
                    return bad(format!("{}: private MatMul of {sx:?} and {sy:?} (equal batch axes, inner sizes agreeing)", node_label(n)));
                }
                let (m, k, nn) = (sx[sx.len() - 2], sx[sx.len() - 1], sy[sy.len() - 1]);
                let count = sx[..sx.len() - 2].iter().product();
                let mut shape = sx[..sx.len() - 2].to_vec();
                shape.extend([m, nn]);
                let bound = self.matmul_bound(*x, *y, k);
                let out = self.slot(shape, false, bound, &name)?;
                self.push(Step::MatMul { out, a: *x, b: *y, count, m, k, n: nn });
                self.set(n, V::Shared(out));
            }
            _ => return bad(format!("{}: this combination of private and client values is not supported", node_label(n))),
        }
        Ok(())
    }

    /// The proven bound of a secret × secret product A·B contracting k
    /// terms: k·|A|·|B| in general; the smallest of that and the two below
    /// that apply. Each bounds the exact product of the operands' private
    /// fixed-point values (what the HE backend lifts before the product's
    /// truncation: `hush_inference::graph_he::pre_shift_bounded` relies on
    /// it) and, with its margin, the truncated output.
    ///
    /// **Attention's P·V.** When A is *itself* a Softmax's output slot
    /// (the step that wrote slot A is a [`Step::Softmax`] over rows of
    /// length k — the Softmax runs on the last axis only, which is exactly
    /// the axis A·B contracts), each output is Σ_j p̃_ij·v_jl with p̃_i. one
    /// private softmax row, so |(P·V)_il| ≤ max|V| · Σ_j |p̃_ij| ≤
    /// |B| · [`softmax_row_abs_sum`](k): a softmax row is a convex
    /// combination up to its documented per-entry error, which the bound
    /// takes at the coarsest fraction and the loosest mode (every mode
    /// runs `softmax_within`: tee, dealer, interactive, silent). Plus
    /// 2^{−5} for the product's own truncation (at most a few ulps of
    /// 2^{−8}). At k = 128 that is 2.0·|B| instead of 128·2·|B| — what keeps
    /// BERT-base's attention output projection inside the HE ring (no wide
    /// product). Anything else — A a moved (transposed, reshaped, sliced)
    /// Softmax output, a Softmax over rows of another length, a product of
    /// Softmax outputs on the right — keeps the general bound
    /// (`matmul_bound_uses_the_softmax_row_sum_only_for_p_times_v`).
    ///
    /// **Attention's Q·Kᵀ, by Cauchy–Schwarz.** Each output is a dot
    /// product Σ_t a_it·b_tj of a line of A along its last axis and a line
    /// of B along its axis −2, so |q·k| ≤ ‖q‖₂·‖k‖₂. When both lines have
    /// proven norm bounds ([`RowL2`]: rows of a LayerNorm's output,
    /// [`layernorm_row_l2`]; through a linear layer, ‖x̃W̃ + b̃‖₂ ≤
    /// σ̂(W)·‖x̃‖₂ + ‖b‖₂ with σ̂ from [`spectral_bound`]; public scales;
    /// moves that keep each line inside one bounded line — a head's
    /// sub-vector is no longer than its row), the bound is
    /// L2(A)·L2(B) + 2^{−5} (the truncation, as above). Every term carries
    /// the private operators' documented errors at the coarsest fraction, so
    /// the bound holds for the fixed-point values the parties hold, not only
    /// for the float ones. On BERT-base's layer 0 it is ≈ 5.4·10⁴ (slot
    /// bound 2^16) instead of k·|Q|·|K| = 2^30: Q·Kᵀ fits the HE ring and
    /// runs as one plain product. Operands
    /// with no row-norm bound (not from a LayerNorm, or through a move that
    /// mixes rows) keep the general bound
    /// (`qk_bound_uses_cauchy_schwarz_only_from_layernorm_rows`).
    ///
    /// The bound is public (a function of the public program and the
    /// weights, rounded up to a power of two as every slot bound), and it is
    /// a worst case over every input: a wrong bound would make a product
    /// wrap (a wrong output, which the tests against the fixed-point
    /// reference catch), never reveal anything.
    fn matmul_bound(&mut self, a: Slot, b: Slot, k: usize) -> f64 {
        let mut best = k as f64 * self.bound(a) * self.bound(b);
        let softmax_rows = self.p.steps.iter().rev().find(|s| s.out() == a).is_some_and(|s| matches!(s, Step::Softmax { len, .. } if *len == k));
        if softmax_rows {
            best = best.min(softmax_row_abs_sum(k) * self.bound(b) + 1.0 / 32.0);
        }
        let (ra, rb) = (self.p.slots[a].shape.len(), self.p.slots[b].shape.len());
        if let (Some(fa), Some(fb)) = (self.l2.get(&a).copied(), self.l2.get(&b).copied()) {
            if fa.axis + 1 == ra && fb.axis + 2 == rb {
                let cs = self.l2_value(fa) * self.l2_value(fb) + 1.0 / 32.0;
                if cs.is_finite() {
                    best = best.min(cs);
                }
            }
        }
        best
    }

    /// Swaps the last two axes of a shared slot.
    fn swap_last(&mut self, s: Slot, name: &str) -> Result<Slot> {
        let shape = self.p.slots[s].shape.clone();
        let r = shape.len();
        let mut perm: Vec<i64> = (0..r as i64).collect();
        perm.swap(r - 2, r - 1);
        let mut os = shape;
        os.swap(r - 2, r - 1);
        let out = self.slot(os, false, self.bound(s), name)?;
        let node = NodeProto {
            op_type: Some("Transpose".into()),
            name: Some(format!("{name}::swap")),
            input: vec!["x".into()],
            output: vec!["y".into()],
            attribute: vec![crate::proto::AttributeProto { name: Some("perm".into()), ints: perm, r#type: Some(crate::proto::attr_type::INTS), ..Default::default() }],
            ..Default::default()
        };
        self.push(Step::Move { out, node: Box::new(node), ins: vec![Src::Slot(s)], output: 0 });
        self.move_l2(out);
        Ok(out)
    }

    fn gemm(&mut self, n: &NodeProto, _ins: &[Option<V>]) -> Result<()> {
        let a = self.need(n, 0)?;
        let b = self.need(n, 1)?;
        let c = self.get(n, 2)?;
        let name = n.output[0].clone();
        let (V::Shared(x), V::C(w, _)) = (&a, &b) else { return bad(format!("{}: Gemm needs a private A and a constant B", node_label(n))) };
        if attr_int(n, "transA", 0) != 0 {
            return bad(format!("{}: transA = 1 is not supported", node_label(n)));
        }
        let w = if attr_int(n, "transB", 0) != 0 { crate::eval::transpose2(w) } else { w.clone() };
        let (alpha, beta) = (crate::eval::attr_float(n, "alpha", 1.0), crate::eval::attr_float(n, "beta", 1.0));
        let sx = self.p.slots[*x].shape.clone();
        if w.shape.len() != 2 || sx.len() != 2 || sx[1] != w.shape[0] {
            return bad(format!("{}: Gemm of {sx:?} and {:?}", node_label(n), w.shape));
        }
        let (n_in, n_out) = (w.shape[0], w.shape[1]);
        let wv: Vec<f64> = w.v.iter().map(|v| v * alpha).collect();
        let (bias, rest) = match c {
            None => (Vec::new(), None),
            Some(V::C(c, _)) if c.len() == n_out && c.shape.last() == Some(&n_out) => (c.v.iter().map(|v| v * beta).collect(), None),
            Some(V::C(c, _)) => (Vec::new(), Some(c)),
            Some(_) => return bad(format!("{}: Gemm's C must be a constant", node_label(n))),
        };
        let y = self.linear(&name, *x, wv, n_in, n_out, bias)?;
        let y = match rest {
            None => y,
            Some(c) => {
                let shape = self.p.slots[y].shape.clone();
                let idx = crate::broadcast_index(&c.shape, &shape).ok_or_else(|| Error::Unsupported(format!("graph: {}: C of shape {:?}", node_label(n), c.shape)))?;
                let cv: Vec<f64> = idx.iter().map(|&i| beta * c.v[i]).collect();
                let cb = cv.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                let out = self.slot(shape, false, self.bound(y) + cb, &name)?;
                self.add_const_l2(y, out, &cv);
                self.push(Step::AddConst { out, x: y, c: cv })
            }
        };
        self.set(n, V::Shared(y));
        Ok(())
    }
}

/// Whether every line of a move's output along `axis` (output `shape`,
/// index `map` of (source, index)) takes distinct elements of one line of
/// one source, whose bounded axis has (stride, length) `geo[source]`.
fn lines_within(map: &[(u32, u32)], shape: &[usize], axis: usize, geo: &[(usize, usize)]) -> bool {
    let len = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    if len == 0 || inner == 0 || !map.len().is_multiple_of(len * inner) {
        return map.is_empty();
    }
    let outer = map.len() / (len * inner);
    let mut seen = vec![usize::MAX; geo.iter().map(|g| g.1).max().unwrap_or(0)];
    let mut line_no = 0usize;
    for o in 0..outer {
        for r in 0..inner {
            let mut id = None;
            for p in 0..len {
                let (k, i) = map[(o * len + p) * inner + r];
                let Some(&(st, ln)) = geo.get(k as usize) else { return false };
                let i = i as usize;
                let line = (k, i / (st * ln), i % st);
                if *id.get_or_insert(line) != line {
                    return false;
                }
                let pos = (i / st) % ln;
                if seen[pos] == line_no {
                    return false;
                }
                seen[pos] = line_no;
            }
            line_no += 1;
        }
    }
    true
}

fn out_of(p: &Program) -> Slot {
    p.slots.len() - 1
}

fn unreachable_shared<T>() -> Result<T> {
    bad("internal: a private value in a client computation")
}

impl SlotInfo {
    fn slots_len(&self) -> usize {
        self.shape.iter().product()
    }
}
