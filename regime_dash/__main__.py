from regime_dash.cli import main

raise SystemExit(main())
