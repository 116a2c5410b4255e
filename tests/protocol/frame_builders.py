"""Frames built for the framing tests: commands, metadata, hand-made frames and decode helpers."""

from __future__ import annotations

import struct

import pytest

from pulsar_spark.protocol import FrameDecoder, ProtocolError, encode_command, pb
from pulsar_spark.protocol.ids.message_id import to_unsigned64

T = pb.BaseCommand
U64_MAX = 0xFFFF_FFFF_FFFF_FFFF


# ---------------------------------------------------------------------------
# Builders
# ---------------------------------------------------------------------------


def ping() -> pb.BaseCommand:
    return T(type=T.PING, ping=pb.CommandPing())


def send_command(sequence_id: int = 7) -> pb.BaseCommand:
    return T(type=T.SEND, send=pb.CommandSend(producer_id=3, sequence_id=sequence_id))


def message_command(ledger: int = 12, entry: int = 34) -> pb.BaseCommand:
    return T(
        type=T.MESSAGE,
        message=pb.CommandMessage(
            consumer_id=5,
            message_id=pb.MessageIdData(
                ledgerId=to_unsigned64(ledger), entryId=to_unsigned64(entry), partition=2
            ),
        ),
    )


def metadata(**fields: object) -> pb.MessageMetadata:
    base: dict[str, object] = {
        "producer_name": "prod",
        "sequence_id": 7,
        "publish_time": 1_700_000_000_123,
    }
    base.update(fields)
    return pb.MessageMetadata(**base)


PING = encode_command(ping())
PING_SIZE = len(PING)  # 13: 4 + 4 + 5-byte command


def raw_frame(command_bytes: bytes, rest: bytes = b"", *, cmd_size: int | None = None) -> bytes:
    """A frame built by hand: sizes, command bytes, then whatever follows."""
    size = len(command_bytes) if cmd_size is None else cmd_size
    return struct.pack(">II", 4 + len(command_bytes) + len(rest), size) + command_bytes + rest


def decode_one(data: bytes, **kwargs: int):
    decoder = FrameDecoder(**kwargs)
    decoder.feed(data)
    frame = decoder.next_frame()
    assert frame is not None
    assert decoder.next_frame() is None
    decoder.close()
    return frame


def failing_decoder(bad: bytes) -> tuple[FrameDecoder, ProtocolError]:
    """Feed a PING then ``bad``; return the decoder and the error ``bad`` causes."""
    decoder = FrameDecoder()
    decoder.feed(PING + bad)
    assert decoder.next_frame().type_name == "PING"
    with pytest.raises(ProtocolError) as info:
        decoder.next_frame()
        decoder.close()
    return decoder, info.value


SIMPLE_COMMANDS = {
    "PING": ping(),
    "PONG": T(type=T.PONG, pong=pb.CommandPong()),
    "CONNECT": T(
        type=T.CONNECT,
        connect=pb.CommandConnect(
            client_version="pulsar-spark",
            protocol_version=21,
            auth_method_name="token",
            auth_data=b"\x00secret\xff",
            feature_flags=pb.FeatureFlags(
                supports_auth_refresh=True, supports_broker_entry_metadata=True
            ),
        ),
    ),
    "CONNECTED": T(
        type=T.CONNECTED,
        connected=pb.CommandConnected(
            server_version="Pulsar", protocol_version=20, max_message_size=10 << 20
        ),
    ),
    "FLOW": T(type=T.FLOW, flow=pb.CommandFlow(consumer_id=1, messagePermits=1000)),
    "SEND_RECEIPT (-1:-1 dedup)": T(
        type=T.SEND_RECEIPT,
        send_receipt=pb.CommandSendReceipt(
            producer_id=1,
            sequence_id=2,
            message_id=pb.MessageIdData(ledgerId=U64_MAX, entryId=U64_MAX),
        ),
    ),
    "ERROR": T(
        type=T.ERROR,
        error=pb.CommandError(request_id=9, error=pb.ServiceNotReady, message="not yet"),
    ),
    "ACK": T(
        type=T.ACK,
        ack=pb.CommandAck(
            consumer_id=1,
            ack_type=pb.CommandAck.Individual,
            message_id=[pb.MessageIdData(ledgerId=1, entryId=2, ack_set=[-1, 5])],
        ),
    ),
    "TOPIC_MIGRATED": T(
        type=T.TOPIC_MIGRATED,
        topicMigrated=pb.CommandTopicMigrated(
            resource_id=4,
            resource_type=pb.CommandTopicMigrated.Consumer,
            brokerServiceUrl="pulsar://elsewhere:6650",
        ),
    ),
}
