//! Distributed comparison functions (BCGGIKR21 §3, the DCF Gen/Eval figure).
//!
//! A DCF shares f_{α,β}(x) = β if x < α else 0, for unsigned n-bit x and
//! β in the output group G = (Z_2^m)^L (m ≤ 64 bits per lane, L ∈ {1, 2}
//! lanes; the public API uses one lane, the ReLU spline gate two). The two
//! keys satisfy Eval(0, k0, x) + Eval(1, k1, x) = f_{α,β}(x) in G, exactly,
//! for every x.
//!
//! **Construction** (BCGGIKR21 §3): a GGM tree of depth n in which the two
//! parties' seeds agree off the path to α and differ on it. At level i,
//! the correction word CW_i = (s_CW, V_CW, t_CW^L, t_CW^R) is chosen so that
//! when x leaves the α-path (x_i ≠ α_i) the seeds and control bits of the
//! two parties become equal (all later contributions cancel) and the sum of
//! the value shares collected so far is β if x left to the *left* of α
//! (then x < α) and 0 otherwise. The value share of a level is
//! (−1)^b·(Convert(v) + t·V_CW); the leaf adds (−1)^b·(Convert(s_n) + t_n·CW_{n+1}),
//! making the sum 0 at x = α. The PRG and Convert are those of
//! [`crate::ggm`] (fixed-key AES, MMO).
//!
//! **Early termination** (one-bit outputs, G = Z_2): the tree stops
//! ν = min(7, n) levels early — the optimisation of Boyle, Gilboa and Ishai,
//! *Function Secret Sharing: Improvements and Extensions*, CCS 2016, for
//! DPFs, applied here to the DCF. At depth d = n − ν each party expands its
//! node into a 2^ν-entry table Convert(s) = H_4(s) (one AES block, 128
//! one-bit entries) and the last correction word is the table
//! CW = Convert(s_0) ⊕ Convert(s_1) ⊕ V_α ⊕ T, T\[j\] = β·\[j < α mod 2^ν\]:
//! on the α-path (t_0 ⊕ t_1 = 1) the two outputs at x sum to V_α ⊕ (the
//! table sum) = T\[x mod 2^ν\] = \[x < α\]·β; off the path the seeds and
//! control bits are equal and the tables cancel. Still exact for every x.
//!
//! **Key size** (bytes): 5 (header), 16 (root seed), 16·d (seed
//! corrections) and ⌈(2d + d·L·m + leaf) / 8⌉ (control-bit corrections, value
//! corrections and leaf, bit-packed), with d = n and leaf = L·m bits for
//! wider outputs, d = n − ν and leaf = 2^ν bits for one-bit outputs — see
//! [`DcfKey::size_bytes`]; BCGGIKR21 give n(λ + m + 2) + λ + m bits. For
//! n = 32: 447 bytes (m = 1; 546 without early termination), 673 (m = 32).
//!
//! **Cost** of one evaluation: 2n AES blocks, plus one for the leaf of a
//! two-lane key; n − ν + 1 when m = 1. Batched evaluation runs on the
//! structure-of-arrays layout of [`crate::batch::DcfKeyBatch`] (AVX-512 +
//! VAES where available); [`dcf_eval_batch`] converts slices of keys into
//! it span by span.
//!
//! **Security**: each key alone is pseudorandom given the PRG (λ = 127-bit
//! seeds; 126 bits when m = 1), so it hides α and β. Semi-honest; a
//! malformed key from an untrusted place is rejected by
//! [`DcfKey::from_bytes`] but a *well-formed wrong* key silently computes a
//! wrong function — authenticity of keys is the dealer channel's job.

use crate::batch::DcfKeyBatch;
use crate::codec::{packed_len, KeyOut, Reader, Writer};
use crate::ggm::{self, Child};
use crate::{mask, Error};
use hush_primitives::{Block, Prg};
use zeroize::Zeroize;

/// Encoding tag of a DCF key (format version 1).
const TAG_DCF: u8 = 0xD1;
/// Header bytes: tag, party, bits, out_bits, lanes.
const HEADER: usize = 5;

/// One party's DCF key.
///
/// Layout is flat, one allocation: `cw` holds, per level (root first), the
/// seed correction as two u64 words followed (unless packed) by `lanes`
/// value corrections, so evaluation streams through it; the control-bit
/// corrections and (packed mode) the one-bit value corrections are bit
/// masks (bit i = level i).
#[derive(Clone)]
pub struct DcfKey {
    pub(crate) party: u8,
    /// Input bits n = tree depth (0..=64; 0 only inside gates).
    pub(crate) bits: u32,
    pub(crate) out_bits: u32,
    pub(crate) lanes: u32,
    pub(crate) s0: u128,
    pub(crate) cw: Vec<u64>,
    pub(crate) tl: u64,
    pub(crate) tr: u64,
    /// Packed mode: value correction of level i in bit i.
    pub(crate) vbits: u64,
    pub(crate) leaf: [u64; 2],
}

impl Zeroize for DcfKey {
    fn zeroize(&mut self) {
        self.s0.zeroize();
        self.cw.zeroize();
        self.tl.zeroize();
        self.tr.zeroize();
        self.vbits.zeroize();
        self.leaf.zeroize();
    }
}

impl Drop for DcfKey {
    fn drop(&mut self) {
        self.zeroize();
    }
}

impl std::fmt::Debug for DcfKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DcfKey")
            .field("party", &self.party)
            .field("bits", &self.bits)
            .field("out_bits", &self.out_bits)
            .field("lanes", &self.lanes)
            .finish_non_exhaustive()
    }
}

impl AsRef<DcfKey> for DcfKey {
    fn as_ref(&self) -> &DcfKey {
        self
    }
}

/// Packed mode: one lane of one bit (see [`crate::ggm`]).
#[inline]
fn is_packed(out_bits: u32, lanes: u32) -> bool {
    out_bits == 1 && lanes == 1
}

/// Early termination (packed mode): the tree stops ν = min(ET_NU, n) levels
/// above the leaves and the last node is expanded into a table of 2^ν
/// one-bit outputs (one AES block = 128 bits).
pub(crate) const ET_NU: u32 = 7;

/// Levels ν cut off by early termination for a key of this shape (0 unless
/// packed).
#[inline]
pub(crate) fn et_nu(bits: u32, out_bits: u32, lanes: u32) -> u32 {
    if is_packed(out_bits, lanes) {
        bits.min(ET_NU)
    } else {
        0
    }
}

/// Tree depth (levels with correction words): n − ν.
#[inline]
pub(crate) fn depth(bits: u32, out_bits: u32, lanes: u32) -> u32 {
    bits - et_nu(bits, out_bits, lanes)
}

/// u64 words per level in `DcfKey::cw`.
#[inline]
fn stride(out_bits: u32, lanes: u32) -> usize {
    if is_packed(out_bits, lanes) {
        2
    } else {
        2 + lanes as usize
    }
}

impl DcfKey {
    #[inline(always)]
    fn scw(&self, i: usize, w: usize) -> u128 {
        (self.cw[i * w] as u128) | ((self.cw[i * w + 1] as u128) << 64)
    }
    /// Value correction of level i, lane l.
    #[inline(always)]
    fn vcw(&self, i: usize, l: usize, w: usize) -> u64 {
        if w == 2 {
            (self.vbits >> i) & 1
        } else {
            self.cw[i * w + 2 + l]
        }
    }
}

impl DcfKey {
    /// The party (0 or 1) this key was generated for.
    pub fn party(&self) -> u8 {
        self.party
    }
    /// Input bits n.
    pub fn bits(&self) -> u32 {
        self.bits
    }
    /// Output bits m per lane.
    pub fn out_bits(&self) -> u32 {
        self.out_bits
    }
    /// Output lanes (1 for keys from [`dcf_gen`]).
    pub fn lanes(&self) -> u32 {
        self.lanes
    }

    /// Encoded size of a one-lane key.
    pub fn size_bytes(bits: u32, out_bits: u32) -> usize {
        Self::size_bytes_lanes(bits, out_bits, 1)
    }

    /// Encoded size of a key with `lanes` output lanes.
    pub fn size_bytes_lanes(bits: u32, out_bits: u32, lanes: u32) -> usize {
        let d = depth(bits, out_bits, lanes) as usize;
        let lm = (lanes * out_bits) as usize;
        let leaf = if is_packed(out_bits, lanes) { 1usize << et_nu(bits, out_bits, lanes) } else { lm };
        HEADER + 16 + 16 * d + packed_len(2 * d + d * lm + leaf)
    }

    /// Encoded size of this key.
    pub fn encoded_len(&self) -> usize {
        Self::size_bytes_lanes(self.bits, self.out_bits, self.lanes)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(self.encoded_len());
        self.write(&mut w);
        w.buf
    }

    /// Appends the encoding of [`Self::to_bytes`] to `out` (no temporary).
    pub fn append_to(&self, out: &mut Vec<u8>) {
        let mut w = Writer::from_vec(std::mem::take(out));
        self.write(&mut w);
        *out = w.buf;
    }

    pub(crate) fn write(&self, w: &mut Writer) {
        let parts = KeyParts { s0: self.s0, cw: &self.cw, tl: self.tl, tr: self.tr, vbits: self.vbits, leaf: self.leaf };
        parts.write(w, self.party, self.bits, self.out_bits, self.lanes);
    }
}

/// One party's DCF key as its parts, borrowed: what batched generation
/// hands out per key ([`gen_core_each`]) so a dealer writes the encoding
/// straight into its share, without a [`DcfKey`] (two allocations) per key.
pub(crate) struct KeyParts<'a> {
    pub s0: u128,
    /// Per level: seed correction (two words), then `lanes` value
    /// corrections unless packed (the layout of `DcfKey::cw`).
    pub cw: &'a [u64],
    pub tl: u64,
    pub tr: u64,
    pub vbits: u64,
    pub leaf: [u64; 2],
}

impl KeyParts<'_> {
    /// The encoding of [`DcfKey::to_bytes`] (the one writer of the format).
    #[inline]
    pub(crate) fn write<O: KeyOut>(&self, w: &mut O, party: u8, bits: u32, out_bits: u32, lanes: u32) {
        w.bytes(&[TAG_DCF, party, bits as u8, out_bits as u8, lanes as u8]);
        w.u128(self.s0);
        let st = stride(out_bits, lanes);
        let d = depth(bits, out_bits, lanes);
        for i in 0..d as usize {
            w.u128((self.cw[i * st] as u128) | ((self.cw[i * st + 1] as u128) << 64));
        }
        w.bits(self.tl, d);
        w.bits(self.tr, d);
        if st == 2 {
            // One-bit values, level i at bit i: the d bits at once (the
            // same stream as one bit per level).
            w.bits(self.vbits & crate::mask(d), d);
        } else if lanes == 2 && out_bits <= 32 {
            // Both lanes of a level in one field: lane 0's bits then lane
            // 1's, as two fields would put them.
            let om = crate::mask(out_bits);
            for i in 0..d as usize {
                let v = (self.cw[i * st + 2] & om) | ((self.cw[i * st + 3] & om) << out_bits);
                w.bits(v, 2 * out_bits);
            }
        } else {
            for i in 0..d as usize {
                for l in 0..lanes as usize {
                    w.bits(self.cw[i * st + 2 + l], out_bits);
                }
            }
        }
        if is_packed(out_bits, lanes) {
            let tb = 1u32 << et_nu(bits, out_bits, lanes);
            w.bits(self.leaf[0], tb.min(64));
            if tb > 64 {
                w.bits(self.leaf[1], tb - 64);
            }
        } else {
            for l in 0..lanes as usize {
                w.bits(self.leaf[l], out_bits);
            }
        }
        w.flush_bits();
    }
}

impl DcfKey {
    /// Decodes a key, checking the header, the exact length and canonical
    /// form. Never panics.
    pub fn from_bytes(b: &[u8]) -> Result<Self, Error> {
        let mut r = Reader::new("DcfKey", b);
        let k = Self::read(&mut r)?;
        r.finish()?;
        Ok(k)
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, Error> {
        let mut cw = [0u64; MAX_CW];
        let k = read_parts(r, &mut cw)?;
        let n = depth(k.bits, k.out_bits, k.lanes) as usize * stride(k.out_bits, k.lanes);
        let key = DcfKey {
            party: k.party,
            bits: k.bits,
            out_bits: k.out_bits,
            lanes: k.lanes,
            s0: k.s0,
            cw: cw[..n].to_vec(),
            tl: k.tl,
            tr: k.tr,
            vbits: k.vbits,
            leaf: k.leaf,
        };
        cw.zeroize();
        Ok(key)
    }
}

/// u64 words of `DcfKey::cw` at most (64 levels of stride ≤ 4).
pub(crate) const MAX_CW: usize = 64 * 4;

/// A decoded DCF key's header and scalar parts; its per-level corrections
/// are in the caller's buffer (the layout of `DcfKey::cw`).
pub(crate) struct ReadParts {
    pub party: u8,
    pub bits: u32,
    pub out_bits: u32,
    pub lanes: u32,
    pub s0: u128,
    pub tl: u64,
    pub tr: u64,
    pub vbits: u64,
    pub leaf: [u64; 2],
}

/// Decodes one DCF key (the one reader of the format), its corrections
/// into `cw` (no allocation): what [`DcfKey::read`] and the batch's direct
/// decoder ([`crate::DcfKeyBatch::extend_encoded`]) share. Checks the
/// header and canonical form; never panics.
#[inline]
pub(crate) fn read_parts(r: &mut Reader<'_>, cw: &mut [u64; MAX_CW]) -> Result<ReadParts, Error> {
    const W: &str = "DcfKey";
    let hdr = [r.u8()?, r.u8()?, r.u8()?, r.u8()?, r.u8()?];
    if hdr[0] != TAG_DCF {
        return Err(Error::Header {
            what: W,
            reason: "not a DCF key (tag)",
        });
    }
    let (party, bits, out_bits, lanes) = (hdr[1], hdr[2] as u32, hdr[3] as u32, hdr[4] as u32);
    if party > 1 {
        return Err(Error::Header {
            what: W,
            reason: "party must be 0 or 1",
        });
    }
    if bits > 64 {
        return Err(Error::Header {
            what: W,
            reason: "input bits must be at most 64",
        });
    }
    if !(1..=64).contains(&out_bits) {
        return Err(Error::Header {
            what: W,
            reason: "output bits must be in 1..=64",
        });
    }
    if !(1..=2).contains(&lanes) {
        return Err(Error::Header {
            what: W,
            reason: "lanes must be 1 or 2",
        });
    }
    let seed_ok = !ggm::seed_mask(is_packed(out_bits, lanes));
    let s0 = r.u128()?;
    if s0 & seed_ok != 0 {
        return Err(Error::NonCanonical {
            what: W,
            reason: "root seed has reserved bits set",
        });
    }
    let d = depth(bits, out_bits, lanes);
    let n = d as usize;
    let st = stride(out_bits, lanes);
    for i in 0..n {
        let s = r.u128()?;
        if s & seed_ok != 0 {
            return Err(Error::NonCanonical {
                what: W,
                reason: "seed correction has reserved bits set",
            });
        }
        cw[i * st] = s as u64;
        cw[i * st + 1] = (s >> 64) as u64;
    }
    let leaf_bits = if st == 2 {
        1usize << et_nu(bits, out_bits, lanes)
    } else {
        (lanes * out_bits) as usize
    };
    r.begin_bits(2 * n + n * (lanes * out_bits) as usize + leaf_bits)?;
    let tl = r.bits(d)?;
    let tr = r.bits(d)?;
    let mut vbits = 0u64;
    if st == 2 {
        for i in 0..n {
            vbits |= r.bits(1)? << i;
        }
    } else if lanes == 2 && out_bits <= 32 {
        // Both lanes of a level in one read (the writer's single field).
        let om = crate::mask(out_bits);
        for i in 0..n {
            let v = r.bits(2 * out_bits)?;
            cw[i * st + 2] = v & om;
            cw[i * st + 3] = (v >> out_bits) & om;
        }
    } else {
        for i in 0..n {
            for l in 0..lanes as usize {
                cw[i * st + 2 + l] = r.bits(out_bits)?;
            }
        }
    }
    let mut leaf = [0u64; 2];
    if st == 2 {
        let tb = 1u32 << et_nu(bits, out_bits, lanes);
        leaf[0] = r.bits(tb.min(64))?;
        if tb > 64 {
            leaf[1] = r.bits(tb - 64)?;
        }
    } else {
        for l in leaf.iter_mut().take(lanes as usize) {
            *l = r.bits(out_bits)?;
        }
    }
    r.end_bits()?;
    Ok(ReadParts {
        party,
        bits,
        out_bits,
        lanes,
        s0,
        tl,
        tr,
        vbits,
        leaf,
    })
}

fn check_params(bits: u32, out_bits: u32, lanes: u32, min_bits: u32) -> Result<(), Error> {
    if !(min_bits..=64).contains(&bits) {
        return Err(Error::Param { name: "bits", value: bits as u64, reason: "input bits out of range (1..=64)" });
    }
    if !(1..=64).contains(&out_bits) {
        return Err(Error::Param { name: "out_bits", value: out_bits as u64, reason: "must be in 1..=64" });
    }
    if !(1..=2).contains(&lanes) {
        return Err(Error::Param { name: "lanes", value: lanes as u64, reason: "must be 1 or 2" });
    }
    Ok(())
}

/// DCF key generation for f_{α,β}(x) = β·\[x < α\] over unsigned `bits`-bit x,
/// β ∈ Z_2^out_bits (reduced mod 2^out_bits). Deterministic given `prg`.
///
/// Panics on bad parameters (`bits` or `out_bits` outside 1..=64, or
/// α ≥ 2^bits); [`try_dcf_gen`] returns an error instead.
pub fn dcf_gen(prg: &mut Prg, bits: u32, alpha: u64, beta: u64, out_bits: u32) -> (DcfKey, DcfKey) {
    try_dcf_gen(prg, bits, alpha, beta, out_bits).expect("dcf_gen: bad parameters")
}

/// [`dcf_gen`] returning [`Error::Param`] on bad parameters.
pub fn try_dcf_gen(prg: &mut Prg, bits: u32, alpha: u64, beta: u64, out_bits: u32) -> Result<(DcfKey, DcfKey), Error> {
    check_params(bits, out_bits, 1, 1)?;
    if alpha & !mask(bits) != 0 {
        return Err(Error::Param { name: "alpha", value: alpha, reason: "must be below 2^bits" });
    }
    Ok(gen_lanes(prg, bits, alpha, [beta, 0], out_bits, 1))
}

/// Internal key generation: 0 ≤ bits ≤ 64, 1 or 2 lanes, α < 2^bits.
pub(crate) fn gen_lanes(prg: &mut Prg, bits: u32, alpha: u64, beta: [u64; 2], out_bits: u32, lanes: u32) -> (DcfKey, DcfKey) {
    debug_assert!(check_params(bits, out_bits, lanes, 0).is_ok());
    let packed = is_packed(out_bits, lanes);
    let smask = ggm::seed_mask(packed);
    let om = mask(out_bits);
    let nl = lanes as usize;
    let n = bits as usize;
    let nu = et_nu(bits, out_bits, lanes);
    let d = depth(bits, out_bits, lanes) as usize;
    let s_root = [prg.random_block().0 & smask, prg.random_block().0 & smask];
    let mut s = s_root;
    let mut t = [0u64, 1u64];
    // V_α: the on-path sum (party 0 minus party 1) of value shares so far.
    let mut va = [0u64; 2];
    let st = stride(out_bits, lanes);
    let mut cw = Vec::with_capacity(n * st);
    let (mut tl, mut tr, mut vbits) = (0u64, 0u64, 0u64);
    for i in 0..d {
        let a = ((alpha >> (n - 1 - i)) & 1) as usize;
        let (keep, lose) = (a, 1 - a);
        let ch: [[Child; 2]; 2] = ggm::expand_both(s, packed);
        let s_cw = ch[0][lose].seed ^ ch[1][lose].seed;
        // (−1)^{t_1}: t_0 − t_1 = (−1)^{t_1} on the path.
        let neg = t[1] == 1;
        let sg = |x: u64| if neg { x.wrapping_neg() } else { x };
        cw.push(s_cw as u64);
        cw.push((s_cw >> 64) as u64);
        for l in 0..nl {
            let mut v = sg(ch[1][lose].v[l].wrapping_sub(ch[0][lose].v[l]).wrapping_sub(va[l]));
            if lose == 0 {
                // x goes left where α goes right: x < α.
                v = v.wrapping_add(sg(beta[l]));
            }
            v &= om;
            va[l] = va[l].wrapping_sub(ch[1][keep].v[l]).wrapping_add(ch[0][keep].v[l]).wrapping_add(sg(v));
            if packed {
                vbits |= v << i;
            } else {
                cw.push(v);
            }
        }
        let a64 = a as u64;
        let t_l = ch[0][0].t ^ ch[1][0].t ^ a64 ^ 1;
        let t_r = ch[0][1].t ^ ch[1][1].t ^ a64;
        tl |= t_l << i;
        tr |= t_r << i;
        let t_keep = if keep == 0 { t_l } else { t_r };
        for b in 0..2 {
            let tb = t[b];
            s[b] = ch[b][keep].seed ^ if tb == 1 { s_cw } else { 0 };
            t[b] = ch[b][keep].t ^ (tb & t_keep);
        }
    }
    let leaf_vals = |seed: u128| -> [u64; 2] {
        if nl == 1 {
            [ggm::leaf_one_lane(seed), 0]
        } else {
            let h = ggm::mmo1(Block(seed), ggm::TWEAK_LEAF).0;
            [h as u64, (h >> 64) as u64]
        }
    };
    let mut leaf = [0u64; 2];
    if packed {
        // Early termination: the 2^ν-entry table over Z_2 (sums are XORs)
        // CW = Convert(s_0) ⊕ Convert(s_1) ⊕ V_α ⊕ T with T[j] = β·[j < α_low],
        // so on the α-path (t_0 ⊕ t_1 = 1) the outputs sum to T[x_low].
        let tmask = table_mask(nu);
        let (c0, c1) = (leaf_table(s[0]), leaf_table(s[1]));
        let below = if beta[0] & 1 == 1 { (1u128 << (alpha & mask(nu))) - 1 } else { 0 };
        let va_all = if va[0] & 1 == 1 { u128::MAX } else { 0 };
        let cw = (c0 ^ c1 ^ va_all ^ below) & tmask;
        leaf = [cw as u64, (cw >> 64) as u64];
    } else {
        let (c0, c1) = (leaf_vals(s[0]), leaf_vals(s[1]));
        for l in 0..nl {
            let v = c1[l].wrapping_sub(c0[l]).wrapping_sub(va[l]);
            leaf[l] = if t[1] == 1 { v.wrapping_neg() } else { v } & om;
        }
    }
    let mk = |party: u8, s0: u128| DcfKey {
        party,
        bits,
        out_bits,
        lanes,
        s0,
        cw: cw.clone(),
        tl,
        tr,
        vbits,
        leaf,
    };
    let k0 = mk(0, s_root[0]);
    let k1 = mk(1, s_root[1]);
    s.zeroize();
    va.zeroize();
    cw.zeroize();
    (k0, k1)
}

/// Packed leaf table of a node: Convert(s) = H_4(s), 128 one-bit entries
/// (entry j = bit j).
#[inline]
pub(crate) fn leaf_table(seed: u128) -> u128 {
    ggm::mmo1(Block(seed), ggm::TWEAK_LEAF).0
}

/// The low 2^ν bits (ν ≤ 7).
#[inline]
pub(crate) fn table_mask(nu: u32) -> u128 {
    if nu >= 7 {
        u128::MAX
    } else {
        (1u128 << (1u32 << nu)) - 1
    }
}

/// Evaluates one DCF key at x (reduced mod 2^bits): this party's share of
/// f_{α,β}(x) in Z_2^out_bits (lane 0).
///
/// The result uses `party`; it should equal `key.party()`.
pub fn dcf_eval(party: u8, key: &DcfKey, x: u64) -> u64 {
    eval_lanes(party, key, x)[0]
}

/// Scalar evaluation of all lanes (reduced mod 2^out_bits).
pub(crate) fn eval_lanes(party: u8, key: &DcfKey, x: u64) -> [u64; 2] {
    let n = key.bits as usize;
    let nl = key.lanes as usize;
    let packed = is_packed(key.out_bits, key.lanes);
    let nu = et_nu(key.bits, key.out_bits, key.lanes);
    let st = stride(key.out_bits, key.lanes);
    let mut s = key.s0;
    let mut t = (party & 1) as u64;
    let mut acc = [0u64; 2];
    let mut blk = [Block::ZERO; 2];
    let mut scratch = [Block::ZERO; 2];
    for i in 0..n - nu as usize {
        let d = (x >> (n - 1 - i)) & 1;
        blk[0] = Block(s ^ d as u128);
        blk[1] = Block(s ^ (ggm::TWEAK_V | d as u128));
        let nb = if packed { 1 } else { 2 };
        ggm::mmo_inplace(&mut blk[..nb], &mut scratch);
        let c = ggm::split_child(blk[0].0, blk[1].0, packed);
        let tm = t.wrapping_neg();
        let tcw = if d == 0 { key.tl } else { key.tr } >> i & 1;
        s = c.seed ^ (key.scw(i, st) & (((tm as u128) << 64) | tm as u128));
        for (l, a) in acc.iter_mut().enumerate().take(nl) {
            *a = a.wrapping_add(c.v[l]).wrapping_add(key.vcw(i, l, st) & tm);
        }
        t = c.t ^ (tcw & t);
    }
    if packed {
        // Early termination: entry x_low of this node's table (Z_2: XORs).
        let j = x & mask(nu);
        let tab = leaf_table(s) ^ (((key.leaf[1] as u128) << 64 | key.leaf[0] as u128) & ((t as u128).wrapping_neg()));
        return [(acc[0] ^ (tab >> j) as u64) & 1, 0];
    }
    let lv = if nl == 1 {
        [ggm::leaf_one_lane(s), 0]
    } else {
        let h = ggm::mmo1(Block(s), ggm::TWEAK_LEAF).0;
        [h as u64, (h >> 64) as u64]
    };
    let tm = t.wrapping_neg();
    let om = mask(key.out_bits);
    let mut out = [0u64; 2];
    for (l, o) in out.iter_mut().enumerate().take(nl) {
        let v = acc[l].wrapping_add(lv[l]).wrapping_add(key.leaf[l] & tm);
        *o = if party & 1 == 1 { v.wrapping_neg() } else { v } & om;
    }
    out
}

/// Evaluates `keys[i]` at `xs[i]` into `out[i]` for all i (converting the
/// keys into the [`DcfKeyBatch`] layout span by span; for keys evaluated
/// online, build the batch offline and call [`DcfKeyBatch::eval`]).
///
/// Panics if the three slices differ in length. Keys of mixed shapes are
/// allowed (chunks that mix shapes fall back to scalar evaluation).
pub fn dcf_eval_batch(party: u8, keys: &[DcfKey], xs: &[u64], out: &mut [u64]) {
    assert_eq!(keys.len(), xs.len(), "dcf_eval_batch: keys and inputs differ in length");
    assert_eq!(keys.len(), out.len(), "dcf_eval_batch: keys and outputs differ in length");
    eval_engine(party, keys.len(), |i| &keys[i], xs, |i, v| out[i] = v[0]);
}

/// Keys converted into one [`DcfKeyBatch`] per step of [`eval_engine`]
/// (bounds the scratch memory of the slice-of-keys APIs).
const SPAN: usize = 4096;

/// The batched evaluator behind the slice-of-keys `*_eval_batch` APIs:
/// converts spans of keys into the evaluation layout ([`DcfKeyBatch`]) and
/// evaluates them, calling `emit(i, lanes)` with the party's share of key
/// `get(i)` at `xs[i]`. Spans whose keys differ in shape fall back to
/// scalar evaluation. (Callers that evaluate the same keys online should
/// build a [`DcfKeyBatch`] offline instead.)
pub(crate) fn eval_engine<'a, G, E>(party: u8, n_keys: usize, get: G, xs: &[u64], mut emit: E)
where
    G: Fn(usize) -> &'a DcfKey,
    E: FnMut(usize, [u64; 2]),
{
    debug_assert_eq!(xs.len(), n_keys);
    let mut o0 = vec![0u64; SPAN.min(n_keys)];
    let mut o1 = vec![0u64; SPAN.min(n_keys)];
    let mut base = 0;
    while base < n_keys {
        let m = SPAN.min(n_keys - base);
        let k0 = get(base);
        let mut b = DcfKeyBatch::with_capacity(m, k0.bits, k0.out_bits, k0.lanes);
        let uniform = (0..m).all(|j| b.push(get(base + j)).is_ok());
        if uniform {
            b.eval(party, &xs[base..base + m], &mut o0[..m], Some(&mut o1[..m]));
            for j in 0..m {
                emit(base + j, [o0[j], o1[j]]);
            }
        } else {
            for j in 0..m {
                emit(base + j, eval_lanes(party, get(base + j), xs[base + j]));
            }
        }
        base += m;
    }
    o0.zeroize();
    o1.zeroize();
}

// ------------------------------------------------------- batched key generation

/// Keys generated together per pass of [`gen_core`]: one AES call per tree
/// level covers all their seeds (4 or 8 blocks per key; 256 keys keep the
/// block buffer within L1/L2).
const GEN_CHUNK: usize = 256;

/// Keys per pass of [`gen_core`] on the vector path (a multiple of the
/// kernel's eight-key groups; their correction words, 32 keys × 31 levels ×
/// 32 bytes at ℓ = 32, stay in L1).
const GEN_CHUNK_VECTOR: usize = 32;

/// Whether [`gen_levels_vector`] runs the AVX-512 kernel on this thread.
#[inline]
fn vector_gen() -> bool {
    cfg!(target_arch = "x86_64")
        && !SCALAR_GEN.with(|c| c.get())
        && hush_primitives::simd::level() == hush_primitives::simd::Level::Avx512
}

/// Draws the two root seeds of one key exactly as [`gen_lanes`] does.
#[inline]
pub(crate) fn draw_roots(prg: &mut Prg, out_bits: u32, lanes: u32) -> [u128; 2] {
    let smask = ggm::seed_mask(is_packed(out_bits, lanes));
    let a = prg.random_block().0 & smask;
    let b = prg.random_block().0 & smask;
    [a, b]
}

/// Batched key generation from pre-drawn root seeds (see [`draw_roots`]):
/// key j of the output is the pair [`gen_lanes`] returns for `alphas[j]`,
/// `betas[j]` when its two root draws yield `roots[j]` — the same keys, byte
/// for byte. The tree is built level by level over chunks of keys, one AES
/// call per level for all seeds of the chunk. Same preconditions as
/// [`gen_lanes`] (0 ≤ bits ≤ 64, α < 2^bits).
pub(crate) fn gen_core(
    bits: u32,
    out_bits: u32,
    lanes: u32,
    roots: &[[u128; 2]],
    alphas: &[u64],
    betas: &[[u64; 2]],
) -> (Vec<DcfKey>, Vec<DcfKey>) {
    let nk = roots.len();
    let mut out0 = Vec::with_capacity(nk);
    let mut out1 = Vec::with_capacity(nk);
    gen_core_each(bits, out_bits, lanes, roots, alphas, betas, |_, [p0, p1]| {
        let mk = |party: u8, p: &KeyParts<'_>| DcfKey {
            party,
            bits,
            out_bits,
            lanes,
            s0: p.s0,
            cw: p.cw.to_vec(),
            tl: p.tl,
            tr: p.tr,
            vbits: p.vbits,
            leaf: p.leaf,
        };
        out0.push(mk(0, p0));
        out1.push(mk(1, p1));
    });
    (out0, out1)
}

/// [`gen_core`] handing each key pair to `emit(j, [party 0's, party 1's])`
/// as borrowed parts, in order (j = 0, 1, …), instead of building
/// [`DcfKey`]s: the dealer encodes them straight into its shares. The
/// parts' buffers are erased once the generation ends.
#[allow(clippy::needless_range_loop)] // k indexes several per-key arrays
pub(crate) fn gen_core_each(
    bits: u32,
    out_bits: u32,
    lanes: u32,
    roots: &[[u128; 2]],
    alphas: &[u64],
    betas: &[[u64; 2]],
    emit: impl FnMut(usize, [&KeyParts<'_>; 2]),
) {
    // One instance per key shape, so the level loop's shape tests and lane
    // loops are constants (issue 35: the loop around the AES call is most
    // of a key's generation time).
    match (lanes, is_packed(out_bits, lanes)) {
        (1, true) => gen_core_shaped::<1, true>(bits, out_bits, roots, alphas, betas, emit),
        (1, false) => gen_core_shaped::<1, false>(bits, out_bits, roots, alphas, betas, emit),
        _ => gen_core_shaped::<2, false>(bits, out_bits, roots, alphas, betas, emit),
    }
}

#[allow(clippy::needless_range_loop)] // k indexes several per-key arrays
fn gen_core_shaped<const NL: usize, const PACKED: bool>(
    bits: u32,
    out_bits: u32,
    roots: &[[u128; 2]],
    alphas: &[u64],
    betas: &[[u64; 2]],
    mut emit: impl FnMut(usize, [&KeyParts<'_>; 2]),
) {
    let lanes = NL as u32;
    debug_assert!(check_params(bits, out_bits, lanes, 0).is_ok());
    debug_assert_eq!(PACKED, is_packed(out_bits, lanes));
    assert_eq!(roots.len(), alphas.len());
    assert_eq!(roots.len(), betas.len());
    let nk = roots.len();
    let packed = PACKED;
    let om = mask(out_bits);
    let nl = NL;
    let n = bits as usize;
    let nu = et_nu(bits, out_bits, lanes);
    let d = depth(bits, out_bits, lanes) as usize;
    let st = stride(out_bits, lanes);
    // Blocks per key and level: 2 parties × 2 directions (× 2 for values).
    let per = if packed { 2 } else { 4 };
    let bpk = 2 * per;
    // The vector path keeps a chunk's correction words in L1 (32 keys); the
    // scalar path batches the AES of a level across GEN_CHUNK keys.
    let cm = if vector_gen() { GEN_CHUNK_VECTOR } else { GEN_CHUNK }.min(nk.max(1));
    let mut blk = vec![Block::ZERO; cm * bpk];
    let mut s = vec![[0u128; 2]; cm];
    let mut t = vec![[0u64; 2]; cm];
    let mut va = vec![[0u64; 2]; cm];
    // Correction words of the chunk, key k at k·dst (flat, no per-level pushes).
    let dst = d * st;
    let mut cwf = vec![0u64; cm * dst];
    let mut tl = vec![0u64; cm];
    let mut tr = vec![0u64; cm];
    let mut vb = vec![0u64; cm];
    let mut base = 0;
    while base < nk {
        let m = cm.min(nk - base);
        for k in 0..m {
            s[k] = roots[base + k];
            t[k] = [0, 1];
            va[k] = [0, 0];
            tl[k] = 0;
            tr[k] = 0;
            vb[k] = 0;
        }
        // Keys [0, vdone) level by level in AVX-512 registers (the same
        // arithmetic, four keys per register); the rest by the scalar loop.
        let vdone = gen_levels_vector::<NL, PACKED>(
            n,
            d,
            om,
            &mut s[..m],
            &mut t[..m],
            &mut va[..m],
            &mut cwf[..m * dst],
            &mut tl[..m],
            &mut tr[..m],
            &mut vb[..m],
            &alphas[base..base + m],
            &betas[base..base + m],
        );
        for i in 0..d {
            if vdone == m {
                break;
            }
            for k in vdone..m {
                let o = (k - vdone) * bpk;
                for b in 0..2 {
                    let sb = s[k][b];
                    blk[o + b * per] = Block(sb);
                    blk[o + b * per + 1] = Block(sb ^ 1);
                    if !packed {
                        blk[o + b * per + 2] = Block(sb ^ ggm::TWEAK_V);
                        blk[o + b * per + 3] = Block(sb ^ (ggm::TWEAK_V + 1));
                    }
                }
            }
            ggm::pi().encrypt_blocks(&mut blk[..(m - vdone) * bpk]);
            let sh = n - 1 - i;
            for k in vdone..m {
                let o = (k - vdone) * bpk;
                let [s0, s1] = s[k];
                // MMO: H_c(s) = π(s ⊕ c) ⊕ s ⊕ c; children B[b][d].
                let b00 = blk[o].0 ^ s0;
                let b01 = blk[o + 1].0 ^ s0 ^ 1;
                let b10 = blk[o + per].0 ^ s1;
                let b11 = blk[o + per + 1].0 ^ s1 ^ 1;
                let a64 = (alphas[base + k] >> sh) & 1;
                let am = a64.wrapping_neg();
                let am128 = ((am as u128) << 64) | am as u128;
                // keep = α_i, lose = 1 − α_i (branch-free selects).
                let k0b = b00 ^ ((b00 ^ b01) & am128);
                let l0b = b00 ^ b01 ^ k0b;
                let k1b = b10 ^ ((b10 ^ b11) & am128);
                let l1b = b10 ^ b11 ^ k1b;
                let smask_lvl = ggm::seed_mask(packed);
                let s_cw = (l0b ^ l1b) & smask_lvl;
                let (t0, t1) = t[k].into();
                let negm = t1.wrapping_neg();
                let sg = |x: u64| (x ^ negm).wrapping_sub(negm);
                let cw = &mut cwf[k * dst + i * st..k * dst + (i + 1) * st];
                cw[0] = s_cw as u64;
                cw[1] = (s_cw >> 64) as u64;
                let beta = betas[base + k];
                let vak = &mut va[k];
                if packed {
                    let (vk0, vl0) = (((k0b >> 1) & 1) as u64, ((l0b >> 1) & 1) as u64);
                    let (vk1, vl1) = (((k1b >> 1) & 1) as u64, ((l1b >> 1) & 1) as u64);
                    let v = sg(vl1.wrapping_sub(vl0).wrapping_sub(vak[0]).wrapping_add(beta[0] & am)) & om;
                    vak[0] = vak[0].wrapping_sub(vk1).wrapping_add(vk0).wrapping_add(sg(v));
                    vb[k] |= v << i;
                } else {
                    let w00 = blk[o + 2].0 ^ s0 ^ ggm::TWEAK_V;
                    let w01 = blk[o + 3].0 ^ s0 ^ (ggm::TWEAK_V + 1);
                    let w10 = blk[o + per + 2].0 ^ s1 ^ ggm::TWEAK_V;
                    let w11 = blk[o + per + 3].0 ^ s1 ^ (ggm::TWEAK_V + 1);
                    let wk0 = w00 ^ ((w00 ^ w01) & am128);
                    let wl0 = w00 ^ w01 ^ wk0;
                    let wk1 = w10 ^ ((w10 ^ w11) & am128);
                    let wl1 = w10 ^ w11 ^ wk1;
                    for l in 0..nl {
                        let lane = |w: u128| (w >> (64 * l)) as u64;
                        let v = sg(lane(wl1).wrapping_sub(lane(wl0)).wrapping_sub(vak[l]).wrapping_add(beta[l] & am)) & om;
                        vak[l] = vak[l].wrapping_sub(lane(wk1)).wrapping_add(lane(wk0)).wrapping_add(sg(v));
                        cw[2 + l] = v;
                    }
                }
                let t_l = ((b00 ^ b10) & 1) as u64 ^ a64 ^ 1;
                let t_r = ((b01 ^ b11) & 1) as u64 ^ a64;
                tl[k] |= t_l << i;
                tr[k] |= t_r << i;
                let t_keep = t_l ^ ((t_l ^ t_r) & am);
                let m0 = (t0 as u128).wrapping_neg();
                let m1 = (t1 as u128).wrapping_neg();
                s[k] = [(k0b & smask_lvl) ^ (s_cw & m0), (k1b & smask_lvl) ^ (s_cw & m1)];
                t[k] = [(k0b & 1) as u64 ^ (t0 & t_keep), (k1b & 1) as u64 ^ (t1 & t_keep)];
            }
        }
        // Leaves: H_4 of both final seeds (packed table or two-lane values),
        // one AES call for the chunk; one-lane unpacked leaves need none.
        let need_leaf_aes = packed || nl == 2;
        if need_leaf_aes {
            for k in 0..m {
                blk[2 * k] = Block(s[k][0] ^ ggm::TWEAK_LEAF);
                blk[2 * k + 1] = Block(s[k][1] ^ ggm::TWEAK_LEAF);
            }
            ggm::pi().encrypt_blocks(&mut blk[..2 * m]);
            for k in 0..m {
                blk[2 * k].0 ^= s[k][0] ^ ggm::TWEAK_LEAF;
                blk[2 * k + 1].0 ^= s[k][1] ^ ggm::TWEAK_LEAF;
            }
        }
        for k in 0..m {
            let alpha = alphas[base + k];
            let beta = betas[base + k];
            let mut leaf = [0u64; 2];
            if packed {
                let tmask = table_mask(nu);
                let (c0, c1) = (blk[2 * k].0, blk[2 * k + 1].0);
                let below = if beta[0] & 1 == 1 { (1u128 << (alpha & mask(nu))) - 1 } else { 0 };
                let va_all = if va[k][0] & 1 == 1 { u128::MAX } else { 0 };
                let cw = (c0 ^ c1 ^ va_all ^ below) & tmask;
                leaf = [cw as u64, (cw >> 64) as u64];
            } else {
                let (c0, c1) = if nl == 1 {
                    ([ggm::leaf_one_lane(s[k][0]), 0], [ggm::leaf_one_lane(s[k][1]), 0])
                } else {
                    let (h0, h1) = (blk[2 * k].0, blk[2 * k + 1].0);
                    ([h0 as u64, (h0 >> 64) as u64], [h1 as u64, (h1 >> 64) as u64])
                };
                for l in 0..nl {
                    let v = c1[l].wrapping_sub(c0[l]).wrapping_sub(va[k][l]);
                    leaf[l] = if t[k][1] == 1 { v.wrapping_neg() } else { v } & om;
                }
            }
            let cw = &cwf[k * dst..(k + 1) * dst];
            let p0 = KeyParts { s0: roots[base + k][0], cw, tl: tl[k], tr: tr[k], vbits: vb[k], leaf };
            let p1 = KeyParts { s0: roots[base + k][1], ..p0 };
            emit(base + k, [&p0, &p1]);
            leaf.zeroize();
        }
        base += m;
    }
    blk.zeroize();
    hush_primitives::wipe::wipe_u64s(&mut cwf);
    s.zeroize();
    va.zeroize();
    t.zeroize();
    tl.zeroize();
    tr.zeroize();
    vb.zeroize();
}

/// The vectorised level loop of [`gen_core_shaped`] where the CPU has
/// AVX-512 + VAES ([`crate::dcf_gen_x86`]): builds a prefix of the chunk's
/// keys and returns its length (0 elsewhere, or when `force_scalar`).
#[allow(clippy::too_many_arguments)]
#[inline]
fn gen_levels_vector<const NL: usize, const PACKED: bool>(
    n: usize,
    d: usize,
    om: u64,
    s: &mut [[u128; 2]],
    t: &mut [[u64; 2]],
    va: &mut [[u64; 2]],
    cwf: &mut [u64],
    tl: &mut [u64],
    tr: &mut [u64],
    vb: &mut [u64],
    alphas: &[u64],
    betas: &[[u64; 2]],
) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if vector_gen() {
            let mut c = crate::dcf_gen_x86::Chunk { s, t, va, cwf, tl, tr, vb, alphas, betas };
            // SAFETY: level avx512 includes avx512f, vaes and aes.
            return unsafe { crate::dcf_gen_x86::levels::<NL, PACKED>(n, d, om, &mut c) };
        }
    }
    let _ = (n, d, om, s, t, va, cwf, tl, tr, vb, alphas, betas);
    0
}

thread_local! {
    /// Tests: force the scalar level loop on this thread (to compare the
    /// vectorised generator with it key by key).
    static SCALAR_GEN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with DCF key generation forced onto the scalar level loop on
/// this thread (the portable path; tests compare it with the vector one).
#[doc(hidden)]
pub fn with_scalar_gen<R>(f: impl FnOnce() -> R) -> R {
    let old = SCALAR_GEN.with(|c| c.replace(true));
    let r = f();
    SCALAR_GEN.with(|c| c.set(old));
    r
}

/// One-lane keys of a batch built and encoded straight into fixed slots:
/// key j of party p is written ([`DcfKey::to_bytes`]' bytes) at
/// `slots[p][j·stride + at ..]` for each party p given — no [`DcfKey`] (nor
/// its allocation) per key. Roots are pre-drawn ([`draw_roots`]), so the
/// caller may run disjoint ranges of a batch in parallel.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gen_into_slots(
    bits: u32,
    out_bits: u32,
    roots: &[[u128; 2]],
    alphas: &[u64],
    betas: &[[u64; 2]],
    slots: &mut [Option<&mut [u8]>; 2],
    stride: usize,
    at: usize,
) {
    let kb = DcfKey::size_bytes(bits, out_bits);
    gen_core_each(bits, out_bits, 1, roots, alphas, betas, |j, parts| {
        for (p, slot) in slots.iter_mut().enumerate() {
            if let Some(slot) = slot.as_deref_mut() {
                let o = j * stride + at;
                let mut w = crate::codec::SliceWriter::new(&mut slot[o..o + kb]);
                parts[p].write(&mut w, p as u8, bits, out_bits, 1);
                debug_assert_eq!(w.pos, kb);
            }
        }
    });
}

/// Validates the parameters of a batch of one-lane DCFs.
fn check_batch(bits: u32, out_bits: u32, alphas: &[u64], betas: &[u64]) -> Result<(), Error> {
    check_params(bits, out_bits, 1, 1)?;
    if alphas.len() != betas.len() {
        return Err(Error::Param { name: "betas", value: betas.len() as u64, reason: "length differs from alphas" });
    }
    if let Some(&a) = alphas.iter().find(|&&a| a & !mask(bits) != 0) {
        return Err(Error::Param { name: "alpha", value: a, reason: "must be below 2^bits" });
    }
    Ok(())
}

/// Batched [`dcf_gen`]: key pair j is exactly what `dcf_gen(prg, bits,
/// alphas[j], betas[j], out_bits)` would return when called for j = 0, 1, …
/// in turn on the same PRG (same draws, same order, same bytes), but the AES
/// work of each tree level is done in one call across many keys. Returns
/// (party 0's keys, party 1's keys).
///
/// Panics on bad parameters or if the slices differ in length (see
/// [`try_dcf_gen_batch`]).
pub fn dcf_gen_batch(prg: &mut Prg, bits: u32, alphas: &[u64], betas: &[u64], out_bits: u32) -> (Vec<DcfKey>, Vec<DcfKey>) {
    try_dcf_gen_batch(prg, bits, alphas, betas, out_bits).expect("dcf_gen_batch: bad parameters")
}

/// [`dcf_gen_batch`] returning [`Error::Param`] on bad parameters (nothing
/// is drawn from the PRG then).
pub fn try_dcf_gen_batch(
    prg: &mut Prg,
    bits: u32,
    alphas: &[u64],
    betas: &[u64],
    out_bits: u32,
) -> Result<(Vec<DcfKey>, Vec<DcfKey>), Error> {
    let mut r = dcf_gen_batch_multi(prg, &[DcfBatchSpec { bits, out_bits, alphas, betas }])?;
    Ok(r.pop().expect("one spec"))
}

/// Party 0's and party 1's keys of a batch.
pub type DcfKeyVecs = (Vec<DcfKey>, Vec<DcfKey>);

/// One family of a [`dcf_gen_batch_multi`] call: `alphas.len()` one-lane
/// DCFs of one shape.
#[derive(Clone, Copy, Debug)]
pub struct DcfBatchSpec<'a> {
    pub bits: u32,
    pub out_bits: u32,
    pub alphas: &'a [u64],
    pub betas: &'a [u64],
}

/// Batched generation of several interleaved families of DCFs: equivalent,
/// byte for byte, to calling `dcf_gen(prg, s.bits, s.alphas[j], s.betas[j],
/// s.out_bits)` for j = 0, 1, … and, within each j, for every spec s in
/// order (e.g. two DCFs per truncation gate). All specs must have the same
/// number of keys. Returns one (party 0, party 1) pair of key vectors per
/// spec.
pub fn dcf_gen_batch_multi(prg: &mut Prg, specs: &[DcfBatchSpec<'_>]) -> Result<Vec<DcfKeyVecs>, Error> {
    let nk = specs.first().map_or(0, |s| s.alphas.len());
    for s in specs {
        check_batch(s.bits, s.out_bits, s.alphas, s.betas)?;
        if s.alphas.len() != nk {
            return Err(Error::Param { name: "alphas", value: s.alphas.len() as u64, reason: "specs differ in length" });
        }
    }
    let mut roots: Vec<Vec<[u128; 2]>> = specs.iter().map(|_| Vec::with_capacity(nk)).collect();
    for _ in 0..nk {
        for (s, r) in specs.iter().zip(roots.iter_mut()) {
            r.push(draw_roots(prg, s.out_bits, 1));
        }
    }
    let out = specs
        .iter()
        .zip(roots.iter_mut())
        .map(|(s, r)| {
            let mut betas: Vec<[u64; 2]> = s.betas.iter().map(|&b| [b, 0]).collect();
            let keys = gen_core(s.bits, s.out_bits, 1, r, s.alphas, &betas);
            r.zeroize();
            betas.zeroize();
            keys
        })
        .collect();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The encoding as it was written before issue 35's third pass: one
    /// bit-field per level and lane (the reference for the merged fields of
    /// `KeyParts::write`).
    fn write_fieldwise(p: &KeyParts<'_>, w: &mut Writer, party: u8, bits: u32, out_bits: u32, lanes: u32) {
        w.bytes(&[TAG_DCF, party, bits as u8, out_bits as u8, lanes as u8]);
        w.u128(p.s0);
        let st = stride(out_bits, lanes);
        let d = depth(bits, out_bits, lanes);
        for i in 0..d as usize {
            w.u128((p.cw[i * st] as u128) | ((p.cw[i * st + 1] as u128) << 64));
        }
        w.bits(p.tl, d);
        w.bits(p.tr, d);
        for i in 0..d as usize {
            for l in 0..lanes as usize {
                let v = if st == 2 { (p.vbits >> i) & 1 } else { p.cw[i * st + 2 + l] };
                w.bits(v, out_bits);
            }
        }
        if is_packed(out_bits, lanes) {
            let tb = 1u32 << et_nu(bits, out_bits, lanes);
            w.bits(p.leaf[0], tb.min(64));
            if tb > 64 {
                w.bits(p.leaf[1], tb - 64);
            }
        } else {
            for l in 0..lanes as usize {
                w.bits(p.leaf[l], out_bits);
            }
        }
        w.flush_bits();
    }

    #[test]
    fn merged_value_fields_equal_one_field_per_value() {
        let mut prg = Prg::new(Block(0x35));
        for bits in [1u32, 2, 7, 8, 31, 32, 63, 64] {
            for out_bits in [1u32, 2, 16, 31, 32, 33, 64] {
                for lanes in [1u32, 2] {
                    let d = depth(bits, out_bits, lanes) as usize;
                    let st = stride(out_bits, lanes);
                    let om = mask(out_bits);
                    let mut cw: Vec<u64> = (0..d * st).map(|_| prg.next_u64()).collect();
                    for i in 0..d {
                        for l in 2..st {
                            cw[i * st + l] &= om;
                        }
                    }
                    let p = KeyParts {
                        s0: prg.random_block().0 & ggm::seed_mask(is_packed(out_bits, lanes)),
                        cw: &cw,
                        tl: prg.next_u64() & mask(d as u32),
                        tr: prg.next_u64() & mask(d as u32),
                        vbits: prg.next_u64() & mask(d as u32),
                        leaf: [prg.next_u64(), prg.next_u64()],
                    };
                    let leaf_ok = |mut p: [u64; 2]| {
                        if is_packed(out_bits, lanes) {
                            let tb = 1u32 << et_nu(bits, out_bits, lanes);
                            p[0] &= mask(tb.min(64));
                            p[1] = if tb > 64 { p[1] & mask(tb - 64) } else { 0 };
                        } else {
                            p = [p[0] & om, if lanes == 2 { p[1] & om } else { 0 }];
                        }
                        p
                    };
                    let p = KeyParts { leaf: leaf_ok(p.leaf), ..p };
                    let (mut a, mut b) = (Writer::with_capacity(0), Writer::with_capacity(0));
                    p.write(&mut a, 1, bits, out_bits, lanes);
                    write_fieldwise(&p, &mut b, 1, bits, out_bits, lanes);
                    assert_eq!(a.buf, b.buf, "bits {bits} out {out_bits} lanes {lanes}");
                    assert_eq!(a.buf.len(), DcfKey::size_bytes_lanes(bits, out_bits, lanes));
                    let mut slot = vec![0u8; a.buf.len()];
                    let mut sw = crate::codec::SliceWriter::new(&mut slot);
                    p.write(&mut sw, 1, bits, out_bits, lanes);
                    assert_eq!(sw.pos, slot.len());
                    assert_eq!(slot, a.buf, "slice writer, bits {bits} out {out_bits} lanes {lanes}");
                }
            }
        }
    }
}

/// [`read_parts`] for a key whose shape the caller already knows and whose
/// slice has exactly that shape's encoded length (the batch decoder's hot
/// path): the header bytes are compared at once, fields are read from
/// fixed offsets and the bit stream through a local accumulator, with the
/// same checks (header, reserved seed bits, zero padding) and the same
/// result as [`read_parts`] (`batch::tests::extend_encoded_matches_push`
/// and its malformed-key cases). Never panics: a slice of another length
/// is an error.
#[inline]
pub(crate) fn read_parts_shaped(
    k: &[u8],
    shape: (u8, u32, u32, u32),
    cw: &mut [u64; MAX_CW],
) -> Result<ReadParts, Error> {
    const W: &str = "DcfKey";
    let (party, bits, out_bits, lanes) = shape;
    let kl = DcfKey::size_bytes_lanes(bits, out_bits, lanes);
    if k.len() != kl {
        return Err(Error::Length {
            what: W,
            expected: kl,
            got: k.len(),
        });
    }
    if k[..HEADER] != [TAG_DCF, party, bits as u8, out_bits as u8, lanes as u8] {
        // The general reader names what is wrong (or it is a shape mismatch).
        let mut r = Reader::new(W, k);
        read_parts(&mut r, cw)?;
        return Err(Error::Header {
            what: "DcfKeyBatch",
            reason: "key shape differs from the batch",
        });
    }
    let seed_ok = !ggm::seed_mask(is_packed(out_bits, lanes));
    let word = |at: usize| u128::from_le_bytes(k[at..at + 16].try_into().expect("16 bytes"));
    let s0 = word(HEADER);
    let d = depth(bits, out_bits, lanes);
    let n = d as usize;
    let st = stride(out_bits, lanes);
    let mut bad = s0 & seed_ok;
    for i in 0..n {
        let s = word(HEADER + 16 + 16 * i);
        bad |= s & seed_ok;
        cw[i * st] = s as u64;
        cw[i * st + 1] = (s >> 64) as u64;
    }
    if bad != 0 {
        return Err(Error::NonCanonical {
            what: W,
            reason: "seed has reserved bits set",
        });
    }
    // The bit stream: the rest of the slice, read eight bytes at a time.
    let bs = &k[HEADER + 16 + 16 * n..];
    let (mut acc, mut na, mut pos) = (0u128, 0u32, 0usize);
    let mut get = |w: u32| -> u64 {
        if na < w {
            let take = (bs.len() - pos).min(8);
            let mut a = [0u8; 8];
            a[..take].copy_from_slice(&bs[pos..pos + take]);
            pos += take;
            acc |= (u64::from_le_bytes(a) as u128) << na;
            na += 8 * take as u32;
        }
        let x = (acc as u64) & mask(w);
        acc = if w >= 128 { 0 } else { acc >> w };
        na = na.saturating_sub(w);
        x
    };
    let tl = get(d);
    let tr = get(d);
    let mut vbits = 0u64;
    if st == 2 {
        for i in 0..n {
            vbits |= get(1) << i;
        }
    } else if lanes == 2 && out_bits <= 32 {
        let om = mask(out_bits);
        for i in 0..n {
            let v = get(2 * out_bits);
            cw[i * st + 2] = v & om;
            cw[i * st + 3] = (v >> out_bits) & om;
        }
    } else {
        for i in 0..n {
            for l in 0..lanes as usize {
                cw[i * st + 2 + l] = get(out_bits);
            }
        }
    }
    let mut leaf = [0u64; 2];
    if st == 2 {
        let tb = 1u32 << et_nu(bits, out_bits, lanes);
        leaf[0] = get(tb.min(64));
        if tb > 64 {
            leaf[1] = get(tb - 64);
        }
    } else {
        for l in leaf.iter_mut().take(lanes as usize) {
            *l = get(out_bits);
        }
    }
    // Whatever remains (the padding of the last byte, and any bytes not
    // yet consumed) must be zero.
    let rest_zero = acc == 0 && bs[pos..].iter().all(|&b| b == 0);
    acc = 0;
    let _ = acc;
    if !rest_zero {
        return Err(Error::NonCanonical {
            what: W,
            reason: "nonzero padding bits",
        });
    }
    Ok(ReadParts {
        party,
        bits,
        out_bits,
        lanes,
        s0,
        tl,
        tr,
        vbits,
        leaf,
    })
}
