//! The HE linear layers (Cheetah, [`hush_rlwe::cheetah`]) for the
//! inference engine's linear steps: the public shape of a step for either
//! party (the client from the architecture it received, the server from
//! its compiled op) and one layer on shares. Not yet reachable from
//! `--mode`: this is the piece the `interactive` and `silent` modes will
//! call in place of the module-dealt [`crate::linear`] path.
//!
//! y = W·x + bias over Z_2^ℓ, x = x_C + x_S: the HE protocol gives
//! y_C = W·x − r_S to the client and r_S to the server; the server adds the
//! bias to its share; truncation follows in the nonlinear layer as today.

use crate::model::{Model, Op};
use crate::{Error, Result};
use hush_rlwe::cheetah::{HeClient, HeServer, Shape};
use hush_tee::linear_deal::LinearOp;
use hush_transport::Channel;

/// The HE shape of a server-side op (Conv and Dense; a per-channel Scale —
/// an unfolded BatchNorm — has no HE encoding yet and is an error).
pub fn shape_of_op(op: &LinearOp) -> Result<Shape> {
    match op {
        LinearOp::Conv { c_in, h, w, c_out, kh, kw, stride, pads, .. } => Ok(Shape::Conv {
            c_in: *c_in as usize,
            h: *h as usize,
            w: *w as usize,
            c_out: *c_out as usize,
            kh: *kh as usize,
            kw: *kw as usize,
            stride: [stride[0] as usize, stride[1] as usize],
            pads: pads.map(|p| p as usize),
        }),
        LinearOp::Dense { n_in, n_out, .. } => Ok(Shape::Fc { n_in: *n_in as usize, n_out: *n_out as usize }),
        LinearOp::Scale { .. } => Err(Error::Config("HE linear layers: per-channel Scale (unfolded BatchNorm) is not supported; fold it into the conv".into())),
    }
}

/// The server's weights of an op (ℓ-bit ring elements, in the layout [`Shape`] expects).
pub fn weights_of(op: &LinearOp) -> &[u64] {
    match op {
        LinearOp::Conv { weight, .. } | LinearOp::Dense { weight, .. } | LinearOp::Scale { weight, .. } => weight,
    }
}

/// The HE shape of node `i` from the public architecture (what the client has).
pub fn shape_of_node(model: &Model, i: usize) -> Result<Shape> {
    let n = model.nodes.get(i).ok_or_else(|| Error::Model(format!("no node {i}")))?;
    let in_shape = model.shape(n.inputs[0]);
    match &n.op {
        Op::Conv { weight, stride, pads, .. } => {
            let s = &weight.shape;
            Ok(Shape::Conv { c_in: s[1], h: in_shape[1], w: in_shape[2], c_out: s[0], kh: s[2], kw: s[3], stride: *stride, pads: *pads })
        }
        Op::Dense { .. } => Ok(Shape::Fc { n_in: in_shape.iter().product(), n_out: n.shape.iter().product() }),
        Op::Scale { .. } => Err(Error::Model(format!("node '{}': Scale has no HE encoding yet", n.name))),
        other => Err(Error::Model(format!("node '{}': {} is not a weighted linear layer", n.name, other.kind()))),
    }
}

fn he(e: hush_rlwe::Error) -> Error {
    match e {
        hush_rlwe::Error::Transport(t) => Error::Transport(t),
        hush_rlwe::Error::Malformed { .. } | hush_rlwe::Error::Mismatch(_) => Error::Protocol(e.to_string()),
        other => Error::Config(other.to_string()),
    }
}

/// Client side of one linear step: its share of W·x (bias is the server's).
pub fn client(he_c: &mut HeClient, ch: &mut dyn Channel, shape: &Shape, x_c: &[u64]) -> Result<Vec<u64>> {
    he_c.linear(ch, shape, x_c).map_err(he)
}

/// Server side of one linear step: its share of W·x + bias.
pub fn server(he_s: &mut HeServer, ch: &mut dyn Channel, op: &LinearOp, bias: &[u64], bits: u32, x_s: &[u64]) -> Result<Vec<u64>> {
    let shape = shape_of_op(op)?;
    let mut y = he_s.linear(ch, &shape, weights_of(op), x_s).map_err(he)?;
    let m = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
    if bias.len() != y.len() {
        return Err(Error::Model(format!("bias of {} elements for {} outputs", bias.len(), y.len())));
    }
    for (v, b) in y.iter_mut().zip(bias) {
        *v = v.wrapping_add(*b) & m;
    }
    Ok(y)
}
