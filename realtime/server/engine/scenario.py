"""Scripted replies for the local server, read from TOML (stdlib ``tomllib``).

A scenario is an ordered list of turns. Each response the server makes in the
default conversation takes the next turn; at the end it starts over
(``after_last = "cycle"``) or keeps answering with the last turn
(``after_last = "repeat_last"``)::

    name = "example"
    description = "What this script is for."
    after_last = "cycle"                       # or "repeat_last"
    out_of_band = "Reply for conversation='none' responses."
    user_says = ["What is the weather?", "Thanks."]  # scripted input transcripts, one per user audio turn

    [[turns]]                                  # one spoken (or text) reply
    say = "Hello! I heard {user_seconds} seconds of audio."

    [[turns]]                                  # several outputs in one response
    [[turns.output]]
    say = "One moment, let me check."          # a preamble item ...
    [[turns.output]]
    call = "get_weather"                       # ... then a function call
    arguments = { city = "Paris" }             # a table (JSON-encoded) or a JSON string
    [[turns.output]]
    call = "get_time"                          # parallel calls: several in one response
    arguments = '{"zone": "UTC"}'

    [[turns]]                                  # a turn may also say what follows the tool outputs:
    [[turns.output]]
    call = "lookup"
    arguments = {}
    [turns.after]                              # used by the response.create that follows the
    say = "The lookup is done."                # function_call_output items, instead of the next turn

    [[turns]]                                  # a turn that listens: the first branch whose
    say = "Sorry, I did not catch that."       # phrases were heard in the user's last words,
    [[turns.when]]                             # else the turn's own say/output
    heard = ["weather", "forecast"]            # words or phrases, any of them
    output = [{ call = "get_weather", arguments = { city = "Paris" } }]
    after = "It is sunny in Paris."
    [[turns.when]]
    heard = ["cancel my order"]
    say = "Your order is cancelled."

``say`` texts may use ``{user_seconds}`` (length of the last user audio item),
``{user_text}`` (text of the last user text item) and ``{turn}`` (1-based turn
number). A message output may also be given as ``[[turns.output]] say = …``.

``user_says`` scripts what the user says: the n-th user audio item the server commits is
"transcribed" as the n-th entry (when the session asks for input transcription). Past the end of
the list, the server's recogniser hears the audio (``voxline[asr]``), or transcription fails.
A listening turn compares its branches' ``heard`` phrases with the user's last words: the
transcript of the last user audio item (scripted or recognised) or the last ``input_text``.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from voxline.base.documents import read_document
from voxline.realtime.errors import ConfigurationError, UsageError
from voxline.realtime.server.hearing.phrases import words

__all__ = [
    "BUILTIN_DIR",
    "Branch",
    "Call",
    "Output",
    "Say",
    "Scenario",
    "Turn",
    "builtin_names",
    "load_scenario",
    "parse_scenario",
    "read_transcripts",
    "with_transcripts",
]

BUILTIN_DIR = Path(__file__).parent.parent / "scenarios"
_LINE_END = re.compile(r"\r\n|\r|\n")  # a text file's line ends: not str.splitlines's form feed, NEL, U+2028…


@dataclass(frozen=True, slots=True)
class Say:
    """An assistant message: spoken (audio + transcript) or text, per the output modality."""

    text: str


@dataclass(frozen=True, slots=True)
class Call:
    """A function call with JSON ``arguments``."""

    name: str
    arguments: str


Output = Say | Call


@dataclass(frozen=True, slots=True)
class Branch:
    """What a listening turn does when one of ``heard`` was in the user's last words."""

    heard: tuple[str, ...]
    outputs: tuple[Output, ...]
    after: tuple[Output, ...] | None = None


@dataclass(frozen=True, slots=True)
class Turn:
    """The outputs of one response, and optionally the reply after its tool outputs.

    A turn with ``branches`` listens: the first branch whose phrases were heard replaces
    ``outputs`` / ``after``, which stay the answer when none was.
    """

    outputs: tuple[Output, ...]
    after: tuple[Output, ...] | None = None
    branches: tuple[Branch, ...] = ()


@dataclass(frozen=True, slots=True)
class Scenario:
    """A named script of turns."""

    name: str
    description: str
    turns: tuple[Turn, ...]
    after_last: Literal["cycle", "repeat_last"] = "cycle"
    out_of_band: tuple[Output, ...] = (Say("This is an out-of-band reply from the voxline local server."),)
    user_says: tuple[str, ...] = ()

    @property
    def listens(self) -> bool:
        """Whether any turn chooses its reply by what was heard."""
        return any(turn.branches for turn in self.turns)

    @property
    def phrases(self) -> tuple[str, ...]:
        """Every phrase the scenario listens for, once each, in order (to steer the recogniser)."""
        return tuple(dict.fromkeys(p for turn in self.turns for branch in turn.branches for p in branch.heard))


def builtin_names() -> list[str]:
    """Names of the scenarios shipped with the server (``default``, ``long``, …)."""
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.toml"))


def load_scenario(source: str | Path | None = None) -> Scenario:
    """Load a scenario from a path, a built-in name, or the built-in ``default``."""
    if source is None:
        source = "default"
    if not str(source).strip():
        raise UsageError(f"a scenario takes a built-in name ({', '.join(builtin_names())}) or a TOML file, "
                         "not an empty string")
    path = Path(source)
    if not path.suffix and not path.exists():
        path = BUILTIN_DIR / f"{source}.toml"
        if not path.exists():
            raise UsageError(f"unknown scenario {source!r}; built-in: {', '.join(builtin_names())}")
    try:
        data = tomllib.loads(read_document(path))
    except OSError as exc:
        raise ConfigurationError(f"cannot read scenario {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigurationError(f"scenario {path} is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"scenario {path} is not valid TOML: {exc}") from None
    except RecursionError:  # the standard parser recurses once per level of nesting
        raise ConfigurationError(f"scenario {path} nests arrays or tables too deeply to read") from None
    return parse_scenario(data, str(path))


def parse_scenario(data: dict[str, Any], where: str = "scenario") -> Scenario:
    """Build a :class:`Scenario` from decoded TOML, or raise ``ConfigurationError``."""
    _only(data, {"name", "description", "after_last", "out_of_band", "turns", "user_says"}, where)
    turns_raw = data.get("turns")
    if not isinstance(turns_raw, list) or not turns_raw:
        raise ConfigurationError(f"{where}: needs at least one [[turns]] entry")
    turns = tuple(_turn(t, f"{where}: turns[{i}]") for i, t in enumerate(turns_raw))
    after_last = data.get("after_last", "cycle")
    if after_last not in ("cycle", "repeat_last"):
        raise ConfigurationError(f"{where}: after_last must be 'cycle' or 'repeat_last'")
    scenario = Scenario(
        name=str(data.get("name", Path(where).stem)),
        description=str(data.get("description", "")),
        turns=turns,
        after_last=after_last,
    )
    if "out_of_band" in data:
        oob = _outputs(data["out_of_band"], f"{where}: out_of_band")
        scenario = Scenario(scenario.name, scenario.description, turns, after_last, oob)
    if "user_says" in data:
        scenario = with_transcripts(scenario, _user_says(data["user_says"], f"{where}: user_says"))
    return scenario


def with_transcripts(scenario: Scenario, user_says: Sequence[str]) -> Scenario:
    """``scenario`` with these scripted input transcripts (one per user audio turn)."""
    return replace(scenario, user_says=tuple(user_says))


def read_transcripts(path: Path) -> tuple[str, ...]:
    """Scripted input transcripts from a text file: one user turn per non-empty line (a byte-order mark
    before the first is no part of it). Lines end at ``\n``, ``\r\n`` or ``\r`` only: a form feed, NEL or
    line separator inside a line is part of its turn, not the start of another."""
    try:
        text = read_document(path)
    except OSError as exc:
        raise ConfigurationError(f"cannot read transcripts {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigurationError(f"transcripts {path} are not UTF-8 text") from None
    return tuple(line.strip() for line in _LINE_END.split(text) if line.strip())


def _user_says(raw: Any, where: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(s, str) and s for s in raw):
        raise ConfigurationError(f"{where}: expected a list of non-empty strings")
    return tuple(raw)


def _only(table: Any, keys: set[str], where: str) -> None:
    if not isinstance(table, dict):
        raise ConfigurationError(f"{where}: expected a table")
    extra = sorted(set(table) - keys)
    if extra:
        raise ConfigurationError(f"{where}: unknown key(s) {', '.join(extra)}")


def _turn(raw: Any, where: str) -> Turn:
    _only(raw, {"say", "output", "after", "when"}, where)
    outputs, after = _reply(raw, where)
    when = raw.get("when", [])
    if not isinstance(when, list) or ("when" in raw and not when):
        raise ConfigurationError(f"{where}: 'when' must be a non-empty list of [[turns.when]] tables")
    branches = tuple(_branch(b, f"{where}.when[{i}]") for i, b in enumerate(when))
    return Turn(outputs=outputs, after=after, branches=branches)


def _branch(raw: Any, where: str) -> Branch:
    _only(raw, {"heard", "say", "output", "after"}, where)
    heard = raw.get("heard")
    if isinstance(heard, str):
        heard = [heard]
    if not isinstance(heard, list) or not heard or not all(isinstance(h, str) and words(h) for h in heard):
        raise ConfigurationError(f"{where}: 'heard' must be a phrase or a list of phrases, each with a word")
    outputs, after = _reply(raw, where)
    return Branch(tuple(heard), outputs, after)


def _reply(raw: dict[str, Any], where: str) -> tuple[tuple[Output, ...], tuple[Output, ...] | None]:
    if ("say" in raw) == ("output" in raw):
        raise ConfigurationError(f"{where}: give exactly one of 'say' or 'output'")
    outputs = _outputs(raw.get("output", {"say": raw.get("say")}), where)
    after = _outputs(raw["after"], f"{where}.after") if "after" in raw else None
    if after is not None and not any(isinstance(o, Call) for o in outputs):
        raise ConfigurationError(f"{where}: 'after' needs at least one call in the turn")
    return outputs, after


def _outputs(raw: Any, where: str) -> tuple[Output, ...]:
    if isinstance(raw, str):
        return (Say(raw),)
    entries = raw if isinstance(raw, list) else [raw]
    if not entries:
        raise ConfigurationError(f"{where}: no outputs")
    return tuple(_output(e, f"{where}[{i}]") for i, e in enumerate(entries))


def _output(raw: Any, where: str) -> Output:
    _only(raw, {"say", "call", "arguments"}, where)
    if "say" in raw:
        if "call" in raw or "arguments" in raw or not isinstance(raw["say"], str):
            raise ConfigurationError(f"{where}: 'say' must be a string, alone")
        return Say(raw["say"])
    if not isinstance(raw.get("call"), str) or not raw["call"]:
        raise ConfigurationError(f"{where}: needs 'say' or 'call'")
    args = raw.get("arguments", {})
    if isinstance(args, str):
        try:
            json.loads(args)
        except ValueError:
            raise ConfigurationError(f"{where}: 'arguments' is not valid JSON") from None
        return Call(raw["call"], args)
    if not isinstance(args, dict):
        raise ConfigurationError(f"{where}: 'arguments' must be a table or a JSON string")
    return Call(raw["call"], json.dumps(args, separators=(",", ":"), default=str))
