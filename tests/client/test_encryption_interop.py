"""Encryption interop with the official clients on the wire: theirs decrypt with ours, and back.

* the official Python client (RSA, ``CryptoKeyReader``), every codec, batched and not:
  we decrypt what it produces (the frames as the broker sent them, opened with our
  Decryptor), and its consumer decrypts what our Encryptor made (sent as raw SENDs),
  with one or two key names;
* the Java client, the one that does EC (ECIES) keys: two key names (RSA and EC, or two
  EC keys) both ways, and chunked messages on Apache Pulsar; what it produces for one EC
  key name, batched and single with every codec and chunked, read by our client (one JVM
  produces all of those topics);
* key rotation: messages of two producers with different keys read with a map of both.
"""

from __future__ import annotations

import json
import os
import secrets
import time

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from pulsar_spark.client import PulsarClient
from pulsar_spark.client.crypto_keys import load_public_keys, make_decryptor
from pulsar_spark.protocol import (
    ChunkAssembler,
    codec_by_name,
    compress,
    encode_batch,
    is_chunk,
    messages,
    open_entry,
    pb,
)
from pulsar_spark.protocol.crypto.decrypt import open_chunk
from pulsar_spark.protocol.crypto.encrypt import Encryptor
from pulsar_spark.protocol.crypto.errors import MissingPrivateKey
from pulsar_spark.protocol.framing import Frame
from pulsar_spark.protocol.ids.message_id import to_signed64
from tests.support.java_crypto import java_consume_decrypted, java_produce_encrypted_many
from tests.support.keys import KeyPair
from tests.support.official import mixed_messages, official_client, produce
from tests.support.raw_wire import raw_messages, send_prepared

CODECS = ["NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"]


@pytest.fixture(scope="module")
def key_dir(tmp_path_factory: pytest.TempPathFactory) -> dict[str, KeyPair]:
    directory = tmp_path_factory.mktemp("keys")
    return {
        "rsa": KeyPair(directory, "rsa"),  # a new RSA-2048 key
        "rsa2": KeyPair(directory, "rsa2"),
        "ec": KeyPair(directory, "ec", ec.generate_private_key(ec.SECP256R1())),
        "ec2": KeyPair(directory, "ec2", ec.generate_private_key(ec.SECP256R1())),
    }


def _where(frame: Frame) -> tuple[int, int, int]:
    mid = frame.command.message.message_id
    return to_signed64(mid.ledgerId), to_signed64(mid.entryId), mid.partition


def _decrypted(frames: list[Frame], topic: str, private_key: object) -> list:
    """Messages of raw frames, opened as a reader does with our Decryptor."""
    decryptor = make_decryptor(topic, private_key)  # type: ignore[arg-type]
    assembler = ChunkAssembler()
    out = []
    for frame in frames:
        ledger, entry, partition = _where(frame)
        metadata, payload = frame.metadata, frame.payload
        assert metadata is not None and payload is not None
        assert metadata.encryption_keys, "the official client sent a message in clear"
        if is_chunk(metadata):
            opened = open_chunk(decryptor, metadata, payload, message_id=f"{ledger}:{entry}")
            assert opened is not None
            whole = assembler.add(ledger, entry, *opened)
            if whole is None:
                continue
            metadata, payload = whole.metadata, whole.payload
        out += messages(open_entry(ledger, entry, partition, metadata, payload, decrypt=decryptor))
    return out


# -- the official Python client ---------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "single"])
def test_official_python_messages_decrypt(pulsar_lite, topic_name, key_dir, codec, batched) -> None:
    url, keys = pulsar_lite.service_url, key_dir["rsa"]
    sent = mixed_messages(12)
    produce(
        url, topic_name, sent, batching=batched, compression=codec,
        encryption_key="app.key", crypto_key_reader=keys.reader(),
    )  # fmt: skip
    frames = raw_messages(url, topic_name, len(sent))
    assert all(f.metadata.encryption_keys[0].key == "app.key" for f in frames)
    if batched:
        assert any(f.metadata.num_messages_in_batch > 1 for f in frames)
    got = _decrypted(frames, topic_name, keys.priv_url)
    assert [m.value for m in got] == [m["value"] for m in sent]
    assert [m.properties for m in got] == [m.get("properties", {}) for m in sent]
    assert [m.partition_key for m in got] == [m.get("key") for m in sent]
    ledger, entry, partition = _where(frames[0])
    with pytest.raises(MissingPrivateKey, match=r"'app.key'.*|private_key="):
        open_entry(ledger, entry, partition, frames[0].metadata, frames[0].payload)


def _entries(values: list[bytes], codec: str, batched: bool, encryptor: Encryptor) -> list:
    """(metadata, encrypted payload) per entry: one batch of all, or one message each."""
    number = codec_by_name(codec)
    groups = [values] if batched else [[v] for v in values]
    out = []
    for group in groups:
        meta = pb.MessageMetadata(
            producer_name="x", sequence_id=0, publish_time=int(time.time() * 1000)
        )
        if batched:
            raw = encode_batch((pb.SingleMessageMetadata(payload_size=len(v)), v) for v in group)
            meta.num_messages_in_batch = len(group)
        else:
            raw = group[0]
        if number:
            meta.compression = number
            meta.uncompressed_size = len(raw)
        out.append((meta, encryptor.encrypt(meta, compress(number, raw), now=time.monotonic())))
    return out


def _official_consume(url: str, topic: str, count: int, keys: KeyPair) -> list[bytes]:
    import pulsar

    got = []
    with official_client(url) as client:
        consumer = client.subscribe(
            topic, "decrypting", initial_position=pulsar.InitialPosition.Earliest,
            crypto_key_reader=keys.reader(),
            crypto_failure_action=pulsar.ConsumerCryptoFailureAction.FAIL,
        )  # fmt: skip
        try:
            for _ in range(count):
                message = consumer.receive(timeout_millis=20_000)
                context = message.encryption_context()
                assert context is not None and not context.is_decryption_failed()
                got.append(message.data())
                consumer.acknowledge(message)
        finally:
            consumer.close()
    return got


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "single"])
@pytest.mark.parametrize("names", [1, 2])
def test_the_official_python_consumer_decrypts_ours(
    pulsar_lite, topic_name, key_dir, codec, batched, names
) -> None:
    url = pulsar_lite.service_url
    # With two names the official reader (one private key for every name) finds its own.
    public = {"other": key_dir["rsa2"].pub_url, "app": key_dir["rsa"].pub_url}
    chosen = dict(list(public.items())[-names:])
    encryptor = Encryptor(load_public_keys(json.dumps(chosen), list(chosen)))
    values = [f"secret-{i}".encode() * (i + 1) for i in range(9)]
    send_prepared(url, topic_name, _entries(values, codec, batched, encryptor))
    assert _official_consume(url, topic_name, len(values), key_dir["rsa"]) == values


def test_key_rotation_two_producers_two_keys_read_with_a_map(
    pulsar_lite, topic_name, key_dir
) -> None:
    url = pulsar_lite.service_url
    old, new = key_dir["rsa"], key_dir["rsa2"]
    produce(
        url,
        topic_name,
        [b"old-1", b"old-2"],
        encryption_key="v1",
        crypto_key_reader=old.reader(),
    )
    produce(url, topic_name, [b"new-1"], encryption_key="v2", crypto_key_reader=new.reader())
    frames = raw_messages(url, topic_name, 3)
    both = json.dumps({"v1": old.priv_url, "v2": new.priv_url})
    assert [m.value for m in _decrypted(frames, topic_name, both)] == [b"old-1", b"old-2", b"new-1"]


# -- the Java client: EC keys, two names, chunks -------------------------------------------------


TWO_NAMES = {"rsa+ec": ("rsa", "ec"), "ec+ec": ("ec", "ec2")}


@pytest.mark.parametrize("pair", list(TWO_NAMES))
def test_java_two_key_names_decrypt_with_either_private_key(
    apache_pulsar, key_dir, java_matrix, pair
) -> None:
    url = apache_pulsar.service_url
    topic, values, _ = java_matrix[("two", pair)]  # batched, LZ4, names "one" and "two"
    first, second = (key_dir[n] for n in TWO_NAMES[pair])
    frames = raw_messages(url, topic, len(values))
    sizes = {k.key: len(k.value) for k in frames[0].metadata.encryption_keys}
    # RSA-2048 / ECIES P-256
    expected = [256 if n.startswith("rsa") else 117 for n in TWO_NAMES[pair]]
    assert sizes == dict(zip(["one", "two"], expected, strict=True))
    for private in ({"one": first.priv_url}, {"two": second.priv_url}):
        assert [m.value for m in _decrypted(frames, topic, private)] == values


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "single"])
def test_the_java_consumer_decrypts_ours_with_ec_keys(
    apache_pulsar, topic_name, key_dir, batched
) -> None:
    url = apache_pulsar.service_url
    chosen = {"a": key_dir["ec"].pub_url, "b": key_dir["ec2"].pub_url}
    encryptor = Encryptor(load_public_keys(json.dumps(chosen), ["a", "b"]))
    values = [f"ours-{i}".encode() * 7 for i in range(10)]
    # send_prepared makes no LOOKUP: a bundle nothing looked up yet is not served
    # ("Please redo the lookup"); creating the topic makes the broker own it.
    apache_pulsar.admin.create_topic(topic_name)
    send_prepared(url, topic_name, _entries(values, "ZSTD", batched, encryptor))
    got = java_consume_decrypted(url, topic_name, len(values), key_dir["ec2"].priv_url)
    assert [v for v, _ in got] == values and all(sorted(names) == ["a", "b"] for _, names in got)


def test_official_chunked_encrypted_messages_decrypt_chunk_by_chunk(
    apache_pulsar, topic_name, key_dir
) -> None:
    url, keys = apache_pulsar.service_url, key_dir["rsa"]
    big = bytes(range(256)) * (6 * 4096)  # 6 MiB, above the broker's 5 MiB maxMessageSize
    sent = [b"before", {"value": big, "key": "big"}, b"after"]
    produce(
        url, topic_name, sent, batching=False, chunking_enabled=True,
        encryption_key="app.key", crypto_key_reader=keys.reader(),
    )  # fmt: skip
    frames = raw_messages(url, topic_name, 4)  # the 2 small ones and at least 2 chunks
    assert sum(is_chunk(f.metadata) for f in frames) >= 2
    got = _decrypted(frames, topic_name, keys.priv_url)
    assert [m.value for m in got] == [b"before", big, b"after"]


# -- the Java client producing for one EC key name: every codec, batched, single, chunked -----

JAVA_CHUNK = 4096  # the Java producer's chunkMaxMessageSize in the chunked topics


def _java_values(kind: str) -> list:
    """What a matrix topic gets: keyed messages with properties (inside the encrypted batch
    payload when batched, in clear metadata when not), a keyless one, an empty one; the
    chunked topics a random 20 KB value (above the chunk size, as LZ4 too) between two."""
    if kind == "chunked":
        return [b"before", {"value": os.urandom(20_000), "key": "big"}, b"after"]
    count = 30 if kind == "batched" else 8
    values: list = [
        {"value": f"java-{kind}-{i}".encode() * (i + 1), "key": f"k{i % 3}",
         "properties": {"i": str(i), "kind": kind}}
        for i in range(count)
    ]  # fmt: skip
    return [*values, b"keyless", b""]


@pytest.fixture(scope="module")
def java_matrix(apache_pulsar, key_dir) -> dict[tuple[str, str], tuple[str, list, list[str]]]:
    """What one JVM produced, (kind, codec) -> (topic, values, Java's ids): kind batched and
    single with every codec and chunked with NONE and LZ4, encrypted for the EC key name
    ``ec.key``; and ("two", pair): 20 values batched with LZ4 for the names "one" and
    "two" (the keys of :data:`TWO_NAMES`)."""
    prefix = f"persistent://public/default/java-ec-{secrets.token_hex(3)}"
    cases = [(k, c) for k in ("batched", "single") for c in CODECS]
    cases += [("chunked", "NONE"), ("chunked", "LZ4")]
    jobs = [
        {
            "topic": f"{prefix}-{kind}-{codec.lower()}",
            "values": _java_values(kind),
            "public_keys": {"ec.key": key_dir["ec"].pub_url},
            "batched": kind == "batched",
            "compression": codec,
            "chunk_max_size": JAVA_CHUNK if kind == "chunked" else None,
        }
        for kind, codec in cases
    ]
    for pair, (first, second) in TWO_NAMES.items():
        cases.append(("two", pair))
        jobs.append(
            {
                "topic": f"{prefix}-two-{pair.replace('+', '-')}",
                "values": [f"java-{i}".encode() * 5 for i in range(20)],
                "public_keys": {"one": key_dir[first].pub_url, "two": key_dir[second].pub_url},
                "compression": "LZ4",
            }
        )
    ids = java_produce_encrypted_many(apache_pulsar.service_url, jobs)
    return {
        case: (job["topic"], job["values"], job_ids)
        for case, job, job_ids in zip(cases, jobs, ids, strict=True)
    }


def _expected(values: list) -> list[tuple[bytes, bytes | None, dict]]:
    out = []
    for v in values:
        if isinstance(v, bytes):
            out.append((v, None, {}))
        else:
            key = v.get("key")
            out.append((v["value"], key.encode() if key else None, v.get("properties", {})))
    return out


def _read_rows(url: str, topic: str, **kwargs) -> list[dict]:
    with PulsarClient(url) as client:
        return [r for b in client.read_batches(topic, **kwargs) for r in b.to_pylist()]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("kind", ["batched", "single"])
def test_java_ec_encrypted_messages_read_by_our_client(
    apache_pulsar, key_dir, java_matrix, kind, codec
) -> None:
    url = apache_pulsar.service_url
    topic, values, java_ids = java_matrix[(kind, codec)]
    frames = raw_messages(url, topic, len(values))  # as the broker stores them
    assert {f.metadata.compression for f in frames} == {codec_by_name(codec)}
    assert {(k.key, len(k.value)) for f in frames for k in f.metadata.encryption_keys} == {
        ("ec.key", 117)  # ECIES P-256
    }
    batches = [f.metadata.num_messages_in_batch for f in frames]
    assert max(batches) > 1 if kind == "batched" else max(batches) <= 1
    rows = _read_rows(url, topic, private_key={"ec.key": key_dir["ec"].priv_url})
    got = [(r["value"], r["key"], dict(r["properties"])) for r in rows]
    assert got == _expected(values)
    entries = {r["messageId"].rsplit(":", 1)[0] if kind == "batched" else r["messageId"]
               for r in rows}  # fmt: skip
    assert len({r["messageId"] for r in rows}) == len(values)
    if kind == "batched":  # Java's ids (ledger:entry:partition:index) say so too; a batch
        # that got only one message is sent in the plain format
        assert len(entries) < len(values) and any(i.count(":") == 3 for i in java_ids)
    # It really is encrypted on the broker: without the key the read fails naming the key.
    with pytest.raises(MissingPrivateKey, match=r"'ec\.key'"):
        _read_rows(url, topic)


@pytest.mark.parametrize("codec", ["NONE", "LZ4"])
def test_java_ec_encrypted_chunked_messages_read_whole_by_our_client(
    apache_pulsar, key_dir, java_matrix, codec
) -> None:
    url = apache_pulsar.service_url
    topic, values, _ = java_matrix[("chunked", codec)]
    least = -(-20_000 // JAVA_CHUNK)  # chunks of the big value at least
    frames = raw_messages(url, topic, 1 + least)  # "before" and the first chunks
    chunks = [f for f in frames if is_chunk(f.metadata)]
    assert len(chunks) >= least, "the Java producer did not chunk"
    assert chunks[0].metadata.num_chunks_from_msg >= least
    # Every chunk is encrypted on its own: the key and its own IV in each chunk's metadata.
    assert all(f.metadata.encryption_keys[0].key == "ec.key" for f in frames)
    assert len({f.metadata.encryption_param for f in chunks}) == len(chunks)
    rows = _read_rows(url, topic, private_key=key_dir["ec"].priv_url)
    assert [(r["value"], r["key"], dict(r["properties"])) for r in rows] == _expected(values)
