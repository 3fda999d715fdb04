//! Byte encoding helpers: little-endian fields and bit-packed values, with a
//! reader that checks canonical form (zero padding, values in range).

use crate::Error;

pub(crate) struct Writer {
    pub buf: Vec<u8>,
    acc: u128,
    nacc: u32,
}

impl Writer {
    pub fn with_capacity(n: usize) -> Self {
        Writer { buf: Vec::with_capacity(n), acc: 0, nacc: 0 }
    }
    /// A writer appending to `buf` (take it back from `.buf`).
    pub fn from_vec(buf: Vec<u8>) -> Self {
        Writer { buf, acc: 0, nacc: 0 }
    }
    pub fn bytes(&mut self, b: &[u8]) {
        debug_assert_eq!(self.nacc, 0);
        self.buf.extend_from_slice(b);
    }
    pub fn u128(&mut self, x: u128) {
        self.bytes(&x.to_le_bytes());
    }
    pub fn u64(&mut self, x: u64) {
        self.bytes(&x.to_le_bytes());
    }
    /// Low `w` bits of `x` (w ≤ 64) into the bit stream (written eight
    /// bytes at a time; [`Writer::flush_bits`] ends the stream).
    pub fn bits(&mut self, x: u64, w: u32) {
        self.acc |= ((x & crate::mask(w)) as u128) << self.nacc;
        self.nacc += w;
        if self.nacc >= 64 {
            self.buf.extend_from_slice(&(self.acc as u64).to_le_bytes());
            self.acc >>= 64;
            self.nacc -= 64;
        }
    }
    /// Pads the bit stream to a byte boundary with zeros.
    pub fn flush_bits(&mut self) {
        let n = self.nacc.div_ceil(8) as usize;
        self.buf.extend_from_slice(&(self.acc as u64).to_le_bytes()[..n]);
        self.acc = 0;
        self.nacc = 0;
    }
}

/// Where key encodings go: a growing [`Writer`] or a fixed [`SliceWriter`]
/// (the dealer writes each key straight into its slot of the share).
pub(crate) trait KeyOut {
    fn bytes(&mut self, b: &[u8]);
    fn u128(&mut self, x: u128) {
        self.bytes(&x.to_le_bytes());
    }
    fn u64(&mut self, x: u64) {
        self.bytes(&x.to_le_bytes());
    }
    fn bits(&mut self, x: u64, w: u32);
    fn flush_bits(&mut self);
}

impl KeyOut for Writer {
    fn bytes(&mut self, b: &[u8]) {
        Writer::bytes(self, b)
    }
    fn bits(&mut self, x: u64, w: u32) {
        Writer::bits(self, x, w)
    }
    fn flush_bits(&mut self) {
        Writer::flush_bits(self)
    }
}

/// A writer into a fixed slice (a key's slot in a dealt share): the same
/// encoding as [`Writer`], without a vector's capacity checks per field.
/// Panics if the encoding overruns the slice (a bug: slots have the fixed
/// key size).
pub(crate) struct SliceWriter<'a> {
    pub buf: &'a mut [u8],
    pub pos: usize,
    acc: u128,
    nacc: u32,
}

impl<'a> SliceWriter<'a> {
    pub fn new(buf: &'a mut [u8]) -> Self {
        SliceWriter { buf, pos: 0, acc: 0, nacc: 0 }
    }
}

impl KeyOut for SliceWriter<'_> {
    #[inline(always)]
    fn bytes(&mut self, b: &[u8]) {
        debug_assert_eq!(self.nacc, 0);
        self.buf[self.pos..self.pos + b.len()].copy_from_slice(b);
        self.pos += b.len();
    }
    #[inline(always)]
    fn bits(&mut self, x: u64, w: u32) {
        self.acc |= ((x & crate::mask(w)) as u128) << self.nacc;
        self.nacc += w;
        if self.nacc >= 64 {
            self.buf[self.pos..self.pos + 8].copy_from_slice(&(self.acc as u64).to_le_bytes());
            self.pos += 8;
            self.acc >>= 64;
            self.nacc -= 64;
        }
    }
    #[inline(always)]
    fn flush_bits(&mut self) {
        let n = self.nacc.div_ceil(8) as usize;
        self.buf[self.pos..self.pos + n].copy_from_slice(&(self.acc as u64).to_le_bytes()[..n]);
        self.pos += n;
        self.acc = 0;
        self.nacc = 0;
    }
}

/// Bytes taken by `nbits` bit-packed bits.
pub(crate) const fn packed_len(nbits: usize) -> usize {
    nbits.div_ceil(8)
}

pub(crate) struct Reader<'a> {
    what: &'static str,
    b: &'a [u8],
    pos: usize,
    acc: u128,
    nacc: u32,
    /// End of the current bit stream if declared ([`Reader::begin_bits`]):
    /// the reader may then fetch eight bytes at a time up to it.
    bits_end: usize,
}

impl<'a> Reader<'a> {
    pub fn new(what: &'static str, b: &'a [u8]) -> Self {
        Reader { what, b, pos: 0, acc: 0, nacc: 0, bits_end: 0 }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        if self.b.len() - self.pos < n {
            return Err(Error::Length { what: self.what, expected: self.pos + n, got: self.b.len() });
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    pub fn u8(&mut self) -> Result<u8, Error> {
        Ok(self.take(1)?[0])
    }
    pub fn u128(&mut self) -> Result<u128, Error> {
        let mut a = [0u8; 16];
        a.copy_from_slice(self.take(16)?);
        Ok(u128::from_le_bytes(a))
    }
    pub fn u64(&mut self) -> Result<u64, Error> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    /// A u64 that must be < 2^w.
    pub fn u64_below(&mut self, w: u32, field: &'static str) -> Result<u64, Error> {
        let x = self.u64()?;
        if x & !crate::mask(w) != 0 {
            return Err(Error::NonCanonical { what: self.what, reason: field });
        }
        Ok(x)
    }
    /// Declares that a bit stream of `nbits` bits starts here (so it ends
    /// ⌈nbits/8⌉ bytes on): [`Reader::bits`] then reads eight bytes at a
    /// time within it, never past its end.
    pub fn begin_bits(&mut self, nbits: usize) -> Result<(), Error> {
        let end = self.pos + nbits.div_ceil(8);
        if end > self.b.len() {
            return Err(Error::Length { what: self.what, expected: end, got: self.b.len() });
        }
        self.bits_end = end;
        Ok(())
    }
    /// `w` bits (w ≤ 64) from the bit stream.
    pub fn bits(&mut self, w: u32) -> Result<u64, Error> {
        if self.nacc < w && self.nacc <= 64 && self.bits_end >= self.pos + 8 {
            let mut a = [0u8; 8];
            a.copy_from_slice(&self.b[self.pos..self.pos + 8]);
            self.pos += 8;
            self.acc |= (u64::from_le_bytes(a) as u128) << self.nacc;
            self.nacc += 64;
        }
        while self.nacc < w {
            let byte = self.u8()?;
            self.acc |= (byte as u128) << self.nacc;
            self.nacc += 8;
        }
        let x = (self.acc as u64) & crate::mask(w);
        self.acc = if w >= 128 { 0 } else { self.acc >> w };
        self.nacc -= w;
        Ok(x)
    }
    /// Ends a bit stream: the padding bits must be zero.
    pub fn end_bits(&mut self) -> Result<(), Error> {
        let pad = self.acc;
        self.acc = 0;
        self.nacc = 0;
        self.bits_end = 0;
        if pad != 0 {
            return Err(Error::NonCanonical { what: self.what, reason: "nonzero padding bits" });
        }
        Ok(())
    }
    /// The whole input must have been consumed.
    pub fn finish(&self) -> Result<(), Error> {
        if self.pos != self.b.len() {
            return Err(Error::Length { what: self.what, expected: self.pos, got: self.b.len() });
        }
        Ok(())
    }
}
