"""vllm::selective_scan_fwd — ``vllm._custom_ops.selective_scan_fwd(u, delta, A, B, C, D_, z_,
delta_bias_, delta_softplus, query_start_loc, cache_indices, has_initial_state, ssm_states,
pad_slot_id, block_size=1024, block_idx_first_scheduled_token=None,
block_idx_last_scheduled_token=None, initial_state_idx=None)`` (vLLM 0.13.0,
csrc/mamba/mamba_ssm/selective_scan_fwd.cu): Mamba-1's selective scan with vLLM's state cache,
everything in place, returning None.

- Layout: batched ``u``, ``delta``, ``z`` ``[batch, dim, seqlen]``, ``B``, ``C`` ``[batch,
  n_groups, dstate, seqlen]``; with ``query_start_loc`` (int32 ``[batch + 1]``, cumulative
  starts) the sequences are packed: ``u``/``delta``/``z`` ``[dim, total]``, ``B``/``C``
  ``[n_groups, dstate, total]``. Time is the contiguous last dim. ``A`` ``[dim, dstate]``,
  ``D_`` and ``delta_bias_`` ``[dim]`` are float32; ``u``, ``delta``, ``z``, ``B``, ``C`` share
  the input dtype (float32, float16, bfloat16); ``ssm_states`` ``[slots, dim, dstate]`` is the
  input dtype or float32.
- Outputs: ``delta`` receives the scan's output y (not gated); with ``z_`` given, ``z`` also
  receives ``y * silu(z)``. Sequence b's final state goes to ``ssm_states[cache_indices[b]]``
  (``[b]`` without cache_indices), its initial state is that slot when ``has_initial_state[b]``,
  else zero. A sequence whose cache index equals ``pad_slot_id`` is skipped: its columns of
  ``delta``/``z`` and every state slot stay as they were. Other slots are untouched.
- The prefix-caching mode (``block_idx_*``, ``initial_state_idx``, 2-D ``cache_indices``) is
  part of the signature but no case uses it; ``block_size`` is then irrelevant.

Mamba's own ``selective_scan_ref`` models none of the cache, padding or packing; the reference
here does (:mod:`._selective_scan`, with the float32 error bound the tolerances follow).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import torch

from operators.inputs import randn
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
from operators.vllm import _baseline
from operators.vllm._rms import FLOATS
from operators.vllm._selective_scan import PAD_SLOT_ID, expected, torch_scan

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _softplus(x):
    # log1p(exp(x)) in float32 without losing small exp(x) (log(u) * e / (u - 1) is exact to a
    # few ulps); x itself above 20, as vLLM does.
    e = tl.exp(tl.minimum(x, 20.0))
    u = 1.0 + e
    lp = tl.where(u == 1.0, e, tl.log(u) * e / (u - 1.0))
    return tl.where(x <= 20.0, lp, x)


@triton.jit
def _scan_kernel(u_ptr, dt_ptr, a_ptr, b_ptr, c_ptr, d_ptr, z_ptr, bias_ptr, qsl_ptr, ci_ptr,
                 init_ptr, st_ptr, dim, dstate, seqlen, ratio, pad_slot_id,
                 su0, su1, sz0, sz1, sb0, sbg, sbn, sc0, scg, scn, ss0, ss1,
                 HAS_D: tl.constexpr, HAS_Z: tl.constexpr, HAS_BIAS: tl.constexpr,
                 SOFTPLUS: tl.constexpr, VARLEN: tl.constexpr, HAS_CI: tl.constexpr,
                 HAS_INIT: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr):
    # Program (sequence, block of channels): the state [BLOCK_D, BLOCK_N] stays in registers
    # while time advances one step per iteration. Time is the last, contiguous dim.
    seq = tl.program_id(0)
    if VARLEN:
        t0 = tl.load(qsl_ptr + seq).to(tl.int64)
        length = tl.load(qsl_ptr + seq + 1) - t0
        base = 0
    else:
        t0 = tl.zeros((), tl.int64)
        length = seqlen
        base = seq.to(tl.int64)
    if HAS_CI:
        slot = tl.load(ci_ptr + seq)
    else:
        slot = seq
    if slot != pad_slot_id:
        d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
        n = tl.arange(0, BLOCK_N)
        dmask = d < dim
        m2 = dmask[:, None] & (n < dstate)[None, :]
        a = tl.load(a_ptr + d[:, None] * dstate + n[None, :], mask=m2, other=0.0)
        g = d // ratio
        if HAS_D:
            dd = tl.load(d_ptr + d, mask=dmask, other=0.0)
        if HAS_BIAS:
            bias = tl.load(bias_ptr + d, mask=dmask, other=0.0)
        st = st_ptr + slot.to(tl.int64) * ss0 + d[:, None] * ss1 + n[None, :]
        h = tl.zeros([BLOCK_D, BLOCK_N], dtype=tl.float32)
        if HAS_INIT:
            if tl.load(init_ptr + seq) != 0:
                h = tl.load(st, mask=m2, other=0.0).to(tl.float32)
        urow = u_ptr + base * su0 + d * su1 + t0
        drow = dt_ptr + base * su0 + d * su1 + t0
        zrow = z_ptr + base * sz0 + d * sz1 + t0
        bcol = b_ptr + base * sb0 + g[:, None] * sbg + n[None, :] * sbn + t0
        ccol = c_ptr + base * sc0 + g[:, None] * scg + n[None, :] * scn + t0
        for t in range(0, length):
            uu = tl.load(urow + t, mask=dmask, other=0.0).to(tl.float32)
            delta = tl.load(drow + t, mask=dmask, other=0.0).to(tl.float32)
            if HAS_BIAS:
                delta += bias
            if SOFTPLUS:
                delta = _softplus(delta)
            bt = tl.load(bcol + t, mask=m2, other=0.0).to(tl.float32)
            ct = tl.load(ccol + t, mask=m2, other=0.0).to(tl.float32)
            h = tl.exp(delta[:, None] * a) * h + (delta * uu)[:, None] * bt
            y = tl.sum(h * ct, axis=1)
            if HAS_D:
                y += dd * uu
            tl.store(drow + t, y.to(dt_ptr.dtype.element_ty), mask=dmask)
            if HAS_Z:
                zz = tl.load(zrow + t, mask=dmask, other=0.0).to(tl.float32)
                tl.store(zrow + t, (y * zz * tl.sigmoid(zz)).to(z_ptr.dtype.element_ty),
                         mask=dmask)
        tl.store(st, h.to(st_ptr.dtype.element_ty), mask=m2)


def selective_scan_fwd(u, delta, A, B, C, D_, z_, delta_bias_, delta_softplus, query_start_loc,
                       cache_indices, has_initial_state, ssm_states, pad_slot_id,
                       block_size=1024, block_idx_first_scheduled_token=None,
                       block_idx_last_scheduled_token=None, initial_state_idx=None):
    assert block_idx_first_scheduled_token is None, "prefix-caching mode not implemented"
    varlen = query_start_loc is not None
    dim, dstate = A.shape
    if varlen:
        n_seqs = query_start_loc.shape[0] - 1
        seqlen = u.shape[1]
        n_groups = B.shape[0]
        su0, su1 = 0, u.stride(0)
        sz0, sz1 = (0, z_.stride(0)) if z_ is not None else (0, 0)
        sb0, sbg, sbn = 0, B.stride(0), B.stride(1)
        sc0, scg, scn = 0, C.stride(0), C.stride(1)
    else:
        n_seqs, _, seqlen = u.shape
        n_groups = B.shape[1]
        su0, su1 = u.stride(0), u.stride(1)
        sz0, sz1 = (z_.stride(0), z_.stride(1)) if z_ is not None else (0, 0)
        sb0, sbg, sbn = B.stride(0), B.stride(1), B.stride(2)
        sc0, scg, scn = C.stride(0), C.stride(1), C.stride(2)
    if n_seqs == 0 or dim == 0:
        return None
    block_n = triton.next_power_of_2(dstate)
    block_d = max(1, min(32, 2048 // block_n))
    grid = (n_seqs, triton.cdiv(dim, block_d))
    _scan_kernel[grid](
        u, delta, A, B, C, D_ if D_ is not None else A, z_ if z_ is not None else u,
        delta_bias_ if delta_bias_ is not None else A, query_start_loc if varlen else A,
        cache_indices if cache_indices is not None else A,
        has_initial_state if has_initial_state is not None else A, ssm_states,
        dim, dstate, seqlen, dim // n_groups, pad_slot_id,
        su0, su1, sz0, sz1, sb0, sbg, sbn, sc0, scg, scn,
        ssm_states.stride(0), ssm_states.stride(1),
        HAS_D=D_ is not None, HAS_Z=z_ is not None, HAS_BIAS=delta_bias_ is not None,
        SOFTPLUS=bool(delta_softplus), VARLEN=varlen, HAS_CI=cache_indices is not None,
        HAS_INIT=has_initial_state is not None, BLOCK_D=block_d, BLOCK_N=block_n)
    return None
'''

# softplus as log(1 + exp(x)): float32 loses small exp(x) (Mamba's dt of 1e-3..1e-1).
NEGATIVE_NAIVE_SOFTPLUS = SOLUTION.replace(
    "    lp = tl.where(u == 1.0, e, tl.log(u) * e / (u - 1.0))\n",
    "    lp = tl.log(u)\n")

# Always starts from a zero state, ignoring has_initial_state.
NEGATIVE_NO_INITIAL_STATE = SOLUTION.replace(
    "        HAS_INIT=has_initial_state is not None,", "        HAS_INIT=False,")

# Stores the gated output into delta too (the op keeps y there and gates only into z).
NEGATIVE_GATED_DELTA = SOLUTION.replace(
    "            tl.store(drow + t, y.to(dt_ptr.dtype.element_ty), mask=dmask)\n"
    "            if HAS_Z:\n"
    "                zz = tl.load(zrow + t, mask=dmask, other=0.0).to(tl.float32)\n",
    "            if HAS_Z:\n"
    "                zz = tl.load(zrow + t, mask=dmask, other=0.0).to(tl.float32)\n"
    "                tl.store(drow + t, (y * zz * tl.sigmoid(zz)).to(dt_ptr.dtype.element_ty),"
    " mask=dmask)\n"
    "            else:\n"
    "                tl.store(drow + t, y.to(dt_ptr.dtype.element_ty), mask=dmask)\n"
    "            if HAS_Z:\n")

# Assigns channels to groups round-robin (d % n_groups) instead of in contiguous blocks.
NEGATIVE_GROUP_MODULO = SOLUTION.replace("        g = d // ratio\n",
                                         "        g = d % (dim // ratio)\n")


def _case(dt: str, seqs: int, dim: int, dstate: int, seqlen: int, *, cpu: bool = False,
          **params: Any) -> Case:
    return case("selective_scan_fwd", dt, (seqs, dim, dstate, seqlen), cpu=cpu, **params)


_FULL = {"D": True, "z": True, "bias": True, "softplus": True}


@register("vllm::selective_scan_fwd", version=1, kind=Kind.COMPUTE)
class SelectiveScanFwd(OperatorSpec):
    entry_points = (
        EntryPoint(
            "selective_scan_fwd",
            "selective_scan_fwd(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, "
            "D_: Tensor | None, z_: Tensor | None, delta_bias_: Tensor | None, "
            "delta_softplus: bool, query_start_loc: Tensor | None, "
            "cache_indices: Tensor | None, has_initial_state: Tensor | None, "
            "ssm_states: Tensor, pad_slot_id: int, block_size: int = 1024, "
            "block_idx_first_scheduled_token: Tensor | None = None, "
            "block_idx_last_scheduled_token: Tensor | None = None, "
            "initial_state_idx: Tensor | None = None) -> None",
            "Mamba selective scan: y into delta (and y * silu(z) into z), final states into "
            "ssm_states, in place.",
        ),
    )
    description = (
        "Mamba-1 selective scan as vLLM's `vllm._custom_ops.selective_scan_fwd`, in place, "
        "returning None. Without `query_start_loc`: `u`, `delta`, `z_` are `[batch, dim, L]`, "
        "`B`, `C` `[batch, n_groups, dstate, L]`, sequence b is row b. With `query_start_loc` "
        "(int32 `[batch + 1]`): sequences are packed along time, `u`, `delta`, `z_` `[dim, "
        "total]`, `B`, `C` `[n_groups, dstate, total]`, sequence b is columns "
        "`query_start_loc[b]:query_start_loc[b+1]` (lengths >= 1). Time is the contiguous last "
        "dim (other strides as given). `A` `[dim, dstate]`, `D_`, `delta_bias_` `[dim]` are "
        "float32 (D_, z_, delta_bias_ may be None); u, delta, z, B, C share the input dtype "
        "(float32/float16/bfloat16). Channel d uses group g = d // (dim // n_groups). For each "
        "sequence b with slot = cache_indices[b] (int32 `[batch]`; slot = b when None): if "
        "slot == pad_slot_id skip the sequence entirely (nothing written). Else h = "
        "ssm_states[slot] (float32) if has_initial_state (bool `[batch]`, None = all False) "
        "is true for b, else 0; for each time t in order: dt = delta[d, t] + delta_bias[d]; if "
        "delta_softplus: dt = log1p(exp(dt)) for dt <= 20 (dt itself above; compute log1p "
        "accurately for tiny exp(dt)); h[d, n] = exp(dt * A[d, n]) * h[d, n] + dt * u[d, t] * "
        "B[g, n, t]; y = sum_n h[d, n] * C[g, n, t] + D[d] * u[d, t]. Write y into delta[d, t] "
        "(after reading it); if z_ is given also z[d, t] = y * z * sigmoid(z). After the last "
        "step write h into ssm_states[slot] (`[slots, dim, dstate]`, input dtype or float32, "
        "last dim contiguous). Compute in float32. Positions of skipped sequences and state "
        "slots no sequence uses stay unchanged. block_size and the three prefix-caching "
        "arguments keep their defaults in every call (None / 1024)."
    )
    solution = SOLUTION
    negatives = (
        Negative("naive_softplus", "softplus as log(1 + exp(x)) in float32, which loses "
                 "Mamba's small time steps", NEGATIVE_NAIVE_SOFTPLUS),
        Negative("no_initial_state", "always starts from a zero state, ignoring "
                 "has_initial_state", NEGATIVE_NO_INITIAL_STATE),
        Negative("gated_delta", "writes the gated output y * silu(z) into delta as well",
                 NEGATIVE_GATED_DELTA),
        Negative("group_modulo", "assigns channels to B/C groups round-robin instead of in "
                 "contiguous blocks", NEGATIVE_GROUP_MODULO),
    )

    # Every output's Expected.scale is its allowed absolute error (:mod:`._selective_scan`).
    tolerances = {name: Tolerance(rtol=1.0, atol=0.0)
                  for name in ("float16", "bfloat16", "float32")}

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            _case("float32", 2, 8, 4, 16, **_FULL, cpu=True),
            _case("bfloat16", 1, 16, 8, 24, **_FULL, groups=2, state="float32", init="all",
                  cache="perm", cpu=True),
            _case("float16", 3, 8, 16, 30, z=True, bias=True, softplus=True, varlen=True,
                  cache="pad", init="some", cpu=True),
            _case("float32", 2, 12, 4, 20, varlen=True, decay="slow", cpu=True),
            _case("float32", 2, 8, 8, 12, D=True, bias=True, softplus=True, cache="perm",
                  init="all", groups=4, cpu=True),
        ]
        for dt in FLOATS:
            cs += [
                # vLLM's test setup (A = -0.5 rand: slow decays, long memory).
                _case(dt, 1, 4, 8, 1024, **_FULL, groups=2, decay="slow", init="all",
                      cache="perm"),
                # Mamba-2.8B-like channels, packed prefill with padding and cached states.
                _case(dt, 4, 1024, 16, 1536, **_FULL, varlen=True, cache="pad", init="some",
                      state="float32"),
                _case(dt, 8, 512, 16, 64, **_FULL, cache="perm", init="some"),
                _case(dt, 16, 768, 16, 1, **_FULL, cache="perm", init="all"),
                _case(dt, 2, 256, 64, 300, D=True, bias=True, softplus=True, groups=4,
                      varlen=True, cache="perm"),
                _case(dt, 3, 96, 16, 777, z=True, decay="slow", varlen=True, init="some",
                      cache="pad"),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in FLOATS:
            seqs = rng.randrange(1, 4 if small else 9)
            dim = rng.choice([4, 8, 12] if small else [64, 128, 512, 1024])
            groups = rng.choice([g for g in (1, 2, 4) if dim % g == 0])
            varlen = rng.random() < 0.5
            length = rng.randrange(seqs if varlen else 1, 24 if small else 1200)
            flags = {k: rng.random() < 0.7 for k in ("D", "z", "bias")}
            out.append(_case(dt, seqs, dim, rng.choice([4, 8, 16]), max(length, seqs),
                             **flags, softplus=rng.random() < 0.8, groups=groups,
                             varlen=varlen, cache=rng.choice(["none", "perm", "pad"]),
                             init=rng.choice(["none", "some", "all"]),
                             state=rng.choice(["same", "float32"]),
                             decay=rng.choice(["mamba", "slow"]), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _case("bfloat16", 8, 5120, 16, 8192, **_FULL, varlen=True, cache="perm",
                  init="some", state="float32"),
            _case("float16", 4, 4096, 16, 2048, **_FULL, cache="perm", init="all"),
            _case("bfloat16", 256, 8192, 16, 1, **_FULL, cache="perm", init="all",
                  state="float32"),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        return _make_call(c, gen)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        return expected(call.args)

    def baseline(self, call: Call) -> object:
        # vLLM's kernel where vLLM is installed (device tensors); else the same recurrence in
        # PyTorch float32, sequences padded and stepped together.
        ops = _baseline.custom_ops()
        if ops is not None and call.args[0].device.type != "cpu":
            ops.selective_scan_fwd(*call.args)
            return None
        torch_scan(*call.args)
        return None

    def baseline_library(self) -> str:
        return _baseline.library()

    def cost(self, c: Case) -> Cost:
        seqs, dim, dstate, length = c.shape
        total = length if c.get("varlen") else seqs * length
        groups = int(c.get("groups", 1))
        size = c.torch_dtype.itemsize
        state_size = 4 if c.get("state") == "float32" else size
        z = 2 if c.get("z") else 0
        # u, delta and z read, delta and z written, B and C read, each used state read and
        # written once.
        nbytes = total * dim * size * (3 + z) + 2 * total * groups * dstate * size \
            + 2 * seqs * dim * dstate * state_size
        return Cost(flops=7.0 * total * dim * dstate, bytes=float(nbytes), dtype=c.dtype)


def _make_call(c: Case, gen: torch.Generator) -> Call:
    dt = c.torch_dtype
    seqs, dim, dstate, length = c.shape
    groups = int(c.get("groups", 1))
    varlen = bool(c.get("varlen"))
    softplus = bool(c.get("softplus"))
    lead: tuple[int, ...] = () if varlen else (seqs,)
    total = length
    u = randn((*lead, dim, total), dt, gen)
    if softplus:  # raw time steps around 0; the bias sets Mamba's dt of 1e-3..1e-1
        delta = randn((*lead, dim, total), dt, gen, std=0.5)
    else:
        delta = (torch.rand((*lead, dim, total), generator=gen, dtype=torch.float64) * 0.5).to(dt)
    if c.get("decay") == "slow":
        a = -0.5 * torch.rand((dim, dstate), generator=gen, dtype=torch.float64)
    else:
        a = -torch.arange(1, dstate + 1, dtype=torch.float64).expand(dim, dstate) * (
            1 + 0.1 * torch.rand((dim, dstate), generator=gen, dtype=torch.float64))
    b = randn((*lead, groups, dstate, total), dt, gen)
    cm = randn((*lead, groups, dstate, total), dt, gen)
    d_vec = randn((dim,), torch.float32, gen) if c.get("D") else None
    z = randn((*lead, dim, total), dt, gen) if c.get("z") else None
    bias = None
    if c.get("bias"):
        target = torch.exp(torch.rand(dim, generator=gen, dtype=torch.float64)
                           * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3))
        bias = (target + torch.log(-torch.expm1(-target)) if softplus
                else 0.5 * target).float()
    qsl = None
    if varlen:
        cuts = torch.randperm(length - 1, generator=gen)[:seqs - 1] + 1
        qsl = torch.cat([torch.zeros(1, dtype=torch.int64), cuts.sort().values,
                         torch.tensor([length])]).to(torch.int32)
    slots = seqs + 3
    ci = None
    if c.get("cache", "none") != "none":
        ci = torch.randperm(slots, generator=gen)[:seqs].to(torch.int32)
        if c["cache"] == "pad":
            ci[torch.randperm(seqs, generator=gen)[:max(1, seqs // 3)]] = PAD_SLOT_ID
    init = None
    if c.get("init", "none") != "none":
        init = torch.ones(seqs, dtype=torch.bool) if c["init"] == "all" else (
            torch.rand(seqs, generator=gen) < 0.5)
    state_dt = torch.float32 if c.get("state") == "float32" else dt
    states = randn((slots, dim, dstate), state_dt, gen, std=0.5)
    args = (u, delta, a.float(), b, cm, d_vec, z, bias, softplus, qsl, ci, init, states,
            PAD_SLOT_ID)
    outputs = (Out.arg(1), Out.arg(6), Out.arg(12)) if z is not None else (Out.arg(1),
                                                                            Out.arg(12))
    mutable = frozenset({1, 6, 12} if z is not None else {1, 12})
    return Call(c.entry, args, outputs=outputs, mutable=mutable)
