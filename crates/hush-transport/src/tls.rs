//! Link security: TLS 1.3 with SSH-like pinned identities.
//!
//! Each party has an [`Identity`]: a self-signed certificate and its private
//! key, generated once (`Identity::generate` + `save`) and named by its
//! [`Fingerprint`], the SHA-256 of the certificate DER (what
//! `openssl x509 -noout -fingerprint -sha256` prints). Parties authenticate
//! each other by fingerprint ([`PeerCheck::Pinned`]), like SSH host keys:
//! names and certificate validity dates play no role (the fixed SNI is
//! `"hush"`), but the handshake signature is always verified with the
//! provider's algorithms, so a peer must hold the private key of the pinned
//! certificate. TLS 1.3 only, rustls with the `ring` provider.
//!
//! ## Connection setup
//! 1. TCP connect (retried while refused, `ChannelOptions::connect_timeout`).
//! 2. **Mode greeting**: both sides write an 8-byte magic — `HUSHPLN1`
//!    (plaintext) or `HUSHTLS1` (TLS) — and read the peer's, with a deadline
//!    of [`HANDSHAKE_TIMEOUT`]. Different modes give a clear error on both
//!    sides ([`Error::PeerWantsTls`] / [`Error::PeerIsPlaintext`]); anything
//!    else is [`Error::NotHush`].
//! 3. TLS only: the handshake, then both sides send an 8-byte "ready" record
//!    inside TLS and wait for the peer's (same deadline). In TLS 1.3 the
//!    client finishes its handshake before the server has checked the
//!    client certificate; the ready exchange makes a rejection visible to
//!    *both* sides within the deadline instead of at the first `recv`.
//!
//! **Why the greeting enables no downgrade.** The greeting is a declaration,
//! not a negotiation: a side configured for TLS writes `HUSHTLS1` and then
//! either completes a TLS handshake that authenticates the peer by
//! [`PeerCheck`] or aborts — whatever it reads. There is no code path in
//! which a TLS-configured side continues in plaintext, so an attacker who
//! rewrites greeting bytes can only turn a connection into an error, never
//! into an unauthenticated one. The greeting only makes mismatched
//! deployments fail fast with a message that says what is wrong.
//!
//! ## Errors
//! Setup failures name the peer address and, where known, both
//! fingerprints: [`Error::PinMismatch`] on the side that checked the pin,
//! [`Error::Tls`] ("the peer rejected our certificate …") on the other. A
//! peer that stops talking during setup fails it after
//! [`HANDSHAKE_TIMEOUT`]; a side that aborts closes the socket, so its peer
//! fails promptly too.
//!
//! ## Secrets
//! The private key DER held by [`Identity`] is zeroized on drop, as are the
//! PEM text buffers of `load`/`save` and rcgen's copy after generation. The
//! signing key is parsed by ring once per identity straight from that
//! buffer; ring's parsed form lives as long as the identity (its memory is
//! outside hush's control). Nothing here logs key material.

use crate::link::Link;
use crate::tcp::TcpChannel;
use crate::{ChannelOptions, Error, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use zeroize::Zeroizing;

/// Deadline for the mode greeting and the TLS handshake of one connection.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

const MAGIC_PLAIN: &[u8; 8] = b"HUSHPLN1";
const MAGIC_TLS: &[u8; 8] = b"HUSHTLS1";
const READY: &[u8; 8] = b"HUSHRDY1";
/// Fixed server name: pins, not names, authenticate.
const SNI: &str = "hush";
const KEY_FILE: &str = "identity.key";
const CERT_FILE: &str = "identity.crt";

/// SHA-256 of a certificate's DER encoding.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// The fingerprint of a DER-encoded certificate.
    pub fn of_der(cert_der: &[u8]) -> Fingerprint {
        Fingerprint(Sha256::digest(cert_der).into())
    }
}

impl std::fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("sha256:")?;
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Fingerprint {
    type Err = Error;
    /// Accepts `sha256:` followed by 64 hex digits (either case; colons
    /// between bytes, as `openssl` prints them, are allowed).
    fn from_str(s: &str) -> Result<Fingerprint> {
        let bad = |reason| Error::InvalidFingerprint { input: s.chars().take(120).collect(), reason };
        let t = s.trim();
        let Some(hex) = t.get(..7).filter(|p| p.eq_ignore_ascii_case("sha256:")).map(|_| &t[7..]) else {
            return Err(bad("missing the \"sha256:\" prefix"));
        };
        let digits: Vec<u8> = hex.bytes().filter(|&c| c != b':').collect();
        if digits.len() != 64 {
            return Err(bad("wrong number of hex digits"));
        }
        let val = |c: u8| (c as char).to_digit(16).map(|v| v as u8);
        let mut out = [0u8; 32];
        for (i, o) in out.iter_mut().enumerate() {
            match (val(digits[2 * i]), val(digits[2 * i + 1])) {
                (Some(hi), Some(lo)) => *o = hi << 4 | lo,
                _ => return Err(bad("not a hex digit")),
            }
        }
        Ok(Fingerprint(out))
    }
}

/// A party's long-term TLS identity: a self-signed certificate and its
/// private key (PKCS#8 DER, zeroized on drop).
pub struct Identity {
    cert: CertificateDer<'static>,
    key: Zeroizing<Vec<u8>>,
    /// The certificate with ring's parsed signing key, built once from a
    /// borrowed view of `key` (no unzeroized copy of the DER is made).
    certified: Arc<rustls::sign::CertifiedKey>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Identity").field("fingerprint", &self.fingerprint().to_string()).finish_non_exhaustive()
    }
}

fn id_err(path: &Path, msg: impl Into<String>) -> Error {
    Error::Identity { path: path.display().to_string(), msg: msg.into() }
}

impl Identity {
    /// A fresh self-signed ECDSA P-256 certificate with CN "hush".
    pub fn generate() -> Result<Identity> {
        let gen_err = |e: rcgen::Error| Error::Identity { path: "(new)".into(), msg: format!("key generation failed: {e}") };
        let kp = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(gen_err)?;
        let mut params = rcgen::CertificateParams::new(vec![SNI.to_string()]).map_err(gen_err)?;
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::CommonName, "hush");
        params.distinguished_name = dn;
        let cert = params.self_signed(&kp).map_err(gen_err)?;
        let key = Zeroizing::new(kp.serialize_der());
        let mut kp = kp;
        zeroize::Zeroize::zeroize(&mut kp);
        Identity::checked(cert.der().clone(), key).map_err(|msg| Error::Identity { path: "(new)".into(), msg })
    }

    /// Loads `DIR/identity.key` (PKCS#8 PEM) and `DIR/identity.crt` (PEM) and
    /// checks that the key belongs to the certificate.
    pub fn load(dir: &Path) -> Result<Identity> {
        let kp = dir.join(KEY_FILE);
        let cp = dir.join(CERT_FILE);
        let key_pem = Zeroizing::new(std::fs::read(&kp).map_err(|e| id_err(&kp, format!("cannot read: {e}")))?);
        let cert_pem = std::fs::read(&cp).map_err(|e| id_err(&cp, format!("cannot read: {e}")))?;
        let mut parsed = PrivatePkcs8KeyDer::from_pem_slice(&key_pem)
            .map_err(|e| id_err(&kp, format!("not a PKCS#8 private key in PEM (\"PRIVATE KEY\"): {e}")))?;
        let key = Zeroizing::new(parsed.secret_pkcs8_der().to_vec());
        zeroize::Zeroize::zeroize(&mut parsed);
        let cert = CertificateDer::from_pem_slice(&cert_pem)
            .map_err(|e| id_err(&cp, format!("not a PEM certificate: {e}")))?;
        Identity::checked(cert, key).map_err(|msg| id_err(dir, msg))
    }

    /// An identity from a DER certificate and its PKCS#8 DER private key
    /// (e.g. a certificate issued by your own CA, for [`PeerCheck::Ca`]).
    /// Checks that the key belongs to the certificate.
    pub fn from_der(cert_der: Vec<u8>, pkcs8_key_der: Vec<u8>) -> Result<Identity> {
        let key = Zeroizing::new(pkcs8_key_der);
        Identity::checked(CertificateDer::from(cert_der), key)
            .map_err(|msg| Error::Identity { path: "(in memory)".into(), msg })
    }

    fn checked(cert: CertificateDer<'static>, key: Zeroizing<Vec<u8>>) -> std::result::Result<Identity, String> {
        let borrowed = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(&key[..]));
        let signer = rustls::crypto::ring::sign::any_supported_type(&borrowed)
            .map_err(|e| format!("unsupported private key: {e}"))?;
        let certified = rustls::sign::CertifiedKey::new(vec![cert.clone()], signer);
        match certified.keys_match() {
            Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {
                Ok(Identity { cert, key, certified: Arc::new(certified) })
            }
            Err(_) => Err(format!("the private key ({KEY_FILE}) does not belong to the certificate ({CERT_FILE})")),
        }
    }

    /// Writes `DIR/identity.key` (mode 0600) and `DIR/identity.crt`, creating
    /// DIR (mode 0700) if needed. Refuses to overwrite existing files.
    pub fn save(&self, dir: &Path) -> Result<()> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| id_err(dir, format!("cannot create directory: {e}")))?;
        let kp = dir.join(KEY_FILE);
        let cp = dir.join(CERT_FILE);
        for p in [&kp, &cp] {
            if p.exists() {
                return Err(id_err(p, "already exists; refusing to overwrite an identity"));
            }
        }
        let write = |p: &PathBuf, mode: u32, data: &[u8]| -> Result<()> {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .open(p)
                .map_err(|e| id_err(p, format!("cannot create: {e}")))?;
            f.write_all(data).and_then(|_| f.sync_all()).map_err(|e| id_err(p, format!("cannot write: {e}")))
        };
        let key_pem = pem_encode("PRIVATE KEY", &self.key);
        write(&kp, 0o600, key_pem.as_bytes())?;
        write(&cp, 0o644, pem_encode("CERTIFICATE", &self.cert).as_bytes())
    }

    /// SHA-256 of the certificate DER.
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint::of_der(&self.cert)
    }

    /// The certificate (DER).
    pub fn cert_der(&self) -> &[u8] {
        &self.cert
    }
}

/// PEM armour (RFC 7468) into a zeroizing string.
fn pem_encode(label: &str, der: &[u8]) -> Zeroizing<String> {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut b64 = Zeroizing::new(String::with_capacity(der.len() * 4 / 3 + 4));
    for c in der.chunks(3) {
        let n = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                b64.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                b64.push('=');
            }
        }
    }
    let mut out = Zeroizing::new(String::with_capacity(b64.len() + b64.len() / 64 + 64));
    out.push_str(&format!("-----BEGIN {label}-----\n"));
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).expect("ascii"));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// What we accept from the peer.
#[derive(Clone, Debug)]
pub enum PeerCheck {
    /// The peer's certificate fingerprint must be one of these.
    Pinned(Vec<Fingerprint>),
    /// Accept any peer certificate (server side without client auth, or
    /// ephemeral loopback runs). The peer's fingerprint is still recorded.
    AnyPeer,
    /// Peer certificate must chain to this CA (PEM file contents, one or
    /// more certificates), verified by webpki including validity dates. The
    /// peer's certificate must name the DNS name `hush` (the fixed SNI), as
    /// [`Identity::generate`] certificates do. Fingerprints are recorded too.
    Ca(Vec<u8>),
}

/// TLS configuration of one side.
#[derive(Clone, Debug)]
pub struct TlsSettings {
    pub identity: Arc<Identity>,
    /// Checked against the server's certificate on the client side, and
    /// against the client's certificate on the server side when
    /// `require_client_cert` is set.
    pub peer: PeerCheck,
    /// Server side: require (and check with `peer`) a client certificate.
    /// When false, client authentication is off.
    pub require_client_cert: bool,
}

/// Plaintext or TLS.
#[derive(Clone, Debug)]
pub enum LinkSecurity {
    /// No encryption, no authentication (`--insecure`).
    Insecure,
    Tls(TlsSettings),
}

impl LinkSecurity {
    /// TLS with a fresh throw-away identity that accepts any peer (loopback
    /// runs and benchmarks: encryption cost without key management).
    pub fn ephemeral_any() -> Result<LinkSecurity> {
        Ok(LinkSecurity::Tls(TlsSettings {
            identity: Arc::new(Identity::generate()?),
            peer: PeerCheck::AnyPeer,
            require_client_cert: false,
        }))
    }
    pub fn is_tls(&self) -> bool {
        matches!(self, LinkSecurity::Tls(_))
    }
    /// Our own fingerprint under TLS.
    pub fn fingerprint(&self) -> Option<Fingerprint> {
        match self {
            LinkSecurity::Insecure => None,
            LinkSecurity::Tls(t) => Some(t.identity.fingerprint()),
        }
    }
}

/// Checks the peer's certificate by [`PeerCheck`] and records its
/// fingerprint; handshake signatures are verified with the provider's
/// algorithms.
#[derive(Debug)]
struct PeerVerifier {
    check: PeerCheck,
    seen: Arc<Mutex<Option<Fingerprint>>>,
    algs: WebPkiSupportedAlgorithms,
    /// `PeerCheck::Ca`: webpki verifiers for the CA's roots.
    ca_server: Option<Arc<rustls::client::WebPkiServerVerifier>>,
    ca_client: Option<Arc<dyn ClientCertVerifier>>,
}

impl PeerVerifier {
    fn record(&self, ee: &CertificateDer<'_>) {
        *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(Fingerprint::of_der(ee));
    }

    fn check_cert(&self, ee: &CertificateDer<'_>) -> std::result::Result<(), rustls::Error> {
        let fp = Fingerprint::of_der(ee);
        self.record(ee);
        match &self.check {
            PeerCheck::AnyPeer => Ok(()),
            PeerCheck::Pinned(list) if list.contains(&fp) => Ok(()),
            PeerCheck::Pinned(_) => {
                Err(rustls::Error::InvalidCertificate(rustls::CertificateError::ApplicationVerificationFailure))
            }
            PeerCheck::Ca(_) => Err(rustls::Error::General("internal: CA verifier missing".into())),
        }
    }
}

impl ServerCertVerifier for PeerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        if let Some(v) = &self.ca_server {
            self.record(end_entity);
            return v.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now);
        }
        self.check_cert(end_entity).map(|_| ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algs)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algs)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}

impl ClientCertVerifier for PeerVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }
    fn client_auth_mandatory(&self) -> bool {
        true
    }
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }
    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> std::result::Result<ClientCertVerified, rustls::Error> {
        if let Some(v) = &self.ca_client {
            self.record(end_entity);
            return v.verify_client_cert(end_entity, intermediates, now);
        }
        self.check_cert(end_entity).map(|_| ClientCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algs)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algs)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}

/// Which end of the TLS handshake this side plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Client,
    Server,
}

fn new_connection(t: &TlsSettings, role: Role, seen: Arc<Mutex<Option<Fingerprint>>>) -> std::result::Result<rustls::Connection, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let s = |e: rustls::Error| format!("TLS configuration: {e}");
    let (mut ca_server, mut ca_client) = (None, None);
    if let PeerCheck::Ca(pem) = &t.peer {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(pem) {
            let c = c.map_err(|e| format!("the CA file is not valid PEM: {e}"))?;
            roots.add(c).map_err(|e| format!("the CA file holds an unusable certificate: {e}"))?;
        }
        if roots.is_empty() {
            return Err("the CA file holds no certificate".into());
        }
        let roots = Arc::new(roots);
        match role {
            Role::Client => {
                ca_server = Some(
                    rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                        .build()
                        .map_err(|e| format!("CA verifier: {e}"))?,
                )
            }
            Role::Server => {
                ca_client = Some(
                    rustls::server::WebPkiClientVerifier::builder_with_provider(roots, provider.clone())
                        .build()
                        .map_err(|e| format!("CA verifier: {e}"))?,
                )
            }
        }
    }
    let verifier = Arc::new(PeerVerifier {
        check: t.peer.clone(),
        seen,
        algs: provider.signature_verification_algorithms,
        ca_server,
        ca_client,
    });
    Ok(match role {
        Role::Client => {
            let mut cfg = rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(&[&rustls::version::TLS13])
                .map_err(s)?
                .dangerous()
                .with_custom_certificate_verifier(verifier)
                .with_client_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(t.identity.certified.clone())));
            cfg.resumption = rustls::client::Resumption::disabled();
            let name = ServerName::try_from(SNI).map_err(|e| e.to_string())?;
            rustls::ClientConnection::new(Arc::new(cfg), name).map_err(s)?.into()
        }
        Role::Server => {
            let b = rustls::ServerConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(&[&rustls::version::TLS13])
                .map_err(s)?;
            let b = if t.require_client_cert {
                b.with_client_cert_verifier(verifier)
            } else {
                b.with_no_client_auth()
            };
            let mut cfg = b.with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(t.identity.certified.clone())));
            cfg.send_tls13_tickets = 0;
            rustls::ServerConnection::new(Arc::new(cfg)).map_err(s)?.into()
        }
    })
}

/// Reads exactly `buf.len()` bytes from a blocking stream before `deadline`;
/// returns how many arrived (fewer on EOF or timeout).
fn read_until(s: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> std::io::Result<usize> {
    let mut off = 0;
    while off < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(off);
        }
        s.set_read_timeout(Some(left))?;
        match s.read(&mut buf[off..]) {
            Ok(0) => return Ok(off),
            Ok(n) => off += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => return Ok(off),
            Err(e) => return Err(e),
        }
    }
    Ok(off)
}

/// Greeting, TLS handshake and ready exchange on a connected stream; see the
/// module docs.
pub(crate) fn establish(
    mut stream: TcpStream,
    opts: ChannelOptions,
    sec: &LinkSecurity,
    role: Role,
    peer: String,
) -> Result<TcpChannel> {
    let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
    let setup = |msg: String| Error::Setup { peer: peer.clone(), msg };
    // 0. TLS configuration (a bad one fails before anything is sent).
    let seen = Arc::new(Mutex::new(None));
    let mut conn = None;
    if let LinkSecurity::Tls(t) = sec {
        match new_connection(t, role, seen.clone()) {
            Ok(c) => conn = Some(c),
            Err(msg) => {
                let _ = stream.shutdown(std::net::Shutdown::Both);
                return Err(Error::Tls { peer, msg });
            }
        }
    }
    // 1. Greeting.
    let ours = if sec.is_tls() { MAGIC_TLS } else { MAGIC_PLAIN };
    stream.set_nodelay(true)?;
    stream.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;
    stream.write_all(ours).map_err(|e| setup(format!("could not send the greeting: {e}")))?;
    let mut theirs = [0u8; 8];
    let got = read_until(&mut stream, &mut theirs, deadline).map_err(|e| setup(format!("reading the greeting: {e}")))?;
    stream.set_read_timeout(None)?;
    stream.set_write_timeout(None)?;
    let fail = |s: &TcpStream, e: Error| {
        let _ = s.shutdown(std::net::Shutdown::Both);
        Err(e)
    };
    if got < 8 {
        if got > 0 && theirs[..got] != ours[..got] && theirs[..got] != MAGIC_PLAIN[..got] && theirs[..got] != MAGIC_TLS[..got] {
            return fail(&stream, Error::NotHush { peer });
        }
        let msg = if Instant::now() >= deadline {
            format!("no hush greeting within {HANDSHAKE_TIMEOUT:?} (is the peer a hush party?)")
        } else {
            "the peer closed the connection before greeting (is it a hush party?)".to_string()
        };
        return fail(&stream, setup(msg));
    }
    match (&theirs, sec) {
        (MAGIC_TLS, LinkSecurity::Insecure) => return fail(&stream, Error::PeerWantsTls { peer }),
        (MAGIC_PLAIN, LinkSecurity::Tls(_)) => return fail(&stream, Error::PeerIsPlaintext { peer }),
        (MAGIC_TLS, LinkSecurity::Tls(_)) | (MAGIC_PLAIN, LinkSecurity::Insecure) => {}
        _ => return fail(&stream, Error::NotHush { peer }),
    }
    let cap = opts.buffer_cap();
    let t = match sec {
        LinkSecurity::Insecure => {
            let mut link = Link::new(stream, None, cap, peer.clone())?;
            link.sent += 8;
            link.recvd += 8;
            return TcpChannel::from_link(link, opts, peer, None);
        }
        LinkSecurity::Tls(t) => t,
    };
    // 2. TLS handshake and ready exchange.
    let ctl = stream.try_clone()?;
    let mut link = Link::new(stream, conn, cap, peer.clone())?;
    link.sent += 8;
    link.recvd += 8;
    let r = (|| {
        link.handshake(deadline)?;
        let mut out = crate::link::Outgoing::new(READY, &[]);
        while link.push(&mut out)? == crate::link::Progress::Blocked {
            if !link.wait_send(deadline)? {
                return Err(setup(format!("TLS setup did not complete within {HANDSHAKE_TIMEOUT:?}")));
            }
        }
        let mut ready = [0u8; 8];
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        let n = match link.read_exact(&mut ready, left) {
            Err(Error::Timeout(_)) => {
                return Err(setup(format!("TLS setup did not complete within {HANDSHAKE_TIMEOUT:?}")));
            }
            r => r?,
        };
        if n < 8 {
            return Err(setup("the peer closed the connection right after the TLS handshake (it may have rejected our certificate)".into()));
        }
        if &ready != READY {
            return Err(Error::NotHush { peer: peer.clone() });
        }
        Ok(())
    })();
    let seen_fp = *seen.lock().unwrap_or_else(|p| p.into_inner());
    let ours_fp = t.identity.fingerprint();
    if let Err(e) = r {
        let _ = ctl.shutdown(std::net::Shutdown::Both);
        if let (PeerCheck::Pinned(list), Some(got)) = (&t.peer, seen_fp) {
            if !list.contains(&got) {
                return Err(Error::PinMismatch { peer, expected: list.clone(), got, ours: ours_fp });
            }
        }
        return Err(match e {
            Error::Tls { peer, msg } => {
                let theirs = seen_fp.map(|f| format!("peer presented {f}; ")).unwrap_or_default();
                Error::Tls { peer, msg: format!("{msg} ({theirs}our identity is {ours_fp})") }
            }
            Error::Setup { peer, msg } => Error::Setup { peer, msg: format!("{msg}; our identity is {ours_fp}") },
            e => e,
        });
    }
    let peer_cert = link.tls().and_then(|c| c.peer_certificates()).and_then(|c| c.first()).map(|c| c.to_vec());
    let peer_fp = peer_cert.as_deref().map(Fingerprint::of_der).or(seen_fp);
    let mut ch = TcpChannel::from_link(link, opts, peer, peer_fp)?;
    ch.set_peer_certificate(peer_cert);
    Ok(ch)
}
