//! IKNP OT extension: Ishai–Kilian–Nissim–Petrank, "Extending Oblivious
//! Transfers Efficiently" (CRYPTO 2003), in the correlated-OT form of
//! Asharov–Lindell–Schneider–Zohner (CCS 2013, §5.3). Semi-honest.
//!
//! Setup: 128 base OTs with the roles swapped — the COT *sender* picks Δ
//! and learns k_j^{Δ_j}; the COT *receiver* learns both k_j^0, k_j^1.
//! Extension of m COTs with receiver choices r (one flight, R → S):
//! * R: t_j = G(k_j^0), u_j = t_j ⊕ G(k_j^1) ⊕ r for j < 128; send u.
//! * S: q_j = G(k_j^{Δ_j}) ⊕ Δ_j·u_j = t_j ⊕ Δ_j·r.
//! Transposing the 128 × m matrices gives row i: q_i = t_i ⊕ r_i·Δ, i.e. the
//! hush convention t_i = q_i ⊕ b_i·Δ with b_i = r_i.
//!
//! Costs: 128 bits per COT from R to S, one round per batch (the tiles of
//! a batch are one flight); setup = base OT (2 rounds, 32·129 bytes).
//!
//! **Streaming, in cache-sized tiles.** A batch is cut into tiles of
//! [`TILE`] COTs (the last one padded to a multiple of 128 columns). Per
//! tile the receiver expands its 2 × 128 PRG rows (counter-mode AES
//! straight into the tile, [`hush_primitives::Prg::fill_bytes`]), forms
//! u, sends it (128 rows of the tile's width, row-major) and transposes
//! t into the caller's buffer; the sender receives that tile, expands its
//! 128 rows, adds Δ_j·u_j and transposes into the caller's buffer. The
//! matrices (128 KiB each) stay in L2 from PRG to transpose, the sender
//! works on tile i while the receiver computes tile i + 1, and nothing is
//! allocated per tile. The transpose is [`hush_primitives::transpose`]'s
//! whole-block 128-row kernel (GFNI at avx512, AVX2 register-pair bit swaps at avx2,
//! portable 8 × 8 swaps otherwise), with non-temporal stores when the
//! caller's buffer is larger than L2. Each PRG stream is consumed in the
//! same order as a row-at-once expansion would, so the output depends only
//! on the seeds, never on the tile size or the SIMD level
//! (`tests/ot.rs`: `iknp_output_is_the_same_at_every_simd_level`).
//! Profile and figures beside emp-ot: `docs/perf-primitives.md`.
//!
//! **What each host sees.** Sender: from the base OTs k_j^{Δ_j} only, and
//! the matrix u with columns u_j = G(k_j^0) ⊕ G(k_j^1) ⊕ r; G(k_j^{1−Δ_j})
//! is pseudorandom to it (it lacks that key), so u_j is uniform whatever the
//! choice bits r are, and every batch draws new output from the PRG streams
//! (never reused). Receiver: both base keys and nothing else (no message
//! to it in an extension), so it learns nothing of Δ beyond what its own
//! COTs t_i = q_i ⊕ r_i·Δ say (nothing: q_i is unknown to it). Test:
//! `tests/views.rs` (`iknp_sender_view_is_independent_of_the_choice_bits`:
//! all-zero vs all-one choices, χ² on the received matrix; fails if u = r).
//!
//! **Integrity in transit.** This protocol is semi-honest and has no
//! integrity check of its own: a message altered in transit to another
//! message of the right length (a flipped bit, a duplicated or reordered
//! message) is accepted and yields a wrong output (COTs that break the relation). Corruption in transit
//! is caught by the transport (CRC32 on every frame, AEAD under TLS), not
//! by the protocol; a wrong length, a truncation, a closed link or a silent
//! peer is an error on both sides. Measured under fault injection in
//! `crates/hush-correlations/tests/faults.rs` (see `hush_transport::faulty`).

use crate::source::{CorrelationSource, CotReceiver, CotSender, Role};
use crate::{base_ot, Result};
use hush_primitives::transpose::{transpose, transpose_streaming};
use hush_primitives::{BitVec, Block, Prg};
use hush_transport::{Channel, ChannelExt};

/// Security parameter κ (columns of the IKNP matrix).
pub const KAPPA: usize = 128;
/// COTs per tile (one message of 128 × TILE bits = 128 KiB; the PRG rows,
/// u and the transposed output of a tile stay in L2). A multiple of 128.
pub const TILE: usize = 1 << 13;
// Tiles start at multiples of TILE: whole 128-column blocks of the matrix
// and whole 64-bit words of the choice vector.
const _: () = assert!(TILE % KAPPA == 0 && TILE % 64 == 0);

/// IKNP sender (holds Δ).
pub struct IknpSender {
    delta: Block,
    prgs: Vec<Prg>,
    produced: u64,
    /// One tile's 128 PRG rows (Block-typed for alignment).
    mat: Vec<Block>,
    /// The transposed tile when its padding must be cut off.
    tmat: Vec<Block>,
    /// The receiver's u for one tile.
    buf: Vec<Block>,
}

/// IKNP receiver (holds the choice bits).
pub struct IknpReceiver {
    prgs: Vec<[Prg; 2]>,
    rng: Prg,
    produced: u64,
    mat: Vec<Block>,
    tmat: Vec<Block>,
    buf: Vec<Block>,
    /// One tile's packed choice bits.
    r: Vec<Block>,
}

impl IknpSender {
    /// Runs the base OTs (as base-OT receiver) with a fresh random Δ.
    pub fn setup(ch: &mut dyn Channel, rng: &mut Prg) -> Result<Self> {
        let delta = rng.random_block();
        Self::setup_with_delta(ch, delta, rng)
    }

    /// As [`IknpSender::setup`] with a given Δ.
    pub fn setup_with_delta(ch: &mut dyn Channel, delta: Block, rng: &mut Prg) -> Result<Self> {
        let bits: Vec<bool> = (0..KAPPA).map(|j| (delta.0 >> j) & 1 == 1).collect();
        let keys = base_ot::recv(ch, &bits, rng)?;
        Ok(IknpSender {
            delta,
            prgs: keys.into_iter().map(Prg::new).collect(),
            produced: 0,
            mat: Vec::new(),
            tmat: Vec::new(),
            buf: Vec::new(),
        })
    }
}

impl IknpReceiver {
    /// Runs the base OTs (as base-OT sender).
    pub fn setup(ch: &mut dyn Channel, rng: &mut Prg) -> Result<Self> {
        let keys = base_ot::send(ch, KAPPA, rng)?;
        let seed = rng.random_block();
        Ok(IknpReceiver {
            prgs: keys.into_iter().map(|[a, b]| [Prg::new(a), Prg::new(b)]).collect(),
            rng: Prg::new(seed),
            produced: 0,
            mat: Vec::new(),
            tmat: Vec::new(),
            buf: Vec::new(),
            r: Vec::new(),
        })
    }

    /// Extends COTs with *chosen* choice bits (IKNP needs no extra message
    /// for this).
    pub fn recv_cots_chosen(&mut self, ch: &mut dyn Channel, choices: &BitVec, t: &mut [Block]) -> Result<()> {
        if choices.len() != t.len() {
            return Err(crate::Error::Invalid(format!("{} choices for {} COTs", choices.len(), t.len())));
        }
        let n = t.len();
        let stream = streams(n);
        let words = choices.words();
        let mut off = 0;
        while off < n {
            let m = (n - off).min(TILE);
            let mp = m.div_ceil(KAPPA) * KAPPA;
            let rb = mp / 8;
            // r for this tile, packed, padded with zeros (off is a multiple
            // of TILE, hence of 64: whole words of the choice vector).
            self.r.resize(mp / 128, Block::ZERO);
            let rw = Block::as_bytes_mut(&mut self.r);
            rw.fill(0);
            for (k, w) in words[off / 64..(off + m).div_ceil(64)].iter().enumerate() {
                rw[8 * k..8 * k + 8].copy_from_slice(&w.to_le_bytes());
            }
            self.mat.resize(mp, Block::ZERO);
            self.buf.resize(mp, Block::ZERO);
            let mat = Block::as_bytes_mut(&mut self.mat);
            let buf = Block::as_bytes_mut(&mut self.buf);
            let r = Block::as_bytes(&self.r);
            for j in 0..KAPPA {
                let row = &mut mat[j * rb..(j + 1) * rb];
                self.prgs[j][0].fill_bytes(row);
                let u = &mut buf[j * rb..(j + 1) * rb];
                self.prgs[j][1].fill_bytes(u);
                xor3(u, row, r);
            }
            ch.send_chunked(buf)?;
            transpose_into(mat, mp, &mut self.tmat, &mut t[off..off + m], stream);
            off += m;
        }
        self.produced += n as u64;
        Ok(())
    }
}

/// `u ^= a ^ b` (row lengths are multiples of 16 bytes).
#[inline]
fn xor3(u: &mut [u8], a: &[u8], b: &[u8]) {
    for ((x, y), z) in u.chunks_exact_mut(16).zip(a.chunks_exact(16)).zip(b.chunks_exact(16)) {
        let v = u128::from_ne_bytes(x.try_into().unwrap())
            ^ u128::from_ne_bytes(y.try_into().unwrap())
            ^ u128::from_ne_bytes(z.try_into().unwrap());
        x.copy_from_slice(&v.to_ne_bytes());
    }
}

/// `u ^= a`.
#[inline]
fn xor2(u: &mut [u8], a: &[u8]) {
    for (x, y) in u.chunks_exact_mut(16).zip(a.chunks_exact(16)) {
        let v = u128::from_ne_bytes(x.try_into().unwrap()) ^ u128::from_ne_bytes(y.try_into().unwrap());
        x.copy_from_slice(&v.to_ne_bytes());
    }
}

/// Whether a request of `n` COTs writes its output with non-temporal
/// stores ([`transpose_streaming`]): when the caller's buffer is larger
/// than one core's L2, its lines would be evicted before the caller reads
/// them anyway, and streaming skips reading every line in before writing
/// it (the output's memory traffic halves). Smaller requests stay cached.
fn streams(n: usize) -> bool {
    let l2 = hush_primitives::cache::l2_bytes().unwrap_or(1 << 20);
    (n as u64) * 16 > l2
}

/// Transposes the 128 × mp tile into `out.len()` ≤ mp blocks, directly
/// into the caller's buffer when no padding has to be cut off.
fn transpose_into(mat: &[u8], mp: usize, scratch: &mut Vec<Block>, out: &mut [Block], stream: bool) {
    if out.len() == mp {
        if stream {
            transpose_streaming(mat, KAPPA, mp, Block::as_bytes_mut(out));
        } else {
            transpose(mat, KAPPA, mp, Block::as_bytes_mut(out));
        }
    } else {
        scratch.resize(mp, Block::ZERO);
        transpose(mat, KAPPA, mp, Block::as_bytes_mut(scratch));
        let k = out.len();
        out.copy_from_slice(&scratch[..k]);
    }
}

impl CorrelationSource for IknpSender {
    fn name(&self) -> &'static str {
        "iknp"
    }
    fn role(&self) -> Role {
        Role::Sender
    }
    fn produced(&self) -> u64 {
        self.produced
    }
}

impl CorrelationSource for IknpReceiver {
    fn name(&self) -> &'static str {
        "iknp"
    }
    fn role(&self) -> Role {
        Role::Receiver
    }
    fn produced(&self) -> u64 {
        self.produced
    }
}

impl CotSender for IknpSender {
    fn delta(&self) -> Block {
        self.delta
    }

    fn send_cots(&mut self, ch: &mut dyn Channel, q: &mut [Block]) -> Result<()> {
        let n = q.len();
        let stream = streams(n);
        let mut off = 0;
        while off < n {
            let m = (n - off).min(TILE);
            let mp = m.div_ceil(KAPPA) * KAPPA;
            let rb = mp / 8;
            self.buf.resize(mp, Block::ZERO);
            let buf = Block::as_bytes_mut(&mut self.buf);
            ch.recv_chunked_into("IKNP: receiver's matrix u", buf)?;
            self.mat.resize(mp, Block::ZERO);
            let mat = Block::as_bytes_mut(&mut self.mat);
            for j in 0..KAPPA {
                let row = &mut mat[j * rb..(j + 1) * rb];
                self.prgs[j].fill_bytes(row);
                if (self.delta.0 >> j) & 1 == 1 {
                    xor2(row, &buf[j * rb..(j + 1) * rb]);
                }
            }
            transpose_into(mat, mp, &mut self.tmat, &mut q[off..off + m], stream);
            off += m;
        }
        self.produced += n as u64;
        Ok(())
    }
}

impl CotReceiver for IknpReceiver {
    fn recv_cots(&mut self, ch: &mut dyn Channel, choices: &mut BitVec, t: &mut [Block]) -> Result<()> {
        *choices = BitVec::random(t.len(), &mut self.rng);
        self.recv_cots_chosen(ch, choices, t)
    }
}

impl Drop for IknpSender {
    fn drop(&mut self) {
        use zeroize::Zeroize;
        self.delta.zeroize();
        wipe(&mut self.mat);
        wipe(&mut self.tmat);
    }
}

impl Drop for IknpReceiver {
    fn drop(&mut self) {
        wipe(&mut self.mat);
        wipe(&mut self.tmat);
        wipe(&mut self.r);
    }
}

/// Zeroes a block buffer (the PRG rows, COT outputs and choice bits of
/// the last tile) before it is freed.
fn wipe(v: &mut Vec<Block>) {
    use zeroize::Zeroize;
    Block::as_bytes_mut(v).zeroize();
    v.clear();
}
