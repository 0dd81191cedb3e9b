from regime_dash.cli import script

raise SystemExit(script())
