"""Spark DDL strings (``id BIGINT, name STRING``) parsed into Arrow types, without a JVM.

pyspark parses DDL through the JVM (``DataType.fromDDL`` needs an active
session), which the Python workers that plan and read a data source do not
have. :func:`parse_ddl` reads the same language for the types a JSON value can
hold::

    fields     field (',' field)*                    the top level: a struct's fields
    field      name [':'] type [NOT NULL] [COMMENT 'text']
    type       BOOLEAN | TINYINT | BYTE | SMALLINT | SHORT | INT | INTEGER | BIGINT | LONG
             | FLOAT | REAL | DOUBLE | DECIMAL [(p [, s])] | DEC | NUMERIC
             | STRING | CHAR(n) | VARCHAR(n) | BINARY | DATE
             | TIMESTAMP | TIMESTAMP_LTZ | TIMESTAMP_NTZ
             | ARRAY<type> | MAP<type, type> | STRUCT<field, ...>

Names may be back-quoted (```a b```, a doubled back-quote inside); keywords
are case-insensitive. A whole string that is one type (``map<string,int>``)
is that type. Errors are :class:`DdlError` (a ``ValueError``) saying where.
"""

from __future__ import annotations

import re

import pyarrow as pa

from pulsar_spark.protocol.errors import InvalidArgument

__all__ = ["DdlError", "parse_ddl"]


class DdlError(InvalidArgument):
    """A DDL string that does not parse (not retriable; a ValueError)."""


_TOKEN = re.compile(r"\s*(?:(`(?:[^`]|``)*`)|('(?:[^'\\]|\\.)*')|([A-Za-z_][\w$]*)|(\d+)|(\S))")

_SIMPLE: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "tinyint": pa.int8(),
    "byte": pa.int8(),
    "smallint": pa.int16(),
    "short": pa.int16(),
    "int": pa.int32(),
    "integer": pa.int32(),
    "bigint": pa.int64(),
    "long": pa.int64(),
    "float": pa.float32(),
    "real": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ltz": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}


class _Tokens:
    def __init__(self, text: str) -> None:
        self.text = text
        self.items: list[tuple[str, str, int]] = []  # (kind, text, offset)
        pos = 0
        while pos < len(text):
            match = _TOKEN.match(text, pos)
            if match is None:  # only blanks were left
                break
            kind = "qname" if match[1] else "str" if match[2] else "word" if match[3] else ""
            kind = kind or ("num" if match[4] else "sym")
            self.items.append(
                (kind, match[match.lastindex or 0], match.start(match.lastindex or 0))
            )
            pos = match.end()
        self.i = 0

    def peek(self) -> tuple[str, str, int]:
        if self.i < len(self.items):
            return self.items[self.i]
        return ("end", "", len(self.text))

    def take(self) -> tuple[str, str, int]:
        token = self.peek()
        self.i += 1
        return token

    def fail(self, expected: str) -> DdlError:
        kind, text, at = self.peek()
        found = "the end" if kind == "end" else repr(text)
        return DdlError(f"DDL {self.text!r}: expected {expected} at offset {at}, found {found}")

    def word(self, *words: str) -> bool:
        kind, text, _ = self.peek()
        if kind == "word" and text.lower() in words:
            self.i += 1
            return True
        return False

    def sym(self, symbol: str) -> bool:
        kind, text, _ = self.peek()
        if kind == "sym" and text == symbol:
            self.i += 1
            return True
        return False

    def expect(self, symbol: str) -> None:
        if not self.sym(symbol):
            raise self.fail(repr(symbol))

    def number(self) -> int:
        kind, text, _ = self.peek()
        if kind != "num":
            msg = "a number"
            raise self.fail(msg)
        self.i += 1
        return int(text)


def parse_ddl(text: str) -> pa.DataType:
    """The Arrow type of a DDL string: a struct for a list of fields (the usual form),
    or the one type the string names.

    Raises:
        DdlError: text that does not parse, or a struct with a name twice.
    """
    tokens = _Tokens(text)
    if tokens.peek()[0] == "end":
        msg = "DDL: the string is empty"
        raise DdlError(msg)
    start = tokens.i
    try:
        result = _type(tokens)
        if tokens.peek()[0] != "end":
            msg = "the end"
            raise tokens.fail(msg)
    except DdlError:
        tokens.i = start
        result = pa.struct(_fields(tokens, end=None))
    return result


def _fields(tokens: _Tokens, end: str | None) -> list[pa.Field]:
    fields: list[pa.Field] = []
    while True:
        kind, name, _ = tokens.take()
        if kind == "qname":
            name = name[1:-1].replace("``", "`")
        elif kind != "word":
            tokens.i -= 1
            msg = "a field name"
            raise tokens.fail(msg)
        tokens.sym(":")
        dtype = _type(tokens)
        nullable = True
        if tokens.word("not"):
            if not tokens.word("null"):
                msg = "NULL after NOT"
                raise tokens.fail(msg)
            nullable = False
        if tokens.word("comment") and tokens.take()[0] != "str":
            tokens.i -= 1
            msg = "a quoted comment"
            raise tokens.fail(msg)
        if any(f.name == name for f in fields):
            msg = f"DDL {tokens.text!r}: field {name!r} is given twice"
            raise DdlError(msg)
        fields.append(pa.field(name, dtype, nullable=nullable))
        if not tokens.sym(","):
            break
    if end is None:
        if tokens.peek()[0] != "end":
            msg_0 = "',' or the end"
            raise tokens.fail(msg_0)
    else:
        tokens.expect(end)
    return fields


def _type(tokens: _Tokens) -> pa.DataType:
    kind, word, _ = tokens.peek()
    if kind != "word":
        msg = "a type"
        raise tokens.fail(msg)
    name = word.lower()
    tokens.i += 1
    if name in _SIMPLE:
        return _SIMPLE[name]
    if name in ("char", "varchar"):
        tokens.expect("(")
        tokens.number()
        tokens.expect(")")
        return pa.string()
    if name in ("decimal", "dec", "numeric"):
        precision, scale = 10, 0
        if tokens.sym("("):
            precision = tokens.number()
            if tokens.sym(","):
                scale = tokens.number()
            tokens.expect(")")
        if not 1 <= precision <= 38 or not 0 <= scale <= precision:
            msg = f"DDL {tokens.text!r}: decimal({precision}, {scale}) is out of Spark's range"
            raise DdlError(msg)
        return pa.decimal128(precision, scale)
    if name == "array":
        tokens.expect("<")
        item = _type(tokens)
        tokens.expect(">")
        return pa.list_(item)
    if name == "map":
        tokens.expect("<")
        key = _type(tokens)
        tokens.expect(",")
        value = _type(tokens)
        tokens.expect(">")
        return pa.map_(key, value)
    if name == "struct":
        tokens.expect("<")
        if tokens.sym(">"):
            return pa.struct([])
        return pa.struct(_fields(tokens, end=">"))
    tokens.i -= 1
    msg_0 = "a type"
    raise tokens.fail(msg_0)
