from timewarp.cli import main

raise SystemExit(main())
