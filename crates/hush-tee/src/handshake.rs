//! Seed agreement between the two parties' modules (SilentFlow §III-B
//! "Shared Seed Generation", following the synchronized-seed setup of
//! PPMLAC, ISCA 2022): both modules contribute randomness, the key exchange
//! is ephemeral X25519, and everything is bound to a transcript.
//!
//! Flow (the hosts only relay bytes; 2 rounds on the host channel):
//! 1. each module → peer: hello = role ‖ X25519 public key ‖ 32-byte
//!    contribution ‖ attestation report whose report data is
//!    SHA-256(hello without the report);
//! 2. each module verifies the peer's report (simulated — gives no hardware
//!    protection), computes the shared secret (rejecting a non-contributory,
//!    all-zero result), the transcript hash T = H(hello_S ‖ hello_R), and
//!    sends tag_role = HMAC(k_confirm, "confirm" ‖ role ‖ T);
//! 3. each module checks the peer's tag; the session seed is
//!    HMAC(H(dh ‖ c_S ‖ c_R), "seed" ‖ T). Every later value is derived from
//!    it with [`SessionKeys::derive`].

use crate::attest::{Attester, Report, Verifier, REPORT_LEN};
use crate::module::{ModuleRole, Request, Response};
use crate::{Error, Result, TrustedModule};
use hush_primitives::{Block, Prg};
use hush_transport::{Channel, ChannelExt};
use sha2::{Digest, Sha256};
use x25519_dalek::{PublicKey, StaticSecret};
use zeroize::Zeroize;

const HELLO_BODY: usize = 1 + 32 + 32;
/// Length of a module hello.
pub const HELLO_LEN: usize = HELLO_BODY + REPORT_LEN;

/// HMAC-SHA-256 over the concatenation of `parts`.
pub fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut ipad = [0x36u8; 64];
    let mut opad = [0x5cu8; 64];
    for i in 0..64 {
        ipad[i] ^= k[i];
        opad[i] ^= k[i];
    }
    let mut h = Sha256::new();
    h.update(ipad);
    for p in parts {
        h.update(p);
    }
    let inner = h.finalize();
    let mut h = Sha256::new();
    h.update(opad);
    h.update(inner);
    k.zeroize();
    ipad.zeroize();
    opad.zeroize();
    h.finalize().into()
}

/// Constant-time equality of two 32-byte strings.
pub fn ct_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The established session: the synchronized seed. Never leaves the module.
pub struct SessionKeys {
    seed: [u8; 32],
}

impl Drop for SessionKeys {
    fn drop(&mut self) {
        self.seed.zeroize();
    }
}

impl SessionKeys {
    /// A session from a seed made elsewhere (the dealer service, or a
    /// fixed test seed); the seed is copied and erased with the session.
    pub(crate) fn from_seed(seed: &[u8; 32]) -> Self {
        SessionKeys { seed: *seed }
    }

    /// A 128-bit key for `label`, derived from the seed.
    pub fn derive(&self, label: &str) -> Block {
        let k = hmac(&self.seed, &[b"hush-tee derive ", label.as_bytes()]);
        Block::from_slice(&k[..16])
    }
}

/// A seed agreement in progress.
pub struct Handshake {
    role: ModuleRole,
    secret: StaticSecret,
    own_hello: Vec<u8>,
    contribution: [u8; 32],
    confirm_key: [u8; 32],
    seed_key: [u8; 32],
    transcript: [u8; 32],
}

impl Drop for Handshake {
    fn drop(&mut self) {
        self.contribution.zeroize();
        self.confirm_key.zeroize();
        self.seed_key.zeroize();
    }
}

fn body_hash(body: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"hush-tee hello");
    h.update(body);
    h.finalize().into()
}

impl Handshake {
    pub fn start(role: ModuleRole, rng: &mut Prg, attester: &dyn Attester) -> (Self, Vec<u8>) {
        let mut sk = [0u8; 32];
        rng.fill_bytes(&mut sk);
        let secret = StaticSecret::from(sk);
        sk.zeroize();
        let public = PublicKey::from(&secret);
        let mut contribution = [0u8; 32];
        rng.fill_bytes(&mut contribution);
        let mut msg = Vec::with_capacity(HELLO_LEN);
        msg.push(role.byte());
        msg.extend_from_slice(public.as_bytes());
        msg.extend_from_slice(&contribution);
        let report = attester.attest(body_hash(&msg));
        msg.extend_from_slice(&report.to_bytes());
        let hs = Handshake {
            role,
            secret,
            own_hello: msg.clone(),
            contribution,
            confirm_key: [0; 32],
            seed_key: [0; 32],
            transcript: [0; 32],
        };
        (hs, msg)
    }

    /// Verifies the peer's hello and returns this module's confirmation tag.
    pub fn on_peer_hello(&mut self, hello: &[u8], verifier: &dyn Verifier) -> Result<[u8; 32]> {
        if hello.len() != HELLO_LEN {
            return Err(Error::KeyExchange(format!("peer hello of {} bytes, expected {HELLO_LEN}", hello.len())));
        }
        let peer_role = ModuleRole::from_byte(hello[0])?;
        if peer_role == self.role {
            return Err(Error::KeyExchange("both modules claim the same role".into()));
        }
        let report = Report::from_bytes(&hello[HELLO_BODY..])?;
        verifier.verify(&report, &body_hash(&hello[..HELLO_BODY]))?;
        let peer_pub: [u8; 32] = hello[1..33].try_into().expect("32 bytes");
        let peer_contrib = &hello[33..65];
        let mut dh = self.secret.diffie_hellman(&PublicKey::from(peer_pub)).to_bytes();
        if dh == [0u8; 32] {
            return Err(Error::KeyExchange("non-contributory X25519 result".into()));
        }
        let (hs, hr, cs, cr) = match self.role {
            ModuleRole::Sender => (&self.own_hello[..], hello, &self.contribution[..], peer_contrib),
            ModuleRole::Receiver => (hello, &self.own_hello[..], peer_contrib, &self.contribution[..]),
        };
        let mut t = Sha256::new();
        t.update(b"hush-tee transcript v1");
        t.update(hs);
        t.update(hr);
        self.transcript = t.finalize().into();
        let mut ikm = Sha256::new();
        ikm.update(dh);
        ikm.update(cs);
        ikm.update(cr);
        let mut ikm: [u8; 32] = ikm.finalize().into();
        self.confirm_key = hmac(&ikm, &[b"confirm key", &self.transcript]);
        self.seed_key = hmac(&ikm, &[b"seed", &self.transcript]);
        ikm.zeroize();
        dh.zeroize();
        Ok(self.tag(self.role))
    }

    fn tag(&self, role: ModuleRole) -> [u8; 32] {
        hmac(&self.confirm_key, &[b"confirm", &[role.byte()], &self.transcript])
    }

    /// Checks the peer's confirmation tag and yields the session.
    pub fn finish(self, peer_tag: &[u8; 32]) -> Result<SessionKeys> {
        if self.transcript == [0; 32] {
            return Err(Error::Refused("peer hello not yet processed".into()));
        }
        let peer_role = match self.role {
            ModuleRole::Sender => ModuleRole::Receiver,
            ModuleRole::Receiver => ModuleRole::Sender,
        };
        if !ct_eq(&self.tag(peer_role), peer_tag) {
            return Err(Error::KeyExchange("key confirmation failed (different transcripts or keys)".into()));
        }
        Ok(SessionKeys { seed: self.seed_key })
    }
}

/// Host side: runs seed agreement between `module` and the peer's module,
/// relaying the module messages over `ch` (2 rounds, 2·(161 + 32) bytes).
/// On failure the error is returned; dropping the channel then makes the
/// peer's next receive fail too.
pub fn establish(module: &mut dyn TrustedModule, ch: &mut dyn Channel, role: ModuleRole) -> Result<()> {
    let hello = match &module.call(&Request::Hello { role })? {
        Response::Hello(h) => h.clone(),
        other => return Err(unexpected(other)),
    };
    ch.send(&hello)?;
    let peer = ch.recv_exact("tee: peer module hello", HELLO_LEN)?;
    let tag = match &module.call(&Request::PeerHello { hello: peer })? {
        Response::Confirm(t) => *t,
        other => return Err(unexpected(other)),
    };
    ch.send(&tag)?;
    let peer_tag = ch.recv_exact("tee: peer module confirmation", 32)?;
    match &module.call(&Request::PeerConfirm { tag: peer_tag.try_into().expect("32 bytes") })? {
        Response::Established => Ok(()),
        other => Err(unexpected(other)),
    }
}

pub(crate) fn unexpected(r: &Response) -> Error {
    match r {
        Response::Error(e) => Error::Refused(e.clone()),
        _ => Error::Malformed("unexpected response kind".into()),
    }
}
