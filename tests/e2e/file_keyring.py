"""A keyring backend that keeps passwords in a JSON file, for testing `crosstalk secure`.

Selected with ``PYTHON_KEYRING_BACKEND=tests.e2e.file_keyring.FileKeyring`` and
``CT_TEST_KEYRING`` naming the file. It stands in for an OS keyring; it is not a mock of ours.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from keyring.backend import KeyringBackend


class FileKeyring(KeyringBackend):
    priority = 1  # type: ignore[assignment]  # keyring declares it as a classproperty

    def _path(self) -> Path:
        return Path(os.environ["CT_TEST_KEYRING"])

    def _load(self) -> dict[str, str]:
        path = self._path()
        return dict(json.loads(path.read_text())) if path.exists() else {}

    def get_password(self, service: str, username: str) -> str | None:
        return self._load().get(f"{service}\x00{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        data = self._load()
        data[f"{service}\x00{username}"] = password
        self._path().write_text(json.dumps(data))

    def delete_password(self, service: str, username: str) -> None:
        data = self._load()
        data.pop(f"{service}\x00{username}", None)
        self._path().write_text(json.dumps(data))
