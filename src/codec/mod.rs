//! Bytes only: record layouts, the ordered double, list indices, versions and cluster slots.
//!
//! Nothing here does I/O or knows about commands; every decoder borrows from its input and
//! returns [`crate::Error`] instead of panicking.

pub mod camellia;
mod double;
mod extra;
mod key;
mod list;
mod metadata;
pub mod rdb;
mod rdb_file;
pub(crate) mod reader;
mod slot;
mod stream;
pub mod titea;
mod types;
mod version;

pub use double::{decode_f64, decode_f64_slice, encode_f64};
pub use extra::{
    BloomFields, Extra, Float, StreamFields, StreamId, TDigestFields, TimeSeriesFields, TopKFields,
};
pub use key::{
    DEFAULT_NAMESPACE, KeyLayout, KeyOwner, KeyRange, LayoutKind, MetadataKey, RoutedKey, ScoreKey, Subkey,
    neokv_ids, neokv_namespace, prefix_successor,
};
pub use list::LIST_INITIAL_INDEX;
pub(crate) use list::{push_back_tail, push_front_index, stored_index};
pub use metadata::{Metadata, decode_neokv_legacy, encode_neokv_legacy, peek_type_and_expire};
pub use rdb_file::{
    RdbEntry, RdbFileOptions, RdbFileReader, RdbFileWriter, RdbHeader, RdbItem, RdbReplication,
};
pub use slot::{SLOT_COUNT, hash_tag, key_slot};
pub use stream::{ConsumerValue, GroupValue, PendingValue, StreamSub, decode_entry, encode_entry};
pub(crate) use stream::{group_records_prefix, groups_prefix};
pub use types::{FLAG_64BIT, FLAG_BLIND_WRITE, FLAG_RESERVED, Flags, RedisType, TYPE_MASK};
pub(crate) use version::SystemClock;
pub use version::{Clock, ManualClock, Version, VersionGenerator};

/// The column families records live in (docs/layout.md). A backend with one key space maps each
/// to a distinct one-byte prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ColumnFamily {
    /// One record per Redis key (Kvrocks `metadata`).
    Metadata,
    /// Hash fields, set members, list elements, zset members (Kvrocks `default`).
    Subkey,
    /// Zset members ordered by score (Kvrocks `zset_score`).
    Score,
    /// Stream entries and consumer groups (Kvrocks `stream`).
    Stream,
}

impl ColumnFamily {
    /// All four, in a fixed order.
    pub const ALL: [ColumnFamily; 4] =
        [ColumnFamily::Metadata, ColumnFamily::Subkey, ColumnFamily::Score, ColumnFamily::Stream];

    /// Kvrocks' name for the column family.
    pub(crate) const fn kvrocks_name(self) -> &'static str {
        match self {
            ColumnFamily::Metadata => "metadata",
            ColumnFamily::Subkey => "default",
            ColumnFamily::Score => "zset_score",
            ColumnFamily::Stream => "stream",
        }
    }
}
