"""Wildcards and dynamic prompts: syntax, files, loops, and (hypothesis) determinism for a
seed and the combinatorial count being the product of the choices."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.engine.jobs.groups import SeedMode, expand_prompts
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.wildcards import (
    WildcardError,
    count_combinations,
    expand_all,
    expand_random,
)

words = st.text(alphabet="abcdefgh ", min_size=1, max_size=6).filter(lambda w: w.strip())
choices = st.lists(st.lists(words, min_size=1, max_size=4, unique=True), min_size=1, max_size=4)


def template_of(groups: list[list[str]]) -> str:
    return " ".join("{" + "|".join(group) + "}" for group in groups)


@settings(max_examples=60, deadline=None)
@given(choices, st.integers(0, 2**32 - 1))
def test_random_expansion_is_deterministic_for_a_seed(groups: list[list[str]], seed: int) -> None:
    template = template_of(groups)
    expanded = expand_random(template, seed)
    assert expanded == expand_random(template, seed)
    assert expanded in expand_all(template, limit=10_000)


@settings(max_examples=60, deadline=None)
@given(choices)
def test_combinatorial_count_is_the_product(groups: list[list[str]]) -> None:
    template = template_of(groups)
    every = expand_all(template, limit=10_000)
    assert len(every) == count_combinations(template) == math.prod(len(g) for g in groups)
    assert len(set(every)) == len(every)  # unique choices give unique prompts


def test_several_of_a_choice_and_their_joiner() -> None:
    assert expand_all("{2$$a|b|c}", limit=10) == ["a, b", "a, c", "b, c"]
    assert expand_all("{2$$ and $$a|b}", limit=10) == ["a and b"]
    assert expand_all("{2$$a|b} {2$$c|d}", limit=10) == ["a, b c, d"]
    picked = expand_random("{2$$a|b|c}", 7)
    assert len(picked.split(", ")) == 2 and len(set(picked.split(", "))) == 2


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "colors").mkdir()
    (tmp_path / "colors" / "warm.txt").write_text("red\n# a comment\n\norange\n")
    (tmp_path / "animal.txt").write_text("cat\n{big|small} dog\n")
    return tmp_path


def test_files_nested_folders_and_choices_inside_lines(folder: Path) -> None:
    every = expand_all("a __colors/warm__ __animal__", folder, limit=10)
    assert every == [
        "a red cat", "a red big dog", "a red small dog",
        "a orange cat", "a orange big dog", "a orange small dog",
    ]  # fmt: skip
    assert expand_random("__animal__", 3, folder) in {"cat", "big dog", "small dog"}


def test_a_missing_file_is_refused_naming_it(folder: Path) -> None:
    with pytest.raises(WildcardError, match=r"__colors/cold__: there is no file .*cold\.txt"):
        expand_random("a __colors/cold__ cat", 1, folder)


@pytest.mark.parametrize("name", ["{outside}/notes", "../notes", "colors/../../notes"])
def test_a_wildcard_is_a_name_in_its_folder_never_a_path(tmp_path: Path, name: str) -> None:
    """`__/tmp/notes__` read /tmp/notes.txt into the stored prompt; now refused, naming it."""
    wildcards = tmp_path / "wildcards"
    (wildcards / "colors").mkdir(parents=True)
    (tmp_path / "notes.txt").write_text("the secret\n")
    name = name.format(outside=tmp_path)
    for expand in (
        lambda: expand_random(f"a __{name}__ cat", 1, wildcards),
        lambda: expand_all(f"a __{name}__ cat", wildcards, limit=10),
        lambda: expand_prompts(GenerationParams(f"a __{name}__"), 2, SeedMode.INCREMENT, wildcards),
    ):
        with pytest.raises(WildcardError) as refused:
            expand()
        assert str(refused.value) == (
            f"wildcard __{name}__ is not a name in the wildcards folder (no absolute path or '..')"
        )


def test_a_wildcard_file_linked_from_outside_the_folder_is_refused(tmp_path: Path) -> None:
    wildcards = tmp_path / "wildcards"
    wildcards.mkdir()
    (tmp_path / "notes.txt").write_text("the secret\n")
    (wildcards / "notes.txt").symlink_to(tmp_path / "notes.txt")
    (wildcards / "hats.txt").write_text("big\n")
    (wildcards / "caps.txt").symlink_to(wildcards / "hats.txt")  # a link inside: fine
    assert expand_random("a __caps__", 1, wildcards) == "a big"
    with pytest.raises(WildcardError, match="wildcard __notes__ links outside the wildcards"):
        expand_random("a __notes__ cat", 1, wildcards)


def test_a_file_that_includes_itself_is_refused_naming_it(folder: Path) -> None:
    (folder / "a.txt").write_text("x __b__\n")
    (folder / "b.txt").write_text("y\n{z|__a__}\n")
    with pytest.raises(
        WildcardError, match=r"a\.txt includes itself \(a\.txt -> b\.txt -> a\.txt\)"
    ):
        expand_random("__a__", 1, folder)


def test_bad_syntax_is_one_sentence() -> None:
    with pytest.raises(WildcardError, match="never closed"):
        expand_random("a {red|blue cat", 1)
    with pytest.raises(WildcardError, match="closes no"):
        expand_random("a red} cat", 1)


def test_a_batch_expands_each_job_with_its_own_seed_and_keeps_the_template(folder: Path) -> None:
    params = GenerationParams("a {red|green|blue|pink} __animal__", seed=100)
    jobs = expand_prompts(params, 4, SeedMode.INCREMENT, folder)
    assert [j.seed for j in jobs] == [100, 101, 102, 103]
    assert all(j.prompt_template == params.prompt for j in jobs)
    assert [j.prompt for j in jobs] == [
        expand_random(params.prompt, s, folder) for s in range(100, 104)
    ]
    every = expand_prompts(params, 1, SeedMode.FIXED, folder, combinatorial=True)
    assert len(every) == 12 and {j.seed for j in every} == {100}
