#!/usr/bin/env python3
"""Check the pair's traffic class scenario (guest/tclass.sh): one QP on a class that the
client's egress qdisc drops.

Usage: check_tclass.py RESULTDIR   (RESULTDIR/{server,client}/out/tclass/{hooks,preload}/...)
       check_tclass.py selftest    (the judgements on made-up answers: the right one passes,
                                    each wrong one is caught)

Per mode (hooks: ibcast_e2e telling each QP's settings through rcclTelemetryQpSetAttrs;
preload: ibcast_plain, the same program without the library, under the verbs interposer):
the client's tc filter matched the odd class's RoCE packets and its netem dropped them; the
one QP the client connected on the odd class (the program's tally says which) ended with
RETRY_EXC_ERR (then only WR_FLUSH_ERRs), and no other QP of either side failed; every
channel completed its requests both ways, except that QP's send comm, which waits on it;
each side's file (named, valid) carries every QP's settings, the odd QP's class and error,
the others' class, and errors equal to the tally; `rccl-telemetry outliers --json` on the
two files names that QP's configuration (qp_config_mismatch: its traffic class against its
NIC's other QPs and its peer's) and nothing else: no other QP, no setting of another kind,
no NIC, link or host, nothing on the server; a finding of the QP's error or stall names the
mismatch. Prints "PASS <name>" / "FAIL <name>: why" ("SKIP" for the interposer run when
the image has no interposer and E2E_EXPECT_PRELOAD is unset); exits 1 if any check failed.
"""
import contextlib
import glob
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check as K  # noqa: E402  (the file's name and schema, status names)

# guest/tclass.sh
SIDES = ["server", "client"]
HOSTS = {s: f"e2e-{s}" for s in SIDES}
TCLASS_OK, TCLASS_ODD, TCLASS_CH = 106, 0, 3
RETRY_EXC_ERR, WR_FLUSH_ERR = 12, 5
# kinds that name a NIC, a link or a host as the cause (a fabric verdict), and the QP lint's
LOCATIONS = {"slow_nic", "slow_link", "slow_host", "slow_link_one_way", "host_side_delay", "slow_link_or_nic",
             "hang_root"}
LINT = {"qp_config_mismatch", "mtu_mismatch", "rnr_infinite_retry", "qp_config_unusual"}
# the odd QP's own symptoms: named only when they carry its mismatch
SYMPTOMS = {"cq_errors", "stalled_qps"}
TOOL = os.path.join(K.ROOT, "target", "release", "rccl-telemetry")


def ok(name, cond, why=""):
    return K.C.ok(name, cond, why)


def qps_of(doc):
    for dev in doc.get("devices", []):
        for ch in dev.get("channels", []):
            for q in ch.get("queue_pairs", []):
                yield q


def tally_qps(tally):
    for ch in tally["devices"][0]["channels"]:
        for q in ch["queue_pairs"]:
            yield ch, q


def odd_of(tallies):
    """The QPs the program connected on the odd class: (side, channel id, QP) each."""
    return [(s, ch["id"], q) for s, t in tallies.items() for ch, q in tally_qps(t)
            if q.get("traffic_class") == TCLASS_ODD]


def check_tallies(name, tallies):
    """What the program itself saw. Returns the odd QP's qp_num, or None."""
    odd = odd_of(tallies)
    if not ok(f"{name}: the program connected one QP, the client's, on traffic class {TCLASS_ODD}",
              len(odd) == 1 and odd[0][0] == "client" and odd[0][1] == TCLASS_CH and odd[0][2]["role"] == "data",
              f"{[(s, c, q['qp_num']) for s, c, q in odd]}"):
        return None
    _, _, oq = odd[0]
    others = [(s, q) for s, t in tallies.items() for _, q in tally_qps(t) if q is not oq]
    ok(f"{name}: every other QP on traffic class {TCLASS_OK}",
       all(q.get("traffic_class") == TCLASS_OK for _, q in others),
       f"{[(s, q['qp_num'], q.get('traffic_class')) for s, q in others if q.get('traffic_class') != TCLASS_OK]}")
    by = {int(k): v for k, v in oq.get("cq_errors_by_code", {}).items()}
    ok(f"{name}: the odd QP's first error is RETRY_EXC_ERR, then only WR_FLUSH_ERRs (the program polled them)",
       oq.get("first_error_code") == RETRY_EXC_ERR and by.get(RETRY_EXC_ERR) == 1
       and set(by) <= {RETRY_EXC_ERR, WR_FLUSH_ERR},
       f"first {oq.get('first_error_code')}, errors {by}")
    failed = [(s, q["qp_num"], q.get("cq_errors_by_code")) for s, q in others if q.get("cq_errors_by_code")]
    ok(f"{name}: no other QP of either side had an error completion", not failed, f"{failed}")
    for s, t in tallies.items():
        reqs = t["requests_per_comm"]
        got = {ch["id"]: ch["num_req_completed"] for ch in t["devices"][0]["channels"]}
        want = {c: reqs if c == TCLASS_CH else 2 * reqs for c in got}
        ok(f"{name} {s}: every channel completed its requests both ways, but channel {TCLASS_CH}'s from the client "
           f"(its send comm waits on the dead QP)", got == want and len(got) == 3, f"completed {got}, want {want}")
    return oq["qp_num"]


def check_file(name, side, d, tally, odd_qpn, mode):
    """The side's one file: named and valid, every QP's settings, the odd QP's class and error."""
    tdir = os.path.join(d, "telemetry")
    files = glob.glob(os.path.join(tdir, "rccl_telemetry_*.json"))
    want = f"rccl_telemetry_{tally['host_name']}_0_{tally['process_id']}.json"
    if not ok(f"{name} {side}: one telemetry file, {want}", [os.path.basename(f) for f in files] == [want],
              f"{[os.path.basename(f) for f in files]}"):
        return None
    doc = K.load(files[0])
    K.validate(f"{name} {side}: the file validates against the schema", doc)
    ok(f"{name} {side}: transport {'verbs-preload' if mode == 'preload' else 'the hooks'}",
       (doc.get("transport") == "verbs-preload") == (mode == "preload"), f"transport {doc.get('transport')}")
    qps = list(qps_of(doc))
    mine = {q["qp_num"] for _, q in tally_qps(tally)}
    seen = {q.get("qp_num") for q in qps}
    ok(f"{name} {side}: the file has every QP of the program (by qp_num)", mine <= seen, f"missing {sorted(mine - seen)}")
    bare = [q.get("qp_num") for q in qps if q.get("qp_num") in mine and not q.get("attrs")]
    ok(f"{name} {side}: every QP carries its settings (attrs)", not bare, f"no attrs on QPNs {bare}")
    ours = [q for q in qps if q.get("qp_num") in mine and q.get("attrs")]
    odd = [q for q in ours if side == "client" and q["qp_num"] == odd_qpn]
    rest = [q for q in ours if q not in odd]
    wrong = [(q["qp_num"], q["attrs"].get("traffic_class")) for q in rest if q["attrs"].get("traffic_class") != TCLASS_OK]
    ok(f"{name} {side}: every QP but the odd one has traffic class {TCLASS_OK}", not wrong, f"{wrong}")
    retry = {(q["attrs"].get("timeout"), q["attrs"].get("retry_cnt")) for q in ours}
    want = (tally["qp_timeout"], tally["retry_cnt"])
    ok(f"{name} {side}: every QP's timeout and retry_cnt as the program connected it {want}", retry == {want}, f"{retry}")
    errs = [(q["qp_num"], q.get("cq_errors")) for q in rest if q.get("cq_errors")]
    ok(f"{name} {side}: no other QP has an error in the file", not errs, f"{errs}")
    if side == "client":
        if ok(f"{name} client: the odd QP (QPN {odd_qpn}) is in the file with its settings", len(odd) == 1, f"{len(odd)}"):
            q = odd[0]
            fe = q.get("first_cq_error") or {}
            ok(f"{name} client: the odd QP's traffic class {TCLASS_ODD}, first error RETRY_EXC_ERR, state ERR",
               q["attrs"].get("traffic_class") == TCLASS_ODD and fe.get("status") == "RETRY_EXC_ERR" and
               q.get("qp_state") == "ERR",
               f"class {q['attrs'].get('traffic_class')}, first {fe.get('status')}, state {q.get('qp_state')}")
            tq = next(tq for _, tq in tally_qps(tally) if tq["qp_num"] == odd_qpn)
            want = {K.status_name(int(k)): v for k, v in tq.get("cq_errors_by_code", {}).items()}
            ok(f"{name} client: the odd QP's errors in the file equal the tally's", q.get("cq_errors") == want,
               f"file {q.get('cq_errors')}, tally {want}")
    return files[0]


def tc_checks(name, d):
    """The client's qdisc: the filter sent the odd class's packets to the netem band, which
    dropped them all and passed none."""
    s = K.read(os.path.join(d, "tc_stats.txt"))
    m = re.search(r"qdisc netem 40: .*?\n\s*Sent (\d+) bytes (\d+) pkt \(dropped (\d+)", s)
    hit = re.search(r"flowid 1:4.*?\(rule hit \d+ success (\d+)\)", s)
    ok(f"{name}: the client's u32 filter matched the odd class's packets and netem dropped every one",
       bool(m and hit) and int(m.group(2)) == 0 and int(m.group(3)) > 0 and int(hit.group(1)) == int(m.group(3)),
       f"netem {m.groups() if m else None}, filter matches {hit.group(1) if hit else None}")
    if m:
        print(f"INFO {name}: netem dropped {m.group(3)} packets of traffic class {TCLASS_ODD}")


def tool_json(*args):
    """rccl-telemetry ARGS --json -> (exit status, parsed stdout or None, stderr)"""
    r = subprocess.run([TOOL, *args, "--json"], capture_output=True, text=True, timeout=300)
    try:
        return r.returncode, json.loads(r.stdout), r.stderr
    except ValueError:
        return r.returncode, None, r.stderr + r.stdout[:300]


def qpns_named(f):
    return {int(n) for n in re.findall(r"\(QPN (\d+)\)", f.get("evidence", ""))}


def verdict(name, finds, caveats, odd_qpn):
    """outliers' answer: the odd QP's configuration named, and nothing else; the hang it leaves
    (its channel's send comm waits for good) has no root, because the QP's settings explain it."""
    desc = [f"{f['kind']} {f.get('host')} {f.get('roce_device')}: {f.get('evidence', '')[:240]}" for f in finds]
    if finds:
        print(f"INFO {name}: outliers: " + " | ".join(desc))
    mm = [f for f in finds if f.get("kind") == "qp_config_mismatch"]
    ok(f"{name}: outliers names one qp_config_mismatch, on the client's rxe0", len(mm) == 1 and
       (mm[0].get("host"), mm[0].get("roce_device")) == (HOSTS["client"], "rxe0"), "; ".join(desc) or "nothing named")
    if mm:
        ev = mm[0].get("evidence", "")
        ok(f"{name}: it names the odd QP (QPN {odd_qpn}) and no other", qpns_named(mm[0]) == {odd_qpn}, ev)
        ok(f"{name}: it cites the traffic class against the NIC's other QPs and the peer's "
           f"({TCLASS_ODD} against {TCLASS_OK})",
           f"traffic class {TCLASS_ODD}; this NIC's other " in ev and f"use {TCLASS_OK}, its peer {TCLASS_OK}" in ev, ev)
    lint = [d for f, d in zip(finds, desc) if f.get("kind") in LINT - {"qp_config_mismatch"}]
    ok(f"{name}: no other setting named (mtu_mismatch, rnr_infinite_retry, qp_config_unusual)", not lint, "; ".join(lint))
    loc = [d for f, d in zip(finds, desc) if f.get("kind") in LOCATIONS]
    ok(f"{name}: no NIC, link or host named as a cause", not loc, "; ".join(loc))
    srv = [d for f, d in zip(finds, desc) if f.get("host") == HOSTS["server"]]
    ok(f"{name}: nothing named on the server", not srv, "; ".join(srv))
    sym = [(f, d) for f, d in zip(finds, desc) if f.get("kind") in SYMPTOMS]
    bad = [d for f, d in sym if f.get("host") != HOSTS["client"] or f"traffic class {TCLASS_ODD}" not in
           f.get("evidence", "") or (qpns_named(f) and qpns_named(f) != {odd_qpn})]
    ok(f"{name}: the odd QP's error (and stall) findings carry its mismatch, and name no other QP",
       not bad and any(f.get("kind") == "cq_errors" for f, _ in sym), "; ".join(bad) or "no cq_errors finding")
    rest = [d for f, d in zip(finds, desc) if f.get("kind") not in LINT | LOCATIONS | SYMPTOMS]
    ok(f"{name}: nothing else named", not rest, "; ".join(rest))
    hang = [c.get("evidence", "") for c in caveats if c.get("kind") == "hang_without_root"]
    ok(f"{name}: the hang names no root: the odd QP's settings explain it",
       len(hang) == 1 and "1 stalled or errored QP whose settings differ" in hang[0] and "qp_config_mismatch" in hang[0],
       f"{caveats}")


def mode_checks(res, mode):
    name = f"tclass {mode}"
    dirs = {s: os.path.join(res, s, "out", "tclass", mode) for s in SIDES}
    if mode == "preload" and not os.path.isdir(dirs["client"]) and not os.environ.get("E2E_EXPECT_PRELOAD"):
        K.C.skip(name, "no interposer in the image (make preload did not build it)")
        return
    if not ok(f"{name}: both sides' results present", all(os.path.isfile(os.path.join(d, "tally.json"))
                                                          for d in dirs.values()), f"{dirs}"):
        return
    for s, d in dirs.items():
        out = K.read(os.path.join(d, "stdout.txt"))
        m = re.search(r"ibcast_e2e: (hung|done) after (\d+) error completions", out)
        want = "at least 1" if s == "client" else "none"
        ok(f"{name} {s}: exit 0, ended after its errors ({want})",
           K.read(os.path.join(d, "rc")).strip() == "0" and bool(m) and (int(m.group(2)) > 0) == (s == "client"),
           f"rc {K.read(os.path.join(d, 'rc')).strip()}, {out.strip().splitlines()[-1:] or 'no output'}; "
           f"stderr {K.read(os.path.join(d, 'stderr.txt'))[-300:]}")
    tc_checks(name, dirs["client"])
    tallies = {s: K.load(os.path.join(d, "tally.json")) for s, d in dirs.items()}
    odd_qpn = check_tallies(name, tallies)
    if odd_qpn is None:
        return
    files = [check_file(name, s, dirs[s], tallies[s], odd_qpn, mode) for s in SIDES]
    if None in files:
        return
    if not os.access(TOOL, os.X_OK):
        ok(f"{name}: rccl-telemetry built", False, f"no {TOOL}")
        return
    tmp = tempfile.mkdtemp(prefix="e2e-tclass-")
    try:
        for f in files:
            shutil.copy(f, tmp)
        rc, out, err = tool_json("outliers", tmp)
        if ok(f"{name}: rccl-telemetry outliers --json", rc in (0, 1) and isinstance(out, dict), f"exit {rc}: {err[-300:]}"):
            verdict(name, out.get("findings", []), out.get("caveats", []), odd_qpn)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def selftest():
    """The judgements on made-up answers shaped as the real run's: the right one passes, and
    every wrong one fails at least one check."""
    odd = 23
    ev_mm = (f"QP 0 (QPN {odd}) on channel 3: traffic class 0; this NIC's other 19 QPs use 106, its peer 106")

    def finding(kind, side="client", evidence=None, dev="rxe0"):
        return {"kind": kind, "host": HOSTS[side], "roce_device": dev, "culprit": f"{HOSTS[side]}:{dev}",
                "evidence": evidence if evidence is not None else f"{kind} on {HOSTS[side]}"}
    mm = finding("qp_config_mismatch", evidence=ev_mm)
    why = [{"kind": "too_few_to_tell", "evidence": "2 measured links: too few to say what is slow"},
           {"kind": "hang_without_root", "evidence": "1 stalled or errored QP whose settings differ from "
            "its NIC's other QPs' (qp_config_mismatch): its settings, not its peer, explain the wait"}]
    err = finding("cq_errors", evidence=f"1 RETRY_EXC_ERR, 2 WR_FLUSH_ERR: QP 0 (QPN {odd}) on channel 3: its "
                                        "settings differ: traffic class 0; this NIC's other 19 QPs use 106")
    right = [mm, err]
    cases = [
        ("the odd QP's mismatch and its error carrying it", right, False),
        ("its stall carrying the mismatch beside them", right + [dict(err, kind="stalled_qps")], False),
        ("nothing named", [], True),
        ("the error only, no mismatch finding", [err], True),
        ("the mismatch naming another QP too", [dict(mm, evidence=ev_mm + f"; QP 1 (QPN {odd + 1}) on channel 3: "
                                                   "traffic class 0"), err], True),
        ("the mismatch naming another QP instead", [dict(mm, evidence=ev_mm.replace(f"QPN {odd}", "QPN 24")), err], True),
        ("the mismatch on the server's end", [finding("qp_config_mismatch", "server", ev_mm), err], True),
        ("the mismatch without the classes it compared", [dict(mm, evidence=f"QP 0 (QPN {odd}) on channel 3"), err],
         True),
        ("the client's NIC named slow_nic beside it", right + [finding("slow_nic")], True),
        ("the link named", right + [finding("slow_link_or_nic")], True),
        ("a root of a hang named", right + [finding("hang_root")], True),
        ("the uniform-class note beside it", right + [finding("qp_config_unusual")], True),
        ("an MTU mismatch beside it", right + [finding("mtu_mismatch")], True),
        ("the error without the mismatch", [mm, dict(err, evidence=f"1 RETRY_EXC_ERR: QP 0 (QPN {odd})")], True),
        ("an error on the server", right + [finding("cq_errors", "server", "traffic class 0")], True),
        ("a hardware counter named on the client", right + [finding("hw_counter")], True),
        ("the server named the root of the hang", right + [finding("hang_root", "server")], True),
    ]
    real = K.C
    cases = [(label, finds, why, fail) for label, finds, fail in cases] + [
        ("a hang with no reason given", right, why[:1] + [dict(why[1], evidence="-")], True),
        ("no hang said at all", right, why[:1], True),
    ]
    for label, finds, caveats, fail in cases:
        K.C = K.Checks()   # a tally of its own (ok() reports to K.C), its lines hidden
        try:
            with contextlib.redirect_stdout(sys.stdout if os.environ.get("CHECK_TCLASS_VERBOSE") else io.StringIO()):
                verdict("selftest", finds, caveats, odd)
            failed = K.C.failed
        finally:
            K.C = real
        K.C.ok(f"selftest: tclass verdict: {label}: {'caught' if fail else 'passes'}", (failed > 0) == fail,
               f"{failed} checks failed")
    # the program's tally: one QP of the client's channel 3 on class 0, failed as intended
    def tally(side, odd_class=TCLASS_ODD, first=RETRY_EXC_ERR, extra_err=None, ch3=16):
        chans = []
        n = 100 if side == "server" else 200
        for cid in (0, 3, 17):
            qps = []
            for i in range(3):
                q = {"id": i, "role": "data", "qp_num": n, "traffic_class": TCLASS_OK, "first_error_code": -1,
                     "cq_errors_by_code": {}}
                if side == "client" and cid == TCLASS_CH and i == 0:
                    q.update(traffic_class=odd_class, first_error_code=first,
                             cq_errors_by_code={str(first): 1, str(WR_FLUSH_ERR): 2})
                if extra_err and (side, cid, i) == extra_err:
                    q.update(first_error_code=WR_FLUSH_ERR, cq_errors_by_code={str(WR_FLUSH_ERR): 1})
                qps.append(q)
                n += 1
            chans.append({"id": cid, "num_req_completed": ch3 if cid == TCLASS_CH else 32, "queue_pairs": qps})
        return {"requests_per_comm": 16, "devices": [{"channels": chans}]}
    tcases = [
        ("as the real run", {}, {}, False),
        ("the odd QP failed otherwise (LOC_QP_OP_ERR)", {"first": 2}, {}, True),
        ("no QP on the odd class", {"odd_class": TCLASS_OK}, {}, True),
        ("another QP failed too", {"extra_err": ("client", 0, 1)}, {}, True),
        ("a QP on the server failed", {}, {"extra_err": ("server", 17, 2)}, True),
        ("channel 3 completed everything (nothing was dropped)", {"ch3": 32}, {"ch3": 32}, True),
    ]
    for label, ck, sk, fail in tcases:
        K.C = K.Checks()
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                check_tallies("selftest", {"server": tally("server", **sk), "client": tally("client", **ck)})
            failed = K.C.failed
        finally:
            K.C = real
        K.C.ok(f"selftest: tclass tally: {label}: {'caught' if fail else 'passes'}", (failed > 0) == fail,
               f"{failed} checks failed")


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "selftest":
        selftest()
        print(f"check_tclass.py selftest: {K.C.passed} passed, {K.C.failed} failed")
        return 1 if K.C.failed else 0
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    for mode in ["hooks", "preload"]:
        mode_checks(sys.argv[1], mode)
    print(f"check_tclass.py: {K.C.passed} passed, {K.C.failed} failed")
    return 1 if K.C.failed else 0


if __name__ == "__main__":
    sys.exit(main())
