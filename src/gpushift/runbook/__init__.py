"""gpushift.runbook."""
