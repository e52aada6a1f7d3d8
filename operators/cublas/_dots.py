"""The Triton source of the complex dot products' reference solutions (``Cdotu``, ``Zdotc``):
one text with the precision and the conjugation filled in, so the solutions of the problems
cannot drift apart. The source is complete and standalone, as a candidate's must be. Registers
nothing."""

from __future__ import annotations

_TEMPLATE = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _cdot_partials(x_ptr, y_ptr, part_ptr, n, incx, incy, x0, y0, iters, BLOCK: tl.constexpr):
    # x_ptr, y_ptr: {real} views (real, imaginary interleaved). Program p sums blocks
    # p, p + P, ... lane by lane; its (real, imaginary) partial goes to part[2p], part[2p + 1].
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    r = tl.arange(0, BLOCK)
    acc_re = tl.zeros((BLOCK,), dtype=tl.{real})
    acc_im = tl.zeros((BLOCK,), dtype=tl.{real})
    for it in range(0, iters):
        i = (it * nprog + pid).to(tl.int64) * BLOCK + r
        mask = i < n
        px = 2 * (x0 + i * incx)
        py = 2 * (y0 + i * incy)
        xr = tl.load(x_ptr + px, mask=mask, other=0.0)
        xi = tl.load(x_ptr + px + 1, mask=mask, other=0.0)
        yr = tl.load(y_ptr + py, mask=mask, other=0.0)
        yi = tl.load(y_ptr + py + 1, mask=mask, other=0.0)
{accumulate}    tl.store(part_ptr + 2 * pid, tl.sum(acc_re, axis=0))
    tl.store(part_ptr + 2 * pid + 1, tl.sum(acc_im, axis=0))


@triton.jit
def _sum_partials(part_ptr, out_ptr, count, BLOCK: tl.constexpr):
    # One program: the sum of count complex partials (0 when count == 0) into out[0], out[1].
    r = tl.arange(0, BLOCK)
    acc_re = tl.zeros((BLOCK,), dtype=tl.{real})
    acc_im = tl.zeros((BLOCK,), dtype=tl.{real})
    for start in range(0, count, BLOCK):
        m = start + r < count
        acc_re += tl.load(part_ptr + 2 * (start + r), mask=m, other=0.0)
        acc_im += tl.load(part_ptr + 2 * (start + r) + 1, mask=m, other=0.0)
    tl.store(out_ptr, tl.sum(acc_re, axis=0))
    tl.store(out_ptr + 1, tl.sum(acc_im, axis=0))


def _start(n, inc):
    # A negative increment starts at the far end: element i is at (n - 1 - i) * |inc|.
    return (n - 1) * -inc if inc < 0 else 0


def {entry}(n, x, incx, y, incy, result):
    out = torch.view_as_real(result)
    if n <= 0:  # the result of an empty dot is 0, written like any other
        _sum_partials[(1,)](out, out, 0, BLOCK=128)
        return None
    on_cpu = x.device.type == "cpu"
    BLOCK = 512 if on_cpu else {gpu_block}
    blocks = triton.cdiv(n, BLOCK)
    programs = min(blocks, 4 if on_cpu else 1024)
    partials = torch.empty(2 * programs, dtype=torch.{real}, device=x.device)
    _cdot_partials[(programs,)](torch.view_as_real(x), torch.view_as_real(y), partials, n,
                                incx, incy, _start(n, incx), _start(n, incy),
                                triton.cdiv(blocks, programs), BLOCK=BLOCK, num_warps=8)
    _sum_partials[(1,)](partials, out, programs, BLOCK=1024)
    return None
'''

# x_i * y_i, and conj(x_i) * y_i, per component.
UNCONJUGATED = ("        acc_re += xr * yr - xi * yi\n"
                "        acc_im += xr * yi + xi * yr\n")
CONJUGATED = ("        acc_re += xr * yr + xi * yi\n"
              "        acc_im += xr * yi - xi * yr\n")


def complex_dot_solution(entry: str, real: str, *, conjugate_x: bool) -> str:
    """The solution of ``entry``: complex elements of ``real`` ("float32", "float64") parts,
    accumulated in that precision, ``x`` conjugated or not."""
    return _TEMPLATE.format(entry=entry, real=real, gpu_block=2048 if real == "float32" else 1024,
                            accumulate=CONJUGATED if conjugate_x else UNCONJUGATED)
