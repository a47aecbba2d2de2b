"""Which files of bench/results/ the docs cite, and which no doc does.

    python bench/tools/results_cited.py            # each kept file and the docs citing it
    python bench/tools/results_cited.py --uncited  # the files no doc cites
    python bench/tools/results_cited.py --prune    # git rm those (git history keeps them)
    python bench/tools/results_cited.py --index > bench/results/README.md   # the index

A doc cites a result file by its name (`strength-uno-30min.json`), a name's stem with its
extensions (`…-30min.{json,png}`, `…-30min.json/.png`), a brace list
(`strength-{doudizhu-landlord,uno}-declared-30min.json`), a glob after `bench/results/`
(`bench/results/strength-uno-declared-15min-kl-target-*`) or a tail after an ellipsis
(`...-fixed-head-30min-entropy-boost-0.*`). The docs are docs/*.md and README.md; the
results' own index (bench/results/README.md) cites nothing: it lists what the docs cite. A name
after a commit (`c3b8c3a:bench/results/NAME`, what `git show` takes) is a superseded result
git history keeps: not a citation of this folder.
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
DOCS = ("docs/*.md", "README.md")
_TOKEN = re.compile(r"[A-Za-z0-9_.{},/*-]+")
_BRACES = re.compile(r"\{([^{}]*)\}")
_AT_COMMIT = re.compile(r"\b[0-9a-f]{7,40}:$")


def expand(token: str) -> list[str]:
    """A shell brace list expanded: `a-{b,c}.json` -> `a-b.json`, `a-c.json`."""
    m = _BRACES.search(token)
    if m is None:
        return [token]
    head, tail = token[: m.start()], token[m.end() :]
    return [e for alt in m.group(1).split(",") for e in expand(head + alt + tail)]


def tokens(text: str) -> list[re.Match[str]]:
    """The words of a doc that may name result files, less those naming them at a past
    commit (`c3b8c3a:bench/results/NAME`: git history keeps that one, not this folder)."""
    return [
        m
        for m in _TOKEN.finditer(text)
        if not _AT_COMMIT.search(text[max(0, m.start() - 41) : m.start()])
    ]


def _patterns(text: str) -> tuple[set[str], list[str]]:
    """(exact names, glob patterns) a doc's text names."""
    names: set[str] = set()
    globs: list[str] = []
    for token in {m.group() for m in tokens(text)}:
        for word in expand(token) if "{" in token else [token]:
            for part in word.split("/"):
                if part.startswith("...") and len(part) > 8:  # `...-tail.*`: any head
                    globs.append("*" + part[3:].rstrip(",;:"))
                    continue
                part = part.strip(".,")
                if "*" in part:
                    # `bench/results/name-*`: a glob with a name-like head, not markdown bold
                    if "-" in part and part.index("*") >= 6:
                        globs.append(part)
                elif part:
                    names.add(part)
    return names, globs


def _cites(names: set[str], globs: list[str], file: str) -> bool:
    stem = file.rpartition(".")[0]
    if file in names or any(
        n.startswith(stem + ".") and n[len(stem) + 1 :].isalnum() for n in names
    ):  # the stem with another extension: a figure's JSON and PNG are cited together
        return True
    return any(fnmatch.fnmatch(file, g) or fnmatch.fnmatch(file, g + ".*") for g in globs)


def citations(root: Path = ROOT) -> dict[str, list[str]]:
    """Every result file (README.md aside) and the docs citing it (possibly none)."""
    docs = sorted({p for pattern in DOCS for p in root.glob(pattern)})
    parsed = [(str(p.relative_to(root)), *_patterns(p.read_text())) for p in docs]
    files = sorted(p.name for p in (root / "bench" / "results").iterdir() if p.is_file())
    return {
        f: [doc for doc, names, globs in parsed if _cites(names, globs, f)]
        for f in files
        if f != "README.md"
    }


INDEX_HEAD = """# Benchmark results

The files the docs cite, and only those: each figure's JSON (and its PNG where it has one),
written by the command the citing doc gives beside the figure. Superseded results are in git
history: a doc names one as `c3b8c3a:bench/results/NAME` (`git show c3b8c3a:bench/results/NAME`),
and CHANGELOG.md says where each went. Written by `python bench/tools/results_cited.py --index`
(`--uncited` lists what no doc cites, `--prune` removes it);
`tests/test_results_cited.py` fails on a file here that no doc cites.
"""


def index(cited: dict[str, list[str]]) -> str:
    """bench/results/README.md: per citing doc, the stems it cites with their extensions."""
    by_doc: dict[str, dict[str, list[str]]] = {}
    for f, docs in cited.items():
        stem, _, ext = f.rpartition(".")
        for doc in docs:
            by_doc.setdefault(doc, {}).setdefault(stem, []).append(ext)
    lines = [INDEX_HEAD]
    for doc in sorted(by_doc):
        stems = by_doc[doc]
        lines.append(f"## [{doc}](../../{doc}) ({sum(len(e) for e in stems.values())} files)\n")
        for stem, exts in sorted(stems.items()):
            lines.append("- " + ", ".join(f"`{stem}.{ext}`" for ext in exts))
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--uncited", action="store_true", help="only the files no doc cites")
    p.add_argument("--prune", action="store_true", help="git rm the files no doc cites")
    p.add_argument("--index", action="store_true", help="bench/results/README.md, printed")
    args = p.parse_args(argv)
    cited = citations()
    uncited = [f for f, docs in cited.items() if not docs]
    if args.prune and uncited:
        subprocess.run(["git", "rm", "-q", *(str(RESULTS / f) for f in uncited)], check=True)
    if args.index:
        print(index({f: docs for f, docs in cited.items() if docs}), end="")
    elif args.uncited or args.prune:
        print("\n".join(uncited))
    else:
        for f, docs in cited.items():
            print(f"{f}\t{', '.join(docs) or '-'}")
    print(f"{len(cited) - len(uncited)} cited, {len(uncited)} not", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
