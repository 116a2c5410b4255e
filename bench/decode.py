"""Decode throughput: golden batch captures into Arrow, next to a plain baseline.

For every codec, the MESSAGE frames of ``tests/golden/batch-<CODEC>.broker-to-client.bin``
(two batches, 90 messages) are concatenated many times into one byte stream, cut into
socket-sized chunks, and decoded in-process on one thread by two paths measured in the
same run, alternately:

``arrow``
    what a reader task does: ``FrameDecoder.feed`` / ``next_frame`` ->
    ``open_entry(split=False)`` ->
    ``select`` -> ``ArrowBatchBuilder.add``, and ``build()`` into a ``pyarrow.RecordBatch``
    whenever 10,000 rows are gathered (and once at the end).

``baseline``
    a plain decoder written here with the generated protobuf module only: split frames
    with ``struct``, parse ``BaseCommand`` and ``MessageMetadata``, decompress with the
    codec library, walk the batch parsing each ``SingleMessageMetadata``, and build one
    Python dict per message (``value``, ``key``, ``properties``, ``event_time``,
    ``publish_time``, ``sequence_id``, ``message_id``); dicts are handed off (dropped) in
    lists of 10,000 like the Arrow batches.

Each path gets a warm-up pass, then N timed passes (``time.perf_counter``); the table
shows the best pass and the median. MB are 10^6 bytes of message values (decompressed
payloads), the same count for both paths.

Usage::

    python bench/decode.py                 # all codecs, >= 200,000 messages per pass
    python bench/decode.py --codec LZ4 --runs 9
    python bench/decode.py --seconds 20    # time budget per codec instead of --runs
    python bench/decode.py --json          # machine-readable results only
    python bench/decode.py --profile       # cProfile of the LZ4 Arrow path, top 25 by tottime
    python bench/decode.py --stages        # ns per message of each stage of the Arrow path
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import platform
import pstats
import statistics
import struct
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import cramjam
import lz4
import lz4.block
import numpy as np
import pyarrow as pa
import zstandard
from google.protobuf import __version__ as protobuf_version
from google.protobuf.internal import api_implementation

from pulsar_spark.columnar import ArrowBatchBuilder
from pulsar_spark.protocol import FrameDecoder, open_entry, select
from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol import entry as entry_module

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
CODECS = ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY")
TOPIC = "persistent://public/default/golden-bench"
ROWS_PER_BATCH = 10_000
DEFAULT_MIN_MESSAGES = 200_000
DEFAULT_CHUNK = 64 * 1024
GOAL_CODEC = "LZ4"
GOAL_MSGS_PER_S = 600_000


# ---------------------------------------------------------------------------
# Input
# ---------------------------------------------------------------------------


@dataclass
class Workload:
    codec: str
    #: The MESSAGE frames of one capture, concatenated (size prefixes included).
    frames: bytes
    frames_count: int
    messages_per_copy: int
    copies: int
    stream: bytes = b""
    chunks: list[memoryview] = field(default_factory=list)

    @property
    def messages(self) -> int:
        return self.messages_per_copy * self.copies


def load_message_frames(codec: str) -> tuple[bytes, int, int]:
    """The raw MESSAGE frames of the golden batch capture, their count and messages."""
    data = (GOLDEN / f"batch-{codec}.broker-to-client.bin").read_bytes()
    decoder = FrameDecoder()
    decoder.feed(data)
    parts, messages = [], 0
    for frame in decoder:
        if frame.command.type == pb.BaseCommand.MESSAGE:
            parts.append(data[frame.offset : frame.offset + frame.size])
            messages += frame.metadata.num_messages_in_batch
    decoder.close()
    if not parts:
        msg = f"no MESSAGE frames in batch-{codec}.broker-to-client.bin"
        raise SystemExit(msg)
    return b"".join(parts), len(parts), messages


def make_workload(codec: str, copies: int | None, min_messages: int, chunk_size: int) -> Workload:
    frames, count, per_copy = load_message_frames(codec)
    if copies is None:
        copies = -(-min_messages // per_copy)
    work = Workload(codec, frames, count, per_copy, copies)
    work.stream = frames * copies
    view = memoryview(work.stream)
    work.chunks = [view[i : i + chunk_size] for i in range(0, len(view), chunk_size)]
    return work


# ---------------------------------------------------------------------------
# The path under test: FrameDecoder -> open_entry -> select -> ArrowBatchBuilder
# ---------------------------------------------------------------------------


def run_arrow(chunks: Sequence[memoryview]) -> tuple[int, int]:
    """Decode the chunks into RecordBatches; (messages, value bytes)."""
    decoder = FrameDecoder()
    builder = ArrowBatchBuilder(TOPIC, partition=-1)
    message_type = pb.BaseCommand.MESSAGE
    rows = value_bytes = 0
    for chunk in chunks:
        decoder.feed(chunk)
        while (frame := decoder.next_frame()) is not None:
            command = frame.command
            if command.type != message_type:
                continue
            message = command.message
            mid = message.message_id
            entry = open_entry(
                mid.ledgerId,
                mid.entryId,
                mid.partition,
                frame.metadata,
                frame.payload,
                broker_entry_metadata=frame.broker_entry_metadata,
                split=False,  # as the reader: the builder locates items
            )
            builder.add(entry, select(entry, ack_set=message.ack_set))
            if builder.rows >= ROWS_PER_BATCH:
                batch = builder.build()
                rows += batch.num_rows
                value_bytes += _value_bytes(batch)
    decoder.close()
    if builder.rows:
        batch = builder.build()
        rows += batch.num_rows
        value_bytes += _value_bytes(batch)
    return rows, value_bytes


def _value_bytes(batch: pa.RecordBatch) -> int:
    """Bytes of message values in a batch (from its offsets, no copy)."""
    values = batch.column("value")
    n = len(values)
    if not n:
        return 0
    offsets = np.frombuffer(values.buffers()[1], np.int32, n + 1, 4 * values.offset)
    return int(offsets[-1]) - int(offsets[0])


# ---------------------------------------------------------------------------
# Baseline: generated protobuf module + codec libraries, one dict per message
# ---------------------------------------------------------------------------

_U32 = struct.Struct(">I")
_zstd = zstandard.ZstdDecompressor()


def _baseline_decompress(codec: int, data: memoryview, size: int) -> bytes | memoryview:
    if codec == pb.NONE:
        return data
    if codec == pb.LZ4:
        return lz4.block.decompress(data, uncompressed_size=size)
    if codec == pb.ZLIB:  # producers never finish the stream: no zlib.decompress
        return zlib.decompressobj().decompress(data)
    if codec == pb.ZSTD:
        return _zstd.decompress(data, max_output_size=size)
    if codec == pb.SNAPPY:
        return cramjam.snappy.decompress_raw(data)
    msg = f"unknown codec {codec}"
    raise ValueError(msg)


def _baseline_frame(frame: bytes, emit: Callable[[dict], None]) -> int:
    """Decode one frame (after its size prefix), emit a dict per message; value bytes."""
    view = memoryview(frame)
    (cmd_size,) = _U32.unpack_from(frame, 0)
    command = pb.BaseCommand.FromString(view[4 : 4 + cmd_size])
    if command.type != pb.BaseCommand.MESSAGE:
        return 0
    pos = 4 + cmd_size
    if frame[pos : pos + 2] == b"\x0e\x02":  # broker entry metadata: skip
        pos += 6 + _U32.unpack_from(frame, pos + 2)[0]
    if frame[pos : pos + 2] == b"\x0e\x01":  # checksum (absent from these captures)
        pos += 6
    (meta_size,) = _U32.unpack_from(frame, pos)
    pos += 4
    meta = pb.MessageMetadata.FromString(view[pos : pos + meta_size])
    data = _baseline_decompress(meta.compression, view[pos + meta_size :], meta.uncompressed_size)
    mid = command.message.message_id
    prefix = f"{mid.ledgerId}:{mid.entryId}:{mid.partition}:"
    publish_time = meta.publish_time
    base_seq = meta.sequence_id
    total = 0
    if not meta.HasField("num_messages_in_batch"):
        value = bytes(data)
        emit(
            {
                "value": value,
                "key": meta.partition_key if meta.HasField("partition_key") else None,
                "properties": {kv.key: kv.value for kv in meta.properties},
                "event_time": meta.event_time or None,
                "publish_time": publish_time,
                "sequence_id": base_seq,
                "message_id": prefix + "-1",
            }
        )
        return len(value)
    data = memoryview(data)
    parse = pb.SingleMessageMetadata.FromString
    pos = 0
    for index in range(meta.num_messages_in_batch):
        (smm_size,) = _U32.unpack_from(data, pos)
        pos += 4
        smm = parse(data[pos : pos + smm_size])
        pos += smm_size
        size = smm.payload_size
        value = None if smm.null_value else bytes(data[pos : pos + size])
        pos += size
        if smm.compacted_out:
            continue
        emit(
            {
                "value": value,
                "key": smm.partition_key if smm.HasField("partition_key") else None,
                "properties": {kv.key: kv.value for kv in smm.properties},
                "event_time": smm.event_time or None,
                "publish_time": publish_time,
                "sequence_id": (
                    smm.sequence_id if smm.HasField("sequence_id") else base_seq + index
                ),
                "message_id": prefix + str(index),
            }
        )
        total += size
    return total


def run_baseline(chunks: Sequence[memoryview], keep: list | None = None) -> tuple[int, int]:
    """Decode the chunks into lists of dicts; (messages, value bytes)."""
    buf = bytearray()
    rows = value_bytes = 0
    out: list[dict] = []
    emit = out.append
    for chunk in chunks:
        buf += chunk
        pos, end = 0, len(buf)
        while end - pos >= 4:
            (total,) = _U32.unpack_from(buf, pos)
            if end - pos - 4 < total:
                break
            value_bytes += _baseline_frame(bytes(buf[pos + 4 : pos + 4 + total]), emit)
            pos += 4 + total
            if len(out) >= ROWS_PER_BATCH:
                rows += len(out)
                if keep is not None:
                    keep.extend(out)
                out.clear()
        del buf[:pos]
    if buf:
        msg = f"stream ends inside a frame ({len(buf)} bytes left)"
        raise ValueError(msg)
    rows += len(out)
    if keep is not None:
        keep.extend(out)
    return rows, value_bytes


# ---------------------------------------------------------------------------
# Cross-check: both paths must decode the same messages
# ---------------------------------------------------------------------------


def _ms(ts: datetime | None) -> int | None:
    return None if ts is None else (ts - _EPOCH) // timedelta(milliseconds=1)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def cross_check(work: Workload) -> None:
    """Both paths decode one copy of the capture to the same messages, or exit."""
    view = memoryview(work.frames)
    chunks = [view[i : i + 4096] for i in range(0, len(view), 4096)]
    dicts: list[dict] = []
    run_baseline(chunks, keep=dicts)
    decoder = FrameDecoder()
    builder = ArrowBatchBuilder(TOPIC)
    for chunk in chunks:
        decoder.feed(chunk)
        for frame in decoder:
            if frame.command.type == pb.BaseCommand.MESSAGE:
                mid = frame.command.message.message_id
                entry = open_entry(
                    mid.ledgerId,
                    mid.entryId,
                    mid.partition,
                    frame.metadata,
                    frame.payload,
                    split=False,
                )
                builder.add(entry, select(entry))
    table = builder.build().to_pylist()
    problems = []
    if len(table) != len(dicts) or len(dicts) != work.messages_per_copy:
        problems.append(f"{len(table)} arrow rows, {len(dicts)} dicts")
    for row, d in zip(table, dicts, strict=False):
        key = None if d["key"] is None else d["key"].encode()
        same = (
            row["value"] == d["value"]
            and row["key"] == key
            and dict(row["properties"]) == d["properties"]
            and row["messageId"] == d["message_id"]
            and row["sequenceId"] == d["sequence_id"]
            and _ms(row["eventTime"]) == d["event_time"]
            and _ms(row["publishTime"]) == d["publish_time"]
        )
        if not same:
            problems.append(f"row {d['message_id']} differs")
            break
    if problems:
        msg = f"{work.codec}: the two paths disagree: {'; '.join(problems)}"
        raise SystemExit(msg)


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------


@dataclass
class PathResult:
    times: list[float] = field(default_factory=list)
    #: CPU time of this thread in each pass: well under the wall time means the
    #: core was shared (other processes) and the pass is pessimistic.
    cpu_times: list[float] = field(default_factory=list)
    messages: int = 0
    value_bytes: int = 0

    @property
    def best(self) -> float:
        return min(self.times)

    @property
    def best_cpu_share(self) -> float:
        i = self.times.index(self.best)
        return self.cpu_times[i] / self.times[i]

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    def rate(self, seconds: float) -> tuple[float, float]:
        return self.messages / seconds, self.value_bytes / seconds / 1e6

    def as_json(self) -> dict:
        msgs, mb = self.rate(self.best)
        med_msgs, med_mb = self.rate(self.median)
        return {
            "runs": len(self.times),
            "times_s": self.times,
            "cpu_times_s": self.cpu_times,
            "best_s": self.best,
            "median_s": self.median,
            "messages": self.messages,
            "value_bytes": self.value_bytes,
            "msgs_per_s": msgs,
            "mb_per_s": mb,
            "median_msgs_per_s": med_msgs,
            "median_mb_per_s": med_mb,
            "ns_per_msg": 1e9 * self.best / self.messages,
        }


def timed(
    fn: Callable[[Sequence[memoryview]], tuple[int, int]], work: Workload, result: PathResult
) -> None:
    gc.collect()
    cpu = time.thread_time()
    start = time.perf_counter()
    messages, value_bytes = fn(work.chunks)
    result.times.append(time.perf_counter() - start)
    result.cpu_times.append(time.thread_time() - cpu)
    if messages != work.messages:
        msg = f"{work.codec}: {fn.__name__} decoded {messages} of {work.messages} messages"
        raise SystemExit(msg)
    if result.value_bytes and value_bytes != result.value_bytes:
        msg = f"{work.codec}: {fn.__name__} counted {value_bytes} bytes, then {result.value_bytes}"
        raise SystemExit(msg)
    result.messages, result.value_bytes = messages, value_bytes


def bench_codec(work: Workload, runs: int, seconds: float | None) -> dict[str, PathResult]:
    paths = {"arrow": run_arrow, "baseline": run_baseline}
    results = {name: PathResult() for name in paths}
    for fn in paths.values():  # warm-up pass, not timed
        fn(work.chunks)
    # Alternate the paths so drift (frequency, noisy neighbours) hits both alike.
    deadline = None if seconds is None else time.perf_counter() + seconds
    done = 0
    while True:
        for name, fn in paths.items():
            timed(fn, work, results[name])
        done += 1
        if deadline is None:
            if done >= runs:
                break
        elif done >= 3 and time.perf_counter() >= deadline:
            break
    return results


# ---------------------------------------------------------------------------
# Stage breakdown and profile of the Arrow path
# ---------------------------------------------------------------------------


def _best_ns(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter_ns()
        fn()
        best = min(best, time.perf_counter_ns() - start)
    return best


def _instrumented(chunks: Sequence[memoryview]) -> dict[str, int]:
    """``run_arrow`` with a clock around every call: ns spent per stage.

    ``decompress`` and ``split_batch`` are timed where ``open_entry`` calls
    them (wrapped for the pass, then restored), and cyclic GC pauses through
    ``gc.callbacks``, whichever stage triggers them.
    """
    clock = time.perf_counter_ns
    names = (
        "feed",
        "next_frame",
        "open_entry",
        "decompress",
        "split_batch",
        "select",
        "add",
        "build",
        "gc",
    )
    t = dict.fromkeys(names, 0)
    gc_start = [0]

    def on_gc(phase: str, _info: dict) -> None:
        if phase == "start":
            gc_start[0] = clock()
        else:
            t["gc"] += clock() - gc_start[0]

    def timing(name: str, fn: Callable) -> Callable:
        def timed_call(*args: object, **kwargs: object) -> object:
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                t[name] += clock() - t0

        return timed_call

    # Wrap what open_entry calls, if the module still calls it by these names.
    saved = {
        name: getattr(entry_module, name)
        for name in ("decompress", "split_batch")
        if callable(getattr(entry_module, name, None))
    }
    for name in ("decompress", "split_batch"):
        if name not in saved:
            t[name] = -1
    for name, fn in saved.items():
        setattr(entry_module, name, timing(name, fn))
    gc.callbacks.append(on_gc)
    try:
        start = clock()
        decoder = FrameDecoder()
        builder = ArrowBatchBuilder(TOPIC, partition=-1)
        message_type = pb.BaseCommand.MESSAGE
        for chunk in chunks:
            t0 = clock()
            decoder.feed(chunk)
            t["feed"] += clock() - t0
            while True:
                t0 = clock()
                frame = decoder.next_frame()
                t1 = clock()
                t["next_frame"] += t1 - t0
                if frame is None:
                    break
                command = frame.command
                if command.type != message_type:
                    continue
                message = command.message
                mid = message.message_id
                t0 = clock()
                entry = open_entry(
                    mid.ledgerId,
                    mid.entryId,
                    mid.partition,
                    frame.metadata,
                    frame.payload,
                    broker_entry_metadata=frame.broker_entry_metadata,
                    split=False,
                )
                t1 = clock()
                keep = select(entry, ack_set=message.ack_set)
                t2 = clock()
                builder.add(entry, keep)
                t3 = clock()
                t["open_entry"] += t1 - t0
                t["select"] += t2 - t1
                t["add"] += t3 - t2
                if builder.rows >= ROWS_PER_BATCH:
                    builder.build()
                    t["build"] += clock() - t3
        t0 = clock()
        builder.build()
        t["build"] += clock() - t0
        t["total"] = clock() - start
    finally:
        gc.callbacks.remove(on_gc)
        for name, fn in saved.items():
            setattr(entry_module, name, fn)
    return t


def stages(work: Workload, repeat: int) -> list[tuple[str, float]]:
    """ns per message of each stage of the Arrow path.

    The stages are timed inside one real pass (a clock around every call; the
    pass with the best total counts). The two protobuf parses inside
    ``next_frame`` are timed apart, on one copy of the capture parsed over and
    over.
    """
    n = work.messages
    best: dict[str, int] | None = None
    for _ in range(repeat + 1):  # the first pass warms up
        gc.collect()
        t = _instrumented(work.chunks)
        if best is None or t["total"] < best["total"]:
            best = t
    assert best is not None

    raw = work.frames
    decoder = FrameDecoder()
    decoder.feed(raw)
    commands, metas = [], []
    for f in decoder:
        (cmd_size,) = _U32.unpack_from(raw, f.offset + 4)
        commands.append(raw[f.offset + 8 : f.offset + 8 + cmd_size])
        meta_at = f.offset + 8 + cmd_size
        (meta_size,) = _U32.unpack_from(raw, meta_at)
        metas.append(raw[meta_at + 4 : meta_at + 4 + meta_size])
    copies = range(work.copies)

    def parse_all(parse: Callable, items: list[bytes]) -> Callable[[], None]:
        def run() -> None:
            for _ in copies:
                for item in items:
                    parse(item)

        return run

    command_ns = _best_ns(parse_all(pb.BaseCommand.FromString, commands), repeat)
    meta_ns = _best_ns(parse_all(pb.MessageMetadata.FromString, metas), repeat)
    frame_ns = best["feed"] + best["next_frame"]
    inner = max(best["decompress"], 0) + max(best["split_batch"], 0)
    timed_ns = sum(best[k] for k in ("feed", "next_frame", "open_entry", "select", "add", "build"))
    return [
        (name, ns / n)
        for name, ns in [
            ("frame decode (FrameDecoder.feed + next_frame)", frame_ns),
            ("  BaseCommand parse (upb), apart", command_ns),
            ("  MessageMetadata parse (upb), apart", meta_ns),
            ("open_entry", best["open_entry"]),
            ("  decompress()", best["decompress"]),
            ("  split_batch() (SingleMessageMetadata parses)", best["split_batch"]),
            ("  the rest of open_entry", best["open_entry"] - inner),
            ("select", best["select"]),
            ("ArrowBatchBuilder.add loop", best["add"]),
            ("ArrowBatchBuilder.build()", best["build"]),
            ("driver loop and clocks (total - stages)", best["total"] - timed_ns),
            ("total of this instrumented pass", best["total"]),
            ("cyclic GC pauses, inside the stages above", best["gc"]),
        ]
    ]


def profile(work: Workload) -> str:
    run_arrow(work.chunks)  # warm-up
    profiler = cProfile.Profile()
    profiler.enable()
    run_arrow(work.chunks)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
    return out.getvalue()


# ---------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------


def environment() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "pyarrow": pa.__version__,
        "protobuf": protobuf_version,
        "protobuf_implementation": api_implementation.Type(),
        "lz4": lz4.__version__,
        "zstandard": zstandard.__version__,
        "cramjam": cramjam.__version__,
        "platform": platform.platform(),
        "cpu": cpu,
    }


def print_env(env: dict) -> None:
    print(
        f"Python {env['python']} ({env['python_implementation']}), pyarrow {env['pyarrow']}, "
        f"protobuf {env['protobuf']} (implementation: {env['protobuf_implementation']}), "
        f"lz4 {env['lz4']}, zstandard {env['zstandard']}, cramjam {env['cramjam']}"
    )
    print(f"{env['platform']}, {env['cpu']}; single thread, in-process")


def print_table(results: dict[str, dict[str, PathResult]], works: dict[str, Workload]) -> None:
    head = (
        f"{'codec':<7} {'path':<9} {'messages':>9} {'MB':>7} {'runs':>4} {'best s':>7} "
        f"{'msgs/s':>10} {'MB/s':>7} {'ns/msg':>7} {'cpu':>4} {'median msgs/s':>14} "
        f"{'ours/base':>9}"
    )
    print(head)
    print("-" * len(head))
    for codec, paths in results.items():
        arrow, base = paths["arrow"], paths["baseline"]
        ratio = base.best / arrow.best
        for name, r in paths.items():
            msgs, mb = r.rate(r.best)
            med, _ = r.rate(r.median)
            print(
                f"{codec:<7} {name:<9} {r.messages:>9,} {r.value_bytes / 1e6:>7.1f} "
                f"{len(r.times):>4} {r.best:>7.3f} {msgs:>10,.0f} {mb:>7.1f} "
                f"{1e9 * r.best / r.messages:>7.0f} {r.best_cpu_share:>4.0%} {med:>14,.0f} "
                f"{(f'{ratio:.2f}x' if name == 'arrow' else ''):>9}"
            )
    print(
        f"({works[next(iter(works))].messages_per_copy} messages per copy of a capture's "
        "MESSAGE frames; cpu = this thread's CPU time / wall time in the best pass, "
        "well under 100% means the core was shared; ours/base = baseline best time / "
        "arrow best time, > 1 means the Arrow path is faster)"
    )


def goal(results: dict[str, dict[str, PathResult]]) -> dict | None:
    if GOAL_CODEC not in results:
        return None
    r = results[GOAL_CODEC]["arrow"]
    rate = r.messages / r.best
    return {
        "codec": GOAL_CODEC,
        "target_msgs_per_s": GOAL_MSGS_PER_S,
        "msgs_per_s": rate,
        "verdict": "PASS" if rate >= GOAL_MSGS_PER_S else "BELOW",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--codec",
        choices=CODECS,
        type=str.upper,
        action="append",
        help="codec to run (repeatable; default: all)",
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument(
        "--repeat",
        type=int,
        metavar="COPIES",
        help="copies of the capture's MESSAGE frames per pass (default: enough "
        f"for {DEFAULT_MIN_MESSAGES:,} messages)",
    )
    size.add_argument(
        "--messages",
        type=int,
        default=DEFAULT_MIN_MESSAGES,
        help="least messages per pass (default: %(default)s)",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=5,
        help="timed passes per path after the warm-up (default: %(default)s)",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        help="instead of --runs: time budget per codec (both paths, at least 3 passes each)",
    )
    parser.add_argument(
        "--chunk-size",
        type=int,
        default=DEFAULT_CHUNK,
        help="bytes per feed, like socket reads (default: %(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON results only")
    parser.add_argument(
        "--profile",
        action="store_true",
        help=f"cProfile the {GOAL_CODEC} Arrow path (or --codec), top 25 by tottime, and exit",
    )
    parser.add_argument(
        "--stages",
        action="store_true",
        help="ns per message of each stage of the Arrow path, and exit",
    )
    args = parser.parse_args(argv)
    if args.runs < 1 or (args.repeat is not None and args.repeat < 1):
        parser.error("--runs and --repeat must be positive")

    env = environment()
    if args.profile or args.stages:
        codecs = args.codec or [GOAL_CODEC]
        print_env(env)
        for codec in codecs:
            work = make_workload(codec, args.repeat, args.messages, args.chunk_size)
            if args.profile:
                print(f"\ncProfile of the Arrow path, {codec}, {work.messages:,} messages")
                print(profile(work))
            if args.stages:
                print(
                    f"\nStages of the Arrow path, {codec}, {work.messages:,} messages, "
                    f"best of {args.runs} each (ns per message)"
                )
                for name, ns in stages(work, args.runs):
                    print(f"  {name:<58} {ns:>8.0f}" if ns >= 0 else f"  {name:<58} {'n/a':>8}")
        return 0

    codecs = args.codec or list(CODECS)
    works = {c: make_workload(c, args.repeat, args.messages, args.chunk_size) for c in codecs}
    for work in works.values():
        cross_check(work)
    if not args.json:
        print_env(env)
        plan = (
            f"{args.seconds:g} s budget per codec"
            if args.seconds is not None
            else f"N = {args.runs} timed passes per path"
        )
        print(
            f"Warm-up pass, then {plan}; best pass shown; feeds of {args.chunk_size} bytes; "
            f"a RecordBatch every {ROWS_PER_BATCH:,} rows\n"
        )
    results = {}
    for codec, work in works.items():
        results[codec] = bench_codec(work, args.runs, args.seconds)
    verdict = goal(results)
    if args.json:
        out = {
            "environment": env,
            "chunk_size": args.chunk_size,
            "rows_per_batch": ROWS_PER_BATCH,
            "results": {
                codec: {
                    "copies": works[codec].copies,
                    "frames_per_copy": works[codec].frames_count,
                    "messages_per_copy": works[codec].messages_per_copy,
                    "arrow": paths["arrow"].as_json(),
                    "baseline": paths["baseline"].as_json(),
                    "ratio_ours_to_baseline": paths["baseline"].best / paths["arrow"].best,
                }
                for codec, paths in results.items()
            },
            "goal": verdict,
        }
        json.dump(out, sys.stdout, indent=2)
        print()
        return 0
    print()
    print_table(results, works)
    if verdict is not None:
        print(
            f"\nGoal: >= {GOAL_MSGS_PER_S:,} msgs/s into Arrow on one core, batched "
            f"{GOAL_CODEC}: {verdict['msgs_per_s']:,.0f} msgs/s  {verdict['verdict']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
