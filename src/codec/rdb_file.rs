//! The RDB file (`dump.rdb`, and a full sync's payload): a header, auxiliary fields, function
//! libraries, then each database's keys, an end mark and a CRC-64. Objects are those of
//! [`super::rdb`]; [`RdbFileWriter`] appends a file to a caller's buffer piece by piece and
//! [`RdbFileReader`] takes one in as it arrives (or from a caller's reader:
//! [`RdbFileReader::read_from`]); neither opens a file.
//!
//! ```text
//! file    = "REDIS" version(4 ASCII digits) item* 0xFF crc64(u64 LE, 0 when not computed)
//! length, string, object: as in a DUMP payload (super::rdb), strings maybe LZF-compressed
//! ```
//!
//! | opcode | name | then | written by [`RdbFileWriter`] |
//! |---|---|---|---|
//! | 250 | AUX | name string, value string | `redis-ver`, `redis-bits`, `ctime`, `used-mem`, (`repl-stream-db`, `repl-id`, `repl-offset`), `aof-base` |
//! | 245 | FUNCTION2 | the library's code, a string | one per library, before the databases |
//! | 246 | FUNCTION | name, engine, has-description length, (description), code: 7.0 release candidates | no (read as `#!engine name=name\ncode`) |
//! | 247 | MODULE_AUX | module id length, … | no (refused, naming the module) |
//! | 254 | SELECTDB | database number, a length | before each non-empty database |
//! | 251 | RESIZEDB | keys, keys with a TTL, two lengths | after each SELECTDB |
//! | 244 | SLOT_INFO | slot, its keys, its keys with a TTL: three lengths (written by newer servers; read in any version) | no (skipped) |
//! | 252 | EXPIRETIME_MS | absolute unix ms, u64 LE | before a key with a TTL |
//! | 253 | EXPIRETIME | absolute unix seconds, i32 LE (versions before 3) | no |
//! | 248 | IDLE | LRU idle seconds, a length | no |
//! | 249 | FREQ | LFU counter, one byte | no |
//! | 0–19 | an object type | key string, object | every key |
//! | 255 | EOF | the CRC-64 of everything before it (versions 5 and up) | last |
//!
//! The reader accepts versions 1 to [`RDB_VERSION`], skips empty collections (as Redis does),
//! refuses module values, and reports anything else wrong as [`Error::RdbFile`] with the byte
//! offset where it found it; no input makes it panic.

use bytes::Bytes;

use super::rdb::{CRC64, In, RDB_VERSION, RdbValue, put_len, put_object, put_string, read_object_of};
use crate::error::{Error, Result};

const OPCODE_SLOT_INFO: u8 = 244;
const OPCODE_FUNCTION2: u8 = 245;
const OPCODE_FUNCTION: u8 = 246;
const OPCODE_MODULE_AUX: u8 = 247;
const OPCODE_IDLE: u8 = 248;
const OPCODE_FREQ: u8 = 249;
const OPCODE_AUX: u8 = 250;
const OPCODE_RESIZEDB: u8 = 251;
const OPCODE_EXPIRETIME_MS: u8 = 252;
const OPCODE_EXPIRETIME: u8 = 253;
const OPCODE_SELECTDB: u8 = 254;
const OPCODE_EOF: u8 = 255;
/// The object types of module values (`RDB_TYPE_MODULE`, `RDB_TYPE_MODULE_2`).
const TYPE_MODULE: u8 = 6;
const TYPE_MODULE_2: u8 = 7;

/// How [`RdbFileWriter`] writes (Redis' `rdbcompression` and `rdbchecksum`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RdbFileOptions {
    /// LZF-compress strings over 20 bytes when that saves space.
    pub compression: bool,
    /// Write the CRC-64 at the end (otherwise 0, which readers take as "not computed").
    pub checksum: bool,
}

impl Default for RdbFileOptions {
    fn default() -> Self {
        RdbFileOptions { compression: true, checksum: true }
    }
}

/// The auxiliary fields at the head of a file, as Redis 7.0 writes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdbHeader {
    /// `redis-ver`.
    pub redis_ver: String,
    /// `ctime`: when the file was made, unix seconds.
    pub ctime: u64,
    /// `used-mem`: bytes the data took.
    pub used_mem: u64,
    /// `repl-stream-db`, `repl-id` and `repl-offset`, for a replica's full sync.
    pub replication: Option<RdbReplication>,
}

/// The replication fields of an [`RdbHeader`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdbReplication {
    /// The database the replication stream selected last (`repl-stream-db`).
    pub stream_db: u64,
    /// The primary's replication id (40 hex digits).
    pub id: String,
    /// The replication offset the file stands for.
    pub offset: u64,
}

/// Writes an RDB file into a caller's buffer, one call per part, keeping the CRC-64 of all
/// it wrote; the caller may send or drop the buffer's bytes between calls. Call
/// [`RdbFileWriter::header`] first, then any [`RdbFileWriter::function`]s, then for each
/// non-empty database [`RdbFileWriter::select_db`] and its [`RdbFileWriter::entry`]s, then
/// [`RdbFileWriter::finish`].
pub struct RdbFileWriter {
    options: RdbFileOptions,
    crc: crc::Digest<'static, u64, crc::Table<16>>,
}

impl std::fmt::Debug for RdbFileWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RdbFileWriter").field("options", &self.options).finish_non_exhaustive()
    }
}

impl RdbFileWriter {
    /// A writer with these options.
    pub fn new(options: RdbFileOptions) -> Self {
        RdbFileWriter { options, crc: CRC64.digest() }
    }

    /// Appends what `write` puts in `out` to the checksum.
    fn part(&mut self, out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>, bool)) {
        let start = out.len();
        write(out, self.options.compression);
        self.crc.update(&out[start..]);
    }

    /// `REDIS0010` and the auxiliary fields, in Redis 7.0's order.
    pub fn header(&mut self, out: &mut Vec<u8>, header: &RdbHeader) {
        self.part(out, |out, _| out.extend_from_slice(format!("REDIS{RDB_VERSION:04}").as_bytes()));
        self.aux(out, b"redis-ver", header.redis_ver.as_bytes());
        self.aux(out, b"redis-bits", b"64");
        self.aux(out, b"ctime", header.ctime.to_string().as_bytes());
        self.aux(out, b"used-mem", header.used_mem.to_string().as_bytes());
        if let Some(repl) = &header.replication {
            self.aux(out, b"repl-stream-db", repl.stream_db.to_string().as_bytes());
            self.aux(out, b"repl-id", repl.id.as_bytes());
            self.aux(out, b"repl-offset", repl.offset.to_string().as_bytes());
        }
        self.aux(out, b"aof-base", b"0");
    }

    /// One auxiliary field.
    pub(crate) fn aux(&mut self, out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
        self.part(out, |out, compress| {
            out.push(OPCODE_AUX);
            put_string(out, name, compress);
            put_string(out, value, compress);
        });
    }

    /// One function library's code.
    pub fn function(&mut self, out: &mut Vec<u8>, code: &[u8]) {
        self.part(out, |out, compress| {
            out.push(OPCODE_FUNCTION2);
            put_string(out, code, compress);
        });
    }

    /// Starts database `db`, which holds `keys` keys of which `expires` have a TTL.
    pub fn select_db(&mut self, out: &mut Vec<u8>, db: u64, keys: u64, expires: u64) {
        self.part(out, |out, _| {
            out.push(OPCODE_SELECTDB);
            put_len(out, db);
            out.push(OPCODE_RESIZEDB);
            put_len(out, keys);
            put_len(out, expires);
        });
    }

    /// One key of the current database, expiring at `expire_at_ms` (unix ms) if set.
    pub fn entry(&mut self, out: &mut Vec<u8>, key: &[u8], value: &RdbValue, expire_at_ms: Option<u64>) {
        self.part(out, |out, compress| {
            if let Some(at) = expire_at_ms {
                out.push(OPCODE_EXPIRETIME_MS);
                out.extend_from_slice(&at.to_le_bytes());
            }
            put_object(out, Some(key), value, compress);
        });
    }

    /// The end mark and the checksum; the writer is spent.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        self.part(out, |out, _| out.push(OPCODE_EOF));
        let crc = std::mem::replace(&mut self.crc, CRC64.digest()).finalize();
        out.extend_from_slice(&if self.options.checksum { crc } else { 0 }.to_le_bytes());
    }
}

/// One part of an RDB file, as [`RdbFileReader`] yields it.
#[derive(Debug, Clone, PartialEq)]
pub enum RdbItem {
    /// An auxiliary field (`redis-ver`, `repl-id`, …).
    Aux {
        /// Its name.
        name: Bytes,
        /// Its value.
        value: Bytes,
    },
    /// The keys that follow belong to this database.
    SelectDb(u64),
    /// How many keys (and keys with a TTL) the current database holds.
    ResizeDb {
        /// Keys.
        keys: u64,
        /// Keys with a TTL.
        expires: u64,
    },
    /// One key.
    Entry(RdbEntry),
    /// One function library's code (`#!lua name=…` and the rest).
    Function(Bytes),
    /// The end of the file; nothing follows.
    End {
        /// Whether the file carried a checksum (and it matched); `false` for a 0 checksum
        /// or a version before 5.
        checksum_verified: bool,
    },
}

/// One key of an RDB file.
#[derive(Debug, Clone, PartialEq)]
pub struct RdbEntry {
    /// Its database.
    pub db: u64,
    /// Its name.
    pub key: Bytes,
    /// Its value.
    pub value: RdbValue,
    /// When it expires, absolute unix milliseconds (it may already be past).
    pub expire_at_ms: Option<i64>,
    /// LRU idle seconds, when the file says.
    pub idle: Option<u64>,
    /// LFU counter, when the file says.
    pub freq: Option<u8>,
}

/// Where the reader is in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Header,
    Body,
    Checksum,
    Done,
}

/// Reads an RDB file as its bytes arrive: [`RdbFileReader::feed`] bytes,
/// [`RdbFileReader::finish`] once there are no more, and take [`RdbItem`]s with
/// [`RdbFileReader::next_item`] in between. It holds at most one item's bytes and what was
/// fed past them.
pub struct RdbFileReader {
    buf: Vec<u8>,
    /// Bytes of `buf` already read.
    pos: usize,
    /// The file offset of `buf[0]`.
    base: u64,
    phase: Phase,
    version: u16,
    db: u64,
    expire_at_ms: Option<i64>,
    idle: Option<u64>,
    freq: Option<u8>,
    crc: crc::Digest<'static, u64, crc::Table<16>>,
    /// No more bytes will come.
    finished: bool,
    /// After a read that ran out of bytes, how many unread bytes to wait for before trying
    /// again (twice as many: a large item is tried a logarithmic number of times).
    wait_for: usize,
    empty_keys_skipped: u64,
}

impl std::fmt::Debug for RdbFileReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RdbFileReader")
            .field("offset", &self.offset())
            .field("phase", &self.phase)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl Default for RdbFileReader {
    fn default() -> Self {
        Self::new()
    }
}

/// What one step of the reader did.
enum Step {
    Item(RdbItem),
    /// Read an opcode that yields nothing by itself (EXPIRETIME, IDLE, FREQ, SLOT_INFO, an
    /// empty key).
    Nothing,
}

impl RdbFileReader {
    /// A reader at the start of a file.
    pub fn new() -> Self {
        RdbFileReader {
            buf: Vec::new(),
            pos: 0,
            base: 0,
            phase: Phase::Header,
            version: 0,
            db: 0,
            expire_at_ms: None,
            idle: None,
            freq: None,
            crc: CRC64.digest(),
            finished: false,
            wait_for: 0,
            empty_keys_skipped: 0,
        }
    }

    /// Every item of a whole file in memory.
    ///
    /// # Errors
    /// As [`RdbFileReader::next_item`].
    pub fn read_all(file: &[u8]) -> Result<Vec<RdbItem>> {
        let mut reader = RdbFileReader::new();
        reader.feed(file);
        reader.finish();
        let mut items = Vec::new();
        while let Some(item) = reader.next_item()? {
            items.push(item);
        }
        Ok(items)
    }

    /// Reads a whole file from `input`, 64 KiB at a time, handing each item to `take`;
    /// returns the file's length. (The caller's reader does the I/O.)
    ///
    /// # Errors
    /// The file's error ([`RdbFileReader::next_item`]'s text, with its offset), a failed read
    /// (with the offset), or the first error of `take`.
    pub fn read_from(
        input: &mut dyn std::io::Read,
        take: &mut dyn FnMut(RdbItem) -> std::result::Result<(), String>,
    ) -> std::result::Result<u64, String> {
        let mut reader = RdbFileReader::new();
        let mut chunk = vec![0; 64 << 10];
        loop {
            let n = match input.read(&mut chunk) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("cannot read at byte {}: {e}", reader.offset())),
            };
            if n == 0 {
                reader.finish();
            } else {
                reader.feed(&chunk[..n]);
            }
            while let Some(item) = reader.next_item().map_err(|e| format!("bad RDB file: {e}"))? {
                take(item)?;
            }
            if reader.is_done() || n == 0 {
                return Ok(reader.offset());
            }
        }
    }

    /// Adds the file's next bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.base += self.pos as u64;
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Says that no more bytes will come: a file that stops before its end is an error.
    pub fn finish(&mut self) {
        self.finished = true;
    }

    /// The file offset of the next byte to read.
    pub(crate) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// The RDB version in the header (0 before it is read).
    pub fn version(&self) -> u16 {
        self.version
    }

    /// Empty lists, sets, sorted sets and hashes skipped so far.
    pub fn empty_keys_skipped(&self) -> u64 {
        self.empty_keys_skipped
    }

    /// Whether the end and the checksum have been read.
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// The next item; `None` when more bytes are needed (or after the end).
    ///
    /// # Errors
    /// [`Error::RdbFile`] naming the offset: a bad signature or version, an unknown opcode
    /// or type, a module value, a corrupt object, a checksum mismatch, or (after
    /// [`RdbFileReader::finish`]) a file that stops early.
    pub fn next_item(&mut self) -> Result<Option<RdbItem>> {
        loop {
            if self.phase == Phase::Done {
                return Ok(None);
            }
            let available = self.buf.len() - self.pos;
            if !self.finished && available < self.wait_for {
                return Ok(None);
            }
            // `step` updates the reader's state while it borrows the bytes.
            let buf = std::mem::take(&mut self.buf);
            let mut r = In::new(&buf[self.pos..]);
            let stepped = self.step(&mut r);
            let used = available - r.buf.len();
            let starved = r.starved;
            self.buf = buf;
            match stepped {
                Ok(step) => {
                    if self.phase != Phase::Done {
                        self.crc.update(&self.buf[self.pos..self.pos + used]);
                    }
                    self.pos += used;
                    self.wait_for = 0;
                    if let Step::Item(item) = step {
                        return Ok(Some(item));
                    }
                }
                Err(_) if starved && !self.finished => {
                    self.wait_for = available.saturating_mul(2).max(available + 1);
                    return Ok(None);
                }
                Err(e) => {
                    let what = match e {
                        _ if starved => "unexpected end of file".to_string(),
                        Error::DumpFormat(what) => format!("bad object: {what}"),
                        Error::RdbFile { what, .. } => what,
                        other => other.to_string(),
                    };
                    return Err(Error::RdbFile { what, offset: self.offset() + used as u64 });
                }
            }
        }
    }

    /// Reads one unit at the start of `r`: the header, an opcode with its operands, a key,
    /// or the checksum.
    fn step(&mut self, r: &mut In<'_>) -> Result<Step> {
        let bad = |what: String| Error::RdbFile { what, offset: 0 };
        match self.phase {
            Phase::Header => {
                let magic = r.take(9)?;
                let version = std::str::from_utf8(&magic[5..]).ok().and_then(|v| v.parse::<u16>().ok());
                if &magic[..5] != b"REDIS" {
                    return Err(bad("not an RDB file (no REDIS signature)".into()));
                }
                match version {
                    Some(v @ 1..=RDB_VERSION) => self.version = v,
                    _ => {
                        return Err(bad(format!(
                            "RDB format version {} is not supported (1 to {RDB_VERSION})",
                            String::from_utf8_lossy(&magic[5..])
                        )));
                    }
                }
                self.phase = Phase::Body;
                return Ok(Step::Nothing);
            }
            Phase::Checksum => {
                let stored = u64::from_le_bytes(r.take(8)?.try_into().unwrap_or_default());
                let computed = std::mem::replace(&mut self.crc, CRC64.digest()).finalize();
                if stored != 0 && stored != computed {
                    return Err(bad(format!(
                        "RDB checksum mismatch: the file says {stored:016x}, its bytes give {computed:016x}"
                    )));
                }
                self.phase = Phase::Done;
                return Ok(Step::Item(RdbItem::End { checksum_verified: stored != 0 }));
            }
            Phase::Body | Phase::Done => {}
        }
        let opcode = r.u8()?;
        Ok(match opcode {
            OPCODE_EOF => {
                if self.version >= 5 {
                    self.phase = Phase::Checksum;
                    Step::Nothing
                } else {
                    self.phase = Phase::Done;
                    Step::Item(RdbItem::End { checksum_verified: false })
                }
            }
            OPCODE_AUX => Step::Item(RdbItem::Aux { name: r.string()?, value: r.string()? }),
            OPCODE_SELECTDB => {
                self.db = r.len()?;
                Step::Item(RdbItem::SelectDb(self.db))
            }
            OPCODE_RESIZEDB => Step::Item(RdbItem::ResizeDb { keys: r.len()?, expires: r.len()? }),
            OPCODE_SLOT_INFO => {
                for _ in 0..3 {
                    r.len()?; // slot, its keys, its keys with a TTL
                }
                Step::Nothing
            }
            OPCODE_EXPIRETIME_MS => {
                self.expire_at_ms = Some(i64::from_le_bytes(r.take(8)?.try_into().unwrap_or_default()));
                Step::Nothing
            }
            OPCODE_EXPIRETIME => {
                let secs = i32::from_le_bytes(r.take(4)?.try_into().unwrap_or_default());
                self.expire_at_ms = Some(i64::from(secs) * 1000);
                Step::Nothing
            }
            OPCODE_IDLE => {
                self.idle = Some(r.len()?);
                Step::Nothing
            }
            OPCODE_FREQ => {
                self.freq = Some(r.u8()?);
                Step::Nothing
            }
            OPCODE_FUNCTION2 => Step::Item(RdbItem::Function(r.string()?)),
            OPCODE_FUNCTION => {
                let (name, engine) = (r.string()?, r.string()?);
                if r.len()? != 0 {
                    r.string()?;
                }
                let code = r.string()?;
                let mut full = format!(
                    "#!{} name={}\n",
                    String::from_utf8_lossy(&engine),
                    String::from_utf8_lossy(&name)
                )
                .into_bytes();
                full.extend_from_slice(&code);
                Step::Item(RdbItem::Function(full.into()))
            }
            OPCODE_MODULE_AUX => {
                let id = r.len()?;
                return Err(bad(format!(
                    "module auxiliary data of module '{}' cannot be loaded",
                    module_name(id)
                )));
            }
            TYPE_MODULE | TYPE_MODULE_2 => {
                let key = r.string()?;
                let id = r.len()?;
                return Err(bad(format!(
                    "key '{}' holds a value of module '{}', which cannot be loaded",
                    String::from_utf8_lossy(&key),
                    module_name(id)
                )));
            }
            0..=19 => {
                let key = r.string()?;
                let value = read_object_of(opcode, r)?;
                let entry = RdbEntry {
                    db: self.db,
                    key,
                    value,
                    expire_at_ms: self.expire_at_ms.take(),
                    idle: self.idle.take(),
                    freq: self.freq.take(),
                };
                if entry.value.is_empty_collection() {
                    self.empty_keys_skipped += 1;
                    Step::Nothing
                } else {
                    Step::Item(RdbItem::Entry(entry))
                }
            }
            other => return Err(bad(format!("unknown opcode or object type {other}"))),
        })
    }
}

/// A module type's name from its 64-bit id: 9 characters of 6 bits above a 10-bit version.
fn module_name(id: u64) -> String {
    const CHARSET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut name = [0u8; 9];
    let mut rest = id >> 10;
    for c in name.iter_mut().rev() {
        *c = CHARSET[(rest & 63) as usize];
        rest >>= 6;
    }
    String::from_utf8_lossy(&name).into_owned()
}
