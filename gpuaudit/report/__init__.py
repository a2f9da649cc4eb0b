"""Renderers of an audit result. They never re-sort or re-compute."""
