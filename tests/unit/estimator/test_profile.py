"""Profiles: shipped ones load, every number has a source, bad files fail in one clear line."""

import json

import pytest

from mdloader_plugin.estimator import ProfileError, available, get_profile
from mdloader_plugin.estimator.models import optional_params, required_params


def test_shipped_profiles_complete_and_sourced():
    assert {"perlmutter", "frontier", "local"} <= set(available())
    for name in available():
        prof = get_profile(name)
        assert set(prof.params) == set(required_params()) | set(optional_params())
        assert all(prof.sources[k] for k in prof.params), name


def test_slingshot_nic_bandwidth_cited():
    prof = get_profile("perlmutter")
    assert 1e10 < prof.params["os.bw_inter"] <= 2.5e10
    assert "25 GB/s" in prof.sources["os.bw_inter"]


def _write(tmp_path, mutate):
    doc = get_profile("perlmutter").to_json()
    mutate(doc["params"])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    return path


def test_missing_key_names_file_and_key(tmp_path):
    path = _write(tmp_path, lambda p: p.pop("os.t_flush_inter"))
    with pytest.raises(ProfileError, match=r"bad\.json: missing key 'os.t_flush_inter'"):
        get_profile(str(path))


@pytest.mark.parametrize("key,value", [("os.bw_inter", 10.0), ("coll.t_sync", 3.0),
                                       ("os.t_get_intra", -1e-6), ("mem.bw", "fast")])
def test_absurd_values_rejected(tmp_path, key, value):
    path = _write(tmp_path, lambda p: p[key].update(value=value))
    with pytest.raises(ProfileError, match=key.replace(".", r"\.")) as exc:
        get_profile(str(path))
    assert "\n" not in str(exc.value) and "bad.json" in str(exc.value)


def test_unknown_name_lists_available(tmp_path):
    with pytest.raises(ProfileError, match="shipped: frontier, local, perlmutter"):
        get_profile("summit")
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    with pytest.raises(ProfileError, match="not valid JSON"):
        get_profile(str(bad))


def test_round_trip_and_env_default(tmp_path, monkeypatch):
    path = tmp_path / "mine.json"
    get_profile("frontier").write(path)
    monkeypatch.setenv("MDLOADER_PROFILE", str(path))
    assert get_profile().params == get_profile("frontier").params


def test_write_is_atomic(tmp_path, monkeypatch):
    """A reader sees the old profile or the new one, never a part: the text goes to a temporary
    file in the same folder, renamed over the profile (a failed write leaves the old file)."""
    import os

    from mdloader_plugin.estimator import profile as mod

    path = tmp_path / "p.json"
    get_profile("local").write(path)
    old = path.read_text()
    seen = []
    real = os.replace
    monkeypatch.setattr(mod.os, "replace", lambda a, b: (seen.append((a, b, path.read_text())),
                                                          real(a, b)))
    get_profile("frontier").write(path)
    (tmp, dst, during), = seen
    assert os.path.dirname(tmp) == str(tmp_path) and str(dst) == str(path) and during == old
    assert get_profile(str(path)).params == get_profile("frontier").params

    def broken(a, b):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(mod.os, "replace", broken)
    with pytest.raises(OSError):
        get_profile("perlmutter").write(path)
    assert get_profile(str(path)).params == get_profile("frontier").params
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json"]  # no temporary left


def test_write_makes_missing_folders(tmp_path):
    """``mdloader calibrate --out profiles/HOST.json`` (the documented command) in a checkout
    without a profiles/ folder."""
    path = tmp_path / "profiles" / "host.json"
    get_profile("local").write(path)
    assert get_profile(str(path)).params == get_profile("local").params
