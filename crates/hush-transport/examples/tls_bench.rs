//! CPU per byte of a TLS 1.3 link over loopback, in the 3PC engine's
//! pattern: both ends send one message, then receive the peer's (the ring
//! exchange of one AND layer), `N` times.
//!
//! `cargo run --release -p hush-transport --example tls_bench -- [LEN] [N] [--insecure]`
//! (defaults: 54,784 bytes — one AND layer of a 4,096-instance AES chunk —
//! and 20,000 exchanges). Prints user and system CPU of the process per
//! byte moved (each byte counted once, though it is both sent and
//! received), which a loaded machine disturbs far less than wall time.

use hush_transport::{tcp_pair_loopback_with, Channel, ChannelOptions, LinkSecurity};

fn cpu() -> (f64, f64) {
    // SAFETY: `ru` is a valid, zero-initialised rusage the call fills.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 * 1e-6;
    (t(ru.ru_utime), t(ru.ru_stime))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let insecure = args.iter().any(|a| a == "--insecure");
    let nums: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let len = nums.first().copied().unwrap_or(54_784);
    let n = nums.get(1).copied().unwrap_or(20_000);
    let sec = if insecure { LinkSecurity::Insecure } else { LinkSecurity::ephemeral_any().expect("identity") };
    let (mut a, mut b) = tcp_pair_loopback_with(ChannelOptions::default(), &sec, &sec).expect("loopback pair");
    let c0 = cpu();
    let t0 = std::time::Instant::now();
    let th = std::thread::spawn(move || {
        let msg = vec![7u8; len];
        let mut buf = vec![0u8; len];
        for _ in 0..n {
            b.send(&msg).expect("send");
            b.recv_exact_into("bench", &mut buf).expect("recv");
        }
    });
    let msg = vec![9u8; len];
    let mut buf = vec![0u8; len];
    for _ in 0..n {
        a.send(&msg).expect("send");
        a.recv_exact_into("bench", &mut buf).expect("recv");
    }
    th.join().expect("peer thread");
    let c1 = cpu();
    let bytes = (2 * n * len) as f64;
    println!(
        "{} len {len} n {n}: user {:.3} ns/B, system {:.3} ns/B, wall {:.3} s",
        if insecure { "plaintext" } else { "TLS 1.3" },
        (c1.0 - c0.0) / bytes * 1e9,
        (c1.1 - c0.1) / bytes * 1e9,
        t0.elapsed().as_secs_f64()
    );
}
