//! The library's backend conformance kit, unchanged, on fjall in a temp dir.

use rediskv_engine::testkit::InTempDir;
use rediskv_fjall::{Backend, Options, open};

fn fresh() -> InTempDir<Backend> {
    InTempDir::open("fjall-conformance", |path| open(path, Options::default()))
}

rediskv::kv_backend_conformance!(fresh());

#[test]
fn run_all_in_one_directory_each() {
    rediskv::conformance::run_all(fresh);
}

/// The kit again with group commit, as the server opens a store: a write of one record
/// then goes to its keyspace without a fjall batch.
#[test]
fn run_all_with_group_commit() {
    rediskv::conformance::run_all(|| {
        InTempDir::open("fjall-conformance-group-commit", |path| {
            open(path, Options { group_commit: true, ..Options::default() })
        })
    });
}

/// The kit behind the server's `MetadataCache`, as the server opens a store: metadata from
/// its slots, list walks from its runs read ahead through fjall's scans.
#[test]
fn run_all_behind_the_metadata_cache() {
    rediskv::conformance::run_all(|| {
        rediskv::MetadataCache::new(InTempDir::open("fjall-conformance-cached", |path| {
            open(path, Options { group_commit: true, ..Options::default() })
        }))
    });
}

/// The kit as the server opens a store: group commit, each round's batches held in memory
/// ([`rediskv_engine::GroupCommit`]) behind the `MetadataCache`. The kit never persists, so
/// its reads find their records held, or committed by a scan or a snapshot.
#[test]
fn run_all_as_the_server_opens_it() {
    rediskv::conformance::run_all(|| {
        rediskv::MetadataCache::new(InTempDir::open("fjall-conformance-held", |path| {
            open(path, Options { group_commit: true, ..Options::default() })
                .map(rediskv_engine::GroupCommit::new)
        }))
    });
}
