//! Generates include/rccl_telemetry.h from src/capi.rs (cbindgen), appends the inline hooks'
//! C source (src/rccl_telemetry_inline.h), and gives the shared object its SONAME.

use std::path::PathBuf;

/// Major version of the C ABI: the SONAME is librccl_telemetry.so.<ABI_MAJOR>.
const ABI_MAJOR: &str = "0";

fn main() {
    let root =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librccl_telemetry.so.{ABI_MAJOR}");
    // Handles are valid for the life of the process (the C ABI's promise), and background
    // threads and signal handlers run library code: dlclose must never unmap it.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    println!("cargo:rerun-if-changed=src/capi.rs");
    println!("cargo:rerun-if-changed=src/counters.rs");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=src/rccl_telemetry_inline.h");

    let config =
        cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml is valid");
    // Only capi.rs (and the opaque slot types it names) make the header.
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(root.join("src/capi.rs"))
        .with_src(root.join("src/counters.rs"))
        .generate()
        .expect("cbindgen could not generate the header");
    let mut header = Vec::new();
    bindings.write(&mut header);
    header.push(b'\n');
    header.extend(
        std::fs::read(root.join("src/rccl_telemetry_inline.h"))
            .expect("src/rccl_telemetry_inline.h is readable"),
    );
    // Rewrite only on a change, so an unchanged header keeps its mtime (make's C-test rules
    // depend on it).
    let out = root.join("include/rccl_telemetry.h");
    if std::fs::read(&out).ok().as_deref() != Some(&header[..]) {
        std::fs::write(&out, &header).expect("include/rccl_telemetry.h is writable");
    }
}
