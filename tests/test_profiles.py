import pytest

from hacn_core.engine.profiles import PROFILES, ProfileError, check_profile, current_profile


def test_known_profiles_are_accepted_case_insensitively():
    assert PROFILES == ("smoke", "book", "paper")
    assert check_profile(" Paper ") == "paper"


def test_unknown_profile_lists_the_valid_ones(monkeypatch):
    monkeypatch.setenv("HACN_PROFILE", "huge")
    with pytest.raises(ProfileError) as err:
        current_profile()
    message = str(err.value)
    assert "'huge'" in message and "HACN_PROFILE" in message
    assert "smoke, book, paper" in message


def test_environment_variable_wins_over_default(monkeypatch):
    monkeypatch.setenv("HACN_PROFILE", "paper")
    assert current_profile() == "paper"
    monkeypatch.delenv("HACN_PROFILE")
    assert current_profile() == "book"
    assert current_profile(default="smoke") == "smoke"
