//! The demo: runs a short Redis session through `Db::execute` on the in-memory backend, then
//! prints every record it wrote — column family, key and value in hex — and what each part
//! means.

use rediskv::{ColumnFamily, MemoryBackend};
use rediskv::{Db, Reply};
use rediskv::{KeyLayout, Metadata, RedisType, decode_f64_slice};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).escape_debug().to_string()
}

fn show(reply: &Reply) -> String {
    match reply {
        Reply::Status(s) => s.to_string(),
        Reply::Error(e) => format!("(error) {e}"),
        Reply::Integer(n) => format!("(integer) {n}"),
        Reply::Bulk(b) => format!("\"{}\"", text(b)),
        Reply::Nil | Reply::NilArray => "(nil)".into(),
        Reply::Array(items) | Reply::Set(items) | Reply::Push(items) => {
            format!("[{}]", items.iter().map(show).collect::<Vec<_>>().join(", "))
        }
        Reply::Pairs(pairs) => {
            format!(
                "[{}]",
                pairs
                    .iter()
                    .map(|(a, b)| format!("[{}, {}]", show(a), show(b)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
        Reply::Map(pairs) | Reply::PairMap(pairs) => {
            format!(
                "{{{}}}",
                pairs.iter().map(|(k, v)| format!("{}: {}", show(k), show(v))).collect::<Vec<_>>().join(", ")
            )
        }
        Reply::Double(x) => format!("(double) {x}"),
        Reply::DoubleText(t) => format!("(double) {}", text(t)),
        Reply::Boolean(b) => format!("({b})"),
        Reply::BigNumber(n) => format!("(big number) {n}"),
        Reply::Verbatim { text: t, .. } => format!("\"{}\"", text(t)),
    }
}

fn main() {
    let mut db = Db::new(MemoryBackend::new());
    let session: &[&[&str]] = &[
        &["SET", "greeting", "hello"],
        &["HSET", "user:1", "name", "ada", "lang", "rust"],
        &["RPUSH", "queue", "a", "b"],
        &["LPUSH", "queue", "z"],
        &["SADD", "tags", "kv"],
        &["ZADD", "board", "1.5", "ada", "-2", "bob"],
        &["PEXPIREAT", "greeting", "4102444800000"],
        &["SET", "gone", "x"],
        &["DEL", "gone"],
        &["ZRANGE", "board", "0", "-1", "WITHSCORES"],
    ];
    println!("== session ==");
    for argv in session {
        println!("> {}\n  {}", argv.join(" "), show(&db.run(argv)));
    }

    let layout = KeyLayout::default();
    let backend = db.backend();
    println!("\n== records (namespace __namespace, Kvrocks layout) ==");
    for (key, value) in backend.records(ColumnFamily::Metadata) {
        let (key, value) = (&key[..], &value[..]);
        println!("\n[metadata] key {}\n           val {}", hex(key), hex(value));
        let Ok(k) = layout.decode_metadata_key(key) else { continue };
        println!(
            "  key  = ns_len {:02x} | ns \"{}\" | user key \"{}\"",
            k.namespace.len(),
            text(k.namespace),
            text(k.user_key)
        );
        let Ok(m) = Metadata::decode(value) else { continue };
        let expire = if m.expire_ms == 0 { "none".to_string() } else { format!("{} ms", m.expire_ms) };
        print!("  val  = flags {:02x} ({}, 64-bit) | expire {expire}", value[0], m.ty.name());
        match m.ty {
            RedisType::String => println!(" | value \"{}\"", text(m.value)),
            RedisType::List => println!(
                " | version {} | size {} | head {:#x} | tail {:#x}",
                m.version, m.size, m.head, m.tail
            ),
            _ => println!(" | version {} | size {}", m.version, m.size),
        }
    }
    for (key, value) in backend.records(ColumnFamily::Subkey) {
        let (key, value) = (&key[..], &value[..]);
        println!("\n[subkey]   key {}\n           val {}", hex(key), hex(value));
        let Ok(s) = layout.decode_subkey(key) else { continue };
        let sub = match <[u8; 8]>::try_from(s.sub) {
            Ok(idx) if s.user_key == b"queue" => format!("list index {:#x}", u64::from_be_bytes(idx)),
            _ => format!("sub \"{}\"", text(s.sub)),
        };
        let val = match decode_f64_slice(value) {
            Ok(score) if s.user_key == b"board" => format!("score {score}"),
            _ => format!("\"{}\"", text(value)),
        };
        println!(
            "  key  = ns \"{}\" | key_len {} | user key \"{}\" | version {} | {sub}\n  val  = {val}",
            text(s.namespace),
            s.user_key.len(),
            text(s.user_key),
            s.version
        );
    }
    for (key, _) in backend.records(ColumnFamily::Score) {
        let key = &key[..];
        println!("\n[score]    key {}", hex(key));
        if let Ok(s) = layout.decode_score_key(key) {
            println!(
                "  key  = user key \"{}\" | version {} | score {} | member \"{}\"",
                text(s.owner.user_key),
                s.version,
                s.score,
                text(s.member)
            );
        }
    }
    println!("\n\"gone\" was deleted: its metadata record is gone; strings have no subkeys.");
}
