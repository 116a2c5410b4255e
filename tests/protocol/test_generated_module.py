"""The committed ``PulsarApi_pb2.py`` must be what ``proto/PulsarApi.proto`` compiles to.

Regenerate it with ``python proto/generate.py`` when this fails.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FieldDescriptor

from pulsar_spark.protocol import PulsarApi_pb2 as pb

ROOT = Path(__file__).resolve().parents[2]
PROTO = ROOT / "proto" / "PulsarApi.proto"


def _clear_json_names(message: descriptor_pb2.DescriptorProto) -> None:
    for field in (*message.field, *message.extension):
        field.ClearField("json_name")
    for nested in message.nested_type:
        _clear_json_names(nested)


def _normalised(file: descriptor_pb2.FileDescriptorProto) -> descriptor_pb2.FileDescriptorProto:
    """A copy without what differs between protoc versions for the same .proto."""
    out = descriptor_pb2.FileDescriptorProto()
    out.CopyFrom(file)
    for message in out.message_type:
        _clear_json_names(message)
    for field in out.extension:
        field.ClearField("json_name")
    return out


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> descriptor_pb2.FileDescriptorProto:
    out = tmp_path_factory.mktemp("protoc") / "PulsarApi.desc"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{PROTO.parent}",
            f"--descriptor_set_out={out}",
            PROTO.name,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    (file,) = [f for f in files if f.name == PROTO.name]
    return file


@pytest.fixture(scope="module")
def committed() -> descriptor_pb2.FileDescriptorProto:
    return descriptor_pb2.FileDescriptorProto.FromString(pb.DESCRIPTOR.serialized_pb)


def test_committed_module_matches_the_proto(compiled, committed) -> None:
    expected, actual = _normalised(compiled), _normalised(committed)
    if expected != actual:
        # Name what differs, message by message, before failing.
        by_name = {m.name: m for m in actual.message_type}
        changed = [m.name for m in expected.message_type if by_name.get(m.name) != m] + sorted(
            {m.name for m in actual.message_type} - {m.name for m in expected.message_type}
        )
        pytest.fail(
            "pulsar_spark/protocol/PulsarApi_pb2.py does not match proto/PulsarApi.proto "
            f"(messages differing: {changed or 'none; enums or options'}); "
            "run `python proto/generate.py`"
        )
    assert expected == actual


def test_the_comparison_sees_a_change(compiled, committed) -> None:
    # Guard against a comparison that can never fail.
    changed = _normalised(committed)
    meta = next(m for m in changed.message_type if m.name == "MessageMetadata")
    next(f for f in meta.field if f.name == "null_partition_key").number = 99
    assert changed != _normalised(compiled)


def test_package_and_syntax(committed) -> None:
    assert committed.name == "PulsarApi.proto"
    assert committed.package == "pulsar.proto"
    assert committed.syntax in ("", "proto2")


def _field(message: type, name: str) -> FieldDescriptor:
    return message.DESCRIPTOR.fields_by_name[name]


def _required(field: FieldDescriptor) -> bool:
    # ``is_required`` on new protobuf runtimes, ``label`` on old ones.
    required = getattr(field, "is_required", None)
    return required if required is not None else field.label == field.LABEL_REQUIRED


@pytest.mark.parametrize(
    ("message", "name", "number"),
    [
        (pb.MessageMetadata, "producer_name", 1),
        (pb.MessageMetadata, "publish_time", 3),
        (pb.MessageMetadata, "compression", 8),
        (pb.MessageMetadata, "uncompressed_size", 9),
        (pb.MessageMetadata, "num_messages_in_batch", 11),
        (pb.MessageMetadata, "event_time", 12),
        (pb.MessageMetadata, "partition_key_b64_encoded", 17),
        (pb.MessageMetadata, "marker_type", 20),
        (pb.MessageMetadata, "null_value", 25),
        (pb.MessageMetadata, "uuid", 26),
        (pb.MessageMetadata, "chunk_id", 29),
        (pb.MessageMetadata, "null_partition_key", 30),
        (pb.MessageMetadata, "compacted_batch_indexes", 31),
        (pb.SingleMessageMetadata, "payload_size", 3),
        (pb.SingleMessageMetadata, "compacted_out", 4),
        (pb.SingleMessageMetadata, "null_partition_key", 10),
        (pb.BrokerEntryMetadata, "broker_timestamp", 1),
        (pb.BrokerEntryMetadata, "index", 2),
        (pb.MessageIdData, "batch_index", 4),
        (pb.MessageIdData, "first_chunk_message_id", 7),
        (pb.CommandConnected, "max_message_size", 3),
        (pb.CommandMessage, "ack_set", 4),
        (pb.CommandSubscribe, "start_message_id", 9),
        (pb.CommandSubscribe, "initialPosition", 13),
        (pb.CommandCloseConsumer, "assignedBrokerServiceUrl", 3),
        (pb.CommandGetLastMessageIdResponse, "consumer_mark_delete_position", 3),
        (pb.FeatureFlags, "supports_broker_entry_metadata", 2),
    ],
)
def test_field_numbers_from_the_protocol_notes(message: type, name: str, number: int) -> None:
    assert _field(message, name).number == number


def test_payload_size_is_required() -> None:
    assert _required(_field(pb.SingleMessageMetadata, "payload_size"))
    assert not _required(_field(pb.SingleMessageMetadata, "partition_key"))


def test_compacted_batch_indexes_is_repeated_int32() -> None:
    meta = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=0)
    meta.compacted_batch_indexes.extend([0, 2])
    assert list(meta.compacted_batch_indexes) == [0, 2]
    assert _field(pb.MessageMetadata, "compacted_batch_indexes").type == (
        _field(pb.MessageMetadata, "compacted_batch_indexes").TYPE_INT32
    )


def test_command_types_and_enums() -> None:
    T = pb.BaseCommand
    assert (T.CONNECT, T.SEND, T.MESSAGE, T.PING, T.PONG) == (2, 6, 9, 18, 19)
    assert T.GET_LAST_MESSAGE_ID_RESPONSE == 30
    assert T.TOPIC_MIGRATED == 68
    # Every command type has the BaseCommand field of the same number.
    for name, value in T.Type.items():
        assert value in T.DESCRIPTOR.fields_by_number, name
    assert pb.ProtocolVersion.Value("v21") == 21
    assert max(pb.ProtocolVersion.values()) == 21
    assert (pb.NONE, pb.LZ4, pb.ZLIB, pb.ZSTD, pb.SNAPPY) == (0, 1, 2, 3, 4)
    assert (pb.ServiceNotReady, pb.TooManyRequests, pb.ProducerFenced) == (6, 14, 25)


def test_minus_one_defaults() -> None:
    assert pb.MessageIdData().partition == -1
    assert pb.MessageIdData().batch_index == -1
    assert pb.CommandProducerSuccess().last_sequence_id == -1
    assert pb.CommandSubscribe().durable is True


def _fix_pyi() -> Callable[[str], str]:
    # proto/generate.py is a script, not a module of the package.
    spec = importlib.util.spec_from_file_location("generate", ROOT / "proto" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fix: Callable[[str], str] = module.fix_pyi
    return fix


def test_committed_stub_is_valid_python() -> None:
    # protoc writes the Schema.Type member `None` as `None: ...`, which no
    # parser accepts; generate.py turns those lines into comments.
    stub = (ROOT / "pulsar_spark" / "protocol" / "PulsarApi_pb2.pyi").read_text()
    ast.parse(stub)
    assert _fix_pyi()(stub) == stub
    assert "String: _ClassVar[Schema.Type]" in stub


def test_fix_pyi_comments_out_keyword_members() -> None:
    fix_pyi = _fix_pyi()
    raw = (
        "class Schema:\n"
        "    class Type(int):\n"
        "        None: _ClassVar[Schema.Type]\n"
        "        String: _ClassVar[Schema.Type]\n"
        "    None: Schema.Type\n"
        "    NoneType: int\n"
    )
    fixed = fix_pyi(raw)
    ast.parse(fixed)
    lines = fixed.splitlines()
    assert "        String: _ClassVar[Schema.Type]" in lines
    assert "    NoneType: int" in lines
    assert not any(line.lstrip().startswith("None:") for line in lines)
    assert "Was: None: Schema.Type" in fixed
