//! The files `rediskv-server` keeps beside a disk store's data: the function libraries
//! (`rediskv-functions`: `<length>\n<code>` per library) and each namespace's SWAPDB mapping
//! (`rediskv-dbslots-<namespace in hex>`: the database → namespace slot numbers, spaced).
//! Each is written to a temporary file, synced (the function libraries: when asked), then
//! renamed over the old one: a crash leaves one or the other. `rediskv-inspect` reads and
//! writes them too.
//!
//! A file a replica writes while applying its primary's stream starts with a line
//! `position <opaque>`: the stream position after the command that wrote it, renamed into
//! place with the change itself, so that the change and the position it stands at are one
//! durable step ([`positions`]).

use std::io::Write;
use std::path::{Path, PathBuf};

/// The function libraries' file in `dir`.
const FUNCTIONS: &str = "rediskv-functions";

/// Where namespace `ns`'s SWAPDB mapping is kept in `dir`.
fn slots_file(dir: &Path, ns: &str) -> PathBuf {
    let hex: String = ns.bytes().map(|b| format!("{b:02x}")).collect();
    dir.join(format!("rediskv-dbslots-{hex}"))
}

/// The first line of a file written at a stream position.
const POSITION: &str = "position ";

/// Writes `bytes` to `path` through a temporary file, after a `position` line when given,
/// synced first when `sync`.
fn replace(path: &Path, bytes: &[u8], position: Option<&str>, sync: bool) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut file = std::fs::File::create(&tmp)?;
        if let Some(position) = position {
            file.write_all(format!("{POSITION}{position}\n").as_bytes())?;
        }
        file.write_all(bytes)?;
        if sync {
            file.sync_all()?;
        }
    }
    std::fs::rename(tmp, path)
}

/// A file's text without its `position` line, and the position.
fn split_position(text: &str) -> (Option<&str>, &str) {
    match text.strip_prefix(POSITION).and_then(|rest| rest.split_once('\n')) {
        Some((position, rest)) => (Some(position), rest),
        None => (None, text),
    }
}

/// Every server file in `dir`.
fn server_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name == FUNCTIONS || (name.starts_with("rediskv-dbslots-") && !name.ends_with(".tmp"))
        })
        .collect()
}

/// The stream positions the server files in `dir` were written at.
pub fn positions(dir: &Path) -> Vec<String> {
    let texts = server_files(dir).into_iter().filter_map(|p| std::fs::read_to_string(p).ok());
    texts.filter_map(|text| split_position(&text).0.map(str::to_string)).collect()
}

/// Removes the `position` line of every server file in `dir` (the stream position stored
/// with the data changes: the files' ones no longer stand for it).
///
/// # Errors
/// A file could not be rewritten.
pub fn forget_positions(dir: &Path) -> std::io::Result<()> {
    for path in server_files(dir) {
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        if let (Some(_), rest) = split_position(&text) {
            replace(&path, rest.as_bytes(), None, true)?;
        }
    }
    Ok(())
}

/// Saves the libraries' code in `dir` (at stream `position`, if any), synced first when
/// `sync` (the server asks it under `appendfsync always`; otherwise the file reaches the OS
/// as the engine's writes do: an fsync per FUNCTION LOAD would cost more than the load).
///
/// # Errors
/// The file could not be written.
pub fn save_functions(
    dir: &Path,
    codes: &[String],
    position: Option<&str>,
    sync: bool,
) -> std::io::Result<()> {
    let text: String = codes.iter().map(|code| format!("{}\n{code}", code.len())).collect();
    replace(&dir.join(FUNCTIONS), text.as_bytes(), position, sync)
}

/// The libraries [`save_functions`] saved in `dir`, if any.
pub fn load_functions(dir: &Path) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(dir.join(FUNCTIONS)).ok()?;
    let mut codes = Vec::new();
    let mut rest = split_position(&text).1;
    while let Some((len, after)) = rest.split_once('\n') {
        let len: usize = len.parse().ok()?;
        codes.push(after.get(..len)?.to_string());
        rest = &after[len..];
    }
    Some(codes)
}

/// Saves namespace `ns`'s database → namespace mapping in `dir` (at stream `position`, if
/// any).
///
/// # Errors
/// The file could not be written.
pub fn save_db_slots(dir: &Path, ns: &str, slots: &[usize], position: Option<&str>) -> std::io::Result<()> {
    let text: Vec<String> = slots.iter().map(usize::to_string).collect();
    replace(&slots_file(dir, ns), text.join(" ").as_bytes(), position, true)
}

/// The mapping [`save_db_slots`] saved in `dir` for `ns`, if any.
pub fn load_db_slots(dir: &Path, ns: &str) -> Option<Vec<usize>> {
    let text = std::fs::read_to_string(slots_file(dir, ns)).ok()?;
    split_position(&text).1.split_whitespace().map(|n| n.parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_saved_loads_back() {
        let dir = crate::testkit::TempDir::new("server-files");
        assert_eq!(load_functions(dir.path()), None);
        let codes = vec!["#!lua name=a\nreturn 1\n".to_string(), "#!lua name=b\n".to_string()];
        save_functions(dir.path(), &codes, None, true).expect("saved");
        assert_eq!(load_functions(dir.path()), Some(codes.clone()));
        save_db_slots(dir.path(), "ns", &[1, 0, 2], None).expect("saved");
        assert_eq!(load_db_slots(dir.path(), "ns"), Some(vec![1, 0, 2]));
        assert_eq!(load_db_slots(dir.path(), "other"), None);
        assert!(positions(dir.path()).is_empty());
    }

    #[test]
    fn a_position_is_kept_with_the_change_until_forgotten() {
        let dir = crate::testkit::TempDir::new("server-files-position");
        let codes = vec!["#!lua name=a\nreturn 1\n".to_string()];
        save_functions(dir.path(), &codes, Some("id 10 0"), false).expect("saved");
        save_db_slots(dir.path(), "ns", &[1, 0], Some("id 20 3")).expect("saved");
        assert_eq!(load_functions(dir.path()), Some(codes.clone()));
        assert_eq!(load_db_slots(dir.path(), "ns"), Some(vec![1, 0]));
        let mut found = positions(dir.path());
        found.sort();
        assert_eq!(found, ["id 10 0", "id 20 3"]);
        forget_positions(dir.path()).expect("rewritten");
        assert!(positions(dir.path()).is_empty());
        assert_eq!(load_functions(dir.path()), Some(codes));
        assert_eq!(load_db_slots(dir.path(), "ns"), Some(vec![1, 0]));
    }
}
