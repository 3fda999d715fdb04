//! BERT-family encoders (MiniLM, BERT) from ONNX: the weights of a
//! sentence encoder, for `hush embed` (`hush_inference::encoder`).
//!
//! hush does not execute the ONNX graph of an encoder node by node; it
//! recognises the encoder by its parameters and runs its own private
//! implementation of the architecture (embeddings, self-attention with the
//! attention mask, erf-GeLU FFN, post-LayerNorm residuals, mean pooling and
//! L2 normalisation). This importer therefore reads:
//! * the initializers with the Hugging Face parameter names and layouts
//!   (`embeddings.word_embeddings.weight` vocab × H, …,
//!   `encoder.layer.{i}.attention.self.query.weight` out × in, …) — the
//!   graph `scripts/minilm.py` writes keeps them;
//! * `metadata_props`: `hush.encoder` = `bert`, `num_attention_heads`,
//!   `layer_norm_eps` and optionally `pooling` (`mean`) and `normalize`
//!   (`l2` or `none`);
//! * the graph's operators, which must all be among [`ENCODER_OPS`] (the
//!   first other one is named in the error), and at least one `Erf` (the
//!   exact GeLU; a tanh-GeLU graph is refused rather than silently run with
//!   the erf form).
//!
//! The number of layers, the hidden and FFN sizes, the vocabulary and the
//! longest sequence come from the tensors' shapes, which are checked against
//! each other. **Untrusted input:** the same size-capped decoder as
//! [`crate::convert`]; every tensor is shape-checked before use; non-finite
//! weights are refused; every failure is an [`Error`] naming the tensor or
//! key; nothing panics.

use crate::proto::{GraphProto, ModelProto};
use crate::{tensor_const, Error, Result, MAX_FILE_BYTES};
use prost::Message;
use std::collections::HashMap;

/// Operators an encoder graph may contain.
pub const ENCODER_OPS: &[&str] = &[
    "Gather", "Shape", "Slice", "Range", "Add", "Sub", "Mul", "Div", "LayerNormalization", "Cast", "Unsqueeze", "Squeeze",
    "Reshape", "Transpose", "MatMul", "Gemm", "Softmax", "Erf", "Identity", "ReduceSum", "ReduceMean", "Max", "Sqrt", "Pow",
    "Constant", "Clip", "Where", "Equal", "ConstantOfShape", "Expand", "Concat", "Dropout",
];
/// Most layers accepted.
pub const MAX_LAYERS: usize = 48;

/// y = W·x + b with W `n_out` × `n_in` (row-major, as Hugging Face stores it).
#[derive(Clone, Debug)]
pub struct Dense {
    pub n_out: usize,
    pub n_in: usize,
    pub w: Vec<f32>,
    pub b: Vec<f32>,
}

/// LayerNorm's γ and β.
#[derive(Clone, Debug)]
pub struct Norm {
    pub gamma: Vec<f32>,
    pub beta: Vec<f32>,
}

/// One post-LayerNorm encoder layer.
#[derive(Clone, Debug)]
pub struct EncoderLayer {
    pub q: Dense,
    pub k: Dense,
    pub v: Dense,
    pub o: Dense,
    pub ln1: Norm,
    pub ff1: Dense,
    pub ff2: Dense,
    pub ln2: Norm,
}

/// A BERT-family sentence encoder.
#[derive(Clone, Debug)]
pub struct Encoder {
    pub hidden: usize,
    pub heads: usize,
    pub ffn: usize,
    pub vocab: usize,
    pub max_pos: usize,
    pub eps: f64,
    /// vocab × hidden
    pub word: Vec<f32>,
    /// max_pos × hidden
    pub pos: Vec<f32>,
    /// type_vocab × hidden (row 0 is used: single-segment inputs)
    pub token_type: Vec<f32>,
    pub emb_ln: Norm,
    pub layers: Vec<EncoderLayer>,
    /// L2-normalise the mean-pooled embedding.
    pub normalize: bool,
}

fn bad(m: impl std::fmt::Display) -> Error {
    Error::Unsupported(format!("encoder: {m}"))
}

/// Reads an encoder from an ONNX file (size-checked before reading).
pub fn encoder_from_file(path: &std::path::Path) -> Result<Encoder> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
    let mut b = Vec::new();
    f.take(MAX_FILE_BYTES + 1).read_to_end(&mut b).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
    if b.len() as u64 > MAX_FILE_BYTES {
        return Err(Error::Parse(format!("{}: file is larger than the {MAX_FILE_BYTES}-byte limit", path.display())));
    }
    encoder_from_onnx(&b)
}

/// Whether the ONNX bytes carry `hush.encoder` metadata (the graphs
/// `scripts/minilm.py` writes); others go through [`crate::graph`].
pub fn is_hush_encoder(onnx: &[u8]) -> bool {
    ModelProto::decode(onnx).is_ok_and(|m| m.metadata_props.iter().any(|e| e.key.as_deref() == Some("hush.encoder")))
}

/// Reads an encoder from the bytes of an ONNX model.
pub fn encoder_from_onnx(onnx: &[u8]) -> Result<Encoder> {
    if onnx.len() as u64 > MAX_FILE_BYTES {
        return Err(Error::Parse(format!("{} bytes is larger than the {MAX_FILE_BYTES}-byte limit", onnx.len())));
    }
    let model = ModelProto::decode(onnx).map_err(|e| Error::Parse(e.to_string()))?;
    let meta: HashMap<&str, &str> =
        model.metadata_props.iter().filter_map(|e| Some((e.key.as_deref()?, e.value.as_deref().unwrap_or("")))).collect();
    match meta.get("hush.encoder") {
        Some(&"bert") => {}
        Some(other) => return Err(bad(format!("metadata hush.encoder = '{other}': only 'bert' is supported"))),
        None => return Err(bad("the model's metadata_props lack hush.encoder = bert (not an encoder graph hush can import; CNNs go through `hush import`)")),
    }
    let heads: usize = meta
        .get("num_attention_heads")
        .ok_or_else(|| bad("metadata num_attention_heads is missing"))?
        .parse()
        .map_err(|_| bad("metadata num_attention_heads is not a number"))?;
    let eps: f64 = meta.get("layer_norm_eps").ok_or_else(|| bad("metadata layer_norm_eps is missing"))?.parse().map_err(|_| bad("metadata layer_norm_eps is not a number"))?;
    if !(0.0..1.0).contains(&eps) {
        return Err(bad(format!("layer_norm_eps {eps} outside [0, 1)")));
    }
    if let Some(p) = meta.get("pooling") {
        if *p != "mean" {
            return Err(bad(format!("pooling '{p}': only mean pooling is implemented")));
        }
    }
    let normalize = match meta.get("normalize").copied().unwrap_or("l2") {
        "l2" => true,
        "none" => false,
        o => return Err(bad(format!("normalize '{o}': 'l2' or 'none'"))),
    };
    let g = model.graph.as_ref().ok_or_else(|| bad("the model has no graph"))?;
    check_ops(g)?;
    let mut t = Tensors::new(g)?;
    let word = t.take("embeddings.word_embeddings.weight", 2)?;
    let (vocab, hidden) = (word.0[0], word.0[1]);
    if hidden == 0 || vocab == 0 {
        return Err(bad("empty word embeddings"));
    }
    if heads == 0 || hidden % heads != 0 {
        return Err(bad(format!("{heads} heads do not divide the hidden size {hidden}")));
    }
    let pos = t.take("embeddings.position_embeddings.weight", 2)?;
    if pos.0[1] != hidden || pos.0[0] == 0 {
        return Err(bad(format!("position embeddings of shape {:?} for hidden size {hidden}", pos.0)));
    }
    let typ = t.take("embeddings.token_type_embeddings.weight", 2)?;
    if typ.0[1] != hidden || typ.0[0] == 0 {
        return Err(bad(format!("token-type embeddings of shape {:?} for hidden size {hidden}", typ.0)));
    }
    let emb_ln = t.norm("embeddings.LayerNorm", hidden)?;
    let mut layers = Vec::new();
    let mut ffn = 0;
    while t.has(&format!("encoder.layer.{}.attention.self.query.weight", layers.len())) {
        if layers.len() == MAX_LAYERS {
            return Err(bad(format!("more than {MAX_LAYERS} layers")));
        }
        let p = format!("encoder.layer.{}.", layers.len());
        let ff1 = t.dense(&format!("{p}intermediate.dense"), None, hidden)?;
        ffn = ff1.n_out;
        layers.push(EncoderLayer {
            q: t.dense(&format!("{p}attention.self.query"), Some(hidden), hidden)?,
            k: t.dense(&format!("{p}attention.self.key"), Some(hidden), hidden)?,
            v: t.dense(&format!("{p}attention.self.value"), Some(hidden), hidden)?,
            o: t.dense(&format!("{p}attention.output.dense"), Some(hidden), hidden)?,
            ln1: t.norm(&format!("{p}attention.output.LayerNorm"), hidden)?,
            ff2: t.dense(&format!("{p}output.dense"), Some(hidden), ff1.n_out)?,
            ff1,
            ln2: t.norm(&format!("{p}output.LayerNorm"), hidden)?,
        });
    }
    if layers.is_empty() {
        return Err(bad("no encoder.layer.0.* tensors"));
    }
    Ok(Encoder {
        hidden,
        heads,
        ffn,
        vocab,
        max_pos: pos.0[0],
        eps,
        word: word.1,
        pos: pos.1,
        token_type: typ.1,
        emb_ln,
        layers,
        normalize,
    })
}

fn check_ops(g: &GraphProto) -> Result<()> {
    let mut erf = false;
    for (i, n) in g.node.iter().enumerate() {
        let op = n.op_type.as_deref().unwrap_or("");
        if !n.domain.as_deref().unwrap_or("").is_empty() && n.domain.as_deref() != Some("ai.onnx") {
            return Err(bad(format!("node {i} ('{}'): operator {op} of domain '{}' is not supported", n.name.as_deref().unwrap_or(""), n.domain.as_deref().unwrap_or(""))));
        }
        if !ENCODER_OPS.contains(&op) {
            return Err(bad(format!("node {i} ('{}'): operator {op} is not part of a BERT encoder hush can run", n.name.as_deref().unwrap_or(""))));
        }
        erf |= op == "Erf";
    }
    if !erf {
        return Err(bad("the graph has no Erf node: hush implements the exact (erf) GeLU only"));
    }
    Ok(())
}

struct Tensors<'a> {
    by_name: HashMap<&'a str, &'a crate::proto::TensorProto>,
}

impl<'a> Tensors<'a> {
    fn new(g: &'a GraphProto) -> Result<Self> {
        let mut by_name = HashMap::new();
        for t in &g.initializer {
            if let Some(n) = t.name.as_deref() {
                if by_name.insert(n, t).is_some() {
                    return Err(bad(format!("initializer '{n}' appears twice")));
                }
            }
        }
        Ok(Tensors { by_name })
    }

    fn has(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// A float tensor of rank `rank`: (shape, values).
    fn take(&mut self, name: &str, rank: usize) -> Result<(Vec<usize>, Vec<f32>)> {
        let t = self.by_name.get(name).ok_or_else(|| bad(format!("tensor '{name}' is missing")))?;
        let c = tensor_const(t).map_err(|e| bad(format!("tensor '{name}': {e}")))?;
        if c.shape.len() != rank {
            return Err(bad(format!("tensor '{name}' has shape {:?}, expected rank {rank}", c.shape)));
        }
        let v: Vec<f32> = c.f64s().into_iter().map(|x| x as f32).collect();
        if let Some(i) = v.iter().position(|x| !x.is_finite()) {
            return Err(bad(format!("tensor '{name}': value {i} is not finite")));
        }
        Ok((c.shape, v))
    }

    fn dense(&mut self, prefix: &str, n_out: Option<usize>, n_in: usize) -> Result<Dense> {
        let (ws, w) = self.take(&format!("{prefix}.weight"), 2)?;
        if ws[1] != n_in || n_out.is_some_and(|o| o != ws[0]) || ws[0] == 0 {
            return Err(bad(format!("tensor '{prefix}.weight' has shape {ws:?}, expected [{}, {n_in}] (out × in)", n_out.map_or("n".into(), |o| o.to_string()))));
        }
        let (bs, b) = self.take(&format!("{prefix}.bias"), 1)?;
        if bs[0] != ws[0] {
            return Err(bad(format!("tensor '{prefix}.bias' has shape {bs:?} for {} outputs", ws[0])));
        }
        Ok(Dense { n_out: ws[0], n_in, w, b })
    }

    fn norm(&mut self, prefix: &str, h: usize) -> Result<Norm> {
        let (gs, gamma) = self.take(&format!("{prefix}.weight"), 1)?;
        let (bs, beta) = self.take(&format!("{prefix}.bias"), 1)?;
        if gs[0] != h || bs[0] != h {
            return Err(bad(format!("LayerNorm '{prefix}' of sizes {}/{} for hidden size {h}", gs[0], bs[0])));
        }
        Ok(Norm { gamma, beta })
    }
}
