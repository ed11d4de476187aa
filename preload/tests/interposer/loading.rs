//! How the interposer attaches, or does not: disabled it leaves every table the provider's
//! and writes nothing, a static program is not caught, and dlsym(RTLD_NEXT/RTLD_DEFAULT)
//! stays relative to the caller.

use super::common::*;

#[test]
fn disabled_leaves_every_table_alone_and_writes_nothing() {
    let Some(b) = bins("disabled_leaves_every_table_alone_and_writes_nothing") else {
        return;
    };
    for app in [&b.direct, &b.nccl] {
        let r = run(app, &b, &["disabled"], &[], false);
        assert_eq!(
            r.said["pristine"], 1,
            "ops, verbs_context, cq_ex and qp_ex are the provider's"
        );
        assert!(r.files.is_empty());
        let r = run(app, &b, &["disabled"], &[], true);
        assert_eq!(
            r.said["pristine"], 0,
            "enabled, the tables are wrapped (so the check above can fail)"
        );
        assert_eq!(r.files.len(), 1);
    }
}

#[test]
fn a_static_program_is_not_caught() {
    let Some(b) = bins("a_static_program_is_not_caught") else {
        return;
    };
    // LD_PRELOAD does not apply to a statically linked program: it runs as without it.
    let r = run(&b.static_app, &b, &["chain", "10"], &[], true);
    assert_eq!(r.said["polls"][0], 24); // 2 * 10 + 4, as check_chain counts them
    assert_eq!(r.said["pristine"], 1, "nothing wrapped");
    assert!(r.files.is_empty());
}

#[test]
fn dlsym_rtld_next_and_default_stay_relative_to_the_caller() {
    let Some(b) = bins("dlsym_rtld_next_and_default_stay_relative_to_the_caller") else {
        return;
    };
    for enable in [true, false] {
        for app in [&b.direct, &b.nccl] {
            let r = run(app, &b, &["dlnext"], &[], enable);
            assert_eq!(r.said["next_is_default"], 1, "{}", r.said);
            assert_eq!(
                r.said["next_from"], "librccl_telemetry_preload.so",
                "{}",
                r.said
            );
        }
    }
}
