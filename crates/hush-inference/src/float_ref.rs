//! A float (f64) executor of the same model description: the comparison
//! point for onnxruntime (model import) and for fixed-point error.

use crate::model::{Model, Op};
use crate::{Error, Result};

fn conv(x: &[f64], s: &[usize], w: &[f32], ws: &[usize], b: &[f32], stride: [usize; 2], pads: [usize; 4], os: &[usize]) -> Vec<f64> {
    let (ci, h, wd) = (s[0], s[1], s[2]);
    let (co, kh, kw) = (ws[0], ws[2], ws[3]);
    let (oh, ow) = (os[1], os[2]);
    let mut y = vec![0f64; co * oh * ow];
    for o in 0..co {
        for oy in 0..oh {
            for ox in 0..ow {
                let mut acc = b[o] as f64;
                for c in 0..ci {
                    for ky in 0..kh {
                        let iy = (oy * stride[0] + ky) as isize - pads[0] as isize;
                        if iy < 0 || iy >= h as isize {
                            continue;
                        }
                        for kx in 0..kw {
                            let ix = (ox * stride[1] + kx) as isize - pads[1] as isize;
                            if ix < 0 || ix >= wd as isize {
                                continue;
                            }
                            acc += w[((o * ci + c) * kh + ky) * kw + kx] as f64 * x[(c * h + iy as usize) * wd + ix as usize];
                        }
                    }
                }
                y[(o * oh + oy) * ow + ox] = acc;
            }
        }
    }
    y
}

/// Runs the model in f64; returns every value like [`crate::reference::run_traced`].
pub fn run_traced(model: &Model, x: &[f64]) -> Result<Vec<Vec<f64>>> {
    if !model.has_weights {
        return Err(Error::Config("the float executor needs the model weights".into()));
    }
    if x.len() != model.input_len() {
        return Err(Error::Input(format!("input has {} values, the model expects {}", x.len(), model.input_len())));
    }
    let mut vals: Vec<Vec<f64>> = vec![x.to_vec()];
    for n in &model.nodes {
        let s = model.shape(n.inputs[0]).to_vec();
        let a = &vals[n.inputs[0]];
        let y = match &n.op {
            Op::Conv { weight, bias, stride, pads } => conv(a, &s, &weight.data, &weight.shape, &bias.data, *stride, *pads, &n.shape),
            Op::Dense { weight, bias } => {
                let ni = weight.shape[1];
                (0..weight.shape[0]).map(|o| bias.data[o] as f64 + (0..ni).map(|i| weight.data[o * ni + i] as f64 * a[i]).sum::<f64>()).collect()
            }
            Op::Scale { weight, bias } => {
                let inner = a.len() / s[0];
                a.iter().enumerate().map(|(i, v)| weight.data[i / inner] as f64 * v + bias.data[i / inner] as f64).collect()
            }
            Op::Add => a.iter().zip(&vals[n.inputs[1]]).map(|(x, y)| x + y).collect(),
            Op::AddConst { value } => a.iter().zip(&value.data).map(|(x, c)| x + *c as f64).collect(),
            Op::Relu => a.iter().map(|v| v.max(0.0)).collect(),
            Op::MaxPool { kernel, stride, pads } => {
                let (offs, idx) = crate::fixed::pool_windows(&s, *kernel, *stride, *pads, &n.shape);
                offs.windows(2).map(|w| idx[w[0] as usize..w[1] as usize].iter().map(|&i| a[i as usize]).fold(f64::NEG_INFINITY, f64::max)).collect()
            }
            Op::AvgPool { kernel, stride, pads, count_include_pad } => {
                let (offs, idx) = crate::fixed::pool_windows(&s, *kernel, *stride, *pads, &n.shape);
                offs.windows(2)
                    .map(|w| {
                        let sum: f64 = idx[w[0] as usize..w[1] as usize].iter().map(|&i| a[i as usize]).sum();
                        let cnt = if *count_include_pad { kernel[0] * kernel[1] } else { (w[1] - w[0]) as usize };
                        sum / cnt.max(1) as f64
                    })
                    .collect()
            }
            Op::Reshape => a.clone(),
            Op::Concat { axis } => {
                let shapes: Vec<&[usize]> = n.inputs.iter().map(|&i| model.shape(i)).collect();
                let outer: usize = shapes[0][..*axis].iter().product();
                let inner: usize = shapes[0][axis + 1..].iter().product();
                let mut out = Vec::with_capacity(n.shape.iter().product());
                for o in 0..outer {
                    for (k, &i) in n.inputs.iter().enumerate() {
                        let blk = shapes[k][*axis] * inner;
                        out.extend_from_slice(&vals[i][o * blk..(o + 1) * blk]);
                    }
                }
                out
            }
        };
        vals.push(y);
    }
    Ok(vals)
}

/// The float logits.
pub fn run(model: &Model, x: &[f64]) -> Result<Vec<f64>> {
    let mut v = run_traced(model, x)?;
    Ok(std::mem::take(&mut v[model.output]))
}
