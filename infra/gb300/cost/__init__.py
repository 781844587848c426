"""What a cluster costs: the declared resources priced per hour and per month (docs/cost.md).

:func:`book` picks the prices (the shipped table, a table file of your own, or Azure's Retail Prices API live);
:func:`~gb300.cost.estimate.estimate` prices the resources; :func:`~gb300.cost.estimate.change` compares the plan
with the deployed state.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from gb300.cost import prices
from gb300.cost.estimate import Estimate, Line, change, estimate, lines
from gb300.cost.prices import LIVE, Price, PriceBook, file_book, table_book

__all__ = [
    "LIVE",
    "Estimate",
    "Line",
    "Price",
    "PriceBook",
    "book",
    "change",
    "estimate",
    "file_book",
    "lines",
]


def book(
    source: str | None,
    *,
    region: str,
    currency: str,
    reservation: str | None,
    meters: Iterable[str],
    savings_plan: str | None = None,
) -> PriceBook:
    """The prices ``source`` names: None the shipped table, ``live`` the Retail Prices API, else a table file over
    the shipped table.

    The table holds pay-as-you-go prices: with a reservation or savings plan term its VM prices are unknown (the
    term's price comes from the API, ``--prices live``); a file's prices are taken as what you pay.
    """
    if source is not None and source.strip().lower() == LIVE:
        return prices.live_book(region, currency, meters, reservation=reservation, savings_plan=savings_plan)
    found = table_book(currency) if source is None else file_book(Path(source), currency)
    term = f"{reservation} reservation" if reservation else f"{savings_plan} savings plan" if savings_plan else None
    if term is None or source is not None:
        return found
    why = f"{found.source} holds pay-as-you-go prices; a {term} is priced by --prices live"
    swapped = {
        meter: Price(None, price.per_unit, found.source, why) if meter.startswith("vm/") else price
        for meter, price in found.prices.items()
    }
    return PriceBook(found.currency, found.source, swapped)
