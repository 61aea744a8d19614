//! A full disk never kills the server: on a small tmpfs the test mounts, writes fill it until
//! the store refuses them with Redis' MISCONF error while reads, PING's answer and INFO go
//! on over the same connection; once the test frees room the server writes again by itself,
//! and after a `kill -9` and a restart every acknowledged write is there and FSCK is clean.
//! Mounting needs root: elsewhere the test says so and skips (under `CI=true` it fails).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Client, Value, rediskv};

/// Redis 7.0's refusal of a write while its AOF cannot be written, for a full disk.
const MISCONF: &str = "MISCONF Errors writing to the AOF file: No space left on device";

/// The value written under key number `i`: 20 KB that name their key.
fn value(i: usize) -> String {
    format!("{i:08}").repeat(2500)
}

/// A tmpfs of `size` mounted on a new directory, unmounted and removed on drop.
struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    /// `None` (after saying why) where mounting is not permitted; a panic under `CI=true`.
    /// `tag` names the mount point, one per test running at the same time.
    fn mount(size: &str, tag: &str) -> Option<Tmpfs> {
        let path = std::env::temp_dir().join(format!("rediskv-disk-full-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&path).expect("create the mount point");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&path)
            .output();
        match mounted {
            Ok(out) if out.status.success() => Some(Tmpfs { path }),
            other => {
                let _ = std::fs::remove_dir(&path);
                let why = match other {
                    Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_string(),
                    Err(e) => e.to_string(),
                };
                let test = common::test_name();
                if std::env::var("CI").as_deref() == Ok("true") {
                    panic!("{test}: mounting a tmpfs is required when CI=true (run as root): {why}");
                }
                // Past the harness' capture, as a skipped comparison says it.
                use std::io::Write;
                let _ = writeln!(
                    std::io::stderr(),
                    "\n!!! SKIPPED {test}: cannot mount a tmpfs ({why}); run as root to fill a disk !!!\n"
                );
                None
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// Sends `commands` in one write (one round of the server's single event loop) and reads
/// their replies.
fn pipeline(c: &mut Client, commands: &[&[&str]]) -> Vec<Value> {
    let mut bytes = Vec::new();
    for args in commands {
        bytes.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in *args {
            bytes.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
    }
    c.send_raw(&bytes);
    commands.iter().map(|_| c.try_read().expect("a reply: the connection stays open")).collect()
}

/// Writes keys from `*next` on until one is refused; returns the refusal. Every key
/// acknowledged goes into `acked`.
fn write_until_refused(c: &mut Client, next: &mut usize, acked: &mut Vec<usize>) -> String {
    loop {
        let i = *next;
        *next += 1;
        match c
            .cmd_or_none(&["SET", &format!("key:{i}"), &value(i)])
            .expect("a reply: the connection stays open")
        {
            Value::Status(s) if s == "OK" => acked.push(i),
            Value::Error(e) => return e,
            other => panic!("SET answered {other:?}"),
        }
        assert!(*next < 100_000, "the disk never filled");
    }
}

fn fill_and_recover(engine: &str, appendfsync: &str) {
    let Some(fs) = Tmpfs::mount("24m", engine) else { return };
    let dir = fs.path.join("data");
    let dir_arg = dir.to_str().unwrap();
    // The room the test gives back once the disk is full.
    let filler = fs.path.join("filler");
    std::fs::write(&filler, vec![1u8; 8 << 20]).expect("write the filler file");
    // One event loop: a pipeline's commands run in one round, before any retry.
    let args = ["--engine", engine, "--dir", dir_arg, "--appendfsync", appendfsync, "--threads", "1"];
    let mut server = rediskv(&args);
    let mut c = server.client();
    let (mut next, mut acked) = (0, Vec::new());

    // Full: writes are refused in Redis' words; reads, PING's answer and INFO go on.
    let mut refused = 0;
    loop {
        let refusal = write_until_refused(&mut c, &mut next, &mut acked);
        assert_eq!(refusal, MISCONF);
        refused += 1;
        let first = format!("key:{}", acked[0]);
        let i = next;
        next += 1;
        let replies = pipeline(
            &mut c,
            &[
                &["SET", &format!("key:{i}"), &value(i)],
                &["INFO", "persistence"],
                &["PING"],
                &["GET", &first],
                &["DBSIZE"],
            ],
        );
        if replies[0] == Value::Status("OK".into()) {
            // The retry found room again (the store dropped what it had not persisted): the
            // key holds the value every acknowledged key is checked against.
            acked.push(i);
            assert!(refused < 50, "the store never stayed refusing");
            continue;
        }
        assert_eq!(replies[0], Value::Error(MISCONF.into()));
        let info = replies[1].text();
        assert!(info.contains("aof_last_write_status:err\r\n"), "{info}");
        assert!(info.contains("aof_last_bgrewrite_status:ok\r\n"), "{info}");
        assert_eq!(replies[2], Value::Error(MISCONF.into()), "PING, as Redis 7.0 answers it");
        assert_eq!(replies[3], Value::Bulk(Some(value(acked[0]).into_bytes())));
        assert!(matches!(replies[4], Value::Int(n) if n >= acked.len() as i64));
        break;
    }
    assert!(acked.len() > 100, "only {} writes before the disk filled", acked.len());
    let full_at = acked.len();

    // Room again: writes succeed without a restart, on the same connection.
    std::fs::remove_file(&filler).expect("remove the filler");
    let mut waited = 0;
    loop {
        let i = next;
        next += 1;
        match c.cmd_or_none(&["SET", &format!("key:{i}"), &value(i)]).expect("a reply") {
            Value::Status(s) if s == "OK" => {
                acked.push(i);
                break;
            }
            Value::Error(e) => assert_eq!(e, MISCONF),
            other => panic!("SET answered {other:?}"),
        }
        waited += 1;
        assert!(waited < 200, "writes never came back");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    for _ in 0..20 {
        let i = next;
        next += 1;
        assert_eq!(c.cmd(&["SET", &format!("key:{i}"), &value(i)]), Value::Status("OK".into()));
        acked.push(i);
    }
    assert!(c.cmd(&["INFO", "persistence"]).text().contains("aof_last_write_status:ok\r\n"));

    // Every acknowledged write survives a kill -9 and a restart, and the store is consistent.
    server.kill();
    drop(server);
    let server = rediskv(&args);
    let mut c = server.client();
    let lost: Vec<usize> = acked
        .iter()
        .copied()
        .filter(|&i| c.cmd(&["GET", &format!("key:{i}")]) != Value::Bulk(Some(value(i).into_bytes())))
        .collect();
    assert!(lost.is_empty(), "{} of {} acknowledged writes lost: {lost:?}", lost.len(), acked.len());
    assert_eq!(c.cmd(&["FSCK"]), Value::Array(Some(Vec::new())));
    eprintln!(
        "{engine}, appendfsync {appendfsync}: {full_at} writes acknowledged before the disk was full, {refused} refusal cycles, {} acknowledged in all, 0 lost",
        acked.len()
    );
    drop(server);
    remove_store(&dir);
}

fn remove_store(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_full_disk_refuses_writes_and_recovers_by_itself_on_fjall() {
    fill_and_recover("fjall", "always");
    fill_and_recover("fjall", "everysec");
}

#[cfg(feature = "rocksdb")]
#[test]
fn a_full_disk_refuses_writes_and_recovers_by_itself_on_rocksdb() {
    fill_and_recover("rocksdb", "always");
    fill_and_recover("rocksdb", "everysec");
}
