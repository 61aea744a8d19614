//! Keyspace notifications: the [`Event`]s commands raise (Redis 7.0's `notifyKeyspaceEvent`
//! calls, same names, same order) and the [`NotifyFlags`] of `notify-keyspace-events`.
//!
//! The library only records events; a server publishes them. After
//! [`super::Engine::execute`], [`super::Session::events`] lists what the command (or EXEC, in
//! queue order) raised; [`Event::messages`] turns one into the pub/sub messages Redis would
//! publish under given flags.

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

/// A set of `notify-keyspace-events` classes, as Redis' `NOTIFY_*` bits; an [`Event`]'s
/// class is one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NotifyFlags(u32);

/// The error text of an invalid `notify-keyspace-events` value (Redis wraps it in
/// `ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - …`).
pub const INVALID_FLAGS: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

impl NotifyFlags {
    /// No class: notifications off (the default).
    pub const NONE: NotifyFlags = NotifyFlags(0);
    /// `K`: publish on `__keyspace@<db>__:<key>`.
    pub(crate) const KEYSPACE: NotifyFlags = NotifyFlags(1 << 0);
    /// `E`: publish on `__keyevent@<db>__:<event>`.
    pub(crate) const KEYEVENT: NotifyFlags = NotifyFlags(1 << 1);
    /// `g`: generic commands (DEL, EXPIRE, RENAME, …).
    pub(crate) const GENERIC: NotifyFlags = NotifyFlags(1 << 2);
    /// `$`: string commands.
    pub const STRING: NotifyFlags = NotifyFlags(1 << 3);
    /// `l`: list commands.
    pub(crate) const LIST: NotifyFlags = NotifyFlags(1 << 4);
    /// `s`: set commands.
    pub(crate) const SET: NotifyFlags = NotifyFlags(1 << 5);
    /// `h`: hash commands.
    pub(crate) const HASH: NotifyFlags = NotifyFlags(1 << 6);
    /// `z`: sorted set commands.
    pub(crate) const ZSET: NotifyFlags = NotifyFlags(1 << 7);
    /// `x`: a key expired (found by a command or by active expiry).
    pub(crate) const EXPIRED: NotifyFlags = NotifyFlags(1 << 8);
    /// `e`: a key evicted for maxmemory.
    pub(crate) const EVICTED: NotifyFlags = NotifyFlags(1 << 9);
    /// `t`: stream commands.
    pub(crate) const STREAM: NotifyFlags = NotifyFlags(1 << 10);
    /// `m`: a read of a missing key (not in `A`).
    pub(crate) const KEY_MISS: NotifyFlags = NotifyFlags(1 << 11);
    /// `d`: module key types.
    pub(crate) const MODULE: NotifyFlags = NotifyFlags(1 << 13);
    /// `n`: a key was created (not in `A`).
    pub const NEW: NotifyFlags = NotifyFlags(1 << 14);
    /// `A`: `g$lshzxetd`.
    pub const ALL: NotifyFlags = NotifyFlags(
        Self::GENERIC.0
            | Self::STRING.0
            | Self::LIST.0
            | Self::SET.0
            | Self::HASH.0
            | Self::ZSET.0
            | Self::EXPIRED.0
            | Self::EVICTED.0
            | Self::STREAM.0
            | Self::MODULE.0,
    );

    /// The letters of the event classes, in the order Redis prints them.
    const CLASS_LETTERS: [(u8, NotifyFlags); 11] = [
        (b'g', Self::GENERIC),
        (b'$', Self::STRING),
        (b'l', Self::LIST),
        (b's', Self::SET),
        (b'h', Self::HASH),
        (b'z', Self::ZSET),
        (b'x', Self::EXPIRED),
        (b'e', Self::EVICTED),
        (b't', Self::STREAM),
        (b'd', Self::MODULE),
        (b'n', Self::NEW),
    ];

    /// Parses a `notify-keyspace-events` value (`CONFIG SET notify-keyspace-events KEA`):
    /// each character adds its class, `A` adds `g$lshzxetd`; the empty string turns
    /// notifications off.
    ///
    /// # Errors
    /// `INVALID_FLAGS` for any other character.
    pub fn parse(text: &[u8]) -> Result<NotifyFlags, &'static str> {
        text.iter().try_fold(NotifyFlags::NONE, |flags, &c| {
            let class = match c {
                b'A' => Self::ALL,
                b'K' => Self::KEYSPACE,
                b'E' => Self::KEYEVENT,
                b'm' => Self::KEY_MISS,
                _ => match Self::CLASS_LETTERS.iter().find(|(letter, _)| *letter == c) {
                    Some((_, class)) => *class,
                    None => return Err(INVALID_FLAGS),
                },
            };
            Ok(flags | class)
        })
    }

    /// Whether every class of `other` is in `self`.
    pub fn contains(self, other: NotifyFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether `self` and `other` share a class.
    pub(crate) fn intersects(self, other: NotifyFlags) -> bool {
        self.0 & other.0 != 0
    }

    /// The raw bits (Redis' `NOTIFY_*` values).
    pub fn bits(self) -> u32 {
        self.0
    }

    /// Flags from [`NotifyFlags::bits`] (unknown bits are kept and never match a class).
    pub const fn from_bits(bits: u32) -> NotifyFlags {
        NotifyFlags(bits)
    }
}

impl std::ops::BitOr for NotifyFlags {
    type Output = NotifyFlags;
    fn bitor(self, rhs: NotifyFlags) -> NotifyFlags {
        NotifyFlags(self.0 | rhs.0)
    }
}

/// Redis' normalized form, as `CONFIG GET notify-keyspace-events` prints it: `A` when all
/// of `A`'s classes are on (and then, as Redis 7.0 does, no `n`), else the class letters
/// in `g$lshzxetdn` order; then `K`, `E`, `m`.
impl fmt::Display for NotifyFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        if self.contains(Self::ALL) {
            out.push('A');
        } else {
            let letters = Self::CLASS_LETTERS.iter().filter(|(_, class)| self.contains(*class));
            out.extend(letters.map(|(letter, _)| char::from(*letter)));
        }
        let tail = [('K', Self::KEYSPACE), ('E', Self::KEYEVENT), ('m', Self::KEY_MISS)];
        out.extend(tail.iter().filter(|(_, class)| self.contains(*class)).map(|(letter, _)| *letter));
        f.write_str(&out)
    }
}

/// What a command's (or EXEC's, or script's) writes did, counted whether or not its
/// [`Event`]s are recorded (see [`super::Engine::set_events`]): what a server needs for its
/// statistics and its maintenance without keyspace notifications on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Effects {
    /// Changes, as Redis' `dirty` counter: every event but `expired`, `new`, `rename_from`
    /// and `move_from`.
    pub changes: u64,
    /// Keys found expired (their `expired` events).
    pub expired: u64,
    /// Whether a committed batch deleted or replaced a collection's metadata record, or an
    /// expired collection was deleted: its elements are garbage for [`crate::gc`].
    pub garbage: bool,
    /// Whether a key may have gained a TTL it did not have (EXPIRE, RENAME, RESTORE, COPY,
    /// MOVE).
    pub ttl_set: bool,
}

impl Effects {
    /// Counts an event named `name` (its class does not matter).
    pub(crate) fn count(&mut self, name: &str) {
        match name {
            "expired" => self.expired += 1,
            "new" | "rename_from" | "move_from" => {}
            _ => self.changes += 1,
        }
        if matches!(name, "expire" | "rename_to" | "restore" | "copy_to" | "move_to") {
            self.ttl_set = true;
        }
    }

    /// Adds `other`'s counts and flags to these.
    pub(crate) fn add(&mut self, other: Effects) {
        self.changes += other.changes;
        self.expired += other.expired;
        self.garbage |= other.garbage;
        self.ttl_set |= other.ttl_set;
    }
}

/// One keyspace event: Redis' `notifyKeyspaceEvent(class, name, key, db)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Event {
    /// Its class (one [`NotifyFlags`] bit): the flag that must be on to publish it.
    pub(crate) class: NotifyFlags,
    /// The event name (`set`, `lpush`, `del`, `expired`, `rename_from`, …).
    pub name: &'static str,
    /// The database of the key.
    pub db: usize,
    /// The user key.
    pub key: Bytes,
}

impl Event {
    /// The `expired` event of `key` in database `db`: what a server publishes for each key
    /// [`crate::gc::expire_step`] deleted ([`crate::gc::SweepStep::expired`]).
    pub fn expired(db: usize, key: Bytes) -> Event {
        Event { class: NotifyFlags::EXPIRED, name: "expired", db, key }
    }

    /// `key` of database `db` was evicted for `maxmemory` (class `e`).
    pub fn evicted(db: usize, key: Bytes) -> Event {
        Event { class: NotifyFlags::EVICTED, name: "evicted", db, key }
    }

    /// The `(channel, message)` pairs Redis publishes for this event under `flags`, in
    /// Redis' order: none unless `flags` has the event's class; then
    /// `__keyspace@<db>__:<key>` with the event name if `K` is on, and
    /// `__keyevent@<db>__:<event>` with the key if `E` is on.
    pub fn messages(&self, flags: NotifyFlags) -> Vec<(Bytes, Bytes)> {
        let mut out = Vec::new();
        if !flags.intersects(self.class) {
            return out;
        }
        let name = Bytes::from_static(self.name.as_bytes());
        if flags.contains(NotifyFlags::KEYSPACE) {
            out.push((self.channel("__keyspace@", &self.key), name.clone()));
        }
        if flags.contains(NotifyFlags::KEYEVENT) {
            out.push((self.channel("__keyevent@", &name), self.key.clone()));
        }
        out
    }

    /// `<prefix><db>__:<tail>`.
    fn channel(&self, prefix: &str, tail: &[u8]) -> Bytes {
        let db = self.db.to_string();
        let mut channel = BytesMut::with_capacity(prefix.len() + db.len() + 3 + tail.len());
        channel.put_slice(prefix.as_bytes());
        channel.put_slice(db.as_bytes());
        channel.put_slice(b"__:");
        channel.put_slice(tail);
        channel.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print_like_redis() {
        // Pairs checked with redis-server 7.0.15: CONFIG SET, then CONFIG GET.
        for (set, get) in [
            ("KEA", "AKE"),
            ("KEAnm", "AKEm"),
            ("Kx$", "$xK"),
            ("", ""),
            ("Eg$lshzxetd", "AE"),
            ("nE", "nE"),
            ("mK", "Km"),
            ("AAg", "A"),
        ] {
            let flags = NotifyFlags::parse(set.as_bytes()).unwrap();
            assert_eq!(flags.to_string(), get, "{set}");
        }
        assert_eq!(NotifyFlags::parse(b"KQ"), Err(INVALID_FLAGS));
        assert_eq!(NotifyFlags::parse(b"a"), Err(INVALID_FLAGS));
    }

    #[test]
    fn messages_follow_flags() {
        let event = Event { class: NotifyFlags::LIST, name: "lpush", db: 3, key: Bytes::from_static(b"k") };
        let ke = NotifyFlags::parse(b"KEl").unwrap();
        assert_eq!(
            event.messages(ke),
            vec![
                (Bytes::from_static(b"__keyspace@3__:k"), Bytes::from_static(b"lpush")),
                (Bytes::from_static(b"__keyevent@3__:lpush"), Bytes::from_static(b"k")),
            ]
        );
        assert!(event.messages(NotifyFlags::parse(b"KEg").unwrap()).is_empty());
        assert!(event.messages(NotifyFlags::parse(b"A").unwrap()).is_empty(), "A without K or E");
        assert_eq!(event.messages(NotifyFlags::parse(b"El").unwrap()).len(), 1);
        let miss = Event { class: NotifyFlags::KEY_MISS, ..event };
        assert!(miss.messages(NotifyFlags::parse(b"KEA").unwrap()).is_empty(), "m is not in A");
    }
}
