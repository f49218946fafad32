"""`python -m lab ...`: see lab.cli."""

from lab.cli import main

raise SystemExit(main())
