"""``python -m sowdb_client.cli``: the same as the ``sow`` command."""

import sys

from sowdb_client.cli import main

sys.exit(main())
