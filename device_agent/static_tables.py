"""The tables of the static policy (``static_policy.py`` walks the source with them).

Each table is either an allow-list (what honest wrapper code uses; everything else is refused)
or a deny-list of names that give a candidate a way out of the harness. The tests in
``tests/device_agent/test_static_policy.py`` hold their own copy of every entry, so dropping
one here fails a test.
"""

from __future__ import annotations

from operators.spec import Kind

# ---- imports ------------------------------------------------------------------------------------
# Root modules a candidate may import. Everything else is refused: os, sys, subprocess, ctypes,
# importlib, inspect, builtins, gc, threading, pickle, types, io, numpy ...
ALLOWED_IMPORT_ROOTS = frozenset({
    "torch", "triton", "math", "cmath", "functools", "typing", "itertools", "operator",
    "dataclasses", "collections", "numbers", "enum", "abc", "__future__", "warnings", "copy",
    "logging",  # every third-party Triton library logs; the sandbox keeps its handlers harmless
})
# Parts of allowed modules that load code or configuration from files and sockets
# (``logging.config.listen`` evaluates what arrives on a socket).
MODULES_REFUSED = frozenset({"logging.config", "logging.handlers"})

# ---- triton -------------------------------------------------------------------------------------
# What honest wrapper code reaches under ``triton.``: the decorators, launch helpers, the language,
# the exceptions a launch can raise, host-side TMA descriptors and the device queries of Triton's
# tutorials (``DEVICE = triton.runtime.driver.active.get_active_torch_device()``). An entry allows
# itself, what is under it, and the bare path to it (``from triton.runtime import driver``).
# Refused: the rest of triton.runtime (the launcher, binaries, caches, the autotuner's internals),
# triton.compiler, triton.knobs (where the harness's launch hooks live), triton.backends,
# triton.testing (do_bench, set_gpu_clock), the rest of triton.tools, triton._C.
TRITON_ALLOWED = frozenset({
    "jit", "autotune", "heuristics", "Config", "cdiv", "next_power_of_2", "language",
    "constexpr_function", "must_use_result", "reinterpret", "set_allocator", "OutOfResources",
    "CompilationError", "TritonError", "InterpreterError", "__version__",
    "tools.tensor_descriptor",
    "runtime.driver.active.get_active_torch_device", "runtime.driver.active.get_current_device",
    "runtime.driver.active.get_current_target", "runtime.driver.active.utils.get_device_properties",
})
# Decorators whose function bodies are Triton (device code or its interpreter), not wrapper code.
JIT_DECORATORS = frozenset({"triton.jit", "triton.autotune", "triton.heuristics",
                            "triton.language.core.builtin"})

# ---- torch --------------------------------------------------------------------------------------
# torch.* callables a compute problem's wrappers may use: allocation, views, metadata.
TORCH_ALLOWED = frozenset({
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
    "full_like", "broadcast_tensors", "broadcast_shapes", "broadcast_to", "is_tensor",
    "is_floating_point", "is_complex", "result_type", "promote_types", "can_cast",
    "get_default_dtype", "finfo", "iinfo", "device", "dtype", "Size", "Generator",
    "cuda.is_available", "cuda.current_device", "cuda.device_count", "cuda.get_device_properties",
    "cuda.get_device_capability", "cuda.get_device_name", "cuda.device", "cuda.set_device",
    "cuda.synchronize", "version.hip", "no_grad", "inference_mode",
    "tensor",  # a small tensor of Python values (shapes, strides) for a kernel to read
    "view_as_real", "view_as_complex",  # views: how a kernel reaches complex data
    # function forms of the views whose method forms every kind allows (``x.reshape(s)``)
    "reshape", "squeeze", "unsqueeze", "flatten", "unflatten", "permute", "transpose",
    "swapaxes", "movedim", "t", "narrow", "select", "as_strided", "chunk", "split", "unbind",
    "tensor_split", "atleast_1d", "atleast_2d", "atleast_3d", "numel",
})
TORCH_ALLOWED_BY_KIND: dict[Kind, frozenset[str]] = {
    # a random op seeds its kernels from torch's seed (plus its own call counter)
    Kind.RANDOM: frozenset({"initial_seed"}),
    Kind.VIEW: frozenset({"expand_copy"}),
}
TORCH_DENIED_BY_KIND: dict[Kind, frozenset[str]] = {
    # An allocation problem may not call the allocator that *is* the answer (issue #7 refines).
    Kind.ALLOC: frozenset({"zeros", "zeros_like", "ones", "ones_like", "full", "full_like"}),
}
TORCH_DTYPES = frozenset({"float32", "float16", "bfloat16", "float64", "int32", "int64", "int8",
                          "int16", "uint8", "bool", "complex64", "complex128", "float8_e4m3fn",
                          "float8_e5m2"})
# torch names refused wherever they appear (called or not), by rule. A name matches itself and
# everything under it (``ops`` matches ``ops.aten.add``).
TORCH_REFUSED: dict[str, frozenset[str]] = {
    "torch-ops": frozenset({"ops"}),
    "cuda-graph": frozenset({"compile", "compiler", "cuda.graph", "cuda.graphs", "cuda.CUDAGraph",
                             "cuda.make_graphed_callables"}),
    "stream": frozenset({"cuda.Stream", "cuda.stream", "cuda.set_stream", "cuda.Event",
                         "cuda.ExternalStream", "cuda.streams", "Stream", "Event",
                         "accelerator.set_stream"}),
    # native code, code in strings or pickles, other processes, files and the harness's tools:
    # C++/CUDA source compiled and loaded, hub downloads, a pluggable allocator's shared library,
    # the raw CUDA runtime, benchmark timers that exec statements, data-loader workers, the
    # environment collector's shell commands, tunable-op files, the profiler the profile layer uses
    "library-internals": frozenset({
        "library", "classes", "utils.cpp_extension", "hub", "load", "package", "jit",
        "serialization", "multiprocessing", "distributed", "cuda.cudart", "cuda.jiterator",
        "cuda.memory", "cuda.CUDAPluggableAllocator", "cuda.change_current_allocator",
        "utils.benchmark", "utils.data", "utils.collect_env", "utils.model_zoo", "cuda.tunable",
        "profiler", "autograd.profiler"}),
}

# ---- other allowed modules ----------------------------------------------------------------------
# Public names of allowed modules that evaluate strings as code (a string annotation is code to
# them).
EVALUATING_NAMES = frozenset({"typing.get_type_hints", "typing.ForwardRef"})
# operator-module spellings of torch compute and of calls by name.
OPERATOR_REFUSED = {"operator.matmul": "matmul-operator", "operator.imatmul": "matmul-operator",
                    "operator.methodcaller": "dynamic-attribute"}

# ---- builtins and escape attributes -------------------------------------------------------------
# Builtins that run or load code, read namespaces or files, or delete attributes: refused wherever
# the name can reach the builtin (called, aliased, passed to functools.partial ...).
DENIED_BUILTINS = frozenset({"exec", "eval", "compile", "__import__", "globals", "locals", "vars",
                             "breakpoint", "input", "open", "delattr", "__build_class__"})
# Builtins that are fine when called with a literal name but hide the name when passed around.
NAME_TAKING_BUILTINS = frozenset({"getattr", "setattr"})
# Names that hand out the builtins or the import machinery, and ``__match_args__`` (it names the
# attributes a class pattern reads, so a class defining it turns ``case C(x)`` into a getattr).
ESCAPE_NAMES = frozenset({"__builtins__", "__loader__", "__spec__", "__match_args__"})
# Attributes that walk the type graph, reach a namespace, a frame or code, bypass attribute rules
# or hold strings that typing and functools.singledispatch evaluate; refused as attributes, in a
# literal getattr, a match class pattern or a string naming one. ``__class__`` is not here:
# honest library code reads ``self.__class__.__name__``, and the walk from a class onwards
# (``__base__``, ``__mro__``, ``__subclasses__``) is refused on its own.
ESCAPE_ATTRIBUTES = frozenset({
    "__base__", "__bases__", "__mro__", "__subclasses__", "__globals__",
    "__builtins__", "__code__", "__closure__", "__dict__", "__self__", "__objclass__",
    "__getattribute__", "__getattr__", "__setattr__", "__delattr__", "__traceback__",
    "__reduce__", "__reduce_ex__", "__loader__", "__spec__", "__import__", "__defaults__",
    "__kwdefaults__", "__annotations__", "__match_args__",
    "tb_frame", "tb_next", "f_back", "f_globals", "f_locals", "f_builtins", "f_code",
    "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code",
})
# Attribute names of modules that are a way out, refused on any object (a module reached through
# a container or a call, where the alias is lost).
ESCAPE_MODULE_ATTRIBUTES = frozenset({
    "os", "sys", "builtins", "subprocess", "ctypes", "importlib", "inspect", "gc", "posix", "nt",
    "marshal", "pty", "multiprocessing", "socket", "runpy", "pickle", "shutil",
    "_os", "_sys", "_imp", "_thread", "_posixsubprocess", "_ctypes",
})

# ---- compute ------------------------------------------------------------------------------------
# Tensor methods that compute an answer, and their in-place ``_`` forms. Names shared with
# Python's own containers and strings (add, sort, split, index, count, copy …) are left to the
# runtime layer to avoid flagging honest code such as ``seen.add(key)``.
_COMPUTE_NAMES = frozenset({
    "abs", "abs_", "acos", "acosh", "add_", "addcdiv", "addcmul", "addmm", "addmv",
    "all", "amax", "amin", "any", "argmax", "argmin", "argsort", "asin", "atan", "atan2", "baddbmm",
    "bernoulli", "bernoulli_", "bmm", "ceil", "clamp", "clamp_", "clip", "cos", "cosh", "cross",
    "cummax", "cummin", "cumprod", "cumsum", "cumsum_", "diff", "digamma", "div", "div_", "dot",
    "eq", "erf", "erfc", "erfinv", "exp", "exp_", "exp2", "expm1", "exponential_", "fmax", "fmin",
    "floor", "floor_divide", "fmod", "frac", "gather", "ge", "gt", "heaviside", "hypot", "i0",
    "index_add", "index_add_", "index_copy", "index_fill", "index_put", "index_put_",
    "index_select", "kthvalue", "le", "lerp", "lgamma", "log", "log10", "log1p", "log2",
    "log_softmax", "logaddexp", "logaddexp2", "logcumsumexp", "logical_and", "logical_not",
    "logical_or", "logit", "logsumexp", "lt", "masked_fill", "masked_fill_", "masked_scatter",
    "masked_select", "matmul", "max", "maximum", "mean", "median", "min", "minimum", "mm", "mul",
    "mul_", "mv", "nan_to_num", "nanmean", "nansum", "ne", "neg", "neg_", "norm", "normal_",
    "outer", "polygamma", "pow", "pow_", "prod", "reciprocal", "relu", "remainder", "renorm",
    "repeat", "repeat_interleave", "roll", "rot90", "round", "rsqrt", "scatter", "scatter_",
    "scatter_add", "scatter_add_", "sigmoid", "sign", "sgn", "sin", "sinh", "softmax", "sqrt",
    "square", "std", "sub", "sub_", "sum", "tan", "tanh", "tensordot", "topk", "trace", "tril",
    "triu", "true_divide", "trunc", "uniform_", "var", "where", "xlogy", "msort", "unique",
    "bincount", "histc", "flip", "fliplr", "flipud", "take", "take_along_dim", "einsum",
    "addbmm", "addr", "cumulative_trapezoid", "logical_xor", "sinc", "softplus",
    "rsub", "float_power", "copysign", "nextafter", "ldexp", "frexp", "kron",
    "chain_matmul", "inner", "vdot", "cov", "corrcoef", "cdist", "dist",
})
COMPUTE_METHODS = _COMPUTE_NAMES | {n + "_" for n in _COMPUTE_NAMES if not n.endswith("_")}
# Arithmetic dunders: ``a.__matmul__(b)`` is ``a @ b`` spelled so the operator is not visible.
DUNDER_ARITHMETIC = frozenset(
    f"__{r}{op}__" for op in ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow",
                              "neg", "abs", "and", "or", "xor", "lshift", "rshift")
    for r in ("", "r", "i"))
# ``.item()`` is not among them: it reaches the dispatch guard as ``_local_scalar_dense``, which
# judges what it reads when it runs (the candidate's own kernel results are allowed).
CPU_ROUND_TRIPS = frozenset({"cpu", "numpy", "tolist"})

# ---- severity -----------------------------------------------------------------------------------
# Rules whose cheat a runtime layer catches when the code runs (docs/anticheat.md, "Why each
# rule"): a finding of theirs is a recorded warning, never a rejection, so code that is never
# reached (an overload nobody calls) or a harmless spelling costs an honest candidate nothing.
# torch compute (``torch-call``, ``tensor-method``, ``matmul-operator``) reaches the dispatcher,
# where the ``runtime`` guard sees it; host compute behind a CPU round trip (``cpu-roundtrip``)
# writes its answer back through allowed data movement, which ``launches`` and ``ghost`` catch,
# and the guard judges ``.item()`` (refused on data no kernel of the candidate was handed).
WARNING_RULES = frozenset({"torch-call", "tensor-method", "matmul-operator", "cpu-roundtrip"})
