"""Pointer-array arguments (cuBLAS Batched routines) across the agent's own machinery: the
worker channel, the dry run, and the replay layer's expected call."""

from __future__ import annotations

import struct

import orjson
import pytest
import torch

from device_agent import dry_run
from device_agent.case_inputs import replay_call
from device_agent.codec import CodecError, decode, encode
from operators.spec import Call, Out, PointerArray


def _frame(msg: dict[str, object]) -> bytes:
    return encode(msg)[4:]


def test_a_pointer_array_crosses_the_channel_with_addresses_of_its_new_buffer() -> None:
    buf = torch.randn(12, dtype=torch.float64)
    out = decode(_frame({"call": (2, PointerArray(buf, (8, 0, 8)))}))
    arr = out["call"][1]
    assert isinstance(arr, PointerArray) and arr.offsets == (8, 0, 8)
    assert torch.equal(arr.buffer, buf) and arr.buffer.data_ptr() != buf.data_ptr()
    base = arr.buffer.data_ptr()
    assert arr.pointers.tolist() == [base + 64, base, base + 64]


@pytest.mark.parametrize("parts", [
    [{"__tensor__": 0}, [0, 99]],  # a pointee outside the buffer
    [{"__tensor__": 0}, [0, 1.5]],  # not an int
    [{"__tensor__": 0}, [True]],  # a bool is not an offset
    [[1, 2], [0]],  # no buffer
    [{"__tensor__": 0}],  # no offsets
])
def test_malformed_pointer_arrays_are_refused(parts: list[object]) -> None:
    good = _frame({"x": torch.zeros(4)})
    (hlen,) = struct.unpack_from("<I", good, 0)
    header = orjson.loads(good[4:4 + hlen])
    header["body"] = {"__dict__": [["x", {"__pointers__": parts}]]}
    raw = orjson.dumps(header)
    with pytest.raises(CodecError, match="pointer array"):
        decode(struct.pack("<I", len(raw)) + raw + good[4 + hlen:])


def test_the_dry_run_passes_the_candidate_int64_addresses() -> None:
    seen: list[torch.Tensor] = []
    call = Call("f", (PointerArray(torch.ones(6), (3, 0)),))
    secs, why = dry_run.warm(lambda ptrs: seen.append(ptrs), call, "cpu")
    assert why == ""
    assert len(seen) == 1 and seen[0].dtype == torch.int64 and seen[0].shape == (2,)


def test_a_replay_keeps_the_first_calls_pointees_and_takes_the_new_values() -> None:
    first = Call("f", (3, PointerArray(torch.zeros(8), (4, 0))), outputs=(Out.arg(1),),
                 mutable=frozenset({1}))
    fresh = Call("f", (3, PointerArray(torch.ones(8), (0, 4))), outputs=(Out.arg(1),),
                 mutable=frozenset({1}))
    alt = replay_call(first, fresh)
    arr = alt.args[1]
    assert isinstance(arr, PointerArray)
    assert arr.offsets == (4, 0)  # where the worker's refilled buffers are pointed at
    assert arr.buffer is fresh.args[1].buffer  # with the new values



def test_a_pointer_array_inside_a_command_stays_one() -> None:
    """The typed protocol flattens records to their fields; a pointer array is not a record: a
    Batched candidate got it as a dict through a real agent until this held."""
    from device_agent.codec import decode
    from device_agent.protocol import CheckCase, decode_command, encode_message

    buf = torch.arange(12, dtype=torch.float32)
    call = Call("cublasSgemvBatched", (3, PointerArray(buf, (8, 0))), {},
                (Out("arg", 1),), frozenset({1}), frozenset())
    msg = CheckCase(index=0, call=call, warm=False, ghost=False, repeat=False, replay=None)
    got = decode_command(decode(encode_message(msg)[4:]))
    assert isinstance(got, CheckCase)
    arr = got.call.args[1]
    assert isinstance(arr, PointerArray) and arr.offsets == (8, 0)
    assert arr.pointers.tolist() == [arr.buffer.data_ptr() + 4 * o for o in (8, 0)]
