"""The tolerances replay judges a dumped output by, per output dtype, in one place.

An element of a dumped output `d` agrees with its float64 reference `r` when

    |d - r| <= rtol * |r| + atol * m + floor

per element, where `m` is the magnitude of the terms that made that element (for a
sum such as a matmul element or an add, the sum of the terms' magnitudes; where
nothing cancels, |r|): what the element's own computation can lose in the dtype.
`rtol` is about two units in the last place of the dtype (the op rounds its result
once into the dtype, and its kernel may accumulate in a wider type); `atol` covers
the rounding of the terms of a sum whose terms cancel. `floor` is the dtype's
smallest normal number: a kernel may flush smaller results to zero. Nothing scales
by the tensor's largest element, so one large element hides no other.
Integer and bool outputs must match exactly. The finite range is the dtype's: a
reference beyond it is an overflow, not an error.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float  # times the element's terms' magnitude
    floor: float  # the dtype's smallest normal number
    max_finite: float  # largest finite value of the dtype (0: integer, no range check)

    def describe(self, dtype: str) -> str:
        if not self.max_finite:
            return f"{dtype}: exact"
        return (f"{dtype}: |d-r| <= {self.rtol:g}*|r| + {self.atol:g}*m + {self.floor:g} per "
                "element, m the magnitude of its terms")


FLOAT_TOLERANCES: dict[str, Tolerance] = {
    "float": Tolerance(1e-4, 1e-5, 1.1754943508222875e-38, 3.4028234663852886e38),
    "float16": Tolerance(2e-3, 1e-3, 6.103515625e-05, 65504.0),
    "bf16": Tolerance(1.6e-2, 8e-3, 1.1754943508222875e-38, 3.3895313892515355e38),
    "double": Tolerance(1e-10, 1e-12, 2.2250738585072014e-308, 1.7976931348623157e308),
}
EXACT = Tolerance(0.0, 0.0, 0.0, 0.0)


def tolerance_for(dtype: str) -> Tolerance:
    return FLOAT_TOLERANCES.get(dtype, EXACT)
