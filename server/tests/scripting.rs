//! Lua scripting compared with redis-server 7.0: EVAL and EVALSHA replies and errors (their
//! `script: …, on @user_script:N.` places included), the conversions between Lua and RESP2 /
//! RESP3, SCRIPT, FUNCTION and FCALL; then atomicity under concurrent clients, and functions
//! surviving a restart of the disk engine.

mod common;

use common::{Client, Server, Value, rediskv, same_as_redis};

fn run(c: &mut Client, out: &mut Vec<Value>, script: &[&[&str]]) {
    for cmd in script {
        let reply = c.cmd(cmd);
        out.push(if cmd.len() >= 2 && cmd[..2] == ["FUNCTION", "LIST"] {
            sorted_libraries(reply)
        } else {
            reply
        });
    }
}

/// FUNCTION LIST with its libraries, and each library's functions, sorted: Redis lists both
/// in the order of hash tables.
fn sorted_libraries(reply: Value) -> Value {
    let Value::Array(Some(mut libs)) = reply else { return reply };
    for lib in &mut libs {
        if let Value::Array(Some(fields)) = lib
            && let Some(Value::Array(Some(functions))) = fields.get_mut(5)
        {
            functions.sort_by_key(|f| format!("{f:?}"));
        }
    }
    libs.sort_by_key(|l| format!("{l:?}"));
    Value::Array(Some(libs))
}

fn eval_script(server: &Server) -> Vec<Value> {
    let mut out = Vec::new();
    let mut c = server.client();
    run(
        &mut c,
        &mut out,
        &[
            &["EVAL", "return redis.call('set','a')", "0"],
            &["EVAL", "return redis.pcall('set','a')", "0"],
            &["EVAL", "return redis.call('nosuch')", "0"],
            &["EVAL", "error('boom')", "0"],
            &["EVAL", "local x = 1\nerror('on line two')", "0"],
            &["EVAL", "error({err='TABLE err'})", "0"],
            &["EVAL", "return {err='my err'}", "0"],
            &["EVAL", "return redis.error_reply('x y')", "0"],
            &["EVAL", "return redis.error_reply('plain')", "0"],
            &["EVAL", "return redis.error_reply('-CODE msg')", "0"],
            &["EVAL", "x = 1", "0"],
            &["EVAL", "return y", "0"],
            &["EVAL", "return redis.call('multi')", "0"],
            &["EVAL", "syntax error here", "0"],
            &["EVAL_RO", "return redis.call('set','a','b')", "0"],
            &["EVAL_RO", "return redis.call('get','a')", "0"],
            // May-replicate commands are refused in read-only scripts, as writes are.
            &["EVAL_RO", "return redis.call('publish','ch','msg')", "0"],
            &["EVAL_RO", "return redis.call('pfcount','hll')", "0"],
            &["EVAL", "return redis.call('publish','ch','msg')", "0"],
            &["EVAL", "return redis.call('xread','BLOCK','0','STREAMS','s','$')", "0"],
            &["EVAL", "return redis.call('xread','STREAMS','block','0')", "0"],
            &["EVAL", "return redis.sha1hex()", "0"],
            &["EVAL", "return redis.sha1hex(12)", "0"],
            // Code `loadstring` makes, tail-calling a command that fails: placed in its own
            // chunk (the first `loadstring` of the state, in a one-line script).
            &["EVAL", "local f = loadstring(\"return redis.call('nosuch')\") return f()", "0"],
            &["EVAL", "return redis.call('nosuch')", "0"],
            &["EVAL", "return print", "0"],
            &["EVAL", "return loadstring(string.dump(function() return 1 end))", "0"],
            &["EVAL", "return 1", "-1"],
            &["EVAL", "return 1", "2", "a"],
            &["EVAL", "return 1", "x"],
            &["EVAL", "return 1"],
            &["EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0"],
            &["EVAL", "return redis.call('incr','s')", "0"],
            &["EVAL", "return redis.call('hset','s','f','v')", "0"],
            &["EVAL", "return redis.pcall('incr','nosuchtype') and redis.pcall('hset','s','f','v')", "0"],
            &["EVAL", "return {1,2,3,'x',{ok='fine'},false,true,3.99,{err='inner'}}", "0"],
            &["EVAL", "return {1,nil,3}", "0"],
            &["EVAL", "return redis.status_reply('FINE')", "0"],
            &["EVAL", "return redis.sha1hex('')", "0"],
            &["EVAL", "return redis.call('get', KEYS[1])", "1", "s"],
            &["EVAL", "return {KEYS[1], ARGV[1], ARGV[2], #KEYS, #ARGV}", "1", "k", "a", "b"],
            &["EVAL", "return cjson.encode({1,2,{a=1}})", "0"],
            &["EVAL", "return cjson.decode('[1,2,3]')[2]", "0"],
            &["EVAL", "return cjson.decode('{\"a\":\"b\"}').a", "0"],
            &[
                "EVAL",
                "return {bit.band(7,3), bit.bor(1,2), bit.bxor(3,1), bit.lshift(1,4), bit.rshift(256,4), bit.tohex(255), bit.bnot(0)}",
                "0",
            ],
            &["EVAL", "return redis.call('ping')", "0"],
            &["EVAL", "return type(redis.call('time')[1])", "0"],
            &["EVAL", "return redis.call('publish','ch','m')", "0"],
            &["EVAL", "return tostring(loadfile)", "0"],
            &["EVAL", "return {math.floor(3.7), string.rep('a',3), table.concat({'a','b'},',')}", "0"],
            &["EVAL", "return redis.call('hgetall','s')", "0"],
            &["EVAL", "redis.call('set','num',3.5) return redis.call('get','num')", "0"],
            &["EVAL", "redis.call('set','w','1') redis.call('incr','w') return redis.call('get','w')", "0"],
            &["EVAL", "redis.call('set','kept','1') error('after a write')", "0"],
            &["GET", "kept"],
            &["EVAL", "return redis.call('select','1')", "0"],
            &[
                "EVAL",
                "redis.call('select','1') redis.call('set','in1','x') return redis.call('get','in1')",
                "0",
            ],
            &["GET", "in1"],
            &["EVAL", "return redis.call()", "0"],
            &["EVAL", "return redis.call({})", "0"],
            &["EVAL", "return redis.setresp(4)", "0"],
            &["EVAL", "redis.setresp(3) return redis.call('hgetall','s')", "0"],
            &["EVAL", "redis.setresp(3) return redis.call('get','nosuch')", "0"],
            &["EVAL", "return redis.call('get','nosuch')", "0"],
            &["EVAL", "return {double=1.5}", "0"],
            &["EVAL", "return {map={a=1}}", "0"],
            &["EVAL", "#!lua flags=no-writes\nreturn redis.call('get','s')", "0"],
            &["EVAL", "#!lua flags=no-writes\nreturn redis.call('set','s','x')", "0"],
            &["EVAL", "#!lua\nreturn redis.call('set','shebang','x')", "0"],
            &["EVAL_RO", "#!lua\nreturn 1", "0"],
            &["EVAL_RO", "#!lua flags=no-writes\nreturn 1", "0"],
            &["EVAL", "#!lua flags=no-writes,allow-oom\nreturn 2", "0"],
            &["EVAL", "#!lua flags=nope\nreturn 1", "0"],
            &["EVAL", "#!lua other=1\nreturn 1", "0"],
            &["EVAL", "#!js\nreturn 1", "0"],
            &["EVAL", "#!lua", "0"],
            &["EVAL", "#!lua\nerror('line two')", "0"],
            &["SCRIPT", "LOAD", "#!lua flags=no-writes\nreturn 2"],
            &["EVALSHA", "ae33f9227913b24d053a555637f98260b23bd3a3", "0"],
            &["SCRIPT", "LOAD", "#!lua flags=bad\nreturn 2"],
            &["SCRIPT", "LOAD", "return 'loaded'"],
            &["EVALSHA", "b534286061d4b9e4026607613b95c06c06015ae8", "0"],
            &["EVALSHA", "B534286061D4B9E4026607613B95C06C06015AE8", "0"],
            &["SCRIPT", "EXISTS", "b534286061d4b9e4026607613b95c06c06015ae8", "ffff"],
            &["SCRIPT", "LOAD", "return ("],
            &["SCRIPT", "FLUSH"],
            &["SCRIPT", "EXISTS", "b534286061d4b9e4026607613b95c06c06015ae8"],
            &["SCRIPT", "FLUSH", "bad"],
            &["SCRIPT", "KILL"],
            &["SCRIPT", "NOSUCH"],
            &["SCRIPT"],
            // What a script does to KEYS and ARGV does not reach the next script's.
            &[
                "EVAL",
                "KEYS[1] = 'changed' KEYS[3] = 'added' KEYS.field = 1 table.insert(ARGV, 'more') \
                 setmetatable(ARGV, {__index = function() return 'meta' end}) return #KEYS",
                "2",
                "k1",
                "k2",
                "a1",
            ],
            &[
                "EVAL",
                "return {#KEYS, KEYS[1], tostring(KEYS[3]), tostring(KEYS.field), #ARGV, ARGV[1], \
                 tostring(ARGV[2]), tostring(getmetatable(ARGV))}",
                "1",
                "k1",
                "a1",
            ],
            &["EVAL", "KEYS[2] = 'x' return KEYS", "1", "k"],
            &["EVAL", "return {#KEYS, #ARGV}", "0"],
        ],
    );
    // RESP3: what a RESP3 client gets from a script that speaks RESP3.
    let mut c3 = server.client();
    c3.cmd(&["HELLO", "3"]);
    run(
        &mut c3,
        &mut out,
        &[
            &["HSET", "h3", "f", "v"],
            &["EVAL", "redis.setresp(3) return redis.call('hgetall','h3')", "0"],
            &["EVAL", "return redis.call('hgetall','h3')", "0"],
            &["EVAL", "redis.setresp(3) return redis.call('get','nosuch')", "0"],
            &["EVAL", "return {double=1.5}", "0"],
            &["EVAL", "return {map={a=1}}", "0"],
            &["EVAL", "return {set={a=true}}", "0"],
            &["EVAL", "return {big_number='123456789012345678901234567890'}", "0"],
            &["EVAL", "return false", "0"],
            &["EVAL", "return true", "0"],
            &["EVAL", "redis.setresp(3) return true", "0"],
            &["EVAL", "redis.setresp(3) return redis.call('exists','h3') == 1", "0"],
        ],
    );
    out
}

fn function_script(server: &Server) -> Vec<Value> {
    let mut out = Vec::new();
    let mut c = server.client();
    let lib = "#!lua name=mylib\nredis.register_function('myset', function(keys, args) return redis.call('set', keys[1], args[1]) end)\nredis.register_function{function_name='myget', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}, description='reads'}";
    run(
        &mut c,
        &mut out,
        &[
            &["FUNCTION", "FLUSH"],
            &["FUNCTION", "LOAD", lib],
            &["FUNCTION", "LOAD", lib],
            &["FCALL", "myset", "1", "fk", "fv"],
            &["FCALL", "myget", "1", "fk"],
            &["FCALL_RO", "myget", "1", "fk"],
            &["FCALL_RO", "myset", "1", "fk", "x"],
            &["FCALL", "nosuch", "0"],
            &["FCALL", "myget", "5", "fk"],
            &["FCALL", "MYGET", "1", "fk"],
            &["FCALL", "myget", "x", "fk"],
            &["FCALL", "nosuch", "x"],
            &["FCALL", "myget", "-1", "fk"],
            &["FUNCTION", "LOAD", "#!lua name=slow\nlocal a = 1 while 1 do a = a + 1 end"],
            &["FUNCTION", "LOAD", "#! name=test\nredis.register_function('foo', function() return 1 end)"],
            &[
                "FUNCTION",
                "LOAD",
                "#!lua name=test foo=bar\nredis.register_function('foo', function() return 1 end)",
            ],
            &[
                "FUNCTION",
                "LOAD",
                "#!lua name=foo name=bar\nredis.register_function('foo', function() return 1 end)",
            ],
            &[
                "FUNCTION",
                "LOAD",
                "#!lua name=\"quoted\"\nredis.register_function('quoted', function() return redis.REDIS_VERSION_NUM end)",
            ],
            &["FCALL", "quoted", "0"],
            // Out of memory: a script's first command that may grow memory fails, unless the
            // script declares allow-oom; reads still work.
            &["CONFIG", "SET", "maxmemory", "1"],
            &["EVAL", "return redis.call('set','oom','1')", "0"],
            &["EVAL", "return redis.pcall('set','oom','1')", "0"],
            &["EVAL", "#!lua flags=allow-oom\nreturn redis.call('set','oom','1')", "0"],
            &["EVAL", "return redis.call('get','oom')", "0"],
            &["CONFIG", "SET", "maxmemory", "0"],
            &["FUNCTION", "LIST"],
            &["FUNCTION", "LIST", "WITHCODE"],
            &["FUNCTION", "LIST", "LIBRARYNAME", "my*"],
            &["FUNCTION", "LIST", "LIBRARYNAME", "zz*"],
            &["FUNCTION", "STATS"],
            &["FUNCTION", "LOAD", "return 1"],
            &["FUNCTION", "LOAD", "#!lua\nreturn 1"],
            &["FUNCTION", "LOAD", "#!lua name=bad-name\nreturn 1"],
            &["FUNCTION", "LOAD", "#!js name=x\nreturn 1"],
            &["FUNCTION", "LOAD", "#!lua name=empty\nlocal a = 1"],
            &["FUNCTION", "LOAD", "#!lua name=broken\nthis is not lua"],
            &[
                "FUNCTION",
                "LOAD",
                "#!lua name=dup\nredis.register_function('myset', function() return 1 end)",
            ],
            &["FUNCTION", "LOAD", "#!lua name=callsat\nredis.call('set','x','y')"],
            &[
                "FUNCTION",
                "LOAD",
                "#!lua name=badflag\nredis.register_function{function_name='f', callback=function() end, flags={'nope'}}",
            ],
            &[
                "FUNCTION",
                "LOAD",
                "REPLACE",
                "#!lua name=mylib\nredis.register_function('myset2', function(keys, args) return 'v2' end)",
            ],
            &["FCALL", "myset", "1", "fk", "fv"],
            &["FCALL", "myset2", "0"],
            &["FUNCTION", "LOAD", "BOGUS", "x"],
            &["FUNCTION", "LOAD"],
            &["FUNCTION", "DELETE", "nosuch"],
            &["FUNCTION", "DELETE", "mylib"],
            &["FCALL", "myset2", "0"],
            &["FUNCTION", "KILL"],
            &["FUNCTION", "FLUSH", "bad"],
            &["FUNCTION", "NOSUCH"],
            &[
                "FUNCTION",
                "LOAD",
                "#!lua name=errs\nredis.register_function('fails', function(keys) return redis.call('incr', keys[1]) end)",
            ],
            &["SET", "str", "abc"],
            &["FCALL", "fails", "1", "str"],
            &["FUNCTION", "FLUSH"],
            &["FUNCTION", "LIST"],
        ],
    );
    // FUNCTION DUMP / RESTORE (the payloads' bytes differ: Redis compresses with LZF).
    run(&mut c, &mut out, &[&["FUNCTION", "LOAD", lib], &["SET", "plain", "v"]]);
    let Value::Bulk(Some(payload)) = c.cmd(&["FUNCTION", "DUMP"]) else { panic!("FUNCTION DUMP") };
    let mut corrupt = payload.clone();
    corrupt[3] ^= 1;
    let Value::Bulk(Some(key_payload)) = c.cmd(&["DUMP", "plain"]) else { panic!("DUMP") };
    let restores: [&[&[u8]]; 9] = [
        &[b"FUNCTION", b"RESTORE", &payload],
        &[b"FUNCTION", b"RESTORE", &payload, b"REPLACE"],
        &[b"FUNCTION", b"FLUSH"],
        &[b"FUNCTION", b"RESTORE", &payload],
        &[b"FUNCTION", b"RESTORE", &payload, b"FLUSH"],
        &[b"FUNCTION", b"RESTORE", &payload, b"BAD"],
        &[b"FUNCTION", b"RESTORE", &corrupt],
        &[b"FUNCTION", b"RESTORE", b"short"],
        &[b"FUNCTION", b"RESTORE", &key_payload],
    ];
    for cmd in restores {
        c.send(cmd);
        out.push(c.read());
    }
    run(&mut c, &mut out, &[&["FCALL", "myget", "1", "fk"], &["FUNCTION", "LIST"]]);
    // At load time a library sees its registration table and nothing else; past the load,
    // registering refuses; FUNCTION LIST takes each option once.
    run(
        &mut c,
        &mut out,
        &[
            &["FUNCTION", "LOAD", "REPLACE", "#!lua name=l2\nreturn math.random()"],
            &["FUNCTION", "LOAD", "REPLACE", "#!lua name=l2\nreturn getmetatable(_G)"],
            &["FUNCTION", "LOAD", "REPLACE", "#!lua name=l2\nredis.setresp(3)"],
            &["FUNCTION", "LOAD", "REPLACE", "#!lua name=l2\nredis.x = 1"],
            &[
                "FUNCTION",
                "LOAD",
                "REPLACE",
                "#!lua name=l2\nlocal lib = redis\nlib.register_function('late', function() lib.register_function('x', function() end) end)\nlib.register_function('mathy', function() return math.floor(2.5) end)",
            ],
            &["FCALL", "late", "0"],
            &["FCALL", "mathy", "0"],
            &["FUNCTION", "LIST", "WITHCODE", "WITHCODE"],
            &["FUNCTION", "LIST", "LIBRARYNAME", "a", "LIBRARYNAME", "a"],
            &["FUNCTION", "LIST", "LIBRARYNAME"],
        ],
    );
    out
}

#[test]
fn eval_matches_redis() {
    same_as_redis(eval_script);
}

/// cmsgpack: every encoding form (integers of each width, float32/64, strings of each
/// length class, arrays and maps of each size class, nesting cut at 16), the unpack
/// variants' offsets, and the errors, byte for byte as redis-server.
fn cmsgpack_script(server: &Server) -> Vec<Value> {
    let mut out = Vec::new();
    let mut c = server.client();
    let scripts = [
        "return cmsgpack.pack(0, 127, 128, 255, 256, 65535, 65536, 4294967295, 4294967296, -1, -32, -33, -128, -129, -32768, -32769, -2147483648, -2147483649)",
        "return cmsgpack.pack(0.1, 0.5, -1.25, 1e300, 1/0, -1/0, 2^63, -2^63)",
        "return cmsgpack.pack('', string.rep('a', 31), string.rep('b', 32), string.rep('c', 255), string.rep('d', 256), string.rep('e', 65536))",
        "local t = {} for i = 1, 16 do t[i] = i end local m = {} for i = 1, 16 do m['k' .. i] = i end return cmsgpack.pack({}, {1, 2}, t, {a = 1}, {[1] = 1, [3] = 3}, {[0] = 1})",
        "local a = {} a[1] = a return cmsgpack.pack(a)",
        "return cmsgpack.pack(true, false, nil, print)",
        "local big = {} for i = 1, 70000 do big[i] = i % 7 end local u = cmsgpack.unpack(cmsgpack.pack(big)) return {#u, u[1], u[70000]}",
        "local t = cmsgpack.unpack(cmsgpack.pack({1, 'x', {k = 2.5, n = {true}}})) return {t[1], t[2], tostring(t[3].k), tostring(t[3].n[1])}",
        "return {cmsgpack.unpack(cmsgpack.pack(1, 'two', 3))}",
        "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3))}",
        "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 2)}",
        "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2)}",
        "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 5, 1)}",
        "return {cmsgpack.unpack_limit(cmsgpack.pack(1), 1, 5)}",
        "return {cmsgpack.unpack_limit(cmsgpack.pack(1), -1, 0)}",
        "return cmsgpack.unpack(string.char(0xdc, 0, 5, 1))",
        "return cmsgpack.unpack(string.char(0xc4, 1, 1))",
        "return cmsgpack.unpack(string.char(0xcb, 0, 0))",
        "return cmsgpack.pack()",
    ];
    for script in scripts {
        out.push(c.cmd(&["EVAL", script, "0"]));
    }
    out
}

/// redis.acl_check_cmd for the default user and a restricted one, its errors, and its
/// absence while a library loads.
fn acl_check_cmd_script(server: &Server) -> Vec<Value> {
    let mut out = Vec::new();
    let mut c = server.client();
    let scripts = [
        "return {redis.acl_check_cmd('set', 'a', 'b'), redis.acl_check_cmd('get', 'a')}",
        "return redis.acl_check_cmd('nosuch')",
        "return redis.acl_check_cmd()",
        "return redis.acl_check_cmd({})",
        "return redis.pcall('acl_check_cmd')",
        "local ok, e = pcall(redis.acl_check_cmd, 'nosuch') return {ok, e['err']}",
    ];
    for script in scripts {
        out.push(c.cmd(&["EVAL", script, "0"]));
    }
    out.push(c.cmd(&["ACL", "SETUSER", "bob", "on", "nopass", "~a*", "+get", "+eval"]));
    out.push(c.cmd(&["AUTH", "bob", "x"]));
    for args in [["get", "a1"], ["get", "b1"], ["set", "a1"]] {
        let script = format!("return redis.acl_check_cmd('{}', '{}') and 1 or 0", args[0], args[1]);
        out.push(c.cmd(&["EVAL", &script, "0"]));
    }
    let mut d = server.client();
    out.push(d.cmd(&["FUNCTION", "LOAD", "#!lua name=lib\nredis.acl_check_cmd('get', 'x')"]));
    out
}

#[test]
fn acl_check_cmd_matches_redis() {
    same_as_redis(acl_check_cmd_script);
}

/// cjson's settings: keep-buffer, nesting limits both ways, invalid numbers, their errors.
fn cjson_settings_script(server: &Server) -> Vec<Value> {
    let mut c = server.client();
    [
        "return {tostring(cjson.encode_keep_buffer(false)), tostring(cjson.encode_keep_buffer())}",
        "cjson.encode_max_depth(1) local ok, e = pcall(cjson.encode, {a = {1}}) local ok1 = pcall(cjson.encode, {1}) cjson.encode_max_depth(1000) return {tostring(ok), e, tostring(ok1)}",
        "cjson.decode_max_depth(1) local ok, e = pcall(cjson.decode, '{\"obj\": {\"array\": [1,2,3,4]}}') cjson.decode_max_depth(1000) return {tostring(ok), e}",
        "local ok, e = pcall(cjson.encode, {num1 = 0/0}) cjson.encode_invalid_numbers(true) local s = cjson.encode({-1/0}) cjson.encode_invalid_numbers('null') local n = cjson.encode({0/0}) cjson.encode_invalid_numbers(false) return {tostring(ok), e, s, n}",
        "return {cjson.encode_max_depth(), cjson.decode_max_depth(), tostring(cjson.encode_invalid_numbers())}",
        "return cjson.encode_max_depth(0)",
        "return cjson.encode_invalid_numbers('maybe')",
    ]
    .iter()
    .map(|script| c.cmd(&["EVAL", script, "0"]))
    .collect()
}

#[test]
fn cjson_settings_match_redis() {
    same_as_redis(cjson_settings_script);
}

/// struct: every option, both byte orders, alignment, the unpack position, and the errors.
fn struct_script(server: &Server) -> Vec<Value> {
    let mut c = server.client();
    [
        "return struct.pack('>i4Hb', 1000, 65535, -1)",
        "return struct.pack('<!4bi4d', 1, 2, 1.5)",
        "return {struct.unpack('>i4Hb', struct.pack('>i4Hb', -1000, 65535, -1))}",
        "return {struct.unpack('s c3', 'hello' .. string.char(0) .. 'abcd')}",
        "return {struct.unpack('b c0', struct.pack('b', 3) .. 'xyzw')}",
        "return {struct.unpack('>I3 f', struct.pack('>I3 f', 70000, 0.25))}",
        "return {struct.unpack('<lLhHxBT', struct.pack('<lLhHxBT', -2, 2^40, -300, 300, 200, 9))}",
        "return {struct.unpack('i2', struct.pack('i2i2', 5, 6), 3)}",
        "return struct.pack('c0 s', 'abc', 'de')",
        "return struct.size('!8bid')",
        "return struct.size('s')",
        "return struct.size('c0')",
        "return struct.pack('q', 1)",
        "return struct.unpack('i4', 'ab')",
        "return struct.pack('i', 'x')",
        "return struct.pack('c5', 'ab')",
        "return struct.unpack('c0', 'ab')",
        "return struct.unpack('s', 'ab')",
        "return struct.pack('i40', 1)",
        "return struct.pack('!3i', 1)",
        "return struct.unpack('b', 'a', 0)",
    ]
    .iter()
    .map(|script| c.cmd(&["EVAL", script, "0"]))
    .collect()
}

#[test]
fn struct_matches_redis() {
    same_as_redis(struct_script);
}

#[test]
fn cmsgpack_matches_redis() {
    same_as_redis(cmsgpack_script);
}

#[test]
fn functions_match_redis() {
    same_as_redis(function_script);
}

/// Scripts are atomic: 4 clients each run 200 read-modify-write scripts on one key (a GET
/// then a SET of the value plus one, which is not atomic without the script); every
/// increment is counted.
/// FUNCTION DUMP payloads cross between redis-server and rediskv-server both ways.
#[test]
fn function_payloads_cross_with_redis() {
    let Some(redis) = common::redis(&[]) else { return };
    let ours = rediskv(&[]);
    let lib = "#!lua name=crossing\nredis.register_function('twice', function(keys, args) return args[1] .. args[1] end)";
    for (from, to) in [(&redis, &ours), (&ours, &redis)] {
        let (mut a, mut b) = (from.client(), to.client());
        a.cmd(&["FUNCTION", "FLUSH"]);
        b.cmd(&["FUNCTION", "FLUSH"]);
        assert_eq!(a.cmd(&["FUNCTION", "LOAD", lib]), Value::Bulk(Some(b"crossing".to_vec())));
        let Value::Bulk(Some(payload)) = a.cmd(&["FUNCTION", "DUMP"]) else { panic!("FUNCTION DUMP") };
        b.send(&[b"FUNCTION", b"RESTORE", &payload]);
        assert_eq!(b.read(), Value::Status("OK".into()));
        assert_eq!(b.cmd(&["FCALL", "twice", "0", "ab"]), Value::Bulk(Some(b"abab".to_vec())));
    }
}

#[test]
fn scripts_are_atomic_under_concurrent_clients() {
    let server = rediskv(&["--threads", "4"]);
    let script = "local v = tonumber(redis.call('get', KEYS[1]) or '0') redis.call('set', KEYS[1], v + 1) return v + 1";
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let port = server.port;
            let script = script.to_string();
            std::thread::spawn(move || {
                let mut c = Client::connect(port);
                for _ in 0..200 {
                    let reply = c.cmd(&["EVAL", &script, "1", "counter"]);
                    assert!(matches!(reply, Value::Int(_)), "{reply:?}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut c = server.client();
    assert_eq!(c.cmd(&["GET", "counter"]), Value::Bulk(Some(b"800".to_vec())));
}

/// Under every `appendfsync` (the file is synced at each change only under `always`), a
/// killed server's libraries are back at its restart.
#[test]
fn functions_survive_a_restart_on_disk() {
    for appendfsync in ["everysec", "always"] {
        let dir =
            std::env::temp_dir().join(format!("rediskv-functions-{}-{appendfsync}", std::process::id()));
        let path = dir.to_str().unwrap().to_string();
        let lib = "#!lua name=keep\nredis.register_function('hello', function() return 'hi' end)";
        let args = ["--engine", "fjall", "--dir", &path, "--appendfsync", appendfsync];
        {
            let server = rediskv(&args);
            let mut c = server.client();
            assert_eq!(c.cmd(&["FUNCTION", "LOAD", lib]), Value::Bulk(Some(b"keep".to_vec())));
            assert_eq!(
                c.cmd(&["SCRIPT", "LOAD", "return 1"]),
                Value::Bulk(Some(b"e0e1f9fabfc9d4800c877a703b823ac0578ff8db".to_vec()))
            );
        }
        let server = rediskv(&args);
        let mut c = server.client();
        assert_eq!(c.cmd(&["FCALL", "hello", "0"]), Value::Bulk(Some(b"hi".to_vec())), "{appendfsync}");
        assert_eq!(
            c.cmd(&["SCRIPT", "EXISTS", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"]),
            Value::Array(Some(vec![Value::Int(0)])),
            "the script cache does not survive a restart, as in Redis"
        );
        drop(server);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A script past `busy-reply-threshold` makes other clients get BUSY; SCRIPT KILL stops it
/// (FUNCTION KILL does not); a script that wrote cannot be killed. Texts from redis-server
/// 7.0.15.
/// A command that arrives as a script starts is answered (PONG before it, BUSY after the
/// threshold), never left waiting for the lock the script holds: the PING follows the EVAL
/// after 0 to 595 µs, across the script's start.
#[test]
fn a_command_arriving_as_a_script_starts_is_answered() {
    let server = rediskv(&["--threads", "1", "--busy-reply-threshold", "20"]);
    let mut runner = server.client();
    let mut other = server.client();
    other.set_read_timeout(std::time::Duration::from_secs(5));
    for delay_us in (0..600).step_by(5) {
        runner.send(&[b"EVAL", b"while true do end", b"0"]);
        let sent = std::time::Instant::now();
        while sent.elapsed() < std::time::Duration::from_micros(delay_us) {}
        let reply = other.cmd_or_none(&["PING"]);
        assert!(reply.is_some(), "no reply to a PING sent {delay_us} µs after the EVAL");
        // Kill this script (once it has run past the threshold) before the next.
        loop {
            match other.cmd(&["SCRIPT", "KILL"]) {
                Value::Status(ok) if ok == "OK" => break,
                Value::Error(e) if e.starts_with("NOTBUSY") => {
                    std::thread::sleep(std::time::Duration::from_millis(1))
                }
                reply => panic!("{reply:?}"),
            }
        }
        let Value::Error(killed) = runner.read() else { panic!("not killed") };
        assert!(killed.starts_with("ERR Script killed by user"), "{killed}");
    }
}

/// Each event loop has a Lua state of its own: what one connection loads, replaces or
/// flushes is what a connection on the other loop runs next (the two connections are on
/// different loops: they are handed out in turn).
#[test]
fn scripts_and_functions_reach_every_event_loop() {
    let server = rediskv(&["--threads", "2"]);
    let (mut one, mut other) = (server.client(), server.client());
    let library = |answer: &str| {
        format!("#!lua name=lib\nredis.register_function('f', function(keys, args) return '{answer}' end)")
    };
    let Value::Bulk(Some(sha)) = one.cmd(&["SCRIPT", "LOAD", "return 'loaded'"]) else { panic!("no sha") };
    let sha = String::from_utf8(sha).unwrap();
    assert_eq!(other.cmd(&["EVALSHA", &sha, "0"]), Value::Bulk(Some(b"loaded".to_vec())));
    assert_eq!(one.cmd(&["FUNCTION", "LOAD", &library("first")]), Value::Bulk(Some(b"lib".to_vec())));
    assert_eq!(other.cmd(&["FCALL", "f", "0"]), Value::Bulk(Some(b"first".to_vec())));
    assert_eq!(
        one.cmd(&["FUNCTION", "LOAD", "REPLACE", &library("second")]),
        Value::Bulk(Some(b"lib".to_vec()))
    );
    assert_eq!(other.cmd(&["FCALL", "f", "0"]), Value::Bulk(Some(b"second".to_vec())));
    let Value::Bulk(Some(dump)) = other.cmd(&["FUNCTION", "DUMP"]) else { panic!("no dump") };
    assert_eq!(one.cmd(&["FUNCTION", "FLUSH"]), Value::Status("OK".into()));
    assert_eq!(other.cmd(&["FCALL", "f", "0"]), Value::Error("ERR Function not found".into()));
    one.send(&[b"FUNCTION", b"RESTORE", &dump]);
    assert_eq!(one.read(), Value::Status("OK".into()));
    assert_eq!(other.cmd(&["FCALL", "f", "0"]), Value::Bulk(Some(b"second".to_vec())));
    assert_eq!(one.cmd(&["SCRIPT", "FLUSH"]), Value::Status("OK".into()));
    assert_eq!(
        other.cmd(&["EVALSHA", &sha, "0"]),
        Value::Error("NOSCRIPT No matching script. Please use EVAL.".into())
    );
}

/// A script that runs longer than its event loop gives it, or that publishes, starts again
/// on the script thread: what it did on the loop (a write, a count in INFO commandstats) is
/// not kept, and its message is published once (the PING's answer comes next).
#[test]
fn a_script_that_leaves_its_event_loop_runs_once() {
    let server = rediskv(&["--threads", "1"]);
    let (mut client, mut subscriber) = (server.client(), server.client());
    assert!(matches!(subscriber.cmd(&["SUBSCRIBE", "news"]), Value::Array(Some(_))));
    assert_eq!(client.cmd(&["CONFIG", "RESETSTAT"]), Value::Status("OK".into()));
    let long = "local n = redis.call('incr', KEYS[1]) \
                local function now() local t = redis.call('time') return t[1] * 1000000 + t[2] end \
                local start = now() while now() - start < 50000 do end \
                return n";
    assert_eq!(client.cmd(&["EVAL", long, "1", "counter"]), Value::Int(1));
    let publishing = "local n = redis.call('incr', KEYS[1]) redis.call('publish', 'news', n) return n";
    assert_eq!(client.cmd(&["EVAL", publishing, "1", "counter"]), Value::Int(2));
    assert_eq!(client.cmd(&["GET", "counter"]), Value::Bulk(Some(b"2".to_vec())));
    let Value::Bulk(Some(stats)) = client.cmd(&["INFO", "commandstats"]) else { panic!("no INFO") };
    let stats = String::from_utf8(stats).unwrap();
    assert!(stats.contains("cmdstat_incr:calls=2,"), "{stats}");
    let Value::Array(Some(message)) = subscriber.read() else { panic!("no message") };
    assert_eq!(message[2], Value::Bulk(Some(b"2".to_vec())));
    assert_eq!(
        subscriber.cmd(&["PING"]),
        Value::Array(Some(vec![Value::Bulk(Some(b"pong".to_vec())), Value::Bulk(Some(Vec::new())),]))
    );
}

/// A script sent while another runs, before the threshold, waits its turn on the script
/// thread and runs after it, whole; a command meanwhile waits for the first script's end.
#[test]
fn a_script_sent_while_another_runs_runs_after_it() {
    let server = rediskv(&["--threads", "1", "--busy-reply-threshold", "5000"]);
    let (mut first, mut second, mut third) = (server.client(), server.client(), server.client());
    first.send(&[
        b"EVAL",
        b"local function now() local t = redis.call('time') return t[1] * 1000000 + t[2] end \
          local start = now() while now() - start < 300000 do end \
          return redis.call('rpush', KEYS[1], 'first')",
        b"1",
        b"order",
    ]);
    // FUNCTION STATS (answered during a script) shows it running, past its start on the
    // event loop: on the script thread.
    let running_for = |client: &mut Client| -> i64 {
        let Value::Array(Some(stats)) = client.cmd(&["FUNCTION", "STATS"]) else { panic!("no stats") };
        match &stats[1] {
            Value::Array(Some(script)) => match script.last() {
                Some(Value::Int(ms)) => *ms,
                other => panic!("{other:?}"),
            },
            _ => -1,
        }
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while running_for(&mut third) < 20 {
        assert!(std::time::Instant::now() < deadline, "the first script never seen running");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    second.send(&[
        b"EVAL",
        b"redis.call('rpush', KEYS[1], 'second') return redis.call('lrange', KEYS[1], 0, -1)",
        b"1",
        b"order",
    ]);
    // Not during the first script: after it, before or after the second.
    let Value::Array(Some(seen)) = third.cmd(&["LRANGE", "order", "0", "-1"]) else { panic!("not a list") };
    assert_eq!(seen.first(), Some(&Value::Bulk(Some(b"first".to_vec()))), "{seen:?}");
    assert_eq!(first.read(), Value::Int(1));
    assert_eq!(
        second.read(),
        Value::Array(Some(vec![Value::Bulk(Some(b"first".to_vec())), Value::Bulk(Some(b"second".to_vec()))]))
    );
}

#[test]
fn a_busy_script_is_reported_and_killed() {
    // One event loop: the script runs on the script thread, so the loop still answers.
    let server = rediskv(&["--threads", "1", "--busy-reply-threshold", "100"]);
    let mut runner = server.client();
    let mut other = server.client();
    runner.send(&[b"EVAL", b"local i = 0 while true do i = i + 1 end", b"0"]);
    // A command that arrives before the threshold waits for it, then gets BUSY.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let busy = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
    loop {
        match other.cmd(&["PING"]) {
            Value::Error(e) if e == busy => break,
            reply => assert!(std::time::Instant::now() < deadline, "never BUSY: {reply:?}"),
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(other.cmd(&["FUNCTION", "KILL"]), Value::Error(busy.into()));
    assert_eq!(other.cmd(&["SCRIPT", "KILL"]), Value::Status("OK".into()));
    let killed = runner.read();
    let Value::Error(text) = killed else { panic!("{killed:?}") };
    assert!(
        text.starts_with("ERR Script killed by user with SCRIPT KILL... script: ")
            && text.ends_with(", on @user_script:1."),
        "{text}"
    );
    assert_eq!(other.cmd(&["PING"]), Value::Status("PONG".into()));
    assert_eq!(
        other.cmd(&["SCRIPT", "KILL"]),
        Value::Error("NOTBUSY No scripts in execution right now.".into())
    );
    // A script that catches every error with pcall is still killed: the kill fails every
    // line from then on, and the next line outside the pcall ends it.
    runner.send(&[
        b"EVAL",
        b"local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end",
        b"0",
    ]);
    loop {
        if let Value::Error(e) = other.cmd(&["PING"]) {
            assert_eq!(e, busy);
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never BUSY");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(other.cmd(&["SCRIPT", "KILL"]), Value::Status("OK".into()));
    let Value::Error(text) = runner.read() else { panic!("not killed") };
    assert!(text.starts_with("ERR Script killed by user with SCRIPT KILL..."), "{text}");
    assert_eq!(other.cmd(&["PING"]), Value::Status("PONG".into()));
    // A script that wrote runs to its end.
    runner.send(&[b"EVAL", b"redis.call('set','x','1') local t = redis.call('time') while redis.call('time')[1] - t[1] < 2 do end return 'done'", b"0"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    loop {
        if let Value::Error(e) = other.cmd(&["GET", "x"]) {
            assert_eq!(e, busy);
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never BUSY");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(
        other.cmd(&["SCRIPT", "KILL"]),
        Value::Error("UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.".into())
    );
    assert_eq!(runner.read(), Value::Bulk(Some(b"done".to_vec())));
}

/// Out of memory: a script that declares its flags runs only with `allow-oom` or
/// `no-writes`, one without a shebang fails only at its first deny-oom command, FUNCTION LOAD
/// is refused and a function without those flags too.
fn oom_script(server: &Server) -> Vec<Value> {
    let mut c = server.client();
    let mut out = Vec::new();
    out.push(c.cmd(&["SET", "x", "1"]));
    out.push(c.cmd(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=oomlib\nredis.register_function('f1', function() return 1 end)",
    ]));
    out.push(c.cmd(&["CONFIG", "SET", "maxmemory", "1"]));
    for script in [
        "#!lua flags=\nreturn 1",
        "#!lua flags=no-writes\nreturn 1",
        "#!lua flags=allow-oom\nreturn redis.call('set', 'x', 2)",
        "return redis.call('get', 'x')",
        "redis.call('set', 'x', 3) return 1",
    ] {
        out.push(c.cmd(&["EVAL", script, "0"]));
    }
    out.push(c.cmd(&["FCALL", "f1", "0"]));
    out.push(c.cmd(&[
        "FUNCTION",
        "LOAD",
        "REPLACE",
        "#!lua name=oomlib\nredis.register_function('f1', function() return 1 end)",
    ]));
    out.push(c.cmd(&["FUNCTION", "LIST"]));
    out.push(c.cmd(&["CONFIG", "SET", "maxmemory", "0"]));
    out.push(c.cmd(&["GET", "x"]));
    out
}

#[test]
fn scripts_under_oom_match_redis() {
    same_as_redis(oom_script);
}

/// With `min-replicas-to-write` and no replica: a script that declares its flags without
/// `no-writes` (a shebang, a function) is refused before it runs, as a queued one refuses its
/// EXEC; one without a shebang fails only at its first write.
fn no_replicas_script(server: &Server) -> Vec<Value> {
    let mut c = server.client();
    let mut out = Vec::new();
    out.push(c.cmd(&["SET", "x", "1"]));
    out.push(c.cmd(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=replib\nredis.register_function('w', function() return 1 end)\nredis.register_function{function_name='r', callback=function() return 2 end, flags={'no-writes'}}",
    ]));
    out.push(c.cmd(&["CONFIG", "SET", "min-replicas-to-write", "1"]));
    for script in [
        "#!lua flags=no-writes\nreturn redis.call('get', 'x')",
        "#!lua\nreturn redis.call('get', 'x')",
        "return redis.call('get', 'x')",
        "return redis.call('set', 'x', 2)",
    ] {
        out.push(c.cmd(&["EVAL", script, "1", "x"]));
    }
    out.push(c.cmd(&["FCALL", "w", "0"]));
    out.push(c.cmd(&["FCALL", "r", "0"]));
    out.push(c.cmd(&["MULTI"]));
    out.push(c.cmd(&["EVAL", "#!lua\nreturn 1", "0"]));
    out.push(c.cmd(&["EXEC"]));
    out.push(c.cmd(&["CONFIG", "SET", "min-replicas-to-write", "0"]));
    out.push(c.cmd(&["EVAL", "#!lua\nreturn redis.call('get', 'x')", "1", "x"]));
    out
}

#[test]
fn scripts_without_good_replicas_match_redis() {
    same_as_redis(no_replicas_script);
}

/// `redis.call` with thousands of arguments (an `unpack` of a big table), and numbers as
/// arguments, which Redis' Lua prints as `%.17g`.
fn many_arguments_script(server: &Server) -> Vec<Value> {
    let mut c = server.client();
    let mut out = Vec::new();
    for n in ["1000", "7000", "7980"] {
        let script = format!(
            "local a = {{}} for i = 1, {n} do a[i] = i end return redis.call('rpush', KEYS[1], unpack(a))"
        );
        out.push(c.cmd(&["EVAL", &script, "1", &format!("l{n}")]));
        out.push(c.cmd(&["LINDEX", &format!("l{n}"), "-1"]));
    }
    out.push(c.cmd(&[
        "EVAL",
        "redis.call('mset', 'a', 1/3, 'b', 1e15, 'c', 2^53, 'd', 0.1, 'e', 1e-5, 'f', -2.5e300) \
         return redis.call('mget', 'a', 'b', 'c', 'd', 'e', 'f')",
        "0",
    ]));
    out.push(c.cmd(&["EVAL", "return redis.pcall('get', nil, 'x')", "0"]));
    out
}

#[test]
fn many_arguments_and_numbers_match_redis() {
    same_as_redis(many_arguments_script);
}

/// `redis.call` with more arguments than a Rust function can take: Redis' TCL "Script check
/// unpack with massive arguments" (an `unpack` of 7,999 values, 8,001 arguments with the
/// command and key) from EVAL and from a FUNCTION library, with strings and numbers; the
/// read-only check, `redis.pcall`, `redis.acl_check_cmd`, and the errors (and their places)
/// of such a call.
fn massive_arguments_script(server: &Server) -> Vec<Value> {
    let mut c = server.client();
    let mut out = Vec::new();
    let unpack = |n: usize, fill: &str, call: &str| {
        format!("local a = {{}}\nfor i = 1, {n} do a[i] = {fill} end\n{call}")
    };
    out.push(c.cmd(&["SET", "str", "x"]));
    for (script, read) in [
        (unpack(7999, "1", "return redis.call('lpush', 'l', unpack(a))"), &["LLEN", "l"][..]),
        (unpack(7999, "'v' .. i", "return redis.call('rpush', 'l2', unpack(a))"), &["LINDEX", "l2", "-1"]),
        (unpack(7999, "i + 0.5", "return redis.call('rpush', 'l3', unpack(a))"), &["LINDEX", "l3", "-1"]),
        (unpack(7999, "'k' .. i", "return #redis.call('mget', unpack(a))"), &["LLEN", "l"]),
        (unpack(7999, "1", "return redis.pcall('rpush', 'l', unpack(a))"), &["LLEN", "l"]),
    ] {
        out.push(c.cmd(&["EVAL", &script, "0"]));
        out.push(c.cmd(read));
    }
    for script in [
        // Errors: the command's, a nil or a table among the arguments, with the script's
        // place when raised; returned by redis.pcall.
        unpack(7999, "1", "return redis.call('lpush', 'str', unpack(a))"),
        unpack(7999, "1", "return redis.pcall('lpush', 'str', unpack(a))"),
        unpack(7999, "1", "return redis.call('nosuch', unpack(a))"),
        unpack(7999, "1", "local x = 1\nredis.call('lpush', 'str', unpack(a))\nreturn x"),
        unpack(7999, "i", "a[5000] = nil return redis.call('lpush', 'l', unpack(a, 1, 7997))"),
        unpack(7999, "i", "a[5000] = nil return redis.pcall('lpush', 'l', unpack(a, 1, 7997))"),
        unpack(7999, "i", "a[7500] = {} return redis.call('lpush', 'l', unpack(a))"),
        unpack(7999, "i", "a[7999] = true return redis.pcall('lpush', 'l', unpack(a))"),
        unpack(7999, "1", "return redis.acl_check_cmd('lpush', 'l', unpack(a))"),
        unpack(7999, "1", "return redis.acl_check_cmd('nosuch', 'l', unpack(a))"),
        // Lua's own limit: unpack gives at most 7,999 values.
        unpack(8000, "1", "return redis.call('lpush', 'l', unpack(a))"),
    ] {
        out.push(c.cmd(&["EVAL", &script, "0"]));
    }
    out.push(c.cmd(&["EVAL_RO", &unpack(7999, "1", "return redis.call('lpush', 'l', unpack(a))"), "0"]));
    out.push(c.cmd(&[
        "EVAL",
        &unpack(7999, "1", "return redis.call('lpush', KEYS[1], unpack(a))"),
        "1",
        "l4",
    ]));
    let lib = format!(
        "#!lua name=massive\nredis.register_function('push', function(keys)\n{}\nend)\n\
         redis.register_function('bad', function(keys)\n{}\nend)\n\
         redis.register_function{{function_name='ro', callback=function(keys)\n{}\nend, flags={{'no-writes'}}}}",
        unpack(7999, "1", "return redis.call('lpush', keys[1], unpack(a))"),
        unpack(7999, "1", "return redis.call('lpush', 'str', unpack(a))"),
        unpack(7999, "1", "return redis.call('lpush', keys[1], unpack(a))"),
    );
    out.push(c.cmd(&["FUNCTION", "LOAD", "REPLACE", &lib]));
    for call in [["FCALL", "push", "1", "fl"], ["FCALL", "bad", "1", "fl"], ["FCALL", "ro", "1", "fl"]] {
        out.push(c.cmd(&call));
    }
    out.push(c.cmd(&["LLEN", "fl"]));
    out.push(c.cmd(&["FUNCTION", "DELETE", "massive"]));
    out
}

#[test]
fn massive_arguments_match_redis() {
    same_as_redis(massive_arguments_script);
}

/// KEYS and ARGV of thousands (more strings than mlua lets Rust hold at once), and back to
/// a command.
fn thousands_of_keys_script(server: &Server) -> Vec<Value> {
    let mut c = server.client();
    let mut out = Vec::new();
    let keys: Vec<String> = (0..9000).map(|i| format!("k{i}")).collect();
    let mut cmd = vec!["EVAL", "return {#KEYS, #ARGV, KEYS[9000], ARGV[9000]}", "9000"];
    cmd.extend(keys.iter().map(String::as_str));
    cmd.extend(keys.iter().map(String::as_str));
    out.push(c.cmd(&cmd));
    out.push(c.cmd(&["MSET", "k1", "a", "k8999", "b"]));
    let mut cmd = vec!["EVAL", "return redis.call('del', unpack(KEYS, 1, 5000))", "9000"];
    cmd.extend(keys.iter().map(String::as_str));
    out.push(c.cmd(&cmd));
    out
}

#[test]
fn thousands_of_keys_match_redis() {
    same_as_redis(thousands_of_keys_script);
}

/// The errors of `redis.call`, `redis.pcall` and `redis.acl_check_cmd` (a nil or a table
/// among the arguments, none, an unknown command, a command's error), raised with the
/// script's place or returned, whether the call is a statement or a tail call (`return
/// redis.call(…)`), on the call's line, in EVAL and in a FUNCTION library; and
/// `setmetatable` refusing a protected table in a tail call.
fn call_errors_script(server: &Server) -> Vec<Value> {
    let mut c = server.client();
    let mut out = Vec::new();
    out.push(c.cmd(&["SET", "str", "x"]));
    for script in [
        "return redis.call('set', nil, 1)",
        "redis.call('set', nil, 1)",
        "return redis.pcall('set', nil, 1)",
        "local t = redis.pcall('set', nil, 1) return t.err",
        "return redis.call('set', 'k', {})",
        "return redis.call()",
        "return redis.pcall()",
        "return redis.call('nosuch')",
        "redis.call('nosuch')",
        "return redis.pcall('nosuch')",
        "local x = 1\nreturn redis.call(\n'nosuch')",
        "local x = 1\nredis.call('lpush', 'str', 'a')\nreturn x",
        "local function f() return redis.call('nosuch') end\nreturn f()",
        "local function f()\nreturn redis.call('lpush', 'str', 'a') end\nreturn f()",
        "return {pcall(redis.call, 'nosuch')}",
        "local ok, e = pcall(function() return redis.call('nosuch') end) return e",
        "local r = redis return r.call('nosuch')",
        "return redis.acl_check_cmd('nosuch')",
        "return redis.acl_check_cmd()",
        "return redis.acl_check_cmd('set', nil)",
        "return redis.acl_check_cmd('get', 'k')",
        "return setmetatable(_G, {})",
        "local x = 1\nreturn setmetatable(redis, {})",
        "local x = 1\nsetmetatable(redis, {})",
        "redis.setresp(3) return redis.call('hgetall', 'nokey')",
    ] {
        out.push(c.cmd(&["EVAL", script, "0"]));
    }
    let lib = "#!lua name=errs\n\
        redis.register_function('tail', function() return redis.call('nosuch') end)\n\
        redis.register_function('statement', function()\nlocal x = 1\nredis.call('lpush', 'str', 'a')\nreturn x\nend)\n\
        redis.register_function('nilarg', function()\nreturn redis.call('set', nil, 1)\nend)\n\
        redis.register_function('pcalled', function() return redis.pcall('set', nil, 1) end)\n\
        redis.register_function{function_name='ro', callback=function() return redis.call('set', 'k', 1) end, flags={'no-writes'}}";
    out.push(c.cmd(&["FUNCTION", "LOAD", "REPLACE", lib]));
    for f in ["tail", "statement", "nilarg", "pcalled", "ro"] {
        out.push(c.cmd(&["FCALL", f, "0"]));
    }
    out.push(c.cmd(&["FUNCTION", "DELETE", "errs"]));
    out
}

#[test]
fn call_errors_match_redis() {
    same_as_redis(call_errors_script);
}

/// INFO's error and command counters after a script's commands fail or are refused: an
/// error a command answered (or was refused with) inside a script counts once, when it
/// happens, whether the script catches it, raises it or returns it (Redis'
/// `ignore_error_stats_update`); an error the script makes itself counts with its reply.
fn error_stats_script(server: &Server) -> Vec<Value> {
    let mut c = server.client();
    let mut out = Vec::new();
    let counters = |c: &mut Client| -> Value {
        let mut lines = Vec::new();
        for section in ["errorstats", "commandstats", "stats"] {
            let Value::Bulk(Some(text)) = c.cmd(&["INFO", section]) else { panic!("INFO") };
            for line in String::from_utf8_lossy(&text).lines() {
                if line.starts_with("errorstat_") || line.starts_with("total_error_replies") {
                    lines.push(line.to_string());
                } else if let Some((name, fields)) =
                    line.split_once(':').filter(|(n, _)| n.starts_with("cmdstat_"))
                {
                    // calls, rejected_calls, failed_calls (not the times).
                    let kept: Vec<&str> = fields
                        .split(',')
                        .filter(|f| f.starts_with("calls=") || f.contains("_calls="))
                        .collect();
                    if name != "cmdstat_config" && name != "cmdstat_info" {
                        lines.push(format!("{name}:{}", kept.join(",")));
                    }
                }
            }
        }
        lines.sort();
        Value::Status(lines.join(" "))
    };
    out.push(c.cmd(&["SET", "str", "x"]));
    let cases: &[(&str, &str)] = &[
        ("return redis.call('set','x','y')", "oom"),
        ("local t = redis.pcall('set','x','y') return t['err']", "oom"),
        ("return redis.pcall('set','x','y')", "oom"),
        ("return redis.call('select',99)", ""),
        ("local t = redis.pcall('select',99) return t['ignore_error_stats_update']", ""),
        ("return redis.pcall('select',99)", ""),
        ("return redis.call('nosuch')", ""),
        ("local t = redis.pcall('get') return 1", ""),
        ("return redis.call('lpush','str','a')", ""),
        ("local t = redis.pcall('lpush','str','a') return {err=t['err']}", ""),
        ("return redis.error_reply('MY err')", ""),
        ("return redis.call('get', {})", ""),
        ("error('boom')", ""),
    ];
    for (script, oom) in cases {
        out.push(c.cmd(&["CONFIG", "SET", "maxmemory", if oom.is_empty() { "0" } else { "1" }]));
        out.push(c.cmd(&["CONFIG", "RESETSTAT"]));
        out.push(c.cmd(&["EVAL", script, "0"]));
        out.push(counters(&mut c));
    }
    out.push(c.cmd(&["CONFIG", "SET", "maxmemory", "0"]));
    out
}

#[test]
fn script_error_stats_match_redis() {
    same_as_redis(error_stats_script);
}

/// What a script sees after another tried to escape the sandbox: no global it set, `redis`,
/// `string`, `table` and the other libraries as they were, the strings' methods.
const LEAK_CHECK: &str = "local function probe(f) local ok, v = pcall(f) return ok and tostring(v) or ('error: ' .. tostring(v)) end
return {
  probe(function() return x end),
  probe(function() return y end),
  probe(function() return type(redis.call) end),
  probe(function() return redis.call('set', 'sandbox', 'ok') and redis.call('get', 'sandbox') end),
  probe(function() return tostring(redis[1]) end),
  probe(function() return ('a'):upper() end),
  probe(function() return string.upper('b') end),
  probe(function() local t = {} table.insert(t, 'c') return t[1] end),
  probe(function() return math.floor(1.5) end),
  probe(function() return cjson.encode({1}) end),
  probe(function() return #cmsgpack.pack(1) end),
  probe(function() return struct.pack('b', 1) end),
  probe(function() return bit.band(3, 1) end),
  probe(function() return type(coroutine.create) end),
  probe(function() return type(getfenv) end),
  probe(function() return type(_G.x) end),
}";

/// Escapes from the sandbox: what Redis' answers (its globals and library tables read-only,
/// no `getfenv`/`setfenv`/`newproxy`, code `loadstring` and `load` make under the same
/// rules, binary chunks refused), each followed by [`LEAK_CHECK`]; in EVAL, in a FUNCTION
/// library's functions and in its load-time code.
fn sandbox_script(server: &Server) -> Vec<Value> {
    let mut c = server.client();
    let mut out = Vec::new();
    let escapes = [
        "return getfenv(0) ~= nil",
        "local function f() return getfenv(1) end return f() ~= nil",
        "getfenv(0).x = 5",
        "setfenv(1, {})",
        "return newproxy(true)",
        "return loadstring('redis.call = nil')()",
        "loadstring('redis.call = nil')() return 1",
        "return loadstring('x = 5')()",
        "return loadstring('return x')()",
        "return loadstring('return getfenv')()",
        "return loadstring('return _G')() == _G",
        "return loadstring('return redis.call(\"ping\")')()",
        "return loadstring('return redis.call(\"nosuch\")')()",
        "local i = 0 local f = load(function() i = i + 1 if i == 1 then return 'y = 7' end end) return f()",
        "return select(2, loadstring(string.dump(function() return 1 end)))",
        "local d = string.dump(function() end) local n = 0 return select(2, load(function() n = n + 1 if n == 1 then return d end end))",
        "return coroutine.wrap(function() return loadstring('x = 5')() end)()",
        "return coroutine.wrap(function() x = 5 end)()",
        "return rawset(_G, 'x', 5) and 1",
        "rawset(redis, 'call', 5)",
        "return rawset(string, 'upper', 5) and 1",
        "return rawset(getmetatable(''), '__index', {}) and 1",
        "table.insert(redis, 1)",
        "return table.insert(_G, 1)",
        "return table.insert(coroutine, 1, 2)",
        "redis.call = nil",
        "string.upper = nil",
        "table.insert = nil",
        "math.floor = nil",
        "cjson.encode = nil",
        "cmsgpack.pack = nil",
        "struct.pack = nil",
        "bit.band = nil",
        "coroutine.create = nil",
        "x = 5",
        "_G.x = 5",
        "_G.redis = nil",
        "getmetatable('').__index = nil",
        "getmetatable('').__index.upper = nil",
        "getmetatable('').x = 1",
        "setmetatable(getmetatable(''), {})",
        "getmetatable(_G).__index = nil",
        "return getmetatable('').__index == string",
        "return getmetatable('').__index.upper('a')",
        "return {type(getmetatable(redis)), type(getmetatable(string)), type(getmetatable(_G).__index)}",
        "return {pcall()}",
        "return {pcall(nil)}",
        "return {pcall(pcall)}",
        "return loadstring()",
        "return loadstring('return 1', {})",
        "return load(5)",
        "return rawset()",
        "return rawset({}, 1)",
        "return rawset({}, nil, 1)",
        "return table.insert({})",
        "return table.insert({}, 'a', 2)",
        "table.insert({}, 1, 2, 3)",
        "return getmetatable()",
        "local t = {} table.insert(t, 'a') table.insert(t, 1, 'b') return t",
    ];
    for script in escapes {
        out.push(c.cmd(&["EVAL", script, "0"]));
        out.push(c.cmd(&["EVAL", LEAK_CHECK, "0"]));
    }
    // The same escapes in a library's functions, one function each.
    let mut lib = String::from("#!lua name=escapes\n");
    for (i, script) in escapes.iter().enumerate() {
        lib.push_str(&format!("redis.register_function('e{i}', function()\n{script}\nend)\n"));
    }
    lib.push_str(&format!("redis.register_function('check', function()\n{LEAK_CHECK}\nend)\n"));
    out.push(c.cmd(&["FUNCTION", "LOAD", "REPLACE", &lib]));
    for i in 0..escapes.len() {
        out.push(c.cmd(&["FCALL", &format!("e{i}"), "0"]));
        out.push(c.cmd(&["FCALL", "check", "0"]));
    }
    out.push(c.cmd(&["EVAL", LEAK_CHECK, "0"]));
    // Load-time code: only `redis`, and it read-only; a function keeping that table cannot
    // change it later either.
    for code in [
        "return getfenv(0)",
        "loadstring('x = 1')()",
        "x = 5",
        "redis.call = nil",
        "redis.x = 1",
        "rawset(redis, 'x', 1)",
        "string.upper = nil",
        "setmetatable(redis, nil)",
        "local r = redis redis.register_function('late', function() return rawset(r, 'x', 1) and 1 end)",
        "local r = redis redis.register_function('late', function() r.log = nil end)",
        "local r = redis redis.register_function('late', function() return table.insert(r, 1) end)",
    ] {
        let lib =
            format!("#!lua name=loadtime\nredis.register_function('f', function() return 1 end)\n{code}");
        out.push(c.cmd(&["FUNCTION", "LOAD", "REPLACE", &lib]));
        out.push(c.cmd(&["FCALL", "late", "0"]));
        out.push(c.cmd(&["FCALL", "check", "0"]));
    }
    out.push(c.cmd(&["FUNCTION", "FLUSH"]));
    out.push(c.cmd(&["EVAL", LEAK_CHECK, "0"]));
    out
}

#[test]
fn sandbox_escapes_match_redis() {
    same_as_redis(sandbox_script);
}
