//! A small length-checked codec for module requests and responses. Every
//! read checks the remaining length before allocating; malformed input is
//! an error, never a panic.

use crate::{Error, Result};
use hush_primitives::Block;

/// Largest number of blocks in one vector field (2^23 blocks = 128 MiB).
pub const MAX_BLOCKS: usize = 1 << 23;

#[derive(Default)]
pub struct Writer(pub Vec<u8>);

impl Writer {
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
        self
    }
    pub fn block(&mut self, b: Block) -> &mut Self {
        self.0.extend_from_slice(&b.to_bytes());
        self
    }
    pub fn blocks(&mut self, bs: &[Block]) -> &mut Self {
        self.u32(bs.len() as u32);
        self.0.extend_from_slice(Block::as_bytes(bs));
        self
    }
    pub fn u32s(&mut self, vs: &[u32]) -> &mut Self {
        self.u32(vs.len() as u32);
        for v in vs {
            self.0.extend_from_slice(&v.to_le_bytes());
        }
        self
    }
}

pub struct Reader<'a> {
    buf: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8], what: &'static str) -> Self {
        Reader { buf, what }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.buf.len() < n {
            return Err(Error::Malformed(format!("{}: truncated ({} bytes left, {n} needed)", self.what, self.buf.len())));
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Ok(a)
    }
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    pub fn bytes(&mut self, max: usize) -> Result<Vec<u8>> {
        let n = self.u32()? as usize;
        if n > max {
            return Err(Error::Malformed(format!("{}: field of {n} bytes exceeds {max}", self.what)));
        }
        Ok(self.take(n)?.to_vec())
    }
    pub fn array32(&mut self) -> Result<[u8; 32]> {
        Ok(self.take(32)?.try_into().expect("32 bytes"))
    }
    pub fn block(&mut self) -> Result<Block> {
        Ok(Block::from_slice(self.take(16)?))
    }
    pub fn blocks(&mut self) -> Result<Vec<Block>> {
        let n = self.u32()? as usize;
        if n > MAX_BLOCKS {
            return Err(Error::Malformed(format!("{}: {n} blocks exceeds {MAX_BLOCKS}", self.what)));
        }
        let raw = self.take(16 * n)?;
        Ok(raw.chunks_exact(16).map(Block::from_slice).collect())
    }
    pub fn u32s(&mut self) -> Result<Vec<u32>> {
        let n = self.u32()? as usize;
        if n > MAX_BLOCKS {
            return Err(Error::Malformed(format!("{}: {n} words exceeds {MAX_BLOCKS}", self.what)));
        }
        let raw = self.take(4 * n)?;
        Ok(raw.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))).collect())
    }
    pub fn finish(self) -> Result<()> {
        if !self.buf.is_empty() {
            return Err(Error::Malformed(format!("{}: {} trailing bytes", self.what, self.buf.len())));
        }
        Ok(())
    }
}
