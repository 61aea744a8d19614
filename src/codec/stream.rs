//! Stream records: what follows a stream's subkey prefix in the Stream CF (Kvrocks'
//! `stream` column family), and their values.
//!
//! Every record is `subkey(key, version, sub)` (the same prefix as any subkey) with one of
//! these `sub` forms; all integers are big-endian, so entries sort by id and every
//! consumer-group record sorts after every entry:
//!
//! | record | `sub` | value |
//! |---|---|---|
//! | entry | `ms:u64 seq:u64` | per field and value: LEB128 varint32 length, bytes |
//! | group | `0xFF×8` `0x01` `len:u64` group | consumers, pending, last-delivered `ms seq`, entries-read (i64, -1: unknown), lag: six u64 |
//! | consumer | `0xFF×8` `0x02` `len:u64` group `len:u64` consumer | pending, seen-time ms, active-time ms: three u64 |
//! | pending entry | `0xFF×8` `0x03` `len:u64` group `ms:u64 seq:u64` | delivery time ms, delivery count, `len:u64` consumer |
//!
//! An entry's `sub` is exactly 16 bytes and a group record's at least 17, so an entry whose
//! id has `ms = u64::MAX` is still told apart by its length.

use super::extra::StreamId;
use super::reader::Reader;
use crate::error::{Error, Result};

impl StreamId {
    /// `0-0`.
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// `18446744073709551615-18446744073709551615`.
    pub const MAX: StreamId = StreamId { ms: u64::MAX, seq: u64::MAX };

    /// The 16 bytes of an entry's `sub`: `ms` then `seq`, big-endian.
    pub(crate) fn to_bytes(self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.ms.to_be_bytes());
        out[8..].copy_from_slice(&self.seq.to_be_bytes());
        out
    }

    /// The id after this one, `None` after [`StreamId::MAX`].
    pub(crate) fn next(self) -> Option<StreamId> {
        match self.seq.checked_add(1) {
            Some(seq) => Some(StreamId { seq, ..self }),
            None => self.ms.checked_add(1).map(|ms| StreamId { ms, seq: 0 }),
        }
    }

    /// The id before this one, `None` before [`StreamId::MIN`].
    pub(crate) fn prev(self) -> Option<StreamId> {
        match self.seq.checked_sub(1) {
            Some(seq) => Some(StreamId { seq, ..self }),
            None => self.ms.checked_sub(1).map(|ms| StreamId { ms, seq: u64::MAX }),
        }
    }
}

impl PartialOrd for StreamId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for StreamId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.ms, self.seq).cmp(&(other.ms, other.seq))
    }
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// The marker that starts every consumer-group record's `sub`.
const GROUP_MARK: [u8; 8] = [0xFF; 8];
const GROUP: u8 = 1;
const CONSUMER: u8 = 2;
const PENDING: u8 = 3;

/// A stream record's `sub`, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamSub<'a> {
    /// An entry.
    Entry(StreamId),
    /// A consumer group's record.
    Group(&'a [u8]),
    /// A consumer of a group.
    Consumer {
        /// The group.
        group: &'a [u8],
        /// The consumer.
        consumer: &'a [u8],
    },
    /// A pending (delivered, not acknowledged) entry of a group.
    Pending {
        /// The group.
        group: &'a [u8],
        /// The entry.
        id: StreamId,
    },
}

fn group_head(kind: u8, group: &[u8], extra: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(17 + group.len() + extra);
    out.extend_from_slice(&GROUP_MARK);
    out.push(kind);
    out.extend_from_slice(&(group.len() as u64).to_be_bytes());
    out.extend_from_slice(group);
    out
}

impl StreamSub<'_> {
    /// The `sub` bytes of this record (the table in the module docs).
    pub fn to_bytes(&self) -> Vec<u8> {
        match *self {
            StreamSub::Entry(id) => id.to_bytes().to_vec(),
            StreamSub::Group(group) => group_head(GROUP, group, 0),
            StreamSub::Consumer { group, consumer } => {
                let mut out = group_head(CONSUMER, group, 8 + consumer.len());
                out.extend_from_slice(&(consumer.len() as u64).to_be_bytes());
                out.extend_from_slice(consumer);
                out
            }
            StreamSub::Pending { group, id } => {
                let mut out = group_head(PENDING, group, 16);
                out.extend_from_slice(&id.to_bytes());
                out
            }
        }
    }

    /// Reads a `sub`.
    ///
    /// # Errors
    /// [`Error::Truncated`] or [`Error::TrailingBytes`] when a length disagrees with the
    /// bytes, [`Error::InvalidField`] for a record kind other than 1–3.
    pub fn decode(sub: &[u8]) -> Result<StreamSub<'_>> {
        if sub.len() == 16 || !sub.starts_with(&GROUP_MARK) {
            let mut r = Reader::new(sub, "stream entry id");
            let id = StreamId { ms: r.u64()?, seq: r.u64()? };
            r.finish()?;
            return Ok(StreamSub::Entry(id));
        }
        let mut r = Reader::new(&sub[8..], "stream group record");
        let kind = r.u8()?;
        let group = sized(&mut r)?;
        let decoded = match kind {
            GROUP => StreamSub::Group(group),
            CONSUMER => StreamSub::Consumer { group, consumer: sized(&mut r)? },
            PENDING => StreamSub::Pending { group, id: StreamId { ms: r.u64()?, seq: r.u64()? } },
            other => return Err(Error::InvalidField { what: "stream record kind", value: u64::from(other) }),
        };
        r.finish()?;
        Ok(decoded)
    }
}

/// The `sub` prefix every consumer group's own record starts with: what a scan over a
/// stream's groups ranges over.
pub(crate) fn groups_prefix() -> [u8; 9] {
    let mut out = [0xFF; 9];
    out[8] = GROUP;
    out
}

/// The `sub` prefix every consumer and pending record of `group` starts with (`kind` 2 or
/// 3): what a scan over one group's consumers or pending entries ranges over.
pub(crate) fn group_records_prefix(pending: bool, group: &[u8]) -> Vec<u8> {
    group_head(if pending { PENDING } else { CONSUMER }, group, 0)
}

fn sized<'a>(r: &mut Reader<'a>) -> Result<&'a [u8]> {
    let len = r.u64()?;
    r.take(usize::try_from(len).unwrap_or(usize::MAX))
}

/// An entry's value: each field and value as a LEB128 varint32 length and its bytes.
pub fn encode_entry(fields: &[impl AsRef<[u8]>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(fields.iter().map(|f| f.as_ref().len() + 2).sum());
    for f in fields {
        let f = f.as_ref();
        let mut len = f.len() as u32;
        while len >= 0x80 {
            out.push(len as u8 | 0x80);
            len >>= 7;
        }
        out.push(len as u8);
        out.extend_from_slice(f);
    }
    out
}

/// Reads an entry's value back into its fields and values, borrowed.
///
/// # Errors
/// [`Error::Truncated`] when a length runs past the end or a varint past 5 bytes.
pub fn decode_entry(value: &[u8]) -> Result<Vec<&[u8]>> {
    let mut r = Reader::new(value, "stream entry");
    let mut out = Vec::new();
    while !r.is_empty() {
        let mut len: u64 = 0;
        let mut shift = 0;
        loop {
            if shift > 28 {
                return Err(Error::Truncated { what: "stream entry varint", need: 5, have: 6 });
            }
            let b = r.u8()?;
            len |= u64::from(b & 0x7F) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        out.push(r.take(len as usize)?);
    }
    Ok(out)
}

/// A consumer group's record value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GroupValue {
    /// How many consumers it has.
    pub consumers: u64,
    /// How many entries it has delivered and not had acknowledged.
    pub pending: u64,
    /// The last id delivered to any consumer.
    pub last_delivered: StreamId,
    /// The logical read counter (`entries-read`); -1 when unknown.
    pub entries_read: i64,
    /// Stored lag (Kvrocks keeps it; the reply computes it).
    pub lag: u64,
}

/// A consumer's record value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConsumerValue {
    /// Its pending entries.
    pub pending: u64,
    /// When it last tried to read or claim (ms).
    pub seen_ms: u64,
    /// When it last read or claimed something (ms).
    pub active_ms: u64,
}

/// A pending entry's record value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingValue<'a> {
    /// When it was last delivered (ms).
    pub delivered_ms: u64,
    /// How many times it was delivered.
    pub deliveries: u64,
    /// The consumer that holds it.
    pub consumer: &'a [u8],
}

impl GroupValue {
    /// The 48 bytes: six big-endian u64 (entries-read as its two's complement).
    pub fn to_bytes(&self) -> Vec<u8> {
        [
            self.consumers,
            self.pending,
            self.last_delivered.ms,
            self.last_delivered.seq,
            self.entries_read as u64,
            self.lag,
        ]
        .iter()
        .flat_map(|v| v.to_be_bytes())
        .collect()
    }

    /// Reads the 48 bytes.
    ///
    /// # Errors
    /// [`Error::Truncated`] or [`Error::TrailingBytes`] for any other length.
    pub fn decode(bytes: &[u8]) -> Result<GroupValue> {
        let mut r = Reader::new(bytes, "stream group");
        let consumers = r.u64()?;
        let pending = r.u64()?;
        let last_delivered = StreamId { ms: r.u64()?, seq: r.u64()? };
        let entries_read = r.u64()? as i64;
        let lag = r.u64()?;
        r.finish()?;
        Ok(GroupValue { consumers, pending, last_delivered, entries_read, lag })
    }
}

impl ConsumerValue {
    /// The 24 bytes: three big-endian u64.
    pub fn to_bytes(&self) -> Vec<u8> {
        [self.pending, self.seen_ms, self.active_ms].iter().flat_map(|v| v.to_be_bytes()).collect()
    }

    /// Reads the 24 bytes.
    ///
    /// # Errors
    /// [`Error::Truncated`] or [`Error::TrailingBytes`] for any other length.
    pub fn decode(bytes: &[u8]) -> Result<ConsumerValue> {
        let mut r = Reader::new(bytes, "stream consumer");
        let v = ConsumerValue { pending: r.u64()?, seen_ms: r.u64()?, active_ms: r.u64()? };
        r.finish()?;
        Ok(v)
    }
}

impl<'a> PendingValue<'a> {
    /// Delivery time, count and the consumer's length (big-endian u64 each), then its name.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24 + self.consumer.len());
        out.extend_from_slice(&self.delivered_ms.to_be_bytes());
        out.extend_from_slice(&self.deliveries.to_be_bytes());
        out.extend_from_slice(&(self.consumer.len() as u64).to_be_bytes());
        out.extend_from_slice(self.consumer);
        out
    }

    /// Reads a pending entry's value, borrowing the consumer's name.
    ///
    /// # Errors
    /// [`Error::Truncated`] or [`Error::TrailingBytes`] when the length disagrees.
    pub fn decode(bytes: &'a [u8]) -> Result<PendingValue<'a>> {
        let mut r = Reader::new(bytes, "stream pending entry");
        let delivered_ms = r.u64()?;
        let deliveries = r.u64()?;
        let consumer = sized(&mut r)?;
        r.finish()?;
        Ok(PendingValue { delivered_ms, deliveries, consumer })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Written by hand from the table in the module docs.
    #[test]
    fn golden_subs() {
        let id = StreamId { ms: 0x0102, seq: 7 };
        assert_eq!(StreamSub::Entry(id).to_bytes(), b"\0\0\0\0\0\0\x01\x02\0\0\0\0\0\0\0\x07");
        assert_eq!(
            StreamSub::Group(b"g").to_bytes(),
            b"\xff\xff\xff\xff\xff\xff\xff\xff\x01\0\0\0\0\0\0\0\x01g"
        );
        assert_eq!(
            StreamSub::Consumer { group: b"g", consumer: b"ab" }.to_bytes(),
            b"\xff\xff\xff\xff\xff\xff\xff\xff\x02\0\0\0\0\0\0\0\x01g\0\0\0\0\0\0\0\x02ab"
        );
        assert_eq!(
            StreamSub::Pending { group: b"", id: StreamId { ms: 1, seq: 2 } }.to_bytes(),
            b"\xff\xff\xff\xff\xff\xff\xff\xff\x03\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x01\0\0\0\0\0\0\0\x02"
        );
    }

    #[test]
    fn subs_round_trip() {
        let max = StreamId::MAX;
        for sub in [
            StreamSub::Entry(StreamId::MIN),
            StreamSub::Entry(max),
            StreamSub::Group(b"group"),
            StreamSub::Consumer { group: b"g", consumer: b"" },
            StreamSub::Pending { group: b"\xff", id: max },
        ] {
            assert_eq!(StreamSub::decode(&sub.to_bytes()).unwrap(), sub);
        }
    }

    #[test]
    fn golden_values() {
        assert_eq!(encode_entry(&[&b"f"[..], &[b'x'; 200][..]])[..4], [1, b'f', 0xC8, 0x01]);
        let g = GroupValue {
            consumers: 1,
            pending: 2,
            last_delivered: StreamId { ms: 3, seq: 4 },
            entries_read: -1,
            lag: 0,
        };
        let mut want = Vec::new();
        for v in [1u64, 2, 3, 4, u64::MAX, 0] {
            want.extend_from_slice(&v.to_be_bytes());
        }
        assert_eq!(g.to_bytes(), want);
        assert_eq!(GroupValue::decode(&want).unwrap(), g);
        let p = PendingValue { delivered_ms: 5, deliveries: 1, consumer: b"c" };
        assert_eq!(p.to_bytes(), b"\0\0\0\0\0\0\0\x05\0\0\0\0\0\0\0\x01\0\0\0\0\0\0\0\x01c");
        assert_eq!(PendingValue::decode(&p.to_bytes()).unwrap(), p);
    }

    #[test]
    fn entries_round_trip() {
        let fields: Vec<Vec<u8>> = vec![vec![], b"a".to_vec(), vec![7; 127], vec![8; 128], vec![9; 70000]];
        let bytes = encode_entry(&fields);
        let back = decode_entry(&bytes).unwrap();
        assert_eq!(back, fields.iter().map(|f| f.as_slice()).collect::<Vec<_>>());
    }

    #[test]
    fn decoders_never_panic() {
        let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
        for len in 0..80 {
            for _ in 0..50 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        if seed.is_multiple_of(3) { 0xFF } else { seed as u8 }
                    })
                    .collect();
                let _ = StreamSub::decode(&bytes);
                let _ = decode_entry(&bytes);
                let _ = GroupValue::decode(&bytes);
                let _ = ConsumerValue::decode(&bytes);
                let _ = PendingValue::decode(&bytes);
            }
        }
        assert!(decode_entry(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]).is_err());
        assert!(StreamSub::decode(b"\xff\xff\xff\xff\xff\xff\xff\xff\x04\0\0\0\0\0\0\0\0").is_err());
    }

    #[test]
    fn next_and_prev() {
        assert_eq!(StreamId { ms: 1, seq: u64::MAX }.next(), Some(StreamId { ms: 2, seq: 0 }));
        assert_eq!(StreamId::MAX.next(), None);
        assert_eq!(StreamId { ms: 2, seq: 0 }.prev(), Some(StreamId { ms: 1, seq: u64::MAX }));
        assert_eq!(StreamId::MIN.prev(), None);
        assert!(StreamId { ms: 1, seq: 9 } < StreamId { ms: 2, seq: 0 });
    }
}
