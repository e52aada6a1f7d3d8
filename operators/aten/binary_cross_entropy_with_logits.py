"""aten::binary_cross_entropy_with_logits — ``(1 - t) x - (1 + (pos_weight - 1) t) log_sigmoid(x)``,
times weight, reduced by none / mean / sum (overloads default, out)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.inputs import randint, randn, sprinkle_specials, uniform, with_layout
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
    dtype_from_name,
)

SOLUTION = r'''
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

MAX_DIMS = 5
BLOCK = 1024
FINISH_BLOCK = 1024


@triton.jit
def _bce_logits_kernel(x_ptr, t_ptr, w_ptr, pw_ptr, out_ptr, part_ptr, n,
                       s1, s2, s3, s4,
                       x0, x1, x2, x3, x4,
                       t0, t1, t2, t3, t4,
                       w0, w1, w2, w3, w4,
                       p0, p1, p2, p3, p4,
                       o0, o1, o2, o3, o4,
                       HAS_W: tl.constexpr, HAS_PW: tl.constexpr,
                       REDUCE: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    idx = (pid * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    mask = idx < n
    rem = idx
    i4 = rem % s4
    rem = rem // s4
    i3 = rem % s3
    rem = rem // s3
    i2 = rem % s2
    rem = rem // s2
    i1 = rem % s1
    i0 = rem // s1
    x = tl.load(x_ptr + i0 * x0 + i1 * x1 + i2 * x2 + i3 * x3 + i4 * x4, mask=mask, other=0.0)
    t = tl.load(t_ptr + i0 * t0 + i1 * t1 + i2 * t2 + i3 * t3 + i4 * t4, mask=mask, other=0.0)
    x = x.to(tl.float32)
    t = t.to(tl.float32)
    # log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|)): never overflows, exact-ish for large |x|
    log_sig = tl.minimum(x, 0.0) - libdevice.log1p(tl.exp(-tl.abs(x)))
    if HAS_PW:
        pw = tl.load(pw_ptr + i0 * p0 + i1 * p1 + i2 * p2 + i3 * p3 + i4 * p4, mask=mask,
                     other=0.0).to(tl.float32)
        log_sig = log_sig * ((pw - 1.0) * t + 1.0)
    # PyTorch's own expression, so infinite logits give what it gives (-inf: NaN)
    loss = (1.0 - t) * x - log_sig
    if HAS_W:
        w = tl.load(w_ptr + i0 * w0 + i1 * w1 + i2 * w2 + i3 * w3 + i4 * w4, mask=mask,
                    other=0.0).to(tl.float32)
        loss = loss * w
    if REDUCE:
        # one float32 partial per program, summed by _finish_kernel (deterministic)
        tl.store(part_ptr + pid, tl.sum(tl.where(mask, loss, 0.0), axis=0))
    else:
        o_off = i0 * o0 + i1 * o1 + i2 * o2 + i3 * o3 + i4 * o4
        tl.store(out_ptr + o_off, loss.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _finish_kernel(part_ptr, out_ptr, n_parts, divisor, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_parts, BLOCK):
        acc += tl.load(part_ptr + start + offs, mask=start + offs < n_parts, other=0.0)
    total = tl.sum(acc, axis=0)
    tl.store(out_ptr, (total / divisor).to(out_ptr.dtype.element_ty))


def _pad(values, fill):
    values = list(values)
    return [fill] * (MAX_DIMS - len(values)) + values


def _bce(self, target, weight, pos_weight, reduction, out):
    tensors = [self, target]
    if weight is not None:
        tensors.append(weight)
    if pos_weight is not None:
        tensors.append(pos_weight)
    views = torch.broadcast_tensors(*tensors)
    x, t = views[0], views[1]
    w = views[2] if weight is not None else x
    pw = views[-1] if pos_weight is not None else x
    n = x.numel()
    sizes = _pad(x.shape, 1)
    strides = (_pad(x.stride(), 0) + _pad(t.stride(), 0) + _pad(w.stride(), 0)
               + _pad(pw.stride(), 0))
    grid = (triton.cdiv(n, BLOCK),)
    flags = dict(HAS_W=weight is not None, HAS_PW=pos_weight is not None, BLOCK=BLOCK)
    if reduction == 0:
        if out is None:
            out = torch.empty(x.shape, dtype=self.dtype, device=self.device)
        if n > 0:
            _bce_logits_kernel[grid](x, t, w, pw, out, out, n, *sizes[1:], *strides,
                                     *_pad(out.stride(), 0), REDUCE=False, **flags)
        return out
    if out is None:
        out = torch.empty((), dtype=self.dtype, device=self.device)
    parts = torch.empty((max(grid[0], 1),), dtype=torch.float32, device=self.device)
    if n > 0:
        _bce_logits_kernel[grid](x, t, w, pw, out, parts, n, *sizes[1:], *strides,
                                 0, 0, 0, 0, 0, REDUCE=True, **flags)
    divisor = float(n) if reduction == 1 else 1.0  # mean of nothing is 0 / 0 = NaN
    _finish_kernel[(1,)](parts, out, grid[0], divisor, BLOCK=FINISH_BLOCK)
    return out


def binary_cross_entropy_with_logits(self, target, weight=None, pos_weight=None, reduction=1):
    return _bce(self, target, weight, pos_weight, reduction, None)


def binary_cross_entropy_with_logits_out(self, target, weight=None, pos_weight=None,
                                         reduction=1, *, out):
    return _bce(self, target, weight, pos_weight, reduction, out)
'''

# The textbook -[pw t log(sigmoid(x)) + (1 - t) log(1 - sigmoid(x))] in float32: fine for
# moderate logits, but sigmoid saturates to 0 or 1 for large ones (log(0) = -inf) and
# 1 - sigmoid(x) loses its relative accuracy well before that.
NEGATIVE_NAIVE = SOLUTION.replace(
    "    log_sig = tl.minimum(x, 0.0) - libdevice.log1p(tl.exp(-tl.abs(x)))\n", "").replace(
    """    if HAS_PW:
        pw = tl.load(pw_ptr + i0 * p0 + i1 * p1 + i2 * p2 + i3 * p3 + i4 * p4, mask=mask,
                     other=0.0).to(tl.float32)
        log_sig = log_sig * ((pw - 1.0) * t + 1.0)
    # PyTorch's own expression, so infinite logits give what it gives (-inf: NaN)
    loss = (1.0 - t) * x - log_sig
""", """    sig = 1.0 / (1.0 + tl.exp(-x))
    pw = 1.0
    if HAS_PW:
        pw = tl.load(pw_ptr + i0 * p0 + i1 * p1 + i2 * p2 + i3 * p3 + i4 * p4, mask=mask,
                     other=0.0).to(tl.float32)
    loss = -(pw * t * tl.log(sig) + (1.0 - t) * tl.log(1.0 - sig))
""")

# Forgets pos_weight: right whenever it is not given.
NEGATIVE_NO_POS_WEIGHT = SOLUTION.replace(
    "        log_sig = log_sig * ((pw - 1.0) * t + 1.0)\n", "")

_FLOATS = ("float16", "bfloat16", "float32")
_RED = {"none": 0, "mean": 1, "sum": 2}


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


_BIG = 1 << 22  # from this many elements (benchmark sizes) inputs are drawn in float32


def _randn(shape: Sequence[int], dtype: str, gen: torch.Generator, *, std: float = 1.0,
           layout: str = "contiguous") -> torch.Tensor:
    """``operators.inputs.randn``, except that benchmark-sized tensors are drawn in float32: the
    float64 draw is 4x slower and would dominate ``validate``'s time."""
    if _numel(shape) < _BIG:
        return randn(shape, dtype, gen, std=std, layout=layout)
    x = torch.randn(tuple(shape), generator=gen, dtype=torch.float32) * std
    return with_layout(x.to(dtype_from_name(dtype)), layout)


def _uniform(shape: Sequence[int], dtype: str, gen: torch.Generator, *, low: float,
             high: float, layout: str = "contiguous") -> torch.Tensor:
    """``operators.inputs.uniform``, drawn in float32 for benchmark-sized tensors (as _randn)."""
    if _numel(shape) < _BIG:
        return uniform(shape, dtype, gen, low=low, high=high, layout=layout)
    x = torch.rand(tuple(shape), generator=gen, dtype=torch.float32) * (high - low) + low
    return with_layout(x.to(dtype_from_name(dtype)), layout)


@register("aten::binary_cross_entropy_with_logits", version=1, kind=Kind.COMPUTE)
class BinaryCrossEntropyWithLogits(OperatorSpec):
    entry_points = (
        EntryPoint("binary_cross_entropy_with_logits",
                   "binary_cross_entropy_with_logits(self: Tensor, target: Tensor, "
                   "weight: Tensor | None = None, pos_weight: Tensor | None = None, "
                   "reduction: int = 1) -> Tensor",
                   "Binary cross entropy of logits self against target in [0, 1], optionally "
                   "weighted, reduced by reduction (0 none, 1 mean, 2 sum)."),
        EntryPoint("binary_cross_entropy_with_logits_out",
                   "binary_cross_entropy_with_logits_out(self: Tensor, target: Tensor, "
                   "weight: Tensor | None = None, pos_weight: Tensor | None = None, "
                   "reduction: int = 1, *, out: Tensor) -> Tensor",
                   "Writes binary_cross_entropy_with_logits(...) into out (self's shape for "
                   "reduction 0, a 0-d tensor otherwise) and returns out."),
    )
    description = (
        "Binary cross entropy on logits, following PyTorch's "
        "`torch.binary_cross_entropy_with_logits(self, target, weight, pos_weight, reduction)` "
        "(as `torch.nn.functional.binary_cross_entropy_with_logits`). Elementwise, with x = self "
        "and t = target (same shape, values in [0, 1], soft labels allowed): "
        "`loss = (1 - t) * x - lw * log_sigmoid(x)` where `log_sigmoid(x) = min(x, 0) - "
        "log1p(exp(-|x|))` and `lw = 1 + (pos_weight - 1) * t` (lw = 1 when pos_weight is None), "
        "then `loss *= weight` when weight is given. weight and pos_weight broadcast against "
        "self (pos_weight is typically per class, the last dim). Logits may be large (|x| in the "
        "thousands), where sigmoid saturates: never take log(sigmoid(x)) or log(1 - sigmoid(x)) "
        "directly. Infinite logits follow the expression above in IEEE arithmetic (x = +inf "
        "gives +inf for t < 1, x = -inf gives NaN); NaN propagates. `reduction` is an int: 0 "
        "returns the elementwise loss, 1 its mean and 2 its sum as a 0-d tensor; the mean of an "
        "empty input is NaN. The result has self's dtype (float16, bfloat16 or float32; all "
        "inputs share it); inputs may be non-contiguous, 0-d or empty. Compute in float32, "
        "accumulate reductions in float32, round once."
    )
    solution = SOLUTION
    negatives = (
        Negative("naive_log_sigmoid", "computes -[pw t log(sigmoid(x)) + (1 - t) log(1 - "
                 "sigmoid(x))] in float32: inf/NaN or lost accuracy for large logits",
                 NEGATIVE_NAIVE),
        Negative("ignores_pos_weight", "drops the pos_weight factor on the positive term",
                 NEGATIVE_NO_POS_WEIGHT),
    )

    def tolerance(self, c: Case, dtype: torch.dtype) -> Tolerance:
        # Relative to |w| (|1 - t| |x| + |lw| |log_sigmoid(x)|) per element (summed for
        # reductions): the two terms cancel for large negative logits (PyTorch's expression
        # subtracts two numbers near x), and every rounding (1 - t, the products, lw, the
        # difference, the weight) is at most 1 u of one of them. PyTorch's half path rounds
        # each of those ~6 intermediates to the half type. float32 reductions: a tree over
        # 1024-element blocks plus a sequential pass over the partials (~16 u).
        if dtype in (torch.float16, torch.bfloat16):
            return Tolerance.ulps(dtype, 8)
        return Tolerance.ulps(dtype, 16 if c["reduction"] != "none" else 8)

    def cases(self) -> Sequence[Case]:
        e, eo = "binary_cross_entropy_with_logits", "binary_cross_entropy_with_logits_out"
        cs: list[Case] = [
            case(e, "float32", (63, 145), reduction="none", std=2.0, cpu=True),
            case(e, "float16", (49, 63), reduction="none", std=2.0, pos_weight=(63,),
                 cpu=True),
            case(e, "float32", (7, 17, 31), reduction="mean", std=1.0, weight=(17, 31),
                 pos_weight=(31,), cpu=True),
            case(e, "bfloat16", (2065,), reduction="sum", std=1.0, hard=True, cpu=True),
            case(e, "float32", (33, 65), reduction="none", std=1000.0, layout="transposed",
                 weight=(33, 65), cpu=True),
            case(eo, "float32", (24, 50), reduction="none", std=30.0, layout="strided",
                 pos_weight=(50,), specials=True, cpu=True),
            case(eo, "float16", (40, 30), reduction="mean", std=30.0, weight=(40, 1), cpu=True),
            case(e, "float32", (), reduction="none", std=1.0, cpu=True),
            case(e, "float32", (0, 7), reduction="mean", cpu=True),
            case(e, "float32", (500,), reduction="mean", std=1.0, defaults=True, cpu=True),
        ]
        for dt in _FLOATS:
            cs += [
                case(e, dt, (1024, 1024), reduction="none", std=1.0),
                case(e, dt, (4096, 256), reduction="mean", std=3.0, pos_weight=(256,)),
                case(e, dt, (511, 257), reduction="mean", std=30.0, weight=(511, 257),
                     hard=True),
                case(e, dt, (16, 7, 57, 32, 29), reduction="none", std=2.0,
                     weight=(7, 1, 32, 1), pos_weight=(29,)),
                case(e, dt, (200, 4099), reduction="mean", std=1.0, layout="transposed"),
                case(e, dt, (127, 33), reduction="none", std=3.0, specials=True,
                     pos_weight=(33,)),
                case(eo, dt, (20, 320, 15), reduction="none", std=100.0, layout="strided",
                     weight=(320, 1)),
                case(eo, dt, (1000, 999), reduction="mean", std=5.0, pos_weight=(999,)),
                case(e, dt, (), reduction="sum", std=1.0),
            ]
        cs.append(case(e, "float32", (3000, 2000), reduction="sum", std=4.0, hard=True))
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _FLOATS if not small else ("float32", rng.choice(("float16", "bfloat16"))):
            rows = rng.randrange(1, 60 if small else 1500)
            cols = rng.randrange(1, 70 if small else 1500)
            red = rng.choice(["none", "mean", "sum"])
            if dt != "float32" and red == "sum":
                red = "mean"  # a half sum of many terms overflows
            params: dict[str, object] = {
                "reduction": red,
                "layout": rng.choice(["contiguous", "transposed", "strided"]),
                "std": rng.choice([1.0, 3.0, 30.0, 1000.0]), "hard": rng.random() < 0.5,
            }
            if rng.random() < 0.5:
                params["weight"] = rng.choice([(rows, cols), (cols,), (rows, 1)])
            if rng.random() < 0.5:
                params["pos_weight"] = (cols,)
            entry = rng.choice(["binary_cross_entropy_with_logits",
                                "binary_cross_entropy_with_logits_out"])
            out.append(case(entry, dt, (rows, cols), cpu=small, **params))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        e = "binary_cross_entropy_with_logits"
        return [
            # >= 64 MB of traffic each, no more (inputs are drawn in float64 on the CPU)
            case(e, "float32", (2048, 4096), reduction="mean", std=3.0),
            case(e, "bfloat16", (3072, 4096), reduction="none", std=3.0, pos_weight=(4096,)),
            case(e, "float16", (16384, 1024), reduction="mean", std=3.0, weight=(16384, 1),
                 pos_weight=(1024,)),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        layout = c.get("layout", "contiguous")
        x = _randn(c.shape, c.dtype, gen, std=c.get("std", 1.0))
        if c.get("specials"):
            x = sprinkle_specials(x, gen, fraction=0.05)
        x = with_layout(x, layout)
        if c.get("hard"):  # 0 / 1 labels
            t = with_layout(randint(c.shape, c.dtype, gen, low=0, high=2), layout)
        else:
            t = _uniform(c.shape, c.dtype, gen, low=0.0, high=1.0, layout=layout)
        w = pw = None
        if c.get("weight") is not None:
            w = _uniform(c["weight"], c.dtype, gen, low=0.2, high=2.0, layout=layout)
        if c.get("pos_weight") is not None:
            pw = _uniform(c["pos_weight"], c.dtype, gen, low=0.5, high=4.0)
        red = _RED[c["reduction"]]
        args: tuple[object, ...] = (x, t)
        kwargs: dict[str, object] = {}
        if not c.get("defaults"):
            kwargs = {"weight": w, "pos_weight": pw, "reduction": red}
        if c.entry == "binary_cross_entropy_with_logits_out":
            kwargs["out"] = torch.empty(x.shape if red == 0 else (), dtype=x.dtype)
            return Call(c.entry, args, kwargs, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, args, kwargs)

    @staticmethod
    def _operands(call: Call) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None,
                                       torch.Tensor | None, int]:
        k = call.kwargs
        return (call.args[0], call.args[1], k.get("weight"), k.get("pos_weight"),
                k.get("reduction", 1))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, t, w, pw, red = self._operands(call)
        x64, t64 = x.double(), t.double()
        ls = torch.nn.functional.logsigmoid(x64)
        lw = torch.ones((), dtype=torch.float64) if pw is None else (pw.double() - 1) * t64 + 1
        lw_abs = lw.abs() if pw is None else (pw.double() - 1).abs() * t64.abs() + 1
        loss = (1 - t64) * x64 - lw * ls
        scale = (1 - t64).abs() * x64.abs() + lw_abs * ls.abs()
        if w is not None:
            loss = loss * w.double()
            scale = scale * w.double().abs()
        if red == 0:
            return (Expected(loss, x.dtype, scale),)
        if red == 1:
            return (Expected(loss.mean(), x.dtype, scale.sum() / max(loss.numel(), 1)),)
        return (Expected(loss.sum(), x.dtype, scale.sum()),)

    def baseline(self, call: Call) -> object:
        x, t, w, pw, red = self._operands(call)
        if call.entry == "binary_cross_entropy_with_logits_out":
            return torch.ops.aten.binary_cross_entropy_with_logits.out(
                x, t, w, pw, red, out=call.kwargs["out"])
        return torch.ops.aten.binary_cross_entropy_with_logits(x, t, w, pw, red)

    def cost(self, c: Case) -> Cost:
        n = _numel(c.shape)
        size = torch.empty((), dtype=c.torch_dtype).element_size()
        reads = 2 * n
        for key in ("weight", "pos_weight"):
            if c.get(key) is not None:
                reads += _numel(c[key])
        out = n if c["reduction"] == "none" else 1
        return Cost(flops=10.0 * n, bytes=float(size * (reads + out)), dtype="float32")
