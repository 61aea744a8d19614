//! CONFIG and the parameter table.

use bytes::Bytes;
use rediskv::commands::Reply;
use rediskv::commands::args::glob_match;

/// CONFIG GET answers the few parameters tools ask about; CONFIG SET/RESETSTAT accept.
pub fn config(argv: &[Bytes]) -> Reply {
    const PARAMS: &[(&str, &str)] = &[("save", ""), ("appendonly", "no"), ("databases", "16")];
    let Some(sub) = argv.get(1) else {
        return Reply::Error("ERR wrong number of arguments for 'config' command".into());
    };
    if sub.eq_ignore_ascii_case(b"get") && argv.len() >= 3 {
        let mut items = Vec::new();
        for (name, value) in PARAMS {
            if argv[2..].iter().any(|p| glob_match(&p.to_ascii_lowercase(), name.as_bytes())) {
                items.push(Reply::bulk(name.as_bytes()));
                items.push(Reply::bulk(value.as_bytes()));
            }
        }
        Reply::Array(items)
    } else if (sub.eq_ignore_ascii_case(b"set") && argv.len() >= 4 && argv.len() % 2 == 0)
        || (sub.eq_ignore_ascii_case(b"resetstat") && argv.len() == 2)
    {
        Reply::OK
    } else {
        Reply::Error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try CONFIG HELP.",
            String::from_utf8_lossy(sub)
        ))
    }
}
