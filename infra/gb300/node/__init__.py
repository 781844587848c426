"""What a node boots with: one typed bundle per role, rendered from the node registry and packed twice.

Above the components (it reads their names, such as the munge secret's), below the program, which attaches
the custom data to the scale sets.

- :mod:`~gb300.node.steps`: every step a node runs, per role, in order;
- :mod:`~gb300.node.registry`: every file a node carries, one row per node path (source, mode, roles, condition);
- :mod:`~gb300.node.paths` and :mod:`~gb300.node.file`: node path names and the node file type (import nothing);
- :mod:`~gb300.node.context`: the context a node's files are rendered from, built from the stack config;
- :mod:`~gb300.node.files`: the storage and monitoring files' contents, rendered from ``templates/``;
- :mod:`~gb300.node.bundle`: one role's bundle (checked and scanned for secrets once);
- :mod:`~gb300.node.pack`: its two packers, the node payload and the small custom data;
- :mod:`~gb300.node.custom_data`: :func:`~gb300.node.custom_data.render_stack`, every role of a stack, once;
- :mod:`~gb300.node.templating`: the one Jinja environment (StrictUndefined) node files are rendered with.
"""
