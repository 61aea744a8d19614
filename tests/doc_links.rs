//! Every relative link of README.md, CHANGELOG.md and docs/*.md reaches a file of the
//! repository, and every `#anchor` a heading of its target, named as GitHub names them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The lines of a Markdown file outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// The anchors of a Markdown file's headings (a repeated one gets `-1`, `-2`…, as on GitHub).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for line in prose(text) {
        let Some(heading) = line.strip_prefix('#') else { continue };
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        // Links and code spans show their text only.
        let text: String = heading.replace('`', "");
        let base = slug(&text);
        let mut anchor = base.clone();
        let mut n = 0;
        while !seen.insert(anchor.clone()) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
    }
    seen
}

/// The targets of `[text](target)` links on a file's prose lines, code spans left out.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        let line: String = line.split('`').step_by(2).collect::<Vec<_>>().join("");
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else { break };
            out.push(rest[..end].to_string());
            rest = &rest[end..];
        }
    }
    out
}

fn documents(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> =
        ["README.md", "CHANGELOG.md"].iter().map(|f| root.join(f)).filter(|f| f.exists()).collect();
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    files.sort();
    files
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in documents(root) {
        let text = std::fs::read_to_string(&file).unwrap();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = match link.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (link.as_str(), None),
            };
            let target = if path.is_empty() { file.clone() } else { file.parent().unwrap().join(path) };
            let name = file.strip_prefix(root).unwrap().display().to_string();
            if !target.exists() {
                broken.push(format!("{name}: {link} (no such file)"));
                continue;
            }
            if let Some(anchor) = anchor {
                let target_text = std::fs::read_to_string(&target).unwrap_or_default();
                if !anchors(&target_text).contains(anchor) {
                    broken.push(format!("{name}: {link} (no such heading)"));
                }
            }
        }
    }
    assert!(checked > 30, "only {checked} links found: is the parser broken?");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_are_named_as_on_github() {
    assert_eq!(
        slug("Server answers (Redis 7.0.15 is the reference)"),
        "server-answers-redis-7015-is-the-reference"
    );
    assert_eq!(slug("fjall's memory against its configuration"), "fjalls-memory-against-its-configuration");
    assert_eq!(slug("Redis' own test suite"), "redis-own-test-suite");
    let twice = anchors("# A\n## A\n```\n# not a heading\n```\n### `B` c\n");
    assert_eq!(twice, ["a", "a-1", "b-c"].iter().map(|s| s.to_string()).collect());
}
