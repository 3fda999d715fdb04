//! Per-party peak heap for `hush bench cot` and `hush bench infer`: a
//! counting global allocator that attributes every allocation to the party
//! tag of the allocating thread (0 = sender/server, 1 = receiver/client,
//! 2 = untagged: helper threads such as the fused LPN worker, reported
//! separately; the `hush` binary has a TCP channel's I/O thread take the
//! tag of the thread that made the channel, see [`set_tag`]). A free is charged to the
//! tag that *allocated* the block (a header remembers it), so a channel
//! message allocated by the sending party stays charged to it until the
//! receiving party frees it — an upper bound for the sending side — and
//! no party's count drifts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, Ordering};

pub const METHOD: &str = "counting global allocator: live heap bytes attributed to the allocating party's thread until freed (by any thread), high-water mark per party above its level at the start of the run (messages are charged to the sending party); \
helper threads (fused LPN worker) untagged and reported as untagged_peak_bytes; process VmHWM reported too";

struct Counting;

static CUR: [AtomicIsize; 3] = [AtomicIsize::new(0), AtomicIsize::new(0), AtomicIsize::new(0)];
static PEAK: [AtomicIsize; 3] = [AtomicIsize::new(0), AtomicIsize::new(0), AtomicIsize::new(0)];
static BASE: [AtomicIsize; 3] = [AtomicIsize::new(0), AtomicIsize::new(0), AtomicIsize::new(0)];

thread_local! {
    static TAG: Cell<usize> = const { Cell::new(2) };
}

fn tag() -> usize {
    TAG.try_with(|t| t.get()).unwrap_or(2)
}

fn add(i: usize, n: isize) {
    let c = CUR[i].fetch_add(n, Ordering::Relaxed) + n;
    if n > 0 {
        PEAK[i].fetch_max(c, Ordering::Relaxed);
    }
}

/// Every block carries a header with the tag of the thread that allocated
/// it, so its free (and any realloc) is charged to that same party, on
/// whatever thread it happens: no party's count drifts when another frees
/// what it allocated. The header is `max(16, align)` bytes, keeping the
/// caller's alignment.
fn prefix(l: Layout) -> usize {
    l.align().max(16)
}

fn full(l: Layout) -> Layout {
    // SAFETY (of the callers' unchecked use): the align is a power of two
    // (from a valid Layout, at least 16) and size + prefix does not
    // overflow isize for any allocation the system allocator can satisfy.
    unsafe { Layout::from_size_align_unchecked(l.size() + prefix(l), l.align().max(16)) }
}

// SAFETY: delegates every operation to the system allocator with the
// header-extended layout, and hands out the address just past the header
// (aligned to the caller's alignment, since the header is a multiple of
// it); the counters are plain atomics and the thread-local is
// const-initialised, so nothing here allocates or panics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let b = System.alloc(full(l));
        if b.is_null() {
            return b;
        }
        let t = tag();
        *b = t as u8;
        add(t, l.size() as isize);
        b.add(prefix(l))
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let b = System.alloc_zeroed(full(l));
        if b.is_null() {
            return b;
        }
        let t = tag();
        *b = t as u8;
        add(t, l.size() as isize);
        b.add(prefix(l))
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        let b = p.sub(prefix(l));
        let t = (*b as usize).min(2);
        System.dealloc(b, full(l));
        add(t, -(l.size() as isize));
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let b = p.sub(prefix(l));
        let t = (*b as usize).min(2);
        let q = System.realloc(b, full(l), new + prefix(l));
        if q.is_null() {
            return q;
        }
        add(t, new as isize - l.size() as isize);
        q.add(prefix(l))
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Tags the current thread as `party` (0 or 1) and restarts its high-water mark.
pub fn enter(party: usize) {
    let _ = TAG.try_with(|t| t.set(party));
    for i in [party, 2] {
        let c = CUR[i].load(Ordering::Relaxed);
        PEAK[i].store(c, Ordering::Relaxed);
        BASE[i].store(c, Ordering::Relaxed);
    }
}

/// Restarts `party`'s high-water mark at its current level, keeping the
/// level [`enter`] set as the base (per-step peaks of one run).
pub fn restart_peak(party: usize) {
    let i = party.min(2);
    PEAK[i].store(CUR[i].load(Ordering::Relaxed), Ordering::Relaxed);
}

/// The calling thread's tag (2 = untagged).
pub fn current_tag() -> usize {
    tag()
}

/// Tags the calling thread as `t` without restarting any mark (for helper
/// threads working for a party, such as a channel's I/O thread).
pub fn set_tag(t: usize) {
    let _ = TAG.try_with(|c| c.set(t.min(2)));
}

/// High-water mark of `party`'s live bytes above its level at [`enter`].
pub fn peak(party: usize) -> i64 {
    (PEAK[party].load(Ordering::Relaxed) - BASE[party].load(Ordering::Relaxed)) as i64
}

/// Process peak resident set (VmHWM) in bytes, if the OS reports it.
pub fn vm_hwm() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
