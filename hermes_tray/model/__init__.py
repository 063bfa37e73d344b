"""The view-models, plain Python tested without an event loop: the turns and their notes (``turns``, ``notes``),
what the views render (``viewstate``), a turn's page, History's rows, what the settings dialog edits.
"""
