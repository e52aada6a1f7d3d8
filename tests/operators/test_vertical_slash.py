"""vllm::convert_vertical_slash_indexes: the row-parallel reference walks exactly as the
per-row transcription of vLLM's kernel does, on random inputs of both modes and the edges."""

from __future__ import annotations

import random

import pytest
import torch

from operators.vllm._vertical_slash import convert, row


def _inputs(rng: random.Random) -> tuple:
    batch, heads = rng.randint(1, 3), rng.randint(1, 3)
    bm = rng.choice([16, 32, 64])
    bn = rng.choice([bm, 2 * bm])
    ctx = rng.randint(1, 300)
    nv, ns = rng.randint(1, 16), rng.randint(1, 16)
    q, kv = [], []
    for _ in range(batch):
        qb = rng.randint(0, ctx)
        q.append(qb)
        kv.append(max(qb, nv, ns) + rng.choice([0, 0, 40]))
    vertical = torch.zeros(batch, heads, nv, dtype=torch.int32)
    slash = torch.zeros(batch, heads, ns, dtype=torch.int32)
    for b in range(batch):
        for h in range(heads):
            vertical[b, h] = torch.tensor(sorted(rng.sample(range(kv[b]), nv)))
            slash[b, h] = torch.tensor(sorted(rng.sample(range(kv[b]), ns), reverse=True))
    return (torch.tensor(q, dtype=torch.int32), torch.tensor(kv, dtype=torch.int32), vertical,
            slash, ctx, bm, bn, rng.random() < 0.5)


def _check(args: tuple) -> None:
    q, kv, vertical, slash, ctx, bm, bn, causal = args
    count, offsets, col_count, cols = convert(*args)
    for b in range(vertical.shape[0]):
        for h in range(vertical.shape[1]):
            for r in range(count.shape[2]):
                want_b, want_c = ([], []) if r * bm >= int(q[b]) else row(
                    int(q[b]), int(kv[b]), vertical[b, h].tolist(), slash[b, h].tolist(),
                    r * bm, bm, bn, causal)
                nb, nc = int(count[b, h, r]), int(col_count[b, h, r])
                assert offsets[b, h, r, :nb].tolist() == want_b, (args, b, h, r)
                assert cols[b, h, r, :nc].tolist() == want_c, (args, b, h, r)
                assert not offsets[b, h, r, nb:].any() and not cols[b, h, r, nc:].any()


@pytest.mark.parametrize("seed", range(2))
def test_row_parallel_walk_matches_the_transcription(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(25):
        _check(_inputs(rng))


def test_edges() -> None:
    one = torch.tensor([1], dtype=torch.int32)
    # A block past every slash (no slash kept), a slash exactly on the block's edge, a single
    # vertical and slash, a row with q = 0.
    for causal in (True, False):
        _check((torch.tensor([64], dtype=torch.int32), torch.tensor([64], dtype=torch.int32),
                torch.tensor([[[0, 5, 63]]], dtype=torch.int32),
                torch.tensor([[[63, 40]]], dtype=torch.int32), 64, 16, 16, causal))
        _check((torch.tensor([32], dtype=torch.int32), torch.tensor([48], dtype=torch.int32),
                torch.tensor([[[7]]], dtype=torch.int32), torch.tensor([[[48 - 1]]],
                                                                        dtype=torch.int32),
                48, 16, 32, causal))
        _check((torch.tensor([0, 20], dtype=torch.int32), torch.tensor([9, 20], dtype=torch.int32),
                one.view(1, 1, 1).expand(2, 1, 1).contiguous(),
                one.view(1, 1, 1).expand(2, 1, 1).contiguous() - 1, 20, 8, 8, causal))


def test_overflowing_inputs_are_refused() -> None:
    # block_size_M > block_size_N lets a run hold more blocks than there are slashes.
    args = (torch.tensor([64], dtype=torch.int32), torch.tensor([64], dtype=torch.int32),
            torch.tensor([[[0]]], dtype=torch.int32), torch.tensor([[[0]]], dtype=torch.int32),
            64, 64, 8, True)
    with pytest.raises(ValueError, match="overflow"):
        convert(*args)
