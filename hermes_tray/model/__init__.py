"""The view-models: what the views show, as plain Python (no Qt): ``viewstate`` is what the menu, the turns window
and the tooltip render; ``history`` the decision journal as rows; ``settings`` what the settings dialog edits."""
