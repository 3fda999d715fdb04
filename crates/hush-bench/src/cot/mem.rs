//! Per-party peak heap for `hush bench cot`: a counting global allocator
//! that attributes every allocation to the party tag of the allocating
//! thread (0 = sender, 1 = receiver, 2 = untagged: helper threads such as
//! the fused LPN worker, whose few chunk buffers are reported separately).
//! A free is charged to the freeing thread's tag; each party's batch buffers
//! are allocated and freed on its own thread, but channel messages are
//! allocated by the sending party and freed by the receiving one, so a party
//! that mostly sends (IKNP's receiver) is over-counted by up to its
//! in-flight messages and the other under-counted — an upper bound for the
//! sending side.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, Ordering};

pub const METHOD: &str = "counting global allocator: live heap bytes attributed to the allocating party's thread, high-water mark per party above its level at the start of the run (messages are charged to the sending party); \
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

fn add(n: isize) {
    let i = tag();
    let c = CUR[i].fetch_add(n, Ordering::Relaxed) + n;
    if n > 0 {
        PEAK[i].fetch_max(c, Ordering::Relaxed);
    }
}

// SAFETY: delegates every operation to the system allocator unchanged; the
// counters are plain atomics and the thread-local is const-initialised, so
// nothing here allocates or panics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            add(l.size() as isize);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(l);
        if !p.is_null() {
            add(l.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l);
        add(-(l.size() as isize));
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = System.realloc(p, l, new);
        if !q.is_null() {
            add(new as isize - l.size() as isize);
        }
        q
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
