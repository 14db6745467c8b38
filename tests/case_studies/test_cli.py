"""``qdiff case-study``: the list, running a study by name, and clear errors."""

import pytest

from qdiff import cli


def test_list_names_every_study_with_its_docstring_line(capsys):
    assert cli.main(["case-study", "--list"]) == 0
    out = capsys.readouterr().out
    assert "quantum_walk" in out and "Quantum walks: search on the 4x4 torus" in out
    assert "common" not in out


def test_an_unknown_study_is_an_error_naming_it(capsys):
    assert cli.main(["case-study", "no_such_study"]) == 1
    assert "unknown case study 'no_such_study'" in capsys.readouterr().err


def test_a_study_runs_by_name_with_its_flags(tmp_path, monkeypatch, capsys):
    (tmp_path / "tiny.py").write_text(
        '"""A tiny study."""\n'
        "import common\n"
        "def main(argv=None):\n"
        "    args = common.parse_args('tiny', argv=argv)\n"
        "    return common.finish(common.check('x', 1.0, 1.0 + args.seed, 0.5))\n")
    (tmp_path / "common.py").write_text(
        (cli.case_studies_dir() / "common.py").read_text(encoding="utf-8"))
    monkeypatch.setenv("QDIFF_CASE_STUDIES", str(tmp_path))
    assert cli.main(["case-study", "--list"]) == 0
    assert capsys.readouterr().out.strip() == "tiny  A tiny study."
    assert cli.main(["case-study", "tiny", "--out", str(tmp_path / "o")]) == 0
    assert cli.main(["case-study", "tiny", "--seed", "1", "--out", str(tmp_path / "o")]) == 1


def test_a_missing_folder_says_how_to_point_at_one(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("QDIFF_CASE_STUDIES", str(tmp_path / "missing"))
    assert cli.main(["case-study", "--list"]) == 1
    assert "QDIFF_CASE_STUDIES" in capsys.readouterr().err


def test_help_of_a_study_exits_cleanly():
    with pytest.raises(SystemExit) as info:
        cli.main(["case-study", "quantum_walk", "--help"])
    assert info.value.code == 0
