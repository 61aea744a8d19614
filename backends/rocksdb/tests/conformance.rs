//! The library's backend conformance kit, unchanged, on RocksDB in a temp dir.

use rediskv_engine::testkit::InTempDir;
use rediskv_rocksdb::{Backend, Options, open};

fn fresh() -> InTempDir<Backend> {
    InTempDir::open("rocksdb-conformance", |path| open(path, Options::default()))
}

rediskv::kv_backend_conformance!(fresh());

#[test]
fn run_all_in_one_directory_each() {
    rediskv::backend::conformance::run_all(fresh);
}
