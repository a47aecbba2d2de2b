"""The link token: where it is kept, how it is read, and what a usable one looks like.

Configs, checkpoints and Ray actor arguments carry a `TokenSource` (a file's path or an
environment variable's name), never the token: the trainer pickles its whole config into every
checkpoint and hands it to every env runner actor, so a token in it would be readable by whoever
reads a checkpoint (and would then hold the link: push weights to every server, ack spools
away). The process that opens the link reads the token itself (`TokenSource.read`).

A token must be worth at least 16 random bytes (128 bits), so that nobody can guess it, online
or offline: `MIN_TOKEN_CHARS` characters (22 base64url characters are 132 bits), or
`MIN_HEX_TOKEN_CHARS` if it is only hex digits (4 bits each), and not a few characters repeated.
`croupier serve` and `croupier train` refuse anything shorter at start, an empty token included
(an empty key is one everybody knows). Standard library only: the commands check it before
their slow imports.

Length is not entropy: `correct-horse-battery-staple` or `croupier-link-token-0123456789` are
long and a guesser's first tries (a fake trainer collects the server's proof and guesses offline,
at its leisure). So a token is also refused when `GUESSABLE_SHARE` of its characters are
guessable: inside word-like runs (a pronounceable run of 4+ letters of one case, or Capitalized),
years, sequences and repeats (`aaa`, `abc`, `321`), or a 3+ character piece seen earlier in it.
A random token rarely is: of a million `token_urlsafe(16)` (the 22-character minimum) 253 were
refused, of a million `token_urlsafe(32)` (what the message says to run) 2, of a million
`token_hex(16)` and 300,000 `uuid4()` none; every human-made token tried was
(tests/test_link_secrets.py holds both lists).
"""

from __future__ import annotations

import logging
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

TOKEN_ENV = "CROUPIER_LINK_TOKEN"
MIN_TOKEN_CHARS = 22
MIN_HEX_TOKEN_CHARS = 32
MIN_DISTINCT_CHARS = 8  # random 22 base64url or 32 hex characters have ~19 / ~14
MAKE_ONE = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
_HEX = frozenset("0123456789abcdefABCDEF")
_MAX_FILE_BYTES = 4096
GUESSABLE_SHARE = 0.6
# Word-like: a run of letters of one case (or Capitalized), pronounceable: vowels a quarter to
# ~3/5 of it, no 4 consonants or 3 vowels in a row, at most one of j/q/x/z, q only as qu, no
# doubled rare letter. Random letters seldom are; words and names nearly always.
_LETTER_RUN = re.compile(r"[A-Z]?[a-z]{4,}|[A-Z]{4,}")
_YEAR = re.compile(r"(?<![0-9])(?:19|20)[0-9]{2}(?![0-9])")
_CONSONANTS_4 = re.compile(r"[^aeiouy]{4,}", re.I)
_VOWELS_3 = re.compile(r"[aeiouy]{3,}", re.I)
_DOUBLED_RARE = re.compile(r"([^aeioulnrstmpfgcdbhk])\1", re.I)
_RARE = frozenset("jqxzJQXZ")
_Q_ALONE = re.compile(r"q(?!u)", re.I)


class WeakToken(ValueError):
    """A link token that is empty, too short or too regular to keep anyone out."""


def check_token(token: str, where: str = "the link token") -> str:
    """`token` if it is worth at least 16 random bytes; `WeakToken` (saying how to make a good
    one) otherwise."""
    if not token:
        problem = "is empty"
    elif all(c in _HEX for c in token) and len(token) < MIN_HEX_TOKEN_CHARS:
        problem = f"is {len(token)} hex digits (at least {MIN_HEX_TOKEN_CHARS} are needed)"
    elif len(token) < MIN_TOKEN_CHARS:
        problem = f"is {len(token)} characters (at least {MIN_TOKEN_CHARS} are needed)"
    elif len(set(token)) < MIN_DISTINCT_CHARS:
        problem = f"has only {len(set(token))} different characters"
    elif (guessable := guessable_chars(token)) >= GUESSABLE_SHARE * len(token):
        problem = (
            f"is {guessable} of {len(token)} characters words, years, sequences or repeats "
            "(a guesser's first tries)"
        )
    else:
        return token
    raise WeakToken(
        f"{where} {problem}: a link token must be worth at least 16 random bytes. "
        f"Make one with: {MAKE_ONE}"
    )


def _word_like(run: str) -> bool:
    vowels = sum(c in "aeiouyAEIOUY" for c in run)
    return (
        0.25 * len(run) <= vowels <= 0.6 * len(run)
        and not _CONSONANTS_4.search(run)
        and not _VOWELS_3.search(run)
        and sum(c in _RARE for c in run) <= 1
        and not _DOUBLED_RARE.search(run)
        and not _Q_ALONE.search(run)
    )


def guessable_chars(token: str) -> int:
    """How many of `token`'s characters a pattern guesser gets for little: inside word-like
    runs, years, sequences or repeats of a fixed step -1, 0 or 1 (3+), or a 3+ character piece
    that came earlier in the token."""
    n = len(token)
    marked = [False] * n
    # A hex token's letters are a-f only: `cafe`, `dead` are 16 bits like any 4 digits.
    runs = () if all(c in _HEX for c in token) else _LETTER_RUN.finditer(token)
    for match in (*runs, *_YEAR.finditer(token)):
        if match.re is _YEAR or _word_like(match.group()):
            marked[match.start() : match.end()] = [True] * (match.end() - match.start())
    i = 0
    while i < n - 2:
        step, j = ord(token[i + 1]) - ord(token[i]), i + 1
        while j < n and abs(step) <= 1 and ord(token[j]) - ord(token[j - 1]) == step:
            j += 1
        if j - i >= 3:
            marked[i:j] = [True] * (j - i)
            i = j
        else:
            i += 1
    for i in range(3, n - 2):
        if token[i : i + 3] in token[: i + 2]:
            marked[i : i + 3] = [True] * 3
    return sum(marked)


@dataclass(frozen=True)
class TokenSource:
    """Where the link token is kept: a file (`file`, its path) or an environment variable
    (`env`, its name); neither: no token (an unauthenticated link, for loopback). Plain, non
    secret data: safe in a config, a checkpoint or an actor's arguments."""

    file: str | None = None
    env: str | None = None

    @classmethod
    def find(cls, file: str | Path | None = None) -> TokenSource:
        """What `croupier serve` and `croupier train` use: the file if one is given
        (`--link-token-file`), else `CROUPIER_LINK_TOKEN` if it is set (even empty: that is
        refused when read), else none."""
        if file is not None and str(file) != "":
            return cls(file=str(file))
        if TOKEN_ENV in os.environ:
            return cls(env=TOKEN_ENV)
        return cls()

    @property
    def given(self) -> bool:
        return self.file is not None or self.env is not None

    def describe(self) -> str:
        if self.file is not None:
            return f"the link token file {self.file}"
        if self.env is not None:
            return f"${self.env}"
        return "no link token"

    def read(self) -> str | None:
        """The token, checked (`check_token`); None when no source is given. `ValueError`
        when the source is missing or unreadable, `WeakToken` when the token is weak."""
        if self.file is not None:
            token = _read_file(Path(self.file))
        elif self.env is not None:
            value = os.environ.get(self.env)
            if value is None:
                raise ValueError(
                    f"${self.env} is not set in this process (the link token: set it in the "
                    "environment of every process that opens the link, `ray start` included)"
                )
            token = value.strip()
        else:
            return None
        return check_token(token, self.describe())


def _read_file(path: Path) -> str:
    try:
        with path.open("rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            data = f.read(_MAX_FILE_BYTES + 1)
    except OSError as e:
        raise ValueError(f"cannot read the link token file {path}: {e.strerror or e}") from None
    if len(data) > _MAX_FILE_BYTES:
        raise ValueError(f"the link token file {path} is over {_MAX_FILE_BYTES} bytes")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning(
            "the link token file %s can be read by other users (mode %o): chmod 600 it",
            path,
            stat.S_IMODE(mode),
        )
    try:
        return data.decode().strip()
    except UnicodeDecodeError:
        raise ValueError(f"the link token file {path} is not text") from None
