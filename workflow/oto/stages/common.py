"""Helpers shared by the stage modules: the backend's problem, provenance and kernel lists."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oto.backends.base import Kernel, Problem
from oto.datatypes import Library
from oto.deck import LibraryDeck


def problem_for(deck: LibraryDeck, profile: Mapping[str, Any]) -> Problem:
    return Problem(library=Library.parse(deck.name), arch=profile, problem_type=deck.problem_type)


def kernels_of(doc: Mapping[str, Any]) -> list[Kernel]:
    return [Kernel(k["id"], k["params"]) for k in doc.get("kernels", [])]


def stream_name(library: str, stage: str) -> str:
    return f"{library}/{stage}"
