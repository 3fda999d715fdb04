//! How a party's link settings (identity, pins, `--insecure`) become the
//! [`LinkSecurity`] of each TCP connection it makes or accepts.
//!
//! Identity works like SSH keys: every party has a key pair and a
//! self-signed certificate (`hush keygen --out DIR`, or an ephemeral one
//! made at start), and knows its peers by the SHA-256 fingerprint of their
//! certificate (`--pin ADDR=sha256:<hex>`, one per peer; `--pin
//! sha256:<hex>` when a command has a single peer). No certificate
//! authority is needed.
//!
//! * A party that **connects** requires TLS 1.3 and the pin of the address
//!   it connects to; a missing pin is an error before anything is sent
//!   (the peer's fingerprint is printed by the peer at start).
//! * A party that **listens** presents its identity and, when pins are
//!   given, accepts only clients presenting one of the pinned certificates
//!   (client authentication). Without pins it serves any client — the
//!   inference server's usual case: clients are anonymous, the server is
//!   authenticated.
//! * `--insecure` turns TLS off (plaintext frames, a warning is printed by
//!   the command); a TLS side and a plaintext side refuse each other with a
//!   clear error (see the mode preamble in [`crate::tls`]).

use crate::tls::{Fingerprint, Identity, LinkSecurity, PeerCheck, TlsSettings};
use crate::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The warning every command prints when run with `--insecure`.
pub const INSECURE_WARNING: &str = "WARNING: --insecure: links are plaintext and unauthenticated — anyone on the network can read shares and impersonate peers";

/// A party's link settings, as given on the command line (with the
/// `clap` feature, the flags `--identity`, `--pin`, `--insecure` that every
/// listening or connecting command flattens in).
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct LinkFlags {
    /// This party's identity: DIR/identity.key and DIR/identity.crt from
    /// `hush keygen --out DIR` (default: an ephemeral identity).
    #[cfg_attr(feature = "clap", arg(long, value_name = "DIR"))]
    pub identity: Option<PathBuf>,
    /// A peer's certificate fingerprint: ADDR=sha256:HEX, or
    /// sha256:HEX for a command's one peer (repeatable). A party that
    /// connects needs its peer's; a listening party given pins accepts only
    /// those clients.
    #[cfg_attr(feature = "clap", arg(long = "pin", value_name = "[ADDR=]sha256:HEX"))]
    pub pins: Vec<String>,
    /// Plaintext, unauthenticated links (prints a warning); every party
    /// must agree. One-process runs use TLS with ephemeral identities
    /// unless this is given.
    #[cfg_attr(feature = "clap", arg(long))]
    pub insecure: bool,
    /// Seconds to keep retrying a connection while nothing listens at the
    /// peer's address (it may still be starting; a line says so once), then
    /// fail with "could not connect to ADDR: connection refused" (default:
    /// 30 for peers, 5 for a dealer).
    #[cfg_attr(feature = "clap", arg(long, value_name = "SECS"))]
    pub connect_timeout: Option<u64>,
}

/// Parsed pins: per address, plus unlabelled ones.
#[derive(Clone, Debug, Default)]
pub struct Pins {
    by_addr: Vec<(String, Fingerprint)>,
    bare: Vec<Fingerprint>,
}

impl Pins {
    /// Parses `ADDR=sha256:<hex>` and `sha256:<hex>` entries.
    pub fn parse(pins: &[String]) -> Result<Pins> {
        let mut p = Pins::default();
        for s in pins {
            let s = s.trim();
            if s.starts_with("sha256:") {
                p.bare.push(parse_fp(s, s)?);
            } else if let Some((addr, fp)) = s.rsplit_once('=') {
                if addr.is_empty() {
                    return Err(Error::Config(format!("--pin {s:?}: empty address before '='")));
                }
                let fp = parse_fp(fp, s)?;
                if p.by_addr.iter().any(|(a, f)| a == addr && *f != fp) {
                    return Err(Error::Config(format!("--pin: two different fingerprints for {addr}")));
                }
                p.by_addr.push((addr.to_string(), fp));
            } else {
                return Err(Error::Config(format!("--pin {s:?}: expected ADDR=sha256:<64 hex> or sha256:<64 hex>")));
            }
        }
        Ok(p)
    }

    pub fn is_empty(&self) -> bool {
        self.by_addr.is_empty() && self.bare.is_empty()
    }

    /// The pin for a connection to `addr`: the one given for that address,
    /// else the single unlabelled pin (a command with one peer).
    pub fn for_addr(&self, addr: &str) -> Option<Fingerprint> {
        if let Some((_, f)) = self.by_addr.iter().find(|(a, _)| a == addr) {
            return Some(*f);
        }
        if self.by_addr.is_empty() && self.bare.len() == 1 {
            return Some(self.bare[0]);
        }
        None
    }

    /// Every pinned fingerprint (the clients a listening party accepts).
    pub fn all(&self) -> Vec<Fingerprint> {
        let mut v: Vec<Fingerprint> = self.by_addr.iter().map(|(_, f)| *f).collect();
        v.extend(self.bare.iter().copied());
        v.dedup();
        v
    }
}

fn parse_fp(fp: &str, whole: &str) -> Result<Fingerprint> {
    fp.trim().parse::<Fingerprint>().map_err(|e| Error::Config(format!("--pin {whole:?}: {e}")))
}

/// A party's resolved link settings: its identity and its pins.
#[derive(Clone)]
pub struct LinkConfig {
    identity: Option<Arc<Identity>>,
    pins: Pins,
    connect_timeout: Option<Duration>,
}

impl LinkConfig {
    /// Resolves the flags: loads `--identity` (or makes an ephemeral
    /// identity) unless `--insecure`.
    pub fn from_flags(f: &LinkFlags) -> Result<LinkConfig> {
        let pins = Pins::parse(&f.pins)?;
        let connect_timeout = match f.connect_timeout {
            Some(0) => return Err(Error::Config("--connect-timeout must be at least 1 second".into())),
            Some(s) => Some(Duration::from_secs(s)),
            None => None,
        };
        if f.insecure {
            if f.identity.is_some() || !pins.is_empty() {
                return Err(Error::Config("--insecure cannot be combined with --identity or --pin".into()));
            }
            return Ok(LinkConfig { identity: None, pins, connect_timeout });
        }
        let id = match &f.identity {
            Some(dir) => Identity::load(dir)?,
            None => Identity::generate()?,
        };
        Ok(LinkConfig { identity: Some(Arc::new(id)), pins, connect_timeout })
    }

    /// Plaintext links.
    pub fn insecure() -> LinkConfig {
        LinkConfig { identity: None, pins: Pins::default(), connect_timeout: None }
    }

    /// TLS with `identity` and explicit pins (tests, local runs).
    pub fn with_identity(identity: Arc<Identity>, pins: Pins) -> LinkConfig {
        LinkConfig { identity: Some(identity), pins, connect_timeout: None }
    }

    /// The same settings with `--connect-timeout` set to `t`.
    pub fn with_connect_timeout(mut self, t: Duration) -> LinkConfig {
        self.connect_timeout = Some(t);
        self
    }

    /// `--connect-timeout` as given (None: each kind of connection keeps
    /// its own default).
    pub fn connect_timeout_flag(&self) -> Option<Duration> {
        self.connect_timeout
    }

    /// How long connections to peers keep retrying while refused:
    /// `--connect-timeout`, else [`crate::DEFAULT_CONNECT_TIMEOUT`].
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout.unwrap_or(crate::DEFAULT_CONNECT_TIMEOUT)
    }

    /// `opts` with this party's connect timeout (see
    /// [`LinkConfig::connect_timeout`]).
    pub fn channel_options(&self, opts: crate::ChannelOptions) -> crate::ChannelOptions {
        crate::ChannelOptions { connect_timeout: self.connect_timeout(), ..opts }
    }

    pub fn is_tls(&self) -> bool {
        self.identity.is_some()
    }

    /// This party's fingerprint (None when plaintext).
    pub fn fingerprint(&self) -> Option<Fingerprint> {
        self.identity.as_ref().map(|i| i.fingerprint())
    }

    /// The line every listening or connecting command prints at start.
    pub fn banner(&self) -> String {
        match self.fingerprint() {
            Some(f) => format!("fingerprint {f}"),
            None => INSECURE_WARNING.to_string(),
        }
    }

    pub fn pins(&self) -> &Pins {
        &self.pins
    }

    /// Settings for connecting to `addr`: TLS pinned to `addr`'s pin (an
    /// error if there is none), or plaintext.
    pub fn to_peer(&self, addr: &str) -> Result<LinkSecurity> {
        let Some(id) = &self.identity else { return Ok(LinkSecurity::Insecure) };
        let pin = self.pins.for_addr(addr).ok_or_else(|| {
            Error::Config(format!(
                "no pin for {addr}: pass --pin {addr}=sha256:<hex> (the peer prints its fingerprint at start), or run both sides with --insecure"
            ))
        })?;
        Ok(LinkSecurity::Tls(TlsSettings { identity: id.clone(), peer: PeerCheck::Pinned(vec![pin]), require_client_cert: false }))
    }

    /// Settings for connecting to a service at `addr` other than the
    /// command's peer (the dealer of dealer mode): TLS pinned to `pin`
    /// (`--dealer-pin`), else to an `--pin ADDR=sha256:<hex>` entry for
    /// exactly `addr` (never the bare peer pin); an error naming `flag`
    /// when neither is given. Plaintext when this party is `--insecure`.
    pub fn to_service(&self, addr: &str, pin: Option<Fingerprint>, flag: &str) -> Result<LinkSecurity> {
        let Some(id) = &self.identity else { return Ok(LinkSecurity::Insecure) };
        let pin = pin.or_else(|| self.pins.by_addr.iter().find(|(a, _)| a == addr).map(|(_, f)| *f)).ok_or_else(|| {
            Error::Config(format!(
                "no pin for {addr}: pass {flag} sha256:<hex> (it prints its fingerprint at start), or run every party with --insecure"
            ))
        })?;
        Ok(LinkSecurity::Tls(TlsSettings { identity: id.clone(), peer: PeerCheck::Pinned(vec![pin]), require_client_cert: false }))
    }

    /// Settings for connecting to `addr` accepting any certificate (used
    /// only where the caller checks the peer's fingerprint itself).
    pub fn to_any_peer(&self) -> LinkSecurity {
        match &self.identity {
            Some(id) => LinkSecurity::Tls(TlsSettings { identity: id.clone(), peer: PeerCheck::AnyPeer, require_client_cert: false }),
            None => LinkSecurity::Insecure,
        }
    }

    /// Settings for accepting clients: with pins, only clients presenting
    /// a pinned certificate; without, any client (anonymous clients, an
    /// authenticated server).
    pub fn accept_clients(&self) -> LinkSecurity {
        let Some(id) = &self.identity else { return LinkSecurity::Insecure };
        if self.pins.is_empty() {
            LinkSecurity::Tls(TlsSettings { identity: id.clone(), peer: PeerCheck::AnyPeer, require_client_cert: false })
        } else {
            LinkSecurity::Tls(TlsSettings { identity: id.clone(), peer: PeerCheck::Pinned(self.pins.all()), require_client_cert: true })
        }
    }

    /// Settings for a listener whose callers must all present a
    /// certificate, of any fingerprint: the caller checks the fingerprint
    /// against the role the peer claims (the 3PC nodes: peers pinned,
    /// job submitters anyone).
    pub fn accept_any_authenticated(&self) -> LinkSecurity {
        match &self.identity {
            Some(id) => LinkSecurity::Tls(TlsSettings { identity: id.clone(), peer: PeerCheck::AnyPeer, require_client_cert: true }),
            None => LinkSecurity::Insecure,
        }
    }
}

/// `hush keygen --out DIR`: a new identity saved in `dir`; returns its
/// fingerprint.
pub fn keygen(dir: &Path) -> Result<Fingerprint> {
    let id = Identity::generate()?;
    id.save(dir)?;
    Ok(id.fingerprint())
}

impl std::fmt::Debug for LinkConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.fingerprint() {
            Some(fp) => write!(f, "LinkConfig(tls, {fp}, {} pin(s))", self.pins.all().len()),
            None => write!(f, "LinkConfig(plaintext)"),
        }
    }
}

/// Two TCP channels over 127.0.0.1 for a one-process run: TLS 1.3 with two
/// fresh ephemeral identities pinned to each other (client authenticated
/// too) when `tls`, plaintext otherwise. Returns (accepting side,
/// connecting side).
pub fn loopback_pair(opts: crate::ChannelOptions, tls: bool) -> Result<(crate::TcpChannel, crate::TcpChannel)> {
    if !tls {
        return crate::tcp_pair_loopback(opts);
    }
    let (a, b) = (Arc::new(Identity::generate()?), Arc::new(Identity::generate()?));
    let sa = LinkSecurity::Tls(TlsSettings { identity: a.clone(), peer: PeerCheck::Pinned(vec![b.fingerprint()]), require_client_cert: true });
    let sb = LinkSecurity::Tls(TlsSettings { identity: b, peer: PeerCheck::Pinned(vec![a.fingerprint()]), require_client_cert: false });
    crate::tcp_pair_loopback_with(opts, &sa, &sb)
}

/// Opens a two-party command's link to its one peer, as `hush train`,
/// `hush predict` and `hush psi` do: with `listen`, binds there, prints
/// the link's banner and `listening ADDR` on stdout and accepts one peer
/// ([`LinkConfig::accept_clients`]); with `peer`, prints
/// [`INSECURE_WARNING`] on stderr when the link is plaintext and connects
/// ([`LinkConfig::to_peer`]: TLS needs the peer's pin).
///
/// The caller's error type: a bad pair of flags (neither or both given)
/// and an address that cannot be bound become `usage(message)`, every other
/// failure the caller's conversion of [`Error`] or of the I/O error.
pub fn connect_party<E>(listen: Option<&str>, peer: Option<&str>, link: &LinkConfig, usage: impl FnOnce(String) -> E) -> std::result::Result<crate::TcpChannel, E>
where
    E: From<Error> + From<std::io::Error>,
{
    let opts = link.channel_options(crate::ChannelOptions::default());
    Ok(match (listen, peer) {
        (Some(addr), None) => {
            let l = match std::net::TcpListener::bind(addr) {
                Ok(l) => l,
                Err(e) => return Err(usage(format!("cannot listen at {addr}: {e}"))),
            };
            println!("{}", link.banner());
            println!("listening {}", l.local_addr()?);
            crate::TcpChannel::accept_with(&l, opts, &link.accept_clients())?
        }
        (None, Some(addr)) => {
            if !link.is_tls() {
                eprintln!("{INSECURE_WARNING}");
            }
            crate::TcpChannel::connect_with(addr, opts, &link.to_peer(addr)?)?
        }
        _ => return Err(usage("give exactly one of --listen ADDR or --peer ADDR".into())),
    })
}
