//! Lua scripting, as Redis 7.0 embeds it: EVAL / EVALSHA / EVAL_RO / EVALSHA_RO and SCRIPT,
//! FUNCTION and FCALL / FCALL_RO.
//!
//! Lua 5.1 (vendored by `mlua`, built by cargo). Each thread that runs scripts has a Lua
//! state of its own: every event loop, and the script thread (`script_thread::spawn`). A
//! script first runs on the event loop that received it, for at most [`INLINE_BUDGET`]; one
//! that would take longer, or publish, or that arrives while another script runs, gives up
//! having written nothing and runs again, from the start and to its end, on the script
//! thread, while its client waits parked and its loop goes on serving (see [`run`](mod@run)). The
//! script cache and the libraries are shared; each state compiles a cached script on its
//! first run and is rebuilt when SCRIPT FLUSH or a library change bumps the generation
//! (FUNCTION LOAD checks a library in a fresh state). One script runs at a time (the
//! running slot, [`Scripts::claim`]), through
//! [`rediskv::Engine::atomically_or_abandon`]: alone, seeing its own writes,
//! committed as one batch (a script that fails after writing keeps its writes, as in Redis).
//!
//! The sandbox follows Redis': the `base`, `table`, `string` and `math` libraries, `bit`,
//! `cjson`, `cmsgpack` and `struct` (written here), no `loadfile`/`dofile`/`print`, no
//! `getfenv`/`setfenv`/`newproxy`; globals can be neither created nor read when undefined,
//! and neither they, the library tables nor the strings' metatable can be changed, also by
//! code `loadstring` and `load` make (see [`sandbox`]); replies convert between Lua and RESP as Redis converts them, RESP3
//! included after `redis.setresp(3)`; errors carry Redis' `script: …, on @user_script:N.`
//! suffix. A script past `busy-reply-threshold` makes other threads' clients get BUSY, and
//! SCRIPT KILL / FUNCTION KILL stop one that has not written.
//!
//! One concern per file: [`registry`] (cache, libraries, the running script), [`run`](mod@run)
//! (running a script command), [`sandbox`] (the Lua state), [`bridge`] (`redis.call`),
//! [`convert`] (Lua ↔ RESP), [`cjson`], [`bit`], [`commands`] (SCRIPT and FUNCTION).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mlua::{HookTriggers, Lua, LuaOptions, MultiValue, RegistryKey, StdLib, Table, Value, VmState};
use rediskv::server::args::parse_i64;
use rediskv::server::table::{self, flag};
use rediskv::{Protocol, Reply};
use sha1::{Digest, Sha1};

use crate::lua_struct::caller_place;
use crate::store::SharedEngine;
use crate::sync::lock;

mod bit;
mod bridge;
mod cjson;
mod commands;
mod convert;
mod registry;
mod run;
mod sandbox;

use bit::*;
pub use bridge::*;
use cjson::*;
pub use commands::*;
use convert::*;
pub use registry::*;
pub use run::*;
use sandbox::*;
