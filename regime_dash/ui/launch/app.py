"""Streamlit entry of the installed package (``regime-dash app`` runs it); the checkout's ``app.py`` is its twin."""
from regime_dash.ui.app_main import main

main()
