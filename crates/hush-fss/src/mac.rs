//! The MAC-carrying ReLU gate of CRISP (§III-B, Alg. 1-2 and the "Gen^mac"
//! verification gate with β' = (μ, −μr); Fig. 1), made exact and lifted to
//! the SPDZ2k ring Z_2^k, k = ℓ + s (CRISP §V-B, Cramer et al. CRYPTO 2018).
//!
//! **What it computes.** A wire value is x̃ ∈ Z_2^k whose low ℓ bits are
//! the signed fixed-point value x (the upper s bits carry no meaning; every
//! gate reads only x̃ mod 2^ℓ, and errors confined to those bits never
//! reach a value — the SPDZ2k convention). The dealer draws r ∈ Z_2^k
//! uniformly and knows the MAC key μ ∈ Z_2^k. Online the parties open
//! x̂ = x̃ + r (mod 2^k) and each evaluates its key at x̂, obtaining
//! additive shares over Z_2^k of
//!
//! * y = ReLU(x)ₖ := d·x̃ with d = DReLU(x) = \[x ≥ 0\] (signed ℓ-bit x):
//!   y mod 2^ℓ = ReLU(x) exactly, including every wrap-around of x + r
//!   (no "holds with high probability" shortcut as in CRISP eq. 2);
//! * μ·y, the MAC of the output;
//! * μ·x̃ — CRISP's local reconstruction ⟨μx⟩_b = ⟨μ⟩_b(x + r) − ⟨μr⟩_b
//!   (eq. 3), which the final consistency check compares with the MAC the
//!   input wire carried. The server (party 0) holds μ, so ⟨μ⟩_0 = μ,
//!   ⟨μ⟩_1 = 0: Fig. 3's uniform ⟨μ⟩_1 is a re-sharing of the same value and
//!   buys nothing when P_0 knows μ.
//!
//! **How.** As in [`crate::gates`]' exact ReLU: with x̂_ℓ = x̂ mod 2^ℓ split
//! at bit ℓ−1 into (x̂_msb, x̂_low) and r likewise (r_msb, r_low),
//! msb(x) = x̂_msb ⊕ u with u = r_msb ⊕ \[x̂_low < r_low\]
//! = r_msb + (1 − 2r_msb)·\[x̂_low < r_low\]; d = u if x̂_msb = 1, else 1 − u.
//! One wide DCF ([`crate::wide`]) over ℓ − 1 input bits with four lanes
//! in Z_2^k and payload (1 − 2r_msb)·(1, r, μ, μr) — CRISP's β = (1, −r)
//! and β' = (μ, −μr) in one key, one evaluation — plus dealt shares of
//! r_msb, r_msb·r, μ·r_msb, μ·r_msb·r, r and μr give shares of
//! d, d·r, μd, μd·r, and then, with the public x̂,
//! y = d·x̂ − d·r and μy = μd·x̂ − μd·r (all mod 2^k; r is the full lifted
//! mask, so d·(x̂ − r) = d·x̃ exactly).
//!
//! **Security** (semi-honest dealer; the client may be malicious). Each
//! key alone is pseudorandom (wide-DCF key privacy) and every dealt share
//! is uniform given the holder's other values, so a key reveals neither r
//! nor μ. x̂ = x̃ + r is uniform over Z_2^k because r is uniform and used
//! once. The client's output shares are masked by the server's. What a
//! cheating client can do and why the final check catches it is argued in
//! `hush_2pc::crisp`.

use crate::codec::{Reader, Writer};
use crate::wide::{mask128, wide_dcf_gen, WideDcfKey};
use crate::Error;
use hush_primitives::Prg;
use zeroize::Zeroize;

const TAG_MAC_RELU: u8 = 0xE4;

/// Checks (ℓ, k): 2 ≤ ℓ ≤ 64, ℓ < k ≤ 128.
pub fn check_lift(ell: u32, k: u32) -> Result<(), Error> {
    if !(2..=64).contains(&ell) {
        return Err(Error::Param { name: "ell", value: ell as u64, reason: "value ring must be 2..=64 bits" });
    }
    if k <= ell || k > 128 {
        return Err(Error::Param { name: "k", value: k as u64, reason: "lifted ring must be wider than ℓ and at most 128 bits" });
    }
    Ok(())
}

/// One party's MAC-carrying ReLU key.
#[derive(Clone)]
pub struct MacReluKey {
    party: u8,
    ell: u32,
    k: u32,
    /// Share of the input mask r.
    r: u128,
    /// Share of μ·r.
    mr: u128,
    /// Shares of r_msb, r_msb·r, μ·r_msb, μ·r_msb·r.
    e: [u128; 4],
    dcf: WideDcfKey,
}

impl Zeroize for MacReluKey {
    fn zeroize(&mut self) {
        self.r.zeroize();
        self.mr.zeroize();
        self.e.zeroize();
        self.dcf.zeroize();
    }
}

impl Drop for MacReluKey {
    fn drop(&mut self) {
        self.r.zeroize();
        self.mr.zeroize();
        self.e.zeroize();
    }
}

impl std::fmt::Debug for MacReluKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MacReluKey").field("party", &self.party).field("ell", &self.ell).field("k", &self.k).finish_non_exhaustive()
    }
}

/// One party's shares of a MAC-carrying gate's outputs, all over Z_2^k.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacGateOut {
    /// Share of the output y (ReLU: d·x̃; truncation: ⌊x/2^f⌋ sign-extended).
    pub y: u128,
    /// Share of μ·y.
    pub my: u128,
    /// Share of μ·x̃ = μ·(x̂ − r) (CRISP eq. 3).
    pub mx: u128,
}

/// The ReLU gate's outputs.
pub type MacReluOut = MacGateOut;

/// What the protocol layer needs of a MAC-carrying gate key.
pub trait MacGate: Sized + Zeroize {
    /// This party's share of the input mask r.
    fn r_share(&self) -> u128;
    /// Evaluation at the public x̂ (`mu_share`: μ for party 0, 0 for party 1).
    fn eval(&self, mu_share: u128, x_hat: u128) -> MacGateOut;
    /// [`MacGate::eval`] of `keys[i]` at `x_hat[i]` for all i (kinds may
    /// interleave the AES work of several keys). Panics if the slices
    /// differ in length.
    fn eval_many(keys: &[Self], mu_share: u128, x_hat: &[u128], out: &mut [MacGateOut]) {
        assert!(keys.len() == x_hat.len() && x_hat.len() == out.len(), "eval_many: slices differ in length");
        for ((k, &x), o) in keys.iter().zip(x_hat).zip(out.iter_mut()) {
            *o = k.eval(mu_share, x);
        }
    }
    fn party(&self) -> u8;
    fn ell(&self) -> u32;
    fn k(&self) -> u32;
    /// Encoded size of one key of this gate for (ℓ, k, f).
    fn size_bytes(ell: u32, k: u32, f: u32) -> usize;
    fn from_bytes(b: &[u8]) -> Result<Self, Error>;
    fn append_to(&self, out: &mut Vec<u8>);
}

impl MacGate for MacReluKey {
    fn r_share(&self) -> u128 {
        self.r
    }
    fn eval(&self, mu_share: u128, x_hat: u128) -> MacGateOut {
        MacReluKey::eval(self, mu_share, x_hat)
    }
    fn eval_many(keys: &[Self], mu_share: u128, x_hat: &[u128], out: &mut [MacGateOut]) {
        assert!(keys.len() == x_hat.len() && x_hat.len() == out.len(), "eval_many: slices differ in length");
        let mut g = vec![[0u128; 4]; keys.len()];
        let dcfs: Vec<&WideDcfKey> = keys.iter().map(|k| &k.dcf).collect();
        let lows: Vec<u64> = keys.iter().zip(x_hat).map(|(k, &x)| (x & mask128(k.ell - 1)) as u64).collect();
        WideDcfKey::eval_many(&dcfs, &lows, &mut g);
        for (((k, &x), o), gi) in keys.iter().zip(x_hat).zip(out.iter_mut()).zip(&g) {
            *o = k.finish(mu_share, x & mask128(k.k), *gi);
        }
        g.zeroize();
    }
    fn party(&self) -> u8 {
        self.party
    }
    fn ell(&self) -> u32 {
        self.ell
    }
    fn k(&self) -> u32 {
        self.k
    }
    fn size_bytes(ell: u32, k: u32, _f: u32) -> usize {
        MacReluKey::size_bytes(ell, k)
    }
    fn from_bytes(b: &[u8]) -> Result<Self, Error> {
        MacReluKey::from_bytes(b)
    }
    fn append_to(&self, out: &mut Vec<u8>) {
        MacReluKey::append_to(self, out)
    }
}

/// Additive shares of `v` over Z_2^k.
fn share(prg: &mut Prg, v: u128, k: u32) -> [u128; 2] {
    let a = prg.random_block().0 & mask128(k);
    [a, v.wrapping_sub(a) & mask128(k)]
}

/// Key generation for input mask `r` and MAC key `mu` (both reduced mod
/// 2^k). Deterministic given `prg`.
pub fn mac_relu_gen(prg: &mut Prg, ell: u32, k: u32, r: u128, mu: u128) -> Result<(MacReluKey, MacReluKey), Error> {
    check_lift(ell, k)?;
    let km = mask128(k);
    let (r, mu) = (r & km, mu & km);
    let r_msb = (r >> (ell - 1)) & 1;
    let r_low = (r & mask128(ell - 1)) as u64;
    let sgn: u128 = if r_msb == 1 { u128::MAX } else { 1 }; // 1 − 2·r_msb
    let beta = [sgn & km, sgn.wrapping_mul(r) & km, sgn.wrapping_mul(mu) & km, sgn.wrapping_mul(mu).wrapping_mul(r) & km];
    let (k0, k1) = wide_dcf_gen(prg, ell - 1, r_low, &beta, k)?;
    let rs = share(prg, r, k);
    let mrs = share(prg, mu.wrapping_mul(r), k);
    let mut es = [
        share(prg, r_msb, k),
        share(prg, r_msb.wrapping_mul(r), k),
        share(prg, mu.wrapping_mul(r_msb), k),
        share(prg, mu.wrapping_mul(r_msb).wrapping_mul(r), k),
    ];
    let mk = |b: usize, dcf: WideDcfKey| MacReluKey {
        party: b as u8,
        ell,
        k,
        r: rs[b],
        mr: mrs[b],
        e: [es[0][b], es[1][b], es[2][b], es[3][b]],
        dcf,
    };
    let out = (mk(0, k0), mk(1, k1));
    es.zeroize();
    Ok(out)
}

impl MacReluKey {
    pub fn party(&self) -> u8 {
        self.party
    }
    pub fn ell(&self) -> u32 {
        self.ell
    }
    pub fn k(&self) -> u32 {
        self.k
    }
    /// This party's share of the input mask r (its part of x̂ = x̃ + r).
    pub fn r_share(&self) -> u128 {
        self.r
    }

    /// Evaluates at the public x̂ (reduced mod 2^k). `mu_share` is μ for
    /// party 0 (the server) and 0 for party 1. Time depends only on the
    /// key's shape.
    pub fn eval(&self, mu_share: u128, x_hat: u128) -> MacReluOut {
        let xh = x_hat & mask128(self.k);
        let g = self.dcf.eval((xh & mask128(self.ell - 1)) as u64);
        self.finish(mu_share, xh, g)
    }

    /// The spline finish from the DCF lanes `g` at x̂ (reduced mod 2^k).
    fn finish(&self, mu_share: u128, xh: u128, g: [u128; 4]) -> MacReluOut {
        let km = mask128(self.k);
        let msb = (xh >> (self.ell - 1)) & 1;
        let u = self.e[0].wrapping_add(g[0]);
        let ur = self.e[1].wrapping_add(g[1]);
        let mu_u = self.e[2].wrapping_add(g[2]);
        let mu_ur = self.e[3].wrapping_add(g[3]);
        let one = (self.party == 0) as u128;
        let (d, dr, md, mdr) = if msb == 1 {
            (u, ur, mu_u, mu_ur)
        } else {
            (one.wrapping_sub(u), self.r.wrapping_sub(ur), mu_share.wrapping_sub(mu_u), self.mr.wrapping_sub(mu_ur))
        };
        MacReluOut {
            y: d.wrapping_mul(xh).wrapping_sub(dr) & km,
            my: md.wrapping_mul(xh).wrapping_sub(mdr) & km,
            mx: mu_share.wrapping_mul(xh).wrapping_sub(self.mr) & km,
        }
    }

    /// Encoded size of one key.
    pub fn size_bytes(ell: u32, k: u32) -> usize {
        4 + 6 * k.div_ceil(8) as usize + WideDcfKey::size_bytes(ell - 1, k, 4)
    }

    pub fn append_to(&self, out: &mut Vec<u8>) {
        let vb = self.k.div_ceil(8) as usize;
        let mut w = Writer::from_vec(std::mem::take(out));
        w.bytes(&[TAG_MAC_RELU, self.party, self.ell as u8, self.k as u8]);
        for v in [self.r, self.mr, self.e[0], self.e[1], self.e[2], self.e[3]] {
            w.bytes(&v.to_le_bytes()[..vb]);
        }
        self.dcf.write(&mut w);
        *out = w.buf;
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(Self::size_bytes(self.ell, self.k));
        self.append_to(&mut v);
        v
    }

    /// Decodes and validates a key; never panics.
    pub fn from_bytes(b: &[u8]) -> Result<Self, Error> {
        const W: &str = "MacReluKey";
        let mut r = Reader::new(W, b);
        let h = [r.u8()?, r.u8()?, r.u8()?, r.u8()?];
        if h[0] != TAG_MAC_RELU {
            return Err(Error::Header { what: W, reason: "wrong tag" });
        }
        if h[1] > 1 {
            return Err(Error::Header { what: W, reason: "party must be 0 or 1" });
        }
        let (party, ell, k) = (h[1], h[2] as u32, h[3] as u32);
        if check_lift(ell, k).is_err() {
            return Err(Error::Header { what: W, reason: "need 2 ≤ ℓ ≤ 64 and ℓ < k ≤ 128" });
        }
        let vb = k.div_ceil(8) as usize;
        let mut vals = [0u128; 6];
        for v in vals.iter_mut() {
            let mut a = [0u8; 16];
            for x in a.iter_mut().take(vb) {
                *x = r.u8()?;
            }
            *v = u128::from_le_bytes(a);
            if *v & !mask128(k) != 0 {
                return Err(Error::NonCanonical { what: W, reason: "share wider than the lifted ring" });
            }
        }
        let dcf = WideDcfKey::read(&mut r)?;
        r.finish()?;
        if dcf.party() != party || dcf.bits() != ell - 1 || dcf.out_bits() != k || dcf.lanes() != 4 {
            return Err(Error::Header { what: W, reason: "embedded DCF key does not match the gate header" });
        }
        let key = MacReluKey { party, ell, k, r: vals[0], mr: vals[1], e: [vals[2], vals[3], vals[4], vals[5]], dcf };
        vals.zeroize();
        Ok(key)
    }
}

// ------------------------------------------------------------ truncation

const TAG_MAC_TRUNC: u8 = 0xE5;

/// One party's MAC-carrying **exact truncation** key: shares of
/// t̃ = ⌊x/2^f⌋ (signed ℓ-bit x, result sign-extended into Z_2^k), of μ·t̃
/// and of μ·x̃, from one opening of x̂ = x̃ + r. Not in the CRISP paper
/// (which leaves fixed-point rescaling open); it is hush's exact FSS
/// truncation ([`crate::deal`]'s `Trunc`, BCGGIKR21-style) lifted the same
/// way as the ReLU gate: with x' = x + 2^(ℓ−1) ∈ [0, 2^ℓ) and
/// x̂' = (x̂ + 2^(ℓ−1)) mod 2^ℓ = x' + r_ℓ − 2^ℓ·\[x̂' < r_ℓ\], as integers
/// ⌊x'/2^f⌋ = x̂'_hi − r_hi − \[x̂'_lo < r_lo\] + 2^(ℓ−f)·\[x̂' < r_ℓ\]
/// (hi/lo = split at bit f), and ⌊x/2^f⌋ = ⌊x'/2^f⌋ − 2^(ℓ−1−f). Two wide
/// DCFs (f-bit and ℓ-bit inputs, two lanes each: the value and μ times it)
/// plus dealt shares of the constant terms and of r, μr. Exact for every
/// x and every mask, and the output is the *canonical* lift (no garbage
/// upper bits), whatever the input's upper bits were.
#[derive(Clone)]
pub struct MacTruncKey {
    party: u8,
    ell: u32,
    k: u32,
    f: u32,
    r: u128,
    mr: u128,
    /// Shares of c = −r_hi − 2^(ℓ−1−f) and of μ·c.
    c: [u128; 2],
    lo: WideDcfKey,
    wrap: WideDcfKey,
}

impl Zeroize for MacTruncKey {
    fn zeroize(&mut self) {
        self.r.zeroize();
        self.mr.zeroize();
        self.c.zeroize();
        self.lo.zeroize();
        self.wrap.zeroize();
    }
}

impl Drop for MacTruncKey {
    fn drop(&mut self) {
        self.r.zeroize();
        self.mr.zeroize();
        self.c.zeroize();
    }
}

impl std::fmt::Debug for MacTruncKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MacTruncKey").field("party", &self.party).field("ell", &self.ell).field("k", &self.k).field("f", &self.f).finish_non_exhaustive()
    }
}

/// Key generation of the truncation by `f` bits (1 ≤ f < ℓ) for input mask
/// `r` and MAC key `mu`. Deterministic given `prg`.
pub fn mac_trunc_gen(prg: &mut Prg, ell: u32, k: u32, f: u32, r: u128, mu: u128) -> Result<(MacTruncKey, MacTruncKey), Error> {
    check_lift(ell, k)?;
    if f == 0 || f >= ell {
        return Err(Error::Param { name: "f", value: f as u64, reason: "truncation must be by 1..ℓ bits" });
    }
    let km = mask128(k);
    let (r, mu) = (r & km, mu & km);
    let rl = r & mask128(ell);
    let (r_lo, r_hi) = ((rl & mask128(f)) as u64, rl >> f);
    let neg1 = km; // −1 mod 2^k
    let (lo0, lo1) = wide_dcf_gen(prg, f, r_lo, &[neg1, mu.wrapping_neg() & km], k)?;
    let big = 1u128 << (ell - f);
    let (w0, w1) = wide_dcf_gen(prg, ell, rl as u64, &[big, mu.wrapping_mul(big) & km], k)?;
    let c = 0u128.wrapping_sub(r_hi).wrapping_sub(1u128 << (ell - 1 - f)) & km;
    let rs = share(prg, r, k);
    let mrs = share(prg, mu.wrapping_mul(r), k);
    let cs = share(prg, c, k);
    let mcs = share(prg, mu.wrapping_mul(c), k);
    let mk = |b: usize, lo: WideDcfKey, wrap: WideDcfKey| MacTruncKey { party: b as u8, ell, k, f, r: rs[b], mr: mrs[b], c: [cs[b], mcs[b]], lo, wrap };
    Ok((mk(0, lo0, w0), mk(1, lo1, w1)))
}

impl MacTruncKey {
    pub fn f(&self) -> u32 {
        self.f
    }
    /// (x̂' = (x̂ + 2^(ℓ−1)) mod 2^ℓ, its low f bits).
    fn split(&self, x_hat: u128) -> (u128, u64) {
        let xb = (x_hat.wrapping_add(1u128 << (self.ell - 1))) & mask128(self.ell);
        (xb, (xb & mask128(self.f)) as u64)
    }
    /// The output shares from the two DCFs' lanes.
    fn finish(&self, mu_share: u128, x_hat: u128, a: [u128; 4], b: [u128; 4]) -> MacGateOut {
        let km = mask128(self.k);
        let xh = x_hat & km;
        let (xb, _) = self.split(xh);
        let hi = xb >> self.f;
        let own = if self.party == 0 { hi } else { 0 };
        MacGateOut {
            y: own.wrapping_add(self.c[0]).wrapping_add(a[0]).wrapping_add(b[0]) & km,
            my: mu_share.wrapping_mul(hi).wrapping_add(self.c[1]).wrapping_add(a[1]).wrapping_add(b[1]) & km,
            mx: mu_share.wrapping_mul(xh).wrapping_sub(self.mr) & km,
        }
    }
}

impl MacGate for MacTruncKey {
    fn r_share(&self) -> u128 {
        self.r
    }
    fn eval(&self, mu_share: u128, x_hat: u128) -> MacGateOut {
        let (xb, lo) = self.split(x_hat);
        self.finish(mu_share, x_hat, self.lo.eval(lo), self.wrap.eval(xb as u64))
    }
    fn eval_many(keys: &[Self], mu_share: u128, x_hat: &[u128], out: &mut [MacGateOut]) {
        assert!(keys.len() == x_hat.len() && x_hat.len() == out.len(), "eval_many: slices differ in length");
        let split: Vec<(u128, u64)> = keys.iter().zip(x_hat).map(|(k, &x)| k.split(x)).collect();
        let (mut ga, mut gb) = (vec![[0u128; 4]; keys.len()], vec![[0u128; 4]; keys.len()]);
        let los: Vec<u64> = split.iter().map(|s| s.1).collect();
        let xbs: Vec<u64> = split.iter().map(|s| s.0 as u64).collect();
        WideDcfKey::eval_many(&keys.iter().map(|k| &k.lo).collect::<Vec<_>>(), &los, &mut ga);
        WideDcfKey::eval_many(&keys.iter().map(|k| &k.wrap).collect::<Vec<_>>(), &xbs, &mut gb);
        for (i, k) in keys.iter().enumerate() {
            out[i] = k.finish(mu_share, x_hat[i], ga[i], gb[i]);
        }
        ga.zeroize();
        gb.zeroize();
    }
    fn party(&self) -> u8 {
        self.party
    }
    fn ell(&self) -> u32 {
        self.ell
    }
    fn k(&self) -> u32 {
        self.k
    }
    fn size_bytes(ell: u32, k: u32, f: u32) -> usize {
        5 + 4 * k.div_ceil(8) as usize + WideDcfKey::size_bytes(f, k, 2) + WideDcfKey::size_bytes(ell, k, 2)
    }
    fn append_to(&self, out: &mut Vec<u8>) {
        let vb = self.k.div_ceil(8) as usize;
        let mut w = Writer::from_vec(std::mem::take(out));
        w.bytes(&[TAG_MAC_TRUNC, self.party, self.ell as u8, self.k as u8, self.f as u8]);
        for v in [self.r, self.mr, self.c[0], self.c[1]] {
            w.bytes(&v.to_le_bytes()[..vb]);
        }
        self.lo.write(&mut w);
        self.wrap.write(&mut w);
        *out = w.buf;
    }
    fn from_bytes(b: &[u8]) -> Result<Self, Error> {
        const W: &str = "MacTruncKey";
        let mut r = Reader::new(W, b);
        let h = [r.u8()?, r.u8()?, r.u8()?, r.u8()?, r.u8()?];
        if h[0] != TAG_MAC_TRUNC {
            return Err(Error::Header { what: W, reason: "wrong tag" });
        }
        let (party, ell, k, f) = (h[1], h[2] as u32, h[3] as u32, h[4] as u32);
        if party > 1 || check_lift(ell, k).is_err() || f == 0 || f >= ell {
            return Err(Error::Header { what: W, reason: "need party ≤ 1, 2 ≤ ℓ ≤ 64, ℓ < k ≤ 128, 1 ≤ f < ℓ" });
        }
        let vb = k.div_ceil(8) as usize;
        let mut vals = [0u128; 4];
        for v in vals.iter_mut() {
            let mut a = [0u8; 16];
            for x in a.iter_mut().take(vb) {
                *x = r.u8()?;
            }
            *v = u128::from_le_bytes(a);
            if *v & !mask128(k) != 0 {
                return Err(Error::NonCanonical { what: W, reason: "share wider than the lifted ring" });
            }
        }
        let lo = WideDcfKey::read(&mut r)?;
        let wrap = WideDcfKey::read(&mut r)?;
        r.finish()?;
        let ok = |d: &WideDcfKey, bits: u32| d.party() == party && d.bits() == bits && d.out_bits() == k && d.lanes() == 2;
        if !ok(&lo, f) || !ok(&wrap, ell) {
            return Err(Error::Header { what: W, reason: "embedded DCF keys do not match the gate header" });
        }
        let key = MacTruncKey { party, ell, k, f, r: vals[0], mr: vals[1], c: [vals[2], vals[3]], lo, wrap };
        vals.zeroize();
        Ok(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hush_primitives::Block;

    fn signed(x: u128, ell: u32) -> i128 {
        let s = 128 - ell;
        ((x << s) as i128) >> s
    }

    /// Every ℓ = 6 value and every mask's low bits, with random lifts.
    #[test]
    fn exhaustive_small_ring_matches_plaintext() {
        let (ell, k) = (6u32, 14u32);
        let km = mask128(k);
        let mut prg = Prg::new(Block(42));
        for x in 0..(1u128 << ell) {
            for _ in 0..24 {
                // a lift of x with random upper bits
                let xt = (x | (prg.random_block().0 << ell)) & km;
                let r = prg.random_block().0 & km;
                let mu = prg.random_block().0 & km;
                let (k0, k1) = mac_relu_gen(&mut prg, ell, k, r, mu).unwrap();
                let xh = (xt + r) & km;
                assert_eq!((k0.r_share() + k1.r_share()) & km, r);
                let (a, b) = (k0.eval(mu, xh), k1.eval(0, xh));
                let y = (a.y + b.y) & km;
                let d = (signed(x, ell) >= 0) as u128;
                assert_eq!(y, (d * xt) & km, "x {x} r {r}");
                assert_eq!(y & mask128(ell), if d == 1 { x } else { 0 });
                assert_eq!((a.my + b.my) & km, mu.wrapping_mul(y) & km);
                assert_eq!((a.mx + b.mx) & km, mu.wrapping_mul(xt) & km);
                // the interleaved evaluation agrees
                let mut o = [MacGateOut { y: 0, my: 0, mx: 0 }];
                MacGate::eval_many(std::slice::from_ref(&k1), 0, &[xh], &mut o);
                assert_eq!(o[0], b);
            }
        }
    }

    #[test]
    fn wide_lift_edges_and_codec() {
        let mut prg = Prg::new(Block(9));
        for &(ell, k) in &[(37u32, 77u32), (64, 104), (64, 128), (2, 42)] {
            let km = mask128(k);
            let em = mask128(ell);
            let half = 1u128 << (ell - 1);
            for &x in &[0u128, 1, em, em - 1, half, half - 1, half + 1] {
                for _ in 0..8 {
                    let xt = (x | (prg.random_block().0 << ell)) & km;
                    let r = prg.random_block().0 & km;
                    let mu = prg.random_block().0 & km;
                    let (k0, k1) = mac_relu_gen(&mut prg, ell, k, r, mu).unwrap();
                    let (k0, k1) = (MacReluKey::from_bytes(&k0.to_bytes()).unwrap(), MacReluKey::from_bytes(&k1.to_bytes()).unwrap());
                    assert_eq!(k0.to_bytes().len(), MacReluKey::size_bytes(ell, k));
                    let xh = xt.wrapping_add(r) & km;
                    let (a, b) = (k0.eval(mu, xh), k1.eval(0, xh));
                    let y = a.y.wrapping_add(b.y) & km;
                    let d = (signed(x, ell) >= 0) as u128;
                    assert_eq!(y, d.wrapping_mul(xt) & km, "ℓ {ell} x {x}");
                    assert_eq!(a.my.wrapping_add(b.my) & km, mu.wrapping_mul(y) & km);
                    assert_eq!(a.mx.wrapping_add(b.mx) & km, mu.wrapping_mul(xt) & km);
                }
            }
        }
        let (k0, _) = mac_relu_gen(&mut prg, 37, 77, 5, 7).unwrap();
        let b = k0.to_bytes();
        assert!(MacReluKey::from_bytes(&b[..b.len() - 1]).is_err());
        let mut t = b.clone();
        t[4 + 9] |= 0x80; // bit 79 of r's share: above k = 77
        assert!(MacReluKey::from_bytes(&t).is_err());
        assert!(mac_relu_gen(&mut prg, 37, 37, 5, 7).is_err());
        assert!(mac_relu_gen(&mut prg, 65, 100, 5, 7).is_err());
    }

    #[test]
    fn truncation_exact_over_small_ring_and_wide_edges() {
        let mut prg = Prg::new(Block(17));
        for &(ell, k, f) in &[(6u32, 14u32, 1u32), (6, 14, 3), (6, 14, 5)] {
            let km = mask128(k);
            for x in 0..(1u128 << ell) {
                for _ in 0..8 {
                    let xt = (x | (prg.random_block().0 << ell)) & km;
                    let r = prg.random_block().0 & km;
                    let mu = prg.random_block().0 & km;
                    let (k0, k1) = mac_trunc_gen(&mut prg, ell, k, f, r, mu).unwrap();
                    let xh = (xt + r) & km;
                    let (a, b) = (MacGate::eval(&k0, mu, xh), MacGate::eval(&k1, 0, xh));
                    let y = (a.y + b.y) & km;
                    let want = ((signed(x, ell) >> f) as u128) & km;
                    assert_eq!(y, want, "ℓ {ell} f {f} x {x}");
                    let mut o = [MacGateOut { y: 0, my: 0, mx: 0 }; 2];
                    MacGate::eval_many(&[k0.clone(), k0.clone()], mu, &[xh, xh], &mut o);
                    assert_eq!(o, [a, a]);
                    assert_eq!((a.my + b.my) & km, mu.wrapping_mul(y) & km);
                    assert_eq!((a.mx + b.mx) & km, mu.wrapping_mul(xt) & km);
                }
            }
        }
        for &(ell, k, f) in &[(37u32, 77u32, 12u32), (64, 128, 16), (64, 104, 63)] {
            let km = mask128(k);
            let em = mask128(ell);
            let half = 1u128 << (ell - 1);
            for &x in &[0u128, 1, em, em - 1, half, half - 1, half + 1, (1 << f) - 1, 1 << f] {
                let xt = (x | (prg.random_block().0 << ell)) & km;
                let r = prg.random_block().0 & km;
                let mu = prg.random_block().0 & km;
                let (k0, k1) = mac_trunc_gen(&mut prg, ell, k, f, r, mu).unwrap();
                let (k0, k1) = (MacTruncKey::from_bytes(&{ let mut v = Vec::new(); k0.append_to(&mut v); v }).unwrap(), MacTruncKey::from_bytes(&{ let mut v = Vec::new(); k1.append_to(&mut v); v }).unwrap());
                let mut enc = Vec::new();
                k0.append_to(&mut enc);
                assert_eq!(enc.len(), <MacTruncKey as MacGate>::size_bytes(ell, k, f));
                assert!(MacTruncKey::from_bytes(&enc[..enc.len() - 1]).is_err());
                let xh = xt.wrapping_add(r) & km;
                let (a, b) = (MacGate::eval(&k0, mu, xh), MacGate::eval(&k1, 0, xh));
                let y = a.y.wrapping_add(b.y) & km;
                assert_eq!(y, ((signed(x, ell) >> f) as u128) & km, "ℓ {ell} f {f} x {x}");
                assert_eq!(a.my.wrapping_add(b.my) & km, mu.wrapping_mul(y) & km);
            }
        }
        assert!(mac_trunc_gen(&mut prg, 37, 77, 0, 1, 1).is_err());
        assert!(mac_trunc_gen(&mut prg, 37, 77, 37, 1, 1).is_err());
    }

    /// Mutated and truncated key bytes never panic: each decoder returns a
    /// key or an error (and a decoded key re-encodes to its input).
    #[test]
    fn mutated_key_bytes_are_errors_or_canonical_keys() {
        let mut prg = Prg::new(Block(77));
        let (r0, _) = mac_relu_gen(&mut prg, 12, 30, 5, 7).unwrap();
        let (t0, _) = mac_trunc_gen(&mut prg, 12, 30, 3, 5, 7).unwrap();
        let mut tb = Vec::new();
        t0.append_to(&mut tb);
        for good in [r0.to_bytes(), tb] {
            for _ in 0..3000 {
                let mut b = good.clone();
                match prg.next_u64() % 3 {
                    0 => {
                        let i = (prg.next_u64() as usize) % b.len();
                        b[i] ^= 1 << (prg.next_u64() % 8);
                    }
                    1 => b.truncate((prg.next_u64() as usize) % b.len()),
                    _ => b.push(prg.next_u64() as u8),
                }
                if let Ok(k) = MacReluKey::from_bytes(&b) {
                    assert_eq!(k.to_bytes(), b);
                }
                if let Ok(k) = <MacTruncKey as MacGate>::from_bytes(&b) {
                    let mut e = Vec::new();
                    k.append_to(&mut e);
                    assert_eq!(e, b);
                }
                let _ = WideDcfKey::from_bytes(&b);
            }
        }
    }
}
