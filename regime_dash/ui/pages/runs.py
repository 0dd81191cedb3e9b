import streamlit as st

st.title("regime-dash")
st.write("Upload a diag.jsonl to get started.")
