"""token_count reads every kind of number a provider's client may pass through, never raising."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest

from subagents import Budget
from subagents._metering import token_count
from subagents._metering import MAX_REPORTED_TOKENS


@pytest.mark.parametrize("value, expected", [
    (Fraction(10**400), MAX_REPORTED_TOKENS),  # did not fit a float: OverflowError
    (Fraction(-(10**400)), 0),
    (Fraction(7, 2), 3),
    (Decimal("5000"), 5000),  # not a numbers.Real: it was taken for no tokens
    (Decimal("1e400"), MAX_REPORTED_TOKENS),
    (Decimal("NaN"), 0),
    (Decimal("sNaN"), 0),  # comparing it raises InvalidOperation
    (Decimal("Infinity"), 0),
    ("9" * 21, MAX_REPORTED_TOKENS),  # an integer-valued string is clamped, not taken for 0
    ("9" * 5000, MAX_REPORTED_TOKENS),  # past int()'s digit limit
    ("0" * 30 + "5", 5),
])
def test_token_count_clamps_every_number(value, expected) -> None:
    assert token_count(value) == expected


def test_a_huge_fraction_spends_the_budget_instead_of_raising() -> None:
    budget = Budget(max_tokens=10)
    budget.charge("m", Fraction(10**400), Decimal("3"))
    assert budget.tokens == MAX_REPORTED_TOKENS + 3 and budget.exhausted()
