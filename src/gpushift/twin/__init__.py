"""gpushift.twin."""
