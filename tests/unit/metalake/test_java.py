"""Finding a JDK by major version."""

from __future__ import annotations

import pytest

from metalake.java import JavaNotFound, find_java, java_major


def test_a_found_jdk_has_the_wanted_version() -> None:
    java = find_java(17)
    major = java_major(java)
    assert major is not None and major >= 17


def test_an_impossible_version_names_what_was_seen_and_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METALAKE_TEST_JAVA_HOME", "/nonexistent")
    with pytest.raises(JavaNotFound) as err:
        find_java(99, env_var="METALAKE_TEST_JAVA_HOME")
    message = str(err.value)
    assert message.startswith("no JDK 99+ found (looked at ")
    assert "point METALAKE_TEST_JAVA_HOME at it" in message


def test_a_version_range_excludes_newer_jdks() -> None:
    java = find_java(17, 21)
    major = java_major(java)
    assert major is not None and 17 <= major <= 21
