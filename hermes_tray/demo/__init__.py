"""The demo: a simulated Hermes backend and throwaway homes to try hermes-tray on safely."""
