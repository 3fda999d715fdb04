//! Distributed comparison functions with **wide** outputs: the output group
//! is G = (Z_2^m)^L with m ≤ 128 bits per lane and L ≤ 4 lanes.
//!
//! [`crate::dcf`] serves the semi-honest gates, whose outputs live in
//! Z_2^ℓ with ℓ ≤ 64. The malicious-client gates of CRISP (§III-B, Alg. 1-2
//! with the MAC keys of Fig. 3) need outputs in the *lifted* ring
//! Z_2^(ℓ+s) of SPDZ2k (Cramer, Damgård, Escudero, Scholl, Xing, CRYPTO
//! 2018; CRISP §V-B) — ℓ + s = 77 bits for hush's default ℓ = 37 and
//! s = 40 — and four payloads per gate (the coefficients of f and of μ·f).
//! Splitting a 128-bit group into two 64-bit lanes does not work (the
//! carry between the halves is not a local function of the shares), so
//! this module is the same construction as [`crate::dcf`] (BCGGIKR21 §3,
//! the DCF Gen/Eval figure) with a wider Convert:
//!
//! * the seed/control-bit expansion is [`crate::ggm`]'s: child block
//!   B = H_d(s) (fixed-key-AES MMO), t = lsb(B), child seed = B with its
//!   lsb cleared;
//! * Convert of a child for lane l is the low m bits of
//!   H_{TWEAK_LANE + 2l + d}(s) — one AES block (128 bits) per lane — and
//!   the leaf of lane l is the low m bits of H_{TWEAK_LEAF + l}(s_n).
//!
//! The tweaks (0, 1 for the children; 8..15 for lanes; 16..19 for leaves)
//! are distinct, and seeds have their lsb clear, so no two hash inputs of
//! one seed coincide.
//!
//! **Exactness.** Eval(0, k0, x) + Eval(1, k1, x) = β·\[x < α\] in G for
//! every x (tested exhaustively for small n).
//!
//! **Cost.** Evaluation: (1 + L)·n AES blocks plus L for the leaf; key:
//! 5 + 16 + n·(16 + L·⌈m/8⌉) + 2·⌈n/8⌉ + L·⌈m/8⌉ bytes (n = 36, m = 77,
//! L = 4: 2,049 bytes). Scalar evaluation only (no AVX-512 batch layout
//! yet): this is the offline-heavy, online-light primitive of the CRISP
//! gates, not the workhorse of the semi-honest families.
//!
//! **Security**: as [`crate::dcf`]: each key alone is pseudorandom given the
//! PRG (127-bit seeds), so it hides α and β — in CRISP's use, β contains
//! the MAC key μ, which the client must never learn. Keys zeroize on drop;
//! [`WideDcfKey::from_bytes`] checks the header, the exact length and
//! canonical form and never panics.

use crate::codec::{Reader, Writer};
use crate::ggm;
use crate::Error;
use hush_primitives::{Block, Prg};
use zeroize::Zeroize;

/// Encoding tag of a wide DCF key (format version 1).
const TAG_WIDE: u8 = 0xD2;
/// Most lanes of one key.
pub const MAX_LANES: usize = 4;
/// Tweak of lane l's value block for child d: H_{TWEAK_LANE + 2l + d}.
const TWEAK_LANE: u128 = 8;
/// Tweak of lane l's leaf block: H_{TWEAK_LEAF + l}.
const TWEAK_LEAF: u128 = 16;

/// Low `m` ones (m ≤ 128).
#[inline]
pub fn mask128(m: u32) -> u128 {
    if m >= 128 {
        u128::MAX
    } else {
        (1u128 << m) - 1
    }
}

/// Bytes of one m-bit value in a key.
#[inline]
fn vbytes(m: u32) -> usize {
    m.div_ceil(8) as usize
}

/// One party's wide DCF key.
#[derive(Clone)]
pub struct WideDcfKey {
    party: u8,
    bits: u32,
    out_bits: u32,
    lanes: u32,
    s0: u128,
    /// Seed correction per level.
    scw: Vec<u128>,
    /// Value corrections, `lanes` per level.
    vcw: Vec<u128>,
    tl: u64,
    tr: u64,
    leaf: [u128; MAX_LANES],
}

impl Zeroize for WideDcfKey {
    fn zeroize(&mut self) {
        self.s0.zeroize();
        self.scw.zeroize();
        self.vcw.zeroize();
        self.tl.zeroize();
        self.tr.zeroize();
        self.leaf.zeroize();
    }
}

impl Drop for WideDcfKey {
    fn drop(&mut self) {
        self.zeroize();
    }
}

impl std::fmt::Debug for WideDcfKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WideDcfKey")
            .field("party", &self.party)
            .field("bits", &self.bits)
            .field("out_bits", &self.out_bits)
            .field("lanes", &self.lanes)
            .finish_non_exhaustive()
    }
}

fn check(bits: u32, out_bits: u32, lanes: u32) -> Result<(), Error> {
    if bits > 64 {
        return Err(Error::Param { name: "bits", value: bits as u64, reason: "input bits must be at most 64" });
    }
    if !(1..=128).contains(&out_bits) {
        return Err(Error::Param { name: "out_bits", value: out_bits as u64, reason: "must be in 1..=128" });
    }
    if !(1..=MAX_LANES as u32).contains(&lanes) {
        return Err(Error::Param { name: "lanes", value: lanes as u64, reason: "must be in 1..=4" });
    }
    Ok(())
}

/// The children of seed `s` in direction `d` for `lanes` lanes: (child
/// seed, control bit, lane values reduced mod 2^m). One AES call.
#[inline]
fn child(s: u128, d: u128, lanes: usize, m: u32) -> (u128, u64, [u128; MAX_LANES]) {
    let mut blk = [Block::ZERO; 1 + MAX_LANES];
    let mut scratch = [Block::ZERO; 1 + MAX_LANES];
    blk[0] = Block(s ^ d);
    for l in 0..lanes {
        blk[1 + l] = Block(s ^ (TWEAK_LANE + 2 * l as u128 + d));
    }
    ggm::mmo_inplace(&mut blk[..1 + lanes], &mut scratch);
    let b = blk[0].0;
    let mut v = [0u128; MAX_LANES];
    for l in 0..lanes {
        v[l] = blk[1 + l].0 & mask128(m);
    }
    blk.zeroize();
    scratch.zeroize();
    (b & !1, (b & 1) as u64, v)
}

/// Leaf values of a final seed.
#[inline]
fn leaf_vals(s: u128, lanes: usize, m: u32) -> [u128; MAX_LANES] {
    let mut v = [0u128; MAX_LANES];
    for (l, x) in v.iter_mut().enumerate().take(lanes) {
        *x = ggm::mmo1(Block(s), TWEAK_LEAF + l as u128).0 & mask128(m);
    }
    v
}

/// Wide DCF key generation: f_{α,β}(x) = β·\[x < α\] for unsigned `bits`-bit
/// x (0 ≤ bits ≤ 64; bits = 0 gives the zero function), β ∈ (Z_2^out_bits)^lanes
/// (`beta[l]` reduced mod 2^out_bits; lanes past `lanes` ignored).
/// Deterministic given `prg`.
pub fn wide_dcf_gen(prg: &mut Prg, bits: u32, alpha: u64, beta: &[u128], out_bits: u32) -> Result<(WideDcfKey, WideDcfKey), Error> {
    let lanes = beta.len() as u32;
    check(bits, out_bits, lanes)?;
    if bits < 64 && alpha >> bits != 0 {
        return Err(Error::Param { name: "alpha", value: alpha, reason: "must be below 2^bits" });
    }
    let om = mask128(out_bits);
    let nl = lanes as usize;
    let n = bits as usize;
    let s_root = [prg.random_block().0 & !1, prg.random_block().0 & !1];
    let mut s = s_root;
    let mut t = [0u64, 1u64];
    // V_α: the on-path sum (party 0 minus party 1) of the value shares so far.
    let mut va = [0u128; MAX_LANES];
    let mut scw = Vec::with_capacity(n);
    let mut vcw = Vec::with_capacity(n * nl);
    let (mut tl, mut tr) = (0u64, 0u64);
    for i in 0..n {
        let a = ((alpha >> (n - 1 - i)) & 1) as usize;
        let (keep, lose) = (a, 1 - a);
        // ch[b][d] for party b, direction d.
        let ch = [
            [child(s[0], 0, nl, out_bits), child(s[0], 1, nl, out_bits)],
            [child(s[1], 0, nl, out_bits), child(s[1], 1, nl, out_bits)],
        ];
        let s_cw = ch[0][lose].0 ^ ch[1][lose].0;
        let neg = t[1] == 1;
        let sg = |x: u128| if neg { x.wrapping_neg() } else { x };
        scw.push(s_cw);
        for l in 0..nl {
            let mut v = sg(ch[1][lose].2[l].wrapping_sub(ch[0][lose].2[l]).wrapping_sub(va[l]));
            if lose == 0 {
                // x leaves the α-path to the left: x < α.
                v = v.wrapping_add(sg(beta[l] & om));
            }
            v &= om;
            va[l] = va[l].wrapping_sub(ch[1][keep].2[l]).wrapping_add(ch[0][keep].2[l]).wrapping_add(sg(v));
            vcw.push(v);
        }
        let a64 = a as u64;
        let t_l = ch[0][0].1 ^ ch[1][0].1 ^ a64 ^ 1;
        let t_r = ch[0][1].1 ^ ch[1][1].1 ^ a64;
        tl |= t_l << i;
        tr |= t_r << i;
        let t_keep = if keep == 0 { t_l } else { t_r };
        for b in 0..2 {
            let tb = t[b];
            s[b] = ch[b][keep].0 ^ if tb == 1 { s_cw } else { 0 };
            t[b] = ch[b][keep].1 ^ (tb & t_keep);
        }
    }
    let (c0, c1) = (leaf_vals(s[0], nl, out_bits), leaf_vals(s[1], nl, out_bits));
    let mut leaf = [0u128; MAX_LANES];
    for l in 0..nl {
        let v = c1[l].wrapping_sub(c0[l]).wrapping_sub(va[l]);
        leaf[l] = if t[1] == 1 { v.wrapping_neg() } else { v } & om;
    }
    let mk = |party: u8, s0: u128| WideDcfKey {
        party,
        bits,
        out_bits,
        lanes,
        s0,
        scw: scw.clone(),
        vcw: vcw.clone(),
        tl,
        tr,
        leaf,
    };
    let keys = (mk(0, s_root[0]), mk(1, s_root[1]));
    s.zeroize();
    va.zeroize();
    scw.zeroize();
    vcw.zeroize();
    leaf.zeroize();
    Ok(keys)
}

impl WideDcfKey {
    pub fn party(&self) -> u8 {
        self.party
    }
    pub fn bits(&self) -> u32 {
        self.bits
    }
    pub fn out_bits(&self) -> u32 {
        self.out_bits
    }
    pub fn lanes(&self) -> u32 {
        self.lanes
    }

    /// This party's share of f_{α,β}(x), lane by lane (lanes past
    /// [`Self::lanes`] are 0), reduced mod 2^out_bits. `x` is reduced mod
    /// 2^bits. Time depends only on the key's shape.
    pub fn eval(&self, x: u64) -> [u128; MAX_LANES] {
        let n = self.bits as usize;
        let nl = self.lanes as usize;
        let m = self.out_bits;
        let mut s = self.s0;
        let mut t = (self.party & 1) as u64;
        let mut acc = [0u128; MAX_LANES];
        for i in 0..n {
            let d = (x >> (n - 1 - i)) & 1;
            let (cs, ct, cv) = child(s, d as u128, nl, m);
            let tm = (t as u128).wrapping_neg();
            let tcw = (if d == 0 { self.tl } else { self.tr } >> i) & 1;
            s = cs ^ (self.scw[i] & tm);
            for l in 0..nl {
                acc[l] = acc[l].wrapping_add(cv[l]).wrapping_add(self.vcw[i * nl + l] & tm);
            }
            t = ct ^ (tcw & t);
        }
        let lv = leaf_vals(s, nl, m);
        let tm = (t as u128).wrapping_neg();
        let om = mask128(m);
        let mut out = [0u128; MAX_LANES];
        for l in 0..nl {
            let v = acc[l].wrapping_add(lv[l]).wrapping_add(self.leaf[l] & tm);
            out[l] = if self.party & 1 == 1 { v.wrapping_neg() } else { v } & om;
        }
        s.zeroize();
        acc.zeroize();
        out
    }

    /// [`Self::eval`] of `keys[i]` at `xs[i]` into `out[i]` for all i, with
    /// the AES work of [`GROUP`] keys interleaved per tree level (one AES
    /// call of up to GROUP·(1 + L) blocks instead of GROUP calls of 1 + L),
    /// which keeps the AES pipeline full. Same results as [`Self::eval`];
    /// keys of mixed shapes are evaluated one by one. Panics if the slices
    /// differ in length.
    pub fn eval_many(keys: &[&WideDcfKey], xs: &[u64], out: &mut [[u128; MAX_LANES]]) {
        assert!(keys.len() == xs.len() && xs.len() == out.len(), "eval_many: slices differ in length");
        for ((kc, xc), oc) in keys.chunks(GROUP).zip(xs.chunks(GROUP)).zip(out.chunks_mut(GROUP)) {
            let k0 = kc[0];
            if kc.iter().any(|k| (k.bits, k.out_bits, k.lanes) != (k0.bits, k0.out_bits, k0.lanes)) {
                for ((k, &x), o) in kc.iter().zip(xc).zip(oc.iter_mut()) {
                    *o = k.eval(x);
                }
                continue;
            }
            eval_group(kc, xc, oc);
        }
    }

    /// Encoded size of a key of this shape.
    pub fn size_bytes(bits: u32, out_bits: u32, lanes: u32) -> usize {
        let (n, vb, nl) = (bits as usize, vbytes(out_bits), lanes as usize);
        5 + 16 + n * (16 + nl * vb) + 2 * n.div_ceil(8) + nl * vb
    }

    pub fn encoded_len(&self) -> usize {
        Self::size_bytes(self.bits, self.out_bits, self.lanes)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.append_to(&mut out);
        out
    }

    /// Appends the encoding of [`Self::to_bytes`] to `out`.
    pub fn append_to(&self, out: &mut Vec<u8>) {
        let mut w = Writer::from_vec(std::mem::take(out));
        self.write(&mut w);
        *out = w.buf;
    }

    pub(crate) fn write(&self, w: &mut Writer) {
        let vb = vbytes(self.out_bits);
        let nl = self.lanes as usize;
        w.bytes(&[TAG_WIDE, self.party, self.bits as u8, self.out_bits as u8, self.lanes as u8]);
        w.u128(self.s0);
        for i in 0..self.bits as usize {
            w.u128(self.scw[i]);
            for l in 0..nl {
                w.bytes(&self.vcw[i * nl + l].to_le_bytes()[..vb]);
            }
        }
        let tb = (self.bits as usize).div_ceil(8);
        w.bytes(&self.tl.to_le_bytes()[..tb]);
        w.bytes(&self.tr.to_le_bytes()[..tb]);
        for l in 0..nl {
            w.bytes(&self.leaf[l].to_le_bytes()[..vb]);
        }
    }

    /// Decodes and validates a key (header, exact length, canonical form).
    /// Never panics.
    pub fn from_bytes(b: &[u8]) -> Result<Self, Error> {
        let mut r = Reader::new("WideDcfKey", b);
        let k = Self::read(&mut r)?;
        r.finish()?;
        Ok(k)
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, Error> {
        const W: &str = "WideDcfKey";
        let hdr = [r.u8()?, r.u8()?, r.u8()?, r.u8()?, r.u8()?];
        if hdr[0] != TAG_WIDE {
            return Err(Error::Header { what: W, reason: "not a wide DCF key (tag)" });
        }
        let (party, bits, out_bits, lanes) = (hdr[1], hdr[2] as u32, hdr[3] as u32, hdr[4] as u32);
        if party > 1 {
            return Err(Error::Header { what: W, reason: "party must be 0 or 1" });
        }
        if check(bits, out_bits, lanes).is_err() {
            return Err(Error::Header { what: W, reason: "bits ≤ 64, out_bits in 1..=128, lanes in 1..=4" });
        }
        let (n, vb, nl, om) = (bits as usize, vbytes(out_bits), lanes as usize, mask128(out_bits));
        let val = |r: &mut Reader<'_>| -> Result<u128, Error> {
            let mut a = [0u8; 16];
            for x in a.iter_mut().take(vb) {
                *x = r.u8()?;
            }
            let v = u128::from_le_bytes(a);
            if v & !om != 0 {
                return Err(Error::NonCanonical { what: W, reason: "value wider than out_bits" });
            }
            Ok(v)
        };
        let s0 = r.u128()?;
        if s0 & 1 != 0 {
            return Err(Error::NonCanonical { what: W, reason: "root seed has its reserved bit set" });
        }
        let mut scw = Vec::with_capacity(n);
        let mut vcw = Vec::with_capacity(n * nl);
        for _ in 0..n {
            let s = r.u128()?;
            if s & 1 != 0 {
                return Err(Error::NonCanonical { what: W, reason: "seed correction has its reserved bit set" });
            }
            scw.push(s);
            for _ in 0..nl {
                vcw.push(val(r)?);
            }
        }
        let tb = n.div_ceil(8);
        let bitsfield = |r: &mut Reader<'_>| -> Result<u64, Error> {
            let mut a = [0u8; 8];
            for x in a.iter_mut().take(tb) {
                *x = r.u8()?;
            }
            let v = u64::from_le_bytes(a);
            if n < 64 && v >> n != 0 {
                return Err(Error::NonCanonical { what: W, reason: "control-bit corrections past the depth" });
            }
            Ok(v)
        };
        let tl = bitsfield(r)?;
        let tr = bitsfield(r)?;
        let mut leaf = [0u128; MAX_LANES];
        for x in leaf.iter_mut().take(nl) {
            *x = val(r)?;
        }
        Ok(WideDcfKey { party, bits, out_bits, lanes, s0, scw, vcw, tl, tr, leaf })
    }
}

/// Keys evaluated together by [`WideDcfKey::eval_many`].
pub const GROUP: usize = 8;

/// One group of same-shape keys (≤ [`GROUP`]).
fn eval_group(keys: &[&WideDcfKey], xs: &[u64], out: &mut [[u128; MAX_LANES]]) {
    let g = keys.len();
    let k0 = keys[0];
    let (n, nl, m) = (k0.bits as usize, k0.lanes as usize, k0.out_bits);
    let per = 1 + nl;
    let om = mask128(m);
    let mut s = [0u128; GROUP];
    let mut t = [0u64; GROUP];
    let mut acc = [[0u128; MAX_LANES]; GROUP];
    for (j, k) in keys.iter().enumerate() {
        s[j] = k.s0;
        t[j] = (k.party & 1) as u64;
    }
    let mut blk = [Block::ZERO; GROUP * (1 + MAX_LANES)];
    let mut scratch = [Block::ZERO; GROUP * (1 + MAX_LANES)];
    for i in 0..n {
        for j in 0..g {
            let d = ((xs[j] >> (n - 1 - i)) & 1) as u128;
            blk[j * per] = Block(s[j] ^ d);
            for l in 0..nl {
                blk[j * per + 1 + l] = Block(s[j] ^ (TWEAK_LANE + 2 * l as u128 + d));
            }
        }
        ggm::mmo_inplace(&mut blk[..g * per], &mut scratch[..g * per]);
        for (j, k) in keys.iter().enumerate() {
            let d = (xs[j] >> (n - 1 - i)) & 1;
            let b = blk[j * per].0;
            let tm = (t[j] as u128).wrapping_neg();
            let tcw = (if d == 0 { k.tl } else { k.tr } >> i) & 1;
            s[j] = (b & !1) ^ (k.scw[i] & tm);
            for l in 0..nl {
                acc[j][l] = acc[j][l].wrapping_add(blk[j * per + 1 + l].0 & om).wrapping_add(k.vcw[i * nl + l] & tm);
            }
            t[j] = ((b & 1) as u64) ^ (tcw & t[j]);
        }
    }
    // leaves: H_{TWEAK_LEAF + l}(s) for every key and lane in one call
    for j in 0..g {
        for l in 0..nl {
            blk[j * nl + l] = Block(s[j] ^ (TWEAK_LEAF + l as u128));
        }
    }
    ggm::mmo_inplace(&mut blk[..g * nl], &mut scratch[..g * nl]);
    for (j, k) in keys.iter().enumerate() {
        let tm = (t[j] as u128).wrapping_neg();
        let mut o = [0u128; MAX_LANES];
        for l in 0..nl {
            let v = acc[j][l].wrapping_add(blk[j * nl + l].0 & om).wrapping_add(k.leaf[l] & tm);
            o[l] = if k.party & 1 == 1 { v.wrapping_neg() } else { v } & om;
        }
        out[j] = o;
    }
    s.zeroize();
    acc.zeroize();
    blk.zeroize();
    scratch.zeroize();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(a: [u128; 4], b: [u128; 4], m: u32) -> [u128; 4] {
        let mut o = [0u128; 4];
        for l in 0..4 {
            o[l] = a[l].wrapping_add(b[l]) & mask128(m);
        }
        o
    }

    #[test]
    fn exhaustive_small_domains() {
        let mut prg = Prg::new(Block(7));
        for bits in 0..=6u32 {
            for &m in &[1u32, 13, 64, 77, 128] {
                for lanes in 1..=4usize {
                    for alpha in 0..(1u64 << bits) {
                        let beta: Vec<u128> = (0..lanes).map(|_| prg.random_block().0 & mask128(m)).collect();
                        let (k0, k1) = wide_dcf_gen(&mut prg, bits, alpha, &beta, m).unwrap();
                        for x in 0..(1u64 << bits).max(1) {
                            let s = sum(k0.eval(x), k1.eval(x), m);
                            for l in 0..4 {
                                let want = if l < lanes && x < alpha { beta[l] } else { 0 };
                                assert_eq!(s[l], want, "bits {bits} m {m} lanes {lanes} α {alpha} x {x} lane {l}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn random_wide_domains_and_edges() {
        let mut prg = Prg::new(Block(11));
        for &bits in &[16u32, 36, 63, 64] {
            let top = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
            for _ in 0..20 {
                let alpha = prg.next_u64() & top;
                let beta: Vec<u128> = (0..4).map(|_| prg.random_block().0 & mask128(77)).collect();
                let (k0, k1) = wide_dcf_gen(&mut prg, bits, alpha, &beta, 77).unwrap();
                let xs = [0, 1, top, alpha, alpha.wrapping_sub(1) & top, alpha.wrapping_add(1) & top, prg.next_u64() & top];
                for &x in &xs {
                    let s = sum(k0.eval(x), k1.eval(x), 77);
                    for l in 0..4 {
                        assert_eq!(s[l], if x < alpha { beta[l] } else { 0 }, "bits {bits} α {alpha} x {x}");
                    }
                }
            }
        }
    }

    #[test]
    fn encoding_round_trips_and_rejects_garbage() {
        let mut prg = Prg::new(Block(3));
        let beta = [5u128, 1 << 76, 3, 9];
        let (k0, k1) = wide_dcf_gen(&mut prg, 36, 12345, &beta, 77).unwrap();
        for k in [&k0, &k1] {
            let b = k.to_bytes();
            assert_eq!(b.len(), WideDcfKey::size_bytes(36, 77, 4));
            let back = WideDcfKey::from_bytes(&b).unwrap();
            assert_eq!(back.to_bytes(), b);
            assert_eq!(back.eval(999), k.eval(999));
            // truncation, trailing bytes, bad tag, non-canonical value bits
            assert!(WideDcfKey::from_bytes(&b[..b.len() - 1]).is_err());
            let mut t = b.clone();
            t.push(0);
            assert!(WideDcfKey::from_bytes(&t).is_err());
            let mut t = b.clone();
            t[0] ^= 1;
            assert!(WideDcfKey::from_bytes(&t).is_err());
            let mut t = b.clone();
            // the top byte of the first value correction holds bits 72..79; bit 77+ must be 0
            t[5 + 16 + 16 + 9] |= 0x80;
            assert!(WideDcfKey::from_bytes(&t).is_err());
        }
        for len in 0..64 {
            let junk: Vec<u8> = (0..len).map(|i| (i * 37) as u8).collect();
            assert!(WideDcfKey::from_bytes(&junk).is_err());
        }
        assert!(wide_dcf_gen(&mut prg, 8, 256, &beta, 77).is_err());
        assert!(wide_dcf_gen(&mut prg, 8, 1, &[1; 5], 77).is_err());
        assert!(wide_dcf_gen(&mut prg, 8, 1, &beta, 129).is_err());
    }

    #[test]
    fn eval_many_equals_eval() {
        let mut prg = Prg::new(Block(21));
        let mut keys = Vec::new();
        let mut xs = Vec::new();
        for j in 0..29u64 {
            // mostly one shape, a few others to exercise the fallback
            let (bits, m, lanes) = if j % 10 == 9 { (12, 64, 2) } else { (36, 77, 4) };
            let beta: Vec<u128> = (0..lanes).map(|_| prg.random_block().0 & mask128(m)).collect();
            let alpha = prg.next_u64() & ((1 << bits) - 1);
            let (k0, k1) = wide_dcf_gen(&mut prg, bits, alpha, &beta, m).unwrap();
            keys.push(if j % 2 == 0 { k0 } else { k1 });
            xs.push(if j % 3 == 0 { alpha } else { prg.next_u64() & ((1 << bits) - 1) });
        }
        let refs: Vec<&WideDcfKey> = keys.iter().collect();
        let mut out = vec![[0u128; MAX_LANES]; keys.len()];
        WideDcfKey::eval_many(&refs, &xs, &mut out);
        for i in 0..keys.len() {
            assert_eq!(out[i], keys[i].eval(xs[i]), "key {i}");
        }
    }
}
