//! The byte pump under [`crate::TcpChannel`]: a non-blocking socket driven
//! by `poll(2)`, optionally wrapped in a rustls connection.
//!
//! A [`Link`] never blocks inside a system call. Sending pushes bytes until
//! the socket is full and then reports [`Progress::Blocked`]; the caller
//! waits with `poll` — for the direct (single-threaded) channel, waiting for
//! *either* writability *or* readability, reading whatever arrives into the
//! inbound buffer meanwhile ([`Link::wait_send`]). That is what keeps two
//! parties that send large messages at the same time from deadlocking: each
//! keeps draining the other's bytes while its own send is stuck. Inbound
//! buffering is bounded ([`crate::ChannelOptions::max_buffered`]); past the
//! bound the pump fails with [`Error::BufferLimit`] instead of allocating.
//!
//! Reads serve the inbound buffer first and then read straight from the
//! socket into the caller's buffer (plaintext) or from rustls' plaintext
//! queue (TLS), so a bulk receive with nothing buffered costs no extra copy.

use crate::{Error, Result};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

/// Bytes read from the socket per call into the inbound (or TLS record) buffer.
const READ_CHUNK: usize = 256 << 10;
/// Plaintext handed to rustls per call (it encrypts into records of 16 KiB);
/// also the limit of rustls' queue of encrypted records ([`tls_buffer_limit`]),
/// so that a message of up to this size (e.g. one AND layer of the 3PC
/// engine, ≈ 55 KB) leaves in **one** `writev`, not one `write` per record.
pub(crate) const TLS_CHUNK: usize = 256 << 10;

/// The limit set on a fresh rustls connection's buffers: one
/// [`TLS_CHUNK`] of plaintext plus its record overhead (22 bytes per 16 KiB
/// record) fits, so `push` encrypts a whole chunk before flushing it.
pub(crate) fn tls_buffer_limit() -> usize {
    TLS_CHUNK + (TLS_CHUNK / (16 << 10) + 1) * 64
}
/// Bytes read per wake-up while a send is blocked, before trying to write again.
const FAIR_SHARE: usize = 1 << 20;
/// Inbound buffers larger than this are released once drained.
const KEEP_BUF: usize = 4 << 20;

pub(crate) const POLLIN: i16 = libc::POLLIN;
pub(crate) const POLLOUT: i16 = libc::POLLOUT;

/// Waits for `events` on `fd` until `deadline`; returns the reported events,
/// 0 on timeout.
pub(crate) fn poll_fd(fd: RawFd, events: i16, deadline: Instant) -> Result<i16> {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Ok(0);
        }
        let ms = (deadline - now).as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        let mut p = libc::pollfd { fd, events, revents: 0 };
        // SAFETY: `p` is one valid, initialised pollfd living on the stack for
        // the duration of the call, and we pass a count of 1.
        let r = unsafe { libc::poll(&mut p, 1, ms) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            return Err(Error::Io(e));
        }
        if r > 0 {
            return Ok(p.revents);
        }
    }
}

/// Maps socket errors to transport errors (`Timeout` carries a placeholder
/// duration that the channel replaces with its own).
pub(crate) fn io_err(e: std::io::Error) -> Error {
    match e.kind() {
        ErrorKind::BrokenPipe | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::UnexpectedEof => {
            Error::Disconnected
        }
        ErrorKind::WouldBlock | ErrorKind::TimedOut => Error::Timeout(Duration::ZERO),
        _ => Error::Io(e),
    }
}

/// Result of a non-blocking step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Progress {
    Done,
    Blocked,
}

/// Bytes still to send (up to three slices, e.g. header, message head and
/// payload).
pub(crate) struct Outgoing<'a> {
    parts: [&'a [u8]; 3],
    idx: usize,
    off: usize,
}

impl<'a> Outgoing<'a> {
    pub(crate) fn new(a: &'a [u8], b: &'a [u8]) -> Self {
        Self::new3(a, b, &[])
    }
    pub(crate) fn new3(a: &'a [u8], b: &'a [u8], c: &'a [u8]) -> Self {
        let mut o = Outgoing { parts: [a, b, c], idx: 0, off: 0 };
        o.skip_empty();
        o
    }
    fn skip_empty(&mut self) {
        while self.idx < 3 && self.off >= self.parts[self.idx].len() {
            self.idx += 1;
            self.off = 0;
        }
    }
    fn done(&self) -> bool {
        self.idx >= 3
    }
    fn advance(&mut self, mut n: usize) {
        while n > 0 && !self.done() {
            let k = n.min(self.parts[self.idx].len() - self.off);
            self.off += k;
            n -= k;
            self.skip_empty();
        }
    }
    /// The remaining parts as I/O slices, at most `max` bytes in total.
    fn slices(&self, max: usize) -> ([std::io::IoSlice<'a>; 3], usize) {
        let mut v = [std::io::IoSlice::new(&[]); 3];
        let (mut k, mut left) = (0, max);
        let mut off = self.off;
        for p in &self.parts[self.idx.min(3)..] {
            if left == 0 {
                break;
            }
            let r = &p[off..];
            off = 0;
            if r.is_empty() {
                continue;
            }
            let r = &r[..r.len().min(left)];
            left -= r.len();
            v[k] = std::io::IoSlice::new(r);
            k += 1;
        }
        (v, k)
    }
}

/// A growable byte queue with a hard cap.
struct ByteBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl ByteBuf {
    fn new() -> Self {
        ByteBuf { buf: Vec::new(), start: 0, end: 0 }
    }
    fn len(&self) -> usize {
        self.end - self.start
    }
    fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }
    fn consume(&mut self, n: usize) {
        self.start += n.min(self.len());
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            if self.buf.len() > KEEP_BUF {
                self.buf = Vec::new();
            }
        }
    }
    /// Free space for up to `want` more bytes (never beyond `cap` in total).
    fn room(&mut self, want: usize, cap: usize) -> Result<&mut [u8]> {
        let have = self.len();
        if have >= cap {
            return Err(Error::BufferLimit { cap });
        }
        let want = want.min(cap - have);
        if self.buf.len() - self.end < want && self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.start = 0;
            self.end = have;
        }
        if self.buf.len() - self.end < want {
            self.buf.resize(self.end + want, 0);
        }
        let end = self.end;
        Ok(&mut self.buf[end..end + want])
    }
    fn commit(&mut self, n: usize) {
        self.end += n;
    }
}

/// Counts what rustls writes to the socket.
struct CountedWrite<'a> {
    s: &'a TcpStream,
    n: &'a mut u64,
}

impl Write for CountedWrite<'_> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let k = self.s.write(b)?;
        *self.n += k as u64;
        Ok(k)
    }
    /// One `writev` for all queued records (rustls hands up to 64 at once):
    /// without it, `Write`'s default writes one record per system call, and
    /// every 16 KiB record became its own loopback packet and wake-up.
    fn write_vectored(&mut self, b: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        let k = self.s.write_vectored(b)?;
        *self.n += k as u64;
        Ok(k)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One connection's byte pump. See the module docs.
pub(crate) struct Link {
    sock: TcpStream,
    fd: RawFd,
    tls: Option<rustls::Connection>,
    /// Plaintext received ahead of the reader.
    inb: ByteBuf,
    /// TLS records read from the socket, not yet handed to rustls.
    raw: ByteBuf,
    cap: usize,
    /// Bytes that crossed the socket (all layers).
    pub(crate) sent: u64,
    pub(crate) recvd: u64,
    /// The peer closed its sending side (plaintext or TLS).
    eof: bool,
    /// TCP EOF seen under TLS (rustls is told once).
    tcp_eof: bool,
    peer: String,
}

impl Link {
    pub(crate) fn new(sock: TcpStream, mut tls: Option<rustls::Connection>, cap: usize, peer: String) -> Result<Self> {
        if let Some(c) = tls.as_mut() {
            c.set_buffer_limit(Some(tls_buffer_limit()));
        }
        sock.set_nonblocking(true)?;
        sock.set_nodelay(true)?;
        let fd = sock.as_raw_fd();
        Ok(Link {
            sock,
            fd,
            tls,
            inb: ByteBuf::new(),
            raw: ByteBuf::new(),
            cap,
            sent: 0,
            recvd: 0,
            eof: false,
            tcp_eof: false,
            peer,
        })
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.fd
    }
    pub(crate) fn sock(&self) -> &TcpStream {
        &self.sock
    }
    pub(crate) fn tls(&self) -> Option<&rustls::Connection> {
        self.tls.as_ref()
    }
    pub(crate) fn eof(&self) -> bool {
        self.eof
    }
    /// Plaintext bytes waiting in the inbound buffer.
    pub(crate) fn inbound(&self) -> &[u8] {
        self.inb.data()
    }
    pub(crate) fn consume(&mut self, n: usize) {
        self.inb.consume(n)
    }

    fn tls_error(&mut self, e: rustls::Error) -> Error {
        // rustls queued an alert for the peer: try to get it out so the peer
        // learns why, then report.
        let _ = self.flush_tls();
        Error::Tls { peer: self.peer.clone(), msg: describe_tls_error(&e) }
    }

    /// Writes pending TLS records without blocking.
    pub(crate) fn flush_tls(&mut self) -> Result<Progress> {
        let Some(conn) = self.tls.as_mut() else { return Ok(Progress::Done) };
        while conn.wants_write() {
            match conn.write_tls(&mut CountedWrite { s: &self.sock, n: &mut self.sent }) {
                Ok(0) => return Err(Error::Disconnected),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(Progress::Blocked),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err(e)),
            }
        }
        Ok(Progress::Done)
    }

    /// One non-blocking step of feeding TLS records to rustls: from the raw
    /// buffer, or else from the socket. `Done` = progress was made.
    fn tls_feed(&mut self) -> Result<Progress> {
        let Some(conn) = self.tls.as_mut() else { return Ok(Progress::Blocked) };
        if self.raw.len() == 0 {
            if self.tcp_eof {
                return Ok(Progress::Blocked);
            }
            let room = self.raw.room(READ_CHUNK, usize::MAX)?;
            match (&self.sock).read(room) {
                Ok(0) => {
                    self.tcp_eof = true;
                    // Let rustls see the EOF (it then reports clean or unclean closure).
                    let _ = conn.read_tls(&mut &[][..]);
                    return Ok(Progress::Done);
                }
                Ok(n) => {
                    self.raw.commit(n);
                    self.recvd += n as u64;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(Progress::Blocked),
                Err(e) if e.kind() == ErrorKind::Interrupted => return Ok(Progress::Done),
                Err(e) => return Err(io_err(e)),
            }
        }
        let mut src = self.raw.data();
        let before = src.len();
        if let Err(e) = conn.read_tls(&mut src) {
            // Either rustls' plaintext queue is full (the caller drains it
            // and comes back) or the records are unacceptable.
            return match conn.process_new_packets() {
                Ok(st) if st.plaintext_bytes_to_read() > 0 => Ok(Progress::Done),
                Ok(_) => Err(Error::Tls { peer: self.peer.clone(), msg: format!("reading TLS records: {e}") }),
                Err(te) => Err(self.tls_error(te)),
            };
        }
        let used = before - src.len();
        self.raw.consume(used);
        if let Err(e) = conn.process_new_packets() {
            return Err(self.tls_error(e));
        }
        Ok(Progress::Done)
    }

    /// Reads what the socket has now (non-blocking) into the inbound buffer.
    /// `Ok(true)`: progress (bytes, or EOF seen); `Ok(false)`: nothing now.
    pub(crate) fn fill(&mut self) -> Result<bool> {
        self.fill_n(TLS_CHUNK)
    }

    /// [`Link::fill`], taking at most `want` plaintext bytes out of rustls
    /// (a plaintext socket is still read in [`READ_CHUNK`]s: system calls
    /// cost more than the copy). Reading a frame header under TLS takes
    /// just the header, so that its body then goes from rustls straight
    /// into the caller's buffer ([`Link::read_exact`]) instead of through
    /// the inbound buffer and a second copy.
    fn fill_n(&mut self, want: usize) -> Result<bool> {
        if self.eof {
            return Ok(false);
        }
        if self.tls.is_none() {
            let room = self.inb.room(READ_CHUNK, self.cap)?;
            return match (&self.sock).read(room) {
                Ok(0) => {
                    self.eof = true;
                    Ok(true)
                }
                Ok(n) => {
                    self.inb.commit(n);
                    self.recvd += n as u64;
                    Ok(true)
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => Ok(true),
                Err(e) => Err(io_err(e)),
            };
        }
        loop {
            let conn = self.tls.as_mut().expect("tls");
            let room = self.inb.room(want.clamp(1, TLS_CHUNK), self.cap)?;
            match conn.reader().read(room) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(true);
                }
                Ok(n) => {
                    self.inb.commit(n);
                    return Ok(true);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => {
                    self.eof = true;
                    return Ok(true);
                }
                Err(e) => return Err(io_err(e)),
            }
            if self.tls_feed()? == Progress::Blocked {
                return Ok(false);
            }
        }
    }

    /// Pushes `out` to the socket without blocking.
    pub(crate) fn push(&mut self, out: &mut Outgoing<'_>) -> Result<Progress> {
        if self.tls.is_none() {
            loop {
                if out.done() {
                    return Ok(Progress::Done);
                }
                // Header and payload in one `writev`: no copy to join them,
                // one system call.
                let (v, k) = out.slices(usize::MAX);
                match (&self.sock).write_vectored(&v[..k]) {
                    Ok(0) => return Err(Error::Disconnected),
                    Ok(n) => {
                        out.advance(n);
                        self.sent += n as u64;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(Progress::Blocked),
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(io_err(e)),
                }
            }
        }
        loop {
            if self.flush_tls()? == Progress::Blocked {
                return Ok(Progress::Blocked);
            }
            if out.done() {
                return Ok(Progress::Done);
            }
            let conn = self.tls.as_mut().expect("tls");
            // The parts go to rustls as they are (it fragments across them):
            // the header and the payload are not joined first.
            let (v, k) = out.slices(TLS_CHUNK);
            let n = conn.writer().write_vectored(&v[..k]).map_err(io_err)?;
            out.advance(n);
        }
    }

    /// Direct mode, send side: waits until the socket is writable, reading
    /// whatever the peer sends meanwhile into the inbound buffer. `Ok(false)`
    /// on timeout.
    pub(crate) fn wait_send(&mut self, deadline: Instant) -> Result<bool> {
        // Records already read but not yet decrypted would never raise
        // POLLIN: process them (a bounded amount) before sleeping.
        if self.raw.len() > 0 {
            self.fill_some()?;
            if self.raw.len() > 0 {
                return Ok(true);
            }
        }
        let ev = if self.eof { POLLOUT } else { POLLOUT | POLLIN };
        let re = poll_fd(self.fd, ev, deadline)?;
        if re == 0 {
            return Ok(false);
        }
        if re & (POLLIN | libc::POLLHUP | libc::POLLERR) != 0 && !self.eof {
            self.fill_some()?;
        }
        Ok(true)
    }

    /// Like [`Link::fill`], but into `out` (the inbound buffer first, then
    /// straight from the socket or rustls), so a large frame body is read
    /// where it will live instead of through the inbound buffer and a copy.
    /// `Ok(Some(n))`: `n` bytes written (0 = EOF seen); `Ok(None)`: nothing
    /// now.
    pub(crate) fn fill_into(&mut self, out: &mut [u8]) -> Result<Option<usize>> {
        if out.is_empty() {
            return Ok(Some(0));
        }
        let k = self.inb.len().min(out.len());
        if k > 0 {
            out[..k].copy_from_slice(&self.inb.data()[..k]);
            self.inb.consume(k);
            return Ok(Some(k));
        }
        if self.eof {
            return Ok(Some(0));
        }
        if self.tls.is_none() {
            return match (&self.sock).read(out) {
                Ok(0) => {
                    self.eof = true;
                    Ok(Some(0))
                }
                Ok(n) => {
                    self.recvd += n as u64;
                    Ok(Some(n))
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(None),
                Err(e) if e.kind() == ErrorKind::Interrupted => Ok(None),
                Err(e) => Err(io_err(e)),
            };
        }
        loop {
            let conn = self.tls.as_mut().expect("tls");
            match conn.reader().read(out) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(Some(0));
                }
                Ok(n) => return Ok(Some(n)),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => {
                    self.eof = true;
                    return Ok(Some(0));
                }
                Err(e) => return Err(io_err(e)),
            }
            if self.tls_feed()? == Progress::Blocked {
                return Ok(None);
            }
        }
    }

    /// Reads what is available, but at most about [`FAIR_SHARE`] bytes, so
    /// that a blocked send gets back to writing as soon as it can.
    fn fill_some(&mut self) -> Result<()> {
        let start = self.recvd;
        while self.recvd - start < FAIR_SHARE as u64 && self.fill()? {}
        Ok(())
    }

    /// Waits until the socket is readable (and flushes pending TLS records
    /// when it is writable). `Ok(false)` on timeout.
    pub(crate) fn wait_recv(&mut self, deadline: Instant) -> Result<bool> {
        let wants_write = self.tls.as_ref().is_some_and(|c| c.wants_write());
        let ev = if wants_write { POLLIN | POLLOUT } else { POLLIN };
        let re = poll_fd(self.fd, ev, deadline)?;
        if re == 0 {
            return Ok(false);
        }
        if re & POLLOUT != 0 {
            self.flush_tls()?;
        }
        Ok(true)
    }

    /// Makes at least `n` plaintext bytes available in the inbound buffer
    /// (fewer only at EOF). `timeout` is the silence timeout per wait.
    pub(crate) fn fill_to(&mut self, n: usize, timeout: Duration) -> Result<()> {
        while self.inb.len() < n && !self.eof {
            let want = n - self.inb.len();
            if !self.fill_n(want)? && !self.wait_recv(Instant::now() + timeout)? {
                return Err(Error::Timeout(timeout));
            }
        }
        Ok(())
    }

    /// Reads exactly `out.len()` bytes: the inbound buffer first, then
    /// straight from the socket (or rustls). Returns fewer only at EOF.
    pub(crate) fn read_exact(&mut self, out: &mut [u8], timeout: Duration) -> Result<usize> {
        let k = self.inb.len().min(out.len());
        out[..k].copy_from_slice(&self.inb.data()[..k]);
        self.inb.consume(k);
        let mut off = k;
        while off < out.len() && !self.eof {
            let got = match self.tls.as_mut() {
                None => match (&self.sock).read(&mut out[off..]) {
                    Ok(0) => {
                        self.eof = true;
                        continue;
                    }
                    Ok(n) => {
                        self.recvd += n as u64;
                        n
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => 0,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(io_err(e)),
                },
                Some(conn) => match conn.reader().read(&mut out[off..]) {
                    Ok(0) => {
                        self.eof = true;
                        continue;
                    }
                    Ok(n) => n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        if self.tls_feed()? == Progress::Done {
                            continue;
                        }
                        0
                    }
                    Err(e) if e.kind() == ErrorKind::UnexpectedEof => {
                        self.eof = true;
                        continue;
                    }
                    Err(e) => return Err(io_err(e)),
                },
            };
            if got == 0 {
                if !self.wait_recv(Instant::now() + timeout)? {
                    return Err(Error::Timeout(timeout));
                }
            } else {
                off += got;
            }
        }
        Ok(off)
    }

    /// Drives the TLS handshake to completion (deadline-bounded).
    pub(crate) fn handshake(&mut self, deadline: Instant) -> Result<()> {
        loop {
            let Some(conn) = self.tls.as_ref() else { return Ok(()) };
            let hs = conn.is_handshaking();
            if !hs && !conn.wants_write() {
                return Ok(());
            }
            let blocked_out = self.flush_tls()? == Progress::Blocked;
            if hs {
                if self.tls_feed()? == Progress::Done {
                    if self.tcp_eof && self.raw.len() == 0 && self.tls.as_ref().is_some_and(|c| c.is_handshaking()) {
                        return Err(Error::Setup {
                            peer: self.peer.clone(),
                            msg: "the peer closed the connection during the TLS handshake".into(),
                        });
                    }
                    continue;
                }
            } else if !blocked_out {
                continue;
            }
            let ev = if blocked_out { POLLIN | POLLOUT } else { POLLIN };
            if poll_fd(self.fd, ev, deadline)? == 0 {
                return Err(Error::Setup {
                    peer: self.peer.clone(),
                    msg: format!(
                        "TLS handshake did not complete within {:?} (is the peer a hush party in TLS mode?)",
                        crate::tls::HANDSHAKE_TIMEOUT
                    ),
                });
            }
        }
    }

    /// Best effort: tell a TLS peer we are closing.
    pub(crate) fn close_notify(&mut self) {
        if let Some(c) = self.tls.as_mut() {
            c.send_close_notify();
            let _ = self.flush_tls();
        }
    }
}

/// A human explanation of a rustls error, in terms of what to check.
pub(crate) fn describe_tls_error(e: &rustls::Error) -> String {
    use rustls::AlertDescription as A;
    match e {
        rustls::Error::AlertReceived(A::BadCertificate | A::CertificateUnknown | A::UnknownCA | A::AccessDenied) => {
            "the peer rejected our certificate (check that its --pin lists our fingerprint)".into()
        }
        rustls::Error::AlertReceived(A::CertificateRequired) => {
            "the peer requires a client certificate and we presented none".into()
        }
        rustls::Error::AlertReceived(A::ProtocolVersion) => "the peer does not support TLS 1.3".into(),
        rustls::Error::AlertReceived(a) => format!("the peer aborted the TLS session (alert {a:?})"),
        rustls::Error::NoCertificatesPresented => "the peer presented no certificate".into(),
        rustls::Error::InvalidMessage(m) => format!("malformed TLS data from the peer ({m:?})"),
        other => other.to_string(),
    }
}
