//! ACL users compared with redis-server 7.0: a script of ACL SETUSER rules, the replies of
//! ACL LIST/GETUSER/CAT/DRYRUN/LOG and the NOPERM errors of the commands those users run.
//! Then what only rediskv has: users confined to a namespace, and the ACL file.

mod common;

use common::{Client, Server, Value, rediskv, same_as_redis};

fn bulk(s: &str) -> Value {
    Value::Bulk(Some(s.as_bytes().to_vec()))
}

/// Redis lists single-command rules in the order of its command hash table (seeded at
/// random): sorts them within the root rules and within each `(…)` selector, so two
/// servers' descriptions compare equal when they say the same.
fn sort_command_rules(text: &str) -> String {
    // (opens a selector, the rule without parentheses, closes it), by segment.
    let mut segments: Vec<Vec<(bool, &str, bool)>> = vec![Vec::new()];
    for token in text.split(' ') {
        let open = token.starts_with('(');
        let close = token.ends_with(')');
        if open {
            segments.push(Vec::new());
        }
        let core = token.trim_start_matches('(').trim_end_matches(')');
        segments.last_mut().unwrap().push((open, core, close));
    }
    let single = |t: &str| (t.starts_with('+') || t.starts_with('-')) && !t[1..].starts_with('@');
    let mut out = Vec::new();
    for mut segment in segments {
        let mut rules: Vec<&str> = segment.iter().map(|t| t.1).filter(|t| single(t)).collect();
        rules.sort_unstable();
        let mut sorted = rules.into_iter();
        for token in segment.iter_mut().filter(|t| single(t.1)) {
            token.1 = sorted.next().unwrap();
        }
        out.extend(segment.iter().map(|&(open, core, close)| {
            format!("{}{core}{}", if open { "(" } else { "" }, if close { ")" } else { "" })
        }));
    }
    out.join(" ")
}

/// Replies with what may differ between two servers made comparable: command-rule order,
/// ACL CAT order, ACL LOG ages and client lines, GENPASS output (its length kept).
fn normalize(cmd: &[&str], reply: Value) -> Value {
    let sub = cmd.get(1).map(|s| s.to_ascii_lowercase()).unwrap_or_default();
    match (cmd[0].to_ascii_lowercase().as_str(), sub.as_str(), reply) {
        ("acl", "list", Value::Array(Some(lines))) => {
            Value::Array(Some(lines.iter().map(|l| bulk(&sort_command_rules(&l.text()))).collect()))
        }
        ("acl", "getuser", Value::Array(Some(fields))) => Value::Array(Some(
            fields
                .into_iter()
                .map(|f| match f {
                    Value::Bulk(Some(b)) if b.starts_with(b"-@") || b.starts_with(b"+@") => {
                        bulk(&sort_command_rules(&String::from_utf8_lossy(&b)))
                    }
                    Value::Array(Some(selectors)) => Value::Array(Some(
                        selectors
                            .into_iter()
                            .map(|s| match s {
                                Value::Array(Some(f)) => Value::Array(Some(
                                    f.into_iter()
                                        .map(|v| match v {
                                            Value::Bulk(Some(b))
                                                if b.starts_with(b"-@") || b.starts_with(b"+@") =>
                                            {
                                                bulk(&sort_command_rules(&String::from_utf8_lossy(&b)))
                                            }
                                            v => v,
                                        })
                                        .collect(),
                                )),
                                s => s,
                            })
                            .collect(),
                    )),
                    f => f,
                })
                .collect(),
        )),
        ("acl", "cat", Value::Array(Some(mut names))) if cmd.len() == 3 => {
            names.sort_by_key(Value::text);
            Value::Array(Some(names))
        }
        ("acl", "genpass", Value::Bulk(Some(b))) => Value::Int(b.len() as i64),
        ("acl", "log", Value::Array(Some(entries))) => Value::Array(Some(
            entries
                .into_iter()
                .map(|e| match e {
                    Value::Array(Some(mut f)) if f.len() == 14 => {
                        f[11] = bulk("age");
                        f[13] = bulk("client");
                        Value::Array(Some(f))
                    }
                    e => e,
                })
                .collect(),
        )),
        (_, _, reply) => reply,
    }
}

fn run(c: &mut Client, out: &mut Vec<Value>, script: &[&[&str]]) {
    for cmd in script {
        let reply = c.cmd(cmd);
        out.push(normalize(cmd, reply));
    }
}

fn acl_script(server: &Server) -> Vec<Value> {
    let mut out = Vec::new();
    let mut admin = server.client();
    run(
        &mut admin,
        &mut out,
        &[
            &["ACL", "WHOAMI"],
            &["ACL", "USERS"],
            &["ACL", "LIST"],
            &["ACL", "SETUSER", "alice"],
            &[
                "ACL", "SETUSER", "bob", "on", ">pw", "~app:*", "%R~ro:*", "&chan*", "+@read", "+set",
                "-keys", "(+get", "~x*)",
            ],
            &["ACL", "SETUSER", "carol", "on", "nopass", "+@all", "-@dangerous", "~*"],
            &[
                "ACL",
                "SETUSER",
                "dave",
                "on",
                ">p1",
                ">p2",
                "<p1",
                "-@all",
                "+@hash",
                "+@string",
                "-append",
                "+config|get",
                "+select|0",
                "%W~w:*",
                "%RW~rw:*",
            ],
            &[
                "ACL",
                "SETUSER",
                "erin",
                "reset",
                "+@all",
                "-@write",
                "+set",
                "allkeys",
                "allchannels",
                "-@pubsub",
            ],
            &[
                "ACL",
                "SETUSER",
                "frank",
                "on",
                "#e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                "+@all",
                "-client|kill",
                "-debug",
                "~*",
                "(%R~r* +@read)",
                "(&c +publish)",
            ],
            &["ACL", "SETUSER", "frank", "clearselectors", "-@admin", "+@dangerous"],
            // Commands Redis has and rediskv does not run: rules name them all the same.
            &[
                "ACL",
                "SETUSER",
                "henry",
                "on",
                "nopass",
                "-@all",
                "+module|load",
                "+command|docs",
                "+restore-asking",
            ],
            &["ACL", "LIST"],
            &["ACL", "USERS"],
            &["ACL", "GETUSER", "bob"],
            &["ACL", "GETUSER", "dave"],
            &["ACL", "GETUSER", "erin"],
            &["ACL", "GETUSER", "frank"],
            &["ACL", "GETUSER", "nosuch"],
            &["ACL", "SETUSER", "g", "bogus"],
            &["ACL", "SETUSER", "g", "+nosuch"],
            &["ACL", "SETUSER", "g", "-@nosuch"],
            &["ACL", "SETUSER", "g", "~*", "~a"],
            &["ACL", "SETUSER", "g", "&*", "&a"],
            &["ACL", "SETUSER", "g", "#abc"],
            &["ACL", "SETUSER", "g", "<nope"],
            &["ACL", "SETUSER", "g", "!e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"],
            &["ACL", "SETUSER", "g", "+config|get|x"],
            &["ACL", "SETUSER", "g", "-select|0"],
            &["ACL", "SETUSER", "g", "+debug|"],
            &["ACL", "SETUSER", "g", "%X~a"],
            &["ACL", "SETUSER", "g", "(+get"],
            &["ACL", "SETUSER", "g", "on", "(+get", "bogus)"],
            &["ACL", "SETUSER", "a b"],
            &["ACL", "USERS"],
            &["ACL", "DELUSER", "default"],
            &["ACL", "DELUSER", "alice", "zz"],
            &["ACL", "CAT"],
            &["ACL", "CAT", "geo"],
            &["ACL", "CAT", "hash"],
            &["ACL", "CAT", "connection"],
            &["ACL", "CAT", "nosuch"],
            &["ACL", "CAT", "a", "b"],
            &["ACL", "GENPASS"],
            &["ACL", "GENPASS", "5"],
            &["ACL", "GENPASS", "0"],
            &["ACL", "GENPASS", "x"],
            &["ACL", "DRYRUN", "bob", "set", "z", "1"],
            &["ACL", "DRYRUN", "bob", "get", "x1"],
            &["ACL", "DRYRUN", "bob", "get", "ro:1"],
            &["ACL", "DRYRUN", "bob", "set", "ro:1", "v"],
            &["ACL", "DRYRUN", "bob", "del", "app:1"],
            &["ACL", "DRYRUN", "bob", "mget", "app:1", "ro:1", "q"],
            &["ACL", "DRYRUN", "nosuch", "get", "a"],
            &["ACL", "DRYRUN", "bob", "nosuch"],
            &["ACL", "DRYRUN", "bob", "get"],
            &["ACL", "DRYRUN", "bob", "config", "get", "x"],
            &["ACL", "DRYRUN", "bob", "config", "nosuch"],
            &["ACL", "DRYRUN", "dave", "config", "get", "x"],
            &["ACL", "DRYRUN", "dave", "config", "set", "x", "y"],
            &["ACL", "DRYRUN", "dave", "select", "0"],
            &["ACL", "DRYRUN", "dave", "select", "1"],
            &["ACL", "DRYRUN", "dave", "hset", "w:1", "f", "v"],
            &["ACL", "DRYRUN", "dave", "hget", "w:1", "f"],
            &["ACL", "DRYRUN", "dave", "hget", "rw:1", "f"],
            &["ACL", "DRYRUN", "dave", "hexists", "w:1", "f"],
            &["ACL", "DRYRUN", "erin", "publish", "c", "m"],
            &["ACL", "DRYRUN", "frank", "publish", "c", "m"],
            &["ACL", "DRYRUN", "frank", "debug", "sleep", "0"],
            &["ACL", "HELP"],
            &["ACL", "foo"],
            &["ACL"],
            &["ACL", "WHOAMI", "extra"],
            &["ACL", "LOAD"],
            &["ACL", "SAVE"],
            &["ACL", "LOG", "RESET"],
        ],
    );
    // Bob runs what his rules allow, and is refused the rest.
    let mut bob = server.client();
    run(
        &mut bob,
        &mut out,
        &[
            &["AUTH", "bob", "wrong"],
            &["AUTH", "nosuch", "pw"],
            &["AUTH", "bob", "pw"],
            &["ACL", "WHOAMI"],
            &["GET", "app:1"],
            &["SET", "app:1", "v"],
            &["GET", "app:1"],
            &["SET", "ro:1", "v"],
            &["GET", "ro:1"],
            &["GET", "x1"],
            &["SET", "x1", "v"],
            &["DEL", "app:1"],
            &["PUBLISH", "chan1", "m"],
            &["MULTI"],
            &["SET", "app:2", "v"],
            &["DEL", "app:2"],
            &["EXEC"],
            &["AUTH", "a", "b", "c"],
        ],
    );
    // Rules change under a logged-in client: its next command obeys the new ones.
    run(&mut admin, &mut out, &[&["ACL", "SETUSER", "bob", "+del"]]);
    run(&mut bob, &mut out, &[&["DEL", "app:1"], &["DEL", "zz"]]);
    let mut carol = server.client();
    run(
        &mut carol,
        &mut out,
        &[
            &["AUTH", "carol", "anything"],
            &["FLUSHALL"],
            &["KEYS", "*"],
            &["SET", "c", "1"],
            &["PUBLISH", "any", "m"],
            &["CLIENT", "KILL", "ID", "999999"],
            &["AUTH", "default", "x"],
            &["ACL", "WHOAMI"],
        ],
    );
    run(
        &mut admin,
        &mut out,
        &[
            &["ACL", "LOG"],
            &["ACL", "LOG", "2"],
            &["ACL", "LOG", "RESET"],
            &["ACL", "LOG"],
            &["ACL", "SETUSER", "bob", "off"],
            &["ACL", "SETUSER", "default", ">pw"],
        ],
    );
    let mut late = server.client();
    run(
        &mut late,
        &mut out,
        &[
            &["GET", "a"],
            &["AUTH", "bob", "pw"],
            &["AUTH", "pw"],
            &["ACL", "WHOAMI"],
            &["ACL", "SETUSER", "default", "nopass"],
        ],
    );
    // Deleting a user closes its connections.
    run(&mut admin, &mut out, &[&["ACL", "SETUSER", "bob", "on"], &["ACL", "DELUSER", "bob"]]);
    out.push(Value::Int(i64::from(bob.cmd_or_none(&["PING"]).is_some())));
    // CLIENT KILL USER closes the connections logged in as that user.
    let mut carol = server.client();
    run(&mut carol, &mut out, &[&["AUTH", "carol", "x"]]);
    run(&mut admin, &mut out, &[&["CLIENT", "KILL", "USER", "carol"], &["CLIENT", "KILL", "USER", "nobody"]]);
    out.push(Value::Int(i64::from(carol.cmd_or_none(&["PING"]).is_some())));
    // The slow log keeps no password, nor any rule.
    admin.cmd(&["SLOWLOG", "RESET"]);
    admin.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    admin.cmd(&["ACL", "SETUSER", "h", "on", ">secret", "~*"]);
    admin.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "10000"]);
    let Value::Array(Some(entries)) = admin.cmd(&["SLOWLOG", "GET", "2"]) else { panic!("SLOWLOG GET") };
    for entry in entries {
        let Value::Array(Some(fields)) = entry else { panic!("slow log entry") };
        out.push(fields[3].clone());
    }
    out
}

#[test]
fn acl_replies_and_noperm_errors_match_redis() {
    same_as_redis(acl_script);
}

#[test]
fn rediskv_admin_commands_are_dangerous() {
    let server = rediskv(&[]);
    let mut c = server.client();
    let dangerous = c.cmd(&["ACL", "CAT", "dangerous"]).texts();
    for own in ["compact", "fsck", "namespace"] {
        assert!(dangerous.contains(&own.to_string()), "{own} is not in @dangerous");
    }
    assert_eq!(
        c.cmd(&["ACL", "SETUSER", "u", "on", "nopass", "+@all", "-@dangerous", "~*"]),
        Value::Status("OK".into())
    );
    assert_eq!(c.cmd(&["AUTH", "u", "x"]), Value::Status("OK".into()));
    assert_eq!(
        c.cmd(&["FSCK"]),
        Value::Error("NOPERM this user has no permissions to run the 'fsck' command".into())
    );
}

#[test]
fn the_normalizer_sorts_only_single_command_rules() {
    // The normalizer itself: it must not hide differences other than the order of single
    // command rules.
    assert_eq!(
        sort_command_rules("on ~* resetchannels -@all -keys +set (~x* resetchannels -@all -del +get)"),
        "on ~* resetchannels -@all +set -keys (~x* resetchannels -@all +get -del)"
    );
    assert_ne!(sort_command_rules("-@all +get"), sort_command_rules("-@all +set"));
}

#[test]
fn a_user_confined_to_a_namespace_sees_only_it() {
    let server = rediskv(&["--requirepass", "admin"]);
    let mut admin = server.client();
    assert_eq!(admin.cmd(&["AUTH", "admin"]), Value::Status("OK".into()));
    assert_eq!(admin.cmd(&["NAMESPACE", "ADD", "ns1", "tok1"]), Value::Status("OK".into()));
    assert_eq!(
        admin.cmd(&["ACL", "SETUSER", "app", "on", ">pw", "namespace:ns1", "~*", "&*", "+@all"]),
        Value::Status("OK".into())
    );
    let list = admin.cmd(&["ACL", "LIST"]).texts();
    assert!(
        list.contains(&format!("user app on namespace:ns1 #{} ~* &* +@all", sha256_hex("pw"))),
        "{list:?}"
    );
    let mut app = server.client();
    assert_eq!(app.cmd(&["AUTH", "app", "pw"]), Value::Status("OK".into()));
    assert_eq!(app.cmd(&["SET", "k", "from-app"]), Value::Status("OK".into()));
    assert_eq!(
        app.cmd(&["CONFIG", "GET", "port"]),
        Value::Error("ERR admin permission required to perform the command".into()),
        "a confined user is a tenant: no admin commands, whatever its ACL rules"
    );
    assert_eq!(
        app.cmd(&["ACL", "SETUSER", "app", "resetnamespace"]),
        Value::Error("ERR admin permission required to perform the command".into()),
        "nor may it change users"
    );
    assert_eq!(app.cmd(&["ACL", "WHOAMI"]), bulk("app"));
    // The admin's namespace does not see the key; the namespace's token does.
    assert_eq!(admin.cmd(&["GET", "k"]), Value::Bulk(None));
    let mut tenant = server.client();
    assert_eq!(tenant.cmd(&["AUTH", "tok1"]), Value::Status("OK".into()));
    assert_eq!(tenant.cmd(&["GET", "k"]), bulk("from-app"));
    assert_eq!(tenant.cmd(&["ACL", "WHOAMI"]), bulk("default"));
    // Confinement follows the user: freed, its next login is the admin's namespace.
    assert_eq!(admin.cmd(&["ACL", "SETUSER", "app", "resetnamespace"]), Value::Status("OK".into()));
    let mut again = server.client();
    assert_eq!(again.cmd(&["AUTH", "app", "pw"]), Value::Status("OK".into()));
    assert_eq!(again.cmd(&["GET", "k"]), Value::Bulk(None));
    let line = again.cmd(&["CLIENT", "INFO"]).text();
    assert!(line.contains(" user=app "), "{line}");
}

#[test]
fn the_acl_file_saves_and_loads_users() {
    let dir = std::env::temp_dir().join(format!("rediskv-acl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("users.acl");
    std::fs::write(&file, "user default on nopass ~* &* +@all\nuser ro on >pw ~* -@all +@read\n").unwrap();
    let path = file.to_str().unwrap();
    let server = rediskv(&["--aclfile", path]);
    let mut c = server.client();
    assert_eq!(c.cmd(&["ACL", "USERS"]).texts(), ["default", "ro"]);
    assert_eq!(c.cmd(&["ACL", "SETUSER", "rw", "on", ">pw2", "~*", "+@all"]), Value::Status("OK".into()));
    assert_eq!(c.cmd(&["ACL", "SAVE"]), Value::Status("OK".into()));
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(
        saved.contains(&format!("user rw on #{} ~* resetchannels +@all\n", sha256_hex("pw2"))),
        "{saved}"
    );
    drop(server);
    // A restart reads the file back.
    let server = rediskv(&["--aclfile", path]);
    let mut c = server.client();
    assert_eq!(c.cmd(&["ACL", "USERS"]).texts(), ["default", "ro", "rw"]);
    assert_eq!(c.cmd(&["AUTH", "rw", "pw2"]), Value::Status("OK".into()));
    // A file with a wrong line changes nothing, and says where.
    std::fs::write(&file, "user default on nopass ~* &* +@all\nuser x on +nosuch\n").unwrap();
    let Value::Error(e) = c.cmd(&["ACL", "LOAD"]) else { panic!("ACL LOAD accepted a bad file") };
    assert!(e.contains(&format!("{path}:2: Error in applying operation '+nosuch'")), "{e}");
    assert_eq!(c.cmd(&["ACL", "USERS"]).texts(), ["default", "ro", "rw"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

fn sha256_hex(s: &str) -> String {
    // SHA-256 by the coreutils tool, not by the server's code.
    let out = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(s.as_bytes())?;
            child.wait_with_output()
        })
        .expect("sha256sum");
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap().to_string()
}
