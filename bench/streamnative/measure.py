"""The measuring half of ``run.py``; runs in the project's venv (see run.py for options).

1. Starts Apache Pulsar 4.0 standalone with the test suite's launcher
   (``tests/support/apache.py``: cached distribution, free loopback ports).
2. Produces ``--messages`` messages of ``--size`` bytes to one topic with the official
   client (batched, LZ4): a 10-digit serial then ``x`` filler.
3. Starts one warm ``local[2]`` driver per connector (``driver.py``): StreamNative's in
   the Spark 3.4.1 venv, the project's in this one. Each reads the topic once untimed
   (the count must be N), then ``--runs`` rounds time ``load().count()`` for both, the
   order alternating from round to round; every count must be N.
4. Each driver caches the same N-row DataFrame (``value`` binary, the same payloads,
   ``--write-partitions`` partitions) and writes it once untimed, then ``--runs`` rounds
   time ``df.write.format("pulsar")`` to a fresh topic each, alternating; every written
   topic must report N messages in (admin API ``msgInCounter``).
5. Writes the JSON result: per connector and operation the seconds of every run, best,
   median, rows/s, and ratios project / StreamNative in rows/s (> 1: the project is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _results import write_result
from support.apache import ApachePulsar
from support.apache_dist import PULSAR_VERSION
from support.official import produce

HERE = Path(__file__).resolve().parent

CONNECTORS = ("streamnative", "ours")


class Driver:
    """A ``driver.py`` process: one JSON command in, one JSON answer out."""

    def __init__(self, name: str, python: str, args: list[str], log: Path) -> None:
        env = dict(os.environ)
        for key in ("SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH"):
            env.pop(key, None)
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
        env["PYSPARK_PYTHON"] = python  # the workers: the driver's own interpreter
        self.name = name
        self.log = log
        self._err = log.open("wb")
        self.proc = subprocess.Popen(
            [python, str(HERE / "driver.py"), name, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
            env=env,
        )
        self.info = self._answer()

    def _answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("@@ "):
                answer = json.loads(line[3:])
                if "error" in answer:
                    msg = f"{self.name}: {answer['error']} (log {self.log})"
                    raise RuntimeError(msg)
                return answer
        msg = f"{self.name} driver exited ({self.proc.wait()}); log {self.log}"
        raise RuntimeError(msg)

    def ask(self, op: str, **fields: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **fields}) + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write('{"op": "quit"}\n')
                self.proc.stdin.flush()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._err.close()


def summary(seconds: list[float], rows: int) -> dict[str, Any]:
    best, median = min(seconds), statistics.median(seconds)
    return {
        "seconds": seconds,
        "best_seconds": best,
        "median_seconds": median,
        "best_rows_per_s": rows / best,
        "median_rows_per_s": rows / median,
    }


def payloads(n: int, size: int):  # type: ignore[no-untyped-def]
    filler = b"x" * (size - 10)
    for i in range(n):
        yield b"%010d" % i + filler


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--runs", type=int, required=True)
    parser.add_argument("--write-partitions", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--jar", required=True)
    parser.add_argument("--sn-python", required=True)
    parser.add_argument("--logs", required=True)
    args = parser.parse_args()
    n = args.messages
    stamp = time.strftime("%Y%m%d-%H%M%S")
    logs = Path(args.logs) / f"{stamp}-{n}"
    logs.mkdir(parents=True, exist_ok=True)
    print(f"[measure] N={n:,} x {args.size} B, {args.runs} runs; logs in {logs}", flush=True)
    started_all = time.perf_counter()
    broker = ApachePulsar(Path(tempfile.mkdtemp(prefix="sn-bench-broker-")), name="sn-bench")
    drivers: dict[str, Driver] = {}
    try:
        broker.start()
        url, admin_url = broker.service_url, broker.http_url
        print(f"[measure] Apache Pulsar {PULSAR_VERSION} at {url}", flush=True)
        read_topic = f"persistent://public/default/sn-bench-read-{stamp}"
        began = time.perf_counter()
        produce(url, read_topic, payloads(n, args.size), compression="LZ4", timeout=3600)
        produced = time.perf_counter() - began
        print(f"[measure] produced {n:,} messages in {produced:.1f} s", flush=True)

        # Both drivers start at once (each takes tens of seconds to warm).
        def start(name: str) -> None:
            if name == "streamnative":
                drivers[name] = Driver(name, args.sn_python, [args.jar], logs / f"{name}.log")
            else:
                drivers[name] = Driver(name, sys.executable, [], logs / f"{name}.log")

        threads = [threading.Thread(target=start, args=(name,)) for name in CONNECTORS]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        missing = [name for name in CONNECTORS if name not in drivers]
        if missing:
            msg = f"driver(s) {missing} did not start: see {logs}"
            raise RuntimeError(msg)
        versions = {name: drivers[name].info["spark"] for name in CONNECTORS}
        print(f"[measure] drivers up: Spark {versions}", flush=True)

        where = {"service_url": url, "admin_url": admin_url}
        reads: dict[str, list[float]] = {name: [] for name in CONNECTORS}
        for name in CONNECTORS:  # untimed: warm-up and the N-row check
            rows = drivers[name].ask("read", topic=read_topic, **where)["rows"]
            if rows != n:
                msg = f"{name} read {rows:,} rows, not {n:,}"
                raise RuntimeError(msg)
        for run in range(args.runs):
            order = CONNECTORS if run % 2 == 0 else CONNECTORS[::-1]
            for name in order:
                answer = drivers[name].ask("read", topic=read_topic, **where)
                if answer["rows"] != n:
                    msg = f"{name} read {answer['rows']:,} rows, not {n:,} (run {run})"
                    raise RuntimeError(msg)
                reads[name].append(answer["seconds"])
                print(f"[measure] read  {name:12s} {answer['seconds']:7.2f} s", flush=True)

        writes: dict[str, list[float]] = {name: [] for name in CONNECTORS}
        admin = broker.admin

        def write(name: str, label: str) -> float:
            topic = f"persistent://public/default/sn-bench-write-{name}-{label}-{stamp}"
            seconds = drivers[name].ask("write", topic=topic, **where)["seconds"]
            count = admin.stats(topic)["msgInCounter"]
            if count != n:
                msg = f"{name} wrote {count:,} messages to {topic}, not {n:,}"
                raise RuntimeError(msg)
            return float(seconds)

        for name in CONNECTORS:
            cached = drivers[name].ask(
                "cache", rows=n, size=args.size, partitions=args.write_partitions
            )["rows"]
            assert cached == n, (name, cached)
            write(name, "warm")
        for run in range(args.runs):
            order = CONNECTORS if run % 2 == 0 else CONNECTORS[::-1]
            for name in order:
                seconds = write(name, str(run))
                writes[name].append(seconds)
                print(f"[measure] write {name:12s} {seconds:7.2f} s", flush=True)
    finally:
        for driver in drivers.values():
            driver.close()
        broker.close()
        if broker.log_path.is_file():
            shutil.copyfile(broker.log_path, logs / "broker.log")
        shutil.rmtree(broker.root, ignore_errors=True)

    figures: dict[str, Any] = {"read": {}, "write": {}}
    for op, times in (("read", reads), ("write", writes)):
        for name in CONNECTORS:
            figures[op][name] = summary(times[name], n)
        figures[op]["ratio_best"] = (
            figures[op]["ours"]["best_rows_per_s"] / figures[op]["streamnative"]["best_rows_per_s"]
        )
        figures[op]["ratio_median"] = (
            figures[op]["ours"]["median_rows_per_s"]
            / figures[op]["streamnative"]["median_rows_per_s"]
        )
    elapsed = time.perf_counter() - started_all
    for op in ("read", "write"):
        f = figures[op]
        print(
            f"{op:5s}  StreamNative best {f['streamnative']['best_seconds']:.2f} s "
            f"median {f['streamnative']['median_seconds']:.2f} s | ours best "
            f"{f['ours']['best_seconds']:.2f} s median {f['ours']['median_seconds']:.2f} s | "
            f"ours/StreamNative {f['ratio_best']:.2f}x best, {f['ratio_median']:.2f}x median"
        )
    write_result(
        args.out,
        "streamnative",
        command=os.environ.get("BENCH_COMMAND"),
        messages=n,
        size=args.size,
        runs=args.runs,
        write_partitions=args.write_partitions,
        broker=f"Apache Pulsar {PULSAR_VERSION} standalone",
        connectors={
            "streamnative": "pulsar-spark-connector_2.13 3.4.1.3 on Spark "
            f"{versions['streamnative']} (Scala 2.13), local[2]",
            "ours": f"pulsar-spark (this repository) on Spark {versions['ours']}, local[2]",
        },
        produce_seconds=produced,
        elapsed_seconds=elapsed,
        **figures,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
