//! Fixed-base windowed exponentiation (Brickell–Gordon–McCurley–Wilson).

use crate::wipe::wipe;
use rug::Integer;

/// Powers of one fixed base modulo `m`: `table[i][d-1] = base^(d·2^(w·i))`
/// for every window `i` of an exponent of at most `exp_bits` bits and every
/// non-zero digit `d < 2^w`. `pow(e)` is then one modular multiplication per
/// non-zero window digit of `e`.
pub struct FixedBase {
    modulus: Integer,
    w: u32,
    exp_bits: u32,
    table: Vec<Vec<Integer>>,
    secret: bool,
}

impl FixedBase {
    /// Builds the table. `secret` tables (mod p², q²) are wiped on drop.
    pub fn new(base: &Integer, modulus: &Integer, exp_bits: u32, w: u32, secret: bool) -> FixedBase {
        assert!((1..=16).contains(&w), "window must be 1..=16 bits");
        let windows = exp_bits.div_ceil(w);
        let mut table = Vec::with_capacity(windows as usize);
        let mut b = Integer::from(base % modulus);
        for _ in 0..windows {
            let mut row = Vec::with_capacity((1usize << w) - 1);
            let mut acc = b.clone();
            row.push(acc.clone());
            for _ in 2..(1u32 << w) {
                acc *= &b;
                acc %= modulus;
                row.push(acc.clone());
            }
            // next window base: b^(2^w) = last entry * b
            acc *= &b;
            acc %= modulus;
            b = acc;
            table.push(row);
        }
        wipe(&mut b);
        FixedBase { modulus: modulus.clone(), w, exp_bits, table, secret }
    }

    /// The table rows (`row[d-1] = base^(d·2^(w·i))`) and the modulus.
    pub(crate) fn rows(&self) -> (&[Vec<Integer>], &Integer) {
        (&self.table, &self.modulus)
    }

    /// Window width in bits.
    pub fn window(&self) -> u32 {
        self.w
    }

    /// Largest exponent size in bits.
    pub fn exp_bits(&self) -> u32 {
        self.exp_bits
    }

    /// Bytes held by the table.
    pub fn table_bytes(&self) -> usize {
        let limb_bytes = self.modulus.significant_bits().div_ceil(64) as usize * 8;
        self.table.iter().map(|r| r.len() * limb_bytes).sum()
    }

    /// base^e mod m for 0 ≤ e < 2^exp_bits.
    pub fn pow(&self, e: &Integer) -> Integer {
        assert!(e.cmp0() != std::cmp::Ordering::Less && e.significant_bits() <= self.exp_bits, "exponent out of range");
        let mut acc = Integer::from(1);
        let digits = e.to_digits::<u64>(rug::integer::Order::Lsf);
        let mask = (1u64 << self.w) - 1;
        for (i, row) in self.table.iter().enumerate() {
            let bit = i as u32 * self.w;
            let limb = (bit / 64) as usize;
            let off = bit % 64;
            let mut d = digits.get(limb).copied().unwrap_or(0) >> off;
            if off + self.w > 64 {
                d |= digits.get(limb + 1).copied().unwrap_or(0) << (64 - off);
            }
            let d = (d & mask) as usize;
            if d != 0 {
                acc *= &row[d - 1];
                acc %= &self.modulus;
            }
        }
        acc
    }
}

impl Drop for FixedBase {
    fn drop(&mut self) {
        if self.secret {
            for row in &mut self.table {
                crate::wipe::wipe_all(row.iter_mut());
            }
        }
    }
}
