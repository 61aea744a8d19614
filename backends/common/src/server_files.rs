//! The files `rediskv-server` keeps beside a disk store's data: the function libraries
//! (`rediskv-functions`: `<length>\n<code>` per library) and each namespace's SWAPDB mapping
//! (`rediskv-dbslots-<namespace in hex>`: the database → namespace slot numbers, spaced).
//! Each is written to a temporary file, synced, then renamed over the old one: a crash
//! leaves one or the other. `rediskv-inspect` reads and writes them too.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The function libraries' file in `dir`.
const FUNCTIONS: &str = "rediskv-functions";

/// Where namespace `ns`'s SWAPDB mapping is kept in `dir`.
fn slots_file(dir: &Path, ns: &str) -> PathBuf {
    let hex: String = ns.bytes().map(|b| format!("{b:02x}")).collect();
    dir.join(format!("rediskv-dbslots-{hex}"))
}

/// Writes `bytes` to `path` through a synced temporary file.
fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    std::fs::rename(tmp, path)
}

/// Saves the libraries' code in `dir`.
///
/// # Errors
/// The file could not be written.
pub fn save_functions(dir: &Path, codes: &[String]) -> std::io::Result<()> {
    let text: String = codes.iter().map(|code| format!("{}\n{code}", code.len())).collect();
    replace(&dir.join(FUNCTIONS), text.as_bytes())
}

/// The libraries [`save_functions`] saved in `dir`, if any.
pub fn load_functions(dir: &Path) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(dir.join(FUNCTIONS)).ok()?;
    let mut codes = Vec::new();
    let mut rest = text.as_str();
    while let Some((len, after)) = rest.split_once('\n') {
        let len: usize = len.parse().ok()?;
        codes.push(after.get(..len)?.to_string());
        rest = &after[len..];
    }
    Some(codes)
}

/// Saves namespace `ns`'s database → namespace mapping in `dir`.
///
/// # Errors
/// The file could not be written.
pub fn save_db_slots(dir: &Path, ns: &str, slots: &[usize]) -> std::io::Result<()> {
    let text: Vec<String> = slots.iter().map(usize::to_string).collect();
    replace(&slots_file(dir, ns), text.join(" ").as_bytes())
}

/// The mapping [`save_db_slots`] saved in `dir` for `ns`, if any.
pub fn load_db_slots(dir: &Path, ns: &str) -> Option<Vec<usize>> {
    let text = std::fs::read_to_string(slots_file(dir, ns)).ok()?;
    text.split_whitespace().map(|n| n.parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_saved_loads_back() {
        let dir = crate::testkit::TempDir::new("server-files");
        assert_eq!(load_functions(dir.path()), None);
        let codes = vec!["#!lua name=a\nreturn 1\n".to_string(), "#!lua name=b\n".to_string()];
        save_functions(dir.path(), &codes).expect("saved");
        assert_eq!(load_functions(dir.path()), Some(codes));
        save_db_slots(dir.path(), "ns", &[1, 0, 2]).expect("saved");
        assert_eq!(load_db_slots(dir.path(), "ns"), Some(vec![1, 0, 2]));
        assert_eq!(load_db_slots(dir.path(), "other"), None);
    }
}
