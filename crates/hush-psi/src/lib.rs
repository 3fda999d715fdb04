//! Private set intersection that aligns two parties' rows by ID.
//!
//! # Protocol: Diffie-Hellman PSI (ECDH-PSI) on Ristretto255
//!
//! The commutative-exponentiation PSI of Meadows (IEEE S&P 1986, "A more
//! efficient cryptographic matchmaking protocol for use in the absence of a
//! continuously available third party") and Huberman, Franklin and Hogg
//! (ACM EC 1999, "Enhancing privacy and trust in electronic communities"),
//! in the form surveyed by Pinkas, Schneider and Zohner ("Scalable private
//! set intersection based on OT extension", ACM TOPS 2018, §3 "DH-based
//! PSI"), over the prime-order Ristretto255 group (`curve25519-dalek`).
//!
//! Each party P ∈ {A, B} holds a set of distinct IDs and draws a fresh
//! secret scalar k_P. H is hash-to-group: SHA-512 over a domain label, the
//! ID's length and its bytes, mapped with the Ristretto Elligator map
//! (`RistrettoPoint::from_hash`, two maps added — the hash-to-group of
//! RFC 9496 §4.3.4 "element derivation"). Both parties act alike:
//!
//! 1. **flight 1** (both directions at once): a header (role, output mode,
//!    set size n_P) and `H(x)·k_P` for each own ID x, in an order given by a
//!    fresh secret random permutation of the party's rows.
//! 2. **flight 2** (both directions at once): each party multiplies every
//!    point it received by its own k and returns them, in the order received
//!    (`aligned` output) or shuffled by a fresh secret permutation (`size`
//!    output, the PSI-cardinality variant of Huberman et al.).
//!
//! Each party now holds D_A = {H(x)·k_A·k_B : x ∈ A} and D_B = {H(y)·k_A·k_B
//! : y ∈ B}, both as canonical 32-byte encodings. Since H is injective up to
//! collisions of SHA-512 and Elligator (negligible), x = y ⇔ equal codes.
//! In `aligned` mode each party knows which of its own rows each of its
//! codes belongs to, so it learns its rows in the intersection; both sort
//! the intersection by the code bytes, which gives both the same order
//! (row i of one output and row i of the other carry the same ID) — an order
//! that is pseudorandom and reveals nothing about either file's row order.
//! In `size` mode its own codes come back shuffled, so it can only count.
//!
//! Cost: 2 rounds; each party sends 18 + 32·n_own + 32·n_peer bytes; each
//! party hashes n_own IDs to the group and computes n_own + n_peer
//! variable-base scalar multiplications (in parallel with rayon). Both
//! flights stream in chunks (see [`run`]), so computation overlaps the
//! transfer and memory for the wire stays at one chunk.
//!
//! # Security (semi-honest)
//!
//! In the random-oracle model and under the decisional Diffie-Hellman
//! assumption in Ristretto255 (a prime-order group of ~2^252 elements,
//! ~126-bit security), against a semi-honest peer each party learns exactly:
//!
//! * the **peer's set size** (it is in the header and is the number of
//!   points received — the protocol cannot hide it as written);
//! * in `aligned` mode, **which of its own IDs are in the intersection**
//!   (hence the intersection itself, as its own rows) and the shared order;
//!   in `size` mode **only the intersection's size**.
//!
//! Sketch: the peer's points H(y)·k_B for y ∉ A and the codes H(y)·k_A·k_B
//! for y ∉ A are, under DDH with H a random oracle, indistinguishable from
//! random group elements given everything else the party sees (the
//! standard reduction of Huberman et al. / Pinkas et al.), so a simulator
//! that knows the intersection (or its size) and the peer's set size can
//! produce the view. The secret scalars are drawn from the OS generator and
//! zeroized when dropped; both permutations are secret, so the order of
//! points on the wire carries nothing about row order in the files.
//!
//! Not covered: a **malicious** peer may send points that are not of the
//! form H(y)·k (it could, e.g., test a guessed ID x by sending H(x)·r and
//! checking — exactly what an honest query of x would reveal anyway, but
//! it can also return wrong codes and falsify the intersection). Received
//! points are checked to be valid, non-identity Ristretto encodings and
//! free of duplicates; that protects this side from malformed input, not
//! from a lying peer. IDs of low entropy (phone numbers) are exposed to a
//! party that is *in* the protocol only through the intersection, but a
//! malicious peer could include many guesses in its set; that is inherent
//! to PSI and limited here only by `max_peer_ids`.
//!
//! **Hiding the set sizes** would take padding both sets to agreed public
//! upper bounds with dummy elements that cannot match (e.g. random 32-byte
//! strings under a separate domain), paying for the bound instead of the
//! true size; the intersection's size still leaks in `aligned` mode by
//! definition. Hiding even the intersection from both (computing on it
//! under secret sharing, as in circuit-PSI — Pinkas-Schneider-Tkachenko-
//! Yanai, Eurocrypt 2019 — or Private-ID/PS³I style protocols that output
//! shared payloads) is not implemented here.

pub mod csv;
mod party;

pub use party::{connect, psi_party, PartyPsi};

use curve25519_dalek::ristretto::{CompressedRistretto, RistrettoPoint};
use curve25519_dalek::scalar::Scalar;
use hush_transport::{Channel, ChannelExt};
use rand_core::{CryptoRng, RngCore};
use rayon::prelude::*;
use sha2::{Digest, Sha512};
use std::collections::{HashMap, HashSet};
use zeroize::Zeroizing;

/// Errors of a PSI run. Everything a peer can send wrongly maps to one of
/// these; none panics.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Transport(#[from] hush_transport::Error),
    #[error("duplicate ID {id:?} (rows {first} and {second}); IDs must be unique within a party's set")]
    DuplicateId { id: String, first: usize, second: usize },
    #[error("PSI handshake: {0}")]
    Handshake(String),
    #[error("peer announced {got} IDs, more than the limit of {max} (raise max_peer_ids / --max-peer-ids)")]
    TooMany { got: u64, max: usize },
    #[error("peer sent an invalid group element at position {index} (not a canonical Ristretto255 encoding, or the identity)")]
    InvalidPoint { index: usize },
    #[error("peer sent the same group element twice ({what}, position {index}); an honest peer never does")]
    PeerDuplicate { what: &'static str, index: usize },
    #[error("{0}")]
    Input(String),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

pub type Result<T> = std::result::Result<T, Error>;

/// The two ends of a PSI. Both learn the same output; the roles only name
/// the ends (the peer must take the other one) and fix which is the
/// "labels" side when PSI precedes training.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Sender,
    Receiver,
}

impl Role {
    pub fn parse(s: &str) -> Result<Role> {
        match s {
            "sender" => Ok(Role::Sender),
            "receiver" => Ok(Role::Receiver),
            _ => Err(Error::Input(format!("--role {s:?}: expected sender or receiver"))),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Role::Sender => "sender",
            Role::Receiver => "receiver",
        }
    }
    fn code(self) -> u8 {
        match self {
            Role::Sender => 1,
            Role::Receiver => 2,
        }
    }
}

/// What the parties learn: their aligned rows of the intersection, or only
/// its size. Both must agree (checked in the handshake).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    Aligned,
    SizeOnly,
}

impl Output {
    fn code(self) -> u8 {
        match self {
            Output::Aligned => 1,
            Output::SizeOnly => 2,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Output::Aligned => "aligned",
            Output::SizeOnly => "size",
        }
    }
}

/// Default cap on the peer's set size (checked before allocating: 32 bytes
/// per ID, so 2^25 IDs are 1 GiB of points).
pub const DEFAULT_MAX_PEER_IDS: usize = 1 << 25;

/// Points per streamed chunk (512 KiB on the wire). Both parties must use
/// the same (it fixes the framing); the unit tests use small chunks so that
/// every path crosses chunk boundaries.
#[cfg(not(test))]
pub const CHUNK: usize = 1 << 14;
#[cfg(test)]
pub const CHUNK: usize = 16;

/// Extra wait for the returned codes with `--size-only`, per point of both
/// sets (the peer must exponentiate all of them before it can shuffle).
pub const SIZE_ONLY_WAIT_PER_POINT: std::time::Duration = std::time::Duration::from_millis(1);

/// Settings of one run.
#[derive(Clone, Debug)]
pub struct PsiConfig {
    pub output: Output,
    /// Largest peer set accepted.
    pub max_peer_ids: usize,
    /// Receive timeout of the channel during (and after) the run.
    pub timeout: std::time::Duration,
}

impl Default for PsiConfig {
    fn default() -> Self {
        Self { output: Output::Aligned, max_peer_ids: DEFAULT_MAX_PEER_IDS, timeout: hush_transport::DEFAULT_TIMEOUT }
    }
}

/// What one party ends with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PsiOutput {
    /// `aligned` mode: this party's row indices (into its input) of the
    /// intersection, in the order shared by both parties.
    pub rows: Option<Vec<usize>>,
    /// Size of the intersection.
    pub intersection: usize,
    pub own_size: usize,
    pub peer_size: usize,
}

const MAGIC: &[u8; 8] = b"hushpsi1";
/// Header bytes: magic, role, output mode, set size (u64 LE).
pub const HEADER_LEN: usize = 8 + 1 + 1 + 8;
/// Bytes of one group element on the wire.
pub const POINT_LEN: usize = 32;
const DOMAIN: &[u8] = b"hush-psi v1 ristretto255 hash-to-group";

/// The hash of one ID to the group: SHA-512 over a domain label, the ID's
/// length (u64 LE) and its bytes, mapped by `RistrettoPoint::from_hash`.
pub fn hash_to_group(id: &[u8]) -> RistrettoPoint {
    let mut h = Sha512::new();
    h.update(DOMAIN);
    h.update((id.len() as u64).to_le_bytes());
    h.update(id);
    RistrettoPoint::from_hash(h)
}

/// Refuses duplicate IDs with the first repeated one and both rows.
pub fn check_distinct<T: AsRef<[u8]>>(ids: &[T]) -> Result<()> {
    let mut seen: HashMap<&[u8], usize> = HashMap::with_capacity(ids.len());
    for (i, id) in ids.iter().enumerate() {
        if let Some(&first) = seen.get(id.as_ref()) {
            return Err(Error::DuplicateId { id: String::from_utf8_lossy(id.as_ref()).into_owned(), first, second: i });
        }
        seen.insert(id.as_ref(), i);
    }
    Ok(())
}

/// A secret uniformly random permutation of 0..n (Fisher-Yates).
fn permutation<R: RngCore + CryptoRng>(n: usize, rng: &mut R) -> Vec<usize> {
    let mut p: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        p.swap(i, j);
    }
    p
}

fn header(role: Role, output: Output, n: usize) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(MAGIC);
    h[8] = role.code();
    h[9] = output.code();
    h[10..].copy_from_slice(&(n as u64).to_le_bytes());
    h
}

/// Checks the peer's header; returns its set size (capped).
fn check_header(h: &[u8], role: Role, cfg: &PsiConfig) -> Result<usize> {
    if h.len() != HEADER_LEN || &h[..8] != MAGIC {
        return Err(Error::Handshake("the peer does not run hush PSI v1 (unexpected header)".into()));
    }
    if h[8] == role.code() {
        return Err(Error::Handshake(format!("both parties took --role {}; one must be sender, the other receiver", role.name())));
    }
    if h[8] != Role::Sender.code() && h[8] != Role::Receiver.code() {
        return Err(Error::Handshake(format!("unknown peer role code {}", h[8])));
    }
    if h[9] != cfg.output.code() {
        let theirs = if h[9] == Output::Aligned.code() { "aligned rows" } else if h[9] == Output::SizeOnly.code() { "only the size" } else { "an unknown output" };
        return Err(Error::Handshake(format!(
            "output mismatch: this side asked for {}, the peer for {theirs} (both must agree on --size-only)",
            if cfg.output == Output::Aligned { "aligned rows" } else { "only the size" }
        )));
    }
    let n = u64::from_le_bytes(h[10..18].try_into().expect("8 bytes"));
    if n > cfg.max_peer_ids as u64 {
        return Err(Error::TooMany { got: n, max: cfg.max_peer_ids });
    }
    Ok(n as usize)
}

/// Multiplies many compressed peer points by `k` (rayon); refuses invalid
/// or identity encodings.
fn exponentiate_peer(points: &[u8], k: &Scalar) -> Result<Vec<[u8; 32]>> {
    points
        .par_chunks_exact(POINT_LEN)
        .enumerate()
        .map(|(i, c)| {
            let p = CompressedRistretto::from_slice(c).ok().and_then(|c| c.decompress()).ok_or(Error::InvalidPoint { index: i })?;
            if p == RistrettoPoint::default() {
                return Err(Error::InvalidPoint { index: i });
            }
            Ok((p * k).compress().to_bytes())
        })
        .collect()
}

/// Runs one party of the PSI over `ch` (see the module doc). `ids` are this
/// party's IDs (distinct; a duplicate is refused before anything is sent).
/// Randomness (the secret scalar and permutations) comes from `rng`.
///
/// Both flights stream in chunks of [`CHUNK`] points: a party computes
/// and sends its points chunk by chunk, and returns each chunk of the
/// peer's points as soon as it has exponentiated it, so no receive waits
/// longer than about one chunk's computation (the channel's timeout is set
/// to `cfg.timeout`). With `--size-only` the returned codes must all be
/// shuffled before any is sent, so the wait for them is widened by
/// [`SIZE_ONLY_WAIT_PER_POINT`] per point of both sets.
pub fn run<C, R, T>(ch: &mut C, role: Role, ids: &[T], cfg: &PsiConfig, rng: &mut R) -> Result<PsiOutput>
where
    C: Channel + ?Sized,
    R: RngCore + CryptoRng,
    T: AsRef<[u8]> + Sync,
{
    check_distinct(ids)?;
    let chunk = CHUNK;
    ch.set_timeout(cfg.timeout);
    let n = ids.len();
    let key = Zeroizing::new(Scalar::random(rng));
    let perm = permutation(n, rng);
    // flight 1: own points, in the secret order `perm`, chunk by chunk
    ch.send(&header(role, cfg.output, n))?;
    let mut buf = vec![0u8; chunk.min(n) * POINT_LEN];
    for rows in perm.chunks(chunk) {
        let out = &mut buf[..rows.len() * POINT_LEN];
        // by reference: no copy of the secret scalar outside its Zeroizing box
        #[allow(clippy::op_ref)]
        out.par_chunks_exact_mut(POINT_LEN).zip(rows.par_iter()).for_each(|(o, &row)| {
            o.copy_from_slice((hash_to_group(ids[row].as_ref()) * &*key).compress().as_bytes());
        });
        ch.send_chunked(out)?;
    }
    let h = ch.recv()?;
    let m = check_header(&h, role, cfg)?;
    // flight 2: the peer's points times our key, in its order (aligned:
    // each chunk returned at once) or shuffled (size only: all at the end)
    let mut seen: HashSet<[u8; 32]> = HashSet::with_capacity(m.min(chunk.saturating_mul(64)));
    let mut codes_peer: Vec<[u8; 32]> = Vec::with_capacity(m.min(chunk.saturating_mul(64)));
    let mut theirs = vec![0u8; chunk.min(m) * POINT_LEN];
    let mut done = 0usize;
    while done < m {
        let k = chunk.min(m - done);
        let inp = &mut theirs[..k * POINT_LEN];
        ch.recv_chunked_into("PSI peer points", inp)?;
        for (i, c) in inp.chunks_exact(POINT_LEN).enumerate() {
            if !seen.insert(c.try_into().expect("32 bytes")) {
                return Err(Error::PeerDuplicate { what: "its points", index: done + i });
            }
        }
        let codes = exponentiate_peer(inp, &key).map_err(|e| match e {
            Error::InvalidPoint { index } => Error::InvalidPoint { index: done + index },
            e => e,
        })?;
        if cfg.output == Output::Aligned {
            let flat: Vec<u8> = codes.iter().flatten().copied().collect();
            ch.send_chunked(&flat)?;
        }
        codes_peer.extend_from_slice(&codes);
        done += k;
    }
    drop(seen);
    if cfg.output == Output::SizeOnly {
        let p = permutation(m, rng);
        let shuffled: Vec<[u8; 32]> = p.iter().map(|&i| codes_peer[i]).collect();
        for c in shuffled.chunks(chunk) {
            let flat: Vec<u8> = c.iter().flatten().copied().collect();
            ch.send_chunked(&flat)?;
        }
        ch.set_timeout(cfg.timeout + SIZE_ONLY_WAIT_PER_POINT * u32::try_from(n.saturating_add(m)).unwrap_or(u32::MAX));
    }
    let mut codes_own = vec![0u8; n * POINT_LEN];
    for c in codes_own.chunks_mut(chunk * POINT_LEN) {
        ch.recv_chunked_into("PSI returned codes", c)?;
    }
    ch.set_timeout(cfg.timeout);
    let set: HashSet<&[u8; 32]> = {
        let mut s = HashSet::with_capacity(m);
        for (i, c) in codes_peer.iter().enumerate() {
            if !s.insert(c) {
                // distinct valid points times a nonzero scalar stay distinct
                return Err(Error::PeerDuplicate { what: "its points", index: i });
            }
        }
        s
    };
    let mut seen_own = HashSet::with_capacity(n);
    let mut hits: Vec<(&[u8; 32], usize)> = Vec::new();
    for (k, c) in codes_own.chunks_exact(POINT_LEN).enumerate() {
        let c: &[u8; 32] = c.try_into().expect("32 bytes");
        if !seen_own.insert(c) {
            return Err(Error::PeerDuplicate { what: "the returned codes", index: k });
        }
        if set.contains(c) {
            hits.push((c, perm[k]));
        }
    }
    let intersection = hits.len();
    let rows = match cfg.output {
        Output::Aligned => {
            hits.sort_unstable();
            Some(hits.into_iter().map(|(_, r)| r).collect())
        }
        Output::SizeOnly => None,
    };
    Ok(PsiOutput { rows, intersection, own_size: n, peer_size: m })
}

/// Bytes each party sends in a run with `n_own` and `n_peer` IDs and the
/// given frame size (payload only; the transport adds its frame headers).
pub fn bytes_sent(n_own: usize, n_peer: usize) -> u64 {
    (HEADER_LEN + POINT_LEN * (n_own + n_peer)) as u64
}

/// Rounds of one run (both flights go both ways at once).
pub const ROUNDS: u32 = 2;

#[cfg(test)]
mod tests;
