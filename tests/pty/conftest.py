"""The real-server fixtures (a tiny Llama on CPU, offline) for the pseudo-terminal tests."""

from __future__ import annotations

from ptyhelp import realserver

offline_env = realserver.offline_env
models = realserver.models
no_leftovers = realserver.no_leftovers
