"""What one benchmark child process measures: the toolkit's plan, or the Pulumi SDK floor for the same resources.

Each function runs in a fresh interpreter (see ``plan_bench.py``), starts its clocks after ``import pulumi`` (the
SDK is the common ground), and returns wall time, CPU time (all threads of the process), phases, the resource
count and a digest of what was registered. The digest proves the floor registered exactly the plan's resources.

The floors re-register every resource the plan recorded (same type, name, parent, inputs, dependencies,
protect, retain-on-delete, replace-on-changes and delete-before-replace options, and for azure-native resources
the same provider version, each after its parent and its dependencies) under the same mocks
(:class:`gb300.plan.mocks.AzureMocks` on the SDK's ``MockMonitor``), with none of the toolkit's logic: no config
parsing, no rendering, no rules, no summary. References between resources stay references: an input that holds
another resource's id (or the resource group's or VNet's name) is passed as that resource's output, as the
toolkit passes it; a dependency the inputs so wired do not carry (the toolkit's ``depends_on``, or an output the
toolkit passes and the floor passes as its plain value) is passed as ``depends_on``, so that the engine would
receive the same dependencies (the digest covers them).

* ``floor-raw``: ``pulumi.CustomResource(type, name, props, opts)`` / ``pulumi.ComponentResource``: the least the
  SDK can do per resource.
* ``floor-typed``: the typed ``pulumi_azure_native`` class of each custom resource, as the toolkit uses them (each
  typed class adds its alias list: 25 older API versions for ``resources.Resource``, more for network types).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import inspect
import json
import os
import resource
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pulumi

# Inputs whose value names another resource; the toolkit passes that resource's ``name`` output.
NAME_REFERENCES = {
    "resourceGroupName": "azure-native:resources:ResourceGroup",
    "virtualNetworkName": "azure-native:network:VirtualNetwork",
}


class Clock:
    """Wall and CPU time (all threads of this process) since construction, with named phases."""

    def __init__(self) -> None:
        self.wall0 = self._wall = time.perf_counter()
        self.cpu0 = self._cpu = time.process_time()
        self.phases: dict[str, dict[str, float]] = {}

    def mark(self, phase: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        spent = self.phases.setdefault(phase, {"wall_s": 0.0, "cpu_s": 0.0})
        spent["wall_s"] += wall - self._wall
        spent["cpu_s"] += cpu - self._cpu
        self._wall, self._cpu = wall, cpu

    def result(self) -> dict[str, Any]:
        return {
            "wall_s": time.perf_counter() - self.wall0,
            "cpu_s": time.process_time() - self.cpu0,
            "phases": self.phases,
            "loadavg_1m": os.getloadavg()[0],  # other processes' load: wall time suffers, CPU time hardly
        }


def peak_rss_mib() -> float:
    """This process's peak resident set size (``getrusage(RUSAGE_SELF).ru_maxrss``, KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# What the digest covers: everything the engine receives for a registration that the plan records.
DIGEST_KEYS = (
    "urn",
    "type",
    "name",
    "parent",
    "protect",
    "id",
    "inputs",
    "dependencies",
    "retainOnDelete",
    "replaceOnChanges",
    "deleteBeforeReplace",
    "package",  # recorded since racks are a parameterized package (absent in older plans: None)
    "provider",
    "customTimeouts",
)


ASSET_SIG = "4dabf18193072939515e22adb298388d"  # the key Pulumi marks an asset with (gb300.plan.runner.ASSET_SIG)


def _by_name(value: Any) -> Any:
    """``value`` with every file asset reduced to its file's name. A plan writes its payload files to a directory
    of its own that is gone when it exits, so the floor (another process) cannot read them; their names are the
    content's sha256 (``<sha256>.tar.gz``), which identifies them as well as the hash did."""
    if isinstance(value, dict):
        if ASSET_SIG in value and "path" in value:
            return {ASSET_SIG: value[ASSET_SIG], "name": Path(str(value["path"])).name}
        return {k: _by_name(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_by_name(v) for v in value]
    return value


def digest(records: list[dict[str, Any]]) -> str:
    """A hash of the registrations (:data:`DIGEST_KEYS`, file assets by name), order-independent."""
    keys = DIGEST_KEYS
    rows = sorted(json.dumps({k: _by_name(r.get(k)) for k in keys}, sort_keys=True) for r in records)
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()


# ---------------------------------------------------------------------------------------------------------
# The toolkit: what `gb300 plan --stack-file FILE` does, less printing.


def toolkit(stack: str, stack_file: str, plan_out: str | None) -> dict[str, Any]:
    """Load, validate, register, evaluate, summarise and render the plan of ``stack_file``."""
    clock = Clock()
    from gb300 import config, program, rules  # noqa: F401, PLC0415 - program: imports the azure-native modules
    from gb300.plan import render, runner  # noqa: PLC0415

    clock.mark("import")
    original = runner.register

    def timed_register(*args: Any, **kwargs: Any) -> Any:
        clock.mark("parse")
        out = original(*args, **kwargs)
        clock.mark("register")
        return out

    runner.register = timed_register  # type: ignore[assignment]
    raw = config.load_stack_file(Path(stack_file))
    result = runner.run_plan(stack, raw)
    clock.mark("rules+summary")
    text = render.text(result, stack_file=stack_file)
    rules.failing(result.findings, result.config.policy)
    clock.mark("render")
    out = clock.result()
    records = [r.as_json() for r in result.resources]
    out |= {
        "resources": len(records),
        "peak_rss_mib": peak_rss_mib(),
        "digest": digest(records),
        "summary_lines": len(text.splitlines()),
        "customDataBytes": result.summary.get("customDataBytes", {}),
        "gpus": result.summary.get("gpus"),
        "racks": result.summary.get("racks"),
        "findings": len(result.findings),
    }
    if plan_out:
        Path(plan_out).write_text(json.dumps({"stack": stack, "resources": records}), encoding="utf-8")
    return out


# ---------------------------------------------------------------------------------------------------------
# The SDK floor.


def provider_urn(reference: str, providers: list[str]) -> str:
    """The URN of the provider a reference (``<urn>::<id>``; both halves hold ``::``) names, among ``providers``."""
    return next(urn for urn in providers if reference.startswith(f"{urn}::"))


def registration_order(records: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The records in an order the engine could have registered them: every record after its parent and after
    every resource it depends on (so that an input naming another resource can be passed as its output)."""
    by_urn = {r["urn"]: r for r in records}
    done: set[str] = set()
    providers = [r["urn"] for r in records if r["type"].startswith("pulumi:providers:")]

    def visit(rec: dict[str, Any]) -> Iterator[dict[str, Any]]:
        pending = [(rec, False)]
        while pending:
            current, ready = pending.pop()
            urn = current["urn"]
            if urn in done:
                continue
            if ready:
                done.add(urn)
                yield current
                continue
            pending.append((current, True))
            before = [current["parent"], *current.get("dependencies", ())]
            if current.get("provider"):  # an explicit provider goes first too
                before.append(provider_urn(current["provider"], providers))
            pending.extend((by_urn[u], False) for u in reversed(before) if u in by_urn and u not in done)

    for rec in records:
        yield from visit(rec)


def _typed_class(typ: str) -> Any:
    """The SDK class of a type token: ``azure-native:network:Subnet`` -> ``pulumi_azure_native.network.Subnet``,
    ``random:index/randomBytes:RandomBytes`` -> ``pulumi_random.RandomBytes``."""
    package, module, name = typ.split(":")
    module = module.split("/")[0]
    path = f"pulumi_{package.replace('-', '_')}" + ("" if module == "index" else f".{module}")
    return getattr(importlib.import_module(path), name)


def _normal(key: str) -> str:
    return key.rstrip("_").replace("_", "").lower()


def _kwargs_for(cls: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Top-level camelCase inputs as the typed class's keyword arguments; nested values stay camelCase dicts.

    The SDK passes keys it has no translation for through unchanged, so nested dicts reach the provider as given.
    """
    skip = {"__self__", "resource_name", "opts", "__props__"}  # `resource_name` is the Pulumi name, not an input
    params = {_normal(p): p for p in inspect.signature(cls._internal_init).parameters if p not in skip}
    kwargs: dict[str, Any] = {}
    for key, value in inputs.items():
        param = params.get(_normal(key))
        if param is None:
            raise KeyError(f"{cls.__name__} has no input {key!r}")
        kwargs[param] = value
    return kwargs


class FloorProgram:
    """A Pulumi program that re-registers recorded resources, wiring references as outputs."""

    def __init__(self, records: list[dict[str, Any]], classes: dict[str, Any] | None) -> None:
        self.records = records
        self.providers = [r["urn"] for r in records if r["type"].startswith("pulumi:providers:")]
        self.classes = classes  # type token -> typed class, or None for raw CustomResource
        self.objects: dict[str, pulumi.Resource] = {}
        self.by_id: dict[str, pulumi.CustomResource] = {}
        self.by_name: dict[tuple[str, str], pulumi.Resource] = {}
        self.wired: set[str] = set()  # URNs the record being registered references through its inputs
        self.urn_of: dict[int, str] = {}  # id() of a registered resource -> its URN
        from pulumi_azure_native import _utilities  # noqa: PLC0415 - the version pin azure-native resources carry

        self.azure_defaults = _utilities.get_resource_opts_defaults()

    def wire(self, value: Any) -> Any:
        if isinstance(value, str) and value in self.by_id:
            self.wired.add(self.urn_of[id(self.by_id[value])])
            return self.by_id[value].id
        if isinstance(value, dict):
            return {k: self.wire(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.wire(v) for v in value]
        return value

    def options(self, rec: dict[str, Any]) -> pulumi.ResourceOptions:
        """The record's parent and options, and as explicit ``depends_on`` every dependency its inputs as wired
        here do not carry (the toolkit's explicit ones, and outputs the floor passes as plain values)."""
        depends_on = [self.objects[u] for u in rec["dependencies"] if u not in self.wired and u in self.objects]
        provider = rec.get("provider")
        timeouts = rec.get("customTimeouts")
        opts = pulumi.ResourceOptions(
            provider=self._provider(provider) if provider else None,
            custom_timeouts=pulumi.CustomTimeouts(**timeouts) if timeouts else None,
            version=rec["package"]["version"] if rec.get("package") else None,
            parent=self.objects.get(rec["parent"] or ""),
            protect=rec["protect"] or None,
            retain_on_delete=rec["retainOnDelete"] or None,
            replace_on_changes=rec["replaceOnChanges"] or None,
            delete_before_replace=rec["deleteBeforeReplace"] or None,
            depends_on=depends_on or None,
        )
        if rec["type"].startswith("azure-native:"):
            opts = pulumi.ResourceOptions.merge(self.azure_defaults, opts)
        return opts

    def _provider(self, reference: str) -> Any:
        """The registered provider a reference (``<urn>::<id>``) names."""
        return self.objects[provider_urn(reference, self.providers)]

    def register(self, rec: dict[str, Any]) -> None:
        self.wired = set()
        if rec["id"] is None:
            comp = pulumi.ComponentResource(rec["type"], rec["name"], None, self.options(rec))
            comp.register_outputs({})
            self.objects[rec["urn"]] = comp
            return
        inputs = {k: self.wire(v) for k, v in rec["inputs"].items()}
        for key, typ in NAME_REFERENCES.items():
            target = self.by_name.get((typ, str(inputs.get(key))))
            if target is not None and typ != rec["type"]:
                self.wired.add(self.urn_of[id(target)])
                inputs[key] = _name_output(target, inputs[key])
        opts = self.options(rec)
        res: pulumi.CustomResource
        package = rec.get("package")
        package_ref = _package_ref(package) if package else None
        if rec["type"].startswith("pulumi:providers:"):
            res = pulumi.ProviderResource(
                rec["type"].split(":", 2)[2], rec["name"], inputs, opts, package_ref=package_ref
            )
        elif package_ref is not None:
            res = pulumi.CustomResource(rec["type"], rec["name"], inputs, opts, package_ref=package_ref)
        elif self.classes is not None:
            cls = self.classes[rec["type"]]
            res = cls(rec["name"], opts=opts, **_kwargs_for(cls, inputs))
        else:
            res = pulumi.CustomResource(rec["type"], rec["name"], inputs, opts)
        self.urn_of[id(res)] = rec["urn"]  # what wire() records as a dependency
        self.objects[rec["urn"]] = res
        self.by_id[rec["id"]] = res
        for key, typ in NAME_REFERENCES.items():
            if typ == rec["type"]:
                self.by_name[(typ, str(rec["inputs"].get(key, rec["name"])))] = res

    def __call__(self) -> None:
        for rec in self.records:
            self.register(rec)


def _package_ref(package: dict[str, str]) -> Any:
    """The package reference a parameterized package's resources pass, registered as the plan's record says."""
    return pulumi.runtime.register_package(
        base_provider_name=package["baseProvider"],
        base_provider_version=package["baseProviderVersion"],
        base_provider_download_url=package["downloadUrl"],
        package_name=package["name"],
        package_version=package["version"],
        base64_parameter=package["parameter"],
    )


def floor(plan_file: str, *, typed: bool) -> dict[str, Any]:
    """Register the plan's resources directly with the SDK under the same mocks; return timings and a digest."""
    from pulumi.runtime import settings  # noqa: PLC0415
    from pulumi.runtime.stack import run_pulumi_func  # noqa: PLC0415
    from pulumi.runtime.sync_await import _sync_await  # noqa: PLC0415

    from gb300.plan import runner  # noqa: PLC0415 - the same mocks and runtime settings, outside the clock
    from gb300.plan.mocks import AzureMocks, RecordingMonitor  # noqa: PLC0415

    doc = json.loads(Path(plan_file).read_text(encoding="utf-8"))
    stack: str = doc["stack"]
    records: list[dict[str, Any]] = list(registration_order(doc["resources"]))

    clock = Clock()
    classes = {r["type"]: _typed_class(r["type"]) for r in records if r["id"] is not None} if typed else None
    clock.mark("import")
    mocks = AzureMocks()
    monitor = RecordingMonitor(mocks)
    settings.reset_options(project=runner.PROJECT, stack=stack, preview=True)
    pulumi.runtime.set_mocks(mocks, project=runner.PROJECT, stack=stack, preview=True, monitor=monitor)
    # The toolkit's plan pauses the cyclic GC while registering (where it does): the floor runs alike.
    with getattr(runner, "gc_paused", contextlib.nullcontext)():
        _sync_await(run_pulumi_func(FloorProgram(records, classes)))
    clock.mark("register")
    out = clock.result()
    # The same record the toolkit's plan keeps of each registration, so the digests compare like with like.
    registered = [runner._record(r).as_json() for r in monitor.registrations]
    out |= {"resources": len(registered), "peak_rss_mib": peak_rss_mib(), "digest": digest(registered)}
    return out


def _name_output(target: pulumi.Resource, value: str) -> pulumi.Output[str]:
    name = getattr(target, "name", None)
    if isinstance(name, pulumi.Output):
        return name
    # A raw CustomResource has no declared outputs: depend on it through its id, as the toolkit does via `name`.
    constant: Callable[[Any], str] = lambda _: value  # noqa: E731
    return target.id.apply(constant)  # type: ignore[attr-defined]
