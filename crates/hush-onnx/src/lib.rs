//! ONNX → hush model file (`.hushm`), in Rust.
//!
//! hush's inference engine executes a small model description instead of
//! ONNX itself (see `docs/model-format.md` and
//! `hush_inference::model`). This crate reads an ONNX file with a
//! protobuf decoder for the subset of `onnx.proto` it needs
//! ([`proto`]), checks that every operator is supported, folds
//! BatchNormalization (and constant per-channel Adds) into the preceding
//! Conv/Gemm, computes every shape (batch size 1) and writes the
//! description. The `hush` command and the Python package (through the
//! `hush._native` extension) both call [`convert`], so there is one
//! importer.
//!
//! Supported ONNX operators: Conv (any stride and padding, dilation 1,
//! groups 1), Gemm (transA = 0, constant B), MatMul with a constant right
//! operand, Add (two activations of the same shape = residual; an
//! activation and a constant = bias, folded into the preceding Conv/Gemm
//! when possible), Relu, MaxPool, AveragePool, GlobalAveragePool,
//! BatchNormalization (folded, else a per-channel scale-and-shift layer),
//! Flatten, Reshape (constant shape), Concat, and a final Softmax or ArgMax
//! (applied by the client to its revealed logits, in the clear; the file
//! records which). Identity and Dropout (inference mode) are no-ops,
//! Constant defines a constant tensor. Anything else is refused with
//! [`Error::Unsupported`] naming the node and the operator.
//!
//! **Untrusted input.** The file size is capped before reading
//! ([`MAX_FILE_BYTES`]); the decoder never allocates past the file's own
//! bytes; every tensor's element count is checked against [`MAX_ELEMS`]
//! and its data length against its shape before conversion; computed shapes
//! use checked arithmetic; the written model's weights are capped at
//! [`MAX_WEIGHTS`] and its layers at [`MAX_NODES`] (the limits of hush's
//! model loader). Every failure is an [`Error`]; nothing panics.
//!
//! **Output.** The bytes are a function of the ONNX graph only: the JSON
//! header's key order and escaping (ASCII-only, `\uXXXX` escapes), the
//! weights' order and the folding arithmetic (in f64, rounded once to f32)
//! are fixed, so converting the same model always gives the same file. The
//! `.hushm` files written by hush's earlier Python importer are reproduced
//! byte for byte.

pub mod encoder;
pub mod eval;
pub mod graph;
pub mod proto;

use prost::Message;
use proto::{
    attr_type, data_type, AttributeProto, DimensionValue, ModelProto, NodeProto, TensorProto,
};
use std::collections::HashMap;

/// The file's magic bytes.
pub const MAGIC: &[u8; 8] = b"HUSHMDL1";
/// The `.hushm` format version written.
pub const FORMAT_VERSION: u32 = 1;
/// Largest ONNX file read (bytes): the largest model hush loads plus room for its structure.
pub const MAX_FILE_BYTES: u64 = (1 << 30) + (64 << 20);
/// Largest tensor (elements), constant, weight or activation; equals hush's loader limit.
pub const MAX_ELEMS: usize = 1 << 27;
/// Largest number of layers written; equals hush's loader limit.
pub const MAX_NODES: usize = 10_000;
/// Largest total weight count written; equals hush's loader limit.
pub const MAX_WEIGHTS: usize = 1 << 28;

/// The operators the importer accepts (anything else is refused by name).
pub const SUPPORTED: &[&str] = &[
    "Conv",
    "Gemm",
    "MatMul",
    "Add",
    "Relu",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "BatchNormalization",
    "Flatten",
    "Reshape",
    "Concat",
    "Softmax",
    "ArgMax",
    "Identity",
    "Dropout",
    "Constant",
];

/// Why an ONNX model could not be imported.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum Error {
    /// The bytes are not a well-formed ONNX protobuf (or are too large).
    #[error("cannot parse ONNX: {0}")]
    Parse(String),
    /// A well-formed model that uses something hush does not support; the
    /// message names the node and its operator where one is at fault.
    #[error("{0}")]
    Unsupported(String),
    /// Reading the file failed.
    #[error("{0}")]
    Io(String),
}

/// The importer's result type.
pub type Result<T> = std::result::Result<T, Error>;

/// Reads an ONNX file (size-checked before reading) and converts it.
pub fn convert_file(path: &std::path::Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
    let len = f
        .metadata()
        .map_err(|e| Error::Io(format!("{}: {e}", path.display())))?
        .len();
    if len > MAX_FILE_BYTES {
        return Err(Error::Parse(format!(
            "{}: file of {len} bytes is larger than the {MAX_FILE_BYTES}-byte limit",
            path.display()
        )));
    }
    let mut b = Vec::with_capacity(len as usize);
    f.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut b)
        .map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
    if b.len() as u64 > MAX_FILE_BYTES {
        return Err(Error::Parse(format!(
            "{}: file is larger than the {MAX_FILE_BYTES}-byte limit",
            path.display()
        )));
    }
    convert(&b)
}

/// Converts the bytes of an ONNX model into the bytes of a `.hushm` file.
pub fn convert(onnx: &[u8]) -> Result<Vec<u8>> {
    if onnx.len() as u64 > MAX_FILE_BYTES {
        return Err(Error::Parse(format!(
            "{} bytes is larger than the {MAX_FILE_BYTES}-byte limit",
            onnx.len()
        )));
    }
    let model = ModelProto::decode(onnx).map_err(|e| Error::Parse(e.to_string()))?;
    Importer::default().run(&model)
}

// ---- constants ----------------------------------------------------------------

#[derive(Clone, Debug)]
enum Data {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I32(Vec<i32>),
    I64(Vec<i64>),
}

/// A constant tensor (initializer, Constant node, or folded constant arithmetic).
#[derive(Clone, Debug)]
pub(crate) struct Const {
    pub(crate) shape: Vec<usize>,
    data: Data,
}

impl Const {
    /// The values as f64 (numpy's `astype(np.float64)`).
    pub(crate) fn f64s(&self) -> Vec<f64> {
        match &self.data {
            Data::F32(v) => v.iter().map(|&x| x as f64).collect(),
            Data::F64(v) => v.clone(),
            Data::I32(v) => v.iter().map(|&x| x as f64).collect(),
            Data::I64(v) => v.iter().map(|&x| x as f64).collect(),
        }
    }
    /// The values as integers (floats truncated toward zero), for shapes.
    fn ints(&self) -> Option<Vec<i64>> {
        let f = |x: f64| (x.is_finite() && x.abs() < 9.2e18).then_some(x as i64);
        match &self.data {
            Data::F32(v) => v.iter().map(|&x| f(x as f64)).collect(),
            Data::F64(v) => v.iter().map(|&x| f(x)).collect(),
            Data::I32(v) => Some(v.iter().map(|&x| x as i64).collect()),
            Data::I64(v) => Some(v.clone()),
        }
    }
}

fn elems(shape: &[usize]) -> Option<usize> {
    let mut n = 1usize;
    for &d in shape {
        n = n.checked_mul(d)?;
    }
    (n <= MAX_ELEMS).then_some(n)
}

/// Decodes a `TensorProto`'s values, checking sizes before converting.
pub(crate) fn tensor_const(t: &TensorProto) -> std::result::Result<Const, String> {
    if t.data_location == Some(1) || !t.external_data.is_empty() {
        return Err("external tensor data is not supported (save the model with its weights inside the .onnx file)".into());
    }
    let mut shape = Vec::with_capacity(t.dims.len().min(64));
    if t.dims.len() > 64 {
        return Err(format!("{} dimensions", t.dims.len()));
    }
    for &d in &t.dims {
        if d < 0 {
            return Err(format!("negative dimension in shape {:?}", t.dims));
        }
        shape.push(usize::try_from(d).map_err(|_| format!("dimension {d} too large"))?);
    }
    let n = elems(&shape)
        .ok_or_else(|| format!("shape {:?} has more than {MAX_ELEMS} elements", t.dims))?;
    let dt = t.data_type.unwrap_or(0);
    let raw = t.raw_data.as_deref();
    let count_err = |have: usize| {
        format!(
            "shape {:?} needs {n} values, the tensor holds {have}",
            t.dims
        )
    };
    macro_rules! from_raw {
        ($ty:ty, $w:expr) => {{
            let r = raw.unwrap_or(&[]);
            if r.len() != n * $w {
                return Err(count_err(r.len() / $w));
            }
            r.chunks_exact($w)
                .map(|c| <$ty>::from_le_bytes(c.try_into().unwrap_or([0; $w])))
                .collect::<Vec<$ty>>()
        }};
    }
    let data = match dt {
        data_type::FLOAT => Data::F32(if raw.is_some() {
            from_raw!(f32, 4)
        } else if t.float_data.len() == n {
            t.float_data.clone()
        } else {
            return Err(count_err(t.float_data.len()));
        }),
        data_type::DOUBLE => Data::F64(if raw.is_some() {
            from_raw!(f64, 8)
        } else if t.double_data.len() == n {
            t.double_data.clone()
        } else {
            return Err(count_err(t.double_data.len()));
        }),
        data_type::INT32 => Data::I32(if raw.is_some() {
            from_raw!(i32, 4)
        } else if t.int32_data.len() == n {
            t.int32_data.clone()
        } else {
            return Err(count_err(t.int32_data.len()));
        }),
        data_type::INT64 => Data::I64(if raw.is_some() {
            from_raw!(i64, 8)
        } else if t.int64_data.len() == n {
            t.int64_data.clone()
        } else {
            return Err(count_err(t.int64_data.len()));
        }),
        other => {
            return Err(format!(
                "element type {other} is not supported (float, double, int32 and int64 are)"
            ))
        }
    };
    Ok(Const { shape, data })
}

/// numpy's broadcasting of two shapes.
fn broadcast_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    let mut out = vec![0; r];
    for i in 0..r {
        let da = if i + a.len() >= r {
            a[i + a.len() - r]
        } else {
            1
        };
        let db = if i + b.len() >= r {
            b[i + b.len() - r]
        } else {
            1
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return None;
        };
    }
    elems(&out)?;
    Some(out)
}

/// For each element of `dst` (row-major), the index of the element of a
/// tensor of shape `src` that numpy's `broadcast_to(src, dst)` puts there.
fn broadcast_index(src: &[usize], dst: &[usize]) -> Option<Vec<usize>> {
    if src.len() > dst.len() {
        return None;
    }
    let off = dst.len() - src.len();
    for (i, &d) in src.iter().enumerate() {
        if d != 1 && d != dst[off + i] {
            return None;
        }
    }
    let n = elems(dst)?;
    let mut idx = Vec::with_capacity(n);
    let mut coord = vec![0usize; dst.len()];
    for _ in 0..n {
        let mut s = 0usize;
        for (i, &d) in src.iter().enumerate() {
            s = s * d + if d == 1 { 0 } else { coord[off + i] };
        }
        idx.push(s);
        for k in (0..dst.len()).rev() {
            coord[k] += 1;
            if coord[k] < dst[k] {
                break;
            }
            coord[k] = 0;
        }
    }
    Some(idx)
}

/// `a + b` of two constants with numpy's broadcasting and type promotion.
fn add_consts(a: &Const, b: &Const) -> Option<Const> {
    let shape = broadcast_shape(&a.shape, &b.shape)?;
    let ia = broadcast_index(&a.shape, &shape)?;
    let ib = broadcast_index(&b.shape, &shape)?;
    let data = match (&a.data, &b.data) {
        (Data::F32(x), Data::F32(y)) => {
            Data::F32(ia.iter().zip(&ib).map(|(&i, &j)| x[i] + y[j]).collect())
        }
        (Data::I32(x), Data::I32(y)) => Data::I32(
            ia.iter()
                .zip(&ib)
                .map(|(&i, &j)| x[i].wrapping_add(y[j]))
                .collect(),
        ),
        (Data::I64(x), Data::I64(y)) => Data::I64(
            ia.iter()
                .zip(&ib)
                .map(|(&i, &j)| x[i].wrapping_add(y[j]))
                .collect(),
        ),
        (Data::I32(_), Data::I64(_)) | (Data::I64(_), Data::I32(_)) => {
            let (x, y) = (a.ints()?, b.ints()?);
            Data::I64(
                ia.iter()
                    .zip(&ib)
                    .map(|(&i, &j)| x[i].wrapping_add(y[j]))
                    .collect(),
            )
        }
        _ => {
            let (x, y) = (a.f64s(), b.f64s());
            Data::F64(ia.iter().zip(&ib).map(|(&i, &j)| x[i] + y[j]).collect())
        }
    };
    Some(Const { shape, data })
}

// ---- attributes -----------------------------------------------------------------

enum Attr<'a> {
    Float(f32),
    Int(i64),
    Str(&'a [u8]),
    Tensor(&'a TensorProto),
    Floats,
    Ints(&'a [i64]),
    Other,
}

fn attr_value(a: &AttributeProto) -> Attr<'_> {
    match a.r#type.unwrap_or(0) {
        attr_type::FLOAT => Attr::Float(a.f.unwrap_or(0.0)),
        attr_type::INT => Attr::Int(a.i.unwrap_or(0)),
        attr_type::STRING => Attr::Str(a.s.as_deref().unwrap_or(&[])),
        attr_type::TENSOR => match &a.t {
            Some(t) => Attr::Tensor(t),
            None => Attr::Other,
        },
        attr_type::FLOATS => Attr::Floats,
        attr_type::INTS => Attr::Ints(&a.ints),
        _ => Attr::Other,
    }
}

/// One node being imported: its name and operator (for messages) and its attributes.
struct Ctx<'a> {
    node: &'a NodeProto,
    attrs: HashMap<&'a str, &'a AttributeProto>,
}

impl<'a> Ctx<'a> {
    fn new(node: &'a NodeProto) -> Self {
        let attrs = node
            .attribute
            .iter()
            .map(|a| (a.name.as_deref().unwrap_or(""), a))
            .collect();
        Ctx { node, attrs }
    }
    fn op(&self) -> &str {
        self.node.op_type.as_deref().unwrap_or("")
    }
    fn fail<T>(&self, msg: impl std::fmt::Display) -> Result<T> {
        let name = self
            .node
            .name
            .as_deref()
            .filter(|s| !s.is_empty())
            .unwrap_or("<unnamed>");
        Err(Error::Unsupported(format!(
            "node '{name}' (operator {}): {msg}",
            self.op()
        )))
    }
    fn has(&self, key: &str) -> bool {
        self.attrs.contains_key(key)
    }
    fn get(&self, key: &str) -> Option<Attr<'a>> {
        self.attrs.get(key).map(|a| attr_value(a))
    }
    fn int(&self, key: &str, default: i64) -> Result<i64> {
        match self.get(key) {
            None => Ok(default),
            Some(Attr::Int(v)) => Ok(v),
            Some(_) => self.fail(format!("attribute {key} must be an integer")),
        }
    }
    fn float(&self, key: &str, default: f64) -> Result<f64> {
        match self.get(key) {
            None => Ok(default),
            Some(Attr::Float(v)) => Ok(v as f64),
            Some(_) => self.fail(format!("attribute {key} must be a float")),
        }
    }
    fn ints(&self, key: &str) -> Result<Option<Vec<i64>>> {
        match self.get(key) {
            None => Ok(None),
            Some(Attr::Ints(v)) => Ok(Some(v.to_vec())),
            Some(_) => self.fail(format!("attribute {key} must be a list of integers")),
        }
    }
    /// A list attribute of `len` non-negative entries (default if absent).
    fn sizes(&self, key: &str, default: &[usize], len: usize) -> Result<Vec<usize>> {
        let v = match self.ints(key)? {
            None => return Ok(default.to_vec()),
            Some(v) => v,
        };
        if v.len() != len || v.iter().any(|&x| !(0..=(1 << 31)).contains(&x)) {
            return self.fail(format!("{key} {v:?} must be {len} non-negative values"));
        }
        Ok(v.into_iter().map(|x| x as usize).collect())
    }
    fn input(&self, i: usize) -> Option<&'a str> {
        self.node.input.get(i).map(|s| s.as_str())
    }
    fn auto_pad_ok(&self) -> Result<()> {
        match self.get("auto_pad") {
            None => Ok(()),
            Some(Attr::Str(s)) if s == b"NOTSET" || s == b"VALID" => Ok(()),
            Some(Attr::Str(s)) => self.fail(format!(
                "auto_pad {} is not supported (give explicit pads)",
                String::from_utf8_lossy(s)
            )),
            Some(_) => self.fail("attribute auto_pad must be a string"),
        }
    }
}

// ---- the model being written ----------------------------------------------------------------

#[derive(Clone, Debug, Default)]
struct OutNode {
    op: &'static str,
    name: String,
    inputs: Vec<String>,
    output: String,
    shape: Vec<usize>,
    weight: Option<usize>,
    bias: Option<usize>,
    stride: Vec<usize>,
    pads: Vec<usize>,
    kernel: Vec<usize>,
    count_include_pad: Option<bool>,
    axis: usize,
    folded: Vec<String>,
}

struct OutTensor {
    name: String,
    shape: Vec<usize>,
    offset: usize,
    data: Vec<f32>,
}

#[derive(Default)]
struct Importer {
    nodes: Vec<OutNode>,
    tensors: Vec<OutTensor>,
    offset: usize,
    weights: usize,
    shapes: HashMap<String, Vec<usize>>,
    /// Output value name -> index into `nodes`.
    producer: HashMap<String, usize>,
    consts: HashMap<String, Const>,
    alias: HashMap<String, String>,
}

fn unsupported<T>(msg: impl Into<String>) -> Result<T> {
    Err(Error::Unsupported(msg.into()))
}

impl Importer {
    /// Adds a weight tensor (values rounded once to f32, which must be finite).
    fn tensor(&mut self, name: String, shape: Vec<usize>, vals: &[f64]) -> Result<usize> {
        let data: Vec<f32> = vals.iter().map(|&v| v as f32).collect();
        if data.iter().any(|v| !v.is_finite()) {
            return unsupported(format!("tensor '{name}' has non-finite values"));
        }
        self.weights = self.weights.saturating_add(data.len());
        if self.weights > MAX_WEIGHTS {
            return unsupported(format!("the model has more than {MAX_WEIGHTS} weights"));
        }
        let offset = self.offset;
        self.offset += data.len() * 4;
        self.tensors.push(OutTensor {
            name,
            shape,
            offset,
            data,
        });
        Ok(self.tensors.len() - 1)
    }
    fn tensor_value(&self, i: usize) -> Vec<f64> {
        self.tensors[i].data.iter().map(|&v| v as f64).collect()
    }
    fn replace_tensor(&mut self, i: usize, vals: &[f64]) -> Result<()> {
        let data: Vec<f32> = vals.iter().map(|&v| v as f32).collect();
        if data.iter().any(|v| !v.is_finite()) {
            return unsupported(format!(
                "tensor '{}' has non-finite values after folding",
                self.tensors[i].name
            ));
        }
        self.tensors[i].data = data;
        Ok(())
    }
    fn add(&mut self, c: &Ctx, mut node: OutNode, shape: Vec<usize>) -> Result<()> {
        if self.nodes.len() >= MAX_NODES {
            return c.fail(format!("the model has more than {MAX_NODES} layers"));
        }
        if shape.contains(&0) || elems(&shape).is_none() {
            return c.fail(format!(
                "output shape {shape:?} is empty or has more than {MAX_ELEMS} elements"
            ));
        }
        node.shape = shape.clone();
        self.shapes.insert(node.output.clone(), shape);
        self.producer.insert(node.output.clone(), self.nodes.len());
        self.nodes.push(node);
        Ok(())
    }
    /// The activation named `name` (after aliases), or a refusal.
    fn act(&self, c: &Ctx, name: &str) -> Result<String> {
        let name = self.alias.get(name).map(|s| s.as_str()).unwrap_or(name);
        if !self.shapes.contains_key(name) {
            if self.consts.contains_key(name) {
                return c.fail(format!(
                    "operand '{name}' is a constant where an activation is expected"
                ));
            }
            return c.fail(format!(
                "operand '{name}' is not produced by an earlier node"
            ));
        }
        Ok(name.to_string())
    }
    fn konst(&self, c: &Ctx, name: Option<&str>, what: &str) -> Result<Const> {
        match name.and_then(|n| self.consts.get(n)) {
            Some(k) => Ok(k.clone()),
            None => c.fail(what),
        }
    }
    /// The producing conv/dense node of `x`, if `x` is its only use and not the graph output.
    fn foldable(&self, x: &str, uses: &HashMap<&str, usize>, graph_out: &str) -> Option<usize> {
        let p = *self.producer.get(x)?;
        let op = self.nodes[p].op;
        ((op == "conv" || op == "dense")
            && uses.get(x).copied().unwrap_or(0) == 1
            && x != graph_out)
            .then_some(p)
    }

    fn run(mut self, model: &ModelProto) -> Result<Vec<u8>> {
        let g = match &model.graph {
            Some(g) => g,
            None => return unsupported("invalid ONNX model: no graph"),
        };
        for t in &g.initializer {
            let name = t.name.clone().unwrap_or_default();
            let k = tensor_const(t)
                .map_err(|m| Error::Unsupported(format!("initializer '{name}': {m}")))?;
            self.consts.insert(name, k);
        }
        let real_inputs: Vec<_> = g
            .input
            .iter()
            .filter(|i| !self.consts.contains_key(i.name.as_deref().unwrap_or("")))
            .collect();
        if real_inputs.len() != 1 {
            return unsupported(format!(
                "the model must have exactly one non-constant input, found {}",
                real_inputs.len()
            ));
        }
        if g.output.len() != 1 {
            return unsupported(format!(
                "the model must have exactly one output, found {}",
                g.output.len()
            ));
        }
        let inp = real_inputs[0];
        let inp_name = inp.name.clone().unwrap_or_default();
        let dims: Vec<i64> = inp
            .r#type
            .as_ref()
            .and_then(|t| t.tensor_type.as_ref())
            .and_then(|t| t.shape.as_ref())
            .map(|s| {
                s.dim
                    .iter()
                    .map(|d| {
                        if let Some(DimensionValue::DimValue(v)) = d.value {
                            v
                        } else {
                            1
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        if dims.len() < 2 || dims[0] != 1 {
            return unsupported(format!(
                "input '{inp_name}' must have a batch dimension of 1, shape {dims:?}"
            ));
        }
        if dims[1..].iter().any(|&d| d <= 0) {
            return unsupported(format!("input '{inp_name}' has a non-fixed shape {dims:?}"));
        }
        let in_shape: Vec<usize> = dims[1..]
            .iter()
            .map(|&d| usize::try_from(d).unwrap_or(usize::MAX))
            .collect();
        if elems(&in_shape).is_none() {
            return unsupported(format!(
                "input '{inp_name}' of shape {dims:?} has more than {MAX_ELEMS} elements"
            ));
        }
        self.shapes.insert(inp_name.clone(), in_shape.clone());
        let mut uses: HashMap<&str, usize> = HashMap::new();
        for node in &g.node {
            for i in &node.input {
                *uses.entry(i.as_str()).or_insert(0) += 1;
            }
        }
        let graph_out = g.output[0].name.clone().unwrap_or_default();
        let mut post = "none";
        let mut argmax_keepdims: Option<i64> = None;
        let mut final_value: Option<String> = None;

        for node in &g.node {
            let c = Ctx::new(node);
            let op = c.op().to_string();
            let name = match node.name.as_deref() {
                Some(n) if !n.is_empty() => n.to_string(),
                _ => format!("{op}_{}", self.nodes.len()),
            };
            let domain = node.domain.as_deref().unwrap_or("");
            if !domain.is_empty() && domain != "ai.onnx" {
                return c.fail(format!("operator domain '{domain}' is not supported"));
            }
            if !SUPPORTED.contains(&op.as_str()) {
                return c.fail(format!(
                    "operator not supported by hush (supported: {})",
                    SUPPORTED.join(", ")
                ));
            }
            if final_value.is_some() {
                return c.fail("Softmax/ArgMax must be the last node of the graph");
            }
            let out = match node.output.first() {
                Some(o) => o.clone(),
                None => return c.fail("the node has no output"),
            };
            let need_in = |i: usize| -> Result<&str> {
                match c.input(i) {
                    Some(s) => Ok(s),
                    None => c.fail(format!("input {i} is missing")),
                }
            };
            let base = |op: &'static str, inputs: Vec<String>| OutNode {
                op,
                name: name.clone(),
                inputs,
                output: out.clone(),
                ..Default::default()
            };
            match op.as_str() {
                "Constant" => {
                    let t = match c.get("value") {
                        Some(Attr::Tensor(t)) => t,
                        _ => return c.fail("only tensor constants"),
                    };
                    let k = tensor_const(t).or_else(|m| c.fail(m))?;
                    self.consts.insert(out, k);
                }
                "Identity" | "Dropout" => {
                    let src = need_in(0)?;
                    if let Some(k) = self.consts.get(src).cloned() {
                        self.consts.insert(out, k);
                    } else {
                        let x = self.act(&c, src)?;
                        self.alias.insert(out, x);
                    }
                }
                "Conv" => {
                    let x = self.act(&c, need_in(0)?)?;
                    let w = self.konst(&c, c.input(1), "the weight must be a constant")?;
                    if w.shape.len() != 4 {
                        return c.fail("only 2-D convolutions are supported");
                    }
                    let group = c.int("group", 1)?;
                    if group != 1 {
                        return c.fail(format!("groups = {group} (only 1 is supported)"));
                    }
                    if let Some(d) = c.ints("dilations")? {
                        if d.iter().any(|&v| v != 1) {
                            return c.fail(format!("dilations {d:?} (only 1 is supported)"));
                        }
                    }
                    c.auto_pad_ok()?;
                    let xs = self.shapes[&x].clone();
                    if xs.len() != 3 {
                        return c.fail(format!("input shape {xs:?} is not C×H×W"));
                    }
                    let (co, ci, kh, kw) = (w.shape[0], w.shape[1], w.shape[2], w.shape[3]);
                    if ci != xs[0] {
                        return c.fail(format!(
                            "weight has {ci} input channels, activation has {}",
                            xs[0]
                        ));
                    }
                    let st = c.sizes("strides", &[1, 1], 2)?;
                    let pd = c.sizes("pads", &[0, 0, 0, 0], 4)?;
                    let bias = match c.input(2).filter(|s| !s.is_empty()) {
                        Some(b) => Some(
                            self.konst(&c, Some(b), "the bias must be a constant")?
                                .f64s(),
                        ),
                        None => None,
                    };
                    let oh = pool_out(xs[1], kh, st[0], pd[0], pd[2]);
                    let ow = pool_out(xs[2], kw, st[1], pd[1], pd[3]);
                    let (oh, ow) = match (oh, ow) {
                        (Some(a), Some(b)) if a > 0 && b > 0 => (a, b),
                        _ => return c.fail("kernel larger than the padded input"),
                    };
                    let oshape = vec![co, oh, ow];
                    if elems(&oshape).is_none() {
                        return c.fail(format!("output shape {oshape:?} is too large"));
                    }
                    let mut nd = base("conv", vec![x]);
                    nd.weight =
                        Some(self.tensor(format!("{name}.weight"), w.shape.clone(), &w.f64s())?);
                    nd.stride = st;
                    nd.pads = pd;
                    let bias = bias.unwrap_or_else(|| vec![0.0; co]);
                    nd.bias = Some(self.tensor(format!("{name}.bias"), vec![bias.len()], &bias)?);
                    self.add(&c, nd, oshape)?;
                }
                "Gemm" | "MatMul" => {
                    let x = self.act(&c, need_in(0)?)?;
                    let w = self.konst(
                        &c,
                        c.input(1),
                        "the second operand must be a constant (weights)",
                    )?;
                    let xs = self.shapes[&x].clone();
                    if xs.len() != 1 {
                        return c.fail(format!(
                            "the activation must be a vector (shape {xs:?}); insert Flatten"
                        ));
                    }
                    let wv = w.f64s();
                    let (wm, wshape, bias) = if op == "Gemm" {
                        if c.int("transA", 0)? != 0 {
                            return c.fail("transA = 1 is not supported");
                        }
                        if w.shape.len() != 2 {
                            return c.fail("B must be a matrix");
                        }
                        let alpha = c.float("alpha", 1.0)?;
                        let (wm, sh) = if c.int("transB", 0)? != 0 {
                            (wv, w.shape.clone())
                        } else {
                            (
                                transpose(&wv, w.shape[0], w.shape[1]),
                                vec![w.shape[1], w.shape[0]],
                            )
                        };
                        let wm: Vec<f64> = wm.iter().map(|v| v * alpha).collect();
                        let mut bias = vec![0.0; sh[0]];
                        if let Some(cn) = c.input(2).filter(|s| !s.is_empty()) {
                            let k = self.konst(&c, Some(cn), "C must be a constant")?;
                            let beta = c.float("beta", 1.0)?;
                            let cv: Vec<f64> = k.f64s().iter().map(|v| v * beta).collect();
                            let idx = match broadcast_index(&[cv.len()], &[sh[0]]) {
                                Some(i) => i,
                                None => {
                                    return c.fail(format!(
                                        "C of {} values does not broadcast to {}",
                                        cv.len(),
                                        sh[0]
                                    ))
                                }
                            };
                            bias = idx.iter().map(|&i| cv[i]).collect();
                        }
                        (wm, sh, bias)
                    } else {
                        if w.shape.len() != 2 {
                            return c.fail("the constant operand must be a matrix");
                        }
                        let sh = vec![w.shape[1], w.shape[0]];
                        (
                            transpose(&wv, w.shape[0], w.shape[1]),
                            sh.clone(),
                            vec![0.0; sh[0]],
                        )
                    };
                    if wshape[1] != xs[0] {
                        return c.fail(format!(
                            "weight expects {} inputs, activation has {}",
                            wshape[1], xs[0]
                        ));
                    }
                    let mut nd = base("dense", vec![x]);
                    let n_out = wshape[0];
                    nd.weight = Some(self.tensor(format!("{name}.weight"), wshape, &wm)?);
                    nd.bias = Some(self.tensor(format!("{name}.bias"), vec![bias.len()], &bias)?);
                    self.add(&c, nd, vec![n_out])?;
                }
                "BatchNormalization" => {
                    let x = self.act(&c, need_in(0)?)?;
                    if node.input.len() < 5 {
                        return c.fail("scale, bias, mean and variance are required");
                    }
                    let mut p = Vec::with_capacity(4);
                    for i in 1..5 {
                        p.push(
                            self.konst(
                                &c,
                                c.input(i),
                                "scale, bias, mean and variance must be constants",
                            )?
                            .f64s(),
                        );
                    }
                    let (gam, bet, mean, var) = (&p[0], &p[1], &p[2], &p[3]);
                    if bet.len() != gam.len() || mean.len() != gam.len() || var.len() != gam.len() {
                        return c.fail("scale, bias, mean and variance differ in length");
                    }
                    let eps = c.float("epsilon", 1e-5)?;
                    let s: Vec<f64> = gam
                        .iter()
                        .zip(var)
                        .map(|(g, v)| g / (v + eps).sqrt())
                        .collect();
                    let t: Vec<f64> = bet
                        .iter()
                        .zip(mean)
                        .zip(&s)
                        .map(|((b, m), s)| b - m * s)
                        .collect();
                    let xs = self.shapes[&x].clone();
                    if xs.first() != Some(&s.len()) {
                        return c
                            .fail(format!("{} channels, activation has shape {xs:?}", s.len()));
                    }
                    if let Some(p) = self.foldable(&x, &uses, &graph_out) {
                        let (wi, bi) = (
                            self.nodes[p].weight.unwrap_or(0),
                            self.nodes[p].bias.unwrap_or(0),
                        );
                        let w = self.tensor_value(wi);
                        let bb = self.tensor_value(bi);
                        if bb.len() != s.len() || w.len() % s.len() != 0 {
                            return c.fail(format!(
                                "cannot fold into '{}': its bias has {} values for {} channels",
                                self.nodes[p].name,
                                bb.len(),
                                s.len()
                            ));
                        }
                        let per = w.len() / s.len();
                        let w2: Vec<f64> =
                            w.iter().enumerate().map(|(i, v)| v * s[i / per]).collect();
                        let b2: Vec<f64> = bb
                            .iter()
                            .zip(&s)
                            .zip(&t)
                            .map(|((b, s), t)| b * s + t)
                            .collect();
                        self.replace_tensor(wi, &w2)?;
                        self.replace_tensor(bi, &b2)?;
                        self.alias.insert(out, x);
                        self.nodes[p].folded.push(name.clone());
                        continue;
                    }
                    let mut nd = base("scale", vec![x]);
                    nd.weight = Some(self.tensor(format!("{name}.scale"), vec![s.len()], &s)?);
                    nd.bias = Some(self.tensor(format!("{name}.shift"), vec![t.len()], &t)?);
                    self.add(&c, nd, xs)?;
                }
                "Add" => {
                    let (l, r) = (need_in(0)?, need_in(1)?);
                    let (lc, rc) = (self.consts.contains_key(l), self.consts.contains_key(r));
                    if lc && rc {
                        let k = match add_consts(&self.consts[l], &self.consts[r]) {
                            Some(k) => k,
                            None => return c.fail("constant operands do not broadcast"),
                        };
                        self.consts.insert(out, k);
                        continue;
                    }
                    if !lc && !rc {
                        let (x, y) = (self.act(&c, l)?, self.act(&c, r)?);
                        if self.shapes[&x] != self.shapes[&y] {
                            return c.fail(format!(
                                "operand shapes {:?} and {:?} differ (broadcasting is not supported)",
                                self.shapes[&x], self.shapes[&y]
                            ));
                        }
                        let xs = self.shapes[&x].clone();
                        self.add(&c, base("add", vec![x, y]), xs)?;
                        continue;
                    }
                    let x = self.act(&c, if lc { r } else { l })?;
                    let k = self.consts[if lc { l } else { r }].clone();
                    let xs = self.shapes[&x].clone();
                    let mut target = vec![1];
                    target.extend_from_slice(&xs);
                    let idx = match broadcast_index(&k.shape, &target) {
                        Some(i) => i,
                        None => {
                            return c.fail(format!(
                                "constant of shape {:?} does not broadcast to {xs:?}",
                                k.shape
                            ))
                        }
                    };
                    let kv = k.f64s();
                    let full: Vec<f64> = idx.iter().map(|&i| kv[i]).collect();
                    if let (Some(p), Some(&c0)) = (self.foldable(&x, &uses, &graph_out), xs.first())
                    {
                        let per = full.len() / c0.max(1);
                        let per_channel =
                            per > 0 && full.chunks(per).all(|ch| ch.iter().all(|v| *v == ch[0]));
                        if per_channel {
                            let bi = self.nodes[p].bias.unwrap_or(0);
                            let bb = self.tensor_value(bi);
                            if bb.len() != c0 {
                                return c.fail(format!("cannot fold into '{}': its bias has {} values for {c0} channels", self.nodes[p].name, bb.len()));
                            }
                            let b2: Vec<f64> = bb
                                .iter()
                                .enumerate()
                                .map(|(i, b)| b + full[i * per])
                                .collect();
                            self.replace_tensor(bi, &b2)?;
                            self.alias.insert(out, x);
                            continue;
                        }
                    }
                    let mut nd = base("add_const", vec![x]);
                    nd.weight = Some(self.tensor(format!("{name}.const"), xs.clone(), &full)?);
                    self.add(&c, nd, xs)?;
                }
                "Relu" => {
                    let x = self.act(&c, need_in(0)?)?;
                    let xs = self.shapes[&x].clone();
                    self.add(&c, base("relu", vec![x]), xs)?;
                }
                "MaxPool" | "AveragePool" => {
                    let x = self.act(&c, need_in(0)?)?;
                    let xs = self.shapes[&x].clone();
                    if xs.len() != 3 {
                        return c.fail(format!("input shape {xs:?} is not C×H×W"));
                    }
                    if node.output.len() > 1 && !node.output[1].is_empty() {
                        return c.fail("the Indices output is not supported");
                    }
                    let k = match c.ints("kernel_shape")? {
                        Some(k) => k,
                        None => return c.fail("attribute kernel_shape is required"),
                    };
                    if k.len() != 2 {
                        return c.fail("only 2-D pooling is supported");
                    }
                    if k.iter().any(|&v| !(1..=(1 << 31)).contains(&v)) {
                        return c.fail(format!("kernel_shape {k:?} must be positive"));
                    }
                    let k: Vec<usize> = k.iter().map(|&v| v as usize).collect();
                    let st = c.sizes("strides", &[1, 1], 2)?;
                    let pd = c.sizes("pads", &[0, 0, 0, 0], 4)?;
                    if c.int("ceil_mode", 0)? != 0 {
                        return c.fail("ceil_mode = 1 is not supported");
                    }
                    if let Some(d) = c.ints("dilations")? {
                        if d.iter().any(|&v| v != 1) {
                            return c.fail("dilations are not supported");
                        }
                    }
                    c.auto_pad_ok()?;
                    if pd
                        .iter()
                        .zip(k.iter().chain(k.iter()))
                        .any(|(p, kk)| p >= kk)
                    {
                        return c.fail("padding must be smaller than the kernel");
                    }
                    let oh = pool_out(xs[1], k[0], st[0], pd[0], pd[2]);
                    let ow = pool_out(xs[2], k[1], st[1], pd[1], pd[3]);
                    let (oh, ow) = match (oh, ow) {
                        (Some(a), Some(b)) if a > 0 && b > 0 => (a, b),
                        _ => return c.fail("kernel larger than the padded input"),
                    };
                    let mut nd = base(
                        if op == "MaxPool" {
                            "maxpool"
                        } else {
                            "avgpool"
                        },
                        vec![x],
                    );
                    nd.kernel = k;
                    nd.stride = st;
                    nd.pads = pd;
                    if op == "AveragePool" {
                        nd.count_include_pad = Some(c.int("count_include_pad", 0)? != 0);
                    }
                    self.add(&c, nd, vec![xs[0], oh, ow])?;
                }
                "GlobalAveragePool" => {
                    let x = self.act(&c, need_in(0)?)?;
                    let xs = self.shapes[&x].clone();
                    if xs.len() != 3 {
                        return c.fail(format!("input shape {xs:?} is not C×H×W"));
                    }
                    let mut nd = base("avgpool", vec![x]);
                    nd.kernel = vec![xs[1], xs[2]];
                    nd.stride = vec![1, 1];
                    nd.pads = vec![0, 0, 0, 0];
                    nd.count_include_pad = Some(true);
                    self.add(&c, nd, vec![xs[0], 1, 1])?;
                }
                "Flatten" | "Reshape" => {
                    let x = self.act(&c, need_in(0)?)?;
                    let xs = self.shapes[&x].clone();
                    let n: usize = xs.iter().product();
                    let shape = if op == "Flatten" {
                        let ax = c.int("axis", 1)?;
                        if ax != 0 && ax != 1 {
                            return c.fail(format!("axis {ax} is not supported (only 1: flatten everything after the batch)"));
                        }
                        vec![n]
                    } else {
                        let k =
                            self.konst(&c, c.input(1), "the target shape must be a constant")?;
                        let tgt = match k.ints() {
                            Some(t) if t.len() <= 64 => t,
                            _ => return c.fail("the target shape must be at most 64 integers"),
                        };
                        let allowzero = c.int("allowzero", 0)? != 0;
                        let mut full = vec![1usize];
                        full.extend_from_slice(&xs);
                        let mut res: Vec<i64> = Vec::with_capacity(tgt.len());
                        for (i, &d) in tgt.iter().enumerate() {
                            let d = if d == 0 && !allowzero {
                                match full.get(i) {
                                    Some(&v) => v as i64,
                                    None => return c.fail("0 in the shape beyond the input rank"),
                                }
                            } else {
                                d
                            };
                            res.push(d);
                        }
                        if res.iter().filter(|&&d| d == -1).count() > 1 {
                            return c.fail("more than one -1 in the target shape");
                        }
                        if res.iter().any(|&d| d < -1) {
                            return c.fail(format!("cannot reshape {xs:?} to {tgt:?}"));
                        }
                        if let Some(pos) = res.iter().position(|&d| d == -1) {
                            let mut known: i64 = 1;
                            for &d in res.iter().filter(|&&d| d != -1) {
                                known = match known.checked_mul(d) {
                                    Some(v) => v,
                                    None => {
                                        return c.fail(format!("cannot reshape {xs:?} to {tgt:?}"))
                                    }
                                };
                            }
                            if known == 0 || (n as i64) % known != 0 {
                                return c.fail(format!("cannot reshape {xs:?} to {tgt:?}"));
                            }
                            res[pos] = n as i64 / known;
                        }
                        if res.first() != Some(&1) {
                            return c
                                .fail(format!("target shape {tgt:?} changes the batch dimension"));
                        }
                        let shape: Vec<usize> = res[1..].iter().map(|&d| d as usize).collect();
                        let m = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
                        if m != Some(n) {
                            return c
                                .fail(format!("cannot reshape {xs:?} ({n} elements) to {tgt:?}"));
                        }
                        shape
                    };
                    self.add(&c, base("reshape", vec![x]), shape)?;
                }
                "Concat" => {
                    let mut names = Vec::with_capacity(node.input.len());
                    for i in &node.input {
                        if self.consts.contains_key(i.as_str()) {
                            return c.fail("constant operands are not supported");
                        }
                        names.push(self.act(&c, i)?);
                    }
                    if names.is_empty() {
                        return c.fail("no operands");
                    }
                    let shapes: Vec<Vec<usize>> =
                        names.iter().map(|x| self.shapes[x].clone()).collect();
                    let rank = shapes[0].len() as i64 + 1;
                    let axis = match c.get("axis") {
                        Some(Attr::Int(a)) => a,
                        _ => return c.fail("attribute axis (an integer) is required"),
                    };
                    let ax = if axis < 0 { axis + rank } else { axis };
                    if ax <= 0 || ax >= rank {
                        return c.fail(format!(
                            "axis {axis} is not supported (the batch axis or out of range)"
                        ));
                    }
                    let ax = (ax - 1) as usize;
                    for s in &shapes {
                        if s.len() != shapes[0].len()
                            || (0..s.len()).any(|d| d != ax && s[d] != shapes[0][d])
                        {
                            return c.fail(format!(
                                "operand shapes {shapes:?} do not agree outside axis {axis}"
                            ));
                        }
                    }
                    let mut shape = shapes[0].clone();
                    shape[ax] = shapes.iter().map(|s| s[ax]).sum();
                    if elems(&shape).is_none() {
                        return c.fail(format!("output shape {shape:?} is too large"));
                    }
                    let mut nd = base("concat", names);
                    nd.axis = ax;
                    self.add(&c, nd, shape)?;
                }
                "Softmax" | "ArgMax" => {
                    if out != graph_out {
                        return c.fail(format!("{op} is only supported as the final node (on the client's revealed logits)"));
                    }
                    let x = self.act(&c, need_in(0)?)?;
                    let xs = self.shapes[&x].clone();
                    let given = c.int("axis", if op == "Softmax" { -1 } else { 0 })?;
                    let ax = if given < 0 {
                        given + xs.len() as i64 + 1
                    } else {
                        given
                    };
                    if xs.len() != 1 || ax != 1 {
                        let shown = if c.has("axis") {
                            given.to_string()
                        } else {
                            "None".into()
                        };
                        let mut full = vec![1];
                        full.extend_from_slice(&xs);
                        return c.fail(format!("axis {shown} on shape {full:?} is not supported (only axis 1 of a vector)"));
                    }
                    if op == "ArgMax" && c.int("select_last_index", 0)? != 0 {
                        return c.fail("select_last_index is not supported");
                    }
                    if op == "ArgMax" {
                        post = "argmax";
                        argmax_keepdims = Some(c.int("keepdims", 1)?);
                    } else {
                        post = "softmax";
                    }
                    final_value = Some(x);
                }
                _ => return c.fail("operator not supported by hush"),
            }
        }

        let logits = match final_value {
            Some(v) => v,
            None => self
                .alias
                .get(&graph_out)
                .cloned()
                .unwrap_or_else(|| graph_out.clone()),
        };
        if !self.shapes.contains_key(&logits) || logits == inp_name {
            return unsupported(format!(
                "graph output '{graph_out}' is not computed by a supported node"
            ));
        }
        let gname = g
            .name
            .as_deref()
            .filter(|s| !s.is_empty())
            .unwrap_or("model");
        let header = self.header_json(gname, &inp_name, &in_shape, &logits, post, argmax_keepdims);
        let hlen = u32::try_from(header.len())
            .map_err(|_| Error::Unsupported("the model's header is too large".into()))?;
        let mut outb = Vec::with_capacity(12 + header.len() + self.offset);
        outb.extend_from_slice(MAGIC);
        outb.extend_from_slice(&hlen.to_le_bytes());
        outb.extend_from_slice(header.as_bytes());
        for t in &self.tensors {
            for v in &t.data {
                outb.extend_from_slice(&v.to_le_bytes());
            }
        }
        Ok(outb)
    }

    /// The JSON header, compact, keys in a fixed order, ASCII only.
    fn header_json(
        &self,
        gname: &str,
        inp: &str,
        in_shape: &[usize],
        logits: &str,
        post: &str,
        keepdims: Option<i64>,
    ) -> String {
        let mut j = String::new();
        j.push_str("{\"format\":\"hush-model\",\"version\":");
        j.push_str(&FORMAT_VERSION.to_string());
        j.push_str(",\"name\":");
        json_str(&mut j, gname);
        j.push_str(",\"input\":{\"name\":");
        json_str(&mut j, inp);
        j.push_str(",\"shape\":");
        json_list(&mut j, in_shape);
        j.push_str("},\"output\":{\"name\":");
        json_str(&mut j, logits);
        j.push_str(",\"shape\":");
        json_list(&mut j, &self.shapes[logits]);
        j.push_str("},\"postprocess\":");
        json_str(&mut j, post);
        j.push_str(",\"nodes\":[");
        for (i, n) in self.nodes.iter().enumerate() {
            if i > 0 {
                j.push(',');
            }
            j.push_str("{\"op\":");
            json_str(&mut j, n.op);
            j.push_str(",\"name\":");
            json_str(&mut j, &n.name);
            j.push_str(",\"inputs\":[");
            for (k, s) in n.inputs.iter().enumerate() {
                if k > 0 {
                    j.push(',');
                }
                json_str(&mut j, s);
            }
            j.push_str("],\"output\":");
            json_str(&mut j, &n.output);
            let num = |j: &mut String, key: &str, v: usize| {
                j.push_str(&format!(",\"{key}\":{v}"));
            };
            let list = |j: &mut String, key: &str, v: &[usize]| {
                j.push_str(&format!(",\"{key}\":"));
                json_list(j, v);
            };
            match n.op {
                "conv" => {
                    num(&mut j, "weight", n.weight.unwrap_or(0));
                    list(&mut j, "stride", &n.stride);
                    list(&mut j, "pads", &n.pads);
                    num(&mut j, "bias", n.bias.unwrap_or(0));
                }
                "dense" | "scale" => {
                    num(&mut j, "weight", n.weight.unwrap_or(0));
                    num(&mut j, "bias", n.bias.unwrap_or(0));
                }
                "add_const" => num(&mut j, "weight", n.weight.unwrap_or(0)),
                "maxpool" | "avgpool" => {
                    list(&mut j, "kernel", &n.kernel);
                    list(&mut j, "stride", &n.stride);
                    list(&mut j, "pads", &n.pads);
                    if let Some(c) = n.count_include_pad {
                        j.push_str(if c {
                            ",\"count_include_pad\":true"
                        } else {
                            ",\"count_include_pad\":false"
                        });
                    }
                }
                "concat" => num(&mut j, "axis", n.axis),
                _ => {}
            }
            list(&mut j, "shape", &n.shape);
            if !n.folded.is_empty() {
                j.push_str(",\"folded\":[");
                for (k, s) in n.folded.iter().enumerate() {
                    if k > 0 {
                        j.push(',');
                    }
                    json_str(&mut j, s);
                }
                j.push(']');
            }
            j.push('}');
        }
        j.push_str("],\"tensors\":[");
        for (i, t) in self.tensors.iter().enumerate() {
            if i > 0 {
                j.push(',');
            }
            j.push_str("{\"name\":");
            json_str(&mut j, &t.name);
            j.push_str(",\"shape\":");
            json_list(&mut j, &t.shape);
            j.push_str(&format!(",\"offset\":{},\"dtype\":\"f32\"}}", t.offset));
        }
        j.push(']');
        if let Some(k) = keepdims {
            j.push_str(&format!(",\"argmax_keepdims\":{k}"));
        }
        j.push('}');
        j
    }
}

fn pool_out(n: usize, k: usize, s: usize, p0: usize, p1: usize) -> Option<usize> {
    let padded = n.checked_add(p0)?.checked_add(p1)?;
    if s == 0 || padded < k {
        return None;
    }
    Some((padded - k) / s + 1)
}

fn transpose(v: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    let mut t = vec![0.0; v.len()];
    for r in 0..rows {
        for c in 0..cols {
            t[c * rows + r] = v[r * cols + c];
        }
    }
    t
}

fn json_list(j: &mut String, v: &[usize]) {
    j.push('[');
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            j.push(',');
        }
        j.push_str(&x.to_string());
    }
    j.push(']');
}

/// A JSON string with every non-printable-ASCII character escaped (`\uXXXX`,
/// UTF-16 surrogate pairs beyond the BMP), so the header is plain ASCII.
fn json_str(j: &mut String, s: &str) {
    j.push('"');
    for ch in s.chars() {
        match ch {
            '"' => j.push_str("\\\""),
            '\\' => j.push_str("\\\\"),
            '\n' => j.push_str("\\n"),
            '\r' => j.push_str("\\r"),
            '\t' => j.push_str("\\t"),
            '\u{8}' => j.push_str("\\b"),
            '\u{c}' => j.push_str("\\f"),
            ' '..='~' => j.push(ch),
            _ => {
                let mut buf = [0u16; 2];
                for u in ch.encode_utf16(&mut buf) {
                    j.push_str(&format!("\\u{:04x}", u));
                }
            }
        }
    }
    j.push('"');
}

#[cfg(test)]
mod tests;
