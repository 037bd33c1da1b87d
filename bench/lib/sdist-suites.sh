# Shared by the suite benchmarks on PyPI sdists (sourced, not run; bench/suite-vs-xdist.sh and
# bench/suite-vs-unittest.sh): a pinned sdist as a committed git repository, and wall timing.
# The caller sets CACHE (where sdists are kept), PYTHON and work (its scratch directory).

fetch() { # name version sha256 -> the extracted, committed tree
  local name=$1 version=$2 sha=$3 sdist dir
  sdist=$(ls "$CACHE"/"$name"-"$version".tar.gz 2>/dev/null || true)
  if [ -z "$sdist" ]; then
    "$PYTHON" -m pip download -q --no-deps --no-binary :all: "$name==$version" -d "$CACHE" >&2
    sdist=$(ls "$CACHE"/"$name"-"$version".tar.gz)
  fi
  echo "$sha  $sdist" | sha256sum -c --quiet - >&2 || { echo "$sdist: sha256 mismatch" >&2; exit 1; }
  dir=$work/$name
  mkdir -p "$dir"
  tar -xzf "$sdist" -C "$dir" --strip-components=1
  git -C "$dir" init -q -b main
  git -C "$dir" -c user.email=bench@example.com -c user.name=Bench add -A
  git -C "$dir" -c user.email=bench@example.com -c user.name=Bench commit -qm "$name $version"
  echo "$dir"
}

seconds() { # command... -> wall seconds; the exit status is the caller's to judge
  local s
  s=$(date +%s.%N)
  "$@" >"$work/last.out" 2>"$work/last.err" || true
  echo "$(date +%s.%N) - $s" | bc
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
