"""Usage by account: GPU-hours per Slurm account and user in a period, priced where the price is known (docs/usage.md).

The input is ``sacct --json`` (read one job at a time, :mod:`gb300.ops.sacct_stream`). A job's GPUs are its
``tres.allocated`` entry of type ``gres`` and name ``gpu`` (slurm.conf's ``AccountingStorageTRES=gres/gpu``); its
time is ``time.start`` to ``time.end`` (a job still running: to the period's end or now, whichever is earlier),
clipped to the period. GPU-hours are GPUs times those hours. A GPU-hour's price is the VM price of the partition's
GPU pool over the size's GPUs (``vm/<size>`` of the price book, after ``gb300:cost.discountPercent``): a partition
that is no pool of the stack, a size without a price, or no stack given leaves that price unknown, named and never
0. Bad records are counted by kind and the first few named; nothing here raises for what a file holds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gb300 import cost
from gb300.ops import goodput

if TYPE_CHECKING:
    from gb300.config.models import StackConfig

SHOWN = 5  # problems named per kind; the rest are counted
NAME_CHARS = 80  # an account, user or partition name longer than this is cut (a hostile file's names)


@dataclass(frozen=True)
class Pricing:
    """Price per GPU-hour by partition (None: unknown), why each unknown one is, and the book's currency."""

    currency: str
    per_gpu_hour: Mapping[str, float | None] = field(default_factory=dict)
    unknown: Mapping[str, str] = field(default_factory=dict)
    source: str = ""
    absent_because: str = "no stack given (--stack): which VM size a partition runs on is unknown"

    def price(self, partition: str) -> tuple[float | None, str | None]:
        """The partition's price per GPU-hour, or None and why."""
        if partition in self.per_gpu_hour and self.per_gpu_hour[partition] is not None:
            return self.per_gpu_hour[partition], None
        if partition in self.unknown:
            return None, self.unknown[partition]
        if not self.per_gpu_hour and not self.unknown:
            return None, self.absent_because
        return None, f"partition {partition!r} is no GPU pool of the stack"


@dataclass
class Row:
    """GPU-hours, priced cost and unpriced GPU-hours, and the jobs behind them."""

    gpu_hours: float = 0.0
    cost: float = 0.0
    unpriced: float = 0.0
    jobs: int = 0

    def add(self, hours: float, price: float | None) -> None:
        self.gpu_hours += hours
        self.jobs += 1
        if price is None:
            self.unpriced += hours
        else:
            self.cost += hours * price

    def doc(self) -> dict[str, Any]:
        """The row as JSON: the cost is None (unknown, never 0) when none of its GPU-hours has a price."""
        priced = self.gpu_hours - self.unpriced
        cost = round(self.cost, 2) if priced > 0 or self.gpu_hours == 0 else None
        return {
            "gpuHours": round(self.gpu_hours, 3),
            "cost": cost,
            "unpricedGpuHours": round(self.unpriced, 3),
            "jobs": self.jobs,
        }


@dataclass
class Usage:
    """The period, the pricing, and what the jobs add up to by account and by (account, user)."""

    period: tuple[float, float]
    pricing: Pricing
    now: float
    accounts: dict[str, Row] = field(default_factory=lambda: defaultdict(Row))
    users: dict[tuple[str, str], Row] = field(default_factory=lambda: defaultdict(Row))
    total: Row = field(default_factory=Row)
    unknown_prices: dict[str, str] = field(default_factory=dict)
    problems: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    without_gpus: int = 0

    def problem(self, kind: str, what: str) -> None:
        self.problems[kind].append(what)


def _name(value: Any, missing: str) -> str:
    return str(value)[:NAME_CHARS] if isinstance(value, str) and value else missing


def gpus_of(job: Mapping[str, Any]) -> int | None:
    """The GPUs a job was allocated (``tres.allocated``: type ``gres``, name ``gpu``); 0 for none; None when the
    record has a GPU entry that is not a whole non-negative number."""
    tres = job.get("tres")
    allocated = tres.get("allocated") if isinstance(tres, Mapping) else None
    for entry in allocated if isinstance(allocated, list) else []:
        if isinstance(entry, Mapping) and entry.get("type") == "gres" and entry.get("name") == "gpu":
            count = entry.get("count")
            ok = isinstance(count, int) and not isinstance(count, bool) and 0 <= count <= 1_000_000
            return count if ok else None
    return 0


def add_job(usage: Usage, job: Mapping[str, Any]) -> None:
    """One sacct job record: its GPU-hours in the period go to its account and user (problems counted, named)."""
    job_id = str(job.get("job_id", "?"))[:40]
    times = goodput.job_times(job, min(usage.period[1], usage.now))
    if isinstance(times, str):
        raw = job.get("time")
        start = raw.get("start") if isinstance(raw, Mapping) else None
        if "before" in times:
            usage.problem("negativeDuration", f"job {job_id}: {times}")
        elif start != 0 or isinstance(start, bool):  # start 0: it never ran (pending, cancelled first): no use
            usage.problem("unreadableJob", f"job {job_id}: {times}")
        return
    gpus = gpus_of(job)
    if gpus is None:
        usage.problem("unreadableJob", f"job {job_id}: its gres/gpu count is not a whole number of GPUs")
        return
    low, high = max(times[0], usage.period[0]), min(times[1], usage.period[1])
    if high <= low:
        return  # outside the period
    if gpus == 0:
        usage.without_gpus += 1
        return
    hours = gpus * (high - low) / 3600
    account, user = _name(job.get("account"), "(no account)"), _name(job.get("user"), "(no user)")
    partition = _name(job.get("partition"), "(no partition)")
    price, why = usage.pricing.price(partition)
    if why is not None:
        usage.unknown_prices.setdefault(partition, why)
    for row in (usage.accounts[account], usage.users[(account, user)], usage.total):
        row.add(hours, price)


def summary(usage: Usage, read_problems: Iterable[str], jobs_read: int) -> dict[str, Any]:
    """The report as JSON: totals, each account with its users (most GPU-hours first), unknown prices, problems."""
    for what in read_problems:
        usage.problem("badSacct", what)
    accounts = []
    for account, row in sorted(usage.accounts.items(), key=lambda kv: (-kv[1].gpu_hours, kv[0])):
        users = [
            {"user": user, **urow.doc()}
            for (acct, user), urow in sorted(usage.users.items(), key=lambda kv: (-kv[1].gpu_hours, kv[0]))
            if acct == account
        ]
        accounts.append({"account": account, **row.doc(), "users": users})
    return {
        "period": {
            "since": usage.period[0],
            "until": usage.period[1],
            "hours": (usage.period[1] - usage.period[0]) / 3600,
        },
        "currency": usage.pricing.currency,
        "prices": usage.pricing.source or None,
        "jobsRead": jobs_read,
        "jobsWithoutGpus": usage.without_gpus,
        "total": usage.total.doc(),
        "accounts": accounts,
        "unknownPrices": [f"partition {p}: {why}" for p, why in sorted(usage.unknown_prices.items())],
        "problems": {
            kind: {"count": len(found), "first": found[:SHOWN]} for kind, found in sorted(usage.problems.items())
        },
    }


def _money(row: Mapping[str, Any], currency: str) -> str:
    if row["cost"] is None:
        return "price unknown"
    text = f"{row['cost']:,.2f} {currency}"
    return text + (f" (+{row['unpricedGpuHours']:,.3f} GPU-hours unpriced)" if row["unpricedGpuHours"] else "")


def text(doc: Mapping[str, Any], since: str, until: str) -> list[str]:
    """The report a person reads: the total, then each account and its users, then unknown prices and problems."""
    total, currency = doc["total"], doc["currency"]
    lines = [
        f"usage {since} to {until}: {total['gpuHours']:,.3f} GPU-hours in {total['jobs']:,} jobs, "
        f"{_money(total, currency)}"
    ]
    for row in doc["accounts"]:
        lines.append(f"  account {row['account']}: {row['gpuHours']:,.3f} GPU-hours, {_money(row, currency)}")
        for user in row["users"]:
            lines.append(
                f"    user {user['user']}: {user['gpuHours']:,.3f} GPU-hours in {user['jobs']:,} jobs, "
                f"{_money(user, currency)}"
            )
    if doc["jobsWithoutGpus"]:
        lines.append(f"  {doc['jobsWithoutGpus']:,} jobs in the period used no GPU (not counted)")
    lines += [f"  price unknown: {why}" for why in doc["unknownPrices"]]
    for kind, found in doc["problems"].items():
        lines.append(f"  problem {kind} x{found['count']:,}: " + "; ".join(found["first"][:2]))
    return lines


def stack_pricing(cfg: StackConfig, source: str | None) -> Pricing:
    """Each GPU pool's price per GPU-hour (its partition is the pool's name): ``vm/<size>`` of the book ``source``
    names (None: the shipped table; a file; ``live``) over the size's GPUs, after the stack's discount."""
    pools = cfg.gpu_pools
    book = cost.book(
        source,
        region=cfg.cluster.location,
        currency=cfg.cost.currency,
        reservation=cfg.cost.reservation,
        savings_plan=cfg.cost.savings_plan,
        meters=sorted({f"vm/{pool.vm_size}" for pool in pools}),
    )
    per_gpu: dict[str, float | None] = {}
    unknown: dict[str, str] = {}
    for pool in pools:
        price, gpus = book.get(f"vm/{pool.vm_size}"), pool.sku.gpus
        if price.hourly is None or gpus <= 0:
            unknown[pool.name] = f"vm/{pool.vm_size}: {price.unknown_because or 'no GPUs'}"
            continue
        per_gpu[pool.name] = price.hourly * (1 - cfg.cost.discount_percent / 100) / gpus
    return Pricing(book.currency, per_gpu, unknown, source=book.source)
