"""A real Slurm cluster for the tests: Debian's slurmctld, slurmd, munge (and slurmdbd with MariaDB, and sackd on a
login node) running gb300's rendered configuration, on the releases either side of ours (trixie: 24.11, sid: 26.05;
ours is 25.11).

Use:

- ``tests/slurm/real/conftest.py``'s ``real_cluster`` fixture (module scope, parametrized over both releases), or
  in a module of your own ``cluster_fixture(request, **options)`` (:mod:`.fixtures`) as the body of a
  module-scoped fixture with ``params=list(SUITES)``, or :func:`.cluster.start_cluster` as a context manager.
  ``start_cluster(suite, directory, nodes=2, stack="dev", overrides=None, accounting=False, login=False,
  node_files=None)``.
- :class:`.cluster.Cluster`: ``head``, ``nodes`` and ``login`` (None without ``login=True``; ``hosts``: all of them)
  (:class:`.host.Host`: ``name``, ``address``, ``upper``, ``run(argv)``, ``start(name, argv)``, ``stop(name)``),
  ``slurm()`` (gb300's own
  :class:`gb300.slurm.client.Slurm`, run on the head), ``scontrol(*args)``, ``log(host, "slurmctld")``,
  ``errors(host, name)``, ``version``, ``files`` (the stack's rendered head and node files), ``start_controller()``,
  ``controller_up()``, ``start_node(host)``, ``reboot(host, down)``, ``slurmd_start_time(host)``,
  ``wait_registered(names)``, ``wait(what, ready)``, ``diagnostics()``.

Each machine is a :class:`.host.Host`: its own network namespace (a veth to the cluster's private bridge, itself in
a namespace of its own, addresses in 198.18.0.0/24), UTS (host name), mount, PID and cgroup namespaces, over an
overlay of the release's root (scripts/build-slurm-root) and a layer holding what gb300 renders for that machine:
the head's ``/etc/slurm`` files of the stack (``slurm.conf``, ``gres.conf``, ``cgroup.conf``, ``plugstack.conf``,
``topology.conf`` when rendered), a GPU node's files (``slurm.env``, ``health.env``, the health gate, the prolog and
epilog, the step scripts) and no ``/etc/slurm`` (configless, as on Azure). slurmd's options come from the node's
own ``gb300-slurmd-setup`` step (the drop-in it writes); every daemon's command line is its Debian unit's
``ExecStart=``; the boot health check is its unit's command, run before slurmd as on the node. A login node
(``login=True``: the stack gets ``gb300:login`` with one VM) holds the login role's files and no ``/etc/slurm``; its
own ``gb300-login-setup`` step writes ``/etc/default/sackd`` and starts Debian's sackd unit, which fetches the
controller's configuration into ``/run/slurm/conf``; no slurmd runs there.

What one small machine cannot provide is adapted, here and only here:

==============================  ===================================================================================
Adaptation                      Why
==============================  ===================================================================================
``SlurmdParameters=             The SKU's 128 CPUs and 820 GiB (``--conf``) on a 2-core machine: without it slurmd
config_overrides`` appended     registers with less than configured and slurmctld drains the node.
to slurm.conf
``MetricsType`` dropped on      gb300 renders ``MetricsType=metrics/openmetrics`` (25.11+); 24.11's slurmctld
24.11                           rejects the key (:data:`.adapt.NEWER_KEYS`), so the fixture drops its line there.
``-D`` for ``--systemd``        The daemons run in the foreground under the fixture, not under systemd (no notify
                                socket); munged gets ``--foreground`` and runs as its unit's ``User=``.
the health gate's skip lists    Every check of ``gb300-health-check`` (GPUs, fabric, InfiniBand, DCGM, XID, mounts,
(``GB300_SKIP_BOOT/PERIODIC/    kernel modules, field watches) is added to ``health.env``'s skip lists: there is
EPILOG``) hold every check      no GPU here. The gate's verdict, drain and resume logic still runs. A test that
                                needs a failing check passes ``node_files`` (e.g. its own ``health.env``).
stand-in ``systemctl``          On GPU nodes: records calls in /var/log/gb300-standin/systemctl.log and keeps unit
                                states (start/restart/stop, is-active) for the prolog and epilog.
stand-in ``nvidia-imex-ctl``    ``-q`` answers READY while the stand-in nvidia-imex unit is active. It cannot show
                                IMEX itself (no NVLink domain here).
``/etc/nvidia-imex/config.cfg`` ``IMEX_CMD_ENABLED=1``, as the image's IMEX package after step 35-nvidia-imex.
fake ``/dev/nvidia0-3``         Character devices 195:N (and nvidiactl) for gres.conf's ``File=``; no driver.
step side effects not run       Of ``gb300-slurmd-setup``'s systemctl calls, the fixture runs the boot health check
                                and slurmd; the fabric publisher, Scheduled Events watcher and pam_slurm_adopt are
                                not run (no IMDS, no fabric, no sshd).
pyxis absent                    plugstack.conf names pyxis as ``optional``; it is not installed in the root, as on
                                a node whose pins lack checksums.
cgroups                         Each host gets a cgroup of its own (v1: under the test process's; v2 only: a tree
                                at the root with the controllers handed down) and a cgroup namespace rooted there,
                                its processes in ``/system.slice``: ``proctrack/cgroup``, ``task/cgroup`` and
                                ``jobacct_gather/cgroup`` run as configured. On v2-only machines cgroup.conf gets
                                ``IgnoreSystemd=yes`` (no systemd in the hosts); that layout was not run here.
stand-in ``systemctl`` (head,   Starts MariaDB and slurmdbd for the head's own ``gb300-slurmdbd-setup`` step, and
login node)                     sackd for the login node's ``gb300-login-setup`` (their units' ``ExecStart=``,
                                ``User=``, ``EnvironmentFile=`` and ``RUNTIME_DIRECTORY`` as systemd sets it;
                                ``--systemd`` becomes ``-D``; MariaDB as ``mariadbd``). The login step's
                                ``gb300-slurm-install`` is ``/bin/true``: Debian's sackd is in the root already.
boot                            ``systemd-tmpfiles --create --prefix=/run`` stands for boot's runtime directories;
                                each host has its own boot time (a time namespace), so a reboot
                                (:meth:`.cluster.Cluster.reboot`) shows as a new ``boot_time``.
root                            The test process needs root or passwordless ``sudo -n`` (:mod:`.priv`); every
                                privileged step goes through it.
==============================  ===================================================================================
"""
