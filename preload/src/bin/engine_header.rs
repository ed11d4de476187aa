//! Prints the interposer's engine.h this build generates (build.rs writes it into OUT_DIR):
//! `make preload` writes it to build/preload/include/engine.h. A binary, not an example, so
//! that the engine's own `cargo build` makes it (an example would build the dev-dependencies).

fn main() {
    print!("{}", include_str!(concat!(env!("OUT_DIR"), "/engine.h")));
}
