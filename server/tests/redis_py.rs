//! Runs `redis_py_smoke.py` (the official redis-py 8 client) against the server in RESP2
//! and RESP3 (redis-py's default), with and without a password.
//! Needs python3 with `redis` installed (`pip install redis`): a loud skip without it, a
//! failure under `CI=true`.

mod common;

use std::process::Command;

#[test]
fn redis_py_works_with_the_server() {
    let has_redis_py =
        Command::new("python3").args(["-c", "import redis"]).status().is_ok_and(|s| s.success());
    if !has_redis_py {
        common::missing_tool(
            "redis_py_works_with_the_server",
            "python3 -c 'import redis'",
            "pip install redis",
        );
        return;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/redis_py_smoke.py");
    for (protocol, password) in [("2", None), ("2", Some("pw")), ("3", None), ("3", Some("pw"))] {
        let server = match password {
            Some(pw) => common::rediskv(&["--requirepass", pw]),
            None => common::rediskv(&[]),
        };
        let mut cmd = Command::new("python3");
        cmd.arg(script).arg(server.port.to_string()).arg(protocol);
        cmd.args(password);
        let out = cmd.output().expect("run python3");
        assert!(
            out.status.success(),
            "redis-py smoke test failed (RESP{protocol}, password {password:?}):\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
