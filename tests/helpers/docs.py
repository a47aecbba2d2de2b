"""Shell commands as written in the docs (for tests that run them as written)."""

from __future__ import annotations

import re


def bash_blocks(markdown: str, after: str) -> list[str]:
    """The ```bash blocks of `markdown` after the heading line `after`, until the next
    heading of the same or a higher level (a `#` inside a block is a comment, not a heading)."""
    level = len(after) - len(after.lstrip("#"))
    blocks: list[str] = []
    inside, fence, current = False, None, []
    for line in markdown.splitlines():
        if fence is not None:
            if line.startswith("```"):
                if fence == "bash" and inside:
                    blocks.append("\n".join(current) + "\n")
                fence, current = None, []
            else:
                current.append(line)
        elif line.startswith("```"):
            fence = line[3:].strip()
        elif line == after:
            inside = True
        elif inside and re.match(rf"#{{1,{level}}} ", line):
            break
    return blocks


def commands(block: str) -> list[str]:
    """Shell commands of a block: continuation lines joined, comments dropped."""
    joined = block.replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip() and line[0] != "#"]
