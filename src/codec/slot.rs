//! Redis Cluster hash slots.

use crc::{CRC_16_XMODEM, Crc, Table};

/// Number of hash slots in a Redis Cluster.
pub const SLOT_COUNT: u16 = 16384;

/// A `static` (a `const` is re-instantiated at each use) with slice-by-16 tables: about 5x
/// faster than the byte-wise default on a 16-byte key.
static XMODEM: Crc<u16, Table<16>> = Crc::<u16, Table<16>>::new(&CRC_16_XMODEM);

/// The part of `key` that is hashed: the text between the first `{` and the next `}` when
/// it is non-empty, else the whole key.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{')
        && let Some(len) = key[open + 1..].iter().position(|&b| b == b'}')
        && len > 0
    {
        return &key[open + 1..open + 1 + len];
    }
    key
}

/// The cluster slot of `key`: `CRC16-XMODEM(hash_tag(key)) & 0x3FFF`.
pub fn key_slot(key: &[u8]) -> u16 {
    XMODEM.checksum(hash_tag(key)) & (SLOT_COUNT - 1)
}
