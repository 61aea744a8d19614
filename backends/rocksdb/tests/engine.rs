//! RocksDB on disk: restart, versions across a clock set back, garbage leaving the disk,
//! corrupt records, a directory written with another layout (scenarios in
//! `rediskv_engine::testkit`).

rediskv_engine::engine_scenarios!("rocksdb", rediskv_rocksdb);
