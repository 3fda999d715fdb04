//! Faults *below* the frame checksum on a real TCP stream, plaintext and
//! TLS 1.3: a proxy between the two endpoints flips one bit, cuts the
//! connection, or stalls it at a random byte offset of either direction
//! (greeting, TLS handshake, frame headers and payloads alike). Invariant:
//! the receiver gets exactly the bytes that were sent, or both sides end
//! with an error within the watchdog — a flipped bit is never accepted
//! (CRC32 in plaintext, the AEAD under TLS). Also: the harness itself
//! flags panics, hangs and wrong outputs (so that the campaigns can fail).

use hush_transport::faulty::{judge, spawn_guarded, Ended, FaultKind, FaultyChannel, Schedule, SplitMix, Dir, Tally, Verdict};
use hush_transport::{Channel, ChannelOptions, LinkSecurity, MemChannel, PeerCheck, TcpChannel, TlsSettings, Identity};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
enum Wire {
    None,
    Flip { dir: usize, at: u64, bit: u8 },
    Cut { dir: usize, at: u64 },
    Stall { dir: usize, at: u64 },
}

/// Forwards `from` to `to`, applying `w` if it is aimed at direction `dir`.
fn pump(mut from: TcpStream, mut to: TcpStream, dir: usize, w: Wire, count: Arc<AtomicU64>) {
    let mut buf = [0u8; 4096];
    let mut off = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &mut buf[..n];
        let range = off..off + n as u64;
        match w {
            Wire::Flip { dir: d, at, bit } if d == dir && range.contains(&at) => chunk[(at - off) as usize] ^= 1 << bit,
            Wire::Cut { dir: d, at } if d == dir && range.contains(&at) => {
                let _ = to.write_all(&chunk[..(at - off) as usize]);
                break;
            }
            Wire::Stall { dir: d, at } if d == dir && range.contains(&at) => {
                let _ = to.write_all(&chunk[..(at - off) as usize]);
                // hold the connection open and silent well past the timeout
                std::thread::sleep(Duration::from_secs(3));
                break;
            }
            _ => {}
        }
        off += n as u64;
        count.fetch_add(n as u64, Ordering::Relaxed);
        if to.write_all(chunk).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

fn messages(seed: u64) -> Vec<Vec<u8>> {
    let mut r = SplitMix(seed);
    (0..6).map(|_| (0..r.below(3000)).map(|_| r.next_u64() as u8).collect()).collect()
}

/// One exchange through the proxy: the client sends six messages, the
/// server checks each and answers with their total length. Returns the two
/// parties' ends and the bytes that crossed the proxy each way.
fn exchange(tls: bool, w: Wire) -> (Vec<Ended<Result<bool, String>>>, [u64; 2]) {
    let opts = ChannelOptions { timeout: Duration::from_secs(1), connect_timeout: Duration::from_secs(2), ..Default::default() };
    let (sec_s, sec_c) = if tls {
        let (a, b) = (Arc::new(Identity::generate().unwrap()), Arc::new(Identity::generate().unwrap()));
        (
            LinkSecurity::Tls(TlsSettings { identity: a.clone(), peer: PeerCheck::Pinned(vec![b.fingerprint()]), require_client_cert: true }),
            LinkSecurity::Tls(TlsSettings { identity: b, peer: PeerCheck::Pinned(vec![a.fingerprint()]), require_client_cert: false }),
        )
    } else {
        (LinkSecurity::Insecure, LinkSecurity::Insecure)
    };
    let real = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy = TcpListener::bind("127.0.0.1:0").unwrap();
    let (real_addr, proxy_addr) = (real.local_addr().unwrap(), proxy.local_addr().unwrap());
    let counts = [Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0))];
    let cs = counts.clone();
    std::thread::spawn(move || {
        let Ok((c, _)) = proxy.accept() else { return };
        let Ok(s) = TcpStream::connect(real_addr) else { return };
        let (c2, s2) = (c.try_clone().unwrap(), s.try_clone().unwrap());
        let [k0, k1] = cs;
        let t = std::thread::spawn(move || pump(c, s, 0, w, k0));
        pump(s2, c2, 1, w, k1);
        let _ = t.join();
    });
    let msgs = messages(7);
    let m2 = msgs.clone();
    let o2 = opts.clone();
    let server = spawn_guarded(move || -> Result<bool, String> {
        let mut ch = TcpChannel::accept_with(&real, o2, &sec_s).map_err(|e| e.to_string())?;
        let mut total = 0u64;
        for m in &m2 {
            let got = ch.recv().map_err(|e| e.to_string())?;
            if &got != m {
                return Ok(false);
            }
            total += got.len() as u64;
        }
        ch.send(&total.to_le_bytes()).map_err(|e| e.to_string())?;
        Ok(true)
    });
    let client = spawn_guarded(move || -> Result<bool, String> {
        let mut ch = TcpChannel::connect_with(proxy_addr.to_string(), opts, &sec_c).map_err(|e| e.to_string())?;
        for m in &msgs {
            ch.send(m).map_err(|e| e.to_string())?;
        }
        let r = ch.recv().map_err(|e| e.to_string())?;
        Ok(r == msgs.iter().map(|m| m.len() as u64).sum::<u64>().to_le_bytes())
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let ends = vec![server.wait(deadline), client.wait(deadline)];
    (ends, [counts[0].load(Ordering::Relaxed), counts[1].load(Ordering::Relaxed)])
}

fn campaign(tls: bool, n: u64) -> Tally {
    let (ends, bytes) = exchange(tls, Wire::None);
    let mut tally = Tally::default();
    let v = judge(ends, &[], |o| Some(o.iter().all(|x| *x == Some(true))));
    assert_eq!(v, Verdict::Correct, "fault-free exchange (tls {tls})");
    tally.add(0, &[], &v);
    for i in 0..n {
        let seed = 40_000 + i + if tls { 100_000 } else { 0 };
        let mut r = SplitMix(seed);
        let dir = r.below(2) as usize;
        let at = r.below(bytes[dir]);
        let (w, name) = match r.below(3) {
            0 => (Wire::Flip { dir, at, bit: r.below(8) as u8 }, "wire-flip"),
            1 => (Wire::Cut { dir, at }, "wire-cut"),
            _ => (Wire::Stall { dir, at }, "wire-stall"),
        };
        let (ends, _) = exchange(tls, w);
        // below the checksum nothing may pass undetected: judge as a wire fault
        let v = judge(ends, &[FaultKind::CorruptWire { bit: 0 }], |o| {
            if o.iter().any(|x| *x == Some(false)) {
                Some(false)
            } else if o.iter().all(|x| *x == Some(true)) {
                Some(true)
            } else {
                None
            }
        });
        let v = match v {
            Verdict::Violation(m) => Verdict::Violation(format!("{m}; {w:?} tls {tls}")),
            v => v,
        };
        tally.add(seed, &[name], &v);
    }
    tally
}

fn n_schedules() -> u64 {
    hush_transport::faulty::schedules_from_env(50) * 2 / 5
}

#[test]
fn tcp_plaintext_stream_faults_are_errors() {
    let t = campaign(false, n_schedules());
    eprint!("{}", t.report("tcp-plaintext"));
    assert!(t.violations.is_empty() && t.undetected == 0, "{}", t.report("tcp-plaintext"));
}

#[test]
fn tcp_tls_stream_faults_are_errors() {
    let t = campaign(true, n_schedules());
    eprint!("{}", t.report("tcp-tls"));
    assert!(t.violations.is_empty() && t.undetected == 0, "{}", t.report("tcp-tls"));
}

/// Every single-bit flip of a frame (header and payload) below the
/// checksum is an error at the receiver, and the sender then sees the link
/// closed: exhaustively over all bits of a 20 + 12-byte frame.
#[test]
fn every_wire_bit_flip_is_an_error() {
    let frame_bits = (20 + 12) * 8;
    for bit in 0..frame_bits {
        let (a, b) = MemChannel::pair();
        let mut fb = FaultyChannel::new(b, Schedule::one(Dir::Recv, 0, FaultKind::CorruptWire { bit }));
        let mut a = a;
        a.send(b"twelve bytes").unwrap();
        assert!(fb.recv().is_err(), "bit {bit} passed");
        assert!(fb.recv().is_err());
        assert!(a.recv().is_err(), "peer sees the link closed");
    }
}

/// The judge can fail: a panic, a hang, an empty error and a wrong output
/// after a fault that must be caught are violations; a wrong output after a
/// payload flip above the checksum is "undetected".
#[test]
fn harness_flags_violations() {
    // a panic ends its thread at once: a generous deadline, so that a busy
    // machine that schedules the thread late does not turn it into a hang
    let panics = spawn_guarded(|| -> Result<u8, String> { panic!("boom") });
    let v = judge(vec![panics.wait(Instant::now() + Duration::from_secs(60))], &[], |_| Some(true));
    let d = Instant::now() + Duration::from_millis(300);
    assert!(matches!(v, Verdict::Violation(ref m) if m.contains("boom")), "{v:?}");
    let hangs = spawn_guarded(|| -> Result<u8, String> {
        std::thread::sleep(Duration::from_secs(30)); // far beyond the deadline, however late the wait starts
        Ok(0)
    });
    assert!(matches!(judge(vec![hangs.wait(d)], &[], |_| Some(true)), Verdict::Violation(ref m) if m.contains("hung")));
    let empty: Ended<Result<u8, String>> = Ended::Returned(Err(" ".into()));
    assert!(matches!(judge(vec![empty], &[], |_| None), Verdict::Violation(_)));
    let wrong = || vec![Ended::<Result<u8, String>>::Returned(Ok(1))];
    assert!(matches!(judge(wrong(), &[FaultKind::Truncate { keep: 1 }], |_| Some(false)), Verdict::Violation(_)));
    assert!(matches!(judge(wrong(), &[FaultKind::Delay(Duration::ZERO)], |_| Some(false)), Verdict::Violation(_)));
    assert_eq!(judge(wrong(), &[FaultKind::Corrupt { bit: 3 }], |_| Some(false)), Verdict::Undetected);
    assert_eq!(judge(wrong(), &[], |_| Some(true)), Verdict::Correct);
}

/// A protocol that ignores message lengths (reads a truncated message as
/// if complete) is caught by a campaign with truncations only.
#[test]
fn campaign_catches_a_protocol_without_length_checks() {
    use hush_transport::faulty::{campaign_pair, Mix};
    let mix = Mix { kinds: vec!["truncate"], max_delay: Duration::from_millis(1) };
    let sloppy = |ch: &mut dyn Channel| -> Result<u64, String> {
        let m = ch.recv().map_err(|e| e.to_string())?;
        // sums whatever arrived: a short message gives a wrong sum
        Ok(m.iter().map(|&b| b as u64).sum())
    };
    let sender = |ch: &mut dyn Channel| -> Result<(), String> { ch.send(&[5u8; 64]).map_err(|e| e.to_string()) };
    let t = campaign_pair(20, 1, &mix, Duration::from_millis(500), Duration::from_secs(5), sender, sloppy, |_, b| Some(*b? == 320));
    assert!(!t.violations.is_empty(), "{}", t.report("sloppy"));
}
