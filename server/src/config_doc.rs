//! docs/configuration.md is generated from the code: the flags of [`crate::flags::FLAGS`]
//! and every parameter of [`Config`] with its default and what CONFIG SET accepts. The test
//! fails when the file differs from what the code says;
//! `UPDATE_DOCS=1 cargo test -p rediskv-server --bin rediskv-server config_doc`
//! writes it.

use std::fmt::Write as _;
use std::path::Path;

use crate::config::Config;
use crate::flags::FLAGS;

/// A table cell: pipes escaped, as GitHub's tables need even inside code spans.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

fn code(text: &str) -> String {
    if text.is_empty() { "`\"\"`".to_string() } else { format!("`{}`", cell(text)) }
}

fn configuration_md() -> String {
    let mut out = String::from(
        "# Configuration\n\n\
         <!-- Generated from server/src/flags.rs and server/src/config.rs (redis_config.tsv) by\n\
         `UPDATE_DOCS=1 cargo test -p rediskv-server --bin rediskv-server config_doc`;\n\
         the same test fails when this file and the code disagree. Do not edit by hand. -->\n\n\
         `rediskv-server [redis.conf] [--flag value]…`: the server reads a redis.conf-style file\n\
         (the first argument, or `--config FILE`), then the command line. The flags below choose\n\
         what Redis has no parameter for; every Redis parameter is a flag too (`--port 7000`,\n\
         `--appendfsync always`; `-p` and `-b` are short for `--port` and `--bind`), and CONFIG\n\
         SET changes the ones it accepts while the server runs. Which parameters the server acts\n\
         on and which it only validates and stores is in [server.md](server.md#server-answers-redis-7015-is-the-reference)\n\
         (CONFIG) and [operations.md](operations.md).\n\n\
         ## Flags\n\n\
         | flag | value | default | what |\n|---|---|---|---|\n",
    );
    for flag in FLAGS {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} |",
            flag.name,
            code(flag.value),
            cell(flag.default),
            cell(flag.what)
        );
    }
    out.push_str(
        "\n## Parameters\n\n\
         Every parameter of redis-server 7.0.15's `CONFIG GET *`, with Redis' default (except\n\
         `port`, `bind` and `dir`, this server's own) and what CONFIG SET accepts. Hidden\n\
         parameters answer CONFIG GET only when named exactly, as in Redis.\n\n\
         | parameter | default | CONFIG SET accepts |\n|---|---|---|\n",
    );
    for (name, default, accepts, hidden) in Config::new().described() {
        let default = if name == "dir" { "the working directory".to_string() } else { code(default) };
        let hidden = if hidden { " (hidden)" } else { "" };
        let _ = writeln!(out, "| `{name}`{hidden} | {default} | {} |", cell(&accepts));
    }
    out
}

#[test]
fn configuration_md_matches_the_code() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/configuration.md");
    let generated = configuration_md();
    if std::env::var("UPDATE_DOCS").as_deref() == Ok("1") {
        std::fs::write(&path, &generated).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == generated,
        "docs/configuration.md differs from the code: run UPDATE_DOCS=1 cargo test -p rediskv-server --bin rediskv-server config_doc"
    );
}

#[test]
fn flags_are_the_ones_main_reads_with_its_defaults() {
    // Every `--name` literal of main.rs is a flag of the table, and the other way round.
    let main = include_str!("main.rs");
    let mut read: Vec<&str> = main
        .split('"')
        .filter(|s| {
            s.starts_with("--")
                && s.len() > 2
                && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
        .filter(|s| *s != "--help")
        .collect();
    read.sort_unstable();
    read.dedup();
    let mut listed: Vec<&str> = FLAGS.iter().map(|f| f.name).collect();
    listed.sort_unstable();
    assert_eq!(read, listed);
    let default = |name: &str| FLAGS.iter().find(|f| f.name == name).unwrap().default;
    let memory = crate::store::DiskMemory::default();
    assert_eq!(crate::config::memory(default("--cache-size")), Some(memory.cache_bytes as i64));
    assert_eq!(crate::config::memory(default("--write-buffer-size")), Some(memory.write_buffer_bytes as i64));
}
