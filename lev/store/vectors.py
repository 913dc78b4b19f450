"""Vectors bound in pgvector's binary form: a chunk's or a highlight's 384 floats go to PostgreSQL as 1,540 bytes
made by NumPy, never as text. pgvector's `Vector` type writes each float's shortest repr in Python (for a
1,000,000-character note's 2,500 chunks, about a second on the event loop); the binary form is built in about
20 microseconds a vector. The parameter is sent untyped, so PostgreSQL reads it as the `vector` its column or cast
says."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import psycopg
from pgvector import Vector
from psycopg.adapt import Dumper
from psycopg.pq import Format
from sqlalchemy.types import UserDefinedType


class VectorBytes(bytes):
    """A vector in pgvector's binary wire form: dimensions and a reserved field (big-endian int16 each), then the
    floats (big-endian float4)."""

    @classmethod
    def of(cls, value: Any) -> VectorBytes:
        floats = np.asarray(value, dtype=">f4").ravel()
        return cls(struct.pack(">HH", floats.size, 0) + floats.tobytes())


class _BinaryDumper(Dumper):
    format = Format.BINARY  # oid 0: the server infers `vector` from the statement and reads it with vector_recv

    def dump(self, obj: Any) -> bytes:
        return bytes(obj)


psycopg.adapters.register_dumper(VectorBytes, _BinaryDumper)  # every connection made from here on


class Embedding(UserDefinedType[Any]):
    """A `vector(dim)` column bound in binary (reads come back as pgvector's parse of the text form)."""

    cache_ok = True

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def get_col_spec(self, **kw: Any) -> str:
        return f"VECTOR({self.dim})"

    def bind_processor(self, dialect: Any) -> Callable[[Any], VectorBytes | None]:
        def process(value: Any) -> VectorBytes | None:
            return None if value is None else VectorBytes.of(value)

        return process

    def result_processor(self, dialect: Any, coltype: Any) -> Callable[[Any], Any]:
        def process(value: Any) -> Any:
            return Vector._from_db(value)

        return process
