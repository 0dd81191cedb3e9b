"""The Streamlit shell: the only package that imports streamlit."""
