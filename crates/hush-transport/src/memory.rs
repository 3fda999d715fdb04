//! A connected in-memory channel pair. Frames are encoded exactly as on TCP
//! and decoded by the receiver, so tests exercise the same checks.

use crate::frame::{decode_frame, encode_frame};
use crate::meter::{Cost, RoundClock};
use crate::profile::{wait_delivery, DelayBound, LinkShaper};
use crate::{Channel, ChannelOptions, Error, Result, HEADER_LEN};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Frames in flight per direction before `send` blocks (back-pressure).
const QUEUE: usize = 1024;

/// One endpoint of an in-memory pair; see [`MemChannel::pair`].
pub struct MemChannel {
    tx: Option<SyncSender<(Instant, Vec<u8>)>>,
    rx: Option<Receiver<(Instant, Vec<u8>)>>,
    opts: ChannelOptions,
    /// This side's emulated link (shared by the lanes of [`MemChannel::lanes_with`]).
    shaper: Arc<Mutex<LinkShaper>>,
    bound: Arc<Mutex<DelayBound>>,
    clock: RoundClock,
    cost: Cost,
}

impl MemChannel {
    /// A connected pair with default options.
    pub fn pair() -> (MemChannel, MemChannel) {
        Self::pair_with(ChannelOptions::default())
    }

    /// A connected pair; both ends use `opts`.
    pub fn pair_with(opts: ChannelOptions) -> (MemChannel, MemChannel) {
        Self::lanes_with(opts, 1).pop().expect("one lane")
    }

    /// `k` connected pairs ("lanes") over **one** emulated link: on each
    /// side all lanes queue their frames on the same virtual link (one
    /// bandwidth per direction, shared) and the receiver's delay bound counts
    /// the bytes of every lane. Independent sub-protocols run on separate
    /// lanes (e.g. on separate threads) so that one's transmission overlaps
    /// another's latency, as on one real connection multiplexing them; the
    /// emulation never gives them more bandwidth than one link. Each lane
    /// meters its own bytes and rounds.
    pub fn lanes_with(opts: ChannelOptions, k: usize) -> Vec<(MemChannel, MemChannel)> {
        let side = || (Arc::new(Mutex::new(LinkShaper::new(opts.profile.clone()))), Arc::new(Mutex::new(DelayBound::new(opts.profile.clone()))));
        let (a, b) = (side(), side());
        (0..k.max(1))
            .map(|_| {
                let (ta, ra) = sync_channel(QUEUE);
                let (tb, rb) = sync_channel(QUEUE);
                let mk = |tx, rx, s: &(Arc<Mutex<LinkShaper>>, Arc<Mutex<DelayBound>>)| MemChannel {
                    tx: Some(tx),
                    rx: Some(rx),
                    shaper: s.0.clone(),
                    bound: s.1.clone(),
                    opts: opts.clone(),
                    clock: RoundClock::default(),
                    cost: Cost::default(),
                };
                (mk(ta, rb, &a), mk(tb, ra, &b))
            })
            .collect()
    }

    /// Test hook: puts raw bytes on the wire as if they were a frame
    /// (to play a broken or cheating peer).
    pub fn send_raw(&mut self, bytes: Vec<u8>) -> Result<()> {
        let tx = self.tx.as_ref().ok_or(Error::Closed)?;
        tx.send((Instant::now(), bytes)).map_err(|_| Error::Disconnected)
    }

    fn close(&mut self) {
        self.tx = None;
        self.rx = None;
    }
}

impl Channel for MemChannel {
    fn send(&mut self, payload: &[u8]) -> Result<()> {
        if payload.len() > self.opts.max_frame {
            return Err(Error::Oversized { len: payload.len(), max: self.opts.max_frame });
        }
        let tx = self.tx.as_ref().ok_or(Error::Closed)?;
        let depth = self.clock.on_send();
        let delay = self.shaper.lock().map_err(|_| Error::Closed)?.delay_for(payload.len() + HEADER_LEN);
        let frame = encode_frame(payload, depth, delay);
        tx.send((Instant::now(), frame)).map_err(|_| Error::Disconnected)?;
        self.cost.bytes_sent += payload.len() as u64;
        self.cost.wire_bytes_sent += (payload.len() + HEADER_LEN) as u64;
        self.cost.socket_bytes_sent += (payload.len() + HEADER_LEN) as u64;
        self.cost.msgs_sent += 1;
        Ok(())
    }

    fn recv(&mut self) -> Result<Vec<u8>> {
        let rx = self.rx.as_ref().ok_or(Error::Closed)?;
        let (arrived, buf) = match rx.recv_timeout(self.opts.timeout) {
            Ok(x) => x,
            Err(RecvTimeoutError::Timeout) => return Err(Error::Timeout(self.opts.timeout)),
            Err(RecvTimeoutError::Disconnected) => {
                self.close();
                return Err(Error::Disconnected);
            }
        };
        let (hdr, _body) = match decode_frame(&buf, self.opts.max_frame) {
            Ok(x) => x,
            Err(e) => {
                // A broken frame ends the connection for both sides.
                self.close();
                return Err(e);
            }
        };
        if let Err(e) = self.clock.on_recv(hdr.depth) {
            self.close();
            return Err(e);
        }
        let delay = self.bound.lock().map_err(|_| Error::Closed)?.clamp(buf.len(), hdr.delay_ns, self.opts.timeout);
        wait_delivery(arrived, delay);
        self.cost.bytes_recv += hdr.len as u64;
        self.cost.wire_bytes_recv += buf.len() as u64;
        self.cost.socket_bytes_recv += buf.len() as u64;
        self.cost.msgs_recv += 1;
        let mut buf = buf;
        buf.drain(..HEADER_LEN);
        Ok(buf)
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
    }
}
