"""Pinned node software: versions.yaml as typed data, and the `gb300:software` overrides over it.

A component's package names, apt version pattern and download URLs may use `{version}`, `{major}`
and `{version_dashed}` (13.0 -> 13-0), so overriding only the version keeps them consistent. A
repository URL may use `{<component>}` for that component's version.

What a node may download is pinned by content in checksums.yaml, keyed by the rendered URL: the sha256
of each file and the fingerprints of each repository's signing key. A URL without an entry resolves to
no checksum, and nodes refuse it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from gb300.errors import BootstrapDataError, SoftwareOverrideError
from gb300.facts.checksums import Checksums, Pin, checksums_from
from gb300.facts.loader import DATA_DIR, data, load_yaml_mapping, string_field

__all__ = [
    "CHECKSUMS_FILE",
    "VERSIONS_FILE",
    "AptRepo",
    "Checksums",
    "Component",
    "DownloadFile",
    "Pin",
    "SoftwareSet",
    "apply_software_overrides",
    "check_software_overrides",
    "load_checksums",
    "load_software",
]

VERSIONS_FILE: Path = DATA_DIR / "versions.yaml"
CHECKSUMS_FILE: Path = DATA_DIR / "checksums.yaml"
InstallKind = Literal["apt", "archive", "deb", "deb-repo", "source", "none"]
_INSTALL_KINDS: tuple[str, ...] = ("apt", "archive", "deb", "deb-repo", "source", "none")
_VERSION_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z.+~:_-]{0,63}\Z")
_DETECT_RE = re.compile(r"^(nvidia-smi|dpkg:[a-z0-9][a-z0-9.+{}_-]*|file:/[A-Za-z0-9._/+-]+)\Z")
_RECIPE_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}\Z")
_BUILD_ENV_KEY_RE = re.compile(r"^[A-Z][A-Z0-9_]{0,62}\Z")


@dataclass(frozen=True)
class DownloadFile:
    """A file a node downloads, checked against its sha256 before use (None: not pinned yet)."""

    url: str
    sha256: str | None


@dataclass(frozen=True)
class GitSource:
    """A source tree a node clones and checks out at a commit id: git checks every object it receives
    against its id, so the commit pins the whole tree (submodules included, by their recorded commits).
    ``commit`` is None while checksums.yaml has no commit for ``key`` (``url@ref``)."""

    url: str
    ref: str
    commit: str | None

    @property
    def key(self) -> str:
        """How checksums.yaml `commits` names this source: the repository URL and the tag, joined by @."""
        return f"{self.url}@{self.ref}"


def load_checksums(path: Path | None = None) -> Checksums:
    """Load checksums.yaml (or `path`); raises BootstrapDataError naming the bad entry."""
    return checksums_from(load_yaml_mapping(path or CHECKSUMS_FILE))


@dataclass(frozen=True)
class AptRepo:
    """A vendor apt repository for arm64/sbsa, with its signing key's URL and pinned fingerprints."""

    name: str
    url: str
    suite: str
    components: str
    key_url: str
    key_fingerprints: tuple[str, ...]
    status: str
    source: str
    arch: str | None = "arm64"
    """The apt `arch=` option; None (versions.yaml `arch: native`) lets apt use the node's own architecture."""

    @property
    def env_prefix(self) -> str:
        """The shell variable prefix the node scripts read this repository from."""
        return "GB300_REPO_" + re.sub(r"[^A-Z0-9]", "_", self.name.upper())

    @property
    def keyring_path(self) -> str:
        """Where a node keeps this repository's signing key."""
        return f"/etc/apt/keyrings/gb300-{self.name}.asc"

    @property
    def apt_line(self) -> str:
        """The sources.list line (for `arch`, when set), signed by this repository's own key only."""
        options = f"arch={self.arch} signed-by={self.keyring_path}" if self.arch else f"signed-by={self.keyring_path}"
        line = f"deb [{options}] {self.url} {self.suite}"
        return f"{line} {self.components}".rstrip()


@dataclass(frozen=True)
class Component:
    """One pinned software component, with its templates resolved against `version`."""

    name: str
    version: str | None
    detect: str
    install: InstallKind
    repo: str | None
    packages: tuple[str, ...]
    apt_version: str | None
    files: tuple[DownloadFile, ...]
    reason: str
    deferred: bool
    status: str
    source: str
    overridden: bool = False
    optional: bool = False
    """Absent and not installable at boot (no version or sha256 pinned, or `install: none`): warn, go on."""
    recipe: str | None = None
    """`install: source` only: the build script run from /usr/local/lib/gb300/build/<recipe>.sh."""
    build_packages: tuple[str, ...] = ()
    """`install: source` only: Ubuntu archive packages the build needs (installed, not held)."""
    build_env: tuple[tuple[str, str], ...] = ()
    """`install: source` only: variables exported to the recipe (name, value)."""
    git: GitSource | None = None
    """Built from a git repository at a pinned commit (enroot, pyxis) instead of downloaded files."""

    @property
    def env_prefix(self) -> str:
        """The shell variable prefix the node scripts read this component from."""
        return "GB300_SW_" + re.sub(r"[^A-Z0-9]", "_", self.name.upper())


@dataclass(frozen=True)
class SoftwareSet:
    """Every component and repository a node's bootstrap checks or installs."""

    components: tuple[Component, ...]
    repos: tuple[AptRepo, ...]

    def component(self, name: str) -> Component:
        """Return the component called `name` (KeyError when there is none)."""
        for comp in self.components:
            if comp.name == name:
                return comp
        raise KeyError(name)

    @property
    def names(self) -> tuple[str, ...]:
        """Component names, in versions.yaml order."""
        return tuple(c.name for c in self.components)

    def as_versions(self) -> dict[str, str | None]:
        """Component name -> pinned version (None: presence only)."""
        return {c.name: c.version for c in self.components}

    def unpinned(self) -> tuple[tuple[str, str, str], ...]:
        """What nodes would refuse to download: (kind, owner, url) with kind ``file``, ``key`` or ``commit``.

        ``owner`` is the component (for a file) or the repository (for a key); versions.yaml order.
        """
        gaps = [("file", c.name, f.url) for c in self.components for f in c.files if f.sha256 is None]
        gaps += [("commit", c.name, c.git.key) for c in self.components if c.git and c.git.commit is None]
        gaps += [("key", r.name, r.key_url) for r in self.repos if not r.key_fingerprints]
        return tuple(gaps)


def _subst(template: str, version: str | None, *, where: str) -> str:
    if "{" not in template:
        return template
    if version is None:
        msg = f"{where}: uses {{version}} but the component has no pinned version"
        raise BootstrapDataError(msg)
    return template.format(
        version=version,
        major=version.split(".", 1)[0],
        version_dashed=version.replace(".", "-"),
    )


def _files(raw: Mapping[str, Any], version: str | None, where: str, checksums: Checksums) -> tuple[DownloadFile, ...]:
    files = []
    for index, entry in enumerate(raw.get("files", [])):
        if "sha256" in entry:
            msg = (
                f"{where}.files[{index}].sha256: checksums live in checksums.yaml, keyed by the rendered URL "
                "(run `gb300 software lock`, or move the value there with its source)"
            )
            raise BootstrapDataError(msg)
        url = _subst(string_field(entry, "url", f"{where}.files"), version, where=where)
        files.append(DownloadFile(url=url, sha256=checksums.sha256(url)))
    return tuple(files)


def _build_component(
    name: str, raw: Mapping[str, Any], version: str | None, checksums: Checksums, *, overridden: bool
) -> Component:
    where = f"versions.yaml components.{name}"
    install = string_field(raw, "install", where)
    if install not in _INSTALL_KINDS:
        msg = f"{where}.install: must be one of {', '.join(_INSTALL_KINDS)} (got {install!r})"
        raise BootstrapDataError(msg)
    detect = _subst(string_field(raw, "detect", where), version, where=f"{where}.detect")
    if not _DETECT_RE.match(detect):
        msg = f"{where}.detect: must be nvidia-smi, dpkg:<package> or file:<path> (got {detect!r})"
        raise BootstrapDataError(msg)
    packages = tuple(_subst(str(p), version, where=f"{where}.packages") for p in raw.get("packages", []))
    apt_version: str | None = None
    if version is not None:
        apt_version = _subst(string_field(raw, "apt_version", where, default="{version}-*"), version, where=where)
    # An unpinned source component has no tarball to fetch yet; the node says so (see versions.yaml's header).
    files = () if install == "source" and version is None else _files(raw, version, where, checksums)
    repo = raw.get("repo")
    if install == "apt" and not isinstance(repo, str):
        msg = f"{where}.repo: an apt component must name a repository (got {repo!r})"
        raise BootstrapDataError(msg)
    recipe, build_packages, build_env = _source_build(raw, install, where)
    git = _git_source(raw, version, where, checksums)
    optional = raw.get("optional", False)
    if not isinstance(optional, bool):
        msg = f"{where}.optional: must be true or false (got {optional!r})"
        raise BootstrapDataError(msg)
    return Component(
        name=name,
        version=version,
        detect=detect,
        install=cast("InstallKind", install),
        repo=repo if isinstance(repo, str) else None,
        packages=packages,
        apt_version=apt_version,
        files=files,
        reason=str(raw.get("reason", "")),
        deferred=bool(raw.get("deferred", False)),
        status=string_field(raw, "status", where),
        source=string_field(raw, "source", where),
        overridden=overridden,
        optional=optional,
        recipe=recipe,
        build_packages=build_packages,
        build_env=build_env,
        git=git,
    )


def _git_source(raw: Mapping[str, Any], version: str | None, where: str, checksums: Checksums) -> GitSource | None:
    """`git: {url, ref}`: the repository and tag a node builds from; its commit id comes from checksums.yaml."""
    body = raw.get("git")
    if body is None:
        return None
    if not isinstance(body, Mapping):
        msg = f"{where}.git: must be a mapping with url and ref (got {body!r})"
        raise BootstrapDataError(msg)
    url = string_field(body, "url", f"{where}.git")
    if not url.startswith("https://"):
        msg = f"{where}.git.url: must be an https:// repository URL (got {url!r})"
        raise BootstrapDataError(msg)
    if version is None:
        return None
    ref = _subst(string_field(body, "ref", f"{where}.git"), version, where=f"{where}.git.ref")
    source = GitSource(url=url, ref=ref, commit=None)
    return dataclasses.replace(source, commit=checksums.commit(source.key))


def _source_build(
    raw: Mapping[str, Any], install: str, where: str
) -> tuple[str | None, tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The recipe, build packages and build environment of an `install: source` component."""
    build_keys = [key for key in ("recipe", "build_packages", "build_env") if key in raw]
    if install != "source" and "git" in raw:
        # Built from a pinned commit by its own step (gb300-pyxis-setup): only the packages it needs.
        if [key for key in build_keys if key != "build_packages"]:
            msg = f"{where}.{build_keys[0]}: a git component names only build_packages (got install {install!r})"
            raise BootstrapDataError(msg)
        packages = raw.get("build_packages", [])
        if not isinstance(packages, list) or not all(isinstance(p, str) and p for p in packages):
            msg = f"{where}.build_packages: must be a list of Debian package names (got {packages!r})"
            raise BootstrapDataError(msg)
        return None, tuple(packages), ()
    if install != "source":
        if build_keys:
            msg = f"{where}.{build_keys[0]}: only an `install: source` component is built (got install {install!r})"
            raise BootstrapDataError(msg)
        return None, (), ()
    files = raw.get("files")
    if not isinstance(files, list) or not files:
        msg = (
            f"{where}.files: a source component must list its source tarball's url "
            f"(its sha256 goes in checksums.yaml) (got {files!r})"
        )
        raise BootstrapDataError(msg)
    recipe = raw.get("recipe")
    if not isinstance(recipe, str) or not _RECIPE_RE.match(recipe):
        msg = (
            f"{where}.recipe: a source component must name its build recipe, "
            f"cloud-init/build/<recipe>.sh, in lowercase letters, digits and dashes (got {recipe!r})"
        )
        raise BootstrapDataError(msg)
    packages = raw.get("build_packages", [])
    if not isinstance(packages, list) or not all(isinstance(p, str) and p for p in packages):
        msg = f"{where}.build_packages: must be a list of Debian package names (got {packages!r})"
        raise BootstrapDataError(msg)
    env = raw.get("build_env", {})
    if not isinstance(env, dict):
        msg = f"{where}.build_env: must be a mapping of NAME: value (got {env!r})"
        raise BootstrapDataError(msg)
    for key, value in env.items():
        if not isinstance(key, str) or not _BUILD_ENV_KEY_RE.match(key) or not isinstance(value, str) or "\n" in value:
            msg = f"{where}.build_env.{key}: must be an UPPER_CASE name with a one-line string value (got {value!r})"
            raise BootstrapDataError(msg)
    return recipe, tuple(packages), tuple((str(k), str(v)) for k, v in env.items())


def _build_repo(name: str, raw: Mapping[str, Any], versions: Mapping[str, str | None], checksums: Checksums) -> AptRepo:
    where = f"versions.yaml repos.{name}"
    url = string_field(raw, "url", where)
    for comp, version in versions.items():
        token = "{" + comp + "}"
        if token in url:
            if version is None:
                msg = f"{where}.url: uses {token} but {comp} has no pinned version"
                raise BootstrapDataError(msg)
            url = url.replace(token, version)
    if "key_sha256" in raw:
        msg = f"{where}.key_sha256: a signing key is pinned by fingerprint in checksums.yaml, keyed by key_url"
        raise BootstrapDataError(msg)
    key_url = string_field(raw, "key_url", where)
    arch = string_field(raw, "arch", where, default="arm64")
    if not re.fullmatch(r"native|[a-z0-9]+", arch):
        msg = f"{where}.arch: must be an architecture such as arm64, or native (got {arch!r})"
        raise BootstrapDataError(msg)
    return AptRepo(
        name=name,
        url=url,
        suite=string_field(raw, "suite", where),
        components=string_field(raw, "components", where, default=""),
        key_url=key_url,
        key_fingerprints=checksums.fingerprints(key_url),
        status=string_field(raw, "status", where),
        source=string_field(raw, "source", where),
        arch=None if arch == "native" else arch,
    )


def _build(raw: Mapping[str, Any], overrides: Mapping[str, str], checksums: Checksums) -> SoftwareSet:
    comps_raw = raw.get("components")
    repos_raw = raw.get("repos")
    if not isinstance(comps_raw, dict) or not isinstance(repos_raw, dict):
        msg = "versions.yaml: must have `components` and `repos` mappings"
        raise BootstrapDataError(msg)
    versions: dict[str, str | None] = {}
    components = []
    for name, body in comps_raw.items():
        pinned = body.get("version")
        version = overrides.get(name, pinned if isinstance(pinned, str) else None)
        versions[name] = version
        components.append(_build_component(name, body, version, checksums, overridden=name in overrides))
    repos = tuple(_build_repo(name, body, versions, checksums) for name, body in repos_raw.items())
    repo_names = {r.name for r in repos}
    for comp in components:
        if comp.repo is not None and comp.repo not in repo_names:
            msg = f"versions.yaml components.{comp.name}.repo: no repository {comp.repo!r} under repos"
            raise BootstrapDataError(msg)
    return SoftwareSet(components=tuple(components), repos=repos)


def load_software(path: Path | None = None, checksums: Path | None = None) -> SoftwareSet:
    """Load versions.yaml (or `path`) with checksums.yaml (or `checksums`), no overrides applied."""
    return _build(load_yaml_mapping(path or VERSIONS_FILE), {}, load_checksums(checksums))


def check_software_overrides(
    overrides: Mapping[str, object] | None, path: Path | None = None
) -> tuple[tuple[str, str], ...]:
    """Every problem with `gb300:software`, as (config path, message) pairs; empty when usable.

    For config validation: the path is `software.<name>` (relative to the gb300 namespace) and the
    message starts with the full key, `gb300:software.<name>: ...`.
    """
    raw = load_yaml_mapping(path or VERSIONS_FILE)
    checksums = load_checksums()
    known = list((raw.get("components") or {}).keys())
    problems: list[tuple[str, str]] = []
    usable: dict[str, str] = {}
    for name, value in (overrides or {}).items():
        key = f"gb300:software.{name}"
        if name not in known:
            problems.append(
                (f"software.{name}", f"{key}: unknown component (got {name!r}). Known components: {', '.join(known)}.")
            )
        elif not isinstance(value, str) or not _VERSION_RE.match(value):
            problems.append(
                (
                    f"software.{name}",
                    f'{key}: must be a version string such as "2.29.7" (got {value!r}). '
                    "Quote it in the stack file so YAML keeps it a string.",
                )
            )
        else:
            usable[name] = value
    for name, value in usable.items():
        try:
            _build(raw, {name: value}, checksums)
        except BootstrapDataError as exc:
            problems.append(
                (f"software.{name}", f"gb300:software.{name}: the overridden version cannot be used ({exc})")
            )
    return tuple(problems)


def apply_software_overrides(
    overrides: Mapping[str, object] | None, path: Path | None = None, checksums: Path | None = None
) -> SoftwareSet:
    """Merge `gb300:software` (component -> version) over versions.yaml and return the result.

    Raises SoftwareOverrideError naming `gb300:software.<name>` (one line per problem) for an unknown
    component or a value that is not a usable version string.
    """
    problems = check_software_overrides(overrides, path)
    if problems:
        raise SoftwareOverrideError("\n".join(message for _, message in problems))
    clean = {name: str(value) for name, value in (overrides or {}).items()}
    return _build(load_yaml_mapping(path or VERSIONS_FILE), clean, load_checksums(checksums))


CONTAINER_IMAGE_PINS: dict[str, str] = {"dcgm-exporter": "dcgmExporterImage"}
"""The container images nodes pull: service -> its ``pins`` entry in versions.yaml (registry/repository:tag)."""


def container_images() -> dict[str, str]:
    """The container images nodes pull (service -> registry/repository:tag), pinned by digest in checksums.yaml."""
    return {service: str(pin(name)) for service, name in CONTAINER_IMAGE_PINS.items()}


def pin(name: str) -> Any:
    """The value of ``pins.<name>`` in versions.yaml: a package or image the storage and monitoring steps install
    by name (``lustreClientPackages``, ``blobfuse2Package``, ``dcgmExporterImage``, ``nodeExporterPackage``,
    ``prometheusPackage``)."""
    entry = data("versions.yaml").get("pins", {}).get(name)
    if not isinstance(entry, dict) or "value" not in entry:
        msg = f"versions.yaml pins.{name}: must be a mapping with a value (and its status and source)"
        raise BootstrapDataError(msg)
    return entry["value"]
