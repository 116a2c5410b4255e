"""Protobuf values (PROTOBUF and PROTOBUF_NATIVE): decoded and encoded as Arrow columns."""
