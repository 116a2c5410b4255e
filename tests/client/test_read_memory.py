"""A read's memory bounded by bytes: flow permits held back by a byte budget
(:class:`FlowWindow`), chunked messages being put together bounded by count and bytes
(:class:`ChunkAssembler`), and a read of 200 x 5 MB messages whose peak RSS stays under
its budget plus a stated overhead, in a process of its own: with a 64 MiB budget, and with
the default one (256 MiB), whose whole process must fit a 1 GiB Python worker.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pulsar_spark.client import PulsarClient
from pulsar_spark.client.config import DEFAULT_READ_BUFFER_BYTES
from pulsar_spark.client.read.consumer import FlowWindow
from pulsar_spark.protocol.chunks import ChunkAssembler
from pulsar_spark.protocol.errors import ChunkError
from tests.support.figures import figure
from tests.support.raw_wire import chunk_metadata

MIB = 1 << 20
ROOT = Path(__file__).resolve().parents[2]

# -- flow permits ------------------------------------------------------------------------


def test_without_a_budget_the_window_is_granted_again_at_half() -> None:
    window = FlowWindow(10)
    assert window.restart() == 10
    assert [window.count(1) for _ in range(5)] == [0, 0, 0, 0, 5]
    assert window.count(100) == 400 - 10 + 100 + 5 - 5  # grown to 4 batches of 100
    assert window.outstanding == 400


def test_a_budget_holds_permits_back_for_large_messages() -> None:
    window = FlowWindow(1000, budget=64 * MIB)
    first = window.restart()
    assert first == 64 // 5  # nothing seen yet: a permit may bring 5 MiB
    # 5 MB messages: the window is what the budget leaves room for, minus what is held.
    grants = [window.count(1, 5_000_000, buffered=20 * MIB) for _ in range(first)]
    assert window.outstanding * 5_000_000 <= 64 * MIB - 20 * MIB
    assert sum(grants) > 0
    assert window.top_up(64 * MIB, idle=False) == 0  # the budget is spent: nothing more


def test_a_spent_budget_still_grants_one_entry_when_nothing_is_coming() -> None:
    window = FlowWindow(1000, budget=8 * MIB)
    window.restart()
    while window.outstanding > 0:
        window.count(1, 4 * MIB, buffered=100 * MIB)
    assert window.top_up(100 * MIB, idle=False) == 0  # frames still queued: they go first
    assert window.top_up(100 * MIB, idle=True) == 1  # nothing queued or in flight
    # A batch took the broker's permits below zero: enough to get one entry out.
    window.count(50, 50, buffered=100 * MIB)
    assert window.outstanding == -49
    assert window.top_up(100 * MIB, idle=True) == 50


def test_small_batched_messages_get_the_whole_window() -> None:
    window = FlowWindow(1000, budget=256 * MIB)
    assert window.restart() == 51
    assert window.count(1000, 100_000) == 4000 + 949  # 4 batches in flight, deficit repaid
    assert window.outstanding == 4000


# -- chunked messages -------------------------------------------------------------------


def test_chunked_messages_beyond_the_byte_bound_fail_naming_the_message() -> None:
    assembler = ChunkAssembler(max_bytes=3 * MIB)
    part = b"x" * MIB
    assert assembler.add(1, 0, chunk_metadata("p-1", 0, 2, 2 * MIB), part) is None
    assert assembler.add(1, 1, chunk_metadata("p-2", 0, 2, 2 * MIB), part) is None
    assert assembler.held_bytes == 2 * MIB
    whole = assembler.add(1, 2, chunk_metadata("p-1", 1, 2, 2 * MIB), part)
    assert whole is not None
    assert assembler.held_bytes == MIB
    assert assembler.add(1, 3, chunk_metadata("p-3", 0, 3, 3 * MIB), part) is None
    with pytest.raises(ChunkError, match=r"'p-3' \(first chunk 1:3.*within 3145728 bytes") as err:
        assembler.add(1, 4, chunk_metadata("p-3", 1, 3, 3 * MIB), part + part)
    assert err.value.message_id == "1:4:-1:-1"
    assert assembler.held_bytes == MIB  # p-3 dropped, p-2 kept
    assembler.clear()
    assert assembler.held_bytes == 0


def test_evicted_and_restarted_messages_give_their_bytes_back() -> None:
    assembler = ChunkAssembler(max_pending=1)
    assembler.add(1, 0, chunk_metadata("a", 0, 2, 20), b"0" * 10)
    assembler.add(1, 1, chunk_metadata("a", 0, 2, 20), b"0" * 10)  # begun again
    assert assembler.held_bytes == 10
    assembler.add(1, 2, chunk_metadata("b", 0, 2, 20), b"0" * 10)  # evicts a
    assert assembler.evicted == ["a"]
    assert assembler.held_bytes == 10


# -- a read's peak RSS ------------------------------------------------------------------

MESSAGES = 200
SIZE = 5_000_000
#: A Spark executor's Python worker, which the default budget's whole process must fit.
WORKER = 1 << 30


def overhead(budget: int) -> int:
    """What the reading process holds besides the budget, over a process that has
    imported everything (pandas too: pyarrow loads it on its first array made from NumPy)
    and connected: the RecordBatch handed out (up to a quarter of the budget), the spare
    room of the buffer rows are built in, the frame being decoded, allocator slack.
    Measured: 113-128 MiB with a budget of 64 MiB (CI once saw 176 MiB when pandas was
    counted as the read's)."""
    return 96 * MIB + budget // 4


CHILD = textwrap.dedent(
    """
    import json, sys
    import pandas  # noqa: F401  pyarrow loads it on its first array made from NumPy (~40 MiB);
    # Spark's Python workers have it loaded before any read, so the baseline has it too
    import pyarrow.compute as pc
    from pulsar_spark.client import PartitionReader, PulsarClient
    from pulsar_spark.client.names import parse_topic

    def hwm():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmHWM")

    url, topic, budget = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with PulsarClient(url) as client:
        client.get_last_message_id(topic)  # connected: the baseline
        base = hwm()
        rows = size = 0
        kwargs = {"buffer_bytes": budget} if budget else {}
        reader = PartitionReader(client._lookup, parse_topic(topic), **kwargs)
        for batch in reader:
            rows += batch.num_rows
            size += pc.sum(pc.binary_length(batch.column("value"))).as_py()
            del batch
    out = {"rows": rows, "bytes": size, "base": base, "peak": hwm()}
    print(json.dumps({**out, "reconnects": reader.reconnects}))
    """
)


def _read_in_child(url: str, topic: str, budget: int) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, url, topic, str(budget)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def large_messages(pulsar_lite) -> tuple[str, str, float]:
    """(service URL, topic, seconds to produce) of a topic of 200 x 5 MB messages, written
    once for the budgets read."""
    url = pulsar_lite.service_url
    topic = f"persistent://public/default/read-memory-{secrets.token_hex(4)}"
    started = time.monotonic()
    with PulsarClient(url) as client, client.create_producer(topic, batching=False) as p:
        for i in range(MESSAGES):
            p.send(i.to_bytes(4, "big") * (SIZE // 4))
        p.flush()
    return url, topic, time.monotonic() - started


@pytest.mark.parametrize("budget", [64 * MIB, 0], ids=["64MiB", "default"])
def test_a_read_of_large_messages_stays_within_its_budget(
    large_messages, budget, record_property
) -> None:
    # budget 0: the reader takes the client's default (ClientConfig.read_buffer_bytes).
    url, topic, produced = large_messages
    held = budget or DEFAULT_READ_BUFFER_BYTES
    started = time.monotonic()
    got = _read_in_child(url, topic, budget)
    took = time.monotonic() - started
    grown = got["peak"] - got["base"]
    bound = held + overhead(held)
    figure(
        record_property,
        f"read_memory_{held // MIB}MiB",
        messages=f"{MESSAGES}x{SIZE // 1_000_000}MB",
        budget_mib=held // MIB,
        peak_rss_mib=round(got["peak"] / MIB),
        over_baseline_mib=round(grown / MIB),
        bound_mib=bound // MIB,
        produce_s=round(produced, 1),
        read_s=round(took, 1),
        reconnects=got["reconnects"],
    )
    assert (got["rows"], got["bytes"]) == (MESSAGES, MESSAGES * SIZE)
    assert grown < bound
    if not budget:  # the README: the default fits a 1 GiB Python worker, interpreter and all
        assert got["peak"] < WORKER


def test_a_reader_may_choose_to_drop_the_oldest_incomplete_messages(caplog) -> None:
    import logging

    from pulsar_spark.client.names import parse_topic
    from pulsar_spark.client.read.chunk_bounds import ChunkBounds

    class Reader:
        topic = parse_topic("t")
        partition = -1
        CHUNK_WAIT = 60.0

    log = logging.getLogger("test.chunks")
    part = b"x" * MIB
    strict = ChunkBounds(Reader(), log, max_bytes=2 * MIB)
    strict.add(1, 0, chunk_metadata("old", 0, 3, 3 * MIB), part)
    with pytest.raises(ChunkError, match="'new'"):
        strict.add(1, 1, chunk_metadata("new", 0, 2, 2 * MIB), part + part)
    lenient = ChunkBounds(Reader(), log, max_bytes=2 * MIB, drop_incomplete=True)
    lenient.add(1, 0, chunk_metadata("old", 0, 3, 3 * MIB), part)
    with caplog.at_level(logging.WARNING, logger="test.chunks"):
        assert lenient.add(1, 1, chunk_metadata("new", 0, 2, 2 * MIB), part) is None
        whole = lenient.add(1, 2, chunk_metadata("new", 1, 2, 2 * MIB), part)
    assert whole is not None
    assert len(whole.payload) == 2 * MIB
    assert [r.getMessage() for r in caplog.records if "'old'" in r.getMessage()]
    assert lenient.pending == 0


def test_the_budget_comes_from_the_client_and_the_spark_option() -> None:
    from pulsar_spark.client import PartitionReader
    from pulsar_spark.client.errors import InvalidArgument
    from pulsar_spark.client.names import parse_topic
    from pulsar_spark.spark.connect import open_client
    from pulsar_spark.spark.options.parse import parse_options

    topic = parse_topic("t")
    with PulsarClient("pulsar://127.0.0.1:1") as client:  # nothing connects
        assert PartitionReader(client._lookup, topic).buffer_bytes == 256 * MIB
        assert PartitionReader(client._lookup, topic, buffer_bytes=8 * MIB).buffer_bytes == 8 * MIB
        with pytest.raises(InvalidArgument, match="buffer_bytes"):
            PartitionReader(client._lookup, topic, buffer_bytes=1000)
    options = parse_options({"service.url": "pulsar://127.0.0.1:1", "readBufferBytes": "67108864"})
    with open_client(options) as client:
        reader = PartitionReader(client._lookup, topic)
        assert reader.buffer_bytes == 64 * MIB
        assert reader._batch_bytes == 16 * MIB  # a quarter of it
