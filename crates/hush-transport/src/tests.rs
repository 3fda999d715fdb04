use super::*;
use std::net::TcpListener;
use std::thread;
use std::time::{Duration, Instant};

fn opts_timeout(ms: u64) -> ChannelOptions {
    ChannelOptions { timeout: Duration::from_millis(ms), ..Default::default() }
}

#[test]
fn mem_roundtrip_and_exact_costs() {
    let (mut a, mut b) = MemChannel::pair();
    // A flight of two messages from a, then simultaneous messages, then a reply.
    a.send(b"hello").unwrap();
    a.send(&[7u8; 100]).unwrap();
    assert_eq!(b.recv().unwrap(), b"hello");
    assert_eq!(b.recv().unwrap(), vec![7u8; 100]);
    // Simultaneous exchange: both send before reading -> one round.
    a.send(&[1u8; 10]).unwrap();
    b.send(&[2u8; 20]).unwrap();
    assert_eq!(a.recv().unwrap(), vec![2u8; 20]);
    assert_eq!(b.recv().unwrap(), vec![1u8; 10]);
    let ca = a.cost();
    let cb = b.cost();
    assert_eq!(ca.bytes_sent, 5 + 100 + 10);
    assert_eq!(ca.bytes_recv, 20);
    assert_eq!(cb.bytes_sent, 20);
    assert_eq!(cb.bytes_recv, 115);
    assert_eq!(ca.msgs_sent, 3);
    assert_eq!(ca.wire_bytes_sent, 115 + 3 * HEADER_LEN as u64);
    // a's first flight is depth 1; a's second send is also depth 1 (a has
    // received nothing yet); b's send after reading depth-1 messages is depth 2.
    assert_eq!(ca.rounds, 2);
    assert_eq!(cb.rounds, 2);
}

#[test]
fn rounds_ping_pong() {
    let (mut a, mut b) = MemChannel::pair();
    for i in 0..5u8 {
        a.send(&[i]).unwrap();
        b.recv().unwrap();
        b.send(&[i]).unwrap();
        a.recv().unwrap();
    }
    assert_eq!(a.cost().rounds, 10);
    assert_eq!(b.cost().rounds, 10);
}

#[test]
fn rounds_simultaneous_exchanges() {
    let (mut a, mut b) = MemChannel::pair();
    for _ in 0..3 {
        a.send(&[1]).unwrap();
        b.send(&[2]).unwrap();
        a.recv().unwrap();
        b.recv().unwrap();
    }
    assert_eq!(a.cost().rounds, 3);
    assert_eq!(b.cost().rounds, 3);
}

#[test]
fn mem_truncated_oversized_garbled() {
    // Truncated
    let (mut a, mut b) = MemChannel::pair();
    let mut f = encode_frame(&[9u8; 50], 1, 0);
    f.truncate(30);
    a.send_raw(f).unwrap();
    assert!(matches!(b.recv(), Err(Error::Truncated { .. })));
    assert!(matches!(a.recv(), Err(Error::Disconnected)));
    assert!(a.send(b"x").is_err());

    // Oversized
    let o = ChannelOptions { max_frame: 64, ..Default::default() };
    let (mut a, mut b) = MemChannel::pair_with(o);
    assert!(matches!(a.send(&[0u8; 65]), Err(Error::Oversized { .. })));
    let mut f = encode_frame(&[0u8; 8], 1, 0);
    f[0..4].copy_from_slice(&(1u32 << 30).to_le_bytes());
    a.send_raw(f).unwrap();
    assert!(matches!(b.recv(), Err(Error::Oversized { len, .. }) if len == 1 << 30));
    assert!(matches!(a.recv(), Err(Error::Disconnected)));

    // Garbled
    let (mut a, mut b) = MemChannel::pair();
    let mut f = encode_frame(&[3u8; 40], 1, 0);
    f[HEADER_LEN + 7] ^= 0x10;
    a.send_raw(f).unwrap();
    assert!(matches!(b.recv(), Err(Error::Garbled)));
    assert!(matches!(a.recv(), Err(Error::Disconnected)));
}

#[test]
fn mem_timeout_and_disconnect() {
    let (mut a, b) = MemChannel::pair_with(opts_timeout(50));
    let t = Instant::now();
    assert!(matches!(a.recv(), Err(Error::Timeout(_))));
    assert!(t.elapsed() < Duration::from_secs(5));
    drop(b);
    assert!(matches!(a.recv(), Err(Error::Disconnected)));
}

#[test]
fn recv_exact_checks_length() {
    let (mut a, mut b) = MemChannel::pair();
    a.send(&[0u8; 3]).unwrap();
    assert!(matches!(b.recv_exact("test", 4), Err(Error::WrongLength { expected: 4, got: 3, .. })));
}

#[test]
fn chunked_is_one_round() {
    let o = ChannelOptions { max_frame: 1000, ..Default::default() };
    let (mut a, mut b) = MemChannel::pair_with(o);
    let data: Vec<u8> = (0..4567u32).map(|i| i as u8).collect();
    a.send_chunked(&data).unwrap();
    let mut out = vec![0u8; data.len()];
    b.recv_chunked_into("chunks", &mut out).unwrap();
    assert_eq!(out, data);
    assert_eq!(b.cost().rounds, 1);
    assert_eq!(b.cost().msgs_recv, 5);
}

#[test]
fn tcp_roundtrip_costs_match_memory() {
    let (mut a, mut b) = tcp_pair_loopback(ChannelOptions::default()).unwrap();
    let h = thread::spawn(move || {
        let m = b.recv().unwrap();
        b.send(&m[..10]).unwrap();
        let big = b.recv().unwrap();
        assert_eq!(big.len(), 1 << 20);
        b.cost()
    });
    a.send(&[5u8; 1000]).unwrap();
    assert_eq!(a.recv().unwrap(), vec![5u8; 10]);
    a.send(&vec![1u8; 1 << 20]).unwrap();
    let cb = h.join().unwrap();
    let ca = a.cost();
    assert_eq!(ca.bytes_sent, 1000 + (1 << 20));
    assert_eq!(ca.bytes_recv, 10);
    assert_eq!(cb.bytes_recv, ca.bytes_sent);
    assert_eq!(ca.rounds, 3);
    assert_eq!(cb.rounds, 3);
}

#[test]
fn tcp_garbled_and_truncated_and_oversized() {
    for case in 0..3 {
        let o = ChannelOptions { max_frame: 1 << 16, timeout: Duration::from_secs(5), ..Default::default() };
        let (mut a, mut b) = tcp_pair_loopback(o).unwrap();
        let mut f = encode_frame(&[3u8; 100], 1, 0);
        match case {
            0 => f[HEADER_LEN + 1] ^= 1,
            1 => f[0..4].copy_from_slice(&(1u32 << 20).to_le_bytes()),
            _ => f.truncate(60),
        }
        a.send_raw(&f).unwrap();
        if case == 2 {
            // The sender of a truncated frame then disconnects.
            a.shutdown();
        }
        let e = b.recv().unwrap_err();
        match case {
            0 => assert!(matches!(e, Error::Garbled), "{e:?}"),
            1 => assert!(matches!(e, Error::Oversized { .. }), "{e:?}"),
            _ => assert!(matches!(e, Error::Truncated { .. }), "{e:?}"),
        }
        if case != 2 {
            // The sender's side ends with an error too.
            assert!(a.recv().is_err());
        }
    }
}

#[test]
fn tcp_peer_disconnect_mid_protocol_errors_within_timeout() {
    let o = opts_timeout(2000);
    let (mut a, mut b) = tcp_pair_loopback(o).unwrap();
    let h = thread::spawn(move || {
        let _ = b.recv().unwrap();
        drop(b); // dies mid-protocol
    });
    a.send(b"step 1").unwrap();
    let t = Instant::now();
    let e = a.recv().unwrap_err();
    assert!(matches!(e, Error::Disconnected), "{e:?}");
    assert!(t.elapsed() < Duration::from_secs(2));
    h.join().unwrap();
}

#[test]
fn tcp_silent_peer_times_out() {
    let o = opts_timeout(200);
    let (mut a, _b) = tcp_pair_loopback(o).unwrap();
    let t = Instant::now();
    assert!(matches!(a.recv(), Err(Error::Timeout(_))));
    assert!(t.elapsed() < Duration::from_secs(3));
}

#[test]
fn connect_to_nothing_fails_within_timeout() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    let o = ChannelOptions { connect_timeout: Duration::from_millis(300), ..opts_timeout(200) };
    let t = Instant::now();
    let e = TcpChannel::connect(addr, o.clone()).err().expect("nothing listens");
    assert!(matches!(&e, Error::ConnectRefused { .. }), "{e:?}");
    assert_eq!(e.to_string(), format!("could not connect to {addr}: connection refused"));
    let e = TcpChannel::connect_with(addr, o, &LinkSecurity::Insecure).err().expect("nothing listens");
    assert!(matches!(&e, Error::ConnectRefused { .. }), "{e:?}");
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn connect_retries_until_the_listener_appears() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    let h = thread::spawn(move || {
        thread::sleep(Duration::from_millis(300));
        let l = TcpListener::bind(addr).unwrap();
        let mut a = TcpChannel::accept(&l, ChannelOptions::default()).unwrap();
        a.send(b"late").unwrap();
    });
    let o = ChannelOptions { connect_timeout: Duration::from_secs(10), ..Default::default() };
    let mut b = TcpChannel::connect(addr, o).unwrap();
    assert_eq!(b.recv().unwrap(), b"late");
    h.join().unwrap();
}

#[test]
fn profile_adds_latency_and_bandwidth() {
    // 8 Mbit/s and 20 ms one way: 100 kB takes 100 ms to transmit.
    let p = NetProfile { name: "test".into(), bandwidth_bps: Some(8_000_000), latency: Duration::from_millis(20) };
    let o = ChannelOptions { profile: p, ..Default::default() };
    let (mut a, mut b) = MemChannel::pair_with(o);
    let t = Instant::now();
    a.send(&vec![0u8; 100_000]).unwrap();
    b.recv().unwrap();
    let el = t.elapsed();
    // Lower bound only (emulation must not deliver early).
    assert!(el >= Duration::from_millis(115), "{el:?}");
    assert_eq!(NetProfile::by_name("mobile").unwrap().latency, Duration::from_millis(80));
    let s = NetProfile::by_name("shaper").unwrap();
    assert_eq!((s.bandwidth_bps, s.latency), (Some(40_000_000), Duration::from_millis(40)));
    assert!(NetProfile::names().iter().all(|n| NetProfile::by_name(n).is_some_and(|p| p.name == *n)));
    assert!(NetProfile::by_name("bogus").is_none());
}

#[test]
fn tcp_emulated_profile_path_roundtrip_and_garbled() {
    let o = ChannelOptions { profile: NetProfile::lan(), timeout: Duration::from_secs(5), ..Default::default() };
    let (mut a, mut b) = tcp_pair_loopback(o).unwrap();
    a.send(&[1u8; 5000]).unwrap();
    let mut out = vec![0u8; 5000];
    b.recv_exact_into("test", &mut out).unwrap();
    assert_eq!(out, vec![1u8; 5000]);
    b.send(b"ok").unwrap();
    assert_eq!(a.recv().unwrap(), b"ok");
    assert_eq!(a.cost().rounds, 2);
    let mut f = encode_frame(&[3u8; 100], 1, 0);
    f[HEADER_LEN + 1] ^= 1;
    a.send_raw(&f).unwrap();
    assert!(matches!(b.recv(), Err(Error::Garbled)));
    assert!(a.recv().is_err());
}

#[test]
fn tcp_recv_exact_into_wrong_length_closes() {
    let (mut a, mut b) = tcp_pair_loopback(ChannelOptions { timeout: Duration::from_secs(5), ..Default::default() }).unwrap();
    a.send(&[0u8; 10]).unwrap();
    let mut out = [0u8; 11];
    assert!(matches!(b.recv_exact_into("step", &mut out), Err(Error::WrongLength { expected: 11, got: 10, .. })));
    assert!(a.recv().is_err());
}

/// Lanes of one emulated link: independent in-order channels, each metering
/// its own bytes and rounds, sharing one shaper per side (the shared
/// shaper's queue is what the receivers wait on).
#[test]
fn lanes_are_independent_channels_on_one_link() {
    let o = ChannelOptions { profile: NetProfile::lan(), timeout: Duration::from_secs(5), ..Default::default() };
    let mut lanes = MemChannel::lanes_with(o, 3);
    assert_eq!(lanes.len(), 3);
    let hs: Vec<_> = lanes
        .drain(..)
        .enumerate()
        .map(|(i, (mut a, mut b))| {
            thread::spawn(move || {
                a.send(&vec![i as u8; 1000 * (i + 1)]).unwrap();
                let got = b.recv().unwrap();
                assert_eq!(got, vec![i as u8; 1000 * (i + 1)]);
                b.send(&[i as u8]).unwrap();
                assert_eq!(a.recv().unwrap(), vec![i as u8]);
                (a.cost(), b.cost())
            })
        })
        .collect();
    for (i, h) in hs.into_iter().enumerate() {
        let (ca, cb) = h.join().unwrap();
        assert_eq!(ca.bytes_sent, 1000 * (i as u64 + 1));
        assert_eq!(cb.bytes_recv, ca.bytes_sent);
        assert_eq!((ca.rounds, cb.rounds), (2, 2));
    }
    // one lane is an ordinary pair
    let (mut a, mut b) = MemChannel::lanes_with(ChannelOptions::default(), 0).pop().unwrap();
    a.send(b"x").unwrap();
    assert_eq!(b.recv().unwrap(), b"x");
}
