"""gb300: one Pulumi stack file to an Azure ND GB300 v6 (NVL72) training cluster.

Flow: stack config -> typed config (:mod:`gb300.config`) -> components (:mod:`gb300.components`)
-> resources -> rules over the resources. ``gb300 plan`` runs the same program on the Pulumi SDK's mocks.

Layers, lowest first; a module imports only from its own layer or the ones before it, and no import cycle
(``tests/test_layering.py`` reads every import, local ones included). The ground floor, :mod:`gb300.resources`,
holds the resource nouns every layer shares and imports nothing from gb300; then :mod:`~gb300.facts`
(``data/*.yaml`` read into types) -> :mod:`~gb300.config` (the stack contract) -> :mod:`~gb300.components` (Pulumi
components), :mod:`~gb300.slurm` and :mod:`~gb300.node` (what nodes boot with) -> :mod:`gb300.program` ->
:mod:`~gb300.azure` (the declared resources as typed views, quota) -> :mod:`~gb300.rules` -> :mod:`~gb300.plan` ->
:mod:`~gb300.ops` (day-2 tools) and :mod:`~gb300.commands` (the CLI's commands). At the root: :mod:`gb300.errors`,
:mod:`gb300.paths`, :mod:`gb300.findings`, :mod:`gb300.tags` (the tag contract), :mod:`gb300.program`,
:mod:`gb300.policy_pack` and :mod:`gb300.cli`. One lazy exception: the config checks ``gb300:software`` against the
bootstrap's pinned versions.

Every error gb300 raises on purpose derives from :class:`gb300.errors.Gb300Error` (the whole tree is in
:mod:`gb300.errors`)::

    Gb300Error
     +-- ConfigError      invalid stack configuration (one problem per key path); CLI exit 2
     +-- UsageError       bad command-line usage; CLI exit 2
     +-- DataError        a data file shipped with gb300 is malformed (a bug); CLI exit 3
     +-- BootstrapError, SlurmConfigError, SlurmError: the bootstrap's and Slurm's errors
"""

from gb300.errors import ConfigError, Gb300Error, UsageError

__all__ = ["ConfigError", "Gb300Error", "UsageError"]
