"""`python -m tilejit ...` is the `tilejit` command."""
import sys

from tilejit.cli import main

sys.exit(main())
