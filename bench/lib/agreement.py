"""Mutant-by-mutant agreement of `assay mutate` (Stryker JSON) and cargo-mutants (outcomes.json).

A mutant is common when both tools made it: the same file, the same place (a function body by
its closing brace, an operator or match arm by its first character) and the same replacement.
Each side's status is folded into caught (killed, timeout), missed (survived, no coverage) or
unviable (does not compile). Usage: agreement.py ASSAY_JSON CARGO_MUTANTS_OUTCOMES [--table]
"""
import json
import re
import sys

ASSAY = {"Killed": "caught", "Timeout": "caught", "Survived": "missed",
         "NoCoverage": "missed", "CompileError": "unviable"}
CARGO_MUTANTS = {"CaughtMutant": "caught", "Timeout": "caught", "MissedMutant": "missed",
                 "Unviable": "unviable"}


def assay_mutants(path):
    doc = json.load(open(path))
    found = {}
    for file, entry in doc["files"].items():
        for m in entry["mutants"]:
            start, end = m["location"]["start"], m["location"]["end"]
            kind = m["mutatorName"]
            if kind == "function_body":
                value = re.search(r"body -> `(.*)`$", m["description"], re.S).group(1)
                key = ("body", file, end["line"], end["column"], value)
            elif kind == "match_arm":
                key = ("arm", file, start["line"], start["column"])
            elif kind == "unary":
                key = ("unary", file, start["line"], start["column"])
            else:
                key = ("op", file, start["line"], start["column"], m["replacement"])
            found.setdefault(key, []).append((m["status"], m["description"]))
    return found


def cargo_mutants(path):
    doc = json.load(open(path))
    found = {}
    for outcome in doc["outcomes"]:
        scenario = outcome["scenario"]
        if not isinstance(scenario, dict) or "Mutant" not in scenario:
            continue
        m = scenario["Mutant"]
        start = m["span"]["start"]
        genre = m["genre"]
        if genre == "FnValue":
            end = m["function"]["span"]["end"]
            key = ("body", m["file"], end["line"], end["column"], m["replacement"])
        elif genre == "MatchArm":
            key = ("arm", m["file"], start["line"], start["column"])
        elif genre == "UnaryOperator":
            key = ("unary", m["file"], start["line"], start["column"])
        else:
            key = ("op", m["file"], start["line"], start["column"], m["replacement"])
        found.setdefault(key, []).append((outcome["summary"], m["name"]))
    return found


def main():
    assay, cargo = assay_mutants(sys.argv[1]), cargo_mutants(sys.argv[2])
    common = sorted(set(assay) & set(cargo))
    agree, differ = 0, []
    for key in common:
        a = ASSAY.get(assay[key][0][0], assay[key][0][0])
        c = CARGO_MUTANTS.get(cargo[key][0][0], cargo[key][0][0])
        if a == c:
            agree += 1
        else:
            differ.append((a, c, cargo[key][0][1], assay[key][0][1]))
    print(json.dumps({
        "assay_mutants": sum(len(v) for v in assay.values()),
        "cargo_mutants_mutants": sum(len(v) for v in cargo.values()),
        "common": len(common),
        "agree": agree,
        "agreement": round(agree / len(common), 4) if common else None,
    }))
    if "--table" in sys.argv:
        for a, c, name, description in differ:
            print(f"  assay {a:8} cargo-mutants {c:8} {name}")


if __name__ == "__main__":
    main()
