//! `rediskv-inspect`: decode, encode, dump and convert rediskv records (see the crate docs).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rediskv::camellia::CamelliaRoute;
use rediskv::{KeyLayout, RedisType};
use rediskv_inspect::convert::convert;
use rediskv_inspect::record::{self, column_family, hex, redis_type, unhex};
use rediskv_inspect::store::{self, Filter};

const USAGE: &str = "usage:
  rediskv-inspect decode [LAYOUT] [--camellia-route md5|int] --cf metadata|subkey|score|stream [--type TYPE] KEY_HEX [VALUE_HEX]
  rediskv-inspect encode [LAYOUT] [--camellia-route md5|int] JSON
  rediskv-inspect dump --dir DIR [--engine fjall|rocksdb] [--cf CF] [--type TYPE] [--key KEY]
  rediskv-inspect convert --dir DIR --out NEW_DIR [--engine E] [--out-engine E] [LAYOUT]
  rediskv-inspect import --file dump.rdb --dir NEW_DIR [--engine E] [LAYOUT]
  rediskv-inspect export --dir DIR --file dump.rdb [--engine E] [--no-compression] [--no-checksum]
LAYOUT (the layout to decode/encode with, or convert to; Kvrocks' by default):
  --layout kvrocks|neokv|camellia|titea [--namespace NS] [--cluster-slots] [--hash-prefix N]
  [--neokv-region-id 1] [--neokv-index-id 1] [--camellia-hash-version 0|1] [--camellia-set-version 0|1]
--camellia-route: the prefix camellia's TiKV/HBase clients put before every key (md5 of the
  slot, or the slot as an i32 in older releases): stripped before decoding, added after encoding.";

/// Takes `--flag value` out of `args`.
fn take(args: &mut Vec<String>, flag: &str) -> Result<Option<String>, String> {
    match args.iter().position(|a| a == flag) {
        Some(i) if i + 1 < args.len() => {
            let value = args.remove(i + 1);
            args.remove(i);
            Ok(Some(value))
        }
        Some(_) => Err(format!("{flag} needs a value")),
        None => Ok(None),
    }
}

/// Takes a `--flag` without value out of `args`.
fn take_switch(args: &mut Vec<String>, flag: &str) -> bool {
    let found = args.iter().position(|a| a == flag);
    found.map(|i| args.remove(i)).is_some()
}

/// The layout the LAYOUT flags describe.
fn layout(args: &mut Vec<String>) -> Result<KeyLayout, String> {
    let id = |flag: &str, args: &mut Vec<String>| -> Result<Option<i64>, String> {
        take(args, flag)?
            .map(|v| v.parse().map_err(|_| format!("{flag} must be a 64-bit integer")))
            .transpose()
    };
    let (region, index) = (id("--neokv-region-id", args)?, id("--neokv-index-id", args)?);
    let namespace = take(args, "--namespace")?;
    let slots = take_switch(args, "--cluster-slots");
    let hash: usize =
        take(args, "--hash-prefix")?.map_or(Ok(0), |v| v.parse().map_err(|_| "--hash-prefix is a number"))?;
    let layout = match take(args, "--layout")?.as_deref().unwrap_or("kvrocks") {
        "kvrocks" => {
            let ns = namespace.as_deref().map_or(rediskv::DEFAULT_NAMESPACE, str::as_bytes);
            KeyLayout::new(ns).map_err(|e| e.to_string())?.with_cluster_slots(slots)
        }
        "neokv" => KeyLayout::neokv(region.unwrap_or(1), index.unwrap_or(1)),
        "camellia" => {
            let mut layout = KeyLayout::camellia(namespace.as_deref().unwrap_or("default").as_bytes());
            for (flag, ty) in
                [("--camellia-hash-version", RedisType::Hash), ("--camellia-set-version", RedisType::Set)]
            {
                if let Some(v) = take(args, flag)? {
                    let v = v.parse().map_err(|_| format!("{flag} is 0 or 1"))?;
                    layout = layout.with_encode_version(ty, v).map_err(|e| e.to_string())?;
                }
            }
            layout
        }
        "titea" => KeyLayout::titea(namespace.as_deref().unwrap_or("default.default").as_bytes()),
        other => return Err(format!("unknown layout '{other}' (kvrocks, neokv, camellia or titea)")),
    };
    layout.with_hash_prefix(hash).map_err(|e| e.to_string())
}

/// `--camellia-route md5|int` (none by default).
fn route(args: &mut Vec<String>) -> Result<CamelliaRoute, String> {
    match take(args, "--camellia-route")?.as_deref() {
        None | Some("none") => Ok(CamelliaRoute::None),
        Some("md5") => Ok(CamelliaRoute::SlotMd5),
        Some("int") => Ok(CamelliaRoute::SlotInt),
        Some(other) => Err(format!("unknown --camellia-route '{other}' (md5, int or none)")),
    }
}

fn positional(args: &[String], n: usize) -> Result<&str, String> {
    args.get(n).map(String::as_str).ok_or_else(|| USAGE.to_string())
}

fn run(mut args: Vec<String>) -> Result<(), String> {
    if args.is_empty() || args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return Ok(());
    }
    let command = args.remove(0);
    match command.as_str() {
        "decode" => {
            let layout = layout(&mut args)?;
            let route = route(&mut args)?;
            let cf = column_family(&take(&mut args, "--cf")?.unwrap_or_else(|| "metadata".into()))?;
            let ty = take(&mut args, "--type")?.map(|t| redis_type(&t)).transpose()?;
            let key = unhex(positional(&args, 0)?)?;
            let value = args.get(1).map(|v| unhex(v)).transpose()?;
            let key = key.get(route.len()..).ok_or("the key is shorter than its route")?;
            let mut json = record::decode(&layout, cf, key, value.as_deref(), ty)?;
            if let (false, Some(map)) = (route.is_empty(), json.as_object_mut()) {
                map.insert("route".into(), hex(&unhex(positional(&args, 0)?)?[..route.len()]).into());
            }
            println!("{json}");
        }
        "encode" => {
            let layout = layout(&mut args)?;
            let route = route(&mut args)?;
            let json: serde_json::Value =
                serde_json::from_str(positional(&args, 0)?).map_err(|e| format!("not JSON: {e}"))?;
            let mut rec = record::encode(&layout, &json)?;
            if !route.is_empty() {
                let key = json.get("key").ok_or("missing field 'key'")?;
                let key = record::json_bytes(key, "key")?;
                rec.key = [route.prefix(rediskv::key_slot(&key)), rec.key].concat();
            }
            let out = serde_json::json!({ "cf": record::cf_name(rec.cf), "key": hex(&rec.key), "value": hex(&rec.value) });
            println!("{out}");
        }
        "dump" => {
            let dir = PathBuf::from(take(&mut args, "--dir")?.ok_or("dump needs --dir")?);
            let engine = take(&mut args, "--engine")?.unwrap_or_else(|| "fjall".into());
            let filter = Filter {
                cf: take(&mut args, "--cf")?.map(|c| column_family(&c)).transpose()?,
                ty: take(&mut args, "--type")?.map(|t| redis_type(&t)).transpose()?,
                key: take(&mut args, "--key")?.map(String::into_bytes),
            };
            let (store, layout) = store::open_existing(&engine, &dir)?;
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let n = store::dump(store.as_ref(), &layout, &filter, &mut out)?;
            out.flush().map_err(|e| e.to_string())?;
            eprintln!("{n} records");
        }
        "convert" => {
            let dir = PathBuf::from(take(&mut args, "--dir")?.ok_or("convert needs --dir")?);
            let out_dir = PathBuf::from(take(&mut args, "--out")?.ok_or("convert needs --out")?);
            let engine = take(&mut args, "--engine")?.unwrap_or_else(|| "fjall".into());
            let out_engine = take(&mut args, "--out-engine")?.unwrap_or_else(|| engine.clone());
            let target_layout = layout(&mut args)?;
            if store::stored_layout(&out_engine, &out_dir)?.is_some() {
                return Err(format!("{} holds a store already: convert writes a new one", out_dir.display()));
            }
            let (source, source_layout) = store::open_existing(&engine, &dir)?;
            std::fs::create_dir_all(&out_dir)
                .map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
            let target = store::open(&out_engine, &out_dir, &target_layout)?;
            let mut bar = Progress::new("keys");
            let report = convert(&source, &source_layout, &target, &target_layout, &mut |done, total| {
                bar.show(done, total)
            })?;
            bar.finish();
            let copied = copy_side_files(&dir, &out_dir)?;
            eprintln!(
                "{} keys converted from {} to {}, {} left out{}",
                report.converted,
                source_layout.kind().name(),
                target_layout.kind().name(),
                report.skipped_count,
                if copied > 0 { format!(", {copied} server files copied") } else { String::new() }
            );
            for (key, reason) in &report.skipped {
                eprintln!("  left out {key:?}: {reason}");
            }
        }
        "import" => {
            let file = PathBuf::from(take(&mut args, "--file")?.ok_or("import needs --file")?);
            let dir = PathBuf::from(take(&mut args, "--dir")?.ok_or("import needs --dir")?);
            let engine = take(&mut args, "--engine")?.unwrap_or_else(|| "fjall".into());
            let layout = layout(&mut args)?;
            let input =
                std::fs::File::open(&file).map_err(|e| format!("cannot open {}: {e}", file.display()))?;
            let total = input.metadata().map_or(0, |m| m.len());
            let mut input = std::io::BufReader::new(input);
            let mut bar = Progress::new("bytes");
            let counts = rediskv_inspect::rdb::import(&mut input, &engine, &dir, &layout, &mut |read| {
                bar.show(read, total)
            })
            .map_err(|e| format!("{}: {e} (nothing was imported)", file.display()))?;
            bar.finish();
            eprintln!(
                "{} keys imported into {} ({}), {} already expired left out, {} function libraries",
                counts.keys,
                dir.display(),
                by_type(&counts),
                counts.skipped,
                counts.functions
            );
        }
        "export" => {
            let dir = PathBuf::from(take(&mut args, "--dir")?.ok_or("export needs --dir")?);
            let file = PathBuf::from(take(&mut args, "--file")?.ok_or("export needs --file")?);
            let engine = take(&mut args, "--engine")?.unwrap_or_else(|| "fjall".into());
            let options = rediskv::RdbFileOptions {
                compression: !take_switch(&mut args, "--no-compression"),
                checksum: !take_switch(&mut args, "--no-checksum"),
            };
            let output =
                std::fs::File::create(&file).map_err(|e| format!("cannot create {}: {e}", file.display()))?;
            let mut out = std::io::BufWriter::new(output);
            let mut bar = Progress::new("keys");
            let exported =
                rediskv_inspect::rdb::export(&engine, &dir, &mut out, options, &mut |done, total| {
                    bar.show(done, total)
                });
            bar.finish();
            let counts = exported.inspect_err(|_| {
                let _ = std::fs::remove_file(&file);
            })?;
            eprintln!(
                "{} keys exported to {} ({}), {} bytes, {} of types an RDB file cannot hold left out, {} function libraries",
                counts.keys,
                file.display(),
                by_type(&counts),
                counts.bytes,
                counts.skipped,
                counts.functions
            );
        }
        other => return Err(format!("unknown command '{other}'\n{USAGE}")),
    }
    if let Some(extra) = args.iter().find(|a| a.starts_with("--")) {
        return Err(format!("unknown option {extra}\n{USAGE}"));
    }
    Ok(())
}

/// Copies the server's own files (`rediskv-*`: saved functions, SWAPDB mappings) beside the
/// store; returns how many.
fn copy_side_files(from: &Path, to: &Path) -> Result<usize, String> {
    let mut copied = 0;
    for entry in std::fs::read_dir(from).map_err(|e| e.to_string())?.flatten() {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with("rediskv-") && entry.path().is_file() {
            std::fs::copy(entry.path(), to.join(&name)).map_err(|e| e.to_string())?;
            copied += 1;
        }
    }
    Ok(copied)
}

/// `string 3, hash 2, …`: the keys by type.
fn by_type(counts: &rediskv::server::RdbCounts) -> String {
    let parts: Vec<String> = counts.by_type.iter().map(|(ty, n)| format!("{ty} {n}")).collect();
    if parts.is_empty() { "none".into() } else { parts.join(", ") }
}

/// A progress bar on stderr, redrawn at most ten times a second on a terminal; elsewhere (a
/// log) only its last state, once, at the end.
struct Progress {
    last: Option<Instant>,
    /// The last figures shown or, off a terminal, given.
    figures: Option<(u64, u64)>,
    unit: &'static str,
    terminal: bool,
}

impl Progress {
    fn new(unit: &'static str) -> Self {
        use std::io::IsTerminal;
        Progress { last: None, figures: None, unit, terminal: std::io::stderr().is_terminal() }
    }

    fn show(&mut self, done: u64, total: u64) {
        let due = self.last.is_none_or(|t| t.elapsed() >= Duration::from_millis(100)) || done >= total;
        if !self.terminal || !due {
            if !self.terminal {
                self.figures = Some((done, total));
            }
            return;
        }
        self.last = Some(Instant::now());
        self.figures = Some((done, total));
        self.draw(done, total);
    }

    fn draw(&self, done: u64, total: u64) {
        let width = 30;
        let filled = (done.min(total) * width).checked_div(total).unwrap_or(width) as usize;
        let percent = (done.min(total) * 100).checked_div(total).unwrap_or(100);
        eprint!(
            "\r[{}{}] {percent:>3}% {done}/{total} {}",
            "#".repeat(filled),
            "-".repeat(width as usize - filled),
            self.unit
        );
    }

    fn finish(&self) {
        if let Some((done, total)) = self.figures {
            if !self.terminal {
                self.draw(done, total);
            }
            eprintln!();
        }
    }
}

fn main() {
    if let Err(e) = run(std::env::args().skip(1).collect()) {
        eprintln!("rediskv-inspect: {e}");
        std::process::exit(1);
    }
}
