"""KV-cache layouts and fp8 cache rules shared by vLLM's cache and paged-attention problems.

Semantics of vLLM 0.13.0 (``csrc/cache_kernels.cu``, ``csrc/attention/attention_kernels.cuh``,
``csrc/quantization/w8a8/fp8/nvidia/quant_utils.cuh``):

- A *slot* ``s`` is position ``s % block_size`` of block ``s // block_size``; slot ``-1`` marks a
  padding token that is skipped.
- Paged caches: key ``[num_blocks, num_kv_heads, head_size // x, block_size, x]`` with
  ``x = 16 // element size`` of the cache dtype, value ``[num_blocks, num_kv_heads, head_size,
  block_size]``.
- ``kv_cache_dtype`` ``"auto"`` stores the input dtype; ``"fp8"`` and ``"fp8_e4m3"`` store
  e4m3: ``x / scale`` computed in float32 and rounded to nearest even with saturation to
  +-448 (``__NV_SATFINITE``); reading back is ``fp8 * scale``. vLLM allocates such caches as
  ``uint8`` and reinterprets the bytes; here they are ``torch.float8_e4m3fn`` tensors (the same
  bytes; vLLM's kernels only use the data pointer), so values are compared as numbers.
- Caches that are read hold NaN in every slot no sequence owns (unused block-table entries point
  at such blocks, and the tail of a sequence's last block is NaN), so a kernel that reads past a
  sequence fails.
"""

from __future__ import annotations

import math

import torch

from operators.spec import Case, Cost, Tolerance

KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3")
FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
# float32 arithmetic before the rounding to e4m3 (a division, or a reciprocal and a product)
# is off by a few float32 ulps: within this relative window of a rounding tie either
# neighbour is accepted, nowhere else.
FP8_TIE_WINDOW = 2.0**-21

# Hidden cases travel whole (caches included) and are checked in float64 on the agent: the
# elements of all their tensors stay under this (the cost model counts only what is touched).
HIDDEN_ELEMENTS = 16 << 20

# Copies are exact. An fp8 output's Expected.scale is its absolute bound (fp8_quantized).
EXACT = Tolerance(rtol=0.0, atol=0.0)
FP8_BOUND = Tolerance(rtol=1.0, atol=0.0)

FP8_RULE = (
    "fp8 caches (`kv_cache_dtype` \"fp8\" or \"fp8_e4m3\", e4m3 with max 448) hold "
    "`x / scale` computed in float32 and rounded to nearest even, saturated to [-448, 448]; "
    "they are `torch.float8_e4m3fn` tensors here (vLLM allocates the same bytes as uint8). Either "
    "neighbour is accepted only at a rounding tie. Reading one back is `float(fp8) * scale`."
)


def cap_tokens(tokens: int, per_token: int, copies: float) -> int:
    """``tokens`` cut so that ``tokens * per_token * copies`` elements fit HIDDEN_ELEMENTS."""
    return max(1, min(tokens, int(HIDDEN_ELEMENTS // max(1.0, per_token * copies))))


def check_kv_cache_dtype(kv_cache_dtype: str) -> None:
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise ValueError(f"unsupported kv_cache_dtype {kv_cache_dtype!r}; "
                         f"known: {', '.join(KV_CACHE_DTYPES)}")


def cache_dtype(kv_cache_dtype: str, dtype: torch.dtype) -> torch.dtype:
    """The cache's torch dtype for inputs of ``dtype``."""
    check_kv_cache_dtype(kv_cache_dtype)
    return dtype if kv_cache_dtype == "auto" else FP8


def x_of(dtype: torch.dtype) -> int:
    """Elements of the paged key cache's innermost dim: 16 bytes of the cache dtype."""
    return 16 // torch.empty((), dtype=dtype).element_size()


def itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def scale_tensor(value: float) -> torch.Tensor:
    """A 0-d float32 scale, as vLLM's attention layers hold ``_k_scale``."""
    return torch.tensor(value, dtype=torch.float32)


# ---- fp8 ----------------------------------------------------------------------------------------

def fp8_quantized(q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For exact quotients ``q`` (float64): the saturated value and each element's absolute
    bound, half the e4m3 spacing below-or-at it plus the float32 tie window. Any answer within
    the bound is the correctly rounded e4m3 value, or its neighbour at a tie."""
    c = q.clamp(-FP8_MAX, FP8_MAX)
    a = c.abs()
    # Spacing of the grid just below |c| (so an exactly representable value admits nothing else):
    # 2**(ceil(log2 |c|) - 4) for normals, 2**-9 for subnormals and zero.
    spacing = torch.exp2(torch.ceil(torch.log2(a)) - 4).clamp(min=2.0**-9)
    bound = torch.where(torch.isnan(c), torch.zeros_like(c), spacing / 2 + FP8_TIE_WINDOW * a)
    return c, bound


def fp8_quantize(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """vLLM's scaled conversion in PyTorch: float32 ``x / scale``, saturated, rounded to e4m3."""
    return (x.float() / scale.float()).clamp(-FP8_MAX, FP8_MAX).to(FP8)


def to_cache(x: torch.Tensor, kv_cache_dtype: str, scale: torch.Tensor) -> torch.Tensor:
    """What a cache write stores for ``x`` (PyTorch, any device)."""
    return x if kv_cache_dtype == "auto" else fp8_quantize(x, scale)


def cache_reference(x: torch.Tensor, kv_cache_dtype: str,
                    scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact stored value of ``x`` and its bound (zero for "auto": an exact copy)."""
    x64 = x.double()
    if kv_cache_dtype == "auto":
        return x64, torch.zeros_like(x64)
    return fp8_quantized(x64 / float(scale))


def exact_value(t: torch.Tensor) -> torch.Tensor:
    """A copy to compare exactly: float64 for floating caches, the same dtype for bytes."""
    return t.double() if t.dtype.is_floating_point else t.clone()


def random_values(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator,
                  std: float = 1.0) -> torch.Tensor:
    """Normal values rounded to ``dtype`` (e4m3 saturates; bytes are uniform). Drawn in float32:
    benchmark caches reach a gigabyte, and float64 draws would double the host's peak."""
    if not dtype.is_floating_point:
        return torch.randint(0, 256, shape, generator=gen, dtype=torch.uint8).to(dtype)
    base = torch.randn(shape, generator=gen, dtype=torch.float32)
    if std != 1.0:
        base *= std
    if dtype == FP8:
        return base.clamp_(-FP8_MAX, FP8_MAX).to(FP8)
    return base.to(dtype)


def scale_for(x: torch.Tensor, kind: str) -> torch.Tensor:
    """A cache scale: ``unit`` (1.0, vLLM's default), ``amax`` (amax / 64, as vLLM's tests
    calibrate) or ``tight`` (amax / 600: the largest values saturate)."""
    if kind == "unit" or x.numel() == 0:
        return scale_tensor(1.0)
    amax = float(x.double().abs().max())
    div = {"amax": 64.0, "tight": 600.0}[kind]
    return scale_tensor(max(amax, 1e-3) / div)


def kv_rows(tokens: int, heads: int, head_size: int, dtype: torch.dtype, gen: torch.Generator,
            layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Key and value ``[rows, heads, head_size]``: packed, slices of a fused ``[rows, 3, heads,
    head_size]`` qkv tensor (``qkv``), or with 3 rows past ``num_tokens`` (``extra``)."""
    rows = tokens + (3 if layout == "extra" else 0)
    if layout == "qkv":
        qkv = random_values((rows, 3, heads, head_size), dtype, gen)
        return qkv[:, 1], qkv[:, 2]
    return (random_values((rows, heads, head_size), dtype, gen),
            random_values((rows, heads, head_size), dtype, gen))


# ---- slots and block tables -------------------------------------------------------------------

def random_slots(gen: torch.Generator, num_tokens: int, num_slots: int,
                 padded: int = 0) -> torch.Tensor:
    """int64 ``[num_tokens]``: distinct slots drawn from the cache, ``padded`` of them -1."""
    if num_tokens > num_slots:
        raise ValueError(f"{num_tokens} tokens do not fit {num_slots} slots")
    slots = torch.randperm(num_slots, generator=gen)[:num_tokens].to(torch.int64)
    if padded:
        where = torch.randperm(num_tokens, generator=gen)[:padded]
        slots[where] = -1
    return slots


def slot_positions(slots: torch.Tensor, block_size: int
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(token index, block, position in block) of every token that is not padding."""
    keep = slots >= 0
    return (torch.nonzero(keep).flatten(), torch.div(slots[keep], block_size, rounding_mode="floor"),
            slots[keep] % block_size)


def slot_write_cost(c: Case) -> Cost:
    """Cost of writing ``c.shape = (tokens, ...)`` rows into slots: each row read once in the
    case's dtype, written once in the cache's (``c["kv"]``), the int64 slots read; fp8 caches
    divide and round every element."""
    n = math.prod(c.shape)
    src = itemsize(c.torch_dtype)
    dst = itemsize(cache_dtype(str(c["kv"]), c.torch_dtype))
    flops = 0.0 if c["kv"] == "auto" else 2.0 * n
    return Cost(flops=flops, bytes=float(n * (src + dst) + 8 * c.shape[0]), dtype=c.dtype)


def block_pairs(gen: torch.Generator, num_pairs: int, num_blocks: int) -> torch.Tensor:
    """int64 ``[num_pairs, 2]`` (src, dst) block pairs as vLLM's copy-on-write makes them: each
    source block copied to two destinations; destinations distinct and never a source (the
    pairs run in parallel)."""
    n_src = -(-num_pairs // 2)
    if n_src + num_pairs > num_blocks:
        raise ValueError(f"{num_pairs} pairs need {n_src + num_pairs} of {num_blocks} blocks")
    perm = torch.randperm(num_blocks, generator=gen)
    src = perm[:n_src].repeat_interleave(2)[:num_pairs]
    dst = perm[n_src:n_src + num_pairs]
    return torch.stack([src, dst], dim=1).to(torch.int64)


def pair_blocks_touched(num_pairs: int) -> int:
    """Blocks the pairs of :func:`block_pairs` touch: each source read once and each destination
    written once. The unique traffic, which the speed-of-light floor counts: a source's second
    read can come from the L2."""
    return -(-num_pairs // 2) + num_pairs


def blocks_needed(seq_lens: list[int], block_size: int) -> int:
    return sum(-(-n // block_size) for n in seq_lens)


def block_table(gen: torch.Generator, seq_lens: list[int], block_size: int, num_blocks: int,
                width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """int32 ``[len(seq_lens), width]`` block table and a bool ``[num_blocks, block_size]`` map of
    the slots a sequence owns. Owned blocks are distinct; entries past a sequence's blocks point
    at blocks nobody owns (whose slots the caller fills with NaN)."""
    need = blocks_needed(seq_lens, block_size)
    if need >= num_blocks:
        raise ValueError(f"{need} blocks needed, {num_blocks} in the cache (one must stay free)")
    perm = torch.randperm(num_blocks, generator=gen)
    owned, free = perm[:need], perm[need:]
    table = free[torch.randint(0, len(free), (len(seq_lens), width), generator=gen)]
    filled = torch.zeros(num_blocks, dtype=torch.int64)  # tokens in each block
    start = 0
    for b, n in enumerate(seq_lens):
        k = -(-n // block_size)
        if k > width:
            raise ValueError(f"sequence of {n} tokens needs {k} blocks, table has {width}")
        table[b, :k] = owned[start:start + k]
        filled[owned[start:start + k]] = (n - torch.arange(k) * block_size).clamp(max=block_size)
        start += k
    used = torch.arange(block_size)[None, :] < filled[:, None]
    return table.to(torch.int32), used


def split_tokens(gen: torch.Generator, tokens: int, batch: int) -> list[int]:
    """``tokens`` split into ``batch`` random non-negative lengths (empty sequences happen)."""
    if batch <= 0:
        return []
    cuts = torch.randint(0, tokens + 1, (batch - 1,), generator=gen).sort().values.tolist()
    edges = [0, *cuts, tokens]
    return [edges[i + 1] - edges[i] for i in range(batch)]


def chunk_starts(gen: torch.Generator, batch: int, block_size: int, kind: str) -> list[int]:
    """Where each sequence's gathered chunk starts in its context: ``none`` (0), ``aligned``
    (whole blocks, as chunked prefill makes them) or ``any`` position."""
    if kind == "none":
        return [0] * batch
    if kind == "aligned":
        return (torch.randint(0, 4, (batch,), generator=gen) * block_size).tolist()
    return torch.randint(0, 3 * block_size, (batch,), generator=gen).tolist()


def cu_lens(lens: list[int]) -> torch.Tensor:
    """int32 ``[len(lens) + 1]`` cumulative lengths from 0."""
    out = torch.zeros(len(lens) + 1, dtype=torch.int32)
    if lens:
        out[1:] = torch.tensor(lens, dtype=torch.int64).cumsum(0).to(torch.int32)
    return out


def poison_unused(cache: torch.Tensor, used: torch.Tensor) -> torch.Tensor:
    """``cache`` (slots in dims 0 and 1: ``[num_blocks, block_size, ...]`` or a view so laid
    out) with NaN in every slot ``used`` marks free; byte and e4m3 caches get 0x7F, e4m3's NaN."""
    if cache.dtype == FP8 or not cache.dtype.is_floating_point:
        cache.view(torch.uint8)[~used] = 0x7F
    else:
        cache[~used] = float("nan")
    return cache


# ---- Triton text shared by reference solutions --------------------------------------------------

# e4m3 rounding written with integer arithmetic: Triton's interpreter converts float32 to fp8
# without ties-to-even, saturation or subnormals, so reference solutions encode the byte
# themselves (the same code is exact on GPUs).
TRITON_FP8_ENCODE = r'''
@triton.jit
def _to_e4m3(y):
    # y: float32. Saturate to +-448, round to nearest even on the e4m3 grid, return fp8.
    y = tl.minimum(tl.maximum(y, -448.0), 448.0)
    a = tl.abs(y)
    e = (a.to(tl.int32, bitcast=True) >> 23) - 127
    e = tl.maximum(e, -6)
    quantum = ((e + 124) << 23).to(tl.float32, bitcast=True)  # 2 ** (e - 3)
    m = a / quantum  # exact: a power-of-two division
    r = tl.floor(m + 0.5)
    odd = (r.to(tl.int32) & 1) == 1
    r = tl.where(((r - m) == 0.5) & odd, r - 1.0, r)
    code = ((e + 7) << 3) + r.to(tl.int32) - 8
    code = tl.where(y < 0, code | 0x80, code)
    return code.to(tl.uint8).to(tl.float8e4nv, bitcast=True)
'''


# ---- gathers ---------------------------------------------------------------------------------

def gather_inputs(c: Case, gen: torch.Generator, dtype: torch.dtype
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """For a gather case of shape (batch, tokens) with params block_size, entry_shape, starts
    and pad: (cache ``[num_blocks, block_size, *entry]`` with NaN in every slot no sequence owns,
    block table, cu_seq_lens, seq_starts or None)."""
    batch, tokens = c.shape
    bs, entry, pad = int(c["block_size"]), tuple(c["entry_shape"]), int(c.get("pad", 0))
    lens = split_tokens(gen, tokens, batch)
    starts = chunk_starts(gen, batch, bs, str(c["starts"]))
    ctx = [s + n for s, n in zip(starts, lens, strict=True)]
    width = max([-(-n // bs) for n in ctx] + [0]) + 1
    num_blocks = blocks_needed(ctx, bs) + 2
    table, used = block_table(gen, ctx, bs, num_blocks, width)
    flat = random_values((num_blocks, bs, math.prod(entry) + pad), dtype, gen)
    cache = poison_unused(flat[..., :math.prod(entry)].view(num_blocks, bs, *entry), used)
    seq_starts = None if c["starts"] == "none" else torch.tensor(starts, dtype=torch.int32)
    return cache, table, cu_lens(lens), seq_starts


def gathered(cache: torch.Tensor, table: torch.Tensor, cu: torch.Tensor,
             seq_starts: torch.Tensor | None) -> torch.Tensor:
    """The entries of every sequence's chunk, packed in order (PyTorch, any device)."""
    lens = cu[1:] - cu[:-1]
    seq = torch.repeat_interleave(torch.arange(len(lens), device=cu.device), lens.long())
    pos = torch.arange(len(seq), device=cu.device) - cu[:-1].long()[seq]
    if seq_starts is not None:
        pos = pos + seq_starts.long()[seq]
    bs = cache.shape[1]
    blk = table.long()[seq, torch.div(pos, bs, rounding_mode="floor")]
    return cache[blk, pos % bs]
