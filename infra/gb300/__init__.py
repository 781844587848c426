"""gb300: one Pulumi stack file to an Azure ND GB300 v6 (NVL72) training cluster.

Flow: stack config -> typed config (:mod:`gb300.config`) -> components (:mod:`gb300.components`)
-> resources -> rules over the resources. ``gb300 plan`` runs the same program on the Pulumi SDK's mocks.

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
