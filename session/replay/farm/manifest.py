"""Which recordings a farm replays, and what each must show: WAV paths, a directory, or a manifest.

A manifest is TOML (paths relative to the manifest's own directory)::

    [defaults]                      # optional; every recording inherits these
    scenario = "default"            # built-in name or a scenario TOML file
    tools = "mytools:registry"      # MODULE:ATTR, a ToolRegistry
    expect = { no_errors = true }

    [[recording]]
    path = "calls/refund.wav"       # required
    name = "refund"                 # optional, default the file's stem; unique in the farm
    scenario = "tools"
    transcripts = ["I want a refund", "No, stop"]   # else a sidecar calls/refund.txt, if any
    expect = { barge_ins = 1, max_cut_error_ms = 10, max_reply_latency_ms = 1500 }
    # barge_ins = { min = 1, max = 3 } for a range

A recording's ``expect`` overrides the defaults field by field. Every table refuses
unknown keys, so a misspelt expectation is an error, not a check that never runs. Errors
are one :class:`~voxline.realtime.errors.ConfigurationError` line naming the file and field.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Annotated, Any, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, model_validator

from voxline.base.documents import read_document
from voxline.realtime.errors import ConfigurationError, UsageError

from ..inputs import transcripts_for

__all__ = ["Expectations", "FarmRecording", "Range", "load_manifest", "recordings_from_paths"]

NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Range(_Strict):
    """At least ``min`` and at most ``max`` (either may be left out)."""

    min: Annotated[int, Field(ge=0)] | None = None
    max: Annotated[int, Field(ge=0)] | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.min is None and self.max is None:
            raise ValueError("give min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        return self

    def holds(self, value: int) -> bool:
        return (self.min is None or value >= self.min) and (self.max is None or value <= self.max)

    def __str__(self) -> str:
        if self.max is None:
            return f">= {self.min}"
        return f"<= {self.max}" if self.min is None else f"{self.min}..{self.max}"


def _count_or_range(value: Any) -> str:
    return "range" if isinstance(value, dict | Range) else "count"


# an exact number of barge-ins, or a range; errors name the one the value was meant as
BargeIns = Annotated[Annotated[Annotated[int, Field(ge=0)], Tag("count")] | Annotated[Range, Tag("range")],
                     Discriminator(_count_or_range)]


class Expectations(_Strict):
    """What a recording's replay must show; a field left out is not checked."""

    barge_ins: BargeIns | None = None  # exact count, or a range
    max_cut_error_ms: NonNegative | None = None  # |truncate − heard| of every barge-in
    max_reply_latency_ms: NonNegative | None = None  # end of user speech → first reply sample heard, every turn
    no_errors: bool = False  # no error reported at all, not even one the session recovered from

    def over(self, base: Expectations) -> Expectations:
        """These expectations, with ``base`` for the fields not set here."""
        return base.model_copy(update={name: getattr(self, name) for name in self.model_fields_set})


class _Defaults(_Strict):
    scenario: str | None = None
    tools: str | None = None
    expect: Expectations = Expectations()


def _plain_name(name: str) -> str:
    if not name or any(c in name for c in "/\\\x00"):
        raise ValueError(f"{name!r} cannot name a recording: give a name with no '/', '\\' or NUL, not empty")
    if not name.isprintable():  # it names a folder and a test: a terminal would act on an escape in it
        raise ValueError(f"{name!r} cannot name a recording: give a name of printable characters")
    return name


class _Entry(_Strict):
    path: str
    name: Annotated[str, AfterValidator(_plain_name)] | None = None
    scenario: str | None = None
    tools: str | None = None
    transcripts: list[str] | None = None
    expect: Expectations = Expectations()


class _Manifest(_Strict):
    defaults: _Defaults = _Defaults()
    recording: Annotated[list[_Entry], Field(min_length=1)]


class FarmRecording(_Strict):
    """One recording of a farm, resolved: an absolute path, a unique name, its own settings."""

    name: str
    path: Path
    scenario: str | None = None  # None: the built-in default
    tools: str | None = None  # MODULE:ATTR
    transcripts: tuple[str, ...] | None = None
    expect: Expectations = Expectations()
    folder: str | None = None  # its outputs' folder under --out-dir, made safe and unique (layout.assign_folders)
    # why it cannot run, found as the farm was gathered (a sidecar transcript that cannot be read): its error
    # verdict, as a WAV that cannot be read gets, while the others run
    problem: str | None = None


def recordings_from_paths(paths: list[Path]) -> list[FarmRecording]:
    """WAV files and directories (every ``*.wav`` in it, ``.WAV`` and other cases too, sorted; as a shell's ``*``,
    not the hidden ones, such as the ``._a.wav`` a Mac leaves beside ``a.wav`` on a shared drive, nor a folder so named)
    as recordings,
    sidecar transcripts honoured. A path is kept as named (made absolute), not where a link leads: the results
    name the recording the user gave."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(entry for entry in path.iterdir()
                           if entry.suffix.lower() == ".wav" and not entry.name.startswith(".") and not entry.is_dir())
            if not found:
                raise ConfigurationError(f"{path}: no *.wav recordings in this directory")
            files.extend(found)
        elif (why := _missing(path)) is not None:
            raise ConfigurationError(f"{path}: {why}")
        else:
            files.append(path)  # a file, or a pipe or a device: its reading says what is wrong, as its error verdict
    recordings = [FarmRecording(name=name, path=path, **_sidecar(path))
                  for path, name in _named_apart([Path(os.path.abspath(f)) for f in files])]
    return _unique(recordings, "inputs")


def _missing(path: Path) -> str | None:
    """Why ``path`` cannot be looked at (not there, a link to nothing, a loop of links, no permission), or None."""
    try:
        os.stat(path)
    except OSError as exc:
        return (exc.strerror or type(exc).__name__).lower()
    return None


def _sidecar(recording: Path) -> dict[str, Any]:
    """A recording's sidecar transcript as its fields: ``transcripts``, or the ``problem`` of one that cannot be read
    (not UTF-8, unreadable), which is that recording's error, not the farm's."""
    try:
        return {"transcripts": transcripts_for(recording)}
    except ConfigurationError as exc:
        return {"problem": exc.message}


def _named_apart(paths: list[Path]) -> list[tuple[Path, str]]:
    """Each path with its recording's name: the file's stem, and where two files in different folders share one
    (``a/same.wav``, ``b/same.wav``), ``-2``, ``-3``… after it in the order of their paths, as their folders get,
    so a farm of every ``*/take.wav`` runs. The same file named twice is the command line's mistake."""
    given: set[Path] = set()
    for path in paths:
        if path in given:
            raise UsageError(f"{path} is given twice; give each recording once")
        given.add(path)
    used = {p.stem for p in paths}
    named: dict[Path, str] = {}
    first: set[str] = set()
    for path in sorted(paths):
        name, n = path.stem, 2
        if name in first:
            while (name := f"{path.stem}-{n}") in used:
                n += 1
            used.add(name)
        first.add(path.stem)
        named[path] = name
    return [(p, named[p]) for p in paths]


def load_manifest(path: Path) -> list[FarmRecording]:
    """The recordings a manifest lists (see the module docstring), validated."""
    try:
        data = tomllib.loads(read_document(path))
    except OSError as exc:
        raise ConfigurationError(f"cannot read manifest {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigurationError(f"manifest {path} is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"manifest {path} is not valid TOML: {exc}") from None
    except RecursionError:  # the standard parser recurses once per level of nesting
        raise ConfigurationError(f"manifest {path} nests arrays or tables too deeply to read") from None
    try:
        # strictly: TOML has booleans and numbers of its own, so "yes" is no boolean, "30" no number, 1.0 no count
        manifest = _Manifest.model_validate(data, strict=True)
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        # a misspelt table (``[[recordings]]``) shows first as the one it stands for missing: name it
        extra = [e for e in errors if e["type"] == "extra_forbidden" and len(e["loc"]) == 1]
        if first["type"] == "missing" and first["loc"] == ("recording",) and extra:
            raise ConfigurationError(f"manifest {path}: {extra[0]['loc'][0]}: not a table of a manifest "
                                     "(did you mean [[recording]]?)") from None
        raise ConfigurationError(f"manifest {path}: {_problem(first)}") from None
    base = path.parent
    recordings = []
    for n, entry in enumerate(manifest.recording, 1):
        wav = Path(os.path.abspath(base / entry.path))
        if wav.is_dir():
            raise ConfigurationError(f"manifest {path}: recording {n}: path: a directory, not a WAV file: {wav}")
        if (why := _missing(wav)) is not None:
            raise ConfigurationError(f"manifest {path}: recording {n}: path: {why}: {wav}")
        scenario = entry.scenario or manifest.defaults.scenario
        recordings.append(FarmRecording(
            name=entry.name or wav.stem, path=wav, scenario=_scenario_source(scenario, base),
            tools=entry.tools or manifest.defaults.tools,
            **({"transcripts": tuple(entry.transcripts)} if entry.transcripts is not None else _sidecar(wav)),
            expect=entry.expect.over(manifest.defaults.expect)))
    return _unique(recordings, f"manifest {path}")


def _scenario_source(scenario: str | None, base: Path) -> str | None:
    """A scenario file relative to the manifest becomes absolute; a built-in name stays a name."""
    if scenario is None or not scenario.endswith(".toml"):
        return scenario
    return str((base / scenario).resolve())


def _problem(error: Any) -> str:
    """Where and what is wrong, in the manifest's words rather than pydantic's: a validator's own words as written,
    a missing field as missing, no recording as what to add."""
    kind, loc = error["type"], error["loc"]
    if loc == ("recording",) and kind in ("missing", "too_short"):
        return "no recording listed: add a [[recording]] table with its path"
    if loc == ("recording",) and kind == "list_type":
        return "recording: write each recording as a [[recording]] table (double brackets)"
    ge = (error.get("ctx") or {}).get("ge")
    what = _SAID.get(kind) or (f"takes a number >= {ge}" if kind == "greater_than_equal" else None)
    return f"{_where(loc)}: {what or str(error['msg']).removeprefix('Value error, ')}"


_SAID = {"missing": "missing (it is required)", "extra_forbidden": "not a field of this table",
         "string_type": "takes text", "int_type": "takes a whole number", "int_parsing": "takes a whole number",
         "int_from_float": "takes a whole number", "float_type": "takes a number", "float_parsing": "takes a number",
         "finite_number": "takes a finite number", "bool_type": "takes true or false",
         "bool_parsing": "takes true or false", "list_type": "takes a list", "model_type": "takes a table",
         "model_attributes_type": "takes a table", "dict_type": "takes a table"}
"""pydantic's error types in the manifest's words (a validator's own words are kept as written)."""


def _where(loc: tuple[Any, ...]) -> str:
    """pydantic's ``("recording", 2, "expect", "barge_ins")`` → ``recording 3: expect.barge_ins``."""
    parts = [str(p) for p in loc if p not in ("count", "range")]
    if len(loc) >= 2 and loc[0] == "recording" and isinstance(loc[1], int):
        rest = ".".join(parts[2:])
        return f"recording {loc[1] + 1}" + (f": {rest}" if rest else "")
    return ".".join(parts) or "manifest"


def _unique(recordings: list[FarmRecording], where: str) -> list[FarmRecording]:
    """Sorted by name; two recordings may not share one (their outputs would collide)."""
    seen: dict[str, Path] = {}
    for r in recordings:
        if r.name in seen:
            raise ConfigurationError(f"{where}: two recordings are named {r.name!r} ({seen[r.name]} and {r.path}); "
                                     "rename one" + (" or give it a name" if where.startswith("manifest") else ""))
        seen[r.name] = r.path
    return sorted(recordings, key=lambda r: r.name)
