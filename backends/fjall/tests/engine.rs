//! fjall on disk: restart, versions across a clock set back, garbage leaving the disk,
//! corrupt records, a directory written with another layout (scenarios in
//! `rediskv_engine::testkit`).

use rediskv_engine::testkit;
use std::path::Path;

use rediskv_fjall::{Backend, Options, Sync};

/// `rediskv_fjall::open` at one path type, as the scenarios take it.
fn open(path: &Path, options: Options) -> rediskv::Result<Backend> {
    rediskv_fjall::open(path, options)
}

#[test]
fn restart_keeps_everything_sync_always() {
    testkit::restart(open, Sync::Always);
}

#[test]
fn restart_keeps_everything_sync_everysec() {
    testkit::restart(open, Sync::Everysec);
}

#[test]
fn restart_keeps_everything_sync_no() {
    testkit::restart(open, Sync::No);
}

#[test]
fn versions_stay_above_the_floor_when_the_clock_is_set_back() {
    let mut child = std::process::Command::new(std::env::current_exe().expect("test binary"));
    child.args(["--exact", "clock_set_back_child", "--include-ignored", "--test-threads=1"]);
    testkit::clock_set_back_parent(open, child);
}

#[test]
#[ignore = "the child half of versions_stay_above_the_floor_when_the_clock_is_set_back"]
fn clock_set_back_child() {
    testkit::clock_set_back_child(open);
}

#[test]
fn deleted_collections_leave_the_disk() {
    let figures = testkit::gc_on_disk(open, 200_000);
    let [subkey, score] = figures.shrink_percent();
    println!("fjall GC on disk: subkey CF shed {subkey:.1}%, score CF {score:.1}%: {figures:?}");
}

#[test]
fn corrupt_records_are_errors_naming_the_key() {
    testkit::corrupt_records(open);
}

#[test]
fn a_directory_with_another_layout_is_refused() {
    testkit::other_layout_refused(open);
}
