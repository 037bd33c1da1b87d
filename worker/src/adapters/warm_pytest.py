"""Assay's warm pytest runner for mutant jobs.

Imports pytest and its built-in plugins once, then serves one request per line on stdin: fork,
and in the child run exactly what `python -m pytest ARGS` would run, in the request's tree, with
the request's environment and output files. Nothing of the project is imported before the fork,
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
        # `python -m` puts the working directory first on the path.
        sys.path[:] = [request["cwd"]] + base_path
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
