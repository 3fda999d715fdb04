//! The HE linear layers (Cheetah, [`hush_rlwe::cheetah`]) for the
//! inference engine's linear steps in the `interactive` and `silent`
//! modes: the public shape of a step for either party (the client from the
//! architecture it received, the server from its compiled op), one layer
//! on shares, and [`HeLinear`], a party's HE session with the shapes of
//! every linear step, which [`crate::engine::run`] calls in place of the
//! module-dealt [`crate::linear`] path.
//!
//! ## What each host sees in the HE modes, and why it is safe
//! An inference in `interactive`/`silent` mode is a sequence of two kinds
//! of sub-protocol on additive shares over Z_2^ℓ, each fed only with shares
//! that are uniform to the other party:
//! * **HE linear layers** (this module, [`hush_rlwe::cheetah`]): the server
//!   sees RLWE ciphertexts under the client's key (pseudorandom under RLWE
//!   at the HE standard's 128-bit parameters); the client sees, after
//!   decryption, y_C = W·x − r_S with r_S the server's fresh uniform
//!   output share, plus ciphertext noise flooded by 2^κ (κ = 64) beyond its
//!   public worst-case bound — statistically independent of W given y_C
//!   (the flooding argument and its χ² test are in `hush_rlwe::cheetah`).
//! * **cf2 comparisons** ([`hush_2pc::cf2`], [`crate::engine::Cf2Nonlinear`]):
//!   each side's view is simulated from its input share and output share
//!   (OT security of the COT source; fresh ROTs, triples and output masks
//!   for every leaf, AND and mux — see that module's view argument).
//!
//! Every output share a sub-protocol hands on is re-randomised by the
//! other party's fresh randomness (r_S here, cf2's output masks), so the
//! sequential composition of semi-honest sub-protocols is simulatable from
//! each party's input and output: the client learns the logits (its
//! output) and the public architecture, the server learns nothing.
//! **What the modes trust.** `interactive`: nothing beyond the hardness of
//! RLWE and the OT extension's assumptions (Ferret: LPN with regular noise
//! at the sets in `hush_correlations::lpn`). `silent`: the same for the HE
//! part, but the COTs come from the parties' modules (seed agreement bound
//! to the transcript), so the cf2 part rests on each module keeping its
//! correlations from its host — on these machines the modules are
//! **simulated — gives no hardware protection**. Semi-honest parties in
//! both; a malicious client is a later issue (CRISP).
//! Tests that play the curious party: the flooding test and the
//! server-view test in `hush-rlwe`, the cf2 receiver-view test in
//! `hush-2pc` (both fail against deliberately broken builds).
//!
//! y = W·x + bias over Z_2^ℓ, x = x_C + x_S: the HE protocol gives
//! y_C = W·x − r_S to the client and r_S to the server; the server adds the
//! bias to its share; truncation follows in the nonlinear layer — in the
//! `cf2` family inside the next ReLU when that ReLU alone reads the layer,
//! also across a residual Add or a MaxPool ([`crate::engine`]'s
//! `Pending`: results are the reference's up to the one faithful
//! truncation).

use crate::model::{Model, Op};
use crate::plan::{Plan, StepKind};
use crate::{Error, Result};
use hush_rlwe::cheetah::{HeClient, HeServer, Shape};
use hush_tee::linear_deal::LinearOp;
use hush_transport::Channel;

/// The HE shape of a per-channel Scale (an unfolded BatchNorm) over
/// `channels` × `inner` elements: a 1×1 convolution of `channels` input and
/// output channels over a `inner` × 1 image whose kernel is diagonal
/// ([`weights_of`] places the scales on the diagonal). Costs a C×C
/// convolution instead of C multiplications — models should fold BatchNorm
/// into the preceding convolution (the ONNX importer, `hush import`, does).
fn scale_shape(channels: usize, inner: usize) -> Shape {
    Shape::Conv { c_in: channels, h: inner, w: 1, c_out: channels, kh: 1, kw: 1, stride: [1, 1], pads: [0; 4] }
}

/// The HE shape of a server-side op (Conv, Dense, and a per-channel Scale
/// as a diagonal 1×1 convolution).
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
        LinearOp::Scale { channels, inner, .. } => Ok(scale_shape(*channels as usize, *inner as usize)),
    }
}

/// The server's weights of an op (ℓ-bit ring elements, in the layout
/// [`Shape`] expects; a Scale's on the diagonal of its 1×1 kernel).
/// (An owned diagonal is the caller's to zeroize.)
pub fn weights_of(op: &LinearOp) -> std::borrow::Cow<'_, [u64]> {
    match op {
        LinearOp::Conv { weight, .. } | LinearOp::Dense { weight, .. } => std::borrow::Cow::Borrowed(weight),
        LinearOp::Scale { channels, weight, .. } => {
            let c = *channels as usize;
            let mut d = vec![0u64; c * c];
            for (i, w) in weight.iter().enumerate().take(c) {
                d[i * c + i] = *w;
            }
            std::borrow::Cow::Owned(d)
        }
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
        Op::Scale { .. } => {
            let c = *in_shape.first().ok_or_else(|| Error::Model(format!("node '{}': Scale of a scalar", n.name)))?;
            let total: usize = in_shape.iter().product();
            if c == 0 || total % c != 0 {
                return Err(Error::Model(format!("node '{}': Scale over {total} elements in {c} channels", n.name)));
            }
            Ok(scale_shape(c, total / c))
        }
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
    let w = weights_of(op);
    let r = he_s.linear(ch, &shape, &w, x_s).map_err(he);
    if let std::borrow::Cow::Owned(mut d) = w {
        zeroize::Zeroize::zeroize(&mut d);
    }
    let mut y = r?;
    let m = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
    if bias.len() != y.len() {
        return Err(Error::Model(format!("bias of {} elements for {} outputs", bias.len(), y.len())));
    }
    for (v, b) in y.iter_mut().zip(bias) {
        *v = v.wrapping_add(*b) & m;
    }
    Ok(y)
}

/// The RLWE parameter sets a session may use, by name (`--he-params`):
/// the HE standard's 128-bit sets, and the insecure N = 256 test set.
pub fn params_by_name(name: &str) -> Result<hush_rlwe::Params> {
    use hush_rlwe::Params;
    let all = [Params::he128_n8192_p50(), Params::he128_n8192_p50x3(), Params::he128_n8192(), Params::he128_n8192_wide(), Params::he128_n4096(), Params::insecure_test_n256()];
    all.into_iter().find(|p| p.name == name).ok_or_else(|| {
        Error::Config(format!("unknown HE parameter set '{name}' (choose he128-n8192-p50, he128-n8192-p50x3, he128-n8192, he128-n8192-wide or he128-n4096)"))
    })
}

/// The default parameter set: N = 8192, four primes below 2^50, log q < 200
/// (HE standard, 128 bits; why four 50-bit primes: `hush_rlwe::params`).
pub const DEFAULT_PARAMS: &str = "he128-n8192-p50";

/// One party's side of the HE session.
pub enum Side {
    /// Holds the secret key.
    Client(Box<HeClient>),
    /// Holds the client's public key and the weights.
    Server(Box<HeServer>),
}

/// A party's HE linear layers for one session: the RLWE session and the
/// public shape of every linear step of the plan (both parties derive the
/// same shapes from the public architecture).
pub struct HeLinear {
    side: Side,
    shapes: Vec<Option<Shape>>,
}

impl HeLinear {
    /// From a session and the model (the client's: architecture only).
    pub fn new(side: Side, model: &Model, plan: &Plan) -> Result<HeLinear> {
        let mut shapes = Vec::with_capacity(plan.steps.len());
        for (i, st) in plan.steps.iter().enumerate() {
            shapes.push(match &st.kind {
                StepKind::Linear { op, .. } => {
                    let sh = shape_of_node(model, i)?;
                    if let Some(op) = op {
                        if shape_of_op(op)? != sh {
                            return Err(Error::Model(format!("node '{}': compiled op and architecture disagree on the HE shape", st.name)));
                        }
                    }
                    Some(sh)
                }
                _ => None,
            });
        }
        Ok(HeLinear { side, shapes })
    }

    /// The parameter set in use.
    pub fn params_name(&self) -> &'static str {
        match &self.side {
            Side::Client(c) => c.ctx.params.name,
            Side::Server(s) => s.ctx.params.name,
        }
    }

    /// Linear step `step` on this party's share `x`: the client's share of
    /// W·x, or the server's share of W·x + bias (the server passes its op).
    pub fn linear(&mut self, ch: &mut dyn Channel, step: usize, op: Option<&LinearOp>, bias: &[u64], bits: u32, x: &[u64]) -> Result<Vec<u64>> {
        let shape = self.shapes.get(step).and_then(|s| s.as_ref()).ok_or_else(|| Error::Protocol(format!("step {step} is not an HE linear layer")))?;
        match &mut self.side {
            Side::Client(c) => client(c, ch, shape, x),
            Side::Server(s) => {
                let op = op.ok_or_else(|| Error::Config("the server needs the model weights".into()))?;
                server(s, ch, op, bias, bits, x)
            }
        }
    }
}
