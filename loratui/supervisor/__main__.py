"""`python -m loratui.supervisor RUN_DIR`: the detached owner of one run (started by `loratui run`)."""

import sys

from loratui.supervisor.owner import main

sys.exit(main())
