//! Module-dealt linear layers over a [`Channel`] (VISION.md, "Module-dealt
//! linear layers"; the module side is [`hush_tee::linear_deal`]).
//!
//! For y = W·x with x = x_S + x_C over Z_2^ℓ:
//! client: (B, R_C) ← its module; sends F = x_C − B; output share R_C.
//! server: W·B − R_C ← its module (which holds W); receives F; output share
//! W·(x_S + F) + (W·B − R_C) = W·x − R_C.
//!
//! Cost per layer: **one one-way client→server message of the input
//! activation's size** (⌈ℓ/8⌉ bytes per element, chunked into frames), no
//! server→client message, one module crossing per party; the client does
//! no linear algebra (a subtraction). Security: semi-honest; relies on the
//! server's module keeping B from the server host (attestation simulated —
//! gives no hardware protection); the server's module holds W, the server's
//! own secret; no online value of the client enters any module.
//!
//! **What each host sees, and why it is simulatable.**
//! * Server host: W (its own), W·B − R_C from its module, and F = x_C − B.
//!   B is uniform, fresh per (layer, inference) and never leaves the
//!   server's module, so F is uniform whatever x_C is; W·B − R_C is
//!   uniform because R_C is (and R_C never reaches the server). Its output
//!   share W·x − R_C is likewise uniform. Simulator: uniform F and uniform
//!   W·B − R_C.
//! * Client host: B and R_C from its module — functions of the seed only,
//!   not of W — and **no message**: the server sends nothing in a linear
//!   layer. Its view is independent of W outright.
//! * Freshness: the engine passes the inference number as `batch` and each
//!   linear layer its own `layer` id; the module derives B and R_C under
//!   the label (layer, batch, ring, shape) and refuses a (layer, batch) it
//!   has dealt before or an older batch, and a second weight load
//!   (`hush_tee::linear_deal`), so B is never reused even by a host that
//!   tries.
//! * Tests: `tests/linear_views.rs` (server's view vs the client's share,
//!   χ² on F and W·F + (W·B − R_C); client's view vs W, exact equality);
//!   the first fails with B fixed or with the batch left out of B's label.

use crate::fixed::FixedConfig;
use crate::{Error, Result};
use hush_tee::linear_deal::{LinearOp, LinearRequest, LinearResponse};
use hush_tee::{Request, Response, TrustedModule};
use hush_transport::{Channel, ChannelExt};

/// Ring elements to bytes (⌈ℓ/8⌉ each, little endian).
pub fn pack(cfg: &FixedConfig, v: &[u64]) -> Vec<u8> {
    let w = cfg.elem_bytes();
    let mut out = Vec::with_capacity(v.len() * w);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes()[..w]);
    }
    out
}

/// Bytes to ring elements; an unreduced element is an error (hostile peer).
pub fn unpack(cfg: &FixedConfig, b: &[u8], what: &str) -> Result<Vec<u64>> {
    let w = cfg.elem_bytes();
    if b.len() % w != 0 {
        return Err(Error::Protocol(format!("{what}: {} bytes is not a whole number of elements", b.len())));
    }
    let m = cfg.mask();
    let mut out = Vec::with_capacity(b.len() / w);
    for c in b.chunks_exact(w) {
        let mut a = [0u8; 8];
        a[..w].copy_from_slice(c);
        let x = u64::from_le_bytes(a);
        if x & !m != 0 {
            return Err(Error::Protocol(format!("{what}: element outside Z_2^{}", cfg.bits)));
        }
        out.push(x);
    }
    Ok(out)
}

/// Sends ring elements as one flight of frames.
pub fn send_ring(ch: &mut dyn Channel, cfg: &FixedConfig, v: &[u64]) -> Result<()> {
    ch.send_chunked(&pack(cfg, v))?;
    Ok(())
}

/// Receives exactly `n` ring elements sent with [`send_ring`].
pub fn recv_ring(ch: &mut dyn Channel, cfg: &FixedConfig, n: usize, what: &'static str) -> Result<Vec<u64>> {
    let mut buf = vec![0u8; n * cfg.elem_bytes()];
    ch.recv_chunked_into(what, &mut buf)?;
    unpack(cfg, &buf, what)
}

fn linear_call(module: &mut dyn TrustedModule, req: LinearRequest) -> Result<LinearResponse> {
    let mut resp = module.call(&Request::Linear(req))?;
    match &mut resp {
        Response::Linear(l) => Ok(std::mem::take(l)),
        _ => Err(Error::Protocol("module: unexpected response kind to a linear request".into())),
    }
}

/// Which side runs a module-dealt linear layer ([`apply`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Server,
    Client,
    /// both parties' data in one place: y = W·x in the clear (references)
    Clear,
}

/// One module-dealt linear layer `layer` at one side: the server loads the
/// weights (`op`, built only where they are) into its module and both sides
/// run the dealt product; in the clear the product is computed directly.
/// Returns this side's share of y = W·x (no truncation).
#[allow(clippy::too_many_arguments)]
pub fn apply(
    side: Side,
    module: Option<&mut dyn TrustedModule>,
    ch: &mut dyn Channel,
    cfg: &FixedConfig,
    layer: u32,
    op: impl FnOnce() -> Result<LinearOp>,
    in_len: usize,
    out_len: usize,
    x: &[u64],
) -> Result<Vec<u64>> {
    let no_module = || Error::Config("linear layer: no module".into());
    match side {
        Side::Clear => {
            let mut y = vec![0u64; out_len];
            op()?.apply(cfg.bits, x, &mut y);
            Ok(y)
        }
        Side::Server => {
            let op = op()?;
            let m = module.ok_or_else(no_module)?;
            load(m, layer, &op)?;
            let d = deal(m, cfg, layer, 0, in_len, out_len)?;
            server_with(ch, cfg, d, &op, x)
        }
        Side::Client => {
            let m = module.ok_or_else(no_module)?;
            let d = deal(m, cfg, layer, 0, in_len, out_len)?;
            client_with(ch, cfg, d, x, out_len)
        }
    }
}

/// Server: binds the weights of every linear layer to its module (once per session).
pub fn load(module: &mut dyn TrustedModule, layer: u32, op: &LinearOp) -> Result<()> {
    linear_call(module, LinearRequest::Load { layer, op: op.clone() })?;
    Ok(())
}

/// Either side: this party's correlation of (`layer`, `batch`) from its
/// module (input-independent: may run before the input exists). Client:
/// (B, R_C); server: W·B − R_C.
pub fn deal(module: &mut dyn TrustedModule, cfg: &FixedConfig, layer: u32, batch: u64, in_len: usize, out_len: usize) -> Result<LinearResponse> {
    linear_call(module, LinearRequest::Deal { layer, batch, bits: cfg.bits, in_len: in_len as u32, out_len: out_len as u32 })
}

/// Client side of one linear layer: sends F = x_C − B, returns R_C.
pub fn client(ch: &mut dyn Channel, module: &mut dyn TrustedModule, cfg: &FixedConfig, layer: u32, batch: u64, x_c: &[u64], out_len: usize) -> Result<Vec<u64>> {
    let d = deal(module, cfg, layer, batch, x_c.len(), out_len)?;
    client_with(ch, cfg, d, x_c, out_len)
}

/// Client side with an already dealt correlation `d` = (B, R_C).
pub fn client_with(ch: &mut dyn Channel, cfg: &FixedConfig, mut d: LinearResponse, x_c: &[u64], out_len: usize) -> Result<Vec<u64>> {
    if d.first.len() != x_c.len() || d.second.len() != out_len {
        return Err(Error::Protocol("module: linear masks of the wrong size".into()));
    }
    let m = cfg.mask();
    let f: Vec<u64> = x_c.iter().zip(&d.first).map(|(x, b)| x.wrapping_sub(*b) & m).collect();
    send_ring(ch, cfg, &f)?;
    Ok(std::mem::take(&mut d.second))
}

/// Server side of one linear layer: returns W·(x_S + F) + (W·B − R_C).
pub fn server(ch: &mut dyn Channel, module: &mut dyn TrustedModule, cfg: &FixedConfig, layer: u32, batch: u64, op: &LinearOp, x_s: &[u64]) -> Result<Vec<u64>> {
    let d = deal(module, cfg, layer, batch, op.in_len(), op.out_len())?;
    server_with(ch, cfg, d, op, x_s)
}

/// Server side with an already dealt correlation `d` = W·B − R_C.
pub fn server_with(ch: &mut dyn Channel, cfg: &FixedConfig, mut d: LinearResponse, op: &LinearOp, x_s: &[u64]) -> Result<Vec<u64>> {
    let (n_in, n_out) = (op.in_len(), op.out_len());
    if d.first.len() != n_out {
        return Err(Error::Protocol("module: linear correlation of the wrong size".into()));
    }
    let f = recv_ring(ch, cfg, n_in, "linear layer: masked client share F")?;
    let m = cfg.mask();
    let x: Vec<u64> = x_s.iter().zip(&f).map(|(a, b)| a.wrapping_add(*b) & m).collect();
    let mut y = vec![0u64; n_out];
    op.apply(cfg.bits, &x, &mut y);
    for (v, c) in y.iter_mut().zip(&d.first) {
        *v = v.wrapping_add(*c) & m;
    }
    zeroize::Zeroize::zeroize(&mut d.first);
    Ok(y)
}
