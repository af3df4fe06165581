"""``python -m gpushift``."""

from gpushift.cli import main

raise SystemExit(main())
