"""Talking to a Hermes backend: which one to run, the running one of a home, JSON-RPC over stdio or WebSocket."""
