"""The worker channel's framing: faithful round trips, and refusal of anything malformed."""

from __future__ import annotations

import struct

import orjson
import pytest
import torch

from device_agent.codec import CodecError, decode, encode


def _frame(msg: dict[str, object]) -> bytes:
    return encode(msg)[4:]


def test_round_trip_keeps_values_dtypes_and_layouts() -> None:
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    msg = {
        "t": base.t(),  # transposed (non-contiguous)
        "s": base[:, ::2],  # strided
        "e": torch.tensor(3.0).expand(2, 3),  # stride 0
        "bf": torch.randn(5).to(torch.bfloat16),
        "scalar": torch.tensor(7, dtype=torch.int64),
        "empty": torch.empty(0, 3),
        "b": torch.tensor([True, False]),
        "nested": ({"x": [1, 2.5, None, "s"]}, torch.float16),
        "k": {0: "int key", "name": (1, 2)},
    }
    out = decode(_frame(msg))
    for key in ("t", "s", "e", "bf", "scalar", "empty", "b"):
        assert out[key].dtype == msg[key].dtype
        assert torch.equal(out[key], msg[key])
        assert out[key].stride() == msg[key].stride()
    assert out["nested"] == ({"x": [1, 2.5, None, "s"]}, torch.float16)
    assert out["k"] == {0: "int key", "name": (1, 2)}


def test_non_finite_floats_and_devices_survive_json() -> None:
    import math

    out = decode(_frame({"v": [math.inf, -math.inf, math.nan, 1.5], "d": torch.device("cpu")}))
    assert out["v"][:2] == [math.inf, -math.inf] and math.isnan(out["v"][2])
    assert out["d"] == torch.device("cpu")
    for bad in ({"__device__": "file"}, {"__float__": "1e999999"}):
        header = orjson.dumps({"body": {"x": bad}, "blobs": []})
        with pytest.raises(CodecError):
            decode(struct.pack("<I", len(header)) + header)


def test_complex_scalars_round_trip_non_finite_parts_included() -> None:
    import math

    out = decode(_frame({"alpha": (1.5 - 0.25j), "z": complex(math.inf, math.nan), "r": 2.0}))
    assert out["alpha"] == 1.5 - 0.25j and type(out["alpha"]) is complex
    assert out["z"].real == math.inf and math.isnan(out["z"].imag)
    assert out["r"] == 2.0 and type(out["r"]) is float
    for bad in ([1.0], [1.0, "x"], [1, 2], "1+2j", [1.0, [2.0]]):
        body = {"__dict__": [["x", {"__complex__": bad}]]}
        header = orjson.dumps({"body": body, "blobs": []})
        with pytest.raises(CodecError, match="bad complex"):
            decode(struct.pack("<I", len(header)) + header)


def test_no_pickle_and_unknown_objects_refused() -> None:
    with pytest.raises(CodecError):
        encode({"f": object()})
    header = orjson.dumps({"body": {"x": {"__reduce__": "os.system"}}, "blobs": []})
    with pytest.raises(CodecError, match="unknown object"):
        decode(struct.pack("<I", len(header)) + header)


@pytest.mark.parametrize("mangle", [
    lambda f: f[:3],                       # truncated
    lambda f: f[:-1],                      # blob cut short
    lambda f: f + b"x",                    # trailing garbage
    lambda f: struct.pack("<I", 10**6) + f[4:],  # header longer than frame
    lambda f: f[:4] + b"{not json" + f[13:],
])
def test_malformed_frames_raise(mangle) -> None:  # type: ignore[no-untyped-def]
    frame = _frame({"t": torch.arange(10, dtype=torch.float32)})
    with pytest.raises(CodecError):
        decode(mangle(frame))


def test_geometry_must_match_bytes() -> None:
    header = orjson.dumps({"body": {"__tensor__": 0}, "blobs": [
        {"dtype": "float32", "size": [100], "stride": [1], "nbytes": 8}]})
    frame = struct.pack("<I", len(header)) + header + struct.pack("<Q", 8) + b"\0" * 8
    with pytest.raises(CodecError):
        decode(frame)
    header = orjson.dumps({"body": {"__tensor__": 0}, "blobs": [
        {"dtype": "evil", "size": [2], "stride": [1], "nbytes": 8}]})
    frame = struct.pack("<I", len(header)) + header + struct.pack("<Q", 8) + b"\0" * 8
    with pytest.raises(CodecError, match="unknown dtype"):
        decode(frame)


def test_a_reply_too_large_for_a_frame_is_the_candidates_case_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A case whose results span more storage than a frame holds is reported to the agent as
    that case's error; the worker does not crash with a codec error (which read as an
    unexplained ``worker exited``)."""
    import device_agent.codec as codec
    from device_agent.protocol import AgentChannel, CaseOutputs
    from device_agent.sandboxed_job import send_case_reply

    sent: list[bytes] = []

    class Sock:
        def sendall(self, data: bytes) -> None:
            sent.append(data)

    def reply(index: int, output: torch.Tensor) -> CaseOutputs:
        return CaseOutputs(index=index, outputs=[output], layouts=[None], post_inputs={},
                           seconds=0.0, own_launches=1, guard=(), integrity=())

    monkeypatch.setattr(codec, "MAX_FRAME", 4096)
    ch = AgentChannel(Sock())  # type: ignore[arg-type]
    big = torch.zeros(1 << 16)[::1 << 14]  # 4 elements spanning 192 KiB of storage
    assert not send_case_reply(ch, reply(3, big))
    assert len(sent) == 1
    msg = decode(sent[0][4:])
    assert msg["type"] == "case_error" and msg["index"] == 3
    assert "cannot be returned" in msg["message"] and "exceeds 4096" in msg["message"]
    small = torch.zeros(4)
    assert send_case_reply(ch, reply(4, small))
    assert decode(sent[1][4:])["type"] == "case"
