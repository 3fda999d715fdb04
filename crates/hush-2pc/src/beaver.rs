//! Beaver multiplication (Beaver, CRYPTO '91), vectorised, and where its
//! triples come from.
//!
//! * [`mul`]: z = x·y over Z_2^ℓ from a triple (a, b, c = ab): open
//!   e = x − a, f = y − b in one simultaneous exchange, then
//!   z = c + e·b + f·a (+ e·f at party 0).
//! * [`and`]: the same over GF(2), 64 lanes per word.
//! * [`b2a`]: bit-to-arithmetic, b = b_0 ⊕ b_1 = b_0 + b_1 − 2·b_0·b_1
//!   with one arithmetic product.
//!
//! **View.** A party sees the peer's half of the openings e = x − a,
//! f = y − b (and the same over GF(2)). With a fresh triple per element,
//! the peer's a and b shares are uniform and unknown to it, so the openings
//! are uniform and simulated; a triple must never be used twice (two
//! openings x − a and x' − a give x − x'), which the callers ensure by
//! consuming triples in order. [`b2a`] is one such product. Triples from
//! [`crate::tee::Dealer`]: each module releases its own host's (a, b, c)
//! share only, fresh per batch (the batch number is in the key label).
//! Gilboa's corrections τ = h_1 − h_0 − a·2^j are masked by the random
//! pad of the OT the peer did not choose; AND triples from ROTs reveal
//! nothing beyond the ROT outputs.
//!
//! Triple sources ([`TripleSource`]):
//! * [`crate::tee::Dealer`] — `tee` mode: each party's module derives its
//!   share from the synchronized seed; no communication.
//! * [`OtSession`] — interactive: arithmetic triples by Gilboa's OT
//!   multiplication (one ROT per bit of the multiplier, both directions),
//!   AND triples from two ROTs (one per direction); any COT source of
//!   `hush_correlations::registry` (IKNP, Ferret, SilentFlow).

use crate::share::{ArithShare, BoolShare};
use crate::tee::Dealer;
use crate::wire::{self, mask, pack_ring, pack_words, unpack_ring, unpack_words};
use crate::{invalid, Party, Result};
use hush_correlations::ot::{rot_recv, rot_send};
use hush_correlations::registry::{setup_receiver, setup_sender, SourceConfig};
use hush_correlations::{CotReceiver, CotSender};
use hush_primitives::{BitVec, Block, Prg, Ring};
pub use crate::deal::triples::TripleShare;
use crate::deal::triples::{ArithTriples, BitTriples};
use hush_deal::MAX_DEAL_N;
use hush_transport::Channel;

/// Where Beaver triples come from.
pub trait TripleSource {
    fn source_name(&self) -> String;
    /// `n` arithmetic triples over Z_2^bits.
    fn arith_triples(&mut self, ch: &mut dyn Channel, party: Party, bits: u32, n: usize) -> Result<TripleShare>;
    /// `n` AND triples, bit-packed (ceil(n/64) words per component).
    fn bit_triples(&mut self, ch: &mut dyn Channel, party: Party, n: usize) -> Result<TripleShare>;
}

impl TripleSource for Dealer {
    fn source_name(&self) -> String {
        "tee (module-dealt)".into()
    }
    fn arith_triples(&mut self, _ch: &mut dyn Channel, _party: Party, bits: u32, n: usize) -> Result<TripleShare> {
        let mut t = TripleShare::default();
        let mut done = 0;
        while done < n {
            let m = (n - done).min(MAX_DEAL_N as usize);
            let batch = self.next_batch();
            let b = self.deal(ArithTriples::request(batch, m as u32, bits))?;
            let p = TripleShare::from_bytes(&b, m)?;
            t.a.extend_from_slice(&p.a);
            t.b.extend_from_slice(&p.b);
            t.c.extend_from_slice(&p.c);
            done += m;
        }
        Ok(t)
    }
    fn bit_triples(&mut self, _ch: &mut dyn Channel, _party: Party, n: usize) -> Result<TripleShare> {
        // Batches are multiples of 64 so words concatenate.
        let mut t = TripleShare::default();
        let mut done = 0;
        while done < n {
            let m = (n - done).min(MAX_DEAL_N as usize);
            let batch = self.next_batch();
            let b = self.deal(BitTriples::request(batch, m as u32))?;
            let p = TripleShare::from_bytes(&b, m.div_ceil(64))?;
            t.a.extend_from_slice(&p.a);
            t.b.extend_from_slice(&p.b);
            t.c.extend_from_slice(&p.c);
            done += m;
        }
        Ok(t)
    }
}

/// Both directions of COT between the two parties: party 0 is the sender
/// of `send`'s correlation and the receiver of `recv`'s; party 1 the
/// opposite. Set up by name through the registry, so IKNP, Ferret and
/// SilentFlow plug in alike.
pub struct OtSession {
    pub party: Party,
    pub send: Box<dyn CotSender>,
    pub recv: Box<dyn CotReceiver>,
    pub name: String,
    /// This party's private randomness for the protocols run on the
    /// session (Gilboa's a, CF2's output shares and mux masks), seeded from
    /// the `rng` given to [`OtSession::setup`] — callers outside tests pass
    /// OS randomness there.
    pub(crate) rng: Prg,
}

impl OtSession {
    /// One-time setup of both directions (party 0 sets up its sender first).
    pub fn setup(ch: &mut dyn Channel, party: Party, cfg: &SourceConfig, rng: &mut Prg) -> Result<Self> {
        let (send, recv) = if party == 0 {
            let s = setup_sender(cfg, ch, rng)?;
            let r = setup_receiver(cfg, ch, rng)?;
            (s, r)
        } else {
            let r = setup_receiver(cfg, ch, rng)?;
            let s = setup_sender(cfg, ch, rng)?;
            (s, r)
        };
        Ok(OtSession { party, send, recv, name: cfg.name.clone(), rng: Prg::new(rng.random_block()) })
    }

    /// `n` random OTs in each direction: (as sender: m0, m1; as receiver:
    /// choices, m_c). Party 0 runs its sender side first.
    #[allow(clippy::type_complexity)]
    pub fn rots(&mut self, ch: &mut dyn Channel, n: usize) -> Result<((Vec<Block>, Vec<Block>), (BitVec, Vec<Block>))> {
        let mut m0 = vec![Block::ZERO; n];
        let mut m1 = vec![Block::ZERO; n];
        let mut c = BitVec::zeros(n);
        let mut mc = vec![Block::ZERO; n];
        if self.party == 0 {
            rot_send(&mut *self.send, ch, &mut m0, &mut m1)?;
            rot_recv(&mut *self.recv, ch, &mut c, &mut mc)?;
        } else {
            rot_recv(&mut *self.recv, ch, &mut c, &mut mc)?;
            rot_send(&mut *self.send, ch, &mut m0, &mut m1)?;
        }
        Ok(((m0, m1), (c, mc)))
    }
}

impl TripleSource for OtSession {
    fn source_name(&self) -> String {
        format!("interactive ({})", self.name)
    }

    /// Gilboa: a_P·b_{1−P} by ℓ ROTs per triple in each direction; the
    /// receiver's random choice bits *are* its b.
    fn arith_triples(&mut self, ch: &mut dyn Channel, party: Party, bits: u32, n: usize) -> Result<TripleShare> {
        let ring = Ring::new(bits).ok_or_else(|| invalid("ring width"))?;
        let l = bits as usize;
        let m = mask(bits);
        let ((m0, m1), (c, mc)) = self.rots(ch, n * l)?;
        // As sender: a random, corrections τ.
        let a: Vec<u64> = (0..n).map(|_| self.rng.next_u64() & m).collect();
        let mut tau = vec![0u64; n * l];
        let mut my_cross_s = vec![0u64; n];
        for i in 0..n {
            let mut acc = 0u64;
            for j in 0..l {
                let q = i * l + j;
                let h0 = m0[q].lo();
                let h1 = m1[q].lo();
                tau[q] = h1.wrapping_sub(h0).wrapping_sub(a[i] << j) & m;
                acc = acc.wrapping_sub(h0);
            }
            my_cross_s[i] = acc & m;
        }
        let mut msg = Vec::new();
        pack_ring(&tau, bits, &mut msg);
        let peer = wire::exchange(ch, "Gilboa multiplication: corrections", &msg)?;
        let mut ptau = vec![0u64; n * l];
        unpack_ring("Gilboa multiplication: corrections", &peer, bits, &mut ptau)?;
        // As receiver: b from choices.
        let mut b = vec![0u64; n];
        let mut my_cross_r = vec![0u64; n];
        for i in 0..n {
            let mut bi = 0u64;
            let mut acc = 0u64;
            for j in 0..l {
                let q = i * l + j;
                let cj = c.get(q) as u64;
                bi |= cj << j;
                acc = acc.wrapping_add(mc[q].lo().wrapping_sub(cj.wrapping_mul(ptau[q])));
            }
            b[i] = bi & m;
            my_cross_r[i] = acc & m;
        }
        let cc = (0..n).map(|i| ring.add(ring.add(ring.mul(a[i], b[i]), my_cross_s[i]), my_cross_r[i])).collect();
        let _ = party;
        Ok(TripleShare { a, b, c: cc })
    }

    /// Two ROTs per AND triple: as sender, a_P = lsb(m0 ⊕ m1) and
    /// u_P = lsb(m0); as receiver, b_P = choice and v_P = lsb(m_c); then
    /// u_0 ⊕ v_1 = a_0·b_1 and c_P = a_P·b_P ⊕ u_P ⊕ v_P.
    fn bit_triples(&mut self, ch: &mut dyn Channel, _party: Party, n: usize) -> Result<TripleShare> {
        let ((m0, m1), (c, mc)) = self.rots(ch, n)?;
        let w = n.div_ceil(64);
        let (mut a, mut b, mut cc) = (vec![0u64; w], vec![0u64; w], vec![0u64; w]);
        for i in 0..n {
            let ai = (m0[i].lsb() ^ m1[i].lsb()) as u64;
            let u = m0[i].lsb() as u64;
            let bi = c.get(i) as u64;
            let v = mc[i].lsb() as u64;
            a[i / 64] |= ai << (i % 64);
            b[i / 64] |= bi << (i % 64);
            cc[i / 64] |= ((ai & bi) ^ u ^ v) << (i % 64);
        }
        Ok(TripleShare { a, b, c: cc })
    }
}

/// z = x·y element-wise (one simultaneous exchange).
pub fn mul(ch: &mut dyn Channel, party: Party, x: &ArithShare, y: &ArithShare, t: &TripleShare) -> Result<ArithShare> {
    let n = x.len();
    if y.len() != n || t.a.len() < n {
        return Err(invalid("mul: length mismatch"));
    }
    let r = x.ring;
    let bits = r.bits();
    let mut ef = Vec::with_capacity(2 * n);
    ef.extend((0..n).map(|i| r.sub(x.v[i], t.a[i])));
    ef.extend((0..n).map(|i| r.sub(y.v[i], t.b[i])));
    let mut msg = Vec::new();
    pack_ring(&ef, bits, &mut msg);
    let peer = wire::exchange(ch, "Beaver multiplication: openings", &msg)?;
    let mut pe = vec![0u64; 2 * n];
    unpack_ring("Beaver multiplication: openings", &peer, bits, &mut pe)?;
    let z = (0..n)
        .map(|i| {
            let e = r.add(ef[i], pe[i]);
            let f = r.add(ef[n + i], pe[n + i]);
            let mut z = r.add(t.c[i], r.add(r.mul(e, t.b[i]), r.mul(f, t.a[i])));
            if party == 0 {
                z = r.add(z, r.mul(e, f));
            }
            z
        })
        .collect();
    Ok(ArithShare { ring: r, v: z })
}

/// z = x ∧ y, 64 lanes per word (one simultaneous exchange).
pub fn and(ch: &mut dyn Channel, party: Party, x: &BoolShare, y: &BoolShare, t: &TripleShare) -> Result<BoolShare> {
    let w = x.words.len();
    if y.words.len() != w || t.a.len() < w {
        return Err(invalid("and: length mismatch"));
    }
    let mut ef = Vec::with_capacity(2 * w);
    ef.extend((0..w).map(|i| x.words[i] ^ t.a[i]));
    ef.extend((0..w).map(|i| y.words[i] ^ t.b[i]));
    let mut msg = Vec::new();
    pack_words(&ef, &mut msg);
    let peer = wire::exchange(ch, "AND: openings", &msg)?;
    let mut pe = vec![0u64; 2 * w];
    unpack_words("AND: openings", &peer, &mut pe)?;
    let one = if party == 0 { u64::MAX } else { 0 };
    let z = (0..w)
        .map(|i| {
            let e = ef[i] ^ pe[i];
            let f = ef[w + i] ^ pe[w + i];
            t.c[i] ^ (e & t.b[i]) ^ (f & t.a[i]) ^ (e & f & one)
        })
        .collect();
    Ok(BoolShare::new(x.n, z))
}

/// Bit-to-arithmetic conversion with one arithmetic triple per bit.
pub fn b2a(ch: &mut dyn Channel, party: Party, b: &BoolShare, ring: Ring, t: &TripleShare) -> Result<ArithShare> {
    let n = b.n;
    let bits: Vec<u64> = (0..n).map(|i| b.get(i) as u64).collect();
    let zero = vec![0u64; n];
    let (x, y) = if party == 0 { (bits.clone(), zero) } else { (zero, bits.clone()) };
    let p = mul(ch, party, &ArithShare::new(ring, x), &ArithShare::new(ring, y), t)?;
    Ok(ArithShare {
        ring,
        v: (0..n).map(|i| ring.sub(bits[i], ring.mul(2, p.v[i]))).collect(),
    })
}
