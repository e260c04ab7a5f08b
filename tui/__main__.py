"""``python -m tui``: the ``sessionscope`` command."""

from tui.cli import main

raise SystemExit(main())
