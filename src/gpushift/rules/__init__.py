"""gpushift.rules."""
