"""``gb300:policy``, ``gb300:allowDestroy`` and ``gb300:cost``: what fails the plan, the deletions a stack consents
to, and how the plan prices the cluster."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field

from gb300 import tags as gb300_tags
from gb300.config.base import ConfigModel
from gb300.config.checks import check_reason, check_ssh_limit, suppression_from_text
from gb300.config.fields import TagKey
from gb300.config.text import text_limit
from gb300.facts import catalog

RuleId = Annotated[str, Field(max_length=64, pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")]


class Suppression(ConfigModel):
    """One entry of ``gb300:policy.suppress``: a rule id, and why the stack does not want its findings.

    A plain string is a rule id without a reason, enough for rules that are not about security; a security
    rule (``gb300.rules.SECURITY_RULES``) needs ``{rule: ..., reason: ...}``. Every suppression, with its
    reason and the findings it hides, is printed by every ``gb300 plan`` and in the pull request summary.
    """

    rule: RuleId
    """The rule not to run."""
    reason: Annotated[str, Field(max_length=300), AfterValidator(check_reason)] | None = None
    """Why, on one line of 10-300 characters without control or format characters (CR, ESC, U+2028, bidi
    overrides: the plan prints it); required for the security rules `no-ssh-from-internet`, `no-public-ip-on-nodes`,
    `storage-no-public-access`, `lustre-root-squash` (a bare id is refused, exit 2).
    """


class PolicySettings(ConfigModel):
    """``gb300:policy``: which findings fail the plan, which rules are suppressed, and what the rules check against.

    ``requiredTags``: tag keys every taggable Azure resource must carry (rule ``required-tags``).
    ``quota``: where ``quota-sufficient`` reads Azure's usage: ``live`` or a saved ``az vm list-usage`` JSON file;
    ``gb300 plan --quota`` overrides it, unset means quota is not checked (an info finding says so).
    ``sshSourceLimitPrefix``: the public SSH sources of one NSG, united, may cover at most one block of this
    prefix length (rule ``no-ssh-from-internet``; default in ``data/skus.yaml`` ``limits``).
    """

    fail_on: Literal["error", "warning", "info"] = "error"
    """The lowest level that makes `gb300 plan` exit 1."""
    suppress: list[Annotated[Suppression, BeforeValidator(suppression_from_text)]] = Field(default_factory=list)
    """Rules not to run, each a rule id or `{rule, reason}`; every plan, `--quiet` included, and the PR summary list
    each one with its reason and the findings it hides.
    """
    required_tags: list[TagKey] = Field(default_factory=lambda: ["owner", gb300_tags.CLUSTER])
    """Tag keys every taggable Azure resource must carry (rule `required-tags`, a warning)."""
    quota: Annotated[str, Field(min_length=1, max_length=text_limit("filePath"))] | None = None
    """Where `quota-sufficient` reads Azure's usage: `live`, or the path of a saved `az vm list-usage` file (`gb300 plan
    --quota` overrides); unset: quota is not checked, an info says so (docs/rules.md#quota).
    """
    ssh_source_limit_prefix: Annotated[
        int,
        # The schema states the floor check_ssh_limit holds (the default), which explains itself when refused.
        Field(
            ge=1, le=32, strict=True, json_schema_extra={"minimum": int(catalog.load().limit("sshSourceLimitPrefix"))}
        ),
        AfterValidator(check_ssh_limit),
    ] = Field(default_factory=lambda: int(catalog.load().limit("sshSourceLimitPrefix")))
    """The public SSH sources of one NSG, united, may cover at most one block of this prefix length (rule
    `no-ssh-from-internet`). It only tightens: the default (`data/platform.yaml` `sshSourceLimitPrefix`) is also the
    loosest value accepted, so the key cannot switch the rule off; wider sources need a suppression of
    `no-ssh-from-internet` with a reason, which every plan shows.
    """

    @property
    def suppressed(self) -> frozenset[str]:
        """The ids of the suppressed rules."""
        return frozenset(s.rule for s in self.suppress)


class AllowDestroy(ConfigModel):
    """One entry of ``gb300:allowDestroy``: consent to one expected deletion or replacement (docs/day2.md)."""

    resource: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._*?\[\]-]+$")]
    """The Pulumi or Azure name of the resource (`ref-train-r0005`), or a glob (`ref-train-r*`)."""
    reason: Annotated[str, Field(min_length=1, max_length=500)]
    """Why; shown in the plan's warning."""


class CostSettings(ConfigModel):
    """``gb300:cost``: how `gb300 plan` prices the cluster (docs/cost.md)."""

    currency: Annotated[str, Field(pattern=r"^[A-Z]{3}$", max_length=3)] = "USD"
    """ISO 4217 currency of the prices. The shipped table is in USD; another currency needs `--prices live` (the Retail
    Prices API's `currencyCode`) or a `--prices FILE` in that currency, else every price is listed as unknown.
    """
    discount_percent: Annotated[float, Field(ge=0, lt=100, allow_inf_nan=False)] = 0
    """Percent off every known price (an enterprise agreement, a savings plan's effective rate); 0 = list prices. Never
    assumed: set it to what your agreement gives.
    """
    reservation_term: Literal["none", "1 Year", "3 Years"] = "none"
    """Price the VMs at a reservation of this term. Only `--prices live` knows reservation prices (the Retail Prices
    API's `Reservation` items, whose price is for the whole term); with the shipped table the VMs are then unknown.
    """

    savings_plan_term: Literal["none", "1 Year", "3 Years"] = "none"
    """Price the VMs at a compute savings plan of this term: the `savingsPlan` price the Retail Prices API gives with
    each pay-as-you-go VM item (its preview API version). Only `--prices live` knows them; with the shipped table the
    VMs are then unknown. `reservationTerm`, when also set, wins for the VMs.
    """

    @property
    def reservation(self) -> str | None:
        """The reservation term, or None for pay-as-you-go."""
        return None if self.reservation_term == "none" else self.reservation_term

    @property
    def savings_plan(self) -> str | None:
        """The savings plan term, or None."""
        return None if self.savings_plan_term == "none" else self.savings_plan_term
