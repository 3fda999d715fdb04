//! Overwrites the limbs of GMP integers that hold secrets.

use rug::Integer;

/// Overwrites every allocated limb of `x` with zeros and sets it to 0.
pub(crate) fn wipe(x: &mut Integer) {
    // SAFETY: `alloc` limbs starting at `d` belong to this mpz (GMP's
    // documented integer internals); we only write zeros into them, then set
    // the size to 0, which is a valid representation of zero.
    unsafe {
        let raw = x.as_raw_mut();
        let alloc = (*raw).alloc.max(0) as usize;
        let d = (*raw).d.as_ptr();
        for i in 0..alloc {
            std::ptr::write_volatile(d.add(i), 0);
        }
        (*raw).size = 0;
    }
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
}

pub(crate) fn wipe_all<'a>(xs: impl IntoIterator<Item = &'a mut Integer>) {
    for x in xs {
        wipe(x);
    }
}
