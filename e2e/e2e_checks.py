"""What the e2e checkers share: expected counts that may be ranges (R), a PASS/FAIL tally
(Checks, and the one instance C every check reports to), reading a run's files, the rxe counter
deltas, the packet arithmetic of an MTU-1024 rxe link, and the hardware-counter vocabulary
(schema/hw_counters.json, generated from format/src/vocab.rs: the keys of hw_counters in file
order and where each driver reads them). Used by check.py, check_trio.py, check_tools.py and by
the programs' models in tool_models.py.
"""
import contextlib
import json
import math
import os
import re

MTU = 1024

HW_VOCABULARY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "schema",
                             "hw_counters.json")
with open(HW_VOCABULARY) as _f:
    HW_COUNTERS = json.load(_f)["counters"]
# The keys of a device's hw_counters, in file order.
HW_KEYS = [c["name"] for c in HW_COUNTERS]


def hw_keys_of(version):
    """The keys of hw_counters a file of `version` has (the vocabulary's keys of that version
    or older), in file order; every key for a version that is not a number."""
    if not isinstance(version, int):
        return HW_KEYS
    return [c["name"] for c in HW_COUNTERS if c["since"] <= version]
# Where the guests' dumps of a source are: rxe's port hw_counters, the netdev's statistics.
DUMP_OF_SOURCE = {"hw_counters": "rxe", "net_statistics": "netdev"}


def hw_key(name):
    """A hardware-counter key a check names; a KeyError unless the vocabulary has it."""
    if name not in HW_KEYS:
        raise KeyError(f"{name} is not a hw_counters key of {HW_VOCABULARY}")
    return name


def driver_source(key, driver="rxe"):
    """(source, raw name) that `driver` reads `key` from (its first alternative, one term),
    or None where the driver does not expose it (the file has -1)."""
    alts = next(c for c in HW_COUNTERS if c["name"] == hw_key(key))["sources"][driver]
    if not alts:
        return None
    if len(alts[0]) != 1:
        raise ValueError(f"{key}: {driver} sums {len(alts[0])} raw counters")
    return alts[0][0]["src"], alts[0][0]["name"]


def rxe_raw(key):
    """The guest dump ("rxe" or "netdev") and the raw counter rxe's `key` is the delta of, or
    None where rxe does not expose it."""
    s = driver_source(key, "rxe")
    return None if s is None else (DUMP_OF_SOURCE[s[0]], s[1])


def pk(n):
    """Packets of one request of n bytes (a 0-byte request is one packet)."""
    return max(1, math.ceil(n / MTU))


class R:
    """An expected count: exact (lo == hi), or a range with the reason it is not exact.
    hi None: no upper bound (said why)."""

    def __init__(self, lo, hi="same", why=""):
        self.lo, self.hi, self.why = lo, (lo if hi == "same" else hi), why

    def ok(self, v):
        return isinstance(v, int) and v >= self.lo and (self.hi is None or v <= self.hi)

    def __add__(self, o):
        o = o if isinstance(o, R) else R(o)
        hi = None if self.hi is None or o.hi is None else self.hi + o.hi
        whys = [w for w in dict.fromkeys((self.why, o.why)) if w]
        return R(self.lo + o.lo, hi, "; ".join(whys))

    def __repr__(self):
        if self.hi == self.lo:
            return str(self.lo)
        return f"[{self.lo}, {'inf' if self.hi is None else self.hi}] ({self.why})"


def E(v):
    return v if isinstance(v, R) else R(v)


class Checks:
    def __init__(self, quiet=False):
        self.passed = self.failed = self.skipped = 0
        self.quiet = quiet

    @contextlib.contextmanager
    def scoped(self, quiet=True):
        """A fresh tally for a nested run (the self-test's doctored copies): yields this
        object with zero counts; the outer counts come back afterwards."""
        saved = (self.passed, self.failed, self.skipped, self.quiet)
        self.passed = self.failed = self.skipped = 0
        self.quiet = quiet
        try:
            yield self
        finally:
            self.passed, self.failed, self.skipped, self.quiet = saved

    def ok(self, name, cond, why=""):
        if cond:
            self.passed += 1
            if not self.quiet:
                print(f"PASS {name}")
        else:
            self.failed += 1
            if not self.quiet:
                print(f"FAIL {name}: {why}")
        return cond

    def skip(self, name, why):
        """A check that cannot be made on this run, for a reason outside what is tested (a
        third-party program's own race): neither passed nor failed, printed and counted."""
        self.skipped += 1
        if not self.quiet:
            print(f"SKIP {name}: {why}")

    def count(self, name, got, want):
        want = E(want)
        return self.ok(f"{name} = {want!r}", want.ok(got), f"got {got!r}")


C = Checks()


def read(path, default=""):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return default


def kv(path):
    out = {}
    for line in read(path).splitlines():
        parts = line.split()
        if len(parts) == 2 and re.fullmatch(r"-?\d+", parts[1]):
            out[parts[0]] = int(parts[1])
    return out


def hw_delta(d):
    b, a = kv(os.path.join(d, "rxe_before.txt")), kv(os.path.join(d, "rxe_after.txt"))
    return {k: a[k] - b[k] for k in a if k in b and k != "lifespan"}


def opts(argv, spec):
    """Minimal getopt for the programs' options: spec maps an option to (key, takes_value).
    Returns (dict, positional)."""
    o, pos, i = {}, [], 0
    while i < len(argv):
        a = argv[i]
        if a in spec:
            key, val = spec[a]
            if val:
                o[key] = argv[i + 1]
                i += 1
            else:
                o[key] = True
        elif not a.startswith("-"):
            pos.append(a)
        i += 1
    return o, pos

