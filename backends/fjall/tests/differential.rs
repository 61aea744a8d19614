//! The root package's differential suite (`tests/differential/suite.rs`: random command
//! sequences against a real `redis-server`, every reply compared, in RESP2 and RESP3) with
//! the engine on fjall: one database in a temporary directory, emptied before each sequence.
//! Same environment variables (`DIFF_OPS`, `DIFF_SEED`, `DIFF_FAMILIES`…); every family, by
//! default, in every `cargo test` (30,000 commands in about 10 s in a debug build).

/// The store under the engine: one fjall database per test (thread), shared by its sequences.
type Backend = std::sync::Arc<rediskv_fjall::Backend>;

std::thread_local! {
    static STORE: (rediskv_engine::testkit::TempDir, Backend) = {
        let dir = rediskv_engine::testkit::TempDir::new("differential");
        let options = rediskv_engine::Options { sync: rediskv_engine::Sync::No, ..Default::default() };
        let store = rediskv_fjall::open(dir.path(), options).expect("open fjall");
        (dir, std::sync::Arc::new(store))
    };
}

/// The test's database, emptied (every record of the four column families deleted in one
/// batch).
fn new_backend() -> Backend {
    use rediskv::KeyRange;
    use rediskv::{Direction, KvBackend, WriteBatch};
    let store = STORE.with(|(_, store)| store.clone());
    let mut batch = WriteBatch::new();
    for cf in rediskv::ColumnFamily::ALL {
        for item in store.scan(cf, &KeyRange::prefix(Vec::new()), Direction::Forward).expect("scan") {
            batch.delete(cf, item.expect("record").0);
        }
    }
    store.write(batch).expect("empty the store");
    store.clone()
}

/// Every family runs here too.
const SKIPPED_BY_DEFAULT: &[&str] = &[];

/// SETRANGE's largest offset becomes 1 MB here: every later read of a 512 MB string reads
/// and checksums it from fjall's files (a 1,000,000-command run managed 40 commands a second,
/// and a debug run took minutes); the memory run keeps the real edge.
const HUGE_VALUES: bool = false;

/// Part of every `cargo test`, as the memory run.
const RUN_BY_DEFAULT: bool = true;

include!("../../../tests/differential/suite.rs");
