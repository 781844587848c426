"""Day-2 operations: work on a deployed cluster, or on the plan's output, outside the Pulumi program.

The top layer beside :mod:`gb300.commands`, which calls it.

- :mod:`~gb300.ops.rollout`: roll a changed bootstrap out rack by rack (drain, reimage, health gate, resume);
- :mod:`~gb300.ops.fleet_status`: each deployed rack's nodes as ready, failed, booting or missing (``gb300 status``);
- :mod:`~gb300.ops.software_lock`: fill ``data/checksums.yaml`` from the vendors' downloads (``gb300 software lock``);
- :mod:`~gb300.ops.state_strip`: a ``pulumi stack export`` without its secrets (``gb300 strip-state``);
- :mod:`~gb300.ops.ci_summary`: `gb300 plan --json` files as a Markdown summary for CI (runs standalone).
"""
