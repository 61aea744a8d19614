//! The library's modules import each other without a circle, and each layer imports only
//! the layers below it: `error`, then `codec`, `backend`, `commands`, then `gc` and `fsck`.
//!
//! A module is a file of `src/`, of a layer's directory (`commands/db.rs`) or of
//! `commands/families/`, or a directory of files (`commands/families/zset/`); a layer's
//! `mod.rs` is the layer's own module. An import is a path the code names (`crate::`,
//! `super::`, `self::` or a child module's name); a name imported through a re-export
//! counts as an import of the module that defines it, and a
//! `pub use` itself imports nothing. Comments and test modules are left out.

#[path = "support/import_graph.rs"]
mod import_graph;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use import_graph::{Graph, circle, rust_files};

/// The layers, lowest first; a module may import its own layer and the ones before it.
const LAYERS: &[&[&str]] = &[&["error"], &["codec"], &["backend"], &["commands"], &["gc", "fsck"]];

/// A module path: `["commands", "zset", "core"]`; the crate root is empty.
type ModPath = Vec<String>;

/// One use-tree leaf: the path it names and the name it binds.
struct Import {
    path: Vec<String>,
    name: String,
    public: bool,
}

/// A file's module path and what its code names.
struct Source {
    module: ModPath,
    imports: Vec<Import>,
    /// Paths named in code outside `use` statements.
    paths: Vec<Vec<String>>,
}

/// Identifiers and punctuation (`::` as one token) of `code`, without comments and literals.
fn tokens(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied().unwrap_or(' ');
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == '*' {
            i += 2;
            while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if c == 'r'
            && (next == '"' || next == '#')
            && chars[i + 1..].iter().find(|c| **c != '#') == Some(&'"')
        {
            let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
            i += 2 + hashes;
            while i < chars.len()
                && !(chars[i] == '"' && chars[i + 1..].iter().take(hashes).all(|c| *c == '#'))
            {
                i += 1;
            }
            i += 1 + hashes;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == '\'' {
            // A char literal ('a', '\n', '\'') or a lifetime ('a).
            if next == '\\' {
                i += 3;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
            }
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == ':' && next == ':' {
            out.push("::".into());
            i += 2;
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

/// The leaves of the use tree at `tokens[*at..]`, each prefixed by `prefix`.
fn use_tree(tokens: &[String], at: &mut usize, prefix: &[String], public: bool, out: &mut Vec<Import>) {
    let mut path = prefix.to_vec();
    loop {
        match tokens[*at].as_str() {
            "{" => {
                *at += 1;
                while tokens[*at] != "}" {
                    use_tree(tokens, at, &path, public, out);
                    if tokens[*at] == "," {
                        *at += 1;
                    }
                }
                *at += 1;
                return;
            }
            "*" => {
                *at += 1;
                return;
            }
            "::" => *at += 1,
            segment => {
                *at += 1;
                if segment != "self" || path.is_empty() {
                    path.push(segment.to_string());
                }
                if tokens[*at] != "::" {
                    let mut name = path.last().unwrap().clone();
                    if tokens[*at] == "as" {
                        name = tokens[*at + 1].clone();
                        *at += 2;
                    }
                    out.push(Import { path, name, public });
                    return;
                }
            }
        }
    }
}

/// Every `.rs` file under `src`, with its module path.
fn sources(src: &Path) -> Vec<Source> {
    rust_files(src)
        .into_iter()
        .map(|file| {
            let relative = file.strip_prefix(src).unwrap().with_extension("");
            let mut module: ModPath =
                relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
            if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
                module.pop();
            }
            let text = std::fs::read_to_string(&file).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap();
            let tokens = tokens(code);
            let (mut imports, mut paths) = (Vec::new(), Vec::new());
            let mut at = 0;
            while at < tokens.len() {
                if tokens[at] == "pub" && tokens.get(at + 1).is_some_and(|t| t == "(") {
                    // `pub(crate)`, `pub(in crate::backend)`: a visibility, not an import.
                    at += tokens[at..].iter().position(|t| t == ")").unwrap() + 1;
                    continue;
                }
                if tokens[at] == "use" {
                    let public = at > 0 && (tokens[at - 1] == "pub" || tokens[at - 1] == ")");
                    at += 1;
                    use_tree(&tokens, &mut at, &[], public, &mut imports);
                    continue;
                }
                let starts_path = tokens.get(at + 1).is_some_and(|t| t == "::")
                    && (at == 0 || tokens[at - 1] != "::")
                    && tokens[at].chars().all(|c| c.is_alphanumeric() || c == '_');
                if starts_path {
                    let mut path = vec![tokens[at].clone()];
                    while tokens.get(at + 1).is_some_and(|t| t == "::")
                        && tokens
                            .get(at + 2)
                            .is_some_and(|t| t.chars().all(|c| c.is_alphanumeric() || c == '_'))
                    {
                        path.push(tokens[at + 2].clone());
                        at += 2;
                    }
                    paths.push(path);
                }
                at += 1;
            }
            Source { module, imports, paths }
        })
        .collect()
}

/// The graph's node for a module: a file of `src/`, of a layer or of `commands/families/`
/// (deeper files fold into their directory's module).
fn node(module: &[String]) -> String {
    let depth = if module.get(1).is_some_and(|m| m == "families") { 3 } else { 2 };
    module[..module.len().min(depth)].join("::")
}

/// Module name -> the modules its code names, and the crate's modules.
fn graph() -> Graph {
    let sources = sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let modules: BTreeSet<ModPath> = sources.iter().map(|s| s.module.clone()).collect();
    // What each module's `use` statements bring into scope, by name, as absolute paths.
    let absolute = |module: &ModPath, path: &[String]| -> Option<Vec<String>> {
        let mut base = module.clone();
        let mut rest = path;
        match path.first()?.as_str() {
            "crate" => {
                base.clear();
                rest = &path[1..];
            }
            "self" => rest = &path[1..],
            "super" => {
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
            }
            child if modules.contains(&[module.as_slice(), &[child.to_string()]].concat()) => {}
            _ => return None,
        }
        Some([base, rest.to_vec()].concat())
    };
    let mut scope: BTreeMap<ModPath, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for source in &sources {
        for import in &source.imports {
            if let Some(path) = absolute(&source.module, &import.path) {
                scope.entry(source.module.clone()).or_default().insert(import.name.clone(), path);
            }
        }
    }
    // The module that defines what an absolute path names, through re-exports.
    let resolve = |path: Vec<String>| -> ModPath {
        let mut path = path;
        let mut module = ModPath::new();
        let mut at = 0;
        for _ in 0..16 {
            let Some(segment) = path.get(at) else { break };
            let deeper = [module.as_slice(), std::slice::from_ref(segment)].concat();
            if modules.contains(&deeper) {
                module = deeper;
                at += 1;
            } else if let Some(target) = scope.get(&module).and_then(|s| s.get(segment)) {
                path = [target.as_slice(), &path[at + 1..]].concat();
                module.clear();
                at = 0;
            } else {
                break;
            }
        }
        module
    };
    let mut graph = Graph::new();
    for source in &sources {
        if source.module.is_empty() {
            continue;
        }
        let named = source.imports.iter().filter(|i| !i.public).map(|i| &i.path).chain(&source.paths);
        let from = node(&source.module);
        let uses = graph.entry(from.clone()).or_default();
        for path in named {
            if let Some(path) = absolute(&source.module, path) {
                let to = resolve(path);
                if !to.is_empty() && node(&to) != from {
                    uses.insert(node(&to));
                }
            }
        }
    }
    graph
}

/// The place of a module's layer in [`LAYERS`].
fn layer(module: &str) -> usize {
    let top = module.split("::").next().unwrap();
    LAYERS.iter().position(|l| l.contains(&top)).unwrap_or_else(|| panic!("{module} is in no layer"))
}

/// Imports that reach a layer above the importer's.
fn upward(graph: &Graph) -> Vec<String> {
    let mut found = Vec::new();
    for (from, uses) in graph {
        for to in uses.iter().filter(|to| layer(to) > layer(from)) {
            found.push(format!("{from} -> {to}"));
        }
    }
    found
}

#[test]
fn the_library_modules_import_without_a_circle() {
    let graph = graph();
    assert!(graph.len() > 40, "found only {:?}", graph.keys());
    assert!(
        graph["commands::engine"].contains("commands::locks"),
        "the import scan finds nothing: {graph:?}"
    );
    if let Some(found) = circle(&graph) {
        panic!("import circle: {}", found.join(" -> "));
    }
}

#[test]
fn each_layer_imports_only_the_layers_below() {
    let graph = graph();
    assert!(graph["gc"].contains("commands::engine"), "the import scan misses re-exports: {graph:?}");
    let found = upward(&graph);
    assert!(found.is_empty(), "imports of a higher layer: {found:?}");
}

#[test]
fn a_circle_and_an_upward_import_are_found() {
    let mut graph = graph();
    graph.get_mut("commands::locks").unwrap().insert("commands::engine".into());
    assert!(circle(&graph).is_some());
    graph.get_mut("codec::key").unwrap().insert("gc".into());
    assert_eq!(upward(&graph), ["codec::key -> gc"]);
}
