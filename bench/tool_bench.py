#!/usr/bin/env python3
"""Times the analysis tool (tools/rccl-telemetry) on generated runs of growing size.

For each rank count: `rccl-telemetry generate` writes a run under OUT, then each command runs
once on it as a child process; its wall time, CPU time (user + sys) and peak resident memory
(ru_maxrss of that child alone, from wait4) are recorded, with the size of what it wrote. The
run is deleted before the next size, so at most one generated run is on disk at a time.
Writes the figures as JSON (with the commit and the date) and prints a table and, per command,
the ratio from each size to the next. Kept in Python because GNU time is not installed and
wait4 gives each child's own peak RSS.

Beside our reading of each run, DuckDB's `read_json` of the same files with one sum over the
devices (when the duckdb module is installed), timed the same way in a child.

Then runs with links (format version 3, `generate --peers --qps-per-peer 1 --topology T`),
RT_BENCH_LINKS (default "rail:1024 rail:4096 rail:16384 ring:16384 tree:16384 alltoall:1024";
empty: none): `outliers`, `links`, `stalls` and `summary` on each, and how the rail-shaped
runs grow.

Then `import` of one NCCL debug log of RT_BENCH_IMPORT_MIB MiB (default 1024; 0: none), all
ranks interleaved, in MB/s per CPU second (the target is 100).

usage: tool_bench.py TOOL OUT RESULTS.json RANKS [RANKS ...]
"""

import datetime
import json
import os
import shutil
import subprocess
import sys
import time


def du(path):
    """Bytes under path (a file or a directory tree)."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


def timed(argv):
    """Runs argv with its output discarded; returns (exit code, wall s, cpu s, peak RSS KiB)."""
    start = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - start
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def git(*args):
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


DUCKDB_SUM = """
import sys, duckdb
con = duckdb.connect()
con.execute("SET threads TO %d" % int(sys.argv[2]))
q = ("SELECT sum(d.tx_bytes) FROM (SELECT unnest(devices) AS d FROM read_json(?, "
     "maximum_object_size=1073741824, union_by_name=true))")
print(con.execute(q, [sys.argv[1]]).fetchone()[0])
"""


def duckdb_row(run):
    """DuckDB's read_json of the run's files with one sum, in a child (None without duckdb)."""
    try:
        import duckdb  # noqa: F401
    except ImportError:
        return None
    glob = os.path.join(run, "rccl_telemetry_*.json")
    rc, wall, cpu, rss = timed([sys.executable, "-c", DUCKDB_SUM, glob, str(os.cpu_count() or 1)])
    return {"command": "duckdb read_json + sum(tx_bytes)", "exit": rc, "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 3), "peak_rss_kib": rss}


def links_runs(tool, out, spec):
    """The version-3 runs: (topology, ranks) each generated, timed and deleted in turn."""
    runs = []
    failed = False
    for item in spec.split():
        topo, _, n = item.partition(":")
        ranks = int(n)
        run = os.path.join(out, f"links-{topo}{ranks}")
        shutil.rmtree(run, ignore_errors=True)
        rc, wall, cpu, rss = timed([tool, "generate", "--peers", "--qps-per-peer", "1", "--topology", topo,
                                    "--ranks", str(ranks), run])
        if rc != 0:
            print(f"tool_bench: generate --peers --topology {topo} --ranks {ranks} failed (exit {rc})",
                  file=sys.stderr)
            return runs, True
        entry = {"topology": topo, "ranks": ranks, "input_bytes": du(run),
                 "generate": {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "peak_rss_kib": rss},
                 "commands": []}
        for name, args in [("outliers", ["outliers"]), ("links", ["links"]), ("stalls", ["stalls"]),
                           ("summary", ["summary"])]:
            rc, wall, cpu, rss = timed([tool, *args, run])
            ok = rc in (0, 1)
            failed |= not ok
            entry["commands"].append({"command": name, "exit": rc, "wall_s": round(wall, 3),
                                      "cpu_s": round(cpu, 3), "peak_rss_kib": rss})
            print(f"{topo:>8} {ranks:>6} ranks  {name:<9} exit {rc}  wall {wall:7.2f} s  cpu {cpu:7.2f} s  "
                  f"peak RSS {rss / 1024:7.1f} MiB  ({entry['input_bytes'] / 1e6:.0f} MB of files)", flush=True)
        runs.append(entry)
        shutil.rmtree(run, ignore_errors=True)
    return runs, failed


def import_run(tool, out, mib):
    """`import` of one interleaved log of about `mib` MiB: `generate --as-nccl-log` writes 64
    ranks' logs (with skipped noise lines, as real logs have), whose lines are interleaved into
    one file and repeated to the size; MB/s per CPU second is the figure (target: 100)."""
    if mib <= 0:
        return None, False
    logs = os.path.join(out, "import-logs")
    big = os.path.join(out, "import-all.log")
    dest = os.path.join(out, "import-out")
    for p in (logs, dest):
        shutil.rmtree(p, ignore_errors=True)
    rc, _, _, _ = timed([tool, "generate", "--as-nccl-log", "--ranks", "64", "--ranks-per-host", "8",
                         "--plant", "slow_link,cq_errors", "--log-filler", "2000", logs])
    if rc != 0:
        print(f"tool_bench: generate --as-nccl-log failed (exit {rc})", file=sys.stderr)
        return None, True
    texts = []
    for name in sorted(os.listdir(logs)):
        if name.endswith(".log"):
            with open(os.path.join(logs, name), "rb") as f:
                texts.append(f.read().splitlines(keepends=True))
    chunk = bytearray()
    for i in range(max(len(t) for t in texts)):
        for t in texts:
            if i < len(t):
                chunk += t[i]
    with open(big, "wb") as f:
        written = 0
        while written < mib << 20:
            f.write(chunk)
            written += len(chunk)
    rc, wall, cpu, rss = timed([tool, "import", "-o", dest, big])
    entry = {"command": "import", "exit": rc, "input_bytes": written, "wall_s": round(wall, 3),
             "cpu_s": round(cpu, 3), "peak_rss_kib": rss,
             "mb_per_cpu_s": round(written / 1e6 / max(cpu, 1e-3), 1)}
    print(f"import {written / 1e6:.0f} MB interleaved log  exit {rc}  wall {wall:7.2f} s  cpu {cpu:7.2f} s  "
          f"{entry['mb_per_cpu_s']} MB/s per core  peak RSS {rss / 1024:7.1f} MiB", flush=True)
    for p in (logs, dest):
        shutil.rmtree(p, ignore_errors=True)
    os.remove(big)
    return entry, rc != 0


def growth_of(runs):
    """Per command, the ratio of CPU time and peak RSS from each run to the next."""
    growth = {}
    for a, b in zip(runs, runs[1:]):
        key = f"{a['ranks']}->{b['ranks']}"
        growth[key] = {}
        for ca, cb in zip(a["commands"], b["commands"]):
            growth[key][ca["command"]] = {
                "wall": round(cb["wall_s"] / max(ca["wall_s"], 1e-3), 2),
                "cpu": round(cb["cpu_s"] / max(ca["cpu_s"], 1e-3), 2),
                "peak_rss": round(cb["peak_rss_kib"] / max(ca["peak_rss_kib"], 1), 2),
            }
        print(f"growth {key}: " + ", ".join(
            f"{c} cpu x{g['cpu']} rss x{g['peak_rss']}" for c, g in growth[key].items()))
    return growth


def main():
    if len(sys.argv) < 5:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    tool, out, results = sys.argv[1], sys.argv[2], sys.argv[3]
    try:
        sizes = [int(a) for a in sys.argv[4:]]
    except ValueError:
        print("tool_bench: RANKS must be whole numbers", file=sys.stderr)
        return 2
    os.makedirs(out, exist_ok=True)
    doc = {
        "what": "rccl-telemetry analysis tool on generated runs (generate --samples 20 --plant all)",
        "commit": git("rev-parse", "--short=12", "HEAD"),
        "dirty": git("status", "--porcelain", "--untracked-files=no") != "",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cpus": os.cpu_count(),
        "loadavg_at_start": list(os.getloadavg()),
        "note": "one run of each command, wall and cpu seconds; peak_rss_kib is the child's own "
        "ru_maxrss; the machine is shared, so wall times are noisy",
        "runs": [],
    }
    failed = False
    for ranks in sizes:
        run = os.path.join(out, f"run{ranks}")
        shutil.rmtree(run, ignore_errors=True)
        rc, wall, cpu, rss = timed([tool, "generate", "--ranks", str(ranks), "--samples", "20",
                                    "--plant", "all", run])
        if rc != 0:
            print(f"tool_bench: generate --ranks {ranks} failed (exit {rc})", file=sys.stderr)
            return 1
        entry = {"ranks": ranks, "input_bytes": du(run),
                 "input_files": len([f for f in os.listdir(run) if f.startswith("rccl_telemetry_")]),
                 "generate": {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "peak_rss_kib": rss},
                 "commands": []}
        report = os.path.join(out, f"report{ranks}.html")
        parquet = os.path.join(out, f"parquet{ranks}")
        commands = [
            ("summary", ["summary"], None),
            ("summary --json", ["summary", "--json"], None),
            ("outliers", ["outliers"], None),
            ("check", ["check"], None),
            ("report", ["report", "-o", report], report),
            ("export parquet", ["export", "--format", "parquet", "-o", parquet], parquet),
        ]
        for name, args, written in commands:
            rc, wall, cpu, rss = timed([tool, *args, run])
            # outliers and check exit 1 when they find something, report when a finding is
            # critical (every anomaly is planted, CQ errors among them).
            ok = rc == 0 or (rc == 1 and name in ("outliers", "check", "report"))
            failed |= not ok
            row = {"command": name, "exit": rc, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                   "peak_rss_kib": rss}
            if written and os.path.exists(written):
                row["output_bytes"] = du(written)
            entry["commands"].append(row)
            print(f"{ranks:>6} ranks  {name:<16} exit {rc}  wall {wall:7.2f} s  cpu {cpu:7.2f} s  "
                  f"peak RSS {rss / 1024:7.1f} MiB"
                  + (f"  wrote {row['output_bytes'] / 1e6:.1f} MB" if "output_bytes" in row else ""),
                  flush=True)
        duck = duckdb_row(run)
        if duck:
            entry["duckdb"] = duck
            print(f"{ranks:>6} ranks  {duck['command']}: exit {duck['exit']}  wall {duck['wall_s']:7.2f} s  "
                  f"cpu {duck['cpu_s']:7.2f} s  peak RSS {duck['peak_rss_kib'] / 1024:7.1f} MiB", flush=True)
            failed |= duck["exit"] != 0
        browser = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
        if browser and os.path.exists(report):
            # Loading and painting the page headless (browser start included), once.
            profile = os.path.join(out, "chromium-profile")
            shot = os.path.join(out, "report.png")
            rc, wall, cpu, rss = timed([browser, "--headless", "--no-sandbox", "--disable-gpu",
                                        "--host-resolver-rules=MAP * ~NOTFOUND",
                                        f"--user-data-dir={profile}", "--window-size=1400,6000",
                                        f"--screenshot={shot}", "file://" + os.path.abspath(report)])
            entry["report_in_chromium"] = {"exit": rc, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                                           "peak_rss_kib": rss, "screenshot": os.path.exists(shot)}
            print(f"{ranks:>6} ranks  report in {browser}: exit {rc}  wall {wall:7.2f} s  cpu {cpu:7.2f} s"
                  "  (cpu: the browser and the processes it reaped)", flush=True)
            shutil.rmtree(profile, ignore_errors=True)
            if os.path.exists(shot):
                os.remove(shot)
        doc["runs"].append(entry)
        shutil.rmtree(run, ignore_errors=True)
        if os.path.exists(report):
            os.remove(report)
        shutil.rmtree(parquet, ignore_errors=True)
    # How each grows from one size to the next.
    doc["growth"] = growth_of(doc["runs"])
    spec = os.environ.get("RT_BENCH_LINKS", "rail:1024 rail:4096 rail:16384 ring:16384 tree:16384 alltoall:1024")
    doc["links_runs"], lfailed = links_runs(tool, out, spec)
    failed |= lfailed
    doc["links_growth_rail"] = growth_of([r for r in doc["links_runs"] if r["topology"] == "rail"])
    doc["import"], ifailed = import_run(tool, out, int(os.environ.get("RT_BENCH_IMPORT_MIB", "1024")))
    failed |= ifailed
    with open(results, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {results}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
