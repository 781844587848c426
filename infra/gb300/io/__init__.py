"""Files that cross gb300's edge: one strict reader for every file gb300 did not ship, one writer for every file it
creates, one quoting helper for every value it puts into a generated script or configuration (docs/security.md,
"Files from elsewhere stay data").

* :mod:`gb300.io.reader`: a size cap, YAML without anchors or aliases, JSON without ``NaN``, bounded nesting,
  duplicate keys refused; every refusal is one line naming the file and the key path (a
  :class:`~gb300.errors.ConfigError`, exit 2). gb300's own data files keep :mod:`gb300.facts.loader`.
* :mod:`gb300.io.writer`: no symlink followed, an exclusive create or an atomic replace in the target's own
  directory, the mode stated by the caller.
* :mod:`gb300.io.quoting`: shell words quoted, control characters refused, for commands.sh, cloud-init scripts,
  systemd units and the like.
"""

from __future__ import annotations

from gb300.io.quoting import UnsafeTextError, comment, shell_word
from gb300.io.reader import load_json, load_yaml, read_text
from gb300.io.writer import create_new, replace

__all__ = [
    "UnsafeTextError",
    "comment",
    "create_new",
    "load_json",
    "load_yaml",
    "read_text",
    "replace",
    "shell_word",
]
