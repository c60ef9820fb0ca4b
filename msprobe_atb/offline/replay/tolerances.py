"""The tolerances replay judges a dumped output by, per output dtype, in one place.

An element of a dumped output `d` agrees with its float64 reference `r` when

    |d - r| <= rtol * |r| + atol * max|d|

`rtol` is about two units in the last place of the dtype (the op rounds its result
once into the dtype, and its kernel may accumulate in a wider type); `atol` is the
same scaled by the output's largest finite magnitude within the dtype's range, so
sums whose terms cancel (a matmul element near zero) are judged against the size of
the terms, not of the result.
Integer and bool outputs must match exactly. The finite range is the dtype's: a
reference beyond it is an overflow, not an error.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float  # times max|reference|
    max_finite: float  # largest finite value of the dtype (0: integer, no range check)

    def describe(self, dtype: str) -> str:
        if not self.max_finite:
            return f"{dtype}: exact"
        return f"{dtype}: |d-r| <= {self.rtol:g}*|r| + {self.atol:g}*max|d|"


FLOAT_TOLERANCES: dict[str, Tolerance] = {
    "float": Tolerance(1e-4, 1e-5, 3.4028234663852886e38),
    "float16": Tolerance(2e-3, 1e-3, 65504.0),
    "bf16": Tolerance(1.6e-2, 8e-3, 3.3895313892515355e38),
    "double": Tolerance(1e-10, 1e-12, 1.7976931348623157e308),
}
EXACT = Tolerance(0.0, 0.0, 0.0)


def tolerance_for(dtype: str) -> Tolerance:
    return FLOAT_TOLERANCES.get(dtype, EXACT)
