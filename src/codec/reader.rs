//! A bounds-checked big-endian reader: every decoder goes through it, so none can panic.

use byteorder::{BigEndian, ByteOrder};

use crate::error::{Error, Result};

/// Reads fields off the front of a borrowed slice.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8], what: &'static str) -> Self {
        Reader { buf, what }
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.buf.len() < n {
            return Err(Error::Truncated { what: self.what, need: n, have: self.buf.len() });
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    /// The bytes not read yet, without reading them.
    pub(crate) fn remaining(&self) -> &'a [u8] {
        self.buf
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u16(&mut self) -> Result<u16> {
        Ok(BigEndian::read_u16(self.take(2)?))
    }

    pub(crate) fn u32(&mut self) -> Result<u32> {
        Ok(BigEndian::read_u32(self.take(4)?))
    }

    pub(crate) fn u64(&mut self) -> Result<u64> {
        Ok(BigEndian::read_u64(self.take(8)?))
    }

    /// A 16-byte object id ([`super::Version::Id`]).
    pub(crate) fn id(&mut self) -> Result<[u8; 16]> {
        let mut id = [0; 16];
        id.copy_from_slice(self.take(16)?);
        Ok(id)
    }

    /// Whether everything has been read.
    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Everything not read yet.
    pub(crate) fn rest(self) -> &'a [u8] {
        self.buf
    }

    /// Fails when bytes are left over.
    pub(crate) fn finish(self) -> Result<()> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(Error::TrailingBytes { what: self.what, extra: self.buf.len() })
        }
    }
}
