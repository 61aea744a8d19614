//! The library's backend conformance kit, unchanged, on a real 3-member etcd cluster (each
//! check on its own key prefix).

use rediskv_etcd::testkit as common;

#[test]
fn conformance_kit_on_a_three_member_cluster() {
    let Some(cluster) = common::Cluster::start("conformance_kit_on_a_three_member_cluster", 3) else {
        return;
    };
    let n = std::sync::atomic::AtomicUsize::new(0);
    rediskv::conformance::run_all(|| {
        cluster.open(&format!("conformance{}/", n.fetch_add(1, std::sync::atomic::Ordering::Relaxed)))
    });
}
