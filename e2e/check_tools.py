#!/usr/bin/env python3
"""Check the third-party verbs programs' runs (e2e/guest/tools.sh) against a model of each.

Usage: check_tools.py single RESULTDIR   (RESULTDIR/single/out/tools)
       check_tools.py pair   RESULTDIR   (RESULTDIR/{server,client}/out/tools)
       check_tools.py selftest           (canned runs in e2e/testdata/tools: the models pass
                                          on real outputs and catch doctored ones)

A model per program turns its own options (the argv recorded in cmd) and its own output
(iterations and sizes it reports) into what each side did at the verbs calls: send WRs by
opcode, receive WRs, completions, bytes, poll calls, unsignalled WRs retired; and into what
rxe's port hw_counters must have moved: rdma_sends (SEND / SEND_WITH_IMM WRs completed),
rdma_recvs (receive completions), sent_pkts (exact only without retransmissions: MTU 1024,
ceil(len / 1024) packets per request, one ACK per SEND/WRITE message, read responses).
Where a count cannot be exact, the model gives a range and says why.

Bare runs check exit status, output and hardware counters. Runs under
librccl_telemetry_preload.so (a 'preload' marker in the run) also check each side's
telemetry file: named after the process, valid against the schema, and its counters.
Prints "PASS <name>" / "FAIL <name>: <why>" lines, exits 1 on any failure.
"""
import copy
import glob
import json
import os
import re
import shutil
import sys
import tempfile

from e2e_checks import C, E, R, hw_delta, hw_keys_of, kv, opts, pk, read
from tool_models import MODELS, side, ucx

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA = os.path.join(os.path.dirname(HERE), "schema", "rccl_telemetry.schema.json")
TRANSPORT = "verbs-preload"


# --- the telemetry file ------------------------------------------------------------------

_validator = None


def validate(name, doc):
    global _validator
    if _validator is None:
        import jsonschema
        with open(SCHEMA) as f:
            _validator = jsonschema.Draft202012Validator(json.load(f))
    errs = list(_validator.iter_errors(doc))
    return C.ok(f"{name}: file validates against the schema", not errs,
                "; ".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message[:160]}" for e in errs[:3]))


def telemetry_doc(name, sd):
    """The one file of the process whose pid the run recorded."""
    pid = read(os.path.join(sd, "pid")).strip()
    files = sorted(glob.glob(os.path.join(sd, "telemetry", "rccl_telemetry_*.json")))
    mine = [f for f in files if re.search(rf"_{re.escape(pid)}\.json$", f)]
    if not C.ok(f"{name}: one telemetry file, named after pid {pid}", pid and len(mine) == 1 and len(files) == 1,
                f"files: {[os.path.basename(f) for f in files]}"):
        return None
    try:
        with open(mine[0]) as f:
            doc = json.load(f)
    except ValueError as e:
        C.ok(f"{name}: file parses", False, str(e))
        return None
    validate(name, doc)
    if doc.get("version", 0) >= 3:
        # every e2e run is a clean one: detection is on by default and names no stall
        stalls = [f"qp {q.get('qp_num')}: stalled {q.get('stalled')}, longest {q.get('longest_stall_ms')} ms"
                  for d in doc.get("devices", []) for ch in d.get("channels", []) for q in ch.get("queue_pairs", [])
                  if q.get("stalled") or q.get("longest_stall_ms", 0)]
        C.ok(f"{name}: no stall in the file (stall_ms {doc.get('stall_ms')})", doc.get("stall_ms", 0) > 0 and not stalls,
             "; ".join(stalls[:3]) or "detection off")
    C.ok(f"{name}: process_id and transport", doc.get("process_id") == int(pid) and doc.get("transport") == TRANSPORT,
         f"process_id {doc.get('process_id')}, transport {doc.get('transport')!r}")
    return doc


QP_KEYS = {"send": "num_send_wqe", "write": "num_write_wqe", "write_imm": "num_write_imm_wqe", "read": "num_read_wqe",
           "recv": "num_recv_wqe", "retired": "num_wqe_retired_unsignalled"}


def file_counts(doc):
    """Sums over the rxe device's QPs (verbs has no channel: one null bucket) and device keys."""
    dev = next((d for d in doc.get("devices", []) if d.get("roce_device") == "rxe0"), None)
    if dev is None:
        return None, None
    qps = [q for ch in dev.get("channels", []) for q in ch.get("queue_pairs", [])]
    tot = {k: sum(q.get(v, 0) for q in qps) for k, v in QP_KEYS.items()}
    tot["sent"] = sum(q.get("num_wqe_sent", 0) for q in qps)
    tot["rcvd"] = sum(q.get("num_wqe_rcvd", 0) for q in qps)
    tot["completed"] = sum(q.get("num_wqe_completed", 0) for q in qps)
    tot.update(tx=dev.get("tx_bytes"), rx=dev.get("rx_bytes"), errors=dev.get("num_cq_errors"),
               polls=dev.get("cq_poll_count"), srq_recv=dev.get("num_srq_recv_wqe"),
               unknown=dev.get("num_wc_unknown_qp"))
    return dev, tot


def check_file(name, sd, want):
    """The side's file against the model; returns the file's counts (or None)."""
    doc = telemetry_doc(name, sd)
    if doc is None:
        return None
    dev, got = file_counts(doc)
    if not C.ok(f"{name}: device rxe0 in the file", dev is not None, f"devices {[d.get('roce_device') for d in doc.get('devices', [])]}"):
        return None
    C.ok(f"{name}: hw_type rxe, channel unknown", dev.get("hw_type") == "rxe" and dev.get("num_channels") is None,
         f"hw_type {dev.get('hw_type')!r}, num_channels {dev.get('num_channels')!r}")
    hw = list(dev.get("hw_counters", {}))
    keys = hw_keys_of(doc.get("version"))
    C.ok(f"{name}: hw_counters has the keys of schema/hw_counters.json its version has, in its order",
         hw == keys,
         f"{len(hw)} keys; not in the vocabulary: {[k for k in hw if k not in keys][:3]}; "
         f"missing: {[k for k in keys if k not in hw][:3]}")
    for k in ["send", "write", "write_imm", "read", "recv", "srq_recv", "retired", "tx", "rx", "errors", "polls"]:
        C.count(f"{name}: {QP_KEYS.get(k, k)}", got[k], want[k])
    sent = want["send"] + want["write"] + want["write_imm"] + want["read"]
    C.count(f"{name}: num_wqe_sent (every send WR)", got["sent"], sent)
    C.count(f"{name}: num_wqe_rcvd (completions drained)", got["rcvd"], want["send_cqe"] + want["recv_cqe"] + want["errors"])
    C.count(f"{name}: num_wc_unknown_qp", got["unknown"], 0)
    return got


# --- runs -------------------------------------------------------------------------------

def hw_check(name, d, want, pair):
    hw = hw_delta(d)
    for key, k in [("rdma_sends", "hw_sends"), ("rdma_recvs", "hw_recvs")]:
        C.count(f"{name}: rxe {key}", hw.get(key), want[k])
    retrans = {k: hw.get(k, 0) for k in ["duplicate_request", "completer_retry_err", "out_of_seq_request",
                                          "rcvd_seq_err", "rcvd_rnr_err", "send_rnr_err"] if hw.get(k, 0)}
    pk_want = want["hw_pkts"]
    if retrans:  # retransmissions add packets: the ideal count is then a lower bound
        pk_want = R(pk_want.lo, None, f"retransmissions ({retrans})")
    C.count(f"{name}: rxe sent_pkts (ideal count{'' if retrans else ', no retransmission'})", hw.get("sent_pkts"),
            pk_want)


# rping's own teardown race. Its main thread destroys the CM event channel and returns while its
# CM thread still blocks reading that channel; the read fails (EBADF) and the thread calls
# exit(255). When that happens while the main thread runs the exit handlers (the interposer's
# flush among them), the process ends there: rc 255 and no file (a zero-length temporary stays).
# The traffic itself was complete (the client disconnected after its last ping).
RPING_RACE = "rdma_get_cm_event: Bad file descriptor"


def rping_teardown_race(prog, role, rc, stderr):
    lines = stderr.strip().splitlines()
    return (prog == "rping" and role == "server" and rc == "255" and "server DISCONNECT EVENT..." in lines
            and lines[-1] == RPING_RACE)


def run_tools(name, d, pair=False):
    cmds = [l.split() for l in read(os.path.join(d, "cmd")).splitlines() if l.strip()]
    if not C.ok(f"{name}: ran", cmds, "no cmd file"):
        return
    preload = os.path.exists(os.path.join(d, "preload"))
    total, files, size = None, {}, None
    for argv in sorted(cmds, key=lambda a: a[0] != "client"):  # the client's output defines the run
        role, prog, args = argv[0], os.path.basename(argv[1]), argv[2:]
        sd = os.path.join(d, role)
        rc = read(os.path.join(sd, "rc")).strip()
        stderr = read(os.path.join(sd, "stderr"))
        raced = rping_teardown_race(prog, role, rc, stderr)
        if raced:
            C.skip(f"{name}: {role} rping exited 0",
                   f"rc 255 from rping's teardown race ({RPING_RACE!r} after the disconnect: its CM thread "
                   f"exits the process while main runs the exit handlers){', so no file to check' if preload else ''}")
        elif not C.ok(f"{name}: {role} {prog} exited 0", rc == "0", f"rc={rc!r}; stderr: {stderr[-300:]!r}"):
            return
        want = MODELS[prog](args, read(os.path.join(sd, "stdout")), role)
        if want is None:
            return
        if preload and not raced:
            files[role] = check_file(f"{name}: {role}", sd, want)
        if prog == "ucx_perftest" and role == "client":
            size = ucx.last[1]
        total = want if total is None else {k: total[k] + want[k] for k in total}
    if total is not None:
        hw_check(name, d, total, pair)
    if size and files.get("client") and (pair or files.get("server")):
        # UCX's writes are only bounded by the model: tie the file's count to the wire. Each
        # put is pk(size) packets from the client and one ACK from the server.
        hw = hw_delta(d)
        w = files["client"]["write"] + (files["server"]["write"] if not pair else 0)
        if pair:
            want = w * pk(size) if files.get("client") and "client" in [c[0] for c in cmds] else None
        else:
            want = w * (pk(size) + 1)
        retrans = any(hw.get(k, 0) for k in ["duplicate_request", "completer_retry_err", "out_of_seq_request"])
        if want is not None and not retrans:
            C.count(f"{name}: rxe sent_pkts = the file's RDMA_WRITEs ({w}) on the wire", hw.get("sent_pkts"), want)


# verbs_loader: one process, its own exact tally
LOADER_QP = ["num_wqe_sent", "num_send_wqe", "num_write_wqe", "num_write_imm_wqe", "num_read_wqe", "num_recv_wqe",
             "num_wqe_rcvd", "num_wqe_retired_unsignalled"]


def loader_pkts(rounds, probe):
    # per round: WRITE chain 1000/3000/64 B + 3 ACKs, SEND 512, SEND_WITH_IMM 100,
    # WRITE_WITH_IMM 2048 (+ ACK each), READ 4096 (request + 4 responses), B's SEND 256 + ACK
    per = (pk(1000) + pk(3000) + pk(64) + 3) + (pk(512) + 1) + (pk(100) + 1) + (pk(2048) + 1) + (1 + pk(4096)) \
        + (pk(256) + 1)
    return per * rounds + (2 if probe else 0)  # the wrong-rkey WRITE and its NAK


def run_loader(name, d):
    sd = os.path.join(d, "proc")
    argv = read(os.path.join(d, "cmd")).split()[1:]
    rc = read(os.path.join(sd, "rc")).strip()
    if not C.ok(f"{name}: exited 0", rc == "0", f"rc={rc!r}; stderr: {read(os.path.join(sd, 'stderr'))[-300:]!r}"):
        return None
    try:
        t = json.loads(read(os.path.join(sd, "tally.json")))
    except ValueError as e:
        C.ok(f"{name}: tally parses", False, str(e))
        return None
    o, _ = opts(argv[1:], {"--rounds": ("rounds", 1), "--cq": ("cq", 1), "--gid": ("gid", 1), "--tally": ("t", 1),
                          "--no-error-probe": ("noprobe", 0)})
    rounds, probe = int(o.get("rounds", 16)), not o.get("noprobe")
    C.ok(f"{name}: payloads intact", t["payload_errors"] == 0 and t["payload_bytes_checked"] > 0,
         f"{t['payload_errors']} errors over {t['payload_bytes_checked']} bytes")
    # the tally itself against the workload the options ask for
    a, b, c = t["queue_pairs"][0], t["queue_pairs"][1], t["queue_pairs"][2]
    C.ok(f"{name}: tally is the workload of {rounds} rounds",
         (a["num_wqe_sent"], a["num_write_wqe"], a["num_send_wqe"], a["num_write_imm_wqe"], a["num_read_wqe"],
          a["num_wqe_retired_unsignalled"], b["num_recv_wqe"], b["num_wqe_rcvd"], c["num_cq_errors"])
         == (7 * rounds, 3 * rounds, 2 * rounds, rounds, rounds, 2 * rounds, 3 * rounds, 4 * rounds, int(probe)),
         json.dumps(t["queue_pairs"]))
    hw = hw_delta(d)
    C.count(f"{name}: rxe rdma_sends (SEND / SEND_WITH_IMM completed)", hw.get("rdma_sends"), t["sends_completed"])
    C.count(f"{name}: rxe rdma_recvs (receive completions)", hw.get("rdma_recvs"), t["recv_completions"])
    retrans = any(hw.get(k, 0) for k in ["duplicate_request", "completer_retry_err", "out_of_seq_request"])
    C.count(f"{name}: rxe sent_pkts", hw.get("sent_pkts"),
            R(loader_pkts(rounds, probe), None, "retransmissions") if retrans else loader_pkts(rounds, probe))
    if os.path.exists(os.path.join(d, "preload")):
        doc = telemetry_doc(name, sd)
        if doc is not None:
            dev, got = file_counts(doc)
            if C.ok(f"{name}: device rxe0 in the file", dev is not None, "no rxe0"):
                qps = [q for ch in dev.get("channels", []) for q in ch.get("queue_pairs", [])]
                bad = []
                if len(qps) != len(t["queue_pairs"]):
                    bad.append(f"{len(qps)} QPs in the file, {len(t['queue_pairs'])} created")
                for fq, tq in zip(qps, t["queue_pairs"]):  # slots in creation order
                    for k in LOADER_QP:
                        if fq.get(k) != tq[k]:
                            bad.append(f"QP {tq['name']} {k}: {fq.get(k)} != {tq[k]}")
                C.ok(f"{name}: per-QP counters = the program's tally", not bad, "; ".join(bad[:6]))
                for fk, tk in [("tx_bytes", "tx_bytes"), ("rx_bytes", "rx_bytes"), ("num_cq_errors", "num_cq_errors"),
                               ("cq_poll_count", "cq_poll_count")]:
                    C.count(f"{name}: device {fk}", dev.get(fk), t[tk])
                C.count(f"{name}: num_wc_unknown_qp", dev.get("num_wc_unknown_qp"), 0)
    return t


def loaders(prefix, out, sfx):
    tallies = {}
    for m in ["direct", "dlopen"]:
        for c in ["poll", "ex"]:
            n = f"verbs_{m}_{c}{sfx}"
            if os.path.isdir(os.path.join(out, n)):
                tallies[n] = run_loader(f"{prefix}{n}", os.path.join(out, n))
            else:
                C.ok(f"{prefix}{n}: ran", False, "no result directory")
    drop = {"program", "mode", "cq", "process_id", "cq_poll_count", "qp_num"}
    strip = lambda t: json.loads(json.dumps(t), object_hook=lambda o: {k: v for k, v in o.items() if k not in drop})
    base = tallies.get(f"verbs_direct_poll{sfx}")
    for n, t in tallies.items():
        if base and t and n != f"verbs_direct_poll{sfx}":
            C.ok(f"{prefix}{n}: same counts as verbs_direct_poll{sfx}", strip(t) == strip(base),
                 "tallies differ beyond pid, mode and poll calls")


TABLE = ["pingpong", "pingpong_event", "pingpong_new_send", "write_bw", "write_bw_q7", "send_bw", "read_bw", "rping",
         "ucx_put_bw"]


def passes(out):
    """'' always; '+preload' when the image had the interposer (its runs exist). run.sh sets
    E2E_EXPECT_PRELOAD=1 when it put the interposer in the image: then its runs must exist."""
    have = bool(glob.glob(os.path.join(out, "*+preload")))
    if os.environ.get("E2E_EXPECT_PRELOAD") == "1":
        C.ok(f"{out}: runs under the interposer present", have, "the image had librccl_telemetry_preload.so "
             "but the guest made no run under it")
        have = True
    return [""] + (["+preload"] if have else [])


def single(res):
    out = os.path.join(res, "single", "out", "tools")
    for sfx in passes(out):
        for n in TABLE:
            d = os.path.join(out, n + sfx)
            if C.ok(f"{n}{sfx}: ran", os.path.isdir(d), "no result directory"):
                run_tools(n + sfx, d)
        loaders("", out, sfx)


def pair(res):
    for host in ["server", "client"]:
        out = os.path.join(res, host, "out", "tools")
        for sfx in passes(out):
            for n in TABLE:
                d = os.path.join(out, f"pair_{n}{sfx}")
                if C.ok(f"pair {host} {n}{sfx}: ran", os.path.isdir(d), "no result directory"):
                    run_tools(f"pair {host} {n}{sfx}", d, pair=True)


# --- self-test on canned runs ---------------------------------------------------------------

def fake_file(sd, want, pid, perturb=None):
    """A telemetry file holding exactly the model's lower bounds (what a correct interposer
    writes for the canned run), for exercising the file checks without the interposer."""
    lo = {k: v.lo for k, v in want.items()}
    q = {k: 0 for k in ["num_wqe_sent", "num_recv_wqe", "num_wqe_rcvd", "num_wqe_completed", "num_cts_sent",
                        "num_cts_sent_signalled", "num_cts_sent_unsignalled", "num_slot_miss", "num_write_wqe",
                        "num_write_imm_wqe"]}
    q.update(num_wqe_sent=lo["send"] + lo["write"] + lo["write_imm"] + lo["read"], num_recv_wqe=lo["recv"],
             num_wqe_rcvd=lo["send_cqe"] + lo["recv_cqe"] + lo["errors"], num_wqe_completed=lo["send_cqe"],
             num_write_wqe=lo["write"], num_write_imm_wqe=lo["write_imm"], num_send_wqe=lo["send"],
             num_read_wqe=lo["read"], num_atomic_wqe=0, num_other_wqe=0, num_wqe_retired_unsignalled=lo["retired"],
             num_wqe_track_full=0, wqe_completion_ns_min=-1, wqe_completion_ns_max=-1,
             wqe_completion_histogram=[0] * 16)
    ch = dict(q, id=None, num_req_completed=0, num_data_qp=0, num_cts_qp=0, num_qp_untracked=0,
              queue_pairs=[dict(q, id=0, role=None)])
    dev = dict(device_id=0, roce_device="rxe0", eth_device="eth0", hw_type="rxe", tx_bytes=lo["tx"], rx_bytes=lo["rx"],
               num_cq_errors=lo["errors"], cq_poll_count=lo["polls"], num_channels=None, active_channels=1,
               num_qp_untracked=0, wqe_size_stats=[], channels=[ch], num_srq_recv_wqe=lo["srq_recv"],
               num_wc_unknown_qp=0,
               hw_counters={k: 0 if k in ("delta_tx_packets", "delta_rx_packets") else -1 for k in hw_keys_of(1)})
    doc = dict(version=1, host_name="e2e-single", process_name="canned", process_id=pid, start_time="2026-01-01T00:00:00.000000000Z", end_time="2026-01-01T00:00:01.000000000Z",
               final=True, trigger="exit", transport=TRANSPORT, histogram_interval_ns=1000, devices=[dev])
    if perturb:
        perturb(doc)
    os.makedirs(os.path.join(sd, "telemetry"), exist_ok=True)
    with open(os.path.join(sd, "telemetry", f"rccl_telemetry_e2e-single_0_{pid}.json"), "w") as f:
        json.dump(doc, f)


def selftest():
    canned = os.path.join(HERE, "testdata", "tools")

    def run(label, mutate, expect_fail):
        tmp = tempfile.mkdtemp(prefix="check_tools_")
        try:
            out = os.path.join(tmp, "single", "out", "tools")
            shutil.copytree(canned, out)
            mutate(out)
            with C.scoped() as inner:
                single(tmp)
                failed = inner.failed
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        C.ok(f"selftest: {label}: {'caught' if expect_fail else 'passes'}",
             (failed > 0) == expect_fail, f"{failed} checks failed")

    def edit(path, f):
        with open(path) as fh:
            s = fh.read()
        with open(path, "w") as fh:
            fh.write(f(s))

    def bump_hw(name, key, by):
        def m(out):
            edit(os.path.join(out, name, "rxe_after.txt"),
                 lambda s: re.sub(rf"^{key} (\d+)$", lambda x: f"{key} {int(x.group(1)) + by}", s, flags=re.M))
        return m

    def with_files(perturb_of=None):
        """The canned pingpong and write_bw_q7 runs again as '+preload' runs, each side with a
        synthetic file holding the model's counts (perturbed for one side when asked)."""
        def m(out):
            for n in ["pingpong", "write_bw_q7", "rping"]:
                dst = os.path.join(out, n + "+preload")
                shutil.rmtree(dst, ignore_errors=True)  # the real run's files give way to synthetic ones
                shutil.copytree(os.path.join(out, n), dst)
                open(os.path.join(dst, "preload"), "w").close()
                for role in ["client", "server"]:
                    sd = os.path.join(dst, role)
                    pid = 1000 + len(n) + (role == "server")
                    with open(os.path.join(sd, "pid"), "w") as f:
                        f.write(f"{pid}\n")
            # every other run gets a +preload twin without files (a run under the
            # interposer that wrote no file must fail)
            for n in TABLE + [f"verbs_{a}_{b}" for a in ["direct", "dlopen"] for b in ["poll", "ex"]]:
                if not os.path.exists(os.path.join(out, n + "+preload")):
                    shutil.copytree(os.path.join(out, n), os.path.join(out, n + "+preload"))
                    open(os.path.join(out, n + "+preload", "preload"), "w").close()
            with C.scoped():
                for n in ["pingpong", "write_bw_q7", "rping"]:
                    d = os.path.join(out, n + "+preload")
                    cmds = sorted((l.split() for l in read(os.path.join(d, "cmd")).splitlines() if l.strip()),
                                  key=lambda a: a[0] != "client")
                    for argv in cmds:
                        sd = os.path.join(d, argv[0])
                        want = MODELS[os.path.basename(argv[1])](argv[2:], read(os.path.join(sd, "stdout")), argv[0])
                        pid = int(read(os.path.join(sd, "pid")))
                        p = perturb_of(n, argv[0]) if perturb_of else None
                        fake_file(sd, want, pid, p)
        return m

    run("the canned real runs", lambda out: None, False)
    run("rdma_sends one more than pingpong did", bump_hw("pingpong", "rdma_sends", 1), True)
    run("rdma_recvs one less for send_bw", bump_hw("send_bw", "rdma_recvs", -1), True)
    run("sent_pkts one more for read_bw", bump_hw("read_bw", "sent_pkts", 1), True)
    run("sent_pkts one more for verbs_dlopen_ex", bump_hw("verbs_dlopen_ex", "sent_pkts", 1), True)
    run("retransmissions make sent_pkts a lower bound",
        lambda out: (bump_hw("write_bw", "sent_pkts", 7)(out), bump_hw("write_bw", "duplicate_request", 3)(out)), False)
    run("pingpong's -n not what it printed", lambda out: edit(os.path.join(out, "pingpong", "cmd"),
                                                             lambda s: s.replace("-n 64", "-n 65")), True)
    run("perftest -Q other than its CQ moderation", lambda out: edit(os.path.join(out, "write_bw_q7", "cmd"),
                                                                      lambda s: s.replace("-Q 7", "-Q 8")), True)
    run("rping printed one ping less", lambda out: edit(os.path.join(out, "rping", "client", "stdout"),
                                                       lambda s: re.sub(r"^ping data: rdma-ping-19.*\n", "", s,
                                                                        flags=re.M)), True)
    run("a client exited 1", lambda out: edit(os.path.join(out, "ucx_put_bw", "client", "rc"), lambda s: "1\n"), True)

    def rping_server_exit(rc, last):
        def m(out):
            sd = os.path.join(out, "rping", "server")
            edit(os.path.join(sd, "rc"), lambda s: f"{rc}\n")
            with open(os.path.join(sd, "stderr"), "w") as fh:
                fh.write("server DISCONNECT EVENT...\nwait for RDMA_READ_ADV state 10\n" + last + "\n")
        return m
    # rping's own race at exit is told apart from any other failure of it
    run("rping's server lost its teardown race (rc 255, EBADF from its CM thread)",
        rping_server_exit(255, "rdma_get_cm_event: Bad file descriptor"), False)
    run("rping's server exited 255 for another reason", rping_server_exit(255, "cq completion failed status 5"), True)
    run("rping's server exited 1 with the race's message", rping_server_exit(1, "rdma_get_cm_event: Bad file descriptor"),
        True)

    def tally_bump(out):
        p = os.path.join(out, "verbs_dlopen_poll", "proc", "tally.json")
        edit(p, lambda s: s.replace('"num_read_wqe": 16', '"num_read_wqe": 17', 1))
    run("verbs_dlopen counted one RDMA_READ more than verbs_direct", tally_bump, True)
    # the file checks, on synthetic files for the canned runs
    run_files = lambda label, p, fail: run(label, with_files(p), fail)
    only = lambda prog, role, f: (lambda n, r: f if (n, r) == (prog, role) else None)

    def qp(doc):
        return doc["devices"][0]["channels"][0]["queue_pairs"][0]

    def both(f):  # the QP and its channel (the channel is the sum of its QPs)
        return lambda doc: (f(qp(doc)), f(doc["devices"][0]["channels"][0]))

    def drop_file(n, role):
        def m(out):
            for f in glob.glob(os.path.join(out, n, role, "telemetry", "*.json")):
                os.remove(f)
        return m
    run("a run under the interposer without its file (send_bw server)", drop_file("send_bw+preload", "server"), True)
    run("a run under the interposer without its file (verbs_dlopen_ex)", drop_file("verbs_dlopen_ex+preload", "proc"),
        True)

    def file_edit(n, role, f):
        def m(out):
            p = glob.glob(os.path.join(out, n, role, "telemetry", "*.json"))[0]
            with open(p) as fh:
                doc = json.load(fh)
            f(doc)
            with open(p, "w") as fh:
                json.dump(doc, fh)
        return m

    def qp_n(doc, i):
        return doc["devices"][0]["channels"][0]["queue_pairs"][i]
    run("real file: verbs_direct_poll QP B one receive completion less",
        file_edit("verbs_direct_poll+preload", "proc", lambda d: qp_n(d, 1).__setitem__(
            "num_wqe_rcvd", qp_n(d, 1)["num_wqe_rcvd"] - 1)), True)
    run("real file: verbs_dlopen_ex one poll call more",
        file_edit("verbs_dlopen_ex+preload", "proc", lambda d: d["devices"][0].__setitem__(
            "cq_poll_count", d["devices"][0]["cq_poll_count"] + 1)), True)
    run("real file: UCX client one RDMA_WRITE more than the wire saw",
        file_edit("ucx_put_bw+preload", "client", lambda d: [q.__setitem__("num_write_wqe", q["num_write_wqe"] + 1)
                                                             for q in d["devices"][0]["channels"][0]["queue_pairs"]
                                                             if q.get("num_write_wqe")]), True)
    run("real file: hw_counters keys in another order than the vocabulary's",
        file_edit("write_bw+preload", "client", lambda d: d["devices"][0].__setitem__(
            "hw_counters", dict(reversed(list(d["devices"][0]["hw_counters"].items()))))), True)
    run("real file: a hw_counters key the vocabulary lacks",
        file_edit("send_bw+preload", "server", lambda d: d["devices"][0]["hw_counters"].__setitem__(
            "cnp_sent_total", 0)), True)
    run("real file: ib_read_bw client READs counted as writes",
        file_edit("read_bw+preload", "client", lambda d: [
            (q.__setitem__("num_write_wqe", q["num_read_wqe"]), q.__setitem__("num_read_wqe", 0))
            for q in d["devices"][0]["channels"][0]["queue_pairs"] if q.get("num_read_wqe")]), True)

    def only_checked(label, p, fail):
        """Runs the file checks and keeps only the verdict on the three runs with files."""
        tmp = tempfile.mkdtemp(prefix="check_tools_")
        try:
            out = os.path.join(tmp, "single", "out", "tools")
            shutil.copytree(canned, out)
            with_files(p)(out)
            with C.scoped(quiet=not os.environ.get("CHECK_TOOLS_VERBOSE")) as inner:
                for n in ["pingpong", "write_bw_q7", "rping"]:
                    run_tools(n + "+preload", os.path.join(out, n + "+preload"))
                failed = inner.failed
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        C.ok(f"selftest: {label}: {'caught' if fail else 'passes'}", (failed > 0) == fail, f"{failed} checks failed")
    only_checked("synthetic files with the model's counts", None, False)
    only_checked("pingpong server file: one receive WR more", only("pingpong", "server", both(
        lambda o: o.__setitem__("num_recv_wqe", o["num_recv_wqe"] + 1))), True)
    only_checked("write_bw -Q 7 client file: one unsignalled WR not retired", only("write_bw_q7", "client", both(
        lambda o: o.__setitem__("num_wqe_retired_unsignalled", o["num_wqe_retired_unsignalled"] - 1))), True)
    only_checked("rping server file: the READs counted as writes", only("rping", "server", both(
        lambda o: (o.__setitem__("num_write_wqe", o["num_write_wqe"] + o["num_read_wqe"]),
                   o.__setitem__("num_read_wqe", 0)))), True)
    only_checked("pingpong client file: tx_bytes off by one", only("pingpong", "client",
        lambda doc: doc["devices"][0].__setitem__("tx_bytes", doc["devices"][0]["tx_bytes"] + 1)), True)
    only_checked("write_bw server file: one poll call (it never polls)", only("write_bw_q7", "server",
        lambda doc: doc["devices"][0].__setitem__("cq_poll_count", 1)), True)
    only_checked("rping client file: a second file's transport", only("rping", "client",
        lambda doc: doc.__setitem__("transport", "IB-CAST")), True)


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "selftest":
        selftest()
        print(f"check_tools.py selftest: {C.passed} passed, {C.failed} failed")
        return 1 if C.failed else 0
    if len(sys.argv) != 3 or sys.argv[1] not in ("single", "pair"):
        print(__doc__, file=sys.stderr)
        return 2
    {"single": single, "pair": pair}[sys.argv[1]](sys.argv[2])
    skipped = f", {C.skipped} skipped (SKIP lines above)" if C.skipped else ""
    print(f"check_tools.py {sys.argv[1]}: {C.passed} passed, {C.failed} failed{skipped}")
    return 1 if C.failed else 0


if __name__ == "__main__":
    sys.exit(main())

