"""Assay's warm pytest runner for mutant jobs.

Imports pytest and its built-in plugins once, runs one throw-away session on a two-test suite
of its own (so lazily compiled regexes, imports and caches are warm and shared by every fork),
then serves one request per line on stdin: fork, and in the child run exactly what
`python -m pytest ARGS` (or `python -c CODE ARGS`, for the coverage baseline) would run, in the
request's tree, with the request's environment and output files. Nothing of the project is imported before the fork,
so every child loads the (mutated) product code from source. The parent answers each request
with the child's pid (so the caller can kill its process group) and then its exit status.
"""

import __future__
import gc
import importlib.metadata
import importlib.util
import json
import os
import re
import stat
import sys
import sysconfig
import types


def child(request, base_path, channel_fds, preloaded):
    import runpy
    import tempfile
    import traceback

    code = 1
    try:
        os.setpgid(0, 0)
        for fd in channel_fds:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, fd)
            os.close(out)
        os.chdir(request["cwd"])
        for top in preloaded:
            if os.path.exists(top + ".py") or os.path.isdir(top):
                for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
                    del sys.modules[name]
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None
        # `python -m` and `python -c` put the working directory first on the path.
        sys.path[:] = [request["cwd"]] + base_path
        if "code" in request:
            sys.argv = ["-c"] + request["args"]
            exec(compile(request["code"], "<string>", "exec"), {"__name__": "__main__"})
        else:
            sys.argv = ["-m"] + request["args"]
            runpy.run_module("pytest", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exit:
        if exit.code is None:
            code = 0
        elif isinstance(exit.code, int):
            code = exit.code
        else:
            print(exit.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        end_child(code)


def end_child(code):
    """Ends a forked child as the interpreter would end a run: exit handlers, flushed output,
    the exit status; never returning into the server's code."""
    import atexit

    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(int(code) & 0xFF)


def become_subreaper():
    """Orphans of a job's processes (a daemon started with `setsid`, or double-forked) are
    reparented to this server, not to whatever is above it, so that `sweep_orphans` can end
    them when the job ends. Without the call (not Linux) daemons are left to the sandbox."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:
        pass


def wait_fork(pid, limit_ms):
    """Waits for the job's fork, killing its process group once `limit_ms` has passed (None:
    no limit). The server kills it, not the worker: inside the sandbox's PID namespace the
    fork's number means nothing to the host. Returns the wait status and whether it was cut.
    A pidfd wakes the wait the moment the fork exits (every mutant pays this wait)."""
    import select
    import signal

    if limit_ms is not None:
        try:
            pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            pidfd = None  # an old Python or kernel: the timer below does the same
        if pidfd is not None:
            try:
                ready, _, _ = select.select([pidfd], [], [], limit_ms / 1000.0)
            finally:
                os.close(pidfd)
            cut = not ready
        else:
            cut = wait_with_timer(pid, limit_ms)
        if cut:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        return os.waitpid(pid, 0)[1], cut
    return os.waitpid(pid, 0)[1], False


def wait_with_timer(pid, limit_ms):
    """Whether `pid` was still running after `limit_ms`, waited for without a pidfd: polling
    at most every 20 ms."""
    import time

    deadline = time.monotonic() + limit_ms / 1000.0
    pause = 0.001
    while time.monotonic() < deadline:
        # WNOWAIT: the fork stays to be reaped by the caller's waitpid.
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.02)
    return True


def cut_flag(cut):
    """What an answer adds when the server killed the fork at its limit."""
    return {"timed_out": True} if cut else {}


def kill_group(pid):
    """Kills what a finished fork left in its process group."""
    import signal

    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def sweep_orphans():
    """Kills every process left as this server's child once a job's fork was waited for: the
    server has no other child, so each one is something the job left behind. Repeats until
    none is left, since a killed daemon's own children are reparented here in turn."""
    import signal

    try:
        # No child at all, the usual case: no need to read every process's status.
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return
    except (AttributeError, OSError):
        pass  # no waitid here: the scan below decides
    me = os.getpid()
    for _ in range(100):
        orphans = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    # The command name may hold spaces or parentheses: read past the last ")".
                    fields = stat.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == me:
                    orphans.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
        if not orphans:
            return
        for pid in orphans:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in orphans:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def share_rewrites(directory):
    """Every fresh session in a fork re-imports the test modules, and pytest rewrites each
    one's asserts from its source: with no bytecode cache (each mutant's tree is new and
    bytecode writing is off) that was most of a whole-suite session's collection. The forks
    share the rewritten code instead, in DIRECTORY, by content: the source bytes, the
    interpreter's bytecode magic, pytest's version and the one ini option the rewrite reads.
    This is pytest's own cache of rewritten modules, keyed by content instead of by path,
    except that a module whose rewrite warns is never stored, so it warns in every session as
    in a fresh one. An entry is renamed into place, never read half-written."""
    import hashlib
    import importlib.util
    import marshal
    import warnings

    import _pytest.assertion.rewrite as rewrite
    import pytest

    rewrite_test = rewrite._rewrite_test

    def renamed(code, filename):
        consts = tuple(renamed(k, filename) if isinstance(k, types.CodeType) else k
                       for k in code.co_consts)
        return code.replace(co_filename=filename, co_consts=consts)

    def shared_rewrite_test(fn, config):
        source = fn.read_bytes()
        digest = hashlib.sha256()
        pass_hook = config.getini("enable_assertion_pass_hook")
        for part in (importlib.util.MAGIC_NUMBER, pytest.__version__.encode(),
                     b"pass-hook" if pass_hook else b"", source):
            digest.update(len(part).to_bytes(8, "little") + part)
        entry = os.path.join(directory, digest.hexdigest())
        try:
            with open(entry, "rb") as cached:
                code = marshal.load(cached)
            if isinstance(code, types.CodeType):
                return importlib.util.source_hash(source), renamed(code, str(fn))
        except (OSError, EOFError, ValueError, TypeError):
            pass
        with warnings.catch_warnings(record=True) as issued:
            warnings.simplefilter("always")
            source_hash, code = rewrite_test(fn, config)
        # Issued again as the rewrite issued them (explicit file and line, no registry), under
        # the session's own filters.
        for warning in issued:
            warnings.warn_explicit(warning.message, warning.category, warning.filename,
                                   warning.lineno)
        if not issued:
            try:
                partial = f"{entry}.{os.getpid()}"
                with open(partial, "wb") as out:
                    marshal.dump(code, out)
                os.replace(partial, entry)
            except OSError:
                pass
        return source_hash, code

    rewrite._rewrite_test = shared_rewrite_test


WARM_UP_SUITE = """
import pytest


@pytest.fixture
def page_size():
    return 5


@pytest.mark.parametrize("total", [10, 11])
def test_pages(total, page_size):
    assert -(-total // page_size) >= 2


class TestBounds:
    def test_start(self):
        assert (2 - 1) * 5 == 5
"""


def warm_up():
    """One pytest session in a temporary directory, its output discarded. Everything it
    leaves behind that a job could see (its module, its path entries) is removed; pytest
    undoes its own configuration when a session ends, as it must for repeated in-process runs.
    A failure only means colder forks."""
    import shutil
    import tempfile

    import pytest

    saved_path = list(sys.path)
    saved_modules = set(sys.modules)
    saved_cwd = os.getcwd()
    saved_fds = (os.dup(1), os.dup(2))
    # The project's own options and plugins are for its runs, not for this suite.
    saved_env = {name: os.environ.pop(name) for name in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")
                 if name in os.environ}
    directory = None
    try:
        directory = tempfile.mkdtemp(prefix="assay-warm-up-")
        with open(os.path.join(directory, "test_warm_up.py"), "w") as suite:
            suite.write(WARM_UP_SUITE)
        # Its own ini file makes the directory the root: no ini or conftest.py above it is read.
        with open(os.path.join(directory, "pytest.ini"), "w") as ini:
            ini.write("[pytest]\n")
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
        os.chdir(directory)
        pytest.main([
            "-x", "-q", "-p", "no:cacheprovider", "-o", "junit_family=xunit1",
            "--junitxml", os.path.join(directory, "report.xml"),
            "--continue-on-collection-errors", "test_warm_up.py",
        ])
    except BaseException:
        pass
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved_fds[0], 1)
        os.dup2(saved_fds[1], 2)
        for fd in saved_fds:
            os.close(fd)
        os.chdir(saved_cwd)
        os.environ.update(saved_env)
        sys.path[:] = saved_path
        for name in set(sys.modules) - saved_modules:
            if name == "test_warm_up" or name.startswith("test_warm_up."):
                del sys.modules[name]
        if directory:
            shutil.rmtree(directory, ignore_errors=True)
        # The jobs' own temporary directory is chosen afresh in each child.
        tempfile.tempdir = None


# ---------------------------------------------------------------------------------------------
# Session servers: collect once, fork per mutant, hot-swap the mutated code.
#
# A request {"session": {"cwd", "args", "code"?, "env"}} turns this server into a session
# server for one unmutated tree: it runs pytest's configuration and full collection there once
# (ARGS are the job's options without its node ids), and at the end of
# `pytest_collection_modifyitems` serves, one request per line, instead of running tests. Each
# request names the mutated module (its path in the tree), the job's tree (where the mutated
# file is), the node ids to run and the job's JUnit path. The server compiles the original and
# the mutated source, pairs their code objects, and decides whether the mutant can be applied
# to live function objects; if not it answers {"fallback": WHY} and the caller runs the mutant
# the usual way. Otherwise it forks; the child sets `__code__` of every live function whose
# code changed (for a module-level mutant it also runs the top-level code again: see
# `apply_static`), keeps only the requested items (all of them when none is named), points the
# JUnit report at the job's path and returns into pytest, which runs those items and ends the
# session as it always does.
# ---------------------------------------------------------------------------------------------


class Fallback(Exception):
    """The mutant cannot be hot-swapped; the message says why."""


def _code_consts(code):
    return [k for k in code.co_consts if isinstance(k, types.CodeType)]


def _walk(code):
    yield code
    for inner in _code_consts(code):
        yield from _walk(inner)


def _own(code):
    """The code object without its nested code objects and its column positions: what
    executing it does apart from the functions it creates."""
    consts = tuple("\0assay nested code\0" if isinstance(k, types.CodeType) else k
                   for k in code.co_consts)
    return code.replace(co_consts=consts, co_linetable=b"")


CO_OPTIMIZED = 0x0001  # set on function bodies (lambdas and comprehensions too), not on
                       # module or class bodies


def _pair(original, mutated, changed):
    """Pairs the two trees of code objects by position; collects (original, mutated) for each
    code object that differs, with whether its own instructions or constants differ."""
    if original == mutated:
        return
    inner_o, inner_m = _code_consts(original), _code_consts(mutated)
    if len(inner_o) != len(inner_m) or any(
            (a.co_qualname, a.co_firstlineno) != (b.co_qualname, b.co_firstlineno)
            for a, b in zip(inner_o, inner_m)):
        # A class body that only loses functions (a method dropped, a comprehension gone):
        # the class made again lacks them, and `apply_static` deletes them from the live one.
        inner_o = _kept(original, inner_o, inner_m)
        if inner_o is None:
            raise Fallback(f"the functions defined in {original.co_qualname} change")
    own = original.co_qualname != mutated.co_qualname or _own(original) != _own(mutated)
    if (original.co_freevars, original.co_cellvars) != (mutated.co_freevars, mutated.co_cellvars):
        raise Fallback(f"the free variables of {original.co_qualname} change")
    changed.append((original, mutated, own))
    for a, b in zip(inner_o, inner_m):
        _pair(a, b, changed)


def _kept(original, inner_o, inner_m):
    """The code objects of class body ORIGINAL that its mutant keeps, in order, when the
    mutant's (INNER_M) are ORIGINAL's (INNER_O) with some left out; else None."""
    if original.co_flags & CO_OPTIMIZED or original.co_name == "<module>":
        return None
    key = lambda code: (code.co_qualname, code.co_firstlineno)  # noqa: E731
    kept, wanted = [], [key(code) for code in inner_m]
    for code in inner_o:
        if len(kept) < len(wanted) and key(code) == wanted[len(kept)]:
            kept.append(code)
    return kept if len(kept) == len(wanted) else None


# Pure C functions a function that ran while collecting may call (`_pure_c`): builtins that
# change nothing but what they create, and methods of values no call can change.
C_BUILTIN = re.compile(r"<built-in method builtins\.(\w+)>")
C_METHOD = re.compile(r"<method '(\w+)' of '([\w.]+)' objects>")
IMMUTABLE_TYPES = frozenset({"str", "bytes", "int", "float", "complex", "bool", "tuple",
                             "frozenset", "re.Pattern", "re.Match"})
READING_METHODS = frozenset({"items", "keys", "values", "get", "copy", "count", "index",
                             "__contains__", "__getitem__", "__len__", "__iter__"})


def _pure_c(label, top_level=False):
    """Whether the C function the profiler names LABEL changes nothing that existed before the
    call. A test module's top-level code may also build its own classes."""
    match = C_BUILTIN.fullmatch(label)
    if match:
        return match.group(1) in PURE_BUILTINS
    match = C_METHOD.fullmatch(label)
    if match:
        method, kind = match.groups()
        return kind in IMMUTABLE_TYPES or (kind in ("dict", "list", "set") and method in READING_METHODS)
    return top_level and label.startswith("<built-in method __new__ of type object")


def _pytest_code(filename):
    parts = filename.split(os.sep)
    return "_pytest" in parts or "pluggy" in parts or parts[-1] == "pytest.py" \
        or parts[-2:] == ["pytest", "__init__.py"]


def _stores_outside(code):
    """Where function CODE may store outside itself, or None: a store into a global or a
    closure's cell, or into an attribute or item of anything but the instance an `__init__`
    makes (its first argument)."""
    import dis
    if not code.co_flags & CO_OPTIMIZED:
        return "its namespace (it is no function)"
    instructions = [i for i in dis.get_instructions(code) if i.opname != "CACHE"]
    instance = code.co_varnames[0] if code.co_name == "__init__" and code.co_argcount else None
    if any(i.opname in ("STORE_FAST", "DELETE_FAST") and i.argval == instance
           for i in instructions):
        instance = None  # rebound somewhere: not always the new instance
    loads = []
    for instruction in instructions:
        op = instruction.opname
        if op in ("STORE_GLOBAL", "DELETE_GLOBAL", "STORE_DEREF", "DELETE_DEREF"):
            return str(instruction.argval)
        depth = STORES.get(op)
        if depth is not None:
            if len(loads) < depth or any(o not in SIMPLE_LOADS for o, _ in loads[-depth:]):
                return f"the result of an expression ({op})"
            kind, target = loads[-depth]
            if not (kind == "LOAD_FAST" and target == instance):
                return str(target)
        loads.append((op, instruction.argval))
    return None


def _loaded(filename):
    """The loaded module whose file is FILENAME, or None."""
    return next((m for m in list(sys.modules.values())
                 if getattr(m, "__file__", None) == filename), None)


def _shared_with_others(filename):
    """What another module holds of the test module FILENAME's own values (the module itself,
    or a value its import made, by identity), or None."""
    module = _loaded(filename)
    if module is None:
        return "module is not loaded"
    own = {}
    for key, value in vars(module).items():
        if key in IMPORT_NAMES or type(value) in SCALARS or type(value) is types.ModuleType:
            continue
        if isinstance(value, (type, types.FunctionType)) and value.__module__ != module.__name__:
            continue  # imported from elsewhere
        own[id(value)] = key
    for other in list(sys.modules.values()):
        if other is module or not isinstance(getattr(other, "__dict__", None), dict):
            continue
        for key, value in list(vars(other).items()):
            if value is module:
                return f"module is imported by {other.__name__}"
            if id(value) in own and key not in IMPORT_NAMES:
                return f"{own[id(value)]} is held by {other.__name__}"
    return None


class Module:
    """What the server knows of one product module: its live functions, by code."""

    def __init__(self, root, path, called, test_files=frozenset()):
        self.path = path
        self.test_files = test_files  # the collected test modules' files, real paths
        self.callers = None  # code or C function label -> the code objects that called it
        self.callees = None  # code or C function label -> what it called
        target = os.path.realpath(os.path.join(root, path))
        modules = [m for m in list(sys.modules.values())
                   if isinstance(getattr(m, "__file__", None), str)
                   and os.path.realpath(m.__file__) == target]
        if len(modules) != 1:
            raise Fallback(f"{path} was imported {len(modules)} times during collection")
        self.module = modules[0]
        self.filename = modules[0].__file__
        with open(target, "rb") as source:
            self.source = source.read()
        self.original = compile(self.source, self.filename, "exec", dont_inherit=True)
        self.bodies = None  # the functions a mutant can be compiled alone in (`FunctionBody`)
        known = set(_walk(self.original))
        self.functions = []
        self.generators = []
        # The collected session is frozen (see `serve`); frozen objects are not listed.
        gc.unfreeze()
        everything = gc.get_objects()
        gc.freeze()
        for thing in everything:
            kind = type(thing)
            if kind is types.FunctionType:
                if thing.__code__.co_filename == self.filename:
                    if thing.__code__ not in known:
                        raise Fallback(f"a live function of {path} is not compiled from its source")
                    self.functions.append(thing)
            elif kind in (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType):
                code = getattr(thing, "gi_code", None) or getattr(thing, "cr_code", None) \
                    or getattr(thing, "ag_code", None)
                if code is not None and code.co_filename == self.filename:
                    self.generators.append(code)
        # Code run while configuring and collecting: a function changed there shaped the
        # collected items (parametrize arguments, import-time values) and needs a fresh session.
        self.called = {code for code, _ in called.values()
                       if not isinstance(code, str) and code.co_filename == self.filename}
        self.profile = called
        self.static = None  # why its module-level code cannot run again, or a StaticCheck

    def static_check(self):
        if self.static is None:
            try:
                self.static = StaticCheck(self)
            except Fallback as why:
                self.static = why
        if isinstance(self.static, Fallback):
            raise self.static
        return self.static

    def swaps(self, mutated_source):
        """The live functions to patch with their mutated code, the mutated module's code,
        when its top-level code must run again the module's `StaticCheck`, and the test files
        whose items the fork must hold back (`collected_by`)."""
        alone = self.function_changes(mutated_source)
        if alone is not None:
            swaps, again, held = self.classify(alone)
            if not again:
                return swaps, None, None, held
        try:
            mutated = compile(mutated_source, self.filename, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as error:
            raise Fallback(f"the mutant does not compile: {error}")
        changed = []
        _pair(self.original, mutated, changed)
        swaps, again, held = self.classify(changed)
        return swaps, mutated, self.static_check() if again else None, held

    def function_changes(self, mutated_source):
        """The changed code objects of a mutant that differs from the original only inside one
        function's body, compiled from that function alone (a fraction of the module's compile,
        which every mutant paid); None when it is not such a mutant."""
        if self.bodies is None:
            self.bodies = FunctionBody.all_of(self.source, self.original.co_flags & FUTURE_FLAGS)
        start, end, mutated_end = _changed_span(self.source, mutated_source)
        for body in self.bodies:
            if body.start <= start and end <= body.end:
                break
        else:
            return None
        if self.source.count(b"\n", start, end) != mutated_source.count(b"\n", start, mutated_end):
            return None  # every later line moves: the module's functions change
        original = body.original_code(self.original, self.source, self.filename)
        if original is None:
            return None
        try:
            mutated = body.compile(mutated_source, body.text_end + mutated_end - end, self.filename)
        except (SyntaxError, ValueError) as error:
            raise Fallback(f"the mutant does not compile: {error}")
        changed = []
        _pair(original, mutated, changed)
        return changed

    def classify(self, changed):
        """The swaps for CHANGED (pairs of code objects), whether the module's top-level code
        must run again, and the test files whose items the fork must hold back; raises Fallback
        when the change cannot be swapped in."""
        if not changed:
            raise Fallback("the mutant compiles to the original code")
        # The top-level code changes, or a function only the module's import ran: the child
        # runs the top-level code again (see `apply_static`).
        again = False
        held = set()
        by_code = {}
        for original, replacement, own in changed:
            if original is self.original:
                again = again or own
                continue
            if own and not original.co_flags & CO_OPTIMIZED:
                # A class body only the import ran: the top-level code runs again and the
                # live class takes the changed plain attributes (`apply_static`).
                try:
                    import_only = self.static_check().import_only
                except Fallback as why:
                    raise Fallback(f"code outside any function changes ({original.co_qualname}) "
                                   f"and the module cannot run again: {why}")
                if original not in import_only:
                    raise Fallback(f"code outside any function changes ({original.co_qualname})")
                again = True
                continue
            if own and original in self.called:
                try:
                    import_only = self.static_check().import_only
                except Fallback:
                    import_only = ()
                if original in import_only:
                    again = True
                else:
                    held |= self.collected_by(original, replacement)
            if original in self.generators:
                raise Fallback(f"a generator of {original.co_qualname} was made during collection")
            if by_code.setdefault(original, replacement) != replacement:
                raise Fallback(f"two identical functions {original.co_qualname} change differently")
        if held and again:
            raise Fallback("code that ran while collecting changes with the module's top-level code")
        swaps = [(f, by_code[f.__code__]) for f in self.functions if f.__code__ in by_code]
        return swaps, again, held

    def collected_by(self, original, mutated):
        """The test files whose import alone ran ORIGINAL (a function of this module) while
        collecting, when that is provably all it did then: their items were collected with
        what it returned, so the fork holds them back, and the items of every other file are
        what a fresh session of the mutant collects. Raises Fallback otherwise. Provably: every
        caller, up to those files' top-level code, is a function of this file or of those
        files that stores nothing but into the instance its `__init__` makes
        (`_stores_outside`), as does everything they call that is not a pure builtin
        (`_pure_c`) or a standard module's (`PURE_MODULES`), and nothing else holds what
        those files' imports made (`_shared_with_others`)."""
        name = original.co_qualname
        if self.callers is None:
            # By code object (equal, not the same: ORIGINAL is compiled again from the file).
            self.callers, self.callees = {}, {}
            for caller, callees in self.profile.values():
                self.callees.setdefault(caller, []).extend(callees)
                for callee in callees:
                    self.callers.setdefault(callee, []).append(caller)
        files, chain, todo = set(), set(), [original]
        while todo:
            code = todo.pop()
            for caller in self.callers.get(code, ()):
                if isinstance(caller, str):
                    raise Fallback(f"{name} ran during collection, called by {caller}")
                if caller.co_filename in self.test_files and not caller.co_flags & CO_OPTIMIZED:
                    files.add(caller.co_filename)  # the test module's or a test class's body
                elif caller.co_flags & CO_OPTIMIZED and caller.co_filename in \
                        self.test_files | {self.filename}:
                    if caller not in chain:
                        chain.add(caller)
                        todo.append(caller)
                else:
                    raise Fallback(f"{name} ran during collection, called by {caller.co_qualname}")
        if not files:
            raise Fallback(f"{name} ran during collection outside any test module's import")
        for code in [original, mutated] + sorted(chain, key=lambda c: c.co_qualname):
            where = _stores_outside(code)
            if where:
                raise Fallback(f"{name} ran during collection and {code.co_qualname} stores "
                               f"into {where}")
        self._pure_callees(name, chain | {original}, files)
        for filename in files:
            shared = _shared_with_others(filename)
            if shared:
                raise Fallback(f"{name} ran while collecting {os.path.basename(filename)}, "
                               f"whose {shared}")
        return files

    def _pure_callees(self, name, codes, files):
        """Raises Fallback unless everything CODES (functions) called while collecting is
        pure, and the top-level code of FILES (their module and class bodies) stores into
        nothing but their own and calls nothing but pure code, pytest's (a mark decorating a
        test) and the import system's: see `collected_by`."""
        seen, todo = set(codes), [(code, False) for code in codes]
        for code, _ in self.profile.values():
            if not isinstance(code, str) and code.co_filename in files \
                    and not code.co_flags & CO_OPTIMIZED and code not in seen:
                module = _loaded(code.co_filename)
                where = _foreign_store(code, vars(module), module.__name__) if module else "it"
                if where:
                    raise Fallback(f"{name} ran while collecting "
                                   f"{os.path.basename(code.co_filename)}, whose top-level code "
                                   f"stores into {where}")
                seen.add(code)
                todo.append((code, True))
        while todo:
            code, top = todo.pop()
            for callee in self.callees.get(code, ()):
                if isinstance(callee, str):
                    if _pure_c(callee, top):
                        continue
                    raise Fallback(f"{name} ran during collection beside {callee}")
                if callee in seen:
                    continue
                seen.add(callee)
                module = _module_of_file(callee.co_filename)
                if _pure_module(module) or top and (
                        module in IMPORT_SYSTEM or _pytest_code(callee.co_filename)):
                    continue  # a standard module's (caches at most), an import, a test's mark
                if callee.co_filename in self.test_files | {self.filename} \
                        and callee.co_flags & CO_OPTIMIZED and not _stores_outside(callee):
                    todo.append((callee, False))
                    continue
                raise Fallback(f"{name} ran during collection beside {callee.co_qualname}")


FUTURE_FLAGS = 0
for _feature in __future__.all_feature_names:
    FUTURE_FLAGS |= getattr(__future__, _feature).compiler_flag
CODING_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=]")


def _changed_span(original, mutated):
    """(START, END, MUTATED_END): MUTATED is ORIGINAL with ORIGINAL[START:END] replaced by
    MUTATED[START:MUTATED_END], the shortest such span. Halving with slice compares: each is
    a memcmp, where a loop over 30 KB would cost more than the compile it saves."""
    shortest = min(len(original), len(mutated))
    low, high = 0, shortest
    while low < high:
        middle = (low + high + 1) // 2
        if original[:middle] == mutated[:middle]:
            low = middle
        else:
            high = middle - 1
    start = low
    low, high = 0, shortest - start
    while low < high:
        middle = (low + high + 1) // 2
        if original[len(original) - middle:] == mutated[len(mutated) - middle:]:
            low = middle
        else:
            high = middle - 1
    return start, len(original) - low, len(mutated) - low


class FunctionBody:
    """A function defined at module level or in a class (not inside another function), whose
    code a mutant inside its body changes alone: the function's text, compiled at its own
    lines and columns under stubs of its classes (`class NAME:` on each class's line), gives
    the code objects the whole module's compile would. That is checked, not assumed: the
    original text compiled this way must equal the original module's code object (bytecode,
    constants, names, positions), else the mutant is compiled with its module as before."""

    def __init__(self, node, classes, qualname, line_starts, source, future):
        self.future = future  # the module's `from __future__` flags, which the text lacks
        # The module's top-level imports by line (`all_of` sets them once it has read them
        # all): a call of an imported module's function compiles differently from a method
        # call (CPython 3.11 and later).
        self.imports = {}
        first = min([d.lineno for d in node.decorator_list] + [node.lineno])
        self.firstlineno = first
        self.qualname = qualname
        self.classes = classes  # (line, column, name), outermost first
        self.start = line_starts[node.body[0].lineno - 1] + node.body[0].col_offset
        self.end = line_starts[node.body[-1].end_lineno - 1] + node.body[-1].end_col_offset
        self.text_start = line_starts[first - 1]
        self.last_line = node.end_lineno
        line_end = source.find(b"\n", line_starts[node.end_lineno - 1])
        self.text_end = len(source) if line_end < 0 else line_end
        self.checked = None  # the original's code object once checked, False when it differs

    @staticmethod
    def all_of(source, future):
        import ast

        if any(CODING_COOKIE.match(line) for line in source.split(b"\n", 2)[:2]):
            return []  # the stubs would decode the text as UTF-8
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            return []
        lines = source.split(b"\n")
        line_starts = [0]
        for line in lines[:-1]:
            line_starts.append(line_starts[-1] + len(line) + 1)
        imports = {}
        bodies = []

        def visit(node, classes, qualname):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.ClassDef):
                    visit(child, classes + [(child.lineno, child.col_offset, child.name)],
                          qualname + [child.name])
                elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    bodies.append(FunctionBody(child, classes, ".".join(qualname + [child.name]),
                                               line_starts, source, future))
                elif isinstance(child, (ast.Import, ast.ImportFrom)) and not classes:
                    # From the first import on its line (`import a; import b` is one line).
                    column = min(child.col_offset, imports.get(child.lineno, (1 << 30, b""))[0])
                    text = lines[child.lineno - 1:child.end_lineno]
                    text[0] = text[0][column:]
                    for line, part in zip(range(child.lineno, child.end_lineno + 1), text):
                        imports[line] = (column if line == child.lineno else 0, part)
                elif isinstance(child, ast.stmt):
                    visit(child, classes, qualname)  # an `if` or `try` around definitions

        visit(tree, [], [])
        for body in bodies:
            body.imports = {line: text for line, (_, text) in imports.items()}
        return bodies

    def compile(self, source, text_end, filename):
        """The function's code object compiled from SOURCE[text_start:TEXT_END] alone."""
        lines = [b""] * (self.firstlineno - 1)
        for line, text in self.imports.items():
            if line < self.firstlineno:
                lines[line - 1] = text
        for line, column, name in self.classes:
            lines[line - 1] = b" " * column + b"class " + name.encode() + b":"
        after = [b""] * (max(self.imports, default=0) - self.last_line)
        for line, text in self.imports.items():
            if line > self.last_line:
                after[line - self.last_line - 1] = text
        text = b"\n".join(lines + [source[self.text_start:text_end]] + after)
        module = compile(text, filename, "exec", flags=self.future, dont_inherit=True)
        found = [c for c in _walk(module)
                 if c.co_qualname == self.qualname and c.co_firstlineno == self.firstlineno]
        if len(found) != 1:
            raise ValueError(f"{self.qualname} is not one function of its text")
        return found[0]

    def original_code(self, module_code, source, filename):
        """The module's own code object of this function when compiling it alone (from
        SOURCE, the module's) gives the same, else None."""
        if self.checked is None:
            real = [c for c in _walk(module_code)
                    if c.co_qualname == self.qualname and c.co_firstlineno == self.firstlineno]
            try:
                alone = self.compile(source, self.text_end, filename)
            except (SyntaxError, ValueError):
                alone = None
            self.checked = real[0] if len(real) == 1 and alone == real[0] else False
        return self.checked or None


# ---------------------------------------------------------------------------------------------
# Module-level mutants: a constant of a table, a default argument, a line only import runs.
#
# No live function runs the mutated code: the module's top-level code does, once, at import.
# The child runs the mutated top-level code again into a fresh namespace and patches the live
# module with the difference, where that is provably what a fresh import would have given:
#
# - Running it again must touch nothing but its own namespace: `ImportGuard` stops it before
#   any call that could change what existed before it, and `_foreign_store` refuses (before
#   the fork) attribute and item stores into objects that are not provably the module's own.
# - Nothing collected may depend on a changed value: a name read by code that ran while
#   collecting, other than the module's own import (a parametrize list built from a table, a
#   `from tables import X`), makes the mutant fall back; so does a changed default of a
#   function that ran then.
# - Only plain data changes: numbers, strings, bytes, None, compiled patterns, and tuples,
#   lists, sets and dicts of them; lists, sets and dicts are patched in place (every holder sees
#   what a fresh import gives them), other values rebound. A function may change only its
#   defaults. Functions, classes and everything else must come out the same as the live ones.
#
# Whatever fails a check falls back to a fresh session, as a mutant of a class body does.
# ---------------------------------------------------------------------------------------------

# Standard modules whose functions keep no state a module's import could change (beyond
# caches): calls into their Python code, and the modules themselves as values, are allowed.
PURE_MODULES = frozenset({
    "re", "sre_compile", "sre_parse", "sre_constants", "_sre", "unicodedata", "string",
    "math", "cmath", "itertools", "functools", "_functools", "operator", "_operator",
    "typing", "types", "abc", "_abc", "collections", "_collections", "_collections_abc",
    "keyword", "numbers", "fractions", "decimal", "_decimal", "textwrap", "posixpath",
    "genericpath", "fnmatch", "datetime", "_datetime", "struct", "_struct", "copy",
    "enum", "__future__",
})
# The import system's own code: an `import` of a module already loaded runs some of it (a
# `from package import name`), which is allowed, and watched call by call, because loading a
# module the live import never loaded runs that module's top-level code with every effect it
# has (a file written, a registry filled): `_find_and_load` is where a new import begins.
IMPORT_SYSTEM = frozenset({"importlib._bootstrap", "importlib._bootstrap_external"})
NEW_IMPORT = "_find_and_load"
# Builtins that change nothing but what they create (`next` is not one: it advances an
# iterator that may be another module's). Python code they call is watched as any other.
PURE_BUILTINS = frozenset({
    "len", "isinstance", "issubclass", "__build_class__", "sorted", "min", "max", "sum",
    "any", "all", "getattr", "hasattr", "repr", "chr", "ord", "iter", "abs",
    "round", "divmod", "hash", "id", "callable", "format", "pow", "bin", "hex", "oct", "ascii",
})
# Functions that give the same object when called again with the same arguments, and
# change nothing the second time: (module, qualified name).
IDEMPOTENT = frozenset({("logging", "getLogger")})
SCALARS = (type(None), bool, int, float, complex, str, bytes)
IMMUTABLE = SCALARS + (tuple, frozenset, re.Pattern)
MUTABLE = (list, dict, set)
# What the import system sets before a module's code runs.
IMPORT_NAMES = ("__name__", "__file__", "__package__", "__spec__", "__loader__", "__path__",
                "__cached__", "__builtins__")


STDLIB = sysconfig.get_paths()["stdlib"] + os.sep


def _module_of_file(filename):
    """The dotted standard module a source file is, or None when it is not the library's."""
    if filename.startswith("<frozen "):
        return filename[len("<frozen "):-1]
    if not filename.startswith(STDLIB):
        return None
    name = filename[len(STDLIB):]
    name = name[:-3] if name.endswith(".py") else name
    name = name.replace(os.sep, ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def _standard_library(filename):
    """Whether FILENAME is the standard library's own (not an installed package's): its code
    names no project's attributes but by coincidence (`sys.version_info.major`, `ast.parse`),
    and what it reads of a project's objects it reads through protocols, not by name."""
    module = _module_of_file(filename)
    return module is not None and module.split(".")[0] not in ("site-packages", "dist-packages")


# Instructions on a name of the running code's own namespace (a class body's `def __eq__`, a
# module's `T = TypeVar("T")` and its `Generic[T]`): code outside the module reaches the
# module's objects by importing a name (`IMPORT_FROM`) or an attribute, never by these.
OWN_NAMESPACE = frozenset({"STORE_NAME", "STORE_GLOBAL", "DELETE_NAME", "DELETE_GLOBAL",
                           "LOAD_NAME", "LOAD_GLOBAL"})


def _names_read_elsewhere(code):
    """The names CODE (another module's) could reach the module's objects by: attributes it
    reads, writes or deletes, names it imports; not its own namespace's names."""
    import dis

    return {ins.argval for ins in dis.get_instructions(code)
            if ins.opcode in dis.hasname and ins.opname not in OWN_NAMESPACE}


def _pure_module(name):
    return name is not None and (name in PURE_MODULES or name.split(".")[0] in PURE_MODULES)


def _not_installed(name):
    """Whether importing NAME (a top-level module) can only fail: no finder finds it. A dotted
    name is never asked (finding it imports its parents)."""
    if not isinstance(name, str) or not name or "." in name or name in sys.modules:
        return False
    try:
        return importlib.util.find_spec(name) is None
    except (ImportError, ValueError):
        return False


class Refused(BaseException):
    """Raised into the top-level code run again, before a call the guard refuses is made."""


class ImportGuard:
    """A profile function (`sys.setprofile`) for the top-level code run again: it stops the
    run at the first call that could change something that existed before it, before the
    call is made (a file written is not undone with the fork). Allowed: this file's
    own code; Python code of `PURE_MODULES` and `IDEMPOTENT` (whatever they call inside);
    C functions of pure modules, `PURE_BUILTINS`, and methods of immutable values or of
    objects the run made itself (tracked by the garbage collector and not frozen with the
    collected session, which `gc.get_objects` leaves out). A function of this file that only
    the mutant's top-level code reaches is held to the rule `StaticCheck` holds the import's own
    to: it stores into no object that is not provably the module's (LIVE, the module NAME)."""

    def __init__(self, top, live, name):
        self.top = top
        self.filename = top.co_filename
        self.live = live
        self.name = name
        self.stores = {}  # this file's code objects run so far: a foreign store's target, or None
        self.running = None  # the top-level code's frame, while it runs
        self.inside = None
        self.made = set()
        self.violation = None

    def __call__(self, frame, event, arg):
        if self.running is None:
            if event == "call" and frame.f_code is self.top:
                self.running = frame
            return
        if event == "return" and frame is self.running:
            self.running = None
            return
        if self.violation is not None:
            return
        if self.inside is not None:
            if event == "return" and frame is self.inside:
                self.inside = None
            return
        if event == "call":
            code = frame.f_code
            if code.co_filename == self.filename:
                if code is not self.top:
                    if code not in self.stores:
                        self.stores[code] = _foreign_store(code, self.live, self.name)
                    if self.stores[code]:
                        self.violation = (f"{code.co_qualname} stores into {self.stores[code]}, "
                                          "which may not be its own")
                        raise Refused(self.violation)
                return
            name = _module_of_file(code.co_filename)
            if name in IMPORT_SYSTEM:
                if code.co_name == NEW_IMPORT:
                    module = frame.f_locals.get("name", "?")
                    if _not_installed(module):
                        # The search fails again, as it did in the live import (an optional
                        # backend `try: import … except ImportError`): no module code runs.
                        self.inside = frame
                        return
                    self.violation = f"it imports {module}, which the module's import did not"
                    raise Refused(self.violation)
                return
            if _pure_module(name) or (name, code.co_qualname) in IDEMPOTENT:
                self.inside = frame
            else:
                self.violation = f"it calls {code.co_qualname} of {code.co_filename}"
        elif event == "c_call":
            self.violation = self.c_call_changes(arg)
        if self.violation is not None:
            raise Refused(self.violation)

    def c_call_changes(self, function):
        receiver = getattr(function, "__self__", None)
        name = getattr(function, "__name__", "?")
        # CPython hands the profiler `list.append(other.TABLE, x)` bound to its object; a
        # method left unbound names it only in arguments the profiler does not give, so only
        # an immutable type's will do.
        owner = getattr(function, "__objclass__", None)
        if receiver is None and owner is not None:
            if owner in IMMUTABLE:
                return None
            return f"it calls {owner.__qualname__}.{name} on an object it does not name"
        if receiver is None or type(receiver) in IMMUTABLE:
            return None
        if isinstance(receiver, types.ModuleType):
            if receiver.__name__ == "builtins":
                return None if name in PURE_BUILTINS else f"it calls {name}"
            if _pure_module(receiver.__name__):
                return None
            return f"it calls {receiver.__name__}.{name}"
        if isinstance(receiver, type):
            return None  # an alternative constructor: `dict.fromkeys`, `int.from_bytes`
        if id(receiver) not in self.made:
            self.made = {id(thing) for thing in gc.get_objects()}
        if id(receiver) not in self.made:
            return f"it calls {name} of a {type(receiver).__qualname__} that existed before"
        return None


# Immutable standard values compared by `==`: (module, type name).
VALUE_TYPES = frozenset({
    ("datetime", "timedelta"), ("datetime", "date"), ("datetime", "datetime"),
    ("datetime", "time"), ("datetime", "timezone"), ("decimal", "Decimal"),
    ("fractions", "Fraction"),
})


def _value(kind):
    return kind in SCALARS or (kind.__module__, kind.__name__) in VALUE_TYPES


def _plain(value, depth=0):
    kind = type(value)
    if _value(kind) or kind is re.Pattern:
        return True
    if depth > 64:
        return False
    if kind in (tuple, list, set, frozenset):
        return all(_plain(item, depth + 1) for item in value)
    if kind is dict:
        return all(_plain(k, depth + 1) and _plain(v, depth + 1) for k, v in value.items())
    return False


def _holds_mutable(value):
    if type(value) in MUTABLE:
        return True
    if type(value) in (tuple, frozenset):
        return any(_holds_mutable(item) for item in value)
    return False


# Live objects a module-level mutant replaces everywhere they are held (`_typevar_swaps`):
# (old, new) by the old one's id; each is the same as its replacement and nothing else.
_REPLACED = {}


def _same(old, new, module_name, depth=0):
    """Whether NEW, built by the module's code run again, is what the live OLD is."""
    if old is new:
        return True
    replaced = _REPLACED.get(id(old))
    if replaced is not None and replaced[0] is old:
        return replaced[1] is new
    kind = type(old)
    if kind is not type(new) or depth > 64:
        return False
    same = lambda a, b: _same(a, b, module_name, depth + 1)  # noqa: E731
    if _value(kind):
        return old == new or (old != old and new != new)
    if kind is re.Pattern:
        return (old.pattern, old.flags) == (new.pattern, new.flags)
    if kind in (tuple, list):
        return len(old) == len(new) and all(same(a, b) for a, b in zip(old, new))
    if kind in (set, frozenset):
        return all(type(x) in SCALARS for x in old) and \
            {(type(x), x) for x in old} == {(type(x), x) for x in new}
    if kind is dict:
        return list(old) == list(new) and all(same(k, j) for k, j in zip(old, new)) and \
            all(same(old[k], new[k]) for k in old)
    if kind is types.FunctionType:
        return _same_function(old, new, same) and same(old.__defaults__, new.__defaults__) \
            and same(old.__kwdefaults__, new.__kwdefaults__)
    if kind.__module__ == "typing" and kind.__name__ == "TypeVar":
        return all(same(getattr(old, a), getattr(new, a)) for a in (
            "__name__", "__bound__", "__constraints__", "__covariant__", "__contravariant__"))
    if kind.__module__ == "typing" and kind.__name__ == "ForwardRef":
        return old == new
    if kind.__module__ == "typing" and kind.__name__.endswith("Alias"):
        # `ClassVar[Tuple[str, ...]]`, `Type[T]`: by origin and arguments, each compared as
        # here (a TypeVar the module made again is the same by its attributes, not by `==`).
        import typing
        old_args, new_args = typing.get_args(old), typing.get_args(new)
        return typing.get_origin(old) is typing.get_origin(new) \
            and len(old_args) == len(new_args) and all(same(a, b) for a, b in zip(old_args, new_args))
    if kind is types.MemberDescriptorType:
        # A `__slots__` entry: each class has its own, made from `__slots__` (compared too).
        return old.__name__ == new.__name__ \
            and old.__objclass__.__qualname__ == new.__objclass__.__qualname__
    if kind in (staticmethod, classmethod):
        return same(old.__func__, new.__func__)
    if kind is property:
        return all(same(getattr(old, a), getattr(new, a)) for a in ("fget", "fset", "fdel"))
    if kind is type and old.__module__ == module_name == new.__module__:
        skip = {"__dict__", "__weakref__"}
        return old.__qualname__ == new.__qualname__ and len(old.__bases__) == len(new.__bases__) \
            and all(same(a, b) for a, b in zip(old.__bases__, new.__bases__)) \
            and [k for k in vars(old) if k not in skip] == [k for k in vars(new) if k not in skip] \
            and all(same(vars(old)[k], vars(new)[k]) for k in vars(old) if k not in skip)
    return False


def _same_function(old, new, same):
    """The same function apart from its defaults. A closure's cells must hold the same (a
    decorator's wrapper holds the function it wraps)."""
    return old.__code__ == new.__code__ and _same_closure(old.__closure__, new.__closure__, same) \
        and (old.__name__, old.__qualname__, old.__doc__) == (new.__name__, new.__qualname__, new.__doc__) \
        and same(old.__annotations__, new.__annotations__) and same(old.__dict__, new.__dict__)


def _same_closure(old, new, same):
    if old is None or new is None:
        return old is None and new is None
    try:
        return len(old) == len(new) and all(
            same(a.cell_contents, b.cell_contents) for a, b in zip(old, new))
    except ValueError:  # an empty cell
        return False


CLASS_SKIPPED = frozenset({"__dict__", "__weakref__"})
# Special methods a mutant may drop from the live class: deleting one updates the type's slot
# (and its subclasses') to what a class made without it has, and no ABC or cache of the
# standard library asks for them. `__hash__` is not among them: a class that defines `__eq__`
# alone gets `__hash__ = None`, which the attribute comparison then sees change.
DROPPABLE_DUNDERS = frozenset({"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"})


def _class_changes(old, new, module_name):
    """The attributes of the live class OLD that NEW (the same class made by the module's code
    run again) changes or drops, when all that changes is plain data and all it drops are
    attributes outside the class's own machinery (no `__dunder__` but `DROPPABLE_DUNDERS`);
    None when anything else differs."""
    if not (type(old) is type(new) is type and old.__module__ == module_name == new.__module__):
        return None
    if old.__qualname__ != new.__qualname__ or len(old.__bases__) != len(new.__bases__) or \
            not all(_same(a, b, module_name) for a, b in zip(old.__bases__, new.__bases__)):
        return None
    keys = [k for k in vars(old) if k not in CLASS_SKIPPED]
    new_keys = [k for k in vars(new) if k not in CLASS_SKIPPED]
    # The mutant may drop a method: the new keys are the old ones with some left out.
    remaining = iter(keys)
    if not all(k in remaining for k in new_keys):
        return None
    changes = [k for k in keys if k not in vars(new)]
    if any(k.startswith("__") and k not in DROPPABLE_DUNDERS for k in changes):
        return None
    for key in new_keys:
        a, b = vars(old)[key], vars(new)[key]
        if _same(a, b, module_name):
            continue
        if _defaults_only(a, b, module_name) is not None \
                or _dropped_accessors(a, b, module_name) is not None:
            changes.append(key)
            continue
        if key.startswith("__") or not (_plain(a) and _plain(b)) or _holds_mutable(b) \
                or _holds_mutable(a):
            return None
        changes.append(key)
    return changes


def _dropped_accessors(old, new, module_name):
    """The live property OLD without the accessors that NEW (the same property made by the
    module's code run again: a setter or deleter dropped) lacks, when that is all that differs;
    else None. The accessors kept are the live functions, which read the live module."""
    if not (type(old) is type(new) is property):
        return None
    kept = []
    for accessor in ("fget", "fset", "fdel"):
        live, fresh = getattr(old, accessor), getattr(new, accessor)
        if fresh is None:
            kept.append(None)
        elif live is not None and _same(live, fresh, module_name):
            kept.append(live)
        else:
            return None
    if kept == [old.fget, old.fset, old.fdel] or old.__doc__ != new.__doc__:
        return None
    return property(*kept, doc=old.__doc__)


def _defaults_only(old, new, module_name):
    """The live function OLD (a method, or the function of a class or static method) and its
    NEW one when they differ in plain defaults alone; else None."""
    kind = type(old)
    if kind is not type(new) or kind not in (types.FunctionType, classmethod, staticmethod):
        return None
    if kind is not types.FunctionType:
        old, new = old.__func__, new.__func__
        if type(old) is not types.FunctionType or type(new) is not types.FunctionType:
            return None
    if _same_function(old, new, lambda a, b: _same(a, b, module_name)) \
            and _plain(new.__defaults__) and _plain(new.__kwdefaults__):
        return old, new
    return None


class StaticCheck:
    """The checks of a module that hold for every mutant: computed once per module."""

    def __init__(self, module):
        filename = module.filename
        live = vars(module.module)
        name = module.module.__name__
        # Names read while collecting by anything but the module's own import.
        outside = set()
        product = {}
        bodies = _import_time_bodies(module.original)
        for caller, callees in module.profile.values():
            for callee in callees:
                # The live top-level code is equal to, not the same object as, the compiled one.
                if isinstance(callee, str) or callee.co_filename != filename \
                        or callee == module.original:
                    continue
                product.setdefault(callee, set())
                # A class statement of the module's body: the profiler names its caller
                # `__build_class__`, but only the module's import can run it.
                if callee in bodies:
                    continue
                if isinstance(caller, str) or caller.co_filename != filename:
                    outside.add(callee)
                else:
                    product.setdefault(caller, set()).add(callee)
        reads = set()
        for code, _ in module.profile.values():
            if not isinstance(code, str) and code.co_filename != filename \
                    and not _standard_library(code.co_filename):
                reads.update(_names_read_elsewhere(code))
                reads.update(k for k in code.co_consts if isinstance(k, str))
        seen, todo = set(), list(outside)
        while todo:
            code = todo.pop()
            if code in seen:
                continue
            seen.add(code)
            reads.update(code.co_names)
            todo.extend(product.get(code, ()))
        self.reads = reads
        # Stores into attributes and items make no call the guard could see.
        for code in [module.original] + [c for c in product if c not in seen]:
            where = _foreign_store(code, live, name)
            if where:
                raise Fallback(f"{code.co_qualname} stores into {where}, which may not be its own")
        # This file's functions that ran only inside its import: a mutant of one is a mutant
        # of the import, run again like a changed constant.
        self.import_only = {code for code in product if code not in seen}


def _import_time_bodies(original):
    """The class bodies of the module's own class statements (nested classes too), which only
    its import runs: code objects reached from the module's code through class bodies alone."""
    bodies, todo = set(), [original]
    while todo:
        for inner in _code_consts(todo.pop()):
            if not inner.co_flags & CO_OPTIMIZED:
                bodies.add(inner)
                todo.append(inner)
    return bodies


STORES = {"STORE_ATTR": 1, "DELETE_ATTR": 1, "STORE_SUBSCR": 2, "DELETE_SUBSCR": 2}
SIMPLE_LOADS = {"LOAD_CONST", "LOAD_NAME", "LOAD_GLOBAL", "LOAD_FAST", "LOAD_DEREF"}


def _foreign_store(code, live, name):
    """The target of the first attribute or item store in CODE whose object is not provably
    this module's own (a local of a function, or a global bound to this module's class,
    function or unshared container), or None."""
    import dis
    body = not code.co_flags & CO_OPTIMIZED
    instructions = [i for i in dis.get_instructions(code) if i.opname != "CACHE"]
    # A body's annotated names go into the dict SETUP_ANNOTATIONS made in its own namespace,
    # unless the body binds `__annotations__` itself.
    own_annotations = body and any(i.opname == "SETUP_ANNOTATIONS" for i in instructions) \
        and not any(i.opname in ("STORE_NAME", "DELETE_NAME") and i.argval == "__annotations__"
                    for i in instructions)
    loads = []
    for instruction in instructions:
        if instruction.opname == "CACHE":
            continue
        depth = STORES.get(instruction.opname)
        if depth is not None:
            # The object is loaded right before the key (items) or is the last load (attributes).
            if len(loads) < depth or any(op not in SIMPLE_LOADS for op, _ in loads[-depth:]):
                return f"the result of an expression ({instruction.opname})"
            op, target = loads[-depth]
            if op in ("LOAD_FAST", "LOAD_DEREF") and not body:
                pass
            elif op == "LOAD_NAME" and target == "__annotations__" and own_annotations:
                pass
            elif op in ("LOAD_NAME", "LOAD_GLOBAL") and target in live:
                value = live[target]
                own = type(value) in MUTABLE or (
                    type(value) in (types.FunctionType, type) and value.__module__ == name)
                if not own:
                    return target
            else:
                return str(target)
        loads.append((instruction.opname, instruction.argval))
    return None


def _is_typevar(value):
    kind = type(value)
    return kind.__module__ == "typing" and kind.__name__ == "TypeVar"


def _typevar_swaps(module, live, fresh, check):
    """The module's `TypeVar`s the mutant changes (`T = TypeVar("T", bound="Version")` made
    `TypeVar("T")`), each with where this file's functions' annotations hold it: an annotation
    dict holding it as a value, or holding an alias over it (`Type[T]`, `Optional[List[T]]`).
    A fresh import's functions are annotated with the new one, so the live ones take it in
    their annotations (an alias made again with the new one substituted), and `_same` counts
    the old as the new from here on. typing's own caches of aliases hold it too, as keys and
    results: a cache, never read for the new one. Raises Fallback when anything else holds the
    old one or an alias over it (a module-level alias, a class's annotations, a test module's
    `from … import T`): it could not be swapped there."""
    _REPLACED.clear()
    changed = [k for k, new in fresh.items()
               if k in live and _is_typevar(live[k]) and _is_typevar(new)
               and not _same(live[k], new, module.module.__name__)]
    if not changed:
        return []
    annotations = {}
    for function in module.functions:
        # A function's annotations become a dict on first read; a fresh import's too.
        annotations[id(function.__annotations__)] = function.__annotations__
    ignored = {id(frame) for frame in _frames()} | _typing_caches()
    swaps = []
    for key in changed:
        if key in check.reads:
            raise Fallback(f"{key} was read while collecting")
        held = []
        _annotation_holders(key, live[key], live, annotations, ignored, held, 0)
        for holder, parameter in held:
            _swapped(holder[parameter], live[key], fresh[key])  # refused before any patch
        swaps.append((key, held))
    for key, _ in swaps:
        _REPLACED[id(live[key])] = (live[key], fresh[key])
    return swaps


def _referrers(value, ignored):
    """What holds VALUE, the searching frames and their lists left out."""
    # The collected session is frozen (see `serve`); frozen objects are not searched.
    gc.unfreeze()
    try:
        holders = gc.get_referrers(value)
    finally:
        gc.freeze()
    ignored.add(id(holders))
    kept = [h for h in holders if id(h) not in ignored]
    # The lists of an outer search hold what they found. An id freed here can only be taken
    # by an object made later, by the search itself: never a holder that was there before.
    ignored.add(id(kept))
    return kept


def _annotation_holders(key, value, live, annotations, ignored, held, depth):
    """Adds to HELD (annotation dict, parameter) for each annotation holding VALUE (the
    TypeVar KEY, or an alias over it) as a value; follows aliases through their argument and
    parameter tuples. Raises Fallback at any other holder."""
    if depth > 16:
        raise Fallback(f"{key} changes and is nested too deep in aliases")
    for holder in _referrers(value, ignored):
        if holder is live and depth == 0:
            continue  # the name the mutant binds again; an alias bound there stays old
        if type(holder) is dict and id(holder) in annotations:
            # No comprehension here: it would hold VALUE in a cell, a holder of its own.
            found = False
            for parameter, annotation in holder.items():
                if annotation is value:
                    found = True
                    if (holder, parameter) not in held:
                        held.append((holder, parameter))
            if not found:
                raise Fallback(f"{key} changes and an annotation holds it as a key")
            continue
        if type(holder) is tuple:
            # An alias's `__args__` or `__parameters__`; nothing else may hold the tuple.
            for alias in _aliases_holding(holder, ignored):
                if alias is None:
                    raise Fallback(f"{key} changes and a tuple holds it")
                _annotation_holders(key, alias, live, annotations, ignored, held, depth + 1)
            continue
        raise Fallback(f"{key} changes and a {type(holder).__name__} holds it")


def _aliases_holding(arguments, ignored, found=None, depth=0):
    """The typing aliases whose `__args__` or `__parameters__` is the tuple ARGUMENTS (held
    by the alias, or by its attribute dict), or that hold it inside such a tuple; None for any
    other holder. A tuple held only by typing's caches (a key) holds nothing. Lists, not
    generators, and no comprehensions: a generator or a cell would hold what it searched."""
    if found is None:
        found = []
        ignored.add(id(found))
    for holder in _referrers(arguments, ignored):
        if type(holder) is tuple and depth < 16:
            _aliases_holding(holder, ignored, found, depth + 1)
            continue
        owners = [holder]
        ignored.add(id(owners))
        if type(holder) is dict:
            owners.clear()
            for owner in _referrers(holder, ignored):
                if getattr(owner, "__dict__", None) is holder:
                    owners.append(owner)
        for alias in owners:
            found.append(alias if _is_alias(alias) and (
                arguments is alias.__args__ or arguments is alias.__parameters__) else None)
        if not owners:
            found.append(None)
    return found


def _is_alias(value):
    kind = type(value)
    return kind.__module__ == "typing" and kind.__name__.endswith("Alias") \
        and isinstance(getattr(value, "__args__", None), tuple) \
        and isinstance(getattr(value, "__parameters__", None), tuple)


def _typing_caches():
    """The ids of typing's caches of subscripted aliases (its `lru_cache`s, and what they keep
    their entries in): keys and results held there are cached, not used."""
    import typing

    ids = set()
    for clear in getattr(typing, "_cleanups", ()):
        cache = getattr(clear, "__self__", None)
        if cache is None:
            continue
        ids.add(id(cache))
        ids.update(id(r) for r in gc.get_referents(cache) if type(r) is dict)
    return ids


def _swapped(value, old, new):
    """The annotation VALUE with the TypeVar OLD replaced by NEW: NEW itself, or the alias
    made again with NEW substituted for OLD among its parameters."""
    if value is old:
        return new
    parameters = value.__parameters__
    if old not in parameters:
        raise Fallback(f"an alias holds {old!r} but not as a parameter")
    try:
        return value[tuple(new if p is old else p for p in parameters)] \
            if len(parameters) > 1 else value[new]
    except Exception as error:
        raise Fallback(f"{value!r} cannot take the changed {old!r}: {error}")


def _only_the_class_holds(value, cls, label):
    """Raises Fallback when anything but the attribute dict of CLS (and this search) holds
    VALUE: a holder would keep the live object where a fresh import gives a new one."""
    ours = {id(frame) for frame in _frames()}
    own = [r for r in gc.get_referents(cls) if type(r) is dict]
    ours.update(id(d) for d in own)
    ours.add(id(own))
    for holder in _referrers(value, ours):
        raise Fallback(f"{label} changes and a {type(holder).__name__} holds it")


def _frames():
    """This process's frames from here out to the server's loop: their locals hold what
    they compare, and are no holders."""
    frame = sys._getframe(1)
    while frame is not None:
        yield frame
        frame = frame.f_back


class ImportFails(Exception):
    """The mutated top-level code, run again under the import guard, raised ERROR: a fresh
    import of the mutant raises it too, so a fresh session fails to collect (a kill)."""

    def __init__(self, error):
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error


# Raised by the interpreter's own limits, which differ between a fork's frames and a fresh
# import's: such a failure says nothing of what a fresh import would do.
NOT_THE_CODES_OWN = (RecursionError, MemoryError)


def run_top_level(module, mutated):
    """Runs the mutated top-level code again, as a fresh import starts a module; its names.
    Raises Fallback when the guard refuses a call, ImportFails when the code raises alone."""
    live = vars(module.module)
    # As the import system starts a module: its set names, and no docstring until the code's.
    fresh = {k: live[k] for k in IMPORT_NAMES if k in live}
    fresh["__doc__"] = None
    guard = ImportGuard(mutated, live, module.module.__name__)
    sys.setprofile(guard)
    try:
        exec(mutated, fresh)
    except BaseException as error:
        if guard.violation is not None:
            raise Fallback(f"its top-level code cannot run again: {guard.violation}")
        # What the code raised with every call it made allowed (pure, or on what it made) is
        # what its fresh import raises; BaseException's others (SystemExit, an interrupt) and
        # the interpreter's limits are left to a fresh session.
        if isinstance(error, Exception) and not isinstance(error, NOT_THE_CODES_OWN):
            raise ImportFails(error)
        raise Fallback(f"the mutated module fails at import ({type(error).__name__})")
    finally:
        sys.setprofile(None)
    return fresh


def apply_static(module, mutated, check):
    """Runs the mutated top-level code again and patches the live module; raises Fallback
    when the result is not provably what a fresh import of the mutant gives, ImportFails when
    the import fails."""
    live = vars(module.module)
    fresh = run_top_level(module, mutated)
    name = module.module.__name__
    extra = [k for k in live if k not in fresh and not (
        type(live[k]) is types.ModuleType and live[k].__name__ == f"{name}.{k}")]
    missing = [k for k in fresh if k not in live]
    if extra or missing:
        raise Fallback(f"the mutated module binds other names ({', '.join(sorted(extra + missing)[:3])})")
    typevars = _typevar_swaps(module, live, fresh, check)
    data, defaults, classes = [], [], []
    # A class bound to two names (`VersionInfo = Version`) is one live class, patched once,
    # and only when the mutant's two names are one class too.
    classes_by_id = {}
    for key, new in fresh.items():
        old = live[key]
        if key in IMPORT_NAMES or _same(old, new, name):
            continue
        changed = _class_changes(old, new, name)
        if changed:
            # Read while collecting by an attribute name (`Version.NAMES`, `self._LAST`), or a
            # method whose defaults change that ran then.
            for attribute in changed:
                current, made = vars(old)[attribute], vars(new).get(attribute)
                if made is not None and _dropped_accessors(current, made, name) is not None:
                    # Read, the property gives its getter's value, which the mutant keeps: only
                    # a call of a dropped accessor (or a holder of the property, checked as it
                    # is patched) could have told them apart while collecting.
                    for accessor in (current.fset, current.fdel):
                        if getattr(accessor, "__code__", None) in module.called:
                            raise Fallback(f"{accessor.__qualname__} ran during collection")
                    if {"fset", "fdel"} & check.reads:
                        raise Fallback(f"{key}.{attribute}'s accessors were read while collecting")
                    continue
                if attribute in check.reads:
                    raise Fallback(f"{key}.{attribute} was read while collecting")
                pair = _defaults_only(current, made, name)
                if pair is not None and pair[0].__code__ in module.called:
                    raise Fallback(f"{pair[0].__qualname__} ran during collection")
            alias = classes_by_id.setdefault(id(old), (key, new))
            if alias[1] is not new:
                raise Fallback(f"{alias[0]} and {key} are one class but the mutant makes two")
            if alias[0] == key:
                classes.append((key, changed))
            continue
        if _plain(old) and _plain(new):
            data.append(key)
        elif type(old) is type(new) is types.FunctionType and _same_function(
                old, new, lambda a, b: _same(a, b, name)) \
                and _plain(new.__defaults__) and _plain(new.__kwdefaults__):
            if old.__code__ in module.called:
                raise Fallback(f"{old.__qualname__} ran during collection")
            defaults.append(key)
        else:
            raise Fallback(f"{key} changes and is not plain data")
        if key in check.reads:
            raise Fallback(f"{key} was read while collecting")
    # Lists, dicts and sets in place first: a tuple holding one is then the same again.
    for key in data:
        old, new = live[key], fresh[key]
        if type(old) is type(new) is list:
            old[:] = new
        elif type(old) is type(new) and type(old) in (dict, set):
            old.clear()
            old.update(new)
    for key in data:
        old, new = live[key], fresh[key]
        if not _same(old, new, name):
            if _holds_mutable(new):
                raise Fallback(f"{key} holds lists, dicts or sets and changes")
            live[key] = new
    for key in defaults:
        live[key].__defaults__ = fresh[key].__defaults__
        live[key].__kwdefaults__ = fresh[key].__kwdefaults__
    for key, holders in typevars:
        old, new = live[key], fresh[key]
        for annotations, parameter in holders:
            annotations[parameter] = _swapped(annotations[parameter], old, new)
        live[key] = new
    # Immutable values only (`_class_changes`): rebound on the live class, which every
    # instance and every `from module import Class` holds.
    for key, changed in classes:
        for attribute in changed:
            if attribute not in vars(fresh[key]):
                delattr(live[key], attribute)
                continue
            current, made = vars(live[key])[attribute], vars(fresh[key])[attribute]
            accessors = _dropped_accessors(current, made, name)
            if accessors is not None:
                _only_the_class_holds(current, live[key], f"{key}.{attribute}")
                setattr(live[key], attribute, accessors)
                continue
            pair = _defaults_only(current, made, name)
            if pair is None:
                setattr(live[key], attribute, made)
            else:
                pair[0].__defaults__ = pair[1].__defaults__
                pair[0].__kwdefaults__ = pair[1].__kwdefaults__


def _held_label(held):
    names = ", ".join(sorted(os.path.basename(f) for f in held))
    return f"collecting {names} ran the mutated code"


def _remove(path):
    if path:
        try:
            os.unlink(path)
        except OSError:
            pass


KILLERS_KEPT = 64  # the most recent first-failing tests a session server remembers


def _killers_first(items, killers):
    """ITEMS with the named ones first, in KILLERS' order, then the rest as collected."""
    by_id = {item.nodeid: item for item in items}
    first = [by_id[nodeid] for nodeid in killers if nodeid in by_id]
    chosen = {id(item) for item in first}
    return first + [item for item in items if id(item) not in chosen]


def _runs_again(module):
    """Whether the module's own top-level code, run again as a mutant's is, runs through: it
    imported once, and must again for a mutant's failure there to be the mutant's."""
    try:
        run_top_level(module, module.original)
    except (ImportFails, Fallback):
        return False
    return True


def report_import_failure(config, module, mutated, failure):
    """Reports the mutated module as a collection error (as `pytest_make_collect_report` would
    for a test module whose import fails). Then runs its top-level code once more, as the
    re-run plugin collects a failed module again: failing alike, it reports `FILE[assay-rerun]`
    too, which confirms the kill in this job; else nothing more, and a job of its own does."""
    from _pytest.reports import CollectReport

    nodeid = os.path.relpath(module.filename, str(config.rootpath))
    config.hook.pytest_collectreport(report=CollectReport(
        nodeid, "failed", _import_traceback(nodeid, module.filename, failure.error), []))
    try:
        run_top_level(module, mutated)
    except ImportFails as again:
        if type(again.error) is type(failure.error):
            config.hook.pytest_collectreport(report=CollectReport(
                nodeid + "[assay-rerun]", "failed",
                _import_traceback(nodeid, module.filename, again.error), []))
    except Fallback:
        pass


def _import_traceback(nodeid, filename, error):
    """ERROR's traceback as pytest's native style prints it, through the mutated file's lines
    (which `linecache` holds by then)."""
    import traceback

    parts = [f"{nodeid}:{frame.lineno}: in {frame.name}\n    {frame.line}"
             for frame in traceback.extract_tb(error.__traceback__) if frame.filename == filename]
    parts.append(f"E   {type(error).__name__}: {error}")
    return "\n".join(parts)


class FirstFailure:
    """Writes `killed NODEID` of the first test that fails to FD (the server's pipe), once."""

    def __init__(self, fd):
        self.fd = fd

    def pytest_runtest_logreport(self, report):
        if self.fd is not None and report.failed:
            try:
                os.write(self.fd, f"killed {report.nodeid}".encode())
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None


def tree_state(root):
    """What a session tree holds: each entry's type, size, modification time and inode, by
    relative path. Cheap next to a fork (a stat per entry) and it sees a file written,
    rewritten in place, replaced or removed."""
    # One scandir per directory and paths joined as strings: a third of what os.walk with
    # os.path.relpath costs, and every mutant pays it twice.
    state, todo = {}, [""]
    while todo:
        relative = todo.pop()
        try:
            entries = list(os.scandir(os.path.join(root, relative) if relative else root))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            path = relative + entry.name
            state[path] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino)
            if stat.S_ISDIR(st.st_mode):
                todo.append(path + "/")
    return state


def tree_change(collected, root):
    """Why the session tree is no longer the one collected, or None. A fork of a session server
    imports the product from that tree, where a cold run has a fresh copy per job: once a test
    wrote into it, no later fork sees what a cold run would, so the server must end."""
    now = tree_state(root)
    if now == collected:
        return None
    changed = sorted(p for p in collected.keys() | now.keys() if collected.get(p) != now.get(p))
    # A directory changes with what is written into it: name the files when there are any.
    changed = [p for p in changed
               if not stat.S_ISDIR((now.get(p) or collected.get(p))[0])] or changed
    return (f"a test changed the session's tree ({', '.join(changed[:3])}"
            f"{', …' if len(changed) > 3 else ''}): each later mutant runs in a tree of its own")


def session_server(spec, base_path, channel_fds, preloaded, requests, answer):
    """Never returns in this process; a forked child returns from the collection hook."""
    import cProfile
    import tempfile
    import pytest

    sys.stdout.flush()
    sys.stderr.flush()
    state = {"child": False, "why": "pytest stopped before collection finished"}
    # Every function that runs while configuring and collecting, recorded by the C profiler.
    profiler = cProfile.Profile()
    called = {}

    class Serve:
        @pytest.hookimpl(trylast=True)
        def pytest_collection_modifyitems(self, session, config, items):
            profiler.disable()
            # Each function (or C function, by its label) and what it called.
            for entry in profiler.getstats():
                key = id(entry.code) if isinstance(entry.code, types.CodeType) else entry.code
                called[key] = (entry.code, [sub.code for sub in entry.calls or ()])
            serve(session, config, items)

    def serve(session, config, items):
        if session.testsfailed or session.shouldfail or session.shouldstop:
            state["why"] = "collection reported errors"
            return leave()
        if config.args_source == pytest.Config.ArgsSource.ARGS:
            state["why"] = "the options name what to collect"
            return leave()
        by_id = {}
        files_of = {}  # the real path of each collected item's test file
        for item in items:
            by_id.setdefault(item.nodeid, item)
            files_of[item] = os.path.realpath(str(getattr(item, "path", "")))
        test_files = frozenset(files_of.values())
        root = spec["cwd"]
        modules = {}
        killers = []
        # The session tree as collected: every fork imports its modules from it, so a test that
        # writes beside `__file__` would hand its file to every later mutant (see `tree_change`).
        collected = tree_state(root)
        # What collection built stays: the children's collections skip it and share its pages.
        gc.collect()
        gc.freeze()
        answer({"session": True, "items": len(items)})
        for line in requests:
            request = json.loads(line)
            try:
                path = request["module"]
                if path not in modules:
                    try:
                        modules[path] = Module(root, path, called, test_files)
                    except Fallback as why:
                        modules[path] = why
                    except Exception as error:
                        modules[path] = Fallback(f"cannot read {path}: {error}")
                module = modules[path]
                if isinstance(module, Fallback):
                    raise module
                try:
                    with open(os.path.join(request["cwd"], path), "rb") as source:
                        mutated_source = source.read()
                except OSError as error:
                    raise Fallback(f"cannot read the mutant: {error}")
                swaps, mutated, static, held = module.swaps(mutated_source)
                # No node ids: the whole suite, the tests that killed earlier whole-suite
                # mutants first (with `-x`, a kill then costs one test), the rest as collected.
                selected = [] if request["select"] else _killers_first(items, killers)
                for nodeid in request["select"]:
                    if nodeid not in by_id:
                        raise Fallback(f"{nodeid} is not among the collected items")
                    if by_id[nodeid] not in selected:
                        selected.append(by_id[nodeid])
                if held:
                    # Collected with the unmutated function: only a fresh session has them as
                    # the mutant makes them. The rest may kill it here; else a fresh session.
                    selected = [item for item in selected if files_of[item] not in held]
                    if not selected:
                        raise Fallback(f"{_held_label(held)}: no other test covers it")
            except Fallback as why:
                answer({"fallback": str(why)})
                continue
            except Exception as error:
                answer({"fallback": f"{type(error).__name__}: {error}"})
                continue
            # The tree is checked after each fork (below), not again before the next: nothing
            # but a fork writes into it, and the last one's processes are all gone by then.
            sys.stdout.flush()
            sys.stderr.flush()
            # The child of a whole-suite job writes here which test failed first (for the
            # next jobs' order) or, for a module-level mutant that fails its checks after its
            # code ran again, why it cannot go on: the job then runs in a fresh session.
            verdict = os.pipe() if static or held or not request["select"] else None
            pid = os.fork()
            if pid == 0:
                state["child"] = True
                child_session(request, config, items, selected, swaps, module, mutated_source,
                              (mutated, static, verdict))
                return None
            del swaps, mutated, selected
            try:
                os.setpgid(pid, pid)
            except OSError:
                pass
            if verdict:
                os.close(verdict[1])
            answer({"pid": pid, "again": bool(static)})
            status, cut = wait_fork(pid, request.get("limit_ms"))
            kill_group(pid)
            sweep_orphans()
            exit_code = os.waitstatus_to_exitcode(status)
            why = b""
            if verdict:
                while chunk := os.read(verdict[0], 65536):
                    why += chunk
                os.close(verdict[0])
            why = why.decode("utf-8", "replace")
            changed = tree_change(collected, root)
            if changed:
                # Its result may rest on a file another fork left, or leave one for the next.
                answer({"fallback": changed, "exit": exit_code, "retire": True} | cut_flag(cut))
                os._exit(0)
            if why.startswith("fallback "):
                answer({"fallback": why[len("fallback "):], "exit": exit_code} | cut_flag(cut))
                continue
            if held and (cut or not why.startswith("killed ")):
                # Only a failing test settles a mutant whose held-back items never ran; its
                # report must not outlive the fork (the fresh session writes its own).
                if request.get("junitxml"):
                    _remove(os.path.join(request["cwd"], request["junitxml"]))
                answer({"fallback": f"{_held_label(held)}: no other test failed", "exit": exit_code})
                continue
            if why.startswith("killed "):
                killer = why[len("killed "):]
                if killer in killers:
                    killers.remove(killer)
                killers.insert(0, killer)
                del killers[KILLERS_KEPT:]
            answer({"exit": exit_code} | cut_flag(cut))
        os._exit(0)

    def leave():
        answer({"session": False, "why": state["why"]})
        os._exit(0)

    def child_session(request, config, items, selected, swaps, module, mutated_source, static):
        import linecache

        os.setpgid(0, 0)
        for fd in channel_fds:
            os.close(fd)
        mutated, check, verdict = static
        if verdict:
            os.close(verdict[0])
            config.pluginmanager.register(FirstFailure(verdict[1]), "assay-first-failure")
        # Capture files opened by the server are shared with every fork: this run gets its own.
        capman = config.pluginmanager.getplugin("capturemanager")
        if capman is not None:
            capman.stop_global_capturing()
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, fd)
            os.close(out)
        try:
            from _pytest.faulthandler import fault_handler_stderr_fd_key

            if fault_handler_stderr_fd_key in config.stash:
                os.dup2(2, config.stash[fault_handler_stderr_fd_key])
        except Exception:
            pass
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None
        if capman is not None:
            capman.start_global_capturing()
            capman.suspend_global_capture()
        for function, code in swaps:
            function.__code__ = code
        # Tracebacks show the mutated lines.
        lines = mutated_source.decode("utf-8", "replace").splitlines(True)
        linecache.cache[module.filename] = (len(mutated_source), None, lines, module.filename)
        # The job's report path and clocks, before anything is reported.
        from _pytest import timing
        from _pytest.junitxml import xml_key

        xml = config.stash.get(xml_key, None)
        if xml is not None:
            if request.get("junitxml"):
                xml.logfile = os.path.normpath(os.path.abspath(request["junitxml"]))
            xml.suite_start = timing.Instant()
        reporter = config.pluginmanager.getplugin("terminalreporter")
        if reporter is not None and hasattr(reporter, "_session_start"):
            reporter._session_start = timing.Instant()
        if check:
            try:
                apply_static(module, mutated, check)
            except ImportFails as failure:
                if not _runs_again(module):
                    # The module's own code fails when run again, so the mutant's failure may
                    # be the run again's, not the mutant's (code that tells the two apart).
                    os.write(verdict[1], f"fallback the unmutated module fails when run again "
                                         f"(the mutant: {failure})".encode())
                    os._exit(0)
                # Reported as pytest reports a test module that fails to import, and no test
                # runs: the session ends as a fresh one would, failed in collection.
                report_import_failure(config, module, mutated, failure)
                items[:] = []
                return
            except Fallback as why:
                os.write(verdict[1], f"fallback {why}".encode())
                os._exit(0)
            except BaseException as error:
                os.write(verdict[1], f"fallback {type(error).__name__}: {error}".encode())
                os._exit(0)
        items[:] = selected

    # The tree's own copies of pre-imported plugins, as a fresh run would import them.
    root = spec["cwd"]
    for top in preloaded:
        if os.path.exists(os.path.join(root, top + ".py")) or os.path.isdir(os.path.join(root, top)):
            for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
                del sys.modules[name]
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    os.chdir(root)
    os.environ.clear()
    os.environ.update(spec["env"])
    tempfile.tempdir = None
    sys.path[:] = [root] + base_path
    plugin = Serve()
    real_main = pytest.main

    def main_with_server(args=None, plugins=None):
        return real_main(args, list(plugins or []) + [plugin])

    code = 1
    try:
        profiler.enable()
        if "code" in spec:
            pytest.main = main_with_server
            sys.argv = ["-c"] + spec["args"]
            exec(compile(spec["code"], "<string>", "exec"), {"__name__": "__main__"})
            code = 0
        else:
            sys.argv = ["-m"] + spec["args"]
            code = main_with_server(spec["args"])
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
    except BaseException:
        if state["child"]:
            import traceback

            traceback.print_exc()
        code = 1
    finally:
        if not state["child"]:
            profiler.disable()
            leave()
        end_child(code)


def main():
    sys.dont_write_bytecode = True
    import _pytest.config
    import pytest  # noqa: F401

    for name in _pytest.config.default_plugins:
        try:
            __import__("_pytest." + name)
        except Exception:
            pass
    # Installed plugins are imported once too. A child whose tree holds a module of the same
    # top-level name drops them, so it imports the tree's, as a fresh run would.
    preloaded = set()
    for entry in importlib.metadata.entry_points(group="pytest11"):
        try:
            __import__(entry.module)
            preloaded.add(entry.module.split(".")[0])
        except Exception:
            pass
    # `-c` put the server's own directory first; each child puts its tree there instead.
    base_path = sys.path[1:]
    if len(sys.argv) > 1:
        try:
            share_rewrites(sys.argv[1])
        except Exception:
            pass  # another pytest's internals: each session rewrites its own modules
    become_subreaper()
    warm_up()
    requests = os.fdopen(os.dup(0), "r")
    answers = os.fdopen(os.dup(1), "w")
    channel_fds = (requests.fileno(), answers.fileno())

    def answer(message):
        answers.write(json.dumps(message) + "\n")
        answers.flush()

    # What is loaded now stays: children's collections skip it and leave its pages shared.
    gc.collect()
    gc.freeze()
    answer({"ready": True})
    for line in requests:
        request = json.loads(line)
        if "session" in request:
            session_server(request["session"], base_path, channel_fds, preloaded, requests, answer)
        serve_fresh(request, base_path, channel_fds, preloaded, answer)


def serve_fresh(request, base_path, channel_fds, preloaded, answer):
    """Runs REQUEST in a fork as `python -m pytest` would. A mutant's run (`narrow`) first
    runs narrowed (see `narrowed`); when its files do not collect exactly its node ids, that
    fork stops before any test and the run forks again as named, within the same limit."""
    import time

    narrow = narrowed(request.get("args")) if request.get("narrow") else None
    limit = request.get("limit_ms")
    started = time.monotonic()
    pid = None
    for attempt in ([narrow] if narrow else []) + [None]:
        widen = os.pipe() if attempt else None
        fork = os.fork()
        if fork == 0:
            if attempt:
                os.close(widen[0])
                install_narrowing(attempt[1], widen[1])
                request = dict(request, args=attempt[0])
            child(request, base_path, channel_fds, preloaded)
        try:
            os.setpgid(fork, fork)
        except OSError:
            pass  # the child set it first, or already exited
        if pid is None:
            pid = fork
            answer({"pid": pid})
        left = None if limit is None else max(1, limit - (time.monotonic() - started) * 1000)
        status, cut = wait_fork(fork, left)
        kill_group(fork)
        sweep_orphans()
        if widen:
            os.close(widen[1])
            said = b""
            while chunk := os.read(widen[0], 64):
                said += chunk
            os.close(widen[0])
            if said == b"widen" and not cut:
                continue
        answer({"exit": os.waitstatus_to_exitcode(status)} | cut_flag(cut))
        return


# ---------------------------------------------------------------------------------------------
# A mutant's fresh session (no hot swap) names its tests by node id, often hundreds, after
# `-q`, as `assay mutate` writes the command. pytest resolves each id alone: the root directory
# and the conftests per argument, then a match per argument while collecting, a fifth of a
# fresh semver session naming 503 ids. Narrowed, the session names each file once and a
# plugin keeps the ids' items, in the ids' order, before any other plugin sees them. pytest
# imports and collects whole modules either way, so the run is the one named, unless the
# files do not collect each id exactly once (an id the mutant renamed, a parametrized test
# named without its parameters): then the fork says so and ends before any test runs.
# ---------------------------------------------------------------------------------------------

NARROWING_PLUGIN = "assay_narrowed_selection"


def narrowed(args):
    """(ARGS with their trailing node ids replaced by the ids' files, the ids) for a command
    whose ids follow `-q`; None for any other command, or a single id (nothing to save)."""
    if not args:
        return None
    ids = []
    for arg in reversed(args):
        if arg.startswith("-") or "::" not in arg:
            break
        ids.append(arg)
    options = args[:len(args) - len(ids)]
    if len(ids) < 2 or not options or options[-1] != "-q" or len(set(ids)) != len(ids):
        return None
    ids.reverse()
    files = list(dict.fromkeys(nodeid.split("::", 1)[0] for nodeid in ids))
    return ["-p", NARROWING_PLUGIN] + options + files, ids


def install_narrowing(ids, fd):
    """Makes `-p NARROWING_PLUGIN` load the plugin that keeps IDS; it writes `widen` to FD and
    ends the fork when the collected items do not hold each id exactly once."""
    import pytest

    # Already imported when `-p` names it: the marker keeps pytest from warning that it cannot
    # rewrite its asserts (a project's `-W error` would make that warning an error).
    plugin = types.ModuleType(NARROWING_PLUGIN, "Assay's narrowed selection. PYTEST_DONT_REWRITE")

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(session, config, items):
        by_id = {}
        for item in items:
            by_id.setdefault(item.nodeid, []).append(item)
        if any(len(by_id.get(nodeid, ())) != 1 for nodeid in ids):
            os.write(fd, b"widen")
            os._exit(0)
        items[:] = [by_id[nodeid][0] for nodeid in ids]

    plugin.pytest_collection_modifyitems = pytest_collection_modifyitems
    sys.modules[NARROWING_PLUGIN] = plugin


if __name__ == "__main__":
    main()
