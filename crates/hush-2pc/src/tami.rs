//! TAMI-MPC's one-round millionaires' in `tee` mode (Li et al., "TAMI-MPC:
//! Trusted Acceleration of Minimal-Interaction MPC", §3; VISION.md "TAMI-MPC
//! millionaires'"), and the DReLU / ReLU / truncation built on it.
//!
//! Party 1 (B, the x-holder) holds an input-independent value its module
//! dealt — the comparison input x, or the mask m of a masked activation
//! x = y + m — and party 0 (A) holds the online value y. The dealing is
//! described in [`crate::deal::tami`]. Online:
//!
//! 1. A → B: ŷ = y' ⊕ τ (nk bits) and A's pad bit S_j\[ŷ_j\] of every opened
//!    leaf bit (2n − 1 bits, one flight). B holds only the one-time-padded
//!    tables T ⊕ S, so the pad bits unlock exactly one entry per chunk and
//!    output bit: d = leaf ⊕ r.
//! 2. B → A: d (Opt#1: the masks r are inside B's tables, so this single
//!    direction is the whole merge opening); both parties evaluate the
//!    merge polynomial locally from their dealt subset-product shares (eqs.
//!    1-3), each distinct subset product dealt once (Opt#2, eqs. 4-7).
//!    With more chunks than the merge arity, each further level costs one
//!    simultaneous exchange.
//! 3. ReLU / truncation only: B appends e_B = b_B ⊕ ρ_B to its flight,
//!    A returns e = b ⊕ ρ (one bit), and both finish locally:
//!    b = e + (1 − 2e)ρ (truncation) or b·x = e·x + (1 − 2e)·ρx (ReLU:
//!    A's leaf flight also carries y − s under its dealt mask s, and
//!    ρx = (y − s)·ρ + ρ(s + m) from dealt shares, see the dealer docs).
//!
//! Flights with one merge level (≤ 8 chunks: ℓ ≤ 40 at the default k = 5,
//! arity 8): two (millionaires', DReLU), three (ReLU, truncation). Bits per
//! comparison online: A sends the bytes of ŷ plus 2n − 1 pad bits, B sends
//! 2n − 1 opened bits (ℓ = 32: 62 at k = 4, 58 at k = 5); ReLU adds the
//! bytes of y − s (ℓ bits) to A's flight.
//!
//! **Truncation** (faithful, full range): with x' = x + 2^{ℓ−1} (A adds the
//! constant to its share y), ⌊x/2^f⌋ = ⌊x'/2^f⌋ − 2^{ℓ−1−f} exactly for
//! every signed ℓ-bit x, and ⌊x'/2^f⌋ = (y'≫f) + (m≫f) − w·2^{ℓ−f} − c with
//! the wrap bit w = 1{y' + m ≥ 2^ℓ} = 1{y' > 2^ℓ−1−m} (a comparison against
//! a dealt threshold) and the dropped low carry c ∈ {0, 1}: error ≤ 1 ulp,
//! never a wrap-around blow-up.
//!
//! ## Security: what each host sees (semi-honest)
//!
//! The modules are simulated (no hardware protection); the argument
//! assumes each module releases only its host's share (see the dealer docs
//! for why each release is its host's input plus independent uniform
//! values) and that batches are never dealt twice (the module refuses a
//! replayed batch number). All masks below are fresh per comparison.
//!
//! * **B (party 1)** sees its release (x or m, its padded tables, shares
//!   of the ∏_U r, level ≥ 1 mask shares, ρ and ρ(s + m) shares: all
//!   uniform streams of its sub-key), then receives ŷ, the pad bits
//!   S_j\[ŷ_j\], y − s (ReLU), the level ≥ 1 openings (ℓ > 40 at k = 5), and
//!   e (ReLU, truncation). ŷ = y' ⊕ τ is uniform: τ does not enter B's
//!   release at all (it is inside A's pads S = U ⊕ T). y − s is uniform and
//!   independent of ŷ: s is A's alone and independent of τ. The pad bits are uniform: B's release
//!   contains S only as T ⊕ S, and the one position per chunk that A
//!   unlocks yields leaf ⊕ r, uniform because r reaches B only inside
//!   padded tables or XOR-masked subset products. Level ≥ 1 openings are
//!   values XOR masks whose other share only A holds; e = b ⊕ ρ with ρ
//!   hidden from both. A simulator draws all of these uniformly and
//!   finishes B's output share from them as the protocol does — B's view
//!   is simulatable from B's input alone (its output share is part of the
//!   same uniform view).
//! * **A (party 0)** sees its release (τ, s, S, subset-product and mask
//!   shares, ρ shares: independent uniform values, see the dealer docs) and receives d =
//!   leaf ⊕ r (uniform: r enters A's view nowhere else), the level ≥ 1
//!   openings (masked as above), and e_B = b_B ⊕ ρ_B (uniform: ρ_B is B's).
//!   A's view is simulatable from y alone.
//! * **Built on it**: DReLU adds only local XORs of msb bits. ReLU and
//!   truncation open e = b ⊕ ρ once (ρ fresh, hidden from both) and finish
//!   with local affine maps of dealt shares. [`crate::nonlinear`] first
//!   has B send x_1 − m (uniform to A: m is B's fresh dealt mask); MaxPool
//!   is ⌈log2 window⌉ ReLU batches, each freshly dealt. No value is opened
//!   twice and no mask is used for two openings.
//!
//! * **Swapped roles and chained ReLUs** (since 2026-11-25). The kind
//!   `2pc/tami-swapped` ([`deal_swapped`]) deals the same shares with the
//!   hosts renamed (host 0 plays B, host 1 plays A); [`online`] goes by
//!   the batch's role, so each host's view of such a batch is exactly the
//!   other host's view of a plain batch — simulatable as above. In a
//!   chain of ReLUs (`crate::transformer::Ctx::relu_chain`) the roles
//!   alternate and A appends its re-share onto the next comparison's fresh
//!   dealt mask (x_A − m', uniform: m' is that batch's B input, used
//!   nowhere else) to its e flight ([`online_next`]). That message is the
//!   one the next comparison would send first anyway; it is sent one
//!   flight earlier, and nothing else changes, so the joint view is the
//!   concatenation of the single comparisons' views.
//!
//! `tests/tami_view.rs` plays each curious party with its real view (its
//! module's releases plus every received message) and checks that
//! recovering τ, y, leaf bits or the result stays at chance.
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
use crate::wire::{self, mask, pack_ring, pack_words, unpack_ring, unpack_words};
use crate::{invalid, malformed, Party, Result};
use hush_primitives::Ring;
pub use crate::deal::tami::{Flavor, Plan, TamiShape};
use crate::deal::tami::{eval_level_word, TamiShare, TamiTables};
use hush_deal::MAX_DEAL_N;
use hush_transport::Channel;

/// Default chunk width and merge arity. k = 5: at ℓ = 32 fewer bits sent
/// (58 vs 62 per comparison at arity 8) and fewer dealt bits than k = 4.
/// Arity 4 (since 2026-11-25; was 8): the 8 chunks of ℓ = 37's 36 or 37
/// compared bits merge in two levels instead of one, which costs one more
/// simultaneous exchange of 3 opened bits per comparison but deals 64
/// subset-product bits per comparison instead of 382 — the largest part of
/// a dealt TAMI share. Measured in the inference engine (SqueezeNet, `lan`):
/// both the tee mode (the server's module computes less) and the dealer
/// mode (the server's link carries 506 MB instead of 767 MB) got faster,
/// and the whole network's round count grew by one. `hush bench nonlinear`
/// keeps `--arity 8` as its default (the paper's one-level merge).
pub const DEFAULT_K: u32 = 5;
pub const DEFAULT_ARITY: u32 = 4;

/// One dealt batch, ready for the online phase.
pub struct TamiBatch {
    pub shape: TamiShape,
    pub plan: Plan,
    pub n: usize,
    pub party: Party,
    share: TamiShare,
    in_idx: Vec<[usize; 2]>,
}

impl TamiBatch {
    /// B's dealt input (x for the millionaires', the mask m otherwise);
    /// empty at party 0.
    pub fn dealt_input(&self) -> &[u64] {
        &self.share.input
    }
    /// Bytes the module released for this batch.
    pub fn dealt_bytes(&self) -> usize {
        self.share.dealt_bytes()
    }
}

/// The dealing request [`deal`] sends for `n` comparisons of `shape` as
/// batch `batch` (a dealing plan's entry, see `hush_tee::dealer`).
pub fn request(batch: u64, n: usize, shape: &TamiShape) -> hush_tee::deal::DealRequest {
    TamiTables::request(batch, n as u32, shape)
}

/// Offline: one crossing for this party's share of `n` comparisons.
pub fn deal(dealer: &mut Dealer, party: Party, n: usize, shape: TamiShape) -> Result<TamiBatch> {
    shape.validate().map_err(crate::Error::Invalid)?;
    if n == 0 || n > MAX_DEAL_N as usize {
        return Err(invalid(format!("TAMI batch of {n} out of range 1..={MAX_DEAL_N}")));
    }
    let batch = dealer.next_batch();
    let mut bytes = dealer.deal(request(batch, n, &shape))?;
    let plan = shape.plan();
    let share = TamiShare::from_bytes(&bytes, party, n, &shape, &plan);
    // The share's bytes are secret: erased once decoded (or refused).
    hush_deal::wipe_vec_par(&mut bytes);
    let share = share?;
    let mut in_idx = vec![[usize::MAX; 2]; plan.leaves];
    for (t, &(node, eq)) in plan.levels[0].inputs.iter().enumerate() {
        in_idx[node as usize][eq as usize] = t;
    }
    Ok(TamiBatch { shape, plan, n, party, share, in_idx })
}

/// Offline: one crossing for this host's share of `n` comparisons with
/// the roles exchanged ([`crate::deal::tami::TamiTablesSwapped`]): host 0
/// plays B and host 1 plays A. The batch's `party` is the host's **role**
/// (1 − host), which is what [`online`] goes by.
pub fn deal_swapped(dealer: &mut Dealer, host: Party, n: usize, shape: TamiShape) -> Result<TamiBatch> {
    shape.validate().map_err(crate::Error::Invalid)?;
    if n == 0 || n > MAX_DEAL_N as usize {
        return Err(invalid(format!("TAMI batch of {n} out of range 1..={MAX_DEAL_N}")));
    }
    let batch = dealer.next_batch();
    let mut bytes = dealer.deal(crate::deal::tami::TamiTablesSwapped::request(batch, n as u32, &shape))?;
    let plan = shape.plan();
    let role = 1 - host;
    let share = TamiShare::from_bytes(&bytes, role, n, &shape, &plan);
    hush_deal::wipe_vec_par(&mut bytes);
    let share = share?;
    let mut in_idx = vec![[usize::MAX; 2]; plan.leaves];
    for (t, &(node, eq)) in plan.levels[0].inputs.iter().enumerate() {
        in_idx[node as usize][eq as usize] = t;
    }
    Ok(TamiBatch { shape, plan, n, party: role, share, in_idx })
}

/// What rides on a single-level ReLU batch's last flight (A → B: the
/// opened e) besides e — see [`online_next`].
pub enum Next<'a> {
    /// Nothing (the plain protocol).
    None,
    /// Role A: bytes to append to the e flight, computed from A's output
    /// share of this batch (known to A before it sends e).
    Send(&'a mut dyn FnMut(&ArithShare) -> Result<Vec<u8>>),
    /// Role B: the number of bytes that follow e in that flight.
    Recv(usize),
}

/// Output of a batch: XOR shares (millionaires', DReLU) or arithmetic shares.
#[derive(Debug)]
pub enum TamiOut {
    Bits(BoolShare),
    Arith(ArithShare),
}

impl TamiOut {
    pub fn bits(self) -> Result<BoolShare> {
        match self {
            TamiOut::Bits(b) => Ok(b),
            _ => Err(invalid("expected a Boolean output")),
        }
    }
    pub fn arith(self) -> Result<ArithShare> {
        match self {
            TamiOut::Arith(a) => Ok(a),
            _ => Err(invalid("expected an arithmetic output")),
        }
    }
}

const STEP_LEAF: &str = "TAMI leaf: masked input ŷ";
const STEP_D0: &str = "TAMI merge: opened leaf bits";
const STEP_DL: &str = "TAMI merge: level opening";
const STEP_E: &str = "TAMI post: opened e = b ⊕ ρ";

/// Online phase. Party 0 passes its value y (its share of x for DReLU,
/// ReLU and truncation); party 1 passes `None`.
pub fn online(ch: &mut dyn Channel, b: &TamiBatch, y: Option<&[u64]>) -> Result<TamiOut> {
    online_next(ch, b, y, Next::None).map(|r| r.0)
}

/// [`online`] with a payload on the last flight (single-level ReLU batches
/// only): role A appends the bytes [`Next::Send`] computes from its output
/// share to its e flight, role B receives them ([`Next::Recv`]) and gets
/// them back. The flights and every other message are [`online`]'s; the
/// payload is the caller's message, sent one flight earlier than it could
/// be on its own (what it must be — e.g. a re-share masked by a fresh
/// dealt value — is the caller's argument). Returns the output and the
/// received payload (empty unless `Recv`).
pub fn online_next(ch: &mut dyn Channel, b: &TamiBatch, y: Option<&[u64]>, next: Next<'_>) -> Result<(TamiOut, Vec<u8>)> {
    let shape = b.shape;
    let n = b.n;
    let nw = n.div_ceil(64);
    let l = shape.bits;
    let lm = mask(l);
    let sent = shape.sent_bits();
    let levels = &b.plan.levels;
    let single = levels.len() == 1;
    let post = shape.has_post();
    let t0 = levels[0].inputs.len();
    let party = b.party;
    let s = &b.share;

    // 1. Leaf flight A → B: ŷ and A's pad bits S_j[ŷ_j] (A's XOR share of
    //    each opened leaf bit).
    let relu = shape.flavor == Flavor::Relu;
    let mut yhat = vec![0u64; n];
    let mut yv = Vec::new();
    let mut ys: Vec<u64> = Vec::new();
    let mut pad_bits = vec![0u64; nw * t0];
    if party == 0 {
        let y = y.ok_or_else(|| invalid("party 0 must supply its input"))?;
        if y.len() != n {
            return Err(invalid(format!("input of {} elements for a batch of {n}", y.len())));
        }
        yv = match shape.flavor {
            Flavor::Trunc { .. } => y.iter().map(|v| v.wrapping_add(1u64 << (l - 1)) & lm).collect(),
            _ => y.iter().map(|v| v & lm).collect(),
        };
        let sm = mask(sent);
        for i in 0..n {
            yhat[i] = (yv[i] ^ s.tau[i]) & sm;
        }
        read_leaf_bits(b, &s.pad, &yhat, &mut pad_bits);
        let mut msg = Vec::new();
        pack_ring(&yhat, sent, &mut msg);
        pack_words(&pad_bits, &mut msg);
        if relu {
            // y − s: the public coefficient of ρ·x (see the dealer docs).
            ys = (0..n).map(|i| yv[i].wrapping_sub(s.smask[i]) & lm).collect();
            pack_ring(&ys, l, &mut msg);
        }
        wire::send(ch, &msg)?;
    } else {
        let yb = n * wire::ring_bytes(sent);
        let pb = yb + 8 * nw * t0;
        let sb = if relu { n * wire::ring_bytes(l) } else { 0 };
        let bytes = wire::recv(ch, STEP_LEAF, pb + sb)?;
        unpack_ring(STEP_LEAF, &bytes[..yb], sent, &mut yhat)?;
        unpack_words(STEP_LEAF, &bytes[yb..pb], &mut pad_bits)?;
        wire::check_tail(STEP_LEAF, &pad_bits, n, t0)?;
        if relu {
            ys = vec![0u64; n];
            unpack_ring(STEP_LEAF, &bytes[pb..], l, &mut ys)?;
        }
    }

    // 2. Level 0: B opens the masked leaf bits.
    let extra = if post && single { nw } else { 0 };
    let mut d0 = vec![0u64; nw * t0];
    let mut e_peer = vec![0u64; extra];
    if party == 1 {
        // d = (T ⊕ S)_j[ŷ_j] ⊕ S_j[ŷ_j] = leaf ⊕ r.
        read_leaf_bits(b, &s.tables, &yhat, &mut d0);
        d0.iter_mut().zip(&pad_bits).for_each(|(d, p)| *d ^= p);
    }
    let mut outs;
    if party == 1 {
        outs = eval_all(levels, 0, party, &d0, &s.subsets[0], nw);
        let mut msg = Vec::new();
        pack_words(&d0, &mut msg);
        if post && single {
            let bb = final_bits(&shape, party, &outs, nw, None, &s.input);
            let e_mine: Vec<u64> = bb.iter().zip(&s.rho_bits).map(|(x, r)| x ^ r).collect();
            pack_words(&e_mine, &mut msg);
        }
        wire::send(ch, &msg)?;
    } else {
        let bytes = wire::recv(ch, STEP_D0, 8 * (nw * t0 + extra))?;
        unpack_words(STEP_D0, &bytes[..8 * nw * t0], &mut d0)?;
        wire::check_tail(STEP_D0, &d0, n, t0)?;
        unpack_words(STEP_D0, &bytes[8 * nw * t0..], &mut e_peer)?;
        wire::check_tail(STEP_D0, &e_peer, n, 1)?;
        outs = eval_all(levels, 0, party, &d0, &s.subsets[0], nw);
    }

    // Further levels: simultaneous openings with XOR-shared masks.
    for li in 1..levels.len() {
        let lv = &levels[li];
        let ti = lv.inputs.len();
        let mut mine = vec![0u64; nw * ti];
        let tl = wire::tail(n);
        for wi in 0..nw {
            for (t, &(node, eq)) in lv.inputs.iter().enumerate() {
                let (g, e) = outs[wi][node as usize];
                let v = if eq { e } else { g };
                let mut x = v ^ s.masks[li][wi * ti + t];
                if wi == nw - 1 {
                    x &= tl;
                }
                mine[wi * ti + t] = x;
            }
        }
        let mut msg = Vec::new();
        pack_words(&mine, &mut msg);
        let peer = wire::exchange(ch, STEP_DL, &msg)?;
        let mut pd = vec![0u64; nw * ti];
        unpack_words(STEP_DL, &peer, &mut pd)?;
        wire::check_tail(STEP_DL, &pd, n, ti)?;
        let d: Vec<u64> = mine.iter().zip(&pd).map(|(a, b)| a ^ b).collect();
        outs = eval_all(levels, li, party, &d, &s.subsets[li], nw);
    }

    let chained = !matches!(next, Next::None);
    if chained && !(single && relu) {
        return Err(invalid("a payload on the last flight needs a single-level ReLU batch"));
    }
    match (&next, party) {
        (Next::Send(_), 1) | (Next::Recv(_), 0) => return Err(invalid("TAMI: role A sends the last flight's payload, role B receives it")),
        _ => {}
    }
    let yh = (party == 0).then_some(&yv[..]);
    let bits = final_bits(&shape, party, &outs, nw, yh, &s.input);
    if !post {
        return Ok((TamiOut::Bits(BoolShare::new(n, bits)), Vec::new()));
    }
    let ring = Ring::new(l).expect("validated");

    // 3. e = b ⊕ ρ.
    let mut payload = Vec::new();
    let e: Vec<u64> = if single {
        if party == 0 {
            let e: Vec<u64> = (0..nw).map(|i| bits[i] ^ s.rho_bits[i] ^ e_peer[i]).collect();
            let mut msg = Vec::new();
            pack_words(&e, &mut msg);
            if let Next::Send(hook) = next {
                let out = ArithShare::new(ring, relu_out(b, &e, &yv, &ys));
                msg.extend_from_slice(&hook(&out)?);
                wire::send(ch, &msg)?;
                return Ok((TamiOut::Arith(out), payload));
            }
            wire::send(ch, &msg)?;
            e
        } else {
            let extra = if let Next::Recv(k) = next { k } else { 0 };
            let bytes = wire::recv(ch, STEP_E, 8 * nw + extra)?;
            let mut pe = vec![0u64; nw];
            unpack_words(STEP_E, &bytes[..8 * nw], &mut pe)?;
            wire::check_tail(STEP_E, &pe, n, 1)?;
            payload = bytes[8 * nw..].to_vec();
            pe
        }
    } else {
        let mine: Vec<u64> = (0..nw).map(|i| bits[i] ^ s.rho_bits[i]).collect();
        let mut msg = Vec::new();
        pack_words(&mine, &mut msg);
        let peer = wire::exchange(ch, STEP_E, &msg)?;
        let mut pe = vec![0u64; nw];
        unpack_words(STEP_E, &peer, &mut pe)?;
        wire::check_tail(STEP_E, &pe, n, 1)?;
        mine.iter().zip(&pe).map(|(a, b)| a ^ b).collect()
    };
    let eb = |i: usize| (e[i / 64] >> (i % 64)) & 1 == 1;
    let out: Vec<u64> = match shape.flavor {
        Flavor::Trunc { f } => (0..n)
            .map(|i| {
                let w = if eb(i) { ring.sub((party == 0) as u64, s.rho[i]) } else { s.rho[i] };
                let base = if party == 0 {
                    ring.sub(yv[i] >> f, 1u64 << (l - 1 - f))
                } else {
                    s.input[i] >> f
                };
                ring.sub(base, ring.mul(w, 1u64 << (l - f)))
            })
            .collect(),
        Flavor::Relu => relu_out(b, &e, &yv, &ys),
        _ => unreachable!("post only for ReLU and truncation"),
    };
    Ok((TamiOut::Arith(ArithShare::new(ring, out)), payload))
}

/// This role's share of b·x from the opened e: e·x + (1 − 2e)·ρx.
fn relu_out(b: &TamiBatch, e: &[u64], yv: &[u64], ys: &[u64]) -> Vec<u64> {
    let s = &b.share;
    let ring = Ring::new(b.shape.bits).expect("validated");
    (0..b.n)
        .map(|i| {
            let xp = if b.party == 0 { yv[i] } else { s.input[i] };
            // ρ·x = (y − s)·ρ + ρ·(s + m)
            let rx = ring.add(ring.mul(ys[i], s.rho[i]), s.rho_x[i]);
            if (e[i / 64] >> (i % 64)) & 1 == 1 {
                ring.sub(xp, rx)
            } else {
                rx
            }
        })
        .collect()
}

/// Packs bit ŷ_j of each chunk's table word (gt half and, where the merge
/// uses it, eq half) into `out`, laid out [word][level-0 input].
fn read_leaf_bits(b: &TamiBatch, words: &[u64], yhat: &[u64], out: &mut [u64]) {
    let chunks = b.shape.chunks();
    let nc = chunks.len();
    let t0 = b.plan.levels[0].inputs.len();
    // Per chunk: shift, mask, and the output slots of its gt and eq bits
    // (eq: t0, a scratch slot, when the merge does not use it).
    let cs: Vec<(u32, u64, usize, usize)> = chunks
        .iter()
        .enumerate()
        .map(|(j, &(lo, width))| {
            let [ig, ie] = b.in_idx[j];
            (lo, (1u64 << width) - 1, ig, if ie == usize::MAX { t0 } else { ie })
        })
        .collect();
    // One word (64 comparisons) at a time, accumulated in a local array
    // and stored once: no read-modify-write of `out` per bit.
    let mut acc = vec![0u64; t0 + 1];
    for (wi, ow) in out.chunks_mut(t0).enumerate() {
        acc.iter_mut().for_each(|w| *w = 0);
        let lo_i = wi * 64;
        let hi_i = (lo_i + 64).min(yhat.len());
        for i in lo_i..hi_i {
            let bi = i - lo_i;
            let yh = yhat[i];
            let row = &words[i * nc..(i + 1) * nc];
            for (&t, &(lo, m, ig, ie)) in row.iter().zip(&cs) {
                let u = (yh >> lo) & m;
                acc[ig] |= ((t >> u) & 1) << bi;
                acc[ie] |= ((t >> (32 + u)) & 1) << bi;
            }
        }
        ow.copy_from_slice(&acc[..t0]);
    }
}

/// Output shares per word per node of level `li`.
fn eval_all(levels: &[crate::deal::tami::Level], li: usize, party: Party, d: &[u64], sub: &[u64], nw: usize) -> Vec<Vec<(u64, u64)>> {
    let lv = &levels[li];
    let ti = lv.inputs.len();
    let ns = lv.subsets.len();
    let mut scratch = vec![0u64; 256];
    let mut res = Vec::with_capacity(nw);
    for wi in 0..nw {
        let mut out = Vec::with_capacity(lv.outputs.len());
        eval_level_word(lv, party, &d[wi * ti..(wi + 1) * ti], &sub[wi * ns..(wi + 1) * ns], &mut out, &mut scratch);
        res.push(out);
    }
    res
}

/// This party's share of the flavor's bit (gt, DReLU or the wrap bit).
fn final_bits(shape: &TamiShape, party: Party, outs: &[Vec<(u64, u64)>], nw: usize, y: Option<&[u64]>, input: &[u64]) -> Vec<u64> {
    let n = input.len().max(y.map_or(0, |v| v.len()));
    let tl = wire::tail(n);
    let mut bits: Vec<u64> = (0..nw).map(|w| outs[w][0].0).collect();
    if matches!(shape.flavor, Flavor::Drelu | Flavor::Relu) {
        // DReLU = 1 ⊕ msb_w(x) = 1 ⊕ y_{w−1} ⊕ m_{w−1} ⊕ carry (w = ℓ
        // unless the shape compares a reduced width).
        let top = shape.width() - 1;
        let src = if party == 0 { y.expect("party 0 has y") } else { input };
        for (i, v) in src.iter().enumerate() {
            bits[i / 64] ^= ((v >> top) & 1) << (i % 64);
        }
        if party == 0 {
            bits.iter_mut().for_each(|w| *w = !*w);
        }
    }
    if let Some(last) = bits.last_mut() {
        *last &= tl;
    }
    bits
}

/// Guard used by the nonlinear layer for batches larger than one crossing.
pub fn check_len(n: usize) -> Result<()> {
    if n > MAX_DEAL_N as usize {
        return Err(malformed("TAMI", format!("batch of {n} exceeds {MAX_DEAL_N}")));
    }
    Ok(())
}

/// What [`streamed`] returns: the outputs, party 1's dealt inputs (its
/// comparison input or mask m, concatenated over the chunks; empty for
/// party 0), the seconds spent dealing and in the online phase, and the
/// bytes the module released.
#[derive(Debug)]
pub struct Streamed {
    pub out: TamiOut,
    pub dealt_input: Vec<u64>,
    pub deal_s: f64,
    pub online_s: f64,
    pub dealt: usize,
}

/// Dealing and the online phase **interleaved**, `chunk` comparisons at a
/// time: deal a chunk ([`deal`]), run its flights ([`online`]), drop (and
/// scrub) its share, next chunk — the tee-mode total of a large batch
/// without holding all its tables at once (the pattern of
/// [`crate::fss::streamed`]): one chunk's share (~170 bytes per ReLU and
/// party at ℓ = 32, k = 4) stays in cache between the module's write and
/// the online phase's reads, instead of 17 MB per party going through
/// memory twice.
///
/// Security: unchanged. Each chunk is a separate dealing under its own
/// batch number ([`Dealer::next_batch`]), so all its masks (τ, S, r, ρ, s,
/// m) are fresh and used once; each chunk's messages are exactly those of
/// [`online`] for that many comparisons, so the whole run's view is the
/// concatenation of independent chunk views, each simulatable as stated
/// in the module docs. The price is flights: three per chunk (ReLU)
/// instead of three in all. Party 0 passes its n inputs y; party 1 `None`.
///
/// With `overlap`, the dealing runs on a second thread, one chunk ahead of
/// the online phase (the module is a separate thread or process: dealing
/// chunk k + 1 overlaps chunk k's flights). The chunks are dealt in the
/// same order under the same batch numbers, so each party's shares and
/// messages are bit-identical to the sequential run's; only the timing
/// changes.
pub fn streamed(
    ch: &mut dyn Channel,
    dealer: &mut Dealer,
    party: Party,
    n: usize,
    shape: TamiShape,
    y: Option<&[u64]>,
    chunk: usize,
    overlap: bool,
) -> Result<Streamed> {
    if chunk == 0 || n == 0 {
        return Err(invalid("streamed TAMI: empty batch or chunk"));
    }
    if let Some(y) = y {
        if y.len() != n {
            return Err(invalid(format!("input of {} elements for a batch of {n}", y.len())));
        }
    }
    let (mut online_s, mut dealt) = (0.0, 0usize);
    let mut dealt_input = Vec::new();
    let mut words: Vec<u64> = Vec::new();
    let mut vals: Vec<u64> = Vec::new();
    let mut bits = None;
    let mut use_chunk = |lo: usize, b: TamiBatch| -> Result<()> {
        let t1 = std::time::Instant::now();
        let m = b.n;
        dealt += b.dealt_bytes();
        dealt_input.extend_from_slice(b.dealt_input());
        match online(ch, &b, y.map(|y| &y[lo..lo + m]))? {
            TamiOut::Bits(s) => {
                bits = Some(true);
                words.resize(n.div_ceil(64), 0);
                for i in 0..m {
                    let j = lo + i;
                    words[j / 64] |= (s.get(i) as u64) << (j % 64);
                }
            }
            TamiOut::Arith(a) => {
                bits = Some(false);
                vals.extend_from_slice(&a.v);
            }
        }
        drop(b);
        online_s += t1.elapsed().as_secs_f64();
        Ok(())
    };
    let deal_s = if !overlap {
        let mut deal_s = 0.0;
        for lo in (0..n).step_by(chunk) {
            let t = std::time::Instant::now();
            let b = deal(dealer, party, chunk.min(n - lo), shape)?;
            deal_s += t.elapsed().as_secs_f64();
            use_chunk(lo, b)?;
        }
        deal_s
    } else {
        // The module deals chunk k + 1 on its own thread while the host
        // runs chunk k's flights; at most one dealt chunk waits.
        std::thread::scope(|sc| -> Result<f64> {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Result<TamiBatch>>(1);
            let producer = sc.spawn(move || {
                let mut deal_s = 0.0;
                for lo in (0..n).step_by(chunk) {
                    let t = std::time::Instant::now();
                    let b = deal(dealer, party, chunk.min(n - lo), shape);
                    deal_s += t.elapsed().as_secs_f64();
                    let stop = b.is_err();
                    if tx.send(b).is_err() || stop {
                        break;
                    }
                }
                deal_s
            });
            let mut res = Ok(());
            for lo in (0..n).step_by(chunk) {
                match rx.recv() {
                    Ok(Ok(b)) => {
                        if let Err(e) = use_chunk(lo, b) {
                            res = Err(e);
                            break;
                        }
                    }
                    Ok(Err(e)) => {
                        res = Err(e);
                        break;
                    }
                    Err(_) => {
                        res = Err(invalid("streamed TAMI: the dealing thread stopped"));
                        break;
                    }
                }
            }
            // Unblock the producer (a send to a dropped receiver fails).
            drop(rx);
            let deal_s = producer.join().map_err(|_| invalid("streamed TAMI: the dealing thread panicked"))?;
            res.map(|()| deal_s)
        })?
    };
    let out = if bits == Some(true) {
        TamiOut::Bits(BoolShare::new(n, words))
    } else {
        TamiOut::Arith(ArithShare::new(Ring::new(shape.bits).expect("validated"), vals))
    };
    Ok(Streamed { out, dealt_input, deal_s, online_s, dealt })
}
