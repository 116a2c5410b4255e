"""The golden captures: real traffic of the official client (C++ core) and a broker.

For every scenario and both directions, the SEND frames (client to broker) and
the MESSAGE frames (broker to client) must give back exactly the messages the
producer sent, through the dump tool and through the Arrow path, however the
bytes are cut into pieces.
"""

from __future__ import annotations

import base64
import json
import random
import re
import subprocess
import sys
import zlib

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pulsar_spark.columnar import ROW_SCHEMA, ArrowBatchBuilder
from pulsar_spark.dump import dump_stream
from pulsar_spark.protocol import (
    Entry,
    Frame,
    FrameDecoder,
    decompress,
    encode_payload_command,
    open_entry,
    pb,
)
from pulsar_spark.protocol.ids.message_id import to_signed64

BROKER_TO_CLIENT = "broker-to-client"
CLIENT_TO_BROKER = "client-to-broker"
PAYLOAD_TYPE = {CLIENT_TO_BROKER: "SEND", BROKER_TO_CLIENT: "MESSAGE"}
FIRST_TYPE = {CLIENT_TO_BROKER: "CONNECT", BROKER_TO_CLIENT: "CONNECTED"}

EXPECTED_SCENARIOS = {
    f"{kind}-{codec}"
    for kind in ("single", "batch")
    for codec in ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY")
}


def test_every_scenario_is_there(golden_scenarios) -> None:
    names = {s.name for s in golden_scenarios}
    assert names == EXPECTED_SCENARIOS
    for scenario in golden_scenarios:
        for direction in PAYLOAD_TYPE:
            assert scenario.path(direction).is_file()
        assert scenario.messages, scenario.name


# ---------------------------------------------------------------------------
# (a) the dump tool reproduces the produced messages
# ---------------------------------------------------------------------------


def _dumped_messages(records: list[dict], direction: str) -> list[dict]:
    out = []
    for record in records:
        if record["type"] == PAYLOAD_TYPE[direction]:
            out.extend(record["messages"])
    return out


def _without_batch_index(messages: list[dict]) -> list[dict]:
    return [{k: v for k, v in m.items() if k != "batch_index"} for m in messages]


def test_dump_stream_gives_the_expected_messages(golden, direction) -> None:
    records = list(dump_stream(iter([golden.data(direction)])))

    assert records[0]["type"] == FIRST_TYPE[direction]
    dumped = _dumped_messages(records, direction)
    assert _without_batch_index(dumped) == golden.messages

    # Batch indexes: -1 for single messages, 0..n-1 within each batch.
    for record in records:
        if record["type"] == PAYLOAD_TYPE[direction]:
            indexes = [m["batch_index"] for m in record["messages"]]
            if golden.batched:
                assert indexes == list(range(len(indexes)))
            else:
                assert indexes == [-1]
    # Offsets are where each frame starts: strictly increasing from 0.
    offsets = [r["offset"] for r in records]
    assert offsets[0] == 0
    assert offsets == sorted(set(offsets))


@pytest.mark.parametrize("scenario_name", ["batch-LZ4", "single-ZLIB"])
def test_dump_cli_gives_the_expected_messages(golden_scenarios, scenario_name, direction) -> None:
    (scenario,) = [s for s in golden_scenarios if s.name == scenario_name]
    path = scenario.path(direction)
    result = subprocess.run(
        [sys.executable, "-m", "pulsar_spark.dump", str(path)],
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == b""
    records = [json.loads(line) for line in result.stdout.decode("utf-8").splitlines()]
    assert _without_batch_index(_dumped_messages(records, direction)) == scenario.messages
    # The CLI prints exactly what dump_stream yields.
    in_process = json.loads(json.dumps(list(dump_stream(iter([scenario.data(direction)])))))
    assert records == in_process


def test_dump_stream_in_single_bytes(golden_scenarios) -> None:
    (scenario,) = [s for s in golden_scenarios if s.name == "batch-SNAPPY"]
    data = scenario.data(BROKER_TO_CLIENT)
    whole = list(dump_stream(iter([data])))
    piecewise = list(dump_stream(data[i : i + 1] for i in range(len(data))))
    assert piecewise == whole


# ---------------------------------------------------------------------------
# (b) FrameDecoder + open_entry + ArrowBatchBuilder give the produced messages
# ---------------------------------------------------------------------------


def _position(mid: pb.MessageIdData) -> tuple[int, int, int]:
    return to_signed64(mid.ledgerId), to_signed64(mid.entryId), mid.partition


def _entries(golden, direction: str) -> list[Entry]:
    frames = golden.payload_frames(direction)
    if direction == BROKER_TO_CLIENT:
        positions = [_position(f.command.message.message_id) for f in frames]
    else:
        # A SEND has no position yet: the broker's receipts, in order, say where each went.
        receipts = [
            f.command.send_receipt
            for f in golden.frames(BROKER_TO_CLIENT)
            if f.command.type == pb.BaseCommand.SEND_RECEIPT
        ]
        assert [r.sequence_id for r in receipts] == [f.command.send.sequence_id for f in frames]
        positions = [_position(r.message_id) for r in receipts]
    return [
        open_entry(
            ledger,
            entry,
            partition,
            frame.metadata,
            frame.payload,
            broker_entry_metadata=frame.broker_entry_metadata,
        )
        for frame, (ledger, entry, partition) in zip(frames, positions, strict=True)
    ]


def _record_batch(golden, direction: str) -> tuple[pa.RecordBatch, list[Entry]]:
    entries = _entries(golden, direction)
    builder = ArrowBatchBuilder(golden.topic, partition=-1)
    for entry in entries:
        builder.add(entry)
    return builder.build(), entries


def _ms(column: pa.Array) -> list[int | None]:
    """A timestamp[us] column as epoch milliseconds."""
    return pc.divide(column.cast(pa.int64()), 1000).to_pylist()


def test_arrow_batch_has_the_expected_rows(golden, direction) -> None:
    batch, entries = _record_batch(golden, direction)
    expected = golden.messages
    n = len(expected)

    assert batch.schema == ROW_SCHEMA
    assert batch.num_rows == n
    rows = batch.to_pydict()

    assert rows["value"] == golden.payloads
    assert rows["key"] == [None if m["key"] is None else m["key"].encode() for m in expected]
    assert [dict(p) for p in rows["properties"]] == [m["properties"] for m in expected]
    assert _ms(batch.column("eventTime")) == [m["event_time"] for m in expected]
    assert rows["topic"] == [golden.topic] * n
    assert rows["partition"] == [-1] * n

    # One id per message: ledger:entry:partition:batchIndex, in order.
    ids = []
    publish, producers, sequences = [], [], []
    for entry in entries:
        meta = entry.metadata
        indexes = list(range(entry.count)) if golden.batched else [-1]
        assert list(entry.batch_indexes) == indexes
        ids += [f"{entry.ledger}:{entry.entry}:{entry.partition}:{i}" for i in indexes]
        publish += [meta.publish_time] * entry.count
        producers += [meta.producer_name] * entry.count
        if golden.batched:
            sequences += [
                smm.sequence_id if smm.HasField("sequence_id") else meta.sequence_id + i
                for i, smm in enumerate(entry.smms)
            ]
        else:
            sequences.append(meta.sequence_id)
    assert rows["messageId"] == ids
    pattern = r"\d+:\d+:-1:-1" if not golden.batched else r"\d+:\d+:-1:\d+"
    assert all(re.fullmatch(pattern, i) for i in ids)
    assert len(set(ids)) == n
    assert _ms(batch.column("publishTime")) == publish
    assert rows["producerName"] == producers
    assert set(producers) == {f"golden-{golden.name}"}
    assert rows["sequenceId"] == sequences
    # One producer, in order: sequence ids 0, 1, 2, ...
    assert sequences == list(range(n))


def test_both_directions_give_the_same_rows(golden) -> None:
    sent, _ = _record_batch(golden, CLIENT_TO_BROKER)
    delivered, _ = _record_batch(golden, BROKER_TO_CLIENT)
    assert sent.equals(delivered)


def test_message_frames_repeat_the_send_frames(golden) -> None:
    # The broker stores the producer's metadata and payload and hands them on unchanged.
    sent = golden.payload_frames(CLIENT_TO_BROKER)
    delivered = golden.payload_frames(BROKER_TO_CLIENT)
    assert len(sent) == len(delivered) > 0
    for send, message in zip(sent, delivered, strict=True):
        assert send.metadata == message.metadata
        assert bytes(send.payload) == bytes(message.payload)


# ---------------------------------------------------------------------------
# (c) observed facts
# ---------------------------------------------------------------------------


def test_checksum_on_send_but_not_on_message(golden) -> None:
    sends = golden.payload_frames(CLIENT_TO_BROKER)
    messages = golden.payload_frames(BROKER_TO_CLIENT)
    assert {f.type_name for f in sends} == {"SEND"}
    assert {f.type_name for f in messages} == {"MESSAGE"}
    assert all(f.has_checksum for f in sends)
    assert not any(f.has_checksum for f in messages)
    # This broker exposes no broker entry metadata.
    assert all(f.broker_entry_metadata is None for f in sends + messages)
    assert all(f.broker_publish_time is None and f.broker_index is None for f in messages)


def test_batch_frames_and_only_they_set_num_messages_in_batch(golden, direction) -> None:
    frames = golden.payload_frames(direction)
    present = {f.metadata.HasField("num_messages_in_batch") for f in frames}
    assert present == {golden.batched}
    if golden.batched:
        counts = [f.metadata.num_messages_in_batch for f in frames]
        assert sum(counts) == len(golden.messages)
        assert max(counts) <= 50


def test_every_payload_uses_the_scenario_codec(golden, direction) -> None:
    for frame in golden.payload_frames(direction):
        meta = frame.metadata
        assert meta.compression == golden.codec
        if golden.codec == pb.NONE:
            assert not meta.HasField("uncompressed_size")
        else:
            assert meta.HasField("uncompressed_size")
            out = decompress(meta.compression, frame.payload, meta.uncompressed_size, 1 << 20)
            assert len(out) == meta.uncompressed_size


def _zlib_frames(golden_scenarios) -> list[Frame]:
    return [
        frame
        for scenario in golden_scenarios
        if scenario.codec == pb.ZLIB
        for direction in PAYLOAD_TYPE
        for frame in scenario.payload_frames(direction)
    ]


def test_captured_zlib_payloads_are_zlib_streams(golden_scenarios) -> None:
    # The C++ core of pulsar-client 3.13 finishes its zlib streams (header,
    # final block, Adler-32): a strict zlib.decompress accepts them. Java
    # producers do not finish theirs; see the test below.
    frames = _zlib_frames(golden_scenarios)
    assert len(frames) == 2 * (15 + 2)
    for frame in frames:
        payload = bytes(frame.payload)
        meta = frame.metadata
        assert payload[:1] == b"\x78"  # zlib header, deflate with 32 KiB window
        ours = decompress(pb.ZLIB, frame.payload, meta.uncompressed_size, 1 << 20)
        assert bytes(ours) == zlib.decompress(payload)


def _java_style_zlib(data: bytes) -> bytes:
    """What ``java.util.zip.Deflater`` gives a Java producer: sync-flushed, never finished."""
    deflater = zlib.compressobj()
    return deflater.compress(data) + deflater.flush(zlib.Z_SYNC_FLUSH)


def test_zlib_without_final_block_decodes_like_the_captured_stream(golden_scenarios) -> None:
    # Re-frame every captured ZLIB MESSAGE with a Java-style payload (no final
    # block, no Adler-32): zlib.decompress refuses it, the decoder gives the
    # same messages as from the captured frame.
    for scenario in golden_scenarios:
        if scenario.codec != pb.ZLIB:
            continue
        for frame in scenario.payload_frames(BROKER_TO_CLIENT):
            meta = frame.metadata
            raw = zlib.decompress(bytes(frame.payload))
            java = _java_style_zlib(raw)
            with pytest.raises(zlib.error):
                zlib.decompress(java)
            reframed = encode_payload_command(frame.command, meta, java)
            decoder = FrameDecoder()
            decoder.feed(reframed)
            (again,) = list(decoder)
            decoder.close()
            assert again.has_checksum

            mid = frame.command.message.message_id
            args = (to_signed64(mid.ledgerId), to_signed64(mid.entryId), mid.partition)
            original = open_entry(*args, meta, frame.payload)
            rebuilt = open_entry(*args, again.metadata, again.payload)
            assert bytes(rebuilt.data) == bytes(original.data) == raw
            assert rebuilt.starts == original.starts
            assert rebuilt.sizes == original.sizes


# ---------------------------------------------------------------------------
# (d) any cut of the byte stream gives the same frames
# ---------------------------------------------------------------------------


def _frame_key(frame: Frame) -> tuple:
    return (
        frame.offset,
        frame.size,
        frame.command.SerializeToString(),
        None if frame.metadata is None else frame.metadata.SerializeToString(),
        None if frame.payload is None else bytes(frame.payload),
        frame.has_checksum,
    )


def _decode_in_pieces(data: bytes, sizes) -> list[tuple]:
    decoder = FrameDecoder()
    out = []
    pos = 0
    for size in sizes:
        piece = data[pos : pos + size]
        pos += size
        decoder.feed(piece)
        while (frame := decoder.next_frame()) is not None:
            out.append(_frame_key(frame))
        if pos >= len(data):
            break
    assert pos >= len(data)
    assert decoder.buffered == 0
    decoder.close()
    return out


def _whole(data: bytes) -> list[tuple]:
    decoder = FrameDecoder()
    decoder.feed(data)
    frames = [_frame_key(f) for f in decoder]
    decoder.close()
    return frames


def test_byte_by_byte_gives_the_same_frames(golden, direction) -> None:
    data = golden.data(direction)
    whole = _whole(data)
    assert sum(key[1] for key in whole) == len(data)  # frames tile the capture
    assert _decode_in_pieces(data, [1] * len(data)) == whole


@pytest.mark.parametrize("seed", range(4))
def test_random_pieces_give_the_same_frames(golden, direction, seed) -> None:
    data = golden.data(direction)
    rng = random.Random(f"{golden.name}/{direction}/{seed}")
    biggest = rng.choice([7, 64, 1500, 20_000])
    sizes = []
    while sum(sizes) < len(data):
        sizes.append(rng.randint(1, biggest))
    assert _decode_in_pieces(data, sizes) == _whole(data)


def test_payload_bytes_survive_base64(golden) -> None:
    # Guard for the comparisons above: the expected file's payloads are real base64.
    for message in golden.messages:
        assert base64.b64encode(base64.b64decode(message["payload"])).decode() == message["payload"]
