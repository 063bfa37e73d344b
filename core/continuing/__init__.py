"""Continuing one interrupted turn exactly once: the claim, resume, skip, and how it ended."""
