//! Tests of the link layer over real sockets: full duplex, untrusted header
//! fields, connection setup and TLS with pinned identities.

use super::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const FIVE_S: Duration = Duration::from_secs(5);
/// Generous bound for "fails within 5 s" (slack for a loaded machine).
const WITHIN: Duration = Duration::from_secs(8);

fn opts(timeout_s: u64) -> ChannelOptions {
    ChannelOptions { timeout: Duration::from_secs(timeout_s), ..Default::default() }
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u32).wrapping_mul(2654435761).wrapping_add(seed as u32).rotate_left(7) as u8).collect()
}

fn tls_with(id: &Arc<Identity>, peer: PeerCheck, require_client_cert: bool) -> LinkSecurity {
    LinkSecurity::Tls(TlsSettings { identity: id.clone(), peer, require_client_cert })
}

fn tmpdir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("hush-tls-test-{tag}-{}-{:?}", std::process::id(), Instant::now()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

// ---------------------------------------------------------------- full duplex

/// Both ends send `n` bytes at the same time, then receive the other's.
fn duplex(o: ChannelOptions, sa: &LinkSecurity, sb: &LinkSecurity, n: usize) -> (Cost, Cost) {
    let (a, b) = tcp_pair_loopback_with(o, sa, sb).unwrap();
    let run = move |mut ch: TcpChannel, mine: u8, theirs: u8| {
        thread::spawn(move || {
            let data = pattern(n, mine);
            ch.send_chunked(&data).unwrap();
            let mut out = vec![0u8; n];
            ch.recv_chunked_into("duplex", &mut out).unwrap();
            assert!(out == pattern(n, theirs), "contents differ");
            // One more exchange so both know the other is done.
            ch.send(b"done").unwrap();
            assert_eq!(ch.recv().unwrap(), b"done");
            ch.cost()
        })
    };
    let ha = run(a, 1, 2);
    let hb = run(b, 2, 1);
    (ha.join().unwrap(), hb.join().unwrap())
}

const BIG: usize = 80 << 20;

#[test]
fn duplex_80mb_plain_direct() {
    let (ca, cb) = duplex(opts(60), &LinkSecurity::Insecure, &LinkSecurity::Insecure, BIG);
    assert_eq!(ca.bytes_recv, BIG as u64 + 4);
    assert_eq!(cb.bytes_recv, BIG as u64 + 4);
    // Plaintext: the socket carries the frames plus the 8-byte greeting.
    assert_eq!(ca.socket_bytes_sent, ca.wire_bytes_sent + 8);
    assert_eq!(ca.socket_bytes_recv, ca.wire_bytes_recv + 8);
    assert_eq!(ca.rounds, 2);
}

#[test]
fn duplex_80mb_plain_emulated() {
    let o = ChannelOptions { profile: NetProfile::lan(), ..opts(60) };
    let (ca, cb) = duplex(o, &LinkSecurity::Insecure, &LinkSecurity::Insecure, BIG);
    assert_eq!(ca.bytes_recv, cb.bytes_sent);
    assert_eq!(ca.socket_bytes_sent, ca.wire_bytes_sent + 8);
}

#[test]
fn duplex_80mb_tls_direct() {
    let (ca, cb) = duplex(opts(60), &LinkSecurity::ephemeral_any().unwrap(), &LinkSecurity::ephemeral_any().unwrap(), BIG);
    assert_eq!(ca.bytes_recv, cb.bytes_sent);
    // TLS adds handshake and record overhead on the socket.
    assert!(ca.socket_bytes_sent > ca.wire_bytes_sent + 1000, "{ca:?}");
    assert!(cb.socket_bytes_recv > cb.wire_bytes_recv + 1000, "{cb:?}");
}

#[test]
fn duplex_80mb_tls_emulated_small_frames() {
    let o = ChannelOptions { profile: NetProfile::lan(), max_frame: 1 << 20, ..opts(60) };
    let (ca, cb) = duplex(o, &LinkSecurity::ephemeral_any().unwrap(), &LinkSecurity::ephemeral_any().unwrap(), BIG);
    assert_eq!(ca.bytes_recv, cb.bytes_sent);
    assert_eq!(ca.msgs_recv, 81);
}

#[test]
fn duplex_beyond_buffer_limit_is_a_clear_error() {
    for profile in [NetProfile::none(), NetProfile::lan()] {
        let o = ChannelOptions { max_frame: 1 << 16, max_buffered: Some(1 << 20), profile, ..opts(20) };
        let (a, b) = tcp_pair_loopback(o).unwrap();
        let run = move |mut ch: TcpChannel| {
            thread::spawn(move || {
                let t = Instant::now();
                let r = ch.send_chunked(&vec![7u8; 64 << 20]).and_then(|_| ch.recv().map(|_| ()));
                (r, t.elapsed())
            })
        };
        let (ha, hb) = (run(a), run(b));
        let (ra, ta) = ha.join().unwrap();
        let (rb, tb) = hb.join().unwrap();
        assert!(ra.is_err() && rb.is_err(), "{ra:?} {rb:?}");
        let limit = |r: &Result<()>| matches!(r, Err(Error::BufferLimit { .. }));
        assert!(limit(&ra) || limit(&rb), "{ra:?} {rb:?}");
        assert!(ta < Duration::from_secs(15) && tb < Duration::from_secs(15));
    }
}

#[test]
fn one_way_bulk_and_small_messages_interleave() {
    // Small messages around a large one, both directions, over every mode.
    for sec in [LinkSecurity::Insecure, LinkSecurity::ephemeral_any().unwrap()] {
        for profile in [NetProfile::none(), NetProfile::lan()] {
            let o = ChannelOptions { profile, ..opts(20) };
            let (mut a, mut b) = tcp_pair_loopback_with(o, &sec, &sec).unwrap();
            let h = thread::spawn(move || {
                let big = b.recv().unwrap();
                assert!(big == pattern(3 << 20, 9));
                let mut m = [0u8; 3];
                b.recv_exact_into("small", &mut m).unwrap();
                b.send(&m).unwrap();
                b
            });
            a.send(&pattern(3 << 20, 9)).unwrap();
            a.send(b"abc").unwrap();
            assert_eq!(a.recv().unwrap(), b"abc");
            h.join().unwrap();
        }
    }
}

// ------------------------------------------------------ untrusted header fields

#[test]
fn depth_u32_max_is_an_error_not_a_panic() {
    // In memory.
    let (mut a, mut b) = MemChannel::pair();
    a.send_raw(encode_frame(b"x", u32::MAX, 0)).unwrap();
    let e = b.recv().unwrap_err();
    assert!(matches!(e, Error::DepthOverflow { depth: u32::MAX }), "{e:?}");
    // Over TCP, both receive paths.
    for profile in [NetProfile::none(), NetProfile::lan()] {
        let (mut a, mut b) = tcp_pair_loopback(ChannelOptions { profile: profile.clone(), ..opts(5) }).unwrap();
        a.send_raw(&encode_frame(b"x", u32::MAX, 0)).unwrap();
        let e = b.recv().unwrap_err();
        assert!(matches!(e, Error::DepthOverflow { .. }), "{e:?}");
        assert!(a.recv().is_err(), "the sender learns of it");
        let (mut a, mut b) = tcp_pair_loopback(ChannelOptions { profile, ..opts(5) }).unwrap();
        a.send_raw(&encode_frame(b"y", u32::MAX - 1, 0)).unwrap();
        let mut m = [0u8; 1];
        b.recv_exact_into("depth", &mut m).unwrap();
        b.send(b"z").unwrap(); // depth u32::MAX: allowed to send, the peer rejects it
        assert!(matches!(a.recv(), Err(Error::DepthOverflow { .. })));
    }
}

#[test]
fn peer_announced_delay_is_bounded_by_our_profile() {
    // 20 ms latency, no bandwidth limit: a frame may be held at most 20 ms
    // after arrival, whatever the peer claims.
    let p = NetProfile { name: "t".into(), bandwidth_bps: None, latency: Duration::from_millis(20) };
    let o = ChannelOptions { profile: p, ..opts(60) };
    let (mut a, mut b) = tcp_pair_loopback(o.clone()).unwrap();
    a.send_raw(&encode_frame(b"late", 1, u64::MAX)).unwrap();
    a.send_raw(&encode_frame(b"later", 1, 3_600_000_000_000)).unwrap();
    let t = Instant::now();
    assert_eq!(b.recv().unwrap(), b"late");
    assert_eq!(b.recv().unwrap(), b"later");
    assert!(t.elapsed() < FIVE_S, "{:?}", t.elapsed());
    let (mut a, mut b) = MemChannel::pair_with(o);
    a.send_raw(encode_frame(b"late", 1, u64::MAX)).unwrap();
    let t = Instant::now();
    assert_eq!(b.recv().unwrap(), b"late");
    assert!(t.elapsed() < FIVE_S);
    // With bandwidth, the bound grows with the bytes received: 1 Mbit/s,
    // 12.5 kB -> at most 100 ms + latency.
    let p = NetProfile { name: "t".into(), bandwidth_bps: Some(1_000_000), latency: Duration::from_millis(5) };
    let mut bound = crate::profile::DelayBound::new(p);
    let d = bound.clamp(12_500, u64::MAX, Duration::from_secs(60));
    assert_eq!(d, 105_000_000);
    // Honest delays pass unchanged.
    assert_eq!(bound.clamp(10, 1_000, Duration::from_secs(60)), 1_000);
    // And never beyond the receive timeout.
    assert_eq!(bound.clamp(125_000_000, u64::MAX, Duration::from_secs(1)), 1_000_000_000);
}

// ------------------------------------------------------------ identities

#[test]
fn identity_generate_save_load_fingerprint() {
    use sha2::Digest;
    let id = Identity::generate().unwrap();
    let fp = id.fingerprint();
    assert_eq!(fp.0, <[u8; 32]>::from(sha2::Sha256::digest(id.cert_der())));
    let dir = tmpdir("id");
    id.save(&dir).unwrap();
    let loaded = Identity::load(&dir).unwrap();
    assert_eq!(loaded.fingerprint(), fp);
    assert_eq!(loaded.cert_der(), id.cert_der());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.join("identity.key")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // Refuses to overwrite.
    let other = Identity::generate().unwrap();
    let e = other.save(&dir).unwrap_err();
    assert!(matches!(e, Error::Identity { .. }) && e.to_string().contains("refusing to overwrite"), "{e}");
    assert_eq!(Identity::load(&dir).unwrap().fingerprint(), fp);
    // openssl agrees on the fingerprint, when it is installed.
    if let Ok(out) = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-fingerprint", "-sha256", "-in"])
        .arg(dir.join("identity.crt"))
        .output()
    {
        if out.status.success() {
            let s = String::from_utf8_lossy(&out.stdout);
            let hex = s.trim().rsplit('=').next().unwrap();
            assert_eq!(format!("sha256:{hex}").parse::<Fingerprint>().unwrap(), fp, "{s}");
        }
    }
    // A key that does not match the certificate is refused.
    let dir2 = tmpdir("mismatch");
    other.save(&dir2).unwrap();
    std::fs::copy(dir.join("identity.crt"), dir2.join("identity.crt.tmp")).unwrap();
    std::fs::rename(dir2.join("identity.crt.tmp"), dir2.join("identity.crt")).unwrap();
    assert!(matches!(Identity::load(&dir2), Err(Error::Identity { .. })));
    // Missing / garbage files.
    assert!(matches!(Identity::load(&tmpdir("missing")), Err(Error::Identity { .. })));
    std::fs::write(dir2.join("identity.crt"), b"garbage").unwrap();
    assert!(matches!(Identity::load(&dir2), Err(Error::Identity { .. })));
    // Debug never shows the key.
    assert!(format!("{id:?}").contains(&fp.to_string()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&dir2);
}

#[test]
fn fingerprint_display_and_parse() {
    let fp = Fingerprint([0xab; 32]);
    let s = fp.to_string();
    assert_eq!(s, format!("sha256:{}", "ab".repeat(32)));
    assert_eq!(s.parse::<Fingerprint>().unwrap(), fp);
    assert_eq!(s.to_uppercase().replace("SHA256", "sha256").parse::<Fingerprint>().unwrap(), fp);
    let colons = format!("sha256:{}", vec!["AB"; 32].join(":"));
    assert_eq!(colons.parse::<Fingerprint>().unwrap(), fp);
    for (bad, why) in [
        ("ab".repeat(32), "prefix"),
        (format!("sha1:{}", "ab".repeat(32)), "prefix"),
        (format!("sha256:{}", "ab".repeat(31)), "number of hex digits"),
        (format!("sha256:{}", "ab".repeat(33)), "number of hex digits"),
        (format!("sha256:{}zz", "ab".repeat(31)), "not a hex digit"),
        (String::new(), "prefix"),
    ] {
        let e = bad.parse::<Fingerprint>().unwrap_err();
        assert!(matches!(e, Error::InvalidFingerprint { .. }) && e.to_string().contains(why), "{bad}: {e}");
    }
}

// ------------------------------------------------------------------ TLS

#[test]
fn tls_pinned_pair_exchanges_both_ways() {
    let ia = Arc::new(Identity::generate().unwrap());
    let ib = Arc::new(Identity::generate().unwrap());
    let sa = tls_with(&ia, PeerCheck::Pinned(vec![ib.fingerprint()]), true);
    let sb = tls_with(&ib, PeerCheck::Pinned(vec![Fingerprint([0; 32]), ia.fingerprint()]), false);
    let o = ChannelOptions { max_frame: 1000, ..opts(10) };
    let (mut a, mut b) = tcp_pair_loopback_with(o, &sa, &sb).unwrap();
    assert!(a.is_tls() && b.is_tls());
    assert_eq!(a.peer_fingerprint(), Some(ib.fingerprint()));
    assert_eq!(b.peer_fingerprint(), Some(ia.fingerprint()));
    assert!(b.peer_addr_string().starts_with("127.0.0.1:"));
    let h = thread::spawn(move || {
        let m = b.recv().unwrap();
        b.send(&m[..3]).unwrap();
        let mut out = vec![0u8; 4567];
        b.recv_chunked_into("chunks", &mut out).unwrap();
        assert_eq!(out, pattern(4567, 3));
        let mut x = [0u8; 10];
        b.recv_exact_into("exact", &mut x).unwrap();
        b.send_chunked(&pattern(2500, 4)).unwrap();
        b.cost()
    });
    a.send(b"hello").unwrap();
    assert_eq!(a.recv().unwrap(), b"hel");
    a.send_chunked(&pattern(4567, 3)).unwrap();
    a.send(&[9u8; 10]).unwrap();
    let mut back = vec![0u8; 2500];
    a.recv_chunked_into("back", &mut back).unwrap();
    assert_eq!(back, pattern(2500, 4));
    let cb = h.join().unwrap();
    let ca = a.cost();
    assert_eq!(ca.bytes_sent, cb.bytes_recv);
    assert_eq!(ca.rounds, 4);
    assert_eq!(cb.rounds, 4);
    assert!(ca.socket_bytes_sent > ca.wire_bytes_sent && ca.socket_bytes_recv > ca.wire_bytes_recv);
}

/// Runs a server (`sa`, accepting) against a client (`sb`) and returns both
/// setup results with the time each took.
fn setup_both(sa: LinkSecurity, sb: LinkSecurity) -> ((Result<TcpChannel>, Duration), (Result<TcpChannel>, Duration)) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let hs = thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let t = Instant::now();
        let r = TcpChannel::from_accepted(s, opts(60), &sa);
        (r, t.elapsed())
    });
    let t = Instant::now();
    let rc = TcpChannel::connect_with(addr, opts(60), &sb);
    let ec = t.elapsed();
    (hs.join().unwrap(), (rc, ec))
}

#[test]
fn tls_wrong_server_pin_is_refused_on_both_sides() {
    let ia = Arc::new(Identity::generate().unwrap());
    let ib = Arc::new(Identity::generate().unwrap());
    let wrong = Identity::generate().unwrap().fingerprint();
    let ((rs, ts), (rc, tc)) =
        setup_both(tls_with(&ia, PeerCheck::AnyPeer, false), tls_with(&ib, PeerCheck::Pinned(vec![wrong]), false));
    let ec = rc.err().expect("client must refuse");
    match &ec {
        Error::PinMismatch { got, expected, ours, peer } => {
            assert_eq!(*got, ia.fingerprint());
            assert_eq!(expected, &vec![wrong]);
            assert_eq!(*ours, ib.fingerprint());
            assert!(peer.starts_with("127.0.0.1:"));
        }
        e => panic!("{e:?}"),
    }
    let msg = ec.to_string();
    assert!(msg.contains(&ia.fingerprint().to_string()) && msg.contains(&wrong.to_string()), "{msg}");
    assert!(msg.contains(&ib.fingerprint().to_string()) && msg.contains("--pin expects"), "{msg}");
    let es = rs.err().expect("server must fail too");
    assert!(es.to_string().contains("rejected our certificate"), "{es}");
    assert!(ts < WITHIN && tc < WITHIN, "{ts:?} {tc:?}");
}

#[test]
fn tls_client_cert_required_and_wrong_is_refused() {
    let ia = Arc::new(Identity::generate().unwrap());
    let ib = Arc::new(Identity::generate().unwrap());
    let wrong = Identity::generate().unwrap().fingerprint();
    let ((rs, ts), (rc, tc)) = setup_both(
        tls_with(&ia, PeerCheck::Pinned(vec![wrong]), true),
        tls_with(&ib, PeerCheck::Pinned(vec![ia.fingerprint()]), false),
    );
    let es = rs.err().expect("server must refuse");
    assert!(matches!(&es, Error::PinMismatch { got, .. } if *got == ib.fingerprint()), "{es:?}");
    let ec = rc.err().expect("client must fail too");
    assert!(ec.to_string().contains("rejected our certificate"), "{ec}");
    assert!(ec.to_string().contains(&ib.fingerprint().to_string()), "{ec}");
    assert!(ts < WITHIN && tc < WITHIN, "{ts:?} {tc:?}");
}

#[test]
fn tls_client_cert_required_and_missing_is_refused() {
    // A raw rustls client that presents no certificate.
    let ia = Arc::new(Identity::generate().unwrap());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let sa = tls_with(&ia, PeerCheck::AnyPeer, true);
    let hs = thread::spawn(move || TcpChannel::accept_with(&l, opts(60), &sa));
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"HUSHTLS1").unwrap();
    let mut g = [0u8; 8];
    s.read_exact(&mut g).unwrap();
    #[derive(Debug)]
    struct Any;
    impl rustls::client::danger::ServerCertVerifier for Any {
        fn verify_server_cert(
            &self,
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &[rustls::pki_types::CertificateDer<'_>],
            _: &rustls::pki_types::ServerName<'_>,
            _: &[u8],
            _: rustls::pki_types::UnixTime,
        ) -> std::result::Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            _: &[u8],
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &rustls::DigitallySignedStruct,
        ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
        }
        fn verify_tls13_signature(
            &self,
            _: &[u8],
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &rustls::DigitallySignedStruct,
        ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
        }
        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            rustls::crypto::ring::default_provider().signature_verification_algorithms.supported_schemes()
        }
    }
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Any))
        .with_no_client_auth();
    let mut conn = rustls::ClientConnection::new(Arc::new(cfg), "hush".try_into().unwrap()).unwrap();
    s.set_read_timeout(Some(FIVE_S)).unwrap();
    let mut tls = rustls::Stream::new(&mut conn, &mut s);
    let _ = tls.write_all(b"HUSHRDY1");
    let mut x = [0u8; 8];
    assert!(tls.read_exact(&mut x).is_err(), "the server must not talk to a client without a certificate");
    let e = hs.join().unwrap().err().expect("server refuses");
    assert!(matches!(e, Error::Tls { .. }) && e.to_string().contains("no certificate"), "{e}");
}

#[test]
fn mode_mismatch_errors_on_both_sides() {
    let tls = LinkSecurity::ephemeral_any().unwrap();
    // Plaintext client vs TLS server.
    let ((rs, ts), (rc, tc)) = setup_both(tls.clone(), LinkSecurity::Insecure);
    let es = rs.err().unwrap();
    let ec = rc.err().unwrap();
    assert!(matches!(es, Error::PeerIsPlaintext { .. }), "{es:?}");
    assert!(es.to_string().contains("runs plaintext (--insecure) but this side requires TLS"), "{es}");
    assert!(matches!(ec, Error::PeerWantsTls { .. }), "{ec:?}");
    assert!(ec.to_string().contains("runs with TLS but this side was started with --insecure"), "{ec}");
    assert!(ec.to_string().contains("127.0.0.1:"), "{ec}");
    assert!(ts < WITHIN && tc < WITHIN);
    // TLS client vs plaintext server.
    let ((rs, ts), (rc, tc)) = setup_both(LinkSecurity::Insecure, tls);
    assert!(matches!(rs, Err(Error::PeerWantsTls { .. })));
    assert!(matches!(rc, Err(Error::PeerIsPlaintext { .. })));
    assert!(ts < WITHIN && tc < WITHIN);
}

#[test]
fn garbage_greeting_is_not_hush() {
    for sec in [LinkSecurity::Insecure, LinkSecurity::ephemeral_any().unwrap()] {
        // A garbage client.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let s2 = sec.clone();
        let hs = thread::spawn(move || TcpChannel::accept_with(&l, opts(60), &s2));
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let e = hs.join().unwrap().err().unwrap();
        assert!(matches!(e, Error::NotHush { .. }), "{e:?}");
        assert!(e.to_string().contains("does not speak the hush protocol"));
        // A garbage server.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let hs = thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.write_all(b"SSH-2.0-OpenSSH\r\n").unwrap();
            thread::sleep(Duration::from_millis(500));
        });
        let e = TcpChannel::connect_with(addr, opts(60), &sec).err().unwrap();
        assert!(matches!(e, Error::NotHush { .. }), "{e:?}");
        hs.join().unwrap();
    }
}

#[test]
fn tls_server_keeps_serving_while_a_client_is_silent() {
    let ia = Arc::new(Identity::generate().unwrap());
    let ib = Arc::new(Identity::generate().unwrap());
    let sa = tls_with(&ia, PeerCheck::Pinned(vec![ib.fingerprint()]), true);
    let sb = tls_with(&ib, PeerCheck::Pinned(vec![ia.fingerprint()]), false);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    // The server: accept loop, one handshake thread per connection.
    thread::spawn(move || {
        for s in l.incoming().take(2) {
            let (s, sa, tx) = (s.unwrap(), sa.clone(), tx.clone());
            thread::spawn(move || {
                let t = Instant::now();
                match TcpChannel::from_accepted(s, opts(10), &sa) {
                    Ok(mut ch) => {
                        let m = ch.recv().unwrap();
                        ch.send(&m).unwrap();
                        tx.send(Ok(t.elapsed())).unwrap();
                    }
                    Err(e) => tx.send(Err((e.to_string(), t.elapsed()))).unwrap(),
                }
            });
        }
    });
    // A bad client: connects and says nothing.
    let _silent = TcpStream::connect(addr).unwrap();
    thread::sleep(Duration::from_millis(100));
    // A good client is served meanwhile.
    let t = Instant::now();
    let mut c = TcpChannel::connect_with(addr, opts(10), &sb).unwrap();
    c.send(b"ping").unwrap();
    assert_eq!(c.recv().unwrap(), b"ping");
    assert!(t.elapsed() < Duration::from_secs(4), "served while the other handshake is stuck: {:?}", t.elapsed());
    let first = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(first.is_ok(), "{first:?}");
    // The silent one fails after the handshake deadline, not later.
    let second = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let (msg, el) = second.expect_err("silent client must fail");
    assert!(msg.contains("greeting"), "{msg}");
    assert!(el >= Duration::from_secs(4) && el < WITHIN, "{el:?}");
}

#[test]
fn tls_ca_check_accepts_issued_certs_and_refuses_others() {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issue = || {
        let k = KeyPair::generate().unwrap();
        let c = CertificateParams::new(vec!["hush".to_string()]).unwrap().signed_by(&k, &ca, &ca_key).unwrap();
        Arc::new(Identity::from_der(c.der().to_vec(), k.serialize_der()).unwrap())
    };
    let ca_pem = ca.pem().into_bytes();
    let (ia, ib) = (issue(), issue());
    let sa = tls_with(&ia, PeerCheck::Ca(ca_pem.clone()), true);
    let sb = tls_with(&ib, PeerCheck::Ca(ca_pem.clone()), false);
    let (mut a, mut b) = tcp_pair_loopback_with(opts(10), &sa, &sb).unwrap();
    assert_eq!(a.peer_fingerprint(), Some(ib.fingerprint()));
    assert_eq!(b.peer_fingerprint(), Some(ia.fingerprint()));
    a.send(b"ca").unwrap();
    assert_eq!(b.recv().unwrap(), b"ca");
    // A self-signed client is refused by the CA-checking server; both sides error.
    let rogue = Arc::new(Identity::generate().unwrap());
    let ((rs, ts), (rc, tc)) = setup_both(sa.clone(), tls_with(&rogue, PeerCheck::AnyPeer, false));
    let es = rs.err().expect("server refuses");
    assert!(es.to_string().contains(&rogue.fingerprint().to_string()), "{es}");
    assert!(rc.is_err());
    assert!(ts < WITHIN && tc < WITHIN);
    // A self-signed server is refused by a CA-checking client.
    let ((rs, _), (rc, _)) = setup_both(tls_with(&rogue, PeerCheck::AnyPeer, false), sb);
    assert!(rc.is_err() && rs.is_err());
    // A CA file without certificates is a clear configuration error.
    let bad = tls_with(&ia, PeerCheck::Ca(b"no pem here".to_vec()), false);
    let ((rs, _), (rc, _)) = setup_both(LinkSecurity::ephemeral_any().unwrap(), bad);
    let e = rc.err().unwrap();
    assert!(e.to_string().contains("CA file"), "{e}");
    assert!(rs.is_err());
}

#[test]
fn tls_peer_disconnect_and_garbled_frame() {
    let sec = LinkSecurity::ephemeral_any().unwrap();
    for profile in [NetProfile::none(), NetProfile::lan()] {
        let o = ChannelOptions { profile, ..opts(5) };
        let (mut a, mut b) = tcp_pair_loopback_with(o.clone(), &sec, &sec).unwrap();
        // A TLS link's frames carry no CRC (the AEAD authenticates every
        // record): a frame with one is another framing, refused as garbled.
        let mut f = encode_frame(&[3u8; 100], 1, 0);
        f[HEADER_LEN + 1] ^= 1;
        a.send_raw(&f).unwrap();
        assert!(matches!(b.recv(), Err(Error::Garbled)));
        assert!(a.recv().is_err());
        // Without a CRC, a frame is delivered exactly as its (authenticated)
        // sender wrote it, large bodies (read in place) included.
        for len in [100usize, 200_000] {
            let (mut a, mut b) = tcp_pair_loopback_with(o.clone(), &sec, &sec).unwrap();
            let payload: Vec<u8> = (0..len).map(|i| (i * 7 + 1) as u8).collect();
            let mut f = vec![0u8; HEADER_LEN + len];
            f[HEADER_LEN..].copy_from_slice(&payload);
            crate::frame::write_header_with(&mut f, &payload, 1, 0, false);
            a.send_raw(&f).unwrap();
            a.send(&payload[..len / 2]).unwrap();
            assert_eq!(b.recv().unwrap(), payload);
            assert_eq!(b.recv().unwrap(), payload[..len / 2]);
        }
        let (mut a, b) = tcp_pair_loopback_with(o, &sec, &sec).unwrap();
        drop(b);
        let t = Instant::now();
        assert!(matches!(a.recv(), Err(Error::Disconnected)));
        assert!(t.elapsed() < FIVE_S);
    }
}

#[test]
fn emulated_latency_overlaps_computation() {
    // Arrival is stamped by the I/O thread when the frame arrives, not when
    // `recv` is called: time spent computing counts towards the emulated
    // latency, as on a real link (plaintext and TLS).
    let p = NetProfile { name: "slow".into(), bandwidth_bps: None, latency: Duration::from_secs(2) };
    for sec in [LinkSecurity::Insecure, LinkSecurity::ephemeral_any().unwrap()] {
        let o = ChannelOptions { profile: p.clone(), ..opts(30) };
        let (mut a, mut b) = tcp_pair_loopback_with(o, &sec, &sec).unwrap();
        a.send(b"x").unwrap();
        thread::sleep(Duration::from_millis(2500)); // "computing"
        let t = Instant::now();
        assert_eq!(b.recv().unwrap(), b"x");
        assert!(t.elapsed() < Duration::from_millis(1500), "{:?}", t.elapsed());
        // And the latency is still applied to a frame that arrives now.
        let t = Instant::now();
        a.send(b"y").unwrap();
        assert_eq!(b.recv().unwrap(), b"y");
        assert!(t.elapsed() >= Duration::from_secs(2));
    }
}

#[test]
fn silent_server_fails_setup_within_the_deadline() {
    for sec in [LinkSecurity::Insecure, LinkSecurity::ephemeral_any().unwrap()] {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let h = thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let _ = rx.recv_timeout(Duration::from_secs(30)); // silent until the client gave up
            drop(s);
        });
        let t = Instant::now();
        let e = TcpChannel::connect_with(addr, opts(60), &sec).err().expect("silent server");
        tx.send(()).unwrap();
        assert!(matches!(e, Error::Setup { .. }) && e.to_string().contains("greeting"), "{e}");
        assert!(t.elapsed() >= Duration::from_secs(4) && t.elapsed() < WITHIN, "{:?}", t.elapsed());
        h.join().unwrap();
    }
}

#[test]
fn tls_server_silent_after_greeting_fails_handshake_within_the_deadline() {
    // Greets as TLS, then never answers the ClientHello.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let h = thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.write_all(b"HUSHTLS1").unwrap();
        let _ = rx.recv_timeout(Duration::from_secs(30));
    });
    let t = Instant::now();
    let e = TcpChannel::connect_with(addr, opts(60), &LinkSecurity::ephemeral_any().unwrap()).err().unwrap();
    tx.send(()).unwrap();
    assert!(matches!(e, Error::Setup { .. }) && e.to_string().contains("handshake"), "{e}");
    assert!(t.elapsed() < WITHIN, "{:?}", t.elapsed());
    h.join().unwrap();
}

/// The caller's error type of [`peering::connect_party`] in these tests
/// (the fields are read through `Debug` in failure messages).
#[derive(Debug)]
#[allow(dead_code)]
enum PartyErr {
    Usage(String),
    Link(Error),
    Io(std::io::Error),
}
impl From<Error> for PartyErr {
    fn from(e: Error) -> Self {
        PartyErr::Link(e)
    }
}
impl From<std::io::Error> for PartyErr {
    fn from(e: std::io::Error) -> Self {
        PartyErr::Io(e)
    }
}

/// `connect_party`: neither or both of listen/peer, and an address that
/// cannot be bound, are the caller's usage errors; a connecting party
/// without the peer's pin is refused by the link layer before sending.
#[test]
fn connect_party_refuses_bad_flags_with_the_callers_usage_error() {
    let link = LinkConfig::insecure();
    for (l, p) in [(None, None), (Some("127.0.0.1:0"), Some("127.0.0.1:1"))] {
        match peering::connect_party(l, p, &link, PartyErr::Usage) {
            Err(PartyErr::Usage(m)) => assert_eq!(m, "give exactly one of --listen ADDR or --peer ADDR"),
            other => panic!("{:?}", other.err()),
        }
    }
    match peering::connect_party(Some("not-an-address"), None, &link, PartyErr::Usage) {
        Err(PartyErr::Usage(m)) => assert!(m.starts_with("cannot listen at not-an-address: "), "{m}"),
        other => panic!("{:?}", other.err()),
    }
    let tls = LinkConfig::from_flags(&LinkFlags::default()).unwrap();
    match peering::connect_party(None, Some("127.0.0.1:9"), &tls, PartyErr::Usage) {
        Err(PartyErr::Link(e)) => assert!(e.to_string().contains("pin"), "{e}"),
        other => panic!("{:?}", other.err()),
    }
}

/// `connect_party`: a listening and a connecting party over TLS with the
/// listener's pin exchange messages both ways.
#[test]
fn connect_party_links_a_listener_and_a_pinned_peer() {
    let addr = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let server = LinkConfig::from_flags(&LinkFlags::default()).unwrap();
    let pin = format!("{}", server.fingerprint().unwrap());
    let client = LinkConfig::from_flags(&LinkFlags { pins: vec![pin], ..Default::default() }).unwrap();
    let a2 = addr.clone();
    let t = thread::spawn(move || -> std::result::Result<Vec<u8>, PartyErr> {
        let mut ch = peering::connect_party(Some(&a2), None, &server, PartyErr::Usage)?;
        ch.send(b"from the listener")?;
        Ok(ch.recv()?)
    });
    let mut ch = peering::connect_party(None, Some(&addr), &client, PartyErr::Usage).unwrap();
    assert_eq!(ch.recv().unwrap(), b"from the listener");
    ch.send(b"from the peer").unwrap();
    assert_eq!(t.join().unwrap().unwrap(), b"from the peer");
}

/// Frames whose header, head and body straddle the TLS write chunk
/// (`link::TLS_CHUNK`) and the 16 KiB record size arrive intact, in
/// order, through `recv` and `recv_exact_into`, on both link kinds — the
/// parts are written without being joined (one `writev`, or handed to
/// rustls as they are), and a header read under TLS takes only the header.
#[test]
fn split_parts_across_chunk_and_record_boundaries() {
    let c = crate::link::TLS_CHUNK;
    let sizes: [(usize, usize); 9] =
        [(0, 0), (0, 1), (7, 16 << 10), (16 << 10, 5), (3, c - 20), (c - 20, 0), (1, c), (c, c + 3), (100, 3 * c + 11)];
    for tls in [false, true] {
        let sec = if tls { LinkSecurity::ephemeral_any().unwrap() } else { LinkSecurity::Insecure };
        let (mut a, mut b) = tcp_pair_loopback_with(opts(30), &sec, &sec).unwrap();
        let h = thread::spawn(move || {
            for (i, &(hl, bl)) in sizes.iter().enumerate() {
                let head = pattern(hl, i as u8);
                let body = pattern(bl, 100 + i as u8);
                a.send2(&head, &body).unwrap();
            }
            // Answer so that the sender outlives the reads.
            a.recv().unwrap()
        });
        for (i, &(hl, bl)) in sizes.iter().enumerate() {
            let mut want = pattern(hl, i as u8);
            want.extend(pattern(bl, 100 + i as u8));
            if i % 2 == 0 {
                assert_eq!(b.recv().unwrap(), want, "frame {i} (tls {tls})");
            } else {
                let mut got = vec![0u8; hl + bl];
                b.recv_exact_into("split", &mut got).unwrap();
                assert!(got == want, "frame {i} (tls {tls})");
            }
        }
        b.send(b"ok").unwrap();
        assert_eq!(h.join().unwrap(), b"ok");
        assert_eq!(b.cost().msgs_recv, sizes.len() as u64);
    }
}
