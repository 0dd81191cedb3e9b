"""Streamlit entry from a checkout (``streamlit run app.py``); installed, ``regime-dash app`` runs the same."""
from regime_dash.ui.app_main import main

main()
