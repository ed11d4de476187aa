"""Reads the tool's Parquet tables back with DuckDB and with pyarrow, and compares them with
`summary --json` of the same rank files.

usage:
  parquet_check.py check DIR SUMMARIES_JSON PARTITIONED(0|1)
      SUMMARIES_JSON maps each job id to {"summary": its `summary --json`, "links": its
      `links --json`, "dir": its directory of rank files}. Prints one "<what> ok"
      line per comparison; exit 1 on the first disagreement.
  parquet_check.py example README DIR
      Runs the README's DuckDB worked example over DIR (its 'telemetry/' paths pointed at DIR)
      and prints its rows as JSON lines.
"""
import json
import math
import os
import sys

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

TABLES = ["ranks", "devices", "channels", "qps", "hw_counters", "hw_samples", "histograms", "links", "stalls"]
SCHEMA_VERSION = 1


def fail(msg):
    print("FAIL", msg)
    sys.exit(1)


def same(what, got, want):
    if isinstance(want, float) or isinstance(got, float):
        ok = (got is None and want is None) or (
            got is not None and want is not None and math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-6))
    else:
        ok = got == want
    if not ok:
        fail(f"{what}: parquet {got!r}, summary {want!r}")


def check(out_dir, summaries_path, partitioned):
    summaries = json.load(open(summaries_path))
    con = duckdb.connect()
    for t in TABLES:
        if partitioned:
            src = (f"read_parquet('{out_dir}/{t}/**/*.parquet', hive_partitioning = true, "
                   "hive_types_autocast = false)")
        else:
            src = f"read_parquet('{out_dir}/{t}.parquet')"
        con.execute(f"create view {t} as select * from {src}")

    # Every table: DuckDB and pyarrow read the same rows; the schema version is in the
    # column and in the file metadata; the types are the plain ones.
    for t in TABLES:
        n_duck = con.execute(f"select count(*) from {t}").fetchall()[0][0]
        if partitioned:
            table = ds.dataset(os.path.join(out_dir, t), format="parquet", partitioning="hive").to_table()
            files = [f for f in ds.dataset(os.path.join(out_dir, t), format="parquet", partitioning="hive").files]
        else:
            table = pq.read_table(os.path.join(out_dir, f"{t}.parquet"))
            files = [os.path.join(out_dir, f"{t}.parquet")]
        same(f"{t} rows (duckdb vs pyarrow)", table.num_rows, n_duck)
        for f in files:
            md = pq.read_metadata(f).metadata or {}
            same(f"{t} metadata schema version", md.get(b"rccl_telemetry.schema_version"), str(SCHEMA_VERSION).encode())
            same(f"{t} metadata table", md.get(b"rccl_telemetry.table"), t.encode())
        versions = set(table.column("schema_version").to_pylist()) if table.num_rows else set()
        if table.num_rows and versions != {SCHEMA_VERSION}:
            fail(f"{t}: schema_version {versions}")
        for field in table.schema:
            ty = field.type
            if pa.types.is_unsigned_integer(ty):
                fail(f"{t}.{field.name}: unsigned {ty}")
            if pa.types.is_timestamp(ty) and (ty.unit != "us" or ty.tz not in ("UTC", "+00:00")):
                fail(f"{t}.{field.name}: {ty}")
            allowed = (pa.types.is_boolean(ty) or pa.types.is_int32(ty) or pa.types.is_int64(ty) or pa.types.is_float64(ty)
                       or pa.types.is_string(ty) or pa.types.is_large_string(ty) or pa.types.is_timestamp(ty)
                       or pa.types.is_dictionary(ty))
            if not allowed:
                fail(f"{t}.{field.name}: type {ty}")
        # pyarrow's own sums agree with DuckDB's on every integer column.
        for field in table.schema:
            if pa.types.is_int64(field.type) and field.name not in ("pid",):
                # In Python integers: pyarrow's sum wraps at 2^63 (nanosecond timestamps).
                vals = [v for v in table.column(field.name).to_pylist() if v is not None]
                s_arrow = sum(vals) if vals else None
                s_duck = con.execute(f'select sum("{field.name}") from {t}').fetchall()[0][0]
                same(f"{t}.{field.name} sum (duckdb vs pyarrow)", s_arrow, None if s_duck is None else int(s_duck))
        print(f"{t} read by duckdb and pyarrow: {n_duck} rows ok")

    jobs = [r[0] for r in con.execute("select distinct job from ranks order by 1").fetchall()]
    same("jobs", jobs, sorted(summaries))
    for job, j in sorted(summaries.items()):
        s, links = j["summary"], j["links"]
        q = lambda sql: con.execute(sql, [job]).fetchall()
        one = lambda sql: q(sql)[0][0]
        same(f"{job} ranks", one("select count(*) from ranks where job = ?"), s["files"])
        same(f"{job} hosts", one("select count(distinct host) from ranks where job = ?"), s["hosts"])
        same(f"{job} devices registered", one("select count(*) from devices where job = ?"), s["devices_registered"])
        same(f"{job} devices used", one("select count(*) from devices where job = ? and used"), s["devices_used"])
        for k in ["tx_bytes", "rx_bytes", "num_wqe_sent", "num_wqe_completed", "num_cq_errors", "num_qp_untracked", "num_slot_miss"]:
            got = one(f"select coalesce(sum({k}), 0) from devices where job = ? and used")
            same(f"{job} devices {k}", int(got), s[k])
        for k in ["num_wqe_sent", "num_wqe_completed", "num_slot_miss"]:
            got = one(f"""select coalesce(sum(c.{k}), 0) from channels c join devices d using (job, host, pid, device_id)
                          where c.job = ? and d.used""")
            same(f"{job} channels {k}", int(got), s[k])
        same(f"{job} qps rows", one("select count(*) from qps where job = ?"),
             int(one("select coalesce(sum(num_qps), 0) from channels where job = ?")))
        same(f"{job} hw_samples", one("select count(distinct (host, pid, device_id, timestamp_ns)) from hw_samples where job = ?"),
             s["hw_samples"])
        lin = sum(l["latency"]["samples"] for l in s["latency"])
        got = one("""select coalesce(sum(h.count), 0) from histograms h join devices d using (job, host, pid, device_id)
                     where h.job = ? and d.used and h.level = 'device' and h.scale = 'linear'""")
        same(f"{job} device histogram samples", int(got), lin)
        if s.get("log_latency"):
            got = one("""select coalesce(sum(h.count), 0) from histograms h join devices d using (job, host, pid, device_id)
                         where h.job = ? and d.used and h.level = 'device' and h.scale = 'log'""")
            same(f"{job} device log histogram samples", int(got), s["log_latency"]["latency"]["samples"])
        # Per device, as summary --json lists the used ones.
        rows = {(r[0], r[1], r[2]): r[3:] for r in q(
            """select host, pid, device_id, tx_bytes, rx_bytes, num_wqe_sent, num_wqe_completed, latency_samples,
                      latency_p99_ns, log_latency_p99_ns, latency_min_ns, latency_max_ns
               from devices where job = ?""")}
        for d in s["devices"]:
            key = (d["host"], d["pid"], d["device_id"])
            if key not in rows:
                fail(f"{job} device {key} missing")
            r = rows[key]
            for i, k in enumerate(["tx_bytes", "rx_bytes", "num_wqe_sent", "num_wqe_completed"]):
                same(f"{job} {key} {k}", r[i], d[k])
            same(f"{job} {key} latency samples", r[4], d["latency"]["samples"])
            p99 = next((p["estimate_ns"] for p in d["latency"]["percentiles"] if abs(p["q"] - 0.99) < 1e-12), None)
            same(f"{job} {key} p99", r[5], p99)
            if "log_latency" in d:
                lp99 = next((p["estimate_ns"] for p in d["log_latency"]["percentiles"] if abs(p["q"] - 0.99) < 1e-12), None)
                same(f"{job} {key} log p99", r[6], lp99)
            same(f"{job} {key} min", r[7], d["latency"]["min_ns"])
            same(f"{job} {key} max", r[8], d["latency"]["max_ns"])
        print(f"{job}: {len(s['devices'])} devices agree with summary --json ok")
        # Hardware counters: -1 is NULL (never 0, never negative); totals over the used devices
        # and the devices where a counter is unavailable agree with the summary.
        same(f"{job} no negative hw value", one("select count(*) from hw_counters where job = ? and value < 0"), 0)
        same(f"{job} no negative sample", one("select count(*) from hw_samples where job = ? and value < 0"), 0)
        per = {r[0]: r[1:] for r in q(
            """with dev as (
                 select h.counter, h.host, h.pid, h.device_id, sum(h.value) as total, count(h.value) as avail
                 from hw_counters h join devices d using (job, host, pid, device_id)
                 where h.job = ? and d.used group by all)
               select counter, sum(total) filter (where avail > 0), count(*) filter (where avail = 0)
               from dev group by all""")}
        for h in s["hw_counters_moved"]:
            got = per.get(h["name"])
            if got is None:
                fail(f"{job} hw counter {h['name']} missing")
            same(f"{job} hw {h['name']} total", int(got[0]), h["total"])
            same(f"{job} hw {h['name']} devices unavailable", got[1], h["devices_unavailable"])
        print(f"{job}: {len(s['hw_counters_moved'])} hardware counters agree ok")
        # Wall-clock times: the timestamp is the text to the microsecond; none for in-tree files.
        bad = one("""select count(*) from ranks where job = ? and source_format <> 'intree-1.0'
                     and strftime(start_time at time zone 'UTC', '%Y-%m-%dT%H:%M:%S.%f') <> left(start_time_text, 26)""")
        same(f"{job} start_time matches its text", bad, 0)
        same(f"{job} in-tree times are null",
             one("select count(*) from ranks where job = ? and source_format = 'intree-1.0' and start_time is not null"), 0)
        print(f"{job}: timestamps ok")
        # Links, as `links --json` joins them; stalls, as the rank files list them.
        same(f"{job} links", one("select count(*) from links where job = ?"), len(links["links"]))
        for k in ["qps", "wrs_sent", "wrs_completed", "wrs_received_by_dst", "tx_bytes_est", "qps_stalled"]:
            got = one(f"select sum({k}) from links where job = ?")
            want = sum(l[k] for l in links["links"] if l.get(k) is not None) if any(l.get(k) is not None for l in links["links"]) else None
            same(f"{job} links {k}", None if got is None else int(got), want)
        p99 = {(r[0], r[1], r[2], r[3]): r[4] for r in q(
            "select host, roce_device, dst_host, dst_roce_device, latency_p99_ns from links where job = ?")}
        for l in links["links"]:
            key = (l["src"]["host"], l["src"]["device"], l["dst"]["host"], l["dst"]["device"])
            same(f"{job} link {key} p99", p99.get(key), (l.get("latency") or {}).get("p99_ns"))
        stalled = 0
        for name in os.listdir(j["dir"]):
            if name.startswith("rccl_telemetry_") and name.endswith(".json"):
                f = json.load(open(os.path.join(j["dir"], name)))
                for d in f.get("devices", []):
                    for c in d.get("channels", []):
                        for qp in c.get("queue_pairs", []):
                            stalled += qp.get("stalled") is True or (qp.get("longest_stall_ms") or 0) > 0
        same(f"{job} stalls", one("select count(*) from stalls where job = ?"), stalled)
        print(f"{job}: {len(links['links'])} links and {stalled} stalled QPs ok")
    print("all ok")


def example(readme, out_dir):
    text = open(readme).read()
    marker = "<!-- parquet-worked-example-duckdb -->"
    at = text.index(marker)
    start = text.index("```sql\n", at) + len("```sql\n")
    sql = text[start:text.index("```", start)]
    sql = sql.replace("'telemetry/", f"'{out_dir}/")
    cur = duckdb.connect().execute(sql)
    names = [d[0] for d in cur.description]
    for row in cur.fetchall():
        print(json.dumps(dict(zip(names, row)), default=str))


if __name__ == "__main__":
    if sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3], sys.argv[4] == "1")
    elif sys.argv[1] == "example":
        example(sys.argv[2], sys.argv[3])
    else:
        fail(f"unknown mode {sys.argv[1]}")
