"""``python -m sowdb.testing --data-dir D [--config F] [SOWD FLAGS ...]``: one sowd for a test
of another language (the Node SDK's), stopped with its parent (see :mod:`sowdb.testing`)."""

import sys

from sowdb.testing import serve

sys.exit(serve(sys.argv[1:]))
