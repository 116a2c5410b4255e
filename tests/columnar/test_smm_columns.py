"""The vectorized SingleMessageMetadata decoder against upb, field by field.

Every property lays several metadata out in one buffer with random bytes
between them (as payloads sit between them in a batch), decodes them with
:func:`decode_smm_columns`, and compares each item with what the generated
protobuf module (upb) parses from the same bytes. Inputs that upb rejects
must raise :class:`BatchDecodeError` and nothing else; the one documented
difference is groups (wire types 3 and 4), which upb skips and this decoder
rejects.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pulsar_spark.columnar.gather import gather_binary, gather_string, map_array
from pulsar_spark.columnar.rows.smm import walk as smm_walk
from pulsar_spark.columnar.rows.smm.columns import decode_smm_columns
from pulsar_spark.columnar.rows.smm.layout import same_layout
from pulsar_spark.columnar.rows.smm.schema import SmmColumns
from pulsar_spark.protocol import FrameDecoder, open_entry, pb
from pulsar_spark.protocol.errors import BatchDecodeError

SMM = pb.SingleMessageMetadata
U64 = (1 << 64) - 1
# 100 examples per property and walk: their seeds vary between runs, so CI covers more
# over time than one long run would (300 cost CI a minute and a half).
SETTINGS = settings(
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(autouse=True, params=["steps", "each"])
def walk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test twice: as the walk usually goes (one step per field, for all
    items at once), and with every item handed to the per-item path that
    finishes long items, reading them in tiny windows."""
    if request.param == "each":
        monkeypatch.setattr(smm_walk, "_MANY_STEPS", 0)
        monkeypatch.setattr(smm_walk, "_FEW_LEFT", 10**9)
        monkeypatch.setattr(smm_walk, "_WINDOW", 7)
    return request.param


# ---------------------------------------------------------------------------
# A small protobuf encoder that can write what protobuf libraries never do:
# any field order, repeats, unknown fields, over-long (non-canonical) varints.
# ---------------------------------------------------------------------------


def varint(value: int, pad: int = 0) -> bytes:
    """``value`` (< 2**64) as a varint, ``pad`` bytes longer than needed."""
    out = bytearray()
    while True:
        if value < 0x80:
            out.append(value)
            break
        out.append(value & 0x7F | 0x80)
        value >>= 7
    if pad:
        out[-1] |= 0x80
        out += b"\x80" * (pad - 1) + b"\x00"
    return bytes(out)


def tag(field: int, wire: int, pad: int = 0) -> bytes:
    return varint(field << 3 | wire, pad)


def vfield(field: int, value: int, tag_pad: int = 0, pad: int = 0) -> bytes:
    return tag(field, 0, tag_pad) + varint(value, pad)


def lfield(field: int, data: bytes, tag_pad: int = 0, pad: int = 0) -> bytes:
    return tag(field, 2, tag_pad) + varint(len(data), pad) + data


def pad_for(value: int, limit: int) -> st.SearchStrategy[int]:
    """Extra varint bytes that keep ``value`` within ``limit`` bytes."""
    return st.integers(0, max(0, limit - len(varint(value)))) | st.just(0)


def layout(
    bodies: list[bytes], gaps: list[bytes] | None = None
) -> tuple[bytes, np.ndarray, np.ndarray]:
    """Bodies in one buffer, each after its gap (default: a 4-byte size prefix)."""
    buf = bytearray()
    starts, ends = [], []
    for i, body in enumerate(bodies):
        buf += gaps[i] if gaps is not None else struct.pack(">I", len(body))
        starts.append(len(buf))
        buf += body
        ends.append(len(buf))
    if gaps is not None and len(gaps) > len(bodies):
        buf += gaps[-1]
    return bytes(buf), np.array(starts, np.int64), np.array(ends, np.int64)


# ---------------------------------------------------------------------------
# Comparison with upb
# ---------------------------------------------------------------------------


def _raw(value: str | bytes) -> bytes:
    # proto2 strings: upb hands back bytes when they are not UTF-8.
    return value.encode() if isinstance(value, str) else value


def upb_view(body: bytes) -> dict[str, Any]:
    """What upb parses from one item, in the shape of :func:`columns_view`."""
    m = SMM.FromString(body)
    return {
        "payload_size": m.payload_size,
        "has_payload_size": m.HasField("payload_size"),
        "compacted_out": m.compacted_out,
        "event_time": m.event_time,
        "partition_key_b64_encoded": m.partition_key_b64_encoded,
        "has_sequence_id": m.HasField("sequence_id"),
        "sequence_id": m.sequence_id,
        "null_value": m.null_value,
        "null_partition_key": m.null_partition_key,
        "key": _raw(m.partition_key) if m.HasField("partition_key") else None,
        "ordering_key": m.ordering_key if m.HasField("ordering_key") else None,
        "properties": [(_raw(kv.key), _raw(kv.value)) for kv in m.properties],
    }


def columns_view(cols: SmmColumns, buf: bytes, i: int) -> dict[str, Any]:
    """Item ``i`` of decoded columns, as plain Python values."""

    def cut(start: int, length: int) -> bytes:
        return buf[start : start + length]

    lo, hi = int(cols.prop_offsets[i]), int(cols.prop_offsets[i + 1])
    return {
        "payload_size": int(cols.payload_size[i]),
        "has_payload_size": bool(cols.has_payload_size[i]),
        "compacted_out": bool(cols.compacted_out[i]),
        "event_time": int(cols.event_time[i]),
        "partition_key_b64_encoded": bool(cols.partition_key_b64_encoded[i]),
        "has_sequence_id": bool(cols.has_sequence_id[i]),
        "sequence_id": int(cols.sequence_id[i]),
        "null_value": bool(cols.null_value[i]),
        "null_partition_key": bool(cols.null_partition_key[i]),
        "key": cut(cols.key_start[i], cols.key_len[i]) if cols.has_key[i] else None,
        "ordering_key": (
            cut(cols.ordering_key_start[i], cols.ordering_key_len[i])
            if cols.has_ordering_key[i]
            else None
        ),
        "properties": [
            (
                cut(cols.prop_key_start[k], cols.prop_key_len[k]),
                cut(cols.prop_value_start[k], cols.prop_value_len[k]),
            )
            for k in range(lo, hi)
        ],
    }


def check_columns(cols: SmmColumns, n: int) -> None:
    """Shapes and dtypes promised by :class:`SmmColumns`."""
    for name in SmmColumns._fields[1:]:
        array = getattr(cols, name)
        if name == "prop_offsets":
            assert array.dtype == np.int32
            assert len(array) == n + 1
        elif not name.startswith("prop_"):
            assert len(array) == n, name
    assert cols.payload_size.dtype == np.int64
    assert cols.event_time.dtype == np.uint64
    assert cols.sequence_id.dtype == np.uint64
    assert cols.has_key.dtype == np.bool_
    assert cols.key_start.dtype == np.int64
    pairs = int(cols.prop_offsets[-1])
    for name in ("prop_key_start", "prop_key_len", "prop_value_start", "prop_value_len"):
        array = getattr(cols, name)
        assert array.dtype == np.int64
        assert len(array) == pairs


def assert_like_upb(bodies: list[bytes], gaps: list[bytes] | None = None) -> SmmColumns:
    buf, starts, ends = layout(bodies, gaps)
    cols = decode_smm_columns(buf, starts, ends)
    check_columns(cols, len(bodies))
    for i, body in enumerate(bodies):
        assert columns_view(cols, buf, i) == upb_view(body), (i, body.hex())
    return cols


# ---------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------

u64s = st.integers(0, U64) | st.sampled_from([0, 1, 127, 128, 2**32, 2**63, U64])
texts = st.text(max_size=12) | st.sampled_from(["", "ü", "ñ", "key-123", "日本"])
gap_bytes = st.binary(max_size=12)


@st.composite
def smm_objects(draw: st.DrawFn) -> bytes:
    """A SingleMessageMetadata as the protobuf module serializes it."""
    m = SMM()
    for key, value in draw(st.lists(st.tuples(texts, texts), max_size=4)):
        kv = m.properties.add()
        kv.key = key
        kv.value = value
    if draw(st.booleans()):
        m.partition_key = draw(texts)
    if draw(st.booleans()):
        m.payload_size = draw(st.integers(-(2**31), 2**31 - 1) | st.sampled_from([0, 1, 100]))
    if draw(st.booleans()):
        m.event_time = draw(u64s)
    if draw(st.booleans()):
        m.sequence_id = draw(u64s)
    if draw(st.booleans()):
        m.ordering_key = draw(st.binary(max_size=8))
    for name in (
        "compacted_out",
        "partition_key_b64_encoded",
        "null_value",
        "null_partition_key",
    ):
        if draw(st.booleans()):
            setattr(m, name, draw(st.booleans()))
    return m.SerializePartialToString()  # payload_size is required, but may be missing


#: Wire type of each field number of SingleMessageMetadata and of KeyValue.
SMM_WIRE = {1: 2, 2: 2, 3: 0, 4: 0, 5: 0, 6: 0, 7: 2, 8: 0, 9: 0, 10: 0}
KV_WIRE = {1: 2, 2: 2}


@st.composite
def unknown_fields(draw: st.DrawFn, known: dict[int, int]) -> bytes:
    """A field upb skips: an unknown number, or a known one with another wire type."""
    field = draw(
        st.integers(len(known) + 1, 40)
        | st.integers(16, 2**29 - 1)
        | st.integers(1, len(known))  # with another wire type
    )
    wire = draw(st.sampled_from([w for w in (0, 1, 2, 5) if w != known.get(field)]))
    head = tag(field, wire, draw(pad_for(field << 3 | wire, 5)))
    if wire == 0:
        value = draw(u64s)
        return head + varint(value, draw(pad_for(value, 10)))
    if wire == 1:
        return head + draw(st.binary(min_size=8, max_size=8))
    if wire == 5:
        return head + draw(st.binary(min_size=4, max_size=4))
    data = draw(st.binary(max_size=10))
    return head + varint(len(data), draw(pad_for(len(data), 5))) + data


def _strings() -> st.SearchStrategy[bytes]:
    # Mostly UTF-8; proto2 strings may be anything on the wire.
    return texts.map(str.encode) | st.binary(max_size=6)


@st.composite
def key_values(draw: st.DrawFn) -> bytes:
    """A KeyValue: key and value any number of times, unknown fields, any order."""
    fields = []
    for number in (1, 2):
        for data in draw(st.lists(_strings(), max_size=2)):
            tag_pad = draw(pad_for(number << 3, 5))
            fields.append(lfield(number, data, tag_pad, draw(pad_for(len(data), 5))))
    fields += draw(st.lists(unknown_fields(KV_WIRE), max_size=2))
    return b"".join(draw(st.permutations(fields)))


@st.composite
def hand_built(draw: st.DrawFn) -> bytes:
    """A SingleMessageMetadata as no library writes it, but every parser must read it."""
    fields = []

    def add_varint(number: int, values: st.SearchStrategy[int]) -> None:
        for value in draw(st.lists(values, max_size=2)):
            fields.append(
                vfield(number, value, draw(pad_for(number << 3, 5)), draw(pad_for(value, 10)))
            )

    def add_bytes(number: int, values: st.SearchStrategy[bytes], most: int) -> None:
        for data in draw(st.lists(values, max_size=most)):
            tag_pad = draw(pad_for(number << 3, 5))
            fields.append(lfield(number, data, tag_pad, draw(pad_for(len(data), 5))))

    add_bytes(1, key_values(), 4)
    add_bytes(2, _strings(), 2)
    add_varint(3, st.integers(0, 2**31 - 1) | st.integers(2**63, U64) | u64s)
    add_varint(4, u64s)
    add_varint(5, u64s)
    add_varint(6, u64s)
    add_bytes(7, st.binary(max_size=6), 2)
    add_varint(8, u64s)
    add_varint(9, u64s)
    add_varint(10, u64s)
    fields += draw(st.lists(unknown_fields(SMM_WIRE), max_size=3))
    return b"".join(draw(st.permutations(fields)))


# ---------------------------------------------------------------------------
# Well-formed metadata: the same values as upb
# ---------------------------------------------------------------------------


@SETTINGS
@given(st.lists(st.tuples(smm_objects(), gap_bytes), min_size=1, max_size=12), gap_bytes)
def test_serialized_metadata_like_upb(items: list[tuple[bytes, bytes]], tail: bytes) -> None:
    assert_like_upb([body for body, _ in items], [gap for _, gap in items] + [tail])


@SETTINGS
@given(st.lists(st.tuples(hand_built(), gap_bytes), min_size=1, max_size=8))
def test_hand_built_metadata_like_upb(items: list[tuple[bytes, bytes]]) -> None:
    assert_like_upb([body for body, _ in items], [gap for _, gap in items])


GOLDEN_LIKE = bytes.fromhex(
    "0a080a036964781201310a0e0a046b696e641206676f6c64656e0a080a02c3bc1202c3b1"
    "12056b65792d3118032881d095ffbc314001"
)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"", id="empty"),
        pytest.param(GOLDEN_LIKE, id="golden-item"),
        pytest.param(
            vfield(8, 5) + vfield(3, 7) + lfield(2, b"k") + vfield(5, 9), id="out-of-order"
        ),
        pytest.param(vfield(3, 1) + vfield(3, 2) + vfield(3, 3), id="repeated-scalar"),
        pytest.param(lfield(2, b"a") + lfield(2, b"") + vfield(6, 1), id="repeated-key"),
        pytest.param(vfield(4, 1) + vfield(4, 0) + vfield(9, 2) + vfield(10, 0, pad=3), id="bools"),
        pytest.param(vfield(3, 2**32 + 5), id="payload-size-low-32-bits"),
        pytest.param(vfield(3, U64), id="payload-size-minus-one"),
        pytest.param(vfield(3, 2**31), id="payload-size-int32-min"),
        pytest.param(vfield(5, U64) + vfield(8, 2**63), id="large-uint64"),
        pytest.param(vfield(5, 1, pad=9), id="10-byte-varint"),
        pytest.param(b"\x28" + b"\xff" * 9 + b"\x7f", id="10th-byte-extra-bits"),
        pytest.param(vfield(3, 1, tag_pad=4), id="5-byte-tag-known-field"),
        pytest.param(tag(2, 2) + b"\x83\x80\x80\x80\x00abc", id="5-byte-length"),
        pytest.param(vfield(11, 1) + vfield(3, 4), id="unknown-varint"),
        pytest.param(tag(12, 1) + bytes(8) + vfield(3, 4), id="unknown-fixed64"),
        pytest.param(tag(13, 5) + bytes(4) + vfield(3, 4), id="unknown-fixed32"),
        pytest.param(lfield(14, b"\x00\xff") + vfield(3, 4), id="unknown-bytes"),
        pytest.param(
            vfield(16, 300) + lfield(2**29 - 1, b"xy") + vfield(3, 4), id="multi-byte-tags"
        ),
        pytest.param(b"\xf8\xff\xff\xff\x0f\x00" + vfield(3, 1), id="tag-2**32-1"),
        pytest.param(
            lfield(3, b"\x05") + vfield(3, 7) + lfield(5, b""), id="known-number-wrong-type"
        ),
        pytest.param(tag(1, 0) + b"\x05" + tag(1, 5) + bytes(4), id="properties-wrong-type"),
        pytest.param(lfield(1, b"") + lfield(1, lfield(2, b"v") + lfield(1, b"k")), id="kv-shapes"),
        pytest.param(lfield(1, lfield(1, b"a") + lfield(1, b"b") + vfield(3, 1)), id="kv-repeats"),
        pytest.param(
            lfield(1, lfield(1, b"a", pad=2) + lfield(2, b"b", tag_pad=1)), id="kv-padded"
        ),
        pytest.param(lfield(2, b"\xff\xfe") + lfield(1, lfield(1, b"\xc3")), id="not-utf8"),
        pytest.param(
            lfield(1, lfield(1, b"k" * 200) + lfield(2, b"v" * 300)), id="kv-long-strings"
        ),
        pytest.param(lfield(2, b"x" * 20000), id="3-byte-length"),
    ],
)
def test_examples_like_upb(body: bytes) -> None:
    assert_like_upb([GOLDEN_LIKE, body, body, GOLDEN_LIKE])
    assert_like_upb([body], [b""])  # nothing after the item: loads stop at the buffer end


def test_no_items() -> None:
    cols = decode_smm_columns(b"", np.zeros(0, np.int64), np.zeros(0, np.int64))
    check_columns(cols, 0)
    assert cols.prop_offsets.tolist() == [0]
    assert len(map_array(cols)) == 0


def test_many_items_with_different_field_counts() -> None:
    bodies = []
    for i in range(300):
        m = SMM(payload_size=i, sequence_id=i * 7919)
        for k in range(i % 23):
            kv = m.properties.add()
            kv.key = f"k{k}"
            kv.value = "v" * (k * 13 % 150)
        if i % 3:
            m.partition_key = f"key-{i}"
        if i % 5 == 0:
            m.event_time = 1_700_000_000_000 + i
        bodies.append(m.SerializeToString())
    assert_like_upb(bodies)


@settings(SETTINGS, max_examples=60)
@given(
    st.lists(
        st.tuples(u64s, u64s, st.integers(-(2**31), 2**31 - 1), st.booleans()),
        min_size=65,
        max_size=150,
    )
)
def test_many_varints_like_upb(values: list[tuple[int, int, int, bool]]) -> None:
    """Enough multi-byte varints for the 8-byte loads, up to the buffer's last byte."""
    bodies = [
        SMM(event_time=a, sequence_id=b, payload_size=c, null_value=d).SerializePartialToString()
        for a, b, c, d in values
    ]
    assert_like_upb(bodies, [b""] * len(bodies))


def test_over_long_varint_among_many() -> None:
    bodies = [vfield(5, 2**63 + k) + vfield(3, 300) for k in range(100)]
    bodies[70] = tag(5, 0) + b"\x80" * 10 + b"\x00" + vfield(3, 300)
    buf, starts, ends = layout(bodies)
    with pytest.raises(BatchDecodeError, match=r"batch item 70\b.*over-long"):
        decode_smm_columns(buf, starts, ends)


def test_long_messages_among_short_ones() -> None:
    """A few items with many fields finish on the per-message path (and cross windows)."""
    m = SMM(payload_size=3, partition_key="k")
    for k in range(1500):
        kv = m.properties.add()
        kv.key = f"key-{k}"
        kv.value = "ü" * (k % 7)
    many_props = m.SerializePartialToString()
    many_unknown = vfield(20, 1) * 40_000 + lfield(2, b"last") + vfield(3, 2**40 + 9)
    repeated = b"".join(
        vfield(5, k * 1_000_003) + lfield(1, lfield(1, b"%d" % k)) for k in range(300)
    )
    bodies = [GOLDEN_LIKE] * 20 + [many_props, GOLDEN_LIKE, many_unknown, repeated, b""]
    assert_like_upb(bodies)


def test_long_message_error_names_its_item() -> None:
    bad = vfield(20, 1) * 70_000 + tag(3, 7)
    buf, starts, ends = layout([GOLDEN_LIKE] * 3 + [bad, GOLDEN_LIKE])
    with pytest.raises(BatchDecodeError, match=r"batch item 3\b.*offset 210000\b"):
        decode_smm_columns(buf, starts, ends)


def test_golden_batches(golden_scenarios: list[Any]) -> None:
    """Real batches from the official client: same as upb, and as the producer sent."""
    checked = 0
    for scenario in golden_scenarios:
        if not scenario.batched:
            continue
        decoder = FrameDecoder()
        decoder.feed(scenario.data("broker-to-client"))
        expected = iter(scenario.messages)
        for frame in decoder:
            if frame.metadata is None:
                continue
            entry = open_entry(1, 2, -1, frame.metadata, frame.payload)
            data = bytes(entry.data)
            starts, ends = [], []
            pos = 0
            for size in entry.sizes:
                (smm_size,) = struct.unpack_from(">I", data, pos)
                starts.append(pos + 4)
                ends.append(pos + 4 + smm_size)
                pos = ends[-1] + size
            bodies = [data[s:e] for s, e in zip(starts, ends, strict=True)]
            cols = decode_smm_columns(data, np.array(starts), np.array(ends))
            for i, body in enumerate(bodies):
                assert columns_view(cols, data, i) == upb_view(body)
            assert cols.payload_size.tolist() == list(entry.sizes)
            keys = gather_binary(data, cols.key_start, cols.key_len, cols.has_key)
            props = map_array(cols)
            for i in range(len(bodies)):
                message = next(expected)
                key = message["key"]
                assert keys[i].as_py() == (None if key is None else key.encode())
                assert dict(props[i].as_py()) == message["properties"]
                assert int(cols.event_time[i]) == (message["event_time"] or 0)
                checked += 1
    assert checked


# ---------------------------------------------------------------------------
# Malformed metadata
# ---------------------------------------------------------------------------

MALFORMED = {
    "tag-without-value": vfield(3, 1) + tag(3, 0),
    "truncated-varint": tag(5, 0) + b"\x80\x80",
    "truncated-tag": b"\x80",
    "truncated-tag-after-field": vfield(3, 1) + b"\x98\x80",
    "length-past-end": tag(2, 2) + b"\x05abc",
    "huge-length": tag(2, 2) + b"\xff\xff\xff\xff\x07",
    "fixed64-past-end": tag(11, 1) + b"\x01\x02\x03",
    "fixed32-past-end": tag(11, 5) + b"\x01",
    "end-group": tag(11, 4),
    "wire-type-6": tag(11, 6) + b"\x00",
    "wire-type-7": tag(3, 7) + bytes(8),
    "field-0": b"\x00\x01",
    "field-0-bytes": b"\x02\x00",
    "field-0-long-tag": b"\x80\x00\x01",
    "11-byte-varint": tag(5, 0) + b"\xff" * 10 + b"\x01",
    "11-byte-unknown-varint": tag(20, 0) + b"\x80" * 10 + b"\x00",
    "6-byte-tag": tag(3, 0, pad=5) + b"\x01",
    "tag-above-2**32": b"\xf8\xff\xff\xff\x1f\x00",
    "6-byte-length": tag(2, 2) + varint(1, pad=5) + b"a",
    "kv-truncated-varint": lfield(1, tag(3, 0) + b"\x81"),
    "kv-varint-crossing-its-end": lfield(1, tag(3, 0) + b"\x81") + b"\x01",
    "kv-tag-at-end": lfield(1, tag(1, 2)),
    "kv-length-past-its-end": lfield(1, tag(1, 2) + b"\x05") + b"abcdef",
    "kv-wire-type-7": lfield(1, tag(1, 7)),
    "kv-field-0": lfield(1, b"\x00\x00"),
    "kv-start-group": lfield(1, tag(3, 3)),
}


def _upb_rejects(body: bytes) -> bool:
    try:
        SMM.FromString(body)
    except DecodeError:
        return True
    return False


@pytest.mark.parametrize("body", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_raises(body: bytes) -> None:
    assert _upb_rejects(body)
    buf, starts, ends = layout([GOLDEN_LIKE, GOLDEN_LIKE, body, GOLDEN_LIKE, body])
    with pytest.raises(BatchDecodeError, match=r"batch item 2\b"):
        decode_smm_columns(buf, starts, ends)
    # Also as the very last bytes of the buffer.
    buf, starts, ends = layout([body], [b""])
    with pytest.raises(BatchDecodeError, match=r"batch item 0\b"):
        decode_smm_columns(buf, starts, ends)


GROUPS = {
    "empty-group": tag(11, 3) + tag(11, 4) + vfield(3, 1),
    "group-with-fields": tag(7, 3) + vfield(1, 5) + tag(7, 4) + vfield(3, 1),
    "group-in-kv": lfield(1, tag(5, 3) + tag(5, 4)),
}


@pytest.mark.parametrize("body", GROUPS.values(), ids=GROUPS.keys())
def test_groups_are_rejected_unlike_upb(body: bytes) -> None:
    """The one known difference: upb skips unknown groups, this decoder refuses them."""
    SMM.FromString(body)  # upb accepts
    buf, starts, ends = layout([GOLDEN_LIKE, body])
    with pytest.raises(BatchDecodeError, match=r"batch item 1\b.*group"):
        decode_smm_columns(buf, starts, ends)


def test_error_names_lowest_failing_item() -> None:
    # Item 3 fails in the first field, item 1 only in its fourth, item 2 in a property.
    late = vfield(3, 1) + vfield(5, 2) + vfield(8, 3) + tag(2, 2) + b"\x09"
    in_kv = lfield(1, lfield(1, b"k") + b"\x0f")
    early = b"\x0f"
    buf, starts, ends = layout([GOLDEN_LIKE, late, in_kv, early])
    with pytest.raises(BatchDecodeError, match=r"batch item 1\b"):
        decode_smm_columns(buf, starts, ends)
    buf, starts, ends = layout([GOLDEN_LIKE, GOLDEN_LIKE, in_kv, early])
    with pytest.raises(BatchDecodeError, match=r"batch item 2\b.*property 0"):
        decode_smm_columns(buf, starts, ends)


@pytest.mark.parametrize(
    ("starts", "ends"),
    [([0, 5], [5, 40]), ([-1], [3]), ([4], [3])],
    ids=["end-past-buffer", "negative-start", "end-before-start"],
)
def test_ranges_outside_the_buffer(starts: list[int], ends: list[int]) -> None:
    with pytest.raises(BatchDecodeError, match=r"batch item \d+ .*outside"):
        decode_smm_columns(bytes(20), np.array(starts), np.array(ends))


def _compare_or_reject(body: bytes, gap: bytes) -> None:
    """Whatever the bytes: upb's result, or BatchDecodeError where upb fails (or meets a group)."""
    bodies = [GOLDEN_LIKE, body, GOLDEN_LIKE]
    buf, starts, ends = layout(bodies, [gap, gap, gap, gap])
    try:
        cols = decode_smm_columns(buf, starts, ends)
    except BatchDecodeError as exc:
        assert "batch item 1 " in str(exc)
        if not _upb_rejects(body):
            assert "group" in str(exc), (body.hex(), str(exc))
        return
    assert not _upb_rejects(body), body.hex()
    for i, item in enumerate(bodies):
        assert columns_view(cols, buf, i) == upb_view(item)


@SETTINGS
@given(st.binary(max_size=40), gap_bytes)
def test_random_bytes(body: bytes, gap: bytes) -> None:
    _compare_or_reject(body, gap)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    body = bytearray(draw(hand_built() | smm_objects()))
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["set", "insert", "delete", "cut"]))
        at = draw(st.integers(0, len(body)))
        if op == "set" and at < len(body):
            body[at] = draw(st.integers(0, 255))
        elif op == "insert":
            body[at:at] = draw(st.binary(min_size=1, max_size=3))
        elif op == "delete":
            del body[at : at + draw(st.integers(1, 3))]
        else:
            del body[at:]
    return bytes(body)


@SETTINGS
@given(mutated(), gap_bytes)
def test_mutated_metadata(body: bytes, gap: bytes) -> None:
    _compare_or_reject(body, gap)


# ---------------------------------------------------------------------------
# Arrow arrays
# ---------------------------------------------------------------------------


def test_gather_binary_and_string() -> None:
    buf = b"..hello..w\xc3\xb6rld.."
    starts = np.array([2, 9, 0, 5])
    lens = np.array([5, 6, 0, 0])
    assert gather_binary(buf, starts, lens).to_pylist() == [b"hello", b"w\xc3\xb6rld", b"", b""]
    strings = gather_string(buf, starts, lens, np.array([True, True, False, True]))
    assert strings.type == pa.string()
    assert strings.to_pylist() == ["hello", "wörld", None, ""]
    assert strings.null_count == 1
    strings.validate(full=True)
    empty = gather_binary(buf, np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert empty.to_pylist() == []


def test_gather_string_rejects_invalid_utf8() -> None:
    buf = b"ok\xc3("
    with pytest.raises(BatchDecodeError, match="string 1 is not valid UTF-8"):
        gather_string(buf, np.array([0, 2]), np.array([2, 2]))
    # A null element's bytes are not looked at.
    assert gather_string(buf, np.array([0, 2]), np.array([2, 2]), np.array([1, 0])).to_pylist() == [
        "ok",
        None,
    ]


@pytest.mark.parametrize("kind", [bytearray, memoryview, lambda b: np.frombuffer(b, np.uint8)])
def test_buffer_types(kind: Any) -> None:
    buf, starts, ends = layout([GOLDEN_LIKE, b"", GOLDEN_LIKE])
    cols = decode_smm_columns(kind(buf), starts.tolist(), ends.tolist())
    for i, body in enumerate([GOLDEN_LIKE, b"", GOLDEN_LIKE]):
        assert columns_view(cols, buf, i) == upb_view(body)
    keys = gather_string(kind(buf), cols.key_start, cols.key_len, np.ones(3, bool))
    assert keys.to_pylist() == ["key-1", "", "key-1"]
    assert keys.null_count == 0


def test_mismatched_lengths() -> None:
    with pytest.raises(ValueError, match="starts but"):
        decode_smm_columns(b"abc", np.array([0, 1]), np.array([1]))
    with pytest.raises(ValueError, match="starts but"):
        gather_binary(b"abc", np.array([0, 1]), np.array([1]))
    with pytest.raises(ValueError, match="mask"):
        gather_binary(b"abc", np.array([0, 1]), np.array([1, 1]), np.array([True]))


def test_gather_rejects_ranges_outside_the_buffer() -> None:
    with pytest.raises(ValueError, match="outside"):
        gather_binary(b"abc", np.array([2]), np.array([2]))


def test_map_array() -> None:
    bodies = [
        GOLDEN_LIKE,
        b"",
        lfield(1, lfield(1, "ü".encode()) + lfield(2, b"") + lfield(2, b"x")) + lfield(1, b""),
    ]
    buf, starts, ends = layout(bodies)
    cols = decode_smm_columns(buf, starts, ends)
    props = map_array(cols)
    assert props.type == pa.map_(pa.string(), pa.string())
    assert props.null_count == 0
    assert props.to_pylist() == [
        [("idx", "1"), ("kind", "golden"), ("ü", "ñ")],
        [],
        [("ü", "x"), ("", "")],
    ]


def test_map_array_rejects_invalid_utf8() -> None:
    bodies = [
        GOLDEN_LIKE,
        lfield(1, lfield(1, b"a") + lfield(2, b"b")) + lfield(1, lfield(2, b"\xff")),
    ]
    buf, starts, ends = layout(bodies)
    cols = decode_smm_columns(buf, starts, ends)
    with pytest.raises(BatchDecodeError, match="property 1 of batch item 1 has a value"):
        map_array(cols)


# ---------------------------------------------------------------------------
# Items laid out alike: read at fixed offsets, no walk
# ---------------------------------------------------------------------------

#: (field, wire type) of the fields a layout may hold: every known one but
#: properties, and unknown ones of each skippable wire type.
_LAYOUT_FIELDS = [
    (2, 2),
    (3, 0),
    (4, 0),
    (5, 0),
    (6, 0),
    (7, 2),
    (8, 0),
    (9, 0),
    (10, 0),
    (12, 0),
    (13, 2),
    (14, 1),
    (15, 5),
]


@st.composite
def same_layout_items(draw: st.DrawFn) -> list[bytes]:
    """Several metadata with one layout: the same fields, each value of one size."""
    spec = draw(
        st.lists(
            st.tuples(st.sampled_from(_LAYOUT_FIELDS), st.integers(1, 9)),
            min_size=1,
            max_size=6,
        )
    )
    bodies = []
    for _ in range(draw(st.integers(2, 6))):
        body = b""
        for (field, wire), size in spec:
            if wire == 0:
                value = draw(st.integers(0, 2 ** (7 * size) - 1))
                body += vfield(field, value, pad=size - len(varint(value)))
            elif wire == 2:
                body += lfield(field, draw(st.binary(min_size=size, max_size=size)))
            else:
                body += tag(field, wire) + draw(
                    st.binary(min_size=8 if wire == 1 else 4, max_size=8 if wire == 1 else 4)
                )
        bodies.append(body)
    return bodies


@SETTINGS
@given(same_layout_items())
def test_items_laid_out_alike_are_read_at_fixed_offsets(bodies: list[bytes]) -> None:
    buf, starts, ends = layout(bodies)
    assert same_layout(np.frombuffer(buf, np.uint8), starts, ends) is not None
    assert_like_upb(bodies)


def test_layouts_that_differ_are_walked() -> None:
    # Same size, but the sequence id and the event time swap varint lengths.
    bodies = [
        vfield(3, 10) + vfield(8, 300) + vfield(5, 1),
        vfield(3, 10) + vfield(8, 3) + vfield(5, 300),
        vfield(3, 10) + vfield(8, 3, pad=1) + vfield(5, 1, pad=1),
    ]
    buf, starts, ends = layout(bodies)
    assert same_layout(np.frombuffer(buf, np.uint8), starts, ends) is None
    assert_like_upb(bodies)
    # A key of another length, and properties, are walked too.
    for other in (
        [lfield(2, b"ab"), lfield(2, b"abc")],
        [lfield(1, lfield(1, b"k") + lfield(2, b"v"))] * 2,
    ):
        buf, starts, ends = layout(other)
        assert same_layout(np.frombuffer(buf, np.uint8), starts, ends) is None
        assert_like_upb(other)


def test_a_repeated_field_in_a_layout_keeps_its_last_value() -> None:
    bodies = [
        vfield(3, 5) + vfield(8, 7) + vfield(3, 6),
        vfield(3, 9) + vfield(8, 1) + vfield(3, 2),
    ]
    cols = assert_like_upb(bodies)
    assert cols.payload_size.tolist() == [6, 2]


def test_an_over_long_length_prefix_is_refused_however_many_items_share_it() -> None:
    # A key length of 5 written in 6 bytes: not a varint32, for the layout path as for
    # the walk (and upb).
    body = vfield(3, 3) + tag(2, 2) + varint(5, pad=5) + b"abcde"
    for count in (1, 2, 3):
        buf, starts, ends = layout([body] * count)
        with pytest.raises(BatchDecodeError):
            decode_smm_columns(buf, starts, ends)
