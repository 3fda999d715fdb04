//! CRISP's offline phase (Fig. 3) as one dealing kind, `"crisp/mac"`,
//! consumed by [`crate::crisp`]: the session's MAC key μ, the
//! MAC-carrying ReLU keys ([`hush_fss::mac`]) with their shares of r and
//! μ·r, and client-known masks with MAC shares (for authenticated input and
//! for the checked release of the output).
//!
//! All values live in the lifted ring Z_2^k, k = ℓ + s ≤ 128 (SPDZ2k;
//! CRISP §V-B), and are encoded in ⌈k/8⌉ bytes each.
//!
//! **Operations** (the `op` parameter):
//! * [`CrispOp::MacKey`] (n = 1): party 0 (the server) gets μ; party 1
//!   (the client) gets an empty share. CRISP Fig. 4 step 1 has P_0 sample
//!   μ; here the dealer derives it, because it must build μ into the gate
//!   keys (Gen^mac), and releases it to the server only.
//! * [`CrispOp::Relu`]: per gate, party p gets its [`MacReluKey`], which
//!   carries ⟨r⟩_p, ⟨μr⟩_p, the shares of the spline offsets and a
//!   four-lane wide DCF key (CRISP's k_b and k_b^mac in one key).
//! * [`CrispOp::Trunc`]: per gate, party p's [`MacTruncKey`] (hush's
//!   exact truncation by f bits, lifted and MAC-carrying like the ReLU).
//! * [`CrispOp::ClientMask`]: per element a uniform a ∈ Z_2^k known to the
//!   client and shares σ_0 + σ_1 = μ·a: the client gets (a, σ_1), the
//!   server σ_0. Used to authenticate the client's input (the client sends
//!   δ = x − a) and to release the output only after the check (the client
//!   sends y_1 + a; see [`crate::crisp`]).
//! * [`CrispOp::Lin`] (n = 1, the layer's public [`LinShape`] in the
//!   parameters): one bilinear triple of a private-weight linear layer
//!   with an **authenticated** client mask — the server gets A
//!   (weight-shaped), β_0 (input-shaped), C_0, C′_0; the client B, β_1
//!   (input-shaped), C_1, C′_1; β_0 + β_1 = μ·B, C_0 + C_1 = f(A, B),
//!   C′_0 + C′_1 = f(A, β_1) (see [`crate::crisp::linear`]: the client's
//!   opening x̃ − B is MAC-checked before the server multiplies it by W).
//!   The dealer never sees W. β_1 is uniform and independent of μ (β_0 is
//!   never released to the client), as for [`CrispOp::ClientMask`].
//!   The shape selects the batch key and each vector has its own PRG
//!   stream, so a host asking another shape gets independent values;
//!   sizes and work are capped ([`MAX_LIN_ELEMS`], [`MAX_LIN_MACS`])
//!   before anything is allocated.
//!
//! **One μ per CRISP session (epoch), with a session-wide label.** Every
//! batch of one inference must use the same μ (the MAC relation is carried
//! through linear layers, which mix elements of many batches), but a
//! [`Description`] only receives the key its label derives. So
//! [`Description::label`] returns the batch-free label
//! `"crisp/mac/session"` — after checking that the batch number inside the
//! parameters equals the request's, which the provider keeps strictly
//! increasing per kind — and [`Description::deal`] derives, from that
//! provider-session key K and the request's *epoch* (the batch number of
//! the `MacKey` request that opened this CRISP session):
//! * K_e = AES_K(tag 2 ‖ epoch) and μ = AES_{K_e}(tag 1) mod 2^k, the same
//!   in every batch of the epoch;
//! * the batch key K_b = AES_{K_e}(tag 0 ‖ op ‖ ℓ ‖ s ‖ n ‖ batch), so every
//!   parameter that changes the output selects an independent key (the
//!   rule of `hush-deal`, one level down), and a batch is still dealt
//!   once (the provider's freshness check sees the request's batch, which
//!   must equal the one in the PRF input).
//!
//! *Why a fresh μ per epoch matters.* The verdict of a failed check tells
//! a cheating client one bit about μ (whether μ·E ≡ Δ for its chosen E, Δ);
//! with one μ across many inferences it could learn μ bit by bit (E =
//! 2^(k−1), then 2^(k−2), ...) and then forge MACs. Each CRISP session
//! therefore opens a new epoch ([`CrispOp::MacKey`] requires epoch =
//! batch), and a verdict concerns a μ that is never used again.
//!
//! **Why a malicious client host cannot bias or learn these values.**
//! * *Dealer mode*: the dealer derives every value from its own session
//!   seed; a host's request carries only public parameters (op, ℓ, s, n,
//!   batch, epoch). Choosing them selects among independent PRF outputs
//!   and never sets a value (an old or foreign epoch only yields shares
//!   under another μ, which break the host's own run); a replayed or out-of-order batch is refused; a request
//!   whose parameter batch differs from its batch is refused here. A host
//!   that asks for other parameters than its peer gets shares of an
//!   *independent* correlation: its computation breaks (and the final
//!   check aborts), it learns nothing, because its share alone is uniform
//!   or, for keys, pseudorandom. Party 1's share of `MacKey` is empty, so
//!   no request releases μ to the client.
//! * *Tee mode*: the same, given that the client's module keeps the
//!   session seed from its host. The seed is agreed by the two modules
//!   (both contribute; hush-tee's handshake) and the host only relays
//!   messages. **With hush's simulated module a client host that reads its
//!   module's memory learns the seed and hence μ and every r: the
//!   malicious-client guarantee then rests on nothing. Only dealer mode
//!   (or real trusted hardware) gives it on these machines.**
//! * *Interactive mode*: no maliciously secure two-party generator of
//!   these correlations exists in hush; [`crate::crisp`] refuses to run
//!   without a dealer or module.
//!
//! What each share reveals: party 1's `Relu` share is a key (pseudorandom,
//! hides r and μ) plus uniform shares; its `ClientMask` share (a, σ_1) is
//! uniform and independent of μ (σ_0 = μa − σ_1 is never released to it).
//! Party 0 learns μ (by design: CRISP's P_0 holds μ) and uniform shares.

use hush_deal::wire::{Reader, Writer};
use hush_deal::{DealRequest, Description, Error, Result};
use hush_fss::mac::{check_lift, mac_relu_gen, mac_trunc_gen, MacGate, MacReluKey, MacTruncKey};
use hush_fss::wide::mask128;
use hush_primitives::prf::Prf;
use hush_primitives::{Block, Prg};
use zeroize::Zeroize;

/// Default statistical security parameter s of the lift (CRISP §V-B).
pub const DEFAULT_S: u32 = 40;

/// What a `"crisp/mac"` request deals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CrispOp {
    MacKey,
    Relu,
    ClientMask,
    /// Exact truncation by `f` bits with MACs ([`hush_fss::mac::MacTruncKey`]).
    Trunc { f: u32 },
    /// One bilinear triple of a private-weight linear layer of shape
    /// `LinShape` ([`crate::crisp::linear`]) with an authenticated client
    /// mask: the server gets A (weight-shaped), β_0, C_0 and C′_0; the
    /// client B, β_1 (input-shaped), C_1 and C′_1, with β_0 + β_1 = μ·B,
    /// C_0 + C_1 = f(A, B) and C′_0 + C′_1 = f(A, β_1) for the layer's
    /// bilinear map f. Independent of the weights.
    Lin(LinShape),
    /// The client's RLWE key of the `ckks` linear backend
    /// ([`crate::crisp_ckks`]), one per epoch: the client gets the 16-byte
    /// seed its secret key is derived from, the server the public key.
    CkksKey,
    /// One `ckks` linear layer's **dealer-made** input ciphertexts: the
    /// client gets B, β_1 (input-shaped, uniform), the server β_0
    /// (β_0 + β_1 = μ·B) and Enc_sk(B + X^(N/2)·β_1) in the layer's
    /// layout under the epoch's [`CrispOp::CkksKey`], so the server never
    /// multiplies its weights by a ciphertext the client made
    /// ([`crate::crisp_ckks`], "No selective failure"). Independent of the
    /// weights.
    CkksLin(LinShape),
}

/// Largest vector (weights, input or output) of one CRISP linear triple
/// (the dealer holds five such vectors of 16-byte words per request).
pub const MAX_LIN_ELEMS: usize = 1 << 22;
/// Most multiply-accumulates of one application of a triple's bilinear
/// map (the dealer computes two): bounds the work a request can ask of
/// the dealer (ResNet-50's largest layer is ~2^28).
pub const MAX_LIN_MACS: u64 = 1 << 30;

/// The public shape of a linear layer y = f(W, x) (the architecture; no
/// weights): the bilinear map of a CRISP linear triple.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinShape {
    /// 2-D convolution, input c_in×h×w, weights c_out×c_in×kh×kw, zero
    /// padding [top, left, bottom, right] (as `hush_tee::linear_deal::LinearOp::Conv`).
    Conv { c_in: u32, h: u32, w: u32, c_out: u32, kh: u32, kw: u32, stride: [u32; 2], pads: [u32; 4] },
    /// y = W·x, W n_out×n_in row-major.
    Dense { n_in: u32, n_out: u32 },
    /// Per-channel scaling y\[c·inner + j\] = w\[c\]·x\[c·inner + j\].
    Scale { channels: u32, inner: u32 },
}

fn conv_dim(n: u32, k: u32, s: u32, p0: u32, p1: u32) -> Option<usize> {
    let padded = (n as u64) + p0 as u64 + p1 as u64;
    if s == 0 || k == 0 || n == 0 || padded < k as u64 {
        return None;
    }
    Some(((padded - k as u64) / s as u64 + 1) as usize)
}

impl LinShape {
    /// The shape of an engine linear operation (its weights are ignored).
    pub fn of(op: &hush_tee::linear_deal::LinearOp) -> Self {
        use hush_tee::linear_deal::LinearOp as L;
        match op {
            L::Conv { c_in, h, w, c_out, kh, kw, stride, pads, .. } => {
                LinShape::Conv { c_in: *c_in, h: *h, w: *w, c_out: *c_out, kh: *kh, kw: *kw, stride: *stride, pads: *pads }
            }
            L::Dense { n_in, n_out, .. } => LinShape::Dense { n_in: *n_in, n_out: *n_out },
            L::Scale { channels, inner, .. } => LinShape::Scale { channels: *channels, inner: *inner },
        }
    }
    /// (weight, input, output) lengths; `None` if a dimension is zero,
    /// the convolution does not fit, a length exceeds [`MAX_LIN_ELEMS`] or
    /// the work [`MAX_LIN_MACS`] (checked before the dealer allocates).
    pub fn lens(&self) -> Option<(usize, usize, usize)> {
        let m = |a: usize, b: usize| a.checked_mul(b);
        let (w, i, o) = match *self {
            LinShape::Conv { c_in, h, w, c_out, kh, kw, stride, pads } => {
                let oh = conv_dim(h, kh, stride[0], pads[0], pads[2])?;
                let ow = conv_dim(w, kw, stride[1], pads[1], pads[3])?;
                let wl = m(m(m(c_out as usize, c_in as usize)?, kh as usize)?, kw as usize)?;
                (wl, m(m(c_in as usize, h as usize)?, w as usize)?, m(m(c_out as usize, oh)?, ow)?)
            }
            LinShape::Dense { n_in, n_out } => (m(n_in as usize, n_out as usize)?, n_in as usize, n_out as usize),
            LinShape::Scale { channels, inner } => {
                let n = m(channels as usize, inner as usize)?;
                (channels as usize, n, n)
            }
        };
        let macs = match *self {
            LinShape::Conv { c_in, kh, kw, .. } => (o as u64).checked_mul(c_in as u64 * kh as u64 * kw as u64)?,
            LinShape::Dense { .. } => w as u64,
            LinShape::Scale { .. } => i as u64,
        };
        if [w, i, o].iter().all(|&v| v > 0 && v <= MAX_LIN_ELEMS) && macs <= MAX_LIN_MACS {
            Some((w, i, o))
        } else {
            None
        }
    }
    fn encode(&self, w: &mut Writer) {
        match *self {
            LinShape::Conv { c_in, h, w: wd, c_out, kh, kw, stride, pads } => {
                w.u8(1);
                for v in [c_in, h, wd, c_out, kh, kw, stride[0], stride[1], pads[0], pads[1], pads[2], pads[3]] {
                    w.u32(v);
                }
            }
            LinShape::Dense { n_in, n_out } => {
                w.u8(2).u32(n_in).u32(n_out);
            }
            LinShape::Scale { channels, inner } => {
                w.u8(3).u32(channels).u32(inner);
            }
        }
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self> {
        let s = match r.u8()? {
            1 => {
                let mut v = [0u32; 12];
                for x in v.iter_mut() {
                    *x = r.u32()?;
                }
                LinShape::Conv { c_in: v[0], h: v[1], w: v[2], c_out: v[3], kh: v[4], kw: v[5], stride: [v[6], v[7]], pads: [v[8], v[9], v[10], v[11]] }
            }
            2 => LinShape::Dense { n_in: r.u32()?, n_out: r.u32()? },
            3 => LinShape::Scale { channels: r.u32()?, inner: r.u32()? },
            t => return Err(Error::Malformed(format!("CRISP linear shape tag {t}"))),
        };
        if s.lens().is_none() {
            return Err(Error::Refused(format!("CRISP linear shape {s:?} out of range")));
        }
        Ok(s)
    }

    /// y = f(w, x) over Z_2^k (`mask` = 2^k − 1; inputs reduced). Lengths
    /// must be [`LinShape::lens`] (checked: a caller error otherwise).
    pub fn apply(&self, w: &[u128], x: &[u128], mask: u128) -> std::result::Result<Vec<u128>, String> {
        let (wl, il, ol) = self.lens().ok_or_else(|| format!("linear shape {self:?} out of range"))?;
        if w.len() != wl || x.len() != il {
            return Err(format!("linear layer {self:?}: {} weights and {} inputs, expected {wl} and {il}", w.len(), x.len()));
        }
        let mut y = vec![0u128; ol];
        match *self {
            LinShape::Conv { c_in, h, w: wd, c_out, kh, kw, stride, pads } => {
                let (ci, h, wd, kh, kw) = (c_in as usize, h as usize, wd as usize, kh as usize, kw as usize);
                let (sy, sx, pt, pl) = (stride[0] as usize, stride[1] as usize, pads[0] as usize, pads[1] as usize);
                let oh = conv_dim(h as u32, kh as u32, stride[0], pads[0], pads[2]).unwrap_or(0);
                let ow = ol / (c_out as usize * oh.max(1));
                for co in 0..c_out as usize {
                    let out = &mut y[co * oh * ow..(co + 1) * oh * ow];
                    for c in 0..ci {
                        let inp = &x[c * h * wd..(c + 1) * h * wd];
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let wv = w[((co * ci + c) * kh + ky) * kw + kx];
                                if wv == 0 {
                                    continue;
                                }
                                for oy in 0..oh {
                                    let iy = oy * sy + ky;
                                    if iy < pt || iy - pt >= h {
                                        continue;
                                    }
                                    let row = &inp[(iy - pt) * wd..(iy - pt + 1) * wd];
                                    for ox in 0..ow {
                                        let ix = ox * sx + kx;
                                        if ix < pl || ix - pl >= wd {
                                            continue;
                                        }
                                        let o = &mut out[oy * ow + ox];
                                        *o = o.wrapping_add(wv.wrapping_mul(row[ix - pl]));
                                    }
                                }
                            }
                        }
                    }
                }
            }
            LinShape::Dense { n_in, .. } => {
                let n = n_in as usize;
                for (o, yo) in y.iter_mut().enumerate() {
                    *yo = w[o * n..(o + 1) * n].iter().zip(x).fold(0u128, |a, (p, q)| a.wrapping_add(p.wrapping_mul(*q)));
                }
            }
            LinShape::Scale { inner, .. } => {
                let inner = inner as usize;
                for (c, wv) in w.iter().enumerate() {
                    for j in c * inner..(c + 1) * inner {
                        y[j] = wv.wrapping_mul(x[j]);
                    }
                }
            }
        }
        y.iter_mut().for_each(|v| *v &= mask);
        Ok(y)
    }
}

impl CrispOp {
    /// The operation byte: code + 4·f (f < 64 for truncation, else 0).
    fn code(self) -> u8 {
        match self {
            CrispOp::MacKey => 0,
            CrispOp::Relu => 1,
            CrispOp::ClientMask => 2,
            CrispOp::Trunc { f } => 3 + 4 * (f as u8 & 63),
            CrispOp::Lin(_) => 4,
            CrispOp::CkksKey => 8,
            CrispOp::CkksLin(_) => 12,
        }
    }
    /// The operation from its byte; a linear triple's shape is read later
    /// (a placeholder here).
    fn from_code(c: u8) -> Result<Self> {
        Ok(match c & 3 {
            0 if c == 4 => CrispOp::Lin(LinShape::Dense { n_in: 0, n_out: 0 }),
            0 if c == 8 => CrispOp::CkksKey,
            0 if c == 12 => CrispOp::CkksLin(LinShape::Dense { n_in: 0, n_out: 0 }),
            0 | 1 | 2 if c >> 2 != 0 => return Err(Error::Malformed(format!("CRISP dealing operation {c}"))),
            0 => CrispOp::MacKey,
            1 => CrispOp::Relu,
            2 => CrispOp::ClientMask,
            _ => CrispOp::Trunc { f: (c >> 2) as u32 },
        })
    }
}

/// The parameters of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrispParams {
    pub op: CrispOp,
    /// Value ring Z_2^ℓ.
    pub ell: u32,
    /// Statistical security parameter: the lifted ring is Z_2^(ℓ+s).
    pub s: u32,
    /// Must equal the request's batch number.
    pub batch: u64,
    /// The batch number of this CRISP session's `MacKey` request (for
    /// `MacKey` itself: its own batch). Selects μ.
    pub epoch: u64,
}

impl CrispParams {
    pub fn k(&self) -> u32 {
        self.ell + self.s
    }
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(self.op.code()).u32(self.ell).u32(self.s).u64(self.batch).u64(self.epoch);
        if let CrispOp::Lin(sh) | CrispOp::CkksLin(sh) = &self.op {
            sh.encode(&mut w);
        }
        w.0
    }
    pub fn decode(params: &[u8]) -> Result<Self> {
        let p = hush_deal::parse_params(params, "CRISP parameters", |r: &mut Reader<'_>| {
            let mut p = CrispParams { op: CrispOp::from_code(r.u8()?)?, ell: r.u32()?, s: r.u32()?, batch: r.u64()?, epoch: r.u64()? };
            match p.op {
                CrispOp::Lin(_) => p.op = CrispOp::Lin(LinShape::decode(r)?),
                CrispOp::CkksLin(_) => p.op = CrispOp::CkksLin(LinShape::decode(r)?),
                _ => {}
            }
            Ok(p)
        })?;
        if p.s == 0 || p.ell > 128 || p.s > 128 {
            return Err(Error::Refused(format!("CRISP lift ℓ = {}, s = {} out of range", p.ell, p.s)));
        }
        check_lift(p.ell, p.k()).map_err(|e| Error::Refused(format!("CRISP lift: {e}")))?;
        if let CrispOp::Trunc { f } = p.op {
            if f == 0 || f >= p.ell {
                return Err(Error::Refused(format!("CRISP truncation by {f} bits out of range 1..{}", p.ell)));
            }
        }
        Ok(p)
    }
}

/// Bytes of one Z_2^k value.
pub fn value_bytes(k: u32) -> usize {
    k.div_ceil(8) as usize
}

/// Appends an array of Z_2^k values: a u64 count, then ⌈k/8⌉ bytes each.
pub fn put_values(out: &mut Vec<u8>, v: &[u128], k: u32) {
    let vb = value_bytes(k);
    out.extend_from_slice(&(v.len() as u64).to_le_bytes());
    for x in v {
        debug_assert!(*x & !mask128(k) == 0);
        out.extend_from_slice(&x.to_le_bytes()[..vb]);
    }
}

/// Reads an array written by [`put_values`] that must hold exactly
/// `expect` values below 2^k; advances `buf`.
pub fn take_values(buf: &mut &[u8], expect: usize, k: u32) -> Result<Vec<u128>> {
    let vb = value_bytes(k);
    if buf.len() < 8 {
        return Err(Error::Malformed("CRISP share: truncated".into()));
    }
    let n = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
    if n != expect as u64 {
        return Err(Error::Malformed(format!("CRISP share: {n} values, expected {expect}")));
    }
    let need = expect.checked_mul(vb).and_then(|b| b.checked_add(8)).ok_or_else(|| Error::Malformed("CRISP share: size".into()))?;
    if buf.len() < need {
        return Err(Error::Malformed("CRISP share: truncated".into()));
    }
    let mut v = Vec::with_capacity(expect);
    for c in buf[8..need].chunks_exact(vb) {
        let mut a = [0u8; 16];
        a[..vb].copy_from_slice(c);
        let x = u128::from_le_bytes(a);
        if x & !mask128(k) != 0 {
            return Err(Error::Malformed(format!("CRISP share: a value wider than {k} bits")));
        }
        v.push(x);
    }
    *buf = &buf[need..];
    Ok(v)
}

const TAG_BATCH: u128 = 0;
const TAG_MU: u128 = 1;
const TAG_EPOCH: u128 = 2;
const TAG_CKKS_KEY: u128 = 3;

/// The seed of the epoch's `ckks` secret key (both key shares and every
/// layer's ciphertexts of the epoch derive from it).
fn ckks_key_seed(session: Block, epoch: u64) -> Block {
    Prf::new(epoch_key(session, epoch)).eval(Block(TAG_CKKS_KEY << 120))
}

/// The `ckks` backend's RLWE context (built once per process).
pub(crate) fn ckks_context() -> Result<std::sync::Arc<hush_rlwe::Context>> {
    static CTX: std::sync::OnceLock<std::sync::Arc<hush_rlwe::Context>> = std::sync::OnceLock::new();
    if let Some(c) = CTX.get() {
        return Ok(c.clone());
    }
    let c = hush_rlwe::Context::new(hush_rlwe::ckks_crisp::params()).map_err(|e| Error::Refused(format!("CKKS context: {e}")))?;
    Ok(CTX.get_or_init(|| std::sync::Arc::new(c)).clone())
}

/// The epoch's secret key from its seed (the client derives the same).
pub(crate) fn ckks_secret_key(ctx: &hush_rlwe::Context, seed: Block) -> hush_rlwe::he::SecretKey {
    hush_rlwe::he::SecretKey::generate(ctx, &mut Prg::with_nonce(seed, 0))
}

fn ckks_err(e: hush_rlwe::Error) -> Error {
    Error::Refused(format!("CRISP CKKS dealing: {e}"))
}

fn epoch_key(session: Block, epoch: u64) -> Block {
    Prf::new(session).eval(Block((TAG_EPOCH << 120) | epoch as u128))
}

fn batch_key(session: Block, p: &CrispParams, n: u32) -> Block {
    let x = (TAG_BATCH << 120)
        | ((p.op.code() as u128) << 112)
        | ((p.ell as u128 & 0xff) << 104)
        | ((p.s as u128 & 0xff) << 96)
        | ((n as u128) << 64)
        | p.batch as u128;
    let mut kb = Prf::new(epoch_key(session, p.epoch)).eval(Block(x));
    if let CrispOp::Lin(sh) | CrispOp::CkksLin(sh) = &p.op {
        // The shape selects the key too (CBC over its fixed-length,
        // tag-prefixed encoding, a prefix-free PRF input): a request with
        // another shape than the peer's gets independent values.
        let mut w = Writer::default();
        sh.encode(&mut w);
        for c in w.0.chunks(16) {
            let mut a = [0u8; 16];
            a[..c.len()].copy_from_slice(c);
            kb = Prf::new(kb).eval(Block(u128::from_le_bytes(a)));
        }
    }
    kb
}

fn mac_key(session: Block, epoch: u64, k: u32) -> u128 {
    Prf::new(epoch_key(session, epoch)).eval(Block(TAG_MU << 120)).0 & mask128(k)
}

/// The dealing kind (see the module docs).
pub struct CrispMac;

/// The one instance providers register.
pub static CRISP_MAC: CrispMac = CrispMac;

impl CrispMac {
    pub const KIND: &'static str = "crisp/mac";
    /// The label every request maps to: the session key's (see the docs).
    pub const SESSION_LABEL: &'static str = "crisp/mac/session";

    pub fn request(p: CrispParams, n: u32) -> DealRequest {
        DealRequest::new(Self::KIND, p.batch, n, p.encode())
    }

    /// Both parties' shares (what a dealer serving both computes).
    fn deal_both(session: Block, n: u32, p: &CrispParams, want: [bool; 2]) -> Result<[Vec<u8>; 2]> {
        let k = p.k();
        let mut mu = mac_key(session, p.epoch, k);
        let kb = batch_key(session, p, n);
        let mut out = [Vec::new(), Vec::new()];
        let n = n as usize;
        match p.op {
            CrispOp::MacKey => {
                if n != 1 {
                    return Err(Error::Refused("the CRISP MAC key is dealt as one element".into()));
                }
                put_values(&mut out[0], &[mu], k);
                put_values(&mut out[1], &[], k);
            }
            CrispOp::Relu => {
                let mut vprg = Prg::with_nonce(kb, 1);
                let mut kprg = Prg::with_nonce(kb, 2);
                let kbytes = MacReluKey::size_bytes(p.ell, k);
                for (b, o) in out.iter_mut().enumerate() {
                    if want[b] {
                        o.reserve(8 + n * kbytes);
                        o.extend_from_slice(&(n as u64).to_le_bytes());
                    }
                }
                for _ in 0..n {
                    let mut r = vprg.random_block().0 & mask128(k);
                    let (k0, k1) = mac_relu_gen(&mut kprg, p.ell, k, r, mu).map_err(|e| Error::Refused(e.to_string()))?;
                    r.zeroize();
                    if want[0] {
                        k0.append_to(&mut out[0]);
                    }
                    if want[1] {
                        k1.append_to(&mut out[1]);
                    }
                }
            }
            CrispOp::Trunc { f } => {
                let mut vprg = Prg::with_nonce(kb, 1);
                let mut kprg = Prg::with_nonce(kb, 2);
                let kbytes = <MacTruncKey as MacGate>::size_bytes(p.ell, k, f);
                for (b, o) in out.iter_mut().enumerate() {
                    if want[b] {
                        o.reserve(8 + n * kbytes);
                        o.extend_from_slice(&(n as u64).to_le_bytes());
                    }
                }
                for _ in 0..n {
                    let mut r = vprg.random_block().0 & mask128(k);
                    let (k0, k1) = mac_trunc_gen(&mut kprg, p.ell, k, f, r, mu).map_err(|e| Error::Refused(e.to_string()))?;
                    r.zeroize();
                    if want[0] {
                        MacGate::append_to(&k0, &mut out[0]);
                    }
                    if want[1] {
                        MacGate::append_to(&k1, &mut out[1]);
                    }
                }
            }
            CrispOp::Lin(sh) => {
                if n != 1 {
                    return Err(Error::Refused("a CRISP linear triple is dealt as one element".into()));
                }
                let (wl, il, ol) = sh.lens().ok_or_else(|| Error::Refused(format!("CRISP linear shape {sh:?} out of range")))?;
                let m = mask128(k);
                // One stream per vector: no share of one role is a shifted
                // piece of the other role's.
                let draw = |nonce: u64, n: usize| -> Vec<u128> {
                    let mut prg = Prg::with_nonce(kb, nonce);
                    (0..n).map(|_| prg.random_block().0 & m).collect()
                };
                let mut a = draw(4, wl);
                let mut b = draw(5, il);
                // β_1 uniform and β_0 = μ·B − β_1: authenticated shares of
                // the client's mask B (the opening x̃ − B is then checked;
                // see crate::crisp::linear).
                let mut beta1 = draw(6, il);
                let mut beta0: Vec<u128> = b.iter().zip(&beta1).map(|(x, t)| mu.wrapping_mul(*x).wrapping_sub(*t) & m).collect();
                let mut c1 = draw(7, ol);
                let mut c1b = draw(8, ol);
                let mut c = sh.apply(&a, &b, m).map_err(Error::Refused)?;
                let mut c2 = sh.apply(&a, &beta1, m).map_err(Error::Refused)?;
                c.iter_mut().zip(&c1).for_each(|(x, y)| *x = x.wrapping_sub(*y) & m);
                c2.iter_mut().zip(&c1b).for_each(|(x, y)| *x = x.wrapping_sub(*y) & m);
                if want[0] {
                    put_values(&mut out[0], &a, k);
                    put_values(&mut out[0], &beta0, k);
                    put_values(&mut out[0], &c, k);
                    put_values(&mut out[0], &c2, k);
                }
                if want[1] {
                    put_values(&mut out[1], &b, k);
                    put_values(&mut out[1], &beta1, k);
                    put_values(&mut out[1], &c1, k);
                    put_values(&mut out[1], &c1b, k);
                }
                for v in [&mut a, &mut b, &mut beta0, &mut beta1, &mut c1, &mut c1b, &mut c, &mut c2] {
                    v.zeroize();
                }
            }
            CrispOp::CkksKey => {
                if n != 1 {
                    return Err(Error::Refused("the CRISP CKKS key is dealt as one element".into()));
                }
                let seed = ckks_key_seed(session, p.epoch);
                if want[0] {
                    let ctx = ckks_context()?;
                    hush_rlwe::ckks_crisp::budget(&ctx, &hush_rlwe::ckks_crisp::Config::new(p.ell, k), 1).map_err(ckks_err)?;
                    let sk = ckks_secret_key(&ctx, seed);
                    sk.public_key(&ctx, &mut Prg::with_nonce(seed, 1)).write(&ctx, &mut out[0]);
                }
                if want[1] {
                    out[1].extend_from_slice(&seed.to_bytes());
                }
            }
            CrispOp::CkksLin(sh) => {
                if n != 1 {
                    return Err(Error::Refused("a CRISP CKKS layer's ciphertexts are dealt as one element".into()));
                }
                let (_, il, _) = sh.lens().ok_or_else(|| Error::Refused(format!("CRISP linear shape {sh:?} out of range")))?;
                let m = mask128(k);
                let draw = |nonce: u64, n: usize| -> Vec<u128> {
                    let mut prg = Prg::with_nonce(kb, nonce);
                    (0..n).map(|_| prg.random_block().0 & m).collect()
                };
                let mut b = draw(5, il);
                let mut beta1 = draw(6, il);
                if want[0] {
                    let mut beta0: Vec<u128> = b.iter().zip(&beta1).map(|(x, t)| mu.wrapping_mul(*x).wrapping_sub(*t) & m).collect();
                    put_values(&mut out[0], &beta0, k);
                    beta0.zeroize();
                    let ctx = ckks_context()?;
                    let cfg = hush_rlwe::ckks_crisp::Config::new(p.ell, k);
                    let sk = ckks_secret_key(&ctx, ckks_key_seed(session, p.epoch));
                    let cts = hush_rlwe::ckks_crisp::encrypt_input(&ctx, &cfg, &sk, &crate::crisp_ckks::shape(&sh), &b, &beta1, Prg::with_nonce(kb, 9).random_block()).map_err(ckks_err)?;
                    out[0].extend_from_slice(&(cts.len() as u64).to_le_bytes());
                    out[0].extend_from_slice(&cts);
                }
                if want[1] {
                    put_values(&mut out[1], &b, k);
                    put_values(&mut out[1], &beta1, k);
                }
                b.zeroize();
                beta1.zeroize();
            }
            CrispOp::ClientMask => {
                let mut prg = Prg::with_nonce(kb, 3);
                let mut a = Vec::with_capacity(n);
                let mut s1 = Vec::with_capacity(n);
                let mut s0 = Vec::with_capacity(n);
                for _ in 0..n {
                    let x = prg.random_block().0 & mask128(k);
                    let t = prg.random_block().0 & mask128(k);
                    a.push(x);
                    s1.push(t);
                    s0.push(mu.wrapping_mul(x).wrapping_sub(t) & mask128(k));
                }
                put_values(&mut out[0], &s0, k);
                put_values(&mut out[1], &a, k);
                put_values(&mut out[1], &s1, k);
                a.zeroize();
                s1.zeroize();
                s0.zeroize();
            }
        }
        mu.zeroize();
        for (b, o) in out.iter_mut().enumerate() {
            if !want[b] {
                o.zeroize();
                o.clear();
            }
        }
        Ok(out)
    }
}

impl Description for CrispMac {
    fn kind(&self) -> &'static str {
        Self::KIND
    }
    fn label(&self, batch: u64, n: u32, params: &[u8]) -> Result<String> {
        let p = CrispParams::decode(params)?;
        if p.batch != batch {
            return Err(Error::Refused(format!("CRISP parameters name batch {} in a request for batch {batch}", p.batch)));
        }
        if matches!(p.op, CrispOp::MacKey | CrispOp::Lin(_) | CrispOp::CkksKey | CrispOp::CkksLin(_)) && n != 1 {
            return Err(Error::Refused("the CRISP MAC key is dealt as one element".into()));
        }
        if p.op == CrispOp::MacKey && p.epoch != batch {
            return Err(Error::Refused("a CRISP MAC key opens its own epoch (epoch = batch)".into()));
        }
        if p.op != CrispOp::MacKey && p.epoch >= batch {
            return Err(Error::Refused(format!("CRISP epoch {} must precede batch {batch}", p.epoch)));
        }
        Ok(Self::SESSION_LABEL.to_string())
    }
    fn deal(&self, key: Block, party: u8, n: u32, params: &[u8]) -> Result<Vec<u8>> {
        let p = CrispParams::decode(params)?;
        let mut v = Self::deal_both(key, n, &p, [party == 0, party == 1])?;
        Ok(std::mem::take(&mut v[party as usize & 1]))
    }
    fn deal_pair(&self, key: Block, n: u32, params: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
        let p = CrispParams::decode(params)?;
        let [a, b] = Self::deal_both(key, n, &p, [true, true])?;
        Ok((a, b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(op: CrispOp, batch: u64) -> CrispParams {
        CrispParams { op, ell: 37, s: 40, batch, epoch: if op == CrispOp::MacKey { batch } else { 0 } }
    }

    #[test]
    fn label_binds_batch_and_is_session_wide() {
        let p = params(CrispOp::Relu, 7);
        assert_eq!(CRISP_MAC.label(7, 10, &p.encode()).unwrap(), CrispMac::SESSION_LABEL);
        assert!(CRISP_MAC.label(8, 10, &p.encode()).is_err(), "parameter batch must equal the request's");
        assert!(CRISP_MAC.label(7, 2, &params(CrispOp::MacKey, 7).encode()).is_err());
        let bad = CrispParams { op: CrispOp::Relu, ell: 64, s: 70, batch: 1, epoch: 0 };
        assert!(CRISP_MAC.label(3, 1, &CrispParams { epoch: 2, ..params(CrispOp::MacKey, 3) }.encode()).is_err(), "MacKey: epoch = batch");
        assert!(CRISP_MAC.label(3, 1, &CrispParams { epoch: 3, ..params(CrispOp::Relu, 3) }.encode()).is_err(), "epoch precedes batch");
        assert!(CRISP_MAC.label(1, 1, &bad.encode()).is_err(), "k > 128 refused");
        assert!(CRISP_MAC.label(1, 1, &[1, 2, 3]).is_err());
    }

    #[test]
    fn shares_are_consistent_and_the_client_never_gets_mu() {
        let key = Block(0xabc);
        let k = 77;
        let mk = params(CrispOp::MacKey, 0);
        let (s0, s1) = CRISP_MAC.deal_pair(key, 1, &mk.encode()).unwrap();
        let mu = take_values(&mut &s0[..], 1, k).unwrap()[0];
        assert_eq!(take_values(&mut &s1[..], 0, k).unwrap().len(), 0, "party 1's MAC-key share is empty");
        assert_eq!(CRISP_MAC.deal(key, 1, 1, &mk.encode()).unwrap(), s1);
        // another epoch has another μ
        let (e0, _) = CRISP_MAC.deal_pair(key, 1, &params(CrispOp::MacKey, 5).encode()).unwrap();
        assert_ne!(take_values(&mut &e0[..], 1, k).unwrap()[0], mu, "a new epoch draws a new μ");
        // the same μ in every batch of an epoch; independent masks per batch
        let cm = |b| params(CrispOp::ClientMask, b);
        let mut first_a = None;
        for b in 1..4u64 {
            let (p0, p1) = CRISP_MAC.deal_pair(key, 50, &cm(b).encode()).unwrap();
            assert_eq!(p0, CRISP_MAC.deal(key, 0, 50, &cm(b).encode()).unwrap());
            assert_eq!(p1, CRISP_MAC.deal(key, 1, 50, &cm(b).encode()).unwrap());
            let s0 = take_values(&mut &p0[..], 50, k).unwrap();
            let mut r1 = &p1[..];
            let a = take_values(&mut r1, 50, k).unwrap();
            let s1 = take_values(&mut r1, 50, k).unwrap();
            for i in 0..50 {
                assert_eq!(s0[i].wrapping_add(s1[i]) & mask128(k), mu.wrapping_mul(a[i]) & mask128(k));
            }
            if let Some(f) = &first_a {
                assert_ne!(f, &a, "batches give independent masks");
            }
            first_a = Some(a);
        }
        // ReLU keys: both parties' r shares sum to one r; the keys decode
        let rl = params(CrispOp::Relu, 9);
        let (p0, p1) = CRISP_MAC.deal_pair(key, 3, &rl.encode()).unwrap();
        let kb = MacReluKey::size_bytes(37, k);
        assert_eq!(p0.len(), 8 + 3 * kb);
        let k0 = MacReluKey::from_bytes(&p0[8..8 + kb]).unwrap();
        let k1 = MacReluKey::from_bytes(&p1[8..8 + kb]).unwrap();
        assert_eq!((k0.party(), k1.party()), (0, 1));
        let r = k0.r_share().wrapping_add(k1.r_share()) & mask128(k);
        let out0 = k0.eval(mu, r); // x̃ = 0
        let out1 = k1.eval(0, r);
        assert_eq!(out0.y.wrapping_add(out1.y) & mask128(k), 0);
        assert_eq!(out0.mx.wrapping_add(out1.mx) & mask128(k), 0);
    }

    #[test]
    fn linear_triples_are_consistent_and_bound_to_their_shape() {
        let key = Block(0x11);
        let k = 77;
        let m = mask128(k);
        let sh = LinShape::Conv { c_in: 2, h: 5, w: 4, c_out: 3, kh: 3, kw: 2, stride: [1, 2], pads: [1, 0, 1, 1] };
        let (wl, il, ol) = sh.lens().unwrap();
        let p = CrispParams { op: CrispOp::Lin(sh), ell: 37, s: 40, batch: 4, epoch: 1 };
        assert_eq!(CrispParams::decode(&p.encode()).unwrap(), p, "shape round-trips");
        assert!(CRISP_MAC.label(4, 2, &p.encode()).is_err(), "one triple per request");
        let (s0, s1) = CRISP_MAC.deal_pair(key, 1, &p.encode()).unwrap();
        assert_eq!(s1, CRISP_MAC.deal(key, 1, 1, &p.encode()).unwrap());
        let mut r0 = &s0[..];
        let a = take_values(&mut r0, wl, k).unwrap();
        let beta0 = take_values(&mut r0, il, k).unwrap();
        let c0 = take_values(&mut r0, ol, k).unwrap();
        let c0b = take_values(&mut r0, ol, k).unwrap();
        assert!(r0.is_empty());
        let mut r1 = &s1[..];
        let b = take_values(&mut r1, il, k).unwrap();
        let beta1 = take_values(&mut r1, il, k).unwrap();
        let c1 = take_values(&mut r1, ol, k).unwrap();
        let c1b = take_values(&mut r1, ol, k).unwrap();
        assert!(r1.is_empty());
        let mu = mac_key(key, 1, k);
        for j in 0..il {
            assert_eq!(beta0[j].wrapping_add(beta1[j]) & m, mu.wrapping_mul(b[j]) & m, "β_0 + β_1 = μ·B");
        }
        let ab = sh.apply(&a, &b, m).unwrap();
        let ab2 = sh.apply(&a, &beta1, m).unwrap();
        for j in 0..ol {
            assert_eq!(c0[j].wrapping_add(c1[j]) & m, ab[j]);
            assert_eq!(c0b[j].wrapping_add(c1b[j]) & m, ab2[j]);
        }
        // A client host asking the same batch with another shape gets values
        // unrelated to the server's A (no shifted piece of its stream)
        let other = LinShape::Dense { n_in: wl as u32, n_out: 1 };
        let q = CrispParams { op: CrispOp::Lin(other), ..p };
        let t1 = CRISP_MAC.deal(key, 1, 1, &q.encode()).unwrap();
        let bx = take_values(&mut &t1[..], wl, k).unwrap();
        assert!(a.iter().all(|v| !bx.contains(v)), "a client share under another shape leaks the server's A");
    }

    #[test]
    fn ckks_key_and_layer_masks_are_consistent_and_bound_to_epoch_and_shape() {
        let key = Block(0x77);
        let (ell, s) = (37, 40);
        let k = ell + s;
        let m = mask128(k);
        let kp = |batch, epoch| CrispParams { op: CrispOp::CkksKey, ell, s, batch, epoch };
        // the client's key seed: one per epoch, 16 bytes; the server's share a public key
        let (pk, seed) = CRISP_MAC.deal_pair(key, 1, &kp(3, 1).encode()).unwrap();
        let ctx = ckks_context().unwrap();
        assert_eq!(seed.len(), 16);
        assert_eq!(pk.len(), hush_rlwe::he::SeededCt::wire_len(&ctx));
        assert_eq!(CRISP_MAC.deal(key, 1, 1, &kp(4, 1).encode()).unwrap(), seed, "the same key in every batch of an epoch");
        assert_ne!(CRISP_MAC.deal(key, 1, 1, &kp(4, 2).encode()).unwrap(), seed, "another epoch, another key");
        assert!(CRISP_MAC.label(3, 2, &kp(3, 1).encode()).is_err(), "one key per request");
        // a layer: β_0 + β_1 = μ·B; the server's ciphertexts have the layout's size
        let sh = LinShape::Dense { n_in: 6, n_out: 4 };
        let p = CrispParams { op: CrispOp::CkksLin(sh), ell, s, batch: 5, epoch: 1 };
        assert_eq!(CrispParams::decode(&p.encode()).unwrap(), p, "shape round-trips");
        let (s0, s1) = CRISP_MAC.deal_pair(key, 1, &p.encode()).unwrap();
        assert_eq!(s1, CRISP_MAC.deal(key, 1, 1, &p.encode()).unwrap());
        let mut r1 = &s1[..];
        let b = take_values(&mut r1, 6, k).unwrap();
        let beta1 = take_values(&mut r1, 6, k).unwrap();
        assert!(r1.is_empty());
        let mut r0 = &s0[..];
        let beta0 = take_values(&mut r0, 6, k).unwrap();
        let cfg = hush_rlwe::ckks_crisp::Config::new(ell, k);
        let want = hush_rlwe::ckks_crisp::input_bytes(&ctx, &cfg, &crate::crisp_ckks::shape(&sh)).unwrap();
        assert_eq!(u64::from_le_bytes(r0[..8].try_into().unwrap()), want as u64);
        assert_eq!(r0.len(), 8 + want);
        let mu = mac_key(key, 1, k);
        for j in 0..6 {
            assert_eq!(beta0[j].wrapping_add(beta1[j]) & m, mu.wrapping_mul(b[j]) & m, "β_0 + β_1 = μ·B");
        }
        // another shape in the same batch: independent masks
        let q = CrispParams { op: CrispOp::CkksLin(LinShape::Dense { n_in: 6, n_out: 5 }), ..p };
        let t1 = CRISP_MAC.deal(key, 1, 1, &q.encode()).unwrap();
        let bx = take_values(&mut &t1[..], 6, k).unwrap();
        assert!(b.iter().all(|v| !bx.contains(v)));
        // a lift the HE layer cannot hold exactly is refused, not dealt
        let big = CrispParams { op: CrispOp::CkksKey, ell: 64, s: 60, batch: 3, epoch: 1 };
        assert!(CRISP_MAC.deal(key, 0, 1, &big.encode()).is_err());
    }
}
