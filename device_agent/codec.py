"""Framing for the agent <-> sandbox-worker channel.

The agent reads frames written by a process that runs untrusted code, so the format is
deliberately dumb: a JSON header plus raw tensor bytes. Nothing is ever unpickled; decoding only
builds plain Python values and tensors of known dtypes, within a size limit.

Frame: ``u32 header_len | header JSON | blob bytes...``; the header's ``blobs`` lists each
tensor's dtype, size, stride and byte length; values reference blobs by index.
"""

from __future__ import annotations

import asyncio
import math
import struct
from typing import Any

import orjson
import torch

from operators.invoke import extent, span
from operators.spec import PointerArray, dtype_from_name, dtype_name

MAX_FRAME = 1 << 31  # 2 GiB: generous for full-tier GPU outputs, bounded for the agent.
_LEN = struct.Struct("<I")
_DEVICE_TYPES = frozenset({"cpu", "cuda"})
_NON_FINITE = frozenset({"nan", "inf", "-inf"})
_BLOB_SIZE = struct.Struct("<Q")


class CodecError(ValueError):
    """A frame that is malformed, too large, or names something we do not decode."""


def _storage_span(t: torch.Tensor) -> torch.Tensor:
    """The smallest 1-D slice of storage that holds every element of ``t``."""
    if t.numel() == 0:
        return torch.empty(0, dtype=t.dtype)
    flat = t.as_strided((span(t),), (1,), t.storage_offset())
    return flat.detach().cpu().contiguous()


def to_host(value: Any) -> Any:
    """``value`` with every device tensor copied to host memory, shape and strides kept (as
    :func:`encode` would send it): the device work of a reply, done before the reply is encoded
    and sent, so a worker can give the device back first."""
    if isinstance(value, torch.Tensor):
        if value.device.type == "cpu":
            return value
        flat = _storage_span(value)
        if not flat.numel():
            return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype)
        return flat.as_strided(value.shape, value.stride(), 0)
    if isinstance(value, tuple):
        return tuple(to_host(v) for v in value)
    if isinstance(value, list):
        return [to_host(v) for v in value]
    if isinstance(value, dict):
        return {k: to_host(v) for k, v in value.items()}
    return value


def encode(message: dict[str, Any]) -> bytes:
    blobs: list[bytes] = []
    meta: list[dict[str, Any]] = []

    def enc(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            flat = _storage_span(v)
            raw = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
            meta.append({"dtype": dtype_name(v.dtype), "size": list(v.shape),
                         "stride": list(v.stride()), "nbytes": len(raw)})
            blobs.append(raw)
            return {"__tensor__": len(blobs) - 1}
        if isinstance(v, PointerArray):  # the receiver rebuilds the addresses for its copy
            return {"__pointers__": [enc(v.buffer), list(v.offsets)]}
        if isinstance(v, torch.dtype):
            return {"__dtype__": dtype_name(v)}
        if isinstance(v, torch.device):  # where an allocation goes: the worker re-targets it
            return {"__device__": v.type}
        if isinstance(v, float) and not math.isfinite(v):  # JSON has no NaN or inf
            return {"__float__": repr(v)}
        if isinstance(v, complex):  # the alpha/beta of complex cuBLAS routines
            return {"__complex__": [enc(v.real), enc(v.imag)]}
        if isinstance(v, tuple):
            return {"__tuple__": [enc(x) for x in v]}
        if isinstance(v, list):
            return [enc(x) for x in v]
        if isinstance(v, dict):
            return {"__dict__": [[str(k) if not isinstance(k, int) else k, enc(x)]
                                 for k, x in v.items()]}
        if v is None or isinstance(v, bool | int | float | str):
            return v
        raise CodecError(f"cannot encode {type(v).__name__}")

    body = enc(message)
    header = orjson.dumps({"body": body, "blobs": meta}, option=orjson.OPT_SERIALIZE_NUMPY)
    parts = [_LEN.pack(len(header)), header]
    for raw in blobs:
        parts.append(_BLOB_SIZE.pack(len(raw)))
        parts.append(raw)
    frame = b"".join(parts)
    if len(frame) > MAX_FRAME:
        raise CodecError(f"frame of {len(frame)} bytes exceeds {MAX_FRAME}")
    return _LEN.pack(len(frame)) + frame


def decode(frame: bytes) -> dict[str, Any]:
    """Decode one frame body (without its outer length prefix). A frame may be a candidate's
    (it can write to the channel), so whatever a malformed one makes the decoder raise (a
    ``__tuple__`` of an int, a ``__dict__`` of unhashable keys, nesting deeper than the
    interpreter's stack, sizes past int64) is a :class:`CodecError`, never another error."""
    try:
        return _decode(frame)
    except CodecError:
        raise
    except (TypeError, ValueError, RuntimeError, OverflowError, MemoryError) as exc:
        raise CodecError(f"malformed frame ({type(exc).__name__}: {str(exc)[:200]})") from None


def _decode(frame: bytes) -> dict[str, Any]:
    header, tensors = _split_frame(frame)
    body = _revive(header["body"], tensors)
    if not isinstance(body, dict):
        raise CodecError("message body is not an object")
    return body


def _split_frame(frame: bytes) -> tuple[dict[str, Any], list[torch.Tensor]]:
    """A frame's JSON header and its tensors, every length checked against the frame's."""
    if len(frame) < _LEN.size:
        raise CodecError("truncated frame")
    (hlen,) = _LEN.unpack_from(frame, 0)
    pos = _LEN.size
    if hlen > len(frame) - pos:
        raise CodecError("header longer than frame")
    try:
        header = orjson.loads(frame[pos:pos + hlen])
    except orjson.JSONDecodeError as exc:
        raise CodecError(f"bad header JSON: {exc}") from None
    pos += hlen
    if not isinstance(header, dict) or "body" not in header or not isinstance(header.get("blobs"), list):
        raise CodecError("header lacks body/blobs")
    tensors: list[torch.Tensor] = []
    for m in header["blobs"]:
        if pos + _BLOB_SIZE.size > len(frame):
            raise CodecError("truncated blob length")
        (n,) = _BLOB_SIZE.unpack_from(frame, pos)
        pos += _BLOB_SIZE.size
        if not isinstance(m, dict) or n != m.get("nbytes") or pos + n > len(frame):
            raise CodecError("blob size mismatch")
        tensors.append(_tensor(m, frame[pos:pos + n]))
        pos += n
    if pos != len(frame):
        raise CodecError("trailing bytes after blobs")
    return header, tensors


def _revive(v: Any, tensors: list[torch.Tensor]) -> Any:
    """A decoded JSON value with its tagged objects (tensors by reference, dtypes, devices,
    non-finite floats, tuples, complex numbers, pointer arrays, non-string-keyed dicts) made
    whole again; anything tagged otherwise is refused."""
    if isinstance(v, list):
        return [_revive(x, tensors) for x in v]
    if not isinstance(v, dict):
        return v
    if set(v) == {"__tensor__"}:
        i = v["__tensor__"]
        if not isinstance(i, int) or not 0 <= i < len(tensors):
            raise CodecError("bad tensor reference")
        return tensors[i]
    if set(v) == {"__dtype__"}:
        return _dtype(v["__dtype__"])
    if set(v) == {"__device__"}:
        if v["__device__"] not in _DEVICE_TYPES:
            raise CodecError(f"unknown device type {v['__device__']!r}")
        return torch.device(v["__device__"])
    if set(v) == {"__float__"}:
        if v["__float__"] not in _NON_FINITE:
            raise CodecError("bad non-finite float")
        return float(v["__float__"])
    if set(v) == {"__tuple__"}:
        return tuple(_revive(x, tensors) for x in v["__tuple__"])
    if set(v) == {"__complex__"}:
        return _complex(_revive(v["__complex__"], tensors))
    if set(v) == {"__pointers__"}:
        return _pointer_array(_revive(v["__pointers__"], tensors))
    if set(v) == {"__dict__"}:
        return {k: _revive(x, tensors) for k, x in v["__dict__"]}
    raise CodecError(f"unknown object with keys {sorted(v)[:4]}")


def _complex(parts: Any) -> complex:
    """A complex number from its decoded ``[real, imag]`` (each a float, non-finite included)."""
    if not (isinstance(parts, list) and len(parts) == 2
            and all(type(p) is float for p in parts)):
        raise CodecError("bad complex number")
    return complex(parts[0], parts[1])


def _pointer_array(parts: Any) -> PointerArray:
    """A pointer array from its decoded ``[buffer, offsets]``, new addresses and all."""
    if not (isinstance(parts, list) and len(parts) == 2 and isinstance(parts[0], torch.Tensor)
            and isinstance(parts[1], list) and all(type(o) is int for o in parts[1])):
        raise CodecError("bad pointer array")
    try:
        return PointerArray(parts[0], tuple(parts[1]))
    except ValueError as exc:
        raise CodecError(f"bad pointer array: {exc}") from None


def _dtype(name: Any) -> torch.dtype:
    if not isinstance(name, str):
        raise CodecError("dtype name is not a string")
    try:
        return dtype_from_name(name)
    except ValueError as exc:
        raise CodecError(str(exc)) from None


def _tensor(m: dict[str, Any], raw: bytes) -> torch.Tensor:
    dtype = _dtype(m.get("dtype"))
    size, stride = m.get("size"), m.get("stride")
    if not (isinstance(size, list) and isinstance(stride, list) and len(size) == len(stride)
            and all(isinstance(x, int) and x >= 0 for x in size + stride)):
        raise CodecError("bad tensor geometry")
    itemsize = torch.empty((), dtype=dtype).element_size()
    numel = 1
    for s in size:
        numel *= s
    elements = 0 if numel == 0 else extent(size, stride)
    if elements * itemsize != len(raw):
        raise CodecError("tensor bytes do not match its geometry")
    if elements == 0:
        return torch.empty(size, dtype=dtype)
    flat = torch.frombuffer(bytearray(raw), dtype=dtype)
    return flat.as_strided(size, stride, 0)


# ---- asyncio and blocking transports ----------------------------------------------------------

async def read_message(reader: asyncio.StreamReader) -> dict[str, Any]:
    head = await reader.readexactly(_LEN.size)
    (n,) = _LEN.unpack(head)
    if n > MAX_FRAME:
        raise CodecError(f"frame of {n} bytes exceeds {MAX_FRAME}")
    return decode(await reader.readexactly(n))


def read_message_blocking(sock: Any) -> dict[str, Any]:
    head = _recv_exactly(sock, _LEN.size)
    (n,) = _LEN.unpack(head)
    if n > MAX_FRAME:
        raise CodecError(f"frame of {n} bytes exceeds {MAX_FRAME}")
    return decode(_recv_exactly(sock, n))


def _recv_exactly(sock: Any, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("channel closed")
        buf += chunk
    return bytes(buf)
