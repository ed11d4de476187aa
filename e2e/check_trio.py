#!/usr/bin/env python3
"""Check what the three trio guests brought out (run_guest.sh trio, guest/trio.sh).

Usage: check_trio.py RESULTDIR   (RESULTDIR/{a,b,c}/out/trio/<scenario>/...)
       check_trio.py selftest    (the verdict judgements on made-up analyser answers: the
                                  right one passes, each wrong one is caught)

Scenarios: links_clean, links_delay (tc netem delay on a -> c), stall_loss (tc netem loss
100% on a -> c for a few seconds, then restored), stall_stop (a receiver frozen), dead_path
(loss 100% on a -> c for good: error completions) and dead_tool (ib_write_bw through it),
frozen (b's rank stopped), the verdict runs clean_2, clean_3, oneway (a -> c rate-limited),
host_delay (b's poller starved) and nic_delay (b's whole egress delayed: one NIC slow on
all its paths). E2E_TRIO_ONLY selects groups of them (GROUPS). Prints "PASS <name>" /
"FAIL <name>: why" per check (and "SKIP <name>: why" for a check whose feature the files do
not carry yet); exits 1 if any check failed. The live textfiles are read through the real
node_exporter (Debian's prometheus-node-exporter, textfile collector only, on a loopback
port).
"""
import contextlib
import datetime
import glob
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check as K  # noqa: E402  (the ibcast checks: file vs the program's tally)

GUESTS = ["a", "b", "c"]
# the channels of each link (guest/trio.sh trio_links)
LINK_CH = {("a", "b"): {0, 3}, ("a", "c"): {5, 17}, ("b", "c"): {8, 11}}
FAULT_CH = LINK_CH[("a", "c")]
# nic_delay: b's two links (every path of b's NIC)
B_CH = LINK_CH[("a", "b")] | LINK_CH[("b", "c")]
RTO_S = 4.096e-6 * (1 << 17)   # the stall run's RC retransmission timeout (--timeout 17)


def ok(name, cond, why=""):
    return K.C.ok(name, cond, why)


def qps_of(doc):
    for dev in doc.get("devices", []):
        for ch in dev.get("channels", []):
            for q in ch.get("queue_pairs", []):
                yield dev, ch, q


def stall_problems(doc):
    """Any stall anywhere in a file: per QP stalled / longest_stall_ms, per device num_qps_stalled."""
    out = []
    for dev in doc.get("devices", []):
        if dev.get("num_qps_stalled", 0):
            out.append(f"device {dev.get('device_id')} num_qps_stalled {dev['num_qps_stalled']}")
    for dev, ch, q in qps_of(doc):
        if q.get("stalled") or q.get("longest_stall_ms", 0):
            out.append(f"ch {ch.get('id')} qp {q.get('id')}: stalled {q.get('stalled')} longest {q.get('longest_stall_ms')} ms")
    return out


def has_stall_keys(doc):
    return doc.get("stall_ms", 0) > 0 and any("longest_stall_ms" in q for _, _, q in qps_of(doc))


class NodeExporter:
    """prometheus-node-exporter with only the textfile collector, on 127.0.0.1; scrape(path)
    puts one .prom file alone in its directory and returns the parsed samples."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="e2e-ne-")
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        exe = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
        self.proc = None
        self.error = None
        if not exe:
            self.error = "prometheus-node-exporter is not installed"
            return
        self.proc = subprocess.Popen([exe, f"--web.listen-address=127.0.0.1:{self.port}", "--collector.disable-defaults",
                                      "--collector.textfile", f"--collector.textfile.directory={self.dir}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=2).read()
                return
            except OSError:
                time.sleep(0.1)
        self.error = "node_exporter did not answer on its port"

    def scrape(self, path):
        for f in glob.glob(os.path.join(self.dir, "*.prom")):
            os.unlink(f)
        shutil.copy(path, os.path.join(self.dir, "rank.prom"))
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5).read().decode()
        samples = []
        for line in text.splitlines():
            m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$', line)
            if not m:
                continue
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
            samples.append((m.group(1), labels, float(m.group(3))))
        return samples

    def close(self):
        if self.proc:
            self.proc.terminate()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def prom_view(samples):
    """-> (textfile parsed without error, stalled_qps on rxe0, [per-QP stalled series labels])"""
    err = [v for n, _, v in samples if n == "node_textfile_scrape_error"]
    stalled = [v for n, l, v in samples if n == "rccl_telemetry_stalled_qps" and l.get("device") == "rxe0"]
    series = [l for n, l, v in samples if n == "rccl_telemetry_qp_stalled_seconds"]
    return (err == [0.0]), (stalled[0] if stalled else None), series


def ibcast_file(name, d):
    """check.py's scenario checks for one rank of the trio; -> (tally, doc)"""
    rc = K.read(os.path.join(d, "rc")).strip()
    if not ok(f"{name}: program exited 0", rc == "0", f"rc={rc!r}; stderr: {K.read(os.path.join(d, 'stderr.txt'))[-400:]}"):
        return None, None
    tally = K.load(os.path.join(d, "tally.json"))
    ok(f"{name}: payloads from both peers intact", tally["traffic"]["payload_errors"] == 0
       and tally["traffic"]["payload_bytes_checked"] > 0, str(tally["traffic"]))
    ok(f"{name}: the rank talked to two peers", tally.get("mode") == "trio" and
       len({c.get("link") for c in tally["devices"][0]["channels"]}) == 2, f"mode {tally.get('mode')}")
    doc = K.telemetry_file(name, os.path.join(d, "telemetry"), tally)
    if doc is None:
        return tally, None
    K.validate(f"{name}: file validates against the schema", doc)
    dev = K.compare_sw(name, doc, tally, 1)
    K.check_capture(name, tally)
    K.check_errors(name, doc, tally)
    K.check_clean_errors(name, doc, tally, tally.get("error_probe"))
    if dev:
        K.check_hw(name, dev, tally, os.path.dirname(d), K.read(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(d))),
                                                                            "rxe_netdev")).strip(), pair=True)
    check_peers(name, doc, tally)
    return tally, doc


def check_peers(name, doc, tally):
    """The identity told through rcclTelemetryQpSetPeer, QP by QP, against the tally."""
    if not tally.get("set_peer_available"):
        ok(f"{name}: the program told every QP its peer (rcclTelemetryQpSetPeer)", False,
           "the tally says rcclTelemetryQpSetPeer was not called")
        return
    bad = []
    tqs = {(c["id"], q["id"]): q for c in tally["devices"][0]["channels"] for q in c["queue_pairs"]}
    for _, ch, q in qps_of(doc):
        t = tqs.get((ch.get("id"), q.get("id")))
        if t is None:
            continue
        p = q.get("peer") or {}
        got = (q.get("qp_num"), p.get("qp_num"), p.get("gid"))
        want = (t["qp_num"], t["peer_qp_num"], t["peer_gid"])
        if got != want:
            bad.append(f"ch {ch.get('id')} qp {q.get('id')}: (qp_num, peer qp_num, peer gid) {got} != {want}")
    ok(f"{name}: every QP's qp_num and peer are what the program told", not bad, "; ".join(bad[:4]))


def join_links(name, docs):
    """Every QP of every rank joined to its peer's QP in another rank's file by (GID, QPN),
    and the WRITE_WITH_IMMs one end sent = the receive completions the other end drained."""
    index, missing = {}, []
    for g, doc in docs.items():
        gid = next((d.get("gid") for d in doc.get("devices", [])), None)
        for _, ch, q in qps_of(doc):
            index[(q.get("local_gid") or gid, q.get("qp_num"))] = (g, ch.get("id"), q)
    if not any(q.get("peer") for doc in docs.values() for _, _, q in qps_of(doc)):
        ok(f"{name}: every QP joined to its peer", False, "the files carry no QP peers yet (issue 22)")
        return
    bad = []
    for g, doc in docs.items():
        for _, ch, q in qps_of(doc):
            p = q.get("peer") or {}
            other = index.get((p.get("gid"), p.get("qp_num")))
            if other is None:
                missing.append(f"{g} ch {ch.get('id')} qp {q.get('id')} -> {p.get('gid')}/{p.get('qp_num')}")
                continue
            og, och, oq = other
            if og == g or och != ch.get("id"):
                bad.append(f"{g} ch {ch.get('id')} qp {q.get('id')} joins {og} ch {och}")
            if q.get("num_write_imm_wqe", 0) and q["num_write_imm_wqe"] != oq.get("num_wqe_rcvd"):
                bad.append(f"{g} ch {ch.get('id')} qp {q.get('id')}: {q['num_write_imm_wqe']} WRITE_WITH_IMM sent, "
                           f"{oq.get('num_wqe_rcvd')} completions on the receiving QP")
    ok(f"{name}: every QP of every file joined to its peer's QP (none unmatched)", not missing, "; ".join(missing[:4]))
    ok(f"{name}: joined QPs: same channel on both ends, WRITE_WITH_IMMs sent = receive completions", not bad,
       "; ".join(bad[:4]))


def sbw_files(name, d):
    """ib_send_bw pairs under the interposer: exit status, file, schema, no stall; with peers,
    each side's QP joined to the other's, and the bytes the client sent (its file) = the
    bytes the server received (its file)."""
    docs = {}
    for pair in ["ab", "ac", "bc"]:
        for side, g in [("server", pair[0]), ("client", pair[1])]:
            wd = os.path.join(d[g], f"sbw_{pair}", side)
            nm = f"{name} ib_send_bw {pair} {side} ({g})"
            if not os.path.isdir(wd):
                ok(f"{nm}: ran", False, f"no {wd}")
                continue
            rc = K.read(os.path.join(wd, "rc")).strip()
            ok(f"{nm}: exited 0", rc == "0", f"rc={rc!r}: {K.read(os.path.join(wd, 'stderr'))[-300:]}")
            pid = K.read(os.path.join(wd, "pid")).strip()
            files = glob.glob(os.path.join(wd, "telemetry", f"rccl_telemetry_*_{pid}.json"))
            if not ok(f"{nm}: the interposer wrote its file", len(files) == 1, f"pid {pid}: {files}"):
                continue
            doc = K.load(files[0])
            K.validate(f"{nm}: file validates against the schema", doc)
            if ok(f"{nm}: file carries the stall keys", has_stall_keys(doc), f"version {doc.get('version')}"):
                p = stall_problems(doc)
                if name == "links_delay" and pair == "ac":
                    pass   # the delayed path: WRs outstanding past STALL_MS are a stall by definition
                else:
                    ok(f"{nm}: no stall", not p, "; ".join(p[:3]))
            docs[(pair, side)] = doc
        srv, cli = docs.get((pair, "server")), docs.get((pair, "client"))
        if not (srv and cli):
            continue
        nm = f"{name} ib_send_bw {pair}"
        if not any(q.get("peer") for _, _, q in qps_of(cli)):
            ok(f"{nm}: the two sides' QPs joined", False, "the interposer records no peers yet (issue 22, r6-peers-preload)")
            continue
        def ident(doc):
            dev = doc["devices"][0]
            return {(q.get("local_gid") or dev.get("gid"), q.get("qp_num")) for _, _, q in qps_of(doc)
                    if q.get("qp_type", "rc") == "rc"}
        def peers(doc):
            return {((q.get("peer") or {}).get("gid"), (q.get("peer") or {}).get("qp_num")) for _, _, q in qps_of(doc)
                    if q.get("qp_type", "rc") == "rc"}
        ok(f"{nm}: the client's QPs name the server's as peers and the reverse (RC, by GID and QPN)",
           peers(cli) == ident(srv) and peers(srv) == ident(cli) and ident(cli),
           f"client {ident(cli)} -> {peers(cli)}; server {ident(srv)} -> {peers(srv)}")
        tx, rx = cli["devices"][0].get("tx_bytes"), srv["devices"][0].get("rx_bytes")
        ok(f"{nm}: bytes {pair[1]}->{pair[0]} in the sender's file ({tx}) = the receiver's bytes in its file ({rx})",
           tx == rx == 200 * 4096, "want 200 x 4096")
    return docs


TOOL = os.path.join(K.ROOT, "target", "release", "rccl-telemetry")
HOSTS = {g: f"e2e-{g}" for g in GUESTS}


def tool_json(*args):
    """rccl-telemetry ARGS --json -> (exit status, parsed stdout or None, stderr)"""
    r = subprocess.run([TOOL, *args, "--json"], capture_output=True, text=True, timeout=300)
    try:
        return r.returncode, json.loads(r.stdout), r.stderr
    except ValueError:
        return r.returncode, None, r.stderr + r.stdout[:300]


def matrix_info(name, lk):
    """The link matrix as measured (INFO): per direction the sampled completions, p50 and p99."""
    rows = []
    for l in sorted(lk.get("links", []), key=lambda l: (l["src"]["host"], l["dst"]["host"])):
        la = l.get("latency") or {}
        rows.append(f"{l['src']['host'][4:]}->{l['dst']['host'][4:]} n={la.get('samples')} "
                    f"p50={(la.get('p50_ns') or 0) / 1e6:.0f}ms p99={(la.get('p99_ns') or 0) / 1e6:.0f}ms")
    print(f"INFO {name}: link matrix: " + "; ".join(rows))


def p50_of(lk, src, dst):
    for l in lk.get("links", []):
        if (l["src"]["host"], l["dst"]["host"]) == (HOSTS[src], HOSTS[dst]):
            return (l.get("latency") or {}).get("p50_ns")
    return None


def tool_checks(name, d, mode):
    """The ranks' three files through rccl-telemetry links, outliers and stalls. mode: clean
    (no finding of any kind, no root), delay (the a<->c link named), oneway (a -> c named as
    one way), host_delay (b named as host-side delay, not as its NIC), nic_delay (b's NIC
    named slow, nothing named on a or c)."""
    if not os.access(TOOL, os.X_OK):
        ok(f"{name}: rccl-telemetry built", False, f"no {TOOL}")
        return
    tmp = tempfile.mkdtemp(prefix="e2e-trio-")
    try:
        for g in GUESTS:
            for f in glob.glob(os.path.join(d[g], "ibcast", "telemetry", "*.json")):
                shutil.copy(f, tmp)
        rc, lk, err = tool_json("links", tmp)
        if not ok(f"{name}: rccl-telemetry links --json", rc == 0 and isinstance(lk, dict), f"exit {rc}: {err[-300:]}"):
            return
        ok(f"{name}: links: every QP of every file joined to its peer (none unmatched, none ambiguous)",
           lk.get("qps", 0) > 0 and lk.get("qps_matched") == lk.get("qps_with_peer") == lk.get("qps")
           and not lk.get("qps_unmatched") and not lk.get("qps_ambiguous"),
           f"qps {lk.get('qps')}, with peer {lk.get('qps_with_peer')}, matched {lk.get('qps_matched')}, "
           f"unmatched {lk.get('qps_unmatched')} {lk.get('unmatched', [])[:2]}, ambiguous {lk.get('qps_ambiguous')}")
        pairs = sorted((l["src"]["host"], l["dst"]["host"]) for l in lk.get("links", []))
        want = sorted((HOSTS[x], HOSTS[y]) for x in GUESTS for y in GUESTS if x != y)
        ok(f"{name}: links: the six directed links between the three hosts", pairs == want, f"{pairs}")
        matrix_info(name, lk)
        # the final files of a run that ended: no root of a hang (issue 32: none on healthy or
        # recovered runs)
        rc, st, err = tool_json("stalls", tmp)
        if ok(f"{name}: rccl-telemetry stalls --json", rc in (0, 1) and isinstance(st, dict), f"exit {rc}: {err[-300:]}"):
            ok(f"{name}: stalls names no root and no QP stalled now", not st.get("roots") and not st.get("stalled_qps"),
               f"roots {st.get('roots')}, stalled_qps {st.get('stalled_qps')}")
        rc, out, err = tool_json("outliers", tmp)
        if not ok(f"{name}: rccl-telemetry outliers --json", rc in (0, 1) and isinstance(out, dict), f"exit {rc}: {err[-300:]}"):
            return
        finds = out.get("findings", [])
        desc = [f"{f['kind']} {f.get('host')} {f.get('roce_device')}: {f.get('evidence', '')[:200]}" for f in finds]
        if finds:
            print(f"INFO {name}: outliers: " + " | ".join(desc))
        if mode == "clean":
            # issue 33: nothing named on a healthy run, of any kind
            ok(f"{name}: outliers names nothing on the clean run (no finding of any kind, exit 0)", not finds and rc == 0,
               f"exit {rc}; " + "; ".join(desc))
            return

        def names(f, g):
            return f.get("host") == HOSTS[g] or HOSTS[g] in f.get("evidence", "")
        fab = [f for f in finds if f.get("kind") in ("slow_link", "slow_nic", "slow_host", "slow_link_one_way",
                                                      "host_side_delay")]
        if mode == "delay":
            ac = [f for f in fab if f["kind"] == "slow_link" and names(f, "a") and names(f, "c")]
            ok(f"{name}: outliers names the a<->c link", bool(ac), "; ".join(desc) or "no fabric finding")
            other = [f for f in fab if f["kind"] == "slow_link" and f not in ac]
            ok(f"{name}: outliers names no other link", not other, "; ".join(desc))
            nic = [f for f in fab if f["kind"] in ("slow_nic", "slow_host") and f.get("host") in (HOSTS["a"], HOSTS["c"])]
            ok(f"{name}: outliers names neither NIC a nor NIC c (nor their hosts)", not nic, "; ".join(desc))
            return
        if mode == "oneway":
            # the limit took effect: a -> c is the slowest direction of the matrix (its reverse,
            # whose acknowledgements the limit lets through, and the other links are not held)
            p = {(x, y): p50_of(lk, x, y) for x in GUESTS for y in GUESTS if x != y}
            ok(f"{name}: the limited direction a->c has the highest p50 of the six", p[("a", "c")] is not None and
               all(v is not None and v < p[("a", "c")] for k, v in p.items() if k != ("a", "c")),
               f"{ {f'{k[0]}->{k[1]}': v and round(v / 1e6) for k, v in p.items()} } ms")
            nic = [f for f in fab if f["kind"] in ("slow_nic", "slow_host", "host_side_delay")
                   and f.get("host") in (HOSTS["a"], HOSTS["c"])]
            ok(f"{name}: outliers names neither NIC a nor NIC c nor their hosts", not nic, "; ".join(desc))
            both = [f for f in fab if f["kind"] == "slow_link"]
            ok(f"{name}: outliers names no link slow both ways", not both, "; ".join(desc))
            one = [f for f in fab if f["kind"] == "slow_link_one_way"]
            ok(f"{name}: outliers names the a->c direction as slow_link_one_way, and nothing else one way",
               len(one) == 1 and names(one[0], "a") and names(one[0], "c"), "; ".join(desc) or "no finding")
            return
        if mode == "host_delay":
            # b's poller starved: its own completions (its row) late, its peers' (its column) not
            nic = [f for f in fab if f["kind"] in ("slow_nic", "slow_host", "slow_link", "slow_link_one_way")]
            ok(f"{name}: outliers names no NIC, host or link (b's NIC answers its peers in time)", not nic,
               "; ".join(desc))
            hd = [f for f in fab if f["kind"] == "host_side_delay"]
            ok(f"{name}: outliers names b (and only b) as host_side_delay", len(hd) == 1 and hd[0].get("host") == HOSTS["b"],
               "; ".join(desc) or "no finding")
            return
        if mode == "nic_delay":
            nic_delay_verdict(name, lk, finds, desc)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def nic_delay_verdict(name, lk, finds, desc):
    """b's whole egress held: each of its links slow both ways, a<->c not. The delay took
    effect (the four directions through b slower than both of a<->c), and the analyser names
    b's NIC as slow_nic and nothing else: no finding of any kind on a or c (their devices see
    b's slowness in half their completions), no link to them, no host or host-side delay."""
    p = {(x, y): p50_of(lk, x, y) for x in GUESTS for y in GUESTS if x != y}
    mine = [k for k in p if "b" in k]
    rest = [k for k in p if "b" not in k]
    ok(f"{name}: every direction of b's links has a higher p50 than either direction of a<->c",
       all(v is not None for v in p.values()) and min(p[k] for k in mine) > max(p[k] for k in rest),
       f"{ {f'{k[0]}->{k[1]}': v and round(v / 1e6) for k, v in p.items()} } ms")
    peers = [f for f in finds if f.get("host") in (HOSTS["a"], HOSTS["c"])
             or any(f"{HOSTS[g]}:" in f.get("culprit", "") for g in ("a", "c"))]
    ok(f"{name}: outliers names neither a nor c (no finding of any kind on them, no link to them)", not peers,
       "; ".join(desc))
    fab = [f for f in finds if f.get("kind") in ("slow_link", "slow_nic", "slow_host", "slow_link_one_way",
                                                  "host_side_delay")]
    nic = [f for f in fab if f["kind"] == "slow_nic"]
    ok(f"{name}: outliers names b's NIC ({HOSTS['b']} rxe0) as slow_nic, and no other NIC",
       len(nic) == 1 and nic[0].get("host") == HOSTS["b"] and nic[0].get("roce_device") == "rxe0",
       "; ".join(desc) or "no finding")
    ok(f"{name}: outliers names no link, host or host-side delay (b's slowness is its NIC's)",
       not [f for f in fab if f["kind"] != "slow_nic"], "; ".join(desc))


def links(res, scen, mode="clean", sbw=True):
    """One links-shaped run: every rank's ibcast file against its tally, the QP join, the
    analyser (tool_checks' mode), and, with sbw, the three ib_send_bw pairs. Stalls: none
    anywhere, except on the a-c link in links_delay (the delay), on b's links in nic_delay, and
    on a's QPs towards c in oneway (the limit: a's WRs queue for seconds); b's own file in
    host_delay is not judged (a burst can outlast STALL_MS, and b's completions are then late
    by definition)."""
    d = {g: os.path.join(res, g, "out", "trio", scen) for g in GUESTS}
    docs = {}
    for g in GUESTS:
        _, doc = ibcast_file(f"{scen} {g}", os.path.join(d[g], "ibcast"))
        if doc is None:
            continue
        docs[g] = doc
        if ok(f"{scen} {g}: file carries the stall keys (format 3, STALL_MS on)", has_stall_keys(doc),
              f"version {doc.get('version')}, stall_ms {doc.get('stall_ms')}"):
            p = stall_problems(doc)
            if mode == "delay" or (mode == "oneway" and g == "a"):
                # a 2 s delay (or the rate limit's queue) keeps WRs of the a-c link outstanding
                # longer than STALL_MS: a stall by definition there, and only there
                p = [x for x in p if not any(x.startswith(f"ch {c} ") for c in FAULT_CH)]
                ok(f"{scen} {g}: no stall off the a-c link", not p, "; ".join(p[:3]))
            elif mode == "nic_delay":
                # b's held egress keeps the WRs of its links outstanding for seconds
                p = [x for x in p if not any(x.startswith(f"ch {c} ") for c in B_CH)]
                ok(f"{scen} {g}: no stall off b's links (a-c)", not p, "; ".join(p[:3]))
            elif mode == "host_delay" and g == "b":
                print(f"INFO {scen} b: stalls in the starved rank's own file: {p[:3]}")
            else:
                ok(f"{scen} {g}: no stall anywhere in the file", not p, "; ".join(p[:3]))
    if len(docs) == 3:
        join_links(f"{scen} ibcast", docs)
        if any(q.get("peer") for doc in docs.values() for _, _, q in qps_of(doc)):
            tool_checks(scen, d, mode)
        else:
            ok(f"{scen}: rccl-telemetry links / outliers on the three files", False, "the files carry no QP peers yet")
    if scen == "links_delay":
        tc = K.read(os.path.join(d["a"], "tc_stats.txt"))
        m = re.search(r"qdisc netem 30:.*?Sent (\d+) bytes (\d+) pkt", tc, re.S)
        ok(f"{scen}: a's netem delay was installed and delayed packets to c", m and int(m.group(2)) > 0, tc[:300])
    if mode == "oneway":
        tc = K.read(os.path.join(d["a"], "tc_stats.txt"))
        m = re.search(r"qdisc tbf 30:.*?Sent (\d+) bytes (\d+) pkt \(dropped (\d+), overlimits (\d+)", tc, re.S)
        ok(f"{scen}: a's tbf held its packets to c to the rate (sent through it, over the limit at times, none dropped)",
           m and int(m.group(2)) > 0 and int(m.group(4)) > 0 and int(m.group(3)) == 0, tc[:400])
        if m:
            print(f"INFO {scen}: a's tbf towards c: {m.group(2)} packets, {m.group(1)} bytes, overlimits {m.group(4)}")
    if mode == "nic_delay":
        tc = K.read(os.path.join(d["b"], "tc_stats.txt"))
        m = re.search(r"qdisc netem 30: root.*?Sent (\d+) bytes (\d+) pkt \(dropped (\d+)", tc, re.S)
        ok(f"{scen}: b's netem held its whole egress (at eth0's root, packets through it, none dropped)",
           m and int(m.group(2)) > 0 and int(m.group(3)) == 0, tc[:300])
        if m:
            print(f"INFO {scen}: b's netem: {m.group(2)} packets, {m.group(1)} bytes held {K.read(os.path.join(res, 'b', 'out', 'trio', 'delay')).strip()}")
    if mode == "host_delay":
        bursts = [ln.split() for ln in K.read(os.path.join(d["b"], "bursts.txt")).splitlines() if ln.strip()]
        lens = [float(y) - float(x) for x, y in bursts]
        ok(f"{scen}: b's rank was stopped in bursts during its traffic", len(lens) >= 2, f"{len(lens)} bursts")
        if lens:
            print(f"INFO {scen}: b stopped {len(lens)} times, {min(lens):.2f}..{max(lens):.2f} s each, "
                  f"{sum(lens):.1f} s in all")
    if sbw:
        sbw_files(scen, d)
    return docs


def stall(res, scen, ne):
    d = {g: os.path.join(res, g, "out", "trio", scen) for g in GUESTS}
    docs, tallies = {}, {}
    for g in GUESTS:
        tallies[g], docs[g] = ibcast_file(f"{scen} {g}", os.path.join(d[g], "ibcast"))
    stall_ms = 1000
    tick = stall_ms / 2000
    # the fault as a's guest recorded it (/proc/uptime)
    fault = {}
    for line in K.read(os.path.join(d["a"], "fault.txt")).splitlines():
        parts = line.split()
        if parts:
            fault[parts[0]] = [float(x) for x in parts[1:] if re.fullmatch(r"[\d.]+", x)]
    if not ok(f"{scen}: a injected the loss and restored it", "loss_start" in fault and "loss_end" in fault,
              K.read(os.path.join(d["a"], "fault.txt"))):
        return
    injected = fault["loss_end"][0] - fault["loss_start"][1]
    injected_hi = fault["loss_end"][1] - fault["loss_start"][0]
    print(f"INFO {scen}: loss on a->c for {injected:.2f}..{injected_hi:.2f} s (uptime of a)")
    if ne.error:
        ok(f"{scen}: node_exporter serves the textfiles", False, ne.error)
        return
    gid = {g: (tallies[g] or {}).get("gid") for g in GUESTS}
    peers_known = all((tallies[g] or {}).get("set_peer_available") for g in GUESTS)

    def series_ok(g, series):
        """stalled series: only the a-c link's channels, and the peer is the other end"""
        other = "c" if g == "a" else "a"
        bad = [s for s in series if int(s.get("channel", -1)) not in FAULT_CH]
        if peers_known:
            bad += [s for s in series if s.get("peer_gid") != gid[other]]
        return bad

    # a: the first textfile copy showing the stall, through node_exporter: written (its own
    # rccl_telemetry_last_write_timestamp_seconds) within the threshold plus two detector ticks
    # of the stall's start (stalled_since / longest_stall_start: the last progress seen), both
    # the guest's wall clock. (The injector's copy at that moment, prom_two_ticks.prom, depends
    # on the guest's scheduling as well, so it is reported, not judged.)
    first, clean_writes = None, []
    for x in sorted(glob.glob(os.path.join(d["a"], "prom_snaps", "*.prom"))):
        smp = ne.scrape(x)
        if prom_view(smp)[1]:
            first = (x, smp)
            break
        clean_writes += [v for n, _, v in smp if n == "rccl_telemetry_last_write_timestamp_seconds"]
    starts = [q.get("longest_stall_start") for _, ch, q in qps_of(docs["a"] or {}) if ch.get("id") in FAULT_CH
              and q.get("longest_stall_start")]
    if ok(f"{scen} a: a textfile copy shows the stall", first is not None, "none"):
        clean, stalled, series = prom_view(first[1])
        ok(f"{scen} a: node_exporter parses the textfile", clean, "node_textfile_scrape_error != 0")
        wrote = [v for n, _, v in first[1] if n == "rccl_telemetry_last_write_timestamp_seconds"]
        if ok(f"{scen} a: the final file says when the stall began", bool(starts) and bool(wrote), f"{starts[:1]} {wrote}"):
            t0 = min(datetime.datetime.fromisoformat(x[:26] + "+00:00").timestamp() for x in starts)
            good, how = named_in_time(t0, wrote[0], clean_writes, stall_ms / 1000, tick)
            ok(f"{scen} a: the textfile named the stall {how}", good, "")
        ok(f"{scen} a: stalled QP series name the a-c link's channels {sorted(FAULT_CH)}"
           + (" and c's GID as the peer" if peers_known else ""), series and not series_ok("a", series),
           f"series {series[:3]}; bad {series_ok('a', series)[:2]}")
    p = os.path.join(d["a"], "prom_two_ticks.prom")
    if os.path.exists(p):
        print(f"INFO {scen} a: the injector's copy at threshold + two ticks shows stalled_qps = {prom_view(ne.scrape(p))[1]}")
        if not peers_known:
            ok(f"{scen} a: the stalled series' peer_gid is c's GID", False, "no rcclTelemetryQpSetPeer in the library yet")
    p = os.path.join(d["a"], "prom_recovered.prom")
    if ok(f"{scen} a: textfile copied after the recovery", os.path.exists(p), "missing"):
        clean, stalled, series = prom_view(ne.scrape(p))
        ok(f"{scen} a: after recovery no stalled QP in the textfile", stalled == 0 and not series,
           f"stalled_qps = {stalled}, series {series[:2]}")
    # every guest's textfile over the run (copied every 0.25 s): c stalls too (its ACKs from
    # a are lost), on the same link; b never
    for g in GUESTS:
        snaps = sorted(glob.glob(os.path.join(d[g], "prom_snaps", "*.prom")))
        if not ok(f"{scen} {g}: live textfile copies", len(snaps) >= 2, f"{len(snaps)} copies"):
            continue
        views = [prom_view(ne.scrape(s)) for s in snaps]
        ok(f"{scen} {g}: node_exporter parses every copy", all(v[0] for v in views), "a scrape error")
        stalled = [v for v in views if v[1]]
        if g == "b":
            ok(f"{scen} b: no stalled QP in any copy of b's textfile", not stalled, f"{len(stalled)} copies with a stall")
        else:
            # a's sends lose their packets and must stall; c's only when it had WRs in flight
            # as the loss began (its CTS from a are lost too, so it may simply stop posting)
            if g == "a":
                ok(f"{scen} {g}: a copy during the loss shows stalled QPs", bool(stalled), "none")
            bad = [b for v in stalled for b in series_ok(g, v[2])]
            ok(f"{scen} {g}: every stalled series is on the a-c link", not bad, f"{bad[:2]}")
            ok(f"{scen} {g}: the last copy has no stalled QP (the stall ended)", views[-1][1] == 0 and not views[-1][2],
               f"stalled_qps {views[-1][1]}")
        # the snapshot taken when the stall first showed (SIGUSR1)
        sd = glob.glob(os.path.join(d[g], "snap_during", "*.json"))
        if g == "a":
            if ok(f"{scen} {g}: a snapshot was taken during the stall", len(sd) == 1, f"{sd}"):
                sdoc = K.load(sd[0])
                ok(f"{scen} {g}: it is a SIGUSR1 snapshot", sdoc.get("final") is False and sdoc.get("trigger") == "SIGUSR1",
                   f"final {sdoc.get('final')} trigger {sdoc.get('trigger')}")
                st = [(ch.get("id"), q.get("id")) for _, ch, q in qps_of(sdoc) if q.get("stalled")]
                ok(f"{scen} {g}: the snapshot names stalled QPs, all on the a-c link", st and all(c in FAULT_CH for c, _ in st),
                   f"stalled {st}")
                ok(f"{scen} {g}: the snapshot's stalled QPs have WRs outstanding and a stalled_since",
                   st and all(q.get("num_wqe_outstanding", 0) > 0 and q.get("stalled_since")
                              for _, _, q in qps_of(sdoc) if q.get("stalled")), "")
    # the final files: the recorded duration against the injected one
    for g in GUESTS:
        doc = docs[g]
        if doc is None:
            continue
        on_link = [q.get("longest_stall_ms", 0) for _, ch, q in qps_of(doc) if ch.get("id") in FAULT_CH]
        off_link = [(ch.get("id"), q.get("id"), q.get("longest_stall_ms")) for _, ch, q in qps_of(doc)
                    if ch.get("id") not in FAULT_CH and q.get("longest_stall_ms", 0)]
        ok(f"{scen} {g}: no stall off the a-c link", not off_link, f"{off_link[:3]}")
        ok(f"{scen} {g}: no QP stalled at exit", not any(q.get("stalled") for _, _, q in qps_of(doc)), "")
        if g == "b":
            ok("stall_loss b: no stall recorded at all", not any(on_link), f"{on_link}")
            continue
        longest = max(on_link or [0]) / 1000
        lo, hi = injected - tick, injected_hi + RTO_S + tick
        if g == "c":
            if not any(on_link):
                print(f"INFO {scen} c: no stall recorded (nothing in flight towards a when the loss began)")
                continue
            lo = 0.0   # c's stall begins when its last WR before the loss went out: at most the loss
        ok(f"{scen} {g}: the final file's longest stall {longest:.2f} s is the injected {injected:.2f} s "
           f"(within one tick {tick} s, plus one retransmission timeout {RTO_S:.2f} s after the restore)",
           lo <= longest <= hi, f"want {lo:.2f}..{hi:.2f} s")


def named_in_time(t0, named, clean, stall_s, tick):
    """Was the stall that began at t0 named in time, judged by the library's own writes (guest
    wall clock)? -> (bool, what). Due at t0 + threshold + two detector ticks. On a loaded host the
    guest's scheduler runs the detector and the writer late alike, so a later naming still
    passes when no write came after the due time without it: the first write the library made
    after the due time (give or take one tick) named it. A write past that which still shows no
    stall is a detector that missed its tick, loaded or not."""
    due = t0 + stall_s + 2 * tick
    lag = named - t0
    if 0 < lag <= due - t0:
        return True, f"{lag:.2f} s after its start: within the threshold plus two ticks ({due - t0:.1f} s)"
    late_clean = [w - t0 for w in clean if t0 < w and w > due + tick]
    if lag > 0 and not late_clean:
        return True, (f"{lag:.2f} s after its start, past the threshold plus two ticks ({due - t0:.1f} s), "
                      f"at the first write the guest's scheduler allowed after it (no write without the stall "
                      f"after {due - t0 + tick:.1f} s)")
    return False, (f"{lag:.2f} s after its start, due by {due - t0:.1f} s; writes without it at "
                   + ", ".join(f"{w:.2f}" for w in late_clean[:3]) + " s")


def stall_stop(res, scen, ne):
    """c's ib_send_bw server frozen (SIGSTOP) for a few seconds under a's client's SENDs."""
    a = os.path.join(res, "a", "out", "trio", scen)
    c = os.path.join(res, "c", "out", "trio", scen)
    fault = {}
    for line in K.read(os.path.join(c, "fault.txt")).splitlines():
        parts = line.split()
        if parts:
            fault[parts[0]] = [float(x) for x in parts[1:]]
    if not ok(f"{scen}: c stopped its server and let it go on", "stop_start" in fault and "stop_end" in fault,
              K.read(os.path.join(c, "fault.txt"))):
        return
    injected = fault["stop_end"][0] - fault["stop_start"][1]
    injected_hi = fault["stop_end"][1] - fault["stop_start"][0]
    print(f"INFO {scen}: c's server stopped for {injected:.2f}..{injected_hi:.2f} s")
    tick = 0.5
    docs = {}
    for side, d in [("client", a), ("server", c)]:
        nm = f"{scen} ib_send_bw {side}"
        wd = os.path.join(d, side)
        rc = K.read(os.path.join(wd, "rc")).strip()
        ok(f"{nm}: exited 0", rc == "0", f"rc={rc!r}: {K.read(os.path.join(wd, 'stderr'))[-300:]}")
        pid = K.read(os.path.join(wd, "pid")).strip()
        files = glob.glob(os.path.join(wd, "telemetry", f"rccl_telemetry_*_{pid}.json"))
        if ok(f"{nm}: the interposer wrote its file", len(files) == 1, f"{files}"):
            docs[side] = K.load(files[0])
            K.validate(f"{nm}: file validates against the schema", docs[side])
    srv, cli = docs.get("server"), docs.get("client")
    if srv:
        p = stall_problems(srv)
        ok(f"{scen}: the frozen server's file records no stall (receives are no stall criterion)", not p, "; ".join(p[:3]))
    if not cli:
        return
    rcq = [q for _, _, q in qps_of(cli) if q.get("qp_type", "rc") == "rc"]
    longest = max([q.get("longest_stall_ms", 0) for q in rcq] or [0]) / 1000
    lo, hi = injected - tick, injected_hi + tick
    ok(f"{scen}: the client's final file records a stall of {longest:.2f} s for the {injected:.2f} s freeze "
       f"(within one tick, {tick} s)", lo <= longest <= hi, f"want {lo:.2f}..{hi:.2f} s")
    ok(f"{scen}: no QP of the client stalled at exit", not any(q.get("stalled") for q in rcq), "")
    srv_id = None
    if srv and any(q.get("qp_num") for _, _, q in qps_of(srv)):
        sq = [q for _, _, q in qps_of(srv) if q.get("qp_type", "rc") == "rc"]
        srv_id = (srv["devices"][0].get("gid"), sq[0].get("qp_num") if sq else None)
    snaps = sorted(glob.glob(os.path.join(a, "prom_snaps", "*.prom")))
    if ne.error:
        ok(f"{scen}: node_exporter serves the textfiles", False, ne.error)
    elif ok(f"{scen}: live textfile copies of the client", len(snaps) >= 2, f"{len(snaps)}"):
        views = [prom_view(ne.scrape(x)) for x in snaps]
        ok(f"{scen}: node_exporter parses every copy", all(v[0] for v in views), "a scrape error")
        st = [v for v in views if v[1]]
        ok(f"{scen}: a copy during the freeze shows the client's stalled QP", bool(st), "none")
        if srv_id and srv_id[1] is not None:
            bad = [x for v in st for x in v[2] if (x.get("peer_gid"), x.get("peer_qp_num")) != (srv_id[0], str(srv_id[1]))]
            ok(f"{scen}: the stalled series name the server's QP as the peer", st and not bad, f"{bad[:2]} want {srv_id}")
        else:
            ok(f"{scen}: the stalled series name the server's QP as the peer", False, "no peers in the files")
    sd = glob.glob(os.path.join(a, "snap_during", "*.json"))
    if ok(f"{scen}: a snapshot of the client was taken during the freeze", len(sd) == 1, f"{sd}"):
        sdoc = K.load(sd[0])
        stq = [q for _, _, q in qps_of(sdoc) if q.get("stalled")]
        ok(f"{scen}: the snapshot (SIGUSR1) names the stalled QP with WRs outstanding and their oldest age",
           sdoc.get("trigger") == "SIGUSR1" and stq and all(q.get("num_wqe_outstanding", 0) > 0 and "oldest_outstanding_ms" in q
                                                           for q in stq), f"trigger {sdoc.get('trigger')}, stalled {stq[:1]}")


def errored(doc):
    """-> [(channel id, qp)] of the QPs with error completions"""
    return [(ch.get("id"), q) for _, ch, q in qps_of(doc) if q.get("cq_errors")]


def dead_path(res, scen, ne):
    """100% loss on a -> c for good: the a-c link's QPs fail at both ends, nothing else does;
    the snapshots the library wrote on its own, rxe's counters and the textfile agree."""
    d = {g: os.path.join(res, g, "out", "trio", scen) for g in GUESTS}
    tallies = {}
    for g in GUESTS:
        p = os.path.join(d[g], "ibcast", "tally.json")
        if ok(f"{scen} {g}: the rank wrote its tally (hung or done)", os.path.exists(p), K.read(os.path.join(d[g], "ibcast", "stdout.txt"))[-300:]):
            tallies[g] = K.load(p)
    # RoCE v2 GIDs of the guests' IPv4 addresses (192.0.2.1, .2, .3)
    gid = {g: f"0000:0000:0000:0000:0000:ffff:c000:02{k + 1:02x}" for k, g in enumerate(GUESTS)}
    peer_of = {"a": "c", "c": "a"}
    for g in GUESTS:
        t = tallies.get(g)
        if t is None:
            continue
        nm = f"{scen} {g}"
        faulted = g in peer_of
        said = K.read(os.path.join(d[g], "ibcast", "stdout.txt"))
        ok(f"{nm}: the rank {'hung on the dead path' if faulted else 'finished with no error'}",
           ("ibcast_e2e: hung after" if faulted else "ibcast_e2e: done after 0 error") in said, said[-300:])
        if faulted and g == "c" and not t.get("errors_seen"):
            # c's sends wait for a's CTS, which the dead path loses: with nothing in flight
            # when it died, c gets no error, its link just goes quiet
            sh = glob.glob(os.path.join(d[g], "snap_hung", "*.json"))
            if ok(f"{nm}: a snapshot of the hung rank (SIGUSR1)", len(sh) == 1, f"{sh}"):
                doc = K.load(sh[0])
                K.check_errors(f"{nm} (nothing in flight when the path died)", doc, t)
                ok(f"{nm}: no error in its file either", not errored(doc), f"{[(c, q.get('cq_errors')) for c, q in errored(doc)]}")
            continue
        files = glob.glob(os.path.join(d[g], "ibcast", "telemetry", "rccl_telemetry_*.json"))
        if not ok(f"{nm}: one file left", len(files) == 1, f"{files}"):
            continue
        left = K.load(files[0])
        K.validate(f"{nm}: the file left validates against the schema", left)
        if not faulted:
            ok(f"{nm}: SIGTERM wrote the final file", left.get("final") is True, f"final {left.get('final')}")
            K.check_errors(nm, left, t)
            K.check_clean_errors(nm, left, t, False)
            continue
        # the snapshots the library wrote by itself, before any signal
        snaps = [K.load(p) for p in sorted(glob.glob(os.path.join(d[g], "ibcast", "snaps", "[0-9]*.json")))]
        trig = [s.get("trigger") for s in snaps]
        first = next((s for s in snaps if s.get("trigger") == "cq_error"), None)
        ok(f"{nm}: the library wrote a snapshot on its own at the first error (trigger cq_error)", first is not None
           and first.get("final") is False, f"triggers seen {trig}")
        if first:
            K.validate(f"{nm}: the cq_error snapshot validates against the schema", first)
            fe = [(c, q) for c, q in errored(first) if (q.get("first_cq_error") or {}).get("status") == "RETRY_EXC_ERR"]
            ok(f"{nm}: the cq_error snapshot names a QP whose first error is RETRY_EXC_ERR", bool(fe),
               f"{[(c, q.get('cq_errors')) for c, q in errored(first)]}")
        ok(f"{nm}: the file left after SIGKILL is a snapshot", left.get("final") is False, f"final {left.get('final')}")
        sh = glob.glob(os.path.join(d[g], "snap_hung", "*.json"))
        if not ok(f"{nm}: a snapshot of the hung rank (SIGUSR1)", len(sh) == 1, f"{sh}"):
            continue
        doc = K.load(sh[0])
        K.validate(f"{nm}: the hung rank's snapshot validates against the schema", doc)
        K.check_errors(nm, doc, t)
        errs = errored(doc)
        off = [(c, q.get("id")) for c, q in errs if c not in FAULT_CH]
        ok(f"{nm}: only QPs of the dead a-c link failed (channels {sorted(FAULT_CH)})", errs and not off, f"failed elsewhere: {off}")
        retry = [(c, q) for c, q in errs if (q.get("first_cq_error") or {}).get("status") == "RETRY_EXC_ERR"]
        ok(f"{nm}: a QP's first error is RETRY_EXC_ERR", bool(retry), f"{[(c, q.get('first_cq_error')) for c, q in errs]}")
        bad_peer = [(c, q.get("id"), (q.get("peer") or {}).get("gid")) for c, q in retry
                    if (q.get("peer") or {}).get("gid") != gid.get(peer_of[g])]
        ok(f"{nm}: every RETRY_EXC_ERR QP names {peer_of[g]} as its peer", retry and not bad_peer, f"{bad_peer} want {gid.get(peer_of[g])}")
        ok(f"{nm}: WR_FLUSH_ERR on the WRs behind a failed one", any(q["cq_errors"].get("WR_FLUSH_ERR", 0) > 0 for _, q in retry),
           f"{[(c, q.get('id'), q.get('cq_errors')) for c, q in retry]}")
        ok(f"{nm}: every errored QP's state is ERR", all(q.get("qp_state") == "ERR" for _, q in errs), "")
        dev = doc["devices"][0]
        n_retry = dev.get("cq_errors_by_status", {}).get("RETRY_EXC_ERR", 0)
        hw = dev.get("hw_counters", {})
        moved = K.raw_delta(d[g], *K.rxe_raw("retry_exceeded_err"))
        ok(f"{nm}: rxe's retry_exceeded_err moved by the RETRY_EXC_ERRs ({n_retry}) and the file says so",
           moved is not None and moved >= n_retry >= 1 and hw.get("retry_exceeded_err") == n_retry,
           f"rxe delta {moved}, file {hw.get('retry_exceeded_err')}, completions {n_retry}")
        crt = K.raw_delta(d[g], *K.rxe_raw("completer_retry_err"))
        ok(f"{nm}: rxe retried before giving up (completer_retry_err, the file's {hw.get('completer_retry_err')})",
           crt is not None and crt >= 1 and isinstance(hw.get("completer_retry_err"), int) and 1 <= hw["completer_retry_err"] <= crt,
           f"rxe delta {crt}")
        ok(f"{nm}: local_ack_timeout_err is not exposed by rxe (-1; completer_retry_err is rxe's count)",
           K.rxe_raw("local_ack_timeout_err") is None and hw.get("local_ack_timeout_err") == -1,
           f"{hw.get('local_ack_timeout_err')}")
        # the live textfile while hung, through node_exporter
        pf = os.path.join(d[g], "prom_hung.prom")
        if ne.error:
            ok(f"{nm}: node_exporter serves the textfile", False, ne.error)
        elif ok(f"{nm}: the live textfile copied while hung", os.path.exists(pf), ""):
            smp = ne.scrape(pf)
            err = [v for n, _, v in smp if n == "node_textfile_scrape_error"]
            ok(f"{nm}: node_exporter parses the textfile", err == [0.0], f"{err}")
            by = {l.get("status"): v for n, l, v in smp if n == "rccl_telemetry_cq_errors_by_status_total" and l.get("device") == "rxe0"}
            ok(f"{nm}: textfile: errors by status on rxe0 = the snapshot's", by.get("RETRY_EXC_ERR", 0) >= 1 and
               set(by) == set(dev.get("cq_errors_by_status", {})), f"{by} vs {dev.get('cq_errors_by_status')}")
            qs = [l for n, l, v in smp if n == "rccl_telemetry_qp_cq_errors_total" and l.get("status") == "RETRY_EXC_ERR"]
            ok(f"{nm}: textfile: the failed QPs' series name {peer_of[g]} as the peer", qs and
               all(l.get("peer_gid") == gid.get(peer_of[g]) for l in qs), f"{qs[:2]}")


def dead_tool(res, scen):
    """ib_write_bw under the interposer through the dead path: the client's file names the
    failed QP, its status, the failed WR and the peer; the server's names no error."""
    a = os.path.join(res, "a", "out", "trio", scen)
    c = os.path.join(res, "c", "out", "trio", scen)
    if not ok(f"{scen}: run (the interposer was built)", os.path.exists(os.path.join(a, "preload")), "no run"):
        return
    docs = {}
    for side, d in [("client", a), ("server", c)]:
        pid = K.read(os.path.join(d, side, "pid")).strip()
        f = glob.glob(os.path.join(d, side, "telemetry", f"rccl_telemetry_*_{pid}.json"))
        if ok(f"{scen} {side}: its file (pid {pid}) written", len(f) == 1, f"{f}"):
            docs[side] = K.load(f[0])
            K.validate(f"{scen} {side}: file validates against the schema", docs[side])
    out = K.read(os.path.join(a, "client", "stdout")) + K.read(os.path.join(a, "client", "stderr"))
    ok(f"{scen} client: ib_write_bw failed on the completion error", K.read(os.path.join(a, "client", "rc")).strip() not in ("", "0"),
       out[-300:])
    cli, srv = docs.get("client"), docs.get("server")
    if cli:
        errs = errored(cli)
        fe = [q for _, q in errs if (q.get("first_cq_error") or {}).get("status") == "RETRY_EXC_ERR"]
        ok(f"{scen} client: a QP's first error is RETRY_EXC_ERR", bool(fe), f"{[q.get('cq_errors') for _, q in errs]}")
        wr = [q for q in fe if q["first_cq_error"].get("opcode") == "RDMA_WRITE" and q["first_cq_error"].get("bytes") == 4096]
        ok(f"{scen} client: the failed WR of the data QP was a 4096-byte RDMA_WRITE", bool(wr),
           f"{[q['first_cq_error'] for q in fe]}")
        for q in fe:
            ok(f"{scen} client: qp {q.get('qp_num')}: state ERR, peer is c's GID", q.get("qp_state") == "ERR" and
               (q.get("peer") or {}).get("gid") == "0000:0000:0000:0000:0000:ffff:c000:0203",
               f"{q.get('qp_state')}, peer {q.get('peer')}")
        ok(f"{scen} client: every failed QP failed first with RETRY_EXC_ERR (the dead path)", errs and len(errs) == len(fe),
           f"{len(errs)} errored, {len(fe)} with RETRY_EXC_ERR")
    if srv:
        ok(f"{scen} server: no error in its file", not errored(srv) and not srv["devices"][0].get("cq_errors_by_status"), "")


def frozen(res, scen):
    """b's rank frozen (SIGSTOP) for good mid-run; a and c hang waiting on it, their a-c link
    done: `rccl-telemetry stalls` on every rank's latest file (periodic snapshots) names b."""
    d = {g: os.path.join(res, g, "out", "trio", scen) for g in GUESTS}
    fault = K.read(os.path.join(d["b"], "fault.txt"))
    if not ok(f"{scen}: b stopped its rank (SIGSTOP) mid-run", fault.startswith("stop "), fault):
        return
    files = {}
    for g in GUESTS:
        nm = f"{scen} {g}"
        said = K.read(os.path.join(d[g], "ibcast", "stdout.txt"))
        if g != "b":
            ok(f"{nm}: the rank said it is hung (waiting on b)", "ibcast_e2e: hung after 0 error" in said, said[-300:])
        f = glob.glob(os.path.join(d[g], "ibcast", "telemetry", "rccl_telemetry_*.json"))
        if not ok(f"{nm}: one file left (rewritten every second: RCCL_TELEMETRY_FLUSH_INTERVAL_S=1)", len(f) == 1, f"{f}"):
            continue
        doc = K.load(f[0])
        files[g] = f[0]
        K.validate(f"{nm}: its file validates against the schema", doc)
        ok(f"{nm}: the file left after SIGKILL is a snapshot", doc.get("final") is False, f"final {doc.get('final')}")
        ok(f"{nm}: no error and no QP stalled in it (a frozen rank's rxe still answers: its peers wait, nothing fails)",
           not errored(doc) and not any(q.get("stalled") for _, _, q in qps_of(doc)),
           f"{[(c, q.get('cq_errors')) for c, q in errored(doc)]}")
        if g != "b" and os.path.exists(os.path.join(d[g], "ibcast", "tally.json")):
            K.check_errors(nm, doc, K.load(os.path.join(d[g], "ibcast", "tally.json")))
    if len(files) != 3 or not os.access(TOOL, os.X_OK):
        ok(f"{scen}: the three files and the tool for stalls", False, f"{sorted(files)}, tool {os.access(TOOL, os.X_OK)}")
        return
    tmp = tempfile.mkdtemp(prefix="e2e-trio-")
    try:
        for f in files.values():
            shutil.copy(f, tmp)
        rc, st, err = tool_json("stalls", tmp)
        if not ok(f"{scen}: rccl-telemetry stalls --json", rc in (0, 1) and isinstance(st, dict), f"exit {rc}: {err[-300:]}"):
            return
        bpid = K.read(os.path.join(d["b"], "ibcast", "pid")).strip()
        roots = st.get("roots", [])
        print(f"INFO {scen}: stalls: basis {st.get('roots_basis')}, roots "
              + "; ".join(f"{r.get('kind')} {r.get('ranks')} {r.get('nics')}: {r.get('evidence', '')[:240]}" for r in roots)
              + (f"; no root: {st.get('no_root')}" if st.get("no_root") else ""))
        ok(f"{scen}: stalls names one root: b's rank (e2e-b:{bpid}) and its NIC (e2e-b:rxe0)",
           len(roots) == 1 and roots[0].get("ranks") == [f"{HOSTS['b']}:{bpid}"] and roots[0].get("nics") == [f"{HOSTS['b']}:rxe0"],
           f"roots {[(r.get('kind'), r.get('ranks'), r.get('nics')) for r in roots]}; {st.get('no_root')}")
        if roots:
            ql = roots[0].get("quiet_links", [])
            ok(f"{scen}: the links that went quiet first are b's two (a-b, b-c), the a-c link went on",
               roots[0].get("kind") == "quiet_end" and len(ql) == 2 and all(HOSTS["b"] in x for x in ql), f"{ql}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def no_root(name, paths):
    """The final files of a run that ended (recovered or healthy): stalls names no root."""
    tmp = tempfile.mkdtemp(prefix="e2e-trio-")
    try:
        for f in paths:
            shutil.copy(f, tmp)
        rc, st, err = tool_json("stalls", tmp)
        ok(f"{name}: stalls on the final files names no root and no QP stalled now",
           rc == 0 and isinstance(st, dict) and not st.get("roots") and not st.get("stalled_qps"),
           f"exit {rc}: {(st or {}).get('roots')} {err[-200:]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# The trio's scenario groups (guest/trio.sh run_trio; E2E_TRIO_ONLY=group,group selects)
GROUPS = {"links_clean": ("links", "verdict"), "links_delay": ("links",), "stall_loss": ("stalls",),
          "stall_stop": ("stalls",), "dead_path": ("faults",), "dead_tool": ("faults",), "frozen": ("faults", "frozen"),
          "clean_2": ("verdict",), "clean_3": ("verdict",), "oneway": ("verdict", "oneway"),
          "host_delay": ("verdict", "host_delay"), "nic_delay": ("verdict", "nic_delay")}


def selection():
    """E2E_TRIO_ONLY as the guests got it: the environment, or E2E_GUEST_ARGS (run.sh's kernel
    command-line variables); empty: every scenario."""
    only = os.environ.get("E2E_TRIO_ONLY")
    if only is None:
        m = re.search(r"(?:^|\s)E2E_TRIO_ONLY=(\S*)", os.environ.get("E2E_GUEST_ARGS", ""))
        only = m.group(1) if m else ""
    return {g for g in only.split(",") if g}


def selftest():
    """nic_delay's verdict judgement on analyser answers shaped as `links --json` and
    `outliers --json` give them (figures of a real run): the right verdict passes (with b's
    own device-level findings beside it), and every wrong one fails at least one check."""
    ms = 1e6
    p50 = {("a", "b"): 2600, ("b", "a"): 2700, ("b", "c"): 2500, ("c", "b"): 2650, ("a", "c"): 300, ("c", "a"): 350}

    def lk(cells):
        return {"links": [{"src": {"host": HOSTS[x]}, "dst": {"host": HOSTS[y]},
                           "latency": {"samples": 200, "p50_ns": v * ms, "p99_ns": 3 * v * ms}}
                          for (x, y), v in cells.items()]}

    def finding(kind, g, culprit=None):
        return {"kind": kind, "host": HOSTS[g], "roce_device": "rxe0", "culprit": culprit or f"{HOSTS[g]}:rxe0",
                "evidence": f"{kind} on {HOSTS[g]}"}
    right = [finding("slow_nic", "b"), finding("latency_tail", "b")]
    link_ab = finding("slow_link", "a", f"{HOSTS['a']}:rxe0 <-> {HOSTS['b']}:rxe0")
    cases = [
        ("b's NIC named slow_nic, b's own tail beside it", lk(p50), right, False),
        ("a's device named too (latency_tail)", lk(p50), right + [finding("latency_tail", "a")], True),
        ("c's NIC named slow_nic beside b's", lk(p50), right + [finding("slow_nic", "c")], True),
        ("a link to b named beside b's NIC", lk(p50), right + [link_ab], True),
        ("a link to b named instead of b's NIC", lk(p50), [link_ab], True),
        ("b named host_side_delay, not its NIC", lk(p50), [finding("host_side_delay", "b")], True),
        ("b's host named slow_host beside its NIC", lk(p50), right + [finding("slow_host", "b", HOSTS["b"])], True),
        ("b's NIC on another device name", lk(p50), [dict(finding("slow_nic", "b"), roce_device="rxe1")], True),
        ("nothing named", lk(p50), [], True),
        ("the delay did not take: a->c as slow as b's links", lk({**p50, ("a", "c"): 2800}), right, True),
        ("a direction of the matrix missing", lk({k: v for k, v in p50.items() if k != ("c", "b")}), right, True),
    ]
    # the stall's detection latency (t0 = 100, threshold 1 s, tick 0.5 s: due at 102)
    timing = [
        ("named at 101.6, on time", 101.6, [100.4, 101.0], True),
        ("named at 102.75 on a loaded host, its last clean write at 101.9", 102.75, [100.9, 101.9], True),
        ("named at 102.75, a clean write at 102.4 (within a tick of the due time)", 102.75, [101.6, 102.4], True),
        ("named at 102.75, a clean write at 102.6 (past the due time and a tick)", 102.75, [101.6, 102.6], False),
        ("named at 104, clean writes at 103 and 103.5 (the detector missed its tick)", 104.0, [103.0, 103.5], False),
        ("named before the stall began", 99.5, [], False),
    ]
    for label, named, clean, want in timing:
        got, how = named_in_time(100.0, named, clean, 1.0, 0.5)
        K.C.ok(f"selftest: stall timing: {label}: {'passes' if want else 'caught'}", got == want, how)
    real = K.C
    for label, links_json, finds, fail in cases:
        desc = [f"{f['kind']} {f.get('host')} {f.get('roce_device')}" for f in finds]
        K.C = K.Checks()   # a tally of its own (ok() reports to K.C), its lines hidden
        try:
            with contextlib.redirect_stdout(sys.stdout if os.environ.get("CHECK_TRIO_VERBOSE") else io.StringIO()):
                nic_delay_verdict("selftest nic_delay", links_json, finds, desc)
            failed = K.C.failed
        finally:
            K.C = real
        K.C.ok(f"selftest: nic_delay verdict: {label}: {'caught' if fail else 'passes'}", (failed > 0) == fail,
               f"{failed} checks failed")


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "selftest":
        selftest()
        print(f"check_trio.py selftest: {K.C.passed} passed, {K.C.failed} failed")
        return 1 if K.C.failed else 0
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    res = sys.argv[1]
    for g in GUESTS:
        ok(f"guest {g}: trio results present", os.path.isdir(os.path.join(res, g, "out", "trio")), "no out/trio")
    sel = selection()
    said = K.read(os.path.join(res, "a", "out", "trio", "only")).strip()
    ok("the guests ran the selection asked for (E2E_TRIO_ONLY)", set(x for x in said.split(",") if x) == sel,
       f"guests: {said!r}, asked: {sorted(sel)}")

    def want(scen):
        if not sel or sel & set(GROUPS[scen]):
            return True
        print(f"SKIP {scen}: not selected (E2E_TRIO_ONLY={','.join(sorted(sel))})")
        return False
    if want("links_clean"):
        links(res, "links_clean")
    if want("links_delay"):
        links(res, "links_delay", "delay")
    ne = NodeExporter()
    try:
        if want("stall_loss"):
            stall(res, "stall_loss", ne)
            no_root("stall_loss (recovered)", glob.glob(os.path.join(res, "*", "out", "trio", "stall_loss", "ibcast",
                                                                    "telemetry", "*.json")))
        if want("stall_stop"):
            stall_stop(res, "stall_stop", ne)
        if want("dead_path"):
            dead_path(res, "dead_path", ne)
        if want("dead_tool"):
            dead_tool(res, "dead_tool")
    finally:
        ne.close()
    if want("frozen"):
        frozen(res, "frozen")
    for scen in ["clean_2", "clean_3"]:
        if want(scen):
            links(res, scen, sbw=False)
    if want("oneway"):
        links(res, "oneway", "oneway", sbw=False)
    if want("host_delay"):
        links(res, "host_delay", "host_delay", sbw=False)
    if want("nic_delay"):
        links(res, "nic_delay", "nic_delay", sbw=False)
    print(f"check_trio.py: {K.C.passed} passed, {K.C.failed} failed")
    return 1 if K.C.failed else 0


if __name__ == "__main__":
    sys.exit(main())
