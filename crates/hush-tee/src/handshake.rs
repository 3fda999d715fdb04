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
//!
//! ## Hardware attestation of the peer's module (`--module-attest POLICY`)
//!
//! The simulated report above protects nothing (its key is public). A
//! module running in a confidential VM (`hush-tee-module --attest
//! snp|tdx`, AMD SEV-SNP or Intel TDX through configfs-tsm) can instead
//! prove what it is, and a party whose `--module-attest` policy is set
//! requires that of its **peer's** module. The exchange rides on the two
//! rounds above ([`establish_checked`]); the hosts frame it around the
//! module messages, which are unchanged:
//! 1. round 1, each host → peer: `hello` (161 bytes), followed — when this
//!    party checks its peer — by a fresh 32-byte nonce `N` from OS
//!    randomness (193 bytes). The length says whether evidence is asked
//!    for, so a session without attestation has exactly the bytes it had.
//! 2. round 2, each host → peer: `tag` (32 bytes), followed — when the peer
//!    asked — by `0x00 ‖ evidence` or `0x01 ‖ reason` (no evidence). The
//!    host gets the evidence from its module ([`Request::Evidence`] with
//!    the peer's `N`): the module asks its source for a report whose
//!    REPORT_DATA is `SHA-512(x25519_spki(K) ‖ N)`, `K` being the X25519
//!    public key of **its own** hello ([`crate::attest::x25519_spki`]).
//! 3. the checking host verifies the peer's evidence ([`ModuleCheck`])
//!    against its policy, its `N`, and `K` read from the peer hello it
//!    relayed to its own module — **before** it passes the peer's tag to
//!    its module, so this party's module never establishes the seed and no
//!    correlation exists on this side when a leg fails. The refusal
//!    ([`Error::ModuleAttestation`]) names the leg; the channel is then
//!    dropped. (Both hosts send round 2 before reading the peer's, so the
//!    refused peer's module may already hold its half of a seed nobody
//!    shares; it fails at its next message and what its module can release
//!    is its own host's shares of nothing the checker uses.)
//!
//! **Why relaying evidence fails.** The seed is `HMAC(H(dh ‖ c_S ‖ c_R),
//! …)` with `dh = X25519(k, K)`: only the holder of `K`'s secret `k` (and
//! this party's module) can compute it. The hardware signs REPORT_DATA,
//! which the checking host recomputes from the `K` its own module keys the
//! exchange with, so evidence is accepted only for the key the seed is
//! actually agreed with. A peer host that substitutes its own key `K'`
//! (to learn the seed) fails the report-data-binding leg: the only
//! evidence for `K'` would have to come from a measured module holding
//! `k'`, and a measured module makes its key inside the VM and never
//! releases it (the `Evidence` request binds the module's own key — the
//! host cannot choose it). A peer host that relays genuine evidence for a
//! genuine module's `K` gets nothing: it does not hold `k`, so the seed
//! stays between the two modules and its module releases to it only its
//! own shares. Old evidence fails the freshness leg (`N` is new per
//! session); evidence obtained with this party's `N` from some other
//! measured module binds that module's key, and if the peer host forwards
//! the whole exchange to it, that module simply *is* the peer's module,
//! measured and genuine. What remains is the premise the report vouches
//! for: the measured module keeps `k` and the seed inside the VM.
//!
//! **What the checking party learns**: that the peer's module is code of
//! an allowed measurement, on genuine hardware at the policy's TCB, not
//! debuggable, live now, and holding the handshake key of this session —
//! hence that the peer host gets from the seed only what that code
//! releases (its own shares). It learns nothing about the peer host's
//! other software, and nothing about its *own* module: a party checks its
//! peer's module only, because its own module protects the *peer's*
//! shares from this party, and its own secrets are protected by the
//! peer's module (VISION "Trust modes"). Checking one's own module would
//! add no protection for oneself.
//!
//! **The simulated backend still gives no protection.** A module without
//! `--attest` (in-process, or the module process without the flag) has no
//! evidence: asked, its host answers `0x01 ‖ reason`, and a checking party
//! refuses it. Without `--module-attest` nothing is checked beyond the
//! simulated report, whose key is public: a peer that runs its own code
//! in place of the module learns the seed, hence this party's correlation
//! shares.

use crate::attest::{Attester, Report, Verifier, REPORT_LEN};
use std::sync::Arc;
use crate::module::{ModuleRole, Request, Response};
use crate::{Error, Result, TrustedModule};
use hush_primitives::{Block, Prg};
use hush_transport::Channel;
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

/// Size of the nonce a checking party sends with its hello.
pub const NONCE_LEN: usize = 32;
/// Round 2: evidence follows the tag.
pub const EVIDENCE_OK: u8 = 0;
/// Round 2: no evidence; a UTF-8 reason follows the tag.
pub const EVIDENCE_NONE: u8 = 1;
/// Longest reason sent when a module has no evidence.
const MAX_REASON: usize = 512;

/// A party's check of its peer's module (`--module-attest POLICY`).
#[derive(Clone)]
pub struct ModuleCheck {
    /// Largest evidence accepted (checked before it is decoded).
    pub max_evidence: usize,
    /// Given the evidence, the nonce this party sent and the DER SPKI of
    /// the peer module's handshake key ([`crate::attest::x25519_spki`]):
    /// `Ok(summary)` to accept, `Err(reason naming the failed leg)` to refuse.
    pub verify: Arc<dyn Fn(&[u8], &[u8; NONCE_LEN], &[u8]) -> std::result::Result<String, String> + Send + Sync>,
}

impl std::fmt::Debug for ModuleCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ModuleCheck(max_evidence {})", self.max_evidence)
    }
}

/// Host side: runs seed agreement between `module` and the peer's module,
/// relaying the module messages over `ch` (2 rounds, 2·(161 + 32) bytes).
/// On failure the error is returned; dropping the channel then makes the
/// peer's next receive fail too.
pub fn establish(module: &mut dyn TrustedModule, ch: &mut dyn Channel, role: ModuleRole) -> Result<()> {
    establish_checked(module, ch, role, None).map(|_| ())
}

/// [`establish`], checking the peer's module with `check` when given (see
/// "Hardware attestation" above) and answering the peer's request for
/// this module's evidence either way. Returns the check's summary.
pub fn establish_checked(module: &mut dyn TrustedModule, ch: &mut dyn Channel, role: ModuleRole, check: Option<&ModuleCheck>) -> Result<Option<String>> {
    let hello = match &module.call(&Request::Hello { role })? {
        Response::Hello(h) => h.clone(),
        other => return Err(unexpected(other)),
    };
    let nonce = check.map(|_| {
        let mut n = [0u8; NONCE_LEN];
        Prg::from_os().fill_bytes(&mut n);
        n
    });
    let mut first = hello;
    if let Some(n) = &nonce {
        first.extend_from_slice(n);
    }
    ch.send(&first)?;
    let mut peer = ch.recv()?;
    let peer_nonce = match peer.len() {
        HELLO_LEN => None,
        n if n == HELLO_LEN + NONCE_LEN => Some(peer.split_off(HELLO_LEN)),
        n => {
            return Err(Error::Transport(hush_transport::Error::WrongLength { what: "tee: peer module hello", expected: HELLO_LEN, got: n }));
        }
    };
    let peer_public: [u8; 32] = peer[1..33].try_into().expect("32 bytes");
    let tag = match &module.call(&Request::PeerHello { hello: peer })? {
        Response::Confirm(t) => *t,
        other => return Err(unexpected(other)),
    };
    let mut second = tag.to_vec();
    if let Some(n) = peer_nonce {
        match &module.call(&Request::Evidence { nonce: n }) {
            Ok(Response::Evidence(e)) => {
                second.push(EVIDENCE_OK);
                second.extend_from_slice(&e);
            }
            Ok(other) => return Err(unexpected(other)),
            Err(e) => {
                second.push(EVIDENCE_NONE);
                let why = e.to_string();
                let mut end = why.len().min(MAX_REASON);
                while !why.is_char_boundary(end) {
                    end -= 1;
                }
                second.extend_from_slice(&why.as_bytes()[..end]);
            }
        }
    }
    ch.send(&second)?;
    let r = ch.recv()?;
    if r.len() < 32 {
        return Err(Error::Transport(hush_transport::Error::WrongLength { what: "tee: peer module confirmation", expected: 32, got: r.len() }));
    }
    let (peer_tag, rest) = r.split_at(32);
    let summary = match (check, &nonce) {
        (Some(c), Some(n)) => Some(check_peer_module(c, n, &peer_public, rest)?),
        _ if !rest.is_empty() => return Err(Error::Malformed("tee: the peer sent module evidence that was not asked for".into())),
        _ => None,
    };
    match &module.call(&Request::PeerConfirm { tag: peer_tag.try_into().expect("32 bytes") })? {
        Response::Established => Ok(summary),
        other => Err(unexpected(other)),
    }
}

/// The checking party's verdict on the peer's round-2 tail (status ‖ body).
fn check_peer_module(c: &ModuleCheck, nonce: &[u8; NONCE_LEN], peer_public: &[u8; 32], tail: &[u8]) -> Result<String> {
    let refuse = |why: String| Error::ModuleAttestation(why);
    match tail.split_first() {
        Some((&EVIDENCE_OK, ev)) => {
            if ev.len() > c.max_evidence {
                return Err(refuse(format!("its evidence is {} bytes, more than the {} accepted", ev.len(), c.max_evidence)));
            }
            (c.verify)(ev, nonce, &crate::attest::x25519_spki(peer_public)).map_err(refuse)
        }
        Some((&EVIDENCE_NONE, why)) => Err(refuse(format!("it gave no evidence: {}", String::from_utf8_lossy(why)))),
        None => Err(refuse("it sent no evidence (the peer's hush does not answer module attestation)".into())),
        Some((b, _)) => Err(refuse(format!("its answer to the evidence request is malformed (status byte {b})"))),
    }
}

pub(crate) fn unexpected(r: &Response) -> Error {
    match r {
        Response::Error(e) => Error::Refused(e.clone()),
        _ => Error::Malformed("unexpected response kind".into()),
    }
}

#[cfg(test)]
mod tests {
    //! The attestation framing of seed agreement: bytes and rounds pinned
    //! with and without a check, the evidence bound to the module's own
    //! key and the checker's nonce, and the refusals — a module without
    //! evidence, an evidence request outside seed agreement, a peer that
    //! sends evidence nobody asked for.
    use super::*;
    use crate::attest::{x25519_spki, EvidenceSource};
    use crate::{InProcessModule, Module};
    use hush_primitives::Block;
    use hush_transport::MemChannel;
    use std::sync::Mutex;

    fn module(seed: u64, evidence: Option<EvidenceSource>) -> InProcessModule {
        let mut m = Module::with_rng(Prg::with_nonce(Block(seed as u128), 0));
        if let Some(e) = evidence {
            m = m.with_evidence(e);
        }
        InProcessModule::new(m)
    }

    /// Evidence that is just `spki ‖ nonce` (the check below compares it).
    fn echo() -> EvidenceSource {
        Arc::new(|spki: &[u8], nonce: &[u8]| Ok([b"EV".as_slice(), spki, nonce].concat()))
    }

    /// A check that accepts exactly `EV ‖ spki ‖ nonce`, recording what it saw.
    fn check(seen: Arc<Mutex<Vec<Vec<u8>>>>) -> ModuleCheck {
        ModuleCheck {
            max_evidence: 1000,
            verify: Arc::new(move |ev: &[u8], nonce: &[u8; NONCE_LEN], spki: &[u8]| {
                seen.lock().unwrap().push(spki.to_vec());
                if ev == [b"EV".as_slice(), spki, nonce].concat() {
                    Ok("echo evidence".into())
                } else {
                    Err("attestation failed on the report-data-binding leg".into())
                }
            }),
        }
    }

    type Outcome = (Result<Option<String>>, hush_transport::Cost);

    fn run(s_ev: Option<EvidenceSource>, s_check: Option<ModuleCheck>, r_ev: Option<EvidenceSource>, r_check: Option<ModuleCheck>) -> (Outcome, Outcome) {
        let (mut a, mut b) = MemChannel::pair();
        let h = std::thread::spawn(move || {
            let mut m = module(1, s_ev);
            let r = establish_checked(&mut m, &mut a, ModuleRole::Sender, s_check.as_ref());
            (r, a.cost())
        });
        let mut m = module(2, r_ev);
        let r = establish_checked(&mut m, &mut b, ModuleRole::Receiver, r_check.as_ref());
        let rc = (r, b.cost());
        drop(b);
        (h.join().unwrap(), rc)
    }

    #[test]
    fn bytes_and_rounds_are_pinned_with_and_without_a_check() {
        let ((s, sc), (r, rc)) = run(None, None, None, None);
        assert_eq!((s.unwrap(), r.unwrap()), (None, None));
        assert_eq!((sc.bytes_sent, sc.rounds, rc.bytes_sent), ((HELLO_LEN + 32) as u64, 2, (HELLO_LEN + 32) as u64));
        // the receiver checks the sender: 32 bytes of nonce out, the
        // sender's evidence (2 + 44 + 32 bytes here) behind one status byte
        let seen = Arc::new(Mutex::new(Vec::new()));
        let ((s, sc), (r, rc)) = run(Some(echo()), None, None, Some(check(seen.clone())));
        s.unwrap();
        assert_eq!(r.unwrap().as_deref(), Some("echo evidence"));
        assert_eq!(rc.bytes_sent, (HELLO_LEN + NONCE_LEN + 32) as u64);
        assert_eq!(sc.bytes_sent, (HELLO_LEN + 32 + 1 + 2 + 44 + NONCE_LEN) as u64);
        assert_eq!((sc.rounds, rc.rounds), (2, 2));
        // what was checked is an X25519 SPKI (RFC 8410 prefix)
        let spki = seen.lock().unwrap()[0].clone();
        assert_eq!(spki.len(), 44);
        assert_eq!(&spki[..12], &x25519_spki(&[0; 32])[..12]);
        // both ways
        let ((s, _), (r, _)) = run(Some(echo()), Some(check(seen.clone())), Some(echo()), Some(check(seen.clone())));
        assert!(s.unwrap().is_some() && r.unwrap().is_some());
    }

    #[test]
    fn evidence_for_another_key_or_none_is_refused_before_the_seed() {
        // a module whose source binds another key: refused by the checker
        let other: EvidenceSource = Arc::new(|_spki: &[u8], nonce: &[u8]| Ok([b"EV".as_slice(), &x25519_spki(&[9; 32]), nonce].concat()));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let ((s, _), (r, _)) = run(Some(other), None, None, Some(check(seen.clone())));
        let e = r.unwrap_err();
        assert!(matches!(e, Error::ModuleAttestation(_)) && e.to_string().contains("report-data-binding leg"), "{e}");
        // the refused side's own module completed (the checker's tag was
        // sent before the check); the checker's never did, so no seed is
        // shared and the refused side fails at its next message
        assert!(s.is_ok());
        // a simulated module: no evidence, and the reason travels
        let ((_, _), (r, _)) = run(None, None, None, Some(check(seen.clone())));
        let e = r.unwrap_err().to_string();
        assert!(e.contains("gave no evidence") && e.contains("simulated"), "{e}");
        // oversized evidence is refused before the check runs
        let n = seen.lock().unwrap().len();
        let huge: EvidenceSource = Arc::new(|_s: &[u8], _n: &[u8]| Ok(vec![0; 5000]));
        let ((_, _), (r, _)) = run(Some(huge), None, None, Some(check(seen.clone())));
        assert!(r.unwrap_err().to_string().contains("more than the 1000 accepted"));
        assert_eq!(seen.lock().unwrap().len(), n);
    }

    #[test]
    fn the_module_binds_only_its_own_key_and_only_during_seed_agreement() {
        let mut m = module(3, Some(echo()));
        let refused = |r: Result<Response>| r.unwrap_err().to_string();
        assert!(refused(m.call(&Request::Evidence { nonce: vec![1; 32] })).contains("only while seed agreement is under way"));
        let hello = match &m.call(&Request::Hello { role: ModuleRole::Sender }).unwrap() {
            Response::Hello(h) => h.clone(),
            _ => unreachable!(),
        };
        let pk: [u8; 32] = hello[1..33].try_into().unwrap();
        match &m.call(&Request::Evidence { nonce: vec![5; 32] }).unwrap() {
            Response::Evidence(e) => assert_eq!(e, &[b"EV".as_slice(), &x25519_spki(&pk), &[5; 32]].concat()),
            _ => unreachable!(),
        }
        let e = refused(m.call(&Request::Evidence { nonce: vec![0; 65] }));
        assert!(e.contains("65") && e.contains("64"), "{e}");
        // a module without a source says it is simulated
        let mut s = module(4, None);
        s.call(&Request::Hello { role: ModuleRole::Receiver }).unwrap();
        assert!(refused(s.call(&Request::Evidence { nonce: vec![] })).contains("gives no hardware protection"));
        // the request and response survive the codec
        let q = Request::Evidence { nonce: vec![7; 32] };
        assert_eq!(Request::decode(&q.encode()).unwrap(), q);
    }

    #[test]
    fn unrequested_evidence_and_bad_lengths_are_refused() {
        // a peer that sends evidence nobody asked for, and a hello of a third length
        let (mut a, mut b) = MemChannel::pair();
        let h = std::thread::spawn(move || {
            let mut m = module(5, None);
            establish(&mut m, &mut a, ModuleRole::Sender)
        });
        let mut peer = module(6, None);
        let hello = match &peer.call(&Request::Hello { role: ModuleRole::Receiver }).unwrap() {
            Response::Hello(h) => h.clone(),
            _ => unreachable!(),
        };
        b.send(&hello).unwrap();
        let theirs = b.recv().unwrap();
        let tag = match &peer.call(&Request::PeerHello { hello: theirs }).unwrap() {
            Response::Confirm(t) => *t,
            _ => unreachable!(),
        };
        let mut m2 = tag.to_vec();
        m2.extend_from_slice(&[EVIDENCE_OK, 1, 2, 3]);
        b.send(&m2).unwrap();
        let _ = b.recv();
        let e = h.join().unwrap().unwrap_err().to_string();
        assert!(e.contains("not asked for"), "{e}");
        let (mut a, mut b) = MemChannel::pair();
        let h = std::thread::spawn(move || establish(&mut module(7, None), &mut a, ModuleRole::Sender));
        b.send(&[0u8; HELLO_LEN + 5]).unwrap();
        let e = h.join().unwrap().unwrap_err().to_string();
        assert!(e.contains("peer module hello"), "{e}");
    }
}
