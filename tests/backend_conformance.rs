//! The reference backend passes the conformance kit it ships.

rediskv::kv_backend_conformance!(rediskv::MemoryBackend::new());

#[test]
fn run_all_passes_on_memory_backend() {
    rediskv::conformance::run_all(rediskv::MemoryBackend::new);
}
