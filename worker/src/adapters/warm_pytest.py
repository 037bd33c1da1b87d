"""Assay's warm pytest runner for mutant jobs.

Imports pytest and its built-in plugins once, runs one throw-away session on a two-test suite
of its own (so lazily compiled regexes, imports and caches are warm and shared by every fork),
then serves one request per line on stdin: fork, and in the child run exactly what
`python -m pytest ARGS` (or `python -c CODE ARGS`, for the coverage baseline) would run, in the
request's tree, with the request's environment and output files. Nothing of the project is imported before the fork,
so every child loads the (mutated) product code from source. The parent answers each request
with the child's pid (so the caller can kill its process group) and then its exit status.
"""

import gc
import importlib.metadata
import json
import os
import sys


def child(request, base_path, channel_fds, preloaded):
    import atexit
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
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(int(code) & 0xFF)


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
        pid = os.fork()
        if pid == 0:
            child(request, base_path, channel_fds, preloaded)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass  # the child set it first, or already exited
        answer({"pid": pid})
        _, status = os.waitpid(pid, 0)
        answer({"exit": os.waitstatus_to_exitcode(status)})


main()
