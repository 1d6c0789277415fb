"""Tool registration and JSON schema generation (GA flat tool shape)."""

from __future__ import annotations

import enum
import json
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import pytest
from pydantic import BaseModel, Field

from voxline.realtime.errors import ToolError
from voxline.session.tools import Tool, ToolRegistry, encode_output
from voxline.session.tools.docstrings import parse_docstring
from tests.support.oracle import check_client_event


class Unit(enum.Enum):
    CELSIUS = "c"
    FAHRENHEIT = "f"


class Place(BaseModel):
    """Where to look."""

    city: str
    country: str = "NL"


class WeatherQuery(BaseModel):
    """A weather question."""

    city: str = Field(description="City name")
    days: int = Field(1, ge=1, le=7)


class Node(BaseModel):
    label: str
    children: list[Node] = []


def params_of(func: Callable[..., Any], **options: Any) -> dict[str, Any]:
    registry = ToolRegistry()
    return registry.register(func, **options).schema()["parameters"]


def test_flat_shape_and_first_docstring_paragraph() -> None:
    registry = ToolRegistry()

    @registry.tool
    def get_weather(city: str) -> str:
        """Look up the weather
        for one city.

        Longer text that is not part of the description.
        """
        return city

    assert registry.schemas() == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Look up the weather for one city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        }
    ]
    assert get_weather("x") == "x"  # the decorator returns the function unchanged


def test_schemas_validate_as_session_tools_against_the_oracle() -> None:
    registry = ToolRegistry()

    @registry.tool(read_only=True)
    def forecast(place: Place, unit: Unit = Unit.CELSIUS, days: list[int] | None = None) -> str:
        """Forecast."""
        return ""

    @registry.tool
    def ask(query: WeatherQuery) -> str:
        return ""

    check_client_event({"type": "session.update", "session": {"type": "realtime", "tools": registry.schemas()}})


@pytest.mark.parametrize(
    ("hint", "expected"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (Literal["c", "f"], {"type": "string", "enum": ["c", "f"]}),
        (Unit, {"type": "string", "enum": ["c", "f"]}),
        (list[str], {"type": "array", "items": {"type": "string"}}),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (Optional[int], {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (
            Place,
            {
                "type": "object",
                "description": "Where to look.",
                "properties": {"city": {"type": "string"}, "country": {"type": "string", "default": "NL"}},
                "required": ["city"],
            },
        ),
    ],
    ids=lambda v: getattr(v, "__name__", None) or str(v),
)
def test_each_hint_kind(hint: Any, expected: dict[str, Any]) -> None:
    def tool(x: Any, n: int = 0) -> None: ...

    tool.__annotations__ = {"x": hint, "n": int, "return": None}
    params = params_of(tool, name="t")
    assert params["properties"]["x"] == expected
    assert params["required"] == ["x"]
    assert params["properties"]["n"] == {"type": "integer", "default": 0}
    assert "$defs" not in params


def test_dict_hint_allows_any_object() -> None:
    def t(d: dict) -> None: ...  # type: ignore[type-arg]

    assert params_of(t)["properties"]["d"] == {"type": "object", "additionalProperties": True}


def test_defaults_are_optional_and_optional_without_default_is_required() -> None:
    def t(a: str, b: int | None, c: str = "x", d: Unit | None = None) -> None: ...

    params = params_of(t)
    assert params["required"] == ["a", "b"]
    assert params["properties"]["c"]["default"] == "x"
    assert params["properties"]["d"] == {"anyOf": [{"type": "string", "enum": ["c", "f"]}, {"type": "null"}], "default": None}


def test_field_constraints_and_descriptions() -> None:
    def t(days: Annotated[int, Field(ge=1, le=7, description="How many days")], city: str = Field("Oslo", max_length=40)) -> None:
        """Summary.

        Args:
            days: ignored because Field gave a description.
            city: The city,
                spelled in English.
        """

    params = params_of(t)
    assert params["properties"]["days"] == {"type": "integer", "minimum": 1, "maximum": 7, "description": "How many days"}
    assert params["properties"]["city"] == {
        "type": "string",
        "maxLength": 40,
        "default": "Oslo",
        "description": "The city, spelled in English.",
    }


def test_single_model_parameter_becomes_the_parameters() -> None:
    def ask(query: WeatherQuery) -> None: ...

    params = params_of(ask)
    assert params["properties"] == {
        "city": {"type": "string", "description": "City name"},
        "days": {"type": "integer", "default": 1, "minimum": 1, "maximum": 7},
    }
    assert params["required"] == ["city"]


def test_recursive_model_keeps_only_its_own_defs() -> None:
    def t(tree: Node, tag: Unit) -> None: ...

    params = params_of(t)
    assert params["properties"]["tree"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert params["properties"]["tag"] == {"type": "string", "enum": ["c", "f"]}
    assert set(params["$defs"]) == {"Node"}
    assert params["$defs"]["Node"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}


def test_parameter_names_that_clash_with_pydantic_are_fine() -> None:
    registry = ToolRegistry()

    @registry.tool
    def t(json: str, model_config: int, _private: bool = False) -> None: ...

    params = registry["t"].schema()["parameters"]
    assert list(params["properties"]) == ["json", "model_config", "_private"]
    decoded, kwargs = registry["t"].parse('{"json": "x", "model_config": 2, "_private": true}')
    assert kwargs == {"json": "x", "model_config": 2, "_private": True}
    assert decoded == {"json": "x", "model_config": 2, "_private": True}


def test_options_are_recorded() -> None:
    registry = ToolRegistry()

    @registry.tool(name="lights", description="Switch lights.", read_only=False, timeout=2, needs_approval=True)
    async def switch(on: bool) -> str:
        return "ok"

    tool = registry.get("lights")
    assert isinstance(tool, Tool)
    assert (tool.description, tool.read_only, tool.timeout, tool.needs_approval, tool.is_async) == (
        "Switch lights.",
        False,
        2.0,
        True,
        True,
    )
    assert registry.get("switch") is None
    assert "lights" in registry and len(registry) == 1 and registry.names() == ["lights"]


def test_parse_decodes_once_and_validates() -> None:
    registry = ToolRegistry()

    @registry.tool
    def t(place: Place, unit: Unit = Unit.CELSIUS) -> None: ...

    decoded, kwargs = registry["t"].parse('{"place": {"city": "Oslo"}, "unit": "f"}')
    assert decoded == {"place": {"city": "Oslo"}, "unit": "f"}
    assert kwargs == {"place": Place(city="Oslo"), "unit": Unit.FAHRENHEIT}
    assert registry["t"].parse('{"place": {"city": "Oslo"}}')[1]["unit"] is Unit.CELSIUS


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("{}", "invalid arguments: field 'city' is required"),
        ('{"city": "x", "days": 9}', "invalid arguments: field 'days': input should be less than or equal to 7"),
        ('{"city": "x", "bogus": 1}', "invalid arguments: unexpected field 'bogus'"),
        ('"{\\"city\\": \\"x\\"}"', "invalid arguments: expected a JSON object, got str"),
        ("{city: x}", "invalid arguments: not valid JSON (Expecting property name enclosed in double quotes at position 1)"),
        ('{"city": "x", "days": ' + "9" * 5000 + "}", "invalid arguments: a number has more digits than can be read"),
        ("[" * 100_000 + "]" * 100_000, "invalid arguments: nested too deeply to read"),
        # before, true was taken as 1 day and false as 0.0 degrees: the tool ran on a number nobody gave
        ('{"city": "x", "days": true}', "invalid arguments: field 'days': takes a number, not true"),
        ('{"city": "x", "above": false}', "invalid arguments: field 'above': takes a number, not false"),
    ],
)
def test_parse_errors_are_one_line(arguments: str, message: str) -> None:
    registry = ToolRegistry()

    @registry.tool
    def t(city: str, days: Annotated[int, Field(le=7)] = 1, above: float | None = None, sunny: bool = False) -> None: ...

    with pytest.raises(ToolError) as info:
        registry["t"].parse(arguments)
    assert info.value.message == message


def test_a_number_and_a_flag_each_take_what_they_are_given() -> None:
    registry = ToolRegistry()

    @registry.tool
    def t(days: int, above: float | None = None, sunny: bool = False) -> None: ...

    assert registry["t"].parse('{"days": 3, "above": 2, "sunny": true}')[1] == {"days": 3, "above": 2.0, "sunny": True}


def test_empty_arguments_mean_no_arguments() -> None:
    registry = ToolRegistry()

    @registry.tool
    def now() -> str:
        return "12:00"

    assert registry["now"].parse("") == ({}, {})
    assert registry["now"].schema()["parameters"] == {"type": "object", "properties": {}, "additionalProperties": False}


def test_duplicate_name_is_refused() -> None:
    registry = ToolRegistry()

    def t(a: int) -> None: ...

    registry.register(t)
    with pytest.raises(ToolError, match="^tool 't' is already registered$"):
        registry.register(t)


def test_invalid_names() -> None:
    with pytest.raises(ToolError, match="tool name '<lambda>' is invalid"):
        ToolRegistry().register(lambda: None)
    with pytest.raises(ToolError, match="tool name 'get weather' is invalid"):
        ToolRegistry().register(lambda: None, name="get weather")


def _no_hint(a, b: int) -> None: ...  # type: ignore[no-untyped-def]


def _varargs(*items: int) -> None: ...


def _kwargs(**options: int) -> None: ...


def _positional(a: int, /) -> None: ...


def _callable(callback: Callable[[int], int]) -> None: ...


def _unresolvable(a: Missing) -> None: ...  # type: ignore[name-defined]  # noqa: F821 - on purpose


def _not_python(a: "1+") -> None: ...  # type: ignore[valid-type]  # noqa: F722 - on purpose


def _raises_when_read(a: "1/0") -> None: ...  # type: ignore[valid-type]  # noqa: F722 - evaluating it raises


def _itself(a: "list[_itself]") -> None: ...  # type: ignore[valid-type]  # noqa: F722 - pydantic evaluates it: NameError


def _bytes_literal(a: Literal[b"\xff"]) -> None: ...


def _bad_bound(a: Annotated[int, Field(gt="x")]) -> None: ...  # type: ignore[arg-type]


def _bad_pattern(a: Annotated[str, Field(pattern="(")]) -> None: ...


def _nan_default(a: float = float("nan")) -> None: ...


def _inf_default(a: float = float("inf")) -> None: ...


_NO_JSON = object()


def _object_default(a: int, b: int = _NO_JSON) -> None: ...  # type: ignore[assignment]


def _socket(a: int, peer: socket.socket) -> None: ...


class _ModelWithObjectDefault(BaseModel):
    a: int = _NO_JSON  # type: ignore[assignment]


def _whole_object_default(args: _ModelWithObjectDefault) -> None: ...


@pytest.mark.parametrize(
    ("func", "message"),
    [
        (_no_hint, "parameter 'a' has no type hint"),
        (_varargs, r"\*args/\*\*kwargs parameter 'items' is not supported"),
        (_kwargs, r"\*args/\*\*kwargs parameter 'options' is not supported"),
        (_positional, "positional-only parameter 'a' is not supported"),
        (_callable, r"unsupported parameter type \(parameter 'callback': Cannot generate a JsonSchema for "
                    r"core_schema.CallableSchema\)$"),
        # before, pydantic's 400 characters of advice on its own API followed, naming no parameter
        (_socket, r"unsupported parameter type \(parameter 'peer': Unable to generate pydantic-core schema for "
                  r"<class 'socket.socket'>\)$"),
        # before, registered with a warning on stderr, and the default left out of what the model was told
        (_object_default, r"the default of parameter 'b' \(<object object at 0x[0-9a-f]+>\) cannot be written as "
                          r"JSON; give one that can, or None$"),
        (_whole_object_default, r"unsupported parameter type \(Default value <object object at 0x[0-9a-f]+> is not "
                                r"JSON serializable; excluding default from JSON schema \[non-serializable-default\]\)$"),
        (_unresolvable, r"cannot resolve type hints \(NameError"),
        (_not_python, r"cannot resolve type hints \(SyntaxError"),  # these escaped as themselves, some 8 lines long
        (_raises_when_read, r"cannot resolve type hints \(ZeroDivisionError"),  # these two escaped as themselves
        (_itself, "unsupported parameter type"),
        (_bytes_literal, "unsupported parameter type"),
        (_bad_bound, "unsupported parameter type"),
        (_bad_pattern, "unsupported parameter type"),
        (_nan_default, r"its parameters cannot be described in JSON \(Out of range float values"),  # registered,
        (_inf_default, r"its parameters cannot be described in JSON"),  # then every session.update failed
    ],
)
def test_unsupported_signatures_raise_tool_error(func: Callable[..., Any], message: str) -> None:
    with pytest.raises(ToolError, match=message) as info:
        ToolRegistry().register(func, name="bad")
    assert "\n" not in info.value.message
    assert info.value.message.startswith("tool 'bad': ")


@pytest.mark.parametrize("timeout", [0, -1, float("inf"), float("nan"), True, "5"])
def test_bad_timeout(timeout: Any) -> None:
    def t() -> None: ...

    with pytest.raises(ToolError, match="timeout must be a positive number"):
        ToolRegistry().register(t, timeout=timeout)


def test_no_timeout_is_allowed() -> None:
    def t() -> None: ...

    assert ToolRegistry().register(t, timeout=None).timeout is None


def test_schemas_subset_and_copies() -> None:
    registry = ToolRegistry()

    def a(x: int) -> None: ...

    def b(y: str) -> None: ...

    registry.register(a)
    registry.register(b)
    assert [s["name"] for s in registry.schemas(["b"])] == ["b"]
    with pytest.raises(ToolError, match="no tool named 'c'"):
        registry.schemas(["c"])
    registry.schemas()[0]["parameters"]["properties"]["x"]["type"] = "mutated"
    assert registry.schemas()[0]["parameters"]["properties"]["x"]["type"] == "integer"


def test_async_callable_object_is_detected() -> None:
    class Lookup:
        __name__ = "lookup"

        async def __call__(self, key: str) -> str:
            return key

    tool = ToolRegistry().register(Lookup(), name="lookup")
    assert tool.is_async


def test_docstring_styles() -> None:
    google = parse_docstring(
        """Find things.

        Args:
            query (str): What to find,
                in words.
            limit: At most this many.

        Returns:
            the things.
        """
    )
    assert google.summary == "Find things."
    assert google.params == {"query": "What to find, in words.", "limit": "At most this many."}
    sphinx = parse_docstring("Find things.\n\n:param query: What to find.\n:param int limit: How many.\n:returns: x")
    assert sphinx.params == {"query": "What to find.", "limit": "How many."}
    assert parse_docstring(None).summary == ""


def test_encode_output_encodes_non_strings_exactly_once() -> None:
    assert encode_output('{"a":1}') == '{"a":1}'
    assert encode_output({"a": 1}) == '{"a":1}'
    assert json.loads(encode_output(Place(city="Oslo"))) == {"city": "Oslo", "country": "NL"}
    assert encode_output([Unit.CELSIUS, None]) == '["c",null]'
    with pytest.raises(ToolError, match="result of type object is not JSON-serialisable"):
        encode_output(object())


def test_single_model_tool_receives_the_model() -> None:
    registry = ToolRegistry()

    @registry.tool
    def ask(query: WeatherQuery) -> str:
        return query.city

    decoded, kwargs = registry["ask"].parse('{"city": "Oslo"}')
    assert kwargs == {"query": WeatherQuery(city="Oslo", days=1)}
    with pytest.raises(ToolError, match="field 'city' is required"):
        registry["ask"].parse("{}")


def test_concurrent_registration_from_threads() -> None:
    registry = ToolRegistry()

    def make(i: int) -> Callable[..., Any]:
        def tool(x: int) -> int:
            return x + i

        tool.__name__ = f"tool_{i}"
        return tool

    def register_many(start: int) -> None:
        for i in range(start, start + 25):
            registry.register(make(i))
            assert len(registry.schemas()) >= 1

    threads = [threading.Thread(target=register_many, args=(k * 25,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(registry.names()) == sorted(f"tool_{i}" for i in range(200))


@pytest.mark.parametrize(("source", "expected"), [
    ("def f(:\n", "--tools: importing 'broken_tools_mod' failed: SyntaxError: invalid syntax (broken_tools_mod.py, line 1)"),
    ("raise ValueError('boom')\n", "--tools: importing 'broken_tools_mod' failed: ValueError: boom"),
    ("x = 1\n", "--tools: module 'broken_tools_mod' has no attribute 'tools'"),
    ("raise SystemExit(3)\n", "--tools: importing 'broken_tools_mod' failed: SystemExit: 3"),
    ("raise GeneratorExit('odd')\n", "--tools: importing 'broken_tools_mod' failed: GeneratorExit: odd"),
    ("def __getattr__(name):\n    import optional_dependency_not_installed\n",
     "--tools: reading broken_tools_mod:tools failed: ModuleNotFoundError: No module named "
     "'optional_dependency_not_installed'"),
    ("def __getattr__(name):\n    raise AttributeError(name)\n",
     "--tools: module 'broken_tools_mod' has no attribute 'tools'"),
])
def test_a_tools_module_that_cannot_be_loaded_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          source: str, expected: str) -> None:
    import sys

    from voxline.realtime.errors import ConfigurationError
    from voxline.session.replay.inputs import load_tools

    (tmp_path / "broken_tools_mod.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "broken_tools_mod", raising=False)
    with pytest.raises(ConfigurationError) as refused:
        load_tools("broken_tools_mod:tools")
    assert str(refused.value) == expected
    sys.modules.pop("broken_tools_mod", None)


class _NotATool:
    pass


class _Callable:
    def __call__(self, x: int) -> int:
        return x


@pytest.mark.parametrize(("func", "options", "message"), [
    (5, {}, "a tool is a function (or a method, or a functools.partial), not int"),
    ("get_weather", {}, "a tool is a function (or a method, or a functools.partial), not str"),
    (_NotATool, {}, "a tool is a function (or a method, or a functools.partial), not the class _NotATool"),
    (_Callable(), {}, "a _Callable has no __name__: give the tool one with name="),
    (len, {"read_only": "no"}, "read_only takes True or False, not str"),
    (len, {"needs_approval": 1}, "needs_approval takes True or False, not int"),
    (len, {"description": 5}, "description takes a string, not int"),
])
def test_what_is_no_tool_is_named_for_what_it_is(func: Any, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolError) as refused:
        ToolRegistry().register(func, **options)
    assert str(refused.value) == message


def test_a_partial_is_described_by_the_function_it_wraps() -> None:
    import functools

    def weather(city: str, days: int = 1) -> str:
        """The forecast for a city.

        Args:
            city: the city's name.
        """
        return f"{city}: {days}"

    tool = ToolRegistry().register(functools.partial(weather, days=3), name="forecast")
    assert tool.description == "The forecast for a city."
    assert tool.parameters["properties"]["city"] == {"type": "string", "description": "the city's name."}
    assert tool.parameters["required"] == ["city"]
    assert tool.function(**tool.parse('{"city": "Oslo"}')[1]) == "Oslo: 3"


def test_a_registry_takes_only_its_own_kind_of_threads() -> None:
    with pytest.raises(TypeError, match="threads takes a ToolThreads, not int"):
        ToolRegistry(threads=5)  # type: ignore[arg-type]
