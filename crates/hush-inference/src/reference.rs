//! The plaintext fixed-point reference executor: the bit-exact
//! specification of what a secure run computes (see [`crate::fixed`] for
//! where truncation happens and how it rounds). Secure runs are checked
//! against it element by element.

use crate::fixed::{concat_into, relu, trunc};
use crate::plan::{Plan, StepKind};
use crate::{Error, Result};

/// Runs the plan on an encoded input; returns every value (value 0 = input,
/// value i+1 = output of step i). Needs the weights (a server-side plan).
pub fn run_traced(plan: &Plan, x: &[u64]) -> Result<Vec<Vec<u64>>> {
    if !plan.has_weights {
        return Err(Error::Config("the reference executor needs the model weights".into()));
    }
    if x.len() != plan.input_len {
        return Err(Error::Input(format!("input has {} values, the model expects {}", x.len(), plan.input_len)));
    }
    let cfg = plan.cfg;
    let m = cfg.mask();
    let mut vals: Vec<Vec<u64>> = vec![x.to_vec()];
    for st in &plan.steps {
        let a = &vals[st.inputs[0]];
        let y: Vec<u64> = match &st.kind {
            StepKind::Linear { op, bias, out_len, .. } => {
                let op = op.as_ref().expect("server plan");
                let mut y = vec![0u64; *out_len];
                op.apply(cfg.bits, a, &mut y);
                y.iter().zip(bias.iter()).map(|(v, b)| trunc(&cfg, v.wrapping_add(*b) & m, cfg.frac)).collect()
            }
            StepKind::AvgPool { offs, idx, consts } => offs
                .windows(2)
                .zip(consts)
                .map(|(w, c)| {
                    let s = idx[w[0] as usize..w[1] as usize].iter().fold(0u64, |s, &i| s.wrapping_add(a[i as usize]));
                    trunc(&cfg, s.wrapping_mul(*c) & m, cfg.frac)
                })
                .collect(),
            StepKind::AddConst { c } => a.iter().zip(c).map(|(x, c)| x.wrapping_add(*c) & m).collect(),
            StepKind::Add => {
                let b = &vals[st.inputs[1]];
                a.iter().zip(b).map(|(x, y)| x.wrapping_add(*y) & m).collect()
            }
            StepKind::Relu => a.iter().map(|&v| relu(&cfg, v)).collect(),
            StepKind::MaxPool { offs, idx } => offs
                .windows(2)
                .map(|w| {
                    let mut cand: Vec<u64> = idx[w[0] as usize..w[1] as usize].iter().map(|&i| a[i as usize]).collect();
                    while cand.len() > 1 {
                        let mut next = Vec::with_capacity(cand.len().div_ceil(2));
                        for p in cand.chunks(2) {
                            if p.len() == 2 {
                                // max(a, b) = b + ReLU(a − b) over the ring
                                next.push(p[1].wrapping_add(relu(&cfg, p[0].wrapping_sub(p[1]) & m)) & m);
                            } else {
                                next.push(p[0]);
                            }
                        }
                        cand = next;
                    }
                    cand[0]
                })
                .collect(),
            StepKind::Reshape => a.clone(),
            StepKind::Concat { axis, shapes } => {
                let mut out = vec![0u64; st.out_len];
                let parts: Vec<&[u64]> = st.inputs.iter().map(|&i| vals[i].as_slice()).collect();
                let sh: Vec<&[usize]> = shapes.iter().map(|s| s.as_slice()).collect();
                concat_into(&sh, *axis, &parts, &mut out);
                out
            }
        };
        vals.push(y);
    }
    Ok(vals)
}

/// The reference logits (ring elements) of an encoded input.
pub fn run(plan: &Plan, x: &[u64]) -> Result<Vec<u64>> {
    let mut v = run_traced(plan, x)?;
    Ok(std::mem::take(&mut v[plan.output]))
}

/// Encodes `x`, runs the reference and decodes the logits.
pub fn run_f64(plan: &Plan, x: &[f64]) -> Result<Vec<f64>> {
    let q = plan.encode_input(x)?;
    Ok(plan.decode(&run(plan, &q)?))
}
