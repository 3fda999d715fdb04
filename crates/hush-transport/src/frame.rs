//! Frame encoding. See the crate docs for the layout.

use crate::{Error, Result};

/// Header length in bytes.
pub const HEADER_LEN: usize = 20;
/// Default maximum payload per frame: 16 MiB.
pub const DEFAULT_MAX_FRAME: usize = 16 << 20;

/// A decoded, not yet checksum-verified frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    pub len: usize,
    pub depth: u32,
    pub delay_ns: u64,
    pub crc: u32,
}

fn crc_of(head16: &[u8], payload: &[u8]) -> u32 {
    crc_of_parts(head16, &[payload])
}

fn crc_of_parts(head16: &[u8], parts: &[&[u8]]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(head16);
    for p in parts {
        h.update(p);
    }
    h.finalize()
}

/// Writes the header for `payload` into `out[..HEADER_LEN]`.
pub fn write_header(out: &mut [u8], payload: &[u8], depth: u32, delay_ns: u64) {
    write_header_with(out, payload, depth, delay_ns, true)
}

/// [`write_header`]; without `checksum` the CRC field is 0. A link under
/// TLS sends no checksum: its AEAD already authenticates every byte of
/// every record (a flipped bit fails the record's tag, never reaches the
/// framing), so the CRC would only repeat that check at ≈ 2–3 % of a
/// dealer link's CPU.
pub fn write_header_with(out: &mut [u8], payload: &[u8], depth: u32, delay_ns: u64, checksum: bool) {
    write_header_parts(out, &[payload], depth, delay_ns, checksum)
}

/// [`write_header_with`] for a payload given as consecutive `parts`.
pub(crate) fn write_header_parts(out: &mut [u8], parts: &[&[u8]], depth: u32, delay_ns: u64, checksum: bool) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    out[0..4].copy_from_slice(&(len as u32).to_le_bytes());
    out[4..8].copy_from_slice(&depth.to_le_bytes());
    out[8..16].copy_from_slice(&delay_ns.to_le_bytes());
    let crc = if checksum { crc_of_parts(&out[0..16], parts) } else { 0 };
    out[16..20].copy_from_slice(&crc.to_le_bytes());
}

/// Encodes a whole frame (header + payload) into a new buffer.
pub fn encode_frame(payload: &[u8], depth: u32, delay_ns: u64) -> Vec<u8> {
    let mut v = vec![0u8; HEADER_LEN + payload.len()];
    let (h, p) = v.split_at_mut(HEADER_LEN);
    p.copy_from_slice(payload);
    write_header(h, payload, depth, delay_ns);
    v
}

/// Decodes a header and checks the announced length against `max_frame`
/// before anything is allocated.
pub fn decode_header(h: &[u8], max_frame: usize) -> Result<FrameHeader> {
    if h.len() < HEADER_LEN {
        return Err(Error::Truncated { expected: HEADER_LEN, got: h.len() });
    }
    let len = u32::from_le_bytes(h[0..4].try_into().unwrap()) as usize;
    if len > max_frame {
        return Err(Error::Oversized { len, max: max_frame });
    }
    Ok(FrameHeader {
        len,
        depth: u32::from_le_bytes(h[4..8].try_into().unwrap()),
        delay_ns: u64::from_le_bytes(h[8..16].try_into().unwrap()),
        crc: u32::from_le_bytes(h[16..20].try_into().unwrap()),
    })
}

/// Verifies the checksum of a received frame.
pub fn verify(h: &[u8], payload: &[u8], hdr: &FrameHeader) -> Result<()> {
    verify_with(h, payload, hdr, true)
}

/// [`verify`] on a link with checksums (`checksum`), else (TLS, see
/// [`write_header_with`]) the CRC field must be 0 — a peer that sends one
/// anyway is speaking another framing, and is refused as garbled.
pub fn verify_with(h: &[u8], payload: &[u8], hdr: &FrameHeader, checksum: bool) -> Result<()> {
    let want = if checksum { crc_of(&h[0..16], payload) } else { 0 };
    if want != hdr.crc {
        return Err(Error::Garbled);
    }
    Ok(())
}

/// Decodes a complete frame held in one buffer (the in-memory transport).
pub fn decode_frame(buf: &[u8], max_frame: usize) -> Result<(FrameHeader, &[u8])> {
    let hdr = decode_header(buf, max_frame)?;
    let body = &buf[HEADER_LEN..];
    if body.len() < hdr.len {
        return Err(Error::Truncated { expected: hdr.len, got: body.len() });
    }
    if body.len() > hdr.len {
        // Trailing bytes inside one frame: the framing is corrupt.
        return Err(Error::Garbled);
    }
    verify(buf, body, &hdr)?;
    Ok((hdr, body))
}
