"""Shared machinery of the unary elementwise problems (``aten::cos``, ``aten::neg``, ...).

Registers nothing (the registry skips modules whose name starts with ``_``). Each problem module
subclasses :class:`Unary` and keeps only what is its own: the function, its domain and edge
values, the fp64 reference with its conditioning ``scale``, tolerances, extra parameters,
its Triton solution (built from :func:`solution` here, a complete self-contained source) and
its negative controls.

What the base class provides:

- the case grid: 0-d, empty, odd sizes, transposed and strided inputs, edge values sprinkled in
  (infinities, NaN, zeros, denormals, the op's own special points), every float dtype the op
  declares, the out= variant with a contiguous or transposed ``out``;
- deterministic inputs (``sample`` gives values in the op's domain, ``edges`` the specials);
- the reference wrapper: fp64 value and scale from the op, overflow of the output dtype mapped
  to the infinity the dtype rounds to;
- PyTorch's own op as the baseline (``torch.ops.aten.<op>.<overload>``), the cost model.

The conditioning ``scale`` of ``f(x)`` is ``|f(x)| + |x f'(x)|`` unless an op says otherwise: a
backward-stable evaluation (the exact ``f`` of an input perturbed by a few units of roundoff,
then rounded) is off by at most a few ``u`` times that, so tolerances are a few ulps of it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any, ClassVar

import torch

from operators.inputs import with_layout
from operators.spec import (
    Call,
    Case,
    Cost,
    Expected,
    OperatorSpec,
    Out,
    Tier,
    case,
    dtype_from_name,
    unit_roundoff,
)

HALF_FLOATS = ("float16", "bfloat16")
FLOATS = ("float16", "bfloat16", "float32")
INF = math.inf
_POOL = 1 << 18
NAN = math.nan

# ---- the Triton solution template --------------------------------------------------------------

_HEADER = '''
import torch
import triton
import triton.language as tl
'''

_LIBDEVICE = "from triton.language.extra import libdevice\n"

# The generic strided kernel. ``_op(x, p0, p1)`` (the op's own @triton.jit function) receives x
# already in its compute dtype (float32 for half and float32 inputs, float64 for float64,
# unchanged for integers) and two runtime scalars for the op's parameters.
_KERNEL = '''
MAX_DIMS = 6


@triton.jit
def _unary_kernel(x_ptr, out_ptr, n, p0, p1,
                  s1, s2, s3, s4, s5,
                  x0, x1, x2, x3, x4, x5,
                  o0, o1, o2, o3, o4, o5,
                  DENSE: tl.constexpr, UPCAST: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    idx = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    if DENSE:
        # input and output share one dense layout: walk memory in order
        x_off = idx
        o_off = idx
    else:
        rem = idx
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
        x_off = i0 * x0 + i1 * x1 + i2 * x2 + i3 * x3 + i4 * x4 + i5 * x5
        o_off = i0 * o0 + i1 * o1 + i2 * o2 + i3 * o3 + i4 * o4 + i5 * o5
    x = tl.load(x_ptr + x_off, mask=mask)
    if UPCAST == 1:
        x = x.to(tl.float32)
    elif UPCAST == 2:
        x = x.to(tl.float64)
    y = _op(x, p0, p1)
    tl.store(out_ptr + o_off, y.to(out_ptr.dtype.element_ty), mask=mask)


def _pad(values, fill):
    values = list(values)
    return [fill] * (MAX_DIMS - len(values)) + values


def _dense(t):
    """Whether t's elements fill one block of memory exactly (in any dim order)."""
    expect = 1
    for st, sz in sorted((st, sz) for sz, st in zip(t.shape, t.stride()) if sz != 1):
        if st != expect:
            return False
        expect *= sz
    return True


def _result_like(x, dtype):
    # As PyTorch does, a dense input's layout (e.g. transposed) carries over to the result.
    if _dense(x):
        return torch.empty_strided(x.shape, x.stride(), dtype=dtype, device=x.device)
    return torch.empty(x.shape, dtype=dtype, device=x.device)


def _launch(x, out, p0=0.0, p1=0.0, block=BLOCK_SIZE, warps=4):
    n = out.numel()
    if n == 0:
        return out
    if x.dim() > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} dims supported")
    dense = _dense(x) and list(x.stride()) == list(out.stride())
    if x.dtype == torch.float64:
        upcast = 2
    elif x.dtype.is_floating_point:
        upcast = 1
    else:
        upcast = 0
    sizes = _pad(out.shape, 1)
    grid = (triton.cdiv(n, block),)
    _unary_kernel[grid](x, out, n, p0, p1, *sizes[1:], *_pad(x.stride(), 0),
                        *_pad(out.stride(), 0), DENSE=dense, UPCAST=upcast, BLOCK=block,
                        num_warps=warps)
    return out
'''

# The two entry points of an op whose only argument is self (default and out=).
PLAIN_WRAPPERS = '''

def NAME(self):
    return _launch(self, _result_like(self, self.dtype))


def NAME_out(self, *, out):
    return _launch(self, out)
'''


def solution(op_src: str, wrappers: str, *, name: str, libdevice: bool = False,
             block: int = 1024) -> str:
    """A complete candidate source: the generic strided kernel around the op's ``_op`` function
    (``op_src``, which may define helpers), and the entry points (``wrappers``; ``NAME`` is
    replaced by the op's name)."""
    head = _HEADER + (_LIBDEVICE if libdevice else "")
    body = _KERNEL.replace("BLOCK_SIZE", str(block))
    return (head + "\n" + op_src.strip("\n") + "\n\n" + body
            + wrappers.replace("NAME", name))


def ignores_strides(source: str) -> str:
    """A negative control: indexes the input as if it were contiguous in the strided path (right
    for contiguous and same-layout inputs, wrong for sliced ones or a differently laid out
    out=)."""
    old = "x_off = i0 * x0 + i1 * x1 + i2 * x2 + i3 * x3 + i4 * x4 + i5 * x5"
    assert old in source
    return source.replace(old, "x_off = idx")


def ignores_out(source: str, name: str) -> str:
    """A negative control: the out= entry computes into a new tensor and returns it, leaving
    ``out`` unwritten (right for the default overload only)."""
    old = f"def {name}_out(self, *, out):\n    return _launch(self, out)"
    assert old in source
    return source.replace(old, f"def {name}_out(self, *, out):\n"
                               "    return _launch(self, _result_like(self, self.dtype))")


# ---- the problem base class --------------------------------------------------------------------

def numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def log_uniform(n: int, gen: torch.Generator, lo: float, hi: float) -> torch.Tensor:
    """``n`` positive float64 values spread evenly in log scale over [lo, hi)."""
    u = torch.rand(n, generator=gen, dtype=torch.float64)
    return torch.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))


def pick(n: int, gen: torch.Generator, *parts: torch.Tensor) -> torch.Tensor:
    """``n`` values, each drawn (by ``gen``) from one of ``parts`` (equally likely)."""
    which = torch.randint(0, len(parts), (1, n), generator=gen)
    return torch.stack(parts).gather(0, which)[0]


def denormals(dtype: torch.dtype) -> list[float]:
    """Two subnormal values of ``dtype`` (one of each sign)."""
    tiny = torch.finfo(dtype).tiny
    return [tiny / 4, -tiny / 2]


def half_denormals(dtype: torch.dtype) -> list[float]:
    """Subnormals of float16 only: normal numbers once computed in float32. float32 and
    bfloat16 subnormals are subnormal in float32 too, where GPUs (and Triton's libdevice, built
    flush-to-zero) may read them as 0 — only for ops whose result at 0 is within tolerance of
    the result at a subnormal may those be tested (use :func:`denormals`)."""
    return denormals(dtype) if dtype == torch.float16 else []


def element_size(dtype: str) -> int:
    return torch.empty((), dtype=dtype_from_name(dtype)).element_size()


class Unary(OperatorSpec):
    """Base of the unary elementwise problems. A subclass sets ``op``, ``entry_points``,
    ``description``, ``solution``, ``negatives``, ``tolerances`` and implements ``sample``,
    ``edges`` and ``ref64`` (and ``args`` / ``variants`` / ``extra_cases`` when it has more
    parameters than ``self``)."""

    op: ClassVar[str] = ""
    float_dtypes: ClassVar[tuple[str, ...]] = FLOATS
    int_dtypes: ClassVar[tuple[str, ...]] = ()
    # Extra case parameters cycled over each dtype's cases (e.g. polygamma's n).
    variants: ClassVar[tuple[dict[str, Any], ...]] = ({},)
    flops_per_element: ClassVar[float] = 1.0
    # Expensive functions (long series) keep a smaller interpreter tier: the out= cases of the
    # half dtypes run on full tiers only.
    heavy: ClassVar[bool] = False
    # Iterative functions (loops per element) also shrink the interpreter tier's shapes.
    small_cpu: ClassVar[bool] = False

    # ---- what an op defines -----------------------------------------------------------------
    def sample(self, n: int, c: Case, gen: torch.Generator) -> torch.Tensor:
        """``n`` float64 values of the op's domain (before rounding to the case's dtype)."""
        std: float = c.get("std", 1.0)
        return torch.randn(n, generator=gen, dtype=torch.float64) * std

    def sample_int(self, n: int, c: Case, gen: torch.Generator) -> torch.Tensor:
        """``n`` int64 values for integer dtypes."""
        info = torch.iinfo(c.torch_dtype)
        return torch.randint(info.min, info.max, (n,), generator=gen, dtype=torch.int64)

    def edges(self, dtype: torch.dtype, c: Case) -> list[float]:
        """Special values sprinkled into ``edge=True`` cases."""
        return [INF, -INF, NAN, 0.0, -0.0]

    def int_edges(self, dtype: torch.dtype) -> list[int]:
        """Special values sprinkled into ``edge=True`` integer cases."""
        info = torch.iinfo(dtype)
        return [info.min, info.max, 0, -1, 1]

    def ref64(self, x: torch.Tensor, call: Call) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(value, scale) in float64 from the float64 input ``x``."""
        raise NotImplementedError

    def ref_int(self, x: torch.Tensor, call: Call) -> torch.Tensor:
        """The exact result for an integer input."""
        raise NotImplementedError

    def result_dtype(self, dtype: torch.dtype) -> torch.dtype:
        return dtype

    def args(self, x: torch.Tensor, c: Case) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Positional and keyword arguments of the call (the out buffer is added after)."""
        return (x,), {}

    def input_of(self, call: Call) -> torch.Tensor:
        """The tensor argument ``self`` of a call."""
        t = call.args[0]
        assert isinstance(t, torch.Tensor)
        return t

    def roundoff(self, call: Call) -> float:
        """Unit roundoff of the call's input dtype: the smallest relative perturbation of x
        that matters, for conditioning that is unbounded at a point (acosh at 1 ...)."""
        return unit_roundoff(self.input_of(call).dtype)

    def extra_cases(self) -> list[Case]:
        return []

    # ---- cases ------------------------------------------------------------------------------
    @property
    def out_entry(self) -> str:
        return f"{self.op}_out"

    def variants_for(self, dtype: str) -> tuple[dict[str, Any], ...]:
        """The parameter variants used with ``dtype`` (default: ``variants``)."""
        return self.variants

    def _grid(self, dt: str, rows: list[tuple[str, tuple[int, ...], bool, dict[str, Any]]]
              ) -> list[Case]:
        out = []
        variants = self.variants_for(dt)
        for j, (entry, shape, cpu, params) in enumerate(rows):
            p = dict(variants[j % len(variants)])
            p.update(params)
            out.append(case(entry, dt, shape, cpu=cpu, **p))
        return out

    def cases(self) -> Sequence[Case]:
        op, op_out = self.op, self.out_entry
        cs: list[Case] = []
        small = self.small_cpu
        for dt in self.float_dtypes:
            f32 = dt == "float32"
            cs += self._grid(dt, [
                (op, (31, 33) if small else (49, 63), True, {"edge": True}),
                (op_out, (7, 9, 13) if small else (7, 17, 31), f32 or not self.heavy,
                 {"edge": True}),
                (op, (513,) if small else (1000,), f32, {}),
                (op, (), f32, {}),
                (op, (33, 65), f32, {"layout": "transposed"}),
                (op, (24, 50), f32, {"layout": "strided"}),
                (op, (0,), False, {}),
                (op, (3, 0, 5), False, {}),
                (op, (7,), False, {"edge": True}),
                (op, (1024, 1024), False, {"edge": True}),
                (op, (20, 320, 15), False, {}),
                (op, (16, 7, 57, 32, 29), False, {"layout": "transposed", "edge": True}),
                (op, (511, 257), False, {"layout": "strided", "edge": True}),
                (op_out, (2065,), False, {"edge": True}),
                (op_out, (5, 7, 11, 13), False, {"layout": "transposed"}),
                (op_out, (63, 145), False, {"out_layout": "transposed", "edge": True}),
            ])
        for dt in self.int_dtypes:
            cs += self._grid(dt, [
                (op, (49, 63), dt == self.int_dtypes[0], {"edge": True}),
                (op_out, (33, 65), False, {"layout": "transposed"}),
                (op, (511, 257), False, {"layout": "strided", "edge": True}),
            ])
        return cs + self.extra_cases()

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        dtypes = list(self.float_dtypes) + list(self.int_dtypes)
        chosen = rng.sample(dtypes, 2) if small else dtypes
        out = []
        for dt in chosen:
            rank = rng.choice([1, 2, 3])
            budget = (800 if self.small_cpu else 2000) if small else 400_000
            shape = [rng.randrange(1, 12 if small else 64) for _ in range(rank)]
            shape[-1] = rng.randrange(2, max(3, budget // max(1, numel(shape[:-1]))))
            params = dict(rng.choice(self.variants_for(dt)))
            params["layout"] = rng.choice(["contiguous", "transposed", "strided"])
            params["edge"] = rng.random() < 0.5
            entry = rng.choice([self.op, self.out_entry])
            out.append(case(entry, dt, shape, cpu=small, **params))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        # >= 64 MB of traffic each (memory-bound on an H200), well inside the input budget.
        cs = [
            case(self.op, "float32", (4096, 4096), **self.variants_for("float32")[0]),
            case(self.op, "bfloat16", (4096, 8192), **self.variants_for("bfloat16")[0]),
            case(self.out_entry, "float16", (8192, 4096), **self.variants_for("float16")[0]),
        ]
        if "float64" in self.float_dtypes:
            cs.append(case(self.op, "float64", (4096, 4096), **self.variants_for("float64")[0]))
        return cs

    # ---- inputs -----------------------------------------------------------------------------
    def make_input(self, c: Case, gen: torch.Generator) -> torch.Tensor:
        dt = c.torch_dtype
        n = numel(c.shape)
        if n > _POOL:
            # Benchmark sizes: a pool of values tiled over the tensor (drawing tens of millions
            # of float64 values would dominate the suite's time, and timing does not care).
            params = {k: v for k, v in c.params if k != "layout"}
            pool = self.make_input(case(c.entry, c.dtype, (_POOL,), **params), gen)
            return with_layout(pool.repeat(n // _POOL + 1)[:n].reshape(c.shape),
                               c.get("layout", "contiguous"))
        if dt.is_floating_point:
            v = self.sample(n, c, gen)
            if c.get("edge") and n > 0:
                specials = torch.tensor(self.edges(dt, c), dtype=torch.float64)
                k = max(1, n // 16)
                pos = torch.randperm(n, generator=gen)[:k]
                v[pos] = specials.repeat(k // len(specials) + 1)[:k]
            x = v.to(dt)
        else:
            v = self.sample_int(n, c, gen)
            if c.get("edge") and n > 0:
                specials = torch.tensor(self.int_edges(dt), dtype=torch.int64)
                k = max(1, n // 16)
                pos = torch.randperm(n, generator=gen)[:k]
                v[pos] = specials.repeat(k // len(specials) + 1)[:k]
            x = v.to(dt)
        return with_layout(x.reshape(c.shape), c.get("layout", "contiguous"))

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        x = self.make_input(c, gen)
        args, kwargs = self.args(x, c)
        if c.entry == self.out_entry:
            buf = torch.empty(c.shape, dtype=self.result_dtype(x.dtype))
            kwargs["out"] = with_layout(buf, c.get("out_layout", "contiguous"))
            return Call(c.entry, args, kwargs, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, args, kwargs)

    # ---- reference, baseline, cost ----------------------------------------------------------
    def reference(self, call: Call) -> tuple[Expected, ...]:
        x = self.input_of(call)
        out_dtype = self.result_dtype(x.dtype)
        if not out_dtype.is_floating_point:
            return (Expected(self.ref_int(x, call).to(out_dtype), out_dtype),)
        with torch.no_grad():
            value, scale = self.ref64(x.double(), call)
            # What overflows the output dtype is the infinity the dtype rounds it to.
            rounded = value.to(out_dtype).double()
            value = torch.where(value.isfinite() & rounded.isinf(), rounded, value)
        return (Expected(value, out_dtype, scale),)

    def baseline(self, call: Call) -> object:
        packet = getattr(torch.ops.aten, self.op)
        overload = "out" if call.entry == self.out_entry else "default"
        return getattr(packet, overload)(*call.args, **call.kwargs)

    def cost(self, c: Case) -> Cost:
        n = numel(c.shape)
        out_dt = self.result_dtype(c.torch_dtype)
        out_size = torch.empty((), dtype=out_dt).element_size()
        return Cost(flops=self.flops_per_element * n,
                    bytes=float(n * (element_size(c.dtype) + out_size)), dtype=c.dtype)


def describe(what: str, dtypes: Sequence[str], *, extra: str = "", ints: str = "") -> str:
    """The prompt description: the op's own text, then what every unary problem shares."""
    names = ", ".join(dtypes)
    text = (
        f"{what} Inputs are float tensors ({names}) of up to 6 dims, possibly 0-d or empty, and "
        "possibly non-contiguous (transposed, or sliced with gaps); the result has the input's "
        "dtype and shape (the out= variant writes into `out`, which may itself be "
        "non-contiguous, and returns it). For float16/bfloat16 compute in float32 and round "
        "once"
        + (", float64 in float64" if "float64" in dtypes else "")
        + ". Special values follow PyTorch (IEEE semantics: inf, -inf, NaN, signed zeros, "
        "subnormals); large tensors need 64-bit offsets."
    )
    if ints:
        text += " " + ints
    if extra:
        text += " " + extra
    return text
