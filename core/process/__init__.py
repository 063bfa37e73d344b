"""Processes: who is who, across wall-clock steps (identity, start marks, a child's environment)."""
