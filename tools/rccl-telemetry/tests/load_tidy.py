"""Loads the tool's tidy CSV and NDJSON with DuckDB as they are, and checks totals against the
rank files, which this script parses itself with the json module.

usage: load_tidy.py RUN_DIR CSV NDJSON
Exit 0 when every total agrees; prints what it compared.
"""
import glob
import json
import os
import sys

import duckdb

run_dir, csv_path, ndjson_path = sys.argv[1:4]
files = sorted(glob.glob(os.path.join(run_dir, "rccl_telemetry_*.json")))
ranks = [json.load(open(f)) for f in files]

expect = {
    "tx_bytes": sum(d["tx_bytes"] for r in ranks for d in r["devices"]),
    "rx_bytes": sum(d["rx_bytes"] for r in ranks for d in r["devices"]),
    "num_cq_errors": sum(d["num_cq_errors"] for r in ranks for d in r["devices"]),
    "qp_num_wqe_sent": sum(q["num_wqe_sent"] for r in ranks for d in r["devices"] for c in d["channels"] for q in c["queue_pairs"]),
    "channel_histogram": sum(sum(c["wqe_completion_histogram"]) for r in ranks for d in r["devices"] for c in d["channels"]),
    # -1 means "not available": the export leaves it empty, so it must not count.
    "hw_cnp_sent": sum(d["hw_counters"]["cnp_sent"] for r in ranks for d in r["devices"] if d["hw_counters"].get("cnp_sent", -1) >= 0),
    "hw_cnp_sent_na": sum(1 for r in ranks for d in r["devices"] if d["hw_counters"].get("cnp_sent", -1) < 0),
    "pfc_prio3": sum(d["hw_counters"]["pfc_rx_frames"][3] for r in ranks for d in r["devices"] if d["hw_counters"]["pfc_rx_frames"][3] >= 0),
    "samples": sum(len(s["counters"]) for r in ranks for s in r.get("hw_samples", [])),
}

QUERY = """
select
  sum(value) filter (where scope = 'device' and metric = 'tx_bytes') as tx_bytes,
  sum(value) filter (where scope = 'device' and metric = 'rx_bytes') as rx_bytes,
  sum(value) filter (where scope = 'device' and metric = 'num_cq_errors') as num_cq_errors,
  sum(value) filter (where scope = 'qp' and metric = 'num_wqe_sent') as qp_num_wqe_sent,
  sum(value) filter (where scope = 'channel' and metric = 'wqe_completion_histogram') as channel_histogram,
  sum(value) filter (where scope = 'hw' and metric = 'cnp_sent') as hw_cnp_sent,
  count(*) filter (where scope = 'hw' and metric = 'cnp_sent' and value is null) as hw_cnp_sent_na,
  sum(value) filter (where scope = 'hw' and metric = 'pfc_rx_frames' and "index" = 3) as pfc_prio3,
  count(*) filter (where scope = 'hw_sample') as samples
from {src}
"""

failed = False
for name, src in [("csv", f"read_csv('{csv_path}')"), ("ndjson", f"read_json('{ndjson_path}', format = 'newline_delimited')")]:
    rel = duckdb.sql(QUERY.format(src=src))
    got = dict(zip(rel.columns, rel.fetchall()[0]))
    for k, v in expect.items():
        g = int(got[k] or 0)
        ok = g == v
        failed |= not ok
        print(f"{name} {k}: files {v} export {g} {'ok' if ok else 'MISMATCH'}")
    types = dict(duckdb.sql(f"select column_name, column_type from (describe select * from {src})").fetchall())
    if types["value"] not in ("BIGINT", "HUGEINT", "UBIGINT"):
        print(f"{name}: value column typed {types['value']}, expected an integer")
        failed = True
sys.exit(1 if failed else 0)
