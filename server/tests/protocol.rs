//! Protocol integrity against the running server: no forged replies, Redis' limits and
//! protocol errors, then the connection closes.

mod common;

use common::{Value, rediskv};

#[test]
fn a_forging_argument_cannot_inject_a_reply() {
    let server = rediskv(&[]);
    let mut c = server.client();
    assert_eq!(c.cmd(&["SET", "a", "real"]), Value::Status("OK".into()));
    c.send(&[b"NOSUCHCMD", b"x\r\n$4\r\nfake"]);
    c.send(&[b"GET", b"a"]);
    assert_eq!(
        c.read(),
        Value::Error("ERR unknown command 'NOSUCHCMD', with args beginning with: 'x  $4  fake' ".into())
    );
    assert_eq!(c.read(), Value::Bulk(Some(b"real".to_vec())));
    // Inline form, as redis-cli would send it.
    c.send_raw(b"NOSUCHCMD \"x\\r\\n$4\\r\\nfake\"\r\nGET a\r\n");
    assert!(matches!(c.read(), Value::Error(e) if e.ends_with("'x  $4  fake' ")));
    assert_eq!(c.read(), Value::Bulk(Some(b"real".to_vec())));
}

#[test]
fn bulk_length_follows_proto_max_bulk_len_and_closes() {
    let server = rediskv(&["--proto-max-bulk-len", "1mb"]);
    let mut c = server.client();
    assert_eq!(c.cmd(&["CONFIG", "GET", "proto-max-bulk-len"]).texts(), ["proto-max-bulk-len", "1048576"]);
    c.send_raw(b"*2\r\n$3\r\nGET\r\n$1048577\r\n");
    assert_eq!(c.read(), Value::Error("ERR Protocol error: invalid bulk length".into()));
    assert_eq!(c.try_read(), None, "the connection is closed");

    let mut c = server.client();
    assert_eq!(c.cmd(&["CONFIG", "SET", "proto-max-bulk-len", "2mb"]), Value::Status("OK".into()));
    let big = vec![b'x'; 1_500_000];
    c.send(&[b"SET", b"big", &big]);
    assert_eq!(c.read(), Value::Status("OK".into()));
    assert_eq!(c.cmd(&["STRLEN", "big"]), Value::Int(1_500_000));
    c.send_raw(b"*1\r\n$-5\r\n");
    assert_eq!(c.read(), Value::Error("ERR Protocol error: invalid bulk length".into()));
    assert_eq!(c.try_read(), None);

    let mut c = server.client();
    c.send_raw(b"*3000000000\r\n");
    assert_eq!(c.read(), Value::Error("ERR Protocol error: invalid multibulk length".into()));
    assert_eq!(c.try_read(), None);
}

#[test]
fn query_buffer_limit_closes_the_connection() {
    // The limit given at start, and one CONFIG SET gives a running server.
    let at_start = rediskv(&["--client-query-buffer-limit", "1mb"]);
    let set_later = rediskv(&[]);
    let ok = Value::Status("OK".into());
    assert_eq!(set_later.client().cmd(&["CONFIG", "SET", "client-query-buffer-limit", "1mb"]), ok);
    for server in [at_start, set_later] {
        let mut c = server.client();
        // A 2 MB argument can never fit a 1 MB query buffer: Redis closes without a reply.
        c.send_raw(b"*2\r\n$3\r\nGET\r\n$2000000\r\n");
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..40 {
            if c.try_send_raw(&chunk).is_err() {
                break;
            }
        }
        assert_eq!(c.try_read(), None);
        assert_eq!(server.client().cmd(&["PING"]), Value::Status("PONG".into()));
    }
}

#[test]
fn big_arguments_arrive_whole_however_they_are_split() {
    let server = rediskv(&[]);
    let mut c = server.client();
    // Values of varied bytes and sizes around the big-argument threshold (32 KB), sent in
    // pieces, then pipelined behind and ahead of small requests.
    let value =
        |len: usize, seed: u8| -> Vec<u8> { (0..len).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect() };
    let request = |key: &[u8], v: &[u8]| {
        let mut r = format!("*3\r\n$3\r\nSET\r\n${}\r\n", key.len()).into_bytes();
        r.extend_from_slice(key);
        r.extend_from_slice(format!("\r\n${}\r\n", v.len()).as_bytes());
        r.extend_from_slice(v);
        r.extend_from_slice(b"\r\n");
        r
    };
    let sizes = [32 * 1024 - 1, 32 * 1024, 100_000, 70_000, 100_000, 300_000];
    for (i, &len) in sizes.iter().enumerate() {
        let v = value(len, i as u8);
        let r = request(format!("k{i}").as_bytes(), &v);
        for piece in r.chunks(17_000 + i * 5000) {
            c.send_raw(piece);
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        assert_eq!(c.read(), Value::Status("OK".into()));
        c.send(&[b"GET", format!("k{i}").as_bytes()]);
        assert_eq!(c.read(), Value::Bulk(Some(v)), "value of {len} bytes");
    }
    let mut pipeline = b"*1\r\n$4\r\nPING\r\n".to_vec();
    let (a, b) = (value(120_000, 7), value(50_000, 9));
    pipeline.extend(request(b"a", &a));
    pipeline.extend(request(b"b", &b));
    pipeline.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n");
    c.send_raw(&pipeline);
    assert_eq!(c.read(), Value::Status("PONG".into()));
    assert_eq!(c.read(), Value::Status("OK".into()));
    assert_eq!(c.read(), Value::Status("OK".into()));
    assert_eq!(c.read(), Value::Bulk(Some(a)));
    c.send(&[b"GET", b"b"]);
    assert_eq!(c.read(), Value::Bulk(Some(b)));
}
