"""The reference of ``vllm::convert_vertical_slash_indexes``: vLLM 0.13.0's
csrc/attention/vertical_slash_index.cu (MInference's Algorithm 4), exactly. Registers nothing.

For each (batch, head, row block ``[start_m, start_m + M)`` with ``start_m < q_seqlen``) the
kernel walks the ascending vertical indexes and the descending slash indexes once, merging the
slashes' column ranges into runs of key blocks (``block_offset``: each run's start columns, ``N``
apart, clipped at ``kv_seqlen``) and keeping the verticals no run covers (``column_index``).
Its control flow is the semantics, quirks included (a run grows by ``M`` per overlapping slash;
causal rows drop verticals past the last run; non-causal rows keep the last vertical), so it is
reproduced step for step twice: :func:`row` is a plain transcription for one row (the
reading aid and the cross-check), :func:`convert` runs the same state machine for all rows at
once in PyTorch (the reference, fast enough for benchmark sizes). A test checks they agree.

Inputs the kernel handles (the problem's inputs are built so): at least one vertical and one
slash index; verticals ascending, slashes descending, both distinct and below the batch's
``kv_seqlen``; ``M <= N`` (then a run never holds more blocks than slashes, so ``block_offset``
never overflows its ``NNZ_S`` slots, and the walk always ends).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

MAX_STEPS_SLACK = 8


def row(q: int, kv: int, vertical: list[int], slash: list[int], start_m: int, bm: int,
        bn: int, causal: bool) -> tuple[list[int], list[int]]:
    """``(block offsets, column indexes)`` of one row block: vLLM's loop, transcribed."""
    end_m = start_m + bm
    nv, ns = len(vertical), len(slash)
    base = kv - q if causal else kv  # causal rows see keys up to end_m + kv - q
    edge = base + end_m
    blocks: list[int] = []
    cols: list[int] = []

    def save(rs: int, re: int) -> None:
        if rs < kv:
            blocks.extend(range(rs, min(re, kv), bn))

    v_idx, v = vertical[0], 1
    s_idx, s = slash[0], 1
    while s_idx >= edge and s < ns:
        s_idx, s = slash[s], s + 1
    has_slash = s_idx <= edge
    s_idx = max(edge - s_idx, bm)
    far = edge if causal else kv  # where a row with no slash (or none left) looks next
    rs, re = (s_idx - bm, s_idx) if has_slash else (far, far + bn)
    finished = False
    for _ in range(nv + 2 * ns + MAX_STEPS_SLACK):
        if v_idx < re:
            if v_idx < rs:
                cols.append(v_idx)
            v_idx, v = (vertical[v], v + 1) if v < nv else (edge + bn, v)
            continue
        if s < ns and (causal or slash[s] >= start_m):
            s_idx, s = max(edge - slash[s], bm), s + 1
        elif v == nv or (causal and v_idx > rs):
            if v == nv and not causal and v_idx < kv:
                cols.append(v_idx)
            save(rs, re)
            return blocks, cols
        else:
            if not causal:
                save(rs, re)
            rs, re = far, far + bn
            finished = True
        if not finished:
            if s_idx > re + bm:
                save(rs, re)
                rs, re = s_idx - bm, s_idx
            elif s_idx > re:
                re += bm
    raise ValueError("vertical/slash walk did not end: inputs outside what the kernel handles")


def convert(q_seqlens: torch.Tensor, kv_seqlens: torch.Tensor, vertical: torch.Tensor,
            slash: torch.Tensor, context_size: int, bm: int, bn: int,
            causal: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(block_count, block_offset, column_count, column_index)`` as int32 tensors, computed on
    the CPU: :func:`row`'s state machine stepped for every row block at once. A streak of
    vertical steps (each vertical below the run's end) is taken in one step — they all compare
    with the same run — and the lists are logged as slices, assembled once at the end."""
    batch, heads, nv = vertical.shape
    ns = slash.shape[2]
    rows = (context_size + bm - 1) // bm
    walk = _Walk(vertical.cpu().long().reshape(batch * heads, nv).repeat_interleave(rows, 0),
                 slash.cpu().long().reshape(batch * heads, ns).repeat_interleave(rows, 0),
                 q_seqlens.cpu().long().repeat_interleave(heads * rows),
                 kv_seqlens.cpu().long().repeat_interleave(heads * rows),
                 (torch.arange(rows) * bm).repeat(batch * heads), bm, bn, causal)
    shape = (batch, heads, rows)
    cols, col_cnt = walk.assemble(walk.col_events, nv,
                                  lambda r, first, j: walk.vertical[r, first + j])
    blks, blk_cnt = walk.assemble(walk.blk_events, ns, lambda r, first, j: first + j * bn)
    return (blk_cnt.view(shape).int(), blks.view(*shape, ns).int(),
            col_cnt.view(shape).int(), cols.view(*shape, nv).int())


class _Walk:
    """Every row block's registers of vLLM's loop, stepped together; the lists are logged as
    events ``(rows, first, length)``: column slices of the verticals, block runs."""

    def __init__(self, vertical: torch.Tensor, slash: torch.Tensor, q: torch.Tensor,
                 kv: torch.Tensor, start_m: torch.Tensor, bm: int, bn: int,
                 causal: bool) -> None:
        self.vertical, self.n = vertical, vertical.shape[0]
        self.col_events: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        self.blk_events: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        live = (start_m < q).nonzero()[:, 0]
        if live.numel():
            self._run(live, vertical[live], slash[live], kv[live],
                      (kv - q if causal else kv)[live] + start_m[live] + bm, start_m[live],
                      bm, bn, causal)

    def _save(self, rows: torch.Tensor, mask: torch.Tensor, rs: torch.Tensor,
              re: torch.Tensor, kv: torch.Tensor, bn: int) -> None:
        end = torch.minimum(re, kv)
        n = torch.where(mask & (rs < kv) & (end > rs), (end - rs + bn - 1) // bn, 0)
        keep = n > 0
        if bool(keep.any()):
            self.blk_events.append((rows[keep], rs[keep], n[keep]))

    def _run(self, rows: torch.Tensor, vv: torch.Tensor, ss: torch.Tensor, kv: torch.Tensor,
             edge: torch.Tensor, start_m: torch.Tensor, bm: int, bn: int,
             causal: bool) -> None:
        nv, ns = vv.shape[1], ss.shape[1]
        far = edge if causal else kv

        def at(t: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
            return t.gather(1, i.clamp(max=t.shape[1] - 1)[:, None])[:, 0]

        v_idx, v = vv[:, 0].clone(), torch.ones_like(kv)
        # The skip loop: past every slash >= edge (descending), stopping at the last one.
        first = torch.searchsorted(-ss, -edge[:, None], right=True)[:, 0].clamp(max=ns - 1)
        s_idx, s = at(ss, first), first + 1
        has_slash = s_idx <= edge
        s_idx = torch.clamp(edge - s_idx, min=bm)
        rs = torch.where(has_slash, s_idx - bm, far)
        re = torch.where(has_slash, s_idx, far + bn)
        active = torch.ones_like(has_slash)
        finished = torch.zeros_like(has_slash)
        for _ in range(2 * ns + MAX_STEPS_SLACK):
            if not bool(active.any()):
                return
            a = active & (v_idx < re)
            b = active & ~a
            # Vertical streak: every vertical below re is consumed; those below rs are columns.
            ia = a.nonzero()[:, 0]
            if ia.numel():
                va = vv[ia]
                below_re = torch.searchsorted(va, re[ia, None])[:, 0]
                below_rs = torch.searchsorted(va, rs[ia, None])[:, 0]
                k = (torch.minimum(below_rs, below_re) - (v[ia] - 1)).clamp(min=0)
                if bool((k > 0).any()):
                    self.col_events.append((rows[ia][k > 0], (v[ia] - 1)[k > 0], k[k > 0]))
                more = below_re < nv
                v_idx[ia] = torch.where(more, at(va, below_re), edge[ia] + bn)
                v[ia] = torch.where(more, below_re + 1, nv)
            # Slash step, or the end of the walk.
            take = b & (s < ns) & (causal | (at(ss, s) >= start_m))
            s_idx = torch.where(take, torch.clamp(edge - at(ss, s), min=bm), s_idx)
            s = s + take.long()
            rest = b & ~take
            stop = rest & ((v == nv) | (causal & (v_idx > rs)))
            last = stop & (v == nv) & (not causal) & (v_idx < kv)
            if bool(last.any()):
                self.col_events.append((rows[last], (v - 1)[last], torch.ones_like(v[last])))
            fin = rest & ~stop
            self._save(rows, stop | (fin & (not causal)), rs, re, kv, bn)
            active = active & ~stop
            rs = torch.where(fin, far, rs)
            re = torch.where(fin, far + bn, re)
            finished = finished | fin
            merge = take & ~finished
            new = merge & (s_idx > re + bm)
            self._save(rows, new, rs, re, kv, bn)
            rs = torch.where(new, s_idx - bm, rs)
            re = torch.where(new, s_idx, torch.where(merge & (s_idx > re), re + bm, re))
        if bool(active.any()):
            raise ValueError("vertical/slash walk did not end: inputs outside what the kernel "
                             "handles")

    def assemble(self, events: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
                 width: int, value: Callable[[torch.Tensor, torch.Tensor, torch.Tensor],
                                             torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(lists [n, width] zero-padded, lengths [n])`` from events in step order; entry j
        of an event is ``value(row, first, j)``."""
        out = torch.zeros(self.n, width, dtype=torch.long)
        count = torch.zeros(self.n, dtype=torch.long)
        if not events:
            return out, count
        row = torch.cat([e[0] for e in events])
        first = torch.cat([e[1] for e in events])
        length = torch.cat([e[2] for e in events])
        order = torch.sort(row, stable=True).indices
        row, first, length = row[order], first[order], length[order]
        count.index_add_(0, row, length)
        if bool((count > width).any()):
            raise ValueError("an output list would overflow its slots: inputs outside what "
                             "the kernel handles")
        ends = torch.cumsum(length, 0)
        row_start = torch.cumsum(count, 0) - count  # first entry of each row in the flat list
        e_row = torch.repeat_interleave(row, length)
        e_first = torch.repeat_interleave(first, length)
        j = torch.arange(int(ends[-1])) - torch.repeat_interleave(ends - length, length)
        pos = torch.arange(int(ends[-1])) - row_start[e_row]
        out[e_row, pos] = value(e_row, e_first, j)
        return out, count
