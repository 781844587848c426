"""What every rule shares: the context it reads, the :class:`Rule` type with its :class:`Kind`, and small
readers for resource inputs.

A rule is a pure check function wrapped by one of :func:`resource_rule`, :func:`config_rule`,
:func:`live_config_rule`, :func:`sku_config_rule` or :func:`state_rule`, which is the one place its id is
written: the check yields :class:`~gb300.findings.Report` values and the rule names each with its id. A resource
rule reads the camelCase inputs of the resources (the plan's records and the policy pack's resources look alike);
no rule calls the cloud or raises: a missing or odd property means "cannot know", and the rule says nothing about
it. Azure's answers reach a rule only through :class:`RuleContext` (``quota`` with its Resource SKUs, ``images``),
fetched before the rules run.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, ParamSpec

from gb300.azure.inventory import mapping
from gb300.config import PolicySettings
from gb300.findings import Finding, Level, Report
from gb300.resources import DeployedResource, Resource

if TYPE_CHECKING:
    from gb300.azure.images_live import ImageAnswers
    from gb300.azure.quota import QuotaSnapshot
    from gb300.config import StackConfig

AZURE_NATIVE = "azure-native:"
# Source prefixes that mean "anyone on the Internet" in an NSG rule (compared case-insensitively).
# S104 flags "0.0.0.0" as a bind address; here it is a value to match, not an address to bind.
OPEN_SOURCES = frozenset({"*", "internet", "any", "0.0.0.0/0", "0.0.0.0", "::/0"})  # noqa: S104


@dataclass(frozen=True)
class StackIdentity:
    """What must differ between two stacks of one project: the cluster name and the payload signing key
    (``stack-identity``, :mod:`gb300.rules.identity`)."""

    stack: str
    cluster_name: str | None
    signing_public_key: str | None


@dataclass(frozen=True)
class RuleContext:
    """What a rule may read besides the resources: the policy settings, for quota Azure's usage, the typed stack
    config (config rules; None where it cannot be read), the deployed state (state rules; None without one),
    Azure's answers about the images the stack boots (None unless the plan went live), and the stack's name and
    the identities of the project's other stacks (``stack-identity``; None and empty where unknown)."""

    policy: PolicySettings = field(default_factory=PolicySettings)
    quota: QuotaSnapshot | None = None
    config: StackConfig | None = None
    deployed: Sequence[DeployedResource] | None = None
    images: ImageAnswers | None = None
    stack: str | None = None
    siblings: tuple[StackIdentity, ...] = ()


class Kind(enum.Enum):
    """What a rule reads, and so which front end can run it."""

    RESOURCE = "resource"
    """The resources the program registers: ``gb300 plan`` and the policy pack."""
    CONFIG = "config"
    """The typed stack config (software pins, images): ``gb300 plan`` and the policy pack."""
    STATE = "state"
    """The planned resources against the deployed state: ``gb300 plan --state`` only. Not suppressible: each
    takes its consent from its own key (``gb300:storage.allowReplace``, ``gb300:allowDestroy``)."""


P = ParamSpec("P")
Adapter = Callable[[Sequence[Resource], RuleContext], Iterable[Report]]


class Rule(Generic[P]):
    """A check with its id and kind. Calling the rule calls the check and names its reports with the id."""

    def __init__(
        self, rule_id: str, kind: Kind, check: Callable[P, Iterable[Report]], adapt: Adapter, *, security: bool
    ) -> None:
        self.id = rule_id
        self.kind = kind
        self.check = check
        self.security = security
        self._adapt = adapt
        self.__doc__ = check.__doc__
        self.__name__ = getattr(check, "__name__", rule_id)

    def __repr__(self) -> str:
        return f"Rule({self.id!r}, {self.kind.value})"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> list[Finding]:
        return self.named(self.check(*args, **kwargs))

    @property
    def summary(self) -> str:
        """The first line of the check's docstring: the policy's description and the rule's one-line summary."""
        return (self.check.__doc__ or self.id).strip().splitlines()[0]

    @property
    def suppressible(self) -> bool:
        return self.kind is not Kind.STATE

    def named(self, reports: Iterable[Report]) -> list[Finding]:
        """``reports`` of this rule as findings carrying its id."""
        return [r.named(self.id) for r in reports]

    def applies(self, ctx: RuleContext) -> bool:
        """Whether ``ctx`` holds what the rule reads (a config rule needs the config, a state rule the state)."""
        if self.kind is Kind.CONFIG:
            return ctx.config is not None
        if self.kind is Kind.STATE:
            return ctx.config is not None and ctx.deployed is not None
        return True

    def evaluate(self, resources: Sequence[Resource], ctx: RuleContext) -> list[Finding]:
        """The rule's findings; a rule that breaks on input nobody foresaw yields a WARNING, never a traceback."""
        if not self.applies(ctx):
            return []
        try:
            return self.named(self._adapt(resources, ctx))
        except Exception as exc:  # noqa: BLE001 - a rule bug must not hide every other finding
            return [
                Finding(
                    self.id,
                    Level.WARNING,
                    "gb300:policy",
                    f"rule {self.id} could not finish ({type(exc).__name__}: {exc}); its check was skipped. "
                    "Please report this with the plan JSON (gb300 plan --json).",
                )
            ]


ResourceCheck = Callable[[Sequence[Resource], RuleContext], Iterable[Report]]
ConfigCheck = Callable[["StackConfig"], Iterable[Report]]
LiveConfigCheck = Callable[["StackConfig", "ImageAnswers | None"], Iterable[Report]]
SkuConfigCheck = Callable[["StackConfig", "QuotaSnapshot | None"], Iterable[Report]]


def resource_rule(
    rule_id: str, *, security: bool = False
) -> Callable[[ResourceCheck], Rule[[Sequence[Resource], RuleContext]]]:
    """Declare a resource rule: ``check(resources, ctx)``. ``security``: suppressing it needs a reason."""

    def wrap(check: ResourceCheck) -> Rule[[Sequence[Resource], RuleContext]]:
        return Rule(rule_id, Kind.RESOURCE, check, check, security=security)

    return wrap


def config_rule(rule_id: str) -> Callable[[ConfigCheck], Rule[[StackConfig]]]:
    """Declare a config rule: ``check(cfg)`` over the typed stack config."""

    def wrap(check: ConfigCheck) -> Rule[[StackConfig]]:
        def adapt(resources: Sequence[Resource], ctx: RuleContext) -> Iterable[Report]:
            del resources
            assert ctx.config is not None  # noqa: S101 - Rule.applies checked it
            return check(ctx.config)

        return Rule(rule_id, Kind.CONFIG, check, adapt, security=False)

    return wrap


def live_config_rule(rule_id: str) -> Callable[[LiveConfigCheck], Rule[[StackConfig, ImageAnswers | None]]]:
    """Declare a config rule that also reads Azure's answers when the plan goes live: ``check(cfg, answers)``,
    ``answers`` None offline (the policy pack, a plan without ``--quota live``)."""

    def wrap(check: LiveConfigCheck) -> Rule[[StackConfig, ImageAnswers | None]]:
        def adapt(resources: Sequence[Resource], ctx: RuleContext) -> Iterable[Report]:
            del resources
            assert ctx.config is not None  # noqa: S101 - Rule.applies checked it
            return check(ctx.config, ctx.images)

        return Rule(rule_id, Kind.CONFIG, check, adapt, security=False)

    return wrap


def sku_config_rule(rule_id: str) -> Callable[[SkuConfigCheck], Rule[[StackConfig, QuotaSnapshot | None]]]:
    """Declare a config rule that also reads Azure's Resource SKUs when the plan goes live: ``check(cfg, quota)``,
    ``quota`` the snapshot of ``--quota`` (None without one; a saved usage file carries no SKUs)."""

    def wrap(check: SkuConfigCheck) -> Rule[[StackConfig, QuotaSnapshot | None]]:
        def adapt(resources: Sequence[Resource], ctx: RuleContext) -> Iterable[Report]:
            del resources
            assert ctx.config is not None  # noqa: S101 - Rule.applies checked it
            return check(ctx.config, ctx.quota)

        return Rule(rule_id, Kind.CONFIG, check, adapt, security=False)

    return wrap


def state_rule(
    rule_id: str, args: Callable[[Sequence[Resource], RuleContext], tuple[Any, ...]]
) -> Callable[[Callable[P, Iterable[Report]]], Rule[P]]:
    """Declare a state rule; ``args(resources, ctx)`` are the check's arguments (the deployed state, the consent)."""

    def wrap(check: Callable[P, Iterable[Report]]) -> Rule[P]:
        def adapt(resources: Sequence[Resource], ctx: RuleContext) -> Iterable[Report]:
            call: Callable[..., Iterable[Report]] = check
            return call(*args(resources, ctx))

        return Rule(rule_id, Kind.STATE, check, adapt, security=False)

    return wrap


def text(value: Any) -> str | None:
    """``value`` when it is a string, else None."""
    return value if isinstance(value, str) else None


def network(value: Any) -> ipaddress.IPv4Network | None:
    """An IPv4 CIDR string as a network, or None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        return ipaddress.IPv4Network(value, strict=False)
    except ValueError:
        return None


def tags_of(resource: Resource) -> Mapping[str, Any]:
    return mapping(resource.inputs.get("tags"))


def short(resource: Resource) -> str:
    """A resource's name as users read it in messages: its Azure name, else its Pulumi name."""
    inputs = resource.inputs
    for key in ("resourceName", "name"):
        value = inputs.get(key)
        if isinstance(value, str) and value:
            return value
    return resource.name


def count(n: int, noun: str) -> str:
    """``count(3, 'VM')`` -> ``'3 VMs'``, with thousands separators."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def is_azure(resource: Resource) -> bool:
    return resource.type.startswith(AZURE_NATIVE)
