"""The cluster twin's agents: nodes, kubelets, scheduler, controllers and GPU agents.

They run in-process against the twin's :class:`~gpushift_twin.Store` on a virtual clock, so
objects move as on a cluster (pods bind, start and terminate; device plugins register;
the DRA driver publishes ResourceSlices) while clients drive it through the API::

    with run_cluster(example("homelab"), time_scale=100) as (twin, cluster):
        subprocess.run(["kubectl", "--kubeconfig", twin.kubeconfig, "get", "nodes"])
"""

import lazy_loader

# The names of __init__.pyi, each imported from its module on first use: a command that
# needs one room does not import the others (docs/decisions.md, lazy packages).
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
