"""aten::im2col — unfold sliding local blocks of a batched (or unbatched) image into columns,
as ``torch.nn.functional.unfold`` (overloads default, out)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.aten._indexing import esize, numel, with_specials
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
import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _im2col_kernel(x_ptr, out_ptr, n, C, H, W, KW, KK, OW, L,
                   dh, dw, ph, pw, sh, sw,
                   xn, xc, xh, xw, on, ok, ol,
                   BLOCK: tl.constexpr):
    # One program per BLOCK result elements (batch, c * KH * KW + ki * KW + kj, oh * OW + ow).
    pid = tl.program_id(0)
    r = (pid * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    mask = r < n
    l = r % L
    rem = r // L
    k = rem % (C * KK)
    b = rem // (C * KK)
    c = k // KK
    kk = k % KK
    ki = kk // KW
    kj = kk % KW
    oh = l // OW
    ow = l % OW
    ih = oh * sh - ph + ki * dh
    iw = ow * sw - pw + kj * dw
    inside = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
    v = tl.load(x_ptr + b * xn + c * xc + ih * xh + iw * xw, mask=mask & inside, other=0)
    tl.store(out_ptr + b * on + k * ok + l * ol, v, mask=mask)


def _geometry(self, kernel_size, dilation, padding, stride):
    kh, kw = kernel_size
    dh, dw = dilation
    ph, pw = padding
    sh, sw = stride
    H, W = self.shape[-2], self.shape[-1]
    oh = (H + 2 * ph - (dh * (kh - 1) + 1)) // sh + 1
    ow = (W + 2 * pw - (dw * (kw - 1) + 1)) // sw + 1
    return kh, kw, dh, dw, ph, pw, sh, sw, oh, ow


def _im2col(self, kernel_size, dilation, padding, stride, out):
    kh, kw, dh, dw, ph, pw, sh, sw, oh, ow = _geometry(self, kernel_size, dilation, padding,
                                                       stride)
    x = self if self.dim() == 4 else self.unsqueeze(0)
    o = out if out.dim() == 3 else out.unsqueeze(0)
    N, C, H, W = x.shape
    L = oh * ow
    n = N * C * kh * kw * L
    if n == 0:
        return out
    grid = (triton.cdiv(n, BLOCK),)
    _im2col_kernel[grid](x, o, n, C, H, W, kw, kh * kw, ow, L, dh, dw, ph, pw, sh, sw,
                         *x.stride(), *o.stride(), BLOCK=BLOCK)
    return out


def im2col(self, kernel_size, dilation, padding, stride):
    kh, kw, dh, dw, ph, pw, sh, sw, oh, ow = _geometry(self, kernel_size, dilation, padding,
                                                       stride)
    C = self.shape[-3]
    shape = (C * kh * kw, oh * ow) if self.dim() == 3 else (self.shape[0], C * kh * kw, oh * ow)
    out = torch.empty(shape, dtype=self.dtype, device=self.device)
    return _im2col(self, kernel_size, dilation, padding, stride, out)


def im2col_out(self, kernel_size, dilation, padding, stride, *, out):
    return _im2col(self, kernel_size, dilation, padding, stride, out)
'''

# Ignores the dilation (reads a dense kernel window): right whenever dilation is (1, 1).
NEGATIVE_NO_DILATION = (SOLUTION.replace("ih = oh * sh - ph + ki * dh", "ih = oh * sh - ph + ki")
                        .replace("iw = ow * sw - pw + kj * dw", "iw = ow * sw - pw + kj"))

# Clips the window only at the high edge (forgets the zero padding before index 0): right
# whenever padding is 0.
NEGATIVE_LOW_EDGE = SOLUTION.replace("inside = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)",
                                     "inside = (ih < H) & (iw < W)")

_FLOATS = ("float16", "bfloat16", "float32")


def _geometry(shape: Sequence[int], k: Sequence[int], d: Sequence[int], p: Sequence[int],
              s: Sequence[int]) -> tuple[int, int]:
    H, W = shape[-2], shape[-1]
    oh = (H + 2 * p[0] - (d[0] * (k[0] - 1) + 1)) // s[0] + 1
    ow = (W + 2 * p[1] - (d[1] * (k[1] - 1) + 1)) // s[1] + 1
    return oh, ow


def _out_shape(c: Case) -> tuple[int, ...]:
    oh, ow = _geometry(c.shape, c["k"], c["d"], c["p"], c["s"])
    C = c.shape[-3]
    rows = C * c["k"][0] * c["k"][1]
    return (rows, oh * ow) if len(c.shape) == 3 else (c.shape[0], rows, oh * ow)


@register("aten::im2col", version=1, kind=Kind.COMPUTE)
class Im2col(OperatorSpec):
    entry_points = (
        EntryPoint("im2col",
                   "im2col(self: Tensor, kernel_size: list[int], dilation: list[int], "
                   "padding: list[int], stride: list[int]) -> Tensor",
                   "Unfolds (N, C, H, W) (or (C, H, W)) into (N, C*kh*kw, L) (or (C*kh*kw, L)) "
                   "columns of sliding blocks; each list has two ints (height, width)."),
        EntryPoint("im2col_out",
                   "im2col_out(self: Tensor, kernel_size: list[int], dilation: list[int], "
                   "padding: list[int], stride: list[int], *, out: Tensor) -> Tensor",
                   "Writes im2col(...) into out (already of the result shape and self's dtype) "
                   "and returns out."),
    )
    description = (
        "Sliding-block extraction, following PyTorch's `aten::im2col` (what "
        "`torch.nn.functional.unfold(self, kernel_size, dilation, padding, stride)` computes). "
        "For input (N, C, H, W) — or unbatched (C, H, W), giving a 2-d result — with "
        "kernel_size (kh, kw), dilation (dh, dw), padding (ph, pw) and stride (sh, sw): "
        "OH = (H + 2*ph - dh*(kh-1) - 1) // sh + 1, OW likewise, L = OH*OW, and "
        "`out[n, (c*kh + i)*kw + j, oh*OW + ow] = self[n, c, oh*sh - ph + i*dh, "
        "ow*sw - pw + j*dw]`, or 0 where that position falls in the zero padding outside the "
        "image. self may be non-contiguous (transposed or strided); dtypes float16, bfloat16, "
        "float32; values (nan, inf included) are copied exactly."
    )
    solution = SOLUTION
    negatives = (
        Negative("ignores_dilation", "reads a dense kernel window, ignoring dilation",
                 NEGATIVE_NO_DILATION),
        Negative("no_low_edge_padding", "zero-pads only past the high edge of the image; "
                 "positions before index 0 read out of the image", NEGATIVE_LOW_EDGE),
    )
    # A gather with zero padding: exact.
    tolerances = {dt: Tolerance(0.0, 0.0) for dt in _FLOATS}

    def cases(self) -> Sequence[Case]:
        f, o = "im2col", "im2col_out"
        g = {"k": (3, 3), "d": (1, 1), "p": (0, 0), "s": (1, 1)}
        cs: list[Case] = [
            case(f, "float32", (2, 3, 7, 9), **g, cpu=True),
            case(f, "float16", (2, 3, 11, 13), k=(3, 2), d=(2, 1), p=(1, 2), s=(2, 3), cpu=True),
            case(f, "bfloat16", (3, 8, 10), k=(2, 2), d=(1, 1), p=(1, 1), s=(1, 1), cpu=True),
            case(f, "float32", (1, 4, 9, 12), k=(3, 3), d=(1, 2), p=(2, 0), s=(1, 1),
                 layout="transposed", cpu=True),
            case(o, "float32", (2, 5, 8, 8), k=(1, 4), d=(1, 1), p=(0, 3), s=(3, 1),
                 layout="strided", specials=True, cpu=True),
            case(o, "float16", (1, 2, 6, 6), k=(6, 6), d=(1, 1), p=(0, 0), s=(1, 1), cpu=True),
        ]
        for dt in _FLOATS:
            cs += [
                case(f, dt, (8, 64, 56, 56), k=(3, 3), d=(1, 1), p=(1, 1), s=(1, 1)),
                case(f, dt, (4, 17, 63, 49), k=(5, 3), d=(2, 3), p=(2, 1), s=(2, 2),
                     layout="transposed"),
                case(o, dt, (32, 31, 29), k=(4, 4), d=(1, 1), p=(3, 3), s=(4, 4),
                     specials=True),
                case(f, dt, (2, 7, 145, 33), k=(7, 1), d=(1, 1), p=(3, 0), s=(1, 1),
                     layout="strided"),
                case(o, dt, (16, 3, 224, 224), k=(16, 16), d=(1, 1), p=(0, 0), s=(16, 16)),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in (rng.choice(_FLOATS), rng.choice(_FLOATS)):
            k = (rng.randrange(1, 5), rng.randrange(1, 5))
            d = (rng.randrange(1, 3), rng.randrange(1, 3))
            p = (rng.randrange(0, 3), rng.randrange(0, 3))
            s = (rng.randrange(1, 4), rng.randrange(1, 4))
            lo = [d[i] * (k[i] - 1) + 1 for i in range(2)]
            hw = [max(lo[i] - 2 * p[i], 1) + rng.randrange(0, 12 if small else 60)
                  for i in range(2)]
            shape = ([rng.randrange(1, 3 if small else 6)] if rng.random() < 0.7 else []) + \
                [rng.randrange(1, 4 if small else 32)] + hw
            out.append(case(rng.choice(["im2col", "im2col_out"]), dt, shape, k=k, d=d, p=p, s=s,
                            layout=rng.choice(["contiguous", "transposed", "strided"]),
                            cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        # 100-150 MB of traffic each (each input element lands in ~kh*kw/(sh*sw) columns)
        return [
            case("im2col", "float32", (16, 64, 56, 56), k=(3, 3), d=(1, 1), p=(1, 1), s=(1, 1)),
            case("im2col", "bfloat16", (256, 3, 224, 224), k=(16, 16), d=(1, 1), p=(0, 0),
                 s=(16, 16)),
            case("im2col", "float16", (32, 128, 64, 64), k=(3, 3), d=(2, 2), p=(2, 2),
                 s=(2, 2)),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        x = randn(c.shape, c.dtype, gen)
        if c.get("specials"):
            x = with_specials(x, gen)
        x = with_layout(x, c.get("layout", "contiguous"))
        args = (x, list(c["k"]), list(c["d"]), list(c["p"]), list(c["s"]))
        if c.entry == "im2col_out":
            out = torch.empty(_out_shape(c), dtype=x.dtype)
            return Call(c.entry, args, {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, args)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x = call.args[0]
        return (Expected(torch.ops.aten.im2col(x.double(), *call.args[1:]), x.dtype),)

    def baseline(self, call: Call) -> object:
        if call.entry == "im2col_out":
            return torch.ops.aten.im2col.out(*call.args, out=call.kwargs["out"])
        return torch.ops.aten.im2col(*call.args)

    def cost(self, c: Case) -> Cost:
        size = esize(c.torch_dtype)
        return Cost(flops=0.0, bytes=float((numel(c.shape) + numel(_out_shape(c))) * size),
                    dtype=c.dtype)
