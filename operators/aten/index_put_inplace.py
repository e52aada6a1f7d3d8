"""aten::index_put_ — ``self[indices] = values`` (or ``+=`` with accumulate) in place, with
optional integer index tensors or a bool mask (overload default)."""

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

def index_put_(self, indices, values, accumulate=False):
    return _index_put(self, indices, values, accumulate)
'''


@register("aten::index_put_", version=1, kind=Kind.COMPUTE)
class IndexPut(IndexPutBase):
    OP = "index_put_"
    UNSAFE = False
    entry_points = put_entry_points("index_put_", unsafe=False)
    description = PUT_DESCRIPTION.format(op="index_put_(self, indices, values, accumulate)")
    solution = SOLUTION
    negatives = put_negatives(SOLUTION)
