"""Stream checkpoints written before issue 12 (``tests/spark/data/checkpoint-v0``) read today.

``make_checkpoint_v0.py`` beside the data ran two streaming queries with the connector as it
was before positions became one type; ``manifest.json`` holds what they read. The offsets in
those checkpoints must parse to the positions they were written from, and a query restarted
from them must go on where it stopped.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pulsar_spark.protocol.ids.message_id import MessageId
from pulsar_spark.protocol.ids.position import Position
from pulsar_spark.protocol.topics import base_topic, partition_name
from pulsar_spark.spark.compat import spark_version
from pulsar_spark.spark.errors import CheckpointOffsetError
from pulsar_spark.spark.stream.offsets import dump_offsets, order_key, parse_offset, parse_offsets
from tests.spark.data.make_checkpoint_v0 import produce_recorded, run_available_now
from tests.support.official import produce

DATA = Path(__file__).resolve().parent / "data" / "checkpoint-v0"
MANIFEST: dict[str, Any] = json.loads((DATA / "manifest.json").read_text("utf-8"))
QUERIES = sorted(MANIFEST["queries"])


def _offsets(query: str) -> list[dict[str, str]]:
    """The source offset of each micro-batch, in order (line 3 of each offset file)."""
    files = sorted((DATA / query / "offsets").iterdir(), key=lambda p: int(p.name))
    assert [int(p.name) for p in files] == list(range(len(files)))
    out = []
    for path in files:
        version, _metadata, source = path.read_text("utf-8").splitlines()
        assert version == "v1"
        out.append(json.loads(source))
    return out


def _partition_of(topic: str, message_id: str) -> str:
    index = MessageId.parse(message_id).partition
    return topic if index < 0 else partition_name(topic, index)


def _initial(query: str, first: dict[str, str]) -> dict[str, Position]:
    """Where the query started: earliest, or what its startingOffsets JSON named."""
    start = {topic: Position.earliest() for topic in first}
    given = MANIFEST["queries"][query]["options"].get("startingOffsets", "earliest")
    if given != "earliest":
        for topic, text in json.loads(given).items():
            start[topic] = Position.parse(text)
    return start


def _between(start: Position, end: Position, message_id: str) -> bool:
    mid = MessageId.parse(message_id)
    return order_key(start) <= order_key(Position.at(mid)) and order_key(
        Position.after(mid)
    ) <= order_key(end)


@pytest.mark.parametrize("query", QUERIES)
def test_every_offset_parses_to_the_positions_it_was_written_from(query: str) -> None:
    kinds = set()
    for raw in _offsets(query):
        positions = parse_offsets(raw)
        assert dump_offsets(positions) == raw  # the same text, written back
        for topic, position in positions.items():
            assert parse_offset(str(position), topic) == position
            kinds.add(position.kind)
            if position.message_id is not None:  # an offset names its own partition
                assert position.message_id.partition == base_topic(topic)[1]
    assert "earliest" in kinds and "after" in kinds


def test_the_checkpoints_hold_every_form_of_position() -> None:
    texts = [t for q in QUERIES for raw in _offsets(q) for t in raw.values()]
    ids = [MessageId.parse(t.split(":", 1)[1]) for t in texts if ":" in t]
    assert {t.split(":")[0] for t in texts} == {"earliest", "after", "from"}
    assert any(m.batch_index >= 0 for m in ids) and any(m.batch_index < 0 for m in ids)
    assert any(m.partition >= 0 for m in ids) and any(m.partition < 0 for m in ids)


@pytest.mark.parametrize("query", QUERIES)
def test_each_micro_batch_read_what_lies_between_its_offsets(query: str) -> None:
    spec = MANIFEST["queries"][query]
    offsets = [parse_offsets(raw) for raw in _offsets(query)]
    produced = {  # partition -> ids, in order
        _partition_of(p["topic"], i): [] for p in spec["produced"] for i in p["ids"]
    }
    for p in spec["produced"]:
        for message_id in p["ids"]:
            produced[_partition_of(p["topic"], message_id)].append(message_id)
    batches = {b["batch"]: b["rows"] for b in spec["batches"]}
    assert sorted(batches) == list(range(len(offsets)))
    start = _initial(query, _offsets(query)[0])
    for batch, end in enumerate(offsets):
        read = sorted(
            (_partition_of(r["topic"], r["messageId"]), r["messageId"]) for r in batches[batch]
        )
        expected = sorted(
            (part, i)
            for part, ids in produced.items()
            for i in ids
            if _between(start.get(part, Position.earliest()), end[part], i)
        )
        assert read == expected, f"micro-batch {batch}"
        start = end


def test_offsets_the_stream_never_writes_are_refused() -> None:
    for text in ("latest", "time:5", "1:2:-1:-1", "after:x", 7):
        with pytest.raises(CheckpointOffsetError, match="in the checkpoint is not 'earliest'"):
            parse_offset(text, "persistent://public/default/t")


# -- a query restarted from those checkpoints, on a new broker with the same messages ----------


def _replay_messages(url: str, spec: dict[str, Any]) -> None:
    """Produce the manifest's messages as the first run did; the ids must come out equal."""
    for p in spec["produced"]:
        ids = produce_recorded(url, p)
        assert ids == p["ids"], f"pulsar-lite gave {p['topic']} other ids than the first run"


def _restart(spark, url: str, options: dict[str, str], checkpoint: Path) -> list[tuple]:
    """Run the query from ``checkpoint`` with Trigger.AvailableNow; (batch, value, id) rows."""
    batches = run_available_now(spark, url, options, checkpoint)
    return [(b["batch"], r["value"], r["messageId"]) for b in batches for r in b["rows"]]


@pytest.mark.skipif(spark_version() < (4, 2), reason="the checkpoints use maxRecordsPerTrigger")
def test_a_query_goes_on_from_a_checkpoint_of_the_earlier_version(
    spark, fresh_pulsar_lite, tmp_path
) -> None:
    ns = "persistent://public/default/"
    # Non-partitioned topics; the last micro-batch's commit lost, as when the driver dies
    # after writing its rows: it runs again from the logged offsets, then the new messages.
    spec = MANIFEST["queries"]["single"]
    url = fresh_pulsar_lite(default_partitions=0).service_url
    _replay_messages(url, spec)
    produce(url, ns + "compat-a", ["a6", "a7", "a8"], batching_max_messages=3,
            batching_max_publish_delay_ms=5000)  # fmt: skip
    produce(url, ns + "compat-c", ["c0", "c1"], batching=False)  # its offset: earliest
    produce(url, ns + "compat-d", ["d3"], batching=False)
    checkpoint = tmp_path / "single"
    shutil.copytree(DATA / "single", checkpoint)
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir())
    (checkpoint / "commits" / str(last)).unlink()
    rows = _restart(spark, url, spec["options"], checkpoint)
    replayed = [(v, i) for b, v, i in rows if b == last]
    assert replayed == [(r["value"], r["messageId"]) for r in spec["batches"][last]["rows"]]
    assert min(b for b, _, _ in rows) == last
    assert sorted(v for b, v, _ in rows if b > last) == ["a6", "a7", "a8", "c0", "c1", "d3"]

    # A 2-partition topic and an empty one, every micro-batch committed: only new messages.
    spec = MANIFEST["queries"]["partitioned"]
    url = fresh_pulsar_lite(default_partitions=2).service_url
    _replay_messages(url, spec)
    produce(url, ns + "compat-p", [{"value": f"p{i}", "key": f"k{i}"} for i in range(10, 14)])
    produce(url, ns + "compat-q", ["q0", "q1"], batching=False)
    checkpoint = tmp_path / "partitioned"
    shutil.copytree(DATA / "partitioned", checkpoint)
    rows = _restart(spark, url, spec["options"], checkpoint)
    assert {b for b, _, _ in rows} == {1}
    assert sorted(v for _, v, _ in rows) == ["p10", "p11", "p12", "p13", "q0", "q1"]
