//! A model compiled for a fixed-point run: one [`Step`] per node, weights
//! encoded in Z_2^ℓ (server), or sizes only (client).

use crate::fixed::{avgpool_consts, pool_windows, FixedConfig};
use crate::model::{Model, Op};
use crate::{Error, Result};
use hush_tee::linear_deal::LinearOp;

/// What a step does over the ring.
pub enum StepKind {
    /// A weighted linear layer (module-dealt in the secure run): y = W·x +
    /// bias (bias at scale 2^(2·frac), one entry per output element), then
    /// truncation by frac. `op` and
    /// `bias` are present on the server only.
    Linear { layer: u32, in_len: usize, out_len: usize, op: Option<LinearOp>, bias: Vec<u64>, macs: u64 },
    /// Window sums times public constants, then truncation by frac.
    AvgPool { offs: Vec<u32>, idx: Vec<u32>, consts: Vec<u64> },
    /// x + c (c at scale 2^frac; server only).
    AddConst { c: Vec<u64> },
    Add,
    Relu,
    MaxPool { offs: Vec<u32>, idx: Vec<u32> },
    Reshape,
    Concat { axis: usize, shapes: Vec<Vec<usize>> },
}

pub struct Step {
    pub name: String,
    pub kind: StepKind,
    pub inputs: Vec<usize>,
    pub shape: Vec<usize>,
    pub out_len: usize,
}

impl Step {
    pub fn kind_name(&self) -> &'static str {
        match &self.kind {
            StepKind::Linear { op: _, .. } => "linear",
            StepKind::AvgPool { .. } => "avgpool",
            StepKind::AddConst { .. } => "add_const",
            StepKind::Add => "add",
            StepKind::Relu => "relu",
            StepKind::MaxPool { .. } => "maxpool",
            StepKind::Reshape => "reshape",
            StepKind::Concat { .. } => "concat",
        }
    }
}

pub struct Plan {
    pub cfg: FixedConfig,
    pub steps: Vec<Step>,
    pub input_len: usize,
    pub output: usize,
    /// Value id -> index of its last reader (usize::MAX for the output).
    pub last_use: Vec<usize>,
    pub has_weights: bool,
}

fn enc_all(cfg: &FixedConfig, v: &[f32], scale: u32, what: &str) -> Result<Vec<u64>> {
    v.iter().map(|&x| cfg.encode_scaled(x as f64, scale, what)).collect()
}

impl Plan {
    /// Compiles `model` for `cfg`. Errors name the node whose weights do
    /// not fit the ring.
    pub fn new(model: &Model, cfg: FixedConfig) -> Result<Plan> {
        cfg.validate()?;
        let w = model.has_weights;
        let f = cfg.frac;
        let mut steps = Vec::with_capacity(model.nodes.len());
        let mut layer = 0u32;
        for n in &model.nodes {
            let in_shape = model.shape(n.inputs[0]).to_vec();
            let in_len: usize = in_shape.iter().product();
            let out_len: usize = n.shape.iter().product();
            let what = |t: &str| format!("node '{}' {t}", n.name);
            let kind = match &n.op {
                Op::Conv { weight, bias, stride, pads } => {
                    let s = &weight.shape;
                    let mk = |wq: Vec<u64>| LinearOp::Conv {
                        c_in: s[1] as u32,
                        h: in_shape[1] as u32,
                        w: in_shape[2] as u32,
                        c_out: s[0] as u32,
                        kh: s[2] as u32,
                        kw: s[3] as u32,
                        stride: [stride[0] as u32, stride[1] as u32],
                        pads: [pads[0] as u32, pads[1] as u32, pads[2] as u32, pads[3] as u32],
                        weight: wq,
                    };
                    let macs = (out_len * s[1] * s[2] * s[3]) as u64;
                    let (op, b) = if w {
                        let bq = enc_all(&cfg, &bias.data, 2 * f, &what("bias"))?;
                        let plane = out_len / s[0];
                        let full: Vec<u64> = (0..out_len).map(|i| bq[i / plane]).collect();
                        (Some(mk(enc_all(&cfg, &weight.data, f, &what("weight"))?)), full)
                    } else {
                        (None, Vec::new())
                    };
                    layer += 1;
                    StepKind::Linear { layer: layer - 1, in_len, out_len, op, bias: b, macs }
                }
                Op::Dense { weight, bias } => {
                    let (op, b) = if w {
                        let wq = enc_all(&cfg, &weight.data, f, &what("weight"))?;
                        (Some(LinearOp::Dense { n_in: in_len as u32, n_out: out_len as u32, weight: wq }), enc_all(&cfg, &bias.data, 2 * f, &what("bias"))?)
                    } else {
                        (None, Vec::new())
                    };
                    layer += 1;
                    StepKind::Linear { layer: layer - 1, in_len, out_len, op, bias: b, macs: (in_len * out_len) as u64 }
                }
                Op::Scale { weight, bias } => {
                    let c = in_shape[0];
                    let inner = in_len / c;
                    let (op, b) = if w {
                        let wq = enc_all(&cfg, &weight.data, f, &what("scale"))?;
                        let bq = enc_all(&cfg, &bias.data, 2 * f, &what("shift"))?;
                        let full: Vec<u64> = (0..in_len).map(|i| bq[i / inner]).collect();
                        (Some(LinearOp::Scale { channels: c as u32, inner: inner as u32, weight: wq }), full)
                    } else {
                        (None, Vec::new())
                    };
                    layer += 1;
                    StepKind::Linear { layer: layer - 1, in_len, out_len, op, bias: b, macs: in_len as u64 }
                }
                Op::AvgPool { kernel, stride, pads, count_include_pad } => {
                    let (offs, idx) = pool_windows(&in_shape, *kernel, *stride, *pads, &n.shape);
                    let consts = avgpool_consts(&cfg, &offs, *kernel, *count_include_pad);
                    StepKind::AvgPool { offs, idx, consts }
                }
                Op::MaxPool { kernel, stride, pads } => {
                    let (offs, idx) = pool_windows(&in_shape, *kernel, *stride, *pads, &n.shape);
                    StepKind::MaxPool { offs, idx }
                }
                Op::AddConst { value } => StepKind::AddConst { c: if w { enc_all(&cfg, &value.data, f, &what("constant"))? } else { Vec::new() } },
                Op::Add => StepKind::Add,
                Op::Relu => StepKind::Relu,
                Op::Reshape => StepKind::Reshape,
                Op::Concat { axis } => StepKind::Concat { axis: *axis, shapes: n.inputs.iter().map(|&i| model.shape(i).to_vec()).collect() },
            };
            if let StepKind::Linear { op: Some(op), .. } = &kind {
                op.validate().map_err(|e| Error::Model(format!("node '{}': {e}", n.name)))?;
            }
            steps.push(Step { name: n.name.clone(), kind, inputs: n.inputs.clone(), shape: n.shape.clone(), out_len });
        }
        Ok(Plan { cfg, steps, input_len: model.input_len(), output: model.output, last_use: model.last_use(), has_weights: w })
    }

    /// Number of module-dealt linear layers.
    pub fn linear_layers(&self) -> usize {
        self.steps.iter().filter(|s| matches!(s.kind, StepKind::Linear { .. })).count()
    }

    /// Encodes a float input (error if a value does not fit the ring).
    pub fn encode_input(&self, x: &[f64]) -> Result<Vec<u64>> {
        if x.len() != self.input_len {
            return Err(Error::Input(format!("input has {} values, the model expects {}", x.len(), self.input_len)));
        }
        x.iter().map(|&v| self.cfg.encode(v, "input")).collect()
    }

    pub fn decode(&self, y: &[u64]) -> Vec<f64> {
        y.iter().map(|&v| self.cfg.decode(v)).collect()
    }
}
