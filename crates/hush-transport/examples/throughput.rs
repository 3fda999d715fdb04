//! One-way bulk transfer over TCP loopback: `cargo run --release -p
//! hush-transport --example throughput [MB] [reps] [plain|tls]`. Prints MiB/s
//! per run (sender start to receiver done), profile `none`.

use hush_transport::{Channel, ChannelExt, ChannelOptions};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let mb: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(160);
    let reps: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    let n = mb << 20;
    let data: Vec<u8> = (0..n).map(|i| (i * 31 + 7) as u8).collect();
    let mode = args.next().unwrap_or_else(|| "plain".into());
    let (mut a, mut b) = match mode.as_str() {
        "tls" => {
            let s = hush_transport::LinkSecurity::ephemeral_any().unwrap();
            hush_transport::tcp_pair_loopback_with(ChannelOptions::default(), &s, &s).unwrap()
        }
        _ => hush_transport::tcp_pair_loopback(ChannelOptions::default()).unwrap(),
    };
    let mut out = vec![0u8; n];
    let mut rates = Vec::new();
    for _ in 0..reps {
        let d = data.clone();
        let t = Instant::now();
        let h = std::thread::spawn(move || {
            a.send_chunked(&d).unwrap();
            a
        });
        b.recv_chunked_into("bulk", &mut out).unwrap();
        let el = t.elapsed();
        a = h.join().unwrap();
        b.send(b"ack").unwrap();
        a.recv().unwrap();
        assert!(out == data);
        rates.push(mb as f64 / el.as_secs_f64());
        println!("{mb} MiB one-way: {:.1} ms, {:.0} MiB/s", el.as_secs_f64() * 1e3, mb as f64 / el.as_secs_f64());
    }
    rates.sort_by(|x, y| x.partial_cmp(y).unwrap());
    let c = b.cost();
    println!(
        "{mode}: payload {} B, wire {} B, socket {} B received",
        c.bytes_recv, c.wire_bytes_recv, c.socket_bytes_recv
    );
    println!("median {:.0} MiB/s, best {:.0} MiB/s", rates[rates.len() / 2], rates[rates.len() - 1]);
}
