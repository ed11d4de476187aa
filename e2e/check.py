#!/usr/bin/env python3
"""Check what the e2e guests brought out against the programs' own tallies.

Usage: check.py single RESULTDIR   (RESULTDIR/single/out from run_guest.sh single)
       check.py pair   RESULTDIR   (RESULTDIR/{server,client}/out)

Prints one line per check, "PASS <name>" or "FAIL <name>: <why>", and exits 1 if
any check failed. Python 3 standard library plus python3-jsonschema (Debian).
"""
import glob
import json
import os
import re
import subprocess
import sys

from e2e_checks import HW_KEYS, hw_key, rxe_raw

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA = os.path.join(ROOT, "schema", "rccl_telemetry.schema.json")

# Counters every channel and QP carries, plain counts of what the program did: the rows of the
# counter table (format/src/counters.rs, as data in schema/wqe_counts.json) that every object
# has; the optional ones (num_wqe_sampled) are checked with the latency keys.
with open(os.path.join(ROOT, "schema", "wqe_counts.json")) as _f:
    QP_COUNTERS = [c["key"] for c in json.load(_f)["counters"] if not c["optional"]]
LATENCY_KEYS = {"wqe_completion_histogram", "wqe_completion_log_histogram", "wqe_completion_ns_min", "wqe_completion_ns_max",
                "num_wqe_sampled", "latency_sample_interval"}

# Hardware keys and where rxe reads them come from the vocabulary (schema/hw_counters.json,
# e2e_checks.py): delta_{tx,rx}_packets and rdma_sends/rdma_recvs from rxe's hw_counters, the
# NIC-level port_* keys from the netdev's statistics; delta_{tx,rx}_bytes: rxe exposes no RoCE
# byte counter, so -1 is the honest value there.
# The guest NIC's own counters, and the virtio-net ethtool -S names they must agree with
# (the netdev statistics names are the vocabulary's).
NIC_KEYS = [(hw_key("port_tx_bytes"), "tx_queue_0_bytes"), (hw_key("port_rx_bytes"), "rx_queue_0_bytes"),
            (hw_key("port_tx_packets"), "tx_queue_0_packets"),
            (hw_key("port_rx_packets"), "rx_queue_0_packets")]


# enum ibv_wc_status without IBV_WC_, by value (the file's status names)
WC_STATUS = ["SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR", "LOC_PROT_ERR", "WR_FLUSH_ERR",
             "MW_BIND_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR", "REM_INV_REQ_ERR", "REM_ACCESS_ERR", "REM_OP_ERR",
             "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR", "REM_INV_RD_REQ_ERR", "REM_ABORT_ERR",
             "INV_EECN_ERR", "INV_EEC_STATE_ERR", "FATAL_ERR", "RESP_TIMEOUT_ERR", "GENERAL_ERR", "TM_ERR",
             "TM_RNDV_INCOMPLETE"]


def status_name(code):
    return WC_STATUS[code] if 0 <= code < len(WC_STATUS) else f"UNKNOWN_{code}"


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def ok(self, name, cond, why=""):
        if cond:
            self.passed += 1
            print(f"PASS {name}")
        else:
            self.failed += 1
            print(f"FAIL {name}: {why}")
        return cond

    def equal(self, name, got, want):
        return self.ok(name, got == want, f"file has {got!r}, program did {want!r}")


C = Checks()


def load(path):
    with open(path) as f:
        return json.load(f)


def read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def kv(path):
    """'name value' lines -> {name: int}"""
    out = {}
    for line in read(path).splitlines():
        parts = line.replace(":", " ").split()
        if len(parts) >= 2 and re.fullmatch(r"-?\d+", parts[-1]):
            out[parts[0]] = int(parts[-1])
    return out


def raw_delta(d, kind, name, suffix=""):
    b = kv(os.path.join(d, f"{kind}_before{suffix}.txt"))
    a = kv(os.path.join(d, f"{kind}_after{suffix}.txt"))
    if name not in a or name not in b:
        return None
    return a[name] - b[name]


_validator = None


def validate(name, doc):
    global _validator
    if _validator is None:
        try:
            import jsonschema
        except ImportError:
            return C.ok(name, False, "python3-jsonschema is not installed (apt-get install python3-jsonschema)")
        _validator = jsonschema.Draft202012Validator(load(SCHEMA))
    errs = sorted(_validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    return C.ok(name, not errs, "; ".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message[:160]}" for e in errs[:3]))


def size_bucket_counts(stats, sizes):
    """Assign each (size, count) the program posted to the first emitted bucket whose
    max_wqe_size bounds it (empty buckets are not emitted, and a posted size's own
    bucket is never empty, so this is its bucket). Returns the expected list."""
    want = {}
    maxes = sorted(b["max_wqe_size"] for b in stats)
    for size, cnt in sizes:
        home = next((m for m in maxes if m >= size), None)
        want[home] = want.get(home, 0) + cnt
    return want


def telemetry_file(name, d, tally):
    """The one file for this process in the output directory, named as the spec says."""
    want = f"rccl_telemetry_{tally['host_name']}_0_{tally['process_id']}.json"
    files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(d, "rccl_telemetry_*.json")))
    if not C.ok(f"{name}: JSON file {want} written", want in files, f"directory holds {files}"):
        return None
    try:
        return load(os.path.join(d, want))
    except ValueError as e:
        C.ok(f"{name}: JSON parses", False, str(e))
        return None


def compare_sw(name, doc, tally, sampled_n):
    """Every software counter in the file against the program's tally."""
    C.equal(f"{name}: process_id", doc.get("process_id"), tally["process_id"])
    C.equal(f"{name}: host_name", doc.get("host_name"), tally["host_name"])
    C.equal(f"{name}: transport", doc.get("transport"), "IB-CAST")
    if sampled_n > 1:
        C.equal(f"{name}: latency_sample_interval", doc.get("latency_sample_interval"), sampled_n)
    else:
        C.ok(f"{name}: no latency_sample_interval at N=1", "latency_sample_interval" not in doc,
             f"found {doc.get('latency_sample_interval')}")
    devs = doc.get("devices", [])
    tdev = tally["devices"][0]
    dev = next((x for x in devs if x.get("device_id") == tdev["device_id"]), None)
    if not C.ok(f"{name}: device {tdev['device_id']} present", dev is not None, f"devices: {[x.get('device_id') for x in devs]}"):
        return None
    C.equal(f"{name}: roce_device", dev["roce_device"], tdev["roce_device"])
    for k in ["tx_bytes", "rx_bytes", "num_cq_errors", "cq_poll_count", "num_channels", "active_channels",
              "num_qp_untracked"]:
        C.equal(f"{name}: device {k}", dev.get(k), tdev[k])
    stats = dev.get("wqe_size_stats", [])
    got = {b["max_wqe_size"]: b["num_wqe"] for b in stats}
    C.equal(f"{name}: wqe_size_stats", got, size_bucket_counts(stats, tdev["wqe_sizes"]))
    C.equal(f"{name}: wqe_size_stats total", sum(got.values()), sum(c for _, c in tdev["wqe_sizes"]))

    chans = {c.get("id"): c for c in dev.get("channels", [])}
    order = lambda i: (i is None, i if i is not None else 0)
    C.equal(f"{name}: channel ids", sorted(chans, key=order), sorted((c["id"] for c in tdev["channels"]), key=order))
    bad_qp, bad_ch, bad_lat = [], [], []
    for tc in tdev["channels"]:
        ch = chans.get(tc["id"])
        if ch is None:
            continue
        for k in ["num_req_completed", "num_data_qp", "num_cts_qp", "num_qp_untracked"]:
            if ch.get(k) != tc[k]:
                bad_ch.append(f"ch {tc['id']} {k}: {ch.get(k)} != {tc[k]}")
        qps = {q.get("id"): q for q in ch.get("queue_pairs", [])}
        if sorted(qps) != sorted(q["id"] for q in tc["queue_pairs"]):
            bad_qp.append(f"ch {tc['id']} QP ids {sorted(qps)} != {sorted(q['id'] for q in tc['queue_pairs'])}")
        for k in QP_COUNTERS:
            # channel value is the sum of its QP slots, and that is what the program did
            want = sum(q[k] for q in tc["queue_pairs"])
            if ch.get(k) != want:
                bad_ch.append(f"ch {tc['id']} {k}: {ch.get(k)} != {want}")
        for tq in tc["queue_pairs"]:
            q = qps.get(tq["id"])
            if q is None:
                continue
            where = f"ch {tc['id']} qp {tq['id']}"
            if q.get("role") != tq["role"]:
                bad_qp.append(f"{where} role {q.get('role')} != {tq['role']}")
            for k in QP_COUNTERS:
                if q.get(k) != tq[k]:
                    bad_qp.append(f"{where} {k}: {q.get(k)} != {tq[k]}")
            bad_lat += latency_problems(where, q, tq["num_wqe_sampled"] if sampled_n > 1 else tq["num_wqe_completed"], sampled_n)
        bad_lat += latency_problems(f"ch {tc['id']}", ch, sum(
            q["num_wqe_sampled"] if sampled_n > 1 else q["num_wqe_completed"] for q in tc["queue_pairs"]), sampled_n)
    C.ok(f"{name}: channel counters = program tally", not bad_ch, "; ".join(bad_ch[:6]))
    C.ok(f"{name}: queue-pair counters = program tally", not bad_qp, "; ".join(bad_qp[:6]))
    C.ok(f"{name}: latency fields cover exactly the sampled completions", not bad_lat, "; ".join(bad_lat[:6]))
    if sampled_n > 1:
        # Independently of the program's own tally: 1-in-N selection by posting position
        # measures between floor(c/N) and ceil(c/N) + (one per QP) of c matched completions.
        qps = [q for ch in dev.get("channels", []) for q in ch.get("queue_pairs", [])]
        comp = sum(q.get("num_wqe_completed", 0) for q in qps)
        samp = sum(q.get("num_wqe_sampled", 0) for q in qps)
        lo, hi = comp // sampled_n - len(qps), -(-comp // sampled_n) + len(qps)
        C.ok(f"{name}: 1 in {sampled_n} completions sampled", comp > 0 and lo <= samp <= hi,
             f"{samp} sampled of {comp} completed over {len(qps)} QPs, want {max(lo, 0)}..{hi}")
    return dev


def latency_problems(where, obj, sampled, n):
    out = []
    hist = obj.get("wqe_completion_histogram", [])
    if sum(hist) != sampled:
        out.append(f"{where}: histogram sums to {sum(hist)}, {sampled} completions were sampled")
    if n > 1:
        if obj.get("num_wqe_sampled") != sampled:
            out.append(f"{where}: num_wqe_sampled {obj.get('num_wqe_sampled')} != {sampled}")
    elif "num_wqe_sampled" in obj:
        out.append(f"{where}: num_wqe_sampled present at N=1")
    lo, hi = obj.get("wqe_completion_ns_min"), obj.get("wqe_completion_ns_max")
    if sampled == 0 and (lo, hi) != (-1, -1):
        out.append(f"{where}: min/max {lo}/{hi} with nothing sampled (want -1/-1)")
    if sampled > 0 and not (isinstance(lo, int) and isinstance(hi, int) and 0 < lo <= hi):
        out.append(f"{where}: min/max {lo}/{hi} over {sampled} samples")
    return out


def stall_problems(doc):
    """Any stall anywhere in a file (format 3 with detection on): per device
    num_qps_stalled, per QP stalled / longest_stall_ms."""
    out = []
    for dev in doc.get("devices", []):
        if dev.get("num_qps_stalled", 0):
            out.append(f"device {dev.get('device_id')} num_qps_stalled {dev['num_qps_stalled']}")
        for ch in dev.get("channels", []):
            for q in ch.get("queue_pairs", []):
                if q.get("stalled") or q.get("longest_stall_ms", 0):
                    out.append(f"ch {ch.get('id')} qp {q.get('id')}: stalled {q.get('stalled')}, "
                               f"longest {q.get('longest_stall_ms')} ms")
    return out


def check_no_stall(name, doc):
    """Clean runs: the stall keys are there (detection is on by default) and name no stall."""
    if doc.get("version", 0) < 3:
        return
    if C.ok(f"{name}: stall detection on (stall_ms > 0, per-QP stall keys)", doc.get("stall_ms", 0) > 0 and all(
            "longest_stall_ms" in q for d in doc.get("devices", []) for c in d.get("channels", [])
            for q in c.get("queue_pairs", [])), f"stall_ms {doc.get('stall_ms')}"):
        p = stall_problems(doc)
        C.ok(f"{name}: no stall anywhere in the file", not p, "; ".join(p[:3]))


def check_capture(name, tally):
    """rcclTelemetrySwCapture, taken by the program before exit, against the same tally."""
    cap = [c for c in tally.get("sw_capture", []) if c["device_id"] == 0]
    if not C.ok(f"{name}: SwCapture returned device 0", len(cap) == 1, f"got {tally.get('sw_capture')}"):
        return
    cap = cap[0]
    tdev = tally["devices"][0]
    qps = [q for c in tdev["channels"] for q in c["queue_pairs"]]
    want = {"tx_bytes": tdev["tx_bytes"], "rx_bytes": tdev["rx_bytes"], "num_cq_errors": tdev["num_cq_errors"],
            "wqe_sent": sum(q["num_wqe_sent"] for q in qps), "recv_wqe": sum(q["num_recv_wqe"] for q in qps),
            "wqe_rcvd": sum(q["num_wqe_rcvd"] for q in qps),
            "wqe_completed": sum(q["num_wqe_completed"] for q in qps),
            "wqe_sampled": sum(q["num_wqe_sampled"] for q in qps)}
    got = {k: cap[k] for k in want}
    C.equal(f"{name}: SwCapture totals", got, want)


def check_hw(name, dev, tally, d, netdev, suffix="", pair=False):
    """Hardware counters: rxe identity, and deltas bounded by the traffic below and by
    the raw counters the guest read around the whole process above."""
    C.equal(f"{name}: hw_type", dev.get("hw_type"), "rxe")
    C.equal(f"{name}: eth_device", dev.get("eth_device"), netdev)
    hw = dev.get("hw_counters", {})
    C.equal(f"{name}: hw_counters has the vocabulary's keys, in its order", list(hw), HW_KEYS)
    tr = tally["traffic"]
    for direction, mine in [("tx", tr["request_pkts_sent_min"]), ("rx", tr["request_pkts_received_min"])]:
        k = hw_key(f"delta_{direction}_packets")
        rxe_name = rxe_raw(k)[1]
        nd_name = rxe_raw(f"port_{direction}_packets")[1]
        v = hw.get(k)
        hi = max(x for x in [raw_delta(d, "rxe", rxe_name, suffix), raw_delta(d, "netdev", nd_name, suffix), 0]
                 if x is not None)
        C.ok(f"{name}: hw {k} >= request packets of the traffic ({mine})", isinstance(v, int) and v >= mine > 0,
             f"{k} = {v}")
        C.ok(f"{name}: hw {k} <= the raw counter's move around the process ({hi})", isinstance(v, int) and v <= hi,
             f"{k} = {v}")
    for k, want in [(hw_key("rdma_sends"), tr["sends_completed"]), (hw_key("rdma_recvs"), tr["recv_completions"])]:
        rxe_name = rxe_raw(k)[1]
        v = hw.get(k)
        if pair:   # the other rank on this host shares the device: bounded, not equal
            hi = raw_delta(d, "rxe", rxe_name, suffix)
            C.ok(f"{name}: hw {k} in [{want}, {hi}]", isinstance(v, int) and hi is not None and want <= v <= hi,
                 f"{k} = {v}")
        else:
            C.ok(f"{name}: hw {k} = {rxe_name} the program caused ({want})", v == want and want > 0, f"{k} = {v}")
    # The guest NIC's values: read (not -1), and within what ethtool -S and the netdev
    # statistics saw move around the whole process.
    for k, eth_name in NIC_KEYS:
        nd_name = rxe_raw(k)[1]
        v = hw.get(k)
        hi = max(x for x in [raw_delta(d, "ethtool", eth_name, suffix), raw_delta(d, "netdev", nd_name, suffix), 0]
                 if x is not None)
        C.ok(f"{name}: guest NIC {k} read (not -1) and <= its ethtool/netdev move ({hi})",
             isinstance(v, int) and 0 <= v <= hi, f"{k} = {v}")
    for k in [hw_key("delta_tx_bytes"), hw_key("delta_rx_bytes")]:
        v = hw.get(k)
        want = tally["devices"][0]["tx_bytes" if "tx" in k else "rx_bytes"]
        C.ok(f"{name}: hw {k} is -1 (rxe has no RoCE byte counter) or covers the payload ({want})",
             v == -1 or (isinstance(v, int) and v >= want), f"{k} = {v}")
    if pair:
        # traffic crosses the NICs: the NIC byte counters carry at least the payload
        for k, want in [("port_tx_bytes", tally["devices"][0]["tx_bytes"]),
                        ("port_rx_bytes", tally["devices"][0]["rx_bytes"])]:
            v = hw.get(k)
            C.ok(f"{name}: hw {k} >= payload bytes ({want}): RoCE crossed the NIC",
                 isinstance(v, int) and v >= want > 0, f"{k} = {v}")
        for k, want in [("port_tx_packets", tr["request_pkts_sent_min"]),
                        ("port_rx_packets", tr["request_pkts_received_min"])]:
            v = hw.get(k)
            C.ok(f"{name}: hw {k} >= request packets ({want})", isinstance(v, int) and v >= want > 0, f"{k} = {v}")


def tally_errors(tq):
    """A tally QP's error completions: {status name: count}, and its first status name (None)."""
    by = {status_name(int(k)): v for k, v in tq.get("cq_errors_by_code", {}).items()}
    first = tq.get("first_error_code", -1)
    return by, (status_name(first) if first >= 0 else None)


def file_errors(doc):
    """-> {(channel id, qp id): qp} of the QPs whose cq_errors are not empty, and the device's by status."""
    out, dev_by = {}, {}
    for dev in doc.get("devices", []):
        if dev.get("device_id") == 0:
            dev_by = dev.get("cq_errors_by_status", {})
        for ch in dev.get("channels", []):
            for q in ch.get("queue_pairs", []):
                if q.get("cq_errors"):
                    out[(ch.get("id"), q.get("id"))] = q
    return out, dev_by


def check_errors(name, doc, tally):
    """Format 4: every QP's cq_errors, first_cq_error and qp_state, and the device's
    cq_errors_by_status, against the program's own tally of the completions it polled."""
    if doc.get("version", 0) < 4:
        C.ok(f"{name}: format version 4 (per-QP errors)", False, f"version {doc.get('version')}")
        return {}
    bad, dev_want = [], {}
    qps = {(c.get("id"), q.get("id")): q for d in doc.get("devices", []) if d.get("device_id") == 0
           for c in d.get("channels", []) for q in c.get("queue_pairs", [])}
    for tc in tally["devices"][0]["channels"]:
        for tq in tc["queue_pairs"]:
            by, first = tally_errors(tq)
            for k, v in by.items():
                dev_want[k] = dev_want.get(k, 0) + v
            q = qps.get((tc["id"], tq["id"]))
            if q is None:
                continue
            where = f"ch {tc['id']} qp {tq['id']}"
            if q.get("cq_errors") != by:
                bad.append(f"{where} cq_errors {q.get('cq_errors')} != {by}")
            fe = q.get("first_cq_error")
            if (fe or {}).get("status") != first:
                bad.append(f"{where} first_cq_error {fe} != {first}")
            if q.get("qp_state") != ("ERR" if first else None):
                bad.append(f"{where} qp_state {q.get('qp_state')}")
    C.ok(f"{name}: per-QP cq_errors, first_cq_error, qp_state = program tally", not bad, "; ".join(bad[:4]))
    _, dev_by = file_errors(doc)
    C.equal(f"{name}: device cq_errors_by_status", dev_by, dev_want)
    return dev_want


def check_clean_errors(name, doc, tally, probe):
    """A clean run: no error completion but the error probe's one REM_ACCESS_ERR."""
    errs, dev_by = file_errors(doc)
    want = {"REM_ACCESS_ERR": 1} if probe else {}
    C.ok(f"{name}: no error but the probe's (cq_errors_by_status {want})", dev_by == want and len(errs) == len(want),
         f"device {dev_by}, QPs {[(k, q.get('cq_errors')) for k, q in errs.items()]}")


TOOL = os.path.join(ROOT, "target", "release", "rccl-telemetry")


def stalls_roots(name, tdir, want_root):
    """rccl-telemetry stalls --json on a run's files: without want_root, no root and nothing
    stalled now; with it, the roots it names are printed (INFO) and returned."""
    if not os.access(TOOL, os.X_OK):
        C.ok(f"{name}: rccl-telemetry built (stalls)", False, f"no {TOOL}")
        return None
    r = subprocess.run([TOOL, "stalls", tdir, "--json"], capture_output=True, text=True, timeout=300)
    try:
        st = json.loads(r.stdout)
    except ValueError:
        C.ok(f"{name}: rccl-telemetry stalls --json", False, f"exit {r.returncode}: {r.stderr[-300:]}")
        return None
    roots = st.get("roots", [])
    if want_root:
        print(f"INFO {name}: stalls: basis {st.get('roots_basis')}, roots "
              + "; ".join(f"{x.get('kind')} {x.get('ranks')} {x.get('errors_by_status')}" for x in roots))
        return roots
    C.ok(f"{name}: stalls names no root and no QP stalled now", r.returncode == 0 and not roots and not st.get("stalled_qps"),
         f"exit {r.returncode}, roots {roots}, stalled_qps {st.get('stalled_qps')}")
    return roots


def scenario(name, d, netdev, sampled_n=1):
    """One program run: exit status, payloads, file, schema, software counters, capture."""
    tally_path = os.path.join(d, "tally.json")
    if not C.ok(f"{name}: program exited 0", read(os.path.join(d, "rc")).strip() == "0",
                f"rc={read(os.path.join(d, 'rc')).strip()!r}; stderr: {read(os.path.join(d, 'stderr.txt'))[-400:]}"):
        return None, None
    tally = load(tally_path)
    C.ok(f"{name}: payloads intact", tally["traffic"]["payload_errors"] == 0 and tally["traffic"]["payload_bytes_checked"] > 0,
         str(tally["traffic"]))
    C.ok(f"{name}: telemetry on in the program", tally.get("telemetry_on") == 1, f"rcclTelemetryOn() = {tally.get('telemetry_on')}")
    doc = telemetry_file(name, os.path.join(d, "telemetry"), tally)
    if doc is None:
        return tally, None
    validate(f"{name}: file validates against the schema", doc)
    if not tally.get("expect_errors"):
        check_no_stall(name, doc)
    dev = compare_sw(name, doc, tally, sampled_n)
    check_capture(name, tally)
    check_errors(name, doc, tally)
    if not tally.get("expect_errors"):
        check_clean_errors(name, doc, tally, tally.get("error_probe"))
    return tally, (doc, dev)


def strip_run(obj, drop):
    if isinstance(obj, dict):
        return {k: strip_run(v, drop) for k, v in obj.items() if k not in drop}
    if isinstance(obj, list):
        return [strip_run(v, drop) for v in obj]
    return obj


def diff_paths(a, b, path=""):
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += diff_paths(a.get(k), b.get(k), f"{path}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [p for i, (x, y) in enumerate(zip(a, b)) for p in diff_paths(x, y, f"{path}/{i}")]
    return [] if a == b else [f"{path}: {a!r} vs {b!r}"]


def single(res):
    global C
    out = os.path.join(res, "single", "out")
    netdev = read(os.path.join(out, "rxe_netdev")).strip()
    C.ok("guest: rxe0 bound to a netdev", netdev != "", "no /sys/class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0")

    # 1. the main run, N = 1
    tally, got = scenario("main", os.path.join(out, "main"), netdev)
    if got:
        doc, dev = got
        C.ok("main: no hw_samples without RCCL_TELEMETRY_SAMPLE_MS", "hw_samples" not in doc, "hw_samples present")
        if dev:
            check_hw("main", dev, tally, os.path.join(out, "main"), netdev)

    # The checker itself: the same comparison on a copy of main's file with one QP
    # counter off by one, and one channel's request count off by one, must fail.
    if got:
        real, C = C, Checks()
        import contextlib
        import copy
        import io
        bad = copy.deepcopy(got[0])
        ch0 = bad["devices"][0]["channels"][0]
        ch0["queue_pairs"][0]["num_write_imm_wqe"] += 1
        ch0["num_req_completed"] += 1
        with contextlib.redirect_stdout(io.StringIO()):
            compare_sw("selftest", bad, tally, 1)
        caught = C.failed
        C = real
        C.ok("checker: catches a one-count drift in a QP and in a channel counter", caught >= 2,
             f"{caught} checks failed on the doctored file")

    # 2. LATENCY_SAMPLE=16 on the same workload: only the latency fields differ
    t16, got16 = scenario("lat16", os.path.join(out, "lat16"), netdev, sampled_n=16)
    if got and got16:
        tr = t16["traffic"]
        C.ok("lat16: 1-in-16 sampling measured fewer completions than it matched",
             0 < tr["tokens_sampled"] < tr["tokens_sampled"] + tr["tokens_unsampled"], str(tr))
        # Besides the latency family, what legitimately changes between two runs:
        # the run's identity and clocks, the hardware deltas (TCG timing changes
        # retries and ACK coalescing), and two polling races: num_slot_miss (the
        # seed says so) and cq_poll_count (how often the proxy loop found its CQ empty).
        # (format 3) QP numbers are the device's, new in every process: qp_num and each
        # QP's peer (its QPN) differ too; the device's GID and peers list do not.
        drop = LATENCY_KEYS | {"process_id", "start_time", "end_time", "hw_counters", "num_slot_miss",
                               "cq_poll_count", "qp_num", "peer",
                               # (format 4) wall-clock readings: the detector's checks, the probe's error
                               "last_post_time", "last_completion_time", "time"}
        diffs = diff_paths(strip_run(got[0], drop), strip_run(got16[0], drop))
        C.ok("lat16 vs main: only the latency fields differ", not diffs, "; ".join(diffs[:6]))
        lat_main = [q.get("wqe_completion_histogram") for c in got[1]["channels"] for q in c["queue_pairs"]]
        lat_16 = [q.get("wqe_completion_histogram") for c in got16[1]["channels"] for q in c["queue_pairs"]]
        C.ok("lat16 vs main: the latency fields do differ", lat_main != lat_16, "identical histograms at N=1 and N=16")

    # 3. SAMPLE_MS=5: a hw_samples series whose packet counts rise
    ts, gots = scenario("sample", os.path.join(out, "sample"), netdev)
    if gots:
        doc = gots[0]
        samples = [s for s in doc.get("hw_samples", []) if s.get("device_id") == 0]
        C.ok("sample: hw_samples present for device 0", len(samples) >= 3, f"{len(samples)} samples")
        C.ok("sample: hw_samples_dropped present", isinstance(doc.get("hw_samples_dropped"), int), "missing")
        stamps = [s["timestamp_ns"] for s in samples]
        C.ok("sample: timestamps never go backwards", stamps == sorted(stamps), "out of order")
        keys = sorted({k for s in samples for k in s.get("counters", {})})
        pk = [k for k in keys if re.search(r"pkts|packets", k)]
        series = {k: [s["counters"][k] for s in samples if s["counters"].get(k, -1) != -1] for k in pk}
        readable = {k: v for k, v in series.items() if len(v) >= 2}
        C.ok("sample: samples carry readable packet counters", bool(readable), f"sampled keys: {keys}")
        for k, vals in readable.items():
            C.ok(f"sample: {k} never decreases", vals == sorted(vals), f"values {vals[:4]}...{vals[-4:]}")
        C.ok("sample: a packet count rises over the run", any(v[-1] > v[0] for v in readable.values()),
             f"first/last: { {k: (v[0], v[-1]) for k, v in readable.items()} }")

        # issue 32: a clean run (no error probe) shows no root of a hang
        if ts:
            stalls_roots("sample", os.path.join(out, "sample", "telemetry"), want_root=False)

    # 5. RNR exhausted: the receiver publishes CTS without receives from request 3 on, its
    # peer (itself, over rxe loopback) retries rnr_retry = 1 times, then RNR_RETRY_EXC_ERR
    tr, gotr = scenario("rnr", os.path.join(out, "rnr"), netdev)
    if gotr:
        stalls_roots("rnr", os.path.join(out, "rnr", "telemetry"), want_root=True)
    if gotr:
        doc, dev = gotr
        errs, dev_by = file_errors(doc)
        firsts = {k: q["first_cq_error"] for k, q in errs.items()}
        rnr = {k: f for k, f in firsts.items() if f and f.get("status") == "RNR_RETRY_EXC_ERR"}
        C.ok("rnr: RNR_RETRY_EXC_ERR is the first error of a QP", bool(rnr), f"first errors {firsts}")
        C.ok("rnr: only send data QPs failed, each first with RNR_RETRY_EXC_ERR (flushes after)",
             all(f.get("status") == "RNR_RETRY_EXC_ERR" for f in firsts.values()) and
             set(dev_by) <= {"RNR_RETRY_EXC_ERR", "WR_FLUSH_ERR"}, f"{firsts}; device {dev_by}")
        for k, f in rnr.items():
            C.ok(f"rnr: ch {k[0]} qp {k[1]}: first_cq_error carries vendor_err and time",
                 isinstance(f.get("vendor_err"), int) and str(f.get("time", "")).endswith("Z"), str(f))
        if dev:
            hw = dev.get("hw_counters", {})
            for key in [hw_key("rnr_retry_exceeded_err"), hw_key("rnr_nak_retry_err")]:
                dump, raw = rxe_raw(key)
                moved = raw_delta(os.path.join(out, "rnr"), dump, raw)
                C.ok(f"rnr: rxe's {key} ({raw}) moved, the file's delta within rxe's ({hw.get(key)} of {moved})",
                     isinstance(hw.get(key), int) and hw[key] >= 1 and moved is not None and hw[key] <= moved,
                     f"file {hw.get(key)}, rxe {raw} delta {moved}")
            n_rnr = dev_by.get("RNR_RETRY_EXC_ERR", 0)
            C.ok(f"rnr: rnr_retry_exceeded_err counts the RNR_RETRY_EXC_ERR completions ({n_rnr})",
                 hw.get("rnr_retry_exceeded_err") == n_rnr, f"hw {hw.get('rnr_retry_exceeded_err')}")

    # 4. unwritable output directory: a message, no file, a normal exit
    d = os.path.join(out, "unwritable")
    rc = read(os.path.join(d, "rc")).strip()
    err = read(os.path.join(d, "stderr.txt"))
    C.ok("unwritable: program exited 0", rc == "0", f"rc={rc!r}")
    tu = load(os.path.join(d, "tally.json")) if os.path.exists(os.path.join(d, "tally.json")) else None
    C.ok("unwritable: traffic and payloads unaffected", tu is not None and tu["traffic"]["payload_errors"] == 0
         and tu["traffic"]["payload_bytes_checked"] > 0, "no tally or bad payload")
    path = f"/ro/rccl_telemetry_{tu['host_name']}_0_{tu['process_id']}.json" if tu else "/ro/"
    C.ok("unwritable: stderr names the file it could not write", path in err, f"want {path} in stderr: {err.strip()[-300:]!r}")
    C.ok("unwritable: no file in the directory", read(os.path.join(d, "ro_listing.txt")).strip() == "",
         read(os.path.join(d, "ro_listing.txt")))
    C.ok("unwritable: no file anywhere else", read(os.path.join(d, "stray_files.txt")).strip() == "",
         read(os.path.join(d, "stray_files.txt"))[:300])


def pair(res):
    totals = {}
    for host in ["server", "client"]:
        out = os.path.join(res, host, "out")
        d = os.path.join(out, "pair")
        netdev = read(os.path.join(out, "rxe_netdev")).strip()
        files = sorted(glob.glob(os.path.join(d, "telemetry", "rccl_telemetry_*.json")))
        C.equal(f"pair {host}: one file per rank", len(files), 2)
        for r in [0, 1]:
            name = f"pair {host} rank {r}"
            rc = read(os.path.join(d, f"rc_rank{r}")).strip()
            if not C.ok(f"{name}: program exited 0", rc == "0",
                        f"rc={rc!r}; stderr: {read(os.path.join(d, f'stderr_rank{r}.txt'))[-400:]}"):
                continue
            tally = load(os.path.join(d, f"tally_rank{r}.json"))
            C.ok(f"{name}: payloads from the other host intact", tally["traffic"]["payload_errors"] == 0
                 and tally["traffic"]["payload_bytes_checked"] > 0, str(tally["traffic"]))
            C.ok(f"{name}: telemetry on in the program", tally.get("telemetry_on") == 1,
                 f"rcclTelemetryOn() = {tally.get('telemetry_on')}")
            doc = telemetry_file(name, os.path.join(d, "telemetry"), tally)
            if doc is None:
                continue
            validate(f"{name}: file validates against the schema", doc)
            check_no_stall(name, doc)
            dev = compare_sw(name, doc, tally, 1)
            check_capture(name, tally)
            check_errors(name, doc, tally)
            check_clean_errors(name, doc, tally, tally.get("error_probe"))
            if dev:
                check_hw(name, dev, tally, d, netdev, pair=True)
            totals.setdefault(host, 0)
            totals[host] += tally["devices"][0]["tx_bytes"]
        moved = raw_delta(d, "netdev", "tx_bytes")
        C.ok(f"pair {host}: RoCE traffic crossed the NIC (tx_bytes moved {moved} >= payload {totals.get(host)})",
             moved is not None and totals.get(host) and moved >= totals[host], f"netdev tx_bytes delta {moved}")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("single", "pair"):
        print(__doc__, file=sys.stderr)
        return 2
    {"single": single, "pair": pair}[sys.argv[1]](sys.argv[2])
    print(f"check.py {sys.argv[1]}: {C.passed} passed, {C.failed} failed")
    return 1 if C.failed else 0


if __name__ == "__main__":
    sys.exit(main())
