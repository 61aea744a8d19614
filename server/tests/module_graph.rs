//! The server's modules import each other without a circle: a reader can start at any
//! module and find everything it uses below it. A module is a file of `src/` or a directory
//! (`client/`); an import is any `crate::<module>` path in its code (comments and test
//! modules left out).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[path = "../../tests/support/import_graph.rs"]
mod import_graph;

use import_graph::{circle, rust_files};

/// Module name -> the modules its code names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in rust_files(&src) {
        let relative = file.strip_prefix(&src).unwrap();
        let first = relative.components().next().unwrap().as_os_str().to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        let uses = graph.entry(module.clone()).or_default();
        for line in code.lines().map(str::trim_start).filter(|l| !l.starts_with("//")) {
            for (at, _) in line.match_indices("crate::") {
                let rest = &line[at + "crate::".len()..];
                if let Some(list) = rest.strip_prefix('{') {
                    // `use crate::{a, b::c};`
                    let list = list.split('}').next().unwrap_or("");
                    uses.extend(list.split(',').map(|p| p.trim().split("::").next().unwrap().to_string()));
                } else {
                    let name: String =
                        rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    uses.insert(name);
                }
            }
        }
        uses.retain(|m| !m.is_empty() && *m != module);
    }
    graph
}

#[test]
fn the_server_modules_import_without_a_circle() {
    let graph = graph();
    assert!(graph.len() > 20, "found only {:?}", graph.keys());
    assert!(graph["conn"].contains("client"), "the import scan finds nothing: {graph:?}");
    if let Some(found) = circle(&graph) {
        panic!("import circle: {}", found.join(" -> "));
    }
}

#[test]
fn a_circle_is_found() {
    let mut graph = graph();
    graph.get_mut("sync").unwrap().insert("state".into());
    assert!(circle(&graph).is_some());
}
