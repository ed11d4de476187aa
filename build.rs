//! Generates the C header's declarations into OUT_DIR, and writes nothing else: cbindgen's
//! declarations from src/capi.rs (and the opaque slot types of src/counters.rs), the version
//! macros from Cargo.toml's version and the inline hooks' layout number from src/hot.rs, as
//! OUT_DIR/rccl_telemetry_decls.h. The rest of the header needs the crate itself (the C mirrors
//! of its layouts are generated from the Rust structs by src/inline_abi.rs), so
//! examples/rccl_telemetry_header.rs, which links it, prints the whole header: these
//! declarations, then the inline hooks' C source (src/rccl_telemetry_inline.h) with the mirrors
//! in place of its marker line. `make header` writes that to include/rccl_telemetry.h;
//! `make header-check` fails when the committed header is not it.

use std::path::PathBuf;

fn main() {
    let root =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    for f in [
        "src/capi.rs",
        "src/counters.rs",
        "src/hot.rs",
        "cbindgen.toml",
    ] {
        println!("cargo:rerun-if-changed={f}");
    }

    let var = |k: &str| std::env::var(k).expect("cargo sets CARGO_PKG_VERSION_*");
    let (major, minor, patch) = (
        var("CARGO_PKG_VERSION_MAJOR"),
        var("CARGO_PKG_VERSION_MINOR"),
        var("CARGO_PKG_VERSION_PATCH"),
    );
    let num = |s: &str| s.parse::<u32>().expect("a numeric version component");
    let code = num(&major) * 10000 + num(&minor) * 100 + num(&patch);
    let hot = std::fs::read_to_string(root.join("src/hot.rs")).expect("src/hot.rs is readable");
    let layout = hot
        .lines()
        .find_map(|l| l.strip_prefix("pub const INLINE_LAYOUT: u64 = "))
        .and_then(|v| v.strip_suffix(';'))
        .expect("src/hot.rs defines `pub const INLINE_LAYOUT: u64 = N;`");
    let mut config =
        cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml is valid");
    config.after_includes = Some(format!(
        "\n/* The version of this header; rcclTelemetryGetVersion() returns the running library's\n \
         * RCCL_TELEMETRY_VERSION_CODE. */\n\
         #define RCCL_TELEMETRY_VERSION_MAJOR {major}\n\
         #define RCCL_TELEMETRY_VERSION_MINOR {minor}\n\
         #define RCCL_TELEMETRY_VERSION_PATCH {patch}\n\
         /* major * 10000 + minor * 100 + patch */\n\
         #define RCCL_TELEMETRY_VERSION_CODE {code}\n\
         /* The layout of the library internals the inline hooks read (the library publishes its\n \
         * own in rcclTelemetryHotV3.layout; the header's wrappers check that they are equal). */\n\
         #define RCCL_TELEMETRY_INLINE_LAYOUT {layout}"
    ));
    // Only capi.rs (and the opaque slot types it names) make the declarations.
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(root.join("src/capi.rs"))
        .with_src(root.join("src/counters.rs"))
        .generate()
        .expect("cbindgen could not generate the header");
    let mut header = Vec::new();
    bindings.write(&mut header);
    std::fs::write(out.join("rccl_telemetry_decls.h"), &header).expect("OUT_DIR is writable");
}
