//! TAMI-MPC millionaires' correlations (Li et al., "TAMI-MPC", §3).
//!
//! Setting (VISION.md "TAMI-MPC millionaires'"): party 1 ("B", the
//! x-holder) holds an input-independent value dealt here — the comparison
//! input x itself, or the mask m of a masked activation x = y + m — and
//! party 0 ("A", the y-holder) holds the online value y. The comparison is
//! gt = 1{y' > x'} on L-bit values split into chunks of k bits.
//!
//! **Leaf (F_Comp, §3.1): a one-time-padded table, no first round.** Per
//! comparison and chunk j the dealer draws the mask τ_j, the merge masks
//! r = (r_gt,j, r_eq,j) and a uniform pad S_j (one bit per table position:
//! 2^k gt positions, and 2^k eq positions where the merge uses eq_j). It
//! gives A (τ, S) and B the padded table T_j ⊕ S_j, where
//! T_j\[u\] = (gt(u ⊕ τ_j, x'_j), eq(u ⊕ τ_j, x'_j)) ⊕ r. Online A sends
//! ŷ = y' ⊕ τ and its pad bits S_j\[ŷ_j\] in one flight; B reads
//! d = (T ⊕ S)_j\[ŷ_j\] ⊕ S_j\[ŷ_j\] = leaf(y'_j, x'_j) ⊕ r — exactly one
//! entry of T per chunk and output bit — and sends d (the merge opening).
//!
//! This replaces the first leaf, in which B held the unpadded T_j: with
//! x'_j known, the eq half (one-hot at x'_j ⊕ τ_j or its complement) and
//! the gt half gave B τ_j, hence y = ŷ ⊕ τ (`tests/tami_view.rs` in
//! hush-2pc recovered τ for every chunk that carries an eq leaf). VISION.md
//! describes a second safe leaf — A sends all 2^k entries
//! m_i = leaf(y_j, i) ⊕ V\[i\] of a dealt table V and B gets V\[x_j\] — which
//! needs no ŷ but costs A 2^k bits per chunk and output bit (255 bits per
//! 32-bit comparison at k = 4: 240 table bits plus the 15-bit opening). The
//! padded table gives the same one A-flight + one opening with
//! nk + 2(2n − 1) bits (62 at ℓ = 32, k = 4; 58 at k = 5); the price
//! against the paper's nk + (n − 1)-style count is that A's share of each
//! opened leaf bit (its pad bit) depends on ŷ and travels, one bit per
//! opened leaf bit, in the same flight as ŷ — no extra round.
//!
//! **Merge (F_PolyMult, §3.2, eqs. 1-3).** gt = ⊕_i gt_i ∏_{j>i} eq_j. With
//! d_t = v_t ⊕ r_t public, every monomial ∏_{t∈M} v_t equals
//! ⊕_{U⊆M} (∏_{t∈M∖U} d_t)·(∏_{t∈U} r_t), so each party finishes locally from
//! XOR-shares of the subset products ∏_U r_t. **Opt#1**: the level-0 masks r
//! are inside B's table, so no mask share is exchanged: A's pad bits ride
//! on its leaf flight and B's flight is the opening d itself (one opened
//! bit per merge input, one direction). **Opt#2 (eqs.
//! 4-7):** a subset product is dealt once per distinct subset U, however
//! many monomials contain it ([`Level::subsets`]). The number of subsets
//! grows as 2^{arity}, so chunks are merged `arity` at a time; each further
//! level is one more (simultaneous) opening with XOR-shared masks r'.
//!
//! **Post-processing.** ReLU and truncation need the comparison bit b in
//! arithmetic form. The dealer adds a bit ρ (XOR-shared and
//! arithmetically shared), and the parties open e = b ⊕ ρ, so b = e + (1 −
//! 2e)·ρ. For ReLU (z = b·x, x = y + m) the dealer also gives A a uniform
//! ring mask s and shares ρ·(s + m); A sends y − s (ℓ bits) in its leaf
//! flight, so ρ·x = (y − s)·ρ + ρ·(s + m) is linear in dealt shares with a
//! public coefficient and z = e·x + (1 − 2e)·ρx needs no further opening.
//!
//! *Deviation (hush's, not the paper's).* Until 2026-11 hush dealt, per
//! ReLU, shares of ρ·τ_i for each of the ℓ bits of τ and used ŷ = y ⊕ τ as
//! the public coefficient (ρy = ŷρ + Σ_i 2^i (1 − 2ŷ_i)ρτ_i): no extra
//! online bits, but ℓ dealt ring elements per ReLU and party — 2×296 bytes
//! at ℓ = 37, most of what a dealer sent. The mask s costs one dealt word
//! for A, ℓ − 1 more online bits (ŷ now covers only the ℓ − 1 compared
//! bits) and no extra flight. Why it is safe: y − s is a one-time pad of y
//! under s, which only A's release contains (B's release holds ρ·(s + m)
//! only minus an independent uniform stream), so to B it is a uniform value
//! independent of ŷ (masked by the independent τ) and of everything else
//! it sees. `tests/tami_view.rs` tries every array of B's release as s.
//!
//! ## Seeded: party 1's share is its sub-key's streams
//!
//! Party 1's whole share is PRG streams under its sub-key
//! ([`hush_deal::sub_key`], [`deal_party1`]): its input m, its padded
//! tables U (uniform on the table positions), its subset-product and mask
//! shares, ρ_B, and its arithmetic shares of ρ and ρ·(s + m). Party 0's is
//! computed against them: the pads S = U ⊕ T, subset products ∏_U r ⊕ (B's
//! share), ρ − (B's share), ρ·(s + m) − (B's share). Both distributions
//! equal the unseeded dealing's (U = T ⊕ S is uniform and independent of T
//! exactly when S is). A dealer service therefore sends the client 16 bytes
//! per batch, and in tee mode the client's module only runs PRG streams —
//! the table work is on the server's side. Party 0's own uniform values
//! (τ, s, ρ_A, its level ≥ 1 mask shares) are likewise streams under *its*
//! sub-key, and its share crosses as that key plus the corrections that
//! depend on B's values (pads, subset-product shares, ρ and ρ(s + m)
//! shares): ~14 % fewer bytes on the server's link at ℓ = 37. Both
//! sub-keys are derived under their own nonces from the batch key; r (the
//! level-0 merge masks) stays under the batch key, the dealer's alone.
//!
//! ## What each host receives from its module, and why it is safe
//!
//! Every value below is fresh per comparison and per batch (the module
//! refuses to deal a batch number twice, see the providers).
//! * **A (party 0)**: τ (uniform), the mask s (uniform), the pads
//!   S = U ⊕ T (uniform: U is B's uniform stream, independent of T), its
//!   subset-product shares ∏_U r ⊕ (B's stream), its level ≥ 1 mask shares
//!   (its own stream), ρ_A (stream), and ρ − (B's stream), ρ(s + m) − (B's
//!   stream). Each value is a fixed function XOR (or minus) an independent
//!   uniform stream that only B's release contains, or a fresh stream: A's
//!   release is independent uniform values, and reveals nothing about m,
//!   r or ρ.
//! * **B (party 1)**: its sub-key, i.e. its dealt input m (its own input)
//!   and the independent uniform streams listed above. Nothing of τ, s, r
//!   or ρ enters it. B can unpad a table entry only with the pad bit A sends
//!   for it, i.e. one entry per chunk and output bit.

use hush_deal::wire::{Reader, Writer};
use hush_deal::{ring_mask, stream, Blob, BlobReader, DealRequest, Description, Error, Result};
use hush_primitives::Block;
use std::collections::BTreeMap;
use zeroize::Zeroize;

mod wire;

/// What the comparison feeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// gt = 1{y > x}, x dealt to B (ℓ-bit unsigned).
    Millionaire,
    /// DReLU(y + m) = 1{y + m ≥ 0} (signed ℓ-bit), m dealt to B.
    Drelu,
    /// ReLU(y + m), arithmetic output.
    Relu,
    /// ⌊(y + m) / 2^f⌋ (signed), arithmetic output, error ≤ 1 ulp.
    Trunc { f: u32 },
}

/// Parameters of a TAMI batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TamiShape {
    /// Ring width ℓ.
    pub bits: u32,
    /// Chunk width k (1..=5).
    pub k: u32,
    /// Merge arity: chunks collapsed per one-round merge (2..=8).
    pub arity: u32,
    pub flavor: Flavor,
    /// DReLU/ReLU only: the signed width w of the compared value, 0 for the
    /// whole ring (w = ℓ). With 2 ≤ w < ℓ the sign is read from x mod 2^w —
    /// exact for every x with |x| < 2^{w−1} (the reduction Z_2^ℓ → Z_2^w is a
    /// ring homomorphism, so the shares reduce locally and y + m mod 2^w is
    /// x mod 2^w) — while everything arithmetic (y − s, ρ, ρ·(s + m), the
    /// output b·x) stays in Z_2^ℓ. Only w − 1 bits are compared: fewer chunks,
    /// fewer opened bits, one merge level sooner. Outside |x| < 2^{w−1} the
    /// bit is the sign of the reduced value (ReLU returns 0 or x: wrong,
    /// never larger than |x|); callers use it only for values they have
    /// bounded (`crate::transformer::Ctx::relu_within`).
    pub low: u32,
}

impl TamiShape {
    pub fn new(bits: u32, k: u32, arity: u32, flavor: Flavor) -> Self {
        TamiShape { bits, k, arity, flavor, low: 0 }
    }

    /// The same shape comparing only the low `w` bits (DReLU/ReLU; see
    /// [`TamiShape::low`]); `w ≥ ℓ` is the whole ring.
    pub fn with_width(mut self, w: u32) -> Self {
        self.low = if w >= self.bits { 0 } else { w };
        self
    }

    /// The signed width whose sign DReLU/ReLU read (ℓ unless reduced).
    pub fn width(&self) -> u32 {
        if self.low == 0 {
            self.bits
        } else {
            self.low
        }
    }

    pub fn validate(&self) -> std::result::Result<(), String> {
        let min_bits = if self.flavor == Flavor::Millionaire { 1 } else { 2 };
        if !(min_bits..=64).contains(&self.bits) {
            return Err(format!("ring width {} out of range {min_bits}..=64", self.bits));
        }
        if !(1..=5).contains(&self.k) {
            return Err(format!("chunk width k = {} out of range 1..=5", self.k));
        }
        if !(2..=8).contains(&self.arity) {
            return Err(format!("merge arity {} out of range 2..=8", self.arity));
        }
        if let Flavor::Trunc { f } = self.flavor {
            if f == 0 || f >= self.bits {
                return Err(format!("truncation by {f} bits out of range 1..{}", self.bits));
            }
        }
        if self.low != 0 && (!matches!(self.flavor, Flavor::Drelu | Flavor::Relu) || !(2..self.bits).contains(&self.low)) {
            return Err(format!("a compared width of {} bits needs DReLU/ReLU and 2 ≤ w < ℓ = {}", self.low, self.bits));
        }
        if self.chunks().len() > 64 {
            return Err("more than 64 chunks".into());
        }
        Ok(())
    }

    /// Width L of the compared values.
    pub fn cmp_bits(&self) -> u32 {
        match self.flavor {
            Flavor::Millionaire | Flavor::Trunc { .. } => self.bits,
            Flavor::Drelu | Flavor::Relu => self.width() - 1,
        }
    }

    /// Bits of ŷ that A sends (ReLU also sends y − s, ℓ bits, see
    /// [`crate::tami`]).
    pub fn sent_bits(&self) -> u32 {
        self.cmp_bits()
    }

    /// (lowest bit, width) of each chunk, least significant first.
    ///
    /// ⌈L/k⌉ chunks of balanced widths (⌊L/c⌋ or one more, the wider ones
    /// at the top): the same number of chunks, opened bits and subset
    /// products as k-wide chunks with a short top chunk, and smaller tables
    /// (a chunk's table has 2^width entries, and the lowest chunk's eq half
    /// is never used): at L = 36, k = 5 the chunk tables carry 368 bits
    /// per comparison instead of 420.
    pub fn chunks(&self) -> Vec<(u32, u32)> {
        let l = self.cmp_bits();
        let c = l.div_ceil(self.k);
        let (base, wide) = (l / c, l % c);
        let mut lo = 0;
        (0..c)
            .map(|j| {
                let w = base + (j >= c - wide) as u32;
                let r = (lo, w);
                lo += w;
                r
            })
            .collect()
    }

    fn code(&self) -> (u8, u32) {
        match self.flavor {
            Flavor::Millionaire => (0, 0),
            Flavor::Drelu if self.low != 0 => (5, self.low),
            Flavor::Relu if self.low != 0 => (4, self.low),
            Flavor::Drelu => (1, 0),
            Flavor::Relu => (2, 0),
            Flavor::Trunc { f } => (3, f),
        }
    }

    pub fn encode(&self, w: &mut Writer) {
        let (c, f) = self.code();
        w.u32(self.bits).u32(self.k).u32(self.arity).u8(c).u32(f);
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<Self> {
        let (bits, k, arity, c, f) = (r.u32()?, r.u32()?, r.u32()?, r.u8()?, r.u32()?);
        let flavor = match c {
            0 => Flavor::Millionaire,
            1 => Flavor::Drelu,
            2 => Flavor::Relu,
            3 => Flavor::Trunc { f },
            4 => Flavor::Relu,
            5 => Flavor::Drelu,
            _ => return Err(Error::Malformed(format!("TAMI flavor {c}"))),
        };
        let low = if c >= 4 { f } else { 0 };
        if c >= 4 && !(2..bits).contains(&low) {
            return Err(Error::Malformed(format!("TAMI compared width {low} in a {bits}-bit ring")));
        }
        Ok(TamiShape { bits, k, arity, flavor, low })
    }

    pub fn label(&self) -> String {
        let (c, f) = self.code();
        format!("{}/{}/{}/{c}/{f}", self.bits, self.k, self.arity)
    }

    /// Whether the flavor needs the e = b ⊕ ρ opening.
    pub fn has_post(&self) -> bool {
        matches!(self.flavor, Flavor::Relu | Flavor::Trunc { .. })
    }

    /// The merge plan (identical at the dealer and both hosts). A plan
    /// depends only on (leaves, arity) and is public; the few in use are
    /// built once per process and cloned (building one sorts every subset
    /// of every monomial, which showed in profiles of streamed dealing).
    pub fn plan(&self) -> Plan {
        use std::collections::HashMap;
        use std::sync::{Mutex, OnceLock};
        static PLANS: OnceLock<Mutex<HashMap<(usize, usize), Plan>>> = OnceLock::new();
        let key = (self.chunks().len(), self.arity as usize);
        let cache = PLANS.get_or_init(|| Mutex::new(HashMap::new()));
        if let Some(p) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return p.clone();
        }
        let p = Plan::new(key.0, key.1);
        // Bounded: only validated shapes' keys (≤ 64 leaves, arity 2..=8).
        if key.0 <= 64 && (2..=8).contains(&key.1) {
            cache.lock().unwrap_or_else(|e| e.into_inner()).insert(key, p.clone());
        }
        p
    }
}

/// A monomial ∏_{t ∈ vars} v_t and, for each compressed submask c of its
/// variables (bit i of c ↔ vars\[i\]), the position of the dealt subset
/// product (`NONE` for the empty set).
#[derive(Clone, Debug)]
pub struct Mono {
    pub vars: Vec<u32>,
    pub pos: Vec<u32>,
}

pub const NONE: u32 = u32::MAX;

/// One output bit of a level: the XOR of its monomials (they are mutually
/// exclusive as in CrypTFlow2's merge, so XOR = OR).
#[derive(Clone, Debug)]
pub struct Output {
    pub monos: Vec<Mono>,
}

/// One merge level: opened inputs, dealt subsets, outputs.
#[derive(Clone, Debug)]
pub struct Level {
    /// (node, is_eq) of the previous level, in opening order.
    pub inputs: Vec<(u32, bool)>,
    /// Distinct nonempty subsets of inputs (bit t ↔ inputs\[t\]) — Opt#2.
    pub subsets: Vec<u128>,
    /// Per output node: gt output, and eq output if the next level needs it.
    pub outputs: Vec<(Output, Option<Output>)>,
}

/// The levels from leaves to the final bit.
#[derive(Clone, Debug)]
pub struct Plan {
    pub leaves: usize,
    pub levels: Vec<Level>,
}

impl Plan {
    pub fn new(leaves: usize, arity: usize) -> Self {
        let mut levels = Vec::new();
        let mut nodes = leaves;
        loop {
            let groups = nodes.div_ceil(arity);
            let last = groups == 1;
            // Which inputs each group's outputs use.
            let mut inputs: Vec<(u32, bool)> = Vec::new();
            let mut index = BTreeMap::new();
            let mut group_monos: Vec<(Vec<Vec<(u32, bool)>>, Option<Vec<(u32, bool)>>)> = Vec::new();
            for g in 0..groups {
                let lo = g * arity;
                let hi = (lo + arity).min(nodes);
                let mut gt = Vec::new();
                for i in lo..hi {
                    let mut m = vec![(i as u32, false)];
                    m.extend((i + 1..hi).map(|j| (j as u32, true)));
                    gt.push(m);
                }
                let eq = (!last).then(|| (lo..hi).map(|j| (j as u32, true)).collect::<Vec<_>>());
                for i in lo..hi {
                    for key in [(i as u32, false), (i as u32, true)] {
                        let used = gt.iter().any(|m| m.contains(&key)) || eq.as_ref().is_some_and(|e| e.contains(&key));
                        if used {
                            index.insert(key, inputs.len() as u32);
                            inputs.push(key);
                        }
                    }
                }
                group_monos.push((gt, eq));
            }
            let mut subset_set = BTreeMap::new();
            let to_vars = |m: &Vec<(u32, bool)>| m.iter().map(|k| index[k]).collect::<Vec<u32>>();
            for (gt, eq) in &group_monos {
                for m in gt.iter().chain(eq.iter()) {
                    let vars = to_vars(m);
                    for c in 1u32..(1u32 << vars.len()) {
                        subset_set.insert(expand(&vars, c), ());
                    }
                }
            }
            let subsets: Vec<u128> = subset_set.keys().copied().collect();
            let pos_of: BTreeMap<u128, u32> = subsets.iter().enumerate().map(|(i, &s)| (s, i as u32)).collect();
            let mk = |m: &Vec<(u32, bool)>| {
                let vars = to_vars(m);
                let pos = (0u32..(1u32 << vars.len())).map(|c| if c == 0 { NONE } else { pos_of[&expand(&vars, c)] }).collect();
                Mono { vars, pos }
            };
            let outputs = group_monos
                .iter()
                .map(|(gt, eq)| (Output { monos: gt.iter().map(mk).collect() }, eq.as_ref().map(|e| Output { monos: vec![mk(e)] })))
                .collect();
            levels.push(Level { inputs, subsets, outputs });
            if last {
                break;
            }
            nodes = groups;
        }
        Plan { leaves, levels }
    }

    /// Dealt subset-product bits per comparison (each party holds one share bit per subset).
    pub fn subset_bits(&self) -> usize {
        self.levels.iter().map(|l| l.subsets.len()).sum()
    }
    /// Opened bits per comparison, level by level.
    pub fn opened_bits(&self) -> Vec<usize> {
        self.levels.iter().map(|l| l.inputs.len()).collect()
    }
}

fn expand(vars: &[u32], c: u32) -> u128 {
    let mut s = 0u128;
    for (i, &v) in vars.iter().enumerate() {
        if (c >> i) & 1 == 1 {
            s |= 1u128 << v;
        }
    }
    s
}

/// Evaluates one level for one word of 64 comparisons: `d` are the opened
/// bits (per input), `sub` this party's subset-product shares; writes the
/// output shares (gt, eq) per node into `out`.
pub fn eval_level_word(level: &Level, party: u8, d: &[u64], sub: &[u64], out: &mut Vec<(u64, u64)>, scratch: &mut Vec<u64>) {
    out.clear();
    let one = if party == 0 { u64::MAX } else { 0 };
    let eval = |o: &Output, scratch: &mut Vec<u64>| -> u64 {
        let mut acc = 0u64;
        for m in &o.monos {
            let n = m.vars.len();
            let full = (1usize << n) - 1;
            // Every entry 1..=full is written before it is read.
            if scratch.len() < 1 << n {
                scratch.resize(1 << n, 0);
            }
            scratch[0] = u64::MAX;
            for c in 1..=full {
                let low = c.trailing_zeros() as usize;
                scratch[c] = scratch[c & (c - 1)] & d[m.vars[low] as usize];
            }
            // c = subset U of r's; the complement carries the public d's.
            acc ^= scratch[full] & one;
            for c in 1..=full {
                acc ^= scratch[full ^ c] & sub[m.pos[c] as usize];
            }
        }
        acc
    };
    for (gt, eq) in &level.outputs {
        let g = eval(gt, scratch);
        let e = eq.as_ref().map(|e| eval(e, scratch)).unwrap_or(0);
        out.push((g, e));
    }
}

/// One party's share of a TAMI batch. Fields a party does not hold are empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TamiShare {
    /// A: the leaf mask τ (n values).
    pub tau: Vec<u64>,
    /// B: its dealt input (x for the millionaires', else the mask m).
    pub input: Vec<u64>,
    /// B: padded leaf tables T ⊕ S, `n × chunks` words (gt bits at 0..,
    /// eq bits at 32..).
    pub tables: Vec<u64>,
    /// A: the table pads S, same layout as `tables`.
    pub pad: Vec<u64>,
    /// Per level: subset-product shares, layout \[word\]\[subset\].
    pub subsets: Vec<Vec<u64>>,
    /// Per level ≥ 1: this party's XOR share of the opening masks r', \[word\]\[input\].
    pub masks: Vec<Vec<u64>>,
    /// Post: XOR share of ρ (one bit per element, packed).
    pub rho_bits: Vec<u64>,
    /// Post: arithmetic share of ρ.
    pub rho: Vec<u64>,
    /// ReLU: arithmetic share of ρ·(s + m).
    pub rho_x: Vec<u64>,
    /// ReLU, A only: the additive mask s of the opened y − s.
    pub smask: Vec<u64>,
    /// A only: its sub-key, from which τ, s, ρ_A and its level ≥ 1 mask
    /// shares are expanded (they cross as this key, see [`TamiShare::to_bytes`]).
    pub seed: Option<Block>,
}

impl Drop for TamiShare {
    fn drop(&mut self) {
        use hush_primitives::wipe::wipe_vec_u64 as wipe;
        wipe(&mut self.tau);
        wipe(&mut self.input);
        wipe(&mut self.tables);
        wipe(&mut self.pad);
        self.subsets.iter_mut().for_each(wipe);
        self.masks.iter_mut().for_each(wipe);
        wipe(&mut self.rho_bits);
        wipe(&mut self.rho);
        wipe(&mut self.rho_x);
        wipe(&mut self.smask);
        if let Some(k) = self.seed.as_mut() {
            k.0.zeroize();
        }
    }
}

/// Expected array lengths for (party, n, shape), in serialisation order.
fn layout(party: u8, n: usize, shape: &TamiShape, plan: &Plan) -> Vec<usize> {
    let w = n.div_ceil(64);
    let a = party == 0;
    let c = plan.leaves;
    let mut v = vec![if a { n } else { 0 }, if a { 0 } else { n }, if a { 0 } else { n * c }, if a { n * c } else { 0 }];
    for l in &plan.levels {
        v.push(w * l.subsets.len());
    }
    for l in plan.levels.iter().skip(1) {
        v.push(w * l.inputs.len());
    }
    let post = shape.has_post();
    let relu = shape.flavor == Flavor::Relu;
    v.push(if post { w } else { 0 });
    v.push(if post { n } else { 0 });
    v.push(if relu { n } else { 0 });
    v.push(if relu && a { n } else { 0 });
    v
}

/// Bit widths of each chunk word's used positions: (gt half, eq half) —
/// 2^width each, eq 0 where the merge does not use eq_j.
fn table_segments(shape: &TamiShape, plan: &Plan) -> Vec<(u32, u32)> {
    let in_idx = leaf_inputs(plan);
    shape.chunks().iter().enumerate().map(|(j, &(_, w))| (1u32 << w, if in_idx[j][1] == usize::MAX { 0 } else { 1u32 << w })).collect()
}

/// Bytes of one table half of 2^width positions on the wire.
fn seg_bytes(bits: u32) -> usize {
    bits.div_ceil(8) as usize
}

/// Writes table words (`n × chunks`, gt bits at 0.., eq bits at 32..) with
/// only their used halves, each half in ⌈2^width / 8⌉ bytes (count word
/// first).
fn put_tables(b: &mut Blob, words: &[u64], seg: &[(u32, u32)]) {
    b.0.extend_from_slice(&(words.len() as u64).to_le_bytes());
    let widths: Vec<(usize, usize)> = seg.iter().map(|&(g, e)| (seg_bytes(g), seg_bytes(e))).collect();
    let per: usize = widths.iter().map(|w| w.0 + w.1).sum();
    let rows = if seg.is_empty() { 0 } else { words.len() / seg.len() };
    let start = b.0.len();
    let total = per * rows;
    // Every half is stored as a whole little-endian u32 at its position and
    // the position advanced by the half's width: the bytes past the width
    // are overwritten by the next half (or land in the 4 bytes of slack,
    // cut off below) — the same bytes as copying each half's width, without
    // a variable-length copy per half.
    b.0.resize(start + total + 4, 0);
    let out = &mut b.0[start..];
    let mut pos = 0usize;
    for row in words.chunks_exact(seg.len().max(1)).take(rows) {
        for (&t, &(gb, eb)) in row.iter().zip(&widths) {
            out[pos..pos + 4].copy_from_slice(&(t as u32).to_le_bytes());
            pos += gb;
            out[pos..pos + 4].copy_from_slice(&((t >> 32) as u32).to_le_bytes());
            pos += eb;
        }
    }
    b.0.truncate(start + total);
}

/// Reads what [`put_tables`] wrote: exactly `expect` words; a bit outside
/// a half's 2^width positions is an error.
fn take_tables(r: &mut BlobReader<'_>, expect: usize, seg: &[(u32, u32)]) -> Result<Vec<u64>> {
    let per: usize = seg.iter().map(|&(g, e)| seg_bytes(g) + seg_bytes(e)).sum();
    let rows = if seg.is_empty() { 0 } else { expect / seg.len() };
    let bytes = r.take_bytes(expect, rows * per)?;
    let mut out = vec![0u64; rows * seg.len()];
    hush_deal::populate(&mut out);
    let mut bad = 0u64;
    #[inline(always)]
    fn half(b: &[u8]) -> u64 {
        match b.len() {
            4 => u32::from_le_bytes(b.try_into().expect("4 bytes")) as u64,
            2 => u16::from_le_bytes(b.try_into().expect("2 bytes")) as u64,
            1 => b[0] as u64,
            _ => 0,
        }
    }
    let widths: Vec<(usize, usize, u32, u32)> = seg.iter().map(|&(g, e)| (seg_bytes(g), seg_bytes(e), g.min(63), e.min(63))).collect();
    // Rows in parallel parts (the host's half of a dealing; its fresh
    // pages first touched on every core).
    let nc = seg.len().max(1);
    let halves: Vec<(usize, usize)> = widths.iter().map(|&(gb, eb, _, _)| (gb, eb)).collect();
    let low = |b: u32| if b >= 32 { 0xffff_ffffu64 } else { (1u64 << b) - 1 };
    let allowed: Vec<u64> = widths.iter().map(|&(_, _, g, e)| low(g) | (low(e) << 32)).collect();
    let part = |(o, b): (&mut [u64], &[u8])| -> u64 {
        // VBMI2: one expanding load per eight chunk words (issue 35: this
        // loop was most of the host's decode of a 64-bit TAMI share).
        if let Some(bad) = wire::unpack_rows(o, b, &halves, &allowed, per) {
            return bad;
        }
        let mut bad = 0u64;
        for (orow, row) in o.chunks_exact_mut(nc).zip(b.chunks_exact(per.max(1))) {
            let mut pos = 0usize;
            for (x, &(gb, eb, g, e)) in orow.iter_mut().zip(&widths) {
                let gt = half(&row[pos..pos + gb]);
                let eq = half(&row[pos + gb..pos + gb + eb]);
                pos += gb + eb;
                bad |= (gt >> g) | (eq >> e);
                *x = gt | (eq << 32);
            }
        }
        bad
    };
    const ROWS: usize = 4096;
    if rows > 0 && per > 0 {
        use rayon::prelude::*;
        bad = out.par_chunks_mut(ROWS * nc).zip(bytes.par_chunks(ROWS * per)).map(part).reduce(|| 0, |a, b| a | b);
    }
    if bad != 0 {
        return Err(Error::Malformed("TAMI tables: a bit outside the table positions".into()));
    }
    Ok(out)
}

impl TamiShare {
    /// The byte form. Party 0 (A): its sub-key (τ, s, ρ_A and its level ≥ 1
    /// mask shares are expanded from it), then its corrections — pads,
    /// subset-product shares, ρ and ρ(s + m) shares. Party 1 (B): every
    /// array. Ring values at ⌈bits/8⌉ bytes, tables as their used halves,
    /// bit words as words.
    pub fn to_bytes(&self, shape: &TamiShape) -> Vec<u8> {
        let l = shape.bits;
        let seg = table_segments(shape, &shape.plan());
        // + 4: put_tables writes whole u32 halves into 4 bytes of slack.
        let mut b = Blob::with_capacity(self.wire_len(shape, &seg) + 4);
        if let Some(k) = self.seed {
            b.put(&[k.0 as u64, (k.0 >> 64) as u64]);
            put_tables(&mut b, &self.pad, &seg);
            for s in &self.subsets {
                b.put(s);
            }
            b.put_ring(&self.rho, l).put_ring(&self.rho_x, l);
            debug_assert_eq!(b.0.len(), self.wire_len(shape, &seg));
            return std::mem::take(&mut b.0);
        }
        b.put_ring(&self.input, l);
        put_tables(&mut b, &self.tables, &seg);
        for s in &self.subsets {
            b.put(s);
        }
        for m in self.masks.iter().skip(1) {
            b.put(m);
        }
        b.put(&self.rho_bits).put_ring(&self.rho, l).put_ring(&self.rho_x, l);
        debug_assert_eq!(b.0.len(), self.wire_len(shape, &seg));
        std::mem::take(&mut b.0)
    }

    /// The exact length of [`TamiShare::to_bytes`] (written without
    /// regrowth).
    fn wire_len(&self, shape: &TamiShape, seg: &[(u32, u32)]) -> usize {
        let rb = shape.bits.div_ceil(8) as usize;
        let ring = |v: &[u64]| 8 + v.len() * rb;
        let words = |v: &[u64]| 8 + 8 * v.len();
        let per: usize = seg.iter().map(|&(g, e)| seg_bytes(g) + seg_bytes(e)).sum();
        let tables = |v: &[u64]| 8 + if seg.is_empty() { 0 } else { v.len() / seg.len() * per };
        let subsets: usize = self.subsets.iter().map(|s| words(s)).sum();
        if self.seed.is_some() {
            return words(&[0, 0]) + tables(&self.pad) + subsets + ring(&self.rho) + ring(&self.rho_x);
        }
        let masks: usize = self.masks.iter().skip(1).map(|m| words(m)).sum();
        ring(&self.input) + tables(&self.tables) + subsets + masks + words(&self.rho_bits) + ring(&self.rho) + ring(&self.rho_x)
    }

    pub fn from_bytes(buf: &[u8], party: u8, n: usize, shape: &TamiShape, plan: &Plan) -> Result<Self> {
        let l = shape.bits;
        let lens = layout(party, n, shape, plan);
        let seg = table_segments(shape, plan);
        let mut r = BlobReader::new(buf);
        let post = shape.has_post();
        let relu = shape.flavor == Flavor::Relu;
        if party == 0 {
            let mut k = r.take(2)?;
            let sub0 = Block((k[0] as u128) | ((k[1] as u128) << 64));
            k.zeroize();
            let mut s = party0_streams(sub0, n, shape, plan);
            s.pad = take_tables(&mut r, lens[3], &seg)?;
            for (i, _) in plan.levels.iter().enumerate() {
                s.subsets.push(r.take(lens[4 + i])?);
            }
            s.rho = r.take_ring(if post { n } else { 0 }, l)?;
            s.rho_x = r.take_ring(if relu { n } else { 0 }, l)?;
            r.finish()?;
            return Ok(s);
        }
        let mut it = lens.into_iter().skip(1);
        let mut next = || it.next().expect("layout covers every field");
        let mut s = TamiShare::default();
        s.input = r.take_ring(next(), l)?;
        s.tables = take_tables(&mut r, next(), &seg)?;
        let _pad = next();
        for _ in &plan.levels {
            s.subsets.push(r.take(next())?);
        }
        s.masks.push(Vec::new());
        for _ in plan.levels.iter().skip(1) {
            s.masks.push(r.take(next())?);
        }
        s.rho_bits = r.take(next())?;
        s.rho = r.take_ring(next(), l)?;
        s.rho_x = r.take_ring(next(), l)?;
        r.finish()?;
        Ok(s)
    }

    /// Bytes this share occupies in memory (u64 words).
    pub fn dealt_bytes(&self) -> usize {
        8 * (self.tau.len()
            + self.input.len()
            + self.tables.len()
            + self.pad.len()
            + self.subsets.iter().map(Vec::len).sum::<usize>()
            + self.masks.iter().map(Vec::len).sum::<usize>()
            + self.rho_bits.len()
            + self.rho.len()
            + self.rho_x.len()
            + self.smask.len())
    }
}

/// Information-theoretic size of each party's dealt share per comparison,
/// in bits (what a packed encoding needs): (party 0, party 1), counting
/// what a party cannot expand from its sub-key (128 bits per batch more):
/// party 0's corrections (pads, subset-product shares, ρ and ρ(s + m)
/// shares); party 1's whole share is seeded, so a dealer that sends its
/// sub-key sends nothing per comparison (the second figure is its size).
pub fn dealt_bits_per_cmp(shape: &TamiShape) -> (usize, usize) {
    let plan = shape.plan();
    let l = shape.bits as usize;
    let sub = plan.subset_bits();
    let masks: usize = plan.levels.iter().skip(1).map(|lv| lv.inputs.len()).sum();
    // Table bits: the gt half of every chunk, the eq half where the merge uses eq_j.
    let mut has_eq = vec![false; plan.leaves];
    for &(node, eq) in &plan.levels[0].inputs {
        has_eq[node as usize] |= eq;
    }
    let tables: usize = shape.chunks().iter().zip(&has_eq).map(|(&(_, w), &e)| (1usize << w) * (1 + e as usize)).sum();
    let (post_a, post_b) = match shape.flavor {
        Flavor::Relu => (2 * l, 1 + 2 * l),
        Flavor::Trunc { .. } => (l, 1 + l),
        _ => (0, 0),
    };
    (tables + sub + post_a, l + tables + sub + masks + post_b)
}

// Stream nonces under the batch key (party 0's and dealer-only values).
const S_TAU: u64 = 1;
const S_R1: u64 = 3;
const S_SMASK: u64 = 5;
const S_MASK_A: u64 = 32;
const S_RHO_A: u64 = 64;
// Stream nonces under party 1's sub-key (its seeded share).
const S_INPUT: u64 = 2;
const S_TABLE: u64 = 4;
const S_SUB_B: u64 = 16;
const S_MASK_B: u64 = 48;
const S_RHO_B: u64 = 65;
const S_RHOSH_B: u64 = 66;
const S_RHOX_B: u64 = 67;

/// Applies the permutation u ↦ u ⊕ t to the positions of the low 2^width bits.
#[inline]
pub fn xor_permute(mut x: u64, t: u32, width: u32) -> u64 {
    const M: [u64; 5] = [0x5555_5555, 0x3333_3333, 0x0f0f_0f0f, 0x00ff_00ff, 0x0000_ffff];
    for b in 0..width {
        if (t >> b) & 1 == 1 {
            let s = 1u32 << b;
            x = ((x & M[b as usize]) << s) | ((x >> s) & M[b as usize]);
        }
    }
    x
}

/// The comparison threshold x' that B's dealt input implies.
pub fn threshold(shape: &TamiShape, input: u64) -> u64 {
    let l = shape.bits;
    match shape.flavor {
        Flavor::Millionaire => input,
        Flavor::Drelu | Flavor::Relu => {
            let low = ring_mask(shape.width() - 1);
            low - (input & low)
        }
        Flavor::Trunc { .. } => !input & ring_mask(l),
    }
}

fn tail_mask(n: usize) -> u64 {
    if n % 64 == 0 {
        u64::MAX
    } else {
        (1u64 << (n % 64)) - 1
    }
}

/// Per chunk: the level-0 input index of its gt and eq leaf bits
/// (`usize::MAX` where the merge does not use the eq bit).
fn leaf_inputs(plan: &Plan) -> Vec<[usize; 2]> {
    let mut in_idx = vec![[usize::MAX; 2]; plan.leaves];
    for (t, &(node, eq)) in plan.levels[0].inputs.iter().enumerate() {
        in_idx[node as usize][eq as usize] = t;
    }
    in_idx
}

/// The table positions a chunk word carries: the gt half always, the eq
/// half where the merge uses eq_j.
fn position_mask(width: u32, has_eq: bool) -> u64 {
    let full = if width == 5 { u32::MAX as u64 } else { (1u64 << (1u32 << width)) - 1 };
    full | if has_eq { full << 32 } else { 0 }
}

/// Party 1's share (B, the client): pure PRG streams under its sub-key
/// `sub` — its dealt input, its (uniform) padded tables, subset-product and
/// mask shares, and its shares of ρ, ρ·(s + m). Seeded (see
/// [`hush_deal::Description::expand`]).
pub fn deal_party1(sub: Block, n: usize, shape: &TamiShape) -> TamiShare {
    let plan = shape.plan();
    let w = n.div_ceil(64);
    let lm = ring_mask(shape.bits);
    let tail = tail_mask(n);
    let chunks = shape.chunks();
    let nc = chunks.len();
    let in_idx = leaf_inputs(&plan);
    let ring = |nonce: u64, len: usize| -> Vec<u64> {
        let mut v = stream(sub, nonce, len);
        v.iter_mut().for_each(|x| *x &= lm);
        v
    };
    let mut s = TamiShare::default();
    s.input = ring(S_INPUT, n);
    s.tables = stream(sub, S_TABLE, n * nc);
    for (q, t) in s.tables.iter_mut().enumerate() {
        let j = q % nc;
        *t &= position_mask(chunks[j].1, in_idx[j][1] != usize::MAX);
    }
    s.subsets = plan.levels.iter().enumerate().map(|(i, lv)| stream(sub, S_SUB_B + i as u64, w * lv.subsets.len())).collect();
    s.masks = level_masks(sub, S_MASK_B, &plan, w);
    if shape.has_post() {
        let mut rb = stream(sub, S_RHO_B, w);
        if let Some(x) = rb.last_mut() {
            *x &= tail;
        }
        s.rho_bits = rb;
        s.rho = ring(S_RHOSH_B, n);
        if shape.flavor == Flavor::Relu {
            s.rho_x = ring(S_RHOX_B, n);
        }
    }
    s
}

/// A party's XOR shares of the level ≥ 1 opening masks (level 0 has none):
/// streams `base + level` under `key`, [word][input].
fn level_masks(key: Block, base: u64, plan: &Plan, w: usize) -> Vec<Vec<u64>> {
    plan.levels
        .iter()
        .enumerate()
        .map(|(i, lv)| if i == 0 { Vec::new() } else { stream(key, base + i as u64, w * lv.inputs.len()) })
        .collect()
}

/// Party 0's own streams under its sub-key `sub0`: τ, the mask s (ReLU),
/// ρ_A, and its level ≥ 1 mask shares — the part of its share that is not a
/// correction, so it crosses as the sub-key (see [`TamiShare::to_bytes`]).
fn party0_streams(sub0: Block, n: usize, shape: &TamiShape, plan: &Plan) -> TamiShare {
    let w = n.div_ceil(64);
    let lm = ring_mask(shape.bits);
    let mut s = TamiShare::default();
    s.seed = Some(sub0);
    // On every core: a host expands these when it decodes its share.
    let stream = hush_deal::stream_par;
    s.tau = stream(sub0, S_TAU, n);
    s.tau.iter_mut().for_each(|t| *t &= ring_mask(shape.sent_bits()));
    s.masks = level_masks(sub0, S_MASK_A, plan, w);
    if shape.has_post() {
        let mut rb = stream(sub0, S_RHO_A, w);
        if let Some(x) = rb.last_mut() {
            *x &= tail_mask(n);
        }
        s.rho_bits = rb;
        if shape.flavor == Flavor::Relu {
            s.smask = stream(sub0, S_SMASK, n);
            s.smask.iter_mut().for_each(|x| *x &= lm);
        }
    }
    s
}

/// The dealer: party `party`'s share of `n` comparisons. Party 1's share is
/// [`deal_party1`] under its sub-key; party 0's own streams are under its
/// sub-key (`party0_streams`) and its corrections computed against both.
pub fn deal(key: Block, party: u8, n: usize, shape: &TamiShape) -> TamiShare {
    deal_roles(key, party, hush_deal::sub_key(key, 0), hush_deal::sub_key(key, 1), n, shape)
}

/// [`deal`] with the roles exchanged between the hosts
/// ([`TamiTablesSwapped`]): host `host`'s share is the share of role
/// 1 − host — host 0 is B (its share [`deal_party1`] under its own
/// sub-key `sub_key(key, 0)`), host 1 is A (own streams under
/// `sub_key(key, 1)`, corrections against B's). The same construction and
/// distribution with the hosts renamed.
pub fn deal_swapped(key: Block, host: u8, n: usize, shape: &TamiShape) -> TamiShare {
    deal_roles(key, 1 - host, hush_deal::sub_key(key, 1), hush_deal::sub_key(key, 0), n, shape)
}

/// [`deal`]`(…).to_bytes(shape)`, built in place in the wire layout on
/// every core (the same bytes; see `wire`): what the providers serve.
pub fn deal_bytes(key: Block, party: u8, n: usize, shape: &TamiShape) -> Vec<u8> {
    wire::roles_bytes(key, party, hush_deal::sub_key(key, 0), hush_deal::sub_key(key, 1), n, shape)
}

/// [`deal_swapped`]`(…).to_bytes(shape)`, built in place (see [`deal_bytes`]).
pub fn deal_swapped_bytes(key: Block, host: u8, n: usize, shape: &TamiShape) -> Vec<u8> {
    wire::roles_bytes(key, 1 - host, hush_deal::sub_key(key, 1), hush_deal::sub_key(key, 0), n, shape)
}

/// Role `role`'s share (0 = A, 1 = B), A's own streams under `sub_a`, B's
/// whole share under `sub_b`.
fn deal_roles(key: Block, role: u8, sub_a: Block, sub_b: Block, n: usize, shape: &TamiShape) -> TamiShare {
    let b = deal_party1(sub_b, n, shape);
    if role == 1 {
        return b;
    }
    let plan = shape.plan();
    let mut a = party0_streams(sub_a, n, shape, &plan);
    let w = n.div_ceil(64);
    let l = shape.bits;
    let lm = ring_mask(l);
    let tail = tail_mask(n);
    let chunks = shape.chunks();
    let nc = chunks.len();
    let lv0 = &plan.levels[0];
    let t0 = lv0.inputs.len();
    let in_idx = leaf_inputs(&plan);
    let post = shape.has_post();
    let relu = shape.flavor == Flavor::Relu;
    let tau = std::mem::take(&mut a.tau);
    // Level-0 merge masks r: the dealer's alone (inside B's tables and A's
    // subset-product shares, never released as such).
    let r1 = clip_words(stream(key, S_R1, w * t0), t0, tail);
    // A's pads S = U ⊕ T, where U = B's uniform padded tables and
    // T_j[u] = (gt(u ⊕ τ_j, x'_j), eq(u ⊕ τ_j, x'_j)) ⊕ r.
    // Per chunk width, the unmasked leaf word for every (x'_j, τ_j):
    // lut[(x'_j << w) | τ_j] = gt | eq << 32 as a function of u = ŷ_j.
    let mut luts: [Vec<u64>; 6] = Default::default();
    for &(_, width) in &chunks {
        let wi = width as usize;
        if luts[wi].is_empty() {
            let (cm, full) = ((1u64 << width) - 1, if width == 5 { u32::MAX as u64 } else { (1u64 << (1u32 << width)) - 1 });
            luts[wi] = (0..=cm)
                .flat_map(|xj| (0..=cm).map(move |tj| (xj, tj)))
                .map(|(xj, tj)| {
                    let gt = xor_permute(full & !((2u64 << xj) - 1), tj as u32, width);
                    let eq = xor_permute(1u64 << xj, tj as u32, width);
                    gt | (eq << 32)
                })
                .collect();
        }
    }
    let mut pad = vec![0u64; n * nc];
    for i in 0..n {
        let xc = threshold(shape, b.input[i]);
        let (wi, bi) = (i / 64, i % 64);
        let rw = &r1[wi * t0..(wi + 1) * t0];
        for (j, &(lo, width)) in chunks.iter().enumerate() {
            let cm = (1u64 << width) - 1;
            let full = if width == 5 { u32::MAX as u64 } else { (1u64 << (1u32 << width)) - 1 };
            let xj = (xc >> lo) & cm;
            let tj = (tau[i] >> lo) & cm;
            let mut v = luts[width as usize][((xj << width) | tj) as usize];
            v ^= full & 0u64.wrapping_sub((rw[in_idx[j][0]] >> bi) & 1);
            let ie = in_idx[j][1];
            if ie == usize::MAX {
                v &= full;
            } else {
                v ^= (full << 32) & 0u64.wrapping_sub((rw[ie] >> bi) & 1);
            }
            pad[i * nc + j] = v ^ b.tables[i * nc + j];
        }
    }
    // Subset products ∏_U r, level by level, XOR B's shares; level ≥ 1
    // masks r' = A's stream ⊕ B's stream.
    let mut subsets = Vec::with_capacity(plan.levels.len());
    let mut masks = vec![Vec::new()];
    for (li, lv) in plan.levels.iter().enumerate() {
        let ti = lv.inputs.len();
        let r: Vec<u64> = if li == 0 {
            r1.clone()
        } else {
            let ma = std::mem::take(&mut a.masks[li]);
            let r = ma.iter().zip(&b.masks[li]).map(|(a, b)| a ^ b).collect();
            masks.push(ma);
            r
        };
        let ns = lv.subsets.len();
        let mut out = vec![0u64; w * ns];
        for wi in 0..w {
            for (si, &sub) in lv.subsets.iter().enumerate() {
                let mut p = u64::MAX;
                let mut m = sub;
                while m != 0 {
                    let t = m.trailing_zeros() as usize;
                    p &= r[wi * ti + t];
                    m &= m - 1;
                }
                out[wi * ns + si] = p ^ b.subsets[li][wi * ns + si];
            }
        }
        subsets.push(out);
    }
    let mut s = a;
    s.tau = tau;
    s.pad = pad;
    s.subsets = subsets;
    s.masks = masks;
    if post {
        let rho = |i: usize| ((s.rho_bits[i / 64] ^ b.rho_bits[i / 64]) >> (i % 64)) & 1;
        s.rho = (0..n).map(|i| rho(i).wrapping_sub(b.rho[i]) & lm).collect();
        if relu {
            s.rho_x = (0..n).map(|i| rho(i).wrapping_mul(s.smask[i].wrapping_add(b.input[i])).wrapping_sub(b.rho_x[i]) & lm).collect();
        }
    }
    s
}

fn clip_words(mut v: Vec<u64>, per_word: usize, tail: u64) -> Vec<u64> {
    let w = v.len() / per_word.max(1);
    if w > 0 {
        for x in &mut v[(w - 1) * per_word..] {
            *x &= tail;
        }
    }
    v
}

/// The TAMI-MPC comparison dealing kind (see the module docs).
pub struct TamiTables;

/// The one instance providers register.
pub static TAMI_TABLES: TamiTables = TamiTables;

impl TamiTables {
    pub const KIND: &'static str = "2pc/tami";

    /// The request for one comparison batch of `n` elements of `shape`.
    pub fn request(batch: u64, n: u32, shape: &TamiShape) -> DealRequest {
        let mut w = Writer::default();
        shape.encode(&mut w);
        DealRequest::new(Self::KIND, batch, n, w.0)
    }

    fn shape(params: &[u8]) -> Result<TamiShape> {
        let s = hush_deal::parse_params(params, "TAMI parameters", TamiShape::decode)?;
        s.validate().map_err(Error::Refused)?;
        Ok(s)
    }
}

impl Description for TamiTables {
    fn kind(&self) -> &'static str {
        Self::KIND
    }
    fn label(&self, batch: u64, n: u32, params: &[u8]) -> Result<String> {
        Ok(format!("{}/{batch}/{n}/{}", Self::KIND, Self::shape(params)?.label()))
    }
    fn deal(&self, key: Block, party: u8, n: u32, params: &[u8]) -> Result<Vec<u8>> {
        let shape = Self::shape(params)?;
        Ok(deal_bytes(key, party, n as usize, &shape))
    }
    fn seeded_party(&self) -> Option<u8> {
        Some(1)
    }
    fn expand(&self, sub: Block, n: u32, params: &[u8]) -> Result<Vec<u8>> {
        let shape = Self::shape(params)?;
        Ok(wire::party1_bytes(sub, n as usize, &shape))
    }
}

/// The TAMI comparison kind with the hosts' roles exchanged: host 0 holds
/// B's share (the dealt input m, its padded tables — seeded under its
/// sub-key) and host 1 A's. Used where the two hosts alternate roles along
/// a chain of comparisons, so that the host that finishes one comparison
/// first (A, which learns the opened e one flight before B) can send its
/// re-share onto the next comparison's dealt mask in the same flight
/// (`crate::transformer::Ctx::relu_chain`). A distinct kind (its own batch
/// keys, labels and batch counter): a batch dealt under one kind is never
/// dealt under the other. **What each host sees** is what the other host
/// sees in [`TamiTables`] (the same shares under renamed hosts; see the
/// view argument in `crate::tami`).
pub struct TamiTablesSwapped;

/// The one instance providers register.
pub static TAMI_TABLES_SWAPPED: TamiTablesSwapped = TamiTablesSwapped;

impl TamiTablesSwapped {
    pub const KIND: &'static str = "2pc/tami-swapped";

    /// The request for one comparison batch of `n` elements of `shape`.
    pub fn request(batch: u64, n: u32, shape: &TamiShape) -> DealRequest {
        let mut w = Writer::default();
        shape.encode(&mut w);
        DealRequest::new(Self::KIND, batch, n, w.0)
    }
}

impl Description for TamiTablesSwapped {
    fn kind(&self) -> &'static str {
        Self::KIND
    }
    fn label(&self, batch: u64, n: u32, params: &[u8]) -> Result<String> {
        Ok(format!("{}/{batch}/{n}/{}", Self::KIND, TamiTables::shape(params)?.label()))
    }
    fn deal(&self, key: Block, party: u8, n: u32, params: &[u8]) -> Result<Vec<u8>> {
        let shape = TamiTables::shape(params)?;
        Ok(deal_swapped_bytes(key, party, n as usize, &shape))
    }
    fn seeded_party(&self) -> Option<u8> {
        Some(0)
    }
    fn expand(&self, sub: Block, n: u32, params: &[u8]) -> Result<Vec<u8>> {
        let shape = TamiTables::shape(params)?;
        Ok(wire::party1_bytes(sub, n as usize, &shape))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The swapped kind is the plain kind with the hosts renamed: host h's
    /// swapped share is role (1 − h)'s share built from the sub-keys the
    /// other way round, and host 0's equals its seeded expansion.
    #[test]
    fn swapped_kind_is_the_plain_kind_with_hosts_renamed() {
        let key = Block(0x5a7e_d00d);
        let shape = TamiShape::new(64, 5, 4, Flavor::Relu).with_width(28);
        let (k0, k1) = (hush_deal::sub_key(key, 0), hush_deal::sub_key(key, 1));
        let n = 70;
        let h0 = deal_swapped(key, 0, n, &shape).to_bytes(&shape);
        let h1 = deal_swapped(key, 1, n, &shape).to_bytes(&shape);
        assert_eq!(h0, deal_roles(key, 1, k1, k0, n, &shape).to_bytes(&shape));
        assert_eq!(h1, deal_roles(key, 0, k1, k0, n, &shape).to_bytes(&shape));
        assert_eq!(h0, deal_party1(k0, n, &shape).to_bytes(&shape));
        let params = { let mut w = Writer::default(); shape.encode(&mut w); w.0 };
        assert_eq!(TAMI_TABLES_SWAPPED.expand(k0, n as u32, &params).unwrap(), h0);
        assert_eq!(TAMI_TABLES_SWAPPED.deal(key, 1, n as u32, &params).unwrap(), h1);
        // and differs from the plain kind's shares under the same key
        assert_ne!(h0, deal(key, 0, n, &shape).to_bytes(&shape));
        assert_ne!(h0, deal(key, 1, n, &shape).to_bytes(&shape));
    }

    #[test]
    fn wire_len_is_exact() {
        for flavor in [Flavor::Millionaire, Flavor::Drelu, Flavor::Relu, Flavor::Trunc { f: 3 }] {
            for (bits, k, arity) in [(32, 4, 8), (16, 5, 4), (37, 4, 2)] {
                let shape = TamiShape::new(bits, k, arity, flavor);
                let seg = table_segments(&shape, &shape.plan());
                for n in [1usize, 63, 130] {
                    for p in 0..2 {
                        let s = deal(Block(9), p, n, &shape);
                        assert_eq!(s.to_bytes(&shape).len(), s.wire_len(&shape, &seg), "{shape:?} n {n} party {p}");
                    }
                }
            }
        }
    }

    #[test]
    fn plan_counts() {
        // ℓ = 32, k = 4: 8 leaves merged at once: 15 opened bits.
        let s = TamiShape::new(32, 4, 8, Flavor::Millionaire);
        let p = s.plan();
        assert_eq!(p.levels.len(), 1);
        assert_eq!(p.opened_bits(), vec![15]);
        // Distinct subsets: 2^7 - 1 eq-only + Σ_j 2^(7-j) with gt_j = 127 + 255.
        assert_eq!(p.subset_bits(), 382);
        let s = TamiShape::new(64, 4, 8, Flavor::Millionaire);
        assert_eq!(s.plan().levels.len(), 2);
    }

    #[test]
    fn permute_matches_definition() {
        for width in 1..=5u32 {
            for t in 0..(1u32 << width) {
                for bit in 0..(1u32 << width) {
                    let x = 1u64 << bit;
                    assert_eq!(xor_permute(x, t, width), 1u64 << (bit ^ t));
                }
            }
        }
    }
}
