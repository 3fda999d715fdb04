//! TCP channel (plaintext or TLS 1.3, see [`crate::tls`]).
//!
//! Every connection runs over a [`Link`](crate::link): a non-blocking socket
//! driven by `poll(2)`, with rustls on top when the link is secured. Two
//! ways to drive it:
//! * **direct** (profile `none`): everything happens in the caller's thread.
//!   `recv` reads the frame itself (the silence timeout is the `poll`
//!   timeout) and `recv_exact_into` reads the body straight into the caller's
//!   buffer once the inbound buffer is empty. `send` pushes bytes until the
//!   socket is full and then waits for writability *or* readability,
//!   reading the peer's bytes into the bounded inbound buffer meanwhile —
//!   so two parties that send large messages at the same time never
//!   deadlock, and no extra thread or copy is paid on the one-way bulk path;
//! * **emulated** (any other profile): an I/O thread reads and decodes
//!   frames as soon as they arrive and stamps their arrival time, so the
//!   emulated latency and bandwidth are measured from the real arrival time
//!   even while the application is computing (stamping on decode in `recv`
//!   would overcharge every message that arrived during a computation). The
//!   thread and the caller share the link behind a mutex held only for
//!   non-blocking steps; under TLS the same rustls state machine serves both.
//!   The read-ahead queue is bounded by the same limit; while the caller is
//!   blocked sending and the queue is full, the channel fails with
//!   [`Error::BufferLimit`] instead of deadlocking.
//!
//! Either way frames are validated before use and any framing error closes
//! the connection, so the peer's next operation fails too.
//!
//! The peer-announced emulated delay of each frame is bounded by what this
//! endpoint's own profile could produce (see `DelayBound` in `profile.rs`):
//! `latency + transmission time of all wire bytes received so far`, and by
//! the receive timeout.

use crate::frame::{decode_header, verify_with, write_header_parts, FrameHeader};
use crate::link::{io_err, poll_fd, Link, Outgoing, Progress, POLLOUT};
use crate::meter::{Cost, RoundClock};
use crate::profile::{wait_delivery, DelayBound, LinkShaper};
use crate::tls::{self, Fingerprint, LinkSecurity, Role};
use crate::{Channel, ChannelOptions, Error, Result, HEADER_LEN};
use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::RawFd;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How often blocked waits of the emulated path re-check shared state.
const TICK: Duration = Duration::from_millis(50);

type Frame = (Instant, FrameHeader, Vec<u8>);

/// Frames read ahead by the I/O thread (emulated mode).
#[derive(Default)]
struct Inbox {
    frames: VecDeque<Frame>,
    /// Payload bytes queued.
    bytes: usize,
    /// Why the I/O thread stopped (reported once).
    end: Option<Error>,
    finished: bool,
    /// The caller is blocked in `send` waiting for the socket.
    send_blocked: bool,
    /// The I/O thread gave up because the queue was full while the caller
    /// was blocked sending.
    overflow: bool,
    stop: bool,
}

struct Shared {
    link: Mutex<Link>,
    inbox: Mutex<Inbox>,
    cv: Condvar,
    fd: RawFd,
    cap: usize,
    /// The frame cap the I/O thread applies ([`TcpChannel::set_max_frame`]).
    max_frame: std::sync::atomic::AtomicUsize,
}

enum Io {
    Direct(Box<Link>),
    Emulated(Arc<Shared>),
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A framed, metered TCP connection to one peer, plaintext or TLS 1.3.
pub struct TcpChannel {
    io: Io,
    /// A handle on the same socket, for shutdown from any state.
    ctl: TcpStream,
    opts: ChannelOptions,
    shaper: LinkShaper,
    bound: DelayBound,
    clock: RoundClock,
    cost: Cost,
    closed: bool,
    peer: String,
    peer_fp: Option<Fingerprint>,
    /// The peer's end-entity certificate (DER) under TLS.
    peer_cert: Option<Vec<u8>>,
    /// Frames carry a CRC (plaintext links; under TLS the AEAD covers them).
    checksum: bool,
}

impl TcpChannel {
    /// Wraps a connected stream **as is: plaintext, no greeting, no
    /// authentication** (both ends must use `from_stream`, e.g. after an
    /// application-level hello). Prefer [`TcpChannel::connect_with`] /
    /// [`TcpChannel::from_accepted`].
    pub fn from_stream(stream: TcpStream, opts: ChannelOptions) -> Result<Self> {
        let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
        let link = Link::new(stream, None, opts.buffer_cap(), peer.clone())?;
        Self::from_link(link, opts, peer, None)
    }

    pub(crate) fn from_link(link: Link, opts: ChannelOptions, peer: String, peer_fp: Option<Fingerprint>) -> Result<Self> {
        let ctl = link.sock().try_clone()?;
        let checksum = link.tls().is_none();
        let io = if opts.profile.is_none() {
            Io::Direct(Box::new(link))
        } else {
            let sh = Arc::new(Shared {
                fd: link.fd(),
                link: Mutex::new(link),
                inbox: Mutex::new(Inbox::default()),
                cv: Condvar::new(),
                cap: opts.buffer_cap(),
                max_frame: std::sync::atomic::AtomicUsize::new(opts.max_frame),
            });
            let sh2 = sh.clone();
            let cap = opts.buffer_cap();
            let init = IO_THREAD_INIT.get().map(|(get, set)| (get(), *set));
            std::thread::Builder::new().name("hush-tcp-io".into()).spawn(move || {
                if let Some((ctx, set)) = init {
                    set(ctx);
                }
                io_loop(sh2, cap, checksum)
            })?;
            Io::Emulated(sh)
        };
        Ok(Self {
            io,
            ctl,
            shaper: LinkShaper::new(opts.profile.clone()),
            bound: DelayBound::new(opts.profile.clone()),
            opts,
            clock: RoundClock::default(),
            cost: Cost::default(),
            closed: false,
            peer,
            peer_fp,
            peer_cert: None,
            checksum,
        })
    }

    /// Connects to `addr` **in plaintext** (no authentication, no
    /// encryption): the same as [`TcpChannel::connect_with`] with
    /// [`LinkSecurity::Insecure`]. Retries while nothing listens there, for
    /// up to `opts.connect_timeout`.
    pub fn connect(addr: impl ToSocketAddrs + Clone, opts: ChannelOptions) -> Result<Self> {
        let addrs: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
        let name = addrs.first().map(|a| a.to_string()).unwrap_or_else(|| "(no address)".into());
        let s = connect_addrs(&addrs, &name, &opts)?;
        tls::establish(s, opts, &LinkSecurity::Insecure, Role::Client, name)
    }

    /// Connects to `addr` with the given link security: TCP connect (retried
    /// while refused, for up to `opts.connect_timeout`), then the mode
    /// greeting and, under TLS, the handshake (bounded by
    /// [`crate::HANDSHAKE_TIMEOUT`]). The client side of TLS.
    pub fn connect_with(
        addr: impl ToSocketAddrs + Clone + std::fmt::Display,
        opts: ChannelOptions,
        sec: &LinkSecurity,
    ) -> Result<TcpChannel> {
        let name = addr.to_string();
        let addrs: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .map_err(|e| Error::Setup { peer: name.clone(), msg: resolve_error(&name, &e) })?
            .collect();
        let s = connect_addrs(&addrs, &name, &opts)?;
        tls::establish(s, opts, sec, Role::Client, name)
    }

    /// Client side on a stream this side connected itself (for protocols
    /// that write their own preamble before the link's set-up, as the 3PC
    /// service's hello): the mode greeting and, under TLS, the handshake
    /// with `sec`'s pins (deadline [`crate::HANDSHAKE_TIMEOUT`]). `peer`
    /// names the peer in errors.
    pub fn from_connected(stream: TcpStream, opts: ChannelOptions, sec: &LinkSecurity, peer: &str) -> Result<TcpChannel> {
        tls::establish(stream, opts, sec, Role::Client, peer.to_string())
    }

    /// Accepts one connection on `listener` **in plaintext** (the same as
    /// [`TcpChannel::accept_with`] with [`LinkSecurity::Insecure`]). Note
    /// that the greeting is read in the calling thread (≤ 5 s for a silent
    /// client); servers should accept and call [`TcpChannel::from_accepted`]
    /// in a per-connection thread.
    pub fn accept(listener: &TcpListener, opts: ChannelOptions) -> Result<Self> {
        Self::accept_with(listener, opts, &LinkSecurity::Insecure)
    }

    /// Server side on an already accepted stream: the mode greeting and, under
    /// TLS, the handshake (deadline [`crate::HANDSHAKE_TIMEOUT`]). Call it from
    /// a per-connection thread so a server's accept loop never blocks on a
    /// client.
    pub fn from_accepted(stream: TcpStream, opts: ChannelOptions, sec: &LinkSecurity) -> Result<TcpChannel> {
        let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
        tls::establish(stream, opts, sec, Role::Server, peer)
    }

    /// `listener.accept()` + [`TcpChannel::from_accepted`].
    pub fn accept_with(listener: &TcpListener, opts: ChannelOptions, sec: &LinkSecurity) -> Result<TcpChannel> {
        let (s, _) = listener.accept()?;
        Self::from_accepted(s, opts, sec)
    }

    /// The peer's certificate fingerprint (TLS links; `None` in plaintext).
    pub fn peer_fingerprint(&self) -> Option<Fingerprint> {
        self.peer_fp
    }

    /// The peer's end-entity certificate (DER) as presented in the TLS
    /// handshake (`None` in plaintext): what an attestation binds.
    pub fn peer_certificate(&self) -> Option<&[u8]> {
        self.peer_cert.as_deref()
    }

    pub(crate) fn set_peer_certificate(&mut self, der: Option<Vec<u8>>) {
        self.peer_cert = der;
    }

    /// Changes the largest frame this side accepts from now on (checked
    /// before a body is allocated). A protocol that expects a small first
    /// message (a dealer's attestation evidence) connects with a small cap
    /// and raises it once that message is in, before it asks for more.
    pub fn set_max_frame(&mut self, max: usize) {
        self.opts.max_frame = max;
        if let Io::Emulated(sh) = &self.io {
            sh.max_frame.store(max, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// The peer's address as used in error messages.
    pub fn peer_addr_string(&self) -> String {
        self.peer.clone()
    }

    /// Whether this link runs TLS.
    pub fn is_tls(&self) -> bool {
        match &self.io {
            Io::Direct(l) => l.tls().is_some(),
            Io::Emulated(sh) => lock(&sh.link).tls().is_some(),
        }
    }

    /// Test hook: writes raw bytes to the link (inside TLS when secured), to
    /// play a broken peer.
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<()> {
        let mut out = Outgoing::new(bytes, &[]);
        let t = self.opts.timeout;
        write_out(&mut self.io, &mut out, t)
    }

    /// Closes the connection; the peer sees a disconnect.
    pub fn shutdown(&mut self) {
        match &mut self.io {
            Io::Direct(l) => l.close_notify(),
            Io::Emulated(sh) => {
                lock(&sh.inbox).stop = true;
                sh.cv.notify_all();
                lock(&sh.link).close_notify();
            }
        }
        let _ = self.ctl.shutdown(Shutdown::Both);
        self.closed = true;
    }

    fn fail<T>(&mut self, e: Error) -> Result<T> {
        self.shutdown();
        Err(match e {
            Error::Timeout(_) => Error::Timeout(self.opts.timeout),
            e => e,
        })
    }

    /// Direct mode: reads and decodes one header.
    fn read_header(link: &mut Link, opts: &ChannelOptions) -> Result<(FrameHeader, [u8; HEADER_LEN])> {
        link.fill_to(HEADER_LEN, opts.timeout)?;
        let d = link.inbound();
        if d.len() < HEADER_LEN {
            return Err(if d.is_empty() {
                Error::Disconnected
            } else {
                Error::Truncated { expected: HEADER_LEN, got: d.len() }
            });
        }
        let mut h = [0u8; HEADER_LEN];
        h.copy_from_slice(&d[..HEADER_LEN]);
        let hdr = decode_header(&h, opts.max_frame)?;
        link.consume(HEADER_LEN);
        Ok((hdr, h))
    }

    /// Direct mode: reads and verifies the body of `hdr` into `out`.
    fn read_body(link: &mut Link, opts: &ChannelOptions, hdr: &FrameHeader, h: &[u8], out: &mut [u8]) -> Result<()> {
        let n = link.read_exact(out, opts.timeout)?;
        if n < hdr.len {
            return Err(Error::Truncated { expected: hdr.len, got: n });
        }
        verify_with(h, out, hdr, link.tls().is_none())
    }

    /// Emulated mode: the next frame from the I/O thread, delivered at its
    /// emulated arrival time.
    fn next_frame(&mut self) -> Result<(FrameHeader, Vec<u8>)> {
        let Io::Emulated(sh) = &self.io else { unreachable!("emulated mode only") };
        let deadline = Instant::now() + self.opts.timeout;
        let frame = {
            let mut st = lock(&sh.inbox);
            loop {
                if let Some(f) = st.frames.pop_front() {
                    st.bytes -= f.2.len();
                    sh.cv.notify_all();
                    break Ok(f);
                }
                if let Some(e) = st.end.take() {
                    break Err(e);
                }
                if st.finished {
                    break Err(Error::Disconnected);
                }
                let now = Instant::now();
                if now >= deadline {
                    break Err(Error::Timeout(self.opts.timeout));
                }
                st = sh.cv.wait_timeout(st, deadline - now).unwrap_or_else(|p| p.into_inner()).0;
            }
        };
        let (arrived, hdr, body) = frame?;
        let delay = self.bound.clamp(hdr.len + HEADER_LEN, hdr.delay_ns, self.opts.timeout);
        wait_delivery(arrived, delay);
        Ok((hdr, body))
    }

    fn account_recv(&mut self, hdr: &FrameHeader) -> Result<()> {
        self.clock.on_recv(hdr.depth)?;
        self.cost.bytes_recv += hdr.len as u64;
        self.cost.wire_bytes_recv += (hdr.len + HEADER_LEN) as u64;
        self.cost.msgs_recv += 1;
        Ok(())
    }
}

/// A plain TCP stream to `addr` (resolved once), retried while refused
/// for up to `opts.connect_timeout`, with one notice through the hook of
/// [`crate::set_connect_notice`] when the first attempt is refused; then
/// [`Error::ConnectRefused`]. For protocols that write their own preamble
/// before the link's set-up ([`TcpChannel::from_connected`]).
pub fn connect_retrying(addr: &str, opts: &ChannelOptions) -> Result<TcpStream> {
    let addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| Error::Setup { peer: addr.into(), msg: resolve_error(addr, &e) })?
        .collect();
    connect_addrs(&addrs, addr, opts)
}

/// Why `addr` could not be resolved; an address without a port gets
/// "expected HOST:PORT" (the usual slip: `127.0.0.1` for `127.0.0.1:7000`).
fn resolve_error(addr: &str, e: &std::io::Error) -> String {
    let has_port = addr.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && !h.ends_with(':') && p.parse::<u16>().is_ok());
    if has_port {
        format!("cannot resolve address: {e}")
    } else {
        format!("cannot resolve address: expected HOST:PORT (e.g. 127.0.0.1:7000), got '{addr}'")
    }
}

/// TCP connect with retries while refused, up to `opts.connect_timeout`.
fn connect_addrs(addrs: &[SocketAddr], name: &str, opts: &ChannelOptions) -> Result<TcpStream> {
    if addrs.is_empty() {
        return Err(Error::Setup { peer: name.into(), msg: "the address resolved to nothing".into() });
    }
    let deadline = Instant::now() + opts.connect_timeout;
    let mut noticed = false;
    loop {
        let mut last = None;
        for a in addrs {
            let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(10));
            match TcpStream::connect_timeout(a, left) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        let e = last.expect("at least one address");
        let retry = matches!(e.kind(), ErrorKind::ConnectionRefused | ErrorKind::ConnectionReset | ErrorKind::TimedOut);
        if !retry {
            return Err(Error::Io(e));
        }
        if Instant::now() >= deadline {
            return Err(match e.kind() {
                ErrorKind::TimedOut => Error::Setup {
                    peer: name.into(),
                    msg: format!("could not connect within {:?}: connection timed out", opts.connect_timeout),
                },
                _ => Error::ConnectRefused { addr: name.into() },
            });
        }
        if !noticed {
            noticed = true;
            crate::notice::connect_notice(&crate::notice::waiting_line(name, opts.connect_timeout));
        }
        std::thread::sleep(Duration::from_millis(20).min(deadline.saturating_duration_since(Instant::now())));
    }
}

/// Pushes `out` completely (direct: reading meanwhile; emulated: the I/O
/// thread reads). `timeout` bounds each wait without progress.
fn write_out(io: &mut Io, out: &mut Outgoing<'_>, timeout: Duration) -> Result<()> {
    match io {
        Io::Direct(link) => loop {
            match link.push(out)? {
                Progress::Done => return Ok(()),
                Progress::Blocked => {
                    if !link.wait_send(Instant::now() + timeout)? {
                        return Err(Error::Timeout(timeout));
                    }
                }
            }
        },
        Io::Emulated(sh) => {
            let r = write_emulated(sh, out, timeout);
            let mut st = lock(&sh.inbox);
            st.send_blocked = false;
            match r {
                Err(_) if st.overflow => Err(Error::BufferLimit { cap: sh.cap }),
                r => r,
            }
        }
    }
}

fn write_emulated(sh: &Shared, out: &mut Outgoing<'_>, timeout: Duration) -> Result<()> {
    let mut deadline = Instant::now() + timeout;
    loop {
        if lock(&sh.link).push(out)? == Progress::Done {
            return Ok(());
        }
        {
            let mut st = lock(&sh.inbox);
            if st.overflow {
                return Err(Error::BufferLimit { cap: sh.cap });
            }
            if !st.send_blocked {
                st.send_blocked = true;
                sh.cv.notify_all();
            }
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(Error::Timeout(timeout));
        }
        let re = poll_fd(sh.fd, POLLOUT, deadline.min(now + TICK))?;
        if re != 0 {
            deadline = Instant::now() + timeout;
        }
    }
}

/// The I/O thread of an emulated channel: reads, decodes and stamps frames.
fn io_loop(sh: Arc<Shared>, cap: usize, checksum: bool) {
    let mut pending: Option<Pending> = None;
    let finish = |e: Error, sh: &Shared| {
        let mut st = lock(&sh.inbox);
        if st.end.is_none() && !st.finished {
            st.end = Some(e);
        }
        st.finished = true;
        sh.cv.notify_all();
    };
    loop {
        // Back-pressure: wait while the queue is full, unless the caller is
        // stuck sending (then waiting could deadlock both parties).
        {
            let mut st = lock(&sh.inbox);
            loop {
                if st.stop {
                    st.finished = true;
                    sh.cv.notify_all();
                    return;
                }
                if st.bytes < cap {
                    break;
                }
                if st.send_blocked {
                    st.overflow = true;
                    st.end = Some(Error::BufferLimit { cap });
                    st.finished = true;
                    sh.cv.notify_all();
                    drop(st);
                    let _ = lock(&sh.link).sock().shutdown(Shutdown::Both);
                    return;
                }
                st = sh.cv.wait_timeout(st, TICK).unwrap_or_else(|p| p.into_inner()).0;
            }
        }
        // Read and decode what is there.
        let r: Result<Step> = (|| {
            let mut link = lock(&sh.link);
            // Hold the lock for a bounded amount of reading, so a blocked
            // `send` gets its turn.
            let start = link.recvd;
            loop {
                // A large body in progress is read straight into its own
                // buffer; anything else through the inbound buffer.
                let progressed = match pending.as_mut().filter(|p| p.direct && p.got < p.hdr.len) {
                    Some(p) => match link.fill_into(&mut p.body[p.got..])? {
                        Some(n) => {
                            p.got += n;
                            true
                        }
                        None => false,
                    },
                    None => link.fill()?,
                };
                let mut full = false;
                while let Some(f) = next_decoded(&mut link, &mut pending, sh.max_frame.load(std::sync::atomic::Ordering::SeqCst), checksum)? {
                    let mut st = lock(&sh.inbox);
                    st.bytes += f.2.len();
                    st.frames.push_back(f);
                    full = st.bytes >= cap;
                    sh.cv.notify_all();
                    if full {
                        break;
                    }
                }
                if full {
                    let _ = link.flush_tls();
                    return Ok(Step::More);
                }
                if link.eof() {
                    return Ok(Step::Eof);
                }
                if !progressed {
                    let _ = link.flush_tls();
                    return Ok(Step::Idle);
                }
                if link.recvd - start >= 1 << 20 {
                    return Ok(Step::More);
                }
            }
        })();
        match r {
            Ok(Step::Eof) => {
                let got = lock(&sh.link).inbound().len();
                let e = match &pending {
                    Some(p) => Error::Truncated { expected: p.hdr.len, got: if p.direct { p.got } else { got } },
                    None if got > 0 => Error::Truncated { expected: HEADER_LEN, got },
                    None => Error::Disconnected,
                };
                finish(e, &sh);
                return;
            }
            Ok(Step::More) => {
                std::thread::yield_now();
                continue;
            }
            Ok(Step::Idle) => {}
            Err(e) => {
                // Broken framing: close so the peer learns of it.
                let _ = lock(&sh.link).sock().shutdown(Shutdown::Both);
                finish(e, &sh);
                return;
            }
        }
        if let Err(e) = poll_fd(sh.fd, crate::link::POLLIN, Instant::now() + TICK) {
            finish(e, &sh);
            return;
        }
    }
}

enum Step {
    Eof,
    Idle,
    More,
}

/// Bodies of at least this many bytes are read into a buffer of their own
/// as they arrive ([`Link::fill_into`]), not through the inbound buffer and
/// a copy: no second pass over a dealer's multi-megabyte responses.
const DIRECT_BODY: usize = 64 << 10;

/// A frame whose header has arrived.
struct Pending {
    arrived: Instant,
    hdr: FrameHeader,
    h: [u8; HEADER_LEN],
    /// The body is read into `body` directly (`got` bytes so far).
    direct: bool,
    body: Vec<u8>,
    got: usize,
}

/// Decodes the next complete frame from the link's inbound buffer (or a
/// large body read directly), if any.
fn next_decoded(link: &mut Link, pending: &mut Option<Pending>, max_frame: usize, checksum: bool) -> Result<Option<Frame>> {
    if pending.is_none() {
        let d = link.inbound();
        if d.len() < HEADER_LEN {
            return Ok(None);
        }
        let mut h = [0u8; HEADER_LEN];
        h.copy_from_slice(&d[..HEADER_LEN]);
        // The announced length is checked against `max_frame` here, before
        // the body's buffer is allocated (zeroed pages from the allocator:
        // the memory is touched only as bytes arrive).
        let hdr = decode_header(&h, max_frame)?;
        link.consume(HEADER_LEN);
        let direct = hdr.len >= DIRECT_BODY;
        let body = if direct { vec![0u8; hdr.len] } else { Vec::new() };
        *pending = Some(Pending { arrived: Instant::now(), hdr, h, direct, body, got: 0 });
    }
    let p = pending.as_mut().expect("set above");
    let body = if p.direct {
        if p.got < p.hdr.len {
            // Bytes already buffered behind the header go in first.
            let k = link.inbound().len().min(p.hdr.len - p.got);
            if k == 0 {
                return Ok(None);
            }
            p.body[p.got..p.got + k].copy_from_slice(&link.inbound()[..k]);
            link.consume(k);
            p.got += k;
            if p.got < p.hdr.len {
                return Ok(None);
            }
        }
        std::mem::take(&mut p.body)
    } else {
        let d = link.inbound();
        if d.len() < p.hdr.len {
            return Ok(None);
        }
        let body = d[..p.hdr.len].to_vec();
        link.consume(p.hdr.len);
        body
    };
    let p = pending.take().expect("set above");
    verify_with(&p.h, &body, &p.hdr, checksum)?;
    Ok(Some((p.arrived, p.hdr, body)))
}

impl Channel for TcpChannel {
    fn send(&mut self, payload: &[u8]) -> Result<()> {
        self.send2(payload, &[])
    }

    fn send2(&mut self, head: &[u8], body: &[u8]) -> Result<()> {
        if self.closed {
            return Err(Error::Closed);
        }
        let len = head.len() + body.len();
        if len > self.opts.max_frame {
            return Err(Error::Oversized { len, max: self.opts.max_frame });
        }
        let depth = self.clock.on_send();
        let delay = self.shaper.delay_for(len + HEADER_LEN);
        let mut h = [0u8; HEADER_LEN];
        write_header_parts(&mut h, &[head, body], depth, delay, self.checksum);
        let t = self.opts.timeout;
        // Header, head and body leave in one `writev` (plaintext) or are
        // handed to rustls as they are (TLS): no joined copy.
        let r = write_out(&mut self.io, &mut Outgoing::new3(&h, head, body), t);
        if let Err(e) = r {
            return self.fail(e);
        }
        self.cost.bytes_sent += len as u64;
        self.cost.wire_bytes_sent += (len + HEADER_LEN) as u64;
        self.cost.msgs_sent += 1;
        Ok(())
    }

    fn recv(&mut self) -> Result<Vec<u8>> {
        if self.closed {
            return Err(Error::Closed);
        }
        let r = match &mut self.io {
            Io::Direct(link) => Self::read_header(link, &self.opts).and_then(|(hdr, h)| {
                let mut body = vec![0u8; hdr.len];
                Self::read_body(link, &self.opts, &hdr, &h, &mut body).map(|_| (hdr, body))
            }),
            Io::Emulated(_) => self.next_frame(),
        };
        match r.and_then(|(hdr, body)| self.account_recv(&hdr).map(|_| body)) {
            Ok(body) => Ok(body),
            Err(e) => self.fail(e),
        }
    }

    fn recv_exact_into(&mut self, what: &'static str, out: &mut [u8]) -> Result<()> {
        if self.closed {
            return Err(Error::Closed);
        }
        let r = match &mut self.io {
            Io::Emulated(_) => self.next_frame().and_then(|(hdr, m)| {
                if m.len() != out.len() {
                    return Err(Error::WrongLength { what, expected: out.len(), got: m.len() });
                }
                out.copy_from_slice(&m);
                Ok(hdr)
            }),
            Io::Direct(link) => Self::read_header(link, &self.opts).and_then(|(hdr, h)| {
                if hdr.len != out.len() {
                    return Err(Error::WrongLength { what, expected: out.len(), got: hdr.len });
                }
                Self::read_body(link, &self.opts, &hdr, &h, out).map(|_| hdr)
            }),
        };
        match r.and_then(|hdr| self.account_recv(&hdr)) {
            Ok(()) => Ok(()),
            Err(e) => self.fail(e),
        }
    }

    fn cost(&self) -> Cost {
        let mut c = self.cost;
        c.rounds = self.clock.rounds();
        let (s, r) = match &self.io {
            Io::Direct(l) => (l.sent, l.recvd),
            Io::Emulated(sh) => {
                let l = lock(&sh.link);
                (l.sent, l.recvd)
            }
        };
        c.socket_bytes_sent = s;
        c.socket_bytes_recv = r;
        c
    }

    fn max_frame(&self) -> usize {
        self.opts.max_frame
    }

    fn set_timeout(&mut self, timeout: Duration) {
        self.opts.timeout = timeout;
    }
}

impl Drop for TcpChannel {
    fn drop(&mut self) {
        // Also ends the I/O thread (its poll wakes once the socket is shut).
        if !self.closed {
            self.shutdown();
        }
    }
}

/// Two **plaintext** TCP channels connected over 127.0.0.1 (for benchmarks
/// and tests); `a` is the accepting side.
pub fn tcp_pair_loopback(opts: ChannelOptions) -> Result<(TcpChannel, TcpChannel)> {
    tcp_pair_loopback_with(opts, &LinkSecurity::Insecure, &LinkSecurity::Insecure)
}

/// Per-thread context handed from the thread that creates a channel to its
/// I/O thread (emulated mode): `(get, set)`, e.g. a heap meter's party
/// tag, so that what the I/O thread allocates (frames read ahead) is
/// charged to the party that owns the channel.
static IO_THREAD_INIT: std::sync::OnceLock<(fn() -> usize, fn(usize))> = std::sync::OnceLock::new();

/// Installs the I/O-thread context hook (first call wins).
pub fn set_io_thread_init(get: fn() -> usize, set: fn(usize)) {
    let _ = IO_THREAD_INIT.set((get, set));
}

/// The context hook of [`set_io_thread_init`] read on the calling thread:
/// `(context, set)` for another helper thread that works for the same
/// party (e.g. a look-ahead dealing worker) to take with `set(context)`.
pub fn helper_thread_context() -> Option<(usize, fn(usize))> {
    IO_THREAD_INIT.get().map(|(get, set)| (get(), *set))
}

/// Two TCP channels connected over 127.0.0.1: `a` accepts with `sec_a` (the
/// TLS server), `b` connects with `sec_b` (the TLS client).
pub fn tcp_pair_loopback_with(
    opts: ChannelOptions,
    sec_a: &LinkSecurity,
    sec_b: &LinkSecurity,
) -> Result<(TcpChannel, TcpChannel)> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    let addr = l.local_addr()?;
    let o2 = opts.clone();
    let sb = sec_b.clone();
    let t = std::thread::spawn(move || TcpChannel::connect_with(addr, o2, &sb));
    let a = TcpChannel::accept_with(&l, opts, sec_a);
    let b = t.join().map_err(|_| Error::Disconnected)?;
    Ok((a?, b?))
}

#[allow(dead_code)]
fn _assert_send() {
    fn is_send<T: Send>() {}
    is_send::<TcpChannel>();
    let _ = io_err;
}
