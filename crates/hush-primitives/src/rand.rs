//! Operating-system randomness and zeroizing secrets.

use crate::block::Block;
use zeroize::{Zeroize, ZeroizeOnDrop};

/// A fresh 128-bit seed from the OS.
pub fn os_seed() -> Block {
    let mut b = [0u8; 16];
    getrandom::getrandom(&mut b).expect("operating-system randomness unavailable");
    let s = Block::from_bytes(b);
    b.zeroize();
    s
}

/// A value that is wiped when dropped and never printed.
#[derive(Clone, Default)]
pub struct Secret<T: Zeroize>(T);

impl<T: Zeroize> Secret<T> {
    pub fn new(v: T) -> Self {
        Secret(v)
    }
    pub fn expose(&self) -> &T {
        &self.0
    }
    pub fn expose_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T: Zeroize> Drop for Secret<T> {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl<T: Zeroize> ZeroizeOnDrop for Secret<T> {}

impl<T: Zeroize> std::fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}
