//! Prints the C header this build generates (build.rs writes it into OUT_DIR):
//! `make header` writes it to include/rccl_telemetry.h, `make header-check` compares.

fn main() {
    print!(
        "{}",
        include_str!(concat!(env!("OUT_DIR"), "/rccl_telemetry.h"))
    );
}
