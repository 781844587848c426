"""Azure's view of the plan: the resources the program declares, read back as typed views, and what Azure says.

Used by the rules, the plan and the day-2 tools; it imports no rule, plan or command.

- :mod:`~gb300.azure.inventory`: typed views over registered resources (scale sets, VMs, subnets, ...);
- :mod:`~gb300.azure.machines`: every VM the resources declare, scale sets and single VMs alike;
- :mod:`~gb300.azure.contract`: the ARM bodies gb300 writes itself, checked against Azure's SDK models;
- :mod:`~gb300.azure.quota`: vCPU demand per region and family, and Azure's quota (a file or live);
- :mod:`~gb300.azure.lustre_live`: Azure's own answer to how many addresses a Lustre filesystem needs;
- :mod:`~gb300.azure.images_live`: whether Azure publishes each marketplace image version the stack boots;
- :mod:`~gb300.azure.instances`: which VMs of each rack run the scale set's latest model (``latestModelApplied``);
- :mod:`~gb300.azure.credential`: the one Azure credential of gb300's own calls, chosen as the azure-native
  provider chooses its own.

The racks are azure-native resources of a parameterized compute package: :mod:`gb300.components.compute_package`.
"""
