//! TCP channel.
//!
//! Two receive paths:
//! * **direct** (profile `none`): `recv` reads the frame from the socket
//!   itself, with the socket's read timeout as the silence timeout, and can
//!   read straight into a caller's buffer — no extra thread, no copy;
//! * **emulated** (any other profile): a reader thread pulls frames off the
//!   socket as soon as they arrive, so the emulated latency is measured from
//!   the real arrival time, and queues them for `recv`.
//!
//! Either way frames are validated before use and any framing error closes
//! the connection, so the peer's next operation fails too.

use crate::frame::{decode_header, verify, write_header, FrameHeader};
use crate::meter::{Cost, RoundClock};
use crate::profile::{wait_delivery, LinkShaper};
use crate::{Channel, ChannelOptions, Error, Result, HEADER_LEN};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

type Incoming = Result<(Instant, FrameHeader, Vec<u8>)>;

/// Frames read ahead of `recv` before the reader thread blocks.
const READ_AHEAD: usize = 8;
/// Payloads up to this size are copied next to the header and written with
/// one system call.
const COALESCE: usize = 64 << 10;

/// A framed, metered TCP connection to one peer.
pub struct TcpChannel {
    stream: TcpStream,
    /// Emulated mode only.
    rx: Option<Receiver<Incoming>>,
    opts: ChannelOptions,
    shaper: LinkShaper,
    clock: RoundClock,
    cost: Cost,
    closed: bool,
    scratch: Vec<u8>,
}

impl TcpChannel {
    /// Wraps a connected stream.
    pub fn from_stream(stream: TcpStream, opts: ChannelOptions) -> Result<Self> {
        stream.set_nodelay(true)?;
        stream.set_write_timeout(Some(opts.timeout))?;
        let rx = if opts.profile.is_none() {
            stream.set_read_timeout(Some(opts.timeout))?;
            None
        } else {
            let rs = stream.try_clone()?;
            let (tx, rx) = sync_channel::<Incoming>(READ_AHEAD);
            let max = opts.max_frame;
            std::thread::Builder::new()
                .name("hush-tcp-reader".into())
                .spawn(move || reader_loop(rs, max, tx))?;
            Some(rx)
        };
        Ok(Self {
            shaper: LinkShaper::new(opts.profile.clone()),
            stream,
            rx,
            opts,
            clock: RoundClock::default(),
            cost: Cost::default(),
            closed: false,
            scratch: Vec::new(),
        })
    }

    /// Connects to `addr`, retrying until the timeout (the peer may still be
    /// starting up).
    pub fn connect(addr: impl ToSocketAddrs + Clone, opts: ChannelOptions) -> Result<Self> {
        let deadline = Instant::now() + opts.timeout;
        loop {
            match TcpStream::connect(addr.clone()) {
                Ok(s) => return Self::from_stream(s, opts),
                Err(e) if Instant::now() < deadline
                    && matches!(e.kind(), ErrorKind::ConnectionRefused | ErrorKind::ConnectionReset) =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) if Instant::now() >= deadline => {
                    return Err(if e.kind() == ErrorKind::ConnectionRefused {
                        Error::Timeout(opts.timeout)
                    } else {
                        Error::Io(e)
                    })
                }
                Err(e) => return Err(Error::Io(e)),
            }
        }
    }

    /// Accepts one connection on `listener`.
    pub fn accept(listener: &TcpListener, opts: ChannelOptions) -> Result<Self> {
        let (s, _) = listener.accept()?;
        Self::from_stream(s, opts)
    }

    /// Test hook: writes raw bytes to the socket (to play a broken peer).
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.stream.write_all(bytes).map_err(io_err)
    }

    /// Closes the connection; the peer sees a disconnect.
    pub fn shutdown(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Both);
        self.closed = true;
    }

    fn fail<T>(&mut self, e: Error) -> Result<T> {
        self.shutdown();
        Err(match e {
            Error::Timeout(_) => Error::Timeout(self.opts.timeout),
            e => e,
        })
    }

    /// Direct mode: reads one header.
    fn read_header(&mut self) -> Result<FrameHeader> {
        let mut h = [0u8; HEADER_LEN];
        let got = read_full(&mut self.stream, &mut h).map_err(io_err)?;
        if got == 0 {
            return Err(Error::Disconnected);
        }
        if got < HEADER_LEN {
            return Err(Error::Truncated { expected: HEADER_LEN, got });
        }
        let hdr = decode_header(&h, self.opts.max_frame)?;
        self.scratch.clear();
        self.scratch.extend_from_slice(&h);
        Ok(hdr)
    }

    /// Direct mode: reads and verifies the body of `hdr` into `out`.
    fn read_body(&mut self, hdr: &FrameHeader, out: &mut [u8]) -> Result<()> {
        let n = read_full(&mut self.stream, out).map_err(io_err)?;
        if n < hdr.len {
            return Err(Error::Truncated { expected: hdr.len, got: n });
        }
        verify(&self.scratch[..HEADER_LEN], out, hdr)
    }

    fn account_recv(&mut self, hdr: &FrameHeader) {
        self.clock.on_recv(hdr.depth);
        self.cost.bytes_recv += hdr.len as u64;
        self.cost.wire_bytes_recv += (hdr.len + HEADER_LEN) as u64;
        self.cost.msgs_recv += 1;
    }
}

fn io_err(e: std::io::Error) -> Error {
    match e.kind() {
        ErrorKind::BrokenPipe | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::UnexpectedEof => {
            Error::Disconnected
        }
        ErrorKind::WouldBlock | ErrorKind::TimedOut => Error::Timeout(Duration::ZERO),
        _ => Error::Io(e),
    }
}

/// Reads exactly `buf.len()` bytes; `Ok(n < len)` means EOF after `n` bytes.
fn read_full(s: &mut TcpStream, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut off = 0;
    while off < buf.len() {
        match s.read(&mut buf[off..]) {
            Ok(0) => return Ok(off),
            Ok(n) => off += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(off)
}

fn reader_loop(mut s: TcpStream, max_frame: usize, tx: std::sync::mpsc::SyncSender<Incoming>) {
    loop {
        let mut h = [0u8; HEADER_LEN];
        let got = match read_full(&mut s, &mut h) {
            Ok(n) => n,
            Err(e) => {
                let _ = tx.send(Err(io_err(e)));
                return;
            }
        };
        if got == 0 {
            let _ = tx.send(Err(Error::Disconnected));
            return;
        }
        let arrived = Instant::now();
        let res = (|| {
            if got < HEADER_LEN {
                return Err(Error::Truncated { expected: HEADER_LEN, got });
            }
            let hdr = decode_header(&h, max_frame)?;
            let mut body = vec![0u8; hdr.len];
            let n = read_full(&mut s, &mut body).map_err(io_err)?;
            if n < hdr.len {
                return Err(Error::Truncated { expected: hdr.len, got: n });
            }
            verify(&h, &body, &hdr)?;
            Ok((arrived, hdr, body))
        })();
        let failed = res.is_err();
        if tx.send(res).is_err() || failed {
            if failed {
                // Broken framing: close so the peer learns of it.
                let _ = s.shutdown(Shutdown::Both);
            }
            return;
        }
    }
}

impl Channel for TcpChannel {
    fn send(&mut self, payload: &[u8]) -> Result<()> {
        if self.closed {
            return Err(Error::Closed);
        }
        if payload.len() > self.opts.max_frame {
            return Err(Error::Oversized { len: payload.len(), max: self.opts.max_frame });
        }
        let depth = self.clock.on_send();
        let delay = self.shaper.delay_for(payload.len() + HEADER_LEN);
        let mut h = [0u8; HEADER_LEN];
        write_header(&mut h, payload, depth, delay);
        let r = if payload.len() <= COALESCE {
            let mut buf = std::mem::take(&mut self.scratch);
            buf.clear();
            buf.extend_from_slice(&h);
            buf.extend_from_slice(payload);
            let r = self.stream.write_all(&buf);
            self.scratch = buf;
            r
        } else {
            self.stream.write_all(&h).and_then(|_| self.stream.write_all(payload))
        };
        if let Err(e) = r {
            return self.fail(io_err(e));
        }
        self.cost.bytes_sent += payload.len() as u64;
        self.cost.wire_bytes_sent += (payload.len() + HEADER_LEN) as u64;
        self.cost.msgs_sent += 1;
        Ok(())
    }

    fn recv(&mut self) -> Result<Vec<u8>> {
        if self.closed {
            return Err(Error::Closed);
        }
        let Some(rx) = self.rx.as_ref() else {
            let r = self.read_header().and_then(|hdr| {
                let mut body = vec![0u8; hdr.len];
                self.read_body(&hdr, &mut body).map(|_| (hdr, body))
            });
            return match r {
                Ok((hdr, body)) => {
                    self.account_recv(&hdr);
                    Ok(body)
                }
                Err(e) => self.fail(e),
            };
        };
        let r = match rx.recv_timeout(self.opts.timeout) {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) => return self.fail(Error::Timeout(self.opts.timeout)),
            Err(RecvTimeoutError::Disconnected) => Err(Error::Disconnected),
        };
        match r {
            Ok((arrived, hdr, body)) => {
                wait_delivery(arrived, hdr.delay_ns.min(self.opts.timeout.as_nanos() as u64));
                self.account_recv(&hdr);
                Ok(body)
            }
            Err(e) => self.fail(e),
        }
    }

    fn recv_exact_into(&mut self, what: &'static str, out: &mut [u8]) -> Result<()> {
        if self.rx.is_some() {
            let m = self.recv()?;
            if m.len() != out.len() {
                return self.fail(Error::WrongLength { what, expected: out.len(), got: m.len() });
            }
            out.copy_from_slice(&m);
            return Ok(());
        }
        if self.closed {
            return Err(Error::Closed);
        }
        let r = self.read_header().and_then(|hdr| {
            if hdr.len != out.len() {
                return Err(Error::WrongLength { what, expected: out.len(), got: hdr.len });
            }
            self.read_body(&hdr, out).map(|_| hdr)
        });
        match r {
            Ok(hdr) => {
                self.account_recv(&hdr);
                Ok(())
            }
            Err(e) => self.fail(e),
        }
    }

    fn cost(&self) -> Cost {
        let mut c = self.cost;
        c.rounds = self.clock.rounds();
        c
    }

    fn max_frame(&self) -> usize {
        self.opts.max_frame
    }

    fn set_timeout(&mut self, timeout: Duration) {
        self.opts.timeout = timeout;
        let _ = self.stream.set_write_timeout(Some(timeout));
        if self.rx.is_none() {
            let _ = self.stream.set_read_timeout(Some(timeout));
        }
    }
}

impl Drop for TcpChannel {
    fn drop(&mut self) {
        // Also ends the reader thread (its read fails once the socket is shut).
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

/// Two TCP channels connected over 127.0.0.1 (for benchmarks and tests).
pub fn tcp_pair_loopback(opts: ChannelOptions) -> Result<(TcpChannel, TcpChannel)> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    let addr = l.local_addr()?;
    let o2 = opts.clone();
    let t = std::thread::spawn(move || TcpChannel::connect(addr, o2));
    let a = TcpChannel::accept(&l, opts)?;
    let b = t.join().map_err(|_| Error::Disconnected)??;
    Ok((a, b))
}
