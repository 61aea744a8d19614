//! Switches shared by every session of an engine: blind writes, `new` events, bitmaps as
//! strings, the stream node size.

use std::sync::atomic::Ordering;

use super::Db;
use crate::backend::KvBackend;
use crate::codec::RedisType;

impl<B: KvBackend> Db<'_, B> {
    /// The node size approximate stream trimming removes whole
    /// ([`crate::commands::Engine::set_stream_node_entries`]).
    pub(crate) fn stream_node_entries(&self) -> u64 {
        self.shared.stream_node_entries.load(Ordering::Relaxed)
    }

    /// Turns blind-write mode on or off for hashes and sets (docs/layout.md, extensions).
    pub fn set_blind_write(&mut self, on: bool) {
        self.shared.blind_write.store(on, Ordering::Relaxed);
    }

    /// Whether blind-write mode is on.
    pub(crate) fn blind_write(&self) -> bool {
        self.shared.blind_write.load(Ordering::Relaxed)
    }

    /// Picks how SETBIT, BITFIELD and BITOP create a key: `false` (the default) a Kvrocks
    /// bitmap in 1024-byte fragments, `true` a string like Redis. Existing keys keep their
    /// representation either way.
    pub fn set_bitmap_strings(&mut self, on: bool) {
        self.shared.bitmap_strings.store(on, Ordering::Relaxed);
    }

    /// Whether new bitmaps are strings ([`Db::set_bitmap_strings`]).
    pub(crate) fn bitmap_strings(&self) -> bool {
        self.shared.bitmap_strings.load(Ordering::Relaxed)
            || !self.shared.base_layout.stores(RedisType::Bitmap)
    }
}
