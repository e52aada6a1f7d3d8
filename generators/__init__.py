"""Generators: where candidate kernels come from (LLM methods, replays, shipped solutions).

A method is a registered plug-in, one file under ``generators/methods/``.
"""

from generators.base import Candidate, Method, MethodError
from generators.registry import create, method_names, register_method

__all__ = ["Candidate", "Method", "MethodError", "create", "method_names", "register_method"]
