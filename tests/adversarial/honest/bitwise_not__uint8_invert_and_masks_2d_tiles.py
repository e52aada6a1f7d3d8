# operator: aten::bitwise_not
# honest: 2-D tiles over a (rows, cols) view of any input (function-form torch.reshape / torch.flatten of a contiguous copy), the tile mask written with Python `and` as many hand-written kernels do, `~x` on every integer width uint8 included, `x == 0` for bool, an empty-input fast path and `out.resize_` in the `_out` form
import torch
import triton
import triton.language as tl


@triton.jit
def _invert_tiles(x_ptr, y_ptr, rows, cols, IS_BOOL: tl.constexpr,
                  BR: tl.constexpr, BC: tl.constexpr):
    r = tl.program_id(0) * BR + tl.arange(0, BR)[:, None]
    c = tl.program_id(1) * BC + tl.arange(0, BC)[None, :]
    inside = (r < rows) and (c < cols)
    x = tl.load(x_ptr + r * cols + c, mask=inside)
    if IS_BOOL:
        y = x == 0
    else:
        y = ~x
    tl.store(y_ptr + r * cols + c, y, mask=inside)


def _invert(self):
    src = self.contiguous()
    out = torch.empty_like(src)
    if src.numel() == 0:
        return out
    cols = src.shape[-1] if src.dim() > 0 and src.shape[-1] > 0 else 1
    flat_in = torch.reshape(src, (-1, cols))
    flat_out = torch.reshape(out, (-1, cols))
    rows = flat_in.shape[0]
    grid = (triton.cdiv(rows, 16), triton.cdiv(cols, 64))
    _invert_tiles[grid](flat_in, flat_out, rows, cols, IS_BOOL=self.dtype == torch.bool,
                        BR=16, BC=64)
    return out


def bitwise_not(self):
    if self.dtype.is_floating_point:
        raise RuntimeError("bitwise_not is only implemented for integer and boolean tensors")
    return _invert(self)


def bitwise_not_out(self, *, out):
    result = _invert(self)
    out.resize_(self.shape)
    out.copy_(torch.flatten(result).view(self.shape) if result.dim() else result)
    return out
