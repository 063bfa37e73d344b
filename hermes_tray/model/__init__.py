"""The view-models: what the views show and what the tray does about each turn, as plain Python (no Qt).

``turns`` holds the turns (phases, failures, recent endings, ask-once, snoozes) and decides which note to show
(``notes``); ``viewstate`` is what the menu, the turns window and the tooltip render; ``page`` one turn's facts
together; ``history`` the decision journal as rows; ``settings`` what the settings dialog edits. The controller
wires them to Qt (signals, the write worker, timers, threads); the views render them. Tested without an event loop.
"""
