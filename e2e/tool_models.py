"""A model of each third-party verbs program the e2e runs (ibv_rc_pingpong, perftest's
ib_{write,send,read}_bw, rping, ucx_perftest): from its own options and its own output, what
each side did at the verbs calls and what rxe's counters must have moved. Kept apart from the
checker (check_tools.py) so a new program is one function and one MODELS entry here.
"""
import math
import re

from e2e_checks import C, E, R, opts, pk

# --- per-side expectation ----------------------------------------------------------------

def side(**kw):
    """What one process did at the verbs calls. Keys (all counts, int or R):
    send, write, write_imm, read: send WRs posted by opcode; recv: receive WRs posted to
    its QPs; srq_recv: to SRQs; send_cqe / recv_cqe: successful completions; errors:
    error completions; retired: unsignalled WRs retired by a later signalled completion;
    tx / rx: bytes; polls: poll calls. hw_*: this process's share of the rxe counters."""
    d = dict(send=0, write=0, write_imm=0, read=0, recv=0, srq_recv=R(0), send_cqe=0, recv_cqe=0, errors=0,
             retired=0, tx=0, rx=0, polls=R(0, None, "busy polling"), hw_sends=0, hw_recvs=0, hw_pkts=0)
    d.update(kw)
    return {k: E(v) for k, v in d.items()}


def pingpong(argv, out, role):
    o, _ = opts(argv, {"-n": ("n", 1), "-s": ("s", 1), "-r": ("r", 1), "-e": ("e", 0), "-N": ("N", 0),
                       "-p": ("p", 1), "-d": ("d", 1), "-g": ("g", 1)})
    n, s, r = int(o.get("n", 1000)), int(o.get("s", 4096)), int(o.get("r", 500))
    m = re.search(r"^(\d+) bytes in .*\n(\d+) iters in", out, re.M)
    if not C.ok(f"  {role} output reports {n} iters of {s} bytes (x2 directions)",
                m is not None and int(m.group(1)) == 2 * n * s and int(m.group(2)) == n,
                f"output: {m.group(0) if m else out[-200:]!r}"):
        return None
    # receives: rx_depth at start, refilled to rx_depth whenever at most one is left
    posted, outs = r, r
    for _ in range(n):
        outs -= 1
        if outs <= 1:
            posted += r - outs
            outs = r
    # polls: 2n completions, at most 2 per ibv_poll_cq call; with -e one poll per CQ event,
    # and an event needs a completion since the last re-arm (<= 2n); without -e it busy-polls.
    polls = R(n, 2 * n, "-e: one poll per CQ event") if o.get("e") else R(n, None, "busy polling, 2 WCs per call")
    return side(send=n, recv=posted, send_cqe=n, recv_cqe=n, tx=n * s, rx=n * s, polls=polls,
                hw_sends=n, hw_recvs=n, hw_pkts=n * pk(s) + n)  # own SENDs + an ACK per SEND received


def perftest(verb):
    def model(argv, out, role):
        o, pos = opts(argv, {"-n": ("n", 1), "-s": ("s", 1), "-Q": ("Q", 1), "-d": ("d", 1), "-x": ("x", 1),
                             "-p": ("p", 1), "-F": ("F", 0), "-t": ("t", 1), "-r": ("r", 1)})
        n, s = int(o.get("n", 1000)), int(o.get("s", 65536))
        m = re.search(r"^\s*(\d+)\s+(\d+)\s+[\d.]+\s+[\d.]+", out, re.M)
        if not C.ok(f"  {role} output reports {n} iterations of {s} bytes", m is not None and
                    (int(m.group(1)), int(m.group(2))) == (s, n), f"results line: {m.group(0) if m else None!r}"):
            return None
        tx_depth = min(int(o.get("t", 128)), n)
        cq_mod = int(o["Q"]) if "Q" in o else (1 if s > 8192 else 100)
        cq_mod = min(cq_mod, tx_depth)
        m = re.search(r"CQ Moderation\s*:\s*(\d+)", out)
        C.ok(f"  {role} output states CQ moderation {cq_mod}", m is not None and int(m.group(1)) == cq_mod,
             f"{m.group(0) if m else 'no CQ Moderation line'}")
        if pos:  # client: posts every WR; WR s is signalled iff s % C == C-1 or it is the last
            sig = n if cq_mod == 1 else sum(1 for i in range(n) if i % cq_mod == cq_mod - 1 or i == n - 1)
            polls = R(math.ceil(sig / 16), None, "busy polling, 16 WCs per call")
            op = {"write": dict(write=n), "send": dict(send=n), "read": dict(read=n)}[verb]
            hw = {"write": dict(hw_pkts=n * pk(s)), "send": dict(hw_pkts=n * pk(s), hw_sends=n),
                  "read": dict(hw_pkts=n)}[verb]  # read requests are one packet each
            return side(send_cqe=sig, retired=n - sig, tx=n * s, polls=polls, **op, **hw)
        if verb == "send":  # server: rx_depth = min(512, n) up front, reposted until n in total
            return side(recv=max(n, min(512, n)), recv_cqe=n, rx=n * s, hw_recvs=n, hw_pkts=n,
                        polls=R(math.ceil(n / 16), None, "busy polling, 16 WCs per call"))
        # write/read server: no WR, never polls; sends the ACKs / read responses
        return side(polls=0, hw_pkts=n if verb == "write" else n * pk(s))
    return model


RPING_INFO = 16  # struct rping_rdma_info: buf (8) rkey (4) size (4)


def rping(argv, out, role):
    o, _ = opts(argv, {"-C": ("C", 1), "-S": ("S", 1), "-a": ("a", 1), "-p": ("p", 1), "-s": ("srv", 0),
                       "-c": ("cli", 0), "-v": ("v", 0)})
    if role == "client":
        c, s = int(o.get("C", 0)), int(o.get("S", 64))
        pings = len(re.findall(r"^ping data: rdma-ping-\d+", out, re.M))
        if not C.ok(f"  client printed {c} pings", c > 0 and pings == c, f"{pings} 'ping data' lines for -C {c}"):
            return None
        rping.last = (c, s)
    c, s = getattr(rping, "last", (0, 0))
    if role == "server" and not c:
        return None
    flush = R(0, 1, "the receive left posted at disconnect may be polled as a flush error")
    # The CM exchange goes through the kernel's GSI QP, which no user-space wrapper sees:
    # the client sends REQ, RTU and DREQ (it disconnects first) and receives REP and DREP.
    cm_out, cm_in = (3, 2) if role == "client" else (2, 3)
    if role == "client":   # per ping: SEND start adv, SEND write adv; 2 receives (go-aheads)
        comps = 4 * c
        return side(send=2 * c, recv=2 * c + 1, send_cqe=2 * c, recv_cqe=2 * c, errors=flush,
                    tx=2 * c * RPING_INFO, rx=2 * c * RPING_INFO,
                    polls=R(comps + 1, 2 * comps + 2, "one poll per WC plus one empty poll per CQ event"),
                    hw_sends=2 * c + cm_out, hw_recvs=2 * c + cm_in,
                    hw_pkts=2 * c + 2 * c + c + c * pk(s) + cm_out)  # SENDs, their ACKs, WRITE ACK, READ response
    # server per ping: RDMA_READ of the client's buffer, SEND, RDMA_WRITE back, SEND
    comps = 6 * c
    return side(send=2 * c, read=c, write=c, recv=2 * c + 1, send_cqe=4 * c, recv_cqe=2 * c, errors=flush,
                tx=2 * c * RPING_INFO + 2 * c * s, rx=2 * c * RPING_INFO,
                polls=R(comps + 1, 2 * comps + 2, "one poll per WC plus one empty poll per CQ event"),
                hw_sends=2 * c + cm_out, hw_recvs=2 * c + cm_in,
                hw_pkts=2 * c + 2 * c + c + c * pk(s) + cm_out)  # SENDs, their ACKs, READ request, WRITE


def ucx(argv, out, role):
    o, pos = opts(argv, {"-n": ("n", 1), "-s": ("s", 1), "-t": ("t", 1), "-x": ("x", 1), "-d": ("d", 1),
                         "-D": ("D", 1), "-w": ("w", 1), "-p": ("p", 1)})
    if role == "client":
        n, s, w = int(o.get("n", 0)), int(o.get("s", 8)), int(o.get("w", 1 if "w" not in o else o["w"]))
        m = re.search(r"^Final:\s+(\d+)\s", out, re.M)
        if not C.ok(f"  client reports {n} iterations (Final)", m is not None and int(m.group(1)) == n,
                    f"{m.group(0) if m else 'no Final line'}"):
            return None
        C.ok("  client ran put_bw over rc_verbs without warm-up (-w 0), so counts follow -n",
             o.get("t") == "put_bw" and o.get("x") == "rc_verbs" and w == 0, str(o))
        ucx.last = (n, s)
        # put_bw ends with one more put that carries the final sequence number (measured:
        # n + 1 RDMA_WRITEs of the full size, 5 (n + 1) packets); allow one more for a flush.
        extra = R(0, 2, "ucx_perftest's final sequence-number put, and a flush")
        return side(write=R(n) + extra, send=R(0, 2, "UCX control SENDs, none seen over rc_verbs put_bw"),
                    send_cqe=R(1, n + 2, "UCX moderates its own signalling"),
                    retired=R(0, n + 2, "whatever UCX left unsignalled"),
                    tx=R(n * s, (n + 2) * s, "the final put carries a full message"),
                    srq_recv=R(0, None, "UCX pre-posts its SRQ as it sizes it (4095 here)"),
                    recv=R(0, None, "UCX's own"), recv_cqe=R(0, 2, "control messages only"),
                    rx=R(0, 2 * 64, "control messages only"), polls=R(1, None, "busy polling"), hw_sends=0,
                    hw_recvs=0, hw_pkts=R(n * pk(s)) + R(0, 2 * pk(s), "the final put, and a flush"))
    n, s = getattr(ucx, "last", (0, 0))
    if not n:
        return None
    # the server posts nothing for put_bw: the writes land in its memory, it ACKs them
    return side(recv=R(0, None, "UCX's own"), srq_recv=R(0, None, "UCX pre-posts its SRQ as it sizes it (4095 here)"),
                recv_cqe=R(0, 2, "control messages only"), rx=R(0, 2 * 64, "control messages only"),
                send=R(0, 2, "UCX control SENDs"), send_cqe=R(0, 2, "control SENDs"),
                write=R(0, 2, "UCX's own flush"), tx=R(0, 2 * 64, "control messages only"),
                polls=R(0, None, "busy polling"), hw_sends=0, hw_recvs=0,
                hw_pkts=R(n, n + 2, "an ACK per put, the final put's and a flush's"))


MODELS = {"ibv_rc_pingpong": pingpong, "ib_write_bw": perftest("write"), "ib_send_bw": perftest("send"),
          "ib_read_bw": perftest("read"), "rping": rping, "ucx_perftest": ucx}

