//! What a test does when a program it compares with (redis-server, etcd, redis-py) is not
//! installed: under `CI=true` it fails; elsewhere it says so on the real stderr — not through
//! `eprintln!`, which the test harness captures — and the caller returns without comparing.

use std::io::Write;

/// Reports that `test` cannot run because `tool` is missing (`hint` says how to install it).
///
/// # Panics
/// When the environment has `CI=true`: there, a missing tool is a failure.
pub fn missing_tool(test: &str, tool: &str, hint: &str) {
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test}: `{tool}` is required when CI=true ({hint})");
    }
    let _ = writeln!(
        std::io::stderr(),
        "\n!!! SKIPPED {test}: `{tool}` is not installed ({hint}); this test compared nothing !!!\n"
    );
}
