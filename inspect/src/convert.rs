//! Rewriting a store in another layout, key by key through the engine: each live key of each
//! database is read with DUMP and PEXPIRETIME from an engine on the source's layout and written
//! with RESTORE … ABSTTL by an engine on the target's, so every type the engine knows converts,
//! each key expires at the same millisecond in both, and a key the target's system cannot hold
//! is reported, not half-written. Memory is bounded by the
//! largest key (and a SCAN page of 1,000 keys), whatever the store's size.

use std::collections::BTreeMap;

use rediskv::{ColumnFamily, KeyLayout};
use rediskv::{Direction, KvBackend};
use rediskv::{Engine, Reply};

use crate::record::Error;
use crate::store::{Store, database_of, namespaces};

/// What [`convert`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Keys written to the target.
    pub converted: u64,
    /// Keys left out, with the reason (the first 100; [`Report::skipped_count`] counts all).
    pub skipped: Vec<(String, String)>,
    /// How many keys were left out.
    pub skipped_count: u64,
}

impl Report {
    fn skip(&mut self, key: &[u8], reason: String) {
        self.skipped_count += 1;
        if self.skipped.len() < 100 {
            self.skipped.push((String::from_utf8_lossy(key).into_owned(), reason));
        }
    }
}

/// Metadata records in `store` (what [`convert`]'s progress counts up to; expired keys are
/// among them and are not converted).
///
/// # Errors
/// The store's errors.
pub fn count_keys(store: &dyn KvBackend) -> Result<u64, Error> {
    let mut n = 0;
    for item in store
        .scan(ColumnFamily::Metadata, &rediskv::KeyRange::prefix(Vec::new()), Direction::Forward)
        .map_err(|e| e.to_string())?
    {
        item.map_err(|e| e.to_string())?;
        n += 1;
    }
    Ok(n)
}

/// Writes every live key of `source` (written with `source_layout`) into `target` with
/// `target_layout`: the same database, type, contents and TTL. Tenants (namespaces other than
/// the layout's own) keep their namespace when the target's system has namespaces; a key
/// the target cannot hold (a type its system has no id for, a tenant under NeoKV) is
/// reported in [`Report::skipped`]. `progress(done, total)` is called after every key.
///
/// # Errors
/// A store's error; what was written before it stays written.
pub fn convert(
    source: &Store,
    source_layout: &KeyLayout,
    target: &Store,
    target_layout: &KeyLayout,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Report, Error> {
    let total = count_keys(source.as_ref())?;
    let mut report = Report::default();
    let mut done = 0;
    let mut tenants: BTreeMap<Vec<u8>, Vec<usize>> = BTreeMap::new();
    for namespace in namespaces(source.as_ref(), source_layout)? {
        let (base, db) = database_of(source_layout, &namespace);
        tenants.entry(base).or_default().push(db);
    }
    // Database 0 may hold NeoKV strings of the first encoding without any metadata record.
    let home = tenants.entry(source_layout.namespace().to_vec()).or_default();
    if !home.contains(&0) {
        home.insert(0, 0);
    }
    let from_db = |base: &[u8], db: usize| {
        source_layout.clone().with_namespace(base).and_then(|l| l.for_database(db)).map_err(|e| e.to_string())
    };
    for (base, databases) in tenants {
        let from = source_layout.clone().with_namespace(&base).map_err(|e| e.to_string())?;
        let to = if base == source_layout.namespace() {
            Ok(target_layout.clone())
        } else if source_layout.kind() != target_layout.kind() {
            Err(format!("the {} layout cannot hold this tenant", target_layout.kind().name()))
        } else {
            target_layout.clone().with_namespace(&base).map_err(|e| e.to_string())
        };
        let reader = Engine::with_layout(source.clone(), from);
        let writer = to.as_ref().ok().map(|to| Engine::with_layout(target.clone(), to.clone()));
        for db in databases {
            let mut read = reader.session();
            expect_ok(reader.run(&mut read, &[b"SELECT".to_vec(), db.to_string().into_bytes()]))?;
            let mut write = writer.as_ref().map(Engine::session);
            if let (Some(engine), Some(session)) = (&writer, &mut write) {
                expect_ok(engine.run(session, &[b"SELECT".to_vec(), db.to_string().into_bytes()]))?;
            }
            let mut cursor = b"0".to_vec();
            loop {
                let (next, keys) =
                    scan_page(reader.run(&mut read, &[b"SCAN".as_slice(), &cursor, b"COUNT", b"1000"]))?;
                for key in keys {
                    done += 1;
                    move_key(&reader, &mut read, writer_of(&writer, &mut write, &to), &key, &mut report)?;
                    progress(done, total);
                }
                if next == b"0" {
                    break;
                }
                cursor = next;
            }
            // NeoKV strings still in its first encoding: SCAN does not list them.
            let db_layout = from_db(&base, db)?;
            for key in legacy_only_keys(source.as_ref(), &db_layout)? {
                done += 1;
                move_key(&reader, &mut read, writer_of(&writer, &mut write, &to), &key, &mut report)?;
                progress(done, total);
            }
        }
    }
    target.flush().map_err(|e| e.to_string())?;
    Ok(report)
}

/// Where a key goes: the target engine and session, or why the target cannot hold it.
type Destination<'a, C> = Result<(&'a Engine<C>, &'a mut rediskv::Session), &'a str>;

fn writer_of<'a, C: KvBackend>(
    writer: &'a Option<Engine<C>>,
    session: &'a mut Option<rediskv::Session>,
    to: &'a Result<KeyLayout, Error>,
) -> Destination<'a, C> {
    match (writer, session, to) {
        (Some(engine), Some(session), _) => Ok((engine, session)),
        (_, _, Err(reason)) => Err(reason),
        _ => Err("no target engine"),
    }
}

/// Copies `key` to its destination, or reports why it cannot go there.
fn move_key<B: KvBackend, C: KvBackend>(
    reader: &Engine<B>,
    read: &mut rediskv::Session,
    to: Destination<'_, C>,
    key: &[u8],
    report: &mut Report,
) -> Result<(), Error> {
    match to {
        Ok((engine, session)) => copy_key(reader, read, engine, session, key, report),
        Err(reason) => {
            report.skip(key, reason.to_string());
            Ok(())
        }
    }
}

/// The user keys of `layout`'s namespace that only a string of NeoKV's first encoding holds
/// (none for Kvrocks). The walk reads the namespace's subkeys; the keys come back in memory,
/// at most one per legacy record.
fn legacy_only_keys(store: &dyn KvBackend, layout: &KeyLayout) -> Result<Vec<Vec<u8>>, Error> {
    if layout.kind() != rediskv::LayoutKind::NeoKv {
        return Ok(Vec::new());
    }
    let mut keys = Vec::new();
    let scan = store.scan(ColumnFamily::Subkey, &layout.namespace_range(), Direction::Forward);
    for item in scan.map_err(|e| e.to_string())? {
        let (key, _) = item.map_err(|e| e.to_string())?;
        let Some(mkey) = layout.decode_legacy_string_key(&key) else { continue };
        if store.get(ColumnFamily::Metadata, mkey).map_err(|e| e.to_string())?.is_none()
            && let Ok(mk) = layout.decode_metadata_key(mkey)
        {
            keys.push(mk.user_key.to_vec());
        }
    }
    Ok(keys)
}

fn copy_key<B: KvBackend, C: KvBackend>(
    reader: &Engine<B>,
    read: &mut rediskv::Session,
    writer: &Engine<C>,
    write: &mut rediskv::Session,
    key: &[u8],
    report: &mut Report,
) -> Result<(), Error> {
    let expire_at = match reader.run(read, &[b"PEXPIRETIME".as_slice(), key]) {
        Reply::Integer(ms) => ms,
        other => return Err(format!("PEXPIRETIME {}: {other:?}", String::from_utf8_lossy(key))),
    };
    let payload = match reader.run(read, &[b"DUMP".as_slice(), key]) {
        Reply::Bulk(payload) => payload,
        // Expired since the SCAN page was read.
        Reply::Nil => return Ok(()),
        Reply::Error(e) => {
            report.skip(key, e);
            return Ok(());
        }
        other => return Err(format!("DUMP {}: {other:?}", String::from_utf8_lossy(key))),
    };
    // -1 (no expiry) is RESTORE's 0.
    let expire_at = expire_at.max(0).to_string();
    let restore = [b"RESTORE".as_slice(), key, expire_at.as_bytes(), &payload, b"REPLACE", b"ABSTTL"];
    match writer.run(write, &restore) {
        Reply::Status(_) => report.converted += 1,
        Reply::Error(e) => report.skip(key, e),
        other => return Err(format!("RESTORE {}: {other:?}", String::from_utf8_lossy(key))),
    }
    Ok(())
}

fn expect_ok(reply: Reply) -> Result<(), Error> {
    match reply {
        Reply::Error(e) => Err(e),
        _ => Ok(()),
    }
}

/// SCAN's `[cursor, [keys…]]`.
fn scan_page(reply: Reply) -> Result<(Vec<u8>, Vec<Vec<u8>>), Error> {
    let Reply::Array(mut parts) = reply else { return Err(format!("SCAN answered {reply:?}")) };
    let (Some(Reply::Array(keys)), Some(Reply::Bulk(cursor))) = (parts.pop(), parts.pop()) else {
        return Err("SCAN answered an unexpected shape".into());
    };
    let keys = keys.into_iter().filter_map(|k| if let Reply::Bulk(k) = k { Some(k.to_vec()) } else { None });
    Ok((cursor.to_vec(), keys.collect()))
}
