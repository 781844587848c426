"""Facts: what gb300 knows about Azure and the node software, read from ``data/*.yaml`` (each with a source).

The lowest layer, below the stack configuration: it imports no other gb300 layer.

- :mod:`~gb300.facts.loader`: the one loader: every data file (and every other YAML file gb300 ships) is parsed
  there, once per process;
- :mod:`~gb300.facts.catalog`: SKUs, images, quota families, platform limits;
- :mod:`~gb300.facts.storage_facts`: which stored data dies with which change, private link zones, Lustre's network;
- :mod:`~gb300.facts.roles`: built-in Azure role definitions by name;
- :mod:`~gb300.facts.egress`: NAT public IPs for the nodes behind a gateway;
- :mod:`~gb300.facts.sizing`: Lustre sizing for checkpoints (arithmetic over the Lustre and checkpoint facts);
- :mod:`~gb300.facts.alerts`: the Prometheus alert rules (``templates/alerts/*.yaml``) as data.
"""
