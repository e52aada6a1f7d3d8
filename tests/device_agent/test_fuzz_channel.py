"""Fuzzing the worker's result channel as the agent reads it (issue #19, point 6).

A candidate runs inside the worker, so every byte on the channel may be its: it can write to
the channel's descriptor directly. The agent decodes those frames (``device_agent.codec``) in
its own process, where a decoding error must be the one kind the evaluation turns into the
candidate's RUNTIME_ERROR (:class:`CodecError`) and never an exception that escapes as the
agent's INTERNAL error. In-process and fast: no agent needed. The end-to-end version (a
candidate writing such frames to its descriptors) is in test_fuzz_loader.py.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from device_agent.codec import CodecError, decode, encode, read_message
from tests.device_agent.fuzzing import frames, fuzz_settings, seeded, worker_messages


def _read(frame: bytes) -> dict[str, Any]:
    """The agent's own read path: an asyncio stream fed the bytes."""

    async def go() -> dict[str, Any]:
        reader = asyncio.StreamReader()
        reader.feed_data(frame)
        reader.feed_eof()
        return await read_message(reader)

    return asyncio.run(go())


def _header_frame(header: bytes) -> bytes:
    body = struct.pack("<I", len(header)) + header
    return struct.pack("<I", len(body)) + body


@fuzz_settings(examples=300)
@given(frame=frames())
@example(frame=_header_frame(b'{"body": {"__tuple__": 5}, "blobs": []}'))
@example(frame=_header_frame(b'{"body": {"__dict__": [[1, 2, 3]]}, "blobs": []}'))
@example(frame=_header_frame(b'{"body": {"__dict__": [[[1], 2]]}, "blobs": []}'))
@example(frame=_header_frame(b'{"body": {"__dict__": [["t", {"__tensor__": 0}]]}, "blobs": '
                             b'[{"dtype": "float32", "size": [0, 4611686018427387904, 2], '
                             b'"stride": [1, 1, 1], "nbytes": 0}]}' + struct.pack("<Q", 0)))
@seeded
def test_fuzz_frames_decode_or_raise_codec_error(frame: bytes) -> None:
    """Any frame: a message (a dict) or CodecError (or EOF for one cut short), nothing else."""
    try:
        msg = _read(frame)
    except (CodecError, asyncio.IncompleteReadError):
        return
    assert isinstance(msg, dict)


@fuzz_settings(examples=150)
@given(msg=worker_messages())
@seeded
def test_fuzz_messages_round_trip(msg: dict[str, Any]) -> None:
    """What a worker (or a candidate holding its channel) can send decodes to the same values."""
    try:
        frame = encode(msg)
    except CodecError:
        return
    back = _read(frame)
    assert set(back) == set(msg)

    def same(a: Any, b: Any) -> bool:
        if isinstance(a, torch.Tensor):
            return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
        if isinstance(a, float) and a != a:
            return isinstance(b, float) and b != b
        if isinstance(a, list | tuple):
            return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
        if isinstance(a, dict):
            return isinstance(b, dict) and set(map(str, a)) == set(map(str, b))
        return bool(a == b)

    assert all(same(msg[k], back[k]) for k in msg), (msg, back)


@given(data=st.binary(max_size=200))
@fuzz_settings(examples=200)
@seeded
def test_fuzz_raw_bytes_decode_or_raise_codec_error(data: bytes) -> None:
    try:
        msg = decode(data)
    except CodecError:
        return
    assert isinstance(msg, dict)
