//! The AND protocol of Araki, Furukawa, Lindell, Nof and Ohara,
//! "High-Throughput Semi-Honest Secure Three-Party Computation with an
//! Honest Majority" (CCS 2016), §2.2–2.3, as drawn in the datacenter paper's
//! Fig. 3 (a: correlated randomness, b: the local circuit, c: re-sharing).
//!
//! **Security model.** Semi-honest, honest majority: at most one of the
//! three parties is corrupted and it follows the protocol. A single party's
//! view (its pair of every wire, and the `r_{i−1}` it receives) is
//! uniformly distributed whatever the inputs; two colluding parties learn
//! everything. There is no protection against a party that deviates.
//!
//! **Correlated randomness (Fig. 3a).** At start-up each party `P_i` samples
//! a PRF key `k_i` and sends it to the next party `P_{i+1}` (Araki et al.
//! §2.2), so `P_i` holds `k_i` and `k_{i−1}`. For the `id`-th AND gate it
//! computes `α_i = F_{k_i}(id) ⊕ F_{k_{i−1}}(id)`; the three `α_i` XOR to 0,
//! and `α_i` is unpredictable to `P_{i+1}`, who lacks `k_{i−1}`. `F` is
//! AES-128 ([`crate::prf`]); `id` is (job nonce, word index).
//!
//! **AND (Fig. 3b, 3c).** With pairs `(x_i, a_i)` of `v` and `(y_i, b_i)` of
//! `w`, party `P_i` computes `r_i = x_i y_i ⊕ a_i b_i ⊕ α_i` and sends it to
//! `P_{i+1}` (one bit per AND). Then `r_1 ⊕ r_2 ⊕ r_3 = v w`, and the new
//! pair is `(z_i, c_i) = (r_i ⊕ r_{i−1}, r_i)`: indeed `z_1⊕z_2⊕z_3 = 0` and
//! `z_{i−1} ⊕ vw = r_{i−1} ⊕ r_{i−2} ⊕ r_1 ⊕ r_2 ⊕ r_3 = r_i = c_i`.
//!
//! **View argument.** P_i's view is its pairs (x_i, a_i) of every wire and
//! the r_{i−1} it receives. Input pairs are a fresh 3-out-of-3 XOR sharing,
//! so any one party's pairs are uniform. Each received
//! r_{i−1} = x_{i−1}y_{i−1} ⊕ a_{i−1}b_{i−1} ⊕ α_{i−1} contains
//! F_{k_{i−2}}(id) inside α_{i−1} = F_{k_{i−1}}(id) ⊕ F_{k_{i−2}}(id), and
//! P_i lacks k_{i−2} = k_{i+1} (each party holds only its own key and its
//! predecessor's), so r_{i−1} is pseudorandom to P_i, fresh per gate and
//! job (`id` = job nonce, word index). Hence the view is simulated by
//! uniform bits plus P_i's output pairs (outputs are opened only to the
//! output party). `tests/protocol.rs` (`single_party_view_is_uniform`)
//! checks it on AES-128: every view bit of every party is 1 with
//! frequency ≈ 1/2 over 400 runs, for two different inputs.
//!
//! The kernels below are IO-free and bit-sliced (each `u64` is 64 AND gates
//! of independent instances); [`crate::engine`] moves the messages.

use crate::error::{Error, Result};
use crate::prf::Prf;
use hush_transport::{Channel, ChannelExt};

/// One party's pairwise PRF keys: its own `k_i` and the previous party's
/// `k_{i−1}`.
#[derive(Clone)]
pub struct PartyKeys {
    pub party: usize,
    own: Prf,
    from_prev: Prf,
}

impl PartyKeys {
    /// Keys from known values (tests, deterministic mode).
    pub fn from_keys(party: usize, own: [u8; 16], from_prev: [u8; 16]) -> Self {
        PartyKeys { party, own: Prf::new(own), from_prev: Prf::new(from_prev) }
    }

    /// Key agreement (once per ring session): send `k_i` to the next party,
    /// receive `k_{i−1}` from the previous one.
    pub fn setup(party: usize, own: [u8; 16], to_next: &mut dyn Channel, from_prev: &mut dyn Channel) -> Result<Self> {
        if party > 2 {
            return Err(Error::Input(format!("party index {party} is not 0, 1 or 2")));
        }
        to_next.send(&own).map_err(Error::transport("key setup (send k_i to the next party)"))?;
        let k = from_prev
            .recv_exact("key setup (k_{i-1} from the previous party)", 16)
            .map_err(Error::transport("key setup (receive k_{i-1})"))?;
        Ok(Self::from_keys(party, own, k.try_into().expect("length checked")))
    }

    /// `α_i` for words `[word_off, word_off + out.len())` of the job `nonce`:
    /// `F_{k_i} ⊕ F_{k_{i−1}}`, both streams in one pass ([`Prf::fill_words_xor`]).
    pub fn alpha(&self, nonce: u64, word_off: u64, out: &mut [u64]) {
        self.own.fill_words_xor(&self.from_prev, nonce, word_off, out);
    }
}

/// `dst ^= src`.
#[inline(always)]
pub fn xor_into(dst: &mut [u64], src: &[u64]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= *s;
    }
}

/// Fig. 3b: `r = (x ∧ y) ⊕ (a ∧ b) ⊕ α`, written over `alpha_r` (which
/// holds `α` on entry and `r` on exit).
#[inline(always)]
pub fn and_local(x: &[u64], a: &[u64], y: &[u64], b: &[u64], alpha_r: &mut [u64]) {
    let n = alpha_r.len();
    let (x, a, y, b) = (&x[..n], &a[..n], &y[..n], &b[..n]);
    for k in 0..n {
        alpha_r[k] ^= (x[k] & y[k]) ^ (a[k] & b[k]);
    }
}

/// Fig. 3c: the new pair `(z, c) = (r ⊕ r_prev, r)`.
#[inline(always)]
pub fn and_finish(r: &[u64], r_prev: &[u64], z: &mut [u64], c: &mut [u64]) {
    let n = r.len();
    let (r_prev, z, c) = (&r_prev[..n], &mut z[..n], &mut c[..n]);
    for k in 0..n {
        z[k] = r[k] ^ r_prev[k];
        c[k] = r[k];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prf::Prg;
    use crate::share::{prev, reconstruct, share};

    #[test]
    fn alphas_xor_to_zero_and_and_is_correct() {
        let k = [[1u8; 16], [2u8; 16], [3u8; 16]];
        let keys: Vec<PartyKeys> = (0..3).map(|i| PartyKeys::from_keys(i, k[i], k[prev(i)])).collect();
        let n = 37;
        let mut rng = Prg::from_seed([9; 16]);
        let mut v = vec![0u64; n];
        let mut w = vec![0u64; n];
        rng.fill_words(&mut v);
        rng.fill_words(&mut w);
        let sv = share(&v, &mut rng);
        let sw = share(&w, &mut rng);
        let mut r: Vec<Vec<u64>> = vec![vec![0; n]; 3];
        for i in 0..3 {
            keys[i].alpha(5, 3, &mut r[i]);
        }
        for k in 0..n {
            assert_eq!(r[0][k] ^ r[1][k] ^ r[2][k], 0);
        }
        for i in 0..3 {
            and_local(&sv[i].0, &sv[i].1, &sw[i].0, &sw[i].1, &mut r[i]);
        }
        let mut out: Vec<(Vec<u64>, Vec<u64>)> = vec![(vec![0; n], vec![0; n]); 3];
        for i in 0..3 {
            let (z, c) = &mut out[i];
            and_finish(&r[i], &r[prev(i)], z, c);
        }
        let vw: Vec<u64> = v.iter().zip(&w).map(|(a, b)| a & b).collect();
        assert_eq!(reconstruct([&out[0].1, &out[1].1, &out[2].1]), vw);
        for k in 0..n {
            assert_eq!(out[0].0[k] ^ out[1].0[k] ^ out[2].0[k], 0);
        }
    }
}
