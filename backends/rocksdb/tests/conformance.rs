//! The library's backend conformance kit, unchanged, on RocksDB in a temp dir.

use rediskv_engine::testkit::InTempDir;
use rediskv_rocksdb::{Backend, Options, open};

fn fresh() -> InTempDir<Backend> {
    InTempDir::open("rocksdb-conformance", |path| open(path, Options::default()))
}

rediskv::kv_backend_conformance!(fresh());

#[test]
fn run_all_in_one_directory_each() {
    rediskv::conformance::run_all(fresh);
}

/// The kit behind the server's `MetadataCache`, as the server opens a store: metadata from
/// its slots, list walks from its runs read ahead through RocksDB's iterators.
#[test]
fn run_all_behind_the_metadata_cache() {
    rediskv::conformance::run_all(|| rediskv::MetadataCache::new(fresh()));
}

/// The kit as the server opens a store: group commit, each round's batches held in memory
/// ([`rediskv_engine::GroupCommit`]) behind the `MetadataCache`. The kit never persists, so
/// its reads find their records held, or committed by a scan or a snapshot.
#[test]
fn run_all_as_the_server_opens_it() {
    rediskv::conformance::run_all(|| {
        rediskv::MetadataCache::new(InTempDir::open("rocksdb-conformance-held", |path| {
            open(path, Options { group_commit: true, ..Options::default() })
                .map(rediskv_engine::GroupCommit::new)
        }))
    });
}
