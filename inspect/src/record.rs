//! One record as JSON, both ways: [`decode`] reads a record's key (and value) under a layout,
//! [`encode`] writes the bytes a JSON description names.
//!
//! | field | meaning |
//! |---|---|
//! | `cf` | `metadata`, `subkey`, `score` or `stream` |
//! | `namespace` (Kvrocks, camellia) / `region_id`, `index_id` (NeoKV) | whose record it is |
//! | `slot` | the cluster slot, when the layout writes one (computed from `key` when encoding) |
//! | `key` | the Redis key |
//! | `type`, `expire_ms`, `version`, `size`, `head`, `tail`, `blind_write`, `value` (TiTea: `created_s`) | a metadata record (a string's `version` where camellia or TiTea write one) |
//! | `version` and `field` / `member` / `index` / `id` / `fragment`, `value` / `score` | a subkey (which name depends on the owner's type) |
//! | `version`, `score`, `member` | a score key |
//! | `version`, `entry` and `fields`, or `group` / `consumer` / `pending` | a stream record |
//! | `legacy: true`, `expire_ms`, `value` | a string of NeoKV's first encoding |
//! | `index: "gc"`, `version`, `type` / `index: "expire"`, `expire_ms`, `key`, `version`, `type` | TiTea's GC and expire index records |
//!
//! Byte strings are JSON strings when they are UTF-8 without control characters, else
//! `{"hex": "…"}`; [`encode`] takes either. Scores are JSON numbers, or the strings `"inf"`,
//! `"-inf"` and `"nan"` ([`score_json`]); a score key whose 8 score bytes are not what its
//! score encodes to (camellia keeps NaN's and `-0.0`'s bits) also has them as `score_bytes`. A member's or score record's `value` is printed only
//! when it is not the bytes [`encode`] would write from the other fields (a score's text as a
//! TiTea client sent it, `"1.50"`), so that every record encodes back to its own bytes.
//! A TiTea element record names its collection by object id only: [`decode`] prints an empty
//! `key` (`store::dump` the owner's), which [`encode`] does not read.

use rediskv::{
    ColumnFamily, ConsumerValue, Extra, GroupValue, KeyLayout, LIST_INITIAL_INDEX, LayoutKind, Metadata,
    PendingValue, RedisType, StreamId, StreamSub, Version, decode_entry, decode_neokv_legacy, encode_entry,
    encode_neokv_legacy, neokv_ids, neokv_namespace, titea,
};
use serde_json::{Map, Value, json};

/// What went wrong, for the user.
pub type Error = String;

/// The column family named `name` (`metadata`, `subkey`, `score`, `stream`).
///
/// # Errors
/// Any other name.
pub fn column_family(name: &str) -> Result<ColumnFamily, Error> {
    match name {
        "metadata" => Ok(ColumnFamily::Metadata),
        "subkey" | "default" => Ok(ColumnFamily::Subkey),
        "score" | "zset_score" => Ok(ColumnFamily::Score),
        "stream" => Ok(ColumnFamily::Stream),
        other => Err(format!("unknown column family '{other}' (metadata, subkey, score or stream)")),
    }
}

/// The name [`column_family`] reads.
pub fn cf_name(cf: ColumnFamily) -> &'static str {
    match cf {
        ColumnFamily::Metadata => "metadata",
        ColumnFamily::Subkey => "subkey",
        ColumnFamily::Score => "score",
        ColumnFamily::Stream => "stream",
    }
}

/// The type named `name` (`string`, `hash`, …, as TYPE and the metadata JSON say).
///
/// # Errors
/// A name no type has.
pub fn redis_type(name: &str) -> Result<RedisType, Error> {
    (0..=u8::MAX)
        .filter_map(|id| RedisType::from_id(id).ok())
        .find(|ty| ty.name() == name)
        .ok_or_else(|| format!("unknown type '{name}'"))
}

/// `bytes` as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of a hex string (whitespace ignored).
///
/// # Errors
/// An odd number of digits or a character that is not one.
pub fn unhex(text: &str) -> Result<Vec<u8>, Error> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        return Err(format!("odd number of hex digits in '{text}'"));
    }
    digits
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|p| u8::from_str_radix(p, 16).ok())
                .ok_or_else(|| format!("not hex: '{text}'"))
        })
        .collect()
}

/// `bytes` as a JSON string when UTF-8 without control characters, else `{"hex": "…"}`.
pub fn bytes_json(bytes: &[u8]) -> Value {
    match std::str::from_utf8(bytes) {
        Ok(text) if !text.chars().any(char::is_control) => Value::String(text.to_string()),
        _ => json!({ "hex": hex(bytes) }),
    }
}

/// The bytes of a JSON string or `{"hex": "…"}` (what [`decode`] writes for bytes).
///
/// # Errors
/// Any other JSON value, or bad hex.
pub fn json_bytes(value: &Value, what: &str) -> Result<Vec<u8>, Error> {
    match value {
        Value::String(text) => Ok(text.as_bytes().to_vec()),
        Value::Object(map) => match map.get("hex") {
            Some(Value::String(text)) => unhex(text),
            _ => Err(format!("{what}: an object must be {{\"hex\": \"…\"}}")),
        },
        _ => Err(format!("{what}: a string or {{\"hex\": \"…\"}}")),
    }
}

/// The record's owner: `cf`, namespace (or NeoKV's ids), slot, key.
fn owner(
    layout: &KeyLayout,
    cf: ColumnFamily,
    namespace: &[u8],
    slot: Option<u16>,
    user_key: &[u8],
) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("cf".into(), cf_name(cf).into());
    match (layout.kind(), neokv_ids(namespace)) {
        (LayoutKind::NeoKv, Some((region, index))) => {
            out.insert("region_id".into(), region.into());
            out.insert("index_id".into(), index.into());
        }
        _ => {
            out.insert("namespace".into(), bytes_json(namespace));
        }
    }
    if let Some(slot) = slot {
        out.insert("slot".into(), slot.into());
    }
    out.insert("key".into(), bytes_json(user_key));
    out
}

/// Bytes of a 64-bit metadata value before its type's extra fields: flags, expire, and for
/// collections version and size (and a list's head and tail).
fn header_len(ty: RedisType) -> usize {
    match ty {
        _ if ty.is_single_kv() => 9,
        RedisType::List => 41,
        _ => 25,
    }
}

fn metadata_fields(layout: &KeyLayout, meta: &Metadata<'_>, raw: &[u8], out: &mut Map<String, Value>) {
    out.insert("type".into(), meta.ty.name().into());
    out.insert("expire_ms".into(), meta.expire_ms.into());
    // The type's extra fields (a stream's counters, a JSON document's format…), raw: the
    // bytes between the header and the value.
    if meta.extra != Extra::None {
        let extra = raw.get(header_len(meta.ty)..raw.len() - meta.value.len()).unwrap_or_default();
        out.insert("extra".into(), hex(extra).into());
        if let Extra::Stream(fields) = &meta.extra {
            out.insert("last_id".into(), fields.last_generated_id.to_string().into());
            out.insert("entries_added".into(), fields.entries_added.into());
        }
    }
    if meta.ty.is_single_kv() {
        if layout.versions_strings() {
            out.insert("version".into(), version_json(meta.version));
        }
        out.insert("value".into(), bytes_json(meta.value));
        return;
    }
    out.insert("version".into(), version_json(meta.version));
    out.insert("size".into(), meta.size.into());
    if meta.ty == RedisType::List {
        out.insert("head".into(), meta.head.into());
        out.insert("tail".into(), meta.tail.into());
    }
    if meta.blind_write {
        out.insert("blind_write".into(), true.into());
    }
}

/// A version as JSON: a number, or TiTea's 16-byte object id as 32 hex digits.
fn version_json(version: Version) -> Value {
    match version {
        Version::Short(v) => v.into(),
        Version::Id(_) => version.to_string().into(),
    }
}

/// The version [`version_json`] wrote, of `layout`'s variant: TiTea takes a number as the id
/// of the same bits.
fn json_version(layout: &KeyLayout, json: &Map<String, Value>) -> Result<Version, Error> {
    let bits = json_version_bits(json)?;
    if layout.version_len() == 16 {
        return Ok(Version::Id(bits.to_be_bytes()));
    }
    u64::try_from(bits).map(Version::Short).map_err(|_| "'version' of this layout is under 2^64".to_string())
}

/// The number or 32 hex digits of a record's `version`.
fn json_version_bits(json: &Map<String, Value>) -> Result<u128, Error> {
    match json.get("version") {
        Some(Value::String(hex)) => {
            u128::from_str_radix(hex, 16).map_err(|_| "'version' is a number or 32 hex digits".to_string())
        }
        Some(v) => {
            v.as_u64().map(u128::from).ok_or_else(|| "'version' must be an unsigned integer".to_string())
        }
        None => Err("missing field 'version'".into()),
    }
}

/// A score as JSON: a number, or the strings `"inf"`, `"-inf"` and `"nan"`, which JSON
/// numbers cannot be.
pub fn score_json(score: f64) -> Value {
    match score {
        x if x.is_nan() => "nan".into(),
        x if x.is_infinite() => if x > 0.0 { "inf" } else { "-inf" }.into(),
        x => json!(x),
    }
}

/// The score [`score_json`] wrote (a number, `"inf"`, `"-inf"`, `"+inf"` or `"nan"`).
///
/// # Errors
/// Any other JSON value.
pub fn json_score(value: &Value) -> Result<f64, Error> {
    match value {
        Value::String(text) => match text.to_ascii_lowercase().as_str() {
            "inf" | "+inf" => Ok(f64::INFINITY),
            "-inf" => Ok(f64::NEG_INFINITY),
            "nan" => Ok(f64::NAN),
            _ => Err(format!("'{text}' is not a score (a number, \"inf\", \"-inf\" or \"nan\")")),
        },
        other => other.as_f64().ok_or_else(|| format!("{other} is not a score")),
    }
}

/// Puts `value` as the record's `value` unless it is the bytes `expected` (what [`encode`]
/// writes when there is none): a score's text as a client sent it ("1.50"), say.
fn put_unexpected(out: &mut Map<String, Value>, value: Option<&[u8]>, expected: rediskv::Result<Vec<u8>>) {
    if let Some(value) = value.filter(|v| expected.as_deref().ok() != Some(*v)) {
        out.insert("value".into(), bytes_json(value));
    }
}

/// A decoded score, NaN included: camellia and TiTea store the NaN a client sent, which
/// the codec refuses to hand the engine.
fn stored_score(decoded: rediskv::Result<f64>) -> Result<f64, Error> {
    match decoded {
        Err(rediskv::Error::NanScore) => Ok(f64::NAN),
        other => other.map_err(|e| e.to_string()),
    }
}

fn u64_of(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.try_into().ok()?))
}

/// A record as JSON. `owner_type` (the owner's type, from its metadata) names a subkey's
/// parts: a hash `field`, a set or zset `member` (and the zset `score` from the value), a list
/// `index`, a bitmap `fragment`, a sortedint `id`; without it a subkey has a `field`.
///
/// # Errors
/// Bytes that do not decode under `layout`, with the codec's reason.
pub fn decode(
    layout: &KeyLayout,
    cf: ColumnFamily,
    key: &[u8],
    value: Option<&[u8]>,
    owner_type: Option<RedisType>,
) -> Result<Value, Error> {
    let fail = |e: rediskv::Error| e.to_string();
    if let (ColumnFamily::Metadata, Some(tag)) = (cf, layout.index_record_tag(key)) {
        return titea_index(layout, key, value, tag);
    }
    if cf == ColumnFamily::Metadata {
        let mk = layout.decode_metadata_key(key).map_err(fail)?;
        let mut out = owner(layout, cf, mk.namespace, mk.slot, mk.user_key);
        if let Some(value) = value {
            metadata_fields(layout, &layout.decode_metadata(value).map_err(fail)?, value, &mut out);
            if let Some(created) = value.get(titea::CREATED_AT).filter(|_| layout.kind() == LayoutKind::TiTea)
            {
                out.insert(
                    "created_s".into(),
                    u64::from_be_bytes(created.try_into().unwrap_or_default()).into(),
                );
            }
        }
        return Ok(Value::Object(out));
    }
    if cf == ColumnFamily::Subkey
        && let Some(mkey) = layout.decode_legacy_string_key(key)
    {
        let mk = layout.decode_metadata_key(mkey).map_err(fail)?;
        let mut out = owner(layout, cf, mk.namespace, mk.slot, mk.user_key);
        out.insert("legacy".into(), true.into());
        if let Some(value) = value {
            let meta = decode_neokv_legacy(value).map_err(fail)?;
            out.insert("expire_ms".into(), meta.expire_ms.into());
            out.insert("value".into(), bytes_json(meta.value));
        }
        return Ok(Value::Object(out));
    }
    if cf == ColumnFamily::Score {
        let (sk, stored) = layout.split_score_key(key).map_err(fail)?;
        let score = stored_score(layout.decode_score(stored))?;
        let mut out = owner(layout, cf, sk.owner.namespace, sk.owner.slot, sk.owner.user_key);
        out.insert("version".into(), version_json(sk.version));
        out.insert("score".into(), score_json(score));
        // Bytes the score does not encode back to (camellia's NaN and -0.0): kept as stored.
        if layout.encode_score(score).ok().as_ref().map(|b| &b[..]) != Some(stored) {
            out.insert("score_bytes".into(), hex(stored).into());
        }
        out.insert("member".into(), bytes_json(sk.member));
        put_unexpected(&mut out, value, score_value(layout, score));
        return Ok(Value::Object(out));
    }
    let sk = layout.decode_subkey(key).map_err(fail)?;
    let mut out = owner(layout, cf, sk.namespace, sk.slot, sk.user_key);
    out.insert("version".into(), version_json(sk.version));
    if cf == ColumnFamily::Stream {
        stream_fields(sk.sub, value, &mut out)?;
        return Ok(Value::Object(out));
    }
    let mut put_value = true;
    match owner_type {
        Some(RedisType::List) => {
            let index = layout.decode_list_sub(sk.sub).ok_or("not a list element's index")?;
            out.insert("index".into(), index.into());
        }
        Some(RedisType::Set) => {
            out.insert("member".into(), bytes_json(sk.sub));
            put_unexpected(&mut out, value, Ok(layout.set_member_value(sk.sub).to_vec()));
            put_value = false;
        }
        Some(RedisType::ZSet) => {
            out.insert("member".into(), bytes_json(layout.decode_member(sk.sub).map_err(fail)?));
            if let Some(value) = value {
                let score = stored_score(layout.decode_member_score(value))?;
                out.insert("score".into(), score_json(score));
                put_unexpected(&mut out, Some(value), layout.encode_member_score(score));
            }
            put_value = false;
        }
        Some(RedisType::Sortedint) => {
            out.insert("id".into(), u64_of(sk.sub).ok_or("a sortedint id is 8 bytes")?.into());
            put_value = false;
        }
        Some(RedisType::Bitmap) => {
            out.insert("fragment".into(), bytes_json(sk.sub));
        }
        _ => {
            out.insert("field".into(), bytes_json(sk.sub));
        }
    }
    if let (true, Some(value)) = (put_value, value) {
        out.insert("value".into(), bytes_json(value));
    }
    Ok(Value::Object(out))
}

/// A TiTea expire or GC index record ([`KeyLayout::index_record_tag`] gave its `tag`).
fn titea_index(layout: &KeyLayout, key: &[u8], value: Option<&[u8]>, tag: u8) -> Result<Value, Error> {
    let at = key.iter().skip(titea::SYSTEM_PREFIX.len() + layout.namespace().len()).position(|b| *b == tag);
    let at = at.ok_or("no record type")? + titea::SYSTEM_PREFIX.len() + layout.namespace().len();
    let (namespace, rest) = (&key[titea::SYSTEM_PREFIX.len()..at], &key[at + 1..]);
    let mut out = Map::new();
    out.insert("cf".into(), "metadata".into());
    out.insert("namespace".into(), bytes_json(namespace));
    let type_name = |b: u8| {
        (0..=u8::MAX)
            .filter_map(|id| RedisType::from_id(id).ok())
            .find(|ty| titea::type_byte(*ty) == Some(b))
            .map_or("unknown", |ty| ty.name())
    };
    if tag == titea::GC {
        out.insert("index".into(), "gc".into());
        let id: [u8; 16] = rest.try_into().map_err(|_| "a GC record names a 16-byte id")?;
        out.insert("version".into(), version_json(Version::Id(id)));
        if let Some(value) = value {
            out.insert("type".into(), type_name(*value.first().ok_or("an empty GC record")?).into());
        }
    } else {
        out.insert("index".into(), "expire".into());
        let (ms, user_key) = rest.split_first_chunk::<8>().ok_or("an expire record holds 8 bytes of time")?;
        out.insert("expire_ms".into(), u64::from_be_bytes(*ms).into());
        out.insert("key".into(), bytes_json(user_key));
        if let Some(value) = value {
            let (id, ty) =
                value.split_first_chunk::<16>().ok_or("an expire record's value is an id and a type")?;
            out.insert("version".into(), version_json(Version::Id(*id)));
            out.insert("type".into(), type_name(*ty.first().ok_or("no type")?).into());
        }
    }
    Ok(Value::Object(out))
}

fn stream_fields(sub: &[u8], value: Option<&[u8]>, out: &mut Map<String, Value>) -> Result<(), Error> {
    let fail = |e: rediskv::Error| e.to_string();
    match StreamSub::decode(sub).map_err(fail)? {
        StreamSub::Entry(id) => {
            out.insert("entry".into(), id.to_string().into());
            if let Some(value) = value {
                let fields = decode_entry(value).map_err(fail)?;
                out.insert("fields".into(), fields.into_iter().map(bytes_json).collect());
            }
        }
        StreamSub::Group(group) => {
            out.insert("group".into(), bytes_json(group));
            if let Some(value) = value {
                let g = GroupValue::decode(value).map_err(fail)?;
                out.insert("consumers".into(), g.consumers.into());
                out.insert("pending".into(), g.pending.into());
                out.insert("last_delivered".into(), g.last_delivered.to_string().into());
                out.insert("entries_read".into(), g.entries_read.into());
                out.insert("lag".into(), g.lag.into());
            }
        }
        StreamSub::Consumer { group, consumer } => {
            out.insert("group".into(), bytes_json(group));
            out.insert("consumer".into(), bytes_json(consumer));
            if let Some(value) = value {
                let c = ConsumerValue::decode(value).map_err(fail)?;
                out.insert("pending".into(), c.pending.into());
                out.insert("seen_ms".into(), c.seen_ms.into());
                out.insert("active_ms".into(), c.active_ms.into());
            }
        }
        StreamSub::Pending { group, id } => {
            out.insert("group".into(), bytes_json(group));
            out.insert("pending_entry".into(), id.to_string().into());
            if let Some(value) = value {
                let p = PendingValue::decode(value).map_err(fail)?;
                out.insert("delivered_ms".into(), p.delivered_ms.into());
                out.insert("deliveries".into(), p.deliveries.into());
                out.insert("consumer".into(), bytes_json(p.consumer));
            }
        }
    }
    Ok(())
}

/// One encoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Its column family.
    pub cf: ColumnFamily,
    /// The record key.
    pub key: Vec<u8>,
    /// The record value.
    pub value: Vec<u8>,
}

fn field<'a>(json: &'a Map<String, Value>, name: &str) -> Result<&'a Value, Error> {
    json.get(name).ok_or_else(|| format!("missing field '{name}'"))
}

fn number(json: &Map<String, Value>, name: &str, default: Option<u64>) -> Result<u64, Error> {
    match json.get(name) {
        Some(v) => v.as_u64().ok_or_else(|| format!("'{name}' must be an unsigned integer")),
        None => default.ok_or_else(|| format!("missing field '{name}'")),
    }
}

fn float(json: &Map<String, Value>, name: &str) -> Result<f64, Error> {
    json_score(field(json, name)?).map_err(|e| format!("'{name}': {e}"))
}

/// The value of a score record: TiTea keeps the score's text there, the others nothing.
fn score_value(layout: &KeyLayout, score: f64) -> rediskv::Result<Vec<u8>> {
    if layout.kind() == LayoutKind::TiTea { layout.encode_member_score(score) } else { Ok(Vec::new()) }
}

fn stream_id(text: &str) -> Result<StreamId, Error> {
    let (ms, seq) = text.split_once('-').ok_or_else(|| format!("'{text}' is not an id ms-seq"))?;
    let parse = |p: &str| p.parse::<u64>().map_err(|_| format!("'{text}' is not an id ms-seq"));
    Ok(StreamId { ms: parse(ms)?, seq: parse(seq)? })
}

/// The record a JSON object (as [`decode`] writes it) describes, under `layout` (its
/// `namespace`, or NeoKV's `region_id` and `index_id`, replace the layout's own).
///
/// # Errors
/// A field missing or of the wrong kind, a namespace the layout cannot take, or a record
/// kind this tool does not write (stream groups, consumers and pending entries).
pub fn encode(layout: &KeyLayout, json: &Value) -> Result<Record, Error> {
    let json = json.as_object().ok_or("a record is a JSON object")?;
    let cf = column_family(json.get("cf").and_then(Value::as_str).unwrap_or("metadata"))?;
    let fail = |e: rediskv::Error| e.to_string();
    let layout = match (json.get("namespace"), json.get("region_id"), json.get("index_id")) {
        (Some(ns), _, _) => layout.clone().with_namespace(&json_bytes(ns, "namespace")?).map_err(fail)?,
        (None, Some(region), Some(index)) => {
            let id = |v: &Value| v.as_i64().ok_or("'region_id' and 'index_id' are integers");
            let ns = neokv_namespace(id(region)?, id(index)?);
            layout.clone().with_namespace(&ns).map_err(fail)?
        }
        _ => layout.clone(),
    };
    let text = |name: &str| json.get(name).map(|v| json_bytes(v, name)).transpose();
    if let Some(index) = json.get("index").and_then(Value::as_str) {
        let ty = redis_type(field(json, "type")?.as_str().ok_or("'type' is a string")?)?;
        let ty = titea::type_byte(ty).ok_or("TiTea has no such type")?;
        let version = json_version(&layout, json)?;
        return match index {
            "gc" => {
                let key = layout.gc_record_key(layout.namespace(), version).map_err(fail)?;
                Ok(Record { cf, key, value: vec![ty] })
            }
            _ => {
                let key = json_bytes(field(json, "key")?, "key")?;
                let at = number(json, "expire_ms", None)?;
                let value = [&version.id().map_err(fail)?[..], &[ty]].concat();
                Ok(Record { cf, key: layout.expire_record_key(at, &key), value })
            }
        };
    }
    let key = json_bytes(field(json, "key")?, "key")?;
    let version = || json_version(&layout, json);
    let record = |key: Vec<u8>, value: Vec<u8>| Ok(Record { cf, key, value });
    match cf {
        ColumnFamily::Metadata => {
            let ty = redis_type(field(json, "type")?.as_str().ok_or("'type' is a string")?)?;
            let expire_ms = number(json, "expire_ms", Some(0))?;
            let value = text("value")?.unwrap_or_default();
            let meta = if ty.is_single_kv() {
                let version = if json.contains_key("version") { version()? } else { Version::NONE };
                Metadata { ty, version, ..Metadata::string(&value, expire_ms) }
            } else {
                let mut meta = Metadata::collection(ty, version()?);
                meta.expire_ms = expire_ms;
                meta.size = number(json, "size", Some(0))?;
                meta.blind_write = json.get("blind_write").and_then(Value::as_bool).unwrap_or(false);
                if ty == RedisType::List {
                    meta.head = number(json, "head", Some(LIST_INITIAL_INDEX))?;
                    meta.tail = number(json, "tail", Some(meta.head + meta.size))?;
                }
                meta
            };
            let mut bytes = layout.encode_metadata(&meta).map_err(fail)?;
            if let (LayoutKind::TiTea, Some(created)) = (layout.kind(), json.get("created_s")) {
                let created = created.as_u64().ok_or("'created_s' must be an unsigned integer")?;
                if let Some(field) = bytes.get_mut(titea::CREATED_AT) {
                    field.copy_from_slice(&created.to_be_bytes());
                }
            }
            if let Some(extra) = json.get("extra").filter(|_| layout.kind() != LayoutKind::Camellia) {
                let extra = unhex(extra.as_str().ok_or("'extra' is a hex string")?)?;
                bytes.truncate(header_len(ty));
                bytes.extend_from_slice(&extra);
                bytes.extend_from_slice(if ty.is_single_kv() { &value } else { meta.value });
            }
            record(layout.metadata_key(&key), bytes)
        }
        ColumnFamily::Subkey if json.get("legacy").and_then(Value::as_bool) == Some(true) => {
            let legacy = layout
                .legacy_string_key(&layout.metadata_key(&key))
                .ok_or("only NeoKV has legacy records")?;
            let value = text("value")?.unwrap_or_default();
            record(legacy, encode_neokv_legacy(number(json, "expire_ms", Some(0))?, &value))
        }
        ColumnFamily::Subkey => {
            let value = text("value")?;
            let unsigned = |name| number(json, name, None);
            if let Some(member) = text("member")? {
                if json.contains_key("score") {
                    let value = match value {
                        Some(value) => value,
                        None => layout.encode_member_score(float(json, "score")?).map_err(fail)?,
                    };
                    return record(layout.member_key(&key, version()?, &member).map_err(fail)?, value);
                }
                let value = value.unwrap_or_else(|| layout.set_member_value(&member).to_vec());
                return record(layout.subkey(&key, version()?, &member).map_err(fail)?, value);
            }
            let sub = if json.contains_key("index") {
                layout.list_sub(unsigned("index")?)
            } else if json.contains_key("id") {
                unsigned("id")?.to_be_bytes().to_vec()
            } else {
                text("field")?.or(text("fragment")?).ok_or("a subkey needs 'field', 'member' or 'index'")?
            };
            record(layout.subkey(&key, version()?, &sub).map_err(fail)?, value.unwrap_or_default())
        }
        ColumnFamily::Score => {
            let member = text("member")?.ok_or("missing field 'member'")?;
            let score = float(json, "score")?;
            let value = match text("value")? {
                Some(value) => value,
                None => score_value(&layout, score).map_err(fail)?,
            };
            let record_key = match json.get("score_bytes") {
                Some(bytes) => {
                    let bytes = unhex(bytes.as_str().ok_or("'score_bytes' is a hex string")?)?;
                    if bytes.len() != 8 {
                        return Err("'score_bytes' is 8 bytes".into());
                    }
                    let mut out = layout.score_prefix(&key, version()?, 8 + member.len()).map_err(fail)?;
                    out.extend_from_slice(&bytes);
                    out.extend_from_slice(&member);
                    out
                }
                None => layout.score_key(&key, version()?, score, &member).map_err(fail)?,
            };
            record(record_key, value)
        }
        ColumnFamily::Stream => {
            let (sub, value) = stream_record(json)?;
            record(layout.subkey(&key, version()?, &sub).map_err(fail)?, value)
        }
    }
}

/// The `sub` and value of a stream record: an entry, a group, a consumer or a pending entry.
fn stream_record(json: &Map<String, Value>) -> Result<(Vec<u8>, Vec<u8>), Error> {
    let id_of = |name: &str| {
        stream_id(field(json, name)?.as_str().ok_or_else(|| format!("'{name}' is an id ms-seq"))?)
    };
    let bytes_of = |name: &str| json_bytes(field(json, name)?, name);
    let unsigned = |name: &str| number(json, name, None);
    if json.contains_key("entry") {
        let fields: Vec<Vec<u8>> = match json.get("fields") {
            Some(Value::Array(items)) => {
                items.iter().map(|f| json_bytes(f, "fields")).collect::<Result<_, _>>()?
            }
            _ => return Err("a stream entry needs 'fields', an array".into()),
        };
        return Ok((StreamSub::Entry(id_of("entry")?).to_bytes(), encode_entry(&fields)));
    }
    let group = bytes_of("group")?;
    if json.contains_key("pending_entry") {
        let consumer = bytes_of("consumer")?;
        let value = PendingValue {
            delivered_ms: unsigned("delivered_ms")?,
            deliveries: unsigned("deliveries")?,
            consumer: &consumer,
        };
        let sub = StreamSub::Pending { group: &group, id: id_of("pending_entry")? };
        return Ok((sub.to_bytes(), value.to_bytes()));
    }
    if json.contains_key("consumer") {
        let consumer = bytes_of("consumer")?;
        let value = ConsumerValue {
            pending: unsigned("pending")?,
            seen_ms: unsigned("seen_ms")?,
            active_ms: unsigned("active_ms")?,
        };
        return Ok((StreamSub::Consumer { group: &group, consumer: &consumer }.to_bytes(), value.to_bytes()));
    }
    let value = GroupValue {
        consumers: unsigned("consumers")?,
        pending: unsigned("pending")?,
        last_delivered: id_of("last_delivered")?,
        entries_read: field(json, "entries_read")?.as_i64().ok_or("'entries_read' must be an integer")?,
        lag: number(json, "lag", Some(0))?,
    };
    Ok((StreamSub::Group(&group).to_bytes(), value.to_bytes()))
}
