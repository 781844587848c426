"""The names of the node roles, said once: every module that names a role imports it from here.

A role is a kind of VM the cluster runs, with its own custom data: the GPU nodes of every pool and the head node
(Slurm's controller and login node). The name is also the value of the head's role tag (:data:`gb300.tags.ROLE`)
and names the role's cloud-config fragment, ``cloud-init/roles/<role>.yaml`` (:func:`gb300.node.roles.known_roles`;
``tests/node/test_role_names.py`` holds the two together).

It imports nothing, so the tag contract, the node registry and the plan can all read it.
"""

from __future__ import annotations

__all__ = ["GPU_NODE", "HEAD", "ROLES"]

GPU_NODE = "gpu-node"
"""A GPU node of a pool's rack scale sets."""
HEAD = "head"
"""The head node: Slurm's controller and the login node."""
ROLES = (GPU_NODE, HEAD)
"""Every role, GPU nodes first."""
