//! Replicated Boolean shares (Araki et al., CCS 2016, §2.1; the datacenter
//! paper's §II-C and Fig. 1).
//!
//! A bit `v` is shared among parties `P_1, P_2, P_3` as pairs `(x_i, a_i)`
//! with `x_1 ⊕ x_2 ⊕ x_3 = 0` and `a_i = x_{i−1} ⊕ v` (indices mod 3). Any
//! single pair is uniformly random, so one party learns nothing; any two
//! pairs determine `v`. In code parties are numbered 0, 1, 2 and `i − 1`
//! means `(i + 2) mod 3`.
//!
//! Everything here is bit-sliced: a "bit" is a `u64` word holding 64
//! independent instances, and the functions work on slices of words.
//!
//! * XOR of two shared values is the XOR of the pairs (Fig. 2), with no
//!   communication.
//! * NOT flips `a_i` at every party (`x_i` unchanged).
//! * A public constant `c` is the pair `(0, c)` at every party.
//! * Reconstruction toward an output party: each party sends `a_i`; since
//!   `⊕ x_{i−1} = 0`, `a_1 ⊕ a_2 ⊕ a_3 = v`.

use crate::prf::Prg;

/// The party before `i` in the ring.
pub fn prev(i: usize) -> usize {
    (i + 2) % 3
}
/// The party after `i` in the ring.
pub fn next(i: usize) -> usize {
    (i + 1) % 3
}

/// Shares of one word-vector `v`, one `(x, a)` pair per party, written into
/// `out[i].0` / `out[i].1` (each the length of `v`). `x_0, x_1` are drawn
/// from `rng`, `x_2 = x_0 ⊕ x_1`.
pub fn share_words(v: &[u64], rng: &mut Prg, out: &mut [(&mut [u64], &mut [u64]); 3]) {
    let n = v.len();
    rng.fill_words(&mut out[0].0[..n]);
    rng.fill_words(&mut out[1].0[..n]);
    for k in 0..n {
        let t = out[0].0[k] ^ out[1].0[k];
        out[2].0[k] = t;
    }
    for i in 0..3 {
        let p = prev(i);
        for k in 0..n {
            let xp = out[p].0[k];
            out[i].1[k] = xp ^ v[k];
        }
    }
}

/// Convenience: shares of `v` as owned vectors `[(x_i, a_i)]`.
pub fn share(v: &[u64], rng: &mut Prg) -> [(Vec<u64>, Vec<u64>); 3] {
    let n = v.len();
    let mut s: [(Vec<u64>, Vec<u64>); 3] = std::array::from_fn(|_| (vec![0; n], vec![0; n]));
    {
        let [s0, s1, s2] = &mut s;
        let mut refs = [
            (&mut s0.0[..], &mut s0.1[..]),
            (&mut s1.0[..], &mut s1.1[..]),
            (&mut s2.0[..], &mut s2.1[..]),
        ];
        share_words(v, rng, &mut refs);
    }
    s
}

/// Reconstruction from the three `a_i` (output party).
pub fn reconstruct(a: [&[u64]; 3]) -> Vec<u64> {
    a[0].iter().zip(a[1]).zip(a[2]).map(|((p, q), r)| p ^ q ^ r).collect()
}

/// The pair of party `i` of a value that all parties can compute without
/// talking: a random sharing of a random value from the pairwise PRF
/// streams `s_i` (own key) and `s_{i−1}` (previous party's key): `x_i = s_i
/// ⊕ s_{i−1}`, `a_i = s_i`, so that `v = s_1 ⊕ s_2 ⊕ s_3`. Used by tests.
pub fn random_pair_from_streams(s_own: &[u64], s_prev: &[u64], x: &mut [u64], a: &mut [u64]) {
    for k in 0..x.len() {
        x[k] = s_own[k] ^ s_prev[k];
        a[k] = s_own[k];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_and_reconstruct() {
        let mut rng = Prg::from_seed([1; 16]);
        let v: Vec<u64> = (0..10).map(|i| i * 0x0123_4567_89ab_cdef).collect();
        let s = share(&v, &mut rng);
        for k in 0..v.len() {
            assert_eq!(s[0].0[k] ^ s[1].0[k] ^ s[2].0[k], 0);
            for i in 0..3 {
                assert_eq!(s[i].1[k], s[prev(i)].0[k] ^ v[k]);
            }
        }
        assert_eq!(reconstruct([&s[0].1, &s[1].1, &s[2].1]), v);
    }
}
