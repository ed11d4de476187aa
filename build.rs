//! Generates include/rccl_telemetry.h from src/capi.rs (cbindgen) and gives the shared
//! object its SONAME.

use std::path::PathBuf;

/// Major version of the C ABI: the SONAME is librccl_telemetry.so.<ABI_MAJOR>.
const ABI_MAJOR: &str = "0";

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librccl_telemetry.so.{ABI_MAJOR}");
    // Handles are valid for the life of the process (the C ABI's promise), and background
    // threads and signal handlers run library code: dlclose must never unmap it.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    println!("cargo:rerun-if-changed=src/capi.rs");
    println!("cargo:rerun-if-changed=src/counters.rs");
    println!("cargo:rerun-if-changed=cbindgen.toml");

    let config = cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml is valid");
    // Only capi.rs (and the opaque slot types it names) make the header.
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(root.join("src/capi.rs"))
        .with_src(root.join("src/counters.rs"))
        .generate()
        .expect("cbindgen could not generate the header");
    bindings.write_to_file(root.join("include/rccl_telemetry.h"));
}
