"""The float64 reference of ``vllm::selective_scan_fwd`` (Mamba's selective scan as vLLM
0.13.0's csrc/mamba/mamba_ssm/selective_scan_fwd.cu runs it) with its error bound, the
expectations built from it (:func:`expected`: packed or batched sequences, state slots, padding)
and the float32 PyTorch baseline (:func:`torch_scan`). Registers nothing.

Per sequence (and per channel d, state n): ``dt = softplus(delta + bias)`` (vLLM: ``log1p(exp)``
up to 20, identity above), ``h = exp(dt * A[d, n]) * h + dt * u * B[g(d), n, t]`` from ``h0``
(the sequence's ``ssm_states`` slot when ``has_initial_state``, else 0), ``y = sum_n h * C[g(d),
n, t] + D[d] * u``; the group is ``g(d) = d // (dim / n_groups)``.

**Error bound.** vLLM runs the recurrence in float32, so its error grows with the scan's memory:
each step's decay ``a = exp(x)``, ``x = dt * A``, carries a relative error of about
``(5 |x| + 2) u`` (the softplus, the product, exp2f; u = float32's unit roundoff), its input
``b = dt * u * B`` about ``5u``, the update a rounding of each term. :func:`reference` carries,
next to ``h``, its first-order error bound in units of u: ``E_t = a E_{t-1} + (5|x| + 3) a S_{t-1}
+ 6 |b|`` with ``S_t = a S_{t-1} + |b|`` (all terms taken positive: the state's conditioning).
An output's allowed error is four times that bound carried through ``y`` (a ``dstate``-term
float32 sum), plus one rounding to the output dtype. Sequences that forget fast give
tolerances of a few ulps; long-memory ones (decays near 1) get what float32 honestly loses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from operators.spec import Expected, unit_roundoff

PAD_SLOT_ID = -1  # vLLM's PAD_SLOT_ID
U32 = unit_roundoff(torch.float32)
SAFETY = 4.0  # the bound is first order; room for another summation order of the same terms


@dataclass(frozen=True)
class ScanResult:
    """Per padded sequence ``[seqs, dim, L]``: y and its allowed float32 error (before any
    rounding to the output dtype); the final states ``[seqs, dim, dstate]`` and theirs."""

    y: torch.Tensor
    y_err: torch.Tensor
    h: torch.Tensor
    h_err: torch.Tensor


def softplus64(x: torch.Tensor) -> torch.Tensor:
    """vLLM's softplus: ``log1p(exp(x))`` for x <= 20, x above."""
    return torch.where(x <= 20.0, torch.log1p(torch.exp(x.clamp(max=20.0))), x)


def reference(u: torch.Tensor, dt: torch.Tensor, a_mat: torch.Tensor, b_mat: torch.Tensor,
              c_mat: torch.Tensor, group: torch.Tensor, d_vec: torch.Tensor | None,
              h0: torch.Tensor, lengths: torch.Tensor) -> ScanResult:
    """The scan of ``seqs`` padded sequences in float64, lockstep over time: ``u``/``dt``
    ``[seqs, dim, L]`` (``dt`` already biased and softplus'd), ``b_mat``/``c_mat``
    ``[seqs, groups, dstate, L]`` with ``group[d]`` each channel's group, ``h0``
    ``[seqs, dim, dstate]``; positions at or past a sequence's length leave its state alone."""
    seqs, dim, length = u.shape
    y = torch.zeros_like(u)
    y_err = torch.zeros_like(u)
    h = h0.clone()
    s = h0.abs()
    e = torch.zeros_like(h0)
    dstate = a_mat.shape[1]
    for t in range(length):
        live = (t < lengths)[:, None, None]
        x = dt[:, :, t, None] * a_mat
        a = torch.exp(x)
        b = (dt[:, :, t] * u[:, :, t])[:, :, None] * b_mat[:, group, :, t]
        e = torch.where(live, a * e + (5 * x.abs() + 3) * a * s + 6 * b.abs(), e)
        s = torch.where(live, a * s + b.abs(), s)
        h = torch.where(live, a * h + b, h)
        c = c_mat[:, group, :, t]
        du = d_vec[None, :] * u[:, :, t] if d_vec is not None else torch.zeros_like(u[:, :, t])
        y[:, :, t] = (h * c).sum(-1) + du
        scale = (s * c.abs()).sum(-1) + du.abs()
        y_err[:, :, t] = SAFETY * U32 * ((e * c.abs()).sum(-1) + (dstate + 2) * scale)
    return ScanResult(y, y_err, h, SAFETY * U32 * e)


def _segments(args: tuple[Any, ...]) -> tuple[list[tuple[int, int, int]], int]:
    """``[(batch row or 0, start, length)]`` per sequence, and the padded length."""
    u, qsl = args[0], args[9]
    if qsl is None:
        return [(b, 0, u.shape[-1]) for b in range(u.shape[0])], u.shape[-1]
    q = qsl.cpu().tolist()
    segs = [(0, q[i], q[i + 1] - q[i]) for i in range(len(q) - 1)]
    return segs, max((n for _, _, n in segs), default=0)


def _cols(t: torch.Tensor, seg: tuple[int, int, int], varlen: bool) -> torch.Tensor:
    """The view of ``t`` (``[..., dim, time]``) holding one sequence's time steps."""
    row, start, n = seg
    return t[..., start:start + n] if varlen else t[row, ..., start:start + n]


def _gather(t: torch.Tensor, segs: list[tuple[int, int, int]], length: int,
            varlen: bool) -> torch.Tensor:
    """``t``'s sequences as ``[seqs, ..., length]`` (zero padded), float64."""
    out = torch.zeros(len(segs), *t.shape[(0 if varlen else 1):-1], length,
                      dtype=torch.float64, device=t.device)
    for i, (row, start, n) in enumerate(segs):
        src = t if varlen else t[row]
        out[i, ..., :n] = src[..., start:start + n].double()
    return out


def expected(args: tuple[Any, ...]) -> tuple[Expected, ...]:
    """The problem's expectations: ``delta`` (y), ``z`` (gated y) when given, ``ssm_states``;
    skipped sequences' columns and unused slots exact."""
    u, delta, a, b, cm, d_vec, z, bias, softplus, qsl, ci, init, states, pad = args
    varlen = qsl is not None
    segs, length = _segments(args)
    seqs = len(segs)
    dim = a.shape[0]
    dt64 = _gather(delta, segs, length, varlen)
    if bias is not None:
        dt64 = dt64 + bias.double()[None, :, None]
    if softplus:
        dt64 = softplus64(dt64)
    slots = ci.long().tolist() if ci is not None else list(range(seqs))
    h0 = torch.zeros(seqs, dim, a.shape[1], dtype=torch.float64, device=u.device)
    for i, slot in enumerate(slots):
        if init is not None and bool(init[i]) and slot != pad:
            h0[i] = states[slot].double()
    lengths = torch.tensor([n for _, _, n in segs], device=u.device)
    group = torch.arange(dim, device=u.device) // (dim // b.shape[-3])
    res = reference(_gather(u, segs, length, varlen), dt64, a.double(),
                    _gather(b, segs, length, varlen), _gather(cm, segs, length, varlen),
                    group, d_vec.double() if d_vec is not None else None, h0, lengths)
    ud = unit_roundoff(u.dtype)
    floor = ud * torch.finfo(u.dtype).tiny  # half the subnormal spacing: rounding near zero
    y_val, y_tol = delta.double().clone(), torch.zeros(delta.shape, dtype=torch.float64,
                                                       device=u.device)
    outs: list[tuple[torch.Tensor, torch.Tensor]] = [(y_val, y_tol)]
    if z is not None:
        zz = _gather(z, segs, length, varlen)
        silu = zz * torch.sigmoid(zz)
        gated = res.y * silu
        gated_tol = silu.abs() * res.y_err + (3 * U32 + ud) * gated.abs() + floor
        outs.append((z.double().clone(), torch.zeros(z.shape, dtype=torch.float64,
                                                     device=u.device)))
    for i, seg in enumerate(segs):
        if slots[i] == pad:
            continue
        n = seg[2]
        _cols(y_val, seg, varlen).copy_(res.y[i, :, :n])
        _cols(y_tol, seg, varlen).copy_(res.y_err[i, :, :n] + ud * res.y[i, :, :n].abs()
                                        + floor)
        if z is not None:
            _cols(outs[1][0], seg, varlen).copy_(gated[i, :, :n])
            _cols(outs[1][1], seg, varlen).copy_(gated_tol[i, :, :n])
    st_val = states.double().clone()
    st_tol = torch.zeros(states.shape, dtype=torch.float64, device=u.device)
    us = unit_roundoff(states.dtype)
    for i, slot in enumerate(slots):
        if slot != pad:
            st_val[slot] = res.h[i]
            st_tol[slot] = res.h_err[i] + us * (res.h[i].abs() + torch.finfo(states.dtype).tiny)
    exp = [Expected(v, delta.dtype, tol) for v, tol in outs]
    return (*exp, Expected(st_val, states.dtype, st_tol))


def torch_scan(u: torch.Tensor, delta: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                cm: torch.Tensor, d_vec: torch.Tensor | None, z: torch.Tensor | None,
                bias: torch.Tensor | None, softplus: bool, qsl: torch.Tensor | None,
                ci: torch.Tensor | None, init: torch.Tensor | None, states: torch.Tensor,
                pad: int, *_: Any) -> None:
    """The recurrence in float32 PyTorch, sequences padded and stepped together."""
    varlen = qsl is not None
    args = (u, delta, a, b, cm, d_vec, z, bias, softplus, qsl, ci, init, states, pad)
    segs, length = _segments(args)
    slots = ci.long().tolist() if ci is not None else list(range(len(segs)))
    keep = [i for i, s in enumerate(slots) if s != pad]
    if not keep or length == 0:
        return
    segs = [segs[i] for i in keep]
    slots = [slots[i] for i in keep]
    uu = _gather(u, segs, length, varlen).float()
    dt = _gather(delta, segs, length, varlen).float()
    if bias is not None:
        dt = dt + bias[None, :, None]
    if softplus:
        dt = torch.where(dt <= 20.0, torch.nn.functional.softplus(dt, threshold=1e9), dt)
    group = torch.arange(a.shape[0], device=u.device) // (a.shape[0] // b.shape[-3])
    bb = _gather(b, segs, length, varlen).float()[:, group]
    cc = _gather(cm, segs, length, varlen).float()[:, group]
    h = torch.zeros(len(segs), *a.shape, dtype=torch.float32, device=u.device)
    for i, slot in enumerate(slots):
        if init is not None and bool(init[keep[i]]):
            h[i] = states[slot].float()
    lengths = torch.tensor([n for _, _, n in segs], device=u.device)
    y = torch.empty_like(uu)
    for t in range(length):
        live = (t < lengths)[:, None, None]
        step = torch.exp(dt[:, :, t, None] * a) * h + (dt[:, :, t] * uu[:, :, t])[..., None] \
            * bb[..., t]
        h = torch.where(live, step, h)
        y[:, :, t] = (h * cc[..., t]).sum(-1)
    if d_vec is not None:
        y = y + d_vec[None, :, None] * uu
    gate = None
    if z is not None:
        zz = _gather(z, segs, length, varlen).float()
        gate = y * torch.nn.functional.silu(zz)
    for i, seg in enumerate(segs):
        n = seg[2]
        _cols(delta, seg, varlen).copy_(y[i, :, :n])
        if z is not None and gate is not None:
            _cols(z, seg, varlen).copy_(gate[i, :, :n])
        states[slots[i]].copy_(h[i])
