#!/usr/bin/env bash
# StreamNative's pulsar-spark against this project, batch read and write: see run.py.
#
#   bash bench/streamnative/run.sh [--messages N] [--size B] [--runs R] [--out PATH]
#
# Prepares what is missing (StreamNative's connector built from its tag, a Spark 3.4.1 /
# Scala 2.13 venv, the project's venv) in ~/.cache/pulsar-spark-bench, then measures on
# Apache Pulsar 4.0 standalone and writes bench/results/streamnative.json.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=${PYTHON:-python3}
export BENCH_COMMAND="bash bench/streamnative/run.sh${*:+ $*}"
exec "$PY" "$HERE/run.py" "$@"
