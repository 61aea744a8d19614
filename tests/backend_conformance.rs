//! The reference backend passes the conformance kit it ships.

rediskv::kv_backend_conformance!(rediskv::backend::MemoryBackend::new());

#[test]
fn run_all_passes_on_memory_backend() {
    rediskv::backend::conformance::run_all(rediskv::backend::MemoryBackend::new);
}
