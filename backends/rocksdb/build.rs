//! A prebuilt static RocksDB (`ROCKSDB_LIB_DIR` with `ROCKSDB_STATIC`) is linked by
//! librocksdb-sys without the C++ runtime it needs: link it here.

fn main() {
    println!("cargo:rerun-if-env-changed=ROCKSDB_LIB_DIR");
    println!("cargo:rerun-if-env-changed=ROCKSDB_STATIC");
    let prebuilt_static =
        std::env::var_os("ROCKSDB_LIB_DIR").is_some() && std::env::var_os("ROCKSDB_STATIC").is_some();
    let target = std::env::var("TARGET").unwrap_or_default();
    if prebuilt_static {
        if target.contains("apple") || target.contains("freebsd") || target.contains("openbsd") {
            println!("cargo:rustc-link-lib=dylib=c++");
        } else if target.contains("linux") {
            println!("cargo:rustc-link-lib=dylib=stdc++");
        }
    }
}
