# operator: vllm::rms_norm
# honest: column-split reduction: a 2-D grid tl.atomic_add's partial sums of squares into a torch.zeros float32 buffer, then a second kernel normalises
import torch
import triton
import triton.language as tl


@triton.jit
def _partial_ss(x_ptr, ss_ptr, n_rows, H, inner, s0, s1, BR: tl.constexpr, BC: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * BR + tl.arange(0, BR)
    c = tl.program_id(1) * BC + tl.arange(0, BC)
    rok = r < n_rows
    m = rok[:, None] & (c < H)[None, :]
    x = tl.load(x_ptr + ((r // inner) * s0 + (r % inner) * s1)[:, None] + c[None, :], mask=m,
                other=0.0).to(tl.float32)
    tl.atomic_add(ss_ptr + r, tl.sum(x * x, axis=1), mask=rok)


@triton.jit
def _normalize(x_ptr, w_ptr, ss_ptr, o_ptr, n_rows, H, inner, s0, s1, t0, t1, eps,
               BR: tl.constexpr, BC: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * BR + tl.arange(0, BR)
    c = tl.program_id(1) * BC + tl.arange(0, BC)
    rok = r < n_rows
    cok = c < H
    m = rok[:, None] & cok[None, :]
    inv = tl.math.rsqrt(tl.load(ss_ptr + r, mask=rok, other=1.0) / H + eps)
    x = tl.load(x_ptr + ((r // inner) * s0 + (r % inner) * s1)[:, None] + c[None, :], mask=m,
                other=0.0).to(tl.float32)
    w = tl.load(w_ptr + c, mask=cok, other=0.0).to(tl.float32)
    y = x * inv[:, None] * w[None, :]
    tl.store(o_ptr + ((r // inner) * t0 + (r % inner) * t1)[:, None] + c[None, :],
             y.to(o_ptr.dtype.element_ty), mask=m)


def _geom(t):
    if t.dim() == 3:
        return t.stride(0), t.stride(1), t.shape[1]
    return 0, t.stride(0), t.shape[0]


def rms_norm(out, input, weight, epsilon):
    H = input.shape[-1]
    if input.numel() == 0:
        return None
    n_rows = input.numel() // H
    s0, s1, inner = _geom(input)
    t0, t1, _ = _geom(out)
    ss = torch.zeros((n_rows,), dtype=torch.float32, device=input.device)
    BR, BC = 16, 128
    grid = (triton.cdiv(n_rows, BR), triton.cdiv(H, BC))
    _partial_ss[grid](input, ss, n_rows, H, inner, s0, s1, BR=BR, BC=BC)
    _normalize[grid](input, weight, ss, out, n_rows, H, inner, s0, s1, t0, t1, epsilon,
                     BR=BR, BC=BC)
    return None
