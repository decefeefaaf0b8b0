"""`python -m loratui` is the `loratui` command."""

import sys

from loratui.cli import main

sys.exit(main())
