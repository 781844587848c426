"""Facts: what gb300 knows about Azure and the node software, read from ``data/*.yaml`` (each with a source).

- :mod:`~gb300.facts.loader`: the one loader of every data file (and every other YAML file gb300 ships).
"""
