//! AES-128 with the CPU's AES instructions.
//!
//! Three back ends, chosen once at run time:
//! * `vaes`: AVX-512 VAES, four blocks per instruction and eight registers
//!   (32 blocks) in flight — the software counterpart of TAMI-MPC §4.2's
//!   pipelined AES cores: independent blocks interleaved so the AES units
//!   never wait on a dependency;
//! * `aesni`: 128-bit AES-NI, eight blocks in flight;
//! * `soft`: RustCrypto `aes` (constant-time bitsliced fallback; it also uses
//!   AES-NI itself when present).
//!
//! The round keys are expanded once per key; in the SIMD loops they stay in
//! registers. [`fixed_key`] is the public fixed-key permutation π used by
//! the hashes and the PRG-based GGM trees.

use crate::block::Block;
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
    pub fn name(self) -> &'static str {
        match self {
            Backend::Vaes => "vaes-avx512",
            Backend::AesNi => "aes-ni",
            Backend::Soft => "soft",
        }
    }
}

static BACKEND: OnceLock<Backend> = OnceLock::new();

/// The back end selected for this CPU. Setting `HUSH_AES=soft|aesni`
/// forces a slower one (for tests of the fallback paths).
pub fn backend() -> Backend {
    *BACKEND.get_or_init(|| {
        let forced = std::env::var("HUSH_AES").ok();
        #[cfg(target_arch = "x86_64")]
        {
            let aesni = std::arch::is_x86_feature_detected!("aes") && std::arch::is_x86_feature_detected!("sse2");
            let vaes = aesni
                && std::arch::is_x86_feature_detected!("vaes")
                && std::arch::is_x86_feature_detected!("avx512f");
            match forced.as_deref() {
                Some("soft") => return Backend::Soft,
                Some("aesni") if aesni => return Backend::AesNi,
                _ => {}
            }
            if vaes {
                return Backend::Vaes;
            }
            if aesni {
                return Backend::AesNi;
            }
        }
        let _ = forced;
        Backend::Soft
    })
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
        match backend() {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the back end was selected only after run-time detection
            // of avx512f + vaes + aes.
            Backend::Vaes => unsafe { x86::enc_vaes(&self.rk, data) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: selected only after run-time detection of aes + sse2.
            Backend::AesNi => unsafe { x86::enc_aesni(&self.rk, data) },
            _ => self.encrypt_soft(data),
        }
    }

    /// Encrypts `input` into `out` (same length).
    pub fn encrypt_blocks_to(&self, input: &[Block], out: &mut [Block]) {
        out.copy_from_slice(input);
        self.encrypt_blocks(out);
    }

    fn encrypt_soft(&self, data: &mut [Block]) {
        use ::aes::cipher::BlockEncrypt;
        for b in data.iter_mut() {
            let mut ga = ::aes::Block::from(b.to_bytes());
            self.soft.encrypt_block(&mut ga);
            *b = Block::from_bytes(ga.into());
        }
    }
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
    #[target_feature(enable = "aes,sse2")]
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

    /// VAES with AVX-512: 4 blocks per register, 8 registers (32 blocks) in
    /// flight.
    #[target_feature(enable = "aes,sse2,avx512f,vaes")]
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

    #[test]
    fn simd_matches_soft_on_random_lengths() {
        let a = Aes128::new(Block(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210));
        for n in [0usize, 1, 3, 4, 5, 31, 32, 33, 100, 1000] {
            let v: Vec<Block> = (0..n as u128).map(|i| Block(i.wrapping_mul(0x9e3779b97f4a7c15f39cc0605cedc835))).collect();
            let mut x = v.clone();
            a.encrypt_blocks(&mut x);
            let mut y = v.clone();
            a.encrypt_soft(&mut y);
            assert_eq!(x, y, "n={n}");
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("aes") {
                let mut z = v.clone();
                unsafe { x86::enc_aesni(&a.rk, &mut z) };
                assert_eq!(z, y);
            }
        }
    }
}
