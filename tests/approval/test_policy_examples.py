"""Rules carry examples (`examples_match` / `examples_not_match`); a policy file whose example does not behave
as stated is refused at load, naming the rule and the example and saying what the rule matched instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.approval.policy import load_policy
from harness.errors import ConfigError

RULE = '''[[rules]]
name = "python-docs"
tool = "http_request"
decision = "approve"
match = { method = "GET", url = "https://docs\\\\.python\\\\.org/3/.*" }
unless = { headers = ".+" }
'''
GOOD = (RULE + 'examples_match = [{ tool = "http_request", arguments = { method = "GET", '
        'url = "https://docs.python.org/3/library/re.html" } }]\n'
        'examples_not_match = [\n'
        '  { tool = "http_request", arguments = { method = "POST", url = "https://docs.python.org/3/x" } },\n'
        '  { tool = "http_request", arguments = { method = "GET", url = "https://docs.python.org.evil.org/3/x" } },\n'
        '  { tool = "http_request", arguments = { method = "GET", url = "https://docs.python.org/3/x",'
        ' headers = { "X-Note" = "secret" } } },\n'
        '  { tool = "pip_download", arguments = { method = "GET", url = "https://docs.python.org/3/x" } },\n'
        ']\n')


def _load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return load_policy(path)


def test_a_file_whose_examples_behave_as_stated_loads(tmp_path: Path) -> None:
    policy = _load(tmp_path, GOOD)
    rule = policy.rules[0]
    assert len(rule.examples_match) == 1 and len(rule.examples_not_match) == 4
    assert policy.decide("http_request", {"method": "GET", "url": "https://docs.python.org/3/re.html"}).rule == \
        "python-docs"


def test_an_example_the_rule_does_not_match_refuses_the_file_saying_what_it_matched(tmp_path: Path) -> None:
    text = RULE + ('examples_match = [{ tool = "http_request", arguments = { method = "GET", '
                   'url = "https://docs.python.org/2/library/re.html" } }]\n')
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, text)
    said = str(err.value)
    assert "1 example(s) do not behave as stated" in said
    assert ("rules[0] (rule 'python-docs') examples_match[0] http_request {'method': 'GET', "
            "'url': 'https://docs.python.org/2/library/re.html'}: the rule does not apply to it") in said
    assert "match method 'GET' matches 'GET'" in said
    assert "match url 'https://docs.python.org/2/library/re.html' does not match " in said


def test_an_example_the_rule_matches_against_its_statement_refuses_the_file(tmp_path: Path) -> None:
    text = RULE + ('examples_not_match = [{ tool = "http_request", arguments = { method = "GET", '
                   'url = "https://docs.python.org/3/../../evil" } }]\n')
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, text)
    said = str(err.value)
    assert "(rule 'python-docs') examples_not_match[0]" in said and "the rule applies to it" in said
    assert "match url 'https://docs.python.org/3/../../evil' matches" in said
    assert "unless headers '' does not match '.+'" in said


def test_every_wrong_example_of_every_rule_is_named_at_once(tmp_path: Path) -> None:
    second = RULE.replace("python-docs", "second").replace('"approve"', '"deny"')
    text = (RULE + 'examples_match = [{ tool = "pip_download", arguments = {} }]\n' + second
            + 'examples_not_match = [{ tool = "http_request", arguments = { method = "GET", '
              'url = "https://docs.python.org/3/" } }]\n')
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, text)
    said = str(err.value)
    assert "2 example(s) do not behave as stated" in said
    assert "(rule 'python-docs') examples_match[0]" in said and "tool 'pip_download' does not match" in said
    assert "rules[1] (rule 'second') examples_not_match[0]" in said


@pytest.mark.parametrize("bad", ['examples_match = "GET /"', 'examples_match = [{ arguments = {} }]',
                                 'examples_match = [{ tool = "x", args = {} }]',
                                 'examples_match = [{ tool = "x", arguments = "url" }]'])
def test_a_malformed_example_is_refused_with_a_correct_one(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, RULE + bad + "\n")
    assert "examples_match" in str(err.value) and 'tool = "' in str(err.value)
