"""gpushift.verdict."""
