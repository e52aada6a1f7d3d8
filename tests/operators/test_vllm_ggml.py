"""The GGML problems' own machinery: the block formats against the ``gguf`` package's
dequantizer (a dev dependency, used here only), the tolerance of ggml_dequantize against an
emulation of vLLM 0.13's fp16 arithmetic, the baseline switch and bad input."""

from __future__ import annotations

import gguf
import numpy as np
import pytest
import torch
from gguf import quants

import operators
from operators.checking import check
from operators.spec import Tier
from operators.vllm import _ggml as G
from operators.vllm import _ggml_a8

TYPES = list(G.TYPES)


def _floats(rows: int, k: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, k, generator=gen, dtype=torch.float64) * 0.02
    x[0, 5] = 0.4  # an outlier: a block whose scale is set by one value
    x[1, :32] = 0.0  # an all-zero block
    return x


@pytest.mark.parametrize("qtype", TYPES, ids=G.name)
def test_unpack_matches_gguf(qtype: int) -> None:
    w = G.quantize(_floats(6, 768), qtype)
    assert w.dtype == torch.uint8 and w.shape == (6, G.row_bytes(qtype, 768))
    ours = G.unpack(w, qtype, 768).values()
    theirs = quants.dequantize(w.numpy(), gguf.GGMLQuantizationType(qtype))
    assert torch.equal(ours, torch.from_numpy(theirs.astype(np.float64)))


@pytest.mark.parametrize("qtype", TYPES, ids=G.name)
def test_quantize_is_a_real_quantization(qtype: int) -> None:
    """Codes span the type's range and the round trip is close to the floats (within the
    coarsest type's error), so inputs look like real GGUF weights."""
    x = _floats(16, 1024, seed=1)
    dec = G.unpack(G.quantize(x, qtype), qtype, 1024)
    lo, hi = {G.Q8_0: (-127, 127), G.Q2_K: (0, 3), G.Q3_K: (-4, 3), G.Q6_K: (-32, 31)}.get(
        qtype, (0, 31 if qtype in (G.Q5_0, G.Q5_1, G.Q5_K) else 15))
    assert int(dec.q.min()) == lo and int(dec.q.max()) == hi
    rel = float((dec.values() - x).norm() / x.norm())
    assert rel < 0.35, rel
    assert torch.all(dec.values()[1, :32] == 0)


def _vllm_half_dequant(w: torch.Tensor, qtype: int, k: int) -> torch.Tensor:
    """vLLM 0.13's dequantize.cuh arithmetic: fp16 products and differences (__hmul, __hsub),
    and __int2half_rn of Q6_K's scale times code."""
    def h(t: torch.Tensor) -> torch.Tensor:
        return t.to(torch.float16).double()

    dec = G.unpack(w, qtype, k)
    a, b, q = dec.expand(dec.a), dec.expand(dec.b), dec.q.double()
    if qtype in (G.Q4_0, G.Q5_0, G.Q8_0):
        return h(a * q + b)
    if qtype in (G.Q4_1, G.Q5_1):
        return h(h(a * q) + b)
    if qtype == G.Q2_K:
        return h(h(a * q) - h(-b))
    if qtype == G.Q3_K:
        return h(h(a) * q)
    if qtype == G.Q6_K:
        d = w.reshape(w.shape[0], -1, 210)[..., 208:210].contiguous().view(torch.float16)[..., 0]
        d = d.double().repeat_interleave(256, 1)
        return h(d * h(torch.round(a / d) * q))
    return h(h(h(a) * q) - h(-b))  # Q4_K, Q5_K


@pytest.mark.parametrize("qtype", TYPES, ids=G.name)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_dequantize_tolerance_admits_vllms_fp16_arithmetic(qtype: int, dtype: torch.dtype) -> None:
    spec = operators.get("vllm::ggml_dequantize")
    w = G.quantize(_floats(64, 1024, seed=2), qtype)
    call = operators.Call("ggml_dequantize", (w, qtype, 64, 1024, dtype))
    (expected,) = spec.reference(call)
    got = _vllm_half_dequant(w, qtype, 1024).to(dtype)
    c = operators.spec.case("ggml_dequantize", str(dtype).removeprefix("torch."), (64, 1024))
    assert check(got, expected, spec.tolerance(c, dtype)) is None
    # ... and is no wider than it must be: one more fp16 rounding step of error is caught.
    worse = (got.double() * (1 + 8 * 2.0 ** -11)).to(dtype)
    assert check(worse, expected, spec.tolerance(c, dtype)) is not None


GGML_IDS = ["vllm::ggml_dequantize", "vllm::ggml_mul_mat_vec_a8", "vllm::ggml_mul_mat_a8",
            "vllm::ggml_moe_a8", "vllm::ggml_moe_a8_vec"]


# Where each problem's quant_type argument sits.
TYPE_ARG = {"vllm::ggml_dequantize": 1, "vllm::ggml_mul_mat_vec_a8": 2, "vllm::ggml_mul_mat_a8": 2,
            "vllm::ggml_moe_a8": 5, "vllm::ggml_moe_a8_vec": 4}


@pytest.mark.parametrize("op_id", GGML_IDS)
def test_unknown_quant_type_is_refused(op_id: str) -> None:
    """vLLM 0.13 checks nothing here (its kernels run a null or no function); the PyTorch
    baseline says what is wrong instead of returning garbage."""
    spec = operators.get(op_id)
    call = spec.make_call(spec.public_cases(Tier.CPU)[0], torch.Generator().manual_seed(3))
    args = list(call.args)
    args[TYPE_ARG[op_id]] = 16  # IQ2_XXS: out of scope
    with pytest.raises(RuntimeError, match="unsupported GGML quant_type 16"):
        spec.baseline(operators.Call(call.entry, tuple(args)))


def _vllm_a8(x: torch.Tensor, w: torch.Tensor, qtype: int, mmq: bool) -> torch.Tensor:
    """vLLM 0.13's Q8_1 dot products (vecdotq.cuh), emulated in float32: per sub-block the
    integer sum, then the MMVQ (``mmq`` False) or MMQ formula -- the fp16 block sum s for the
    offsets of Q4_0/Q4_1/Q5_0/Q5_1 in MMVQ and of Q4_0/Q4_1/Q5_1/Q4_K/Q5_K in MMQ (whose Q5_0
    tiles subtract 16 from the codes), fp16 products of the Q4_1/Q5_1 scales (__hmul2) -- and a
    float32 sum over the sub-blocks."""
    m, k = x.shape
    xf = x.float().reshape(m, k // 32, 32)
    d8 = xf.abs().amax(-1) / 127
    r = xf / torch.where(d8 == 0, 1.0, d8)[..., None]
    q8 = (torch.sign(r) * torch.floor(r.abs().double() + 0.5)).float()
    d8 = d8.half().float()
    s8 = xf.sum(-1).half().float()
    dec = G.unpack(w, qtype, k)
    sub = dec.sub
    qw = dec.q.float().reshape(-1, k // sub, sub)  # [N, S, sub]
    a, b = dec.a.float(), dec.b.float()  # [N, S]
    q8s = q8.reshape(m, k // sub, sub)
    sumi = torch.einsum("msj,nsj->mns", q8s, qw)
    qsum = q8s.sum(-1)[:, None, :]
    rep = 32 // sub
    d8s, s8s = d8.repeat_interleave(rep, 1)[:, None, :], s8.repeat_interleave(rep, 1)[:, None, :]
    if qtype in (G.Q4_1, G.Q5_1):
        part = sumi * (a * d8s).half().float() + (b * s8s).half().float()
    elif qtype in ((G.Q4_0, G.Q4_K, G.Q5_K) if mmq else (G.Q4_0, G.Q5_0)):
        part = a * d8s * sumi + b * s8s
    else:
        part = a * d8s * sumi + b * d8s * qsum
    return part.sum(-1).to(x.dtype)


@pytest.mark.parametrize("qtype", TYPES, ids=G.name)
@pytest.mark.parametrize("variant,dtype", [("normal", torch.float32), ("ties", torch.float16),
                                           ("small", torch.bfloat16), ("normal", torch.float16)])
@pytest.mark.parametrize("mmq", [False, True], ids=["mmvq", "mmq"])
def test_a8_bound_admits_vllms_formulas(qtype: int, variant: str, dtype: torch.dtype,
                                        mmq: bool) -> None:
    gen = torch.Generator().manual_seed(qtype)
    w = _ggml_a8.weights((48, 512), qtype, gen)
    x = _ggml_a8.activations(5, 512, dtype, gen, variant)
    expected = _ggml_a8.a8_expected(x, w, qtype, mmq)
    got = _vllm_a8(x, w, qtype, mmq)
    assert check(got, expected, _ggml_a8.ALLOWED) is None
    # The exact-form PyTorch baseline passes too, and the bound is tight enough that skipping
    # the activation quantization (raw x) fails it where the output keeps float32.
    exact = (_ggml_a8.torch_q8_1(x) @ _ggml_a8.torch_dequant(w, qtype, 512).T).to(dtype)
    assert check(exact, expected, _ggml_a8.ALLOWED) is None
    if dtype == torch.float32:
        raw = (x.float() @ _ggml_a8.torch_dequant(w, qtype, 512).T).to(dtype)
        assert check(raw, expected, _ggml_a8.ALLOWED) is not None


def test_q8_1_rounds_exact_ties_away_and_marks_only_near_ones() -> None:
    x = torch.zeros(1, 32)
    x[0, :6] = torch.tensor([127.0, 2.5, -2.5, 3.5, 0.5, 2.5 + 2.0 ** -20])  # d = 1 exactly
    a = _ggml_a8.q8_1(x)
    assert a.q[0, :6].tolist() == [127.0, 3.0, -3.0, 4.0, 1.0, 3.0]
    assert a.tie[0, :6].tolist() == [0.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert float(a.dh[0, 0]) == 1.0 and float(a.sh[0, 0]) == 133.5


@pytest.mark.parametrize("qtype", sorted(G.TYPES))
def test_quantizing_in_row_slices_packs_the_same_bytes(qtype: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Benchmark weights are quantized a slice of rows at a time (whole, the MoE weights' float64
    temporaries took over 20 GB); slicing must not change a byte."""
    qk = G.TYPES[qtype][1]
    x = torch.randn(37, 3 * qk, generator=torch.Generator().manual_seed(qtype))
    whole = G.quantize(x, qtype)
    monkeypatch.setattr(G, "QUANTIZE_SLICE_ELEMENTS", 5 * 3 * qk)
    assert torch.equal(G.quantize(x, qtype), whole)
    monkeypatch.setattr(G, "QUANTIZE_SLICE_ELEMENTS", 1)
    assert torch.equal(G.quantize(x, qtype), whole)


@pytest.mark.parametrize("name", ["vllm::ggml_mul_mat_a8", "vllm::ggml_mul_mat_vec_a8"])
def test_dense_full_tier_cases_bound_the_kernel_variants_a_candidate_compiles(name: str) -> None:
    """Each (quant type, dtype) pair is a kernel variant compiled within the correctness stage's
    budget: all thirty made ggml_mul_mat_a8's own reference time out on an H100 under load. Two
    dtypes per type in the public cases, every dtype still met by most types."""
    spec = operators.get(name)
    public = [c for c in spec.public_cases(Tier.FULL) if not c.cpu]
    per_type: dict[str, set[str]] = {}
    for c in public:
        per_type.setdefault(c["quant_type"], set()).add(c.dtype)
    assert len(per_type) == len(G.TYPES) and all(len(d) == 2 for d in per_type.values())
    for dt in ("float16", "bfloat16", "float32"):
        assert sum(dt in d for d in per_type.values()) >= len(G.TYPES) // 2
