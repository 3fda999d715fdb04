//! FSS gates on masked inputs (BCGGIKR21 §2: FSS for the *offset family*
//! g^{[r_in, r_out]}(x̂) = g(x̂ − r_in) + r_out).
//!
//! A wire value x ∈ Z_2^n is opened masked as x̂ = x + r_in (mod 2^n); the
//! dealer, who knows r_in and chooses r_out, gives each party a key; the two
//! parties evaluate locally on the public x̂ and obtain additive shares of
//! g(x) + r_out. All gates here are **exact over the whole ring**, including
//! the wrap-around of x + r_in.
//!
//! * **DReLU** (sign): DReLU(x) = 1 if x ≥ 0 as a signed n-bit value. With
//!   x̂ = (x̂_msb, x̂_low), r_in = (r_msb, r_low) split at bit n−1,
//!   MSB(x) = x̂_msb ⊕ r_msb ⊕ \[x̂_low < r_low\] (the borrow out of the low
//!   n−1 bits), so one (n−1)-bit DCF with α = r_low suffices — the reduction
//!   BCGGIKR21 use for their sign/DReLU and shift gates (§5). The XOR with
//!   the secret r_msb is folded into the DCF payload: β = 1 − 2·r_msb and
//!   shares of r_msb give u = r_msb ⊕ \[x̂_low < r_low\] arithmetically, and
//!   the public p = 1 ⊕ x̂_msb selects u or 1 − u.
//! * **ReLU** as a two-piece spline with output coefficients (BCGGIKR21
//!   splines; CRISP Alg. 1-2, whose eq. 2 is only correct "with high
//!   probability"; this version is exact): ReLU(x) = d·x with d = DReLU(x),
//!   and x = x̂ − r_in, so shares of the coefficients (d, d·r_in) give
//!   ReLU(x) = d·x̂ − d·r_in by a local product with the public x̂. One
//!   two-lane (n−1)-bit DCF with payload β = (1 − 2r_msb, r_in·(1 − 2r_msb))
//!   delivers both coefficients.
//! * **Less-than** against a dealer-chosen threshold c (secret from the
//!   evaluators, e.g. a module-derived mask in the TAMI-style millionaires'
//!   setting; public constants work too): \[x < c\] for unsigned x. As
//!   integers x̂ ∈ [0, N) and, with e = r_in + c,
//!   \[x < c\] = \[x̂ < e mod N\] − \[x̂ < r_in\] + \[e ≥ N\] (interval containment
//!   of x̂ in the cyclic interval [r_in, r_in + c), BCGGIKR21 §4), so two
//!   n-bit DCFs (α = e mod N, β = 1 and α = r_in, β = −1) and shares of the
//!   constant \[e ≥ N\] + r_out.
//!
//! **Security**: semi-honest, keys from a dealer (the trusted module in
//! `tee` mode). r_in must be uniformly random and used for exactly one
//! opening; r_out likewise if the output is opened. Each key alone is
//! pseudorandom (it hides r_in, r_out and c).
//!
//! Output groups: DReLU and less-than output over Z_2^out_bits (out_bits = 1
//! gives XOR shares of the bit), ReLU over Z_2^bits.

use crate::codec::{KeyOut, Reader, SliceWriter, Writer};
use crate::batch::DcfKeyBatch;
use crate::dcf::{self, DcfKey};
use crate::{mask, Error};
use hush_primitives::Prg;
use zeroize::Zeroize;

const TAG_DRELU: u8 = 0xE1;
const TAG_RELU: u8 = 0xE2;
const TAG_LT: u8 = 0xE3;
/// Gate header: tag, party, bits, out_bits.
const GATE_HEADER: usize = 4;

fn check_gate(bits: u32, out_bits: u32) -> Result<(), Error> {
    if !(1..=64).contains(&bits) {
        return Err(Error::Param { name: "bits", value: bits as u64, reason: "must be in 1..=64" });
    }
    if !(1..=64).contains(&out_bits) {
        return Err(Error::Param { name: "out_bits", value: out_bits as u64, reason: "must be in 1..=64" });
    }
    Ok(())
}

/// Additive shares of `v` over Z_2^m from the PRG.
fn share(prg: &mut Prg, v: u64, m: u32) -> [u64; 2] {
    let a = prg.next_u64() & mask(m);
    [a, v.wrapping_sub(a) & mask(m)]
}

fn read_gate_header(r: &mut Reader<'_>, what: &'static str, tag: u8) -> Result<(u8, u32, u32), Error> {
    let h = [r.u8()?, r.u8()?, r.u8()?, r.u8()?];
    if h[0] != tag {
        return Err(Error::Header { what, reason: "wrong tag" });
    }
    if h[1] > 1 {
        return Err(Error::Header { what, reason: "party must be 0 or 1" });
    }
    let (bits, out_bits) = (h[2] as u32, h[3] as u32);
    if !(1..=64).contains(&bits) || !(1..=64).contains(&out_bits) {
        return Err(Error::Header { what, reason: "bits and out_bits must be in 1..=64" });
    }
    Ok((h[1], bits, out_bits))
}

fn check_inner(what: &'static str, k: &DcfKey, party: u8, bits: u32, out_bits: u32, lanes: u32) -> Result<(), Error> {
    if k.party != party || k.bits != bits || k.out_bits != out_bits || k.lanes != lanes {
        return Err(Error::Header { what, reason: "embedded DCF key does not match the gate header" });
    }
    Ok(())
}

// ---------------------------------------------------------------- DReLU

/// One party's DReLU gate key: an (n−1)-bit one-lane DCF and two offsets.
#[derive(Clone)]
pub struct DreluKey {
    party: u8,
    bits: u32,
    out_bits: u32,
    /// c[0] (used when x̂_msb = 1) and c[1] (when x̂_msb = 0): the share of
    /// r_msb (resp. 1 − r_msb) plus the share of r_out.
    c: [u64; 2],
    dcf: DcfKey,
}

impl Zeroize for DreluKey {
    fn zeroize(&mut self) {
        self.c.zeroize();
        self.dcf.zeroize();
    }
}
impl Drop for DreluKey {
    fn drop(&mut self) {
        self.c.zeroize();
    }
}
impl std::fmt::Debug for DreluKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DreluKey").field("party", &self.party).field("bits", &self.bits).field("out_bits", &self.out_bits).finish_non_exhaustive()
    }
}

impl DreluKey {
    pub fn party(&self) -> u8 {
        self.party
    }
    pub fn bits(&self) -> u32 {
        self.bits
    }
    pub fn out_bits(&self) -> u32 {
        self.out_bits
    }
    /// The embedded DCF key.
    pub fn dcf(&self) -> &DcfKey {
        &self.dcf
    }
    /// Encoded size for `bits`-bit inputs and `out_bits` output.
    pub fn size_bytes(bits: u32, out_bits: u32) -> usize {
        GATE_HEADER + 16 + DcfKey::size_bytes(bits.saturating_sub(1), out_bits)
    }
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::size_bytes(self.bits, self.out_bits));
        self.append_to(&mut out);
        out
    }
    /// Appends the encoding of [`Self::to_bytes`] to `out` (no temporary).
    pub fn append_to(&self, out: &mut Vec<u8>) {
        let mut w = Writer::from_vec(std::mem::take(out));
        w.bytes(&[TAG_DRELU, self.party, self.bits as u8, self.out_bits as u8]);
        w.u64(self.c[0]);
        w.u64(self.c[1]);
        self.dcf.write(&mut w);
        *out = w.buf;
    }
    /// Decodes and validates a key; never panics.
    pub fn from_bytes(b: &[u8]) -> Result<Self, Error> {
        const W: &str = "DreluKey";
        let mut r = Reader::new(W, b);
        let (party, bits, out_bits) = read_gate_header(&mut r, W, TAG_DRELU)?;
        let c = [r.u64_below(out_bits, "offset")?, r.u64_below(out_bits, "offset")?];
        let dcf = DcfKey::read(&mut r)?;
        r.finish()?;
        check_inner(W, &dcf, party, bits - 1, out_bits, 1)?;
        Ok(DreluKey { party, bits, out_bits, c, dcf })
    }
}

/// DReLU key generation: shares over Z_2^out_bits of DReLU(x̂ − r_in) + r_out,
/// DReLU(x) = \[x ≥ 0\] for signed `bits`-bit x. `r_in` is reduced mod
/// 2^bits, `r_out` mod 2^out_bits. Deterministic given `prg`.
///
/// Panics if `bits` or `out_bits` is outside 1..=64 (see [`try_drelu_gen`]).
pub fn drelu_gen(prg: &mut Prg, bits: u32, r_in: u64, r_out: u64, out_bits: u32) -> (DreluKey, DreluKey) {
    try_drelu_gen(prg, bits, r_in, r_out, out_bits).expect("drelu_gen: bad parameters")
}

/// [`drelu_gen`] returning [`Error::Param`] on bad parameters.
pub fn try_drelu_gen(prg: &mut Prg, bits: u32, r_in: u64, r_out: u64, out_bits: u32) -> Result<(DreluKey, DreluKey), Error> {
    check_gate(bits, out_bits)?;
    let r_in = r_in & mask(bits);
    let r_msb = r_in >> (bits - 1);
    let r_low = r_in & mask(bits - 1);
    let m = out_bits;
    let beta = if r_msb == 1 { u64::MAX } else { 1 } & mask(m);
    let (k0, k1) = dcf::gen_lanes(prg, bits - 1, r_low, [beta, 0], m, 1);
    let off = share(prg, r_msb, m);
    let ro = share(prg, r_out, m);
    let mk = |b: usize, dcf: DcfKey| {
        let c0 = off[b].wrapping_add(ro[b]) & mask(m);
        let c1 = ((b == 0) as u64).wrapping_sub(off[b]).wrapping_add(ro[b]) & mask(m);
        DreluKey { party: b as u8, bits, out_bits, c: [c0, c1], dcf }
    };
    Ok((mk(0, k0), mk(1, k1)))
}

#[inline(always)]
fn drelu_finish(key: &DreluKey, x_hat: u64, dv: u64) -> u64 {
    let p_one = (x_hat >> (key.bits - 1)) & 1 == 0; // p = 1 ⊕ x̂_msb
    let y = if p_one { key.c[1].wrapping_sub(dv) } else { key.c[0].wrapping_add(dv) };
    y & mask(key.out_bits)
}

/// Evaluates a DReLU key at the public masked input x̂ (reduced mod 2^bits).
pub fn drelu_eval(party: u8, key: &DreluKey, x_hat: u64) -> u64 {
    let x_hat = x_hat & mask(key.bits);
    let dv = dcf::eval_lanes(party, &key.dcf, x_hat)[0];
    drelu_finish(key, x_hat, dv)
}

/// Batched [`drelu_eval`]. Panics if the slices differ in length.
pub fn drelu_eval_batch(party: u8, keys: &[DreluKey], x_hat: &[u64], out: &mut [u64]) {
    assert_eq!(keys.len(), x_hat.len(), "drelu_eval_batch: keys and inputs differ in length");
    assert_eq!(keys.len(), out.len(), "drelu_eval_batch: keys and outputs differ in length");
    dcf::eval_engine(party, keys.len(), |i| &keys[i].dcf, x_hat, |i, v| {
        let k = &keys[i];
        out[i] = drelu_finish(k, x_hat[i] & mask(k.bits), v[0]);
    });
}

/// Many DReLU keys of one shape in the evaluation layout: the DCFs in a
/// [`DcfKeyBatch`], the offsets alongside. Built offline
/// ([`DreluBatch::push`]); [`DreluBatch::eval`] parses nothing.
#[derive(Default)]
pub struct DreluBatch {
    bits: u32,
    out_bits: u32,
    c: Vec<[u64; 2]>,
    dcf: DcfKeyBatch,
}

impl Drop for DreluBatch {
    fn drop(&mut self) {
        self.c.zeroize();
    }
}

impl DreluBatch {
    /// An empty batch with room for `n` keys.
    pub fn with_capacity(n: usize, bits: u32, out_bits: u32) -> Self {
        DreluBatch { bits, out_bits, c: Vec::with_capacity(n), dcf: DcfKeyBatch::with_capacity(n, bits.saturating_sub(1), out_bits, 1) }
    }
    /// Builds a batch from keys of one shape.
    pub fn from_keys(keys: &[DreluKey]) -> Result<Self, Error> {
        let mut b = keys.first().map_or_else(Self::default, |k| Self::with_capacity(keys.len(), k.bits, k.out_bits));
        for k in keys {
            b.push(k)?;
        }
        Ok(b)
    }
    /// Appends a key; errors if its shape differs from the batch's.
    pub fn push(&mut self, k: &DreluKey) -> Result<(), Error> {
        if self.c.is_empty() {
            self.bits = k.bits;
            self.out_bits = k.out_bits;
        } else if (k.bits, k.out_bits) != (self.bits, self.out_bits) {
            return Err(Error::Header { what: "DreluBatch", reason: "key shape differs from the batch" });
        }
        self.dcf.push(&k.dcf)?;
        self.c.push(k.c);
        Ok(())
    }
    /// Appends `m` keys from their encodings ([`DreluKey::to_bytes`], back
    /// to back) without a key object per gate: the offsets read here, the
    /// DCF keys decoded straight into the batch layout on every core
    /// ([`DcfKeyBatch::extend_encoded`]). The checks of
    /// [`DreluKey::from_bytes`]; on error the batch is emptied.
    pub fn extend_encoded(&mut self, enc: &[u8], m: usize) -> Result<(), Error> {
        const W: &str = "DreluKey";
        if m == 0 {
            return Ok(());
        }
        let mut r = Reader::new(W, enc);
        let (party, bits, out_bits) = read_gate_header(&mut r, W, TAG_DRELU)?;
        let kb = Self::key_len(bits, out_bits);
        if enc.len() != m * kb {
            return Err(Error::Length {
                what: W,
                expected: m * kb,
                got: enc.len(),
            });
        }
        if !self.c.is_empty() && (bits, out_bits) != (self.bits, self.out_bits) {
            return Err(Error::Header {
                what: "DreluBatch",
                reason: "key shape differs from the batch",
            });
        }
        let res = (|| {
            self.c.reserve(m);
            for k in enc.chunks_exact(kb) {
                // Every key's header equals the first one's (checked above).
                if k[..GATE_HEADER] != enc[..GATE_HEADER] {
                    return Err(Error::Header {
                        what: "DreluBatch",
                        reason: "key shape differs from the batch",
                    });
                }
                let mut r = Reader::new(W, &k[GATE_HEADER..]);
                self.c.push([
                    r.u64_below(out_bits, "offset")?,
                    r.u64_below(out_bits, "offset")?,
                ]);
            }
            self.dcf
                .extend_encoded(enc, m, kb, GATE_HEADER + 16, (party, bits - 1, out_bits, 1))
        })();
        if res.is_err() {
            self.c.zeroize();
            self.c.clear();
            self.dcf.zeroize();
        } else {
            self.bits = bits;
            self.out_bits = out_bits;
        }
        res
    }
    fn key_len(bits: u32, out_bits: u32) -> usize {
        DreluKey::size_bytes(bits, out_bits)
    }
    pub fn len(&self) -> usize {
        self.c.len()
    }
    pub fn is_empty(&self) -> bool {
        self.c.is_empty()
    }
    /// [`drelu_eval`] of key i at `x_hat[i]` into `out[i]` for all i.
    /// Panics if the slices do not have [`len`](Self::len) elements.
    pub fn eval(&self, party: u8, x_hat: &[u64], out: &mut [u64]) {
        assert_eq!(x_hat.len(), self.len(), "DreluBatch::eval: keys and inputs differ in length");
        self.dcf.eval(party, x_hat, out, None);
        let sh = self.bits.saturating_sub(1);
        let om = mask(self.out_bits);
        for ((o, &x), c) in out.iter_mut().zip(x_hat).zip(&self.c) {
            let p_one = (x >> sh) & 1 == 0;
            *o = if p_one { c[1].wrapping_sub(*o) } else { c[0].wrapping_add(*o) } & om;
        }
    }
}

// ---------------------------------------------------------------- ReLU

/// One party's ReLU (spline) gate key: an (n−1)-bit two-lane DCF over
/// Z_2^n × Z_2^n and three offsets.
#[derive(Clone)]
pub struct ReluKey {
    party: u8,
    bits: u32,
    /// [share of r_msb, share of r_out − r_in·r_msb (x̂_msb = 1 branch),
    ///  share of r_out + r_in·r_msb − r_in (x̂_msb = 0 branch)].
    e: [u64; 3],
    dcf: DcfKey,
}

impl Zeroize for ReluKey {
    fn zeroize(&mut self) {
        self.e.zeroize();
        self.dcf.zeroize();
    }
}
impl Drop for ReluKey {
    fn drop(&mut self) {
        self.e.zeroize();
    }
}
impl std::fmt::Debug for ReluKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReluKey").field("party", &self.party).field("bits", &self.bits).finish_non_exhaustive()
    }
}

impl ReluKey {
    pub fn party(&self) -> u8 {
        self.party
    }
    pub fn bits(&self) -> u32 {
        self.bits
    }
    pub fn dcf(&self) -> &DcfKey {
        &self.dcf
    }
    pub fn size_bytes(bits: u32) -> usize {
        GATE_HEADER + 24 + DcfKey::size_bytes_lanes(bits.saturating_sub(1), bits, 2)
    }
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::size_bytes(self.bits));
        self.append_to(&mut out);
        out
    }
    /// Appends the encoding of [`Self::to_bytes`] to `out` (no temporary).
    pub fn append_to(&self, out: &mut Vec<u8>) {
        let mut w = Writer::from_vec(std::mem::take(out));
        w.bytes(&[TAG_RELU, self.party, self.bits as u8, self.bits as u8]);
        for &e in &self.e {
            w.u64(e);
        }
        self.dcf.write(&mut w);
        *out = w.buf;
    }
    /// Decodes and validates a key; never panics.
    pub fn from_bytes(b: &[u8]) -> Result<Self, Error> {
        const W: &str = "ReluKey";
        let mut r = Reader::new(W, b);
        let (party, bits, out_bits) = read_gate_header(&mut r, W, TAG_RELU)?;
        if out_bits != bits {
            return Err(Error::Header { what: W, reason: "ReLU output ring must equal the input ring" });
        }
        let e = [r.u64_below(bits, "offset")?, r.u64_below(bits, "offset")?, r.u64_below(bits, "offset")?];
        let dcf = DcfKey::read(&mut r)?;
        r.finish()?;
        check_inner(W, &dcf, party, bits - 1, bits, 2)?;
        Ok(ReluKey { party, bits, e, dcf })
    }
}

/// ReLU key generation: shares over Z_2^bits of ReLU(x̂ − r_in) + r_out for
/// signed `bits`-bit x (ReLU(x) = x if x ≥ 0 else 0). `r_in`, `r_out` are
/// reduced mod 2^bits. Deterministic given `prg`. Panics if `bits` is
/// outside 1..=64 (see [`try_relu_gen`]).
pub fn relu_gen(prg: &mut Prg, bits: u32, r_in: u64, r_out: u64) -> (ReluKey, ReluKey) {
    try_relu_gen(prg, bits, r_in, r_out).expect("relu_gen: bad parameters")
}

/// [`relu_gen`] returning [`Error::Param`] on bad parameters.
pub fn try_relu_gen(prg: &mut Prg, bits: u32, r_in: u64, r_out: u64) -> Result<(ReluKey, ReluKey), Error> {
    check_gate(bits, bits)?;
    let nm = mask(bits);
    let r = r_in & nm;
    let r_msb = r >> (bits - 1);
    let r_low = r & mask(bits - 1);
    let sgn = if r_msb == 1 { u64::MAX } else { 1 }; // 1 − 2·r_msb
    let beta = [sgn & nm, r.wrapping_mul(sgn) & nm];
    let (k0, k1) = dcf::gen_lanes(prg, bits - 1, r_low, beta, bits, 2);
    let a = share(prg, r_msb, bits);
    let rr = share(prg, r.wrapping_mul(r_msb), bits);
    let rs = share(prg, r, bits);
    let ro = share(prg, r_out, bits);
    let mk = |b: usize, dcf: DcfKey| {
        let e0 = ro[b].wrapping_sub(rr[b]) & nm;
        let e1 = ro[b].wrapping_add(rr[b]).wrapping_sub(rs[b]) & nm;
        ReluKey { party: b as u8, bits, e: [a[b], e0, e1], dcf }
    };
    Ok((mk(0, k0), mk(1, k1)))
}

#[inline(always)]
fn relu_finish(party: u8, key: &ReluKey, x_hat: u64, g: [u64; 2]) -> u64 {
    // Shares of u = r_msb ⊕ [x̂_low < r_low] and of u·r_in (minus the
    // dealt part): g[0] + e[0], g[1].
    let u = g[0].wrapping_add(key.e[0]);
    let p_one = (x_hat >> (key.bits - 1)) & 1 == 0;
    let y = if p_one {
        // d = 1 − u: (1 − u)·x̂ − (r − u·r) + r_out
        let own = if party & 1 == 0 { x_hat } else { 0 };
        own.wrapping_sub(x_hat.wrapping_mul(u)).wrapping_add(g[1]).wrapping_add(key.e[2])
    } else {
        // d = u: u·x̂ − u·r + r_out
        x_hat.wrapping_mul(u).wrapping_sub(g[1]).wrapping_add(key.e[1])
    };
    y & mask(key.bits)
}

/// Evaluates a ReLU key at the public masked input x̂ (reduced mod 2^bits).
pub fn relu_eval(party: u8, key: &ReluKey, x_hat: u64) -> u64 {
    let x_hat = x_hat & mask(key.bits);
    let g = dcf::eval_lanes(party, &key.dcf, x_hat);
    relu_finish(party, key, x_hat, g)
}

/// Batched [`relu_eval`]. Panics if the slices differ in length.
pub fn relu_eval_batch(party: u8, keys: &[ReluKey], x_hat: &[u64], out: &mut [u64]) {
    assert_eq!(keys.len(), x_hat.len(), "relu_eval_batch: keys and inputs differ in length");
    assert_eq!(keys.len(), out.len(), "relu_eval_batch: keys and outputs differ in length");
    dcf::eval_engine(party, keys.len(), |i| &keys[i].dcf, x_hat, |i, g| {
        let k = &keys[i];
        out[i] = relu_finish(party, k, x_hat[i] & mask(k.bits), g);
    });
}

/// Many ReLU keys of one width in the evaluation layout (see
/// [`DreluBatch`]).
#[derive(Default)]
pub struct ReluBatch {
    bits: u32,
    e: Vec<[u64; 3]>,
    dcf: DcfKeyBatch,
}

impl Drop for ReluBatch {
    fn drop(&mut self) {
        self.e.zeroize();
    }
}

impl ReluBatch {
    /// An empty batch with room for `n` keys.
    pub fn with_capacity(n: usize, bits: u32) -> Self {
        ReluBatch { bits, e: Vec::with_capacity(n), dcf: DcfKeyBatch::with_capacity(n, bits.saturating_sub(1), bits, 2) }
    }
    /// Builds a batch from keys of one width.
    pub fn from_keys(keys: &[ReluKey]) -> Result<Self, Error> {
        let mut b = keys.first().map_or_else(Self::default, |k| Self::with_capacity(keys.len(), k.bits));
        for k in keys {
            b.push(k)?;
        }
        Ok(b)
    }
    /// Appends a key; errors if its width differs from the batch's.
    pub fn push(&mut self, k: &ReluKey) -> Result<(), Error> {
        if self.e.is_empty() {
            self.bits = k.bits;
        } else if k.bits != self.bits {
            return Err(Error::Header { what: "ReluBatch", reason: "key shape differs from the batch" });
        }
        self.dcf.push(&k.dcf)?;
        self.e.push(k.e);
        Ok(())
    }
    /// Appends `m` keys from their encodings ([`ReluKey::to_bytes`], back
    /// to back) without a key object per gate: the offsets read here, the
    /// DCF keys decoded straight into the batch layout on every core
    /// ([`DcfKeyBatch::extend_encoded`]). The checks of
    /// [`ReluKey::from_bytes`]; on error the batch is emptied.
    pub fn extend_encoded(&mut self, enc: &[u8], m: usize) -> Result<(), Error> {
        const W: &str = "ReluKey";
        if m == 0 {
            return Ok(());
        }
        let mut r = Reader::new(W, enc);
        let (party, bits, out_bits) = read_gate_header(&mut r, W, TAG_RELU)?;
        if out_bits != bits {
            return Err(Error::Header {
                what: W,
                reason: "ReLU output ring must equal the input ring",
            });
        }
        let kb = ReluKey::size_bytes(bits);
        if enc.len() != m * kb {
            return Err(Error::Length {
                what: W,
                expected: m * kb,
                got: enc.len(),
            });
        }
        if !self.e.is_empty() && bits != self.bits {
            return Err(Error::Header {
                what: "ReluBatch",
                reason: "key shape differs from the batch",
            });
        }
        let res = (|| {
            self.e.reserve(m);
            for k in enc.chunks_exact(kb) {
                // Every key's header equals the first one's (checked above).
                if k[..GATE_HEADER] != enc[..GATE_HEADER] {
                    return Err(Error::Header {
                        what: "ReluBatch",
                        reason: "key shape differs from the batch",
                    });
                }
                let mut r = Reader::new(W, &k[GATE_HEADER..]);
                self.e.push([
                    r.u64_below(bits, "offset")?,
                    r.u64_below(bits, "offset")?,
                    r.u64_below(bits, "offset")?,
                ]);
            }
            self.dcf
                .extend_encoded(enc, m, kb, GATE_HEADER + 24, (party, bits - 1, bits, 2))
        })();
        if res.is_err() {
            self.e.zeroize();
            self.e.clear();
            self.dcf.zeroize();
        } else {
            self.bits = bits;
        }
        res
    }
    pub fn len(&self) -> usize {
        self.e.len()
    }
    pub fn is_empty(&self) -> bool {
        self.e.is_empty()
    }
    /// [`relu_eval`] of key i at `x_hat[i]` into `out[i]` for all i.
    /// `scratch` must have [`len`](Self::len) elements (it receives the
    /// second DCF lane). Panics on length mismatch.
    pub fn eval(&self, party: u8, x_hat: &[u64], out: &mut [u64], scratch: &mut [u64]) {
        assert_eq!(x_hat.len(), self.len(), "ReluBatch::eval: keys and inputs differ in length");
        self.dcf.eval(party, x_hat, out, Some(scratch));
        let nm = mask(self.bits);
        let sh = self.bits - 1;
        let own = party & 1 == 0;
        for (((o, &x), &g1), e) in out.iter_mut().zip(x_hat).zip(scratch.iter()).zip(&self.e) {
            let x = x & nm;
            let u = o.wrapping_add(e[0]);
            let y = if (x >> sh) & 1 == 0 {
                let xo = if own { x } else { 0 };
                xo.wrapping_sub(x.wrapping_mul(u)).wrapping_add(g1).wrapping_add(e[2])
            } else {
                x.wrapping_mul(u).wrapping_sub(g1).wrapping_add(e[1])
            };
            *o = y & nm;
        }
    }
}

// ---------------------------------------------------------------- less-than

/// One party's less-than gate key: two n-bit DCFs and one offset.
#[derive(Clone)]
pub struct LtKey {
    party: u8,
    bits: u32,
    out_bits: u32,
    /// Share of \[r_in + c ≥ 2^n\] + r_out.
    off: u64,
    /// α = (r_in + c) mod 2^n, β = 1.
    upper: DcfKey,
    /// α = r_in, β = −1.
    lower: DcfKey,
}

impl Zeroize for LtKey {
    fn zeroize(&mut self) {
        self.off.zeroize();
        self.upper.zeroize();
        self.lower.zeroize();
    }
}
impl Drop for LtKey {
    fn drop(&mut self) {
        self.off.zeroize();
    }
}
impl std::fmt::Debug for LtKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LtKey").field("party", &self.party).field("bits", &self.bits).field("out_bits", &self.out_bits).finish_non_exhaustive()
    }
}

impl LtKey {
    pub fn party(&self) -> u8 {
        self.party
    }
    pub fn bits(&self) -> u32 {
        self.bits
    }
    pub fn out_bits(&self) -> u32 {
        self.out_bits
    }
    pub fn size_bytes(bits: u32, out_bits: u32) -> usize {
        GATE_HEADER + 8 + 2 * DcfKey::size_bytes(bits, out_bits)
    }
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::size_bytes(self.bits, self.out_bits));
        self.append_to(&mut out);
        out
    }
    /// Appends the encoding of [`Self::to_bytes`] to `out` (no temporary).
    pub fn append_to(&self, out: &mut Vec<u8>) {
        let mut w = Writer::from_vec(std::mem::take(out));
        w.bytes(&[TAG_LT, self.party, self.bits as u8, self.out_bits as u8]);
        w.u64(self.off);
        self.upper.write(&mut w);
        self.lower.write(&mut w);
        *out = w.buf;
    }
    /// Decodes and validates a key; never panics.
    pub fn from_bytes(b: &[u8]) -> Result<Self, Error> {
        const W: &str = "LtKey";
        let mut r = Reader::new(W, b);
        let (party, bits, out_bits) = read_gate_header(&mut r, W, TAG_LT)?;
        let off = r.u64_below(out_bits, "offset")?;
        let upper = DcfKey::read(&mut r)?;
        let lower = DcfKey::read(&mut r)?;
        r.finish()?;
        check_inner(W, &upper, party, bits, out_bits, 1)?;
        check_inner(W, &lower, party, bits, out_bits, 1)?;
        Ok(LtKey { party, bits, out_bits, off, upper, lower })
    }
}

/// Less-than key generation: shares over Z_2^out_bits of \[x < c\] + r_out,
/// where x = x̂ − r_in mod 2^bits is unsigned and the threshold
/// `c` < 2^bits is known to the dealer only (it is hidden by the keys).
/// `r_in` is reduced mod 2^bits, `r_out` mod 2^out_bits. Deterministic given
/// `prg`. Panics on bad parameters (see [`try_lt_gen`]).
///
/// For \[x > c\] use 1 − \[x < c + 1\]; for two shared values compare their
/// difference with [`drelu_gen`] when it cannot overflow.
pub fn lt_gen(prg: &mut Prg, bits: u32, r_in: u64, c: u64, r_out: u64, out_bits: u32) -> (LtKey, LtKey) {
    try_lt_gen(prg, bits, r_in, c, r_out, out_bits).expect("lt_gen: bad parameters")
}

/// [`lt_gen`] returning [`Error::Param`] on bad parameters (including
/// c ≥ 2^bits).
pub fn try_lt_gen(prg: &mut Prg, bits: u32, r_in: u64, c: u64, r_out: u64, out_bits: u32) -> Result<(LtKey, LtKey), Error> {
    check_gate(bits, out_bits)?;
    if c & !mask(bits) != 0 {
        return Err(Error::Param { name: "c", value: c, reason: "threshold must be below 2^bits" });
    }
    let r = r_in & mask(bits);
    let e = r as u128 + c as u128;
    let wrap = (e >> bits) as u64; // [r + c ≥ 2^bits]
    let e_mod = (e as u64) & mask(bits);
    let m = out_bits;
    let (u0, u1) = dcf::gen_lanes(prg, bits, e_mod, [1, 0], m, 1);
    let (l0, l1) = dcf::gen_lanes(prg, bits, r, [mask(m), 0], m, 1);
    let off = share(prg, wrap.wrapping_add(r_out), m);
    Ok((
        LtKey { party: 0, bits, out_bits, off: off[0], upper: u0, lower: l0 },
        LtKey { party: 1, bits, out_bits, off: off[1], upper: u1, lower: l1 },
    ))
}

/// Evaluates a less-than key at the public masked input x̂.
pub fn lt_eval(party: u8, key: &LtKey, x_hat: u64) -> u64 {
    let x_hat = x_hat & mask(key.bits);
    let a = dcf::eval_lanes(party, &key.upper, x_hat)[0];
    let b = dcf::eval_lanes(party, &key.lower, x_hat)[0];
    key.off.wrapping_add(a).wrapping_add(b) & mask(key.out_bits)
}

/// Batched [`lt_eval`]. Panics if the slices differ in length.
pub fn lt_eval_batch(party: u8, keys: &[LtKey], x_hat: &[u64], out: &mut [u64]) {
    assert_eq!(keys.len(), x_hat.len(), "lt_eval_batch: keys and inputs differ in length");
    assert_eq!(keys.len(), out.len(), "lt_eval_batch: keys and outputs differ in length");
    dcf::eval_engine(party, keys.len(), |i| &keys[i].upper, x_hat, |i, v| out[i] = keys[i].off.wrapping_add(v[0]));
    dcf::eval_engine(party, keys.len(), |i| &keys[i].lower, x_hat, |i, v| {
        out[i] = out[i].wrapping_add(v[0]) & mask(keys[i].out_bits)
    });
}

/// Many less-than keys of one shape in the evaluation layout (two
/// [`DcfKeyBatch`]es; see [`DreluBatch`]).
#[derive(Default)]
pub struct LtBatch {
    bits: u32,
    out_bits: u32,
    off: Vec<u64>,
    upper: DcfKeyBatch,
    lower: DcfKeyBatch,
}

impl Drop for LtBatch {
    fn drop(&mut self) {
        self.off.zeroize();
    }
}

impl LtBatch {
    /// An empty batch with room for `n` keys.
    pub fn with_capacity(n: usize, bits: u32, out_bits: u32) -> Self {
        LtBatch {
            bits,
            out_bits,
            off: Vec::with_capacity(n),
            upper: DcfKeyBatch::with_capacity(n, bits, out_bits, 1),
            lower: DcfKeyBatch::with_capacity(n, bits, out_bits, 1),
        }
    }
    /// Builds a batch from keys of one shape.
    pub fn from_keys(keys: &[LtKey]) -> Result<Self, Error> {
        let mut b = keys.first().map_or_else(Self::default, |k| Self::with_capacity(keys.len(), k.bits, k.out_bits));
        for k in keys {
            b.push(k)?;
        }
        Ok(b)
    }
    /// Appends a key; errors if its shape differs from the batch's.
    pub fn push(&mut self, k: &LtKey) -> Result<(), Error> {
        if self.off.is_empty() {
            self.bits = k.bits;
            self.out_bits = k.out_bits;
        } else if (k.bits, k.out_bits) != (self.bits, self.out_bits) {
            return Err(Error::Header { what: "LtBatch", reason: "key shape differs from the batch" });
        }
        self.upper.push(&k.upper)?;
        self.lower.push(&k.lower)?;
        self.off.push(k.off);
        Ok(())
    }
    pub fn len(&self) -> usize {
        self.off.len()
    }
    pub fn is_empty(&self) -> bool {
        self.off.is_empty()
    }
    /// [`lt_eval`] of key i at `x_hat[i]` into `out[i]` for all i;
    /// `scratch` must have [`len`](Self::len) elements. Panics on length
    /// mismatch.
    pub fn eval(&self, party: u8, x_hat: &[u64], out: &mut [u64], scratch: &mut [u64]) {
        assert_eq!(x_hat.len(), self.len(), "LtBatch::eval: keys and inputs differ in length");
        self.upper.eval(party, x_hat, out, None);
        self.lower.eval(party, x_hat, scratch, None);
        let om = mask(self.out_bits);
        for ((o, &b), &off) in out.iter_mut().zip(scratch.iter()).zip(&self.off) {
            *o = off.wrapping_add(*o).wrapping_add(b) & om;
        }
    }
}

// ------------------------------------------------------- batched key generation

/// Batched [`drelu_gen`]: pair j is exactly what `drelu_gen(prg, bits,
/// r_in[j], r_out[j], out_bits)` returns when called for j = 0, 1, … in turn
/// on the same PRG (same draws in the same order, byte-identical keys); the
/// DCF trees are built level by level across keys (one AES call per level).
/// Returns (party 0's keys, party 1's keys). Panics on bad parameters or
/// slices of different lengths (see [`try_drelu_gen_batch`]).
pub fn drelu_gen_batch(prg: &mut Prg, bits: u32, r_in: &[u64], r_out: &[u64], out_bits: u32) -> (Vec<DreluKey>, Vec<DreluKey>) {
    try_drelu_gen_batch(prg, bits, r_in, r_out, out_bits).expect("drelu_gen_batch: bad parameters")
}

fn check_len(name: &'static str, got: usize, want: usize) -> Result<(), Error> {
    if got != want {
        return Err(Error::Param { name, value: got as u64, reason: "slice length differs from r_in" });
    }
    Ok(())
}

/// [`drelu_gen_batch`] returning [`Error::Param`] on bad parameters (nothing
/// is drawn from the PRG then).
pub fn try_drelu_gen_batch(
    prg: &mut Prg,
    bits: u32,
    r_in: &[u64],
    r_out: &[u64],
    out_bits: u32,
) -> Result<(Vec<DreluKey>, Vec<DreluKey>), Error> {
    check_gate(bits, out_bits)?;
    check_len("r_out", r_out.len(), r_in.len())?;
    let n = r_in.len();
    let (mut roots, mut alphas, mut betas, mut cs) = drelu_draws(prg, bits, r_in, r_out, out_bits);
    let (d0, d1) = dcf::gen_core(bits - 1, out_bits, 1, &roots, &alphas, &betas);
    roots.zeroize();
    alphas.zeroize();
    betas.zeroize();
    let mut k0 = Vec::with_capacity(n);
    let mut k1 = Vec::with_capacity(n);
    for ((c, a), b) in cs.iter().zip(d0).zip(d1) {
        k0.push(DreluKey { party: 0, bits, out_bits, c: c[0], dcf: a });
        k1.push(DreluKey { party: 1, bits, out_bits, c: c[1], dcf: b });
    }
    cs.zeroize();
    Ok((k0, k1))
}

/// [`try_drelu_gen_batch`] appending the keys' encodings
/// ([`DreluKey::append_to`], byte for byte) to `outs[p]` for each party p
/// given (see [`relu_gen_batch_append`]).
pub fn drelu_gen_batch_append(
    prg: &mut Prg,
    bits: u32,
    r_in: &[u64],
    r_out: &[u64],
    out_bits: u32,
    outs: [Option<&mut Vec<u8>>; 2],
) -> Result<(), Error> {
    GateDraws::drelu(prg, bits, r_in, r_out, out_bits)?.append(0..r_in.len(), outs);
    Ok(())
}

/// Roots, α, β and both parties' constants of a DReLU batch, drawn per
/// gate in the order of [`drelu_gen`].
#[allow(clippy::type_complexity)]
fn drelu_draws(prg: &mut Prg, bits: u32, r_in: &[u64], r_out: &[u64], out_bits: u32) -> (Vec<[u128; 2]>, Vec<u64>, Vec<[u64; 2]>, Vec<[[u64; 2]; 2]>) {
    let n = r_in.len();
    let m = out_bits;
    let mut roots = Vec::with_capacity(n);
    let mut alphas = Vec::with_capacity(n);
    let mut betas = Vec::with_capacity(n);
    let mut cs: Vec<[[u64; 2]; 2]> = Vec::with_capacity(n);
    for j in 0..n {
        let r = r_in[j] & mask(bits);
        let r_msb = r >> (bits - 1);
        alphas.push(r & mask(bits - 1));
        betas.push([if r_msb == 1 { u64::MAX } else { 1 } & mask(m), 0]);
        roots.push(dcf::draw_roots(prg, m, 1));
        let mut off = share(prg, r_msb, m);
        let mut ro = share(prg, r_out[j], m);
        let c = |b: usize| {
            [off[b].wrapping_add(ro[b]) & mask(m), ((b == 0) as u64).wrapping_sub(off[b]).wrapping_add(ro[b]) & mask(m)]
        };
        cs.push([c(0), c(1)]);
        off.zeroize();
        ro.zeroize();
    }
    (roots, alphas, betas, cs)
}

/// Batched [`relu_gen`] (same contract as [`drelu_gen_batch`]: byte-identical
/// to calling [`relu_gen`] for j = 0, 1, … on the same PRG).
pub fn relu_gen_batch(prg: &mut Prg, bits: u32, r_in: &[u64], r_out: &[u64]) -> (Vec<ReluKey>, Vec<ReluKey>) {
    try_relu_gen_batch(prg, bits, r_in, r_out).expect("relu_gen_batch: bad parameters")
}

/// [`relu_gen_batch`] returning [`Error::Param`] on bad parameters.
pub fn try_relu_gen_batch(prg: &mut Prg, bits: u32, r_in: &[u64], r_out: &[u64]) -> Result<(Vec<ReluKey>, Vec<ReluKey>), Error> {
    check_gate(bits, bits)?;
    check_len("r_out", r_out.len(), r_in.len())?;
    let n = r_in.len();
    let (mut roots, mut alphas, mut betas, mut es) = relu_draws(prg, bits, r_in, r_out);
    let (d0, d1) = dcf::gen_core(bits - 1, bits, 2, &roots, &alphas, &betas);
    roots.zeroize();
    alphas.zeroize();
    betas.zeroize();
    let mut k0 = Vec::with_capacity(n);
    let mut k1 = Vec::with_capacity(n);
    for ((e, a), b) in es.iter().zip(d0).zip(d1) {
        k0.push(ReluKey { party: 0, bits, e: e[0], dcf: a });
        k1.push(ReluKey { party: 1, bits, e: e[1], dcf: b });
    }
    es.zeroize();
    Ok((k0, k1))
}

/// [`try_relu_gen_batch`] appending the keys' encodings
/// ([`ReluKey::append_to`], byte for byte) to `outs[p]` for each party p
/// given, instead of returning keys: the dealer's path, with no key object
/// (nor its two allocations) per gate. The same PRG draws in the same order.
pub fn relu_gen_batch_append(prg: &mut Prg, bits: u32, r_in: &[u64], r_out: &[u64], outs: [Option<&mut Vec<u8>>; 2]) -> Result<(), Error> {
    GateDraws::relu(prg, bits, r_in, r_out)?.append(0..r_in.len(), outs);
    Ok(())
}

/// Which gate a [`GateDraws`] is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DrawnGate {
    Relu,
    Drelu,
}

/// Every PRG draw of a batch of ReLU or DReLU keys, made up front in the
/// order of one-at-a-time generation: the trees can then be built and
/// encoded in any order or in parallel ([`GateDraws::append`] over
/// disjoint ranges), with the same bytes. Erased on drop.
pub struct GateDraws {
    gate: DrawnGate,
    bits: u32,
    out_bits: u32,
    roots: Vec<[u128; 2]>,
    alphas: Vec<u64>,
    betas: Vec<[u64; 2]>,
    /// Both parties' gate constants (ReLU: e; DReLU: c in the first two).
    consts: Vec<[[u64; 3]; 2]>,
}

impl Drop for GateDraws {
    fn drop(&mut self) {
        self.roots.zeroize();
        self.alphas.zeroize();
        self.betas.zeroize();
        self.consts.zeroize();
    }
}

impl GateDraws {
    /// The draws of [`try_relu_gen_batch`].
    pub fn relu(prg: &mut Prg, bits: u32, r_in: &[u64], r_out: &[u64]) -> Result<Self, Error> {
        check_gate(bits, bits)?;
        check_len("r_out", r_out.len(), r_in.len())?;
        let (roots, alphas, betas, consts) = relu_draws(prg, bits, r_in, r_out);
        Ok(GateDraws { gate: DrawnGate::Relu, bits, out_bits: bits, roots, alphas, betas, consts })
    }
    /// The draws of [`try_drelu_gen_batch`].
    pub fn drelu(prg: &mut Prg, bits: u32, r_in: &[u64], r_out: &[u64], out_bits: u32) -> Result<Self, Error> {
        check_gate(bits, out_bits)?;
        check_len("r_out", r_out.len(), r_in.len())?;
        let (roots, alphas, betas, mut cs) = drelu_draws(prg, bits, r_in, r_out, out_bits);
        let consts = cs.iter().map(|c| [[c[0][0], c[0][1], 0], [c[1][0], c[1][1], 0]]).collect();
        cs.zeroize();
        Ok(GateDraws { gate: DrawnGate::Drelu, bits, out_bits, roots, alphas, betas, consts })
    }
    /// Gates drawn.
    pub fn len(&self) -> usize {
        self.roots.len()
    }
    pub fn is_empty(&self) -> bool {
        self.roots.is_empty()
    }
    /// Bytes of one party's encoded key.
    pub fn key_bytes(&self) -> usize {
        match self.gate {
            DrawnGate::Relu => ReluKey::size_bytes(self.bits),
            DrawnGate::Drelu => DreluKey::size_bytes(self.bits, self.out_bits),
        }
    }
    /// Builds the keys of gates `range` and appends their encodings to
    /// `outs[p]` for each party p given (byte for byte what
    /// `append_to` of the generated keys writes).
    pub fn append(&self, range: std::ops::Range<usize>, mut outs: [Option<&mut Vec<u8>>; 2]) {
        let (bits, out_bits) = (self.bits, self.out_bits);
        let (lanes, tag) = match self.gate {
            DrawnGate::Relu => (2, TAG_RELU),
            DrawnGate::Drelu => (1, TAG_DRELU),
        };
        let consts = &self.consts[range.clone()];
        dcf::gen_core_each(
            bits - 1,
            out_bits,
            lanes,
            &self.roots[range.clone()],
            &self.alphas[range.clone()],
            &self.betas[range],
            |j, parts| {
                for (b, out) in outs.iter_mut().enumerate() {
                    if let Some(out) = out.as_deref_mut() {
                        let mut w = Writer::from_vec(std::mem::take(out));
                        w.bytes(&[tag, b as u8, bits as u8, out_bits as u8]);
                        let c = &consts[j][b];
                        let nc = if self.gate == DrawnGate::Relu { 3 } else { 2 };
                        for &e in &c[..nc] {
                            w.u64(e);
                        }
                        parts[b].write(&mut w, b as u8, bits - 1, out_bits, lanes);
                        *out = w.buf;
                    }
                }
            },
        );
    }
}

impl GateDraws {
    /// Builds the keys of gates `range` and writes their encodings straight
    /// into `slots[p]` (key j of the range at bytes j·kb..(j+1)·kb, kb =
    /// [`GateDraws::key_bytes`]) for each party p given: the bytes
    /// [`GateDraws::append`] appends, with no staging buffer or copy.
    ///
    /// Panics if a slot is not exactly `range.len()` keys long.
    pub fn fill(&self, range: std::ops::Range<usize>, mut slots: [Option<&mut [u8]>; 2]) {
        let (bits, out_bits) = (self.bits, self.out_bits);
        let (lanes, tag, nc) = match self.gate {
            DrawnGate::Relu => (2, TAG_RELU, 3),
            DrawnGate::Drelu => (1, TAG_DRELU, 2),
        };
        let kb = self.key_bytes();
        for s in slots.iter().flatten() {
            assert_eq!(s.len(), range.len() * kb, "GateDraws::fill: slot size");
        }
        let consts = &self.consts[range.clone()];
        dcf::gen_core_each(
            bits - 1,
            out_bits,
            lanes,
            &self.roots[range.clone()],
            &self.alphas[range.clone()],
            &self.betas[range],
            |j, parts| {
                for (b, slot) in slots.iter_mut().enumerate() {
                    if let Some(slot) = slot.as_deref_mut() {
                        let mut w = SliceWriter::new(&mut slot[j * kb..(j + 1) * kb]);
                        w.bytes(&[tag, b as u8, bits as u8, out_bits as u8]);
                        for &e in &consts[j][b][..nc] {
                            w.u64(e);
                        }
                        parts[b].write(&mut w, b as u8, bits - 1, out_bits, lanes);
                        debug_assert_eq!(w.pos, kb);
                    }
                }
            },
        );
    }
}

/// Groups of 32 keys per parallel task of the direct fill (256 keys: one
/// AES call per tree level covers them, as in the dealer's byte path).
const FILL_GROUPS: usize = 8;

impl GateDraws {
    /// Builds the keys of all drawn gates and writes party `party`'s
    /// straight into `dcf` (the evaluation layout) and its constants into
    /// `consts` — what decoding [`GateDraws::fill`]'s bytes with the gate
    /// batch's `extend_encoded` gives, without the encoding and the
    /// decoding (`tests/keys.rs`, `direct_fill_matches_decoded_bytes`).
    /// Only `party`'s key and constants are written; the other party's
    /// parts exist only inside the generation, as on the byte path.
    fn extend_batch(&self, party: u8, dcf: &mut DcfKeyBatch, consts: &mut Vec<[u64; 3]>) -> Result<(), Error> {
        let (bits, out_bits) = (self.bits, self.out_bits);
        let lanes = match self.gate {
            DrawnGate::Relu => 2,
            DrawnGate::Drelu => 1,
        };
        let b = (party & 1) as usize;
        let n = self.len();
        dcf.extend_with(n, (b as u8, bits - 1, out_bits, lanes), FILL_GROUPS, |lo, groups| {
            let hi = (lo + groups.len() * crate::batch::GROUP).min(n);
            dcf::gen_core_each(
                bits - 1,
                out_bits,
                lanes,
                &self.roots[lo..hi],
                &self.alphas[lo..hi],
                &self.betas[lo..hi],
                |j, parts| groups[j / crate::batch::GROUP].set(j % crate::batch::GROUP, parts[b]),
            );
        })?;
        consts.extend(self.consts.iter().map(|c| c[b]));
        Ok(())
    }
}

impl ReluBatch {
    /// Whether two batches hold the same keys in the same layout (tests).
    #[doc(hidden)]
    pub fn same_layout_as(&self, o: &ReluBatch) -> bool {
        self.bits == o.bits && self.e == o.e && self.dcf.same_layout_as(&o.dcf)
    }
}

impl DreluBatch {
    /// Whether two batches hold the same keys in the same layout (tests).
    #[doc(hidden)]
    pub fn same_layout_as(&self, o: &DreluBatch) -> bool {
        (self.bits, self.out_bits) == (o.bits, o.out_bits) && self.c == o.c && self.dcf.same_layout_as(&o.dcf)
    }
}

impl ReluBatch {
    /// Appends party `party`'s keys of `draws` (ReLU draws of this batch's
    /// width), built straight into the evaluation layout
    /// ([`GateDraws::extend_batch`]: no key bytes). On error the batch is
    /// unchanged where it can be, emptied otherwise.
    pub fn extend_drawn(&mut self, draws: &GateDraws, party: u8) -> Result<(), Error> {
        if draws.gate != DrawnGate::Relu || (!self.e.is_empty() && draws.bits != self.bits) {
            return Err(Error::Header { what: "ReluBatch", reason: "drawn gates differ from the batch" });
        }
        let mut c = Vec::with_capacity(draws.len());
        let r = draws.extend_batch(party, &mut self.dcf, &mut c);
        if r.is_ok() {
            self.bits = draws.bits;
            self.e.extend(c.iter().map(|x| *x));
        }
        c.zeroize();
        r
    }
}

impl DreluBatch {
    /// Appends party `party`'s keys of `draws` (DReLU draws of this batch's
    /// shape) straight into the evaluation layout, as
    /// [`ReluBatch::extend_drawn`].
    pub fn extend_drawn(&mut self, draws: &GateDraws, party: u8) -> Result<(), Error> {
        if draws.gate != DrawnGate::Drelu || (!self.c.is_empty() && (draws.bits, draws.out_bits) != (self.bits, self.out_bits)) {
            return Err(Error::Header { what: "DreluBatch", reason: "drawn gates differ from the batch" });
        }
        let mut c = Vec::with_capacity(draws.len());
        let r = draws.extend_batch(party, &mut self.dcf, &mut c);
        if r.is_ok() {
            self.bits = draws.bits;
            self.out_bits = draws.out_bits;
            self.c.extend(c.iter().map(|x| [x[0], x[1]]));
        }
        c.zeroize();
        r
    }
}

/// Roots, α, β and both parties' offsets of a ReLU batch, drawn per gate
/// in the order of [`relu_gen`].
#[allow(clippy::type_complexity)]
fn relu_draws(prg: &mut Prg, bits: u32, r_in: &[u64], r_out: &[u64]) -> (Vec<[u128; 2]>, Vec<u64>, Vec<[u64; 2]>, Vec<[[u64; 3]; 2]>) {
    let n = r_in.len();
    let nm = mask(bits);
    let mut roots = Vec::with_capacity(n);
    let mut alphas = Vec::with_capacity(n);
    let mut betas = Vec::with_capacity(n);
    let mut es: Vec<[[u64; 3]; 2]> = Vec::with_capacity(n);
    for j in 0..n {
        let r = r_in[j] & nm;
        let r_msb = r >> (bits - 1);
        let sgn = if r_msb == 1 { u64::MAX } else { 1 };
        alphas.push(r & mask(bits - 1));
        betas.push([sgn & nm, r.wrapping_mul(sgn) & nm]);
        roots.push(dcf::draw_roots(prg, bits, 2));
        let mut a = share(prg, r_msb, bits);
        let mut rr = share(prg, r.wrapping_mul(r_msb), bits);
        let mut rs = share(prg, r, bits);
        let mut ro = share(prg, r_out[j], bits);
        let e = |b: usize| [a[b], ro[b].wrapping_sub(rr[b]) & nm, ro[b].wrapping_add(rr[b]).wrapping_sub(rs[b]) & nm];
        es.push([e(0), e(1)]);
        a.zeroize();
        rr.zeroize();
        rs.zeroize();
        ro.zeroize();
    }
    (roots, alphas, betas, es)
}

/// Batched [`lt_gen`] (same contract as [`drelu_gen_batch`]: byte-identical
/// to calling [`lt_gen`] for j = 0, 1, … on the same PRG).
pub fn lt_gen_batch(prg: &mut Prg, bits: u32, r_in: &[u64], c: &[u64], r_out: &[u64], out_bits: u32) -> (Vec<LtKey>, Vec<LtKey>) {
    try_lt_gen_batch(prg, bits, r_in, c, r_out, out_bits).expect("lt_gen_batch: bad parameters")
}

/// [`lt_gen_batch`] returning [`Error::Param`] on bad parameters (including
/// a threshold ≥ 2^bits; nothing is drawn from the PRG then).
pub fn try_lt_gen_batch(
    prg: &mut Prg,
    bits: u32,
    r_in: &[u64],
    c: &[u64],
    r_out: &[u64],
    out_bits: u32,
) -> Result<(Vec<LtKey>, Vec<LtKey>), Error> {
    check_gate(bits, out_bits)?;
    check_len("c", c.len(), r_in.len())?;
    check_len("r_out", r_out.len(), r_in.len())?;
    if let Some(&cc) = c.iter().find(|&&cc| cc & !mask(bits) != 0) {
        return Err(Error::Param { name: "c", value: cc, reason: "threshold must be below 2^bits" });
    }
    let n = r_in.len();
    let m = out_bits;
    let mut ru = Vec::with_capacity(n);
    let mut rl = Vec::with_capacity(n);
    let mut au = Vec::with_capacity(n);
    let mut al = Vec::with_capacity(n);
    let mut offs: Vec<[u64; 2]> = Vec::with_capacity(n);
    for j in 0..n {
        let r = r_in[j] & mask(bits);
        let e = r as u128 + c[j] as u128;
        let wrap = (e >> bits) as u64;
        au.push((e as u64) & mask(bits));
        al.push(r);
        ru.push(dcf::draw_roots(prg, m, 1));
        rl.push(dcf::draw_roots(prg, m, 1));
        offs.push(share(prg, wrap.wrapping_add(r_out[j]), m));
    }
    let bu = vec![[1u64, 0]; n];
    let bl = vec![[mask(m), 0]; n];
    let (u0, u1) = dcf::gen_core(bits, m, 1, &ru, &au, &bu);
    let (l0, l1) = dcf::gen_core(bits, m, 1, &rl, &al, &bl);
    ru.zeroize();
    rl.zeroize();
    au.zeroize();
    al.zeroize();
    let mut k0 = Vec::with_capacity(n);
    let mut k1 = Vec::with_capacity(n);
    for ((((o, a0), a1), b0), b1) in offs.iter().zip(u0).zip(u1).zip(l0).zip(l1) {
        k0.push(LtKey { party: 0, bits, out_bits, off: o[0], upper: a0, lower: b0 });
        k1.push(LtKey { party: 1, bits, out_bits, off: o[1], upper: a1, lower: b1 });
    }
    offs.zeroize();
    Ok((k0, k1))
}
