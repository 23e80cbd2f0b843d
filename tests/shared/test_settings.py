import enum
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
import pytest
from pydantic import BaseModel, ConfigDict, Discriminator, Field, SecretStr, Tag, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.settings import (
    ConfigError,
    ConfigProblem,
    apply_env_overrides,
    format_key_path,
    interpolate,
    load_config,
    parse_env_value,
    settings_error,
)
from shared.settings._validation import locate

# --- small models standing in for the real configuration ---------------------------------------


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StdioServer(Strict):
    transport: Literal["stdio"]
    command: str
    args: list[str] = []


class HttpServer(Strict):
    transport: Literal["http"]
    url: str
    token: SecretStr | None = None


Server = Annotated[StdioServer | HttpServer, Field(discriminator="transport")]


class Level(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Model(Strict):
    provider: Literal["local", "openai"]
    name: str = Field(alias="model-name")


class Agent(Strict):
    id: str
    model: Model
    level: Level = Level.LOW


class Cat(Strict):
    meow: bool


class Dog(Strict):
    bark: bool


def _pet_kind(value: Any) -> str | None:
    for key, kind in (("meow", "cat"), ("bark", "dog")):
        if isinstance(value, dict) and key in value:
            return kind
    return None


class Config(Strict):
    servers: dict[str, Server] = {}
    agents: list[Agent] = []
    port: int = 8000
    api_key: SecretStr = SecretStr("")
    either: int | str = 0
    pair: tuple[int, str] = (0, "")
    pet: (
        Annotated[Annotated[Cat, Tag("cat")] | Annotated[Dog, Tag("dog")], Discriminator(_pet_kind)] | None
    ) = None
    storage: Cat | Dog | None = None
    nested: dict[str, list[int]] = {}
    tags: list[int] | str = ""
    choice: Literal["a"] | int = 0

    @field_validator("port")
    @classmethod
    def _port_in_range(cls, value: int) -> int:
        if not 0 < value < 65536:
            raise ValueError("port must be between 1 and 65535")
        return value


def problems_of(caught: pytest.ExceptionInfo[ConfigError]) -> list[str]:
    return [str(problem) for problem in caught.value.problems]


def load_text(text: str, env: dict[str, str] | None = None) -> Config:
    return load_config(Config, None, env=env or {}, default_text=text)


def write(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


# --- problems -----------------------------------------------------------------------------------


def test_problem_lines_name_file_key_path_and_fix() -> None:
    error = ConfigError(
        [
            ConfigProblem(
                "nexo.yaml", "servers.time.transport", "unknown transport 'ftp'", "use one of stdio, http"
            ),
            ConfigProblem("nexo.yaml", "", "the file is empty", "write something"),
        ]
    )
    assert str(error) == (
        "nexo.yaml: servers.time.transport: unknown transport 'ftp'. Fix: use one of stdio, http\n"
        "nexo.yaml: (top level): the file is empty. Fix: write something"
    )


def test_key_paths_are_written_with_dots_and_indexes() -> None:
    assert [format_key_path(["agents", 0, "model", "provider"]), format_key_path([0, "x"])] == [
        "agents[0].model.provider",
        "[0].x",
    ]


# --- interpolation ------------------------------------------------------------------------------


def test_variables_are_replaced_in_every_string(tmp_path: Path) -> None:
    data = {"url": "http://${HOST}:${PORT}/", "list": ["${HOST}", 3, True, None], 7: "${PORT}"}
    result = interpolate(data, env={"HOST": "h", "PORT": "80"}, base_dir=tmp_path, file="f.yaml")
    assert result == {"url": "http://h:80/", "list": ["h", 3, True, None], 7: "80"}


@pytest.mark.parametrize(
    ("env", "expected"),
    [({}, "fallback"), ({"VAR": ""}, "fallback"), ({"VAR": "set"}, "set")],
)
def test_default_is_used_when_the_variable_is_unset_or_empty(
    tmp_path: Path, env: dict[str, str], expected: str
) -> None:
    assert interpolate("${VAR:-fallback}", env=env, base_dir=tmp_path, file="f") == expected


def test_variable_set_to_empty_without_default_is_empty(tmp_path: Path) -> None:
    assert interpolate("[${VAR}]", env={"VAR": ""}, base_dir=tmp_path, file="f") == "[]"


def test_double_dollar_escapes_a_reference(tmp_path: Path) -> None:
    result = interpolate("$${HOME} costs $$5 and ${X}", env={"X": "x"}, base_dir=tmp_path, file="f")
    assert result == "${HOME} costs $$5 and x"


def test_private_secret_file_is_read_without_its_trailing_newline(tmp_path: Path) -> None:
    write(tmp_path / "token", "s3cret\n\n")
    write(tmp_path / "crlf", "windows\r\n")
    absolute = write(tmp_path / "abs", "plain")
    data = {"a": "${file:token}", "b": "${file:crlf}", "c": f"${{file:{absolute}}}"}
    result = interpolate(data, env={}, base_dir=tmp_path, file="f")
    assert result == {"a": "s3cret\n", "b": "windows", "c": "plain"}


def test_secret_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    secret = write(tmp_path / "token", "s3cret", mode=0o644)
    with pytest.raises(ConfigError) as caught:
        interpolate({"llm": {"key": "${file:token}"}}, env={}, base_dir=tmp_path, file="nexo.yaml")
    assert problems_of(caught) == [
        f"nexo.yaml: llm.key: secret file {secret} is readable by group or others (mode 0644). "
        f"Fix: chmod 600 {secret}"
    ]


def test_unreadable_or_missing_secret_files_are_reported(tmp_path: Path) -> None:
    write(tmp_path / "binary", "")
    (tmp_path / "binary").write_bytes(b"\xff\xfe")
    (tmp_path / "dir").mkdir(mode=0o700)
    data = ["${file:missing}", "${file:binary}", "${file:dir}", "${file:}"]
    with pytest.raises(ConfigError) as caught:
        interpolate(data, env={}, base_dir=tmp_path, file="f")
    assert problems_of(caught) == [
        f"f: [0]: secret file {tmp_path / 'missing'} does not exist. "
        "Fix: create it (mode 600) or correct the path",
        f"f: [1]: secret file {tmp_path / 'binary'} cannot be read: it is not UTF-8 text. "
        "Fix: make it a readable text file",
        f"f: [2]: secret file {tmp_path / 'dir'} cannot be read: Is a directory. "
        "Fix: make it a readable text file",
        "f: [3]: ${file:} names no file. Fix: write ${file:PATH}",
    ]


def test_every_interpolation_problem_is_reported_with_its_key_path(tmp_path: Path) -> None:
    data = {
        "agents": [{"model": {"api_key": "${API_KEY}"}}],
        "a": "${1BAD}",
        "b": "${OPEN",
        "c": "${A:-${B}}",
    }
    with pytest.raises(ConfigError) as caught:
        interpolate(data, env={"B": "b"}, base_dir=tmp_path, file="nexo.yaml")
    syntax_fix = "Fix: write ${NAME}, ${NAME:-default} or ${file:PATH}, and $${ for a literal ${"
    assert problems_of(caught) == [
        "nexo.yaml: agents[0].model.api_key: environment variable API_KEY is not set. "
        "Fix: set API_KEY in the environment or write ${API_KEY:-default}",
        f"nexo.yaml: a: ${{1BAD}} is not a valid reference. {syntax_fix}",
        f"nexo.yaml: b: a ${{ reference is not closed (or is nested). {syntax_fix}",
        f"nexo.yaml: c: a ${{ reference is not closed (or is nested). {syntax_fix}",
    ]


# --- environment overrides ----------------------------------------------------------------------


def test_overrides_set_nested_keys_and_create_sections() -> None:
    data: dict[str, Any] = {"llm": {"providers": {"local": {"model": "m"}}}, "port": 1}
    env = {
        "NEXO_LLM__PROVIDERS__LOCAL__BASE_URL": "http://x",
        "NEXO_PORT": "9",
        "NEXO_NEW__SECTION__FLAG": "true",
        "HOME": "/root",
    }
    result = apply_env_overrides(data, env=env)
    assert result == {
        "llm": {"providers": {"local": {"model": "m", "base_url": "http://x"}}},
        "port": 9,
        "new": {"section": {"flag": True}},
    }
    assert data == {"llm": {"providers": {"local": {"model": "m"}}}, "port": 1}


def test_numeric_segments_index_lists_and_append_in_order() -> None:
    data: dict[str, Any] = {"agents": [{"id": "a", "model": "m"}]}
    env = {f"NEXO_ITEMS__{index}": str(index) for index in range(11)}
    env |= {"NEXO_AGENTS__0__ID": "renamed", "NEXO_AGENTS__1__ID": "added", "NEXO_GRID__0__0": "1"}
    result = apply_env_overrides(data, env=env)
    assert result == {
        "agents": [{"id": "renamed", "model": "m"}, {"id": "added"}],
        "items": list(range(11)),
        "grid": [[1]],
    }


def test_reserved_variables_are_left_alone() -> None:
    env = {"NEXO_CONFIG": "/etc/nexo.yaml", "NEXO_STATE_DIR": "/var/lib/nexo", "NEXO_PORT": "1"}
    result = apply_env_overrides({}, env=env, reserved=("CONFIG", "NEXO_STATE_DIR"))
    assert result == {"port": 1}


def test_custom_prefix_and_delimiter() -> None:
    result = apply_env_overrides({}, env={"APP.A.B": "x", "NEXO_C": "y"}, prefix="APP.", delimiter=".")
    assert result == {"a": {"b": "x"}}


def test_impossible_overrides_are_all_reported() -> None:
    data: dict[str, Any] = {"port": 1, "agents": [{"id": "a"}], "tags": ["x"]}
    env = {
        "NEXO_PORT__NUMBER": "1",
        "NEXO_AGENTS__5__ID": "b",
        "NEXO_AGENTS__NAME": "c",
        "NEXO_TAGS__0__DEEP": "d",
        "NEXO_A____B": "e",
    }
    with pytest.raises(ConfigError) as caught:
        apply_env_overrides(data, env=env)
    assert sorted(problems_of(caught)) == [
        "environment: NEXO_AGENTS__5__ID: index 5 is past the end of agents (1 entries). "
        "Fix: use an index from 0 to 1",
        "environment: NEXO_AGENTS__NAME: agents is a list. Fix: use a number to pick an entry, e.g. __0__",
        "environment: NEXO_A____B: the name has an empty key. Fix: use one __ between keys",
        "environment: NEXO_PORT__NUMBER: port is a value, not a section. "
        "Fix: override the whole value instead",
        "environment: NEXO_TAGS__0__DEEP: tags[0] is a value, not a section. "
        "Fix: override the whole value instead",
    ]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("true", True),
        ("False", False),
        ("3", 3),
        ("-2.5", -2.5),
        ("1e3", "1e3"),
        ("[a, b]", ["a", "b"]),
        ("{a: 1}", {"a": 1}),
        ("null", None),
        ("", ""),
        ("plain text", "plain text"),
        ('"0x1f"', "0x1f"),
        ("'quoted'", "quoted"),
        ("0x1f", "0x1f"),
        ("012", "012"),
        ("yes", "yes"),
        ("a # not a comment", "a # not a comment"),
        ("key: value", "key: value"),
        ("[unclosed", "[unclosed"),
        ("- item", "- item"),
    ],
)
def test_override_values_are_typed_like_yaml_scalars(text: str, value: Any) -> None:
    assert parse_env_value(text) == value


# --- load_config --------------------------------------------------------------------------------

VALID = """
servers:
  time: {transport: stdio, command: nexo-time}
  web: {transport: http, url: "${WEB_URL:-http://localhost:9000}", token: "${file:web.token}"}
agents:
  - id: main
    model: {provider: local, model-name: tiny}
"""


def test_valid_file_is_interpolated_overridden_and_validated(tmp_path: Path) -> None:
    write(tmp_path / "web.token", "tok\n")
    config_file = write(tmp_path / "nexo.yaml", VALID)
    env = {"NEXO_PORT": "8080", "NEXO_AGENTS__0__LEVEL": "high", "NEXO_CONFIG": str(config_file)}
    config = load_config(Config, config_file, env=env, reserved_env=("CONFIG",))
    web = config.servers["web"]
    assert isinstance(web, HttpServer)
    assert web.token is not None
    assert (config.port, config.agents[0].level, web.url, web.token.get_secret_value()) == (
        8080,
        Level.HIGH,
        "http://localhost:9000",
        "tok",
    )


def test_built_in_defaults_are_used_without_a_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEXO_PORT", "7")
    assert (load_text("port: 5").port, load_config(Config, None).port) == (5, 7)


def test_empty_file_means_all_defaults(tmp_path: Path) -> None:
    assert load_config(Config, write(tmp_path / "nexo.yaml", "# nothing yet\n"), env={}) == Config()


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (
            "missing",
            "the configuration file does not exist. Fix: create it or give the path of an existing file",
        ),
        ("directory", "the file cannot be read: Is a directory. Fix: make it a readable file"),
        ("latin1", "the file is not UTF-8 text. Fix: save it as UTF-8"),
    ],
)
def test_unreadable_file_is_reported_with_a_fix(tmp_path: Path, setup: str, message: str) -> None:
    path = tmp_path / "nexo.yaml"
    if setup == "directory":
        path.mkdir()
    elif setup == "latin1":
        path.write_bytes("port: 1 # café".encode("latin-1"))
    with pytest.raises(ConfigError) as caught:
        load_config(Config, path, env={})
    assert problems_of(caught) == [f"{path}: (top level): {message}"]


def test_yaml_syntax_error_names_line_and_column() -> None:
    with pytest.raises(ConfigError) as caught:
        load_text("port: 1\nservers:\n  time: [unclosed\n")
    assert problems_of(caught) == [
        "<built-in defaults>: (top level): invalid YAML at line 4, column 1: "
        "expected ',' or ']', but got '<stream end>'. Fix: correct the YAML at line 4, column 1"
    ]


def test_key_written_twice_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        load_text("7: seven\nport: 1\nport: 2\n")
    assert problems_of(caught) == [
        "<built-in defaults>: (top level): invalid YAML at line 3, column 1: found the key 'port' twice. "
        "Fix: correct the YAML at line 3, column 1"
    ]


def test_anchors_and_merge_keys_work_and_merged_keys_may_be_overridden() -> None:
    config = load_text(
        "servers:\n"
        "  time: &base {transport: stdio, command: nexo-time, args: [--utc]}\n"
        "  clock:\n"
        "    <<: *base\n"
        "    command: nexo-clock\n"
    )
    assert config.servers == {
        "time": StdioServer(transport="stdio", command="nexo-time", args=["--utc"]),
        "clock": StdioServer(transport="stdio", command="nexo-clock", args=["--utc"]),
    }


def test_top_level_must_be_a_mapping() -> None:
    with pytest.raises(ConfigError) as caught:
        load_text("- a\n- b\n")
    assert problems_of(caught) == [
        "<built-in defaults>: (top level): the top level is list, not a mapping. "
        "Fix: write `key: value` lines"
    ]


def test_unknown_key_at_depth_names_the_path_and_the_allowed_keys() -> None:
    with pytest.raises(ConfigError) as caught:
        load_text("agents:\n  - id: a\n    model: {provider: local, model-name: m, temprature: 1}\n")
    assert problems_of(caught) == [
        "<built-in defaults>: agents[0].model.temprature: unknown key `temprature`. "
        "Fix: remove it or check the spelling; allowed keys here: model-name, provider"
    ]


def test_unknown_key_inside_a_union_member_suggests_the_closest_key() -> None:
    with pytest.raises(ConfigError) as caught:
        load_text("servers:\n  time: {transport: stdio, comand: x}\n")
    assert problems_of(caught) == [
        "<built-in defaults>: servers.time.command: required key `command` is missing. "
        "Fix: add `command: ...`",
        "<built-in defaults>: servers.time.comand: unknown key `comand` (did you mean `command`?). "
        "Fix: remove it or check the spelling; allowed keys here: args, command, transport",
    ]


def test_wrong_types_name_what_was_expected_and_got() -> None:
    with pytest.raises(ConfigError) as caught:
        load_text("port: eighty\nservers: [a]\nagents: {a: 1}\nnested: {a: [1, x]}\npair: [1, 2]\n")
    assert problems_of(caught) == [
        "<built-in defaults>: servers: Input should be a valid dictionary. "
        "Fix: expected a mapping, got a list",
        "<built-in defaults>: agents: Input should be a valid list. Fix: expected a list, got a mapping",
        "<built-in defaults>: port: Input should be a valid integer, unable to parse string as an integer. "
        "Fix: expected a whole number, got 'eighty'",
        "<built-in defaults>: pair[1]: Input should be a valid string. Fix: expected text, got 2",
        "<built-in defaults>: nested.a[1]: Input should be a valid integer, unable to parse string as an "
        "integer. Fix: expected a whole number, got 'x'",
    ]


def test_long_values_are_shortened_in_messages() -> None:
    with pytest.raises(ConfigError) as caught:
        load_text(f"port: {'9' * 30}x{'9' * 40}\n")
    assert problems_of(caught) == [
        "<built-in defaults>: port: Input should be a valid integer, unable to parse string as an integer. "
        f"Fix: expected a whole number, got '{'9' * 30}x{'9' * 25}..."
    ]


def test_value_matching_no_member_of_a_plain_union_is_one_problem() -> None:
    with pytest.raises(ConfigError) as caught:
        load_text("either: [1]\n")
    assert problems_of(caught) == [
        "<built-in defaults>: either: value matches none of the allowed types. "
        "Fix: expected a whole number or text, got a list"
    ]


def test_missing_required_keys_say_what_to_add() -> None:
    with pytest.raises(ConfigError) as caught:
        load_text("agents:\n  - model: {provider: local}\n")
    assert problems_of(caught) == [
        "<built-in defaults>: agents[0].id: required key `id` is missing. Fix: add `id: ...`",
        "<built-in defaults>: agents[0].model.model-name: required key `model-name` is missing. "
        "Fix: add `model-name: ...`",
    ]


def test_literal_and_enum_errors_list_the_choices() -> None:
    with pytest.raises(ConfigError) as caught:
        load_text("agents:\n  - {id: a, model: {provider: azure, model-name: m}, level: extreme}\n")
    assert problems_of(caught) == [
        "<built-in defaults>: agents[0].model.provider: 'azure' is not one of the choices. "
        "Fix: use one of local, openai",
        "<built-in defaults>: agents[0].level: 'extreme' is not one of the choices. "
        "Fix: use one of low, high",
    ]


def test_discriminated_union_errors_use_the_users_key_path() -> None:
    text = """
servers:
  time: {transport: stdio, command: [x]}
  ftp: {transport: ftp}
  bare: {command: x}
"""
    with pytest.raises(ConfigError) as caught:
        load_text(text)
    assert problems_of(caught) == [
        "<built-in defaults>: servers.time.command: Input should be a valid string. "
        "Fix: expected text, got a list",
        "<built-in defaults>: servers.ftp.transport: unknown transport 'ftp'. Fix: use one of stdio, http",
        "<built-in defaults>: servers.bare.transport: required key `transport` is missing. "
        "Fix: add `transport: ...`; use one of stdio, http",
    ]


def test_callable_discriminator_and_plain_model_unions_drop_their_tags() -> None:
    with pytest.raises(ConfigError) as caught:
        load_text("pet: {meow: maybe}\nstorage: {bark: 1, extra: 2}\n")
    assert problems_of(caught) == [
        "<built-in defaults>: pet.meow: Input should be a valid boolean, unable to interpret input. "
        "Fix: expected true or false, got 'maybe'",
        "<built-in defaults>: storage.meow: required key `meow` is missing. Fix: add `meow: ...`",
        "<built-in defaults>: storage.bark: unknown key `bark`. Fix: remove it or check the spelling; "
        "allowed keys here: meow",
        "<built-in defaults>: storage.extra: unknown key `extra`. Fix: remove it or check the spelling; "
        "allowed keys here: meow",
        "<built-in defaults>: storage.extra: unknown key `extra`. Fix: remove it or check the spelling; "
        "allowed keys here: bark",
    ]


def test_generic_and_literal_union_members_drop_their_tags() -> None:
    with pytest.raises(ConfigError) as caught:
        load_text("tags: [1, x]\nchoice: b\n")
    assert problems_of(caught) == [
        "<built-in defaults>: tags[1]: Input should be a valid integer, unable to parse string as an "
        "integer. Fix: expected a whole number, got 'x'",
        "<built-in defaults>: tags: Input should be a valid string. Fix: expected text, got a list",
        "<built-in defaults>: choice: 'b' is not one of the choices. Fix: use one of a",
        "<built-in defaults>: choice: Input should be a valid integer, unable to parse string as an integer. "
        "Fix: expected a whole number, got 'b'",
    ]


def test_entry_that_no_callable_discriminator_recognises_is_reported() -> None:
    with pytest.raises(ConfigError) as caught:
        load_text("pet: {purr: true}\n")
    assert problems_of(caught) == [
        "<built-in defaults>: pet: the entry matches none of the allowed forms. "
        "Fix: write it in one of the documented forms"
    ]


def test_null_and_booleans_are_shown_as_written_in_yaml() -> None:
    with pytest.raises(ConfigError) as caught:
        load_text("port: null\npair: [1, true]\n")
    assert problems_of(caught) == [
        "<built-in defaults>: port: Input should be a valid integer. Fix: expected a whole number, got null",
        "<built-in defaults>: pair[1]: Input should be a valid string. Fix: expected text, got true",
    ]


def test_location_below_a_plain_value_keeps_the_raw_segments() -> None:
    located = locate(Config, ["port", "deeper", 0])
    assert (located.path, located.annotation, located.parent) == (["port", "deeper", 0], None, None)


def test_validator_errors_keep_their_message() -> None:
    with pytest.raises(ConfigError) as caught:
        load_text("port: 70000\n")
    assert problems_of(caught) == [
        "<built-in defaults>: port: port must be between 1 and 65535. "
        "Fix: change the value so that it satisfies this"
    ]


def test_secret_values_are_never_echoed(tmp_path: Path) -> None:
    text = "api_key: [sk-live-123456]\nservers:\n  web: {transport: http, url: u, token: 987654321}\n"
    with pytest.raises(ConfigError) as caught:
        load_text(text)
    assert problems_of(caught) == [
        "<built-in defaults>: servers.web.token: Input should be a valid string. Fix: expected text",
        "<built-in defaults>: api_key: Input should be a valid string. Fix: expected text",
    ]
    assert (caught.value.__cause__, caught.value.__suppress_context__) == (None, True)


def test_problem_from_an_override_names_the_variable() -> None:
    env = {"NEXO_AGENTS__0": "{id: 5}", "NEXO_EITHER": "x", "NEXO_PORT": "x"}
    with pytest.raises(ConfigError) as caught:
        load_text("agents:\n  - {id: a, model: {provider: local, model-name: m}}\npair: [1, 2]\n", env)
    assert problems_of(caught) == [
        "<built-in defaults>: agents[0].id: Input should be a valid string (set by NEXO_AGENTS__0). "
        "Fix: expected text, got 5",
        "<built-in defaults>: agents[0].model: required key `model` is missing (set by NEXO_AGENTS__0). "
        "Fix: add `model: ...`",
        "<built-in defaults>: port: Input should be a valid integer, unable to parse string as an integer "
        "(set by NEXO_PORT). Fix: expected a whole number, got 'x'",
        "<built-in defaults>: pair[1]: Input should be a valid string. Fix: expected text, got 2",
    ]


def test_interpolation_and_override_problems_are_reported_together() -> None:
    with pytest.raises(ConfigError) as caught:
        load_text("port: 1\nservers:\n  web: {transport: http, url: '${URL}'}\n", {"NEXO_PORT__X": "1"})
    assert problems_of(caught) == [
        "<built-in defaults>: servers.web.url: environment variable URL is not set. "
        "Fix: set URL in the environment or write ${URL:-default}",
        "environment: NEXO_PORT__X: port is a value, not a section. Fix: override the whole value instead",
    ]


def test_all_validation_problems_are_reported_at_once() -> None:
    with pytest.raises(ConfigError) as caught:
        load_text("port: x\nbogus: 1\nagents: [{}]\n")
    assert problems_of(caught) == [
        "<built-in defaults>: agents[0].id: required key `id` is missing. Fix: add `id: ...`",
        "<built-in defaults>: agents[0].model: required key `model` is missing. Fix: add `model: ...`",
        "<built-in defaults>: port: Input should be a valid integer, unable to parse string as an integer. "
        "Fix: expected a whole number, got 'x'",
        "<built-in defaults>: bogus: unknown key `bogus`. Fix: remove it or check the spelling; allowed keys "
        "here: agents, api_key, choice, either, nested, pair, pet, port, servers, storage, tags",
    ]


# --- settings_error -----------------------------------------------------------------------------


class ConsoleSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="NEXO_CONSOLE_", extra="forbid")

    socket: str
    port: int = 1
    mode: Literal["a", "b"] = "a"
    token: SecretStr = Field(SecretStr("default-token"), min_length=8)


def settings_problems(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], **init: Any) -> list[str]:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(pydantic.ValidationError) as caught:
        ConsoleSettings(**init)
    return [str(problem) for problem in settings_error(caught.value, env_prefix="NEXO_CONSOLE_").problems]


def test_settings_errors_are_keyed_by_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"NEXO_CONSOLE_PORT": "abc", "NEXO_CONSOLE_MODE": "c", "NEXO_CONSOLE_TOKEN": "short"}
    assert settings_problems(monkeypatch, env) == [
        "environment: NEXO_CONSOLE_SOCKET: required setting is missing. Fix: set NEXO_CONSOLE_SOCKET",
        "environment: NEXO_CONSOLE_PORT: Input should be a valid integer, unable to parse string as an "
        "integer. Fix: expected a whole number, got 'abc'",
        "environment: NEXO_CONSOLE_MODE: 'c' is not one of the choices. Fix: use one of a, b",
        "environment: NEXO_CONSOLE_TOKEN: Value should have at least 8 items after validation, not 5. "
        "Fix: change the value so that it satisfies this",
    ]


def test_settings_errors_never_echo_values_of_unknown_type(monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings_problems(monkeypatch, {}, socket=["secret"], bogus=1) == [
        "environment: NEXO_CONSOLE_SOCKET: Input should be a valid string. Fix: expected text",
        "environment: NEXO_CONSOLE_BOGUS: unknown setting. Fix: unset it or check the spelling",
    ]


def test_settings_error_keeps_a_location_that_already_has_the_prefix() -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        pydantic.TypeAdapter(dict[str, int]).validate_python({"NEXO_CONSOLE_PORT": "x"})
    error = settings_error(caught.value, env_prefix="NEXO_CONSOLE_")
    assert [problem.key_path for problem in error.problems] == ["NEXO_CONSOLE_PORT"]
