"""End-to-end encryption, sans-IO: key wrapping, Encryptor -> open_entry, failure actions."""

from __future__ import annotations

import base64
import pickle

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import HealthCheck, given, settings
from strategies import CODECS, Built, Item, build_entry, built_entries

from pulsar_spark.columnar import ArrowBatchBuilder
from pulsar_spark.protocol import ChunkAssembler, messages, open_entry, pb, select
from pulsar_spark.protocol.crypto import key_wrap as kw
from pulsar_spark.protocol.crypto.decrypt import Decryptor, open_chunk
from pulsar_spark.protocol.crypto.encrypt import Encryptor
from pulsar_spark.protocol.crypto.errors import (
    CiphertextError,
    CryptoError,
    CryptoKeyError,
    DataKeyError,
    DecryptionError,
    EncryptionMetadataError,
    MissingPrivateKey,
)
from pulsar_spark.protocol.crypto.fields import (
    ENCRYPTED_PROPERTIES,
    crypto_failure_action,
    encryption_info,
)
from pulsar_spark.protocol.errors import InvalidArgument, PulsarError

TOPIC = "persistent://public/default/secret"
RSA_A = rsa.generate_private_key(public_exponent=65537, key_size=2048)
RSA_B = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_256 = ec.generate_private_key(ec.SECP256R1())
EC_521 = ec.generate_private_key(ec.SECP521R1())


def _meta(**kw: object) -> pb.MessageMetadata:
    return pb.MessageMetadata(producer_name="prod", sequence_id=10, publish_time=1000, **kw)


def _encrypted(
    built: Built, encryptor: Encryptor, now: float = 0.0
) -> tuple[pb.MessageMetadata, bytes]:
    meta = pb.MessageMetadata()
    meta.CopyFrom(built.metadata)
    return meta, encryptor.encrypt(meta, built.payload, now=now)


def _pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


# -- data-key wrapping ----------------------------------------------------------------


def test_rsa_wrapping_is_oaep_sha1_of_the_modulus_size() -> None:
    data_key = AESGCM.generate_key(bit_length=256)
    wrapped = kw.wrap_data_key(RSA_A.public_key(), data_key)
    assert len(wrapped) == 256
    oaep = padding.OAEP(mgf=padding.MGF1(hashes.SHA1()), algorithm=hashes.SHA1(), label=None)
    assert RSA_A.decrypt(wrapped, oaep) == data_key  # what the Java/C++/Go clients do
    assert kw.unwrap_data_key(RSA_A, RSA_A.public_key().encrypt(data_key, oaep)) == data_key
    with pytest.raises(kw.UnwrapFailed, match="RSA-OAEP"):
        kw.unwrap_data_key(RSA_B, wrapped)


@pytest.mark.parametrize(("key", "size"), [(EC_256, 117), (EC_521, 185)])
def test_ecies_wrapping_has_bouncy_castles_layout(
    key: ec.EllipticCurvePrivateKey, size: int
) -> None:
    data_key = AESGCM.generate_key(bit_length=256)
    wrapped = kw.wrap_data_key(key.public_key(), data_key)
    assert len(wrapped) == size and wrapped[0] == 4  # V (uncompressed) || C || HMAC-SHA1
    assert kw.unwrap_data_key(key, wrapped) == data_key
    assert kw.wrap_data_key(key.public_key(), data_key) != wrapped  # a fresh ephemeral key
    for i in (0, 1, 70, size - 1):
        bad = bytearray(wrapped)
        bad[i] ^= 0x10
        with pytest.raises(kw.UnwrapFailed):
            kw.unwrap_data_key(key, bytes(bad))
    with pytest.raises(kw.UnwrapFailed):
        kw.unwrap_data_key(ec.generate_private_key(ec.SECP256R1()), wrapped)


# -- round trips ----------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("names", [("a",), ("a", "ec")])
def test_encrypted_entries_open_like_plain_ones(codec: int, batched: bool, names: tuple) -> None:
    publics = {"a": RSA_A.public_key(), "ec": EC_256.public_key()}
    encryptor = Encryptor({n: publics[n] for n in names}, topic=TOPIC)
    first = Item(payload=b"x" * 50, key=b"k", key_mode="text", properties={"p": "q"})
    items = [first, Item(payload=b"y" * 70)]
    built = build_entry(items if batched else items[:1], _meta(), codec, batched=batched)
    meta, ciphertext = _encrypted(built, encryptor)
    assert [k.key for k in meta.encryption_keys] == list(names)
    assert len(meta.encryption_param) == 12 and len(ciphertext) == len(built.payload) + 16
    assert built.raw not in ciphertext or not built.raw
    plain = open_entry(1, 2, -1, built.metadata, built.payload)
    for private in ({"a": RSA_A}, {"ec": EC_256}):
        if not set(private) & set(names):
            continue
        entry = open_entry(1, 2, -1, meta, ciphertext, decrypt=Decryptor(private, topic=TOPIC))
        assert messages(entry) == messages(plain)
        lazy = open_entry(1, 2, -1, meta, ciphertext, split=False, decrypt=Decryptor(private))
        rows = ArrowBatchBuilder(TOPIC)
        rows.add(lazy, select(lazy))
        assert [r["value"] for r in rows.build().to_pylist()] == [m.value for m in messages(plain)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(built=built_entries(compacted=True))
def test_any_entry_decrypts_to_what_was_encrypted(built: Built) -> None:
    encryptor = Encryptor({"a": RSA_A.public_key()})
    meta, ciphertext = _encrypted(built, encryptor)
    entry = open_entry(3, 4, 0, meta, ciphertext, decrypt=Decryptor(default_key=RSA_A))
    assert messages(entry) == messages(open_entry(3, 4, 0, built.metadata, built.payload))


def test_any_one_private_key_of_several_names_suffices_and_a_default_key_serves_any_name() -> None:
    encryptor = Encryptor({"a": RSA_A.public_key(), "b": RSA_B.public_key()})
    meta, ciphertext = _encrypted(build_entry([Item(payload=b"v")], _meta(), pb.LZ4), encryptor)
    for decryptor in (
        Decryptor({"b": RSA_B}),
        Decryptor({"b": RSA_A, "a": RSA_A}),  # a wrong key for b, the right one for a
        Decryptor(default_key=RSA_B),
        Decryptor({"a": RSA_B}, default_key=RSA_B),  # a's key is wrong, b falls to the default
    ):
        assert [
            m.value for m in messages(open_entry(1, 1, -1, meta, ciphertext, decrypt=decryptor))
        ] == [b"v"]


def test_the_data_key_is_unwrapped_once_per_distinct_wrapped_key_and_renewed_after_4_hours() -> (
    None
):
    encryptor = Encryptor({"a": RSA_A.public_key()})
    decryptor = Decryptor({"a": RSA_A})
    built = build_entry([Item(payload=b"v")], _meta(), pb.NONE)
    values = set()
    for i in range(50):
        meta, ciphertext = _encrypted(built, encryptor, now=i * 60.0)
        values.add(meta.encryption_keys[0].value)
        open_entry(1, i, -1, meta, ciphertext, decrypt=decryptor)
    assert (decryptor.unwrapped, len(values), encryptor.data_keys_made) == (1, 1, 1)
    meta, ciphertext = _encrypted(built, encryptor, now=4 * 3600.0)
    assert meta.encryption_keys[0].value not in values and encryptor.data_keys_made == 2
    assert messages(open_entry(1, 99, -1, meta, ciphertext, decrypt=decryptor))[0].value == b"v"
    assert decryptor.unwrapped == 2
    ivs = {_encrypted(built, encryptor, now=5 * 3600.0)[0].encryption_param for _ in range(20)}
    assert len(ivs) == 20  # a fresh IV per payload


def test_chunks_are_decrypted_one_by_one_before_they_are_put_together() -> None:
    encryptor = Encryptor({"a": RSA_A.public_key()})
    whole = build_entry([Item(payload=bytes(range(256)) * 40)], _meta(), pb.ZLIB, batched=False)
    compressed = whole.payload
    parts = [compressed[i : i + 1000] for i in range(0, len(compressed), 1000)]
    assembler = ChunkAssembler()
    decryptor = Decryptor({"a": RSA_A})
    done = None
    for chunk_id, part in enumerate(parts):
        meta = pb.MessageMetadata()
        meta.CopyFrom(whole.metadata)
        meta.uuid, meta.chunk_id = "prod-10", chunk_id
        meta.num_chunks_from_msg, meta.total_chunk_msg_size = len(parts), len(compressed)
        ciphertext = encryptor.encrypt(meta, part, now=0)
        # without a decryptor (an id-level scan) the chunk stays encrypted, tag cut
        blind_meta, blind = open_chunk(None, meta, ciphertext, message_id="x")  # type: ignore[misc]
        assert blind_meta is meta and blind == ciphertext[:-16] and len(blind) == len(part)
        opened = open_chunk(decryptor, meta, ciphertext, message_id=f"1:{chunk_id}:-1:-1")
        assert opened is not None and not opened[0].encryption_keys
        done = assembler.add(1, chunk_id, *opened) or done
        for action, expected in (
            ("discard", None),
            ("consume", DecryptionError),
            ("fail", MissingPrivateKey),
        ):
            other = Decryptor(action=action)
            if expected is None:
                assert open_chunk(other, meta, ciphertext, message_id="x") is None
            else:
                with pytest.raises(
                    expected, match="chunk" if action == "consume" else "no private key"
                ):
                    open_chunk(other, meta, ciphertext, message_id="x")
    assert done is not None
    entry = open_entry(1, len(parts) - 1, -1, done.metadata, done.payload)
    assert messages(entry)[0].value == bytes(range(256)) * 40


# -- failure actions ------------------------------------------------------------------


def _one_encrypted(codec: int = pb.LZ4, batched: bool = True) -> tuple[pb.MessageMetadata, bytes]:
    encryptor = Encryptor({"app.key": RSA_A.public_key(), "ops.key": RSA_B.public_key()})
    items = [Item(payload=b"secret-1"), Item(payload=b"secret-2")]
    return _encrypted(
        build_entry(items if batched else items[:1], _meta(), codec, batched=batched), encryptor
    )


def test_without_a_decryptor_an_encrypted_entry_fails_naming_id_keys_and_the_option() -> None:
    meta, ciphertext = _one_encrypted()
    with pytest.raises(MissingPrivateKey) as info:
        open_entry(7, 8, 2, meta, ciphertext)
    text = str(info.value)
    assert "7:8:2:-1" in text and "'app.key', 'ops.key'" in text and "private_key=" in text
    assert info.value.key_names == ("app.key", "ops.key") and not info.value.retriable


def test_fail_discard_and_consume() -> None:
    meta, ciphertext = _one_encrypted()
    hint = "set the read option privateKey"
    with pytest.raises(MissingPrivateKey, match=f"{TOPIC}.*|{hint}") as info:
        open_entry(7, 8, 2, meta, ciphertext, decrypt=Decryptor(topic=TOPIC, key_hint=hint))
    assert hint in str(info.value) and TOPIC in str(info.value) and "7:8:2:-1" in str(info.value)

    seen: list[DecryptionError] = []
    discarding = Decryptor(action="discard", topic=TOPIC, on_discard=seen.append)
    entry = open_entry(7, 8, 2, meta, ciphertext, decrypt=discarding)
    assert entry.discarded and entry.count == 0 and select(entry) == [] and messages(entry) == []
    assert discarding.discarded == 2 and seen[0].message_id == "7:8:2:-1"

    consuming = Decryptor({"app.key": RSA_B}, action="consume")  # a wrong key: still consumed
    entry = open_entry(7, 8, 2, meta, ciphertext, decrypt=consuming)
    (message,) = messages(entry)
    assert message.value == ciphertext and message.encryption_keys == ("app.key", "ops.key")
    assert str(message.message_id) == "7:8:2:-1" and not entry.batched
    props = message.properties
    assert props[ENCRYPTED_PROPERTIES[0]] == "app.key,ops.key"
    assert props[ENCRYPTED_PROPERTIES[1]] == "LZ4"
    assert base64.b64decode(props[ENCRYPTED_PROPERTIES[2]]) == meta.encryption_param
    assert props[ENCRYPTED_PROPERTIES[3]] == "2"
    rows = ArrowBatchBuilder(TOPIC)
    rows.add(entry, select(entry))
    (row,) = rows.build().to_pylist()
    assert row["value"] == ciphertext and dict(row["properties"])[ENCRYPTED_PROPERTIES[0]]


def test_a_wrong_key_is_tried_once_and_a_corrupted_payload_fails_naming_the_id(monkeypatch) -> None:
    meta, ciphertext = _one_encrypted(batched=False)
    calls = []
    real = kw.unwrap_data_key

    def counting(key, value):
        calls.append(1)
        return real(key, value)

    monkeypatch.setattr("pulsar_spark.protocol.crypto.decrypt.unwrap_data_key", counting)
    wrong = Decryptor({"app.key": RSA_B}, topic=TOPIC)
    for entry_id in range(5):
        with pytest.raises(DataKeyError, match=r"wrong private key\?.*'app.key': RSA-OAEP"):
            open_entry(1, entry_id, -1, meta, ciphertext, decrypt=wrong)
    assert len(calls) == 1
    bad = bytearray(ciphertext)
    bad[3] ^= 1
    with pytest.raises(CiphertextError, match="AES-GCM authentication failed") as info:
        open_entry(1, 9, -1, meta, bytes(bad), decrypt=Decryptor({"ops.key": RSA_B}, topic=TOPIC))
    assert info.value.message_id == "1:9:-1:-1" and info.value.topic == TOPIC
    no_iv = pb.MessageMetadata()
    no_iv.CopyFrom(meta)
    no_iv.ClearField("encryption_param")
    with pytest.raises(EncryptionMetadataError, match="encryption_param"):
        open_entry(1, 9, -1, no_iv, ciphertext, decrypt=Decryptor({"ops.key": RSA_B}))


def test_an_encrypted_tombstone_without_payload_bytes_needs_no_key() -> None:
    meta = _meta(null_value=True, encryption_param=b"\0" * 12)
    meta.encryption_keys.add(key="a", value=b"w")
    (message,) = messages(open_entry(1, 1, -1, meta, b""))
    assert message.value is None


def test_encryption_info_and_failure_action_names() -> None:
    meta, _ = _one_encrypted()
    meta.encryption_keys[0].metadata.add(key="version", value="1")
    info = encryption_info(meta)
    assert info is not None and info.names == ("app.key", "ops.key") and info.algorithm is None
    assert info.keys[0].metadata == (("version", "1"),) and len(info.param) == 12
    assert encryption_info(_meta()) is None
    assert crypto_failure_action(" Discard ") == "discard"
    with pytest.raises(
        InvalidArgument,
        match="cryptoFailureAction must be one of fail, discard, consume, not 'drop'",
    ):
        crypto_failure_action("drop", option="cryptoFailureAction")


def test_bad_keys_are_named_and_never_shown() -> None:
    with pytest.raises(CryptoKeyError, match="private key named 'x'"):
        Decryptor({"x": RSA_A.public_key()})  # type: ignore[dict-item]
    with pytest.raises(CryptoKeyError, match="public key named 'x'"):
        Encryptor({"x": RSA_A})  # type: ignore[dict-item]
    with pytest.raises(CryptoKeyError, match="at least one"):
        Encryptor({})
    small = rsa.RSAPublicNumbers(65537, (1 << 511) + 24691).public_key()  # too small for OAEP
    with pytest.raises(CryptoKeyError, match="'tiny' cannot wrap"):
        Encryptor({"tiny": small})


def test_no_key_material_in_errors_reprs_or_pickles() -> None:
    encryptor = Encryptor({"app.key": RSA_A.public_key()}, topic=TOPIC)
    meta, ciphertext = _encrypted(build_entry([Item(payload=b"v")], _meta(), pb.NONE), encryptor)
    decryptor = Decryptor({"app.key": RSA_A}, topic=TOPIC)
    data_key = kw.unwrap_data_key(RSA_A, meta.encryption_keys[0].value)
    secrets = [
        _pem(RSA_A).decode().splitlines()[5],
        data_key.hex(),
        base64.b64encode(data_key).decode(),
        meta.encryption_keys[0].value.hex()[:40],
        str(RSA_A.private_numbers().d)[:40],
    ]
    bad = bytearray(ciphertext)
    bad[-1] ^= 1
    errors: list[CryptoError] = []
    for decrypt, payload in ((decryptor, bytes(bad)), (Decryptor({"app.key": RSA_B}), ciphertext)):
        with pytest.raises(DecryptionError) as info:
            open_entry(1, 1, -1, meta, payload, decrypt=decrypt)
        errors.append(info.value)
    shown = [repr(decryptor), repr(encryptor), repr(encryption_info(meta))]
    for error in errors:
        shown += [str(error), repr(error)]
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error) and str(again) == str(error)
        assert again.key_names == error.key_names and isinstance(again, PulsarError)
    for text in shown:
        for secret in secrets:
            assert secret not in text


def test_dump_shows_encrypted_messages_as_ciphertext_with_their_key_names() -> None:
    from frame_builders import message_command

    from pulsar_spark.dump import dump_stream
    from pulsar_spark.protocol.framing import encode_payload_command

    meta, ciphertext = _one_encrypted()
    (record,) = dump_stream(iter([encode_payload_command(message_command(), meta, ciphertext)]))
    (message,) = record["messages"]
    assert message["encryption_keys"] == ["app.key", "ops.key"]
    assert base64.b64decode(message["payload"]) == ciphertext


def test_the_overhead_bounds_what_encryption_adds() -> None:
    encryptor = Encryptor({"a": RSA_A.public_key(), "ec": EC_521.public_key()})
    for size in (0, 1, 1000):
        meta = _meta()
        before = meta.ByteSize()
        ciphertext = encryptor.encrypt(meta, b"x" * size, now=0)
        added = meta.ByteSize() - before + len(ciphertext) - size
        assert 0 < added <= encryptor.overhead <= added + 16
