"""gpushift.kube."""
