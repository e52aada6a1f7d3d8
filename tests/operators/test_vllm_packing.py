"""The shared weight layouts of the vLLM quantized-GEMM problems (operators/vllm/_packing.py,
_marlin.py, _marlin24.py) against vLLM 0.13's own test utilities.

Two ways: where vLLM 0.13's Python sources are on this machine (``KGB_VLLM_SRC``, default the
unpacked wheel at /work/wt/vllm013/src), its layout functions (``marlin_weights``,
``get_weight_perm``, ``marlin_permute_scales``, ``marlin_zero_points``, ``awq_pack``,
``pack_rows``, ``compress_quantized_24_weight`` ...) are loaded from the wheel's files and
compared with ours over many shapes; everywhere, digests of their outputs on fixed inputs
(recorded from those functions) pin the layouts. ExLlama's word shuffle has no Python helper in
vLLM: it is checked against a transcription of the CUDA ``shuffle_{2,3,4}bit_*`` bit operations.
"""

from __future__ import annotations

import ast
import hashlib
import os
import random
import types
from pathlib import Path

import pytest
import torch

from operators.vllm import _marlin as M
from operators.vllm import _marlin24 as M24
from operators.vllm import _packing as P

_UTILS = "vllm/model_executor/layers/quantization/utils"
_WANT = {
    "quant_utils.py": ["get_pack_factor", "pack_rows", "pack_cols", "awq_pack"],
    "marlin_utils_test.py": ["marlin_permute_weights", "marlin_weights", "get_weight_perm"],
    "marlin_utils.py": ["get_scale_perms", "marlin_permute_scales", "marlin_permute_bias",
                        "marlin_zero_points"],
    "marlin_utils_test_24.py": ["_calculate_meta_reordering_scatter_offsets",
                                "sparse_semi_structured_from_dense_cutlass", "mask_creator",
                                "compress_quantized_24_weight", "get_scale_perms_24",
                                "get_weight_perm_24", "marlin_permute_scales_24"],
}


@pytest.fixture(scope="module")
def vllm_utils() -> types.SimpleNamespace:
    """vLLM 0.13's layout helpers, executed from the wheel's own source files."""
    numpy = pytest.importorskip("numpy")
    root = Path(os.environ.get("KGB_VLLM_SRC", "/work/wt/vllm013/src")) / _UTILS
    if not root.is_dir():
        pytest.skip(f"vLLM 0.13 sources not found at {root} (set KGB_VLLM_SRC)")
    ns: dict = {"numpy": numpy, "np": numpy, "torch": torch, "random": random,
                "ScalarType": object, "GPTQ_MARLIN_TILE": 16}
    for name, funcs in _WANT.items():
        tree = ast.parse((root / name).read_text())
        nodes = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in funcs]
        assert {n.name for n in nodes} == set(funcs), f"{name} lacks some of {funcs}"
        exec(compile(ast.Module(body=nodes, type_ignores=[]), str(root / name), "exec"), ns)
    return types.SimpleNamespace(**ns)


def _codes(shape: tuple[int, int], bits: int, salt: int = 0) -> torch.Tensor:
    """Fixed codes, the same on every machine (no RNG)."""
    i = torch.arange(shape[0] * shape[1], dtype=torch.int64).reshape(shape)
    return (i * 7919 + salt * 104729 + (i // 13) * 31) % (1 << bits)


def _digest(t: torch.Tensor) -> str:
    return hashlib.sha256(t.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()[:16]


MARLIN_SHAPES = [(64, 64), (128, 256), (96, 192), (256, 128)]


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("is_a_8bit", [False, True])
@pytest.mark.parametrize("shape", MARLIN_SHAPES)
def test_marlin_weights_match_vllm(vllm_utils, bits: int, is_a_8bit: bool,
                                   shape: tuple[int, int]) -> None:
    k, n = shape
    if is_a_8bit and k % 32:
        pytest.skip("the 8-bit-activation tiles are 32 rows")
    q = _codes(shape, bits)
    perm = vllm_utils.get_weight_perm(bits, is_a_8bit)
    assert torch.equal(perm, M.weight_perm(bits, is_a_8bit))
    theirs = vllm_utils.marlin_weights(q.clone(), k, n, bits, perm, is_a_8bit=is_a_8bit)
    assert torch.equal(M.pack(q, bits, is_a_8bit), theirs)


@pytest.mark.parametrize("bits", [4, 8])
def test_marlin_closed_form_matches_the_packer(bits: int) -> None:
    k, n = 96, 192
    q = _codes((k, n), bits, salt=3)
    words = P.as_uint32(M.pack(q, bits))
    kk = torch.arange(k)[:, None].expand(k, n)
    nn = torch.arange(n)[None, :].expand(k, n)
    col, shift = M.weight_location(kk, nn, bits)
    assert torch.equal((words[kk // 16, col] >> shift) & ((1 << bits) - 1), q)


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("groups", [1, 2, 4])
def test_marlin_scales_zero_points_bias_match_vllm(vllm_utils, bits: int, groups: int) -> None:
    k, n = 128, 192
    s = (torch.arange(groups * n, dtype=torch.float32).reshape(groups, n) / 7).half()
    group_size = k // groups if groups > 1 else -1
    assert torch.equal(M.permute_scales(s), vllm_utils.marlin_permute_scales(s, k, n, group_size))
    zp = _codes((groups, n), bits, salt=groups)
    assert torch.equal(M.pack_zero_points(zp, bits),
                       vllm_utils.marlin_zero_points(zp, groups, n, bits))
    b = torch.arange(n, dtype=torch.float16)
    assert torch.equal(M.permute_bias(b), vllm_utils.marlin_permute_bias(b))


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_gptq_and_awq_packing_match_vllm(vllm_utils, bits: int) -> None:
    k, n = 64, 128
    q = _codes((k, n), bits, salt=bits)
    assert torch.equal(P.pack_rows(q, bits), vllm_utils.pack_rows(q, bits, k, n))
    assert torch.equal(P.pack_cols(q, bits), vllm_utils.pack_cols(q, bits, k, n))
    if bits in (4, 8):
        assert torch.equal(P.pack_cols(q, bits, P.awq_layout(bits)),
                           vllm_utils.awq_pack(q, bits, k, n))


class _WType:
    def __init__(self, bias: int) -> None:
        self.bias = bias


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("shape", [(64, 128), (128, 256), (256, 384)])
def test_marlin24_matches_vllm(vllm_utils, bits: int, shape: tuple[int, int]) -> None:
    k, n = shape
    bias = 1 << (bits - 1)
    w = torch.sin(torch.arange(k * n, dtype=torch.float32).reshape(k, n) * 0.37)
    mask = M24.keep_mask(w)
    assert torch.equal(mask, vllm_utils.mask_creator(w.t()).t().bool())
    q = torch.where(mask, _codes(shape, bits), torch.full((k, n), bias, dtype=torch.int64))
    comp, meta = vllm_utils.compress_quantized_24_weight(q.int().clone(), k, n, _WType(bias))
    kept, i0, i1 = M24.compress(q - bias)
    assert torch.equal(kept + bias, comp.long())
    assert torch.equal(M24.pack_meta(i0, i1), meta)
    perm = vllm_utils.get_weight_perm_24(bits)
    assert torch.equal(M24.weight_perm_24(bits), perm)
    assert torch.equal(M24.pack_weights_24(kept + bias, bits),
                       vllm_utils.marlin_weights(comp, k // 2, n, bits, perm))
    for groups in (1, 2):
        s = torch.arange(groups * n, dtype=torch.float16).reshape(groups, n)
        gs = k // groups if groups > 1 else -1
        assert torch.equal(M24.permute_scales_24(s),
                           vllm_utils.marlin_permute_scales_24(s, k, n, gs))


def test_round_trips() -> None:
    for bits in (2, 3, 4, 8):
        q = _codes((64, 96), bits)
        assert torch.equal(P.unpack_rows(P.pack_rows(q, bits), bits), q)
        assert torch.equal(P.unpack_cols(P.pack_cols(q, bits), bits), q)
    for bits in (4, 8):
        q = _codes((128, 128), bits)
        assert torch.equal(M.unpack(M.pack(q, bits), 128, 128, bits), q)
        assert torch.equal(M.unpack(M.pack(q, bits, True), 128, 128, bits, True), q)
        zp = _codes((3, 128), bits)
        assert torch.equal(M.unpack_zero_points(M.pack_zero_points(zp, bits), bits), zp)
        s = torch.arange(3 * 128, dtype=torch.float16).reshape(3, 128)
        assert torch.equal(M.permute_scales(M.permute_scales(s), inverse=True), s)
        words = M24.pack_weights_24(q[:64], bits)
        assert torch.equal(M24.unpack_weights_24(words, 128, 128, bits), q[:64])
    sparse = _codes((64, 128), 4) - 8
    sparse = torch.where(M24.keep_mask(sparse.double() + 0.5), sparse, 0)
    kept, i0, i1 = M24.compress(sparse)
    j0, j1 = M24.unpack_meta(M24.pack_meta(i0, i1), 64, 128)
    assert torch.equal(M24.decompress(kept, j0, j1), sparse)


# Digests of vLLM 0.13's own utilities on the fixed inputs above, recorded with the wheel's
# sources (test_*_match_vllm): they pin the layouts where those sources are absent.
GOLDEN = {
    "marlin4": "f62ccb6873bb3877", "marlin8": "912f07ba6a125861",
    "marlin4_a8": "e39676a3105a925c", "marlin8_a8": "b073d77370078eb0",
    "scales_g4": "ce6f322c8162683b", "scales_g1": "53df80268fefc00d",
    "zp4_g4": "373211c9103c1e09", "bias": "22e089f8e2a77827", "awq4": "56886ed044cf753f",
    "gptq2": "1dab46666dc9e536", "meta24": "421925465e4ecaff",
    "marlin24_4": "2f6e37c29bbe729d", "scales24_g2": "37d1b577b815c6bc",
}


def _golden_values() -> dict[str, torch.Tensor]:
    q4, q8 = _codes((128, 256), 4), _codes((128, 256), 8)
    s4 = (torch.arange(4 * 192, dtype=torch.float32).reshape(4, 192) / 7).half()
    bias = 8
    w = torch.sin(torch.arange(128 * 256, dtype=torch.float32).reshape(128, 256) * 0.37)
    q24 = torch.where(M24.keep_mask(w), q4, torch.full_like(q4, bias))
    kept, i0, i1 = M24.compress(q24 - bias)
    return {
        "marlin4": M.pack(q4, 4), "marlin8": M.pack(q8, 8),
        "marlin4_a8": M.pack(q4, 4, True), "marlin8_a8": M.pack(q8, 8, True),
        "scales_g4": M.permute_scales(s4), "scales_g1": M.permute_scales(s4[:1]),
        "zp4_g4": M.pack_zero_points(_codes((4, 192), 4, salt=4), 4),
        "bias": M.permute_bias(torch.arange(192, dtype=torch.float16)),
        "awq4": P.pack_cols(q4, 4, P.awq_layout(4)), "gptq2": P.pack_rows(_codes((64, 128), 2), 2),
        "meta24": M24.pack_meta(i0, i1), "marlin24_4": M24.pack_weights_24(kept + bias, 4),
        "scales24_g2": M24.permute_scales_24(s4[:2].repeat(1, 2)[:, :256]),
    }


def test_layouts_match_recorded_vllm_digests() -> None:
    got = {k: _digest(v) for k, v in _golden_values().items()}
    assert got == GOLDEN


# ---- ExLlama's shuffle against the CUDA bit operations -----------------------------------------

_M32 = 0xFFFFFFFF


def _shuffle_word(qa: int, bits: int) -> int:
    """shuffle_4bit_8 / shuffle_2bit_16 of q_gemm's qdq headers, transcribed."""
    qb, field = 0, (1 << bits) - 1
    for i in range(16 // bits):
        lo, hi = qa & field, (qa >> bits) & field
        qa >>= 2 * bits
        qb |= (hi << (i * bits + 16)) | (lo << (i * bits))
    return qb & _M32


def _shuffle_3bit(qa: int, qb: int, qc: int) -> tuple[int, int, int]:
    """shuffle_3bit_32, transcribed."""
    qd = qc >> 26
    qc = ((qc << 4) & _M32) | (qb >> 28)
    qb = ((qb << 2) & _M32) | (qa >> 30)
    out = []
    for q in (qa, qb, qc):
        z = 0
        for i in range(5):
            z |= (q & 7) << (i * 3)
            z |= ((q & 0x38) >> 3) << (i * 3 + 16)
            q >>= 6
        out.append(z)
    for w in range(3):
        out[w] |= ((qd >> w) & 1) << 15
        out[w] |= ((qd >> (w + 3)) & 1) << 31
    return out[0] & _M32, out[1] & _M32, out[2] & _M32


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
def test_exllama_shuffle_matches_the_cuda_bit_operations(bits: int) -> None:
    k, n = 64, 6
    q = _codes((k, n), bits, salt=5)
    raw = P.as_uint32(P.pack_rows(q, bits))
    want = raw.clone()
    for col in range(n):
        if bits in (2, 4):
            for row in range(raw.shape[0]):
                want[row, col] = _shuffle_word(int(raw[row, col]), bits)
        elif bits == 3:
            for blk in range(raw.shape[0] // 3):
                words = _shuffle_3bit(*(int(raw[3 * blk + i, col]) for i in range(3)))
                for i in range(3):
                    want[3 * blk + i, col] = words[i]
    assert torch.equal(P.as_uint32(P.exllama_shuffle(P.pack_rows(q, bits), None, bits)), want)
    perm = torch.tensor([(i * 37) % k for i in range(k)])
    shuffled = P.exllama_shuffle(P.pack_rows(q, bits), perm, bits)
    assert torch.equal(P.unshuffle(shuffled, bits), q[perm])
