//! The bit-sliced secure evaluator: one party's side of the Araki et al.
//! protocol over a whole circuit, for many independent instances at once.
//!
//! A wire holds `words` 64-bit words per share half: bit `j` of word `k`
//! is instance `64k + j`. A *chunk* is `64 × words` instances evaluated
//! together. The circuit is compiled once into a [`Program`]:
//!
//! * **Layers.** Each wire gets its AND depth (inputs 0; XOR/INV/EQW take
//!   the maximum of their inputs; AND adds one). Layer `L` evaluates the
//!   AND gates of depth `L` — all of them in one message of
//!   `ANDs(L) × words × 8` bytes to the next party, i.e. one round — and
//!   then, in file order, the linear gates whose first reader needs them
//!   by layer `L + 1` (linear gates are scheduled as late as possible,
//!   which keeps fewer wires alive; they are free and local). A
//!   chunk therefore costs exactly `AND depth` rounds and
//!   `AND gates × 64 × words / 8` bytes sent per party.
//! * **Slots.** Wires are mapped to a small pool of storage slots by
//!   liveness (a slot is reused once its wire is dead), so the working set
//!   is the circuit's peak live width, not its wire count. Each slot holds
//!   `x` then `a`, `2 × words` words side by side.
//! * **Streams.** [`run_streams`] keeps several chunks in flight in one
//!   thread: while one chunk's `r_i` travels, the others compute. Every
//!   party runs the same deterministic round-robin, so the messages of all
//!   streams share one ring link in a fixed order. Each stream still costs
//!   one round per AND layer.
//!
//! The hot loops are plain word loops over slices; they are compiled a
//! second time with AVX-512 (or AVX2) enabled and chosen at run time, with
//! the portable version always available.
//!
//! **View.** The engine adds nothing to a party's view beyond
//! [`crate::araki`]'s: its input pairs and one r_{i−1} per AND gate, in a
//! fixed order that depends on the circuit only (layers, slots and stream
//! interleaving are public). Each AND's α uses a distinct PRF input (job
//! nonce, word index), so no mask is reused across gates, chunks or
//! streams. See [`crate::araki`] for why that view is uniform, and
//! `tests/protocol.rs` (`single_party_view_is_uniform`) for the
//! statistical test on the real views (`local::eval_local` with views).

use crate::araki::{and_finish, and_local, PartyKeys};
use crate::bristol::{Circuit, Gate};
use crate::error::{Error, Result};
use hush_transport::{Channel, ChannelExt};

/// Largest slot storage one evaluator may allocate (bytes).
pub const MAX_EVAL_BYTES: usize = 4 << 30;

#[derive(Clone, Copy, Debug)]
enum LinOp {
    Xor { a: u32, b: u32, o: u32 },
    Inv { a: u32, o: u32 },
    Copy { a: u32, o: u32 },
    Const { bit: bool, o: u32 },
}

#[derive(Clone, Copy, Debug)]
struct AndOp {
    a: u32,
    b: u32,
    o: u32,
}

#[derive(Clone, Debug)]
struct Layer {
    ands: std::ops::Range<usize>,
    lin: std::ops::Range<usize>,
}

/// A circuit compiled for layered, slot-allocated evaluation.
#[derive(Clone, Debug)]
pub struct Program {
    pub n_in: usize,
    pub n_out: usize,
    pub nslots: usize,
    pub and_count: usize,
    pub depth: usize,
    pub max_layer_ands: usize,
    input_slots: Vec<u32>,
    output_slots: Vec<u32>,
    layers: Vec<Layer>,
    ands: Vec<AndOp>,
    lin: Vec<LinOp>,
}

const NEVER: u32 = 0;
const FOREVER: u32 = u32::MAX;

impl Program {
    /// Compiles a validated circuit.
    pub fn compile(c: &Circuit) -> Program {
        let nw = c.num_wires;
        let n_in = c.num_input_wires();
        let n_out = c.num_output_wires();
        // AND depth of every wire.
        let mut depth = vec![0u32; nw];
        let mut gdepth = Vec::with_capacity(c.gates.len());
        let mut max_d = 0u32;
        for g in &c.gates {
            let (d, out) = match *g {
                Gate::Xor { a, b, out } => (depth[a as usize].max(depth[b as usize]), out),
                Gate::And { a, b, out } => (depth[a as usize].max(depth[b as usize]) + 1, out),
                Gate::Inv { a, out } | Gate::Copy { a, out } => (depth[a as usize], out),
                Gate::Const { out, .. } => (0, out),
            };
            depth[out as usize] = d;
            gdepth.push(d);
            max_d = max_d.max(d);
        }
        let nl = max_d as usize + 1;
        let mut and_by: Vec<Vec<usize>> = vec![Vec::new(); nl];
        let mut lin_by: Vec<Vec<usize>> = vec![Vec::new(); nl];
        // ANDs go to their depth. Linear gates go as late as possible
        // (right before their first reader needs them): this shortens the
        // lives of their outputs and so the live working set. `need[w]` is
        // the layer by whose linear phase wire `w` must exist.
        let mut need = vec![max_d; nw];
        for gi in (0..c.gates.len()).rev() {
            let g = &c.gates[gi];
            match *g {
                Gate::And { a, b, .. } => {
                    let l = gdepth[gi];
                    and_by[l as usize].push(gi);
                    need[a as usize] = need[a as usize].min(l - 1);
                    need[b as usize] = need[b as usize].min(l - 1);
                }
                Gate::Xor { a, b, out } => {
                    let l = need[out as usize];
                    lin_by[l as usize].push(gi);
                    need[a as usize] = need[a as usize].min(l);
                    need[b as usize] = need[b as usize].min(l);
                }
                Gate::Inv { a, out } | Gate::Copy { a, out } => {
                    let l = need[out as usize];
                    lin_by[l as usize].push(gi);
                    need[a as usize] = need[a as usize].min(l);
                }
                Gate::Const { out, .. } => lin_by[need[out as usize] as usize].push(gi),
            }
        }
        for v in and_by.iter_mut().chain(lin_by.iter_mut()) {
            v.reverse();
        }
        // Schedule positions (1-based): layer 0's linear gates, then for each
        // layer its AND step (one position) and its linear gates.
        let reads = |g: &Gate| -> [Option<u32>; 2] {
            match *g {
                Gate::Xor { a, b, .. } | Gate::And { a, b, .. } => [Some(a), Some(b)],
                Gate::Inv { a, .. } | Gate::Copy { a, .. } => [Some(a), None],
                Gate::Const { .. } => [None, None],
            }
        };
        let mut last_use = vec![NEVER; nw];
        let mut pos = 0u32;
        for l in 0..nl {
            if !and_by[l].is_empty() {
                pos += 1;
                for &gi in &and_by[l] {
                    for w in reads(&c.gates[gi]).into_iter().flatten() {
                        last_use[w as usize] = pos;
                    }
                }
            }
            for &gi in &lin_by[l] {
                pos += 1;
                for w in reads(&c.gates[gi]).into_iter().flatten() {
                    last_use[w as usize] = pos;
                }
            }
        }
        let first_out = nw - n_out;
        for lu in &mut last_use[first_out..] {
            *lu = FOREVER;
        }

        // Slot allocation.
        let mut slot_of = vec![u32::MAX; nw];
        let mut free: Vec<u32> = Vec::new();
        let mut nslots = 0u32;
        let mut alloc = |free: &mut Vec<u32>| -> u32 {
            free.pop().unwrap_or_else(|| {
                nslots += 1;
                nslots - 1
            })
        };
        let mut input_slots = Vec::with_capacity(n_in);
        for w in 0..n_in {
            let s = alloc(&mut free);
            slot_of[w] = s;
            input_slots.push(s);
        }
        // Inputs that are never read (and not outputs) can be recycled at
        // once: they are written before any gate runs.
        for w in 0..n_in {
            if last_use[w] == NEVER {
                free.push(slot_of[w]);
            }
        }
        let release = |w: u32, at: u32, free: &mut Vec<u32>, slot_of: &mut Vec<u32>| {
            if last_use[w as usize] == at && slot_of[w as usize] != u32::MAX {
                free.push(slot_of[w as usize]);
                slot_of[w as usize] = u32::MAX;
            }
        };
        let mut layers = Vec::with_capacity(nl);
        let mut ands = Vec::with_capacity(c.gates.len());
        let mut lin = Vec::with_capacity(c.gates.len());
        let mut pos = 0u32;
        let mut max_layer_ands = 0;
        for l in 0..nl {
            let and_start = ands.len();
            if !and_by[l].is_empty() {
                pos += 1;
                max_layer_ands = max_layer_ands.max(and_by[l].len());
                // Resolve input slots first (all reads happen before any
                // write of this layer), then release dying inputs, then
                // allocate outputs.
                let mut tmp = Vec::with_capacity(and_by[l].len());
                for &gi in &and_by[l] {
                    if let Gate::And { a, b, out } = c.gates[gi] {
                        tmp.push((slot_of[a as usize], slot_of[b as usize], out));
                    }
                }
                for &gi in &and_by[l] {
                    if let Gate::And { a, b, .. } = c.gates[gi] {
                        release(a, pos, &mut free, &mut slot_of);
                        release(b, pos, &mut free, &mut slot_of);
                    }
                }
                for (sa, sb, out) in tmp {
                    let so = alloc(&mut free);
                    slot_of[out as usize] = so;
                    ands.push(AndOp { a: sa, b: sb, o: so });
                    if last_use[out as usize] == NEVER {
                        free.push(so);
                        slot_of[out as usize] = u32::MAX;
                    }
                }
            }
            let lin_start = lin.len();
            for &gi in &lin_by[l] {
                pos += 1;
                let g = c.gates[gi];
                let s = |w: u32| slot_of[w as usize];
                let so = alloc(&mut free);
                let (op, out) = match g {
                    Gate::Xor { a, b, out } => (LinOp::Xor { a: s(a), b: s(b), o: so }, out),
                    Gate::Inv { a, out } => (LinOp::Inv { a: s(a), o: so }, out),
                    Gate::Copy { a, out } => (LinOp::Copy { a: s(a), o: so }, out),
                    Gate::Const { bit, out } => (LinOp::Const { bit, o: so }, out),
                    Gate::And { .. } => unreachable!("ANDs are scheduled in AND steps"),
                };
                lin.push(op);
                slot_of[out as usize] = so;
                for w in reads(&g).into_iter().flatten() {
                    release(w, pos, &mut free, &mut slot_of);
                }
                if last_use[out as usize] == NEVER {
                    free.push(so);
                    slot_of[out as usize] = u32::MAX;
                }
            }
            layers.push(Layer { ands: and_start..ands.len(), lin: lin_start..lin.len() });
        }
        let output_slots = (first_out..nw).map(|w| slot_of[w]).collect();
        Program {
            n_in,
            n_out,
            nslots: nslots as usize,
            and_count: ands.len(),
            depth: max_d as usize,
            max_layer_ands,
            input_slots,
            output_slots,
            layers,
            ands,
            lin,
        }
    }

    /// Rounds of one chunk (AND layers with at least one gate).
    pub fn rounds_per_chunk(&self) -> usize {
        self.layers.iter().filter(|l| !l.ands.is_empty()).count()
    }

    /// Bytes one party sends to the next during one chunk of `words`.
    pub fn bytes_per_chunk(&self, words: usize) -> usize {
        self.and_count * words * 8
    }

    /// Slot memory of an evaluator with `words` per share half.
    pub fn slot_bytes(&self, words: usize) -> Option<usize> {
        self.nslots.checked_mul(2)?.checked_mul(words)?.checked_mul(8)
    }
}

/// Which compiled variant of the hot loops runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Kernel {
    /// The variant of the current SIMD level ([`hush_primitives::simd::level`]).
    pub fn detect() -> Kernel {
        Kernel::for_level(hush_primitives::simd::level())
    }

    /// The variant compiled for SIMD level `l` (each level has its own).
    pub fn for_level(l: hush_primitives::simd::Level) -> Kernel {
        use hush_primitives::simd::Level;
        match l {
            #[cfg(target_arch = "x86_64")]
            Level::Avx512 => Kernel::Avx512,
            #[cfg(target_arch = "x86_64")]
            Level::Avx2 => Kernel::Avx2,
            _ => Kernel::Portable,
        }
    }

    /// Whether this CPU runs the variant.
    pub fn supported(self) -> bool {
        use hush_primitives::simd::Level;
        match self {
            Kernel::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => Level::Avx2.supported(),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => Level::Avx512.supported(),
        }
    }
}

/// One party's evaluator for a program and a chunk width.
pub struct Evaluator<'p> {
    prog: &'p Program,
    words: usize,
    kernel: Kernel,
    slots: Vec<u64>,
    alpha: Vec<u64>,
    r_prev: Vec<u64>,
    rounds: u64,
    nonce: u64,
    chunk: u64,
    li: usize,
    phase: Phase,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// The current layer's ANDs have not started.
    Start,
    /// `r_i` sent, waiting for `r_{i−1}`.
    Sent,
    /// The current layer's ANDs are complete.
    Done,
}

/// Splits three distinct-or-equal slot views: `o` mutable, `a`/`b` shared.
/// Slots never alias the output (the allocator frees inputs only after
/// allocating the output), which `lin_ops` relies on.
#[inline(always)]
fn lin_ops(ops: &[LinOp], slots: &mut [u64], w2: usize) {
    let words = w2 / 2;
    let base = slots.as_mut_ptr();
    let len = slots.len();
    for op in ops {
        if let LinOp::Const { bit, o } = *op {
            let so = &mut slots[o as usize * w2..][..w2];
            let (ox, oa) = so.split_at_mut(words);
            ox.fill(0);
            oa.fill(0u64.wrapping_sub(bit as u64));
            continue;
        }
        let (o, ins) = match *op {
            LinOp::Xor { a, b, o } => (o, [a, b]),
            LinOp::Inv { a, o } | LinOp::Copy { a, o } => (o, [a, a]),
            LinOp::Const { .. } => continue,
        };
        let (o, a, b) = (o as usize * w2, ins[0] as usize * w2, ins[1] as usize * w2);
        assert!(o + w2 <= len && a + w2 <= len && b + w2 <= len);
        // SAFETY: the three ranges lie inside `slots` (checked above); the
        // output slot is distinct from both input slots (allocator
        // invariant, checked in debug builds), so the mutable view does not
        // overlap the shared ones. Raw parts are needed to borrow three
        // sub-slices of one vector at once.
        let (so, sa, sb) = unsafe {
            debug_assert!(o != a && o != b);
            (
                std::slice::from_raw_parts_mut(base.add(o), w2),
                std::slice::from_raw_parts(base.add(a) as *const u64, w2),
                std::slice::from_raw_parts(base.add(b) as *const u64, w2),
            )
        };
        match *op {
            LinOp::Xor { .. } => {
                for ((d, x), y) in so.iter_mut().zip(sa).zip(sb) {
                    *d = x ^ y;
                }
            }
            LinOp::Inv { .. } => {
                let (ox, oa) = so.split_at_mut(words);
                ox.copy_from_slice(&sa[..words]);
                for (d, x) in oa.iter_mut().zip(&sa[words..]) {
                    *d = !x;
                }
            }
            LinOp::Copy { .. } => so.copy_from_slice(sa),
            LinOp::Const { .. } => {}
        }
    }
}

#[inline(always)]
fn and_locals(ops: &[AndOp], slots: &[u64], w2: usize, alpha_r: &mut [u64]) {
    let words = w2 / 2;
    for (op, r) in ops.iter().zip(alpha_r.chunks_exact_mut(words)) {
        let sa = &slots[op.a as usize * w2..][..w2];
        let sb = &slots[op.b as usize * w2..][..w2];
        and_local(&sa[..words], &sa[words..], &sb[..words], &sb[words..], r);
    }
}

#[inline(always)]
fn and_finishes(ops: &[AndOp], slots: &mut [u64], w2: usize, r: &[u64], r_prev: &[u64]) {
    let words = w2 / 2;
    for ((op, r), rp) in ops.iter().zip(r.chunks_exact(words)).zip(r_prev.chunks_exact(words)) {
        let so = &mut slots[op.o as usize * w2..][..w2];
        let (z, c) = so.split_at_mut(words);
        and_finish(r, rp, z, c);
    }
}

macro_rules! with_kernel {
    ($name:ident, $avx512:ident, $avx2:ident, ($($arg:ident : $ty:ty),*)) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f")]
        unsafe fn $avx512($($arg: $ty),*) { $name($($arg),*) }
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        unsafe fn $avx2($($arg: $ty),*) { $name($($arg),*) }
    };
}
with_kernel!(lin_ops, lin_ops_avx512, lin_ops_avx2, (ops: &[LinOp], slots: &mut [u64], w2: usize));
with_kernel!(and_locals, and_locals_avx512, and_locals_avx2, (ops: &[AndOp], slots: &[u64], w2: usize, alpha_r: &mut [u64]));
with_kernel!(and_finishes, and_finishes_avx512, and_finishes_avx2, (ops: &[AndOp], slots: &mut [u64], w2: usize, r: &[u64], r_prev: &[u64]));

/// Views a word slice as little-endian bytes.
pub(crate) fn words_as_bytes(w: &[u64]) -> &[u8] {
    // SAFETY: u8 has alignment 1 and every byte of a u64 is initialised.
    unsafe { std::slice::from_raw_parts(w.as_ptr() as *const u8, w.len() * 8) }
}
/// Views a word slice as mutable bytes (any byte pattern is a valid u64).
pub(crate) fn words_as_bytes_mut(w: &mut [u64]) -> &mut [u8] {
    // SAFETY: as above; writes through the byte view produce valid u64s.
    unsafe { std::slice::from_raw_parts_mut(w.as_mut_ptr() as *mut u8, w.len() * 8) }
}
/// Sends words in little-endian order, in frames of at most `max_frame`.
pub(crate) fn send_words(ch: &mut dyn Channel, w: &mut [u64]) -> hush_transport::Result<()> {
    if cfg!(target_endian = "big") {
        w.iter_mut().for_each(|x| *x = x.to_le());
    }
    let r = ch.send_chunked(words_as_bytes(w));
    if cfg!(target_endian = "big") {
        w.iter_mut().for_each(|x| *x = u64::from_le(*x));
    }
    r
}
/// Receives exactly `w.len()` words sent with [`send_words`].
pub(crate) fn recv_words(ch: &mut dyn Channel, what: &'static str, w: &mut [u64]) -> hush_transport::Result<()> {
    ch.recv_chunked_into(what, words_as_bytes_mut(w))?;
    if cfg!(target_endian = "big") {
        w.iter_mut().for_each(|x| *x = u64::from_le(*x));
    }
    Ok(())
}

impl<'p> Evaluator<'p> {
    /// An evaluator for chunks of `64 × words` instances.
    pub fn new(prog: &'p Program, words: usize) -> Result<Self> {
        if words == 0 {
            return Err(Error::Input("chunk of 0 words".into()));
        }
        let bytes = prog.slot_bytes(words).filter(|&b| b <= MAX_EVAL_BYTES).ok_or_else(|| {
            Error::Input(format!("{} slots × {words} words exceed the evaluator memory limit of {MAX_EVAL_BYTES} bytes", prog.nslots))
        })?;
        let lw = prog.max_layer_ands * words;
        Ok(Evaluator {
            prog,
            words,
            kernel: Kernel::detect(),
            slots: vec![0; bytes / 8],
            alpha: vec![0; lw],
            r_prev: vec![0; lw],
            rounds: 0,
            nonce: 0,
            chunk: 0,
            li: usize::MAX,
            phase: Phase::Start,
        })
    }

    /// Forces a kernel variant (benchmarks, tests); one this CPU lacks
    /// is ignored (the kernels rely on the CPU having their features).
    pub fn set_kernel(&mut self, k: Kernel) {
        if k.supported() {
            self.kernel = k;
        }
    }

    /// The kernel variant in use.
    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// Rounds spent so far: one per AND layer evaluated. (The ring uses two
    /// channels per party, so the per-channel depth of the transport cannot
    /// see the causal chain P_1 → P_2 → P_3; the evaluator counts instead.)
    pub fn rounds(&self) -> u64 {
        self.rounds
    }

    pub fn words(&self) -> usize {
        self.words
    }

    fn run_lin(&mut self, r: std::ops::Range<usize>) {
        let ops = &self.prog.lin[r];
        let w2 = 2 * self.words;
        match self.kernel {
            // SAFETY: the variant was chosen by run-time feature detection.
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => unsafe { lin_ops_avx512(ops, &mut self.slots, w2) },
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => unsafe { lin_ops_avx2(ops, &mut self.slots, w2) },
            Kernel::Portable => lin_ops(ops, &mut self.slots, w2),
        }
    }

    /// Evaluates one chunk as party `keys.party`.
    ///
    /// `input` holds this party's pairs of the input wires, wire by wire,
    /// `x` then `a` (`n_in × 2 × words` words). On return `out_a` holds the
    /// `a` halves of the output wires (`n_out × words`), what the party
    /// sends toward the output party. `nonce` and `chunk` make the `α`
    /// stream unique per job and chunk; all three parties must use the
    /// same values.
    #[allow(clippy::too_many_arguments)]
    pub fn eval_chunk(
        &mut self,
        keys: &PartyKeys,
        nonce: u64,
        chunk: u64,
        input: &[u64],
        out_a: &mut [u64],
        to_next: &mut dyn Channel,
        from_prev: &mut dyn Channel,
    ) -> Result<()> {
        self.begin(nonce, chunk, input)?;
        while self.advance(keys, to_next)? {
            self.receive(from_prev)?;
        }
        self.outputs(out_a)
    }

    /// Starts a chunk: loads this party's input pairs (see
    /// [`Evaluator::eval_chunk`]). Then alternate [`Evaluator::advance`]
    /// and [`Evaluator::receive`] until `advance` returns `false`.
    pub fn begin(&mut self, nonce: u64, chunk: u64, input: &[u64]) -> Result<()> {
        let p = self.prog;
        let w2 = 2 * self.words;
        if input.len() != p.n_in * w2 {
            return Err(Error::protocol("input shares", format!("expected {} words, got {}", p.n_in * w2, input.len())));
        }
        for (i, &s) in p.input_slots.iter().enumerate() {
            self.slots[s as usize * w2..][..w2].copy_from_slice(&input[i * w2..][..w2]);
        }
        self.nonce = nonce;
        self.chunk = chunk;
        self.li = 0;
        self.phase = Phase::Start;
        Ok(())
    }

    /// Local work up to the next message: linear gates, then the local part
    /// of the next AND layer, whose `r_i` goes to the next party. Returns
    /// `true` if a message was sent (call [`Evaluator::receive`] next),
    /// `false` when the chunk is complete.
    pub fn advance(&mut self, keys: &PartyKeys, to_next: &mut dyn Channel) -> Result<bool> {
        let p = self.prog;
        let words = self.words;
        let w2 = 2 * words;
        loop {
            if self.li >= p.layers.len() {
                return Ok(false);
            }
            let layer = p.layers[self.li].clone();
            match self.phase {
                Phase::Start if !layer.ands.is_empty() => {
                    let n = layer.ands.len() * words;
                    let off = self.chunk.wrapping_mul(p.and_count as u64).wrapping_mul(words as u64) + (layer.ands.start * words) as u64;
                    keys.alpha(self.nonce, off, &mut self.alpha[..n]);
                    let ops = &p.ands[layer.ands.clone()];
                    match self.kernel {
                        // SAFETY: chosen by run-time feature detection.
                        #[cfg(target_arch = "x86_64")]
                        Kernel::Avx512 => unsafe { and_locals_avx512(ops, &self.slots, w2, &mut self.alpha[..n]) },
                        #[cfg(target_arch = "x86_64")]
                        Kernel::Avx2 => unsafe { and_locals_avx2(ops, &self.slots, w2, &mut self.alpha[..n]) },
                        Kernel::Portable => and_locals(ops, &self.slots, w2, &mut self.alpha[..n]),
                    }
                    send_words(to_next, &mut self.alpha[..n]).map_err(Error::transport("AND layer (send r_i to the next party)"))?;
                    self.rounds += 1;
                    self.phase = Phase::Sent;
                    return Ok(true);
                }
                Phase::Sent => return Err(Error::Local("evaluator: advance() called while a message is outstanding".into())),
                _ => {
                    self.run_lin(layer.lin.clone());
                    self.li += 1;
                    self.phase = Phase::Start;
                }
            }
        }
    }

    /// Receives `r_{i−1}` of the outstanding AND layer and completes it.
    pub fn receive(&mut self, from_prev: &mut dyn Channel) -> Result<()> {
        if self.phase != Phase::Sent {
            return Err(Error::Local("evaluator: receive() without an outstanding message".into()));
        }
        let p = self.prog;
        let w2 = 2 * self.words;
        let layer = p.layers[self.li].clone();
        let n = layer.ands.len() * self.words;
        recv_words(from_prev, "AND layer (r_{i-1} from the previous party)", &mut self.r_prev[..n])
            .map_err(Error::transport("AND layer (receive r_{i-1})"))?;
        let ops = &p.ands[layer.ands.clone()];
        match self.kernel {
            // SAFETY: chosen by run-time feature detection.
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => unsafe { and_finishes_avx512(ops, &mut self.slots, w2, &self.alpha[..n], &self.r_prev[..n]) },
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => unsafe { and_finishes_avx2(ops, &mut self.slots, w2, &self.alpha[..n], &self.r_prev[..n]) },
            Kernel::Portable => and_finishes(ops, &mut self.slots, w2, &self.alpha[..n], &self.r_prev[..n]),
        }
        self.phase = Phase::Done;
        Ok(())
    }

    /// The `a` halves of the output wires of the completed chunk.
    pub fn outputs(&self, out_a: &mut [u64]) -> Result<()> {
        let p = self.prog;
        let words = self.words;
        let w2 = 2 * words;
        if out_a.len() != p.n_out * words {
            return Err(Error::Input(format!("output buffer of {} words, expected {}", out_a.len(), p.n_out * words)));
        }
        if self.li < p.layers.len() {
            return Err(Error::Local("evaluator: chunk not complete".into()));
        }
        for (i, &s) in p.output_slots.iter().enumerate() {
            out_a[i * words..][..words].copy_from_slice(&self.slots[s as usize * w2 + words..][..words]);
        }
        Ok(())
    }

    /// The `(x, a)` pair of output wire `i` after [`Evaluator::eval_chunk`].
    pub fn output_pair(&self, i: usize) -> (&[u64], &[u64]) {
        let w2 = 2 * self.words;
        let s = self.prog.output_slots[i] as usize;
        let sl = &self.slots[s * w2..][..w2];
        sl.split_at(self.words)
    }
}

/// Largest number of chunks in flight ([`run_streams`]). With at most this
/// many unanswered messages per link, the transport's read-ahead queue
/// absorbs them all, so no party can block in `send` while the others do.
pub const MAX_STREAMS: usize = 8;

/// Evaluates `nchunks` chunks with `evs.len()` of them in flight, chunk `c`
/// on stream `c mod K`. `input(c, buf)` fills chunk `c`'s input pairs,
/// `output(c, a)` takes its output halves; both are called in chunk order.
#[allow(clippy::too_many_arguments)]
pub fn run_streams(
    evs: &mut [Evaluator<'_>],
    keys: &PartyKeys,
    nonce: u64,
    nchunks: u64,
    input: impl FnMut(u64, &mut [u64]) -> Result<()>,
    output: impl FnMut(u64, &[u64]) -> Result<()>,
    to_next: &mut dyn Channel,
    from_prev: &mut dyn Channel,
) -> Result<()> {
    run_streams_lane(evs, keys, nonce, (0, 1), nchunks, input, output, to_next, from_prev)
}

/// [`run_streams`] for one lane of a job split over several threads: the
/// lane's local chunk `c` (what `input`/`output` see) is the job's chunk
/// `lane.0 + c × lane.1`, and that global index addresses the `α` stream,
/// so lanes of one job never share correlated randomness.
#[allow(clippy::too_many_arguments)]
pub fn run_streams_lane(
    evs: &mut [Evaluator<'_>],
    keys: &PartyKeys,
    nonce: u64,
    lane: (u64, u64),
    nchunks: u64,
    mut input: impl FnMut(u64, &mut [u64]) -> Result<()>,
    mut output: impl FnMut(u64, &[u64]) -> Result<()>,
    to_next: &mut dyn Channel,
    from_prev: &mut dyn Channel,
) -> Result<()> {
    let k = evs.len();
    if k == 0 || k > MAX_STREAMS {
        return Err(Error::Input(format!("{k} streams (allowed 1..={MAX_STREAMS})")));
    }
    let prog = evs[0].prog;
    let words = evs[0].words;
    let mut inbuf = vec![0u64; prog.n_in * 2 * words];
    let mut outbuf = vec![0u64; prog.n_out * words];
    let mut chunk_of: Vec<Option<u64>> = vec![None; k];
    let mut next_chunk = 0u64;
    #[allow(clippy::too_many_arguments)]
    fn start<I, O>(
        ev: &mut Evaluator<'_>,
        keys: &PartyKeys,
        nonce: u64,
        lane: (u64, u64),
        nchunks: u64,
        next_chunk: &mut u64,
        inbuf: &mut [u64],
        outbuf: &mut [u64],
        input: &mut I,
        output: &mut O,
        to_next: &mut dyn Channel,
    ) -> Result<Option<u64>>
    where
        I: FnMut(u64, &mut [u64]) -> Result<()>,
        O: FnMut(u64, &[u64]) -> Result<()>,
    {
        // Chunks without AND gates complete at once.
        while *next_chunk < nchunks {
            let c = *next_chunk;
            *next_chunk += 1;
            input(c, inbuf)?;
            ev.begin(nonce, lane.0 + c * lane.1, inbuf)?;
            if ev.advance(keys, to_next)? {
                return Ok(Some(c));
            }
            ev.outputs(outbuf)?;
            output(c, outbuf)?;
        }
        Ok(None)
    }
    for s in 0..k {
        chunk_of[s] = start(&mut evs[s], keys, nonce, lane, nchunks, &mut next_chunk, &mut inbuf, &mut outbuf, &mut input, &mut output, to_next)?;
    }
    while chunk_of.iter().any(|c| c.is_some()) {
        for s in 0..k {
            let Some(c) = chunk_of[s] else { continue };
            let ev = &mut evs[s];
            ev.receive(from_prev)?;
            if !ev.advance(keys, to_next)? {
                ev.outputs(&mut outbuf)?;
                output(c, &outbuf)?;
                chunk_of[s] = start(ev, keys, nonce, lane, nchunks, &mut next_chunk, &mut inbuf, &mut outbuf, &mut input, &mut output, to_next)?;
            }
        }
    }
    Ok(())
}
