"""Decode captured Pulsar traffic: ``python -m pulsar_spark.dump FILE...``.

Each FILE is one direction of a connection as raw bytes (a concatenation of
frames, e.g. ``shared/golden/*.bin``). Each frame becomes one line of JSON::

    {"type": "MESSAGE", "offset": 1234,
     "command": {...},            # the sub-command, protobuf JSON, .proto names
     "metadata": {...},           # SEND / MESSAGE only: MessageMetadata
     "messages": [                # SEND / MESSAGE only
        {"payload": "<base64>", "key": "k" | null, "properties": {...},
         "event_time": ms | null, "batch_index": n}]}

Chunks of a large message carry ``"messages": []`` until the last one, whose
line holds the reassembled message. An end-to-end encrypted message (no
keys are given here) is shown as one message holding its ciphertext, with
``"encryption_keys": [names]``; an encrypted chunk as such a message of its
own. With several files, each line also names its ``"file"``.

Bad input ends the run with exit status 1 and one line on stderr that names
the file, the byte offset and the problem.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from collections.abc import Iterator
from typing import Any

from google.protobuf.json_format import MessageToDict

from pulsar_spark.protocol import (
    DEFAULT_MAX_FRAME_SIZE,
    ChunkAssembler,
    CorruptMessage,
    Frame,
    FrameDecoder,
    Message,
    ProtocolError,
    is_chunk,
    messages,
    open_entry,
    pb,
    subcommand,
)
from pulsar_spark.protocol.crypto.decrypt import Decryptor
from pulsar_spark.protocol.crypto.fields import is_encrypted
from pulsar_spark.protocol.ids.message_id import to_signed64

__all__ = ["dump_stream", "main"]

_READ_SIZE = 1 << 16


def _to_dict(message: Any) -> dict[str, Any]:
    out: dict[str, Any] = MessageToDict(message, preserving_proto_field_name=True)
    return out


def _text(value: str | bytes | None) -> str | None:
    # protobuf hands out a string field that is not valid UTF-8 as bytes.
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return value


def _message_json(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {
        "payload": None if message.value is None else base64.b64encode(message.value).decode(),
        "key": _text(message.partition_key),
        "properties": {_text(k): _text(v) for k, v in message.properties.items()},
        "event_time": message.event_time,
        "batch_index": message.message_id.batch_index,
    }
    if message.encryption_keys is not None:
        out["encryption_keys"] = list(message.encryption_keys)
    return out


def _where(frame: Frame) -> tuple[int, int, int]:
    if frame.command.type == pb.BaseCommand.MESSAGE:
        mid = frame.command.message.message_id
        return to_signed64(mid.ledgerId), to_signed64(mid.entryId), mid.partition
    return -1, -1, -1  # a SEND has no position yet


def _frame_json(frame: Frame, chunks: ChunkAssembler, limit: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": frame.type_name,
        "offset": frame.offset,
        "command": _to_dict(subcommand(frame.command)),
    }
    if frame.metadata is None or frame.payload is None:
        return out
    out["metadata"] = _to_dict(frame.metadata)
    if frame.broker_entry_metadata is not None:
        out["broker_entry_metadata"] = _to_dict(frame.broker_entry_metadata)
    ledger, entry_id, partition = _where(frame)
    metadata = frame.metadata
    payload: bytes | memoryview = frame.payload
    # No private keys here: encrypted messages are shown as they are.
    opaque = Decryptor(action="consume")
    if is_chunk(metadata) and not is_encrypted(metadata):
        whole = chunks.add(ledger, entry_id, metadata, payload)
        if whole is None:
            out["messages"] = []
            return out
        metadata, payload = whole.metadata, whole.payload
        # A chunked message is larger than a frame by nature: it may inflate
        # to as much as the assembler accepts, not just to the frame limit.
        limit = max(limit, chunks.max_message_size)
    entry = open_entry(
        ledger,
        entry_id,
        partition,
        metadata,
        payload,
        broker_entry_metadata=frame.broker_entry_metadata,
        limit=limit,
        decrypt=opaque,
    )
    out["messages"] = [_message_json(m) for m in messages(entry)]
    return out


def dump_stream(
    chunks_in: Iterator[bytes], limit: int = DEFAULT_MAX_FRAME_SIZE
) -> Iterator[dict[str, Any]]:
    """Decode a byte stream (given in pieces) into one JSON-ready dict per frame.

    Raises:
        ProtocolError: the stream is not valid Pulsar frames; ``offset`` is set.
    """
    decoder = FrameDecoder(max_frame_size=limit)
    assembler = ChunkAssembler(max_message_size=64 * limit)
    for piece in chunks_in:
        decoder.feed(piece)
        for frame in decoder:
            try:
                record = _frame_json(frame, assembler, limit)
            except ProtocolError as exc:
                if exc.offset is None:
                    exc = type(exc)(exc.reason, offset=frame.offset, message_id=exc.message_id)
                raise exc from None
            except Exception as exc:  # e.g. string fields that are not UTF-8
                msg = (
                    f"cannot decode the messages of {frame.type_name}: {type(exc).__name__}: {exc}"
                )
                raise CorruptMessage(msg, offset=frame.offset) from exc
            yield record
    decoder.close()


def _read(path: str) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while piece := f.read(_READ_SIZE):
            yield piece


def _one_line(text: str) -> str:
    return " ".join(text.split("\n"))


def main(argv: list[str] | None = None) -> int:
    # The console script's name, or how the module is run.
    script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    parser = argparse.ArgumentParser(
        prog=script if script == "pulsar-spark-dump" else "python -m pulsar_spark.dump",
        description="Decode captured Pulsar binary-protocol bytes into JSON lines, one per frame.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="one direction of a connection")
    parser.add_argument(
        "--max-frame-size",
        type=int,
        default=DEFAULT_MAX_FRAME_SIZE,
        help=f"largest frame accepted, in bytes (default {DEFAULT_MAX_FRAME_SIZE})",
    )
    args = parser.parse_args(argv)
    try:
        for path in args.files:
            if not _dump_file(path, args.max_frame_size, name_file=len(args.files) > 1):
                return 1
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (| head): not an error
        # Keep the interpreter from failing again when it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 0


def _dump_file(path: str, limit: int, *, name_file: bool) -> bool:
    """Write one file's frames to stdout; on bad input, one line to stderr and False."""
    out = sys.stdout
    try:
        for record in dump_stream(_read(path), limit):
            if name_file:
                record = {"file": path, **record}
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    except ProtocolError as exc:
        error = f"{path}: {exc}"
    except BrokenPipeError:
        raise
    except OSError as exc:
        error = f"{path}: cannot read: {exc.strerror or exc}"
    else:
        return True
    out.flush()  # what was decoded before the error comes first
    print(_one_line(error), file=sys.stderr)
    return False


if __name__ == "__main__":
    sys.exit(main())
