"""vllm::convert_vertical_slash_indexes — ``vllm._custom_ops.convert_vertical_slash_indexes(
q_seqlens, kv_seqlens, vertical_indexes, slash_indexes, context_size, block_size_M,
block_size_N, causal=True)`` (vLLM 0.13.0, csrc/attention/vertical_slash_index.cu, from
MInference): turns a head's selected vertical lines (key columns) and slash lines (diagonals)
of a sparse attention pattern into, per block of ``block_size_M`` query rows, runs of key blocks
(``block_offset``: their start columns, ``block_size_N`` apart) and leftover single columns
(``column_index``).

The candidate implements the wrapper: it allocates the four int32 outputs zeroed —
``block_count`` and ``column_count`` ``[batch, heads, rows]``, ``block_offset``
``[batch, heads, rows, NNZ_S]``, ``column_index`` ``[batch, heads, rows, NNZ_V]`` with
``rows = ceil(context_size / block_size_M)`` — fills them and returns them in that order. Row
blocks starting at or past the batch's ``q_seqlen`` stay zero, as do slots past the counts.
The exact walk (and what inputs it is defined for) is in :mod:`._vertical_slash`; the
description carries it to the candidate. Every output is an exact integer.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

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
    case,
)
from operators.vllm import _baseline
from operators.vllm._vertical_slash import convert

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _save(bo, blk, rs, re, kv, BN):
    # Offsets rs, rs + BN, ... below min(re, kv), appended at blk.
    if rs < kv:
        end = tl.minimum(re, kv)
        idx = rs
        while idx < end:
            tl.store(bo + blk, idx)
            blk += 1
            idx += BN
    return blk


@triton.jit
def _vs_kernel(q_ptr, kv_ptr, v_ptr, s_ptr, bc_ptr, bo_ptr, cc_ptr, ci_ptr, n_heads, n_rows,
               nv, ns, BM, BN, CAUSAL: tl.constexpr):
    # One program per (row block, head, batch): vLLM's walk, one step per loop iteration.
    r = tl.program_id(0)
    h = tl.program_id(1)
    b = tl.program_id(2)
    q = tl.load(q_ptr + b)
    kv = tl.load(kv_ptr + b)
    start_m = r * BM
    if start_m < q:
        end_m = start_m + BM
        if CAUSAL:
            edge = kv - q + end_m
            far = edge
        else:
            edge = kv + end_m
            far = kv
        head = (b * n_heads + h).to(tl.int64)
        vb = v_ptr + head * nv
        sb = s_ptr + head * ns
        out_row = head * n_rows + r
        bo = bo_ptr + out_row * ns
        ci = ci_ptr + out_row * nv
        v_idx = tl.load(vb)
        v = tl.full((), 1, tl.int32)
        s_idx = tl.load(sb)
        s = tl.full((), 1, tl.int32)
        while (s_idx >= edge) & (s < ns):
            s_idx = tl.load(sb + s)
            s += 1
        has_slash = s_idx <= edge
        s_idx = tl.maximum(edge - s_idx, BM)
        rs = tl.where(has_slash, s_idx - BM, far)
        re = tl.where(has_slash, s_idx, far + BN)
        finished = tl.full((), 0, tl.int32)
        done = tl.full((), 0, tl.int32)
        blk = tl.full((), 0, tl.int32)
        col = tl.full((), 0, tl.int32)
        while done == 0:
            if v_idx < re:
                if v_idx < rs:
                    tl.store(ci + col, v_idx)
                    col += 1
                if v < nv:
                    v_idx = tl.load(vb + v)
                    v += 1
                else:
                    v_idx = edge + BN
            else:
                if CAUSAL:
                    take = s < ns
                else:
                    take = (s < ns) & (tl.load(sb + tl.minimum(s, ns - 1)) >= start_m)
                if take:
                    s_idx = tl.maximum(edge - tl.load(sb + s), BM)
                    s += 1
                    if finished == 0:
                        if s_idx > re + BM:
                            blk = _save(bo, blk, rs, re, kv, BN)
                            rs = s_idx - BM
                            re = s_idx
                        elif s_idx > re:
                            re += BM
                else:
                    if CAUSAL:
                        stop = (v == nv) | (v_idx > rs)
                    else:
                        stop = v == nv
                    if stop:
                        if not CAUSAL:
                            if v_idx < kv:
                                tl.store(ci + col, v_idx)
                                col += 1
                        blk = _save(bo, blk, rs, re, kv, BN)
                        done = 1
                    else:
                        if not CAUSAL:
                            blk = _save(bo, blk, rs, re, kv, BN)
                        rs = far
                        re = far + BN
                        finished = 1
        tl.store(bc_ptr + out_row, blk)
        tl.store(cc_ptr + out_row, col)


def convert_vertical_slash_indexes(q_seqlens, kv_seqlens, vertical_indexes, slash_indexes,
                                   context_size, block_size_M, block_size_N, causal=True):
    batch, heads, ns = slash_indexes.shape
    nv = vertical_indexes.shape[2]
    rows = (context_size + block_size_M - 1) // block_size_M
    dev, dt = q_seqlens.device, q_seqlens.dtype
    block_count = torch.zeros(batch, heads, rows, dtype=dt, device=dev)
    block_offset = torch.zeros(batch, heads, rows, ns, dtype=dt, device=dev)
    column_count = torch.zeros(batch, heads, rows, dtype=dt, device=dev)
    column_index = torch.zeros(batch, heads, rows, nv, dtype=dt, device=dev)
    if batch and heads and rows:
        _vs_kernel[(rows, heads, batch)](
            q_seqlens, kv_seqlens, vertical_indexes, slash_indexes, block_count, block_offset,
            column_count, column_index, heads, rows, nv, ns, block_size_M, block_size_N,
            CAUSAL=bool(causal), num_warps=1)
    return block_count, block_offset, column_count, column_index
'''

# Treats every call as causal.
NEGATIVE_ALWAYS_CAUSAL = SOLUTION.replace("CAUSAL=bool(causal)", "CAUSAL=True")

# Causal rows ignore the kv - q offset of a chunk (right for a prefill, q == kv).
NEGATIVE_NO_KV_OFFSET = SOLUTION.replace("            edge = kv - q + end_m\n",
                                         "            edge = end_m\n")

# Lays the outputs out head-major across the batch ([heads, batch, rows]).
NEGATIVE_HEAD_MAJOR = SOLUTION.replace("        out_row = head * n_rows + r\n",
                                       "        out_row = (h * tl.num_programs(2) + b).to("
                                       "tl.int64) * n_rows + r\n")


def _case(batch: int, heads: int, context: int, nnz_v: int, nnz_s: int, *, causal: bool = True,
          bm: int = 64, bn: int = 64, seqs: str = "prefill", cpu: bool = False) -> Case:
    return case("convert_vertical_slash_indexes", "int32", (batch, heads, context, nnz_v, nnz_s),
                causal=causal, block_m=bm, block_n=bn, seqs=seqs, cpu=cpu)


@register("vllm::convert_vertical_slash_indexes", version=1, kind=Kind.COMPUTE)
class ConvertVerticalSlashIndexes(OperatorSpec):
    entry_points = (
        EntryPoint(
            "convert_vertical_slash_indexes",
            "convert_vertical_slash_indexes(q_seqlens: Tensor, kv_seqlens: Tensor, "
            "vertical_indexes: Tensor, slash_indexes: Tensor, context_size: int, "
            "block_size_M: int, block_size_N: int, causal: bool = True) "
            "-> tuple[Tensor, Tensor, Tensor, Tensor]",
            "Vertical/slash sparse-attention indexes to per-row-block key-block runs and "
            "columns; returns (block_count, block_offset, column_count, column_index).",
        ),
    )
    description = (
        "MInference's vertical-slash index conversion, as vLLM's "
        "`vllm._custom_ops.convert_vertical_slash_indexes`. Inputs (int32, contiguous): "
        "`q_seqlens`, `kv_seqlens` `[B]`; `vertical_indexes` `[B, H, NV]` (ascending, "
        "distinct, < kv_seqlens[b]); `slash_indexes` `[B, H, NS]` (descending, distinct, "
        "< kv_seqlens[b]); NV, NS >= 1; `block_size_M <= block_size_N`. Allocate zeroed int32 "
        "outputs `block_count`, `column_count` `[B, H, R]`, `block_offset` `[B, H, R, NS]`, "
        "`column_index` `[B, H, R, NV]`, R = ceil(context_size / block_size_M), and return them "
        "in that order. For each (b, h, r) with start = r * M < q_seqlens[b] (M = block_size_M, "
        "N = block_size_N, q = q_seqlens[b], kv = kv_seqlens[b], V/S = that head's lists), run "
        "this walk exactly (E = kv - q + start + M and F = E if causal; E = kv + start + M and "
        "F = kv if not): v_idx = V[0], v = 1; s_idx = S[0], s = 1; while s_idx >= E and s < NS: "
        "s_idx = S[s], s += 1. has = s_idx <= E; s_idx = max(E - s_idx, M); (rs, re) = "
        "(s_idx - M, s_idx) if has else (F, F + N); finished = false. Loop: if v_idx < re: "
        "{if v_idx < rs: append v_idx to columns; if v < NV: v_idx = V[v], v += 1 else v_idx = "
        "E + N}. Else: if s < NS and (causal or S[s] >= start): {s_idx = max(E - S[s], M), "
        "s += 1; if not finished: {if s_idx > re + M: save(rs, re), (rs, re) = (s_idx - M, "
        "s_idx); elif s_idx > re: re += M}}. Else if v == NV or (causal and v_idx > rs): {if "
        "not causal and v == NV and v_idx < kv: append v_idx to columns; save(rs, re); stop}. "
        "Else: {if not causal: save(rs, re); (rs, re) = (F, F + N); finished = true}. "
        "save(rs, re) appends rs, rs + N, rs + 2N, ... while < min(re, kv) to the block "
        "offsets, and nothing if rs >= kv. Then block_count[b, h, r] / column_count[b, h, r] "
        "are the list lengths and block_offset[b, h, r, :] / column_index[b, h, r, :] start "
        "with the lists (the rest zero). Rows with start >= q stay all zero. Do not modify "
        "the inputs."
    )
    solution = SOLUTION
    negatives = (
        Negative("always_causal", "ignores causal=False", NEGATIVE_ALWAYS_CAUSAL),
        Negative("no_kv_offset", "causal rows ignore the kv - q offset (right when q == kv)",
                 NEGATIVE_NO_KV_OFFSET),
        Negative("head_major_rows", "writes output rows head-major ([H, B, R]) instead of "
                 "[B, H, R] (right for one batch element)", NEGATIVE_HEAD_MAJOR),
    )

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            # Small blocks against the context, so runs, gaps and columns vary with the draw.
            _case(1, 2, 192, 8, 5, bm=16, bn=16, cpu=True),
            _case(2, 2, 128, 10, 6, bm=16, bn=32, seqs="chunked", cpu=True),
            _case(1, 2, 192, 12, 4, causal=False, bm=32, bn=32, seqs="chunked", cpu=True),
            _case(3, 1, 128, 6, 5, bm=16, bn=32, seqs="ragged", cpu=True),
            _case(2, 2, 128, 6, 8, causal=False, bm=16, bn=32, seqs="ragged", cpu=True),
        ]
        for causal in (True, False):
            cs += [
                # MInference's 64 x 64 blocks; vertical / slash budgets of its configs.
                _case(1, 32, 4096, 100, 200, causal=causal),
                _case(1, 8, 16384, 1000, 1024, causal=causal, seqs="chunked"),
                _case(2, 16, 8192, 300, 600, causal=causal, seqs="ragged"),
                _case(4, 4, 2000, 64, 128, causal=causal, bm=32, bn=64, seqs="chunked"),
                _case(1, 28, 8191, 500, 100, causal=causal, bm=64, bn=128),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for causal in (True, False, True, False):
            if small:  # 8-11 row blocks of 16 in 2 heads: enough for the counts to vary
                bm, ctx, batch, heads = 16, rng.randrange(128, 184), 1, 2
                nv = rng.randrange(6, 12)
            else:
                bm, ctx = rng.choice([16, 32, 64]), rng.randrange(128, 9000)
                batch, heads, nv = rng.randrange(1, 5), rng.randrange(2, 17), rng.randrange(6, 600)
            # About one slash per two row blocks: sparse enough that causal rows are not all
            # covered, dense enough that non-causal runs cover some verticals; otherwise the
            # counts stop depending on the draw.
            blocks = ctx // bm
            ns = min(600, rng.randrange(max(4, blocks // 3), max(5, blocks // 2 + 1)))
            out.append(_case(batch, heads, ctx, nv, ns, causal=causal, bm=bm,
                             bn=rng.choice([bm, 2 * bm]),
                             seqs=rng.choice(["prefill", "chunked", "ragged"]), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        # Each row block walks about NV + NS entries one by one; the reference recheck after
        # timing walks them too (on the host), so these stay at 8192 row blocks.
        return [
            _case(1, 32, 16384, 1000, 1024),
            _case(2, 16, 16384, 500, 1024, seqs="chunked"),
            _case(1, 32, 16384, 1000, 1024, causal=False, seqs="chunked"),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        batch, heads, ctx, nv, ns = c.shape
        q, kv = _seqlens(c, gen)
        vertical = torch.zeros(batch, heads, nv, dtype=torch.int32)
        slash = torch.zeros(batch, heads, ns, dtype=torch.int32)
        for b in range(batch):
            for h in range(heads):
                vertical[b, h] = _pick(int(kv[b]), nv, gen, first=4)
                slash[b, h] = _pick(int(kv[b]), ns, gen, first=max(1, ns // 8)).flip(0)
        args = (q, kv, vertical, slash, ctx, int(c["block_m"]), int(c["block_n"]),
                bool(c["causal"]))
        return Call(c.entry, args, outputs=tuple(Out.ret(i) for i in range(4)))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        outs = convert(*call.args)
        return tuple(Expected(o, torch.int32) for o in outs)

    def baseline(self, call: Call) -> object:
        # vLLM's kernel where vLLM is installed (device tensors); else the reference's
        # row-parallel walk on the CPU, moved to the inputs' device.
        ops = _baseline.custom_ops()
        q = call.args[0]
        if ops is not None and q.device.type != "cpu":
            return ops.convert_vertical_slash_indexes(*call.args)
        return tuple(t.to(q.device) for t in convert(*call.args))

    def baseline_library(self) -> str:
        return _baseline.library()

    def cost(self, c: Case) -> Cost:
        batch, heads, ctx, nv, ns = c.shape
        rows = (ctx + int(c["block_m"]) - 1) // int(c["block_m"])
        out = batch * heads * rows * (2 + nv + ns) * 4
        inputs = batch * heads * (nv + ns) * 4 + 8 * batch
        # Each row block walks both lists once: about one comparison per entry.
        return Cost(flops=float(batch * heads * rows * (nv + ns)), bytes=float(out + inputs),
                    dtype="int32")


def _seqlens(c: Case, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """q and kv lengths: a prefill (q = kv = context), a chunk of a longer sequence
    (q <= kv = context), or ragged (q and kv drawn per batch element, q may be 0)."""
    batch, _, ctx, nv, ns = c.shape
    floor = max(nv, ns)
    kv = torch.full((batch,), max(ctx, floor), dtype=torch.int64)
    q = torch.full((batch,), ctx, dtype=torch.int64)
    if c["seqs"] == "chunked":
        q = torch.randint(1, ctx + 1, (batch,), generator=gen)
    elif c["seqs"] == "ragged":
        q = torch.randint(0, ctx + 1, (batch,), generator=gen)
        kv = torch.maximum(q, torch.full((batch,), floor)) + torch.randint(
            0, 64, (batch,), generator=gen)
    return q.to(torch.int32), kv.to(torch.int32)


def _pick(kv: int, n: int, gen: torch.Generator, *, first: int) -> torch.Tensor:
    """``n`` distinct ascending indexes below ``kv``: the ``first`` smallest (attention sinks,
    the nearest diagonals) and the rest at random."""
    head = torch.arange(min(first, n // 2))
    rest = torch.randperm(kv - len(head), generator=gen)[:n - len(head)] + len(head)
    return torch.cat([head, rest]).sort().values.to(torch.int32)
