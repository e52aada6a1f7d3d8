"""aten::upsample_nearest2d_backward — the gradient of 2-d nearest-neighbour resizing: each
input pixel sums the gradients of the output pixels that copied it (overloads default,
grad_input)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import torch

from operators.aten._indexing import esize, int_values, numel, with_specials
from operators.inputs import randn, with_layout
from operators.registry import register
from operators.spec import (
    Call,
    Case,
    Cost,
    EntryPoint,
    Expected,
    Kind,
    Negative,
    OperatorSpec,
    Out,
    Tier,
    Tolerance,
    case,
)

SOLUTION = r'''
import math

import torch
import triton
import triton.language as tl

BLOCK = 256


@triton.jit
def _src(o, scale, in_size):
    # PyTorch's nearest map: min(floor(float32(o) * scale), in_size - 1), scale a float32
    return tl.minimum(tl.floor(o.to(tl.float32) * scale).to(tl.int64), in_size - 1)


@triton.jit
def _upsample_nearest2d_backward_kernel(g_ptr, out_ptr, n, C, IH, IW, OH, OW,
                                        sh, sw, KH, KW,
                                        gn, gc, gh, gw, on, oc, oh_, ow_,
                                        BLOCK: tl.constexpr):
    # Gather form: one lane per input pixel sums every output pixel whose nearest source it
    # is. The map is monotone, so those form a run; its first index is within one of
    # e = ceil(i / scale) (correctly rounded), found exactly by testing e - 1 and e; the run has
    # at most KH (KW) entries, each checked with the exact map.
    pid = tl.program_id(0)
    e = (pid * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    mask = e < n
    iw = e % IW
    t = e // IW
    ih = t % IH
    t = t // IH
    c = t % C
    b = t // C
    h0 = tl.maximum(tl.ceil(tl.math.div_rn(ih.to(tl.float32), sh)).to(tl.int64) - 1, 0)
    h0 += (_src(h0, sh, IH) < ih).to(tl.int64)
    h0 += (_src(h0, sh, IH) < ih).to(tl.int64)
    w0 = tl.maximum(tl.ceil(tl.math.div_rn(iw.to(tl.float32), sw)).to(tl.int64) - 1, 0)
    w0 += (_src(w0, sw, IW) < iw).to(tl.int64)
    w0 += (_src(w0, sw, IW) < iw).to(tl.int64)
    g_base = b * gn + c * gc
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for th in range(0, KH):
        oh = h0 + th
        hit_h = mask & (oh < OH) & (_src(oh, sh, IH) == ih)
        for tw in range(0, KW):
            ow = w0 + tw
            hit = hit_h & (ow < OW) & (_src(ow, sw, IW) == iw)
            acc += tl.load(g_ptr + g_base + oh * gh + ow * gw, mask=hit, other=0).to(tl.float32)
    tl.store(out_ptr + b * on + c * oc + ih * oh_ + iw * ow_, acc.to(out_ptr.dtype.element_ty),
             mask=mask)


def _f32(x):
    # x rounded to float32 (to nearest even), for the host's run-length bound
    m, e = math.frexp(x)
    return math.ldexp(round(m * 2.0 ** 24) / 2.0 ** 24, e)


def _axis(in_size, out_size, scales):
    # PyTorch's float32 scale: in / out (identity / halving) when out is in or 2 * in, else
    # 1 / scales when given (> 0), else in / out. A float32 kernel argument is the double
    # rounded to nearest float32; for in / out that equals float32 division (sizes < 2**28
    # cannot land a double on a float32 rounding midpoint).
    from_sizes = out_size in (in_size, 2 * in_size) or not scales or scales <= 0
    s = _f32(in_size / out_size if from_sizes else 1.0 / scales)
    # the longest run of outputs sharing a source: at most ceil(1 / s) exact ones plus one that
    # the float32 product rounds up into it; the last input index takes every output from its
    # run's start on
    run = max(math.ceil(1.0 / s) + 1, out_size - math.ceil((in_size - 1) / s) + 2)
    return (in_size / out_size if from_sizes else 1.0 / scales), max(1, min(run, out_size))


def _backward(grad_output, output_size, input_size, scales_h, scales_w, grad_input):
    N, C, IH, IW = [int(s) for s in input_size]
    OH, OW = [int(s) for s in output_size]
    n = N * C * IH * IW
    if n == 0:
        return grad_input
    sh, kh = _axis(IH, OH, scales_h)
    sw, kw = _axis(IW, OW, scales_w)
    grid = (triton.cdiv(n, BLOCK),)
    _upsample_nearest2d_backward_kernel[grid](grad_output, grad_input, n, C, IH, IW, OH, OW,
                                              sh, sw, kh, kw, *grad_output.stride(),
                                              *grad_input.stride(), BLOCK=BLOCK)
    return grad_input


def upsample_nearest2d_backward(grad_output, output_size, input_size, scales_h=None,
                                scales_w=None):
    grad_input = torch.empty([int(s) for s in input_size], dtype=grad_output.dtype,
                             device=grad_output.device)
    return _backward(grad_output, output_size, input_size, scales_h, scales_w, grad_input)


def upsample_nearest2d_backward_grad_input(grad_output, output_size, input_size, scales_h=None,
                                           scales_w=None, *, grad_input):
    return _backward(grad_output, output_size, input_size, scales_h, scales_w, grad_input)
'''

# Always maps with in / out, ignoring scales_h / scales_w: right when they are absent or equal
# out / in.
NEGATIVE_IGNORES_SCALES = SOLUTION.replace(
    "from_sizes = out_size in (in_size, 2 * in_size) or not scales or scales <= 0",
    "from_sizes = True")

# Reads grad_output as if it were contiguous.
NEGATIVE_CONTIGUOUS_GRAD = SOLUTION.replace(
    "sh, sw, kh, kw, *grad_output.stride(),", "sh, sw, kh, kw, C * OH * OW, OH * OW, OW, 1,")

_FLOATS = ("float16", "bfloat16", "float32")
# An element whose terms are integers with magnitudes summing to at most 256 is exact in every
# float dtype (bfloat16 holds the integers up to 256), whatever the order of the additions.
_EXACT_LIMIT = 256.0


@register("aten::upsample_nearest2d_backward", version=1, kind=Kind.COMPUTE)
class UpsampleNearest2dBackward(OperatorSpec):
    entry_points = (
        EntryPoint("upsample_nearest2d_backward",
                   "upsample_nearest2d_backward(grad_output: Tensor, output_size: list[int], "
                   "input_size: list[int], scales_h: float | None = None, "
                   "scales_w: float | None = None) -> Tensor",
                   "The gradient with respect to the input (shape input_size = [N, C, IH, IW]) "
                   "of nearest upsampling to output_size = [OH, OW]."),
        EntryPoint("upsample_nearest2d_backward_grad_input",
                   "upsample_nearest2d_backward_grad_input(grad_output: Tensor, "
                   "output_size: list[int], input_size: list[int], scales_h: float | None = "
                   "None, scales_w: float | None = None, *, grad_input: Tensor) -> Tensor",
                   "Writes the gradient into grad_input (shape input_size, grad_output's dtype) "
                   "and returns grad_input."),
    )
    description = (
        "Backward of 2-d nearest-neighbour resizing, following PyTorch's "
        "`aten::upsample_nearest2d_backward` (the 'nearest' mode of interpolate). The forward "
        "maps input (N, C, IH, IW) to output (N, C, OH, OW) with out[n, c, oh, ow] = "
        "in[n, c, src_h(oh), src_w(ow)], where per axis src(o) = min(floor(float32(o) * s), "
        "in - 1) computed in float32, with s = float32(in) / float32(out) (correctly rounded "
        "division) when scales is None, s = float32(1.0 / scales) when a scale is given — "
        "except that out == in and out == 2 * in always map o -> o and o -> o // 2. The backward "
        "returns grad_input of shape input_size with each input pixel the sum of grad_output "
        "over the output pixels that map to it (zero when none does, as when downsampling). "
        "Output sizes may be any ratio of the input sizes (e.g. 5 -> 12 with scales 2.5, "
        "7 -> 3). grad_output may be non-contiguous (transposed or strided); dtypes float16, "
        "bfloat16, float32: accumulate in float32 and round once."
    )
    solution = SOLUTION
    negatives = (
        Negative("ignores_scales", "maps with in / out even when scales_h / scales_w are given",
                 NEGATIVE_IGNORES_SCALES),
        Negative("assumes_contiguous_grad", "indexes grad_output as if it were contiguous",
                 NEGATIVE_CONTIGUOUS_GRAD),
    )
    tolerances = {dt: Tolerance.ulps(dt, 2) for dt in _FLOATS}
    # Relative to the reference's scale. float32: (terms) x (sum of |terms|), the bound of a
    # recursive sum in any order ((K - 1) u; PyTorch's CPU kernel measured 2.3 u at K = 25).
    # float16/bfloat16: sum of |terms|, as accumulating in float32 leaves one final rounding
    # (PyTorch's CPU kernel does so: <= 1 u measured). Exact-friendly elements have scale 0.

    def cases(self) -> Sequence[Case]:
        f, o = "upsample_nearest2d_backward", "upsample_nearest2d_backward_grad_input"
        cs: list[Case] = [
            case(f, "float32", (2, 3, 5, 7), out=(10, 14), cpu=True),
            case(f, "float16", (1, 2, 5, 7), out=(12, 11), scales=(2.5, 1.7), cpu=True),
            case(f, "bfloat16", (2, 2, 7, 9), out=(3, 4), cpu=True),
            case(f, "float32", (1, 3, 4, 6), out=(16, 18), exact=True, cpu=True),
            case(o, "float16", (2, 2, 6, 5), out=(13, 7), layout="transposed", cpu=True),
            case(o, "float32", (1, 1, 3, 3), out=(3, 3), layout="strided", specials=True,
                 cpu=True),
            case(f, "bfloat16", (2, 3, 4, 4), out=(8, 8), scales=(2.0, 2.0), cpu=True),
        ]
        for dt in _FLOATS:
            cs += [
                case(f, dt, (4, 16, 32, 32), out=(64, 64)),
                case(o, dt, (2, 7, 17, 31), out=(51, 93), scales=(3.0, 3.0)),
                case(f, dt, (3, 5, 49, 63), out=(145, 101), layout="transposed"),
                case(f, dt, (2, 3, 33, 65), out=(10, 20), layout="strided", specials=True),
                case(o, dt, (1, 8, 21, 13), out=(48, 22), scales=(2.3, 1.75), exact=True),
                case(f, dt, (2, 4, 9, 11), out=(90, 55), scales=(10.0, 5.0)),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        top = 9 if small else 80
        out = []
        for dt in _FLOATS:
            ih, iw = rng.randrange(1, top), rng.randrange(1, top)
            params: dict[str, object] = {}
            if rng.random() < 0.5:
                f = (rng.choice([0.5, 1.5, 2.5, 3.0, 1.7]), rng.choice([0.75, 2.0, 2.2, 4.0]))
                oh, ow = max(1, math.floor(ih * f[0])), max(1, math.floor(iw * f[1]))
                if oh not in (ih, 2 * ih) and ow not in (iw, 2 * iw):
                    params["scales"] = f
            else:
                oh, ow = rng.randrange(1, 3 * top), rng.randrange(1, 3 * top)
            out.append(case(rng.choice(["upsample_nearest2d_backward",
                                        "upsample_nearest2d_backward_grad_input"]), dt,
                            (rng.randrange(1, 3), rng.randrange(1, 4 if small else 16), ih, iw),
                            out=(oh, ow), layout=rng.choice(["contiguous", "transposed",
                                                             "strided"]), cpu=small, **params))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        # grad_output of 67-134 MB read once, grad_input a quarter to a ninth of it written
        return [
            case("upsample_nearest2d_backward", "float32", (8, 64, 128, 128), out=(256, 256)),
            case("upsample_nearest2d_backward", "bfloat16", (4, 32, 256, 256), out=(512, 512)),
            case("upsample_nearest2d_backward", "float16", (16, 64, 64, 64), out=(192, 192),
                 scales=(3.0, 3.0)),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        n, ch = c.shape[0], c.shape[1]
        gshape = (n, ch) + tuple(c["out"])
        g = int_values(gshape, c.dtype, gen) if c.get("exact") else randn(gshape, c.dtype, gen)
        if c.get("specials"):
            g = with_specials(g, gen)
        g = with_layout(g, c.get("layout", "contiguous"))
        scales = c.get("scales", (None, None))
        args = (g, list(c["out"]), list(c.shape), scales[0], scales[1])
        if c.entry == "upsample_nearest2d_backward_grad_input":
            gi = torch.empty(c.shape, dtype=g.dtype)
            return Call(c.entry, args, {"grad_input": gi}, outputs=(Out.arg("grad_input"),),
                        mutable=frozenset({"grad_input"}),
                        out_buffers=frozenset({"grad_input"}))
        return Call(c.entry, args)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        g, rest = call.args[0], call.args[1:]
        g64 = g.double()
        op = torch.ops.aten.upsample_nearest2d_backward
        # PyTorch's float64 kernel maps with the same float32 arithmetic as every dtype's
        value = op(g64, *rest)
        mags = op(g64.abs(), *rest)
        scale = mags * op(torch.ones_like(g64), *rest) if g.dtype == torch.float32 else mags
        if bool(torch.equal(g64.nan_to_num(), g64.nan_to_num().round())):
            scale = torch.where(mags <= _EXACT_LIMIT, torch.zeros_like(scale), scale)
        return (Expected(value, g.dtype, scale),)

    def baseline(self, call: Call) -> object:
        if call.entry == "upsample_nearest2d_backward_grad_input":
            return torch.ops.aten.upsample_nearest2d_backward.grad_input(
                *call.args, grad_input=call.kwargs["grad_input"])
        return torch.ops.aten.upsample_nearest2d_backward(*call.args)

    def cost(self, c: Case) -> Cost:
        n_in = numel(c.shape)
        n_out = c.shape[0] * c.shape[1] * c["out"][0] * c["out"][1]
        size = esize(c.torch_dtype)
        return Cost(flops=float(max(n_out - n_in, 0)), bytes=float((n_in + n_out) * size),
                    dtype=c.dtype)
