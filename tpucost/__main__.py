"""`python -m tpucost ...`: see tpucost.cli."""

from tpucost.cli import main

raise SystemExit(main())
