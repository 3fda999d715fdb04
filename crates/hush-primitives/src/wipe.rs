//! Fast erasure of large secret buffers.
//!
//! `zeroize`'s slice and `Vec` impls write one element per volatile store
//! (a byte at a time for `Vec<u8>`), which costs more than producing a
//! dealt share of a few megabytes. These helpers erase the same memory with
//! one vectorised `memset` (`ptr::write_bytes`) and then let the pointer
//! escape through `std::hint::black_box` behind a compiler fence: the
//! compiler must assume the zeroed bytes are read afterwards, so it cannot
//! remove the stores as dead before the memory is freed or reused (the
//! same argument as `hush-fss`'s batch scrub). Volatile stores of 16 bytes
//! each (this module's earlier form) were ~12 % of a TAMI dealing (issue
//! 35). Like `zeroize` for `Vec`, they also erase a vector's spare capacity
//! and clear it.

/// Erases `b` (one `memset`, kept by `black_box` and a fence).
pub fn wipe_bytes(b: &mut [u8]) {
    let (p, n) = (b.as_mut_ptr(), b.len());
    // SAFETY: `p` points to `n` initialised bytes borrowed mutably.
    unsafe { std::ptr::write_bytes(p, 0, n) };
    std::hint::black_box(p);
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
}

/// [`wipe_bytes`] over the words of `w`.
pub fn wipe_u64s(w: &mut [u64]) {
    // SAFETY: a [u64] is valid, initialised memory of 8·len bytes, and any
    // byte pattern is a valid u64.
    let b = unsafe { std::slice::from_raw_parts_mut(w.as_mut_ptr() as *mut u8, std::mem::size_of_val(w)) };
    wipe_bytes(b);
}

/// Erases a byte vector's contents and spare capacity, then clears it
/// (what `Zeroize for Vec<u8>` does, at memory speed).
pub fn wipe_vec(v: &mut Vec<u8>) {
    wipe_bytes(v.as_mut_slice());
    wipe_spare(v);
    v.clear();
}

/// [`wipe_vec`] for a word vector.
pub fn wipe_vec_u64(v: &mut Vec<u64>) {
    wipe_u64s(v.as_mut_slice());
    wipe_spare(v);
    v.clear();
}

/// Zeroes a vector's spare capacity with one `memset` (`zeroize` on the
/// `MaybeUninit` slice stores one element at a time); the pointer then
/// escapes through `black_box` and a compiler fence, so the stores are not
/// removed as dead before the memory is freed or reused.
fn wipe_spare<T: Copy>(v: &mut Vec<T>) {
    let spare = v.spare_capacity_mut();
    let (p, n) = (spare.as_mut_ptr(), spare.len());
    // SAFETY: `p` points to `n` elements of spare capacity owned by `v`;
    // writing zero bytes to uninitialised memory is sound, and `T` is only
    // ever instantiated with plain integers (u8, u64).
    unsafe { std::ptr::write_bytes(p, 0, n) };
    std::hint::black_box(p);
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wipes_every_byte_at_every_alignment_and_length() {
        for off in 0..17 {
            for len in [0usize, 1, 15, 16, 17, 31, 100, 4099] {
                let mut buf = vec![0xA5u8; off + len + 3];
                wipe_bytes(&mut buf[off..off + len]);
                assert!(buf[off..off + len].iter().all(|&x| x == 0), "off {off} len {len}");
                // nothing outside the slice is touched
                assert!(buf[..off].iter().all(|&x| x == 0xA5));
                assert!(buf[off + len..].iter().all(|&x| x == 0xA5));
            }
        }
    }

    #[test]
    fn wipe_vec_erases_spare_capacity_and_clears() {
        let mut v: Vec<u8> = Vec::with_capacity(64);
        v.extend_from_slice(&[7u8; 40]);
        let p = v.as_ptr();
        wipe_vec(&mut v);
        assert!(v.is_empty());
        assert_eq!(v.capacity(), 64);
        assert_eq!(v.as_ptr(), p);
        // SAFETY: the 64 bytes of the allocation were all written (40 by
        // extend, 64 by wipe_vec); reading them back as u8 is sound.
        let all = unsafe { std::slice::from_raw_parts(p, 64) };
        assert!(all.iter().all(|&x| x == 0));
        let mut w = vec![u64::MAX; 33];
        wipe_vec_u64(&mut w);
        assert!(w.is_empty());
    }
}
