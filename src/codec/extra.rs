//! The type-specific metadata fields Kvrocks writes after the common ones (after
//! `version size`, or after `expire` for the single-KV JSON type).
//!
//! | type | fields (big-endian) |
//! |---|---|
//! | stream | five entry ids `ms:u64 seq:u64` (last generated, recorded first, max deleted, first, last), `entries_added:u64`, optional `group_number:u64` |
//! | bloom filter | `n_filters:u16 expansion:u16 base_capacity:u32 error_rate:f64 bloom_bytes:u32` |
//! | JSON | `format:u8` (0 JSON, 1 CBOR), then the document |
//! | hyperloglog | `encode_type:u8` (0, dense) |
//! | t-digest | `compression:u32 capacity:u32 unmerged_nodes:u64 merged_nodes:u64 total_weight:u64 merged_weight:u64 minimum:f64 maximum:f64 total_observations:u64 merge_times:u64` |
//! | time series | `retention:u64 chunk_size:u64 chunk_type:u8 duplicate_policy:u8 source_key_len:u32 source_key`, optional `last_timestamp:u64` |
//! | top-k | `top_k:u32 width:u16 depth:u32 decay:f64` |
//!
//! An `f64` is Kvrocks' ordered form: the IEEE bits with the sign bit set for a positive
//! number, all bits inverted for a negative one. Optional trailing fields are absent in
//! records older writers produced; they re-encode absent.

use bytes::BufMut;

use super::reader::Reader;
use super::types::RedisType;
use crate::error::{Error, Result};

/// An `f64` kept as its IEEE-754 bits, so that a decoded record compares and re-encodes
/// exactly (NaN and `-0.0` included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Float(pub u64);

impl Float {
    /// The bits of `x`.
    pub const fn new(x: f64) -> Self {
        Float(x.to_bits())
    }

    /// The number.
    pub const fn get(self) -> f64 {
        f64::from_bits(self.0)
    }

    /// Kvrocks' ordered form of the bits (a bijection).
    const fn ordered(self) -> u64 {
        if self.0 >> 63 == 1 { !self.0 } else { self.0 | 1 << 63 }
    }

    const fn from_ordered(ordered: u64) -> Self {
        Float(if ordered >> 63 == 1 { ordered & !(1 << 63) } else { !ordered })
    }
}

/// A stream entry id `ms-seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamId {
    /// Milliseconds part.
    pub ms: u64,
    /// Sequence part.
    pub seq: u64,
}

/// A stream's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamFields {
    /// The last id XADD generated.
    pub last_generated_id: StreamId,
    /// The first id ever recorded.
    pub recorded_first_entry_id: StreamId,
    /// The largest id deleted.
    pub max_deleted_entry_id: StreamId,
    /// The first live entry.
    pub first_entry_id: StreamId,
    /// The last live entry.
    pub last_entry_id: StreamId,
    /// Entries ever added.
    pub entries_added: u64,
    /// Consumer groups; `None` in records written before Kvrocks stored it.
    pub group_number: Option<u64>,
}

/// A scalable bloom filter's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BloomFields {
    /// Number of sub-filters.
    pub n_filters: u16,
    /// Capacity growth factor of each new sub-filter; 0 for a non-scaling filter.
    pub expansion: u16,
    /// Capacity of the first sub-filter.
    pub base_capacity: u32,
    /// The target false-positive rate.
    pub error_rate: Float,
    /// Bytes allocated across all sub-filters.
    pub bloom_bytes: u32,
}

/// A t-digest's parameters and counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TDigestFields {
    /// Compression parameter.
    pub compression: u32,
    /// Buffer capacity.
    pub capacity: u32,
    /// Nodes not merged yet.
    pub unmerged_nodes: u64,
    /// Merged nodes.
    pub merged_nodes: u64,
    /// Total weight.
    pub total_weight: u64,
    /// Weight of the merged nodes.
    pub merged_weight: u64,
    /// Smallest observation (`f64::MAX` when empty, as Kvrocks starts it).
    pub minimum: Float,
    /// Largest observation (`f64::MIN` when empty).
    pub maximum: Float,
    /// Observations ever added.
    pub total_observations: u64,
    /// Merges ever run.
    pub merge_times: u64,
}

/// A time series' parameters; its source key is [`crate::codec::Metadata::value`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimeSeriesFields {
    /// Retention in milliseconds, 0 for none.
    pub retention_time: u64,
    /// Samples per chunk.
    pub chunk_size: u64,
    /// 0 uncompressed, 1 compressed.
    pub chunk_type: u8,
    /// 0 block, 1 first, 2 last, 3 min, 4 max, 5 sum.
    pub duplicate_policy: u8,
    /// Approximate last sample time; `None` in records written before Kvrocks stored it.
    pub last_timestamp: Option<u64>,
}

/// A top-k sketch's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TopKFields {
    /// Items tracked.
    pub top_k: u32,
    /// Counters per array.
    pub width: u16,
    /// Number of arrays.
    pub depth: u32,
    /// Decay probability base.
    pub decay: Float,
}

/// The type-specific fields of a metadata record. The fields of more than a byte are kept
/// out of line, so that a [`crate::codec::Metadata`] moves as a few words.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Extra {
    /// No extra fields (string, hash, list, set, zset, bitmap, sortedint).
    #[default]
    None,
    /// A stream's counters.
    Stream(Box<StreamFields>),
    /// A bloom filter's parameters.
    Bloom(Box<BloomFields>),
    /// A JSON document's storage format.
    Json {
        /// 0 JSON text, 1 CBOR.
        format: u8,
    },
    /// A Kvrocks HyperLogLog's register encoding.
    HyperLogLog {
        /// 0: dense.
        encode_type: u8,
    },
    /// A t-digest's counters.
    TDigest(Box<TDigestFields>),
    /// A time series' parameters.
    TimeSeries(Box<TimeSeriesFields>),
    /// A top-k sketch's parameters.
    TopK(Box<TopKFields>),
}

impl Extra {
    /// The fields a new, empty value of `ty` carries (Kvrocks' constructors' defaults).
    pub(crate) fn default_for(ty: RedisType) -> Extra {
        match ty {
            RedisType::Stream => {
                Extra::Stream(Box::new(StreamFields { group_number: Some(0), ..StreamFields::default() }))
            }
            RedisType::BloomFilter => Extra::Bloom(Box::default()),
            RedisType::Json => Extra::Json { format: 0 },
            RedisType::HyperLogLog => Extra::HyperLogLog { encode_type: 0 },
            RedisType::TDigest => Extra::TDigest(Box::new(TDigestFields {
                minimum: Float::new(f64::MAX),
                maximum: Float::new(f64::MIN),
                ..TDigestFields::default()
            })),
            RedisType::TimeSeries => Extra::TimeSeries(Box::new(TimeSeriesFields {
                last_timestamp: Some(0),
                ..TimeSeriesFields::default()
            })),
            RedisType::TopK => Extra::TopK(Box::default()),
            _ => Extra::None,
        }
    }

    /// Whether these are the fields of `ty`.
    pub(crate) fn fits(&self, ty: RedisType) -> bool {
        matches!(
            (self, ty),
            (Extra::Stream(_), RedisType::Stream)
                | (Extra::Bloom(_), RedisType::BloomFilter)
                | (Extra::Json { .. }, RedisType::Json)
                | (Extra::HyperLogLog { .. }, RedisType::HyperLogLog)
                | (Extra::TDigest(_), RedisType::TDigest)
                | (Extra::TimeSeries(_), RedisType::TimeSeries)
                | (Extra::TopK(_), RedisType::TopK)
        ) || (matches!(self, Extra::None) && matches!(Extra::default_for(ty), Extra::None))
    }

    /// The bytes [`Extra::encode`] writes; `value` is the time series' source key.
    pub(crate) fn encoded_len(&self, value: &[u8]) -> usize {
        match self {
            Extra::None => 0,
            Extra::Stream(s) => 88 + if s.group_number.is_some() { 8 } else { 0 },
            Extra::Bloom(_) => 20,
            Extra::Json { .. } | Extra::HyperLogLog { .. } => 1,
            Extra::TDigest(_) => 72,
            Extra::TimeSeries(t) => 22 + value.len() + if t.last_timestamp.is_some() { 8 } else { 0 },
            Extra::TopK(_) => 18,
        }
    }

    /// Writes the fields as in the module table; `value` is the time series' source key
    /// (written with its u32 length; ignored by the other types).
    pub(crate) fn encode(&self, value: &[u8], out: &mut impl BufMut) {
        match self {
            Extra::None => {}
            Extra::Stream(s) => {
                for id in [
                    s.last_generated_id,
                    s.recorded_first_entry_id,
                    s.max_deleted_entry_id,
                    s.first_entry_id,
                    s.last_entry_id,
                ] {
                    out.put_u64(id.ms);
                    out.put_u64(id.seq);
                }
                out.put_u64(s.entries_added);
                if let Some(groups) = s.group_number {
                    out.put_u64(groups);
                }
            }
            Extra::Bloom(b) => {
                out.put_u16(b.n_filters);
                out.put_u16(b.expansion);
                out.put_u32(b.base_capacity);
                out.put_u64(b.error_rate.ordered());
                out.put_u32(b.bloom_bytes);
            }
            Extra::Json { format: byte } | Extra::HyperLogLog { encode_type: byte } => out.put_u8(*byte),
            Extra::TDigest(t) => {
                out.put_u32(t.compression);
                out.put_u32(t.capacity);
                for n in [t.unmerged_nodes, t.merged_nodes, t.total_weight, t.merged_weight] {
                    out.put_u64(n);
                }
                out.put_u64(t.minimum.ordered());
                out.put_u64(t.maximum.ordered());
                out.put_u64(t.total_observations);
                out.put_u64(t.merge_times);
            }
            Extra::TimeSeries(t) => {
                out.put_u64(t.retention_time);
                out.put_u64(t.chunk_size);
                out.put_u8(t.chunk_type);
                out.put_u8(t.duplicate_policy);
                // A source key over 4 GiB cannot exist: keys are limited to u32 lengths.
                out.put_u32(u32::try_from(value.len()).unwrap_or(u32::MAX));
                out.put_slice(value);
                if let Some(ts) = t.last_timestamp {
                    out.put_u64(ts);
                }
            }
            Extra::TopK(k) => {
                out.put_u32(k.top_k);
                out.put_u16(k.width);
                out.put_u32(k.depth);
                out.put_u64(k.decay.ordered());
            }
        }
    }

    /// Whether records of `ty` carry extra fields (the five Redis types and bitmaps do not):
    /// the types [`Extra::decode`] reads fields for.
    pub(crate) fn carried_by(ty: RedisType) -> bool {
        matches!(
            ty,
            RedisType::Stream
                | RedisType::BloomFilter
                | RedisType::Json
                | RedisType::HyperLogLog
                | RedisType::TDigest
                | RedisType::TimeSeries
                | RedisType::TopK
        )
    }

    /// Reads the fields of `ty`; a time series' source key is returned as the second item
    /// (empty for the other types).
    ///
    /// # Errors
    /// [`Error::Truncated`] when a field is cut short; [`Error::InvalidField`] for a
    /// HyperLogLog encode type other than 0.
    pub(crate) fn decode<'a>(ty: RedisType, r: &mut Reader<'a>) -> Result<(Extra, &'a [u8])> {
        let extra = match ty {
            RedisType::Stream => {
                let mut id = || -> Result<StreamId> { Ok(StreamId { ms: r.u64()?, seq: r.u64()? }) };
                let (a, b, c, d, e) = (id()?, id()?, id()?, id()?, id()?);
                Extra::Stream(Box::new(StreamFields {
                    last_generated_id: a,
                    recorded_first_entry_id: b,
                    max_deleted_entry_id: c,
                    first_entry_id: d,
                    last_entry_id: e,
                    entries_added: r.u64()?,
                    group_number: optional_u64(r)?,
                }))
            }
            RedisType::BloomFilter => Extra::Bloom(Box::new(BloomFields {
                n_filters: r.u16()?,
                expansion: r.u16()?,
                base_capacity: r.u32()?,
                error_rate: Float::from_ordered(r.u64()?),
                bloom_bytes: r.u32()?,
            })),
            RedisType::Json => Extra::Json { format: r.u8()? },
            RedisType::HyperLogLog => match r.u8()? {
                0 => Extra::HyperLogLog { encode_type: 0 },
                other => {
                    return Err(Error::InvalidField { what: "hyperloglog encode type", value: other.into() });
                }
            },
            RedisType::TDigest => Extra::TDigest(Box::new(TDigestFields {
                compression: r.u32()?,
                capacity: r.u32()?,
                unmerged_nodes: r.u64()?,
                merged_nodes: r.u64()?,
                total_weight: r.u64()?,
                merged_weight: r.u64()?,
                minimum: Float::from_ordered(r.u64()?),
                maximum: Float::from_ordered(r.u64()?),
                total_observations: r.u64()?,
                merge_times: r.u64()?,
            })),
            RedisType::TimeSeries => {
                let retention_time = r.u64()?;
                let chunk_size = r.u64()?;
                let chunk_type = r.u8()?;
                let duplicate_policy = r.u8()?;
                let len = r.u32()?;
                let source = r.take(usize::try_from(len).unwrap_or(usize::MAX))?;
                let last_timestamp = optional_u64(r)?;
                let fields = TimeSeriesFields {
                    retention_time,
                    chunk_size,
                    chunk_type,
                    duplicate_policy,
                    last_timestamp,
                };
                return Ok((Extra::TimeSeries(Box::new(fields)), source));
            }
            RedisType::TopK => Extra::TopK(Box::new(TopKFields {
                top_k: r.u32()?,
                width: r.u16()?,
                depth: r.u32()?,
                decay: Float::from_ordered(r.u64()?),
            })),
            _ => Extra::None,
        };
        Ok((extra, &[]))
    }
}

/// A trailing u64 that older writers leave out: `None` at the end of the input.
fn optional_u64(r: &mut Reader<'_>) -> Result<Option<u64>> {
    if r.is_empty() { Ok(None) } else { r.u64().map(Some) }
}
