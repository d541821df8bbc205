"""Which model the CLI builds: a server by URL, keys, and a timeout that bounds retries too."""

from __future__ import annotations

import pytest
from langchain_openai import ChatOpenAI

from deep_agent._model_choice import NoModelConfigured, choose_model

LOCAL = "http://127.0.0.1:8080/v1"


def test_a_server_by_url_takes_a_bare_model_name_and_needs_no_key_on_loopback():
    model = choose_model("smollm2", env={}, base_url=LOCAL)
    assert isinstance(model, ChatOpenAI)
    assert (model.model_name, model.openai_api_base) == ("smollm2", LOCAL)


@pytest.mark.parametrize("url", ["http://localhost:11434/v1", "http://[::1]:8000/v1", "http://127.0.0.2:9/v1"])
def test_every_loopback_address_needs_no_key(url):
    assert choose_model(None, env={"OPENAI_BASE_URL": url}).openai_api_base == url


def test_a_remote_server_without_a_key_is_an_error_naming_the_url():
    with pytest.raises(ValueError, match=r"--base-url https://llm\.example\.com/v1: not a loopback address"):
        choose_model("big", env={}, base_url="https://llm.example.com/v1")
    with pytest.raises(NoModelConfigured):
        choose_model(None, env={"OPENAI_BASE_URL": "https://llm.example.com/v1"})


def test_the_key_comes_from_the_variable_named_and_a_missing_one_is_named():
    model = choose_model("m", env={"MY_KEY": "sk-mine"}, base_url="https://llm.example.com/v1", api_key_env="MY_KEY")
    assert model.openai_api_key.get_secret_value() == "sk-mine"
    with pytest.raises(ValueError, match="--api-key-env MY_KEY: the variable MY_KEY is not set"):
        choose_model("m", env={}, base_url=LOCAL, api_key_env="MY_KEY")


def test_the_timeout_bounds_a_call_with_its_retries(monkeypatch):
    # LangChain's OpenAI client resends a timed-out request twice by default: three timeouts per call.
    assert choose_model("m", env={}, base_url=LOCAL, timeout=30).max_retries == 0
    model = choose_model("m", env={}, base_url=LOCAL, timeout=30, retries=2)
    assert (model.max_retries, model.request_timeout) == (2, 10)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")  # init_chat_model reads the process's environment
    named = choose_model("openai:gpt-4.1-mini", timeout=12, retries=1)
    assert (named.max_retries, named.request_timeout) == (1, 6)


def test_a_bare_name_with_no_server_is_still_a_bad_argument():
    with pytest.raises(ValueError, match="expected provider:name .* or a server's model name with --base-url"):
        choose_model("smollm2", env={})
