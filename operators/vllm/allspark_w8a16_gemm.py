"""vllm::allspark_w8a16_gemm — ``vllm._custom_ops.allspark_w8a16_gemm(a, b_qweight, b_scales,
b_qzeros, n, group_size, sm_count, sm_version, CUBLAS_M_THRESHOLD, has_zp, n32k16_reorder)`` of
vLLM 0.13.0: 16-bit activations times a per-channel uint8b128 weight in AllSpark's "N32K16"
order; returns a new ``[M, n]`` tensor of ``a``'s dtype.

Arguments as vLLM's ``AllSparkLinearKernel`` passes them (after ``allspark_repack_weight``):
``a [M, K]`` float16/bfloat16 contiguous; ``b_qweight [N32, K]`` uint8 (``N32 = n`` rounded up
to 32), the bytes of the N32K16 order; ``b_scales [1, N32]`` and ``b_qzeros [1, N32]`` (or
None) in ``a``'s dtype, reordered within each run of 32 columns; ``group_size`` -1;
``sm_count``, ``sm_version``, ``CUBLAS_M_THRESHOLD`` only steer the kernel choice (above the
threshold vLLM dequantizes and calls cuBLAS); ``n32k16_reorder`` True.

N32K16 order (from ``rearrange_kn_weight_as_n32k16_order_ldg16_kernel``): byte ``C`` of row
``R`` of the ``[N32/4, 4K]`` view holds ``q[k, n]`` with
``n = 32*(R//8) + R%8 + 16*((C//8)%2) + 8*((C%8)//4)`` and
``k = 16*(C//64) + 2*((C%64)//16) + 8*((C%4)//2) + C%2`` (columns ``n >= N`` hold 0). Scales
and zero points: column ``32b + p`` is stored at ``32b + 4*(p%8) + p//8``.
``W[k, n] = ((q - 128) - zero[n]) * scale[n]`` (zero 0 without ``has_zp``).

vLLM 0.13's checks (``TORCH_CHECK``, RuntimeError): "Shape mismatch: b_qweight.size(0) = ..,
n_32align = ..", "Shape mismatch: b_qweight.size(1) = .., k = ..", "Currently only supports
group_size = -1"; K % 16 == 0 and n % 16 == 0 are required by the kernels (and by vLLM's
``check_allspark_supported_dtype_shape``). vLLM 0.13 uses AllSpark only on Ampere (sm 80-89).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

from operators.registry import register
from operators.spec import (
    Call,
    Case,
    Cost,
    EntryPoint,
    Expected,
    Kind,
    Negative,
    Tier,
    case,
)
from operators.vllm import _gemm, _quant

SM_COUNT, SM_VERSION, CUBLAS_M_THRESHOLD = 132, 90, 1024

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _allspark_kernel(a_ptr, b_ptr, s_ptr, z_ptr, c_ptr, M, N, K,
                     HAS_ZP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    m_mask = rm < M
    n_mask = rn < N
    # N32K16: column n lives in row R of the [N32/4, 4K] byte view; 16 k x 4 n per 64 bytes.
    row = (rn // 32) * 8 + rn % 8
    nsel = 8 * ((rn % 32) // 16) + 4 * ((rn // 8) % 2)
    p = rn % 32
    pcol = (rn // 32) * 32 + 4 * (p % 8) + p // 8
    s = tl.load(s_ptr + pcol, mask=n_mask, other=0.0).to(tl.float32)
    if HAS_ZP:
        z = tl.load(z_ptr + pcol, mask=n_mask, other=0.0).to(tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        k_mask = rk < K
        a = tl.load(a_ptr + rm[:, None].to(tl.int64) * K + rk[None, :],
                    mask=m_mask[:, None] & k_mask[None, :], other=0.0)
        kl = rk % 16
        kcol = (rk // 16) * 64 + 16 * ((kl % 8) // 2) + 2 * (kl // 8) + kl % 2
        off = row[None, :].to(tl.int64) * (4 * K) + kcol[:, None] + nsel[None, :]
        q = tl.load(b_ptr + off, mask=k_mask[:, None] & n_mask[None, :], other=128)
        w = q.to(tl.int32).to(tl.float32) - 128.0
        if HAS_ZP:
            w = w - z[None, :]
        w = w * s[None, :]
        acc += tl.dot(a, w.to(a_ptr.dtype.element_ty))
    tl.store(c_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=m_mask[:, None] & n_mask[None, :])


def allspark_w8a16_gemm(a, b_qweight, b_scales, b_qzeros, n, group_size, sm_count, sm_version,
                        CUBLAS_M_THRESHOLD, has_zp, n32k16_reorder):
    M, K = a.shape
    out = torch.empty((M, n), dtype=a.dtype, device=a.device)
    if M == 0:
        return out
    BLOCK_M = 16 if M <= 16 else 64
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(n, 64))
    _allspark_kernel[grid](a, b_qweight, b_scales, b_qzeros if has_zp else b_scales, out, M, n,
                           K, HAS_ZP=bool(has_zp), BLOCK_M=BLOCK_M, BLOCK_N=64, BLOCK_K=16)
    return out
'''

# Ignores the zero points: right for symmetric (has_zp=False) weights.
NEGATIVE_NO_ZP = SOLUTION.replace("HAS_ZP=bool(has_zp)", "HAS_ZP=False")

# Walks K in 64-wide steps and drops the last partial step: right only when K % 64 == 0.
NEGATIVE_K_TAIL = SOLUTION.replace("for k0 in range(0, K, BLOCK_K):",
                                   "for k0 in range(0, K - K % 64, BLOCK_K):")


def _mk(dtype: str, shape: tuple[int, int, int], cpu: bool = False, **flags: Any) -> Case:
    return case("allspark_w8a16_gemm", dtype, shape, cpu=cpu,
                **{k: v for k, v in flags.items() if v})


@register("vllm::allspark_w8a16_gemm", version=1, kind=Kind.COMPUTE)
class AllsparkW8a16Gemm(_gemm.QuantGemmSpec):
    entry_points = (
        EntryPoint(
            "allspark_w8a16_gemm",
            "allspark_w8a16_gemm(a: Tensor, b_qweight: Tensor, b_scales: Tensor, "
            "b_qzeros: Tensor | None, n: int, group_size: int, sm_count: int, sm_version: int, "
            "CUBLAS_M_THRESHOLD: int, has_zp: bool, n32k16_reorder: bool) -> Tensor",
            "Returns a @ W ([M, n], a's dtype) for the 8-bit AllSpark weight W.",
        ),
    )
    description = (
        "AllSpark W8A16 GEMM as vLLM 0.13's `allspark_w8a16_gemm(a, b_qweight, b_scales, "
        "b_qzeros, n, group_size, sm_count, sm_version, CUBLAS_M_THRESHOLD, has_zp, "
        "n32k16_reorder)`: return a new tensor `a @ W` of shape `[M, n]` in a's dtype "
        "(float16 or bfloat16), accumulated in float32 (rounding the dequantized weight to "
        "a's dtype first is fine). `a` is `[M, K]` contiguous, K % 16 == 0, n % 16 == 0; "
        "N32 = n rounded up to a multiple of 32. `group_size` is -1 (one scale per column), "
        "`n32k16_reorder` True; `sm_count`, `sm_version` and `CUBLAS_M_THRESHOLD` are vLLM's "
        "kernel-selection hints (no effect on the result).\n"
        "`b_qweight` is uint8 `[N32, K]` whose bytes, viewed as `[N32/4, 4K]`, hold the "
        "8-bit codes q[k, n] in AllSpark's N32K16 order: byte C of row R holds q[k, n] with "
        "`n = 32*(R//8) + R%8 + 16*((C//8)%2) + 8*((C%8)//4)` and `k = 16*(C//64) + "
        "2*((C%64)//16) + 8*((C%4)//2) + C%2` (bytes for n >= `n` are padding). `b_scales` "
        "(and `b_qzeros` when `has_zp`, else None) are `[1, N32]` in a's dtype, reordered "
        "within each run of 32 columns: column `32b + p` is stored at `32b + 4*(p%8) + "
        "p//8`. The weight is `W[k, n] = ((q[k, n] - 128) - zero[n]) * scale[n]` (zero = 0 "
        "without zero points). Do not modify the inputs."
    )
    solution = SOLUTION
    negatives = (
        Negative("ignores_zeros", "ignores the zero points (right for symmetric weights)",
                 NEGATIVE_NO_ZP),
        Negative("k_tail_64", "drops the last partial 64-wide K step (right when K % 64 == 0)",
                 NEGATIVE_K_TAIL),
    )

    def cases(self) -> Sequence[Case]:
        return [
            _mk("float16", (3, 128, 64), cpu=True),
            _mk("bfloat16", (5, 96, 48), zp=True, cpu=True),
            _mk("float16", (1, 64, 96), zp=True, cpu=True),
            _mk("bfloat16", (8, 160, 32), cpu=True),
            _mk("float16", (4, 256, 80), outliers=True, cpu=True),
            _mk("float16", (1, 4096, 11008)),
            _mk("bfloat16", (16, 11008, 4096)),
            _mk("float16", (7, 14336, 4096), zp=True),
            _mk("bfloat16", (64, 4096, 14336), zp=True),
            _mk("float16", (1100, 4096, 4096)),
            _mk("bfloat16", (3, 2048, 1040), outliers=True),
            _mk("float16", (0, 1024, 1024)),
        ]

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in ("float16", "bfloat16"):
            m = rng.randrange(1, 9 if small else 1200)
            k = 16 * rng.randrange(2, 12 if small else 600)
            n = 16 * rng.randrange(1, 7 if small else 600)
            k, n = _gemm.capped(k, n, 16, 16)
            out.append(_mk(dt, (m, k, n), zp=rng.random() < 0.5, outliers=rng.random() < 0.3,
                           cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [_mk("float16", (16, 8192, 28672)), _mk("bfloat16", (2048, 8192, 8192)),
                _mk("float16", (128, 14336, 4096), zp=True)]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        m, k, n = c.shape
        dt = c.torch_dtype
        a = _gemm.activations(m, k, dt, gen, outliers=bool(c.get("outliers", False)))
        w = _quant.weights(k, n, gen)
        zp = bool(c.get("zp", False))
        if zp:  # asymmetric: codes 0..255 and an integer zero point, shifted by the bias 128
            qw = _quant.quantize_zp(w, 8, -1, dt)
            zeros: Any = reorder_columns((qw.zeros[0] - 128).to(dt))[None, :]
        else:
            qw = _quant.quantize_sym(w, 8, -1, dt)
            zeros = None
        args = (a, reorder_weight(qw.codes.to(torch.uint8)),
                reorder_columns(qw.scales[0])[None, :], zeros, n, -1, SM_COUNT, SM_VERSION,
                CUBLAS_M_THRESHOLD, zp, True)
        return Call(c.entry, args)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        a = call.args[0]
        return (_gemm.gemm_expected(a, _dequant(call.args, torch.float64), a.dtype),)

    def baseline(self, call: Call) -> object:
        args = list(call.args)
        a = args[0]
        ops = _gemm.vllm_ops(a)
        if ops is not None:
            if a.is_cuda:  # vLLM passes the device's own SM count and version
                props = torch.cuda.get_device_properties(a.device)
                args[6], args[7] = props.multi_processor_count, props.major * 10 + props.minor
            return ops.allspark_w8a16_gemm(*args)
        _check(args)
        return torch.matmul(a, _dequant(args, torch.float32).to(a.dtype))

    def cost(self, c: Case) -> Cost:
        m, k, n = c.shape
        return _gemm.gemm_cost(m, n, k, c.dtype, weight_bytes=k * n,
                               other_bytes=4.0 * n * (2 if c.get("zp") else 1))


def _n32(n: int) -> int:
    return (n + 31) // 32 * 32


def _byte_grid(size_k: int, n32: int, device: torch.device | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """(k, n) of every byte of the ``[N32/4, 4K]`` view."""
    r = torch.arange(n32 // 4, device=device)[:, None]
    c = torch.arange(4 * size_k, device=device)[None, :]
    n = 32 * (r // 8) + r % 8 + 16 * ((c // 8) % 2) + 8 * ((c % 8) // 4)
    k = 16 * (c // 64) + 2 * ((c % 64) // 16) + 8 * ((c % 4) // 2) + c % 2
    return k, n


def reorder_weight(q: torch.Tensor) -> torch.Tensor:
    """``[K, N]`` uint8 codes -> the ``[N32, K]`` N32K16 bytes (padding columns 0)."""
    size_k, size_n = q.shape
    n32 = _n32(size_n)
    padded = torch.zeros(size_k, n32, dtype=q.dtype, device=q.device)
    padded[:, :size_n] = q
    k, n = _byte_grid(size_k, n32, q.device)
    return padded[k, n].reshape(n32, size_k).contiguous()


def restore_weight(b: torch.Tensor, size_n: int) -> torch.Tensor:
    """Inverse of :func:`reorder_weight`: ``[K, N]`` uint8."""
    n32, size_k = b.shape
    k, n = _byte_grid(size_k, n32, b.device)
    out = torch.empty(size_k, n32, dtype=b.dtype, device=b.device)
    out[k, n] = b.reshape(n32 // 4, 4 * size_k)
    return out[:, :size_n]


def _column_perm(n32: int, device: torch.device | None = None) -> torch.Tensor:
    """Stored position of each logical column (``32b + p -> 32b + 4*(p%8) + p//8``)."""
    j = torch.arange(n32, device=device)
    p = j % 32
    return (j // 32) * 32 + 4 * (p % 8) + p // 8


def reorder_columns(x: torch.Tensor) -> torch.Tensor:
    """``[N]`` per-column values -> ``[N32]`` in AllSpark's order (padding 0)."""
    n32 = _n32(x.shape[0])
    out = torch.zeros(n32, dtype=x.dtype, device=x.device)
    out[_column_perm(n32, x.device)[: x.shape[0]]] = x
    return out


def _dequant(args: Sequence[Any], dtype: torch.dtype) -> torch.Tensor:
    a, b_qweight, b_scales, b_qzeros, n = args[:5]
    has_zp = args[9]
    cols = _column_perm(b_qweight.shape[0], b_qweight.device)[:n]
    q = restore_weight(b_qweight, n).to(dtype) - 128
    if has_zp:
        q = q - b_qzeros[0, cols].to(dtype)
    scales: torch.Tensor = b_scales[0, cols].to(dtype)
    return q * scales


def _check(args: Sequence[Any]) -> None:
    a, b_qweight, _, _, n, group_size = args[:6]
    n32 = _n32(n)
    _gemm.require(b_qweight.shape[0] == n32, f"Shape mismatch: b_qweight.size(0) = "
                  f"{b_qweight.shape[0]}, n_32align = {n32}")
    _gemm.require(b_qweight.shape[1] == a.shape[1], f"Shape mismatch: b_qweight.size(1) = "
                  f"{b_qweight.shape[1]}, k = {a.shape[1]}")
    _gemm.require(group_size == -1, "Currently only supports group_size = -1")
