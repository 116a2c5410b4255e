"""Batch items of whole Arrow tables (:mod:`pulsar_spark.columnar.rows.send_items`) against the
row-by-row encoder (:mod:`pulsar_spark.columnar.rows.encode`) and against protobuf's own bytes."""

from __future__ import annotations

import datetime
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pulsar_spark.columnar.rows.encode import (
    InvalidRows,
    Rows,
    encode_items,
    separated_keys_field,
    single_metadata,
)
from pulsar_spark.columnar.rows.send_items import columnar_rows, item_block
from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol.wire import encode_varint

UTC = datetime.timezone.utc
PROPS = pa.map_(pa.string(), pa.string())


def _rows_way(table: pa.Table, seqs: np.ndarray) -> bytes:
    rows = Rows(table)
    items = [
        (int(seq), pre, null, value)
        for seq, pre, null, value in zip(seqs, rows.pres, rows.nulls, rows.values, strict=True)
    ]
    return encode_items(items)


def _canonical(smm: pb.SingleMessageMetadata) -> bytes:
    """The bytes we write: protobuf's, but null_partition_key (10) before sequence_id (8)."""
    if not smm.HasField("null_partition_key"):
        return smm.SerializeToString()
    rest = pb.SingleMessageMetadata()
    rest.CopyFrom(smm)
    rest.ClearField("null_partition_key")
    plain = rest.SerializeToString()
    tail = b"\x40" + encode_varint(smm.sequence_id) + (b"\x48\x01" if smm.null_value else b"")
    assert plain.endswith(tail)
    return plain[: -len(tail)] + b"\x50\x01" + tail


def _check(table: pa.Table, first: int = 0) -> None:
    seqs = np.arange(first, first + table.num_rows, dtype=np.int64)
    assert columnar_rows(table)
    block = item_block(table, seqs)
    assert block.n == table.num_rows
    assert block.data.tobytes() == _rows_way(table, seqs)
    # every item where starts says, each one as protobuf writes it
    data = block.data.tobytes()
    keys = table.column("key").to_pylist() if "key" in table.column_names else None
    separated = keys is not None and table.schema.field("key").metadata is not None
    for row in range(min(block.n, 40)):
        item = data[block.starts[row] : block.starts[row + 1]]
        (size,) = struct.unpack_from(">I", item)
        smm = pb.SingleMessageMetadata.FromString(item[4 : 4 + size])
        assert _canonical(smm) == item[4 : 4 + size]
        assert smm.sequence_id == first + row
        assert smm.payload_size == len(item) - 4 - size
        # null_partition_key: only the null keys of SEPARATED KEY_VALUE keys
        null_key = separated and keys is not None and keys[row] is None
        assert smm.HasField("null_partition_key") == null_key
        assert smm.null_partition_key == null_key
        if null_key:
            assert not smm.HasField("partition_key")
            assert not smm.HasField("partition_key_b64_encoded")


values = st.one_of(st.none(), st.binary(max_size=40))
keys = st.one_of(st.none(), st.text(max_size=12), st.binary(max_size=12))
props = st.one_of(
    st.none(),
    st.dictionaries(st.text(max_size=6), st.text(max_size=10), max_size=3),
)
times = st.one_of(st.none(), st.integers(0, 2**45))


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(st.tuples(values, keys, props, times), max_size=60),
    columns=st.sets(st.sampled_from(["key", "properties", "eventTime"])),
    first=st.sampled_from([0, 100, 16_380, 2**21 - 5, 2**40]),
    binary_keys=st.booleans(),
    separated=st.booleans(),
    slice_at=st.integers(0, 3),
)
def test_items_match_the_row_encoder(
    rows: list[tuple],
    columns: set[str],
    first: int,
    binary_keys: bool,
    separated: bool,
    slice_at: int,
) -> None:
    key_type = pa.binary() if binary_keys else pa.string()

    def key(k: object) -> object:
        if k is None:
            return None
        if binary_keys:
            return k if isinstance(k, bytes) else str(k).encode()
        return k if isinstance(k, str) else k.hex()  # type: ignore[union-attr]

    data: dict[str, pa.Array] = {"value": pa.array([r[0] for r in rows], pa.binary())}
    if "key" in columns:
        data["key"] = pa.array([key(r[1]) for r in rows], key_type)
    if "properties" in columns:
        maps = [None if r[2] is None else list(r[2].items()) for r in rows]
        data["properties"] = pa.array(maps, PROPS)
    if "eventTime" in columns:
        data["eventTime"] = pa.array([r[3] for r in rows], pa.int64())
    table = pa.table(data)
    if "key" in columns and binary_keys and separated:  # KEY_VALUE keys: null ones flagged
        index = table.column_names.index("key")
        table = table.set_column(index, separated_keys_field(), table.column("key"))
    _check(table.slice(min(slice_at, table.num_rows)), first)


@pytest.mark.parametrize("first", [0, 120, 16_000, 2_097_000])
def test_fixed_rows_across_sequence_id_widths(first: int) -> None:
    """Rows of one shape whose sequence ids change varint width midway (matrix runs)."""
    table = pa.table({"value": pa.array([b"v" * 100] * 1000, pa.binary())})
    _check(table, first)
    keyed = table.append_column("key", pa.array([f"key-{i:04d}" for i in range(1000)]))
    _check(keyed, first)


def test_string_values_timestamps_and_tombstones() -> None:
    moment = datetime.datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
    table = pa.table(
        {
            "value": pa.array(["a", None, "ccc", ""], pa.string()),
            "eventTime": pa.array([moment, None, moment, moment], pa.timestamp("us", tz="UTC")),
        }
    )
    _check(table)
    data = item_block(table, np.arange(4, dtype=np.int64)).data.tobytes()
    smm = pb.SingleMessageMetadata.FromString(data[4 : 4 + data[3]])
    assert smm.event_time == int(moment.timestamp() * 1000)
    seconds = pa.table({"value": pa.array([b"x"]), "eventTime": pa.array([5], pa.timestamp("s"))})
    _check(seconds)


def test_bad_rows_are_named() -> None:
    negative = pa.table({"value": pa.array([b"a", b"b"]), "eventTime": pa.array([1, -5])})
    with pytest.raises(InvalidRows, match="row 1: event time -5 is negative"):
        item_block(negative, np.arange(2, dtype=np.int64))
    maps = pa.array([[("a", "1")], [("k", None)]], PROPS)
    null_prop = pa.table({"value": pa.array([b"a", b"b"]), "properties": maps})
    with pytest.raises(InvalidRows, match="row 1: property 'k' has a null value"):
        item_block(null_prop, np.arange(2, dtype=np.int64))


def test_other_columns_go_row_by_row() -> None:
    assert not columnar_rows(pa.table({"key": pa.array([b"a"])}))
    assert not columnar_rows(pa.table({"value": pa.array([b"a"]), "other": pa.array([1])}))
    assert not columnar_rows(pa.table({"value": pa.array([1])}))
    assert not columnar_rows(
        pa.table({"value": pa.array([b"a"]), "eventTime": pa.array([datetime.date(2024, 1, 1)])})
    )
    assert columnar_rows(pa.table({"value": pa.array(["a"], pa.large_string())}))


def test_null_keys_of_separated_key_value_keys_carry_null_partition_key() -> None:
    """A SEPARATED KEY_VALUE key column's null rows get null_partition_key (SingleMessage
    field 10), as the Java client sets it; a null in a plain key column is just no key."""
    keys = pa.array([b"k", None, b"", None], pa.binary())
    plain = pa.table({"value": pa.array([b"a", b"b", None, b"d"]), "key": keys})
    marked = plain.set_column(1, separated_keys_field(), keys)
    seqs = np.arange(4, dtype=np.int64)
    for table, flagged in ((plain, [False] * 4), (marked, [False, True, False, True])):
        data = item_block(table, seqs).data.tobytes()
        assert data == _rows_way(table, seqs)
        at, got = 0, []
        for _ in range(4):
            (size,) = struct.unpack_from(">I", data, at)
            smm = pb.SingleMessageMetadata.FromString(data[at + 4 : at + 4 + size])
            got.append(smm.null_partition_key)
            at += 4 + size + smm.payload_size
        assert got == flagged
    # The row encoder's items: field 10 ends the tail, before sequence_id (8).
    rows = Rows(marked)
    assert rows.pres[1] == b"\x18\x01\x50\x01"
    assert rows.pres[0] == b"\x12\x04aw==\x18\x01\x30\x01"
    assert single_metadata((5, rows.pres[1], False, b"b")).null_partition_key
    # Keyless and plain-key tables encode as before: no tail work, no flag.
    assert Rows(plain).pres[1] == b"\x18\x01"
