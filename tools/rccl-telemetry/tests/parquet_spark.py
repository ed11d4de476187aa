"""Runs the README's Spark SQL worked example (its 'telemetry/' paths pointed at DIR) with a
local pyspark session and prints its rows as JSON lines.

usage: parquet_spark.py README DIR
"""
import json
import sys

from pyspark.sql import SparkSession

readme, out_dir = sys.argv[1:3]
text = open(readme).read()
at = text.index("<!-- parquet-worked-example-spark -->")
start = text.index("```sql\n", at) + len("```sql\n")
sql = text[start:text.index("```", start)].replace("'telemetry/", f"'{out_dir}/")
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.sql.session.timeZone", "UTC").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
stmts = [s.strip() for s in sql.split(";") if s.strip()]
for s in stmts[:-1]:
    spark.sql(s)
for row in spark.sql(stmts[-1]).collect():
    print(json.dumps(row.asDict(), default=str))
spark.stop()
