//! Module-dealt linear layers (hush's own construction; VISION.md,
//! "Module-dealt linear layers").
//!
//! For y = W·x over Z_2^ℓ with x additively shared as x_S + x_C between the
//! model owner (the *server*) and the *client*:
//!
//! * the client's module derives a fresh mask B (the activation's size) and
//!   the client's output share R_C from the synchronized seed and releases
//!   both to the client host ([`LinearRequest::Deal`] on the client's
//!   module);
//! * the client sends F = x_C − B (one one-way message);
//! * the server's module, which was given the layer's weights W by its own
//!   host ([`LinearRequest::Load`]), derives the same B and R_C and releases
//!   only W·B − R_C ([`LinearRequest::Deal`] on the server's module);
//! * the server's share is W·x_S + W·F + (W·B − R_C) = W·x − R_C.
//!
//! **What enters the module, said plainly.** This is the one dealing kind
//! whose module holds something other than input-independent values: the
//! server's module holds W, the server's *own* secret, given to it by its own
//! host. The client's data, activations and shares never enter either
//! module. The server's module protects B from the server host (B masks the
//! client's share in F); the client's module protects nothing of the
//! server's here. Attestation is simulated — gives no hardware protection.
//!
//! **Roles.** The model owner's module is the [`ModuleRole::Sender`] module,
//! the client's is the [`ModuleRole::Receiver`] module. Each module answers
//! only its own side: the server's module never releases B or R_C, the
//! client's module refuses to load weights.
//!
//! **Freshness.** Each (layer, batch) pair is dealt at most once per
//! session and batches of a layer must increase, and a layer's weights can
//! be loaded only once: otherwise a server host could obtain W·B − R_C and
//! W'·B − R_C for the same B and learn (W − W')·B.
//!
//! **What each host sees.** The server host: W·B − R_C per (layer, batch)
//! (uniform: R_C is uniform and stays in the modules and the client), and
//! the client's F = x_C − B (uniform: B is uniform, fresh per (layer,
//! batch) and never released to it). The client host: B and R_C, functions
//! of the seed and (layer, batch, ring, shape) only — never of W — and no
//! message from the server. So each host's view is simulated from its own
//! input and output share; `hush-inference`'s `tests/linear_views.rs`
//! plays each host with its real view.
//!
//! The kernels here ([`LinearOp::apply`]) are also what the server host uses
//! for its own W·(x_S + F), so the two sides compute the same map.

use crate::module::{Module, ModuleRole};
use crate::{Error, Result};
use hush_primitives::Prg;
use std::collections::HashMap;
use zeroize::Zeroize;

/// Largest tensor (elements) a linear request may describe.
pub const MAX_LINEAR_ELEMS: usize = 1 << 27;
/// Largest number of linear layers loaded into one module.
pub const MAX_LINEAR_LAYERS: usize = 1 << 12;

/// A linear map over Z_2^ℓ with the server's weights (no bias: the server
/// adds its bias to its own share).
#[derive(Clone, PartialEq, Eq)]
pub enum LinearOp {
    /// 2-D convolution, input c_in×h×w (row-major), weights
    /// c_out×c_in×kh×kw, zero padding `pads` = [top, left, bottom, right].
    Conv { c_in: u32, h: u32, w: u32, c_out: u32, kh: u32, kw: u32, stride: [u32; 2], pads: [u32; 4], weight: Vec<u64> },
    /// y = W·x with W n_out×n_in (row-major).
    Dense { n_in: u32, n_out: u32, weight: Vec<u64> },
    /// Per-channel scaling: y\[c·inner + j\] = w\[c\]·x\[c·inner + j\].
    Scale { channels: u32, inner: u32, weight: Vec<u64> },
}

impl std::fmt::Debug for LinearOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Weights are the server's secret: never printed.
        match self {
            LinearOp::Conv { c_in, h, w, c_out, kh, kw, stride, pads, .. } => write!(
                f,
                "Conv {{ in: {c_in}x{h}x{w}, out channels: {c_out}, kernel: {kh}x{kw}, stride: {stride:?}, pads: {pads:?} }}"
            ),
            LinearOp::Dense { n_in, n_out, .. } => write!(f, "Dense {{ {n_out}x{n_in} }}"),
            LinearOp::Scale { channels, inner, .. } => write!(f, "Scale {{ {channels} channels x {inner} }}"),
        }
    }
}

impl Drop for LinearOp {
    fn drop(&mut self) {
        match self {
            LinearOp::Conv { weight, .. } | LinearOp::Dense { weight, .. } | LinearOp::Scale { weight, .. } => {
                weight.zeroize()
            }
        }
    }
}

fn out_dim(n: u32, k: u32, s: u32, p0: u32, p1: u32) -> Option<u32> {
    let padded = n.checked_add(p0)?.checked_add(p1)?;
    if s == 0 || k == 0 || padded < k {
        return None;
    }
    Some((padded - k) / s + 1)
}

impl LinearOp {
    /// Checks the shape fields against each other and the weight length.
    pub fn validate(&self) -> std::result::Result<(), String> {
        let cap = |n: Option<usize>, what: &str| -> std::result::Result<usize, String> {
            match n {
                Some(v) if v > 0 && v <= MAX_LINEAR_ELEMS => Ok(v),
                _ => Err(format!("{what} size out of range (1..={MAX_LINEAR_ELEMS})")),
            }
        };
        match self {
            LinearOp::Conv { c_in, h, w, c_out, kh, kw, stride, pads, weight } => {
                let wl = cap(
                    (*c_out as usize)
                        .checked_mul(*c_in as usize)
                        .and_then(|v| v.checked_mul(*kh as usize))
                        .and_then(|v| v.checked_mul(*kw as usize)),
                    "conv weight",
                )?;
                if weight.len() != wl {
                    return Err(format!("conv weight has {} elements, shape needs {wl}", weight.len()));
                }
                if pads[0] >= *kh || pads[2] >= *kh || pads[1] >= *kw || pads[3] >= *kw {
                    return Err("conv padding must be smaller than the kernel".into());
                }
                let oh = out_dim(*h, *kh, stride[0], pads[0], pads[2]).ok_or("conv kernel/stride do not fit the input")?;
                let ow = out_dim(*w, *kw, stride[1], pads[1], pads[3]).ok_or("conv kernel/stride do not fit the input")?;
                cap((*c_in as usize).checked_mul(*h as usize).and_then(|v| v.checked_mul(*w as usize)), "conv input")?;
                cap((*c_out as usize).checked_mul(oh as usize).and_then(|v| v.checked_mul(ow as usize)), "conv output")?;
                Ok(())
            }
            LinearOp::Dense { n_in, n_out, weight } => {
                let wl = cap((*n_in as usize).checked_mul(*n_out as usize), "dense weight")?;
                if weight.len() != wl {
                    return Err(format!("dense weight has {} elements, shape needs {wl}", weight.len()));
                }
                Ok(())
            }
            LinearOp::Scale { channels, inner, weight } => {
                cap((*channels as usize).checked_mul(*inner as usize), "scale")?;
                if weight.len() != *channels as usize {
                    return Err(format!("scale has {} weights for {channels} channels", weight.len()));
                }
                Ok(())
            }
        }
    }

    fn conv_out(&self) -> (usize, usize) {
        match self {
            LinearOp::Conv { h, w, kh, kw, stride, pads, .. } => (
                out_dim(*h, *kh, stride[0], pads[0], pads[2]).unwrap_or(0) as usize,
                out_dim(*w, *kw, stride[1], pads[1], pads[3]).unwrap_or(0) as usize,
            ),
            _ => (0, 0),
        }
    }

    /// Input length (elements).
    pub fn in_len(&self) -> usize {
        match self {
            LinearOp::Conv { c_in, h, w, .. } => *c_in as usize * *h as usize * *w as usize,
            LinearOp::Dense { n_in, .. } => *n_in as usize,
            LinearOp::Scale { channels, inner, .. } => *channels as usize * *inner as usize,
        }
    }

    /// Output length (elements).
    pub fn out_len(&self) -> usize {
        match self {
            LinearOp::Conv { c_out, .. } => {
                let (oh, ow) = self.conv_out();
                *c_out as usize * oh * ow
            }
            LinearOp::Dense { n_out, .. } => *n_out as usize,
            LinearOp::Scale { .. } => self.in_len(),
        }
    }

    /// Multiply-accumulates one application costs (the "module work" of a
    /// deal, and the server host's work per layer).
    pub fn macs(&self) -> u64 {
        match self {
            LinearOp::Conv { c_in, kh, kw, .. } => self.out_len() as u64 * (*c_in as u64 * *kh as u64 * *kw as u64),
            LinearOp::Dense { n_in, n_out, .. } => *n_in as u64 * *n_out as u64,
            LinearOp::Scale { .. } => self.in_len() as u64,
        }
    }

    /// y = W·x over Z_2^bits (inputs reduced, output reduced). Panics only
    /// on wrong buffer lengths (a caller bug; decoded ops are validated).
    pub fn apply(&self, bits: u32, x: &[u64], y: &mut [u64]) {
        assert_eq!(x.len(), self.in_len(), "linear input length");
        assert_eq!(y.len(), self.out_len(), "linear output length");
        let mask = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
        match self {
            LinearOp::Conv { c_in, h, w, c_out, kh: 1, kw: 1, stride: [1, 1], pads: [0, 0, 0, 0], weight } => {
                // a 1×1 convolution is the product W (c_out × c_in) · X (c_in × h·w)
                let plane = *h as usize * *w as usize;
                hush_primitives::gemm::gemm(weight, x, *c_out as usize, *c_in as usize, plane, y);
                if mask != u64::MAX {
                    y.iter_mut().for_each(|v| *v &= mask);
                }
            }
            LinearOp::Conv { c_in, h, w, c_out, kh, kw, stride, pads, weight } => {
                let (oh, ow) = self.conv_out();
                let (ci, h, w, kh, kw) = (*c_in as usize, *h as usize, *w as usize, *kh as usize, *kw as usize);
                let (sy, sx) = (stride[0] as usize, stride[1] as usize);
                let (pt, pl) = (pads[0] as usize, pads[1] as usize);
                // Per kernel column kx, the output columns whose input column is in range.
                let xr: Vec<(usize, usize)> = (0..kw)
                    .map(|kx| {
                        let lo = if kx >= pl { 0 } else { (pl - kx).div_ceil(sx) };
                        let hi = if w + pl > kx { ((w + pl - kx - 1) / sx + 1).min(ow) } else { 0 };
                        (lo, hi.max(lo))
                    })
                    .collect();
                let plane = oh * ow;
                for (co, out) in y.chunks_exact_mut(plane).enumerate().take(*c_out as usize) {
                    out.fill(0);
                    for c in 0..ci {
                        let inp = &x[c * h * w..(c + 1) * h * w];
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let wv = weight[((co * ci + c) * kh + ky) * kw + kx];
                                if wv == 0 {
                                    continue;
                                }
                                let (lo, hi) = xr[kx];
                                for oy in 0..oh {
                                    let iy = oy * sy + ky;
                                    if iy < pt || iy - pt >= h {
                                        continue;
                                    }
                                    let row = &inp[(iy - pt) * w..(iy - pt + 1) * w];
                                    let orow = &mut out[oy * ow..(oy + 1) * ow];
                                    if sx == 1 {
                                        let off = kx as isize - pl as isize;
                                        for ox in lo..hi {
                                            let ix = (ox as isize + off) as usize;
                                            orow[ox] = orow[ox].wrapping_add(wv.wrapping_mul(row[ix]));
                                        }
                                    } else {
                                        for ox in lo..hi {
                                            let ix = ox * sx + kx - pl;
                                            orow[ox] = orow[ox].wrapping_add(wv.wrapping_mul(row[ix]));
                                        }
                                    }
                                }
                            }
                        }
                    }
                    for v in out.iter_mut() {
                        *v &= mask;
                    }
                }
            }
            LinearOp::Dense { n_in, weight, .. } => {
                let n = *n_in as usize;
                for (o, yo) in y.iter_mut().enumerate() {
                    let row = &weight[o * n..(o + 1) * n];
                    let mut acc = 0u64;
                    for (a, b) in row.iter().zip(x) {
                        acc = acc.wrapping_add(a.wrapping_mul(*b));
                    }
                    *yo = acc & mask;
                }
            }
            LinearOp::Scale { inner, weight, .. } => {
                let inner = *inner as usize;
                for (c, wv) in weight.iter().enumerate() {
                    for j in c * inner..(c + 1) * inner {
                        y[j] = wv.wrapping_mul(x[j]) & mask;
                    }
                }
            }
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let put32 = |out: &mut Vec<u8>, v: u32| out.extend_from_slice(&v.to_le_bytes());
        match self {
            LinearOp::Conv { c_in, h, w, c_out, kh, kw, stride, pads, weight } => {
                out.push(1);
                for v in [*c_in, *h, *w, *c_out, *kh, *kw, stride[0], stride[1], pads[0], pads[1], pads[2], pads[3]] {
                    put32(out, v);
                }
                put_u64s(out, weight);
            }
            LinearOp::Dense { n_in, n_out, weight } => {
                out.push(2);
                put32(out, *n_in);
                put32(out, *n_out);
                put_u64s(out, weight);
            }
            LinearOp::Scale { channels, inner, weight } => {
                out.push(3);
                put32(out, *channels);
                put32(out, *inner);
                put_u64s(out, weight);
            }
        }
    }

    fn decode(r: &mut Cursor<'_>) -> Result<Self> {
        let op = match r.u8()? {
            1 => {
                let mut f = [0u32; 12];
                for v in f.iter_mut() {
                    *v = r.u32()?;
                }
                LinearOp::Conv {
                    c_in: f[0],
                    h: f[1],
                    w: f[2],
                    c_out: f[3],
                    kh: f[4],
                    kw: f[5],
                    stride: [f[6], f[7]],
                    pads: [f[8], f[9], f[10], f[11]],
                    weight: r.u64s()?,
                }
            }
            2 => LinearOp::Dense { n_in: r.u32()?, n_out: r.u32()?, weight: r.u64s()? },
            3 => LinearOp::Scale { channels: r.u32()?, inner: r.u32()?, weight: r.u64s()? },
            t => return Err(Error::Malformed(format!("linear op: unknown kind {t}"))),
        };
        op.validate().map_err(|e| Error::Malformed(format!("linear op: {e}")))?;
        Ok(op)
    }
}

/// A host's request to its module for the linear-layer dealing kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinearRequest {
    /// Server only: the weights of linear layer `layer` (once per layer).
    Load { layer: u32, op: LinearOp },
    /// Both sides: the correlation of (`layer`, `batch`) over Z_2^bits for
    /// an input of `in_len` and an output of `out_len` elements. The client
    /// gets (B, R_C); the server gets W·B − R_C.
    Deal { layer: u32, batch: u64, bits: u32, in_len: u32, out_len: u32 },
}

/// What the module releases for a [`LinearRequest`]; zeroized on drop.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LinearResponse {
    /// Client: B (in_len). Server: W·B − R_C (out_len). Empty after `Load`.
    pub first: Vec<u64>,
    /// Client: R_C (out_len). Server: empty.
    pub second: Vec<u64>,
}

impl Drop for LinearResponse {
    fn drop(&mut self) {
        self.first.zeroize();
        self.second.zeroize();
    }
}

fn put_u64s(out: &mut Vec<u8>, v: &[u64]) {
    out.extend_from_slice(&(v.len() as u64).to_le_bytes());
    out.reserve(v.len() * 8);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
}

struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(Error::Malformed(format!("linear message truncated ({} bytes left, {n} needed)", self.0.len())));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    fn u64s(&mut self) -> Result<Vec<u64>> {
        let n = self.u64()?;
        if n > MAX_LINEAR_ELEMS as u64 {
            return Err(Error::Malformed(format!("linear message: array of {n} elements exceeds {MAX_LINEAR_ELEMS}")));
        }
        let raw = self.take(n as usize * 8)?;
        Ok(raw.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect())
    }
    fn finish(&self) -> Result<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(Error::Malformed(format!("linear message: {} trailing bytes", self.0.len())))
        }
    }
}

impl LinearRequest {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            LinearRequest::Load { layer, op } => {
                out.push(1);
                out.extend_from_slice(&layer.to_le_bytes());
                op.encode(&mut out);
            }
            LinearRequest::Deal { layer, batch, bits, in_len, out_len } => {
                out.push(2);
                out.extend_from_slice(&layer.to_le_bytes());
                out.extend_from_slice(&batch.to_le_bytes());
                for v in [*bits, *in_len, *out_len] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
        }
        out
    }

    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut r = Cursor(b);
        let req = match r.u8()? {
            1 => LinearRequest::Load { layer: r.u32()?, op: LinearOp::decode(&mut r)? },
            2 => LinearRequest::Deal { layer: r.u32()?, batch: r.u64()?, bits: r.u32()?, in_len: r.u32()?, out_len: r.u32()? },
            t => return Err(Error::Malformed(format!("linear request: unknown kind {t}"))),
        };
        r.finish()?;
        Ok(req)
    }
}

impl LinearResponse {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + 8 * (self.first.len() + self.second.len()));
        put_u64s(&mut out, &self.first);
        put_u64s(&mut out, &self.second);
        out
    }

    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut r = Cursor(b);
        let resp = LinearResponse { first: r.u64s()?, second: r.u64s()? };
        r.finish()?;
        Ok(resp)
    }
}

/// The module's state for this dealing kind: the server's loaded layers and
/// the last batch dealt per layer.
#[derive(Default)]
pub struct LinearState {
    ops: HashMap<u32, LinearOp>,
    last_batch: HashMap<u32, u64>,
}

/// The two seed-derived streams of (layer, batch): B (in_len) and R_C
/// (out_len), reduced mod 2^bits.
fn masks(m: &Module, layer: u32, batch: u64, bits: u32, in_len: usize, out_len: usize) -> Result<(Vec<u64>, Vec<u64>)> {
    Ok(expand_masks(mask_key(m, layer, batch, bits, in_len, out_len)?, bits, in_len, out_len))
}

/// The key of (layer, batch)'s masks B and R_C.
fn mask_key(m: &Module, layer: u32, batch: u64, bits: u32, in_len: usize, out_len: usize) -> Result<hush_primitives::Block> {
    m.derive_key(&format!("linear/{layer}/{batch}/{bits}/{in_len}/{out_len}"))
}

/// B (in_len) and R_C (out_len) from their key: the client's share, which
/// a dealer may release as the key itself (see [`handle_seeded`]).
pub fn expand_masks(key: hush_primitives::Block, bits: u32, in_len: usize, out_len: usize) -> (Vec<u64>, Vec<u64>) {
    let mask = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let draw = |nonce: u64, n: usize| -> Vec<u64> {
        let mut prg = Prg::with_nonce(key, nonce);
        let mut bytes = vec![0u8; n * 8];
        prg.fill_bytes(&mut bytes);
        let v = bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")) & mask).collect();
        bytes.zeroize();
        v
    };
    (draw(0, in_len), draw(1, out_len))
}

/// As [`handle`], from a host that can expand its masks itself (the
/// dealer service's client): the client's (receiver's) deal is answered
/// with the key of (layer, batch)'s masks — 16 bytes instead of B and R_C.
/// Releasing the key tells the client exactly B and R_C, its share: the
/// key is used for nothing else (the server's module derives the same B
/// and R_C from it to compute W·B − R_C, which the client never sees).
pub fn handle_seeded(m: &Module, role: ModuleRole, st: &mut LinearState, req: &LinearRequest) -> Result<crate::module::Response> {
    match (role, req) {
        (ModuleRole::Receiver, LinearRequest::Deal { layer, batch, bits, in_len, out_len }) => {
            check_deal(st, *layer, *batch, *bits, *in_len, *out_len)?;
            let key = mask_key(m, *layer, *batch, *bits, *in_len as usize, *out_len as usize)?;
            st.last_batch.insert(*layer, *batch);
            Ok(crate::module::Response::Seed(key))
        }
        _ => Ok(crate::module::Response::Linear(handle(m, role, st, req)?)),
    }
}

/// The checks of a deal request: ring width, sizes, a fresh batch.
fn check_deal(st: &LinearState, layer: u32, batch: u64, bits: u32, in_len: u32, out_len: u32) -> Result<()> {
    if !(1..=64).contains(&bits) {
        return Err(Error::Refused(format!("ring width {bits} out of range 1..=64")));
    }
    let (n_in, n_out) = (in_len as usize, out_len as usize);
    if n_in == 0 || n_out == 0 || n_in > MAX_LINEAR_ELEMS || n_out > MAX_LINEAR_ELEMS {
        return Err(Error::Refused(format!("linear sizes {n_in} -> {n_out} out of range")));
    }
    if let Some(&last) = st.last_batch.get(&layer) {
        if batch <= last {
            return Err(Error::Refused(format!("linear layer {layer}: batch {batch} already dealt or out of order (last was {last})")));
        }
    }
    Ok(())
}

/// The dispatch target of the linear-layer request kind.
/// `role` is the calling module's role once seed agreement is complete.
pub fn handle(m: &Module, role: ModuleRole, st: &mut LinearState, req: &LinearRequest) -> Result<LinearResponse> {
    match req {
        LinearRequest::Load { layer, op } => {
            if role != ModuleRole::Sender {
                return Err(Error::Refused("linear weights are loaded into the model owner's (sender's) module only".into()));
            }
            op.validate().map_err(Error::Refused)?;
            if st.ops.contains_key(layer) {
                return Err(Error::Refused(format!("linear layer {layer} already loaded (weights are bound once per session)")));
            }
            if st.ops.len() >= MAX_LINEAR_LAYERS {
                return Err(Error::Refused(format!("more than {MAX_LINEAR_LAYERS} linear layers")));
            }
            st.ops.insert(*layer, op.clone());
            Ok(LinearResponse::default())
        }
        LinearRequest::Deal { layer, batch, bits, in_len, out_len } => {
            check_deal(st, *layer, *batch, *bits, *in_len, *out_len)?;
            let (n_in, n_out) = (*in_len as usize, *out_len as usize);
            let resp = match role {
                ModuleRole::Receiver => {
                    let (b, r) = masks(m, *layer, *batch, *bits, n_in, n_out)?;
                    LinearResponse { first: b, second: r }
                }
                ModuleRole::Sender => {
                    let op = st.ops.get(layer).ok_or_else(|| Error::Refused(format!("linear layer {layer} not loaded")))?;
                    if op.in_len() != n_in || op.out_len() != n_out {
                        return Err(Error::Refused(format!(
                            "linear layer {layer} maps {} -> {}, request says {n_in} -> {n_out}",
                            op.in_len(),
                            op.out_len()
                        )));
                    }
                    let (mut b, mut r) = masks(m, *layer, *batch, *bits, n_in, n_out)?;
                    let mut y = vec![0u64; n_out];
                    op.apply(*bits, &b, &mut y);
                    let mask = if *bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
                    for (v, rc) in y.iter_mut().zip(&r) {
                        *v = v.wrapping_sub(*rc) & mask;
                    }
                    b.zeroize();
                    r.zeroize();
                    LinearResponse { first: y, second: Vec::new() }
                }
            };
            st.last_batch.insert(*layer, *batch);
            Ok(resp)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{InProcessModule, TrustedModule};
    use crate::module::{Request, Response};
    use hush_primitives::Block;
    use hush_transport::MemChannel;

    fn pair() -> (InProcessModule, InProcessModule) {
        let mut s = InProcessModule::new(Module::with_rng(Prg::new(Block(1))));
        let mut c = InProcessModule::new(Module::with_rng(Prg::new(Block(2))));
        let (mut a, mut b) = MemChannel::pair();
        let t = std::thread::spawn(move || {
            crate::establish(&mut c, &mut b, ModuleRole::Receiver).unwrap();
            c
        });
        crate::establish(&mut s, &mut a, ModuleRole::Sender).unwrap();
        (s, t.join().unwrap())
    }

    fn call(m: &mut InProcessModule, r: LinearRequest) -> Result<LinearResponse> {
        let mut resp = m.call(&Request::Linear(r))?;
        match &mut resp {
            Response::Linear(l) => Ok(std::mem::take(l)),
            _ => Err(Error::Malformed("unexpected".into())),
        }
    }

    fn naive_conv(op: &LinearOp, bits: u32, x: &[u64]) -> Vec<u64> {
        let LinearOp::Conv { c_in, h, w, c_out, kh, kw, stride, pads, weight } = op else { unreachable!() };
        let (oh, ow) = op.conv_out();
        let mask = if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
        let mut y = vec![0u64; op.out_len()];
        for co in 0..*c_out as usize {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = 0u64;
                    for c in 0..*c_in as usize {
                        for ky in 0..*kh as usize {
                            for kx in 0..*kw as usize {
                                let iy = (oy * stride[0] as usize + ky) as i64 - pads[0] as i64;
                                let ix = (ox * stride[1] as usize + kx) as i64 - pads[1] as i64;
                                if iy < 0 || ix < 0 || iy >= *h as i64 || ix >= *w as i64 {
                                    continue;
                                }
                                let wv = weight[((co * *c_in as usize + c) * *kh as usize + ky) * *kw as usize + kx];
                                acc = acc.wrapping_add(wv.wrapping_mul(x[(c * *h as usize + iy as usize) * *w as usize + ix as usize]));
                            }
                        }
                    }
                    y[(co * oh + oy) * ow + ox] = acc & mask;
                }
            }
        }
        y
    }

    #[test]
    fn conv_kernel_matches_naive() {
        let mut p = Prg::new(Block(9));
        for (stride, pads, k) in [([1, 1], [0, 0, 0, 0], 3), ([2, 2], [1, 1, 1, 1], 3), ([1, 2], [2, 0, 1, 2], 3), ([2, 1], [0, 0, 0, 0], 1)] {
            let op = LinearOp::Conv {
                c_in: 2, h: 7, w: 6, c_out: 3, kh: k, kw: k, stride, pads,
                weight: (0..2 * 3 * k * k).map(|_| p.next_u64() & 0xffff).collect(),
            };
            op.validate().unwrap();
            let x: Vec<u64> = (0..op.in_len()).map(|_| p.next_u64() & ((1 << 37) - 1)).collect();
            let mut y = vec![0; op.out_len()];
            op.apply(37, &x, &mut y);
            assert_eq!(y, naive_conv(&op, 37, &x));
        }
    }

    #[test]
    fn dealt_correlation_is_w_b_minus_r() {
        let (mut s, mut c) = pair();
        let op = LinearOp::Dense { n_in: 5, n_out: 3, weight: (1..=15).collect() };
        call(&mut s, LinearRequest::Load { layer: 0, op: op.clone() }).unwrap();
        let d = LinearRequest::Deal { layer: 0, batch: 0, bits: 37, in_len: 5, out_len: 3 };
        let cs = call(&mut c, d.clone()).unwrap();
        let ss = call(&mut s, d.clone()).unwrap();
        assert!(ss.second.is_empty());
        let mut wb = vec![0; 3];
        op.apply(37, &cs.first, &mut wb);
        let mask = (1u64 << 37) - 1;
        for i in 0..3 {
            assert_eq!((ss.first[i].wrapping_add(cs.second[i])) & mask, wb[i]);
        }
        // the same batch again, an older batch, a second load, and the wrong side are refused
        assert!(call(&mut s, d.clone()).is_err());
        assert!(call(&mut c, d).is_err());
        assert!(call(&mut s, LinearRequest::Load { layer: 0, op: op.clone() }).is_err());
        assert!(call(&mut c, LinearRequest::Load { layer: 1, op: op.clone() }).is_err());
        let wrong = LinearRequest::Deal { layer: 0, batch: 1, bits: 37, in_len: 4, out_len: 3 };
        assert!(call(&mut s, wrong).is_err());
        // a fresh batch gives fresh masks
        let d1 = LinearRequest::Deal { layer: 0, batch: 1, bits: 37, in_len: 5, out_len: 3 };
        assert_ne!(call(&mut c, d1).unwrap().first, cs.first);
    }

    #[test]
    fn codec_rejects_garbage() {
        let op = LinearOp::Conv { c_in: 1, h: 4, w: 4, c_out: 2, kh: 3, kw: 3, stride: [1, 1], pads: [1, 1, 1, 1], weight: vec![1; 18] };
        let r = LinearRequest::Load { layer: 3, op };
        let b = r.encode();
        assert_eq!(LinearRequest::decode(&b).unwrap(), r);
        for cut in [0, 1, 5, 20, b.len() - 1] {
            assert!(LinearRequest::decode(&b[..cut]).is_err());
        }
        let mut bad = b.clone();
        bad[5 + 4 * 4] = 9; // kh = 9 > input with pads, weight length mismatch
        assert!(LinearRequest::decode(&bad).is_err());
        let mut huge = vec![3u8];
        huge.extend_from_slice(&1u32.to_le_bytes());
        huge.extend_from_slice(&1u32.to_le_bytes());
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(LinearRequest::decode(&[&[1u8, 0, 0, 0, 0][..], &huge[..]].concat()).is_err());
        assert!(LinearResponse::decode(&[1, 2, 3]).is_err());
    }
}
