//! `hush bench aes`: fixed-key AES-128 throughput on one core, next to
//! OpenSSL's AES-128-ECB on the same machine in the same run (when
//! `openssl` is on the PATH; set `HUSH_BENCH_NO_OPENSSL` to skip it).

use crate::Record;
use hush_primitives::{aes, Block};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Encrypts a buffer of `batch` blocks in place, repeatedly, for about
/// `seconds`, on the calling thread (one core); then runs
/// `openssl speed -elapsed -evp aes-128-ecb` on buffers of the same size
/// for about as long and reports the ratio `openssl_ratio` = hush blocks/s
/// ÷ OpenSSL blocks/s.
pub fn bench_aes(batch: usize, seconds: f64) -> Record {
    let blocks_per_s = hush_blocks_per_s(batch, seconds);
    let mut r = Record::new("aes");
    r.set("backend", aes::backend().name())
        .set("wall_s", blocks_per_s.1)
        .set("setup_s", 0.0)
        .set("bytes", 0)
        .set("rounds", 0)
        .set("blocks", blocks_per_s.2)
        .set("batch", batch as u64)
        .set("blocks_per_s", blocks_per_s.0)
        .set("cores", 1)
        .set("machine", "one thread on this machine");
    crate::machine_fields(&mut r);
    if std::env::var_os("HUSH_BENCH_NO_OPENSSL").is_some() {
        r.set("openssl_note", "skipped (HUSH_BENCH_NO_OPENSSL)");
        return r;
    }
    let secs = seconds.ceil().clamp(1.0, 60.0) as u64;
    match openssl_blocks_per_s(16 * batch, secs) {
        Ok((o, cmd, version)) => {
            r.set("openssl_blocks_per_s", o)
                .set("openssl_ratio", blocks_per_s.0 / o)
                .set("openssl_cmd", cmd)
                .set("openssl_version", version);
        }
        Err(e) => {
            r.set("openssl_note", e);
        }
    }
    r
}

/// (blocks/s, wall seconds, blocks) of `fixed_key().encrypt_blocks`.
fn hush_blocks_per_s(batch: usize, seconds: f64) -> (f64, f64, u64) {
    let a = aes::fixed_key();
    let mut buf: Vec<Block> = (0..batch as u128).map(Block).collect();
    // Warm up.
    a.encrypt_blocks(&mut buf);
    let t = Instant::now();
    let mut blocks = 0u64;
    while t.elapsed().as_secs_f64() < seconds {
        for _ in 0..16 {
            a.encrypt_blocks(&mut buf);
        }
        blocks += 16 * batch as u64;
    }
    let wall = t.elapsed().as_secs_f64();
    std::hint::black_box(&buf);
    (blocks as f64 / wall, wall, blocks)
}

/// Runs `openssl speed` on `bytes`-byte buffers for `secs` seconds:
/// Ok((blocks/s, command, version)) or why not.
fn openssl_blocks_per_s(bytes: usize, secs: u64) -> Result<(f64, String, String), String> {
    let args = ["speed", "-elapsed", "-evp", "aes-128-ecb", "-bytes", &bytes.to_string(), "-seconds", &secs.to_string()];
    let out = run_with_timeout("openssl", &args, Duration::from_secs(secs + 30))?;
    let bps = parse_openssl_speed(&out, "aes-128-ecb").ok_or_else(|| "could not parse the output of openssl speed".to_string())?;
    let version = run_with_timeout("openssl", &["version"], Duration::from_secs(10)).map(|v| v.trim().to_string()).unwrap_or_default();
    Ok((bps / 16.0, format!("openssl {}", args.join(" ")), version))
}

fn run_with_timeout(prog: &str, args: &[&str], limit: Duration) -> Result<String, String> {
    let mut child = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{prog} not run ({e}): is it on the PATH?"))?;
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    let t = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if t.elapsed() < limit => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{prog} took longer than {} s; killed", limit.as_secs()));
            }
            Err(e) => return Err(format!("waiting for {prog}: {e}")),
        }
    };
    let out = reader.join().unwrap_or_default();
    if !status.success() {
        return Err(format!("{prog} {} exited with {status}", args.join(" ")));
    }
    Ok(out)
}

/// Bytes per second from `openssl speed` output: the last figure of the
/// result line whose first token is `cipher` (case-insensitive). Figures
/// are in 1000s of bytes per second with a `k` suffix (OpenSSL 1.1 and 3).
fn parse_openssl_speed(out: &str, cipher: &str) -> Option<f64> {
    for line in out.lines().rev() {
        let mut toks = line.split_whitespace();
        if !toks.next().is_some_and(|t| t.eq_ignore_ascii_case(cipher)) {
            continue;
        }
        let last = toks.last()?;
        let (num, mul) = match last.strip_suffix(['k', 'K']) {
            Some(n) => (n, 1000.0),
            None => (last, 1.0),
        };
        if let Ok(v) = num.parse::<f64>() {
            if v.is_finite() && v > 0.0 {
                return Some(v * mul);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_openssl_speed() {
        let out = "Doing AES-128-ECB for 1s on 16384 size blocks: 673716 AES-128-ECB's in 1.00s\n\
                   version: 3.0.19\n\
                   The 'numbers' are in 1000s of bytes per second processed.\n\
                   type          16384 bytes\n\
                   AES-128-ECB   11037851.65k\n";
        assert_eq!(parse_openssl_speed(out, "aes-128-ecb"), Some(11037851.65e3));
        let multi = "type 16 bytes 64 bytes\naes-128-ecb  1000.00k  2000.50k\n";
        assert_eq!(parse_openssl_speed(multi, "aes-128-ecb"), Some(2000.5e3));
        assert_eq!(parse_openssl_speed("garbage\nAES-128-ECB nan\n", "aes-128-ecb"), None);
        assert_eq!(parse_openssl_speed("", "aes-128-ecb"), None);
    }
}
