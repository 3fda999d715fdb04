//! Kernel fusion (SilentFlow §III-C, eq. 2): the GGM expansion and the LPN
//! matrix-vector product have no data dependency except the final XOR, so
//! they run concurrently — Latency = max(L_GGM, L_VM) + L_XOR instead of
//! L_GGM + L_LPN.
//!
//! [`run`] spawns one helper thread that computes A·base chunk by chunk into
//! a few recycled chunk buffers, while the calling thread fills the same
//! chunks of `out` with GGM leaves (and does any channel I/O); after each
//! chunk the caller XORs the helper's result in. At most [`IN_FLIGHT`]
//! chunks are buffered, so memory stays at `out` plus a few chunks.

use crate::lpn::{LpnMatrix, LpnParams};
use zeroize::Zeroize;
use crate::{Error, Result};
use hush_primitives::block::xor_blocks_inplace;
use hush_primitives::Block;
use std::sync::mpsc::sync_channel;

/// Chunk buffers the LPN thread may run ahead by.
pub const IN_FLIGHT: usize = 3;

/// Fills `out` with GGM ⊕ A·base: `ggm(row0, chunk)` writes the sparse
/// vector's rows `row0..row0+chunk.len()`; chunks have `chunk` rows (a
/// multiple of the tree size, even). If `parallel` is false both kernels run
/// on this thread, one after the other (the unfused baseline, and the
/// choice under a one-core budget).
pub fn run(
    out: &mut [Block],
    chunk: usize,
    base: &[Block],
    lpn: &LpnMatrix,
    parallel: bool,
    mut ggm: impl FnMut(usize, &mut [Block]) -> Result<()>,
) -> Result<()> {
    assert!(chunk > 0 && chunk % 2 == 0);
    if !parallel {
        for (ci, oc) in out.chunks_mut(chunk).enumerate() {
            ggm(ci * chunk, oc)?;
            lpn.mul_xor(base, ci * chunk, oc);
        }
        return Ok(());
    }
    let n = out.len();
    let (tx, rx) = sync_channel::<Vec<Block>>(IN_FLIGHT);
    let (back_tx, back_rx) = sync_channel::<Vec<Block>>(IN_FLIGHT + 1);
    for _ in 0..IN_FLIGHT {
        back_tx.send(vec![Block::ZERO; chunk]).expect("fresh channel");
    }
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut row0 = 0;
            while row0 < n {
                let m = chunk.min(n - row0);
                let Ok(mut buf) = back_rx.recv() else { return };
                lpn.mul(base, row0, &mut buf[..m]);
                if tx.send(buf).is_err() {
                    return;
                }
                row0 += m;
            }
        });
        // The receiving ends are moved into this closure so that they are
        // dropped (unblocking the worker) before the scope joins, also on error.
        let main = move || -> Result<()> {
            let (rx, back_tx) = (rx, back_tx);
            for (ci, oc) in out.chunks_mut(chunk).enumerate() {
                ggm(ci * chunk, oc)?;
                let buf = rx.recv().map_err(|_| Error::Invalid("LPN worker stopped".into()))?;
                xor_blocks_inplace(oc, &buf[..oc.len()]);
                let _ = back_tx.send(buf);
            }
            Ok(())
        };
        main()
    })
}

/// Output buffer shared by both sides: a batch of n COTs of which the first
/// n−k are handed out and the last k become the next base.
pub(crate) struct Batches {
    pub(crate) params: LpnParams,
    /// Outputs of each batch kept as the next batch's base (k, plus t·h for Ferret).
    pub(crate) reserve: usize,
    pub(crate) base: Vec<Block>,
    pub(crate) buf: Vec<Block>,
    pos: usize,
    pub(crate) batch: u64,
    pub(crate) produced: u64,
    pub(crate) fused: bool,
    /// Set when a batch failed: the source refuses to produce more.
    failed: bool,
}

impl Drop for Batches {
    fn drop(&mut self) {
        self.base.zeroize();
        self.buf.zeroize();
    }
}

impl Batches {
    pub(crate) fn new(params: LpnParams, reserve: usize, base: Vec<Block>, fused: bool) -> Self {
        Batches { params, reserve, base, buf: Vec::new(), pos: 0, batch: 0, produced: 0, fused, failed: false }
    }
    /// The n-block batch buffer, on huge pages where the OS allows.
    pub(crate) fn ensure_buf(&mut self) {
        if self.buf.len() != self.params.n {
            self.buf = crate::lpn::huge_blocks(self.params.n);
        }
    }
    fn usable(&self) -> usize {
        self.params.n - self.reserve
    }
    fn avail(&self) -> usize {
        if self.buf.is_empty() {
            0
        } else {
            self.usable() - self.pos
        }
    }
    /// Copies out of the current batch, calling `refill` whenever it is used up.
    pub(crate) fn fill(&mut self, out: &mut [Block], mut refill: impl FnMut(&mut Self) -> Result<()>) -> Result<()> {
        let mut done = 0;
        while done < out.len() {
            if self.failed {
                return Err(Error::Invalid("an earlier batch of this COT source failed".into()));
            }
            if self.avail() == 0 {
                if let Err(e) = refill(self) {
                    self.failed = true;
                    self.buf.zeroize();
                    self.buf.clear();
                    return Err(e);
                }
                let (n, k) = (self.params.n, self.reserve);
                self.base.copy_from_slice(&self.buf[n - k..]);
                self.pos = 0;
                self.batch += 1;
            }
            let m = self.avail().min(out.len() - done);
            out[done..done + m].copy_from_slice(&self.buf[self.pos..self.pos + m]);
            self.pos += m;
            done += m;
        }
        self.produced += out.len() as u64;
        Ok(())
    }
}

