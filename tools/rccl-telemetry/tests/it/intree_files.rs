//! Files of RCCL's in-tree C engine (version "1.0"): fixtures written by hand from
//! INTREE_FORMAT.md (tests/fixtures/intree), never by our writer.

use crate::common::intree_fixture;
use rccl_telemetry_tool::{check, load, model::SourceFormat, summary};

#[test]
fn an_intree_file_maps_onto_the_model() {
    let run = load::load_run(&[intree_fixture("rccl_telemetry_n1_1000_42.json")]);
    assert!(run.bad.is_empty(), "{:?}", run.bad);
    let f = &run.files[0].file;
    assert_eq!(f.format, SourceFormat::InTree);
    assert_eq!(f.process_id, 42);
    assert_eq!(f.histogram_interval_ns, 30_000);
    let d = &f.devices[0];
    // In-tree names become ours.
    assert!(
        d.hw_counters.contains_key("out_of_sequence")
            && !d.hw_counters.contains_key("oos_drop_count")
    );
    let q = &d.channels[0].queue_pairs[0];
    assert_eq!(q.role.as_deref(), Some("data"));
    assert_eq!(q.counters.wqe_completion_histogram, vec![2, 1]);
    // Channel fields the format lacks are the sums over its QPs.
    assert_eq!(d.channels[0].counters.num_write_wqe, 3);
    assert_eq!(d.channels[0].counters.wqe_completion_ns_max, 40_000);
    let s = summary::summarize(&run, false);
    assert_eq!(s.num_wqe_sent, 3);
    assert_eq!(s.latency[0].latency.samples, 3);
}

#[test]
fn check_uses_the_intree_rules() {
    let good = check::check_inputs(&[intree_fixture("rccl_telemetry_n1_1000_42.json")]).unwrap();
    assert!(good.violations.is_empty(), "{:?}", good.violations);
    assert_eq!(good.files_valid, 1);

    let reset =
        check::check_inputs(&[intree_fixture("reset_rccl_telemetry_n1_1000_44.json")]).unwrap();
    assert_eq!(reset.violations.len(), 1, "{:?}", reset.violations);
    let v = &reset.violations[0];
    assert_eq!(v.path, "/devices/0/hw_counters/oos_drop_count");
    assert!(v.message.contains("negative delta -5"), "{}", v.message);

    let quote =
        check::check_inputs(&[intree_fixture("quote_rccl_telemetry_n2_1000_43.json")]).unwrap();
    assert_eq!(quote.files_unreadable, 1);
    assert!(
        quote.violations[0].message.contains("host name \"n\"2\""),
        "{}",
        quote.violations[0].message
    );
}
