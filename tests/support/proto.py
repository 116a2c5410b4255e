"""Protobuf messages for PROTOBUF_NATIVE tests: a ``.proto`` compiled at test time with
``grpc_tools.protoc`` (grpcio-tools), into an imported ``_pb2`` module or into message
classes of a private descriptor pool (two versions of one message in one process).

:data:`ORDER_PROTO` has a nested message, repeated fields, a map, an enum, a oneof,
a Timestamp and a wrapper; :func:`orders` makes a few of them with every kind set
somewhere and :func:`order_row` says what the connector reads of each.
"""

from __future__ import annotations

import datetime as dt
import importlib
import sys
from pathlib import Path
from typing import Any

from .official import official_client

__all__ = [
    "ORDER_PROTO",
    "compile_module",
    "message_classes",
    "order_row",
    "orders",
    "produce_native",
]

#: ``{package}`` is filled in, so that each test module has its own file and types.
ORDER_PROTO = """
syntax = "proto3";
package {package};
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

enum Status {{ UNKNOWN = 0; NEW = 1; SHIPPED = 2; }}
message Address {{ string city = 1; int32 zip = 2; }}
message Order {{
  int64 id = 1;
  string name = 2;
  double price = 3;
  repeated string tags = 4;
  repeated int32 qty = 5;
  map<string, int64> attrs = 6;
  Address address = 7;
  repeated Address stops = 8;
  Status status = 9;
  oneof payment {{ string card = 10; int64 account = 11; }}
  google.protobuf.Timestamp created = 12;
  google.protobuf.Int64Value discount = 13;
  uint64 big = 14;
  bytes blob = 15;
}}
"""


def _protoc(args: list[str]) -> None:
    from grpc_tools import protoc

    include = str(Path(protoc.__file__).parent / "_proto")
    code = protoc.main(["protoc", f"-I{include}", *args])
    if code != 0:
        msg = f"protoc failed ({code}): {args}"
        raise RuntimeError(msg)


def compile_module(directory: Path, name: str, text: str) -> Any:
    """``text`` written to ``directory/name.proto``, compiled and imported as ``name_pb2``."""
    (directory / f"{name}.proto").write_text(text)
    _protoc([f"-I{directory}", f"--python_out={directory}", str(directory / f"{name}.proto")])
    sys.path.insert(0, str(directory))
    try:
        return importlib.import_module(f"{name}_pb2")
    finally:
        sys.path.remove(str(directory))


def message_classes(directory: Path, name: str, text: str, *types: str) -> list[Any]:
    """Message classes of ``types`` (full names) of ``text``, in a descriptor pool of
    their own (the default pool keeps one message per full name)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    source = directory / f"{name}.proto"
    source.write_text(text)
    out = directory / f"{name}.pb"
    _protoc([f"-I{directory}", "--include_imports", f"--descriptor_set_out={out}", str(source)])
    files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for proto in files.file:
        pool.Add(proto)
    return [message_factory.GetMessageClass(pool.FindMessageTypeByName(t)) for t in types]


def orders(module: Any) -> list[Any]:
    """Four orders: every kind set, defaults only, the other oneof member, a bare one."""
    order = module.Order
    first = order(id=1, name="tea", price=2.5, tags=["a", "b"], qty=[1, -2, 300], status=2)
    first.attrs["x"] = 7
    first.address.city, first.address.zip = "Paris", 75001
    first.stops.add(city="Lyon", zip=69000)
    first.stops.add()
    first.card = "visa"
    first.created.FromDatetime(dt.datetime(2024, 5, 6, 7, 8, 9, 123456))
    first.discount.value = 0
    first.big, first.blob = 2**64 - 1, b"\x00\xff"
    second = order(id=2, account=42, status=7)  # 7: a number the enum does not declare
    return [first, order(), second, order(id=4, name="é")]


def order_row(msg: Any) -> dict[str, Any]:
    """What the connector reads of an order (maps as dicts)."""
    from decimal import Decimal

    names = {0: "UNKNOWN", 1: "NEW", 2: "SHIPPED"}

    def address(a: Any) -> dict[str, Any]:
        return {"city": a.city, "zip": a.zip}

    created = None
    if msg.HasField("created"):
        created = msg.created.ToDatetime(tzinfo=dt.timezone.utc)
    return {
        "id": msg.id,
        "name": msg.name,
        "price": msg.price,
        "tags": list(msg.tags),
        "qty": list(msg.qty),
        "attrs": dict(msg.attrs),
        "address": address(msg.address) if msg.HasField("address") else None,
        "stops": [address(a) for a in msg.stops],
        "status": names.get(msg.status, str(msg.status)),
        "card": msg.card if msg.WhichOneof("payment") == "card" else None,
        "account": msg.account if msg.WhichOneof("payment") == "account" else None,
        "created": created,
        "discount": msg.discount.value if msg.HasField("discount") else None,
        "big": Decimal(msg.big),
        "blob": msg.blob,
    }


def produce_native(url: str, topic: str, cls: type, messages: list[Any]) -> None:
    """``messages`` sent to ``topic`` by the official Python client under its
    ``ProtobufNativeSchema(cls)`` (none: the topic gets the schema only)."""
    from pulsar.schema import ProtobufNativeSchema

    with official_client(url) as client:
        producer = client.create_producer(topic, schema=ProtobufNativeSchema(cls))
        for msg in messages:
            producer.send(msg)
        producer.close()
