"""Shared plumbing of the conformance corpus: sdists, release-pair repositories, trees, venvs.

Everything here is independent of Assay: the truth (truth.py) and the mining script (mine.py)
build the trees themselves from the sdists, following SPEC §2's definition of the base tree.
"""
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

CORPUS = Path(__file__).resolve().parent
MANIFEST = CORPUS / "manifest.json"
TRUTH = CORPUS / "truth.json"
# Downloads, repositories and venvs live outside the repository: nothing is vendored.
CACHE = Path(os.environ.get("ASSAY_CORPUS_CACHE", Path.home() / ".cache" / "assay-corpus"))


def load_manifest():
    with open(MANIFEST) as f:
        return json.load(f)


def projects_by_id(manifest):
    return {p["id"]: p for p in manifest["projects"]}


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sdist_path(name, version, sha256):
    """The cached sdist of NAME==VERSION, downloaded with pip on first use and checked by sha256."""
    d = CACHE / "sdists"
    d.mkdir(parents=True, exist_ok=True)
    norm = name.replace("-", "_").lower()

    def find():
        for p in d.iterdir():
            stem = p.name.replace("-", "_").lower()
            if stem.startswith(f"{norm}_{version}.") and p.name.endswith((".tar.gz", ".zip")):
                return p
        return None

    p = find()
    if p is None:
        log(f"[corpus] pip download {name}=={version}")
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
             f"{name}=={version}", "-d", str(d)],
            check=True, stdout=subprocess.DEVNULL)
        p = find()
        if p is None:
            raise RuntimeError(f"pip download of {name}=={version} left no sdist in {d}")
    got = sha256_of(p)
    if got != sha256:
        raise RuntimeError(f"sha256 mismatch for {p}: manifest {sha256}, file {got}")
    return p


def extract(sdist, dest):
    """Unpack an sdist into DEST without its top-level NAME-VERSION/ directory."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(sdist) as t:
        for m in t.getmembers():
            parts = Path(m.name).parts[1:]
            if not parts or not (m.isfile() or m.isdir()):
                continue
            target = dest.joinpath(*parts)
            if m.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with t.extractfile(m) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)
            if m.mode & 0o111:
                target.chmod(0o755)
    return dest


def release_dirs(project):
    """Unpacked base and candidate releases, cached."""
    out = []
    for side in ("base", "candidate"):
        rel = project[side]
        d = CACHE / "releases" / f"{project['name']}-{rel['version']}"
        if not (d / ".complete").exists():
            if d.exists():
                shutil.rmtree(d)
            extract(sdist_path(project["name"], rel["version"], rel["sha256"]), d)
            (d / ".complete").write_text("")
        out.append(d)
    return out


def files_of(root):
    root = Path(root)
    return {str(p.relative_to(root)) for p in root.rglob("*")
            if p.is_file() and p.name != ".complete" and ".git" not in p.relative_to(root).parts}


def is_test_file(rel):
    """SPEC §2 / the user guide's pytest and unittest conventions: test_*.py, *_test.py,
    conftest.py, or anything under a tests/ or test/ directory."""
    parts = Path(rel).parts
    name = parts[-1]
    if name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")):
        return True
    if name == "conftest.py":
        return True
    return any(p in ("tests", "test") for p in parts[:-1])


def build_trees(project, workdir):
    """(base tree, candidate tree) in WORKDIR, built from the sdists as SPEC §2 defines them:
    base tree = base release + the candidate's added/modified test files, deleted ones deleted."""
    base_rel, cand_rel = release_dirs(project)
    workdir = Path(workdir)
    base, cand = workdir / "base", workdir / "candidate"
    shutil.copytree(base_rel, base, ignore=shutil.ignore_patterns(".complete"))
    shutil.copytree(cand_rel, cand, ignore=shutil.ignore_patterns(".complete"))
    bfiles, cfiles = files_of(base_rel), files_of(cand_rel)
    overlaid = []
    for rel in sorted(cfiles):
        if is_test_file(rel):
            a, b = base_rel / rel, cand_rel / rel
            if rel not in bfiles or a.read_bytes() != b.read_bytes():
                (base / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(b, base / rel)
                overlaid.append(rel)
    for rel in sorted(bfiles - cfiles):
        if is_test_file(rel):
            (base / rel).unlink()
            overlaid.append(rel + " (deleted)")
    return base, cand, overlaid


def git(repo, *args, env=None):
    e = dict(os.environ)
    e.update({"GIT_AUTHOR_NAME": "corpus", "GIT_AUTHOR_EMAIL": "corpus@localhost",
              "GIT_COMMITTER_NAME": "corpus", "GIT_COMMITTER_EMAIL": "corpus@localhost",
              "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z"})
    if env:
        e.update(env)
    return subprocess.run(["git", "-C", str(repo), *args], check=True, env=e,
                          stdout=subprocess.PIPE, text=True).stdout.strip()


def release_repo(project):
    """A git repository with the base release committed (tag `base`), then the candidate
    release replacing it (tag `candidate`): what a user would have, for Assay to prove."""
    repo = CACHE / "repos" / project["id"]
    if (repo / ".git" / "corpus-complete").exists():
        return repo
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    base_rel, cand_rel = release_dirs(project)
    git(repo, "init", "-q", "-b", "main")
    for tag, rel in (("base", base_rel), ("candidate", cand_rel)):
        for p in repo.iterdir():
            if p.name != ".git":
                shutil.rmtree(p) if p.is_dir() else p.unlink()
        shutil.copytree(rel, repo, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".complete"))
        git(repo, "add", "-A", "-f", ".")
        git(repo, "commit", "-q", "--allow-empty", "-m", f"{project['name']} {project[tag]['version']}")
        git(repo, "tag", tag)
    (repo / ".git" / "corpus-complete").write_text("")
    return repo


def venv_for(manifest, pytest_major, extras):
    """A venv with the pinned pytest and the project's extra packages, cached by its contents."""
    pins = [f"pytest=={manifest['pytest_versions'][pytest_major]}"] + sorted(extras)
    key = hashlib.sha256("\n".join(pins).encode()).hexdigest()[:12]
    v = CACHE / "venvs" / f"pytest{pytest_major}-{key}"
    py = v / "bin" / "python"
    v.parent.mkdir(parents=True, exist_ok=True)
    with open(v.parent / f"{v.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel cases share venvs: build each once
        return _make_venv(v, py, pins)


def _make_venv(v, py, pins):
    if (v / ".complete").exists():
        return py
    if v.exists():
        shutil.rmtree(v)
    log(f"[corpus] venv {v.name}: {' '.join(pins)}")
    subprocess.run([sys.executable, "-m", "venv", str(v)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", *pins], check=True, stdout=subprocess.DEVNULL)
    (v / "pins.txt").write_text("\n".join(pins) + "\n")
    (v / ".complete").write_text("")
    return py


def case_env(project, extra=None):
    """The environment of a test command: a clean one (like Assay's), plus the project's
    PYTHONPATH (e.g. `src` for src/ layouts) relative to the tree."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    if project.get("pythonpath"):
        env["PYTHONPATH"] = project["pythonpath"]
    if extra:
        env.update(extra)
    return env


def tempdir(prefix):
    d = CACHE / "tmp"
    d.mkdir(parents=True, exist_ok=True)
    return tempfile.mkdtemp(prefix=prefix, dir=d)
