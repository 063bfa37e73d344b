"""Hermes' own facts, read as Hermes reads them: homes, paths, processes, state.db, config.yaml, the note."""
