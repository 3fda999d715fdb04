//! FSS gates in `tee` mode (Boyle, Chandran, Gilboa, Gupta, Ishai, Kumar,
//! Rathee, "Function Secret Sharing for Mixed-Mode and Fixed-Point Secure
//! Computation", Eurocrypt 2021): DCF-based less-than (millionaires'),
//! DReLU and ReLU (spline with output coefficients) from `hush-fss`, and an
//! exact truncation from two DCFs, all with keys the modules generate from
//! the synchronized seed ([`hush_fss::deal`]).
//!
//! **Online: one one-way message.** For x = y + m with m dealt to party 1
//! (the masked form after a module-dealt linear layer, or the x-holder's
//! input of the millionaires'), party 0 sends x̂ = y + h where its module
//! supplied h = m + r: the peer's input-independent contribution (VISION.md
//! "FSS gates", the idea of TAMI Opt#1). Both parties then evaluate their
//! keys at x̂ locally — on `hush-fss`'s batch layouts ([`DcfKeyBatch`] and
//! the gate batches), into which [`deal`] decodes and converts the dealt key
//! bytes offline, so the online phase parses nothing. For general shares (x_0, x_1) party 1 also sends
//! x_1 − m in the same round (one round, both directions).
//!
//! **Truncation** is exact: with x' = x + 2^{ℓ−1} and x̂ = x' + r,
//! ⌊x'/2^f⌋ = x̂_hi − r_hi − [x̂_lo < r_lo] + 2^{ℓ−f}·[x̂ < r] (two DCFs, the
//! r-terms in dealt offsets), and ⌊x/2^f⌋ = ⌊x'/2^f⌋ − 2^{ℓ−1−f} for every
//! signed x.
//!
//! **Millionaires'** (ℓ < 64): gt(y, x) = DReLU_{ℓ+1}(y − x − 1), one DCF
//! over ℓ bits, x̂ sent in ℓ + 1 bits; for ℓ = 64 the less-than gate
//! (interval containment from two DCFs) against the dealt threshold.
//!
//! Security: semi-honest; each key alone hides its function (PRG security
//! of fixed-key AES), x̂ is uniform to both parties since r is used once;
//! relies on the (simulated — gives no hardware protection) modules.
//!
//! **What each host sees, and why it is simulatable.**
//! * Party 0's module releases its key k_0 and h (h = m + r, or for the
//!   millionaires' r − x − 1 resp. r): h is uniform to party 0 because r
//!   is uniform and independent of m; k_0 alone is pseudorandom (BCGGIKR
//!   key privacy) and reveals neither r nor the gate's threshold. In the
//!   general form it also receives x_1 − m: uniform because m is uniform,
//!   fresh per element and never released to party 0.
//! * Party 1's module releases its key k_1 and m (its share of the
//!   activation or its own comparison input); it receives x̂ = x + r. Since
//!   r is fresh per element and per dealing (the batch number is part of
//!   the dealing's key label, [`crate::tee::Dealer::next_batch`]) and never
//!   released to party 1, x̂ − m is uniform whatever x is; k_1 alone is
//!   pseudorandom.
//! * Each party's output is a share masked by the other key's share, so the
//!   view (key, own dealt value, x̂) is simulated from its input and output
//!   by sampling the key from the key-privacy simulator and x̂ uniformly.
//! * Tests: `tests/views.rs` (`fss_opened_value_is_independent_of_the_input`,
//!   `fss_general_form_party0_view_is_independent_of_party1_share`) play
//!   the curious party with its real view; both fail if r or m is fixed or
//!   the batch number is reused.
//!
//! **Integrity in transit.** This protocol is semi-honest and has no
//! integrity check of its own: a message altered in transit to another
//! message of the right length (a flipped bit, a duplicated or reordered
//! message) is accepted and yields a wrong result. Corruption in transit
//! is caught by the transport (CRC32 on every frame, AEAD under TLS), not
//! by the protocol; a wrong length, a truncation, a closed link or a silent
//! peer is an error on both sides. Measured under fault injection in
//! `crates/hush-2pc/tests/faults.rs` (see `hush_transport::faulty`).

use crate::share::{ArithShare, BoolShare};
use crate::tee::Dealer;
use crate::wire::{self, mask, pack_ring, unpack_ring};
use crate::{invalid, Party, Result};
use hush_fss::{DcfKey, DcfKeyBatch, DreluBatch, LtBatch, LtKey, ReluBatch};
use hush_primitives::Ring;
pub use hush_fss::deal::{FssGate, FssShape};
use hush_fss::deal::{FssKeys, FssShare, FssSink, GateKeys};
use hush_transport::Channel;
use zeroize::Zeroize;

/// Elements per module crossing (bounds the size of one release). Small
/// enough that a gate batch is several crossings of the same shape, which
/// a dealer service computes one ahead of the request while the previous
/// one crosses the link (see `hush_tee::dealer`, "Paired dealing").
pub const DEAL_CHUNK: usize = 1 << 13;

/// This party's keys in `hush-fss`'s evaluation layout: decoded and
/// converted offline (in [`deal`]), so the online phase parses nothing.
enum Keys {
    Lt(LtBatch),
    Drelu(DreluBatch),
    Relu(ReluBatch),
    Trunc(DcfKeyBatch, DcfKeyBatch),
}

/// One dealt batch.
pub struct FssBatch {
    pub shape: FssShape,
    pub n: usize,
    pub party: Party,
    vals: Vec<u64>,
    offs: Vec<u64>,
    keys: Keys,
    dealt: usize,
}

impl FssBatch {
    /// Party 1's dealt value (its comparison input x, or the mask m).
    pub fn dealt_input(&self) -> &[u64] {
        if self.party == 1 {
            &self.vals
        } else {
            &[]
        }
    }
    pub fn dealt_bytes(&self) -> usize {
        self.dealt
    }
}

fn key_err(e: hush_fss::Error) -> crate::Error {
    crate::malformed("FSS key from the module", e.to_string())
}

/// The dealing requests [`deal`] sends for `n` gates of `shape` when the
/// dealer's next batch is `first_batch` (one per crossing of
/// [`DEAL_CHUNK`]): a dealing plan's entries (see `hush_tee::dealer`).
pub fn requests(first_batch: u64, n: usize, shape: FssShape) -> Vec<hush_tee::deal::DealRequest> {
    crossings(n).enumerate().map(|(i, m)| FssKeys::request(first_batch + i as u64, m as u32, &shape)).collect()
}

/// The crossing sizes of `n` gates.
fn crossings(n: usize) -> impl Iterator<Item = usize> {
    (0..n.div_ceil(DEAL_CHUNK)).map(move |i| (n - i * DEAL_CHUNK).min(DEAL_CHUNK))
}

/// Offline: this party's keys for `n` gates (crossings of [`DEAL_CHUNK`]).
pub fn deal(dealer: &mut Dealer, party: Party, n: usize, shape: FssShape) -> Result<FssBatch> {
    shape.validate().map_err(crate::Error::Invalid)?;
    if n == 0 {
        return Err(invalid("empty FSS batch"));
    }
    let mut dealt = 0;
    // One-DCF gates: the in-process module builds this party's keys
    // straight into the evaluation layout (`hush_fss::deal::FssSink`, no
    // key bytes); another backend's bytes are decoded into the same sink.
    if let Some(mut sink) = FssSink::new(n, shape) {
        for m in crossings(n) {
            let req = FssKeys::request(dealer.next_batch(), m as u32, &shape);
            let before = dealer.dealt_bytes;
            if !dealer.deal_into(&req, &mut sink)? {
                let mut bytes = dealer.deal(req)?;
                let r = sink.extend_bytes(&bytes, m);
                hush_primitives::wipe::wipe_vec(&mut bytes);
                r.map_err(key_err)?;
            }
            dealt += (dealer.dealt_bytes - before) as usize;
        }
        let keys = match std::mem::replace(&mut sink.keys, GateKeys::Drelu(DreluBatch::default())) {
            GateKeys::Drelu(k) => Keys::Drelu(k),
            GateKeys::Relu(k) => Keys::Relu(k),
        };
        let vals = std::mem::take(&mut sink.vals);
        return Ok(FssBatch { shape, n, party, vals, offs: Vec::new(), keys, dealt });
    }
    let mut vals = Vec::with_capacity(n);
    let mut offs = Vec::new();
    let b = shape.bits;
    let mut keys = match shape.gate {
        FssGate::Millionaire if b < 64 => Keys::Drelu(DreluBatch::with_capacity(n, b + 1, 1)),
        FssGate::Millionaire => Keys::Lt(LtBatch::with_capacity(n, b, 1)),
        FssGate::Drelu => Keys::Drelu(DreluBatch::with_capacity(n, b, 1)),
        FssGate::Relu => Keys::Relu(ReluBatch::with_capacity(n, b)),
        FssGate::Trunc { f } => Keys::Trunc(DcfKeyBatch::with_capacity(n, b, b, 1), DcfKeyBatch::with_capacity(n, f, b, 1)),
    };
    let kb = shape.key_bytes();
    for m in crossings(n) {
        let batch = dealer.next_batch();
        let mut bytes = dealer.deal(FssKeys::request(batch, m as u32, &shape))?;
        dealt += bytes.len();
        let (mut sv, mut so, kbytes) = FssShare::split(&bytes, m, &shape)?;
        vals.extend_from_slice(&sv);
        offs.extend_from_slice(&so);
        sv.zeroize();
        so.zeroize();
        // One-DCF gates: decoded straight into the batch layout, on every
        // core, without a key object per gate.
        match &mut keys {
            Keys::Drelu(v) => v.extend_encoded(kbytes, m).map_err(key_err)?,
            Keys::Relu(v) => v.extend_encoded(kbytes, m).map_err(key_err)?,
            _ => {}
        }
        for c in kbytes.chunks_exact(kb) {
            let pushed = match &mut keys {
                Keys::Drelu(_) | Keys::Relu(_) => break,
                Keys::Lt(v) => v.push(&LtKey::from_bytes(c).map_err(key_err)?),
                Keys::Trunc(a, b) => {
                    let k1 = DcfKey::size_bytes(shape.bits, shape.bits);
                    let (ka, kb) = (DcfKey::from_bytes(&c[..k1]).map_err(key_err)?, DcfKey::from_bytes(&c[k1..]).map_err(key_err)?);
                    a.push(&ka).and_then(|_| b.push(&kb))
                }
            };
            pushed.map_err(key_err)?;
        }
        hush_primitives::wipe::wipe_vec(&mut bytes);
    }
    Ok(FssBatch { shape, n, party, vals, offs, keys, dealt })
}

#[derive(Debug)]
pub enum FssOut {
    Bits(BoolShare),
    Arith(ArithShare),
}

impl FssOut {
    pub fn bits(self) -> Result<BoolShare> {
        match self {
            FssOut::Bits(b) => Ok(b),
            _ => Err(invalid("expected a Boolean output")),
        }
    }
    pub fn arith(self) -> Result<ArithShare> {
        match self {
            FssOut::Arith(a) => Ok(a),
            _ => Err(invalid("expected an arithmetic output")),
        }
    }
}

const STEP_OPEN: &str = "FSS: masked opening x̂";

/// Online phase. Masked form (`general = false`): party 0 passes y (for
/// the millionaires' its input; else its share of x = y + m), party 1
/// passes `None`; one one-way message. General form: both pass their
/// additive share of x; one simultaneous exchange.
pub fn online(ch: &mut dyn Channel, b: &FssBatch, x: Option<&[u64]>, general: bool) -> Result<FssOut> {
    let n = b.n;
    // The millionaires' (ℓ < 64) opens y − x − 1 + r in ℓ + 1 bits.
    let l = if b.shape.gate == FssGate::Millionaire && b.shape.bits < 64 { b.shape.bits + 1 } else { b.shape.bits };
    let lm = mask(l);
    let ring = Ring::new(l).expect("validated");
    if general && b.shape.gate == FssGate::Millionaire {
        return Err(invalid("the FSS millionaires' takes party 1's input from the module"));
    }
    let bias = if matches!(b.shape.gate, FssGate::Trunc { .. }) { 1u64 << (l - 1) } else { 0 };
    let mut xhat = vec![0u64; n];
    let mut msg = Vec::new();
    if b.party == 0 || general {
        let x = x.ok_or_else(|| invalid("input missing"))?;
        if x.len() != n {
            return Err(invalid(format!("input of {} elements for a batch of {n}", x.len())));
        }
        let mine: Vec<u64> = if b.party == 0 {
            (0..n).map(|i| x[i].wrapping_add(b.vals[i]).wrapping_add(bias) & lm).collect()
        } else {
            (0..n).map(|i| x[i].wrapping_sub(b.vals[i]) & lm).collect()
        };
        pack_ring(&mine, l, &mut msg);
        xhat = mine;
    }
    if general {
        let peer = wire::exchange(ch, STEP_OPEN, &msg)?;
        let mut p = vec![0u64; n];
        unpack_ring(STEP_OPEN, &peer, l, &mut p)?;
        xhat.iter_mut().zip(&p).for_each(|(a, b)| *a = ring.add(*a, *b));
    } else if b.party == 0 {
        wire::send(ch, &msg)?;
    } else {
        let bytes = wire::recv(ch, STEP_OPEN, n * wire::ring_bytes(l))?;
        unpack_ring(STEP_OPEN, &bytes, l, &mut xhat)?;
    }
    let p = b.party;
    let mut out = vec![0u64; n];
    Ok(match &b.keys {
        Keys::Lt(k) => {
            let mut scratch = vec![0u64; n];
            k.eval(p, &xhat, &mut out, &mut scratch);
            FssOut::Bits(bits_of(&out))
        }
        Keys::Drelu(k) => {
            k.eval(p, &xhat, &mut out);
            FssOut::Bits(bits_of(&out))
        }
        Keys::Relu(k) => {
            let mut scratch = vec![0u64; n];
            k.eval(p, &xhat, &mut out, &mut scratch);
            FssOut::Arith(ArithShare::new(Ring::new(b.shape.bits).expect("validated"), out))
        }
        Keys::Trunc(k1, k2) => {
            let FssGate::Trunc { f } = b.shape.gate else { unreachable!() };
            k1.eval(p, &xhat, &mut out, None);
            // The f-bit DCF reads only the low f bits of x̂.
            let mut o2 = vec![0u64; n];
            k2.eval(p, &xhat, &mut o2, None);
            for i in 0..n {
                let mut z = out[i].wrapping_add(o2[i]).wrapping_add(b.offs[i]);
                if p == 0 {
                    z = z.wrapping_add(xhat[i] >> f);
                }
                out[i] = z & lm;
            }
            FssOut::Arith(ArithShare::new(ring, out))
        }
    })
}

fn bits_of(v: &[u64]) -> BoolShare {
    let mut w = vec![0u64; v.len().div_ceil(64)];
    for (i, x) in v.iter().enumerate() {
        w[i / 64] |= (x & 1) << (i % 64);
    }
    BoolShare::new(v.len(), w)
}

/// What [`streamed`] returns: the gates' output shares, party 1's dealt
/// inputs (its comparison input or mask m, concatenated over the chunks;
/// empty for party 0), the seconds spent dealing and evaluating, and the
/// bytes the module dealt.
#[derive(Debug)]
pub struct Streamed {
    pub out: FssOut,
    pub dealt_input: Vec<u64>,
    pub deal_s: f64,
    pub online_s: f64,
    pub dealt: usize,
}

/// Dealing and the online phase **interleaved**, `chunk` gates at a time:
/// deal a chunk ([`deal`]), open and evaluate it ([`online`], masked form),
/// drop (and scrub) its keys, next chunk. The tee-mode total of a large
/// batch without holding all its keys at once: the key memory of one chunk
/// is reused from chunk to chunk (it stays in cache and is not page-faulted
/// afresh, which on a VM costs more than generating the keys), at one
/// one-way message per chunk instead of one for the whole batch.
///
/// Security: unchanged. Each chunk is a separate dealing under its own
/// batch number ([`Dealer::next_batch`]), so its r and m are fresh and used
/// once; each chunk's messages and keys are exactly those of [`deal`] and
/// [`online`] for that many gates, and the views of the whole run are the
/// concatenation of independent chunk views (each simulatable as stated in
/// the module docs). Party 0 passes its n inputs y; party 1 `None`.
pub fn streamed(
    ch: &mut dyn Channel,
    dealer: &mut Dealer,
    party: Party,
    n: usize,
    shape: FssShape,
    x: Option<&[u64]>,
    chunk: usize,
) -> Result<Streamed> {
    if chunk == 0 || n == 0 {
        return Err(invalid("streamed FSS: empty batch or chunk"));
    }
    if let Some(x) = x {
        if x.len() != n {
            return Err(invalid(format!(
                "input of {} elements for a batch of {n}",
                x.len()
            )));
        }
    }
    let (mut deal_s, mut online_s, mut dealt) = (0.0, 0.0, 0usize);
    let mut dealt_input = Vec::new();
    let mut vals: Vec<u64> = Vec::with_capacity(n);
    let mut bits_out = None;
    for lo in (0..n).step_by(chunk) {
        let m = chunk.min(n - lo);
        let t = std::time::Instant::now();
        let b = deal(dealer, party, m, shape)?;
        let t1 = std::time::Instant::now();
        deal_s += (t1 - t).as_secs_f64();
        dealt += b.dealt_bytes();
        dealt_input.extend_from_slice(b.dealt_input());
        match online(ch, &b, x.map(|x| &x[lo..lo + m]), false)? {
            FssOut::Bits(s) => {
                bits_out = Some(true);
                vals.extend((0..s.n).map(|i| s.get(i) as u64));
            }
            FssOut::Arith(a) => {
                bits_out = Some(false);
                vals.extend_from_slice(&a.v);
            }
        }
        drop(b);
        online_s += t1.elapsed().as_secs_f64();
    }
    let out = if bits_out == Some(true) {
        let s = FssOut::Bits(bits_of(&vals));
        vals.zeroize();
        s
    } else {
        let l = shape.bits;
        FssOut::Arith(ArithShare::new(Ring::new(l).expect("validated"), vals))
    };
    Ok(Streamed {
        out,
        dealt_input,
        deal_s,
        online_s,
        dealt,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hush_tee::{InProcessModule, Module, ModuleRole, Request, Response, TrustedModule};

    /// An in-process module that only ever releases bytes (as a module
    /// process or a dealer service does): `deal_into` is the default.
    struct BytesOnly(InProcessModule);
    impl TrustedModule for BytesOnly {
        fn call(&mut self, req: &Request) -> hush_tee::Result<Response> {
            self.0.call(req)
        }
        fn stats(&self) -> hush_tee::ModuleStats {
            self.0.stats()
        }
        fn describe(&self) -> String {
            self.0.describe()
        }
    }

    fn module(role: ModuleRole) -> InProcessModule {
        InProcessModule::new(Module::with_session_seed(role, &[7u8; 32]).with_kinds(crate::deal::kinds()))
    }

    /// The in-process module's direct path (keys built into the evaluation
    /// layout) and the byte path (what a module process or a dealer
    /// service releases, decoded) give the same batch: the same dealt
    /// values, the same outputs at every input, the same byte and crossing
    /// counts — over two crossings, the first of [`DEAL_CHUNK`] gates.
    #[test]
    fn direct_path_equals_byte_path() {
        let n = DEAL_CHUNK + 100;
        for gate in [FssGate::Relu, FssGate::Drelu, FssGate::Millionaire] {
            for (party, role) in [(0u8, ModuleRole::Sender), (1, ModuleRole::Receiver)] {
                let shape = FssShape { bits: 32, gate };
                let mut direct = Dealer::new(Box::new(module(role)));
                let mut bytes = Dealer::new(Box::new(BytesOnly(module(role))));
                let a = deal(&mut direct, party, n, shape).unwrap();
                let b = deal(&mut bytes, party, n, shape).unwrap();
                assert_eq!(a.vals, b.vals, "{gate:?} party {party}");
                assert_eq!(a.dealt, b.dealt);
                assert_eq!(direct.dealt_bytes, bytes.dealt_bytes);
                assert_eq!(direct.stats().crossings, bytes.stats().crossings);
                assert_eq!(direct.stats().bytes_from_module, bytes.stats().bytes_from_module);
                let l = if gate == FssGate::Millionaire { 33 } else { 32 };
                let mut prg = hush_primitives::Prg::new(hush_primitives::Block(0x5eed + party as u128));
                let xs: Vec<u64> = (0..n).map(|_| prg.next_u64() & mask(l)).collect();
                let (mut oa, mut ob, mut sa, mut sb) = (vec![0u64; n], vec![0u64; n], vec![0u64; n], vec![0u64; n]);
                match (&a.keys, &b.keys) {
                    (Keys::Relu(x), Keys::Relu(y)) => {
                        x.eval(party, &xs, &mut oa, &mut sa);
                        y.eval(party, &xs, &mut ob, &mut sb);
                        assert!(x.same_layout_as(y));
                    }
                    (Keys::Drelu(x), Keys::Drelu(y)) => {
                        x.eval(party, &xs, &mut oa);
                        y.eval(party, &xs, &mut ob);
                        assert!(x.same_layout_as(y));
                    }
                    _ => panic!("{gate:?}: different key kinds"),
                }
                assert_eq!(oa, ob, "{gate:?} party {party}");
            }
        }
    }
}
