"""Comparing a produced output with the high-precision reference.

Pure functions on CPU tensors, shared by the device agent (which checks every candidate) and by
``validate`` (which checks the problems themselves), so a problem is judged by one rule only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from operators.spec import Expected, Tolerance, dtype_name

MAX_REPORTED = 5


@dataclass(frozen=True)
class Mismatch:
    """Why an output is wrong, in words a person or a model can act on."""

    summary: str
    bad: int = 0
    total: int = 0
    max_abs_error: float | None = None


def poison_value(dtype: torch.dtype) -> float | int | bool:
    """What out-buffers are filled with before a call, so unwritten elements are visible."""
    if dtype.is_floating_point or dtype.is_complex:
        return float("nan")
    if dtype == torch.bool:
        return True
    return int(torch.iinfo(dtype).max)


CHUNK = 1 << 18  # elements per slice of the host's fast path (2 MiB of float64)


def _all_within(act: torch.Tensor, exp: torch.Tensor, scale: torch.Tensor | None,
                tol: Tolerance) -> bool:
    """The common case, cheaply: every difference finite (so neither side is NaN or inf) and
    within ``atol + rtol * |scale|`` (``scale`` None: the reference itself), in float64. Anything
    else takes the full rule. On the host it runs over slices: whole-tensor temporaries of
    hundreds of MB are fresh mappings each time, and faulting their pages in cost more than the
    arithmetic (seen on the agent checking 25 M-element sorts)."""
    with torch.no_grad():
        if act.device.type != "cpu" or act.numel() <= CHUNK:
            parts = [(act, exp, scale)]
        else:
            a, e = act.reshape(-1), exp.reshape(-1)
            sc = scale.reshape(-1) if scale is not None else None
            parts = [(a[i:i + CHUNK], e[i:i + CHUNK], None if sc is None else sc[i:i + CHUNK])
                     for i in range(0, a.numel(), CHUNK)]
        for a, e, sc in parts:
            e = e.to(torch.float64)
            diff = (a.to(torch.float64) - e).abs_()
            bound = (e if sc is None else sc.to(torch.float64)).abs().mul_(tol.rtol).add_(tol.atol)
            if not bool((diff <= bound).logical_and_(torch.isfinite(diff)).all()):
                return False
        return True


def compare(actual: object, expected: Expected, tol: Tolerance) -> Mismatch | None:
    """None when ``actual`` matches ``expected`` within ``tol``; else what is wrong."""
    if not isinstance(actual, torch.Tensor) or type(actual) is not torch.Tensor:
        return Mismatch(f"expected a torch.Tensor, got {type(actual).__name__}")
    exp = expected.value
    if actual.dtype != expected.dtype:
        return Mismatch(f"wrong dtype: got {dtype_name(actual.dtype)}, "
                        f"expected {dtype_name(expected.dtype)}")
    if tuple(actual.shape) != tuple(exp.shape):
        return Mismatch(f"wrong shape: got {tuple(actual.shape)}, expected {tuple(exp.shape)}")
    total = exp.numel()
    if total == 0:
        return None
    act = actual.detach().to(exp.device)  # on the device when the reference is (recheck)
    # A reference may make its scale on the host while its values follow the inputs' device.
    ref_scale = None if expected.scale is None else expected.scale.to(exp.device)
    if exp.dtype.is_floating_point and _all_within(act, exp, ref_scale, tol):
        return None
    if not (exp.dtype.is_floating_point or exp.dtype.is_complex):
        bad_mask = act.to(exp.dtype) != exp
        return _summarize(bad_mask, act, exp, total, "exact match required for integer/bool")
    if exp.dtype.is_complex:
        a = torch.view_as_real(act.to(torch.complex128))
        e = torch.view_as_real(exp.to(torch.complex128))
        scale = torch.view_as_real(ref_scale.to(torch.complex128)).abs() \
            if ref_scale is not None else e.abs()
    else:
        a = act.to(torch.float64)
        e = exp.to(torch.float64)
        scale = ref_scale.to(torch.float64).abs() if ref_scale is not None else e.abs()
    bound = tol.atol + tol.rtol * scale
    with torch.no_grad():
        diff = (a - e).abs_()
    e_nan, a_nan = torch.isnan(e), torch.isnan(a)
    e_inf, a_inf = torch.isinf(e), torch.isinf(a)
    finite = ~(e_nan | e_inf)
    with torch.no_grad():
        err = torch.where(finite & ~a_nan & ~a_inf, diff, torch.zeros_like(e))
        bad = (e_nan != a_nan) | (e_inf & (a != e)) | (finite & (a_inf | a_nan)) | (err > bound)
    if exp.dtype.is_complex:
        bad = bad.any(dim=-1)
    if not bool(bad.any()):
        return None
    unwritten = int((finite & a_nan).sum())
    extra = ""
    if unwritten:
        extra = (f"; {unwritten} elements are NaN where the reference is finite "
                 "(output not fully written, or NaN produced)")
    max_err = float(err[finite & ~a_nan & ~a_inf].max()) if bool((finite & ~a_nan & ~a_inf).any()) else None
    m = _summarize(bad, act, exp, total, f"tolerance atol={tol.atol:.3g} rtol={tol.rtol:.3g}{extra}")
    return None if m is None else Mismatch(m.summary, m.bad, m.total, max_err)


@dataclass(frozen=True)
class Layout:
    """Where a tensor output lives relative to the call's arguments: the argument whose storage
    it shares (None: its own storage) and its element offset from that argument's start."""

    view_of: int | str | None = None
    offset: int = 0


@dataclass(frozen=True)
class PyNumber:
    """A Python scalar output (what ``Tensor.item()`` returns), as it travels from a worker:
    its type name and ``repr`` (so NaN and inf survive JSON)."""

    kind: str  # "bool" | "int" | "float" | "complex"
    text: str

    _PARSE = {"bool": lambda t: t == "True", "int": int, "float": float, "complex": complex}

    @staticmethod
    def of(value: Any) -> PyNumber | None:
        """The PyNumber for a plain Python bool/int/float/complex (subclasses are not)."""
        kind = {bool: "bool", int: "int", float: "float", complex: "complex"}.get(type(value))
        return None if kind is None else PyNumber(kind, repr(value))

    def value(self) -> bool | int | float | complex:
        parse: Any = self._PARSE.get(self.kind)
        if parse is None:
            raise ValueError(f"not a Python number type: {self.kind!r}")
        result: bool | int | float | complex = parse(self.text)
        return result


def check(actual: object, expected: Expected, tol: Tolerance,
          layout: Layout | None = None) -> Mismatch | None:
    """Everything an output must be: a Python number or a plain tensor as the reference says;
    aliasing and strides where the reference asks for them (``layout`` is what the harness saw
    next to the arguments; None skips the aliasing checks); then its values by ``compare``, by a
    distribution test, or not at all when they are undefined (after ``expected.canonical``,
    where the op leaves some of it unspecified)."""
    if expected.python is not None:
        number = actual if isinstance(actual, PyNumber) else PyNumber.of(actual)
        if number is None:
            got = "a tensor" if isinstance(actual, torch.Tensor) else type(actual).__name__
            return Mismatch(f"expected a Python {expected.python} (as Tensor.item() returns), "
                            f"got {got}")
        if number.kind != expected.python:
            return Mismatch(f"expected a Python {expected.python}, got a Python {number.kind}")
        try:
            v = number.value()
        except ValueError as exc:
            return Mismatch(str(exc))
        return compare(torch.tensor(v, dtype=expected.dtype), expected, tol)
    if isinstance(actual, PyNumber):
        return Mismatch(f"expected a torch.Tensor, got a Python {actual.kind}")
    if not isinstance(actual, torch.Tensor) or type(actual) is not torch.Tensor:
        return Mismatch(f"expected a torch.Tensor, got {type(actual).__name__}")
    if actual.dtype != expected.dtype:
        return Mismatch(f"wrong dtype: got {dtype_name(actual.dtype)}, "
                        f"expected {dtype_name(expected.dtype)}")
    if tuple(actual.shape) != tuple(expected.value.shape):
        return Mismatch(f"wrong shape: got {tuple(actual.shape)}, "
                        f"expected {tuple(expected.value.shape)}")
    if expected.strides is not None and actual.numel() > 1:
        want = [st for d, st in zip(actual.shape, expected.strides, strict=True) if d > 1]
        got_s = [st for d, st in zip(actual.shape, actual.stride(), strict=True) if d > 1]
        if want != got_s:
            return Mismatch(f"wrong strides: got {tuple(actual.stride())}, expected "
                            f"{expected.strides} (dims of size 1 not compared)")
    if layout is not None:
        where = _describe_key(expected.view_of)
        if expected.view_of is not None and layout.view_of != expected.view_of:
            return Mismatch(f"must be a view of {where} (share its storage), but "
                            + ("is a new tensor" if layout.view_of is None
                               else f"shares the storage of {_describe_key(layout.view_of)}"))
        if expected.view_of is not None and layout.offset != expected.offset:
            return Mismatch(f"a view of {where} at the wrong place: storage offset "
                            f"{layout.offset}, expected {expected.offset}")
        if expected.view_of is None and layout.view_of is not None:
            return Mismatch(f"shares the storage of {_describe_key(layout.view_of)}; a new "
                            "tensor is expected (writing to one would change the other)")
    if expected.judge is not None:
        why = expected.judge(actual.detach().cpu())
        return None if why is None else Mismatch(why, actual.numel(), actual.numel())
    if not expected.values:
        return None
    if expected.canonical is not None:  # the parts the op leaves unspecified, made canonical
        actual = expected.canonical(actual.detach().to(expected.value.device))
    return compare(actual, expected, tol)


def _describe_key(key: int | str | None) -> str:
    return f"argument {key!r}" if isinstance(key, str) else f"argument {key}"


def _summarize(bad: torch.Tensor, act: torch.Tensor, exp: torch.Tensor, total: int,
               note: str) -> Mismatch | None:
    n_bad = int(bad.sum())
    if n_bad == 0:
        return None
    idx = torch.nonzero(bad)[:MAX_REPORTED]
    samples = []
    for row in idx.tolist():
        pos = tuple(row)
        samples.append(f"at {list(pos)}: got {_item(act, pos)}, expected {_item(exp, pos)}")
    summary = f"{n_bad} of {total} elements differ ({note}); first: " + "; ".join(samples)
    return Mismatch(summary, n_bad, total)


def _item(t: torch.Tensor, pos: tuple[int, ...]) -> str:
    v = t[pos] if pos else t
    x = v.item()
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN payloads included), for input-mutation checks."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.numel() == 0:
        return True
    if a.dtype.is_floating_point or a.dtype.is_complex:
        return torch.equal(_flat_dense(a).view(torch.uint8), _flat_dense(b).view(torch.uint8))
    return torch.equal(a.detach().cpu(), b.detach().cpu())


def _flat_dense(t: torch.Tensor) -> torch.Tensor:
    """``t``'s elements in a fresh 1-d host tensor of unit stride. (``contiguous()`` keeps a
    one-element tensor's stride, which ``view`` as bytes refuses.)"""
    out = torch.empty(t.numel(), dtype=t.dtype)
    out.copy_(t.detach().reshape(-1))
    return out
