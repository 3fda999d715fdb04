//! The model description the engine executes, and its file format.
//!
//! A `.hushm` file (written from ONNX by the `hush-onnx` crate: `hush
//! import`, or `.onnx` given directly to `Model::load`) is
//!
//! ```text
//! b"HUSHMDL1" | u32 header length H (LE) | H bytes of JSON | tensor data (f32 LE)
//! ```
//!
//! The JSON header holds the input, the output, the nodes in execution order
//! (shapes without the batch dimension) and a table of tensors (name, shape,
//! byte offset into the data section). The header alone — the *public
//! architecture* — is what the server sends to a client; the weights never
//! leave the server.
//!
//! The file is untrusted input: the loader checks every size before
//! allocating, every offset against the data, every shape against the
//! operator's rule, every value name against the nodes before it, and
//! returns [`Error::Model`] naming the node (never panics).

use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

pub const MAGIC: &[u8; 8] = b"HUSHMDL1";
pub const FORMAT_VERSION: u32 = 1;
/// Largest JSON header accepted.
pub const MAX_HEADER: usize = 16 << 20;
/// Largest tensor (elements), activation or weight.
pub const MAX_ELEMS: usize = 1 << 27;
/// Largest number of nodes.
pub const MAX_NODES: usize = 10_000;
/// Largest total weight count of a model file.
pub const MAX_WEIGHTS: usize = 1 << 28;

/// What the client applies to the revealed logits (in the clear).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Post {
    None,
    Softmax,
    Argmax,
}

/// A weight tensor: shape and (on the server) float values. On the client
/// (architecture only) `data` is empty.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

impl Tensor {
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A layer. Weights of linear layers are `weight` [out-major] and `bias`.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// 2-D convolution; weight c_out×c_in×kh×kw, bias c_out; pads [t, l, b, r].
    Conv { weight: Tensor, bias: Tensor, stride: [usize; 2], pads: [usize; 4] },
    /// y = W·x + b, weight n_out×n_in.
    Dense { weight: Tensor, bias: Tensor },
    /// Per-channel y = s_c·x + t_c (an unfolded BatchNormalization).
    Scale { weight: Tensor, bias: Tensor },
    /// Element-wise sum of two activations of the same shape (residual).
    Add,
    /// Activation plus a constant of the same shape (server's secret).
    AddConst { value: Tensor },
    Relu,
    /// Max over in-bounds window elements (padding never wins).
    MaxPool { kernel: [usize; 2], stride: [usize; 2], pads: [usize; 4] },
    /// Average; divisor = kernel area if `count_include_pad`, else the
    /// number of in-bounds elements.
    AvgPool { kernel: [usize; 2], stride: [usize; 2], pads: [usize; 4], count_include_pad: bool },
    /// Same data, new shape (Flatten, Reshape).
    Reshape,
    /// Concatenation along `axis` (batch dimension excluded).
    Concat { axis: usize },
}

impl Op {
    pub fn kind(&self) -> &'static str {
        match self {
            Op::Conv { .. } => "conv",
            Op::Dense { .. } => "dense",
            Op::Scale { .. } => "scale",
            Op::Add => "add",
            Op::AddConst { .. } => "add_const",
            Op::Relu => "relu",
            Op::MaxPool { .. } => "maxpool",
            Op::AvgPool { .. } => "avgpool",
            Op::Reshape => "reshape",
            Op::Concat { .. } => "concat",
        }
    }
    /// Whether the layer multiplies by the server's weights (module-dealt).
    pub fn is_weighted_linear(&self) -> bool {
        matches!(self, Op::Conv { .. } | Op::Dense { .. } | Op::Scale { .. })
    }
}

/// One node: value ids refer to the model input (0) or node outputs (i+1).
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub name: String,
    pub op: Op,
    pub inputs: Vec<usize>,
    /// Output shape (no batch dimension).
    pub shape: Vec<usize>,
}

/// A validated model. Value 0 is the input; node i writes value i+1.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    pub name: String,
    pub input_shape: Vec<usize>,
    pub nodes: Vec<Node>,
    /// Value id of the logits revealed to the client.
    pub output: usize,
    pub post: Post,
    /// Whether the weights are present (server) or only the architecture (client).
    pub has_weights: bool,
    /// The public architecture (the JSON header), sent to clients.
    pub header_json: String,
    /// The declared input range and raw scale ([`HeaderIo::range`]).
    pub input_range: Option<(f64, f64)>,
    pub input_raw_scale: Option<f64>,
}

// ---- JSON header ------------------------------------------------------------

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct HeaderIo {
    pub name: String,
    pub shape: Vec<usize>,
    /// The input: the value range the model was trained on, `[lo, hi]`
    /// (optional; checked on the client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<[f64; 2]>,
    /// The input: the factor that brings raw whole-number data into
    /// `range` (e.g. 1/255 for 8-bit pixels into [0, 1]); applied on the
    /// client to inputs that are all whole numbers outside the range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_scale: Option<f64>,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct HeaderTensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub offset: usize,
    pub dtype: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct HeaderNode {
    pub op: String,
    pub name: String,
    pub inputs: Vec<String>,
    pub output: String,
    pub shape: Vec<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bias: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stride: Option<Vec<usize>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pads: Option<Vec<usize>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<Vec<usize>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count_include_pad: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub axis: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folded: Option<Vec<String>>,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Header {
    pub format: String,
    pub version: u32,
    pub name: String,
    pub input: HeaderIo,
    pub output: HeaderIo,
    pub postprocess: Post,
    pub nodes: Vec<HeaderNode>,
    pub tensors: Vec<HeaderTensor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argmax_keepdims: Option<u32>,
}

fn merr(node: &str, msg: impl std::fmt::Display) -> Error {
    Error::Model(format!("node '{node}': {msg}"))
}

fn checked_len(shape: &[usize]) -> Option<usize> {
    let mut n = 1usize;
    for &d in shape {
        if d == 0 {
            return None;
        }
        n = n.checked_mul(d)?;
    }
    (n <= MAX_ELEMS).then_some(n)
}

fn pool_out(n: usize, k: usize, s: usize, p0: usize, p1: usize) -> Option<usize> {
    let padded = n.checked_add(p0)?.checked_add(p1)?;
    if s == 0 || k == 0 || padded < k {
        return None;
    }
    Some((padded - k) / s + 1)
}

impl Model {
    /// Parses and validates a model file's bytes (untrusted).
    pub fn from_bytes(b: &[u8]) -> Result<Model> {
        if b.len() < 12 || &b[..8] != MAGIC {
            return Err(Error::Model("not a hush model file (bad magic; convert ONNX with `hush import`)".into()));
        }
        let h = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes")) as usize;
        if h > MAX_HEADER || 12 + h > b.len() {
            return Err(Error::Model(format!("header of {h} bytes does not fit the file ({} bytes)", b.len())));
        }
        let header = std::str::from_utf8(&b[12..12 + h]).map_err(|_| Error::Model("header is not UTF-8".into()))?;
        Self::parse(header, Some(&b[12 + h..]))
    }

    /// A model file's bytes with its input range (and raw scale) declared
    /// in the header (`hush import --input-range`); tensors unchanged.
    pub fn declare_input_range(b: &[u8], range: (f64, f64), raw_scale: Option<f64>) -> Result<Vec<u8>> {
        Self::from_bytes(b)?;
        if !(range.0.is_finite() && range.1.is_finite() && range.0 < range.1) {
            return Err(Error::Model(format!("input range [{}, {}]: two finite numbers, low below high", range.0, range.1)));
        }
        if let Some(s) = raw_scale.filter(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(Error::Model(format!("input raw scale {s}: a positive finite number")));
        }
        let h = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes")) as usize;
        let mut v: serde_json::Value = serde_json::from_slice(&b[12..12 + h]).map_err(|e| Error::Model(format!("header: {e}")))?;
        v["input"]["range"] = serde_json::json!([range.0, range.1]);
        v["input"]["raw_scale"] = serde_json::json!(raw_scale);
        if raw_scale.is_none() {
            if let Some(o) = v["input"].as_object_mut() {
                o.remove("raw_scale");
            }
        }
        let head = serde_json::to_vec(&v).map_err(|e| Error::Model(format!("header: {e}")))?;
        let mut out = Vec::with_capacity(b.len() + 64);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(head.len() as u32).to_le_bytes());
        out.extend_from_slice(&head);
        out.extend_from_slice(&b[12 + h..]);
        Self::from_bytes(&out)?;
        Ok(out)
    }

    /// Reads a model file. `.onnx` files are converted first by the
    /// `hush-onnx` importer (in this process; no Python); `.hushm` files are
    /// read directly.
    pub fn load(path: &std::path::Path) -> Result<Model> {
        let is_onnx = path.extension().map(|e| e.eq_ignore_ascii_case("onnx")).unwrap_or(false);
        if is_onnx {
            return Self::from_bytes(&convert_onnx(path)?);
        }
        let meta = std::fs::metadata(path).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
        if meta.len() > (MAX_WEIGHTS as u64) * 4 + MAX_HEADER as u64 + 12 {
            return Err(Error::Model(format!("{}: file of {} bytes is too large", path.display(), meta.len())));
        }
        let b = std::fs::read(path).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
        Self::from_bytes(&b).map_err(|e| match e {
            Error::Model(m) => Error::Model(format!("{}: {m}", path.display())),
            other => other,
        })
    }

    /// Parses a public architecture (a header without tensor data), as a
    /// client receives it from a server.
    pub fn from_architecture(header: &str) -> Result<Model> {
        if header.len() > MAX_HEADER {
            return Err(Error::Model("architecture too large".into()));
        }
        Self::parse(header, None)
    }

    fn parse(header_json: &str, data: Option<&[u8]>) -> Result<Model> {
        let h: Header = serde_json::from_str(header_json).map_err(|e| Error::Model(format!("header: {e}")))?;
        if h.format != "hush-model" || h.version != FORMAT_VERSION {
            return Err(Error::Model(format!("format {} version {} (expected hush-model version {FORMAT_VERSION})", h.format, h.version)));
        }
        if h.nodes.is_empty() || h.nodes.len() > MAX_NODES {
            return Err(Error::Model(format!("{} nodes (1..={MAX_NODES} allowed)", h.nodes.len())));
        }
        // tensors
        let mut total = 0usize;
        let mut tensors: Vec<Tensor> = Vec::with_capacity(h.tensors.len());
        for t in &h.tensors {
            if t.dtype != "f32" {
                return Err(Error::Model(format!("tensor '{}': dtype {} (only f32)", t.name, t.dtype)));
            }
            let n = if t.shape.is_empty() { Some(1) } else { checked_len(&t.shape) };
            let n = n.ok_or_else(|| Error::Model(format!("tensor '{}': shape {:?} out of range", t.name, t.shape)))?;
            total = total.saturating_add(n);
            if total > MAX_WEIGHTS {
                return Err(Error::Model(format!("more than {MAX_WEIGHTS} weights")));
            }
            let values = match data {
                None => Vec::new(),
                Some(d) => {
                    let end = t.offset.checked_add(n * 4).filter(|&e| e <= d.len()).ok_or_else(|| {
                        Error::Model(format!("tensor '{}': bytes {}..+{} outside the data section ({} bytes)", t.name, t.offset, n * 4, d.len()))
                    })?;
                    let v: Vec<f32> = d[t.offset..end].chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect();
                    if v.iter().any(|x| !x.is_finite()) {
                        return Err(Error::Model(format!("tensor '{}' has non-finite values", t.name)));
                    }
                    v
                }
            };
            tensors.push(Tensor { shape: t.shape.clone(), data: values });
        }
        let mut ids: HashMap<&str, usize> = HashMap::new();
        let mut shapes: Vec<Vec<usize>> = Vec::new();
        if h.input.shape.is_empty() || checked_len(&h.input.shape).is_none() {
            return Err(Error::Model(format!("input shape {:?} out of range", h.input.shape)));
        }
        ids.insert(&h.input.name, 0);
        shapes.push(h.input.shape.clone());
        let mut nodes = Vec::with_capacity(h.nodes.len());
        for hn in &h.nodes {
            let nm = hn.name.as_str();
            if ids.contains_key(hn.output.as_str()) {
                return Err(merr(nm, format!("output '{}' is defined twice", hn.output)));
            }
            let mut inputs = Vec::new();
            for i in &hn.inputs {
                let id = *ids.get(i.as_str()).ok_or_else(|| merr(nm, format!("input '{i}' is not defined by an earlier node")))?;
                inputs.push(id);
            }
            let tensor = |idx: Option<usize>, what: &str| -> Result<Tensor> {
                let i = idx.ok_or_else(|| merr(nm, format!("missing {what}")))?;
                tensors.get(i).cloned().ok_or_else(|| merr(nm, format!("{what} refers to tensor {i}, there are {}", tensors.len())))
            };
            let arity = |n: usize| -> Result<()> {
                if inputs.len() != n {
                    return Err(merr(nm, format!("{} takes {n} input(s), got {}", hn.op, inputs.len())));
                }
                Ok(())
            };
            let two = |v: &Option<Vec<usize>>, what: &str| -> Result<[usize; 2]> {
                match v.as_deref() {
                    Some([a, b]) => Ok([*a, *b]),
                    _ => Err(merr(nm, format!("{what} must have 2 entries"))),
                }
            };
            let four = |v: &Option<Vec<usize>>| -> Result<[usize; 4]> {
                match v.as_deref() {
                    Some([a, b, c, d]) => Ok([*a, *b, *c, *d]),
                    None => Ok([0; 4]),
                    _ => Err(merr(nm, "pads must have 4 entries")),
                }
            };
            let xs = |k: usize| -> &Vec<usize> { &shapes[inputs[k]] };
            let (op, shape): (Op, Vec<usize>) = match hn.op.as_str() {
                "conv" => {
                    arity(1)?;
                    let weight = tensor(hn.weight, "weight")?;
                    let bias = tensor(hn.bias, "bias")?;
                    let stride = two(&hn.stride, "stride")?;
                    let pads = four(&hn.pads)?;
                    let [c, hh, ww] = xs(0).as_slice() else { return Err(merr(nm, format!("input shape {:?} is not C×H×W", xs(0)))) };
                    let [co, ci, kh, kw] = weight.shape.as_slice() else { return Err(merr(nm, "weight must be 4-D")) };
                    if ci != c {
                        return Err(merr(nm, format!("weight has {ci} input channels, the input has {c}")));
                    }
                    if bias.shape != [*co] {
                        return Err(merr(nm, format!("bias shape {:?}, expected [{co}]", bias.shape)));
                    }
                    if pads[0] >= *kh || pads[2] >= *kh || pads[1] >= *kw || pads[3] >= *kw {
                        return Err(merr(nm, "padding must be smaller than the kernel"));
                    }
                    let oh = pool_out(*hh, *kh, stride[0], pads[0], pads[2]).ok_or_else(|| merr(nm, "kernel/stride do not fit the input"))?;
                    let ow = pool_out(*ww, *kw, stride[1], pads[1], pads[3]).ok_or_else(|| merr(nm, "kernel/stride do not fit the input"))?;
                    let shape = vec![*co, oh, ow];
                    (Op::Conv { weight, bias, stride, pads }, shape)
                }
                "dense" => {
                    arity(1)?;
                    let weight = tensor(hn.weight, "weight")?;
                    let bias = tensor(hn.bias, "bias")?;
                    let [no, ni] = weight.shape.as_slice() else { return Err(merr(nm, "weight must be 2-D")) };
                    if xs(0).as_slice() != [*ni] {
                        return Err(merr(nm, format!("input shape {:?}, the weight expects [{ni}]", xs(0))));
                    }
                    if bias.shape != [*no] {
                        return Err(merr(nm, format!("bias shape {:?}, expected [{no}]", bias.shape)));
                    }
                    let shape = vec![*no];
                    (Op::Dense { weight, bias }, shape)
                }
                "scale" => {
                    arity(1)?;
                    let weight = tensor(hn.weight, "weight")?;
                    let bias = tensor(hn.bias, "bias")?;
                    let c = xs(0)[0];
                    if weight.shape != [c] || bias.shape != [c] {
                        return Err(merr(nm, format!("scale/shift shapes {:?}/{:?}, expected [{c}]", weight.shape, bias.shape)));
                    }
                    (Op::Scale { weight, bias }, xs(0).clone())
                }
                "add" => {
                    arity(2)?;
                    if xs(0) != xs(1) {
                        return Err(merr(nm, format!("operand shapes {:?} and {:?} differ", xs(0), xs(1))));
                    }
                    (Op::Add, xs(0).clone())
                }
                "add_const" => {
                    arity(1)?;
                    let value = tensor(hn.weight, "constant")?;
                    if &value.shape != xs(0) {
                        return Err(merr(nm, format!("constant shape {:?}, activation {:?}", value.shape, xs(0))));
                    }
                    (Op::AddConst { value }, xs(0).clone())
                }
                "relu" => {
                    arity(1)?;
                    (Op::Relu, xs(0).clone())
                }
                "maxpool" | "avgpool" => {
                    arity(1)?;
                    let kernel = two(&hn.kernel, "kernel")?;
                    let stride = two(&hn.stride, "stride")?;
                    let pads = four(&hn.pads)?;
                    let [c, hh, ww] = xs(0).as_slice() else { return Err(merr(nm, format!("input shape {:?} is not C×H×W", xs(0)))) };
                    if pads[0] >= kernel[0] || pads[2] >= kernel[0] || pads[1] >= kernel[1] || pads[3] >= kernel[1] {
                        return Err(merr(nm, "padding must be smaller than the kernel"));
                    }
                    if kernel[0] * kernel[1] > 4096 {
                        return Err(merr(nm, "pooling window larger than 4096"));
                    }
                    let oh = pool_out(*hh, kernel[0], stride[0], pads[0], pads[2]).ok_or_else(|| merr(nm, "kernel/stride do not fit the input"))?;
                    let ow = pool_out(*ww, kernel[1], stride[1], pads[1], pads[3]).ok_or_else(|| merr(nm, "kernel/stride do not fit the input"))?;
                    let shape = vec![*c, oh, ow];
                    if hn.op == "maxpool" {
                        (Op::MaxPool { kernel, stride, pads }, shape)
                    } else {
                        (Op::AvgPool { kernel, stride, pads, count_include_pad: hn.count_include_pad.unwrap_or(false) }, shape)
                    }
                }
                "reshape" => {
                    arity(1)?;
                    let n = checked_len(&hn.shape).ok_or_else(|| merr(nm, format!("shape {:?} out of range", hn.shape)))?;
                    if n != checked_len(xs(0)).unwrap_or(0) {
                        return Err(merr(nm, format!("cannot reshape {:?} to {:?}", xs(0), hn.shape)));
                    }
                    (Op::Reshape, hn.shape.clone())
                }
                "concat" => {
                    if inputs.is_empty() || inputs.len() > 1024 {
                        return Err(merr(nm, "concat takes 1..=1024 inputs"));
                    }
                    let axis = hn.axis.ok_or_else(|| merr(nm, "missing axis"))?;
                    let s0 = xs(0).clone();
                    if axis >= s0.len() {
                        return Err(merr(nm, format!("axis {axis} out of range for shape {s0:?}")));
                    }
                    let mut shape = s0.clone();
                    shape[axis] = 0;
                    for k in 0..inputs.len() {
                        let s = xs(k);
                        if s.len() != s0.len() || (0..s.len()).any(|d| d != axis && s[d] != s0[d]) {
                            return Err(merr(nm, format!("operand shapes {s0:?} and {s:?} disagree outside axis {axis}")));
                        }
                        shape[axis] += s[axis];
                    }
                    (Op::Concat { axis }, shape)
                }
                other => return Err(merr(nm, format!("unknown operator '{other}'"))),
            };
            if checked_len(&shape).is_none() {
                return Err(merr(nm, format!("output shape {shape:?} out of range")));
            }
            if shape != hn.shape {
                return Err(merr(nm, format!("declared output shape {:?}, computed {:?}", hn.shape, shape)));
            }
            let id = nodes.len() + 1;
            ids.insert(hn.output.as_str(), id);
            shapes.push(shape.clone());
            nodes.push(Node { name: hn.name.clone(), op, inputs, shape });
        }
        let output = *ids.get(h.output.name.as_str()).ok_or_else(|| Error::Model(format!("output '{}' is not defined", h.output.name)))?;
        if output == 0 {
            return Err(Error::Model("the output is the input".into()));
        }
        if shapes[output] != h.output.shape {
            return Err(Error::Model(format!("output shape {:?} declared, {:?} computed", h.output.shape, shapes[output])));
        }
        if let Some([lo, hi]) = h.input.range {
            if !(lo.is_finite() && hi.is_finite() && lo < hi) {
                return Err(Error::Model(format!("input range [{lo}, {hi}]: two finite numbers, low below high")));
            }
        }
        match (h.input.raw_scale, h.input.range) {
            (Some(s), _) if !(s.is_finite() && s > 0.0) => return Err(Error::Model(format!("input raw_scale {s}: a positive finite number"))),
            (Some(_), None) => return Err(Error::Model("input raw_scale without a range".into())),
            _ => {}
        }
        // The public architecture: the header as parsed (normalized JSON).
        let header_json = serde_json::to_string(&h).map_err(|e| Error::Model(format!("header: {e}")))?;
        Ok(Model {
            name: h.name,
            input_range: h.input.range.map(|r| (r[0], r[1])),
            input_raw_scale: h.input.raw_scale,
            input_shape: h.input.shape,
            nodes,
            output,
            post: h.postprocess,
            has_weights: data.is_some(),
            header_json,
        })
    }

    /// Shape of value `id`.
    pub fn shape(&self, id: usize) -> &[usize] {
        if id == 0 {
            &self.input_shape
        } else {
            &self.nodes[id - 1].shape
        }
    }

    /// An input as the model takes it: unchanged when the model declares
    /// no range or every value is inside it; multiplied by the declared raw
    /// scale when all values are whole numbers that it brings into the
    /// range (with a note saying so); else refused, naming the first value
    /// outside the range, with a hint for raw integer data.
    pub fn prepare_input(&self, x: &[f64]) -> Result<(Vec<f64>, Option<String>)> {
        let Some((lo, hi)) = self.input_range else { return Ok((x.to_vec(), None)) };
        let tol = 1e-6 * (hi - lo).abs().max(1.0);
        let inside = |v: f64| v >= lo - tol && v <= hi + tol;
        let Some((i, v)) = x.iter().copied().enumerate().find(|(_, v)| !inside(*v)) else { return Ok((x.to_vec(), None)) };
        let whole = x.iter().all(|v| v.fract() == 0.0);
        let max = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if let Some(s) = self.input_raw_scale {
            if whole && x.iter().all(|&v| inside(v * s)) {
                return Ok((x.iter().map(|v| v * s).collect(), Some(format!("the input holds whole numbers up to {max}: multiplied by the model's declared raw scale {s} into its input range [{lo}, {hi}]"))));
            }
        }
        let hint = match (whole && max > 1.0, self.input_raw_scale) {
            (true, None) => " (raw integer data such as 8-bit pixels? normalise it first, e.g. divide by 255; the model declares no raw scale)".to_string(),
            (true, Some(s)) => format!(" (times the model's raw scale {s} it is still outside the range)"),
            _ => String::new(),
        };
        Err(Error::Input(format!("input value {v} at index {i} is outside the model's declared input range [{lo}, {hi}]{hint}")))
    }

    pub fn input_len(&self) -> usize {
        self.input_shape.iter().product()
    }

    pub fn output_shape(&self) -> &[usize] {
        self.shape(self.output)
    }

    /// For each value, the index of the last node that reads it (the output
    /// lives to the end).
    pub fn last_use(&self) -> Vec<usize> {
        let mut last = vec![0usize; self.nodes.len() + 1];
        for (i, n) in self.nodes.iter().enumerate() {
            for &v in &n.inputs {
                last[v] = last[v].max(i);
            }
        }
        last[self.output] = usize::MAX;
        last
    }

    /// Peak number of activation elements alive at once when executing
    /// layer by layer and freeing each value after its last use.
    pub fn peak_live_elems(&self) -> usize {
        let last = self.last_use();
        let mut live = self.input_len();
        let mut peak = live;
        for (i, n) in self.nodes.iter().enumerate() {
            live += n.shape.iter().product::<usize>();
            peak = peak.max(live);
            for v in 0..=i {
                if last[v] == i {
                    live -= self.shape(v).iter().product::<usize>();
                }
            }
        }
        peak
    }

    /// A short description per layer (for reports).
    pub fn summary(&self) -> Vec<(String, &'static str, Vec<usize>)> {
        self.nodes.iter().map(|n| (n.name.clone(), n.op.kind(), n.shape.clone())).collect()
    }

    /// Total weights (parameters).
    pub fn params(&self) -> usize {
        self.nodes
            .iter()
            .map(|n| match &n.op {
                Op::Conv { weight, bias, .. } | Op::Dense { weight, bias } | Op::Scale { weight, bias } => weight.len() + bias.len(),
                Op::AddConst { value } => value.len(),
                _ => 0,
            })
            .sum()
    }
}

/// Converts an ONNX file into the bytes of a `.hushm` file with the
/// `hush-onnx` importer (size-checked untrusted input; refusals name the
/// node and operator).
pub fn convert_onnx(path: &std::path::Path) -> Result<Vec<u8>> {
    hush_onnx::convert_file(path).map_err(|e| match e {
        hush_onnx::Error::Io(m) => Error::Io(m),
        other => Error::Model(format!("{}: ONNX import failed: {other}", path.display())),
    })
}

// ---- building models in Rust (tests, benchmark zoo) ---------------------------

/// Builds a model file in memory, the same bytes the ONNX importer writes.
#[derive(Default)]
pub struct Builder {
    name: String,
    input: Vec<usize>,
    shapes: Vec<Vec<usize>>,
    nodes: Vec<HeaderNode>,
    tensors: Vec<HeaderTensor>,
    data: Vec<u8>,
    post: Option<Post>,
}

/// A value in a [`Builder`].
#[derive(Clone, Copy, Debug)]
pub struct V(pub usize);

fn vname(v: V) -> String {
    if v.0 == 0 {
        "input".into()
    } else {
        format!("v{}", v.0)
    }
}

impl Builder {
    pub fn new(name: &str, input_shape: &[usize]) -> (Builder, V) {
        let b = Builder { name: name.into(), input: input_shape.to_vec(), shapes: vec![input_shape.to_vec()], ..Default::default() };
        (b, V(0))
    }
    pub fn shape(&self, v: V) -> &[usize] {
        &self.shapes[v.0]
    }
    fn tensor(&mut self, name: String, shape: Vec<usize>, data: &[f32]) -> usize {
        assert_eq!(shape.iter().product::<usize>(), data.len(), "tensor {name}");
        self.tensors.push(HeaderTensor { name, shape, offset: self.data.len(), dtype: "f32".into() });
        for x in data {
            self.data.extend_from_slice(&x.to_le_bytes());
        }
        self.tensors.len() - 1
    }
    fn push(&mut self, mut n: HeaderNode, inputs: &[V], shape: Vec<usize>) -> V {
        let v = V(self.shapes.len());
        n.name = if n.name.is_empty() { format!("{}_{}", n.op, v.0) } else { n.name };
        n.inputs = inputs.iter().map(|&i| vname(i)).collect();
        n.output = vname(v);
        n.shape = shape.clone();
        self.nodes.push(n);
        self.shapes.push(shape);
        v
    }
    fn out(n: usize, k: usize, s: usize, p0: usize, p1: usize) -> usize {
        (n + p0 + p1 - k) / s + 1
    }
    /// Convolution with weight c_out×c_in×k×k (row-major) and bias.
    pub fn conv(&mut self, x: V, c_out: usize, k: [usize; 2], stride: [usize; 2], pads: [usize; 4], w: &[f32], b: &[f32]) -> V {
        let s = self.shapes[x.0].clone();
        let wi = self.tensor(format!("w{}", self.tensors.len()), vec![c_out, s[0], k[0], k[1]], w);
        let bi = self.tensor(format!("b{}", self.tensors.len()), vec![c_out], b);
        let shape = vec![c_out, Self::out(s[1], k[0], stride[0], pads[0], pads[2]), Self::out(s[2], k[1], stride[1], pads[1], pads[3])];
        let n = HeaderNode { op: "conv".into(), weight: Some(wi), bias: Some(bi), stride: Some(stride.to_vec()), pads: Some(pads.to_vec()), ..Default::default() };
        self.push(n, &[x], shape)
    }
    pub fn dense(&mut self, x: V, n_out: usize, w: &[f32], b: &[f32]) -> V {
        let n_in = self.shapes[x.0][0];
        let wi = self.tensor(format!("w{}", self.tensors.len()), vec![n_out, n_in], w);
        let bi = self.tensor(format!("b{}", self.tensors.len()), vec![n_out], b);
        let n = HeaderNode { op: "dense".into(), weight: Some(wi), bias: Some(bi), ..Default::default() };
        self.push(n, &[x], vec![n_out])
    }
    pub fn scale(&mut self, x: V, s: &[f32], t: &[f32]) -> V {
        let c = self.shapes[x.0][0];
        let wi = self.tensor(format!("s{}", self.tensors.len()), vec![c], s);
        let bi = self.tensor(format!("t{}", self.tensors.len()), vec![c], t);
        let shape = self.shapes[x.0].clone();
        self.push(HeaderNode { op: "scale".into(), weight: Some(wi), bias: Some(bi), ..Default::default() }, &[x], shape)
    }
    pub fn add(&mut self, a: V, b: V) -> V {
        let shape = self.shapes[a.0].clone();
        self.push(HeaderNode { op: "add".into(), ..Default::default() }, &[a, b], shape)
    }
    pub fn add_const(&mut self, x: V, c: &[f32]) -> V {
        let shape = self.shapes[x.0].clone();
        let ci = self.tensor(format!("c{}", self.tensors.len()), shape.clone(), c);
        self.push(HeaderNode { op: "add_const".into(), weight: Some(ci), ..Default::default() }, &[x], shape)
    }
    pub fn relu(&mut self, x: V) -> V {
        let shape = self.shapes[x.0].clone();
        self.push(HeaderNode { op: "relu".into(), ..Default::default() }, &[x], shape)
    }
    pub fn maxpool(&mut self, x: V, k: [usize; 2], stride: [usize; 2], pads: [usize; 4]) -> V {
        let s = self.shapes[x.0].clone();
        let shape = vec![s[0], Self::out(s[1], k[0], stride[0], pads[0], pads[2]), Self::out(s[2], k[1], stride[1], pads[1], pads[3])];
        let n = HeaderNode { op: "maxpool".into(), kernel: Some(k.to_vec()), stride: Some(stride.to_vec()), pads: Some(pads.to_vec()), ..Default::default() };
        self.push(n, &[x], shape)
    }
    pub fn avgpool(&mut self, x: V, k: [usize; 2], stride: [usize; 2], pads: [usize; 4], count_include_pad: bool) -> V {
        let s = self.shapes[x.0].clone();
        let shape = vec![s[0], Self::out(s[1], k[0], stride[0], pads[0], pads[2]), Self::out(s[2], k[1], stride[1], pads[1], pads[3])];
        let n = HeaderNode {
            op: "avgpool".into(),
            kernel: Some(k.to_vec()),
            stride: Some(stride.to_vec()),
            pads: Some(pads.to_vec()),
            count_include_pad: Some(count_include_pad),
            ..Default::default()
        };
        self.push(n, &[x], shape)
    }
    pub fn global_avgpool(&mut self, x: V) -> V {
        let s = self.shapes[x.0].clone();
        self.avgpool(x, [s[1], s[2]], [1, 1], [0; 4], true)
    }
    pub fn reshape(&mut self, x: V, shape: &[usize]) -> V {
        self.push(HeaderNode { op: "reshape".into(), ..Default::default() }, &[x], shape.to_vec())
    }
    pub fn flatten(&mut self, x: V) -> V {
        let n = self.shapes[x.0].iter().product::<usize>();
        self.reshape(x, &[n])
    }
    pub fn concat(&mut self, xs: &[V], axis: usize) -> V {
        let mut shape = self.shapes[xs[0].0].clone();
        shape[axis] = xs.iter().map(|v| self.shapes[v.0][axis]).sum();
        self.push(HeaderNode { op: "concat".into(), axis: Some(axis), ..Default::default() }, xs, shape)
    }
    pub fn postprocess(&mut self, p: Post) {
        self.post = Some(p);
    }
    /// The file bytes with `out` as the logits.
    pub fn finish(self, out: V) -> Vec<u8> {
        let h = Header {
            format: "hush-model".into(),
            version: FORMAT_VERSION,
            name: self.name,
            input: HeaderIo { name: "input".into(), shape: self.input, range: None, raw_scale: None },
            output: HeaderIo { name: vname(out), shape: self.shapes[out.0].clone(), range: None, raw_scale: None },
            postprocess: self.post.unwrap_or(Post::None),
            nodes: self.nodes,
            tensors: self.tensors,
            argmax_keepdims: None,
        };
        let j = serde_json::to_vec(&h).expect("header serializes");
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&(j.len() as u32).to_le_bytes());
        b.extend_from_slice(&j);
        b.extend_from_slice(&self.data);
        b
    }
}
