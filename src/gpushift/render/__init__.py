"""gpushift.render."""
