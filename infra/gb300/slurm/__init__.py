"""Slurm for GB300: rack topology (``topology/block``), configuration files, and the health thresholds.

Modules, one concept each: :mod:`~gb300.slurm.hostlist` (hostlist expressions),
:mod:`~gb300.slurm.topology` (``topology.conf`` from fabric identities), :mod:`~gb300.slurm.config`
(``slurm.conf``, ``gres.conf``, ``cgroup.conf``, ``plugstack.conf``, ``slurmdbd.conf``), :mod:`~gb300.slurm.health`
(per-SKU thresholds rendered to ``/etc/gb300/health.env``). Nothing is re-exported here on purpose:
``hostlist`` and ``topology`` are stdlib-only and shipped to the controller without Jinja or PyYAML.
"""
