"""gpushift.engine."""
