"""What a node boots with: the node registry of steps and files, rendered into each role's custom data.

Above the components (it reads their names, such as the munge secret's), below the program, which attaches
the custom data to the scale sets.

- :mod:`~gb300.node.steps`: the one registry of every step and file a node runs and carries, per role;
- :mod:`~gb300.node.context`: the context a node's custom data is rendered from, built from the stack config;
- :mod:`~gb300.node.files`: the storage and monitoring files, rendered from ``templates/``;
- :mod:`~gb300.node.custom_data`: the steps and files of a role packed as Azure custom data;
- :mod:`~gb300.node.templating`: the one Jinja environment (StrictUndefined) node files are rendered with.
"""
