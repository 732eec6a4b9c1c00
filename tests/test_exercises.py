"""The exercise checkers: a right answer passes, each classic mistake is caught and named."""

from __future__ import annotations
