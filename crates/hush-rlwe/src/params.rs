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
//! | [`Params::he128_n8192`] | 8192 | 60 + 60 + 60 | < 180 | the default of the Cheetah linear layers (ℓ ≤ 48) |
//! | [`Params::he128_n8192_wide`] | 8192 | 55 + 55 + 54 + 54 | < 218 | larger ℓ / more flooding headroom |
//! | [`Params::insecure_test_n256`] | 256 | 60 + 60 + 60 | < 180 | **tests only: N = 256 gives no security** |
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

const P60: [u64; 3] = [0x0fff_ffff_ffff_c001, 0x0fff_ffff_fffe_8001, 0x0fff_ffff_fffd_8001];

impl Params {
    /// N = 4096, q = p_55 · p_54 (log q < 109): HE standard, 128 bits.
    pub fn he128_n4096() -> Params {
        Params { name: "he128-n4096", n: 4096, primes: vec![0x7f_ffff_fffb_4001, 0x3f_ffff_ffef_8001], secure: true }
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
    /// A short stable id for the wire (both parties must agree).
    pub fn id(&self) -> [u8; 4] {
        [self.n.trailing_zeros() as u8, self.primes.len() as u8, (self.primes[0] >> 56) as u8, self.secure as u8]
    }
}
