//! A small f64 interpreter of ONNX nodes: constant folding at import
//! ([`crate::graph`]), the client's own computations on its inputs (the
//! attention-mask arithmetic), the index maps of data-movement operators
//! (run on a tensor of indices), and the float reference of the graph
//! runtime's tests ([`crate::graph::GraphModel::eval_f64`]).
//!
//! Semantics follow the ONNX operator specifications for opsets 11–18
//! (attribute and input forms of `axes`, `split`, Slice's inputs) with
//! numpy broadcasting. Integer tensors (int32/int64/bool) keep an `int`
//! flag so that shape arithmetic (`Div`) truncates as ONNX does. Every
//! size is checked against [`crate::MAX_ELEMS`] before allocation; every
//! failure is an error naming the operator; nothing panics.

use crate::proto::{attr_type, data_type, AttributeProto, NodeProto};
use crate::{broadcast_index, broadcast_shape, elems, tensor_const, Error, Result};

/// A dense tensor of f64 values (integers and booleans exactly
/// representable), row-major.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Tensor {
    pub shape: Vec<usize>,
    /// JSON has no infinities: torch writes −∞ in mask constants
    /// (`Where(m, 0, -inf)`), so non-finite values travel as strings.
    #[serde(with = "f64_json")]
    pub v: Vec<f64>,
    /// Integer (or boolean) element type: `Div` truncates.
    pub int: bool,
}

impl Tensor {
    pub fn new(shape: Vec<usize>, v: Vec<f64>) -> Self {
        Tensor { shape, v, int: false }
    }
    pub fn ints(shape: Vec<usize>, v: Vec<f64>) -> Self {
        Tensor { shape, v, int: true }
    }
    pub fn scalar(x: f64) -> Self {
        Tensor::new(vec![], vec![x])
    }
    pub fn len(&self) -> usize {
        self.v.len()
    }
    pub fn is_empty(&self) -> bool {
        self.v.is_empty()
    }
    /// Zeros of a shape (size-checked).
    pub fn zeros(shape: &[usize], int: bool) -> Result<Self> {
        let n = elems(shape).ok_or_else(|| Error::Unsupported(format!("shape {shape:?} is too large")))?;
        Ok(Tensor { shape: shape.to_vec(), v: vec![0.0; n], int })
    }
    /// 0, 1, 2, … in a shape: run through a data-movement operator, the
    /// result says where each output element comes from.
    pub fn iota(shape: &[usize]) -> Result<Self> {
        let mut t = Tensor::zeros(shape, true)?;
        t.v.iter_mut().enumerate().for_each(|(i, x)| *x = i as f64);
        Ok(t)
    }
    /// The values as integers (shape arithmetic). Values are held as f64,
    /// so int64's extremes (torch writes ±(2^63 − 1) as a Slice's "to the
    /// end") arrive as ±2^63: those saturate to `i64::MAX`/`i64::MIN`,
    /// which every consumer clamps or refuses by size.
    pub fn as_ints(&self) -> Result<Vec<i64>> {
        const TWO_63: f64 = 9_223_372_036_854_775_808.0;
        self.v
            .iter()
            .map(|&x| if x.is_finite() && x.fract() == 0.0 && x.abs() <= TWO_63 { Ok(x as i64) } else { Err(Error::Unsupported(format!("{x} is not an integer"))) })
            .collect()
    }
    pub(crate) fn from_proto(t: &crate::proto::TensorProto) -> std::result::Result<Tensor, String> {
        if t.data_type == Some(data_type::BOOL) {
            return bool_tensor(t);
        }
        let c = tensor_const(t)?;
        let int = matches!(t.data_type, Some(data_type::INT32) | Some(data_type::INT64));
        Ok(Tensor { shape: c.shape.clone(), v: c.f64s(), int })
    }
}

fn bool_tensor(t: &crate::proto::TensorProto) -> std::result::Result<Tensor, String> {
    let mut shape = Vec::new();
    for &d in &t.dims {
        shape.push(usize::try_from(d).map_err(|_| format!("dimension {d}"))?);
    }
    let n = elems(&shape).ok_or_else(|| format!("shape {shape:?} is too large"))?;
    let v: Vec<f64> = if let Some(r) = &t.raw_data {
        if r.len() != n {
            return Err(format!("bool tensor of shape {shape:?} holds {} bytes", r.len()));
        }
        r.iter().map(|&b| f64::from(u8::from(b != 0))).collect()
    } else if t.int32_data.len() == n {
        t.int32_data.iter().map(|&b| f64::from(u8::from(b != 0))).collect()
    } else {
        return Err(format!("bool tensor of shape {shape:?} holds {} values", t.int32_data.len()));
    };
    Ok(Tensor::ints(shape, v))
}

fn fail<T>(node: &NodeProto, msg: impl std::fmt::Display) -> Result<T> {
    let name = node.name.as_deref().filter(|s| !s.is_empty()).unwrap_or("<unnamed>");
    Err(Error::Unsupported(format!("node '{name}' (operator {}): {msg}", node.op_type.as_deref().unwrap_or(""))))
}

pub(crate) fn attr<'a>(node: &'a NodeProto, key: &str) -> Option<&'a AttributeProto> {
    node.attribute.iter().find(|a| a.name.as_deref() == Some(key))
}
pub(crate) fn attr_int(node: &NodeProto, key: &str, default: i64) -> i64 {
    attr(node, key).and_then(|a| a.i).unwrap_or(default)
}
pub(crate) fn attr_float(node: &NodeProto, key: &str, default: f64) -> f64 {
    attr(node, key).and_then(|a| a.f).map_or(default, |f| f as f64)
}
pub(crate) fn attr_ints(node: &NodeProto, key: &str) -> Option<Vec<i64>> {
    attr(node, key).filter(|a| a.r#type == Some(attr_type::INTS) || !a.ints.is_empty()).map(|a| a.ints.clone())
}

/// Normalises an axis into 0..rank.
pub(crate) fn norm_axis(node: &NodeProto, axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r.max(1) {
        return fail(node, format!("axis {axis} outside a rank-{rank} tensor"));
    }
    Ok(if axis < 0 { (axis + r) as usize } else { axis as usize })
}

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The element-wise binary operators with numpy broadcasting.
fn binary(node: &NodeProto, a: &Tensor, b: &Tensor, f: impl Fn(f64, f64) -> f64, int_out: bool) -> Result<Tensor> {
    let shape = broadcast_shape(&a.shape, &b.shape).ok_or_else(|| Error::Unsupported(format!("node '{}': shapes {:?} and {:?} do not broadcast", node.name.as_deref().unwrap_or(""), a.shape, b.shape)))?;
    let ia = broadcast_index(&a.shape, &shape).ok_or_else(|| Error::Unsupported("broadcast".into()))?;
    let ib = broadcast_index(&b.shape, &shape).ok_or_else(|| Error::Unsupported("broadcast".into()))?;
    let v = ia.iter().zip(&ib).map(|(&i, &j)| f(a.v[i], b.v[j])).collect();
    Ok(Tensor { shape, v, int: int_out })
}

fn unary(a: &Tensor, f: impl Fn(f64) -> f64) -> Tensor {
    Tensor { shape: a.shape.clone(), v: a.v.iter().map(|&x| f(x)).collect(), int: a.int }
}

/// erf to about 1.2·10⁻⁷ (Numerical Recipes' erfc Chebyshev fit).
pub fn erf(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t * (-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))).exp();
    if x >= 0.0 {
        1.0 - r
    } else {
        r - 1.0
    }
}

/// Reads the axes of a reduction/Unsqueeze/Squeeze: attribute (older
/// opsets) or second input (newer ones).
fn axes_of(node: &NodeProto, ins: &[Option<&Tensor>], idx: usize) -> Result<Option<Vec<i64>>> {
    if let Some(a) = attr_ints(node, "axes") {
        return Ok(Some(a));
    }
    match ins.get(idx).copied().flatten() {
        Some(t) => Ok(Some(t.as_ints()?)),
        None => Ok(None),
    }
}

fn input<'a>(node: &NodeProto, ins: &[Option<&'a Tensor>], i: usize) -> Result<&'a Tensor> {
    match ins.get(i).copied().flatten() {
        Some(t) => Ok(t),
        None => fail(node, format!("input {i} is missing")),
    }
}

/// Evaluates one node on known inputs (`None` for an omitted optional
/// input). Returns its outputs.
pub fn eval_node(node: &NodeProto, ins: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
    let op = node.op_type.as_deref().unwrap_or("");
    let x = |i: usize| input(node, ins, i);
    let one = |t: Tensor| Ok(vec![t]);
    match op {
        "Identity" | "Dropout" => one(x(0)?.clone()),
        "Cast" => {
            let to = attr_int(node, "to", 1) as i32;
            let a = x(0)?;
            match to {
                data_type::BOOL => one(Tensor { shape: a.shape.clone(), v: a.v.iter().map(|&v| f64::from(u8::from(v != 0.0))).collect(), int: true }),
                data_type::INT32 | data_type::INT64 | 2..=5 | 12 | 13 => one(Tensor { shape: a.shape.clone(), v: a.v.iter().map(|v| v.trunc()).collect(), int: true }),
                data_type::FLOAT | data_type::DOUBLE | 10 | 16 => one(Tensor { shape: a.shape.clone(), v: a.v.clone(), int: false }),
                t => fail(node, format!("cast to element type {t} is not supported")),
            }
        }
        "Shape" => {
            let a = x(0)?;
            let r = a.shape.len() as i64;
            let clamp = |v: i64| if v < 0 { (v + r).clamp(0, r) } else { v.clamp(0, r) } as usize;
            let start = clamp(attr_int(node, "start", 0));
            let end = clamp(attr_int(node, "end", r));
            let d: Vec<f64> = a.shape[start..end.max(start)].iter().map(|&d| d as f64).collect();
            one(Tensor::ints(vec![d.len()], d))
        }
        "Size" => one(Tensor::ints(vec![], vec![x(0)?.len() as f64])),
        "Constant" => {
            let a = node.attribute.first().ok_or_else(|| Error::Unsupported("Constant without a value".into()))?;
            match a.name.as_deref() {
                Some("value") => one(Tensor::from_proto(a.t.as_ref().ok_or_else(|| Error::Unsupported("Constant value".into()))?).map_err(|e| Error::Unsupported(format!("Constant: {e}")))?),
                Some("value_float") => one(Tensor::scalar(a.f.unwrap_or(0.0) as f64)),
                Some("value_int") => one(Tensor::ints(vec![], vec![a.i.unwrap_or(0) as f64])),
                Some("value_floats") => one(Tensor::new(vec![a.floats.len()], a.floats.iter().map(|&f| f as f64).collect())),
                Some("value_ints") => one(Tensor::ints(vec![a.ints.len()], a.ints.iter().map(|&f| f as f64).collect())),
                o => fail(node, format!("Constant attribute {o:?} is not supported")),
            }
        }
        "ConstantOfShape" => {
            let shape: Vec<usize> = x(0)?.as_ints()?.into_iter().map(|d| usize::try_from(d).map_err(|_| Error::Unsupported(format!("dimension {d}")))).collect::<Result<_>>()?;
            let (val, int) = match attr(node, "value").and_then(|a| a.t.as_ref()) {
                Some(t) => {
                    let c = Tensor::from_proto(t).map_err(|e| Error::Unsupported(e.to_string()))?;
                    (c.v.first().copied().unwrap_or(0.0), c.int)
                }
                None => (0.0, false),
            };
            let mut t = Tensor::zeros(&shape, int)?;
            t.v.iter_mut().for_each(|v| *v = val);
            one(t)
        }
        "Range" => {
            let (s, l, d) = (x(0)?.v.first().copied().unwrap_or(0.0), x(1)?.v.first().copied().unwrap_or(0.0), x(2)?.v.first().copied().unwrap_or(1.0));
            if d == 0.0 || !(s.is_finite() && l.is_finite() && d.is_finite()) {
                return fail(node, "Range with a zero or non-finite step");
            }
            let n = ((l - s) / d).ceil().max(0.0);
            if n > crate::MAX_ELEMS as f64 {
                return fail(node, "Range too long");
            }
            let v: Vec<f64> = (0..n as usize).map(|i| s + i as f64 * d).collect();
            one(Tensor { shape: vec![v.len()], v, int: x(0)?.int })
        }
        "Reshape" => {
            let a = x(0)?;
            let spec = x(1)?.as_ints()?;
            let allowzero = attr_int(node, "allowzero", 0) != 0;
            let mut shape = Vec::with_capacity(spec.len());
            let mut infer = None;
            for (i, &d) in spec.iter().enumerate() {
                match d {
                    -1 if infer.is_none() => {
                        infer = Some(i);
                        shape.push(1);
                    }
                    0 if !allowzero => shape.push(*a.shape.get(i).ok_or_else(|| Error::Unsupported(format!("Reshape: 0 at {i} beyond the input's rank")))?),
                    d if d >= 0 => shape.push(d as usize),
                    d => return fail(node, format!("Reshape to {spec:?}: dimension {d}")),
                }
            }
            let known = elems(&shape).unwrap_or(0);
            if let Some(i) = infer {
                if known == 0 || a.len() % known != 0 {
                    return fail(node, format!("Reshape of {:?} to {spec:?}", a.shape));
                }
                shape[i] = a.len() / known;
            }
            if elems(&shape) != Some(a.len()) {
                return fail(node, format!("Reshape of {:?} ({} elements) to {shape:?}", a.shape, a.len()));
            }
            one(Tensor { shape, v: a.v.clone(), int: a.int })
        }
        "Flatten" => {
            let a = x(0)?;
            let ax = norm_axis(node, attr_int(node, "axis", 1), a.shape.len() + 1)?;
            let outer: usize = a.shape[..ax.min(a.shape.len())].iter().product();
            one(Tensor { shape: vec![outer, a.len() / outer.max(1)], v: a.v.clone(), int: a.int })
        }
        "Unsqueeze" => {
            let a = x(0)?;
            let axes = axes_of(node, ins, 1)?.ok_or_else(|| Error::Unsupported("Unsqueeze without axes".into()))?;
            let r = a.shape.len() + axes.len();
            let mut ax: Vec<usize> = axes.iter().map(|&v| norm_axis(node, v, r)).collect::<Result<_>>()?;
            ax.sort_unstable();
            let mut shape = a.shape.clone();
            for &i in &ax {
                if i > shape.len() {
                    return fail(node, "axes out of range");
                }
                shape.insert(i, 1);
            }
            one(Tensor { shape, v: a.v.clone(), int: a.int })
        }
        "Squeeze" => {
            let a = x(0)?;
            let shape: Vec<usize> = match axes_of(node, ins, 1)? {
                Some(axes) => {
                    let ax: Vec<usize> = axes.iter().map(|&v| norm_axis(node, v, a.shape.len())).collect::<Result<_>>()?;
                    if ax.iter().any(|&i| a.shape[i] != 1) {
                        return fail(node, format!("Squeeze of a non-1 dimension of {:?}", a.shape));
                    }
                    a.shape.iter().enumerate().filter(|(i, _)| !ax.contains(i)).map(|(_, &d)| d).collect()
                }
                None => a.shape.iter().copied().filter(|&d| d != 1).collect(),
            };
            one(Tensor { shape, v: a.v.clone(), int: a.int })
        }
        "Transpose" => {
            let a = x(0)?;
            let r = a.shape.len();
            let perm: Vec<usize> = match attr_ints(node, "perm") {
                Some(p) => p.iter().map(|&v| norm_axis(node, v, r)).collect::<Result<_>>()?,
                None => (0..r).rev().collect(),
            };
            let mut seen = vec![false; r];
            if perm.len() != r || perm.iter().any(|&p| std::mem::replace(&mut seen[p], true)) {
                return fail(node, format!("perm {perm:?} for rank {r}"));
            }
            let shape: Vec<usize> = perm.iter().map(|&p| a.shape[p]).collect();
            let st = strides(&a.shape);
            let mut v = Vec::with_capacity(a.len());
            let mut c = vec![0usize; r];
            for _ in 0..a.len() {
                v.push(a.v[perm.iter().enumerate().map(|(i, &p)| c[i] * st[p]).sum::<usize>()]);
                for k in (0..r).rev() {
                    c[k] += 1;
                    if c[k] < shape[k] {
                        break;
                    }
                    c[k] = 0;
                }
            }
            one(Tensor { shape, v, int: a.int })
        }
        "Concat" => {
            let parts: Vec<&Tensor> = (0..node.input.len()).map(&x).collect::<Result<_>>()?;
            let first = parts.first().ok_or_else(|| Error::Unsupported("Concat of nothing".into()))?;
            let r = first.shape.len();
            let ax = norm_axis(node, attr_int(node, "axis", 0), r)?;
            let mut shape = first.shape.clone();
            shape[ax] = 0;
            for p in &parts {
                if p.shape.len() != r || (0..r).any(|i| i != ax && p.shape[i] != first.shape[i]) {
                    return fail(node, format!("Concat of {:?} and {:?} on axis {ax}", first.shape, p.shape));
                }
                shape[ax] += p.shape[ax];
            }
            let outer: usize = shape[..ax].iter().product();
            let mut v = Vec::with_capacity(elems(&shape).ok_or_else(|| Error::Unsupported("Concat too large".into()))?);
            for o in 0..outer {
                for p in &parts {
                    let inner: usize = p.shape[ax..].iter().product();
                    v.extend_from_slice(&p.v[o * inner..(o + 1) * inner]);
                }
            }
            one(Tensor { shape, v, int: parts.iter().all(|p| p.int) })
        }
        "Split" => {
            let a = x(0)?;
            let ax = norm_axis(node, attr_int(node, "axis", 0), a.shape.len())?;
            let n = node.output.len().max(1);
            let sizes: Vec<usize> = match attr_ints(node, "split").or(ins.get(1).copied().flatten().map(|t| t.as_ints()).transpose()?) {
                Some(s) => s.into_iter().map(|d| usize::try_from(d).map_err(|_| Error::Unsupported(format!("split size {d}")))).collect::<Result<_>>()?,
                None => {
                    let d = a.shape[ax];
                    let each = d.div_ceil(n);
                    (0..n).map(|i| each.min(d.saturating_sub(i * each))).collect()
                }
            };
            if sizes.len() != n || sizes.iter().sum::<usize>() != a.shape[ax] {
                return fail(node, format!("split {sizes:?} of dimension {}", a.shape[ax]));
            }
            let outer: usize = a.shape[..ax].iter().product();
            let inner: usize = a.shape[ax + 1..].iter().product();
            let mut outs = Vec::new();
            let mut off = 0;
            for &s in &sizes {
                let mut shape = a.shape.clone();
                shape[ax] = s;
                let mut v = Vec::with_capacity(outer * s * inner);
                for o in 0..outer {
                    let base = o * a.shape[ax] * inner + off * inner;
                    v.extend_from_slice(&a.v[base..base + s * inner]);
                }
                off += s;
                outs.push(Tensor { shape, v, int: a.int });
            }
            Ok(outs)
        }
        "Slice" => {
            let a = x(0)?;
            let r = a.shape.len();
            let (starts, ends, axes, steps) = if let Some(s) = attr_ints(node, "starts") {
                (s, attr_ints(node, "ends").unwrap_or_default(), attr_ints(node, "axes"), None)
            } else {
                (x(1)?.as_ints()?, x(2)?.as_ints()?, ins.get(3).copied().flatten().map(|t| t.as_ints()).transpose()?, ins.get(4).copied().flatten().map(|t| t.as_ints()).transpose()?)
            };
            let axes: Vec<usize> = match axes {
                Some(a) => a.iter().map(|&v| norm_axis(node, v, r)).collect::<Result<_>>()?,
                None => (0..starts.len()).collect(),
            };
            let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
            if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
                return fail(node, "starts, ends, axes and steps of different lengths");
            }
            // per axis: the list of source indices
            let mut pick: Vec<Vec<usize>> = a.shape.iter().map(|&d| (0..d).collect()).collect();
            for i in 0..starts.len() {
                let d = a.shape[axes[i]] as i64;
                let st = steps[i];
                if st == 0 {
                    return fail(node, "step 0");
                }
                let cl = |v: i64, lo: i64, hi: i64| {
                    let v = if v < 0 { v + d } else { v };
                    v.clamp(lo, hi)
                };
                let mut idx = Vec::new();
                if st > 0 {
                    let (s, e) = (cl(starts[i], 0, d), cl(ends[i], 0, d));
                    let mut k = s;
                    while k < e {
                        idx.push(k as usize);
                        let Some(n) = k.checked_add(st) else { break };
                        k = n;
                    }
                } else {
                    let (s, e) = (cl(starts[i], -1, d - 1), cl(ends[i], -1, d - 1));
                    let mut k = s;
                    while k > e {
                        idx.push(k as usize);
                        let Some(n) = k.checked_add(st) else { break };
                        k = n;
                    }
                }
                pick[axes[i]] = idx;
            }
            gather_axes(a, &pick)
        }
        "Gather" => {
            let (a, idx) = (x(0)?, x(1)?);
            let ax = norm_axis(node, attr_int(node, "axis", 0), a.shape.len())?;
            let d = a.shape[ax];
            let outer: usize = a.shape[..ax].iter().product();
            let inner: usize = a.shape[ax + 1..].iter().product();
            let mut shape = a.shape[..ax].to_vec();
            shape.extend_from_slice(&idx.shape);
            shape.extend_from_slice(&a.shape[ax + 1..]);
            let n = elems(&shape).ok_or_else(|| Error::Unsupported("Gather too large".into()))?;
            let mut v = Vec::with_capacity(n);
            let ids = idx.as_ints()?;
            for o in 0..outer {
                for &i in &ids {
                    let i = if i < 0 { i + d as i64 } else { i };
                    if i < 0 || i as usize >= d {
                        return fail(node, format!("index {i} outside 0..{d}"));
                    }
                    let base = (o * d + i as usize) * inner;
                    v.extend_from_slice(&a.v[base..base + inner]);
                }
            }
            one(Tensor { shape, v, int: a.int })
        }
        "GatherElements" => {
            // out[i] = data[i with its axis coordinate replaced by index[i]]
            let (a, idx) = (x(0)?, x(1)?);
            let r = a.shape.len();
            if idx.shape.len() != r {
                return fail(node, format!("indices of rank {} for data of rank {r}", idx.shape.len()));
            }
            let ax = norm_axis(node, attr_int(node, "axis", 0), r)?;
            if (0..r).any(|k| k != ax && idx.shape[k] > a.shape[k]) {
                return fail(node, format!("indices of shape {:?} exceed data of shape {:?}", idx.shape, a.shape));
            }
            let (sa, si) = (strides(&a.shape), strides(&idx.shape));
            let d = a.shape[ax] as i64;
            let ids = idx.as_ints()?;
            let mut v = Vec::with_capacity(ids.len());
            for (flat, &i) in ids.iter().enumerate() {
                let i = if i < 0 { i + d } else { i };
                if i < 0 || i >= d {
                    return fail(node, format!("index {i} outside 0..{d}"));
                }
                let mut off = 0usize;
                for k in 0..r {
                    let c = if k == ax { i as usize } else { (flat / si[k]) % idx.shape[k] };
                    off += c * sa[k];
                }
                v.push(a.v[off]);
            }
            one(Tensor { shape: idx.shape.clone(), v, int: a.int })
        }
        "Expand" => {
            let a = x(0)?;
            let spec: Vec<usize> = x(1)?.as_ints()?.into_iter().map(|d| usize::try_from(d).map_err(|_| Error::Unsupported(format!("dimension {d}")))).collect::<Result<_>>()?;
            let shape = broadcast_shape(&a.shape, &spec).ok_or_else(|| Error::Unsupported(format!("Expand of {:?} to {spec:?}", a.shape)))?;
            let idx = broadcast_index(&a.shape, &shape).ok_or_else(|| Error::Unsupported("Expand".into()))?;
            one(Tensor { shape, v: idx.iter().map(|&i| a.v[i]).collect(), int: a.int })
        }
        "Where" => {
            let (c, a, b) = (x(0)?, x(1)?, x(2)?);
            let s1 = broadcast_shape(&c.shape, &a.shape).ok_or_else(|| Error::Unsupported("Where: shapes".into()))?;
            let shape = broadcast_shape(&s1, &b.shape).ok_or_else(|| Error::Unsupported("Where: shapes".into()))?;
            let (ic, ia, ib) = (broadcast_index(&c.shape, &shape), broadcast_index(&a.shape, &shape), broadcast_index(&b.shape, &shape));
            let (ic, ia, ib) = (ic.ok_or_else(|| Error::Unsupported("Where".into()))?, ia.ok_or_else(|| Error::Unsupported("Where".into()))?, ib.ok_or_else(|| Error::Unsupported("Where".into()))?);
            let v = (0..ic.len()).map(|i| if c.v[ic[i]] != 0.0 { a.v[ia[i]] } else { b.v[ib[i]] }).collect();
            one(Tensor { shape, v, int: a.int && b.int })
        }
        "Add" => one(binary(node, x(0)?, x(1)?, |a, b| a + b, x(0)?.int && x(1)?.int)?),
        "Sub" => one(binary(node, x(0)?, x(1)?, |a, b| a - b, x(0)?.int && x(1)?.int)?),
        "Mul" => one(binary(node, x(0)?, x(1)?, |a, b| a * b, x(0)?.int && x(1)?.int)?),
        "Div" => {
            let int = x(0)?.int && x(1)?.int;
            one(binary(node, x(0)?, x(1)?, |a, b| if int { if b == 0.0 { 0.0 } else { (a / b).trunc() } } else { a / b }, int)?)
        }
        "Pow" => one(binary(node, x(0)?, x(1)?, |a, b| if b == 2.0 { a * a } else if b == 3.0 { a * a * a } else { a.powf(b) }, x(0)?.int)?),
        "Max" => one(binary(node, x(0)?, x(1)?, f64::max, x(0)?.int && x(1)?.int)?),
        "Min" => one(binary(node, x(0)?, x(1)?, f64::min, x(0)?.int && x(1)?.int)?),
        "Equal" => one(binary(node, x(0)?, x(1)?, |a, b| f64::from(u8::from(a == b)), true)?),
        "Less" => one(binary(node, x(0)?, x(1)?, |a, b| f64::from(u8::from(a < b)), true)?),
        "Greater" => one(binary(node, x(0)?, x(1)?, |a, b| f64::from(u8::from(a > b)), true)?),
        "GreaterOrEqual" => one(binary(node, x(0)?, x(1)?, |a, b| f64::from(u8::from(a >= b)), true)?),
        "LessOrEqual" => one(binary(node, x(0)?, x(1)?, |a, b| f64::from(u8::from(a <= b)), true)?),
        "And" => one(binary(node, x(0)?, x(1)?, |a, b| f64::from(u8::from(a != 0.0 && b != 0.0)), true)?),
        "Xor" => one(binary(node, x(0)?, x(1)?, |a, b| f64::from(u8::from((a != 0.0) != (b != 0.0))), true)?),
        "IsNaN" => one(Tensor { shape: x(0)?.shape.clone(), v: x(0)?.v.iter().map(|a| f64::from(u8::from(a.is_nan()))).collect(), int: true }),
        "IsInf" => one(Tensor { shape: x(0)?.shape.clone(), v: x(0)?.v.iter().map(|a| f64::from(u8::from(a.is_infinite()))).collect(), int: true }),
        "Or" => one(binary(node, x(0)?, x(1)?, |a, b| f64::from(u8::from(a != 0.0 || b != 0.0)), true)?),
        "Not" => one(unary(x(0)?, |a| f64::from(u8::from(a == 0.0)))),
        "Neg" => one(unary(x(0)?, |a| -a)),
        "Abs" => one(unary(x(0)?, f64::abs)),
        // in float32, as the exporter's reference runs it: torch's relative-position
        // buckets (T5, MPNet) truncate log(n/e)/log(m/e)·k, whose exact value is an
        // integer at n = e·(m/e)^(j/k), so f64 could land on the other side
        "Log" => one(unary(x(0)?, |a| f64::from((a as f32).ln()))),
        "CumSum" => {
            // running sum along an axis (torch.cumsum): RoBERTa's and MPNet's position
            // ids from the client's ids
            let a = x(0)?;
            let r = a.shape.len();
            let ax = norm_axis(node, x(1)?.as_ints()?.first().copied().ok_or_else(|| Error::Unsupported("CumSum without an axis".into()))?, r)?;
            let (exclusive, reverse) = (attr_int(node, "exclusive", 0) != 0, attr_int(node, "reverse", 0) != 0);
            let d = a.shape[ax];
            let inner: usize = a.shape[ax + 1..].iter().product();
            let outer: usize = a.shape[..ax].iter().product();
            let mut v = vec![0.0; a.v.len()];
            for o in 0..outer {
                for i in 0..inner {
                    let mut acc = 0.0;
                    for k in 0..d {
                        let k = if reverse { d - 1 - k } else { k };
                        let at = (o * d + k) * inner + i;
                        if exclusive {
                            v[at] = acc;
                            acc += a.v[at];
                        } else {
                            acc += a.v[at];
                            v[at] = acc;
                        }
                    }
                }
            }
            one(Tensor { shape: a.shape.clone(), v, int: a.int })
        }
        "Sqrt" => one(unary(x(0)?, f64::sqrt)),
        "Exp" => one(unary(x(0)?, f64::exp)),
        "Reciprocal" => one(unary(x(0)?, |a| 1.0 / a)),
        "Erf" => one(unary(x(0)?, erf)),
        "Tanh" => one(unary(x(0)?, f64::tanh)),
        "Relu" => one(unary(x(0)?, |a| a.max(0.0))),
        "Sigmoid" => one(unary(x(0)?, |a| 1.0 / (1.0 + (-a).exp()))),
        "Clip" => {
            let a = x(0)?;
            let lo = ins.get(1).copied().flatten().and_then(|t| t.v.first().copied()).unwrap_or(attr_float(node, "min", f64::NEG_INFINITY));
            let hi = ins.get(2).copied().flatten().and_then(|t| t.v.first().copied()).unwrap_or(attr_float(node, "max", f64::INFINITY));
            one(unary(a, |v| v.max(lo).min(hi)))
        }
        "ReduceL2" => {
            let sq = unary(x(0)?, |v| v * v);
            let mut n2 = node.clone();
            n2.op_type = Some("ReduceSum".into());
            let mut ins2: Vec<Option<&Tensor>> = ins.to_vec();
            ins2[0] = Some(&sq);
            let mut r = eval_node(&n2, &ins2)?;
            r[0].v.iter_mut().for_each(|v| *v = v.sqrt());
            r[0].int = false;
            Ok(r)
        }
        "ReduceMean" | "ReduceSum" => {
            let a = x(0)?;
            let r = a.shape.len();
            let keep = attr_int(node, "keepdims", 1) != 0;
            let axes: Vec<usize> = match axes_of(node, ins, 1)? {
                Some(ax) if !ax.is_empty() => ax.iter().map(|&v| norm_axis(node, v, r)).collect::<Result<_>>()?,
                _ if attr_int(node, "noop_with_empty_axes", 0) != 0 => return one(a.clone()),
                _ => (0..r).collect(),
            };
            let out_full: Vec<usize> = a.shape.iter().enumerate().map(|(i, &d)| if axes.contains(&i) { 1 } else { d }).collect();
            let n_out = elems(&out_full).unwrap_or(0);
            let mut v = vec![0.0; n_out];
            let st_out = strides(&out_full);
            let mut c = vec![0usize; r];
            for &val in &a.v {
                let o: usize = (0..r).map(|i| if axes.contains(&i) { 0 } else { c[i] * st_out[i] }).sum();
                v[o] += val;
                for k in (0..r).rev() {
                    c[k] += 1;
                    if c[k] < a.shape[k] {
                        break;
                    }
                    c[k] = 0;
                }
            }
            if op == "ReduceMean" {
                let cnt: usize = axes.iter().map(|&i| a.shape[i]).product();
                v.iter_mut().for_each(|x| *x /= cnt.max(1) as f64);
            }
            let shape = if keep { out_full } else { a.shape.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d).collect() };
            one(Tensor { shape, v, int: a.int && op == "ReduceSum" })
        }
        "Softmax" => {
            let a = x(0)?;
            let ax = norm_axis(node, attr_int(node, "axis", -1), a.shape.len())?;
            if ax + 1 != a.shape.len() {
                return fail(node, "softmax over an axis other than the last");
            }
            let len = a.shape[ax].max(1);
            let mut v = a.v.clone();
            for row in v.chunks_mut(len) {
                let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let s: f64 = row.iter().map(|&x| (x - m).exp()).sum();
                row.iter_mut().for_each(|x| *x = (*x - m).exp() / s);
            }
            one(Tensor::new(a.shape.clone(), v))
        }
        "LayerNormalization" => {
            let a = x(0)?;
            let ax = norm_axis(node, attr_int(node, "axis", -1), a.shape.len())?;
            if ax + 1 != a.shape.len() {
                return fail(node, "LayerNormalization over more than the last axis");
            }
            let eps = attr_float(node, "epsilon", 1e-5);
            let len = a.shape[ax].max(1);
            let g = x(1)?;
            let b = ins.get(2).copied().flatten();
            let mut v = a.v.clone();
            for row in v.chunks_mut(len) {
                let m = row.iter().sum::<f64>() / len as f64;
                let var = row.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / len as f64;
                let r = 1.0 / (var + eps).sqrt();
                for (j, x) in row.iter_mut().enumerate() {
                    *x = (*x - m) * r * g.v[j % g.len().max(1)] + b.map_or(0.0, |b| b.v[j % b.len().max(1)]);
                }
            }
            one(Tensor::new(a.shape.clone(), v))
        }
        "MatMul" => one(matmul(node, x(0)?, x(1)?)?),
        "Gemm" => {
            let (a, b) = (x(0)?, x(1)?);
            if a.shape.len() != 2 || b.shape.len() != 2 {
                return fail(node, "Gemm of non-matrices");
            }
            let at = if attr_int(node, "transA", 0) != 0 { transpose2(a) } else { a.clone() };
            let bt = if attr_int(node, "transB", 0) != 0 { transpose2(b) } else { b.clone() };
            let (alpha, beta) = (attr_float(node, "alpha", 1.0), attr_float(node, "beta", 1.0));
            let mut y = matmul(node, &at, &bt)?;
            y.v.iter_mut().for_each(|v| *v *= alpha);
            if let Some(c) = ins.get(2).copied().flatten() {
                let cb = unary(c, |v| v * beta);
                y = binary(node, &y, &cb, |a, b| a + b, false)?;
            }
            one(y)
        }
        o => fail(node, format!("operator {o} cannot be evaluated")),
    }
}

pub(crate) fn transpose2(a: &Tensor) -> Tensor {
    let (r, c) = (a.shape[0], a.shape[1]);
    let mut v = vec![0.0; r * c];
    for i in 0..r {
        for j in 0..c {
            v[j * r + i] = a.v[i * c + j];
        }
    }
    Tensor { shape: vec![c, r], v, int: a.int }
}

/// Picks, along every axis, the listed indices (Slice).
fn gather_axes(a: &Tensor, pick: &[Vec<usize>]) -> Result<Vec<Tensor>> {
    let shape: Vec<usize> = pick.iter().map(|p| p.len()).collect();
    let n = elems(&shape).ok_or_else(|| Error::Unsupported("Slice too large".into()))?;
    let st = strides(&a.shape);
    let mut v = Vec::with_capacity(n);
    let r = shape.len();
    let mut c = vec![0usize; r];
    for _ in 0..n {
        v.push(a.v[(0..r).map(|i| pick[i][c[i]] * st[i]).sum::<usize>()]);
        for k in (0..r).rev() {
            c[k] += 1;
            if c[k] < shape[k] {
                break;
            }
            c[k] = 0;
        }
    }
    Ok(vec![Tensor { shape, v, int: a.int }])
}

/// numpy's matmul (batch dimensions broadcast; 1-D operands promoted).
fn matmul(node: &NodeProto, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (mut sa, mut sb) = (a.shape.clone(), b.shape.clone());
    let (va, vb) = (sa.len() == 1, sb.len() == 1);
    if va {
        sa.insert(0, 1);
    }
    if vb {
        sb.push(1);
    }
    if sa.len() < 2 || sb.len() < 2 {
        return fail(node, "MatMul of scalars");
    }
    let (m, k) = (sa[sa.len() - 2], sa[sa.len() - 1]);
    let (k2, n) = (sb[sb.len() - 2], sb[sb.len() - 1]);
    if k != k2 {
        return fail(node, format!("MatMul of {:?} and {:?}", a.shape, b.shape));
    }
    let ba = &sa[..sa.len() - 2];
    let bb = &sb[..sb.len() - 2];
    let batch = broadcast_shape(ba, bb).ok_or_else(|| Error::Unsupported(format!("MatMul batch dims {ba:?} and {bb:?}")))?;
    let ia = broadcast_index(ba, &batch).ok_or_else(|| Error::Unsupported("MatMul".into()))?;
    let ib = broadcast_index(bb, &batch).ok_or_else(|| Error::Unsupported("MatMul".into()))?;
    let mut shape = batch.clone();
    shape.extend([m, n]);
    let total = elems(&shape).ok_or_else(|| Error::Unsupported("MatMul too large".into()))?;
    let mut v = vec![0.0; total];
    for (bi, (&i, &j)) in ia.iter().zip(&ib).enumerate() {
        let (pa, pb) = (&a.v[i * m * k..(i + 1) * m * k], &b.v[j * k * n..(j + 1) * k * n]);
        let out = &mut v[bi * m * n..(bi + 1) * m * n];
        for r in 0..m {
            for t in 0..k {
                let x = pa[r * k + t];
                if x != 0.0 {
                    for c in 0..n {
                        out[r * n + c] += x * pb[t * n + c];
                    }
                }
            }
        }
    }
    if va {
        shape.remove(shape.len() - 2);
    }
    if vb {
        shape.pop();
    }
    Ok(Tensor { shape, v, int: a.int && b.int })
}

/// Serde for f64 vectors that JSON carries exactly, infinities and NaN
/// included: finite values as numbers, the others as `"inf"`, `"-inf"`,
/// `"nan"`. Anything else is refused.
mod f64_json {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum F {
        N(f64),
        S(String),
    }

    pub fn serialize<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut q = s.serialize_seq(Some(v.len()))?;
        for &x in v {
            if x.is_finite() {
                q.serialize_element(&x)?;
            } else {
                q.serialize_element(if x.is_nan() { "nan" } else if x > 0.0 { "inf" } else { "-inf" })?;
            }
        }
        q.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        Vec::<F>::deserialize(d)?
            .into_iter()
            .map(|f| match f {
                F::N(x) => Ok(x),
                F::S(s) => match s.as_str() {
                    "inf" => Ok(f64::INFINITY),
                    "-inf" => Ok(f64::NEG_INFINITY),
                    "nan" => Ok(f64::NAN),
                    o => Err(serde::de::Error::custom(format!("'{o}' is not a number"))),
                },
            })
            .collect()
    }
}
