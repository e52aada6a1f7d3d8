"""vllm::scaled_int8_quant — ``vllm._custom_ops.scaled_int8_quant(input, scale=None, azp=None,
symmetric=True)`` (vLLM 0.13.0; kernels in csrc/quantization/w8a8/int8/scaled_quant.cu):
activations to int8, per tensor with a given scale or per token with computed ones.

The candidate implements the ``_custom_ops`` wrapper (as the published benchmark calls it),
returning ``(output, scale, azp)``:

- static (``scale`` given, one float32 element): ``out = sat(rne(input / scale))``; with
  ``azp`` (one int32 element, ``symmetric=False``) ``out = sat(rne(input / scale) + azp)``.
  Returns the given ``scale`` and ``azp`` tensors themselves (azp None when symmetric).
- dynamic, symmetric: per row t ``scale[t] = max|input[t]| / 127`` (``[tokens, 1]`` float32),
  ``out[t] = rne(input[t] * 127 / max|input[t]|)`` (0 for an all-zero row, whose scale is 0).
- dynamic, asymmetric (``symmetric=False``): ``scale[t] = (max - min) / 255``,
  ``azp[t] = rne(-128 - min / scale[t])`` (``[tokens, 1]`` int32), ``out[t] = sat(rne(input[t] /
  scale[t]) + azp[t])``.

``rne`` rounds to nearest, ties to even; ``sat`` clamps to [-128, 127]. ``input`` is contiguous,
``[..., hidden]``, float16, bfloat16 or float32; tokens are its rows (numel / hidden). Rows of
the asymmetric dynamic cases are never constant, and their ``-128 - min / scale`` is never
within 1e-3 of a rounding tie, so the integer azp is unambiguous.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import torch

from operators.registry import register
from operators.spec import Call, Case, Cost, EntryPoint, Expected, Kind, Negative, Out, Tier, case
from operators.vllm import _baseline
from operators.vllm._act_quant import (
    INT8_MAX,
    SCALE_REL,
    SHAPES,
    TRITON_ROUNDING,
    QuantSpec,
    approx,
    exact,
    passed_through,
    quantized,
    torch_quantize,
    unique,
)
from operators.vllm._rms import FLOATS, rows_input

SOLUTION = r'''
import torch
import triton
import triton.language as tl
''' + TRITON_ROUNDING + r'''

@triton.jit
def _int8_quant_kernel(x_ptr, o_ptr, s_ptr, azp_ptr, n_rows, n_cols,
                       DYNAMIC: tl.constexpr, ASYM: tl.constexpr,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # Rows are contiguous, n_cols apart. Static: one scale (and azp); dynamic: per row.
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    rmask = rows < n_rows
    if DYNAMIC:
        hi = tl.full([BLOCK_M, BLOCK_N], float("-inf"), tl.float32)
        lo = tl.full([BLOCK_M, BLOCK_N], float("inf"), tl.float32)
        for start in range(0, n_cols, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            mask = rmask[:, None] & (cols < n_cols)[None, :]
            x = tl.load(x_ptr + rows[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)
            x = x.to(tl.float32)
            hi = tl.maximum(hi, tl.where(mask, x, float("-inf")))
            lo = tl.minimum(lo, tl.where(mask, x, float("inf")))
        mx = tl.where(rmask, tl.max(hi, axis=1), 1.0)  # rows past the end: any finite range
        mn = tl.where(rmask, tl.min(lo, axis=1), 0.0)
        if ASYM:
            scale = (mx - mn) / 255.0
            zp = _rne(-128.0 - mn / scale)
            inv = 1.0 / scale
            tl.store(azp_ptr + rows, zp.to(tl.int32), mask=rmask)
        else:
            amax = tl.maximum(mx, -mn)
            scale = amax / 127.0
            inv = tl.where(amax == 0.0, 0.0, 127.0 / tl.where(amax == 0.0, 1.0, amax))
            zp = tl.zeros([BLOCK_M], dtype=tl.float32)
        tl.store(s_ptr + rows, scale, mask=rmask)
    else:
        scale = tl.zeros([BLOCK_M], dtype=tl.float32) + tl.load(s_ptr)
        inv = 1.0 / scale
        if ASYM:
            zp = tl.zeros([BLOCK_M], dtype=tl.float32) + tl.load(azp_ptr).to(tl.float32)
        else:
            zp = tl.zeros([BLOCK_M], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = rmask[:, None] & (cols < n_cols)[None, :]
        x = tl.load(x_ptr + rows[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)
        v = x.to(tl.float32) * inv[:, None]
        if ASYM:
            # sat(rne(v) + zp) == rne(clamp(v, -128 - zp, 127 - zp)) + zp for an integer zp.
            v = tl.minimum(tl.maximum(v, -128.0 - zp[:, None]), 127.0 - zp[:, None])
            q = _rne(v) + zp[:, None]
        else:
            q = _int8(v)
        tl.store(o_ptr + rows[:, None] * n_cols + cols[None, :], q.to(tl.int8), mask=mask)


def scaled_int8_quant(input, scale=None, azp=None, symmetric=True):
    output = torch.empty_like(input, dtype=torch.int8)
    n_cols = input.shape[-1]
    n_rows = input.numel() // n_cols if n_cols else 0
    x = input.contiguous()
    if scale is not None:
        out_scale, out_azp, dynamic = scale, azp, False
    else:
        out_scale = torch.empty((n_rows, 1), device=input.device, dtype=torch.float32)
        out_azp = None if symmetric else torch.empty((n_rows, 1), device=input.device,
                                                     dtype=torch.int32)
        dynamic = True
    if n_rows == 0:
        return output, out_scale, out_azp
    block_n = min(1024, triton.next_power_of_2(n_cols))
    block_m = max(1, min(16, 2048 // block_n))
    asym = out_azp is not None
    _int8_quant_kernel[(triton.cdiv(n_rows, block_m),)](
        x, output, out_scale, out_azp if asym else out_scale, n_rows, n_cols,
        DYNAMIC=dynamic, ASYM=asym, BLOCK_M=block_m, BLOCK_N=block_n)
    return output, out_scale, out_azp
'''

# Treats a static zero point as if absent.
NEGATIVE_IGNORES_AZP = SOLUTION.replace("    asym = out_azp is not None\n",
                                        "    asym = dynamic and out_azp is not None\n")

# Rounds toward zero (a float-to-int cast) instead of to nearest.
NEGATIVE_TRUNCATES = SOLUTION.replace("            q = _int8(v)\n",
                                      "            q = tl.minimum(tl.maximum(v, -128.0), 127.0)"
                                      ".to(tl.int32).to(tl.float32)\n")

# Floors the computed zero point instead of rounding it to nearest.
NEGATIVE_AZP_FLOOR = SOLUTION.replace("            zp = _rne(-128.0 - mn / scale)\n",
                                      "            zp = tl.floor(-128.0 - mn / scale)\n")

_MODES = ("static", "static_azp", "dynamic", "dynamic_azp")


def _case(dt: str, shape: Sequence[int], mode: str, *, cpu: bool = False,
          **params: Any) -> Case:
    return case("scaled_int8_quant", dt, shape, mode=mode, cpu=cpu, **params)


@register("vllm::scaled_int8_quant", version=1, kind=Kind.COMPUTE)
class ScaledInt8Quant(QuantSpec):
    entry_points = (
        EntryPoint(
            "scaled_int8_quant",
            "scaled_int8_quant(input: Tensor, scale: Tensor | None = None, "
            "azp: Tensor | None = None, symmetric: bool = True) "
            "-> tuple[Tensor, Tensor, Tensor | None]",
            "Quantizes input to int8; returns (output, scale, azp).",
        ),
    )
    description = (
        "INT8 activation quantization as vLLM's `vllm._custom_ops.scaled_int8_quant` (the "
        "Python wrapper). `input` is contiguous, `[..., hidden]`, float16, bfloat16 or float32; "
        "its tokens are its rows (`numel // hidden` of them). `rne(v)` rounds to the nearest "
        "integer, ties to even (the other neighbour is accepted only within 2**-16 relative of "
        "a tie); `sat` clamps to [-128, 127]. The output is a new contiguous int8 tensor of "
        "`input`'s shape. Static (`scale` given, float32, one element): `out = sat(rne(input / "
        "scale))`, or with `azp` (int32, one element; then `symmetric=False`) `out = "
        "sat(rne(input / scale) + azp)`; return `(out, scale, azp)` with the very tensors passed "
        "in (`azp` None when symmetric). Dynamic (`scale` None), symmetric: per token t, "
        "`amax = max(|input[t]|)`, `scale[t] = amax / 127`, `out[t] = rne(input[t] * 127 / "
        "amax)` (all zeros, and scale 0, for an all-zero row); return `(out, scale, None)` with "
        "scale a new float32 `[tokens, 1]` tensor. Dynamic asymmetric (`scale` None, "
        "`symmetric=False`): per token `scale[t] = (max(input[t]) - min(input[t])) / 255`, "
        "`azp[t] = rne(-128 - min(input[t]) / scale[t])` (a new int32 `[tokens, 1]` tensor), "
        "`out[t] = sat(rne(input[t] / scale[t]) + azp[t])`; return `(out, scale, azp)`. "
        "Asymmetric rows are never constant. Compute in float32. Do not modify the inputs."
    )
    solution = SOLUTION
    negatives = (
        Negative("ignores_static_azp", "applies a given static zero point as if absent",
                 NEGATIVE_IGNORES_AZP),
        Negative("truncates", "rounds toward zero instead of to nearest (exact only where "
                 "every quotient is an integer)", NEGATIVE_TRUNCATES),
        Negative("azp_floor", "floors the dynamic zero point instead of rounding it",
                 NEGATIVE_AZP_FLOOR),
    )

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            _case("float32", (1, 17), "static", scale="calibrated", cpu=True),
            _case("bfloat16", (7, 300), "static", scale="tight", cpu=True),
            _case("float16", (9, 128), "static_azp", scale="calibrated", cpu=True),
            _case("float32", (33, 200), "dynamic", cpu=True),
            _case("bfloat16", (12, 160), "dynamic", zero_rows=3, cpu=True),
            # Dequantized int8 values quantized again with their own scale (2**-5): every
            # quotient is an integer.
            _case("float16", (4, 64), "static", scale="grid", cpu=True),
            _case("float16", (13, 257), "dynamic_azp", cpu=True),
            _case("bfloat16", (3, 5, 96), "dynamic_azp", cpu=True),
            _case("float32", (0, 64), "dynamic", cpu=True),
        ]
        for dt in FLOATS:
            for shape in SHAPES:
                cs += [_case(dt, shape, "static", scale="calibrated"),
                       _case(dt, shape, "static_azp", scale="calibrated"),
                       _case(dt, shape, "dynamic"),
                       _case(dt, shape, "dynamic_azp")]
            cs += [
                _case(dt, (4096, 4096), "static", scale="tight"),
                _case(dt, (1000, 4096), "static_azp", scale="tight"),
                _case(dt, (2047, 4096), "dynamic", zero_rows=7),
                _case(dt, (4, 333, 2048), "dynamic_azp"),
                _case(dt, (0, 4096), "dynamic_azp"),
            ]
        return unique(cs)

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in FLOATS:
            for mode in _MODES:
                rows = rng.randrange(1, 24 if small else 3000)
                hidden = rng.randrange(2, 300 if small else 9000)
                params: dict[str, Any] = {}
                if mode.startswith("static"):
                    params["scale"] = rng.choice(["calibrated", "tight"])
                elif mode == "dynamic" and rows > 1 and rng.random() < 0.3:
                    params["zero_rows"] = rng.randrange(1, rows)  # never every row
                out.append(_case(dt, (rows, hidden), mode, cpu=small, **params))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _case("bfloat16", (16384, 8192), "static", scale="calibrated"),
            _case("bfloat16", (16384, 8192), "dynamic"),
            _case("float16", (16384, 7168), "dynamic_azp"),
            _case("float32", (8192, 4096), "static_azp", scale="calibrated"),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        mode = c["mode"]
        shape = tuple(c.shape)
        if c.get("scale") == "grid":
            x = (torch.randint(-128, 128, shape, generator=gen) * 2.0 ** -5).to(c.torch_dtype)
        else:
            x = rows_input(shape, c.torch_dtype, gen)
        if mode.endswith("azp"):
            x = (x.double() + 0.7).to(x.dtype)  # a skewed range, as after an activation
        flat = x.view(-1, shape[-1]) if x.numel() else x.reshape(0, max(shape[-1], 1))
        zero = int(c.get("zero_rows", 0))
        if zero and flat.shape[0]:
            flat[torch.randperm(flat.shape[0], generator=gen)[:zero]] = 0
        if mode == "dynamic_azp":
            _away_from_ties(flat)
        kwargs: dict[str, Any] = {}
        if mode.startswith("static"):
            x64 = x.double()
            factor = 1.0 if c["scale"] == "calibrated" else 0.25
            if c["scale"] == "grid":
                kwargs["scale"] = torch.tensor([2.0 ** -5])
            elif mode == "static":
                amax = float(x64.abs().max()) if x.numel() else 1.0
                kwargs["scale"] = torch.tensor([max(amax, 1e-3) * factor / INT8_MAX])
            else:
                lo = float(x64.min()) if x.numel() else -1.0
                hi = float(x64.max()) if x.numel() else 1.0
                s = max(hi - lo, 1e-3) * factor / 255.0
                kwargs["scale"] = torch.tensor([s], dtype=torch.float32)
                zp = round(-128.0 - lo / float(kwargs["scale"]))
                kwargs["azp"] = torch.tensor([zp], dtype=torch.int32)
                kwargs["symmetric"] = False
        elif mode == "dynamic_azp":
            kwargs["symmetric"] = False
        outputs = (Out.ret(0), Out.ret(1), Out.ret(2)) if mode.endswith("azp") else (
            Out.ret(0), Out.ret(1))
        return Call(c.entry, (x,), kwargs, outputs=outputs)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        (x,) = call.args
        kw = call.kwargs
        hidden = x.shape[-1]
        x64 = x.double().reshape(-1, hidden) if x.numel() else x.double().reshape(0, hidden)
        static = "scale" in kw
        asym = not kw.get("symmetric", True)
        if static:
            s = kw["scale"].double().reshape(1, 1)
            zp = kw["azp"].double().reshape(1, 1) if asym else torch.zeros(1, 1,
                                                                           dtype=torch.float64)
        elif asym:
            mx = x64.amax(dim=1, keepdim=True) if x.numel() else x64.new_zeros(0, 1)
            mn = x64.amin(dim=1, keepdim=True) if x.numel() else x64.new_zeros(0, 1)
            s = (mx - mn) / 255.0
            zp = torch.round(-128.0 - mn / s)
        else:
            amax = x64.abs().amax(dim=1, keepdim=True) if x.numel() else x64.new_zeros(0, 1)
            s = amax / INT8_MAX
            zp = torch.zeros_like(s)
        scaled = torch.where(s == 0, torch.zeros_like(x64), x64 / torch.where(s == 0, 1.0, s))
        q = quantized((scaled + zp).reshape(x.shape), torch.int8,
                      magnitude=(scaled.abs() + zp.abs()).reshape(x.shape))
        outs: list[Expected] = [q]
        if static:
            outs.append(passed_through(kw["scale"], "scale"))
            if asym:
                outs.append(passed_through(kw["azp"], "azp"))
        else:
            outs.append(approx(s, torch.float32, SCALE_REL * s))
            if asym:
                outs.append(exact(zp, torch.int32))
        return tuple(outs)

    def baseline(self, call: Call) -> object:
        # vLLM's wrapper where vLLM is installed (device tensors); else the same arithmetic in
        # PyTorch (float32, round half to even, saturate).
        (x,) = call.args
        ops = _baseline.custom_ops()
        if ops is not None and x.device.type != "cpu":
            return ops.scaled_int8_quant(x, **call.kwargs)
        return torch_scaled_int8_quant(x, **call.kwargs)

    def baseline_library(self) -> str:
        return _baseline.library()

    def cost(self, c: Case) -> Cost:
        n = math.prod(c.shape)
        tokens = n // c.shape[-1] if c.shape[-1] else 0
        size = c.torch_dtype.itemsize
        return Cost(flops=3.0 * n, bytes=float(n * (size + 1) + 8 * tokens), dtype=c.dtype)


def _away_from_ties(rows: torch.Tensor) -> None:
    """Give constant rows a range, and nudge each row's minimum down until
    ``-128 - min / ((max - min) / 255)`` is at least 1e-3 from a half-integer, so the rounded
    zero point is the same in any float32 evaluation."""
    for i in range(rows.shape[0]):
        for _ in range(64):
            r = rows[i].double()
            mx, mn = float(r.max()), float(r.min())
            if mx == mn:  # a constant row has no range: widen it
                rows[i, 0] = torch.tensor(mn + 1.0).to(rows.dtype)
                continue
            c = -128.0 - mn / ((mx - mn) / 255.0)
            if abs(abs(c - int(c)) - 0.5) > 1e-3:
                break
            j = int(r.argmin())
            rows[i, j] = torch.tensor(mn - abs(mn) * 2 ** -6 - 1e-3).to(rows.dtype)


def torch_scaled_int8_quant(x: torch.Tensor, scale: torch.Tensor | None = None,
                            azp: torch.Tensor | None = None, symmetric: bool = True
                            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The wrapper's semantics in PyTorch (float32 arithmetic)."""
    hidden = x.shape[-1]
    xf = x.float().reshape(-1, hidden)
    if scale is not None:
        v = xf / scale
        q = torch_quantize(v, torch.int8) if azp is None else (
            v.round() + azp).clamp(-128, 127).to(torch.int8)
        return q.reshape(x.shape), scale, azp
    if xf.shape[0] == 0:
        s = xf.new_zeros(0, 1)
        return torch.empty_like(x, dtype=torch.int8), s, None if symmetric else s.to(torch.int32)
    if symmetric:
        amax = xf.abs().amax(dim=1, keepdim=True)
        s = amax / 127.0
        inv = torch.where(amax == 0, 0.0, 127.0 / amax)
        return torch_quantize(xf * inv, torch.int8).reshape(x.shape), s, None
    mx, mn = xf.amax(dim=1, keepdim=True), xf.amin(dim=1, keepdim=True)
    s = (mx - mn) / 255.0
    zp = (-128.0 - mn / s).round()
    q = ((xf * (1.0 / s)).round() + zp).clamp(-128, 127).to(torch.int8)
    return q.reshape(x.shape), s, zp.to(torch.int32)
