//! The reader against the writer: every file the writer's types can produce reads back into
//! the read model (format/src/read.rs) with every key and value the writer emitted, but the
//! keys the model deliberately does not carry (`NOT_READ`). Channels and queue pairs are read
//! through wire structs of their own (read/wire.rs, faster than serde's flatten), which repeat
//! the model's fields: a field added to the model and not to its wire struct would otherwise
//! be dropped on every read without an error.

use serde_json::Value;

/// Keys the writer emits that the read model does not carry (nothing in the tool reads them),
/// as paths with array indices written `#`.
const NOT_READ: [&str; 24] = [
    "/devices/#/num_srq_recv_wqe",
    "/devices/#/num_wc_unknown_qp",
    "/devices/#/peers/#/num_qps_shared",
    "/devices/#/finalized_comms/#/peers/#/num_qps_shared",
    "/devices/#/channels/#/num_send_wqe",
    "/devices/#/channels/#/num_read_wqe",
    "/devices/#/channels/#/num_atomic_wqe",
    "/devices/#/channels/#/num_other_wqe",
    "/devices/#/channels/#/num_wqe_track_full",
    "/devices/#/channels/#/queue_pairs/#/num_send_wqe",
    "/devices/#/channels/#/queue_pairs/#/num_read_wqe",
    "/devices/#/channels/#/queue_pairs/#/num_atomic_wqe",
    "/devices/#/channels/#/queue_pairs/#/num_other_wqe",
    "/devices/#/channels/#/queue_pairs/#/num_wqe_track_full",
    "/devices/#/finalized_comms/#/num_send_wqe",
    "/devices/#/finalized_comms/#/num_read_wqe",
    "/devices/#/finalized_comms/#/num_atomic_wqe",
    "/devices/#/finalized_comms/#/num_other_wqe",
    "/devices/#/finalized_comms/#/num_wqe_track_full",
    "/devices/#/finalized_comms/#/queue_pairs/#/num_send_wqe",
    "/devices/#/finalized_comms/#/queue_pairs/#/num_read_wqe",
    "/devices/#/finalized_comms/#/queue_pairs/#/num_atomic_wqe",
    "/devices/#/finalized_comms/#/queue_pairs/#/num_other_wqe",
    "/devices/#/finalized_comms/#/queue_pairs/#/num_wqe_track_full",
];

/// `path` with its array indices as `#`.
fn generic(path: &str) -> String {
    path.split('/')
        .map(|s| {
            if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
                "#"
            } else {
                s
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// What the writer wrote (`w`) and the read model lost or changed (`r`, the model serialised
/// again). A null or an empty array the model leaves out on serialising is not a loss.
fn compare(path: &str, w: &Value, r: &Value, lost: &mut Vec<String>) {
    match (w, r) {
        (Value::Object(wo), Value::Object(ro)) => {
            for (k, v) in wo {
                let at = format!("{path}/{k}");
                match ro.get(k) {
                    Some(rv) => compare(&at, v, rv, lost),
                    None if v.is_null() || v.as_array().is_some_and(Vec::is_empty) => {}
                    None if NOT_READ.contains(&generic(&at).as_str()) => {}
                    None => lost.push(format!("{at}: not read")),
                }
            }
        }
        (Value::Array(wa), Value::Array(ra)) if wa.len() == ra.len() => {
            for (i, (a, b)) in wa.iter().zip(ra).enumerate() {
                compare(&format!("{path}/{i}"), a, b, lost);
            }
        }
        _ if w != r => lost.push(format!("{path}: written {w}, read {r}")),
        _ => {}
    }
}

#[test]
fn every_key_the_writer_emits_is_read_back() {
    let mut lost = Vec::new();
    for (name, text) in super::files() {
        let f: rccl_telemetry_format::read::TelemetryFile = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("the writer's {name} file does not read: {e}"));
        let written: Value = serde_json::from_str(&text).unwrap();
        let read = serde_json::to_value(&f).unwrap();
        let mut l = Vec::new();
        compare("", &written, &read, &mut l);
        lost.extend(l.into_iter().map(|x| format!("{name}: {x}")));
    }
    assert!(lost.is_empty(), "{}", lost.join("\n"));
}
