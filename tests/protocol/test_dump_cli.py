"""The dump tool as a command: ``python -m pulsar_spark.dump FILE...``.

Good input gives one JSON object per frame on stdout and exit status 0. Bad
input gives exit status 1 and exactly one line on stderr that names the file
and the byte offset (never a traceback); what was decoded before the fault is
still printed.
"""

from __future__ import annotations

import base64
import json
import random
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from pulsar_spark.dump import dump_stream, main
from pulsar_spark.protocol import compress, encode_payload_command, pb

MESSAGE_KEYS = {"payload", "key", "properties", "event_time", "batch_index"}
TYPE_NAMES = set(pb.BaseCommand.Type.keys())


def run_dump(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pulsar_spark.dump", *map(str, args)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
        timeout=60,
    )


def run_main(
    capsys: pytest.CaptureFixture[str], *args: str | Path
) -> subprocess.CompletedProcess[str]:
    """The same command in this process (faster; a traceback would fail the test)."""
    status = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["dump", *map(str, args)], status, out, err)


def assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert result.stderr.endswith("\n")
    for needle in needles:
        assert needle in lines[0]
    return lines[0]


def records(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


# ---------------------------------------------------------------------------
# Good input
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "direction"),
    [("batch-LZ4", "broker-to-client"), ("single-SNAPPY", "client-to-broker")],
)
def test_golden_capture_gives_one_json_object_per_frame(
    golden_dir: Path, scenario: str, direction: str, golden_scenarios
) -> None:
    (golden,) = [s for s in golden_scenarios if s.name == scenario]
    result = run_dump(golden_dir / f"{scenario}.{direction}.bin")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    frames = golden.frames(direction)
    assert len(lines) == len(frames)

    payload_type = "SEND" if direction == "client-to-broker" else "MESSAGE"
    seen = []
    for line, frame in zip(lines, frames, strict=True):
        record = json.loads(line)
        assert isinstance(record, dict)
        assert record["type"] in TYPE_NAMES
        assert record["type"] == frame.type_name
        assert record["offset"] == frame.offset
        assert isinstance(record["command"], dict)
        assert "file" not in record
        if record["type"] == payload_type:
            assert isinstance(record["metadata"], dict)
            assert record["metadata"]["producer_name"] == f"golden-{scenario}"
            assert record["messages"]
            for message in record["messages"]:
                assert set(message) == MESSAGE_KEYS
            seen.extend(record["messages"])
        else:
            assert "metadata" not in record
            assert "messages" not in record
    assert [{k: m[k] for k in m if k != "batch_index"} for m in seen] == golden.messages


def test_command_fields_use_the_proto_names(golden_dir: Path, capsys) -> None:
    result = run_main(capsys, golden_dir / "single-NONE.broker-to-client.bin")
    assert result.returncode == 0
    first = records(result.stdout)[0]
    assert first["type"] == "CONNECTED"
    assert first["command"]["server_version"]
    assert first["command"]["protocol_version"] >= 1
    message = next(r for r in records(result.stdout) if r["type"] == "MESSAGE")
    assert set(message["command"]["message_id"]) >= {"ledgerId", "entryId"}
    assert "publish_time" in message["metadata"]


def test_several_files_name_their_file(golden_dir: Path, capsys) -> None:
    a = golden_dir / "single-ZSTD.broker-to-client.bin"
    b = golden_dir / "batch-ZLIB.client-to-broker.bin"
    result = run_main(capsys, a, b)
    assert result.returncode == 0, result.stderr
    files = [r["file"] for r in records(result.stdout)]
    n_a = files.count(str(a))
    assert n_a > 0
    assert files == [str(a)] * n_a + [str(b)] * (len(files) - n_a)
    assert len(files) > n_a


def test_empty_file_prints_nothing(tmp_path: Path, capsys) -> None:
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    result = run_main(capsys, empty)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


def test_truncated_file(tmp_path: Path, golden_scenarios) -> None:
    (golden,) = [s for s in golden_scenarios if s.name == "single-NONE"]
    frames = golden.frames("broker-to-client")
    cut = frames[-5]  # a frame in the middle of the file
    data = golden.data("broker-to-client")[: cut.offset + cut.size // 2]
    path = tmp_path / "cut.bin"
    path.write_bytes(data)

    result = run_dump(path)
    line = assert_one_line_error(result, str(path), f"byte offset {cut.offset}")
    assert "input ends inside a frame" in line
    assert len(result.stdout.splitlines()) == len(frames) - 5  # everything before the cut


def test_corrupted_checksum(tmp_path: Path, golden_scenarios, capsys) -> None:
    (golden,) = [s for s in golden_scenarios if s.name == "batch-LZ4"]
    send = golden.payload_frames("client-to-broker")[1]
    data = bytearray(golden.data("client-to-broker"))
    data[send.offset + send.size - 1] ^= 0xFF  # last payload byte
    path = tmp_path / "crc.bin"
    path.write_bytes(bytes(data))

    result = run_main(capsys, path)
    line = assert_one_line_error(result, str(path), f"byte offset {send.offset}")
    assert "CRC32C mismatch in SEND" in line
    frames_before = [f for f in golden.frames("client-to-broker") if f.offset < send.offset]
    assert len(result.stdout.splitlines()) == len(frames_before)


def test_corrupted_payload_without_checksum_names_the_message(
    tmp_path: Path, golden_scenarios, capsys
) -> None:
    # A payload that passes framing (here: a checksum that matches the garbage)
    # fails in decompression; the error names the frame and the message id.
    (golden,) = [s for s in golden_scenarios if s.name == "batch-ZSTD"]
    message = golden.payload_frames("broker-to-client")[0]
    mid = message.command.message.message_id
    bad = encode_payload_command(message.command, message.metadata, b"\xff" * 64)
    spliced = golden.data("broker-to-client")[: message.offset] + bad
    path = tmp_path / "payload.bin"
    path.write_bytes(spliced)

    result = run_main(capsys, path)
    assert_one_line_error(
        result, str(path), f"byte offset {message.offset}", f"{mid.ledgerId}:{mid.entryId}:-1:-1"
    )


@pytest.mark.parametrize(
    ("garbage", "needle", "as_command"),
    [
        (b"\xde\xad\xbe\xef" * 64, "above the frame limit", True),
        (struct.pack(">II", 9, 5) + b"\xff" * 5, "cannot decode", False),
        (struct.pack(">II", 6, 2) + b"\x08\x63", "unknown command type 99", False),
    ],
    ids=["huge size", "bad command", "unknown type"],
)
def test_garbage_bytes(
    tmp_path: Path, golden_dir: Path, garbage: bytes, needle: str, as_command: bool, capsys
) -> None:
    good = (golden_dir / "single-LZ4.broker-to-client.bin").read_bytes()
    path = tmp_path / "garbage.bin"
    path.write_bytes(good + garbage)
    result = run_dump(path) if as_command else run_main(capsys, path)
    assert_one_line_error(result, str(path), f"byte offset {len(good)}", needle)


def test_garbage_only(tmp_path: Path, capsys) -> None:
    path = tmp_path / "noise.bin"
    path.write_bytes(bytes(range(256)) * 4)
    result = run_main(capsys, path)
    assert_one_line_error(result, str(path), "byte offset 0")
    assert result.stdout == ""


def test_nonexistent_file(tmp_path: Path) -> None:
    path = tmp_path / "no-such-file.bin"
    result = run_dump(path)
    line = assert_one_line_error(result, str(path))
    assert "No such file" in line
    assert result.stdout == ""


def test_a_directory(tmp_path: Path, capsys) -> None:
    result = run_main(capsys, tmp_path)
    assert_one_line_error(result, str(tmp_path))


def test_bad_second_file_stops_the_run(tmp_path: Path, golden_dir: Path, capsys) -> None:
    good = golden_dir / "single-NONE.client-to-broker.bin"
    missing = tmp_path / "missing.bin"
    result = run_main(capsys, good, missing, good)
    assert_one_line_error(result, str(missing))
    assert {r["file"] for r in records(result.stdout)} == {str(good)}


def test_string_fields_that_are_not_utf8(tmp_path: Path) -> None:
    # protobuf hands such fields out as bytes; the tool must still answer
    # with JSON or with one error line, never a traceback.
    meta = pb.MessageMetadata(
        producer_name="p",
        sequence_id=1,
        publish_time=2,
        properties=[pb.KeyValue(key="K\x01", value="V\x01")],
        partition_key="P\x01",
    )
    raw = meta.SerializeToString()
    for text in (b"K\x01", b"V\x01", b"P\x01"):
        raw = raw.replace(text, b"\xff\xfe")
    command = pb.BaseCommand(
        type=pb.BaseCommand.MESSAGE,
        message=pb.CommandMessage(
            consumer_id=1, message_id=pb.MessageIdData(ledgerId=1, entryId=2)
        ),
    )
    path = tmp_path / "utf8.bin"
    path.write_bytes(encode_payload_command(command, raw, b"value"))

    result = run_dump(path)
    assert "Traceback" not in result.stderr
    if result.returncode == 0:
        (record,) = records(result.stdout)
        (message,) = record["messages"]
        assert message["payload"] == "dmFsdWU="
    else:
        assert_one_line_error(result, str(path), "byte offset 0")


# ---------------------------------------------------------------------------
# In process
# ---------------------------------------------------------------------------


def test_main_returns_the_exit_status(golden_dir: Path, tmp_path: Path, capsys) -> None:
    assert main([str(golden_dir / "batch-NONE.client-to-broker.bin")]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert all(json.loads(line)["type"] in TYPE_NAMES for line in out.splitlines())

    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"\x00\x00\x00")
    assert main([str(bad)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"{bad}: input ends inside a frame: 3 bytes present of its 4-byte size "
        "(frame at byte offset 0)\n"
    )


def test_max_frame_size_option(golden_dir: Path, capsys) -> None:
    path = golden_dir / "batch-NONE.broker-to-client.bin"
    assert main([str(path), "--max-frame-size", "1000"]) == 1
    _, err = capsys.readouterr()
    assert "above the frame limit of 1000 bytes" in err
    assert len(err.splitlines()) == 1


# ---------------------------------------------------------------------------
# Chunked messages
# ---------------------------------------------------------------------------


def _chunked_stream(whole: bytes, codec: int, count: int) -> bytes:
    """MESSAGE frames carrying ``whole``, compressed once, in ``count`` chunks."""
    packed = compress(codec, whole)
    size = -(-len(packed) // count)
    frames = []
    for i in range(count):
        meta = pb.MessageMetadata(
            producer_name="p",
            sequence_id=1,
            publish_time=1,
            compression=codec,
            uncompressed_size=len(whole),
            uuid="p-1",
            chunk_id=i,
            num_chunks_from_msg=count,
            total_chunk_msg_size=len(packed),
        )
        command = pb.BaseCommand(
            type=pb.BaseCommand.MESSAGE,
            message=pb.CommandMessage(
                consumer_id=1, message_id=pb.MessageIdData(ledgerId=7, entryId=i)
            ),
        )
        frames.append(encode_payload_command(command, meta, packed[i * size : (i + 1) * size]))
    return b"".join(frames)


@pytest.mark.parametrize("codec", [pb.NONE, pb.ZLIB, pb.ZSTD], ids=["NONE", "ZLIB", "ZSTD"])
def test_chunked_message_larger_than_a_frame(codec: int) -> None:
    whole = random.Random(5).randbytes(5_000) * 4  # 20 000 bytes, compressible
    stream = _chunked_stream(whole, codec, 4)
    recs = list(dump_stream(iter([stream]), limit=8_192))
    assert [len(r["messages"]) for r in recs] == [0, 0, 0, 1]
    (message,) = recs[-1]["messages"]
    assert base64.b64decode(message["payload"]) == whole
    assert message["batch_index"] == -1
