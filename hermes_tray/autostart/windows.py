"""Windows: the per-user ``Run`` registry value (HKCU, no admin rights). Task Manager's "Startup apps" switch
does not delete it but writes a flag under ``Explorer\\StartupApproved\\Run`` (first byte odd = disabled): status
honours it and ``enable`` clears it. The registry module is injected, so the writes are tested on any OS.
"""

from __future__ import annotations

import subprocess
from contextlib import suppress
from typing import Any

from hermes_tray.autostart.base import APP_NAME, AutoStart

RUN_KEY = r"Software\Microsoft\Windows\CurrentVersion\Run"
APPROVED_KEY = r"Software\Microsoft\Windows\CurrentVersion\Explorer\StartupApproved\Run"


def _winreg() -> Any:
    import winreg  # noqa: PLC0415 — Windows only

    return winreg


class WindowsRunAutoStart(AutoStart):
    backend = "windows-run"

    def __init__(self, command: list[str] | None = None, *, helper: bool = False, registry: Any = None) -> None:
        super().__init__(command, helper=helper)
        self.reg = registry if registry is not None else _winreg()

    @property
    def value_name(self) -> str:
        return f"{APP_NAME}-helper" if self.helper else APP_NAME

    @property
    def location(self) -> str:
        return f"HKEY_CURRENT_USER\\{RUN_KEY}\\{self.value_name}"

    def value_data(self) -> str:
        """The exact REG_SZ written: the argv as Windows command-line quoting has it."""
        return subprocess.list2cmdline(self.command)

    def _query(self, key_path: str) -> Any:
        reg = self.reg
        try:
            with reg.OpenKey(reg.HKEY_CURRENT_USER, key_path, 0, reg.KEY_READ) as key:
                return reg.QueryValueEx(key, self.value_name)[0]
        except FileNotFoundError:
            return None

    def _delete(self, key_path: str) -> None:
        reg = self.reg
        with suppress(FileNotFoundError):
            with reg.OpenKey(reg.HKEY_CURRENT_USER, key_path, 0, reg.KEY_SET_VALUE) as key:
                reg.DeleteValue(key, self.value_name)

    def approved(self) -> bool:
        flag = self._query(APPROVED_KEY)
        return not (isinstance(flag, (bytes, bytearray)) and flag and flag[0] & 1)

    def is_enabled(self) -> bool:
        value = self._query(RUN_KEY)
        return isinstance(value, str) and bool(value.strip()) and self.approved()

    def registered_command(self) -> list[str] | None:
        value = self._query(RUN_KEY)
        return [value] if isinstance(value, str) and value else None

    def enable(self) -> None:
        reg = self.reg
        with reg.CreateKeyEx(reg.HKEY_CURRENT_USER, RUN_KEY, 0, reg.KEY_SET_VALUE) as key:
            reg.SetValueEx(key, self.value_name, 0, reg.REG_SZ, self.value_data())
        if not self.approved():
            self._delete(APPROVED_KEY)  # no flag = approved, as for a brand-new entry

    def disable(self) -> None:
        self._delete(RUN_KEY)
        self._delete(APPROVED_KEY)
