"""Settings defined once: a dataclass field carries its type, default, help, flag and environment
variable, and from it come the command's typer options (`--help`), the config object and the
docs' tables (`croupier settings-doc`, checked against docs/settings.md by a test).

Why not pydantic-settings: it is not a dependency yet, and our flags are not always the
config's fields (`--spool-max-mb` fills `spool_max_bytes`, `0` means "off" = None, `--data-dir`
expands `{port}`), so a small generator with an explicit conversion per setting is clearer.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any

_KEY = "croupier.setting"
_NO_DEFAULT: Any = object()


@dataclasses.dataclass(frozen=True)
class Flag:
    """How one config field appears on the command line (see `setting`)."""

    help: str
    flag: str | None = None  # the option's name if not the field's (`spool-max-episodes`)
    env: str | None = None
    cli_type: Any = None  # the flag's type if not the field's
    to_cli: Callable[[Any], Any] | None = None  # field default -> flag default
    from_cli: Callable[[Any, dict[str, Any]], Any] | None = None  # flag value (+ all) -> field
    cli_default: Any = _NO_DEFAULT  # the flag's default when it differs from the field's
    cli: bool = True  # False: a field tests and code set, not a flag


def setting(default: Any = _NO_DEFAULT, help: str = "", **flag: Any) -> Any:
    """A dataclass field that is also a setting: `x: int = setting(8, "what it does")`.
    A list default is copied per instance."""
    meta = {_KEY: Flag(help=help, **flag)}
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda d=default: list(d), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@dataclasses.dataclass(frozen=True)
class Option:
    """One command-line option, resolved: what typer and the docs need."""

    field: str  # the dataclass field it fills
    param: str  # the python parameter name typer sees
    flag: str  # --like-this
    type: Any
    default: Any
    help: str
    env: str | None
    owner: type


def options(*classes: type) -> list[Option]:
    """The command-line options of `classes`' setting fields, in declaration order."""
    out: list[Option] = []
    for cls in classes:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            spec: Flag | None = f.metadata.get(_KEY)
            if spec is None or not spec.cli:
                continue
            if spec.cli_default is not _NO_DEFAULT:
                default = spec.cli_default
            else:
                default = f.default_factory() if f.default is dataclasses.MISSING else f.default
                if spec.to_cli is not None:
                    default = spec.to_cli(default)
            name = spec.flag or f.name.replace("_", "-")
            out.append(
                Option(
                    field=f.name,
                    param=name.replace("-", "_"),
                    flag="--" + name,
                    type=spec.cli_type if spec.cli_type is not None else hints[f.name],
                    default=default,
                    help=spec.help,
                    env=spec.env,
                    owner=cls,
                )
            )
    return out


def build(cls: type, values: dict[str, Any]) -> Any:
    """`cls(...)` from parsed option values (by parameter name); fields without a flag keep
    their defaults."""
    kwargs: dict[str, Any] = {}
    specs = {f.name: f.metadata.get(_KEY) for f in dataclasses.fields(cls)}
    for opt in options(cls):
        value = values[opt.param]
        spec = specs[opt.field]
        kwargs[opt.field] = spec.from_cli(value, values) if spec.from_cli else value
    return cls(**kwargs)


def command(*classes: type) -> Callable[[Callable[[dict[str, Any]], Any]], Callable[..., Any]]:
    """Decorate `fn(values: dict)` into a typer command whose options are `classes`' settings."""

    def wrap(fn: Callable[[dict[str, Any]], Any]) -> Callable[..., Any]:
        params = _parameters(options(*classes))

        def run(**values: Any) -> Any:
            return fn(values)

        run.__name__, run.__doc__ = fn.__name__, fn.__doc__
        run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        return run

    return wrap


def with_settings(
    *classes: type,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a typer command `fn(<its own options>, settings: dict)` so that `classes`'
    settings are options too, after its own; `settings` gets their values by parameter name
    (`build(cls, settings)` makes the object). For a command whose other options are no
    settings model's (`croupier engine`'s deadlines, `client.Deadlines`)."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        hints = typing.get_type_hints(fn, include_extras=True)
        own = [
            p.replace(
                kind=inspect.Parameter.KEYWORD_ONLY, annotation=hints.get(p.name, p.annotation)
            )
            for p in inspect.signature(fn).parameters.values()
            if p.name != "settings"
        ]
        opts = options(*classes)
        extra = _parameters(opts)
        names = {o.param for o in opts}

        def run(**values: Any) -> Any:
            settings = {k: values.pop(k) for k in list(values) if k in names}
            return fn(**values, settings=settings)

        run.__name__, run.__doc__ = fn.__name__, fn.__doc__
        run.__signature__ = inspect.Signature(own + extra)  # type: ignore[attr-defined]
        return run

    return wrap


def _parameters(opts: list[Option]) -> list[inspect.Parameter]:
    """The typer parameters (keyword-only, annotated with their option) of `opts`."""
    import typer

    return [
        inspect.Parameter(
            o.param,
            inspect.Parameter.KEYWORD_ONLY,
            default=o.default,
            annotation=Annotated[o.type, typer.Option(_decl(o), help=o.help or None, envvar=o.env)],
        )
        for o in opts
    ]


def _decl(o: Option) -> str:
    """A bool is an on/off pair (`--forward-thread/--no-forward-thread`), as typer makes it."""
    return f"{o.flag}/--no-{o.flag[2:]}" if o.type is bool else o.flag


def markdown_table(*classes: type) -> str:
    """The settings of `classes` as a markdown table (flag, environment, default, help)."""
    rows = ["| flag | environment | default | what it does |", "|---|---|---|---|"]
    for o in options(*classes):
        default = o.default
        if isinstance(default, bool) and o.type is bool:
            shown = o.flag if default else "--no-" + o.flag[2:]
            flag = f"`{o.flag}` / `--no-{o.flag[2:]}`"
            default_text = f"`{shown}`"
        else:
            flag = f"`{o.flag}`"
            default_text = "—" if default is None else f"`{default}`"
        env = f"`{o.env}`" if o.env else ""
        rows.append(f"| {flag} | {env} | {default_text} | {o.help.replace('|', '/')} |")
    return "\n".join(rows) + "\n"


def parse_layer_sizes(text: str) -> list[int]:
    """Hidden layer sizes from "256,256"; ValueError, saying what is expected, otherwise."""
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        raise ValueError(f"{text!r}: positive sizes separated by commas, e.g. 256,256")
    return sizes


def layer_sizes(text: str, flag: str = "--hiddens") -> list[int]:
    """`parse_layer_sizes` for a typer command: a usage error, not a traceback."""
    import typer

    try:
        return parse_layer_sizes(text)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint=flag) from None
