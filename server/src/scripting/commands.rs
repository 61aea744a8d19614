//! SCRIPT and FUNCTION: their subcommands and replies.

use super::*;

/// SCRIPT subcommands.
pub fn script_command(argv: &[Bytes], scripts: &Scripts) -> Reply {
    if let Some(wrong) = crate::acl::arity_error(argv) {
        return wrong;
    }
    let sub = argv.get(1).map(|s| s.to_ascii_lowercase()).unwrap_or_default();
    match (sub.as_slice(), argv.len()) {
        (b"load", 3) => {
            let sha = sha1_hex(&argv[2]);
            let skip = match shebang_flags(&argv[2]) {
                Ok(found) => found.map_or(0, |(_, len)| len),
                Err(e) => return Reply::Error(format!("ERR {e}")),
            };
            let compiled = with_vm(scripts, |vm| {
                vm.lua
                    .load(&argv[2][skip..])
                    .set_name("@user_script")
                    .set_mode(mlua::ChunkMode::Text)
                    .into_function()
                    .map(|_| ())
                    .map_err(|e| {
                        Reply::Error(format!(
                            "ERR Error compiling script (new function): {}",
                            lua_message(&e)
                        ))
                    })
            });
            if let Err(e) = compiled {
                return e;
            }
            lock(&scripts.cache).insert(sha.clone(), argv[2].clone());
            Reply::Bulk(sha.into())
        }
        (b"exists", n) if n >= 3 => {
            let cache = lock(&scripts.cache);
            Reply::Array(
                argv[2..]
                    .iter()
                    .map(|s| {
                        Reply::Integer(
                            cache.contains_key(&String::from_utf8_lossy(s).to_ascii_lowercase()) as i64
                        )
                    })
                    .collect(),
            )
        }
        (b"flush", 2 | 3) => {
            if let Some(mode) = argv.get(2)
                && !mode.eq_ignore_ascii_case(b"sync")
                && !mode.eq_ignore_ascii_case(b"async")
            {
                return Reply::Error("ERR SCRIPT FLUSH only support SYNC|ASYNC option".into());
            }
            lock(&scripts.cache).clear();
            scripts.changed();
            Reply::OK
        }
        (b"kill", 2) => scripts.kill(true),
        (b"help", 2) => Reply::Array(
            [
                "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "DEBUG (YES|SYNC|NO)",
                "    Set the debug mode for subsequent scripts executed.",
                "EXISTS <sha1> [<sha1> ...]",
                "    Return information about the existence of the scripts in the script cache.",
                "FLUSH [ASYNC|SYNC]",
                "    Flush the Lua scripts cache. Very dangerous on replicas.",
                "    When called without the optional mode argument, the behavior is determined by the",
                "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
                "    * ASYNC: Asynchronously flush the scripts cache.",
                "    * SYNC: Synchronously flush the scripts cache.",
                "KILL",
                "    Kill the currently executing Lua script.",
                "LOAD <script>",
                "    Load a script into the scripts cache without executing it.",
                "HELP",
                "    Prints this help.",
            ]
            .iter()
            .map(|s| Reply::status(s))
            .collect(),
        ),
        (b"load" | b"exists" | b"flush" | b"kill" | b"help", _) if argv.len() >= 2 => Reply::Error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try SCRIPT HELP.",
            String::from_utf8_lossy(&argv[1])
        )),
        _ if argv.len() < 2 => Reply::Error("ERR wrong number of arguments for 'script' command".into()),
        _ => Reply::Error(format!(
            "ERR unknown subcommand '{}'. Try SCRIPT HELP.",
            String::from_utf8_lossy(&argv[1])
        )),
    }
}

/// FUNCTION subcommands. `save` is called after a change, to keep libraries with the data.
pub fn function_command(argv: &[Bytes], scripts: &Scripts, save: &dyn Fn(&Scripts)) -> Reply {
    let sub = argv.get(1).map(|s| s.to_ascii_lowercase()).unwrap_or_default();
    let syntax = || {
        Reply::Error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
            String::from_utf8_lossy(&argv[1])
        ))
    };
    if argv.len() < 2 {
        return Reply::Error("ERR wrong number of arguments for 'function' command".into());
    }
    if let Some(wrong) = crate::acl::arity_error(argv) {
        return wrong;
    }
    let reply = match sub.as_slice() {
        b"load" => {
            let mut replace = false;
            let mut i = 2;
            while i + 1 < argv.len() {
                if argv[i].eq_ignore_ascii_case(b"replace") {
                    replace = true;
                    i += 1;
                } else {
                    return Reply::Error(format!(
                        "ERR Unknown option given: {}",
                        String::from_utf8_lossy(&argv[i])
                    ));
                }
            }
            let Some(code) = argv.get(i) else { return Reply::Error("ERR Function code is missing".into()) };
            match scripts.load_library(&String::from_utf8_lossy(code), replace) {
                Ok(name) => Reply::Bulk(name.into()),
                Err(e) => return Reply::Error(format!("ERR {e}")),
            }
        }
        b"delete" if argv.len() == 3 => {
            let name = String::from_utf8_lossy(&argv[2]).into_owned();
            if lock(&scripts.libraries).remove(&name).is_none() {
                return Reply::Error("ERR Library not found".into());
            }
            scripts.changed();
            Reply::OK
        }
        b"flush" if argv.len() <= 3 => {
            if let Some(mode) = argv.get(2)
                && !mode.eq_ignore_ascii_case(b"sync")
                && !mode.eq_ignore_ascii_case(b"async")
            {
                return Reply::Error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option".into());
            }
            lock(&scripts.libraries).clear();
            scripts.changed();
            Reply::OK
        }
        b"kill" if argv.len() == 2 => return scripts.kill(false),
        b"list" => {
            let (mut pattern, mut with_code) = (None, false);
            let mut i = 2;
            while i < argv.len() {
                // Each option once, as Redis: a repeat is an unknown argument.
                if argv[i].eq_ignore_ascii_case(b"withcode") && !with_code {
                    with_code = true;
                } else if argv[i].eq_ignore_ascii_case(b"libraryname") && pattern.is_none() {
                    let Some(p) = argv.get(i + 1) else {
                        return Reply::Error("ERR library name argument was not given".into());
                    };
                    pattern = Some(rediskv::server::args::Glob::new(p));
                    i += 1;
                } else {
                    return Reply::Error(format!(
                        "ERR Unknown argument {}",
                        String::from_utf8_lossy(&argv[i])
                    ));
                }
                i += 1;
            }
            let libs = lock(&scripts.libraries);
            let pair = |k: &str, v: Reply| (Reply::bulk(k.as_bytes()), v);
            let items = libs
                .iter()
                .filter(|(name, _)| pattern.as_ref().is_none_or(|g| g.matches(name.as_bytes())))
                .map(|(name, lib)| {
                    let functions = lib
                        .functions
                        .iter()
                        .map(|f| {
                            Reply::Map(vec![
                                pair("name", Reply::bulk(f.name.as_bytes())),
                                pair(
                                    "description",
                                    f.description.as_ref().map_or(Reply::Nil, |d| Reply::bulk(d.as_bytes())),
                                ),
                                pair(
                                    "flags",
                                    Reply::Set(
                                        f.flags.iter().map(|s| Reply::Status(s.clone().into())).collect(),
                                    ),
                                ),
                            ])
                        })
                        .collect();
                    let mut fields = vec![
                        pair("library_name", Reply::bulk(name.as_bytes())),
                        pair("engine", Reply::bulk(b"LUA")),
                        pair("functions", Reply::Array(functions)),
                    ];
                    if with_code {
                        fields.push(pair("library_code", Reply::bulk(lib.code.as_bytes())));
                    }
                    Reply::Map(fields)
                })
                .collect();
            return Reply::Array(items);
        }
        b"stats" if argv.len() == 2 => {
            let pair = |k: &str, v: Reply| (Reply::bulk(k.as_bytes()), v);
            let running = lock(&scripts.running)
                .as_ref()
                .map(|r| (r.function, r.command.clone(), r.since.elapsed().as_millis() as i64));
            let libs = lock(&scripts.libraries);
            let script = match running {
                Some((function, command, duration)) => {
                    let command = unpack_command(&command);
                    // A function's name as registered: FCALL finds it whatever its case.
                    let name = match command.get(1) {
                        Some(called) if function => libs
                            .values()
                            .flat_map(|l| l.functions.iter())
                            .find(|f| f.name.as_bytes().eq_ignore_ascii_case(called))
                            .map_or(*called, |f| f.name.as_bytes()),
                        _ => &b""[..],
                    };
                    Reply::Map(vec![
                        pair("name", Reply::bulk(name)),
                        pair("command", Reply::Array(command.iter().copied().map(Reply::bulk).collect())),
                        pair("duration_ms", Reply::Integer(duration)),
                    ])
                }
                None => Reply::Nil,
            };
            let functions: usize = libs.values().map(|l| l.functions.len()).sum();
            return Reply::Map(vec![
                pair("running_script", script),
                pair(
                    "engines",
                    Reply::Map(vec![pair(
                        "LUA",
                        Reply::Map(vec![
                            pair("libraries_count", Reply::Integer(libs.len() as i64)),
                            pair("functions_count", Reply::Integer(functions as i64)),
                        ]),
                    )]),
                ),
            ]);
        }
        b"help" if argv.len() == 2 => {
            return Reply::Array(FUNCTION_HELP.iter().map(|s| Reply::status(s)).collect());
        }
        b"dump" if argv.len() == 2 => {
            let libs = lock(&scripts.libraries);
            return Reply::Bulk(
                rediskv::rdb::dump_functions(libs.values().map(|l| l.code.as_bytes())).into(),
            );
        }
        b"restore" if argv.len() <= 4 => {
            let policy = match argv.get(3).map(|p| p.to_ascii_lowercase()) {
                None => Policy::Append,
                Some(p) if p == b"append" => Policy::Append,
                Some(p) if p == b"replace" => Policy::Replace,
                Some(p) if p == b"flush" => Policy::Flush,
                Some(_) => {
                    return Reply::Error(
                        "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE."
                            .into(),
                    );
                }
            };
            match scripts.restore(&argv[2], policy) {
                Ok(()) => Reply::OK,
                Err(e) => return Reply::Error(format!("ERR {e}")),
            }
        }
        b"delete" | b"flush" | b"kill" | b"stats" | b"help" | b"dump" | b"restore" => return syntax(),
        _ => {
            return Reply::Error(format!(
                "ERR unknown subcommand '{}'. Try FUNCTION HELP.",
                String::from_utf8_lossy(&argv[1])
            ));
        }
    };
    save(scripts);
    reply
}

pub(super) const FUNCTION_HELP: &[&str] = &[
    "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
    "HELP",
    "    Prints this help.",
];
