//! A `dump.rdb` into a new store directory ([`import`]) and a store to a `dump.rdb`
//! ([`export`]), streaming: memory holds 64 KiB of the file and the largest key (an export)
//! or one batch of keys (about 4 MiB, an import).
//! Both go through the engine ([`rediskv::server::save_rdb`], [`rediskv::server::RdbLoader`]),
//! so every layout works; the function libraries and the SWAPDB mapping travel in the
//! server's own files beside the data ([`rediskv_engine::server_files`]).

use std::io::{Read, Write};
use std::path::Path;

use rediskv::server::{RdbCounts, RdbLoader, RdbSave, save_rdb};
use rediskv::{DATABASES, Engine};
use rediskv::{KeyLayout, RdbFileOptions, RdbFileReader, RdbHeader};
use rediskv_engine::server_files;

use crate::record::Error;
use crate::store::{self, Store};

/// Counts the bytes read through it.
struct Counting<'a> {
    inner: &'a mut dyn Read,
    read: u64,
    progress: &'a mut dyn FnMut(u64),
}

impl Read for Counting<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        (self.progress)(self.read);
        Ok(n)
    }
}

/// Loads the RDB file `input` into a new store of `engine` with `layout` in `dir` (which
/// must hold no store; it is created if missing), calling `progress(bytes read)` as it goes.
/// On any error the directory is left as it was found: nothing half loaded.
///
/// # Errors
/// A store in `dir` already, the file's error (naming its offset), or the store's.
pub fn import(
    input: &mut dyn Read,
    engine: &str,
    dir: &Path,
    layout: &KeyLayout,
    progress: &mut dyn FnMut(u64),
) -> Result<RdbCounts, Error> {
    if store::stored_layout(engine, dir)?.is_some() {
        return Err(format!("{} holds a store already: import writes a new one", dir.display()));
    }
    let existed = dir.exists();
    let empty = !existed || std::fs::read_dir(dir).map_err(|e| e.to_string())?.next().is_none();
    if !empty {
        return Err(format!("{} is not empty: import writes into a new directory", dir.display()));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let loaded = (|| {
        let target = store::open(engine, dir, layout)?;
        let counts = load_into(&target, dir, layout, input, progress)?;
        target.flush().map_err(|e| e.to_string())?;
        Ok(counts)
    })();
    if loaded.is_err() {
        // The directory was empty or missing: take back everything in it.
        let _ = if existed { clear(dir) } else { std::fs::remove_dir_all(dir) };
    }
    loaded
}

/// Removes everything in `dir`.
fn clear(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)?.flatten() {
        let path = entry.path();
        if path.is_dir() { std::fs::remove_dir_all(path)? } else { std::fs::remove_file(path)? }
    }
    Ok(())
}

/// The keys of `input` into `target`, the libraries into its server file.
fn load_into(
    target: &Store,
    dir: &Path,
    layout: &KeyLayout,
    input: &mut dyn Read,
    progress: &mut dyn FnMut(u64),
) -> Result<RdbCounts, Error> {
    let engine = Engine::with_layout(target.clone(), layout.clone());
    let mut loader = RdbLoader::new(&engine);
    let mut counting = Counting { inner: input, read: 0, progress };
    let bytes = RdbFileReader::read_from(&mut counting, &mut |item| loader.take(item))?;
    let (mut counts, codes) = loader.finish()?;
    counts.bytes = bytes;
    if !codes.is_empty() {
        let codes: Vec<String> = codes.iter().map(|c| String::from_utf8_lossy(c).into_owned()).collect();
        server_files::save_functions(dir, &codes, None, true)
            .map_err(|e| format!("cannot save the functions: {e}"))?;
    }
    Ok(counts)
}

/// Writes the store of `engine` in `dir` (its default namespace, with the SWAPDB mapping
/// and function libraries the server saved beside it) as an RDB file to `out`, calling
/// `progress(keys written, keys in the store)` as it goes.
///
/// # Errors
/// No store in `dir`, or the store's or the output's error.
pub fn export(
    engine: &str,
    dir: &Path,
    out: &mut dyn Write,
    options: RdbFileOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<RdbCounts, Error> {
    let (source, layout) = store::open_existing(engine, dir)?;
    let reader = Engine::with_layout(source.clone(), layout.clone());
    // The server keeps the default namespace's mapping under that namespace's name.
    let ns = String::from_utf8_lossy(rediskv::DEFAULT_NAMESPACE);
    if let Some(slots) = server_files::load_db_slots(dir, &ns) {
        reader.restore_db_slots(&slots);
    }
    let sizes = (0..DATABASES)
        .map(|i| reader.key_count(i).map(|c| c.map_or((0, 0), |c| (c.keys, c.expires))))
        .collect::<rediskv::Result<Vec<_>>>()
        .map_err(|e| e.to_string())?;
    let total = sizes.iter().map(|s| s.0).sum();
    let functions = server_files::load_functions(dir).unwrap_or_default();
    let ctime = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let used_mem = rediskv::ColumnFamily::ALL.iter().map(|cf| source.disk_bytes(*cf)).sum();
    let save = RdbSave {
        header: RdbHeader { redis_ver: "7.0.15".into(), ctime, used_mem, replication: None },
        functions: &functions,
        databases: DATABASES,
        sizes: &sizes,
        options,
    };
    let mut emit = |bytes: &[u8]| out.write_all(bytes).map_err(|e| format!("cannot write: {e}"));
    let counts = save_rdb(&reader, &save, &mut emit, &mut |n| progress(n, total))?;
    out.flush().map_err(|e| format!("cannot write: {e}"))?;
    Ok(counts)
}
