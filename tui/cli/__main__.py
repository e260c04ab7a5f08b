from tui.cli.core import main

raise SystemExit(main())
