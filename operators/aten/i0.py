"""aten::i0 — the modified Bessel function of the first kind of order zero (overloads default,
out)."""

from __future__ import annotations

import torch

from operators.aten._unary import (
    FLOATS,
    NAN,
    PLAIN_WRAPPERS,
    Unary,
    denormals,
    describe,
    ignores_strides,
    log_uniform,
    pick,
    solution,
)
from operators.registry import register
from operators.spec import Call, Case, EntryPoint, Kind, Negative, Tolerance

# Cephes' Chebyshev coefficients (as in PyTorch's Math.h): exp(-x) I0(x) on [0, 8] and
# exp(-x) sqrt(x) I0(x) on [8, inf) in the variable 32/x - 2.
_A = (
    -4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16,
    1.71539128555513303061E-15, -1.16853328779934516808E-14, 7.67618549860493561688E-14,
    -4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11,
    9.67580903537323691224E-11, -5.18979560163526290666E-10, 2.65982372468238665035E-9,
    -1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7,
    1.11738753912010371815E-6, -4.41673835845875056359E-6, 1.64484480707288970893E-5,
    -5.75419501008210370398E-5, 1.88502885095841655729E-4, -5.76375574538582365885E-4,
    1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2,
    -2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2,
    1.71620901522208775349E-1, -3.04682672343198398683E-1, 6.76795274409476084995E-1,
)
_B = (
    -7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
    3.46122286769746109310E-17, -2.82762398051658348494E-16, -3.42548561967721913462E-16,
    1.77256013305652638360E-15, 3.81168066935262242075E-15, -9.55484669882830764870E-15,
    -4.15056934728722208663E-14, 1.54008621752140982691E-14, 3.85277838274214270114E-13,
    7.18012445138366623367E-13, -1.79417853150680611778E-12, -1.32158118404477131188E-11,
    -3.14991652796324136454E-11, 1.18891471078464383424E-11, 4.94060238822496958910E-10,
    3.39623202570838634515E-9, 2.26666899049817806459E-8, 2.04891858946906374183E-7,
    2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3,
    8.04490411014108831608E-1,
)


def _clenshaw(name: str, coeffs: tuple[float, ...]) -> str:
    """A @triton.jit Chebyshev series (Cephes' chbevl), unrolled."""
    lines = ["@triton.jit", f"def {name}(y):", f"    b0 = y * 0.0 + {coeffs[0]!r}",
             "    b1 = y * 0.0", "    b2 = y * 0.0"]
    for c in coeffs[1:]:
        lines += ["    b2 = b1", "    b1 = b0", f"    b0 = y * b1 - b2 + {c!r}"]
    lines.append("    return 0.5 * (b0 - b2)")
    return "\n".join(lines) + "\n"


OP = _clenshaw("_cheb_a", _A) + "\n\n" + _clenshaw("_cheb_b", _B) + r'''

@triton.jit
def _op(x, p0, p1):
    a = tl.abs(x)  # I0 is even
    small = _cheb_a(a * 0.5 - 2.0)
    large = _cheb_b(32.0 / a - 2.0) / libdevice.sqrt(a)
    return libdevice.exp(a) * tl.where(a <= 8.0, small, large)
'''

SOLUTION = solution(OP, PLAIN_WRAPPERS, name="i0", libdevice=True)

# Uses the [0, 8] expansion everywhere: right for |x| <= 8, diverging beyond.
NEGATIVE_SMALL_ONLY = SOLUTION.replace(
    "    return libdevice.exp(a) * tl.where(a <= 8.0, small, large)",
    "    return libdevice.exp(a) * small")


@register("aten::i0", version=1, kind=Kind.COMPUTE)
class I0(Unary):
    op = "i0"
    float_dtypes = (*FLOATS, "float64")
    entry_points = (
        EntryPoint("i0", "i0(self: Tensor) -> Tensor",
                   "The modified Bessel function of the first kind of order 0, elementwise."),
        EntryPoint("i0_out", "i0_out(self: Tensor, *, out: Tensor) -> Tensor",
                   "Writes i0(self) into out (same shape and dtype) and returns out."),
    )
    description = describe(
        "The zeroth-order modified Bessel function of the first kind, `out = I0(x) = "
        "sum_k (x/2)^(2k) / (k!)^2`, following PyTorch's `torch.i0` / `torch.special.i0`. I0 "
        "is even, I0(0) = 1 and it grows like e^|x| / sqrt(2 pi |x|): results overflow to inf "
        "past |x| ~ 12.7 in float16, ~92 in float32/bfloat16 and ~714 in float64 (tested "
        "inputs avoid the band just below those limits where e^|x| alone overflows, and ±inf, "
        "for which PyTorch returns NaN). Arguments well beyond 8 occur, where the power "
        "series converges slowly: use e.g. Chebyshev expansions of e^-x I0(x) on [0, 8] and "
        "of e^-x sqrt(x) I0(x) on [8, inf) (as Cephes and PyTorch do). NaN stays NaN.",
        (*FLOATS, "float64"))
    solution = SOLUTION
    negatives = (
        Negative("small_argument_expansion_only", "applies the [0, 8] Chebyshev expansion to "
                 "every |x|, wrong beyond 8", NEGATIVE_SMALL_ONLY),
        Negative("ignores_input_strides", "indexes a sliced input as if contiguous",
                 ignores_strides(SOLUTION)),
    )
    # Relative to |I0(x)| + |x I1(x)| (= |f| + |x f'|, ~ (1 + |x|) I0 for large x, absorbing
    # exp's argument error). float32: the 30-term Clenshaw recurrence, exp and sqrt: <= 7.3 u
    # measured over 2e5 points (PyTorch's CPU kernel <= 6.4 u), and CUDA's expf may add 2 ulp
    # (4 u): 16. float64: <= 8 u measured against the float64 reference (the same Cephes
    # series), plus CUDA's exp (1 ulp): 16. Halves: the final rounding (1 u) and a float32
    # evaluation far below it.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 16),
        "float64": Tolerance.ulps("float64", 16),
    }
    flops_per_element = 120.0
    heavy = True

    def sample(self, n: int, c: Case, gen: torch.Generator) -> torch.Tensor:
        moderate = pick(n, gen, torch.randn(n, generator=gen, dtype=torch.float64) * 2,
                        torch.rand(n, generator=gen, dtype=torch.float64) * 16 - 8)
        if not c.get("edge"):
            return moderate  # |x| <= 8 (nearly all): the common Kaiser-window range
        # Up to just below where e^|x| overflows the compute dtype (float64: 709.8,
        # float32: 88.7), or past I0's own overflow in float16.
        top = {"float16": 15.0, "float64": 700.0}.get(c.dtype, 88.0)
        sign = torch.randint(0, 2, (n,), generator=gen).double() * 2 - 1
        return pick(n, gen, moderate, sign * log_uniform(n, gen, 1e-4, top))

    def edges(self, dtype: torch.dtype, c: Case) -> list[float]:
        big = 1000.0 if dtype == torch.float64 else 100.0  # past I0's overflow: inf
        return [NAN, 0.0, -0.0, 8.0, -8.0, big, -big, *denormals(dtype)]

    def ref64(self, x: torch.Tensor, call: Call) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.special.i0(x)
        return y, y.abs() + (x * torch.special.i1(x)).abs()
