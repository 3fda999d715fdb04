//! Truncation pairs: the correlation of [`crate::transformer::Ctx::trunc`],
//! hush's one-opening faithful truncation of *bounded* values
//! (|x| < 2^{ℓ−2}).
//!
//! Per element: a uniform r ∈ Z_2^ℓ, shared additively, with additive
//! shares (over Z_2^ℓ) of r_hi = ⌊r / 2^f⌋ and of r_msb = ⌊r / 2^{ℓ−1}⌋.
//! This is the dealer-assisted form of the truncation pair of Mohassel and
//! Zhang (SecureML, S&P 2017) with the extra most-significant-bit share that
//! makes the wrap-around exact, as in the "known MSB" truncation of
//! Escudero, Ghosh, Keller, Rachuri and Scholl (CRYPTO 2020, §5).
//!
//! **Seeded.** Party 1's three shares are PRG streams under its sub-key
//! ([`hush_deal::sub_key`]); party 0's r-share is a stream under the batch
//! key and its r_hi and r_msb shares are the differences to the true values.
//! **What each host sees.** Its own share of each of the three values; each
//! is uniform on its own (a uniform stream, or a true value minus the
//! other party's uniform stream), so neither host learns r, r_hi or r_msb.
//! The dealer (or the modules) compute r and never see online data.

use hush_deal::wire::{Reader, Writer};
use hush_deal::{ring_mask, stream, Blob, BlobReader, DealRequest, Description, Error, Result};
use hush_primitives::aes::Aes128;
use hush_primitives::Block;
use zeroize::Zeroize;

/// One party's share of `n` truncation pairs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TruncShare {
    pub r: Vec<u64>,
    pub hi: Vec<u64>,
    pub msb: Vec<u64>,
}

impl Drop for TruncShare {
    fn drop(&mut self) {
        hush_primitives::wipe::wipe_vec_u64(&mut self.r);
        hush_primitives::wipe::wipe_vec_u64(&mut self.hi);
        hush_primitives::wipe::wipe_vec_u64(&mut self.msb);
    }
}

impl TruncShare {
    pub fn to_bytes(&self, bits: u32) -> Vec<u8> {
        let mut b = Blob::new();
        b.put_ring(&self.r, bits).put_ring(&self.hi, bits).put_ring(&self.msb, bits);
        std::mem::take(&mut b.0)
    }
    pub fn from_bytes(buf: &[u8], n: usize, bits: u32) -> Result<Self> {
        let mut rd = BlobReader::new(buf);
        let t = TruncShare { r: rd.take_ring(n, bits)?, hi: rd.take_ring(n, bits)?, msb: rd.take_ring(n, bits)? };
        rd.finish()?;
        Ok(t)
    }
}

const R0: u64 = 1;
const R1: u64 = 4;
const H1: u64 = 5;
const M1: u64 = 6;

/// Words `start ..` of [`ring_stream`] (as many as `out` holds), under the
/// stream key expanded once per share (`aes` = `Aes128::new(key)`).
pub(crate) fn ring_part(aes: &Aes128, nonce: u64, start: usize, bits: u32, out: &mut [u64]) {
    hush_deal::stream_at_with(aes, nonce, start, out);
    if bits < 64 {
        let m = ring_mask(bits);
        out.iter_mut().for_each(|x| *x &= m);
    }
}

/// Party 1's first arrays (r, hi, msb and then the streams `more`) of
/// items `start ..` into `v`.
fn party1_part(sub: &Aes128, start: usize, bits: u32, more: &[u64], v: &mut [Vec<u64>]) {
    for (o, &nonce) in v.iter_mut().zip([R1, H1, M1].iter().chain(more)) {
        ring_part(sub, nonce, start, bits, o);
    }
}

/// Party 0's (r, hi, msb) of items `start ..` into `v[0..3]`, against party
/// 1's, which must be in `one[0..3]`.
fn party0_part(key: &Aes128, start: usize, bits: u32, f: u32, v: &mut [Vec<u64>], one: &[Vec<u64>]) {
    let m = ring_mask(bits);
    ring_part(key, R0, start, bits, &mut v[0]);
    let (r0, rest) = v.split_at_mut(1);
    let (hi, msb) = rest.split_at_mut(1);
    for i in 0..r0[0].len() {
        let r = r0[0][i].wrapping_add(one[0][i]) & m;
        hi[0][i] = (r >> f).wrapping_sub(one[1][i]) & m;
        msb[0][i] = (r >> (bits - 1)).wrapping_sub(one[2][i]) & m;
    }
}

/// The three truncation kinds, as the in-place builders see them: how
/// many arrays a share has, and how a part of it is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tk {
    Pairs,
    Squares,
    Muls,
}

/// The batch key and party 1's sub-key, each expanded once per share
/// (`key` only for party 0, whose share needs it).
struct Keys {
    key: Option<Aes128>,
    sub: Aes128,
}

impl Keys {
    fn new(key: Block, party: u8) -> Self {
        Keys { key: (party == 0).then(|| Aes128::new(key)), sub: Aes128::new(hush_deal::sub_key(key, 1)) }
    }
    /// Party 1's keys from its sub-key alone (its seeded expansion).
    fn party1(sub: Block) -> Self {
        Keys { key: None, sub: Aes128::new(sub) }
    }
}

impl Tk {
    /// Arrays of a share, in wire order.
    fn arrays(self) -> usize {
        match self {
            Tk::Pairs => 3,
            Tk::Squares => 5,
            Tk::Muls => 6,
        }
    }
    /// Scratch arrays a part needs besides its outputs: party 0 computes
    /// party 1's share of the part first (one array each).
    fn extra(self, party: u8) -> usize {
        if party == 0 {
            self.arrays()
        } else {
            0
        }
    }
    /// Party 1's streams after (r, hi, msb).
    fn more(self) -> &'static [u64] {
        match self {
            Tk::Pairs => &[],
            Tk::Squares => &[SQ1, HM1],
            Tk::Muls => &[S1M, HS1, MS1],
        }
    }
    /// `party`'s values of items `start .. start + m` into `v[..arrays]`
    /// (m = `v[0].len()`), with `v[arrays..]` as party 0's scratch. The one
    /// computation both the byte path ([`hush_deal::elementwise_bytes`])
    /// and the direct path ([`hush_deal::elementwise_into`]) run, so both
    /// deal the same values from the same draws.
    fn part(self, k: &Keys, party: u8, bits: u32, f: u32, start: usize, v: &mut [Vec<u64>]) {
        let a = self.arrays();
        let Some(key) = k.key.as_ref().filter(|_| party == 0) else {
            party1_part(&k.sub, start, bits, self.more(), &mut v[..a]);
            return;
        };
        let (out, one) = v.split_at_mut(a);
        party1_part(&k.sub, start, bits, self.more(), one);
        party0_part(key, start, bits, f, out, one);
        let m = ring_mask(bits);
        match self {
            Tk::Pairs => {}
            Tk::Squares => {
                let (t, rest) = out.split_at_mut(3);
                let (sq, hm) = rest.split_at_mut(1);
                for i in 0..t[0].len() {
                    let r = t[0][i].wrapping_add(one[0][i]) & m;
                    let (h, b) = ((r >> f) & m, (r >> (bits - 1)) & 1);
                    sq[0][i] = h.wrapping_mul(h).wrapping_sub(one[3][i]) & m;
                    hm[0][i] = h.wrapping_mul(b).wrapping_sub(one[4][i]) & m;
                }
            }
            Tk::Muls => {
                ring_part(key, S0M, start, bits, &mut out[3]);
                let (t, rest) = out.split_at_mut(3);
                let (s0, rest) = rest.split_at_mut(1);
                let (hs, ms) = rest.split_at_mut(1);
                for i in 0..t[0].len() {
                    let r = t[0][i].wrapping_add(one[0][i]) & m;
                    let s = s0[0][i].wrapping_add(one[3][i]) & m;
                    let (h, b) = ((r >> f) & m, (r >> (bits - 1)) & 1);
                    hs[0][i] = h.wrapping_mul(s).wrapping_sub(one[4][i]) & m;
                    ms[0][i] = b.wrapping_mul(s).wrapping_sub(one[5][i]) & m;
                }
            }
        }
    }
    /// `party`'s share of `n` items as bytes, built in place on every core.
    fn bytes(self, k: &Keys, party: u8, n: usize, bits: u32, f: u32) -> Vec<u8> {
        hush_deal::elementwise_bytes(n, self.arrays(), self.extra(party), bits, |start, v| self.part(k, party, bits, f, start, v))
    }
    /// The same values appended to the host's arrays `dests` (wire order).
    fn fill(self, k: &Keys, party: u8, n: usize, bits: u32, f: u32, dests: &mut [&mut Vec<u64>]) {
        debug_assert_eq!(dests.len(), self.arrays());
        hush_deal::elementwise_into(dests, n, self.extra(party), |start, v| self.part(k, party, bits, f, start, v));
    }
}

/// [`deal_trunc`]`(…).to_bytes(bits)`, built in place on every core
/// ([`hush_deal::elementwise_bytes`]; the same bytes).
pub fn deal_trunc_bytes(key: Block, party: u8, n: usize, bits: u32, f: u32) -> Vec<u8> {
    Tk::Pairs.bytes(&Keys::new(key, party), party, n, bits, f)
}

fn party1_bytes(sub: Block, n: usize, bits: u32) -> Vec<u8> {
    Tk::Pairs.bytes(&Keys::party1(sub), 1, n, bits, 0)
}

/// [`deal_trunc_square`]`(…).to_bytes(bits)`, built in place (the same bytes).
pub fn deal_trunc_square_bytes(key: Block, party: u8, n: usize, bits: u32, f: u32) -> Vec<u8> {
    Tk::Squares.bytes(&Keys::new(key, party), party, n, bits, f)
}

fn party1_sq_bytes(sub: Block, n: usize, bits: u32) -> Vec<u8> {
    Tk::Squares.bytes(&Keys::party1(sub), 1, n, bits, 0)
}

/// [`deal_trunc_mul`]`(…).to_bytes(bits)`, built in place (the same bytes).
pub fn deal_trunc_mul_bytes(key: Block, party: u8, n: usize, bits: u32, f: u32) -> Vec<u8> {
    Tk::Muls.bytes(&Keys::new(key, party), party, n, bits, f)
}

fn party1_mul_bytes(sub: Block, n: usize, bits: u32) -> Vec<u8> {
    Tk::Muls.bytes(&Keys::party1(sub), 1, n, bits, 0)
}

/// The host's arrays of one truncation kind's share, in wire order: what a
/// [`TruncSink`] fills.
pub trait TruncArrays: Default + Send + 'static {
    /// The dealing kind whose share this is.
    const KIND: &'static str;
    /// Its arrays, in the order the share's bytes carry them.
    fn arrays_mut(&mut self) -> Vec<&mut Vec<u64>>;
    /// Their lengths (equal in a well-formed share).
    fn lens(&self) -> Vec<usize>;
}

impl TruncArrays for TruncShare {
    const KIND: &'static str = TruncPairs::KIND;
    fn arrays_mut(&mut self) -> Vec<&mut Vec<u64>> {
        vec![&mut self.r, &mut self.hi, &mut self.msb]
    }
    fn lens(&self) -> Vec<usize> {
        vec![self.r.len(), self.hi.len(), self.msb.len()]
    }
}

impl TruncArrays for TruncSqShare {
    const KIND: &'static str = TruncSquares::KIND;
    fn arrays_mut(&mut self) -> Vec<&mut Vec<u64>> {
        vec![&mut self.t.r, &mut self.t.hi, &mut self.t.msb, &mut self.sq, &mut self.hm]
    }
    fn lens(&self) -> Vec<usize> {
        let mut v = self.t.lens();
        v.extend([self.sq.len(), self.hm.len()]);
        v
    }
}

impl TruncArrays for TruncMulShare {
    const KIND: &'static str = TruncMuls::KIND;
    fn arrays_mut(&mut self) -> Vec<&mut Vec<u64>> {
        vec![&mut self.t.r, &mut self.t.hi, &mut self.t.msb, &mut self.s, &mut self.hs, &mut self.ms]
    }
    fn lens(&self) -> Vec<usize> {
        let mut v = self.t.lens();
        v.extend([self.s.len(), self.hs.len(), self.ms.len()]);
        v
    }
}

/// Where a host collects its share of one truncation kind (`S`: a
/// [`TruncShare`], [`TruncSqShare`] or [`TruncMulShare`]) crossing after
/// crossing, in the arrays it consumes: the target of the kind's
/// [`Description::deal_into`] (the in-process module's direct path: values
/// appended straight into the arrays, no wire bytes) and of
/// [`TruncSink::extend_bytes`] for a share that crossed as bytes (a module
/// process, a dealer service). Both give the same arrays for the same
/// dealing (`direct_path_equals_decoded_bytes`).
///
/// A sink is made for one (ring width, shift) and at most `cap` items,
/// reserved once ([`TruncSink::new`]); a crossing of another kind, width or
/// shift, one that would pass `cap`, or arrays of unequal lengths (changed
/// by the host between crossings) is refused and leaves the sink unchanged.
/// The arrays are erased when the share is dropped (`S`'s `Drop`).
pub struct TruncSink<S: TruncArrays> {
    bits: u32,
    f: u32,
    cap: usize,
    share: S,
}

/// Shapes only: the arrays are secret shares and are never printed.
impl<S: TruncArrays> std::fmt::Debug for TruncSink<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TruncSink").field("kind", &S::KIND).field("bits", &self.bits).field("f", &self.f).field("len", &self.len()).field("cap", &self.cap).finish()
    }
}

impl<S: TruncArrays> TruncSink<S> {
    /// An empty sink for up to `cap` items over Z_2^bits with shift `f`,
    /// every array reserved for all of them.
    pub fn new(cap: usize, bits: u32, f: u32) -> Self {
        let mut share = S::default();
        for a in share.arrays_mut() {
            a.reserve_exact(cap);
        }
        TruncSink { bits, f, cap, share }
    }
    /// Items collected so far.
    pub fn len(&self) -> usize {
        self.share.lens()[0]
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The share collected so far.
    pub fn share(&self) -> &S {
        &self.share
    }
    /// The arrays, for a host that consumes them (or, in tests, alters them).
    pub fn share_mut(&mut self) -> &mut S {
        &mut self.share
    }
    /// The share collected (the sink is left empty).
    pub fn into_share(mut self) -> S {
        std::mem::take(&mut self.share)
    }
    /// Whether `m` more items of width `bits` and shift `f` fit: the sink's
    /// width and shift, room under its cap, and arrays of equal lengths.
    fn takes(&self, bits: u32, f: u32, m: usize) -> bool {
        let lens = self.share.lens();
        bits == self.bits && f == self.f && lens.iter().all(|&l| l == lens[0]) && lens[0].checked_add(m).is_some_and(|t| t <= self.cap)
    }
    /// Appends a share of `m` items that crossed as bytes (the kind's
    /// `to_bytes` layout), each array decoded straight into its tail. A
    /// malformed share (lengths, trailing bytes, values wider than the
    /// ring) or one the sink cannot take is an error and leaves the sink
    /// unchanged.
    pub fn extend_bytes(&mut self, bytes: &[u8], m: usize) -> Result<()> {
        if !self.takes(self.bits, self.f, m) {
            return Err(Error::Malformed(format!("{}: a share of {m} items does not fit this sink ({} of {})", S::KIND, self.len(), self.cap)));
        }
        let old = self.len();
        let bits = self.bits;
        let mut rd = BlobReader::new(bytes);
        let mut r = Ok(());
        for a in self.share.arrays_mut() {
            r = rd.take_ring_into(m, bits, a);
            if r.is_err() {
                break;
            }
        }
        if r.is_ok() {
            r = rd.finish();
        }
        if r.is_err() {
            for a in self.share.arrays_mut() {
                if a.len() > old {
                    hush_primitives::wipe::wipe_u64s(&mut a[old..]);
                    a.truncate(old);
                }
            }
        }
        r
    }
}

/// The direct path of a truncation kind `tk` into a [`TruncSink<S>`] (see
/// [`Description::deal_into`]): `None` when `sink` is another type, or a
/// sink of another width or shift, or without room — nothing is written.
fn deal_into_sink<S: TruncArrays>(tk: Tk, key: Block, party: u8, n: u32, params: &[u8], sink: &mut dyn std::any::Any) -> Result<Option<usize>> {
    let (bits, f) = TruncPairs::params(params)?;
    let Some(s) = sink.downcast_mut::<TruncSink<S>>() else { return Ok(None) };
    let n = n as usize;
    if !s.takes(bits, f, n) {
        return Ok(None);
    }
    tk.fill(&Keys::new(key, party), party, n, bits, f, &mut s.share.arrays_mut());
    Ok(Some(tk.arrays() * (8 + n * bits.div_ceil(8) as usize)))
}

pub(crate) fn ring_stream(key: Block, nonce: u64, n: usize, bits: u32) -> Vec<u64> {
    let m = ring_mask(bits);
    let mut v = stream(key, nonce, n);
    v.iter_mut().for_each(|x| *x &= m);
    v
}

fn party1(sub: Block, n: usize, bits: u32) -> TruncShare {
    TruncShare { r: ring_stream(sub, R1, n, bits), hi: ring_stream(sub, H1, n, bits), msb: ring_stream(sub, M1, n, bits) }
}

/// `party`'s share of `n` truncation pairs over Z_2^bits with shift `f`.
pub fn deal_trunc(key: Block, party: u8, n: usize, bits: u32, f: u32) -> TruncShare {
    let one = party1(hush_deal::sub_key(key, 1), n, bits);
    if party == 1 {
        return one;
    }
    let m = ring_mask(bits);
    let r0 = ring_stream(key, R0, n, bits);
    let mut hi = Vec::with_capacity(n);
    let mut msb = Vec::with_capacity(n);
    for i in 0..n {
        let mut r = r0[i].wrapping_add(one.r[i]) & m;
        hi.push(((r >> f).wrapping_sub(one.hi[i])) & m);
        msb.push(((r >> (bits - 1)).wrapping_sub(one.msb[i])) & m);
        r.zeroize();
    }
    TruncShare { r: r0, hi, msb }
}

/// Truncation pairs (parameters: ring width `bits` in 2..=64, shift `f` in
/// 1..bits−1).
pub struct TruncPairs;
pub static TRUNC_PAIRS: TruncPairs = TruncPairs;

/// The request and [`Description`] of a truncation kind whose parameters
/// are (ring width, shift) ([`TruncPairs::params`]), party 1 seeded: from
/// its KIND, its dealing function (key, party, n, bits, f) and party 1's
/// expansion (sub-key, n, bits), each returning a share with `to_bytes`,
/// and its in-place builder ([`Tk`]) and share type for the direct path.
macro_rules! trunc_kind {
    ($ty:ident, $kind:literal, $deal:path, $party1:path, $tk:expr, $share:ty) => {
        impl $ty {
            pub const KIND: &'static str = $kind;

            pub fn request(batch: u64, n: u32, bits: u32, f: u32) -> DealRequest {
                let mut w = Writer::default();
                w.u32(bits).u32(f);
                DealRequest::new(Self::KIND, batch, n, w.0)
            }
        }

        impl Description for $ty {
            fn kind(&self) -> &'static str {
                Self::KIND
            }
            fn label(&self, batch: u64, n: u32, params: &[u8]) -> Result<String> {
                let (bits, f) = TruncPairs::params(params)?;
                Ok(format!("{}/{batch}/{n}/{bits}/{f}", Self::KIND))
            }
            fn deal(&self, key: Block, party: u8, n: u32, params: &[u8]) -> Result<Vec<u8>> {
                let (bits, f) = TruncPairs::params(params)?;
                Ok($deal(key, party, n as usize, bits, f))
            }
            fn seeded_party(&self) -> Option<u8> {
                Some(1)
            }
            fn expand(&self, sub: Block, n: u32, params: &[u8]) -> Result<Vec<u8>> {
                let (bits, _) = TruncPairs::params(params)?;
                Ok($party1(sub, n as usize, bits))
            }
            /// The in-process module's direct path: when `sink` is a
            /// [`TruncSink`] of this kind's share with this request's width
            /// and shift and room for `n` items, `party`'s share is appended
            /// straight into its arrays — the values [`Description::deal`]
            /// would encode, from the same key and the same draws (one part
            /// function builds both), with no wire bytes. Otherwise `None`
            /// and the sink is untouched (the host takes the bytes).
            ///
            /// **What crosses.** Exactly this party's share, in the arrays
            /// the host would have decoded the bytes into: for party 1 its
            /// seeded streams, for party 0 its stream and the corrections
            /// (true values minus party 1's streams). Party 1's streams are
            /// computed inside the call for party 0 (as on the byte path)
            /// in per-part scratch that is erased when the dealing ends;
            /// r, and every value derived from it, never leave the call.
            fn deal_into(&self, key: Block, party: u8, n: u32, params: &[u8], sink: &mut dyn std::any::Any) -> Result<Option<usize>> {
                deal_into_sink::<$share>($tk, key, party, n, params, sink)
            }
        }
    };
}

trunc_kind!(TruncPairs, "2pc/trunc-pairs", deal_trunc_bytes, party1_bytes, Tk::Pairs, TruncShare);

impl TruncPairs {
    pub fn params(params: &[u8]) -> Result<(u32, u32)> {
        let (bits, f) = hush_deal::parse_params(params, "truncation-pair parameters", |r: &mut Reader<'_>| Ok((r.u32()?, r.u32()?)))?;
        if !(2..=64).contains(&bits) || f == 0 || f >= bits - 1 {
            return Err(Error::Refused(format!("truncation pairs: ring width {bits}, shift {f} out of range")));
        }
        Ok((bits, f))
    }
}


/// Truncate-and-square tuples: the correlation of
/// [`crate::transformer::Ctx::trunc_square`] — a truncation pair
/// (r, r_hi = ⌊r/2^f⌋, r_msb) plus additive shares of r_hi² and r_hi·r_msb.
/// After the truncation's single opening c = x + 2^{ℓ−2} + r, the truncated
/// value is T = P − R with P = ⌊c/2^f⌋ − 2^{ℓ−2−f} public and
/// R = r_hi − α·r_msb·2^{ℓ−f} (α = 1 − msb(c), public) linear in dealt
/// shares, so T² = P² − 2P·R + R², R² = r_hi² − 2α·2^{ℓ−f}·r_hi·r_msb +
/// α·2^{2(ℓ−f)}·r_msb (r_msb² = r_msb, α² = α) is linear in dealt shares
/// too: the truncation and the next square cost one opening instead of two
/// (hush's own construction; exp's repeated squarings in Softmax use it).
/// **Seeded** and **what each host sees** as for the pairs: party 1's five
/// shares are streams under its sub-key, party 0's four corrections are
/// true values minus them; each share is uniform on its own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TruncSqShare {
    pub t: TruncShare,
    /// share of r_hi²
    pub sq: Vec<u64>,
    /// share of r_hi·r_msb
    pub hm: Vec<u64>,
}

impl Drop for TruncSqShare {
    fn drop(&mut self) {
        hush_primitives::wipe::wipe_vec_u64(&mut self.sq);
        hush_primitives::wipe::wipe_vec_u64(&mut self.hm);
    }
}

impl TruncSqShare {
    pub fn to_bytes(&self, bits: u32) -> Vec<u8> {
        let mut b = Blob::new();
        b.put_ring(&self.t.r, bits).put_ring(&self.t.hi, bits).put_ring(&self.t.msb, bits).put_ring(&self.sq, bits).put_ring(&self.hm, bits);
        std::mem::take(&mut b.0)
    }
    pub fn from_bytes(buf: &[u8], n: usize, bits: u32) -> Result<Self> {
        let mut rd = BlobReader::new(buf);
        let t = TruncShare { r: rd.take_ring(n, bits)?, hi: rd.take_ring(n, bits)?, msb: rd.take_ring(n, bits)? };
        let s = TruncSqShare { t, sq: rd.take_ring(n, bits)?, hm: rd.take_ring(n, bits)? };
        rd.finish()?;
        Ok(s)
    }
}

const SQ1: u64 = 7;
const HM1: u64 = 8;

fn party1_sq(sub: Block, n: usize, bits: u32) -> TruncSqShare {
    TruncSqShare { t: party1(sub, n, bits), sq: ring_stream(sub, SQ1, n, bits), hm: ring_stream(sub, HM1, n, bits) }
}

/// `party`'s share of `n` truncate-and-square tuples over Z_2^bits, shift `f`.
pub fn deal_trunc_square(key: Block, party: u8, n: usize, bits: u32, f: u32) -> TruncSqShare {
    let one = party1_sq(hush_deal::sub_key(key, 1), n, bits);
    if party == 1 {
        return one;
    }
    let m = ring_mask(bits);
    let t = deal_trunc(key, 0, n, bits, f);
    let mut sq = Vec::with_capacity(n);
    let mut hm = Vec::with_capacity(n);
    for i in 0..n {
        let mut r = t.r[i].wrapping_add(one.t.r[i]) & m;
        let (mut h, mut b) = ((r >> f) & m, (r >> (bits - 1)) & 1);
        sq.push(h.wrapping_mul(h).wrapping_sub(one.sq[i]) & m);
        hm.push(h.wrapping_mul(b).wrapping_sub(one.hm[i]) & m);
        r.zeroize();
        h.zeroize();
        b.zeroize();
    }
    TruncSqShare { t, sq, hm }
}

/// Truncate-and-square tuples (same parameters as [`TruncPairs`]).
pub struct TruncSquares;
pub static TRUNC_SQUARES: TruncSquares = TruncSquares;

trunc_kind!(TruncSquares, "2pc/trunc-squares", deal_trunc_square_bytes, party1_sq_bytes, Tk::Squares, TruncSqShare);

/// Truncate-and-multiply tuples: the correlation of
/// [`crate::transformer::Ctx::trunc_mul`] — a truncation pair
/// (r, r_hi, r_msb), a uniform mask s for the second operand, and shares
/// of r_hi·s and r_msb·s. With the truncation's opening c (T = P − R as
/// for [`TruncSquares`]) and e = y − s opened in the same flight,
/// T·y = P·e + P·s − R·e − R·s with R·s = r_hi·s − α·2^{ℓ−f}·r_msb·s:
/// linear in dealt shares, so a truncation followed by a product (Newton's
/// iterations) costs one opening instead of two (hush's own construction).
/// **Seeded** and **what each host sees** as for the pairs: party 1's six
/// shares are streams under its sub-key, party 0's corrections are true
/// values minus them; each share is uniform on its own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TruncMulShare {
    pub t: TruncShare,
    pub s: Vec<u64>,
    /// share of r_hi·s
    pub hs: Vec<u64>,
    /// share of r_msb·s
    pub ms: Vec<u64>,
}

impl Drop for TruncMulShare {
    fn drop(&mut self) {
        hush_primitives::wipe::wipe_vec_u64(&mut self.s);
        hush_primitives::wipe::wipe_vec_u64(&mut self.hs);
        hush_primitives::wipe::wipe_vec_u64(&mut self.ms);
    }
}

impl TruncMulShare {
    pub fn to_bytes(&self, bits: u32) -> Vec<u8> {
        let mut b = Blob::new();
        b.put_ring(&self.t.r, bits).put_ring(&self.t.hi, bits).put_ring(&self.t.msb, bits).put_ring(&self.s, bits).put_ring(&self.hs, bits).put_ring(&self.ms, bits);
        std::mem::take(&mut b.0)
    }
    pub fn from_bytes(buf: &[u8], n: usize, bits: u32) -> Result<Self> {
        let mut rd = BlobReader::new(buf);
        let t = TruncShare { r: rd.take_ring(n, bits)?, hi: rd.take_ring(n, bits)?, msb: rd.take_ring(n, bits)? };
        let s = TruncMulShare { t, s: rd.take_ring(n, bits)?, hs: rd.take_ring(n, bits)?, ms: rd.take_ring(n, bits)? };
        rd.finish()?;
        Ok(s)
    }
}

const S0M: u64 = 9;
const S1M: u64 = 10;
const HS1: u64 = 11;
const MS1: u64 = 12;

fn party1_mul(sub: Block, n: usize, bits: u32) -> TruncMulShare {
    TruncMulShare { t: party1(sub, n, bits), s: ring_stream(sub, S1M, n, bits), hs: ring_stream(sub, HS1, n, bits), ms: ring_stream(sub, MS1, n, bits) }
}

/// `party`'s share of `n` truncate-and-multiply tuples over Z_2^bits, shift `f`.
pub fn deal_trunc_mul(key: Block, party: u8, n: usize, bits: u32, f: u32) -> TruncMulShare {
    let one = party1_mul(hush_deal::sub_key(key, 1), n, bits);
    if party == 1 {
        return one;
    }
    let m = ring_mask(bits);
    let t = deal_trunc(key, 0, n, bits, f);
    let s0 = ring_stream(key, S0M, n, bits);
    let mut hs = Vec::with_capacity(n);
    let mut ms = Vec::with_capacity(n);
    for i in 0..n {
        let mut r = t.r[i].wrapping_add(one.t.r[i]) & m;
        let mut s = s0[i].wrapping_add(one.s[i]) & m;
        let (mut h, mut b) = ((r >> f) & m, (r >> (bits - 1)) & 1);
        hs.push(h.wrapping_mul(s).wrapping_sub(one.hs[i]) & m);
        ms.push(b.wrapping_mul(s).wrapping_sub(one.ms[i]) & m);
        r.zeroize();
        s.zeroize();
        h.zeroize();
        b.zeroize();
    }
    TruncMulShare { t, s: s0, hs, ms }
}

/// Truncate-and-multiply tuples (same parameters as [`TruncPairs`]).
pub struct TruncMuls;
pub static TRUNC_MULS: TruncMuls = TruncMuls;

trunc_kind!(TruncMuls, "2pc/trunc-muls", deal_trunc_mul_bytes, party1_mul_bytes, Tk::Muls, TruncMulShare);

#[cfg(test)]
mod wire_tests {
    use super::*;

    #[test]
    fn in_place_truncation_kinds_match_the_share_encoding() {
        for (bits, f) in [(16u32, 5u32), (32, 12), (37, 13), (64, 16)] {
            for n in [0usize, 1, 4095, 4096, 4097, 9000] {
                let key = Block(0x7c + n as u128);
                let sub = hush_deal::sub_key(key, 1);
                for p in 0..2u8 {
                    let what = format!("bits {bits} n {n} party {p}");
                    assert_eq!(deal_trunc_bytes(key, p, n, bits, f), deal_trunc(key, p, n, bits, f).to_bytes(bits), "{what}");
                    assert_eq!(deal_trunc_square_bytes(key, p, n, bits, f), deal_trunc_square(key, p, n, bits, f).to_bytes(bits), "{what}");
                    assert_eq!(deal_trunc_mul_bytes(key, p, n, bits, f), deal_trunc_mul(key, p, n, bits, f).to_bytes(bits), "{what}");
                }
                assert_eq!(party1_bytes(sub, n, bits), party1(sub, n, bits).to_bytes(bits));
                assert_eq!(party1_sq_bytes(sub, n, bits), party1_sq(sub, n, bits).to_bytes(bits));
                assert_eq!(party1_mul_bytes(sub, n, bits), party1_mul(sub, n, bits).to_bytes(bits));
            }
        }
    }

    /// One kind's direct path against its byte path, for both parties,
    /// several widths and batch sizes, over two crossings per sink.
    fn direct_equals_decoded<S: TruncArrays + Clone + PartialEq + std::fmt::Debug>(d: &dyn Description, req: fn(u64, u32, u32, u32) -> DealRequest, from_bytes: fn(&[u8], usize, u32) -> Result<S>) {
        for (bits, f) in [(16u32, 5u32), (32, 12), (37, 13), (64, 16)] {
            for (n1, n2) in [(1usize, 0usize), (4095, 1), (4096, 4097), (9000, 3)] {
                let params = req(0, 1, bits, f).params;
                let (k1, k2) = (Block(0xd1 + n1 as u128), Block(0xd2 + n2 as u128 + ((bits as u128) << 64)));
                for p in 0..2u8 {
                    let what = format!("{} bits {bits} f {f} n {n1}+{n2} party {p}", S::KIND);
                    let mut direct = TruncSink::<S>::new(n1 + n2, bits, f);
                    let mut decoded = TruncSink::<S>::new(n1 + n2, bits, f);
                    for (k, m) in [(k1, n1), (k2, n2)] {
                        let b = d.deal_into(k, p, m as u32, &params, &mut direct).unwrap();
                        let bytes = d.deal(k, p, m as u32, &params).unwrap();
                        assert_eq!(b, Some(bytes.len()), "{what}: byte count");
                        decoded.extend_bytes(&bytes, m).unwrap();
                    }
                    assert_eq!(direct.len(), n1 + n2, "{what}");
                    assert_eq!(direct.share(), decoded.share(), "{what}");
                    // and against the reference share encoding of each crossing
                    let mut want = from_bytes(&d.deal(k1, p, n1 as u32, &params).unwrap(), n1, bits).unwrap();
                    let mut second = from_bytes(&d.deal(k2, p, n2 as u32, &params).unwrap(), n2, bits).unwrap();
                    for (a, b) in want.arrays_mut().into_iter().zip(second.arrays_mut()) {
                        a.extend_from_slice(b);
                    }
                    assert_eq!(direct.share(), &want, "{what}: reference");
                    // a second key gives other values
                    let mut other = TruncSink::<S>::new(n1, bits, f);
                    d.deal_into(Block(0xeeee), p, n1 as u32, &params, &mut other).unwrap().unwrap();
                    let first: Vec<Vec<u64>> = direct.share().columns().into_iter().map(|c| c[..n1].to_vec()).collect();
                    assert_ne!(other.share().columns(), first, "{what}: another key");
                }
            }
        }
    }

    trait Cols {
        fn columns(&self) -> Vec<Vec<u64>>;
    }
    impl<S: TruncArrays + Clone> Cols for S {
        fn columns(&self) -> Vec<Vec<u64>> {
            let mut c = self.clone();
            c.arrays_mut().into_iter().map(|a| a.clone()).collect()
        }
    }

    /// Shapes a kind's direct path refuses (another kind's sink, width,
    /// shift, no room, arrays of unequal lengths, not a truncation sink):
    /// `None`, and the sink unchanged; malformed bytes are an error and
    /// leave the sink unchanged too.
    fn refusals<S: TruncArrays + Clone + PartialEq + std::fmt::Debug>(d: &dyn Description, req: fn(u64, u32, u32, u32) -> DealRequest) {
        let (bits, f) = (32u32, 12u32);
        let params = req(0, 1, bits, f).params;
        let key = Block(0xabc);
        for p in 0..2u8 {
            let mut s = TruncSink::<S>::new(100, bits, f);
            d.deal_into(key, p, 60, &params, &mut s).unwrap().unwrap();
            let before = s.share().clone();
            let what = format!("{} party {p}", S::KIND);
            // no room: 60 + 41 > 100
            assert_eq!(d.deal_into(key, p, 41, &params, &mut s).unwrap(), None, "{what}");
            // another width or shift in the request
            assert_eq!(d.deal_into(key, p, 10, &req(0, 1, 33, f).params, &mut s).unwrap(), None, "{what}");
            assert_eq!(d.deal_into(key, p, 10, &req(0, 1, bits, f + 1).params, &mut s).unwrap(), None, "{what}");
            assert_eq!(s.share(), &before, "{what}");
            // arrays of unequal lengths
            s.share_mut().arrays_mut()[1].push(0);
            let altered = s.share().clone();
            assert_eq!(d.deal_into(key, p, 10, &params, &mut s).unwrap(), None, "{what}");
            assert!(s.extend_bytes(&d.deal(key, p, 10, &params).unwrap(), 10).is_err(), "{what}");
            assert_eq!(s.share(), &altered, "{what}");
            s.share_mut().arrays_mut()[1].pop();
            // other sinks: another kind's, another type
            let mut pairs = TruncSink::<TruncShare>::new(100, bits, f);
            let mut sq = TruncSink::<TruncSqShare>::new(100, bits, f);
            let mut mul = TruncSink::<TruncMulShare>::new(100, bits, f);
            let mut words = vec![0u64; 100];
            for (sink, is_own) in [(&mut pairs as &mut dyn std::any::Any, S::KIND == TruncPairs::KIND), (&mut sq, S::KIND == TruncSquares::KIND), (&mut mul, S::KIND == TruncMuls::KIND), (&mut words, false)] {
                assert_eq!(d.deal_into(key, p, 10, &params, sink).unwrap().is_some(), is_own, "{what}");
            }
            assert_eq!(words, vec![0u64; 100]);
            // malformed bytes: truncated, another size, trailing, too wide
            let good = d.deal(key, p, 10, &params).unwrap();
            let mut trailing = good.clone();
            trailing.push(0);
            for (b, m) in [(&good[..good.len() - 1], 10usize), (&good[..], 9), (&trailing[..], 10)] {
                assert!(s.extend_bytes(b, m).is_err(), "{what}");
                assert_eq!(s.share(), &before, "{what}");
            }
            let mut narrow = TruncSink::<S>::new(100, 31, f);
            let b31 = d.deal(key, p, 10, &req(0, 1, 31, f).params).unwrap();
            let mut bad = b31.clone();
            let last = bad.len() - 1;
            bad[last] |= 0x80; // the last array's last value: 32 bits in a 31-bit ring
            narrow.extend_bytes(&b31, 10).unwrap();
            let kept = narrow.share().clone();
            assert!(narrow.extend_bytes(&bad, 10).is_err(), "{what}");
            assert_eq!(narrow.share(), &kept, "{what}");
            // the good share still fits after every refusal
            s.extend_bytes(&good, 10).unwrap();
            assert_eq!(s.len(), 70);
        }
    }

    /// The direct path of each truncation kind writes, word for word, what
    /// decoding the byte path's share gives (both parties, several ring
    /// widths and batch sizes, two crossings per sink), and refuses the
    /// shapes it cannot take without touching the sink.
    #[test]
    fn direct_path_equals_decoded_bytes() {
        direct_equals_decoded::<TruncShare>(&TRUNC_PAIRS, TruncPairs::request, TruncShare::from_bytes);
        direct_equals_decoded::<TruncSqShare>(&TRUNC_SQUARES, TruncSquares::request, TruncSqShare::from_bytes);
        direct_equals_decoded::<TruncMulShare>(&TRUNC_MULS, TruncMuls::request, TruncMulShare::from_bytes);
        refusals::<TruncShare>(&TRUNC_PAIRS, TruncPairs::request);
        refusals::<TruncSqShare>(&TRUNC_SQUARES, TruncSquares::request);
        refusals::<TruncMulShare>(&TRUNC_MULS, TruncMuls::request);
    }
}
