//! The vocabulary table in src/hw/README.md is the one the code generates.

use rccl_telemetry::hw;

#[test]
fn readme_table_is_the_code_table() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/hw/README.md")).unwrap();
    let table = hw::testing::vocabulary_markdown();
    assert!(
        readme.contains(table.trim()),
        "src/hw/README.md's vocabulary table is stale; regenerate it from hw::testing::vocabulary_markdown():\n{table}"
    );
}
