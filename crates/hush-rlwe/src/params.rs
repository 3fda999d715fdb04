//! Parameter sets (written down here and in the crate docs).
//!
//! Security source: the Homomorphic Encryption Security Standard
//! (Albrecht et al., HomomorphicEncryption.org, 2018), its table for a
//! uniform ternary secret and error of standard deviation σ ≈ 3.2, 128-bit
//! classical security: log q ≤ 109 for N = 4096, log q ≤ 218 for N = 8192
//! (the bounds SEAL uses too). The standard's figures assume a discrete
//! Gaussian error; hush uses a centered binomial of the same variance
//! (σ ≈ 3.24), a common substitution the standard does not cover by itself.
//! hush samples the secret uniformly from {−1, 0, 1} and errors from the
//! centered binomial distribution with η = 21 (σ = √(η/2) ≈ 3.24, exact
//! bound |e| ≤ 21) — see [`crate::ring::ERR_ETA`].
//!
//! | set | N | primes (bits) | log q | use |
//! |---|---|---|---|---|
//! | [`Params::he128_n4096`] | 4096 | 55 + 54 | < 109 | ℓ up to ~24 with worst-case weights (feasibility is checked per layer) |
//! | [`Params::he128_n8192_p50`] | 8192 | 4 × 50 | < 200 | **the default** of the Cheetah linear layers (ℓ ≤ 47): primes below 2^50 take tfhe-ntt's AVX-512 IFMA kernels |
//! | [`Params::he128_n8192_p50x3`] | 8192 | 3 × 50 | < 150 | row selection (embedding lookups) at ℓ = 30, whose one-ciphertext flooding budget fits 149 bits |
//! | [`Params::he128_n8192`] | 8192 | 60 + 60 + 60 | < 180 | the previous default (ℓ ≤ 47; fewer primes, faster without IFMA) |
//! | [`Params::he128_n8192_wide`] | 8192 | 55 + 55 + 54 + 54 | < 218 | larger ℓ / more flooding headroom |
//! | [`Params::insecure_test_n256`] | 256 | 60 + 60 + 60 | < 180 | **tests only: N = 256 gives no security** |
//!
//! **Why four 50-bit primes by default.** Security depends on N, log q and
//! the secret/error distributions only: 4 × 50 bits gives log q < 200 ≤ 218,
//! inside the standard's 128-bit row for N = 8192, the same row as the
//! other two N = 8192 sets (a *smaller* q than the standard's bound only
//! adds security margin; the ~180-bit set has more, the 218-bit set less).
//! Correctness and circuit privacy are checked per layer by
//! [`crate::cheetah::budget`] against ⌊log q⌋ (flooding needs F + ℓ + 4 ≤
//! ⌊log q⌋), so the larger q leaves *more* room for the κ = 64 flooding, not
//! less. Speed: below 2^50 a residue fits the 52-bit IFMA multiplier
//! (`vpmadd52luq`), where tfhe-ntt's forward NTT is ~2× and its pointwise
//! product ~3× faster per prime than its 62-bit AVX-512 path, which more than
//! pays for the fourth prime (measured: [`crate::cheetah`]'s server ~1.7×
//! per polynomial product on this machine kind). Uploads grow by 200/180
//! (each residue travels in 50 bits); responses are switched to 2^k and do
//! not change. On CPUs without IFMA the 3 × 60 set is cheaper.
//!
//! Every prime is ≡ 1 mod 2^14 (so it has the 2N-th roots of unity the
//! negacyclic NTT needs for every N ≤ 8192) and lies below 2^62 (tfhe-ntt's
//! fast reduction path); [`crate::ring::Context::new`] checks each with
//! tfhe-ntt's `Plan::try_new` (primality and roots).

/// One RLWE parameter set: ring degree N, RNS primes q = Π p_i.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    pub name: &'static str,
    /// Ring degree N (a power of two): R_q = Z_q\[X\]/(X^N + 1).
    pub n: usize,
    /// The RNS primes (product q).
    pub primes: Vec<u64>,
    /// Whether the set meets the 128-bit HE standard bound.
    pub secure: bool,
}

/// Four primes ≡ 1 mod 2^14 just below 2^50 (the largest four such NTT-friendly primes).
const P50: [u64; 4] = [0x3_ffff_ffff_c001, 0x3_ffff_fffc_c001, 0x3_ffff_ffef_4001, 0x3_ffff_ffe9_4001];
const P60: [u64; 3] = [0x0fff_ffff_ffff_c001, 0x0fff_ffff_fffe_8001, 0x0fff_ffff_fffd_8001];

impl Params {
    /// N = 4096, q = p_55 · p_54 (log q < 109): HE standard, 128 bits.
    pub fn he128_n4096() -> Params {
        Params { name: "he128-n4096", n: 4096, primes: vec![0x7f_ffff_fffb_4001, 0x3f_ffff_ffef_8001], secure: true }
    }
    /// N = 8192, q = four primes below 2^50 (log q < 200 ≤ 218): HE standard,
    /// 128 bits; the default of the HE linear layers (see the module docs).
    pub fn he128_n8192_p50() -> Params {
        Params { name: "he128-n8192-p50", n: 8192, primes: P50.to_vec(), secure: true }
    }
    /// N = 8192, q = the first three primes of [`Params::he128_n8192_p50`]
    /// (log q < 150 ≤ 218): HE standard, 128 bits (the same row as the other
    /// N = 8192 sets, with more margin: a smaller q). Used by the graph
    /// runtime's embedding selection at ℓ = 30
    /// (`hush_rlwe::cheetah::select`), whose flooding needs
    /// F + ℓ + 4 = 145 ≤ 149 bits; each table coefficient travels in 150 bits
    /// instead of 200.
    pub fn he128_n8192_p50x3() -> Params {
        Params { name: "he128-n8192-p50x3", n: 8192, primes: P50[..3].to_vec(), secure: true }
    }
    /// N = 8192, q = three 60-bit primes (log q < 180 ≤ 218): HE standard, 128 bits.
    pub fn he128_n8192() -> Params {
        Params { name: "he128-n8192", n: 8192, primes: P60.to_vec(), secure: true }
    }
    /// N = 8192, q = four primes of 55, 55, 54, 54 bits (log q < 218): HE standard, 128 bits.
    pub fn he128_n8192_wide() -> Params {
        Params {
            name: "he128-n8192-wide",
            n: 8192,
            primes: vec![0x7f_ffff_fffb_4001, 0x7f_ffff_ffea_c001, 0x3f_ffff_ffef_8001, 0x3f_ffff_ffeb_8001],
            secure: true,
        }
    }
    /// **Insecure, tests only**: N = 256 with the 180-bit modulus of
    /// [`Params::he128_n8192`]. Small enough for fast tests of tiling.
    pub fn insecure_test_n256() -> Params {
        Params { name: "INSECURE-test-n256", n: 256, primes: P60.to_vec(), secure: false }
    }
    /// Σ log2 p_i (an upper bound on log2 q).
    pub fn log_q(&self) -> f64 {
        self.primes.iter().map(|&p| (p as f64).log2()).sum()
    }
    /// The HE standard's 128-bit bound on log q for this N (None if the
    /// standard has no row for it).
    pub fn standard_max_log_q(n: usize) -> Option<u32> {
        match n {
            1024 => Some(27),
            2048 => Some(54),
            4096 => Some(109),
            8192 => Some(218),
            16384 => Some(438),
            32768 => Some(881),
            _ => None,
        }
    }
    /// A short stable id for the wire (both parties must agree): log2 N, the
    /// number of primes, a one-byte digest of all primes, and `secure`.
    /// (The digest byte was the top byte of the first prime, which did not
    /// tell the 55-bit sets from the 50-bit one.)
    pub fn id(&self) -> [u8; 4] {
        let digest = self.primes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &p| (h ^ p).wrapping_mul(0x0000_0100_0000_01b3));
        [self.n.trailing_zeros() as u8, self.primes.len() as u8, (digest >> 56) as u8, self.secure as u8]
    }
}
