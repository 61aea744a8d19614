//! Stores on disk: opened with the layout their manifest records, and walked record by record.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use rediskv::{ColumnFamily, KeyLayout, KeyRange, LayoutKind, RedisType, Version};
use rediskv::{Direction, KvBackend};
use rediskv_engine::{DiskBackend, Options, Sync};

use crate::record::{self, Error};

/// A store on disk, as the engine sees it.
pub type Store = Arc<dyn DiskBackend + Send + std::marker::Sync>;

/// The disk engines this build opens.
pub const ENGINES: &[&str] = &[
    "fjall",
    #[cfg(feature = "rocksdb")]
    "rocksdb",
];

/// The layout the store of `engine` in `dir` records (`None`: no store there yet).
///
/// # Errors
/// An engine this build lacks, or the engine's error.
pub fn stored_layout(engine: &str, dir: &Path) -> Result<Option<KeyLayout>, Error> {
    match engine {
        "fjall" => rediskv_fjall::stored_layout(dir).map_err(|e| e.to_string()),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => rediskv_rocksdb::stored_layout(dir).map_err(|e| e.to_string()),
        other => Err(format!("unknown engine '{other}' (this build has: {})", ENGINES.join(", "))),
    }
}

/// Opens (or creates) the store of `engine` in `dir` with `layout`, syncing only when asked
/// ([`DiskBackend::flush`]): a tool's writes are made durable once, at the end.
///
/// # Errors
/// An engine this build lacks, or the engine's refusal (another layout: the message names both).
pub fn open(engine: &str, dir: &Path, layout: &KeyLayout) -> Result<Store, Error> {
    let options = Options { sync: Sync::No, layout: layout.clone(), ..Options::default() };
    match engine {
        "fjall" => Ok(Arc::new(rediskv_fjall::open(dir, options).map_err(|e| e.to_string())?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Arc::new(rediskv_rocksdb::open(dir, options).map_err(|e| e.to_string())?)),
        other => Err(format!("unknown engine '{other}' (this build has: {})", ENGINES.join(", "))),
    }
}

/// Opens an existing store with the layout it records.
///
/// # Errors
/// No store in `dir`, or as [`open`].
pub fn open_existing(engine: &str, dir: &Path) -> Result<(Store, KeyLayout), Error> {
    let layout =
        stored_layout(engine, dir)?.ok_or_else(|| format!("{}: no {engine} store there", dir.display()))?;
    Ok((open(engine, dir, &layout)?, layout))
}

/// Which records [`dump`] prints.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only records of keys of this type (the owner's type for subkeys).
    pub ty: Option<RedisType>,
    /// Only records of this Redis key.
    pub key: Option<Vec<u8>>,
    /// Only this column family.
    pub cf: Option<ColumnFamily>,
}

/// Writes every record of `store` that `filter` keeps to `out`, one JSON object per line
/// (records that do not decode as `{"cf", "raw_key", "raw_value", "error"}`), and returns
/// how many it wrote. A subkey's owner type comes from its metadata record (one read per
/// owner); TiTea's element records name no key, so under TiTea the metadata records are
/// read first into a map from object id to key and type (memory: one entry per collection).
///
/// # Errors
/// The store's errors, or `out`'s.
pub fn dump(
    store: &dyn KvBackend,
    layout: &KeyLayout,
    filter: &Filter,
    out: &mut dyn Write,
) -> Result<u64, Error> {
    let mut written = 0;
    let everything = KeyRange::prefix(Vec::new());
    let titea =
        if layout.kind() == LayoutKind::TiTea { titea_owners(store, layout)? } else { HashMap::new() };
    for cf in ColumnFamily::ALL {
        if filter.cf.is_some_and(|only| only != cf) {
            continue;
        }
        // The owner whose type was read last: records of one key are adjacent.
        let mut owner: Option<(Vec<u8>, Option<RedisType>)> = None;
        for item in store.scan(cf, &everything, Direction::Forward).map_err(|e| e.to_string())? {
            let (key, value) = item.map_err(|e| e.to_string())?;
            let (user_key, ty) = match titea_owner(layout, cf, &key, &titea) {
                Some((user_key, ty)) => (Some(user_key.clone()), Some(*ty)),
                None => owner_of(store, layout, cf, &key, &value, &mut owner)?,
            };
            if filter.key.as_ref().is_some_and(|k| user_key.as_ref() != Some(k)) {
                continue;
            }
            if filter.ty.is_some_and(|t| ty != Some(t)) {
                continue;
            }
            let mut json = record::decode(layout, cf, &key, Some(&value), ty).unwrap_or_else(|error| {
                serde_json::json!({
                    "cf": record::cf_name(cf),
                    "raw_key": record::hex(&key),
                    "raw_value": record::hex(&value),
                    "error": error,
                })
            });
            if let (Some(found), Some(named)) = (&user_key, json.get_mut("key"))
                && named.as_str() == Some("")
            {
                *named = record::bytes_json(found);
            }
            writeln!(out, "{json}").map_err(|e| e.to_string())?;
            written += 1;
        }
    }
    Ok(written)
}

/// TiTea: the key and type of each collection, by namespace and object id.
type TiteaOwners = HashMap<(Vec<u8>, Version), (Vec<u8>, RedisType)>;

/// Every TiTea collection of `store`: its namespace and object id → its key and type.
fn titea_owners(store: &dyn KvBackend, layout: &KeyLayout) -> Result<TiteaOwners, Error> {
    let mut owners = HashMap::new();
    let everything = KeyRange::prefix(Vec::new());
    for item in
        store.scan(ColumnFamily::Metadata, &everything, Direction::Forward).map_err(|e| e.to_string())?
    {
        let (key, value) = item.map_err(|e| e.to_string())?;
        if layout.index_record_tag(&key).is_some() {
            continue;
        }
        let (Ok(mk), Ok(meta)) = (layout.decode_metadata_key(&key), layout.decode_metadata(&value)) else {
            continue;
        };
        if !meta.ty.is_single_kv() {
            owners.insert((mk.namespace.to_vec(), meta.version), (mk.user_key.to_vec(), meta.ty));
        }
    }
    Ok(owners)
}

/// The key and type of the TiTea collection an element record `key` belongs to.
fn titea_owner<'a>(
    layout: &KeyLayout,
    cf: ColumnFamily,
    key: &[u8],
    owners: &'a TiteaOwners,
) -> Option<&'a (Vec<u8>, RedisType)> {
    let sk = match cf {
        ColumnFamily::Metadata => return None,
        ColumnFamily::Score => layout.decode_score_key(key).ok().map(|sk| (sk.owner.namespace, sk.version)),
        _ => layout.decode_subkey(key).ok().map(|sk| (sk.namespace, sk.version)),
    }?;
    owners.get(&(sk.0.to_vec(), sk.1))
}

/// A record's user key and its owner's type, each `None` when unknown.
type Owner = (Option<Vec<u8>>, Option<RedisType>);

/// The user key of a record and its owner's type (both `None` when the key does not decode).
fn owner_of(
    store: &dyn KvBackend,
    layout: &KeyLayout,
    cf: ColumnFamily,
    key: &[u8],
    value: &[u8],
    last: &mut Option<(Vec<u8>, Option<RedisType>)>,
) -> Result<Owner, Error> {
    if cf == ColumnFamily::Metadata {
        let Ok(mk) = layout.decode_metadata_key(key) else { return Ok((None, None)) };
        return Ok((Some(mk.user_key.to_vec()), layout.decode_metadata(value).ok().map(|m| m.ty)));
    }
    if let Some(mkey) = (cf == ColumnFamily::Subkey).then(|| layout.decode_legacy_string_key(key)).flatten() {
        let user_key = layout.decode_metadata_key(mkey).ok().map(|mk| mk.user_key.to_vec());
        return Ok((user_key, Some(RedisType::String)));
    }
    let decoded = match cf {
        ColumnFamily::Score => layout.decode_score_key(key).map(|sk| sk.owner),
        _ => layout.decode_subkey(key).map(|sk| sk.owner()),
    };
    let Ok(found) = decoded else { return Ok((None, None)) };
    let owner_key = layout.owner_metadata_key(&found);
    if last.as_ref().is_none_or(|(k, _)| *k != owner_key) {
        let raw = store.get(ColumnFamily::Metadata, &owner_key).map_err(|e| e.to_string())?;
        let ty = raw.and_then(|raw| layout.decode_metadata(&raw).ok().map(|m| m.ty));
        *last = Some((owner_key, ty));
    }
    Ok((Some(found.user_key.to_vec()), last.as_ref().and_then(|(_, ty)| *ty)))
}

/// Every namespace with a metadata record in `store`, in key order (one seek per namespace).
///
/// # Errors
/// The store's errors.
pub fn namespaces(store: &dyn KvBackend, layout: &KeyLayout) -> Result<Vec<Vec<u8>>, Error> {
    let mut found = Vec::new();
    let mut range = KeyRange::prefix(layout.fixed_prefix().to_vec());
    loop {
        let first =
            store.scan(ColumnFamily::Metadata, &range, Direction::Forward).map_err(|e| e.to_string())?.next();
        let Some(item) = first else { return Ok(found) };
        let (key, _) = item.map_err(|e| e.to_string())?;
        let namespace = match layout.decode_metadata_key(&key) {
            Ok(mk) => mk.namespace.to_vec(),
            // Skip one undecodable record.
            Err(_) => {
                range.start = [key.as_ref(), &[0]].concat();
                continue;
            }
        };
        let ns_layout = layout.clone().with_namespace(&namespace).map_err(|e| e.to_string())?;
        match ns_layout.namespace_range().end {
            Some(end) => range.start = end,
            None => {
                found.push(namespace);
                return Ok(found);
            }
        }
        found.push(namespace);
    }
}

/// Which tenant and Redis database a namespace holds under `layout`: Kvrocks' `<ns>:<n>` is
/// database n of tenant `<ns>`; NeoKV's index id `base + n` is database n of the layout's
/// index id `base`; camellia's `<n>:<ns>` and TiTea's `<ns>:<n>` are database n of the
/// layout's namespace.
pub fn database_of(layout: &KeyLayout, namespace: &[u8]) -> (Vec<u8>, usize) {
    let databases = rediskv::DATABASES;
    match layout.kind() {
        LayoutKind::Kvrocks => {
            if let Some(colon) = namespace.iter().rposition(|&b| b == b':') {
                let base = &namespace[..colon];
                let n =
                    std::str::from_utf8(&namespace[colon + 1..]).ok().and_then(|n| n.parse::<usize>().ok());
                if let Some(n) = n.filter(|n| (1..databases).contains(n)) {
                    let expected = layout.clone().with_namespace(base).and_then(|l| l.for_database(n));
                    if expected.is_ok_and(|l| l.namespace() == namespace) {
                        return (base.to_vec(), n);
                    }
                }
            }
            (namespace.to_vec(), 0)
        }
        LayoutKind::Camellia | LayoutKind::TiTea => {
            let n =
                (1..databases).find(|&n| layout.for_database(n).is_ok_and(|l| l.namespace() == namespace));
            match n {
                Some(n) => (layout.namespace().to_vec(), n),
                None => (namespace.to_vec(), 0),
            }
        }
        LayoutKind::NeoKv => {
            let (Some((region, index)), Some((base_region, base_index))) =
                (rediskv::neokv_ids(namespace), layout.neokv_ids())
            else {
                return (namespace.to_vec(), 0);
            };
            match usize::try_from(index.wrapping_sub(base_index)) {
                Ok(n) if region == base_region && n < databases => (layout.namespace().to_vec(), n),
                _ => (namespace.to_vec(), 0),
            }
        }
    }
}
