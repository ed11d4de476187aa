//! Generates the interposer's engine.h into OUT_DIR, and writes nothing else: cbindgen's
//! declarations of the engine's extern "C" functions (src/lib.rs) and of the per-QP counters
//! and their constant (../src/qp_ext.rs), the one definition of each. `make preload` writes
//! it to build/preload/include/engine.h (src/bin/engine_header.rs prints it), where the C
//! interposer finds it.

use std::path::PathBuf;

fn main() {
    let root =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let sources = [root.join("src/lib.rs"), root.join("../src/qp_ext.rs")];
    for f in sources.iter().chain([&root.join("cbindgen.toml")]) {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let config =
        cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml is valid");
    let mut b = cbindgen::Builder::new().with_config(config);
    for s in &sources {
        b = b.with_src(s);
    }
    b.generate()
        .expect("cbindgen could not generate engine.h")
        .write_to_file(out.join("engine.h"));
}
