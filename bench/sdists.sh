# Shared by the benchmarks on real projects (sourced, not run): pinned PyPI sdists, fetched
# with `pip download` into "$cache" (the caller sets it) and never vendored, and how each is
# set up as a committed git repository for `assay mutate`.

# name version file-to-mutate mutmut-source-path
spec() {
    case "$1" in
        parse) echo "parse 1.22.4 parse/__init__.py parse/" ;;
        semver) echo "semver 3.1.2 src/semver/version.py src/" ;;
        inflection) echo "inflection 0.5.1 inflection/__init__.py inflection/" ;;
        *) echo "unknown project $1" >&2; exit 1 ;;
    esac
}
pytest_ini() {
    # The projects' own addopts want pytest-cov and doctests; both tools get the plain suite.
    case "$1" in
        parse) printf '[pytest]\ntestpaths = tests\n' ;;
        # This test re-enters a parametrized context manager, which fails when mutmut runs
        # the suite twice in one process; neither tool runs it.
        semver) printf '[pytest]\ntestpaths = tests\npythonpath = src\naddopts = --deselect tests/test_pysemver-cli.py::test_should_process_parsed_cli_arguments\n' ;;
        inflection) printf '[pytest]\ntestpaths = test_inflection.py\n' ;;
    esac
}

fetch() {
    local name="$1" version="$2"
    local sdist
    sdist=$(ls "$cache/$name-$version".tar.gz 2>/dev/null || true)
    if [ -z "$sdist" ]; then
        pip download --quiet --no-deps --no-binary :all: "$name==$version" -d "$cache" >&2
        sdist="$cache/$name-$version.tar.gz"
    fi
    echo "$sdist"
}

# The project's sdist unpacked into DIR with the plain pytest configuration, not committed.
unpack() {
    local project="$1" dir="$2" name version
    read -r name version _ _ <<< "$(spec "$project")"
    mkdir -p "$dir"
    tar xzf "$(fetch "$name" "$version")" -C "$dir" --strip-components=1
    rm -rf "$dir"/*.egg-info
    pytest_ini "$project" > "$dir/pytest.ini"
}

# Commits everything in DIR (a new repository the first time) with MESSAGE.
commit_all() {
    local dir="$1" message="$2"
    (cd "$dir" && { [ -d .git ] || git init -q -b main; } && git add -A \
        && git -c user.name=Bench -c user.email=bench@example.com commit -qm "$message")
}
