//! AES-128 with the CPU's AES instructions.
//!
//! Three back ends, one per [`crate::simd::Level`] (see [`backend`]):
//! * `vaes` (level avx512): AVX-512 VAES, four blocks per instruction and
//!   eight registers (32 blocks) in flight — the software counterpart of
//!   TAMI-MPC §4.2's pipelined AES cores: independent blocks interleaved so
//!   the AES units never wait on a dependency;
//! * `aesni` (level avx2): 128-bit AES-NI (VEX-encoded), eight blocks in
//!   flight;
//! * `soft` (level portable): RustCrypto `aes` (constant-time fixsliced
//!   software AES; note that the `aes` crate detects AES-NI on its own
//!   unless built with `--cfg aes_force_soft`, so on x86-64 this back end
//!   is "no intrinsics of ours", not necessarily no AES instructions).
//!   The whole slice is handed to the crate in one call (viewed in place as
//!   its block type, no copy), so its parallel path runs: 8 AES-NI blocks
//!   in flight, or 4 blocks per fixsliced pass without AES-NI. One block
//!   per call left AES-NI latency-bound and used a quarter of each
//!   fixsliced pass (measured on the Xeon of issue 34, one core: 5.75×10^8
//!   → 7.95–8.16×10^8 blocks/s with AES-NI, 2.65–2.80×10^6 → 1.21–1.27×10^7
//!   with `aes_force_soft`; `bench/records/aes.jsonl` and `aes-soft.jsonl`,
//!   docs/perf-primitives.md).
//!
//! The round keys are expanded once per key; in the SIMD loops they stay in
//! registers. [`fixed_key`] is the public fixed-key permutation π used by
//! the hashes and the PRG-based GGM trees.

use crate::block::Block;
use crate::simd::{self, Level};
use std::sync::OnceLock;
use zeroize::Zeroize;

/// Which implementation runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Vaes,
    AesNi,
    Soft,
}

impl Backend {
    fn rank(self) -> u8 {
        match self {
            Backend::Soft => 0,
            Backend::AesNi => 1,
            Backend::Vaes => 2,
        }
    }

    /// The slower of `self` and `other`.
    fn min_with(self, other: Backend) -> Backend {
        if other.rank() < self.rank() {
            other
        } else {
            self
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Backend::Vaes => "vaes-avx512",
            Backend::AesNi => "aes-ni",
            Backend::Soft => "soft",
        }
    }
}

impl Backend {
    /// The back end of a SIMD level.
    pub fn for_level(l: Level) -> Backend {
        match l {
            Level::Avx512 => Backend::Vaes,
            Level::Avx2 => Backend::AesNi,
            Level::Portable => Backend::Soft,
        }
    }
}

/// The back end of the current SIMD level ([`crate::simd::level`]; set
/// `HUSH_SIMD=avx2|portable` to force a slower one).
pub fn backend() -> Backend {
    Backend::for_level(simd::level())
}

/// An AES-128 key with its expanded round keys.
#[derive(Clone)]
pub struct Aes128 {
    /// Round keys as little-endian blocks (the byte layout AES-NI uses).
    rk: [Block; 11],
    soft: ::aes::Aes128,
}

impl Drop for Aes128 {
    fn drop(&mut self) {
        self.rk.zeroize();
    }
}

impl Aes128 {
    /// Expands `key`.
    pub fn new(key: Block) -> Self {
        use ::aes::cipher::KeyInit;
        let soft = ::aes::Aes128::new(&key.to_bytes().into());
        let rk = expand_key(key);
        Aes128 { rk, soft }
    }

    /// Encrypts one block.
    #[inline]
    pub fn encrypt_block(&self, b: Block) -> Block {
        let mut a = [b];
        self.encrypt_blocks(&mut a);
        a[0]
    }

    /// Encrypts `data` in place, many blocks in flight.
    pub fn encrypt_blocks(&self, data: &mut [Block]) {
        self.encrypt_blocks_with(backend(), data)
    }

    /// [`Self::encrypt_blocks`] on a given back end (tests, benchmarks).
    /// A back end whose level this CPU lacks runs the best one it has.
    pub fn encrypt_blocks_with(&self, b: Backend, data: &mut [Block]) {
        BLOCKS.with(|c| c.set(c.get().wrapping_add(data.len() as u64)));
        let b = Backend::for_level(simd::detected()).min_with(b);
        match b {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `min_with` keeps only back ends of levels the CPU has;
            // level avx512 includes avx512f + vaes + aes.
            Backend::Vaes => unsafe { x86::enc_vaes(&self.rk, data) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above; level avx2 includes aes + avx2.
            Backend::AesNi => unsafe { x86::enc_aesni(&self.rk, data) },
            _ => self.encrypt_soft(data),
        }
    }

    /// Counter mode: `out[i] = AES(Block::from_u64s(ctr + i, nonce))`
    /// (the counter wraps mod 2^64), written once: the vector back ends
    /// build the counters in registers instead of storing and reloading
    /// them (half the memory traffic of [`Self::encrypt_blocks`] on a
    /// counter buffer). The PRG ([`crate::Prg`]) streams through this.
    pub fn ctr_blocks(&self, nonce: u64, ctr: u64, out: &mut [Block]) {
        self.ctr_blocks_with(backend(), nonce, ctr, out)
    }

    /// [`Self::ctr_blocks`] on a given back end (a back end whose level
    /// this CPU lacks runs the best one it has).
    pub fn ctr_blocks_with(&self, b: Backend, nonce: u64, ctr: u64, out: &mut [Block]) {
        let b = Backend::for_level(simd::detected()).min_with(b);
        match b {
            #[cfg(target_arch = "x86_64")]
            Backend::Vaes => {
                BLOCKS.with(|c| c.set(c.get().wrapping_add(out.len() as u64)));
                // SAFETY: `min_with` keeps only back ends of levels the CPU
                // has; level avx512 includes avx512f + vaes + aes.
                unsafe { x86::ctr_vaes(&self.rk, nonce, ctr, out) }
            }
            #[cfg(target_arch = "x86_64")]
            Backend::AesNi => {
                BLOCKS.with(|c| c.set(c.get().wrapping_add(out.len() as u64)));
                // SAFETY: as above; level avx2 includes aes + avx2.
                unsafe { x86::ctr_aesni(&self.rk, nonce, ctr, out) }
            }
            _ => {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = Block::from_u64s(ctr.wrapping_add(i as u64), nonce);
                }
                self.encrypt_blocks_with(b, out);
            }
        }
    }

    /// Encrypts `input` into `out` (same length).
    pub fn encrypt_blocks_to(&self, input: &[Block], out: &mut [Block]) {
        out.copy_from_slice(input);
        self.encrypt_blocks(out);
    }

    fn encrypt_soft(&self, data: &mut [Block]) {
        use ::aes::cipher::BlockEncrypt;
        if cfg!(target_endian = "little") {
            // SAFETY: Block is repr(transparent) over u128, 16 bytes with no
            // padding, and on a little-endian target its memory is exactly
            // `to_bytes()` (u128::to_le_bytes); `aes::Block` is a
            // `GenericArray<u8, U16>` (16 bytes, alignment 1, any bit pattern
            // valid), so the same memory viewed as `data.len()` of them is
            // valid and exclusively borrowed for this call.
            let view = unsafe { std::slice::from_raw_parts_mut(data.as_mut_ptr() as *mut ::aes::Block, data.len()) };
            self.soft.encrypt_blocks(view);
            return;
        }
        for b in data.iter_mut() {
            let mut ga = ::aes::Block::from(b.to_bytes());
            self.soft.encrypt_block(&mut ga);
            *b = Block::from_bytes(ga.into());
        }
    }
}

thread_local! {
    /// AES blocks this thread has encrypted (any key): a meter, read by
    /// [`blocks_counted`].
    static BLOCKS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// AES-128 blocks encrypted so far **on the calling thread** (every key,
/// every back end; key expansion not counted). A meter for benchmarks
/// (`hush bench deal` prices each dealing kind in AES calls per item from
/// the difference of two readings); it wraps at 2^64.
pub fn blocks_counted() -> u64 {
    BLOCKS.with(|c| c.get())
}

/// Adds `n` blocks to the calling thread's meter ([`blocks_counted`]): for
/// kernels that run their own AES rounds in registers (e.g. `hush-fss`'s
/// vectorised DCF key generation) instead of calling [`Aes128`].
pub fn count_blocks(n: u64) {
    BLOCKS.with(|c| c.set(c.get().wrapping_add(n)));
}

/// The fixed, public key of the fixed-key permutation π.
pub const FIXED_KEY: Block = Block(0x61_7f_6e_83_b1_d0_27_3a_94_c5_2e_48_0b_19_f7_d3);

static FIXED: OnceLock<Aes128> = OnceLock::new();

/// Fixed-key AES: the public permutation π(x) = AES_{FIXED_KEY}(x).
pub fn fixed_key() -> &'static Aes128 {
    FIXED.get_or_init(|| Aes128::new(FIXED_KEY))
}

/// FIPS-197 key expansion for AES-128 (portable; runs once per key).
fn expand_key(key: Block) -> [Block; 11] {
    const RCON: [u8; 10] = [0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x1b, 0x36];
    let sbox = sbox();
    let kb = key.to_bytes();
    let mut w = [[0u8; 4]; 44];
    for i in 0..4 {
        w[i].copy_from_slice(&kb[4 * i..4 * i + 4]);
    }
    for i in 4..44 {
        let mut t = w[i - 1];
        if i % 4 == 0 {
            t = [sbox[t[1] as usize] ^ RCON[i / 4 - 1], sbox[t[2] as usize], sbox[t[3] as usize], sbox[t[0] as usize]];
        }
        for j in 0..4 {
            w[i][j] = w[i - 4][j] ^ t[j];
        }
    }
    let mut rk = [Block::ZERO; 11];
    for r in 0..11 {
        let mut b = [0u8; 16];
        for c in 0..4 {
            b[4 * c..4 * c + 4].copy_from_slice(&w[4 * r + c]);
        }
        rk[r] = Block::from_bytes(b);
    }
    w.zeroize();
    rk
}

/// The AES S-box, computed from its definition (multiplicative inverse in
/// GF(2^8) followed by the affine map) rather than typed in.
fn sbox() -> &'static [u8; 256] {
    static S: OnceLock<[u8; 256]> = OnceLock::new();
    S.get_or_init(|| {
        fn gmul(mut a: u8, mut b: u8) -> u8 {
            let mut p = 0u8;
            while b != 0 {
                if b & 1 != 0 {
                    p ^= a;
                }
                let hi = a & 0x80;
                a <<= 1;
                if hi != 0 {
                    a ^= 0x1b;
                }
                b >>= 1;
            }
            p
        }
        let mut s = [0u8; 256];
        for x in 0..256usize {
            let inv = if x == 0 { 0 } else { (1..=255u8).find(|&y| gmul(x as u8, y) == 1).unwrap() };
            let mut r = inv;
            for k in 1..5 {
                r ^= inv.rotate_left(k);
            }
            s[x] = r ^ 0x63;
        }
        s
    })
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Block;
    use std::arch::x86_64::*;

    /// AES-NI, eight blocks in flight.
    #[target_feature(enable = "aes,avx2")]
    pub(super) unsafe fn enc_aesni(rk: &[Block; 11], data: &mut [Block]) {
        let mut k = [_mm_setzero_si128(); 11];
        for i in 0..11 {
            k[i] = _mm_loadu_si128(rk[i].0.to_le_bytes().as_ptr() as *const __m128i);
        }
        let n = data.len();
        let p = data.as_mut_ptr() as *mut __m128i;
        let mut i = 0;
        while i + 8 <= n {
            let mut x = [_mm_setzero_si128(); 8];
            for j in 0..8 {
                x[j] = _mm_xor_si128(_mm_loadu_si128(p.add(i + j)), k[0]);
            }
            for r in 1..10 {
                for j in 0..8 {
                    x[j] = _mm_aesenc_si128(x[j], k[r]);
                }
            }
            for j in 0..8 {
                _mm_storeu_si128(p.add(i + j), _mm_aesenclast_si128(x[j], k[10]));
            }
            i += 8;
        }
        while i < n {
            let mut x = _mm_xor_si128(_mm_loadu_si128(p.add(i)), k[0]);
            for r in 1..10 {
                x = _mm_aesenc_si128(x, k[r]);
            }
            _mm_storeu_si128(p.add(i), _mm_aesenclast_si128(x, k[10]));
            i += 1;
        }
    }

    /// AES-NI counter mode, eight blocks in flight, counters in registers.
    #[target_feature(enable = "aes,avx2")]
    pub(super) unsafe fn ctr_aesni(rk: &[Block; 11], nonce: u64, ctr: u64, out: &mut [Block]) {
        let mut k = [_mm_setzero_si128(); 11];
        for i in 0..11 {
            k[i] = _mm_loadu_si128(rk[i].0.to_le_bytes().as_ptr() as *const __m128i);
        }
        let n = out.len();
        let p = out.as_mut_ptr() as *mut __m128i;
        // Lane 0 = counter (low 64 bits), lane 1 = nonce.
        let mut c = _mm_set_epi64x(nonce as i64, ctr as i64);
        let one = _mm_set_epi64x(0, 1);
        let mut i = 0;
        while i + 8 <= n {
            let mut x = [_mm_setzero_si128(); 8];
            for j in 0..8 {
                x[j] = _mm_xor_si128(c, k[0]);
                c = _mm_add_epi64(c, one);
            }
            for r in 1..10 {
                for j in 0..8 {
                    x[j] = _mm_aesenc_si128(x[j], k[r]);
                }
            }
            for j in 0..8 {
                _mm_storeu_si128(p.add(i + j), _mm_aesenclast_si128(x[j], k[10]));
            }
            i += 8;
        }
        while i < n {
            let mut x = _mm_xor_si128(c, k[0]);
            c = _mm_add_epi64(c, one);
            for r in 1..10 {
                x = _mm_aesenc_si128(x, k[r]);
            }
            _mm_storeu_si128(p.add(i), _mm_aesenclast_si128(x, k[10]));
            i += 1;
        }
    }

    /// VAES counter mode: 4 blocks per register, 8 registers in flight,
    /// counters built in registers.
    #[target_feature(enable = "aes,avx2,avx512f,vaes")]
    pub(super) unsafe fn ctr_vaes(rk: &[Block; 11], nonce: u64, ctr: u64, out: &mut [Block]) {
        let mut k = [_mm512_setzero_si512(); 11];
        for i in 0..11 {
            let x = _mm_loadu_si128(rk[i].0.to_le_bytes().as_ptr() as *const __m128i);
            k[i] = _mm512_broadcast_i32x4(x);
        }
        let n = out.len();
        let p = out.as_mut_ptr() as *mut Block;
        let (c0, nn) = (ctr as i64, nonce as i64);
        // Block t of a register: (ctr + t, nonce), as (low, high) qwords.
        let mut c = _mm512_set_epi64(nn, c0.wrapping_add(3), nn, c0.wrapping_add(2), nn, c0.wrapping_add(1), nn, c0);
        let four = _mm512_set_epi64(0, 4, 0, 4, 0, 4, 0, 4);
        let mut i = 0;
        while i + 32 <= n {
            let q = p.add(i) as *mut __m512i;
            let mut x = [_mm512_setzero_si512(); 8];
            for j in 0..8 {
                x[j] = _mm512_xor_si512(c, k[0]);
                c = _mm512_add_epi64(c, four);
            }
            for r in 1..10 {
                for j in 0..8 {
                    x[j] = _mm512_aesenc_epi128(x[j], k[r]);
                }
            }
            for j in 0..8 {
                _mm512_storeu_si512(q.add(j) as *mut _, _mm512_aesenclast_epi128(x[j], k[10]));
            }
            i += 32;
        }
        while i + 4 <= n {
            let q = p.add(i) as *mut __m512i;
            let mut x = _mm512_xor_si512(c, k[0]);
            c = _mm512_add_epi64(c, four);
            for r in 1..10 {
                x = _mm512_aesenc_epi128(x, k[r]);
            }
            _mm512_storeu_si512(q as *mut _, _mm512_aesenclast_epi128(x, k[10]));
            i += 4;
        }
        if i < n {
            let next = ctr.wrapping_add(i as u64);
            ctr_aesni(rk, nonce, next, &mut std::slice::from_raw_parts_mut(p, n)[i..]);
        }
    }

    /// VAES with AVX-512: 4 blocks per register, 8 registers (32 blocks) in
    /// flight.
    #[target_feature(enable = "aes,avx2,avx512f,vaes")]
    pub(super) unsafe fn enc_vaes(rk: &[Block; 11], data: &mut [Block]) {
        let mut k = [_mm512_setzero_si512(); 11];
        for i in 0..11 {
            let x = _mm_loadu_si128(rk[i].0.to_le_bytes().as_ptr() as *const __m128i);
            k[i] = _mm512_broadcast_i32x4(x);
        }
        let n = data.len();
        let p = data.as_mut_ptr() as *mut Block;
        let mut i = 0;
        while i + 32 <= n {
            let q = p.add(i) as *mut __m512i;
            let mut x = [_mm512_setzero_si512(); 8];
            for j in 0..8 {
                x[j] = _mm512_xor_si512(_mm512_loadu_si512(q.add(j) as *const _), k[0]);
            }
            for r in 1..10 {
                for j in 0..8 {
                    x[j] = _mm512_aesenc_epi128(x[j], k[r]);
                }
            }
            for j in 0..8 {
                _mm512_storeu_si512(q.add(j) as *mut _, _mm512_aesenclast_epi128(x[j], k[10]));
            }
            i += 32;
        }
        while i + 4 <= n {
            let q = p.add(i) as *mut __m512i;
            let mut x = _mm512_xor_si512(_mm512_loadu_si512(q as *const _), k[0]);
            for r in 1..10 {
                x = _mm512_aesenc_epi128(x, k[r]);
            }
            _mm512_storeu_si512(q as *mut _, _mm512_aesenclast_epi128(x, k[10]));
            i += 4;
        }
        if i < n {
            enc_aesni(rk, &mut std::slice::from_raw_parts_mut(p, n)[i..]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex16(s: &str) -> [u8; 16] {
        let mut o = [0u8; 16];
        for i in 0..16 {
            o[i] = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
        }
        o
    }

    #[test]
    fn fips197_vector_all_backends() {
        // FIPS-197 Appendix C.1.
        let key = Block::from_bytes(hex16("000102030405060708090a0b0c0d0e0f"));
        let pt = Block::from_bytes(hex16("00112233445566778899aabbccddeeff"));
        let ct = Block::from_bytes(hex16("69c4e0d86a7b0430d8cdb78070b4c55a"));
        let a = Aes128::new(key);
        assert_eq!(a.encrypt_block(pt), ct);
        let mut v = vec![pt; 77];
        a.encrypt_blocks(&mut v);
        assert!(v.iter().all(|&b| b == ct));
        let mut s = vec![pt; 5];
        a.encrypt_soft(&mut s);
        assert!(s.iter().all(|&b| b == ct));
    }

    /// FIPS-197 AES-128 written from the specification, byte by byte (no
    /// intrinsics, no tables but the S-box): the reference every back end
    /// is compared with.
    fn reference(rk: &[Block; 11], b: Block) -> Block {
        fn xt(a: u8) -> u8 {
            (a << 1) ^ if a & 0x80 != 0 { 0x1b } else { 0 }
        }
        let sb = sbox();
        let mut s = b.to_bytes();
        let ark = |s: &mut [u8; 16], k: Block| {
            for (x, y) in s.iter_mut().zip(k.to_bytes()) {
                *x ^= y;
            }
        };
        ark(&mut s, rk[0]);
        for r in 1..11 {
            for x in s.iter_mut() {
                *x = sb[*x as usize];
            }
            let t = s;
            for row in 0..4 {
                for c in 0..4 {
                    s[row + 4 * c] = t[row + 4 * ((c + row) % 4)];
                }
            }
            if r < 10 {
                for c in 0..4 {
                    let a: [u8; 4] = s[4 * c..4 * c + 4].try_into().unwrap();
                    let all = a[0] ^ a[1] ^ a[2] ^ a[3];
                    for row in 0..4 {
                        s[4 * c + row] = a[row] ^ all ^ xt(a[row] ^ a[(row + 1) % 4]);
                    }
                }
            }
            ark(&mut s, rk[r]);
        }
        Block::from_bytes(s)
    }

    #[test]
    fn reference_matches_fips197() {
        let key = Block::from_bytes(hex16("000102030405060708090a0b0c0d0e0f"));
        let pt = Block::from_bytes(hex16("00112233445566778899aabbccddeeff"));
        assert_eq!(reference(&expand_key(key), pt), Block::from_bytes(hex16("69c4e0d86a7b0430d8cdb78070b4c55a")));
    }

    /// Every SIMD level this CPU has (VAES, AES-NI, soft) against the
    /// specification, on lengths around every kernel's step and tail.
    #[test]
    fn every_level_matches_reference() {
        let a = Aes128::new(Block(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210));
        let lens = [0usize, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 36, 63, 64, 65, 100, 1000];
        let v: Vec<Block> = (0..1000u128).map(|i| Block(i.wrapping_mul(0x9e3779b97f4a7c15f39cc0605cedc835) ^ (i << 100))).collect();
        let want: Vec<Block> = v.iter().map(|&b| reference(&a.rk, b)).collect();
        crate::simd::for_each_level("aes", |l| {
            assert_eq!(backend(), Backend::for_level(l));
            for &n in &lens {
                let mut x = v[..n].to_vec();
                a.encrypt_blocks(&mut x);
                assert_eq!(x, want[..n], "level {l} n={n}");
                let mut y = v[..n].to_vec();
                a.encrypt_blocks_with(Backend::for_level(l), &mut y);
                assert_eq!(y, want[..n], "level {l} explicit n={n}");
                // A sub-slice (other start, other tail length).
                if n > 1 {
                    let mut z = v[..n].to_vec();
                    a.encrypt_blocks(&mut z[1..]);
                    assert_eq!(z[1..], want[1..n], "level {l} offset n={n}");
                }
            }
        });
    }

    /// The soft back end hands whole slices to the `aes` crate (viewed in
    /// place as its block type): every length around its parallel widths
    /// (8 or 9 AES-NI blocks, 4 fixsliced), and sub-slices starting at every
    /// offset, against the specification; the blocks outside the slice
    /// are untouched.
    #[test]
    fn soft_slices_match_reference() {
        let a = Aes128::new(Block(0x2b7e_1516_28ae_d2a6_abf7_1588_09cf_4f3c));
        let v: Vec<Block> = (0..80u128).map(|i| Block(i.wrapping_mul(0x9e3779b97f4a7c15f39cc0605cedc835) ^ !i)).collect();
        let want: Vec<Block> = v.iter().map(|&b| reference(&a.rk, b)).collect();
        for n in 0..=40usize {
            for off in 0..4usize {
                let mut x = v[..off + n + 3].to_vec();
                a.encrypt_soft(&mut x[off..off + n]);
                assert_eq!(x[off..off + n], want[off..off + n], "n={n} off={off}");
                assert_eq!(x[..off], v[..off], "n={n} off={off}: before the slice");
                assert_eq!(x[off + n..], v[off + n..off + n + 3], "n={n} off={off}: after the slice");
            }
        }
    }

    /// The counter-mode kernels (counters built in registers) against the
    /// scalar reference cipher, at every level this CPU has: odd lengths,
    /// unaligned output, and a counter that wraps past 2^64.
    #[test]
    fn ctr_blocks_match_reference_at_every_level() {
        let a = Aes128::new(Block(0x0f1e_2d3c_4b5a_6978_8796_a5b4_c3d2_e1f0));
        crate::simd::for_each_level("aes ctr", |l| {
            for &(nonce, ctr) in &[(0u64, 0u64), (7, 1 << 40), (u64::MAX, u64::MAX - 37)] {
                for n in [0usize, 1, 3, 4, 5, 8, 31, 32, 33, 35, 64, 67, 200] {
                    let want: Vec<Block> = (0..n).map(|i| reference(&a.rk, Block::from_u64s(ctr.wrapping_add(i as u64), nonce))).collect();
                    let mut x = vec![Block::ONES; n + 1];
                    a.ctr_blocks(nonce, ctr, &mut x[1..]);
                    assert_eq!(x[1..], want[..], "level {l} n={n} ctr={ctr}");
                    assert_eq!(x[0], Block::ONES);
                    let mut y = vec![Block::ZERO; n];
                    a.ctr_blocks_with(Backend::for_level(l), nonce, ctr, &mut y);
                    assert_eq!(y, want, "level {l} explicit n={n}");
                }
            }
        });
    }
}
