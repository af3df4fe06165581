"""gpushift.gitops."""
