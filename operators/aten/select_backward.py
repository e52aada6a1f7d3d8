"""aten::select_backward — the gradient of ``x.select(dim, index)``: zeros of ``input_sizes``
with ``grad_output`` placed at ``index`` along ``dim`` (overloads default, out)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.aten._indexing import esize, numel, with_specials
from operators.inputs import bounded, randn, with_layout
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

MAX_DIMS = 6
BLOCK = 1024


@triton.jit
def _select_backward_kernel(g_ptr, out_ptr, n, index,
                            s1, s2, s3, s4, s5,
                            g0, g1, g2, g3, g4, g5,
                            o0, o1, o2, o3, o4, o5,
                            DIM: tl.constexpr, BLOCK: tl.constexpr):
    # One program per BLOCK elements of the result; g*: grad_output's strides along the result
    # dims (0 along dim); DIM: the selected dim's position among the padded result dims.
    pid = tl.program_id(0)
    r = (pid * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    mask = r < n
    rem = r
    i5 = rem % s5
    rem = rem // s5
    i4 = rem % s4
    rem = rem // s4
    i3 = rem % s3
    rem = rem // s3
    i2 = rem % s2
    rem = rem // s2
    i1 = rem % s1
    i0 = rem // s1
    if DIM == 0:
        at = i0
    elif DIM == 1:
        at = i1
    elif DIM == 2:
        at = i2
    elif DIM == 3:
        at = i3
    elif DIM == 4:
        at = i4
    else:
        at = i5
    hit = at == index
    g_off = i0 * g0 + i1 * g1 + i2 * g2 + i3 * g3 + i4 * g4 + i5 * g5
    g = tl.load(g_ptr + g_off, mask=mask & hit, other=0)
    o_off = i0 * o0 + i1 * o1 + i2 * o2 + i3 * o3 + i4 * o4 + i5 * o5
    tl.store(out_ptr + o_off, tl.where(hit, g, 0).to(out_ptr.dtype.element_ty), mask=mask)


def _select_backward(grad_output, input_sizes, dim, index, out):
    sizes = [int(s) for s in input_sizes]
    nd = len(sizes)
    if nd > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} dims supported")
    dim = dim % nd
    if index < 0:
        index += sizes[dim]  # negative indices count from the end
    n = out.numel()
    if n == 0:
        return out
    gs = list(grad_output.stride())
    g_strides = gs[:dim] + [0] + gs[dim:]
    pad = MAX_DIMS - nd
    grid = (triton.cdiv(n, BLOCK),)
    _select_backward_kernel[grid](grad_output, out, n, index,
                                  *([1] * pad + sizes)[1:], *([0] * pad + g_strides),
                                  *([0] * pad + list(out.stride())),
                                  DIM=pad + dim, BLOCK=BLOCK)
    return out


def select_backward(grad_output, input_sizes, dim, index):
    out = torch.empty([int(s) for s in input_sizes], dtype=grad_output.dtype,
                      device=grad_output.device)
    return _select_backward(grad_output, input_sizes, dim, index, out)


def select_backward_out(grad_output, input_sizes, dim, index, *, out):
    return _select_backward(grad_output, input_sizes, dim, index, out)
'''

# Uses a negative index as is instead of counting from the end: right for index >= 0.
NEGATIVE_NO_WRAP = SOLUTION.replace("        index += sizes[dim]  # negative indices count from "
                                    "the end", "        pass")

# Reads grad_output as if it were contiguous: right for contiguous gradients only.
NEGATIVE_CONTIGUOUS_GRAD = SOLUTION.replace("gs = list(grad_output.stride())",
                                            "gs = [1] * grad_output.dim()\n"
                                            "    for d in range(grad_output.dim() - 2, -1, -1):\n"
                                            "        gs[d] = gs[d + 1] * grad_output.shape[d + 1]")

_FLOATS = ("float16", "bfloat16", "float32")


@register("aten::select_backward", version=2, kind=Kind.COMPUTE)
class SelectBackward(OperatorSpec):
    entry_points = (
        EntryPoint("select_backward",
                   "select_backward(grad_output: Tensor, input_sizes: list[int], dim: int, "
                   "index: int) -> Tensor",
                   "A tensor of shape input_sizes, zero except at position index along dim, "
                   "which holds grad_output."),
        EntryPoint("select_backward_out",
                   "select_backward_out(grad_output: Tensor, input_sizes: list[int], dim: int, "
                   "index: int, *, out: Tensor) -> Tensor",
                   "Writes select_backward(...) into out (of shape input_sizes, grad_output's "
                   "dtype) and returns out."),
    )
    description = (
        "The backward of `x.select(dim, index)`, following PyTorch's `aten::select_backward`: "
        "returns a new tensor of shape `input_sizes` and grad_output's dtype that is zero "
        "everywhere except the slice at `index` along `dim`, which equals `grad_output` (whose "
        "shape is input_sizes with dim removed). `dim` and `index` may be negative (counted from "
        "the end). grad_output may be non-contiguous (transposed or strided), 0-d (for 1-d "
        "inputs) or empty; input_sizes has up to 6 dims; dtypes float16, bfloat16, float32. "
        "Every element of the result must be written (nan/inf in grad_output are copied)."
    )
    solution = SOLUTION
    negatives = (
        Negative("no_negative_index_wrap", "uses a negative index as an offset instead of "
                 "counting from the end of dim", NEGATIVE_NO_WRAP),
        Negative("assumes_contiguous_grad", "indexes grad_output as if it were contiguous",
                 NEGATIVE_CONTIGUOUS_GRAD),
    )
    # Copies and zeros: exact.
    tolerances = {dt: Tolerance(0.0, 0.0) for dt in _FLOATS}

    def cases(self) -> Sequence[Case]:
        b, o = "select_backward", "select_backward_out"
        cs: list[Case] = [
            case(b, "float32", (7, 17, 31), dim=1, index=3, cpu=True),
            case(b, "float16", (63, 145), dim=0, index=-1, cpu=True),
            case(b, "bfloat16", (5, 7, 11, 13), dim=-2, index=-4, layout="transposed",
                 cpu=True),
            case(b, "float32", (49,), dim=0, index=48, cpu=True),
            case(o, "float32", (20, 40, 6), dim=2, index=-6, layout="strided", specials=True,
                 cpu=True),
            case(o, "bfloat16", (2, 3, 4, 5, 6, 7), dim=3, index=2, cpu=True),
            case(b, "float32", (4, 0, 5), dim=0, index=1, cpu=True),
        ]
        for dt in _FLOATS:
            cs += [
                case(b, dt, (1024, 1024), dim=0, index=511),
                case(b, dt, (16, 7, 57, 32, 29), dim=2, index=-20, layout="transposed"),
                case(o, dt, (20, 320, 15), dim=-1, index=14, specials=True),
                case(b, dt, (511, 257, 3), dim=1, index=-257, layout="strided"),
                case(o, dt, (4097, 63), dim=1, index=31),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        top = 16 if small else 200
        out = []
        for dt in _FLOATS:
            rank = rng.choice([1, 2, 3, 4])
            shape = bounded([rng.randrange(1, top) for _ in range(rank)])
            dim = rng.randrange(-rank, rank)
            size = shape[dim]
            out.append(case(rng.choice(["select_backward", "select_backward_out"]), dt, shape,
                            dim=dim, index=rng.randrange(-size, size),
                            layout=rng.choice(["contiguous", "transposed", "strided"]),
                            cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        # the result (64-128 MB) is written once; grad_output is 1/size(dim) of it
        return [
            case("select_backward", "float32", (8, 4096, 1024), dim=0, index=3),
            case("select_backward", "bfloat16", (8192, 4, 2048), dim=1, index=-1),
            case("select_backward", "float16", (4096, 8192), dim=1, index=100),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        dim = c["dim"] % len(c.shape)
        gshape = c.shape[:dim] + c.shape[dim + 1:]
        g = randn(gshape, c.dtype, gen)
        if c.get("specials"):
            g = with_specials(g, gen)
        g = with_layout(g, c.get("layout", "contiguous"))
        args = (g, list(c.shape), c["dim"], c["index"])
        if c.entry == "select_backward_out":
            out = torch.empty(c.shape, dtype=g.dtype)
            return Call(c.entry, args, {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, args)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        g, sizes, dim, index = call.args
        out = torch.zeros(sizes, dtype=torch.float64)
        out.select(dim, index).copy_(g.double())
        return (Expected(out, g.dtype),)

    def baseline(self, call: Call) -> object:
        if call.entry == "select_backward_out":
            return torch.ops.aten.select_backward.out(*call.args, out=call.kwargs["out"])
        return torch.ops.aten.select_backward(*call.args)

    def cost(self, c: Case) -> Cost:
        n = numel(c.shape)
        size = esize(c.torch_dtype)
        return Cost(flops=0.0, bytes=float(n * size + n // c.shape[c["dim"]] * size),
                    dtype=c.dtype)
