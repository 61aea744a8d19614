//! The command-line flags that are not Redis parameters: `--help` and docs/configuration.md
//! are both written from [`FLAGS`], so they cannot disagree. Any Redis parameter is also a
//! flag (`--port 7000`, `--appendfsync always`), as redis-server takes them.

/// One flag: its name, the value it takes, its default and what it chooses.
pub struct Flag {
    /// `--engine`.
    pub name: &'static str,
    /// The value's form: `fjall|memory|rocksdb|etcd`, `N`, `PATH`…
    pub value: &'static str,
    /// The value when the flag is not given.
    pub default: &'static str,
    /// What the flag chooses, for the documentation.
    pub what: &'static str,
}

/// Every flag `main` reads besides the Redis parameters, in the order `--help` lists them.
pub const FLAGS: &[Flag] = &[
    Flag {
        name: "--config",
        value: "FILE",
        default: "none",
        what: "a redis.conf-style file, read before the other flags (or give it as the first argument)",
    },
    Flag {
        name: "--engine",
        value: "fjall|memory|rocksdb|etcd",
        default: "fjall",
        what: "the store; rocksdb and etcd need the cargo features of the same names",
    },
    Flag {
        name: "--dir",
        value: "PATH",
        default: "./data",
        what: "where a disk engine keeps its files (created if missing); also sets `dir`",
    },
    Flag { name: "--threads", value: "N", default: "the number of cores", what: "event loops, 1 to 256" },
    Flag {
        name: "--cache-size",
        value: "SIZE",
        default: "32mb",
        what: "a disk engine's block cache (bytes or Redis' units, at least 1mb)",
    },
    Flag {
        name: "--write-buffer-size",
        value: "SIZE",
        default: "64mb",
        what: "the most a disk engine's memtables hold before they are flushed (at least 1mb)",
    },
    Flag {
        name: "--layout",
        value: "kvrocks|neokv|camellia|titea",
        default: "kvrocks",
        what: "whose records the store holds (docs/layouts.md); a directory keeps the layout it was created with",
    },
    Flag { name: "--neokv-region-id", value: "N", default: "1", what: "NeoKV's region (`--layout neokv`)" },
    Flag { name: "--neokv-index-id", value: "N", default: "1", what: "NeoKV's index (`--layout neokv`)" },
    Flag {
        name: "--camellia-namespace",
        value: "NAME",
        default: "default",
        what: "camellia-kv's namespace (`--layout camellia`)",
    },
    Flag {
        name: "--camellia-hash-version",
        value: "0|1",
        default: "0",
        what: "camellia-kv's hash encoding: 0 counted, 1 not",
    },
    Flag {
        name: "--camellia-set-version",
        value: "0|1",
        default: "0",
        what: "camellia-kv's set encoding: 0 counted, 1 not",
    },
    Flag {
        name: "--camellia-md5-prefix",
        value: "0|8",
        default: "0",
        what: "8 for stores of camellia-kv's releases that spread keys by md5",
    },
    Flag {
        name: "--titea-namespace",
        value: "NAME",
        default: "default.default",
        what: "TiTea's namespace (`--layout titea`)",
    },
    Flag {
        name: "--etcd-endpoints",
        value: "URL,URL…",
        default: "none (required by `--engine etcd`)",
        what: "the etcd cluster's members: `http://host:port`, or `https://host:port` with `--etcd-ca-cert-file`",
    },
    Flag {
        name: "--etcd-prefix",
        value: "PREFIX",
        default: "rediskv/",
        what: "the prefix of every key the server writes in etcd",
    },
    Flag {
        name: "--cluster-etcd",
        value: "URL,URL…",
        default: "none",
        what: "with `cluster-enabled yes` over fjall or rocksdb: the etcd members that keep the slot table (under `--etcd-prefix`); the data stays on each node",
    },
    Flag {
        name: "--cluster-etcd-store",
        value: "URL,URL…",
        default: "none",
        what: "with `--engine etcd` and `cluster-enabled yes`, once per etcd cluster holding data, in slot order: the slots' data is spread over them by range (docs/cluster.md); none: the data is with the slot table in `--etcd-endpoints`",
    },
    Flag {
        name: "--cluster-initial-nodes",
        value: "N",
        default: "1",
        what: "with `--cluster-etcd`: how many nodes share the slots of a new cluster",
    },
    Flag {
        name: "--etcd-max-txn-ops",
        value: "N",
        default: "128",
        what: "etcd's `--max-txn-ops`: the most operations one transaction may hold",
    },
    Flag {
        name: "--etcd-max-request-bytes",
        value: "N",
        default: "1572864",
        what: "etcd's `--max-request-bytes`: the largest request it takes",
    },
    Flag {
        name: "--etcd-quorum-timeout",
        value: "MS",
        default: "10000",
        what: "how long a command waits for a cluster without quorum before it answers an error",
    },
    Flag {
        name: "--etcd-conflict-timeout",
        value: "MS",
        default: "10000",
        what: "how long a command conflicting with other nodes is retried",
    },
    Flag {
        name: "--etcd-ca-cert-file",
        value: "FILE",
        default: "none",
        what: "TLS to etcd (`--engine etcd` and `--cluster-etcd`): the CA that signed the members' certificates (etcd's `--trusted-ca-file`), PEM",
    },
    Flag {
        name: "--etcd-cert-file",
        value: "FILE",
        default: "none",
        what: "with `--etcd-ca-cert-file`: the client certificate for members started with `--client-cert-auth`, PEM",
    },
    Flag {
        name: "--etcd-key-file",
        value: "FILE",
        default: "none",
        what: "the private key of `--etcd-cert-file`, PEM",
    },
];

/// The usage line, for a wrong argument.
pub fn usage() -> String {
    let mut text = String::from("usage: rediskv-server [/path/to/redis.conf]");
    for flag in FLAGS {
        text.push_str(&format!(" [{} {}]", flag.name, flag.value));
    }
    text.push_str(" [--<parameter> <value>]...");
    text
}

/// The `--help` text: the usage line, then each flag with what it chooses and its default.
pub fn help() -> String {
    let mut text = usage();
    text.push_str("\n\n");
    for flag in FLAGS {
        text.push_str(&format!(
            "  {} {}\n      {} (default: {})\n",
            flag.name, flag.value, flag.what, flag.default
        ));
    }
    text.push_str(
        "  --<parameter> <value>\n      any Redis parameter, as in redis.conf (docs/configuration.md)\n",
    );
    text
}
