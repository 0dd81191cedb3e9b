"""The installed package's streamlit entry script (``app.py``), alone in its folder.

``streamlit run`` puts the script's folder first on ``sys.path``; here that folder holds
nothing else, so no module of ``ui/`` (``errors``, ``state``, ``cache``, ...) can shadow
a top-level module of the same name.
"""
