"""aten::_index_put_impl_ — index_put_'s implementation entry: ``self[indices] = values`` (or
``+=`` with accumulate) in place; ``unsafe`` only skips index checks (overload default)."""

from __future__ import annotations

from operators.aten._index_put import (
    PUT_CORE,
    PUT_DESCRIPTION,
    IndexPutBase,
    put_entry_points,
    put_negatives,
)
from operators.registry import register
from operators.spec import Kind

SOLUTION = PUT_CORE + r'''

def _index_put_impl_(self, indices, values, accumulate=False, unsafe=False):
    # unsafe only lets PyTorch skip its index bounds checks; indices here are always in range
    return _index_put(self, indices, values, accumulate)
'''


@register("aten::_index_put_impl_", version=1, kind=Kind.COMPUTE)
class IndexPutImpl(IndexPutBase):
    OP = "_index_put_impl_"
    UNSAFE = True
    entry_points = put_entry_points("_index_put_impl_", unsafe=True)
    description = PUT_DESCRIPTION.format(op="_index_put_impl_(self, indices, values, accumulate, "
                                            "unsafe)") + (
        " `unsafe` (always False here) only lets PyTorch skip bounds checks.")
    solution = SOLUTION
    negatives = put_negatives(SOLUTION)
