//! AUTH, NOAUTH and Kvrocks-style namespace tokens: tenants are confined to their namespace
//! and cannot run admin commands.

mod common;

use common::{Value, rediskv};

fn ok() -> Value {
    Value::Status("OK".into())
}

fn err(text: &str) -> Value {
    Value::Error(text.into())
}

#[test]
fn requirepass_gates_every_command_until_auth() {
    let server = rediskv(&["--requirepass", "s3cret"]);
    let mut c = server.client();
    // Texts observed from redis-server 7.0.15.
    assert_eq!(c.cmd(&["GET", "a"]), err("NOAUTH Authentication required."));
    assert_eq!(
        c.cmd(&["NOSUCH"]),
        err("ERR unknown command 'NOSUCH', with args beginning with: "),
        "unknown commands are reported before NOAUTH"
    );
    assert_eq!(
        c.cmd(&["AUTH", "wrong"]),
        err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    assert_eq!(
        c.cmd(&["AUTH", "nobody", "s3cret"]),
        err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    assert_eq!(
        c.cmd(&["HELLO", "2"]),
        err(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"
        )
    );
    // Before AUTH, big requests are protocol errors.
    let mut big = server.client();
    big.send_raw(b"*11\r\n");
    assert_eq!(big.read(), err("ERR Protocol error: unauthenticated multibulk length"));
    assert_eq!(big.try_read(), None);

    assert_eq!(c.cmd(&["AUTH", "default", "s3cret"]), ok());
    assert_eq!(c.cmd(&["SET", "a", "1"]), ok());
    assert_eq!(c.cmd(&["RESET"]), Value::Status("RESET".into()));
    assert_eq!(c.cmd(&["GET", "a"]), err("NOAUTH Authentication required."), "RESET forgets the login");
    let hello = c.cmd(&["HELLO", "2", "AUTH", "default", "s3cret", "SETNAME", "me"]);
    let Value::Array(Some(fields)) = hello else { panic!("{hello:?}") };
    assert_eq!(fields[..2], [Value::Bulk(Some(b"server".to_vec())), Value::Bulk(Some(b"redis".to_vec()))]);
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), Value::Bulk(Some(b"me".to_vec())));
    assert_eq!(c.cmd(&["GET", "a"]), Value::Bulk(Some(b"1".to_vec())));

    let open_server = rediskv(&[]);
    let mut open = open_server.client();
    assert_eq!(
        open.cmd(&["AUTH", "x"]),
        err(
            "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
        )
    );
}

#[test]
fn tenants_never_see_each_other_and_cannot_administer() {
    let server = rediskv(&["--requirepass", "admin"]);
    let mut admin = server.client();
    assert_eq!(admin.cmd(&["AUTH", "admin"]), ok());
    // Kvrocks' NAMESPACE replies.
    assert_eq!(admin.cmd(&["NAMESPACE", "ADD", "t1", "token1"]), ok());
    assert_eq!(admin.cmd(&["NAMESPACE", "ADD", "t2", "token2"]), ok());
    assert_eq!(admin.cmd(&["NAMESPACE", "ADD", "t3", "token1"]), err("ERR the token already exists"));
    assert_eq!(admin.cmd(&["NAMESPACE", "ADD", "t1", "other"]), err("ERR the namespace already exists"));
    assert_eq!(
        admin.cmd(&["NAMESPACE", "ADD", "t4", "admin"]),
        err("ERR the token is duplicated with requirepass or masterauth")
    );
    assert_eq!(
        admin.cmd(&["NAMESPACE", "DEL", "__namespace"]),
        err("ERR forbidden to delete the default namespace")
    );
    assert_eq!(admin.cmd(&["NAMESPACE", "DEL", "nope"]), err("ERR the namespace was not found"));
    assert_eq!(admin.cmd(&["NAMESPACE", "GET", "t1"]), Value::Bulk(Some(b"token1".to_vec())));
    assert_eq!(
        admin.cmd(&["NAMESPACE", "GET", "*"]).texts(),
        ["t1", "token1", "t2", "token2", "__namespace", "admin"]
    );
    assert_eq!(
        admin.cmd(&["NAMESPACE", "FOO", "x"]),
        err("ERR NAMESPACE subcommand must be one of GET, SET, DEL, ADD")
    );

    let mut t1 = server.client();
    let mut t2 = server.client();
    assert_eq!(t1.cmd(&["AUTH", "token1"]), ok());
    assert_eq!(t2.cmd(&["AUTH", "token2"]), ok());
    for (c, v) in [(&mut t1, "one"), (&mut t2, "two"), (&mut admin, "admin")] {
        assert_eq!(c.cmd(&["SET", "k", v]), ok());
        assert_eq!(c.cmd(&["HSET", "h", "f", v]), Value::Int(1));
    }
    for (c, v) in [(&mut t1, "one"), (&mut t2, "two"), (&mut admin, "admin")] {
        assert_eq!(c.cmd(&["GET", "k"]).text(), v);
        assert_eq!(c.cmd(&["HGET", "h", "f"]).text(), v);
        assert_eq!(c.cmd(&["DBSIZE"]), Value::Int(2));
        let mut keys = c.cmd(&["KEYS", "*"]).texts();
        keys.sort();
        assert_eq!(keys, ["h", "k"]);
    }
    // FLUSHDB of one tenant leaves the others alone.
    assert_eq!(t1.cmd(&["FLUSHDB"]), ok());
    assert_eq!(t1.cmd(&["DBSIZE"]), Value::Int(0));
    assert_eq!(t2.cmd(&["GET", "k"]).text(), "two");
    assert_eq!(admin.cmd(&["GET", "k"]).text(), "admin");

    let refused = err("ERR admin permission required to perform the command");
    for cmd in [
        &["FLUSHALL"][..],
        &["CONFIG", "SET", "timeout", "5"],
        &["CONFIG", "GET", "requirepass"],
        &["NAMESPACE", "GET", "*"],
        &["CLIENT", "KILL", "ID", "1"],
        &["CLIENT", "LIST"],
        // Other tenants' commands and arguments are in it.
        &["SLOWLOG", "GET"],
        &["SLOWLOG", "RESET"],
    ] {
        assert_eq!(t2.cmd(cmd), refused, "{cmd:?}");
    }
    assert_eq!(t2.cmd(&["GET", "k"]).text(), "two", "nothing was flushed");
    assert_eq!(admin.cmd(&["CONFIG", "GET", "timeout"]).texts(), ["timeout", "0"]);

    // The admin's FLUSHALL clears every namespace.
    assert_eq!(admin.cmd(&["FLUSHALL"]), ok());
    assert_eq!(t2.cmd(&["DBSIZE"]), Value::Int(0));
    assert_eq!(admin.cmd(&["DBSIZE"]), Value::Int(0));

    // A deleted namespace's token no longer logs in.
    assert_eq!(admin.cmd(&["NAMESPACE", "DEL", "t2"]), ok());
    assert_eq!(
        server.client().cmd(&["AUTH", "token2"]),
        err("WRONGPASS invalid username-password pair or user is disabled.")
    );
}

#[test]
fn namespaces_need_requirepass_and_live_in_the_config_file() {
    let open_server = rediskv(&[]);
    let mut open = open_server.client();
    assert_eq!(
        open.cmd(&["NAMESPACE", "ADD", "t1", "tok"]),
        err("ERR forbidden to add namespace when requirepass was empty")
    );
    let dir = std::env::temp_dir().join(format!("rediskv-auth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("redis.conf");
    std::fs::write(&file, "requirepass adm\nnamespace.ten tok\n").unwrap();
    let server = rediskv(&["--config", file.to_str().unwrap()]);
    let mut t = server.client();
    assert_eq!(t.cmd(&["AUTH", "tok"]), ok());
    let mut admin = server.client();
    assert_eq!(admin.cmd(&["AUTH", "adm"]), ok());
    assert_eq!(admin.cmd(&["NAMESPACE", "SET", "ten", "tok2"]), ok());
    let text = std::fs::read_to_string(&file).unwrap();
    // Like Redis, the rewrite also keeps parameters given on the command line (the port).
    assert_eq!(text, format!("requirepass adm\nnamespace.ten tok2\nport {}\n", server.port));
    std::fs::remove_dir_all(&dir).unwrap();
}
